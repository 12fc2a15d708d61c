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
#include "agrl/frames.h"
#include "agrl/nn.h"
#include "agrl/replay.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AG_DQN_MAX_HIDDEN 8

/* The defaults are in the comments. ag_dqn_create refuses (AG_ERR_INVALID_ARG,
 * the message naming the field and its value, before anything is allocated)
 * n_hidden outside 0..AG_DQN_MAX_HIDDEN, a hidden size < 1, lr outside
 * (0, 1e6), gamma outside [0, 1], batch_size < 1, buffer_size < batch_size,
 * learning_starts < 0, train_freq < 1, gradient_steps < 0,
 * target_update_interval < 1, tau outside (0, 1], exploration_fraction,
 * eps_start or eps_end outside [0, 1], max_grad_norm < 0 or not finite,
 * per_alpha or per_beta outside [0, 1], per_eps outside (0, 1], per not 0
 * or 1, n_step outside 1..64, n_envs outside 1..2^20 (NaN is outside every
 * range), n_conv outside 0..AG_MAX_CONV, with n_conv > 0 an obs_shape
 * whose product is not obs_dim or convolutions that ag_mlp_create_conv
 * refuses over obs_shape (with its status: AG_ERR_UNSUPPORTED for those
 * beyond its limits), frame_stack outside 0..AG_FRAMES_MAX_STACK, with
 * frame_stack = k > 0 an obs_shape whose sizes are not positive, whose
 * first is not a multiple of k, whose product is not obs_dim or whose
 * frame (obs_shape[0] / k * h * w bytes) is larger than 2^31 - 2 bytes,
 * or n_envs > buffer_size; with AG_ERR_UNSUPPORTED, also before anything
 * is allocated, per = 1 with buffer_size > 2^31 - 1 (the prioritized
 * sampler's limit, ag_per_create), and per, n_step > 1 or frame_stack > 0
 * with a group of GPUs. double_dqn, huber and fused are flags (nonzero:
 * on). */
typedef struct ag_dqn_config {
  int n_hidden;                      /* 2 */
  int64_t hidden[AG_DQN_MAX_HIDDEN]; /* 256, 256 (ReLU) */
  float lr;                          /* 7e-4 (Adam) */
  float gamma;                       /* 0.99 */
  int64_t batch_size;                /* 128 */
  int64_t buffer_size;               /* 100000 */
  int64_t learning_starts;           /* 1000 */
  int64_t train_freq;                /* 64 environment steps */
  int64_t gradient_steps;            /* 64 per training phase */
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
  /* prioritized replay (Schaul et al. 2016): transitions drawn with
   * probability p^alpha / sum p^alpha, the loss of each weighted by its
   * importance weight (beta annealed linearly from per_beta to 1 over
   * total_steps), and p = |TD error| + per_eps written back inside the same
   * recorded update. The update then runs as composed ops (not fused). */
  int per;         /* 0 */
  float per_alpha; /* 0.6, in [0, 1] */
  float per_beta;  /* 0.4, in [0, 1]: beta at step 0 */
  float per_eps;   /* 1e-6, in (0, 1] */
  /* n-step returns (1..64; 1: the one-step target): the target of a drawn
   * transition is the discounted sum of up to n_step rewards of its copy's
   * following transitions, stopped at a termination (no bootstrap), at a
   * truncation or at the ring's write head (bootstrapped with gamma^k),
   * computed on the device inside the recorded update (ag_replay_nstep),
   * whose fused call (see fused) then takes those targets: the same draws
   * and values as the composed ops. n_envs: the environment copies
   * whose transitions each ag_dqn_store_ex call stores side by side (one
   * step of every copy a call; ag_dqn_learn needs it to be the vector's
   * size when n_step > 1). */
  int n_step;     /* 5 */
  int64_t n_envs; /* 1 */
  /* image observations: n_conv convolutions (ag_mlp_create_conv, each
   * followed by ReLU) in front of the hidden layers, over observations of
   * shape obs_shape {C, H, W} (channels first, C*H*W = obs_dim). n_conv 0
   * (the default) is an MLP over the flat observation, and conv and
   * obs_shape are not read. With convolutions the update always runs as
   * composed ops (fused is not used). E.g. MinAtar's DQN: conv {{16, 3, 1,
   * 0}}, hidden {128}; the Nature DQN: conv {{32, 8, 4, 0}, {64, 4, 2, 0},
   * {64, 3, 1, 0}}, hidden {512}. */
  int n_conv;                      /* 0 */
  ag_conv_layer conv[AG_MAX_CONV]; /* (none) */
  int64_t obs_shape[3];            /* (none) */
  /* pixel observations in a frame table (agrl/frames.h): frame_stack = k
   * (1..AG_FRAMES_MAX_STACK) keeps the replay as a frame table of
   * buffer_size entries, each environment step's newest frame stored once
   * as u8, and the update rebuilds the f32 stacks (v / 255) of its batch
   * from it. The network sees a stack as frames.h lays it out: obs_shape =
   * {k*c, h, w} for frames of h x w x c u8 (c fastest, as environments
   * give them), slots outermost (slot i, channel ch at row i*c + ch),
   * obs_dim = k*c*h*w; obs_shape is then read with or without
   * convolutions. Transitions are stored with ag_dqn_store_frames (not
   * ag_dqn_store), the caller acts on stacks of its own (ag_dqn_act with
   * f32 values v / 255, or ag_dqn_act_u8), and ag_dqn_learn is not used
   * (its environments give flat f32 observations). Not over a group of
   * GPUs; the update runs as composed ops (fused is not used). 0 (the
   * default): the table of full f32 observations. */
  int frame_stack; /* 0 */
} ag_dqn_config;

