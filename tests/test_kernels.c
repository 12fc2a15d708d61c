/* test_kernels.c — every kernel of base/kernels.h on the backend under test
 * against the plain CPU reference, from one table of cases.
 *
 * A case lays out its operands in one arena of bytes: the same inputs go to
 * the backend (in device memory, the arguments pointing there) and to the
 * reference (in host memory); the kernel runs on both, and every output
 * region is compared within the kernel's tolerance (0: bit for bit). Shapes
 * include edge sizes: one element, odd sizes, sizes past a block, views
 * with gaps (ld > rows), broadcast operands, indices outside the table
 * (clamped or skipped). A new backend is covered from its first commit:
 * each kernel it reports unsupported (supports()) is skipped and counted.
 * The ops' gradients against finite differences are in test_graph.c. */
#include <math.h>

#include "agt.h"
#include "base/per_tree.h"
#include "core/internal.h"
#include "cpu/cpu_internal.h"

/* ---- arenas ---- */

enum { INIT_ZERO = 0, INIT_UNIFORM, INIT_INDEX, INIT_POSITIVE, INIT_BITS };
#define DT_F64 ((ag_dtype)100) /* the sum trees' doubles (no ag_dtype of their own) */

typedef struct region {
  size_t off, count;
  ag_dtype dt;
  int init;      /* INIT_* */
  double lo, hi; /* uniform / index range */
  int out;       /* compared after the run */
  double tol;    /* relative tolerance of an output (0: exact) */
} region;

typedef struct layout {
  unsigned char *base; /* NULL while planning */
  region r[256];
  int n;
  size_t used;
} layout;

static size_t elem_size(ag_dtype dt) { return dt == DT_F64 ? 8 : ag_dtype_size(dt); }

/* A region of count values of dt; returns its address under L->base. */
static void *reg(layout *L, size_t count, ag_dtype dt, int init, double lo, double hi, int out, double tol) {
  assert_true(L->n < 256);
  size_t off = (L->used + 255) & ~(size_t)255;
  region *r = &L->r[L->n++];
  r->off = off, r->count = count, r->dt = dt, r->init = init, r->lo = lo, r->hi = hi, r->out = out,
  r->tol = tol;
  L->used = off + (count ? count : 1) * elem_size(dt);
  return L->base ? L->base + off : NULL;
}

static ag__mat mat(layout *L, int64_t rows, int64_t cols, int64_t ld, int init, int out, double tol) {
  ag__mat m = {NULL, rows, cols, ld};
  m.p = reg(L, (size_t)(ld * (cols - 1) + rows), AG_F32, init, -2, 2, out, tol);
  return m;
}

/* ---- the cases ---- */

typedef struct kcase {
  const char *name;
  ag__kernel_id id;
  int64_t p[8]; /* the case's sizes and switches */
  /* fills the arguments under L->base, registering the regions in order */
  size_t (*build)(const struct kcase *c, layout *L, void *args);
  /* optional: makes the host inputs consistent (a sum tree) before the run */
  void (*prepare)(const struct kcase *c, layout *L, void *args);
} kcase;

static size_t b_gather(const kcase *c, layout *L, void *out) {
  ag__gather_args *a = out;
  const int64_t rows = c->p[0], cap = c->p[1], n = c->p[2];
  const ag_dtype st = (ag_dtype)c->p[3], it = (ag_dtype)c->p[4];
  a->src_dtype = st, a->rows = rows, a->capacity = cap, a->idx_dtype = it, a->n = n;
  a->scale = c->p[5] ? 0.5f : 1.0f;
  a->src =
      reg(L, (size_t)(rows * cap), st, st == AG_U8 || st == AG_I32 ? INIT_INDEX : INIT_UNIFORM, 0, 200, 0, 0);
  a->idx = reg(L, (size_t)n, it, INIT_INDEX, -3, (double)cap + 3, 0, 0); /* some outside: clamped */
  a->dst = reg(L, (size_t)(rows * n), AG_F32, INIT_ZERO, 0, 0, 1, 0);
  return sizeof *a;
}

static size_t b_gemm(const kcase *c, layout *L, void *out) {
  ag__gemm_args *a = out;
  a->trans_a = (int)c->p[0], a->trans_b = (int)c->p[1], a->m = c->p[2], a->n = c->p[3], a->k = c->p[4];
  a->alpha = 0.75f, a->beta = c->p[5] ? 0.5f : 0.0f;
  const int64_t ar = a->trans_a ? a->k : a->m, ac = a->trans_a ? a->m : a->k;
  const int64_t br = a->trans_b ? a->n : a->k, bc = a->trans_b ? a->k : a->n;
  a->lda = ar + c->p[6], a->ldb = br, a->ldc = a->m + c->p[6];
  a->a = reg(L, (size_t)(a->lda * ac), AG_F32, INIT_UNIFORM, -1, 1, 0, 0);
  a->b = reg(L, (size_t)(a->ldb * bc), AG_F32, INIT_UNIFORM, -1, 1, 0, 0);
  a->c = reg(L, (size_t)(a->ldc * a->n), AG_F32, INIT_UNIFORM, -1, 1, 1, 1e-5);
  return sizeof *a;
}

/* p: op, rows, cols, x rows, x cols, ld extra, accumulate */
static size_t b_map(const kcase *c, layout *L, void *out) {
  ag__map_args *a = out;
  a->op = (ag__map_op)c->p[0];
  a->p0 = 0.7f, a->p1 = -0.3f;
  if (a->op == AG__MAP_CLAMP) a->p0 = -0.3f, a->p1 = 0.7f; /* lo, hi */
  const int pos = a->op == AG__MAP_LOG;
  a->x = mat(L, c->p[3], c->p[4], c->p[3] + c->p[5], pos ? INIT_POSITIVE : INIT_UNIFORM, 0, 0);
  a->out = mat(L, c->p[1], c->p[2], c->p[1] + c->p[5], INIT_UNIFORM, 1, 2e-6);
  a->accumulate = (int)c->p[6];
  return sizeof *a;
}

/* p: op, rows, cols, a rows, a cols, b rows, b cols, accumulate */
static size_t b_map2(const kcase *c, layout *L, void *out) {
  ag__map2_args *a = out;
  a->op = (ag__map2_op)c->p[0];
  a->alpha = 1.25f, a->p0 = 0.8f, a->p1 = 1.3f;
  a->a = mat(L, c->p[3], c->p[4], c->p[3], INIT_UNIFORM, 0, 0);
  a->b = mat(L, c->p[5], c->p[6], c->p[5], a->op == AG__MAP2_DIV ? INIT_POSITIVE : INIT_UNIFORM, 0, 0);
  a->out = mat(L, c->p[1], c->p[2], c->p[1], INIT_UNIFORM, 1, 2e-6);
  a->accumulate = (int)c->p[7];
  return sizeof *a;
}

/* p: op, axis, rows, cols, ld extra, with arg (dtype or -1), accumulate */
static size_t b_reduce(const kcase *c, layout *L, void *out) {
  ag__reduce_args *a = out;
  a->op = (ag__reduce_op)c->p[0], a->axis = (int)c->p[1], a->scale = 0.5f;
  const int64_t rows = c->p[2], cols = c->p[3];
  a->x = mat(L, rows, cols, rows + c->p[4], INIT_UNIFORM, 0, 0);
  const int64_t orows = a->axis == 1 ? rows : 1, ocols = a->axis == 0 ? cols : 1;
  a->out = mat(L, orows, ocols, orows, INIT_UNIFORM, 1, a->op == AG__RED_SUM ? 1e-5 : 0);
  a->accumulate = (int)c->p[6];
  if (c->p[5] >= 0) {
    a->arg_dtype = (ag_dtype)c->p[5];
    a->arg = reg(L, (size_t)(orows * ocols), a->arg_dtype, INIT_ZERO, 0, 0, 1, 0);
  }
  return sizeof *a;
}

/* p: axis, rows, cols, idx dtype, accumulate */
static size_t b_pick(const kcase *c, layout *L, void *out) {
  ag__pick_args *a = out;
  a->axis = (int)c->p[0];
  const int64_t rows = c->p[1], cols = c->p[2], n = a->axis == 0 ? cols : rows,
                ext = a->axis == 0 ? rows : cols;
  a->x = mat(L, rows, cols, rows, INIT_UNIFORM, 0, 0);
  a->idx_dtype = (ag_dtype)c->p[3], a->idx_stride = 1;
  a->idx = reg(L, (size_t)n, a->idx_dtype, INIT_INDEX, -2, (double)ext + 2, 0, 0);
  a->out = mat(L, a->axis == 0 ? 1 : n, a->axis == 0 ? n : 1, a->axis == 0 ? 1 : n, INIT_UNIFORM, 1, 0);
  a->accumulate = (int)c->p[4];
  return sizeof *a;
}

static size_t b_pick_bwd(const kcase *c, layout *L, void *out) {
  ag__pick_bwd_args *a = out;
  a->axis = (int)c->p[0];
  const int64_t rows = c->p[1], cols = c->p[2], n = a->axis == 0 ? cols : rows,
                ext = a->axis == 0 ? rows : cols;
  a->g = mat(L, a->axis == 0 ? 1 : n, a->axis == 0 ? n : 1, a->axis == 0 ? 1 : n, INIT_UNIFORM, 0, 0);
  a->idx_dtype = (ag_dtype)c->p[3], a->idx_stride = 1;
  a->idx = reg(L, (size_t)n, a->idx_dtype, INIT_INDEX, -2, (double)ext + 2, 0, 0);
  a->dx = mat(L, rows, cols, rows, INIT_UNIFORM, 1, 0);
  a->accumulate = (int)c->p[4];
  return sizeof *a;
}

