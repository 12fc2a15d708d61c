/* tensor.c — persistent tensors, the accessors shared by all tensors, and
 * the helpers every core file uses on a handle: temporary headers (views),
 * the check of a live handle and its device pointer. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

static int dtype_ok(ag_dtype dt) { return (int)dt >= 0 && dt < AG_DTYPE_COUNT_; }

ag_status ag_tensor_create(ag_ctx *ctx, int64_t rows, int64_t cols, ag_dtype dtype, const void *host,
                           ag_tensor **out) {
  static const char fn[] = "ag_tensor_create";
  if (!ctx || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx and out must not be NULL", fn);
  if (rows < 1 || cols < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: rows = %lld and cols = %lld must both be positive", fn,
                    (long long)rows, (long long)cols);
  if (!dtype_ok(dtype)) return ag__fail(AG_ERR_INVALID_ARG, "%s: dtype %d is unknown", fn, (int)dtype);
  size_t bytes;
  if (!ag__mul3((uint64_t)rows, (uint64_t)cols, ag_dtype_size(dtype), &bytes))
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: %lld x %lld values of %s overflow the address space", fn,
                    (long long)rows, (long long)cols, ag_dtype_name(dtype));
  ag_tensor *t = ag__calloc(1, sizeof *t);
  if (!t) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  t->ctx = ctx;
  t->rows = rows;
  t->cols = cols;
  t->ld = rows;
  t->dtype = dtype;
  t->flags = AG__T_PERSISTENT;
  t->node = -1;
  ag_status s = ag__store_init(ctx, &t->store, bytes, AG__OWNER_TENSOR, t, fn);
  if (s == AG_OK && host) s = ag__mem_upload_copy(ctx, fn, t->store.ptr, host, bytes);
  if (s) {
    ag__store_release(ctx, &t->store);
    free(t);
    return s;
  }
  *out = t;
  return AG_OK;
}

void ag_tensor_free(ag_tensor *t) {
  if (!t || !(t->flags & AG__T_PERSISTENT) || (t->flags & (AG__T_FREED | AG__T_IS_GRAD))) return;
  if (t->grad) {
    t->grad->flags &= ~AG__T_IS_GRAD;
    ag_tensor_free(t->grad);
  }
  ag__store_release(t->ctx, &t->store);
  free(t);
}

int64_t ag_tensor_rows(const ag_tensor *t) { return t ? t->rows : 0; }
int64_t ag_tensor_cols(const ag_tensor *t) { return t ? t->cols : 0; }
int64_t ag_tensor_numel(const ag_tensor *t) { return t ? t->rows * t->cols : 0; }
ag_dtype ag_tensor_dtype(const ag_tensor *t) { return t ? t->dtype : AG_F32; }
ag_ctx *ag_tensor_ctx(const ag_tensor *t) { return t ? t->ctx : NULL; }

static size_t tensor_bytes(const ag_tensor *t) {
  return (size_t)t->rows * (size_t)t->cols * ag_dtype_size(t->dtype);
}

/* Whether t's elements are one run of memory: a column, or columns without
 * gaps between them (a row view of a taller tensor has gaps). */
static int packed(const ag_tensor *t) { return t->ld == t->rows || t->cols == 1; }

/* Bytes from t's first element to one past its last: the columns and the
 * gaps between them. */
static size_t span_bytes(const ag_tensor *t) {
  return ((size_t)(t->cols - 1) * (size_t)t->ld + (size_t)t->rows) * ag_dtype_size(t->dtype);
}

/* Drains the span of a view into packed rows x cols values. */
typedef struct unspan {
  char *dst;
  size_t es, rows, ld;
} unspan;

static void drain_unspan(const void *host_src, size_t off, size_t len, void *user) {
  const unspan *u = user;
  const char *src = host_src;
  for (size_t e = off / u->es, end = (off + len) / u->es; e < end;) {
    size_t c = e / u->ld, r = e % u->ld;
    if (r >= u->rows) { /* a gap: skip to the next column */
      e += u->ld - r;
      continue;
    }
    size_t run = u->rows - r < end - e ? u->rows - r : end - e;
    memcpy(u->dst + (c * u->rows + r) * u->es, src + (e * u->es - off), run * u->es);
    e += run;
  }
}

ag_status ag_tensor_read(const ag_tensor *t, void *dst, size_t dst_bytes) {
  static const char fn[] = "ag_tensor_read";
  ag_status s = ag__check_tensor(t, fn, "t");
  if (s) return s;
  size_t need = tensor_bytes(t);
  if (!dst) return ag__fail(AG_ERR_INVALID_ARG, "%s: dst is NULL", fn);
  if (dst_bytes < need)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dst holds %zu bytes, the %lld x %lld %s tensor needs %zu", fn,
                    dst_bytes, (long long)t->rows, (long long)t->cols, ag_dtype_name(t->dtype), need);
  if ((s = ag__not_recording(t->ctx, fn))) return s;
  void *p;
  s = ag__tensor_ptr((ag_tensor *)t, &p);
  if (s) return s;
  if (packed(t)) return ag__mem_download_copy(t->ctx, fn, dst, p, need);
  if (t->dtype == AG_F32) { /* packed on the device first: only the view's values cross */
    ag_tensor *c;
    if ((s = ag__tensor_temp(t->ctx, t->rows, t->cols, AG_F32, &c))) return s;
    ag__copy_args a = {{p, t->rows, t->cols, t->ld}, {c->data, c->rows, c->cols, c->ld}, 0};
    if ((s = ag__run(t->ctx, AG__K_COPY, &a, sizeof a))) return s;
    return ag__mem_download_copy(t->ctx, fn, dst, c->data, need);
  }
  unspan u = {dst, ag_dtype_size(t->dtype), (size_t)t->rows, (size_t)t->ld};
  return ag__mem_download(t->ctx, fn, p, span_bytes(t), drain_unspan, &u);
}

