// random_randint.comp — AG__K_RANDINT: out[i] = floor(u_i bound) for draw
// *counter + i of the Philox stream `seed` (random_philox.glsl: the CPU's
// bits), bound = *bound_dev when given (0 for a bound below 1), out i32
// (out_dtype 4) or i64. advance != 0 (a dispatch of one group): the counter
// += n once every invocation has read it; else random_advance follows.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "random_philox.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32 { int v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64 { int64_t v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U64 { uint64_t v; };
layout(push_constant) uniform P { AGPC_RANDOM_RANDINT(AGPC_FIELD) } p;
void main() {
  const uint64_t base = U64(p.counter).v;
  const int64_t bound = p.bound_dev != 0ul ? I64(p.bound_dev).v : p.bound_const;
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t i = int64_t(gl_GlobalInvocationID.x); i < p.n; i += stride) {
    const int64_t v = philox_below(p.seed, base + uint64_t(i), bound);
    if (p.out_dtype == 4)
      I32(p.out_p + 4ul * uint64_t(i)).v = int(v);
    else
      I64(p.out_p + 8ul * uint64_t(i)).v = v;
  }
  if (p.advance != 0) {
    barrier(); // every invocation has read the counter
    if (gl_LocalInvocationID.x == 0u) U64(p.counter).v = base + uint64_t(p.n);
  }
}
