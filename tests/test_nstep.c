/* test_nstep.c — n-step returns of sampled transitions (ag_replay_nstep)
 * against a host reference of the test's own.
 *
 * The reference keeps a mirror of every table the test fills: the stored
 * reward and flags of each column, and the serial number of the transition
 * written there (its place in the order of all adds; -1 while unwritten).
 * Its walk goes on from column c to c + stride while c holds a transition
 * and the next column's serial is larger: it never reads a column that was
 * not written after c, which is what the ring's write head means, without
 * the ring's rank arithmetic of the library. Episodes of several
 * environment copies (1 or 3, interleaved as a vector environment adds
 * them) terminate and truncate at random; tables that are filling, full at
 * position 0 and wrapped at every position are checked, every valid column
 * (and indices outside the table, clamped), for n in {1, 3, 5}, gamma in
 * {0, 0.9, 1}, strides 1 and 3, bit for bit. Then a few hand-made values,
 * a recorded step replayed after more adds, adds from device memory, a
 * table loaded from a file, and bad arguments. */
#include <math.h>
#include <unistd.h>

#include "agt.h"
#include "replay/replay_internal.h" /* ag__replay_set_broken */

/* ---- the host mirror ---- */

enum { F_OBS, F_ACT, F_REW, F_NEXT, F_TERM, F_TRUNC, N_FIELDS };

static const ag_field fields[N_FIELDS] = {
    {"obs", 2, AG_F32},      {"action", 1, AG_F32},     {"reward", 1, AG_F32},
    {"next_obs", 2, AG_F32}, {"terminated", 1, AG_F32}, {"truncated", 1, AG_F32},
};

typedef struct mirror {
  int64_t cap, pos, size, serial_next;
  float *rew, *term, *trunc;
  int64_t *serial;
} mirror;

static void mirror_new(mirror *m, int64_t cap) {
  memset(m, 0, sizeof *m);
  m->cap = cap;
  m->rew = calloc((size_t)cap, sizeof *m->rew);
  m->term = calloc((size_t)cap, sizeof *m->term);
  m->trunc = calloc((size_t)cap, sizeof *m->trunc);
  m->serial = malloc((size_t)cap * sizeof *m->serial);
  for (int64_t i = 0; i < cap; i++) m->serial[i] = -1;
}

static void mirror_free(mirror *m) {
  free(m->rew);
  free(m->term);
  free(m->trunc);
  free(m->serial);
}

/* k transitions as the ring writes them: column pos + i (mod capacity). */
static void mirror_add(mirror *m, const float *rew, const float *term, const float *trunc, int64_t k) {
  for (int64_t i = 0; i < k; i++) {
    const int64_t c = (m->pos + i) % m->cap;
    m->rew[c] = rew[i];
    m->term[c] = term[i];
    m->trunc[c] = trunc[i];
    m->serial[c] = m->serial_next++;
  }
  m->pos = (m->pos + k) % m->cap;
  m->size = m->size + k < m->cap ? m->size + k : m->cap;
}

/* The reference walk of one index. */
static void ref_walk(const mirror *m, int64_t raw, int n, float gamma, int64_t stride, int use_trunc,
                     float scale, float *ret, float *disc, int64_t *last) {
  int64_t c = raw < 0 ? 0 : (raw >= m->cap ? m->cap - 1 : raw);
  float R = 0.0f, g = 1.0f, d;
  for (int k = 0;; k++) {
    const float r = m->rew[c] * scale, p = g * r; /* rounded apart: never a fused multiply-add */
    R = R + p;
    const float gn = g * gamma;
    if (m->term[c] != 0.0f) {
      d = 0.0f;
      break;
    }
    if (use_trunc && m->trunc[c] != 0.0f) {
      d = gn;
      break;
    }
    if (k == n - 1) {
      d = gn;
      break;
    }
    const int64_t nx = (c + stride) % m->cap;
    if (m->serial[c] < 0 || m->serial[nx] <= m->serial[c]) { /* the write head lies between them */
      d = gn;
      break;
    }
    c = nx;
    g = gn;
  }
  *ret = R;
  *disc = d;
  *last = c;
}

/* ---- a table and its stream of episodes ---- */

typedef struct stream {
  ag_ctx *ctx;
  ag_replay *r;
  mirror m;
  int envs; /* environment copies, interleaved */
  ag_dtype storage;
  agt_rng g;
  int64_t *ep_t; /* each copy's step within its episode */
  int dev_adds;  /* add through ag_replay_add_dev */
} stream;

