/* ac.c — SAC and TD3 on agrl's replay table and recorded steps.
 *
 * Two recordings: a critic update, and a critic update followed by the
 * actor's (with SAC's temperature and, for TD3, the delayed targets). Each
 * is made at its first use and replayed for every update; draws of indices
 * and of Gaussian noise come from the agent's device stream, so a replay
 * moves on with no transfer. Acting runs the actor eagerly on the
 * observations of all copies at once, its noise from a second stream.
 *
 * The policies, in the networks' action space [-1, 1]^A:
 *   SAC: (mu, s) = actor(x), log std = -5 + 3.5 (tanh(s) + 1), u = mu +
 *        std * eps, a = tanh(u), log pi(a|x) = sum over the A rows of
 *        -eps^2 / 2 - log std - log(2 pi) / 2 - log(1 - a^2 + 1e-6)
 *        (CleanRL's squashing of the log standard deviation, SB3's
 *        correction term); deterministic: tanh(mu).
 *   TD3: a = tanh(actor(x)); exploring, clip(a + expl_noise * eps, -1, 1);
 *        the target's a' = clip(tanh(actor'(x')) + clip(target_noise * eps,
 *        -noise_clip, noise_clip), -1, 1).
 * Targets: y = r + gamma (1 - terminated) (min(Q1'(x', a'), Q2'(x', a')) -
 * alpha log pi(a'|x')) (SAC; TD3 without the entropy term), or with n-step
 * returns R + gamma^k (...) at the walk's last next observation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/ac.h"
#include "agrl/capture.h"
#include "agent/agent_internal.h"
#include "nn/nn_internal.h"
#include "replay/replay_internal.h"

#define LOG_STD_MIN (-5.0f)
#define LOG_STD_MAX 2.0f
#define LOG_2PI 1.8378770664093453f

ag_ac_config ag_ac_defaults(ag_ac_algo algo) {
  ag_ac_config c;
  memset(&c, 0, sizeof c);
  c.algo = algo;
  c.n_hidden = 2;
  c.hidden[0] = c.hidden[1] = 256;
  c.actor_lr = 1e-3f;
  c.critic_lr = 1e-3f;
  c.gamma = 0.99f;
  c.tau = 0.005f;
  c.batch_size = 256;
  c.buffer_size = 1000000;
  c.learning_starts = 1000;
  c.train_freq = 1;
  c.gradient_steps = 1;
  c.policy_delay = algo == AG_AC_TD3 ? 2 : 1;
  c.alpha = 1.0f;
  c.autotune = 1;
  c.target_entropy = NAN;
  c.expl_noise = 0.1f;
  c.target_noise = 0.2f;
  c.noise_clip = 0.5f;
  c.n_step = 1;
  c.n_envs = 1;
  c.fused = 1;
  return c;
}

ag_status ag__ac_check_config(const ag_ac_config *c, const char *fn) {
  if (c->algo != AG_AC_SAC && c->algo != AG_AC_TD3)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: algo = %d is neither AG_AC_SAC nor AG_AC_TD3", fn, (int)c->algo);
  if (c->n_hidden < 1 || c->n_hidden > AG_AC_MAX_HIDDEN)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_hidden = %d must be in 1..%d", fn, c->n_hidden,
                    AG_AC_MAX_HIDDEN);
  for (int i = 0; i < c->n_hidden; i++)
    if (c->hidden[i] < 1 || c->hidden[i] > INT32_MAX)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: hidden[%d] = %lld must be in 1..2^31-1", fn, i,
                      (long long)c->hidden[i]);
  if (!(c->actor_lr > 0.0f && c->actor_lr <= 10.0f) || !(c->critic_lr > 0.0f && c->critic_lr <= 10.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: actor_lr = %g and critic_lr = %g must be in (0, 10]", fn,
                    (double)c->actor_lr, (double)c->critic_lr);
  if (!(c->gamma >= 0.0f && c->gamma <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: gamma = %g must be in [0, 1]", fn, (double)c->gamma);
  if (!(c->tau > 0.0f && c->tau <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: tau = %g must be in (0, 1]", fn, (double)c->tau);
  if (c->batch_size < 1 || c->buffer_size < c->batch_size)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: batch_size = %lld must be >= 1 and buffer_size = %lld >= it", fn,
                    (long long)c->batch_size, (long long)c->buffer_size);
  if (c->learning_starts < 0 || c->train_freq < 1 || c->gradient_steps < 0)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: learning_starts = %lld >= 0, train_freq = %lld >= 1 and gradient_steps = %lld >= 0 "
                    "are required",
                    fn, (long long)c->learning_starts, (long long)c->train_freq,
                    (long long)c->gradient_steps);
  if (c->policy_delay < 1 || c->policy_delay > 1000)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: policy_delay = %d must be in 1..1000", fn, c->policy_delay);
  if (!(c->alpha > 0.0f && c->alpha < 1e6f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: alpha = %g must be in (0, 1e6)", fn, (double)c->alpha);
  if (c->autotune != 0 && c->autotune != 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: autotune = %d must be 0 or 1", fn, c->autotune);
  if (isinf(c->target_entropy))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: target_entropy = %g must be finite (or NaN: -act_dim)", fn,
                    (double)c->target_entropy);
  const float nz[3] = {c->expl_noise, c->target_noise, c->noise_clip};
  for (int i = 0; i < 3; i++)
    if (!(nz[i] >= 0.0f && nz[i] <= 10.0f))
      return ag__fail(AG_ERR_INVALID_ARG,
                      "%s: expl_noise = %g, target_noise = %g and noise_clip = %g must be in [0, 10]", fn,
                      (double)c->expl_noise, (double)c->target_noise, (double)c->noise_clip);
  if (!(c->noise_rho >= 0.0f && c->noise_rho < 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: noise_rho = %g must be in [0, 1)", fn, (double)c->noise_rho);
  if (c->n_step < 1 || c->n_step > AG__MAX_N_STEP)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_step = %d must be in 1..%d", fn, c->n_step, AG__MAX_N_STEP);
  if (c->n_envs < 1 || c->n_envs > AG__MAX_N_ENVS)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_envs = %lld must be in 1..2^20", fn, (long long)c->n_envs);
  if (c->fused != 0 && c->fused != 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: fused = %d must be 0 or 1", fn, c->fused);
  return AG_OK;
}

void ag_ac_free(ag_ac *a) {
  if (!a) return;
  ag_capture_free(a->upd[0]);
  ag_capture_free(a->upd[1]);
  ag_optim_free(a->opt_actor);
  ag_optim_free(a->opt_critic);
  ag_optim_free(a->opt_alpha);
  ag_mlp_free(a->actor);
  ag_mlp_free(a->actor_t);
  for (int k = 0; k < 2; k++) {
    ag_mlp_free(a->q[k]);
    ag_mlp_free(a->qt[k]);
  }
  ag_tensor_free(a->log_alpha);
  ag_replay_free(a->replay);
  ag_rng_free(a->rng);
  ag_rng_free(a->act_rng);
  ag_tensor_free(a->obs_in);
  ag_tensor_free(a->noise_in);
  free(a->low);
  free(a->high);
  free(a->scratch);
  free(a->store_buf);
  free(a->noise_z);
  free(a->run_state);
  free(a);
}

static ag_status mlp_of(ag_ctx *ctx, const ag_ac_config *c, int64_t in, int64_t out, uint64_t seed,
                        ag_mlp **m) {
  int64_t sizes[AG_AC_MAX_HIDDEN + 2];
  sizes[0] = in;
  for (int i = 0; i < c->n_hidden; i++) sizes[i + 1] = c->hidden[i];
  sizes[c->n_hidden + 1] = out;
  return ag_mlp_create(ctx, sizes, c->n_hidden + 2, AG_ACT_RELU, AG_ACT_NONE, seed, m);
}

ag_status ag_ac_create(ag_ctx *ctx, int64_t obs_dim, int64_t act_dim, const float *low, const float *high,
                       int64_t total_steps, const ag_ac_config *cfg, ag_ac **out) {
  static const char fn[] = "ag_ac_create";
  if (!ctx || !low || !high || !cfg || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, low, high, cfg and out must not be NULL", fn);
  if (obs_dim < 1 || obs_dim > INT32_MAX || act_dim < 1 || act_dim > 64 || total_steps < 1)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: obs_dim = %lld, act_dim = %lld, total_steps = %lld: need >= 1, 1..64, >= 1", fn,
                    (long long)obs_dim, (long long)act_dim, (long long)total_steps);
  for (int64_t i = 0; i < act_dim; i++)
    if (!isfinite(low[i]) || !isfinite(high[i]) || !(low[i] < high[i]))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: action %lld's bounds [%g, %g] must be finite with low < high",
                      fn, (long long)i, (double)low[i], (double)high[i]);
  ag_status s = ag__ac_check_config(cfg, fn);
  if (s) return s;
  ag_ac *a = ag__calloc(1, sizeof *a);
  if (!a) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  a->ctx = ctx;
  a->cfg = *cfg;
  a->obs_dim = obs_dim;
  a->act_dim = act_dim;
  a->total_steps = total_steps;
  a->target_entropy = isnan(cfg->target_entropy) ? -(float)act_dim : cfg->target_entropy;
  a->aloss_loaded = NAN;
  a->host_rng = ag__seed_stream(AG__SEED_AC_HOST, cfg->seed, 0);
  a->low = ag__malloc(sizeof(float) * (size_t)act_dim);
  a->high = ag__malloc(sizeof(float) * (size_t)act_dim);
  if (!a->low || !a->high) {
    ag_ac_free(a);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  memcpy(a->low, low, sizeof(float) * (size_t)act_dim);
  memcpy(a->high, high, sizeof(float) * (size_t)act_dim);
  const int sac = cfg->algo == AG_AC_SAC;
  const uint64_t seed = cfg->seed;
  s = mlp_of(ctx, cfg, obs_dim, sac ? 2 * act_dim : act_dim, ag__seed_stream(AG__SEED_AC_NETS, seed, 1),
             &a->actor);
  for (int k = 0; k < 2 && !s; k++) {
    s = mlp_of(ctx, cfg, obs_dim + act_dim, 1, ag__seed_stream(AG__SEED_AC_NETS, seed, 2 + (uint64_t)k),
               &a->q[k]);
    if (!s)
      s = mlp_of(ctx, cfg, obs_dim + act_dim, 1, ag__seed_stream(AG__SEED_AC_NETS, seed, 4 + (uint64_t)k),
                 &a->qt[k]);
    if (!s) s = ag_mlp_copy(a->qt[k], a->q[k]);
  }
  if (!s && !sac) {
    s = mlp_of(ctx, cfg, obs_dim, act_dim, ag__seed_stream(AG__SEED_AC_NETS, seed, 6), &a->actor_t);
    if (!s) s = ag_mlp_copy(a->actor_t, a->actor);
  }
  ag_adam_config ac = ag_adam_defaults();
  ac.lr = cfg->actor_lr;
  if (!s) s = ag_adam_create(ctx, ag_mlp_params(a->actor), ag_mlp_n_params(a->actor), &ac, &a->opt_actor);
  if (!s) { /* one optimizer over both critics' parameters */
    int n0 = ag_mlp_n_params(a->q[0]), n1 = ag_mlp_n_params(a->q[1]);
    ag_tensor **p = ag__malloc(sizeof *p * (size_t)(n0 + n1));
    if (!p) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    if (p) {
      memcpy(p, ag_mlp_params(a->q[0]), sizeof *p * (size_t)n0);
      memcpy(p + n0, ag_mlp_params(a->q[1]), sizeof *p * (size_t)n1);
      ac.lr = cfg->critic_lr;
      s = ag_adam_create(ctx, p, n0 + n1, &ac, &a->opt_critic);
      free(p);
    }
  }
  const float la = logf(cfg->alpha);
  if (!s) s = ag_tensor_create(ctx, 1, 1, AG_F32, &la, &a->log_alpha);
  if (!s && sac && cfg->autotune) {
    s = ag_tensor_set_requires_grad(a->log_alpha, 1);
    ac.lr = cfg->critic_lr;
    if (!s) s = ag_adam_create(ctx, &a->log_alpha, 1, &ac, &a->opt_alpha);
  }
  const ag_field fields[6] = {{"obs", obs_dim, AG_F32},  {"action", act_dim, AG_F32},
                              {"reward", 1, AG_F32},     {"next_obs", obs_dim, AG_F32},
                              {"terminated", 1, AG_I32}, {"truncated", 1, AG_I32}};
  if (!s) s = ag_replay_create(ctx, fields, 6, cfg->buffer_size, AG_F32, cfg->batch_size, &a->replay);
  if (!s) s = ag_rng_create(ctx, ag__seed_stream(AG__SEED_AC_UPDATE, cfg->seed, 0), &a->rng);
  if (!s) s = ag_rng_create(ctx, ag__seed_stream(AG__SEED_AC_ACT, cfg->seed, 0), &a->act_rng);
  if (s) {
    ag_ac_free(a);
    return s;
  }
  *out = a;
  return AG_OK;
}

