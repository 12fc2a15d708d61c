/* test_frames.c — frame tables (agrl/frames.h) against a host reference
 * built from the raw episodes: for each copy, the sequence of its frames
 * and episodes as an environment produced them. The reference knows each
 * entry's copy, episode and step in time, and builds a transition's
 * stacks by episode (slots before the episode's first frame repeat it),
 * not by the table's flags and ring; it decides which transitions exist
 * from what was written and what was overwritten. Every sampled or
 * gathered stack is compared with it bit for bit, across the wrap, with
 * several copies, episodes shorter than the stack, and the write head.
 */
#include <unistd.h>

#include "agt.h"

enum { MAX_ENTRIES = 8192 };

typedef struct ref_entry {
  int64_t copy, episode, ep_start; /* ep_start: the global number of its episode's first entry */
  int last;                        /* its episode's last observation (no transition) */
  int64_t action;
  float reward, term, trunc;
} ref_entry;

typedef struct world {
  ag_ctx *ctx;
  ag_frames *t;
  int64_t h, w, c, hwc, k, n, cap;
  uint8_t *pix;     /* global entry g's frame at g * hwc */
  ref_entry *e;     /* global entries, in the order they were added */
  int64_t total;    /* entries added */
  int64_t left[64]; /* per copy: transitions left in its episode (-1: the last observation comes next) */
  int64_t episodes; /* episodes started */
  agt_rng g;
} world;

static void world_new(world *W, int64_t h, int64_t w, int64_t c, int k, int64_t n, int64_t cap) {
  memset(W, 0, sizeof *W);
  W->ctx = agt_ctx();
  W->h = h, W->w = w, W->c = c, W->hwc = h * w * c, W->k = k, W->n = n, W->cap = cap;
  W->g.s = 77 + (uint64_t)cap;
  const ag_frames_config cfg = {h, w, c, k, n, cap, 0};
  const ag_field f[4] = {
      {"action", 1, AG_I64}, {"reward", 1, AG_F32}, {"terminated", 1, AG_F32}, {"truncated", 1, AG_F32}};
  agt_ok(ag_frames_create(W->ctx, &cfg, f, 4, AG_F32, &W->t));
  W->pix = malloc((size_t)MAX_ENTRIES * (size_t)W->hwc);
  W->e = calloc(MAX_ENTRIES, sizeof *W->e);
  assert_non_null(W->pix);
  assert_non_null(W->e);
  for (int64_t i = 0; i < n; i++) W->left[i] = 0; /* every copy starts an episode */
}

static void world_free(world *W) {
  ag_frames_free(W->t);
  ag_ctx_free(W->ctx);
  free(W->pix);
  free(W->e);
}

/* The copy's previous entry in time (global number), or -1. */
static int64_t prev_of(const world *W, int64_t g) { return g - W->n; }

/* `steps` environment steps of every copy, added in one call. Episodes
 * have 1 .. max_len transitions (so many are shorter than the stack). */
static void world_step(world *W, int64_t steps, int64_t max_len) {
  const int64_t k = steps * W->n;
  assert_true(W->total + k <= MAX_ENTRIES);
  uint8_t *first = malloc((size_t)k);
  int64_t *act = malloc((size_t)k * sizeof *act);
  float *rew = malloc((size_t)k * sizeof *rew), *term = malloc((size_t)k * sizeof *term),
        *trunc = malloc((size_t)k * sizeof *trunc);
  for (int64_t s = 0; s < steps; s++)
    for (int64_t i = 0; i < W->n; i++) {
      const int64_t g = W->total + s * W->n + i, j = s * W->n + i;
      ref_entry *e = &W->e[g];
      e->copy = i;
      if (W->left[i] == 0) { /* an episode's first observation */
        e->episode = W->episodes++;
        e->ep_start = g;
        W->left[i] = 1 + agt_below(&W->g, max_len);
      } else {
        e->episode = W->e[prev_of(W, g)].episode;
        e->ep_start = W->e[prev_of(W, g)].ep_start;
      }
      first[j] = e->ep_start == g ? (uint8_t)(1 + agt_below(&W->g, 255)) : 0; /* any non-zero value */
      if (W->left[i] == -1) { /* the episode's last observation: no transition */
        e->last = 1;
        W->left[i] = 0;
      } else if (--W->left[i] == 0) { /* the episode's last transition: terminated or truncated */
        W->left[i] = -1;
        if (agt_below(&W->g, 3))
          e->term = 1.0f;
        else
          e->trunc = 1.0f;
      }
      e->action = (int64_t)agt_below(&W->g, 1000);
      e->reward = (float)agt_below(&W->g, 64) * 0.25f;
      act[j] = e->action;
      rew[j] = e->reward;
      term[j] = e->term;
      trunc[j] = e->trunc;
      for (int64_t b = 0; b < W->hwc; b++)
        W->pix[(size_t)g * (size_t)W->hwc + (size_t)b] = (uint8_t)agt_next(&W->g);
    }
  const void *data[4] = {act, rew, term, trunc};
  agt_ok(ag_frames_add(W->t, W->pix + (size_t)W->total * (size_t)W->hwc, first, data, steps));
  W->total += k;
  free(first), free(act), free(rew), free(term), free(trunc);
}

