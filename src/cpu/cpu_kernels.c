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

#include "base/base.h"
#include "base/kernels.h"
#include "base/per_tree.h"
#include "base/philox.h"
#include "base/scalar_ops.h"
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

int ag__cpu_vector_paths = 1;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AG_CPU_GATHER_AVX512 1
/* n >= 16 floats from s to d: 16 a vector, the last 16 overlapping the
 * ones before (no masked stores, slow on some processors); inline, where a
 * call to memcpy for a small column costs more than the copy (columns of
 * up to 1 KB; memcpy's own ways are better for longer ones). */
__attribute__((target("avx512f"))) static void copy_f32_avx512(float *d, const float *s, int64_t n) {
  const __m512 last = _mm512_loadu_ps(s + n - 16);
  for (int64_t r = 0; r + 16 < n; r += 16) _mm512_storeu_ps(d + r, _mm512_loadu_ps(s + r));
  _mm512_storeu_ps(d + n - 16, last);
}
#endif

/* Columns [j0, j1) of a gather. */
static void gather_range(const ag__gather_args *a, int64_t j0, int64_t j1) {
  const size_t es = ag_dtype_size(a->src_dtype), col_bytes = (size_t)a->rows * es;
  /* random columns: every line of the first AHEAD_BYTES of them is asked
   * for at once (a burst of misses the memory serves together; a batch of
   * small transitions fits whole), then one more column for each copied */
  enum { AHEAD_BYTES = 96 << 10, AHEAD_MIN = 16 };
  const int64_t ahead =
      col_bytes && AHEAD_BYTES / col_bytes > AHEAD_MIN ? (int64_t)(AHEAD_BYTES / col_bytes) : AHEAD_MIN;
  for (int64_t j = j0; j < j1 && j < j0 + ahead; j++)
    prefetch_span((const char *)a->src + (size_t)gather_col(a, j) * col_bytes, col_bytes);
  const int plain = a->src_dtype == AG_F32 && a->scale == 1.0f;
#ifdef AG_CPU_GATHER_AVX512
  const int inline_copy =
      plain && a->rows >= 16 && a->rows <= 256 && ag__cpu_vector_paths && __builtin_cpu_supports("avx512f");
#endif
  for (int64_t j = j0; j < j1; j++) {
    if (j + ahead < j1)
      prefetch_span((const char *)a->src + (size_t)gather_col(a, j + ahead) * col_bytes, col_bytes);
    int64_t c = gather_col(a, j);
    float *out = a->dst + j * a->rows;
    size_t base = (size_t)c * (size_t)a->rows;
#ifdef AG_CPU_GATHER_AVX512
    if (inline_copy) {
      copy_f32_avx512(out, (const float *)a->src + base, a->rows);
      continue;
    }
#endif
    if (plain) {
      memcpy(out, (const float *)a->src + base, (size_t)a->rows * sizeof(float));
    } else {
      for (int64_t r = 0; r < a->rows; r++)
        out[r] = ag__load_f32(a->src, a->src_dtype, base + (size_t)r) * a->scale;
    }
  }
}

/* A gather split over the helper threads (pool.c): task i takes columns
 * [i per, (i + 1) per). */
typedef struct gather_split {
  const ag__gather_args *a;
  int64_t per;
} gather_split;

static void gather_task(void *arg, int i) {
  const gather_split *g = arg;
  const int64_t j0 = (int64_t)i * g->per, j1 = j0 + g->per < g->a->n ? j0 + g->per : g->a->n;
  if (j0 < j1) gather_range(g->a, j0, j1);
}

int ag__cpu_gather_threads = 0; /* 0: as many as the pool has; n > 0: at most n */

/* A batch of AG__GATHER_SPLIT_BYTES or more is split into parts of at least
 * AG__GATHER_SPLIT_COLS columns, one a thread: each thread's misses are in
 * flight beside the others' (a gather of random columns waits on memory,
 * one core keeps only so many misses in flight). Only plain f32 columns are
 * split: their copy is the same bits on any thread, while a conversion's
 * floating-point mode (cpu_backend.c's flush to zero) is the caller's. */
#define AG__GATHER_SPLIT_BYTES ((size_t)16 << 10)
#define AG__GATHER_SPLIT_COLS 32

