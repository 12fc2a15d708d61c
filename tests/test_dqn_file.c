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
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agt.h"
#include "base/base.h"

#define SENTINEL ((ag_dqn *)(uintptr_t)0x5e17e1)

static char dir[64];
static char path_a[128], path_b[128];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/agrl_dqnXXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(path_a, sizeof path_a, "%s/a.agrl", dir);
  snprintf(path_b, sizeof path_b, "%s/b.agrl", dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  agt_clear_dir(dir, 3);
  return rmdir(dir);
}

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

static ag_dqn *make_dqn(ag_ctx *ctx, int fused, int64_t buffer) {
  ag_dqn_config c = agt_dqn_config(16, 32, buffer, 11, fused);
  c.n_hidden = 2;
  c.hidden[1] = 8;
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
    agt_ok(ag_dqn_save(d, path_a));
    ag_dqn *l = SENTINEL;
    agt_ok(ag_dqn_load(ctx, path_a, &l));
    assert_true(l != SENTINEL);
    size_t n;
    const char *rs = ag_dqn_run_state(l, &n);
    assert_int_equal(n, 9);
    assert_memory_equal(rs, "run state", 9);
    assert_int_equal(ag_dqn_fused(l), ag_dqn_fused(d));
    assert_int_equal(ag_replay_capacity(ag_dqn_replay(l)), 200);
    assert_true(ag_dqn_epsilon(l, 321) == ag_dqn_epsilon(d, 321));
    /* a loaded DQN saves the same file again */
    agt_ok(ag_dqn_save(l, path_b));
    size_t na, nb;
    unsigned char *fa = agt_slurp(path_a, &na), *fb = agt_slurp(path_b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(fa, fb, na);
    free(fa);
    free(fb);
    assert_same_future(d, l);
    ag_dqn_free(l);
    ag_dqn_free(d);
  }
  ag_ctx_free(ctx);
}