ag_status ag__ac_check_sound(const ag_ac *a, const char *fn) {
  if (!a->broken) return AG_OK;
  return ag__fail(AG_ERR_STATE,
                  "%s: a device error interrupted an earlier ag_ac_train and left the networks part updated; "
                  "free the agent",
                  fn);
}

/* ---- the policies ---- */

/* SAC's action (tanh-squashed) and, with logp, log pi of it ([1, n]); the
 * standard normals are eps when given, else drawn from rng. */
static ag_status sac_sample(ag_ac *a, ag_mlp *actor, ag_tensor *x, ag_rng *rng, ag_tensor *eps,
                            ag_tensor **act, ag_tensor **logp) {
  const int64_t A = a->act_dim;
  ag_tensor *out, *mu, *raw, *th, *ls, *sd, *se, *u, *y;
  ag_status s = ag_mlp_forward(actor, x, &out);
  if (!s) s = ag_slice_rows(out, 0, A, &mu);
  if (!s) s = ag_slice_rows(out, A, A, &raw);
  if (!s) s = ag_tanh(raw, &th);
  if (!s)
    s = ag_affine(th, 0.5f * (LOG_STD_MAX - LOG_STD_MIN), LOG_STD_MIN + 0.5f * (LOG_STD_MAX - LOG_STD_MIN),
                  &ls);
  if (!s) s = ag_exp(ls, &sd);
  if (!s && !eps) s = ag_randn(rng, A, ag_tensor_cols(x), &eps);
  if (!s) s = ag_mul(sd, eps, &se);
  if (!s) s = ag_add(mu, se, &u);
  if (!s) s = ag_tanh(u, &y);
  if (s || !logp) {
    if (!s) *act = y;
    return s;
  }
  ag_tensor *e2, *t, *t2, *y2, *om, *lg, *t3, *lp;
  ag_no_grad_begin(a->ctx); /* eps carries no gradient */
  s = ag_square(eps, &e2);
  if (!s) s = ag_affine(e2, -0.5f, -0.5f * LOG_2PI, &t);
  ag_no_grad_end(a->ctx);
  if (!s) s = ag_sub(t, ls, &t2);
  if (!s) s = ag_square(y, &y2);
  if (!s) s = ag_affine(y2, -1.0f, 1.0f + 1e-6f, &om);
  if (!s) s = ag_log(om, &lg);
  if (!s) s = ag_sub(t2, lg, &t3);
  if (!s) s = ag_sum(t3, AG_AXIS_ROWS, &lp);
  if (s) return s;
  *act = y;
  *logp = lp;
  return AG_OK;
}