static ag_status k_gather(const void *args) {
  const ag__gather_args *a = args;
  const size_t bytes = (size_t)a->n * (size_t)a->rows * ag_dtype_size(a->src_dtype);
  const int plain = a->src_dtype == AG_F32 && a->scale == 1.0f;
  if (plain && bytes >= AG__GATHER_SPLIT_BYTES && a->n >= 2 * AG__GATHER_SPLIT_COLS &&
      ag__cpu_gather_threads != 1) {
    int64_t parts = ag__pool_threads();
    if (ag__cpu_gather_threads > 1 && parts > ag__cpu_gather_threads) parts = ag__cpu_gather_threads;
    if (parts > a->n / AG__GATHER_SPLIT_COLS) parts = a->n / AG__GATHER_SPLIT_COLS;
    if (parts > 1) {
      gather_split g = {a, (a->n + parts - 1) / parts};
      ag__pool_run((int)parts, gather_task, &g);
      return AG_OK;
    }
  }
  gather_range(a, 0, a->n);
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
static inline void map_col(ag__map_op op, const float *restrict x, float *restrict o, int64_t n, float p0,
                           float p1, int acc) {
  if (acc)
    for (int64_t r = 0; r < n; r++) o[r] += ag__map_f(op, x[r], p0, p1);
  else
    for (int64_t r = 0; r < n; r++) o[r] = ag__map_f(op, x[r], p0, p1);
}

static inline void map2_col(ag__map2_op op, const float *restrict x, const float *restrict y,
                            float *restrict o, int64_t n, float alpha, float p0, int acc) {
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
#define CASE(OP) \
  case OP: map_col(OP, px, po, n, a->p0, a->p1, a->accumulate); break;
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
#define CASE(OP) \
  case OP: map2_col(OP, px, py, po, n, a->alpha, a->p0, a->accumulate); break;
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
  if (dt == AG_I32)
    ((int32_t *)arg)[k] = (int32_t)v;
  else
    ((int64_t *)arg)[k] = v;
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
    __m256i c0 = _mm256_and_si256(
        _mm256_set_epi64x((long long)(b + 3), (long long)(b + 2), (long long)(b + 1), (long long)b), lo);
    __m256i c1 = _mm256_set_epi64x((long long)((b + 3) >> 32), (long long)((b + 2) >> 32),
                                   (long long)((b + 1) >> 32), (long long)(b >> 32));
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

/* ag__philox4x32_10 of blocks b0 .. b0 + 7 (a 64-bit lane each), its four
 * words in c[0 .. 3] (each in the low half of a lane): draw 2 b is words
 * (c[1], c[0]), draw 2 b + 1 words (c[3], c[2]). */
__attribute__((target("avx512f"))) static inline void philox8(uint64_t seed, uint64_t b0, __m512i c[4]) {
  const __m512i m0 = _mm512_set1_epi64(AG__PHILOX_M0), m1 = _mm512_set1_epi64(AG__PHILOX_M1);
  const __m512i lo = _mm512_set1_epi64(0xFFFFFFFFu);
  const __m512i b =
      _mm512_add_epi64(_mm512_set1_epi64((long long)b0), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
  __m512i c0 = _mm512_and_si512(b, lo), c1 = _mm512_srli_epi64(b, 32), c2 = _mm512_setzero_si512(), c3 = c2;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++, k0 += AG__PHILOX_W0, k1 += AG__PHILOX_W1) { /* the rounds */
    const __m512i q0 = _mm512_mul_epu32(m0, c0), q1 = _mm512_mul_epu32(m1, c2);
    c0 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(q1, 32), c1), _mm512_set1_epi64(k0));
    c1 = _mm512_and_si512(q1, lo);
    c2 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(q0, 32), c3), _mm512_set1_epi64(k1));
    c3 = _mm512_and_si512(q0, lo);
  }
  c[0] = c0, c[1] = c1, c[2] = c2, c[3] = c3;
}

/* draws_avx2's draws for 8 blocks a vector (nb a multiple of 8). */
__attribute__((target("avx512f"))) static void draws_avx512(uint64_t seed, uint64_t b0, int64_t nb,
                                                            uint32_t bound, uint64_t *out) {
  const __m512i bd = _mm512_set1_epi64(bound);
  const __m512i p0 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
                p1 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  for (int64_t j = 0; j + 8 <= nb; j += 8) {
    __m512i c[4];
    philox8(seed, b0 + (uint64_t)j, c);
    const __m512i even = _mm512_srli_epi64(
        _mm512_add_epi64(_mm512_mul_epu32(c[1], bd), _mm512_srli_epi64(_mm512_mul_epu32(c[0], bd), 32)), 32);
    const __m512i odd = _mm512_srli_epi64(
        _mm512_add_epi64(_mm512_mul_epu32(c[3], bd), _mm512_srli_epi64(_mm512_mul_epu32(c[2], bd), 32)), 32);
    _mm512_storeu_si512(out + 2 * j, _mm512_permutex2var_epi64(even, p0, odd));
    _mm512_storeu_si512(out + 2 * j + 8, _mm512_permutex2var_epi64(even, p1, odd));
  }
}

