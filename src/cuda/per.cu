/* per.cu — PER_SET, PER_FILL and PER_SAMPLE (kernels.h): the sum tree of
 * prioritized replay on the device. Each is one block: the tree is updated
 * level by level with a barrier between levels (a parent is summed only
 * after all its children are written), and sampling walks the tree with one
 * thread a sample. The tree code is shared with the CPU (core/per_tree.h).
 */
#include "core/per_tree.h"
#include "cuda/cuda_internal.h"

#define AG__PER_BLOCK 256

__device__ __forceinline__ int64_t ag_per_index(const void *idx, ag_dtype dt, int64_t j) {
  return dt == AG_I32 ? (int64_t)((const int32_t *)idx)[j] : ((const int64_t *)idx)[j];
}

/* max for non-negative floats through their bits */
__device__ __forceinline__ void ag_atomic_max_pos(float *addr, float v) {
  atomicMax((int *)addr, __float_as_int(v));
}

__global__ void ag_per_set_kernel(ag__per_set_args a) {
  double *leaves = a.tree + ag__per_offset(a.depth - 1);
  for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) {
    float p = a.prio[j * a.prio_stride];
    p = p > 1e-12f ? p : 1e-12f;
    leaves[ag_per_index(a.idx, a.idx_dtype, j)] = pow((double)p, (double)a.alpha);
    ag_atomic_max_pos(&a.state[0], p);
  }
  __syncthreads();
  int64_t div = 1;
  for (int d = a.depth - 2; d >= 0; d--) {
    div *= AG__PER_FAN;
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x)
      ag__per_recompute(a.tree, d, ag_per_index(a.idx, a.idx_dtype, j) / div);
    __syncthreads();
  }
  if (threadIdx.x == 0) ag__per_recompute_root(a.tree, a.depth);
}

__global__ void ag_per_fill_kernel(ag__per_fill_args a) {
  const double v = pow((double)a.state[0], (double)a.alpha);
  double *leaves = a.tree + ag__per_offset(a.depth - 1);
  for (int64_t i = threadIdx.x; i < a.k; i += blockDim.x) leaves[a.pos + i] = v;
  __syncthreads();
  int64_t lo = a.pos, hi = a.pos + a.k - 1;
  for (int d = a.depth - 2; d >= 0; d--) {
    lo /= AG__PER_FAN;
    hi /= AG__PER_FAN;
    for (int64_t node = lo + threadIdx.x; node <= hi; node += blockDim.x) ag__per_recompute(a.tree, d, node);
    __syncthreads();
  }
  if (threadIdx.x == 0) ag__per_recompute_root(a.tree, a.depth);
}

__global__ void ag_per_sample_kernel(ag__per_sample_args a) {
  __shared__ float red[AG__PER_BLOCK];
  const uint64_t base = *a.counter;
  const double root = a.tree[ag__per_offset(a.depth)];
  const double *leaves = a.tree + ag__per_offset(a.depth - 1);
  const int64_t size = *a.size_dev;
  float wmax = 0.0f;
  for (int64_t j = threadIdx.x; j < a.B; j += blockDim.x) {
    int64_t leaf = ag__per_find(a.tree, a.depth, ag__per_target(a.seed, base + (uint64_t)j, j, a.B, root));
    float w = ag__per_weight(leaves[leaf], root, size, a.beta);
    a.idx[j] = (int32_t)leaf;
    a.w[j] = w;
    wmax = w > wmax ? w : wmax;
  }
  red[threadIdx.x] = wmax;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const float m = red[0];
  for (int64_t j = threadIdx.x; j < a.B; j += blockDim.x) a.w[j] = m > 0.0f ? a.w[j] / m : 0.0f;
  __syncthreads();
  if (threadIdx.x == 0) *a.counter = base + (uint64_t)a.B;
}

ag_status ag__cuda_per_set(ag__cuda_state *st, const void *args) {
  ag_per_set_kernel<<<1, AG__PER_BLOCK, 0, st->stream>>>(*(const ag__per_set_args *)args);
  return ag__cuda_check_launch("cuda: per_set kernel");
}

ag_status ag__cuda_per_fill(ag__cuda_state *st, const void *args) {
  ag_per_fill_kernel<<<1, AG__PER_BLOCK, 0, st->stream>>>(*(const ag__per_fill_args *)args);
  return ag__cuda_check_launch("cuda: per_fill kernel");
}

ag_status ag__cuda_per_sample(ag__cuda_state *st, const void *args) {
  ag_per_sample_kernel<<<1, AG__PER_BLOCK, 0, st->stream>>>(*(const ag__per_sample_args *)args);
  return ag__cuda_check_launch("cuda: per_sample kernel");
}