static size_t b_fill(const kcase *c, layout *L, void *out) {
  ag__fill_args *a = out;
  a->out = mat(L, c->p[0], c->p[1], c->p[0] + c->p[2], INIT_UNIFORM, 1, 0);
  a->value = -1.5f;
  return sizeof *a;
}

static size_t b_copy(const kcase *c, layout *L, void *out) {
  ag__copy_args *a = out;
  a->x = mat(L, c->p[0], c->p[1], c->p[0] + c->p[2], INIT_UNIFORM, 0, 0);
  a->out = mat(L, c->p[0], c->p[1], c->p[0] + c->p[3], INIT_UNIFORM, 1, 0);
  a->accumulate = (int)c->p[4];
  return sizeof *a;
}

/* p: rows, cols, src ld extra, dst ld extra, src dtype, dst dtype, lo, hi
 * (source values; past a target's range they saturate) */
static size_t b_convert(const kcase *c, layout *L, void *out) {
  ag__convert_args *a = out;
  a->rows = c->p[0], a->cols = c->p[1];
  a->src_ld = a->rows + c->p[2], a->dst_ld = a->rows + c->p[3];
  a->src_dtype = (ag_dtype)c->p[4], a->dst_dtype = (ag_dtype)c->p[5];
  const int int_src = a->src_dtype == AG_U8 || a->src_dtype == AG_I32 || a->src_dtype == AG_I64;
  a->src = reg(L, (size_t)(a->src_ld * (a->cols - 1) + a->rows), a->src_dtype,
               int_src ? INIT_INDEX : INIT_UNIFORM, (double)c->p[6], (double)c->p[7], 0, 0);
  a->dst = reg(L, (size_t)(a->dst_ld * (a->cols - 1) + a->rows), a->dst_dtype, INIT_INDEX, 0, 100, 1, 0);
  return sizeof *a;
}

static size_t b_set_i64(const kcase *c, layout *L, void *out) {
  ag__set_i64_args *a = out;
  a->dst = reg(L, 1, AG_I64, INIT_INDEX, 0, 1000, 1, 0);
  a->value = c->p[0];
  return sizeof *a;
}

/* The multi-tensor kernels: p[0] tensors of sizes 1 + 37 i (p[1] adds a
 * large one), state, scratch. p[2]: sgd, p[3]: prep, p[4]: max_norm on. */
static size_t mt(const kcase *c, layout *L, ag__mt_entry *t, int *count, int with_m) {
  const int n = (int)c->p[0];
  for (int i = 0; i < n; i++) {
    int64_t len = 1 + 37 * i + (i == n - 1 && c->p[1] ? 70000 : 0);
    t[i].n = len;
    t[i].p = reg(L, (size_t)len, AG_F32, INIT_UNIFORM, -1, 1, 1, 2e-6);
    t[i].g = reg(L, (size_t)len, AG_F32, INIT_UNIFORM, -1, 1, 0, 0);
    t[i].m = with_m ? reg(L, (size_t)len, AG_F32, INIT_UNIFORM, -0.1, 0.1, 1, 2e-6) : NULL;
    t[i].v = with_m ? reg(L, (size_t)len, AG_F32, INIT_POSITIVE, 0, 0.01, 1, 2e-6) : NULL;
  }
  *count = n;
  return 0;
}

static float *opt_state(layout *L, int out) {
  /* step 3, sumsq 2.5, bias corrections and coefficient of step 3 */
  return reg(L, AG__OPT_STATE_N, AG_F32, INIT_BITS, 0, 0, out, 2e-6);
}

static size_t b_adam(const kcase *c, layout *L, void *out) {
  ag__adam_args *a = out;
  a->sgd = (int)c->p[2], a->prep = (int)c->p[3];
  a->lr = 1e-2f, a->b1 = 0.9f, a->b2 = 0.999f, a->eps = 1e-8f, a->wd = c->p[5] ? 0.01f : 0.0f;
  a->max_norm = c->p[4] ? 1.0f : 0.0f;
  mt(c, L, a->t, &a->count, 1);
  a->state = opt_state(L, 1);
  size_t sc = ag__kernel_scratch_max(AG__K_ADAM, a, sizeof *a);
  a->scratch = sc ? reg(L, (sc + 3) / 4, AG_F32, INIT_ZERO, 0, 0, 1, 0) : NULL;
  return sizeof *a;
}

static size_t b_sumsq(const kcase *c, layout *L, void *out) {
  ag__adam_args *a = out;
  mt(c, L, a->t, &a->count, 0);
  for (int i = 0; i < a->count; i++) L->r[L->n - 2 * (a->count - i)].out = 0; /* p is read only */
  a->state = opt_state(L, 1);
  L->r[L->n - 1].tol = 1e-5;
  return sizeof *a;
}

static size_t b_adam_prep(const kcase *c, layout *L, void *out) {
  ag__adam_args *a = out;
  (void)c;
  a->b1 = 0.9f, a->b2 = 0.999f, a->max_norm = 1.0f;
  a->state = opt_state(L, 1);
  return sizeof *a;
}

static size_t b_axpby(const kcase *c, layout *L, void *out) {
  ag__axpby_args *a = out;
  ag__mt_entry t[AG__MT_MAX];
  int n;
  mt(c, L, t, &n, 0);
  for (int i = 0; i < n; i++) a->t[i] = t[i];
  a->count = n, a->a = 0.25f, a->b = c->p[2] ? 0.0f : 0.75f;
  return sizeof *a;
}

/* p: n, bound (0: on the device), dtype */
static size_t b_randint(const kcase *c, layout *L, void *out) {
  ag__randint_args *a = out;
  a->seed = 0x1234abcdull, a->n = c->p[0], a->out_dtype = (ag_dtype)c->p[2];
  a->counter = reg(L, 1, AG_I64, INIT_INDEX, 0, 1000, 1, 0);
  a->bound_const = c->p[1];
  if (!c->p[1]) a->bound_dev = reg(L, 1, AG_I64, INIT_INDEX, 1, 5000, 0, 0);
  a->out = reg(L, (size_t)a->n, a->out_dtype, INIT_ZERO, 0, 0, 1, 0);
  return sizeof *a;
}

/* p: A, B, with idx (dtype or -1) */
static size_t b_td(const kcase *c, layout *L, void *out) {
  ag__td_args *a = out;
  const int64_t A = c->p[0], B = c->p[1];
  a->q = mat(L, A, B, A, INIT_UNIFORM, 0, 0);
  if (c->p[2] >= 0) {
    a->idx_dtype = (ag_dtype)c->p[2], a->idx_stride = 1;
    a->idx = reg(L, (size_t)B, a->idx_dtype, INIT_INDEX, -1, (double)A + 1, 0, 0);
  }
  a->reward = mat(L, 1, B, 1, INIT_UNIFORM, 0, 0);
  a->done = mat(L, 1, B, 1, INIT_INDEX, 0, 0);
  L->r[L->n - 1].lo = 0, L->r[L->n - 1].hi = 2;
  a->gamma = 0.97f;
  a->out = mat(L, 1, B, 1, INIT_ZERO, 1, 1e-6);
  return sizeof *a;
}

/* p: kind, rows, cols, with dpred */
static size_t b_loss(const kcase *c, layout *L, void *out) {
  ag__loss_args *a = out;
  a->kind = (int)c->p[0], a->delta = 0.6f;
  a->pred = mat(L, c->p[1], c->p[2], c->p[1], INIT_UNIFORM, 0, 0);
  a->target = mat(L, c->p[1], c->p[2], c->p[1], INIT_UNIFORM, 0, 0);
  a->out = reg(L, 1, AG_F32, INIT_ZERO, 0, 0, 1, 1e-5);
  if (c->p[3]) a->dpred = mat(L, c->p[1], c->p[2], c->p[1], INIT_ZERO, 1, 1e-6);
  return sizeof *a;
}

/* the sum-tree kernels: p[0] columns, p[1] batch, p[2] idx dtype; PER_FILL
 * p[1] pos, p[2] k; p[3] 1: a mask of the columns (about a third 0) */
static int depth_of(int64_t cols) {
  int d = 1;
  for (int64_t l = AG__PER_FAN; l < cols; l *= AG__PER_FAN) d++;
  return d;
}

static size_t b_per_fill(const kcase *c, layout *L, void *out) {
  ag__per_fill_args *a = out;
  a->depth = depth_of(c->p[0]), a->alpha = 0.6f;
  a->tree = reg(L, (size_t)ag__per_offset(a->depth) + 1, DT_F64, INIT_ZERO, 0, 0, 1, 1e-12);
  a->state = reg(L, 1, AG_F32, INIT_POSITIVE, 0.5, 3, 0, 0);
  a->pos = c->p[1], a->k = c->p[2];
  if (c->p[3]) a->mask = reg(L, (size_t)c->p[0], AG_U8, INIT_INDEX, 0, 3, 0, 0);
  return sizeof *a;
}

static size_t b_per_set(const kcase *c, layout *L, void *out) {
  ag__per_set_args *a = out;
  a->depth = depth_of(c->p[0]), a->alpha = 0.6f, a->cols = c->p[0];
  a->tree = reg(L, (size_t)ag__per_offset(a->depth) + 1, DT_F64, INIT_ZERO, 0, 0, 1, 1e-12);
  a->state = reg(L, 1, AG_F32, INIT_POSITIVE, 0.5, 3, 1, 0);
  a->n = c->p[1], a->idx_dtype = (ag_dtype)c->p[2];
  a->idx = reg(L, (size_t)a->n, a->idx_dtype, INIT_INDEX, -2, (double)c->p[0] + 2, 0, 0); /* some skipped */
  a->prio = reg(L, (size_t)a->n, AG_F32, INIT_POSITIVE, 0, 4, 0, 0);
  a->prio_stride = 1;
  if (c->p[3]) a->mask = reg(L, (size_t)c->p[0], AG_U8, INIT_INDEX, 0, 3, 0, 0);
  return sizeof *a;
}

