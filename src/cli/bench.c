/* bench.c — `agrl bench`: the work of PERF.md's table, timed on one device.
 *
 * Every row runs its body `iters` times (calls pipelined, as a training loop
 * issues them), then waits for the queue once; the time per call is the wall
 * time over iters. Two warm-up repetitions, then nine timed ones: the median,
 * min and max are reported, with what the time implies against the ceilings
 * (bytes per second against the copy bandwidth, or recorded nodes against
 * the launch floor). bench/compare.py runs this and the peers in one
 * invocation and prints the ratios.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agrl/agrl.h"
#include "base/seed.h"
#include "cli/cli.h"
#include "cli/opts.h"

enum { REPS = 9, WARM = 2 };

/* Ceilings measured on the H200 (PERF.md), for the notes. */
#define COPY_CEILING_GBS 4284.0
#define PINNED_H2D_GBS 55.4
#define NODE_FLOOR_US 0.5

typedef struct bench {
  ag_ctx *ctx;
  FILE *json;
  const char *filter;
  int iters; /* > 0: calls a repetition instead of each row's own count (--iters) */
  int failed;
} bench;

typedef struct stat3 {
  double median, min, max;
} stat3;

static double now_us(void) { return cli_now_s() * 1e6; }

/* A row's body: one call (i counts the calls of a repetition). */
typedef ag_status (*body_fn)(void *arg, int i);

static ag_status measure(bench *b, body_fn body, void *arg, int iters, int reset_every, stat3 *out) {
  double v[REPS];
  if (b->iters > 0) iters = b->iters;
  for (int r = -WARM; r < REPS; r++) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
      ag_status s = body(arg, i);
      if (s) { /* the row fails; its temporaries go, so that the next rows have the memory */
        (void)ag_ctx_sync(b->ctx);
        ag_ctx_reset(b->ctx);
        return s;
      }
      if (reset_every && i % reset_every == reset_every - 1) ag_ctx_reset(b->ctx);
    }
    ag_status s = ag_ctx_sync(b->ctx);
    if (s) {
      ag_ctx_reset(b->ctx);
      return s;
    }
    if (r >= 0) v[r] = (now_us() - t0) / iters;
    ag_ctx_reset(b->ctx);
  }
  qsort(v, REPS, sizeof *v, cli_cmp_double);
  out->median = v[REPS / 2];
  out->min = v[0];
  out->max = v[REPS - 1];
  return AG_OK;
}

static void report(bench *b, const char *work, stat3 s, const char *note) {
  printf("%-36s %10.2f us  (%8.2f - %8.2f)  %s\n", work, s.median, s.min, s.max, note);
  fflush(stdout);
  if (b->json)
    fprintf(b->json,
            "{\"impl\": \"agrl\", \"work\": \"%s\", \"us\": %.3f, \"min\": %.3f, \"max\": %.3f, \"note\": "
            "\"%s\"}\n",
            work, s.median, s.min, s.max, note);
}

/* --filter's pieces, separated by commas: a row is wanted when its name
 * contains any of them (an empty piece matches nothing) */
