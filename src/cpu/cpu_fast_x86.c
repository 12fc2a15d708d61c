/* cpu_fast_x86.c — the AVX2 / AVX-512 code of the CPU fast paths
 * (cpu_fast.c calls it after checking the processor and
 * ag__cpu_vector_paths). Each function gives the bits of the portable code
 * it stands in for, which cpu_fast.c also has: column copies, Philox
 * draws, ag__per_pow, the sum-tree descent and the weights' polynomial;
 * the fused update's optimizer steps are ag__adam_elem's operations in
 * its order, with FMA where cpu_fast.h says (cpu_acgrad_fast.c).
 * Compiled on x86-64 with GNU C only; each function carries the target of
 * its instructions, so the file builds without -march=native too.
 */
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_fast.h"

#ifdef AG__CPU_X86
#include <immintrin.h>

#include "base/kernels.h"
#include "base/per_tree.h"
#include "base/philox.h"

/* ---- GATHER ---- */

/* n >= 16 floats from s to d: 16 a vector, the last 16 overlapping the
 * ones before (no masked stores, slow on some processors). */
__attribute__((target("avx512f"))) static inline void copy_f32_avx512(float *d, const float *s, int64_t n) {
  const __m512 last = _mm512_loadu_ps(s + n - 16);
  for (int64_t r = 0; r + 16 < n; r += 16) _mm512_storeu_ps(d + r, _mm512_loadu_ps(s + r));
  _mm512_storeu_ps(d + n - 16, last);
}

__attribute__((target("avx512f"))) void ag__cpu_gather_copy_avx512(const ag__gather_args *a, int64_t j0,
                                                                   int64_t j1, int64_t ahead) {
  const size_t col_bytes = (size_t)a->rows * sizeof(float);
  for (int64_t j = j0; j < j1; j++) {
    if (j + ahead < j1)
      ag__cpu_prefetch_span((const char *)a->src + (size_t)ag__cpu_gather_col(a, j + ahead) * col_bytes,
                            col_bytes);
    const size_t base = (size_t)ag__cpu_gather_col(a, j) * (size_t)a->rows;
    copy_f32_avx512(a->dst + j * a->rows, (const float *)a->src + base, a->rows);
  }
}

/* ---- RANDINT ---- */

/* Draws 2 b0 .. 2 (b0 + nb) - 1 of the stream `seed`, scaled to [0, bound)
 * (bound < 2^32) as ag__scale_u64 scales them, into out in draw order:
 * four Philox blocks a vector with AVX2's 32 x 32 -> 64-bit multiplies
 * (nb a multiple of 4). A draw is x = (hi << 32) | lo of two words of its
 * block, and floor(x bound / 2^64) = (hi bound + (lo bound >> 32)) >> 32
 * exactly: the bits below, < 2^-32, cannot carry into the integer part. */
__attribute__((target("avx2"))) void ag__cpu_draws_avx2(uint64_t seed, uint64_t b0, int64_t nb,
                                                        uint32_t bound, uint64_t *out) {
  const __m256i m0 = _mm256_set1_epi64x(AG__PHILOX_M0), m1 = _mm256_set1_epi64x(AG__PHILOX_M1);
  const __m256i lo = _mm256_set1_epi64x(0xFFFFFFFFu), bd = _mm256_set1_epi64x(bound);
  __m256i key0[10], key1[10];
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++, k0 += AG__PHILOX_W0, k1 += AG__PHILOX_W1) /* ag__philox4x32_10's rounds */
    key0[r] = _mm256_set1_epi64x(k0), key1[r] = _mm256_set1_epi64x(k1);
  for (int64_t j = 0; j + 4 <= nb; j += 4) {
    const uint64_t b = b0 + (uint64_t)j; /* the counter's words: lanes hold a 32-bit value each */
    __m256i c0 = _mm256_and_si256(
        _mm256_set_epi64x((long long)(b + 3), (long long)(b + 2), (long long)(b + 1), (long long)b), lo);
    __m256i c1 = _mm256_set_epi64x((long long)((b + 3) >> 32), (long long)((b + 2) >> 32),
                                   (long long)((b + 1) >> 32), (long long)(b >> 32));
    __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
    for (int r = 0; r < 10; r++) {
      const __m256i p0 = _mm256_mul_epu32(m0, c0), p1 = _mm256_mul_epu32(m1, c2);
      c0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1), key0[r]);
      c1 = _mm256_and_si256(p1, lo);
      c2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3), key1[r]);
      c3 = _mm256_and_si256(p0, lo);
    }
    /* draw 2 b: words (c1, c0); draw 2 b + 1: words (c3, c2) */
    const __m256i even = _mm256_srli_epi64(
        _mm256_add_epi64(_mm256_mul_epu32(c1, bd), _mm256_srli_epi64(_mm256_mul_epu32(c0, bd), 32)), 32);
    const __m256i odd = _mm256_srli_epi64(
        _mm256_add_epi64(_mm256_mul_epu32(c3, bd), _mm256_srli_epi64(_mm256_mul_epu32(c2, bd), 32)), 32);
    uint64_t e[4], o[4];
    _mm256_storeu_si256((__m256i *)e, even), _mm256_storeu_si256((__m256i *)o, odd);
    for (int l = 0; l < 4; l++) out[2 * (j + l)] = e[l], out[2 * (j + l) + 1] = o[l];
  }
}