/* A tree of cols columns with random priorities, made by the reference. */
static void per_tree_of(layout *L, double *tree, int depth, int64_t cols, float *state) {
  float *prio = malloc((size_t)cols * sizeof *prio);
  int64_t *idx = malloc((size_t)cols * sizeof *idx);
  agt_rng g = {77};
  for (int64_t j = 0; j < cols; j++) idx[j] = j, prio[j] = agt_uniform(&g, 0.01f, 5);
  ag__per_set_args s = {tree, depth, 0.6f, state, idx, AG_I64, cols, prio, 1, cols, NULL};
  agt_ok(ag__cpu_ref_kernels[AG__K_PER_SET](&s));
  free(prio);
  free(idx);
  (void)L;
}

/* A masking PER_FILL needs leaves to zero: the tree of random priorities. */
static void prep_per_fill(const kcase *c, layout *L, void *args) {
  ag__per_fill_args *a = args;
  per_tree_of(L, a->tree, a->depth, c->p[0], (float *)(L->base + L->r[1].off));
}

static size_t b_per_sample(const kcase *c, layout *L, void *out) {
  ag__per_sample_args *a = out;
  a->depth = depth_of(c->p[0]), a->beta = 0.4f, a->seed = 99, a->B = c->p[1];
  a->tree = reg(L, (size_t)ag__per_offset(a->depth) + 1, DT_F64, INIT_ZERO, 0, 0, 0, 0);
  reg(L, 1, AG_F32, INIT_ZERO, 0, 0, 0, 0); /* the state the prepare step needs */
  a->counter = reg(L, 1, AG_I64, INIT_INDEX, 0, 1000, 1, 0);
  a->size_dev = reg(L, 1, AG_I64, INIT_ZERO, 0, 0, 0, 0);
  a->idx = reg(L, (size_t)a->B, AG_I32, INIT_ZERO, 0, 0, 1, 0);
  a->w = reg(L, (size_t)a->B, AG_F32, INIT_ZERO, 0, 0, 1, 1e-5);
  return sizeof *a;
}

static void prep_per_sample(const kcase *c, layout *L, void *args) {
  ag__per_sample_args *a = args;
  per_tree_of(L, (double *)a->tree, a->depth, c->p[0], (float *)(L->base + L->r[1].off));
  *(int64_t *)a->size_dev = c->p[0];
}

/* QGRAD: p[0] layers, p[1] width, p[2] actions, p[3] B, p[4] double, p[5] huber, p[6] drawn */
static size_t b_qgrad(const kcase *c, layout *L, void *out) {
  ag__qgrad_args *a = out;
  const int64_t obs = 5, rows = 2 * obs + 3, cap = 300;
  a->src.rows = rows, a->src.capacity = cap, a->src.scale = 1.0f, a->src.B = c->p[3];
  a->src.obs_row = 0, a->src.act_row = obs, a->src.rew_row = obs + 1, a->src.next_row = obs + 2,
  a->src.done_row = 2 * obs + 2;
  a->src.table = reg(L, (size_t)(rows * cap), AG_F32, INIT_UNIFORM, -1, 1, 0, 0);
  a->L = (int)c->p[0];
  a->sizes[0] = obs;
  for (int i = 1; i < a->L; i++) a->sizes[i] = c->p[1];
  a->sizes[a->L] = c->p[2];
  for (int i = 0; i < a->L; i++) {
    const size_t wn = (size_t)(a->sizes[i] * a->sizes[i + 1]), bn = (size_t)a->sizes[i + 1];
    a->w[i] = reg(L, wn, AG_F32, INIT_UNIFORM, -0.5, 0.5, 0, 0);
    a->b[i] = reg(L, bn, AG_F32, INIT_UNIFORM, -0.5, 0.5, 0, 0);
    a->tw[i] = reg(L, wn, AG_F32, INIT_UNIFORM, -0.5, 0.5, 0, 0);
    a->tb[i] = reg(L, bn, AG_F32, INIT_UNIFORM, -0.5, 0.5, 0, 0);
    a->gw[i] = reg(L, wn, AG_F32, INIT_ZERO, 0, 0, 1, 2e-4);
    a->gb[i] = reg(L, bn, AG_F32, INIT_ZERO, 0, 0, 1, 2e-4);
  }
  a->src.seed = 5;
  if (c->p[6]) {
    a->src.counter = reg(L, 1, AG_I64, INIT_INDEX, 0, 100, 1, 0);
    a->src.size_dev = reg(L, 1, AG_I64, INIT_INDEX, 1, (double)cap, 0, 0);
  } else {
    a->src.idx = reg(L, (size_t)a->src.B, AG_I32, INIT_INDEX, -1, (double)cap + 1, 0, 0);
  }
  a->gamma = 0.99f, a->double_dqn = (int)c->p[4], a->kind = (int)c->p[5], a->delta = 1.0f;
  a->loss = reg(L, 1, AG_F32, INIT_ZERO, 0, 0, 1, 1e-5);
  a->ws = reg(L, (ag__kernel_scratch_max(AG__K_QGRAD, a, sizeof *a) + 3) / 4, AG_F32, INIT_ZERO, 0, 0, 0, 0);
  return sizeof *a;
}

/* the action row must hold whole numbers in 0..actions-1, terminated 0 / 1 */
static void prep_qgrad(const kcase *c, layout *L, void *args) {
  ag__qgrad_args *a = args;
  float *t = (float *)a->src.table;
  agt_rng g = {31};
  for (int64_t j = 0; j < a->src.capacity; j++) {
    t[j * a->src.rows + a->src.act_row] = (float)agt_below(&g, c->p[2]);
    t[j * a->src.rows + a->src.done_row] = (float)(agt_below(&g, 4) == 0);
  }
}

/* ACGRAD: p[0] td3, p[1] layers, p[2] width, p[3] actions, p[4] B, p[5] actor step, p[6] drawn, p[7]
 * n-step; 3 observations; the optimizers' states after 3 steps and moments not 0, so that a step moves
 * every value by an amount its gradient's rounding barely changes */
static float *ac_reg(layout *L, size_t n, int out, double tol, double lo, double hi) {
  return reg(L, n, AG_F32, out && !lo && !hi ? INIT_ZERO : INIT_UNIFORM, lo, hi, out, tol);
}

static size_t b_acgrad(const kcase *c, layout *L, void *out) {
  ag__acgrad_args *a = out;
  const int64_t S = 3, A = c->p[3], rows = 2 * S + A + 2, cap = 300;
  a->src.rows = rows, a->src.capacity = cap, a->src.scale = 1.0f, a->src.B = c->p[4];
  a->src.obs_row = 0, a->src.act_row = S, a->src.rew_row = S + A, a->src.next_row = S + A + 1,
  a->src.done_row = 2 * S + A + 1;
  a->src.table = reg(L, (size_t)(rows * cap), AG_F32, INIT_UNIFORM, -1, 1, 0, 0);
  a->td3 = (int)c->p[0], a->actor = (int)c->p[5], a->targets = a->td3 ? a->actor : 1, a->autotune = 1;
  a->L = (int)c->p[1], a->S = S, a->A = A;
  for (int i = 0; i < a->L - 1; i++) a->hidden[i] = c->p[2] + 3 * i;
  a->src.seed = 9;
  a->src.counter = reg(L, 1, AG_I64, INIT_INDEX, 0, 100, 1, 0);
  if (c->p[6]) {
    a->src.size_dev = reg(L, 1, AG_I64, INIT_INDEX, 1, (double)cap, 0, 0);
  } else {
    a->src.idx = reg(L, (size_t)a->src.B, AG_I32, INIT_INDEX, -1, (double)cap + 1, 0, 0);
    if (c->p[7]) {
      a->src.ret = reg(L, (size_t)a->src.B, AG_F32, INIT_UNIFORM, -3, 1, 0, 0);
      a->src.disc = reg(L, (size_t)a->src.B, AG_F32, INIT_UNIFORM, 0, 0.97, 0, 0);
      a->src.last = reg(L, (size_t)a->src.B, AG_I64, INIT_INDEX, -1, (double)cap + 1, 0, 0);
    }
  }
  const int64_t nA = a->td3 ? A : 2 * A;
  ag__ac_net *nets[6] = {&a->pi, &a->pi_t, &a->q[0], &a->q[1], &a->qt[0], &a->qt[1]};
  for (int k = 0; k < 6; k++) {
    const int64_t in = k < 2 ? S : S + A, outn = k < 2 ? nA : 1;
    const int grads = k == 0 || k == 2 || k == 3;
    for (int i = 0; i < a->L; i++) {
      const int64_t n = i < a->L - 1 ? a->hidden[i] : outn, K = i ? a->hidden[i - 1] : in;
      nets[k]->w[i] = ac_reg(L, (size_t)(n * K), 1, 2e-5, -0.5, 0.5);
      nets[k]->b[i] = ac_reg(L, (size_t)n, 1, 2e-5, -0.5, 0.5);
      if (grads)
        nets[k]->gw[i] = ac_reg(L, (size_t)(n * K), 1, 1e-4, 0, 0),
        nets[k]->gb[i] = ac_reg(L, (size_t)n, 1, 1e-4, 0, 0);
    }
  }
  ag__ac_opt *opts[3] = {&a->opt_critic, &a->opt_actor, &a->opt_alpha};
  for (int o = 0; o < 3; o++) {
    ag__ac_opt *op = opts[o];
    op->lr = 1e-3f, op->b1 = 0.9f, op->b2 = 0.999f, op->eps = 1e-8f;
    op->state = reg(L, AG__OPT_STATE_N, AG_F32, INIT_BITS, 0, 0, 1, 1e-6);
    const int entries = o == 0 ? 4 * a->L : o == 1 ? 2 * a->L : 1;
    for (int e = 0; e < entries; e++) {
      const ag__ac_net *net = o == 0 ? nets[2 + e / (2 * a->L)] : &a->pi;
      const int li = (e % (2 * a->L)) / 2;
      const int64_t n = li < a->L - 1 ? a->hidden[li] : (o == 0 ? 1 : nA);
      const int64_t K = li ? a->hidden[li - 1] : (o == 0 ? S + A : S);
      const size_t cnt = o == 2 ? 1 : (size_t)(e % 2 ? n : n * K);
      (void)net;
      op->m[e] = ac_reg(L, cnt, 1, 1e-5, -0.01, 0.01);
      op->v[e] = reg(L, cnt, AG_F32, INIT_POSITIVE, 1e-5, 1e-3, 1, 1e-5);
    }
  }
  a->log_alpha = ac_reg(L, 1, 1, 1e-5, -1.0, 0.5);
  a->log_alpha_grad = ac_reg(L, 1, 1, 1e-4, 0, 0);
  a->gamma = 0.99f, a->tau = 0.05f, a->target_entropy = -(float)A, a->target_noise = 0.2f,
  a->noise_clip = 0.5f;
  a->closs = ac_reg(L, 1, 1, 1e-4, 0, 0);
  a->aloss = ac_reg(L, 1, 1, 1e-4, 0, 0);
  a->ws = reg(L, (ag__kernel_scratch_max(AG__K_ACGRAD, a, sizeof *a) + 3) / 4, AG_F32, INIT_ZERO, 0, 0, 0, 0);
  return sizeof *a;
}

