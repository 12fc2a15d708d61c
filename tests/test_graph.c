/* test_graph.c — ops, gradients, nn and optimizers on one device.
 *
 * Every differentiable op is checked against a double-precision reference
 * written here: its forward values, and its gradients against central finite
 * differences of the reference. Run as `test_graph cpu` or `test_graph cuda`;
 * the cuda run also compares every op with the CPU backend.
 */
#include <math.h>
#include <unistd.h>

#include "agt.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

/* ---- the op table ---- */

#define MAXIN 3

typedef struct op_case {
  const char *name;
  int n_in;
  int64_t shape[MAXIN][2];
  float lo, hi; /* inputs drawn in [lo, hi], |x| >= gap (away from kinks) */
  float gap;
  int64_t out_rows, out_cols;
  /* agrl: out = f(in) */
  ag_status (*run)(ag_tensor **in, ag_tensor **out);
  /* reference in double: out = f(in) (column-major, contiguous) */
  void (*ref)(double **in, const int64_t (*shape)[2], double *out);
} op_case;

static int64_t R_(const int64_t (*s)[2], int i) { return s[i][0]; }
static int64_t C_(const int64_t (*s)[2], int i) { return s[i][1]; }

/* broadcast read of input i at (r, c) */
static double bat(double **in, const int64_t (*s)[2], int i, int64_t r, int64_t c) {
  int64_t rr = s[i][0] == 1 ? 0 : r, cc = s[i][1] == 1 ? 0 : c;
  return in[i][cc * s[i][0] + rr];
}

#define OUTDIM(R, C)          \
  int64_t RR = (R), CC = (C); \
  (void)RR;                   \
  (void)CC
#define LOOP2                      \
  for (int64_t c = 0; c < CC; c++) \
    for (int64_t r = 0; r < RR; r++)

/* matmul variants */
static ag_status run_mm_nn(ag_tensor **in, ag_tensor **out) { return ag_matmul(in[0], 0, in[1], 0, out); }
static ag_status run_mm_tn(ag_tensor **in, ag_tensor **out) { return ag_matmul(in[0], 1, in[1], 0, out); }
static ag_status run_mm_nt(ag_tensor **in, ag_tensor **out) { return ag_matmul(in[0], 0, in[1], 1, out); }
static ag_status run_mm_tt(ag_tensor **in, ag_tensor **out) { return ag_matmul(in[0], 1, in[1], 1, out); }
static void ref_mm(double **in, const int64_t (*s)[2], double *out, int ta, int tb) {
  int64_t m = ta ? C_(s, 0) : R_(s, 0), k = ta ? R_(s, 0) : C_(s, 0), n = tb ? R_(s, 1) : C_(s, 1);
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < m; i++) {
      double acc = 0;
      for (int64_t p = 0; p < k; p++) {
        double a = ta ? in[0][i * R_(s, 0) + p] : in[0][p * R_(s, 0) + i];
        double b = tb ? in[1][p * R_(s, 1) + j] : in[1][j * R_(s, 1) + p];
        acc += a * b;
      }
      out[j * m + i] = acc;
    }
}
static void ref_mm_nn(double **in, const int64_t (*s)[2], double *out) { ref_mm(in, s, out, 0, 0); }
static void ref_mm_tn(double **in, const int64_t (*s)[2], double *out) { ref_mm(in, s, out, 1, 0); }
static void ref_mm_nt(double **in, const int64_t (*s)[2], double *out) { ref_mm(in, s, out, 0, 1); }
static void ref_mm_tt(double **in, const int64_t (*s)[2], double *out) { ref_mm(in, s, out, 1, 1); }

/* binary ops with broadcasting */
static int64_t bmax(int64_t a, int64_t b) { return a > b ? a : b; }
#define BINARY(NAME, EXPR)                                                                              \
  static ag_status run_##NAME(ag_tensor **in, ag_tensor **out) { return ag_##NAME(in[0], in[1], out); } \
  static void ref_##NAME(double **in, const int64_t(*s)[2], double *out) {                              \
    OUTDIM(bmax(R_(s, 0), R_(s, 1)), bmax(C_(s, 0), C_(s, 1)));                                         \
    LOOP2 {                                                                                             \
      double a = bat(in, s, 0, r, c), b = bat(in, s, 1, r, c);                                          \
      out[c * RR + r] = (EXPR);                                                                         \
    }                                                                                                   \
  }
BINARY(add, a + b)
BINARY(sub, a - b)
BINARY(mul, a *b)
BINARY(div, a / b)
BINARY(minimum, a <= b ? a : b)
BINARY(maximum, a >= b ? a : b)

/* unary ops */
#define UNARY(NAME, CALL, EXPR)                                                 \
  static ag_status run_##NAME(ag_tensor **in, ag_tensor **out) { return CALL; } \
  static void ref_##NAME(double **in, const int64_t(*s)[2], double *out) {      \
    for (int64_t i = 0; i < R_(s, 0) * C_(s, 0); i++) {                         \
      double x = in[0][i];                                                      \
      out[i] = (EXPR);                                                          \
    }                                                                           \
  }
UNARY(scale, ag_scale(in[0], -2.5f, out), -2.5 * x)
UNARY(affine, ag_affine(in[0], 0.5f, 3.0f, out), 0.5 * x + 3.0)
UNARY(relu, ag_relu(in[0], out), x > 0 ? x : 0)
UNARY(tanh, ag_tanh(in[0], out), tanh(x))
UNARY(sigmoid, ag_sigmoid(in[0], out), 1.0 / (1.0 + exp(-x)))
UNARY(exp, ag_exp(in[0], out), exp(x))
UNARY(log, ag_log(in[0], out), log(x))
UNARY(square, ag_square(in[0], out), x *x)
UNARY(abs, ag_abs(in[0], out), fabs(x))
UNARY(huber_map, ag_huber(in[0], 0.7f, out), fabs(x) <= 0.7 ? 0.5 * x * x : 0.7 * (fabs(x) - 0.35))
UNARY(clamp, ag_clamp(in[0], -0.5f, 0.75f, out), x < -0.5 ? -0.5 : (x > 0.75 ? 0.75 : x))

/* reductions */
#define REDUCE(NAME, CALL, AXIS, MEAN)                                          \
  static ag_status run_##NAME(ag_tensor **in, ag_tensor **out) { return CALL; } \
  static void ref_##NAME(double **in, const int64_t(*s)[2], double *out) {      \
    int64_t R = R_(s, 0), C = C_(s, 0);                                         \
    int64_t oR = (AXIS) == 1 ? R : 1, oC = (AXIS) == 0 ? C : 1;                 \
    for (int64_t i = 0; i < oR * oC; i++) out[i] = 0;                           \
    for (int64_t c = 0; c < C; c++)                                             \
      for (int64_t r = 0; r < R; r++) {                                         \
        int64_t o = (AXIS) == 0 ? c : ((AXIS) == 1 ? r : 0);                    \
        out[o] += in[0][c * R + r];                                             \
      }                                                                         \
    double n = (AXIS) == 0 ? R : ((AXIS) == 1 ? C : R * C);                     \
    if (MEAN)                                                                   \
      for (int64_t i = 0; i < oR * oC; i++) out[i] /= n;                        \
  }
REDUCE(sum0, ag_sum(in[0], AG_AXIS_ROWS, out), 0, 0)
REDUCE(sum1, ag_sum(in[0], AG_AXIS_COLS, out), 1, 0)
REDUCE(sum2, ag_sum(in[0], AG_AXIS_ALL, out), 2, 0)
REDUCE(mean0, ag_mean(in[0], AG_AXIS_ROWS, out), 0, 1)
REDUCE(mean1, ag_mean(in[0], AG_AXIS_COLS, out), 1, 1)
REDUCE(mean2, ag_mean(in[0], AG_AXIS_ALL, out), 2, 1)

