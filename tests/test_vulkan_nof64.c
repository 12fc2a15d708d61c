/* test_vulkan_nof64.c — a Vulkan context as on a device without
 * shaderFloat64 (AGRL_VK_NO_F64=1, set here before the first context).
 *
 * The kernels that compute in doubles, RANDN and the prioritized-replay
 * tree's PER_SET, PER_FILL and PER_SAMPLE, are refused with
 * AG_ERR_UNSUPPORTED and change nothing: a stream refused a draw gives the
 * CPU's numbers afterwards, a table refused a sampler stays a uniform
 * table, a prioritized frame table is refused before anything is made.
 * The kernels without doubles still run there and give the CPU's results
 * bit for bit (draws, gathers, uniform sampling, frame stacks).
 *
 * Runs on the vulkan device only, with the validation layer on as every
 * vulkan run (agt.c). Without a usable Vulkan device it is skipped, or
 * fails with AGRL_REQUIRE_VULKAN=1.
 */
#include <unistd.h>

#include "agt.h"

static ag_ctx *cpu_ctx(void) {
  ag_ctx *ctx = NULL;
  agt_ok(ag_ctx_create(&ctx, AG_DEVICE_CPU, 0));
  return ctx;
}

/* A refusal of the device's own: AG_ERR_UNSUPPORTED with a message from the Vulkan backend, or
 * one that names the missing feature. */
static void assert_refused(ag_status s, const char *what) {
  if (s != AG_ERR_UNSUPPORTED)
    fail_msg("%s returned %s, not AG_ERR_UNSUPPORTED (message: %s)", what, ag_status_name(s),
             ag_last_error());
  const char *m = strstr(ag_last_error(), "vulkan: ");
  if (!m) m = strstr(ag_last_error(), "shaderFloat64");
  if (!m || strlen(m) < 13)
    fail_msg("%s: the message \"%s\" does not say what the device refused", what, ag_last_error());
}

/* n draws in [0, bound) from each stream: the same values, as i64. */
static void same_draws(ag_rng *dev, ag_rng *cpu, int64_t bound, int64_t n, ag_dtype dtype) {
  ag_tensor *a, *b;
  agt_ok(ag_randint(dev, bound, n, dtype, &a));
  agt_ok(ag_randint(cpu, bound, n, dtype, &b));
  const size_t bytes = (size_t)n * ag_dtype_size(dtype);
  unsigned char *x = malloc(bytes), *y = malloc(bytes);
  assert_true(x && y);
  agt_ok(ag_tensor_read(a, x, bytes));
  agt_ok(ag_tensor_read(b, y, bytes));
  for (int64_t i = 0; i < n; i++) {
    const int64_t u = dtype == AG_I32 ? ((int32_t *)x)[i] : ((int64_t *)x)[i];
    const int64_t v = dtype == AG_I32 ? ((int32_t *)y)[i] : ((int64_t *)y)[i];
    if (u != v || u < 0 || u >= bound)
      fail_msg("draw %lld of %lld (%s, bound %lld): %lld on vulkan, %lld on the cpu", (long long)i,
               (long long)n, ag_dtype_name(dtype), (long long)bound, (long long)u, (long long)v);
  }
  free(x);
  free(y);
}

/* A step that draws from the stream, then asks for normal values. */
static ag_status draw_then_randn(ag_ctx *ctx, void *user) {
  (void)ctx;
  ag_tensor *a, *b;
  ag_status s = ag_randint(user, 100, 8, AG_I64, &a);
  return s ? s : ag_randn(user, 8, 1, &b);
}

