/* test_env.c — the environment layer (agrl/env.h) on the host.
 *
 * References: trajectories of Gymnasium 1.0.0 itself (tests/data/env_vectors.h,
 * written by tests/gen/gen_env_vectors.py) replayed step by step from the
 * same start states; Gymnasium's registry for the specs; splitmix64's
 * published outputs for the start-state generator; single environments
 * stepped beside a vector environment for autoreset; hand-computed states
 * for the termination thresholds. Run as `test_env cpu`.
 */
#include <math.h>

#include "agt.h"
#include "agrl/env.h"
#include "data/env_vectors.h"
#include "env/env_internal.h"

#define N_REF_RUNS ((int)(sizeof env_ref_runs / sizeof env_ref_runs[0]))
#define N_REF_SPECS ((int)(sizeof env_ref_specs / sizeof env_ref_specs[0]))
#define MAX_OBS 8

static ag_env *make_env(const char *name) {
  ag_env *e = NULL;
  agt_ok(ag_env_create(name, &e));
  assert_non_null(e);
  return e;
}

static int obs_dim(const ag_env *e) { return ag_env_get_spec(e)->obs_dim; }

/* One step that must succeed; returns terminated | truncated << 1. */
static int step1(ag_env *e, float action, float *obs, float *reward) {
  int term = -1, trunc = -1;
  agt_ok(ag_env_step(e, &action, obs, reward, &term, &trunc));
  assert_true(term == 0 || term == 1);
  assert_true(trunc == 0 || trunc == 1);
  return term | trunc << 1;
}

/* ---- a user-defined environment: a counter ---- */

typedef struct counter_env {
  int count;
  uint64_t last_seed;
  int resets;
  int fail_on_action; /* step fails (changing nothing) for this action; -1: never */
  int *frees;         /* incremented when freed */
} counter_env;

/* obs = (steps so far, seed % 1000) after a reset; (steps so far, action) after a step. */
static ag_status counter_reset(void *state, uint64_t seed, float *obs) {
  counter_env *c = state;
  c->count = 0;
  c->last_seed = seed;
  c->resets++;
  obs[0] = 0.0f;
  obs[1] = (float)(seed % 1000u);
  return AG_OK;
}

/* reward = the action; terminated when the action is 2. */
static ag_status counter_step(void *state, const float *action, float *obs, float *reward, int *terminated) {
  counter_env *c = state;
  int a = (int)action[0];
  if (a == c->fail_on_action) return AG_ERR_UNSUPPORTED;
  c->count++;
  obs[0] = (float)c->count;
  obs[1] = (float)a;
  *reward = (float)a;
  *terminated = a == 2;
  return AG_OK;
}

static void counter_free(void *state) {
  counter_env *c = state;
  if (c->frees) (*c->frees)++;
  free(c);
}

static const ag_env_ops counter_ops = {counter_reset, counter_step, counter_free};
static const ag_env_spec counter_spec = {"Counter-v0", 2, 3, 0, NULL, NULL, 5, 10.0f, {0, 0, 0}};

static ag_env *make_counter(int *frees, counter_env **state_out) {
  counter_env *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->fail_on_action = -1;
  c->frees = frees;
  ag_env *e = NULL;
  agt_ok(ag_env_create_custom(&counter_ops, c, &counter_spec, &e));
  if (state_out) *state_out = c;
  return e;
}

/* ---- specs ---- */

static void builtin_specs_match_gymnasium_registry(void **state) {
  (void)state;
  for (int k = 0; k < N_REF_SPECS; k++) {
    const env_ref_spec *r = &env_ref_specs[k];
    const char *short_name = ag_env_builtin_name(k);
    assert_non_null(short_name);
    const char *names[2] = {r->id, short_name};
    for (int n = 0; n < 2; n++) {
      ag_env *e = make_env(names[n]);
      const ag_env_spec *s = ag_env_get_spec(e);
      assert_string_equal(s->id, r->id);
      assert_int_equal(s->obs_dim, r->obs_dim);
      assert_int_equal(s->n_actions, r->n_actions);
      assert_int_equal(s->act_dim, r->act_dim);
      assert_int_equal(s->max_episode_steps, r->max_episode_steps);
      if (isnan(r->reward_threshold))
        assert_true(isnan(s->reward_threshold));
      else
        assert_true(s->reward_threshold == r->reward_threshold);
      if (r->act_dim > 0) {
        assert_non_null(s->act_low);
        assert_true(s->act_low[0] == r->act_low[0] && s->act_high[0] == r->act_high[0]);
      } else {
        assert_null(s->act_low);
        assert_null(s->act_high);
      }
      ag_env_free(e);
    }
  }
  /* then the MinAtar games (tests/test_minatar.c) */
  static const char *const minatar[] = {"breakout-minatar", "freeway-minatar", "asterix-minatar",
                                        "space_invaders-minatar", "seaquest-minatar"};
  for (int k = 0; k < (int)(sizeof minatar / sizeof minatar[0]); k++)
    assert_string_equal(ag_env_builtin_name(N_REF_SPECS + k), minatar[k]);
  assert_null(ag_env_builtin_name(N_REF_SPECS + (int)(sizeof minatar / sizeof minatar[0])));
  assert_null(ag_env_builtin_name(-1));
  assert_null(ag_env_get_spec(NULL));
}

/* ---- Gymnasium's own trajectories ---- */

/* Replays every reference run; tol < 0 asks for bit-identical observations. */
static void replay_reference_runs(double tol) {
  for (int k = 0; k < N_REF_RUNS; k++) {
    const env_ref_run *r = &env_ref_runs[k];
    ag_env *e = make_env(r->env);
    const ag_env_spec *spec = ag_env_get_spec(e);
    const int od = spec->obs_dim, aw = spec->n_actions > 0 ? 1 : spec->act_dim;
    float obs[MAX_OBS], reward;
    agt_ok(ag__env_set_state(e, r->start, obs));
    for (int i = 0; i < od; i++)
      if (obs[i] != r->start_obs[i])
        fail_msg("%s: start observation [%d] is %.9g, Gymnasium %.9g", r->name, i, (double)obs[i],
                 (double)r->start_obs[i]);
    int next_state = 0; /* the next recorded float64 state */
    for (int t = 0; t < r->n_steps; t++) {
      int term = -1, trunc = -1;
      agt_ok(ag_env_step(e, r->actions + t * aw, obs, &reward, &term, &trunc));
      for (int i = 0; i < od; i++) {
        double got = obs[i], want = r->obs[t * od + i];
        int ok = tol < 0 ? memcmp(&obs[i], &r->obs[t * od + i], sizeof(float)) == 0
                         : fabs(got - want) <= tol * fmax(1.0, fabs(want));
        if (!ok) fail_msg("%s step %d: obs[%d] = %.9g, Gymnasium %.9g", r->name, t + 1, i, got, want);
      }
      if (reward != r->rewards[t])
        fail_msg("%s step %d: reward %.9g, Gymnasium %.9g", r->name, t + 1, (double)reward,
                 (double)r->rewards[t]);
      if (next_state < r->n_states && r->state_steps[next_state] == t + 1) {
        double st[AG__MAX_STATE];
        int sd = 0;
        agt_ok(ag__env_get_state(e, st, &sd));
        for (int i = 0; i < sd; i++) {
          double want = r->states[next_state * sd + i];
          int ok = tol < 0 ? memcmp(&st[i], &want, sizeof want) == 0
                           : fabs(st[i] - want) <= tol * fmax(1.0, fabs(want));
          if (!ok) fail_msg("%s step %d: state[%d] = %a, Gymnasium %a", r->name, t + 1, i, st[i], want);
        }
        next_state++;
      }
      int last = t == r->n_steps - 1;
      if (term != (last ? r->terminated : 0) || trunc != (last ? r->truncated : 0))
        fail_msg("%s step %d: terminated %d truncated %d, Gymnasium %d %d", r->name, t + 1, term, trunc,
                 last ? r->terminated : 0, last ? r->truncated : 0);
    }
    assert_int_equal(next_state, r->n_states);
    if (r->terminated || r->truncated)
      agt_err(ag_env_step(e, r->actions, obs, &reward, &(int){0}, &(int){0}), AG_ERR_STATE, "call reset");
    ag_env_free(e);
  }
}

static void every_step_matches_gymnasium_trajectories_within_1e6(void **state) {
  (void)state;
  replay_reference_runs(1e-6);
}

/* With the same libm as numpy (glibc), the float64 arithmetic is the same
 * operation for operation, so the float32 observations and the recorded
 * float64 states agree in every bit. */
static void every_step_is_bit_identical_to_gymnasium_with_glibc(void **state) {
  (void)state;
#ifdef __GLIBC__
  replay_reference_runs(-1.0);
#else
  skip();
#endif
}

/* ---- the tasks' thresholds, computed by hand ---- */

