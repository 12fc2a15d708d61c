/* test_buffer.c — the seed's behaviours S1–S14, S16, S17, S19–S21 on one device.
 *
 * Each test checks values against a host reference computed here (a plain C
 * matrix kept beside the buffer). Run as `test_buffer cpu` or `test_buffer cuda`.
 */
#include <math.h>

#include "agt.h"
#include "core/internal.h"    /* ag__copy_stream: the staging fill of plain copies */
#include "cpu/cpu_internal.h" /* ag__cpu_vector_paths: both CPU paths */

/* The host reference of a buffer: rows x capacity f32, column by column. */
typedef struct ref {
  int64_t rows, cap;
  float *v;
} ref;

static ref ref_new(int64_t rows, int64_t cap) {
  ref r = {rows, cap, calloc((size_t)(rows * cap), sizeof(float))};
  assert_non_null(r.v);
  return r;
}

static void ref_write(ref *r, const float *data, int64_t k, int64_t off) {
  memcpy(r->v + off * r->rows, data, (size_t)(k * r->rows) * sizeof(float));
}

static float *random_cols(agt_rng *g, int64_t rows, int64_t k) {
  float *d = malloc((size_t)(rows * k) * sizeof *d);
  assert_non_null(d);
  for (int64_t i = 0; i < rows * k; i++) d[i] = agt_uniform(g, -100.0f, 100.0f);
  return d;
}

static void assert_buffer_equals(ag_buffer *b, const ref *r) {
  float *got = malloc((size_t)(r->rows * r->cap) * sizeof *got);
  assert_non_null(got);
  agt_ok(ag_buffer_read(b, 0, r->cap, AG_F32, got, (size_t)(r->rows * r->cap) * sizeof *got));
  for (int64_t i = 0; i < r->rows * r->cap; i++)
    if (got[i] != r->v[i])
      fail_msg("column %lld row %lld: got %g, expected %g", (long long)(i / r->rows),
               (long long)(i % r->rows), (double)got[i], (double)r->v[i]);
  free(got);
}

/* S1, S21: a buffer reports its shape, dtype and where it lives. */
static void buffer_create_reports_shape_dtype_and_location(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 11, 1000, AG_F32, &b));
  ag_buffer_info info;
  agt_ok(ag_buffer_get_info(b, &info));
  assert_int_equal(info.rows, 11);
  assert_int_equal(info.capacity, 1000);
  assert_int_equal(info.dtype, AG_F32);
  assert_int_equal(info.where, agt_kind == AG_DEVICE_CPU ? AG_WHERE_HOST : AG_WHERE_DEVICE);
  assert_true(info.generation > 0);
  assert_true(info.scale == 1.0f);
  assert_int_equal(ag_buffer_rows(b), 11);
  assert_int_equal(ag_buffer_capacity(b), 1000);
  assert_ptr_equal(ag_buffer_ctx(b), ctx);
  ag_buffer_free(b);
  agt_ok(ag_buffer_get_info(b, &info));
  assert_int_equal(info.where, AG_WHERE_FREED);
  ag_ctx_free(ctx);
}

/* S2: a new buffer is zero-filled, also where freed memory with values is reused. */
static void buffer_new_is_zero_filled(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_dtype dts[] = {AG_F32, AG_F16, AG_BF16, AG_U8, AG_I32};
  agt_rng g = {42};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    ag_buffer *b = NULL;
    agt_ok(ag_buffer_create(ctx, 7, 500, dts[d], &b));
    float *data = random_cols(&g, 7, 500);
    for (int i = 0; i < 7 * 500; i++) data[i] = fabsf(data[i]) + 1.0f; /* fits every dtype */
    agt_ok(ag_buffer_write(b, data, AG_F32, 7, 500, 0));
    ag_buffer_free(b);
    free(data);
    agt_ok(ag_buffer_create(ctx, 7, 500, dts[d], &b)); /* likely the same memory */
    float *got = malloc(7 * 500 * sizeof *got);
    agt_ok(ag_buffer_read(b, 0, 500, AG_F32, got, 7 * 500 * sizeof *got));
    for (int i = 0; i < 7 * 500; i++)
      if (got[i] != 0.0f)
        fail_msg("dtype %s: element %d is %g, not 0", ag_dtype_name(dts[d]), i, (double)got[i]);
    free(got);
    ag_buffer_free(b);
  }
  ag_ctx_free(ctx);
}

/* S5, S8: random writes at random offsets read back exactly. */
static void buffer_write_read_roundtrip_random(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {7};
  const int64_t rows = 5, cap = 300;
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  ref r = ref_new(rows, cap);
  for (int it = 0; it < 50; it++) {
    int64_t off = agt_below(&g, cap);
    int64_t k = 1 + agt_below(&g, cap - off);
    float *d = random_cols(&g, rows, k);
    agt_ok(ag_buffer_write(b, d, AG_F32, rows, k, off));
    ref_write(&r, d, k, off);
    free(d);
    /* a random read range */
    int64_t roff = agt_below(&g, cap), rk = agt_below(&g, cap - roff + 1);
    float *got = malloc((size_t)(rows * (rk ? rk : 1)) * sizeof *got);
    agt_ok(ag_buffer_read(b, roff, rk, AG_F32, got, (size_t)(rows * rk) * sizeof *got));
    assert_memory_equal(got, r.v + roff * rows, (size_t)(rows * rk) * sizeof *got);
    free(got);
  }
  assert_buffer_equals(b, &r);
  free(r.v);
  ag_ctx_free(ctx);
}

/* S5: a vector is one column; k = 0 is a no-op, also with NULL data. */
static void buffer_write_vector_and_zero_columns(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 4, 6, AG_F32, &b));
  ref r = ref_new(4, 6);
  const float v[4] = {1.5f, -2.0f, 3.25f, 4.0f};
  agt_ok(ag_buffer_write(b, v, AG_F32, 4, 1, 5));
  ref_write(&r, v, 1, 5);
  agt_ok(ag_buffer_write(b, NULL, AG_F32, 4, 0, 3));
  agt_ok(ag_buffer_write(b, v, AG_F32, 4, 0, 6));   /* an empty range at the end */
  agt_ok(ag_buffer_read(b, 2, 0, AG_F32, NULL, 0)); /* S8: k = 0 reads nothing */
  assert_buffer_equals(b, &r);
  free(r.v);
  ag_ctx_free(ctx);
}