/* The global entry that slot x holds now, or -1. */
static int64_t held_at(const world *W, int64_t x) {
  if (W->total == 0) return -1;
  const int64_t newest = W->total - 1, oldest = W->total > W->cap ? W->total - W->cap : 0;
  int64_t g = newest - ((newest - x) % W->cap + W->cap) % W->cap;
  return g >= oldest ? g : -1;
}

/* Whether global entry g is held (neither overwritten nor unwritten). */
static int held(const world *W, int64_t g) { return g >= 0 && g < W->total && g >= W->total - W->cap; }

/* The stack that ends at global entry g, by episode: slot i (0 oldest) is
 * the copy's entry (k - 1 - i) steps before g, or the episode's first
 * entry when that is later. */
static void ref_stack(const world *W, int64_t g, int64_t *src) {
  for (int64_t i = 0; i < W->k; i++) {
    const int64_t want = g - (W->k - 1 - i) * W->n;
    src[i] = want > W->e[g].ep_start ? want : W->e[g].ep_start;
  }
}

/* Whether global entry g is a transition whose stacks can be built from
 * held frames. */
static int ref_valid(const world *W, int64_t g) {
  if (!held(W, g) || W->e[g].last || !held(W, g + W->n)) return 0;
  int64_t src[64];
  ref_stack(W, g, src);
  return held(W, src[0]);
}

/* The reference pixel of value e of the stack ending at g (layout of agrl/frames.h). */
static uint8_t ref_pixel(const world *W, const int64_t *src, int64_t e) {
  const int64_t hw = W->h * W->w, plane = e / hw, p = e % hw, i = plane / W->c, ch = plane % W->c;
  return W->pix[(size_t)src[i] * (size_t)W->hwc + (size_t)(p * W->c + ch)];
}

/* obs / next_obs of the n entries cols (slots) against the reference, in
 * either dtype, and the batch's fields. */
static void check_batch(const world *W, const int64_t *cols, int64_t n, ag_dtype dt, ag_tensor *obs,
                        ag_tensor *next, ag_tensor *batch) {
  const int64_t D = ag_frames_obs_size(W->t);
  assert_int_equal(D, W->k * W->hwc);
  assert_int_equal(ag_tensor_rows(obs), D);
  assert_int_equal(ag_tensor_cols(obs), n);
  assert_int_equal(ag_tensor_dtype(obs), dt);
  const size_t es = dt == AG_U8 ? 1 : 4, bytes = (size_t)(D * n) * es;
  unsigned char *o = malloc(bytes), *no = malloc(bytes);
  agt_ok(ag_tensor_read(obs, o, bytes));
  agt_ok(ag_tensor_read(next, no, bytes));
  float *b = batch ? agt_read_f32(batch) : NULL;
  int64_t src[64], nsrc[64];
  for (int64_t j = 0; j < n; j++) {
    const int64_t g = held_at(W, cols[j]);
    assert_true(ref_valid(W, g));
    ref_stack(W, g, src);
    ref_stack(W, g + W->n, nsrc);
    for (int64_t e = 0; e < D; e++) {
      const uint8_t want = ref_pixel(W, src, e), nwant = ref_pixel(W, nsrc, e);
      if (dt == AG_U8) {
        if (o[j * D + e] != want || no[j * D + e] != nwant)
          fail_msg("entry %lld (slot %lld), value %lld: obs %u next %u, want %u %u", (long long)g,
                   (long long)cols[j], (long long)e, o[j * D + e], no[j * D + e], want, nwant);
      } else {
        const float *of = (const float *)o, *nf = (const float *)no;
        assert_true(of[j * D + e] == (float)want / 255.0f);
        assert_true(nf[j * D + e] == (float)nwant / 255.0f);
      }
    }
    if (b) {
      assert_true(b[j * 4] == (float)W->e[g].action);
      assert_true(b[j * 4 + 1] == W->e[g].reward);
      assert_true(b[j * 4 + 2] == W->e[g].term);
      assert_true(b[j * 4 + 3] == W->e[g].trunc);
    }
  }
  free(o), free(no), free(b);
}

