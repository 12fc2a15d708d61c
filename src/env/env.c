/* env.c — the ag_env handle: creation (built-in by name, or from user
 * functions), argument checks, the reset/step/end-of-episode state machine
 * and the time limit (Gymnasium's TimeLimit: truncated on the
 * max_episode_steps-th step).
 *
 * Every argument is checked before the environment's functions run, and a
 * step or reset writes into the handle's scratch observation before anything
 * reaches the caller, so a failing call changes nothing the caller sees.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "env/env_internal.h"

/* Checks a spec given to ag_env_create_custom (or a built-in one). */
static ag_status check_spec(const ag_env_spec *spec, const char *fn) {
  if (spec->obs_dim < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: spec->obs_dim = %d must be positive", fn, spec->obs_dim);
  if (spec->n_actions < 0 || spec->act_dim < 0 || (spec->n_actions > 0) == (spec->act_dim > 0))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: spec->n_actions = %d and spec->act_dim = %d: exactly one must be positive "
                    "(n_actions for a discrete environment, act_dim for a continuous one)",
                    fn, spec->n_actions, spec->act_dim);
  if (spec->n_actions > (1 << 24))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: spec->n_actions = %d is more than 2^24 (indices travel as floats)", fn,
                    spec->n_actions);
  const int *sh = spec->obs_shape;
  if ((sh[0] || sh[1] || sh[2]) &&
      (sh[0] < 1 || sh[1] < 1 || sh[2] < 1 || (int64_t)sh[0] * sh[1] * sh[2] != spec->obs_dim))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: spec->obs_shape = {%d, %d, %d} must be {0, 0, 0} (a flat observation) or positive "
                    "sizes whose product is obs_dim = %d",
                    fn, sh[0], sh[1], sh[2], spec->obs_dim);
  if (spec->max_episode_steps < 0)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: spec->max_episode_steps = %d must not be negative (0: no limit)",
                    fn, spec->max_episode_steps);
  if (spec->n_actions > 0 && (spec->act_low || spec->act_high))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: spec->act_low and act_high must be NULL for a discrete environment", fn);
  if (!spec->act_low != !spec->act_high)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: spec->act_%s is NULL but act_%s is not; give both bounds or neither", fn,
                    spec->act_low ? "high" : "low", spec->act_low ? "low" : "high");
  if (spec->act_low)
    for (int i = 0; i < spec->act_dim; i++)
      if (!(spec->act_low[i] <= spec->act_high[i]))
        return ag__fail(AG_ERR_INVALID_ARG, "%s: spec->act_low[%d] = %g is not <= act_high[%d] = %g", fn, i,
                        (double)spec->act_low[i], i, (double)spec->act_high[i]);
  return AG_OK;
}

ag_status ag__env_new(const ag_env_ops *ops, void *state, const ag_env_spec *spec, const char *fn,
                      ag_env **out) {
  if (!ops) return ag__fail(AG_ERR_INVALID_ARG, "%s: ops is NULL", fn);
  if (!ops->reset) return ag__fail(AG_ERR_INVALID_ARG, "%s: ops->reset is NULL", fn);
  if (!ops->step) return ag__fail(AG_ERR_INVALID_ARG, "%s: ops->step is NULL", fn);
  if (!spec) return ag__fail(AG_ERR_INVALID_ARG, "%s: spec is NULL", fn);
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  ag_status st = check_spec(spec, fn);
  if (st != AG_OK) return st;

  const char *id = spec->id ? spec->id : "custom";
  size_t id_len = strlen(id) + 1;
  ag_env *e = ag__calloc(1, sizeof *e);
  char *id_copy = ag__malloc(id_len);
  float *scratch = ag__calloc((size_t)spec->obs_dim, sizeof *scratch);
  float *bounds = spec->act_low ? ag__malloc(2 * (size_t)spec->act_dim * sizeof *bounds) : NULL;
  if (!e || !id_copy || !scratch || (spec->act_low && !bounds)) {
    free(e);
    free(id_copy);
    free(scratch);
    free(bounds);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory for environment \"%s\"", fn, id);
  }
  memcpy(id_copy, id, id_len);
  e->ops = *ops;
  e->state = state;
  e->spec = *spec;
  e->spec.id = id_copy;
  e->id = id_copy;
  e->scratch = scratch;
  if (bounds) {
    memcpy(bounds, spec->act_low, (size_t)spec->act_dim * sizeof *bounds);
    memcpy(bounds + spec->act_dim, spec->act_high, (size_t)spec->act_dim * sizeof *bounds);
    e->spec.act_low = bounds;
    e->spec.act_high = bounds + spec->act_dim;
  }
  e->bounds = bounds;
  e->phase = AG__ENV_NEEDS_RESET;
  *out = e;
  return AG_OK;
}

ag_status ag_env_create_custom(const ag_env_ops *ops, void *state, const ag_env_spec *spec, ag_env **out) {
  return ag__env_new(ops, state, spec, "ag_env_create_custom", out);
}

void ag_env_free(ag_env *env) {
  if (!env) return;
  if (env->ops.free) env->ops.free(env->state);
  free(env->id);
  free(env->bounds);
  free(env->scratch);
  free(env);
}

const ag_env_spec *ag_env_get_spec(const ag_env *env) { return env ? &env->spec : NULL; }

