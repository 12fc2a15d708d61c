/* test_ac_file.c — SAC and TD3 agents saved and loaded (ag_ac_save /
 * ag_ac_load) and their training runs checkpointed and resumed
 * (ag_ac_learn with ag_learn_opts).
 *
 * The reference is the agent that was saved: the loaded one holds the same
 * bytes in every tensor (parameters, targets, log alpha, the streams'
 * counters, every optimizer's moments and step state), the same
 * configuration, sizes, bounds, counters, host stream and correlated
 * noise, and then acts (exploring, deterministic and at random), stores and
 * trains exactly as the original does (the same actions and losses, bit for
 * bit, and the same parameters after); a file written on the device under
 * test loads on the CPU. Refusals of a small file (an agrl container of
 * kind "ac", its table's container after it): its truncations, trailing
 * bytes, every changed header byte and many changed body bytes, each kind
 * of CRC, a wrong magic or a newer container; keys changed under a sound
 * CRC (sizes, configuration, counters, seeds, bounds, the noise's copies,
 * an f64 that is not an f32), counts past their limits, the wrong kind,
 * algo or a newer ac.version, a key missing or of another type; *out is
 * never written and no device memory is left. A run with checkpoints reports the
 * events of one without; one stopped by should_stop and resumed from its
 * checkpoint (or resumed from an older periodic one) reports the
 * uninterrupted run's events from there on and ends with its parameters;
 * `keep` prunes the older checkpoints.
 */
#include <math.h>
#include <unistd.h>

#include "agt_agent.h"
#include "agent/agent_internal.h"
#include "base/base.h"

#define SENTINEL ((ag_ac *)(uintptr_t)0x5e17e1)

/* ---- a small agent with some history ---- */

enum { OBS = 3, ACT = 2, COPIES = 5 };
static const float LOW[ACT] = {-2.0f, 0.0f}, HIGH[ACT] = {2.0f, 0.5f};

static void store_random(ag_ac *a, agt_rng *g, int n) {
  float obs[OBS * 16], next[OBS * 16], act[ACT * 16], rew[16];
  int term[16], trunc[16];
  for (int done = 0; done < n;) {
    int k = n - done < 3 ? n - done : 3; /* tables of 4 take 3 at a time */
    for (int i = 0; i < k; i++) {
      for (int j = 0; j < OBS; j++) {
        obs[i * OBS + j] = agt_uniform(g, -1, 1);
        next[i * OBS + j] = agt_uniform(g, -1, 1);
      }
      for (int j = 0; j < ACT; j++) act[i * ACT + j] = agt_uniform(g, LOW[j], HIGH[j]);
      rew[i] = agt_uniform(g, -1, 1);
      term[i] = agt_below(g, 10) == 0;
      trunc[i] = !term[i] && agt_below(g, 10) == 0;
    }
    agt_ok(ag_ac_store(a, obs, act, rew, next, term, trunc, k));
    done += k;
  }
}

static ag_ac_config small_config(ag_ac_algo algo, int64_t hidden, int64_t batch, int64_t buffer) {
  ag_ac_config c = ag_ac_defaults(algo);
  c.n_hidden = 2;
  c.hidden[0] = hidden;
  c.hidden[1] = hidden / 2 > 0 ? hidden / 2 : 1;
  c.batch_size = batch;
  c.buffer_size = buffer;
  c.learning_starts = 0;
  c.seed = 11;
  c.tau = 0.1f;
  c.noise_rho = 0.7f;
  c.target_entropy = algo == AG_AC_SAC ? -1.5f : NAN;
  return c;
}

/* An agent whose every stream and counter has moved: the ring wrapped, an
 * odd number of updates (TD3 between two actor updates), exploring acts
 * (the correlated noise kept for COPIES copies), random acts, a run state. */
