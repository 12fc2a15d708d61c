/* test_gather_into.c — a batch straight into other memory, and transitions
 * from it in one launch.
 *
 * ag_replay_gather_into against ag_replay_gather and the host's own
 * conversion (base/convert.h: the device rules), for every storage and
 * every destination dtype, the destinations strided inside one packed
 * block (a framework's [B, fields] tensor) and each in a tensor of its own
 * with gaps; indices (clamped) and importance weights; more destinations
 * than one launch takes; integer storage beyond 2^24 exact; every error,
 * with nothing written; a recorded step replayed after more adds.
 * ag_replay_add_dev through AG__K_SCATTER_FIELDS (one launch: fields, both
 * parts of a wrap, the size and the position) against the composed add of
 * a context whose backend copy refuses that kernel, as tests/
 * test_backend_caps.c masks AG__K_QGRAD; the same mask on
 * AG__K_GATHER_FIELDS runs the composed gather on the CPU and CUDA (Vulkan
 * has neither kernel: there every call composes). Last, ag_replay_add's
 * refusal of integers that floating storage does not hold exactly. */
#include <math.h>

#include "agt.h"
#include "base/convert.h"
#include "core/internal.h"
#include "replay/replay_internal.h" /* ag__replay_set_broken */

/* ---- a backend copy without the fields' kernels ---- */

static ag__backend masked;
static int (*masked_of)(void *, ag__kernel_id, const void *, size_t);

static int no_field_kernels(void *st, ag__kernel_id id, const void *args, size_t size) {
  if (id == AG__K_GATHER_FIELDS || id == AG__K_SCATTER_FIELDS) return 0;
  return !masked_of || masked_of(st, id, args, size);
}

/* A context on the device under test whose backend refuses both kernels. */
static ag_ctx *masked_ctx(void) {
  ag_ctx *ctx = agt_ctx();
  masked = *ctx->be;
  masked_of = ctx->be->supports;
  masked.supports = no_field_kernels;
  for (ag__store *s = ctx->stores.next; s != &ctx->stores; s = s->next)
    if (s->on == ctx->be) s->on = &masked;
  ctx->be = &masked;
  return ctx;
}

/* Whether the device under test has the one-launch kernels. */
static int one_launch(void) { return agt_kind != AG_DEVICE_VULKAN; }

/* ---- a table of four fields ---- */

enum { ROWS = 7, NF = 4 };
static const ag_field fields[NF] = {
    {"obs", 3, AG_F32}, {"action", 1, AG_I32}, {"reward", 1, AG_F32}, {"flags", 2, AG_U8}};

/* Adds k transitions of values every storage takes (whole numbers in 0..250
 * for integer storage, fractions and negatives for floating storage). */
static void add_some(ag_replay *r, int64_t k, int seed) {
  float obs[3 * 64], rew[64];
  int32_t act[64];
  uint8_t fl[2 * 64];
  const int whole = ag_replay_storage(r) == AG_U8 || ag_replay_storage(r) == AG_I32;
  assert_true(k <= 64);
  for (int64_t j = 0; j < k; j++) {
    for (int e = 0; e < 3; e++)
      obs[j * 3 + e] = whole ? (float)((seed * 31 + j * 7 + e * 3) % 250)
                             : (float)(seed + j) * 0.37f - 2.5f + (float)e * 0.61f;
    act[j] = (int32_t)((seed + j * 5) % 9);
    rew[j] = whole ? (float)((j * 13 + seed) % 200) : (float)j * 0.5f - 1.25f;
    fl[2 * j] = (uint8_t)(j % 2), fl[2 * j + 1] = (uint8_t)((j * 37 + seed) % 256);
  }
  const void *data[NF] = {obs, act, rew, fl};
  agt_ok(ag_replay_add(r, data, k));
}

/* The batch ag_replay_gather gives at the indices (clamped here): [ROWS, n] f32. */
static float *gathered(ag_replay *r, const int64_t *idx, int64_t n) {
  int64_t *c = malloc((size_t)n * sizeof *c);
  for (int64_t j = 0; j < n; j++)
    c[j] = idx[j] < 0 ? 0 : idx[j] >= ag_replay_size(r) ? ag_replay_size(r) - 1 : idx[j];
  ag_tensor *b;
  agt_ok(ag_replay_gather(r, c, n, &b));
  float *v = agt_read_f32(b);
  free(c);
  return v;
}

/* A persistent tensor of `bytes` bytes, every byte 0x5a, and its address. */
static ag_tensor *block_of(ag_ctx *ctx, size_t bytes, void **p) {
  unsigned char *h = malloc(bytes);
  memset(h, 0x5a, bytes);
  ag_tensor *t;
  agt_ok(ag_tensor_create(ctx, (int64_t)bytes, 1, AG_U8, h, &t));
  free(h);
  agt_ok(ag_tensor_data(t, p, NULL));
  return t;
}

