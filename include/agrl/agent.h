/* agrl/agent.h — DQN: epsilon-greedy acting, a replay table on the device,
 * and an update that is one recorded step (sample, gather, target, Huber or
 * MSE loss, backward, Adam), replayed gradient_steps times per training
 * phase with no host round-trip.
 *
 * Conventions follow Stable-Baselines3's DQN: train_freq and
 * target_update_interval are counted in environment steps (over all copies
 * of a vector environment), epsilon decays linearly over
 * exploration_fraction of the run, training starts after learning_starts
 * steps, and the target bootstraps on truncation but not on termination.
 */
#ifndef AGRL_AGENT_H
#define AGRL_AGENT_H

#include <stdint.h>

#include "agrl/env.h"
#include "agrl/nn.h"
#include "agrl/replay.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AG_DQN_MAX_HIDDEN 8

typedef struct ag_dqn_config {
  int n_hidden;                      /* 2 */
  int64_t hidden[AG_DQN_MAX_HIDDEN]; /* 256, 256 (ReLU) */
  float lr;                          /* 7e-4 (Adam) */
  float gamma;                       /* 0.99 */
  int64_t batch_size;                /* 128 */
  int64_t buffer_size;               /* 100000 */
  int64_t learning_starts;           /* 1000 */
  int64_t train_freq;                /* 256 environment steps */
  int64_t gradient_steps;            /* 128 per training phase */
  int64_t target_update_interval;    /* 10 environment steps */
  float tau;                         /* 1: hard copy; < 1: Polyak */
  float exploration_fraction;        /* 0.16 */
  float eps_start, eps_end;          /* 1.0, 0.01 */
  float max_grad_norm;               /* 10 (0: none) */
  int double_dqn;                    /* 1 */
  int huber;                         /* 1 (0: MSE) */
  uint64_t seed;                     /* 0 */
  int fused;                         /* 1: the loss and its gradient as one fused
                                        call where the network allows it (see
                                        ag_dqn_fused); 0: composed ops */
} ag_dqn_config;

/* The defaults above: Stable-Baselines3 zoo's CartPole-v1 DQN (256-256
 * network, train_freq 256, 128 gradient steps, target copy every 10
 * environment steps, 16% of the run exploring, gradients clipped at 10),
 * with the changes that made it solve CartPole-v1 (mean return of 20
 * episodes >= 475) within 100,000 steps for seeds 0-4 on the CPU (and 3 of
 * seeds 5-9): Double DQN, Adam at 7e-4, batches of 128, final epsilon 0.01.
 * The zoo settings alone solved 0 to 3 of seeds 0-4. */
AG_API ag_dqn_config ag_dqn_defaults(void);

typedef struct ag_dqn ag_dqn;

/* A DQN for obs_dim inputs and n_actions actions, planned for total_steps
 * environment steps (for the epsilon schedule). */
AG_API ag_status ag_dqn_create(ag_ctx *ctx, int64_t obs_dim, int64_t n_actions, int64_t total_steps,
                               const ag_dqn_config *cfg, ag_dqn **out);
AG_API void ag_dqn_free(ag_dqn *d);

/* Epsilon at environment step `step`. */
AG_API float ag_dqn_epsilon(const ag_dqn *d, int64_t step);

/* Actions for n observations (n x obs_dim floats, one observation after the
 * other): greedy, or epsilon-greedy at `step` when explore is set. On error
 * `actions` is not written and the exploration stream has not moved. */
AG_API ag_status ag_dqn_act(ag_dqn *d, const float *obs, int n, int64_t step, int explore, int32_t *actions);

/* Stores n transitions (next_obs: the true last observation of an episode
 * that ended, see ag_vec_env_step's final_obs). All or nothing, as
 * ag_replay_add. */
AG_API ag_status ag_dqn_store(ag_dqn *d, const float *obs, const int32_t *actions, const float *rewards,
                              const float *next_obs, const int *terminated, int n);

/* Runs n recorded updates: a recording of 8 updates (on the GPU one graph)
 * while 8 or more are left, then a recording of one. With last_loss, waits
 * and reports the loss of the last update. n = 0 runs nothing (last_loss
 * untouched).
 * All or nothing: the recordings are made (or made again) before any update
 * runs, and with last_loss what the updates change (parameters, gradients,
 * Adam's moments and step count, the sampling stream) is copied on the
 * device first, so a failed read-back puts it back: on error the DQN is as
 * before the call and ag_dqn_updates has not moved. Only a device error
 * while the updates run without last_loss (or while the copy is put back)
 * cannot be undone: the call then says so, and every later call on the DQN
 * returns AG_ERR_STATE. */