static void randn_is_refused_and_the_stream_does_not_move(void **state) {
  (void)state;
  ag_ctx *v = agt_ctx(), *c = cpu_ctx();
  ag_rng *rv, *rc;
  agt_ok(ag_rng_create(v, 7, &rv));
  agt_ok(ag_rng_create(c, 7, &rc));
  ag_tensor *out = NULL;
  ag_clear_error();
  assert_refused(ag_randn(rv, 4, 5, &out), "ag_randn (20 values)");
  assert_null(out);
  same_draws(rv, rc, 1000, 37, AG_I64); /* from counter 0 on both: the refusal moved nothing */
  assert_refused(ag_randn(rv, 100, 100, &out), "ag_randn (10^4 values, many work groups)");
  assert_null(out);
  same_draws(rv, rc, (int64_t)1 << 20, 5000, AG_I32); /* many work groups, then the counter's own dispatch */
  agt_ok(ag_rng_set_counter(rv, 123456789));
  agt_ok(ag_rng_set_counter(rc, 123456789));
  assert_refused(ag_randn(rv, 1, 1, &out), "ag_randn (1 value)");
  assert_null(out);
  same_draws(rv, rc, 3, 11, AG_I64);
  /* a step that asks for normal values is not recorded, and its earlier draw never runs */
  ag_capture *cap = NULL;
  assert_refused(ag_capture_create(v, draw_then_randn, rv, &cap), "ag_capture_create (a step with ag_randn)");
  assert_null(cap);
  same_draws(rv, rc, 100, 8, AG_I64);
  /* the CPU's stream draws normal values; the device's still gives the CPU's integers after it */
  agt_ok(ag_randn(rc, 3, 2, &out));
  agt_ok(ag_rng_set_counter(rv, 123456789 + 11 + 8 + 6));
  same_draws(rv, rc, 1 << 30, 3000, AG_I64);
  ag_rng_free(rv);
  ag_rng_free(rc);
  ag_ctx_free(v);
  ag_ctx_free(c);
}

enum { OBS = 2, CAP = 64 };
static const ag_field fields[2] = {{"obs", OBS, AG_F32}, {"reward", 1, AG_F32}};

/* Appends k transitions, transition t's values from t0 + t on. */
static ag_status add(ag_replay *r, int64_t t0, int64_t k) {
  float obs[CAP * OBS], rew[CAP];
  for (int64_t t = 0; t < k; t++) {
    obs[t * OBS] = (float)(t0 + t);
    obs[t * OBS + 1] = -0.5f * (float)(t0 + t);
    rew[t] = 0.25f * (float)(t0 + t);
  }
  const void *data[2] = {obs, rew};
  return ag_replay_add(r, data, k);
}

