// optim_convert.comp — AG__K_CONVERT: dst[c * dst_ld + r] = (dst_dtype)
// src[c * src_ld + r] by base/convert.h's rules, in integer arithmetic on
// the values' bits wherever convert.h has them (f16 / bf16 rounding, NaN,
// subnormals: a device's float path may flush or round otherwise).
// dtypes: 0 f32, 1 f16, 2 bf16, 3 u8, 4 i32, 5 i64.
//
// A destination of 4 or 8 bytes an element: a thread an element. Of 1 or 2
// bytes: a thread an aligned 32-bit word of one column (item w of a column
// is the word w past the one holding its first element, `words` of them a
// column), storing the word whole when every byte of it is the column's,
// else only its own bytes with atomicAnd / atomicOr (the bytes around a
// column belong to others: another column or another tensor). Source
// elements narrower than 4 bytes are read from the aligned word that holds
// them (each allocation has room past its end for that word).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32 { uint v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64 { int64_t v; };
layout(push_constant) uniform P { AGPC_OPTIM_CONVERT(AGPC_FIELD) } p;

uint word_at(uint64_t byte) { return U32(byte & ~3ul).v; }

bool is_int(int dt) { return dt >= 3; }

// ag__value_int
int64_t load_int(int64_t e) {
  if (p.src_dtype == 3) {
    const uint64_t b = p.src_p + uint64_t(e);
    return int64_t((word_at(b) >> ((uint(b) & 3u) * 8u)) & 0xffu);
  }
  if (p.src_dtype == 4) return int64_t(int(U32(p.src_p + 4ul * uint64_t(e)).v));
  return I64(p.src_p + 8ul * uint64_t(e)).v;
}

// the f32 nearest an integer (ties to even), as its bits
uint int_f32_bits(int64_t x) {
  const uint sign = x < 0 ? 0x80000000u : 0u;
  uint64_t u = x < 0 ? uint64_t(-x) : uint64_t(x); // -INT64_MIN wraps to 2^63: right as unsigned
  if (u == 0ul) return 0u;
  const uint hi = uint(u >> 32);
  const int msb = hi != 0u ? 32 + findMSB(hi) : findMSB(uint(u));
  uint m;
  if (msb <= 23) {
    m = uint(u) << (23 - msb);
  } else {
    const int shift = msb - 23;
    m = uint(u >> shift);
    const uint64_t rest = u & ((1ul << shift) - 1ul), half_ = 1ul << (shift - 1);
    if (rest > half_ || (rest == half_ && (m & 1u) != 0u)) m++; // 2^24: carries into the exponent
  }
  return sign | ((uint(msb + 127) << 23) + m - 0x800000u);
}

// ag__f16_decode, as f32 bits
uint f16_f32_bits(uint h) {
  const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (e == 0x1fu) return sign | 0x7f800000u | (man << 13);
  if (e == 0u) {
    if (man == 0u) return sign;
    const int msb = findMSB(man); // man 2^-24 = 2^(msb - 24) (1 + the bits below msb)
    return sign | (uint(msb - 24 + 127) << 23) | ((man << (23 - msb)) & 0x7fffffu);
  }
  return sign | ((e - 15u + 127u) << 23) | (man << 13);
}

// ag__value_f32, as bits
uint load_f32_bits(int64_t e) {
  switch (p.src_dtype) {
    case 0: return U32(p.src_p + 4ul * uint64_t(e)).v;
    case 1:
    case 2: {
      const uint64_t b = p.src_p + 2ul * uint64_t(e);
      const uint h = (word_at(b) >> ((uint(b) & 2u) * 8u)) & 0xffffu;
      return p.src_dtype == 1 ? f16_f32_bits(h) : h << 16;
    }
  }
  return int_f32_bits(load_int(e));
}

