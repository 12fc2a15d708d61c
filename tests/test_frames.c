/* test_frames.c — frame tables (agrl/frames.h) against a host reference
 * built from the raw episodes: for each copy, the sequence of its frames
 * and episodes as an environment produced them. The reference knows each
 * entry's copy, episode and step in time, and builds a transition's
 * stacks by episode (slots before the episode's first frame repeat it),
 * not by the table's flags and ring; it decides which transitions exist
 * from what was written and what was overwritten. Every sampled or
 * gathered stack is compared with it bit for bit, across the wrap, with
 * several copies, episodes shorter than the stack, and the write head.
 *
 * Prioritized tables are checked against a reference of the priorities
 * kept by global entry (the largest priority seen when the entry first may
 * be sampled, then the updates' values): every leaf of the sum tree after
 * every add and update (p^alpha, or 0 for an entry that may not be
 * sampled), the draws' frequencies against p^alpha / sum, the importance
 * weights against their formula.
 */
#include <math.h>
#include <unistd.h>

#include "agt.h"
#include "base/per_tree.h"
#include "replay/replay_internal.h"

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
  /* prioritized: each global entry's priority (-1: none yet), the largest seen */
  int prioritized;
  float alpha;
  float *prio, maxp;
} world;

static void world_init(world *W, int64_t h, int64_t w, int64_t c, int k, int64_t n, int64_t cap,
                       int prioritized, float alpha) {
  memset(W, 0, sizeof *W);
  W->ctx = agt_ctx();
  W->h = h, W->w = w, W->c = c, W->hwc = h * w * c, W->k = k, W->n = n, W->cap = cap;
  W->g.s = 77 + (uint64_t)cap;
  W->prioritized = prioritized, W->alpha = alpha, W->maxp = 1.0f;
  W->prio = malloc(MAX_ENTRIES * sizeof *W->prio);
  assert_non_null(W->prio);
  for (int64_t g = 0; g < MAX_ENTRIES; g++) W->prio[g] = -1.0f;
  const ag_frames_config cfg = {h, w, c, k, n, cap, 0, prioritized, alpha};
  const ag_field f[4] = {
      {"action", 1, AG_I64}, {"reward", 1, AG_F32}, {"terminated", 1, AG_F32}, {"truncated", 1, AG_F32}};
  agt_ok(ag_frames_create(W->ctx, &cfg, f, 4, AG_F32, &W->t));
  W->pix = malloc((size_t)MAX_ENTRIES * (size_t)W->hwc);
  W->e = calloc(MAX_ENTRIES, sizeof *W->e);
  assert_non_null(W->pix);
  assert_non_null(W->e);
  for (int64_t i = 0; i < n; i++) W->left[i] = 0; /* every copy starts an episode */
}

static void world_new(world *W, int64_t h, int64_t w, int64_t c, int k, int64_t n, int64_t cap) {
  world_init(W, h, w, c, k, n, cap, 0, 0.0f);
}

static void world_free(world *W) {
  ag_frames_free(W->t);
  ag_ctx_free(W->ctx);
  free(W->pix);
  free(W->e);
  free(W->prio);
}

static int held(const world *W, int64_t g);
static int64_t held_at(const world *W, int64_t x);
static int ref_valid(const world *W, int64_t g);

