// random_f64.glsl — the double-precision code that base/normal.h and
// base/per_tree.h share between the CPU and CUDA, in GLSL, step for step:
// the Box-Muller value of a draw (RANDN), prio ^ alpha (ag__per_pow), the
// sum of 16 children (ag__per_sum16), and a pow for the importance weights.
//
// Every floating-point value is `precise` (NoContraction): a product is
// never fused into an add, except where the C code calls fma(), which is a
// fused multiply-add here (the device's, or an emulation). Constants are
// given by their bits (the C sources write them as hexadecimal floats, which
// GLSL has not). Needs shaderFloat64.

double K(uint64_t bits) { return uint64BitsToDouble(bits); }

// 1.0f / f correctly rounded, for a normal float f in [1, 4) (the CPU's float
// division in ag__per_pow): the quotient in double, rounded to float, then
// the neighbour of the smaller remainder |1 - q f| (exact: q f has 48 bits
// and is near 1), so that a division not correctly rounded still gives it.
float recip_f32(float f) {
  const double fd = double(f);
  precise double yd = 1.0lf / fd;
  float q = float(yd);
  const float lo = uintBitsToFloat(floatBitsToUint(q) - 1u), hi = uintBitsToFloat(floatBitsToUint(q) + 1u);
  precise double r = abs(1.0lf - double(q) * fd);
  precise double r_lo = abs(1.0lf - double(lo) * fd);
  precise double r_hi = abs(1.0lf - double(hi) * fd);
  if (r_lo < r) q = lo, r = r_lo;
  if (r_hi < r) q = hi;
  return q;
}

// Fused multiply-adds: GLSL's fma() need not be fused (lavapipe splits it
// into a product and a sum on doubles); the bits of base/normal.h and
// ag__per_pow need it fused. fma_fused() asks the device: (1 + 2^-30)^2 -
// (1 + 2^-29) is 2^-60 fused, 0 not (1 + 2^-30 comes from gl_NumWorkGroups,
// so no compiler can fold it). Without it, fma_emul gives the fused result
// from exact products and sums (Boldo and Melquiond, "Emulation of FMA and
// correctly rounded sums: proved algorithms using rounding to odd", IEEE
// Trans. Computers 2008): a b = uh + ul (Dekker's product, Veltkamp's
// split), c + uh = th + tl (Knuth's two-sum), z = RN(th + RO(tl + ul)) with
// RO rounding to odd. Exact for the magnitudes here (no overflow, no
// underflow).
bool fma_fused() {
  precise double t = 1.0lf + double(min(gl_NumWorkGroups.x, 1u)) * K(0x3e10000000000000ul); // 1 + 2^-30
  precise double r = fma(t, t, K(0xbff0000000800000ul));                                      // - (1 + 2^-29)
  return r != 0.0lf;
}

void two_sum(double a, double b, out double s, out double e) {
  precise double ss = a + b;
  precise double bb = ss - a;
  precise double ee = (a - (ss - bb)) + (b - bb);
  s = ss;
  e = ee;
}

void veltkamp(double a, out double hi, out double lo) {
  precise double c = K(0x41a0000002000000ul) * a; // (2^27 + 1) a
  precise double t = c - a;
  precise double h = c - t;
  precise double l = a - h;
  hi = h;
  lo = l;
}

double fma_emul(double a, double b, double c) {
  double ah, al, bh, bl;
  veltkamp(a, ah, al);
  veltkamp(b, bh, bl);
  precise double uh = a * b;
  precise double ul = ((ah * bh - uh) + ah * bl + al * bh) + al * bl;
  double th, tl, s, e;
  two_sum(c, uh, th, tl);
  two_sum(tl, ul, s, e);
  // round to odd: an inexact sum takes, of the two doubles around it, the odd one
  if (e != 0.0lf && (doubleBitsToUint64(s) & 1ul) == 0ul)
    s = uint64BitsToDouble((e > 0.0lf) == (s > 0.0lf) ? doubleBitsToUint64(s) + 1ul : doubleBitsToUint64(s) - 1ul);
  precise double z = th + s;
  return z;
}

#define FMA(a, b, c) fma(a, b, c)
#define FN(n) n##_n
#include "random_f64_body.glsl"
#undef FMA
#undef FN
#define FMA(a, b, c) fma_emul(a, b, c)
#define FN(n) n##_e
#include "random_f64_body.glsl"
#undef FMA
#undef FN

// the standard normal value of one 64-bit draw (ag__normal_of)
float normal_of(uint64_t bits) { return fma_fused() ? normal_of_n(bits) : normal_of_e(bits); }

// prio ^ alpha as ag__per_pow computes it (prio at least 1e-12, alpha in [0, 1])
double per_pow(float p, float alpha) { return fma_fused() ? per_pow_n(p, alpha) : per_pow_e(p, alpha); }

// x ^ y for the importance weights (ag__per_weight takes libm's pow; the
// test compares the weights within 1e-5): x = m 2^e, ln x = e ln 2 + ln m,
// t = y ln x = k ln 2 + f with |f| <= ln 2 / 2, x ^ y = 2^k exp(f); about
// 1e-13 relative over the doubles' range, the special values as pow has them.
double pow_d(double x, double y) {
  if (y == 0.0lf || x == 1.0lf) return 1.0lf;
  if (isnan(x) || isnan(y)) return x + y;
  if (x <= 0.0lf) return x == 0.0lf ? (y < 0.0lf ? uint64BitsToDouble(0x7ff0000000000000ul) : 0.0lf)
                                    : uint64BitsToDouble(0x7ff8000000000000ul);
  if (isinf(x)) return y < 0.0lf ? 0.0lf : x;
  int e = 0;
  precise double xs = x;
  if (xs < K(0x0010000000000000ul)) { // subnormal: scaled by 2^54 first
    xs = xs * K(0x4350000000000000ul);
    e = -54;
  }
  const uint64_t b = doubleBitsToUint64(xs);
  const uint64_t frac = b & 0xffffffffffffful;
  const int big = frac > 0x6a09e667f3bccul ? 1 : 0; // m > sqrt(2): halve it
  e += int(b >> 52) - 1023 + big;
  const double m = uint64BitsToDouble(frac | (uint64_t(1023 - big) << 52));
  precise double s = (m - 1.0lf) / (m + 1.0lf);
  precise double lnm = ln_of_s_n(s);
  const double ln2_hi = K(0x3fe62e42fefa39eful), ln2_lo = K(0x3c7abc9e3b39803ful);
  precise double lnx_lo = fma(double(e), ln2_lo, lnm);
  precise double lnx = fma(double(e), ln2_hi, lnx_lo);
  precise double t = y * lnx;
  if (t > 710.0lf) return uint64BitsToDouble(0x7ff0000000000000ul);
  if (t < -746.0lf) return 0.0lf;
  precise double k = roundEven(t * K(0x3ff71547652b82feul) /* 1 / ln 2 */);
  precise double f1 = fma(-k, ln2_hi, t);
  precise double f = fma(-k, ln2_lo, f1);
  precise double ex = exp_small_n(f);
  const int ki = int(k), k1 = ki / 2, k2 = ki - k1; // two factors: 2^k may not be a double
  precise double v = ex * uint64BitsToDouble(uint64_t(k1 + 1023) << 52);
  v = v * uint64BitsToDouble(uint64_t(k2 + 1023) << 52);
  return v;
}
