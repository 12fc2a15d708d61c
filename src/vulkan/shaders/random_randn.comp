// random_randn.comp — AG__K_RANDN: out[i] = the Box-Muller value of draw
// *counter + i of the Philox stream `seed` (random_f64.glsl's port of
// base/normal.h: the CPU's bits). advance != 0 (a dispatch of one group):
// the counter += n once every invocation has read it; else random_advance
// follows.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "random_philox.glsl"
#include "random_f64.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U64 { uint64_t v; };
layout(push_constant) uniform P { AGPC_RANDOM_RANDN(AGPC_FIELD) } p;
void main() {
  const uint64_t base = U64(p.counter).v;
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t i = int64_t(gl_GlobalInvocationID.x); i < p.n; i += stride)
    at(p.out_p, i).v = normal_of(philox_u64(p.seed, base + uint64_t(i)));
  if (p.advance != 0) {
    barrier(); // every invocation has read the counter
    if (gl_LocalInvocationID.x == 0u) U64(p.counter).v = base + uint64_t(p.n);
  }
}