static ag_status run_max0(ag_tensor **in, ag_tensor **out) { return ag_max(in[0], AG_AXIS_ROWS, out); }
static ag_status run_max1(ag_tensor **in, ag_tensor **out) { return ag_max(in[0], AG_AXIS_COLS, out); }
static void ref_max(double **in, const int64_t (*s)[2], double *out, int axis) {
  int64_t R = R_(s, 0), C = C_(s, 0), outer = axis == 0 ? C : R, inner = axis == 0 ? R : C;
  for (int64_t o = 0; o < outer; o++) {
    double best = -INFINITY;
    for (int64_t i = 0; i < inner; i++) {
      double v = axis == 0 ? in[0][o * R + i] : in[0][i * R + o];
      if (v > best) best = v;
    }
    out[o] = best;
  }
}
static void ref_max0(double **in, const int64_t (*s)[2], double *out) { ref_max(in, s, out, 0); }
static void ref_max1(double **in, const int64_t (*s)[2], double *out) { ref_max(in, s, out, 1); }

/* pick with indices given as an f32 row view of a bigger tensor (like the
 * action row of a gathered batch): x [5, 7], idx row 2 of a [3, 7] table */
static const float pick_idx[7] = {4, 0, 2, 2, 1, 3, 4};
static ag_status run_pick(ag_tensor **in, ag_tensor **out) {
  float table[21];
  for (int j = 0; j < 7; j++) table[j * 3] = -1, table[j * 3 + 1] = 99, table[j * 3 + 2] = pick_idx[j];
  ag_tensor *t = NULL, *row = NULL;
  ag_status s = ag_tensor_create(ag_tensor_ctx(in[0]), 3, 7, AG_F32, table, &t);
  if (!s) s = ag_slice_rows(t, 2, 1, &row);
  if (!s) s = ag_pick(in[0], row, out);
  ag_ctx_sync(ag_tensor_ctx(in[0]));
  /* the table is persistent: freed when the context is freed */
  return s;
}
static void ref_pick(double **in, const int64_t (*s)[2], double *out) {
  for (int j = 0; j < 7; j++) out[j] = in[0][j * R_(s, 0) + (int)pick_idx[j]];
}

/* views and joins (followed by a square so the gradient is not constant) */
static ag_status run_slice_rows(ag_tensor **in, ag_tensor **out) {
  ag_tensor *v, *c;
  ag_status s = ag_slice_rows(in[0], 1, 3, &v);
  if (!s) s = ag_contiguous(v, &c);
  return s ? s : ag_square(c, out);
}
static void ref_slice_rows(double **in, const int64_t (*s)[2], double *out) {
  for (int64_t c = 0; c < C_(s, 0); c++)
    for (int64_t r = 0; r < 3; r++) out[c * 3 + r] = pow(in[0][c * R_(s, 0) + 1 + r], 2);
}
static ag_status run_slice_cols(ag_tensor **in, ag_tensor **out) {
  ag_tensor *v;
  ag_status s = ag_slice_cols(in[0], 2, 3, &v);
  return s ? s : ag_square(v, out);
}
static void ref_slice_cols(double **in, const int64_t (*s)[2], double *out) {
  for (int64_t c = 0; c < 3; c++)
    for (int64_t r = 0; r < R_(s, 0); r++) out[c * R_(s, 0) + r] = pow(in[0][(c + 2) * R_(s, 0) + r], 2);
}
static ag_status run_concat_rows(ag_tensor **in, ag_tensor **out) {
  return ag_concat_rows(in[0], in[1], out);
}
static void ref_concat_rows(double **in, const int64_t (*s)[2], double *out) {
  int64_t ra = R_(s, 0), rb = R_(s, 1);
  for (int64_t c = 0; c < C_(s, 0); c++) {
    for (int64_t r = 0; r < ra; r++) out[c * (ra + rb) + r] = in[0][c * ra + r];
    for (int64_t r = 0; r < rb; r++) out[c * (ra + rb) + ra + r] = in[1][c * rb + r];
  }
}
static ag_status run_concat_cols(ag_tensor **in, ag_tensor **out) {
  return ag_concat_cols(in[0], in[1], out);
}
static void ref_concat_cols(double **in, const int64_t (*s)[2], double *out) {
  int64_t na = R_(s, 0) * C_(s, 0);
  for (int64_t i = 0; i < na; i++) out[i] = in[0][i];
  for (int64_t i = 0; i < R_(s, 1) * C_(s, 1); i++) out[na + i] = in[1][i];
}

/* losses */
static ag_status run_mse(ag_tensor **in, ag_tensor **out) { return ag_mse_loss(in[0], in[1], out); }
static void ref_mse(double **in, const int64_t (*s)[2], double *out) {
  int64_t n = R_(s, 0) * C_(s, 0);
  double acc = 0;
  for (int64_t i = 0; i < n; i++) acc += pow(in[0][i] - in[1][i], 2);
  out[0] = acc / (double)n;
}
static ag_status run_huber(ag_tensor **in, ag_tensor **out) { return ag_huber_loss(in[0], in[1], 1.0f, out); }
static void ref_huber(double **in, const int64_t (*s)[2], double *out) {
  int64_t n = R_(s, 0) * C_(s, 0);
  double acc = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = in[0][i] - in[1][i], ad = fabs(d);
    acc += ad <= 1.0 ? 0.5 * d * d : ad - 0.5;
  }
  out[0] = acc / (double)n;
}

/* fused bias + activation */
#define BIAS_ACT(NAME, KIND, EXPR)                                         \
  static ag_status run_##NAME(ag_tensor **in, ag_tensor **out) {           \
    return ag_bias_act(in[0], in[1], KIND, out);                           \
  }                                                                        \
  static void ref_##NAME(double **in, const int64_t(*s)[2], double *out) { \
    OUTDIM(R_(s, 0), C_(s, 0));                                            \
    LOOP2 {                                                                \
      double x = bat(in, s, 0, r, c) + bat(in, s, 1, r, c);                \
      out[c * RR + r] = (EXPR);                                            \
    }                                                                      \
  }
BIAS_ACT(bias_relu, AG_BIAS_RELU, x > 0 ? x : 0)
BIAS_ACT(bias_tanh, AG_BIAS_TANH, tanh(x))
BIAS_ACT(bias_sigmoid, AG_BIAS_SIGMOID, 1.0 / (1.0 + exp(-x)))

/* a two-layer perceptron built from ops: tanh(W2 relu(W1 x + b1) + b2) */
static ag_status run_mlp(ag_tensor **in, ag_tensor **out) {
  ag_tensor *h, *hb, *a, *z;
  ag_status s = ag_matmul(in[1], 0, in[0], 0, &h); /* W1 [4, 3] x [3, 5] */
  if (!s) s = ag_add(h, in[2], &hb);               /* + b1 [4, 1] */
  if (!s) s = ag_relu(hb, &a);
  if (!s) s = ag_sum(a, AG_AXIS_ROWS, &z); /* [1, 5] */
  return s ? s : ag_tanh(z, out);
}
static void ref_mlp(double **in, const int64_t (*s)[2], double *out) {
  for (int c = 0; c < 5; c++) {
    double z = 0;
    for (int r = 0; r < 4; r++) {
      double h = in[2][r];
      for (int k = 0; k < 3; k++) h += in[1][k * 4 + r] * in[0][c * 3 + k];
      z += h > 0 ? h : 0;
    }
    out[c] = tanh(z);
  }
  (void)s;
}

