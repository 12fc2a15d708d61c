/* cpu_kernels.c — the reference implementation of every kernel (kernels.h).
 *
 * Portable C11: one plain loop nest per kernel over column-major strided
 * matrices, in the order the contract in kernels.h states it, except the
 * matrix product, which is CBLAS (OpenBLAS). No vector instructions,
 * threads or prefetches: those are the fast paths of cpu_fast.c, which the
 * backend runs for the few kernels that have one unless the reference is
 * forced (AGRL_CPU_REFERENCE=1). Each CUDA kernel and each fast path is
 * tested against these functions.
 */
#include <math.h>
#include <stdint.h>

#include "base/base.h"
#include "base/convert.h"
#include "base/frames.h"
#include "base/kernels.h"
#include "base/normal.h"
#include "base/nstep.h"
#include "base/per_tree.h"
#include "base/philox.h"
#include "base/scalar_ops.h"
#include "cpu/cpu_blas.h"
#include "cpu/cpu_internal.h"

/* Element (r, c) of an operand, broadcasting a 1-row or 1-column one. */
static inline float at(const ag__mat *m, int64_t r, int64_t c) { return ag__mat_at(*m, r, c); }

static inline float *out_at(const ag__mat *m, int64_t r, int64_t c) { return &m->p[c * m->ld + r]; }

/* out[r, c] = v, or += v when accumulating. */
static inline void put(const ag__mat *m, int64_t r, int64_t c, float v, int accumulate) {
  float *o = out_at(m, r, c);
  *o = accumulate ? *o + v : v;
}

/* AG__K_GATHER: dst[r, j] = (f32) src[r, clamp(idx[j])] * scale. With f32
 * columns and a scale of 1 the value is copied as stored: the product by 1
 * would be the same number, but under the flush to zero the backend runs
 * kernels in (cpu_backend.c) it would turn a subnormal into 0, and it
 * would quiet a signalling NaN. */
static ag_status k_gather(const void *args) {
  const ag__gather_args *a = args;
  const int copy = a->src_dtype == AG_F32 && a->scale == 1.0f;
  for (int64_t j = 0; j < a->n; j++) {
    const int64_t c = ag__clamp_index(ag__index_at(a->idx, a->idx_dtype, j), a->capacity); /* S13 */
    const size_t col = (size_t)c * (size_t)a->rows;
    for (int64_t r = 0; r < a->rows; r++)
      a->dst[j * a->rows + r] = copy ? ((const float *)a->src)[col + (size_t)r]
                                     : ag__load_f32(a->src, a->src_dtype, col + (size_t)r) * a->scale;
  }
  return AG_OK;
}

static ag_status k_gemm(const void *args) {
  const ag__gemm_args *a = args;
  ag__sgemm(CblasColMajor, a->trans_a ? CblasTrans : CblasNoTrans, a->trans_b ? CblasTrans : CblasNoTrans,
            (int)a->m, (int)a->n, (int)a->k, a->alpha, a->a, (int)a->lda, a->b, (int)a->ldb, a->beta, a->c,
            (int)a->ldc);
  return AG_OK;
}

/* AG__K_MAP: out[r, c] (+)= f(x[r, c]), x broadcast. */
static ag_status k_map(const void *args) {
  const ag__map_args *a = args;
  if ((int)a->op < 0 || a->op >= AG__MAP_COUNT)
    return ag__fail(AG_ERR_UNSUPPORTED, "cpu: map op %d", (int)a->op);
  for (int64_t c = 0; c < a->out.cols; c++)
    for (int64_t r = 0; r < a->out.rows; r++)
      put(&a->out, r, c, ag__map_f(a->op, at(&a->x, r, c), a->p0, a->p1), a->accumulate);
  return AG_OK;
}

/* AG__K_MAP2: out[r, c] (+)= alpha * f(a[r, c], b[r, c]), a and b broadcast. */
static ag_status k_map2(const void *args) {
  const ag__map2_args *a = args;
  if ((int)a->op < 0 || a->op >= AG__MAP2_COUNT)
    return ag__fail(AG_ERR_UNSUPPORTED, "cpu: map2 op %d", (int)a->op);
  for (int64_t c = 0; c < a->out.cols; c++)
    for (int64_t r = 0; r < a->out.rows; r++)
      put(&a->out, r, c, a->alpha * ag__map2_f(a->op, at(&a->a, r, c), at(&a->b, r, c), a->p0, a->p1),
          a->accumulate);
  return AG_OK;
}

