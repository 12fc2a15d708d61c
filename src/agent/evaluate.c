/* evaluate.c — episodes of a network's deterministic policy, whatever the
 * kind of agent: the action comes from the kind's policy_action
 * (ag__agent_ops; the greedy action of a Q-network in dqn_ops.c, an
 * actor's squashed mean in ac_ops.c). Episode k starts from
 * ag_env_derive_seed(seed, k), and the network runs on one observation at
 * a time, the workspace reset after each step.
 */
#include <stdlib.h>
#include <string.h>

#include "agent/agent_internal.h"

ag_status ag__play(ag_mlp *net, ag_env *env, int episodes, uint64_t seed,
                   ag_status (*act)(ag_mlp *net, ag_tensor *in, const ag_env_spec *spec, float *action),
                   const char *fn, double *mean, double *returns) {
  const ag_env_spec *spec = ag_env_get_spec(env);
  if (spec->act_dim > 64) return ag__fail(AG_ERR_UNSUPPORTED, "%s: actions wider than 64", fn);
  ag_ctx *ctx = ag_tensor_ctx(ag_mlp_params(net)[0]);
  float action[64];
  float *obs = ag__malloc((size_t)spec->obs_dim * sizeof *obs); /* MinAtar's are 400 to 1000 wide */
  double *rets = returns ? ag__malloc((size_t)episodes * sizeof *rets) : NULL; /* returns: only on success */
  if (!obs || (returns && !rets)) {
    free(obs);
    free(rets);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
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
  free(obs);
  return s;
}
