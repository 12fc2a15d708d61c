/* cpu_blas.h — the CPU backend's matrix product: OpenBLAS's cblas_sgemm,
 * loaded at the backend's first use with its kernels chosen from the
 * processor's feature flags (cpu_blas.c says why it is loaded, not linked).
 *
 * cblas.h is included for its argument types only: nothing of OpenBLAS is
 * linked into the library.
 */
#ifndef AGRL_CPU_BLAS_H
#define AGRL_CPU_BLAS_H

#include <cblas.h>

#include "base/base.h"

/* What the processor can do and the operating system has enabled: CPUID
 * feature bits, and the register states XCR0 says the OS saves. */
enum {
  AG__ISA_AVX = 1u << 0,
  AG__ISA_AVX2 = 1u << 1,
  AG__ISA_FMA = 1u << 2,
  AG__ISA_AVX512F = 1u << 3,
  AG__ISA_AVX512CD = 1u << 4,
  AG__ISA_AVX512BW = 1u << 5,
  AG__ISA_AVX512DQ = 1u << 6,
  AG__ISA_AVX512VL = 1u << 7,
  AG__ISA_OS_YMM = 1u << 8, /* XCR0: SSE and AVX state */
  AG__ISA_OS_ZMM = 1u << 9, /* XCR0: opmask and the upper ZMM state as well */
};
/* This processor's AG__ISA_ bits (0 on other than x86). */
unsigned ag__cpu_isa(void);

/* The kernels to ask OpenBLAS for. core: the OPENBLAS_CORETYPE value to
 * set, or NULL to set none (OpenBLAS decides, or the user's value does);
 * why: the reason, in words for the backend's name. A pure function. */
typedef struct ag__blas_choice {
  const char *core;
  const char *why;
} ag__blas_choice;
/* isa: AG__ISA_ bits; user_core: OPENBLAS_CORETYPE as the process has it
 * (NULL or "" when not set: then agrl chooses). */
ag__blas_choice ag__blas_choose(unsigned isa, const char *user_core);

/* Loads OpenBLAS, once per process (the later calls return the first
 * call's result and message): AGRL_OPENBLAS when set (a file name or a
 * path), else libopenblas.so.0 as the dynamic loader finds it, else the
 * file the build found. Errors: AG_ERR_DEVICE, the library cannot be
 * loaded or lacks cblas_sgemm (the message says which and why). */
ag_status ag__blas_load(void);
/* After a successful load: which kernels OpenBLAS runs and why, e.g.
 * "OpenBLAS Haswell, chosen from AVX2+FMA"; "" before. */
const char *ag__blas_desc(void);

/* cblas_sgemm through the loaded library (loading it if no CPU context
 * has: a failure then aborts, which the public API never reaches, as
 * opening a CPU context fails first). */
void ag__sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n,
               blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb, float beta,
               float *c, blasint ldc);

#endif /* AGRL_CPU_BLAS_H */
