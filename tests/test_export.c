/* test_export.c — agrl/export.h: blocks that outlive the workspace and the
 * context, temporaries carved out of them, tensors over foreign memory, the
 * device writes (against the host writes of the same values), ordering and
 * deferred calls. */
#include <math.h>

#include "agt.h"

static ag_buffer *filled_buffer(ag_ctx *ctx, int64_t rows, int64_t cap, float *host) {
  ag_buffer *b;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  for (int64_t i = 0; i < rows * cap; i++) host[i] = (float)i * 0.5f - 7.0f;
  agt_ok(ag_buffer_write(b, host, AG_F32, rows, cap, 0));
  return b;
}

/* Reads n floats at device address p through a tensor over it on ctx. */
static void read_at(ag_ctx *ctx, void *p, int64_t rows, int64_t cols, float *out) {
  ag_tensor *t;
  agt_ok(ag_tensor_wrap(ctx, p, rows, cols, rows, AG_F32, &t));
  agt_ok(ag_tensor_read(t, out, (size_t)(rows * cols) * sizeof *out));
}

static void a_gather_into_a_block_outlives_the_context(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *other = agt_ctx();
  float host[5 * 40], got[5 * 3];
  ag_buffer *buf = filled_buffer(ctx, 5, 40, host);
  ag_block *blk;
  agt_ok(ag_block_create(ctx, 4096, &blk));
  assert_true(ag_block_size(blk) >= 4096);
  int index = -1;
  assert_int_equal(ag_block_device(blk, &index), ag_ctx_device(ctx));
  agt_ok(ag_ctx_use_block(ctx, blk));
  const int64_t idx[3] = {39, 0, 17};
  ag_tensor *rows;
  agt_ok(ag_get_rows(buf, idx, 3, &rows));
  assert_true(ag_ctx_block_used(ctx) >= 5 * 3 * sizeof(float));
  agt_ok(ag_ctx_use_block(ctx, NULL));
  void *p;
  int64_t ld;
  agt_ok(ag_tensor_data(rows, &p, &ld));
  assert_int_equal(ld, 5);
  char *b0 = ag_block_data(blk);
  assert_true((char *)p >= b0 && (char *)p + 60 <= b0 + ag_block_size(blk));
  /* the workspace, the buffer and the context go; the values stay */
  ag_ctx_reset(ctx);
  ag_buffer_free(buf);
  ag_ctx_free(ctx);
  read_at(other, p, 5, 3, got);
  for (int j = 0; j < 3; j++)
    for (int r = 0; r < 5; r++) assert_true(got[j * 5 + r] == host[idx[j] * 5 + r]);
  ag_block_release(blk, NULL);
  ag_ctx_free(other);
}

static void a_temporary_that_does_not_fit_the_block_fails_and_changes_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  float host[64 * 100];
  ag_buffer *buf = filled_buffer(ctx, 64, 100, host);
  ag_block *blk;
  agt_ok(ag_block_create(ctx, 100, &blk)); /* 4096 bytes: 16 columns of 64 floats */
  agt_ok(ag_ctx_use_block(ctx, blk));
  int64_t idx[20] = {0};
  ag_tensor *t = NULL;
  agt_err(ag_get_rows(buf, idx, 20, &t), AG_ERR_OUT_OF_MEMORY, "does not fit in the block");
  assert_null(t);
  agt_ok(ag_get_rows(buf, idx, 10, &t)); /* 2560 bytes fit */
  agt_ok(ag_ctx_use_block(ctx, NULL));
  agt_ok(ag_get_rows(buf, idx, 20, &t)); /* the workspace again */
  float got[64 * 20];
  agt_ok(ag_tensor_read(t, got, sizeof got));
  assert_true(got[64 * 19 + 63] == host[63]);
  ag_block_release(blk, NULL);
  ag_ctx_free(ctx);
}

