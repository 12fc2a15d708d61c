// zero.comp — the bytes [start, end) past the word at first_word set to 0, a
// word at a time: the bytes of a word outside the range are kept (an atomic
// AND), so that a zeroing at any offset and length can be queued or recorded.
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32 { uint v; };
layout(push_constant) uniform P { AGPC_ZERO(AGPC_FIELD) } p;
void main() {
  const uint64_t words = (p.end + 3ul) / 4ul;
  const uint64_t stride = uint64_t(gl_NumWorkGroups.x) * 256ul;
  for (uint64_t w = uint64_t(gl_GlobalInvocationID.x); w < words; w += stride) {
    uint keep = 0u;
    for (uint b = 0u; b < 4u; b++) {
      const uint64_t at = w * 4ul + uint64_t(b);
      if (at < p.start || at >= p.end) keep |= 0xffu << (8u * b);
    }
    atomicAnd(U32(p.first_word + 4ul * w).v, keep);
  }
}
