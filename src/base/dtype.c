/* dtype.c — element sizes, names and host-side conversions.
 *
 * The value conversions are those of convert.h, which the devices share.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "base/convert.h"

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

/* The conversions themselves are in convert.h, shared with the devices. */
uint16_t ag__f32_to_f16(float f) { return ag__f16_encode(f); }
float ag__f16_to_f32(uint16_t h) { return ag__f16_decode(h); }
uint16_t ag__f32_to_bf16(float f) { return ag__bf16_encode(f); }
float ag__bf16_to_f32(uint16_t h) { return ag__bf16_decode(h); }
float ag__load_f32(const void *src, ag_dtype dt, size_t i) { return ag__value_f32(src, dt, (int64_t)i); }

void ag__convert(void *dst, ag_dtype dst_dt, const void *src, ag_dtype src_dt, size_t n) {
  if (dst_dt == src_dt) {
    memcpy(dst, src, n * ag_dtype_size(dst_dt));
    return;
  }
  for (size_t i = 0; i < n; i++) ag__convert_one(dst, dst_dt, (int64_t)i, src, src_dt, (int64_t)i);
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