static void released_blocks_are_reused_and_counted(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ctx_stats s0, s1;
  ag_ctx_get_stats(ctx, &s0);
  ag_block *a, *b, *c;
  agt_ok(ag_block_create(ctx, 10000, &a));
  void *pa = ag_block_data(a);
  ag_block_retain(a);
  ag_block_release(a, NULL); /* still one reference */
  ag_block_release(a, NULL); /* back to the pool */
  agt_ok(ag_block_create(ctx, 9000, &b));
  assert_ptr_equal(ag_block_data(b), pa);
  agt_ok(ag_block_create(ctx, 9000, &c)); /* the cached one is taken: a new one */
  assert_ptr_not_equal(ag_block_data(c), pa);
  ag_ctx_get_stats(ctx, &s1);
  assert_int_equal(s1.allocs - s0.allocs, 2);
  /* an injected allocation fault: nothing is handed out */
  ag_block *d = NULL;
  agt_ok(ag_ctx_inject_fault(ctx, AG_FAULT_ALLOC, 0));
  agt_err(ag_block_create(ctx, 1 << 20, &d), AG_ERR_OUT_OF_MEMORY, "injected");
  assert_null(d);
  agt_err(ag_block_create(ctx, 0, &d), AG_ERR_INVALID_ARG, "bytes = 0");
  agt_err(ag_block_create(ctx, SIZE_MAX / 2, &d), AG_ERR_INVALID_ARG, "more than");
  assert_null(d);
  ag_ctx_free(ctx); /* b and c outlive it */
  ag_block_release(c, NULL);
  ag_block_release(b, NULL);
  ag_block_release(NULL, NULL);
}

