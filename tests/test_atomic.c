/* test_atomic.c — calls that fail change nothing; views read and written by
 * their layout; integers stored exactly; out-parameters untouched on error.
 * Each case builds its reference on the host and compares values. */
#include <math.h>

#include "agt.h"
#include "graph/graph_internal.h"
#include "agent/agent_internal.h"
#include "core/internal.h"
#include "replay/replay_internal.h"

/* ---- views ---- */

/* A 3 x 4 tensor holding 0..11 column by column; its row 1 is 1 4 7 10. */
static void row_views_read_and_write_their_own_elements(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  float v[12], got[12];
  for (int i = 0; i < 12; i++) v[i] = (float)i;
  ag_tensor *x, *row, *two;
  agt_ok(ag_tensor_create(ctx, 3, 4, AG_F32, v, &x));
  agt_ok(ag_slice_rows(x, 1, 1, &row));
  agt_ok(ag_tensor_read(row, got, 4 * sizeof(float)));
  for (int c = 0; c < 4; c++) assert_true(got[c] == (float)(3 * c + 1));
  const float w[4] = {100, 101, 102, 103};
  agt_ok(ag_tensor_write(row, w, sizeof w));
  agt_ok(ag_tensor_read(x, got, sizeof got));
  for (int i = 0; i < 12; i++) assert_true(got[i] == (i % 3 == 1 ? 100.0f + (float)(i / 3) : (float)i));
  /* a two-row view: rows 1..2 of every column */
  agt_ok(ag_slice_rows(x, 1, 2, &two));
  float g2[8], w2[8];
  agt_ok(ag_tensor_read(two, g2, sizeof g2));
  for (int c = 0; c < 4; c++) {
    assert_true(g2[2 * c] == 100.0f + (float)c);
    assert_true(g2[2 * c + 1] == (float)(3 * c + 2));
  }
  for (int i = 0; i < 8; i++) w2[i] = -1.0f - (float)i;
  agt_ok(ag_tensor_write(two, w2, sizeof w2));
  agt_ok(ag_tensor_read(x, got, sizeof got));
  for (int c = 0; c < 4; c++) {
    assert_true(got[3 * c] == (float)(3 * c)); /* row 0 untouched */
    assert_true(got[3 * c + 1] == w2[2 * c]);
    assert_true(got[3 * c + 2] == w2[2 * c + 1]);
  }
  /* a column view has no gaps: read and written whole */
  ag_tensor *col;
  agt_ok(ag_slice_cols(x, 2, 1, &col));
  agt_ok(ag_tensor_read(col, got, 3 * sizeof(float)));
  assert_true(got[0] == 6.0f && got[1] == w2[4] && got[2] == w2[5]);
  ag_tensor_free(x);
  ag_ctx_free(ctx);
}