/* After an add: the entries that may be sampled for the first time get the largest priority seen. */
static void ref_priorities_after_add(world *W) {
  for (int64_t x = 0; x < W->cap; x++) {
    const int64_t g = held_at(W, x);
    if (g >= 0 && ref_valid(W, g) && W->prio[g] < 0.0f) W->prio[g] = W->maxp;
  }
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
  if (W->prioritized) ref_priorities_after_add(W);
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

/* The first `bytes` of two tensors are the same. */
static void same_bytes(const ag_tensor *a, const ag_tensor *b, size_t bytes) {
  unsigned char *x = malloc(bytes), *y = malloc(bytes);
  assert_true(x && y);
  agt_ok(ag_tensor_read(a, x, bytes));
  agt_ok(ag_tensor_read(b, y, bytes));
  assert_memory_equal(x, y, bytes);
  free(x), free(y);
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
  same_bytes(idx[0], idx[1], (size_t)B * sizeof(int64_t));
  same_bytes(obs[0], obs[1], (size_t)(B * D));
  same_bytes(next[0], next[1], (size_t)(B * D));
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
 * 7.2 GB per million transitions; prioritized, the mask, the sum tree of
 * 16^3 leaves (the least power of 16 past 1000) and the largest priority
 * more, 9.95 MB more per million entries. */
static void device_memory_is_the_headers_formula(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_frames_config cfg = {84, 84, 1, 4, 1, 1000, 0, 0, 0.0f};
  const ag_field f[4] = {
      {"action", 1, AG_I64}, {"reward", 1, AG_F32}, {"terminated", 1, AG_F32}, {"truncated", 1, AG_F32}};
  for (int prioritized = 0; prioritized < 2; prioritized++) {
    cfg.prioritized = prioritized, cfg.alpha = 0.6f;
    ag_frames *t = NULL;
    const uint64_t before = agt_live_bytes(ctx);
    agt_ok(ag_frames_create(ctx, &cfg, f, 4, AG_F32, &t));
    const uint64_t bytes = agt_live_bytes(ctx) - before,
                   want = 1000 * (84 * 84 + 1) + 1000 * 4 * 4 + 32 +
                          (prioritized ? 1000 + 8 * (16 + 256 + 4096 + 1) + 4 : 0);
    if (bytes != want)
      fail_msg("the table (prioritized %d) holds %llu bytes; the header says %llu", prioritized,
               (unsigned long long)bytes, (unsigned long long)want);
    assert_true((double)want / 1000.0 * 1e6 <= 7.2e9);
    ag_frames_free(t);
    assert_int_equal(agt_live_bytes(ctx), before);
  }
  /* a million entries: 1e6 bytes of mask, 16 + ... + 16^5 + 1 doubles of tree, 4 bytes */
  const double more = 1e6 + 8.0 * (16 + 256 + 4096 + 65536 + 1048576 + 1) + 4;
  assert_true(more > 9.94e6 && more < 9.96e6);
  ag_ctx_free(ctx);
}

static void frames_bad_input_is_refused_and_changes_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field f[2] = {{"action", 1, AG_I64}, {"reward", 1, AG_F32}};
  ag_frames *t = NULL;
  ag_frames_config cfg = {4, 4, 1, 0, 2, 40, 0, 0, 0.0f};
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

/* ---- prioritized tables ---- */

static ag_per *sampler_of(const world *W) {
  ag_per *p = ag_replay_per(ag_frames_replay(W->t));
  assert_non_null(p);
  return p;
}

/* The reference leaf of slot x: its entry's priority ^ alpha when it may be sampled, else 0. */
static double ref_leaf(const world *W, int64_t x) {
  const int64_t g = held_at(W, x);
  if (g < 0 || !ref_valid(W, g)) return 0.0;
  if (W->prio[g] < 0.0f) fail_msg("entry %lld may be sampled but has no reference priority", (long long)g);
  return pow((double)W->prio[g], (double)W->alpha);
}

/* The sum tree's doubles (the caller frees them), and its depth. */
static double *read_tree(const ag_frames *t, int *depth) {
  ag_per *per = ag_replay_per(ag_frames_replay(t));
  assert_non_null(per);
  *depth = ag__per_depth(per);
  const size_t n = (size_t)ag__per_offset(*depth) + 1;
  double *tree = malloc(n * sizeof *tree);
  assert_non_null(tree);
  agt_ok(ag_tensor_read(ag__per_tree(per), tree, n * sizeof *tree));
  return tree;
}

/* Every leaf of the sum tree (and past the capacity: 0), its root and the
 * largest priority seen against the reference. */
static void check_tree(const world *W) {
  int depth;
  double *tree = read_tree(W->t, &depth);
  const double *leaf = tree + ag__per_offset(depth - 1);
  const int64_t leaves = ag__per_offset(depth) - ag__per_offset(depth - 1);
  double sum = 0.0;
  for (int64_t x = 0; x < leaves; x++) {
    const double want = x < W->cap ? ref_leaf(W, x) : 0.0;
    if (want == 0.0 ? leaf[x] != 0.0 : !(fabs(leaf[x] - want) <= 1e-12 * want))
      fail_msg("slot %lld (entry %lld of %lld): leaf %.17g, the reference %.17g", (long long)x,
               (long long)(x < W->cap ? held_at(W, x) : -1), (long long)W->total, leaf[x], want);
    sum += want;
  }
  const double root = tree[ag__per_offset(depth)];
  if (!(fabs(root - sum) <= 1e-9 * sum)) fail_msg("the root is %.17g, the leaves' sum %.17g", root, sum);
  double total = 0.0;
  agt_ok(ag_per_total(sampler_of(W), &total));
  assert_true(total == root);
  float st;
  agt_ok(ag_tensor_read(ag__per_state(sampler_of(W)), &st, sizeof st));
  if (st != W->maxp) fail_msg("the largest priority is %g, the reference's %g", (double)st, (double)W->maxp);
  free(tree);
}

/* The importance weights of the batch cols against (P_min / P(x_j))^beta,
 * P from the reference leaves (P_min the least of the batch). */
static void check_weights(const world *W, const int64_t *cols, int64_t B, ag_tensor *weights, float beta) {
  assert_int_equal(ag_tensor_rows(weights), 1);
  assert_int_equal(ag_tensor_cols(weights), B);
  float *w = agt_read_f32(weights);
  double least = INFINITY;
  for (int64_t j = 0; j < B; j++) {
    const double l = ref_leaf(W, cols[j]);
    assert_true(l > 0.0);
    least = l < least ? l : least;
  }
  for (int64_t j = 0; j < B; j++) {
    const double want = pow(least / ref_leaf(W, cols[j]), (double)beta);
    if (!(fabs((double)w[j] - want) <= 1e-5 * want))
      fail_msg("weight %lld (slot %lld) is %.9g, the formula's %.9g", (long long)j, (long long)cols[j],
               (double)w[j], want);
  }
  free(w);
}

/* The reference's side of an update of slot x to p (which the table takes
 * only when x may be sampled). */
static void ref_update(world *W, int64_t x, float p) {
  const int64_t g = x >= 0 && x < W->cap ? held_at(W, x) : -1;
  if (g < 0 || !ref_valid(W, g)) return;
  W->prio[g] = p;
  W->maxp = p > W->maxp ? p : W->maxp;
}

static void update_host(world *W, const int64_t *cols, const float *p, int64_t n) {
  agt_ok(ag_frames_update_priorities_host(W->t, cols, p, n));
  for (int64_t j = 0; j < n; j++) ref_update(W, cols[j], p[j]);
}

/* Through device tensors: idx i64 or i32 (a row), the priorities a column. */
static void update_dev(world *W, const int64_t *cols, const float *p, int64_t n, ag_dtype dt) {
  ag_tensor *ti, *tp;
  int32_t c32[256];
  assert_true(n <= 256);
  for (int64_t j = 0; j < n; j++) c32[j] = (int32_t)cols[j];
  agt_ok(ag_tensor_create(W->ctx, 1, n, dt, dt == AG_I32 ? (const void *)c32 : (const void *)cols, &ti));
  agt_ok(ag_tensor_create(W->ctx, n, 1, AG_F32, p, &tp));
  agt_ok(ag_frames_update_priorities(W->t, ti, tp));
  ag_tensor_free(ti);
  ag_tensor_free(tp);
  for (int64_t j = 0; j < n; j++) ref_update(W, cols[j], p[j]);
}

/* The slots that may be sampled (by the reference) and those that may not. */
static void split_slots(const world *W, int64_t *ok, int64_t *nok, int64_t *bad, int64_t *nbad) {
  *nok = *nbad = 0;
  for (int64_t x = 0; x < W->cap; x++) {
    const int64_t g = held_at(W, x);
    if (g >= 0 && ref_valid(W, g))
      ok[(*nok)++] = x;
    else
      bad[(*nbad)++] = x;
  }
}

/* A prioritized batch of B: every entry one that may be sampled (check_batch),
 * stacks and fields the reference's, the weights the formula's; its slots into cols. */
static void sample_per_checked(world *W, ag_rng *rng, int64_t B, float beta, ag_dtype dt, int64_t *cols) {
  ag_tensor *obs, *next, *batch, *idx, *w;
  agt_ok(ag_frames_sample_per(W->t, rng, B, beta, dt, &obs, &next, &batch, &idx, &w));
  assert_int_equal(ag_tensor_rows(idx), B);
  agt_ok(ag_tensor_read(idx, cols, (size_t)B * sizeof *cols));
  check_batch(W, cols, B, dt, obs, next, batch);
  check_weights(W, cols, B, w, beta);
}

/* A run of adds (several copies, short episodes, the ring wrapping, whole-
 * ring adds) with updates between them from the host and the device,
 * indices of entries that may not be sampled among the device's (skipped)
 * and refused from the host (nothing changed): after each, every leaf is
 * the reference's; each batch drawn is of entries that may be sampled,
 * with the reference's stacks and weights. */
static void prioritized_leaves_follow_the_episodes(void **state) {
  (void)state;
  world W;
  world_init(&W, 2, 3, 1, 3, 3, 70, 1, 0.7f);
  ag_rng *rng;
  agt_ok(ag_rng_create(W.ctx, 3, &rng));
  check_tree(&W);
  int64_t ok[70], bad[70], nok, nbad, cols[32];
  for (int it = 0; it < 60; it++) {
    const int64_t steps = it % 9 == 8 ? W.cap / W.n : 1 + agt_below(&W.g, 3);
    world_step(&W, steps, it < 30 ? 6 : 2);
    check_tree(&W);
    split_slots(&W, ok, &nok, bad, &nbad);
    if (nok == 0) continue;
    int64_t sel[12];
    float p[12];
    const int64_t m = nok < 5 ? nok : 5;
    for (int64_t j = 0; j < m; j++) {
      sel[j] = ok[agt_below(&W.g, nok)];
      p[j] = agt_uniform(&W.g, 0.05f, 1.0f + 0.05f * (float)it); /* the largest grows now and then */
    }
    update_host(&W, sel, p, m);
    check_tree(&W);
    if (nbad > 0) { /* one index that may not be sampled: all refused, nothing changed */
      sel[m] = bad[agt_below(&W.g, nbad)];
      p[m] = 50.0f;
      agt_err(ag_frames_update_priorities_host(W.t, sel, p, m + 1), AG_ERR_OUT_OF_RANGE,
              "may be sampled now");
      check_tree(&W);
    }
    /* the device's: entries that may be sampled, others, and slots outside the table, all mixed */
    int64_t n = 0;
    for (int64_t j = 0; j < m; j++)
      sel[n] = ok[agt_below(&W.g, nok)], p[n++] = agt_uniform(&W.g, 0.05f, 2.0f);
    for (int64_t j = 0; j < 3 && nbad > 0; j++) sel[n] = bad[agt_below(&W.g, nbad)], p[n++] = 80.0f;
    sel[n] = -1, p[n++] = 90.0f;
    sel[n] = W.cap + 5, p[n++] = 90.0f;
    for (int64_t j = n - 1; j > 0; j--) { /* shuffled */
      const int64_t r = agt_below(&W.g, j + 1), c = sel[j];
      const float q = p[j];
      sel[j] = sel[r], p[j] = p[r], sel[r] = c, p[r] = q;
    }
    update_dev(&W, sel, p, n, it % 2 ? AG_I32 : AG_I64);
    check_tree(&W);
    sample_per_checked(&W, rng, 32, it % 3 == 0 ? 1.0f : 0.4f, it % 2 ? AG_U8 : AG_F32, cols);
    ag_ctx_reset(W.ctx);
  }
  ag_rng_free(rng);
  world_free(&W);
}

/* Draws come with probability p^alpha / sum over the entries that may be
 * sampled: in each batch of B, stratified, an entry of probability P comes
 * up B P times give or take 2 (each of B equal slices holds one draw), and
 * never when P = 0; over all batches the counts pass a chi-square test
 * against B P. Priorities set over two decades, then two more adds: the
 * entries that may now be sampled get the largest priority, the stale
 * ones none. */
static void prioritized_draws_match_the_probabilities(void **state) {
  (void)state;
  world W;
  world_init(&W, 1, 1, 1, 4, 2, 90, 1, 0.6f);
  for (int it = 0; it < 70; it++) world_step(&W, 1, 5); /* wrapped, with episode ends */
  int64_t ok[90], bad[90], nok, nbad;
  split_slots(&W, ok, &nok, bad, &nbad);
  assert_true(nok > 20 && nbad > 10);
  float p[90];
  for (int64_t j = 0; j < nok; j++) p[j] = 0.1f * powf(100.0f, agt_uniform(&W.g, 0.0f, 1.0f));
  update_host(&W, ok, p, nok);
  world_step(&W, 1, 5);
  world_step(&W, 1, 5);
  check_tree(&W);
  double P[90], sum = 0.0;
  for (int64_t x = 0; x < 90; x++) sum += P[x] = ref_leaf(&W, x);
  for (int64_t x = 0; x < 90; x++) P[x] /= sum;
  ag_rng *rng;
  agt_ok(ag_rng_create(W.ctx, 11, &rng));
  enum { B = 1000, ROUNDS = 40 };
  static int64_t cols[B];
  int64_t hits[90] = {0};
  for (int r = 0; r < ROUNDS; r++) {
    ag_tensor *obs, *next, *idx, *w;
    agt_ok(ag_frames_sample_per(W.t, rng, B, 0.5f, AG_U8, &obs, &next, NULL, &idx, &w));
    agt_ok(ag_tensor_read(idx, cols, sizeof cols));
    int64_t c[90] = {0};
    for (int j = 0; j < B; j++) {
      assert_true(cols[j] >= 0 && cols[j] < 90);
      c[cols[j]]++;
    }
    for (int64_t x = 0; x < 90; x++) {
      if (P[x] == 0.0 ? c[x] != 0 : !(fabs((double)c[x] - B * P[x]) <= 2.0 + 1e-6))
        fail_msg("batch %d: slot %lld drawn %lld times, B P = %.3f", r, (long long)x, (long long)c[x],
                 B * P[x]);
      hits[x] += c[x];
    }
    if (r < 3) check_weights(&W, cols, B, w, 0.5f);
    ag_ctx_reset(W.ctx);
  }
  double chi2 = 0.0;
  for (int64_t x = 0; x < 90; x++)
    if (P[x] > 0.0) chi2 += pow((double)hits[x] - (double)B * ROUNDS * P[x], 2) / ((double)B * ROUNDS * P[x]);
  const double df = (double)nok - 1.0;
  if (!(chi2 < df + 6.0 * sqrt(2.0 * df))) fail_msg("chi-square %.1f over %.0f degrees of freedom", chi2, df);
  ag_rng_free(rng);
  world_free(&W);
}

/* A recorded sample reads the ring (and, prioritized, the tree) on the
 * device at each replay: after more adds (and updates), it draws what an
 * eager sample with the same rng state draws, weights too, and the stacks
 * (and weights) are the reference's. */
typedef struct rec_step {
  ag_frames *t;
  ag_rng *rng;
  int prioritized;
  ag_tensor *obs, *next, *idx, *w;
} rec_step;

static ag_status rec_sample(ag_ctx *ctx, void *user) {
  (void)ctx;
  rec_step *r = user;
  if (r->prioritized)
    return ag_frames_sample_per(r->t, r->rng, 16, 0.4f, AG_U8, &r->obs, &r->next, NULL, &r->idx, &r->w);
  return ag_frames_sample(r->t, r->rng, 16, AG_U8, &r->obs, &r->next, NULL, &r->idx);
}

static void recorded_sample_matches_an_eager_one(int prioritized) {
  world W;
  world_init(&W, 2, 2, 1, 3, 2, 40, prioritized, 0.5f);
  for (int it = 0; it < 20; it++) world_step(&W, 1, 4); /* wrapped */
  rec_step rec = {W.t, NULL, prioritized, NULL, NULL, NULL, NULL}, eager = rec;
  agt_ok(ag_rng_create(W.ctx, 5, &eager.rng));
  agt_ok(ag_rng_create(W.ctx, 5, &rec.rng));
  ag_capture *cap;
  agt_ok(ag_capture_create(W.ctx, rec_sample, &rec, &cap));
  for (int it = 0; it < 12; it++) {
    world_step(&W, 1 + agt_below(&W.g, 2), 4);
    if (prioritized) {
      int64_t ok[40], bad[40], nok, nbad;
      float p[40];
      split_slots(&W, ok, &nok, bad, &nbad);
      for (int64_t j = 0; j < nok; j++) p[j] = agt_uniform(&W.g, 0.1f, 5.0f);
      if (nok) update_host(&W, ok, p, nok < 6 ? nok : 6);
    }
    agt_ok(ag_capture_replay(cap));
    agt_ok(rec_sample(W.ctx, &eager));
    int64_t a[16];
    agt_ok(ag_tensor_read(rec.idx, a, sizeof a));
    same_bytes(rec.idx, eager.idx, sizeof a);
    same_bytes(rec.obs, eager.obs, 16 * 12);
    check_batch(&W, a, 16, AG_U8, rec.obs, rec.next, NULL);
    if (prioritized) {
      same_bytes(rec.w, eager.w, 16 * sizeof(float));
      check_weights(&W, a, 16, rec.w, 0.4f);
    }
    ag_ctx_reset(W.ctx);
  }
  ag_capture_free(cap);
  ag_rng_free(eager.rng);
  ag_rng_free(rec.rng);
  world_free(&W);
}

static void recorded_sample_follows_the_ring(void **state) {
  (void)state;
  recorded_sample_matches_an_eager_one(0);
}

static void recorded_prioritized_sample_follows_the_table(void **state) {
  (void)state;
  recorded_sample_matches_an_eager_one(1);
}

/* Whether the file holds the bytes of `key`. */
static int file_has(const char *path, const char *key) {
  size_t n;
  unsigned char *b = agt_slurp(path, &n);
  const size_t k = strlen(key);
  int found = 0;
  for (size_t i = 0; i + k <= n && !found; i++) found = memcmp(b + i, key, k) == 0;
  free(b);
  return found;
}

/* A prioritized table saved and loaded: the same leaves bit for bit, the
 * same largest priority, the same draws and weights from the same rng
 * state, and later adds and updates go on as the reference's. It is
 * written as frames.version 2 (frames.alpha); an unprioritized table as
 * version 1, as before. */
static void prioritized_tables_save_and_load(void **state) {
  (void)state;
  world W;
  world_init(&W, 3, 2, 2, 4, 2, 61, 1, 0.8f);
  int64_t ok[61], bad[61], nok, nbad;
  for (int it = 0; it < 45; it++) {
    world_step(&W, 1 + agt_below(&W.g, 2), 5);
    split_slots(&W, ok, &nok, bad, &nbad);
    float p[61];
    for (int64_t j = 0; j < nok; j++) p[j] = agt_uniform(&W.g, 0.1f, 3.0f);
    if (nok) update_host(&W, ok, p, nok < 4 ? nok : 4);
  }
  char path[] = "/tmp/agrl_framesXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  agt_ok(ag_frames_save(W.t, path));
  assert_true(file_has(path, "frames.alpha"));
  ag_frames *L = NULL;
  agt_ok(ag_frames_load(W.ctx, path, &L));
  assert_int_equal(ag_frames_count(L), ag_frames_count(W.t));
  assert_true(ag_per_alpha(ag_replay_per(ag_frames_replay(L))) == 0.8f);
  int d0, d1;
  double *t0 = read_tree(W.t, &d0), *t1 = read_tree(L, &d1);
  assert_int_equal(d0, d1);
  assert_memory_equal(t0, t1, ((size_t)ag__per_offset(d0) + 1) * sizeof *t0);
  free(t0), free(t1);
  ag_rng *r[2];
  ag_tensor *obs[2], *next[2], *idx[2], *w[2];
  const int64_t B = 40, D = ag_frames_obs_size(W.t);
  for (int i = 0; i < 2; i++) {
    agt_ok(ag_rng_create(W.ctx, 7, &r[i]));
    agt_ok(ag_frames_sample_per(i ? L : W.t, r[i], B, 0.6f, AG_U8, &obs[i], &next[i], NULL, &idx[i], &w[i]));
  }
  same_bytes(idx[0], idx[1], (size_t)B * sizeof(int64_t));
  same_bytes(w[0], w[1], (size_t)B * sizeof(float));
  same_bytes(next[0], next[1], (size_t)(B * D));
  ag_frames_free(W.t);
  W.t = L;
  check_tree(&W);
  int64_t cols[24];
  for (int it = 0; it < 20; it++) {
    world_step(&W, 1 + agt_below(&W.g, 3), 5);
    check_tree(&W);
    split_slots(&W, ok, &nok, bad, &nbad);
    float p[61];
    for (int64_t j = 0; j < nok; j++) p[j] = agt_uniform(&W.g, 0.1f, 6.0f);
    if (nok) update_dev(&W, ok, p, nok, AG_I64);
    check_tree(&W);
    sample_per_checked(&W, r[0], 24, 0.5f, it % 2 ? AG_U8 : AG_F32, cols);
    ag_ctx_reset(W.ctx);
  }
  /* the fields' table without its sampler is refused at save, the file left as it was */
  agt_ok(ag_frames_save(W.t, path));
  size_t n0;
  unsigned char *before = agt_slurp(path, &n0);
  ag_per_free(ag_replay_per(ag_frames_replay(W.t)));
  agt_err(ag_frames_save(W.t, path), AG_ERR_STATE, "freed");
  size_t n1;
  unsigned char *after = agt_slurp(path, &n1);
  assert_int_equal(n0, n1);
  assert_memory_equal(before, after, n0);
  free(before), free(after);
  /* an unprioritized table: version 1, no frames.alpha, and it loads without a sampler */
  world U;
  world_new(&U, 2, 2, 1, 2, 1, 20);
  for (int it = 0; it < 8; it++) world_step(&U, 1, 4);
  agt_ok(ag_frames_save(U.t, path));
  assert_false(file_has(path, "frames.alpha"));
  agt_ok(ag_frames_load(U.ctx, path, &L));
  assert_null(ag_replay_per(ag_frames_replay(L)));
  ag_frames_free(L);
  world_free(&U);
  unlink(path);
  ag_rng_free(r[0]), ag_rng_free(r[1]);
  world_free(&W);
}

/* Refusals: the configuration (before anything is allocated), the samplers'
 * and updates' arguments, an unprioritized table, a sampler freed; none
 * changes the table or its tree. */
static void prioritized_bad_input_is_refused_and_changes_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field f[2] = {{"action", 1, AG_I64}, {"reward", 1, AG_F32}};
  ag_frames *t = NULL;
  ag_frames_config cfg = {4, 4, 1, 2, 2, 40, 0, 1, 0.6f};
  const uint64_t live = agt_live_bytes(ctx);
  ag_frames_config bad = cfg;
  bad.prioritized = 2;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "prioritized = 2");
  bad = cfg, bad.alpha = 1.5f;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "alpha = 1.5");
  bad = cfg, bad.alpha = NAN;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "alpha");
  bad = cfg, bad.alpha = -0.1f;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_INVALID_ARG, "alpha");
  bad = cfg, bad.capacity = AG_PER_MAX_CAPACITY + 1, bad.height = 1, bad.width = 1;
  agt_err(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t), AG_ERR_UNSUPPORTED, "beyond prioritized replay");
  assert_null(t);
  assert_int_equal(agt_live_bytes(ctx), live);
  bad = cfg, bad.prioritized = 0, bad.alpha = 7.0f; /* alpha is not read without prioritized */
  agt_ok(ag_frames_create(ctx, &bad, f, 2, AG_F32, &t));
  uint8_t px[6 * 16] = {0}, first[6] = {1, 1, 0, 0, 0, 0};
  int64_t act[6] = {1, 2, 3, 4, 5, 6};
  float rew[6] = {0};
  const void *data[2] = {act, rew};
  agt_ok(ag_frames_add(t, px, first, data, 3));
  ag_rng *rng;
  agt_ok(ag_rng_create(ctx, 1, &rng));
  ag_tensor *o = NULL, *no = NULL, *w = NULL;
  const int64_t slots[2] = {0, 1};
  const float prio[2] = {1.0f, 2.0f};
  agt_err(ag_frames_sample_per(t, rng, 2, 0.4f, AG_U8, &o, &no, NULL, NULL, &w), AG_ERR_STATE,
          "without prioritized");
  agt_err(ag_frames_update_priorities_host(t, slots, prio, 2), AG_ERR_STATE, "without prioritized");
  ag_tensor *ti, *tp;
  agt_ok(ag_tensor_create(ctx, 2, 1, AG_I64, slots, &ti));
  agt_ok(ag_tensor_create(ctx, 2, 1, AG_F32, prio, &tp));
  agt_err(ag_frames_update_priorities(t, ti, tp), AG_ERR_STATE, "without prioritized");
  ag_frames_free(t);
  /* a prioritized table */
  agt_ok(ag_frames_create(ctx, &cfg, f, 2, AG_F32, &t));
  agt_err(ag_frames_sample_per(t, rng, 2, 0.4f, AG_U8, &o, &no, NULL, NULL, &w), AG_ERR_STATE, "fewer than");
  agt_ok(ag_frames_add(t, px, first, data, 3));
  assert_int_equal(ag_frames_count(t), 4);
  int depth;
  double *tree = read_tree(t, &depth), *now;
  const size_t tbytes = ((size_t)ag__per_offset(depth) + 1) * sizeof(double);
  agt_err(ag_frames_sample_per(t, rng, 2, -0.1f, AG_U8, &o, &no, NULL, NULL, &w), AG_ERR_INVALID_ARG,
          "beta = -0.1");
  agt_err(ag_frames_sample_per(t, rng, 2, NAN, AG_U8, &o, &no, NULL, NULL, &w), AG_ERR_INVALID_ARG, "beta");
  agt_err(ag_frames_sample_per(t, rng, 0, 0.4f, AG_U8, &o, &no, NULL, NULL, &w), AG_ERR_INVALID_ARG, "B = 0");
  agt_err(ag_frames_sample_per(t, rng, 2, 0.4f, AG_I32, &o, &no, NULL, NULL, &w), AG_ERR_INVALID_ARG,
          "obs_dtype");
  agt_err(ag_frames_sample_per(t, NULL, 2, 0.4f, AG_U8, &o, &no, NULL, NULL, &w), AG_ERR_INVALID_ARG,
          "must not be NULL");
  assert_null(o);
  assert_null(w);
  const int64_t stale[3] = {0, 4, 1}, outside[1] = {40};
  const float neg[2] = {1.0f, -1.0f}, inf[2] = {INFINITY, 1.0f}, nan[2] = {1.0f, NAN};
  agt_err(ag_frames_update_priorities_host(t, stale, prio, 3), AG_ERR_OUT_OF_RANGE, "idx[1] = 4");
  agt_err(ag_frames_update_priorities_host(t, outside, prio, 1), AG_ERR_OUT_OF_RANGE, "idx[0] = 40");
  agt_err(ag_frames_update_priorities_host(t, slots, neg, 2), AG_ERR_INVALID_ARG, "priorities[1]");
  agt_err(ag_frames_update_priorities_host(t, slots, inf, 2), AG_ERR_INVALID_ARG, "priorities[0]");
  agt_err(ag_frames_update_priorities_host(t, slots, nan, 2), AG_ERR_INVALID_ARG, "priorities[1]");
  agt_err(ag_frames_update_priorities_host(t, slots, prio, 0), AG_ERR_INVALID_ARG, "n = 0");
  agt_err(ag_frames_update_priorities_host(t, NULL, prio, 2), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_frames_update_priorities_host(NULL, slots, prio, 2), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_frames_update_priorities(NULL, ti, tp), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_frames_update_priorities(t, NULL, tp), AG_ERR_INVALID_ARG, "idx");
  ag_tensor *tf;
  agt_ok(ag_tensor_create(ctx, 2, 1, AG_F32, prio, &tf));
  agt_err(ag_frames_update_priorities(t, tf, tp), AG_ERR_SHAPE, "i32 or i64");
  now = read_tree(t, &depth);
  assert_memory_equal(now, tree, tbytes);
  free(now);
  /* the sampler freed: every call that needs it refused, the table as it was */
  const int64_t size = ag_frames_size(t), pos = ag_frames_position(t);
  ag_per_free(ag_replay_per(ag_frames_replay(t)));
  agt_err(ag_frames_add(t, px, first, data, 1), AG_ERR_STATE, "freed");
  agt_err(ag_frames_sample_per(t, rng, 2, 0.4f, AG_U8, &o, &no, NULL, NULL, &w), AG_ERR_STATE, "freed");
  agt_err(ag_frames_update_priorities_host(t, slots, prio, 2), AG_ERR_STATE, "freed");
  agt_err(ag_frames_update_priorities(t, ti, tp), AG_ERR_STATE, "freed");
  assert_int_equal(ag_frames_size(t), size);
  assert_int_equal(ag_frames_position(t), pos);
  agt_ok(ag_frames_sample(t, rng, 2, AG_U8, &o, &no, NULL, NULL)); /* uniform sampling needs no sampler */
  free(tree);
  ag_frames_free(t);
  ag_rng_free(rng);
  ag_ctx_free(ctx);
}