static void stream_new(stream *s, ag_ctx *ctx, int envs, int64_t cap, ag_dtype storage, uint64_t seed) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->envs = envs;
  s->storage = storage;
  s->g.s = seed;
  agt_ok(ag_replay_create(ctx, fields, N_FIELDS, cap, storage, 1, &s->r));
  mirror_new(&s->m, cap);
  s->ep_t = calloc((size_t)envs, sizeof *s->ep_t);
}

static void stream_free(stream *s) {
  ag_replay_free(s->r);
  mirror_free(&s->m);
  free(s->ep_t);
}

/* A reward the storage holds exactly: any float in f32, quarters in f16,
 * whole numbers in i32. */
static float reward_for(stream *s) {
  switch (s->storage) {
    case AG_F32: return agt_uniform(&s->g, -3.0f, 3.0f);
    case AG_I32: return (float)(agt_below(&s->g, 11) - 5);
    default: return 0.25f * (float)(agt_below(&s->g, 33) - 16);
  }
}

/* `steps` steps of every copy: copy i's transition of a step at pos + i. */
static void stream_steps(stream *s, int steps) {
  const int64_t k = (int64_t)steps * s->envs;
  float *f[N_FIELDS];
  for (int i = 0; i < N_FIELDS; i++) f[i] = calloc((size_t)(k * fields[i].width), sizeof(float));
  for (int64_t j = 0; j < k; j++) {
    const int e = (int)(j % s->envs);
    const float obs = (float)(agt_below(&s->g, 100));
    f[F_OBS][2 * j] = obs, f[F_OBS][2 * j + 1] = (float)e;
    f[F_ACT][j] = (float)agt_below(&s->g, 4);
    f[F_REW][j] = reward_for(s);
    f[F_NEXT][2 * j] = obs + 1, f[F_NEXT][2 * j + 1] = (float)e;
    const int64_t u = agt_below(&s->g, 90);
    f[F_TERM][j] = u < 10 || u == 89 ? 1.0f : 0.0f;              /* now and then both flags */
    f[F_TRUNC][j] = (u >= 80 || s->ep_t[e] >= 12) ? 1.0f : 0.0f; /* and a time limit */
    s->ep_t[e] = f[F_TERM][j] != 0.0f || f[F_TRUNC][j] != 0.0f ? 0 : s->ep_t[e] + 1;
  }
  if (s->dev_adds) {
    ag_tensor *t[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++)
      agt_ok(ag_tensor_create(s->ctx, fields[i].width, k, AG_F32, f[i], &t[i]));
    agt_ok(ag_replay_add_dev(s->r, t, k));
    for (int i = 0; i < N_FIELDS; i++) ag_tensor_free(t[i]);
  } else {
    const void *d[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) d[i] = f[i];
    agt_ok(ag_replay_add(s->r, d, k));
  }
  mirror_add(&s->m, f[F_REW], f[F_TERM], f[F_TRUNC], k);
  for (int i = 0; i < N_FIELDS; i++) free(f[i]);
}

static int64_t read_i64(const ag_tensor *t) {
  int64_t v = -1;
  agt_ok(ag_tensor_read(t, &v, sizeof v));
  return v;
}

/* The indices of a check: every valid column, then some outside the table. */
static int64_t check_indices(const mirror *m, int64_t *idx) {
  int64_t B = 0;
  for (int64_t c = 0; c < m->size; c++) idx[B++] = c;
  idx[B++] = -3;
  idx[B++] = m->cap;
  idx[B++] = m->cap + 7;
  idx[B++] = INT64_MIN;
  return B;
}

