/* gemm.cu — GEMM (kernels.h) through cuBLAS, on the context's stream.
 * FP32 arithmetic (no TF32), so results stay within rounding of the CPU. */
#include "cuda/cuda_internal.h"

ag_status ag__cuda_gemm(ag__cuda_state *st, const void *args) {
  const ag__gemm_args *a = (const ag__gemm_args *)args;
  cublasStatus_t s = cublasSgemm(
      st->blas, a->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, a->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, (int)a->m,
      (int)a->n, (int)a->k, &a->alpha, a->a, (int)a->lda, a->b, (int)a->ldb, &a->beta, a->c, (int)a->ldc);
  return s == CUBLAS_STATUS_SUCCESS ? AG_OK : ag__cublas_fail(s, "cuda: cublasSgemm");
}
