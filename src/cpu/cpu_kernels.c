/* cpu_kernels.c — the reference implementation of every kernel (kernels.h).
 *
 * Plain loops over column-major strided matrices, except the matrix product,
 * which is CBLAS (OpenBLAS). Written for clarity first: each CUDA kernel is
 * tested against these functions, and the CPU backend runs them as they are.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cblas.h>

#include "core/internal.h"
#include "core/kernels.h"
#include "core/per_tree.h"
#include "core/philox.h"
#include "core/scalar_ops.h"
#include "cpu/cpu_internal.h"

static inline float at(const ag__mat *m, int64_t r, int64_t c) { return ag__mat_at(*m, r, c); }

static inline float *out_at(const ag__mat *m, int64_t r, int64_t c) { return &m->p[c * m->ld + r]; }

static inline void put(const ag__mat *m, int64_t r, int64_t c, float v, int accumulate) {
  float *o = out_at(m, r, c);
  *o = accumulate ? *o + v : v;
}

/* The column a gather reads for index j (clamped, S13). */
static inline int64_t gather_col(const ag__gather_args *a, int64_t j) {
  int64_t c = ag__index_at(a->idx, a->idx_dtype, j);
  return c < 0 ? 0 : (c >= a->capacity ? a->capacity - 1 : c);
}

/* Asks for every cache line of bytes [p, p + n) to come into the L2
 * cache (a column that does not start on a line boundary spans one line
 * more than n / 64): misses bound for L2 are not held to the few the L1
 * cache can have in flight, so more of them overlap. */
static inline void prefetch_span(const char *p, size_t n) {
  const char *q = (const char *)((uintptr_t)p & ~(uintptr_t)63), *end = p + n;
  for (; q < end; q += 64) __builtin_prefetch(q, 0, 2);
}

static ag_status k_gather(const void *args) {
  const ag__gather_args *a = args;
  const size_t es = ag_dtype_size(a->src_dtype), col_bytes = (size_t)a->rows * es;
  /* random columns: every line of the first AHEAD_BYTES of them is asked
   * for at once (a burst of misses the memory serves together; a batch of
   * small transitions fits whole), then one more column for each copied */
  enum { AHEAD_BYTES = 96 << 10, AHEAD_MIN = 16 };
  const int64_t ahead = col_bytes && AHEAD_BYTES / col_bytes > AHEAD_MIN ? (int64_t)(AHEAD_BYTES / col_bytes) : AHEAD_MIN;
  for (int64_t j = 0; j < a->n && j < ahead; j++)
    prefetch_span((const char *)a->src + (size_t)gather_col(a, j) * col_bytes, col_bytes);
  for (int64_t j = 0; j < a->n; j++) {
    if (j + ahead < a->n) prefetch_span((const char *)a->src + (size_t)gather_col(a, j + ahead) * col_bytes, col_bytes);
    int64_t c = gather_col(a, j);
    float *out = a->dst + j * a->rows;
    size_t base = (size_t)c * (size_t)a->rows;
    if (a->src_dtype == AG_F32 && a->scale == 1.0f) {
      memcpy(out, (const float *)a->src + base, (size_t)a->rows * sizeof(float));
    } else {
      for (int64_t r = 0; r < a->rows; r++) out[r] = ag__load_f32(a->src, a->src_dtype, base + (size_t)r) * a->scale;
    }
  }
  return AG_OK;
}

static ag_status k_gemm(const void *args) {
  const ag__gemm_args *a = args;
  cblas_sgemm(CblasColMajor, a->trans_a ? CblasTrans : CblasNoTrans, a->trans_b ? CblasTrans : CblasNoTrans,
              (int)a->m, (int)a->n, (int)a->k, a->alpha, a->a, (int)a->lda, a->b, (int)a->ldb, a->beta, a->c,
              (int)a->ldc);
  return AG_OK;
}

/* Column c of a (broadcast) operand, and its step along the rows. */
static inline const float *col_of(const ag__mat *m, int64_t c, int64_t *step) {
  *step = m->rows == 1 ? 0 : 1;
  return m->p + (m->cols == 1 ? 0 : c) * m->ld;
}

/* One contiguous column; called with a constant op, each call site becomes
 * a loop of its own that the compiler can vectorize. */
