/* autograd.c — gradients: parameters, the backward pass over the tape.
 *
 * Every tape node knows its op; its backward issues kernels that add the
 * node's contribution to the gradients of its inputs. A parameter's gradient
 * is persistent and always accumulated; a temporary's is a workspace tensor
 * that the first contribution writes and later ones add to. Contributions to
 * a broadcast operand are summed back to its shape.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"

ag_status ag_tensor_set_requires_grad(ag_tensor *t, int on) {
  static const char fn[] = "ag_tensor_set_requires_grad";
  ag_status s = ag__check_tensor(t, fn, "t");
  if (s) return s;
  if (!(t->flags & AG__T_PERSISTENT) || (t->flags & AG__T_IS_GRAD))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: only a persistent tensor (ag_tensor_create) can be a parameter",
                    fn);
  if (t->dtype != AG_F32)
    return ag__fail(AG_ERR_SHAPE, "%s: t has dtype %s; parameters are f32", fn, ag_dtype_name(t->dtype));
  if (!on) {
    t->flags &= ~AG__T_REQUIRES_GRAD;
    return AG_OK;
  }
  if (!t->grad) {
    ag_tensor *g = NULL;
    if ((s = ag_tensor_create(t->ctx, t->rows, t->cols, AG_F32, NULL, &g))) return s;
    g->flags |= AG__T_IS_GRAD;
    g->base = t;
    t->grad = g;
  }
  t->flags |= AG__T_REQUIRES_GRAD;
  return AG_OK;
}

int ag_tensor_requires_grad(const ag_tensor *t) { return ag__needs_grad(t); }

ag_status ag__grad_materialize(ag_tensor *t) {
  if (!(t->flags & AG__T_GRAD_STALE)) return AG_OK;
  ag__mat g;
  ag_status s = ag__operand(t->grad, "autograd", "a gradient", &g);
  if (s) return s;
  ag__fill_args f = {g, 0.0f};
  if ((s = ag__run(t->ctx, AG__K_FILL, &f, sizeof f))) return s;
  t->flags &= ~AG__T_GRAD_STALE;
  return AG_OK;
}

ag_tensor *ag_tensor_grad(const ag_tensor *t) {
  if (!t || (t->flags & AG__T_FREED)) return NULL;
  if (ag__grad_materialize((ag_tensor *)t)) return NULL;
  return t->grad;
}

ag_status ag_zero_grad(ag_tensor *const *params, int n) {
  static const char fn[] = "ag_zero_grad";
  if (n < 0 || (n > 0 && !params))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: params is NULL or n = %d < 0", fn, n);
  for (int i = 0; i < n; i++) { /* validate all first */
    ag_status s = ag__check_tensor(params[i], fn, "a parameter");
    if (s) return s;
    if (!params[i]->grad)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: params[%d] has no gradient (ag_tensor_set_requires_grad)", fn,
                      i);
  }
  /* no kernel: the next contribution to each gradient writes instead of adding
   * (and ag__grad_materialize zeroes one that receives none) */
  for (int i = 0; i < n; i++) params[i]->flags |= AG__T_GRAD_STALE;
  return AG_OK;
}

/* ---- gradient destinations ---- */

typedef struct gdst {
  ag__mat m;
  int acc;
} gdst;

/* Where contributions to t's gradient go. */
static ag_status grad_dst(ag_tensor *t, gdst *d) {
  ag_status s;
  if (!t->grad) {
    ag_tensor *g;
    if ((s = ag__tensor_temp(t->ctx, t->rows, t->cols, AG_F32, &g))) return s;
    t->grad = g;
  }
  if ((s = ag__operand(t->grad, "ag_backward", "a gradient", &d->m))) return s;
  d->acc = (t->flags & AG__T_PERSISTENT) ? !(t->flags & AG__T_GRAD_STALE) : (t->flags & AG__T_GRAD_INIT) != 0;
  return AG_OK;
}

static void grad_written(ag_tensor *t) {
  t->flags |= AG__T_GRAD_INIT;
  t->flags &= ~AG__T_GRAD_STALE;
}

/* A temporary read by one taped op only, whose gradient is not written yet,
 * can take the gradient g as its own without a copy: nothing else will add
 * to it. */
