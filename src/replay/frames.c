/* frames.c — frame tables (agrl/frames.h): one u8 frame per entry in a
 * buffer of its own, the scalar fields in an ag_replay of the same
 * capacity, stacks rebuilt by AG__K_FRAME_STACK.
 *
 * The frame buffer's column x holds entry x's frame and, in its last row,
 * the entry's first flag, so the kernel reads the flags where it reads the
 * frames. The host keeps a copy of the flags and the number of entries that
 * may be sampled, updated by each add over the few entries an add can
 * change (base/frames.h decides, on the host as on the device).
 *
 * A prioritized table's sampler is its fields' table's (ag_per, per.c),
 * kept so that an entry's leaf is 0 whenever it may not be sampled: each
 * add gives the largest priority to the entries that may now be sampled
 * for the first time (the new ones, by the fields' add, and the copies'
 * previous newest), sends the standing of the entries it can change to a
 * mask on the device, and zeroes the leaves the mask marks; every update
 * skips the entries the mask marks (AG__K_PER_SET's mask), so that no
 * priority reaches an entry that may not be sampled, whenever it runs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/frames.h"
#include "base/frames.h"
#include "core/internal.h"
#include "graph/graph_internal.h"
#include "replay/frames_internal.h"
#include "replay/replay_internal.h"

void ag_frames_free(ag_frames *t) {
  if (!t) return;
  ag_replay_free(t->r);
  ag_buffer_free(t->frames);
  ag_tensor_free(t->nsize_dev);
  ag_tensor_free(t->npos_dev);
  ag_tensor_free(t->mask);
  free(t->valid);
  free(t->first);
  free(t->stage);
  free(t);
}

/* The ring as the host sees it (ag_frames_ring of base/frames.h). */
static ag__frames_ring ring_of(const ag_frames *t) {
  ag__frames_ring g = {t->capacity, t->r->size, t->r->pos, t->n_envs, t->stack, t->first, 1, 0};
  return g;
}

/* The kernel's arguments for B columns, the ring read on the device. obs,
 * next and cols: the caller's tensors (checked by check_into) where they
 * are not NULL on entry, otherwise temporaries made here. */
static ag_status stack_args(ag_frames *t, int64_t B, ag_dtype obs_dtype, const char *fn,
                            ag__frame_stack_args *a, ag_tensor **obs, ag_tensor **next, ag_tensor **cols) {
  memset(a, 0, sizeof *a);
  void *fp = NULL, *sz = NULL, *ps = NULL, *po = NULL, *pn = NULL, *pc = NULL;
  ag_status s;
  if ((s = ag__replay_sync_pos(t->r, fn)) || (s = ag__store_ensure(t->ctx, &t->frames->store)) ||
      (s = ag__tensor_ptr(t->r->size_dev, &sz)) || (s = ag__tensor_ptr(t->r->pos_dev, &ps)))
    return s;
  fp = t->frames->store.ptr;
  const int64_t D = t->stack * t->hwc;
  if ((!*obs && (s = ag__tensor_temp(t->ctx, D, B, obs_dtype, obs))) ||
      (!*next && (s = ag__tensor_temp(t->ctx, D, B, obs_dtype, next))) ||
      (!*cols && (s = ag__tensor_temp(t->ctx, B, 1, AG_I64, cols))) || (s = ag__tensor_ptr(*obs, &po)) ||
      (s = ag__tensor_ptr(*next, &pn)) || (s = ag__tensor_ptr(*cols, &pc)))
    return s;
  a->frames = fp;
  a->h = t->h, a->w = t->w, a->c = t->c, a->capacity = t->capacity, a->n_envs = t->n_envs;
  a->stack = t->stack;
  a->size_dev = sz, a->pos_dev = ps;
  a->B = B;
  a->cols = pc;
  a->obs = po, a->next_obs = pn;
  a->out_dtype = obs_dtype;
  return AG_OK;
}

