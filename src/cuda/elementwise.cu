/* elementwise.cu — MAP, MAP2, FILL, COPY, PICK and PICK_BWD (kernels.h).
 *
 * One thread per output element in a grid-stride loop; the functions
 * themselves are the shared ones of core/scalar_ops.h, so the CPU reference
 * and these kernels compute the same expressions.
 */
#include "base/scalar_ops.h"
#include "cuda/cuda_internal.h"

#define AG__BLOCK 256

/* Element e of an output of `rows` rows: its (r, c). */
__device__ __forceinline__ void ag_rc(int64_t e, int64_t rows, int64_t *r, int64_t *c) {
  *c = e / rows;
  *r = e - *c * rows;
}

__device__ __forceinline__ void ag_put(ag__mat m, int64_t r, int64_t c, float v, int accumulate) {
  float *o = &m.p[c * m.ld + r];
  *o = accumulate ? *o + v : v;
}

#define AG_GRID_LOOP(e, total)                                                  \
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < (total); \
       e += (int64_t)gridDim.x * blockDim.x)

__global__ void ag__map_kernel(ag__map_args a) {
  ag__pdl_wait();
  AG_GRID_LOOP(e, a.out.rows * a.out.cols) {
    int64_t r, c;
    ag_rc(e, a.out.rows, &r, &c);
    ag_put(a.out, r, c, ag__map_f(a.op, ag__mat_at(a.x, r, c), a.p0, a.p1), a.accumulate);
  }
}

__global__ void ag__map2_kernel(ag__map2_args a) {
  ag__pdl_wait();
  AG_GRID_LOOP(e, a.out.rows * a.out.cols) {
    int64_t r, c;
    ag_rc(e, a.out.rows, &r, &c);
    float v = a.alpha * ag__map2_f(a.op, ag__mat_at(a.a, r, c), ag__mat_at(a.b, r, c), a.p0, a.p1);
    ag_put(a.out, r, c, v, a.accumulate);
  }
}

__global__ void ag__fill_kernel(ag__fill_args a) {
  ag__pdl_wait();
  AG_GRID_LOOP(e, a.out.rows * a.out.cols) {
    int64_t r, c;
    ag_rc(e, a.out.rows, &r, &c);
    a.out.p[c * a.out.ld + r] = a.value;
  }
}

__global__ void ag__copy_acc_kernel(ag__copy_args a) {
  ag__pdl_wait();
  AG_GRID_LOOP(e, a.out.rows * a.out.cols) {
    int64_t r, c;
    ag_rc(e, a.out.rows, &r, &c);
    ag_put(a.out, r, c, a.x.p[c * a.x.ld + r], 1);
  }
}

__global__ void ag__pick_kernel(ag__pick_args a) {
  ag__pdl_wait();
  const int64_t n = a.axis == 0 ? a.x.cols : a.x.rows, limit = a.axis == 0 ? a.x.rows : a.x.cols;
  AG_GRID_LOOP(j, n) {
    int64_t i = ag__pick_index(a.idx, a.idx_dtype, a.idx_stride, j, limit);
    if (a.axis == 0)
      ag_put(a.out, 0, j, a.x.p[j * a.x.ld + i], a.accumulate);
    else
      ag_put(a.out, j, 0, a.x.p[i * a.x.ld + j], a.accumulate);
  }
}

__global__ void ag__pick_bwd_kernel(ag__pick_bwd_args a) {
  ag__pdl_wait();
  AG_GRID_LOOP(e, a.dx.rows * a.dx.cols) {
    int64_t r, c;
    ag_rc(e, a.dx.rows, &r, &c);
    int64_t j = a.axis == 0 ? c : r, pos = a.axis == 0 ? r : c;
    int64_t i = ag__pick_index(a.idx, a.idx_dtype, a.idx_stride, j, a.axis == 0 ? a.dx.rows : a.dx.cols);
    float g = a.axis == 0 ? ag__mat_at(a.g, 0, j) : ag__mat_at(a.g, j, 0);
    ag_put(a.dx, r, c, pos == i ? g : 0.0f, a.accumulate);
  }
}

ag_status ag__cuda_map(ag__cuda_state *st, const void *args) {
  const ag__map_args *a = (const ag__map_args *)args;
  ag__launch(ag__map_kernel, ag__cuda_grid(st, a->out.rows * a->out.cols, AG__BLOCK), AG__BLOCK, 0,
             st->stream, *a);
  return ag__cuda_check_launch("cuda: map kernel");
}

ag_status ag__cuda_map2(ag__cuda_state *st, const void *args) {
  const ag__map2_args *a = (const ag__map2_args *)args;
  ag__launch(ag__map2_kernel, ag__cuda_grid(st, a->out.rows * a->out.cols, AG__BLOCK), AG__BLOCK, 0,
             st->stream, *a);
  return ag__cuda_check_launch("cuda: map2 kernel");
}

ag_status ag__cuda_fill(ag__cuda_state *st, const void *args) {
  const ag__fill_args *a = (const ag__fill_args *)args;
  if (a->value == 0.0f) { /* zero: a memset node */
    cudaError_t e = cudaMemset2DAsync(a->out.p, (size_t)a->out.ld * 4, 0, (size_t)a->out.rows * 4,
                                      (size_t)a->out.cols, st->stream);
    return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, "cuda: fill");
  }
  ag__launch(ag__fill_kernel, ag__cuda_grid(st, a->out.rows * a->out.cols, AG__BLOCK), AG__BLOCK, 0,
             st->stream, *a);
  return ag__cuda_check_launch("cuda: fill kernel");
}

ag_status ag__cuda_copy(ag__cuda_state *st, const void *args) {
  const ag__copy_args *a = (const ag__copy_args *)args;
  if (!a->accumulate) {
    cudaError_t e =
        cudaMemcpy2DAsync(a->out.p, (size_t)a->out.ld * 4, a->x.p, (size_t)a->x.ld * 4,
                          (size_t)a->out.rows * 4, (size_t)a->out.cols, cudaMemcpyDeviceToDevice, st->stream);
    return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, "cuda: copy");
  }
  ag__launch(ag__copy_acc_kernel, ag__cuda_grid(st, a->out.rows * a->out.cols, AG__BLOCK), AG__BLOCK, 0,
             st->stream, *a);
  return ag__cuda_check_launch("cuda: copy kernel");
}

ag_status ag__cuda_pick(ag__cuda_state *st, const void *args) {
  const ag__pick_args *a = (const ag__pick_args *)args;
  ag__launch(ag__pick_kernel, ag__cuda_grid(st, a->axis == 0 ? a->x.cols : a->x.rows, AG__BLOCK), AG__BLOCK,
             0, st->stream, *a);
  return ag__cuda_check_launch("cuda: pick kernel");
}

ag_status ag__cuda_pick_bwd(ag__cuda_state *st, const void *args) {
  const ag__pick_bwd_args *a = (const ag__pick_bwd_args *)args;
  ag__launch(ag__pick_bwd_kernel, ag__cuda_grid(st, a->dx.rows * a->dx.cols, AG__BLOCK), AG__BLOCK, 0,
             st->stream, *a);
  return ag__cuda_check_launch("cuda: pick_bwd kernel");
}