static void saved_here_loads_on_the_cpu(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu;
  agt_ok(ag_ctx_create(&cpu, AG_DEVICE_CPU, 0));
  ag_dqn *d = make_dqn(ctx, 1, 100), *l;
  agt_ok(ag_dqn_save(d, path_a));
  agt_ok(ag_dqn_load(cpu, path_a, &l));
  assert_same_params(d, l);
  agt_ok(ag_dqn_save(l, path_b)); /* and the CPU writes the same bytes */
  size_t na, nb;
  unsigned char *fa = agt_slurp(path_a, &na), *fb = agt_slurp(path_b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(fa, fb, na);
  free(fa);
  free(fb);
  ag_dqn_free(l);
  ag_dqn_free(d);
  ag_ctx_free(cpu);
  ag_ctx_free(ctx);
}

/* ---- refusals ---- */

static void refuse(ag_ctx *ctx, const unsigned char *bytes, size_t n, ag_status want, const char *part) {
  agt_spit(path_b, bytes, n);
  ag_dqn *l = SENTINEL;
  uint64_t l0 = agt_live_bytes(ctx);
  ag_status s = ag_dqn_load(ctx, path_b, &l);
  if (want != AG_OK) {
    if (s != want)
      fail_msg("load of %zu bytes returned %s, expected %s: %s", n, ag_status_name(s), ag_status_name(want),
               ag_last_error());
    if (part && !strstr(ag_last_error(), part))
      fail_msg("message \"%s\" lacks \"%s\"", ag_last_error(), part);
  } else if (s == AG_OK)
    fail_msg("a damaged file of %zu bytes loaded", n);
  assert_true(l == SENTINEL);
  assert_int_equal(agt_live_bytes(ctx), l0);
}

static void fix_crc(unsigned char *f) {
  uint32_t H = ag__get32(f + 12);
  ag__put32(f + H - 4, ag__crc32_add(0, f, H - 4));
}

static void damaged_files_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn *d = make_dqn(ctx, 1, 40);
  agt_ok(ag_dqn_save(d, path_a));
  size_t n;
  unsigned char *f = agt_slurp(path_a, &n), *g = malloc(n + 8);
  assert_non_null(g);
  uint32_t H = ag__get32(f + 12);
  for (size_t len = 0; len < n; len += len < H + 64 ? 1 : 7) refuse(ctx, f, len, AG_ERR_IO, NULL);
  memcpy(g, f, n);
  g[n] = 0;
  refuse(ctx, g, n + 1, AG_ERR_IO, "trailing");
  for (size_t i = 0; i < n; i += i < H ? 1 : 5) { /* every header byte, and many of the rest */
    memcpy(g, f, n);
    g[i] ^= 0x40;
    refuse(ctx, g, n, AG_OK, NULL);
  }
  memcpy(g, f, n);
  g[3] = 'X';
  refuse(ctx, g, n, AG_ERR_IO, "not a DQN file");
  memcpy(g, f, n);
  ag__put32(g + 8, 2);
  fix_crc(g);
  refuse(ctx, g, n, AG_ERR_UNSUPPORTED, "version 2");
  memcpy(g, f, n); /* sound CRC, unsound contents */
  ag__put64(g + 208, 5);
  fix_crc(g);
  refuse(ctx, g, n, AG_ERR_IO, "tensor");
  memcpy(g, f, n);
  ag__put64(g + 152, 0); /* batch_size 0 */
  fix_crc(g);
  refuse(ctx, g, n, AG_ERR_IO, "configuration");
  memcpy(g, f, n);
  ag__put64(g + 256, (uint64_t)1 << 40); /* run state of 2^40 bytes */
  fix_crc(g);
  refuse(ctx, g, n, AG_ERR_IO, "run state");
  memcpy(g, f, n);
  ag__put64(g + 56, (uint64_t)1 << 23); /* a large network: refused before it is made */
  fix_crc(g);
  refuse(ctx, g, n, AG_ERR_IO, "shape");
  for (uint32_t i = 0; i < (H - 492) / 24; i++) /* ... and with entries to match, as truncated */
    if (ag__get64(g + 488 + 24 * i) == 16)
      ag__put64(g + 488 + 24 * i, (uint64_t)1 << 23);
    else if (ag__get64(g + 488 + 24 * i + 8) == 16)
      ag__put64(g + 488 + 24 * i + 8, (uint64_t)1 << 23);
  fix_crc(g);
  refuse(ctx, g, n, AG_ERR_IO, "truncated");
  ag_dqn *l = SENTINEL;
  agt_err(ag_dqn_load(ctx, "/nonexistent/x.agrl", &l), AG_ERR_IO, "/nonexistent/x.agrl");
  assert_true(l == SENTINEL);
  agt_err(ag_dqn_load(NULL, path_a, &l), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_dqn_load(ctx, NULL, &l), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_dqn_save(NULL, path_a), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_dqn_save(d, ""), AG_ERR_INVALID_ARG, "empty");
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
  agt_spit(path_a, "earlier", 7);
  struct rlimit old, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = 4096;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ag_status s = ag_dqn_save(d, path_a);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, was);
  if (s != AG_ERR_IO)
    fail_msg("a save past the size limit returned %s: %s", ag_status_name(s), ag_last_error());
  size_t n;
  unsigned char *f = agt_slurp(path_a, &n);
  assert_int_equal(n, 7);
  assert_memory_equal(f, "earlier", 7);
  free(f);
  DIR *dd = opendir(dir); /* no temporary left */
  int entries = 0;
  for (struct dirent *e; (e = readdir(dd));) entries += e->d_name[0] != '.';
  closedir(dd);
  assert_int_equal(entries, 1);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