static ag_status k_randint(const void *args) {
  const ag__randint_args *a = args;
  int64_t bound = a->bound_dev ? *a->bound_dev : a->bound_const;
  const uint64_t base = *a->counter, ub = bound < 1 ? 0 : (uint64_t)bound;
  const int64_t n = a->n;
  const ag_dtype dt = a->out_dtype; /* locals: the stores below cannot change them */
  void *out = a->out;
#ifdef AG_CPU_DRAWS_AVX2
  const int fast = ag__cpu_vector_paths && ub > 0 && ub <= UINT32_MAX && __builtin_cpu_supports("avx2");
  const int wide = fast && __builtin_cpu_supports("avx512f");
  enum { CHUNK = 64 }; /* blocks a call: two draws a block */
  uint64_t v[2 * CHUNK];
#endif
  for (int64_t i = 0; i < n;) {
    const uint64_t k = base + (uint64_t)i;
#ifdef AG_CPU_DRAWS_AVX2
    const int64_t whole = (n - i) / 2 < CHUNK ? (n - i) / 2 : CHUNK, eights = wide && whole >= 8;
    const int64_t nb = whole & (eights ? ~(int64_t)7 : ~(int64_t)3);
    if (fast && (k & 1) == 0 && nb > 0) { /* whole blocks, eight or four at a time */
      if (eights)
        draws_avx512(a->seed, k >> 1, nb, (uint32_t)ub, v);
      else
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

static ag_status k_per_fill(const void *args) {
  const ag__per_fill_args *a = args;
  double v = pow((double)a->state[0], (double)a->alpha);
  double *leaves = a->tree + ag__per_offset(a->depth - 1);
  for (int64_t i = 0; i < a->k; i++) leaves[a->pos + i] = v;
  per_update_range(a->tree, a->depth, a->pos, a->pos + a->k - 1);
  return AG_OK;
}

/* ---- PER_SAMPLE ----
 * The indices are ag__per_find's, bit for bit, on every path. The weights
 * are w_j / w_max = (leaf_j / leaf_min)^-beta (leaf_min: the smallest leaf
 * of the batch with a weight; the factors (size / root)^-beta cancel), the
 * power by per_rpow: within 1e-11 of pow in double, one rounding to float;
 * the scalar and the AVX-512 paths take the same steps and agree bit for
 * bit. Trees where that could overflow (a root of 0 or not finite, an
 * infinite leaf, leaves 2^1000 apart) take ag__per_weight as before. */

/* r^-nb for r in [1, 2^1000], nb in [0, 1]: r = m 2^e with m in
 * [sqrt(1/2), sqrt(2)) (from the bits); log2(m) = 2 atanh(s) / ln 2,
 * s = (m - 1) / (m + 1), |s| < 0.172, to z^6 / 13 in z = s^2;
 * -nb e = k + (a - k) with k an integer (k >= -1000, so 2^k is normal);
 * 2^f, |f| <= 1, is exp(f ln 2) to the term of degree 12. Plain adds and
 * multiplies (no fma), so that per_rpow8 can take the same steps. */
static const double per_lnc[6] = {1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0};
static const double per_expc[12] = {1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
                                    1.0 / 5040,     1.0 / 720,     1.0 / 120,    1.0 / 24,
                                    1.0 / 6,        0.5,           1.0,          1.0};
#define PER_LOG2E 1.4426950408889634
#define PER_LN2 0.6931471805599453
#define PER_ROUND 6755399441055744.0      /* 1.5 * 2^52: (a + it) - it rounds a to an integer */
#define PER_SQRT2_FRAC 0x6a09e667f3bcdull /* the fraction bits of sqrt(2) (rounded up) */

static inline double per_rpow(double r, double nb) {
  uint64_t rb;
  memcpy(&rb, &r, sizeof rb);
  const uint64_t frac = rb & 0xfffffffffffffull, big = frac >= PER_SQRT2_FRAC; /* m >= sqrt(2): halve it */
  const int64_t e = (int64_t)(rb >> 52) - 1023 + (int64_t)big;
  const uint64_t mb = (frac | 0x3ff0000000000000ull) - (big << 52);
  double m;
  memcpy(&m, &mb, sizeof m);
  const double s = (m - 1.0) / (m + 1.0), z = s * s;
  double p = 1.0 / 13;
  for (int i = 0; i < 6; i++) p = z * p + per_lnc[i];
  const double l2m = (s + s) * p * PER_LOG2E;
  const double a = (0.0 - nb) * (double)e, k = (a + PER_ROUND) - PER_ROUND;
  const double g = ((a - k) - nb * l2m) * PER_LN2;
  double ex = 1.0 / 479001600;
  for (int i = 0; i < 12; i++) ex = ex * g + per_expc[i];
  const uint64_t kb = (uint64_t)((int64_t)k + 1023) << 52;
  double scale;
  memcpy(&scale, &kb, sizeof scale);
  return ex * scale;
}

/* Whether the batch's weights go by per_rpow: lmin, lmax over the leaves
 * with a weight (n (leaf / root) > 0, as ag__per_weight has it). */
static inline int per_rpow_ok(double root, double lmin, double lmax) {
  return root > 0.0 && root < INFINITY && lmax < INFINITY && lmax / lmin < 0x1p1000;
}

/* The weights of idx[0 .. B-1], as the AVX-512 path gives them. */
static void per_weights(const double *leaves, const int32_t *idx, int64_t B, double root, int64_t size,
                        float beta, float *w) {
  const double n = (double)(size > 0 ? size : 1);
  double lmin = INFINITY, lmax = 0.0;
  for (int64_t j = 0; j < B; j++) {
    const double l = leaves[idx[j]];
    if (n * (l / root) > 0.0) lmin = l < lmin ? l : lmin, lmax = l > lmax ? l : lmax;
  }
  if (per_rpow_ok(root, lmin, lmax)) {
    for (int64_t j = 0; j < B; j++) {
      const double l = leaves[idx[j]];
      w[j] = n * (l / root) > 0.0 ? (float)per_rpow(l / lmin, (double)beta) : 0.0f;
    }
    return;
  }
  float wmax = 0.0f;
  for (int64_t j = 0; j < B; j++) {
    w[j] = ag__per_weight(leaves[idx[j]], root, size, beta);
    wmax = w[j] > wmax ? w[j] : wmax;
  }
  for (int64_t j = 0; j < B; j++) w[j] = wmax > 0.0f ? w[j] / wmax : 0.0f;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define AG_CPU_PER_AVX512 1
#define PER_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl")))

/* The PER kernels' AVX-512 paths: allowed and the processor has them. */
static int per_avx512(void) {
  return ag__cpu_vector_paths && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

/* ag__per_pow of 8 priorities (alpha neither 0 nor 1), the same steps in
 * the same order (fma where it has fma, the reciprocal's seed by a float
 * division), so the leaves are its bits on either path. */
PER_AVX512 static void per_pow8(const float *p, double alpha, double *out) {
  const __m256 pf = _mm256_loadu_ps(p);
  const __m512d pd = _mm512_cvtps_pd(pf), one = _mm512_set1_pd(1.0);
  const __m512i fb = _mm512_cvtepu32_epi64(_mm256_castps_si256(pf));
  __m512i e = _mm512_sub_epi64(_mm512_srli_epi64(fb, 23), _mm512_set1_epi64(127));
  const __m512i frac = _mm512_and_si512(fb, _mm512_set1_epi64(0x7fffff));
  __m512i mb = _mm512_or_si512(_mm512_slli_epi64(frac, 29), _mm512_set1_epi64((long long)1023 << 52));
  const __mmask8 big = _mm512_cmpgt_epi64_mask(frac, _mm512_set1_epi64(0x3504f3));
  mb = _mm512_mask_sub_epi64(mb, big, mb, _mm512_set1_epi64((long long)1 << 52));
  e = _mm512_mask_add_epi64(e, big, e, _mm512_set1_epi64(1));
  const __m512d m = _mm512_castsi512_pd(mb), num = _mm512_sub_pd(m, one), den = _mm512_add_pd(m, one);
  __m512d y = _mm512_cvtps_pd(_mm256_div_ps(_mm256_set1_ps(1.0f), _mm512_cvtpd_ps(den)));
  const __m512d err = _mm512_fnmadd_pd(den, y, one);
  y = _mm512_fmadd_pd(y, _mm512_fmadd_pd(err, err, err), y);
  const __m512d s0 = _mm512_mul_pd(num, y), s = _mm512_fmadd_pd(_mm512_fnmadd_pd(den, s0, num), y, s0);
  const __m512d z = _mm512_mul_pd(s, s), z2 = _mm512_mul_pd(z, z), z4 = _mm512_mul_pd(z2, z2),
                z8 = _mm512_mul_pd(z4, z4);
#define PP_FMA(c1, v, c0) _mm512_fmadd_pd(_mm512_set1_pd(c1), v, _mm512_set1_pd(c0))
  const __m512d r0 = PP_FMA(2.0 / 5, z, 2.0 / 3), r1 = PP_FMA(2.0 / 9, z, 2.0 / 7),
                r2 = PP_FMA(2.0 / 13, z, 2.0 / 11), r3 = PP_FMA(2.0 / 17, z, 2.0 / 15),
                r4 = PP_FMA(2.0 / 21, z, 2.0 / 19);
  const __m512d R = _mm512_add_pd(
      _mm512_fmadd_pd(_mm512_fmadd_pd(r3, z2, r2), z4, _mm512_fmadd_pd(r1, z2, r0)), _mm512_mul_pd(r4, z8));
  const __m512d lnm = _mm512_fmadd_pd(_mm512_mul_pd(s, z), R, _mm512_mul_pd(_mm512_set1_pd(2.0), s));
  const __m512d a = _mm512_set1_pd(alpha), ea = _mm512_mul_pd(a, _mm512_cvtepi64_pd(e));
  const __m512d k = _mm512_roundscale_pd(ea, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                r = _mm512_sub_pd(ea, k);
  const __m512d x = _mm512_fmadd_pd(a, lnm,
                                    _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.62e42fefa39efp-1),
                                                    _mm512_mul_pd(r, _mm512_set1_pd(0x1.abc9e3b39803fp-56))));
  const __m512d x2 = _mm512_mul_pd(x, x), x4 = _mm512_mul_pd(x2, x2), x8 = _mm512_mul_pd(x4, x4);
  const __m512d q0 = PP_FMA(1.0 / 6, x, 1.0 / 2), q1 = PP_FMA(1.0 / 120, x, 1.0 / 24),
                q2 = PP_FMA(1.0 / 5040, x, 1.0 / 720), q3 = PP_FMA(1.0 / 362880, x, 1.0 / 40320),
                q4 = PP_FMA(1.0 / 39916800, x, 1.0 / 3628800),
                q5 = PP_FMA(1.0 / 6227020800.0, x, 1.0 / 479001600),
                q6 = PP_FMA(1.0 / 1307674368000.0, x, 1.0 / 87178291200.0),
                q7 = _mm512_set1_pd(1.0 / 20922789888000.0);
#undef PP_FMA
  const __m512d Q =
      _mm512_fmadd_pd(_mm512_fmadd_pd(_mm512_fmadd_pd(q7, x2, q6), x4, _mm512_fmadd_pd(q5, x2, q4)), x8,
                      _mm512_fmadd_pd(_mm512_fmadd_pd(q3, x2, q2), x4, _mm512_fmadd_pd(q1, x2, q0)));
  const __m512d ex = _mm512_add_pd(one, _mm512_fmadd_pd(x2, Q, x));
  const __m512i kb = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtpd_epi64(k), _mm512_set1_epi64(1023)), 52);
  const __m512d v = _mm512_mul_pd(ex, _mm512_castsi512_pd(kb));
  const __mmask8 finite = _mm512_cmp_pd_mask(pd, _mm512_set1_pd(INFINITY), _CMP_LT_OQ);
  _mm512_storeu_pd(out, _mm512_mask_mov_pd(pd, finite, v));
}

/* The descents, 8 a vector (lane l: sample l), PER_CHUNK samples at once:
 * each level for all of them before the next, whose lines are asked for as
 * soon as the nodes are known. A level's 16 children of 8 lanes are two
 * 8 x 8 transposes of plain loads (gathers were twice as slow). */
enum { PER_CHUNK = 128 };

/* The 8 x 8 doubles r[l][c] as c[c][l]. */
PER_AVX512 static inline void per_transpose8(const __m512d r[8], __m512d c[8]) {
  const __m512i i0 = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13),
                i1 = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  __m512d t[8], s[8];
  for (int k = 0; k < 4; k++) /* t[2k]: children 0, 2, 4, 6 of rows 2k, 2k + 1; t[2k + 1]: 1, 3, 5, 7 */
    t[2 * k] = _mm512_unpacklo_pd(r[2 * k], r[2 * k + 1]),
          t[2 * k + 1] = _mm512_unpackhi_pd(r[2 * k], r[2 * k + 1]);
  for (int k = 0; k < 2; k++) { /* rows 4k .. 4k + 3 of children (0 | 4), (2 | 6), (1 | 5), (3 | 7) */
    s[4 * k] = _mm512_permutex2var_pd(t[4 * k], i0, t[4 * k + 2]);
    s[4 * k + 1] = _mm512_permutex2var_pd(t[4 * k], i1, t[4 * k + 2]);
    s[4 * k + 2] = _mm512_permutex2var_pd(t[4 * k + 1], i0, t[4 * k + 3]);
    s[4 * k + 3] = _mm512_permutex2var_pd(t[4 * k + 1], i1, t[4 * k + 3]);
  }
  c[0] = _mm512_shuffle_f64x2(s[0], s[4], 0x44), c[4] = _mm512_shuffle_f64x2(s[0], s[4], 0xEE);
  c[2] = _mm512_shuffle_f64x2(s[1], s[5], 0x44), c[6] = _mm512_shuffle_f64x2(s[1], s[5], 0xEE);
  c[1] = _mm512_shuffle_f64x2(s[2], s[6], 0x44), c[5] = _mm512_shuffle_f64x2(s[2], s[6], 0xEE);
  c[3] = _mm512_shuffle_f64x2(s[3], s[7], 0x44), c[7] = _mm512_shuffle_f64x2(s[3], s[7], 0xEE);
}

/* ag__per_step for 8 lanes, x[c] child c of each: v goes down by every
 * positive child (v - x where x > 0, as the step subtracts them while it has
 * no pick; what it subtracts after the pick is not used); the pick is the
 * first positive c with v < x, its remainder v before c; with none, the last
 * positive child (0 when there is none) and v after all. */
PER_AVX512 static inline __m512i per_step8(const __m512d x[16], __m512d *u) {
  const __m512d zero = _mm512_setzero_pd();
  __m512d v = *u, rem = zero;
  __m512i pick = _mm512_setzero_si512(), last = _mm512_setzero_si512();
  __mmask8 done = 0;
  for (int c = 0; c < AG__PER_FAN; c++) {
    const __mmask8 pos = _mm512_cmp_pd_mask(x[c], zero, _CMP_GT_OQ);
    const __mmask8 lt = _mm512_mask_cmp_pd_mask(pos, v, x[c], _CMP_LT_OQ), hit = lt & (__mmask8)~done;
    done |= lt;
    rem = _mm512_mask_mov_pd(rem, hit, v);
    pick = _mm512_mask_mov_epi64(pick, hit, _mm512_set1_epi64(c));
    last = _mm512_mask_mov_epi64(last, pos, _mm512_set1_epi64(c));
    v = _mm512_mask_sub_pd(v, pos, v, x[c]);
  }
  *u = _mm512_mask_mov_pd(v, done, rem);
  return _mm512_mask_mov_epi64(last, done, pick);
}

/* u[k] = ag__per_target(seed, first + k, j0 + k, B, root) for k < 8 nv
 * (nv <= PER_CHUNK / 8): eight Philox blocks a vector (philox8), both
 * halves of each, in draw order. */
PER_AVX512 static void per_targets8(uint64_t seed, uint64_t first, int64_t j0, int nv, int64_t B, double root,
                                    double *u) {
  uint64_t dr[PER_CHUNK + 16] __attribute__((aligned(64)));
  const uint64_t b0 = first >> 1;
  const int nb = (int)(((first + 8 * (uint64_t)nv - 1) >> 1) - b0) + 1;
  const __m512i io = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i p0 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
                p1 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  for (int i = 0; i < nb; i += 8) {
    __m512i c[4];
    philox8(seed, b0 + (uint64_t)i, c);
    /* draw 2 b: words (c1, c0); draw 2 b + 1: words (c3, c2) */
    const __m512i h0 = _mm512_or_si512(_mm512_slli_epi64(c[1], 32), c[0]);
    const __m512i h1 = _mm512_or_si512(_mm512_slli_epi64(c[3], 32), c[2]);
    _mm512_store_si512(dr + 2 * i, _mm512_permutex2var_epi64(h0, p0, h1));
    _mm512_store_si512(dr + 2 * i + 8, _mm512_permutex2var_epi64(h0, p1, h1));
  }
  const uint64_t *d = dr + (first & 1);
  const __m512d bd = _mm512_set1_pd((double)B), rt = _mm512_set1_pd(root);
  const __m512d sc = _mm512_set1_pd(1.0 / 9007199254740992.0);
  for (int q = 0; q < nv; q++) {
    const __m512d v =
        _mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(_mm512_loadu_si512(d + 8 * q), 11)), sc);
    const __m512d jd = _mm512_cvtepi64_pd(_mm512_add_epi64(_mm512_set1_epi64(j0 + 8 * q), io));
    _mm512_store_pd(u + 8 * q, _mm512_mul_pd(_mm512_div_pd(_mm512_add_pd(jd, v), bd), rt));
  }
}

