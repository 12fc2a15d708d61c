/* buffer.c — the device buffer (DESIGN.md section 1, S1–S22).
 *
 * Everything is validated before any memory is touched, so a failing call
 * changes nothing. The value lives in a store (store.c) that follows the
 * context across device switches. Transfers go through the counted wrappers
 * of ctx.c: a write moves rows*k*elem bytes up (S7), a gather only the
 * indices (S14), and conversions from f32 to a compact dtype happen on the
 * host side of the transfer, so only compact bytes cross the bus.
 */
#include <stdlib.h>
#include <string.h>

#include "agrl/export.h"
#include "core/internal.h"

static int storage_dtype_ok(ag_dtype dt) {
  return dt == AG_F32 || dt == AG_F16 || dt == AG_BF16 || dt == AG_U8 || dt == AG_I32;
}

/* Checks that buf is a live buffer handle. */
static ag_status check_buf(const ag_buffer *buf, const char *fn) {
  if (!buf) return ag__fail(AG_ERR_INVALID_ARG, "%s: buf is NULL", fn);
  if (buf->freed) return ag__fail(AG_ERR_FREED, "%s: the buffer has been freed", fn);
  return AG_OK;
}

/* Checks col_offset and k against the capacity (S5, S8). */
static ag_status check_range(const ag_buffer *buf, int64_t col_offset, int64_t k, const char *fn) {
  if (k < 0)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: k = %lld columns must not be negative", fn, (long long)k);
  if (col_offset < 0)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: col_offset = %lld must be a non-negative whole number", fn,
                    (long long)col_offset);
  if (col_offset > buf->capacity || k > buf->capacity - col_offset)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: columns %lld..%llu are outside the buffer (capacity %lld)", fn,
                    (long long)col_offset, (unsigned long long)col_offset + (unsigned long long)k - 1u,
                    (long long)buf->capacity);
  return AG_OK;
}

ag_status ag_buffer_create(ag_ctx *ctx, int64_t rows, int64_t capacity, ag_dtype dtype, ag_buffer **out) {
  static const char fn[] = "ag_buffer_create";
  if (!ctx) return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx is NULL", fn);
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  if (rows < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: rows = %lld must be a positive whole number", fn,
                    (long long)rows);
  if (capacity < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: capacity = %lld must be a positive whole number", fn,
                    (long long)capacity);
  if (!storage_dtype_ok(dtype))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: dtype %s (%d) cannot store a buffer; use f32, f16, bf16, u8 or i32", fn,
                    ag_dtype_name(dtype), (int)dtype);
  size_t bytes;
  if (!ag__mul3((uint64_t)rows, (uint64_t)capacity, ag_dtype_size(dtype), &bytes))
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: %lld x %lld values of %s overflow the address space", fn,
                    (long long)rows, (long long)capacity, ag_dtype_name(dtype));
  ag_buffer *b = ag__calloc(1, sizeof *b);
  if (!b) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  b->ctx = ctx;
  b->rows = rows;
  b->capacity = capacity;
  b->dtype = dtype;
  b->scale = 1.0f;
  ag_status s = ag__store_init(ctx, &b->store, bytes, AG__OWNER_BUFFER, b, fn);
  if (s) {
    free(b);
    return s;
  }
  b->next_handle = ctx->handles;
  ctx->handles = b;
  *out = b;
  return AG_OK;
}

void ag_buffer_free(ag_buffer *buf) {
  if (!buf || buf->freed) return;
  ag__store_release(buf->ctx, &buf->store); /* ordered after queued reads (S9, S16) */
  buf->freed = 1;
}

/* ---- write ---- */

typedef struct convert_job {
  const void *src;
  ag_dtype src_dt;
  ag_dtype dst_dt;
} convert_job;

static void fill_convert(void *host_dst, size_t off, size_t len, void *user) {
  const convert_job *j = user;
  size_t de = ag_dtype_size(j->dst_dt), se = ag_dtype_size(j->src_dt);
  ag__convert(host_dst, j->dst_dt, (const char *)j->src + off / de * se, j->src_dt, len / de);
}