static const op_case cases[] = {
    {"matmul", 2, {{4, 3}, {3, 5}}, -1, 1, 0, 4, 5, run_mm_nn, ref_mm_nn},
    {"matmul a^T", 2, {{3, 4}, {3, 5}}, -1, 1, 0, 4, 5, run_mm_tn, ref_mm_tn},
    {"matmul b^T", 2, {{4, 3}, {5, 3}}, -1, 1, 0, 4, 5, run_mm_nt, ref_mm_nt},
    {"matmul a^T b^T", 2, {{3, 4}, {5, 3}}, -1, 1, 0, 4, 5, run_mm_tt, ref_mm_tt},
    {"add", 2, {{3, 4}, {3, 4}}, -1, 1, 0, 3, 4, run_add, ref_add},
    {"add bias column", 2, {{3, 4}, {3, 1}}, -1, 1, 0, 3, 4, run_add, ref_add},
    {"add row to matrix", 2, {{1, 4}, {3, 4}}, -1, 1, 0, 3, 4, run_add, ref_add},
    {"sub scalar", 2, {{3, 4}, {1, 1}}, -1, 1, 0, 3, 4, run_sub, ref_sub},
    {"mul", 2, {{3, 4}, {3, 4}}, -1, 1, 0, 3, 4, run_mul, ref_mul},
    {"mul row", 2, {{3, 4}, {1, 4}}, -1, 1, 0, 3, 4, run_mul, ref_mul},
    {"div", 2, {{3, 4}, {3, 4}}, 0.5f, 2, 0, 3, 4, run_div, ref_div},
    {"div column", 2, {{3, 4}, {3, 1}}, 0.5f, 2, 0, 3, 4, run_div, ref_div},
    {"scale", 1, {{3, 4}}, -1, 1, 0, 3, 4, run_scale, ref_scale},
    {"affine", 1, {{3, 4}}, -1, 1, 0, 3, 4, run_affine, ref_affine},
    {"relu", 1, {{3, 4}}, -1, 1, 0.05f, 3, 4, run_relu, ref_relu},
    {"tanh", 1, {{3, 4}}, -2, 2, 0, 3, 4, run_tanh, ref_tanh},
    {"sigmoid", 1, {{3, 4}}, -3, 3, 0, 3, 4, run_sigmoid, ref_sigmoid},
    {"exp", 1, {{3, 4}}, -1, 1, 0, 3, 4, run_exp, ref_exp},
    {"log", 1, {{3, 4}}, 0.5f, 3, 0, 3, 4, run_log, ref_log},
    {"square", 1, {{3, 4}}, -1, 1, 0, 3, 4, run_square, ref_square},
    {"abs", 1, {{3, 4}}, -1, 1, 0.05f, 3, 4, run_abs, ref_abs},
    {"huber (elementwise)", 1, {{3, 4}}, -2, 2, 0, 3, 4, run_huber_map, ref_huber_map},
    {"sum rows", 1, {{3, 4}}, -1, 1, 0, 1, 4, run_sum0, ref_sum0},
    {"sum cols", 1, {{3, 4}}, -1, 1, 0, 3, 1, run_sum1, ref_sum1},
    {"sum all", 1, {{3, 4}}, -1, 1, 0, 1, 1, run_sum2, ref_sum2},
    {"mean rows (long)", 1, {{100, 3}}, -1, 1, 0, 1, 3, run_mean0, ref_mean0},
    {"mean cols (long)", 1, {{3, 100}}, -1, 1, 0, 3, 1, run_mean1, ref_mean1},
    {"mean all", 1, {{7, 9}}, -1, 1, 0, 1, 1, run_mean2, ref_mean2},
    {"max rows", 1, {{5, 6}}, -1, 1, 0, 1, 6, run_max0, ref_max0},
    {"max cols", 1, {{5, 6}}, -1, 1, 0, 5, 1, run_max1, ref_max1},
    {"max rows (long)", 1, {{100, 3}}, -1, 1, 0, 1, 3, run_max0, ref_max0},
    {"pick (f32 row view)", 1, {{5, 7}}, -1, 1, 0, 1, 7, run_pick, ref_pick},
    {"slice rows + contiguous", 1, {{5, 4}}, -1, 1, 0.05f, 3, 4, run_slice_rows, ref_slice_rows},
    {"slice cols", 1, {{3, 6}}, -1, 1, 0.05f, 3, 3, run_slice_cols, ref_slice_cols},
    {"concat rows", 2, {{2, 4}, {3, 4}}, -1, 1, 0, 5, 4, run_concat_rows, ref_concat_rows},
    {"concat cols", 2, {{3, 2}, {3, 3}}, -1, 1, 0, 3, 5, run_concat_cols, ref_concat_cols},
    {"mse loss", 2, {{2, 6}, {2, 6}}, -2, 2, 0, 1, 1, run_mse, ref_mse},
    {"huber loss", 2, {{2, 8}, {2, 8}}, -2, 2, 0, 1, 1, run_huber, ref_huber},
    {"bias + relu", 2, {{4, 6}, {4, 1}}, -1, 1, 0.05f, 4, 6, run_bias_relu, ref_bias_relu},
    {"bias + tanh", 2, {{4, 6}, {4, 1}}, -1, 1, 0, 4, 6, run_bias_tanh, ref_bias_tanh},
    {"bias + sigmoid", 2, {{4, 6}, {1, 6}}, -2, 2, 0, 4, 6, run_bias_sigmoid, ref_bias_sigmoid},
    {"mlp from ops", 3, {{3, 5}, {4, 3}, {4, 1}}, -1, 1, 0.02f, 1, 5, run_mlp, ref_mlp},
    /* cases added later go last: the inputs are drawn in the table's order */
    {"clamp", 1, {{5, 6}}, -1.5f, 1.5f, 0, 5, 6, run_clamp, ref_clamp},
    {"minimum", 2, {{3, 4}, {3, 4}}, -1, 1, 0, 3, 4, run_minimum, ref_minimum},
    {"minimum column", 2, {{3, 4}, {3, 1}}, -1, 1, 0, 3, 4, run_minimum, ref_minimum},
    {"maximum row", 2, {{1, 4}, {3, 4}}, -1, 1, 0, 3, 4, run_maximum, ref_maximum},
    {"maximum scalar", 2, {{3, 4}, {1, 1}}, -1, 1, 0, 3, 4, run_maximum, ref_maximum},
};

static double draw(agt_rng *g, const op_case *c) {
  for (;;) {
    double x = agt_uniform(g, c->lo, c->hi);
    if (fabs(x) >= c->gap) return x;
  }
}

/* loss = sum(out .* w): the reference in double */
static double ref_loss(const op_case *c, double **in, const double *w, double *scratch) {
  c->ref(in, (const int64_t(*)[2])c->shape, scratch);
  double l = 0;
  for (int64_t i = 0; i < c->out_rows * c->out_cols; i++) l += scratch[i] * w[i];
  return l;
}

/* Runs case c on ctx with inputs x (as parameters); returns out values and
 * the gradients of loss = sum(out .* w). */
static void run_case(ag_ctx *ctx, const op_case *c, float **x, const float *w, float *out, float **grad) {
  ag_tensor *in[MAXIN], *y, *wt, *prod, *loss;
  for (int i = 0; i < c->n_in; i++) {
    agt_ok(ag_tensor_create(ctx, c->shape[i][0], c->shape[i][1], AG_F32, x[i], &in[i]));
    agt_ok(ag_tensor_set_requires_grad(in[i], 1));
  }
  agt_ok(c->run(in, &y));
  assert_int_equal(ag_tensor_rows(y), c->out_rows);
  assert_int_equal(ag_tensor_cols(y), c->out_cols);
  agt_ok(ag_tensor_create(ctx, c->out_rows, c->out_cols, AG_F32, w, &wt));
  agt_ok(ag_mul(y, wt, &prod));
  agt_ok(ag_sum(prod, AG_AXIS_ALL, &loss));
  agt_ok(ag_backward(loss));
  agt_ok(ag_tensor_read(y, out, (size_t)(c->out_rows * c->out_cols) * sizeof(float)));
  for (int i = 0; i < c->n_in; i++) {
    agt_ok(ag_tensor_read(ag_tensor_grad(in[i]), grad[i],
                          (size_t)(c->shape[i][0] * c->shape[i][1]) * sizeof(float)));
    ag_tensor_free(in[i]);
  }
  ag_tensor_free(wt);
  ag_ctx_reset(ctx);
}

static void check_close(const char *what, const char *name, const float *got, const double *ref, int64_t n,
                        double tol) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  double rel = sqrt(num) / (sqrt(den) + 1e-12);
  if (!(rel <= tol)) fail_msg("%s of '%s': relative error %.3g > %.3g", what, name, rel, tol);
}

