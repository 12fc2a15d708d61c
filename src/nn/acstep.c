/* acstep.c — the fused SAC/TD3 update (nn_internal.h): the one op in front
 * of AG__K_ACGRAD. It gathers the kernel's arguments from the table's
 * buffer, the networks and the optimizers, asks the backend whether it
 * takes them, and queues the call. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "nn/nn_internal.h"

/* The device addresses of net's layers (L of them, sizes checked by the
 * caller); with grads, of their gradients too. */
static ag_status net_of(const ag_mlp *m, int L, int grads, const char *fn, ag__ac_net *n) {
  ag_tensor *const *p = ag_mlp_params(m);
  for (int i = 0; i < 2 * L; i++) {
    ag_tensor *t = p[i];
    if (t->ld != t->rows) return ag__fail(AG_ERR_UNSUPPORTED, "%s: a parameter is not stored densely", fn);
    if (grads && !t->grad) return ag__fail(AG_ERR_STATE, "%s: a parameter has no gradient", fn);
    void *x, *g = NULL;
    ag_status s = ag__tensor_ptr(t, &x);
    if (!s && grads) s = ag__tensor_ptr(t->grad, &g);
    if (s) return s;
    if (i % 2)
      n->b[i / 2] = x, n->gb[i / 2] = g;
    else
      n->w[i / 2] = x, n->gw[i / 2] = g;
  }
  return AG_OK;
}

/* Whether m is in -> hidden[0..L-2] -> out with ReLU hidden layers and a
 * linear output. */
static int shaped(const ag_mlp *m, int L, int64_t in, const int64_t *hidden, int64_t out) {
  if (!m || ag_mlp_n_conv(m) || ag_mlp_n_params(m) != 2 * L || ag_mlp_in(m) != in || ag_mlp_out(m) != out)
    return 0;
  ag_act h, last;
  ag__mlp_acts(m, &h, &last);
  if (h != AG_ACT_RELU || last != AG_ACT_NONE) return 0;
  ag_tensor *const *p = ag_mlp_params(m);
  for (int i = 0; i < L; i++) {
    const int64_t rows = i < L - 1 ? hidden[i] : out, cols = i ? hidden[i - 1] : in;
    if (p[2 * i]->rows != rows || p[2 * i]->cols != cols || p[2 * i + 1]->rows != rows ||
        p[2 * i + 1]->cols != 1)
      return 0;
  }
  return 1;
}

/* An optimizer's step over the tensors ps (n of them, in order). */
static ag_status opt_of(struct ag_optim *o, const float *const *ps, int n, const char *fn, ag__ac_opt *out) {
  ag__adam_args step;
  ag_status s = ag__optim_step_args(o, &step);
  if (s) return s;
  if (step.count != n || !step.prep || step.max_norm > 0.0f || n > 4 * AG__AC_MAX_LAYERS)
    return ag__fail(AG_ERR_STATE, "%s: an optimizer's step is not one launch over the networks' layers", fn);
  for (int i = 0; i < n; i++)
    if (step.t[i].p != ps[i])
      return ag__fail(AG_ERR_STATE, "%s: an optimizer is not over the networks' layers in order", fn);
  out->sgd = step.sgd, out->lr = step.lr, out->b1 = step.b1, out->b2 = step.b2, out->eps = step.eps,
  out->wd = step.wd, out->state = step.state;
  for (int i = 0; i < n; i++) out->m[i] = step.t[i].m, out->v[i] = step.t[i].v;
  return AG_OK;
}

/* The kernel's arguments but for its scratch and losses (shapes and
 * residency checked; fails without changing anything). */
