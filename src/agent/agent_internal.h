/* agent_internal.h — the agent layer's hooks for tests. */
#ifndef AGRL_AGENT_AGENT_INTERNAL_H
#define AGRL_AGENT_AGENT_INTERNAL_H

#include "agrl/ac.h"
#include "agrl/agent.h"
#include "agrl/dist.h"
#include "nn/nn_internal.h"

/* The DQN (dqn.c; saved and loaded by dqn_file.c, driven by learn.c through dqn_ops.c). */
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
  int64_t zeros_n;
  ag_frames *frames; /* cfg.frame_stack: the frame table (owns replay, and per with cfg.per) */
  float *act_u8;     /* ag_dqn_act_u8's observations as f32, act_u8_n values */
  size_t act_u8_n;
  /* the caller's record of a run in progress, saved with the DQN (ag_dqn_set_run_state) */
  void *run_state;
  size_t run_state_n;
};

/* The ranges of n_step and n_envs (agent.h, ac.h). The largest table
 * prioritized replay takes is replay.h's AG_PER_MAX_CAPACITY, which
 * ag_dqn_create checks before the table is made. */
#define AG__MAX_N_STEP 64
#define AG__MAX_N_ENVS ((int64_t)1 << 20)

/* The checks of ag_dqn_create on a configuration; `fn` names the call. */
ag_status ag__dqn_check_config(const ag_dqn_config *c, const char *fn);
/* ag_dqn_create's body, also for ag_dqn_load (g NULL: one GPU). */
ag_status ag__dqn_create(ag_ctx *ctx, ag_dist *g, int64_t obs_dim, int64_t n_actions, int64_t total_steps,
                         const ag_dqn_config *cfg, const char *fn, ag_dqn **out);
/* The configuration of the frame table a DQN of cfg.frame_stack > 0 makes
 * (all zeros for frame_stack 0). */
ag_frames_config ag__dqn_frames_config(const ag_dqn_config *c);
/* The tensors an update changes (parameters and gradients of the online
 * network, the sampling stream's counter, the optimizer's state): writes up
 * to max of them into out and returns how many there are. */
int ag__dqn_update_state(const ag_dqn *d, ag_tensor **out, int max);

/* ---- files of whole agents (agent_file.c; dqn_file.c and ac_file.c) ----
 * An agrl container of the agent's kind, then the replay table's file image
 * to the end of the file. */
/* Reads the replay table's image from f's position to its end into *out: it
 * must be a table as `mine` (fields, storage, minimum, sampler and its
 * alpha) of `capacity` columns, else AG_ERR_IO "fn: path is corrupt: its
 * replay table is not <own> ...". A table of more than max_bytes (0: no
 * limit) is AG_ERR_UNSUPPORTED; the table's own refusals name fn and path. */
ag_status ag__agent_table_read(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, const char *fn,
                               const char *own, const ag_replay *mine, int64_t capacity, ag_replay **out);

/* SAC and TD3 (ac.c; saved and loaded by ac_file.c, driven by learn.c through ac_ops.c). */
struct ag_ac {
  ag_ctx *ctx;
  ag_ac_config cfg;
  int64_t obs_dim, act_dim, total_steps;
  float *low, *high;       /* act_dim bounds each */
  ag_mlp *actor, *actor_t; /* actor_t: TD3 */
  ag_mlp *q[2], *qt[2];
  ag_optim *opt_actor, *opt_critic, *opt_alpha;
  ag_tensor *log_alpha; /* [1, 1]; a parameter with autotune */
  ag_replay *replay;
  ag_rng *rng, *act_rng;
  ag_capture *upd[2]; /* 0: the critics; 1: the critics, then the actor */
  ag_tensor *closs, *aloss;
  ag_tensor *closs_of[2], *aloss_of; /* in each recording's workspace */
  int64_t updates, actor_updates;
  uint64_t host_rng;
  ag_tensor *obs_in;
  int obs_in_n;
  float *scratch;
  int scratch_n;
  void *store_buf; /* ag_ac_store's actions in [-1, 1] and zero flags, store_bytes of them */
  size_t store_bytes;
  float target_entropy;
  /* the correlated acting noise's state (noise_rho > 0): noise_n values,
   * act_dim per copy; noise_n 0 until the first exploring act, and again
   * when a call acts for another number of copies */
  float *noise_z;
  int64_t noise_n;
  ag_tensor *noise_in; /* noise_z uploaded */
  int broken;
  float aloss_loaded; /* the last actor update's loss as a loaded file holds it, until the actor's
                         recording is made (NaN for none) */
  /* the caller's record of a run in progress, saved with the agent (ag_ac_set_run_state) */
  void *run_state;
  size_t run_state_n;
};