/* The deterministic action tanh(first A outputs) of an actor. */
ag_status ag__squashed_mean(ag_mlp *actor, ag_tensor *x, int64_t A, ag_tensor **act) {
  ag_tensor *out, *mu;
  ag_status s = ag_mlp_forward(actor, x, &out);
  if (!s && ag_mlp_out(actor) != A)
    s = ag_slice_rows(out, 0, A, &mu);
  else
    mu = out;
  return s ? s : ag_tanh(mu, act);
}

/* clip(y + scale * eps, -1, 1), eps standard normal (given, or drawn from
 * rng) clipped to +-clip / scale first (clip < 0: not clipped). */
static ag_status add_noise(ag_ac *a, ag_rng *rng, ag_tensor *eps, ag_tensor *y, float scale, float clip,
                           ag_tensor **out) {
  ag_tensor *n, *nc, *s2;
  ag_status s = eps ? AG_OK : ag_randn(rng, a->act_dim, ag_tensor_cols(y), &eps);
  if (!s) s = ag_scale(eps, scale, &n);
  if (!s && clip >= 0.0f)
    s = ag_clamp(n, -clip, clip, &nc);
  else
    nc = n;
  if (!s) s = ag_add(y, nc, &s2);
  return s ? s : ag_clamp(s2, -1.0f, 1.0f, out);
}