static ag_status k_reduce(const void *args) {
  const ag__reduce_args *a = args;
  const ag__mat *x = &a->x;
  if (a->op == AG__RED_SUM) {
    if (a->axis == 2) {
      float s = 0.0f;
      for (int64_t c = 0; c < x->cols; c++)
        for (int64_t r = 0; r < x->rows; r++) s += at(x, r, c);
      put(&a->out, 0, 0, a->scale * s, a->accumulate);
    } else if (a->axis == 0) {
      for (int64_t c = 0; c < x->cols; c++) {
        float s = 0.0f;
        for (int64_t r = 0; r < x->rows; r++) s += at(x, r, c);
        put(&a->out, 0, c, a->scale * s, a->accumulate);
      }
    } else {
      for (int64_t r = 0; r < x->rows; r++) {
        float s = 0.0f;
        for (int64_t c = 0; c < x->cols; c++) s += at(x, r, c);
        put(&a->out, r, 0, a->scale * s, a->accumulate);
      }
    }
    return AG_OK;
  }
  /* MAX with optional argmax (first maximum) */
  int64_t outer = a->axis == 0 ? x->cols : x->rows, inner = a->axis == 0 ? x->rows : x->cols;
  for (int64_t o = 0; o < outer; o++) {
    float best = a->axis == 0 ? at(x, 0, o) : at(x, o, 0);
    int64_t bi = 0;
    for (int64_t i = 1; i < inner; i++) {
      float v = a->axis == 0 ? at(x, i, o) : at(x, o, i);
      if (v > best) { /* strict: the first maximum wins */
        best = v;
        bi = i;
      }
    }
    if (a->out.p) put(&a->out, a->axis == 0 ? 0 : o, a->axis == 0 ? o : 0, best, 0);
    if (a->arg) ag__index_put(a->arg, a->arg_dtype, o, bi);
  }
  return AG_OK;
}

static ag_status k_pick(const void *args) {
  const ag__pick_args *a = args;
  int64_t n = a->axis == 0 ? a->x.cols : a->x.rows, limit = a->axis == 0 ? a->x.rows : a->x.cols;
  for (int64_t j = 0; j < n; j++) {
    int64_t i = ag__pick_index(a->idx, a->idx_dtype, a->idx_stride, j, limit);
    if (a->axis == 0)
      put(&a->out, 0, j, a->x.p[j * a->x.ld + i], a->accumulate);
    else
      put(&a->out, j, 0, a->x.p[i * a->x.ld + j], a->accumulate);
  }
  return AG_OK;
}

static ag_status k_pick_bwd(const void *args) {
  const ag__pick_bwd_args *a = args;
  for (int64_t c = 0; c < a->dx.cols; c++)
    for (int64_t r = 0; r < a->dx.rows; r++) {
      int64_t j = a->axis == 0 ? c : r, pos = a->axis == 0 ? r : c;
      int64_t i =
          ag__pick_index(a->idx, a->idx_dtype, a->idx_stride, j, a->axis == 0 ? a->dx.rows : a->dx.cols);
      float g = a->axis == 0 ? at(&a->g, 0, j) : at(&a->g, j, 0);
      put(&a->dx, r, c, pos == i ? g : 0.0f, a->accumulate);
    }
  return AG_OK;
}

static ag_status k_fill(const void *args) {
  const ag__fill_args *a = args;
  for (int64_t c = 0; c < a->out.cols; c++)
    for (int64_t r = 0; r < a->out.rows; r++) *out_at(&a->out, r, c) = a->value;
  return AG_OK;
}

/* AG__K_COPY: out (+)= x, element by element (no broadcast). */
static ag_status k_copy(const void *args) {
  const ag__copy_args *a = args;
  for (int64_t c = 0; c < a->out.cols; c++)
    for (int64_t r = 0; r < a->out.rows; r++) put(&a->out, r, c, a->x.p[c * a->x.ld + r], a->accumulate);
  return AG_OK;
}

