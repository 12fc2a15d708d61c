// optim_sumsq.comp — AG__K_SUMSQ: state[SUMSQ] += the sum of g^2 over every
// tensor of the argument block, by one work group in a fixed order (each
// thread strides through the tensors in turn, then a tree in shared
// memory): the same inputs give the same bits at every run and replay,
// with no scratch for partial sums.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#define LOCAL 1024
#include "optim_mt.glsl"
layout(local_size_x = LOCAL) in;
layout(push_constant) uniform P { AGPC_OPTIM_SUMSQ(AGPC_FIELD) } p;
shared float red[LOCAL];

void main() {
  mt_load(p.args, p.count);
  const uint me = gl_LocalInvocationID.x;
  float s = 0.0;
  for (int k = 0; k < p.count; k++) {
    const int64_t n = mt_n(k);
    const uint64_t gp = mt_g(k);
    // four loads in flight, added in the order of a plain stride loop
    // (an element past the end adds 0: s is not changed)
    for (int64_t i = int64_t(me); i < n; i += 4 * LOCAL) {
      float g[4];
      for (int r = 0; r < 4; r++) g[r] = i + r * LOCAL < n ? at(gp, i + r * LOCAL).v : 0.0;
      for (int r = 0; r < 4; r++) s += g[r] * g[r];
    }
  }
  red[me] = s;
  barrier();
  for (uint w = LOCAL / 2; w > 0; w >>= 1) {
    if (me < w) red[me] += red[me + w];
    barrier();
  }
  if (me == 0) {
    F32 st = at(p.state, 1);
    st.v = st.v + red[0];
  }
}