/* The defaults above: Stable-Baselines3 zoo's CartPole-v1 DQN (256-256
 * network, target copy every 10 environment steps, 16% of the run
 * exploring, gradients clipped at 10), with the changes that made it solve
 * CartPole-v1 (mean return of 20 episodes >= 475) within 50,000 steps:
 * Double DQN, Adam at 7e-4, batches of 128, final epsilon 0.01, 5-step
 * returns, and 64 gradient steps every 64 environment steps (twice the
 * updates of the zoo's 128 every 256). They were tuned with 8 environment
 * copies (n_envs = 8, what agrl train steps; n_envs here is 1, one copy)
 * on seeds 0-19 on the H200 (19 of 20 solved); seeds 100-119 then solved
 * 20 of 20 on the H200 and 19 of 20 on the CPU
 * (bench/results/2026-12-01-gpu-accept-dqn-cartpole-defaults,
 * bench/results/2026-12-01-cpu-accept-dqn-cartpole). The earlier defaults
 * (one copy, 32 gradient steps every 64) solved 18 (H200) and 17 (CPU) of
 * those seeds; with them on the CPU, one-step targets solved 1 of 5 of
 * seeds 0-4 and 3-step returns 10 of 12 of seeds 0-11. */
AG_API ag_dqn_config ag_dqn_defaults(void);

typedef struct ag_dqn ag_dqn;