/* The n-step returns (n = 3, gamma = 0.5) of the sampled entries cols
 * against the episodes: walked by global entry, going on only to a
 * transition whose stacks can be built; the bootstrap entries' stacks
 * gathered from the device indices `last`. */
static void check_nstep(const world *W, ag_tensor *idx, const int64_t *cols, int64_t B, ag_dtype dt) {
  ag_tensor *ret, *disc, *last, *obs, *next;
  agt_ok(ag_frames_nstep(W->t, idx, 3, 0.5f, "reward", "terminated", "truncated", &ret, &disc, &last));
  float r[64], d[64];
  int64_t l[64];
  assert_true(B <= 64);
  agt_ok(ag_tensor_read(ret, r, (size_t)B * sizeof *r));
  agt_ok(ag_tensor_read(disc, d, (size_t)B * sizeof *d));
  agt_ok(ag_tensor_read(last, l, (size_t)B * sizeof *l));
  for (int64_t j = 0; j < B; j++) {
    int64_t g = held_at(W, cols[j]);
    float want = 0.0f, gk = 1.0f, wd = 0.0f;
    for (int k = 0;; k++) {
      const ref_entry *e = &W->e[g];
      want = want + gk * e->reward;
      if (e->term != 0.0f) break;
      if (e->trunc != 0.0f || k == 2 || !ref_valid(W, g + W->n)) {
        wd = gk * 0.5f;
        break;
      }
      gk = gk * 0.5f;
      g += W->n;
    }
    if (r[j] != want || d[j] != wd || l[j] != g % W->cap)
      fail_msg("transition %lld: ret %g discount %g last %lld, want %g %g %lld", (long long)cols[j],
               (double)r[j], (double)d[j], (long long)l[j], (double)want, (double)wd,
               (long long)(g % W->cap));
  }
  agt_ok(ag_frames_gather_dev(W->t, last, dt, &obs, &next, NULL));
  check_batch(W, l, B, dt, obs, next, NULL);
}

/* Every slot's standing and the count against the reference; every valid
 * slot gathered and checked; a batch sampled and checked. */
static void check_all(world *W, ag_rng *rng, ag_dtype dt) {
  int64_t *valid = malloc((size_t)W->cap * sizeof *valid), nv = 0;
  for (int64_t x = 0; x < W->cap; x++) {
    const int64_t g = held_at(W, x);
    const int want = g >= 0 && ref_valid(W, g);
    if (ag_frames_sampleable(W->t, x) != want)
      fail_msg("slot %lld (entry %lld of %lld): sampleable %d, reference %d", (long long)x, (long long)g,
               (long long)W->total, ag_frames_sampleable(W->t, x), want);
    if (want) valid[nv++] = x;
  }
  assert_int_equal(ag_frames_count(W->t), nv);
  assert_int_equal(ag_frames_size(W->t), W->total < W->cap ? W->total : W->cap);
  if (nv > 0) {
    ag_tensor *obs, *next, *batch, *idx;
    agt_ok(ag_frames_gather(W->t, valid, nv, dt, &obs, &next, &batch));
    check_batch(W, valid, nv, dt, obs, next, batch);
    const int64_t B = 48;
    agt_ok(ag_frames_sample(W->t, rng, B, dt, &obs, &next, &batch, &idx));
    int64_t cols[48];
    agt_ok(ag_tensor_read(idx, cols, sizeof cols));
    check_batch(W, cols, B, dt, obs, next, batch);
    check_nstep(W, idx, cols, B, dt);
  } else {
    ag_tensor *obs, *next;
    agt_err(ag_frames_sample(W->t, rng, 4, dt, &obs, &next, NULL, NULL), AG_ERR_STATE, "may be sampled");
  }
  ag_ctx_reset(W->ctx);
  free(valid);
}

