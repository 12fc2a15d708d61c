/* ac_ops.c — SAC and TD3 as the training loop and the evaluations see them
 * (ag__ac_ops), their loop's entry point (ag_ac_learn) and the evaluation
 * of a policy network (ag_policy_evaluate, ag_ac_evaluate).
 */
#include <math.h>
#include <string.h>

#include "agrl/ac.h"
#include "agent/agent_internal.h"

/* The steps between two PHASE events of the loop. */
#define REPORT_EVERY 1000

static void start(ag__loop *ls) {
  ls->last_report = -REPORT_EVERY;
  ls->losses[0] = ls->losses[1] = NAN;
}

static int64_t act_width(const void *agent) { return ((const ag_ac *)agent)->act_dim; }
static ag_dist *dist_of(const void *agent) {
  (void)agent;
  return NULL;
}
static ag_ctx *ctx_of(const void *agent) { return ((const ag_ac *)agent)->ctx; }

/* uniform actions until learning starts, then the exploring policy's */
static ag_status act(void *agent, const float *obs, int n, int64_t step, float *actions, void *scratch) {
  ag_ac *a = agent;
  (void)scratch;
  return step < a->cfg.learning_starts ? ag_ac_act_random(a, n, actions) : ag_ac_act(a, obs, n, 1, actions);
}

static ag_status store(void *agent, const float *obs, const float *actions, const void *scratch,
                       const float *rewards, const float *next_obs, const int *terminated,
                       const int *truncated, int n) {
  (void)scratch;
  return ag_ac_store(agent, obs, actions, rewards, next_obs, terminated, truncated, n);
}

static int64_t train_freq(const void *agent) { return ((const ag_ac *)agent)->cfg.train_freq; }

/* the updates of a boundary; a PHASE event (with the losses and alpha)
 * at most every REPORT_EVERY steps */
static ag_status train(void *agent, ag__loop *ls, int *phase, ag_train_event *ev) {
  ag_ac *a = agent;
  int trained = ls->step > a->cfg.learning_starts && ag_replay_size(a->replay) >= a->cfg.batch_size &&
                a->cfg.gradient_steps > 0;
  int report = trained && ls->step - ls->last_report >= REPORT_EVERY;
  ag_status s = AG_OK;
  if (trained && (s = ag_ac_train(a, a->cfg.gradient_steps, report ? ls->losses : NULL))) return s;
  if (!report) return AG_OK;
  float alpha = 0;
  if ((s = ag_ac_alpha(a, &alpha))) return s;
  ls->last_report = ls->step;
  *phase = 1;
  ev->updates = a->updates;
  ev->loss = ls->losses[0];
  ev->actor_loss = ls->losses[1];
  ev->alpha = alpha;
  return AG_OK;
}

static void episode(const void *agent, const ag__loop *ls, ag_train_event *ev) {
  ev->updates = ((const ag_ac *)agent)->updates;
  ev->loss = ls->losses[0];
  ev->actor_loss = ls->losses[1];
}

static int has_eval(const ag_learn_opts *o) { return o->on_eval_ac != NULL; }
static ag_status eval(void *agent, const ag_learn_opts *o, int64_t step, int *enough) {
  return o->on_eval_ac(agent, step, enough, o->user);
}

static ag_status save(const void *agent, const char *path) { return ag_ac_save(agent, path); }
static ag_status set_run_state(void *agent, const void *data, size_t n) {
  return ag_ac_set_run_state(agent, data, n);
}
static const void *run_state(const void *agent, size_t *n) { return ag_ac_run_state(agent, n); }

/* an actor's squashed mean in the environment's bounds */
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

const ag__agent_ops ag__ac_ops = {
    .noun = "agent",
    .learn_fn = "ag_ac_learn",
    .run_fn = "ag_ac_learn",
    .load_fn = "ag_ac_load",
    .run_phase = 1,
    .start = start,
    .act_width = act_width,
    .scratch_per_copy = 0,
    .dist = dist_of,
    .ctx = ctx_of,
    .act = act,
    .store = store,
    .tick = NULL,
    .train_freq = train_freq,
    .train = train,
    .episode = episode,
    .has_eval = has_eval,
    .eval = eval,
    .save = save,
    .set_run_state = set_run_state,
    .run_state = run_state,
    .policy_action = squashed,
};

ag_status ag_ac_learn(ag_ac *a, ag_vec_env *env, int64_t total_steps, ag_learn_opts *o, ag_train_callback cb,
                      void *user) {
  static const char fn[] = "ag_ac_learn";
  if (!a || !env) return ag__fail(AG_ERR_INVALID_ARG, "%s: agent and env must not be NULL", fn);
  const ag_env_spec *spec = ag_vec_env_get_spec(env);
  if (spec->obs_dim != a->obs_dim || spec->n_actions != 0 || spec->act_dim != a->act_dim)
    return ag__fail(
        AG_ERR_SHAPE,
        "%s: the environment has %d observations and %d continuous actions, the agent %lld and %lld", fn,
        spec->obs_dim, spec->act_dim, (long long)a->obs_dim, (long long)a->act_dim);
  ag_status s = ag__learn_check_opts(o, fn);
  if (s) return s;
  const int n = ag_vec_env_size(env);
  if (a->cfg.n_step > 1 && n != a->cfg.n_envs)
    return ag__fail(
        AG_ERR_INVALID_ARG,
        "%s: n-step returns walk every n_envs-th column: the agent has n_envs = %lld, the vector %d "
        "copies",
        fn, (long long)a->cfg.n_envs, n);
  return ag__learn(&ag__ac_ops, a, env, total_steps, o, cb, user);
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
  return ag__play(pol, env, episodes, seed, ag__ac_ops.policy_action, fn, mean, returns);
}

ag_status ag_ac_evaluate(ag_ac *a, ag_env *env, int episodes, uint64_t seed, double *mean, double *returns) {
  if (!a) return ag__fail(AG_ERR_INVALID_ARG, "ag_ac_evaluate: agent is NULL");
  ag_status s = ag__ac_check_sound(a, "ag_ac_evaluate");
  if (s) return s;
  const ag_env_spec *spec = env ? ag_env_get_spec(env) : NULL;
  if (spec && (spec->n_actions != 0 || spec->act_dim != a->act_dim || spec->obs_dim != a->obs_dim))
    return ag__fail(AG_ERR_SHAPE,
                    "ag_ac_evaluate: the environment has %d observations and %s %d actions; the agent %lld "
                    "observations and %lld continuous actions",
                    spec->obs_dim, spec->n_actions ? "discrete" : "continuous",
                    spec->n_actions ? spec->n_actions : spec->act_dim, (long long)a->obs_dim,
                    (long long)a->act_dim);
  return ag_policy_evaluate(a->actor, env, episodes, seed, mean, returns);
}
