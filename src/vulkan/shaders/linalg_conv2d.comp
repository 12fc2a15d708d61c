// linalg_conv2d.comp — AG__K_CONV2D, every mode: one invocation per element
// of the mode's output, which sums what the reference sums for it in the
// same order (in float), so that no two invocations write one element.
//   mode 0 FWD:   y [K*Ho*Wo, B] (+)= b[k] + sum over c, u, v of w x
//   mode 1 BWD_X: x [C*H*W, B]   (+)= sum over the taps u, v that reach the
//                 pixel and the filters k of w y
//   mode 2 BWD_W: w [C*kh*kw, K] (+)= sum over n, i, j of y x
//   mode 3 BWD_B: b [K]          (+)= sum over n and the pixels of filter k of y
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32 { float v; };
layout(push_constant) uniform P { AGPC_LINALG_CONV2D(AGPC_FIELD) } p;
float ld(uint64_t base, int64_t i) { return F32(base + 4ul * uint64_t(i)).v; }
float xat(int n, int c, int h, int q) { return ld(p.x_p, int64_t(n) * p.x_ld + (int64_t(c) * p.H + h) * p.W + q); }
float wat(int c, int u, int v, int k) { return ld(p.w_p, int64_t(k) * p.w_ld + (c * p.kh + u) * p.kw + v); }
float yat(int n, int k, int i, int j) { return ld(p.y_p, int64_t(n) * p.y_ld + (int64_t(k) * p.Ho + i) * p.Wo + j); }
void put(uint64_t base, int64_t i, float v) {
  F32 o = F32(base + 4ul * uint64_t(i));
  o.v = p.accumulate != 0 ? o.v + v : v;
}
void main() {
  const int64_t P = int64_t(p.Ho) * p.Wo;
  const int64_t total = p.mode == 0 ? int64_t(p.B) * p.K * P
                      : p.mode == 1 ? int64_t(p.B) * p.C * p.H * p.W
                      : p.mode == 2 ? int64_t(p.C) * p.kh * p.kw * p.K : int64_t(p.K);
  const int64_t step = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t e = int64_t(gl_GlobalInvocationID.x); e < total; e += step) {
    float sum = 0.0;
    if (p.mode == 0) {
      const int64_t rows = int64_t(p.K) * P;
      const int n = int(e / rows), r = int(e % rows), k = int(r / P), i = int((r % P) / p.Wo), j = int(r % p.Wo);
      if (p.has_b != 0) sum = ld(p.b_p, k);
      for (int c = 0; c < p.C; c++)
        for (int u = 0; u < p.kh; u++) {
          const int h = i * p.stride + u - p.pad;
          if (h < 0 || h >= p.H) continue;
          for (int v = 0; v < p.kw; v++) {
            const int q = j * p.stride + v - p.pad;
            if (q >= 0 && q < p.W) sum += wat(c, u, v, k) * xat(n, c, h, q);
          }
        }
      put(p.y_p, int64_t(n) * p.y_ld + r, sum);
    } else if (p.mode == 1) {
      const int64_t rows = int64_t(p.C) * p.H * p.W;
      const int n = int(e / rows), r = int(e % rows), c = r / (p.H * p.W), h = (r / p.W) % p.H, q = r % p.W;
      for (int u = 0; u < p.kh; u++) {
        const int ti = h + p.pad - u;
        if (ti < 0 || ti % p.stride != 0 || ti / p.stride >= p.Ho) continue;
        for (int v = 0; v < p.kw; v++) {
          const int tj = q + p.pad - v;
          if (tj < 0 || tj % p.stride != 0 || tj / p.stride >= p.Wo) continue;
          for (int k = 0; k < p.K; k++) sum += wat(c, u, v, k) * yat(n, k, ti / p.stride, tj / p.stride);
        }
      }
      put(p.x_p, int64_t(n) * p.x_ld + r, sum);
    } else if (p.mode == 2) {
      const int Q = p.C * p.kh * p.kw, k = int(e / Q), r = int(e % Q);
      const int c = r / (p.kh * p.kw), u = (r / p.kw) % p.kh, v = r % p.kw;
      for (int n = 0; n < p.B; n++)
        for (int i = 0; i < p.Ho; i++) {
          const int h = i * p.stride + u - p.pad;
          if (h < 0 || h >= p.H) continue;
          for (int j = 0; j < p.Wo; j++) {
            const int q = j * p.stride + v - p.pad;
            if (q >= 0 && q < p.W) sum += yat(n, k, i, j) * xat(n, c, h, q);
          }
        }
      put(p.w_p, int64_t(k) * p.w_ld + r, sum);
    } else {
      const int k = int(e);
      for (int n = 0; n < p.B; n++)
        for (int64_t r = 0; r < P; r++) sum += ld(p.y_p, int64_t(n) * p.y_ld + k * P + r);
      put(p.b_p, k, sum);
    }
  }
}