/* alpha = exp(log alpha), without gradient, [1, 1]. */
static ag_status alpha_of(ag_ac *a, ag_tensor **out) {
  ag_tensor *d;
  ag_status s = ag_detach(a->log_alpha, &d);
  return s ? s : ag_exp(d, out);
}

/* ---- the update ---- */

static ag_status critic_step(ag_ac *a, ag_tensor **obs_out) {
  ag_tensor *batch, *idx, *obs, *act, *rew, *next, *term;
  ag_status s = ag_replay_sample(a->replay, a->rng, a->cfg.batch_size, &batch, &idx);
  if (!s) s = ag_replay_view(a->replay, batch, "obs", &obs);
  if (!s) s = ag_replay_view(a->replay, batch, "action", &act);
  if (!s) s = ag_replay_view(a->replay, batch, "reward", &rew);
  if (!s) s = ag_replay_view(a->replay, batch, "next_obs", &next);
  if (!s) s = ag_replay_view(a->replay, batch, "terminated", &term);
  if (s) return s;
  const int sac = a->cfg.algo == AG_AC_SAC, nstep = a->cfg.n_step > 1;
  ag_tensor *ret = NULL, *disc = NULL, *na, *nlp = NULL, *x, *t0, *t1, *m, *y;
  ag_no_grad_begin(a->ctx);
  if (nstep) {
    ag_tensor *last, *lb;
    s = ag_replay_nstep(a->replay, idx, a->cfg.n_step, a->cfg.gamma, a->cfg.n_envs, "reward", "terminated",
                        "truncated", &ret, &disc, &last);
    if (!s) s = ag_get_rows_dev(ag_replay_buffer(a->replay), last, &lb);
    if (!s) s = ag_replay_view(a->replay, lb, "next_obs", &next);
  }
  if (!s && sac) s = sac_sample(a, a->actor, next, a->rng, NULL, &na, &nlp);
  if (!s && !sac) {
    ag_tensor *y0;
    s = ag__squashed_mean(a->actor_t, next, a->act_dim, &y0);
    if (!s) s = add_noise(a, a->rng, NULL, y0, a->cfg.target_noise, a->cfg.noise_clip, &na);
  }
  if (!s) s = ag_concat_rows(next, na, &x);
  if (!s) s = ag_mlp_forward(a->qt[0], x, &t0);
  if (!s) s = ag_mlp_forward(a->qt[1], x, &t1);
  if (!s) s = ag_minimum(t0, t1, &m);
  if (!s && sac) { /* V = min Q' - alpha log pi */
    ag_tensor *al, *an, *v;
    s = alpha_of(a, &al);
    if (!s) s = ag_mul(al, nlp, &an);
    if (!s) s = ag_sub(m, an, &v);
    if (!s) m = v;
  }
  if (!s && !nstep) s = ag_td_target(m, NULL, rew, term, a->cfg.gamma, &y);
  if (!s && nstep) {
    ag_tensor *dv;
    s = ag_mul(disc, m, &dv);
    if (!s) s = ag_add(ret, dv, &y);
  }
  ag_no_grad_end(a->ctx);
  ag_tensor *xq, *p0, *p1, *l0, *l1, *lc;
  if (!s) s = ag_concat_rows(obs, act, &xq);
  if (!s) s = ag_mlp_forward(a->q[0], xq, &p0);
  if (!s) s = ag_mlp_forward(a->q[1], xq, &p1);
  if (!s) s = ag_mse_loss(p0, y, &l0);
  if (!s) s = ag_mse_loss(p1, y, &l1);
  if (!s) s = ag_add(l0, l1, &lc);
  if (!s) s = ag_optim_zero_grad(a->opt_critic);
  if (!s) s = ag_backward(lc);
  if (!s) s = ag_optim_step(a->opt_critic);
  if (s) return s;
  a->closs = lc;
  *obs_out = obs;
  return AG_OK;
}

