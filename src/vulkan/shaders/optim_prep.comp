// optim_prep.comp — AG__K_ADAM_PREP (one thread): t += 1; BC1 = 1 - b1^t;
// BC2 = 1 - b2^t; COEF = max_norm > 0 ? min(1, max_norm / (sqrt(SUMSQ) +
// 1e-6)) : 1; SUMSQ = 0 (ag__adam_values, ag__adam_store).
//
// 1 - b^t magnifies b^t's error (b2 = 0.999: 1 - b2^4 is 0.004), and a
// device's pow (exp2(t log2 b)) may be off by a few ulps, so for a whole t
// the power is taken by squaring in two-float arithmetic (about 44 bits,
// products split as Dekker's, no fused multiply-add assumed), then rounded
// once: the bits of a correctly rounded powf but for inputs within 2^-40
// of a rounding boundary.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
layout(local_size_x = 1) in;
layout(push_constant) uniform P { AGPC_OPTIM_PREP(AGPC_FIELD) } p;

// a = hi + lo with hi of 12 bits (Veltkamp)
void split(float a, out float hi, out float lo) {
  precise float c = 4097.0 * a;
  precise float h = c - (c - a);
  precise float l = a - h;
  hi = h;
  lo = l;
}

// the two-float product (ah + al) (bh + bl), normalized
void ff_mul(float ah, float al, float bh, float bl, out float rh, out float rl) {
  float a1, a2, b1, b2;
  split(ah, a1, a2);
  split(bh, b1, b2);
  precise float ph = ah * bh;
  precise float pe = ((a1 * b1 - ph) + a1 * b2 + a2 * b1) + a2 * b2; // ah bh = ph + pe exactly
  precise float e = pe + (ah * bl + al * bh);
  precise float s = ph + e;
  precise float l = e - (s - ph);
  rh = s;
  rl = l;
}

float power(float b, float t) {
  if (!(t >= 0.0 && t <= 16777216.0 && t == floor(t)) || isinf(b) || isnan(b)) return pow(b, t);
  uint n = uint(t);
  float rh = 1.0, rl = 0.0, xh = abs(b), xl = 0.0;
  while (n != 0u) {
    if ((n & 1u) != 0u) ff_mul(rh, rl, xh, xl, rh, rl);
    n >>= 1;
    if (n != 0u) ff_mul(xh, xl, xh, xl, xh, xl);
  }
  precise float r = rh + rl;
  return b < 0.0 && (uint(t) & 1u) != 0u ? -r : r;
}

void main() {
  F32 st_t = at(p.state, 0), st_sum = at(p.state, 1), st_bc1 = at(p.state, 2), st_bc2 = at(p.state, 3),
      st_coef = at(p.state, 4);
  precise float t = st_t.v + 1.0;
  precise float bc1 = 1.0 - power(p.b1, t);
  precise float bc2 = 1.0 - power(p.b2, t);
  const float norm = sqrt(st_sum.v);
  const float q = p.max_norm / (norm + 1e-6);
  const float coef = p.max_norm > 0.0 ? (q < 1.0 ? q : 1.0) : 1.0; // fminf: a NaN quotient gives 1
  st_t.v = t;
  st_bc1.v = bc1;
  st_bc2.v = bc2;
  st_coef.v = coef;
  st_sum.v = 0.0;
}
