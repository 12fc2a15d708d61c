/* dqn.c — Deep Q-Networks (Mnih et al. 2015) on agrl's replay table and
 * recorded steps, with Double DQN (van Hasselt et al. 2016) as an option.
 *
 * The update is recorded once (the first time it is needed) and replayed for
 * every gradient step: sample B indices on the device from the valid part of
 * the table, gather, compute the target without gradient, the loss, backward
 * and Adam. Acting runs the online network eagerly on the observations of
 * all environment copies at once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/agent.h"
#include "agrl/dist.h"
#include "agent/agent_internal.h"
#include "replay/replay_internal.h"
#include "nn/nn_internal.h"

ag_dqn_config ag_dqn_defaults(void) {
  ag_dqn_config c;
  memset(&c, 0, sizeof c);
  c.n_hidden = 2;
  c.hidden[0] = c.hidden[1] = 256;
  c.lr = 7e-4f;
  c.gamma = 0.99f;
  c.batch_size = 128;
  c.buffer_size = 100000;
  c.learning_starts = 1000;
  c.train_freq = 64;
  c.gradient_steps = 64;
  c.target_update_interval = 10;
  c.tau = 1.0f;
  c.exploration_fraction = 0.16f;
  c.eps_start = 1.0f;
  c.eps_end = 0.01f;
  c.max_grad_norm = 10.0f;
  c.double_dqn = 1;
  c.huber = 1;
  c.fused = 1;
  c.per = 0;
  c.per_alpha = 0.6f;
  c.per_beta = 0.4f;
  c.per_eps = 1e-6f;
  c.n_step = 5;
  c.n_envs = 1;
  return c;
}

/* Every range agent.h promises, each refusal naming the field and its
 * value; the limits of prioritized replay's sampler (ag_per_create) too, so
 * that ag_dqn_create refuses before it allocates the table. */
