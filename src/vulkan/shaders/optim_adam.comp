// optim_adam.comp — AG__K_ADAM's elementwise step over every tensor of the
// argument block (optim_mt.glsl), with the bias corrections and the clip
// coefficient read from the state (optim_prep.comp has stored them first
// when the call fuses ADAM_PREP). A work group takes a chunk of 4 * 256
// elements of one tensor and strides over the chunks past the grid.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#define LOCAL 256
#include "optim_mt.glsl"
#define PER 4
#define MT_CHUNK (LOCAL * PER)
layout(local_size_x = LOCAL) in;
layout(push_constant) uniform P { AGPC_OPTIM_ADAM(AGPC_FIELD) } p;

void main() {
  mt_load(p.args, p.count);
  const int64_t chunks = mt_first(p.count);
  const float bc1 = at(p.state, 2).v, bc2 = at(p.state, 3).v, coef = at(p.state, 4).v;
  for (int64_t b = int64_t(gl_WorkGroupID.x); b < chunks; b += int64_t(gl_NumWorkGroups.x)) {
    const int k = mt_tensor(b);
    const int64_t n = mt_n(k), lo = (b - mt_first(k)) * MT_CHUNK + int64_t(gl_LocalInvocationID.x);
    const uint64_t pp = mt_p(k), gp = mt_g(k), mp = mt_m(k), vp = mt_v(k);
    // every load of the thread's elements before any store: one trip to memory
    float g[PER], w[PER], m[PER], v[PER];
    for (int r = 0; r < PER; r++) {
      const int64_t i = lo + r * LOCAL;
      const bool in_ = i < n;
      g[r] = in_ ? at(gp, i).v : 0.0;
      w[r] = in_ ? at(pp, i).v : 0.0;
      m[r] = in_ && p.sgd == 0 ? at(mp, i).v : 0.0;
      v[r] = in_ && p.sgd == 0 ? at(vp, i).v : 0.0;
    }
    for (int r = 0; r < PER; r++) {
      const int64_t i = lo + r * LOCAL;
      if (i >= n) break;
      // ag__adam_elem, in its order of operations
      const float gr = coef * g[r] + p.wd * w[r];
      if (p.sgd != 0) {
        at(pp, i).v = w[r] - p.lr * gr;
      } else {
        const float mm = p.b1 * m[r] + (1.0 - p.b1) * gr;
        const float vv = p.b2 * v[r] + (1.0 - p.b2) * gr * gr;
        at(mp, i).v = mm;
        at(vp, i).v = vv;
        at(pp, i).v = w[r] - p.lr * (mm / bc1) / (sqrt(vv / bc2) + p.eps);
      }
    }
  }
}
