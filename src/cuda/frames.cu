/* frames.cu — FRAME_STACK (kernels.h): a frame table's stacked
 * observations rebuilt from its frames, with the CPU's own ring arithmetic
 * (base/frames.h), so both give the same columns and the same bytes.
 *
 * Two kernels. The first, one block, takes the columns: given ones clamped
 * in place, or drawn (each thread its share of the transitions, from the
 * counter it read; after a barrier thread 0 moves the counter on, as
 * RANDINT does). The second has a block per frame of a stack (transition,
 * half (obs, next_obs), slot): thread 0 walks the stack's entries into
 * shared memory, then the block writes the slot's values, consecutive
 * threads on consecutive values. The ring's size and position are read on the device, so a
 * recorded step replayed after more adds samples the ring as it is then.
 */
#include "base/frames.h"
#include "cuda/cuda_internal.h"

#define AG__FRAMES_PICK_BLOCK 256
#define AG__FRAMES_STACK_BLOCK 256

__global__ void __launch_bounds__(AG__FRAMES_PICK_BLOCK) ag__frames_pick_kernel(ag__frame_stack_args a) {
  ag__pdl_wait();
  ag__frames_ring g;
  ag__frames_ring_of(&a, &g);
  const uint64_t base = a.idx ? 0 : *a.counter;
  for (int64_t j = threadIdx.x; j < a.B; j += blockDim.x)
    a.cols[j] = a.idx ? ag__clamp_index(ag__index_at(a.idx, a.idx_dtype, j), a.capacity)
                      : ag__frames_draw(&g, a.seed, base, j);
  __syncthreads();
  if (!a.idx && threadIdx.x == 0) *a.counter = base + (uint64_t)a.B * AG__FRAMES_TRIES;
}

/* Block b (grid-stride) copies one frame of a stack: slot i = b % stack of
 * half (b / stack) % 2 of transition j = b / (2 stack). Thread 0 walks the
 * stack's entries into shared memory; the block then writes the slot's
 * c*h*w values, consecutive threads on consecutive values, with 32-bit
 * index arithmetic (a frame holds at most 2^31 - 2 bytes). */
__global__ void __launch_bounds__(AG__FRAMES_STACK_BLOCK) ag__frames_stack_kernel(ag__frame_stack_args a) {
  ag__pdl_wait();
  __shared__ int64_t src[AG__FRAMES_MAX_STACK];
  const int64_t blocks = 2 * a.B * a.stack;
  const int32_t hw = (int32_t)(a.h * a.w), c = (int32_t)a.c, plane = c * hw;
  const int64_t entry = (int64_t)plane + 1, D = (int64_t)a.stack * plane;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int i = (int)(b % a.stack);
    const int half = (int)((b / a.stack) & 1);
    const int64_t j = b / (2 * a.stack);
    __syncthreads(); /* the previous slot's readers of src are done */
    if (threadIdx.x == 0) {
      ag__frames_ring g;
      ag__frames_ring_of(&a, &g);
      ag__frames_walk(&g, half ? ag__frames_step(&g, a.cols[j], 1) : a.cols[j], src);
    }
    __syncthreads();
    const uint8_t *f = a.frames + src[i] * entry;
    const int64_t o = j * D + (int64_t)i * plane;
    void *out = half ? a.next_obs : a.obs;
    for (int32_t e = threadIdx.x; e < plane; e += blockDim.x) {
      const int32_t ch = e / hw, p = e - ch * hw;
      ag__frames_put(&a, out, o + e, f[p * c + ch]);
    }
  }
}

ag_status ag__cuda_frame_stack(ag__cuda_state *st, const void *args) {
  const ag__frame_stack_args *a = (const ag__frame_stack_args *)args;
  if (a->B > ((int64_t)1 << 30))
    return ag__fail(AG_ERR_UNSUPPORTED, "cuda: frame_stack: %lld transitions in one batch", (long long)a->B);
  cudaError_t e = ag__launch(ag__frames_pick_kernel, 1, AG__FRAMES_PICK_BLOCK, 0, st->stream, *a);
  if (e == cudaSuccess)
    e = ag__launch(ag__frames_stack_kernel,
                   ag__cuda_grid(st, 2 * a->B * a->stack * AG__FRAMES_STACK_BLOCK, AG__FRAMES_STACK_BLOCK),
                   AG__FRAMES_STACK_BLOCK, 0, st->stream, *a);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return ag__cuda_fail(e, "cuda: frame_stack kernels");
  }
  return ag__cuda_check_launch("cuda: frame_stack kernels");
}
