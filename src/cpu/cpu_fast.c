/* cpu_fast.c — the fast paths of the CPU backend, and the switch that
 * forces the reference (cpu_kernels.c) instead.
 *
 * Twelve kernels have one; the backend runs it unless the reference is
 * forced. Each is the reference's result computed faster, and each is
 * checked against the reference by tests/test_cpu_paths.c (GATHER_FIELDS,
 * SCATTER_FIELDS and ACGRAD by the cases of tests/test_kernels.c, which
 * run the backend's path):
 *
 *   GATHER      prefetches, memcpy or AVX-512 column copies (cpu_fast_x86.c),
 *               large f32 batches split over the helper threads. The same
 *               bits: a copy moves them, a conversion is the reference's
 *               load and product, and only plain f32 gathers are split (a
 *               helper thread's floating-point mode is not the caller's).
 *   MAP, MAP2   a loop of its own for each function, which the compiler
 *               vectorizes; a broadcast value made once a column. The same
 *               bits: the same operations on each element (ISO C: no
 *               contraction, no reassociation; libm calls stay scalar).
 *   COPY        memcpy of contiguous columns: the same bits.
 *   RANDINT     two draws a Philox block; 4 or 8 blocks a vector with
 *               AVX2 / AVX-512 (cpu_fast_x86.c). The same integers: the
 *               scaling is exact in either form.
 *   PER_SET     the leaves in chunks, their powers 8 a vector (AVX-512,
 *               the steps of ag__per_pow in its order), the chunk's
 *               parents sorted and each ancestor summed once. The same
 *               bits: a node is ag__per_sum16 of its final children on
 *               either path.
 *   PER_SAMPLE  16 descents in lockstep with prefetches, or 8 a vector
 *               (AVX-512); the weights by one polynomial power. The
 *               indices and the counter are the reference's bits (each
 *               step is ag__per_step's). The weights are
 *               (leaf / leaf_min)^-beta by per_rpow (within 1e-11 of pow,
 *               then one rounding to float), where the reference divides
 *               two rounded powers (three roundings to float): within
 *               4e-7 of the reference's, relative to the weight; batches
 *               where the polynomial could overflow take the reference's
 *               formula, bit for bit.
 *   GATHER_FIELDS, SCATTER_FIELDS  f32 fields of f32 columns (at a scale
 *               of 1) copied with memcpy, a column at a time, the gather's
 *               columns asked for ahead; the other fields by the
 *               reference. The same bits.
 *   CONV2D      im2col and a CBLAS product per sample (cpu_conv.c):
 *               the reference's sums in another order, in float.
 *   FRAME_STACK each stack's entries walked once, then its frames copied
 *               whole (u8) or converted by a loop the compiler vectorizes
 *               (f32: the reference's division, v / 255.0f); large
 *               batches split over the helper threads, each part in the
 *               caller's floating-point mode. The same bits.
 *   ACGRAD      the fused SAC / TD3 update (cpu_acgrad_fast.c): vector
 *               optimizer steps, unit-stride loops over the batch, the
 *               networks' passes as tasks of the helper threads. Within
 *               the kernel's tolerances (other orders of some sums, FMA).
 *
 * Within them, ag__cpu_vector_paths = 0 makes the vector paths take their
 * portable C ones (the same bits), and ag__cpu_gather_threads caps the
 * gather's threads.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/frames.h"
#include "base/kernels.h"
#include "base/per_tree.h"
#include "base/philox.h"
#include "base/scalar_ops.h"
#include "cpu/cpu_fast.h"
#include "cpu/cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#else
#include <fenv.h>
#endif

int ag__cpu_vector_paths = 1;
int ag__cpu_gather_threads = 0; /* 0: as many as the pool has; n > 0: at most n */

/* ---- the switch ---- */

/* -1 until the first kernel reads AGRL_CPU_REFERENCE; then 0 or 1. */
static atomic_int force_ref = -1;

int ag__cpu_reference_forced(void) {
  int f = atomic_load_explicit(&force_ref, memory_order_relaxed);
  if (f < 0) {
    const char *env = getenv("AGRL_CPU_REFERENCE");
    int expect = -1;
    /* a call of ag__cpu_force_reference before this one is kept */
    atomic_compare_exchange_strong(&force_ref, &expect, env && *env && strcmp(env, "0") != 0);
    f = atomic_load_explicit(&force_ref, memory_order_relaxed);
  }
  return f;
}