ag_status ag__dqn_check_config(const ag_dqn_config *c, const char *fn) {
  if (c->n_hidden < 0 || c->n_hidden > AG_DQN_MAX_HIDDEN)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_hidden = %d must be in 0..%d", fn, c->n_hidden,
                    AG_DQN_MAX_HIDDEN);
  for (int i = 0; i < c->n_hidden; i++)
    if (c->hidden[i] < 1)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: hidden[%d] = %lld must be positive", fn, i,
                      (long long)c->hidden[i]);
  if (!(c->lr > 0.0f && c->lr < 1e6f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: lr = %g must be in (0, 1e6)", fn, (double)c->lr);
  if (!(c->gamma >= 0.0f && c->gamma <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: gamma = %g must be in [0, 1]", fn, (double)c->gamma);
  if (c->batch_size < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: batch_size = %lld must be positive", fn,
                    (long long)c->batch_size);
  if (c->buffer_size < c->batch_size)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: buffer_size = %lld is smaller than batch_size = %lld", fn,
                    (long long)c->buffer_size, (long long)c->batch_size);
  const struct {
    const char *name;
    int64_t v, min;
  } ints[4] = {{"learning_starts", c->learning_starts, 0},
               {"train_freq", c->train_freq, 1},
               {"gradient_steps", c->gradient_steps, 0},
               {"target_update_interval", c->target_update_interval, 1}};
  for (int i = 0; i < 4; i++)
    if (ints[i].v < ints[i].min)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: %s = %lld must be >= %lld", fn, ints[i].name,
                      (long long)ints[i].v, (long long)ints[i].min);
  if (!(c->tau > 0.0f && c->tau <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: tau = %g must be in (0, 1]", fn, (double)c->tau);
  const struct {
    const char *name;
    float v;
  } unit[5] = {{"exploration_fraction", c->exploration_fraction},
               {"eps_start", c->eps_start},
               {"eps_end", c->eps_end},
               {"per_alpha", c->per_alpha},
               {"per_beta", c->per_beta}};
  for (int i = 0; i < 5; i++)
    if (!(unit[i].v >= 0.0f && unit[i].v <= 1.0f))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: %s = %g must be in [0, 1]", fn, unit[i].name,
                      (double)unit[i].v);
  if (!(c->max_grad_norm >= 0.0f && isfinite(c->max_grad_norm)))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: max_grad_norm = %g must be finite and >= 0 (0: no clipping)", fn,
                    (double)c->max_grad_norm);
  if (c->per != 0 && c->per != 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: per = %d must be 0 or 1", fn, c->per);
  if (!(c->per_eps > 0.0f && c->per_eps <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: per_eps = %g must be in (0, 1]", fn, (double)c->per_eps);
  if (c->n_conv < 0 || c->n_conv > AG_MAX_CONV)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_conv = %d must be in 0..%d", fn, c->n_conv, AG_MAX_CONV);
  if (c->n_conv) {
    int64_t shape[AG_MAX_CONV + 1][3];
    ag_status s = ag__conv_shapes(c->obs_shape, c->conv, c->n_conv, shape, fn);
    if (s) return s;
  }
  if (c->frame_stack < 0 || c->frame_stack > AG_FRAMES_MAX_STACK)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: frame_stack = %d must be in 0..%d (0: no frame table)", fn,
                    c->frame_stack, AG_FRAMES_MAX_STACK);
  if (c->frame_stack) {
    const int64_t *sh = c->obs_shape, k = c->frame_stack;
    if (sh[0] < 1 || sh[1] < 1 || sh[2] < 1 || sh[0] % k)
      return ag__fail(
          AG_ERR_INVALID_ARG,
          "%s: obs_shape = {%lld, %lld, %lld} with frame_stack = %lld: the stack's shape {k*c, h, w} "
          "needs positive sizes, the first a multiple of k",
          fn, (long long)sh[0], (long long)sh[1], (long long)sh[2], (long long)k);
    size_t frame = 0;
    if (!ag__mul3((uint64_t)(sh[0] / k), (uint64_t)sh[1], (uint64_t)sh[2], &frame) ||
        frame > (size_t)INT32_MAX - 2)
      return ag__fail(AG_ERR_INVALID_ARG,
                      "%s: obs_shape = {%lld, %lld, %lld} with frame_stack = %lld: a frame is larger than "
                      "2^31 - 2 bytes",
                      fn, (long long)sh[0], (long long)sh[1], (long long)sh[2], (long long)k);
    if (c->n_envs > c->buffer_size)
      return ag__fail(AG_ERR_INVALID_ARG,
                      "%s: n_envs = %lld copies do not fit a frame table of buffer_size = %lld", fn,
                      (long long)c->n_envs, (long long)c->buffer_size);
  }
  if (c->n_step < 1 || c->n_step > AG__MAX_N_STEP)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_step = %d must be in 1..%d", fn, c->n_step, AG__MAX_N_STEP);
  if (c->n_envs < 1 || c->n_envs > AG__MAX_N_ENVS)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_envs = %lld must be in 1..2^20", fn, (long long)c->n_envs);
  if (c->per && c->buffer_size > AG_PER_MAX_CAPACITY)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: buffer_size = %lld with per = 1: prioritized replay takes tables of at most %lld "
                    "transitions",
                    fn, (long long)c->buffer_size, (long long)AG_PER_MAX_CAPACITY);
  return AG_OK;
}

void ag_dqn_free(ag_dqn *d) {
  if (!d) return;
  ag_capture_free(d->update);
  ag_capture_free(d->chain);
  ag_optim_free(d->opt);
  ag_mlp_free(d->q);
  ag_mlp_free(d->target);
  if (d->shard)
    ag_shard_free(d->shard); /* owns d->replay */
  else if (d->frames)
    ag_frames_free(d->frames); /* owns d->replay */
  else
    ag_replay_free(d->replay);
  free(d->grads);
  ag_rng_free(d->rng);
  ag_tensor_free(d->beta);
  ag_tensor_free(d->obs_in);
  free(d->act_scratch);
  ag__snapshot_free(&d->snap);
  free(d->run_state);
  free(d->zeros);
  free(d->act_u8);
  free(d);
}

static ag__qlearn qlearn_of(const ag_dqn *d, int step);
static int fused_now(const ag_dqn *d);

/* The fields a frame table keeps beside its frames (agent.h). */
static const ag_field frame_fields[4] = {
    {"action", 1, AG_I32}, {"reward", 1, AG_F32}, {"terminated", 1, AG_I32}, {"truncated", 1, AG_I32}};

ag_frames_config ag__dqn_frames_config(const ag_dqn_config *c) {
  ag_frames_config fc;
  memset(&fc, 0, sizeof fc);
  if (!c->frame_stack) return fc;
  fc.channels = c->obs_shape[0] / c->frame_stack;
  fc.height = c->obs_shape[1];
  fc.width = c->obs_shape[2];
  fc.stack = c->frame_stack;
  fc.n_envs = c->n_envs;
  fc.capacity = c->buffer_size;
  fc.min_size = c->batch_size;
  fc.prioritized = c->per;
  fc.alpha = c->per ? c->per_alpha : 0.0f;
  return fc;
}

/* The frame table of a DQN with cfg.frame_stack (d->replay its fields'). */
static ag_status frames_create(ag_dqn *d) {
  const ag_frames_config fc = ag__dqn_frames_config(&d->cfg);
  ag_status s = ag_frames_create(d->ctx, &fc, frame_fields, 4, AG_F32, &d->frames);
  if (!s) d->replay = ag_frames_replay(d->frames);
  return s;
}

ag_status ag__dqn_create(ag_ctx *ctx, ag_dist *g, int64_t obs_dim, int64_t n_actions, int64_t total_steps,
                         const ag_dqn_config *cfg, const char *fn, ag_dqn **out) {
  if (!ctx || !cfg || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, cfg and out must not be NULL", fn);
  if (obs_dim < 1 || n_actions < 2 || total_steps < 1)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: obs_dim = %lld, n_actions = %lld, total_steps = %lld: need >= 1, >= 2, >= 1", fn,
                    (long long)obs_dim, (long long)n_actions, (long long)total_steps);
  ag_status s = ag__dqn_check_config(cfg, fn);
  if (s) return s;
  if ((cfg->n_conv || cfg->frame_stack) &&
      cfg->obs_shape[0] * cfg->obs_shape[1] * cfg->obs_shape[2] != obs_dim)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: obs_shape = {%lld, %lld, %lld} does not hold obs_dim = %lld values", fn,
                    (long long)cfg->obs_shape[0], (long long)cfg->obs_shape[1], (long long)cfg->obs_shape[2],
                    (long long)obs_dim);
  if (g && (cfg->per || cfg->n_step > 1 || cfg->frame_stack))
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: prioritized replay, n-step returns and frame tables over a group of GPUs are not "
                    "supported",
                    fn);
  int world = g ? ag_dist_world(g) : 1, rank = g ? ag_dist_rank(g) : 0;
  if (g && ag_dist_ctx(g) != ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: the group computes on another context", fn);
  if (cfg->batch_size % world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: batch_size = %lld must be a multiple of the group size %d", fn,
                    (long long)cfg->batch_size, world);
  ag_dqn *d = ag__calloc(1, sizeof *d);
  if (!d) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  d->ctx = ctx;
  d->cfg = *cfg;
  d->obs_dim = obs_dim;
  d->n_actions = n_actions;
  d->total_steps = total_steps;
  d->dist = g;
  d->batch = cfg->batch_size / world;
  /* every rank explores and samples its own way; rank 0 of a group draws
   * what a one-GPU run of the same seed draws */
  d->host_rng = ag__seed_stream(AG__SEED_DQN_HOST, cfg->seed, (uint64_t)rank);
  int64_t sizes[AG_DQN_MAX_HIDDEN + 2];
  sizes[0] = obs_dim;
  for (int i = 0; i < cfg->n_hidden; i++) sizes[i + 1] = cfg->hidden[i];
  sizes[cfg->n_hidden + 1] = n_actions;
  const ag_field fields[6] = {{"obs", obs_dim, AG_F32},  {"action", 1, AG_I32},
                              {"reward", 1, AG_F32},     {"next_obs", obs_dim, AG_F32},
                              {"terminated", 1, AG_I32}, {"truncated", 1, AG_I32}};
  for (int k = 1; k <= 2 && !s; k++) {
    const uint64_t seed = ag__seed_stream(AG__SEED_DQN_NETS, cfg->seed, (uint64_t)k);
    ag_mlp **net = k == 1 ? &d->q : &d->target;
    s = cfg->n_conv ? ag_mlp_create_conv(ctx, cfg->obs_shape, cfg->conv, cfg->n_conv, sizes + 1,
                                         cfg->n_hidden + 1, AG_ACT_RELU, AG_ACT_NONE, seed, net)
                    : ag_mlp_create(ctx, sizes, cfg->n_hidden + 2, AG_ACT_RELU, AG_ACT_NONE, seed, net);
  }
  if (!s && g) s = ag_dist_broadcast(g, ag_mlp_params(d->q), ag_mlp_n_params(d->q), 0);
  if (!s) s = ag_mlp_copy(d->target, d->q);
  ag_adam_config ac = ag_adam_defaults();
  ac.lr = cfg->lr;
  ac.max_grad_norm = cfg->max_grad_norm;
  if (!s) s = ag_adam_create(ctx, ag_mlp_params(d->q), ag_mlp_n_params(d->q), &ac, &d->opt);
  if (!s && cfg->frame_stack) s = frames_create(d);
  if (!s && !g && !cfg->frame_stack)
    s = ag_replay_create(ctx, fields, 6, cfg->buffer_size, AG_F32, cfg->batch_size, &d->replay);
  if (!s && g) {
    int64_t cap = (cfg->buffer_size + world - 1) / world * world;
    s = ag_shard_create(ctx, fields, 6, cap, AG_F32, cfg->batch_size, rank, world, &d->shard);
    if (!s) d->replay = ag_shard_local(d->shard);
  }
  if (!s) s = ag_rng_create(ctx, ag__seed_stream(AG__SEED_DQN_UPDATE, cfg->seed, (uint64_t)rank), &d->rng);
  if (!s && g) {
    d->n_grads = ag_mlp_n_params(d->q);
    d->grads = ag__calloc((size_t)d->n_grads, sizeof *d->grads);
    if (!d->grads) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  if (!s && cfg->per) {
    if (d->frames) /* the frame table's sampler, made with it */
      d->per = ag_replay_per(d->replay);
    else
      s = ag_per_create(d->replay, cfg->per_alpha, &d->per);
    if (!s) s = ag_tensor_create(ctx, 1, 1, AG_F32, &cfg->per_beta, &d->beta);
  }
  if (!s) d->fused = fused_now(d);
  if (s) {
    ag_dqn_free(d);
    return s;
  }
  *out = d;
  return AG_OK;
}

ag_status ag_dqn_create(ag_ctx *ctx, int64_t obs_dim, int64_t n_actions, int64_t total_steps,
                        const ag_dqn_config *cfg, ag_dqn **out) {
  return ag__dqn_create(ctx, NULL, obs_dim, n_actions, total_steps, cfg, "ag_dqn_create", out);
}

ag_status ag_dqn_create_dist(ag_ctx *ctx, ag_dist *g, int64_t obs_dim, int64_t n_actions, int64_t total_steps,
                             const ag_dqn_config *cfg, ag_dqn **out) {
  if (!g) return ag__fail(AG_ERR_INVALID_ARG, "ag_dqn_create_dist: the group is NULL");
  return ag__dqn_create(ctx, g, obs_dim, n_actions, total_steps, cfg, "ag_dqn_create_dist", out);
}

ag_dist *ag_dqn_dist(const ag_dqn *d) { return d ? d->dist : NULL; }

float ag_dqn_epsilon(const ag_dqn *d, int64_t step) {
  const ag_dqn_config *c = &d->cfg;
  double progress = (double)step / (double)d->total_steps;
  if (c->exploration_fraction <= 0.0f || progress >= c->exploration_fraction) return c->eps_end;
  return (float)(c->eps_start + (c->eps_end - c->eps_start) * progress / c->exploration_fraction);
}

void ag__dqn_set_broken(ag_dqn *d) { d->broken = 1; }

static ag_status check_sound(const ag_dqn *d, const char *fn) {
  if (!d->broken) return AG_OK;
  return ag__fail(AG_ERR_STATE,
                  "%s: a device error interrupted an earlier ag_dqn_train and left the networks half "
                  "updated; free the DQN",
                  fn);
}

ag_status ag_dqn_act(ag_dqn *d, const float *obs, int n, int64_t step, int explore, int32_t *actions) {
  static const char fn[] = "ag_dqn_act";
  if (!d || !obs || !actions || n < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn, obs and actions must be given for n >= 1", fn);
  ag_status s = check_sound(d, fn);
  if (s) return s;
  float eps = explore ? ag_dqn_epsilon(d, step) : 0.0f;
  if (d->scratch_n < n) {
    int32_t *a = ag__realloc(d->act_scratch, 2 * (size_t)n * sizeof *a);
    if (!a) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    d->act_scratch = a;
    d->scratch_n = n;
  }
  /* decide the random ones first (the same draws whatever the device); the
   * stream moves on only if the call succeeds */
  uint64_t rng = d->host_rng;
  int32_t *random = d->act_scratch, *chosen = d->act_scratch + n;
  int need_net = 0;
  for (int i = 0; i < n; i++) {
    if (explore && ag__splitmix64_unit(&rng) < eps) {
      chosen[i] = (int32_t)(ag__splitmix64(&rng) % (uint64_t)d->n_actions);
      random[i] = 1;
    } else {
      random[i] = 0;
      need_net = 1;
    }
  }
  if (need_net) {
    if (!d->obs_in || d->obs_in_n != n) {
      ag_tensor *in;
      if ((s = ag_tensor_create(d->ctx, d->obs_dim, n, AG_F32, NULL, &in))) return s;
      ag_tensor_free(d->obs_in);
      d->obs_in = in;
      d->obs_in_n = n;
    }
    if ((s = ag_tensor_write(d->obs_in, obs, (size_t)(d->obs_dim * n) * sizeof(float)))) return s;
    ag_tensor *qv, *a;
    int32_t greedy[256], *g = n <= 256 ? greedy : ag__malloc((size_t)n * sizeof *g);
    if (!g) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    ag_no_grad_begin(d->ctx);
    s = ag_mlp_forward(d->q, d->obs_in, &qv);
    if (!s) s = ag_argmax(qv, AG_AXIS_ROWS, AG_I32, &a);
    ag_no_grad_end(d->ctx);
    if (!s) s = ag_tensor_read(a, g, (size_t)n * sizeof *g);
    if (!s)
      for (int i = 0; i < n; i++)
        if (!random[i]) chosen[i] = g[i];
    if (g != greedy) free(g);
    ag_ctx_reset(d->ctx);
    if (s) return s;
  }
  memcpy(actions, chosen, (size_t)n * sizeof *actions);
  d->host_rng = rng;
  return AG_OK;
}

ag_status ag_dqn_act_u8(ag_dqn *d, const uint8_t *obs, int n, int64_t step, int explore, int32_t *actions) {
  static const char fn[] = "ag_dqn_act_u8";
  if (!d || !obs || !actions || n < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn, obs and actions must be given for n >= 1", fn);
  const size_t k = (size_t)d->obs_dim * (size_t)n;
  if (d->act_u8_n < k) {
    float *f = ag__realloc(d->act_u8, k * sizeof *f);
    if (!f) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory for %zu values", fn, k);
    d->act_u8 = f;
    d->act_u8_n = k;
  }
  for (size_t i = 0; i < k; i++) d->act_u8[i] = (float)obs[i] / 255.0f; /* as the frame gather */
  return ag_dqn_act(d, d->act_u8, n, step, explore, actions);
}

/* The checks of a store's actions and flags (n values each; terminated and
 * truncated may be NULL), and truncated NULL made a column of zeros. */
static ag_status check_fields(ag_dqn *d, const int32_t *actions, const int *terminated, const int **truncated,
                              int64_t n, const char *fn) {
  for (int64_t i = 0; actions && i < n; i++)
    if (actions[i] < 0 || actions[i] >= d->n_actions)
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: actions[%lld] = %d is outside 0..%lld", fn, (long long)i,
                      actions[i], (long long)(d->n_actions - 1));
  const int *flags[2] = {terminated, *truncated}; /* the target takes 1 - terminated */
  static const char *const names[2] = {"terminated", "truncated"};
  for (int f = 0; f < 2; f++)
    for (int64_t i = 0; flags[f] && i < n; i++)
      if (flags[f][i] != 0 && flags[f][i] != 1)
        return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: %s[%lld] = %d is not 0 or 1", fn, names[f], (long long)i,
                        flags[f][i]);
  if (!*truncated && n > 0) { /* none: a column of zeros */
    if (d->zeros_n < n) {
      int *z = ag__calloc((size_t)n, sizeof *z);
      if (!z) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
      free(d->zeros);
      d->zeros = z;
      d->zeros_n = n;
    }
    *truncated = d->zeros;
  }
  return AG_OK;
}

static ag_status store(ag_dqn *d, const float *obs, const int32_t *actions, const float *rewards,
                       const float *next_obs, const int *terminated, const int *truncated, int n,
                       const char *fn) {
  if (!d) return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn is NULL", fn);
  ag_status s = check_sound(d, fn);
  if (s) return s;
  if (d->frames)
    return ag__fail(AG_ERR_STATE,
                    "%s: the DQN keeps a frame table (frame_stack = %d): store its frames with "
                    "ag_dqn_store_frames",
                    fn, d->cfg.frame_stack);
  if ((s = check_fields(d, actions, terminated, &truncated, n, fn))) return s;
  const void *data[6] = {obs, actions, rewards, next_obs, terminated, truncated};
  return d->shard ? ag_shard_add_local(d->shard, data, n) : ag_replay_add(d->replay, data, n);
}

ag_status ag_dqn_store_frames(ag_dqn *d, const uint8_t *frames, const uint8_t *first, const int32_t *actions,
                              const float *rewards, const int *terminated, const int *truncated,
                              int64_t steps) {
  static const char fn[] = "ag_dqn_store_frames";
  if (!d) return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn is NULL", fn);
  ag_status s = check_sound(d, fn);
  if (s) return s;
  if (!d->frames)
    return ag__fail(AG_ERR_STATE,
                    "%s: the DQN keeps full observations (frame_stack = 0): store with ag_dqn_store_ex", fn);
  if (steps < 0)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: steps = %lld must not be negative", fn, (long long)steps);
  if (steps == 0) return AG_OK;
  if (!frames || !first || !actions || !rewards || !terminated)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: frames, first, actions, rewards and terminated must not be NULL",
                    fn);
  if (steps > d->cfg.buffer_size / d->cfg.n_envs)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: %lld steps of %lld copies do not fit a table of %lld entries",
                    fn, (long long)steps, (long long)d->cfg.n_envs, (long long)d->cfg.buffer_size);
  if ((s = check_fields(d, actions, terminated, &truncated, steps * d->cfg.n_envs, fn))) return s;
  const void *data[4] = {actions, rewards, terminated, truncated};
  return ag_frames_add(d->frames, frames, first, data, steps);
}

