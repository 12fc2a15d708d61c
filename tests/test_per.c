/* test_per.c — prioritized replay against host references: the tree's total,
 * stratified sampling (each index holds its slice's target in the running
 * sum), frequencies, importance weights, new transitions at the largest
 * priority, bad input, recording, batched updates with repeated indices and
 * shared ancestors (the whole tree against a recomputation), and the CPU and
 * GPU giving the same draws and the same tree.
 */
#include <math.h>

#include "agt.h"
#include "core/internal.h" /* ag__run: the tree kernels on a tree of the test's own */
#include "base/per_tree.h"
#include "cpu/cpu_internal.h" /* ag__cpu_vector_paths: both CPU paths */

typedef struct table {
  ag_ctx *ctx;
  ag_replay *r;
  ag_per *per;
  ag_rng *rng;
} table;

static void table_new(table *t, ag_device_kind kind, int64_t cap, int64_t fill, float alpha) {
  agt_ok(ag_ctx_create(&t->ctx, kind, 0));
  const ag_field f[1] = {{"x", 1, AG_F32}};
  agt_ok(ag_replay_create(t->ctx, f, 1, cap, AG_F32, 1, &t->r));
  agt_ok(ag_per_create(t->r, alpha, &t->per));
  float *x = malloc((size_t)fill * sizeof *x);
  for (int64_t i = 0; i < fill; i++) x[i] = (float)i;
  const void *d[1] = {x};
  agt_ok(ag_replay_add(t->r, d, fill));
  free(x);
  agt_ok(ag_rng_create(t->ctx, 2024, &t->rng));
}

static void table_free(table *t) {
  ag_rng_free(t->rng);
  ag_replay_free(t->r); /* frees the sampler too */
  ag_ctx_free(t->ctx);
}

/* priorities in [0.25, 4), dyadic (exact sums in double) */
static void priorities(agt_rng *g, float *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) p[i] = 0.25f * (float)(1 + agt_below(g, 15));
}

static void set_all(table *t, const float *p, int64_t n) {
  int64_t *idx = malloc((size_t)n * sizeof *idx);
  for (int64_t i = 0; i < n; i++) idx[i] = i;
  agt_ok(ag_per_update_host(t->per, idx, p, n));
  free(idx);
}

static void tree_total_is_the_sum_of_powered_priorities(void **state) {
  (void)state;
  table t;
  table_new(&t, agt_kind, 5000, 5000, 0.6f);
  double total;
  agt_ok(ag_per_total(t.per, &total));
  assert_float_equal(total, 5000.0, 1e-9); /* new columns: priority 1 */
  agt_rng g = {1};
  float *p = malloc(5000 * sizeof *p);
  priorities(&g, p, 5000);
  set_all(&t, p, 5000);
  double ref = 0;
  for (int i = 0; i < 5000; i++) ref += pow(p[i], (double)0.6f);
  agt_ok(ag_per_total(t.per, &total));
  if (fabs(total - ref) > 1e-9 * ref) fail_msg("total %.15g, host %.15g", total, ref);
  free(p);
  table_free(&t);
}

/* Each drawn index's interval of the running sum holds its slice's target;
 * the weights are (N P)^-beta over the batch maximum. */
static void sampling_is_stratified_over_the_running_sum(void **state) {
  (void)state;
  table t;
  const int64_t N = 3000, B = 256;
  table_new(&t, agt_kind, 4096, N, 0.7f);
  agt_rng g = {2};
  float *p = malloc(N * sizeof *p);
  priorities(&g, p, N);
  set_all(&t, p, N);
  double *cum = malloc((size_t)(N + 1) * sizeof *cum);
  cum[0] = 0;
  for (int64_t i = 0; i < N; i++) cum[i + 1] = cum[i] + pow(p[i], (double)0.7f);
  double total;
  agt_ok(ag_per_total(t.per, &total));
  agt_ok(ag_rng_set_counter(t.rng, 77));
  ag_tensor *idx, *w;
  agt_ok(ag_per_sample(t.per, t.rng, B, 0.4f, &idx, &w));
  int32_t ix[256];
  float wv[256];
  agt_ok(ag_tensor_read(idx, ix, sizeof ix));
  agt_ok(ag_tensor_read(w, wv, sizeof wv));
  double wref[256], wmax = 0;
  for (int64_t j = 0; j < B; j++) {
    double u = ag__per_target(2024, 77 + (uint64_t)j, j, B, total);
    int64_t i = ix[j];
    assert_true(i >= 0 && i < N);
    double eps = 1e-9 * total;
    if (!(cum[i] - eps <= u && u < cum[i + 1] + eps))
      fail_msg("sample %lld: target %.9g is outside [%.9g, %.9g) of index %lld", (long long)j, u, cum[i],
               cum[i + 1], (long long)i);
    wref[j] = pow((double)N * pow(p[i], (double)0.7f) / total, -(double)0.4f);
    wmax = fmax(wmax, wref[j]);
  }
  for (int64_t j = 0; j < B; j++) assert_float_equal(wv[j], wref[j] / wmax, 1e-5);
  free(cum);
  free(p);
  table_free(&t);
}

/* Over many draws, index i comes up with probability p_i / sum p (alpha 1). */
static void frequencies_follow_priorities(void **state) {
  (void)state;
  table t;
  table_new(&t, agt_kind, 16, 4, 1.0f);
  const int64_t idx[4] = {0, 1, 2, 3};
  const float p[4] = {1, 2, 3, 4};
  agt_ok(ag_per_update_host(t.per, idx, p, 4));
  int64_t count[4] = {0};
  for (int round = 0; round < 10; round++) {
    ag_tensor *ti, *tw;
    agt_ok(ag_per_sample(t.per, t.rng, 1000, 0.0f, &ti, &tw));
    int32_t v[1000];
    agt_ok(ag_tensor_read(ti, v, sizeof v));
    for (int j = 0; j < 1000; j++) {
      assert_true(v[j] >= 0 && v[j] < 4);
      count[v[j]]++;
    }
    ag_ctx_reset(t.ctx);
  }
  for (int i = 0; i < 4; i++) assert_float_equal((double)count[i] / 10000.0, p[i] / 10.0, 0.01);
  table_free(&t);
}

