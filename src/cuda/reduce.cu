/* reduce.cu — REDUCE (kernels.h): sums and maxima along an axis or over all.
 *
 * One thread per output when the reduced extent is short (the usual RL
 * shapes: a few actions, a batch of a few hundred), one block per output
 * with a shared-memory tree otherwise. No atomics: the result does not
 * depend on scheduling. Ties in an argmax go to the first index, as in the
 * CPU reference.
 */
#include "base/scalar_ops.h"
#include "cuda/cuda_internal.h"

#define AG__RBLOCK 256
#define AG__SHORT 64 /* reduced extents up to this length: one thread per output */

/* Element i of the line o that is being reduced. */
__device__ __forceinline__ float ag_line_at(const ag__reduce_args &a, int64_t o, int64_t i) {
  switch (a.axis) {
    case 0: return ag__mat_at(a.x, i, o);
    case 1: return ag__mat_at(a.x, o, i);
    default: return ag__mat_at(a.x, i % a.x.rows, i / a.x.rows);
  }
}

__device__ __forceinline__ void ag_store(const ag__reduce_args &a, int64_t o, float v, int64_t arg) {
  if (a.out.p) {
    float *p = a.axis == 0 ? &a.out.p[o * a.out.ld] : &a.out.p[o];
    *p = (a.op == AG__RED_SUM && a.accumulate) ? *p + v : v;
  }
  if (a.arg) ag__index_put(a.arg, a.arg_dtype, o, arg);
}

/* Combines (v, i) into (bv, bi) for SUM or MAX (first index on ties). */
__device__ __forceinline__ void ag_combine(int op, float *bv, int64_t *bi, float v, int64_t i) {
  if (op == AG__RED_SUM) {
    *bv += v;
  } else if (v > *bv || (v == *bv && i < *bi)) {
    *bv = v;
    *bi = i;
  }
}

__global__ void ag__reduce_thread_kernel(ag__reduce_args a, int64_t outer, int64_t inner) {
  ag__pdl_wait();
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < outer;
       o += (int64_t)gridDim.x * blockDim.x) {
    float bv = a.op == AG__RED_SUM ? 0.0f : ag_line_at(a, o, 0);
    int64_t bi = 0;
    for (int64_t i = a.op == AG__RED_SUM ? 0 : 1; i < inner; i++)
      ag_combine(a.op, &bv, &bi, ag_line_at(a, o, i), i);
    ag_store(a, o, a.op == AG__RED_SUM ? a.scale * bv : bv, bi);
  }
}

__global__ void ag__reduce_block_kernel(ag__reduce_args a, int64_t outer, int64_t inner) {
  ag__pdl_wait();
  __shared__ float sv[AG__RBLOCK];
  __shared__ int64_t si[AG__RBLOCK];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    float bv = a.op == AG__RED_SUM ? 0.0f : -INFINITY;
    int64_t bi = INT64_MAX;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
      ag_combine(a.op, &bv, &bi, ag_line_at(a, o, i), i);
    sv[threadIdx.x] = bv;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if ((int)threadIdx.x < s) {
        float v = sv[threadIdx.x];
        int64_t i = si[threadIdx.x];
        ag_combine(a.op, &v, &i, sv[threadIdx.x + s], si[threadIdx.x + s]);
        sv[threadIdx.x] = v;
        si[threadIdx.x] = i;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) ag_store(a, o, a.op == AG__RED_SUM ? a.scale * sv[0] : sv[0], si[0]);
    __syncthreads();
  }
}

ag_status ag__cuda_reduce(ag__cuda_state *st, const void *args) {
  const ag__reduce_args *a = (const ag__reduce_args *)args;
  int64_t outer, inner;
  switch (a->axis) {
    case 0:
      outer = a->x.cols;
      inner = a->x.rows;
      break;
    case 1:
      outer = a->x.rows;
      inner = a->x.cols;
      break;
    default:
      outer = 1;
      inner = a->x.rows * a->x.cols;
      break;
  }
  if (inner <= AG__SHORT) {
    ag__launch(ag__reduce_thread_kernel, ag__cuda_grid(st, outer, AG__RBLOCK), AG__RBLOCK, 0, st->stream, *a,
               outer, inner);
  } else {
    int64_t grid = outer < (int64_t)st->sm_count * 8 ? outer : (int64_t)st->sm_count * 8;
    ag__launch(ag__reduce_block_kernel, (unsigned)grid, AG__RBLOCK, 0, st->stream, *a, outer, inner);
  }
  return ag__cuda_check_launch("cuda: reduce kernel");
}