/* ag__philox4x32_10 of blocks b0 .. b0 + 7 (a 64-bit lane each), its four
 * words in c[0 .. 3] (each in the low half of a lane): draw 2 b is words
 * (c[1], c[0]), draw 2 b + 1 words (c[3], c[2]). */
__attribute__((target("avx512f"))) static inline void philox8(uint64_t seed, uint64_t b0, __m512i c[4]) {
  const __m512i m0 = _mm512_set1_epi64(AG__PHILOX_M0), m1 = _mm512_set1_epi64(AG__PHILOX_M1);
  const __m512i lo = _mm512_set1_epi64(0xFFFFFFFFu);
  const __m512i b =
      _mm512_add_epi64(_mm512_set1_epi64((long long)b0), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
  __m512i c0 = _mm512_and_si512(b, lo), c1 = _mm512_srli_epi64(b, 32), c2 = _mm512_setzero_si512(), c3 = c2;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++, k0 += AG__PHILOX_W0, k1 += AG__PHILOX_W1) { /* the rounds */
    const __m512i q0 = _mm512_mul_epu32(m0, c0), q1 = _mm512_mul_epu32(m1, c2);
    c0 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(q1, 32), c1), _mm512_set1_epi64(k0));
    c1 = _mm512_and_si512(q1, lo);
    c2 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(q0, 32), c3), _mm512_set1_epi64(k1));
    c3 = _mm512_and_si512(q0, lo);
  }
  c[0] = c0, c[1] = c1, c[2] = c2, c[3] = c3;
}

/* ag__cpu_draws_avx2's draws for 8 blocks a vector (nb a multiple of 8). */
__attribute__((target("avx512f"))) void ag__cpu_draws_avx512(uint64_t seed, uint64_t b0, int64_t nb,
                                                             uint32_t bound, uint64_t *out) {
  const __m512i bd = _mm512_set1_epi64(bound);
  const __m512i p0 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
                p1 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  for (int64_t j = 0; j + 8 <= nb; j += 8) {
    __m512i c[4];
    philox8(seed, b0 + (uint64_t)j, c);
    const __m512i even = _mm512_srli_epi64(
        _mm512_add_epi64(_mm512_mul_epu32(c[1], bd), _mm512_srli_epi64(_mm512_mul_epu32(c[0], bd), 32)), 32);
    const __m512i odd = _mm512_srli_epi64(
        _mm512_add_epi64(_mm512_mul_epu32(c[3], bd), _mm512_srli_epi64(_mm512_mul_epu32(c[2], bd), 32)), 32);
    _mm512_storeu_si512(out + 2 * j, _mm512_permutex2var_epi64(even, p0, odd));
    _mm512_storeu_si512(out + 2 * j + 8, _mm512_permutex2var_epi64(even, p1, odd));
  }
}

/* ---- PER_SET ---- */

#define PER_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl")))

/* ag__per_pow of 8 priorities (alpha neither 0 nor 1), the same steps in
 * the same order (fma where it has fma, the reciprocal's seed by a float
 * division), so the leaves are its bits on either path. */