/* New transitions take the largest priority seen; updates move the total. */
static void new_transitions_get_the_largest_priority(void **state) {
  (void)state;
  table t;
  table_new(&t, agt_kind, 64, 10, 0.5f);
  const int64_t idx[2] = {3, 7};
  const float p[2] = {9.0f, 0.25f};
  agt_ok(ag_per_update_host(t.per, idx, p, 2));
  double before, after;
  agt_ok(ag_per_total(t.per, &before));
  assert_float_equal(before, 8 * 1.0 + 3.0 + 0.5, 1e-12);
  float x[2] = {100, 101};
  const void *d[1] = {x};
  agt_ok(ag_replay_add(t.r, d, 2));
  agt_ok(ag_per_total(t.per, &after));
  assert_float_equal(after - before, 2 * 3.0, 1e-12); /* 9^0.5 each */
  table_free(&t);
}

static void per_bad_input_is_refused_and_changes_nothing(void **state) {
  (void)state;
  table t;
  table_new(&t, agt_kind, 64, 10, 0.5f);
  double before, after;
  agt_ok(ag_per_total(t.per, &before));
  ag_per *other;
  agt_err(ag_per_create(t.r, 0.5f, &other), AG_ERR_STATE, "already has");
  const int64_t bad_idx[1] = {10};
  const float ok_p[1] = {2}, nan_p[1] = {NAN}, neg_p[1] = {-1};
  const int64_t ok_idx[1] = {2};
  agt_err(ag_per_update_host(t.per, bad_idx, ok_p, 1), AG_ERR_OUT_OF_RANGE,
          "idx[0] = 10 is outside the 10 valid");
  agt_err(ag_per_update_host(t.per, ok_idx, nan_p, 1), AG_ERR_INVALID_ARG, "must be finite");
  agt_err(ag_per_update_host(t.per, ok_idx, neg_p, 1), AG_ERR_INVALID_ARG, "must be finite and >= 0");
  ag_tensor *i, *w;
  agt_err(ag_per_sample(t.per, t.rng, 0, 0.4f, &i, &w), AG_ERR_INVALID_ARG, "B = 0");
  agt_err(ag_per_sample(t.per, t.rng, 8, 1.5f, &i, &w), AG_ERR_INVALID_ARG, "beta = 1.5");
  agt_ok(ag_per_total(t.per, &after));
  assert_true(before == after);
  const ag_field f[1] = {{"x", 1, AG_F32}};
  ag_replay *r2;
  agt_ok(ag_replay_create(t.ctx, f, 1, 8, AG_F32, 1, &r2));
  agt_err(ag_per_create(r2, 1.5f, &other), AG_ERR_INVALID_ARG, "alpha = 1.5");
  agt_ok(ag_per_create(r2, 1.0f, &other));
  agt_err(ag_per_sample(other, t.rng, 4, 0.5f, &i, &w), AG_ERR_STATE, "the table is empty");
  ag_replay_free(r2);
  table_free(&t);
}

/* A recorded sample-and-update step replays like eager steps. */
typedef struct per_step {
  table *t;
} per_step;

static ag_status step(ag_ctx *ctx, void *user) {
  table *t = ((per_step *)user)->t;
  ag_tensor *idx, *w, *np;
  ag_status s = ag_per_sample(t->per, t->rng, 32, 0.5f, &idx, &w);
  if (!s) s = ag_affine(w, 2.0f, 0.5f, &np); /* new priorities from the weights */
  if (!s) s = ag_per_update(t->per, idx, np);
  (void)ctx;
  return s;
}

static void recorded_per_step_equals_eager_steps(void **state) {
  (void)state;
  table a, b;
  table_new(&a, agt_kind, 1024, 1000, 0.6f);
  table_new(&b, agt_kind, 1024, 1000, 0.6f);
  per_step sa = {&a}, sb = {&b};
  ag_capture *cap;
  agt_ok(ag_capture_create(b.ctx, step, &sb, &cap));
  for (int i = 0; i < 50; i++) {
    agt_ok(step(a.ctx, &sa));
    ag_ctx_reset(a.ctx);
    agt_ok(ag_capture_replay(cap));
  }
  double ta, tb;
  agt_ok(ag_per_total(a.per, &ta));
  agt_ok(ag_per_total(b.per, &tb));
  assert_true(ta == tb);
  assert_true(ta != 1000.0); /* the updates did something */
  ag_capture_free(cap);
  table_free(&a);
  table_free(&b);
}

/* ag_per_sample_dev: a recorded draw reads beta on the device at each
 * replay; each replay's weights equal an eager ag_per_sample's with that
 * beta (the same rng state), values outside [0, 1] clamped to it. */
typedef struct beta_step {
  table *t;
  ag_tensor *beta, *idx, *w;
} beta_step;

static ag_status draw_dev(ag_ctx *ctx, void *user) {
  (void)ctx;
  beta_step *b = user;
  return ag_per_sample_dev(b->t->per, b->t->rng, 64, b->beta, &b->idx, &b->w);
}