static void faults_at_every_step(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_fault kinds[4] = {AG_FAULT_ALLOC, AG_FAULT_UPLOAD, AG_FAULT_DOWNLOAD, AG_FAULT_HOST_ALLOC};
  ag_dqn *d = make_dqn(ctx, 1, 60);
  size_t n0;
  float *p0 = params_of(d, &n0);
  int failures = 0;
  for (int k = 0; k < 4; k++)
    for (int64_t after = 0;; after++) {
      assert_true(after < 100000);
      agt_spit(path_a, "earlier", 7);
      agt_ok(ag_ctx_inject_fault(ctx, kinds[k], after));
      ag_status s = ag_dqn_save(d, path_a);
      agt_ok(ag_ctx_inject_fault(ctx, kinds[k], -1));
      if (s == AG_OK) break;
      failures++;
      size_t n;
      unsigned char *f = agt_slurp(path_a, &n);
      assert_int_equal(n, 7);
      assert_memory_equal(f, "earlier", 7);
      free(f);
      size_t n1;
      float *p1 = params_of(d, &n1);
      assert_memory_equal(p0, p1, n0 * sizeof *p0);
      free(p1);
    }
  assert_true(failures > 0);
  failures = 0;
  for (int k = 0; k < 4; k++)
    for (int64_t after = 0;; after++) {
      assert_true(after < 100000);
      ag_dqn *l = SENTINEL;
      uint64_t l0 = agt_live_bytes(ctx);
      agt_ok(ag_ctx_inject_fault(ctx, kinds[k], after));
      ag_status s = ag_dqn_load(ctx, path_a, &l);
      agt_ok(ag_ctx_inject_fault(ctx, kinds[k], -1));
      if (s == AG_OK) {
        assert_same_params(d, l);
        ag_dqn_free(l);
        break;
      }
      failures++;
      assert_true(l == SENTINEL);
      assert_int_equal(agt_live_bytes(ctx), l0);
    }
  assert_true(failures > 0);
  free(p0);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

static void run_state_calls(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = agt_dqn_config(8, 4, 16, 1, 1);
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, OBS, ACTS, 100, &c, &d));
  size_t n = 99;
  assert_null(ag_dqn_run_state(d, &n));
  assert_int_equal(n, 0);
  agt_ok(ag_dqn_set_run_state(d, "abc", 3));
  assert_memory_equal(ag_dqn_run_state(d, &n), "abc", 3);
  assert_int_equal(n, 3);
  agt_err(ag_dqn_set_run_state(d, NULL, 2), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_dqn_set_run_state(d, "x", ((size_t)1 << 30) + 1), AG_ERR_INVALID_ARG, "2^30");
  assert_memory_equal(ag_dqn_run_state(d, &n), "abc", 3); /* unchanged */
  agt_ok(ag_dqn_set_run_state(d, NULL, 0));
  assert_null(ag_dqn_run_state(d, &n));
  assert_null(ag_dqn_run_state(NULL, &n));
  assert_int_equal(n, 0);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* ---- checkpoints of a run ---- */

static ag_dqn *run_dqn(ag_ctx *ctx) {
  ag_dqn_config c = agt_dqn_config(32, 32, 600, 5, 1);
  c.learning_starts = 200;
  c.train_freq = 48;
  c.gradient_steps = 12;
  c.target_update_interval = 30;
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, 4, 2, 3000, &c, &d));
  return d;
}

/* Events from index `from` of got equal those of want from step `step` on. */

