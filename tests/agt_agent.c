/* agt_agent.c — the checks the agent file tests share (see agt_agent.h). */
#include "agt_agent.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/agfile.h"
#include "base/base.h"

#define SENTINEL ((void *)(uintptr_t)0x5e17e1)

char agt_dir[64], agt_path_a[128], agt_path_b[128];

int agt_dir_setup(void **state) {
  (void)state;
  snprintf(agt_dir, sizeof agt_dir, "%s/agrl_fileXXXXXX",
           access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  if (!mkdtemp(agt_dir)) return -1;
  snprintf(agt_path_a, sizeof agt_path_a, "%s/a.agrl", agt_dir);
  snprintf(agt_path_b, sizeof agt_path_b, "%s/b.agrl", agt_dir);
  return 0;
}

int agt_dir_teardown(void **state) {
  (void)state;
  agt_clear_dir(agt_dir, 3);
  return rmdir(agt_dir);
}

void agt_assert_same_files(const char *x, const char *y) {
  size_t n[2];
  unsigned char *b[2] = {agt_slurp(x, &n[0]), agt_slurp(y, &n[1])};
  assert_int_equal(n[0], n[1]);
  assert_memory_equal(b[0], b[1], n[0]);
  free(b[0]);
  free(b[1]);
}

int agt_count_entries(const char *d) {
  int kept = 0;
  DIR *dd = opendir(d);
  assert_non_null(dd);
  for (struct dirent *e; (e = readdir(dd));) kept += e->d_name[0] != '.';
  closedir(dd);
  return kept;
}

void *agt_round_trip(const agt_agent_kind *k, ag_ctx *ctx, const void *a) {
  agt_ok(k->save(a, agt_path_a));
  void *l = SENTINEL;
  agt_ok(k->load(ctx, agt_path_a, &l));
  assert_true(l != SENTINEL);
  size_t n;
  const char *rs = k->run_state(l, &n);
  assert_int_equal(n, 9);
  assert_memory_equal(rs, "run state", 9);
  agt_ok(k->save(l, agt_path_b)); /* a loaded agent saves the same file again */
  agt_assert_same_files(agt_path_a, agt_path_b);
  return l;
}

void agt_loads_on_the_cpu(const agt_agent_kind *k, const void *a) {
  ag_ctx *cpu;
  void *l;
  agt_ok(ag_ctx_create(&cpu, AG_DEVICE_CPU, 0));
  agt_ok(k->save(a, agt_path_a));
  agt_ok(k->load(cpu, agt_path_a, &l));
  k->assert_same(a, l);
  agt_ok(k->save(l, agt_path_b)); /* and the CPU writes the same bytes */
  agt_assert_same_files(agt_path_a, agt_path_b);
  k->free(l);
  ag_ctx_free(cpu);
}

void agt_fix_crc(unsigned char *f) {
  uint32_t H = ag__get32(f + 12);
  ag__put32(f + H - 4, ag__crc32_add(0, f, H - 4));
}

void agt_refuse(const agt_agent_kind *k, ag_ctx *ctx, const unsigned char *bytes, size_t n, ag_status want,
                const char *part) {
  agt_spit(agt_path_b, bytes, n);
  void *l = SENTINEL;
  const uint64_t live = agt_live_bytes(ctx);
  const ag_status s = k->load(ctx, agt_path_b, &l);
  const char *msg = ag_last_error();
  int ok =
      want == AG_OK ? s == AG_ERR_IO || s == AG_ERR_UNSUPPORTED : s == want && (!part || strstr(msg, part));
  if (!ok || !strstr(msg, agt_path_b) || l != SENTINEL || agt_live_bytes(ctx) != live)
    fail_msg("a file of %zu bytes: %s, expected %s naming \"%s\" and the path, nothing made (message: %s)", n,
             ag_status_name(s), ag_status_name(want), part ? part : "", msg);
}

void agt_refuse_field(const agt_agent_kind *k, ag_ctx *ctx, const unsigned char *f, unsigned char *g,
                      size_t n, size_t at, int bytes, uint64_t v, const char *part) {
  memcpy(g, f, n);
  if (bytes == 8)
    ag__put64(g + at, v);
  else
    ag__put32(g + at, (uint32_t)v);
  agt_fix_crc(g);
  agt_refuse(k, ctx, g, n, AG_ERR_IO, part);
}

void agt_refuse_damaged(const agt_agent_kind *k, ag_ctx *ctx, const unsigned char *f, unsigned char *g,
                        size_t n, size_t dense, size_t stride, unsigned char flip) {
  uint32_t H = ag__get32(f + 12);
  for (size_t len = 0; len < n; len += len < dense ? 1 : 7) agt_refuse(k, ctx, f, len, AG_ERR_IO, NULL);
  memcpy(g, f, n);
  g[n] = 0;
  agt_refuse(k, ctx, g, n + 1, AG_ERR_IO, "trailing");
  for (size_t i = 0; i < n; i += i < H ? 1 : stride) {
    memcpy(g, f, n);
    g[i] ^= flip;
    agt_refuse(k, ctx, g, n, AG_OK, NULL);
  }
  memcpy(g, f, n);
  g[3] = 'X';
  agt_refuse(k, ctx, g, n, AG_ERR_IO, k->magic_part);
  memcpy(g, f, n);
  ag__put32(g + 8, 2);
  agt_fix_crc(g);
  agt_refuse(k, ctx, g, n, AG_ERR_UNSUPPORTED, "version 2");
}

void agt_refuse_bad_args(const agt_agent_kind *k, ag_ctx *ctx, const void *a) {
  void *l = SENTINEL;
  agt_err(k->load(ctx, "/nonexistent/x.agrl", &l), AG_ERR_IO, "/nonexistent/x.agrl");
  assert_true(l == SENTINEL);
  agt_err(k->load(NULL, agt_path_a, &l), AG_ERR_INVALID_ARG, "NULL");
  agt_err(k->load(ctx, NULL, &l), AG_ERR_INVALID_ARG, "NULL");
  assert_true(l == SENTINEL);
  agt_err(k->save(NULL, agt_path_a), AG_ERR_INVALID_ARG, "NULL");
  agt_err(k->save(a, ""), AG_ERR_INVALID_ARG, "empty");
  agt_err(k->save(a, "/nonexistent-dir/a.agrl"), AG_ERR_IO, "/nonexistent-dir/a.agrl");
}

/* A save of a (l NULL) or a load into *l with a fault of `kind` armed after `after` events. */
static ag_status with_fault(const agt_agent_kind *k, ag_ctx *ctx, ag_fault kind, int64_t after, const void *a,
                            void **l) {
  agt_ok(ag_ctx_inject_fault(ctx, kind, after));
  ag_status s = l ? k->load(ctx, agt_path_a, l) : k->save(a, agt_path_a);
  agt_ok(ag_ctx_inject_fault(ctx, kind, -1));
  return s;
}

void agt_faults_at_every_step(const agt_agent_kind *k, ag_ctx *ctx, void *a) {
  const ag_fault kinds[4] = {AG_FAULT_ALLOC, AG_FAULT_UPLOAD, AG_FAULT_DOWNLOAD, AG_FAULT_HOST_ALLOC};
  void *was; /* a as it was before the faults */
  agt_ok(k->save(a, agt_path_b));
  agt_ok(k->load(ctx, agt_path_b, &was));
  int64_t saves = 0, loads = 0;
  for (int f = 0; f < 4; f++)
    for (int64_t after = 0; agt_spit(agt_path_a, "earlier", 7), with_fault(k, ctx, kinds[f], after, a, NULL);
         after++) {
      size_t n;
      unsigned char *b = agt_slurp(agt_path_a, &n);
      assert_true(n == 7 && !memcmp(b, "earlier", 7) && after < 100000);
      free(b);
      k->assert_same(a, was);
      saves++;
    }
  for (int f = 0; f < 4; f++)
    for (int64_t after = 0;; after++, loads++) {
      void *l = SENTINEL;
      const uint64_t live = agt_live_bytes(ctx);
      if (with_fault(k, ctx, kinds[f], after, a, &l) == AG_OK) {
        k->assert_same(a, l);
        k->free(l);
        break;
      }
      assert_true(l == SENTINEL && agt_live_bytes(ctx) == live && after < 100000);
    }
  assert_true(saves > 0 && loads > 0);
  k->free(was);
}

void agt_run_state_calls(const agt_agent_kind *k, void *a) {
  size_t n = 99;
  assert_null(k->run_state(a, &n));
  assert_int_equal(n, 0);
  agt_ok(k->set_run_state(a, "abc", 3));
  assert_memory_equal(k->run_state(a, &n), "abc", 3);
  assert_int_equal(n, 3);
  agt_err(k->set_run_state(a, NULL, 2), AG_ERR_INVALID_ARG, "NULL");
  agt_err(k->set_run_state(NULL, "x", 1), AG_ERR_INVALID_ARG, "NULL");
  agt_err(k->set_run_state(a, "x", ((size_t)1 << 30) + 1), AG_ERR_INVALID_ARG, "2^30");
  assert_memory_equal(k->run_state(a, &n), "abc", 3); /* unchanged */
  agt_ok(k->set_run_state(a, NULL, 0));
  assert_null(k->run_state(a, &n));
  assert_null(k->run_state(NULL, &n));
  assert_int_equal(n, 0);
}

static ag_vec_env *make_env(const agt_resume_case *c, int copies, uint64_t seed) {
  ag_vec_env *env;
  agt_ok(ag_vec_env_create(c->env, copies, seed, &env));
  return env;
}

/* The sections of a run state into host memory (obs, then env_state). */
typedef struct run_bytes {
  unsigned char *at[2];
  int sec[2];
} run_bytes;

static ag_status take_run(void *user, int sec, unsigned char *buf, uint64_t off, size_t len) {
  run_bytes *r = user;
  for (int k = 0; k < 2; k++)
    if (sec == r->sec[k]) memcpy(r->at[k] + off, buf, len);
  return AG_OK;
}

static int64_t run_key_i64(const ag__agf *c, const char *name) {
  const ag__agf_key *k = ag__agf_key_find(c, name);
  assert_non_null(k);
  assert_int_equal(k->type, AG__AGF_I64);
  return k->v.i;
}

/* The agent's run state (a container of kind "run") rewritten, by hand from
 * its keys and sections, in the packed layout agrl 0.1.0 wrote (AGRLRUN1
 * for the DQN's loop, AGRLRUNA for SAC's and TD3's; learn.c's header of
 * that release has it). */
static void run_state_as_0_1_0(const agt_agent_kind *k, void *a) {
  size_t n = 0;
  const unsigned char *b = k->run_state(a, &n);
  assert_non_null(b);
  FILE *f = fmemopen((void *)b, n, "rb");
  assert_non_null(f);
  ag__agf c;
  agt_ok(ag__agf_read(&c, f, n, "test", "the run state"));
  const ag__agf_key *loop = ag__agf_key_find(&c, "run.loop");
  assert_non_null(loop);
  const int ph = !strcmp(loop->data, "ac");
  const size_t F = ph ? 264 : 248;
  const int64_t copies = run_key_i64(&c, "run.n_envs"), od = run_key_i64(&c, "run.obs_dim");
  run_bytes r = {{NULL, NULL}, {ag__agf_section_find(&c, "obs"), ag__agf_section_find(&c, "env_state")}};
  assert_true(r.sec[0] >= 0 && r.sec[1] >= 0);
  const size_t ob = (size_t)(copies * od) * 4, E = (size_t)c.sections[r.sec[1]].bytes;
  unsigned char *p = calloc(1, F + ob + E);
  assert_non_null(p);
  r.at[0] = p + F, r.at[1] = p + F + ob;
  agt_ok(ag__agf_stream(&c, f, take_run, &r, "test", "the run state"));
  fclose(f);
  memcpy(p, ph ? "AGRLRUNA" : "AGRLRUN1", 8);
  ag__put32(p + 8, 1);
  ag__put32(p + 12, (uint32_t)copies);
  ag__put32(p + 16, (uint32_t)od);
  static const char *const counters[4] = {"run.step", "run.episodes", "run.since_train", "run.since_target"};
  for (int i = 0; i < 4; i++) ag__put64(p + 24 + 8 * i, (uint64_t)run_key_i64(&c, counters[i]));
  ag__put32(p + 56, (uint32_t)run_key_i64(&c, "run.returns_kept"));
  ag__put32(p + 60, (uint32_t)run_key_i64(&c, "run.returns_next"));
  const ag__agf_key *ret = ag__agf_key_find(&c, "run.returns"), *mean = ag__agf_key_find(&c, "run.mean");
  assert_true(ret && ret->count == 20 && mean);
  for (int i = 0; i < 20; i++) ag__put_f64(p + 64 + 8 * i, ((const double *)ret->data)[i]);
  ag__put_f64(p + 224, mean->v.f);
  ag__put64(p + 232, (uint64_t)E);
  ag__put64(p + 240, (uint64_t)run_key_i64(&c, "run.last_eval"));
  if (ph) {
    const ag__agf_key *lo = ag__agf_key_find(&c, "run.losses");
    assert_true(lo && lo->count == 2);
    ag__put64(p + 248, (uint64_t)run_key_i64(&c, "run.last_report"));
    ag__put_f32(p + 256, (float)((const double *)lo->data)[0]);
    ag__put_f32(p + 260, (float)((const double *)lo->data)[1]);
  }
  ag__agf_free(&c);
  agt_ok(k->set_run_state(a, p, F + ob + E));
  free(p);
}

void agt_resumed_runs_equal_the_uninterrupted_one(const agt_agent_kind *k, ag_ctx *ctx,
                                                  const agt_resume_case *c) {
  static agt_events ref, ck, res;
  memset(&ref, 0, sizeof ref);
  memset(&ck, 0, sizeof ck);
  /* the reference, and its final state */
  void *r = c->make(ctx, c->variant);
  ag_vec_env *env = make_env(c, c->copies, 9);
  agt_ok(k->learn(r, env, c->steps, NULL, &ref));
  assert_true(ref.n > c->min_events);
  ag_vec_env_free(env);
  /* with checkpoints every `every` steps, keeping 2: the same events */
  char cdir[128];
  snprintf(cdir, sizeof cdir, "%s/ckpts%d", agt_dir, c->variant);
  void *a = c->make(ctx, c->variant);
  env = make_env(c, c->copies, 9);
  ag_learn_opts o = ag_learn_defaults();
  o.checkpoint_dir = cdir;
  o.checkpoint_every = c->every;
  o.keep = 2;
  agt_ok(k->learn(a, env, c->steps, &o, &ck));
  assert_int_equal(o.stopped, 0);
  assert_int_equal(o.step, c->steps);
  assert_int_equal(ck.n, ref.n);
  assert_memory_equal(ck.ev, ref.ev, sizeof ref.ev[0] * (size_t)ref.n);
  k->free(a);
  ag_vec_env_free(env);
  char latest[256];
  int64_t at;
  agt_ok(ag_learn_latest(cdir, latest, sizeof latest, &at));
  assert_int_equal(at, c->latest);
  assert_int_equal(agt_count_entries(cdir), 2); /* the last two */
  /* resumed from the one at `from` */
  char agent[300];
  snprintf(agent, sizeof agent, "%s/ckpt-%012lld/agent.agrl", cdir, (long long)c->from);
  agt_ok(k->load(ctx, agent, &a));
  env = make_env(c, c->copies, 12345); /* its seeds come from the checkpoint */
  o = ag_learn_defaults();
  o.resume = 1;
  memset(&res, 0, sizeof res);
  agt_ok(k->learn(a, env, c->steps, &o, &res));
  assert_int_equal(o.resumed_at, c->from);
  agt_assert_same_events_from(&ref, &res, c->from);
  k->assert_same(r, a);
  k->free(a);
  ag_vec_env_free(env);
  /* the same from a run state in the packed layout of agrl 0.1.0 */
  agt_ok(k->load(ctx, agent, &a));
  run_state_as_0_1_0(k, a);
  env = make_env(c, c->copies, 777);
  o = ag_learn_defaults();
  o.resume = 1;
  memset(&res, 0, sizeof res);
  agt_ok(k->learn(a, env, c->steps, &o, &res));
  assert_int_equal(o.resumed_at, c->from);
  agt_assert_same_events_from(&ref, &res, c->from);
  k->assert_same(r, a);
  k->free(a);
  ag_vec_env_free(env);
  /* a run state that is not one is refused, and so is a damaged one */
  agt_ok(k->load(ctx, agent, &a));
  env = make_env(c, c->copies, 9);
  size_t rn = 0;
  const unsigned char *rb = k->run_state(a, &rn);
  unsigned char *bad = malloc(rn);
  assert_non_null(bad);
  memcpy(bad, rb, rn);
  bad[rn - 1] ^= 0x40; /* the last part's CRC */
  agt_ok(k->set_run_state(a, bad, rn));
  o = ag_learn_defaults();
  o.resume = 1;
  agt_err(k->learn(a, env, c->steps, &o, &res), AG_ERR_INVALID_ARG, "run state");
  agt_ok(k->set_run_state(a, "AGRLRUN1 and nothing else", 25));
  agt_err(k->learn(a, env, c->steps, &o, &res), AG_ERR_INVALID_ARG, "run state");
  free(bad);
  k->free(a);
  ag_vec_env_free(env);
  /* stopped by should_stop after stop_after polls of the loop, then resumed */
  char sdir[128];
  snprintf(sdir, sizeof sdir, "%s/stopped%d", agt_dir, c->variant);
  a = c->make(ctx, c->variant);
  env = make_env(c, c->copies, 9);
  memset(&res, 0, sizeof res);
  res.stop_after = c->stop_after;
  o = ag_learn_defaults();
  o.checkpoint_dir = sdir;
  o.should_stop = agt_stop_later;
  o.user = &res;
  agt_ok(k->learn(a, env, c->steps, &o, &res));
  const int64_t stopped = (c->stop_after + 1) * c->copies;
  assert_int_equal(o.stopped, 1);
  assert_int_equal(o.step, stopped);
  assert_true(res.n > 0 && res.n < ref.n); /* what it reported so far is the reference's start */
  assert_memory_equal(res.ev, ref.ev, sizeof ref.ev[0] * (size_t)res.n);
  k->free(a);
  ag_vec_env_free(env);
  agt_ok(ag_learn_latest(sdir, latest, sizeof latest, &at));
  assert_int_equal(at, stopped);
  snprintf(agent, sizeof agent, "%s/agent.agrl", latest);
  agt_ok(k->load(ctx, agent, &a));
  /* refusals: another number of copies */
  env = make_env(c, c->other_copies, 9);
  o = ag_learn_defaults();
  o.resume = 1;
  agt_err(k->learn(a, env, c->steps, &o, &res), AG_ERR_INVALID_ARG, "copies");
  ag_vec_env_free(env);
  env = make_env(c, c->copies, 9);
  memset(&res, 0, sizeof res);
  agt_ok(k->learn(a, env, c->steps, &o, &res));
  agt_assert_same_events_from(&ref, &res, stopped);
  k->assert_same(r, a);
  k->free(a);
  /* an agent without a run state; bad options; no checkpoint to find */
  a = c->make(ctx, c->variant);
  agt_err(k->learn(a, env, c->steps, &o, &res), AG_ERR_INVALID_ARG, "no run state");
  o = ag_learn_defaults();
  o.keep = 0;
  agt_err(k->learn(a, env, c->steps, &o, &res), AG_ERR_INVALID_ARG, "keep");
  o = ag_learn_defaults();
  o.checkpoint_every = -1;
  agt_err(k->learn(a, env, c->steps, &o, &res), AG_ERR_INVALID_ARG, "checkpoint_every");
  agt_err(ag_learn_latest(agt_dir, latest, sizeof latest, &at), AG_ERR_IO, "no checkpoint");
  agt_err(ag_learn_latest(cdir, latest, 8, &at), AG_ERR_OUT_OF_RANGE, "bytes");
  k->free(a);
  k->free(r);
  ag_vec_env_free(env);
}