static unsigned char *read_all(const ag_tensor *t) {
  const size_t bytes = (size_t)ag_tensor_numel(t);
  unsigned char *h = malloc(bytes);
  agt_ok(ag_tensor_read(t, h, bytes));
  return h;
}

/* ---- gathers ---- */

/* Every storage, every destination dtype, on the backend's path and (CPU,
 * CUDA) the composed one: the fields strided in one packed block of
 * ROWS + 2 values a transition (the indices in the row after them, one row
 * left alone), as the host converts ag_replay_gather's batch. */
static void every_storage_into_every_dtype(void **state) {
  (void)state;
  const ag_dtype storages[] = {AG_F32, AG_F16, AG_BF16, AG_U8, AG_I32};
  for (int m = 0; m < (one_launch() ? 2 : 1); m++)
    for (size_t si = 0; si < sizeof storages / sizeof storages[0]; si++) {
      ag_ctx *ctx = m ? masked_ctx() : agt_ctx();
      ag_replay *r;
      agt_ok(ag_replay_create(ctx, fields, NF, 20, storages[si], 1, &r));
      if (storages[si] == AG_U8 || storages[si] == AG_BF16) /* the product by the scale */
        agt_ok(ag_buffer_set_scale(ag_replay_buffer(r), 0.5f));
      add_some(r, 15, 1);
      add_some(r, 12, 2); /* wraps */
      enum { B = 9, LD = ROWS + 2 };
      const int64_t idx[B] = {3, 0, 19, 7, 7, 12, 5, 18, 1};
      int32_t idx32[B];
      for (int j = 0; j < B; j++) idx32[j] = (int32_t)idx[j];
      ag_tensor *ti;
      agt_ok(ag_tensor_create(ctx, B, 1, AG_I32, idx32, &ti));
      float *want = gathered(r, idx, B);
      for (int dt = 0; dt < AG_DTYPE_COUNT_; dt++) {
        const size_t es = ag_dtype_size((ag_dtype)dt), bytes = (size_t)(LD * B) * es;
        void *p;
        ag_tensor *blk = block_of(ctx, bytes, &p);
        ag_replay_dst d[NF + 1];
        int n = 0;
        for (int f = 0; f < NF; f++) {
          int64_t row0;
          agt_ok(ag_replay_field(r, fields[f].name, &row0, NULL));
          d[n++] = (ag_replay_dst){f, (char *)p + (size_t)row0 * es, (ag_dtype)dt, LD};
        }
        if (dt == AG_I32 || dt == AG_I64)
          d[n++] = (ag_replay_dst){AG_REPLAY_DST_INDICES, (char *)p + ROWS * es, (ag_dtype)dt, LD};
        ag_ctx_stats s0, s1;
        ag_ctx_get_stats(ctx, &s0);
        agt_ok(ag_replay_gather_into(r, ti, NULL, d, n));
        ag_ctx_get_stats(ctx, &s1);
        if (!m && one_launch()) assert_int_equal(s1.kernels - s0.kernels, 1);
        unsigned char *got = read_all(blk), *exp = malloc(bytes);
        memset(exp, 0x5a, bytes);
        for (int j = 0; j < B; j++) {
          for (int e = 0; e < ROWS; e++)
            ag__convert_one(exp, (ag_dtype)dt, j * LD + e, want, AG_F32, j * ROWS + e);
          if (dt == AG_I32 || dt == AG_I64) ag__store_int(exp, (ag_dtype)dt, j * LD + ROWS, idx[j]);
        }
        if (memcmp(got, exp, bytes))
          fail_msg("storage %s into %s (%s path): the block differs", ag_dtype_name(storages[si]),
                   ag_dtype_name((ag_dtype)dt), m ? "composed" : "backend's");
        free(got);
        free(exp);
        ag_tensor_free(blk);
      }
      free(want);
      ag_tensor_free(ti);
      ag_replay_free(r);
      ag_ctx_free(ctx);
    }
}

/* Each destination a tensor of its own (gaps between transitions), idx a
 * row with gaps and outside the table (clamped), the weights in two dtypes,
 * a field twice, on both paths; then ag_per_sample's indices and weights. */