static void device_beta_is_read_at_each_replay(void **state) {
  (void)state;
  table a, b;
  table_new(&a, agt_kind, 512, 500, 0.7f);
  table_new(&b, agt_kind, 512, 500, 0.7f);
  agt_rng g = {9};
  float p[500];
  priorities(&g, p, 500);
  set_all(&a, p, 500);
  set_all(&b, p, 500);
  beta_step bs = {&b, NULL, NULL, NULL};
  agt_ok(ag_tensor_create(b.ctx, 1, 1, AG_F32, NULL, &bs.beta));
  ag_capture *cap;
  agt_ok(ag_capture_create(b.ctx, draw_dev, &bs, &cap));
  const float betas[5] = {0.4f, 0.0f, 1.0f, 1.7f, -3.0f}, used[5] = {0.4f, 0.0f, 1.0f, 1.0f, 0.0f};
  for (int k = 0; k < 5; k++) {
    agt_ok(ag_tensor_write(bs.beta, &betas[k], sizeof(float)));
    agt_ok(ag_capture_replay(cap));
    ag_tensor *ia, *wa;
    agt_ok(ag_per_sample(a.per, a.rng, 64, used[k], &ia, &wa));
    float *x = agt_read_f32(wa), *y = agt_read_f32(bs.w);
    int32_t ix[64], iy[64];
    agt_ok(ag_tensor_read(ia, ix, sizeof ix));
    agt_ok(ag_tensor_read(bs.idx, iy, sizeof iy));
    assert_memory_equal(ix, iy, sizeof ix);
    assert_memory_equal(x, y, 64 * sizeof(float));
    if (k == 2 || k == 1) { /* beta 0: every weight 1; beta 1: not all equal */
      int ones = 1;
      for (int j = 0; j < 64; j++) ones &= x[j] == 1.0f;
      assert_int_equal(ones, k == 1);
    }
    free(x);
    free(y);
    ag_ctx_reset(a.ctx);
  }
  ag_tensor *i2, *w2, *bad;
  agt_ok(ag_tensor_create(b.ctx, 1, 2, AG_F32, NULL, &bad));
  agt_err(ag_per_sample_dev(b.per, b.rng, 8, bad, &i2, &w2), AG_ERR_SHAPE, "[1, 1] f32");
  agt_err(ag_per_sample_dev(b.per, b.rng, 8, NULL, &i2, &w2), AG_ERR_INVALID_ARG, "beta");
  ag_tensor_free(bad);
  ag_capture_free(cap);
  ag_tensor_free(bs.beta);
  table_free(&a);
  table_free(&b);
}

/* The GPU draws the same indices as the CPU from the same priorities. */
static void cpu_and_cuda_draw_the_same_indices(void **state) {
  (void)state;
  table t[2];
  agt_rng g = {9};
  float *p = malloc(20000 * sizeof *p);
  priorities(&g, p, 20000);
  int32_t ix[2][512];
  for (int k = 0; k < 2; k++) {
    table_new(&t[k], k ? agt_kind : AG_DEVICE_CPU, 20000, 20000, 1.0f);
    set_all(&t[k], p, 20000);
    ag_tensor *idx, *w;
    agt_ok(ag_per_sample(t[k].per, t[k].rng, 512, 0.4f, &idx, &w));
    agt_ok(ag_tensor_read(idx, ix[k], sizeof ix[k]));
  }
  assert_memory_equal(ix[0], ix[1], sizeof ix[0]);
  table_free(&t[0]);
  table_free(&t[1]);
  free(p);
}

/* ---- the update kernel on a bare tree, read back whole ---- */

typedef struct bare_tree {
  ag_ctx *ctx;
  int depth;
  int64_t leaves, size; /* size: doubles, the root included */
  ag_tensor *tree, *state;
} bare_tree;

static void *dev_ptr(ag_tensor *t) {
  void *p = NULL;
  agt_ok(ag__tensor_ptr(t, &p));
  return p;
}

/* All leaves at priority 1 (PER_FILL), the largest priority seen 1. */
static void bare_new(bare_tree *b, ag_device_kind kind, int depth, float alpha) {
  agt_ok(ag_ctx_create(&b->ctx, kind, 0));
  b->depth = depth;
  b->leaves = 1;
  for (int d = 0; d < depth; d++) b->leaves *= AG__PER_FAN;
  b->size = ag__per_offset(depth) + 1;
  const float one = 1.0f;
  agt_ok(ag_tensor_create(b->ctx, b->size, 1, AG_I64, NULL, &b->tree));
  agt_ok(ag_tensor_create(b->ctx, 1, 1, AG_F32, &one, &b->state));
  ag__per_fill_args f = {dev_ptr(b->tree), depth, alpha, dev_ptr(b->state), 0, b->leaves, NULL};
  agt_ok(ag__run(b->ctx, AG__K_PER_FILL, &f, sizeof f));
}

static void bare_free(bare_tree *b) {
  ag_tensor_free(b->tree);
  ag_tensor_free(b->state);
  ag_ctx_free(b->ctx);
}

/* PER_SET of idx[j] = prio[j], the indices as `dt` (i32: each truncated to
 * 32 bits), the priorities every `stride` floats, indices from `cols` up
 * skipped. */
static void bare_set_cols(bare_tree *b, const int64_t *idx, const float *prio, int64_t n, float alpha,
                          ag_dtype dt, int64_t stride, int64_t cols) {
  if (n < 1 || n > (1 << 24) || stride < 1 || stride > 64) {
    fail_msg("bare_set: n = %lld, stride = %lld", (long long)n, (long long)stride);
    return;
  }
  int32_t *i32 = malloc((size_t)n * sizeof *i32);
  float *ps = calloc((size_t)n * (size_t)stride, sizeof *ps);
  for (int64_t j = 0; j < n; j++) i32[j] = (int32_t)idx[j], ps[j * stride] = prio[j];
  ag_tensor *ti, *tp;
  agt_ok(ag_tensor_create(b->ctx, n, 1, dt, dt == AG_I32 ? (const void *)i32 : (const void *)idx, &ti));
  agt_ok(ag_tensor_create(b->ctx, n * stride, 1, AG_F32, ps, &tp));
  ag__per_set_args a = {dev_ptr(b->tree), b->depth, alpha, dev_ptr(b->state), dev_ptr(ti), dt, n, dev_ptr(tp),
                        stride,           cols,     NULL};
  agt_ok(ag__run(b->ctx, AG__K_PER_SET, &a, sizeof a));
  agt_ok(ag_ctx_sync(b->ctx)); /* the kernel was queued outside the tensors' bookkeeping */
  ag_tensor_free(ti);
  ag_tensor_free(tp);
  free(i32);
  free(ps);
}

