/* per.c — proportional prioritized replay on a sum tree (kernels.h, and the
 * tree code in core/per_tree.h). The tree lives in a persistent i64 tensor
 * used as raw storage for its doubles, so it follows the context across
 * device switches like any buffer, and recordings note it. */
#include <math.h>
#include <stdlib.h>

#include "agrl/graph.h"
#include "core/internal.h"
#include "graph/graph_internal.h"
#include "base/per_tree.h"
#include "replay/replay_internal.h"

struct ag_per {
  ag_replay *r;
  ag_ctx *ctx;
  float alpha;
  int depth;
  int64_t leaves;
  ag_tensor *tree;  /* ag__per_offset(depth) + 1 doubles */
  ag_tensor *state; /* [0]: the largest priority seen */
  ag_tensor *mask;  /* NULL, or a byte per column (not owned): updates skip the columns whose byte is 0 */
};

static ag_status per_added(void *self, int64_t pos, int64_t k);

void ag_per_free(ag_per *p) {
  if (!p) return;
  if (p->r) ag__replay_detach(p->r, p);
  ag_tensor_free(p->tree);
  ag_tensor_free(p->state);
  free(p);
}

static ag_status check_args(int64_t capacity, float alpha, const char *fn) {
  if (!(alpha >= 0.0f && alpha <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: alpha = %g must be in [0, 1]", fn, (double)alpha);
  if (capacity > AG_PER_MAX_CAPACITY)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: a capacity of %lld columns is beyond prioritized replay's %lld",
                    fn, (long long)capacity, (long long)AG_PER_MAX_CAPACITY);
  return AG_OK;
}

/* The depth of the tree over `capacity` columns: 16^depth leaves cover them. */
static int depth_for(int64_t capacity) {
  int depth = 1;
  for (int64_t leaves = AG__PER_FAN; leaves < capacity; leaves *= AG__PER_FAN) depth++;
  return depth;
}

ag_status ag__per_check(ag_ctx *ctx, int64_t capacity, float alpha, const char *fn) {
  ag_status s = check_args(capacity, alpha, fn);
  if (s) return s;
  /* a device without the tree's kernels (a Vulkan device without 64-bit
   * floats) is refused here, before a table comes to depend on them */
  const int depth = depth_for(capacity);
  const ag__per_set_args sa = {.depth = depth, .idx_dtype = AG_I64};
  const ag__per_fill_args fa = {.depth = depth};
  const ag__per_sample_args pa = {.depth = depth};
  if (!ag__kernel_supported(ctx, AG__K_PER_SET, &sa, sizeof sa) ||
      !ag__kernel_supported(ctx, AG__K_PER_FILL, &fa, sizeof fa) ||
      !ag__kernel_supported(ctx, AG__K_PER_SAMPLE, &pa, sizeof pa))
    return ag__fail(
        AG_ERR_UNSUPPORTED,
        "%s: %s does not run the prioritized sampler's kernels (a tree of doubles: a Vulkan device "
        "needs shaderFloat64)",
        fn, ag_ctx_device_name(ctx));
  return AG_OK;
}

ag_status ag_per_validate(int64_t capacity, float alpha) {
  return check_args(capacity, alpha, "ag_per_validate");
}

ag_status ag_per_create(ag_replay *r, float alpha, ag_per **out) {
  static const char fn[] = "ag_per_create";
  if (!r || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: replay and out must not be NULL", fn);
  const int64_t cap = ag_replay_capacity(r);
  ag_ctx *ctx = ag_buffer_ctx(ag_replay_buffer(r));
  ag_status s0 = check_args(cap, alpha, fn);
  if (s0) return s0;
  if (ag__replay_sampler(r, &ag__per_ops))
    return ag__fail(AG_ERR_STATE, "%s: the table already has a prioritized sampler", fn);
  if ((s0 = ag__per_check(ctx, cap, alpha, fn))) return s0;
  const int depth = depth_for(cap);
  ag_per *p = ag__calloc(1, sizeof *p);
  if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  p->r = r;
  p->ctx = ctx;
  p->alpha = alpha;
  p->depth = depth;
  p->leaves = (int64_t)1 << (4 * depth);
  const float one = 1.0f;
  ag_status s = ag_tensor_create(p->ctx, ag__per_offset(p->depth) + 1, 1, AG_I64, NULL, &p->tree); /* zeros */
  if (!s) s = ag_tensor_create(p->ctx, 1, 1, AG_F32, &one, &p->state);
  if (!s && ag_replay_size(r) > 0) s = per_added(p, 0, ag_replay_size(r));
  if (s) {
    p->r = NULL;
    ag_per_free(p);
    return s;
  }
  if ((s = ag__replay_attach(r, &ag__per_ops, p, fn))) {
    p->r = NULL;
    ag_per_free(p);
    return s;
  }
  *out = p;
  return AG_OK;
}

static ag_status ptrs(ag_per *p, double **tree, float **state) {
  void *t, *st;
  ag_status s = ag__tensor_ptr(p->tree, &t);
  if (!s) s = ag__tensor_ptr(p->state, &st);
  if (s) return s;
  *tree = t;
  *state = st;
  return AG_OK;
}

ag_tensor *ag__per_tree(const ag_per *p) { return p->tree; }
ag_tensor *ag__per_state(const ag_per *p) { return p->state; }

static ag_status per_prepare(void *self) {
  ag_per *p = self;
  double *tree;
  float *state;
  return ptrs(p, &tree, &state);
}

ag_status ag__per_fill(ag_per *p, int64_t pos, int64_t k, int masked) {
  double *tree;
  float *state;
  void *mp = NULL;
  ag_status s = ptrs(p, &tree, &state);
  if (s || k <= 0 || (masked && (s = ag__tensor_ptr(p->mask, &mp)))) return s;
  ag__per_fill_args a = {tree, p->depth, p->alpha, state, pos, k, mp};
  return ag__run(p->ctx, AG__K_PER_FILL, &a, sizeof a);
}

void ag__per_set_mask(ag_per *p, ag_tensor *mask) { p->mask = mask; }

static ag_status per_added(void *self, int64_t pos, int64_t k) { return ag__per_fill(self, pos, k, 0); }

static void per_release(void *self) { ag_per_free(self); }

const ag__sampler_ops ag__per_ops = {"prioritized", per_prepare, per_added, per_release};

ag_status ag__per_sample(ag_per *p, ag_rng *rng, int64_t B, float beta, ag_tensor *beta_t, const char *fn,
                         float *w_into, ag_tensor **idx, ag_tensor **weights) {
  if (!p || !rng || !idx || !weights)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: per, rng, idx and weights must not be NULL", fn);
  if (B < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: B = %lld must be positive", fn, (long long)B);
  if (!(beta >= 0.0f && beta <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: beta = %g must be in [0, 1]", fn, (double)beta);
  if (ag__rng_counter_tensor(rng)->ctx != p->ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: rng belongs to another context than the table", fn);
  ag_status sound = ag__replay_check_sound(p->r, fn);
  if (sound) return sound;
  void *bp = NULL;
  if (beta_t) {
    if ((sound = ag__check_tensor(beta_t, fn, "beta"))) return sound;
    if (beta_t->ctx != p->ctx)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: beta belongs to another context than the table", fn);
    if (beta_t->dtype != AG_F32 || beta_t->rows != 1 || beta_t->cols != 1)
      return ag__fail(AG_ERR_SHAPE, "%s: beta must be a [1, 1] f32 tensor, not [%lld, %lld] %s", fn,
                      (long long)beta_t->rows, (long long)beta_t->cols, ag_dtype_name(beta_t->dtype));
    if ((sound = ag__tensor_ptr(beta_t, &bp))) return sound;
  }
  if (ag_replay_size(p->r) < 1) return ag__fail(AG_ERR_STATE, "%s: the table is empty", fn);
  double *tree;
  float *state;
  void *sz, *ctr;
  ag_status s = ptrs(p, &tree, &state);
  if (!s) s = ag__tensor_ptr(ag_replay_size_tensor(p->r), &sz);
  if (!s) s = ag__rng_counter(rng, &ctr);
  if (s) return s;
  ag_tensor *ti, *tw = NULL;
  if ((s = ag__tensor_temp(p->ctx, B, 1, AG_I32, &ti)) ||
      (!w_into && (s = ag__tensor_temp(p->ctx, 1, B, AG_F32, &tw))))
    return s;
  ag__per_sample_args a = {
      tree, p->depth, beta, ag__rng_seed(rng), ctr, sz, B, ti->data, w_into ? w_into : (float *)tw->data, bp};
  if ((s = ag__run(p->ctx, AG__K_PER_SAMPLE, &a, sizeof a))) return s;
  *idx = ti;
  *weights = tw;
  return AG_OK;
}

ag_status ag_per_sample(ag_per *p, ag_rng *rng, int64_t B, float beta, ag_tensor **idx, ag_tensor **weights) {
  return ag__per_sample(p, rng, B, beta, NULL, "ag_per_sample", NULL, idx, weights);
}

ag_status ag_per_sample_dev(ag_per *p, ag_rng *rng, int64_t B, ag_tensor *beta, ag_tensor **idx,
                            ag_tensor **weights) {
  if (!beta) return ag__fail(AG_ERR_INVALID_ARG, "ag_per_sample_dev: beta must not be NULL");
  return ag__per_sample(p, rng, B, 0.0f, beta, "ag_per_sample_dev", NULL, idx, weights);
}

ag_status ag_per_update(ag_per *p, ag_tensor *idx, ag_tensor *prio) {
  return ag__per_update(p, idx, prio, "ag_per_update");
}

ag_status ag__per_update(ag_per *p, ag_tensor *idx, ag_tensor *prio, const char *fn) {
  if (!p) return ag__fail(AG_ERR_INVALID_ARG, "%s: per is NULL", fn);
  ag_status s = ag__replay_check_sound(p->r, fn);
  if (s) return s;
  s = ag__check_tensor(idx, fn, "idx");
  if (s || (s = ag__check_tensor(prio, fn, "priorities"))) return s;
  if (idx->ctx != p->ctx || prio->ctx != p->ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: %s belongs to another context than the table", fn,
                    idx->ctx != p->ctx ? "idx" : "priorities");
  if (idx->dtype != AG_I32 && idx->dtype != AG_I64)
    return ag__fail(AG_ERR_SHAPE, "%s: idx has dtype %s; indices must be i32 or i64", fn,
                    ag_dtype_name(idx->dtype));
  if (idx->ld != idx->rows && idx->rows != 1 && idx->cols != 1)
    return ag__fail(AG_ERR_SHAPE, "%s: idx must be contiguous", fn);
  if (idx->rows == 1 && idx->cols > 1 && idx->ld != 1)
    return ag__fail(AG_ERR_SHAPE, "%s: idx must be contiguous", fn);
  int64_t n = idx->rows * idx->cols;
  const void *pp;
  int64_t stride;
  if ((s = ag__index_operand(prio, n, fn, &pp, &stride))) return s; /* n values, row/column/contiguous */
  if (prio->dtype != AG_F32) return ag__fail(AG_ERR_SHAPE, "%s: priorities must be f32", fn);
  double *tree;
  float *state;
  void *ip, *mp = NULL;
  if ((s = ptrs(p, &tree, &state)) || (s = ag__tensor_ptr(idx, &ip)) ||
      (p->mask && (s = ag__tensor_ptr(p->mask, &mp))))
    return s;
  ag__per_set_args a = {
      tree, p->depth, p->alpha, state, ip, idx->dtype, n, pp, stride, ag_replay_capacity(p->r), mp};
  return ag__run(p->ctx, AG__K_PER_SET, &a, sizeof a);
}

/* ag_per_update of n (i64 index, f32 priority) pairs laid out [n] i64 then
 * [n] f32 from device-readable address `at`. */
static ag_status update_at(ag_per *p, void *at, int64_t n, const char *fn) {
  ag_tensor *ti, *tp;
  ag_status s = ag__tensor_view(p->ctx, n, 1, n, AG_I64, at, &ti);
  if (!s) s = ag__tensor_view(p->ctx, n, 1, n, AG_F32, (char *)at + (size_t)n * sizeof(int64_t), &tp);
  return s ? s : ag__per_update(p, ti, tp, fn);
}

/* Two host arrays as one stream of bytes for an upload. */
typedef struct two_parts {
  const void *const *src;
  const size_t *len;
} two_parts;

static void fill_two(void *dst, size_t off, size_t len, void *user) {
  const two_parts *t = user;
  unsigned char *d = dst;
  for (int i = 0; i < 2 && len; i++) {
    if (off >= t->len[i]) {
      off -= t->len[i];
      continue;
    }
    size_t k = t->len[i] - off < len ? t->len[i] - off : len;
    memcpy(d, (const unsigned char *)t->src[i] + off, k);
    d += k, len -= k, off = 0;
  }
}

ag_status ag_per_update_host(ag_per *p, const int64_t *idx, const float *prio, int64_t n) {
  return ag__per_update_host(p, idx, prio, n, "ag_per_update_host");
}

ag_status ag__per_update_host(ag_per *p, const int64_t *idx, const float *prio, int64_t n, const char *fn) {
  if (!p || !idx || !prio || n < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: per, idx and priorities must be given, n >= 1", fn);
  ag_status sound = ag__replay_check_sound(p->r, fn);
  if (sound) return sound;
  for (int64_t j = 0; j < n; j++) {
    if (idx[j] < 0 || idx[j] >= ag_replay_size(p->r))
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: idx[%lld] = %lld is outside the %lld valid transitions", fn,
                      (long long)j, (long long)idx[j], (long long)ag_replay_size(p->r));
    if (!(prio[j] >= 0.0f) || isinf(prio[j]))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: priorities[%lld] = %g must be finite and >= 0", fn,
                      (long long)j, (double)prio[j]);
  }
  /* the indices and the priorities side by side, [n] i64 then [n] f32, read
   * in place by the update's kernel where the backend can (one transfer, no
   * copy queued before it) */
  const size_t bi = (size_t)n * sizeof *idx, bp = (size_t)n * sizeof *prio;
  const void *src[2] = {idx, prio};
  const size_t len[2] = {bi, bp};
  two_parts tw = {src, len};
  double *tree; /* the sampler made resident first: nothing but the kernel comes between stage and done */
  float *state;
  ag_status s = ptrs(p, &tree, &state);
  if (s) return s;
  void *dev;
  s = bi + bp <= AG__STAGE_MAX ? ag__mem_stage(p->ctx, fn, bi + bp, fill_two, &tw, &dev) : AG_ERR_UNSUPPORTED;
  if (s == AG_OK) {
    s = update_at(p, dev, n, fn);
    ag_status d = ag__mem_stage_done(p->ctx);
    return s ? s : d;
  }
  if (s != AG_ERR_UNSUPPORTED) return s;
  ag_tensor *all; /* through a temporary of device memory */
  s = ag__tensor_temp(p->ctx, (int64_t)(bi + bp), 1, AG_U8, &all);
  if (!s) s = ag__mem_upload(p->ctx, fn, all->data, bi + bp, fill_two, &tw);
  return s ? s : update_at(p, all->data, n, fn);
}

ag_status ag_per_total(ag_per *p, double *total) {
  if (!p || !total) return ag__fail(AG_ERR_INVALID_ARG, "ag_per_total: per and total must not be NULL");
  double *tree;
  float *state;
  ag_status s = ptrs(p, &tree, &state);
  if (s) return s;
  return ag__mem_download_copy(p->ctx, "ag_per_total", total, tree + ag__per_offset(p->depth), sizeof *total);
}
float ag__per_alpha(const ag_per *p) { return p->alpha; }
float ag_per_alpha(const ag_per *p) { return p ? p->alpha : 0.0f; }
int ag__per_depth(const ag_per *p) { return p->depth; }
ag_per *ag_replay_per(const ag_replay *r) { return r ? ag__replay_sampler(r, &ag__per_ops) : NULL; }
