/* test_faults.c — the fault-injection sweep.
 *
 * One realistic sequence of calls (buffers, gathers, views, the device RNG,
 * a replay table with prioritized sampling, an MLP trained by a recorded
 * step, target updates, save and load, a DQN that acts, stores and trains,
 * and on a GPU the device switch there and back) is run once without
 * faults, for reference, and then again for every injection site (device
 * allocations, uploads, downloads, host allocations) and every occurrence N
 * of it: the N-th operation of that kind fails. For each call that fails:
 *   - the fault fired (no call fails without one);
 *   - everything the sequence has made, read back with faults paused,
 *     equals what it was before the call (values, sizes, positions,
 *     priorities, parameters, gradients, optimizer moments, RNG counters,
 *     the saved file's bytes), and out-parameters were not written;
 *   - the call is retried without the fault, and the sequence goes on.
 * Every run must then produce the reference's outputs bit for bit, and
 * leak nothing (AddressSanitizer and valgrind run this test too).
 *
 * AGRL_FAULT_STRIDE=k tries every k-th occurrence only (valgrind's stage).
 */
#include <math.h>
#include <unistd.h>

#include "agt.h"
#include "graph/graph_internal.h"
#include "core/internal.h"
#include "nn/nn_internal.h"
#include "replay/replay_internal.h"

/* ---- byte logs: snapshots of state, and the outputs of a run ---- */

typedef struct blog {
  unsigned char *b;
  size_t n, cap;
} blog;

static void bput(blog *l, const void *p, size_t n) {
  if (l->n + n > l->cap) {
    size_t cap = l->cap ? l->cap : 4096;
    while (cap < l->n + n) cap *= 2;
    l->b = realloc(l->b, cap);
    assert_non_null(l->b);
    l->cap = cap;
  }
  memcpy(l->b + l->n, p, n);
  l->n += n;
}

static void bfree(blog *l) {
  free(l->b);
  memset(l, 0, sizeof *l);
}

/* ---- the objects of a run ---- */

typedef struct world {
  ag_ctx *ctx;
  ag_buffer *buf, *buf8;
  ag_tensor *t, *ti;
  ag_rng *rng;
  ag_replay *rep;
  ag_per *per;
  ag_mlp *mlp, *tgt, *loaded;
  ag_optim *opt;
  ag_capture *cap;
  ag_dqn *dqn, *dqn2;
  char path[256];
  blog out; /* what the run produced */
  /* the fault under test */
  int kind; /* ag_fault, or -1 for the reference run */
  int64_t n;
  int armed, fired;
  /* counts */
  int checked, absorbed;
  char sites[64][96];
  int n_sites;
} world;

static int64_t paused[AG_FAULT_COUNT_];

static void pause_faults(world *w) {
  for (int k = 0; k < AG_FAULT_HOST_ALLOC; k++) {
    paused[k] = w->ctx ? w->ctx->fault_after[k] : -1;
    if (w->ctx) w->ctx->fault_after[k] = -1;
  }
  paused[AG_FAULT_HOST_ALLOC] = ag__host_fault_pending();
  ag__host_fault_arm(-1);
}

static void resume_faults(world *w) {
  for (int k = 0; k < AG_FAULT_HOST_ALLOC; k++)
    if (w->ctx) w->ctx->fault_after[k] = paused[k];
  ag__host_fault_arm(paused[AG_FAULT_HOST_ALLOC]);
}

/* Whether the armed fault has fired (then it is spent: -1). */
static int pending(const world *w) {
  if (w->kind == AG_FAULT_HOST_ALLOC) return ag__host_fault_pending() >= 0;
  return w->ctx && w->ctx->fault_after[w->kind] >= 0;
}

static void arm(world *w) {
  if (w->kind < 0 || w->armed) return;
  if (w->kind != AG_FAULT_HOST_ALLOC && !w->ctx) return; /* device faults need the context */
  agt_ok(ag_ctx_inject_fault(w->ctx, (ag_fault)w->kind, w->n));
  w->armed = 1;
}

static void disarm(world *w) {
  if (w->kind == AG_FAULT_HOST_ALLOC)
    ag__host_fault_arm(-1);
  else if (w->ctx && w->kind >= 0)
    w->ctx->fault_after[w->kind] = -1;
}

/* ---- reading state back ---- */