/* A run of `iters` adds, every standing and batch checked after each: adds
 * of 1 .. max_steps steps (every `whole`-th add fills the whole ring),
 * episodes of 1 .. max_len transitions (short_len after half the run),
 * stacks as f32 on every `f32_every`-th add, u8 otherwise. */
typedef struct run_spec {
  int64_t h, w, c;
  int k;
  int64_t n, cap;
  int iters;
  int64_t max_steps, whole, max_len, short_len, f32_every;
} run_spec;

static void run_episodes(const run_spec *sp) {
  world W;
  world_new(&W, sp->h, sp->w, sp->c, sp->k, sp->n, sp->cap);
  ag_rng *rng;
  agt_ok(ag_rng_create(W.ctx, (uint64_t)sp->cap, &rng));
  for (int it = 0; it < sp->iters; it++) {
    const int64_t steps =
        sp->whole && it % sp->whole == sp->whole - 1 ? sp->cap / sp->n : 1 + agt_below(&W.g, sp->max_steps);
    world_step(&W, steps, it < sp->iters / 2 ? sp->max_len : sp->short_len);
    check_all(&W, rng, it % sp->f32_every == 0 ? AG_F32 : AG_U8);
  }
  ag_rng_free(rng);
  world_free(&W);
}

/* One copy, c = 1, the ring wrapping many times, episodes of 1..6 transitions (stack 4). */
static void one_copy_stacks_match_the_episodes_across_the_wrap(void **state) {
  (void)state;
  const run_spec sp = {6, 5, 1, 4, 1, 53, 150, 3, 0, 6, 6, 2};
  run_episodes(&sp);
}

/* Three copies interleaved over a capacity that is no multiple of three,
 * frames of several channels, stack 3, long and short episodes. */
static void interleaved_copies_and_channels_match_the_episodes(void **state) {
  (void)state;
  const run_spec sp = {4, 3, 3, 3, 3, 100, 120, 4, 0, 12, 2, 3};
  run_episodes(&sp);
}

/* A stack longer than every episode, and whole-ring adds (every standing
 * recounted). */
static void stacks_longer_than_episodes_and_whole_ring_adds(void **state) {
  (void)state;
  const run_spec sp = {2, 2, 1, 8, 2, 24, 60, 1, 7, 3, 3, 5};
  run_episodes(&sp);
}

/* Draws are uniform over the transitions that may be sampled: each of them
 * comes up about equally often, and no other. */
static void draws_are_uniform_over_the_sampleable(void **state) {
  (void)state;
  world W;
  world_new(&W, 1, 1, 1, 4, 2, 90);
  for (int it = 0; it < 70; it++) world_step(&W, 1, 5); /* wrapped, with episode ends */
  const int64_t nv = ag_frames_count(W.t);
  assert_true(nv > 20);
  ag_rng *rng;
  agt_ok(ag_rng_create(W.ctx, 11, &rng));
  int64_t hits[90] = {0};
  enum { B = 1000, ROUNDS = 40 };
  static int64_t cols[B];
  for (int r = 0; r < ROUNDS; r++) {
    ag_tensor *obs, *next, *idx;
    agt_ok(ag_frames_sample(W.t, rng, B, AG_U8, &obs, &next, NULL, &idx));
    agt_ok(ag_tensor_read(idx, cols, sizeof cols));
    for (int j = 0; j < B; j++) hits[cols[j]]++;
    ag_ctx_reset(W.ctx);
  }
  const double want = (double)B * ROUNDS / (double)nv;
  for (int64_t x = 0; x < 90; x++) {
    if (!ag_frames_sampleable(W.t, x)) {
      assert_int_equal(hits[x], 0);
      continue;
    }
    if (hits[x] < 0.8 * want || hits[x] > 1.2 * want)
      fail_msg("slot %lld drawn %lld times, expected about %.0f", (long long)x, (long long)hits[x], want);
  }
  ag_rng_free(rng);
  world_free(&W);
}