/* per_rpow, 8 lanes, step for step. */
PER_AVX512 static inline __m512d per_rpow8(__m512d r, __m512d nb) {
  const __m512i rb = _mm512_castpd_si512(r),
                frac = _mm512_and_si512(rb, _mm512_set1_epi64(0xfffffffffffffll));
  const __mmask8 big = _mm512_cmpge_epu64_mask(frac, _mm512_set1_epi64((long long)PER_SQRT2_FRAC));
  const __m512i e0 = _mm512_sub_epi64(_mm512_srli_epi64(rb, 52), _mm512_set1_epi64(1023));
  const __m512i m0 = _mm512_or_si512(frac, _mm512_set1_epi64(0x3ff0000000000000ll));
  const __m512i e = _mm512_mask_add_epi64(e0, big, e0, _mm512_set1_epi64(1));
  const __m512i mb = _mm512_mask_sub_epi64(m0, big, m0, _mm512_set1_epi64(1ll << 52));
  const __m512d m = _mm512_castsi512_pd(mb), d1 = _mm512_set1_pd(1.0);
  const __m512d s = _mm512_div_pd(_mm512_sub_pd(m, d1), _mm512_add_pd(m, d1)), z = _mm512_mul_pd(s, s);
  __m512d p = _mm512_set1_pd(1.0 / 13);
  for (int i = 0; i < 6; i++) p = _mm512_add_pd(_mm512_mul_pd(z, p), _mm512_set1_pd(per_lnc[i]));
  const __m512d l2m = _mm512_mul_pd(_mm512_mul_pd(_mm512_add_pd(s, s), p), _mm512_set1_pd(PER_LOG2E));
  const __m512d a = _mm512_mul_pd(_mm512_sub_pd(_mm512_setzero_pd(), nb), _mm512_cvtepi64_pd(e));
  const __m512d rnd = _mm512_set1_pd(PER_ROUND), k = _mm512_sub_pd(_mm512_add_pd(a, rnd), rnd);
  const __m512d g =
      _mm512_mul_pd(_mm512_sub_pd(_mm512_sub_pd(a, k), _mm512_mul_pd(nb, l2m)), _mm512_set1_pd(PER_LN2));
  __m512d ex = _mm512_set1_pd(1.0 / 479001600);
  for (int i = 0; i < 12; i++) ex = _mm512_add_pd(_mm512_mul_pd(ex, g), _mm512_set1_pd(per_expc[i]));
  const __m512i kb = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvttpd_epi64(k), _mm512_set1_epi64(1023)), 52);
  return _mm512_mul_pd(ex, _mm512_castsi512_pd(kb));
}