/* terminated 0 / 1 */
static void prep_acgrad(const kcase *c, layout *L, void *args) {
  (void)c, (void)L;
  ag__acgrad_args *a = args;
  float *t = (float *)a->src.table;
  agt_rng g = {37};
  for (int64_t j = 0; j < a->src.capacity; j++)
    t[j * a->src.rows + a->src.done_row] = (float)(agt_below(&g, 4) == 0);
}

/* NSTEP: p[0] capacity, p[1] storage, p[2] size, p[3] position, p[4] B,
 * p[5] idx dtype, p[6] n, p[7] stride; rows: obs, reward, terminated,
 * truncated, next obs */
static size_t b_nstep(const kcase *c, layout *L, void *out) {
  ag__nstep_args *a = out;
  const int64_t cap = c->p[0];
  a->dtype = (ag_dtype)c->p[1], a->rows = 5, a->capacity = cap, a->scale = 1.0f;
  a->rew_row = 1, a->term_row = 2, a->trunc_row = 3;
  a->table =
      reg(L, (size_t)(a->rows * cap), a->dtype, a->dtype == AG_I32 ? INIT_INDEX : INIT_UNIFORM, -3, 3, 0, 0);
  a->size_dev = reg(L, 1, AG_I64, INIT_ZERO, 0, 0, 0, 0);
  a->pos_dev = reg(L, 1, AG_I64, INIT_ZERO, 0, 0, 0, 0);
  a->B = c->p[4], a->idx_dtype = (ag_dtype)c->p[5], a->idx_stride = 1;
  a->idx =
      reg(L, (size_t)a->B, a->idx_dtype, INIT_INDEX, -3, (double)cap + 3, 0, 0); /* some outside: clamped */
  a->n = (int)c->p[6], a->gamma = 0.9f, a->stride = c->p[7];
  a->ret = reg(L, (size_t)a->B, AG_F32, INIT_ZERO, 0, 0, 1, 0);
  a->discount = reg(L, (size_t)a->B, AG_F32, INIT_ZERO, 0, 0, 1, 0);
  a->last = reg(L, (size_t)a->B, AG_I64, INIT_ZERO, 0, 0, 1, 0);
  return sizeof *a;
}

/* p: n; the values and the counter compared bit for bit */
static size_t b_randn(const kcase *c, layout *L, void *out) {
  ag__randn_args *a = out;
  a->seed = 0x9e3779b97f4a7c15ull, a->n = c->p[0];
  a->counter = reg(L, 1, AG_I64, INIT_INDEX, 0, 1000, 1, 0);
  a->out = reg(L, (size_t)a->n, AG_F32, INIT_ZERO, 0, 0, 1, 0);
  return sizeof *a;
}

/* sparse flags (0 / 1), the ring's size and position */
static void prep_nstep(const kcase *c, layout *L, void *args) {
  ag__nstep_args *a = args;
  (void)L;
  agt_rng g = {41};
  for (int64_t j = 0; j < a->capacity; j++)
    for (int64_t row = a->term_row; row <= a->trunc_row; row++) {
      const int on = agt_below(&g, row == a->term_row ? 7 : 9) == 0;
      void *t = (void *)a->table;
      const int64_t e = j * a->rows + row;
      if (a->dtype == AG_I32)
        ((int32_t *)t)[e] = on;
      else if (a->dtype == AG_F16)
        ((uint16_t *)t)[e] = ag__f32_to_f16((float)on);
      else
        ((float *)t)[e] = (float)on;
    }
  *(int64_t *)a->size_dev = c->p[2];
  *(int64_t *)a->pos_dev = c->p[3];
}

/* ---- the replay fields' kernels: regions of any dtype ---- */

/* A destination (GATHER_FIELDS) or a source (SCATTER_FIELDS): first row
 * (or AG__GF_INDICES / AG__GF_WEIGHTS), width, dtype, ld - width. */
typedef struct fw_region {
  int64_t row0, width;
  ag_dtype dtype;
  int64_t gap;
} fw_region;

/* Sets of regions: 0, a batch of five fields (17, 6, 1, 17, 1 rows) as
 * f32 tensors, the indices and the weights; 1, every dtype, views with
 * gaps, a field twice; 2, three rows of integers (i32 storage beyond 2^24)
 * into integer and other dtypes. Weights are left out of a case without
 * them. */
static const fw_region fw_sets[3][10] = {
    {{0, 17, AG_F32, 0},
     {17, 6, AG_F32, 0},
     {23, 1, AG_F32, 0},
     {24, 17, AG_F32, 0},
     {41, 1, AG_F32, 0},
     {AG__GF_INDICES, 1, AG_I64, 0},
     {AG__GF_WEIGHTS, 1, AG_F32, 0},
     {0, 0, AG_F32, 0}},
    {{0, 5, AG_F16, 2},
     {5, 3, AG_BF16, 0},
     {8, 1, AG_U8, 1},
     {9, 2, AG_I32, 0},
     {11, 1, AG_I64, 3},
     {0, 12, AG_F32, 0},
     {AG__GF_INDICES, 1, AG_I32, 2},
     {AG__GF_WEIGHTS, 1, AG_F16, 1},
     {3, 4, AG_F32, 5},
     {0, 0, AG_F32, 0}},
    {{0, 3, AG_I64, 0},
     {0, 3, AG_I32, 1},
     {1, 1, AG_F32, 0},
     {0, 2, AG_U8, 0},
     {2, 1, AG_F16, 2},
     {AG__GF_INDICES, 1, AG_I64, 0},
     {AG__GF_WEIGHTS, 1, AG_I32, 1},
     {0, 0, AG_F32, 0}},
};

/* Values of a region of dtype dt: integers as INIT_INDEX in [lo, hi), floats uniform. */
static void *fw_reg(layout *L, size_t count, ag_dtype dt, double lo, double hi, int out) {
  const int whole = dt == AG_U8 || dt == AG_I32 || dt == AG_I64;
  return reg(L, count, dt, whole ? INIT_INDEX : INIT_UNIFORM, dt == AG_U8 && lo < 0 ? 0 : lo,
             dt == AG_U8 && hi > 256 ? 256 : hi, out, 0);
}

/* GATHER_FIELDS. p: rows, capacity, n, storage, idx dtype, flags (1 scale
 * 0.5, 2 weights, 4 idx a row with gaps: stride 3), region set, 1: i32
 * storage over the whole i32 range. Destinations start with other values
 * (gaps included), compared bit for bit. */
static size_t b_gather_fields(const kcase *c, layout *L, void *out) {
  ag__gather_fields_args *a = out;
  const int64_t rows = c->p[0], cap = c->p[1], n = c->p[2], flags = c->p[5];
  a->src_dtype = (ag_dtype)c->p[3], a->rows = rows, a->capacity = cap, a->n = n;
  a->scale = flags & 1 ? 0.5f : 1.0f;
  a->idx_dtype = (ag_dtype)c->p[4], a->idx_stride = flags & 4 ? 3 : 1;
  const double lo = c->p[7] ? -2147483648.0 : a->src_dtype == AG_I32 ? -1000 : -300;
  const double hi = c->p[7] ? 2147483647.0 : 300;
  a->src = fw_reg(L, (size_t)(rows * cap), a->src_dtype, lo, hi, 0);
  a->idx = reg(L, (size_t)((n - 1) * a->idx_stride + 1), a->idx_dtype, INIT_INDEX, -3, (double)cap + 3, 0, 0);
  if (flags & 2) a->weights = reg(L, (size_t)n, AG_F32, INIT_UNIFORM, 0, 1.5, 0, 0);
  for (const fw_region *f = fw_sets[c->p[6]]; f->width; f++) {
    if (f->row0 == AG__GF_WEIGHTS && !(flags & 2)) continue; /* (not a->weights: NULL while planning) */
    ag__gf_dst *o = &a->dst[a->n_dst++];
    o->row0 = f->row0, o->width = f->width, o->dtype = f->dtype, o->ld = f->width + f->gap;
    o->p = fw_reg(L, (size_t)(o->ld * (n - 1) + o->width), o->dtype, 0, 100, 1);
  }
  return sizeof *a;
}