static void bare_set(bare_tree *b, const int64_t *idx, const float *prio, int64_t n, float alpha, ag_dtype dt,
                     int64_t stride) {
  bare_set_cols(b, idx, prio, n, alpha, dt, stride, b->leaves);
}

static double *bare_read(bare_tree *b) {
  double *t = malloc((size_t)b->size * sizeof *t);
  agt_ok(ag_tensor_read(b->tree, t, (size_t)b->size * sizeof *t));
  return t;
}

/* Batch bi of a series: sizes across the CPU's chunk (1024) and the GPU's
 * pass (256); half the indices from 40 hot leaves (repeats within a batch,
 * a pass and across passes), a quarter from one group of 16 siblings, the
 * rest anywhere; every 97th priority 0 (taken as 1e-12). Priorities in
 * [0.5, 256.5) on a 1/4096 grid: when repeats keep the wrong one, a leaf is
 * off by far more than a rounding. */
static int64_t batch(agt_rng *g, int bi, int64_t leaves, const int64_t *hot, int64_t *idx, float *prio) {
  static const int64_t sizes[] = {1, 7, 256, 300, 1000, 2500};
  const int64_t n = sizes[bi], group = (leaves / AG__PER_FAN) * 3 / 7 * AG__PER_FAN;
  for (int64_t j = 0; j < n; j++) {
    int64_t r = agt_below(g, 4);
    idx[j] = r < 2    ? hot[agt_below(g, 40)]
             : r == 2 ? group + agt_below(g, AG__PER_FAN)
                      : agt_below(g, leaves);
    prio[j] = j % 97 == 5 ? 0.0f : 0.5f + (float)agt_below(g, 1 << 20) / 4096.0f;
  }
  return n;
}
enum { BATCHES = 6, BATCH_MAX = 2500 };

/* Every node is ag__per_sum16 of its children, bit for bit (the order each
 * device sums in); and within 1e-12 of a plain double recomputation from
 * the reference leaves (summed in index order, independently). */
static void check_tree(const double *tr, const double *ref_leaf, int depth) {
  for (int d = 0; d < depth - 1; d++)
    for (int64_t node = 0; node < ag__per_offset(d + 1) - ag__per_offset(d); node++) {
      double got = tr[ag__per_offset(d) + node],
             want = ag__per_sum16(tr + ag__per_offset(d + 1) + node * AG__PER_FAN);
      if (got != want)
        fail_msg("level %d node %lld: %.17g, its children sum to %.17g", d, (long long)node, got, want);
    }
  if (tr[ag__per_offset(depth)] != ag__per_sum16(tr)) fail_msg("the root is not the sum of level 0");
  int64_t leaves = ag__per_offset(depth) - ag__per_offset(depth - 1);
  double *sum = malloc((size_t)leaves * sizeof *sum);
  memcpy(sum, ref_leaf, (size_t)leaves * sizeof *sum);
  for (int d = depth - 2; d >= -1; d--) {
    int64_t nodes = d < 0 ? 1 : ag__per_offset(d + 1) - ag__per_offset(d);
    for (int64_t node = 0; node < nodes; node++) {
      double s = 0.0;
      for (int c = 0; c < AG__PER_FAN; c++) s += sum[node * AG__PER_FAN + c];
      sum[node] = s; /* in place: node * 16 + c >= node */
      double got = tr[d < 0 ? ag__per_offset(depth) : ag__per_offset(d) + node];
      if (!(fabs(got - s) <= 1e-12 * s))
        fail_msg("level %d node %lld: %.17g, reference %.17g", d, (long long)node, got, s);
    }
  }
  free(sum);
}

/* Series of batched updates with repeated indices and shared parents, at
 * several depths (1: the leaves are level 0). The leaves are ag__per_pow of
 * the last priority given to each: bit for bit on the CPU (on both of its
 * paths: 8 powers a vector, and one at a time), within 1e-15 of the C
 * library's pow on every device; state[0] is the largest priority. */
static void batched_updates_keep_every_node_the_sum_of_its_children(void **state) {
  (void)state;
  static const int depths[] = {1, 2, 4};
  int64_t *idx = malloc(BATCH_MAX * sizeof *idx);
  float *prio = malloc(BATCH_MAX * sizeof *prio);
  for (int k = 0; k < 3 * (agt_kind == AG_DEVICE_CPU ? 2 : 1); k++) {
    const float alpha = 0.6f;
    ag__cpu_vector_paths = k < 3;
    bare_tree b;
    bare_new(&b, agt_kind, depths[k % 3], alpha);
    double *ref = malloc((size_t)b.leaves * sizeof *ref), *exact = malloc((size_t)b.leaves * sizeof *exact);
    for (int64_t i = 0; i < b.leaves; i++) ref[i] = exact[i] = 1.0;
    agt_rng g = {31 + (uint64_t)(k % 3)};
    int64_t hot[40];
    for (int h = 0; h < 40; h++) hot[h] = agt_below(&g, b.leaves);
    float pmax = 1.0f;
    for (int bi = 0; bi < BATCHES; bi++) {
      int64_t n = batch(&g, bi, b.leaves, hot, idx, prio);
      bare_set(&b, idx, prio, n, alpha, bi % 2 ? AG_I64 : AG_I32, bi % 3 == 1 ? 2 : 1);
      for (int64_t j = 0; j < n; j++) {
        float p = prio[j] > 1e-12f ? prio[j] : 1e-12f;
        ref[idx[j]] = pow((double)p, (double)alpha);
        exact[idx[j]] = ag__per_pow(p, alpha);
        pmax = p > pmax ? p : pmax;
      }
    }
    double *tr = bare_read(&b);
    const double *leaf = tr + ag__per_offset(b.depth - 1);
    for (int64_t i = 0; i < b.leaves; i++) {
      if (!(fabs(leaf[i] - ref[i]) <= 1e-15 * ref[i]))
        fail_msg("depth %d leaf %lld: %.17g, pow of the last priority %.17g", b.depth, (long long)i, leaf[i],
                 ref[i]);
      if (agt_kind == AG_DEVICE_CPU && memcmp(&leaf[i], &exact[i], sizeof *leaf) != 0)
        fail_msg("path %d depth %d leaf %lld: %.17g, ag__per_pow of the last priority %.17g", k / 3, b.depth,
                 (long long)i, leaf[i], exact[i]);
    }
    check_tree(tr, ref, b.depth);
    float st;
    agt_ok(ag_tensor_read(b.state, &st, sizeof st));
    assert_true(st == pmax);
    free(tr);
    free(ref);
    free(exact);
    bare_free(&b);
  }
  ag__cpu_vector_paths = 1;
  free(idx);
  free(prio);
}

