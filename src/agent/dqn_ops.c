/* dqn_ops.c — the DQN as the training loop and the evaluations see it
 * (ag__dqn_ops), its loop's entry points (ag_dqn_learn, ag_dqn_learn_ex)
 * and the evaluation of a Q-network's greedy policy (ag_q_evaluate).
 */
#include <string.h>

#include "agent/agent_internal.h"

static int64_t act_width(const void *agent) {
  (void)agent;
  return 1;
}
static ag_dist *dist_of(const void *agent) { return ((const ag_dqn *)agent)->dist; }
static ag_ctx *ctx_of(const void *agent) { return ((const ag_dqn *)agent)->ctx; }

/* epsilon-greedy actions: the i32s in scratch for store, as floats for the environments */
static ag_status act(void *agent, const float *obs, int n, int64_t step, float *actions, void *scratch) {
  int32_t *a = scratch;
  ag_status s = ag_dqn_act(agent, obs, n, step, 1, a);
  if (!s)
    for (int i = 0; i < n; i++) actions[i] = (float)a[i];
  return s;
}

static ag_status store(void *agent, const float *obs, const float *actions, const void *scratch,
                       const float *rewards, const float *next_obs, const int *terminated,
                       const int *truncated, int n) {
  (void)actions;
  return ag_dqn_store_ex(agent, obs, scratch, rewards, next_obs, terminated, truncated, n);
}

/* the target's refresh, counted in environment steps (as SB3 counts them) */
static ag_status tick(void *agent, ag__loop *ls, int64_t added) {
  ag_dqn *d = agent;
  ls->since_target += added;
  if (ls->since_target < d->cfg.target_update_interval) return AG_OK;
  ls->since_target = 0;
  if (d->cfg.tau < 1.0f || d->updates != d->updates_at_target) { /* a copy of an unchanged q is a no-op */
    d->updates_at_target = d->updates;
    return ag_dqn_update_target(d);
  }
  return AG_OK;
}

static int64_t train_freq(const void *agent) { return ((const ag_dqn *)agent)->cfg.train_freq; }

static ag_status train(void *agent, ag__loop *ls, int *phase, ag_train_event *ev) {
  ag_dqn *d = agent;
  int trained =
      ls->step > d->cfg.learning_starts && ag_replay_size(d->replay) >= d->batch && d->cfg.gradient_steps > 0;
  float loss = 0;
  ag_status s = AG_OK;
  if (trained && d->per && (s = ag_dqn_set_beta(d, ag_dqn_per_beta(d, ls->step)))) return s;
  if (trained && (s = ag_dqn_train(d, d->cfg.gradient_steps, &loss))) return s;
  *phase = trained;
  ev->updates = d->updates;
  ev->loss = loss;
  ev->epsilon = ag_dqn_epsilon(d, ls->step);
  return AG_OK;
}

static void episode(const void *agent, const ag__loop *ls, ag_train_event *ev) {
  const ag_dqn *d = agent;
  ev->updates = d->updates;
  ev->epsilon = ag_dqn_epsilon(d, ls->step);
}

static int has_eval(const ag_learn_opts *o) { return o->on_eval != NULL; }
static ag_status eval(void *agent, const ag_learn_opts *o, int64_t step, int *enough) {
  return o->on_eval(agent, step, enough, o->user);
}

static ag_status save(const void *agent, const char *path) { return ag_dqn_save(agent, path); }
static ag_status set_run_state(void *agent, const void *data, size_t n) {
  return ag_dqn_set_run_state(agent, data, n);
}
static const void *run_state(const void *agent, size_t *n) { return ag_dqn_run_state(agent, n); }

/* the greedy action of a Q-network */
static ag_status greedy(ag_mlp *q, ag_tensor *in, const ag_env_spec *spec, float *action) {
  ag_tensor *qv, *a;
  int32_t v;
  (void)spec;
  ag_status s = ag_mlp_forward(q, in, &qv);
  if (!s) s = ag_argmax(qv, AG_AXIS_ROWS, AG_I32, &a);
  if (!s) s = ag_tensor_read(a, &v, sizeof v);
  if (!s) *action = (float)v;
  return s;
}

const ag__agent_ops ag__dqn_ops = {
    .noun = "DQN",
    .learn_fn = "ag_dqn_learn",
    .run_fn = "ag_dqn_learn_ex",
    .load_fn = "ag_dqn_load",
    .run_phase = 0,
    .start = NULL,
    .act_width = act_width,
    .scratch_per_copy = sizeof(int32_t),
    .dist = dist_of,
    .ctx = ctx_of,
    .act = act,
    .store = store,
    .tick = tick,
    .train_freq = train_freq,
    .train = train,
    .episode = episode,
    .has_eval = has_eval,
    .eval = eval,
    .save = save,
    .set_run_state = set_run_state,
    .run_state = run_state,
    .policy_action = greedy,
};

ag_status ag_dqn_learn_ex(ag_dqn *d, ag_vec_env *env, int64_t total_steps, ag_learn_opts *o,
                          ag_train_callback cb, void *user) {
  static const char fn[] = "ag_dqn_learn";
  if (!d || !env) return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn and env must not be NULL", fn);
  if (d->frames)
    return ag__fail(
        AG_ERR_UNSUPPORTED,
        "%s: the DQN keeps a frame table (frame_stack = %d): train it with a loop that stacks the "
        "frames and stores them with ag_dqn_store_frames (agrl.DQN.learn in Python)",
        fn, d->cfg.frame_stack);
  const ag_env_spec *spec = ag_vec_env_get_spec(env);
  if (spec->obs_dim != d->obs_dim || spec->n_actions != d->n_actions)
    return ag__fail(AG_ERR_SHAPE,
                    "%s: the environment has %d observations and %d actions, the DQN %lld and %lld", fn,
                    spec->obs_dim, spec->n_actions, (long long)d->obs_dim, (long long)d->n_actions);
  ag_status s = ag__learn_check_opts(o, fn);
  if (s) return s;
  if (o && d->dist && (o->checkpoint_dir || o->resume || o->on_eval))
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: checkpoints and evaluations of a DQN of a group of GPUs are not supported", fn);
  if (d->cfg.n_step > 1 && ag_vec_env_size(env) != d->cfg.n_envs)
    return ag__fail(
        AG_ERR_INVALID_ARG,
        "%s: n-step returns walk every n_envs-th column: the DQN has n_envs = %lld, the vector %d copies", fn,
        (long long)d->cfg.n_envs, ag_vec_env_size(env));
  return ag__learn(&ag__dqn_ops, d, env, total_steps, o, cb, user);
}

ag_status ag_dqn_learn(ag_dqn *d, ag_vec_env *env, int64_t total_steps, ag_train_callback cb, void *user) {
  return ag_dqn_learn_ex(d, env, total_steps, NULL, cb, user);
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
  return ag__play(q, env, episodes, seed, ag__dqn_ops.policy_action, fn, mean, returns);
}