static ag_status args_of(const ag__acstep *u, const char *fn, ag__acgrad_args *a) {
  memset(a, 0, sizeof *a);
  if (!u->pi || !u->q[0] || !u->q[1] || !u->qt[0] || !u->qt[1] || !u->opt_critic || !u->log_alpha ||
      (u->td3 && !u->pi_t) || (u->actor && !u->opt_actor) ||
      (u->actor && !u->td3 && u->autotune && !u->opt_alpha))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: a network or optimizer is missing", fn);
  const ag__fused_batch *src = &u->src;
  const int L = ag_mlp_n_params(u->q[0]) / 2;
  const int64_t S = ag_mlp_in(u->pi), A = u->A, nA = u->td3 ? A : 2 * A;
  if (L < 2 || L > AG__AC_MAX_LAYERS || A < 1 || A > 64)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: %d layers and %lld actions are outside the fused update", fn, L,
                    (long long)A);
  ag_tensor *const *qp = ag_mlp_params(u->q[0]);
  int64_t hidden[AG__AC_MAX_LAYERS - 1];
  for (int i = 0; i < L - 1; i++) hidden[i] = qp[2 * i]->rows;
  /* the kernels' grids: B / 32 and a layer's width / 32 tiles along a
   * dimension of at most 65,535 blocks, a gradient kernel's tiles an int */
  int wide = src->B > (int64_t)AG__AC_MAX_TILED;
  for (int i = 0; i < L - 1; i++) wide = wide || hidden[i] > (int64_t)AG__AC_MAX_WIDTH;
  if (wide)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: B = %lld or a hidden layer is past the fused update's sizes", fn,
                    (long long)src->B);
  int ok = shaped(u->pi, L, S, hidden, nA) && (!u->td3 || shaped(u->pi_t, L, S, hidden, nA));
  for (int k = 0; k < 2; k++)
    ok = ok && shaped(u->q[k], L, S + A, hidden, 1) && shaped(u->qt[k], L, S + A, hidden, 1);
  if (!ok) return ag__fail(AG_ERR_UNSUPPORTED, "%s: the networks' shapes are outside the fused update", fn);
  ag_status s = ag__fused_batch_ptrs(src, fn, &a->src);
  if (s) return s;
  const ag__batch_src fp = a->src;
  if (src->act_row != src->obs_row + S || src->obs_row < 0 || src->next_row < 0 || src->rew_row < 0 ||
      src->done_row < 0 || src->obs_row + S + A > fp.rows || src->next_row + S > fp.rows ||
      src->rew_row >= fp.rows || src->done_row >= fp.rows)
    return ag__fail(AG_ERR_SHAPE, "%s: the fields' rows do not fit the fused update", fn);
  a->td3 = u->td3, a->actor = u->actor, a->targets = u->targets, a->autotune = u->autotune;
  a->L = L, a->S = S, a->A = A;
  for (int i = 0; i < L - 1; i++) a->hidden[i] = hidden[i];
  if ((s = net_of(u->pi, L, 1, fn, &a->pi)) || (u->td3 && (s = net_of(u->pi_t, L, 0, fn, &a->pi_t))))
    return s;
  for (int k = 0; k < 2; k++)
    if ((s = net_of(u->q[k], L, 1, fn, &a->q[k])) || (s = net_of(u->qt[k], L, 0, fn, &a->qt[k]))) return s;
  const float *ps[4 * AG__AC_MAX_LAYERS];
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < L; i++)
      ps[k * 2 * L + 2 * i] = a->q[k].w[i], ps[k * 2 * L + 2 * i + 1] = a->q[k].b[i];
  if ((s = opt_of(u->opt_critic, ps, 4 * L, fn, &a->opt_critic))) return s;
  if (u->actor) {
    for (int i = 0; i < L; i++) ps[2 * i] = a->pi.w[i], ps[2 * i + 1] = a->pi.b[i];
    if ((s = opt_of(u->opt_actor, ps, 2 * L, fn, &a->opt_actor))) return s;
  }
  void *la;
  if ((s = ag__tensor_ptr(u->log_alpha, &la))) return s;
  a->log_alpha = la;
  if (u->actor && !u->td3 && u->autotune) {
    void *g;
    if (!u->log_alpha->grad) return ag__fail(AG_ERR_STATE, "%s: log alpha has no gradient", fn);
    if ((s = ag__tensor_ptr(u->log_alpha->grad, &g))) return s;
    a->log_alpha_grad = g;
    ps[0] = la;
    if ((s = opt_of(u->opt_alpha, ps, 1, fn, &a->opt_alpha))) return s;
  }
  a->gamma = u->gamma, a->tau = u->tau, a->target_entropy = u->target_entropy,
  a->target_noise = u->target_noise, a->noise_clip = u->noise_clip;
  return AG_OK;
}

int ag__acstep_fusable(const ag__acstep *u) {
  ag__acgrad_args a;
  char keep[1024]; /* the question leaves the last error as it was */
  snprintf(keep, sizeof keep, "%s", ag_last_error());
  int ok = args_of(u, "ag__acstep_fusable", &a) == AG_OK &&
           ag__kernel_supported(u->src.table->ctx, AG__K_ACGRAD, &a, sizeof a);
  ag__fail(AG_OK, "%s", keep);
  return ok;
}

/* Marks the parameters of m as written (not added to) by the call. */
static void written(const ag_mlp *m) {
  ag_tensor *const *p = ag_mlp_params(m);
  for (int i = 0; i < ag_mlp_n_params(m); i++) p[i]->flags &= ~AG__T_GRAD_STALE;
}

ag_status ag__acstep_run(const ag__acstep *u, ag_tensor **closs, ag_tensor **aloss) {
  static const char fn[] = "ag__acstep_run";
  ag__acgrad_args a;
  ag_status s = args_of(u, fn, &a);
  if (s) return s;
  ag_ctx *ctx = u->src.table->ctx;
  if (!ag__kernel_supported(ctx, AG__K_ACGRAD, &a, sizeof a))
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the %s backend does not take the fused update", fn,
                    ctx->be->name);
  ag_tensor *ws, *lc, *la = NULL;
  const size_t scratch = ag__kernel_scratch(ctx, AG__K_ACGRAD, &a, sizeof a);
  if ((s = ag__tensor_temp(ctx, (int64_t)((scratch + 3) / 4), 1, AG_F32, &ws)) ||
      (s = ag__tensor_temp(ctx, 1, 1, AG_F32, &lc)) ||
      (u->actor && (s = ag__tensor_temp(ctx, 1, 1, AG_F32, &la))))
    return s;
  a.ws = ws->data;
  a.closs = lc->data;
  a.aloss = la ? la->data : NULL;
  if ((s = ag__run(ctx, AG__K_ACGRAD, &a, sizeof a))) return s;
  written(u->q[0]);
  written(u->q[1]);
  if (u->actor) written(u->pi);
  if (a.log_alpha_grad) u->log_alpha->flags &= ~AG__T_GRAD_STALE;
  *closs = lc;
  if (aloss) *aloss = la;
  return AG_OK;
}