static void cartpole_terminates_when_pole_falls_past_12_degrees(void **state) {
  (void)state;
  const double limit = 12 * 2 * 3.141592653589793 / 360; /* 0.2094 rad */
  ag_env *e = make_env("cartpole");
  float obs[4], r;
  /* theta 0.2 + 0.02 * 0.5 = 0.21 > limit: the step that passes it terminates, with reward 1 */
  agt_ok(ag__env_set_state(e, (const double[]){0.0, 0.0, 0.2, 0.5}, obs));
  assert_int_equal(step1(e, 1.0f, obs, &r), 1);
  assert_true(obs[2] > limit && r == 1.0f);
  /* theta 0.2 with no angular velocity stays below it */
  agt_ok(ag__env_set_state(e, (const double[]){0.0, 0.0, 0.2, 0.0}, obs));
  assert_int_equal(step1(e, 0.0f, obs, &r), 0);
  assert_true(obs[2] < limit && r == 1.0f);
  /* the same to the left */
  agt_ok(ag__env_set_state(e, (const double[]){0.0, 0.0, -0.2, -0.5}, obs));
  assert_int_equal(step1(e, 0.0f, obs, &r), 1);
  /* the cart leaving [-2.4, 2.4] */
  agt_ok(ag__env_set_state(e, (const double[]){2.39, 1.0, 0.0, 0.0}, obs));
  assert_int_equal(step1(e, 1.0f, obs, &r), 1);
  assert_true(obs[0] > 2.4f);
  agt_ok(ag__env_set_state(e, (const double[]){-2.39, -0.4, 0.0, 0.0}, obs));
  assert_int_equal(step1(e, 0.0f, obs, &r), 0); /* -2.398 is still inside */
  assert_int_equal(step1(e, 0.0f, obs, &r), 1);
  ag_env_free(e);
}

static void mountaincar_terminates_at_goal_and_stops_at_left_wall(void **state) {
  (void)state;
  ag_env *e = make_env("MountainCar-v0");
  float obs[2], r;
  agt_ok(ag__env_set_state(e, (const double[]){0.49, 0.02}, obs));
  assert_int_equal(step1(e, 2.0f, obs, &r), 1);
  assert_true(obs[0] >= 0.5f && obs[1] >= 0.0f && r == -1.0f);
  /* at the goal position but moving back: not done */
  agt_ok(ag__env_set_state(e, (const double[]){0.52, -0.01}, obs));
  assert_int_equal(step1(e, 0.0f, obs, &r), 0);
  /* hitting the left wall: position -1.2 and velocity zeroed */
  agt_ok(ag__env_set_state(e, (const double[]){-1.19, -0.05}, obs));
  assert_int_equal(step1(e, 0.0f, obs, &r), 0);
  assert_true(obs[0] == -1.2f && obs[1] == 0.0f);
  ag_env_free(e);
}

static void acrobot_terminates_when_tip_rises_above_one_link(void **state) {
  (void)state;
  ag_env *e = make_env("acrobot");
  float obs[6], r;
  /* hanging still: stays there (up to cos(-pi/2) = 6e-17 in the gravity term), reward -1 */
  agt_ok(ag__env_set_state(e, (const double[]){0.0, 0.0, 0.0, 0.0}, obs));
  assert_true(obs[0] == 1.0f && obs[1] == 0.0f && obs[2] == 1.0f && obs[3] == 0.0f);
  assert_int_equal(step1(e, 1.0f, obs, &r), 0);
  assert_true(r == -1.0f);
  for (int i = 0; i < 6; i++) assert_true(fabsf(obs[i] - (i == 0 || i == 2 ? 1.0f : 0.0f)) < 1e-12f);
  /* straight up (s0 = pi): -cos(pi) - cos(pi) = 2 > 1, reward 0 */
  agt_ok(ag__env_set_state(e, (const double[]){3.0, 0.0, 0.0, 0.0}, obs));
  assert_int_equal(step1(e, 1.0f, obs, &r), 1);
  assert_true(r == 0.0f);
  ag_env_free(e);
}

/* Puts twins a and b in state s, steps them with actions xa and xb, checks
 * that they reach the same observation and neither terminates; their rewards
 * go to *ra and *rb. */
static void step_twins(ag_env *a, ag_env *b, const double *s, float xa, float xb, float *ra, float *rb) {
  float oa[MAX_OBS], ob[MAX_OBS];
  int ta, tra, tb, trb;
  agt_ok(ag__env_set_state(a, s, oa));
  agt_ok(ag__env_set_state(b, s, ob));
  agt_ok(ag_env_step(a, &xa, oa, ra, &ta, &tra));
  agt_ok(ag_env_step(b, &xb, ob, rb, &tb, &trb));
  assert_memory_equal(oa, ob, (size_t)obs_dim(a) * sizeof(float));
  assert_true(ta == 0 && tb == 0);
}

static void pendulum_clips_torque_to_two_like_gymnasium(void **state) {
  (void)state;
  ag_env *a = make_env("pendulum"), *b = make_env("Pendulum-v1");
  const double s[2] = {0.5, -1.0};
  const float pairs[][2] = {{5.0f, 2.0f}, {-100.0f, -2.0f}, {2.0f, 2.0f}, {1e30f, 2.0f}};
  for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
    float ra, rb;
    step_twins(a, b, s, pairs[k][0], pairs[k][1], &ra, &rb);
    assert_true(ra == rb);
  }
  ag_env_free(a);
  ag_env_free(b);
}

/* Force clipped to [-1, 1], the reward's -0.1 a^2 on the action as given,
 * +100 at the goal (position >= 0.45, velocity >= 0), the left wall. */
static void mountaincar_continuous_clips_force_and_pays_at_goal(void **state) {
  (void)state;
  ag_env *a = make_env("mountaincar_continuous"), *b = make_env("MountainCarContinuous-v0");
  const double s[2] = {-0.5, 0.01};
  const float pairs[][2] = {{5.0f, 1.0f}, {-100.0f, -1.0f}, {1e30f, 1.0f}};
  for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
    float ra, rb;
    step_twins(a, b, s, pairs[k][0], pairs[k][1], &ra, &rb);
    assert_true(rb == -0.1f);
    assert_true(ra == (float)(-ag__pow2((double)pairs[k][0]) * 0.1)); /* unclipped */
  }
  float obs[2], r;
  /* the goal: terminated, 100 - 0.1 * 0.5^2 */
  agt_ok(ag__env_set_state(a, (const double[]){0.44, 0.02}, obs));
  assert_int_equal(step1(a, 0.5f, obs, &r), 1);
  assert_true(obs[0] >= 0.45f && obs[1] >= 0.0f && r == (float)(100.0 - 0.25 * 0.1));
  /* past the goal position but moving back: not done, no bonus */
  agt_ok(ag__env_set_state(a, (const double[]){0.47, -0.01}, obs));
  assert_int_equal(step1(a, 0.0f, obs, &r), 0);
  assert_true(r == 0.0f);
  /* the left wall: position -1.2, velocity zeroed, on the first step (float64 state) */
  agt_ok(ag__env_set_state(a, (const double[]){-1.19, -0.05}, obs));
  assert_int_equal(step1(a, -1.0f, obs, &r), 0);
  assert_true(obs[0] == -1.2f && obs[1] == 0.0f && r == -0.1f);
  assert_int_equal(step1(a, -1.0f, obs, &r), 0);
  assert_true(obs[0] > -1.2f && obs[1] > 0.0f); /* the slope pushes it back out */
  /* and on a later one (float32 state): -1.139, -1.177, then the wall */
  agt_ok(ag__env_set_state(a, (const double[]){-1.1, -0.04}, obs));
  for (int t = 0; t < 2; t++) {
    assert_int_equal(step1(a, -1.0f, obs, &r), 0);
    assert_true(obs[0] > -1.2f && obs[1] < 0.0f);
  }
  assert_int_equal(step1(a, -1.0f, obs, &r), 0);
  assert_true(obs[0] == -1.2f && obs[1] == 0.0f);
  ag_env_free(a);
  ag_env_free(b);
}

/* ---- time limits ---- */

static float balance(const float *o) { return o[2] + 0.5f * o[3] + 0.05f * o[0] + 0.2f * o[1] > 0.0f; }