static ag_ac *make_agent(ag_ctx *ctx, ag_ac_algo algo, int64_t hidden, int64_t batch, int64_t buffer) {
  ag_ac_config c = small_config(algo, hidden, batch, buffer);
  ag_ac *a;
  agt_ok(ag_ac_create(ctx, OBS, ACT, LOW, HIGH, 5000, &c, &a));
  agt_rng g = {0x1234};
  store_random(a, &g, (int)buffer + 13);
  float losses[2];
  agt_ok(ag_ac_train(a, 7, losses));
  float obs[OBS * COPIES], act[ACT * COPIES];
  for (int i = 0; i < OBS * COPIES; i++) obs[i] = agt_uniform(&g, -1, 1);
  agt_ok(ag_ac_act(a, obs, COPIES, 1, act));
  agt_ok(ag_ac_act(a, obs, COPIES, 1, act));
  agt_ok(ag_ac_act_random(a, 3, act));
  agt_ok(ag_ac_train(a, 1, NULL)); /* 8: TD3's next update is a critic-only one */
  agt_ok(ag_ac_set_run_state(a, "run state", 9));
  return a;
}

/* Every tensor of the agent, from its own fields (not the file's list). */
static int tensors_of(const ag_ac *a, ag_tensor **out) {
  int n = 0;
  ag_mlp *nets[6] = {a->actor, a->q[0], a->q[1], a->qt[0], a->qt[1], a->actor_t};
  for (int k = 0; k < 6; k++)
    for (int i = 0; nets[k] && i < ag_mlp_n_params(nets[k]); i++) out[n++] = ag_mlp_params(nets[k])[i];
  out[n++] = a->log_alpha;
  out[n++] = ag__rng_counter_tensor(a->rng);
  out[n++] = ag__rng_counter_tensor(a->act_rng);
  const ag_optim *opts[3] = {a->opt_actor, a->opt_critic, a->opt_alpha};
  for (int k = 0; k < 3; k++)
    if (opts[k]) n += ag__optim_state(opts[k], out + n, 512 - n);
  return n;
}

static void assert_same_tensors(const ag_ac *a, const ag_ac *b) {
  ag_tensor *ta[512], *tb[512];
  int na = tensors_of(a, ta), nb = tensors_of(b, tb);
  assert_int_equal(na, nb);
  for (int i = 0; i < na; i++) {
    assert_int_equal(ag_tensor_rows(ta[i]), ag_tensor_rows(tb[i]));
    assert_int_equal(ag_tensor_cols(ta[i]), ag_tensor_cols(tb[i]));
    assert_int_equal(ag_tensor_dtype(ta[i]), ag_tensor_dtype(tb[i]));
    size_t bytes = (size_t)ag_tensor_numel(ta[i]) * ag_dtype_size(ag_tensor_dtype(ta[i]));
    unsigned char *va = malloc(bytes), *vb = malloc(bytes);
    assert_non_null(va);
    assert_non_null(vb);
    agt_ok(ag_tensor_read(ta[i], va, bytes));
    agt_ok(ag_tensor_read(tb[i], vb, bytes));
    if (memcmp(va, vb, bytes)) fail_msg("tensor %d of %d differs", i, na);
    free(va);
    free(vb);
  }
}

static int same_f32(float x, float y) { return !memcmp(&x, &y, sizeof x); }