static void own_tensors_indices_and_weights(void **state) {
  (void)state;
  for (int m = 0; m < (one_launch() ? 2 : 1); m++) {
    ag_ctx *ctx = m ? masked_ctx() : agt_ctx();
    ag_replay *r;
    agt_ok(ag_replay_create(ctx, fields, NF, 30, AG_F32, 1, &r));
    add_some(r, 30, 3);
    enum { B = 6 };
    const int64_t idx[B] = {-5, 29, 1000, 4, 0, 17};
    int64_t spaced[3 * B];
    for (int j = 0; j < 3 * B; j++) spaced[j] = j % 3 ? 77777 : idx[j / 3];
    ag_tensor *tsp, *ti, *tw;
    agt_ok(ag_tensor_create(ctx, 1, 3 * B, AG_I64, spaced, &tsp));
    void *sp;
    agt_ok(ag_tensor_data(tsp, &sp, NULL));
    agt_ok(ag_tensor_wrap(ctx, sp, 1, B, 3, AG_I64, &ti)); /* a row whose values are 3 apart */
    const float w[B] = {1.0f, 0.25f, 0.7f, 0.125f, 0.5f, 0.33f};
    agt_ok(ag_tensor_create(ctx, 1, B, AG_F32, w, &tw));
    /* field, dtype, ld */
    const struct {
      int field;
      ag_dtype dt;
      int64_t ld;
    } spec[] = {{0, AG_F16, 4},
                {1, AG_I64, 1},
                {2, AG_F32, 1},
                {3, AG_U8, 3},
                {0, AG_BF16, 3},
                {AG_REPLAY_DST_INDICES, AG_I32, 2},
                {AG_REPLAY_DST_WEIGHTS, AG_BF16, 1},
                {AG_REPLAY_DST_WEIGHTS, AG_F32, 2}};
    enum { N = sizeof spec / sizeof spec[0] };
    ag_replay_dst d[N];
    ag_tensor *t[N];
    for (int i = 0; i < N; i++) {
      const size_t bytes = (size_t)(spec[i].ld * B) * ag_dtype_size(spec[i].dt);
      t[i] = block_of(ctx, bytes, &d[i].data);
      d[i].field = spec[i].field, d[i].dtype = spec[i].dt, d[i].ld = spec[i].ld;
    }
    agt_ok(ag_replay_gather_into(r, ti, tw, d, N));
    float *want = gathered(r, idx, B);
    for (int i = 0; i < N; i++) {
      const size_t bytes = (size_t)(spec[i].ld * B) * ag_dtype_size(spec[i].dt);
      unsigned char *got = read_all(t[i]), *exp = malloc(bytes);
      memset(exp, 0x5a, bytes);
      int64_t row0 = 0, width = 1;
      if (spec[i].field >= 0) agt_ok(ag_replay_field(r, fields[spec[i].field].name, &row0, &width));
      for (int j = 0; j < B; j++)
        for (int64_t e = 0; e < width; e++) {
          const int64_t k = j * spec[i].ld + e;
          if (spec[i].field == AG_REPLAY_DST_INDICES)
            ag__store_int(exp, spec[i].dt, k, idx[j] < 0 ? 0 : idx[j] > 29 ? 29 : idx[j]);
          else if (spec[i].field == AG_REPLAY_DST_WEIGHTS)
            ag__convert_one(exp, spec[i].dt, k, w, AG_F32, j);
          else
            ag__convert_one(exp, spec[i].dt, k, want, AG_F32, j * ROWS + row0 + e);
        }
      if (memcmp(got, exp, bytes))
        fail_msg("destination %d (%s path) differs", i, m ? "composed" : "backend's");
      free(got);
      free(exp);
    }
    free(want);
    /* the prioritized sampler's indices ([B, 1] i32) and weights ([1, B] f32) */
    ag_per *per;
    ag_rng *rng;
    agt_ok(ag_per_create(r, 0.6f, &per));
    agt_ok(ag_rng_create(ctx, 11, &rng));
    ag_tensor *pi, *pw;
    agt_ok(ag_per_sample(per, rng, B, 0.4f, &pi, &pw));
    ag_replay_dst pd[3] = {d[5], d[7], d[2]};
    agt_ok(ag_replay_gather_into(r, pi, pw, pd, 3));
    int32_t pidx[B], gi[2 * B];
    float pwt[B], gw[2 * B], gr[B];
    agt_ok(ag_tensor_read(pi, pidx, sizeof pidx));
    agt_ok(ag_tensor_read(pw, pwt, sizeof pwt));
    agt_ok(ag_tensor_read(t[5], gi, sizeof gi));
    agt_ok(ag_tensor_read(t[7], gw, sizeof gw));
    agt_ok(ag_tensor_read(t[2], gr, sizeof gr));
    int64_t p64[B];
    for (int j = 0; j < B; j++) p64[j] = pidx[j];
    want = gathered(r, p64, B);
    for (int j = 0; j < B; j++) {
      assert_int_equal(gi[2 * j], pidx[j]);
      assert_true(gw[2 * j] == pwt[j]);
      assert_true(gr[j] == want[j * ROWS + 4]); /* the reward */
    }
    free(want);
    for (int i = 0; i < N; i++) ag_tensor_free(t[i]);
    ag_tensor_free(tsp);
    ag_tensor_free(tw);
    ag_rng_free(rng);
    ag_replay_free(r);
    ag_ctx_free(ctx);
  }
}