static inline void map_col(ag__map_op op, const float *restrict x, float *restrict o, int64_t n, float p0, float p1,
                           int acc) {
  if (acc)
    for (int64_t r = 0; r < n; r++) o[r] += ag__map_f(op, x[r], p0, p1);
  else
    for (int64_t r = 0; r < n; r++) o[r] = ag__map_f(op, x[r], p0, p1);
}

static inline void map2_col(ag__map2_op op, const float *restrict x, const float *restrict y, float *restrict o,
                            int64_t n, float alpha, float p0, int acc) {
  if (acc)
    for (int64_t r = 0; r < n; r++) o[r] += alpha * ag__map2_f(op, x[r], y[r], p0);
  else
    for (int64_t r = 0; r < n; r++) o[r] = alpha * ag__map2_f(op, x[r], y[r], p0);
}

static ag_status k_map(const void *args) {
  const ag__map_args *a = args;
  const int64_t n = a->out.rows;
  for (int64_t c = 0; c < a->out.cols; c++) {
    int64_t sx;
    const float *px = col_of(&a->x, c, &sx);
    float *po = a->out.p + c * a->out.ld;
    if (sx != 1) { /* a broadcast row: one value down the column */
      float v = ag__map_f(a->op, px[0], a->p0, a->p1);
      for (int64_t r = 0; r < n; r++) po[r] = a->accumulate ? po[r] + v : v;
      continue;
    }
    switch (a->op) {
#define CASE(OP) case OP: map_col(OP, px, po, n, a->p0, a->p1, a->accumulate); break;
      CASE(AG__MAP_IDENT)
      CASE(AG__MAP_AFFINE)
      CASE(AG__MAP_RELU)
      CASE(AG__MAP_TANH)
      CASE(AG__MAP_SIGMOID)
      CASE(AG__MAP_EXP)
      CASE(AG__MAP_LOG)
      CASE(AG__MAP_SQUARE)
      CASE(AG__MAP_ABS)
      CASE(AG__MAP_HUBER)
#undef CASE
      default: return ag__fail(AG_ERR_UNSUPPORTED, "cpu: map op %d", (int)a->op);
    }
  }
  return AG_OK;
}

static ag_status k_map2(const void *args) {
  const ag__map2_args *a = args;
  const int64_t n = a->out.rows;
  for (int64_t c = 0; c < a->out.cols; c++) {
    int64_t sx, sy;
    const float *px = col_of(&a->a, c, &sx), *py = col_of(&a->b, c, &sy);
    float *po = a->out.p + c * a->out.ld;
    if (sx != 1 || sy != 1) { /* a broadcast row operand */
      for (int64_t r = 0; r < n; r++) {
        float v = a->alpha * ag__map2_f(a->op, px[r * sx], py[r * sy], a->p0);
        po[r] = a->accumulate ? po[r] + v : v;
      }
      continue;
    }
    switch (a->op) {
#define CASE(OP) case OP: map2_col(OP, px, py, po, n, a->alpha, a->p0, a->accumulate); break;
      CASE(AG__MAP2_ADD)
      CASE(AG__MAP2_SUB)
      CASE(AG__MAP2_MUL)
      CASE(AG__MAP2_DIV)
      CASE(AG__MAP2_MAX)
      CASE(AG__MAP2_RELU_BWD)
      CASE(AG__MAP2_TANH_BWD)
      CASE(AG__MAP2_SIGMOID_BWD)
      CASE(AG__MAP2_HUBER_BWD)
      CASE(AG__MAP2_ABS_BWD)
      CASE(AG__MAP2_ADD_RELU)
      CASE(AG__MAP2_ADD_TANH)
      CASE(AG__MAP2_ADD_SIGMOID)
#undef CASE
      default: return ag__fail(AG_ERR_UNSUPPORTED, "cpu: map2 op %d", (int)a->op);
    }
  }
  return AG_OK;
}

static void put_arg(void *arg, ag_dtype dt, int64_t k, int64_t v) {
  if (dt == AG_I32) ((int32_t *)arg)[k] = (int32_t)v;
  else ((int64_t *)arg)[k] = v;
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
    if (a->arg) put_arg(a->arg, a->arg_dtype, o, bi);
  }
  return AG_OK;
}