/* per_weights, 8 samples a vector. */
PER_AVX512 static void per_weights8(const double *leaves, const int32_t *idx, int64_t B, double root,
                                    int64_t size, float beta, float *w) {
  const __m512d n = _mm512_set1_pd((double)(size > 0 ? size : 1)), rt = _mm512_set1_pd(root);
  const __m512d zero = _mm512_setzero_pd();
  __m512d mn = _mm512_set1_pd(INFINITY), mx = zero;
  for (int64_t j = 0; j < B; j += 8) {
    const __mmask8 t = B - j >= 8 ? 0xff : (__mmask8)((1u << (B - j)) - 1);
    const __m512d l = _mm512_mask_i32gather_pd(zero, t, _mm256_maskz_loadu_epi32(t, idx + j), leaves, 8);
    const __mmask8 ok = _mm512_mask_cmp_pd_mask(t, _mm512_mul_pd(n, _mm512_div_pd(l, rt)), zero, _CMP_GT_OQ);
    mn = _mm512_mask_min_pd(mn, ok, mn, l);
    mx = _mm512_mask_max_pd(mx, ok, mx, l);
  }
  const double lmin = _mm512_reduce_min_pd(mn), lmax = _mm512_reduce_max_pd(mx);
  if (!per_rpow_ok(root, lmin, lmax)) {
    per_weights(leaves, idx, B, root, size, beta, w);
    return;
  }
  const __m512d lm = _mm512_set1_pd(lmin), nb = _mm512_set1_pd((double)beta), d1 = _mm512_set1_pd(1.0);
  for (int64_t j = 0; j < B; j += 8) {
    const __mmask8 t = B - j >= 8 ? 0xff : (__mmask8)((1u << (B - j)) - 1);
    const __m512d l = _mm512_mask_i32gather_pd(zero, t, _mm256_maskz_loadu_epi32(t, idx + j), leaves, 8);
    const __mmask8 ok = _mm512_mask_cmp_pd_mask(t, _mm512_mul_pd(n, _mm512_div_pd(l, rt)), zero, _CMP_GT_OQ);
    const __m512d wv = _mm512_maskz_mov_pd(ok, per_rpow8(_mm512_mask_div_pd(d1, ok, l, lm), nb));
    _mm256_mask_storeu_ps(w + j, t, _mm512_cvtpd_ps(wv));
  }
}