/* ---- samples into the caller's tensors ---- */

/* The bytes of a tensor, read. */
static unsigned char *bytes_of(const ag_tensor *t) {
  const size_t n = (size_t)ag_tensor_numel(t) * ag_dtype_size(ag_tensor_dtype(t));
  unsigned char *b = malloc(n);
  assert_non_null(b);
  agt_ok(ag_tensor_read(t, b, n));
  return b;
}

/* Persistent outputs of a batch of B: obs and next_obs [D, B] of dt,
 * batch [rows, B] f32, idx and weights B values as a row or a column. */
typedef struct outs {
  ag_tensor *obs, *next, *batch, *idx, *w;
} outs;

static outs outs_new(const world *W, int64_t B, ag_dtype dt, int row) {
  outs o;
  const int64_t D = ag_frames_obs_size(W->t), rows = ag_replay_rows(ag_frames_replay(W->t));
  agt_ok(ag_tensor_create(W->ctx, D, B, dt, NULL, &o.obs));
  agt_ok(ag_tensor_create(W->ctx, D, B, dt, NULL, &o.next));
  agt_ok(ag_tensor_create(W->ctx, rows, B, AG_F32, NULL, &o.batch));
  agt_ok(ag_tensor_create(W->ctx, row ? 1 : B, row ? B : 1, AG_I64, NULL, &o.idx));
  agt_ok(ag_tensor_create(W->ctx, row ? B : 1, row ? 1 : B, AG_F32, NULL, &o.w));
  return o;
}