// ag__f16_encode
uint f16_encode(uint x) {
  const uint sign = (x >> 16) & 0x8000u, ex = (x >> 23) & 0xffu;
  uint man = x & 0x7fffffu;
  if (ex == 0xffu) return sign | 0x7c00u | (man != 0u ? 0x200u | (man >> 13) : 0u);
  const int e = int(ex) - 127 + 15;
  if (e >= 31) return sign | 0x7c00u;
  if (e <= 0) {
    if (e < -10) return sign;
    man |= 0x800000u;
    const uint shift = uint(14 - e), half_ = 1u << (shift - 1u), rest = man & ((1u << shift) - 1u);
    uint m = man >> shift;
    if (rest > half_ || (rest == half_ && (m & 1u) != 0u)) m++;
    return sign | m;
  }
  const uint m = man >> 13, rest = man & 0x1fffu;
  uint h = sign | (uint(e) << 10) | m;
  if (rest > 0x1000u || (rest == 0x1000u && (m & 1u) != 0u)) h++;
  return h;
}

// ag__bf16_encode
uint bf16_encode(uint x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return ((x >> 16) | 0x40u) & 0xffffu;
  return ((x + 0x7fffu + ((x >> 16) & 1u)) >> 16) & 0xffffu;
}

// ag__store_int's saturation
int64_t sat(int64_t v) {
  if (p.dst_dtype == 3) return v < 0l ? 0l : (v > 255l ? 255l : v);
  if (p.dst_dtype == 4) return v < -2147483648l ? -2147483648l : (v > 2147483647l ? 2147483647l : v);
  return v;
}

// the converted value of source element e, as the destination stores it (the
// low bytes of a 64-bit pattern)
uint64_t convert(int64_t e) {
  if (is_int(p.src_dtype) && is_int(p.dst_dtype)) return uint64_t(sat(load_int(e)));
  const uint x = load_f32_bits(e);
  switch (p.dst_dtype) {
    case 0: return uint64_t(x);
    case 1: return uint64_t(f16_encode(x));
    case 2: return uint64_t(bf16_encode(x));
  }
  // ag__store_f32 to an integer dtype: NaN 0, else rounded to nearest even
  // (exact in f32) and saturated at the int64 range, then the dtype's
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0ul;
  const float r = roundEven(uintBitsToFloat(x));
  int64_t v;
  if (r >= 9223372036854775808.0) v = 9223372036854775807l;
  else if (r < -9223372036854775808.0) v = -9223372036854775807l - 1l;
  else v = int64_t(r);
  return uint64_t(sat(v));
}

void main() {
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  const int dst_dtype = p.dst_dtype;
  const int es = dst_dtype == 1 || dst_dtype == 2 ? 2 : (dst_dtype == 3 ? 1 : (dst_dtype == 5 ? 8 : 4));
  for (int64_t i = int64_t(gl_GlobalInvocationID.x); i < p.items; i += stride) {
    if (es >= 4) {
      const int64_t r = p.cols == 1 ? i : i % p.rows, c = p.cols == 1 ? 0 : i / p.rows;
      const uint64_t val = convert(c * p.src_ld + r);
      const uint64_t d = p.dst_p + uint64_t(es) * uint64_t(c * p.dst_ld + r);
      if (es == 8) I64(d).v = int64_t(val);
      else U32(d).v = uint(val);
      continue;
    }
    const int64_t w = p.cols == 1 ? i : i % p.words, c = p.cols == 1 ? 0 : i / p.words;
    const uint64_t col = p.dst_p + uint64_t(es) * uint64_t(c * p.dst_ld); // the column's first byte
    const uint64_t end = col + uint64_t(es) * uint64_t(p.rows);
    const uint64_t word = (col & ~3ul) + 4ul * uint64_t(w);
    if (word >= end) continue;
    uint bits = 0u, mask = 0u;
    for (uint j = 0u; j < 4u; j += uint(es)) {
      const uint64_t b = word + j;
      if (b < col || b >= end) continue;
      const int64_t r = int64_t(b - col) >> (es == 2 ? 1 : 0);
      const uint emask = es == 1 ? 0xffu : 0xffffu;
      bits |= (uint(convert(c * p.src_ld + r)) & emask) << (8u * j);
      mask |= emask << (8u * j);
    }
    if (mask == 0xffffffffu) {
      U32(word).v = bits;
    } else {
      atomicAnd(U32(word).v, ~mask);
      atomicOr(U32(word).v, bits);
    }
  }
}