static void assert_same_config(const ag_ac_config *x, const ag_ac_config *y) {
  assert_int_equal(x->algo, y->algo);
  assert_int_equal(x->n_hidden, y->n_hidden);
  for (int i = 0; i < AG_AC_MAX_HIDDEN; i++) assert_int_equal(x->hidden[i], y->hidden[i]);
  const float fx[10] = {x->actor_lr,       x->critic_lr,  x->gamma,        x->tau,        x->alpha,
                        x->target_entropy, x->expl_noise, x->target_noise, x->noise_clip, x->noise_rho};
  const float fy[10] = {y->actor_lr,       y->critic_lr,  y->gamma,        y->tau,        y->alpha,
                        y->target_entropy, y->expl_noise, y->target_noise, y->noise_clip, y->noise_rho};
  for (int i = 0; i < 10; i++)
    if (!same_f32(fx[i], fy[i])) fail_msg("float setting %d differs", i);
  const int64_t ix[10] = {x->batch_size,     x->buffer_size,  x->learning_starts, x->train_freq,
                          x->gradient_steps, x->policy_delay, x->autotune,        x->n_step,
                          x->n_envs,         (int64_t)x->seed};
  const int64_t iy[10] = {y->batch_size,     y->buffer_size,  y->learning_starts, y->train_freq,
                          y->gradient_steps, y->policy_delay, y->autotune,        y->n_step,
                          y->n_envs,         (int64_t)y->seed};
  for (int i = 0; i < 10; i++) assert_int_equal(ix[i], iy[i]);
}

/* The state the file holds besides tensors, equal in both. */
static void assert_same_state(const ag_ac *a, const ag_ac *b) {
  assert_same_config(ag_ac_get_config(a), ag_ac_get_config(b));
  assert_int_equal(a->obs_dim, b->obs_dim);
  assert_int_equal(ag_ac_act_dim(a), ag_ac_act_dim(b));
  assert_int_equal(ag_ac_total_steps(a), ag_ac_total_steps(b));
  const size_t nb = sizeof(float) * (size_t)ag_ac_act_dim(a);
  assert_memory_equal(ag_ac_low(a), ag_ac_low(b), nb);
  assert_memory_equal(ag_ac_high(a), ag_ac_high(b), nb);
  assert_int_equal(ag_ac_updates(a), ag_ac_updates(b));
  assert_int_equal(a->actor_updates, b->actor_updates);
  assert_int_equal(a->host_rng, b->host_rng);
  assert_int_equal(a->noise_n, b->noise_n);
  if (a->noise_n) assert_memory_equal(a->noise_z, b->noise_z, sizeof(float) * (size_t)a->noise_n);
  assert_int_equal(ag__rng_seed(a->rng), ag__rng_seed(b->rng));
  assert_int_equal(ag__rng_seed(a->act_rng), ag__rng_seed(b->act_rng));
  assert_int_equal(ag_replay_size(ag_ac_replay(a)), ag_replay_size(ag_ac_replay(b)));
  assert_int_equal(ag_replay_position(ag_ac_replay(a)), ag_replay_position(ag_ac_replay(b)));
  assert_int_equal(ag_replay_capacity(ag_ac_replay(a)), ag_replay_capacity(ag_ac_replay(b)));
  assert_same_tensors(a, b);
}

AGT_AGENT_KIND(ac_kind, ag_ac, ag_ac, ag_ac_learn, assert_same_state, "not an agrl file");

/* a and b act, store and train the same way from here. */
static void assert_same_future(ag_ac *a, ag_ac *b) {
  agt_rng g = {77};
  for (int round = 0; round < 3; round++) {
    float obs[OBS * COPIES], xa[ACT * COPIES], xb[ACT * COPIES];
    for (int i = 0; i < OBS * COPIES; i++) obs[i] = agt_uniform(&g, -1, 1);
    agt_ok(ag_ac_act(a, obs, COPIES, 1, xa));
    agt_ok(ag_ac_act(b, obs, COPIES, 1, xb));
    assert_memory_equal(xa, xb, sizeof xa);
    agt_ok(ag_ac_act(a, obs, COPIES, 0, xa));
    agt_ok(ag_ac_act(b, obs, COPIES, 0, xb));
    assert_memory_equal(xa, xb, sizeof xa);
    agt_ok(ag_ac_act_random(a, COPIES, xa));
    agt_ok(ag_ac_act_random(b, COPIES, xb));
    assert_memory_equal(xa, xb, sizeof xa);
    agt_rng sa = {500u + (unsigned)round}, sb = {500u + (unsigned)round};
    store_random(a, &sa, 21);
    store_random(b, &sb, 21);
    /* one update first: TD3's next is a critic-only one, whose actor loss is
     * the last actor update's (the loaded agent's from the file) */
    float la[2], lb[2];
    agt_ok(ag_ac_train(a, 1, la));
    agt_ok(ag_ac_train(b, 1, lb));
    assert_memory_equal(la, lb, sizeof la);
    agt_ok(ag_ac_train(a, 4, la));
    agt_ok(ag_ac_train(b, 4, lb));
    assert_memory_equal(la, lb, sizeof la);
    assert_false(isnan(la[1]));
  }
  assert_same_state(a, b);
}

