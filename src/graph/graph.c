/* graph.c — the ops of agrl/graph.h: validation, the result tensor, the
 * kernel call, and the tape node for reverse mode (backward in autograd.c).
 *
 * Each op checks every argument before it allocates or queues anything, so a
 * failing op changes nothing. Results live in the context's workspace.
 */
#include <math.h>
#include <string.h>

#include "graph/graph_internal.h"

/* ---- operands ---- */

ag_status ag__operand(ag_tensor *t, const char *fn, const char *what, ag__mat *m) {
  ag_status s = ag__check_tensor(t, fn, what);
  if (s) return s;
  if (t->dtype != AG_F32)
    return ag__fail(AG_ERR_SHAPE, "%s: %s has dtype %s; this op takes f32", fn, what,
                    ag_dtype_name(t->dtype));
  void *p;
  if ((s = ag__tensor_ptr(t, &p))) return s;
  m->p = p;
  m->rows = t->rows;
  m->cols = t->cols;
  m->ld = t->ld;
  return AG_OK;
}

ag__mat ag__mat_of_temp(ag_tensor *t) {
  ag__mat m = {(float *)t->data, t->rows, t->cols, t->ld};
  return m;
}

static ag_status same_ctx(ag_tensor *a, ag_tensor *b, const char *fn) {
  if (a->ctx != b->ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: the operands belong to different contexts", fn);
  return AG_OK;
}

int ag__needs_grad(const ag_tensor *t) { return t && (t->flags & AG__T_REQUIRES_GRAD); }

/* Tapes an op whose result `out` depends on in0..in2 when any of them needs a
 * gradient and no no-grad scope is open. */
ag_status ag__tape3(ag_ctx *ctx, int op, ag_tensor *out, ag_tensor *in0, ag_tensor *in1, ag_tensor *in2,
                    const float f[2], const int64_t i[2], void *aux) {
  if (ctx->no_grad || !(ag__needs_grad(in0) || ag__needs_grad(in1) || ag__needs_grad(in2))) return AG_OK;
  ag__node n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.in[0] = in0;
  n.in[1] = in1;
  n.in[2] = in2;
  n.out = out;
  if (f) n.f[0] = f[0], n.f[1] = f[1];
  if (i) n.i[0] = i[0], n.i[1] = i[1];
  n.aux = aux;
  int k = ag__tape_push(ctx, &n);
  if (k < 0) return ag__fail(AG_ERR_OUT_OF_MEMORY, "autograd: out of host memory for the tape");
  if (in0) in0->uses++;
  if (in1) in1->uses++; /* a + a: two uses */
  if (in2) in2->uses++;
  out->node = k;
  out->flags |= AG__T_REQUIRES_GRAD;
  return AG_OK;
}

ag_status ag__tape(ag_ctx *ctx, int op, ag_tensor *out, ag_tensor *in0, ag_tensor *in1, const float f[2],
                   const int64_t i[2], void *aux) {
  return ag__tape3(ctx, op, out, in0, in1, NULL, f, i, aux);
}

/* The shape two operands broadcast to. */
static ag_status broadcast_shape(const ag_tensor *a, const ag_tensor *b, const char *fn, int64_t *rows,
                                 int64_t *cols) {
  int64_t r = a->rows == b->rows ? a->rows : (a->rows == 1 ? b->rows : (b->rows == 1 ? a->rows : -1));
  int64_t c = a->cols == b->cols ? a->cols : (a->cols == 1 ? b->cols : (b->cols == 1 ? a->cols : -1));
  if (r < 0 || c < 0)
    return ag__fail(AG_ERR_SHAPE, "%s: shapes [%lld, %lld] and [%lld, %lld] do not broadcast", fn,
                    (long long)a->rows, (long long)a->cols, (long long)b->rows, (long long)b->cols);
  *rows = r;
  *cols = c;
  return AG_OK;
}

/* ---- elementwise ---- */

ag_status ag__unary(ag_tensor *x, ag__map_op op, float p0, float p1, const char *fn, ag_tensor **out) {
  ag__mat mx;
  ag_status s = ag__operand(x, fn, "x", &mx);
  if (s) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  ag_tensor *y;
  if ((s = ag__tensor_temp(x->ctx, x->rows, x->cols, AG_F32, &y))) return s;
  ag__map_args a = {op, p0, p1, mx, ag__mat_of_temp(y), 0};
  if ((s = ag__run(x->ctx, AG__K_MAP, &a, sizeof a))) return s;
  const float f[2] = {p0, p1};
  const int64_t i[2] = {op, 0};
  if ((s = ag__tape(x->ctx, AG__OP_MAP, y, x, NULL, f, i, NULL))) return s;
  *out = y;
  return AG_OK;
}

static ag_status binary(ag_tensor *a, ag_tensor *b, ag__map2_op op, int tape_op, const char *fn,
                        ag_tensor **out) {
  ag__mat ma, mb;
  ag_status s = ag__operand(a, fn, "a", &ma);
  if (s || (s = ag__operand(b, fn, "b", &mb)) || (s = same_ctx(a, b, fn))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  int64_t rows = 0, cols = 0;
  if ((s = broadcast_shape(a, b, fn, &rows, &cols))) return s;
  ag_tensor *y;
  if ((s = ag__tensor_temp(a->ctx, rows, cols, AG_F32, &y))) return s;
  ag__map2_args k = {op, 1.0f, 0.0f, ma, mb, ag__mat_of_temp(y), 0, 0.0f};
  if ((s = ag__run(a->ctx, AG__K_MAP2, &k, sizeof k))) return s;
  if ((s = ag__tape(a->ctx, tape_op, y, a, b, NULL, NULL, NULL))) return s;
  *out = y;
  return AG_OK;
}

ag_status ag_add(ag_tensor *a, ag_tensor *b, ag_tensor **out) {
  return binary(a, b, AG__MAP2_ADD, AG__OP_ADD, "ag_add", out);
}
ag_status ag_sub(ag_tensor *a, ag_tensor *b, ag_tensor **out) {
  return binary(a, b, AG__MAP2_SUB, AG__OP_SUB, "ag_sub", out);
}
ag_status ag_mul(ag_tensor *a, ag_tensor *b, ag_tensor **out) {
  return binary(a, b, AG__MAP2_MUL, AG__OP_MUL, "ag_mul", out);
}
ag_status ag_div(ag_tensor *a, ag_tensor *b, ag_tensor **out) {
  return binary(a, b, AG__MAP2_DIV, AG__OP_DIV, "ag_div", out);
}
ag_status ag_minimum(ag_tensor *a, ag_tensor *b, ag_tensor **out) {
  return binary(a, b, AG__MAP2_MIN, AG__OP_MINIMUM, "ag_minimum", out);
}
ag_status ag_maximum(ag_tensor *a, ag_tensor *b, ag_tensor **out) {
  return binary(a, b, AG__MAP2_MAX, AG__OP_MAXIMUM, "ag_maximum", out);
}

static ag_status finite_param(float v, const char *fn, const char *what) {
  if (!isfinite(v)) return ag__fail(AG_ERR_INVALID_ARG, "%s: %s = %g is not finite", fn, what, (double)v);
  return AG_OK;
}

ag_status ag_scale(ag_tensor *x, float s, ag_tensor **out) {
  ag_status st = finite_param(s, "ag_scale", "s");
  return st ? st : ag__unary(x, AG__MAP_AFFINE, s, 0.0f, "ag_scale", out);
}

ag_status ag_affine(ag_tensor *x, float a, float b, ag_tensor **out) {
  ag_status st = finite_param(a, "ag_affine", "a");
  if (!st) st = finite_param(b, "ag_affine", "b");
  return st ? st : ag__unary(x, AG__MAP_AFFINE, a, b, "ag_affine", out);
}

ag_status ag_relu(ag_tensor *x, ag_tensor **out) { return ag__unary(x, AG__MAP_RELU, 0, 0, "ag_relu", out); }
ag_status ag_tanh(ag_tensor *x, ag_tensor **out) { return ag__unary(x, AG__MAP_TANH, 0, 0, "ag_tanh", out); }
ag_status ag_sigmoid(ag_tensor *x, ag_tensor **out) {
  return ag__unary(x, AG__MAP_SIGMOID, 0, 0, "ag_sigmoid", out);
}
ag_status ag_exp(ag_tensor *x, ag_tensor **out) { return ag__unary(x, AG__MAP_EXP, 0, 0, "ag_exp", out); }
ag_status ag_log(ag_tensor *x, ag_tensor **out) { return ag__unary(x, AG__MAP_LOG, 0, 0, "ag_log", out); }
ag_status ag_square(ag_tensor *x, ag_tensor **out) {
  return ag__unary(x, AG__MAP_SQUARE, 0, 0, "ag_square", out);
}
ag_status ag_abs(ag_tensor *x, ag_tensor **out) { return ag__unary(x, AG__MAP_ABS, 0, 0, "ag_abs", out); }
ag_status ag_clamp(ag_tensor *x, float lo, float hi, ag_tensor **out) {
  static const char fn[] = "ag_clamp";
  ag_status st = finite_param(lo, fn, "lo");
  if (!st) st = finite_param(hi, fn, "hi");
  if (!st && lo > hi)
    st = ag__fail(AG_ERR_INVALID_ARG, "%s: lo = %g is above hi = %g", fn, (double)lo, (double)hi);
  return st ? st : ag__unary(x, AG__MAP_CLAMP, lo, hi, fn, out);
}
ag_status ag_huber(ag_tensor *x, float delta, ag_tensor **out) {
  if (!(delta > 0.0f) || !isfinite(delta))
    return ag__fail(AG_ERR_INVALID_ARG, "ag_huber: delta = %g must be positive and finite", (double)delta);
  return ag__unary(x, AG__MAP_HUBER, delta, 0, "ag_huber", out);
}

/* ---- matrix product ---- */

ag_status ag_matmul(ag_tensor *a, int trans_a, ag_tensor *b, int trans_b, ag_tensor **out) {
  static const char fn[] = "ag_matmul";
  ag__mat ma = {0}, mb = {0};
  ag_status s = ag__operand(a, fn, "a", &ma);
  if (s || (s = ag__operand(b, fn, "b", &mb)) || (s = same_ctx(a, b, fn))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  int64_t m = trans_a ? a->cols : a->rows, k = trans_a ? a->rows : a->cols;
  int64_t kb = trans_b ? b->cols : b->rows, n = trans_b ? b->rows : b->cols;
  if (k != kb)
    return ag__fail(AG_ERR_SHAPE, "%s: op(a) is [%lld, %lld] and op(b) is [%lld, %lld]; inner sizes differ",
                    fn, (long long)m, (long long)k, (long long)kb, (long long)n);
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: sizes beyond 2^31 are not supported by the BLAS", fn);
  ag_tensor *y;
  if ((s = ag__tensor_temp(a->ctx, m, n, AG_F32, &y))) return s;
  ag__gemm_args g = {trans_a != 0, trans_b != 0,     m, n, k, 1.0f, 0.0f, ma.p, ma.ld, mb.p,
                     mb.ld,        (float *)y->data, m};
  if ((s = ag__run(a->ctx, AG__K_GEMM, &g, sizeof g))) return s;
  const int64_t i[2] = {trans_a != 0, trans_b != 0};
  if ((s = ag__tape(a->ctx, AG__OP_MATMUL, y, a, b, NULL, i, NULL))) return s;
  *out = y;
  return AG_OK;
}

/* ---- convolution ---- */

/* The kernel's arguments of a convolution of x by w (geometry checked,
 * sizes in range), without its pointers; *rows: the output's rows. */
static ag_status conv_geometry(const ag_conv2d_geom *g, const ag_tensor *x, const ag_tensor *w,
                               const char *fn, ag__conv2d_args *a, int64_t *rows) {
  if (!g) return ag__fail(AG_ERR_INVALID_ARG, "%s: geom is NULL", fn);
  if (g->C < 1 || g->H < 1 || g->W < 1 || g->kh < 1 || g->kw < 1 || g->stride < 1 || g->pad < 0)
    return ag__fail(
        AG_ERR_INVALID_ARG,
        "%s: C = %lld, H = %lld, W = %lld, kh = %lld, kw = %lld and stride = %lld must be positive "
        "and pad = %lld not negative",
        fn, (long long)g->C, (long long)g->H, (long long)g->W, (long long)g->kh, (long long)g->kw,
        (long long)g->stride, (long long)g->pad);
  const int64_t small = 65535, big = INT32_MAX;
  if (g->kh > small || g->kw > small || g->stride > small || g->pad > small)
    return ag__fail(
        AG_ERR_UNSUPPORTED, "%s: kh = %lld, kw = %lld, stride = %lld, pad = %lld: each must be at most %lld",
        fn, (long long)g->kh, (long long)g->kw, (long long)g->stride, (long long)g->pad, (long long)small);
  size_t chw = 0, ckk = 0;
  if (!ag__mul3((uint64_t)g->C, (uint64_t)g->H, (uint64_t)g->W, &chw) || chw > (size_t)big ||
      !ag__mul3((uint64_t)g->C, (uint64_t)g->kh, (uint64_t)g->kw, &ckk) || ckk > (size_t)big)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: C*H*W or C*kh*kw of C = %lld, H = %lld, W = %lld, kh = %lld, kw = %lld "
                    "is beyond 2^31 - 1",
                    fn, (long long)g->C, (long long)g->H, (long long)g->W, (long long)g->kh,
                    (long long)g->kw);
  if ((int64_t)chw != x->rows)
    return ag__fail(AG_ERR_SHAPE, "%s: x has %lld rows; C*H*W = %lld*%lld*%lld = %lld", fn,
                    (long long)x->rows, (long long)g->C, (long long)g->H, (long long)g->W, (long long)chw);
  if ((int64_t)ckk != w->rows)
    return ag__fail(AG_ERR_SHAPE, "%s: w has %lld rows; C*kh*kw = %lld*%lld*%lld = %lld", fn,
                    (long long)w->rows, (long long)g->C, (long long)g->kh, (long long)g->kw, (long long)ckk);
  if (g->kh > g->H + 2 * g->pad || g->kw > g->W + 2 * g->pad)
    return ag__fail(AG_ERR_SHAPE,
                    "%s: the %lldx%lld filter is larger than the %lldx%lld image padded by %lld", fn,
                    (long long)g->kh, (long long)g->kw, (long long)g->H, (long long)g->W, (long long)g->pad);
  const int64_t Ho = ag__conv_out(g->H, g->kh, g->stride, g->pad),
                Wo = ag__conv_out(g->W, g->kw, g->stride, g->pad);
  size_t kout = 0, cols = 0;
  if (!ag__mul3((uint64_t)w->cols, (uint64_t)Ho, (uint64_t)Wo, &kout) || kout > (size_t)big ||
      !ag__mul3((uint64_t)Ho, (uint64_t)Wo, ckk, &cols) || cols > (size_t)big)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: K*Ho*Wo or Ho*Wo*C*kh*kw of K = %lld, Ho = %lld, Wo = %lld, C*kh*kw = %zu "
                    "is beyond 2^31 - 1",
                    fn, (long long)w->cols, (long long)Ho, (long long)Wo, ckk);
  memset(a, 0, sizeof *a);
  a->C = g->C, a->H = g->H, a->W = g->W, a->K = w->cols, a->kh = g->kh, a->kw = g->kw;
  a->stride = g->stride, a->pad = g->pad;
  *rows = (int64_t)kout;
  return AG_OK;
}

ag_status ag_conv2d(ag_tensor *x, const ag_conv2d_geom *geom, ag_tensor *w, ag_tensor *b, ag_tensor **out) {
  static const char fn[] = "ag_conv2d";
  ag__mat mx, mw, mb = {NULL, 0, 0, 0};
  ag_status s = ag__operand(x, fn, "x", &mx);
  if (s || (s = ag__operand(w, fn, "w", &mw)) || (s = same_ctx(x, w, fn))) return s;
  if (b && ((s = ag__operand(b, fn, "b", &mb)) || (s = same_ctx(x, b, fn)))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  ag__conv2d_args a;
  int64_t rows = 0;
  if ((s = conv_geometry(geom, x, w, fn, &a, &rows))) return s;
  if (b && (b->rows != w->cols || b->cols != 1))
    return ag__fail(AG_ERR_SHAPE, "%s: b is [%lld, %lld]; the bias of %lld filters is [%lld, 1]", fn,
                    (long long)b->rows, (long long)b->cols, (long long)w->cols, (long long)w->cols);
  ag_ctx *ctx = x->ctx;
  a.mode = AG__CONV_FWD, a.x = mx, a.w = mw, a.b = mb.p;
  a.y = (ag__mat){NULL, rows, x->cols, rows};
  if (!ag__kernel_supported(ctx, AG__K_CONV2D, &a, sizeof a))
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the %s backend has no convolution kernel", fn, ctx->be->name);
  const size_t scratch = ag__kernel_scratch(ctx, AG__K_CONV2D, &a, sizeof a);
  void *ws = NULL;
  if (scratch && (s = ag__ws_alloc(ctx, scratch, &ws))) return s;
  ag_tensor *y;
  if ((s = ag__tensor_temp(ctx, rows, x->cols, AG_F32, &y))) return s;
  a.y = ag__mat_of_temp(y), a.ws = ws;
  if ((s = ag__run(ctx, AG__K_CONV2D, &a, sizeof a))) return s;
  int64_t i[2];
  ag__conv_pack(&a, i);
  if ((s = ag__tape3(ctx, AG__OP_CONV2D, y, x, w, b, NULL, i, NULL))) return s;
  *out = y;
  return AG_OK;
}

/* ---- reductions ---- */

static ag_status check_axis(ag_axis axis, int allow_all, const char *fn) {
  if (axis == AG_AXIS_ROWS || axis == AG_AXIS_COLS || (allow_all && axis == AG_AXIS_ALL)) return AG_OK;
  return ag__fail(AG_ERR_INVALID_ARG, "%s: axis %d is not AG_AXIS_ROWS, AG_AXIS_COLS%s", fn, (int)axis,
                  allow_all ? " or AG_AXIS_ALL" : "");
}

static void reduced_shape(const ag_tensor *x, ag_axis axis, int64_t *rows, int64_t *cols) {
  *rows = axis == AG_AXIS_COLS ? x->rows : 1;
  *cols = axis == AG_AXIS_ROWS ? x->cols : 1;
}

static ag_status sum_scaled(ag_tensor *x, ag_axis axis, int mean, const char *fn, ag_tensor **out) {
  ag__mat mx;
  ag_status s = ag__operand(x, fn, "x", &mx);
  if (s || (s = check_axis(axis, 1, fn))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  int64_t rows, cols;
  reduced_shape(x, axis, &rows, &cols);
  int64_t count = axis == AG_AXIS_ROWS ? x->rows : (axis == AG_AXIS_COLS ? x->cols : x->rows * x->cols);
  float scale = mean ? 1.0f / (float)count : 1.0f;
  ag_tensor *y;
  if ((s = ag__tensor_temp(x->ctx, rows, cols, AG_F32, &y))) return s;
  ag__reduce_args r = {AG__RED_SUM, (int)axis, scale, mx, ag__mat_of_temp(y), NULL, AG_I32, 0};
  if ((s = ag__run(x->ctx, AG__K_REDUCE, &r, sizeof r))) return s;
  const float f[2] = {scale, 0};
  const int64_t i[2] = {axis, 0};
  if ((s = ag__tape(x->ctx, AG__OP_SUM, y, x, NULL, f, i, NULL))) return s;
  *out = y;
  return AG_OK;
}

ag_status ag_sum(ag_tensor *x, ag_axis axis, ag_tensor **out) {
  return sum_scaled(x, axis, 0, "ag_sum", out);
}
ag_status ag_mean(ag_tensor *x, ag_axis axis, ag_tensor **out) {
  return sum_scaled(x, axis, 1, "ag_mean", out);
}

ag_status ag_max(ag_tensor *x, ag_axis axis, ag_tensor **out) {
  static const char fn[] = "ag_max";
  ag__mat mx;
  ag_status s = ag__operand(x, fn, "x", &mx);
  if (s || (s = check_axis(axis, 0, fn))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  int64_t rows, cols;
  reduced_shape(x, axis, &rows, &cols);
  int want_arg = !x->ctx->no_grad && ag__needs_grad(x);
  void *arg = NULL;
  if (want_arg && (s = ag__ws_alloc(x->ctx, (size_t)(rows * cols) * sizeof(int32_t), &arg))) return s;
  ag_tensor *y;
  if ((s = ag__tensor_temp(x->ctx, rows, cols, AG_F32, &y))) return s;
  ag__reduce_args r = {AG__RED_MAX, (int)axis, 1.0f, mx, ag__mat_of_temp(y), arg, AG_I32, 0};
  if ((s = ag__run(x->ctx, AG__K_REDUCE, &r, sizeof r))) return s;
  const int64_t i[2] = {axis, 0};
  if ((s = ag__tape(x->ctx, AG__OP_MAX, y, x, NULL, NULL, i, arg))) return s;
  *out = y;
  return AG_OK;
}

ag_status ag_argmax(ag_tensor *x, ag_axis axis, ag_dtype idx_dtype, ag_tensor **out) {
  static const char fn[] = "ag_argmax";
  ag__mat mx;
  ag_status s = ag__operand(x, fn, "x", &mx);
  if (s || (s = check_axis(axis, 0, fn))) return s;
  if (idx_dtype != AG_I32 && idx_dtype != AG_I64)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: idx_dtype %s is not i32 or i64", fn, ag_dtype_name(idx_dtype));
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  int64_t rows, cols;
  reduced_shape(x, axis, &rows, &cols);
  ag_tensor *y;
  if ((s = ag__tensor_temp(x->ctx, rows, cols, idx_dtype, &y))) return s;
  ag__mat none = {NULL, rows, cols, rows};
  ag__reduce_args r = {AG__RED_MAX, (int)axis, 1.0f, mx, none, y->data, idx_dtype, 0};
  if ((s = ag__run(x->ctx, AG__K_REDUCE, &r, sizeof r))) return s;
  *out = y;
  return AG_OK;
}

/* ---- selection ---- */

/* Pointer, dtype and stride of the n elements of an index tensor. */
ag_status ag__index_operand(ag_tensor *idx, int64_t n, const char *fn, const void **p, int64_t *stride) {
  ag_status s = ag__check_tensor(idx, fn, "idx");
  if (s) return s;
  if (idx->dtype != AG_I32 && idx->dtype != AG_I64 && idx->dtype != AG_F32)
    return ag__fail(AG_ERR_SHAPE, "%s: idx has dtype %s; indices must be i32, i64 or f32", fn,
                    ag_dtype_name(idx->dtype));
  if (idx->rows * idx->cols != n)
    return ag__fail(AG_ERR_SHAPE, "%s: idx holds %lld indices for %lld columns", fn,
                    (long long)(idx->rows * idx->cols), (long long)n);
  if (idx->rows != 1 && idx->cols != 1 && idx->ld != idx->rows)
    return ag__fail(AG_ERR_SHAPE, "%s: idx must be a row, a column, or contiguous", fn);
  void *ptr;
  if ((s = ag__tensor_ptr(idx, &ptr))) return s;
  *p = ptr;
  *stride = idx->rows == 1 ? idx->ld : 1;
  return AG_OK;
}

ag_status ag_pick(ag_tensor *x, ag_tensor *idx, ag_tensor **out) {
  static const char fn[] = "ag_pick";
  ag__mat mx;
  ag_status s = ag__operand(x, fn, "x", &mx);
  if (s) return s;
  const void *ip;
  int64_t stride;
  if ((s = ag__index_operand(idx, x->cols, fn, &ip, &stride)) || (s = same_ctx(x, idx, fn))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  ag_tensor *y;
  if ((s = ag__tensor_temp(x->ctx, 1, x->cols, AG_F32, &y))) return s;
  ag__pick_args a = {0, mx, ip, idx->dtype, stride, ag__mat_of_temp(y), 0};
  if ((s = ag__run(x->ctx, AG__K_PICK, &a, sizeof a))) return s;
  if ((s = ag__tape(x->ctx, AG__OP_PICK, y, x, idx, NULL, NULL, NULL))) return s;
  *out = y;
  return AG_OK;
}

static ag_status make_view(ag_tensor *x, int64_t r0, int64_t c0, int64_t rows, int64_t cols, const char *fn,
                           ag_tensor **out) {
  void *p;
  ag_status s = ag__tensor_ptr(x, &p);
  if (s) return s;
  ag_tensor *v;
  size_t es = ag_dtype_size(x->dtype);
  if ((s = ag__tensor_view(x->ctx, rows, cols, x->ld, x->dtype, (char *)p + (size_t)(c0 * x->ld + r0) * es,
                           &v)))
    return s;
  v->base = x;
  const int64_t i[2] = {r0, c0};
  if ((s = ag__tape(x->ctx, AG__OP_VIEW, v, x, NULL, NULL, i, NULL))) return s;
  (void)fn;
  *out = v;
  return AG_OK;
}

/* A view of n rows (by_rows) or n columns of x from `start`. */
static ag_status slice(ag_tensor *x, int by_rows, int64_t start, int64_t n, const char *fn, ag_tensor **out) {
  ag_status s = ag__check_tensor(x, fn, "x");
  if (s) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  int64_t extent = by_rows ? x->rows : x->cols;
  const char *what = by_rows ? "rows" : "columns";
  if (n < 1 || start < 0 || start > extent - n)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: %s %lld..%lld (n = %lld) are outside the %lld %s of x", fn,
                    what, (long long)start, (long long)(start + n - 1), (long long)n, (long long)extent,
                    what);
  return by_rows ? make_view(x, start, 0, n, x->cols, fn, out) : make_view(x, 0, start, x->rows, n, fn, out);
}

ag_status ag_slice_rows(ag_tensor *x, int64_t r0, int64_t n, ag_tensor **out) {
  return slice(x, 1, r0, n, "ag_slice_rows", out);
}

ag_status ag_slice_cols(ag_tensor *x, int64_t c0, int64_t n, ag_tensor **out) {
  return slice(x, 0, c0, n, "ag_slice_cols", out);
}

ag_status ag_detach(ag_tensor *x, ag_tensor **out) {
  static const char fn[] = "ag_detach";
  ag_status s = ag__check_tensor(x, fn, "x");
  if (s) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  void *p;
  if ((s = ag__tensor_ptr(x, &p))) return s;
  return ag__tensor_view(x->ctx, x->rows, x->cols, x->ld, x->dtype, p, out);
}

ag_status ag_contiguous(ag_tensor *x, ag_tensor **out) {
  return ag__unary(x, AG__MAP_IDENT, 0.0f, 0.0f, "ag_contiguous", out); /* a packed copy */
}

static ag_status concat(ag_tensor *a, ag_tensor *b, int by_rows, const char *fn, ag_tensor **out) {
  ag__mat ma, mb;
  ag_status s = ag__operand(a, fn, "a", &ma);
  if (s || (s = ag__operand(b, fn, "b", &mb)) || (s = same_ctx(a, b, fn))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  if (by_rows ? a->cols != b->cols : a->rows != b->rows)
    return ag__fail(AG_ERR_SHAPE, "%s: [%lld, %lld] and [%lld, %lld] differ in %s", fn, (long long)a->rows,
                    (long long)a->cols, (long long)b->rows, (long long)b->cols, by_rows ? "columns" : "rows");
  int64_t rows = by_rows ? a->rows + b->rows : a->rows, cols = by_rows ? a->cols : a->cols + b->cols;
  ag_tensor *y;
  if ((s = ag__tensor_temp(a->ctx, rows, cols, AG_F32, &y))) return s;
  ag__mat my = ag__mat_of_temp(y);
  ag__mat ya = {my.p, a->rows, a->cols, my.ld};
  ag__mat yb = {by_rows ? my.p + a->rows : my.p + a->cols * my.ld, b->rows, b->cols, my.ld};
  ag__copy_args c1 = {ma, ya, 0}, c2 = {mb, yb, 0};
  if ((s = ag__run(a->ctx, AG__K_COPY, &c1, sizeof c1)) || (s = ag__run(a->ctx, AG__K_COPY, &c2, sizeof c2)))
    return s;
  const int64_t i[2] = {by_rows, 0};
  if ((s = ag__tape(a->ctx, AG__OP_CONCAT, y, a, b, NULL, i, NULL))) return s;
  *out = y;
  return AG_OK;
}

ag_status ag_concat_rows(ag_tensor *a, ag_tensor *b, ag_tensor **out) {
  return concat(a, b, 1, "ag_concat_rows", out);
}
ag_status ag_concat_cols(ag_tensor *a, ag_tensor *b, ag_tensor **out) {
  return concat(a, b, 0, "ag_concat_cols", out);
}

/* ---- losses ---- */

static ag_status loss(ag_tensor *pred, ag_tensor *target, int kind, float delta, const char *fn,
                      ag_tensor **out) {
  ag__mat mp, mt;
  ag_status s = ag__operand(pred, fn, "pred", &mp);
  if (s || (s = ag__operand(target, fn, "target", &mt)) || (s = same_ctx(pred, target, fn))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  if (pred->rows != target->rows || pred->cols != target->cols)
    return ag__fail(AG_ERR_SHAPE, "%s: pred is [%lld, %lld] and target [%lld, %lld]", fn,
                    (long long)pred->rows, (long long)pred->cols, (long long)target->rows,
                    (long long)target->cols);
  ag_ctx *ctx = pred->ctx;
  int grad = !ctx->no_grad && (ag__needs_grad(pred) || ag__needs_grad(target));
  ag_tensor *y, *dpred = NULL;
  if ((s = ag__tensor_temp(ctx, 1, 1, AG_F32, &y))) return s;
  if (grad && (s = ag__tensor_temp(ctx, pred->rows, pred->cols, AG_F32, &dpred))) return s;
  ag__mat none = {NULL, pred->rows, pred->cols, pred->rows};
  ag__loss_args a = {kind, delta, mp, mt, (float *)y->data, dpred ? ag__mat_of_temp(dpred) : none};
  if ((s = ag__run(ctx, AG__K_LOSS, &a, sizeof a))) return s;
  if ((s = ag__tape(ctx, AG__OP_LOSS, y, pred, target, NULL, NULL, dpred))) return s;
  *out = y;
  return AG_OK;
}

ag_status ag_mse_loss(ag_tensor *pred, ag_tensor *target, ag_tensor **out) {
  return loss(pred, target, 0, 0.0f, "ag_mse_loss", out);
}

ag_status ag_huber_loss(ag_tensor *pred, ag_tensor *target, float delta, ag_tensor **out) {
  if (!(delta > 0.0f) || !isfinite(delta))
    return ag__fail(AG_ERR_INVALID_ARG, "ag_huber_loss: delta = %g must be positive and finite",
                    (double)delta);
  return loss(pred, target, 1, delta, "ag_huber_loss", out);
}

/* ---- fused ops ---- */

ag_status ag_bias_act(ag_tensor *x, ag_tensor *b, ag_bias_act_kind act, ag_tensor **out) {
  static const char fn[] = "ag_bias_act";
  static const ag__map2_op ops[4] = {AG__MAP2_ADD, AG__MAP2_ADD_RELU, AG__MAP2_ADD_TANH,
                                     AG__MAP2_ADD_SIGMOID};
  if ((int)act < 0 || act > AG_BIAS_SIGMOID)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: activation %d is unknown", fn, (int)act);
  ag__mat mx, mb;
  ag_status s = ag__operand(x, fn, "x", &mx);
  if (s || (s = ag__operand(b, fn, "b", &mb)) || (s = same_ctx(x, b, fn))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  int64_t rows = 0, cols = 0;
  if ((s = broadcast_shape(x, b, fn, &rows, &cols))) return s;
  if (rows != x->rows || cols != x->cols) /* every act, AG_BIAS_NONE too */
    return ag__fail(AG_ERR_SHAPE, "%s: b [%lld, %lld] must broadcast to x [%lld, %lld]", fn,
                    (long long)b->rows, (long long)b->cols, (long long)x->rows, (long long)x->cols);
  if (act == AG_BIAS_NONE) return ag_add(x, b, out);
  ag_tensor *y;
  if ((s = ag__tensor_temp(x->ctx, rows, cols, AG_F32, &y))) return s;
  ag__map2_args k = {ops[act], 1.0f, 0.0f, mx, mb, ag__mat_of_temp(y), 0, 0.0f};
  if ((s = ag__run(x->ctx, AG__K_MAP2, &k, sizeof k))) return s;
  const int64_t i[2] = {act, 0};
  if ((s = ag__tape(x->ctx, AG__OP_BIAS_ACT, y, x, b, NULL, i, NULL))) return s;
  *out = y;
  return AG_OK;
}

ag_status ag_td_target(ag_tensor *q_next, ag_tensor *idx, ag_tensor *reward, ag_tensor *done, float gamma,
                       ag_tensor **out) {
  static const char fn[] = "ag_td_target";
  ag__mat mq, mr, md;
  ag_status s = ag__operand(q_next, fn, "q_next", &mq);
  if (s || (s = ag__operand(reward, fn, "reward", &mr)) || (s = ag__operand(done, fn, "done", &md))) return s;
  if ((s = same_ctx(q_next, reward, fn)) || (s = same_ctx(q_next, done, fn))) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  if (!isfinite(gamma))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: gamma = %g is not finite", fn, (double)gamma);
  int64_t B = q_next->cols;
  if (reward->rows != 1 || reward->cols != B || done->rows != 1 || done->cols != B)
    return ag__fail(AG_ERR_SHAPE,
                    "%s: reward [%lld, %lld] and done [%lld, %lld] must be [1, %lld] like q_next's columns",
                    fn, (long long)reward->rows, (long long)reward->cols, (long long)done->rows,
                    (long long)done->cols, (long long)B);
  const void *ip = NULL;
  int64_t stride = 1;
  if (idx && ((s = ag__index_operand(idx, B, fn, &ip, &stride)) || (s = same_ctx(q_next, idx, fn)))) return s;
  ag_tensor *y;
  if ((s = ag__tensor_temp(q_next->ctx, 1, B, AG_F32, &y))) return s;
  ag__td_args a = {mq, ip, idx ? idx->dtype : AG_I32, stride, mr, md, gamma, ag__mat_of_temp(y)};
  if ((s = ag__run(q_next->ctx, AG__K_TD_TARGET, &a, sizeof a))) return s;
  *out = y; /* a target: never taped */
  return AG_OK;
}

/* ---- values ---- */

ag_status ag_full(ag_ctx *ctx, int64_t rows, int64_t cols, float value, ag_tensor **out) {
  static const char fn[] = "ag_full";
  if (!ctx || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx and out must not be NULL", fn);
  if (rows < 1 || cols < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: rows = %lld and cols = %lld must both be positive", fn,
                    (long long)rows, (long long)cols);
  ag_tensor *y;
  ag_status s = ag__tensor_temp(ctx, rows, cols, AG_F32, &y);
  if (s) return s;
  ag__fill_args f = {ag__mat_of_temp(y), value};
  if ((s = ag__run(ctx, AG__K_FILL, &f, sizeof f))) return s;
  *out = y;
  return AG_OK;
}

void ag_no_grad_begin(ag_ctx *ctx) {
  if (ctx) ctx->no_grad++;
}

void ag_no_grad_end(ag_ctx *ctx) {
  if (ctx && ctx->no_grad > 0) ctx->no_grad--;
}
