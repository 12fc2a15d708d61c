/* bench_core.c — buffer benchmarks: gather with device indices, writes.
 *
 * usage: bench_core [cpu|cuda] — prints one JSON line per row (bench.h).
 * The peer script bench/peers/torch_core.py measures the same work the same
 * way; bench/compare.py runs both and prints the ratios.
 */
#include <string.h>

#include "agrl/agrl.h"
#include "bench.h"

#define CHECK(x)                                                                    \
  do {                                                                              \
    ag_status s_ = (x);                                                             \
    if (s_) {                                                                       \
      fprintf(stderr, "%s: %s: %s\n", #x, ag_status_name(s_), ag_last_error());     \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

enum { REPS = 9 };

/* B-column gathers from a rows x cap buffer, indices on the device. */
static void gather_row(ag_ctx *ctx, const char *work, int64_t rows, int64_t cap, int64_t B, int iters) {
  ag_buffer *buf = NULL;
  CHECK(ag_buffer_create(ctx, rows, cap, AG_F32, &buf));
  int32_t *idx = malloc((size_t)B * sizeof *idx);
  uint64_t x = 88172645463325252ull;
  for (int64_t j = 0; j < B; j++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    idx[j] = (int32_t)(x % (uint64_t)cap);
  }
  ag_tensor *ti = NULL, *t = NULL;
  CHECK(ag_tensor_create(ctx, B, 1, AG_I32, idx, &ti));
  double v[REPS];
  for (int r = -2; r < REPS; r++) {
    double t0 = bench_now_us();
    for (int i = 0; i < iters; i++) {
      CHECK(ag_get_rows_dev(buf, ti, &t));
      if (i % 64 == 63) ag_ctx_reset(ctx);
    }
    CHECK(ag_ctx_sync(ctx));
    if (r >= 0) v[r] = (bench_now_us() - t0) / iters;
    ag_ctx_reset(ctx);
  }
  bench_stat s = bench_summarize(v, REPS);
  char note[96];
  snprintf(note, sizeof note, "%.0f GB/s moved (read+write)", 2.0 * (double)(rows * B * 4) / (s.median * 1e3));
  bench_print(work, s, note);
  ag_tensor_free(ti);
  ag_buffer_free(buf);
  free(idx);
}

/* One transition written and waited for (visible on the device). */
static void write_row(ag_ctx *ctx, const char *work, int64_t rows, int64_t k, int iters, int wait_each) {
  const int64_t cap = 1000000;
  ag_buffer *buf = NULL;
  CHECK(ag_buffer_create(ctx, rows, cap, AG_F32, &buf));
  float *data = malloc((size_t)(rows * k) * sizeof *data);
  for (int64_t i = 0; i < rows * k; i++) data[i] = (float)i;
  double v[REPS];
  int64_t pos = 0;
  for (int r = -2; r < REPS; r++) {
    double t0 = bench_now_us();
    for (int i = 0; i < iters; i++) {
      if (pos + k > cap) pos = 0;
      CHECK(ag_buffer_write(buf, data, AG_F32, rows, k, pos));
      pos += k;
      if (wait_each) CHECK(ag_buffer_wait(buf));
    }
    CHECK(ag_ctx_sync(ctx));
    if (r >= 0) v[r] = (bench_now_us() - t0) / iters;
  }
  bench_stat s = bench_summarize(v, REPS);
  char note[96];
  snprintf(note, sizeof note, "%.2f GB/s", (double)(rows * k * 4) / (s.median * 1e3));
  bench_print(work, s, note);
  ag_buffer_free(buf);
  free(data);
}

int main(int argc, char **argv) {
  ag_device_kind kind = argc > 1 && strcmp(argv[1], "cpu") == 0 ? AG_DEVICE_CPU : AG_DEVICE_CUDA;
  ag_ctx *ctx = NULL;
  CHECK(ag_ctx_create(&ctx, kind, 0));
  fprintf(stderr, "bench_core on %s\n", ag_ctx_device_name(ctx));
  gather_row(ctx, "gather_cartpole_b256", 11, 1000000, 256, 2000);
  gather_row(ctx, "gather_1024f32_b65536", 1024, 200000, 65536, 20);
  write_row(ctx, "write_1_mujoco_visible", 42, 1, 2000, 1);
  write_row(ctx, "write_65536_mujoco_pageable", 42, 65536, 10, 1);
  ag_ctx_free(ctx);
  return 0;
}