PER_AVX512 static void per_pow8(const float *p, double alpha, double *out) {
  const __m256 pf = _mm256_loadu_ps(p);
  const __m512d pd = _mm512_cvtps_pd(pf), one = _mm512_set1_pd(1.0);
  const __m512i fb = _mm512_cvtepu32_epi64(_mm256_castps_si256(pf));
  __m512i e = _mm512_sub_epi64(_mm512_srli_epi64(fb, 23), _mm512_set1_epi64(127));
  const __m512i frac = _mm512_and_si512(fb, _mm512_set1_epi64(0x7fffff));
  __m512i mb = _mm512_or_si512(_mm512_slli_epi64(frac, 29), _mm512_set1_epi64((long long)1023 << 52));
  const __mmask8 big = _mm512_cmpgt_epi64_mask(frac, _mm512_set1_epi64(0x3504f3));
  mb = _mm512_mask_sub_epi64(mb, big, mb, _mm512_set1_epi64((long long)1 << 52));
  e = _mm512_mask_add_epi64(e, big, e, _mm512_set1_epi64(1));
  const __m512d m = _mm512_castsi512_pd(mb), num = _mm512_sub_pd(m, one), den = _mm512_add_pd(m, one);
  __m512d y = _mm512_cvtps_pd(_mm256_div_ps(_mm256_set1_ps(1.0f), _mm512_cvtpd_ps(den)));
  const __m512d err = _mm512_fnmadd_pd(den, y, one);
  y = _mm512_fmadd_pd(y, _mm512_fmadd_pd(err, err, err), y);
  const __m512d s0 = _mm512_mul_pd(num, y), s = _mm512_fmadd_pd(_mm512_fnmadd_pd(den, s0, num), y, s0);
  const __m512d z = _mm512_mul_pd(s, s), z2 = _mm512_mul_pd(z, z), z4 = _mm512_mul_pd(z2, z2),
                z8 = _mm512_mul_pd(z4, z4);
#define PP_FMA(c1, v, c0) _mm512_fmadd_pd(_mm512_set1_pd(c1), v, _mm512_set1_pd(c0))
  const __m512d r0 = PP_FMA(2.0 / 5, z, 2.0 / 3), r1 = PP_FMA(2.0 / 9, z, 2.0 / 7),
                r2 = PP_FMA(2.0 / 13, z, 2.0 / 11), r3 = PP_FMA(2.0 / 17, z, 2.0 / 15),
                r4 = PP_FMA(2.0 / 21, z, 2.0 / 19);
  const __m512d R = _mm512_add_pd(
      _mm512_fmadd_pd(_mm512_fmadd_pd(r3, z2, r2), z4, _mm512_fmadd_pd(r1, z2, r0)), _mm512_mul_pd(r4, z8));
  const __m512d lnm = _mm512_fmadd_pd(_mm512_mul_pd(s, z), R, _mm512_mul_pd(_mm512_set1_pd(2.0), s));
  const __m512d a = _mm512_set1_pd(alpha), ea = _mm512_mul_pd(a, _mm512_cvtepi64_pd(e));
  const __m512d k = _mm512_roundscale_pd(ea, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                r = _mm512_sub_pd(ea, k);
  const __m512d x = _mm512_fmadd_pd(a, lnm,
                                    _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.62e42fefa39efp-1),
                                                    _mm512_mul_pd(r, _mm512_set1_pd(0x1.abc9e3b39803fp-56))));
  const __m512d x2 = _mm512_mul_pd(x, x), x4 = _mm512_mul_pd(x2, x2), x8 = _mm512_mul_pd(x4, x4);
  const __m512d q0 = PP_FMA(1.0 / 6, x, 1.0 / 2), q1 = PP_FMA(1.0 / 120, x, 1.0 / 24),
                q2 = PP_FMA(1.0 / 5040, x, 1.0 / 720), q3 = PP_FMA(1.0 / 362880, x, 1.0 / 40320),
                q4 = PP_FMA(1.0 / 39916800, x, 1.0 / 3628800),
                q5 = PP_FMA(1.0 / 6227020800.0, x, 1.0 / 479001600),
                q6 = PP_FMA(1.0 / 1307674368000.0, x, 1.0 / 87178291200.0),
                q7 = _mm512_set1_pd(1.0 / 20922789888000.0);
