/* agrl/ac.h — actor-critic agents for continuous actions: SAC (Haarnoja et
 * al. 2018, twin Q, a tanh-squashed Gaussian policy and an automatically
 * tuned entropy temperature) and TD3 (Fujimoto et al. 2018, twin Q, target
 * policy smoothing, delayed actor and target updates).
 *
 * The replay table lives on the device and each update is one recorded step:
 * B transitions drawn on the device, the target (no gradient), the twin
 * critics' loss, backward and Adam, then, every policy_delay-th update, the
 * actor's loss through the critics, its Adam step, SAC's temperature step
 * and the target networks' Polyak averaging. The Gaussian draws of the
 * policy and of TD3's smoothing noise come from device streams (ag_randn):
 * the same numbers on every backend. The CPU runs the same calls.
 *
 * Actions. The networks work in [-1, 1]^act_dim: act returns actions in the
 * environment's bounds (low + (y + 1) (high - low) / 2 for the network's
 * y in [-1, 1]) and store takes them in those bounds (mapped back, and
 * clipped to [-1, 1], before they enter the table). Conventions follow
 * Stable-Baselines3: train_freq counts environment steps over all copies,
 * the first learning_starts steps act uniformly at random, and the target
 * bootstraps on truncation but not on termination.
 */
#ifndef AGRL_AC_H
#define AGRL_AC_H

#include <stdint.h>

#include "agrl/agent.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ag_ac_algo { AG_AC_SAC = 0, AG_AC_TD3 = 1 } ag_ac_algo;

#define AG_AC_MAX_HIDDEN 8

/* Defaults (ag_ac_defaults) in the comments, SAC's then TD3's where they
 * differ. ag_ac_create refuses (AG_ERR_INVALID_ARG, the message naming the
 * field and its value, before anything is allocated) an algo other than the
 * two, n_hidden outside 1..AG_AC_MAX_HIDDEN, a hidden size outside
 * 1..2^31-1, a learning rate outside (0, 10], gamma outside [0, 1],
 * tau outside (0, 1], batch_size < 1, buffer_size < batch_size,
 * learning_starts < 0, train_freq < 1, gradient_steps < 0, policy_delay
 * outside 1..1000, alpha not in (0, 1e6), target_entropy not finite (NaN
 * is the default's "-act_dim"), autotune not 0 or 1, a noise scale outside
 * [0, 10], noise_rho outside [0, 1), n_step outside 1..64, n_envs outside
 * 1..2^20, fused not 0 or 1 (NaN is outside every range but
 * target_entropy's). There is no prioritized replay here. */
typedef struct ag_ac_config {
  ag_ac_algo algo;
  int n_hidden;                     /* 2 */
  int64_t hidden[AG_AC_MAX_HIDDEN]; /* 256, 256 (ReLU), for the actor and both critics */
  float actor_lr;                   /* 1e-3 (Adam) */
  float critic_lr;                  /* 1e-3 (Adam, one optimizer over both critics) */
  float gamma;                      /* 0.99 */
  float tau;                        /* 0.005: Polyak averaging of the targets */
  int64_t batch_size;               /* 256 */
  int64_t buffer_size;              /* 1000000 */
  int64_t learning_starts;          /* 1000: uniform random actions before */
  int64_t train_freq;               /* 1 environment step */
  int64_t gradient_steps;           /* 1 per training phase */
  int policy_delay;                 /* 1, 2: the actor (and TD3's targets) every policy_delay-th update */
  /* SAC */
  float alpha;          /* 1: the temperature's start (or its fixed value without autotune) */
  int autotune;         /* 1: log alpha learnt (Adam at critic_lr) towards target_entropy */
  float target_entropy; /* NAN: -act_dim */
  /* TD3, as fractions of the half range of the actions */
  float expl_noise;   /* 0.1: the exploration noise's standard deviation */
  float target_noise; /* 0.2: the target smoothing noise's standard deviation */
  float noise_clip;   /* 0.5: the smoothing noise is clipped to +-noise_clip */
  /* Exploration noise correlated in time (both algos): the standard normals
   * of exploring actions follow, per copy and action, z_t = noise_rho
   * z_{t-1} + sqrt(1 - noise_rho^2) e_t (an AR(1), i.e. discretised
   * Ornstein-Uhlenbeck, process of unit variance; 0: independent draws).
   * Values near 1 hold a push for many steps, which sparse rewards such as
   * MountainCarContinuous-v0's need. Training updates keep independent draws. */
  float noise_rho; /* 0, in [0, 1) */
  /* n-step returns as in ag_dqn_config (1..64), over n_envs copies stored side by side */
  int n_step;     /* 1 */
  int64_t n_envs; /* 1 */
  uint64_t seed;  /* 0 */
  /* 1: each update is one fused call where the backend has it and it
   * pays (ag_ac_fused says where), the same update as the composed ops up
   * to the order of the sums;
   * 0: always the composed ops */
  int fused; /* 1 */
} ag_ac_config;

