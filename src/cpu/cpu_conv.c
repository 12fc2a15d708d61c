/* cpu_conv.c — the fast path of AG__K_CONV2D: im2col and a CBLAS product
 * per sample.
 *
 * A sample's patches are laid out as a matrix A [Ho*Wo, C*kh*kw] in the
 * scratch (column q = tap (c, u, v), row p = output pixel (i, j); taps in
 * the padding hold 0). With the filters Wm = w [C*kh*kw, K] and the
 * sample's output viewed as Y [Ho*Wo, K] (its column k is filter k's
 * image, which is how the output column is laid out), the modes are
 *   FWD:   Y (+)= A Wm, after Y's column k is set to (or added) b[k];
 *   BWD_X: A' = dY Wm^T, then each patch value added back to the pixel it
 *          came from (col2im);
 *   BWD_W: dW (+)= sum over the samples of A^T dY.
 * BWD_B is the reference's (a sum over the output). The sums are the
 * reference's in another order and in float: within rounding of it,
 * which tests/test_kernels.c checks. No threads of its own: OpenBLAS
 * splits each product.
 */
#include <string.h>

#include "base/base.h"
#include "base/kernels.h"
#include "cpu/cpu_blas.h"
#include "cpu/cpu_internal.h"

size_t ag__cpu_conv2d_scratch(const void *args) {
  const ag__conv2d_args *a = args;
  if (a->mode == AG__CONV_BWD_B) return 0;
  const ag__conv_dims d = ag__conv_dims_of(a);
  return (size_t)d.P * (size_t)d.Q * sizeof(float);
}

/* Patches of one sample x (C*H*W floats) into col [P, Q] (back = 0), or
 * col's values added back onto x (back = 1). */
static void patches(const ag__conv2d_args *a, const ag__conv_dims *d, float *x, float *col, int back) {
  const int64_t s = a->stride, H = a->H, W = a->W;
  for (int64_t c = 0; c < a->C; c++)
    for (int64_t u = 0; u < a->kh; u++)
      for (int64_t v = 0; v < a->kw; v++) {
        float *dst = col + ((c * a->kh + u) * a->kw + v) * d->P;
        float *plane = x + c * H * W;
        /* output columns j whose tap column j*s + v - pad is inside the image: j0 .. j1-1 */
        const int64_t last = W - 1 + a->pad - v; /* j*s <= last */
        int64_t j0 = a->pad > v ? (a->pad - v + s - 1) / s : 0, j1 = last < 0 ? 0 : last / s + 1;
        if (j1 > d->Wo) j1 = d->Wo;
        if (j0 > j1) j0 = j1;
        for (int64_t i = 0; i < d->Ho; i++) {
          float *row = dst + i * d->Wo;
          const int64_t h = i * s + u - a->pad;
          if (h < 0 || h >= H) {
            if (!back) memset(row, 0, (size_t)d->Wo * sizeof(float));
            continue;
          }
          float *src = plane + h * W; /* tap column j*s + v - pad of row h */
          const int64_t off = v - a->pad;
          if (back) {
            for (int64_t j = j0; j < j1; j++) src[j * s + off] += row[j];
          } else {
            for (int64_t j = 0; j < j0; j++) row[j] = 0.0f;
            if (s == 1)
              memcpy(row + j0, src + j0 + off, (size_t)(j1 - j0) * sizeof(float));
            else
              for (int64_t j = j0; j < j1; j++) row[j] = src[j * s + off];
            for (int64_t j = j1; j < d->Wo; j++) row[j] = 0.0f;
          }
        }
      }
}

static void gemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                 int64_t ldc) {
  ag__sgemm(CblasColMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, 1.0f, A, (blasint)lda, B, (blasint)ldb,
            beta, C, (blasint)ldc);
}

ag_status ag__cpu_fast_conv2d(const void *args) {
  const ag__conv2d_args *a = args;
  if (a->mode == AG__CONV_BWD_B || !a->ws) return ag__cpu_ref_kernels[AG__K_CONV2D](args);
  const ag__conv_dims d = ag__conv_dims_of(a);
  const int64_t B = a->y.cols, K = a->K;
  float *col = a->ws;
  for (int64_t n = 0; n < B; n++) {
    float *x = a->x.p + n * a->x.ld, *y = a->y.p + n * a->y.ld;
    switch (a->mode) {
      case AG__CONV_FWD: {
        float beta = a->accumulate ? 1.0f : 0.0f;
        if (a->b) {
          for (int64_t k = 0; k < K; k++)
            for (int64_t p = 0; p < d.P; p++)
              y[k * d.P + p] = (a->accumulate ? y[k * d.P + p] : 0.0f) + a->b[k];
          beta = 1.0f;
        }
        patches(a, &d, x, col, 0);
        gemm(CblasNoTrans, CblasNoTrans, d.P, K, d.Q, col, d.P, a->w.p, a->w.ld, beta, y, d.P);
        break;
      }
      case AG__CONV_BWD_X:
        gemm(CblasNoTrans, CblasTrans, d.P, d.Q, K, y, d.P, a->w.p, a->w.ld, 0.0f, col, d.P);
        if (!a->accumulate) memset(x, 0, (size_t)(a->C * a->H * a->W) * sizeof(float));
        patches(a, &d, x, col, 1);
        break;
      default: /* BWD_W */
        patches(a, &d, x, col, 0);
        gemm(CblasTrans, CblasNoTrans, d.Q, K, d.P, col, d.P, y, d.P, n > 0 || a->accumulate ? 1.0f : 0.0f,
             a->w.p, a->w.ld);
        break;
    }
  }
  return AG_OK;
}