/* A DQN for obs_dim inputs and n_actions actions, planned for total_steps
 * environment steps (for the epsilon schedule). It owns its two networks,
 * Adam and its replay table of cfg->buffer_size transitions (fields obs
 * [obs_dim], action [1] i32, reward [1], next_obs [obs_dim], terminated [1]
 * i32, truncated [1] i32; f32 storage; sampling from batch_size on), with
 * cfg.per its prioritized sampler. With cfg.frame_stack = k the table is a
 * frame table (agrl/frames.h) instead: capacity buffer_size entries,
 * frames of obs_shape[0] / k x obs_shape[1] x obs_shape[2] (c, h, w), stack
 * k, n_envs copies, min_size batch_size, prioritized (alpha per_alpha)
 * with cfg.per, and fields action [1] i32, reward [1], terminated [1] i32,
 * truncated [1] i32 (f32 storage). Free it before ctx.
 * Errors: AG_ERR_INVALID_ARG: ctx, cfg or out NULL, obs_dim < 1,
 * n_actions < 2, total_steps < 1, a cfg field outside its range (see
 * ag_dqn_config; the message names it); AG_ERR_STATE while a step is
 * recorded; AG_ERR_UNSUPPORTED: per = 1 with buffer_size > 2^31 - 1 (see
 * ag_dqn_config), or on a device without the prioritized sampler's kernels
 * (ag_per_create: found once the table is made, which is then freed);
 * AG_ERR_OUT_OF_MEMORY (the host, or the networks or the table do not fit
 * the device); AG_ERR_DEVICE.
 * On error *out is not written and nothing stays allocated. */
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

/* ag_dqn_act on observations of n * obs_dim bytes, each value v seen as
 * v / 255 in f32 (the values a frame table's gather gives the update).
 * Errors: those of ag_dqn_act; AG_ERR_OUT_OF_MEMORY (host memory for the
 * converted values). */
AG_API ag_status ag_dqn_act_u8(ag_dqn *d, const uint8_t *obs, int n, int64_t step, int explore,
                               int32_t *actions);

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
/* ag_dqn_store with the episodes' truncations (n values 0 or 1; NULL: none),
 * which n-step returns stop at (and bootstrap from). Errors: those of
 * ag_dqn_store; AG_ERR_OUT_OF_RANGE: a truncated flag other than 0 or 1.
 * Both refuse a DQN of a frame table (cfg.frame_stack) with AG_ERR_STATE:
 * its transitions go in through ag_dqn_store_frames. */
AG_API ag_status ag_dqn_store_ex(ag_dqn *d, const float *obs, const int32_t *actions, const float *rewards,
                                 const float *next_obs, const int *terminated, const int *truncated, int n);

/* A frame-table DQN's store (cfg.frame_stack = k; agrl/frames.h's
 * entries): appends `steps` environment steps of the n_envs copies, entry
 * s * n_envs + e being copy e at step s: frames[steps * n_envs] frames of
 * h*w*c u8 (c fastest), first[] their flags (non-zero: the frame is an
 * episode's first observation, as reset gives it), and the fields of the
 * transition taken from that observation: actions (0..n_actions-1),
 * rewards, terminated and truncated (0 or 1; truncated NULL: none) of
 * steps * n_envs values each. An episode's last observation (what step
 * gave with terminated or truncated) is an entry of its own, whose fields
 * are stored and never read (give any that pass the checks, e.g. 0s); the
 * copy's next entry, its next episode's first observation, is flagged
 * first. The transition whose next observation is an episode's last must
 * carry its terminated or truncated flag (as the environment gives them):
 * the target and the n-step walks stop there. steps = 0 stores nothing.
 * All or nothing, as ag_frames_add.
 * Errors: AG_ERR_INVALID_ARG: d NULL, steps < 0, frames, first, actions,
 * rewards or terminated NULL for steps > 0; AG_ERR_STATE: the DQN has no
 * frame table (store with ag_dqn_store_ex), or is broken;
 * AG_ERR_OUT_OF_RANGE: an action outside 0..n_actions-1, a flag other
 * than 0 or 1 (the message names it), steps * n_envs > buffer_size; the
 * other errors of ag_frames_add. */
AG_API ag_status ag_dqn_store_frames(ag_dqn *d, const uint8_t *frames, const uint8_t *first,
                                     const int32_t *actions, const float *rewards, const int *terminated,
                                     const int *truncated, int64_t steps);

