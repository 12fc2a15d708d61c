// map2.comp — AG__K_MAP2: out (+)= alpha * f(a, b), a and b broadcast to out's shape.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P { AGPC_MAP2(AGPC_FIELD) } p;
void main() {
  const int64_t n = p.rows * p.cols;
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t i = int64_t(gl_GlobalInvocationID.x); i < n; i += stride) {
    const int64_t r = i % p.rows, c = i / p.rows;
    const float a = bcast(p.a_p, p.a_rows, p.a_cols, p.a_ld, r, c);
    const float b = bcast(p.b_p, p.b_rows, p.b_cols, p.b_ld, r, c);
    const float y = p.alpha * map2_f(p.op, a, b, p.p0, p.p1);
    F32 o = at(p.out_p, c * p.ld + r);
    o.v = p.accumulate != 0 ? o.v + y : y;
  }
}