void ag__cpu_force_reference(int on) { atomic_store(&force_ref, on != 0); }

/* ---- GATHER ---- */

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
    ag__cpu_prefetch_span((const char *)a->src + (size_t)ag__cpu_gather_col(a, j) * col_bytes, col_bytes);
  const int plain = a->src_dtype == AG_F32 && a->scale == 1.0f;
#ifdef AG__CPU_X86
  /* inline copies: a call to memcpy for a small column costs more than the
   * copy (columns of up to 1 KB; memcpy's own ways are better for longer) */
  if (plain && a->rows >= 16 && a->rows <= 256 && ag__cpu_vector_paths && __builtin_cpu_supports("avx512f")) {
    ag__cpu_gather_copy_avx512(a, j0, j1, ahead);
    return;
  }
#endif
  for (int64_t j = j0; j < j1; j++) {
    if (j + ahead < j1)
      ag__cpu_prefetch_span((const char *)a->src + (size_t)ag__cpu_gather_col(a, j + ahead) * col_bytes,
                            col_bytes);
    int64_t c = ag__cpu_gather_col(a, j);
    float *out = a->dst + j * a->rows;
    size_t base = (size_t)c * (size_t)a->rows;
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

/* A batch of AG__GATHER_SPLIT_BYTES or more is split into parts of at least
 * AG__GATHER_SPLIT_COLS columns, one a thread: each thread's misses are in
 * flight beside the others' (a gather of random columns waits on memory,
 * one core keeps only so many misses in flight). Only plain f32 columns are
 * split: their copy is the same bits on any thread, while a conversion's
 * floating-point mode (cpu_backend.c's flush to zero) is the caller's. */
#define AG__GATHER_SPLIT_BYTES ((size_t)16 << 10)
#define AG__GATHER_SPLIT_COLS 32

static ag_status fast_gather(const void *args) {
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

/* ---- MAP, MAP2 ---- */

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
                            float *restrict o, int64_t n, float alpha, float p0, float p1, int acc) {
  if (acc)
    for (int64_t r = 0; r < n; r++) o[r] += alpha * ag__map2_f(op, x[r], y[r], p0, p1);
  else
    for (int64_t r = 0; r < n; r++) o[r] = alpha * ag__map2_f(op, x[r], y[r], p0, p1);
}

static ag_status fast_map(const void *args) {
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
      CASE(AG__MAP_CLAMP)
#undef CASE
      default: return ag__fail(AG_ERR_UNSUPPORTED, "cpu: map op %d", (int)a->op);
    }
  }
  return AG_OK;
}

static ag_status fast_map2(const void *args) {
  const ag__map2_args *a = args;
  const int64_t n = a->out.rows;
  for (int64_t c = 0; c < a->out.cols; c++) {
    int64_t sx, sy;
    const float *px = col_of(&a->a, c, &sx), *py = col_of(&a->b, c, &sy);
    float *po = a->out.p + c * a->out.ld;
    if (sx != 1 || sy != 1) { /* a broadcast row operand */
      for (int64_t r = 0; r < n; r++) {
        float v = a->alpha * ag__map2_f(a->op, px[r * sx], py[r * sy], a->p0, a->p1);
        po[r] = a->accumulate ? po[r] + v : v;
      }
      continue;
    }
    switch (a->op) {
#define CASE(OP) \
  case OP: map2_col(OP, px, py, po, n, a->alpha, a->p0, a->p1, a->accumulate); break;
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
      CASE(AG__MAP2_MIN)
      CASE(AG__MAP2_MAX_MASK)
      CASE(AG__MAP2_MIN_MASK)
      CASE(AG__MAP2_MASK_BWD)
      CASE(AG__MAP2_UNMASK_BWD)
      CASE(AG__MAP2_CLAMP_BWD)
#undef CASE
      default: return ag__fail(AG_ERR_UNSUPPORTED, "cpu: map2 op %d", (int)a->op);
    }
  }
  return AG_OK;
}

/* ---- COPY ---- */

static ag_status fast_copy(const void *args) {
  const ag__copy_args *a = args;
  if (a->accumulate || a->x.ld != a->x.rows || a->out.ld != a->out.rows)
    return ag__cpu_ref_kernels[AG__K_COPY](args);
  for (int64_t c = 0; c < a->out.cols; c++)
    memcpy(a->out.p + c * a->out.ld, a->x.p + c * a->x.ld, (size_t)a->out.rows * sizeof(float));
  return AG_OK;
}

