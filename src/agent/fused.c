/* fused.c — what the agents' fused updates (the DQN's, SAC's and TD3's)
 * share: the description of their batch, and the index draws and n-step
 * walks in front of the call. */
#include <string.h>

#include "agent/agent_internal.h"
#include "nn/nn_internal.h"
#include "replay/replay_internal.h"

ag__fused_batch ag__agent_batch(ag_replay *r, ag_rng *rng, int64_t B) {
  ag__fused_batch b;
  memset(&b, 0, sizeof b);
  b.table = ag_replay_buffer(r);
  b.size = ag_replay_size_tensor(r);
  b.rng = rng;
  b.B = B;
  ag_replay_field(r, "obs", &b.obs_row, NULL);
  ag_replay_field(r, "action", &b.act_row, NULL);
  ag_replay_field(r, "reward", &b.rew_row, NULL);
  ag_replay_field(r, "next_obs", &b.next_row, NULL);
  ag_replay_field(r, "terminated", &b.done_row, NULL);
  return b;
}

ag_status ag__agent_batch_draw(ag__fused_batch *b, ag_replay *r, int n_step, float gamma, int64_t n_envs,
                               const char *fn) {
  if (n_step <= 1) return ag_replay_can_sample(r, b->B);
  ag_status s = ag__replay_sample_idx(r, b->rng, b->B, fn, &b->idx);
  return s ? s
           : ag_replay_nstep(r, b->idx, n_step, gamma, n_envs, "reward", "terminated", "truncated", &b->ret,
                             &b->disc, &b->last);
}