/* ---- round trips ---- */

static void round_trip_trains_on_identically(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  for (int algo = 0; algo < 2; algo++) {
    ag_ac *a = make_agent(ctx, (ag_ac_algo)algo, 16, 16, 64);
    ag_ac *l = agt_round_trip(&ac_kind, ctx, a);
    assert_int_equal(l->noise_n, ACT * COPIES);
    assert_same_state(a, l);
    float al = 0, bl = 1;
    agt_ok(ag_ac_alpha(a, &al));
    agt_ok(ag_ac_alpha(l, &bl));
    assert_true(same_f32(al, bl));
    assert_same_future(a, l);
    ag_ac_free(l);
    ag_ac_free(a);
  }
  ag_ctx_free(ctx);
}

/* A new agent (no updates, no noise kept) and one without autotune. */
static void fresh_and_fixed_alpha(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  for (int k = 0; k < 2; k++) {
    ag_ac_config c = small_config(AG_AC_SAC, 8, 4, 8);
    c.autotune = k;
    c.noise_rho = 0;
    ag_ac *a, *l;
    agt_ok(ag_ac_create(ctx, OBS, ACT, LOW, HIGH, 10, &c, &a));
    if (k) {
      agt_rng g = {3};
      store_random(a, &g, 5);
    }
    agt_ok(ag_ac_save(a, agt_path_a));
    agt_ok(ag_ac_load(ctx, agt_path_a, &l));
    assert_int_equal(l->noise_n, 0);
    assert_null(ag_ac_run_state(l, NULL));
    assert_same_state(a, l);
    agt_rng g = {9}, h = {9};
    store_random(a, &g, 6);
    store_random(l, &h, 6);
    assert_same_future(a, l);
    ag_ac_free(l);
    ag_ac_free(a);
  }
  ag_ctx_free(ctx);
}

static void saved_here_loads_on_the_cpu(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ac *a = make_agent(ctx, AG_AC_TD3, 16, 16, 40);
  agt_loads_on_the_cpu(&ac_kind, a);
  ag_ac_free(a);
  ag_ctx_free(ctx);
}

/* ---- refusals ---- */

/* The offset in the container f of the value of key `name` (docs/container.md). */
static size_t key_value(const unsigned char *f, const char *name) {
  uint32_t K = ag__get32(f + 16);
  size_t at = 48;
  for (uint32_t i = 0; i < K; i++) {
    unsigned type = f[at], len = (unsigned)f[at + 2] | (unsigned)f[at + 3] << 8;
    uint32_t count = ag__get32(f + at + 4);
    size_t value = at + 8 + len;
    if (len == strlen(name) && !memcmp(f + at + 8, name, len)) return value;
    at = value + (type == 4 ? count : 8 * (size_t)count);
  }
  fail_msg("no key %s", name);
  return 0;
}

/* The bits of an f64. */
static uint64_t f64_bits(double v) {
  uint64_t b;
  memcpy(&b, &v, 8);
  return b;
}

/* f with `bytes` bytes at `at` replaced (the header's CRC made sound again)
 * is refused with `want` naming `part`. */
static void refuse_bytes(ag_ctx *ctx, const unsigned char *f, unsigned char *g, size_t n, size_t at,
                         const void *bytes, size_t len, ag_status want, const char *part) {
  memcpy(g, f, n);
  memcpy(g + at, bytes, len);
  agt_fix_crc(g);
  agt_refuse(&ac_kind, ctx, g, n, want, part);
}