static ag_status k_sumsq(const void *args) {
  const ag__adam_args *a = args;
  float s = 0.0f;
  for (int k = 0; k < a->count; k++)
    for (int64_t i = 0; i < a->t[k].n; i++) s += a->t[k].g[i] * a->t[k].g[i];
  a->state[AG__OPT_SUMSQ] += s;
  return AG_OK;
}

static ag_status k_adam_prep(const void *args) {
  const ag__adam_args *a = args;
  float v[4];
  ag__adam_values(a->state, a->b1, a->b2, a->max_norm, v);
  ag__adam_store(a->state, v);
  return AG_OK;
}

/* One tensor's step (ag__adam_elem on each element; sgd: m and v unused). */
static void adam_one(const ag__adam_args *a, int sgd, float *restrict p, const float *restrict g,
                     float *restrict m, float *restrict v, int64_t n, float bc1, float bc2, float coef) {
  const float b1 = a->b1, b2 = a->b2, lr = a->lr, eps = a->eps, wd = a->wd;
  if (sgd)
    for (int64_t i = 0; i < n; i++)
      ag__adam_elem(1, lr, b1, b2, eps, wd, bc1, bc2, coef, g[i], &p[i], NULL, NULL);
  else
    for (int64_t i = 0; i < n; i++)
      ag__adam_elem(0, lr, b1, b2, eps, wd, bc1, bc2, coef, g[i], &p[i], &m[i], &v[i]);
}

static ag_status k_adam(const void *args) {
  const ag__adam_args *a = args;
  if (a->prep) k_adam_prep(args);
  const float bc1 = a->state[AG__OPT_BC1], bc2 = a->state[AG__OPT_BC2], coef = a->state[AG__OPT_COEF];
  for (int k = 0; k < a->count; k++) {
    const ag__mt_entry *e = &a->t[k];
    adam_one(a, a->sgd, e->p, e->g, e->m, e->v, e->n, bc1, bc2, coef);
  }
  return AG_OK;
}

static ag_status k_axpby(const void *args) {
  const ag__axpby_args *a = args;
  for (int k = 0; k < a->count; k++)
    for (int64_t i = 0; i < a->t[k].n; i++) a->t[k].p[i] = a->a * a->t[k].g[i] + a->b * a->t[k].p[i];
  return AG_OK;
}

/* AG__K_RANDINT: out[i] = floor(u_i bound), u_i = draw *counter + i of the
 * Philox stream `seed` as a 64-bit fraction (ag__scale_u64: exact; a bound
 * below 1 gives 0). */
static ag_status k_randint(const void *args) {
  const ag__randint_args *a = args;
  const int64_t bound = a->bound_dev ? *a->bound_dev : a->bound_const;
  const uint64_t base = *a->counter;
  for (int64_t i = 0; i < a->n; i++)
    ag__index_put(a->out, a->out_dtype, i, ag__philox_below(a->seed, base + (uint64_t)i, bound));
  *a->counter = base + (uint64_t)a->n;
  return AG_OK;
}

/* AG__K_RANDN: out[i] = the Box-Muller value of draw *counter + i
 * (base/normal.h). */
static ag_status k_randn(const void *args) {
  const ag__randn_args *a = args;
  const uint64_t base = *a->counter;
  for (int64_t i = 0; i < a->n; i++) a->out[i] = ag__normal_of(ag__philox_u64(a->seed, base + (uint64_t)i));
  *a->counter = base + (uint64_t)a->n;
  return AG_OK;
}

static ag_status k_td_target(const void *args) {
  const ag__td_args *a = args;
  for (int64_t j = 0; j < a->out.cols; j++) {
    const float *q = &a->q.p[j * a->q.ld];
    float v;
    if (a->idx) {
      v = q[ag__pick_index(a->idx, a->idx_dtype, a->idx_stride, j, a->q.rows)];
    } else {
      v = q[0];
      for (int64_t r = 1; r < a->q.rows; r++) v = q[r] > v ? q[r] : v;
    }
    *out_at(&a->out, 0, j) = at(&a->reward, 0, j) + a->gamma * (1.0f - at(&a->done, 0, j)) * v;
  }
  return AG_OK;
}

