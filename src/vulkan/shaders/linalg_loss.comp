// linalg_loss.comp — AG__K_LOSS: *out = (1/n) sum f(pred - target) over pred's
// n elements (target broadcast), f = d^2 (kind 0) or Huber of delta (kind 1);
// dpred = f'(d) / n when dpred is given.
//
// pass 0: one work group sums in a fixed order: invocation t takes the
// elements t, t + 256, ... in storage order (walking the flat index by 256
// without a division) into four accumulators by turn, then a shared-memory
// tree over the 256 always adds the same pairs. With `grad` it also writes
// dpred. pass 1: dpred alone, over many work groups (large inputs: pass 0
// then sums only).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P { AGPC_LINALG_LOSS(AGPC_FIELD) } p;

shared float sv[256];

float diff(int64_t r, int64_t c) {
  return at(p.pred, c * p.ld + r).v - bcast(p.target, p.t_rows, p.t_cols, p.t_ld, r, c);
}

float loss_f(float d) { return p.kind == 0 ? d * d : map_f(9, d, p.delta, 0.0); }
float loss_df(float d) { return p.kind == 0 ? 2.0 * d : (d < -p.delta ? -p.delta : (d > p.delta ? p.delta : d)); }

void main() {
  const int64_t n = p.rows * p.cols;
  const int64_t first = p.pass == 0 ? int64_t(gl_LocalInvocationIndex) : int64_t(gl_GlobalInvocationID.x);
  const int64_t stride = p.pass == 0 ? 256 : int64_t(gl_NumWorkGroups.x) * 256;
  int64_t r = first % p.rows, c = first / p.rows;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  uint q = 0u;
  for (int64_t i = first; i < n; i += stride, q++) {
    const float d = diff(r, c);
    if (p.pass == 0) acc[q & 3u] += loss_f(d);
    if (p.grad != 0) at(p.dpred, c * p.d_ld + r).v = loss_df(d) * p.inv;
    r += p.step_r;
    c += p.step_c;
    if (r >= p.rows) {
      r -= p.rows;
      c++;
    }
  }
  if (p.pass != 0) return;
  const uint lid = gl_LocalInvocationIndex;
  sv[lid] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (lid < s) sv[lid] += sv[lid + s];
    barrier();
  }
  if (lid == 0u) at(p.out_p, 0).v = sv[0] * p.inv;
}