/* The checks of ag_ac_create on a configuration; `fn` names the call. */
ag_status ag__ac_check_config(const ag_ac_config *c, const char *fn);

/* The same for a frame table (frames.h's image, agrl/frames.h) of
 * configuration `want` whose fields' table is as `mine` (of
 * want->capacity columns): AG_ERR_IO "fn: path is corrupt: its frame
 * table is not <own> ..." otherwise, the header checked before anything
 * is made; the table's own refusals name fn and path. */
ag_status ag__agent_frames_read(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, const char *fn,
                                const char *own, const ag_frames_config *want, const ag_replay *mine,
                                ag_frames **out);

/* The caller's record of a run (ag_dqn_set_run_state, ag_ac_set_run_state):
 * *state (malloc'd, *len bytes) becomes a copy of data's n bytes (n = 0: none);
 * AG_ERR_INVALID_ARG for n > AG__MAX_RUN_STATE, AG_ERR_OUT_OF_MEMORY, both
 * leaving the old record. */
#define AG__MAX_RUN_STATE ((size_t)1 << 30)
ag_status ag__run_state_set(void **state, size_t *len, const void *data, size_t n, const char *fn);

/* The returns of the last (up to) AG__RECENT episodes, which the training
 * loop reports the mean of (learn.c). ag__recent_push adds one and
 * returns the mean of those kept. */
enum { AG__RECENT = 20 };
typedef struct ag__recent {
  double r[AG__RECENT];
  int n, next;
} ag__recent;
double ag__recent_push(ag__recent *w, double v);

/* ---- the training loop (learn.c) and the agents it trains ---- */

/* A loop's state between two steps; what a checkpoint keeps of it (all but
 * last_ckpt, the step of the last checkpoint of this call). since_target:
 * the DQN's; last_report and losses: SAC's and TD3's (their last PHASE). */
typedef struct ag__loop {
  int64_t step, episodes, since_train, since_target, last_eval, last_report, last_ckpt;
  ag__recent win;
  double mean;
  float losses[2];
} ag__loop;

/* ---- the run state (learn.c): a container of kind "run" ----
 * What a checkpoint keeps of a loop (docs/container.md): its state, the
 * observations in hand and the environments' state. */
typedef struct ag__run_state {
  ag__loop loop;      /* last_ckpt = loop.step */
  float *obs;         /* n_envs x obs_dim observations (malloc'd) */
  unsigned char *env; /* env_bytes of the environments' state (malloc'd, at least 1 byte) */
  size_t env_bytes;
} ag__run_state;

/* The container of len bytes at b (either layout: kind "run" or the packed
 * record of 0.1.0) as the run state of loop ("dqn" or "ac") with n_envs
 * copies of obs_dim observations and env_bytes of environment state: every
 * key and both sections checked before anything is allocated for them,
 * then *out filled. Refusals leave *out untouched and allocate nothing:
 * AG_ERR_STATE when the bytes are no run state of that loop (not a
 * container, another kind or loop; the caller says what to load instead),
 * AG_ERR_INVALID_ARG "fn: resume: ..." when one is unsound or of other
 * sizes, AG_ERR_OUT_OF_MEMORY. Free *out with ag__run_state_free. */
ag_status ag__run_parse(const void *b, size_t len, const char *loop, int n_envs, int obs_dim,
                        size_t env_bytes, const char *fn, ag__run_state *out);
void ag__run_state_free(ag__run_state *r);
/* The container of kind "run" of loop ls (loop "dqn" or "ac": the latter
 * keeps the last PHASE event), n_envs x obs_dim observations obs and the
 * environments' state env[env_bytes]: *buf (malloc'd, *len bytes). */
ag_status ag__run_encode(const ag__loop *ls, const char *loop, int n_envs, int obs_dim, const float *obs,
                         const void *env, size_t env_bytes, const char *fn, char **buf, size_t *len);

/* ---- an agent as the training loop and the evaluations see it ----
 * learn.c's loop (act, step the environments, store, report the episodes
 * that ended, train at each boundary, evaluate, checkpoint, stop, resume)
 * is written once; each kind of agent supplies one table of these calls
 * (dqn_ops.c: the DQN; ac_ops.c: SAC and TD3), and learn.c calls nothing
 * else of the agent. `agent` is the agent the table is of. */
