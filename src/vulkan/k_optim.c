/* k_optim.c — the Vulkan kernels ADAM_PREP, ADAM, SUMSQ, AXPBY, CONVERT and
 * SET_I64 (shaders optim_prep, optim_adam, optim_sumsq, optim_axpby,
 * optim_convert, optim_set_i64).
 *
 * The multi-tensor kernels take one argument block (mt_args, through
 * ag__vk_args) naming every tensor, and one dispatch covers them all: the
 * tensors' elements are cut into chunks of MT_CHUNK, first[k] the first
 * chunk of tensor k, and a work group finds its tensor from its chunk
 * (optim_mt.glsl). ADAM with prep is two dispatches, ADAM_PREP's one
 * thread and then the elementwise step reading the values it stored, so
 * no scratch is needed. */
#include "base/base.h"
#include "vulkan/vk_internal.h"

#define LOCAL 256            /* the elementwise shaders' local size */
#define MT_CHUNK (LOCAL * 4) /* elements a work group takes (optim_adam, optim_axpby) */

static int count_ok(int count) { return count >= 0 && count <= AG__MT_MAX; }

/* The argument block of `count` entries into device memory (optim_mt.glsl:
 * 1 + 6 count words, first[0 .. count], then each entry's n, p, g, m and v,
 * so a call copies only what it names); *chunks: the chunks of MT_CHUNK
 * elements over all of them. */
static ag_status mt_args(vk_state *s, int count, const ag__mt_entry *t, uint64_t *addr, int64_t *chunks) {
  uint64_t w[1 + 6 * AG__MT_MAX];
  uint64_t *first = w, *n = w + count + 1, *p = n + count, *g = p + count, *m = g + count, *v = m + count;
  int64_t c = 0;
  for (int k = 0; k < count; k++) {
    const int64_t len = t[k].n > 0 ? t[k].n : 0;
    first[k] = (uint64_t)c;
    n[k] = (uint64_t)len;
    p[k] = ag__vk_addr(t[k].p);
    g[k] = ag__vk_addr(t[k].g);
    m[k] = ag__vk_addr(t[k].m);
    v[k] = ag__vk_addr(t[k].v);
    c += (len + MT_CHUNK - 1) / MT_CHUNK;
  }
  first[count] = (uint64_t)c;
  *chunks = c;
  return ag__vk_args(s, w, (size_t)(1 + 6 * count) * sizeof w[0], addr);
}

static int adam_ok(const vk_state *s, const void *args) {
  (void)s;
  return count_ok(((const ag__adam_args *)args)->count);
}

static ag_status prep(vk_state *s, const ag__adam_args *a) {
  ag__vk_pc_optim_prep pc = {ag__vk_addr(a->state), a->b1, a->b2, a->max_norm};
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_OPTIM_PREP), &pc, sizeof pc, 1, 1, 1);
}

static ag_status run_adam_prep(vk_state *s, const void *args) { return prep(s, args); }

static ag_status run_adam(vk_state *s, const void *args) {
  const ag__adam_args *a = args;
  if (!count_ok(a->count)) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: adam takes 0 to 48 tensors");
  ag_status st;
  if (a->prep && (st = prep(s, a)) != AG_OK) return st;
  uint64_t addr;
  int64_t chunks;
  if ((st = mt_args(s, a->count, a->t, &addr, &chunks)) != AG_OK) return st;
  if (chunks == 0) return AG_OK;
  ag__vk_pc_optim_adam pc = {addr,  ag__vk_addr(a->state), a->lr,   a->b1, a->b2, a->eps,
                             a->wd, a->sgd != 0,           a->count};
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_OPTIM_ADAM), &pc, sizeof pc, ag__vk_groups(chunks, 1),
                         1, 1);
}

static ag_status run_sumsq(vk_state *s, const void *args) {
  const ag__adam_args *a = args;
  if (!count_ok(a->count)) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: sumsq takes 0 to 48 tensors");
  if (a->count == 0) return AG_OK;
  uint64_t addr;
  int64_t chunks;
  ag_status st = mt_args(s, a->count, a->t, &addr, &chunks);
  if (st != AG_OK) return st;
  ag__vk_pc_optim_sumsq pc = {addr, ag__vk_addr(a->state), a->count};
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_OPTIM_SUMSQ), &pc, sizeof pc, 1, 1, 1);
}

