// random_f64_body.glsl — the functions of random_f64.glsl that take fused
// multiply-adds, written once and included twice: with FMA the device's fma()
// (names ending _n) and with FMA an exact emulation of it (names ending _e),
// for a device whose fma() on doubles is not fused. Every floating-point
// value is `precise` (NoContraction).

// ln(n 2^-33) for an odd n in [1, 2^33) (ag__normal_ln)
double FN(normal_ln)(uint64_t n) {
  const uint64_t b = doubleBitsToUint64(double(n)); // exact: n < 2^53
  const uint64_t frac = b & 0xffffffffffffful;
  const uint64_t big = frac >= 0x6a09e667f3bcdul ? 1ul : 0ul; // m >= sqrt(2): halve m
  const int64_t e = int64_t(b >> 52) - 1023 + int64_t(big);
  const double m = uint64BitsToDouble(frac | ((1023ul - big) << 52));
  precise double s = (m - 1.0lf) / (m + 1.0lf);
  precise double z = s * s;
  precise double q = K(0x3fa8618618618618ul); // 1/21
  q = FMA(q, z, K(0x3faaf286bca1af28ul));     // 1/19
  q = FMA(q, z, K(0x3fae1e1e1e1e1e1eul));     // 1/17
  q = FMA(q, z, K(0x3fb1111111111111ul));     // 1/15
  q = FMA(q, z, K(0x3fb3b13b13b13b14ul));     // 1/13
  q = FMA(q, z, K(0x3fb745d1745d1746ul));     // 1/11
  q = FMA(q, z, K(0x3fbc71c71c71c71cul));     // 1/9
  q = FMA(q, z, K(0x3fc2492492492492ul));     // 1/7
  q = FMA(q, z, K(0x3fc999999999999aul));     // 1/5
  q = FMA(q, z, K(0x3fd5555555555555ul));     // 1/3
  precise double s2 = s + s;
  precise double sz = s2 * z;
  precise double ln_m = FMA(sz, q, s2);
  precise double r = FMA(double(e - 33), K(0x3fe62e42fefa39eful) /* ln 2 */, ln_m);
  return r;
}

// cos(2 pi n 2^-33) for an odd n in [1, 2^33) (ag__normal_cos2pi)
double FN(normal_cos2pi)(uint64_t n) {
  const uint64_t q = (n + (1ul << 30)) >> 31; // the nearest quarter turn
  const int64_t d = int64_t(n) - int64_t(q << 31);
  precise double x = double(d) * K(0x3e0921fb54442d18ul); // 2 pi 2^-33
  precise double x2 = x * x;
  if ((q & 1ul) != 0ul) {
    precise double p = K(0x3ce952c77030ad4aul); // 1/17!
    p = FMA(p, x2, K(0xbd6ae7f3e733b81ful));    // -1/15!
    p = FMA(p, x2, K(0x3de6124613a86d09ul));    // 1/13!
    p = FMA(p, x2, K(0xbe5ae64567f544e4ul));    // -1/11!
    p = FMA(p, x2, K(0x3ec71de3a556c734ul));    // 1/9!
    p = FMA(p, x2, K(0xbf2a01a01a01a01aul));    // -1/7!
    p = FMA(p, x2, K(0x3f81111111111111ul));    // 1/5!
    p = FMA(p, x2, K(0xbfc5555555555555ul));    // -1/3!
    precise double x3 = x * x2;
    precise double sin_x = FMA(x3, p, x);
    precise double r = (q & 3ul) == 1ul ? -sin_x : sin_x;
    return r;
  }
  precise double p = K(0xbca6827863b97d97ul); // -1/18!
  p = FMA(p, x2, K(0x3d2ae7f3e733b81ful));    // 1/16!
  p = FMA(p, x2, K(0xbda93974a8c07c9dul));    // -1/14!
  p = FMA(p, x2, K(0x3e21eed8eff8d898ul));    // 1/12!
  p = FMA(p, x2, K(0xbe927e4fb7789f5cul));    // -1/10!
  p = FMA(p, x2, K(0x3efa01a01a01a01aul));    // 1/8!
  p = FMA(p, x2, K(0xbf56c16c16c16c17ul));    // -1/6!
  p = FMA(p, x2, K(0x3fa5555555555555ul));    // 1/4!
  p = FMA(p, x2, -0.5lf);                     // -1/2!
  precise double cos_x = FMA(x2, p, 1.0lf);
  precise double r = (q & 3ul) == 2ul ? -cos_x : cos_x;
  return r;
}

// the standard normal value of one 64-bit draw (ag__normal_of)
float FN(normal_of)(uint64_t bits) {
  const uint64_t n1 = ((bits & 0xfffffffful) << 1) | 1ul, n2 = ((bits >> 32) << 1) | 1ul;
  precise double l2 = -2.0lf * FN(normal_ln)(n1);
  precise double r = sqrt(l2);
  precise double z = r * FN(normal_cos2pi)(n2);
  return float(z);
}

