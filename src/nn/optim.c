/* optim.c — Adam and SGD over a list of parameters.
 *
 * The step count, bias corrections and clip coefficient live in a small
 * device tensor, so a step is the same kernels every time and can be
 * recorded: SUMSQ (only with clipping) -> ADAM_PREP -> ADAM, each one
 * launch for up to AG__MT_MAX parameters (then ADAM does ADAM_PREP's work
 * itself: one launch less).
 */
#include <stdlib.h>
#include <string.h>

#include "agrl/nn.h"
#include "nn/nn_internal.h"

struct ag_optim {
  ag_ctx *ctx;
  int sgd;
  ag_adam_config cfg;
  int n;
  ag_tensor **params;
  ag_tensor **m, **v; /* moments (Adam) */
  ag_tensor *state;   /* AG__OPT_STATE_N floats */
  ag_tensor *scratch; /* what a backend asks for a one-launch step, or NULL */
};

ag_adam_config ag_adam_defaults(void) {
  ag_adam_config c = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.0f};
  return c;
}

void ag_optim_free(ag_optim *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) {
    if (o->m) ag_tensor_free(o->m[i]);
    if (o->v) ag_tensor_free(o->v[i]);
  }
  ag_tensor_free(o->state);
  ag_tensor_free(o->scratch);
  free(o->params);
  free(o->m);
  free(o->v);
  free(o);
}