AG_API ag_status ag_dqn_train(ag_dqn *d, int64_t n, float *last_loss);

/* The loss of the current networks on a gathered batch (the table's rows
 * x B), with gradients: what one update minimises. */
AG_API ag_status ag_dqn_loss(ag_dqn *d, ag_tensor *batch, ag_tensor **loss);

/* Target network update: a copy (tau = 1) or Polyak averaging. */
AG_API ag_status ag_dqn_update_target(ag_dqn *d);

AG_API ag_mlp *ag_dqn_q(const ag_dqn *d);      /* the online network */
AG_API ag_mlp *ag_dqn_target(const ag_dqn *d); /* the target network */
AG_API ag_replay *ag_dqn_replay(const ag_dqn *d);
AG_API int64_t ag_dqn_updates(const ag_dqn *d);
/* 1 when the update computes its loss and gradient in one fused call
 * (a few kernels on the GPU instead of ~30): cfg.fused is set and the
 * network has at most 64 actions. */
AG_API int ag_dqn_fused(const ag_dqn *d);

/* ---- several GPUs (agrl/dist.h) ---- */
typedef struct ag_dist ag_dist;
/* ---- data-parallel DQN ----
 * ag_dqn_create_dist makes one rank's learner of a G-GPU DQN: `cfg` is the
 * configuration of the whole run as for one GPU. Each rank keeps a shard of
 * cfg->buffer_size transitions (rounded up to a multiple of G) filled by
 * its own environments, samples batch_size / G of them per update (batch
 * size must be a multiple of G), and averages gradients over the group with
 * an all-reduce inside the recorded update, so that every rank takes the
 * same Adam step on the gradient of the whole batch. Parameters start equal
 * (rank 0's are broadcast). ag_dqn_learn then counts environment steps over
 * the group (each rank's steps times G) for train_freq, learning_starts,
 * target updates and epsilon, so a run of total_steps takes total_steps / G
 * steps on each rank. Each rank seeds its exploration and sampling with
 * (seed, rank). The group must outlive the DQN. */
AG_API ag_status ag_dqn_create_dist(ag_ctx *ctx, ag_dist *g, int64_t obs_dim, int64_t n_actions,
                                    int64_t total_steps, const ag_dqn_config *cfg, ag_dqn **out);
AG_API ag_dist *ag_dqn_dist(const ag_dqn *d); /* NULL for a one-GPU DQN */

/* ---- the training loop ---- */

typedef enum ag_train_event_kind {
  AG_TRAIN_EPISODE = 0, /* an episode ended */
  AG_TRAIN_PHASE = 1    /* a training phase ended (loss known) */
} ag_train_event_kind;

typedef struct ag_train_event {
  ag_train_event_kind kind;
  int64_t step;           /* environment steps so far */
  int64_t episodes;       /* episodes ended so far */
  int64_t updates;        /* gradient steps so far */
  double episode_return;  /* EPISODE */
  int64_t episode_length; /* EPISODE */
  int truncated;          /* EPISODE: ended by the time limit */
  double mean_return; /* over the last (up to) 20 episodes (in a group: 20 / G of each rank's, as of the last
                         training boundary) */
  float loss;         /* PHASE: the last update's loss */
  float epsilon;
} ag_train_event;

/* Called for every event; return nonzero to stop the run. */
typedef int (*ag_train_callback)(const ag_train_event *ev, void *user);

/* Trains on a vector environment for total_steps environment steps.
 * Each step's calls (act, the environments' step, store, train) are all or
 * nothing, but the run is not: on error the steps taken so far stay taken
 * (the environments have moved, transitions are stored, updates applied),
 * and the status is that of the call that failed. */
AG_API ag_status ag_dqn_learn(ag_dqn *d, ag_vec_env *env, int64_t total_steps, ag_train_callback cb,
                              void *user);

/* Mean return of `episodes` greedy episodes of a Q-network on an environment
 * (episode k seeded with ag_env_derive_seed(seed, k)); returns may be NULL or
 * hold `episodes` values. */
AG_API ag_status ag_q_evaluate(ag_mlp *q, ag_env *env, int episodes, uint64_t seed, double *mean,
                               double *returns);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_AGENT_H */