static void drain_convert(const void *host_src, size_t off, size_t len, void *user) {
  const convert_job *j = user; /* src_dt: the buffer's, dst_dt: the caller's */
  size_t se = ag_dtype_size(j->src_dt), de = ag_dtype_size(j->dst_dt);
  ag__convert((char *)j->src + off / se * de, j->dst_dt, host_src, j->src_dt, len / se);
}

ag_status ag_buffer_write(ag_buffer *buf, const void *data, ag_dtype data_dtype, int64_t data_rows, int64_t k,
                          int64_t col_offset) {
  static const char fn[] = "ag_buffer_write";
  ag_status s = check_buf(buf, fn);
  if (s) return s;
  if (data_dtype != buf->dtype && data_dtype != AG_F32)
    return ag__fail(AG_ERR_SHAPE, "%s: data of dtype %s cannot be written to a %s buffer (give %s%s)", fn,
                    ag_dtype_name(data_dtype), ag_dtype_name(buf->dtype), ag_dtype_name(buf->dtype),
                    buf->dtype == AG_F32 ? "" : " or f32");
  if (data_rows != buf->rows)
    return ag__fail(AG_ERR_SHAPE, "%s: data has %lld rows, the buffer has %lld", fn, (long long)data_rows,
                    (long long)buf->rows);
  if ((s = check_range(buf, col_offset, k, fn))) return s;
  if (k == 0) return AG_OK;
  if (!data) return ag__fail(AG_ERR_INVALID_ARG, "%s: data is NULL for k = %lld columns", fn, (long long)k);
  size_t n = (size_t)buf->rows * (size_t)k;
  if (data_dtype == AG_F32 && buf->dtype != AG_F32) {
    int64_t bad = ag__first_unfit(data, n, buf->dtype);
    if (bad >= 0)
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: value %g at row %lld of data column %lld does not fit %s", fn,
                      (double)((const float *)data)[bad], (long long)(bad % buf->rows),
                      (long long)(bad / buf->rows), ag_dtype_name(buf->dtype));
  }
  if ((s = ag__store_ensure(buf->ctx, &buf->store))) return s;
  size_t elem = ag_dtype_size(buf->dtype);
  char *dst = (char *)buf->store.ptr + (size_t)col_offset * (size_t)buf->rows * elem;
  if (data_dtype == buf->dtype) return ag__mem_upload_copy(buf->ctx, fn, dst, data, n * elem);
  convert_job j = {data, data_dtype, buf->dtype};
  return ag__mem_upload(buf->ctx, fn, dst, n * elem, fill_convert, &j);
}

ag_status ag_buffer_write_dev(ag_buffer *buf, const ag_tensor *src, int64_t col_offset) {
  static const char fn[] = "ag_buffer_write_dev";
  ag_status s = check_buf(buf, fn);
  if (s || (s = ag__check_tensor(src, fn, "src"))) return s;
  if (src->ctx != buf->ctx) return ag__fail(AG_ERR_INVALID_ARG, "%s: src belongs to another context", fn);
  if ((s = ag__not_recording(buf->ctx, fn))) return s;
  if (src->rows != buf->rows)
    return ag__fail(AG_ERR_SHAPE, "%s: src has %lld rows, the buffer has %lld", fn, (long long)src->rows,
                    (long long)buf->rows);
  if ((s = check_range(buf, col_offset, src->cols, fn))) return s;
  void *from = NULL;
  if ((s = ag__store_ensure(buf->ctx, &buf->store)) || (s = ag__tensor_ptr((ag_tensor *)src, &from)))
    return s;
  ag__convert_args a = {
      from,       src->dtype,
      src->ld,    (char *)buf->store.ptr + (size_t)col_offset * (size_t)buf->rows * ag_dtype_size(buf->dtype),
      buf->dtype, buf->rows,
      buf->rows,  src->cols};
  return ag__run(buf->ctx, AG__K_CONVERT, &a, sizeof a);
}