static void damaged_files_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ac *a = make_agent(ctx, AG_AC_TD3, 2, 2, 4); /* a small file */
  agt_ok(ag_ac_save(a, agt_path_a));
  size_t n;
  unsigned char *f = agt_slurp(agt_path_a, &n), *g = malloc(n + 8);
  assert_non_null(g);
  assert_memory_equal(f, "AGRLFILE", 8);
  const uint32_t H = ag__get32(f + 12);
  const uint64_t total = ag__get64(f + 32); /* the container's bytes; the table's image follows */
  assert_true(total > H && total < n);
  /* truncations (all in the header and just past it), a trailing byte, every
   * header byte (its CRC fails) and a third of the rest (a part's CRC
   * fails), a wrong magic, a newer container */
  agt_refuse_damaged(&ac_kind, ctx, f, g, n, H + 64, 3, 0x10);
  /* the CRCs: the header's, the first section's part (actor.W0, [2, 3] f32:
   * 24 bytes, then its CRC), the table's header */
  const size_t crcs[3] = {H - 4, H + 24, total + ag__get32(f + total + 12) - 4};
  for (int k = 0; k < 3; k++) {
    memcpy(g, f, n);
    g[crcs[k]] ^= 1;
    agt_refuse(&ac_kind, ctx, g, n, AG_ERR_IO, "CRC-32");
  }
  /* cut in its table, no table at all, the table followed by a byte */
  agt_refuse(&ac_kind, ctx, f, (size_t)total + 100, AG_ERR_IO, "truncated");
  agt_refuse(&ac_kind, ctx, f, (size_t)total, AG_ERR_IO, "replay table");
  memcpy(g, f, n);
  g[n] = 7;
  agt_refuse(&ac_kind, ctx, g, n + 1, AG_ERR_IO, "trailing");
  /* sound CRC, unsound contents: keys changed in place */
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.sizes"), 8, 4,
                   "section 'actor.W0'"); /* obs_dim */
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.batch_size"), 8, 0, "configuration");
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.actor_updates"), 8, 0, "counters");
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.update_rng_seed"), 8, 12345, "seeds");
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.noise_copies"), 8, 3, "section 'noise'");
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.low"), 8, f64_bits(3.0), "bounds"); /* 3 > 2 */
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.gamma"), 8, f64_bits(0.1), "not a finite f32");
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.high") + 8, 8, f64_bits(NAN), "not a finite f32");
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.buffer_size"), 8, 5, "replay table");
  /* counts past their limits: refused before anything is made */
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.noise_copies"), 8, (uint64_t)1 << 40,
                   "'ac.noise_copies'");
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.sizes") + 8, 8, (uint64_t)1 << 23, "section");
  agt_refuse_field(&ac_kind, ctx, f, g, n, key_value(f, "ac.sizes") + 8 * 3, 8, 65, "size out of range");
  /* the wrong kind, algo or version; a key missing (its name changed) or of another type */
  refuse_bytes(ctx, f, g, n, key_value(f, "kind"), "dq", 2, AG_ERR_IO, "its kind is \"dq\"");
  refuse_bytes(ctx, f, g, n, key_value(f, "ac.algo"), "ddpg", 3, AG_ERR_IO, "ac.algo");
  memcpy(g, f, n);
  ag__put64(g + key_value(f, "ac.version"), 3);
  agt_fix_crc(g);
  agt_refuse(&ac_kind, ctx, g, n, AG_ERR_UNSUPPORTED, "version 3");
  refuse_bytes(ctx, f, g, n, key_value(f, "ac.tau") - 1, "U", 1, AG_ERR_IO, "'ac.tau' is missing");
  const unsigned char i64_type = 2;
  refuse_bytes(ctx, f, g, n, key_value(f, "ac.gamma") - 8 - strlen("ac.gamma"), &i64_type, 1, AG_ERR_IO,
               "'ac.gamma' is a");
  refuse_bytes(ctx, f, g, n, key_value(f, "ac.seed") - 8 - strlen("ac.seed"), &i64_type, 1, AG_ERR_IO,
               "'ac.seed' is not a u64");
  agt_refuse_bad_args(&ac_kind, ctx, a);
  ag_ac *l = SENTINEL;
  /* a DQN file is not an agent's, nor the other way round */
  ag_dqn_config dc = agt_dqn_config(4, 2, 4, 1, 1);
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, OBS, 2, 10, &dc, &d));
  agt_ok(ag_dqn_save(d, agt_path_b));
  agt_err(ag_ac_load(ctx, agt_path_b, &l), AG_ERR_IO, "not a SAC/TD3 file: its kind is \"dqn\"");
  ag_dqn *dl = NULL;
  agt_err(ag_dqn_load(ctx, agt_path_a, &dl), AG_ERR_IO, "not a DQN file");
  assert_true(l == SENTINEL && dl == NULL);
  ag_dqn_free(d);
  free(f);
  free(g);
  ag_ac_free(a);
  ag_ctx_free(ctx);
}