/* Reading a field of a gathered batch gives that field's values. */
static void a_field_view_of_a_batch_reads_that_field(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field f[3] = {{"obs", 3, AG_F32}, {"action", 1, AG_I32}, {"reward", 1, AG_F32}};
  ag_replay *r;
  enum { N = 64 };
  agt_ok(ag_replay_create(ctx, f, 3, N, AG_F32, 1, &r));
  float obs[3 * N], rew[N];
  int32_t act[N];
  for (int j = 0; j < N; j++) {
    for (int e = 0; e < 3; e++) obs[3 * j + e] = (float)(1000 * j + e);
    act[j] = j % 5;
    rew[j] = 0.5f * (float)j - 7.0f;
  }
  const void *data[3] = {obs, act, rew};
  agt_ok(ag_replay_add(r, data, N));
  int64_t idx[N];
  agt_rng g = {42};
  for (int j = 0; j < N; j++) idx[j] = agt_below(&g, N);
  ag_tensor *batch, *rv, *ov, *av;
  agt_ok(ag_replay_gather(r, idx, N, &batch));
  agt_ok(ag_replay_view(r, batch, "reward", &rv));
  agt_ok(ag_replay_view(r, batch, "obs", &ov));
  agt_ok(ag_replay_view(r, batch, "action", &av));
  float got[3 * N];
  agt_ok(ag_tensor_read(rv, got, N * sizeof(float)));
  for (int j = 0; j < N; j++) assert_true(got[j] == rew[idx[j]]);
  agt_ok(ag_tensor_read(av, got, N * sizeof(float)));
  for (int j = 0; j < N; j++) assert_true(got[j] == (float)act[idx[j]]);
  agt_ok(ag_tensor_read(ov, got, sizeof got));
  for (int j = 0; j < N; j++)
    for (int e = 0; e < 3; e++) assert_true(got[3 * j + e] == obs[3 * idx[j] + e]);
  /* the view's bytes are what crosses, not the batch's */
  ag_xfer_reset(ctx);
  agt_ok(ag_tensor_read(rv, got, N * sizeof(float)));
  uint64_t down;
  ag_xfer_get(ctx, "ag_tensor_read", NULL, &down);
  assert_int_equal(down, N * sizeof(float));
  agt_err(ag_replay_view(r, NULL, "reward", &rv), AG_ERR_INVALID_ARG, "ag_replay_view");
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

/* Views of other dtypes (here i32) go by their layout too. */
static void integer_views_keep_the_gaps(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  int32_t v[12], got[12];
  for (int i = 0; i < 12; i++) v[i] = 1 << (i + 10);
  ag_tensor *x;
  agt_ok(ag_tensor_create(ctx, 3, 4, AG_I32, v, &x));
  /* an i32 row view, made by hand as the ops make f32 ones */
  ag_tensor *row;
  agt_ok(ag__tensor_view(ctx, 1, 4, 3, AG_I32, (int32_t *)x->store.ptr + 2, &row));
  agt_ok(ag_tensor_read(row, got, 4 * sizeof(int32_t)));
  for (int c = 0; c < 4; c++) assert_int_equal(got[c], v[3 * c + 2]);
  const int32_t w[4] = {-1, -2, -3, 16777217};
  agt_ok(ag_tensor_write(row, w, sizeof w));
  agt_ok(ag_tensor_read(x, got, sizeof got));
  for (int i = 0; i < 12; i++) assert_int_equal(got[i], i % 3 == 2 ? w[i / 3] : v[i]);
  ag_tensor_free(x);
  ag_ctx_free(ctx);
}

/* ---- exact integers ---- */

static void i64_fields_reach_i32_storage_exactly(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field f[2] = {{"a", 1, AG_I64}, {"b", 1, AG_I32}};
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, f, 2, 8, AG_I32, 1, &r));
  const int64_t a[4] = {16777217, INT32_MAX, INT32_MIN, -16777219};
  const int32_t b[4] = {16777217, INT32_MAX - 1, INT32_MIN + 1, 3};
  const void *data[2] = {a, b};
  agt_ok(ag_replay_add(r, data, 4));
  int32_t got[8];
  agt_ok(ag_buffer_read(ag_replay_buffer(r), 0, 4, AG_I32, got, sizeof got));
  for (int j = 0; j < 4; j++) {
    assert_int_equal(got[2 * j], (int32_t)a[j]);
    assert_int_equal(got[2 * j + 1], b[j]);
  }
  const int64_t too_big[1] = {(int64_t)INT32_MAX + 1};
  const int32_t one[1] = {1};
  const void *bad[2] = {too_big, one};
  agt_err(ag_replay_add(r, bad, 1), AG_ERR_OUT_OF_RANGE, "does not fit i32");
  assert_int_equal(ag_replay_size(r), 4);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

/* ---- host memory ---- */

static void host_alloc_refuses_sizes_that_wrap(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  void *sentinel = (void *)&sentinel, *p = sentinel;
  agt_err(ag_host_alloc(ctx, SIZE_MAX, &p), AG_ERR_OUT_OF_MEMORY, "ag_host_alloc");
  assert_ptr_equal(p, sentinel);
  agt_err(ag_host_alloc(ctx, SIZE_MAX - 100, &p), AG_ERR_OUT_OF_MEMORY, "ag_host_alloc");
  assert_ptr_equal(p, sentinel);
  agt_ok(ag_host_alloc(ctx, 1000, &p));
  memset(p, 7, 1000); /* all of it is usable */
  ag_host_free(ctx, p);
  ag_ctx_free(ctx);
}

/* ---- all or nothing: the replay table ---- */

static void read_table(ag_replay *r, float *out) {
  agt_ok(ag_buffer_read(ag_replay_buffer(r), 0, ag_replay_capacity(r), AG_F32, out,
                        (size_t)(ag_replay_capacity(r) * ag_replay_rows(r)) * sizeof(float)));
}