/* A recorded sample reads the ring on the device at each replay: after
 * more adds, it draws what an eager sample with the same rng state draws,
 * and the stacks are the reference's. */
typedef struct rec_step {
  ag_frames *t;
  ag_rng *rng;
  ag_tensor *obs, *next, *idx;
} rec_step;

static ag_status rec_sample(ag_ctx *ctx, void *user) {
  (void)ctx;
  rec_step *r = user;
  return ag_frames_sample(r->t, r->rng, 16, AG_U8, &r->obs, &r->next, NULL, &r->idx);
}

static void recorded_sample_follows_the_ring(void **state) {
  (void)state;
  world W;
  world_new(&W, 2, 2, 1, 3, 2, 40);
  for (int it = 0; it < 20; it++) world_step(&W, 1, 4); /* wrapped */
  ag_rng *eager;
  rec_step rs = {W.t, NULL, NULL, NULL, NULL};
  agt_ok(ag_rng_create(W.ctx, 5, &eager));
  agt_ok(ag_rng_create(W.ctx, 5, &rs.rng));
  ag_capture *cap;
  agt_ok(ag_capture_create(W.ctx, rec_sample, &rs, &cap));
  for (int it = 0; it < 12; it++) {
    world_step(&W, 1 + agt_below(&W.g, 2), 4);
    agt_ok(ag_capture_replay(cap));
    ag_tensor *obs, *next, *idx;
    agt_ok(ag_frames_sample(W.t, eager, 16, AG_U8, &obs, &next, NULL, &idx));
    int64_t a[16], b[16];
    uint8_t oa[16 * 12], ob[16 * 12];
    agt_ok(ag_tensor_read(rs.idx, a, sizeof a));
    agt_ok(ag_tensor_read(idx, b, sizeof b));
    assert_memory_equal(a, b, sizeof a);
    agt_ok(ag_tensor_read(rs.obs, oa, sizeof oa));
    agt_ok(ag_tensor_read(obs, ob, sizeof ob));
    assert_memory_equal(oa, ob, sizeof oa);
    check_batch(&W, a, 16, AG_U8, rs.obs, rs.next, NULL);
    ag_ctx_reset(W.ctx);
  }
  ag_capture_free(cap);
  ag_rng_free(eager);
  ag_rng_free(rs.rng);
  world_free(&W);
}

/* A saved table loads as the same table: the same standing for every
 * slot, the same draws from the same rng state, the reference's stacks,
 * and later adds go on as in the original; damaged files are refused. */