static void every_builtin_truncates_at_its_max_episode_steps(void **state) {
  (void)state;
  for (int k = 0; k < N_REF_SPECS; k++) /* the classic-control tasks */ {
    ag_env *e = make_env(ag_env_builtin_name(k));
    const ag_env_spec *spec = ag_env_get_spec(e);
    float obs[MAX_OBS], r;
    agt_ok(ag_env_reset(e, 11, obs));
    for (int t = 1; t <= spec->max_episode_steps; t++) {
      /* policies that never end the task: balance the pole, zero torque, coast */
      float a = spec->id[0] == 'C' ? balance(obs) : spec->n_actions == 3 ? 1.0f : 0.0f;
      int flags = step1(e, a, obs, &r);
      if (flags != (t == spec->max_episode_steps ? 2 : 0))
        fail_msg("%s step %d: terminated %d truncated %d", spec->id, t, flags & 1, flags >> 1);
    }
    agt_err(ag_env_step(e, &(float){0.0f}, obs, &r, &(int){0}, &(int){0}), AG_ERR_STATE,
            "ended (truncated) at step");
    agt_ok(ag_env_reset(e, 12, obs)); /* a reset starts the count again */
    assert_int_equal(step1(e, spec->id[0] == 'C' ? balance(obs) : 0.0f, obs, &r), 0);
    ag_env_free(e);
  }
}

static void terminated_and_truncated_both_set_when_task_ends_on_last_step(void **state) {
  (void)state;
  ag_env *e = make_counter(NULL, NULL);
  float obs[2], r;
  agt_ok(ag_env_reset(e, 1, obs));
  for (int t = 0; t < 4; t++) assert_int_equal(step1(e, 0.0f, obs, &r), 0);
  assert_int_equal(step1(e, 2.0f, obs, &r), 3); /* step 5 of 5, and the task ends */
  agt_err(ag_env_step(e, &(float){0.0f}, obs, &r, &(int){0}, &(int){0}), AG_ERR_STATE,
          "ended (terminated and truncated) at step 5");
  ag_env_free(e);
}

/* ---- seeds ---- */

static uint64_t ref_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void reset_draws_start_state_from_documented_splitmix64(void **state) {
  (void)state;
  /* splitmix64's published first outputs for seed 0 */
  assert_true(ref_mix(0x9E3779B97F4A7C15ull) == 0xE220A8397B1DCDAFull);
  assert_true(ref_mix(2 * 0x9E3779B97F4A7C15ull) == 0x6E789E6AA1B965F4ull);
  ag_env *e = make_env("cartpole");
  const uint64_t seeds[] = {0, 1, 42, UINT64_MAX};
  for (size_t k = 0; k < 4; k++) {
    uint64_t d = ref_mix(ref_mix(seeds[k]) + 0x9E3779B97F4A7C15ull);
    assert_true(ag_env_derive_seed(seeds[k], 0) == d);
    assert_true(ag_env_derive_seed(seeds[k], 6) == ref_mix(ref_mix(seeds[k]) + 7 * 0x9E3779B97F4A7C15ull));
    float obs[4];
    agt_ok(ag_env_reset(e, seeds[k], obs));
    for (int i = 0; i < 4; i++) {
      d += 0x9E3779B97F4A7C15ull;
      double u = (double)(ref_mix(d) >> 11) * 0x1.0p-53;
      assert_true(obs[i] == (float)(-0.05 + 0.1 * u));
    }
  }
  ag_env_free(e);
}

/* The agents' named streams give the seeds their inline formulas gave
 * before base/seed.h named them (the values every seeded run depends on),
 * and the one splitmix64 is the published generator. */
static void seed_streams_keep_their_values(void **state) {
  (void)state;
  const uint64_t seeds[] = {0, 1, 3, 42, 0xFFFFFFFFull, UINT64_MAX};
  for (size_t k = 0; k < 6; k++) {
    const uint64_t s = seeds[k];
    for (uint64_t r = 0; r < 4; r++) {
      assert_true(ag__seed_stream(AG__SEED_DQN_HOST, s, r) ==
                  (s ^ 0x5DEECE66Dull) + r * 0xD1B54A32D192ED03ull);
      assert_true(ag__seed_stream(AG__SEED_DQN_UPDATE, s, r) ==
                  s * 0x9E3779B97F4A7C15ull + 17 + r * 0x632BE59BD9B4E019ull);
    }
    assert_true(ag__seed_stream(AG__SEED_DQN_NETS, s, 1) == s * 2 + 1);
    assert_true(ag__seed_stream(AG__SEED_DQN_NETS, s, 2) == s * 2 + 2);
    assert_true(ag__seed_stream(AG__SEED_AC_HOST, s, 0) == (s ^ 0xA5A5C3C3F00DBEEFull));
    for (uint64_t i = 1; i <= 6; i++) assert_true(ag__seed_stream(AG__SEED_AC_NETS, s, i) == s * 8 + i);
    assert_true(ag__seed_stream(AG__SEED_AC_UPDATE, s, 0) == s * 0x9E3779B97F4A7C15ull + 0xAC);
    assert_true(ag__seed_stream(AG__SEED_AC_ACT, s, 0) == s * 0xD1B54A32D192ED03ull + 0xAC7);
    assert_true(ag__seed_hash(s, 5) == ref_mix(ref_mix(s) + 6 * 0x9E3779B97F4A7C15ull));
    uint64_t a = s, b = s;
    for (int i = 0; i < 8; i++) {
      b += 0x9E3779B97F4A7C15ull;
      assert_true(ag__splitmix64(&a) == ref_mix(b));
    }
  }
  uint64_t z = 0; /* splitmix64's published first outputs for seed 0 */
  assert_true(ag__splitmix64(&z) == 0xE220A8397B1DCDAFull);
  assert_true(ag__splitmix64(&z) == 0x6E789E6AA1B965F4ull);
  z = 0;
  assert_true(ag__splitmix64_unit(&z) == (double)(0xE220A8397B1DCDAFull >> 11) * 0x1.0p-53);
}

/* Runs one episode (at most 600 steps) from `seed` with actions from g; returns its length. */
static int episode(ag_env *e, uint64_t seed, agt_rng *g, float *trace) {
  const ag_env_spec *s = ag_env_get_spec(e);
  float obs[MAX_OBS], r;
  agt_ok(ag_env_reset(e, seed, obs));
  memcpy(trace, obs, (size_t)s->obs_dim * sizeof *obs);
  int t = 0;
  for (; t < 600; t++) {
    float a = s->n_actions > 0 ? (float)agt_below(g, s->n_actions) : agt_uniform(g, -2.0f, 2.0f);
    int flags = step1(e, a, obs, &r);
    memcpy(trace + (size_t)(t + 1) * (size_t)(s->obs_dim + 1), obs, (size_t)s->obs_dim * sizeof *obs);
    trace[(size_t)(t + 1) * (size_t)(s->obs_dim + 1) + (size_t)s->obs_dim] = r;
    if (flags) break;
  }
  return t + 1;
}

static void same_seed_gives_identical_episode(void **state) {
  (void)state;
  const size_t n = 602 * (MAX_OBS + 1);
  float *t1 = calloc(n, sizeof *t1), *t2 = calloc(n, sizeof *t2), *t3 = calloc(n, sizeof *t3);
  assert_true(t1 && t2 && t3);
  for (int k = 0; k < N_REF_SPECS; k++) /* the classic-control tasks */ {
    ag_env *a = make_env(ag_env_builtin_name(k)), *b = make_env(ag_env_builtin_name(k));
    agt_rng g1 = {99}, g2 = {99}, g3 = {99};
    int l1 = episode(a, 1234, &g1, t1);
    int l2 = episode(b, 1234, &g2, t2);
    int l3 = episode(a, 1234, &g3, t3); /* the same handle again, after an episode */
    assert_int_equal(l1, l2);
    assert_int_equal(l1, l3);
    assert_memory_equal(t1, t2, n * sizeof *t1);
    assert_memory_equal(t1, t3, n * sizeof *t1);
    ag_env_free(a);
    ag_env_free(b);
  }
  free(t1);
  free(t2);
  free(t3);
}

static void different_seeds_give_different_start_states(void **state) {
  (void)state;
  for (int k = 0; k < N_REF_SPECS; k++) /* the classic-control tasks */ {
    ag_env *e = make_env(ag_env_builtin_name(k));
    float starts[100][MAX_OBS];
    const int od = obs_dim(e);
    for (int s = 0; s < 100; s++) {
      agt_ok(ag_env_reset(e, (uint64_t)s, starts[s]));
      for (int p = 0; p < s; p++)
        if (memcmp(starts[s], starts[p], (size_t)od * sizeof(float)) == 0)
          fail_msg("%s: seeds %d and %d give the same start state", ag_env_builtin_name(k), p, s);
    }
    ag_env_free(e);
  }
}