#undef PP_FMA
  const __m512d Q =
      _mm512_fmadd_pd(_mm512_fmadd_pd(_mm512_fmadd_pd(q7, x2, q6), x4, _mm512_fmadd_pd(q5, x2, q4)), x8,
                      _mm512_fmadd_pd(_mm512_fmadd_pd(q3, x2, q2), x4, _mm512_fmadd_pd(q1, x2, q0)));
  const __m512d ex = _mm512_add_pd(one, _mm512_fmadd_pd(x2, Q, x));
  const __m512i kb = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtpd_epi64(k), _mm512_set1_epi64(1023)), 52);
  const __m512d v = _mm512_mul_pd(ex, _mm512_castsi512_pd(kb));
  const __mmask8 finite = _mm512_cmp_pd_mask(pd, _mm512_set1_pd(INFINITY), _CMP_LT_OQ);
  _mm512_storeu_pd(out, _mm512_mask_mov_pd(pd, finite, v));
}

PER_AVX512 int ag__cpu_per_pows_avx512(const float *p, int n, double alpha, double *v) {
  int k = 0;
  for (; k + 8 <= n; k += 8) per_pow8(p + k, alpha, v + k);
  return k;
}

/* ---- PER_SAMPLE ---- */

/* The descents, 8 a vector (lane l: sample l), PER_CHUNK samples at once:
 * each level for all of them before the next, whose lines are asked for as
 * soon as the nodes are known. A level's 16 children of 8 lanes are two
 * 8 x 8 transposes of plain loads (gathers were twice as slow). */
enum { PER_CHUNK = 128 };

/* The 8 x 8 doubles r[l][c] as c[c][l]. */
PER_AVX512 static inline void per_transpose8(const __m512d r[8], __m512d c[8]) {
  const __m512i i0 = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13),
                i1 = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  __m512d t[8], s[8];
  for (int k = 0; k < 4; k++) /* t[2k]: children 0, 2, 4, 6 of rows 2k, 2k + 1; t[2k + 1]: 1, 3, 5, 7 */
    t[2 * k] = _mm512_unpacklo_pd(r[2 * k], r[2 * k + 1]),
          t[2 * k + 1] = _mm512_unpackhi_pd(r[2 * k], r[2 * k + 1]);
  for (int k = 0; k < 2; k++) { /* rows 4k .. 4k + 3 of children (0 | 4), (2 | 6), (1 | 5), (3 | 7) */
    s[4 * k] = _mm512_permutex2var_pd(t[4 * k], i0, t[4 * k + 2]);
    s[4 * k + 1] = _mm512_permutex2var_pd(t[4 * k], i1, t[4 * k + 2]);
    s[4 * k + 2] = _mm512_permutex2var_pd(t[4 * k + 1], i0, t[4 * k + 3]);
    s[4 * k + 3] = _mm512_permutex2var_pd(t[4 * k + 1], i1, t[4 * k + 3]);
  }
  c[0] = _mm512_shuffle_f64x2(s[0], s[4], 0x44), c[4] = _mm512_shuffle_f64x2(s[0], s[4], 0xEE);
  c[2] = _mm512_shuffle_f64x2(s[1], s[5], 0x44), c[6] = _mm512_shuffle_f64x2(s[1], s[5], 0xEE);
  c[1] = _mm512_shuffle_f64x2(s[2], s[6], 0x44), c[5] = _mm512_shuffle_f64x2(s[2], s[6], 0xEE);
  c[3] = _mm512_shuffle_f64x2(s[3], s[7], 0x44), c[7] = _mm512_shuffle_f64x2(s[3], s[7], 0xEE);
}

/* ag__per_step for 8 lanes, x[c] child c of each: v goes down by every
 * positive child (v - x where x > 0, as the step subtracts them while it has
 * no pick; what it subtracts after the pick is not used); the pick is the
 * first positive c with v < x, its remainder v before c; with none, the last
 * positive child (0 when there is none) and v after all. */
PER_AVX512 static inline __m512i per_step8(const __m512d x[16], __m512d *u) {
  const __m512d zero = _mm512_setzero_pd();
  __m512d v = *u, rem = zero;
  __m512i pick = _mm512_setzero_si512(), last = _mm512_setzero_si512();
  __mmask8 done = 0;
  for (int c = 0; c < AG__PER_FAN; c++) {
    const __mmask8 pos = _mm512_cmp_pd_mask(x[c], zero, _CMP_GT_OQ);
    const __mmask8 lt = _mm512_mask_cmp_pd_mask(pos, v, x[c], _CMP_LT_OQ), hit = lt & (__mmask8)~done;
    done |= lt;
    rem = _mm512_mask_mov_pd(rem, hit, v);
    pick = _mm512_mask_mov_epi64(pick, hit, _mm512_set1_epi64(c));
    last = _mm512_mask_mov_epi64(last, pos, _mm512_set1_epi64(c));
    v = _mm512_mask_sub_pd(v, pos, v, x[c]);
  }
  *u = _mm512_mask_mov_pd(v, done, rem);
  return _mm512_mask_mov_epi64(last, done, pick);
}