PER_AVX512 static void per_sample_avx512(const ag__per_sample_args *a, double root, uint64_t base) {
  int64_t node[PER_CHUNK] __attribute__((aligned(64)));
  double u[PER_CHUNK] __attribute__((aligned(64)));
  for (int64_t j0 = 0; j0 < a->B; j0 += PER_CHUNK) {
    const int g = a->B - j0 < PER_CHUNK ? (int)(a->B - j0) : PER_CHUNK, nv = (g + 7) / 8;
    /* lanes g .. 8 nv - 1 descend too (from targets past the batch's: valid
     * nodes), and are not written out */
    per_targets8(a->seed, base + (uint64_t)j0, j0, nv, a->B, root, u);
    for (int d = 0; d < a->depth; d++) {
      const double *lv = a->tree + ag__per_offset(d);
      const double *next = d + 1 < a->depth ? a->tree + ag__per_offset(d + 1) : NULL;
      for (int q = 0; q < nv; q++) {
        int64_t *nq = node + 8 * q;
        __m512d v = _mm512_load_pd(u + 8 * q), x[AG__PER_FAN];
        __m512i first;
        if (d == 0) { /* every lane under the root */
          for (int c = 0; c < AG__PER_FAN; c++) x[c] = _mm512_set1_pd(lv[c]);
          first = _mm512_setzero_si512();
        } else {
          __m512d r[8];
          for (int l = 0; l < 8; l++) r[l] = _mm512_loadu_pd(lv + nq[l] * AG__PER_FAN);
          per_transpose8(r, x);
          for (int l = 0; l < 8; l++) r[l] = _mm512_loadu_pd(lv + nq[l] * AG__PER_FAN + 8);
          per_transpose8(r, x + 8);
          first = _mm512_slli_epi64(_mm512_load_si512(nq), 4);
        }
        _mm512_store_si512(nq, _mm512_add_epi64(first, per_step8(x, &v)));
        _mm512_store_pd(u + 8 * q, v);
        if (next)
          for (int l = 0; l < 8; l++) { /* 16 doubles: two cache lines */
            __builtin_prefetch(next + nq[l] * AG__PER_FAN);
            __builtin_prefetch(next + nq[l] * AG__PER_FAN + 8);
          }
      }
    }
    for (int k = 0; k < g; k++) a->idx[j0 + k] = (int32_t)node[k];
  }
  per_weights8(a->tree + ag__per_offset(a->depth - 1), a->idx, a->B, root, *a->size_dev, a->beta, a->w);
}
#endif

