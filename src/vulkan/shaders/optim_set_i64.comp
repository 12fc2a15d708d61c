// optim_set_i64.comp — AG__K_SET_I64: *dst = value (one thread).
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
layout(local_size_x = 1) in;
layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64 { int64_t v; };
layout(push_constant) uniform P { AGPC_OPTIM_SET_I64(AGPC_FIELD) } p;
void main() { I64(p.dst).v = p.value; }