/* u[k] = ag__per_target(seed, first + k, j0 + k, B, root) for k < 8 nv
 * (nv <= PER_CHUNK / 8): eight Philox blocks a vector (philox8), both
 * halves of each, in draw order. */
PER_AVX512 static void per_targets8(uint64_t seed, uint64_t first, int64_t j0, int nv, int64_t B, double root,
                                    double *u) {
  uint64_t dr[PER_CHUNK + 16] __attribute__((aligned(64)));
  const uint64_t b0 = first >> 1;
  const int nb = (int)(((first + 8 * (uint64_t)nv - 1) >> 1) - b0) + 1;
  const __m512i io = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i p0 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
                p1 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  for (int i = 0; i < nb; i += 8) {
    __m512i c[4];
    philox8(seed, b0 + (uint64_t)i, c);
    /* draw 2 b: words (c1, c0); draw 2 b + 1: words (c3, c2) */
    const __m512i h0 = _mm512_or_si512(_mm512_slli_epi64(c[1], 32), c[0]);
    const __m512i h1 = _mm512_or_si512(_mm512_slli_epi64(c[3], 32), c[2]);
    _mm512_store_si512(dr + 2 * i, _mm512_permutex2var_epi64(h0, p0, h1));
    _mm512_store_si512(dr + 2 * i + 8, _mm512_permutex2var_epi64(h0, p1, h1));
  }
  const uint64_t *d = dr + (first & 1);
  const __m512d bd = _mm512_set1_pd((double)B), rt = _mm512_set1_pd(root);
  const __m512d sc = _mm512_set1_pd(1.0 / 9007199254740992.0);
  for (int q = 0; q < nv; q++) {
    const __m512d v =
        _mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(_mm512_loadu_si512(d + 8 * q), 11)), sc);
    const __m512d jd = _mm512_cvtepi64_pd(_mm512_add_epi64(_mm512_set1_epi64(j0 + 8 * q), io));
    _mm512_store_pd(u + 8 * q, _mm512_mul_pd(_mm512_div_pd(_mm512_add_pd(jd, v), bd), rt));
  }
}

/* cpu_fast.c's per_rpow, 8 lanes, step for step. */
PER_AVX512 static inline __m512d per_rpow8(__m512d r, __m512d nb) {
  const __m512i rb = _mm512_castpd_si512(r),
                frac = _mm512_and_si512(rb, _mm512_set1_epi64(0xfffffffffffffll));
  const __mmask8 big = _mm512_cmpge_epu64_mask(frac, _mm512_set1_epi64((long long)AG__CPU_PER_SQRT2_FRAC));
  const __m512i e0 = _mm512_sub_epi64(_mm512_srli_epi64(rb, 52), _mm512_set1_epi64(1023));
  const __m512i m0 = _mm512_or_si512(frac, _mm512_set1_epi64(0x3ff0000000000000ll));
  const __m512i e = _mm512_mask_add_epi64(e0, big, e0, _mm512_set1_epi64(1));
  const __m512i mb = _mm512_mask_sub_epi64(m0, big, m0, _mm512_set1_epi64(1ll << 52));
  const __m512d m = _mm512_castsi512_pd(mb), d1 = _mm512_set1_pd(1.0);
  const __m512d s = _mm512_div_pd(_mm512_sub_pd(m, d1), _mm512_add_pd(m, d1)), z = _mm512_mul_pd(s, s);
  __m512d p = _mm512_set1_pd(1.0 / 13);
  for (int i = 0; i < 6; i++) p = _mm512_add_pd(_mm512_mul_pd(z, p), _mm512_set1_pd(ag__cpu_per_lnc[i]));
  const __m512d l2m = _mm512_mul_pd(_mm512_mul_pd(_mm512_add_pd(s, s), p), _mm512_set1_pd(AG__CPU_PER_LOG2E));
  const __m512d a = _mm512_mul_pd(_mm512_sub_pd(_mm512_setzero_pd(), nb), _mm512_cvtepi64_pd(e));
  const __m512d rnd = _mm512_set1_pd(AG__CPU_PER_ROUND), k = _mm512_sub_pd(_mm512_add_pd(a, rnd), rnd);
  const __m512d g = _mm512_mul_pd(_mm512_sub_pd(_mm512_sub_pd(a, k), _mm512_mul_pd(nb, l2m)),
                                  _mm512_set1_pd(AG__CPU_PER_LN2));
  __m512d ex = _mm512_set1_pd(1.0 / 479001600);
  for (int i = 0; i < 12; i++) ex = _mm512_add_pd(_mm512_mul_pd(ex, g), _mm512_set1_pd(ag__cpu_per_expc[i]));
  const __m512i kb = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvttpd_epi64(k), _mm512_set1_epi64(1023)), 52);
  return _mm512_mul_pd(ex, _mm512_castsi512_pd(kb));
}