static ag_status k_loss(const void *args) {
  const ag__loss_args *a = args;
  int64_t n = a->pred.rows * a->pred.cols;
  float s = 0.0f, inv = 1.0f / (float)n;
  for (int64_t c = 0; c < a->pred.cols; c++)
    for (int64_t r = 0; r < a->pred.rows; r++) {
      float d = at(&a->pred, r, c) - at(&a->target, r, c);
      s += ag__loss_f(a->kind, d, a->delta);
      if (a->dpred.p) *out_at(&a->dpred, r, c) = ag__loss_df(a->kind, d, a->delta) * inv;
    }
  *a->out = s * inv;
  return AG_OK;
}

/* ---- prioritized replay (the tree code is base/per_tree.h) ---- */

/* The ancestors of leaves lo .. hi, level by level up to the root. */
static void per_update_range(double *tree, int depth, int64_t lo, int64_t hi) {
  for (int d = depth - 2; d >= 0; d--) {
    lo /= AG__PER_FAN;
    hi /= AG__PER_FAN;
    for (int64_t node = lo; node <= hi; node++) ag__per_recompute(tree, d, node);
  }
  ag__per_recompute_root(tree, depth);
}

static ag_status k_per_fill(const void *args) {
  const ag__per_fill_args *a = args;
  double *leaves = a->tree + ag__per_offset(a->depth - 1);
  if (a->mask) { /* a masking pass */
    for (int64_t i = 0; i < a->k; i++)
      if (!a->mask[a->pos + i]) leaves[a->pos + i] = 0.0;
  } else {
    const double v = pow((double)a->state[0], (double)a->alpha);
    for (int64_t i = 0; i < a->k; i++) leaves[a->pos + i] = v;
  }
  per_update_range(a->tree, a->depth, a->pos, a->pos + a->k - 1);
  return AG_OK;
}

/* AG__K_PER_SET: first the leaves, in order (of repeated indices the last
 * one's value stays); then their ancestors, level by level up to the
 * root, so that every node is summed from final children. The contract
 * sums each ancestor once; here a node above several of the leaves is
 * summed again, from the same children, to the same bits. */
static ag_status k_per_set(const void *args) {
  const ag__per_set_args *a = args;
  double *leaves = a->tree + ag__per_offset(a->depth - 1);
  for (int64_t j = 0; j < a->n; j++) {
    const int64_t l = ag__index_at(a->idx, a->idx_dtype, j);
    if (!ag__per_takes(a, l)) continue; /* indices from the device: skipped, never written out of bounds */
    const float kept = ag__per_clamp(a->prio[j * a->prio_stride]);
    leaves[l] = ag__per_pow(kept, a->alpha);
    if (kept > a->state[0]) a->state[0] = kept;
  }
  int64_t span = 1; /* leaves under a node of level d */
  for (int d = a->depth - 2; d >= 0; d--) {
    span *= AG__PER_FAN;
    for (int64_t j = 0; j < a->n; j++) {
      const int64_t l = ag__index_at(a->idx, a->idx_dtype, j);
      if (ag__per_takes(a, l)) ag__per_recompute(a->tree, d, l / span);
    }
  }
  ag__per_recompute_root(a->tree, a->depth);
  return AG_OK;
}

/* AG__K_PER_SAMPLE: sample j descends to the leaf that holds its target
 * (ag__per_find); its weight is ag__per_weight, (size leaf / root)^-beta
 * in double rounded to float, then divided by the batch's largest. */
static ag_status k_per_sample(const void *args) {
  const ag__per_sample_args *a = args;
  const double root = a->tree[ag__per_offset(a->depth)];
  const double *leaves = a->tree + ag__per_offset(a->depth - 1);
  const uint64_t base = *a->counter;
  const float beta = ag__per_beta_of(a->beta, a->beta_dev);
  float wmax = 0.0f;
  for (int64_t j = 0; j < a->B; j++) {
    const double u = ag__per_target(a->seed, base + (uint64_t)j, j, a->B, root);
    const int64_t leaf = ag__per_find(a->tree, a->depth, u);
    a->idx[j] = (int32_t)leaf;
    a->w[j] = ag__per_weight(leaves[leaf], root, *a->size_dev, beta);
    wmax = a->w[j] > wmax ? a->w[j] : wmax;
  }
  for (int64_t j = 0; j < a->B; j++) a->w[j] = wmax > 0.0f ? a->w[j] / wmax : 0.0f;
  *a->counter = base + (uint64_t)a->B;
  return AG_OK;
}