/* S5: a ring buffer wraps with two writes. */
static void buffer_ring_wraps_with_two_writes(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {11};
  const int64_t rows = 3, cap = 10;
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  ref r = ref_new(rows, cap);
  int64_t pos = 0;
  for (int it = 0; it < 20; it++) {
    int64_t k = 1 + agt_below(&g, cap);
    float *d = random_cols(&g, rows, k);
    int64_t first = k < cap - pos ? k : cap - pos;
    agt_ok(ag_buffer_write(b, d, AG_F32, rows, first, pos));
    if (k > first) agt_ok(ag_buffer_write(b, d + first * rows, AG_F32, rows, k - first, 0));
    for (int64_t j = 0; j < k; j++) ref_write(&r, d + j * rows, 1, (pos + j) % cap);
    pos = (pos + k) % cap;
    free(d);
  }
  assert_buffer_equals(b, &r);
  free(r.v);
  ag_ctx_free(ctx);
}

/* S8: a read larger than the 16 MB transfer part comes back whole. */
static void buffer_read_large_in_parts(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const int64_t rows = 1024, cap = 5000; /* 20.5 MB of f32 */
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  ref r = ref_new(rows, cap);
  for (int64_t i = 0; i < rows * cap; i++) r.v[i] = (float)(i % 1000003) * 0.5f;
  agt_ok(ag_buffer_write(b, r.v, AG_F32, rows, cap, 0));
  assert_buffer_equals(b, &r);
  free(r.v);
  ag_ctx_free(ctx);
}

/* Compact dtypes: f32 written into u8/f16/bf16/i32 converts like the host
 * reference conversion, and reads back through f32. */
static void buffer_write_f32_into_compact_dtypes_converts(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {5};
  const int64_t rows = 6, cap = 40;
  const ag_dtype dts[] = {AG_F16, AG_BF16, AG_U8, AG_I32};
  for (size_t d = 0; d < 4; d++) {
    ag_buffer *b = NULL;
    agt_ok(ag_buffer_create(ctx, rows, cap, dts[d], &b));
    float *src = random_cols(&g, rows, cap);
    float *expect = malloc((size_t)(rows * cap) * sizeof *expect);
    for (int64_t i = 0; i < rows * cap; i++) {
      if (dts[d] == AG_U8) src[i] = fabsf(src[i]) * 2.5f; /* 0..250, fractions round */
      float x = src[i];
      switch (dts[d]) {
        case AG_U8: expect[i] = (float)(uint8_t)lrintf(x); break;
        case AG_I32: expect[i] = (float)(int32_t)lrintf(x); break;
        case AG_F16: { /* reference: round to 11 significant bits (all values are normal f16) */
          int e;
          float m = frexpf(x, &e);
          expect[i] = ldexpf(rintf(ldexpf(m, 11)), e - 11);
          break;
        }
        default: { /* bf16: 8 significant bits */
          int e;
          float m = frexpf(x, &e);
          expect[i] = ldexpf(rintf(ldexpf(m, 8)), e - 8);
          break;
        }
      }
    }
    agt_ok(ag_buffer_write(b, src, AG_F32, rows, cap, 0));
    float *got = malloc((size_t)(rows * cap) * sizeof *got);
    agt_ok(ag_buffer_read(b, 0, cap, AG_F32, got, (size_t)(rows * cap) * sizeof *got));
    for (int64_t i = 0; i < rows * cap; i++)
      if (got[i] != expect[i])
        fail_msg("%s: element %lld of %g read back as %g, expected %g", ag_dtype_name(dts[d]), (long long)i,
                 (double)src[i], (double)got[i], (double)expect[i]);
    /* native-dtype round trip: read raw, write raw elsewhere, read again */
    size_t es = ag_dtype_size(dts[d]);
    void *raw = malloc((size_t)(rows * cap) * es);
    agt_ok(ag_buffer_read(b, 0, cap, dts[d], raw, (size_t)(rows * cap) * es));
    agt_ok(ag_buffer_write(b, raw, dts[d], rows, cap / 2, cap / 2));
    agt_ok(ag_buffer_read(b, cap / 2, cap / 2, AG_F32, got, (size_t)(rows * cap) * sizeof *got));
    assert_memory_equal(got, expect, (size_t)(rows * cap / 2) * sizeof *got);
    free(raw);
    free(got);
    free(expect);
    free(src);
  }
  ag_ctx_free(ctx);
}

/* S10: get_rows selects columns by 0-based index (repeats, first, last).
 * Columns of 11, 16, 42 and 65 floats (on the CPU, shorter than a vector
 * and whole or partial vectors of 16), on the CPU on both of its paths. */
static void get_rows_matches_host_reference(void **state) {
  (void)state;
  static const int64_t shapes[] = {11, 16, 42, 65};
  for (int k = 0; k < 4 * (agt_kind == AG_DEVICE_CPU ? 2 : 1); k++) {
    ag__cpu_vector_paths = k < 4;
    ag_ctx *ctx = agt_ctx();
    agt_rng g = {99 + (uint64_t)k};
    const int64_t rows = shapes[k % 4], cap = 1000, n = 300;
    ag_buffer *b = NULL;
    agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
    float *d = random_cols(&g, rows, cap);
    agt_ok(ag_buffer_write(b, d, AG_F32, rows, cap, 0));
    int64_t idx[300];
    int32_t idx32[300];
    for (int64_t j = 0; j < n; j++) idx[j] = agt_below(&g, cap);
    idx[0] = 0;
    idx[1] = cap - 1;
    idx[2] = idx[3] = 17; /* a repeat */
    for (int64_t j = 0; j < n; j++) idx32[j] = (int32_t)idx[j];
    ag_tensor *t = NULL, *t32 = NULL;
    agt_ok(ag_get_rows(b, idx, n, &t));
    agt_ok(ag_get_rows_i32(b, idx32, n, &t32));
    assert_int_equal(ag_tensor_rows(t), rows);
    assert_int_equal(ag_tensor_cols(t), n);
    assert_int_equal(ag_tensor_dtype(t), AG_F32);
    float *got = agt_read_f32(t), *got32 = agt_read_f32(t32);
    for (int64_t j = 0; j < n; j++)
      for (int64_t r = 0; r < rows; r++) {
        float e = d[idx[j] * rows + r];
        if (got[j * rows + r] != e || got32[j * rows + r] != e)
          fail_msg("rows %lld path %d column %lld (idx %lld) row %lld: got %g / %g, expected %g",
                   (long long)rows, k / 4, (long long)j, (long long)idx[j], (long long)r,
                   (double)got[j * rows + r], (double)got32[j * rows + r], (double)e);
      }
    free(got);
    free(got32);
    free(d);
    ag_ctx_free(ctx);
  }
  ag__cpu_vector_paths = 1;
}

