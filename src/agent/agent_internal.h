/* agent_internal.h — the agent layer's hooks for tests. */
#ifndef AGRL_AGENT_AGENT_INTERNAL_H
#define AGRL_AGENT_AGENT_INTERNAL_H

#include "agrl/agent.h"
#include "agrl/dist.h"
#include "nn/nn_internal.h"

/* The DQN (dqn.c; saved and loaded by dqn_file.c, driven by learn.c). */
struct ag_dqn {
  ag_ctx *ctx;
  ag_dqn_config cfg;
  int64_t obs_dim, n_actions, total_steps;
  ag_mlp *q, *target;
  ag_optim *opt;
  ag_replay *replay;
  ag_rng *rng;
  ag_capture *update, *chain; /* one update; AG__DQN_CHAIN of them */
  ag_tensor *loss;            /* the loss of the update being recorded, then of the last replayed */
  ag_tensor *loss_of[2];      /* the last update's loss in each recording (its workspace) */
  int64_t updates;
  uint64_t host_rng; /* epsilon-greedy draws */
  ag_tensor *obs_in; /* acting input [obs_dim, n] */
  int obs_in_n;
  int32_t *act_scratch; /* per copy: 1 when its action was drawn at random, then the action */
  int scratch_n;
  ag__snapshot snap;         /* what ag_dqn_train changes, kept while it runs (to undo a failed read) */
  int broken;                /* a device error left the learner half updated */
  int64_t updates_at_target; /* updates when the target was last refreshed */
  /* data-parallel (ag_dqn_create_dist): this rank's shard and group */
  ag_dist *dist;
  ag_shard *shard;
  int64_t batch; /* transitions sampled by this rank per update */
  ag_tensor **grads;
  int n_grads;
  int fused;       /* the update's loss and gradient as AG__K_QGRAD */
  ag_per *per;     /* cfg.per: the table's prioritized sampler (the table owns it) */
  ag_tensor *beta; /* cfg.per: [1, 1] f32, the beta the recorded update draws with */
  int *zeros;      /* truncated flags of 0 for ag_dqn_store, zeros_n of them */
  int zeros_n;
  /* the caller's record of a run in progress, saved with the DQN (ag_dqn_set_run_state) */
  void *run_state;
  size_t run_state_n;
};

/* The checks of ag_dqn_create on a configuration; `fn` names the call. */
ag_status ag__dqn_check_config(const ag_dqn_config *c, const char *fn);
/* ag_dqn_create's body, also for ag_dqn_load (g NULL: one GPU). */
ag_status ag__dqn_create(ag_ctx *ctx, ag_dist *g, int64_t obs_dim, int64_t n_actions, int64_t total_steps,
                         const ag_dqn_config *cfg, const char *fn, ag_dqn **out);
/* The tensors an update changes (parameters and gradients of the online
 * network, the sampling stream's counter, the optimizer's state): writes up
 * to max of them into out and returns how many there are. */
int ag__dqn_update_state(const ag_dqn *d, ag_tensor **out, int max);

/* The returns of the last (up to) AG__RECENT episodes, which the training
 * loops report the mean of (learn.c; ac.c). ag__recent_push adds one and
 * returns the mean of those kept. */
enum { AG__RECENT = 20 };
typedef struct ag__recent {
  double r[AG__RECENT];
  int n, next;
} ag__recent;
double ag__recent_push(ag__recent *w, double v);

/* The deterministic action tanh(first A outputs) of an actor on x (ac.c). */
ag_status ag__squashed_mean(ag_mlp *actor, ag_tensor *x, int64_t A, ag_tensor **act);

/* For tests: an actor-critic agent's device stream of updates, its log
 * alpha ([1, 1]) and its target networks (k = 0, 1: the critics'; 2: the
 * actor's, NULL for SAC). */
ag_rng *ag__ac_rng(const ag_ac *a);
ag_tensor *ag__ac_log_alpha(const ag_ac *a);
ag_mlp *ag__ac_target(const ag_ac *a, int k);

/* For tests: marks the DQN as a device error half way through its updates
 * would (no backend here fails between two queued kernels). */
void ag__dqn_set_broken(ag_dqn *d);

#endif /* AGRL_AGENT_AGENT_INTERNAL_H */
