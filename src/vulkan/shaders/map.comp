// map.comp — AG__K_MAP: out (+)= f(x), x broadcast to out's shape.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P { AGPC_MAP(AGPC_FIELD) } p;
void main() {
  const int64_t n = p.rows * p.cols;
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t i = int64_t(gl_GlobalInvocationID.x); i < n; i += stride) {
    const int64_t r = i % p.rows, c = i / p.rows;
    const float y = map_f(p.op, bcast(p.x_p, p.x_rows, p.x_cols, p.x_ld, r, c), p.p0, p.p1);
    F32 o = at(p.out_p, c * p.ld + r);
    o.v = p.accumulate != 0 ? o.v + y : y;
  }
}