static ag_status k_convert(const void *args) {
  const ag__convert_args *a = args;
  for (int64_t c = 0; c < a->cols; c++)
    for (int64_t r = 0; r < a->rows; r++)
      ag__convert_one(a->dst, a->dst_dtype, c * a->dst_ld + r, a->src, a->src_dtype, c * a->src_ld + r);
  return AG_OK;
}

static ag_status k_set_i64(const void *args) {
  const ag__set_i64_args *a = args;
  *a->dst = a->value;
  return AG_OK;
}

/* AG__K_NSTEP: the walk of base/nstep.h for each transition in order, the
 * ring's size and position read once. */
static ag_status k_nstep(const void *args) {
  const ag__nstep_args *a = args;
  int64_t size, pos;
  ag__nstep_ring(*a->size_dev, *a->pos_dev, a->capacity, &size, &pos);
  for (int64_t j = 0; j < a->B; j++) ag__nstep_walk(a, size, pos, j);
  return AG_OK;
}

/* AG__K_GATHER_FIELDS, one value: element i of the table (of dtype st)
 * into element k of p (of dtype dt). Integer storage with a scale of 1
 * bound for an integer dtype goes across as an integer; otherwise as f32,
 * times the scale unless it is 1. */
static void gf_value(void *p, ag_dtype dt, int64_t k, const void *src, ag_dtype st, int64_t i, float scale) {
  if (scale == 1.0f && ag__dtype_is_int(st) && ag__dtype_is_int(dt)) {
    ag__store_int(p, dt, k, ag__value_int(src, st, i));
    return;
  }
  const float v = ag__value_f32(src, st, i);
  ag__store_f32(p, dt, k, scale == 1.0f ? v : v * scale);
}

/* AG__K_GATHER_FIELDS: destination by destination, transition by
 * transition. */
static ag_status k_gather_fields(const void *args) {
  const ag__gather_fields_args *a = args;
  for (int d = 0; d < a->n_dst; d++) {
    const ag__gf_dst *o = &a->dst[d];
    for (int64_t j = 0; j < a->n; j++) {
      const int64_t c = ag__clamp_index(ag__index_at(a->idx, a->idx_dtype, j * a->idx_stride), a->capacity);
      if (o->row0 == AG__GF_INDICES) {
        ag__store_int(o->p, o->dtype, j * o->ld, c);
      } else if (o->row0 == AG__GF_WEIGHTS) {
        ag__store_f32(o->p, o->dtype, j * o->ld, a->weights[j]);
      } else {
        for (int64_t e = 0; e < o->width; e++)
          gf_value(o->p, o->dtype, j * o->ld + e, a->src, a->src_dtype, c * a->rows + o->row0 + e, a->scale);
      }
    }
  }
  return AG_OK;
}

/* AG__K_SCATTER_FIELDS: source by source, transition by transition, then
 * the size and the position. */
static ag_status k_scatter_fields(const void *args) {
  const ag__scatter_fields_args *a = args;
  for (int s = 0; s < a->n_src; s++) {
    const ag__sf_src *in = &a->src[s];
    for (int64_t j = 0; j < a->k; j++) {
      const int64_t col = (a->pos + j) % a->capacity;
      for (int64_t e = 0; e < in->width; e++)
        ag__convert_one(a->dst, a->dst_dtype, col * a->rows + in->row0 + e, in->p, in->dtype, j * in->ld + e);
    }
  }
  if (a->size_dev) *a->size_dev = a->size_value;
  if (a->pos_dev) *a->pos_dev = a->pos_value;
  return AG_OK;
}

void ag__cpu_frame_columns(const ag__frame_stack_args *a, const ag__frames_ring *g) {
  const uint64_t base = a->idx ? 0 : *a->counter;
  for (int64_t j = 0; j < a->B; j++)
    a->cols[j] = a->idx ? ag__clamp_index(ag__index_at(a->idx, a->idx_dtype, j), a->capacity)
                        : ag__frames_draw(g, a->seed, base, j);
  if (!a->idx) *a->counter = base + (uint64_t)a->B * AG__FRAMES_TRIES;
}

/* AG__K_FRAME_STACK: the columns first (ag__cpu_frame_columns), then each
 * stack pixel by pixel. */