/* Whether the critics' parameters take gradients (off while the actor's
 * loss flows through them: only its input gradient is needed). */
static ag_status critics_grad(ag_ac *a, int on) {
  ag_status s = AG_OK;
  for (int k = 0; k < 2; k++) {
    ag_tensor *const *p = ag_mlp_params(a->q[k]);
    for (int i = 0; i < ag_mlp_n_params(a->q[k]); i++) {
      ag_status t = ag_tensor_set_requires_grad(p[i], on);
      if (!s) s = t;
    }
  }
  return s;
}

static ag_status actor_step(ag_ac *a, ag_tensor *obs) {
  const int sac = a->cfg.algo == AG_AC_SAC;
  ag_tensor *pa, *lp = NULL, *x, *q0, *q1 = NULL, *m, *la;
  ag_status s = critics_grad(a, 0);
  if (!s && sac) s = sac_sample(a, a->actor, obs, a->rng, NULL, &pa, &lp);
  if (!s && !sac) s = ag__squashed_mean(a->actor, obs, a->act_dim, &pa);
  if (!s) s = ag_concat_rows(obs, pa, &x);
  if (!s) s = ag_mlp_forward(a->q[0], x, &q0);
  if (!s && sac) s = ag_mlp_forward(a->q[1], x, &q1);
  if (!s && sac) { /* mean(alpha log pi - min Q) */
    ag_tensor *al, *an, *d;
    s = ag_minimum(q0, q1, &m);
    if (!s) s = alpha_of(a, &al);
    if (!s) s = ag_mul(al, lp, &an);
    if (!s) s = ag_sub(an, m, &d);
    if (!s) s = ag_mean(d, AG_AXIS_ALL, &la);
  } else if (!s) { /* TD3: -mean Q1 */
    ag_tensor *mq;
    s = ag_mean(q0, AG_AXIS_ALL, &mq);
    if (!s) s = ag_scale(mq, -1.0f, &la);
  }
  if (!s) s = ag_optim_zero_grad(a->opt_actor);
  if (!s) s = ag_backward(la);
  ag_status t = critics_grad(a, 1); /* after the backward, which reads the flags */
  if (!s) s = t;
  if (!s) s = ag_optim_step(a->opt_actor);
  if (!s && sac && a->opt_alpha) { /* -log alpha * mean(log pi + target entropy), log pi without gradient */
    ag_tensor *d, *ml, *c, *prod;
    s = ag_detach(lp, &d);
    if (!s) s = ag_mean(d, AG_AXIS_ALL, &ml);
    if (!s) s = ag_affine(ml, -1.0f, -a->target_entropy, &c);
    if (!s) s = ag_mul(a->log_alpha, c, &prod);
    if (!s) s = ag_optim_zero_grad(a->opt_alpha);
    if (!s) s = ag_backward(prod);
    if (!s) s = ag_optim_step(a->opt_alpha);
  }
  if (!s && !sac) s = ag_mlp_polyak(a->actor_t, a->actor, a->cfg.tau);
  if (s) return s;
  a->aloss = la;
  return AG_OK;
}

static ag_status targets_step(ag_ac *a) {
  ag_status s = ag_mlp_polyak(a->qt[0], a->q[0], a->cfg.tau);
  return s ? s : ag_mlp_polyak(a->qt[1], a->q[1], a->cfg.tau);
}

/* ---- the fused update ---- */

/* The fused call's description: the critics' step, with actor the actor's
 * (and the temperature's), with targets the critics' Polyak step. */
