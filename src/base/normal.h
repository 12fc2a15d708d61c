/* normal.h — standard normal values from Philox draws by Box-Muller
 * (AG__K_RANDN), written once for the CPU reference and the CUDA kernel so
 * that both give the same bits.
 *
 * A draw's 64 bits become two uniforms in (0, 1) with nothing at either
 * end: u1 = (low 32 bits + 1/2) 2^-32 and u2 = (high 32 bits + 1/2) 2^-32,
 * held as odd integers n = 2 k + 1 below 2^33 (u = n 2^-33, exact). The
 * value is z = sqrt(-2 ln u1) cos(2 pi u2), in double, rounded once to
 * float at the end: within 1 ulp of float of the exact value, |z| at most
 * sqrt(66 ln 2) = 6.77 (u1 >= 2^-33).
 *
 * It deliberately calls no libm function whose rounding is the library's
 * own (log, cos, sin: glibc's and CUDA's differ in the last bits). What it
 * uses is correctly rounded in IEEE double on both, so both get the same
 * bits: +, -, *, /, sqrt, conversions between integers, double and float,
 * and fma() for every multiply-add, written out. No multiply may be fused
 * into an add by the compiler, which would round once where the other
 * backend rounds twice:
 *   - the CPU: CMakeLists.txt compiles C as ISO C11 (CMAKE_C_EXTENSIONS
 *     OFF: -std=c11), where GCC keeps floating-point contraction off
 *     (-ffp-contract=off); every product here is also its own expression
 *     (ag__nd_mul), so a compiler that contracts within an expression only
 *     (clang's default) has nothing to fuse either;
 *   - CUDA: nvcc fuses a * b + c by default (--fmad=true; CMakeLists.txt
 *     does not change it), so on the device each product is __dmul_rn,
 *     which is never fused.
 * The CPU backend runs its kernels flushing subnormals (cpu_backend.c);
 * none occurs here: the smallest magnitudes are about 2^-33 (an angle, its
 * powers stay above 2^-600) and 1e-14 (a result), far from either type's
 * subnormals.
 *
 * ln: n = m 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| < 0.172, by its series to s^21 (the rest is
 * below 2^-56 of it); ln u1 = (e - 33) ln 2 + ln m.
 * cos: 2 pi u2 = q pi / 2 + x with q the nearest quarter turn, found and
 * removed in integers (exact), |x| < pi / 4; cos x or sin x by Taylor
 * polynomials to x^18 and x^17 (the rest below 2^-56). Reducing u2 itself,
 * not a rounded angle, keeps the relative accuracy near the cosine's zeros.
 */
#ifndef AGRL_BASE_NORMAL_H
#define AGRL_BASE_NORMAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/hd.h"

/* A product rounded on its own, never fused into a following add. */
AG__HD double ag__nd_mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

AG__HD uint64_t ag__nd_bits(double x) {
#ifdef __CUDA_ARCH__
  return (uint64_t)__double_as_longlong(x);
#else
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
#endif
}

AG__HD double ag__nd_of_bits(uint64_t b) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double((long long)b);
#else
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
#endif
}

/* ln(n 2^-33) for an odd n in [1, 2^33). */
AG__HD double ag__normal_ln(uint64_t n) {
  const uint64_t b = ag__nd_bits((double)n); /* exact: n < 2^53 */
  const uint64_t frac = b & 0xfffffffffffffull;
  const uint64_t big = frac >= 0x6a09e667f3bcdull; /* m >= sqrt(2) (its fraction, rounded up): halve m */
  const int64_t e = (int64_t)(b >> 52) - 1023 + (int64_t)big;
  const double m = ag__nd_of_bits(frac | ((1023 - big) << 52));
  const double s = (m - 1.0) / (m + 1.0); /* m - 1 is exact */
  const double z = ag__nd_mul(s, s);
  /* atanh(s) / s - 1 = z (1/3 + z/5 + ... + z^9/21) */
  double q = 0x1.8618618618618p-5;     /* 1/21 */
  q = fma(q, z, 0x1.af286bca1af28p-5); /* 1/19 */
  q = fma(q, z, 0x1.e1e1e1e1e1e1ep-5); /* 1/17 */
  q = fma(q, z, 0x1.1111111111111p-4); /* 1/15 */
  q = fma(q, z, 0x1.3b13b13b13b14p-4); /* 1/13 */
  q = fma(q, z, 0x1.745d1745d1746p-4); /* 1/11 */
  q = fma(q, z, 0x1.c71c71c71c71cp-4); /* 1/9 */
  q = fma(q, z, 0x1.2492492492492p-3); /* 1/7 */
  q = fma(q, z, 0x1.999999999999ap-3); /* 1/5 */
  q = fma(q, z, 0x1.5555555555555p-2); /* 1/3 */
  const double s2 = s + s;
  const double ln_m = fma(ag__nd_mul(s2, z), q, s2);
  return fma((double)(e - 33), 0x1.62e42fefa39efp-1 /* ln 2 */, ln_m);
}