/* SCATTER_FIELDS. p: rows, capacity, pos, k, storage, region set (the
 * fields, the first source of each row only), size and position set. The whole table is compared: the columns
 * not written keep their values. */
static size_t b_scatter_fields(const kcase *c, layout *L, void *out) {
  ag__scatter_fields_args *a = out;
  const int64_t rows = c->p[0], cap = c->p[1], k = c->p[3];
  a->dst_dtype = (ag_dtype)c->p[4], a->rows = rows, a->capacity = cap, a->pos = c->p[2], a->k = k;
  a->dst = fw_reg(L, (size_t)(rows * cap), a->dst_dtype, -50, 50, 1);
  uint64_t taken = 0; /* rows of the sources so far: each row has one source */
  for (const fw_region *f = fw_sets[c->p[5]]; f->width; f++) {
    const uint64_t mine = f->row0 < 0 ? 0 : (f->width >= 64 ? ~0ull : (1ull << f->width) - 1) << f->row0;
    if (f->row0 < 0 || (mine & taken)) continue;
    taken |= mine;
    ag__sf_src *in = &a->src[a->n_src++];
    in->row0 = f->row0, in->width = f->width, in->dtype = f->dtype, in->ld = f->width + f->gap;
    const double big = in->dtype == AG_I64 ? 5e9 : 300; /* past u8, i32 and f16: saturated */
    in->p = fw_reg(L, k ? (size_t)(in->ld * (k - 1) + in->width) : 0, in->dtype, -big, big, 0);
  }
  if (c->p[6]) {
    a->size_dev = reg(L, 1, AG_I64, INIT_INDEX, 0, 1000, 1, 0);
    a->pos_dev = reg(L, 1, AG_I64, INIT_INDEX, 0, 1000, 1, 0);
    a->size_value = 123456789012345, a->pos_value = (a->pos + k) % cap;
  }
  return sizeof *a;
}

/* the cases: name, kernel, sizes, builder */
/* FRAME_STACK. p: h, w, c, stack, capacity, n_envs, B, flags (1: the
 * columns given, some outside the table; 2: u8 stacks; 4: a table still
 * filling, else full and wrapped; 8: the given columns i32). The frames are random; about one entry
 * in six is flagged first (prep_frame_stack). Drawn columns, the counter
 * and both stacks are compared bit for bit. */
static size_t b_frame_stack(const kcase *c, layout *L, void *out) {
  ag__frame_stack_args *a = out;
  a->h = c->p[0], a->w = c->p[1], a->c = c->p[2], a->stack = (int)c->p[3], a->capacity = c->p[4];
  a->n_envs = c->p[5], a->B = c->p[6];
  const int64_t flags = c->p[7], fr = a->h * a->w * a->c + 1, D = a->stack * (fr - 1);
  a->out_dtype = flags & 2 ? AG_U8 : AG_F32;
  a->seed = 4242;
  a->frames = reg(L, (size_t)(fr * a->capacity), AG_U8, INIT_INDEX, 0, 256, 0, 0);
  a->size_dev = reg(L, 1, AG_I64, INIT_ZERO, 0, 0, 0, 0);
  a->pos_dev = reg(L, 1, AG_I64, INIT_ZERO, 0, 0, 0, 0);
  if (flags & 1) {
    a->idx_dtype = flags & 8 ? AG_I32 : AG_I64;
    a->idx = reg(L, (size_t)a->B, a->idx_dtype, INIT_INDEX, -3, (double)a->capacity + 3, 0, 0);
  } else {
    a->counter = reg(L, 1, AG_I64, INIT_ZERO, 0, 0, 1, 0);
  }
  a->cols = reg(L, (size_t)a->B, AG_I64, INIT_ZERO, 0, 0, 1, 0);
  a->obs = reg(L, (size_t)(D * a->B), a->out_dtype, INIT_ZERO, 0, 0, 1, 0);
  a->next_obs = reg(L, (size_t)(D * a->B), a->out_dtype, INIT_ZERO, 0, 0, 1, 0);
  return sizeof *a;
}

static void prep_frame_stack(const kcase *c, layout *L, void *args) {
  (void)L;
  ag__frame_stack_args *a = args;
  const int64_t fr = a->h * a->w * a->c + 1;
  uint8_t *f = (uint8_t *)a->frames;
  for (int64_t x = 0; x < a->capacity; x++) f[x * fr + fr - 1] = f[x * fr + fr - 1] < 43;
  *(int64_t *)a->size_dev = c->p[7] & 4 ? a->capacity * 2 / 3 : a->capacity;
  *(int64_t *)a->pos_dev = c->p[7] & 4 ? a->capacity * 2 / 3 : a->capacity / 3;
}

#define K(name, id, build, ...) \
  { name, id, {__VA_ARGS__}, build, NULL }
#define KP(name, id, build, prep, ...) \
  { name, id, {__VA_ARGS__}, build, prep }
/* CONV2D: p[0] mode, p[1] B, p[2] C, p[3] H * 1000 + W, p[4] K, p[5] kh * 1000 + kw,
 * p[6] stride * 100 + pad, p[7] bits: 1 accumulate, 2 views with gaps (ld > rows), 4 no bias */
static size_t b_conv2d(const kcase *c, layout *L, void *out) {
  ag__conv2d_args *a = out;
  a->mode = (ag__conv_mode)c->p[0];
  const int64_t B = c->p[1];
  a->C = c->p[2], a->H = c->p[3] / 1000, a->W = c->p[3] % 1000, a->K = c->p[4];
  a->kh = c->p[5] / 1000, a->kw = c->p[5] % 1000, a->stride = c->p[6] / 100, a->pad = c->p[6] % 100;
  a->accumulate = (int)(c->p[7] & 1);
  const int64_t gap = c->p[7] & 2 ? 3 : 0;
  const int64_t Ho = ag__conv_out(a->H, a->kh, a->stride, a->pad),
                Wo = ag__conv_out(a->W, a->kw, a->stride, a->pad);
  const int64_t xr = a->C * a->H * a->W, wr = a->C * a->kh * a->kw, yr = a->K * Ho * Wo;
  a->x = mat(L, xr, B, xr + gap, INIT_UNIFORM, a->mode == AG__CONV_BWD_X, 1e-4);
  a->w = mat(L, wr, a->K, wr + gap, INIT_UNIFORM, a->mode == AG__CONV_BWD_W, 1e-4);
  a->y = mat(L, yr, B, yr + gap, INIT_UNIFORM, a->mode == AG__CONV_FWD, 1e-4);
  if (a->mode == AG__CONV_BWD_B || (a->mode == AG__CONV_FWD && !(c->p[7] & 4)))
    a->b = reg(L, (size_t)a->K, AG_F32, INIT_UNIFORM, -1, 1, a->mode == AG__CONV_BWD_B, 1e-4);
  a->ws = reg(L, (ag__kernel_scratch_max(AG__K_CONV2D, a, sizeof *a) + 3) / 4, AG_F32, INIT_ZERO, 0, 0, 0, 0);
  return sizeof *a;
}

#define CONV(name, B, C, HW, NK, khw, sp, bits)                                              \
  K(name " fwd", AG__K_CONV2D, b_conv2d, AG__CONV_FWD, B, C, HW, NK, khw, sp, bits),         \
      K(name " bwd x", AG__K_CONV2D, b_conv2d, AG__CONV_BWD_X, B, C, HW, NK, khw, sp, bits), \
      K(name " bwd w", AG__K_CONV2D, b_conv2d, AG__CONV_BWD_W, B, C, HW, NK, khw, sp, bits), \
      K(name " bwd b", AG__K_CONV2D, b_conv2d, AG__CONV_BWD_B, B, C, HW, NK, khw, sp, bits)