/* A CPU gather of 16 KB or more is split over the helper threads, in parts
 * of at least 32 columns: batches around those sizes and splits that do not
 * come out even, each against the host's copy, split over the pool's
 * threads, on one thread and over at most two (ag__cpu_gather_threads 0, 1,
 * 2), back to back with fresh indices each time. */
static void split_gathers_match_one_thread_and_the_host(void **state) {
  (void)state;
  static const int64_t sizes[] = {63, 64, 65, 97, 100, 257, 1000, 4099};
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {4242};
  const int64_t rows = 42, cap = 20000;
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  float *d = random_cols(&g, rows, cap);
  agt_ok(ag_buffer_write(b, d, AG_F32, rows, cap, 0));
  int64_t *idx = malloc(4099 * sizeof *idx);
  for (int rep = 0; rep < 3; rep++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      const int64_t n = sizes[k];
      for (int64_t j = 0; j < n; j++) idx[j] = agt_below(&g, cap);
      float *got[3]; /* the pool's threads, one thread, at most two */
      for (int v = 0; v < 3; v++) {
        ag__cpu_gather_threads = v;
        ag_tensor *t = NULL;
        agt_ok(ag_get_rows(b, idx, n, &t));
        got[v] = agt_read_f32(t);
      }
      ag__cpu_gather_threads = 0;
      for (int64_t j = 0; j < n; j++)
        for (int64_t r = 0; r < rows; r++) {
          const float e = d[idx[j] * rows + r];
          for (int v = 0; v < 3; v++)
            if (got[v][j * rows + r] != e)
              fail_msg(
                  "batch %lld column %lld (idx %lld) row %lld, gather threads setting %d: %g, expected %g",
                  (long long)n, (long long)j, (long long)idx[j], (long long)r, v,
                  (double)got[v][j * rows + r], (double)e);
        }
      for (int v = 0; v < 3; v++) free(got[v]);
    }
  free(idx);
  free(d);
  ag_ctx_free(ctx);
}

/* A new buffer of `dt` filled with random non-negative values (they fit u8
 * too); returns what it stored, read back as f32 (the caller frees it). */
static float *filled_buffer(ag_ctx *ctx, agt_rng *g, int64_t rows, int64_t cap, ag_dtype dt, ag_buffer **b) {
  agt_ok(ag_buffer_create(ctx, rows, cap, dt, b));
  float *src = random_cols(g, rows, cap);
  for (int64_t i = 0; i < rows * cap; i++) src[i] = fabsf(src[i]);
  agt_ok(ag_buffer_write(*b, src, AG_F32, rows, cap, 0));
  float *stored = malloc((size_t)(rows * cap) * sizeof *stored);
  assert_non_null(stored);
  agt_ok(ag_buffer_read(*b, 0, cap, AG_F32, stored, (size_t)(rows * cap) * sizeof *stored));
  free(src);
  return stored;
}

/* S10 with indices on the device, both index dtypes, and compact storage. */
static void get_rows_dev_matches_host_for_every_dtype(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {123};
  const int64_t rows = 8, cap = 257, n = 64;
  const ag_dtype dts[] = {AG_F32, AG_F16, AG_BF16, AG_U8, AG_I32};
  int64_t idx[64];
  int32_t idx32[64];
  for (int64_t j = 0; j < n; j++) idx32[j] = (int32_t)(idx[j] = agt_below(&g, cap));
  ag_tensor *ti = NULL, *ti32 = NULL;
  agt_ok(ag_tensor_create(ctx, n, 1, AG_I64, idx, &ti));
  agt_ok(ag_tensor_create(ctx, 1, n, AG_I32, idx32, &ti32));
  for (size_t d = 0; d < 5; d++) {
    ag_buffer *b = NULL;
    float *stored = filled_buffer(ctx, &g, rows, cap, dts[d], &b);
    float scale = dts[d] == AG_U8 ? 1.0f / 255.0f : 1.0f;
    agt_ok(ag_buffer_set_scale(b, scale));
    ag_tensor *t = NULL, *t32 = NULL;
    agt_ok(ag_get_rows_dev(b, ti, &t));
    agt_ok(ag_get_rows_dev(b, ti32, &t32));
    float *got = agt_read_f32(t), *got32 = agt_read_f32(t32);
    for (int64_t j = 0; j < n; j++)
      for (int64_t r = 0; r < rows; r++) {
        float e = stored[idx[j] * rows + r] * scale;
        if (got[j * rows + r] != e || got32[j * rows + r] != e)
          fail_msg("%s: column %lld row %lld: got %g / %g, expected %g", ag_dtype_name(dts[d]), (long long)j,
                   (long long)r, (double)got[j * rows + r], (double)got32[j * rows + r], (double)e);
      }
    free(got);
    free(got32);
    free(stored);
    ag_buffer_free(b);
  }
  ag_ctx_free(ctx);
}

/* Gathers of different kinds (row counts, dtypes, index types) issued back
 * to back without a wait, each with its own indices and output: every one
 * returns its own rows (an eager launch never changes one already queued). */
static void back_to_back_gathers_of_different_kinds_each_get_their_rows(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {321};
  enum { KINDS = 4, ROUNDS = 40, N = 33 };
  const int64_t rows[KINDS] = {11, 8, 42, 3}, cap = 1000;
  const ag_dtype dts[KINDS] = {AG_F32, AG_F32, AG_F16, AG_U8};
  ag_buffer *b[KINDS];
  float *stored[KINDS];
  for (int k = 0; k < KINDS; k++) stored[k] = filled_buffer(ctx, &g, rows[k], cap, dts[k], &b[k]);
  int64_t idx[ROUNDS][KINDS][N];
  ag_tensor *out[ROUNDS][KINDS];
  for (int i = 0; i < ROUNDS; i++)
    for (int k = 0; k < KINDS; k++) {
      ag_tensor *ti = NULL;
      int32_t i32[N];
      for (int j = 0; j < N; j++) i32[j] = (int32_t)(idx[i][k][j] = agt_below(&g, cap));
      if ((i + k) % 2)
        agt_ok(ag_tensor_create(ctx, N, 1, AG_I64, idx[i][k], &ti));
      else
        agt_ok(ag_tensor_create(ctx, N, 1, AG_I32, i32, &ti));
      agt_ok(ag_get_rows_dev(b[k], ti, &out[i][k]));
    }
  for (int i = 0; i < ROUNDS; i++)
    for (int k = 0; k < KINDS; k++) {
      float *got = agt_read_f32(out[i][k]);
      for (int j = 0; j < N; j++)
        for (int64_t r = 0; r < rows[k]; r++)
          if (got[j * rows[k] + r] != stored[k][idx[i][k][j] * rows[k] + r])
            fail_msg("round %d kind %d: column %d row %lld: got %g, expected %g", i, k, j, (long long)r,
                     (double)got[j * rows[k] + r], (double)stored[k][idx[i][k][j] * rows[k] + r]);
      free(got);
    }
  for (int k = 0; k < KINDS; k++) free(stored[k]), ag_buffer_free(b[k]);
  ag_ctx_free(ctx);
}