/* Host updates one after another with no wait between them, small ones
 * (read in place by the kernel on a GPU, from the staging ring they go
 * around many times) and large ones (copied), interleaved with adds: every
 * update lands, as the tree's total against a host sum shows (alpha 1,
 * quarter priorities: exact in double). */
static void host_updates_in_a_row_all_land(void **state) {
  (void)state;
  enum { CAP = 8192, ROUNDS = 600, LARGE = 6000 }; /* LARGE * 12 bytes: above the in-place limit */
  table t;
  table_new(&t, agt_kind, CAP, CAP, 1.0f);
  double *ref = malloc(CAP * sizeof *ref);
  int64_t *idx = malloc(LARGE * sizeof *idx);
  float *p = malloc(LARGE * sizeof *p);
  for (int64_t i = 0; i < CAP; i++) ref[i] = 1.0;
  agt_rng g = {77};
  double pmax = 1.0;
  int64_t pos = 0;
  ag_tensor *odd; /* writes of 5 bytes between the updates: uploads that end off any alignment */
  agt_ok(ag_tensor_create(t.ctx, 5, 1, AG_U8, NULL, &odd));
  unsigned char five[5] = {0};
  for (int r = 0; r < ROUNDS; r++) {
    if (r % 5 == 2) {
      for (int b = 0; b < 5; b++) five[b] = (unsigned char)(r + b);
      agt_ok(ag_tensor_write(odd, five, sizeof five));
    }
    const int64_t n = r % 97 == 50 ? LARGE : 1 + agt_below(&g, 300);
    for (int64_t j = 0; j < n; j++) {
      idx[j] = agt_below(&g, CAP);
      p[j] = 0.25f * (float)(1 + agt_below(&g, 64));
    }
    agt_ok(ag_per_update_host(t.per, idx, p, n));
    for (int64_t j = 0; j < n; j++) {
      ref[idx[j]] = p[j];
      pmax = p[j] > pmax ? p[j] : pmax;
    }
    if (r % 7 == 3) { /* two new transitions overwrite the oldest, at the largest priority so far */
      const float x[2] = {1.0f, 2.0f};
      const void *d[1] = {x};
      agt_ok(ag_replay_add(t.r, d, 2));
      for (int k = 0; k < 2; k++, pos = (pos + 1) % CAP) ref[pos] = pmax;
    }
  }
  double total, want = 0.0;
  for (int64_t i = 0; i < CAP; i++) want += ref[i];
  agt_ok(ag_per_total(t.per, &total));
  assert_true(total == want);
  unsigned char back[5];
  agt_ok(ag_tensor_read(odd, back, sizeof back));
  assert_memory_equal(back, five, sizeof five);
  ag_tensor_free(odd);
  free(ref);
  free(idx);
  free(p);
  table_free(&t);
}

/* Through the API: of repeated indices the last priority counts (on every
 * device), also across the GPU's passes of 256. */
static void repeated_indices_keep_the_last_priority(void **state) {
  (void)state;
  table t;
  table_new(&t, agt_kind, 4096, 1000, 0.5f);
  enum { N = 700 };
  int64_t idx[N];
  float p[N];
  for (int j = 0; j < N; j++) idx[j] = (j % 5) * 100, p[j] = (float)(j + 1); /* last: 696 .. 700 */
  idx[3] = idx[600] = 999, p[3] = 0.25f, p[600] = 16.0f;                     /* 999 last at 16 */
  agt_ok(ag_per_update_host(t.per, idx, p, N));
  double ref = 994.0 + 4.0, total;
  for (int k = 0; k < 5; k++) ref += sqrt(696.0 + k);
  agt_ok(ag_per_total(t.per, &total));
  if (!(fabs(total - ref) <= 1e-12 * ref)) fail_msg("total %.17g, reference %.17g", total, ref);
  table_free(&t);
}

/* Indices on the device outside the table are skipped, never written: the
 * valid ones of the same batch still land. */
static void device_indices_outside_the_table_are_skipped(void **state) {
  (void)state;
  table t;
  table_new(&t, agt_kind, 100, 100, 1.0f); /* 100 columns in a tree of 256 leaves */
  const int64_t idx[6] = {5, -1, 100, 255, 1000000, 7};
  const float p[6] = {3.0f, 50.0f, 50.0f, 50.0f, 50.0f, 0.5f};
  ag_tensor *ti, *tp;
  agt_ok(ag_tensor_create(t.ctx, 6, 1, AG_I64, idx, &ti));
  agt_ok(ag_tensor_create(t.ctx, 6, 1, AG_F32, p, &tp));
  agt_ok(ag_per_update(t.per, ti, tp));
  double total;
  agt_ok(ag_per_total(t.per, &total));
  assert_float_equal(total, 98.0 + 3.0 + 0.5, 1e-12); /* only columns 5 and 7 changed */
  /* the largest priority seen comes from the valid ones only: a new column gets 3 */
  float x = 1.0f;
  const void *d[1] = {&x};
  agt_ok(ag_replay_add(t.r, d, 1)); /* overwrites column 0 (priority 1) */
  agt_ok(ag_per_total(t.per, &total));
  assert_float_equal(total, 97.0 + 3.0 + 0.5 + 3.0, 1e-12);
  ag_tensor_free(ti);
  ag_tensor_free(tp);
  table_free(&t);
}

