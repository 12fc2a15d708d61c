// optim_axpby.comp — AG__K_AXPBY: y = a x + b y over every tensor of the
// argument block (optim_mt.glsl; y = p, x = g), a work group a chunk of
// 4 * 256 elements of one tensor, striding over the chunks past the grid.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#define LOCAL 256
#include "optim_mt.glsl"
#define MT_CHUNK (LOCAL * 4)
layout(local_size_x = LOCAL) in;
layout(push_constant) uniform P { AGPC_OPTIM_AXPBY(AGPC_FIELD) } p;

void main() {
  mt_load(p.args, p.count);
  const int64_t chunks = mt_first(p.count);
  for (int64_t b = int64_t(gl_WorkGroupID.x); b < chunks; b += int64_t(gl_NumWorkGroups.x)) {
    const int k = mt_tensor(b);
    const int64_t lo = (b - mt_first(k)) * MT_CHUNK, n = mt_n(k);
    const int64_t hi = lo + MT_CHUNK < n ? lo + MT_CHUNK : n;
    const uint64_t yp = mt_p(k), xp = mt_g(k);
    for (int64_t i = lo + int64_t(gl_LocalInvocationID.x); i < hi; i += LOCAL) {
      F32 y = at(yp, i);
      y.v = p.a * at(xp, i).v + p.b * y.v;
    }
  }
}