/* 45 destinations (more than one launch takes), and i32 storage beyond
 * 2^24 into i32 and i64 exactly where the kernel runs (through f32 where
 * the call composes: Vulkan). */
static void many_destinations_and_large_integers(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field big[2] = {{"id", 1, AG_I64}, {"step", 2, AG_I32}};
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, big, 2, 8, AG_I32, 1, &r));
  int64_t id[8];
  int32_t st[16];
  for (int j = 0; j < 8; j++) {
    id[j] = 2000000000 - 16777217 * (int64_t)j * 29; /* beyond 2^24, odd */
    st[2 * j] = -16777217 - 2 * j, st[2 * j + 1] = 123456789 + j;
  }
  const void *data[2] = {id, st};
  agt_ok(ag_replay_add(r, data, 8));
  enum { B = 5, N = 45 };
  const int32_t idx[B] = {7, 0, 3, 3, 6};
  ag_tensor *ti;
  agt_ok(ag_tensor_create(ctx, 1, B, AG_I32, idx, &ti));
  ag_replay_dst d[N];
  ag_tensor *t[N];
  for (int i = 0; i < N; i++) {
    const ag_dtype dt = i % 3 == 0 ? AG_I64 : i % 3 == 1 ? AG_I32 : AG_F32;
    const int64_t width = i % 2 ? 2 : 1;
    t[i] = block_of(ctx, (size_t)(width * B) * ag_dtype_size(dt), &d[i].data);
    d[i].field = i % 2, d[i].dtype = dt, d[i].ld = width;
  }
  agt_ok(ag_replay_gather_into(r, ti, NULL, d, N));
  for (int i = 0; i < N; i++) {
    unsigned char *got = read_all(t[i]);
    for (int j = 0; j < B; j++)
      for (int e = 0; e <= (i % 2); e++) {
        const int64_t v = i % 2 ? st[2 * idx[j] + e] : id[idx[j]];
        const int64_t k = j * (1 + (i % 2)) + e;
        if (d[i].dtype == AG_F32) {
          assert_true(((float *)(void *)got)[k] == (float)v);
        } else {
          const int64_t g = d[i].dtype == AG_I64 ? ((int64_t *)(void *)got)[k] : ((int32_t *)(void *)got)[k];
          if (one_launch())
            assert_int_equal(g, v);
          else
            assert_int_equal(g, (int64_t)(float)v); /* composed: through f32 */
        }
      }
    free(got);
    ag_tensor_free(t[i]);
  }
  ag_tensor_free(ti);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

/* Every error, each leaving the destination block as it was. */
static void bad_arguments_write_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *other = agt_ctx();
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, fields, NF, 10, AG_F32, 1, &r));
  add_some(r, 10, 4);
  enum { B = 3 };
  const int32_t idx[B] = {1, 2, 3};
  const float w[B] = {1, 2, 3};
  void *p, *q;
  ag_tensor *blk = block_of(ctx, 256, &p);
  ag_tensor *ti, *tw, *to, *tf, *tm, *tw_i, *tw_n, *tw_gap, *tw_o, *freed;
  agt_ok(ag_tensor_create(ctx, B, 1, AG_I32, idx, &ti));
  agt_ok(ag_tensor_create(ctx, 1, B, AG_F32, w, &tw));
  agt_ok(ag_tensor_create(other, B, 1, AG_I32, idx, &to));
  agt_ok(ag_tensor_create(ctx, B, 1, AG_F32, w, &tf));
  agt_ok(ag_tensor_create(ctx, 2, 3, AG_I32, NULL, &tm));
  agt_ok(ag_tensor_create(ctx, 1, B, AG_I32, idx, &tw_i));
  agt_ok(ag_tensor_create(ctx, 1, B + 1, AG_F32, NULL, &tw_n));
  agt_ok(ag_tensor_create(ctx, 1, 2 * B, AG_F32, NULL, &tw_gap));
  agt_ok(ag_tensor_create(other, 1, B, AG_F32, w, &tw_o));
  ag_tensor *freed_w;
  agt_ok(ag_slice_rows(ti, 0, B, &freed));
  agt_ok(ag_slice_rows(tw, 0, 1, &freed_w));
  ag_ctx_reset(ctx); /* the views are gone with the temporaries (before any other is made) */
  const ag_replay_dst ok = {0, p, AG_F32, 3};
  agt_err(ag_replay_gather_into(r, freed, NULL, &ok, 1), AG_ERR_FREED, "idx has been freed");
  agt_err(ag_replay_gather_into(r, ti, freed_w, &ok, 1), AG_ERR_FREED, "weights has been freed");
  agt_ok(ag_tensor_data(tw_gap, &q, NULL));
  ag_tensor *gap;
  agt_ok(ag_tensor_wrap(ctx, q, 1, B, 2, AG_F32, &gap));
  ag_replay_dst d;