static void resumed_runs_equal_the_uninterrupted_one(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  static agt_events ref, ck, res;
  memset(&ref, 0, sizeof ref);
  memset(&ck, 0, sizeof ck);
  ag_vec_env *env;
  /* the reference */
  ag_dqn *d = run_dqn(ctx);
  agt_ok(ag_vec_env_create("cartpole", 3, 9, &env));
  agt_ok(ag_dqn_learn(d, env, 3000, agt_record, &ref));
  assert_true(ref.n > 40);
  ag_dqn_free(d);
  ag_vec_env_free(env);
  /* with checkpoints every 600 steps, keeping 2: the same events */
  char cdir[128];
  snprintf(cdir, sizeof cdir, "%s/ckpts", dir);
  d = run_dqn(ctx);
  agt_ok(ag_vec_env_create("cartpole", 3, 9, &env));
  ag_learn_opts o = ag_learn_defaults();
  o.checkpoint_dir = cdir;
  o.checkpoint_every = 600;
  o.keep = 2;
  agt_ok(ag_dqn_learn_ex(d, env, 3000, &o, agt_record, &ck));
  assert_int_equal(o.stopped, 0);
  assert_int_equal(o.step, 3000);
  assert_int_equal(ck.n, ref.n);
  assert_memory_equal(ck.ev, ref.ev, sizeof ref.ev[0] * (size_t)ref.n);
  ag_dqn_free(d);
  ag_vec_env_free(env);
  char latest[256];
  int64_t at;
  agt_ok(ag_learn_latest(cdir, latest, sizeof latest, &at));
  assert_int_equal(at, 3000);
  int kept = 0;
  DIR *dd = opendir(cdir);
  for (struct dirent *e; (e = readdir(dd));) kept += e->d_name[0] != '.';
  closedir(dd);
  assert_int_equal(kept, 2); /* 2400 and 3000 */
  /* resumed from the one at 2400 */
  char agent[300];
  snprintf(agent, sizeof agent, "%s/ckpt-%012d/agent.agrl", cdir, 2400);
  agt_ok(ag_dqn_load(ctx, agent, &d));
  agt_ok(ag_vec_env_create("cartpole", 3, 12345, &env)); /* its seeds come from the checkpoint */
  o = ag_learn_defaults();
  o.resume = 1;
  memset(&res, 0, sizeof res);
  agt_ok(ag_dqn_learn_ex(d, env, 3000, &o, agt_record, &res));
  assert_int_equal(o.resumed_at, 2400);
  agt_assert_same_events_from(&ref, &res, 2400);
  ag_dqn_free(d);
  ag_vec_env_free(env);
  /* stopped by should_stop after 250 steps of the loop, then resumed */
  char sdir[128];
  snprintf(sdir, sizeof sdir, "%s/stopped", dir);
  d = run_dqn(ctx);
  agt_ok(ag_vec_env_create("cartpole", 3, 9, &env));
  memset(&res, 0, sizeof res);
  res.stop_after = 250;
  o = ag_learn_defaults();
  o.checkpoint_dir = sdir;
  o.should_stop = agt_stop_later;
  o.user = &res;
  agt_ok(ag_dqn_learn_ex(d, env, 3000, &o, agt_record, &res));
  assert_int_equal(o.stopped, 1);
  assert_int_equal(o.step, 251 * 3);
  ag_dqn_free(d);
  ag_vec_env_free(env);
  agt_ok(ag_learn_latest(sdir, latest, sizeof latest, &at));
  assert_int_equal(at, 753);
  snprintf(agent, sizeof agent, "%s/agent.agrl", latest);
  agt_ok(ag_dqn_load(ctx, agent, &d));
  /* refusals: another number of copies; a DQN with no run state */
  agt_ok(ag_vec_env_create("cartpole", 2, 9, &env));
  o = ag_learn_defaults();
  o.resume = 1;
  agt_err(ag_dqn_learn_ex(d, env, 3000, &o, agt_record, &res), AG_ERR_INVALID_ARG, "copies");
  ag_vec_env_free(env);
  agt_ok(ag_vec_env_create("cartpole", 3, 9, &env));
  memset(&res, 0, sizeof res);
  agt_ok(ag_dqn_learn_ex(d, env, 3000, &o, agt_record, &res));
  agt_assert_same_events_from(&ref, &res, 753);
  ag_dqn_free(d);
  d = run_dqn(ctx);
  agt_err(ag_dqn_learn_ex(d, env, 3000, &o, agt_record, &res), AG_ERR_INVALID_ARG, "no run state");
  o = ag_learn_defaults();
  o.keep = 0;
  agt_err(ag_dqn_learn_ex(d, env, 3000, &o, agt_record, &res), AG_ERR_INVALID_ARG, "keep");
  agt_err(ag_learn_latest(dir, latest, sizeof latest, &at), AG_ERR_IO, "no checkpoint");
  agt_err(ag_learn_latest(cdir, latest, 8, &at), AG_ERR_OUT_OF_RANGE, "bytes");
  ag_dqn_free(d);
  ag_vec_env_free(env);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(round_trip_trains_on_identically, setup, teardown),
      cmocka_unit_test_setup_teardown(saved_here_loads_on_the_cpu, setup, teardown),
      cmocka_unit_test_setup_teardown(damaged_files_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(unwritable_places, setup, teardown),
      cmocka_unit_test_setup_teardown(faults_at_every_step, setup, teardown),
      cmocka_unit_test_setup_teardown(run_state_calls, setup, teardown),
      cmocka_unit_test_setup_teardown(resumed_runs_equal_the_uninterrupted_one, setup, teardown),
  };
  return agt_run(argc, argv, "dqn_file", tests, sizeof tests / sizeof tests[0]);
}