static void add_values(ag_replay *r, const float *v, int64_t k) {
  const void *data[1] = {v};
  agt_ok(ag_replay_add(r, data, k));
}

/* A full table of 4 holding 5 6 3 4 (position 2): adding 7 8 9 writes two
 * parts; a fault at any of them leaves 5 6 3 4, position 2, size 4, and the
 * retry stores the batch once. The same before the table is full (the size
 * counter is a third part) and with prioritized sampling. */
static void a_failed_add_changes_nothing(void **state) {
  (void)state;
  for (int with_per = 0; with_per < 2; with_per++)
    for (int kind = 0; kind < 4; kind++)
      for (int64_t n = 0;; n++) {
        ag_ctx *ctx = agt_ctx();
        const ag_field f[1] = {{"x", 1, AG_F32}};
        ag_replay *r;
        ag_per *per = NULL;
        agt_ok(ag_replay_create(ctx, f, 1, 4, AG_F32, 1, &r));
        if (with_per) agt_ok(ag_per_create(r, 0.6f, &per));
        const float first[4] = {1, 2, 3, 4}, second[2] = {5, 6}, third[3] = {7, 8, 9};
        add_values(r, first, 4);
        add_values(r, second, 2);
        if (with_per) {
          const int64_t pi[2] = {0, 3};
          const float pv[2] = {4.0f, 0.25f};
          agt_ok(ag_per_update_host(per, pi, pv, 2));
        }
        float before[4], after[4];
        double tot_before = 0, tot_after = 0;
        read_table(r, before);
        if (per) agt_ok(ag_per_total(per, &tot_before));
        const ag_fault kinds[4] = {AG_FAULT_UPLOAD, AG_FAULT_ALLOC, AG_FAULT_DOWNLOAD, AG_FAULT_HOST_ALLOC};
        agt_ok(ag_ctx_inject_fault(ctx, kinds[kind], n));
        const void *data[1] = {third};
        ag_status s = ag_replay_add(r, data, 3);
        int fired = kinds[kind] == AG_FAULT_HOST_ALLOC ? ag__host_fault_pending() < 0
                                                       : ctx->fault_after[kinds[kind]] < 0;
        ag_ctx_inject_fault(ctx, kinds[kind], -1);
        if (s != AG_OK) {
          assert_true(fired);
          read_table(r, after);
          assert_memory_equal(before, after, sizeof before);
          assert_int_equal(ag_replay_position(r), 2);
          assert_int_equal(ag_replay_size(r), 4);
          if (per) {
            agt_ok(ag_per_total(per, &tot_after));
            assert_true(tot_after == tot_before);
          }
          agt_ok(ag_replay_add(r, data, 3)); /* the retry */
        }
        read_table(r, after);
        const float want[4] = {9, 6, 7, 8};
        assert_memory_equal(after, want, sizeof want);
        assert_int_equal(ag_replay_position(r), 1);
        if (per) { /* the three new columns took the largest priority seen (4): 3 * 4^0.6 + 6's 1^0.6 */
          agt_ok(ag_per_total(per, &tot_after));
          assert_true(fabs(tot_after - (3.0 * pow(4.0, 0.6) + 1.0)) < 1e-5);
        }
        ag_replay_free(r);
        ag_ctx_free(ctx);
        if (s == AG_OK) break; /* n passed the last site */
      }
}

/* Before the table is full a fault leaves the size and the device count. */
static void a_failed_add_keeps_the_size(void **state) {
  (void)state;
  for (int64_t n = 0;; n++) {
    ag_ctx *ctx = agt_ctx();
    const ag_field f[1] = {{"x", 1, AG_F32}};
    ag_replay *r;
    ag_rng *rng;
    agt_ok(ag_replay_create(ctx, f, 1, 8, AG_F32, 1, &r));
    agt_ok(ag_rng_create(ctx, 5, &rng));
    const float a[3] = {1, 2, 3}, b[2] = {4, 5};
    add_values(r, a, 3);
    agt_ok(ag_ctx_inject_fault(ctx, AG_FAULT_UPLOAD, n));
    const void *data[1] = {b};
    ag_status s = ag_replay_add(r, data, 2);
    ag_ctx_inject_fault(ctx, AG_FAULT_UPLOAD, -1);
    int64_t want = s ? 3 : 5;
    assert_int_equal(ag_replay_size(r), want);
    /* the device's count bounds the draws: 2000 draws see exactly 0..want-1 */
    ag_tensor *batch, *idx;
    agt_ok(ag_replay_sample(r, rng, 2000, &batch, &idx));
    int32_t got[2000];
    agt_ok(ag_tensor_read(idx, got, sizeof got));
    int seen[8] = {0};
    for (int j = 0; j < 2000; j++) {
      assert_true(got[j] >= 0 && got[j] < want);
      seen[got[j]] = 1;
    }
    for (int j = 0; j < want; j++) assert_true(seen[j]);
    ag_rng_free(rng);
    ag_replay_free(r);
    ag_ctx_free(ctx);
    if (s == AG_OK) break;
  }
}

