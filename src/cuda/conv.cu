/* conv.cu — CONV2D (kernels.h): im2col and cuBLAS.
 *
 * The samples go in chunks of nb (as many as the scratch holds, at most
 * AG__CONV_SCRATCH_MAX bytes of patches): a kernel lays out the chunk's
 * patch matrices A_n [P, Q] (P = Ho*Wo output pixels, Q = C*kh*kw taps,
 * taps in the padding 0) one after the other, and cuBLAS multiplies them
 * as cpu_conv.c does, FP32 (no TF32), within rounding of the reference:
 *   FWD:   Y_n (+)= A_n Wm for the chunk in one strided batched product,
 *          after a kernel has set (or added) the bias;
 *   BWD_X: A'_n = dY_n Wm^T in one strided batched product, then a
 *          kernel sums the patch values back into each pixel (a gather:
 *          no atomics, the same sum at every run);
 *   BWD_W: dW (+)= A^T dY in one product over the chunk: the patches are
 *          laid out stacked, A [nb*P, Q], and a kernel copies the chunk's
 *          dY_n below one another into dY [nb*P, K] after them (dY_n's
 *          rows are not a matrix of one leading dimension where they lie);
 *   BWD_B: one block a filter sums its rows over the batch in a fixed order.
 */
#include "cuda/cuda_internal.h"

#define AG__CONV_BLOCK 256
#define AG__CONV_SCRATCH_MAX ((size_t)64 << 20)

#define AG_CONV_LOOP(e, total)                                                  \
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < (total); \
       e += (int64_t)gridDim.x * blockDim.x)

typedef struct conv_dims {
  ag__conv_dims g;
  int64_t nb; /* the samples a chunk */
} conv_dims;

/* The scratch floats of one sample: its patches (and for BWD_W its dY). */
static size_t per_sample(const ag__conv2d_args *a, const ag__conv_dims *g) {
  return (size_t)g->P * (size_t)(g->Q + (a->mode == AG__CONV_BWD_W ? a->K : 0));
}

static conv_dims dims_of(const ag__conv2d_args *a) {
  conv_dims d;
  d.g = ag__conv_dims_of(a);
  const size_t one = per_sample(a, &d.g) * sizeof(float);
  const int64_t fit = (int64_t)(AG__CONV_SCRATCH_MAX / one);
  d.nb = fit < 1 ? 1 : (fit < a->y.cols ? fit : a->y.cols);
  return d;
}

size_t ag__cuda_conv2d_scratch(const void *args) {
  const ag__conv2d_args *a = (const ag__conv2d_args *)args;
  if (a->mode == AG__CONV_BWD_B) return 0;
  const conv_dims d = dims_of(a);
  return (size_t)d.nb * per_sample(a, &d.g) * sizeof(float);
}

/* The value of x of sample n0 + n under tap q of output pixel p, n < nb:
 * at col[n][q][p] (A_n [P, Q] one after another), or stacked at
 * col[q][n][p] (A [nb*P, Q]). */
__global__ void ag__im2col_kernel(ag__conv2d_args a, ag__conv_dims d, int64_t n0, int64_t nb, int stacked) {
  ag__pdl_wait();
  AG_CONV_LOOP(e, nb * d.Q * d.P) {
    const int64_t p = e % d.P, q = (e / d.P) % d.Q, n = e / (d.P * d.Q);
    const int64_t v = q % a.kw, u = (q / a.kw) % a.kh, c = q / (a.kw * a.kh);
    const int64_t h = (p / d.Wo) * a.stride + u - a.pad, w = (p % d.Wo) * a.stride + v - a.pad;
    a.ws[stacked ? (q * nb + n) * d.P + p : e] =
        h < 0 || h >= a.H || w < 0 || w >= a.W ? 0.0f : a.x.p[(n0 + n) * a.x.ld + (c * a.H + h) * a.W + w];
  }
}

/* dy of samples n0 .. n0+nb-1 stacked: dys[k][n][p] = y[n0 + n][k P + p] (dY [nb*P, K]). */
__global__ void ag__conv_stack_dy_kernel(ag__conv2d_args a, ag__conv_dims d, int64_t n0, int64_t nb,
                                         float *dys) {
  ag__pdl_wait();
  AG_CONV_LOOP(e, nb * a.K * d.P) {
    const int64_t p = e % d.P, n = (e / d.P) % nb, k = e / (d.P * nb);
    dys[e] = a.y.p[(n0 + n) * a.y.ld + k * d.P + p];
  }
}

/* dx of sample n0 + n (+)= the patch values of col taken from each pixel. */
__global__ void ag__col2im_kernel(ag__conv2d_args a, ag__conv_dims d, int64_t n0, int64_t nb) {
  ag__pdl_wait();
  const int64_t HW = a.H * a.W, CHW = a.C * HW;
  AG_CONV_LOOP(e, nb * CHW) {
    const int64_t n = e / CHW, r = e % CHW, c = r / HW, h = (r % HW) / a.W, w = r % a.W;
    const float *col = a.ws + n * d.P * d.Q;
    float sum = 0.0f;
    for (int64_t u = 0; u < a.kh; u++) {
      const int64_t ti = h + a.pad - u; /* = i * stride */
      if (ti < 0 || ti % a.stride || ti / a.stride >= d.Ho) continue;
      for (int64_t v = 0; v < a.kw; v++) {
        const int64_t tj = w + a.pad - v;
        if (tj < 0 || tj % a.stride || tj / a.stride >= d.Wo) continue;
        sum += col[((c * a.kh + u) * a.kw + v) * d.P + (ti / a.stride) * d.Wo + tj / a.stride];
      }
    }
    float *o = &a.x.p[(n0 + n) * a.x.ld + r];
    *o = a.accumulate ? *o + sum : sum;
  }
}