/* The defaults of `algo` (an unknown algo gets SAC's with that algo, which
 * ag_ac_create refuses). */
AG_API ag_ac_config ag_ac_defaults(ag_ac_algo algo);

typedef struct ag_ac ag_ac;

/* An agent for obs_dim observations and act_dim actions in [low, high]
 * (act_dim values each, finite, low < high), planned for total_steps
 * environment steps. It owns its networks (the actor: obs_dim -> hidden ->
 * 2 act_dim for SAC (means, then log standard deviations squashed to
 * [-5, 2]), act_dim for TD3; the critics: obs_dim + act_dim -> hidden -> 1;
 * target copies of the critics, and for TD3 of the actor), its optimizers
 * and a replay table of buffer_size transitions (obs [obs_dim], action
 * [act_dim] in [-1, 1], reward [1], next_obs [obs_dim], terminated [1] i32,
 * truncated [1] i32; f32 storage). Free it before ctx.
 * Errors: AG_ERR_INVALID_ARG: ctx, low, high, cfg or out NULL, obs_dim
 * outside 1..2^31-1, act_dim outside 1..64, total_steps < 1, a bound not
 * finite or low >= high, a cfg field outside its range (see ag_ac_config);
 * AG_ERR_STATE while a step is recorded; AG_ERR_OUT_OF_MEMORY;
 * AG_ERR_DEVICE. On error *out is not written and nothing stays
 * allocated. */
AG_API ag_status ag_ac_create(ag_ctx *ctx, int64_t obs_dim, int64_t act_dim, const float *low,
                              const float *high, int64_t total_steps, const ag_ac_config *cfg, ag_ac **out);
AG_API void ag_ac_free(ag_ac *a); /* NULL is accepted */

/* Actions for n observations (n * obs_dim floats) into actions (n * act_dim
 * floats, in the bounds): with explore, SAC samples its policy and TD3 adds
 * its exploration noise (clipped to the bounds); without, the deterministic
 * action (the squashed mean). The noise comes from the agent's acting
 * stream on the device; with noise_rho > 0 the agent keeps the last
 * exploring call's normals for its n copies and continues their process
 * (the first such call, and one for another n, starts it from independent
 * draws). Ends with ag_ctx_reset, as ag_dqn_act.
 * ag_ac_act_random: uniform actions in the bounds from the agent's host
 * stream (what the learning loop does for the first learning_starts steps;
 * it touches no device, and fails only with AG_ERR_INVALID_ARG for a NULL
 * or n < 1, and AG_ERR_STATE for a broken agent, writing nothing then).
 * ag_ac_act errors: AG_ERR_INVALID_ARG: a NULL argument, n < 1;
 * AG_ERR_STATE: a step is being recorded, or the agent is broken (see
 * ag_ac_train); AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. On error `actions`
 * is not written; the acting stream may have moved on (its draws are
 * queued before the read that failed). */
AG_API ag_status ag_ac_act(ag_ac *a, const float *obs, int n, int explore, float *actions);
AG_API ag_status ag_ac_act_random(ag_ac *a, int n, float *actions);

/* Stores n transitions (actions in the bounds; terminated and truncated 0 or
 * 1 each, truncated may be NULL: none). All or nothing as ag_replay_add.
 * Errors: AG_ERR_INVALID_ARG: a NULL, an array NULL for n > 0, n < 0;
 * AG_ERR_OUT_OF_RANGE: an action not finite, a flag not 0 or 1,
 * n > buffer_size; AG_ERR_STATE: the agent is broken; those of
 * ag_replay_add. */
AG_API ag_status ag_ac_store(ag_ac *a, const float *obs, const float *actions, const float *rewards,
                             const float *next_obs, const int *terminated, const int *truncated, int n);

/* Runs n updates (n = 0: none). Each is the recording of a critic update,
 * or of a critic and actor update when (ag_ac_updates + 1) is a multiple of
 * policy_delay; each recording is made at its first use. With losses
 * (2 floats), waits and writes the critics' loss (the sum of both critics'
 * mean squared errors) of the last update and the actor's loss of the last
 * actor update so far (NaN before the first).
 * Errors: AG_ERR_INVALID_ARG: a NULL, n < 0; AG_ERR_STATE: a step is being
 * recorded, fewer than batch_size transitions are stored, or the agent is
 * broken; AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. The recordings are made
 * before any update runs, so an error in making them changes nothing; a
 * device error while the updates run leaves the networks part updated:
 * the call says so, and every later call on the agent returns AG_ERR_STATE. */
