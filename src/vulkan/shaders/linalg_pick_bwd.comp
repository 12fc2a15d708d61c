// linalg_pick_bwd.comp — AG__K_PICK_BWD: axis 0: dx[r, j] (+)= r == i_j ? g[0, j] : 0
// (dx [rows, n]); axis 1: dx[j, c] (+)= c == i_j ? g[j, 0] : 0 (dx [n, cols]);
// i_j as in PICK, clamped to the picked axis. One invocation per element of
// dx, over rows (x) and columns (y) of the grid, each striding on.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "linalg_index.glsl"
layout(local_size_x = 64, local_size_y = 4) in;
layout(push_constant) uniform P { AGPC_LINALG_PICK_BWD(AGPC_FIELD) } p;
void main() {
  const int64_t limit = p.axis == 0 ? p.rows : p.cols;
  const int64_t sr = int64_t(gl_NumWorkGroups.x) * 64, sc = int64_t(gl_NumWorkGroups.y) * 4;
  for (int64_t c = int64_t(gl_GlobalInvocationID.y); c < p.cols; c += sc)
    for (int64_t r = int64_t(gl_GlobalInvocationID.x); r < p.rows; r += sr) {
      const int64_t j = p.axis == 0 ? c : r, pos = p.axis == 0 ? r : c;
      const int64_t i = pick_index(p.idx, p.idx_dtype, p.idx_stride, j, limit);
      const float gv = p.axis == 0 ? bcast(p.g, p.g_rows, p.g_cols, p.g_ld, 0, j)
                                   : bcast(p.g, p.g_rows, p.g_cols, p.g_ld, j, 0);
      const float v = pos == i ? gv : 0.0;
      F32 o = at(p.dx, c * p.ld + r);
      o.v = p.accumulate != 0 ? o.v + v : v;
    }
}