/* The same batches on both devices give the same tree: bit for bit when the
 * leaves agree (alpha 1 and dyadic priorities, where pow should be exact on
 * both), as both sum a node in ag__per_sum16's order. */
static void cpu_and_cuda_build_the_same_tree(void **state) {
  (void)state;
  bare_tree b[2];
  int64_t *idx = malloc(BATCH_MAX * sizeof *idx);
  float *prio = malloc(BATCH_MAX * sizeof *prio);
  double *tr[2];
  for (int k = 0; k < 2; k++) {
    bare_new(&b[k], k ? agt_kind : AG_DEVICE_CPU, 4, 1.0f);
    agt_rng g = {77};
    int64_t hot[40];
    for (int h = 0; h < 40; h++) hot[h] = agt_below(&g, b[k].leaves);
    for (int bi = 0; bi < BATCHES; bi++) {
      int64_t n = batch(&g, bi, b[k].leaves, hot, idx, prio);
      for (int64_t j = 0; j < n; j++) prio[j] = 0.25f * (float)(1 + (int)(prio[j]) % 15);
      bare_set(&b[k], idx, prio, n, 1.0f, AG_I32, 1);
    }
    tr[k] = bare_read(&b[k]);
  }
  const double *leaf[2] = {tr[0] + ag__per_offset(3), tr[1] + ag__per_offset(3)};
  if (memcmp(leaf[0], leaf[1], (size_t)b[0].leaves * sizeof *leaf[0]) == 0) {
    assert_memory_equal(tr[0], tr[1], (size_t)b[0].size * sizeof *tr[0]);
  } else { /* a pow that is not exact at alpha 1: the nodes within rounding */
    print_message("per_cross: the leaves differ in rounding (CUDA's pow); comparing within 1e-12\n");
    for (int64_t i = 0; i < b[0].size; i++)
      if (!(fabs(tr[0][i] - tr[1][i]) <= 1e-12 * fabs(tr[0][i])))
        fail_msg("node %lld: cpu %.17g, cuda %.17g", (long long)i, tr[0][i], tr[1][i]);
  }
  for (int k = 0; k < 2; k++) {
    free(tr[k]);
    bare_free(&b[k]);
  }
  free(idx);
  free(prio);
}

/* The power PER_SET's CUDA kernel takes for a leaf is within 1e-15 of the
 * C library's pow over the priorities it sees (clamped at 1e-12, up to the
 * largest float) and alpha in [0, 1]; alpha 0 and 1 and an infinite
 * priority give what pow gives, exactly. */
static void leaf_power_is_pow_within_rounding(void **state) {
  (void)state;
  agt_rng g = {41};
  static const float alphas[] = {0.6f, 0.7f, 0.5f, 0.4f, 0.1f, 0.999f};
  double worst = 0.0;
  for (int i = 0; i < 400000; i++) {
    float p, alpha = i % 2 ? alphas[(i / 2) % 6] : agt_uniform(&g, 0.0f, 1.0f);
    if (i % 3 == 0) { /* any float from 1e-12 up: random bits, the exponent in 2^-40 .. 2^127 */
      uint32_t bits = (uint32_t)(agt_next(&g) & 0x7fffffu) | (uint32_t)(87 + agt_below(&g, 168)) << 23;
      memcpy(&p, &bits, sizeof p);
      p = p > 1e-12f ? p : 1e-12f;
    } else {
      p = 0.5f + (float)agt_below(&g, 1 << 20) / 4096.0f;
    }
    double got = ag__per_pow(p, alpha), want = pow((double)p, (double)alpha), rel = fabs(got - want) / want;
    if (!(rel <= 1e-15)) fail_msg("%.9g ^ %.9g: %.17g, pow %.17g", (double)p, (double)alpha, got, want);
    worst = rel > worst ? rel : worst;
  }
  assert_true(worst > 0.0); /* the check compared something */
  static const float ps[] = {1e-12f, 0.25f, 1.0f, 3.0f, 1e30f, 3.4028235e38f};
  for (int i = 0; i < 6; i++) {
    assert_true(ag__per_pow(ps[i], 1.0f) == (double)ps[i]);
    assert_true(ag__per_pow(ps[i], 0.0f) == 1.0);
  }
  assert_true(ag__per_pow(INFINITY, 0.6f) == pow(INFINITY, 0.6));
  assert_true(ag__per_pow(INFINITY, 0.0f) == 1.0);
}

/* The sample kernel on a tree of the test's own, built on the host: zero
 * leaves, empty nodes (16 zero leaves) and subtrees (256), a zero tail (a
 * table smaller than the tree), tiny and large leaves. Every index is
 * ag__per_find's for its target, bit for bit; the weights are (N P)^-beta
 * over the batch maximum (in double) within 1e-6; the counter moves by B.
 * Batches of 1 up to 1000: not whole vectors of 8 lanes, across several of
 * the CPU's chunks of 128, the counter odd and even and past 2^32. Last, a
 * tree of a few positive leaves among 65536 (nearly every node empty). */