/* Start-state ranges as Gymnasium documents them; the draws also cover them. */
static void start_states_lie_in_gymnasium_ranges(void **state) {
  (void)state;
  typedef struct range {
    const char *env;
    int comp; /* observation component, or -1-k for the angle atan2(obs[2k+1], obs[2k]) */
    double lo, hi;
  } range;
  const double pi = 3.141592653589793;
  const range ranges[] = {
      {"cartpole", 0, -0.05, 0.05},
      {"cartpole", 1, -0.05, 0.05},
      {"cartpole", 2, -0.05, 0.05},
      {"cartpole", 3, -0.05, 0.05},
      {"acrobot", -1, -0.1, 0.1},
      {"acrobot", -2, -0.1, 0.1},
      {"acrobot", 4, -0.1, 0.1},
      {"acrobot", 5, -0.1, 0.1},
      {"mountaincar", 0, -0.6, -0.4},
      {"mountaincar", 1, 0.0, 0.0},
      {"pendulum", -1, -pi, pi},
      {"pendulum", 2, -1.0, 1.0},
      {"mountaincar_continuous", 0, -0.6, -0.4},
      {"mountaincar_continuous", 1, 0.0, 0.0},
  };
  for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
    const range *q = &ranges[k];
    ag_env *e = make_env(q->env);
    double mn = INFINITY, mx = -INFINITY;
    for (uint64_t s = 0; s < 2000; s++) {
      float obs[MAX_OBS];
      agt_ok(ag_env_reset(e, ag_env_derive_seed(77, s), obs));
      double v = q->comp >= 0 ? obs[q->comp] : atan2(obs[-2 * q->comp - 1], obs[-2 * q->comp - 2]);
      mn = fmin(mn, v);
      mx = fmax(mx, v);
    }
    const double slack = 1e-6, w = q->hi - q->lo;
    if (mn < q->lo - slack || mx > q->hi + slack)
      fail_msg("%s component %d: start values in [%g, %g], outside [%g, %g]", q->env, q->comp, mn, mx, q->lo,
               q->hi);
    if (mn > q->lo + 0.01 * w || mx < q->hi - 0.01 * w)
      fail_msg("%s component %d: 2000 start values only cover [%g, %g] of [%g, %g]", q->env, q->comp, mn, mx,
               q->lo, q->hi);
    ag_env_free(e);
  }
}

/* ---- bad input ---- */

typedef struct fixture {
  ag_env *cart, *cart_twin; /* reset with the same seed, stepped alike */
  ag_env *pend, *pend_twin;
  ag_vec_env *vec, *vec_twin; /* 3 cartpoles */
  ag_env *fresh;              /* never reset */
  ag_env *ended;              /* its episode terminated */
  ag_vec_env *vec_fresh;      /* never reset */
  ag_env *counter;            /* a user environment */
  int counter_frees;
  ag_env *eout; /* out-parameter sentinels */
  ag_vec_env *vout;
  ag_episode_info info;
  float obs[3 * MAX_OBS], rewards[3], final_obs[3 * MAX_OBS];
  int term[3], trunc[3];
  float action[3];
  ag_env_spec spec;
  ag_env_ops ops;
  counter_env custom_state;
  ag_env *envs[3];
} fixture;

#define SENTINEL_E ((ag_env *)(uintptr_t)0xABCD)
#define SENTINEL_V ((ag_vec_env *)(uintptr_t)0xABCD)
#define SENTINEL_F 777.0f

typedef struct bad_call {
  const char *what;
  ag_status expect;
  const char *part;
  ag_status (*call)(fixture *f);
} bad_call;

#define F(name) static ag_status name(fixture *f)
F(create_name_null) { return ag_env_create(NULL, &f->eout); }
F(create_name_unknown) { return ag_env_create("Pong-v5", &f->eout); }
F(create_name_lists_known) { return ag_env_create("cart-pole", &f->eout); }
F(create_out_null) { return ag_env_create("cartpole", NULL); }
F(custom_ops_null) { return ag_env_create_custom(NULL, &f->custom_state, &f->spec, &f->eout); }
F(custom_reset_null) {
  f->ops.reset = NULL;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_step_null) {
  f->ops.step = NULL;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_spec_null) { return ag_env_create_custom(&f->ops, &f->custom_state, NULL, &f->eout); }
