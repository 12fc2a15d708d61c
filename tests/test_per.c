/* test_per.c — prioritized replay against host references: the tree's total,
 * stratified sampling (each index holds its slice's target in the running
 * sum), frequencies, importance weights, new transitions at the largest
 * priority, bad input, recording, and the CPU and GPU giving the same draws.
 */
#include <math.h>

#include "agt.h"
#include "core/per_tree.h"

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
      fail_msg("sample %lld: target %.9g is outside [%.9g, %.9g) of index %lld", (long long)j, u, cum[i], cum[i + 1], (long long)i);
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
  agt_err(ag_per_update_host(t.per, bad_idx, ok_p, 1), AG_ERR_OUT_OF_RANGE, "idx[0] = 10 is outside the 10 valid");
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

/* The GPU draws the same indices as the CPU from the same priorities. */
static void cpu_and_cuda_draw_the_same_indices(void **state) {
  (void)state;
  table t[2];
  agt_rng g = {9};
  float *p = malloc(20000 * sizeof *p);
  priorities(&g, p, 20000);
  int32_t ix[2][512];
  for (int k = 0; k < 2; k++) {
    table_new(&t[k], k ? AG_DEVICE_CUDA : AG_DEVICE_CPU, 20000, 20000, 1.0f);
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

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tree_total_is_the_sum_of_powered_priorities),
      cmocka_unit_test(sampling_is_stratified_over_the_running_sum),
      cmocka_unit_test(frequencies_follow_priorities),
      cmocka_unit_test(new_transitions_get_the_largest_priority),
      cmocka_unit_test(per_bad_input_is_refused_and_changes_nothing),
      cmocka_unit_test(recorded_per_step_equals_eager_steps),
  };
  const struct CMUnitTest cuda_only[] = {cmocka_unit_test(cpu_and_cuda_draw_the_same_indices)};
  int rc = agt_run(argc, argv, "per", tests, sizeof tests / sizeof tests[0]);
  if (rc == 0 && agt_kind == AG_DEVICE_CUDA) rc = agt_run(argc, argv, "per_cross", cuda_only, 1);
  return rc;
}