static void snap_tensor(blog *l, const ag_tensor *t) {
  int64_t dims[3] = {t ? t->rows : -1, t ? t->cols : -1, t ? (int64_t)t->dtype : -1};
  bput(l, dims, sizeof dims);
  if (!t) return;
  size_t bytes = (size_t)ag_tensor_numel(t) * ag_dtype_size(t->dtype);
  unsigned char *v = malloc(bytes);
  assert_non_null(v);
  agt_ok(ag_tensor_read(t, v, bytes));
  bput(l, v, bytes);
  free(v);
}

/* A parameter's gradient as the next step sees it: zeros while stale. */
static void snap_grad(blog *l, const ag_tensor *p) {
  if (!p->grad || (p->flags & AG__T_GRAD_STALE)) {
    size_t n = (size_t)ag_tensor_numel(p);
    float *z = calloc(n, sizeof *z);
    assert_non_null(z);
    bput(l, z, n * sizeof *z);
    free(z);
    return;
  }
  snap_tensor(l, p->grad);
}

static void snap_buffer(blog *l, ag_buffer *b) {
  ag_buffer_info info;
  agt_ok(ag_buffer_get_info(b, &info));
  bput(l, &info.scale, sizeof info.scale);
  size_t bytes = (size_t)(info.rows * info.capacity) * ag_dtype_size(info.dtype);
  unsigned char *v = malloc(bytes);
  assert_non_null(v);
  agt_ok(ag_buffer_read(b, 0, info.capacity, info.dtype, v, bytes));
  bput(l, v, bytes);
  free(v);
}

static void snap_mlp(blog *l, const ag_mlp *m) {
  for (int i = 0; i < ag_mlp_n_params(m); i++) {
    snap_tensor(l, ag_mlp_params(m)[i]);
    snap_grad(l, ag_mlp_params(m)[i]);
  }
}

static void snap_optim(blog *l, const ag_optim *o) {
  ag_tensor *st[256];
  int n = ag__optim_state(o, st, 256);
  assert_true(n <= 256);
  for (int i = 0; i < n; i++) snap_tensor(l, st[i]);
}

static void snap_replay(blog *l, ag_replay *r) {
  int64_t v[2] = {ag_replay_size(r), ag_replay_position(r)};
  bput(l, v, sizeof v);
  snap_buffer(l, ag_replay_buffer(r));
  snap_tensor(l, ag_replay_size_tensor(r));
  ag_per *p = ag__replay_sampler(r, &ag__per_ops);
  if (p) {
    snap_tensor(l, ag__per_tree(p));
    snap_tensor(l, ag__per_state(p));
  }
}

static void snap_dqn(blog *l, ag_dqn *d) {
  int64_t u = ag_dqn_updates(d);
  bput(l, &u, sizeof u);
  snap_mlp(l, ag_dqn_q(d));
  snap_mlp(l, ag_dqn_target(d));
  snap_replay(l, ag_dqn_replay(d));
}

static void snap_file(blog *l, const char *path) {
  FILE *f = fopen(path, "rb");
  int exists = f != NULL;
  bput(l, &exists, sizeof exists);
  if (!f) return;
  unsigned char chunk[4096];
  size_t k;
  while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) bput(l, chunk, k);
  fclose(f);
}

/* Everything the run has made so far, which pointers are set included. */
static void snap(world *w, blog *l) {
  const void *handles[13] = {w->ctx, w->buf, w->buf8,   w->t,   w->ti,  w->rng, w->rep,
                             w->mlp, w->tgt, w->loaded, w->opt, w->cap, w->dqn};
  for (int i = 0; i < 13; i++) {
    int set = handles[i] != NULL;
    bput(l, &set, sizeof set);
  }
  int set2 = w->dqn2 != NULL, setp = w->per != NULL;
  bput(l, &set2, sizeof set2);
  bput(l, &setp, sizeof setp);
  if (!w->ctx) return;
  if (w->buf) snap_buffer(l, w->buf);
  if (w->buf8) snap_buffer(l, w->buf8);
  if (w->t) snap_tensor(l, w->t);
  if (w->ti) snap_tensor(l, w->ti);
  if (w->rng) snap_tensor(l, ag__rng_counter_tensor(w->rng));
  if (w->rep) snap_replay(l, w->rep);
  if (w->mlp) snap_mlp(l, w->mlp);
  if (w->tgt) snap_mlp(l, w->tgt);
  if (w->loaded) snap_mlp(l, w->loaded);
  if (w->opt) snap_optim(l, w->opt);
  if (w->dqn) snap_dqn(l, w->dqn);
  if (w->dqn2) snap_dqn(l, w->dqn2);
  snap_file(l, w->path);
}