static void saved_and_loaded_tables_match_the_episodes(void **state) {
  (void)state;
  world W;
  world_new(&W, 3, 4, 2, 4, 2, 61);
  for (int it = 0; it < 45; it++) world_step(&W, 1 + agt_below(&W.g, 2), 5); /* wrapped */
  char path[] = "/tmp/agrl_framesXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  agt_ok(ag_frames_save(W.t, path));
  ag_frames *L = NULL;
  agt_ok(ag_frames_load(W.ctx, path, &L));
  assert_int_equal(ag_frames_count(L), ag_frames_count(W.t));
  assert_int_equal(ag_frames_position(L), ag_frames_position(W.t));
  ag_rng *r[2];
  ag_tensor *obs[2], *next[2], *idx[2];
  const int64_t B = 40, D = ag_frames_obs_size(W.t);
  for (int i = 0; i < 2; i++) {
    agt_ok(ag_rng_create(W.ctx, 7, &r[i]));
    agt_ok(ag_frames_sample(i ? L : W.t, r[i], B, AG_U8, &obs[i], &next[i], NULL, &idx[i]));
  }
  int64_t c0[40], c1[40];
  agt_ok(ag_tensor_read(idx[0], c0, sizeof c0));
  agt_ok(ag_tensor_read(idx[1], c1, sizeof c1));
  assert_memory_equal(c0, c1, sizeof c0);
  uint8_t *o0 = malloc((size_t)(B * D)), *o1 = malloc((size_t)(B * D));
  for (int h = 0; h < 2; h++) {
    agt_ok(ag_tensor_read(h ? next[0] : obs[0], o0, (size_t)(B * D)));
    agt_ok(ag_tensor_read(h ? next[1] : obs[1], o1, (size_t)(B * D)));
    assert_memory_equal(o0, o1, (size_t)(B * D));
  }
  free(o0), free(o1);
  ag_frames_free(W.t);
  W.t = L;
  for (int it = 0; it < 30; it++) {
    check_all(&W, r[0], it % 2 ? AG_U8 : AG_F32);
    world_step(&W, 1 + agt_below(&W.g, 3), 5);
  }
  /* damaged files: cut short, a flipped byte, a replay file */
  agt_ok(ag_frames_save(W.t, path));
  size_t n;
  unsigned char *bytes = agt_slurp(path, &n);
  agt_spit(path, bytes, n - 5);
  L = NULL;
  agt_err(ag_frames_load(W.ctx, path, &L), AG_ERR_IO, "truncated");
  bytes[n / 2] ^= 0x10;
  agt_spit(path, bytes, n);
  agt_err(ag_frames_load(W.ctx, path, &L), AG_ERR_IO, path);
  agt_ok(ag_replay_save(ag_frames_replay(W.t), path));
  agt_err(ag_frames_load(W.ctx, path, &L), AG_ERR_IO, path);
  assert_null(L);
  agt_err(ag_frames_save(W.t, ""), AG_ERR_INVALID_ARG, "empty");
  agt_err(ag_frames_load(W.ctx, NULL, &L), AG_ERR_INVALID_ARG, "must not be NULL");
  free(bytes);
  unlink(path);
  ag_rng_free(r[0]), ag_rng_free(r[1]);
  world_free(&W);
}

/* The device memory of agrl/frames.h's formula: 84 x 84 frames, four f32
 * fields, measured on a small table (no add, so no staging area), at most
 * 7.2 GB per million transitions. */
static void device_memory_is_the_headers_formula(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_frames_config cfg = {84, 84, 1, 4, 1, 1000, 0};
  const ag_field f[4] = {
      {"action", 1, AG_I64}, {"reward", 1, AG_F32}, {"terminated", 1, AG_F32}, {"truncated", 1, AG_F32}};
  ag_frames *t = NULL;
  const uint64_t before = agt_live_bytes(ctx);
  agt_ok(ag_frames_create(ctx, &cfg, f, 4, AG_F32, &t));
  const uint64_t bytes = agt_live_bytes(ctx) - before, want = 1000 * (84 * 84 + 1) + 1000 * 4 * 4 + 32;
  if (bytes != want)
    fail_msg("the table holds %llu bytes; the header says %llu", (unsigned long long)bytes,
             (unsigned long long)want);
  assert_true((double)want / 1000.0 * 1e6 <= 7.2e9);
  ag_frames_free(t);
  ag_ctx_free(ctx);
}