/* S12: integer indices; capacities past 2^24 (exact) and past 2^31 columns. */
static void get_rows_beyond_2_24_columns(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const int64_t cap = 20000000;
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 1, cap, AG_F32, &b));
  const int64_t cols[] = {16777215, 16777216, 16777217, 16777218, cap - 1};
  for (int i = 0; i < 5; i++) {
    float v = (float)(i + 1);
    agt_ok(ag_buffer_write(b, &v, AG_F32, 1, 1, cols[i]));
  }
  const int64_t idx[] = {16777217, 16777216, cap - 1, 16777218, 16777215, 0};
  const float expect[] = {3, 2, 5, 4, 1, 0};
  ag_tensor *t = NULL;
  agt_ok(ag_get_rows(b, idx, 6, &t));
  float *got = agt_read_f32(t);
  assert_memory_equal(got, expect, sizeof expect);
  free(got);
  ag_ctx_free(ctx);
}

static void get_rows_beyond_2_31_columns(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const int64_t cap = ((int64_t)1 << 31) + 64; /* 2 GB of u8 */
  size_t free_b = 0, total_b = 0;
  agt_ok(ag_ctx_mem_info(ctx, &free_b, &total_b));
  if ((double)free_b * 0.85 < (double)cap) { /* a device this small (a software driver's heap) */
    printf("get_rows_beyond_2_31_columns: skipped on %s, %.0f MB free\n", ag_ctx_device_name(ctx),
           (double)free_b / 1048576.0);
    ag_ctx_free(ctx);
    return;
  }
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 1, cap, AG_U8, &b));
  const uint8_t vals[] = {7, 9, 11};
  const int64_t at[] = {((int64_t)1 << 31) - 1, (int64_t)1 << 31, cap - 1};
  for (int i = 0; i < 3; i++) agt_ok(ag_buffer_write(b, &vals[i], AG_U8, 1, 1, at[i]));
  ag_tensor *t = NULL;
  int64_t idx[] = {at[2], at[0], at[1], 5};
  agt_ok(ag_get_rows(b, idx, 4, &t));
  float *got = agt_read_f32(t);
  const float expect[] = {11, 7, 9, 0};
  assert_memory_equal(got, expect, sizeof expect);
  free(got);
  ag_ctx_free(ctx);
}

/* S13: device indices out of range are clamped; the result is the clamped column. */
static void get_rows_dev_clamps_out_of_range_indices(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {3};
  const int64_t rows = 4, cap = 50;
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  float *d = random_cols(&g, rows, cap);
  agt_ok(ag_buffer_write(b, d, AG_F32, rows, cap, 0));
  const int64_t idx[] = {-1, cap, INT64_MAX, INT64_MIN, 7, cap + 1000000, -999};
  const int64_t clamped[] = {0, cap - 1, cap - 1, 0, 7, cap - 1, 0};
  const int32_t idx32[] = {-1, (int32_t)cap, INT32_MAX, INT32_MIN, 7, 1 << 30, -999};
  ag_tensor *ti = NULL, *ti32 = NULL, *t = NULL, *t32 = NULL;
  agt_ok(ag_tensor_create(ctx, 7, 1, AG_I64, idx, &ti));
  agt_ok(ag_tensor_create(ctx, 7, 1, AG_I32, idx32, &ti32));
  agt_ok(ag_get_rows_dev(b, ti, &t));
  agt_ok(ag_get_rows_dev(b, ti32, &t32));
  float *got = agt_read_f32(t), *got32 = agt_read_f32(t32);
  for (int j = 0; j < 7; j++) {
    assert_memory_equal(got + j * rows, d + clamped[j] * rows, rows * sizeof(float));
    assert_memory_equal(got32 + j * rows, d + clamped[j] * rows, rows * sizeof(float));
  }
  free(got);
  free(got32);
  free(d);
  ag_ctx_free(ctx);
}

/* S6: a gather issued before a write reads the old values, one issued after
 * reads the new ones; the caller's memory may be reused when write returns.
 * No explicit synchronisation in between. */
static void write_is_ordered_with_gathers(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {8};
  const int64_t rows = 16, cap = 100000, n = 4096;
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  float *old = random_cols(&g, rows, cap);
  agt_ok(ag_buffer_write(b, old, AG_F32, rows, cap, 0));
  int64_t *idx = malloc(n * sizeof *idx);
  for (int64_t j = 0; j < n; j++) idx[j] = agt_below(&g, cap);
  ag_tensor *before[4], *after[4];
  float *fresh = random_cols(&g, rows, cap);
  float *scratch = malloc((size_t)(rows * cap) * sizeof *scratch);
  for (int rep = 0; rep < 4; rep++) { /* several rounds keep the queue busy */
    agt_ok(ag_get_rows(b, idx, n, &before[rep]));
    memcpy(scratch, fresh, (size_t)(rows * cap) * sizeof *scratch);
    agt_ok(ag_buffer_write(b, scratch, AG_F32, rows, cap, 0));
    memset(scratch, 0xff, (size_t)(rows * cap) * sizeof *scratch); /* reuse at once */
    agt_ok(ag_get_rows(b, idx, n, &after[rep]));
    memcpy(scratch, old, (size_t)(rows * cap) * sizeof *scratch);
    agt_ok(ag_buffer_write(b, scratch, AG_F32, rows, cap, 0)); /* back to old for the next round */
    memset(scratch, 0xff, (size_t)(rows * cap) * sizeof *scratch);
  }
  for (int rep = 0; rep < 4; rep++) {
    float *gb = agt_read_f32(before[rep]), *ga = agt_read_f32(after[rep]);
    for (int64_t j = 0; j < n; j++) {
      assert_memory_equal(gb + j * rows, old + idx[j] * rows, rows * sizeof(float));
      assert_memory_equal(ga + j * rows, fresh + idx[j] * rows, rows * sizeof(float));
    }
    free(gb);
    free(ga);
  }
  free(scratch);
  free(fresh);
  free(old);
  free(idx);
  ag_ctx_free(ctx);
}