/* ---- all or nothing: the DQN ---- */

static ag_dqn_config tiny_config(int fused) { return agt_dqn_config(8, 4, 16, 3, fused); }

static void fill_dqn(ag_dqn *d, int n) {
  agt_rng g = {7};
  for (int t = 0; t < n; t++) {
    float o[3], no[3], r = agt_uniform(&g, -1, 1);
    for (int e = 0; e < 3; e++) o[e] = agt_uniform(&g, -1, 1), no[e] = agt_uniform(&g, -1, 1);
    int32_t a = (int32_t)agt_below(&g, 2);
    int term = agt_below(&g, 4) == 0;
    agt_ok(ag_dqn_store(d, o, &a, &r, no, &term, 1));
  }
}

static float *read_params(ag_mlp *m, size_t *count) {
  size_t n = 0;
  for (int i = 0; i < ag_mlp_n_params(m); i++) n += (size_t)ag_tensor_numel(ag_mlp_params(m)[i]);
  float *v = malloc(n * sizeof *v);
  assert_non_null(v);
  size_t off = 0;
  for (int i = 0; i < ag_mlp_n_params(m); i++) {
    size_t k = (size_t)ag_tensor_numel(ag_mlp_params(m)[i]);
    agt_ok(ag_tensor_read(ag_mlp_params(m)[i], v + off, k * sizeof *v));
    off += k;
  }
  *count = n;
  return v;
}

/* A read-back of the loss that fails undoes the updates; the retry gives the
 * losses and parameters of a run that never failed. */
static void a_failed_train_changes_nothing(void **state) {
  (void)state;
  for (int fused = 0; fused < 2; fused++) {
    const ag_dqn_config c = tiny_config(fused);
    /* the reference: 9 updates (a chain of 8 and one), then 3 */
    ag_ctx *rctx = agt_ctx();
    ag_dqn *ref;
    agt_ok(ag_dqn_create(rctx, 3, 2, 1000, &c, &ref));
    fill_dqn(ref, 12);
    float rl1, rl2;
    agt_ok(ag_dqn_train(ref, 9, &rl1));
    agt_ok(ag_dqn_train(ref, 3, &rl2));
    size_t np;
    float *rp = read_params(ag_dqn_q(ref), &np);
    int failures = 0;
    const ag_fault kinds[4] = {AG_FAULT_DOWNLOAD, AG_FAULT_ALLOC, AG_FAULT_UPLOAD, AG_FAULT_HOST_ALLOC};
    for (int kind = 0; kind < 4; kind++)
      for (int64_t n = 0;; n++) {
        ag_ctx *ctx = agt_ctx();
        ag_dqn *d;
        agt_ok(ag_dqn_create(ctx, 3, 2, 1000, &c, &d));
        fill_dqn(d, 12);
        size_t np0;
        float *p0 = read_params(ag_dqn_q(d), &np0);
        float l1 = -1, l2 = -1;
        agt_ok(ag_ctx_inject_fault(ctx, kinds[kind], n));
        ag_status s = ag_dqn_train(d, 9, &l1);
        ag_ctx_inject_fault(ctx, kinds[kind], -1);
        if (s) {
          failures++;
          assert_true(l1 == -1.0f); /* untouched */
          assert_int_equal(ag_dqn_updates(d), 0);
          size_t np1;
          float *p1 = read_params(ag_dqn_q(d), &np1);
          assert_memory_equal(p0, p1, np0 * sizeof *p0);
          free(p1);
          agt_ok(ag_dqn_train(d, 9, &l1));
        }
        agt_ok(ag_dqn_train(d, 3, &l2));
        assert_true(l1 == rl1 && l2 == rl2);
        assert_int_equal(ag_dqn_updates(d), 12);
        size_t np2;
        float *p2 = read_params(ag_dqn_q(d), &np2);
        assert_memory_equal(p2, rp, np * sizeof *rp);
        free(p2);
        free(p0);
        ag_dqn_free(d);
        ag_ctx_free(ctx);
        if (!s) break;
      }
    assert_true(failures >= 1);
    free(rp);
    ag_dqn_free(ref);
    ag_ctx_free(rctx);
  }
}