/* Forward against the reference, gradients against central differences of
 * the reference (h = 1e-6 in double), and on CUDA both against the CPU. */
static void every_op_matches_reference_and_finite_differences(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu = NULL;
  if (agt_kind != AG_DEVICE_CPU) agt_ok(ag_ctx_create(&cpu, AG_DEVICE_CPU, 0));
  agt_rng g = {2718};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const op_case *c = &cases[k];
    int64_t no = c->out_rows * c->out_cols;
    float *xf[MAXIN], *grad[MAXIN], *grad_cpu[MAXIN];
    double *xd[MAXIN];
    for (int i = 0; i < c->n_in; i++) {
      int64_t n = c->shape[i][0] * c->shape[i][1];
      xf[i] = malloc((size_t)n * sizeof(float));
      grad[i] = malloc((size_t)n * sizeof(float));
      grad_cpu[i] = malloc((size_t)n * sizeof(float));
      xd[i] = malloc((size_t)n * sizeof(double));
      for (int64_t e = 0; e < n; e++) xd[i][e] = xf[i][e] = (float)draw(&g, c);
    }
    float *w = malloc((size_t)no * sizeof(float)), *out = malloc((size_t)no * sizeof(float));
    float *out_cpu = malloc((size_t)no * sizeof(float));
    double *wd = malloc((size_t)no * sizeof(double)), *scratch = malloc((size_t)no * sizeof(double));
    double *outd = malloc((size_t)no * sizeof(double));
    for (int64_t e = 0; e < no; e++) wd[e] = w[e] = agt_uniform(&g, -1, 1);
    run_case(ctx, c, xf, w, out, grad);
    c->ref(xd, (const int64_t(*)[2])c->shape, outd);
    check_close("forward", c->name, out, outd, no, 1e-5);
    for (int i = 0; i < c->n_in; i++) {
      int64_t n = c->shape[i][0] * c->shape[i][1];
      double *fd = malloc((size_t)n * sizeof(double));
      for (int64_t e = 0; e < n; e++) {
        double x0 = xd[i][e], h = 1e-6;
        xd[i][e] = x0 + h;
        double lp = ref_loss(c, xd, wd, scratch);
        xd[i][e] = x0 - h;
        double lm = ref_loss(c, xd, wd, scratch);
        xd[i][e] = x0;
        fd[e] = (lp - lm) / (2 * h);
      }
      char what[64];
      snprintf(what, sizeof what, "gradient of input %d", i);
      check_close(what, c->name, grad[i], fd, n, 1e-4);
      free(fd);
    }
    if (cpu) { /* the GPU against the CPU reference backend */
      run_case(cpu, c, xf, w, out_cpu, grad_cpu);
      double *o = malloc((size_t)no * sizeof(double));
      for (int64_t e = 0; e < no; e++) o[e] = out_cpu[e];
      check_close("cuda vs cpu forward", c->name, out, o, no, 1e-5);
      free(o);
      for (int i = 0; i < c->n_in; i++) {
        int64_t n = c->shape[i][0] * c->shape[i][1];
        double *gc = malloc((size_t)n * sizeof(double));
        for (int64_t e = 0; e < n; e++) gc[e] = grad_cpu[i][e];
        check_close("cuda vs cpu gradient", c->name, grad[i], gc, n, 1e-5);
        free(gc);
      }
    }
    for (int i = 0; i < c->n_in; i++) free(xf[i]), free(grad[i]), free(grad_cpu[i]), free(xd[i]);
    free(w), free(out), free(out_cpu), free(wd), free(scratch), free(outd);
  }
  printf("  %zu op cases checked\n", sizeof cases / sizeof cases[0]);
  ag_ctx_free(cpu);
  ag_ctx_free(ctx);
}

/* Subnormal floats: the CPU backend flushes them (results and inputs) while
 * its kernels run and gives the caller's thread back its floating-point
 * mode; the GPU keeps them, as IEEE arithmetic does. References: the same
 * products and sums on the host, whose mode is IEEE's. */
/* Whether this processor (or the emulator running the test: valgrind keeps
 * IEEE subnormals whatever MXCSR says) flushes once the mode asks it to. */
static int host_can_flush(void) {
#if defined(__x86_64__) || defined(__i386__)
  const unsigned m = _mm_getcsr();
  _mm_setcsr(m | 0x8040u);
  volatile float a = 1e-20f, b = 1e-20f;
  volatile float p = a * b;
  _mm_setcsr(m);
  return p == 0.0f;
#else
  return 0; /* the CPU backend flushes on x86 only */
#endif
}

static void subnormals_flush_on_the_cpu_only(void **state) {
  (void)state;
#if defined(__x86_64__) || defined(__i386__)
  const unsigned mode = _mm_getcsr();
#endif
  const int flushes = host_can_flush();
  ag_ctx *ctx = agt_ctx();
  const float a[3] = {1e-20f, 3e-20f, 2.0f}, b[3] = {1e-20f, 4e18f, 5.0f};
  const float sub[4] = {1e-39f, 2e-39f, -5e-40f, 1e-39f};
  volatile float host_prod = a[0] * b[0];
  assert_true(host_prod != 0.0f && fabsf(host_prod) < 1.17549435e-38f); /* the host makes the subnormal */
  ag_tensor *ta, *tb, *tp, *ts, *tsum;
  agt_ok(ag_tensor_create(ctx, 3, 1, AG_F32, a, &ta));
  agt_ok(ag_tensor_create(ctx, 3, 1, AG_F32, b, &tb));
  agt_ok(ag_tensor_create(ctx, 4, 1, AG_F32, sub, &ts));
  agt_ok(ag_mul(ta, tb, &tp));
  agt_ok(ag_sum(ts, AG_AXIS_ALL, &tsum));
  float p[3], sum;
  agt_ok(ag_tensor_read(tp, p, sizeof p));
  agt_ok(ag_tensor_read(tsum, &sum, sizeof sum));
  volatile float host_sum = ((sub[0] + sub[1]) + sub[2]) + sub[3];
  assert_true(p[1] == a[1] * b[1] && p[2] == 10.0f); /* normal results as they were */
  if (agt_kind == AG_DEVICE_CPU && flushes) {
    assert_true(p[0] == 0.0f); /* flushed result */
    assert_true(sum == 0.0f);  /* subnormal inputs read as zero */
  } else if (agt_kind == AG_DEVICE_CPU) {
    print_message("this processor or emulator keeps subnormals: the CPU's flush is not checked\n");
  } else if (agt_kind == AG_DEVICE_VULKAN && p[0] == 0.0f) {
    /* a Vulkan driver's default float controls may flush (NVIDIA's do): then both flush */
    assert_true(sum == 0.0f);
    print_message("this Vulkan device flushes subnormals (its default float controls)\n");
  } else {
    assert_true(p[0] == host_prod);
    assert_true(fabsf(sum - host_sum) <= 1e-45f); /* any order of the sum: subnormals add exactly */
  }
#if defined(__x86_64__) || defined(__i386__)
  assert_int_equal(_mm_getcsr() & 0xFFC0u,
                   mode & 0xFFC0u); /* the caller's mode (not its sticky flags) is back */
#endif
  ag_ctx_free(ctx);
}

/* argmax (first maximum on ties) against a host loop, both axes and dtypes */
static void argmax_picks_the_first_maximum(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {5};
  const int64_t R = 6, C = 90;
  float x[6 * 90];
  for (int i = 0; i < R * C; i++) x[i] = (float)agt_below(&g, 4); /* many ties */
  ag_tensor *t, *a0, *a1;
  agt_ok(ag_tensor_create(ctx, R, C, AG_F32, x, &t));
  agt_ok(ag_argmax(t, AG_AXIS_ROWS, AG_I32, &a0));
  agt_ok(ag_argmax(t, AG_AXIS_COLS, AG_I64, &a1));
  int32_t i0[90];
  int64_t i1[6];
  agt_ok(ag_tensor_read(a0, i0, sizeof i0));
  agt_ok(ag_tensor_read(a1, i1, sizeof i1));
  for (int c = 0; c < C; c++) {
    int best = 0;
    for (int r = 1; r < R; r++)
      if (x[c * R + r] > x[c * R + best]) best = r;
    assert_int_equal(i0[c], best);
  }
  for (int r = 0; r < R; r++) {
    int best = 0;
    for (int c = 1; c < C; c++)
      if (x[c * R + r] > x[best * R + r]) best = c;
    assert_int_equal(i1[r], best);
  }
  ag_ctx_free(ctx);
}