/* S7, S20: a write sends exactly rows*k*elem bytes up, never the table. */
static void write_sends_only_the_new_columns(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b = NULL, *b8 = NULL;
  agt_ok(ag_buffer_create(ctx, 42, 1000000, AG_F32, &b));
  agt_ok(ag_buffer_create(ctx, 42, 1000, AG_U8, &b8));
  float data[42 * 3];
  for (int i = 0; i < 42 * 3; i++) data[i] = (float)i;
  ag_xfer_reset(ctx);
  agt_ok(ag_buffer_write(b, data, AG_F32, 42, 3, 999997));
  uint64_t up = 0, down = 0;
  ag_xfer_get(ctx, "ag_buffer_write", &up, &down);
  assert_int_equal(up, 42 * 3 * 4);
  assert_int_equal(down, 0);
  agt_ok(ag_buffer_write(b8, data, AG_F32, 42, 3, 0)); /* converted on the host side: 1 byte each */
  ag_xfer_get(ctx, "ag_buffer_write", &up, &down);
  assert_int_equal(up, 42 * 3 * 4 + 42 * 3);
  ag_xfer_total(ctx, &up, &down);
  assert_int_equal(up, 42 * 3 * 5);
  assert_int_equal(down, 0);
  ag_ctx_free(ctx);
}

/* S14, S20: a gather of 256 columns from a 1M-column buffer sends exactly the
 * index bytes up and nothing down; with device indices nothing at all. */
static void get_rows_sends_only_the_indices(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {1};
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 11, 1000000, AG_F32, &b));
  int64_t idx[256];
  int32_t idx32[256];
  for (int j = 0; j < 256; j++) idx32[j] = (int32_t)(idx[j] = agt_below(&g, 1000000));
  ag_tensor *ti = NULL;
  agt_ok(ag_tensor_create(ctx, 256, 1, AG_I32, idx32, &ti));
  ag_xfer_reset(ctx);
  ag_tensor *t = NULL;
  uint64_t up, down;
  agt_ok(ag_get_rows(b, idx, 256, &t));
  ag_xfer_total(ctx, &up, &down);
  assert_int_equal(up, 256 * 8);
  assert_int_equal(down, 0);
  agt_ok(ag_get_rows_i32(b, idx32, 256, &t));
  ag_xfer_get(ctx, "ag_get_rows", &up, &down);
  assert_int_equal(up, 256 * 8 + 256 * 4);
  ag_xfer_reset(ctx);
  agt_ok(ag_get_rows_dev(b, ti, &t));
  ag_xfer_total(ctx, &up, &down);
  assert_int_equal(up, 0);
  assert_int_equal(down, 0);
  /* reading the result is counted as a download of rows*n*4 bytes */
  float *got = agt_read_f32(t);
  ag_xfer_total(ctx, &up, &down);
  assert_int_equal(down, 11 * 256 * 4);
  free(got);
  ag_ctx_free(ctx);
}

/* S20: entries per operation, reset to zero. */
static void xfer_counters_list_and_reset(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 2, 10, AG_F32, &b));
  ag_xfer_reset(ctx);
  float v[4] = {1, 2, 3, 4}, out[4];
  agt_ok(ag_buffer_write(b, v, AG_F32, 2, 2, 0));
  agt_ok(ag_buffer_read(b, 0, 2, AG_F32, out, sizeof out));
  int found = 0;
  for (int i = 0; i < ag_xfer_count(ctx); i++) {
    ag_xfer_entry e;
    agt_ok(ag_xfer_entry_at(ctx, i, &e));
    if (strcmp(e.op, "ag_buffer_write") == 0) {
      assert_int_equal(e.up_bytes, 16);
      assert_int_equal(e.up_calls, 1);
      found |= 1;
    }
    if (strcmp(e.op, "ag_buffer_read") == 0) {
      assert_int_equal(e.down_bytes, 16);
      assert_int_equal(e.down_calls, 1);
      found |= 2;
    }
  }
  assert_int_equal(found, 3);
  ag_xfer_reset(ctx);
  uint64_t up = 1, down = 1;
  ag_xfer_total(ctx, &up, &down);
  assert_int_equal(up, 0);
  assert_int_equal(down, 0);
  ag_xfer_entry e;
  agt_err(ag_xfer_entry_at(ctx, ag_xfer_count(ctx), &e), AG_ERR_OUT_OF_RANGE, "recorded");
  ag_ctx_free(ctx);
}

/* S9: free releases the memory at once; S16: a gather issued before the free
 * still reads the buffer's values (no use after free: run under ASan and
 * compute-sanitizer). */
static void free_releases_memory_and_pending_gather_completes(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {77};
  const int64_t rows = 64, cap = 200000, n = 65536; /* 51 MB table, 16 MB result */
  ag_buffer *b = NULL;
  ag_ctx_stats s0, s1, s2;
  ag_ctx_get_stats(ctx, &s0);
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  float *d = random_cols(&g, rows, cap);
  agt_ok(ag_buffer_write(b, d, AG_F32, rows, cap, 0));
  int64_t *idx = malloc(n * sizeof *idx);
  for (int64_t j = 0; j < n; j++) idx[j] = agt_below(&g, cap);
  ag_tensor *t = NULL;
  agt_ok(ag_get_rows(b, idx, n, &t));
  ag_ctx_get_stats(ctx, &s1);
  ag_buffer_free(b); /* while the gather may still be queued */
  ag_ctx_get_stats(ctx, &s2);
  assert_int_equal(s1.live_bytes - s2.live_bytes, (uint64_t)(rows * cap * 4));
  assert_int_equal(s2.frees, s1.frees + 1);
  float *got = agt_read_f32(t);
  for (int64_t j = 0; j < n; j++)
    assert_memory_equal(got + j * rows, d + idx[j] * rows, rows * sizeof(float));
  (void)s0;
  free(got);
  free(idx);
  free(d);
  ag_ctx_free(ctx);
}

/* Tables of 4 MB or more: on the CPU each is a mapping of its own, 2 MB-
 * aligned (so that it can be backed by 2 MB pages); any number of them,
 * freed in any order, between small ones, keep their contents. */
static void large_tables_keep_their_contents_in_any_free_order(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {91};
  const int64_t shape[4][2] = {
      {11, 95400}, {42, 200000}, {3, 1000}, {7, 150001}}; /* 4.2, 33.6, 0.01, 4.2 MB */
  ag_buffer *b[5] = {NULL};
  ref r[5];
  for (int i = 0; i < 5; i++) {
    const int64_t rows = shape[i % 4][0], cap = shape[i % 4][1];
    if (i == 4) ag_buffer_free(b[1]), b[1] = NULL; /* the middle one first, then one more */
    agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b[i]));
    r[i] = ref_new(rows, cap);
    float *d = random_cols(&g, rows, cap);
    agt_ok(ag_buffer_write(b[i], d, AG_F32, rows, cap, 0));
    ref_write(&r[i], d, cap, 0);
    free(d);
    const size_t bytes = (size_t)(rows * cap) * sizeof(float);
    if (agt_kind == AG_DEVICE_CPU && bytes >= ((size_t)4 << 20))
      assert_int_equal((uintptr_t)b[i]->store.ptr % ((uintptr_t)2 << 20), 0);
  }
  for (int i = 0; i < 5; i++)
    if (b[i]) assert_buffer_equals(b[i], &r[i]);
  ag_buffer_free(b[3]);
  ag_buffer_free(b[0]);
  assert_buffer_equals(b[4], &r[4]);
  assert_buffer_equals(b[2], &r[2]);
  for (int i = 0; i < 5; i++) free(r[i].v);
  ag_ctx_free(ctx); /* releases b[2] and b[4] */
}