static ag_status k_pick(const void *args) {
  const ag__pick_args *a = args;
  int64_t n = a->axis == 0 ? a->x.cols : a->x.rows, limit = a->axis == 0 ? a->x.rows : a->x.cols;
  for (int64_t j = 0; j < n; j++) {
    int64_t i = ag__pick_index(a->idx, a->idx_dtype, a->idx_stride, j, limit);
    if (a->axis == 0) put(&a->out, 0, j, a->x.p[j * a->x.ld + i], a->accumulate);
    else put(&a->out, j, 0, a->x.p[i * a->x.ld + j], a->accumulate);
  }
  return AG_OK;
}

static ag_status k_pick_bwd(const void *args) {
  const ag__pick_bwd_args *a = args;
  for (int64_t c = 0; c < a->dx.cols; c++)
    for (int64_t r = 0; r < a->dx.rows; r++) {
      int64_t j = a->axis == 0 ? c : r, pos = a->axis == 0 ? r : c;
      int64_t i = ag__pick_index(a->idx, a->idx_dtype, a->idx_stride, j, a->axis == 0 ? a->dx.rows : a->dx.cols);
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

static ag_status k_copy(const void *args) {
  const ag__copy_args *a = args;
  for (int64_t c = 0; c < a->out.cols; c++) {
    if (!a->accumulate && a->x.ld == a->x.rows && a->out.ld == a->out.rows) {
      memcpy(out_at(&a->out, 0, c), &a->x.p[c * a->x.ld], (size_t)a->out.rows * sizeof(float));
      continue;
    }
    for (int64_t r = 0; r < a->out.rows; r++) put(&a->out, r, c, a->x.p[c * a->x.ld + r], a->accumulate);
  }
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
  float *st = a->state;
  float t = st[AG__OPT_T] + 1.0f;
  st[AG__OPT_T] = t;
  st[AG__OPT_BC1] = 1.0f - powf(a->b1, t);
  st[AG__OPT_BC2] = 1.0f - powf(a->b2, t);
  float norm = sqrtf(st[AG__OPT_SUMSQ]);
  st[AG__OPT_COEF] = a->max_norm > 0.0f ? fminf(1.0f, a->max_norm / (norm + 1e-6f)) : 1.0f;
  st[AG__OPT_SUMSQ] = 0.0f;
  return AG_OK;
}

static void adam_one(const ag__adam_args *a, float *restrict p, const float *restrict g, float *restrict m,
                     float *restrict v, int64_t n, float bc1, float bc2, float coef) {
  const float b1 = a->b1, b2 = a->b2, lr = a->lr, eps = a->eps, wd = a->wd;
  for (int64_t i = 0; i < n; i++) {
    float gi = coef * g[i] + wd * p[i];
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
  }
}

static ag_status k_adam(const void *args) {
  const ag__adam_args *a = args;
  if (a->prep) k_adam_prep(args);
  const float bc1 = a->state[AG__OPT_BC1], bc2 = a->state[AG__OPT_BC2], coef = a->state[AG__OPT_COEF];
  for (int k = 0; k < a->count; k++) {
    const ag__mt_entry *e = &a->t[k];
    if (a->sgd)
      for (int64_t i = 0; i < e->n; i++) e->p[i] -= a->lr * (coef * e->g[i] + a->wd * e->p[i]);
    else
      adam_one(a, e->p, e->g, e->m, e->v, e->n, bc1, bc2, coef);
  }
  return AG_OK;
}

static ag_status k_axpby(const void *args) {
  const ag__axpby_args *a = args;
  for (int k = 0; k < a->count; k++)
    for (int64_t i = 0; i < a->t[k].n; i++) a->t[k].p[i] = a->a * a->t[k].g[i] + a->b * a->t[k].p[i];
  return AG_OK;
}

/* Draws 2 b0 .. 2 (b0 + nb) - 1 of the stream `seed`, scaled to [0, bound)
 * (bound < 2^32) as ag__scale_u64 scales them, into out in draw order:
 * four Philox blocks a vector with AVX2's 32 x 32 -> 64-bit multiplies
 * (nb a multiple of 4). A draw is x = (hi << 32) | lo of two words of its
 * block, and floor(x bound / 2^64) = (hi bound + (lo bound >> 32)) >> 32
 * exactly: the bits below, < 2^-32, cannot carry into the integer part. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AG_CPU_DRAWS_AVX2 1

__attribute__((target("avx2"))) static void draws_avx2(uint64_t seed, uint64_t b0, int64_t nb, uint32_t bound,
                                                      uint64_t *out) {
  const __m256i m0 = _mm256_set1_epi64x(AG__PHILOX_M0), m1 = _mm256_set1_epi64x(AG__PHILOX_M1);
  const __m256i lo = _mm256_set1_epi64x(0xFFFFFFFFu), bd = _mm256_set1_epi64x(bound);
  __m256i key0[10], key1[10];
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++, k0 += AG__PHILOX_W0, k1 += AG__PHILOX_W1) /* ag__philox4x32_10's rounds */
    key0[r] = _mm256_set1_epi64x(k0), key1[r] = _mm256_set1_epi64x(k1);
  for (int64_t j = 0; j + 4 <= nb; j += 4) {
    const uint64_t b = b0 + (uint64_t)j; /* the counter's words: lanes hold a 32-bit value each */
    __m256i c0 = _mm256_and_si256(_mm256_set_epi64x((long long)(b + 3), (long long)(b + 2), (long long)(b + 1), (long long)b), lo);
    __m256i c1 = _mm256_set_epi64x((long long)((b + 3) >> 32), (long long)((b + 2) >> 32), (long long)((b + 1) >> 32),
                                   (long long)(b >> 32));
    __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
    for (int r = 0; r < 10; r++) {
      const __m256i p0 = _mm256_mul_epu32(m0, c0), p1 = _mm256_mul_epu32(m1, c2);
      c0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1), key0[r]);
      c1 = _mm256_and_si256(p1, lo);
      c2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3), key1[r]);
      c3 = _mm256_and_si256(p0, lo);
    }
    /* draw 2 b: words (c1, c0); draw 2 b + 1: words (c3, c2) */
    const __m256i even = _mm256_srli_epi64(
        _mm256_add_epi64(_mm256_mul_epu32(c1, bd), _mm256_srli_epi64(_mm256_mul_epu32(c0, bd), 32)), 32);
    const __m256i odd = _mm256_srli_epi64(
        _mm256_add_epi64(_mm256_mul_epu32(c3, bd), _mm256_srli_epi64(_mm256_mul_epu32(c2, bd), 32)), 32);
    uint64_t e[4], o[4];
    _mm256_storeu_si256((__m256i *)e, even), _mm256_storeu_si256((__m256i *)o, odd);
    for (int l = 0; l < 4; l++) out[2 * (j + l)] = e[l], out[2 * (j + l) + 1] = o[l];
  }
}
#endif