/* A failed act leaves the exploration stream where it was. */
static void a_failed_act_changes_nothing(void **state) {
  (void)state;
  const ag_dqn_config c = tiny_config(1);
  const float obs[3 * 5] = {0.1f, -0.2f, 0.3f, 1, 2, 3, -1, 0, 1, 0.5f, 0.5f, 0.5f, 2, -2, 0};
  int32_t ref[4][5];
  ag_ctx *rctx = agt_ctx();
  ag_dqn *r;
  agt_ok(ag_dqn_create(rctx, 3, 2, 100, &c, &r));
  for (int k = 0; k < 4; k++) agt_ok(ag_dqn_act(r, obs, 5, 8, 1, ref[k]));
  for (int kind = 0; kind < 4; kind++)
    for (int64_t n = 0;; n++) {
      ag_ctx *ctx = agt_ctx();
      ag_dqn *d;
      agt_ok(ag_dqn_create(ctx, 3, 2, 100, &c, &d));
      const ag_fault kinds[4] = {AG_FAULT_UPLOAD, AG_FAULT_ALLOC, AG_FAULT_DOWNLOAD, AG_FAULT_HOST_ALLOC};
      agt_ok(ag_ctx_inject_fault(ctx, kinds[kind], n));
      int fails = 0;
      for (int k = 0; k < 4; k++) {
        int32_t got[5] = {-7, -7, -7, -7, -7};
        ag_status s = ag_dqn_act(d, obs, 5, 8, 1, got); /* epsilon 0.5: both kinds of draw */
        if (s) {
          fails++;
          for (int i = 0; i < 5; i++) assert_int_equal(got[i], -7);
          ag_ctx_inject_fault(ctx, kinds[kind], -1);
          agt_ok(ag_dqn_act(d, obs, 5, 8, 1, got));
        }
        assert_memory_equal(got, ref[k], sizeof got);
      }
      ag_ctx_inject_fault(ctx, kinds[kind], -1);
      ag_dqn_free(d);
      ag_ctx_free(ctx);
      if (!fails) break;
    }
  ag_dqn_free(r);
  ag_ctx_free(rctx);
}

/* A backward that fails part-way leaves the parameters' gradients zeroed. */
static void a_failed_backward_leaves_zeroed_gradients(void **state) {
  (void)state;
  int failures = 0;
  for (int kind = 0; kind < 2; kind++)
    for (int64_t n = 0;; n++) {
      ag_ctx *ctx = agt_ctx();
      const int64_t sizes[3] = {3, 64, 2};
      ag_mlp *m;
      agt_ok(ag_mlp_create(ctx, sizes, 3, AG_ACT_TANH, AG_ACT_NONE, 9, &m));
      enum { SMALL = 2, BIG = 4096 };
      float *xv = malloc(3 * BIG * sizeof *xv);
      assert_non_null(xv);
      for (int i = 0; i < 3 * BIG; i++) xv[i] = (float)(i % 7) - 3.0f;
      ag_tensor *xs, *xb, *y, *l;
      agt_ok(ag_tensor_create(ctx, 3, SMALL, AG_F32, xv, &xs));
      agt_ok(ag_tensor_create(ctx, 3, BIG, AG_F32, xv, &xb));
      free(xv);
      /* a first backward on a small batch leaves gradients to add onto */
      agt_ok(ag_mlp_forward(m, xs, &y));
      agt_ok(ag_mean(y, AG_AXIS_ALL, &l));
      agt_ok(ag_backward(l));
      ag_ctx_reset(ctx);
      /* the second, on a batch too large for the memory the first left, must
       * take new workspace memory and tape room while it runs */
      agt_ok(ag_mlp_forward(m, xb, &y));
      agt_ok(ag_mean(y, AG_AXIS_ALL, &l));
      const ag_fault k = kind ? AG_FAULT_HOST_ALLOC : AG_FAULT_ALLOC;
      agt_ok(ag_ctx_inject_fault(ctx, k, n));
      ag_status s = ag_backward(l);
      ag_ctx_inject_fault(ctx, k, -1);
      if (s) {
        failures++;
        for (int i = 0; i < ag_mlp_n_params(m); i++) {
          float *g = agt_read_f32(ag_tensor_grad(ag_mlp_params(m)[i]));
          for (int64_t e = 0; e < ag_tensor_numel(ag_mlp_params(m)[i]); e++) assert_true(g[e] == 0.0f);
          free(g);
        }
      }
      ag_tensor_free(xs);
      ag_tensor_free(xb);
      ag_mlp_free(m);
      ag_ctx_free(ctx);
      if (!s) break;
    }
  assert_true(failures >= 1);
}

