/* k_random.c — the Vulkan kernels RANDINT, RANDN, NSTEP and the prioritized-replay tree (PER_SET, PER_FILL,
 * PER_SAMPLE) (shaders random_*.comp).
 *
 * RANDINT and RANDN draw the CPU's bits (random_philox.glsl, random_f64.glsl: base/philox.h and
 * base/normal.h step for step). The counter on the device is read by every invocation and advanced
 * once all have read it: by the kernel's own dispatch when it is one work group (a barrier in the
 * shader), else by a one-invocation dispatch after it. Nothing of the host's counter is baked in, so
 * a recorded call draws new numbers at each replay.
 *
 * RANDN and the tree kernels compute in doubles: without shaderFloat64 (ag__vk_has_f64) they are
 * reported unsupported. The tree kernels run their steps (leaves, each level bottom up, the root) in
 * one dispatch of one work group, a barrier between steps, when the work is small, else a dispatch a
 * step, over as many groups as the step needs. */
#include "base/base.h"
#include "base/per_tree.h"
#include "vulkan/vk_internal.h"

#define LOCAL 256 /* the shaders' local size */

/* The largest work done by one work group in one dispatch (more: one dispatch a step, many groups). */
#ifndef RANDOM_ONE_GROUP
#define RANDOM_ONE_GROUP 4096
#endif
#ifndef RANDN_ONE_GROUP
#define RANDN_ONE_GROUP 2048
#endif
#ifndef PER_SAMPLE_ONE_GROUP
#define PER_SAMPLE_ONE_GROUP 1024
#endif

ag_status ag__vk_advance(vk_state *s, uint64_t *counter, int64_t n) {
  ag__vk_pc_random_advance pc = {ag__vk_addr(counter), n};
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_RANDOM_ADVANCE), &pc, sizeof pc, 1, 1, 1);
}

/* ---- RANDINT ---- */

static int randint_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__randint_args *a = args;
  return a->out_dtype == AG_I32 || a->out_dtype == AG_I64;
}

static ag_status run_randint(vk_state *s, const void *args) {
  const ag__randint_args *a = args;
  if (!randint_ok(s, a)) return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: randint output must be i32 or i64");
  if (a->n < 0) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: randint of %lld values", (long long)a->n);
  if (a->n == 0) return AG_OK;
  const int one = a->n <= RANDOM_ONE_GROUP;
  ag__vk_pc_random_randint pc = {a->seed,
                                 ag__vk_addr(a->counter),
                                 ag__vk_addr(a->bound_dev),
                                 ag__vk_addr(a->out),
                                 a->bound_const,
                                 a->n,
                                 (int32_t)a->out_dtype,
                                 one};
  ag_status st = ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_RANDOM_RANDINT), &pc, sizeof pc,
                                 one ? 1 : ag__vk_groups(a->n, LOCAL), 1, 1);
  return st || one ? st : ag__vk_advance(s, a->counter, a->n);
}

/* ---- RANDN (doubles) ---- */

static int randn_ok(const vk_state *s, const void *args) {
  (void)args;
  return ag__vk_has_f64(s);
}

static ag_status run_randn(vk_state *s, const void *args) {
  const ag__randn_args *a = args;
  if (!randn_ok(s, a)) return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: randn needs shaderFloat64");
  if (a->n < 0) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: randn of %lld values", (long long)a->n);
  if (a->n == 0) return AG_OK;
  const int one = a->n <= RANDN_ONE_GROUP;
  ag__vk_pc_random_randn pc = {a->seed, ag__vk_addr(a->counter), ag__vk_addr(a->out), a->n, one};
  ag_status st = ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_RANDOM_RANDN), &pc, sizeof pc,
                                 one ? 1 : ag__vk_groups(a->n, LOCAL), 1, 1);
  return st || one ? st : ag__vk_advance(s, a->counter, a->n);
}

/* ---- NSTEP ---- */

static int row_fits(int64_t row) { return row >= INT32_MIN && row <= INT32_MAX; }

/* The row indices travel as 32-bit integers (the push constants are full): a larger one is refused. */
static int nstep_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__nstep_args *a = args;
  return a->dtype >= AG_F32 && a->dtype <= AG_I64 && (a->idx_dtype == AG_I32 || a->idx_dtype == AG_I64) &&
         row_fits(a->rew_row) && row_fits(a->term_row) && row_fits(a->trunc_row);
}

