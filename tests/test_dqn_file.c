/* test_dqn_file.c — a DQN saved and loaded (ag_dqn_save / ag_dqn_load) and
 * a training run checkpointed and resumed (ag_dqn_learn_ex).
 *
 * The reference is the DQN that was saved: the loaded one holds the same
 * bytes in every tensor it has, and then acts, stores and trains exactly as
 * the original does (the same actions, losses and parameters, bit for bit);
 * a file saved on the device under test loads on the CPU with the same
 * parameters. A run checkpointed every N steps reports the events of an
 * uninterrupted run; one resumed from a checkpoint (periodic, or written
 * when should_stop asked) reports the uninterrupted run's events from there
 * on. Refusals: every truncation, changed bytes, a wrong magic or version,
 * a header that passes its CRC but not its checks; the DQN made so far is
 * freed and *out kept. Injected faults at every step of a save leave the
 * earlier file and the DQN as they were; of a load, no DQN and no memory.
 * A save past the file-size limit (a full disk) fails and keeps the
 * earlier file.
 */
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agt_agent.h"
#include "base/base.h"

/* ---- a small DQN with some history ---- */

enum { OBS = 4, ACTS = 3 };

static void store_random(ag_dqn *d, agt_rng *g, int n) {
  float obs[OBS * 64], next[OBS * 64], rew[64];
  int32_t act[64];
  int term[64];
  for (int done = 0; done < n;) {
    int k = n - done < 16 ? n - done : 16;
    for (int i = 0; i < k; i++) {
      for (int j = 0; j < OBS; j++) {
        obs[i * OBS + j] = agt_uniform(g, -1, 1);
        next[i * OBS + j] = agt_uniform(g, -1, 1);
      }
      act[i] = (int32_t)agt_below(g, ACTS);
      rew[i] = agt_uniform(g, -1, 1);
      term[i] = agt_below(g, 10) == 0;
    }
    agt_ok(ag_dqn_store(d, obs, act, rew, next, term, k));
    done += k;
  }
}

/* With conv, the observations are 1x2x2 images seen through a 2x2
 * convolution of 3 filters and a 2x2 one of 2 filters padded by 1, in
 * front of one hidden layer. */
static ag_dqn *make_dqn_of(ag_ctx *ctx, int fused, int64_t buffer, int conv) {
  ag_dqn_config c = agt_dqn_config(16, 32, buffer, 11, fused);
  c.n_hidden = 2;
  c.hidden[1] = 8;
  if (conv) {
    c.n_conv = 2;
    c.conv[0] = (ag_conv_layer){3, 2, 1, 0};
    c.conv[1] = (ag_conv_layer){2, 2, 1, 1};
    c.obs_shape[0] = 1, c.obs_shape[1] = 2, c.obs_shape[2] = 2;
    c.n_hidden = 1;
  }
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, OBS, ACTS, 5000, &c, &d));
  agt_rng g = {0x1234};
  store_random(d, &g, (int)buffer + 37); /* the ring wrapped */
  float loss;
  agt_ok(ag_dqn_train(d, 9, &loss));
  agt_ok(ag_dqn_update_target(d));
  agt_ok(ag_dqn_train(d, 3, &loss));
  float obs[OBS * 5];
  for (int i = 0; i < OBS * 5; i++) obs[i] = agt_uniform(&g, -1, 1);
  int32_t a[5];
  agt_ok(ag_dqn_act(d, obs, 5, 100, 1, a)); /* the exploration stream moved */
  agt_ok(ag_dqn_set_run_state(d, "run state", 9));
  return d;
}

static ag_dqn *make_dqn(ag_ctx *ctx, int fused, int64_t buffer) { return make_dqn_of(ctx, fused, buffer, 0); }

/* Every tensor of both networks, bytes in a new array. */
static float *params_of(const ag_dqn *d, size_t *n) {
  const ag_mlp *nets[2] = {ag_dqn_q(d), ag_dqn_target(d)};
  size_t total = 0;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < ag_mlp_n_params(nets[k]); i++)
      total += (size_t)ag_tensor_numel(ag_mlp_params(nets[k])[i]);
  float *all = malloc(total * sizeof *all);
  assert_non_null(all);
  size_t at = 0;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < ag_mlp_n_params(nets[k]); i++) {
      const ag_tensor *t = ag_mlp_params(nets[k])[i];
      agt_ok(ag_tensor_read(t, all + at, (size_t)ag_tensor_numel(t) * sizeof(float)));
      at += (size_t)ag_tensor_numel(t);
    }
  *n = total;
  return all;
}