AG_API ag_status ag_ac_train(ag_ac *a, int64_t n, float *losses);

/* The temperature alpha now (SAC; TD3: 0). Reads the device. Errors:
 * AG_ERR_INVALID_ARG: a or alpha NULL; AG_ERR_STATE while recording;
 * AG_ERR_DEVICE. */
AG_API ag_status ag_ac_alpha(ag_ac *a, float *alpha);

/* 1 when an update runs as one fused call (AG__K_ACGRAD on the device: the
 * index and normal draws, both critics' loss, gradient and Adam step, the
 * Polyak steps, and with the actor's turn its loss, gradient and step and
 * the temperature's, in about 8 kernels a layer pair instead of ~170
 * composed ops): cfg.fused is 1, the hidden layers number 1..8, the
 * context's backend takes the kernel (the CPU, CUDA) and, on the CPU, the
 * widest hidden layer has at least 32 units (narrower, the composed ops
 * were as fast). Decided again at every recording. 0 for a NULL. */
AG_API int ag_ac_fused(const ag_ac *a);

/* The agent's own objects (NULL for a NULL; targets: NULL where absent). */
AG_API ag_mlp *ag_ac_actor(const ag_ac *a);
AG_API ag_mlp *ag_ac_critic(const ag_ac *a, int k); /* k = 0, 1 */
AG_API ag_replay *ag_ac_replay(const ag_ac *a);
AG_API int64_t ag_ac_updates(const ag_ac *a);
AG_API const ag_ac_config *ag_ac_get_config(const ag_ac *a);
AG_API int64_t ag_ac_act_dim(const ag_ac *a);

/* The bounds the agent maps its actions to (act_dim values each) and the
 * environment steps it was planned for (NULL and 0 for a NULL). */
AG_API const float *ag_ac_low(const ag_ac *a);
AG_API const float *ag_ac_high(const ag_ac *a);
AG_API int64_t ag_ac_total_steps(const ag_ac *a);

/* ---- saving an agent, and checkpoints of a training run ----
 *
 * ag_ac_save writes everything the agent is to `path`: its configuration,
 * sizes, bounds and total_steps, the parameters of the actor, both critics
 * and their targets (and TD3's target actor), log alpha, every optimizer's
 * moments and step count, both device streams' seeds and counters (the
 * updates' and the acting noise's), the host stream of ag_ac_act_random,
 * the correlated noise's state (noise_rho), the update counts, the run
 * state (ag_ac_set_run_state) and its replay table with the table's file
 * image (agrl/replay.h's format). Values are streamed in parts of at most
 * AG_TRANSFER_PART_BYTES; the file is written beside `path`, flushed and
 * renamed over it, as ag_dqn_save's: a failure or a crash never leaves a
 * half file. The file is device-neutral.
 * ag_ac_load makes a NEW agent on ctx from such a file; it then acts and
 * trains as the saved one would have: the same draws, the same updates and
 * losses, bit for bit on the same device.
 *
 * Layout: an agrl container of kind "ac", version 2 (docs/container.md
 * gives its keys and sections): the configuration, sizes, bounds,
 * counters, the host stream's state, the device streams' seeds, the last
 * actor update's loss and the correlated noise's number of copies as keys;
 * every tensor (each network's parameters, log alpha, the streams'
 * counters, each optimizer's state and moments), the correlated noise's
 * values and the run state as sections in CRC-checked parts; then the
 * replay table's own container to the end of the file. Files of agrl 0.1.0
 * (AGRLACR1) still load.
 * The loader checks the header (CRC, the configuration, sizes and bounds
 * as ag_ac_create does, the counters, every section's name, dtype and
 * shape against the agent the configuration makes, the streams' seeds)
 * before it makes the agent, then every part's CRC, and the table's
 * fields, storage and capacity against the agent's; it refuses with
 * AG_ERR_IO naming the path and what is wrong (truncated, trailing bytes,
 * a CRC, a missing key or one of another type, a shape), and a newer
 * version with AG_ERR_UNSUPPORTED. Nothing is half-loaded: on any failure
 * what was made is freed and *out is not written.
 * ag_ac_save errors: AG_ERR_INVALID_ARG (a or path NULL, path empty);
 * AG_ERR_STATE (a step is being recorded, or the agent is broken);
 * AG_ERR_OUT_OF_MEMORY; AG_ERR_IO (the file cannot be created, written,
 * flushed or renamed); AG_ERR_DEVICE and the faults of the downloads. On
 * error the agent is as before and the file under path unchanged.
 * ag_ac_load errors: the refusals above; AG_ERR_INVALID_ARG (ctx, path or
 * out NULL); AG_ERR_STATE while a step is recorded; AG_ERR_IO (cannot be
 * opened or read); AG_ERR_OUT_OF_MEMORY and the errors of ag_ac_create.
 * Loading holds the agent's small table and the loaded one at once for a
 * moment. */