static ag_status run_nstep(vk_state *s, const void *args) {
  const ag__nstep_args *a = args;
  if (!nstep_ok(s, a)) return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: nstep's dtypes or rows");
  if (a->B <= 0) return AG_OK;
  /* every read stays in the table: the rows inside a column, steps that wrap once at most */
  if (a->capacity < 1 || a->stride < 1 || a->stride > a->capacity || a->rew_row < 0 ||
      a->rew_row >= a->rows || a->term_row < 0 || a->term_row >= a->rows || a->trunc_row >= a->rows)
    return ag__fail(AG_ERR_INVALID_ARG, "vulkan: nstep's capacity, stride or rows");
  ag__vk_pc_random_nstep pc = {ag__vk_addr(a->table),
                               ag__vk_addr(a->size_dev),
                               ag__vk_addr(a->pos_dev),
                               ag__vk_addr(a->idx),
                               ag__vk_addr(a->ret),
                               ag__vk_addr(a->discount),
                               ag__vk_addr(a->last),
                               a->rows,
                               a->capacity,
                               a->idx_stride,
                               a->B,
                               a->stride,
                               (int32_t)a->rew_row,
                               (int32_t)a->term_row,
                               (int32_t)a->trunc_row,
                               a->scale,
                               a->gamma,
                               a->n,
                               (int32_t)a->dtype,
                               (int32_t)a->idx_dtype};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "NSTEP's push constants fit");
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_RANDOM_NSTEP), &pc, sizeof pc,
                         ag__vk_groups(a->B, LOCAL), 1, 1);
}

/* ---- the prioritized-replay tree (doubles) ---- */

static int depth_ok(int depth) { return depth >= 1 && depth <= AG__PER_MAX_DEPTH; }

/* Leaves of a tree of `depth` levels: 16^depth. */
static int64_t per_leaves(int depth) { return (int64_t)1 << (4 * depth); }

/* PER_SET marks the last entry naming a leaf with 2^31 + j in a 32-bit word: at most 2^31 entries. */
static int per_set_ok(const vk_state *s, const void *args) {
  const ag__per_set_args *a = args;
  return ag__vk_has_f64(s) && depth_ok(a->depth) && (a->idx_dtype == AG_I32 || a->idx_dtype == AG_I64) &&
         a->n <= INT32_MAX;
}

static ag_status run_per_set(vk_state *s, const void *args) {
  const ag__per_set_args *a = args;
  if (!per_set_ok(s, a))
    return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: per_set needs shaderFloat64, i32 / i64 indices, n < 2^31");
  const int64_t n = a->n > 0 ? a->n : 0;
  ag__vk_pc_random_per_set pc = {
      ag__vk_addr(a->tree), ag__vk_addr(a->state), ag__vk_addr(a->idx), ag__vk_addr(a->prio),
      ag__vk_addr(a->mask), n, a->prio_stride,
      /* indices at or past the table's columns are skipped, and past the tree's leaves too */
      a->cols < per_leaves(a->depth) ? a->cols : per_leaves(a->depth), a->alpha, a->depth,
      (int32_t)a->idx_dtype, 0, 0};
  const int steps = a->depth + 3; /* reset, mark, write, depth - 1 levels, the root */
  const int pipe = ag__vk_pipe(s, AG__VK_PIPE_RANDOM_PER_SET);
  if (n <= RANDOM_ONE_GROUP) {
    pc.s_end = steps;
    return ag__vk_dispatch(s, pipe, &pc, sizeof pc, 1, 1, 1);
  }
  for (int step = 0; step < steps; step++) {
    pc.s_begin = step, pc.s_end = step + 1;
    ag_status st =
        ag__vk_dispatch(s, pipe, &pc, sizeof pc, step == steps - 1 ? 1 : ag__vk_groups(n, LOCAL), 1, 1);
    if (st) return st;
  }
  return AG_OK;
}

static int per_ok(const vk_state *s, int depth) { return ag__vk_has_f64(s) && depth_ok(depth); }