static void outs_free(outs *o) {
  ag_tensor_free(o->obs), ag_tensor_free(o->next), ag_tensor_free(o->batch), ag_tensor_free(o->idx);
  ag_tensor_free(o->w);
}

/* Uniform and prioritized batches written into the caller's tensors are the
 * copying samples' bits from the same rng state (stacks in both dtypes,
 * fields, entries, weights), the rng moved on alike; they are the
 * episodes' stacks; the optional outputs may be left out. */
static void samples_into_the_callers_tensors_are_the_copying_samples(void **state) {
  (void)state;
  for (int prioritized = 0; prioritized < 2; prioritized++) {
    world W;
    world_init(&W, 3, 4, 2, 3, 3, 70, prioritized, 0.6f);
    for (int it = 0; it < 40; it++) world_step(&W, 1 + agt_below(&W.g, 3), 5); /* wrapped */
    ag_rng *r[2];
    agt_ok(ag_rng_create(W.ctx, 11, &r[0]));
    agt_ok(ag_rng_create(W.ctx, 11, &r[1]));
    for (int round = 0; round < 4; round++) {
      const ag_dtype dt = round % 2 ? AG_F32 : AG_U8;
      const int64_t B = 20 + round;
      const int partial = round == 3; /* batch, idx and weights left out */
      outs o = outs_new(&W, B, dt, round % 2);
      ag_tensor *obs, *next, *batch, *idx, *w = NULL;
      if (prioritized) {
        agt_ok(ag_frames_sample_per(W.t, r[0], B, 0.4f, dt, &obs, &next, &batch, &idx, &w));
        agt_ok(ag_frames_sample_per_into(W.t, r[1], 0.4f, o.obs, o.next, partial ? NULL : o.batch,
                                         partial ? NULL : o.idx, partial ? NULL : o.w));
      } else {
        agt_ok(ag_frames_sample(W.t, r[0], B, dt, &obs, &next, &batch, &idx));
        agt_ok(ag_frames_sample_into(W.t, r[1], o.obs, o.next, partial ? NULL : o.batch,
                                     partial ? NULL : o.idx));
      }
      same_bytes(obs, o.obs, (size_t)ag_tensor_numel(obs) * ag_dtype_size(dt));
      same_bytes(next, o.next, (size_t)ag_tensor_numel(next) * ag_dtype_size(dt));
      int64_t cols[32];
      agt_ok(ag_tensor_read(idx, cols, (size_t)B * sizeof *cols));
      check_batch(&W, cols, B, dt, o.obs, o.next, partial ? NULL : o.batch);
      if (!partial) {
        same_bytes(batch, o.batch, (size_t)ag_tensor_numel(batch) * sizeof(float));
        same_bytes(idx, o.idx, (size_t)B * sizeof(int64_t));
        if (prioritized) {
          same_bytes(w, o.w, (size_t)B * sizeof(float));
          check_weights(&W, cols, B, w, 0.4f);
        }
      }
      outs_free(&o);
      ag_ctx_reset(W.ctx);
    }
    ag_rng_free(r[0]), ag_rng_free(r[1]);
    world_free(&W);
  }
}

