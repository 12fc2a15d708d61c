/* cpu_fast.h — shared by the fast paths' two files: cpu_fast.c (portable C:
 * the dispatch, helper threads, prefetches, chunked and sorted passes) and
 * cpu_fast_x86.c (the AVX2 / AVX-512 code it calls where the processor has
 * the instructions). Not for the reference (cpu_kernels.c).
 */
#ifndef AGRL_CPU_FAST_H
#define AGRL_CPU_FAST_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/kernels.h"

/* x86-64 with GNU C: function-level target attributes and intrinsics. */
#if defined(__x86_64__) && defined(__GNUC__)
#define AG__CPU_X86 1
#endif

/* ---- gathers ---- */

/* The column a gather reads for index j (clamped, S13). */
static inline int64_t ag__cpu_gather_col(const ag__gather_args *a, int64_t j) {
  return ag__clamp_index(ag__index_at(a->idx, a->idx_dtype, j), a->capacity);
}

/* Asks for every cache line of bytes [p, p + n) to come into the L2
 * cache (a column that does not start on a line boundary spans one line
 * more than n / 64): misses bound for L2 are not held to the few the L1
 * cache can have in flight, so more of them overlap. */
static inline void ag__cpu_prefetch_span(const char *p, size_t n) {
  const char *q = (const char *)((uintptr_t)p & ~(uintptr_t)63), *end = p + n;
  for (; q < end; q += 64) __builtin_prefetch(q, 0, 2);
}

/* ---- the weights of prioritized sampling: r^-nb by a polynomial ----
 * (cpu_fast.c's per_rpow; cpu_fast_x86.c's per_rpow8 takes the same steps) */
static const double ag__cpu_per_lnc[6] = {1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0};
static const double ag__cpu_per_expc[12] = {1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
                                            1.0 / 5040,     1.0 / 720,     1.0 / 120,    1.0 / 24,
                                            1.0 / 6,        0.5,           1.0,          1.0};
#define AG__CPU_PER_LOG2E 1.4426950408889634
#define AG__CPU_PER_LN2 0.6931471805599453
#define AG__CPU_PER_ROUND 6755399441055744.0      /* 1.5 * 2^52: (a + it) - it rounds a to an integer */
#define AG__CPU_PER_SQRT2_FRAC 0x6a09e667f3bcdull /* the fraction bits of sqrt(2) (rounded up) */

/* Whether the batch's weights go by the polynomial: lmin, lmax over the
 * leaves with a weight (n (leaf / root) > 0, as ag__per_weight has it). */
static inline int ag__cpu_per_rpow_ok(double root, double lmin, double lmax) {
  return root > 0.0 && root < INFINITY && lmax < INFINITY && lmax / lmin < 0x1p1000;
}

/* The weights of idx[0 .. B-1] as the portable fast path gives them (the
 * AVX-512 path's, bit for bit; cpu_fast.c). */
void ag__cpu_per_weights(const double *leaves, const int32_t *idx, int64_t B, double root, int64_t size,
                         float beta, float *w);

/* ---- the fused SAC / TD3 update's optimizer steps (cpu_acgrad_fast.c) ---- */

/* One optimizer's constants for this call: ag__adam_elem's arguments, and
 * tau for the target's Polyak step. */
typedef struct ag__cpu_adam_c {
  int sgd;
  float lr, b1, b2, eps, wd, bc1, bc2, coef, tau;
} ag__cpu_adam_c;

/* ---- the vector code (cpu_fast_x86.c); the callers check the processor ---- */
#ifdef AG__CPU_X86
/* Columns [j0, j1) of a gather of f32 columns of 16 to 256 rows, scale 1
 * (AVX-512F), the columns `ahead` past j0 already asked for. */
void ag__cpu_gather_copy_avx512(const ag__gather_args *a, int64_t j0, int64_t j1, int64_t ahead);
/* Draws 2 b0 .. 2 (b0 + nb) - 1 of the stream `seed` scaled to [0, bound)
 * into out: AVX2, nb a multiple of 4; AVX-512F, nb a multiple of 8. */
void ag__cpu_draws_avx2(uint64_t seed, uint64_t b0, int64_t nb, uint32_t bound, uint64_t *out);
void ag__cpu_draws_avx512(uint64_t seed, uint64_t b0, int64_t nb, uint32_t bound, uint64_t *out);
/* v[k] = ag__per_pow(p[k], alpha) for the first 8 floor(n / 8) priorities
 * (alpha neither 0 nor 1; AVX-512F, DQ, VL); returns how many it did. */
int ag__cpu_per_pows_avx512(const float *p, int n, double alpha, double *v);
/* PER_SAMPLE's descents and weights (AVX-512F, DQ, VL); the caller moves
 * the counter. */
void ag__cpu_per_sample_avx512(const ag__per_sample_args *a, double root, uint64_t base);
/* The step of values 0 .. 16 floor(n / 16) - 1 (AVX-512F) or 8 floor(n / 8)
 * - 1 (AVX2, FMA) of p (moments m, v; NULL with sgd) by the gradient g, as
 * ag__adam_elem takes it, and with t the target's t = tau p + (1 - tau) t
 * after it; returns how many it did (the caller does the rest). The same
 * operations in the same order as the portable loop, each rounded once
 * except where FMA fuses a product and a sum. */
int64_t ag__cpu_adam_avx512(const ag__cpu_adam_c *c, int64_t n, const float *g, float *p, float *m, float *v,
                            float *t);
int64_t ag__cpu_adam_avx2(const ag__cpu_adam_c *c, int64_t n, const float *g, float *p, float *m, float *v,
                          float *t);
#endif

#endif /* AGRL_CPU_FAST_H */