static ag__acstep acstep_of(const ag_ac *a, int actor, int targets) {
  ag__acstep u;
  memset(&u, 0, sizeof u);
  u.src = ag__agent_batch(a->replay, a->rng, a->cfg.batch_size);
  u.A = a->act_dim;
  u.td3 = a->cfg.algo == AG_AC_TD3;
  u.actor = actor;
  u.targets = targets;
  u.autotune = a->cfg.autotune;
  u.pi = a->actor;
  u.pi_t = a->actor_t;
  for (int k = 0; k < 2; k++) u.q[k] = a->q[k], u.qt[k] = a->qt[k];
  u.opt_critic = a->opt_critic;
  u.opt_actor = a->opt_actor;
  u.opt_alpha = a->opt_alpha;
  u.log_alpha = a->log_alpha;
  u.gamma = a->cfg.gamma;
  u.tau = a->cfg.tau;
  u.target_entropy = a->target_entropy;
  u.target_noise = a->cfg.target_noise;
  u.noise_clip = a->cfg.noise_clip;
  return u;
}

/* On the CPU the fused call (its fast path, cpu_acgrad_fast.c) when the
 * widest hidden layer has at least this many units: from there it was the
 * faster in the SAC and TD3 shapes measured (up to 1.9x) but the smallest
 * (32 units, B 32: 3-10% slower, some 5 us), below it neither was the
 * faster consistently (dev/ac_time/README.md). */
#define CPU_FUSED_MIN_WIDTH 32

/* Whether the update is the fused call: asked for, a backend that takes
 * the kernel with these networks, and on the CPU networks that wide;
 * else the composed ops. */
static int fused_now(const ag_ac *a) {
  if (!a->cfg.fused) return 0;
  if (ag_ctx_device(a->ctx) == AG_DEVICE_CPU) {
    int64_t widest = 0;
    for (int i = 0; i < a->cfg.n_hidden; i++) widest = a->cfg.hidden[i] > widest ? a->cfg.hidden[i] : widest;
    if (widest < CPU_FUSED_MIN_WIDTH) return 0;
  }
  const ag__acstep u = acstep_of(a, 1, 1);
  return ag__acstep_fusable(&u);
}

int ag_ac_fused(const ag_ac *a) { return a ? fused_now(a) : 0; }

/* One update as the fused call (nn's ag__acstep_run): the same values as
 * critic_step, actor_step and targets_step up to the order of the sums,
 * from the same draws (the indices, then the normals, of the same stream).
 * With n-step returns the indices are drawn first, as ag_replay_sample
 * draws them, then walked (ag_replay_nstep). */
static ag_status fused_update(ag_ac *a, int actor, int targets) {
  static const char fn[] = "ag_ac_train";
  ag__acstep u = acstep_of(a, actor, targets);
  ag_tensor *lc, *la = NULL;
  ag_status s = ag__agent_batch_draw(&u.src, a->replay, a->cfg.n_step, a->cfg.gamma, a->cfg.n_envs, fn);
  if (s || (s = ag__acstep_run(&u, &lc, &la))) return s;
  a->closs = lc;
  if (actor) a->aloss = la;
  return AG_OK;
}

/* decided at every recording: after a device switch the backend may not
 * take the fused kernel, and the composed ops then do the same work */
static ag_status critic_only(ag_ctx *ctx, void *user) {
  ag_ac *a = user;
  ag_tensor *obs;
  (void)ctx;
  if (fused_now(a)) return fused_update(a, 0, a->cfg.algo == AG_AC_SAC);
  ag_status s = critic_step(a, &obs);
  /* SAC's targets follow every update; TD3's only the actor's */
  if (!s && a->cfg.algo == AG_AC_SAC) s = targets_step(a);
  return s;
}

static ag_status critic_actor(ag_ctx *ctx, void *user) {
  ag_ac *a = user;
  ag_tensor *obs;
  (void)ctx;
  if (fused_now(a)) return fused_update(a, 1, 1);
  ag_status s = critic_step(a, &obs);
  if (!s) s = actor_step(a, obs);
  if (!s) s = targets_step(a);
  return s;
}

static ag_status prepare(ag_ac *a, int which) {
  static const char fn[] = "ag_ac_train";
  ag_capture **c = &a->upd[which];
  ag_capture_info info = {0};
  if (*c) ag_capture_get_info(*c, &info);
  int before = info.records;
  ag_status s =
      *c ? ag__capture_prepare(*c, fn) : ag_capture_create(a->ctx, which ? critic_actor : critic_only, a, c);
  if (*c) ag_capture_get_info(*c, &info);
  if (!*c || !ag__capture_ready(*c)) {
    a->closs_of[which] = NULL;
    if (which) a->aloss_of = NULL;
  } else if (info.records != before) {
    a->closs_of[which] = a->closs;
    if (which) a->aloss_of = a->aloss;
    if (which) a->aloss_loaded = NAN; /* the recording's loss is the newer */
  }
  return s;
}