static void sample_kernel_picks_the_host_descents_leaf(void **state) {
  (void)state;
  /* on the CPU both paths (vector where the processor has it, and portable) */
  for (int vec = 1; vec >= 0; vec--) {
    ag__cpu_vector_paths = vec;
    static const int64_t Bs[] = {1, 13, 128, 300, 1000};
    static const uint64_t counters[] = {77, 1000, ((uint64_t)1 << 33) + 1};
    static const float betas[] = {0.4f, 0.0f, 1.0f};
    for (int k = 0; k < 5; k++) {
      const int depth = k < 4 ? k + 1 : 4, sparse = k == 4;
      ag_ctx *ctx;
      agt_ok(ag_ctx_create(&ctx, agt_kind, 0));
      const int64_t size = ag__per_offset(depth) + 1,
                    leaves = ag__per_offset(depth) - ag__per_offset(depth - 1);
      const int64_t n = leaves - leaves / 5 - 3; /* the table's columns */
      double *tr = calloc((size_t)size, sizeof *tr), *leaf = tr + ag__per_offset(depth - 1);
      agt_rng g = {500 + (uint64_t)k};
      for (int64_t i = 0; i < n; i++) {
        const int64_t r = agt_below(&g, 50);
        if (sparse) {
          leaf[i] = agt_below(&g, n) < 5 ? 1.0 + (double)r : 0.0;
          continue;
        }
        const int empty = (i / AG__PER_FAN) % 7 == 3 || (i / (AG__PER_FAN * AG__PER_FAN)) % 5 == 2;
        leaf[i] = empty || r < 12 ? 0.0
                  : r == 12       ? pow(1e-12, 0.6)
                  : r == 13       ? 1e6
                                  : pow(0.25 * (double)(1 + agt_below(&g, 15)), 0.6);
      }
      for (int d = depth - 2; d >= 0; d--)
        for (int64_t node = 0; node < ag__per_offset(d + 1) - ag__per_offset(d); node++)
          ag__per_recompute(tr, d, node);
      ag__per_recompute_root(tr, depth);
      const double root = tr[ag__per_offset(depth)];
      assert_true(root > 0.0);
      ag_tensor *tt;
      agt_ok(ag_tensor_create(ctx, size, 1, AG_I64, tr, &tt)); /* the doubles as 8-byte words */
      for (int t = 0; t < 5; t++) {
        const int64_t B = Bs[t];
        const uint64_t ctr = counters[(t + k) % 3], seed = 0x5eed0000u + (uint64_t)(5 * k + t);
        const float beta = betas[(t + 2 * k) % 3];
        ag_tensor *tc, *tn, *ti, *tw;
        agt_ok(ag_tensor_create(ctx, 1, 1, AG_I64, &ctr, &tc));
        agt_ok(ag_tensor_create(ctx, 1, 1, AG_I64, &n, &tn));
        agt_ok(ag_tensor_create(ctx, B, 1, AG_I32, NULL, &ti));
        agt_ok(ag_tensor_create(ctx, B, 1, AG_F32, NULL, &tw));
        ag__per_sample_args a = {dev_ptr(tt), depth, beta,        seed,        dev_ptr(tc),
                                 dev_ptr(tn), B,     dev_ptr(ti), dev_ptr(tw), NULL};
        agt_ok(ag__run(ctx, AG__K_PER_SAMPLE, &a, sizeof a));
        agt_ok(ag_ctx_sync(ctx)); /* the kernel was queued outside the tensors' bookkeeping */
        int32_t *ix = malloc((size_t)B * sizeof *ix);
        float *w = malloc((size_t)B * sizeof *w);
        double *wref = malloc((size_t)B * sizeof *wref), wmax = 0.0;
        uint64_t after;
        agt_ok(ag_tensor_read(ti, ix, (size_t)B * sizeof *ix));
        agt_ok(ag_tensor_read(tw, w, (size_t)B * sizeof *w));
        agt_ok(ag_tensor_read(tc, &after, sizeof after));
        assert_true(after == ctr + (uint64_t)B);
        for (int64_t j = 0; j < B; j++) {
          const int64_t want = ag__per_find(tr, depth, ag__per_target(seed, ctr + (uint64_t)j, j, B, root));
          if (ix[j] != want)
            fail_msg("depth %d B %lld sample %lld: index %d, the host's descent %lld", depth, (long long)B,
                     (long long)j, ix[j], (long long)want);
          assert_true(leaf[want] > 0.0);
          wref[j] = pow((double)n * leaf[want] / root, -(double)beta);
          wmax = fmax(wmax, wref[j]);
        }
        for (int64_t j = 0; j < B; j++)
          if (!(fabs(w[j] - wref[j] / wmax) <= 1e-6 * (wref[j] / wmax)))
            fail_msg("depth %d B %lld beta %g sample %lld: weight %.9g, reference %.9g", depth, (long long)B,
                     (double)beta, (long long)j, (double)w[j], wref[j] / wmax);
        free(ix);
        free(w);
        free(wref);
        ag_tensor_free(tc);
        ag_tensor_free(tn);
        ag_tensor_free(ti);
        ag_tensor_free(tw);
      }
      ag_tensor_free(tt);
      free(tr);
      ag_ctx_free(ctx);
    }
  }
  ag__cpu_vector_paths = 1;
}

/* Many passes of the GPU's 256 (and chunks of the CPU's 1024): indices
 * repeated within a pass and across passes, siblings, and indices outside
 * the table's columns (negative, from `cols` up to the last leaf, far
 * beyond; as i64 also past 32 bits) among valid ones, priorities 0, negative
 * and NaN (taken as 1e-12). At depths 1 to 5 the leaves are within 1e-15 of
 * the host's pow of the last valid priority of each (ag__per_pow's bits on
 * the CPU; pow's at alpha 1), every node
 * is the sum of its children, state[0] is the largest valid priority; at
 * alpha 1 a GPU's tree is the CPU's, bit for bit. */