/* The TD target against a host loop: max over actions, or the picked action. */
static void td_target_matches_host_reference(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {8};
  const int A = 3, B = 50;
  float q[3 * 50], batch[3 * 50], idx[50];
  for (int i = 0; i < A * B; i++) q[i] = agt_uniform(&g, -5, 5);
  for (int j = 0; j < B; j++) {
    batch[j * 3] = agt_uniform(&g, -1, 1);  /* reward */
    batch[j * 3 + 1] = (float)(j % 4 == 0); /* done */
    batch[j * 3 + 2] = 7;
    idx[j] = (float)agt_below(&g, A);
  }
  ag_tensor *tq, *tb, *ti, *rew, *done, *y1, *y2;
  agt_ok(ag_tensor_create(ctx, A, B, AG_F32, q, &tq));
  agt_ok(ag_tensor_create(ctx, 3, B, AG_F32, batch, &tb));
  agt_ok(ag_tensor_create(ctx, 1, B, AG_F32, idx, &ti));
  agt_ok(ag_slice_rows(tb, 0, 1, &rew));
  agt_ok(ag_slice_rows(tb, 1, 1, &done));
  agt_ok(ag_td_target(tq, NULL, rew, done, 0.9f, &y1));
  agt_ok(ag_td_target(tq, ti, rew, done, 0.9f, &y2));
  float o1[50], o2[50];
  agt_ok(ag_tensor_read(y1, o1, sizeof o1));
  agt_ok(ag_tensor_read(y2, o2, sizeof o2));
  for (int j = 0; j < B; j++) {
    double mx = fmax(fmax(q[j * 3], q[j * 3 + 1]), q[j * 3 + 2]);
    double e1 = batch[j * 3] + 0.9 * (1 - batch[j * 3 + 1]) * mx;
    double e2 = batch[j * 3] + 0.9 * (1 - batch[j * 3 + 1]) * q[j * 3 + (int)idx[j]];
    assert_float_equal(o1[j], e1, 1e-5);
    assert_float_equal(o2[j], e2, 1e-5);
  }
  assert_false(ag_tensor_requires_grad(y1));
  agt_err(ag_td_target(tq, NULL, tq, done, 0.9f, &y1), AG_ERR_SHAPE, "must be [1, 50]");
  ag_ctx_free(ctx);
}

/* Gradients accumulate across backward calls until zeroed; no-grad scopes
 * tape nothing. */
static void gradients_accumulate_and_no_grad_stops_them(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  float pv[3] = {1, -2, 3}, cv[3] = {0.5f, 2, -1}, gv[3];
  ag_tensor *p, *c, *y, *l;
  agt_ok(ag_tensor_create(ctx, 3, 1, AG_F32, pv, &p));
  agt_ok(ag_tensor_create(ctx, 3, 1, AG_F32, cv, &c));
  agt_ok(ag_tensor_set_requires_grad(p, 1));
  agt_ok(ag_mul(p, c, &y));
  agt_ok(ag_sum(y, AG_AXIS_ALL, &l));
  agt_ok(ag_backward(l));
  agt_ok(ag_backward(l)); /* twice: the gradient doubles */
  agt_ok(ag_tensor_read(ag_tensor_grad(p), gv, sizeof gv));
  for (int i = 0; i < 3; i++) assert_true(gv[i] == 2 * cv[i]);
  agt_ok(ag_zero_grad(&p, 1));
  agt_ok(ag_tensor_read(ag_tensor_grad(p), gv, sizeof gv));
  for (int i = 0; i < 3; i++) assert_true(gv[i] == 0.0f);
  ag_no_grad_begin(ctx);
  agt_ok(ag_mul(p, c, &y));
  assert_false(ag_tensor_requires_grad(y));
  agt_ok(ag_sum(y, AG_AXIS_ALL, &l));
  agt_err(ag_backward(l), AG_ERR_INVALID_ARG, "does not depend");
  ag_no_grad_end(ctx);
  ag_tensor *d;
  agt_ok(ag_detach(p, &d));
  assert_false(ag_tensor_requires_grad(d));
  ag_ctx_free(ctx);
}

/* Adam: two steps against the closed form of the update rule. */
static void adam_two_steps_match_closed_form(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const float p0[4] = {0.5f, -1.0f, 2.0f, 0.0f};
  const float g1[4] = {0.1f, -0.2f, 3.0f, -1e-3f}, g2[4] = {-0.3f, 0.2f, 1.0f, 5.0f};
  ag_tensor *p, *c1, *c2;
  agt_ok(ag_tensor_create(ctx, 4, 1, AG_F32, p0, &p));
  agt_ok(ag_tensor_set_requires_grad(p, 1));
  agt_ok(ag_tensor_create(ctx, 4, 1, AG_F32, g1, &c1));
  agt_ok(ag_tensor_create(ctx, 4, 1, AG_F32, g2, &c2));
  ag_adam_config cfg = ag_adam_defaults();
  cfg.lr = 0.1f;
  ag_optim *opt;
  agt_ok(ag_adam_create(ctx, &p, 1, &cfg, &opt));
  ag_tensor *cs[2] = {c1, c2};
  for (int step = 0; step < 2; step++) { /* loss = sum(p .* g): gradient g */
    ag_tensor *y, *l;
    agt_ok(ag_optim_zero_grad(opt));
    agt_ok(ag_mul(p, cs[step], &y));
    agt_ok(ag_sum(y, AG_AXIS_ALL, &l));
    agt_ok(ag_backward(l));
    agt_ok(ag_optim_step(opt));
    ag_ctx_reset(ctx);
  }
  float got[4];
  agt_ok(ag_tensor_read(p, got, sizeof got));
  for (int i = 0; i < 4; i++) {
    double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.1, x = p0[i], m = 0, v = 0;
    const float *gs[2] = {g1, g2};
    for (int t = 1; t <= 2; t++) {
      double gg = gs[t - 1][i];
      m = b1 * m + (1 - b1) * gg;
      v = b2 * v + (1 - b2) * gg * gg;
      x -= lr * (m / (1 - pow(b1, t))) / (sqrt(v / (1 - pow(b2, t))) + eps);
    }
    if (!(fabs(got[i] - x) <= 1e-5 * (1 + fabs(x))))
      fail_msg("p[%d] = %.8g, closed form %.8g", i, (double)got[i], x);
  }
  int64_t steps;
  agt_ok(ag_optim_steps(opt, &steps));
  assert_int_equal(steps, 2);
  ag_optim_free(opt);
  ag_ctx_free(ctx);
}

/* Adam over many blocks and over many tensors: the step's preparation
 * (bias corrections, step count) runs inside the update's one launch when
 * the parameters fit it (here 20000 values: several blocks that must all
 * use the same step, one of them storing it), and as its own launch when
 * they do not (50 tensors). Three steps against the closed form. */
