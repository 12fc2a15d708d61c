// linalg_td.comp — AG__K_TD_TARGET: out[0, j] = reward[0, j] + gamma (1 - done[0, j]) v_j,
// v_j = max_r q[r, j] (a sequential scan as the CPU's: q[r] taken when q[r] > v)
// or, with idx, q[i_j, j] (i_j clamped to q's rows). One invocation per column.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "linalg_index.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P { AGPC_LINALG_TD(AGPC_FIELD) } p;
void main() {
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t j = int64_t(gl_GlobalInvocationID.x); j < p.n; j += stride) {
    const int64_t col = j * p.q_ld;
    float v;
    if (p.idx != 0ul) {
      v = at(p.q, col + pick_index(p.idx, p.idx_dtype, p.idx_stride, j, p.q_rows)).v;
    } else {
      v = at(p.q, col).v;
      for (int64_t r = 1; r < p.q_rows; r++) {
        const float x = at(p.q, col + r).v;
        v = x > v ? x : v;
      }
    }
    const float rw = at(p.reward, (p.r_cols == 1 ? 0 : j) * p.r_ld).v;
    const float d = at(p.done, (p.d_cols == 1 ? 0 : j) * p.d_ld).v;
    at(p.out_p, j * p.out_ld).v = rw + p.gamma * (1.0 - d) * v;
  }
}