static void many_passes_with_repeats_and_skipped_indices(void **state) {
  (void)state;
  enum { N = 5000 };
  int64_t *idx = malloc(N * sizeof *idx);
  float *prio = malloc(N * sizeof *prio);
  static const int depths[] = {1, 2, 3, 4, 5}; /* from 4: level 2 in shared memory on the GPU */
  for (int k = 0; k < 10; k++) {
    const int depth = depths[k % 5];
    const float alpha = k < 5 ? 0.6f : 1.0f;
    const ag_dtype dt = k % 2 ? AG_I64 : AG_I32;
    bare_tree b, ref_b;
    bare_new(&b, agt_kind, depth, alpha);
    const int cross = alpha == 1.0f && agt_kind != AG_DEVICE_CPU;
    if (cross) bare_new(&ref_b, AG_DEVICE_CPU, depth, alpha);
    /* leaves cols .. leaves-1 exist but are outside the table */
    const int64_t cols = b.leaves - b.leaves / 5;
    double *ref = malloc((size_t)b.leaves * sizeof *ref), *exact = malloc((size_t)b.leaves * sizeof *exact);
    for (int64_t i = 0; i < b.leaves; i++) ref[i] = exact[i] = 1.0;
    agt_rng g = {100 + (uint64_t)k};
    int64_t hot[24];
    for (int h = 0; h < 24; h++) hot[h] = agt_below(&g, cols);
    const int64_t group = agt_below(&g, (cols - 1) / AG__PER_FAN + 1) * AG__PER_FAN; /* < cols */
    float pmax = 1.0f;
    for (int batch = 0; batch < 2; batch++) {
      const int64_t n = batch ? N : 777;
      for (int64_t j = 0; j < n; j++) {
        int64_t r = agt_below(&g, 10);
        idx[j] = r < 4    ? hot[agt_below(&g, 24)]
                 : r < 6  ? group + agt_below(&g, AG__PER_FAN) % (cols - group)
                 : r < 8  ? agt_below(&g, cols)
                 : r == 8 ? cols + agt_below(&g, b.leaves - cols)
                          : -1 - agt_below(&g, 3);
        if (j % 101 == 7) idx[j] = dt == AG_I64 ? ((int64_t)1 << 40) + (int64_t)agt_below(&g, 16) : INT32_MAX;
        int64_t q = agt_below(&g, 50);
        prio[j] = q == 0   ? 0.0f
                  : q == 1 ? -2.0f
                  : q == 2 ? NAN
                           : 0.5f + (float)agt_below(&g, 1 << 20) / 4096.0f;
      }
      bare_set_cols(&b, idx, prio, n, alpha, dt, batch ? 3 : 1, cols);
      if (cross) bare_set_cols(&ref_b, idx, prio, n, alpha, dt, batch ? 3 : 1, cols);
      for (int64_t j = 0; j < n; j++) {
        if (idx[j] < 0 || idx[j] >= cols) continue;
        float p = prio[j] > 1e-12f ? prio[j] : 1e-12f;
        ref[idx[j]] = pow((double)p, (double)alpha);
        exact[idx[j]] = ag__per_pow(p, alpha);
        pmax = p > pmax ? p : pmax;
      }
    }
    double *tr = bare_read(&b);
    const double *leaf = tr + ag__per_offset(depth - 1);
    const double tol = alpha == 1.0f ? 0.0 : 1e-15;
    for (int64_t i = 0; i < b.leaves; i++) {
      if (!(fabs(leaf[i] - ref[i]) <= tol * ref[i]))
        fail_msg("depth %d alpha %g leaf %lld: %.17g, pow of the last valid priority %.17g", depth,
                 (double)alpha, (long long)i, leaf[i], ref[i]);
      if (agt_kind == AG_DEVICE_CPU && memcmp(&leaf[i], &exact[i], sizeof *leaf) != 0)
        fail_msg("depth %d alpha %g leaf %lld: %.17g, ag__per_pow of the last valid priority %.17g", depth,
                 (double)alpha, (long long)i, leaf[i], exact[i]);
    }
    check_tree(tr, ref, depth);
    float st;
    agt_ok(ag_tensor_read(b.state, &st, sizeof st));
    if (st != pmax)
      fail_msg("depth %d: state[0] = %.9g, the largest valid priority %.9g", depth, (double)st, (double)pmax);
    if (cross) {
      double *cpu = bare_read(&ref_b);
      for (int64_t i = 0; i < b.size; i++)
        if (memcmp(&cpu[i], &tr[i], sizeof *tr) != 0)
          fail_msg("depth %d node %lld: cpu %.17g, this device %.17g", depth, (long long)i, cpu[i], tr[i]);
      free(cpu);
      bare_free(&ref_b);
    }
    free(tr);
    free(ref);
    free(exact);
    bare_free(&b);
  }
  free(idx);
  free(prio);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tree_total_is_the_sum_of_powered_priorities),
      cmocka_unit_test(sampling_is_stratified_over_the_running_sum),
      cmocka_unit_test(frequencies_follow_priorities),
      cmocka_unit_test(new_transitions_get_the_largest_priority),
      cmocka_unit_test(per_bad_input_is_refused_and_changes_nothing),
      cmocka_unit_test(recorded_per_step_equals_eager_steps),
      cmocka_unit_test(device_beta_is_read_at_each_replay),
      cmocka_unit_test(batched_updates_keep_every_node_the_sum_of_its_children),
      cmocka_unit_test(host_updates_in_a_row_all_land),
      cmocka_unit_test(repeated_indices_keep_the_last_priority),
      cmocka_unit_test(device_indices_outside_the_table_are_skipped),
      cmocka_unit_test(leaf_power_is_pow_within_rounding),
      cmocka_unit_test(many_passes_with_repeats_and_skipped_indices),
      cmocka_unit_test(sample_kernel_picks_the_host_descents_leaf),
  };
  const struct CMUnitTest cuda_only[] = {cmocka_unit_test(cpu_and_cuda_draw_the_same_indices),
                                         cmocka_unit_test(cpu_and_cuda_build_the_same_tree)};
  int rc = agt_run(argc, argv, "per", tests, sizeof tests / sizeof tests[0]);
  if (rc == 0 && agt_kind != AG_DEVICE_CPU) rc = agt_run(argc, argv, "per_cross", cuda_only, 2);
  return rc;
}