static void prioritized_sampling_is_refused(void **state) {
  (void)state;
  ag_ctx *v = agt_ctx(), *c = cpu_ctx();
  /* a table that holds transitions: the sampler is refused; the table stays as it was, uniform, on
   * par with the same table on the CPU */
  ag_replay *r, *rc;
  agt_ok(ag_replay_create(v, fields, 2, CAP, AG_F32, 1, &r));
  agt_ok(ag_replay_create(c, fields, 2, CAP, AG_F32, 1, &rc));
  agt_ok(add(r, 0, 10));
  agt_ok(add(rc, 0, 10));
  ag_per *per = NULL;
  assert_refused(ag_per_create(r, 0.6f, &per), "ag_per_create (10 transitions)");
  assert_null(per);
  assert_null(ag_replay_per(r));
  assert_int_equal(ag_replay_size(r), 10);
  agt_ok(add(r, 10, 5));
  agt_ok(add(rc, 10, 5));
  assert_int_equal(ag_replay_size(r), 15);
  assert_int_equal(ag_replay_position(r), 15);
  ag_rng *rv, *rr;
  agt_ok(ag_rng_create(v, 99, &rv));
  agt_ok(ag_rng_create(c, 99, &rr));
  ag_tensor *bv, *iv, *bc, *ic;
  agt_ok(ag_replay_sample(r, rv, 40, &bv, &iv));
  agt_ok(ag_replay_sample(rc, rr, 40, &bc, &ic));
  float *xv = agt_read_f32(bv), *xc = agt_read_f32(bc);
  assert_memory_equal(xv, xc, sizeof(float) * (OBS + 1) * 40);
  for (int j = 0; j < 40; j++) /* each column a stored transition: obs[0] = t, reward = t / 4 */
    assert_true(xv[j * 3] >= 0 && xv[j * 3] < 15 && xv[j * 3 + 2] == 0.25f * xv[j * 3]);
  free(xv);
  free(xc);
  ag_rng_free(rr);
  ag_replay_free(rc);
  ag_replay_free(r);

  /* an empty table: refused up front too (no table comes to depend on the tree's kernels), and it
   * stays a uniform table that takes adds and samples */
  agt_ok(ag_replay_create(v, fields, 2, CAP, AG_F32, 1, &r));
  per = NULL;
  assert_refused(ag_per_create(r, 0.6f, &per), "ag_per_create");
  assert_null(per);
  assert_null(ag_replay_per(r));
  assert_int_equal(ag_replay_size(r), 0);
  agt_ok(add(r, 0, 4));
  assert_int_equal(ag_replay_size(r), 4);
  agt_ok(ag_replay_sample(r, rv, 8, &bv, &iv));
  xv = agt_read_f32(bv);
  for (int j = 0; j < 8; j++)
    assert_true(xv[j * 3] >= 0 && xv[j * 3] < 4 && xv[j * 3 + 2] == 0.25f * xv[j * 3]);
  free(xv);
  /* a DQN with prioritized replay is refused at creation, not at its first store; without, it is made */
  ag_dqn_config cfg = ag_dqn_defaults();
  cfg.per = 1;
  ag_dqn *d = NULL;
  assert_refused(ag_dqn_create(v, 4, 2, 1000, &cfg, &d), "ag_dqn_create (per = 1)");
  assert_null(d);
  cfg.per = 0;
  agt_ok(ag_dqn_create(v, 4, 2, 1000, &cfg, &d));
  ag_dqn_free(d);
  ag_rng_free(rv);
  ag_replay_free(r);
  ag_ctx_free(v);
  ag_ctx_free(c);
}

/* rows x cap values of a buffer: column j, row i = j - 20 + i / 4 (exact in f16 too). */
static void columns(float *d, int64_t rows, int64_t cap) {
  for (int64_t j = 0; j < cap; j++)
    for (int64_t i = 0; i < rows; i++) d[j * rows + i] = (float)(j - 20) + (float)i / 4.0f;
}

