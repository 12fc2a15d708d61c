/* qlearn.c — the fused Q-learning update (nn_internal.h): the one op in
 * front of AG__K_QGRAD. It gathers the kernel's arguments from the table's
 * buffer, the networks and the optimizer, asks the backend whether it takes
 * them, and queues the call. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "nn/nn_internal.h"

/* The device address of t, a [1, B] or [B, 1] tensor of dtype on ctx whose
 * B values lie one after another (what the kernel reads as an array). */
ag_status ag__vec_ptr(ag_ctx *ctx, ag_tensor *t, int64_t B, ag_dtype dtype, const char *fn, const char *what,
                      const void **out) {
  ag_status s = ag__check_tensor(t, fn, what);
  if (s) return s;
  if (t->ctx != ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: %s belongs to another context than the table", fn, what);
  if (t->dtype != dtype)
    return ag__fail(AG_ERR_SHAPE, "%s: %s has dtype %s; the fused update takes %s", fn, what,
                    ag_dtype_name(t->dtype), ag_dtype_name(dtype));
  if (!((t->rows == 1 && t->cols == B) || (t->rows == B && t->cols == 1)))
    return ag__fail(AG_ERR_SHAPE, "%s: %s is [%lld, %lld]; give [1, %lld] or [%lld, 1]", fn, what,
                    (long long)t->rows, (long long)t->cols, (long long)B, (long long)B);
  if (t->rows == 1 && B > 1 && t->ld != 1)
    return ag__fail(AG_ERR_SHAPE, "%s: %s is a strided view; give its values one after another", fn, what);
  void *p;
  if ((s = ag__tensor_ptr(t, &p))) return s;
  *out = p;
  return AG_OK;
}

ag_status ag__fused_batch_ptrs(const ag__fused_batch *b, const char *fn, ag__batch_src *p) {
  memset(p, 0, sizeof *p);
  if (!b->table || !b->size || !b->rng)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: the table, its size and the stream must be given", fn);
  ag_buffer *buf = b->table;
  ag_ctx *ctx = buf->ctx;
  if (buf->freed) return ag__fail(AG_ERR_FREED, "%s: the table's buffer has been freed", fn);
  if (buf->dtype != AG_F32)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the fused update reads f32 tables, not %s", fn,
                    ag_dtype_name(buf->dtype));
  if (b->B < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: B = %lld must be positive", fn, (long long)b->B);
  const int nstep = b->ret || b->disc || b->last;
  if (nstep && !(b->ret && b->disc && b->last && b->idx))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n-step targets need ret, disc and last together, and idx", fn);
  ag_status s = ag__store_ensure(ctx, &buf->store);
  void *sz, *cnt;
  const void *ip = NULL, *rp = NULL, *dp = NULL, *lp = NULL;
  if (s || (s = ag__tensor_ptr(b->size, &sz)) || (s = ag__rng_counter(b->rng, &cnt)) ||
      (b->idx && (s = ag__vec_ptr(ctx, b->idx, b->B, AG_I32, fn, "idx", &ip))) ||
      (nstep && ((s = ag__vec_ptr(ctx, b->ret, b->B, AG_F32, fn, "ret", &rp)) ||
                 (s = ag__vec_ptr(ctx, b->disc, b->B, AG_F32, fn, "disc", &dp)) ||
                 (s = ag__vec_ptr(ctx, b->last, b->B, AG_I64, fn, "last", &lp)))))
    return s;
  p->table = buf->store.ptr;
  p->rows = buf->rows;
  p->capacity = buf->capacity;
  p->scale = buf->scale;
  p->idx = ip, p->seed = ag__rng_seed(b->rng), p->counter = cnt, p->size_dev = sz;
  p->ret = rp, p->disc = dp, p->last = lp;
  p->B = b->B, p->obs_row = b->obs_row, p->act_row = b->act_row, p->rew_row = b->rew_row,
  p->next_row = b->next_row, p->done_row = b->done_row;
  return AG_OK;
}

/* The kernel's arguments but for its scratch and loss (shapes and
 * residency checked; fails without changing anything). */
static ag_status args_of(const ag__qlearn *u, const char *fn, ag__qgrad_args *a) {
  memset(a, 0, sizeof *a);
  if (!u->q || !u->target) return ag__fail(AG_ERR_INVALID_ARG, "%s: q and target must be given", fn);
  ag_act hidden, last, th, tl;
  ag__mlp_acts(u->q, &hidden, &last);
  ag__mlp_acts(u->target, &th, &tl);
  if (ag_mlp_n_conv(u->q) || ag_mlp_n_conv(u->target))
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the fused update takes networks without convolutions", fn);
  const int L = ag_mlp_n_params(u->q) / 2;
  if ((L > 1 && (hidden != AG_ACT_RELU || th != AG_ACT_RELU)) || last != AG_ACT_NONE || tl != AG_ACT_NONE)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the fused update takes ReLU hidden layers and a linear output",
                    fn);
  if (L < 1 || L > AG__QG_MAX_LAYERS || ag_mlp_out(u->q) > AG__QG_MAX_ACTIONS)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: %d layers and %lld actions are outside the fused update (%d, %d)", fn, L,
                    (long long)ag_mlp_out(u->q), AG__QG_MAX_LAYERS, AG__QG_MAX_ACTIONS);
  if (ag_mlp_n_params(u->target) != 2 * L || ag_mlp_in(u->q) != ag_mlp_in(u->target) ||
      ag_mlp_out(u->q) != ag_mlp_out(u->target))
    return ag__fail(AG_ERR_SHAPE, "%s: q and target differ in shape", fn);
  ag_status s = ag__fused_batch_ptrs(&u->src, fn, &a->src);
  if (s) return s;
  a->L = L;
  ag_tensor *const *qp = ag_mlp_params(u->q), *const *tp = ag_mlp_params(u->target);
  for (int i = 0; i < L; i++) {
    ag_tensor *w = qp[2 * i], *b = qp[2 * i + 1];
    if (tp[2 * i]->rows != w->rows || tp[2 * i]->cols != w->cols)
      return ag__fail(AG_ERR_SHAPE, "%s: layer %d of q and target differ", fn, i);
    a->sizes[i] = w->cols;
    a->sizes[i + 1] = w->rows;
    void *x[6];
    if (!w->grad || !b->grad) return ag__fail(AG_ERR_STATE, "%s: q's parameters have no gradients", fn);
    if ((s = ag__tensor_ptr(w, &x[0])) || (s = ag__tensor_ptr(b, &x[1])) ||
        (s = ag__tensor_ptr(tp[2 * i], &x[2])) || (s = ag__tensor_ptr(tp[2 * i + 1], &x[3])) ||
        (s = ag__tensor_ptr(w->grad, &x[4])) || (s = ag__tensor_ptr(b->grad, &x[5])))
      return s;
    a->w[i] = x[0], a->b[i] = x[1], a->tw[i] = x[2], a->tb[i] = x[3], a->gw[i] = x[4], a->gb[i] = x[5];
  }
  if (a->src.rows < a->sizes[0] || u->src.obs_row < 0 || u->src.next_row < 0 ||
      u->src.obs_row > a->src.rows - a->sizes[0] || u->src.next_row > a->src.rows - a->sizes[0] ||
      u->src.act_row < 0 || u->src.act_row >= a->src.rows || u->src.rew_row < 0 ||
      u->src.rew_row >= a->src.rows || u->src.done_row < 0 || u->src.done_row >= a->src.rows)
    return ag__fail(AG_ERR_SHAPE, "%s: a field's rows lie outside the table's %lld rows", fn,
                    (long long)a->src.rows);
  a->gamma = u->gamma;
  a->double_dqn = u->double_dqn;
  a->kind = u->huber ? 1 : 0;
  a->delta = u->delta;
  return AG_OK;
}