ag_status ag__buffer_part(ag_buffer *buf, const void *data, int64_t k, int64_t col_offset, const char *fn,
                          ag__upload_part *out) {
  ag_status s = check_buf(buf, fn);
  if (s || (s = check_range(buf, col_offset, k, fn))) return s;
  if (k > 0 && !data)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: data is NULL for k = %lld columns", fn, (long long)k);
  if ((s = ag__store_ensure(buf->ctx, &buf->store))) return s;
  size_t elem = ag_dtype_size(buf->dtype);
  out->dst = (char *)buf->store.ptr + (size_t)col_offset * (size_t)buf->rows * elem;
  out->bytes = (size_t)buf->rows * (size_t)k * elem;
  out->fill = ag__fill_copy;
  out->user = (void *)data;
  return AG_OK;
}

ag_status ag_buffer_wait(ag_buffer *buf) {
  ag_status s = check_buf(buf, "ag_buffer_wait");
  if (s) return s;
  return ag_ctx_sync(buf->ctx);
}

/* ---- read ---- */

ag_status ag_buffer_read(ag_buffer *buf, int64_t col_offset, int64_t k, ag_dtype out_dtype, void *out,
                         size_t out_bytes) {
  static const char fn[] = "ag_buffer_read";
  ag_status s = check_buf(buf, fn);
  if (s) return s;
  if (out_dtype != buf->dtype && out_dtype != AG_F32)
    return ag__fail(AG_ERR_SHAPE, "%s: a %s buffer cannot be read as %s (ask for %s%s)", fn,
                    ag_dtype_name(buf->dtype), ag_dtype_name(out_dtype), ag_dtype_name(buf->dtype),
                    buf->dtype == AG_F32 ? "" : " or f32");
  if ((s = check_range(buf, col_offset, k, fn))) return s;
  if (k == 0) return AG_OK;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL for k = %lld columns", fn, (long long)k);
  size_t n = (size_t)buf->rows * (size_t)k;
  size_t need = n * ag_dtype_size(out_dtype);
  if (out_bytes < need)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: out holds %zu bytes, %lld x %lld values of %s need %zu", fn,
                    out_bytes, (long long)buf->rows, (long long)k, ag_dtype_name(out_dtype), need);
  if ((s = ag__store_ensure(buf->ctx, &buf->store))) return s;
  size_t elem = ag_dtype_size(buf->dtype);
  const char *src = (const char *)buf->store.ptr + (size_t)col_offset * (size_t)buf->rows * elem;
  if (out_dtype == buf->dtype) return ag__mem_download_copy(buf->ctx, fn, out, src, n * elem);
  convert_job j = {out, buf->dtype, out_dtype};
  return ag__mem_download(buf->ctx, fn, src, n * elem, drain_convert, &j);
}

/* ---- gather ---- */

ag_status ag__buffer_gather(ag_buffer *buf, const void *dev_idx, ag_dtype idx_dt, int64_t n, float *dst) {
  ag_status s = ag__store_ensure(buf->ctx, &buf->store);
  if (s) return s;
  ag__gather_args a = {buf->store.ptr, buf->dtype, buf->rows, buf->capacity, dev_idx, idx_dt, n,
                       buf->scale,     dst};
  return ag__run(buf->ctx, AG__K_GATHER, &a, sizeof a);
}

static ag_status gather(ag_buffer *buf, const void *dev_idx, ag_dtype idx_dt, int64_t n, ag_tensor **out) {
  ag_tensor *res = NULL;
  ag_status s = ag__tensor_temp(buf->ctx, buf->rows, n, AG_F32, &res);
  if (s || (s = ag__buffer_gather(buf, dev_idx, idx_dt, n, (float *)res->data))) return s;
  *out = res;
  return AG_OK;
}

