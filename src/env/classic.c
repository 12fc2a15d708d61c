/* classic.c — the built-in classic-control environments behind ag_env: one
 * set of ag_env_ops shared by all of them (a double state, a start state from
 * the splitmix64 generator, the task's step, which sees the handle's step
 * count) or, for a task that keeps a state of its own (MinAtar's games), its
 * functions; the access to a handle's task and state (ag__env_classic,
 * ag__env_own_state, for the state images of env_state.c), and the test hooks ag__env_set_state and
 * ag__env_get_state. Their names are listed in registry.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "env/env_internal.h"

typedef struct classic_state {
  const ag__classic *task;
  const ag_env *handle; /* the handle that owns this state, for its step count */
  double s[AG__MAX_STATE];
  void *own; /* the state of a task that keeps its own (task->own), else NULL */
} classic_state;

static ag_status classic_reset(void *state, uint64_t seed, float *obs) {
  classic_state *cs = state;
  if (cs->task->own) {
    cs->task->own->reset(cs->task, cs->own, seed, obs);
    return AG_OK;
  }
  ag__rng r = ag__rng_seeded(seed);
  cs->task->sample(cs->s, &r);
  cs->task->observe(cs->s, obs);
  return AG_OK;
}

static ag_status classic_step(void *state, const float *action, float *obs, float *reward, int *terminated) {
  classic_state *cs = state;
  double r = 0.0;
  if (cs->task->own) {
    *terminated = cs->task->own->step(cs->task, cs->own, action, obs, &r);
    *reward = (float)r;
    return AG_OK;
  }
  *terminated = cs->task->advance(cs->s, action, cs->handle->steps, &r);
  *reward = (float)r;
  cs->task->observe(cs->s, obs);
  return AG_OK;
}

static void classic_free(void *state) {
  classic_state *cs = state;
  if (cs) free(cs->own);
  free(cs);
}

static const ag_env_ops classic_ops = {classic_reset, classic_step, classic_free};

ag_status ag__classic_create(const ag__classic *c, const char *fn, ag_env **out) {
  classic_state *cs = ag__calloc(1, sizeof *cs);
  void *own = c->own ? ag__calloc(1, c->own->size) : NULL;
  if (!cs || (c->own && !own)) {
    free(cs);
    free(own);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory for environment \"%s\"", fn, c->spec.id);
  }
  cs->task = c;
  cs->own = own;
  ag_status st = ag__env_new(&classic_ops, cs, &c->spec, fn, out);
  if (st != AG_OK) {
    classic_free(cs);
    return st;
  }
  cs->handle = *out;
  /* a state of its own is a valid one before the first reset too (its image
   * round-trips): the start of seed 0, which the phase keeps from stepping */
  if (c->own) c->own->reset(c, own, 0, (*out)->scratch);
  return AG_OK;
}

const ag__classic *ag__env_classic(const ag_env *env, double **s) {
  if (env->ops.reset != classic_reset) return NULL;
  classic_state *cs = env->state;
  *s = cs->s;
  return cs->task;
}

void *ag__env_own_state(const ag_env *env) {
  if (env->ops.reset != classic_reset) return NULL;
  return ((classic_state *)env->state)->own;
}

ag_status ag__env_set_state(ag_env *env, const double *s, float *obs) {
  static const char fn[] = "ag__env_set_state";
  if (!env) return ag__fail(AG_ERR_INVALID_ARG, "%s: env is NULL", fn);
  if (!s) return ag__fail(AG_ERR_INVALID_ARG, "%s: s is NULL", fn);
  if (!obs) return ag__fail(AG_ERR_INVALID_ARG, "%s: obs is NULL", fn);
  if (env->ops.reset != classic_reset)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: \"%s\" is a user environment; only built-in ones can be set", fn,
                    env->id);
  classic_state *cs = env->state;
  if (cs->task->own)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: \"%s\" keeps a state of its own; use ag_env_set_state", fn,
                    env->id);
  for (int i = 0; i < cs->task->state_dim; i++)
    if (!isfinite(s[i])) return ag__fail(AG_ERR_INVALID_ARG, "%s: s[%d] = %g is not finite", fn, i, s[i]);
  memcpy(cs->s, s, (size_t)cs->task->state_dim * sizeof *s);
  env->phase = AG__ENV_RUNNING;
  env->steps = 0;
  env->ended_terminated = env->ended_truncated = 0;
  cs->task->observe(cs->s, obs);
  return AG_OK;
}

ag_status ag__env_get_state(const ag_env *env, double *s, int *dim) {
  static const char fn[] = "ag__env_get_state";
  if (!env) return ag__fail(AG_ERR_INVALID_ARG, "%s: env is NULL", fn);
  if (!s) return ag__fail(AG_ERR_INVALID_ARG, "%s: s is NULL", fn);
  if (!dim) return ag__fail(AG_ERR_INVALID_ARG, "%s: dim is NULL", fn);
  if (env->ops.reset != classic_reset)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: \"%s\" is a user environment; only built-in ones can be read",
                    fn, env->id);
  const classic_state *cs = env->state;
  if (cs->task->own)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: \"%s\" keeps a state of its own; use ag_env_get_state", fn,
                    env->id);
  memcpy(s, cs->s, (size_t)cs->task->state_dim * sizeof *s);
  *dim = cs->task->state_dim;
  return AG_OK;
}
