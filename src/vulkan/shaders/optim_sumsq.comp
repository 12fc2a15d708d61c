// optim_sumsq.comp — AG__K_SUMSQ: state[SUMSQ] += the sum of g^2 over every
// tensor of the argument block, by one work group in a fixed order (each
// thread strides through the tensors in turn, then a tree in shared
// memory): the same inputs give the same bits at every run and replay,
// with no scratch for partial sums.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "optim_mt.glsl"
#define LOCAL 1024
layout(local_size_x = LOCAL) in;
layout(push_constant) uniform P {
  uint64_t args, state;
  int count;
} p;
shared float red[LOCAL];

void main() {
  MT t = MT(p.args);
  const uint me = gl_LocalInvocationID.x;
  float s = 0.0;
  for (int k = 0; k < p.count; k++) {
    const int64_t n = t.n[k];
    const uint64_t gp = t.g[k];
    for (int64_t i = int64_t(me); i < n; i += LOCAL) {
      const float g = at(gp, i).v;
      s += g * g;
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