/* ---- RANDINT ---- */

/* The draws of one Philox block both go out from one computation of it;
 * with AVX2 (bounds below 2^32), whole blocks 4 a vector, with AVX-512 8. */
static ag_status fast_randint(const void *args) {
  const ag__randint_args *a = args;
  int64_t bound = a->bound_dev ? *a->bound_dev : a->bound_const;
  const uint64_t base = *a->counter, ub = bound < 1 ? 0 : (uint64_t)bound;
  const int64_t n = a->n;
  const ag_dtype dt = a->out_dtype; /* locals: the stores below cannot change them */
  void *out = a->out;
#ifdef AG__CPU_X86
  const int fast = ag__cpu_vector_paths && ub > 0 && ub <= UINT32_MAX && __builtin_cpu_supports("avx2");
  const int wide = fast && __builtin_cpu_supports("avx512f");
  enum { CHUNK = 64 }; /* blocks a call: two draws a block */
  uint64_t v[2 * CHUNK];
#endif
  for (int64_t i = 0; i < n;) {
    const uint64_t k = base + (uint64_t)i;
#ifdef AG__CPU_X86
    const int64_t whole = (n - i) / 2 < CHUNK ? (n - i) / 2 : CHUNK, eights = wide && whole >= 8;
    const int64_t nb = whole & (eights ? ~(int64_t)7 : ~(int64_t)3);
    if (fast && (k & 1) == 0 && nb > 0) { /* whole blocks, eight or four at a time */
      if (eights)
        ag__cpu_draws_avx512(a->seed, k >> 1, nb, (uint32_t)ub, v);
      else
        ag__cpu_draws_avx2(a->seed, k >> 1, nb, (uint32_t)ub, v);
      for (int64_t q = 0; q < 2 * nb; q++) ag__index_put(out, dt, i + q, (int64_t)v[q]);
      i += 2 * nb;
      continue;
    }
#endif
    const ag__u32x4 blk = ag__philox_block(a->seed, k >> 1); /* one block: its draws from k */
    ag__index_put(out, dt, i, (int64_t)ag__scale_u64(ag__philox_half(blk, (int)(k & 1)), ub));
    if ((k & 1) == 0 && i + 1 < n)
      ag__index_put(out, dt, ++i, (int64_t)ag__scale_u64(ag__philox_half(blk, 1), ub));
    i++;
  }
  *a->counter = base + (uint64_t)a->n;
  return AG_OK;
}

/* ---- PER_SET ---- */

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
 * sorted parents of the leaves (level depth-2, repeats allowed, m > 0);
 * each distinct node of a level is summed once, and the loop that sums them
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

#ifdef AG__CPU_X86
/* The PER kernels' AVX-512 paths: allowed and the processor has them. */
static int per_avx512(void) {
  return ag__cpu_vector_paths && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}
#endif

/* ag__per_pow of n priorities into v: 8 a vector where the processor can
 * (the same steps in the same order, so the same bits). */
static void per_pows(const float *p, int n, float alpha, double *v) {
  int k = 0;
#ifdef AG__CPU_X86
  if (alpha != 0.0f && alpha != 1.0f && per_avx512()) k = ag__cpu_per_pows_avx512(p, n, (double)alpha, v);
#endif
  for (; k < n; k++) v[k] = ag__per_pow(p[k], alpha);
}