static void frames_bad_input_is_refused_and_changes_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field f[2] = {{"action", 1, AG_I64}, {"reward", 1, AG_F32}};
  ag_frames *t = NULL;
  ag_frames_config cfg = {4, 4, 1, 0, 2, 40, 0};
  agt_err(ag_frames_create(NULL, &cfg, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "must not be NULL");
  ag_frames_config bad = cfg;
  bad.height = 0;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "must be positive");
  bad = cfg, bad.width = (int64_t)1 << 20, bad.height = (int64_t)1 << 20;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "larger than 2^31");
  bad = cfg, bad.stack = 65;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "stack = 65");
  bad = cfg, bad.n_envs = 41;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "n_envs = 41");
  bad = cfg, bad.capacity = 0;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "capacity = 0");
  bad = cfg, bad.min_size = 41;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "min_size = 41");
  const ag_field dup[2] = {{"a", 1, AG_I64}, {"a", 1, AG_F32}};
  agt_err(ag_frames_create(ctx, &cfg, dup, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "used twice");
  assert_null(t);
  agt_ok(ag_frames_create(ctx, &cfg, f, 2, AG_U8, &t)); /* u8 storage: an action of 300 does not fit */
  uint8_t px[6 * 16] = {0}, first[6] = {1, 1, 0, 0, 0, 0};
  int64_t act[6] = {1, 2, 3, 4, 5, 6};
  float rew[6] = {0};
  const void *data[2] = {act, rew};
  agt_ok(ag_frames_add(t, px, first, data, 3));
  const int64_t size = ag_frames_size(t), pos = ag_frames_position(t), count = ag_frames_count(t);
  assert_int_equal(count, 4); /* 2 copies x 3 steps: the newest step has no next yet */
  act[0] = 300;
  agt_err(ag_frames_add(t, px, first, data, 3), AG_ERR_OUT_OF_RANGE, "300");
  agt_err(ag_frames_add(NULL, px, first, data, 1), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_frames_add(t, NULL, first, data, 1), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_frames_add(t, px, NULL, data, 1), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_frames_add(t, px, first, data, -1), AG_ERR_INVALID_ARG, "negative");
  agt_err(ag_frames_add(t, px, first, data, 21), AG_ERR_OUT_OF_RANGE, "do not fit");
  agt_ok(ag_frames_add(t, px, first, data, 0));
  assert_int_equal(ag_frames_size(t), size);
  assert_int_equal(ag_frames_position(t), pos);
  assert_int_equal(ag_frames_count(t), count);
  ag_rng *rng;
  agt_ok(ag_rng_create(ctx, 1, &rng));
  ag_tensor *o = NULL, *no = NULL;
  agt_err(ag_frames_sample(t, rng, 0, AG_F32, &o, &no, NULL, NULL), AG_ERR_INVALID_ARG, "B = 0");
  agt_err(ag_frames_sample(t, rng, 2, AG_I32, &o, &no, NULL, NULL), AG_ERR_INVALID_ARG, "obs_dtype");
  agt_err(ag_frames_sample(t, NULL, 2, AG_F32, &o, &no, NULL, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
  const int64_t newest = 4, outside = 40, neg = -1, ok = 0;
  agt_err(ag_frames_gather(t, &newest, 1, AG_U8, &o, &no, NULL), AG_ERR_OUT_OF_RANGE, "idx[0] = 4");
  agt_err(ag_frames_gather(t, &outside, 1, AG_U8, &o, &no, NULL), AG_ERR_OUT_OF_RANGE, "idx[0] = 40");
  agt_err(ag_frames_gather(t, &neg, 1, AG_U8, &o, &no, NULL), AG_ERR_OUT_OF_RANGE, "idx[0] = -1");
  agt_err(ag_frames_gather(t, &ok, 0, AG_U8, &o, &no, NULL), AG_ERR_INVALID_ARG, "n = 0");
  assert_null(o);
  assert_null(no);
  ag_frames_free(t);
  /* min_size counts the transitions that may be sampled */
  cfg.min_size = 5;
  agt_ok(ag_frames_create(ctx, &cfg, f, 2, AG_F32, &t));
  act[0] = 1;
  agt_ok(ag_frames_add(t, px, first, data, 3));
  agt_err(ag_frames_sample(t, rng, 2, AG_F32, &o, &no, NULL, NULL), AG_ERR_STATE, "fewer than the minimum 5");
  ag_frames_free(NULL);
  ag_frames_free(t);
  ag_rng_free(rng);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_copy_stacks_match_the_episodes_across_the_wrap),
      cmocka_unit_test(interleaved_copies_and_channels_match_the_episodes),
      cmocka_unit_test(stacks_longer_than_episodes_and_whole_ring_adds),
      cmocka_unit_test(draws_are_uniform_over_the_sampleable),
      cmocka_unit_test(recorded_sample_follows_the_ring),
      cmocka_unit_test(saved_and_loaded_tables_match_the_episodes),
      cmocka_unit_test(device_memory_is_the_headers_formula),
      cmocka_unit_test(frames_bad_input_is_refused_and_changes_nothing),
  };
  return agt_run(argc, argv, "frames", tests, sizeof tests / sizeof tests[0]);
}
