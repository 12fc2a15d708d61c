/* k_linalg.c — the Vulkan kernels GEMM, REDUCE, PICK, PICK_BWD, TD_TARGET,
 * LOSS and CONV2D (shaders linalg_*.comp). Every sum runs in an order fixed by the
 * shape alone (no float atomics): the same inputs give the same bits on
 * every run and every replay. */
#include "base/base.h"
#include "vulkan/vk_internal.h"

#define LOCAL 256 /* the shaders' work group size */

static uint32_t clamp_groups(int64_t g) { return (uint32_t)(g < 1 ? 1 : g > 65535 ? 65535 : g); }

/* The ag_dtype codes the shaders read (linalg_index.glsl). */
static int index_dtype_ok(ag_dtype dt, int f32_too) {
  return dt == AG_I32 || dt == AG_I64 || (f32_too && dt == AG_F32);
}

/* ---- GEMM ---- */

/* The output tiles of linalg_gemm_NAME.comp (linalg_gemm.glsl). */
typedef struct gemm_tile {
  ag__vk_pipe_id pipe;
  int64_t rows, cols;
} gemm_tile;

/* The tile of a product of m x n outputs: thin outputs (one side of at
 * most 4) take 4 x 64 or 64 x 4 tiles; otherwise the largest square tile
 * that still gives the device about a work group per multiprocessor (64
 * for large layers, 16 for a 256 x 256 one). Each output's sum over k runs
 * in the same order in every tile. */
static gemm_tile gemm_tile_of(int64_t m, int64_t n) {
  if (m <= 4 && n > 4) return (gemm_tile){AG__VK_PIPE_LINALG_GEMM_M4, 4, 64};
  if (n <= 4 && m > 4) return (gemm_tile){AG__VK_PIPE_LINALG_GEMM_N4, 64, 4};
  if (((m + 63) / 64) * ((n + 63) / 64) >= 128) return (gemm_tile){AG__VK_PIPE_LINALG_GEMM_64, 64, 64};
  if (((m + 31) / 32) * ((n + 31) / 32) >= 128) return (gemm_tile){AG__VK_PIPE_LINALG_GEMM_32, 32, 32};
  return (gemm_tile){AG__VK_PIPE_LINALG_GEMM_16, 16, 16};
}

static int gemm_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__gemm_args *a = args;
  return a->k >= 0; /* a negative k has no meaning */
}

static ag_status run_gemm(vk_state *s, const void *args) {
  const ag__gemm_args *a = args;
  if (!gemm_ok(s, a)) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: gemm with k = %lld", (long long)a->k);
  if (a->m <= 0 || a->n <= 0) return AG_OK;
  ag__vk_pc_linalg_gemm pc = {ag__vk_addr(a->a),
                              ag__vk_addr(a->b),
                              ag__vk_addr(a->c),
                              a->m,
                              a->n,
                              a->k,
                              a->lda,
                              a->ldb,
                              a->ldc,
                              a->alpha,
                              a->beta,
                              a->trans_a != 0,
                              a->trans_b != 0};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "GEMM's push constants fit");
  const gemm_tile t = gemm_tile_of(a->m, a->n);
  return ag__vk_dispatch(s, ag__vk_pipe(s, t.pipe), &pc, sizeof pc,
                         clamp_groups((a->m + t.rows - 1) / t.rows),
                         clamp_groups((a->n + t.cols - 1) / t.cols), 1);
}

/* ---- REDUCE ---- */

/* The lines reduced (inner) and their number (outer) of axis 0 or 1. */
static void reduce_extents(const ag__reduce_args *a, int64_t *outer, int64_t *inner) {
  *outer = a->axis == 0 ? a->x.cols : a->x.rows;
  *inner = a->axis == 0 ? a->x.rows : a->x.cols;
}

/* Refused: an op or axis outside the contract, MAX over axis 2 (not in
 * the contract), an argmax of another dtype than i32 / i64, and MAX over
 * empty lines (there is no first element to take). */
static int reduce_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__reduce_args *a = args;
  if (a->op == AG__RED_SUM) return a->axis >= 0 && a->axis <= 2;
  if (a->op != AG__RED_MAX || (a->axis != 0 && a->axis != 1)) return 0;
  if (a->arg && !index_dtype_ok(a->arg_dtype, 0)) return 0;
  int64_t outer, inner;
  reduce_extents(a, &outer, &inner);
  return outer <= 0 || inner >= 1;
}

