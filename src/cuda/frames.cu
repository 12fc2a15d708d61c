/* frames.cu — FRAME_STACK (kernels.h): a frame table's stacked
 * observations rebuilt from its frames, with the CPU's own ring arithmetic
 * (base/frames.h), so both give the same columns and the same bytes.
 *
 * Two kernels. The first, one block, takes the columns: given ones clamped
 * in place, or drawn (each thread its share of the transitions, from the
 * counter it read; after a barrier thread 0 moves the counter on, as
 * RANDINT does). The second has a block per transition and half (obs,
 * next_obs): thread 0 walks the stack's entries into shared memory, then
 * the block writes the stack's values, consecutive threads on consecutive
 * values. The ring's size and position are read on the device, so a
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

__global__ void __launch_bounds__(AG__FRAMES_STACK_BLOCK) ag__frames_stack_kernel(ag__frame_stack_args a) {
  ag__pdl_wait();
  __shared__ int64_t src[AG__FRAMES_MAX_STACK];
  const int64_t j = blockIdx.x >> 1;
  const int half = (int)(blockIdx.x & 1);
  if (threadIdx.x == 0) {
    ag__frames_ring g;
    ag__frames_ring_of(&a, &g);
    ag__frames_walk(&g, half ? ag__frames_step(&g, a.cols[j], 1) : a.cols[j], src);
  }
  __syncthreads();
  const int64_t D = (int64_t)a.stack * a.c * a.h * a.w;
  void *out = half ? a.next_obs : a.obs;
  for (int64_t e = threadIdx.x; e < D; e += blockDim.x)
    ag__frames_put(&a, out, j * D + e, ag__frames_pixel(&a, src, e));
}

ag_status ag__cuda_frame_stack(ag__cuda_state *st, const void *args) {
  const ag__frame_stack_args *a = (const ag__frame_stack_args *)args;
  if (a->B > ((int64_t)1 << 30))
    return ag__fail(AG_ERR_UNSUPPORTED, "cuda: frame_stack: %lld transitions in one batch", (long long)a->B);
  cudaError_t e = ag__launch(ag__frames_pick_kernel, 1, AG__FRAMES_PICK_BLOCK, 0, st->stream, *a);
  if (e == cudaSuccess)
    e = ag__launch(ag__frames_stack_kernel, (unsigned)(2 * a->B), AG__FRAMES_STACK_BLOCK, 0, st->stream, *a);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return ag__cuda_fail(e, "cuda: frame_stack kernels");
  }
  return ag__cuda_check_launch("cuda: frame_stack kernels");
}
