// fill.comp — AG__K_FILL: out[r, c] = value for r < rows, c < cols (element at c * ld + r).
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
layout(local_size_x = 256) in;
// one float at an address: elements are reached by 64-bit address arithmetic
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32 { float v; };
layout(push_constant) uniform P { AGPC_FILL(AGPC_FIELD) } p;
void main() {
  const int64_t n = p.rows * p.cols;
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t i = int64_t(gl_GlobalInvocationID.x); i < n; i += stride) {
    const int64_t r = i % p.rows, c = i / p.rows;
    F32(p.out_p + 4ul * uint64_t(c * p.ld + r)).v = p.value;
  }
}
