/* convert.h — one value from any dtype to any other, written once for the
 * host and the device (AG__HD), so that the CPU and a GPU store the same bits.
 *
 * f16 and bf16 round to nearest even, as the hardware does. Between integer
 * dtypes (u8, i32, i64) values go exactly, never through f32. A floating
 * value bound for an integer dtype rounds to nearest even; one outside the
 * target's range saturates at its end and NaN becomes 0 (the host paths
 * refuse such values before converting; device data, which cannot be checked
 * before the kernel runs, is converted this way). */
#ifndef AGRL_BASE_CONVERT_H
#define AGRL_BASE_CONVERT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "agrl/tensor.h"
#include "base/hd.h"

AG__HD uint32_t ag__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

AG__HD float ag__bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

AG__HD uint16_t ag__f16_encode(float f) {
  uint32_t x = ag__f32_bits(f);
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

AG__HD float ag__f16_decode(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return ag__bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return ag__bits_f32(sign);
    float v = (float)man * (1.0f / 16777216.0f); /* man * 2^-24, exact */
    return sign ? -v : v;
  }
  return ag__bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

AG__HD uint16_t ag__bf16_encode(float f) {
  uint32_t x = ag__f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* nan */
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (uint16_t)(x >> 16);
}

AG__HD float ag__bf16_decode(uint16_t h) { return ag__bits_f32((uint32_t)h << 16); }

AG__HD int ag__dtype_is_int(ag_dtype dt) { return dt == AG_U8 || dt == AG_I32 || dt == AG_I64; }

AG__HD float ag__value_f32(const void *src, ag_dtype dt, int64_t i) {
  switch (dt) {
    case AG_F32: return ((const float *)src)[i];
    case AG_F16: return ag__f16_decode(((const uint16_t *)src)[i]);
    case AG_BF16: return ag__bf16_decode(((const uint16_t *)src)[i]);
    case AG_U8: return (float)((const uint8_t *)src)[i];
    case AG_I32: return (float)((const int32_t *)src)[i];
    case AG_I64: return (float)((const int64_t *)src)[i];
    default: return 0.0f;
  }
}

AG__HD int64_t ag__value_int(const void *src, ag_dtype dt, int64_t i) {
  switch (dt) {
    case AG_U8: return ((const uint8_t *)src)[i];
    case AG_I32: return ((const int32_t *)src)[i];
    default: return ((const int64_t *)src)[i];
  }
}

/* Stores integer v into an integer dtype, saturating at its range. */
AG__HD void ag__store_int(void *dst, ag_dtype dt, int64_t i, int64_t v) {
  switch (dt) {
    case AG_U8: ((uint8_t *)dst)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); break;
    case AG_I32:
      ((int32_t *)dst)[i] = (int32_t)(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v);
      break;
    default: ((int64_t *)dst)[i] = v; break;
  }
}

/* Stores f32 v into any dtype: floating ones rounded to nearest even, integer
 * ones rounded to nearest even and saturated (NaN: 0). */
AG__HD void ag__store_f32(void *dst, ag_dtype dt, int64_t i, float v) {
  switch (dt) {
    case AG_F32: ((float *)dst)[i] = v; return;
    case AG_F16: ((uint16_t *)dst)[i] = ag__f16_encode(v); return;
    case AG_BF16: ((uint16_t *)dst)[i] = ag__bf16_encode(v); return;
    default: break;
  }
  if (v != v) {
    ag__store_int(dst, dt, i, 0);
    return;
  }
  double r = rint((double)v);     /* exact: |v| < 2^24 has no fraction to lose, larger are whole */
  if (r >= 9223372036854775807.0) /* 2^63: the first double past INT64_MAX */
    ag__store_int(dst, dt, i, INT64_MAX);
  else if (r < -9223372036854775807.0) /* -2^63 and below */
    ag__store_int(dst, dt, i, INT64_MIN);
  else
    ag__store_int(dst, dt, i, (int64_t)r);
}

/* dst[i] = (dst_dt) src[j]: the rules above. */
AG__HD void ag__convert_one(void *dst, ag_dtype dst_dt, int64_t i, const void *src, ag_dtype src_dt,
                            int64_t j) {
  if (ag__dtype_is_int(src_dt) && ag__dtype_is_int(dst_dt))
    ag__store_int(dst, dst_dt, i, ag__value_int(src, src_dt, j));
  else
    ag__store_f32(dst, dst_dt, i, ag__value_f32(src, src_dt, j));
}

#endif /* AGRL_BASE_CONVERT_H */