static ag_status k_frame_stack(const void *args) {
  const ag__frame_stack_args *a = args;
  ag__frames_ring g;
  ag__frames_ring_of(a, &g);
  ag__cpu_frame_columns(a, &g);
  const int64_t D = (int64_t)a->stack * a->c * a->h * a->w;
  int64_t src[AG__FRAMES_MAX_STACK];
  for (int half = 0; half < 2; half++) {
    void *out = half ? a->next_obs : a->obs;
    for (int64_t j = 0; j < a->B; j++) {
      ag__frames_walk(&g, half ? ag__frames_step(&g, a->cols[j], 1) : a->cols[j], src);
      for (int64_t e = 0; e < D; e++) ag__frames_put(a, out, j * D + e, ag__frames_pixel(a, src, e));
    }
  }
  return AG_OK;
}

/* AG__K_CONV2D: each output element as the sum kernels.h states, in
 * double; the backward modes gather their sums (BWD_X walks the taps that
 * reach a pixel, BWD_W the pixels a tap reads), so that every element is
 * written once. */
static ag_status k_conv2d(const void *args) {
  const ag__conv2d_args *a = args;
  const int64_t B = a->y.cols, C = a->C, H = a->H, W = a->W, K = a->K, kh = a->kh, kw = a->kw;
  const int64_t s = a->stride, pad = a->pad;
  const int64_t Ho = ag__conv_out(H, kh, s, pad), Wo = ag__conv_out(W, kw, s, pad);
  switch (a->mode) {
    case AG__CONV_FWD:
      for (int64_t n = 0; n < B; n++)
        for (int64_t k = 0; k < K; k++)
          for (int64_t i = 0; i < Ho; i++)
            for (int64_t j = 0; j < Wo; j++) {
              double sum = a->b ? a->b[k] : 0.0;
              for (int64_t c = 0; c < C; c++)
                for (int64_t u = 0; u < kh; u++)
                  for (int64_t v = 0; v < kw; v++) {
                    const int64_t h = i * s + u - pad, q = j * s + v - pad;
                    if (h < 0 || h >= H || q < 0 || q >= W) continue;
                    sum += (double)at(&a->w, (c * kh + u) * kw + v, k) * at(&a->x, (c * H + h) * W + q, n);
                  }
              put(&a->y, (k * Ho + i) * Wo + j, n, (float)sum, a->accumulate);
            }
      return AG_OK;
    case AG__CONV_BWD_X:
      for (int64_t n = 0; n < B; n++)
        for (int64_t c = 0; c < C; c++)
          for (int64_t h = 0; h < H; h++)
            for (int64_t q = 0; q < W; q++) {
              double sum = 0.0;
              for (int64_t u = 0; u < kh; u++)
                for (int64_t v = 0; v < kw; v++) {
                  const int64_t ti = h + pad - u, tj = q + pad - v; /* = i * s, j * s */
                  if (ti < 0 || tj < 0 || ti % s || tj % s || ti / s >= Ho || tj / s >= Wo) continue;
                  for (int64_t k = 0; k < K; k++)
                    sum += (double)at(&a->w, (c * kh + u) * kw + v, k) *
                           at(&a->y, (k * Ho + ti / s) * Wo + tj / s, n);
                }
              put(&a->x, (c * H + h) * W + q, n, (float)sum, a->accumulate);
            }
      return AG_OK;
    case AG__CONV_BWD_W:
      for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++)
          for (int64_t u = 0; u < kh; u++)
            for (int64_t v = 0; v < kw; v++) {
              double sum = 0.0;
              for (int64_t n = 0; n < B; n++)
                for (int64_t i = 0; i < Ho; i++)
                  for (int64_t j = 0; j < Wo; j++) {
                    const int64_t h = i * s + u - pad, q = j * s + v - pad;
                    if (h < 0 || h >= H || q < 0 || q >= W) continue;
                    sum += (double)at(&a->y, (k * Ho + i) * Wo + j, n) * at(&a->x, (c * H + h) * W + q, n);
                  }
              put(&a->w, (c * kh + u) * kw + v, k, (float)sum, a->accumulate);
            }
      return AG_OK;
    case AG__CONV_BWD_B:
      for (int64_t k = 0; k < K; k++) {
        double sum = 0.0;
        for (int64_t n = 0; n < B; n++)
          for (int64_t p = 0; p < Ho * Wo; p++) sum += at(&a->y, k * Ho * Wo + p, n);
        a->b[k] = a->accumulate ? a->b[k] + (float)sum : (float)sum;
      }
      return AG_OK;
  }
  return ag__fail(AG_ERR_INVALID_ARG, "cpu: convolution mode %d is unknown", (int)a->mode);
}