static int grad_alias(ag_tensor *t, ag__mat g, float scale) {
  if ((t->flags & (AG__T_PERSISTENT | AG__T_GRAD_INIT)) || t->uses != 1 || scale != 1.0f ||
      g.rows != t->rows || g.cols != t->cols)
    return 0;
  ag_tensor *v;
  if (ag__tensor_view(t->ctx, g.rows, g.cols, g.ld, AG_F32, g.p, &v)) return 0;
  t->grad = v;
  grad_written(t);
  return 1;
}

/* The whole gradient of t, zero-filled if nothing was written yet (for
 * contributions that cover only a part of it). */
static ag_status grad_full(ag_tensor *t, ag__mat *m) {
  gdst d;
  ag_status s = grad_dst(t, &d);
  if (s) return s;
  if (!d.acc) {
    ag__fill_args f = {d.m, 0.0f};
    if ((s = ag__run(t->ctx, AG__K_FILL, &f, sizeof f))) return s;
    grad_written(t);
  }
  *m = d.m;
  return AG_OK;
}

/* Sums `full` ([R, C]) into d ([1, C], [R, 1] or [1, 1]) times scale. */
static ag_status reduce_into(ag_ctx *ctx, ag__mat full, gdst d, float scale) {
  int axis = (d.m.rows == 1 && d.m.cols == 1) ? 2 : (d.m.rows == 1 ? 0 : 1);
  if (axis == 0 && d.m.cols != full.cols) axis = 2;
  if (axis == 1 && d.m.rows != full.rows) axis = 2;
  ag__reduce_args r = {AG__RED_SUM, axis, scale, full, d.m, NULL, AG_I32, d.acc};
  return ag__run(ctx, AG__K_REDUCE, &r, sizeof r);
}

/* t.grad += scale * g, g of t's shape or broadcast from it (then summed). */
static ag_status grad_add(ag_tensor *t, ag__mat g, float scale) {
  if (grad_alias(t, g, scale)) return AG_OK;
  gdst d;
  ag_status s = grad_dst(t, &d);
  if (s) return s;
  if (g.rows == t->rows && g.cols == t->cols) {
    ag__map_args m = {AG__MAP_AFFINE, scale, 0.0f, g, d.m, d.acc};
    s = ag__run(t->ctx, AG__K_MAP, &m, sizeof m);
  } else {
    s = reduce_into(t->ctx, g, d, scale);
  }
  if (!s) grad_written(t);
  return s;
}

/* t.grad += f(x) for x broadcast to t's shape. */
static ag_status grad_map(ag_tensor *t, ag__map_op op, float p0, float p1, ag__mat x) {
  gdst d;
  ag_status s = grad_dst(t, &d);
  if (s) return s;
  ag__map_args m = {op, p0, p1, x, d.m, d.acc};
  if (!(s = ag__run(t->ctx, AG__K_MAP, &m, sizeof m))) grad_written(t);
  return s;
}

/* t.grad += alpha * f(a, b; p0, p1), computed at the shape [rows, cols]
 * and summed back when t is broadcast. */
static ag_status grad_map2_p(ag_tensor *t, ag__map2_op op, float alpha, float p0, float p1, ag__mat a,
                             ag__mat b, int64_t rows, int64_t cols) {
  gdst d;
  ag_status s = grad_dst(t, &d);
  if (s) return s;
  if (t->rows == rows && t->cols == cols) {
    ag__map2_args m = {op, alpha, p0, a, b, d.m, d.acc, p1};
    s = ag__run(t->ctx, AG__K_MAP2, &m, sizeof m);
  } else {
    ag_tensor *tmp;
    if ((s = ag__tensor_temp(t->ctx, rows, cols, AG_F32, &tmp))) return s;
    ag__map2_args m = {op, alpha, p0, a, b, ag__mat_of_temp(tmp), 0, p1};
    if (!(s = ag__run(t->ctx, AG__K_MAP2, &m, sizeof m)))
      s = reduce_into(t->ctx, ag__mat_of_temp(tmp), d, 1.0f);
  }
  if (!s) grad_written(t);
  return s;
}

/* The same for the functions of one parameter. */
static ag_status grad_map2(ag_tensor *t, ag__map2_op op, float alpha, float p0, ag__mat a, ag__mat b,
                           int64_t rows, int64_t cols) {
  return grad_map2_p(t, op, alpha, p0, 0.0f, a, b, rows, cols);
}