/* A table or a DQN that a device error left half written refuses every
 * call that would read or change it. */
static void half_written_objects_refuse_further_use(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field f[1] = {{"x", 1, AG_F32}};
  ag_replay *r;
  ag_per *per;
  ag_rng *rng;
  agt_ok(ag_replay_create(ctx, f, 1, 8, AG_F32, 1, &r));
  agt_ok(ag_per_create(r, 0.5f, &per));
  agt_ok(ag_rng_create(ctx, 1, &rng));
  const float v[2] = {1, 2};
  add_values(r, v, 2);
  ag__replay_set_broken(r);
  const void *data[1] = {v};
  ag_tensor *b, *i, *w;
  const int64_t idx[1] = {0};
  const float pr[1] = {2};
  agt_err(ag_replay_add(r, data, 1), AG_ERR_STATE, "free the table");
  agt_err(ag_replay_sample(r, rng, 2, &b, &i), AG_ERR_STATE, "free the table");
  agt_err(ag_replay_gather(r, idx, 1, &b), AG_ERR_STATE, "free the table");
  agt_err(ag_replay_can_sample(r, 1), AG_ERR_STATE, "free the table");
  agt_err(ag_per_sample(per, rng, 2, 0.4f, &i, &w), AG_ERR_STATE, "free the table");
  agt_err(ag_per_update_host(per, idx, pr, 1), AG_ERR_STATE, "free the table");
  assert_int_equal(ag_replay_size(r), 2);
  ag_rng_free(rng);
  ag_replay_free(r);
  const ag_dqn_config c = tiny_config(1);
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, 3, 2, 100, &c, &d));
  fill_dqn(d, 6);
  ag__dqn_set_broken(d);
  const float obs[3] = {0, 0, 0};
  int32_t act = 0;
  float loss, rew = 0;
  int term = 0;
  ag_tensor *lt;
  agt_err(ag_dqn_act(d, obs, 1, 0, 0, &act), AG_ERR_STATE, "free the DQN");
  agt_err(ag_dqn_store(d, obs, &act, &rew, obs, &term, 1), AG_ERR_STATE, "free the DQN");
  agt_err(ag_dqn_train(d, 1, &loss), AG_ERR_STATE, "free the DQN");
  agt_err(ag_dqn_update_target(d), AG_ERR_STATE, "free the DQN");
  agt_ok(ag_replay_gather(ag_dqn_replay(d), idx, 1, &b));
  agt_err(ag_dqn_loss(d, b, &lt), AG_ERR_STATE, "free the DQN");
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* ---- out-parameters and messages ---- */