static int wanted(const bench *b, const char *work) {
  if (!b->filter) return 1;
  for (const char *p = b->filter; *p;) {
    const char *end = strchr(p, ',');
    const size_t len = end ? (size_t)(end - p) : strlen(p);
    for (const char *w = work; len && *w; w++)
      if (!strncmp(w, p, len)) return 1;
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

static void fail(bench *b, const char *work, ag_status s) {
  fprintf(stderr, "agrl bench: %s failed: %s: %s\n", work, ag_status_name(s), ag_last_error());
  b->failed = 1;
}

/* ---- gathers and sampling ---- */

typedef struct gather_job {
  ag_buffer *buf;
  ag_tensor *idx;
  ag_rng *rng;
  int64_t cap, B;
  ag_capture *cap_rec;
} gather_job;

static ag_status gather_body(void *arg, int i) {
  gather_job *g = arg;
  ag_tensor *t;
  (void)i;
  return ag_get_rows_dev(g->buf, g->idx, &t);
}

static ag_status sample_gather_step(ag_ctx *ctx, void *arg) {
  gather_job *g = arg;
  ag_tensor *idx, *t;
  (void)ctx;
  ag_status s = ag_randint(g->rng, g->cap, g->B, AG_I32, &idx);
  return s ? s : ag_get_rows_dev(g->buf, idx, &t);
}

static ag_status sample_gather_body(void *arg, int i) {
  (void)i;
  return sample_gather_step(NULL, arg);
}

static ag_status replay_body(void *arg, int i) {
  (void)i;
  return ag_capture_replay(((gather_job *)arg)->cap_rec);
}

static void gather_rows(bench *b, const char *prefix) {
  static const struct {
    const char *work;
    int64_t rows, cap, B;
    int sample;
  } rows[] = {{"gather_cartpole_b256", 11, 1000000, 256, 0},
              {"gather_1024f32_b65536", 1024, 200000, 65536, 0},
              {"sample_gather_mujoco_b256", 42, 1000000, 256, 1}};
  for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
    char work[96];
    snprintf(work, sizeof work, "%s%s", prefix, rows[k].work);
    if (!wanted(b, work)) continue;
    gather_job g;
    memset(&g, 0, sizeof g);
    g.cap = rows[k].cap;
    g.B = rows[k].B;
    ag_status s = ag_buffer_create(b->ctx, rows[k].rows, g.cap, AG_F32, &g.buf);
    int32_t *idx = malloc((size_t)g.B * sizeof *idx);
    uint64_t x = 88172645463325252ull;
    for (int64_t j = 0; idx && j < g.B; j++) idx[j] = (int32_t)(ag__xorshift64(&x) % (uint64_t)g.cap);
    if (!s) s = ag_tensor_create(b->ctx, g.B, 1, AG_I32, idx, &g.idx);
    if (!s) s = ag_rng_create(b->ctx, 3, &g.rng);
    free(idx);
    stat3 st;
    int iters = g.B > 10000 ? 20 : 2000;
    char note[160];
    double bytes = 2.0 * (double)(rows[k].rows * g.B * 4);
    if (!s && !rows[k].sample) {
      if (!(s = measure(b, gather_body, &g, iters, 64, &st))) {
        snprintf(note, sizeof note, "%.0f GB/s moved (%.0f%% of the copy ceiling)", bytes / (st.median * 1e3),
                 100.0 * bytes / (st.median * 1e3) / COPY_CEILING_GBS);
        report(b, work, st, note);
      }
    } else if (!s) { /* recorded (one launch), and eager (two) */
      if (!(s = ag_capture_create(b->ctx, sample_gather_step, &g, &g.cap_rec)) &&
          !(s = measure(b, replay_body, &g, iters, 0, &st))) {
        snprintf(note, sizeof note, "recorded: draw + gather in one launch");
        report(b, work, st, note);
        char w2[110];
        snprintf(w2, sizeof w2, "%s_eager", work);
        if (!(s = measure(b, sample_gather_body, &g, iters, 64, &st))) report(b, w2, st, "two launches");
      }
    }
    if (s) fail(b, work, s);
    ag_capture_free(g.cap_rec);
    ag_rng_free(g.rng);
    ag_tensor_free(g.idx);
    ag_buffer_free(g.buf);
  }
}

/* ---- writes ---- */

typedef struct write_job {
  ag_buffer *buf;
  const float *data;
  int64_t rows, k, cap, pos;
  int wait;
} write_job;

static ag_status write_body(void *arg, int i) {
  write_job *w = arg;
  (void)i;
  if (w->pos + w->k > w->cap) w->pos = 0;
  ag_status s = ag_buffer_write(w->buf, w->data, AG_F32, w->rows, w->k, w->pos);
  w->pos += w->k;
  return !s && w->wait ? ag_buffer_wait(w->buf) : s;
}

static void write_rows(bench *b, const char *prefix) {
  static const int64_t ks[3] = {1, 256, 65536};
  for (int pinned = 0; pinned < 2; pinned++)
    for (int kk = 0; kk < 3; kk++) {
      char work[96];
      snprintf(work, sizeof work, "%swrite_%lld_mujoco_%s", prefix, (long long)ks[kk],
               ks[kk] == 1 && !pinned ? "visible" : (pinned ? "pinned" : "pageable"));
      if (!wanted(b, work)) continue;
      write_job w = {NULL, NULL, 42, ks[kk], 1000000, 0, 1};
      size_t bytes = (size_t)(w.rows * w.k) * sizeof(float);
      float *data = NULL;
      ag_status s = pinned ? ag_host_alloc(b->ctx, bytes, (void **)&data) : AG_OK;
      if (!pinned) data = malloc(bytes);
      if (!s && !data) s = AG_ERR_OUT_OF_MEMORY;
      for (int64_t i = 0; !s && i < w.rows * w.k; i++) data[i] = (float)(i % 1000);
      w.data = data;
      if (!s) s = ag_buffer_create(b->ctx, w.rows, w.cap, AG_F32, &w.buf);
      stat3 st;
      if (!s && !(s = measure(b, write_body, &w, ks[kk] > 1000 ? 20 : 2000, 0, &st))) {
        char note[128];
        snprintf(note, sizeof note, "%.2f GB/s (pinned host-to-device ceiling %.1f), waited for each",
                 (double)bytes / (st.median * 1e3), PINNED_H2D_GBS);
        report(b, work, st, note);
      }
      if (s) fail(b, work, s);
      ag_buffer_free(w.buf);
      if (pinned)
        ag_host_free(b->ctx, data);
      else
        free(data);
    }
}

/* ---- the replay table on the host: add one transition ---- */

typedef struct add_job {
  ag_replay *r;
  const void *data[5];
} add_job;

static ag_status add_body(void *arg, int i) {
  add_job *a = arg;
  (void)i;
  return ag_replay_add(a->r, a->data, 1);
}

static void add_row(bench *b, const char *work) {
  if (!wanted(b, work)) return;
  const ag_field f[5] = {{"obs", 17, AG_F32},
                         {"action", 6, AG_F32},
                         {"reward", 1, AG_F32},
                         {"next_obs", 17, AG_F32},
                         {"done", 1, AG_F32}};
  float obs[17] = {0}, act[6] = {0}, rew = 1, next[17] = {0}, done = 0;
  add_job a = {NULL, {obs, act, &rew, next, &done}};
  ag_status s = ag_replay_create(b->ctx, f, 5, 1000000, AG_F32, 1, &a.r);
  stat3 st;
  if (!s && !(s = measure(b, add_body, &a, 20000, 0, &st)))
    report(b, work, st, "5 fields, 42 f32, into a 1M table");
  if (s) fail(b, work, s);
  ag_replay_free(a.r);
}

/* ---- prioritized replay: sample and update B of 1M ---- */

typedef struct per_job {
  ag_replay *r;
  ag_per *per;
  ag_rng *rng;
  ag_tensor *idx, *prio;
} per_job;

static ag_status per_sample_body(void *arg, int i) {
  per_job *p = arg;
  ag_tensor *idx, *w;
  (void)i;
  return ag_per_sample(p->per, p->rng, 256, 0.4f, &idx, &w);
}

static ag_status per_update_body(void *arg, int i) {
  per_job *p = arg;
  (void)i;
  return ag_per_update(p->per, p->idx, p->prio);
}

static void per_rows(bench *b, const char *prefix) {
  char ws[64], wu[64];
  snprintf(ws, sizeof ws, "%sper_sample_b256_1m", prefix);
  snprintf(wu, sizeof wu, "%sper_update_b256", prefix);
  if (!wanted(b, ws) && !wanted(b, wu)) return;
  per_job p;
  memset(&p, 0, sizeof p);
  const ag_field f[1] = {{"x", 1, AG_F32}};
  const int64_t cap = 1000000;
  float *x = calloc((size_t)cap, sizeof *x);
  int32_t idx[256];
  float prio[256];
  uint64_t z = 99;
  for (int j = 0; j < 256; j++)
    idx[j] = (int32_t)(ag__xorshift64(&z) % (uint64_t)cap),
    prio[j] = 0.1f + (float)(ag__xorshift64(&z) % 1000) / 100.0f;
  const void *d[1] = {x};
  ag_status s = x ? ag_replay_create(b->ctx, f, 1, cap, AG_F32, 1, &p.r) : AG_ERR_OUT_OF_MEMORY;
  if (!s) s = ag_replay_add(p.r, d, cap);
  if (!s) s = ag_per_create(p.r, 0.6f, &p.per);
  if (!s) s = ag_rng_create(b->ctx, 5, &p.rng);
  if (!s) s = ag_tensor_create(b->ctx, 256, 1, AG_I32, idx, &p.idx);
  if (!s) s = ag_tensor_create(b->ctx, 256, 1, AG_F32, prio, &p.prio);
  if (!s) s = ag_per_update(p.per, p.idx, p.prio);
  free(x);
  stat3 st;
  if (!s && wanted(b, ws) && !(s = measure(b, per_sample_body, &p, 2000, 64, &st)))
    report(b, ws, st, "stratified, sum tree of fan-out 16, with importance weights");
  if (!s && wanted(b, wu) && !(s = measure(b, per_update_body, &p, 2000, 0, &st)))
    report(b, wu, st, "leaves and every ancestor up to the root");
  if (s) fail(b, ws, s);
  ag_rng_free(p.rng);
  ag_tensor_free(p.idx);
  ag_tensor_free(p.prio);
  ag_replay_free(p.r);
}

/* ---- the DQN update ---- */

typedef struct dqn_job {
  int64_t obs, acts, rows, B, cap;
  ag_buffer *buf;
  ag_mlp *online, *target;
  ag_optim *opt;
  ag_rng *rng;
  ag_capture *rec;
} dqn_job;

/* sample, gather, split, target, Q(s, a), Huber, backward, Adam */
static ag_status dqn_update(ag_ctx *ctx, void *user) {
  dqn_job *d = user;
  ag_tensor *idx, *batch, *obs, *act, *rew, *next, *done, *qn, *y, *q, *qa, *loss;
  ag_status s;
  int64_t act_rows = d->rows == 11 ? 1 : 6;
  int64_t r_act = d->obs, r_rew = r_act + act_rows, r_next = r_rew + 1, r_done = r_next + d->obs;
  if ((s = ag_randint(d->rng, d->cap, d->B, AG_I32, &idx)) || (s = ag_get_rows_dev(d->buf, idx, &batch)))
    return s;
  if ((s = ag_slice_rows(batch, 0, d->obs, &obs)) || (s = ag_slice_rows(batch, r_act, 1, &act)) ||
      (s = ag_slice_rows(batch, r_rew, 1, &rew)) || (s = ag_slice_rows(batch, r_next, d->obs, &next)) ||
      (s = ag_slice_rows(batch, r_done, 1, &done)))
    return s;
  ag_no_grad_begin(ctx);
  s = ag_mlp_forward(d->target, next, &qn);
  if (!s) s = ag_td_target(qn, NULL, rew, done, 0.99f, &y);
  ag_no_grad_end(ctx);
  if (s || (s = ag_mlp_forward(d->online, obs, &q)) || (s = ag_pick(q, act, &qa))) return s;
  if ((s = ag_huber_loss(qa, y, 1.0f, &loss)) || (s = ag_optim_zero_grad(d->opt)) || (s = ag_backward(loss)))
    return s;
  return ag_optim_step(d->opt);
}

static ag_status dqn_replay_body(void *arg, int i) {
  (void)i;
  return ag_capture_replay(((dqn_job *)arg)->rec);
}

static ag_status dqn_eager_body(void *arg, int i) {
  (void)i;
  dqn_job *d = arg;
  ag_status s = dqn_update(ag_buffer_ctx(d->buf), d);
  ag_ctx_reset(ag_buffer_ctx(d->buf));
  return s;
}

static ag_status dqn_setup(ag_ctx *ctx, dqn_job *d, int64_t obs, int64_t hidden, int64_t acts, int64_t B) {
  memset(d, 0, sizeof *d);
  d->obs = obs;
  d->acts = acts;
  d->rows = obs == 4 ? 11 : 42;
  d->B = B;
  d->cap = 1000000;
  ag_status s = ag_buffer_create(ctx, d->rows, d->cap, AG_F32, &d->buf);
  const int64_t chunk = 10000;
  float *v = malloc((size_t)(d->rows * chunk) * sizeof *v);
  if (!v) return AG_ERR_OUT_OF_MEMORY;
  uint64_t x = 12345;
  for (int64_t c0 = 0; !s && c0 < d->cap; c0 += chunk) { /* random transitions, valid actions and flags */
    for (int64_t j = 0; j < chunk; j++)
      for (int64_t r = 0; r < d->rows; r++) {
        uint64_t u = ag__xorshift64(&x);
        float val = 2.0f * (float)(u >> 40) / 16777216.0f - 1.0f;
        if (r == obs) val = (float)(u % (uint64_t)acts);
        if (r == d->rows - 1) val = (u % 20) == 0 ? 1.0f : 0.0f;
        v[j * d->rows + r] = val;
      }
    s = ag_buffer_write(d->buf, v, AG_F32, d->rows, chunk, c0);
  }
  free(v);
  const int64_t sizes[4] = {obs, hidden, hidden, acts};
  ag_adam_config cfg = ag_adam_defaults();
  if (!s) s = ag_mlp_create(ctx, sizes, 4, AG_ACT_RELU, AG_ACT_NONE, 1, &d->online);
  if (!s) s = ag_mlp_create(ctx, sizes, 4, AG_ACT_RELU, AG_ACT_NONE, 2, &d->target);
  if (!s) s = ag_mlp_copy(d->target, d->online);
  if (!s) s = ag_adam_create(ctx, ag_mlp_params(d->online), ag_mlp_n_params(d->online), &cfg, &d->opt);
  if (!s) s = ag_rng_create(ctx, 7, &d->rng);
  if (!s) s = ag_capture_create(ctx, dqn_update, d, &d->rec);
  return s;
}

static void dqn_free(dqn_job *d) {
  ag_capture_free(d->rec);
  ag_optim_free(d->opt);
  ag_mlp_free(d->online);
  ag_mlp_free(d->target);
  ag_rng_free(d->rng);
  ag_buffer_free(d->buf);
}

/* The rate an update of us microseconds implies: two forward passes and a
 * backward of about twice a forward. */
static double dqn_gflops(int64_t obs, int64_t hidden, int64_t acts, int64_t B, double us) {
  double fwd = 2.0 * (double)B * (double)(obs * hidden + hidden * hidden + hidden * acts);
  return 4.0 * fwd / (us * 1e3);
}

static void dqn_row(bench *b, const char *work, int64_t obs, int64_t hidden, int64_t acts, int64_t B,
                    int iters) {
  if (!wanted(b, work)) return;
  dqn_job d;
  stat3 st;
  ag_status s = dqn_setup(b->ctx, &d, obs, hidden, acts, B);
  if (!s && !(s = measure(b, dqn_replay_body, &d, iters, 0, &st))) {
    ag_capture_info info;
    ag_capture_get_info(d.rec, &info);
    char note[160];
    snprintf(note, sizeof note, "recorded: %d nodes (launch floor ~%.0f us), %.1f GFLOP/s", info.nodes,
             info.nodes * NODE_FLOOR_US, dqn_gflops(obs, hidden, acts, B, st.median));
    report(b, work, st, note);
    char w2[128];
    snprintf(w2, sizeof w2, "%s_eager", work);
    if (!(s = measure(b, dqn_eager_body, &d, iters / 4 + 1, 0, &st)))
      report(b, w2, st, "the same ops, not recorded");
  }
  if (s) fail(b, work, s);
  dqn_free(&d);
}

/* The DQN's own update (ag_dqn_train: one recorded step a call) on a table
 * of 1M random transitions, configured as the peers' update: max target (no
 * double DQN), Huber, Adam without clipping; the one-step target, or n-step
 * returns (the defaults' 5) fused or as composed ops. */
typedef struct agent_job {
  ag_dqn *d;
  int per_call; /* updates an ag_dqn_train call */
} agent_job;

static ag_status agent_body(void *arg, int i) {
  (void)i;
  const agent_job *j = arg;
  return ag_dqn_train(j->d, j->per_call, NULL);
}

static ag_status agent_setup(ag_ctx *ctx, agent_job *j, int64_t obs, int64_t hidden, int64_t acts, int64_t B,
                             int n_step, int fused) {
  ag_dqn_config c = ag_dqn_defaults();
  c.hidden[0] = c.hidden[1] = hidden;
  c.batch_size = B;
  c.buffer_size = 1000000;
  c.double_dqn = 0;
  c.max_grad_norm = 0.0f;
  c.lr = 1e-3f;
  c.n_step = n_step;
  c.fused = fused;
  j->d = NULL;
  ag_status s = ag_dqn_create(ctx, obs, acts, 1000000, &c, &j->d);
  enum { CHUNK = 10000 };
  float *o = malloc(sizeof(float) * CHUNK * (size_t)obs), *nx = malloc(sizeof(float) * CHUNK * (size_t)obs);
  float *r = malloc(sizeof(float) * CHUNK);
  int32_t *a = malloc(sizeof(int32_t) * CHUNK);
  int *t = malloc(sizeof(int) * CHUNK);
  if (!s && (!o || !nx || !r || !a || !t)) s = AG_ERR_OUT_OF_MEMORY;
  uint64_t x = 12345;
  for (int64_t c0 = 0; !s && c0 < c.buffer_size; c0 += CHUNK) {
    for (int64_t k = 0; k < CHUNK; k++) {
      for (int64_t e = 0; e < obs; e++) {
        o[k * obs + e] = 2.0f * (float)(ag__xorshift64(&x) >> 40) / 16777216.0f - 1.0f;
        nx[k * obs + e] = 2.0f * (float)(ag__xorshift64(&x) >> 40) / 16777216.0f - 1.0f;
      }
      r[k] = 2.0f * (float)(ag__xorshift64(&x) >> 40) / 16777216.0f - 1.0f;
      a[k] = (int32_t)(ag__xorshift64(&x) % (uint64_t)acts);
      t[k] = ag__xorshift64(&x) % 20 == 0;
    }
    s = ag_dqn_store(j->d, o, a, r, nx, t, CHUNK);
  }
  free(o), free(nx), free(r), free(a), free(t);
  return s;
}

/* per_call updates an ag_dqn_train call; the row reports the time of one
 * update (a call's time / per_call). n_step: the target's steps (1: one-step);
 * fused: cfg.fused. */
static void agent_row(bench *b, const char *work, int64_t obs, int64_t hidden, int64_t acts, int64_t B,
                      int iters, int per_call, int n_step, int fused) {
  if (!wanted(b, work)) return;
  agent_job j;
  stat3 st;
  ag_status s = agent_setup(b->ctx, &j, obs, hidden, acts, B, n_step, fused);
  j.per_call = per_call;
  if (!s && !(s = measure(b, agent_body, &j, (iters + per_call - 1) / per_call, 0, &st))) {
    st.median /= per_call, st.min /= per_call, st.max /= per_call;
    char note[160], calls[48] = "", steps[32] = "";
    if (per_call > 1) snprintf(calls, sizeof calls, ", %d updates a call", per_call);
    if (n_step > 1) snprintf(steps, sizeof steps, ", %d-step target", n_step);
    snprintf(note, sizeof note, "ag_dqn_train%s%s, %s; %.1f GFLOP/s", calls, steps,
             ag_dqn_fused(j.d) ? "fused" : "composed ops", dqn_gflops(obs, hidden, acts, B, st.median));
    report(b, work, st, note);
  }
  if (s) fail(b, work, s);
  ag_dqn_free(j.d);
}

/* SAC's and TD3's update (ag_ac_train: one recorded update a call, TD3's
 * critic-only and critic-and-actor updates in turn) at Pendulum's sizes:
 * 3 observations, 1 action, 256-256 hidden layers, B = 256, on a table of
 * 100,000 random transitions; fused, or the composed ops (cfg.fused = 0). */
typedef struct ac_job {
  ag_ac *a;
  int per_call;
} ac_job;

static ag_status ac_body(void *arg, int i) {
  (void)i;
  const ac_job *j = arg;
  return ag_ac_train(j->a, j->per_call, NULL);
}

static void ac_row(bench *b, const char *work, ag_ac_algo algo, int iters, int per_call, int fused) {
  if (!wanted(b, work)) return;
  ac_job j = {NULL, per_call};
  ag_ac_config c = ag_ac_defaults(algo);
  c.buffer_size = 100000;
  c.learning_starts = 0;
  c.fused = fused;
  const float lo = -2.0f, hi = 2.0f;
  ag_status s = ag_ac_create(b->ctx, 3, 1, &lo, &hi, 1000000, &c, &j.a);
  enum { CHUNK = 10000 };
  float *o = malloc(sizeof(float) * CHUNK * 3), *nx = malloc(sizeof(float) * CHUNK * 3);
  float *r = malloc(sizeof(float) * CHUNK), *a = malloc(sizeof(float) * CHUNK);
  int *t = malloc(sizeof(int) * CHUNK);
  if (!s && (!o || !nx || !r || !a || !t)) s = AG_ERR_OUT_OF_MEMORY;
  uint64_t x = 54321;
  for (int64_t c0 = 0; !s && c0 < c.buffer_size; c0 += CHUNK) {
    for (int64_t k = 0; k < CHUNK; k++) {
      for (int e = 0; e < 3; e++) {
        o[k * 3 + e] = 2.0f * (float)(ag__xorshift64(&x) >> 40) / 16777216.0f - 1.0f;
        nx[k * 3 + e] = 2.0f * (float)(ag__xorshift64(&x) >> 40) / 16777216.0f - 1.0f;
      }
      r[k] = -16.0f * (float)(ag__xorshift64(&x) >> 40) / 16777216.0f;
      a[k] = 4.0f * (float)(ag__xorshift64(&x) >> 40) / 16777216.0f - 2.0f;
      t[k] = 0;
    }
    s = ag_ac_store(j.a, o, a, r, nx, t, NULL, CHUNK);
  }
  free(o), free(nx), free(r), free(a), free(t);
  stat3 st;
  if (!s && !(s = measure(b, ac_body, &j, (iters + per_call - 1) / per_call, 0, &st))) {
    st.median /= per_call, st.min /= per_call, st.max /= per_call;
    char note[160];
    snprintf(note, sizeof note, "ag_ac_train, %d updates a call, %s", per_call,
             ag_ac_fused(j.a) ? "fused" : "composed ops");
    report(b, work, st, note);
  }
  if (s) fail(b, work, s);
  ag_ac_free(j.a);
}

/* ---- the command ---- */

int agrl_cmd_bench(int argc, char **argv) {
  static const char cmd[] = "bench";
  cli_settings o;
  int rc = cli_opts_parse(CLI_BENCH, argc, argv, &o);
  if (rc >= 0) return rc;
  const char *json = o.json;
  bench b;
  memset(&b, 0, sizeof b);
  b.filter = o.filter;
  b.iters = (int)o.iters;
  ag_status s = ag_ctx_create(&b.ctx, o.device.kind, o.device.index);
  if (s) return cli_fail(cmd, "creating the context", s);
  /* a log of rows, appended to as they are measured (never truncated):
   * bench/compare.py removes it first and reads the rows measured before a
   * crash or its timeout from it */
  if (json && !(b.json = fopen(json, "a"))) {
    fprintf(stderr, "agrl bench: cannot write %s: %s\n", json, strerror(errno));
    ag_ctx_free(b.ctx);
    return 1;
  }
  int cpu = ag_ctx_device(b.ctx) == AG_DEVICE_CPU;
  printf("agrl bench on %s (median of %d, us per call)\n", ag_ctx_device_name(b.ctx), REPS);
  /* rows are named by the work; a prefix names a device other than CUDA */
  const char *prefix = cpu ? "cpu_" : ag_ctx_device(b.ctx) == AG_DEVICE_VULKAN ? "vulkan_" : "";
  char nb[8][96];
  int ni = 0;
#define NM(work) (snprintf(nb[ni & 7], sizeof nb[0], "%s%s", prefix, work), nb[ni++ & 7])
  gather_rows(&b, prefix);
  write_rows(&b, prefix);
  per_rows(&b, prefix);
  if (cpu) {
    add_row(&b, "cpu_add_1_mujoco");
    agent_row(&b, "cpu_dqn_update_4_128_128_2_b128", 4, 128, 2, 128, 200, 1, 1, 1);
    dqn_row(&b, "cpu_dqn_update_4_128_128_2_b128_ops", 4, 128, 2, 128, 200);
    agent_row(&b, "cpu_dqn_update_4_128_128_2_b128_n5", 4, 128, 2, 128, 200, 1, 5, 1);
    agent_row(&b, "cpu_dqn_update_4_128_128_2_b128_n5_ops", 4, 128, 2, 128, 200, 1, 5, 0);
    ac_row(&b, "cpu_sac_update_3_256_256_1_b256", AG_AC_SAC, 20, 10, 1);
    ac_row(&b, "cpu_sac_update_3_256_256_1_b256_ops", AG_AC_SAC, 20, 10, 0);
    ac_row(&b, "cpu_td3_update_3_256_256_1_b256", AG_AC_TD3, 20, 10, 1);
    ac_row(&b, "cpu_td3_update_3_256_256_1_b256_ops", AG_AC_TD3, 20, 10, 0);
  } else {
    agent_row(&b, NM("dqn_update_4_128_128_2_b128"), 4, 128, 2, 128, 2000, 1, 1, 1);
    agent_row(&b, NM("dqn_update_17_256_256_6_b256"), 17, 256, 6, 256, 2000, 1, 1, 1);
    /* the defaults' 5-step target: the draw, the walks and the fused call,
     * and the same update as composed ops */
    agent_row(&b, NM("dqn_update_4_128_128_2_b128_n5"), 4, 128, 2, 128, 2000, 1, 5, 1);
    agent_row(&b, NM("dqn_update_4_128_128_2_b128_n5_ops"), 4, 128, 2, 128, 2000, 1, 5, 0);
    /* as a training loop calls it (gradient steps a call): the peer is JAX's
     * 1000 updates in one jitted call */
    agent_row(&b, NM("dqn_update_4_128_128_2_b128_x64"), 4, 128, 2, 128, 12800, 64, 1, 1);
    agent_row(&b, NM("dqn_update_17_256_256_6_b256_x64"), 17, 256, 6, 256, 12800, 64, 1, 1);
    dqn_row(&b, NM("dqn_update_4_128_128_2_b128_ops"), 4, 128, 2, 128, 2000);
    dqn_row(&b, NM("dqn_update_17_256_256_6_b256_ops"), 17, 256, 6, 256, 2000);
    ac_row(&b, NM("sac_update_3_256_256_1_b256"), AG_AC_SAC, 2000, 100, 1);
    ac_row(&b, NM("sac_update_3_256_256_1_b256_ops"), AG_AC_SAC, 1000, 100, 0);
    ac_row(&b, NM("td3_update_3_256_256_1_b256"), AG_AC_TD3, 2000, 100, 1);
    ac_row(&b, NM("td3_update_3_256_256_1_b256_ops"), AG_AC_TD3, 1000, 100, 0);
  }
#undef NM
  if (b.json && fclose(b.json)) {
    fprintf(stderr, "agrl bench: writing %s failed: %s\n", json, strerror(errno));
    b.failed = 1;
  }
  ag_ctx_free(b.ctx);
  return b.failed;
}