static int axpby_ok(const vk_state *s, const void *args) {
  (void)s;
  return count_ok(((const ag__axpby_args *)args)->count);
}

static ag_status run_axpby(vk_state *s, const void *args) {
  const ag__axpby_args *a = args;
  if (!count_ok(a->count)) return ag__fail(AG_ERR_INVALID_ARG, "vulkan: axpby takes 0 to 48 tensors");
  uint64_t addr;
  int64_t chunks;
  ag_status st = mt_args(s, a->count, a->t, &addr, &chunks);
  if (st != AG_OK) return st;
  if (chunks == 0) return AG_OK;
  ag__vk_pc_optim_axpby pc = {addr, a->a, a->b, a->count};
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_OPTIM_AXPBY), &pc, sizeof pc, ag__vk_groups(chunks, 1),
                         1, 1);
}

static int dtype_ok(ag_dtype dt) {
  return dt == AG_F32 || dt == AG_F16 || dt == AG_BF16 || dt == AG_U8 || dt == AG_I32 || dt == AG_I64;
}

/* Refused: a dtype outside ag_dtype, or an operand not aligned to its
 * element size (the shader reads and writes 4- and 8-byte elements whole
 * and narrower ones within their aligned words). */
static int convert_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__convert_args *a = args;
  return dtype_ok(a->src_dtype) && dtype_ok(a->dst_dtype) &&
         ag__vk_addr(a->src) % ag_dtype_size(a->src_dtype) == 0 &&
         ag__vk_addr(a->dst) % ag_dtype_size(a->dst_dtype) == 0;
}

static ag_status run_convert(vk_state *s, const void *args) {
  const ag__convert_args *a = args;
  if (!convert_ok(s, a))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "vulkan: convert takes the dtypes of ag_dtype, operands aligned to their elements");
  if (a->rows <= 0 || a->cols <= 0) return AG_OK;
  int64_t rows = a->rows, cols = a->cols;
  if (a->src_ld == rows && a->dst_ld == rows) rows *= cols, cols = 1; /* contiguous: one column */
  const int64_t es = (int64_t)ag_dtype_size(a->dst_dtype);
  /* narrow destinations: a thread per aligned word of a column, one word
   * more than the column's bytes fill when a column may start mid-word */
  int64_t words = 0, items = rows * cols;
  if (es < 4) {
    const int aligned = (ag__vk_addr(a->dst) & 3) == 0 && (cols == 1 || (a->dst_ld * es) % 4 == 0);
    words = (rows * es + 3) / 4 + (aligned ? 0 : 1);
    items = words * cols;
  }
  ag__vk_pc_optim_convert pc = {
      ag__vk_addr(a->src),   ag__vk_addr(a->dst),  a->src_ld, a->dst_ld, rows, cols, words, items,
      (int32_t)a->src_dtype, (int32_t)a->dst_dtype};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "CONVERT's push constants fit");
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_OPTIM_CONVERT), &pc, sizeof pc,
                         ag__vk_groups(items, LOCAL), 1, 1);
}

static ag_status run_set_i64(vk_state *s, const void *args) {
  const ag__set_i64_args *a = args;
  ag__vk_pc_optim_set_i64 pc = {ag__vk_addr(a->dst), a->value};
  return ag__vk_dispatch(s, ag__vk_pipe(s, AG__VK_PIPE_OPTIM_SET_I64), &pc, sizeof pc, 1, 1, 1);
}

const ag__vk_kernel ag__vk_k_optim[] = {
    {AG__K_ADAM_PREP, run_adam_prep, NULL, NULL},   {AG__K_ADAM, run_adam, adam_ok, NULL},
    {AG__K_SUMSQ, run_sumsq, adam_ok, NULL},        {AG__K_AXPBY, run_axpby, axpby_ok, NULL},
    {AG__K_CONVERT, run_convert, convert_ok, NULL}, {AG__K_SET_I64, run_set_i64, NULL, NULL},
};
const int ag__vk_n_optim = (int)(sizeof ag__vk_k_optim / sizeof ag__vk_k_optim[0]);