const ag__cpu_kernel_fn ag__cpu_ref_kernels[AG__K_COUNT] = {
    [AG__K_GATHER] = k_gather,
    [AG__K_GEMM] = k_gemm,
    [AG__K_MAP] = k_map,
    [AG__K_MAP2] = k_map2,
    [AG__K_REDUCE] = k_reduce,
    [AG__K_PICK] = k_pick,
    [AG__K_PICK_BWD] = k_pick_bwd,
    [AG__K_FILL] = k_fill,
    [AG__K_COPY] = k_copy,
    [AG__K_ADAM_PREP] = k_adam_prep,
    [AG__K_ADAM] = k_adam,
    [AG__K_SUMSQ] = k_sumsq,
    [AG__K_AXPBY] = k_axpby,
    [AG__K_RANDINT] = k_randint,
    [AG__K_TD_TARGET] = k_td_target,
    [AG__K_LOSS] = k_loss,
    [AG__K_PER_SET] = k_per_set,
    [AG__K_PER_FILL] = k_per_fill,
    [AG__K_PER_SAMPLE] = k_per_sample,
    [AG__K_QGRAD] = ag__cpu_qgrad,
    [AG__K_CONVERT] = k_convert,
    [AG__K_SET_I64] = k_set_i64,
    [AG__K_NSTEP] = k_nstep,
    [AG__K_RANDN] = k_randn,
    [AG__K_ACGRAD] = ag__cpu_acgrad,
    [AG__K_GATHER_FIELDS] = k_gather_fields,
    [AG__K_SCATTER_FIELDS] = k_scatter_fields,
    [AG__K_FRAME_STACK] = k_frame_stack,
    [AG__K_CONV2D] = k_conv2d,
};

/* What the backend runs: the reference, except for the kernels with a fast
 * path, which go through cpu_fast.c's dispatchers. */
const ag__cpu_kernel_fn ag__cpu_kernels[AG__K_COUNT] = {
    [AG__K_GATHER] = ag__cpu_run_gather,
    [AG__K_GEMM] = k_gemm,
    [AG__K_MAP] = ag__cpu_run_map,
    [AG__K_MAP2] = ag__cpu_run_map2,
    [AG__K_REDUCE] = k_reduce,
    [AG__K_PICK] = k_pick,
    [AG__K_PICK_BWD] = k_pick_bwd,
    [AG__K_FILL] = k_fill,
    [AG__K_COPY] = ag__cpu_run_copy,
    [AG__K_ADAM_PREP] = k_adam_prep,
    [AG__K_ADAM] = k_adam,
    [AG__K_SUMSQ] = k_sumsq,
    [AG__K_AXPBY] = k_axpby,
    [AG__K_RANDINT] = ag__cpu_run_randint,
    [AG__K_TD_TARGET] = k_td_target,
    [AG__K_LOSS] = k_loss,
    [AG__K_PER_SET] = ag__cpu_run_per_set,
    [AG__K_PER_FILL] = k_per_fill,
    [AG__K_PER_SAMPLE] = ag__cpu_run_per_sample,
    [AG__K_QGRAD] = ag__cpu_qgrad,
    [AG__K_CONVERT] = k_convert,
    [AG__K_SET_I64] = k_set_i64,
    [AG__K_NSTEP] = k_nstep,
    [AG__K_RANDN] = k_randn,
    [AG__K_ACGRAD] = ag__cpu_run_acgrad,
    [AG__K_GATHER_FIELDS] = ag__cpu_run_gather_fields,
    [AG__K_SCATTER_FIELDS] = ag__cpu_run_scatter_fields,
    [AG__K_FRAME_STACK] = ag__cpu_run_frame_stack,
    [AG__K_CONV2D] = ag__cpu_run_conv2d,
};