static void adam_matches_closed_form_over_blocks_and_tensors(void **state) {
  (void)state;
  static const struct {
    int tensors;
    int64_t len;
  } cases[2] = {{1, 20000}, {50, 3}};
  for (int cs = 0; cs < 2; cs++) {
    ag_ctx *ctx = agt_ctx();
    const int nt = cases[cs].tensors;
    const int64_t len = cases[cs].len, total = nt * len;
    ag_tensor *p[50], *c[3][50];
    float *init = malloc(sizeof(float) * (size_t)total), *g = malloc(sizeof(float) * (size_t)(3 * total));
    for (int64_t e = 0; e < total; e++) init[e] = (float)sin(0.37 * (double)e);
    for (int64_t e = 0; e < 3 * total; e++) g[e] = (float)cos(1.3 * (double)e) * (e % 7 == 0 ? 10.0f : 1.0f);
    for (int k = 0; k < nt; k++) {
      agt_ok(ag_tensor_create(ctx, len, 1, AG_F32, init + k * len, &p[k]));
      agt_ok(ag_tensor_set_requires_grad(p[k], 1));
      for (int t = 0; t < 3; t++)
        agt_ok(ag_tensor_create(ctx, len, 1, AG_F32, g + t * total + k * len, &c[t][k]));
    }
    ag_adam_config cfg = ag_adam_defaults();
    cfg.lr = 0.05f;
    ag_optim *opt;
    agt_ok(ag_adam_create(ctx, p, nt, &cfg, &opt));
    for (int t = 0; t < 3; t++) { /* loss = sum over tensors of sum(p .* c): gradient c */
      agt_ok(ag_optim_zero_grad(opt));
      for (int k = 0; k < nt; k++) {
        ag_tensor *y, *l;
        agt_ok(ag_mul(p[k], c[t][k], &y));
        agt_ok(ag_sum(y, AG_AXIS_ALL, &l));
        agt_ok(ag_backward(l));
      }
      agt_ok(ag_optim_step(opt));
      ag_ctx_reset(ctx);
    }
    for (int k = 0; k < nt; k++) {
      float *got = agt_read_f32(p[k]);
      for (int64_t i = 0; i < len; i++) {
        int64_t e = k * len + i;
        double x = init[e], m = 0, v = 0;
        for (int t = 1; t <= 3; t++) {
          double gg = g[(t - 1) * total + e];
          m = 0.9 * m + 0.1 * gg;
          v = 0.999 * v + 0.001 * gg * gg;
          x -= 0.05 * (m / (1 - pow(0.9, t))) / (sqrt(v / (1 - pow(0.999, t))) + 1e-8);
        }
        if (!(fabs(got[i] - x) <= 1e-5 * (1 + fabs(x)))) /* NaN fails too */
          fail_msg("case %d: p[%d][%lld] = %.8g, closed form %.8g", cs, k, (long long)i, (double)got[i], x);
      }
      free(got);
    }
    int64_t steps;
    agt_ok(ag_optim_steps(opt, &steps));
    assert_int_equal(steps, 3);
    free(init), free(g);
    ag_optim_free(opt);
    ag_ctx_free(ctx);
  }
}

/* Gradient clipping: the update uses g * max_norm / |g| when |g| > max_norm (SGD). */
static void sgd_clips_the_global_gradient_norm(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const float p0[2] = {1, 1}, q0[1] = {0}, ga[2] = {3, 0}, gb[1] = {4}; /* |g| = 5 */
  ag_tensor *p, *q, *ca, *cb;
  agt_ok(ag_tensor_create(ctx, 2, 1, AG_F32, p0, &p));
  agt_ok(ag_tensor_create(ctx, 1, 1, AG_F32, q0, &q));
  agt_ok(ag_tensor_set_requires_grad(p, 1));
  agt_ok(ag_tensor_set_requires_grad(q, 1));
  agt_ok(ag_tensor_create(ctx, 2, 1, AG_F32, ga, &ca));
  agt_ok(ag_tensor_create(ctx, 1, 1, AG_F32, gb, &cb));
  ag_tensor *params[2] = {p, q};
  ag_optim *opt;
  agt_ok(ag_sgd_create(ctx, params, 2, 0.5f, 1.0f, &opt));
  ag_tensor *y1, *y2, *l1, *l2, *l;
  agt_ok(ag_mul(p, ca, &y1));
  agt_ok(ag_mul(q, cb, &y2));
  agt_ok(ag_sum(y1, AG_AXIS_ALL, &l1));
  agt_ok(ag_sum(y2, AG_AXIS_ALL, &l2));
  agt_ok(ag_add(l1, l2, &l));
  agt_ok(ag_backward(l));
  agt_ok(ag_optim_step(opt));
  float gp[2], gq[1];
  agt_ok(ag_tensor_read(p, gp, sizeof gp));
  agt_ok(ag_tensor_read(q, gq, sizeof gq));
  /* clipped gradient (0.6, 0, 0.8) times lr 0.5 */
  assert_float_equal(gp[0], 1 - 0.3f, 1e-5);
  assert_float_equal(gp[1], 1.0f, 1e-6);
  assert_float_equal(gq[0], -0.4f, 1e-5);
  ag_optim_free(opt);
  ag_ctx_free(ctx);
}

/* A linear model fitted to y = A x + b by Adam converges to A and b. */
static void regression_converges_to_the_true_parameters(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {31};
  const float A[2 * 3] = {1.5f, -0.5f, 2.0f, 0.25f, -1.0f, 0.75f}; /* [2, 3] */
  const float b[2] = {0.3f, -0.7f};
  const int n = 256;
  float *x = malloc(3 * n * sizeof(float)), *y = malloc(2 * n * sizeof(float));
  for (int j = 0; j < n; j++) {
    for (int k = 0; k < 3; k++) x[j * 3 + k] = agt_uniform(&g, -1, 1);
    for (int r = 0; r < 2; r++) {
      double v = b[r];
      for (int k = 0; k < 3; k++) v += A[k * 2 + r] * x[j * 3 + k];
      y[j * 2 + r] = (float)v;
    }
  }
  ag_tensor *tx, *ty;
  agt_ok(ag_tensor_create(ctx, 3, n, AG_F32, x, &tx));
  agt_ok(ag_tensor_create(ctx, 2, n, AG_F32, y, &ty));
  const int64_t sizes[2] = {3, 2};
  ag_mlp *m;
  agt_ok(ag_mlp_create(ctx, sizes, 2, AG_ACT_NONE, AG_ACT_NONE, 9, &m));
  ag_adam_config cfg = ag_adam_defaults();
  cfg.lr = 0.05f;
  ag_optim *opt;
  agt_ok(ag_adam_create(ctx, ag_mlp_params(m), ag_mlp_n_params(m), &cfg, &opt));
  float lv = 0;
  for (int it = 0; it < 600; it++) {
    ag_tensor *pred, *l;
    agt_ok(ag_optim_zero_grad(opt));
    agt_ok(ag_mlp_forward(m, tx, &pred));
    agt_ok(ag_mse_loss(pred, ty, &l));
    agt_ok(ag_backward(l));
    agt_ok(ag_optim_step(opt));
    if (it == 599) agt_ok(ag_tensor_read(l, &lv, sizeof lv));
    ag_ctx_reset(ctx);
  }
  assert_true(lv < 1e-6f);
  float W[6], B[2];
  agt_ok(ag_tensor_read(ag_mlp_params(m)[0], W, sizeof W));
  agt_ok(ag_tensor_read(ag_mlp_params(m)[1], B, sizeof B));
  for (int i = 0; i < 6; i++) assert_float_equal(W[i], A[i], 2e-3);
  for (int i = 0; i < 2; i++) assert_float_equal(B[i], b[i], 2e-3);
  ag_optim_free(opt);
  ag_mlp_free(m);
  free(x), free(y);
  ag_ctx_free(ctx);
}

/* MLP init is PyTorch's uniform bound, the same numbers on every device;
 * copy and Polyak updates of a target network; save and load. */