ag_status ag_ac_train(ag_ac *a, int64_t n, float *losses) {
  static const char fn[] = "ag_ac_train";
  if (!a || n < 0) return ag__fail(AG_ERR_INVALID_ARG, "%s: agent is NULL or n < 0", fn);
  ag_status s = ag__ac_check_sound(a, fn);
  if (s || n == 0) return s;
  if ((s = ag_replay_can_sample(a->replay, a->cfg.batch_size))) return s;
  const int d = a->cfg.policy_delay;
  /* which recordings these n updates use */
  int need[2] = {0, 0};
  for (int64_t i = 0; i < n && !(need[0] && need[1]); i++) need[(a->updates + i + 1) % d == 0] = 1;
  if ((need[0] && (s = prepare(a, 0))) || (need[1] && (s = prepare(a, 1)))) return s;
  int last = 0;
  int64_t done = 0, actor = 0;
  for (; done < n && !s; done++) {
    last = (a->updates + done + 1) % d == 0;
    s = ag__capture_run(a->upd[last]);
    actor += last;
  }
  if (!s && losses) {
    float c = NAN, al = a->aloss_loaded; /* NaN, but in a loaded agent before its actor recording */
    s = ag_tensor_read(a->closs_of[last], &c, sizeof c);
    if (!s && (actor || a->actor_updates) && a->aloss_of) s = ag_tensor_read(a->aloss_of, &al, sizeof al);
    if (!s) {
      losses[0] = c;
      losses[1] = al;
    }
  }
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    a->broken = 1;
    return ag__fail(s, "%s: %s; the networks are left part updated and the agent refuses further use", fn,
                    why);
  }
  a->updates += n;
  a->actor_updates += actor;
  return AG_OK;
}

/* ---- acting ---- */

static float to_env(const ag_ac *a, int64_t i, float y) {
  float v = a->low[i] + (y + 1.0f) * 0.5f * (a->high[i] - a->low[i]);
  return v < a->low[i] ? a->low[i] : (v > a->high[i] ? a->high[i] : v);
}