/* ag__cpu_per_weights, 8 samples a vector. */
PER_AVX512 static void per_weights8(const double *leaves, const int32_t *idx, int64_t B, double root,
                                    int64_t size, float beta, float *w) {
  const __m512d n = _mm512_set1_pd((double)(size > 0 ? size : 1)), rt = _mm512_set1_pd(root);
  const __m512d zero = _mm512_setzero_pd();
  __m512d mn = _mm512_set1_pd(INFINITY), mx = zero;
  for (int64_t j = 0; j < B; j += 8) {
    const __mmask8 t = B - j >= 8 ? 0xff : (__mmask8)((1u << (B - j)) - 1);
    const __m512d l = _mm512_mask_i32gather_pd(zero, t, _mm256_maskz_loadu_epi32(t, idx + j), leaves, 8);
    const __mmask8 ok = _mm512_mask_cmp_pd_mask(t, _mm512_mul_pd(n, _mm512_div_pd(l, rt)), zero, _CMP_GT_OQ);
    mn = _mm512_mask_min_pd(mn, ok, mn, l);
    mx = _mm512_mask_max_pd(mx, ok, mx, l);
  }
  const double lmin = _mm512_reduce_min_pd(mn), lmax = _mm512_reduce_max_pd(mx);
  if (!ag__cpu_per_rpow_ok(root, lmin, lmax)) {
    ag__cpu_per_weights(leaves, idx, B, root, size, beta, w);
    return;
  }
  const __m512d lm = _mm512_set1_pd(lmin), nb = _mm512_set1_pd((double)beta), d1 = _mm512_set1_pd(1.0);
  for (int64_t j = 0; j < B; j += 8) {
    const __mmask8 t = B - j >= 8 ? 0xff : (__mmask8)((1u << (B - j)) - 1);
    const __m512d l = _mm512_mask_i32gather_pd(zero, t, _mm256_maskz_loadu_epi32(t, idx + j), leaves, 8);
    const __mmask8 ok = _mm512_mask_cmp_pd_mask(t, _mm512_mul_pd(n, _mm512_div_pd(l, rt)), zero, _CMP_GT_OQ);
    const __m512d wv = _mm512_maskz_mov_pd(ok, per_rpow8(_mm512_mask_div_pd(d1, ok, l, lm), nb));
    _mm256_mask_storeu_ps(w + j, t, _mm512_cvtpd_ps(wv));
  }
}

