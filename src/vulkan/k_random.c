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

static ag_status advance(vk_state *s, uint64_t *counter, int64_t n) {
  struct {
    uint64_t counter;
    int64_t n;
  } pc = {ag__vk_addr(counter), n};
  return ag__vk_dispatch(s, ag__vk_pipe(s, "random_advance"), &pc, sizeof pc, 1, 1, 1);
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
  struct {
    uint64_t seed, counter, bound_dev, out;
    int64_t bound_const, n;
    int32_t out_dtype, advance;
  } pc = {a->seed,
          ag__vk_addr(a->counter),
          ag__vk_addr(a->bound_dev),
          ag__vk_addr(a->out),
          a->bound_const,
          a->n,
          (int32_t)a->out_dtype,
          one};
  ag_status st = ag__vk_dispatch(s, ag__vk_pipe(s, "random_randint"), &pc, sizeof pc,
                                 one ? 1 : ag__vk_groups(a->n, LOCAL), 1, 1);
  return st || one ? st : advance(s, a->counter, a->n);
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
  struct {
    uint64_t seed, counter, out;
    int64_t n;
    int32_t advance, pad;
  } pc = {a->seed, ag__vk_addr(a->counter), ag__vk_addr(a->out), a->n, one, 0};
  ag_status st = ag__vk_dispatch(s, ag__vk_pipe(s, "random_randn"), &pc, sizeof pc,
                                 one ? 1 : ag__vk_groups(a->n, LOCAL), 1, 1);
  return st || one ? st : advance(s, a->counter, a->n);
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
  struct {
    uint64_t table, size_dev, pos_dev, idx, ret, discount, last;
    int64_t rows, capacity, idx_stride, B, stride;
    int32_t rew_row, term_row, trunc_row;
    float scale, gamma;
    int32_t n, dtype, idx_dtype;
  } pc = {ag__vk_addr(a->table),
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
  return ag__vk_dispatch(s, ag__vk_pipe(s, "random_nstep"), &pc, sizeof pc, ag__vk_groups(a->B, LOCAL), 1, 1);
}

const ag__vk_kernel ag__vk_k_random[] = {
    {AG__K_RANDINT, run_randint, randint_ok, NULL},
    {AG__K_RANDN, run_randn, randn_ok, NULL},
    {AG__K_NSTEP, run_nstep, nstep_ok, NULL},
};
const int ag__vk_n_random = (int)(sizeof ag__vk_k_random / sizeof ag__vk_k_random[0]);