/* Outputs of the wrong shape, dtype, context or layout, overlapping ones,
 * NULL handles, a bad beta and an unprioritized table are refused with the
 * argument named; the outputs keep their bytes and the rng its state (the
 * next draw is a fresh rng's of the same seed). */
static void samples_into_bad_outputs_are_refused_and_change_nothing(void **state) {
  (void)state;
  world W;
  world_init(&W, 2, 3, 1, 2, 1, 30, 1, 0.5f);
  world_step(&W, 12, 4);
  ag_ctx *other = agt_ctx();
  ag_rng *rng, *fresh;
  agt_ok(ag_rng_create(W.ctx, 5, &rng));
  agt_ok(ag_rng_create(W.ctx, 5, &fresh));
  const int64_t B = 4, D = ag_frames_obs_size(W.t);
  outs o = outs_new(&W, B, AG_F32, 0);
  ag_tensor *obs_u8, *short_obs, *ld_obs, *i32, *foreign, *big;
  agt_ok(ag_tensor_create(W.ctx, D, B, AG_U8, NULL, &obs_u8));
  agt_ok(ag_tensor_create(W.ctx, D - 1, B, AG_F32, NULL, &short_obs));
  agt_ok(ag_tensor_create(W.ctx, 2 * D, 2 * B, AG_F32, NULL, &big));
  agt_ok(ag_tensor_create(W.ctx, B, 1, AG_I32, NULL, &i32));
  agt_ok(ag_tensor_create(other, D, B, AG_F32, NULL, &foreign));
  void *bp = NULL;
  int64_t bld = 0;
  agt_ok(ag_tensor_data(big, &bp, &bld));
  agt_ok(ag_tensor_wrap(W.ctx, bp, D, B, bld, AG_F32, &ld_obs)); /* columns 2D apart */
  ag_tensor *half, *tail;                                        /* two views of big sharing bytes */
  agt_ok(ag_tensor_wrap(W.ctx, bp, D, B, D, AG_F32, &half));
  agt_ok(ag_tensor_wrap(W.ctx, (float *)bp + D, D, B, D, AG_F32, &tail));
  unsigned char *before[5];
  ag_tensor *const all[5] = {o.obs, o.next, o.batch, o.idx, o.w};
  for (int i = 0; i < 5; i++) before[i] = bytes_of(all[i]);
  agt_err(ag_frames_sample_into(NULL, rng, o.obs, o.next, NULL, NULL), AG_ERR_INVALID_ARG,
          "must not be NULL");
  agt_err(ag_frames_sample_into(W.t, NULL, o.obs, o.next, NULL, NULL), AG_ERR_INVALID_ARG,
          "must not be NULL");
  agt_err(ag_frames_sample_into(W.t, rng, NULL, o.next, NULL, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_frames_sample_into(W.t, rng, o.obs, NULL, NULL, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_frames_sample_into(W.t, rng, i32, o.next, NULL, NULL), AG_ERR_SHAPE, "obs is a i32");
  agt_err(ag_frames_sample_into(W.t, rng, short_obs, o.next, NULL, NULL), AG_ERR_SHAPE, "obs is a f32");
  agt_err(ag_frames_sample_into(W.t, rng, ld_obs, o.next, NULL, NULL), AG_ERR_SHAPE, "obs is a f32");
  agt_err(ag_frames_sample_into(W.t, rng, foreign, o.next, NULL, NULL), AG_ERR_INVALID_ARG, "obs belongs");
  agt_err(ag_frames_sample_into(W.t, rng, o.obs, obs_u8, NULL, NULL), AG_ERR_SHAPE, "next_obs is a u8");
  agt_err(ag_frames_sample_into(W.t, rng, o.obs, short_obs, NULL, NULL), AG_ERR_SHAPE, "next_obs");
  agt_err(ag_frames_sample_into(W.t, rng, o.obs, o.next, o.idx, NULL), AG_ERR_SHAPE, "batch is a i64");
  agt_err(ag_frames_sample_into(W.t, rng, o.obs, o.next, o.batch, i32), AG_ERR_SHAPE, "idx is a i32");
  agt_err(ag_frames_sample_into(W.t, rng, o.obs, o.next, o.batch, o.w), AG_ERR_SHAPE, "idx is a f32");
  agt_err(ag_frames_sample_into(W.t, rng, o.obs, o.obs, NULL, NULL), AG_ERR_INVALID_ARG,
          "obs and next_obs overlap");
  agt_err(ag_frames_sample_into(W.t, rng, half, tail, NULL, NULL), AG_ERR_INVALID_ARG, "overlap");
  agt_err(ag_frames_sample_per_into(W.t, rng, 1.5f, o.obs, o.next, NULL, NULL, NULL), AG_ERR_INVALID_ARG,
          "beta = 1.5");
  agt_err(ag_frames_sample_per_into(W.t, rng, 0.4f, o.obs, o.next, o.batch, o.idx, o.idx), AG_ERR_SHAPE,
          "weights is a i64");
  agt_err(ag_frames_sample_per_into(W.t, rng, 0.4f, o.obs, o.next, o.batch, o.idx, o.batch), AG_ERR_SHAPE,
          "weights is a f32");
  ag_rng *foreign_rng;
  agt_ok(ag_rng_create(other, 5, &foreign_rng));
  agt_err(ag_frames_sample_into(W.t, foreign_rng, o.obs, o.next, NULL, NULL), AG_ERR_INVALID_ARG,
          "rng belongs");
  for (int i = 0; i < 5; i++) {
    unsigned char *now = bytes_of(all[i]);
    assert_memory_equal(now, before[i],
                        (size_t)ag_tensor_numel(all[i]) * ag_dtype_size(ag_tensor_dtype(all[i])));
    free(now);
    free(before[i]);
  }
  /* the rng as it was: its next batch is a fresh rng's */
  agt_ok(ag_frames_sample_per_into(W.t, rng, 0.4f, o.obs, o.next, o.batch, o.idx, o.w));
  ag_tensor *obs, *next, *idx, *w;
  agt_ok(ag_frames_sample_per(W.t, fresh, B, 0.4f, AG_F32, &obs, &next, NULL, &idx, &w));
  same_bytes(idx, o.idx, (size_t)B * sizeof(int64_t));
  same_bytes(obs, o.obs, (size_t)(D * B) * sizeof(float));
  ag_ctx_reset(W.ctx); /* the wrapped views are freed with the workspace */
  agt_err(ag_frames_sample_into(W.t, rng, half, o.next, NULL, NULL), AG_ERR_FREED, "obs has been freed");
  /* a table without prioritized sampling; too few transitions */
  ag_frames *u = NULL;
  const ag_frames_config cfg = {2, 3, 1, 2, 1, 30, 0, 0, 0.0f};
  const ag_field f[4] = {
      {"action", 1, AG_I64}, {"reward", 1, AG_F32}, {"terminated", 1, AG_F32}, {"truncated", 1, AG_F32}};
  agt_ok(ag_frames_create(W.ctx, &cfg, f, 4, AG_F32, &u));
  agt_err(ag_frames_sample_into(u, rng, o.obs, o.next, NULL, NULL), AG_ERR_STATE, "fewer than the minimum");
  agt_err(ag_frames_sample_per_into(u, rng, 0.4f, o.obs, o.next, NULL, NULL, NULL), AG_ERR_STATE,
          "without prioritized");
  ag_frames_free(u);
  ag_rng_free(rng), ag_rng_free(fresh), ag_rng_free(foreign_rng);
  ag_tensor_free(obs_u8), ag_tensor_free(short_obs), ag_tensor_free(big), ag_tensor_free(i32);
  ag_tensor_free(foreign);
  outs_free(&o);
  ag_ctx_free(other);
  world_free(&W);
}

/* The configuration as made (the defaults resolved) and as loaded. */
static void config_is_the_tables_own(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field f[1] = {{"reward", 1, AG_F32}};
  const ag_frames_config made[2] = {{5, 6, 2, 0, 3, 50, 0, 0, 0.9f}, {1, 2, 3, 7, 2, 40, 9, 1, 0.25f}};
  const ag_frames_config want[2] = {{5, 6, 2, 4, 3, 50, 1, 0, 0.0f}, {1, 2, 3, 7, 2, 40, 9, 1, 0.25f}};
  char path[] = "/tmp/agrl_framescfgXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  for (int i = 0; i < 2; i++) {
    ag_frames *t = NULL, *l = NULL;
    agt_ok(ag_frames_create(ctx, &made[i], f, 1, AG_F32, &t));
    agt_ok(ag_frames_save(t, path));
    agt_ok(ag_frames_load(ctx, path, &l));
    ag_frames *const both[2] = {t, l};
    for (int k = 0; k < 2; k++) {
      ag_frames_config c;
      memset(&c, 0xff, sizeof c);
      agt_ok(ag_frames_get_config(both[k], &c));
      assert_int_equal(c.height, want[i].height);
      assert_int_equal(c.width, want[i].width);
      assert_int_equal(c.channels, want[i].channels);
      assert_int_equal(c.stack, want[i].stack);
      assert_int_equal(c.n_envs, want[i].n_envs);
      assert_int_equal(c.capacity, want[i].capacity);
      assert_int_equal(c.min_size, want[i].min_size);
      assert_int_equal(c.prioritized, want[i].prioritized);
      assert_true(c.alpha == want[i].alpha);
    }
    ag_frames_config c = want[i];
    agt_err(ag_frames_get_config(NULL, &c), AG_ERR_INVALID_ARG, "must not be NULL");
    agt_err(ag_frames_get_config(t, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
    ag_frames_free(t), ag_frames_free(l);
  }
  unlink(path);
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
      cmocka_unit_test(prioritized_leaves_follow_the_episodes),
      cmocka_unit_test(prioritized_draws_match_the_probabilities),
      cmocka_unit_test(recorded_prioritized_sample_follows_the_table),
      cmocka_unit_test(prioritized_tables_save_and_load),
      cmocka_unit_test(prioritized_bad_input_is_refused_and_changes_nothing),
      cmocka_unit_test(samples_into_the_callers_tensors_are_the_copying_samples),
      cmocka_unit_test(samples_into_bad_outputs_are_refused_and_change_nothing),
      cmocka_unit_test(config_is_the_tables_own),
  };
  return agt_run(argc, argv, "frames", tests, sizeof tests / sizeof tests[0]);
}