static const kcase cases[] = {
    K("gather f32 i32 11x1000 n256", AG__K_GATHER, b_gather, 11, 1000, 256, AG_F32, AG_I32, 0),
    K("gather f32 i64 1x7 n1", AG__K_GATHER, b_gather, 1, 7, 1, AG_F32, AG_I64, 0),
    K("gather f32 wide 1024x300 n130", AG__K_GATHER, b_gather, 1024, 300, 130, AG_F32, AG_I32, 1),
    K("gather f16 33x500 n77", AG__K_GATHER, b_gather, 33, 500, 77, AG_F16, AG_I32, 1),
    K("gather bf16 8x64 n65", AG__K_GATHER, b_gather, 8, 64, 65, AG_BF16, AG_I64, 0),
    K("gather u8 84x40 n9 scaled", AG__K_GATHER, b_gather, 84, 40, 9, AG_U8, AG_I32, 1),
    K("gather i32 3x50 n300", AG__K_GATHER, b_gather, 3, 50, 300, AG_I32, AG_I32, 0),
    K("gemm nn 17x33x9", AG__K_GEMM, b_gemm, 0, 0, 17, 33, 9, 0, 0),
    K("gemm tn 1x1x1 beta", AG__K_GEMM, b_gemm, 1, 0, 1, 1, 1, 1, 0),
    K("gemm nt 64x130x70 ld", AG__K_GEMM, b_gemm, 0, 1, 64, 130, 70, 1, 3),
    K("gemm tt 5x257x31", AG__K_GEMM, b_gemm, 1, 1, 5, 257, 31, 0, 0),
    K("map ident 13x7 ld", AG__K_MAP, b_map, AG__MAP_IDENT, 13, 7, 13, 7, 2, 0),
    K("map affine 1x1", AG__K_MAP, b_map, AG__MAP_AFFINE, 1, 1, 1, 1, 0, 1),
    K("map relu 300x5", AG__K_MAP, b_map, AG__MAP_RELU, 300, 5, 300, 5, 0, 0),
    K("map tanh 33x9 row bcast", AG__K_MAP, b_map, AG__MAP_TANH, 33, 9, 1, 9, 0, 0),
    K("map sigmoid 33x9 col bcast acc", AG__K_MAP, b_map, AG__MAP_SIGMOID, 33, 9, 33, 1, 0, 1),
    K("map exp 64x64", AG__K_MAP, b_map, AG__MAP_EXP, 64, 64, 64, 64, 0, 0),
    K("map log 17x3", AG__K_MAP, b_map, AG__MAP_LOG, 17, 3, 17, 3, 1, 0),
    K("map square 5x1025", AG__K_MAP, b_map, AG__MAP_SQUARE, 5, 1025, 5, 1025, 0, 1),
    K("map abs 2x2", AG__K_MAP, b_map, AG__MAP_ABS, 2, 2, 2, 2, 0, 0),
    K("map huber 31x31", AG__K_MAP, b_map, AG__MAP_HUBER, 31, 31, 31, 31, 0, 0),
    K("map2 add bcast 9x40", AG__K_MAP2, b_map2, AG__MAP2_ADD, 9, 40, 9, 40, 9, 1, 0),
    K("map2 sub 1x300", AG__K_MAP2, b_map2, AG__MAP2_SUB, 1, 300, 1, 300, 1, 300, 1),
    K("map2 mul row bcast", AG__K_MAP2, b_map2, AG__MAP2_MUL, 12, 12, 1, 12, 12, 12, 0),
    K("map2 div", AG__K_MAP2, b_map2, AG__MAP2_DIV, 7, 11, 7, 11, 7, 11, 0),
    K("map2 max", AG__K_MAP2, b_map2, AG__MAP2_MAX, 40, 3, 40, 3, 40, 3, 1),
    K("map2 relu_bwd", AG__K_MAP2, b_map2, AG__MAP2_RELU_BWD, 64, 5, 64, 5, 64, 5, 0),
    K("map2 tanh_bwd", AG__K_MAP2, b_map2, AG__MAP2_TANH_BWD, 64, 5, 64, 5, 64, 5, 1),
    K("map2 sigmoid_bwd", AG__K_MAP2, b_map2, AG__MAP2_SIGMOID_BWD, 3, 3, 3, 3, 3, 3, 0),
    K("map2 huber_bwd", AG__K_MAP2, b_map2, AG__MAP2_HUBER_BWD, 20, 20, 20, 20, 20, 20, 0),
    K("map2 abs_bwd", AG__K_MAP2, b_map2, AG__MAP2_ABS_BWD, 20, 2, 20, 2, 20, 2, 0),
    K("map2 add_relu bias", AG__K_MAP2, b_map2, AG__MAP2_ADD_RELU, 256, 33, 256, 33, 256, 1, 0),
    K("map2 add_tanh bias", AG__K_MAP2, b_map2, AG__MAP2_ADD_TANH, 17, 130, 17, 130, 17, 1, 0),
    K("map2 add_sigmoid bias", AG__K_MAP2, b_map2, AG__MAP2_ADD_SIGMOID, 1, 1, 1, 1, 1, 1, 1),
    K("reduce sum axis0", AG__K_REDUCE, b_reduce, AG__RED_SUM, 0, 300, 7, 1, -1, 0),
    K("reduce sum axis1 acc", AG__K_REDUCE, b_reduce, AG__RED_SUM, 1, 9, 513, 0, -1, 1),
    K("reduce sum all", AG__K_REDUCE, b_reduce, AG__RED_SUM, 2, 65, 65, 2, -1, 0),
    K("reduce sum 1x1", AG__K_REDUCE, b_reduce, AG__RED_SUM, 2, 1, 1, 0, -1, 0),
    K("reduce max axis0 arg i32", AG__K_REDUCE, b_reduce, AG__RED_MAX, 0, 6, 200, 0, AG_I32, 0),
    K("reduce max axis1 arg i64", AG__K_REDUCE, b_reduce, AG__RED_MAX, 1, 100, 3, 1, AG_I64, 0),
    K("pick axis0 i32", AG__K_PICK, b_pick, 0, 6, 128, AG_I32, 0),
    K("pick axis0 f32 acc", AG__K_PICK, b_pick, 0, 4, 33, AG_F32, 1),
    K("pick axis1 i64", AG__K_PICK, b_pick, 1, 50, 5, AG_I64, 0),
    K("pick_bwd axis0", AG__K_PICK_BWD, b_pick_bwd, 0, 6, 128, AG_I32, 0),
    K("pick_bwd axis1 acc", AG__K_PICK_BWD, b_pick_bwd, 1, 50, 5, AG_F32, 1),
    K("fill ld", AG__K_FILL, b_fill, 7, 9, 3),
    K("fill 1x1", AG__K_FILL, b_fill, 1, 1, 0),
    K("copy ld to packed", AG__K_COPY, b_copy, 5, 40, 6, 0, 0),
    K("copy acc ld", AG__K_COPY, b_copy, 33, 3, 0, 2, 1),
    K("copy packed", AG__K_COPY, b_copy, 64, 9, 0, 0, 0),
    K("adam prep one launch", AG__K_ADAM, b_adam, 6, 0, 0, 1, 0, 0),
    K("adam two launches' second, clipped", AG__K_ADAM, b_adam, 3, 1, 0, 0, 1, 1),
    K("adam as sgd", AG__K_ADAM, b_adam, 4, 0, 1, 1, 0, 1),
    K("adam 48 tensors", AG__K_ADAM, b_adam, 48, 0, 0, 1, 0, 0),
    K("adam_prep", AG__K_ADAM_PREP, b_adam_prep, 0),
    K("sumsq", AG__K_SUMSQ, b_sumsq, 5, 1),
    K("axpby polyak", AG__K_AXPBY, b_axpby, 7, 1, 0),
    K("axpby copy", AG__K_AXPBY, b_axpby, 2, 0, 1),
    K("randint const i32", AG__K_RANDINT, b_randint, 1000, 37, AG_I32),
    K("randint device bound i64", AG__K_RANDINT, b_randint, 257, 0, AG_I64),
    K("randint 1", AG__K_RANDINT, b_randint, 1, 1, AG_I32),
    K("td max", AG__K_TD_TARGET, b_td, 6, 128, -1),
    K("td picked i32", AG__K_TD_TARGET, b_td, 2, 33, AG_I32),
    K("td picked f32 1x1", AG__K_TD_TARGET, b_td, 1, 1, AG_F32),
    K("loss mse with grad", AG__K_LOSS, b_loss, 0, 1, 256, 1),
    K("loss huber with grad", AG__K_LOSS, b_loss, 1, 3, 77, 1),
    K("loss huber value only", AG__K_LOSS, b_loss, 1, 1, 1, 0),
    K("per_fill", AG__K_PER_FILL, b_per_fill, 1000, 3, 500),
    K("per_fill one leaf of 16", AG__K_PER_FILL, b_per_fill, 16, 15, 1),
    K("per_set i32 with repeats", AG__K_PER_SET, b_per_set, 300, 256, AG_I32),
    K("per_set i64 deep", AG__K_PER_SET, b_per_set, 70000, 1000, AG_I64),
    KP("per_sample 1000 B256", AG__K_PER_SAMPLE, b_per_sample, prep_per_sample, 1000, 256),
    KP("per_sample 5 B1", AG__K_PER_SAMPLE, b_per_sample, prep_per_sample, 5, 1),
    KP("qgrad 3 layers drawn double huber", AG__K_QGRAD, b_qgrad, prep_qgrad, 3, 32, 4, 64, 1, 1, 1),
    KP("qgrad 1 layer idx mse", AG__K_QGRAD, b_qgrad, prep_qgrad, 1, 0, 2, 7, 0, 0, 0),
    KP("qgrad 4 layers odd B", AG__K_QGRAD, b_qgrad, prep_qgrad, 4, 20, 6, 33, 1, 1, 0),
    /* cases added later go last: each case draws its inputs from a seed of its place in the table */
    K("convert f32 to f32 ld", AG__K_CONVERT, b_convert, 17, 300, 3, 5, AG_F32, AG_F32, -2, 2),
    K("convert f32 to f16", AG__K_CONVERT, b_convert, 6, 513, 0, 0, AG_F32, AG_F16, -60000, 60000),
    K("convert f32 to bf16 ld", AG__K_CONVERT, b_convert, 1, 257, 2, 0, AG_F32, AG_BF16, -3, 3),
    K("convert f32 to u8 saturating", AG__K_CONVERT, b_convert, 5, 200, 0, 1, AG_F32, AG_U8, -300, 300),
    K("convert f32 to i32", AG__K_CONVERT, b_convert, 3, 99, 1, 0, AG_F32, AG_I32, -1000, 1000),
    K("convert i32 to f32", AG__K_CONVERT, b_convert, 1, 1000, 0, 0, AG_I32, AG_F32, -100000, 100000),
    K("convert i64 to i32 saturating", AG__K_CONVERT, b_convert, 2, 50, 0, 0, AG_I64, AG_I32, -5000000000,
      5000000000),
    K("convert i64 to u8 ld", AG__K_CONVERT, b_convert, 4, 33, 1, 2, AG_I64, AG_U8, -50, 400),
    K("convert u8 to f16", AG__K_CONVERT, b_convert, 84, 7, 0, 0, AG_U8, AG_F16, 0, 256),
    K("convert f16 to f32 1x1", AG__K_CONVERT, b_convert, 1, 1, 0, 0, AG_F16, AG_F32, -4, 4),
    K("convert i32 to i64", AG__K_CONVERT, b_convert, 9, 11, 0, 0, AG_I32, AG_I64, -1000000, 1000000),
    K("set_i64", AG__K_SET_I64, b_set_i64, 123456789012),
    KP("nstep f32 full wrapped stride 3", AG__K_NSTEP, b_nstep, prep_nstep, 61, AG_F32, 61, 17, 130, AG_I32,
       5, 3),
    KP("nstep i32 filling n 64", AG__K_NSTEP, b_nstep, prep_nstep, 40, AG_I32, 23, 23, 50, AG_I64, 64, 1),
    KP("nstep f16 one column", AG__K_NSTEP, b_nstep, prep_nstep, 1, AG_F16, 1, 0, 3, AG_I32, 3, 1),
    K("map clamp 33x9 ld", AG__K_MAP, b_map, AG__MAP_CLAMP, 33, 9, 33, 9, 2, 0),
    K("map clamp row bcast acc", AG__K_MAP, b_map, AG__MAP_CLAMP, 5, 130, 1, 130, 0, 1),
    K("map2 min col bcast", AG__K_MAP2, b_map2, AG__MAP2_MIN, 40, 3, 40, 3, 40, 1, 0),
    K("map2 max_mask", AG__K_MAP2, b_map2, AG__MAP2_MAX_MASK, 17, 5, 17, 5, 1, 5, 0),
    K("map2 min_mask acc", AG__K_MAP2, b_map2, AG__MAP2_MIN_MASK, 17, 5, 17, 5, 17, 5, 1),
    K("map2 mask_bwd", AG__K_MAP2, b_map2, AG__MAP2_MASK_BWD, 9, 9, 9, 9, 9, 9, 0),
    K("map2 unmask_bwd acc", AG__K_MAP2, b_map2, AG__MAP2_UNMASK_BWD, 9, 9, 9, 9, 9, 9, 1),
    K("map2 clamp_bwd", AG__K_MAP2, b_map2, AG__MAP2_CLAMP_BWD, 64, 5, 64, 5, 64, 5, 0),
    K("randn 1", AG__K_RANDN, b_randn, 1),
    K("randn 1000 bits", AG__K_RANDN, b_randn, 1000),
    K("randn past a block 4099", AG__K_RANDN, b_randn, 4099),
    KP("acgrad sac 3 layers drawn", AG__K_ACGRAD, b_acgrad, prep_acgrad, 0, 3, 32, 2, 64, 1, 1, 0),
    KP("acgrad td3 2 layers idx n-step odd", AG__K_ACGRAD, b_acgrad, prep_acgrad, 1, 2, 37, 3, 45, 1, 0, 1),
    KP("acgrad td3 critic only drawn", AG__K_ACGRAD, b_acgrad, prep_acgrad, 1, 3, 20, 1, 33, 0, 1, 0),
    KP("acgrad sac critic only idx n-step", AG__K_ACGRAD, b_acgrad, prep_acgrad, 0, 2, 64, 1, 256, 0, 0, 1),
    /* odd widths and batches that are no multiple of a vector (the CPU's fast path: 8 and 16 lanes) */
    KP("acgrad sac 3 layers odd 6 actions", AG__K_ACGRAD, b_acgrad, prep_acgrad, 0, 3, 37, 6, 45, 1, 1, 0),
    KP("acgrad td3 3 layers odd idx", AG__K_ACGRAD, b_acgrad, prep_acgrad, 1, 3, 29, 6, 17, 1, 0, 0),
    KP("acgrad sac 2 layers B 1", AG__K_ACGRAD, b_acgrad, prep_acgrad, 0, 2, 7, 2, 1, 1, 1, 0),
    KP("acgrad sac 3 layers wide", AG__K_ACGRAD, b_acgrad, prep_acgrad, 0, 3, 131, 3, 100, 1, 1, 0),
    KP("acgrad td3 3 layers wide n-step", AG__K_ACGRAD, b_acgrad, prep_acgrad, 1, 3, 131, 2, 100, 1, 0, 1),
    K("gather f32 rows of 4, copied whole 64x500 n300", AG__K_GATHER, b_gather, 64, 500, 300, AG_F32, AG_I64,
      0),
    K("gather f32 rows of 4, 4x70000 n70000", AG__K_GATHER, b_gather, 4, 70000, 70000, AG_F32, AG_I32, 0),
    K("gather_fields f32 42 rows B256 f32 fields, indices, weights", AG__K_GATHER_FIELDS, b_gather_fields, 42,
      1000, 256, AG_F32, AG_I32, 2, 0, 0),
    K("gather_fields f32 42 rows B1 no weights", AG__K_GATHER_FIELDS, b_gather_fields, 42, 7, 1, AG_F32,
      AG_I64, 0, 0, 0),
    K("gather_fields f32 n70000 past a block", AG__K_GATHER_FIELDS, b_gather_fields, 42, 5000, 70000, AG_F32,
      AG_I64, 2, 0, 0),
    K("gather_fields f32 every dtype, gaps, idx with gaps", AG__K_GATHER_FIELDS, b_gather_fields, 12, 300,
      129, AG_F32, AG_I32, 6, 1, 0),
    K("gather_fields f16 every dtype scaled", AG__K_GATHER_FIELDS, b_gather_fields, 12, 77, 33, AG_F16,
      AG_I64, 3, 1, 0),
    K("gather_fields bf16 every dtype", AG__K_GATHER_FIELDS, b_gather_fields, 12, 40, 65, AG_BF16, AG_I64, 2,
      1, 0),
    K("gather_fields u8 every dtype n1 no weights", AG__K_GATHER_FIELDS, b_gather_fields, 12, 5, 1, AG_U8,
      AG_I32, 0, 1, 0),
    K("gather_fields i32 beyond 2^24 into integers exactly", AG__K_GATHER_FIELDS, b_gather_fields, 3, 50, 67,
      AG_I32, AG_I64, 2, 2, 1),
    K("gather_fields i32 beyond 2^24 scaled, idx with gaps", AG__K_GATHER_FIELDS, b_gather_fields, 3, 9, 31,
      AG_I32, AG_I32, 7, 2, 1),
    KP("frame_stack 84x84x1 stack 4 drawn f32", AG__K_FRAME_STACK, b_frame_stack, prep_frame_stack, 84, 84, 1,
       4, 500, 1, 32, 0),
    KP("frame_stack 5x7x3 stack 3, 4 copies, drawn u8, filling", AG__K_FRAME_STACK, b_frame_stack,
       prep_frame_stack, 5, 7, 3, 3, 101, 4, 300, 6),
    KP("frame_stack 1x1x1 stack 8, 3 copies, given columns u8", AG__K_FRAME_STACK, b_frame_stack,
       prep_frame_stack, 1, 1, 1, 8, 64, 3, 1000, 3),
    KP("frame_stack 9x4x2 stack 1 given f32", AG__K_FRAME_STACK, b_frame_stack, prep_frame_stack, 9, 4, 2, 1,
       30, 2, 17, 1),
    K("scatter_fields f32 42 rows across the end", AG__K_SCATTER_FIELDS, b_scatter_fields, 42, 300, 250, 100,
      AG_F32, 0, 1),
    K("scatter_fields f16 every dtype, gaps, k = capacity", AG__K_SCATTER_FIELDS, b_scatter_fields, 12, 50,
      45, 50, AG_F16, 1, 1),
    K("scatter_fields u8 every dtype saturating", AG__K_SCATTER_FIELDS, b_scatter_fields, 12, 40, 0, 7, AG_U8,
      1, 0),
    K("scatter_fields i32 every dtype k1 at the last column", AG__K_SCATTER_FIELDS, b_scatter_fields, 12, 9,
      8, 1, AG_I32, 1, 1),
    K("scatter_fields k0: the size and the position only", AG__K_SCATTER_FIELDS, b_scatter_fields, 42, 10, 3,
      0, AG_F32, 0, 1),
    K("scatter_fields bf16 2500 across the end", AG__K_SCATTER_FIELDS, b_scatter_fields, 42, 3000, 1000, 2500,
      AG_BF16, 0, 1),
    CONV("conv2d 3x5x7 k3 s1 p1 B2 K4", 2, 3, 5007, 4, 3003, 101, 0),
    CONV("conv2d 1x1x1 k1 B1 K1 acc", 1, 1, 1001, 1, 1001, 100, 1),
    CONV("conv2d 5x9x6 k4 s2 p2 B3 K7 gaps", 3, 5, 9006, 7, 4004, 202, 2),
    CONV("conv2d 2x17x13 k3x2 s4 B1 K3 no bias", 1, 2, 17013, 3, 3002, 400, 4),
    CONV("conv2d 7x6x10 k1 s2 B5 K6 acc gaps", 5, 7, 6010, 6, 1001, 200, 3),
    CONV("conv2d 3x11x11 k8 s1 p2 B2 K5", 2, 3, 11011, 5, 8008, 102, 0),
    CONV("conv2d 3x4x3 k5x4 p1 B2 K2", 2, 3, 4003, 2, 5004, 101, 0),
    CONV("conv2d Nature 4x84x84 k8 s4 B2 K32", 2, 4, 84084, 32, 8008, 400, 0),
    CONV("conv2d Nature 64x7x7 k3 s1 B3 K64", 3, 64, 7007, 64, 3003, 100, 0),
    KP("frame_stack 3x3x1 stack 2, 2 copies, given i32 columns u8", AG__K_FRAME_STACK, b_frame_stack,
       prep_frame_stack, 3, 3, 1, 2, 50, 2, 77, 11),
    KP("frame_stack 1x3x1 stack 2 drawn u8, more transitions than work groups", AG__K_FRAME_STACK,
       b_frame_stack, prep_frame_stack, 1, 3, 1, 2, 90, 1, 40000, 2),
    KP("frame_stack 6x5x3 stack 6, 3 copies, drawn f32, wrapped", AG__K_FRAME_STACK, b_frame_stack,
       prep_frame_stack, 6, 5, 3, 6, 97, 3, 41, 0),
    KP("frame_stack 84x84x1 stack 4, 4 copies, drawn u8, past the CPU's split", AG__K_FRAME_STACK,
       b_frame_stack, prep_frame_stack, 84, 84, 1, 4, 120, 4, 32, 2),
    KP("frame_stack 7x3x4 stack 5, 2 copies, given f32, filling", AG__K_FRAME_STACK, b_frame_stack,
       prep_frame_stack, 7, 3, 4, 5, 80, 2, 64, 5),
    KP("frame_stack 21x21x3 stack 9 given u8", AG__K_FRAME_STACK, b_frame_stack, prep_frame_stack, 21, 21, 3,
       9, 70, 1, 12, 3),
    K("per_set i64 masked, with repeats", AG__K_PER_SET, b_per_set, 300, 256, AG_I64, 1),
    K("per_set i32 masked deep, past a group", AG__K_PER_SET, b_per_set, 70000, 5000, AG_I32, 1),
    KP("per_fill masking pass", AG__K_PER_FILL, b_per_fill, prep_per_fill, 1000, 3, 500, 1),
    KP("per_fill masking pass deep, past a group", AG__K_PER_FILL, b_per_fill, prep_per_fill, 70000, 10,
       69000, 1),
};