static ag_status fast_per_set(const void *args) {
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
      if (!ag__per_takes(a, l)) continue; /* indices from the device: skipped, never written out of bounds */
      float p = a->prio[(j0 + k) * a->prio_stride];
      __builtin_prefetch(leaves + l, 1);
      leaf[kept] = l;
      pr[kept++] = ag__per_clamp(p);
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
    if (a->depth < 2) {   /* the leaves are level 0 */
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

/* ---- PER_SAMPLE ----
 * The indices are ag__per_find's, bit for bit, on every path. The weights
 * are w_j / w_max = (leaf_j / leaf_min)^-beta (leaf_min: the smallest leaf
 * of the batch with a weight; the factors (size / root)^-beta cancel), the
 * power by per_rpow: within 1e-11 of pow in double, one rounding to float;
 * the scalar and the AVX-512 paths take the same steps and agree bit for
 * bit. Trees where that could overflow (a root of 0 or not finite, an
 * infinite leaf, leaves 2^1000 apart) take ag__per_weight as the reference
 * does. */

/* r^-nb for r in [1, 2^1000], nb in [0, 1]: r = m 2^e with m in
 * [sqrt(1/2), sqrt(2)) (from the bits); log2(m) = 2 atanh(s) / ln 2,
 * s = (m - 1) / (m + 1), |s| < 0.172, to z^6 / 13 in z = s^2;
 * -nb e = k + (a - k) with k an integer (k >= -1000, so 2^k is normal);
 * 2^f, |f| <= 1, is exp(f ln 2) to the term of degree 12. Plain adds and
 * multiplies (no fma), so that per_rpow8 can take the same steps. */
static inline double per_rpow(double r, double nb) {
  uint64_t rb;
  memcpy(&rb, &r, sizeof rb);
  const uint64_t frac = rb & 0xfffffffffffffull,
                 big = frac >= AG__CPU_PER_SQRT2_FRAC; /* m >= sqrt(2): halve it */
  const int64_t e = (int64_t)(rb >> 52) - 1023 + (int64_t)big;
  const uint64_t mb = (frac | 0x3ff0000000000000ull) - (big << 52);
  double m;
  memcpy(&m, &mb, sizeof m);
  const double s = (m - 1.0) / (m + 1.0), z = s * s;
  double p = 1.0 / 13;
  for (int i = 0; i < 6; i++) p = z * p + ag__cpu_per_lnc[i];
  const double l2m = (s + s) * p * AG__CPU_PER_LOG2E;
  const double a = (0.0 - nb) * (double)e, k = (a + AG__CPU_PER_ROUND) - AG__CPU_PER_ROUND;
  const double g = ((a - k) - nb * l2m) * AG__CPU_PER_LN2;
  double ex = 1.0 / 479001600;
  for (int i = 0; i < 12; i++) ex = ex * g + ag__cpu_per_expc[i];
  const uint64_t kb = (uint64_t)((int64_t)k + 1023) << 52;
  double scale;
  memcpy(&scale, &kb, sizeof scale);
  return ex * scale;
}

void ag__cpu_per_weights(const double *leaves, const int32_t *idx, int64_t B, double root, int64_t size,
                         float beta, float *w) {
  const double n = (double)(size > 0 ? size : 1);
  double lmin = INFINITY, lmax = 0.0;
  for (int64_t j = 0; j < B; j++) {
    const double l = leaves[idx[j]];
    if (n * (l / root) > 0.0) lmin = l < lmin ? l : lmin, lmax = l > lmax ? l : lmax;
  }
  if (ag__cpu_per_rpow_ok(root, lmin, lmax)) {
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

static ag_status fast_per_sample(const void *args) {
  const ag__per_sample_args *a = args;
  const double root = a->tree[ag__per_offset(a->depth)];
  uint64_t base = *a->counter;
#ifdef AG__CPU_X86
  if (per_avx512()) {
    ag__cpu_per_sample_avx512(a, root, base);
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
  ag__cpu_per_weights(a->tree + ag__per_offset(a->depth - 1), a->idx, a->B, root, *a->size_dev,
                      ag__per_beta_of(a->beta, a->beta_dev), a->w);
  *a->counter = base + (uint64_t)a->B;
  return AG_OK;
}

/* ---- GATHER_FIELDS, SCATTER_FIELDS ---- */

/* f32 fields of f32 columns at a scale of 1 (a batch handed to another
 * framework as it is stored) are copied, transition by transition (each
 * column read once for all of them, the columns ahead asked for as the
 * gather asks); every other destination goes through the reference in one
 * call. The same bits: the reference stores such a value as it is. */
static ag_status fast_gather_fields(const void *args) {
  const ag__gather_fields_args *a = args;
  const int plain = a->src_dtype == AG_F32 && a->scale == 1.0f;
  ag__gather_fields_args rest = *a;
  int copies[AG__GF_MAX], n_copies = 0;
  rest.n_dst = 0;
  for (int d = 0; d < a->n_dst; d++) {
    if (plain && a->dst[d].row0 >= 0 && a->dst[d].dtype == AG_F32)
      copies[n_copies++] = d;
    else
      rest.dst[rest.n_dst++] = a->dst[d];
  }
  if (n_copies) {
    enum { AHEAD = 32 };
    const size_t col_bytes = (size_t)a->rows * sizeof(float);
#define COL(j)                                                                                   \
  ((const float *)a->src +                                                                       \
   (size_t)ag__clamp_index(ag__index_at(a->idx, a->idx_dtype, (j)*a->idx_stride), a->capacity) * \
       (size_t)a->rows)
    for (int64_t j = 0; j < a->n && j < AHEAD; j++) ag__cpu_prefetch_span((const char *)COL(j), col_bytes);
    for (int64_t j = 0; j < a->n; j++) {
      if (j + AHEAD < a->n) ag__cpu_prefetch_span((const char *)COL(j + AHEAD), col_bytes);
      const float *col = COL(j);
      for (int i = 0; i < n_copies; i++) {
        const ag__gf_dst *o = &a->dst[copies[i]];
        memcpy((float *)o->p + j * o->ld, col + o->row0, (size_t)o->width * sizeof(float));
      }
    }
#undef COL
  }
  return rest.n_dst ? ag__cpu_ref_kernels[AG__K_GATHER_FIELDS](&rest) : AG_OK;
}

/* f32 sources into f32 columns are copied, transition by transition; the
 * other sources, the size and the position go through the reference in
 * one call. The same bits. */
static ag_status fast_scatter_fields(const void *args) {
  const ag__scatter_fields_args *a = args;
  ag__scatter_fields_args rest = *a;
  int copies[AG__SF_MAX], n_copies = 0;
  rest.n_src = 0;
  for (int i = 0; i < a->n_src; i++) {
    if (a->dst_dtype == AG_F32 && a->src[i].dtype == AG_F32)
      copies[n_copies++] = i;
    else
      rest.src[rest.n_src++] = a->src[i];
  }
  for (int64_t j = 0; j < a->k && n_copies; j++) {
    const int64_t col = (a->pos + j) % a->capacity;
    float *to = (float *)a->dst + (size_t)col * (size_t)a->rows;
    for (int i = 0; i < n_copies; i++) {
      const ag__sf_src *in = &a->src[copies[i]];
      memcpy(to + in->row0, (const float *)in->p + j * in->ld, (size_t)in->width * sizeof(float));
    }
  }
  return ag__cpu_ref_kernels[AG__K_SCATTER_FIELDS](&rest);
}

/* ---- FRAME_STACK ----
 * The columns as the reference picks them (ag__cpu_frame_columns); then
 * each stack's k entries found once by the ring walk (ag__frames_walk), and
 * each slot written whole from its frame: a memcpy for u8 frames of one
 * channel, otherwise a loop over the frame's bytes that the compiler
 * vectorizes (c > 1: the frame's h x w x c bytes to c planes of h x w); an
 * f32 value is the reference's (float)v / 255.0f, the same division. Batches
 * of AG__FRAMES_SPLIT_BYTES of stacks or more are split over the helper
 * threads, a part of the 2B stacks each, each part run in the caller's
 * floating-point mode (its MXCSR on x86, its rounding direction elsewhere):
 * the same bits on every thread. */
#define AG__FRAMES_SPLIT_BYTES ((size_t)64 << 10)

typedef struct frames_job {
  const ag__frame_stack_args *a;
  ag__frames_ring g;
  int64_t per; /* stacks a part */
  unsigned fp; /* the caller's floating-point mode */
} frames_job;

/* One slot of a stack, at out, from frame f (h*w*c bytes, c fastest). */
static void frame_slot(const ag__frame_stack_args *a, const uint8_t *restrict f, void *out) {
  const int64_t hw = a->h * a->w, c = a->c;
  if (a->out_dtype == AG_U8) {
    uint8_t *restrict o = out;
    if (c == 1)
      memcpy(o, f, (size_t)hw);
    else
      for (int64_t ch = 0; ch < c; ch++)
        for (int64_t p = 0; p < hw; p++) o[ch * hw + p] = f[p * c + ch];
    return;
  }
  float *restrict o = out;
  if (c == 1)
    for (int64_t p = 0; p < hw; p++) o[p] = (float)f[p] / 255.0f;
  else
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t p = 0; p < hw; p++) o[ch * hw + p] = (float)f[p * c + ch] / 255.0f;
}

/* Stacks [s0, s1) of the 2B: obs of transition s (s < B), else next_obs of s - B. */
static void frame_stacks(const frames_job *jb, int64_t s0, int64_t s1) {
  const ag__frame_stack_args *a = jb->a;
  const int64_t hwc = a->h * a->w * a->c, D = (int64_t)a->stack * hwc;
  const size_t es = a->out_dtype == AG_U8 ? 1 : sizeof(float);
  int64_t src[AG__FRAMES_MAX_STACK];
  for (int64_t s = s0; s < s1; s++) {
    const int next = s >= a->B;
    const int64_t j = next ? s - a->B : s;
    ag__frames_walk(&jb->g, next ? ag__frames_step(&jb->g, a->cols[j], 1) : a->cols[j], src);
    char *out = (char *)(next ? a->next_obs : a->obs) + (size_t)(j * D) * es;
    for (int i = 0; i < a->stack; i++)
      frame_slot(a, a->frames + (size_t)src[i] * (size_t)(hwc + 1), out + (size_t)(i * hwc) * es);
  }
}

static void frames_task(void *arg, int i) {
  const frames_job *jb = arg;
  const int64_t s0 = (int64_t)i * jb->per, n = 2 * jb->a->B, s1 = s0 + jb->per < n ? s0 + jb->per : n;
  const unsigned mine = ag__cpu_fp_mode();
  if (mine != jb->fp) ag__cpu_fp_set(jb->fp);
  if (s0 < s1) frame_stacks(jb, s0, s1);
  if (mine != jb->fp) ag__cpu_fp_set(mine);
}

static ag_status fast_frame_stack(const void *args) {
  const ag__frame_stack_args *a = args;
  frames_job jb = {a, {0}, 0, ag__cpu_fp_mode()};
  ag__frames_ring_of(a, &jb.g);
  ag__cpu_frame_columns(a, &jb.g);
  const int64_t n = 2 * a->B;
  const size_t bytes = (size_t)n * (size_t)(a->stack * a->h * a->w * a->c) * (a->out_dtype == AG_U8 ? 1 : 4);
  int64_t parts = 1;
  if (bytes >= AG__FRAMES_SPLIT_BYTES && ag__cpu_gather_threads != 1) {
    parts = ag__pool_threads();
    if (ag__cpu_gather_threads > 1 && parts > ag__cpu_gather_threads) parts = ag__cpu_gather_threads;
    if (parts > n) parts = n;
  }
  jb.per = (n + parts - 1) / parts;
  if (parts > 1)
    ag__pool_run((int)parts, frames_task, &jb);
  else
    frame_stacks(&jb, 0, n);
  return AG_OK;
}

/* ---- the tables ---- */

const ag__cpu_kernel_fn ag__cpu_fast_kernels[AG__K_COUNT] = {
    [AG__K_GATHER] = fast_gather,
    [AG__K_MAP] = fast_map,
    [AG__K_MAP2] = fast_map2,
    [AG__K_COPY] = fast_copy,
    [AG__K_RANDINT] = fast_randint,
    [AG__K_PER_SET] = fast_per_set,
    [AG__K_PER_SAMPLE] = fast_per_sample,
    [AG__K_GATHER_FIELDS] = fast_gather_fields,
    [AG__K_SCATTER_FIELDS] = fast_scatter_fields,
    [AG__K_CONV2D] = ag__cpu_fast_conv2d,
    [AG__K_FRAME_STACK] = fast_frame_stack,
    [AG__K_ACGRAD] = ag__cpu_fast_acgrad,
};

#define DISPATCH(name, id)                                                                 \
  ag_status ag__cpu_run_##name(const void *args) {                                         \
    return ag__cpu_reference_forced() ? ag__cpu_ref_kernels[id](args) : fast_##name(args); \
  }
DISPATCH(gather, AG__K_GATHER)
DISPATCH(map, AG__K_MAP)
DISPATCH(map2, AG__K_MAP2)
DISPATCH(copy, AG__K_COPY)
DISPATCH(randint, AG__K_RANDINT)
DISPATCH(per_set, AG__K_PER_SET)
DISPATCH(per_sample, AG__K_PER_SAMPLE)
DISPATCH(gather_fields, AG__K_GATHER_FIELDS)
DISPATCH(scatter_fields, AG__K_SCATTER_FIELDS)
DISPATCH(frame_stack, AG__K_FRAME_STACK)
#undef DISPATCH

ag_status ag__cpu_run_conv2d(const void *args) {
  return ag__cpu_reference_forced() ? ag__cpu_ref_kernels[AG__K_CONV2D](args) : ag__cpu_fast_conv2d(args);
}