static ag_status get_rows_host(ag_buffer *buf, const void *idx, ag_dtype idx_dt, int64_t n, ag_tensor **out) {
  static const char fn[] = "ag_get_rows";
  ag_status s = check_buf(buf, fn);
  if (s) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  if (n < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: idx is empty (n = %lld); give at least one index", fn,
                    (long long)n);
  if (!idx) return ag__fail(AG_ERR_INVALID_ARG, "%s: idx is NULL", fn);
  for (int64_t i = 0; i < n; i++) { /* S11 */
    int64_t v = ag__index_at(idx, idx_dt, i);
    if (v < 0 || v >= buf->capacity)
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: idx[%lld] = %lld is outside 0..%lld", fn, (long long)i,
                      (long long)v, (long long)(buf->capacity - 1));
  }
  if ((s = ag__store_ensure(buf->ctx, &buf->store))) return s;
  size_t bytes = (size_t)n * ag_dtype_size(idx_dt);
  void *dev_idx = NULL;
  if ((s = ag__ws_alloc(buf->ctx, bytes, &dev_idx))) return s;
  if ((s = ag__mem_upload_copy(buf->ctx, fn, dev_idx, idx, bytes))) return s; /* S14 */
  return gather(buf, dev_idx, idx_dt, n, out);
}

ag_status ag_get_rows(ag_buffer *buf, const int64_t *idx, int64_t n, ag_tensor **out) {
  return get_rows_host(buf, idx, AG_I64, n, out);
}

ag_status ag_get_rows_i32(ag_buffer *buf, const int32_t *idx, int64_t n, ag_tensor **out) {
  return get_rows_host(buf, idx, AG_I32, n, out);
}

ag_status ag_get_rows_dev(ag_buffer *buf, const ag_tensor *idx, ag_tensor **out) {
  static const char fn[] = "ag_get_rows_dev";
  ag_status s = check_buf(buf, fn);
  if (s) return s;
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  if ((s = ag__check_tensor(idx, fn, "idx"))) return s;
  if (idx->ctx != buf->ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: idx belongs to another context than the buffer", fn);
  if (idx->dtype != AG_I32 && idx->dtype != AG_I64)
    return ag__fail(AG_ERR_SHAPE, "%s: idx has dtype %s; indices must be i32 or i64", fn,
                    ag_dtype_name(idx->dtype));
  if (idx->ld != idx->rows && idx->cols > 1) /* the kernel reads rows * cols values in a row */
    return ag__fail(AG_ERR_SHAPE,
                    "%s: idx is a view with gaps between its columns ([%lld, %lld] of a tensor of %lld "
                    "rows); give a packed tensor",
                    fn, (long long)idx->rows, (long long)idx->cols, (long long)idx->ld);
  if ((s = ag__store_ensure(buf->ctx, &buf->store))) return s;
  void *p;
  if ((s = ag__tensor_ptr((ag_tensor *)idx, &p))) return s;
  return gather(buf, p, idx->dtype, idx->rows * idx->cols, out); /* S13: clamped in the kernel */
}

/* ---- attributes ---- */

ag_status ag_buffer_set_scale(ag_buffer *buf, float scale) {
  ag_status s = check_buf(buf, "ag_buffer_set_scale");
  if (s) return s;
  if (!(scale == scale) || scale - scale != 0.0f)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_buffer_set_scale: scale %g is not finite", (double)scale);
  buf->scale = scale;
  return AG_OK;
}

ag_status ag_buffer_get_info(const ag_buffer *buf, ag_buffer_info *out) {
  if (!buf || !out) return ag__fail(AG_ERR_INVALID_ARG, "ag_buffer_get_info: buf and out must not be NULL");
  out->rows = buf->rows;
  out->capacity = buf->capacity;
  out->dtype = buf->dtype;
  out->where = buf->freed ? AG_WHERE_FREED : ag__store_where(buf->ctx, &buf->store);
  out->generation = buf->store.gen;
  out->scale = buf->scale;
  return AG_OK;
}

int64_t ag_buffer_rows(const ag_buffer *buf) { return buf ? buf->rows : 0; }
int64_t ag_buffer_capacity(const ag_buffer *buf) { return buf ? buf->capacity : 0; }
ag_ctx *ag_buffer_ctx(const ag_buffer *buf) { return buf ? buf->ctx : NULL; }