static void kernels_without_doubles_give_the_cpus_results(void **state) {
  (void)state;
  ag_ctx *v = agt_ctx(), *c = cpu_ctx();
  ag_rng *rv, *rc;
  agt_ok(ag_rng_create(v, 2024, &rv));
  agt_ok(ag_rng_create(c, 2024, &rc));
  /* draws: one work group and many, both dtypes, a bound beyond 2^32 */
  same_draws(rv, rc, 6, 1, AG_I32);
  same_draws(rv, rc, 1000, 4096, AG_I32);
  same_draws(rv, rc, 1000, 4097, AG_I64);
  same_draws(rv, rc, (int64_t)1 << 40, 10000, AG_I64);
  /* the bound read on the device */
  const int64_t bound = 37;
  ag_tensor *bv, *bc, *dv, *dc;
  agt_ok(ag_tensor_create(v, 1, 1, AG_I64, &bound, &bv));
  agt_ok(ag_tensor_create(c, 1, 1, AG_I64, &bound, &bc));
  agt_ok(ag_randint_dev(rv, bv, 500, AG_I32, &dv));
  agt_ok(ag_randint_dev(rc, bc, 500, AG_I32, &dc));
  int32_t xv[500], xc[500];
  agt_ok(ag_tensor_read(dv, xv, sizeof xv));
  agt_ok(ag_tensor_read(dc, xc, sizeof xc));
  assert_memory_equal(xv, xc, sizeof xv);
  for (int i = 0; i < 500; i++) assert_true(xv[i] >= 0 && xv[i] < bound);
  /* a buffer written and read back, gathered by host and by device indices, f32 and f16 storage */
  enum { ROWS = 5, BCAP = 300 };
  float *d = malloc(sizeof(float) * ROWS * BCAP), *back = malloc(sizeof(float) * ROWS * BCAP);
  assert_true(d && back);
  columns(d, ROWS, BCAP);
  const ag_dtype dts[2] = {AG_F32, AG_F16};
  for (int k = 0; k < 2; k++) {
    ag_buffer *b, *bcpu;
    agt_ok(ag_buffer_create(v, ROWS, BCAP, dts[k], &b));
    agt_ok(ag_buffer_create(c, ROWS, BCAP, dts[k], &bcpu));
    agt_ok(ag_buffer_write(b, d, AG_F32, ROWS, BCAP - 10, 10));
    agt_ok(ag_buffer_write(bcpu, d, AG_F32, ROWS, BCAP - 10, 10));
    agt_ok(ag_buffer_read(b, 10, BCAP - 10, AG_F32, back, sizeof(float) * ROWS * BCAP));
    assert_memory_equal(back, d, sizeof(float) * ROWS * (BCAP - 10)); /* exact in f16 too */
    const int64_t idx[7] = {10, 299, 10, 0, 150, 9, 42};
    ag_tensor *gv, *gc;
    agt_ok(ag_get_rows(b, idx, 7, &gv));
    agt_ok(ag_get_rows(bcpu, idx, 7, &gc));
    float *a = agt_read_f32(gv), *e = agt_read_f32(gc);
    assert_memory_equal(a, e, sizeof(float) * ROWS * 7);
    for (int j = 0; j < 7; j++)
      for (int i = 0; i < ROWS; i++) {
        const float want = idx[j] < 10 ? 0.0f : d[(idx[j] - 10) * ROWS + i];
        if (a[j * ROWS + i] != want)
          fail_msg("gathered column %d row %d: %g, not %g", j, i, a[j * ROWS + i], want);
      }
    free(a);
    free(e);
    ag_tensor *iv, *ic; /* device indices drawn on each device: the same columns */
    agt_ok(ag_randint(rv, BCAP, 64, AG_I32, &iv));
    agt_ok(ag_randint(rc, BCAP, 64, AG_I32, &ic));
    agt_ok(ag_get_rows_dev(b, iv, &gv));
    agt_ok(ag_get_rows_dev(bcpu, ic, &gc));
    a = agt_read_f32(gv), e = agt_read_f32(gc);
    assert_memory_equal(a, e, sizeof(float) * ROWS * 64);
    free(a);
    free(e);
    ag_buffer_free(b);
    ag_buffer_free(bcpu);
  }
  free(d);
  free(back);
  ag_rng_free(rv);
  ag_rng_free(rc);
  ag_ctx_free(v);
  ag_ctx_free(c);
}

/* Frame tables: the stacking gather has no doubles, so an unprioritized
 * table runs and draws the CPU's transitions and stacks; a prioritized one
 * is refused at creation, and a prioritized table's file at load, with
 * nothing left allocated. */