static ag_status run_reduce(vk_state *s, const void *args) {
  const ag__reduce_args *a = args;
  if (!reduce_ok(s, a))
    return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: reduce op %d over axis %d with these arguments", (int)a->op,
                    a->axis);
  ag__vk_pc_linalg_reduce pc = {ag__vk_addr(a->x.p),
                                ag__vk_addr(a->out.p),
                                ag__vk_addr(a->arg),
                                a->x.rows,
                                a->x.cols,
                                a->x.ld,
                                a->out.ld,
                                0,
                                0,
                                0,
                                0,
                                a->scale,
                                (int32_t)a->op,
                                a->axis,
                                1,
                                (int32_t)a->arg_dtype,
                                a->accumulate};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "REDUCE's push constants fit");
  const int pipe = ag__vk_pipe(s, AG__VK_PIPE_LINALG_REDUCE);
  if (a->axis == 2) { /* one work group walking the elements 256 at a time */
    if (pc.rows <= 0 || pc.cols <= 0) pc.rows = 1, pc.cols = 0; /* no elements: a sum of 0 */
    pc.step_r = LOCAL % pc.rows, pc.step_c = LOCAL / pc.rows;
    return ag__vk_dispatch(s, pipe, &pc, sizeof pc, 1, 1, 1);
  }
  reduce_extents(a, &pc.outer, &pc.inner);
  if (pc.outer <= 0) return AG_OK;
  /* Splits of a line: one (an exact sequential sum) for short lines, else
   * enough that each takes at most 16 elements, up to 256; over axis 1 the
   * lanes (consecutive outputs, neighbouring in memory) are kept at 32 or
   * the number of outputs, for coalesced reads. */
  int64_t splits = 1;
  if (pc.inner > 32)
    while (splits < LOCAL && splits * 16 < pc.inner) splits *= 2;
  if (a->axis == 1) {
    int64_t lanes_min = 1;
    while (lanes_min < 32 && lanes_min < pc.outer) lanes_min *= 2;
    if (splits > LOCAL / lanes_min) splits = LOCAL / lanes_min;
  }
  pc.lanes = (int32_t)(LOCAL / splits);
  return ag__vk_dispatch(s, pipe, &pc, sizeof pc, clamp_groups((pc.outer + pc.lanes - 1) / pc.lanes), 1, 1);
}

/* ---- PICK, PICK_BWD ---- */

/* Refused: an axis other than 0 or 1, an index dtype other than i32, i64
 * or f32, and picks from an empty axis (no element to clamp to). */
static int pick_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__pick_args *a = args;
  if ((a->axis != 0 && a->axis != 1) || !index_dtype_ok(a->idx_dtype, 1)) return 0;
  const int64_t n = a->axis == 0 ? a->x.cols : a->x.rows, limit = a->axis == 0 ? a->x.rows : a->x.cols;
  return n <= 0 || limit >= 1;
}

static ag_status run_pick(vk_state *s, const void *args) {
  const ag__pick_args *a = args;
  if (!pick_ok(s, a))
    return ag__fail(AG_ERR_INVALID_ARG, "vulkan: pick over axis %d with these arguments", a->axis);
  ag__vk_pc_linalg_pick pc = {ag__vk_addr(a->x.p),
                              ag__vk_addr(a->idx),
                              ag__vk_addr(a->out.p),
                              a->x.ld,
                              a->out.ld,
                              a->axis == 0 ? a->x.cols : a->x.rows,
                              a->axis == 0 ? a->x.rows : a->x.cols,
                              a->idx_stride,
                              a->axis,
                              (int32_t)a->idx_dtype,
                              a->accumulate};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "PICK's push constants fit");
  if (pc.n <= 0) return AG_OK;
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_LINALG_PICK), &pc, sizeof pc,
                         ag__vk_groups(pc.n, LOCAL), 1, 1);
}

/* Refused: an axis other than 0 or 1, an index dtype other than i32, i64
 * or f32. */
static int pick_bwd_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__pick_bwd_args *a = args;
  return (a->axis == 0 || a->axis == 1) && index_dtype_ok(a->idx_dtype, 1);
}

static ag_status run_pick_bwd(vk_state *s, const void *args) {
  const ag__pick_bwd_args *a = args;
  if (!pick_bwd_ok(s, a))
    return ag__fail(AG_ERR_INVALID_ARG, "vulkan: pick_bwd over axis %d with these arguments", a->axis);
  if (a->dx.rows <= 0 || a->dx.cols <= 0) return AG_OK;
  ag__vk_pc_linalg_pick_bwd pc = {ag__vk_addr(a->g.p),
                                  ag__vk_addr(a->idx),
                                  ag__vk_addr(a->dx.p),
                                  a->g.rows,
                                  a->g.cols,
                                  a->g.ld,
                                  a->dx.rows,
                                  a->dx.cols,
                                  a->dx.ld,
                                  a->idx_stride,
                                  a->axis,
                                  (int32_t)a->idx_dtype,
                                  a->accumulate};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "PICK_BWD's push constants fit");
  /* the shader's work group: 64 rows by 4 columns */
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_LINALG_PICK_BWD), &pc, sizeof pc,
                         clamp_groups((a->dx.rows + 63) / 64), clamp_groups((a->dx.cols + 3) / 4), 1);
}

/* ---- TD_TARGET ---- */

/* Refused: an index dtype other than i32, i64 or f32, and a q of no rows
 * (no value to take). */
static int td_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__td_args *a = args;
  if (a->idx && !index_dtype_ok(a->idx_dtype, 1)) return 0;
  return a->out.cols <= 0 || a->q.rows >= 1;
}

