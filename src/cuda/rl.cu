/* rl.cu — TD_TARGET and LOSS (kernels.h): the fused pieces of a Q-learning
 * update. The TD target is one thread per column; the loss is one block that
 * sums in a fixed order (no atomics, so every replay gives the same bits)
 * and writes the gradient with respect to the prediction on the way.
 */
#include "base/scalar_ops.h"
#include "cuda/cuda_internal.h"

#define AG__TD_BLOCK 128
#define AG__LOSS_BLOCK 256

__global__ void ag__td_target_kernel(ag__td_args a) {
  ag__pdl_wait();
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < a.out.cols;
       j += (int64_t)gridDim.x * blockDim.x) {
    const float *q = &a.q.p[j * a.q.ld];
    float v;
    if (a.idx) {
      v = q[ag__pick_index(a.idx, a.idx_dtype, a.idx_stride, j, a.q.rows)];
    } else {
      v = q[0];
      for (int64_t r = 1; r < a.q.rows; r++) v = q[r] > v ? q[r] : v;
    }
    a.out.p[j * a.out.ld] = ag__mat_at(a.reward, 0, j) + a.gamma * (1.0f - ag__mat_at(a.done, 0, j)) * v;
  }
}

__global__ void ag__loss_kernel(ag__loss_args a) {
  ag__pdl_wait();
  __shared__ float red[AG__LOSS_BLOCK];
  const int64_t n = a.pred.rows * a.pred.cols;
  const float inv = 1.0f / (float)n;
  float s = 0.0f;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    int64_t c = e / a.pred.rows, r = e - c * a.pred.rows;
    float d = ag__mat_at(a.pred, r, c) - ag__mat_at(a.target, r, c);
    s += ag__loss_f(a.kind, d, a.delta);
    if (a.dpred.p) a.dpred.p[c * a.dpred.ld + r] = ag__loss_df(a.kind, d, a.delta) * inv;
  }
  red[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *a.out = red[0] * inv;
}

ag_status ag__cuda_td_target(ag__cuda_state *st, const void *args) {
  const ag__td_args *a = (const ag__td_args *)args;
  ag__launch(ag__td_target_kernel, ag__cuda_grid(st, a->out.cols, AG__TD_BLOCK), AG__TD_BLOCK, 0, st->stream,
             *a);
  return ag__cuda_check_launch("cuda: td_target kernel");
}

ag_status ag__cuda_loss(ag__cuda_state *st, const void *args) {
  ag__launch(ag__loss_kernel, 1, AG__LOSS_BLOCK, 0, st->stream, *(const ag__loss_args *)args);
  return ag__cuda_check_launch("cuda: loss kernel");
}