int ag__qlearn_fusable(const ag__qlearn *u) {
  ag__qgrad_args a;
  char keep[1024]; /* the question leaves the last error as it was */
  snprintf(keep, sizeof keep, "%s", ag_last_error());
  int ok = args_of(u, "ag__qlearn_fusable", &a) == AG_OK && (!u->opt || ag__optim_fusable(u->opt)) &&
           ag__kernel_supported(u->src.table->ctx, AG__K_QGRAD, &a, sizeof a);
  ag__fail(AG_OK, "%s", keep);
  return ok;
}

ag_status ag__qlearn_step(const ag__qlearn *u, ag_tensor **loss) {
  static const char fn[] = "ag__qlearn_step";
  ag__qgrad_args a;
  ag_status s = args_of(u, fn, &a);
  if (s) return s;
  ag_ctx *ctx = u->src.table->ctx;
  if (!ag__kernel_supported(ctx, AG__K_QGRAD, &a, sizeof a))
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the %s backend does not take the fused update", fn,
                    ctx->be->name);
  ag__adam_args step;
  if (u->opt) {
    if ((s = ag__optim_step_args(u->opt, &step))) return s;
    for (int i = 0; i < 2 * a.L; i++)
      if (step.count != 2 * a.L || step.t[i].p != (i % 2 ? a.b[i / 2] : a.w[i / 2]))
        return ag__fail(AG_ERR_STATE, "%s: the optimizer is not over q's layers in order", fn);
    if (!step.prep || step.max_norm > 0.0f)
      return ag__fail(AG_ERR_STATE, "%s: the optimizer's step is not one launch without clipping", fn);
    a.opt.on = 1, a.opt.sgd = step.sgd, a.opt.lr = step.lr, a.opt.b1 = step.b1, a.opt.b2 = step.b2,
    a.opt.eps = step.eps, a.opt.wd = step.wd;
    a.opt.state = step.state;
    for (int t = 0; t < 2 * a.L; t++) a.opt.m[t] = step.t[t].m, a.opt.v[t] = step.t[t].v;
  }
  ag_tensor *ws, *l;
  const size_t scratch = ag__kernel_scratch(ctx, AG__K_QGRAD, &a, sizeof a);
  if ((s = ag__tensor_temp(ctx, (int64_t)((scratch + 3) / 4), 1, AG_F32, &ws)) ||
      (s = ag__tensor_temp(ctx, 1, 1, AG_F32, &l)))
    return s;
  a.ws = ws->data;
  a.loss = l->data;
  if ((s = ag__run(ctx, AG__K_QGRAD, &a, sizeof a))) return s;
  ag_tensor *const *qp = ag_mlp_params(u->q);
  for (int i = 0; i < 2 * a.L; i++) qp[i]->flags &= ~AG__T_GRAD_STALE; /* written, not added to */
  *loss = l;
  return AG_OK;
}