/* ---- backward of each op ---- */

static ag_status matmul_backward(ag__node *n, ag__mat g) {
  ag_tensor *a = n->in[0], *b = n->in[1];
  int ta = (int)n->i[0], tb = (int)n->i[1];
  ag__mat ma, mb;
  ag_status s = ag__operand(a, "ag_backward", "a", &ma);
  if (s || (s = ag__operand(b, "ag_backward", "b", &mb))) return s;
  if (ag__needs_grad(a)) {
    gdst d;
    if ((s = grad_dst(a, &d))) return s;
    ag__gemm_args m;
    if (!ta) /* dA [m, k] = g [m, n] op(B)^T */
      m = (ag__gemm_args){0,   !tb,  a->rows, a->cols, g.cols, 1.0f,  d.acc ? 1.0f : 0.0f,
                          g.p, g.ld, mb.p,    mb.ld,   d.m.p,  d.m.ld};
    else /* dA [k, m] = op(B) g^T */
      m = (ag__gemm_args){tb,   1,     a->rows, a->cols, g.cols, 1.0f,  d.acc ? 1.0f : 0.0f,
                          mb.p, mb.ld, g.p,     g.ld,    d.m.p,  d.m.ld};
    if ((s = ag__run(a->ctx, AG__K_GEMM, &m, sizeof m))) return s;
    grad_written(a);
  }
  if (ag__needs_grad(b)) {
    gdst d;
    if ((s = grad_dst(b, &d))) return s;
    ag__gemm_args m;
    if (!tb) /* dB [k, n] = op(A)^T g */
      m = (ag__gemm_args){!ta,  0,     b->rows, b->cols, g.rows, 1.0f,  d.acc ? 1.0f : 0.0f,
                          ma.p, ma.ld, g.p,     g.ld,    d.m.p,  d.m.ld};
    else /* dB [n, k] = g^T op(A) */
      m = (ag__gemm_args){1,   ta,   b->rows, b->cols, g.rows, 1.0f,  d.acc ? 1.0f : 0.0f,
                          g.p, g.ld, ma.p,    ma.ld,   d.m.p,  d.m.ld};
    if ((s = ag__run(b->ctx, AG__K_GEMM, &m, sizeof m))) return s;
    grad_written(b);
  }
  return AG_OK;
}

static ag_status map_backward(ag__node *n, ag__mat g) {
  ag_tensor *x = n->in[0];
  ag__mat mx, my = ag__mat_of_temp(n->out);
  ag_status s = ag__operand(x, "ag_backward", "x", &mx);
  if (s) return s;
  int64_t R = n->out->rows, C = n->out->cols;
  switch ((ag__map_op)n->i[0]) {
    case AG__MAP_IDENT: return grad_add(x, g, 1.0f);
    case AG__MAP_AFFINE: return grad_add(x, g, n->f[0]);
    case AG__MAP_RELU: return grad_map2(x, AG__MAP2_RELU_BWD, 1.0f, 0.0f, g, my, R, C);
    case AG__MAP_TANH: return grad_map2(x, AG__MAP2_TANH_BWD, 1.0f, 0.0f, g, my, R, C);
    case AG__MAP_SIGMOID: return grad_map2(x, AG__MAP2_SIGMOID_BWD, 1.0f, 0.0f, g, my, R, C);
    case AG__MAP_EXP: return grad_map2(x, AG__MAP2_MUL, 1.0f, 0.0f, g, my, R, C);
    case AG__MAP_LOG: return grad_map2(x, AG__MAP2_DIV, 1.0f, 0.0f, g, mx, R, C);
    case AG__MAP_SQUARE: return grad_map2(x, AG__MAP2_MUL, 2.0f, 0.0f, g, mx, R, C);
    case AG__MAP_ABS: return grad_map2(x, AG__MAP2_ABS_BWD, 1.0f, 0.0f, g, mx, R, C);
    case AG__MAP_HUBER: return grad_map2(x, AG__MAP2_HUBER_BWD, 1.0f, n->f[0], g, mx, R, C);
    case AG__MAP_CLAMP: return grad_map2_p(x, AG__MAP2_CLAMP_BWD, 1.0f, n->f[0], n->f[1], g, mx, R, C);
    default: return ag__fail(AG_ERR_STATE, "ag_backward: no gradient for map op %d", (int)n->i[0]);
  }
}