#define BAD(field_, data_, dtype_, ld_, status, part)               \
  do {                                                              \
    d = (ag_replay_dst){field_, data_, dtype_, ld_};                \
    agt_err(ag_replay_gather_into(r, ti, tw, &d, 1), status, part); \
  } while (0)
  BAD(4, p, AG_F32, 3, AG_ERR_INVALID_ARG, "neither a field");
  BAD(-3, p, AG_F32, 3, AG_ERR_INVALID_ARG, "neither a field");
  BAD(0, NULL, AG_F32, 3, AG_ERR_INVALID_ARG, "has no data");
  BAD(0, p, (ag_dtype)9, 3, AG_ERR_INVALID_ARG, "unknown dtype 9");
  BAD(AG_REPLAY_DST_INDICES, p, AG_F32, 1, AG_ERR_INVALID_ARG, "indices are i32 or i64");
  BAD(0, (char *)p + 2, AG_F32, 3, AG_ERR_INVALID_ARG, "not aligned");
  BAD(3, (char *)p + 1, AG_I32, 2, AG_ERR_INVALID_ARG, "not aligned");
  BAD(0, p, AG_F32, 2, AG_ERR_SHAPE, "less than the width 3");
  BAD(AG_REPLAY_DST_WEIGHTS, p, AG_F32, 0, AG_ERR_SHAPE, "less than the width 1");
  BAD(0, p, AG_F32, INT64_MAX / 2, AG_ERR_INVALID_ARG, "overflows");
#undef BAD
  const ag_replay_dst wd = {AG_REPLAY_DST_WEIGHTS, p, AG_F32, 1};
  agt_err(ag_replay_gather_into(r, ti, NULL, &wd, 1), AG_ERR_INVALID_ARG, "weights is NULL");
  agt_err(ag_replay_gather_into(NULL, ti, NULL, &ok, 1), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_replay_gather_into(r, NULL, NULL, &ok, 1), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_replay_gather_into(r, ti, NULL, NULL, 1), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_replay_gather_into(r, ti, NULL, &ok, 0), AG_ERR_INVALID_ARG, "n_dst = 0");
  agt_err(ag_replay_gather_into(r, to, NULL, &ok, 1), AG_ERR_INVALID_ARG, "another context");
  agt_err(ag_replay_gather_into(r, ti, tw_o, &ok, 1), AG_ERR_INVALID_ARG, "another context");
  agt_err(ag_replay_gather_into(r, tf, NULL, &ok, 1), AG_ERR_SHAPE, "dtype f32");
  agt_err(ag_replay_gather_into(r, tm, NULL, &ok, 1), AG_ERR_SHAPE, "[2, 3]");
  agt_err(ag_replay_gather_into(r, ti, tw_i, &ok, 1), AG_ERR_SHAPE, "weights has dtype i32");
  agt_err(ag_replay_gather_into(r, ti, tw_n, &ok, 1), AG_ERR_SHAPE, "[1, 4]");
  agt_err(ag_replay_gather_into(r, ti, gap, &ok, 1), AG_ERR_SHAPE, "gaps");
  /* a good destination beside a bad one: nothing runs */
  ag_replay_dst two[2] = {ok, {1, p, AG_I64, 0}};
  agt_err(ag_replay_gather_into(r, ti, NULL, two, 2), AG_ERR_SHAPE, "dst[1] (action)");
  unsigned char *got = read_all(blk);
  for (int i = 0; i < 256; i++) assert_int_equal(got[i], 0x5a);
  free(got);
  agt_ok(ag_replay_gather_into(r, ti, tw, &ok, 1)); /* and the good call works */
  /* the table's buffer freed; a table a device error left half written */
  ag_buffer_free(ag_replay_buffer(r));
  agt_err(ag_replay_gather_into(r, ti, NULL, &ok, 1), AG_ERR_FREED, "buffer has been freed");
  ag__replay_set_broken(r);
  agt_err(ag_replay_gather_into(r, ti, NULL, &ok, 1), AG_ERR_STATE, "free the table");
  ag_tensor_free(blk);
  ag_tensor_free(ti);
  ag_tensor_free(tw);
  ag_tensor_free(to);
  ag_tensor_free(tf);
  ag_tensor_free(tm);
  ag_tensor_free(tw_i);
  ag_tensor_free(tw_n);
  ag_tensor_free(tw_gap);
  ag_tensor_free(tw_o);
  ag_replay_free(r);
  ag_ctx_free(other);
  ag_ctx_free(ctx);
}

/* ---- recorded ---- */

typedef struct rec_user {
  ag_replay *r;
  ag_tensor *idx; /* NULL: drawn in the step */
  ag_rng *rng;
  ag_replay_dst d[3];
} rec_user;