ag_status ag_ac_act_random(ag_ac *a, int n, float *actions) {
  if (!a || !actions || n < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_ac_act_random: agent and actions must be given for n >= 1");
  ag_status s = ag__ac_check_sound(a, "ag_ac_act_random");
  if (s) return s;
  for (int64_t i = 0; i < (int64_t)n * a->act_dim; i++) {
    double u = ag__splitmix64_unit(&a->host_rng);
    actions[i] = to_env(a, i % a->act_dim, (float)(2.0 * u - 1.0));
  }
  return AG_OK;
}

/* The exploring normals of n copies: drawn from the acting stream, and with
 * noise_rho > 0 made rho z + sqrt(1 - rho^2) e with the last step's z
 * (uploaded; e alone when there is none for n copies). */
static ag_status act_noise(ag_ac *a, int n, ag_tensor **eps) {
  ag_tensor *e;
  ag_status s = ag_randn(a->act_rng, a->act_dim, n, &e);
  const float rho = a->cfg.noise_rho;
  if (s || rho == 0.0f || a->noise_n != a->act_dim * n) {
    *eps = e;
    return s;
  }
  ag_tensor *rz, *ce;
  if (!a->noise_in || ag_tensor_cols(a->noise_in) != n) {
    ag_tensor *t;
    if ((s = ag_tensor_create(a->ctx, a->act_dim, n, AG_F32, NULL, &t))) return s;
    ag_tensor_free(a->noise_in);
    a->noise_in = t;
  }
  s = ag_tensor_write(a->noise_in, a->noise_z, sizeof(float) * (size_t)a->noise_n);
  if (!s) s = ag_scale(a->noise_in, rho, &rz);
  if (!s) s = ag_scale(e, (float)sqrt(1.0 - (double)rho * rho), &ce);
  return s ? s : ag_add(rz, ce, eps);
}

ag_status ag_ac_act(ag_ac *a, const float *obs, int n, int explore, float *actions) {
  static const char fn[] = "ag_ac_act";
  if (!a || !obs || !actions || n < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: agent, obs and actions must be given for n >= 1", fn);
  ag_status s = ag__ac_check_sound(a, fn);
  if (s) return s;
  const int64_t A = a->act_dim, m = A * n;
  const int corr = explore && a->cfg.noise_rho > 0.0f; /* the normals come back too */
  if (a->scratch_n < 2 * m) {
    float *p = ag__realloc(a->scratch, sizeof(float) * (size_t)(2 * m));
    if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    a->scratch = p;
    a->scratch_n = (int)(2 * m);
  }
  if (corr && a->noise_n != m) {
    float *p = ag__realloc(a->noise_z, sizeof(float) * (size_t)m);
    if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    a->noise_z = p;
    a->noise_n = 0; /* none yet for n copies */
  }
  if (!a->obs_in || a->obs_in_n != n) {
    ag_tensor *in;
    if ((s = ag_tensor_create(a->ctx, a->obs_dim, n, AG_F32, NULL, &in))) return s;
    ag_tensor_free(a->obs_in);
    a->obs_in = in;
    a->obs_in_n = n;
  }
  ag_tensor *y, *eps = NULL;
  if ((s = ag_tensor_write(a->obs_in, obs, sizeof(float) * (size_t)(a->obs_dim * n)))) return s;
  ag_no_grad_begin(a->ctx);
  if (explore) s = act_noise(a, n, &eps);
  if (!s && explore && a->cfg.algo == AG_AC_SAC)
    s = sac_sample(a, a->actor, a->obs_in, a->act_rng, eps, &y, NULL);
  else if (!s) {
    s = ag__squashed_mean(a->actor, a->obs_in, A, &y);
    if (!s && explore) s = add_noise(a, a->act_rng, eps, y, a->cfg.expl_noise, -1.0f, &y);
  }
  if (!s && corr) s = ag_concat_rows(y, eps, &y);
  ag_no_grad_end(a->ctx);
  if (!s) s = ag_tensor_read(y, a->scratch, sizeof(float) * (size_t)(corr ? 2 * m : m));
  ag_ctx_reset(a->ctx);
  if (s) return s;
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < A; i++) {
      const int64_t r = corr ? 2 * A : A; /* rows of the read: the actions, then the normals */
      actions[j * A + i] = to_env(a, i, a->scratch[j * r + i]);
      if (corr) a->noise_z[j * A + i] = a->scratch[j * r + A + i];
    }
  if (corr) a->noise_n = m;
  return AG_OK;
}

ag_status ag_ac_store(ag_ac *a, const float *obs, const float *actions, const float *rewards,
                      const float *next_obs, const int *terminated, const int *truncated, int n) {
  static const char fn[] = "ag_ac_store";
  if (!a) return ag__fail(AG_ERR_INVALID_ARG, "%s: agent is NULL", fn);
  if (n < 0 || (n > 0 && (!obs || !actions || !rewards || !next_obs || !terminated)))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %d must be >= 0, and the arrays given for n > 0", fn, n);
  ag_status s = ag__ac_check_sound(a, fn);
  if (s || n == 0) return s;
  const int64_t A = a->act_dim, m = A * n;
  for (int64_t i = 0; i < m; i++)
    if (!isfinite(actions[i]))
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: actions[%lld] = %g is not finite", fn, (long long)i,
                      (double)actions[i]);
  for (int i = 0; i < n; i++)
    if ((terminated[i] != 0 && terminated[i] != 1) || (truncated && truncated[i] != 0 && truncated[i] != 1))
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: the flags of transition %d are not 0 or 1", fn, i);
  /* the actions into [-1, 1], then the zeros of no truncation */
  size_t need = sizeof(float) * (size_t)m + (truncated ? 0 : sizeof(int) * (size_t)n);
  if (a->store_bytes < need) { /* kept between calls: the loop stores every step */
    void *p = ag__realloc(a->store_buf, need);
    if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    a->store_buf = p;
    a->store_bytes = need;
  }
  float *na = a->store_buf;
  for (int64_t i = 0; i < m; i++) {
    int64_t d = i % A;
    float y = 2.0f * (actions[i] - a->low[d]) / (a->high[d] - a->low[d]) - 1.0f;
    na[i] = y < -1.0f ? -1.0f : (y > 1.0f ? 1.0f : y);
  }
  if (!truncated) {
    int *z = (int *)(na + m);
    memset(z, 0, sizeof(int) * (size_t)n);
    truncated = z;
  }
  const void *data[6] = {obs, na, rewards, next_obs, terminated, truncated};
  return ag_replay_add(a->replay, data, n);
}

ag_status ag_ac_alpha(ag_ac *a, float *alpha) {
  if (!a || !alpha) return ag__fail(AG_ERR_INVALID_ARG, "ag_ac_alpha: agent and alpha must not be NULL");
  if (a->cfg.algo != AG_AC_SAC) {
    *alpha = 0.0f;
    return AG_OK;
  }
  float la;
  ag_status s = ag_tensor_read(a->log_alpha, &la, sizeof la);
  if (!s) *alpha = expf(la);
  return s;
}

ag_mlp *ag_ac_actor(const ag_ac *a) { return a ? a->actor : NULL; }
ag_mlp *ag_ac_critic(const ag_ac *a, int k) { return a && (k == 0 || k == 1) ? a->q[k] : NULL; }
ag_replay *ag_ac_replay(const ag_ac *a) { return a ? a->replay : NULL; }
int64_t ag_ac_updates(const ag_ac *a) { return a ? a->updates : 0; }
const ag_ac_config *ag_ac_get_config(const ag_ac *a) { return a ? &a->cfg : NULL; }
int64_t ag_ac_act_dim(const ag_ac *a) { return a ? a->act_dim : 0; }
ag_rng *ag__ac_rng(const ag_ac *a) { return a->rng; }
ag_tensor *ag__ac_log_alpha(const ag_ac *a) { return a->log_alpha; }
ag_mlp *ag__ac_target(const ag_ac *a, int k) { return k < 2 ? a->qt[k] : a->actor_t; }