/* ---- running a case ---- */

static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void init_region(unsigned char *base, const region *r, uint64_t *g) {
  for (size_t i = 0; i < r->count; i++) {
    double u = (double)(mix(g) >> 11) / 9007199254740992.0, v = 0;
    switch (r->init) {
      case INIT_ZERO: v = 0; break;
      case INIT_UNIFORM: v = r->lo + (r->hi - r->lo) * u; break;
      case INIT_POSITIVE:
        v = (r->hi > 0 ? r->lo : 0.1) + ((r->hi > 0 ? r->hi : 3) - (r->hi > 0 ? r->lo : 0.1)) * u;
        break;
      case INIT_INDEX: v = floor(r->lo + (r->hi - r->lo) * u); break;
      case INIT_BITS: { /* an optimizer state after 3 steps */
        const float st[AG__OPT_STATE_N] = {3.0f, 2.5f, 1.0f - 0.9f * 0.9f * 0.9f,
                                           1.0f - 0.999f * 0.999f * 0.999f, 1.0f};
        v = i < AG__OPT_STATE_N ? st[i] : 0;
        break;
      }
    }
    unsigned char *p = base + r->off;
    switch ((int)r->dt) {
      case AG_F32: ((float *)p)[i] = (float)v; break;
      case AG_F16: ((uint16_t *)p)[i] = ag__f32_to_f16((float)v); break;
      case AG_BF16: ((uint16_t *)p)[i] = ag__f32_to_bf16((float)v); break;
      case AG_U8: ((uint8_t *)p)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); break;
      case AG_I32: ((int32_t *)p)[i] = (int32_t)v; break;
      case AG_I64: ((int64_t *)p)[i] = (int64_t)v; break;
      default: ((double *)p)[i] = v; break;
    }
  }
}