ag__who ag__env_who(const char *fn, int copy) {
  ag__who w;
  if (copy >= 0)
    snprintf(w.s, sizeof w.s, "%s: copy %d", fn, copy);
  else
    snprintf(w.s, sizeof w.s, "%s", fn);
  return w;
}

ag_status ag__env_check_action(const ag_env_spec *spec, const float *action, const char *fn, int copy) {
  if (spec->n_actions > 0) {
    float a = action[0];
    if (!isfinite(a) || floorf(a) != a)
      return ag__fail(AG_ERR_INVALID_ARG,
                      "%s: action %g is not a whole number; a discrete action is one float "
                      "holding the index 0..%d",
                      ag__env_who(fn, copy).s, (double)a, spec->n_actions - 1);
    if (a < 0.0f || a >= (float)spec->n_actions)
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: action %.0f is outside 0..%d", ag__env_who(fn, copy).s,
                      (double)a, spec->n_actions - 1);
    return AG_OK;
  }
  for (int i = 0; i < spec->act_dim; i++)
    if (!isfinite(action[i]))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: action[%d] = %g is not a finite number",
                      ag__env_who(fn, copy).s, i, (double)action[i]);
  return AG_OK;
}

ag_status ag__env_reset_checked(ag_env *env, uint64_t seed, const char *fn, int copy) {
  ag_status st = env->ops.reset(env->state, seed, env->scratch);
  if (st != AG_OK) {
    env->phase = AG__ENV_NEEDS_RESET;
    return ag__fail(st, "%s: the reset function of environment \"%s\" failed with %s",
                    ag__env_who(fn, copy).s, env->id, ag_status_name(st));
  }
  env->phase = AG__ENV_RUNNING;
  env->steps = 0;
  env->ended_terminated = env->ended_truncated = 0;
  return AG_OK;
}

/* Checks that env may step now. */
ag_status ag__env_check_phase(const ag_env *env, const char *fn, int copy) {
  if (env->phase == AG__ENV_NEEDS_RESET)
    return ag__fail(AG_ERR_STATE, "%s: the environment \"%s\" has not been reset; call reset first",
                    ag__env_who(fn, copy).s, env->id);
  if (env->phase == AG__ENV_ENDED)
    return ag__fail(AG_ERR_STATE,
                    "%s: the episode of \"%s\" ended (%s) at step %lld; call reset before "
                    "stepping again",
                    ag__env_who(fn, copy).s, env->id,
                    env->ended_terminated && env->ended_truncated ? "terminated and truncated"
                    : env->ended_terminated                       ? "terminated"
                                                                  : "truncated",
                    (long long)env->steps);
  return AG_OK;
}

ag_status ag__env_step_checked(ag_env *env, const float *action, float *reward, int *terminated,
                               int *truncated, const char *fn, int copy) {
  float r = 0.0f;
  int term = 0;
  ag_status st = env->ops.step(env->state, action, env->scratch, &r, &term);
  if (st != AG_OK)
    return ag__fail(st, "%s: the step function of environment \"%s\" failed with %s", ag__env_who(fn, copy).s,
                    env->id, ag_status_name(st));
  env->steps++;
  term = term != 0;
  int trunc = env->spec.max_episode_steps > 0 && env->steps >= env->spec.max_episode_steps;
  if (term || trunc) {
    env->phase = AG__ENV_ENDED;
    env->ended_terminated = term;
    env->ended_truncated = trunc;
  }
  *reward = r;
  *terminated = term;
  *truncated = trunc;
  return AG_OK;
}

ag_status ag_env_reset(ag_env *env, uint64_t seed, float *obs) {
  static const char fn[] = "ag_env_reset";
  if (!env) return ag__fail(AG_ERR_INVALID_ARG, "%s: env is NULL", fn);
  if (!obs) return ag__fail(AG_ERR_INVALID_ARG, "%s: obs is NULL", fn);
  ag_status st = ag__env_reset_checked(env, seed, fn, -1);
  if (st != AG_OK) return st;
  memcpy(obs, env->scratch, (size_t)env->spec.obs_dim * sizeof *obs);
  return AG_OK;
}

ag_status ag_env_step(ag_env *env, const float *action, float *obs, float *reward, int *terminated,
                      int *truncated) {
  static const char fn[] = "ag_env_step";
  if (!env) return ag__fail(AG_ERR_INVALID_ARG, "%s: env is NULL", fn);
  if (!action) return ag__fail(AG_ERR_INVALID_ARG, "%s: action is NULL", fn);
  if (!obs) return ag__fail(AG_ERR_INVALID_ARG, "%s: obs is NULL", fn);
  if (!reward) return ag__fail(AG_ERR_INVALID_ARG, "%s: reward is NULL", fn);
  if (!terminated) return ag__fail(AG_ERR_INVALID_ARG, "%s: terminated is NULL", fn);
  if (!truncated) return ag__fail(AG_ERR_INVALID_ARG, "%s: truncated is NULL", fn);
  ag_status st = ag__env_check_phase(env, fn, -1);
  if (st == AG_OK) st = ag__env_check_action(&env->spec, action, fn, -1);
  if (st == AG_OK) st = ag__env_step_checked(env, action, reward, terminated, truncated, fn, -1);
  if (st == AG_OK) memcpy(obs, env->scratch, (size_t)env->spec.obs_dim * sizeof *obs);
  return st;
}
