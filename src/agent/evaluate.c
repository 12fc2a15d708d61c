/* evaluate.c — episodes of a network's deterministic policy: the greedy
 * action of a Q-network (ag_q_evaluate), or an actor's squashed mean in the
 * environment's bounds (ag_policy_evaluate). One loop plays both: episode k
 * starts from ag_env_derive_seed(seed, k), and the network runs on one
 * observation at a time, the workspace reset after each step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/ac.h"
#include "agent/agent_internal.h"

/* Writes the action the network takes at the observation in `in`. */
typedef ag_status (*act_fn)(ag_mlp *net, ag_tensor *in, const ag_env_spec *spec, float *action);

static ag_status greedy(ag_mlp *q, ag_tensor *in, const ag_env_spec *spec, float *action) {
  ag_tensor *qv, *a;
  int32_t act;
  (void)spec;
  ag_status s = ag_mlp_forward(q, in, &qv);
  if (!s) s = ag_argmax(qv, AG_AXIS_ROWS, AG_I32, &a);
  if (!s) s = ag_tensor_read(a, &act, sizeof act);
  if (!s) *action = (float)act;
  return s;
}

static ag_status squashed(ag_mlp *pol, ag_tensor *in, const ag_env_spec *spec, float *action) {
  ag_tensor *t;
  float y[64];
  const int64_t A = spec->act_dim;
  ag_status s = ag__squashed_mean(pol, in, A, &t);
  if (!s) s = ag_tensor_read(t, y, sizeof(float) * (size_t)A);
  for (int64_t i = 0; !s && i < A; i++) {
    float lo = spec->act_low[i], hi = spec->act_high[i], v = lo + (y[i] + 1.0f) * 0.5f * (hi - lo);
    action[i] = v < lo ? lo : (v > hi ? hi : v);
  }
  return s;
}

static ag_status play(ag_mlp *net, ag_env *env, int episodes, uint64_t seed, act_fn act, const char *fn,
                      double *mean, double *returns) {
  const ag_env_spec *spec = ag_env_get_spec(env);
  if (spec->obs_dim > 64) return ag__fail(AG_ERR_UNSUPPORTED, "%s: observations wider than 64", fn);
  ag_ctx *ctx = ag_tensor_ctx(ag_mlp_params(net)[0]);
  float obs[64], action[64];
  double *rets = returns ? ag__malloc((size_t)episodes * sizeof *rets) : NULL; /* returns: only on success */
  if (returns && !rets) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag_tensor *in = NULL;
  ag_status s = ag_tensor_create(ctx, spec->obs_dim, 1, AG_F32, NULL, &in);
  double total = 0;
  for (int e = 0; e < episodes && !s; e++) {
    double ret = 0;
    int term = 0, trunc = 0;
    s = ag_env_reset(env, ag_env_derive_seed(seed, (uint64_t)e), obs);
    while (!s && !term && !trunc) {
      float r;
      ag_no_grad_begin(ctx);
      s = ag_tensor_write(in, obs, (size_t)spec->obs_dim * sizeof(float));
      if (!s) s = act(net, in, spec, action);
      ag_no_grad_end(ctx);
      ag_ctx_reset(ctx);
      if (!s) s = ag_env_step(env, action, obs, &r, &term, &trunc);
      if (!s) ret += r;
    }
    if (rets) rets[e] = ret;
    total += ret;
  }
  ag_tensor_free(in);
  if (!s) {
    if (returns) memcpy(returns, rets, (size_t)episodes * sizeof *rets);
    *mean = total / episodes;
  }
  free(rets);
  return s;
}

ag_status ag_q_evaluate(ag_mlp *q, ag_env *env, int episodes, uint64_t seed, double *mean, double *returns) {
  static const char fn[] = "ag_q_evaluate";
  if (!q || !env || !mean || episodes < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: q, env and mean must be given, episodes >= 1", fn);
  const ag_env_spec *spec = ag_env_get_spec(env);
  if (spec->obs_dim != ag_mlp_in(q) || spec->n_actions != ag_mlp_out(q))
    return ag__fail(
        AG_ERR_SHAPE,
        "%s: the environment has %d observations and %d actions, the network %lld inputs and %lld outputs",
        fn, spec->obs_dim, spec->n_actions, (long long)ag_mlp_in(q), (long long)ag_mlp_out(q));
  return play(q, env, episodes, seed, greedy, fn, mean, returns);
}

ag_status ag_policy_evaluate(ag_mlp *pol, ag_env *env, int episodes, uint64_t seed, double *mean,
                             double *returns) {
  static const char fn[] = "ag_policy_evaluate";
  if (!pol || !env || !mean || episodes < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: policy, env and mean must be given, episodes >= 1", fn);
  const ag_env_spec *spec = ag_env_get_spec(env);
  if (spec->n_actions > 0) return ag_q_evaluate(pol, env, episodes, seed, mean, returns);
  const int64_t A = spec->act_dim, out = ag_mlp_out(pol);
  if (spec->obs_dim != ag_mlp_in(pol) || (out != A && out != 2 * A))
    return ag__fail(AG_ERR_SHAPE,
                    "%s: the environment has %d observations and %d actions; the network %lld inputs and "
                    "%lld outputs (an actor has act_dim or 2 act_dim)",
                    fn, spec->obs_dim, spec->act_dim, (long long)ag_mlp_in(pol), (long long)out);
  if (!spec->act_low || !spec->act_high || A > 64)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: %s has no action bounds, or more than 64 actions", fn, spec->id);
  for (int64_t i = 0; i < A; i++)
    if (!isfinite(spec->act_low[i]) || !isfinite(spec->act_high[i]) ||
        !(spec->act_low[i] < spec->act_high[i]))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: %s's action bounds are not finite", fn, spec->id);
  return play(pol, env, episodes, seed, squashed, fn, mean, returns);
}
