// random_advance.comp — *counter += n by one invocation: the dispatch after
// a kernel's many groups have all read the counter (RANDINT, RANDN, FRAME_STACK).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
layout(local_size_x = 1) in;
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U64 { uint64_t v; };
layout(push_constant) uniform P { AGPC_RANDOM_ADVANCE(AGPC_FIELD) } p;
void main() { U64(p.counter).v += uint64_t(p.n); }