ag_status ag__frames_alloc(ag_ctx *ctx, const ag_frames_config *cfg, const char *fn, ag_frames **out) {
  if (cfg->height < 1 || cfg->width < 1 || cfg->channels < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: a frame of %lld x %lld x %lld; each size must be positive", fn,
                    (long long)cfg->height, (long long)cfg->width, (long long)cfg->channels);
  if (cfg->height > INT32_MAX || cfg->width > INT32_MAX || cfg->channels > INT32_MAX ||
      cfg->height * cfg->width > INT32_MAX / cfg->channels ||
      cfg->height * cfg->width * cfg->channels > INT32_MAX - 2)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: a frame of %lld x %lld x %lld is larger than 2^31 - 2 bytes", fn,
                    (long long)cfg->height, (long long)cfg->width, (long long)cfg->channels);
  if (cfg->stack < 0 || cfg->stack > AG_FRAMES_MAX_STACK)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: stack = %d must be in 1..%d (0 for 4)", fn, cfg->stack,
                    AG_FRAMES_MAX_STACK);
  if (cfg->capacity < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: capacity = %lld must be positive", fn, (long long)cfg->capacity);
  if (cfg->n_envs < 1 || cfg->n_envs > cfg->capacity)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_envs = %lld must be in 1..capacity (%lld)", fn,
                    (long long)cfg->n_envs, (long long)cfg->capacity);
  if (cfg->min_size < 0 || cfg->min_size > cfg->capacity)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: min_size = %lld must be in 0..capacity (%lld)", fn,
                    (long long)cfg->min_size, (long long)cfg->capacity);
  if (cfg->prioritized != 0 && cfg->prioritized != 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: prioritized = %d must be 0 or 1", fn, cfg->prioritized);
  ag_status s = ag__not_recording(ctx, fn);
  if (s || (cfg->prioritized && (s = ag__per_check(ctx, cfg->capacity, cfg->alpha, fn)))) return s;
  ag_frames *t = ag__calloc(1, sizeof *t);
  if (!t) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  t->ctx = ctx;
  t->h = cfg->height, t->w = cfg->width, t->c = cfg->channels, t->hwc = t->h * t->w * t->c;
  t->stack = cfg->stack ? cfg->stack : 4;
  t->n_envs = cfg->n_envs, t->capacity = cfg->capacity;
  t->min_size = cfg->min_size ? cfg->min_size : 1;
  t->prioritized = cfg->prioritized;
  t->alpha = cfg->prioritized ? cfg->alpha : 0.0f;
  t->first = ag__calloc((size_t)t->capacity, 1);
  if (t->prioritized) t->valid = ag__calloc((size_t)t->capacity, 1);
  s = t->first && (t->valid || !t->prioritized)
          ? AG_OK
          : ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (!s) s = ag_buffer_create(ctx, t->hwc + 1, t->capacity, AG_U8, &t->frames);
  const int64_t zero = 0, back = (t->capacity - t->n_envs) % t->capacity; /* an empty ring's */
  if (!s) s = ag_tensor_create(ctx, 1, 1, AG_I64, &zero, &t->nsize_dev);
  if (!s) s = ag_tensor_create(ctx, 1, 1, AG_I64, &back, &t->npos_dev);
  if (!s && t->prioritized) s = ag_tensor_create(ctx, t->capacity, 1, AG_U8, NULL, &t->mask);
  if (s) {
    ag_frames_free(t);
    return s;
  }
  *out = t;
  return AG_OK;
}

ag_status ag_frames_create(ag_ctx *ctx, const ag_frames_config *cfg, const ag_field *fields, int n_fields,
                           ag_dtype storage, ag_frames **out) {
  static const char fn[] = "ag_frames_create";
  if (!ctx || !cfg || !fields || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, cfg, fields and out must not be NULL", fn);
  ag_frames *t = NULL;
  ag_status s = ag__frames_alloc(ctx, cfg, fn, &t);
  if (!s) s = ag_replay_create(ctx, fields, n_fields, t->capacity, storage, 1, &t->r);
  ag_per *per = NULL;
  if (!s && t->prioritized && !(s = ag_per_create(t->r, t->alpha, &per))) s = ag__frames_per_attach(t, fn);
  if (s) {
    ag_frames_free(t);
    return s;
  }
  *out = t;
  return AG_OK;
}

ag_status ag__frames_check_sound(const ag_frames *t, const char *fn) {
  if (t->broken)
    return ag__fail(AG_ERR_STATE,
                    "%s: a device error interrupted an earlier ag_frames_add, which left the frames partly "
                    "written; free the table",
                    fn);
  return ag__replay_check_sound(t->r, fn);
}

/* The number of entries that may be sampled among the slots from .. from+n-1
 * (mod capacity), each one's standing (0 / 1) into mask[slot] when mask is
 * not NULL. */
static int64_t standing(const ag_frames *t, int64_t from, int64_t n, uint8_t *mask) {
  const ag__frames_ring g = ring_of(t);
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t x = ((from + i) % t->capacity + t->capacity) % t->capacity;
    const int v = ag__frames_valid(&g, x);
    if (mask) mask[x] = (uint8_t)v;
    k += v;
  }
  return k;
}