/* S9: free of NULL and a second free are no-ops; every later use is an error. */
static void freed_buffer_use_is_error_not_crash(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 2, 5, AG_F32, &b));
  ag_buffer_free(b);
  ag_buffer_free(b);
  ag_buffer_free(NULL);
  float v[2] = {1, 2};
  int64_t i0 = 0;
  ag_tensor *t = NULL;
  agt_err(ag_buffer_write(b, v, AG_F32, 2, 1, 0), AG_ERR_FREED, "freed");
  agt_err(ag_buffer_read(b, 0, 1, AG_F32, v, sizeof v), AG_ERR_FREED, "freed");
  agt_err(ag_get_rows(b, &i0, 1, &t), AG_ERR_FREED, "freed");
  agt_err(ag_buffer_wait(b), AG_ERR_FREED, "freed");
  assert_null(t);
  ag_ctx_free(ctx);
}

/* S17: resetting the workspace frees temporaries, never a buffer. */
static void workspace_reset_keeps_buffers(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 3, 20, AG_F32, &b));
  float d[60];
  for (int i = 0; i < 60; i++) d[i] = (float)i * 1.5f;
  agt_ok(ag_buffer_write(b, d, AG_F32, 3, 20, 0));
  int64_t idx[2] = {19, 4};
  ag_tensor *t = NULL;
  for (int round = 0; round < 3; round++) {
    agt_ok(ag_get_rows(b, idx, 2, &t));
    float *got = agt_read_f32(t);
    assert_memory_equal(got, d + 57, 3 * sizeof(float));
    assert_memory_equal(got + 3, d + 12, 3 * sizeof(float));
    free(got);
    ag_ctx_reset(ctx);
    float tmp[6];
    agt_err(ag_tensor_read(t, tmp, sizeof tmp), AG_ERR_FREED, "reset");
  }
  ag_buffer_info info;
  agt_ok(ag_buffer_get_info(b, &info));
  assert_int_not_equal(info.where, AG_WHERE_FREED);
  float out[60];
  agt_ok(ag_buffer_read(b, 0, 20, AG_F32, out, sizeof out));
  assert_memory_equal(out, d, sizeof d);
  ag_ctx_free(ctx);
}

/* The steady loop (gather, reset) stops allocating after its first pass. */
static void workspace_steady_loop_does_not_allocate(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 11, 10000, AG_F32, &b));
  int64_t idx[512];
  for (int j = 0; j < 512; j++) idx[j] = j * 7;
  ag_ctx_stats s1, s2;
  for (int it = 0; it < 50; it++) {
    if (it == 2) ag_ctx_get_stats(ctx, &s1);
    ag_tensor *t[8];
    for (int k = 0; k < 8; k++) agt_ok(ag_get_rows(b, idx, 512, &t[k]));
    ag_ctx_reset(ctx);
  }
  ag_ctx_get_stats(ctx, &s2);
  assert_int_equal(s2.allocs, s1.allocs);
  ag_ctx_free(ctx);
}

/* S19: every allocation gets a new generation, even at a reused address. */
static void generation_is_new_for_every_allocation(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  uint64_t last = 0;
  for (int i = 0; i < 5; i++) {
    ag_buffer *b = NULL;
    agt_ok(ag_buffer_create(ctx, 16, 1024, AG_F32, &b));
    ag_buffer_info info;
    agt_ok(ag_buffer_get_info(b, &info));
    assert_true(info.generation > last);
    last = info.generation;
    ag_buffer_free(b);
  }
  ag_ctx_free(ctx);
}

/* S4: an allocation failure is an error naming the size; nothing leaks. */
static void create_fails_cleanly_when_allocation_fails(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ctx_stats s0, s1;
  ag_ctx_get_stats(ctx, &s0);
  agt_ok(ag_ctx_inject_fault(ctx, AG_FAULT_ALLOC, 0));
  ag_buffer *b = (ag_buffer *)0x1;
  agt_err(ag_buffer_create(ctx, 1000, 1000, AG_F32, &b), AG_ERR_OUT_OF_MEMORY, "could not allocate 3.8 MB");
  assert_ptr_equal(b, (ag_buffer *)0x1);
  ag_ctx_get_stats(ctx, &s1);
  assert_int_equal(s1.live_bytes, s0.live_bytes);
  assert_int_equal(s1.allocs, s0.allocs);
  agt_ok(ag_buffer_create(ctx, 1000, 1000, AG_F32, &b)); /* the fault fired once */
  ag_ctx_free(ctx);
}

/* S3: more than 85% of the free memory is refused with MB requested, free, usable. */
static void create_refuses_more_than_85_percent_of_free_memory(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  size_t free_b = 0, total_b = 0;
  agt_ok(ag_ctx_mem_info(ctx, &free_b, &total_b));
  assert_true(free_b > 0 && total_b >= free_b);
  int64_t cap = (int64_t)((double)free_b * 0.90 / 4.0); /* 90% in f32 columns of 1 row */
  ag_buffer *b = NULL;
  agt_err(ag_buffer_create(ctx, 1, cap, AG_F32, &b), AG_ERR_OUT_OF_MEMORY, "MB requested");
  char expect[64];
  snprintf(expect, sizeof expect, "%.1f MB requested", (double)cap * 4.0 / 1048576.0);
  assert_non_null(strstr(ag_last_error(), expect));
  assert_non_null(strstr(ag_last_error(), "MB free"));
  assert_non_null(strstr(ag_last_error(), "(85%) may be used"));
  assert_null(b);
  ag_ctx_free(ctx);
}