ag_status ag__tensor_part(ag_tensor *t, const void *src, const char *fn, ag__upload_part *out) {
  if (!packed(t)) return ag__fail(AG_ERR_SHAPE, "%s: the tensor has gaps between its columns", fn);
  void *p;
  ag_status s = ag__tensor_ptr(t, &p);
  if (s) return s;
  out->dst = p;
  out->bytes = tensor_bytes(t);
  out->fill = ag__fill_copy;
  out->user = (void *)src;
  return AG_OK;
}

ag_status ag_tensor_write(ag_tensor *t, const void *src, size_t src_bytes) {
  static const char fn[] = "ag_tensor_write";
  ag_status s = ag__check_tensor(t, fn, "t");
  if (s) return s;
  size_t need = tensor_bytes(t);
  if (!src) return ag__fail(AG_ERR_INVALID_ARG, "%s: src is NULL", fn);
  if (src_bytes != need)
    return ag__fail(AG_ERR_SHAPE, "%s: src holds %zu bytes, the %lld x %lld %s tensor has %zu", fn, src_bytes,
                    (long long)t->rows, (long long)t->cols, ag_dtype_name(t->dtype), need);
  if ((s = ag__not_recording(t->ctx, fn))) return s;
  void *p;
  s = ag__tensor_ptr(t, &p);
  if (s) return s;
  if (packed(t)) return ag__mem_upload_copy(t->ctx, fn, p, src, need);
  if (t->dtype == AG_F32) { /* uploaded packed, then spread over the view's columns on the device */
    ag_tensor *c;
    if ((s = ag__tensor_temp(t->ctx, t->rows, t->cols, AG_F32, &c)) ||
        (s = ag__mem_upload_copy(t->ctx, fn, c->data, src, need)))
      return s;
    ag__copy_args a = {{c->data, c->rows, c->cols, c->ld}, {p, t->rows, t->cols, t->ld}, 0};
    return ag__run(t->ctx, AG__K_COPY, &a, sizeof a);
  }
  /* other dtypes: the span read, the view's values put in, the span written
   * back (the gaps keep what they held: nothing is queued in between) */
  size_t span = span_bytes(t), es = ag_dtype_size(t->dtype);
  char *buf = ag__malloc(span);
  if (!buf) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory for %zu bytes", fn, span);
  s = ag__mem_download_copy(t->ctx, fn, buf, p, span);
  for (int64_t c = 0; !s && c < t->cols; c++)
    memcpy(buf + (size_t)c * (size_t)t->ld * es, (const char *)src + (size_t)c * (size_t)t->rows * es,
           (size_t)t->rows * es);
  if (!s) s = ag__mem_upload_copy(t->ctx, fn, p, buf, span);
  free(buf);
  return s;
}

/* ---- headers (also of the workspace's temporaries and of wrapped memory) ---- */

/* A zeroed header from the slabs, or NULL when host memory runs out. */
static ag_tensor *new_header(ag__workspace *ws) {
  if (!ws->slab_cur || ws->slab_used == AG__TENSOR_SLAB) {
    ag__tensor_slab *next = ws->slab_cur ? ws->slab_cur->next : ws->slabs;
    if (!next) {
      next = ag__calloc(1, sizeof *next);
      if (next) next->items = ag__calloc(AG__TENSOR_SLAB, sizeof *next->items);
      if (!next || !next->items) {
        free(next);
        return NULL;
      }
      if (ws->slab_cur)
        ws->slab_cur->next = next;
      else
        ws->slabs = next;
    }
    ws->slab_cur = next;
    ws->slab_used = 0;
  }
  ag_tensor *t = &ws->slab_cur->items[ws->slab_used++];
  memset(t, 0, sizeof *t);
  t->node = -1;
  return t;
}

ag_status ag__tensor_view(ag_ctx *ctx, int64_t rows, int64_t cols, int64_t ld, ag_dtype dtype, void *data,
                          ag_tensor **out) {
  ag_tensor *t = new_header(ctx->ws);
  if (!t) return ag__fail(AG_ERR_OUT_OF_MEMORY, "workspace: out of host memory for tensor headers");
  t->ctx = ctx;
  t->rows = rows;
  t->cols = cols;
  t->ld = ld;
  t->dtype = dtype;
  t->data = data;
  *out = t;
  return AG_OK;
}

ag_status ag__check_tensor(const ag_tensor *t, const char *fn, const char *what) {
  if (!t) return ag__fail(AG_ERR_INVALID_ARG, "%s: %s is NULL", fn, what);
  if (t->flags & AG__T_FREED)
    return ag__fail(AG_ERR_FREED, "%s: %s has been freed (or its workspace was reset)", fn, what);
  return AG_OK;
}

ag_status ag__tensor_ptr(ag_tensor *t, void **out) {
  if (t->flags & AG__T_PERSISTENT) {
    ag_status s = ag__store_ensure(t->ctx, &t->store);
    if (s) return s;
    *out = t->store.ptr;
  } else {
    *out = t->data;
  }
  return AG_OK;
}