int64_t ag__frames_count_in(const ag_frames *t, int64_t from, int64_t n) {
  return standing(t, from, n, NULL);
}

/* The slots from .. from+n-1 (mod capacity, n <= capacity) as at most two
 * runs that do not wrap: at[i], len[i]; returns how many. */
static int ring_runs(const ag_frames *t, int64_t from, int64_t n, int64_t at[2], int64_t len[2]) {
  if (n <= 0) return 0;
  at[0] = (from % t->capacity + t->capacity) % t->capacity;
  len[0] = n < t->capacity - at[0] ? n : t->capacity - at[0];
  at[1] = 0, len[1] = n - len[0];
  return len[1] > 0 ? 2 : 1;
}

ag_status ag__frames_per(const ag_frames *t, const char *fn, ag_per **out) {
  if (!t->prioritized)
    return ag__fail(AG_ERR_STATE,
                    "%s: the table was made without prioritized sampling (ag_frames_config's "
                    "prioritized)",
                    fn);
  *out = ag_replay_per(t->r);
  if (!*out)
    return ag__fail(AG_ERR_STATE,
                    "%s: the table's prioritized sampler was freed (by ag_per_free); free the table", fn);
  return AG_OK;
}

/* The slots from .. from+n-1: the host's mask (t->valid) sent to the
 * device, then the leaves of those it marks 0 set to 0. */
static ag_status send_standing(ag_frames *t, ag_per *per, int64_t from, int64_t n, const char *fn) {
  int64_t at[2], len[2];
  void *mp = NULL;
  ag_status s = ag__tensor_ptr(t->mask, &mp);
  for (int i = 0, runs = ring_runs(t, from, n, at, len); i < runs && !s; i++) {
    s = ag__mem_upload_copy(t->ctx, fn, (uint8_t *)mp + at[i], t->valid + at[i], (size_t)len[i]);
    if (!s) s = ag__per_fill(per, at[i], len[i], 1);
  }
  return s;
}

ag_status ag__frames_per_attach(ag_frames *t, const char *fn) {
  ag_per *per = NULL;
  ag_status s = ag__frames_per(t, fn, &per);
  if (s) return s;
  ag__per_set_mask(per, t->mask);
  standing(t, 0, t->capacity, t->valid);
  return send_standing(t, per, 0, t->capacity, fn);
}

ag_status ag_frames_add(ag_frames *t, const uint8_t *frames, const uint8_t *first, const void *const *data,
                        int64_t steps) {
  static const char fn[] = "ag_frames_add";
  if (!t) return ag__fail(AG_ERR_INVALID_ARG, "%s: table is NULL", fn);
  ag_status s = ag__frames_check_sound(t, fn);
  if (s) return s;
  if (steps < 0)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: steps = %lld must not be negative", fn, (long long)steps);
  if (steps == 0) return AG_OK;
  if (!frames || !first || !data)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: frames, first and data must not be NULL", fn);
  if (steps > t->capacity / t->n_envs)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: %lld steps of %lld copies do not fit a table of %lld entries",
                    fn, (long long)steps, (long long)t->n_envs, (long long)t->capacity);
  if ((s = ag__not_recording(t->ctx, fn))) return s;
  ag_per *per = NULL;
  if (t->prioritized && (s = ag__frames_per(t, fn, &per))) return s;
  const int64_t k = steps * t->n_envs, fr = t->hwc + 1;
  const size_t need = (size_t)k * (size_t)fr;
  if (need > t->stage_cap) {
    uint8_t *p = ag__realloc(t->stage, need);
    if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory for %zu bytes of frames", fn, need);
    t->stage = p;
    t->stage_cap = need;
  }
  for (int64_t j = 0; j < k; j++) {
    memcpy(t->stage + (size_t)j * (size_t)fr, frames + (size_t)j * (size_t)t->hwc, (size_t)t->hwc);
    t->stage[(size_t)j * (size_t)fr + (size_t)t->hwc] = first[j] != 0;
  }
  /* the entries whose standing an add can change: the copies' newest
   * (whose next entries come now), the new ones, and the oldest survivors
   * (whose stacks may now reach overwritten frames) */
  const int64_t pos = t->r->pos, span = k + (int64_t)t->stack * t->n_envs;
  const int whole = span >= t->capacity;
  const int64_t before = whole ? 0 : ag__frames_count_in(t, pos - t->n_envs, span);
  /* the fields first: their add checks everything and changes nothing on error */
  if ((s = ag_replay_add(t->r, data, k))) return s;
  const int64_t first_part = k < t->capacity - pos ? k : t->capacity - pos;
  s = ag_buffer_write(t->frames, t->stage, AG_U8, fr, first_part, pos);
  if (!s && k > first_part)
    s = ag_buffer_write(t->frames, t->stage + (size_t)first_part * (size_t)fr, AG_U8, fr, k - first_part, 0);
  if (!s) s = ag__frames_set_walk_ring(t);
  if (s) {
    t->broken = 1; /* the fields moved on, the frames (or the walks' ring) did not all follow */
    return s;
  }
  for (int64_t j = 0; j < k; j++) t->first[(pos + j) % t->capacity] = first[j] != 0;
  const int64_t from = whole ? 0 : pos - t->n_envs, n = whole ? t->capacity : span;
  const int64_t now = standing(t, from, n, per ? t->valid : NULL);
  t->count = whole ? now : t->count - before + now;
  if (!per) return AG_OK;
  /* the copies' previous newest entries may now be sampled for the first
   * time: the largest priority, as the new ones got it from the fields' add
   * (those of them the add overwrote are new ones); then the mask of the
   * entries the add could change, and their leaves by it */
  int64_t at[2], len[2];
  for (int i = 0, runs = ring_runs(t, pos - t->n_envs, t->n_envs, at, len); i < runs && !s; i++)
    s = ag__per_fill(per, at[i], len[i], 0);
  if (!s) s = send_standing(t, per, from, n, fn);
  if (s) t->broken = 1; /* the fields and frames moved on, the sampler did not all follow */
  return s;
}

