// common.glsl — what the shaders share: 64-bit addressing of f32 elements
// and kernels.h's matrices (element (r, c) at c * ld + r; an operand of one
// row or one column is broadcast along it).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32 { float v; };

F32 at(uint64_t base, int64_t i) { return F32(base + 4ul * uint64_t(i)); }

// the element (r, c) of a [rows, cols] matrix broadcast to the output's shape
float bcast(uint64_t p, int64_t rows, int64_t cols, int64_t ld, int64_t r, int64_t c) {
  return at(p, (cols == 1 ? 0 : c) * ld + (rows == 1 ? 0 : r)).v;
}

// NaN from the bits: a driver may turn comparisons that select into min / max
// instructions, or drop isnan() under its fast-math defaults
bool is_nan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }

// ag__max_takes_a / ag__min_takes_a (base/scalar_ops.h)
bool max_takes_a(float a, float b) { return is_nan(a) || (!is_nan(b) && a >= b); }
bool min_takes_a(float a, float b) { return is_nan(a) || (!is_nan(b) && a <= b); }

// ag__map_f, in the order of ag__map_op
float map_f(int op, float x, float p0, float p1) {
  switch (op) {
    case 0: return x;
    case 1: return p0 * x + p1;
    case 2: return x > 0.0 ? x : 0.0;
    case 3: return tanh(x);
    case 4: return 1.0 / (1.0 + exp(-x));
    case 5: return exp(x);
    case 6: return log(x);
    case 7: return x * x;
    case 8: return abs(x);
    case 9: {
      const float ax = abs(x);
      return ax <= p0 ? 0.5 * x * x : p0 * (ax - 0.5 * p0);
    }
    case 10: return is_nan(x) ? x : (x < p0 ? p0 : (x > p1 ? p1 : x));
  }
  return 0.0;
}

// ag__map2_f, in the order of ag__map2_op
float map2_f(int op, float a, float b, float p0, float p1) {
  switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return max_takes_a(a, b) ? a : b;
    case 5: return b > 0.0 ? a : 0.0;
    case 6: return a * (1.0 - b * b);
    case 7: return a * b * (1.0 - b);
    case 8: return a * (b < -p0 ? -p0 : (b > p0 ? p0 : b));
    case 9: return b > 0.0 ? a : (b < 0.0 ? -a : 0.0);
    case 10: return map_f(2, a + b, 0.0, 0.0);
    case 11: return map_f(3, a + b, 0.0, 0.0);
    case 12: return map_f(4, a + b, 0.0, 0.0);
    case 13: return min_takes_a(a, b) ? a : b;
    case 14: return max_takes_a(a, b) ? 1.0 : 0.0;
    case 15: return min_takes_a(a, b) ? 1.0 : 0.0;
    case 16: return b != 0.0 ? a : 0.0;
    case 17: return b != 0.0 ? 0.0 : a;
    case 18: return b >= p0 && b <= p1 ? a : 0.0;
  }
  return 0.0;
}