/* Runs n recorded updates: a recording of 8 updates (on the GPU one graph)
 * while 8 or more are left, then a recording of one (each made at its first
 * use). With last_loss, waits and reports the loss of the last update.
 * n = 0 runs nothing (last_loss untouched).
 * Errors: AG_ERR_INVALID_ARG: d NULL, n < 0; AG_ERR_STATE: a step is being
 * recorded, fewer than batch_size transitions are stored (with a frame
 * table: may be sampled) when an update is recorded, or the DQN is broken; AG_ERR_INVALIDATED: an object the
 * update reads was freed (e.g. the table's buffer); AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. All or nothing: the
 * recordings are made (or made again) before any update runs, and with last_loss what the updates change
 * (parameters, gradients, Adam's moments and step count, the sampling stream, with cfg.per the priorities) is
 * copied on the device first, so a failed read-back puts it back: on error the DQN is as before the call and
 * ag_dqn_updates has not moved. Only a device error while the updates run without last_loss (or while the
 * copy is put back) cannot be undone: the call then says so, and every later call on the DQN returns
 * AG_ERR_STATE. */
AG_API ag_status ag_dqn_train(ag_dqn *d, int64_t n, float *last_loss);

/* The loss of the current networks on a gathered batch [ag_replay_rows, B]
 * f32 of the DQN's table (ag_replay_sample, ag_replay_gather), with
 * gradients: what one update minimises with n_step = 1 and without
 * prioritized replay (the one-step target, the plain mean, whatever cfg
 * says: a batch does not tell where its transitions were drawn).
 * *loss: a [1, 1] temporary.
 * Errors: AG_ERR_INVALID_ARG: d, batch or loss NULL, batch of another
 * context; AG_ERR_FREED: batch released by ag_ctx_reset; AG_ERR_SHAPE:
 * batch has another number of rows, or is not f32; AG_ERR_OUT_OF_MEMORY.
 * A DQN of a frame table has no such batch: AG_ERR_STATE (see
 * ag_dqn_loss_frames).
 * On error the temporaries made so far stay in the workspace. */
AG_API ag_status ag_dqn_loss(ag_dqn *d, ag_tensor *batch, ag_tensor **loss);
/* The same for a DQN of a frame table, on its n transitions at the host
 * indices idx (entries that may be sampled now, as ag_frames_gather takes
 * them): the one-step target, the plain mean, on the f32 stacks the
 * update's gather builds. Not while a step is recorded.
 * Errors: AG_ERR_INVALID_ARG: d, idx or loss NULL, n < 1; AG_ERR_STATE:
 * the DQN has no frame table, is broken, or a step is being recorded;
 * AG_ERR_OUT_OF_RANGE: an index that may not be sampled (the message
 * names it); AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_dqn_loss_frames(ag_dqn *d, const int64_t *idx, int64_t n, ag_tensor **loss);

/* Target network update: a copy (tau = 1) or Polyak averaging (queued;
 * recordable). Errors: AG_ERR_INVALID_ARG: d NULL; those of ag_mlp_copy
 * and ag_mlp_polyak. */
AG_API ag_status ag_dqn_update_target(ag_dqn *d);

/* The DQN's own objects (freed with it; NULL for d NULL). */
AG_API ag_mlp *ag_dqn_q(const ag_dqn *d);         /* the online network */
AG_API ag_mlp *ag_dqn_target(const ag_dqn *d);    /* the target network */
AG_API ag_replay *ag_dqn_replay(const ag_dqn *d); /* in a group: this rank's shard's table; with
                                                     frame_stack: the frame table's fields' table */
AG_API ag_frames *ag_dqn_frames(const ag_dqn *d); /* the frame table (NULL without frame_stack) */
AG_API int64_t ag_dqn_updates(const ag_dqn *d);
/* The configuration the DQN was made (or loaded) with, and the
 * environment steps its exploration schedule plans for (NULL and 0 for d
 * NULL); its sizes are ag_mlp_in / ag_mlp_out of ag_dqn_q. */
