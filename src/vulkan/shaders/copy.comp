// copy.comp — AG__K_COPY: out (+)= x, same shape [rows, cols], each with its ld.
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32 { float v; };
layout(push_constant) uniform P { AGPC_COPY(AGPC_FIELD) } p;
void main() {
  const int64_t n = p.rows * p.cols;
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t i = int64_t(gl_GlobalInvocationID.x); i < n; i += stride) {
    const int64_t r = i % p.rows, c = i / p.rows;
    const float v = F32(p.x_p + 4ul * uint64_t(c * p.x_ld + r)).v;
    F32 o = F32(p.out_p + 4ul * uint64_t(c * p.out_ld + r));
    o.v = p.accumulate != 0 ? o.v + v : v;
  }
}