static int per_fill_ok(const vk_state *s, const void *args) {
  return per_ok(s, ((const ag__per_fill_args *)args)->depth);
}

/* PER_FILL with k = 0 changes no leaf and so no node: nothing is queued. */
static ag_status run_per_fill(vk_state *s, const void *args) {
  const ag__per_fill_args *a = args;
  if (!per_fill_ok(s, a)) return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: per_fill needs shaderFloat64");
  if (a->k == 0) return AG_OK;
  if (a->pos < 0 || a->k < 0 || a->pos > per_leaves(a->depth) - a->k)
    return ag__fail(AG_ERR_INVALID_ARG, "vulkan: per_fill of leaves %lld + %lld", (long long)a->pos,
                    (long long)a->k);
  ag__vk_pc_random_per_fill pc = {ag__vk_addr(a->tree),
                                  ag__vk_addr(a->state),
                                  ag__vk_addr(a->mask),
                                  a->pos,
                                  a->k,
                                  a->alpha,
                                  a->depth,
                                  0,
                                  0};
  const int pipe = ag__vk_pipe(s, AG__VK_PIPE_RANDOM_PER_FILL);
  /* step 0 the k leaves, step d the nodes of level depth-1-d above them, step depth the root; the
   * steps from the first of at most RANDOM_ONE_GROUP nodes on go in one dispatch of one group */
  const int steps = a->depth + 1;
  for (int step = 0; step < steps; step++) {
    const int sh = 4 * step;
    const int64_t count = step == a->depth ? 1 : ((a->pos + a->k - 1) >> sh) - (a->pos >> sh) + 1;
    const int one = count <= RANDOM_ONE_GROUP;
    pc.s_begin = step, pc.s_end = one ? steps : step + 1;
    ag_status st = ag__vk_dispatch(s, pipe, &pc, sizeof pc, one ? 1 : ag__vk_groups(count, LOCAL), 1, 1);
    if (st || one) return st;
  }
  return AG_OK;
}

static int per_sample_ok(const vk_state *s, const void *args) {
  return per_ok(s, ((const ag__per_sample_args *)args)->depth);
}

static ag_status run_per_sample(vk_state *s, const void *args) {
  const ag__per_sample_args *a = args;
  if (!per_sample_ok(s, a)) return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: per_sample needs shaderFloat64");
  if (a->B <= 0) return AG_OK;
  ag__vk_pc_random_per_sample pc = {ag__vk_addr(a->tree),
                                    ag__vk_addr(a->counter),
                                    ag__vk_addr(a->size_dev),
                                    ag__vk_addr(a->idx),
                                    ag__vk_addr(a->w),
                                    ag__vk_addr(a->beta_dev),
                                    a->seed,
                                    a->B,
                                    a->beta,
                                    a->depth,
                                    0,
                                    a->beta_dev != NULL};
  const int pipe = ag__vk_pipe(s, AG__VK_PIPE_RANDOM_PER_SAMPLE);
  if (a->B <= PER_SAMPLE_ONE_GROUP) return ag__vk_dispatch(s, pipe, &pc, sizeof pc, 1, 1, 1);
  /* the samples over many groups, then one group for the largest weight, the division, the counter */
  pc.phase = 1;
  ag_status st = ag__vk_dispatch(s, pipe, &pc, sizeof pc, ag__vk_groups(a->B, LOCAL), 1, 1);
  if (st) return st;
  pc.phase = 2;
  return ag__vk_dispatch(s, pipe, &pc, sizeof pc, 1, 1, 1);
}

const ag__vk_kernel ag__vk_k_random[] = {
    {AG__K_RANDINT, run_randint, randint_ok, NULL},
    {AG__K_RANDN, run_randn, randn_ok, NULL},
    {AG__K_NSTEP, run_nstep, nstep_ok, NULL},
    {AG__K_PER_SET, run_per_set, per_set_ok, NULL},
    {AG__K_PER_FILL, run_per_fill, per_fill_ok, NULL},
    {AG__K_PER_SAMPLE, run_per_sample, per_sample_ok, NULL},
};
const int ag__vk_n_random = (int)(sizeof ag__vk_k_random / sizeof ag__vk_k_random[0]);
