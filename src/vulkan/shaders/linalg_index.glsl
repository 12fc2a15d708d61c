// linalg_index.glsl — what the linalg shaders share: PICK's index read
// (base/scalar_ops.h's ag__pick_index) and i32 / i64 stores. Include after
// common.glsl.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer LI32 { int v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer LI64 { int64_t v; };

// i = idx[j * stride] of dtype (0 f32, 4 i32, 5 i64) clamped to 0 .. limit-1
// (limit >= 1). An f32 index is truncated toward zero, NaN as 0; a value past
// the range of int64 is taken as its end before the conversion (which would
// otherwise be undefined).
int64_t pick_index(uint64_t idx, int dtype, int64_t stride, int64_t j, int64_t limit) {
  const int64_t e = j * stride;
  int64_t i;
  if (dtype == 0) {
    const float f = at(idx, e).v;
    i = isnan(f) ? 0l : (f >= 9.2e18 ? 0x7fffffffffffffffl : (f <= -9.2e18 ? -0x7fffffffffffffffl : int64_t(f)));
  } else if (dtype == 4) {
    i = int64_t(LI32(idx + 4ul * uint64_t(e)).v);
  } else {
    i = LI64(idx + 8ul * uint64_t(e)).v;
  }
  return i < 0 ? 0l : (i >= limit ? limit - 1 : i);
}

// element k of an index array of dtype 4 (i32) or 5 (i64) = v
void index_put(uint64_t p, int dtype, int64_t k, int64_t v) {
  if (dtype == 4)
    LI32(p + 4ul * uint64_t(k)).v = int(v);
  else
    LI64(p + 8ul * uint64_t(k)).v = v;
}