static void note_site(world *w, const char *expr) {
  for (int i = 0; i < w->n_sites; i++)
    if (strncmp(w->sites[i], expr, sizeof w->sites[i] - 1) == 0) return;
  if (w->n_sites < 64) snprintf(w->sites[w->n_sites++], sizeof w->sites[0], "%s", expr);
}

/* One call of the sequence, checked as the header says. */
#define STEP(W, EXPR)                                                                            \
  do {                                                                                           \
    arm(W);                                                                                      \
    blog before_ = {0};                                                                          \
    int live_ = (W)->armed && pending(W);                                                        \
    if (live_) {                                                                                 \
      pause_faults(W);                                                                           \
      snap(W, &before_);                                                                         \
      resume_faults(W);                                                                          \
    }                                                                                            \
    ag_status s_ = (EXPR);                                                                       \
    int fired_ = live_ && !pending(W);                                                           \
    if (fired_) (W)->fired = 1;                                                                  \
    if (s_ != AG_OK) {                                                                           \
      if (!fired_) fail_msg("%s failed with no fault injected: %s", #EXPR, ag_last_error());     \
      blog after_ = {0};                                                                         \
      pause_faults(W);                                                                           \
      snap(W, &after_);                                                                          \
      resume_faults(W);                                                                          \
      if (after_.n != before_.n || memcmp(after_.b, before_.b, before_.n) != 0)                  \
        fail_msg("fault %d at occurrence %lld: %s failed (%s) and changed the state", (W)->kind, \
                 (long long)(W)->n, #EXPR, ag_last_error());                                     \
      (W)->checked++;                                                                            \
      note_site(W, #EXPR);                                                                       \
      bfree(&after_);                                                                            \
      disarm(W);                                                                                 \
      s_ = (EXPR);                                                                               \
      if (s_ != AG_OK) fail_msg("the retry of %s failed: %s", #EXPR, ag_last_error());           \
    } else if (fired_) {                                                                         \
      (W)->absorbed++;                                                                           \
    }                                                                                            \
    bfree(&before_);                                                                             \
  } while (0)

/* Appends a tensor's values to the run's outputs (a read is a step too). */
static void out_tensor(world *w, const ag_tensor *t) {
  size_t bytes = (size_t)ag_tensor_numel(t) * ag_dtype_size(ag_tensor_dtype(t));
  unsigned char *v = malloc(bytes);
  assert_non_null(v);
  STEP(w, ag_tensor_read(t, v, bytes));
  bput(&w->out, v, bytes);
  free(v);
}

static void out_params(world *w, const ag_mlp *m) {
  for (int i = 0; i < ag_mlp_n_params(m); i++) out_tensor(w, ag_mlp_params(m)[i]);
}

/* ---- the sequence ---- */

/* The recorded step: a batch from the table, a regression of the reward on
 * the observation by the MLP, Adam. */
static ag_status fit_step(ag_ctx *ctx, void *user) {
  world *w = user;
  ag_tensor *batch, *obs, *rew, *q, *q0, *loss;
  ag_status s = ag_replay_sample(w->rep, w->rng, 4, &batch, NULL);
  if (!s) s = ag_replay_view(w->rep, batch, "obs", &obs);
  if (!s) s = ag_replay_view(w->rep, batch, "reward", &rew);
  if (!s) s = ag_mlp_forward(w->mlp, obs, &q);
  if (!s) s = ag_slice_rows(q, 0, 1, &q0);
  if (!s) s = ag_mse_loss(q0, rew, &loss);
  if (!s) s = ag_optim_zero_grad(w->opt);
  if (!s) s = ag_backward(loss);
  if (!s) s = ag_optim_step(w->opt);
  (void)ctx;
  return s;
}

static ag_dqn_config small_dqn(int fused) {
  ag_dqn_config c = agt_dqn_config(6, 3, 8, 11, fused);
  c.tau = fused ? 1.0f : 0.5f;
  return c;
}

static void dqn_part(world *w, ag_dqn **dp, int fused) {
  const ag_dqn_config c = small_dqn(fused);
  STEP(w, ag_dqn_create(w->ctx, 2, 3, 200, &c, dp));
  ag_dqn *d = *dp;
  agt_rng g = {99 + (uint64_t)fused};
  float obs[2 * 5], next[2 * 5], rew[5];
  int32_t act[5];
  int term[5];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 10; i++) obs[i] = agt_uniform(&g, -1, 1), next[i] = agt_uniform(&g, -1, 1);
    for (int i = 0; i < 5; i++) rew[i] = agt_uniform(&g, 0, 1), term[i] = agt_below(&g, 3) == 0;
    STEP(w, ag_dqn_act(d, obs, 5, 10 * round, 1, act));
    bput(&w->out, act, sizeof act);
    STEP(w, ag_dqn_store(d, obs, act, rew, next, term, round == 1 ? 1 : 5)); /* 5, 1, 5: wraps at 8 */
  }
  float loss = 0;
  STEP(w, ag_dqn_train(d, 9, &loss));
  bput(&w->out, &loss, sizeof loss);
  STEP(w, ag_dqn_train(d, 2, NULL));
  STEP(w, ag_dqn_update_target(d));
  STEP(w, ag_dqn_train(d, 1, &loss));
  bput(&w->out, &loss, sizeof loss);
  STEP(w, ag_dqn_act(d, obs, 5, 0, 0, act));
  bput(&w->out, act, sizeof act);
  out_params(w, ag_dqn_q(d));
  out_params(w, ag_dqn_target(d));
}

static void sequence(world *w, ag_device_kind kind) {
  STEP(w, ag_ctx_create(&w->ctx, kind, 0));
  ag_ctx *ctx = w->ctx;
  ag_tensor *r;

  /* a buffer: writes, reads, gathers */
  STEP(w, ag_buffer_create(ctx, 3, 8, AG_F32, &w->buf));
  float cols[3 * 8];
  for (int i = 0; i < 24; i++) cols[i] = 0.25f * (float)i - 2.0f;
  STEP(w, ag_buffer_write(w->buf, cols, AG_F32, 3, 5, 0));
  STEP(w, ag_buffer_write(w->buf, cols + 3, AG_F32, 3, 3, 5));
  float back[24];
  STEP(w, ag_buffer_read(w->buf, 0, 8, AG_F32, back, sizeof back));
  bput(&w->out, back, sizeof back);
  const int64_t idx[5] = {7, 0, 3, 3, 5};
  STEP(w, ag_get_rows(w->buf, idx, 5, &r));
  out_tensor(w, r);
  STEP(w, ag_buffer_set_scale(w->buf, 0.5f));
  STEP(w, ag_buffer_create(ctx, 2, 4, AG_U8, &w->buf8));
  const float bytes[8] = {0, 1, 2, 250, 255, 7, 8, 9};
  STEP(w, ag_buffer_write(w->buf8, bytes, AG_F32, 2, 4, 0));
  uint8_t back8[8];
  STEP(w, ag_buffer_read(w->buf8, 0, 4, AG_U8, back8, sizeof back8));
  bput(&w->out, back8, sizeof back8);

  /* tensors and a view */
  const float tv[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  STEP(w, ag_tensor_create(ctx, 4, 3, AG_F32, tv, &w->t));
  ag_tensor *row;
  STEP(w, ag_slice_rows(w->t, 1, 2, &row));
  const float rw[6] = {-1, -2, -3, -4, -5, -6};
  STEP(w, ag_tensor_write(row, rw, sizeof rw));
  out_tensor(w, w->t);
  out_tensor(w, row);
  const int32_t iv[6] = {1, 2, 3, 16777217, 5, 6};
  STEP(w, ag_tensor_create(ctx, 3, 2, AG_I32, iv, &w->ti));

  /* the device RNG */
  STEP(w, ag_rng_create(ctx, 1234, &w->rng));
  STEP(w, ag_randint(w->rng, 100, 6, AG_I32, &r));
  out_tensor(w, r);

  /* a replay table with prioritized sampling */
  const ag_field f[3] = {{"obs", 2, AG_F32}, {"action", 1, AG_I64}, {"reward", 1, AG_F32}};
  STEP(w, ag_replay_create(ctx, f, 3, 6, AG_F32, 2, &w->rep));
  STEP(w, ag_per_create(w->rep, 0.6f, &w->per));
  float o[2 * 4] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}, rr[4] = {1, -1, 0.5f, 2};
  int64_t a[4] = {0, 1, 2, 16777216}; /* 2^24: the largest f32 storage holds exactly */
  const void *data[3] = {o, a, rr};
  STEP(w, ag_replay_add(w->rep, data, 1));
  STEP(w, ag_replay_add(w->rep, data, 3));
  STEP(w, ag_replay_add(w->rep, data, 4)); /* full, and wraps */
  ag_tensor *batch, *bi, *pw, *pi;
  STEP(w, ag_replay_sample(w->rep, w->rng, 4, &batch, &bi));
  out_tensor(w, batch);
  out_tensor(w, bi);
  STEP(w, ag_per_sample(w->per, w->rng, 4, 0.4f, &pi, &pw));
  out_tensor(w, pi);
  out_tensor(w, pw);
  ag_tensor *rv;
  STEP(w, ag_replay_view(w->rep, batch, "reward", &rv));
  ag_tensor *prio;
  STEP(w, ag_abs(rv, &prio));
  STEP(w, ag_per_update(w->per, bi, prio));
  const int64_t hi[2] = {1, 4};
  const float hp[2] = {3.0f, 0.5f};
  STEP(w, ag_per_update_host(w->per, hi, hp, 2));
  double total = 0;
  STEP(w, ag_per_total(w->per, &total));
  bput(&w->out, &total, sizeof total);
  const int64_t gi[3] = {5, 0, 2};
  STEP(w, ag_replay_gather(w->rep, gi, 3, &r));
  out_tensor(w, r);

  /* an MLP fitted by a recorded step; a target net; save and load */
  const int64_t sizes[3] = {2, 5, 2};
  STEP(w, ag_mlp_create(ctx, sizes, 3, AG_ACT_TANH, AG_ACT_NONE, 5, &w->mlp));
  STEP(w, ag_mlp_create(ctx, sizes, 3, AG_ACT_TANH, AG_ACT_NONE, 6, &w->tgt));
  ag_adam_config ac = ag_adam_defaults();
  ac.lr = 0.01f;
  ac.max_grad_norm = 1.0f;
  STEP(w, ag_adam_create(ctx, ag_mlp_params(w->mlp), ag_mlp_n_params(w->mlp), &ac, &w->opt));
  STEP(w, ag_capture_create(ctx, fit_step, w, &w->cap));
  for (int k = 0; k < 3; k++) STEP(w, ag_capture_replay(w->cap));
  { /* the same step, eager: each call on its own */
    ag_tensor *obs, *rew, *q, *q0, *loss;
    STEP(w, ag_replay_sample(w->rep, w->rng, 4, &batch, NULL));
    STEP(w, ag_replay_view(w->rep, batch, "obs", &obs));
    STEP(w, ag_replay_view(w->rep, batch, "reward", &rew));
    STEP(w, ag_mlp_forward(w->mlp, obs, &q));
    STEP(w, ag_slice_rows(q, 0, 1, &q0));
    STEP(w, ag_mse_loss(q0, rew, &loss));
    STEP(w, ag_optim_zero_grad(w->opt));
    STEP(w, ag_backward(loss));
    STEP(w, ag_optim_step(w->opt));
  }
  out_params(w, w->mlp);
  STEP(w, ag_mlp_polyak(w->tgt, w->mlp, 0.25f));
  STEP(w, ag_mlp_copy(w->tgt, w->mlp));
  STEP(w, ag_mlp_polyak(w->tgt, w->mlp, 0.5f));
  out_params(w, w->tgt);
  STEP(w, ag_mlp_save(w->tgt, w->path));
  STEP(w, ag_mlp_save(w->mlp, w->path)); /* over the first */
  STEP(w, ag_mlp_load(ctx, w->path, &w->loaded));
  out_params(w, w->loaded);
  ag_ctx_reset(ctx);

  /* DQNs: the fused update and the composed one */
  dqn_part(w, &w->dqn, 1);
  dqn_part(w, &w->dqn2, 0);

  /* on a GPU: to the CPU and back; every object follows */
  if (kind != AG_DEVICE_CPU) {
    ag_ctx_reset(ctx);
    STEP(w, ag_ctx_set_device(ctx, AG_DEVICE_CPU, 0));
    STEP(w, ag_buffer_read(w->buf, 0, 8, AG_F32, back, sizeof back));
    bput(&w->out, back, sizeof back);
    STEP(w, ag_replay_add(w->rep, data, 2));
    float loss = 0;
    STEP(w, ag_dqn_train(w->dqn, 1, &loss));
    bput(&w->out, &loss, sizeof loss);
    STEP(w, ag_ctx_set_device(ctx, kind, 0));
    STEP(w, ag_replay_add(w->rep, data, 3)); /* uploads the table first */
    STEP(w, ag_get_rows(w->buf, idx, 5, &r));
    out_tensor(w, r);
    STEP(w, ag_capture_replay(w->cap)); /* recorded again */
    out_params(w, w->mlp);
    STEP(w, ag_dqn_train(w->dqn, 9, &loss));
    bput(&w->out, &loss, sizeof loss);
    STEP(w, ag_dqn_train(w->dqn2, 2, &loss));
    bput(&w->out, &loss, sizeof loss);
    STEP(w, ag_per_total(w->per, &total));
    bput(&w->out, &total, sizeof total);
  }
}

static void world_free(world *w) {
  ag_dqn_free(w->dqn);
  ag_dqn_free(w->dqn2);
  ag_capture_free(w->cap);
  ag_optim_free(w->opt);
  ag_mlp_free(w->mlp);
  ag_mlp_free(w->tgt);
  ag_mlp_free(w->loaded);
  ag_replay_free(w->rep); /* and its sampler */
  ag_rng_free(w->rng);
  ag_ctx_free(w->ctx);
  unlink(w->path);
  bfree(&w->out);
}

static void world_init(world *w, int kind, int64_t n) {
  memset(w, 0, sizeof *w);
  snprintf(w->path, sizeof w->path, "/tmp/agrl-faults-%ld.agrl", (long)getpid());
  unlink(w->path);
  w->kind = kind;
  w->n = n;
}

static void sweep_every_site_and_occurrence(void **state) {
  (void)state;
  const char *stride_env = getenv("AGRL_FAULT_STRIDE");
  int64_t stride = stride_env ? atoll(stride_env) : 1;
  if (stride < 1) stride = 1;
  world ref;
  world_init(&ref, -1, 0);
  sequence(&ref, agt_kind);
  blog want = ref.out;
  ref.out.b = NULL;
  world_free(&ref);
  static const char *const names[AG_FAULT_COUNT_] = {"device allocation", "upload", "download",
                                                     "host allocation"};
  int total_checked = 0, total_runs = 0, total_sites = 0;
  for (int kind = 0; kind < AG_FAULT_COUNT_; kind++) {
    int checked = 0, absorbed = 0, sites = 0;
    char site_names[64][96];
    int64_t n = 0;
    for (;; n += stride) {
      world w;
      world_init(&w, kind, n);
      sequence(&w, agt_kind);
      int fired = w.fired;
      if (w.out.n != want.n || memcmp(w.out.b, want.b, want.n) != 0)
        fail_msg("fault '%s' at occurrence %lld: the run's outputs differ from the reference", names[kind],
                 (long long)n);
      checked += w.checked;
      absorbed += w.absorbed;
      for (int i = 0; i < w.n_sites; i++) {
        int seen = 0;
        for (int j = 0; j < sites; j++) seen |= strcmp(site_names[j], w.sites[i]) == 0;
        if (!seen && sites < 64) snprintf(site_names[sites++], sizeof site_names[0], "%s", w.sites[i]);
      }
      world_free(&w);
      total_runs++;
      if (!fired) break; /* n is past the last occurrence */
    }
    printf(
        "faults.%s: %-17s occurrences 0..%lld (every %lld): %d failed calls checked, %d absorbed, %d call "
        "sites, "
        "0 violations\n",
        agt_kind_name(), names[kind], (long long)(n - 1), (long long)stride, checked, absorbed, sites);
    total_checked += checked;
    total_sites += sites;
    assert_true(checked > 0);
  }
  printf("faults: %d runs, %d failed calls checked, %d call sites, 0 violations\n", total_runs, total_checked,
         total_sites);
  bfree(&want);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(sweep_every_site_and_occurrence)};
  return agt_run(argc, argv, "faults", tests, 1);
}
