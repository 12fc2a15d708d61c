/* k_elementwise.c — the Vulkan kernels of one pass over a matrix: FILL,
 * COPY, MAP, MAP2 and GATHER (shaders fill, copy, map, map2, gather). */
#include "base/base.h"
#include "vulkan/vk_internal.h"

#define LOCAL 256 /* the shaders' local size */

static ag_status run_fill(vk_state *s, const void *args) {
  const ag__fill_args *a = args;
  ag__vk_pc_fill pc = {ag__vk_addr(a->out.p), a->out.rows, a->out.cols, a->out.ld, a->value};
  if (a->out.rows * a->out.cols <= 0) return AG_OK;
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_FILL), &pc, sizeof pc,
                         ag__vk_groups(a->out.rows * a->out.cols, LOCAL), 1, 1);
}

static ag_status run_copy(vk_state *s, const void *args) {
  const ag__copy_args *a = args;
  ag__vk_pc_copy pc = {ag__vk_addr(a->x.p), ag__vk_addr(a->out.p), a->out.rows, a->out.cols, a->x.ld,
                       a->out.ld,           a->accumulate};
  if (a->out.rows * a->out.cols <= 0) return AG_OK;
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_COPY), &pc, sizeof pc,
                         ag__vk_groups(a->out.rows * a->out.cols, LOCAL), 1, 1);
}

static ag_status run_map(vk_state *s, const void *args) {
  const ag__map_args *a = args;
  ag__vk_pc_map pc = {ag__vk_addr(a->x.p), ag__vk_addr(a->out.p), a->x.rows, a->x.cols, a->x.ld,
                      a->out.rows,         a->out.cols,           a->out.ld, a->p0,     a->p1,
                      (int32_t)a->op,      a->accumulate};
  if (a->out.rows * a->out.cols <= 0) return AG_OK;
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_MAP), &pc, sizeof pc,
                         ag__vk_groups(a->out.rows * a->out.cols, LOCAL), 1, 1);
}

static ag_status run_map2(vk_state *s, const void *args) {
  const ag__map2_args *a = args;
  ag__vk_pc_map2 pc = {ag__vk_addr(a->a.p),
                       ag__vk_addr(a->b.p),
                       ag__vk_addr(a->out.p),
                       a->a.rows,
                       a->a.cols,
                       a->a.ld,
                       a->b.rows,
                       a->b.cols,
                       a->b.ld,
                       a->out.rows,
                       a->out.cols,
                       a->out.ld,
                       a->alpha,
                       a->p0,
                       a->p1,
                       (int32_t)a->op,
                       a->accumulate};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "MAP2's push constants fit");
  if (a->out.rows * a->out.cols <= 0) return AG_OK;
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_MAP2), &pc, sizeof pc,
                         ag__vk_groups(a->out.rows * a->out.cols, LOCAL), 1, 1);
}

static int gather_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__gather_args *a = args;
  return a->idx_dtype == AG_I32 || a->idx_dtype == AG_I64;
}

#define GATHER_GROUPS 8192

/* A wide gather's invocations take four items each (the shader reads four
 * before it writes them: all but a tail of each gather goes that way); a
 * narrow one's take one each; at most GATHER_GROUPS groups. */
static uint32_t gather_groups(int64_t items, int wide) {
  const uint32_t g = ag__vk_groups(wide ? (items + 3) / 4 : items, LOCAL);
  return g < GATHER_GROUPS ? g : GATHER_GROUPS;
}

static ag_status run_gather(vk_state *s, const void *args) {
  const ag__gather_args *a = args;
  if (!gather_ok(s, a)) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: gather indices must be i32 or i64");
  ag__vk_pc_gather pc = {ag__vk_addr(a->src),
                         ag__vk_addr(a->idx),
                         ag__vk_addr(a->dst),
                         a->rows,
                         a->capacity,
                         a->n,
                         a->scale,
                         (int32_t)a->src_dtype,
                         (int32_t)a->idx_dtype,
                         0};
  if (a->rows * a->n <= 0) return AG_OK;
  /* the flattened grid's items (four words each when copied whole and both
   * ends are 16-byte aligned), in at most GATHER_GROUPS groups: enough to
   * fill a large device, each invocation striding over the rest */
  const int wide = a->src_dtype == AG_F32 && a->scale == 1.0f && a->rows % 4 == 0 && pc.src_p % 16 == 0 &&
                   pc.dst_p % 16 == 0;
  pc.wide = wide;
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_GATHER), &pc, sizeof pc,
                         gather_groups((wide ? a->rows / 4 : a->rows) * a->n, wide), 1, 1);
}

const ag__vk_kernel ag__vk_k_elementwise[] = {
    {AG__K_FILL, run_fill, NULL, NULL},
    {AG__K_COPY, run_copy, NULL, NULL},
    {AG__K_MAP, run_map, NULL, NULL},
    {AG__K_MAP2, run_map2, NULL, NULL},
    {AG__K_GATHER, run_gather, gather_ok, NULL},
};
const int ag__vk_n_elementwise = (int)(sizeof ag__vk_k_elementwise / sizeof ag__vk_k_elementwise[0]);