/* Every fault of every kind a save and a load meet. */
static void faults_at_every_step(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ac *a = make_agent(ctx, AG_AC_SAC, 4, 4, 8);
  agt_faults_at_every_step(&ac_kind, ctx, a);
  ag_ac_free(a);
  ag_ctx_free(ctx);
}

static void run_state_calls(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ac_config c = small_config(AG_AC_TD3, 4, 2, 4);
  ag_ac *a;
  agt_ok(ag_ac_create(ctx, OBS, ACT, LOW, HIGH, 100, &c, &a));
  agt_run_state_calls(&ac_kind, a);
  assert_null(ag_ac_low(NULL));
  assert_int_equal(ag_ac_total_steps(a), 100);
  ag_ac_free(a);
  ag_ctx_free(ctx);
}

/* ---- checkpoints of a run ---- */

/* Pendulum (200-step episodes) on 2 copies: PHASE events every 1000 steps,
 * and TD3's actor loss of a critic-only phase in the episodes' events. */
static void *run_agent(ag_ctx *ctx, int algo) {
  ag_ac_config c = small_config((ag_ac_algo)algo, 16, 32, 800);
  c.learning_starts = 300;
  c.train_freq = 2;
  c.gradient_steps = 1;
  c.n_envs = 2;
  ag_ac *a;
  const float lo = -2.0f, hi = 2.0f;
  agt_ok(ag_ac_create(ctx, 3, 1, &lo, &hi, 3000, &c, &a));
  return a;
}

/* Checkpoints every 700 steps of 3000 (the last at 2800), resumed from the
 * one at 2100; stopped after 600 polls (1202 steps: past learning_starts,
 * between two PHASE events). */
static void resumed_runs_equal_the_uninterrupted_one(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  for (int algo = 0; algo < 2; algo++) {
    const agt_resume_case c = {run_agent, algo, "pendulum", 2, 3, 3000, 700, 2800, 2100, 600, 14};
    agt_resumed_runs_equal_the_uninterrupted_one(&ac_kind, ctx, &c);
  }
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
#define TEST(f) cmocka_unit_test_setup_teardown(f, agt_dir_setup, agt_dir_teardown)
  const struct CMUnitTest tests[] = {TEST(round_trip_trains_on_identically),
                                     TEST(fresh_and_fixed_alpha),
                                     TEST(saved_here_loads_on_the_cpu),
                                     TEST(damaged_files_refused),
                                     TEST(faults_at_every_step),
                                     TEST(run_state_calls),
                                     TEST(resumed_runs_equal_the_uninterrupted_one)};
#undef TEST
  return agt_run(argc, argv, "ac_file", tests, sizeof tests / sizeof tests[0]);
}