static ag_status check_config(const ag_adam_config *c, int sgd, const char *fn) {
  if (!(c->lr > 0.0f) || !(c->lr < 1e6f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: lr = %g must be positive", fn, (double)c->lr);
  if (!(c->max_grad_norm >= 0.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: max_grad_norm = %g must be >= 0", fn, (double)c->max_grad_norm);
  if (!(c->weight_decay >= 0.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: weight_decay = %g must be >= 0", fn, (double)c->weight_decay);
  if (sgd) return AG_OK;
  if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: beta1 = %g and beta2 = %g must be in [0, 1)", fn,
                    (double)c->beta1, (double)c->beta2);
  if (!(c->eps > 0.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: eps = %g must be positive", fn, (double)c->eps);
  return AG_OK;
}

static ag_status fill_args(ag_optim *o, int k0, ag__adam_args *a);

static ag_status optim_create(ag_ctx *ctx, ag_tensor *const *params, int n, const ag_adam_config *cfg,
                              int sgd, const char *fn, ag_optim **out) {
  if (!ctx || !out || !cfg)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, config and out must not be NULL", fn);
  if (n < 1 || !params)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: give at least one parameter (n = %d)", fn, n);
  ag_status s = check_config(cfg, sgd, fn);
  if (s) return s;
  for (int i = 0; i < n; i++) {
    if ((s = ag__check_tensor(params[i], fn, "a parameter"))) return s;
    if (params[i]->ctx != ctx)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: params[%d] belongs to another context", fn, i);
    if (!params[i]->grad || !(params[i]->flags & AG__T_PERSISTENT))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: params[%d] does not require a gradient", fn, i);
  }
  ag_optim *o = ag__calloc(1, sizeof *o);
  if (!o) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  o->ctx = ctx;
  o->sgd = sgd;
  o->cfg = *cfg;
  o->n = n;
  o->params = ag__malloc((size_t)n * sizeof *o->params);
  if (!sgd) {
    o->m = ag__calloc((size_t)n, sizeof *o->m);
    o->v = ag__calloc((size_t)n, sizeof *o->v);
  }
  if (!o->params || (!sgd && (!o->m || !o->v))) {
    ag_optim_free(o);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  memcpy(o->params, params, (size_t)n * sizeof *params);
  s = ag_tensor_create(ctx, AG__OPT_STATE_N, 1, AG_F32, NULL, &o->state);
  for (int i = 0; i < n && !s && !sgd; i++) {
    s = ag_tensor_create(ctx, params[i]->rows, params[i]->cols, AG_F32, NULL, &o->m[i]);
    if (!s) s = ag_tensor_create(ctx, params[i]->rows, params[i]->cols, AG_F32, NULL, &o->v[i]);
  }
  if (!s && n <= AG__MT_MAX) { /* one launch with its preparation: the scratch any backend asks for it */
    ag__adam_args a;
    if (!(s = fill_args(o, 0, &a))) {
      a.prep = 1;
      size_t bytes = ag__kernel_scratch_max(AG__K_ADAM, &a, sizeof a);
      if (bytes) s = ag_tensor_create(ctx, (int64_t)((bytes + 3) / 4), 1, AG_F32, NULL, &o->scratch);
    }
  }
  if (s) {
    ag_optim_free(o);
    return s;
  }
  *out = o;
  return AG_OK;
}

ag_status ag_adam_create(ag_ctx *ctx, ag_tensor *const *params, int n, const ag_adam_config *cfg,
                         ag_optim **out) {
  return optim_create(ctx, params, n, cfg, 0, "ag_adam_create", out);
}

ag_status ag_sgd_create(ag_ctx *ctx, ag_tensor *const *params, int n, float lr, float max_grad_norm,
                        ag_optim **out) {
  ag_adam_config c = ag_adam_defaults();
  c.lr = lr;
  c.max_grad_norm = max_grad_norm;
  return optim_create(ctx, params, n, &c, 1, "ag_sgd_create", out);
}

/* The arguments for parameters k0 .. k0+AG__MT_MAX-1. */
static ag_status fill_args(ag_optim *o, int k0, ag__adam_args *a) {
  memset(a, 0, sizeof *a);
  a->sgd = o->sgd;
  a->lr = o->cfg.lr;
  a->b1 = o->cfg.beta1;
  a->b2 = o->cfg.beta2;
  a->eps = o->cfg.eps;
  a->wd = o->cfg.weight_decay;
  a->max_norm = o->cfg.max_grad_norm;
  void *st;
  ag_status s = ag__tensor_ptr(o->state, &st);
  if (s) return s;
  a->state = st;
  if (o->scratch) {
    void *sc;
    if ((s = ag__tensor_ptr(o->scratch, &sc))) return s;
    a->scratch = sc;
  }
  for (int k = k0; k < o->n && k < k0 + AG__MT_MAX; k++) {
    void *p, *g, *m = NULL, *v = NULL;
    if ((s = ag__tensor_ptr(o->params[k], &p)) || (s = ag__tensor_ptr(o->params[k]->grad, &g))) return s;
    if (!o->sgd && ((s = ag__tensor_ptr(o->m[k], &m)) || (s = ag__tensor_ptr(o->v[k], &v)))) return s;
    ag__mt_entry e = {p, g, m, v, o->params[k]->rows * o->params[k]->cols};
    a->t[a->count++] = e;
  }
  return AG_OK;
}

/* Adam only: the DQN, the one caller, makes Adam; SGD keeps its own launch. */
int ag__optim_fusable(const ag_optim *o) {
  return o && !o->sgd && o->n <= AG__MT_MAX && !(o->cfg.max_grad_norm > 0.0f);
}

ag_status ag__optim_step_args(ag_optim *o, ag__adam_args *a) {
  if (!ag__optim_fusable(o)) return ag__fail(AG_ERR_STATE, "ag_optim: this step is not one launch");
  ag_status s = fill_args(o, 0, a);
  a->prep = 1;
  return s;
}

int ag__optim_state(const ag_optim *o, ag_tensor **out, int max) {
  int n = 0;
  if (n < max) out[n] = o->state;
  n++;
  for (int i = 0; !o->sgd && i < o->n; i++) {
    if (n < max) out[n] = o->m[i];
    n++;
    if (n < max) out[n] = o->v[i];
    n++;
  }
  return n;
}

ag_status ag_optim_step(ag_optim *o) {
  if (!o) return ag__fail(AG_ERR_INVALID_ARG, "ag_optim_step: optim is NULL");
  for (int i = 0; i < o->n; i++) {
    ag_status s = ag__check_tensor(o->params[i], "ag_optim_step", "a parameter");
    if (s) return s;
  }
  /* everything resident first (after a device switch each is uploaded
   * here): past this point only the device can fail, so a failing step
   * changes nothing */
  for (int i = 0; i < o->n; i++) {
    void *p;
    ag_status s = ag__tensor_ptr(o->params[i], &p);
    if (!s) s = ag__tensor_ptr(o->params[i]->grad, &p);
    if (!s && !o->sgd) s = ag__tensor_ptr(o->m[i], &p);
    if (!s && !o->sgd) s = ag__tensor_ptr(o->v[i], &p);
    if (s) return s;
  }
  {
    void *p;
    ag_status s = ag__tensor_ptr(o->state, &p);
    if (s) return s;
  }
  for (int i = 0; i < o->n; i++) { /* a parameter the loss did not reach has a zero gradient */
    ag_status s = ag__grad_materialize(o->params[i]);
    if (s) return s;
  }
  ag__adam_args a;
  ag_status s;
  if (o->cfg.max_grad_norm > 0.0f)
    for (int k0 = 0; k0 < o->n; k0 += AG__MT_MAX)
      if ((s = fill_args(o, k0, &a)) || (s = ag__run(o->ctx, AG__K_SUMSQ, &a, sizeof a))) return s;
  if (o->n <= AG__MT_MAX) { /* one launch: the preparation in it */
    if ((s = fill_args(o, 0, &a))) return s;
    a.prep = 1;
    return ag__run(o->ctx, AG__K_ADAM, &a, sizeof a);
  }
  if ((s = fill_args(o, 0, &a)) || (s = ag__run(o->ctx, AG__K_ADAM_PREP, &a, sizeof a))) return s;
  for (int k0 = 0; k0 < o->n; k0 += AG__MT_MAX)
    if ((s = fill_args(o, k0, &a)) || (s = ag__run(o->ctx, AG__K_ADAM, &a, sizeof a))) return s;
  return AG_OK;
}

ag_status ag_optim_zero_grad(ag_optim *o) {
  if (!o) return ag__fail(AG_ERR_INVALID_ARG, "ag_optim_zero_grad: optim is NULL");
  return ag_zero_grad(o->params, o->n);
}

ag_status ag_optim_steps(ag_optim *o, int64_t *steps) {
  if (!o || !steps) return ag__fail(AG_ERR_INVALID_ARG, "ag_optim_steps: optim and steps must not be NULL");
  float st[AG__OPT_STATE_N];
  ag_status s = ag_tensor_read(o->state, st, sizeof st);
  if (s) return s;
  *steps = (int64_t)st[AG__OPT_T];
  return AG_OK;
}