AG_API const ag_dqn_config *ag_dqn_get_config(const ag_dqn *d);
AG_API int64_t ag_dqn_total_steps(const ag_dqn *d);

/* Prioritized replay (cfg.per): beta at environment step `step` (per_beta
 * rising linearly to 1 at total_steps; 1 after), and the beta the next
 * updates draw with, which ag_dqn_learn sets before every training phase
 * (a device value: the recorded update is not made again). ag_dqn_set_beta
 * errors: AG_ERR_INVALID_ARG (d NULL, beta outside [0, 1]); AG_ERR_STATE
 * (no prioritized replay, or a step is being recorded); those of a write. */
AG_API float ag_dqn_per_beta(const ag_dqn *d, int64_t step);
AG_API ag_status ag_dqn_set_beta(ag_dqn *d, float beta);
/* The DQN's prioritized sampler (NULL without cfg.per). */
AG_API ag_per *ag_dqn_per(const ag_dqn *d);
/* 1 when the update computes its loss and gradient in one fused call
 * (a few kernels on the GPU instead of ~30; with n_step > 1 after the draw
 * of the indices and their n-step walks, ag_replay_nstep): cfg.fused is
 * set, cfg.per is not, the network has at most 8 hidden layers and 64
 * actions, and the context's backend takes the fused kernel. Decided again
 * whenever the update is recorded (after a device switch, on the new
 * device); otherwise the update runs as composed ops. */
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
  float loss;         /* PHASE: the last update's loss (actor-critic: the critics') */
  float epsilon;
  float actor_loss; /* actor-critic PHASE: the last actor update's loss (DQN: 0) */
  float alpha;      /* actor-critic PHASE: SAC's temperature (DQN, TD3: 0) */
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
 * AG_ERR_UNSUPPORTED: a DQN of a frame table (cfg.frame_stack; its loop
 * is the caller's, storing with ag_dqn_store_frames);
 * AG_ERR_OUT_OF_MEMORY; those of ag_vec_env_reset, ag_dqn_act,
 * ag_vec_env_step, ag_dqn_store, ag_dqn_train, ag_dqn_update_target (and in
 * a group of the collectives). */
AG_API ag_status ag_dqn_learn(ag_dqn *d, ag_vec_env *env, int64_t total_steps, ag_train_callback cb,
                              void *user);

/* ---- saving a DQN, and checkpoints of a training run ----
 *
 * ag_dqn_save writes everything the DQN is to `path`: its configuration,
 * sizes and total_steps, the online and target networks, the gradients, the
 * optimizer's moments and step count, the device sampling stream's counter,
 * the host exploration stream, the update and target-refresh counts, the
 * run state (ag_dqn_set_run_state) and its replay table with the table's
 * file image (agrl/replay.h's format, streamed in parts of at most
 * AG_TRANSFER_PART_BYTES). The file is written beside `path`, flushed and
 * renamed over it: a failure or a crash never leaves a half file, and an
 * earlier file under `path` stays as it was. The file is device-neutral.
 * ag_dqn_load makes a NEW DQN on ctx from such a file; it then acts and
 * trains as the saved one would have: the same seed of draws, the same
 * updates, bit for bit on the same device.
 *
 * Layout: an agrl container of kind "dqn", version 2 (3 with
 * convolutions, 4 with a frame table; docs/container.md gives its keys
 * and sections): the configuration and counters as keys, every tensor and
 * the run state as sections in CRC-checked parts, then the replay table's
 * own container to the end of the file (with per, its prioritized sampler
 * in it), or with cfg.frame_stack the frame table's image (agrl/frames.h's
 * format: its frames, then its fields' table). Files of agrl 0.1.0
 * (AGRLDQN1) and of the earlier versions still load.
 * The loader checks the header (CRC, the configuration as ag_dqn_create
 * does, every size against the DQN the configuration makes) before it
 * makes the DQN, then every part's CRC, and the table's fields, storage
 * and capacity (a frame table: its frame, stack, copies and sampler too)
 * against the DQN's; it refuses with AG_ERR_IO naming the
 * path and what is wrong (truncated, trailing bytes, a CRC, a shape), and
 * a newer version with AG_ERR_UNSUPPORTED. Nothing is half-loaded: on
 * any failure what was made is freed and *out is not written.
 * ag_dqn_save errors: AG_ERR_INVALID_ARG (d or path NULL, path empty);
 * AG_ERR_UNSUPPORTED (a DQN of a group: save each rank's shard with
 * ag_shard_save); AG_ERR_STATE (a step is being recorded, or the DQN is
 * broken); AG_ERR_OUT_OF_MEMORY (host memory for a tensor's values);
 * AG_ERR_IO (the file cannot be created, written, flushed or renamed);
 * AG_ERR_DEVICE and the faults of the downloads. On error the DQN is as
 * before and the file under path unchanged.
 * ag_dqn_load errors: the refusals above; AG_ERR_INVALID_ARG (ctx, path or
 * out NULL); AG_ERR_IO (cannot be opened or read); those of ag_dqn_create.
 * Loading holds the DQN's empty table and the loaded one at once for a
 * moment: the device needs room for two tables. */
AG_API ag_status ag_dqn_save(const ag_dqn *d, const char *path);
AG_API ag_status ag_dqn_load(ag_ctx *ctx, const char *path, ag_dqn **out);

/* The caller's record of a run in progress (bytes of its own layout: the
 * loop's counters, the environments' state ...), kept by the DQN, saved and
 * loaded with it. ag_dqn_set_run_state copies n bytes (n = 0 clears it; at
 * most 2^30). Errors: AG_ERR_INVALID_ARG (d NULL, data NULL for n > 0,
 * n > 2^30); AG_ERR_OUT_OF_MEMORY (then the old record stays).
 * ag_dqn_run_state returns the record and its length in *n (NULL and 0
 * when there is none, or for d NULL); valid until the next set or free. */
AG_API ag_status ag_dqn_set_run_state(ag_dqn *d, const void *data, size_t n);
AG_API const void *ag_dqn_run_state(const ag_dqn *d, size_t *n);

typedef struct ag_ac ag_ac; /* agrl/ac.h */

/* How ag_dqn_learn_ex checkpoints a run (ag_learn_defaults: none of it).
 * A checkpoint is a directory DIR/ckpt-SSSSSSSSSSSS (the environment step,
 * 12 digits) holding agent.agrl (ag_dqn_save of the DQN with the loop's run
 * state: its counters, the last 20 returns, the observations in hand and
 * the environments' state, ag_vec_env_get_state) and the caller's files
 * (on_checkpoint). It is made as DIR/.ckpt-SSSSSSSSSSSS.tmp and renamed into
 * place once whole, so a checkpoint directory is always complete; then all
 * but the newest `keep` checkpoints are removed. */
typedef struct ag_learn_opts {
  const char *checkpoint_dir; /* NULL: no checkpoints (DIR is made if missing) */
  int64_t checkpoint_every;   /* a checkpoint each time this many more environment
                                 steps were taken (0: only when should_stop asks) */
  int keep;                   /* checkpoints kept, >= 1 (default 3) */
  /* polled after every step of the loop; nonzero: write a checkpoint
   * (with checkpoint_dir) and return AG_OK */
  int (*should_stop)(void *user);
  /* writes the caller's own files into the checkpoint's directory before
   * it is renamed into place; a status other than AG_OK drops the
   * checkpoint and ends the run with that status */
  ag_status (*on_checkpoint)(const char *dir, int64_t step, void *user);
  /* called after the step at which eval_every more environment steps have
   * been taken since the last call (0: never), with the DQN between two
   * steps (e.g. for ag_q_evaluate of ag_dqn_q on environments of its own:
   * the training's streams are not touched); setting *stop ends the run
   * after this step; a status other than AG_OK ends it with that status.
   * The step of the last call is part of the run state, so a resumed run
   * evaluates at the same steps. */
  int64_t eval_every;
  ag_status (*on_eval)(ag_dqn *d, int64_t step, int *stop, void *user);
  void *user;         /* for should_stop, on_checkpoint, on_eval and on_eval_ac */
  int resume;         /* 1: continue the run recorded in the DQN's run state
                         (a DQN from ag_dqn_load of a checkpoint's agent.agrl)
                         instead of resetting env */
  int stopped;        /* out: 1 when should_stop ended the run */
  int64_t step;       /* out: the environment steps taken (resumed ones included) when the call returned */
  int64_t resumed_at; /* out: the step the run resumed from (0 without resume) */
  /* ag_ac_learn's on_eval (agrl/ac.h), called as on_eval is */
  ag_status (*on_eval_ac)(ag_ac *a, int64_t step, int *stop, void *user);
} ag_learn_opts;
AG_API ag_learn_opts ag_learn_defaults(void);

/* ag_dqn_learn with checkpoints (opts NULL: ag_dqn_learn). With resume,
 * env must be a vector made as the checkpointed run's was (the same
 * environment and number of copies; its seeds and episodes are restored
 * from the run state), and the run continues from the checkpoint's step to
 * total_steps: the events, updates and returns that follow are those the
 * uninterrupted run had, bit for bit on the same device. A callback's stop
 * takes effect after the step in progress (every episode of that step is
 * reported); so does should_stop's.
 * Errors: those of ag_dqn_learn; AG_ERR_INVALID_ARG (keep < 1,
 * checkpoint_every < 0, resume without a sound run state of
 * ag_dqn_learn_ex (a container of kind "run", docs/container.md, or the
 * packed record of agrl 0.1.0), or with one of another environment or
 * number of copies: nothing is changed then); AG_ERR_UNSUPPORTED
 * (checkpoints of a DQN of a group, or of environments whose state cannot
 * be read: ag_vec_env_get_state); those of ag_dqn_save and of creating,
 * renaming and removing the directories (AG_ERR_IO). A checkpoint that
 * fails leaves the earlier ones as they were. */
AG_API ag_status ag_dqn_learn_ex(ag_dqn *d, ag_vec_env *env, int64_t total_steps, ag_learn_opts *opts,
                                 ag_train_callback cb, void *user);

/* The newest complete checkpoint under dir (its path, DIR/ckpt-S, in buf of
 * size bytes) and its step in *step (may be NULL).
 * Errors: AG_ERR_INVALID_ARG (a NULL argument, size 0); AG_ERR_IO (dir
 * cannot be read, or holds no checkpoint); AG_ERR_OUT_OF_RANGE (the path
 * does not fit in buf). */
AG_API ag_status ag_learn_latest(const char *dir, char *buf, size_t size, int64_t *step);

/* Mean return of `episodes` greedy episodes of a Q-network on an environment
 * (episode k seeded with ag_env_derive_seed(seed, k)); returns may be NULL or
 * hold `episodes` values (each episode's return). Resets q's context's
 * workspace at every step. Errors: AG_ERR_INVALID_ARG: q, env or mean NULL,
 * episodes < 1; AG_ERR_SHAPE: env's obs_dim or n_actions are not q's inputs
 * and outputs (a continuous env); AG_ERR_STATE while a step is recorded; AG_ERR_OUT_OF_MEMORY; those of
 * ag_env_reset and ag_env_step. On error mean and returns are not written,
 * and env stays where the failing episode left it. */
AG_API ag_status ag_q_evaluate(ag_mlp *q, ag_env *env, int episodes, uint64_t seed, double *mean,
                               double *returns);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_AGENT_H */
