// gather.comp — AG__K_GATHER: dst[r, j] = (f32) src[r, clamp(idx[j], 0, capacity - 1)] * scale,
// src [rows, capacity] of src_dtype, idx [n] i32 or i64, dst [rows, n] f32. The invocations
// stride over the flattened [n, rows] grid (a column's rows run along memory), in a grid
// sized to keep the device full rather than one work group a column. Every index read from
// the device is clamped before the read it leads to: an address past a buffer can lose the
// device. With f32 columns, a scale of 1, rows a multiple of 4 and both ends 16-byte aligned
// the words move four at a time, as stored, and each invocation issues the reads of four
// items before their writes (offsets in 32 bits where the source's words allow). Elements
// narrower than 4 bytes are taken from the aligned word that holds them (each allocation has
// room past its end for that word).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
layout(local_size_x = 256) in;
// the source and the indices are only read, the destination only written (kernels.h: they
// do not overlap)
layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer U32 { uint v; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly restrict buffer W32 { uint v; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly restrict buffer U32x4 { uvec4 v; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly restrict buffer W32x4 { uvec4 v; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer I32 { int v; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly restrict buffer I64 { int64_t v; };
layout(push_constant) uniform P { AGPC_GATHER(AGPC_FIELD) } p;

uint word_at(uint64_t byte) { return U32(byte & ~3ul).v; }

// element e of the source as f32 (kernels.h's dtypes: 0 f32, 1 f16, 2 bf16, 3 u8, 4 i32, 5 i64)
float load(int64_t e) {
  switch (p.src_dtype) {
    case 1: {
      const uint64_t b = p.src_p + 2ul * uint64_t(e);
      const uint h = (word_at(b) >> ((uint(b) & 2u) * 8u)) & 0xffffu;
      return unpackHalf2x16(h).x;
    }
    case 2: {
      const uint64_t b = p.src_p + 2ul * uint64_t(e);
      const uint h = (word_at(b) >> ((uint(b) & 2u) * 8u)) & 0xffffu;
      return uintBitsToFloat(h << 16);
    }
    case 3: {
      const uint64_t b = p.src_p + uint64_t(e);
      return float((word_at(b) >> ((uint(b) & 3u) * 8u)) & 0xffu);
    }
    case 4: return float(I32(p.src_p + 4ul * uint64_t(e)).v);
    case 5: return float(I64(p.src_p + 8ul * uint64_t(e)).v);
  }
  return at(p.src_p, e).v;
}

// the source column of output column j, clamped into the buffer
int64_t column(const int64_t j) {
  const int64_t c = p.idx_dtype == 5 ? I64(p.idx_p + 8ul * uint64_t(j)).v : int64_t(I32(p.idx_p + 4ul * uint64_t(j)).v);
  return c < 0 ? 0 : (c >= p.capacity ? p.capacity - 1 : c);
}

// item (j, r) of the flattened [n, lanes] grid: column j, lane r
void move(const int64_t j, const int64_t r, const bool wide, const bool packed) {
  const int64_t c = column(j);
  if (wide) { // copied as stored, bits and all
    const int64_t lanes = p.rows / 4;
    W32x4(p.dst_p + 16ul * uint64_t(j * lanes + r)).v = U32x4(p.src_p + 16ul * uint64_t(c * lanes + r)).v;
  } else if (packed)
    W32(p.dst_p + 4ul * uint64_t(j * p.rows + r)).v = U32(p.src_p + 4ul * uint64_t(c * p.rows + r)).v;
  else
    at(p.dst_p, j * p.rows + r).v = load(c * p.rows + r) * p.scale;
}

void main() {
  const bool packed = p.src_dtype == 0 && p.scale == 1.0;
  const bool wide = p.wide != 0;
  const int64_t lanes = wide ? p.rows / 4 : p.rows; // what one invocation moves: 4 words or 1 element
  const int64_t total = lanes * p.n;
  const uint stride = gl_NumWorkGroups.x * 256u;
  if (total < 4294967296l && lanes < 4294967296l) { // 32-bit division where the grid allows it
    const uint t = uint(total), l = uint(lanes);
    uint e0 = gl_GlobalInvocationID.x;
    if (wide) { // four items at a time while four remain: items e0 + q * stride
      const bool small = p.capacity * lanes < 4294967296l; // every source offset (in 16 bytes) fits 32 bits
      while (e0 < t && t - e0 > 3u * stride) {
        uvec4 v[4];
        for (int q = 0; q < 4; q++) {
          const uint e = e0 + uint(q) * stride, j = e / l, r = e - j * l;
          const int64_t c = column(int64_t(j));
          const uint64_t w = small ? uint64_t(uint(c) * l + r) : uint64_t(c * lanes + int64_t(r));
          v[q] = U32x4(p.src_p + 16ul * w).v;
        }
        for (int q = 0; q < 4; q++) W32x4(p.dst_p + 16ul * uint64_t(e0 + uint(q) * stride)).v = v[q];
        const uint last = e0 + 3u * stride;
        if (t - last <= stride) { // last + stride would reach t or wrap past 2^32
          e0 = t;
          break;
        }
        e0 = last + stride;
      }
    }
    for (uint e = e0; e < t; e += stride) {
      const uint j = e / l;
      move(int64_t(j), int64_t(e - j * l), wide, packed);
      if (t - e <= stride) break; // e + stride would wrap past 2^32
    }
  } else {
    for (int64_t e = int64_t(gl_GlobalInvocationID.x); e < total; e += int64_t(stride))
      move(e / lanes, e % lanes, wide, packed);
  }
}