static void constructors_leave_out_untouched_on_error(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  void *const sentinel = (void *)&sentinel;
#define UNTOUCHED(type, call)          \
  do {                                 \
    type *out_ = (type *)sentinel;     \
    assert_int_not_equal(call, AG_OK); \
    assert_ptr_equal(out_, sentinel);  \
  } while (0)
  UNTOUCHED(ag_ctx, ag_ctx_create(&out_, (ag_device_kind)7, 0));
  UNTOUCHED(ag_buffer, ag_buffer_create(ctx, 0, 4, AG_F32, &out_));
  UNTOUCHED(ag_buffer, ag_buffer_create(ctx, 1, (int64_t)1 << 62, AG_F32, &out_));
  UNTOUCHED(ag_tensor, ag_tensor_create(ctx, 2, -1, AG_F32, NULL, &out_));
  UNTOUCHED(ag_tensor, ag_tensor_create(ctx, (int64_t)1 << 40, (int64_t)1 << 40, AG_F32, NULL, &out_));
  UNTOUCHED(ag_rng, ag_rng_create(NULL, 1, &out_));
  const ag_field f[1] = {{"x", 0, AG_F32}};
  UNTOUCHED(ag_replay, ag_replay_create(ctx, f, 1, 4, AG_F32, 1, &out_));
  const int64_t sizes[2] = {3, 0};
  UNTOUCHED(ag_mlp, ag_mlp_create(ctx, sizes, 2, AG_ACT_RELU, AG_ACT_NONE, 1, &out_));
  UNTOUCHED(ag_mlp, ag_mlp_load(ctx, "/nonexistent/q.agrl", &out_));
  ag_dqn_config c = ag_dqn_defaults();
  c.gamma = 2;
  UNTOUCHED(ag_dqn, ag_dqn_create(ctx, 3, 2, 100, &c, &out_));
  UNTOUCHED(ag_env, ag_env_create("nope", &out_));
  UNTOUCHED(ag_vec_env, ag_vec_env_create("cartpole", 0, 1, &out_));
  UNTOUCHED(void, ag_host_alloc(ctx, 0, &out_));
  ag_buffer *b;
  agt_ok(ag_buffer_create(ctx, 2, 4, AG_F32, &b));
  const int64_t bad_idx[1] = {4};
  UNTOUCHED(ag_tensor, ag_get_rows(b, bad_idx, 1, &out_));
  /* every constructor under an allocation fault at each occurrence */
  for (int kind = 0; kind < 2; kind++)
    for (int64_t n = 0; n < 64; n++) {
      ag_fault k = kind ? AG_FAULT_HOST_ALLOC : AG_FAULT_ALLOC;
      ag_dqn *d = (ag_dqn *)sentinel;
      ag_dqn_config cc = tiny_config(1);
      agt_ok(ag_ctx_inject_fault(ctx, k, n));
      ag_status s = ag_dqn_create(ctx, 3, 2, 100, &cc, &d);
      ag_ctx_inject_fault(ctx, k, -1);
      if (s)
        assert_ptr_equal(d, sentinel);
      else
        ag_dqn_free(d);
    }
#undef UNTOUCHED
  ag_ctx_free(ctx);
}

static void messages_name_the_call_and_the_choice(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b;
  agt_ok(ag_buffer_create(ctx, 2, 4, AG_F32, &b));
  const uint8_t d[2] = {1, 2};
  agt_err(ag_buffer_write(b, d, AG_U8, 2, 1, 0), AG_ERR_SHAPE, "(give f32)");
  uint8_t out[8];
  agt_err(ag_buffer_read(b, 0, 1, AG_U8, out, sizeof out), AG_ERR_SHAPE, "(ask for f32)");
  ag_buffer *h;
  agt_ok(ag_buffer_create(ctx, 2, 4, AG_F16, &h));
  agt_err(ag_buffer_write(h, d, AG_U8, 2, 1, 0), AG_ERR_SHAPE, "(give f16 or f32)");
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(row_views_read_and_write_their_own_elements),
      cmocka_unit_test(a_field_view_of_a_batch_reads_that_field),
      cmocka_unit_test(integer_views_keep_the_gaps),
      cmocka_unit_test(i64_fields_reach_i32_storage_exactly),
      cmocka_unit_test(host_alloc_refuses_sizes_that_wrap),
      cmocka_unit_test(a_failed_add_changes_nothing),
      cmocka_unit_test(a_failed_add_keeps_the_size),
      cmocka_unit_test(a_failed_train_changes_nothing),
      cmocka_unit_test(a_failed_act_changes_nothing),
      cmocka_unit_test(a_failed_backward_leaves_zeroed_gradients),
      cmocka_unit_test(half_written_objects_refuse_further_use),
      cmocka_unit_test(constructors_leave_out_untouched_on_error),
      cmocka_unit_test(messages_name_the_call_and_the_choice),
  };
  return agt_run(argc, argv, "atomic", tests, sizeof tests / sizeof tests[0]);
}
