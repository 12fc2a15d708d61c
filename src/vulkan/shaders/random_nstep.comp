// random_nstep.comp — AG__K_NSTEP: the n-step walk of base/nstep.h for
// transition j, one invocation a transition: from column c_0 =
// clamp(idx[j * idx_stride]) through c + stride (mod capacity) while the
// ring allows, R = sum of gamma^k * reward * scale, discount 0
// (terminated) or gamma^(steps), last = the last column. The ring's size
// and position are read on the device and clamped (ag__nstep_ring). f32
// arithmetic in the CPU's order, every value `precise` (no fused
// multiply-add). Table elements narrower than 4 bytes are read from the
// aligned word that holds them. The host has checked 1 <= stride <=
// capacity and the rows.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32 { uint v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32 { int v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64 { int64_t v; };
layout(push_constant) uniform P { AGPC_RANDOM_NSTEP(AGPC_FIELD) } p;

uint word_at(uint64_t byte) { return U32(byte & ~3ul).v; }

// ag__f16_decode: exact, subnormal halves included
float f16_decode(uint h) {
  const uint sign = (h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (ex == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (man << 13));
  if (ex == 0u) {
    if (man == 0u) return uintBitsToFloat(sign);
    precise float v = float(man) * (1.0 / 16777216.0); // man 2^-24, exact
    return sign != 0u ? -v : v;
  }
  return uintBitsToFloat(sign | ((ex - 15u + 127u) << 23) | (man << 13));
}

// element e of the table as f32 (ag__value_f32; dtypes 0 f32, 1 f16, 2 bf16, 3 u8, 4 i32, 5 i64)
float value_f32(int64_t e) {
  switch (p.dtype) {
    case 1: {
      const uint64_t b = p.table + 2ul * uint64_t(e);
      return f16_decode((word_at(b) >> ((uint(b) & 2u) * 8u)) & 0xffffu);
    }
    case 2: {
      const uint64_t b = p.table + 2ul * uint64_t(e);
      return uintBitsToFloat(((word_at(b) >> ((uint(b) & 2u) * 8u)) & 0xffffu) << 16);
    }
    case 3: {
      const uint64_t b = p.table + uint64_t(e);
      return float((word_at(b) >> ((uint(b) & 3u) * 8u)) & 0xffu);
    }
    case 4: return float(I32(p.table + 4ul * uint64_t(e)).v);
    case 5: return float(I64(p.table + 8ul * uint64_t(e)).v);
  }
  return at(p.table, e).v;
}

void main() {
  const int64_t cap = p.capacity;
  const int64_t size_raw = I64(p.size_dev).v, pos_raw = I64(p.pos_dev).v;
  const int64_t size = size_raw < 0 ? 0l : (size_raw > cap ? cap : size_raw);
  const int64_t pos = pos_raw < 0 ? 0l : (pos_raw >= cap ? cap - 1 : pos_raw);
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t j = int64_t(gl_GlobalInvocationID.x); j < p.B; j += stride) {
    const int64_t ij = j * p.idx_stride;
    int64_t c = p.idx_dtype == 4 ? int64_t(I32(p.idx + 4ul * uint64_t(ij)).v) : I64(p.idx + 8ul * uint64_t(ij)).v;
    c = c < 0 ? 0l : (c >= cap ? cap - 1 : c);
    const int64_t rank = c >= pos ? c - pos : c - pos + cap;
    // the steps the ring allows from c: all k with rank + k * stride < capacity
    const int64_t reach = rank >= cap - size ? (cap - 1 - rank) / p.stride + 1 : 1l;
    precise float ret = 0.0, g = 1.0, discount = 0.0;
    for (int k = 0;; k++) {
      const int64_t e = c * p.rows;
      precise float r = value_f32(e + p.rew_row) * p.scale;
      precise float gr = g * r;
      ret = ret + gr;
      precise float next = g * p.gamma;
      if (value_f32(e + p.term_row) != 0.0) {
        discount = 0.0;
        break;
      }
      if ((p.trunc_row >= 0 && value_f32(e + p.trunc_row) != 0.0) || k + 1 >= p.n || int64_t(k + 1) >= reach) {
        discount = next;
        break;
      }
      c += p.stride;
      if (c >= cap) c -= cap;
      g = next;
    }
    at(p.ret, j).v = ret;
    at(p.discount, j).v = discount;
    I64(p.last + 8ul * uint64_t(j)).v = c;
  }
}