ag_status ag_dqn_store(ag_dqn *d, const float *obs, const int32_t *actions, const float *rewards,
                       const float *next_obs, const int *terminated, int n) {
  return store(d, obs, actions, rewards, next_obs, terminated, NULL, n, "ag_dqn_store");
}

ag_status ag_dqn_store_ex(ag_dqn *d, const float *obs, const int32_t *actions, const float *rewards,
                          const float *next_obs, const int *terminated, const int *truncated, int n) {
  return store(d, obs, actions, rewards, next_obs, terminated, truncated, n, "ag_dqn_store_ex");
}

/* One batch as the loss reads it: obs and next [obs_dim, B] f32 (next_obs
 * of each transition), act [1, B] i32, rew and term [1, B]; with n-step
 * returns ret and disc [1, B] (else NULL) and next the next_obs of each
 * walk's last entry: the target is then ret + disc * V(next). */
typedef struct dqn_batch {
  ag_tensor *obs, *act, *rew, *next, *term, *ret, *disc;
} dqn_batch;

/* The fields of a gathered batch of table r (obs and next_obs too with
 * `obs`: a table of full observations). */
static ag_status batch_views(ag_replay *r, ag_tensor *batch, int obs, dqn_batch *b) {
  ag_status s;
  if ((obs && ((s = ag_replay_view(r, batch, "obs", &b->obs)) ||
               (s = ag_replay_view(r, batch, "next_obs", &b->next)))) ||
      (s = ag_replay_view(r, batch, "action", &b->act)) ||
      (s = ag_replay_view(r, batch, "reward", &b->rew)) ||
      (s = ag_replay_view(r, batch, "terminated", &b->term)))
    return s;
  b->ret = b->disc = NULL;
  return AG_OK;
}