/* S8: a failing download leaves the caller's memory and the buffer as they were. */
static void read_failure_changes_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, 2, 4, AG_F32, &b));
  float d[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
  agt_ok(ag_buffer_write(b, d, AG_F32, 2, 4, 0));
  memset(out, 0, sizeof out);
  agt_ok(ag_ctx_inject_fault(ctx, AG_FAULT_DOWNLOAD, 0));
  agt_err(ag_buffer_read(b, 0, 4, AG_F32, out, sizeof out), AG_ERR_DEVICE, "injected");
  for (int i = 0; i < 8; i++) assert_true(out[i] == 0.0f);
  agt_ok(ag_ctx_inject_fault(ctx, AG_FAULT_UPLOAD, 0));
  float nd[8] = {9, 9, 9, 9, 9, 9, 9, 9};
  agt_err(ag_buffer_write(b, nd, AG_F32, 2, 4, 0), AG_ERR_DEVICE, "injected");
  agt_ok(ag_buffer_read(b, 0, 4, AG_F32, out, sizeof out));
  assert_memory_equal(out, d, sizeof d);
  ag_ctx_free(ctx);
}

/* Persistent tensors: create from host, write, read back; zeros without data. */
static void tensor_create_write_read_roundtrip(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  float a[6] = {1, 2, 3, 4, 5, 6}, z[6], got[6];
  ag_tensor *t = NULL, *tz = NULL;
  agt_ok(ag_tensor_create(ctx, 3, 2, AG_F32, a, &t));
  agt_ok(ag_tensor_create(ctx, 2, 3, AG_F32, NULL, &tz));
  agt_ok(ag_tensor_read(tz, z, sizeof z));
  for (int i = 0; i < 6; i++) assert_true(z[i] == 0.0f);
  agt_ok(ag_tensor_read(t, got, sizeof got));
  assert_memory_equal(got, a, sizeof a);
  float b2[6] = {-1, -2, -3, -4, -5, -6};
  agt_ok(ag_tensor_write(t, b2, sizeof b2));
  agt_ok(ag_tensor_read(t, got, sizeof got));
  assert_memory_equal(got, b2, sizeof b2);
  ag_ctx_reset(ctx); /* persistent tensors survive a reset */
  agt_ok(ag_tensor_read(t, got, sizeof got));
  assert_memory_equal(got, b2, sizeof b2);
  ag_tensor_free(t);
  ag_tensor_free(NULL);
  ag_ctx_free(ctx); /* frees tz */
}

/* The streaming copy (non-temporal stores into staging) copies exactly like
 * memcpy for every alignment of source and destination and every length,
 * and writes nothing outside the destination range. */
static void copy_stream_matches_source_at_any_alignment(void **state) {
  (void)state;
  agt_rng g = {21};
  const size_t big = ((size_t)4 << 20) + 333, pad = 64;
  unsigned char *src = malloc(big + 2 * pad), *dst = malloc(big + 2 * pad);
  assert_non_null(src);
  assert_non_null(dst);
  for (size_t i = 0; i < big + 2 * pad; i++) src[i] = (unsigned char)(agt_next(&g) >> 56);
  /* every source and destination offset 0..15, every length 0..300 */
  for (size_t so = 0; so < 16; so++)
    for (size_t d0 = 0; d0 < 16; d0++)
      for (size_t len = 0; len <= 300; len++) {
        memset(dst, 0xa5, len + 2 * pad);
        ag__copy_stream(dst + pad + d0, src + so, len);
        if (memcmp(dst + pad + d0, src + so, len) != 0)
          fail_msg("source offset %zu, destination offset %zu, %zu bytes: copy differs", so, d0, len);
        for (size_t i = 0; i < pad + d0; i++)
          if (dst[i] != 0xa5) fail_msg("byte %zu before the destination was written (len %zu)", i, len);
        for (size_t i = pad + d0 + len; i < len + 2 * pad; i++)
          if (dst[i] != 0xa5) fail_msg("byte %zu after the destination was written (len %zu)", i, len);
      }
  /* a few MB, odd lengths, several alignments; the bytes after the range stay */
  const size_t lens[] = {(size_t)1 << 20, ((size_t)1 << 20) + 1, ((size_t)3 << 20) - 7, big};
  const size_t offs[][2] = {{0, 0}, {1, 0}, {0, 1}, {7, 13}, {15, 15}, {8, 3}, {13, 62}};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (size_t oi = 0; oi < sizeof offs / sizeof offs[0]; oi++) {
      size_t so = offs[oi][0], d0 = offs[oi][1], len = lens[li] - (so > d0 ? so : d0);
      memset(dst, 0x5a, big + 2 * pad);
      ag__copy_stream(dst + d0, src + so, len);
      if (memcmp(dst + d0, src + so, len) != 0)
        fail_msg("source offset %zu, destination offset %zu, %zu bytes: copy differs", so, d0, len);
      for (size_t i = 0; i < d0; i++) assert_int_equal(dst[i], 0x5a);
      for (size_t i = d0 + len; i < big + 2 * pad; i++)
        if (dst[i] != 0x5a) fail_msg("byte %zu after %zu bytes at offset %zu was written", i, len, d0);
    }
  /* the fill callback reads from user + off */
  memset(dst, 0, 4096);
  ag__fill_copy_stream(dst + 3, 1000, 3000, src);
  assert_memory_equal(dst + 3, src + 1000, 3000);
  free(src);
  free(dst);
}

/* Writes of every size class of the upload paths (one staged part below
 * 64 KB, a streamed part, a pipelined large upload from 4 MB) from sources
 * at odd addresses and to odd columns come back exactly. */
static void write_sizes_around_the_upload_paths(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {23};
  const int64_t rows = 3, cap = 600001; /* 12 bytes a column, 7.2 MB */
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  ref r = ref_new(rows, cap);
  const int64_t ks[] = {1, 5461, 5462, 21845, 87381, 349525, 349526, 400001, 599999};
  float *d = random_cols(&g, rows, cap + 1);
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    int64_t k = ks[i], off = (int64_t)(i * 7919) % (cap - k + 1);
    const float *src = d + 1 + i; /* odd addresses: 4 bytes off any 16 */
    agt_ok(ag_buffer_write(b, src, AG_F32, rows, k, off));
    ref_write(&r, src, k, off);
  }
  assert_buffer_equals(b, &r);
  free(d);
  free(r.v);
  ag_ctx_free(ctx);
}

/* Small writes (168 B to 4200 B, through the staging ring, some of it
 * freed by a wait on the queue) leave the caller free to reuse the memory
 * at once, also while the queue is still busy with earlier work: each
 * source is overwritten right after its write, and every column is read
 * back against the values written. */