static ag_status gather_step(ag_ctx *ctx, void *user) {
  (void)ctx;
  rec_user *u = user;
  ag_tensor *idx = u->idx;
  ag_status s = idx ? AG_OK : ag_randint_dev(u->rng, ag_replay_size_tensor(u->r), 4, AG_I32, &idx);
  return s ? s : ag_replay_gather_into(u->r, idx, NULL, u->d, 3);
}

/* The obs (f16, ld 4), the action (i64) and the indices (i32) of B = 4. */
static void check_recorded(rec_user *u, ag_tensor *const *t) {
  uint16_t obs[4 * 4];
  int64_t act[4];
  int32_t idx[4];
  agt_ok(ag_tensor_read(t[0], obs, sizeof obs));
  agt_ok(ag_tensor_read(t[1], act, sizeof act));
  agt_ok(ag_tensor_read(t[2], idx, sizeof idx));
  int64_t i64[4];
  for (int j = 0; j < 4; j++) i64[j] = idx[j];
  float *want = gathered(u->r, i64, 4);
  for (int j = 0; j < 4; j++) {
    for (int e = 0; e < 3; e++) assert_int_equal(obs[j * 4 + e], ag__f16_encode(want[j * ROWS + e]));
    assert_int_equal(obs[j * 4 + 3], 0x5a5a); /* the gap */
    assert_int_equal(act[j], (int64_t)want[j * ROWS + 3]);
  }
  free(want);
}

static void a_recorded_step_gathers_the_table_as_it_is(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, fields, NF, 16, AG_F32, 1, &r));
  add_some(r, 10, 5);
  const int32_t fixed[4] = {0, 3, 9, 2};
  rec_user u = {r, NULL, NULL, {{0}}};
  agt_ok(ag_tensor_create(ctx, 4, 1, AG_I32, fixed, &u.idx));
  agt_ok(ag_rng_create(ctx, 3, &u.rng));
  ag_tensor *t[3];
  t[0] = block_of(ctx, 4 * 4 * 2, &u.d[0].data);
  t[1] = block_of(ctx, 4 * 8, &u.d[1].data);
  t[2] = block_of(ctx, 4 * 4, &u.d[2].data);
  u.d[0].field = 0, u.d[0].dtype = AG_F16, u.d[0].ld = 4;
  u.d[1].field = 1, u.d[1].dtype = AG_I64, u.d[1].ld = 1;
  u.d[2].field = AG_REPLAY_DST_INDICES, u.d[2].dtype = AG_I32, u.d[2].ld = 1;
  ag_capture *cap;
  agt_ok(ag_capture_create(ctx, gather_step, &u, &cap));
  unsigned char *untouched = read_all(t[1]);
  for (int i = 0; i < 32; i++) assert_int_equal(untouched[i], 0x5a); /* recorded, not run */
  free(untouched);
  agt_ok(ag_capture_replay(cap));
  check_recorded(&u, t);
  add_some(r, 10, 6); /* columns 10..15, 0..3 anew: 0 and 3 of the indices */
  const int32_t moved[4] = {1, 15, 3, 0};
  agt_ok(ag_tensor_write(u.idx, moved, sizeof moved));
  agt_ok(ag_capture_replay(cap));
  check_recorded(&u, t);
  ag_capture_free(cap);
  /* indices drawn inside the step: what they point at lands beside them */
  ag_tensor_free(u.idx);
  u.idx = NULL;
  agt_ok(ag_capture_create(ctx, gather_step, &u, &cap));
  for (int k = 0; k < 3; k++) {
    agt_ok(ag_capture_replay(cap));
    check_recorded(&u, t);
    add_some(r, 5, 7 + k);
  }
  ag_capture_free(cap);
  for (int i = 0; i < 3; i++) ag_tensor_free(t[i]);
  ag_rng_free(u.rng);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

/* ---- adds from device memory ---- */

/* k transitions of `n` fields on ctx as device tensors: field i of width
 * w_i in dtype dt_i, the first in a view with a gap row (ld = width + 1). */
static void dev_batch(ag_ctx *ctx, const ag_field *fs, int n, int64_t k, int seed, ag_tensor **keep,
                      ag_tensor **data) {
  for (int i = 0; i < n; i++) {
    const int64_t w = fs[i].width, ld = i == 0 ? w + 1 : w;
    const size_t es = ag_dtype_size(fs[i].dtype);
    unsigned char *h = malloc((size_t)(ld * k) * es);
    for (int64_t x = 0; x < ld * k; x++) {
      const double v =
          (double)((x * 7 + seed * 13 + i * 5) % 300) * (fs[i].dtype == AG_F32 ? 0.25 : 1.0) - 20;
      const float f = (float)v;
      ag__convert_one(h, fs[i].dtype, x, &f, AG_F32, 0); /* integers: saturated, u8 from 0 */
    }
    agt_ok(ag_tensor_create(ctx, ld, k, fs[i].dtype, h, &keep[i]));
    free(h);
    void *p;
    agt_ok(ag_tensor_data(keep[i], &p, NULL));
    agt_ok(ag_tensor_wrap(ctx, p, w, k, ld, fs[i].dtype, &data[i]));
  }
}