static ag_status binary_backward(ag__node *n, ag__mat g) {
  ag_tensor *a = n->in[0], *b = n->in[1];
  ag__mat ma, mb;
  ag_status s = ag__operand(a, "ag_backward", "a", &ma);
  if (s || (s = ag__operand(b, "ag_backward", "b", &mb))) return s;
  int64_t R = n->out->rows, C = n->out->cols;
  switch (n->op) {
    case AG__OP_ADD:
    case AG__OP_SUB:
      if (ag__needs_grad(a) && (s = grad_add(a, g, 1.0f))) return s;
      if (ag__needs_grad(b) && (s = grad_add(b, g, n->op == AG__OP_ADD ? 1.0f : -1.0f))) return s;
      return AG_OK;
    case AG__OP_MUL:
      if (ag__needs_grad(a) && (s = grad_map2(a, AG__MAP2_MUL, 1.0f, 0.0f, g, mb, R, C))) return s;
      if (ag__needs_grad(b) && (s = grad_map2(b, AG__MAP2_MUL, 1.0f, 0.0f, g, ma, R, C))) return s;
      return AG_OK;
    case AG__OP_MINIMUM:
    case AG__OP_MAXIMUM: { /* g to a where the op took a (its mask, 1 or 0), else to b */
      ag_tensor *mask;
      if ((s = ag__tensor_temp(a->ctx, R, C, AG_F32, &mask))) return s;
      const ag__map2_op take = n->op == AG__OP_MINIMUM ? AG__MAP2_MIN_MASK : AG__MAP2_MAX_MASK;
      ag__mat mm = ag__mat_of_temp(mask);
      ag__map2_args m = {take, 1.0f, 0.0f, ma, mb, mm, 0, 0.0f};
      if ((s = ag__run(a->ctx, AG__K_MAP2, &m, sizeof m))) return s;
      if (ag__needs_grad(a) && (s = grad_map2(a, AG__MAP2_MASK_BWD, 1.0f, 0.0f, g, mm, R, C))) return s;
      if (ag__needs_grad(b) && (s = grad_map2(b, AG__MAP2_UNMASK_BWD, 1.0f, 0.0f, g, mm, R, C))) return s;
      return AG_OK;
    }
    default: /* DIV: da = g / b, db = -(g * y) / b */
      if (ag__needs_grad(a) && (s = grad_map2(a, AG__MAP2_DIV, 1.0f, 0.0f, g, mb, R, C))) return s;
      if (ag__needs_grad(b)) {
        ag_tensor *gy;
        if ((s = ag__tensor_temp(b->ctx, R, C, AG_F32, &gy))) return s;
        ag__map2_args m = {AG__MAP2_MUL,        1.0f, 0.0f, g, ag__mat_of_temp(n->out),
                           ag__mat_of_temp(gy), 0,    0.0f};
        if ((s = ag__run(b->ctx, AG__K_MAP2, &m, sizeof m))) return s;
        if ((s = grad_map2(b, AG__MAP2_DIV, -1.0f, 0.0f, ag__mat_of_temp(gy), mb, R, C))) return s;
      }
      return AG_OK;
  }
}

static ag_status pick_backward(ag_tensor *x, int axis, const void *idx, ag_dtype dt, int64_t stride,
                               ag__mat g) {
  gdst d;
  ag_status s = grad_dst(x, &d);
  if (s) return s;
  ag__pick_bwd_args p = {axis, g, idx, dt, stride, d.m, d.acc};
  if (!(s = ag__run(x->ctx, AG__K_PICK_BWD, &p, sizeof p))) grad_written(x);
  return s;
}

/* The gradients of a convolution: one kernel call for each input that
 * needs one, each adding into that input's gradient (kernels.h's modes). */