static ag_status check_obs_dtype(ag_dtype d, const char *fn) {
  if (d == AG_U8 || d == AG_F32) return AG_OK;
  return ag__fail(AG_ERR_INVALID_ARG, "%s: obs_dtype %d; stacks come as u8 (AG_U8) or f32 (AG_F32)", fn,
                  (int)d);
}

/* The fields of the columns cols (when batch is asked for), then the outputs. */
static ag_status finish(ag_frames *t, ag_tensor *cols, ag_tensor *o, ag_tensor *no, ag_tensor **obs,
                        ag_tensor **next_obs, ag_tensor **batch) {
  ag_tensor *b = NULL;
  if (batch) {
    ag_status s = ag_get_rows_dev(t->r->buf, cols, &b);
    if (s) return s;
    *batch = b;
  }
  *obs = o;
  *next_obs = no;
  return AG_OK;
}

/* The first checks of every sampler: its handles, and the table sound. */
static ag_status check_sample(const ag_frames *t, ag_rng *rng, int outs_given, const char *fn) {
  if (!t || !rng || !outs_given)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: table, rng, obs and next_obs must not be NULL", fn);
  return ag__frames_check_sound(t, fn);
}

static ag_status check_rng(const ag_frames *t, ag_rng *rng, const char *fn) {
  if (ag__rng_counter_tensor(rng)->ctx != t->ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: rng belongs to another context than the table", fn);
  return AG_OK;
}

static ag_status check_b(int64_t B, const char *fn) {
  if (B < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: B = %lld must be positive", fn, (long long)B);
  return AG_OK;
}

static ag_status check_beta(float beta, const char *fn) {
  if (!(beta >= 0.0f && beta <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: beta = %g must be in [0, 1]", fn, (double)beta);
  return AG_OK;
}

static ag_status check_min_size(const ag_frames *t, const char *fn) {
  if (t->count < t->min_size)
    return ag__fail(AG_ERR_STATE, "%s: %lld transitions may be sampled, fewer than the minimum %lld", fn,
                    (long long)t->count, (long long)t->min_size);
  return AG_OK;
}

/* The caller's outputs of a sample: obs, next_obs and (where not NULL)
 * batch, idx, weights. */
typedef struct frames_into {
  ag_tensor *obs, *next, *batch, *idx, *weights;
} frames_into;

/* One output of an _into call: a live tensor of the table's context, of
 * `dtype`, packed; a matrix rows x cols (cols = 0: any number, B), or
 * (vector) n = cols values as a row or a column. */
static ag_status check_out(const ag_frames *t, const ag_tensor *x, const char *fn, const char *what,
                           ag_dtype dtype, int64_t rows, int64_t cols, int vector) {
  ag_status s = ag__check_tensor(x, fn, what);
  if (s) return s;
  if (x->ctx != t->ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: %s belongs to another context than the table", fn, what);
  const int packed = x->ld == x->rows || x->cols == 1;
  if (vector && (x->dtype != dtype || x->rows * x->cols != cols || (x->rows != 1 && x->cols != 1) || !packed))
    return ag__fail(AG_ERR_SHAPE,
                    "%s: %s is a %s [%lld, %lld] (ld %lld); give %lld packed %s values ([B, 1] or "
                    "[1, B])",
                    fn, what, ag_dtype_name(x->dtype), (long long)x->rows, (long long)x->cols,
                    (long long)x->ld, (long long)cols, ag_dtype_name(dtype));
  if (!vector && (x->dtype != dtype || x->rows != rows || (cols && x->cols != cols) || !packed)) {
    char want[48];
    if (cols)
      snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
    else
      snprintf(want, sizeof want, "[%lld, B]", (long long)rows);
    return ag__fail(AG_ERR_SHAPE, "%s: %s is a %s [%lld, %lld] (ld %lld); give a packed %s tensor %s", fn,
                    what, ag_dtype_name(x->dtype), (long long)x->rows, (long long)x->cols, (long long)x->ld,
                    ag_dtype_name(dtype), want);
  }
  return AG_OK;
}

/* The bytes [lo, hi) an output spans on the device. */
static ag_status span_of(ag_tensor *x, uintptr_t *lo, uintptr_t *hi) {
  void *p = NULL;
  ag_status s = ag__tensor_ptr(x, &p);
  if (s) return s;
  *lo = (uintptr_t)p;
  *hi = *lo + (size_t)(x->ld * (x->cols - 1) + x->rows) * ag_dtype_size(x->dtype);
  return AG_OK;
}

/* The checks of an _into call's outputs, in the order of the arguments,
 * then that no two overlap: B and the stacks' dtype from obs. */
static ag_status check_into(const ag_frames *t, const frames_into *o, const char *fn, int64_t *B,
                            ag_dtype *odt) {
  const int64_t D = t->stack * t->hwc;
  ag_status s = ag__check_tensor(o->obs, fn, "obs");
  if (s) return s;
  if (o->obs->dtype != AG_U8 && o->obs->dtype != AG_F32)
    return ag__fail(AG_ERR_SHAPE, "%s: obs is a %s tensor; stacks come as u8 or f32", fn,
                    ag_dtype_name(o->obs->dtype));
  *odt = o->obs->dtype;
  if ((s = check_out(t, o->obs, fn, "obs", *odt, D, 0, 0))) return s;
  *B = o->obs->cols;
  if ((s = check_out(t, o->next, fn, "next_obs", *odt, D, *B, 0)) ||
      (o->batch && (s = check_out(t, o->batch, fn, "batch", AG_F32, t->r->rows, *B, 0))) ||
      (o->idx && (s = check_out(t, o->idx, fn, "idx", AG_I64, 1, *B, 1))) ||
      (o->weights && (s = check_out(t, o->weights, fn, "weights", AG_F32, 1, *B, 1))))
    return s;
  ag_tensor *const xs[5] = {o->obs, o->next, o->batch, o->idx, o->weights};
  static const char *const names[5] = {"obs", "next_obs", "batch", "idx", "weights"};
  uintptr_t lo[5] = {0}, hi[5] = {0};
  for (int i = 0; i < 5; i++)
    if (xs[i] && (s = span_of(xs[i], &lo[i], &hi[i]))) return s;
  for (int i = 0; i < 5; i++)
    for (int k = i + 1; k < 5; k++)
      if (xs[i] && xs[k] && lo[i] < hi[k] && lo[k] < hi[i])
        return ag__fail(AG_ERR_INVALID_ARG, "%s: %s and %s overlap; give each output memory of its own", fn,
                        names[i], names[k]);
  return AG_OK;
}

/* A uniform draw of B stacks into o->obs, o->next and the columns *cols
 * (each the caller's where not NULL on entry, a temporary otherwise). */
static ag_status draw_uniform(ag_frames *t, ag_rng *rng, int64_t B, ag_dtype odt, const char *fn,
                              ag_tensor **o, ag_tensor **no, ag_tensor **cols) {
  ag__frame_stack_args a;
  void *cp = NULL;
  ag_status s = stack_args(t, B, odt, fn, &a, o, no, cols);
  if (s || (s = ag__rng_counter(rng, &cp))) return s;
  a.seed = ag__rng_seed(rng);
  a.counter = cp;
  return ag__run(t->ctx, AG__K_FRAME_STACK, &a, sizeof a);
}

/* A prioritized draw of B stacks, as draw_uniform, and the weights: into
 * w_into (the caller's B f32) or a temporary *w. */
static ag_status draw_per(ag_frames *t, ag_per *per, ag_rng *rng, int64_t B, float beta, ag_dtype odt,
                          const char *fn, ag_tensor **o, ag_tensor **no, ag_tensor **cols, ag_tensor *w_into,
                          ag_tensor **w) {
  /* the entries down the sum tree (whose leaves of entries that may not be
   * sampled are 0), then their stacks as at given columns */
  ag_tensor *drawn;
  ag__frame_stack_args a;
  void *wp = NULL;
  ag_status s = w_into ? ag__tensor_ptr(w_into, &wp) : AG_OK;
  if (s || (s = ag__per_sample(per, rng, B, beta, NULL, fn, wp, &drawn, w)) ||
      (s = stack_args(t, B, odt, fn, &a, o, no, cols)))
    return s;
  a.idx = drawn->data;
  a.idx_dtype = AG_I32;
  return ag__run(t->ctx, AG__K_FRAME_STACK, &a, sizeof a);
}

/* The fields of the columns cols into the caller's batch. */
static ag_status batch_into(ag_frames *t, ag_tensor *cols, ag_tensor *batch) {
  void *ip = NULL, *bp = NULL;
  ag_status s = ag__tensor_ptr(cols, &ip);
  if (s || (s = ag__tensor_ptr(batch, &bp))) return s;
  return ag__buffer_gather(t->r->buf, ip, AG_I64, cols->rows * cols->cols, bp);
}

ag_status ag_frames_sample(ag_frames *t, ag_rng *rng, int64_t B, ag_dtype obs_dtype, ag_tensor **obs,
                           ag_tensor **next_obs, ag_tensor **batch, ag_tensor **idx) {
  static const char fn[] = "ag_frames_sample";
  ag_status s = check_sample(t, rng, obs && next_obs, fn);
  if (s || (s = check_b(B, fn)) || (s = check_obs_dtype(obs_dtype, fn)) || (s = check_rng(t, rng, fn)) ||
      (s = check_min_size(t, fn)))
    return s;
  ag_tensor *o = NULL, *no = NULL, *cols = NULL;
  if ((s = draw_uniform(t, rng, B, obs_dtype, fn, &o, &no, &cols)) ||
      (s = finish(t, cols, o, no, obs, next_obs, batch)))
    return s;
  if (idx) *idx = cols;
  return AG_OK;
}

ag_status ag_frames_sample_into(ag_frames *t, ag_rng *rng, ag_tensor *obs, ag_tensor *next_obs,
                                ag_tensor *batch, ag_tensor *idx) {
  static const char fn[] = "ag_frames_sample_into";
  const frames_into o = {obs, next_obs, batch, idx, NULL};
  int64_t B = 0;
  ag_dtype odt = AG_U8;
  ag_status s = check_sample(t, rng, obs && next_obs, fn);
  if (s || (s = check_into(t, &o, fn, &B, &odt)) || (s = check_rng(t, rng, fn)) ||
      (s = check_min_size(t, fn)))
    return s;
  ag_tensor *ob = obs, *nb = next_obs, *cols = idx;
  if ((s = draw_uniform(t, rng, B, odt, fn, &ob, &nb, &cols))) return s;
  return batch ? batch_into(t, cols, batch) : AG_OK;
}

ag_status ag_frames_gather(ag_frames *t, const int64_t *idx, int64_t n, ag_dtype obs_dtype, ag_tensor **obs,
                           ag_tensor **next_obs, ag_tensor **batch) {
  static const char fn[] = "ag_frames_gather";
  if (!t || !idx || !obs || !next_obs)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: table, idx, obs and next_obs must not be NULL", fn);
  ag_status s = ag__frames_check_sound(t, fn);
  if (s) return s;
  if (n < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %lld; give at least one index", fn, (long long)n);
  if ((s = check_obs_dtype(obs_dtype, fn))) return s;
  for (int64_t j = 0; j < n; j++)
    if (!ag_frames_sampleable(t, idx[j]))
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: idx[%lld] = %lld is not a transition that may be sampled now",
                      fn, (long long)j, (long long)idx[j]);
  if ((s = ag__not_recording(t->ctx, fn))) return s;
  ag__frame_stack_args a;
  ag_tensor *o = NULL, *no = NULL, *cols = NULL;
  if ((s = stack_args(t, n, obs_dtype, fn, &a, &o, &no, &cols))) return s;
  /* the indices go up into the kernel's column list, which it clamps in place */
  if ((s = ag__mem_upload_copy(t->ctx, fn, cols->data, idx, (size_t)n * sizeof *idx))) return s;
  a.idx = cols->data;
  a.idx_dtype = AG_I64;
  if ((s = ag__run(t->ctx, AG__K_FRAME_STACK, &a, sizeof a))) return s;
  return finish(t, cols, o, no, obs, next_obs, batch);
}

ag_status ag_frames_sample_per(ag_frames *t, ag_rng *rng, int64_t B, float beta, ag_dtype obs_dtype,
                               ag_tensor **obs, ag_tensor **next_obs, ag_tensor **batch, ag_tensor **idx,
                               ag_tensor **weights) {
  static const char fn[] = "ag_frames_sample_per";
  ag_status s = check_sample(t, rng, obs && next_obs, fn);
  if (s || (s = check_b(B, fn)) || (s = check_obs_dtype(obs_dtype, fn)) || (s = check_rng(t, rng, fn)) ||
      (s = check_beta(beta, fn)))
    return s;
  ag_per *per = NULL;
  if ((s = ag__frames_per(t, fn, &per)) || (s = check_min_size(t, fn))) return s;
  ag_tensor *w = NULL, *o = NULL, *no = NULL, *cols = NULL;
  if ((s = draw_per(t, per, rng, B, beta, obs_dtype, fn, &o, &no, &cols, NULL, &w)) ||
      (s = finish(t, cols, o, no, obs, next_obs, batch)))
    return s;
  if (idx) *idx = cols;
  if (weights) *weights = w;
  return AG_OK;
}

ag_status ag_frames_sample_per_into(ag_frames *t, ag_rng *rng, float beta, ag_tensor *obs,
                                    ag_tensor *next_obs, ag_tensor *batch, ag_tensor *idx,
                                    ag_tensor *weights) {
  static const char fn[] = "ag_frames_sample_per_into";
  const frames_into o = {obs, next_obs, batch, idx, weights};
  int64_t B = 0;
  ag_dtype odt = AG_U8;
  ag_per *per = NULL;
  ag_status s = check_sample(t, rng, obs && next_obs, fn);
  if (s || (s = check_into(t, &o, fn, &B, &odt)) || (s = check_rng(t, rng, fn)) ||
      (s = check_beta(beta, fn)) || (s = ag__frames_per(t, fn, &per)) || (s = check_min_size(t, fn)))
    return s;
  ag_tensor *ob = obs, *nb = next_obs, *cols = idx, *w = NULL;
  if ((s = draw_per(t, per, rng, B, beta, odt, fn, &ob, &nb, &cols, weights, &w))) return s;
  return batch ? batch_into(t, cols, batch) : AG_OK;
}

ag_status ag_frames_update_priorities(ag_frames *t, ag_tensor *idx, ag_tensor *priorities) {
  static const char fn[] = "ag_frames_update_priorities";
  if (!t) return ag__fail(AG_ERR_INVALID_ARG, "%s: table is NULL", fn);
  ag_per *per = NULL;
  ag_status s = ag__frames_check_sound(t, fn);
  if (s || (s = ag__frames_per(t, fn, &per))) return s;
  return ag__per_update(per, idx, priorities, fn);
}

ag_status ag_frames_update_priorities_host(ag_frames *t, const int64_t *idx, const float *priorities,
                                           int64_t n) {
  static const char fn[] = "ag_frames_update_priorities_host";
  if (!t || !idx || !priorities)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: table, idx and priorities must not be NULL", fn);
  if (n < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %lld; give at least one index", fn, (long long)n);
  ag_per *per = NULL;
  ag_status s = ag__frames_check_sound(t, fn);
  if (s || (s = ag__frames_per(t, fn, &per))) return s;
  for (int64_t j = 0; j < n; j++) {
    if (!ag_frames_sampleable(t, idx[j]))
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: idx[%lld] = %lld is not a transition that may be sampled now",
                      fn, (long long)j, (long long)idx[j]);
    if (!(priorities[j] >= 0.0f) || isinf(priorities[j]))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: priorities[%lld] = %g must be finite and >= 0", fn,
                      (long long)j, (double)priorities[j]);
  }
  return ag__per_update_host(per, idx, priorities, n, fn);
}

ag_status ag__frames_set_walk_ring(ag_frames *t) {
  const int64_t v[2] = {t->r->size > t->n_envs ? t->r->size - t->n_envs : 0,
                        ((t->r->pos - t->n_envs) % t->capacity + t->capacity) % t->capacity};
  ag_tensor *at[2] = {t->nsize_dev, t->npos_dev};
  ag_status s = AG_OK;
  for (int i = 0; i < 2 && !s; i++) {
    void *p = NULL;
    if (!(s = ag__tensor_ptr(at[i], &p))) {
      ag__set_i64_args a = {(int64_t *)p, v[i]};
      s = ag__run(t->ctx, AG__K_SET_I64, &a, sizeof a);
    }
  }
  return s;
}

ag_status ag_frames_nstep(ag_frames *t, ag_tensor *idx, int n, float gamma, const char *reward,
                          const char *terminated, const char *truncated, ag_tensor **ret,
                          ag_tensor **discount, ag_tensor **last) {
  static const char fn[] = "ag_frames_nstep";
  if (!t) return ag__fail(AG_ERR_INVALID_ARG, "%s: table is NULL", fn);
  ag_status s = ag__frames_check_sound(t, fn);
  if (s) return s;
  return ag__replay_nstep_on(t->r, t->nsize_dev, t->npos_dev, idx, n, gamma, t->n_envs, reward, terminated,
                             truncated, fn, ret, discount, last);
}

ag_status ag_frames_gather_dev(ag_frames *t, const ag_tensor *idx, ag_dtype obs_dtype, ag_tensor **obs,
                               ag_tensor **next_obs, ag_tensor **batch) {
  static const char fn[] = "ag_frames_gather_dev";
  if (!t || !idx || !obs || !next_obs)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: table, idx, obs and next_obs must not be NULL", fn);
  ag_status s = ag__frames_check_sound(t, fn);
  if (s || (s = check_obs_dtype(obs_dtype, fn)) || (s = ag__check_tensor(idx, fn, "idx"))) return s;
  if (idx->ctx != t->ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: idx belongs to another context than the table", fn);
  const int64_t B = idx->rows * idx->cols;
  if ((idx->dtype != AG_I32 && idx->dtype != AG_I64) || (idx->rows != 1 && idx->cols != 1) ||
      (idx->rows == 1 && B > 1 && idx->ld != 1))
    return ag__fail(
        AG_ERR_SHAPE,
        "%s: idx is a %s [%lld, %lld] (ld %lld); give packed i32 or i64 indices, a row or a column", fn,
        ag_dtype_name(idx->dtype), (long long)idx->rows, (long long)idx->cols, (long long)idx->ld);
  ag__frame_stack_args a;
  ag_tensor *o = NULL, *no = NULL, *cols = NULL;
  void *ip = NULL;
  if ((s = ag__tensor_ptr((ag_tensor *)idx, &ip)) ||
      (s = stack_args(t, B, obs_dtype, fn, &a, &o, &no, &cols)))
    return s;
  a.idx = ip;
  a.idx_dtype = idx->dtype;
  if ((s = ag__run(t->ctx, AG__K_FRAME_STACK, &a, sizeof a))) return s;
  return finish(t, cols, o, no, obs, next_obs, batch);
}

int ag_frames_sampleable(const ag_frames *t, int64_t x) {
  if (!t || x < 0 || x >= t->capacity) return 0;
  const ag__frames_ring g = ring_of(t);
  return ag__frames_valid(&g, x);
}

int64_t ag_frames_count(const ag_frames *t) { return t ? t->count : 0; }
int64_t ag_frames_size(const ag_frames *t) { return t ? t->r->size : 0; }
int64_t ag_frames_position(const ag_frames *t) { return t ? t->r->pos : 0; }
int64_t ag_frames_obs_size(const ag_frames *t) { return t ? t->stack * t->hwc : 0; }

ag_status ag_frames_get_config(const ag_frames *t, ag_frames_config *out) {
  if (!t || !out) return ag__fail(AG_ERR_INVALID_ARG, "ag_frames_get_config: table and out must not be NULL");
  const ag_frames_config c = {t->h,        t->w,        t->c,           t->stack, t->n_envs,
                              t->capacity, t->min_size, t->prioritized, t->alpha};
  *out = c;
  return AG_OK;
}
ag_replay *ag_frames_replay(const ag_frames *t) { return t ? t->r : NULL; }