F(custom_out_null) { return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, NULL); }
F(custom_obs_dim_zero) {
  f->spec.obs_dim = 0;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_obs_shape_not_obs_dim) { /* the counter's obs_dim is 2 */
  f->spec.obs_shape[0] = 1, f->spec.obs_shape[1] = 1, f->spec.obs_shape[2] = 3;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_obs_shape_zero_size) {
  f->spec.obs_shape[0] = 2, f->spec.obs_shape[1] = 0, f->spec.obs_shape[2] = 1;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_both_kinds) {
  f->spec.act_dim = 2;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_no_kind) {
  f->spec.n_actions = 0;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_negative_actions) {
  f->spec.n_actions = -2;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_max_steps_negative) {
  f->spec.max_episode_steps = -1;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_one_bound) {
  static const float lo[2] = {-1.0f, -1.0f};
  f->spec.n_actions = 0, f->spec.act_dim = 2, f->spec.act_low = lo;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_low_above_high) {
  static const float lo[2] = {-1.0f, 3.0f}, hi[2] = {1.0f, 2.0f};
  f->spec.n_actions = 0, f->spec.act_dim = 2, f->spec.act_low = lo, f->spec.act_high = hi;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(custom_bounds_discrete) {
  static const float lo[1] = {-1.0f}, hi[1] = {1.0f};
  f->spec.act_low = lo, f->spec.act_high = hi;
  return ag_env_create_custom(&f->ops, &f->custom_state, &f->spec, &f->eout);
}
F(reset_env_null) { return ag_env_reset(NULL, 1, f->obs); }
F(reset_obs_null) { return ag_env_reset(f->cart, 1, NULL); }
F(step_env_null) { return ag_env_step(NULL, f->action, f->obs, f->rewards, f->term, f->trunc); }
F(step_action_null) { return ag_env_step(f->cart, NULL, f->obs, f->rewards, f->term, f->trunc); }
F(step_obs_null) { return ag_env_step(f->cart, f->action, NULL, f->rewards, f->term, f->trunc); }
F(step_reward_null) { return ag_env_step(f->cart, f->action, f->obs, NULL, f->term, f->trunc); }
F(step_terminated_null) { return ag_env_step(f->cart, f->action, f->obs, f->rewards, NULL, f->trunc); }
F(step_truncated_null) { return ag_env_step(f->cart, f->action, f->obs, f->rewards, f->term, NULL); }
F(step_action_2) {
  f->action[0] = 2.0f;
  return ag_env_step(f->cart, f->action, f->obs, f->rewards, f->term, f->trunc);
}
F(step_action_minus_1) {
  f->action[0] = -1.0f;
  return ag_env_step(f->cart, f->action, f->obs, f->rewards, f->term, f->trunc);
}
F(step_action_huge) {
  f->action[0] = 1e10f;
  return ag_env_step(f->cart, f->action, f->obs, f->rewards, f->term, f->trunc);
}
F(step_action_half) {
  f->action[0] = 0.5f;
  return ag_env_step(f->cart, f->action, f->obs, f->rewards, f->term, f->trunc);
}
F(step_action_nan) {
  f->action[0] = NAN;
  return ag_env_step(f->cart, f->action, f->obs, f->rewards, f->term, f->trunc);
}
F(step_action_inf) {
  f->action[0] = INFINITY;
  return ag_env_step(f->cart, f->action, f->obs, f->rewards, f->term, f->trunc);
}
F(step_torque_nan) {
  f->action[0] = NAN;
  return ag_env_step(f->pend, f->action, f->obs, f->rewards, f->term, f->trunc);
}
F(step_torque_inf) {
  f->action[0] = -INFINITY;
  return ag_env_step(f->pend, f->action, f->obs, f->rewards, f->term, f->trunc);
}
F(step_before_reset) { return ag_env_step(f->fresh, f->action, f->obs, f->rewards, f->term, f->trunc); }
F(step_after_termination) { return ag_env_step(f->ended, f->action, f->obs, f->rewards, f->term, f->trunc); }
F(set_state_custom) { return ag__env_set_state(f->counter, (const double[]){0, 0}, f->obs); }
F(set_state_nan) { return ag__env_set_state(f->cart, (const double[]){0, NAN, 0, 0}, f->obs); }
F(set_state_null) { return ag__env_set_state(f->cart, NULL, f->obs); }
F(vec_create_name_null) { return ag_vec_env_create(NULL, 2, 1, &f->vout); }
F(vec_create_unknown) { return ag_vec_env_create("Breakout", 2, 1, &f->vout); }
F(vec_create_n_zero) { return ag_vec_env_create("cartpole", 0, 1, &f->vout); }
F(vec_create_n_negative) { return ag_vec_env_create("cartpole", -4, 1, &f->vout); }
F(vec_create_out_null) { return ag_vec_env_create("cartpole", 2, 1, NULL); }
F(vec_from_envs_null) { return ag_vec_env_create_from(NULL, 2, 1, &f->vout); }
F(vec_from_n_zero) { return ag_vec_env_create_from(f->envs, 0, 1, &f->vout); }
F(vec_from_out_null) { return ag_vec_env_create_from(f->envs, 2, 1, NULL); }
F(vec_from_env_null) {
  f->envs[1] = NULL;
  return ag_vec_env_create_from(f->envs, 2, 1, &f->vout);
}
F(vec_from_repeated) {
  f->envs[2] = f->envs[0];
  return ag_vec_env_create_from(f->envs, 3, 1, &f->vout);
}
F(vec_from_mismatch) {
  f->envs[1] = f->pend_twin;
  return ag_vec_env_create_from(f->envs, 2, 1, &f->vout);
}
F(vec_reset_null) { return ag_vec_env_reset(NULL, f->obs); }
F(vec_reset_obs_null) { return ag_vec_env_reset(f->vec, NULL); }
F(vec_step_null) {
  return ag_vec_env_step(NULL, f->action, f->obs, f->rewards, f->term, f->trunc, f->final_obs);
}
F(vec_step_actions_null) {
  return ag_vec_env_step(f->vec, NULL, f->obs, f->rewards, f->term, f->trunc, f->final_obs);
}
F(vec_step_obs_null) {
  return ag_vec_env_step(f->vec, f->action, NULL, f->rewards, f->term, f->trunc, f->final_obs);
}
F(vec_step_rewards_null) {
  return ag_vec_env_step(f->vec, f->action, f->obs, NULL, f->term, f->trunc, f->final_obs);
}
F(vec_step_term_null) {
  return ag_vec_env_step(f->vec, f->action, f->obs, f->rewards, NULL, f->trunc, f->final_obs);
}
F(vec_step_trunc_null) {
  return ag_vec_env_step(f->vec, f->action, f->obs, f->rewards, f->term, NULL, f->final_obs);
}
F(vec_step_before_reset) {
  return ag_vec_env_step(f->vec_fresh, f->action, f->obs, f->rewards, f->term, f->trunc, f->final_obs);
}
F(vec_step_bad_action_copy_2) {
  f->action[2] = 5.0f;
  return ag_vec_env_step(f->vec, f->action, f->obs, f->rewards, f->term, f->trunc, f->final_obs);
}
F(vec_step_nan_action_copy_1) {
  f->action[1] = NAN;
  return ag_vec_env_step(f->vec, f->action, f->obs, f->rewards, f->term, f->trunc, f->final_obs);
}
F(vec_last_null) { return ag_vec_env_last_episode(NULL, 0, &f->info); }
F(vec_last_out_null) { return ag_vec_env_last_episode(f->vec, 0, NULL); }
F(vec_last_copy_negative) { return ag_vec_env_last_episode(f->vec, -1, &f->info); }
F(vec_last_copy_n) { return ag_vec_env_last_episode(f->vec, 3, &f->info); }
#undef F

static const bad_call calls[] = {
    {"create: name NULL", AG_ERR_INVALID_ARG, "ag_env_create: name is NULL", create_name_null},
    {"create: unknown name", AG_ERR_INVALID_ARG, "unknown environment \"Pong-v5\"", create_name_unknown},
    {"create: known names listed", AG_ERR_INVALID_ARG,
     "known: cartpole (CartPole-v1), acrobot (Acrobot-v1), mountaincar (MountainCar-v0), pendulum "
     "(Pendulum-v1), mountaincar_continuous (MountainCarContinuous-v0)",
     create_name_lists_known},
    {"create: out NULL", AG_ERR_INVALID_ARG, "ag_env_create: out is NULL", create_out_null},
    {"custom: ops NULL", AG_ERR_INVALID_ARG, "ag_env_create_custom: ops is NULL", custom_ops_null},
    {"custom: reset NULL", AG_ERR_INVALID_ARG, "ops->reset is NULL", custom_reset_null},
    {"custom: step NULL", AG_ERR_INVALID_ARG, "ops->step is NULL", custom_step_null},
    {"custom: spec NULL", AG_ERR_INVALID_ARG, "spec is NULL", custom_spec_null},
    {"custom: out NULL", AG_ERR_INVALID_ARG, "out is NULL", custom_out_null},
    {"custom: obs_dim 0", AG_ERR_INVALID_ARG, "spec->obs_dim = 0 must be positive", custom_obs_dim_zero},
    {"custom: obs_shape of 3 values, obs_dim 2", AG_ERR_INVALID_ARG,
     "spec->obs_shape = {1, 1, 3} must be {0, 0, 0} (a flat observation) or positive sizes whose product is "
     "obs_dim = 2",
     custom_obs_shape_not_obs_dim},
    {"custom: obs_shape with a 0", AG_ERR_INVALID_ARG, "spec->obs_shape = {2, 0, 1}",
     custom_obs_shape_zero_size},
    {"custom: discrete and continuous", AG_ERR_INVALID_ARG,
     "n_actions = 3 and spec->act_dim = 2: exactly one", custom_both_kinds},
    {"custom: neither", AG_ERR_INVALID_ARG, "n_actions = 0 and spec->act_dim = 0", custom_no_kind},
    {"custom: n_actions -2", AG_ERR_INVALID_ARG, "n_actions = -2", custom_negative_actions},
    {"custom: max_episode_steps -1", AG_ERR_INVALID_ARG, "max_episode_steps = -1 must not be negative",
     custom_max_steps_negative},
    {"custom: only act_low", AG_ERR_INVALID_ARG, "act_high is NULL but act_low is not", custom_one_bound},
    {"custom: low > high", AG_ERR_INVALID_ARG, "act_low[1] = 3 is not <= act_high[1] = 2",
     custom_low_above_high},
    {"custom: bounds on a discrete env", AG_ERR_INVALID_ARG, "must be NULL for a discrete",
     custom_bounds_discrete},
    {"reset: env NULL", AG_ERR_INVALID_ARG, "ag_env_reset: env is NULL", reset_env_null},
    {"reset: obs NULL", AG_ERR_INVALID_ARG, "ag_env_reset: obs is NULL", reset_obs_null},
    {"step: env NULL", AG_ERR_INVALID_ARG, "ag_env_step: env is NULL", step_env_null},
    {"step: action NULL", AG_ERR_INVALID_ARG, "ag_env_step: action is NULL", step_action_null},
    {"step: obs NULL", AG_ERR_INVALID_ARG, "ag_env_step: obs is NULL", step_obs_null},
    {"step: reward NULL", AG_ERR_INVALID_ARG, "ag_env_step: reward is NULL", step_reward_null},
    {"step: terminated NULL", AG_ERR_INVALID_ARG, "ag_env_step: terminated is NULL", step_terminated_null},
    {"step: truncated NULL", AG_ERR_INVALID_ARG, "ag_env_step: truncated is NULL", step_truncated_null},
    {"step: action 2 of 2", AG_ERR_OUT_OF_RANGE, "ag_env_step: action 2 is outside 0..1", step_action_2},
    {"step: action -1", AG_ERR_OUT_OF_RANGE, "ag_env_step: action -1 is outside 0..1", step_action_minus_1},
    {"step: action 1e10", AG_ERR_OUT_OF_RANGE, "action 10000000000 is outside 0..1", step_action_huge},
    {"step: action 0.5", AG_ERR_INVALID_ARG, "ag_env_step: action 0.5 is not a whole number",
     step_action_half},
    {"step: action NaN", AG_ERR_INVALID_ARG, "action nan is not a whole number", step_action_nan},
    {"step: action inf", AG_ERR_INVALID_ARG, "action inf is not a whole number", step_action_inf},
    {"step: torque NaN", AG_ERR_INVALID_ARG, "ag_env_step: action[0] = nan is not a finite number",
     step_torque_nan},
    {"step: torque -inf", AG_ERR_INVALID_ARG, "action[0] = -inf is not a finite number", step_torque_inf},
    {"step: before reset", AG_ERR_STATE, "\"CartPole-v1\" has not been reset", step_before_reset},
    {"step: after termination", AG_ERR_STATE, "ended (terminated) at step 1; call reset",
     step_after_termination},
    {"set_state: user environment", AG_ERR_UNSUPPORTED, "\"Counter-v0\" is a user environment",
     set_state_custom},
    {"set_state: NaN", AG_ERR_INVALID_ARG, "s[1] = nan is not finite", set_state_nan},
    {"set_state: NULL", AG_ERR_INVALID_ARG, "s is NULL", set_state_null},
    {"vec_create: name NULL", AG_ERR_INVALID_ARG, "ag_vec_env_create: name is NULL", vec_create_name_null},
    {"vec_create: unknown", AG_ERR_INVALID_ARG, "unknown environment \"Breakout\"; known: cartpole",
     vec_create_unknown},
    {"vec_create: n 0", AG_ERR_INVALID_ARG, "n = 0 copies must be positive", vec_create_n_zero},
    {"vec_create: n -4", AG_ERR_INVALID_ARG, "n = -4 copies must be positive", vec_create_n_negative},
    {"vec_create: out NULL", AG_ERR_INVALID_ARG, "ag_vec_env_create: out is NULL", vec_create_out_null},
    {"vec_from: envs NULL", AG_ERR_INVALID_ARG, "ag_vec_env_create_from: envs is NULL", vec_from_envs_null},
    {"vec_from: n 0", AG_ERR_INVALID_ARG, "n = 0 copies must be positive", vec_from_n_zero},
    {"vec_from: out NULL", AG_ERR_INVALID_ARG, "ag_vec_env_create_from: out is NULL", vec_from_out_null},
    {"vec_from: envs[1] NULL", AG_ERR_INVALID_ARG, "envs[1] is NULL", vec_from_env_null},
    {"vec_from: repeated env", AG_ERR_INVALID_ARG, "envs[2] is envs[0]", vec_from_repeated},
    {"vec_from: different specs", AG_ERR_INVALID_ARG,
     "envs[1] (\"Pendulum-v1\") differs from envs[0] (\"CartPole-v1\") in obs_dim", vec_from_mismatch},
    {"vec_reset: v NULL", AG_ERR_INVALID_ARG, "ag_vec_env_reset: v is NULL", vec_reset_null},
    {"vec_reset: obs NULL", AG_ERR_INVALID_ARG, "ag_vec_env_reset: obs is NULL", vec_reset_obs_null},
    {"vec_step: v NULL", AG_ERR_INVALID_ARG, "ag_vec_env_step: v is NULL", vec_step_null},
    {"vec_step: actions NULL", AG_ERR_INVALID_ARG, "actions is NULL", vec_step_actions_null},
    {"vec_step: obs NULL", AG_ERR_INVALID_ARG, "ag_vec_env_step: obs is NULL", vec_step_obs_null},
    {"vec_step: rewards NULL", AG_ERR_INVALID_ARG, "rewards is NULL", vec_step_rewards_null},
    {"vec_step: terminated NULL", AG_ERR_INVALID_ARG, "terminated is NULL", vec_step_term_null},
    {"vec_step: truncated NULL", AG_ERR_INVALID_ARG, "truncated is NULL", vec_step_trunc_null},
    {"vec_step: before reset", AG_ERR_STATE, "has not been reset; call ag_vec_env_reset",
     vec_step_before_reset},
    {"vec_step: copy 2 action 5", AG_ERR_OUT_OF_RANGE, "ag_vec_env_step: copy 2: action 5 is outside 0..1",
     vec_step_bad_action_copy_2},
    {"vec_step: copy 1 action NaN", AG_ERR_INVALID_ARG, "copy 1: action nan is not a whole number",
     vec_step_nan_action_copy_1},
    {"vec_last_episode: v NULL", AG_ERR_INVALID_ARG, "ag_vec_env_last_episode: v is NULL", vec_last_null},
    {"vec_last_episode: out NULL", AG_ERR_INVALID_ARG, "out is NULL", vec_last_out_null},
    {"vec_last_episode: copy -1", AG_ERR_OUT_OF_RANGE, "copy -1 is outside 0..2", vec_last_copy_negative},
    {"vec_last_episode: copy 3", AG_ERR_OUT_OF_RANGE, "copy 3 is outside 0..2", vec_last_copy_n},
};

/* Restores the fixture's inputs and fills the outputs with sentinels. */
static void prime(fixture *f) {
  f->eout = SENTINEL_E;
  f->vout = SENTINEL_V;
  for (size_t i = 0; i < sizeof f->obs / sizeof f->obs[0]; i++) f->obs[i] = f->final_obs[i] = SENTINEL_F;
  for (int i = 0; i < 3; i++) {
    f->rewards[i] = SENTINEL_F;
    f->term[i] = f->trunc[i] = -7;
    f->action[i] = (float)(i % 2);
  }
  memset(&f->info, 0x5A, sizeof f->info);
  f->spec = counter_spec;
  f->ops = counter_ops;
  f->envs[0] = f->cart_twin, f->envs[1] = f->cart, f->envs[2] = f->fresh;
}

/* Nothing observable changed: the sentinels are intact, and each handle
 * steps exactly as its untouched twin. */
static void assert_nothing_changed(fixture *f, const char *what) {
  if (f->eout != SENTINEL_E || f->vout != SENTINEL_V) fail_msg("%s: an out-parameter was written", what);
  for (size_t i = 0; i < sizeof f->obs / sizeof f->obs[0]; i++)
    if (f->obs[i] != SENTINEL_F || f->final_obs[i] != SENTINEL_F)
      fail_msg("%s: obs[%zu] was written", what, i);
  for (int i = 0; i < 3; i++)
    if (f->rewards[i] != SENTINEL_F || f->term[i] != -7 || f->trunc[i] != -7)
      fail_msg("%s: reward or flags of %d written", what, i);
  for (size_t i = 0; i < sizeof f->info; i++)
    if (((const unsigned char *)&f->info)[i] != 0x5A) fail_msg("%s: the episode info was written", what);
  if (f->custom_state.resets != 0 || f->counter_frees != 0)
    fail_msg("%s: the user environment's state was touched or freed", what);

  ag_env *pairs[2][2] = {{f->cart, f->cart_twin}, {f->pend, f->pend_twin}};
  for (int p = 0; p < 2; p++) {
    float oa[MAX_OBS], ob[MAX_OBS], ra, rb;
    int ta, tra, tb, trb;
    const float a = p == 0 ? 1.0f : 0.3f;
    agt_ok(ag_env_step(pairs[p][0], &a, oa, &ra, &ta, &tra));
    agt_ok(ag_env_step(pairs[p][1], &a, ob, &rb, &tb, &trb));
    if (memcmp(oa, ob, (size_t)obs_dim(pairs[p][0]) * sizeof(float)) != 0 || ra != rb || ta != tb ||
        tra != trb)
      fail_msg("%s: %s steps differently from its twin", what, ag_env_get_spec(pairs[p][0])->id);
    if (ta || tra) { /* keep both going */
      agt_ok(ag_env_reset(pairs[p][0], 5, oa));
      agt_ok(ag_env_reset(pairs[p][1], 5, ob));
    }
  }
  float va[3 * 4], vb[3 * 4], fa[3 * 4], fb[3 * 4], ra[3], rb[3];
  int ta[3], tb[3], tra[3], trb[3];
  const float acts[3] = {1.0f, 0.0f, 1.0f};
  agt_ok(ag_vec_env_step(f->vec, acts, va, ra, ta, tra, fa));
  agt_ok(ag_vec_env_step(f->vec_twin, acts, vb, rb, tb, trb, fb));
  if (memcmp(va, vb, sizeof va) || memcmp(fa, fb, sizeof fa) || memcmp(ra, rb, sizeof ra) ||
      memcmp(ta, tb, sizeof ta) || memcmp(tra, trb, sizeof tra))
    fail_msg("%s: the vector steps differently from its twin", what);
}

static void every_bad_call_is_an_error_that_changes_nothing(void **state) {
  (void)state;
  fixture f;
  memset(&f, 0, sizeof f);
  float obs[3 * MAX_OBS], r;
  f.cart = make_env("cartpole");
  f.cart_twin = make_env("cartpole");
  f.pend = make_env("pendulum");
  f.pend_twin = make_env("pendulum");
  agt_ok(ag_env_reset(f.cart, 3, obs));
  agt_ok(ag_env_reset(f.cart_twin, 3, obs));
  agt_ok(ag_env_reset(f.pend, 4, obs));
  agt_ok(ag_env_reset(f.pend_twin, 4, obs));
  agt_ok(ag_vec_env_create("cartpole", 3, 5, &f.vec));
  agt_ok(ag_vec_env_create("cartpole", 3, 5, &f.vec_twin));
  agt_ok(ag_vec_env_reset(f.vec, obs));
  agt_ok(ag_vec_env_reset(f.vec_twin, obs));
  agt_ok(ag_vec_env_create("cartpole", 3, 5, &f.vec_fresh));
  f.fresh = make_env("CartPole-v1");
  f.ended = make_env("cartpole");
  agt_ok(ag__env_set_state(f.ended, (const double[]){0.0, 0.0, 0.2, 1.0}, obs));
  assert_int_equal(step1(f.ended, 1.0f, obs, &r), 1);
  f.counter = make_counter(&f.counter_frees, NULL);
  f.custom_state.fail_on_action = -1;
  f.custom_state.frees = &f.counter_frees; /* the state handed to failing creates */

  for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++) {
    prime(&f);
    ag_clear_error();
    ag_status s = calls[k].call(&f);
    if (s != calls[k].expect)
      fail_msg("%s: returned %s, expected %s (message: %s)", calls[k].what, ag_status_name(s),
               ag_status_name(calls[k].expect), ag_last_error());
    if (!strstr(ag_last_error(), calls[k].part))
      fail_msg("%s: message \"%s\" does not contain \"%s\"", calls[k].what, ag_last_error(), calls[k].part);
    prime(&f);
    assert_nothing_changed(&f, calls[k].what);
  }
  /* the handles that refused work still work once used properly */
  agt_ok(ag_env_reset(f.fresh, 1, obs));
  agt_ok(ag_env_reset(f.ended, 1, obs));
  assert_int_equal(step1(f.ended, 0.0f, obs, &r), 0);
  agt_ok(ag_vec_env_reset(f.vec_fresh, obs));
  assert_int_equal(f.counter_frees, 0);
  ag_env_free(f.counter);
  assert_int_equal(f.counter_frees, 1);
  ag_env_free(f.cart);
  ag_env_free(f.cart_twin);
  ag_env_free(f.pend);
  ag_env_free(f.pend_twin);
  ag_env_free(f.fresh);
  ag_env_free(f.ended);
  ag_vec_env_free(f.vec);
  ag_vec_env_free(f.vec_twin);
  ag_vec_env_free(f.vec_fresh);
  /* NULL is accepted by the destructors and the accessors */
  ag_env_free(NULL);
  ag_vec_env_free(NULL);
  assert_int_equal(ag_vec_env_size(NULL), 0);
  assert_null(ag_vec_env_get_spec(NULL));
}

