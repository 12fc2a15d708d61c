/* test_switch.c — device switch with rescue (S18), generations (S19) and
 * the same calls giving the same results on the CPU and the GPU (S22).
 *
 * `test_switch cuda` (or `vulkan`) needs a GPU: it switches GPU -> CPU -> GPU and
 * compares the two backends. `test_switch cpu` checks what a CPU-only
 * machine can: a switch to a missing device is refused and changes nothing.
 */
#include <math.h>

#include "agt.h"

typedef struct world {
  ag_ctx *ctx;
  ag_buffer *big;   /* 1024 x 9000 f32 = 35 MB: three 16 MB parts */
  ag_buffer *small; /* 5 x 100 u8 */
  ag_tensor *param; /* 64 x 64 f32 persistent tensor */
  float *big_ref;
  float *small_ref;
  float *param_ref;
} world;

static void world_new(world *w) {
  agt_rng g = {2024};
  w->ctx = agt_ctx();
  agt_ok(ag_buffer_create(w->ctx, 1024, 9000, AG_F32, &w->big));
  agt_ok(ag_buffer_create(w->ctx, 5, 100, AG_U8, &w->small));
  w->big_ref = malloc(1024 * 9000 * sizeof(float));
  w->small_ref = malloc(500 * sizeof(float));
  w->param_ref = malloc(64 * 64 * sizeof(float));
  for (int i = 0; i < 1024 * 9000; i++) w->big_ref[i] = agt_uniform(&g, -1, 1);
  for (int i = 0; i < 500; i++) w->small_ref[i] = (float)agt_below(&g, 256);
  for (int i = 0; i < 64 * 64; i++) w->param_ref[i] = agt_uniform(&g, -3, 3);
  agt_ok(ag_buffer_write(w->big, w->big_ref, AG_F32, 1024, 9000, 0));
  agt_ok(ag_buffer_write(w->small, w->small_ref, AG_F32, 5, 100, 0));
  agt_ok(ag_tensor_create(w->ctx, 64, 64, AG_F32, w->param_ref, &w->param));
}

static void world_check(world *w) {
  float *got = malloc(1024 * 9000 * sizeof(float));
  agt_ok(ag_buffer_read(w->big, 0, 9000, AG_F32, got, 1024 * 9000 * sizeof(float)));
  assert_memory_equal(got, w->big_ref, 1024 * 9000 * sizeof(float));
  agt_ok(ag_buffer_read(w->small, 0, 100, AG_F32, got, 500 * sizeof(float)));
  assert_memory_equal(got, w->small_ref, 500 * sizeof(float));
  agt_ok(ag_tensor_read(w->param, got, 64 * 64 * sizeof(float)));
  assert_memory_equal(got, w->param_ref, 64 * 64 * sizeof(float));
  free(got);
}

static ag_where where_of(ag_buffer *b) {
  ag_buffer_info info;
  agt_ok(ag_buffer_get_info(b, &info));
  return info.where;
}

static uint64_t gen_of(ag_buffer *b) {
  ag_buffer_info info;
  agt_ok(ag_buffer_get_info(b, &info));
  return info.generation;
}

static void world_free(world *w) {
  ag_ctx_free(w->ctx);
  free(w->big_ref);
  free(w->small_ref);
  free(w->param_ref);
}

/* S18: CUDA -> CPU downloads every buffer and tensor in 16 MB parts, then
 * releases the device; the values are intact and usable on the CPU. */
static void switch_to_cpu_rescues_every_value_in_parts(void **state) {
  (void)state;
  world w;
  world_new(&w);
  ag_ctx_stats s0, s1;
  ag_ctx_get_stats(w.ctx, &s0);
  ag_xfer_reset(w.ctx);
  agt_ok(ag_ctx_set_device(w.ctx, AG_DEVICE_CPU, 0));
  assert_int_equal(ag_ctx_device(w.ctx), AG_DEVICE_CPU);
  ag_xfer_entry e;
  int found = 0;
  for (int i = 0; i < ag_xfer_count(w.ctx); i++) {
    agt_ok(ag_xfer_entry_at(w.ctx, i, &e));
    if (strcmp(e.op, "rescue") == 0) {
      found = 1;
      /* 36.9 MB in 16 MB parts, then the two small ones (the context keeps no tensor of its own:
       * autograd's seed is made at the first backward) */
      assert_int_equal(e.down_bytes, 1024 * 9000 * 4 + 500 + 64 * 64 * 4);
      assert_int_equal(e.down_calls, 3 + 1 + 1);
    }
  }
  assert_true(found);
  ag_ctx_get_stats(w.ctx, &s1);
  assert_int_equal(where_of(w.big), AG_WHERE_HOST);
  assert_int_equal(where_of(w.small), AG_WHERE_HOST);
  world_check(&w);
  int64_t idx[3] = {8999, 0, 4500};
  ag_tensor *t = NULL;
  agt_ok(ag_get_rows(w.big, idx, 3, &t));
  float *got = agt_read_f32(t);
  for (int j = 0; j < 3; j++) assert_memory_equal(got + j * 1024, w.big_ref + idx[j] * 1024, 4096);
  free(got);
  world_free(&w);
}