static ag_status conv_backward(ag__node *n, ag__mat g) {
  ag_tensor *x = n->in[0], *w = n->in[1];
  ag__mat mx, mw;
  ag_status s = ag__operand(x, "ag_backward", "x", &mx);
  if (s || (s = ag__operand(w, "ag_backward", "w", &mw))) return s;
  ag__conv2d_args a;
  memset(&a, 0, sizeof a);
  ag__conv_unpack(n->i, x->rows, w->cols, &a);
  const ag__conv_mode modes[3] = {AG__CONV_BWD_X, AG__CONV_BWD_W, AG__CONV_BWD_B};
  for (int k = 0; k < 3; k++) {
    ag_tensor *t = n->in[k];
    if (!t || !ag__needs_grad(t)) continue;
    gdst d;
    if ((s = grad_dst(t, &d))) return s;
    a.mode = modes[k], a.accumulate = d.acc, a.y = g;
    a.x = k == 0 ? d.m : mx, a.w = k == 1 ? d.m : mw, a.b = k == 2 ? d.m.p : NULL;
    const size_t scratch = ag__kernel_scratch(t->ctx, AG__K_CONV2D, &a, sizeof a);
    void *ws = NULL;
    if (scratch && (s = ag__ws_alloc(t->ctx, scratch, &ws))) return s;
    a.ws = ws;
    if ((s = ag__run(t->ctx, AG__K_CONV2D, &a, sizeof a))) return s;
    grad_written(t);
  }
  return AG_OK;
}

static ag_status node_backward(ag__node *n) {
  ag__mat g;
  ag_status s = ag__operand(n->out->grad, "ag_backward", "a gradient", &g);
  if (s) return s;
  ag_tensor *x = n->in[0];
  switch (n->op) {
    case AG__OP_MAP: return map_backward(n, g);
    case AG__OP_ADD:
    case AG__OP_SUB:
    case AG__OP_MUL:
    case AG__OP_DIV:
    case AG__OP_MINIMUM:
    case AG__OP_MAXIMUM: return binary_backward(n, g);
    case AG__OP_MATMUL: return matmul_backward(n, g);
    case AG__OP_CONV2D: return conv_backward(n, g);
    case AG__OP_SUM: return grad_map(x, AG__MAP_AFFINE, n->f[0], 0.0f, g);
    case AG__OP_MAX: return pick_backward(x, n->i[0] == AG_AXIS_ROWS ? 0 : 1, n->aux, AG_I32, 1, g);
    case AG__OP_PICK: {
      const void *ip;
      int64_t stride;
      if ((s = ag__index_operand(n->in[1], x->cols, "ag_backward", &ip, &stride))) return s;
      return pick_backward(x, 0, ip, n->in[1]->dtype, stride, g);
    }
    case AG__OP_VIEW: {
      ag__mat full;
      if ((s = grad_full(x, &full))) return s;
      ag__mat region = {full.p + n->i[1] * full.ld + n->i[0], g.rows, g.cols, full.ld};
      ag__copy_args c = {g, region, 1};
      return ag__run(x->ctx, AG__K_COPY, &c, sizeof c);
    }
    case AG__OP_BIAS_ACT: { /* dz = act'(y) * g, then as for x + b */
      static const ag__map2_op bwd[4] = {AG__MAP2_ADD, AG__MAP2_RELU_BWD, AG__MAP2_TANH_BWD,
                                         AG__MAP2_SIGMOID_BWD};
      ag_tensor *dz;
      if ((s = ag__tensor_temp(x->ctx, n->out->rows, n->out->cols, AG_F32, &dz))) return s;
      ag__map2_args m = {bwd[n->i[0]], 1.0f, 0.0f, g, ag__mat_of_temp(n->out), ag__mat_of_temp(dz), 0, 0.0f};
      if ((s = ag__run(x->ctx, AG__K_MAP2, &m, sizeof m))) return s;
      ag__mat mdz = ag__mat_of_temp(dz);
      if (ag__needs_grad(x) && (s = grad_add(x, mdz, 1.0f))) return s;
      if (ag__needs_grad(n->in[1]) && (s = grad_add(n->in[1], mdz, 1.0f))) return s;
      return AG_OK;
    }
    case AG__OP_LOSS: { /* d loss / d pred was written by the forward kernel */
      ag_tensor *dp = n->aux;
      ag__mat md = ag__mat_of_temp(dp);
      int64_t R = dp->rows, C = dp->cols;
      if (ag__needs_grad(x)) {
        if (n->out->grad == x->ctx->graph->one)
          s = grad_add(x, md, 1.0f); /* the seed: no product needed */
        else
          s = grad_map2(x, AG__MAP2_MUL, 1.0f, 0.0f, md, g, R, C);
        if (s) return s;
      }
      if (ag__needs_grad(n->in[1]) && (s = grad_map2(n->in[1], AG__MAP2_MUL, -1.0f, 0.0f, md, g, R, C)))
        return s;
      return AG_OK;
    }
    case AG__OP_CONCAT: {
      ag_tensor *a = n->in[0], *b = n->in[1];
      int by_rows = (int)n->i[0];
      ag__mat ga = {g.p, a->rows, a->cols, g.ld};
      ag__mat gb = {by_rows ? g.p + a->rows : g.p + a->cols * g.ld, b->rows, b->cols, g.ld};
      if (ag__needs_grad(a) && (s = grad_add(a, ga, 1.0f))) return s;
      if (ag__needs_grad(b) && (s = grad_add(b, gb, 1.0f))) return s;
      return AG_OK;
    }
    default: return ag__fail(AG_ERR_STATE, "ag_backward: tape node with unknown op %d", n->op);
  }
}