/* With n_step > 1, the n-step walks of the drawn entries idx: b's returns,
 * discounts and the next_obs of each walk's last entry (agrl/replay.h's
 * ag_replay_nstep over the table of full observations, frames.h's
 * ag_frames_nstep and the stacks of its last entries over a frame table). */
static ag_status nstep_walks(ag_dqn *d, ag_tensor *idx, dqn_batch *b) {
  if (d->cfg.n_step <= 1) return AG_OK;
  ag_tensor *last, *lb, *lo;
  ag_status s;
  ag_no_grad_begin(d->ctx);
  if (d->frames) {
    s = ag_frames_nstep(d->frames, idx, d->cfg.n_step, d->cfg.gamma, "reward", "terminated", "truncated",
                        &b->ret, &b->disc, &last);
    if (!s) s = ag_frames_gather_dev(d->frames, last, AG_F32, &lo, &b->next, NULL);
  } else {
    s = ag_replay_nstep(d->replay, idx, d->cfg.n_step, d->cfg.gamma, d->cfg.n_envs, "reward", "terminated",
                        "truncated", &b->ret, &b->disc, &last);
    if (!s) s = ag_get_rows_dev(ag_replay_buffer(d->replay), last, &lb);
    if (!s) s = ag_replay_view(d->replay, lb, "next_obs", &b->next);
  }
  ag_no_grad_end(d->ctx);
  return s;
}