// exp(x) - 1 - x = x^2 Q(x) for |x| < 0.75, Q = sum over i of x^i / (i + 2)!
// to x^16 by Estrin's scheme: 1 + fma(x^2, Q, x) (ag__per_pow's last steps)
double FN(exp_small)(double x) {
  precise double x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
  precise double q0 = FMA(K(0x3fc5555555555555ul), x, K(0x3fe0000000000000ul)); // 1/3!, 1/2!
  precise double q1 = FMA(K(0x3f81111111111111ul), x, K(0x3fa5555555555555ul)); // 1/5!, 1/4!
  precise double q2 = FMA(K(0x3f2a01a01a01a01aul), x, K(0x3f56c16c16c16c17ul)); // 1/7!, 1/6!
  precise double q3 = FMA(K(0x3ec71de3a556c734ul), x, K(0x3efa01a01a01a01aul)); // 1/9!, 1/8!
  precise double q4 = FMA(K(0x3e5ae64567f544e4ul), x, K(0x3e927e4fb7789f5cul)); // 1/11!, 1/10!
  precise double q5 = FMA(K(0x3de6124613a86d09ul), x, K(0x3e21eed8eff8d898ul)); // 1/13!, 1/12!
  precise double q6 = FMA(K(0x3d6ae7f3e733b81ful), x, K(0x3da93974a8c07c9dul)); // 1/15!, 1/14!
  const double q7 = K(0x3d2ae7f3e733b81ful);                                     // 1/16!
  precise double Q = FMA(FMA(FMA(q7, x2, q6), x4, FMA(q5, x2, q4)), x8, FMA(FMA(q3, x2, q2), x4, FMA(q1, x2, q0)));
  precise double ex = 1.0lf + FMA(x2, Q, x);
  return ex;
}

// ln(m) for m in [sqrt(1/2), sqrt(2)] from s = (m - 1) / (m + 1): 2 s + s z R(z),
// z = s^2, R = sum over j of 2 z^j / (2 j + 3), by Estrin's scheme (ag__per_pow)
double FN(ln_of_s)(double s) {
  precise double z = s * s, z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
  precise double r0 = FMA(K(0x3fd999999999999aul), z, K(0x3fe5555555555555ul)); // 2/5, 2/3
  precise double r1 = FMA(K(0x3fcc71c71c71c71cul), z, K(0x3fd2492492492492ul)); // 2/9, 2/7
  precise double r2 = FMA(K(0x3fc3b13b13b13b14ul), z, K(0x3fc745d1745d1746ul)); // 2/13, 2/11
  precise double r3 = FMA(K(0x3fbe1e1e1e1e1e1eul), z, K(0x3fc1111111111111ul)); // 2/17, 2/15
  precise double r4 = FMA(K(0x3fb8618618618618ul), z, K(0x3fbaf286bca1af28ul)); // 2/21, 2/19
  precise double R = FMA(FMA(r3, z2, r2), z4, FMA(r1, z2, r0)) + r4 * z8;
  precise double sz = s * z, s2 = 2.0lf * s;
  precise double lnm = FMA(sz, R, s2);
  return lnm;
}

// prio ^ alpha for a priority clamped as PER_SET clamps it (at least 1e-12,
// +inf allowed) and alpha in [0, 1] (ag__per_pow, step for step)
double FN(per_pow)(float p, float alpha) {
  if (alpha == 0.0) return 1.0lf;
  if (alpha == 1.0 || !(p < uintBitsToFloat(0x7f800000u))) return double(p);
  const uint fb = floatBitsToUint(p);
  int e = int(fb >> 23) - 127;
  const uint frac = fb & 0x7fffffu;
  uint64_t mb = (uint64_t(frac) << 29) | (1023ul << 52);
  if (frac > 0x3504f3u) { // m > sqrt(2): halve it
    mb -= 1ul << 52;
    e += 1;
  }
  const double m = uint64BitsToDouble(mb);
  precise double num = m - 1.0lf, den = m + 1.0lf;
  precise double y = double(recip_f32(float(den)));
  precise double err = FMA(-den, y, 1.0lf);
  y = FMA(y, FMA(err, err, err), y);
  precise double s0 = num * y;
  precise double s = FMA(FMA(-den, s0, num), y, s0);
  precise double lnm = FN(ln_of_s)(s);
  precise double a = double(alpha);
  precise double ea = a * double(e);
  precise double k = roundEven(ea);
  precise double r = ea - k;
  precise double rl = r * K(0x3c7abc9e3b39803ful); // ln 2, low part
  precise double x = FMA(a, lnm, FMA(r, K(0x3fe62e42fefa39eful), rl));
  precise double ex = FN(exp_small)(x);
  const uint64_t kb = uint64_t(int64_t(k) + 1023) << 52; // 2^k: |k| < 128
  precise double v = ex * uint64BitsToDouble(kb);
  return v;
}