/* y (+)= b[k] over every sample: the forward's start before the products add into it. */
__global__ void ag__conv_bias_kernel(ag__conv2d_args a, ag__conv_dims d) {
  ag__pdl_wait();
  const int64_t rows = a.K * d.P;
  AG_CONV_LOOP(e, a.y.cols * rows) {
    const int64_t n = e / rows, r = e % rows;
    float *o = &a.y.p[n * a.y.ld + r];
    *o = (a.accumulate ? *o : 0.0f) + a.b[r / d.P];
  }
}

/* b[k] (+)= the sum of filter k's rows over the batch: block k, a fixed order. */
__global__ void ag__conv_bwd_b_kernel(ag__conv2d_args a, ag__conv_dims d) {
  ag__pdl_wait();
  __shared__ float part[AG__CONV_BLOCK];
  const int64_t k = blockIdx.x, total = a.y.cols * d.P;
  float sum = 0.0f;
  for (int64_t e = threadIdx.x; e < total; e += blockDim.x)
    sum += a.y.p[(e / d.P) * a.y.ld + k * d.P + e % d.P];
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) a.b[k] = a.accumulate ? a.b[k] + part[0] : part[0];
}

static ag_status sgemm(ag__cuda_state *st, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                       int64_t k, const float *A, int64_t lda, long long sa, const float *B, int64_t ldb,
                       long long sb, float beta, float *C, int64_t ldc, long long sc, int64_t count) {
  const float one = 1.0f;
  cublasStatus_t s = cublasSgemmStridedBatched(st->blas, ta, tb, (int)m, (int)n, (int)k, &one, A, (int)lda,
                                               sa, B, (int)ldb, sb, &beta, C, (int)ldc, sc, (int)count);
  return s == CUBLAS_STATUS_SUCCESS ? AG_OK : ag__cublas_fail(s, "cuda: cublasSgemmStridedBatched (conv2d)");
}

ag_status ag__cuda_conv2d(ag__cuda_state *st, const void *args) {
  const ag__conv2d_args *a = (const ag__conv2d_args *)args;
  const conv_dims cd = dims_of(a);
  const ag__conv_dims d = cd.g;
  const int64_t B = a->y.cols, K = a->K;
  ag_status s = AG_OK;
  if (a->mode == AG__CONV_BWD_B) {
    ag__launch(ag__conv_bwd_b_kernel, dim3((unsigned)K), dim3(AG__CONV_BLOCK), 0, st->stream, *a, d);
    return ag__cuda_check_launch("cuda: conv2d bias gradient kernel");
  }
  float beta = a->accumulate ? 1.0f : 0.0f;
  if (a->mode == AG__CONV_FWD && a->b) {
    ag__launch(ag__conv_bias_kernel, ag__cuda_grid(st, B * K * d.P, AG__CONV_BLOCK), dim3(AG__CONV_BLOCK), 0,
               st->stream, *a, d);
    if ((s = ag__cuda_check_launch("cuda: conv2d bias kernel"))) return s;
    beta = 1.0f;
  }
  const long long PQ = (long long)(d.P * d.Q);
  for (int64_t n0 = 0; n0 < B && !s; n0 += cd.nb) {
    const int64_t nb = B - n0 < cd.nb ? B - n0 : cd.nb;
    const int stacked = a->mode == AG__CONV_BWD_W;
    if (a->mode != AG__CONV_BWD_X) {
      ag__launch(ag__im2col_kernel, ag__cuda_grid(st, nb * PQ, AG__CONV_BLOCK), dim3(AG__CONV_BLOCK), 0,
                 st->stream, *a, d, n0, nb, stacked);
      if ((s = ag__cuda_check_launch("cuda: conv2d im2col kernel"))) return s;
    }
    float *y = a->y.p + n0 * a->y.ld;
    switch (a->mode) {
      case AG__CONV_FWD:
        s = sgemm(st, CUBLAS_OP_N, CUBLAS_OP_N, d.P, K, d.Q, a->ws, d.P, PQ, a->w.p, a->w.ld, 0, beta, y, d.P,
                  (long long)a->y.ld, nb);
        break;
      case AG__CONV_BWD_X:
        s = sgemm(st, CUBLAS_OP_N, CUBLAS_OP_T, d.P, d.Q, K, y, d.P, (long long)a->y.ld, a->w.p, a->w.ld, 0,
                  0.0f, a->ws, d.P, PQ, nb);
        if (!s) {
          ag__launch(ag__col2im_kernel, ag__cuda_grid(st, nb * a->C * a->H * a->W, AG__CONV_BLOCK),
                     dim3(AG__CONV_BLOCK), 0, st->stream, *a, d, n0, nb);
          s = ag__cuda_check_launch("cuda: conv2d col2im kernel");
        }
        break;
      default: { /* BWD_W: dW (+)= A^T dY over the chunk, one product */
        float *dys = a->ws + nb * PQ;
        const int64_t rows = nb * d.P;
        ag__launch(ag__conv_stack_dy_kernel, ag__cuda_grid(st, rows * K, AG__CONV_BLOCK),
                   dim3(AG__CONV_BLOCK), 0, st->stream, *a, d, n0, nb, dys);
        if (!(s = ag__cuda_check_launch("cuda: conv2d dy stacking kernel")))
          s = sgemm(st, CUBLAS_OP_T, CUBLAS_OP_N, d.Q, K, rows, a->ws, rows, 0, dys, rows, 0,
                    n0 > 0 || a->accumulate ? 1.0f : 0.0f, a->w.p, a->w.ld, 0, 1);
        break;
      }
    }
  }
  return s;
}