/* ag__per_pow of n priorities into v: 8 a vector where the processor can. */
static void per_pows(const float *p, int n, float alpha, double *v) {
  int k = 0;
#ifdef AG_CPU_PER_AVX512
  if (alpha != 0.0f && alpha != 1.0f && per_avx512())
    for (; k + 8 <= n; k += 8) per_pow8(p + k, (double)alpha, v + k);
#endif
  for (; k < n; k++) v[k] = ag__per_pow(p[k], alpha);
}

static ag_status k_per_set(const void *args) {
  const ag__per_set_args *a = args;
  enum { CHUNK = 1024 }; /* leaves whose ancestors are summed together (stack scratch) */
  uint32_t node[CHUNK], tmp[CHUNK];
  int64_t leaf[CHUNK];
  float pr[CHUNK];
  double val[CHUNK];
  double *leaves = a->tree + ag__per_offset(a->depth - 1);
  /* Chunks in order, each its leaves then their ancestors: a later chunk
   * rewrites the ancestors it shares with an earlier one, and the last of
   * repeated indices wins as in one pass. A chunk's leaf lines are asked
   * for while its powers are computed. */
  for (int64_t j0 = 0; j0 < a->n; j0 += CHUNK) {
    int m = a->n - j0 < CHUNK ? (int)(a->n - j0) : CHUNK;
    uint32_t hi = 0;
    int kept = 0;
    for (int k = 0; k < m; k++) {
      int64_t l = ag__index_at(a->idx, a->idx_dtype, j0 + k);
      if (l < 0 || l >= a->cols) continue; /* indices from the device: skipped, never written out of bounds */
      float p = a->prio[(j0 + k) * a->prio_stride];
      __builtin_prefetch(leaves + l, 1);
      leaf[kept] = l;
      pr[kept++] = p > 1e-12f ? p : 1e-12f;
    }
    per_pows(pr, kept, a->alpha, val);
    for (int k = 0; k < kept; k++) {
      leaves[leaf[k]] = val[k];
      if (pr[k] > a->state[0]) a->state[0] = pr[k];
      node[k] = (uint32_t)(leaf[k] / AG__PER_FAN); /* < 2^31 columns (ag_per_create) */
      hi |= node[k];
    }
    m = kept;
    if (m == 0) continue; /* every index of the chunk outside the table: no node to sum */
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

static ag_status k_per_sample(const void *args) {
  const ag__per_sample_args *a = args;
  const double root = a->tree[ag__per_offset(a->depth)];
  uint64_t base = *a->counter;
#ifdef AG_CPU_PER_AVX512
  if (per_avx512()) {
    per_sample_avx512(a, root, base);
    *a->counter = base + (uint64_t)a->B;
    return AG_OK;
  }
#endif
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
    for (int k = 0; k < g; k++) a->idx[j0 + k] = (int32_t)node[k];
  }
  per_weights(a->tree + ag__per_offset(a->depth - 1), a->idx, a->B, root, *a->size_dev, a->beta, a->w);
  *a->counter = base + (uint64_t)a->B;
  return AG_OK;
}

const ag__cpu_kernel_fn ag__cpu_kernels[AG__K_COUNT] = {
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
};