PER_AVX512 void ag__cpu_per_sample_avx512(const ag__per_sample_args *a, double root, uint64_t base) {
  int64_t node[PER_CHUNK] __attribute__((aligned(64)));
  double u[PER_CHUNK] __attribute__((aligned(64)));
  for (int64_t j0 = 0; j0 < a->B; j0 += PER_CHUNK) {
    const int g = a->B - j0 < PER_CHUNK ? (int)(a->B - j0) : PER_CHUNK, nv = (g + 7) / 8;
    /* lanes g .. 8 nv - 1 descend too (from targets past the batch's: valid
     * nodes), and are not written out */
    per_targets8(a->seed, base + (uint64_t)j0, j0, nv, a->B, root, u);
    for (int d = 0; d < a->depth; d++) {
      const double *lv = a->tree + ag__per_offset(d);
      const double *next = d + 1 < a->depth ? a->tree + ag__per_offset(d + 1) : NULL;
      for (int q = 0; q < nv; q++) {
        int64_t *nq = node + 8 * q;
        __m512d v = _mm512_load_pd(u + 8 * q), x[AG__PER_FAN];
        __m512i first;
        if (d == 0) { /* every lane under the root */
          for (int c = 0; c < AG__PER_FAN; c++) x[c] = _mm512_set1_pd(lv[c]);
          first = _mm512_setzero_si512();
        } else {
          __m512d r[8];
          for (int l = 0; l < 8; l++) r[l] = _mm512_loadu_pd(lv + nq[l] * AG__PER_FAN);
          per_transpose8(r, x);
          for (int l = 0; l < 8; l++) r[l] = _mm512_loadu_pd(lv + nq[l] * AG__PER_FAN + 8);
          per_transpose8(r, x + 8);
          first = _mm512_slli_epi64(_mm512_load_si512(nq), 4);
        }
        _mm512_store_si512(nq, _mm512_add_epi64(first, per_step8(x, &v)));
        _mm512_store_pd(u + 8 * q, v);
        if (next)
          for (int l = 0; l < 8; l++) { /* 16 doubles: two cache lines */
            __builtin_prefetch(next + nq[l] * AG__PER_FAN);
            __builtin_prefetch(next + nq[l] * AG__PER_FAN + 8);
          }
      }
    }
    for (int k = 0; k < g; k++) a->idx[j0 + k] = (int32_t)node[k];
  }
  per_weights8(a->tree + ag__per_offset(a->depth - 1), a->idx, a->B, root, *a->size_dev,
               ag__per_beta_of(a->beta, a->beta_dev), a->w);
}

/* ---- the fused SAC / TD3 update's optimizer steps ---- */

/* ag__adam_elem's steps, W lanes at once: V is the vector type, the other
 * arguments the width's intrinsics (AVX-512 and AVX2 below). */
#define ADAM_BODY(W, V, SET1, LOAD, STORE, ADD, SUB, MUL, DIV, SQRT, FMADD)           \
  const V lr = SET1(c->lr), wd = SET1(c->wd), coef = SET1(c->coef), b1 = SET1(c->b1); \
  const V b2 = SET1(c->b2), ob1 = SET1(1.0f - c->b1), ob2 = SET1(1.0f - c->b2);       \
  const V bc1 = SET1(c->bc1), bc2 = SET1(c->bc2), eps = SET1(c->eps);                 \
  const V tau = SET1(c->tau), otau = SET1(1.0f - c->tau);                             \
  int64_t q = 0;                                                                      \
  for (; q + (W) <= n; q += (W)) {                                                    \
    V pp = LOAD(p + q);                                                               \
    const V gr = FMADD(coef, LOAD(g + q), MUL(wd, pp));                               \
    if (c->sgd) {                                                                     \
      pp = SUB(pp, MUL(lr, gr));                                                      \
    } else {                                                                          \
      const V mm = FMADD(b1, LOAD(m + q), MUL(ob1, gr));                              \
      const V vv = FMADD(b2, LOAD(v + q), MUL(MUL(ob2, gr), gr));                     \
      pp = SUB(pp, DIV(MUL(lr, DIV(mm, bc1)), ADD(SQRT(DIV(vv, bc2)), eps)));         \
      STORE(m + q, mm), STORE(v + q, vv);                                             \
    }                                                                                 \
    STORE(p + q, pp);                                                                 \
    if (t) STORE(t + q, FMADD(tau, pp, MUL(otau, LOAD(t + q))));                      \
  }                                                                                   \
  return q;

__attribute__((target("avx512f"))) int64_t ag__cpu_adam_avx512(const ag__cpu_adam_c *c, int64_t n,
                                                               const float *g, float *p, float *m, float *v,
                                                               float *t) {
  ADAM_BODY(16, __m512, _mm512_set1_ps, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_add_ps, _mm512_sub_ps,
            _mm512_mul_ps, _mm512_div_ps, _mm512_sqrt_ps, _mm512_fmadd_ps)
}

__attribute__((target("avx2,fma"))) int64_t ag__cpu_adam_avx2(const ag__cpu_adam_c *c, int64_t n,
                                                              const float *g, float *p, float *m, float *v,
                                                              float *t) {
  ADAM_BODY(8, __m256, _mm256_set1_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps, _mm256_sub_ps,
            _mm256_mul_ps, _mm256_div_ps, _mm256_sqrt_ps, _mm256_fmadd_ps)
}
#undef ADAM_BODY
#endif /* AG__CPU_X86 */