/* Outputs of one call against the reference, bit for bit. */
static void expect_outputs(const mirror *m, const int64_t *idx, int64_t B, int n, float gamma, int64_t stride,
                           int use_trunc, float scale, ag_tensor *ret, ag_tensor *disc, ag_tensor *last,
                           const char *what) {
  assert_int_equal(ag_tensor_rows(ret), 1);
  assert_int_equal(ag_tensor_cols(ret), B);
  assert_int_equal(ag_tensor_dtype(ret), AG_F32);
  assert_int_equal(ag_tensor_dtype(disc), AG_F32);
  assert_int_equal(ag_tensor_dtype(last), AG_I64);
  float *gr = malloc((size_t)B * sizeof *gr), *gd = malloc((size_t)B * sizeof *gd);
  float *wr = malloc((size_t)B * sizeof *wr), *wd = malloc((size_t)B * sizeof *wd);
  int64_t *gl = malloc((size_t)B * sizeof *gl), *wl = malloc((size_t)B * sizeof *wl);
  agt_ok(ag_tensor_read(ret, gr, (size_t)B * sizeof *gr));
  agt_ok(ag_tensor_read(disc, gd, (size_t)B * sizeof *gd));
  agt_ok(ag_tensor_read(last, gl, (size_t)B * sizeof *gl));
  for (int64_t j = 0; j < B; j++)
    ref_walk(m, idx[j], n, gamma, stride, use_trunc, scale, &wr[j], &wd[j], &wl[j]);
  if (memcmp(gr, wr, (size_t)B * sizeof *gr) || memcmp(gd, wd, (size_t)B * sizeof *gd) ||
      memcmp(gl, wl, (size_t)B * sizeof *gl)) {
    for (int64_t j = 0; j < B; j++)
      if (memcmp(&gr[j], &wr[j], 4) || memcmp(&gd[j], &wd[j], 4) || gl[j] != wl[j])
        fail_msg(
            "%s (size %lld, pos %lld, n %d, gamma %g, stride %lld): index %lld: ret %.9g discount %.9g "
            "last %lld; the reference %.9g %.9g %lld",
            what, (long long)m->size, (long long)m->pos, n, (double)gamma, (long long)stride,
            (long long)idx[j], (double)gr[j], (double)gd[j], (long long)gl[j], (double)wr[j], (double)wd[j],
            (long long)wl[j]);
  }
  free(gr), free(gd), free(wr), free(wd), free(gl), free(wl);
}

static const int ns[] = {1, 3, 5};
static const float gammas[] = {0.0f, 0.9f, 1.0f};
static const int64_t strides[] = {1, 3};

/* Every valid column of the table now, for every n, gamma and stride, with
 * i64 indices in a row, i32 in a column, and a row with gaps (a view). */
static void check_all(stream *s) {
  const mirror *m = &s->m;
  assert_int_equal(ag_replay_size(s->r), m->size);
  assert_int_equal(ag_replay_position(s->r), m->pos);
  assert_int_equal(read_i64(ag_replay_position_tensor(s->r)), m->pos);
  assert_int_equal(read_i64(ag_replay_size_tensor(s->r)), m->size);
  int64_t *idx = malloc((size_t)(m->cap + 8) * sizeof *idx);
  const int64_t B = check_indices(m, idx);
  int32_t *idx32 = malloc((size_t)B * sizeof *idx32);
  int64_t *two = malloc((size_t)(2 * B) * sizeof *two);
  for (int64_t j = 0; j < B; j++) {
    idx32[j] = idx[j] < INT32_MIN ? INT32_MIN : (int32_t)idx[j];
    two[2 * j] = -1, two[2 * j + 1] = idx[j];
  }
  int64_t *clamped32 = malloc((size_t)B * sizeof *clamped32);
  for (int64_t j = 0; j < B; j++) clamped32[j] = idx32[j];
  ag_tensor *row, *col, *both;
  agt_ok(ag_tensor_create(s->ctx, 1, B, AG_I64, idx, &row));
  agt_ok(ag_tensor_create(s->ctx, B, 1, AG_I32, idx32, &col));
  agt_ok(ag_tensor_create(s->ctx, 2, B, AG_I64, two, &both));
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t b = 0; b < sizeof gammas / sizeof gammas[0]; b++)
      for (size_t c = 0; c < sizeof strides / sizeof strides[0]; c++) {
        ag_tensor *ret, *disc, *last;
        agt_ok(ag_replay_nstep(s->r, row, ns[a], gammas[b], strides[c], "reward", "terminated", "truncated",
                               &ret, &disc, &last));
        expect_outputs(m, idx, B, ns[a], gammas[b], strides[c], 1, 1.0f, ret, disc, last, "i64 row");
        agt_ok(ag_replay_nstep(s->r, col, ns[a], gammas[b], strides[c], "reward", "terminated", NULL, &ret,
                               &disc, &last));
        expect_outputs(m, clamped32, B, ns[a], gammas[b], strides[c], 0, 1.0f, ret, disc, last,
                       "i32 column, no truncations");
        if (a == 2 && b == 1) {
          ag_tensor *view;
          agt_ok(ag_slice_rows(both, 1, 1, &view)); /* [1, B], ld 2 */
          agt_ok(ag_replay_nstep(s->r, view, ns[a], gammas[b], strides[c], "reward", "terminated",
                                 "truncated", &ret, &disc, &last));
          expect_outputs(m, idx, B, ns[a], gammas[b], strides[c], 1, 1.0f, ret, disc, last, "row view");
        }
        ag_ctx_reset(s->ctx);
      }
  ag_tensor_free(row);
  ag_tensor_free(col);
  ag_tensor_free(both);
  free(idx), free(idx32), free(two), free(clamped32);
}