AG_API ag_status ag_ac_save(const ag_ac *a, const char *path);
AG_API ag_status ag_ac_load(ag_ctx *ctx, const char *path, ag_ac **out);

/* The caller's record of a run in progress, kept by the agent, saved and
 * loaded with it, as ag_dqn_set_run_state / ag_dqn_run_state (the same
 * errors and limits). */
AG_API ag_status ag_ac_set_run_state(ag_ac *a, const void *data, size_t n);
AG_API const void *ag_ac_run_state(const ag_ac *a, size_t *n);

/* ---- the training loop ----
 * Trains on a vector environment (continuous actions of the agent's sizes)
 * for total_steps environment steps: acts at random for the first
 * learning_starts steps, then by the policy with exploration; stores each
 * step; every train_freq steps (past learning_starts, with batch_size
 * transitions stored) runs gradient_steps updates. Episode events as
 * ag_dqn_learn's (epsilon 0); a PHASE event, with the losses read back,
 * at the first training phase after every 1000 more steps (the others run
 * without waiting for the device). opts may be NULL; of ag_learn_opts it
 * takes everything ag_dqn_learn_ex does (on_eval_ac in place of on_eval):
 * checkpoints DIR/ckpt-SSSSSSSSSSSS of the agent (ag_ac_save, with the
 * loop's run state: its counters, the last 20 returns, the last PHASE's
 * losses, the observations in hand and the environments' state) every
 * checkpoint_every steps and when should_stop asks, the newest `keep` of
 * them kept, and resume of such a run (an agent from ag_ac_load of a
 * checkpoint's agent.agrl, env made as the run's was): the events,
 * updates and returns that follow are the uninterrupted run's, bit for bit
 * on the same device.
 * Errors: AG_ERR_INVALID_ARG: a or env NULL, keep < 1, checkpoint_every
 * or eval_every < 0, n_step > 1 with a vector of other than n_envs
 * copies, resume without a sound run state of ag_ac_learn (a container
 * of kind "run", docs/container.md, or the packed record of agrl 0.1.0)
 * or with one of another number of copies (nothing is changed then); AG_ERR_SHAPE: env's spec differs;
 * AG_ERR_UNSUPPORTED: checkpoints of environments whose state cannot be
 * read; those of ag_ac_save, of the directories (AG_ERR_IO) and of the
 * calls it makes. On error the steps taken stay taken, as for
 * ag_dqn_learn; a checkpoint that fails leaves the earlier ones as they
 * were. */
AG_API ag_status ag_ac_learn(ag_ac *a, ag_vec_env *env, int64_t total_steps, ag_learn_opts *opts,
                             ag_train_callback cb, void *user);

/* Mean return of `episodes` deterministic episodes of the agent's policy
 * (episode k seeded with ag_env_derive_seed(seed, k)), as ag_policy_evaluate
 * of ag_ac_actor. Errors: those of ag_policy_evaluate; AG_ERR_INVALID_ARG:
 * a NULL; AG_ERR_SHAPE: env's observations or continuous actions are not
 * the agent's (a discrete env); AG_ERR_STATE: the agent is broken. */
AG_API ag_status ag_ac_evaluate(ag_ac *a, ag_env *env, int episodes, uint64_t seed, double *mean,
                                double *returns);

/* Episodes of a saved policy network on env: for discrete actions the
 * greedy action of a Q-network (ag_q_evaluate); for continuous ones the
 * deterministic action of an actor (act_dim outputs, TD3, or 2 act_dim,
 * SAC, of which the first act_dim): low + (tanh(out) + 1) (high - low) / 2.
 * Errors: those of ag_q_evaluate; AG_ERR_SHAPE: the network's inputs are
 * not env's observations, or its outputs neither act_dim nor 2 act_dim;
 * AG_ERR_INVALID_ARG: an environment without finite bounds;
 * AG_ERR_UNSUPPORTED: act_dim > 64. */
AG_API ag_status ag_policy_evaluate(ag_mlp *policy, ag_env *env, int episodes, uint64_t seed, double *mean,
                                    double *returns);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_AC_H */