/* S18: a failure in the middle of the rescue aborts the switch; every value
 * stays readable on the device with its exact contents; a retry succeeds. */
static void switch_aborts_on_failed_download_and_retry_succeeds(void **state) {
  (void)state;
  world w;
  world_new(&w);
  uint64_t g_big = gen_of(w.big);
  ag_ctx_stats s0, s1;
  ag_ctx_get_stats(w.ctx, &s0);
  agt_ok(ag_ctx_inject_fault(w.ctx, AG_FAULT_DOWNLOAD, 4)); /* param, small, big 1/3, 2/3 pass; 3/3 fails */
  agt_err(ag_ctx_set_device(w.ctx, AG_DEVICE_CPU, 0), AG_ERR_DEVICE, "device switch aborted");
  ag_ctx_get_stats(w.ctx, &s1);
  assert_int_equal(s1.live_bytes, s0.live_bytes); /* the partial host copies are gone */
  assert_int_equal(ag_ctx_device(w.ctx), agt_kind);
  assert_int_equal(where_of(w.big), AG_WHERE_DEVICE);
  assert_int_equal(gen_of(w.big), g_big);
  world_check(&w);
  /* an allocation failure of a host copy aborts the same way */
  agt_ok(ag_ctx_inject_fault(w.ctx, AG_FAULT_ALLOC, 1));
  agt_err(ag_ctx_set_device(w.ctx, AG_DEVICE_CPU, 0), AG_ERR_OUT_OF_MEMORY, "device switch aborted");
  assert_int_equal(ag_ctx_device(w.ctx), agt_kind);
  world_check(&w);
  agt_ok(ag_ctx_set_device(w.ctx, AG_DEVICE_CPU, 0));
  assert_int_equal(ag_ctx_device(w.ctx), AG_DEVICE_CPU);
  world_check(&w);
  world_free(&w);
}

/* S18, S19: back on the GPU a value is uploaded at its next use, into a new
 * allocation with a new generation. */
static void switch_back_uploads_at_next_use_with_new_generation(void **state) {
  (void)state;
  world w;
  world_new(&w);
  uint64_t g0 = gen_of(w.big);
  agt_ok(ag_ctx_set_device(w.ctx, AG_DEVICE_CPU, 0));
  uint64_t g1 = gen_of(w.big);
  assert_true(g1 > g0);
  agt_ok(ag_ctx_set_device(w.ctx, agt_kind, 0));
  assert_int_equal(where_of(w.big), AG_WHERE_HOST); /* not yet used */
  ag_xfer_reset(w.ctx);
  int64_t idx[2] = {1, 8998};
  ag_tensor *t = NULL;
  agt_ok(ag_get_rows(w.big, idx, 2, &t));
  assert_int_equal(where_of(w.big), AG_WHERE_DEVICE);
  assert_int_equal(where_of(w.small), AG_WHERE_HOST); /* still unused */
  assert_true(gen_of(w.big) > g1);
  uint64_t up, down;
  ag_xfer_get(w.ctx, "upload", &up, &down);
  assert_int_equal(up, 1024 * 9000 * 4);
  float *got = agt_read_f32(t);
  assert_memory_equal(got, w.big_ref + 1024, 4096);
  assert_memory_equal(got + 1024, w.big_ref + 8998 * 1024, 4096);
  free(got);
  world_check(&w);
  assert_int_equal(where_of(w.small), AG_WHERE_DEVICE);
  world_free(&w);
}

