/* gather.cu — column gather from a buffer into an f32 tensor (ag_get_rows).
 *
 *   dst [rows, n] f32 = (f32) src [rows, capacity] at columns clamp(idx [n])
 *
 * Indices are clamped on the device (S13), so no read leaves the buffer.
 * Two kernels: a scalar grid-stride loop for any dtype and row count, and a
 * 16-byte-wide one for f32 rows that are a multiple of 4 values.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/cuda_internal.h"

template <typename T>
__device__ __forceinline__ float ag_to_f32(T v) {
  return (float)v;
}
template <>
__device__ __forceinline__ float ag_to_f32<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float ag_to_f32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename I>
__device__ __forceinline__ int64_t ag_clamp_col(const I *idx, int64_t j, int64_t capacity) {
  return ag__clamp_index((int64_t)idx[j], capacity);
}

template <typename T, typename I>
__global__ void ag__gather_kernel(const T *__restrict__ src, int64_t rows, int64_t capacity,
                                  const I *__restrict__ idx, int64_t n, float scale,
                                  float *__restrict__ dst) {
  ag__pdl_wait();
  int64_t total = rows * n;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t j = e / rows, r = e - j * rows;
    int64_t c = ag_clamp_col(idx, j, capacity);
    dst[e] = ag_to_f32(src[c * rows + r]) * scale;
  }
}

/* rows4 = rows / 4; src, dst 16-byte aligned */
template <typename I>
__global__ void ag__gather_f32x4_kernel(const float4 *__restrict__ src, int64_t rows4, int64_t capacity,
                                        const I *__restrict__ idx, int64_t n, float scale,
                                        float4 *__restrict__ dst) {
  ag__pdl_wait();
  int64_t total = rows4 * n;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t j = e / rows4, r = e - j * rows4;
    float4 v = src[ag_clamp_col(idx, j, capacity) * rows4 + r];
    v.x *= scale;
    v.y *= scale;
    v.z *= scale;
    v.w *= scale;
    dst[e] = v;
  }
}

template <typename T, typename I>
static void launch(ag__cuda_state *st, const ag__gather_args *a) {
  const int block = 256;
  unsigned grid = ag__cuda_grid(st, a->rows * a->n, block);
  ag__launch_one(st, ag__gather_kernel<T, I>, grid, block, (const T *)a->src, a->rows, a->capacity,
                 (const I *)a->idx, a->n, a->scale, a->dst);
}

template <typename I>
static void launch_dtype(ag__cuda_state *st, const ag__gather_args *a) {
  switch (a->src_dtype) {
    case AG_F32:
      if (a->rows % 4 == 0 && ((uintptr_t)a->src % 16) == 0 && ((uintptr_t)a->dst % 16) == 0) {
        const int block = 256;
        int64_t rows4 = a->rows / 4;
        unsigned grid = ag__cuda_grid(st, rows4 * a->n, block);
        ag__launch_one(st, ag__gather_f32x4_kernel<I>, grid, block, (const float4 *)a->src, rows4,
                       a->capacity, (const I *)a->idx, a->n, a->scale, (float4 *)a->dst);
      } else {
        launch<float, I>(st, a);
      }
      break;
    case AG_F16: launch<__half, I>(st, a); break;
    case AG_BF16: launch<__nv_bfloat16, I>(st, a); break;
    case AG_U8: launch<uint8_t, I>(st, a); break;
    case AG_I32: launch<int32_t, I>(st, a); break;
    default: break;
  }
}

ag_status ag__cuda_gather(ag__cuda_state *st, const void *args) {
  const ag__gather_args *a = (const ag__gather_args *)args;
  if (a->idx_dtype == AG_I32)
    launch_dtype<int32_t>(st, a);
  else
    launch_dtype<int64_t>(st, a);
  return ag__cuda_check_launch("cuda: gather kernel");
}