/* An update's B transitions, drawn on the device (recordable): uniformly,
 * or by priority (idx and *w, the importance weights, with beta from
 * d->beta); from the table of full observations or, with a frame table,
 * their stacks rebuilt as f32; then their n-step walks. *idx: the entries. */
static ag_status draw(ag_dqn *d, dqn_batch *b, ag_tensor **idx, ag_tensor **w) {
  ag_tensor *batch;
  ag_status s = AG_OK;
  *w = NULL;
  if (d->frames && ag_frames_count(d->frames) < d->batch) /* the prioritized draw does not check it */
    return ag__fail(AG_ERR_STATE,
                    "ag_dqn_train: %lld transitions may be sampled, fewer than batch_size = %lld",
                    (long long)ag_frames_count(d->frames), (long long)d->batch);
  if (d->per) s = ag_per_sample_dev(d->per, d->rng, d->batch, d->beta, idx, w);
  if (!s && d->frames && d->per)
    s = ag_frames_gather_dev(d->frames, *idx, AG_F32, &b->obs, &b->next, &batch);
  else if (!s && d->frames)
    s = ag_frames_sample(d->frames, d->rng, d->batch, AG_F32, &b->obs, &b->next, &batch, idx);
  else if (!s && d->per)
    s = ag_get_rows_dev(ag_replay_buffer(d->replay), *idx, &batch);
  else if (!s)
    s = ag_replay_sample(d->replay, d->rng, d->batch, &batch, idx);
  if (!s) s = batch_views(d->replay, batch, !d->frames, b);
  return s ? s : nstep_walks(d, *idx, b);
}