static void mlp_init_target_updates_and_files(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const int64_t sizes[3] = {4, 16, 2};
  ag_mlp *a, *b, *c;
  agt_ok(ag_mlp_create(ctx, sizes, 3, AG_ACT_RELU, AG_ACT_NONE, 1, &a));
  agt_ok(ag_mlp_create(ctx, sizes, 3, AG_ACT_RELU, AG_ACT_NONE, 2, &b));
  float wa[64], wb[64], w[64];
  agt_ok(ag_tensor_read(ag_mlp_params(a)[0], wa, sizeof wa));
  agt_ok(ag_tensor_read(ag_mlp_params(b)[0], wb, sizeof wb));
  double mean = 0;
  for (int i = 0; i < 64; i++) {
    assert_true(fabsf(wa[i]) <= 0.5f); /* 1/sqrt(4) */
    mean += wa[i] / 64.0;
  }
  assert_true(fabs(mean) < 0.15);
  assert_true(memcmp(wa, wb, sizeof wa) != 0); /* other seed, other weights */
  agt_ok(ag_mlp_polyak(b, a, 0.25f));
  agt_ok(ag_tensor_read(ag_mlp_params(b)[0], w, sizeof w));
  for (int i = 0; i < 64; i++) assert_float_equal(w[i], 0.25f * wa[i] + 0.75f * wb[i], 1e-6);
  agt_ok(ag_mlp_copy(b, a));
  agt_ok(ag_tensor_read(ag_mlp_params(b)[0], w, sizeof w));
  assert_memory_equal(w, wa, sizeof w);
  char path[] = "/tmp/agrl_mlp_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  agt_ok(ag_mlp_save(a, path));
  agt_ok(ag_mlp_load(ctx, path, &c));
  float x[8] = {0.1f, -0.2f, 0.3f, 0.4f, 1, 2, -3, 0.5f}, ya[4], yc[4];
  ag_tensor *tx, *oa, *oc;
  agt_ok(ag_tensor_create(ctx, 4, 2, AG_F32, x, &tx));
  agt_ok(ag_mlp_forward(a, tx, &oa));
  agt_ok(ag_mlp_forward(c, tx, &oc));
  agt_ok(ag_tensor_read(oa, ya, sizeof ya));
  agt_ok(ag_tensor_read(oc, yc, sizeof yc));
  assert_memory_equal(ya, yc, sizeof ya);
  unlink(path);
  const int64_t other[3] = {4, 8, 2};
  ag_mlp *d;
  agt_ok(ag_mlp_create(ctx, other, 3, AG_ACT_RELU, AG_ACT_NONE, 1, &d));
  agt_err(ag_mlp_copy(d, a), AG_ERR_SHAPE, "different sizes");
  agt_err(ag_mlp_load(ctx, "/nonexistent/agrl.mlp", &d), AG_ERR_IO, "cannot open");
  agt_err(ag_mlp_forward(a, oa, &oc), AG_ERR_SHAPE, "x has 2 rows, the MLP takes 4 inputs");
  ag_mlp_free(a), ag_mlp_free(b), ag_mlp_free(c), ag_mlp_free(d);
  ag_ctx_free(ctx);
}

/* Reads t into a new array and checks it against want (NaN for NaN). */
static void expect_exact(const char *what, ag_tensor *t, const float *want, int64_t n) {
  float *got = agt_read_f32(t);
  for (int64_t i = 0; i < n; i++)
    if (!(got[i] == want[i] || (isnan(got[i]) && isnan(want[i]))))
      fail_msg("%s: element %lld is %.9g, expected %.9g", what, (long long)i, (double)got[i],
               (double)want[i]);
  free(got);
}

/* loss = sum(y .* w) for w = 1, 2, 3, ... (every gradient an exact sum). */
static void backward_weighted(ag_ctx *ctx, ag_tensor *y) {
  const int64_t n = ag_tensor_numel(y);
  float *w = malloc((size_t)n * sizeof *w);
  for (int64_t i = 0; i < n; i++) w[i] = (float)(i + 1);
  ag_tensor *wt, *prod, *loss;
  agt_ok(ag_tensor_create(ctx, ag_tensor_rows(y), ag_tensor_cols(y), AG_F32, w, &wt));
  agt_ok(ag_mul(y, wt, &prod));
  agt_ok(ag_sum(prod, AG_AXIS_ALL, &loss));
  agt_ok(ag_backward(loss));
  ag_tensor_free(wt);
  free(w);
}

/* clamp at and around its ends: the value min(max(x, lo), hi), NaN kept;
 * the gradient 1 on [lo, hi], the ends included, 0 outside and at a NaN;
 * lo = hi passes the gradient where x equals it. */
static void clamp_passes_the_gradient_on_the_closed_range(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const float xv[9] = {-2.0f, -0.5f, -0.25f, 0.0f, 0.75f, 0.8f, NAN, 3.0f, -0.5000001f};
  const float yv[9] = {-0.5f, -0.5f, -0.25f, 0.0f, 0.75f, 0.75f, NAN, 0.75f, -0.5f};
  const float pass[9] = {0, 1, 1, 1, 1, 0, 0, 0, 0};
  ag_tensor *x, *y;
  agt_ok(ag_tensor_create(ctx, 3, 3, AG_F32, xv, &x));
  agt_ok(ag_tensor_set_requires_grad(x, 1));
  agt_ok(ag_clamp(x, -0.5f, 0.75f, &y));
  assert_true(ag_tensor_requires_grad(y));
  expect_exact("clamp", y, yv, 9);
  backward_weighted(ctx, y);
  float gv[9];
  for (int i = 0; i < 9; i++) gv[i] = pass[i] * (float)(i + 1);
  expect_exact("clamp's gradient", ag_tensor_grad(x), gv, 9);
  ag_ctx_reset(ctx);
  agt_ok(ag_zero_grad(&x, 1));
  agt_ok(ag_clamp(x, 0.0f, 0.0f, &y)); /* lo = hi: a constant */
  const float zv[9] = {0, 0, 0, 0, 0, 0, NAN, 0, 0};
  expect_exact("clamp to a point", y, zv, 9);
  backward_weighted(ctx, y);
  const float gz[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
  expect_exact("clamp to a point, gradient", ag_tensor_grad(x), gz, 9);
  ag_tensor_free(x);
  ag_ctx_free(ctx);
}

/* minimum and maximum with a column broadcast against a matrix, ties and a
 * NaN in each operand: the value and the gradient from a where a <= b (min)
 * or a >= b (max) or a is NaN, else from b; b's gradient summed along the
 * row it was broadcast over. Closed forms, exact. */
static void minimum_maximum_send_ties_to_a_and_sum_broadcasts(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  /* a [3, 4] column by column, b [3, 1] (its last row NaN in the second round) */
  const float av[12] = {1, 0, -1, 2, -1, 0, 0, 0, -2, NAN, 5, -1};
  for (int round = 0; round < 2; round++) {
    const float bv[3] = {1, 0, round ? NAN : -1.0f};
    for (int is_max = 0; is_max < 2; is_max++) {
      ag_tensor *a, *b, *y;
      agt_ok(ag_tensor_create(ctx, 3, 4, AG_F32, av, &a));
      agt_ok(ag_tensor_create(ctx, 3, 1, AG_F32, bv, &b));
      agt_ok(ag_tensor_set_requires_grad(a, 1));
      agt_ok(ag_tensor_set_requires_grad(b, 1));
      agt_ok(is_max ? ag_maximum(a, b, &y) : ag_minimum(a, b, &y));
      float yv[12], ga[12], gb[3] = {0, 0, 0};
      for (int i = 0; i < 12; i++) {
        const float x = av[i], o = bv[i % 3];
        const int take_a = (is_max ? x >= o : x <= o) || isnan(x);
        yv[i] = take_a ? x : o;
        ga[i] = take_a ? (float)(i + 1) : 0.0f;
        if (!take_a) gb[i % 3] += (float)(i + 1);
      }
      const char *what = is_max ? "maximum" : "minimum";
      expect_exact(what, y, yv, 12);
      backward_weighted(ctx, y);
      expect_exact(is_max ? "maximum's gradient of a" : "minimum's gradient of a", ag_tensor_grad(a), ga, 12);
      expect_exact(is_max ? "maximum's gradient of b" : "minimum's gradient of b", ag_tensor_grad(b), gb, 3);
      ag_tensor_free(a);
      ag_tensor_free(b);
      ag_ctx_reset(ctx);
    }
  }
  /* an operand with itself: every tie, the whole gradient to it once */
  ag_tensor *x, *y;
  const float xv[4] = {3, -1, 0, 2};
  agt_ok(ag_tensor_create(ctx, 1, 4, AG_F32, xv, &x));
  agt_ok(ag_tensor_set_requires_grad(x, 1));
  agt_ok(ag_maximum(x, x, &y));
  backward_weighted(ctx, y);
  const float g1[4] = {1, 2, 3, 4};
  expect_exact("maximum(x, x)'s gradient", ag_tensor_grad(x), g1, 4);
  ag_tensor_free(x);
  ag_ctx_free(ctx);
}

/* Bad arguments of clamp, minimum and maximum: the status and message,
 * *out untouched, no kernel queued, no workspace taken. */
static void clamp_min_max_bad_inputs_change_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *other;
  agt_ok(ag_ctx_create(&other, AG_DEVICE_CPU, 0));
  ag_tensor *a, *b, *i32, *foreign, *o, *sentinel = (ag_tensor *)(uintptr_t)0x1234;
  agt_ok(ag_tensor_create(ctx, 3, 4, AG_F32, NULL, &a));
  agt_ok(ag_tensor_create(ctx, 2, 4, AG_F32, NULL, &b));
  agt_ok(ag_tensor_create(ctx, 3, 4, AG_I32, NULL, &i32));
  agt_ok(ag_tensor_create(other, 3, 4, AG_F32, NULL, &foreign));
  agt_ok(ag_tensor_set_requires_grad(a, 1));
  ag_ctx_stats before, after;
  ag_ctx_get_stats(ctx, &before);
  o = sentinel;
  agt_err(ag_clamp(a, 1.0f, -1.0f, &o), AG_ERR_INVALID_ARG, "lo = 1 is above hi = -1");
  agt_err(ag_clamp(a, NAN, 1.0f, &o), AG_ERR_INVALID_ARG, "lo = nan is not finite");
  agt_err(ag_clamp(a, -1.0f, INFINITY, &o), AG_ERR_INVALID_ARG, "hi = inf is not finite");
  agt_err(ag_clamp(a, -INFINITY, 0.0f, &o), AG_ERR_INVALID_ARG, "lo = -inf is not finite");
  agt_err(ag_clamp(NULL, -1.0f, 1.0f, &o), AG_ERR_INVALID_ARG, "x is NULL");
  agt_err(ag_clamp(a, -1.0f, 1.0f, NULL), AG_ERR_INVALID_ARG, "out is NULL");
  agt_err(ag_clamp(i32, -1.0f, 1.0f, &o), AG_ERR_SHAPE, "dtype i32; this op takes f32");
  agt_err(ag_minimum(a, b, &o), AG_ERR_SHAPE, "ag_minimum: shapes [3, 4] and [2, 4] do not broadcast");
  agt_err(ag_maximum(b, a, &o), AG_ERR_SHAPE, "ag_maximum: shapes [2, 4] and [3, 4] do not broadcast");
  agt_err(ag_minimum(NULL, a, &o), AG_ERR_INVALID_ARG, "a is NULL");
  agt_err(ag_maximum(a, NULL, &o), AG_ERR_INVALID_ARG, "b is NULL");
  agt_err(ag_maximum(a, a, NULL), AG_ERR_INVALID_ARG, "out is NULL");
  agt_err(ag_minimum(a, i32, &o), AG_ERR_SHAPE, "dtype i32");
  agt_err(ag_maximum(a, foreign, &o), AG_ERR_INVALID_ARG, "different contexts");
  ag_ctx_get_stats(ctx, &after);
  assert_ptr_equal(o, sentinel);
  assert_true(after.kernels == before.kernels);
  assert_true(after.workspace_bytes == before.workspace_bytes);
  assert_true(after.allocs == before.allocs);
  ag_tensor *ok;
  agt_ok(ag_clamp(a, -1.0f, 1.0f, &ok)); /* and the context still works */
  ag_ctx_free(other);
  ag_ctx_free(ctx);
}