/* Episodes of 1 and 3 copies on tables of every storage kind: checked after
 * every add, while the table fills, when it is full at position 0, and
 * wrapped at every position (adds of 1 step, and of 4 that wrap inside one
 * add). */
static void episodes_match_the_reference(void **state) {
  (void)state;
  static const struct {
    int envs;
    int64_t cap;
    ag_dtype storage;
    int need_pos0; /* the schedule fills this table to position 0 exactly */
  } tables[] = {{1, 50, AG_F32, 1}, {3, 48, AG_F32, 1}, {3, 61, AG_I32, 0}, {1, 37, AG_F16, 0}};
  ag_ctx *ctx = agt_ctx();
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
    stream s;
    stream_new(&s, ctx, tables[t].envs, tables[t].cap, tables[t].storage, 100 + t);
    int filling = 0, full0 = 0, wrapped = 0;
    int64_t positions = 0; /* bit p: a full table checked at position p (p < 64) */
    for (int call = 0; call < 60; call++) {
      stream_steps(&s, call % 5 == 4 ? 4 : 1);
      check_all(&s);
      if (s.m.size < s.m.cap)
        filling++;
      else if (s.m.pos == 0)
        full0++;
      else
        wrapped++;
      if (s.m.size == s.m.cap && s.m.pos < 64) positions |= (int64_t)1 << s.m.pos;
    }
    assert_true(filling > 0 && wrapped > 0);
    if (tables[t].need_pos0) assert_true(full0 > 0);
    int distinct = 0;
    for (int p = 0; p < 64; p++) distinct += (int)((positions >> p) & 1);
    assert_true(distinct >= 8); /* the head at many places */
    stream_free(&s);
  }
  ag_ctx_free(ctx);
}

/* ---- hand-made values ---- */

static void add_one_env(ag_replay *r, const float *rew, const float *term, const float *trunc, int64_t k) {
  float *z = calloc((size_t)(2 * k), sizeof *z);
  const void *d[N_FIELDS] = {z, z, rew, z, term, trunc};
  agt_ok(ag_replay_add(r, d, k));
  free(z);
}

static void read_outputs(ag_tensor *ret, ag_tensor *disc, ag_tensor *last, int64_t B, float *r, float *d,
                         int64_t *l) {
  agt_ok(ag_tensor_read(ret, r, (size_t)B * sizeof *r));
  agt_ok(ag_tensor_read(disc, d, (size_t)B * sizeof *d));
  agt_ok(ag_tensor_read(last, l, (size_t)B * sizeof *l));
}

/* One environment, capacity 8, n = 3, gamma = 1/2: a terminal step at
 * column 2, a truncation at 4, the write head after 5; then four more that
 * wrap (position 2) and a return that crosses the end of the buffer. */