/* What a host write stores, by the device rule for values out of range. */
static uint8_t u8_rule(float v) {
  if (v != v) return 0;
  double r = rint((double)v);
  return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

static void device_writes_store_what_host_writes_store(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const int64_t rows = 3, k = 7;
  float src[3 * 7];
  for (int i = 0; i < rows * k; i++) src[i] = (float)i * 0.37f - 2.0f;
  ag_dtype kinds[] = {AG_F32, AG_F16, AG_BF16, AG_U8, AG_I32};
  for (size_t d = 0; d < sizeof kinds / sizeof kinds[0]; d++) {
    ag_buffer *host_b, *dev_b;
    agt_ok(ag_buffer_create(ctx, rows, 20, kinds[d], &host_b));
    agt_ok(ag_buffer_create(ctx, rows, 20, kinds[d], &dev_b));
    float in[3 * 7];
    for (int i = 0; i < rows * k; i++)
      in[i] = kinds[d] == AG_U8 || kinds[d] == AG_I32 ? rintf(src[i] + 3) : src[i];
    agt_ok(ag_buffer_write(host_b, in, AG_F32, rows, k, 11));
    ag_tensor *t;
    agt_ok(ag_tensor_create(ctx, rows, k, AG_F32, in, &t));
    void *p;
    agt_ok(ag_tensor_data(t, &p, NULL));
    ag_tensor *w;
    agt_ok(ag_tensor_wrap(ctx, p, rows, k, rows, AG_F32, &w));
    uint64_t up0, up1;
    ag_xfer_total(ctx, &up0, NULL);
    agt_ok(ag_buffer_write_dev(dev_b, w, 11));
    ag_xfer_total(ctx, &up1, NULL);
    assert_int_equal(up1, up0);
    unsigned char a[3 * 20 * 4], b[3 * 20 * 4];
    size_t bytes = (size_t)(rows * 20) * ag_dtype_size(kinds[d]);
    agt_ok(ag_buffer_read(host_b, 0, 20, kinds[d], a, sizeof a));
    agt_ok(ag_buffer_read(dev_b, 0, 20, kinds[d], b, sizeof b));
    assert_memory_equal(a, b, bytes);
    ag_tensor_free(t);
    ag_buffer_free(host_b);
    ag_buffer_free(dev_b);
  }
  /* values that u8 cannot hold saturate (the host write refuses them) */
  ag_buffer *u8;
  agt_ok(ag_buffer_create(ctx, 1, 6, AG_U8, &u8));
  const float wild[6] = {-5.0f, 300.0f, 2.5f, 3.5f, NAN, 254.6f};
  ag_tensor *t;
  agt_ok(ag_tensor_create(ctx, 1, 6, AG_F32, wild, &t));
  agt_err(ag_buffer_write(u8, wild, AG_F32, 1, 6, 0), AG_ERR_OUT_OF_RANGE, "does not fit");
  agt_ok(ag_buffer_write_dev(u8, t, 0));
  uint8_t got[6];
  agt_ok(ag_buffer_read(u8, 0, 6, AG_U8, got, sizeof got));
  for (int i = 0; i < 6; i++) assert_int_equal(got[i], u8_rule(wild[i]));
  /* bad input */
  agt_err(ag_buffer_write_dev(u8, t, 1), AG_ERR_OUT_OF_RANGE, "outside the buffer");
  agt_err(ag_buffer_write_dev(u8, t, -1), AG_ERR_OUT_OF_RANGE, "col_offset");
  agt_err(ag_buffer_write_dev(u8, NULL, 0), AG_ERR_INVALID_ARG, "src is NULL");
  ag_tensor *t2;
  agt_ok(ag_tensor_create(ctx, 2, 1, AG_F32, NULL, &t2));
  agt_err(ag_buffer_write_dev(u8, t2, 0), AG_ERR_SHAPE, "rows");
  ag_tensor *w;
  float dummy[4];
  agt_err(ag_tensor_wrap(ctx, dummy, 4, 1, 3, AG_F32, &w), AG_ERR_INVALID_ARG, "ld");
  agt_err(ag_tensor_wrap(ctx, (char *)dummy + 1, 1, 1, 1, AG_F32, &w), AG_ERR_INVALID_ARG, "aligned");
  agt_err(ag_tensor_wrap(ctx, dummy, 1, 1, 1, (ag_dtype)9, &w), AG_ERR_INVALID_ARG, "dtype");
  agt_err(ag_tensor_wrap(ctx, dummy, 1, INT64_MAX, INT64_MAX, AG_F32, &w), AG_ERR_INVALID_ARG, "overflow");
  ag_buffer_free(u8);
  agt_err(ag_buffer_write_dev(u8, t, 0), AG_ERR_FREED, "freed");
  ag_ctx_free(ctx);
}

/* Two tables of the same fields: one filled from host arrays, one from
 * device tensors; contents, size, position and priorities agree. */
static void a_device_add_matches_the_host_add_across_the_wrap(void **state) {
  (void)state;
  ag_dtype storages[] = {AG_F32, AG_U8};
  for (size_t si = 0; si < 2; si++) {
    ag_ctx *ctx = agt_ctx();
    const ag_field fields[3] = {{"obs", 3, AG_F32}, {"action", 1, AG_I32}, {"reward", 1, AG_F32}};
    ag_replay *rh, *rd;
    agt_ok(ag_replay_create(ctx, fields, 3, 10, storages[si], 1, &rh));
    agt_ok(ag_replay_create(ctx, fields, 3, 10, storages[si], 1, &rd));
    ag_per *ph, *pd;
    agt_ok(ag_per_create(rh, 0.6f, &ph));
    agt_ok(ag_per_create(rd, 0.6f, &pd));
    const int64_t batches[3] = {4, 5, 7}; /* 4, 9, 16: the third wraps */
    for (int bi = 0; bi < 3; bi++) {
      const int64_t k = batches[bi];
      float obs[3 * 7], rew[7];
      int32_t act[7];
      for (int j = 0; j < k; j++) {
        for (int r = 0; r < 3; r++) obs[j * 3 + r] = (float)(bi * 40 + j * 3 + r);
        act[j] = (int32_t)(j % 3);
        rew[j] = (float)(j + bi);
      }
      const void *data[3] = {obs, act, rew};
      agt_ok(ag_replay_add(rh, data, k));
      ag_tensor *to, *ta, *tr;
      agt_ok(ag_tensor_create(ctx, 3, k, AG_F32, obs, &to));
      agt_ok(ag_tensor_create(ctx, 1, k, AG_I32, act, &ta));
      agt_ok(ag_tensor_create(ctx, 1, k, AG_F32, rew, &tr));
      ag_tensor *dev[3];
      void *p;
      agt_ok(ag_tensor_data(to, &p, NULL));
      agt_ok(ag_tensor_wrap(ctx, p, 3, k, 3, AG_F32, &dev[0]));
      agt_ok(ag_tensor_data(ta, &p, NULL));
      agt_ok(ag_tensor_wrap(ctx, p, 1, k, 1, AG_I32, &dev[1]));
      dev[2] = tr; /* a persistent tensor is taken as it is */
      uint64_t up0, up1;
      ag_xfer_total(ctx, &up0, NULL);
      agt_ok(ag_replay_add_dev(rd, dev, k));
      ag_xfer_total(ctx, &up1, NULL);
      assert_int_equal(up1, up0);
      ag_tensor_free(to);
      ag_tensor_free(ta);
      ag_tensor_free(tr);
      ag_ctx_reset(ctx);
      assert_int_equal(ag_replay_size(rd), ag_replay_size(rh));
      assert_int_equal(ag_replay_position(rd), ag_replay_position(rh));
    }
    float a[5 * 10], b[5 * 10];
    agt_ok(ag_buffer_read(ag_replay_buffer(rh), 0, 10, AG_F32, a, sizeof a));
    agt_ok(ag_buffer_read(ag_replay_buffer(rd), 0, 10, AG_F32, b, sizeof b));
    assert_memory_equal(a, b, sizeof a);
    int64_t sh, sd;
    agt_ok(ag_tensor_read(ag_replay_size_tensor(rh), &sh, sizeof sh));
    agt_ok(ag_tensor_read(ag_replay_size_tensor(rd), &sd, sizeof sd));
    assert_int_equal(sh, 10);
    assert_int_equal(sd, 10);
    double th, td;
    agt_ok(ag_per_total(ph, &th));
    agt_ok(ag_per_total(pd, &td));
    assert_true(th == td);
    /* bad input changes nothing */
    ag_tensor *bad[3];
    agt_ok(ag_tensor_create(ctx, 2, 2, AG_F32, NULL, &bad[0]));
    agt_ok(ag_tensor_create(ctx, 1, 2, AG_I32, NULL, &bad[1]));
    agt_ok(ag_tensor_create(ctx, 1, 2, AG_F32, NULL, &bad[2]));
    agt_err(ag_replay_add_dev(rd, bad, 2), AG_ERR_SHAPE, "'obs'");
    agt_err(ag_replay_add_dev(rd, bad, 11), AG_ERR_OUT_OF_RANGE, "do not fit");
    agt_err(ag_replay_add_dev(rd, bad, -1), AG_ERR_INVALID_ARG, "negative");
    agt_err(ag_replay_add_dev(rd, NULL, 2), AG_ERR_INVALID_ARG, "data is NULL");
    bad[0] = NULL;
    agt_err(ag_replay_add_dev(rd, bad, 2), AG_ERR_INVALID_ARG, "'obs' is NULL");
    assert_int_equal(ag_replay_position(rd), ag_replay_position(rh));
    agt_ok(ag_buffer_read(ag_replay_buffer(rd), 0, 10, AG_F32, b, sizeof b));
    assert_memory_equal(a, b, sizeof a);
    ag_replay_free(rh);
    ag_replay_free(rd);
    ag_ctx_free(ctx);
  }
}

/* A large host batch goes across field by field and is interleaved on the
 * device: the table holds what the host path of a CPU context holds. */
static void a_large_host_add_matches_the_cpu_table(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu;
  agt_ok(ag_ctx_create(&cpu, AG_DEVICE_CPU, 0));
  const ag_field fields[3] = {{"obs", 3, AG_F32}, {"action", 1, AG_I32}, {"flag", 1, AG_U8}};
  const int64_t cap = 100000, k1 = 70000, k2 = 60000; /* 1.4 MB each; the second wraps */
  ag_replay *rd, *rc;
  agt_ok(ag_replay_create(ctx, fields, 3, cap, AG_F32, 1, &rd));
  agt_ok(ag_replay_create(cpu, fields, 3, cap, AG_F32, 1, &rc));
  float *obs = malloc(sizeof(float) * 3 * (size_t)k1);
  int32_t *act = malloc(sizeof(int32_t) * (size_t)k1);
  uint8_t *flag = malloc((size_t)k1);
  for (int rep = 0; rep < 2; rep++) {
    const int64_t k = rep ? k2 : k1;
    for (int64_t j = 0; j < k; j++) {
      for (int r = 0; r < 3; r++) obs[j * 3 + r] = (float)(j * 3 + r) * 0.25f + (float)rep;
      act[j] = (int32_t)(j % 7) - 3;
      flag[j] = (uint8_t)(j % 2);
    }
    const void *data[3] = {obs, act, flag};
    uint64_t up0, up1;
    ag_xfer_total(ctx, &up0, NULL);
    agt_ok(ag_replay_add(rd, data, k));
    ag_xfer_total(ctx, &up1, NULL);
    assert_true(up1 - up0 <= (uint64_t)(k * 5 * 4 + 8)); /* no more than the storage bytes */
    agt_ok(ag_replay_add(rc, data, k));
    assert_int_equal(ag_replay_size(rd), ag_replay_size(rc));
    assert_int_equal(ag_replay_position(rd), ag_replay_position(rc));
  }
  float *a = malloc(sizeof(float) * 5 * (size_t)cap), *b = malloc(sizeof(float) * 5 * (size_t)cap);
  agt_ok(ag_buffer_read(ag_replay_buffer(rd), 0, cap, AG_F32, a, sizeof(float) * 5 * (size_t)cap));
  agt_ok(ag_buffer_read(ag_replay_buffer(rc), 0, cap, AG_F32, b, sizeof(float) * 5 * (size_t)cap));
  assert_memory_equal(a, b, sizeof(float) * 5 * (size_t)cap);
  int64_t sd;
  agt_ok(ag_tensor_read(ag_replay_size_tensor(rd), &sd, sizeof sd));
  assert_int_equal(sd, cap);
  free(a), free(b), free(obs), free(act), free(flag);
  ag_replay_free(rd);
  ag_replay_free(rc);
  ag_ctx_free(ctx);
  ag_ctx_free(cpu);
}

static int calls;
static void count_call(void *arg) { calls += *(int *)arg; }

static void deferred_calls_run_once_the_queue_is_past(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  int one = 1, ten = 10;
  calls = 0;
  ag_ctx_defer(ctx, count_call, &one);
  agt_ok(ag_ctx_sync(ctx));
  assert_int_equal(calls, 1);
  ag_ctx_defer(ctx, count_call, &ten);
  ag_ctx_free(ctx); /* runs what is left */
  assert_int_equal(calls, 11);
  ag_ctx_defer(NULL, count_call, &one);
  assert_int_equal(calls, 12);
  /* ordering with the context's own queue and the default stream */
  ctx = agt_ctx();
  agt_ok(ag_stream_wait_ctx(ctx, NULL));
  agt_ok(ag_ctx_wait_stream(ctx, NULL));
  agt_ok(ag_stream_wait_ctx(ctx, ag_ctx_native_stream(ctx)));
  agt_err(ag_stream_wait_ctx(NULL, NULL), AG_ERR_INVALID_ARG, "ctx is NULL");
  ag_ctx_free(ctx);
}

/* Vulkan memory is not handed to other frameworks (no DLPack consumer
 * takes it): blocks are refused with a clear error, and the context works on. */
static void blocks_are_refused_where_memory_cannot_be_handed_out(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  float host[5 * 40], got[5 * 2];
  ag_buffer *buf = filled_buffer(ctx, 5, 40, host);
  ag_block *blk = NULL;
  agt_err(ag_block_create(ctx, 4096, &blk), AG_ERR_UNSUPPORTED, "cannot hand out memory");
  assert_null(blk);
  const int64_t idx[2] = {39, 1};
  ag_tensor *t;
  agt_ok(ag_get_rows(buf, idx, 2, &t));
  agt_ok(ag_tensor_read(t, got, sizeof got));
  for (int j = 0; j < 2; j++)
    for (int r = 0; r < 5; r++) assert_true(got[j * 5 + r] == host[idx[j] * 5 + r]);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_gather_into_a_block_outlives_the_context),
      cmocka_unit_test(a_temporary_that_does_not_fit_the_block_fails_and_changes_nothing),
      cmocka_unit_test(released_blocks_are_reused_and_counted),
      cmocka_unit_test(device_writes_store_what_host_writes_store),
      cmocka_unit_test(a_device_add_matches_the_host_add_across_the_wrap),
      cmocka_unit_test(a_large_host_add_matches_the_cpu_table),
      cmocka_unit_test(deferred_calls_run_once_the_queue_is_past),
  };
  const struct CMUnitTest no_blocks[] = {
      cmocka_unit_test(blocks_are_refused_where_memory_cannot_be_handed_out),
      cmocka_unit_test(device_writes_store_what_host_writes_store),
      cmocka_unit_test(a_device_add_matches_the_host_add_across_the_wrap),
      cmocka_unit_test(a_large_host_add_matches_the_cpu_table),
      cmocka_unit_test(deferred_calls_run_once_the_queue_is_past),
  };
  if (argc > 1 && strcmp(argv[1], "vulkan") == 0)
    return agt_run(argc, argv, "export", no_blocks, sizeof no_blocks / sizeof no_blocks[0]);
  return agt_run(argc, argv, "export", tests, sizeof tests / sizeof tests[0]);
}