/* Bad arguments of ops: a status, a message, nothing written. */
static void op_bad_inputs_are_errors(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *other;
  agt_ok(ag_ctx_create(&other, AG_DEVICE_CPU, 0));
  ag_tensor *a, *b, *i32, *o, *sentinel = (ag_tensor *)(uintptr_t)0x1234;
  agt_ok(ag_tensor_create(ctx, 3, 4, AG_F32, NULL, &a));
  agt_ok(ag_tensor_create(ctx, 2, 4, AG_F32, NULL, &b));
  agt_ok(ag_tensor_create(ctx, 4, 1, AG_I32, NULL, &i32));
  ag_tensor *foreign;
  agt_ok(ag_tensor_create(other, 3, 4, AG_F32, NULL, &foreign));
  o = sentinel;
  agt_err(ag_add(a, b, &o), AG_ERR_SHAPE, "shapes [3, 4] and [2, 4] do not broadcast");
  agt_err(ag_matmul(a, 0, b, 0, &o), AG_ERR_SHAPE, "inner sizes differ");
  agt_err(ag_relu(i32, &o), AG_ERR_SHAPE, "dtype i32; this op takes f32");
  agt_err(ag_add(a, foreign, &o), AG_ERR_INVALID_ARG, "different contexts");
  agt_err(ag_sum(a, (ag_axis)7, &o), AG_ERR_INVALID_ARG, "axis 7");
  agt_err(ag_max(a, AG_AXIS_ALL, &o), AG_ERR_INVALID_ARG, "axis 2");
  agt_err(ag_pick(a, b, &o), AG_ERR_SHAPE, "idx holds 8 indices for 4 columns");
  agt_err(ag_slice_rows(a, 2, 2, &o), AG_ERR_OUT_OF_RANGE, "rows 2..3");
  agt_err(ag_slice_cols(a, -1, 2, &o), AG_ERR_OUT_OF_RANGE, "columns -1..0");
  agt_err(ag_concat_rows(a, i32, &o), AG_ERR_SHAPE, "dtype i32");
  agt_err(ag_concat_cols(a, b, &o), AG_ERR_SHAPE, "differ in rows");
  agt_err(ag_huber_loss(a, a, 0.0f, &o), AG_ERR_INVALID_ARG, "delta = 0");
  agt_err(ag_mse_loss(a, b, &o), AG_ERR_SHAPE, "pred is [3, 4] and target [2, 4]");
  agt_err(ag_scale(a, NAN, &o), AG_ERR_INVALID_ARG, "not finite");
  agt_err(ag_relu(NULL, &o), AG_ERR_INVALID_ARG, "x is NULL");
  agt_err(ag_relu(a, NULL), AG_ERR_INVALID_ARG, "out is NULL");
  agt_err(ag_backward(a), AG_ERR_SHAPE, "[1, 1]");
  agt_err(ag_tensor_set_requires_grad(i32, 1), AG_ERR_SHAPE, "parameters are f32");
  ag_tensor *tmp;
  agt_ok(ag_full(ctx, 2, 2, 1.0f, &tmp));
  agt_err(ag_tensor_set_requires_grad(tmp, 1), AG_ERR_INVALID_ARG, "only a persistent tensor");
  agt_err(ag_zero_grad(&a, 1), AG_ERR_INVALID_ARG, "has no gradient");
  assert_ptr_equal(o, sentinel);
  ag_ctx_free(other);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_op_matches_reference_and_finite_differences),
      cmocka_unit_test(argmax_picks_the_first_maximum),
      cmocka_unit_test(subnormals_flush_on_the_cpu_only),
      cmocka_unit_test(td_target_matches_host_reference),
      cmocka_unit_test(gradients_accumulate_and_no_grad_stops_them),
      cmocka_unit_test(adam_two_steps_match_closed_form),
      cmocka_unit_test(adam_matches_closed_form_over_blocks_and_tensors),
      cmocka_unit_test(sgd_clips_the_global_gradient_norm),
      cmocka_unit_test(regression_converges_to_the_true_parameters),
      cmocka_unit_test(mlp_init_target_updates_and_files),
      cmocka_unit_test(op_bad_inputs_are_errors),
      cmocka_unit_test(clamp_passes_the_gradient_on_the_closed_range),
      cmocka_unit_test(minimum_maximum_send_ties_to_a_and_sum_broadcasts),
      cmocka_unit_test(clamp_min_max_bad_inputs_change_nothing),
  };
  return agt_run(argc, argv, "graph", tests, sizeof tests / sizeof tests[0]);
}