/* Q(s, a) of a batch ([1, B], with gradients) and its target y ([1, B],
 * without): r + gamma (1 - terminated) V(s'), or with n-step returns
 * ret + disc V(s'_last), V(s') = max_a Q'(s', a) (Double DQN:
 * Q'(s', argmax_a Q(s', a))). */
static ag_status q_and_target(ag_dqn *d, const dqn_batch *b, ag_tensor **qa_out, ag_tensor **y_out) {
  ag_tensor *qn, *y, *q, *qa, *am = NULL;
  ag_status s;
  ag_no_grad_begin(d->ctx);
  s = ag_mlp_forward(d->target, b->next, &qn);
  if (!s && d->cfg.double_dqn) {
    ag_tensor *qo;
    s = ag_mlp_forward(d->q, b->next, &qo);
    if (!s) s = ag_argmax(qo, AG_AXIS_ROWS, AG_I32, &am);
  }
  if (!s && !b->ret) s = ag_td_target(qn, am, b->rew, b->term, d->cfg.gamma, &y);
  if (!s && b->ret) { /* y = R + discount * V */
    ag_tensor *v, *dv;
    s = am ? ag_pick(qn, am, &v) : ag_max(qn, AG_AXIS_ROWS, &v);
    if (!s) s = ag_mul(b->disc, v, &dv);
    if (!s) s = ag_add(b->ret, dv, &y);
  }
  ag_no_grad_end(d->ctx);
  if (s) return s;
  if ((s = ag_mlp_forward(d->q, b->obs, &q)) || (s = ag_pick(q, b->act, &qa))) return s;
  *qa_out = qa;
  *y_out = y;
  return AG_OK;
}

/* The plain loss of a batch: mean_j f(Q(s_j, a_j) - y_j), f Huber or the square. */
static ag_status batch_loss(ag_dqn *d, const dqn_batch *b, ag_tensor **loss) {
  ag_tensor *qa, *y;
  ag_status s = q_and_target(d, b, &qa, &y);
  if (s) return s;
  return d->cfg.huber ? ag_huber_loss(qa, y, 1.0f, loss) : ag_mse_loss(qa, y, loss);
}

ag_status ag_dqn_loss(ag_dqn *d, ag_tensor *batch, ag_tensor **loss) {
  static const char fn[] = "ag_dqn_loss";
  dqn_batch b;
  ag_status s;
  if (!d || !batch || !loss)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn, batch and loss must not be NULL", fn);
  if ((s = check_sound(d, fn))) return s;
  if (d->frames)
    return ag__fail(AG_ERR_STATE,
                    "%s: the DQN keeps a frame table, whose batches hold no observations: use "
                    "ag_dqn_loss_frames",
                    fn);
  if ((s = batch_views(d->replay, batch, 1, &b))) return s;
  return batch_loss(d, &b, loss);
}

ag_status ag_dqn_loss_frames(ag_dqn *d, const int64_t *idx, int64_t n, ag_tensor **loss) {
  static const char fn[] = "ag_dqn_loss_frames";
  dqn_batch b;
  ag_tensor *batch;
  ag_status s;
  if (!d || !idx || !loss) return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn, idx and loss must not be NULL", fn);
  if ((s = check_sound(d, fn))) return s;
  if (!d->frames)
    return ag__fail(AG_ERR_STATE, "%s: the DQN keeps full observations (frame_stack = 0): use ag_dqn_loss",
                    fn);
  if ((s = ag_frames_gather(d->frames, idx, n, AG_F32, &b.obs, &b.next, &batch)) ||
      (s = batch_views(d->replay, batch, 0, &b)))
    return s;
  return batch_loss(d, &b, loss);
}

/* The update's loss: a batch drawn on the device and its loss; with
 * prioritized replay mean_j w_j f(Q(s_j, a_j) - y_j) with the importance
 * weights, and the drawn entries' priorities set to |Q - y| + per_eps. */
