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

/* The defaults are in the comments. ag_dqn_create refuses (AG_ERR_INVALID_ARG)
 * n_hidden outside 0..AG_DQN_MAX_HIDDEN, a hidden size < 1, lr outside
 * (0, 1e6), gamma outside [0, 1], batch_size < 1, buffer_size < batch_size,
 * learning_starts < 0, train_freq < 1, gradient_steps < 0,
 * target_update_interval < 1, tau outside (0, 1], exploration_fraction,
 * eps_start or eps_end outside [0, 1], and max_grad_norm < 0. */
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
 * environment steps (for the epsilon schedule). It owns its two networks,
 * Adam and its replay table of cfg->buffer_size transitions (fields obs
 * [obs_dim], action [1] i32, reward [1], next_obs [obs_dim], terminated [1]
 * i32; f32 storage; sampling from batch_size on). Free it before ctx.
 * Errors: AG_ERR_INVALID_ARG: ctx, cfg or out NULL, obs_dim < 1,
 * n_actions < 2, total_steps < 1, a cfg field outside its range (see
 * ag_dqn_config; the message names it); AG_ERR_STATE while a step is
 * recorded; AG_ERR_OUT_OF_MEMORY (the host, or the networks or the table
 * do not fit the device); AG_ERR_DEVICE. */
AG_API ag_status ag_dqn_create(ag_ctx *ctx, int64_t obs_dim, int64_t n_actions, int64_t total_steps,
                               const ag_dqn_config *cfg, ag_dqn **out);
/* Frees the DQN and all it owns. NULL is accepted. */
AG_API void ag_dqn_free(ag_dqn *d);

/* Epsilon at environment step `step`. */
AG_API float ag_dqn_epsilon(const ag_dqn *d, int64_t step);

/* Actions for n observations (obs: n * obs_dim floats, one observation
 * after the other; actions: n values in 0..n_actions-1): greedy, or
 * epsilon-greedy at `step` when explore is set. When the network runs, the
 * call ends with ag_ctx_reset: temporaries made before it become invalid.
 * Errors: AG_ERR_INVALID_ARG: d, obs or actions NULL, n < 1; AG_ERR_STATE:
 * a step is being recorded, or the DQN is broken (see ag_dqn_train);
 * AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. On error `actions` is not written
 * and the exploration stream has not moved. */
AG_API ag_status ag_dqn_act(ag_dqn *d, const float *obs, int n, int64_t step, int explore, int32_t *actions);

/* Stores n transitions: obs and next_obs n * obs_dim floats (next_obs: the
 * true last observation of an episode that ended, see ag_vec_env_step's
 * final_obs), actions, rewards and terminated n values each; n = 0 stores
 * nothing. All or nothing, as ag_replay_add (on a DQN of a group,
 * ag_shard_add_local). Errors: AG_ERR_INVALID_ARG: d NULL, an array NULL
 * for n > 0, n < 0; AG_ERR_OUT_OF_RANGE: an action outside 0..n_actions-1,
 * a terminated flag other than 0 or 1, n > buffer_size; AG_ERR_STATE: the
 * DQN is broken; the other errors of ag_replay_add (ag_shard_add_local). */
AG_API ag_status ag_dqn_store(ag_dqn *d, const float *obs, const int32_t *actions, const float *rewards,
                              const float *next_obs, const int *terminated, int n);

/* Runs n recorded updates: a recording of 8 updates (on the GPU one graph)
 * while 8 or more are left, then a recording of one (each made at its first
 * use). With last_loss, waits and reports the loss of the last update.
 * n = 0 runs nothing (last_loss untouched).
 * Errors: AG_ERR_INVALID_ARG: d NULL, n < 0; AG_ERR_STATE: a step is being
 * recorded, fewer than batch_size transitions are stored when an update is
 * recorded, or the DQN is broken; AG_ERR_INVALIDATED: an object the update
 * reads was freed (e.g. the table's buffer); AG_ERR_OUT_OF_MEMORY;
 * AG_ERR_DEVICE.
 * All or nothing: the recordings are made (or made again) before any update
 * runs, and with last_loss what the updates change (parameters, gradients,
 * Adam's moments and step count, the sampling stream) is copied on the
 * device first, so a failed read-back puts it back: on error the DQN is as
 * before the call and ag_dqn_updates has not moved. Only a device error
 * while the updates run without last_loss (or while the copy is put back)
 * cannot be undone: the call then says so, and every later call on the DQN
 * returns AG_ERR_STATE. */
