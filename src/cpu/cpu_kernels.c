/* cpu_kernels.c — the reference implementation of every kernel (kernels.h).
 *
 * Plain loops over column-major strided matrices, except the matrix product,
 * which is CBLAS (OpenBLAS). Written for clarity first: each CUDA kernel is
 * tested against these functions, and the CPU backend runs them as they are.
 */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "core/internal.h"
#include "core/kernels.h"
#include "core/philox.h"
#include "core/scalar_ops.h"
#include "cpu/cpu_internal.h"

static inline float at(const ag__mat *m, int64_t r, int64_t c) { return ag__mat_at(*m, r, c); }

static inline float *out_at(const ag__mat *m, int64_t r, int64_t c) { return &m->p[c * m->ld + r]; }

static inline void put(const ag__mat *m, int64_t r, int64_t c, float v, int accumulate) {
  float *o = out_at(m, r, c);
  *o = accumulate ? *o + v : v;
}

static ag_status k_gather(const void *args) {
  const ag__gather_args *a = args;
  for (int64_t j = 0; j < a->n; j++) {
    int64_t c = ag__index_at(a->idx, a->idx_dtype, j);
    c = c < 0 ? 0 : (c >= a->capacity ? a->capacity - 1 : c); /* S13 */
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

static ag_status k_map(const void *args) {
  const ag__map_args *a = args;
  for (int64_t c = 0; c < a->out.cols; c++)
    for (int64_t r = 0; r < a->out.rows; r++)
      put(&a->out, r, c, ag__map_f(a->op, at(&a->x, r, c), a->p0, a->p1), a->accumulate);
  return AG_OK;
}

static ag_status k_map2(const void *args) {
  const ag__map2_args *a = args;
  for (int64_t c = 0; c < a->out.cols; c++)
    for (int64_t r = 0; r < a->out.rows; r++)
      put(&a->out, r, c, a->alpha * ag__map2_f(a->op, at(&a->a, r, c), at(&a->b, r, c), a->p0), a->accumulate);
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

static ag_status k_adam(const void *args) {
  const ag__adam_args *a = args;
  const float bc1 = a->state[AG__OPT_BC1], bc2 = a->state[AG__OPT_BC2], coef = a->state[AG__OPT_COEF];
  for (int k = 0; k < a->count; k++) {
    const ag__mt_entry *e = &a->t[k];
    for (int64_t i = 0; i < e->n; i++) {
      float g = coef * e->g[i] + a->wd * e->p[i];
      if (a->sgd) {
        e->p[i] -= a->lr * g;
        continue;
      }
      float m = a->b1 * e->m[i] + (1.0f - a->b1) * g;
      float v = a->b2 * e->v[i] + (1.0f - a->b2) * g * g;
      e->m[i] = m;
      e->v[i] = v;
      e->p[i] -= a->lr * (m / bc1) / (sqrtf(v / bc2) + a->eps);
    }
  }
  return AG_OK;
}

static ag_status k_axpby(const void *args) {
  const ag__axpby_args *a = args;
  for (int k = 0; k < a->count; k++)
    for (int64_t i = 0; i < a->t[k].n; i++) a->t[k].p[i] = a->a * a->t[k].g[i] + a->b * a->t[k].p[i];
  return AG_OK;
}

static ag_status k_randint(const void *args) {
  const ag__randint_args *a = args;
  int64_t bound = a->bound_dev ? *a->bound_dev : a->bound_const;
  uint64_t base = *a->counter;
  for (int64_t i = 0; i < a->n; i++) {
    int64_t v = bound < 1 ? 0 : (int64_t)ag__scale_u64(ag__philox_u64(a->seed, base + (uint64_t)i), (uint64_t)bound);
    put_arg(a->out, a->out_dtype, i, v);
  }
  *a->counter = base + (uint64_t)a->n;
  return AG_OK;
}

const ag__cpu_kernel_fn ag__cpu_kernels[AG__K_COUNT] = {
    [AG__K_GATHER] = k_gather,   [AG__K_GEMM] = k_gemm,         [AG__K_MAP] = k_map,
    [AG__K_MAP2] = k_map2,       [AG__K_REDUCE] = k_reduce,     [AG__K_PICK] = k_pick,
    [AG__K_PICK_BWD] = k_pick_bwd, [AG__K_FILL] = k_fill,       [AG__K_COPY] = k_copy,
    [AG__K_ADAM_PREP] = k_adam_prep, [AG__K_ADAM] = k_adam,     [AG__K_SUMSQ] = k_sumsq,
    [AG__K_AXPBY] = k_axpby,     [AG__K_RANDINT] = k_randint,
};