static ag_status update_loss(ag_dqn *d, ag_tensor **loss) {
  dqn_batch b;
  ag_tensor *idx, *w, *qa, *y, *td, *l, *lw, *a, *p;
  ag_status s = draw(d, &b, &idx, &w);
  if (!s && !d->per) s = batch_loss(d, &b, loss);
  if (s || !d->per) return s;
  s = q_and_target(d, &b, &qa, &y);
  if (!s) s = ag_sub(qa, y, &td);
  if (!s) s = d->cfg.huber ? ag_huber(td, 1.0f, &l) : ag_square(td, &l);
  if (!s) s = ag_mul(l, w, &lw);
  if (!s) s = ag_mean(lw, AG_AXIS_ALL, loss);
  if (s) return s;
  ag_no_grad_begin(d->ctx);
  s = ag_abs(td, &a);
  if (!s) s = ag_affine(a, 1.0f, d->cfg.per_eps, &p);
  ag_no_grad_end(d->ctx);
  if (s) return s;
  return d->frames ? ag_frames_update_priorities(d->frames, idx, p) : ag_per_update(d->per, idx, p);
}

/* The fused update's description: the table, its fields, the networks and,
 * with step, the optimizer whose step the call makes too. */
static ag__qlearn qlearn_of(const ag_dqn *d, int step) {
  ag__qlearn u;
  memset(&u, 0, sizeof u);
  u.src = ag__agent_batch(d->replay, d->rng, d->batch);
  u.q = d->q;
  u.target = d->target;
  u.gamma = d->cfg.gamma;
  u.double_dqn = d->cfg.double_dqn;
  u.huber = d->cfg.huber;
  u.delta = 1.0f;
  u.opt = step ? d->opt : NULL;
  return u;
}

/* Whether the update is the fused call: asked for, without prioritized
 * replay (the kernel weighs no loss), the one-step target over a group of
 * GPUs, and a backend that takes the kernel; else the composed ops. */
static int fused_now(const ag_dqn *d) {
  if (!d->cfg.fused || d->per || d->frames || (d->cfg.n_step > 1 && d->dist)) return 0;
  const ag__qlearn u = qlearn_of(d, 0);
  return ag__qlearn_fusable(&u);
}

/* The loss and its gradient for B sampled transitions in one fused call
 * (nn's ag__qlearn_step): the same values as the composed update
 * (q_and_target, the loss and ag_backward, up to the order of the sums),
 * without the ~30 kernels of the composed ops; with step, the optimizer's
 * step too. With n-step returns the B indices are drawn first, as
 * ag_replay_sample draws them for the composed update (the same stream
 * and counter: the same columns), then their ag_replay_nstep walks, whose
 * returns, discounts and last columns the kernel's target takes. */
static ag_status fused_grad(ag_dqn *d, int step) {
  static const char fn[] = "ag_dqn_train";
  ag__qlearn u = qlearn_of(d, step);
  ag_status s = ag__agent_batch_draw(&u.src, d->replay, d->cfg.n_step, d->cfg.gamma, d->cfg.n_envs, fn);
  return s ? s : ag__qlearn_step(&u, &d->loss);
}

static ag_status update_step(ag_ctx *ctx, void *user) {
  ag_dqn *d = user;
  ag_status s = AG_OK;
  /* decided at every recording: after a device switch the backend may not
   * take the fused kernel, and the composed ops then do the same work */
  d->fused = fused_now(d);
  if (d->fused) { /* the gradients are written, not added to */
    /* without a gradient to average over ranks or a norm to clip by, the
     * optimizer's step runs inside the call */
    const int step = !d->dist && ag__optim_fusable(d->opt);
    s = ag_optim_zero_grad(d->opt);
    if (!s) s = fused_grad(d, step);
    if (!s && step) return AG_OK;
  } else {
    s = update_loss(d, &d->loss);
    if (!s) s = ag_optim_zero_grad(d->opt);
    if (!s) s = ag_backward(d->loss);
  }
  if (!s && d->dist) { /* the mean of the ranks' batch means: the gradient of the whole batch */
    ag_tensor *const *p = ag_mlp_params(d->q);
    for (int i = 0; i < d->n_grads && !s; i++)
      if (!(d->grads[i] = ag_tensor_grad(p[i])))
        s = ag__fail(AG_ERR_STATE, "ag_dqn_train: parameter %d has no gradient", i);
    if (!s) s = ag_dist_allreduce(d->dist, d->grads, d->n_grads, AG_REDUCE_MEAN);
  }
  if (!s) s = ag_optim_step(d->opt);
  (void)ctx;
  return s;
}

/* AG__DQN_CHAIN updates in one recording: on the GPU one graph, in which
 * each update's first kernel follows the last one's as every kernel of an
 * update follows the one before it (no launch between updates). The
 * workspace is rewound between them: an update's temporaries die with it,
 * and the next update's kernels write them only after the last one's have
 * run (stream order), so the recording takes one update's memory. */
#define AG__DQN_CHAIN 8

static ag_status chain_step(ag_ctx *ctx, void *user) {
  ag_status s = AG_OK;
  for (int k = 0; k < AG__DQN_CHAIN && !s; k++) {
    if (k > 0) ag__capture_rewind(ctx);
    s = update_step(ctx, user);
  }
  return s;
}

/* Makes recording `which` (0: one update, 1: the chain) ready to run: made
 * at the first call, made again when what it reads moved. Runs nothing. */
static ag_status prepare(ag_dqn *d, int which) {
  static const char fn[] = "ag_dqn_train";
  ag_capture **c = which ? &d->chain : &d->update;
  ag_capture_info info = {0};
  if (*c) ag_capture_get_info(*c, &info);
  int before = info.records;
  ag_status s =
      *c ? ag__capture_prepare(*c, fn) : ag_capture_create(d->ctx, which ? chain_step : update_step, d, c);
  if (*c) ag_capture_get_info(*c, &info);
  if (!*c || !ag__capture_ready(*c))
    d->loss_of[which] = NULL; /* gone with the recording's workspace */
  else if (info.records != before)
    d->loss_of[which] = d->loss; /* recorded (again): the step set d->loss */
  return s;
}