static double value_at(const unsigned char *base, const region *r, size_t i) {
  const unsigned char *p = base + r->off;
  switch ((int)r->dt) {
    case AG_F32: return ((const float *)p)[i];
    case AG_I32: return ((const int32_t *)p)[i];
    case AG_I64: return (double)((const int64_t *)p)[i];
    case AG_F16: return ag__f16_to_f32(((const uint16_t *)p)[i]);
    case AG_BF16: return ag__bf16_to_f32(((const uint16_t *)p)[i]);
    case AG_U8: return ((const uint8_t *)p)[i];
    default: return ((const double *)p)[i];
  }
}

static void every_kernel_matches_the_reference(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  int ran = 0, skipped = 0, compared = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const kcase *c = &cases[k];
    unsigned char args_dev[sizeof(ag__qgrad_args) + 4096], args_ref[sizeof args_dev];
    layout L;
    memset(&L, 0, sizeof L);
    memset(args_ref, 0, sizeof args_ref);
    c->build(c, &L, args_ref); /* plan: offsets and size only */
    const size_t bytes = L.used;
    unsigned char *ref = calloc(1, bytes), *got = calloc(1, bytes);
    assert_true(ref && got);
    uint64_t g = 1000 + k;
    for (int i = 0; i < L.n; i++) init_region(ref, &L.r[i], &g);
    /* inputs made consistent (a sum tree, whole actions) before they are copied */
    layout H = L;
    H.n = 0, H.used = 0, H.base = ref;
    memset(args_ref, 0, sizeof args_ref);
    size_t asize = c->build(c, &H, args_ref);
    if (c->prepare) c->prepare(c, &H, args_ref);
    /* the backend: the arena in device memory, the arguments pointing there */
    ag_tensor *arena;
    agt_ok(ag_tensor_create(ctx, (int64_t)bytes, 1, AG_U8, ref, &arena));
    void *dev;
    agt_ok(ag__tensor_ptr(arena, &dev));
    layout D = L;
    D.n = 0, D.used = 0, D.base = dev;
    memset(args_dev, 0, sizeof args_dev);
    c->build(c, &D, args_dev);
    if (!ag__kernel_supported(ctx, c->id, args_dev, asize)) {
      skipped++;
      printf("kernels: %s: not supported on %s, skipped\n", c->name, ag_ctx_device_name(ctx));
    } else {
      agt_ok(ag__run(ctx, c->id, args_dev, asize));
      agt_ok(ag_tensor_read(arena, got, bytes));
      /* the reference, on the host copy */
      agt_ok(ag__cpu_ref_kernels[c->id](args_ref));
      for (int i = 0; i < L.n; i++) {
        const region *r = &L.r[i];
        if (!r->out) continue;
        for (size_t e = 0; e < r->count; e++) {
          double want = value_at(ref, r, e), have = value_at(got, r, e);
          double tol = r->tol * (fabs(want) > 1 ? fabs(want) : 1);
          if (!(want == have) && !(fabs(want - have) <= tol) && !(isnan(want) && isnan(have))) /* inf too */
            fail_msg("%s on %s: region %d element %zu is %.9g, the reference %.9g (tolerance %.3g)", c->name,
                     ag_ctx_device_name(ctx), i, e, have, want, tol);
          compared++;
        }
      }
      ran++;
    }
    ag_tensor_free(arena);
    free(ref);
    free(got);
  }
  printf("kernels.%s: %d cases run, %d skipped (not supported), %d values compared with the reference\n",
         agt_kind_name(), ran, skipped, compared);
  /* every kernel kind has at least one case */
  int seen[AG__K_COUNT] = {0};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) seen[cases[k].id] = 1;
  for (int id = 0; id < AG__K_COUNT; id++)
    if (!seen[id]) fail_msg("kernel %d has no case", id);
  ag_ctx_free(ctx);
}

/* The CPU's fast ACGRAD (cpu_acgrad_fast.c) on its other ways, on the host,
 * against the reference within the cases' tolerances: the portable
 * optimizer steps (no AVX2 / AVX-512) as well as the vector ones, the
 * parts split over the helper threads where the pool has more than one. */
static void acgrad_fast_ways_match_the_reference(void **state) {
  (void)state;
  if (agt_kind != AG_DEVICE_CPU) skip(); /* host code: once, in the CPU's run */
  int compared = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const kcase *c = &cases[k];
    if (c->id != AG__K_ACGRAD) continue;
    for (int vector = 0; vector < 2; vector++) {
      unsigned char args_ref[sizeof(ag__qgrad_args) + 4096], args_fast[sizeof args_ref];
      layout L;
      memset(&L, 0, sizeof L);
      memset(args_ref, 0, sizeof args_ref);
      c->build(c, &L, args_ref);
      unsigned char *ref = calloc(1, L.used), *got = calloc(1, L.used);
      assert_true(ref && got);
      uint64_t g = 5000 + k;
      for (int i = 0; i < L.n; i++) init_region(ref, &L.r[i], &g);
      layout H = L, F = L;
      H.n = 0, H.used = 0, H.base = ref;
      memset(args_ref, 0, sizeof args_ref);
      c->build(c, &H, args_ref);
      if (c->prepare) c->prepare(c, &H, args_ref);
      memcpy(got, ref, L.used);
      F.n = 0, F.used = 0, F.base = got;
      memset(args_fast, 0, sizeof args_fast);
      c->build(c, &F, args_fast);
      agt_ok(ag__cpu_ref_kernels[c->id](args_ref));
      ag__cpu_vector_paths = vector;
      agt_ok(ag__cpu_fast_acgrad(args_fast));
      ag__cpu_vector_paths = 1;
      for (int i = 0; i < L.n; i++) {
        const region *r = &L.r[i];
        if (!r->out) continue;
        for (size_t e = 0; e < r->count; e++) {
          double want = value_at(ref, r, e), have = value_at(got, r, e);
          double tol = r->tol * (fabs(want) > 1 ? fabs(want) : 1);
          if (!(want == have) && !(fabs(want - have) <= tol) && !(isnan(want) && isnan(have)))
            fail_msg("%s, %s steps: region %d element %zu is %.9g, the reference %.9g (tolerance %.3g)",
                     c->name, vector ? "vector" : "portable", i, e, have, want, tol);
          compared++;
        }
      }
      free(ref);
      free(got);
    }
  }
  assert_true(compared > 0);
  printf("kernels: the CPU's fast ACGRAD, vector and portable steps: %d values compared\n", compared);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(every_kernel_matches_the_reference),
                                     cmocka_unit_test(acgrad_fast_ways_match_the_reference)};
  return agt_run(argc, argv, "kernels", tests, sizeof tests / sizeof tests[0]);
}