static void step_before_reset_and_after_episode_end_are_state_errors(void **state) {
  (void)state;
  for (int k = 0; k < N_REF_SPECS; k++) /* the classic-control tasks */ {
    ag_env *e = make_env(ag_env_builtin_name(k));
    const ag_env_spec *spec = ag_env_get_spec(e);
    float obs[MAX_OBS], r = SENTINEL_F, a = 0.0f;
    int term = -7, trunc = -7;
    agt_err(ag_env_step(e, &a, obs, &r, &term, &trunc), AG_ERR_STATE, "has not been reset; call reset first");
    assert_true(r == SENTINEL_F && term == -7 && trunc == -7);
    agt_ok(ag_env_reset(e, 3, obs));
    int flags = 0, t = 0;
    while (!flags) { /* any policy ends by the time limit */
      a = spec->n_actions > 0 ? (float)(t % spec->n_actions) : 1.0f;
      flags = step1(e, a, obs, &r);
      t++;
    }
    r = SENTINEL_F, term = trunc = -7;
    agt_err(ag_env_step(e, &a, obs, &r, &term, &trunc), AG_ERR_STATE, "call reset before stepping again");
    assert_true(r == SENTINEL_F && term == -7 && trunc == -7);
    agt_ok(ag_env_reset(e, 3, obs));
    agt_ok(ag_env_step(e, &a, obs, &r, &term, &trunc));
    ag_env_free(e);
  }
}

