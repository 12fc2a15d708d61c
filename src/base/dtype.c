/* dtype.c — element sizes, names and host-side conversions.
 *
 * f16 and bf16 conversions round to nearest even, as the hardware does, so
 * that a value written on the CPU and on the GPU stores the same bits.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"

size_t ag_dtype_size(ag_dtype dt) {
  switch (dt) {
    case AG_F32: return 4;
    case AG_F16: return 2;
    case AG_BF16: return 2;
    case AG_U8: return 1;
    case AG_I32: return 4;
    case AG_I64: return 8;
    default: return 0;
  }
}

const char *ag_dtype_name(ag_dtype dt) {
  switch (dt) {
    case AG_F32: return "f32";
    case AG_F16: return "f16";
    case AG_BF16: return "bf16";
    case AG_U8: return "u8";
    case AG_I32: return "i32";
    case AG_I64: return "i64";
    default: return "?";
  }
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t ag__f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xffu) /* inf or nan (keep nan quiet) */
    return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
  if (e <= 0) {                                   /* subnormal or zero */
    if (e < -10) return (uint16_t)sign;
    man |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half = 1u << (shift - 1);
    uint32_t rest = man & ((1u << shift) - 1);
    uint32_t m = man >> shift;
    if (rest > half || (rest == half && (m & 1u))) m++;
    return (uint16_t)(sign | m);
  }
  uint32_t m = man >> 13;
  uint32_t rest = man & 0x1fffu;
  uint32_t h = sign | ((uint32_t)e << 10) | m;
  if (rest > 0x1000u || (rest == 0x1000u && (m & 1u))) h++; /* may carry into exp: correct */
  return (uint16_t)h;
}

float ag__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return bits_f32(sign);
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t ag__f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* nan */
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (uint16_t)(x >> 16);
}

float ag__bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

float ag__load_f32(const void *src, ag_dtype dt, size_t i) {
  switch (dt) {
    case AG_F32: return ((const float *)src)[i];
    case AG_F16: return ag__f16_to_f32(((const uint16_t *)src)[i]);
    case AG_BF16: return ag__bf16_to_f32(((const uint16_t *)src)[i]);
    case AG_U8: return (float)((const uint8_t *)src)[i];
    case AG_I32: return (float)((const int32_t *)src)[i];
    case AG_I64: return (float)((const int64_t *)src)[i];
    default: return 0.0f;
  }
}

static void store_from_f32(void *dst, ag_dtype dt, size_t i, float v) {
  switch (dt) {
    case AG_F32: ((float *)dst)[i] = v; break;
    case AG_F16: ((uint16_t *)dst)[i] = ag__f32_to_f16(v); break;
    case AG_BF16: ((uint16_t *)dst)[i] = ag__f32_to_bf16(v); break;
    case AG_U8: ((uint8_t *)dst)[i] = (uint8_t)lrintf(v); break;
    case AG_I32: ((int32_t *)dst)[i] = (int32_t)lrintf(v); break;
    case AG_I64: ((int64_t *)dst)[i] = (int64_t)llrintf(v); break;
    default: break;
  }
}

static int is_int(ag_dtype dt) { return dt == AG_U8 || dt == AG_I32 || dt == AG_I64; }

static int64_t load_int(const void *src, ag_dtype dt, size_t i) {
  switch (dt) {
    case AG_U8: return ((const uint8_t *)src)[i];
    case AG_I32: return ((const int32_t *)src)[i];
    default: return ((const int64_t *)src)[i];
  }
}

/* The value must fit dt (checked by the caller). */
static void store_int(void *dst, ag_dtype dt, size_t i, int64_t v) {
  switch (dt) {
    case AG_U8: ((uint8_t *)dst)[i] = (uint8_t)v; break;
    case AG_I32: ((int32_t *)dst)[i] = (int32_t)v; break;
    default: ((int64_t *)dst)[i] = v; break;
  }
}

void ag__convert(void *dst, ag_dtype dst_dt, const void *src, ag_dtype src_dt, size_t n) {
  if (dst_dt == src_dt) {
    memcpy(dst, src, n * ag_dtype_size(dst_dt));
    return;
  }
  if (is_int(dst_dt) && is_int(src_dt)) { /* exact: never through f32, whose 24 bits lose 2^24 + 1 */
    for (size_t i = 0; i < n; i++) store_int(dst, dst_dt, i, load_int(src, src_dt, i));
    return;
  }
  for (size_t i = 0; i < n; i++) store_from_f32(dst, dst_dt, i, ag__load_f32(src, src_dt, i));
}

int64_t ag__first_unfit(const float *src, size_t n, ag_dtype dt) {
  double lo, hi;
  switch (dt) {
    case AG_U8:
      lo = -0.5;
      hi = 255.5;
      break;
    case AG_I32:
      lo = -2147483648.5;
      hi = 2147483647.5;
      break;
    default: return -1; /* floating types take any value */
  }
  for (size_t i = 0; i < n; i++) {
    double v = src[i];
    if (!(v >= lo && v < hi)) return (int64_t)i; /* catches nan too */
  }
  return -1;
}
