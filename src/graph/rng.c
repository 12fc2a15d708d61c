/* rng.c — device RNG streams: a Philox4x32-10 key (the seed) and a counter
 * kept on the device, so that draws inside a recorded step move on at every
 * replay and give the same numbers on every backend. Uniform integers
 * (AG__K_RANDINT) and standard normal values (AG__K_RANDN) take one counter
 * value each, so the draws of one stream never overlap. */
#include <stdlib.h>

#include "agrl/capture.h"
#include "graph/graph_internal.h"

struct ag_rng {
  ag_ctx *ctx;
  uint64_t seed;
  ag_tensor *counter; /* 1 x 1 i64 on the device */
};

ag_status ag_rng_create(ag_ctx *ctx, uint64_t seed, ag_rng **out) {
  if (!ctx || !out) return ag__fail(AG_ERR_INVALID_ARG, "ag_rng_create: ctx and out must not be NULL");
  ag_rng *r = ag__calloc(1, sizeof *r);
  if (!r) return ag__fail(AG_ERR_OUT_OF_MEMORY, "ag_rng_create: out of host memory");
  ag_status s = ag_tensor_create(ctx, 1, 1, AG_I64, NULL, &r->counter);
  if (s) {
    free(r);
    return s;
  }
  r->ctx = ctx;
  r->seed = seed;
  *out = r;
  return AG_OK;
}

void ag_rng_free(ag_rng *r) {
  if (!r) return;
  ag_tensor_free(r->counter);
  free(r);
}

uint64_t ag__rng_seed(const ag_rng *r) { return r->seed; }

ag_status ag__rng_counter(ag_rng *r, void **ptr) { return ag__tensor_ptr(r->counter, ptr); }
ag_tensor *ag__rng_counter_tensor(const ag_rng *r) { return r->counter; }

ag_status ag_rng_set_counter(ag_rng *r, uint64_t counter) {
  if (!r) return ag__fail(AG_ERR_INVALID_ARG, "ag_rng_set_counter: rng is NULL");
  int64_t v = (int64_t)counter;
  return ag_tensor_write(r->counter, &v, sizeof v);
}

static ag_status randint(ag_rng *r, ag_tensor *bound, int64_t bound_const, int64_t n, ag_dtype dtype,
                         const char *fn, ag_tensor **out) {
  if (!r || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: rng and out must not be NULL", fn);
  if (n < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %lld must be positive", fn, (long long)n);
  if (dtype != AG_I32 && dtype != AG_I64)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dtype %s is not i32 or i64", fn, ag_dtype_name(dtype));
  ag_status s;
  void *bp = NULL;
  if (bound) {
    if ((s = ag__check_tensor(bound, fn, "bound"))) return s;
    if (bound->dtype != AG_I64 || bound->rows * bound->cols != 1)
      return ag__fail(AG_ERR_SHAPE, "%s: bound must be a 1 x 1 i64 tensor", fn);
    if (bound->ctx != r->ctx) return ag__fail(AG_ERR_INVALID_ARG, "%s: bound belongs to another context", fn);
    if ((s = ag__tensor_ptr(bound, &bp))) return s;
  } else if (bound_const < 1) {
    return ag__fail(AG_ERR_INVALID_ARG, "%s: bound = %lld must be positive", fn, (long long)bound_const);
  } else if (dtype == AG_I32 && bound_const > INT32_MAX + 1LL) {
    return ag__fail(AG_ERR_INVALID_ARG, "%s: bound = %lld does not fit i32 indices", fn,
                    (long long)bound_const);
  }
  void *cp;
  if ((s = ag__tensor_ptr(r->counter, &cp))) return s;
  ag_tensor *y;
  if ((s = ag__tensor_temp(r->ctx, n, 1, dtype, &y))) return s;
  ag__randint_args a = {r->seed, cp, bp, bound_const, n, y->data, dtype};
  if ((s = ag__run(r->ctx, AG__K_RANDINT, &a, sizeof a))) return s;
  *out = y;
  return AG_OK;
}

ag_status ag_randint(ag_rng *r, int64_t bound, int64_t n, ag_dtype dtype, ag_tensor **out) {
  return randint(r, NULL, bound, n, dtype, "ag_randint", out);
}

ag_status ag_randint_dev(ag_rng *r, ag_tensor *bound, int64_t n, ag_dtype dtype, ag_tensor **out) {
  if (!bound) return ag__fail(AG_ERR_INVALID_ARG, "ag_randint_dev: bound is NULL");
  return randint(r, bound, 0, n, dtype, "ag_randint_dev", out);
}

ag_status ag_randn(ag_rng *r, int64_t rows, int64_t cols, ag_tensor **out) {
  static const char fn[] = "ag_randn";
  if (!r || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: rng and out must not be NULL", fn);
  if (rows < 1 || cols < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: rows = %lld and cols = %lld must both be positive", fn,
                    (long long)rows, (long long)cols);
  void *cp;
  ag_status s = ag__tensor_ptr(r->counter, &cp);
  if (s) return s;
  ag_tensor *y; /* packed: element (r, c) is value c * rows + r */
  if ((s = ag__tensor_temp(r->ctx, rows, cols, AG_F32, &y))) return s;
  ag__randn_args a = {r->seed, cp, rows * cols, y->data};
  if ((s = ag__run(r->ctx, AG__K_RANDN, &a, sizeof a))) return s;
  *out = y;
  return AG_OK;
}