/* ---- user environments ---- */

static void custom_env_steps_through_the_handle_and_is_freed_once(void **state) {
  (void)state;
  int frees = 0;
  counter_env *c = NULL;
  ag_env_spec spec = counter_spec;
  char id[16] = "Counter-v0";
  spec.id = id;
  ag_env *e = NULL;
  c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->fail_on_action = 1;
  c->frees = &frees;
  agt_ok(ag_env_create_custom(&counter_ops, c, &spec, &e));
  memset(&spec, 0, sizeof spec); /* the handle keeps its own copies */
  strcpy(id, "changed");
  assert_string_equal(ag_env_get_spec(e)->id, "Counter-v0");
  assert_int_equal(ag_env_get_spec(e)->max_episode_steps, 5);
  float obs[2], r;
  agt_ok(ag_env_reset(e, 1234, obs));
  assert_true(obs[0] == 0.0f && obs[1] == 234.0f && c->last_seed == 1234);
  assert_int_equal(step1(e, 0.0f, obs, &r), 0);
  assert_true(obs[0] == 1.0f && r == 0.0f);
  /* the user's step fails for action 1: its status, the environment named, nothing changed */
  obs[0] = obs[1] = SENTINEL_F;
  r = SENTINEL_F;
  int term = -7, trunc = -7;
  agt_err(ag_env_step(e, &(float){1.0f}, obs, &r, &term, &trunc), AG_ERR_UNSUPPORTED,
          "the step function of environment \"Counter-v0\" failed with AG_ERR_UNSUPPORTED");
  assert_true(obs[0] == SENTINEL_F && obs[1] == SENTINEL_F && r == SENTINEL_F && term == -7 && trunc == -7);
  assert_int_equal(step1(e, 0.0f, obs, &r), 0);
  assert_true(obs[0] == 2.0f); /* the failed step was not counted */
  assert_int_equal(step1(e, 0.0f, obs, &r), 0);
  assert_int_equal(step1(e, 0.0f, obs, &r), 0);
  assert_int_equal(step1(e, 0.0f, obs, &r), 2); /* step 5 of 5: truncated */
  ag_env_free(e);
  assert_int_equal(frees, 1);
}

/* ---- the vector environment ---- */

static void vec_env_autoreset_matches_single_envs_step_for_step(void **state) {
  (void)state;
  const int n = 3;
  const uint64_t seed = 7;
  for (int k = 0; k < N_REF_SPECS; k++) /* the classic-control tasks */ {
    const char *name = ag_env_builtin_name(k);
    ag_vec_env *v = NULL;
    agt_ok(ag_vec_env_create(name, n, seed, &v));
    assert_int_equal(ag_vec_env_size(v), n);
    const ag_env_spec *spec = ag_vec_env_get_spec(v);
    assert_string_equal(spec->id, env_ref_specs[k].id);
    const int od = spec->obs_dim;
    ag_env *single[3];
    int64_t episodes[3] = {0}, len[3] = {0};
    double ret[3] = {0};
    float obs[3 * MAX_OBS], fin[3 * MAX_OBS], rew[3], sobs[3][MAX_OBS], acts[3];
    int term[3], trunc[3];
    agt_ok(ag_vec_env_reset(v, obs));
    for (int i = 0; i < n; i++) {
      single[i] = make_env(name);
      agt_ok(ag_env_reset(single[i], ag_env_derive_seed(ag_env_derive_seed(seed, (uint64_t)i), 0), sobs[i]));
      assert_memory_equal(obs + i * od, sobs[i], (size_t)od * sizeof(float));
    }
    agt_rng g = {123};
    int ended = 0;
    for (int t = 0; t < 1000; t++) {
      for (int i = 0; i < n; i++)
        acts[i] = spec->n_actions > 0 ? (float)agt_below(&g, spec->n_actions) : agt_uniform(&g, -3.0f, 3.0f);
      agt_ok(ag_vec_env_step(v, acts, obs, rew, term, trunc, fin));
      for (int i = 0; i < n; i++) {
        float r;
        int flags = step1(single[i], acts[i], sobs[i], &r);
        assert_memory_equal(fin + i * od, sobs[i], (size_t)od * sizeof(float)); /* the true next obs */
        assert_true(rew[i] == r && term[i] == (flags & 1) && trunc[i] == (flags >> 1));
        ret[i] += (double)r;
        len[i]++;
        ag_episode_info info;
        agt_ok(ag_vec_env_last_episode(v, i, &info));
        if (flags) {
          ended++;
          episodes[i]++;
          assert_true(info.ret == ret[i] && info.length == len[i] && info.episodes == episodes[i]);
          assert_true(info.terminated == (flags & 1) && info.truncated == (flags >> 1));
          ret[i] = 0.0;
          len[i] = 0;
          /* obs row i already holds the start of the next episode, from the next seed */
          uint64_t s = ag_env_derive_seed(ag_env_derive_seed(seed, (uint64_t)i), (uint64_t)episodes[i]);
          agt_ok(ag_env_reset(single[i], s, sobs[i]));
        } else {
          assert_true(info.episodes == episodes[i]);
          if (episodes[i] == 0) assert_true(info.ret == 0.0 && info.length == 0);
        }
        assert_memory_equal(obs + i * od, sobs[i], (size_t)od * sizeof(float));
      }
    }
    assert_true(ended >= n); /* every task ends within 1000 steps (by the time limit at the latest) */
    /* final_obs may be left out */
    agt_ok(ag_vec_env_step(v, acts, obs, rew, term, trunc, NULL));
    for (int i = 0; i < n; i++) ag_env_free(single[i]);
    ag_vec_env_free(v);
  }
}

