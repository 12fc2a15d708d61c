// linalg_pick.comp — AG__K_PICK: axis 0: out[0, j] = x[i_j, j] (x [rows, n]);
// axis 1: out[j, 0] = x[j, i_j] (x [n, cols]); i_j = idx[j * idx_stride]
// clamped to the picked axis (pick_index), before the read it leads to.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "linalg_index.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P { AGPC_LINALG_PICK(AGPC_FIELD) } p;
void main() {
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t j = int64_t(gl_GlobalInvocationID.x); j < p.n; j += stride) {
    const int64_t i = pick_index(p.idx, p.idx_dtype, p.idx_stride, j, p.limit);
    const float v = at(p.x, p.axis == 0 ? j * p.x_ld + i : i * p.x_ld + j).v;
    F32 o = at(p.out_p, p.axis == 0 ? j * p.out_ld : j);
    o.v = p.accumulate != 0 ? o.v + v : v;
  }
}