static void hand_made_values(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, fields, N_FIELDS, 8, AG_F32, 1, &r));
  const float rew1[6] = {1, 2, 4, 8, 16, 32}, term1[6] = {0, 0, 1, 0, 0, 0}, trunc1[6] = {0, 0, 0, 0, 1, 0};
  add_one_env(r, rew1, term1, trunc1, 6);
  const int64_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  ag_tensor *ti, *ret, *disc, *last;
  agt_ok(ag_tensor_create(ctx, 1, 8, AG_I64, idx, &ti));
  float R[8], D[8];
  int64_t L[8];
  agt_ok(ag_replay_nstep(r, ti, 3, 0.5f, 1, "reward", "terminated", "truncated", &ret, &disc, &last));
  read_outputs(ret, disc, last, 8, R, D, L);
  /* columns 6 and 7 are not written yet: their first step only (zeros) */
  const float R1[8] = {3, 4, 4, 16, 16, 32, 0, 0}, D1[8] = {0, 0, 0, 0.25f, 0.5f, 0.5f, 0.5f, 0.5f};
  const int64_t L1[8] = {2, 2, 2, 4, 4, 5, 6, 7};
  assert_memory_equal(R, R1, sizeof R);
  assert_memory_equal(D, D1, sizeof D);
  assert_memory_equal(L, L1, sizeof L);
  /* without the truncation field, column 3 goes on to 5 and stops at the head */
  agt_ok(ag_replay_nstep(r, ti, 3, 0.5f, 1, "reward", "terminated", NULL, &ret, &disc, &last));
  read_outputs(ret, disc, last, 8, R, D, L);
  assert_true(R[3] == 8 + 8 + 8 && D[3] == 0.125f && L[3] == 5);
  assert_true(R[4] == 16 + 16 && D[4] == 0.25f && L[4] == 5);

  const float rew2[4] = {64, 128, 256, 512}, zero[4] = {0, 0, 0, 0};
  add_one_env(r, rew2, zero, zero, 4);
  assert_int_equal(read_i64(ag_replay_position_tensor(r)), 2);
  agt_ok(ag_replay_nstep(r, ti, 3, 0.5f, 1, "reward", "terminated", "truncated", &ret, &disc, &last));
  read_outputs(ret, disc, last, 8, R, D, L);
  /* write order 2 3 4 5 6 7 0 1: column 0 stops before 2 (the head), 7 goes on to 0 and 1 */
  const float R2[8] = {512, 512, 4, 16, 16, 96, 64 + 64 + 64, 384},
              D2[8] = {0.25f, 0.5f, 0, 0.25f, 0.5f, 0.125f, 0.125f, 0.125f};
  const int64_t L2[8] = {1, 1, 2, 4, 4, 7, 0, 1};
  assert_memory_equal(R, R2, sizeof R);
  assert_memory_equal(D, D2, sizeof D);
  assert_memory_equal(L, L2, sizeof L);
  /* n = 1: the one-step target; gamma 0: the reward alone */
  agt_ok(ag_replay_nstep(r, ti, 1, 0.5f, 1, "reward", "terminated", "truncated", &ret, &disc, &last));
  read_outputs(ret, disc, last, 8, R, D, L);
  const float R3[8] = {256, 512, 4, 8, 16, 32, 64, 128},
              D3[8] = {0.5f, 0.5f, 0, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  const int64_t L3[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  assert_memory_equal(R, R3, sizeof R);
  assert_memory_equal(D, D3, sizeof D);
  assert_memory_equal(L, L3, sizeof L);
  /* the reward as a gathered batch holds it: times the buffer's scale; the flags as stored */
  agt_ok(ag_buffer_set_scale(ag_replay_buffer(r), 2.0f));
  agt_ok(ag_replay_nstep(r, ti, 3, 0.5f, 1, "reward", "terminated", "truncated", &ret, &disc, &last));
  read_outputs(ret, disc, last, 8, R, D, L);
  for (int j = 0; j < 8; j++) assert_true(R[j] == 2 * R2[j] && D[j] == D2[j] && L[j] == L2[j]);
  /* stride = capacity: never a second step */
  agt_ok(ag_replay_nstep(r, ti, 5, 1.0f, 8, "reward", "terminated", "truncated", &ret, &disc, &last));
  read_outputs(ret, disc, last, 8, R, D, L);
  for (int j = 0; j < 8; j++) assert_true(R[j] == 2 * R3[j] && L[j] == j);
  ag_tensor_free(ti);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

/* ---- inside a recorded step ---- */

typedef struct rec_step {
  ag_replay *r;
  ag_tensor *idx;
  ag_tensor *ret, *disc, *last;
} rec_step;

static ag_status nstep_step(ag_ctx *ctx, void *user) {
  (void)ctx;
  rec_step *u = user;
  return ag_replay_nstep(u->r, u->idx, 5, 0.9f, 3, "reward", "terminated", "truncated", &u->ret, &u->disc,
                         &u->last);
}

/* One recording on a fixed index tensor, replayed while the table fills,
 * then after adds that fill it, wrap it and move its head again: each
 * replay walks the ring as it is then. */
static void recorded_step_follows_the_ring(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  stream s;
  stream_new(&s, ctx, 3, 48, AG_F32, 7);
  stream_steps(&s, 10); /* 30 of 48 */
  int64_t idx[64];
  int64_t B = 0;
  for (int64_t c = 0; c < 48; c++) idx[B++] = c;
  idx[B++] = -1;
  idx[B++] = 99;
  rec_step u = {s.r, NULL, NULL, NULL, NULL};
  agt_ok(ag_tensor_create(ctx, 1, B, AG_I64, idx, &u.idx));
  ag_capture *cap;
  agt_ok(ag_capture_create(ctx, nstep_step, &u, &cap));
  const int adds[] = {0, 2, 4, 1, 5, 3, 16};
  for (size_t i = 0; i < sizeof adds / sizeof adds[0]; i++) {
    if (adds[i]) stream_steps(&s, adds[i]);
    agt_ok(ag_capture_replay(cap));
    expect_outputs(&s.m, idx, B, 5, 0.9f, 3, 1, 1.0f, u.ret, u.disc, u.last, "replayed");
  }
  ag_capture_info info;
  agt_ok(ag_capture_get_info(cap, &info));
  assert_int_equal(info.records, 1);
  assert_int_equal((int)info.replays, (int)(sizeof adds / sizeof adds[0]));
  ag_capture_free(cap);
  ag_tensor_free(u.idx);
  stream_free(&s);
  ag_ctx_free(ctx);
}

/* ag_replay_add_dev keeps the position on the device as ag_replay_add does. */
static void device_adds_keep_the_position(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  stream s;
  stream_new(&s, ctx, 3, 40, AG_F32, 9);
  s.dev_adds = 1;
  for (int call = 0; call < 30; call++) {
    stream_steps(&s, call % 3 == 2 ? 5 : 1);
    if (call % 4 == 3 || call == 29) check_all(&s);
  }
  stream_free(&s);
  ag_ctx_free(ctx);
}

/* A table loaded from a file: the position reaches the device before a
 * walk reads it (outside a recording), and a recording made then follows
 * later adds. */
static void loaded_table_walks_its_ring(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  stream s;
  stream_new(&s, ctx, 3, 45, AG_F32, 11);
  for (int i = 0; i < 19; i++) stream_steps(&s, 1); /* wrapped: position 12 */
  assert_int_equal(s.m.pos, 12);
  char path[] = "/tmp/agrl_nstepXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  agt_ok(ag_replay_save(s.r, path));
  ag_replay *loaded;
  agt_ok(ag_replay_load(ctx, path, &loaded));
  unlink(path);
  ag_replay_free(s.r);
  s.r = loaded;
  int64_t idx[48], B = 0;
  for (int64_t c = 0; c < 45; c++) idx[B++] = c;
  rec_step u = {s.r, NULL, NULL, NULL, NULL};
  agt_ok(ag_tensor_create(ctx, 1, B, AG_I64, idx, &u.idx));
  ag_capture *cap = NULL;
  /* the load put the position on the device: a recording reads it at once */
  agt_ok(ag_capture_create(ctx, nstep_step, &u, &cap));
  ag_capture_free(cap);
  ag_tensor *ret, *disc, *last;
  agt_ok(ag_replay_nstep(s.r, u.idx, 5, 0.9f, 3, "reward", "terminated", "truncated", &ret, &disc, &last));
  expect_outputs(&s.m, idx, B, 5, 0.9f, 3, 1, 1.0f, ret, disc, last, "loaded");
  check_all(&s);
  agt_ok(ag_capture_create(ctx, nstep_step, &u, &cap));
  for (int i = 0; i < 3; i++) {
    agt_ok(ag_capture_replay(cap));
    expect_outputs(&s.m, idx, B, 5, 0.9f, 3, 1, 1.0f, u.ret, u.disc, u.last, "loaded, replayed");
    stream_steps(&s, 2 + i);
  }
  ag_capture_free(cap);
  ag_tensor_free(u.idx);
  stream_free(&s);
  ag_ctx_free(ctx);
}

/* ---- bad arguments ---- */

#define SENT ((ag_tensor *)(uintptr_t)0x5e17e1)

static void bad_arguments_are_refused_with_nothing_changed(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *other = agt_ctx();
  stream s;
  stream_new(&s, ctx, 1, 16, AG_F32, 13);
  stream_steps(&s, 12);
  stream_steps(&s, 8);
  const int64_t idx[4] = {0, 5, 9, 15};
  ag_tensor *ti, *tf, *tm, *to, *freed;
  agt_ok(ag_tensor_create(ctx, 1, 4, AG_I64, idx, &ti));
  const float fidx[4] = {0, 1, 2, 3};
  agt_ok(ag_tensor_create(ctx, 1, 4, AG_F32, fidx, &tf));
  const int64_t m6[6] = {0, 1, 2, 3, 4, 5};
  agt_ok(ag_tensor_create(ctx, 2, 3, AG_I64, m6, &tm));
  agt_ok(ag_tensor_create(other, 1, 4, AG_I64, idx, &to));
  agt_ok(ag_slice_rows(ti, 0, 1, &freed));
  ag_ctx_reset(ctx); /* the view is gone with the temporaries */
  ag_tensor *a = SENT, *b = SENT, *c = SENT;
  ag_replay *r = s.r;
  const char *R = "reward", *T = "terminated", *U = "truncated";
  agt_err(ag_replay_nstep(NULL, ti, 3, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_replay_nstep(r, NULL, 3, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, NULL, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, NULL, U, &a, &b, &c), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, T, U, NULL, &b, &c), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, T, U, &a, NULL, &c), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, T, U, &a, &b, NULL), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_replay_nstep(r, ti, 0, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG,
          "n = 0 must be in 1..64");
  agt_err(ag_replay_nstep(r, ti, 65, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "n = 65");
  agt_err(ag_replay_nstep(r, ti, 3, -0.1f, 1, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "gamma");
  agt_err(ag_replay_nstep(r, ti, 3, 1.5f, 1, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "gamma");
  agt_err(ag_replay_nstep(r, ti, 3, NAN, 1, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "gamma");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 0, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "stride = 0");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 17, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "capacity (16)");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, "rew", T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "no field 'rew'");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, "done", U, &a, &b, &c), AG_ERR_INVALID_ARG,
          "no field 'done'");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, T, "trunc", &a, &b, &c), AG_ERR_INVALID_ARG,
          "no field 'trunc'");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, "obs", T, U, &a, &b, &c), AG_ERR_SHAPE, "width 2");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, "next_obs", U, &a, &b, &c), AG_ERR_SHAPE, "width 2");
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, T, "obs", &a, &b, &c), AG_ERR_SHAPE, "width 2");
  agt_err(ag_replay_nstep(r, tf, 3, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_SHAPE, "dtype f32");
  agt_err(ag_replay_nstep(r, tm, 3, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_SHAPE, "[2, 3]");
  agt_err(ag_replay_nstep(r, to, 3, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_INVALID_ARG, "another context");
  agt_err(ag_replay_nstep(r, freed, 3, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_FREED, "freed");
  /* nothing changed: the outputs, the table, its tensors; a good call still gives the reference */
  assert_true(a == SENT && b == SENT && c == SENT);
  assert_int_equal(ag_replay_size(r), 16);
  assert_int_equal(ag_replay_position(r), 4);
  assert_int_equal(read_i64(ag_replay_position_tensor(r)), 4);
  assert_int_equal(read_i64(ag_replay_size_tensor(r)), 16);
  check_all(&s);
  /* the table's buffer freed; a table a device error left half written */
  ag_buffer_free(ag_replay_buffer(r));
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_FREED, "buffer has been freed");
  ag__replay_set_broken(r);
  agt_err(ag_replay_nstep(r, ti, 3, 0.9f, 1, R, T, U, &a, &b, &c), AG_ERR_STATE, "free the table");
  assert_true(a == SENT && b == SENT && c == SENT);
  ag_tensor_free(ti);
  ag_tensor_free(tf);
  ag_tensor_free(tm);
  ag_tensor_free(to);
  stream_free(&s);
  ag_ctx_free(other);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(episodes_match_the_reference),
      cmocka_unit_test(hand_made_values),
      cmocka_unit_test(recorded_step_follows_the_ring),
      cmocka_unit_test(device_adds_keep_the_position),
      cmocka_unit_test(loaded_table_walks_its_ring),
      cmocka_unit_test(bad_arguments_are_refused_with_nothing_changed),
  };
  return agt_run(argc, argv, "nstep", tests, sizeof tests / sizeof tests[0]);
}