/* S22: the same calls give the same bits on the CPU and the GPU. */
static void cpu_and_cuda_give_identical_results(void **state) {
  (void)state;
  ag_ctx *c[2] = {NULL, NULL};
  agt_ok(ag_ctx_create(&c[0], AG_DEVICE_CPU, 0));
  agt_ok(ag_ctx_create(&c[1], agt_kind, 0));
  const ag_dtype dts[] = {AG_F32, AG_F16, AG_BF16, AG_U8, AG_I32};
  const int64_t rows_of[] = {11, 42, 1024, 3};
  for (size_t d = 0; d < 5; d++)
    for (size_t ri = 0; ri < 4; ri++) {
      const int64_t rows = rows_of[ri], cap = 777, n = 256;
      agt_rng g = {1000 + d * 10 + ri};
      float *src = malloc((size_t)(rows * cap) * sizeof *src);
      for (int64_t i = 0; i < rows * cap; i++)
        src[i] = dts[d] == AG_U8 ? (float)agt_below(&g, 256) : agt_uniform(&g, -50, 50);
      int64_t idx[256];
      for (int j = 0; j < n; j++) idx[j] = agt_below(&g, cap + 20) - 10; /* some clamp */
      float *out[2];
      void *raw[2];
      size_t es = ag_dtype_size(dts[d]);
      for (int k = 0; k < 2; k++) {
        ag_buffer *b = NULL;
        agt_ok(ag_buffer_create(c[k], rows, cap, dts[d], &b));
        agt_ok(ag_buffer_write(b, src, AG_F32, rows, cap - 100, 50));
        agt_ok(ag_buffer_set_scale(b, dts[d] == AG_U8 ? 1.0f / 255.0f : 0.75f));
        ag_tensor *ti = NULL, *t = NULL;
        agt_ok(ag_tensor_create(c[k], n, 1, AG_I64, idx, &ti));
        agt_ok(ag_get_rows_dev(b, ti, &t));
        out[k] = agt_read_f32(t);
        raw[k] = malloc((size_t)(rows * cap) * es);
        agt_ok(ag_buffer_read(b, 0, cap, dts[d], raw[k], (size_t)(rows * cap) * es));
        ag_buffer_free(b);
        ag_tensor_free(ti);
        ag_ctx_reset(c[k]);
      }
      if (memcmp(out[0], out[1], (size_t)(rows * n) * sizeof(float)) != 0)
        fail_msg("gather differs between cpu and cuda for %s rows %lld", ag_dtype_name(dts[d]),
                 (long long)rows);
      if (memcmp(raw[0], raw[1], (size_t)(rows * cap) * es) != 0)
        fail_msg("stored bits differ between cpu and cuda for %s", ag_dtype_name(dts[d]));
      for (int k = 0; k < 2; k++) {
        free(out[k]);
        free(raw[k]);
      }
      free(src);
    }
  ag_ctx_free(c[0]);
  ag_ctx_free(c[1]);
}

/* CPU-only: switching to a device that is not there is refused, nothing changes. */
static void switch_to_missing_device_changes_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 2, 3, AG_F32, &b));
  float d[6] = {1, 2, 3, 4, 5, 6}, out[6];
  agt_ok(ag_buffer_write(b, d, AG_F32, 2, 3, 0));
  int n = ag_cuda_device_count();
  agt_err(ag_ctx_set_device(ctx, AG_DEVICE_CUDA, n), AG_ERR_NO_DEVICE, "CUDA");
  assert_int_equal(ag_ctx_device(ctx), AG_DEVICE_CPU);
  agt_err(ag_ctx_set_device(ctx, AG_DEVICE_VULKAN, ag_device_count(AG_DEVICE_VULKAN)), AG_ERR_NO_DEVICE,
          "Vulkan");
  assert_int_equal(ag_ctx_device(ctx), AG_DEVICE_CPU);
  agt_ok(ag_ctx_set_device(ctx, AG_DEVICE_CPU, 0)); /* same device: a no-op */
  agt_ok(ag_buffer_read(b, 0, 3, AG_F32, out, sizeof out));
  assert_memory_equal(out, d, sizeof d);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(switch_to_cpu_rescues_every_value_in_parts),
      cmocka_unit_test(switch_aborts_on_failed_download_and_retry_succeeds),
      cmocka_unit_test(switch_back_uploads_at_next_use_with_new_generation),
      cmocka_unit_test(cpu_and_cuda_give_identical_results),
  };
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(switch_to_missing_device_changes_nothing),
  };
  if (argc > 1 && (strcmp(argv[1], "cuda") == 0 || strcmp(argv[1], "vulkan") == 0))
    return agt_run(argc, argv, "switch", cuda_tests, sizeof cuda_tests / sizeof cuda_tests[0]);
  return agt_run(argc, argv, "switch", cpu_tests, sizeof cpu_tests / sizeof cpu_tests[0]);
}