static void assert_same_params(const ag_dqn *a, const ag_dqn *b) {
  size_t na, nb;
  float *pa = params_of(a, &na), *pb = params_of(b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(pa, pb, na * sizeof *pa);
  free(pa);
  free(pb);
}

AGT_AGENT_KIND(dqn_kind, ag_dqn, ag_dqn, ag_dqn_learn_ex, assert_same_params, "not an agrl file");

/* a and b act, store and train the same way from here: the same actions,
 * losses and parameters after every phase. */
static void assert_same_future(ag_dqn *a, ag_dqn *b) {
  assert_int_equal(ag_dqn_updates(a), ag_dqn_updates(b));
  assert_int_equal(ag_replay_size(ag_dqn_replay(a)), ag_replay_size(ag_dqn_replay(b)));
  assert_int_equal(ag_replay_position(ag_dqn_replay(a)), ag_replay_position(ag_dqn_replay(b)));
  assert_same_params(a, b);
  agt_rng ga = {77}, gb = {77};
  for (int round = 0; round < 3; round++) {
    float obs[OBS * 7];
    for (int i = 0; i < OBS * 7; i++) obs[i] = agt_uniform(&ga, -1, 1);
    (void)agt_uniform(&gb, -1, 1);
    int32_t aa[7], ab[7];
    agt_ok(ag_dqn_act(a, obs, 7, 400 + round, 1, aa));
    agt_ok(ag_dqn_act(b, obs, 7, 400 + round, 1, ab));
    assert_memory_equal(aa, ab, sizeof aa);
    agt_rng sa = {500u + (unsigned)round}, sb = {500u + (unsigned)round};
    store_random(a, &sa, 45);
    store_random(b, &sb, 45);
    float la, lb;
    agt_ok(ag_dqn_train(a, 10, &la));
    agt_ok(ag_dqn_train(b, 10, &lb));
    assert_memory_equal(&la, &lb, sizeof la);
    agt_ok(ag_dqn_update_target(a));
    agt_ok(ag_dqn_update_target(b));
    assert_same_params(a, b);
  }
}

/* ---- round trips ---- */

static void round_trip_trains_on_identically(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  for (int fused = 0; fused < 2; fused++) {
    ag_dqn *d = make_dqn(ctx, fused, 200);
    ag_dqn *l = agt_round_trip(&dqn_kind, ctx, d);
    assert_int_equal(ag_dqn_fused(l), ag_dqn_fused(d));
    assert_int_equal(ag_replay_capacity(ag_dqn_replay(l)), 200);
    assert_true(ag_dqn_epsilon(l, 321) == ag_dqn_epsilon(d, 321));
    assert_same_future(d, l);
    ag_dqn_free(l);
    ag_dqn_free(d);
  }
  ag_ctx_free(ctx);
}

static void saved_here_loads_on_the_cpu(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn *d = make_dqn(ctx, 1, 100);
  agt_loads_on_the_cpu(&dqn_kind, d);
  ag_dqn_free(d);
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

static void damaged_files_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn *d = make_dqn(ctx, 1, 40);
  agt_ok(ag_dqn_save(d, agt_path_a));
  size_t n;
  unsigned char *f = agt_slurp(agt_path_a, &n), *g = malloc(n + 8);
  assert_non_null(g);
  uint32_t H = ag__get32(f + 12);
  assert_memory_equal(f, "AGRLFILE", 8);
  /* truncations (all in the header and just past it), every header byte and many of the rest */
  agt_refuse_damaged(&dqn_kind, ctx, f, g, n, H + 64, 5, 0x40);
  /* sound CRC, unsound contents: keys changed in place */
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.sizes"), 8, 5, "section 'W0'");
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.batch_size"), 8, 0, "configuration");
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.updates_at_target"), 8, 1000, "counters");
  double lr = 0.1; /* not an f32 */
  uint64_t bits;
  memcpy(&bits, &lr, 8);
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.lr"), 8, bits, "not a finite f32");
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.per"), 8, 2, "dqn.per");
  /* a key missing (its name changed), a newer version */
  memcpy(g, f, n);
  g[key_value(f, "dqn.lr") - 1] = 'R';
  agt_fix_crc(g);
  agt_refuse(&dqn_kind, ctx, g, n, AG_ERR_IO, "'dqn.lr' is missing");
  memcpy(g, f, n);
  ag__put64(g + key_value(f, "dqn.version"), 5);
  agt_fix_crc(g);
  agt_refuse(&dqn_kind, ctx, g, n, AG_ERR_UNSUPPORTED, "version");
  /* version 4 is a DQN of a frame table: without its key it is refused */
  memcpy(g, f, n);
  ag__put64(g + key_value(f, "dqn.version"), 4);
  agt_fix_crc(g);
  agt_refuse(&dqn_kind, ctx, g, n, AG_ERR_IO, "'dqn.frame_stack' is missing");
  /* version 3 is a DQN with convolutions: without their keys it is refused */
  memcpy(g, f, n);
  ag__put64(g + key_value(f, "dqn.version"), 3);
  agt_fix_crc(g);
  agt_refuse(&dqn_kind, ctx, g, n, AG_ERR_IO, "'dqn.conv' is missing");
  /* a large network: refused before it is made */
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.sizes") + 8, 8, (uint64_t)1 << 23, "section");
  agt_refuse_bad_args(&dqn_kind, ctx, d);
  free(f);
  free(g);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* A DQN with convolutions (which updates through the composed ops,
 * whatever cfg.fused says) keeps its convolutions and trains on the same. */
static void conv_round_trip_trains_on_identically(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn *d = make_dqn_of(ctx, 1, 120, 1);
  assert_int_equal(ag_dqn_fused(d), 0);
  assert_int_equal(ag_mlp_n_conv(ag_dqn_q(d)), 2);
  ag_dqn *l = agt_round_trip(&dqn_kind, ctx, d);
  const ag_dqn_config *cd = ag_dqn_get_config(d), *cl = ag_dqn_get_config(l);
  assert_int_equal(cl->n_conv, 2);
  assert_memory_equal(cl->conv, cd->conv, 2 * sizeof cd->conv[0]);
  assert_memory_equal(cl->obs_shape, cd->obs_shape, sizeof cd->obs_shape);
  assert_int_equal(ag_mlp_n_conv(ag_dqn_target(l)), 2);
  assert_same_future(d, l);
  ag_dqn_free(l);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* The keys of convolutions are checked: a shape that is not the
 * observation's, layers that do not fit it, a count not of whole layers,
 * and those keys in a version-2 file. */
static void conv_damaged_files_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn *d = make_dqn_of(ctx, 0, 40, 1);
  agt_ok(ag_dqn_save(d, agt_path_a));
  size_t n;
  unsigned char *f = agt_slurp(agt_path_a, &n), *g = malloc(n + 8);
  assert_non_null(g);
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.obs_shape"), 8, 2, "does not hold");
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.obs_shape") + 8, 8, 0, "out of range");
  /* sizes whose product wraps 64 bits (2^24 * 2^24 * 2^16 = 2^64, read as 0 when wrapped) */
  memcpy(g, f, n);
  ag__put64(g + key_value(f, "dqn.obs_shape"), (uint64_t)1 << 24);
  ag__put64(g + key_value(f, "dqn.obs_shape") + 8, (uint64_t)1 << 24);
  ag__put64(g + key_value(f, "dqn.obs_shape") + 16, (uint64_t)1 << 16);
  agt_fix_crc(g);
  agt_refuse(&dqn_kind, ctx, g, n, AG_ERR_IO, "does not hold");
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.conv") + 8, 8, 3, "configuration");
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.conv") + 4 * 8, 8, 0, "configuration");
  memcpy(g, f, n);
  ag__put64(g + key_value(f, "dqn.version"), 2);
  agt_fix_crc(g);
  agt_refuse(&dqn_kind, ctx, g, n, AG_ERR_IO, "the keys of convolutions in a version-2 file");
  free(f);
  free(g);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* A DQN of a frame table (frames of 2 x 2 x 1, stacks of 2, two copies,
 * prioritized) with a ring that wrapped and some updates. */
static ag_dqn *make_frame_dqn(ag_ctx *ctx) {
  ag_dqn_config c = agt_dqn_config(8, 4, 24, 5, 0);
  c.frame_stack = 2;
  c.obs_shape[0] = 2, c.obs_shape[1] = 2, c.obs_shape[2] = 2;
  c.n_envs = 2;
  c.per = 1;
  c.n_step = 2;
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, 8, ACTS, 5000, &c, &d));
  agt_rng g = {0x77};
  for (int step = 0; step < 17; step++) { /* episodes of 5 steps, then the last observation */
    uint8_t fr[2 * 4], first[2];
    int32_t act[2];
    float rew[2];
    int term[2], trn[2];
    for (int e = 0; e < 2; e++) {
      const int t = (step + e) % 6;
      for (int i = 0; i < 4; i++) fr[e * 4 + i] = (uint8_t)agt_below(&g, 256);
      first[e] = t == 0, act[e] = t == 5 ? 0 : (int32_t)agt_below(&g, ACTS);
      rew[e] = t == 5 ? 0.0f : agt_uniform(&g, -1, 1), term[e] = t == 4 && e == 0, trn[e] = t == 4 && e == 1;
    }
    agt_ok(ag_dqn_store_frames(d, fr, first, act, rew, term, trn, 1));
  }
  agt_ok(ag_dqn_train(d, 5, NULL));
  agt_ok(ag_dqn_set_run_state(d, "run state", 9));
  return d;
}

/* A frame DQN's file: loaded, it saves the same bytes, trains on as the
 * saved one and takes the same draws; damaged copies, its keys out of
 * range and its key in an older version are refused; faults at every step
 * of a save and a load leave nothing behind. */
static void frames_round_trip_and_damaged_files(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn *d = make_frame_dqn(ctx);
  ag_dqn *l = agt_round_trip(&dqn_kind, ctx, d);
  assert_int_equal(ag_frames_count(ag_dqn_frames(l)), ag_frames_count(ag_dqn_frames(d)));
  assert_int_equal(ag_frames_position(ag_dqn_frames(l)), ag_frames_position(ag_dqn_frames(d)));
  float la, lb;
  agt_ok(ag_dqn_train(d, 3, &la));
  agt_ok(ag_dqn_train(l, 3, &lb));
  assert_true(la == lb);
  assert_same_params(d, l);
  ag_dqn_free(l);
  agt_ok(ag_dqn_save(d, agt_path_a));
  size_t n;
  unsigned char *f = agt_slurp(agt_path_a, &n), *g = malloc(n + 8);
  assert_non_null(g);
  agt_refuse_damaged(&dqn_kind, ctx, f, g, n, ag__get32(f + 12) + 64, 7, 0x40);
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.frame_stack"), 8, 0, "dqn.frame_stack");
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.frame_stack"), 8, 4, "configuration");
  agt_refuse_field(&dqn_kind, ctx, f, g, n, key_value(f, "dqn.obs_shape") + 8, 8, 1, "does not hold");
  memcpy(g, f, n);
  ag__put64(g + key_value(f, "dqn.version"), 3);
  agt_fix_crc(g);
  agt_refuse(&dqn_kind, ctx, g, n, AG_ERR_IO, "the key of a frame table in a file of version 2 or 3");
  agt_faults_at_every_step(&dqn_kind, ctx, d);
  free(f);
  free(g);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* A save into a missing directory or past the file-size limit (what a full
 * disk does to write) fails with AG_ERR_IO and keeps the earlier file. */
static void unwritable_places(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn *d = make_dqn(ctx, 1, 2000);
  agt_err(ag_dqn_save(d, "/nonexistent-dir/a.agrl"), AG_ERR_IO, "/nonexistent-dir/a.agrl");
  agt_spit(agt_path_a, "earlier", 7);
  struct rlimit old, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = 4096;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ag_status s = ag_dqn_save(d, agt_path_a);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, was);
  if (s != AG_ERR_IO)
    fail_msg("a save past the size limit returned %s: %s", ag_status_name(s), ag_last_error());
  size_t n;
  unsigned char *f = agt_slurp(agt_path_a, &n);
  assert_int_equal(n, 7);
  assert_memory_equal(f, "earlier", 7);
  free(f);
  assert_int_equal(agt_count_entries(agt_dir), 1); /* no temporary left */
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

static void faults_at_every_step(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn *d = make_dqn(ctx, 1, 60);
  agt_faults_at_every_step(&dqn_kind, ctx, d);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

static void run_state_calls(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = agt_dqn_config(8, 4, 16, 1, 1);
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, OBS, ACTS, 100, &c, &d));
  agt_run_state_calls(&dqn_kind, d);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* ---- checkpoints of a run ---- */

static void *run_dqn(ag_ctx *ctx, int variant) {
  (void)variant;
  ag_dqn_config c = agt_dqn_config(32, 32, 600, 5, 1);
  c.learning_starts = 200;
  c.train_freq = 48;
  c.gradient_steps = 12;
  c.target_update_interval = 30;
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, 4, 2, 3000, &c, &d));
  return d;
}

/* CartPole on 3 copies: checkpoints every 600 steps, resumed from the one
 * at 2400; stopped after 250 polls (753 steps). */
static void resumed_runs_equal_the_uninterrupted_one(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const agt_resume_case c = {run_dqn, 0, "cartpole", 3, 2, 3000, 600, 3000, 2400, 250, 40};
  agt_resumed_runs_equal_the_uninterrupted_one(&dqn_kind, ctx, &c);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
#define TEST(f) cmocka_unit_test_setup_teardown(f, agt_dir_setup, agt_dir_teardown)
  const struct CMUnitTest tests[] = {TEST(round_trip_trains_on_identically),
                                     TEST(conv_round_trip_trains_on_identically),
                                     TEST(conv_damaged_files_refused),
                                     TEST(frames_round_trip_and_damaged_files),
                                     TEST(saved_here_loads_on_the_cpu),
                                     TEST(damaged_files_refused),
                                     TEST(unwritable_places),
                                     TEST(faults_at_every_step),
                                     TEST(run_state_calls),
                                     TEST(resumed_runs_equal_the_uninterrupted_one)};
#undef TEST
  return agt_run(argc, argv, "dqn_file", tests, sizeof tests / sizeof tests[0]);
}
