/* scalar_ops.h — the elementwise functions of the MAP / MAP2 / PICK kernels,
 * the loss and Adam's step, written once for the CPU reference and the CUDA
 * kernels (kernels.h). */
#ifndef AGRL_CORE_SCALAR_OPS_H
#define AGRL_CORE_SCALAR_OPS_H

#include <math.h>
#include <stdint.h>

#include "base/base.h"
#include "base/hd.h"
#include "base/kernels.h"

AG__HD float ag__map_f(ag__map_op op, float x, float p0, float p1) {
  switch (op) {
    case AG__MAP_IDENT: return x;
    case AG__MAP_AFFINE: return p0 * x + p1;
    case AG__MAP_RELU: return x > 0.0f ? x : 0.0f;
    case AG__MAP_TANH: return tanhf(x);
    case AG__MAP_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case AG__MAP_EXP: return expf(x);
    case AG__MAP_LOG: return logf(x);
    case AG__MAP_SQUARE: return x * x;
    case AG__MAP_ABS: return fabsf(x);
    case AG__MAP_HUBER: {
      float ax = fabsf(x);
      return ax <= p0 ? 0.5f * x * x : p0 * (ax - 0.5f * p0);
    }
    case AG__MAP_CLAMP: return x < p0 ? p0 : (x > p1 ? p1 : x); /* NaN fails both: kept */
    default: return 0.0f;
  }
}

/* Where max(a, b) and min(a, b) take a: on a tie, and wherever a is NaN
 * (b NaN and a not: b), so that a NaN in either operand gives NaN. The
 * forward values and the gradients' masks both come from here. */
AG__HD int ag__max_takes_a(float a, float b) { return a >= b || a != a; }
AG__HD int ag__min_takes_a(float a, float b) { return a <= b || a != a; }

AG__HD float ag__map2_f(ag__map2_op op, float a, float b, float p0, float p1) {
  switch (op) {
    case AG__MAP2_ADD: return a + b;
    case AG__MAP2_SUB: return a - b;
    case AG__MAP2_MUL: return a * b;
    case AG__MAP2_DIV: return a / b;
    case AG__MAP2_MAX: return ag__max_takes_a(a, b) ? a : b;
    case AG__MAP2_RELU_BWD: return b > 0.0f ? a : 0.0f;
    case AG__MAP2_TANH_BWD: return a * (1.0f - b * b);
    case AG__MAP2_SIGMOID_BWD: return a * b * (1.0f - b);
    case AG__MAP2_HUBER_BWD: return a * (b < -p0 ? -p0 : (b > p0 ? p0 : b));
    case AG__MAP2_ABS_BWD: return b > 0.0f ? a : (b < 0.0f ? -a : 0.0f);
    case AG__MAP2_ADD_RELU: return ag__map_f(AG__MAP_RELU, a + b, 0.0f, 0.0f);
    case AG__MAP2_ADD_TANH: return ag__map_f(AG__MAP_TANH, a + b, 0.0f, 0.0f);
    case AG__MAP2_ADD_SIGMOID: return ag__map_f(AG__MAP_SIGMOID, a + b, 0.0f, 0.0f);
    case AG__MAP2_MIN: return ag__min_takes_a(a, b) ? a : b;
    case AG__MAP2_MAX_MASK: return ag__max_takes_a(a, b) ? 1.0f : 0.0f;
    case AG__MAP2_MIN_MASK: return ag__min_takes_a(a, b) ? 1.0f : 0.0f;
    case AG__MAP2_MASK_BWD: return b != 0.0f ? a : 0.0f;
    case AG__MAP2_UNMASK_BWD: return b != 0.0f ? 0.0f : a;
    case AG__MAP2_CLAMP_BWD: return b >= p0 && b <= p1 ? a : 0.0f;
    default: return 0.0f;
  }
}

/* Index j of a pick: a whole number (f32 truncated toward zero, NaN as 0),
 * clamped to 0..limit-1. */
AG__HD int64_t ag__pick_index(const void *idx, ag_dtype dt, int64_t stride, int64_t j, int64_t limit) {
  int64_t i;
  if (dt == AG_F32) {
    float f = ((const float *)idx)[j * stride];
    i = f != f ? 0 : (f >= 9.2e18f ? INT64_MAX : (f <= -9.2e18f ? INT64_MIN : (int64_t)f));
  } else if (dt == AG_I32) {
    i = ((const int32_t *)idx)[j * stride];
  } else {
    i = ((const int64_t *)idx)[j * stride];
  }
  return ag__clamp_index(i, limit);
}

/* The loss function of AG__K_LOSS and its derivative, at d = pred - target. */
AG__HD float ag__loss_f(int kind, float d, float delta) {
  return kind == 0 ? d * d : ag__map_f(AG__MAP_HUBER, d, delta, 0.0f);
}
AG__HD float ag__loss_df(int kind, float d, float delta) {
  return kind == 0 ? 2.0f * d : (d < -delta ? -delta : (d > delta ? delta : d));
}

/* ADAM_PREP's values from the optimizer's state as it stands: t, 1 - b1^t,
 * 1 - b2^t, the clip coefficient. */
AG__HD void ag__adam_values(const float *state, float b1, float b2, float max_norm, float v[4]) {
  const float t = state[AG__OPT_T] + 1.0f;
  v[0] = t;
  v[1] = 1.0f - powf(b1, t);
  v[2] = 1.0f - powf(b2, t);
  const float norm = sqrtf(state[AG__OPT_SUMSQ]);
  v[3] = max_norm > 0.0f ? fminf(1.0f, max_norm / (norm + 1e-6f)) : 1.0f;
}

/* Stores them; the next step's sum of squares starts at 0. */
AG__HD void ag__adam_store(float *state, const float v[4]) {
  state[AG__OPT_T] = v[0];
  state[AG__OPT_BC1] = v[1];
  state[AG__OPT_BC2] = v[2];
  state[AG__OPT_COEF] = v[3];
  state[AG__OPT_SUMSQ] = 0.0f;
}

/* One element's Adam (or SGD) step: p, m, v in place. */
AG__HD void ag__adam_elem(int sgd, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                          float coef, float g, float *p, float *m, float *v) {
  const float gr = coef * g + wd * *p;
  if (sgd) {
    *p -= lr * gr;
    return;
  }
  *m = b1 * *m + (1.0f - b1) * gr;
  *v = b2 * *v + (1.0f - b2) * gr * gr;
  *p -= lr * (*m / bc1) / (sqrtf(*v / bc2) + eps);
}

/* Element (r, c) of a matrix, broadcasting a 1-row or 1-column operand. */
AG__HD float ag__mat_at(ag__mat m, int64_t r, int64_t c) {
  return m.p[(m.cols == 1 ? 0 : c) * m.ld + (m.rows == 1 ? 0 : r)];
}

#endif /* AGRL_CORE_SCALAR_OPS_H */