/* cos(2 pi n 2^-33) for an odd n in [1, 2^33). */
AG__HD double ag__normal_cos2pi(uint64_t n) {
  /* n 2^-33 = q / 4 + d 2^-33: q the nearest quarter turn (0..4; never a
   * tie, n is odd), |d| < 2^30 */
  const uint64_t q = (n + ((uint64_t)1 << 30)) >> 31;
  const int64_t d = (int64_t)n - (int64_t)(q << 31);
  const double x = ag__nd_mul((double)d, 0x1.921fb54442d18p-31 /* 2 pi 2^-33 */), x2 = ag__nd_mul(x, x);
  if (q & 1) { /* cos(pi/2 + x) = -sin x, cos(3 pi/2 + x) = sin x */
    /* sin x = x + x^3 (-1/3! + x^2/5! - ... + x^14/17!) */
    double p = 0x1.952c77030ad4ap-49;       /* 1/17! */
    p = fma(p, x2, -0x1.ae7f3e733b81fp-41); /* 1/15! */
    p = fma(p, x2, 0x1.6124613a86d09p-33);  /* 1/13! */
    p = fma(p, x2, -0x1.ae64567f544e4p-26); /* 1/11! */
    p = fma(p, x2, 0x1.71de3a556c734p-19);  /* 1/9! */
    p = fma(p, x2, -0x1.a01a01a01a01ap-13); /* 1/7! */
    p = fma(p, x2, 0x1.1111111111111p-7);   /* 1/5! */
    p = fma(p, x2, -0x1.5555555555555p-3);  /* 1/3! */
    const double sin_x = fma(ag__nd_mul(x, x2), p, x);
    return (q & 3) == 1 ? -sin_x : sin_x;
  }
  /* cos x = 1 + x^2 (-1/2! + x^2/4! - ... + x^16/18!) */
  double p = -0x1.6827863b97d97p-53;      /* 1/18! */
  p = fma(p, x2, 0x1.ae7f3e733b81fp-45);  /* 1/16! */
  p = fma(p, x2, -0x1.93974a8c07c9dp-37); /* 1/14! */
  p = fma(p, x2, 0x1.1eed8eff8d898p-29);  /* 1/12! */
  p = fma(p, x2, -0x1.27e4fb7789f5cp-22); /* 1/10! */
  p = fma(p, x2, 0x1.a01a01a01a01ap-16);  /* 1/8! */
  p = fma(p, x2, -0x1.6c16c16c16c17p-10); /* 1/6! */
  p = fma(p, x2, 0x1.5555555555555p-5);   /* 1/4! */
  p = fma(p, x2, -0.5);                   /* 1/2! */
  const double cos_x = fma(x2, p, 1.0);
  return (q & 3) == 2 ? -cos_x : cos_x;
}

/* The standard normal value of one 64-bit draw. */
AG__HD float ag__normal_of(uint64_t bits) {
  const uint64_t n1 = ((bits & 0xffffffffull) << 1) | 1, n2 = ((bits >> 32) << 1) | 1;
  const double r = sqrt(ag__nd_mul(-2.0, ag__normal_ln(n1)));
  return (float)ag__nd_mul(r, ag__normal_cos2pi(n2));
}

#endif /* AGRL_BASE_NORMAL_H */