AG_API ag_status ag_dqn_train(ag_dqn *d, int64_t n, float *last_loss);

/* The loss of the current networks on a gathered batch [ag_replay_rows, B]
 * f32 of the DQN's table (ag_replay_sample, ag_replay_gather), with
 * gradients: what one update minimises. *loss: a [1, 1] temporary.
 * Errors: AG_ERR_INVALID_ARG: d, batch or loss NULL, batch of another
 * context; AG_ERR_FREED: batch released by ag_ctx_reset; AG_ERR_SHAPE:
 * batch has another number of rows, or is not f32; AG_ERR_OUT_OF_MEMORY.
 * On error the temporaries made so far stay in the workspace. */
AG_API ag_status ag_dqn_loss(ag_dqn *d, ag_tensor *batch, ag_tensor **loss);

/* Target network update: a copy (tau = 1) or Polyak averaging (queued;
 * recordable). Errors: AG_ERR_INVALID_ARG: d NULL; those of ag_mlp_copy
 * and ag_mlp_polyak. */
AG_API ag_status ag_dqn_update_target(ag_dqn *d);

/* The DQN's own objects (freed with it; NULL for d NULL). */
AG_API ag_mlp *ag_dqn_q(const ag_dqn *d);         /* the online network */
AG_API ag_mlp *ag_dqn_target(const ag_dqn *d);    /* the target network */
AG_API ag_replay *ag_dqn_replay(const ag_dqn *d); /* in a group: this rank's shard's table */
AG_API int64_t ag_dqn_updates(const ag_dqn *d);
/* 1 when the update computes its loss and gradient in one fused call
 * (a few kernels on the GPU instead of ~30): cfg.fused is set, the network
 * has at most 8 hidden layers and 64 actions, and the context's backend
 * takes the fused kernel. Decided again whenever the update is recorded
 * (after a device switch, on the new device); otherwise the update runs as
 * composed ops. */
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
 * (seed, rank). The group must outlive the DQN.
 * Errors: those of ag_dqn_create; AG_ERR_INVALID_ARG: g NULL or on another
 * context, batch_size not a multiple of G; those of ag_dist_broadcast and
 * ag_shard_create. */
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

/* Trains on a vector environment for total_steps environment steps (in a
 * group: over the group); resets env first. env's obs_dim and n_actions
 * must be the DQN's. cb may be NULL; a nonzero return stops the run, which
 * then returns AG_OK. Resets the context's workspace as ag_dqn_act does.
 * Each step's calls (act, the environments' step, store, train) are all or
 * nothing, but the run is not: on error the steps taken so far stay taken
 * (the environments have moved, transitions are stored, updates applied),
 * and the status is that of the call that failed. Errors: AG_ERR_INVALID_ARG:
 * d or env NULL; AG_ERR_SHAPE: env's spec differs (a continuous env);
 * AG_ERR_OUT_OF_MEMORY; those of ag_vec_env_reset, ag_dqn_act,
 * ag_vec_env_step, ag_dqn_store, ag_dqn_train, ag_dqn_update_target (and in
 * a group of the collectives). */
AG_API ag_status ag_dqn_learn(ag_dqn *d, ag_vec_env *env, int64_t total_steps, ag_train_callback cb,
                              void *user);

/* Mean return of `episodes` greedy episodes of a Q-network on an environment
 * (episode k seeded with ag_env_derive_seed(seed, k)); returns may be NULL or
 * hold `episodes` values (each episode's return). Resets q's context's
 * workspace at every step. Errors: AG_ERR_INVALID_ARG: q, env or mean NULL,
 * episodes < 1; AG_ERR_SHAPE: env's obs_dim or n_actions are not q's inputs
 * and outputs (a continuous env); AG_ERR_UNSUPPORTED: obs_dim > 64;
 * AG_ERR_STATE while a step is recorded; AG_ERR_OUT_OF_MEMORY; those of
 * ag_env_reset and ag_env_step. On error mean and returns are not written,
 * and env stays where the failing episode left it. */
AG_API ag_status ag_q_evaluate(ag_mlp *q, ag_env *env, int episodes, uint64_t seed, double *mean,
                               double *returns);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_AGENT_H */
