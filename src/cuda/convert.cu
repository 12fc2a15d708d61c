/* convert.cu — AG__K_CONVERT (a strided copy between dtypes, by the shared
 * rules of base/convert.h) and AG__K_SET_I64. */
#include "base/convert.h"
#include "base/kernels.h"
#include "cuda/cuda_internal.h"

#define AG__CONVERT_BLOCK 256

__global__ void ag__convert_kernel(ag__convert_args a) {
  ag__pdl_wait();
  const int64_t total = a.rows * a.cols;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = e / a.rows, r = e - c * a.rows;
    ag__convert_one(a.dst, a.dst_dtype, c * a.dst_ld + r, a.src, a.src_dtype, c * a.src_ld + r);
  }
}

ag_status ag__cuda_convert(ag__cuda_state *st, const void *args) {
  const ag__convert_args *a = (const ag__convert_args *)args;
  if (a->rows < 1 || a->cols < 1) return AG_OK;
  if (a->src_dtype == a->dst_dtype && a->src_ld == a->rows &&
      a->dst_ld == a->rows) { /* one run: a copy node */
    const size_t bytes = (size_t)(a->rows * a->cols) * ag_dtype_size(a->src_dtype);
    cudaError_t e = cudaMemcpyAsync(a->dst, a->src, bytes, cudaMemcpyDeviceToDevice, st->stream);
    return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, "cuda: convert (copy)");
  }
  /* strided: a kernel (the copy engines are slow on many short rows, such as one field of each column) */
  ag__launch(ag__convert_kernel, ag__cuda_grid(st, a->rows * a->cols, AG__CONVERT_BLOCK), AG__CONVERT_BLOCK,
             0, st->stream, *a);
  return ag__cuda_check_launch("cuda: convert kernel");
}

__global__ void ag__set_i64_kernel(ag__set_i64_args a) {
  ag__pdl_wait();
  if (blockIdx.x == 0 && threadIdx.x == 0) *a.dst = a.value;
}

ag_status ag__cuda_set_i64(ag__cuda_state *st, const void *args) {
  const ag__set_i64_args *a = (const ag__set_i64_args *)args;
  ag__launch(ag__set_i64_kernel, dim3(1), dim3(32), 0, st->stream, *a);
  return ag__cuda_check_launch("cuda: set_i64 kernel");
}