static ag_status run_td(vk_state *s, const void *args) {
  const ag__td_args *a = args;
  if (!td_ok(s, a)) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: td_target with these arguments");
  ag__vk_pc_linalg_td pc = {ag__vk_addr(a->q.p),
                            ag__vk_addr(a->idx),
                            ag__vk_addr(a->reward.p),
                            ag__vk_addr(a->done.p),
                            ag__vk_addr(a->out.p),
                            a->q.rows,
                            a->q.ld,
                            a->idx_stride,
                            a->reward.cols,
                            a->reward.ld,
                            a->done.cols,
                            a->done.ld,
                            a->out.ld,
                            a->out.cols,
                            a->gamma,
                            (int32_t)a->idx_dtype};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "TD_TARGET's push constants fit");
  if (pc.n <= 0) return AG_OK;
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_LINALG_TD), &pc, sizeof pc, ag__vk_groups(pc.n, LOCAL),
                         1, 1);
}

/* ---- LOSS ---- */

/* Past this many elements dpred is written by a pass of its own over many
 * work groups, the sum's single work group then only summing. */
#define LOSS_ONE_PASS ((int64_t)LOCAL * 64)

static ag_status run_loss(vk_state *s, const void *args) {
  const ag__loss_args *a = args;
  ag__vk_pc_linalg_loss pc = {ag__vk_addr(a->pred.p),
                              ag__vk_addr(a->target.p),
                              ag__vk_addr(a->out),
                              ag__vk_addr(a->dpred.p),
                              a->pred.rows,
                              a->pred.cols,
                              a->pred.ld,
                              a->target.rows,
                              a->target.cols,
                              a->target.ld,
                              a->dpred.ld,
                              0,
                              0,
                              a->delta,
                              0.0f,
                              a->kind,
                              0,
                              a->dpred.p != NULL};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "LOSS's push constants fit");
  const int64_t n = a->pred.rows * a->pred.cols;
  pc.inv = 1.0f / (float)n; /* as the reference: no elements give 0 * inf */
  if (n <= 0) pc.rows = 1, pc.cols = 0, pc.grad = 0;
  const int pipe = ag__vk_pipe(s, AG__VK_PIPE_LINALG_LOSS);
  ag_status st;
  if (pc.grad && n > LOSS_ONE_PASS) {
    const uint32_t groups = ag__vk_groups(n, LOCAL);
    pc.pass = 1;
    pc.step_r = ((int64_t)groups * LOCAL) % pc.rows, pc.step_c = ((int64_t)groups * LOCAL) / pc.rows;
    if ((st = ag__vk_dispatch(s, pipe, &pc, sizeof pc, groups, 1, 1))) return st;
    pc.grad = 0;
  }
  pc.pass = 0;
  pc.step_r = LOCAL % pc.rows, pc.step_c = LOCAL / pc.rows;
  return ag__vk_dispatch(s, pipe, &pc, sizeof pc, 1, 1, 1);
}

/* CONV2D: one invocation per output element of the mode (linalg_conv2d.comp). */
static ag_status run_conv2d(vk_state *s, const void *args) {
  const ag__conv2d_args *a = args;
  const ag__conv_dims d = ag__conv_dims_of(a);
  ag__vk_pc_linalg_conv2d pc = {ag__vk_addr(a->x.p),
                                ag__vk_addr(a->w.p),
                                ag__vk_addr(a->y.p),
                                ag__vk_addr(a->b),
                                a->x.ld,
                                a->w.ld,
                                a->y.ld,
                                (int32_t)a->C,
                                (int32_t)a->H,
                                (int32_t)a->W,
                                (int32_t)a->K,
                                (int32_t)a->kh,
                                (int32_t)a->kw,
                                (int32_t)a->stride,
                                (int32_t)a->pad,
                                (int32_t)d.Ho,
                                (int32_t)d.Wo,
                                (int32_t)a->y.cols,
                                (int32_t)a->mode,
                                a->accumulate,
                                a->b != NULL};
  const int64_t total = a->mode == AG__CONV_FWD     ? a->y.cols * a->K * d.P
                        : a->mode == AG__CONV_BWD_X ? a->y.cols * a->C * a->H * a->W
                        : a->mode == AG__CONV_BWD_W ? d.Q * a->K
                                                    : a->K;
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_LINALG_CONV2D), &pc, sizeof pc,
                         clamp_groups((total + LOCAL - 1) / LOCAL), 1, 1);
}

const ag__vk_kernel ag__vk_k_linalg[] = {
    {AG__K_GEMM, run_gemm, gemm_ok, NULL},  {AG__K_REDUCE, run_reduce, reduce_ok, NULL},
    {AG__K_PICK, run_pick, pick_ok, NULL},  {AG__K_PICK_BWD, run_pick_bwd, pick_bwd_ok, NULL},
    {AG__K_TD_TARGET, run_td, td_ok, NULL}, {AG__K_LOSS, run_loss, NULL, NULL},
    {AG__K_CONV2D, run_conv2d, NULL, NULL},
};
const int ag__vk_n_linalg = (int)(sizeof ag__vk_k_linalg / sizeof ag__vk_k_linalg[0]);