static void small_writes_reuse_the_callers_memory_at_once(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {31};
  const int64_t rows = 42, cap = 4000;
  ag_buffer *b = NULL, *busy = NULL;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  agt_ok(ag_buffer_create(ctx, 1024, 4096, AG_F32, &busy));
  float *want = malloc(sizeof(float) * (size_t)(rows * cap));
  float src[42 * 25];
  int64_t col = 0;
  for (int rep = 0; col < cap; rep++) {
    const int64_t k = rep % 3 == 0 ? 1 : (rep % 3 == 1 ? 24 : 25); /* 168 B, 4032 B, 4200 B */
    const int64_t kk = col + k <= cap ? k : cap - col;
    if (rep % 16 == 0) { /* work queued ahead of the writes */
      ag_tensor *t;
      int64_t idx[64];
      for (int j = 0; j < 64; j++) idx[j] = (int64_t)agt_below(&g, 4096);
      agt_ok(ag_get_rows(busy, idx, 64, &t));
    }
    for (int64_t e = 0; e < rows * kk; e++) src[e] = want[col * rows + e] = agt_uniform(&g, -9, 9);
    agt_ok(ag_buffer_write(b, src, AG_F32, rows, kk, col));
    memset(src, 0xff, sizeof src); /* reuse at once */
    col += kk;
  }
  float *got = malloc(sizeof(float) * (size_t)(rows * cap));
  agt_ok(ag_buffer_read(b, 0, cap, AG_F32, got, sizeof(float) * (size_t)(rows * cap)));
  assert_memory_equal(got, want, sizeof(float) * (size_t)(rows * cap));
  free(got);
  free(want);
  ag_ctx_free(ctx);
}

/* A write from page-locked memory (ag_host_alloc) may reuse the memory as
 * soon as the call returns, whether the queue is idle (the copy may then be
 * sent straight from it) or busy with gathers queued before the write
 * (staged); a gather issued before the write reads the old values, one
 * issued after it the new ones. */
static void write_from_host_alloc_memory_may_be_reused_at_once(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  agt_rng g = {25};
  const int64_t rows = 42, cap = 40000, k = 30001, n = 65536; /* 5.04 MB a write */
  ag_buffer *b = NULL;
  agt_ok(ag_buffer_create(ctx, rows, cap, AG_F32, &b));
  ref r = ref_new(rows, cap);
  const size_t bytes = (size_t)(rows * k) * sizeof(float);
  float *pin = NULL;
  agt_ok(ag_host_alloc(ctx, bytes + 64, (void **)&pin));
  int64_t *idx = malloc(n * sizeof *idx);
  float *old = malloc((size_t)(rows * n) * sizeof *old);
  assert_non_null(idx);
  assert_non_null(old);
  for (int64_t j = 0; j < n; j++) idx[j] = agt_below(&g, cap);
  for (int round = 0; round < 6; round++) {
    float *want = random_cols(&g, rows, k);
    float *src = pin + (round % 3); /* the allocation's start, and 4 or 8 bytes in */
    int64_t off = (round * 3001) % (cap - k + 1);
    int busy = round % 2;
    agt_ok(ag_ctx_sync(ctx));
    ag_tensor *before = NULL, *after = NULL;
    if (busy) /* queued, not waited for: the write finds the queue busy */
      for (int rep = 0; rep < 4; rep++) agt_ok(ag_get_rows(b, idx, n, &before));
    for (int64_t j = 0; j < n; j++) memcpy(old + j * rows, r.v + idx[j] * rows, rows * sizeof(float));
    memcpy(src, want, bytes);
    agt_ok(ag_buffer_write(b, src, AG_F32, rows, k, off));
    memset(src, 0xff, bytes); /* reuse at once */
    ref_write(&r, want, k, off);
    agt_ok(ag_get_rows(b, idx, n, &after));
    if (before) {
      float *gb = agt_read_f32(before);
      assert_memory_equal(gb, old, (size_t)(rows * n) * sizeof(float));
      free(gb);
    }
    float *ga = agt_read_f32(after);
    for (int64_t j = 0; j < n; j++)
      if (memcmp(ga + j * rows, r.v + idx[j] * rows, rows * sizeof(float)) != 0)
        fail_msg("round %d: gather after the write, column %lld differs", round, (long long)idx[j]);
    free(ga);
    assert_buffer_equals(b, &r);
    free(want);
    ag_ctx_reset(ctx);
  }
  ag_host_free(ctx, pin);
  free(old);
  free(idx);
  free(r.v);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(buffer_create_reports_shape_dtype_and_location),
      cmocka_unit_test(buffer_new_is_zero_filled),
      cmocka_unit_test(buffer_write_read_roundtrip_random),
      cmocka_unit_test(buffer_write_vector_and_zero_columns),
      cmocka_unit_test(buffer_ring_wraps_with_two_writes),
      cmocka_unit_test(buffer_read_large_in_parts),
      cmocka_unit_test(buffer_write_f32_into_compact_dtypes_converts),
      cmocka_unit_test(get_rows_matches_host_reference),
      cmocka_unit_test(split_gathers_match_one_thread_and_the_host),
      cmocka_unit_test(get_rows_dev_matches_host_for_every_dtype),
      cmocka_unit_test(back_to_back_gathers_of_different_kinds_each_get_their_rows),
      cmocka_unit_test(get_rows_beyond_2_24_columns),
      cmocka_unit_test(get_rows_beyond_2_31_columns),
      cmocka_unit_test(get_rows_dev_clamps_out_of_range_indices),
      cmocka_unit_test(write_is_ordered_with_gathers),
      cmocka_unit_test(write_sends_only_the_new_columns),
      cmocka_unit_test(get_rows_sends_only_the_indices),
      cmocka_unit_test(xfer_counters_list_and_reset),
      cmocka_unit_test(free_releases_memory_and_pending_gather_completes),
      cmocka_unit_test(large_tables_keep_their_contents_in_any_free_order),
      cmocka_unit_test(freed_buffer_use_is_error_not_crash),
      cmocka_unit_test(workspace_reset_keeps_buffers),
      cmocka_unit_test(workspace_steady_loop_does_not_allocate),
      cmocka_unit_test(generation_is_new_for_every_allocation),
      cmocka_unit_test(create_fails_cleanly_when_allocation_fails),
      cmocka_unit_test(create_refuses_more_than_85_percent_of_free_memory),
      cmocka_unit_test(read_failure_changes_nothing),
      cmocka_unit_test(tensor_create_write_read_roundtrip),
      cmocka_unit_test(copy_stream_matches_source_at_any_alignment),
      cmocka_unit_test(write_sizes_around_the_upload_paths),
      cmocka_unit_test(write_from_host_alloc_memory_may_be_reused_at_once),
      cmocka_unit_test(small_writes_reuse_the_callers_memory_at_once),
  };
  return agt_run(argc, argv, "buffer", tests, sizeof tests / sizeof tests[0]);
}