ag_status ag_backward(ag_tensor *loss) {
  static const char fn[] = "ag_backward";
  ag_status s = ag__check_tensor(loss, fn, "loss");
  if (s) return s;
  if (loss->rows != 1 || loss->cols != 1 || loss->dtype != AG_F32)
    return ag__fail(AG_ERR_SHAPE, "%s: the loss must be a [1, 1] f32 tensor, not [%lld, %lld] %s", fn,
                    (long long)loss->rows, (long long)loss->cols, ag_dtype_name(loss->dtype));
  if (!ag__needs_grad(loss) || loss->node < 0)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: the loss does not depend on any parameter that requires a gradient", fn);
  ag_ctx *ctx = loss->ctx;
  ag__workspace *ws = ctx->ws;
  if (loss->node >= ws->n_tape || ws->tape[loss->node].out != loss)
    return ag__fail(AG_ERR_STATE, "%s: the loss was computed before the last ag_ctx_reset", fn);
  /* gradients of temporaries start afresh at every backward */
  for (int k = 0; k <= loss->node; k++) {
    ag_tensor *o = ws->tape[k].out;
    o->grad = NULL;
    o->flags &= ~AG__T_GRAD_INIT;
  }
  ag_tensor *one = NULL; /* made at the first backward, after the checks: bad input changes nothing */
  if ((s = ag__graph_one(ctx, &one))) return s;
  loss->grad = one; /* never written: gradients flow from it, not into it */
  loss->flags |= AG__T_GRAD_INIT;
  for (int k = loss->node; k >= 0 && !s; k--) {
    ag__node *n = &ws->tape[k];
    if (!n->out->grad) continue; /* the loss does not depend on it */
    s = node_backward(n);
  }
  if (s) /* some gradients hold part of this pass: drop them all, as ag_zero_grad would */
    for (int k = 0; k <= loss->node; k++)
      for (int j = 0; j < 3; j++) {
        ag_tensor *x = ws->tape[k].in[j];
        if (x && (x->flags & AG__T_PERSISTENT) && x->grad && ag__needs_grad(x)) x->flags |= AG__T_GRAD_STALE;
      }
  return s;
}

void ag__graph_drop(ag_ctx *ctx) {
  if (!ctx->graph) return;
  ag_tensor_free(ctx->graph->one);
  free(ctx->graph);
  ctx->graph = NULL;
}

ag_status ag__graph_one(ag_ctx *ctx, ag_tensor **one) {
  if (ctx->graph) {
    *one = ctx->graph->one;
    return AG_OK;
  }
  struct ag__graph_ctx *g = ag__calloc(1, sizeof *g);
  if (!g) return ag__fail(AG_ERR_OUT_OF_MEMORY, "ag_backward: out of host memory");
  const float v = 1.0f;
  ag_status s = ag_tensor_create(ctx, 1, 1, AG_F32, &v, &g->one);
  if (s) {
    free(g);
    return s;
  }
  ctx->graph = g;
  ag__graph_hook(ctx);
  *one = g->one;
  return AG_OK;
}
