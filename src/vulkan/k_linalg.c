/* k_linalg.c — the Vulkan kernels GEMM, REDUCE, PICK, PICK_BWD, TD_TARGET and
 * LOSS (shaders linalg_*.comp). Every sum runs in an order fixed by the
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
  struct {
    uint64_t x, idx, out;
    int64_t x_ld, out_ld, n, limit, idx_stride;
    int32_t axis, idx_dtype, accumulate;
  } pc = {ag__vk_addr(a->x.p),
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
  return ag__vk_dispatch(s, ag__vk_pipe(s, "linalg_pick"), &pc, sizeof pc, ag__vk_groups(pc.n, LOCAL), 1, 1);
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
  struct {
    uint64_t g, idx, dx;
    int64_t g_rows, g_cols, g_ld, rows, cols, ld, idx_stride;
    int32_t axis, idx_dtype, accumulate;
  } pc = {ag__vk_addr(a->g.p),
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
  return ag__vk_dispatch(s, ag__vk_pipe(s, "linalg_pick_bwd"), &pc, sizeof pc,
                         clamp_groups((a->dx.rows + 63) / 64), clamp_groups((a->dx.cols + 3) / 4), 1);
}

const ag__vk_kernel ag__vk_k_linalg[] = {
    {AG__K_PICK, run_pick, pick_ok, NULL},
    {AG__K_PICK_BWD, run_pick_bwd, pick_bwd_ok, NULL},
};
const int ag__vk_n_linalg = (int)(sizeof ag__vk_k_linalg / sizeof ag__vk_k_linalg[0]);