/* The tensors an update changes: the online network's parameters and
 * gradients, the optimizer's moments and step count, the sampling stream.
 * Writes up to max of them; returns how many there are. */
int ag__dqn_update_state(const ag_dqn *d, ag_tensor **out, int max) {
  int n = 0, np = ag_mlp_n_params(d->q);
  ag_tensor *const *p = ag_mlp_params(d->q);
  for (int i = 0; i < np; i++) {
    if (n < max) out[n] = p[i];
    n++;
    if (n < max) out[n] = p[i]->grad;
    n++;
  }
  if (n < max) out[n] = ag__rng_counter_tensor(d->rng);
  n++;
  return n + ag__optim_state(d->opt, n < max ? out + n : out, n < max ? max - n : 0);
}

ag_status ag_dqn_train(ag_dqn *d, int64_t n, float *last_loss) {
  static const char fn[] = "ag_dqn_train";
  if (!d || n < 0) return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn is NULL or n < 0", fn);
  ag_status s = check_sound(d, fn);
  if (s) return s;
  if (n == 0) return AG_OK;
  const int64_t chains = n / AG__DQN_CHAIN, singles = n % AG__DQN_CHAIN;
  /* 1. the recordings ready before any update runs */
  if ((chains && (s = prepare(d, 1))) || (singles && (s = prepare(d, 0)))) return s;
  /* 2. with a loss to read back, what the updates change is kept first, so
   * that a failed read can be undone */
  if (last_loss) {
    ag_tensor *keep[4 * (AG_DQN_MAX_HIDDEN + 1 + AG_MAX_CONV) * 4 + 8];
    const int room = (int)(sizeof keep / sizeof *keep) - 2;
    int m = ag__dqn_update_state(d, keep, room);
    if (m > room) return ag__fail(AG_ERR_STATE, "%s: too many tensors to keep", fn);
    if (d->per) { /* the priorities the updates write */
      keep[m++] = ag__per_tree(d->per);
      keep[m++] = ag__per_state(d->per);
    }
    if ((s = ag__snapshot_take(&d->snap, keep, m, fn))) return s;
  }
  /* 3. the updates: from here only the device can fail */
  for (int64_t i = 0; i < chains && !s; i++) s = ag__capture_run(d->chain);
  for (int64_t i = 0; i < singles && !s; i++) s = ag__capture_run(d->update);
  d->loss = d->loss_of[singles ? 0 : 1];
  if (!s && last_loss) s = ag_tensor_read(d->loss, last_loss, sizeof *last_loss);
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    if (!last_loss || ag__snapshot_restore(&d->snap)) {
      d->broken = 1;
      return ag__fail(s, "%s: %s; the networks are left half updated and the DQN refuses further use", fn,
                      why);
    }
    return ag__fail(s, "%s: %s; the %lld updates were undone", fn, why, (long long)n);
  }
  d->updates += n;
  return AG_OK;
}

ag_status ag_dqn_update_target(ag_dqn *d) {
  if (!d) return ag__fail(AG_ERR_INVALID_ARG, "ag_dqn_update_target: dqn is NULL");
  ag_status s = check_sound(d, "ag_dqn_update_target");
  if (s) return s;
  return d->cfg.tau >= 1.0f ? ag_mlp_copy(d->target, d->q) : ag_mlp_polyak(d->target, d->q, d->cfg.tau);
}

ag_mlp *ag_dqn_q(const ag_dqn *d) { return d ? d->q : NULL; }
ag_mlp *ag_dqn_target(const ag_dqn *d) { return d ? d->target : NULL; }
ag_replay *ag_dqn_replay(const ag_dqn *d) { return d ? d->replay : NULL; }
ag_frames *ag_dqn_frames(const ag_dqn *d) { return d ? d->frames : NULL; }
int64_t ag_dqn_updates(const ag_dqn *d) { return d ? d->updates : 0; }
const ag_dqn_config *ag_dqn_get_config(const ag_dqn *d) { return d ? &d->cfg : NULL; }
ag_per *ag_dqn_per(const ag_dqn *d) { return d ? d->per : NULL; }

float ag_dqn_per_beta(const ag_dqn *d, int64_t step) {
  if (!d) return 1.0f;
  double f = step <= 0 ? 0.0 : (double)step / (double)d->total_steps;
  if (f > 1.0) f = 1.0;
  return (float)(d->cfg.per_beta + (1.0 - d->cfg.per_beta) * f);
}

ag_status ag_dqn_set_beta(ag_dqn *d, float beta) {
  static const char fn[] = "ag_dqn_set_beta";
  if (!d || !(beta >= 0.0f && beta <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn is NULL or beta = %g is outside [0, 1]", fn, (double)beta);
  if (!d->per) return ag__fail(AG_ERR_STATE, "%s: the DQN has no prioritized replay (cfg.per)", fn);
  ag_status s = ag__not_recording(d->ctx, fn);
  return s ? s : ag_tensor_write(d->beta, &beta, sizeof beta);
}
int64_t ag_dqn_total_steps(const ag_dqn *d) { return d ? d->total_steps : 0; }
int ag_dqn_fused(const ag_dqn *d) { return d ? d->fused : 0; }