typedef struct ag__agent_ops {
  const char *noun;     /* in messages: "the %s holds no run state" ("DQN") */
  const char *learn_fn; /* the loop's call in messages ("ag_dqn_learn") */
  const char *run_fn;   /* its checkpoints' and resumes' ("ag_dqn_learn_ex") */
  const char *load_fn;  /* the call that loads a checkpoint's agent.agrl */
  /* whether the run state keeps the last PHASE event (step and losses;
   * since_target then stays 0): its run.loop is "ac", else "dqn" */
  int run_phase;
  /* the loop's state before a first step (after it is zeroed), or NULL */
  void (*start)(ag__loop *ls);
  /* the action's floats per copy, and the bytes per copy of the scratch
   * that act hands to store */
  int64_t (*act_width)(const void *agent);
  size_t scratch_per_copy;
  /* the group the agent trains in (NULL: none) and its context */
  ag_dist *(*dist)(const void *agent);
  ag_ctx *(*ctx)(const void *agent);
  /* the exploring actions of n copies at the loop's step `step`, in the
   * environment's form (and what store needs of them in scratch) */
  ag_status (*act)(void *agent, const float *obs, int n, int64_t step, float *actions, void *scratch);
  ag_status (*store)(void *agent, const float *obs, const float *actions, const void *scratch,
                     const float *rewards, const float *next_obs, const int *terminated, const int *truncated,
                     int n);
  /* after each step's episodes: `added` steps were taken (the DQN counts
   * them to its target's refresh), or NULL */
  ag_status (*tick)(void *agent, ag__loop *ls, int64_t added);
  /* the steps between two training boundaries */
  int64_t (*train_freq)(const void *agent);
  /* a training boundary: the updates due; *phase 1 when a PHASE event is
   * due, with the agent's fields of ev written (updates, losses, epsilon,
   * alpha) */
  ag_status (*train)(void *agent, ag__loop *ls, int *phase, ag_train_event *ev);
  /* the agent's fields of an EPISODE event */
  void (*episode)(const void *agent, const ag__loop *ls, ag_train_event *ev);
  /* ag_learn_opts' evaluation of this kind: whether opts has one, and the call */
  int (*has_eval)(const ag_learn_opts *o);
  ag_status (*eval)(void *agent, const ag_learn_opts *o, int64_t step, int *enough);
  /* the agent's file (with its run state) and its run state */
  ag_status (*save)(const void *agent, const char *path);
  ag_status (*set_run_state)(void *agent, const void *data, size_t n);
  const void *(*run_state)(const void *agent, size_t *n);
  /* the deterministic action of the agent's policy network at the
   * observation in `in` (one column), in the environment's form */
  ag_status (*policy_action)(ag_mlp *net, ag_tensor *in, const ag_env_spec *spec, float *action);
} ag__agent_ops;

extern const ag__agent_ops ag__dqn_ops; /* dqn_ops.c */
extern const ag__agent_ops ag__ac_ops;  /* ac_ops.c */

/* The training loop (learn.c) of an agent whose own checks have passed
 * (environment, configuration and ag__learn_check_opts): resumes or
 * resets env, then runs to total_steps as ag_dqn_learn_ex documents. */
ag_status ag__learn(const ag__agent_ops *ops, void *agent, ag_vec_env *env, int64_t total_steps,
                    ag_learn_opts *o, ag_train_callback cb, void *user);

/* The episodes of an evaluation (evaluate.c): episode k from
 * ag_env_derive_seed(seed, k), net's action from `act` on one observation
 * at a time, the workspace reset after each step; mean and (when given)
 * the returns written only on success. */
ag_status ag__play(ag_mlp *net, ag_env *env, int episodes, uint64_t seed,
                   ag_status (*act)(ag_mlp *net, ag_tensor *in, const ag_env_spec *spec, float *action),
                   const char *fn, double *mean, double *returns);

/* ag_learn_opts' ranges (opts NULL: AG_OK). */
ag_status ag__learn_check_opts(const ag_learn_opts *o, const char *fn);

/* ---- the fused updates' batch (fused.c) ----
 * The batch of B transitions of the agent's table r (its obs, action,
 * reward, next_obs and terminated fields), drawn from rng in the call. */
ag__fused_batch ag__agent_batch(ag_replay *r, ag_rng *rng, int64_t B);
/* Before the call: with n_step > 1, the B indices drawn (as ag_replay_sample
 * draws them) and their n-step walks (ag_replay_nstep) into b; else a check
 * that B can be sampled. */
ag_status ag__agent_batch_draw(ag__fused_batch *b, ag_replay *r, int n_step, float gamma, int64_t n_envs,
                               const char *fn);
/* The deterministic action tanh(first A outputs) of an actor on x (ac.c). */
ag_status ag__squashed_mean(ag_mlp *actor, ag_tensor *x, int64_t A, ag_tensor **act);
/* AG_ERR_STATE naming fn when a device error left the agent half updated (ac.c). */
ag_status ag__ac_check_sound(const ag_ac *a, const char *fn);

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