static int64_t read_i64(const ag_tensor *t) {
  int64_t v;
  agt_ok(ag_tensor_read(t, &v, sizeof v));
  return v;
}

/* The same adds on the backend's one launch and on the composed add (the
 * masked context), with the prioritized sampler: the tables, sizes,
 * positions and priorities agree; one kernel an add where the backend has
 * it; a table of 45 fields takes two launches. */
static void device_adds_in_one_launch_match_the_composed_ones(void **state) {
  (void)state;
  const ag_field four[4] = {
      {"obs", 3, AG_F32}, {"action", 1, AG_I32}, {"reward", 1, AG_F16}, {"flags", 2, AG_U8}};
  ag_field many[45];
  char names[45][8];
  for (int i = 0; i < 45; i++) {
    snprintf(names[i], sizeof names[i], "f%d", i);
    many[i] = (ag_field){names[i], 1 + i % 2, i % 3 ? AG_F32 : AG_I32};
  }
  const ag_dtype storages[] = {AG_F32, AG_U8, AG_BF16, AG_I32};
  for (size_t si = 0; si < sizeof storages / sizeof storages[0]; si++)
    for (int wide = 0; wide < 2; wide++) {
      const ag_field *fs = wide ? many : four;
      const int n = wide ? 45 : 4;
      ag_ctx *ctx = agt_ctx(), *mc = masked_ctx();
      ag_replay *ra, *rb;
      agt_ok(ag_replay_create(ctx, fs, n, 10, storages[si], 1, &ra));
      agt_ok(ag_replay_create(mc, fs, n, 10, storages[si], 1, &rb));
      ag_per *pa = NULL, *pb = NULL;
      if (!wide && si % 2) { /* the samplers hear of the adds alike */
        agt_ok(ag_per_create(ra, 0.6f, &pa));
        agt_ok(ag_per_create(rb, 0.6f, &pb));
      }
      const int64_t batches[5] = {4, 5, 7, 10, 3}; /* 4, 9, 16 (wraps), 26 (all), 29 */
      for (int bi = 0; bi < 5; bi++) {
        ag_tensor *ka[45], *kb[45], *da[45], *db[45];
        dev_batch(ctx, fs, n, batches[bi], bi, ka, da);
        dev_batch(mc, fs, n, batches[bi], bi, kb, db);
        ag_ctx_stats s0, s1;
        ag_ctx_get_stats(ctx, &s0);
        agt_ok(ag_replay_add_dev(ra, da, batches[bi]));
        ag_ctx_get_stats(ctx, &s1);
        if (one_launch() && !pa) assert_int_equal(s1.kernels - s0.kernels, wide ? 2 : 1);
        agt_ok(ag_replay_add_dev(rb, db, batches[bi]));
        for (int i = 0; i < n; i++) ag_tensor_free(ka[i]), ag_tensor_free(kb[i]);
        ag_ctx_reset(ctx);
        ag_ctx_reset(mc);
        assert_int_equal(ag_replay_size(ra), ag_replay_size(rb));
        assert_int_equal(ag_replay_position(ra), ag_replay_position(rb));
        assert_int_equal(read_i64(ag_replay_size_tensor(ra)), ag_replay_size(ra));
        assert_int_equal(read_i64(ag_replay_position_tensor(ra)), ag_replay_position(ra));
        assert_int_equal(read_i64(ag_replay_size_tensor(rb)), ag_replay_size(rb));
        assert_int_equal(read_i64(ag_replay_position_tensor(rb)), ag_replay_position(rb));
        const size_t bytes = (size_t)(ag_replay_rows(ra) * 10) * ag_dtype_size(storages[si]);
        unsigned char *a = malloc(bytes), *b = malloc(bytes);
        agt_ok(ag_buffer_read(ag_replay_buffer(ra), 0, 10, storages[si], a, bytes));
        agt_ok(ag_buffer_read(ag_replay_buffer(rb), 0, 10, storages[si], b, bytes));
        if (memcmp(a, b, bytes))
          fail_msg("storage %s, %d fields, add %d: the tables differ", ag_dtype_name(storages[si]), n, bi);
        free(a);
        free(b);
      }
      if (pa) {
        double ta, tb;
        agt_ok(ag_per_total(pa, &ta));
        agt_ok(ag_per_total(pb, &tb));
        assert_true(ta == tb);
      }
      ag_replay_free(ra);
      ag_replay_free(rb);
      ag_ctx_free(ctx);
      ag_ctx_free(mc);
    }
}

/* Small host adds one after another with no wait between them (on a GPU
 * each is read in place from the staging ring, which they go around many
 * times), wrapping the ring often: the table then holds exactly the last
 * transitions, as a host ring of the same adds. */