static void frame_tables_run_and_prioritized_ones_are_refused(void **state) {
  (void)state;
  ag_ctx *v = agt_ctx(), *c = cpu_ctx();
  const ag_field f[2] = {{"action", 1, AG_I64}, {"reward", 1, AG_F32}};
  ag_frames_config cfg = {3, 2, 1, 3, 2, 30, 0, 1, 0.6f};
  ag_frames *tv = NULL, *tc = NULL;
  const uint64_t live = agt_live_bytes(v);
  assert_refused(ag_frames_create(v, &cfg, f, 2, AG_F32, &tv), "ag_frames_create (prioritized)");
  assert_null(tv);
  assert_int_equal(agt_live_bytes(v), live);
  /* a prioritized table's file, written on the CPU, refused at load */
  agt_ok(ag_frames_create(c, &cfg, f, 2, AG_F32, &tc));
  uint8_t px[40 * 6], first[40];
  int64_t act[40];
  float rew[40];
  for (int i = 0; i < 40; i++) {
    first[i] = i < 2 || i % 7 == 0;
    act[i] = i, rew[i] = 0.5f * (float)i;
    for (int b = 0; b < 6; b++) px[i * 6 + b] = (uint8_t)(i * 31 + b * 7);
  }
  const void *data[2] = {act, rew};
  agt_ok(ag_frames_add(tc, px, first, data, 12));
  char path[] = "/tmp/agrl_nof64_framesXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  agt_ok(ag_frames_save(tc, path));
  assert_refused(ag_frames_load(v, path, &tv), "ag_frames_load (a prioritized table)");
  assert_null(tv);
  assert_int_equal(agt_live_bytes(v), live);
  unlink(path);
  ag_frames_free(tc);
  /* unprioritized: the same adds, the same draws and stacks on both */
  cfg.prioritized = 0;
  agt_ok(ag_frames_create(v, &cfg, f, 2, AG_F32, &tv));
  agt_ok(ag_frames_create(c, &cfg, f, 2, AG_F32, &tc));
  for (int k = 0; k < 2; k++) {
    agt_ok(ag_frames_add(tv, px, first, data, 12));
    agt_ok(ag_frames_add(tc, px, first, data, 12));
  }
  ag_rng *rv, *rc;
  agt_ok(ag_rng_create(v, 8, &rv));
  agt_ok(ag_rng_create(c, 8, &rc));
  const ag_dtype dts[2] = {AG_U8, AG_F32};
  for (int k = 0; k < 2; k++) {
    ag_tensor *ov, *nv, *iv, *oc, *nc, *ic;
    agt_ok(ag_frames_sample(tv, rv, 50, dts[k], &ov, &nv, NULL, &iv));
    agt_ok(ag_frames_sample(tc, rc, 50, dts[k], &oc, &nc, NULL, &ic));
    int64_t a[50], b[50];
    agt_ok(ag_tensor_read(iv, a, sizeof a));
    agt_ok(ag_tensor_read(ic, b, sizeof b));
    assert_memory_equal(a, b, sizeof a);
    const size_t bytes = (size_t)(50 * 18) * ag_dtype_size(dts[k]);
    unsigned char *x = malloc(bytes), *y = malloc(bytes);
    assert_true(x && y);
    agt_ok(ag_tensor_read(nv, x, bytes));
    agt_ok(ag_tensor_read(nc, y, bytes));
    assert_memory_equal(x, y, bytes);
    free(x);
    free(y);
  }
  ag_rng_free(rv);
  ag_rng_free(rc);
  ag_frames_free(tv);
  ag_frames_free(tc);
  ag_ctx_free(v);
  ag_ctx_free(c);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "vulkan") != 0) {
    fprintf(stderr, "usage: %s vulkan [TEST-NAME-PATTERN] (a test of the Vulkan backend only)\n", argv[0]);
    return 2;
  }
  setenv("AGRL_VK_NO_F64", "1", 1); /* before the first Vulkan context of the process */
  static char vulkan[] = "vulkan";
  char *args[3] = {argv[0], vulkan, argc > 2 ? argv[2] : NULL};
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(randn_is_refused_and_the_stream_does_not_move),
      cmocka_unit_test(prioritized_sampling_is_refused),
      cmocka_unit_test(kernels_without_doubles_give_the_cpus_results),
      cmocka_unit_test(frame_tables_run_and_prioritized_ones_are_refused),
  };
  return agt_run(argc > 2 ? 3 : 2, args, "vulkan_nof64", tests, sizeof tests / sizeof tests[0]);
}