static ag_status k_randint(const void *args) {
  const ag__randint_args *a = args;
  int64_t bound = a->bound_dev ? *a->bound_dev : a->bound_const;
  const uint64_t base = *a->counter, ub = bound < 1 ? 0 : (uint64_t)bound;
  const int64_t n = a->n;
  const ag_dtype dt = a->out_dtype; /* locals: the stores below cannot change them */
  void *out = a->out;
#ifdef AG_CPU_DRAWS_AVX2
  const int fast = ub > 0 && ub <= UINT32_MAX && __builtin_cpu_supports("avx2");
  enum { CHUNK = 64 }; /* blocks a call: two draws a block */
  uint64_t v[2 * CHUNK];
#endif
  for (int64_t i = 0; i < n;) {
    const uint64_t k = base + (uint64_t)i;
#ifdef AG_CPU_DRAWS_AVX2
    const int64_t nb = ((n - i) / 2 < CHUNK ? (n - i) / 2 : CHUNK) & ~(int64_t)3;
    if (fast && (k & 1) == 0 && nb > 0) { /* whole blocks, four at a time */
      draws_avx2(a->seed, k >> 1, nb, (uint32_t)ub, v);
      for (int64_t q = 0; q < 2 * nb; q++) put_arg(out, dt, i + q, (int64_t)v[q]);
      i += 2 * nb;
      continue;
    }
#endif
    const ag__u32x4 blk = ag__philox_block(a->seed, k >> 1); /* one block: its draws from k */
    put_arg(out, dt, i, (int64_t)ag__scale_u64(ag__philox_half(blk, (int)(k & 1)), ub));
    if ((k & 1) == 0 && i + 1 < n) put_arg(out, dt, ++i, (int64_t)ag__scale_u64(ag__philox_half(blk, 1), ub));
    i++;
  }
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

/* ---- prioritized replay (the tree code is core/per_tree.h) ---- */

/* The ancestors of leaves lo .. hi, level by level up to the root. */
static void per_update_range(double *tree, int depth, int64_t lo, int64_t hi) {
  for (int d = depth - 2; d >= 0; d--) {
    lo /= AG__PER_FAN;
    hi /= AG__PER_FAN;
    for (int64_t node = lo; node <= hi; node++) ag__per_recompute(tree, d, node);
  }
  ag__per_recompute_root(tree, depth);
}

/* Sorts n keys below 2^bits in place (tmp: room for n): insertion for a few,
 * otherwise LSD radix of 8-bit digits (2 counting passes for 1M leaves). */
static void per_sort(uint32_t *a, uint32_t *tmp, int n, int bits) {
  if (n <= 32) {
    for (int i = 1; i < n; i++) {
      uint32_t v = a[i];
      int k = i;
      for (; k > 0 && a[k - 1] > v; k--) a[k] = a[k - 1];
      a[k] = v;
    }
    return;
  }
  uint32_t *src = a, *dst = tmp;
  for (int sh = 0; sh < bits; sh += 8) {
    int at[256] = {0};
    for (int i = 0; i < n; i++) at[(src[i] >> sh) & 255]++;
    for (int b = 0, sum = 0; b < 256; b++) {
      int c = at[b];
      at[b] = sum;
      sum += c;
    }
    for (int i = 0; i < n; i++) dst[at[(src[i] >> sh) & 255]++] = src[i];
    uint32_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* The ancestors of a batch of leaves, level by level: node[0..m) are the
 * sorted parents of the leaves (level depth-2, repeats allowed); each
 * distinct node of a level is summed once, and the loop that sums them
 * writes the next level's list in place (their parents: still sorted, so
 * repeats are neighbours). The upper levels are shared: ~700 sums for 256
 * leaves of 1M, not 256 x 5. */
static void per_update_sorted(double *tree, int depth, uint32_t *node, int m) {
  enum { AHEAD = 8 }; /* prefetch distance, in nodes */
  /* drop repeats; the previous key stays in a register (read back from
   * memory, it would chain each step to the last store) */
  int w = 1;
  for (uint32_t k = 1, prev = node[0]; k < (uint32_t)m; k++) {
    uint32_t v = node[k];
    node[w] = v;
    w += v != prev;
    prev = v;
  }
  m = w;
  for (int d = depth - 2; d >= 0; d--) {
    double *out = tree + ag__per_offset(d);
    const double *ch = tree + ag__per_offset(d + 1);
    uint32_t up = UINT32_MAX; /* the last parent listed (none: nodes are < 2^28) */
    w = 0;
    for (int k = 0; k < m; k++) {
      if (k + AHEAD < m) { /* 16 doubles: two cache lines */
        const double *next = ch + (int64_t)node[k + AHEAD] * AG__PER_FAN;
        __builtin_prefetch(next);
        __builtin_prefetch(next + 8);
        __builtin_prefetch(out + node[k + AHEAD], 1);
      }
      uint32_t v = node[k], parent = v / AG__PER_FAN;
      out[v] = ag__per_sum16(ch + (int64_t)v * AG__PER_FAN);
      node[w] = parent; /* w <= k: this entry is read already */
      w += parent != up;
      up = parent;
    }
    m = w;
  }
  ag__per_recompute_root(tree, depth);
}

static ag_status k_per_set(const void *args) {
  const ag__per_set_args *a = args;
  enum { CHUNK = 1024 }; /* leaves whose ancestors are summed together (stack scratch) */
  uint32_t node[CHUNK], tmp[CHUNK];
  double *leaves = a->tree + ag__per_offset(a->depth - 1);
  /* Chunks in order, each its leaves then their ancestors: a later chunk
   * rewrites the ancestors it shares with an earlier one, and the last of
   * repeated indices wins as in one pass. */
  for (int64_t j0 = 0; j0 < a->n; j0 += CHUNK) {
    int m = a->n - j0 < CHUNK ? (int)(a->n - j0) : CHUNK;
    uint32_t hi = 0;
    int kept = 0;
    for (int k = 0; k < m; k++) {
      int64_t leaf = ag__index_at(a->idx, a->idx_dtype, j0 + k);
      if (leaf < 0 || leaf >= a->cols) continue; /* indices from the device: skipped, never written out of bounds */
      float p = a->prio[(j0 + k) * a->prio_stride];
      p = p > 1e-12f ? p : 1e-12f;
      leaves[leaf] = pow((double)p, (double)a->alpha);
      if (p > a->state[0]) a->state[0] = p;
      node[kept] = (uint32_t)(leaf / AG__PER_FAN); /* < 2^31 columns (ag_per_create) */
      hi |= node[kept++];
    }
    m = kept;
    if (a->depth < 2) { /* the leaves are level 0 */
      ag__per_recompute_root(a->tree, a->depth);
      continue;
    }
    int bits = 0;
    while (bits < 32 && (hi >> bits)) bits += 8;
    per_sort(node, tmp, m, bits);
    per_update_sorted(a->tree, a->depth, node, m);
  }
  return AG_OK;
}

static ag_status k_per_fill(const void *args) {
  const ag__per_fill_args *a = args;
  double v = pow((double)a->state[0], (double)a->alpha);
  double *leaves = a->tree + ag__per_offset(a->depth - 1);
  for (int64_t i = 0; i < a->k; i++) leaves[a->pos + i] = v;
  per_update_range(a->tree, a->depth, a->pos, a->pos + a->k - 1);
  return AG_OK;
}

static ag_status k_per_sample(const void *args) {
  const ag__per_sample_args *a = args;
  const double root = a->tree[ag__per_offset(a->depth)];
  const double *leaves = a->tree + ag__per_offset(a->depth - 1);
  uint64_t base = *a->counter;
  float wmax = 0.0f;
  enum { G = 16 }; /* descents in lockstep, so that their cache misses overlap */
  for (int64_t j0 = 0; j0 < a->B; j0 += G) {
    int g = a->B - j0 < G ? (int)(a->B - j0) : G;
    int64_t node[G];
    double u[G];
    for (int k = 0; k < g; k++) {
      node[k] = 0;
      u[k] = ag__per_target(a->seed, base + (uint64_t)(j0 + k), j0 + k, a->B, root);
    }
    for (int d = 0; d < a->depth; d++) {
      for (int k = 0; k < g; k++) {
        const double *ch = a->tree + ag__per_offset(d) + node[k] * AG__PER_FAN;
        __builtin_prefetch(ch);
        __builtin_prefetch(ch + 8);
      }
      for (int k = 0; k < g; k++) node[k] = ag__per_step(a->tree, d, node[k], &u[k]);
    }
    for (int k = 0; k < g; k++) {
      a->idx[j0 + k] = (int32_t)node[k];
      a->w[j0 + k] = ag__per_weight(leaves[node[k]], root, *a->size_dev, a->beta);
      wmax = a->w[j0 + k] > wmax ? a->w[j0 + k] : wmax;
    }
  }
  for (int64_t j = 0; j < a->B; j++) a->w[j] = wmax > 0.0f ? a->w[j] / wmax : 0.0f;
  *a->counter = base + (uint64_t)a->B;
  return AG_OK;
}

const ag__cpu_kernel_fn ag__cpu_kernels[AG__K_COUNT] = {
    [AG__K_GATHER] = k_gather,   [AG__K_GEMM] = k_gemm,         [AG__K_MAP] = k_map,
    [AG__K_MAP2] = k_map2,       [AG__K_REDUCE] = k_reduce,     [AG__K_PICK] = k_pick,
    [AG__K_PICK_BWD] = k_pick_bwd, [AG__K_FILL] = k_fill,       [AG__K_COPY] = k_copy,
    [AG__K_ADAM_PREP] = k_adam_prep, [AG__K_ADAM] = k_adam,     [AG__K_SUMSQ] = k_sumsq,
    [AG__K_AXPBY] = k_axpby,     [AG__K_RANDINT] = k_randint,   [AG__K_TD_TARGET] = k_td_target,
    [AG__K_LOSS] = k_loss,       [AG__K_PER_SET] = k_per_set,   [AG__K_PER_FILL] = k_per_fill,
    [AG__K_PER_SAMPLE] = k_per_sample, [AG__K_QGRAD] = ag__cpu_qgrad,
};