static void host_adds_in_a_row_all_land(void **state) {
  (void)state;
  enum { CAP = 701, ROUNDS = 1500, W = 3 };
  ag_ctx *ctx = agt_ctx();
  const ag_field f[1] = {{"x", W, AG_F32}};
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, f, 1, CAP, AG_F32, 1, &r));
  float *ring = calloc(CAP * W, sizeof *ring);
  int64_t pos = 0, id = 0;
  for (int round = 0; round < ROUNDS; round++) {
    const int64_t k = 1 + round % 5;
    float x[5 * W];
    for (int64_t j = 0; j < k; j++, id++) {
      x[j * W] = (float)id, x[j * W + 1] = -(float)id, x[j * W + 2] = 0.5f * (float)id;
      memcpy(ring + pos * W, x + j * W, W * sizeof *x);
      pos = (pos + 1) % CAP;
    }
    const void *d[1] = {x};
    agt_ok(ag_replay_add(r, d, k));
  }
  assert_int_equal(ag_replay_size(r), CAP);
  int64_t *all = malloc(CAP * sizeof *all);
  for (int64_t i = 0; i < CAP; i++) all[i] = i;
  float *got = gathered(r, all, CAP); /* W values a slot, slot after slot */
  for (int64_t i = 0; i < CAP; i++)
    for (int e = 0; e < W; e++)
      if (got[i * W + e] != ring[i * W + e])
        fail_msg("slot %lld value %d: %g, the host ring has %g", (long long)i, e, (double)got[i * W + e],
                 (double)ring[i * W + e]);
  free(got);
  free(all);
  free(ring);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

/* ---- the host add's refusal ---- */

static void inexact_integers_are_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field fs[2] = {{"obs", 1, AG_F32}, {"id", 1, AG_I64}};
  const struct {
    ag_dtype st;
    int64_t held, refused;
  } cases[] = {{AG_F32, 16777216, 16777217},   {AG_F32, (int64_t)1 << 40, ((int64_t)1 << 40) + 1},
               {AG_F32, -16777216, -16777217}, {AG_F16, 2048, 2049},
               {AG_F16, 4096, 65537},          {AG_BF16, 256, 257},
               {AG_BF16, 258, -257},           {AG_F32, INT64_MIN, INT64_MAX}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ag_replay *r;
    agt_ok(ag_replay_create(ctx, fs, 2, 4, cases[i].st, 1, &r));
    float obs[2] = {0.5f, 1.5f};
    int64_t id[2] = {cases[i].held, 7};
    const void *data[2] = {obs, id};
    agt_ok(ag_replay_add(r, data, 2));
    float back[2 * 4];
    agt_ok(ag_buffer_read(ag_replay_buffer(r), 0, 2, AG_F32, back, 2 * 2 * sizeof(float)));
    assert_true((int64_t)back[1] == cases[i].held);
    id[0] = 3, id[1] = cases[i].refused;
    char part[64];
    snprintf(part, sizeof part, "field 'id' value %lld (transition 1)", (long long)cases[i].refused);
    agt_err(ag_replay_add(r, data, 2), AG_ERR_OUT_OF_RANGE, part);
    assert_non_null(strstr(ag_last_error(), ag_dtype_name(cases[i].st)));
    assert_int_equal(ag_replay_size(r), 2); /* nothing changed */
    assert_int_equal(ag_replay_position(r), 2);
    ag_replay_free(r);
  }
  /* i32 and u8 fields the same way; integer storage takes its range as before */
  const ag_field gs[2] = {{"a", 1, AG_I32}, {"b", 1, AG_U8}};
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, gs, 2, 4, AG_BF16, 1, &r));
  int32_t a[1] = {257};
  uint8_t b[1] = {255};
  const void *data[2] = {a, b};
  agt_err(ag_replay_add(r, data, 1), AG_ERR_OUT_OF_RANGE, "field 'a' value 257");
  a[0] = 256;
  agt_ok(ag_replay_add(r, data, 1)); /* every u8 value is held */
  ag_replay_free(r);
  agt_ok(ag_replay_create(ctx, gs, 2, 4, AG_I32, 1, &r));
  a[0] = 2147483647;
  agt_ok(ag_replay_add(r, data, 1));
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_storage_into_every_dtype),
      cmocka_unit_test(own_tensors_indices_and_weights),
      cmocka_unit_test(many_destinations_and_large_integers),
      cmocka_unit_test(bad_arguments_write_nothing),
      cmocka_unit_test(a_recorded_step_gathers_the_table_as_it_is),
      cmocka_unit_test(device_adds_in_one_launch_match_the_composed_ones),
      cmocka_unit_test(host_adds_in_a_row_all_land),
      cmocka_unit_test(inexact_integers_are_refused),
  };
  return agt_run(argc, argv, "gather_into", tests, sizeof tests / sizeof tests[0]);
}