static void vec_env_cartpole_balancing_controller_reaches_truncation_not_termination(void **state) {
  (void)state;
  const int n = 4;
  ag_vec_env *v = NULL;
  agt_ok(ag_vec_env_create("CartPole-v1", n, 2024, &v));
  float obs[4 * 4], fin[4 * 4], rew[4], acts[4];
  int term[4], trunc[4];
  agt_ok(ag_vec_env_reset(v, obs));
  const float limit = (float)(12 * 2 * 3.141592653589793 / 360);
  for (int t = 1; t <= 500; t++) {
    for (int i = 0; i < n; i++) acts[i] = balance(obs + 4 * i);
    agt_ok(ag_vec_env_step(v, acts, obs, rew, term, trunc, fin));
    for (int i = 0; i < n; i++) {
      if (term[i]) fail_msg("copy %d: the pole fell at step %d", i, t);
      if (trunc[i] != (t == 500)) fail_msg("copy %d: truncated = %d at step %d", i, trunc[i], t);
      assert_true(rew[i] == 1.0f);
    }
  }
  for (int i = 0; i < n; i++) {
    ag_episode_info info;
    agt_ok(ag_vec_env_last_episode(v, i, &info));
    assert_true(info.ret == 500.0 && info.length == 500 && info.episodes == 1);
    assert_true(info.truncated == 1 && info.terminated == 0);
    assert_true(fabsf(fin[4 * i + 2]) < limit && fabsf(fin[4 * i]) < 2.4f);  /* still up when cut off */
    for (int c = 0; c < 4; c++) assert_true(fabsf(obs[4 * i + c]) <= 0.05f); /* a fresh start state */
    assert_true(memcmp(obs + 4 * i, fin + 4 * i, 4 * sizeof(float)) != 0);
  }
  ag_vec_env_free(v);
}

static void vec_env_same_seed_replays_and_other_seed_differs(void **state) {
  (void)state;
  ag_vec_env *a = NULL, *b = NULL, *c = NULL;
  agt_ok(ag_vec_env_create("acrobot", 3, 99, &a));
  agt_ok(ag_vec_env_create("acrobot", 3, 99, &b));
  agt_ok(ag_vec_env_create("acrobot", 3, 100, &c));
  float oa[18], ob[18], oc[18], r[3], acts[3] = {0.0f, 1.0f, 2.0f};
  int te[3], tr[3];
  agt_ok(ag_vec_env_reset(a, oa));
  agt_ok(ag_vec_env_reset(b, ob));
  agt_ok(ag_vec_env_reset(c, oc));
  assert_memory_equal(oa, ob, sizeof oa);
  assert_true(memcmp(oa, oc, sizeof oa) != 0);
  /* copies start differently from one another */
  assert_true(memcmp(oa, oa + 6, 6 * sizeof(float)) != 0 && memcmp(oa + 6, oa + 12, 6 * sizeof(float)) != 0);
  for (int t = 0; t < 1200; t++) { /* more than two episodes each */
    agt_ok(ag_vec_env_step(a, acts, oa, r, te, tr, NULL));
    agt_ok(ag_vec_env_step(b, acts, ob, r, te, tr, NULL));
    assert_memory_equal(oa, ob, sizeof oa);
  }
  /* a second reset continues the seed sequence: new start states */
  float again[18];
  agt_ok(ag_vec_env_reset(b, again));
  ag_vec_env *d = NULL;
  float first[18];
  agt_ok(ag_vec_env_create("acrobot", 3, 99, &d));
  agt_ok(ag_vec_env_reset(d, first));
  for (int i = 0; i < 3; i++) assert_true(memcmp(again + 6 * i, first + 6 * i, 6 * sizeof(float)) != 0);
  ag_vec_env_free(a);
  ag_vec_env_free(b);
  ag_vec_env_free(c);
  ag_vec_env_free(d);
}

static void custom_env_works_in_vec_env_with_autoreset_and_stats(void **state) {
  (void)state;
  int frees = 0;
  counter_env *cs[3];
  ag_env *envs[3];
  for (int i = 0; i < 3; i++) envs[i] = make_counter(&frees, &cs[i]);
  ag_vec_env *v = NULL;
  agt_ok(ag_vec_env_create_from(envs, 3, 31, &v));
  assert_string_equal(ag_vec_env_get_spec(v)->id, "Counter-v0");
  float obs[6], fin[6], rew[3];
  int term[3], trunc[3];
  agt_ok(ag_vec_env_reset(v, obs));
  for (int i = 0; i < 3; i++) {
    uint64_t s = ag_env_derive_seed(ag_env_derive_seed(31, (uint64_t)i), 0);
    assert_true(cs[i]->last_seed == s && obs[2 * i + 1] == (float)(s % 1000u));
  }
  /* copy 0 coasts (truncated every 5 steps), copy 1 ends at once (terminated
   * every step), copy 2 alternates 1, 2 (terminated every 2 steps) */
  for (int t = 1; t <= 10; t++) {
    const float acts[3] = {0.0f, 2.0f, t % 2 ? 1.0f : 2.0f};
    agt_ok(ag_vec_env_step(v, acts, obs, rew, term, trunc, fin));
    const int end0 = t % 5 == 0, end2 = t % 2 == 0;
    assert_true(term[0] == 0 && trunc[0] == end0);
    assert_true(term[1] == 1 && trunc[1] == 0);
    assert_true(term[2] == end2 && trunc[2] == 0);
    /* final_obs: (steps in the episode, action) */
    assert_true(fin[0] == (float)((t - 1) % 5 + 1) && fin[1] == 0.0f);
    assert_true(fin[2] == 1.0f && fin[3] == 2.0f);
    assert_true(fin[4] == (float)((t - 1) % 2 + 1) && fin[5] == acts[2]);
    const int ends[3] = {end0, 1, end2};
    const int64_t expect_eps[3] = {t / 5, t, t / 2};
    for (int i = 0; i < 3; i++) {
      if (ends[i]) { /* a fresh episode from the copy's next seed */
        uint64_t s = ag_env_derive_seed(ag_env_derive_seed(31, (uint64_t)i), (uint64_t)expect_eps[i]);
        assert_true(cs[i]->last_seed == s);
        assert_true(obs[2 * i] == 0.0f && obs[2 * i + 1] == (float)(s % 1000u));
      } else {
        assert_memory_equal(obs + 2 * i, fin + 2 * i, 2 * sizeof(float));
      }
      ag_episode_info info;
      agt_ok(ag_vec_env_last_episode(v, i, &info));
      assert_true(info.episodes == expect_eps[i]);
    }
  }
  ag_episode_info info;
  agt_ok(ag_vec_env_last_episode(v, 0, &info));
  assert_true(info.ret == 0.0 && info.length == 5 && info.truncated == 1 && info.terminated == 0);
  agt_ok(ag_vec_env_last_episode(v, 2, &info));
  assert_true(info.ret == 3.0 && info.length == 2 && info.terminated == 1);
  /* a failing user step names the copy; the vector then needs a reset */
  cs[1]->fail_on_action = 1;
  const float bad[3] = {0.0f, 1.0f, 0.0f};
  agt_err(ag_vec_env_step(v, bad, obs, rew, term, trunc, fin), AG_ERR_UNSUPPORTED,
          "ag_vec_env_step: copy 1: the step function of environment \"Counter-v0\" failed");
  agt_err(ag_vec_env_step(v, bad, obs, rew, term, trunc, fin), AG_ERR_STATE, "ag_vec_env_reset");
  cs[1]->fail_on_action = -1;
  agt_ok(ag_vec_env_reset(v, obs));
  agt_ok(ag_vec_env_step(v, bad, obs, rew, term, trunc, fin));
  ag_vec_env_free(v);
  assert_int_equal(frees, 3);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(builtin_specs_match_gymnasium_registry),
      cmocka_unit_test(every_step_matches_gymnasium_trajectories_within_1e6),
      cmocka_unit_test(every_step_is_bit_identical_to_gymnasium_with_glibc),
      cmocka_unit_test(cartpole_terminates_when_pole_falls_past_12_degrees),
      cmocka_unit_test(mountaincar_terminates_at_goal_and_stops_at_left_wall),
      cmocka_unit_test(acrobot_terminates_when_tip_rises_above_one_link),
      cmocka_unit_test(pendulum_clips_torque_to_two_like_gymnasium),
      cmocka_unit_test(mountaincar_continuous_clips_force_and_pays_at_goal),
      cmocka_unit_test(every_builtin_truncates_at_its_max_episode_steps),
      cmocka_unit_test(terminated_and_truncated_both_set_when_task_ends_on_last_step),
      cmocka_unit_test(seed_streams_keep_their_values),
      cmocka_unit_test(reset_draws_start_state_from_documented_splitmix64),
      cmocka_unit_test(same_seed_gives_identical_episode),
      cmocka_unit_test(different_seeds_give_different_start_states),
      cmocka_unit_test(start_states_lie_in_gymnasium_ranges),
      cmocka_unit_test(every_bad_call_is_an_error_that_changes_nothing),
      cmocka_unit_test(step_before_reset_and_after_episode_end_are_state_errors),
      cmocka_unit_test(custom_env_steps_through_the_handle_and_is_freed_once),
      cmocka_unit_test(vec_env_autoreset_matches_single_envs_step_for_step),
      cmocka_unit_test(vec_env_cartpole_balancing_controller_reaches_truncation_not_termination),
      cmocka_unit_test(vec_env_same_seed_replays_and_other_seed_differs),
      cmocka_unit_test(custom_env_works_in_vec_env_with_autoreset_and_stats),
  };
  return agt_run(argc, argv, "env", tests, sizeof tests / sizeof tests[0]);
}
