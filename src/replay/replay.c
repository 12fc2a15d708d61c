/* replay.c — a schema of named fields over one buffer, and its ring writer.
 *
 * Adding k transitions packs them into a host staging block of the storage
 * dtype (kept between calls, so adding one transition allocates nothing),
 * then writes the block with one buffer write, or two when it wraps. The
 * number of valid transitions (in the same upload) and the ring position
 * (by a kernel after it) are mirrored into 1 x 1 device tensors, for
 * sampling and walks of the ring inside recorded steps.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/graph.h"
#include "agrl/replay.h"
#include "base/convert.h"
#include "core/internal.h"
#include "replay/replay_internal.h"

static int host_dtype_ok(ag_dtype d) { return d >= AG_F32 && d <= AG_I64; }

void ag_replay_free(ag_replay *r) {
  if (!r) return;
  while (r->n_samplers > 0) { /* each detaches itself */
    int n = r->n_samplers;
    r->samplers[n - 1].ops->release(r->samplers[n - 1].self);
    if (r->n_samplers == n) r->n_samplers--;
  }
  for (int i = 0; i < r->n_fields; i++) free(r->fields[i].name);
  free(r->fields);
  ag_buffer_free(r->buf);
  ag_tensor_free(r->size_dev);
  ag_tensor_free(r->pos_dev);
  ag_tensor_free(r->dev_stage);
  free(r->stage);
  free(r);
}

ag_status ag_replay_create(ag_ctx *ctx, const ag_field *fields, int n_fields, int64_t capacity,
                           ag_dtype storage, int64_t min_size, ag_replay **out) {
  static const char fn[] = "ag_replay_create";
  if (!ctx || !fields || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, fields and out must not be NULL", fn);
  if (n_fields < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_fields = %d; give at least one field", fn, n_fields);
  if (capacity < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: capacity = %lld must be positive", fn, (long long)capacity);
  if (min_size < 1 || min_size > capacity)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: min_size = %lld must be in 1..capacity (%lld)", fn,
                    (long long)min_size, (long long)capacity);
  int64_t rows = 0;
  for (int i = 0; i < n_fields; i++) {
    if (!fields[i].name || !fields[i].name[0])
      return ag__fail(AG_ERR_INVALID_ARG, "%s: field %d has no name", fn, i);
    if (fields[i].width < 1)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: field '%s' has width %lld; widths must be positive", fn,
                      fields[i].name, (long long)fields[i].width);
    if (!host_dtype_ok(fields[i].dtype))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: field '%s' has unknown dtype %d", fn, fields[i].name,
                      (int)fields[i].dtype);
    for (int k = 0; k < i; k++)
      if (strcmp(fields[k].name, fields[i].name) == 0)
        return ag__fail(AG_ERR_INVALID_ARG, "%s: field name '%s' is used twice", fn, fields[i].name);
    rows += fields[i].width;
  }
  ag_replay *r = ag__calloc(1, sizeof *r);
  if (!r) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  r->ctx = ctx;
  r->rows = rows;
  r->capacity = capacity;
  r->min_size = min_size;
  r->storage = storage;
  r->fields = ag__calloc((size_t)n_fields, sizeof *r->fields);
  ag_status s = r->fields ? AG_OK : ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  int64_t row0 = 0;
  for (int i = 0; i < n_fields && !s; i++, r->n_fields++) {
    ag__field *f = &r->fields[i];
    f->name = ag__malloc(strlen(fields[i].name) + 1);
    if (!f->name) {
      s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
      break;
    }
    strcpy(f->name, fields[i].name);
    f->width = fields[i].width;
    f->dtype = fields[i].dtype;
    f->row0 = row0;
    row0 += f->width;
  }
  if (!s) s = ag_buffer_create(ctx, rows, capacity, storage, &r->buf);
  if (!s) s = ag_tensor_create(ctx, 1, 1, AG_I64, NULL, &r->size_dev);
  if (!s) s = ag_tensor_create(ctx, 1, 1, AG_I64, NULL, &r->pos_dev);
  if (s) {
    ag_replay_free(r);
    return s;
  }
  *out = r;
  return AG_OK;
}

/* Whether a value can be stored as dtype st (integers: finite, in range). */
static int fits(double v, ag_dtype st) {
  switch (st) {
    case AG_U8: return v >= -0.5 && v < 255.5;
    case AG_I32: return v >= -2147483648.5 && v < 2147483647.5;
    default: return 1;
  }
}

/* Element i as a double: integers exactly (i64 to 53 bits, enough to tell
 * whether it fits i32 or u8). */
static double load_any(const void *p, ag_dtype dt, size_t i) {
  switch (dt) {
    case AG_I64: return (double)((const int64_t *)p)[i];
    case AG_I32: return (double)((const int32_t *)p)[i];
    default: return (double)ag__load_f32(p, dt, i);
  }
}

/* Whether integer element i (of integer dtype dt) comes back from floating
 * storage st as it went in: converted there by the host path's own rules
 * and back. */
static int held_exactly(const void *p, ag_dtype dt, size_t i, ag_dtype st) {
  const int64_t v = ag__value_int(p, dt, (int64_t)i);
  unsigned char cell[8];
  ag__convert_one(cell, st, 0, p, dt, (int64_t)i);
  const float back = ag__value_f32(cell, st, 0);
  return back >= -9223372036854775808.0f && back < 9223372036854775808.0f && (int64_t)back == v;
}

/* Refuses a table that a device error left half written. */
ag_status ag__replay_check_sound(const ag_replay *r, const char *fn) {
  if (!r->broken) return AG_OK;
  return ag__fail(AG_ERR_STATE,
                  "%s: a device error interrupted an earlier ag_replay_add, which left the table's "
                  "columns partly written; free the table",
                  fn);
}

/* The checks every add starts with; *nothing is set for k = 0 (AG_OK, no work). */
static ag_status check_add(const ag_replay *r, const void *data, int64_t k, const char *fn, int *nothing) {
  *nothing = 0;
  if (!r) return ag__fail(AG_ERR_INVALID_ARG, "%s: replay is NULL", fn);
  ag_status s = ag__replay_check_sound(r, fn);
  if (s) return s;
  if (k < 0) return ag__fail(AG_ERR_INVALID_ARG, "%s: k = %lld must not be negative", fn, (long long)k);
  *nothing = k == 0;
  if (k == 0) return AG_OK;
  if (!data) return ag__fail(AG_ERR_INVALID_ARG, "%s: data is NULL", fn);
  if (k > r->capacity)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: %lld transitions do not fit a table of %lld", fn, (long long)k,
                    (long long)r->capacity);
  return AG_OK;
}

/* A host batch this large goes across field by field as it is and is
 * scattered into the table on the device, instead of being interleaved on
 * the host first. */
#define AG__DEV_STAGE_MIN_BYTES ((size_t)1 << 20)
static ag_status add_staged(ag_replay *r, const void *const *data, int64_t k, const char *fn);

/* The device staging area, grown to at least `need` bytes. */
static ag_status dev_stage_at(ag_replay *r, size_t need, void **base) {
  if (!r->dev_stage || (size_t)ag_tensor_rows(r->dev_stage) < need) {
    ag_tensor *t = NULL;
    ag_status s = ag_tensor_create(r->ctx, (int64_t)need, 1, AG_U8, NULL, &t);
    if (s) return s;
    ag_tensor_free(r->dev_stage);
    r->dev_stage = t;
  }
  return ag__tensor_ptr(r->dev_stage, base);
}

/* The k interleaved transitions of r->stage (need bytes) added on a device
 * with the one-launch scatter: the launch reads them in place from
 * page-locked memory (a few) or from one copy of them in the device staging
 * area, and writes them into the ring (both parts of a wrap), the size and
 * the position. *done is 0 (and nothing done) where the backend lacks the
 * kernel. All or nothing as ag_replay_add. */
static ag_status add_rows_staged(ag_replay *r, int64_t k, size_t need, const char *fn, int *done) {
  *done = 0;
  /* a few transitions are read in place from page-locked memory where the
   * backend has it (ag__mem_stage): no copy is queued before the launch */
  const int in_place = need <= AG__STAGE_MAX && r->ctx->be->stage;
  void *base = NULL, *size_ptr = NULL, *pos_ptr = NULL;
  const int64_t first = k < r->capacity - r->pos ? k : r->capacity - r->pos;
  const int64_t size = r->size + k < r->capacity ? r->size + k : r->capacity;
  const int64_t pos = (r->pos + k) % r->capacity;
  ag__upload_part at; /* only to make the table resident and check the range */
  ag_status s = ag__buffer_part(r->buf, r->stage, first, r->pos, fn, &at);
  if (!s) s = ag__tensor_ptr(r->size_dev, &size_ptr);
  if (!s) s = ag__tensor_ptr(r->pos_dev, &pos_ptr);
  if (s) return s;
  ag__scatter_fields_args a;
  memset(&a, 0, sizeof a);
  a.dst = r->buf->store.ptr;
  a.dst_dtype = r->storage;
  a.rows = r->rows;
  a.capacity = r->capacity;
  a.pos = r->pos;
  a.k = k;
  a.n_src = 1; /* every row of each transition, as staged */
  a.src[0].p = base;
  a.src[0].dtype = r->storage;
  a.src[0].ld = r->rows;
  a.src[0].row0 = 0;
  a.src[0].width = r->rows;
  a.size_dev = size_ptr;
  a.size_value = size;
  a.pos_dev = pos_ptr;
  a.pos_value = pos;
  if (!ag__kernel_supported(r->ctx, AG__K_SCATTER_FIELDS, &a, sizeof a)) return AG_OK;
  for (int i = 0; i < r->n_samplers && !s; i++) s = r->samplers[i].ops->prepare(r->samplers[i].self);
  if (s) return s;
  /* the staging area only: the table is untouched if this fails */
  s = in_place ? ag__mem_stage(r->ctx, fn, need, ag__fill_copy, r->stage, &base) : AG_ERR_UNSUPPORTED;
  const int staged = s == AG_OK;
  if (s == AG_ERR_UNSUPPORTED) { /* through the device staging area */
    s = dev_stage_at(r, need, &base);
    if (!s) s = ag__mem_upload_copy(r->ctx, fn, base, r->stage, need);
  }
  if (s) return s;
  a.src[0].p = base;
  *done = 1;
  s = ag__run(r->ctx, AG__K_SCATTER_FIELDS, &a, sizeof a);
  if (staged) {
    ag_status d = ag__mem_stage_done(r->ctx);
    if (!s) s = d;
  }
  for (int i = 0; i < r->n_samplers && !s; i++) {
    s = r->samplers[i].ops->added(r->samplers[i].self, r->pos, first);
    if (!s && k > first) s = r->samplers[i].ops->added(r->samplers[i].self, 0, k - first);
  }
  if (s) {
    r->broken = 1; /* the launch may have written some columns */
    return s;
  }
  r->pos = pos;
  r->pos_on_dev = pos;
  r->size = size;
  return AG_OK;
}

ag_status ag_replay_add(ag_replay *r, const void *const *data, int64_t k) {
  static const char fn[] = "ag_replay_add";
  int nothing;
  ag_status s = check_add(r, data, k, fn, &nothing);
  if (s || nothing) return s;
  for (int i = 0; i < r->n_fields; i++) {
    const ag__field *f = &r->fields[i];
    if (!data[i]) return ag__fail(AG_ERR_INVALID_ARG, "%s: data for field '%s' is NULL", fn, f->name);
    if (r->storage == AG_U8 || r->storage == AG_I32)
      for (int64_t e = 0; e < k * f->width; e++) {
        double v = load_any(data[i], f->dtype, (size_t)e);
        if (!fits(v, r->storage))
          return ag__fail(AG_ERR_OUT_OF_RANGE,
                          "%s: field '%s' value %g (transition %lld) does not fit %s storage", fn, f->name, v,
                          (long long)(e / f->width), ag_dtype_name(r->storage));
      }
    else if (ag__dtype_is_int(f->dtype)) /* floating storage: an integer must come back as it went */
      for (int64_t e = 0; e < k * f->width; e++)
        if (!held_exactly(data[i], f->dtype, (size_t)e, r->storage))
          return ag__fail(AG_ERR_OUT_OF_RANGE,
                          "%s: field '%s' value %lld (transition %lld) is not held exactly by %s storage "
                          "(integers are stored exactly; choose wider or integer storage)",
                          fn, f->name, (long long)ag__value_int(data[i], f->dtype, e),
                          (long long)(e / f->width), ag_dtype_name(r->storage));
  }
  /* a large batch on a device: across as it is, interleaved there */
  size_t es = ag_dtype_size(r->storage), need = (size_t)(r->rows * k) * es;
  if (r->ctx->kind != AG_DEVICE_CPU && need >= AG__DEV_STAGE_MIN_BYTES && r->n_fields <= 64 &&
      !r->ctx->recording) {
    int narrow = 1;
    for (int i = 0; i < r->n_fields; i++) narrow &= ag_dtype_size(r->fields[i].dtype) <= es;
    if (narrow) return add_staged(r, data, k, fn);
  }
  /* 1. everything that can fail without a trace: host staging, the objects
   * made resident (after a device switch they are uploaded here) */
  if (need > r->stage_cap) {
    unsigned char *p = ag__realloc(r->stage, need);
    if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    r->stage = p;
    r->stage_cap = need;
  }
  int all_f32 = r->storage == AG_F32;
  for (int i = 0; i < r->n_fields; i++) all_f32 &= r->fields[i].dtype == AG_F32;
  if (all_f32) { /* the common case: one pass over the staging area, transition by transition */
    for (int64_t j = 0; j < k; j++) {
      float *dst = (float *)(void *)r->stage + j * r->rows;
      for (int i = 0; i < r->n_fields; i++) {
        const ag__field *f = &r->fields[i];
        const float *src = (const float *)data[i] + j * f->width;
        for (int64_t e = 0; e < f->width; e++) dst[f->row0 + e] = src[e];
      }
    }
  } else {
    for (int i = 0; i < r->n_fields; i++) {
      const ag__field *f = &r->fields[i];
      size_t fe = ag_dtype_size(f->dtype);
      for (int64_t j = 0; j < k; j++) /* integers go across exactly (ag__convert) */
        ag__convert(r->stage + (size_t)(j * r->rows + f->row0) * es, r->storage,
                    (const unsigned char *)data[i] + (size_t)(j * f->width) * fe, f->dtype, (size_t)f->width);
    }
  }
  if (r->ctx->kind != AG_DEVICE_CPU && !r->ctx->recording) {
    int done = 0;
    s = add_rows_staged(r, k, need, fn, &done);
    if (s || done) return s;
  }
  int64_t first = k < r->capacity - r->pos ? k : r->capacity - r->pos;
  int64_t size = r->size + k < r->capacity ? r->size + k : r->capacity;
  const int64_t pos = (r->pos + k) % r->capacity;
  ag__upload_part parts[3];
  int n = 0;
  s = ag__buffer_part(r->buf, r->stage, first, r->pos, fn, &parts[n++]);
  if (!s && k > first)
    s = ag__buffer_part(r->buf, r->stage + (size_t)(first * r->rows) * es, k - first, 0, fn, &parts[n++]);
  if (!s && size != r->size) s = ag__tensor_part(r->size_dev, &size, fn, &parts[n++]);
  void *pos_ptr = NULL;
  if (!s && pos != r->pos_on_dev) s = ag__tensor_ptr(r->pos_dev, &pos_ptr);
  for (int i = 0; i < r->n_samplers && !s; i++) s = r->samplers[i].ops->prepare(r->samplers[i].self);
  if (s) return s;
  /* 2. the columns and the count in one upload, the position set by a
   * kernel (no byte more crosses the bus), then the new priorities: past
   * this point only the device itself can fail */
  int landed = 0;
  s = ag__mem_upload_parts(r->ctx, fn, parts, n, &landed);
  if (!s && pos_ptr) {
    ag__set_i64_args a = {(int64_t *)pos_ptr, pos};
    s = ag__run(r->ctx, AG__K_SET_I64, &a, sizeof a);
  }
  for (int i = 0; i < r->n_samplers && !s; i++) {
    s = r->samplers[i].ops->added(r->samplers[i].self, r->pos, first);
    if (!s && k > first) s = r->samplers[i].ops->added(r->samplers[i].self, 0, k - first);
  }
  if (s) {
    if (landed > 0) r->broken = 1; /* some columns are written, the rest not: no way back */
    return s;
  }
  r->pos = pos;
  r->pos_on_dev = pos;
  r->size = size;
  return AG_OK;
}

/* One field's k transitions in device memory: element e of transition j at
 * ptr[j * ld + e]. */
typedef struct dev_src {
  const void *ptr;
  ag_dtype dtype;
  int64_t ld;
} dev_src;

/* The arguments of launch `chunk` of the one-launch add: the fields
 * chunk * AG__SF_MAX .. of k transitions at the ring's position, both parts
 * of a wrap (the kernel wraps), and in the last launch the size and the
 * position. */
static void scatter_args(const ag_replay *r, const dev_src *src, int64_t k, int chunk, int64_t *size_ptr,
                         int64_t size, int64_t *pos_ptr, int64_t pos, ag__scatter_fields_args *a) {
  memset(a, 0, sizeof *a);
  a->dst = r->buf->store.ptr;
  a->dst_dtype = r->storage;
  a->rows = r->rows;
  a->capacity = r->capacity;
  a->pos = r->pos;
  a->k = k;
  const int i0 = chunk * AG__SF_MAX;
  for (int i = i0; i < r->n_fields && i < i0 + AG__SF_MAX; i++) {
    ag__sf_src *in = &a->src[a->n_src++];
    in->p = src[i].ptr;
    in->dtype = src[i].dtype;
    in->ld = src[i].ld;
    in->row0 = r->fields[i].row0;
    in->width = r->fields[i].width;
  }
  if (i0 + AG__SF_MAX >= r->n_fields) { /* the last launch */
    a->size_dev = size_ptr;
    a->size_value = size;
    a->pos_dev = pos_ptr;
    a->pos_value = pos;
  }
}

/* Appends k transitions from device memory (checked by the caller): the
 * columns scattered and converted by kernels, the count and the position
 * set on the device, the samplers told. All that can fail without a trace
 * comes first. Where the backend has AG__K_SCATTER_FIELDS this is one
 * launch (one for each AG__SF_MAX fields); otherwise a conversion for each
 * field and part of the wrap, and a kernel for the size and one for the
 * position. */
static ag_status add_from_device(ag_replay *r, const dev_src *src, int64_t k, const char *fn) {
  int64_t first = k < r->capacity - r->pos ? k : r->capacity - r->pos;
  int64_t size = r->size + k < r->capacity ? r->size + k : r->capacity;
  const int64_t pos = (r->pos + k) % r->capacity;
  ag__upload_part at[2]; /* only for their addresses: nothing is uploaded */
  ag_status s = ag__buffer_part(r->buf, src[0].ptr, first, r->pos, fn, &at[0]);
  if (!s && k > first) s = ag__buffer_part(r->buf, src[0].ptr, k - first, 0, fn, &at[1]);
  void *size_ptr = NULL, *pos_ptr = NULL;
  if (!s) s = ag__tensor_ptr(r->size_dev, &size_ptr);
  if (!s) s = ag__tensor_ptr(r->pos_dev, &pos_ptr);
  for (int i = 0; i < r->n_samplers && !s; i++) s = r->samplers[i].ops->prepare(r->samplers[i].self);
  if (s) return s;
  const int chunks = (r->n_fields + AG__SF_MAX - 1) / AG__SF_MAX;
  int one_launch = 1;
  ag__scatter_fields_args sf;
  for (int c = 0; c < chunks && one_launch; c++) {
    scatter_args(r, src, k, c, size_ptr, size, pos_ptr, pos, &sf);
    one_launch = ag__kernel_supported(r->ctx, AG__K_SCATTER_FIELDS, &sf, sizeof sf);
  }
  /* past this point only the device itself can fail */
  const size_t es = ag_dtype_size(r->storage);
  int launched = 0;
  if (one_launch) {
    for (int c = 0; c < chunks && !s; c++) {
      scatter_args(r, src, k, c, size_ptr, size, pos_ptr, pos, &sf);
      s = ag__run(r->ctx, AG__K_SCATTER_FIELDS, &sf, sizeof sf);
      launched = 1;
    }
  } else {
    for (int part = 0; part < (k > first ? 2 : 1) && !s; part++) {
      const int64_t c0 = part ? first : 0, n = part ? k - first : first;
      for (int i = 0; i < r->n_fields && !s; i++) {
        const ag__field *f = &r->fields[i];
        ag__convert_args a = {
            (const char *)src[i].ptr + (size_t)(c0 * src[i].ld) * ag_dtype_size(src[i].dtype),
            src[i].dtype,
            src[i].ld,
            (char *)at[part].dst + (size_t)f->row0 * es,
            r->storage,
            r->rows,
            f->width,
            n};
        s = ag__run(r->ctx, AG__K_CONVERT, &a, sizeof a);
        launched = 1;
      }
    }
    if (!s && size != r->size) {
      ag__set_i64_args a = {(int64_t *)size_ptr, size};
      s = ag__run(r->ctx, AG__K_SET_I64, &a, sizeof a);
    }
    if (!s && pos != r->pos_on_dev) {
      ag__set_i64_args a = {(int64_t *)pos_ptr, pos};
      s = ag__run(r->ctx, AG__K_SET_I64, &a, sizeof a);
    }
  }
  for (int i = 0; i < r->n_samplers && !s; i++) {
    s = r->samplers[i].ops->added(r->samplers[i].self, r->pos, first);
    if (!s && k > first) s = r->samplers[i].ops->added(r->samplers[i].self, 0, k - first);
  }
  if (s) {
    if (launched) r->broken = 1;
    return s;
  }
  r->pos = pos;
  r->pos_on_dev = pos;
  r->size = size;
  return AG_OK;
}

/* The host batch uploaded into the table's device staging area (grown as
 * needed), then added from there. Only used where each field's dtype is no
 * wider than the storage, so no more bytes cross than the host path sends. */
static ag_status add_staged(ag_replay *r, const void *const *data, int64_t k, const char *fn) {
  size_t off[64], total = 0;
  dev_src src[64];
  for (int i = 0; i < r->n_fields; i++) {
    off[i] = total;
    total += ((size_t)(k * r->fields[i].width) * ag_dtype_size(r->fields[i].dtype) + 255) & ~(size_t)255;
  }
  void *base = NULL;
  ag_status s = dev_stage_at(r, total, &base);
  if (s) return s;
  ag__upload_part parts[64];
  for (int i = 0; i < r->n_fields; i++) {
    const ag__field *f = &r->fields[i];
    parts[i].dst = (char *)base + off[i];
    parts[i].bytes = (size_t)(k * f->width) * ag_dtype_size(f->dtype);
    parts[i].fill = ag__fill_copy;
    parts[i].user = (void *)data[i];
    src[i].ptr = parts[i].dst;
    src[i].dtype = f->dtype;
    src[i].ld = f->width;
  }
  /* the staging area only: the table is untouched if this fails */
  if ((s = ag__mem_upload_parts(r->ctx, fn, parts, r->n_fields, NULL))) return s;
  return add_from_device(r, src, k, fn);
}

ag_status ag_replay_add_dev(ag_replay *r, ag_tensor *const *data, int64_t k) {
  static const char fn[] = "ag_replay_add_dev";
  int nothing;
  ag_status s = check_add(r, data, k, fn, &nothing);
  if (s || nothing) return s;
  if ((s = ag__not_recording(r->ctx, fn))) return s;
  dev_src src[64];
  if (r->n_fields > 64) return ag__fail(AG_ERR_UNSUPPORTED, "%s: more than 64 fields", fn);
  for (int i = 0; i < r->n_fields; i++) {
    const ag__field *f = &r->fields[i];
    if (!data[i] || (data[i]->flags & AG__T_FREED) || data[i]->ctx != r->ctx || data[i]->rows != f->width ||
        data[i]->cols != k) { /* the message is made only for a refusal */
      char what[96];
      snprintf(what, sizeof what, "data for field '%s'", f->name);
      if ((s = ag__check_tensor(data[i], fn, what))) return s;
      if (data[i]->ctx != r->ctx)
        return ag__fail(AG_ERR_INVALID_ARG, "%s: %s belongs to another context", fn, what);
      return ag__fail(AG_ERR_SHAPE, "%s: %s is [%lld, %lld], not [%lld, %lld] (width x transitions)", fn,
                      what, (long long)data[i]->rows, (long long)data[i]->cols, (long long)f->width,
                      (long long)k);
    }
    void *p = NULL;
    if ((s = ag__tensor_ptr(data[i], &p))) return s;
    src[i].ptr = p;
    src[i].dtype = data[i]->dtype;
    src[i].ld = data[i]->ld;
  }
  return add_from_device(r, src, k, fn);
}

int64_t ag_replay_size(const ag_replay *r) { return r ? r->size : 0; }
ag_tensor *ag_replay_size_tensor(const ag_replay *r) { return r ? r->size_dev : NULL; }
ag_tensor *ag_replay_position_tensor(const ag_replay *r) { return r ? r->pos_dev : NULL; }

ag_status ag__replay_sync_pos(ag_replay *r, const char *fn) {
  if (r->pos == r->pos_on_dev) return AG_OK;
  if (r->ctx->recording)
    return ag__fail(AG_ERR_STATE,
                    "%s: the table's position (%lld, set without an add, as by a load) is not on the device "
                    "yet, and a recording cannot send it; call it once outside the recording, or add first",
                    fn, (long long)r->pos);
  void *p = NULL;
  ag_status s = ag__tensor_ptr(r->pos_dev, &p);
  if (!s) s = ag__mem_upload_copy(r->ctx, fn, p, &r->pos, sizeof r->pos);
  if (!s) r->pos_on_dev = r->pos;
  return s;
}

ag_status ag_replay_can_sample(const ag_replay *r, int64_t B) {
  if (!r) return ag__fail(AG_ERR_INVALID_ARG, "ag_replay_can_sample: replay is NULL");
  return ag__replay_check_sample(r, B, "ag_replay_sample");
}
void ag__replay_set_broken(ag_replay *r) { r->broken = 1; }

ag_status ag__replay_attach(ag_replay *r, const ag__sampler_ops *ops, void *self, const char *fn) {
  if (ag__replay_sampler(r, ops))
    return ag__fail(AG_ERR_STATE, "%s: the table already has a %s sampler", fn, ops->name);
  if (r->n_samplers == AG__MAX_SAMPLERS)
    return ag__fail(AG_ERR_STATE, "%s: the table has %d samplers already", fn, AG__MAX_SAMPLERS);
  r->samplers[r->n_samplers].ops = ops;
  r->samplers[r->n_samplers].self = self;
  r->n_samplers++;
  return AG_OK;
}

void ag__replay_detach(ag_replay *r, void *self) {
  for (int i = 0; i < r->n_samplers; i++)
    if (r->samplers[i].self == self) {
      for (int k = i + 1; k < r->n_samplers; k++) r->samplers[k - 1] = r->samplers[k];
      r->n_samplers--;
      return;
    }
}

void *ag__replay_sampler(const ag_replay *r, const ag__sampler_ops *ops) {
  for (int i = 0; i < r->n_samplers; i++)
    if (r->samplers[i].ops == ops) return r->samplers[i].self;
  return NULL;
}
int64_t ag_replay_capacity(const ag_replay *r) { return r ? r->capacity : 0; }
int64_t ag_replay_position(const ag_replay *r) { return r ? r->pos : 0; }
int64_t ag_replay_rows(const ag_replay *r) { return r ? r->rows : 0; }
ag_buffer *ag_replay_buffer(const ag_replay *r) { return r ? r->buf : NULL; }

static const ag__field *find(const ag_replay *r, const char *name) {
  for (int i = 0; name && i < r->n_fields; i++)
    if (strcmp(r->fields[i].name, name) == 0) return &r->fields[i];
  return NULL;
}

ag_status ag_replay_field(const ag_replay *r, const char *name, int64_t *row0, int64_t *width) {
  if (!r || !name) return ag__fail(AG_ERR_INVALID_ARG, "ag_replay_field: replay and name must not be NULL");
  const ag__field *f = find(r, name);
  if (!f) return ag__fail(AG_ERR_INVALID_ARG, "ag_replay_field: the table has no field '%s'", name);
  if (row0) *row0 = f->row0;
  if (width) *width = f->width;
  return AG_OK;
}

int ag_replay_n_fields(const ag_replay *r) { return r ? r->n_fields : 0; }

ag_status ag_replay_field_at(const ag_replay *r, int i, ag_field *out) {
  if (!r || !out) return ag__fail(AG_ERR_INVALID_ARG, "ag_replay_field_at: replay and out must not be NULL");
  if (i < 0 || i >= r->n_fields)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "ag_replay_field_at: field %d is outside 0..%d", i, r->n_fields - 1);
  out->name = r->fields[i].name;
  out->width = r->fields[i].width;
  out->dtype = r->fields[i].dtype;
  return AG_OK;
}

ag_dtype ag_replay_storage(const ag_replay *r) { return r ? r->storage : AG_F32; }
int64_t ag_replay_min_size(const ag_replay *r) { return r ? r->min_size : 0; }

ag_status ag__replay_check_sample(const ag_replay *r, int64_t B, const char *fn) {
  ag_status s = ag__replay_check_sound(r, fn);
  if (s) return s;
  if (B < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: B = %lld must be positive", fn, (long long)B);
  if (r->size < r->min_size)
    return ag__fail(AG_ERR_STATE, "%s: the table holds %lld transitions, fewer than its minimum %lld", fn,
                    (long long)r->size, (long long)r->min_size);
  return AG_OK;
}

ag_status ag__replay_sample_idx(ag_replay *r, ag_rng *rng, int64_t B, const char *fn, ag_tensor **idx) {
  ag_status s = ag__replay_check_sample(r, B, fn);
  return s ? s : ag_randint_dev(rng, r->size_dev, B, AG_I32, idx);
}

ag_status ag_replay_sample(ag_replay *r, ag_rng *rng, int64_t B, ag_tensor **batch, ag_tensor **idx) {
  static const char fn[] = "ag_replay_sample";
  if (!r || !rng || !batch)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: replay, rng and batch must not be NULL", fn);
  ag_tensor *i;
  ag_status s = ag__replay_sample_idx(r, rng, B, fn, &i);
  if (!s) s = ag_get_rows_dev(r->buf, i, batch);
  if (!s && idx) *idx = i;
  return s;
}

ag_status ag_replay_gather(ag_replay *r, const int64_t *idx, int64_t n, ag_tensor **batch) {
  static const char fn[] = "ag_replay_gather";
  if (!r || !idx || !batch)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: replay, idx and batch must not be NULL", fn);
  ag_status s = ag__replay_check_sound(r, fn);
  if (s) return s;
  if (n < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %lld; give at least one index", fn, (long long)n);
  for (int64_t j = 0; j < n; j++)
    if (idx[j] < 0 || idx[j] >= r->size)
      return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: idx[%lld] = %lld is outside the %lld valid transitions", fn,
                      (long long)j, (long long)idx[j], (long long)r->size);
  return ag_get_rows(r->buf, idx, n, batch);
}

/* ---- a batch into other memory ---- */

/* A destination of ag_replay_gather_into as the kernel takes it (its
 * checks done): the first row and width of the field, or a special row. */
static ag__gf_dst gf_dst_of(const ag_replay *r, const ag_replay_dst *d) {
  ag__gf_dst o;
  o.row0 = d->field >= 0 ? r->fields[d->field].row0
                         : (d->field == AG_REPLAY_DST_INDICES ? AG__GF_INDICES : AG__GF_WEIGHTS);
  o.width = d->field >= 0 ? r->fields[d->field].width : 1;
  o.p = d->data;
  o.dtype = d->dtype;
  o.ld = d->ld;
  return o;
}

/* The checks of destination i of a batch of B (errors name fn). */
static ag_status check_dst(const ag_replay *r, const ag_replay_dst *d, int i, int64_t B, int weights,
                           const char *fn) {
  const int special = d->field == AG_REPLAY_DST_INDICES || d->field == AG_REPLAY_DST_WEIGHTS;
  if (!special && (d->field < 0 || d->field >= r->n_fields))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: dst[%d].field = %d is neither a field of the table (0..%d) nor "
                    "AG_REPLAY_DST_INDICES (-1) or AG_REPLAY_DST_WEIGHTS (-2)",
                    fn, i, d->field, r->n_fields - 1);
  const char *what = d->field == AG_REPLAY_DST_INDICES   ? "the indices"
                     : d->field == AG_REPLAY_DST_WEIGHTS ? "the weights"
                                                         : r->fields[d->field].name;
  if (!d->data) return ag__fail(AG_ERR_INVALID_ARG, "%s: dst[%d] (%s) has no data", fn, i, what);
  if ((int)d->dtype < 0 || d->dtype >= AG_DTYPE_COUNT_)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dst[%d] (%s) has unknown dtype %d", fn, i, what, (int)d->dtype);
  if (d->field == AG_REPLAY_DST_INDICES && d->dtype != AG_I32 && d->dtype != AG_I64)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dst[%d] (the indices) has dtype %s; indices are i32 or i64", fn,
                    i, ag_dtype_name(d->dtype));
  if (d->field == AG_REPLAY_DST_WEIGHTS && !weights)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dst[%d] asks for the weights, but weights is NULL", fn, i);
  const size_t es = ag_dtype_size(d->dtype);
  if ((uintptr_t)d->data % es)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dst[%d] (%s): %p is not aligned to the %zu bytes of %s", fn, i,
                    what, d->data, es, ag_dtype_name(d->dtype));
  const int64_t width = special ? 1 : r->fields[d->field].width;
  if (d->ld < width)
    return ag__fail(AG_ERR_SHAPE, "%s: dst[%d] (%s) has ld = %lld, less than the width %lld", fn, i, what,
                    (long long)d->ld, (long long)width);
  size_t bytes; /* the span the destination covers: ld (B - 1) + width elements */
  if ((uint64_t)d->ld > (uint64_t)INT64_MAX / (uint64_t)B ||
      !ag__mul3((uint64_t)(d->ld * (B - 1) + width), es, 1, &bytes))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dst[%d] (%s): ld = %lld over %lld transitions overflows", fn, i,
                    what, (long long)d->ld, (long long)B);
  return AG_OK;
}

/* The arguments of launch `chunk` (destinations chunk * AG__GF_MAX ..). */
static void gather_fields_args(const ag_replay *r, const void *ip, const ag_tensor *idx, int64_t stride,
                               const void *wp, const ag_replay_dst *dst, int n_dst, int chunk,
                               ag__gather_fields_args *a) {
  memset(a, 0, sizeof *a);
  a->src = r->buf->store.ptr;
  a->src_dtype = r->buf->dtype;
  a->rows = r->rows;
  a->capacity = r->capacity;
  a->scale = r->buf->scale;
  a->idx = ip;
  a->idx_dtype = idx->dtype;
  a->idx_stride = stride;
  a->n = idx->rows * idx->cols;
  a->weights = wp;
  for (int i = chunk * AG__GF_MAX; i < n_dst && a->n_dst < AG__GF_MAX; i++)
    a->dst[a->n_dst++] = gf_dst_of(r, &dst[i]);
}

/* ag_replay_gather_into where the backend lacks AG__K_GATHER_FIELDS: the
 * indices clamped and packed by AG__K_NSTEP of one step (its `last` is the
 * clamped column, exact at any capacity) when the indices are asked for or
 * the gather needs them packed, the batch gathered as f32 by AG__K_GATHER,
 * then one AG__K_CONVERT a destination. Every temporary is made and every
 * kernel asked for before the first runs. */
static ag_status gather_into_composed(ag_replay *r, const void *ip, const ag_tensor *idx, int64_t stride,
                                      const void *wp, const ag_replay_dst *dst, int n_dst, const char *fn) {
  const int64_t B = idx->rows * idx->cols;
  int want_idx = 0, want_rows = 0;
  for (int i = 0; i < n_dst; i++)
    want_idx |= dst[i].field == AG_REPLAY_DST_INDICES, want_rows |= dst[i].field >= 0;
  const int clamp = want_idx || (want_rows && stride != 1 && B > 1);
  ag_status s = AG_OK;
  ag_tensor *ret = NULL, *disc = NULL, *last = NULL, *batch = NULL;
  ag__nstep_args na;
  memset(&na, 0, sizeof na);
  if (clamp) {
    void *sz = NULL, *ps = NULL;
    if ((s = ag__tensor_ptr(r->size_dev, &sz)) || (s = ag__tensor_ptr(r->pos_dev, &ps)) ||
        (s = ag__tensor_temp(r->ctx, 1, B, AG_F32, &ret)) ||
        (s = ag__tensor_temp(r->ctx, 1, B, AG_F32, &disc)) ||
        (s = ag__tensor_temp(r->ctx, 1, B, AG_I64, &last)))
      return s;
    na.table = r->buf->store.ptr, na.dtype = r->buf->dtype, na.rows = r->rows, na.capacity = r->capacity;
    na.scale = r->buf->scale, na.rew_row = 0, na.term_row = 0, na.trunc_row = -1;
    na.size_dev = sz, na.pos_dev = ps, na.idx = ip, na.idx_dtype = idx->dtype, na.idx_stride = stride;
    na.B = B, na.n = 1, na.gamma = 1.0f, na.stride = 1;
    na.ret = (float *)ret->data, na.discount = (float *)disc->data, na.last = (int64_t *)last->data;
    if (!ag__kernel_supported(r->ctx, AG__K_NSTEP, &na, sizeof na))
      return ag__fail(AG_ERR_UNSUPPORTED,
                      "%s: the device takes neither the one-launch gather nor an n-step walk", fn);
  }
  ag__gather_args ga;
  memset(&ga, 0, sizeof ga);
  if (want_rows) {
    if ((s = ag__tensor_temp(r->ctx, r->rows, B, AG_F32, &batch))) return s;
    ga.src = r->buf->store.ptr, ga.src_dtype = r->buf->dtype, ga.rows = r->rows, ga.capacity = r->capacity;
    ga.idx = last ? (const void *)last->data : ip, ga.idx_dtype = last ? AG_I64 : idx->dtype, ga.n = B;
    ga.scale = r->buf->scale, ga.dst = (float *)batch->data;
    if (!ag__kernel_supported(r->ctx, AG__K_GATHER, &ga, sizeof ga))
      return ag__fail(AG_ERR_UNSUPPORTED, "%s: the device does not gather this table", fn);
  }
  /* pass 0 asks for every conversion, pass 1 runs them */
  for (int pass = 0; pass < 2 && !s; pass++) {
    if (pass == 1 && clamp) s = ag__run(r->ctx, AG__K_NSTEP, &na, sizeof na);
    if (pass == 1 && want_rows && !s) s = ag__run(r->ctx, AG__K_GATHER, &ga, sizeof ga);
    for (int i = 0; i < n_dst && !s; i++) {
      const ag__gf_dst o = gf_dst_of(r, &dst[i]);
      ag__convert_args ca = {NULL, AG_F32, 1, o.p, o.dtype, o.ld, o.width, B};
      if (o.row0 == AG__GF_INDICES)
        ca.src = last->data, ca.src_dtype = AG_I64;
      else if (o.row0 == AG__GF_WEIGHTS)
        ca.src = wp;
      else
        ca.src = (const float *)batch->data + o.row0, ca.src_ld = r->rows;
      if (pass == 1)
        s = ag__run(r->ctx, AG__K_CONVERT, &ca, sizeof ca);
      else if (!ag__kernel_supported(r->ctx, AG__K_CONVERT, &ca, sizeof ca))
        return ag__fail(AG_ERR_UNSUPPORTED, "%s: the device does not convert to dst[%d]'s %s", fn, i,
                        ag_dtype_name(o.dtype));
    }
  }
  return s;
}

ag_status ag_replay_gather_into(ag_replay *r, const ag_tensor *idx, const ag_tensor *weights,
                                const ag_replay_dst *dst, int n_dst) {
  static const char fn[] = "ag_replay_gather_into";
  if (!r || !idx || !dst) return ag__fail(AG_ERR_INVALID_ARG, "%s: replay, idx and dst must not be NULL", fn);
  ag_status s = ag__replay_check_sound(r, fn);
  if (s) return s;
  if (r->buf->freed) return ag__fail(AG_ERR_FREED, "%s: the table's buffer has been freed", fn);
  if (n_dst < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_dst = %d; give at least one destination", fn, n_dst);
  if ((s = ag__check_tensor(idx, fn, "idx"))) return s;
  if (idx->ctx != r->ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: idx belongs to another context than the table", fn);
  if (idx->dtype != AG_I32 && idx->dtype != AG_I64)
    return ag__fail(AG_ERR_SHAPE, "%s: idx has dtype %s; indices must be i32 or i64", fn,
                    ag_dtype_name(idx->dtype));
  if (idx->rows != 1 && idx->cols != 1)
    return ag__fail(AG_ERR_SHAPE, "%s: idx is [%lld, %lld]; give a row [1, B] or a column [B, 1]", fn,
                    (long long)idx->rows, (long long)idx->cols);
  const int64_t B = idx->rows * idx->cols, stride = idx->rows == 1 ? idx->ld : 1;
  if (weights) {
    if ((s = ag__check_tensor(weights, fn, "weights"))) return s;
    if (weights->ctx != r->ctx)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: weights belongs to another context than the table", fn);
    if (weights->dtype != AG_F32)
      return ag__fail(AG_ERR_SHAPE, "%s: weights has dtype %s; weights are f32", fn,
                      ag_dtype_name(weights->dtype));
    if ((weights->rows != 1 && weights->cols != 1) || weights->rows * weights->cols != B)
      return ag__fail(AG_ERR_SHAPE,
                      "%s: weights is [%lld, %lld]; give the %lld values of idx as a row or a column", fn,
                      (long long)weights->rows, (long long)weights->cols, (long long)B);
    if (weights->rows == 1 && B > 1 && weights->ld != 1)
      return ag__fail(AG_ERR_SHAPE,
                      "%s: weights is a row with gaps (ld %lld) between its values; give them packed", fn,
                      (long long)weights->ld);
  }
  for (int i = 0; i < n_dst; i++)
    if ((s = check_dst(r, &dst[i], i, B, weights != NULL, fn))) return s;
  /* the table, the indices and the weights made resident (a device switch
   * leaves them on the host until used); nothing is written before the kernels */
  void *ip = NULL, *wp = NULL;
  if ((s = ag__store_ensure(r->ctx, &r->buf->store)) || (s = ag__tensor_ptr((ag_tensor *)idx, &ip)) ||
      (weights && (s = ag__tensor_ptr((ag_tensor *)weights, &wp))))
    return s;
  const int chunks = (n_dst + AG__GF_MAX - 1) / AG__GF_MAX;
  int one_launch = 1;
  ag__gather_fields_args a;
  for (int c = 0; c < chunks && one_launch; c++) {
    gather_fields_args(r, ip, idx, stride, wp, dst, n_dst, c, &a);
    one_launch = ag__kernel_supported(r->ctx, AG__K_GATHER_FIELDS, &a, sizeof a);
  }
  if (!one_launch) return gather_into_composed(r, ip, idx, stride, wp, dst, n_dst, fn);
  for (int c = 0; c < chunks && !s; c++) {
    gather_fields_args(r, ip, idx, stride, wp, dst, n_dst, c, &a);
    s = ag__run(r->ctx, AG__K_GATHER_FIELDS, &a, sizeof a);
  }
  return s;
}

ag_status ag_replay_view(const ag_replay *r, ag_tensor *batch, const char *name, ag_tensor **out) {
  if (!r || !batch || !name || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_replay_view: replay, batch, name and out must not be NULL");
  ag_status s = ag__check_tensor(batch, "ag_replay_view", "batch");
  if (s) return s;
  const ag__field *f = find(r, name);
  if (!f) return ag__fail(AG_ERR_INVALID_ARG, "ag_replay_view: the table has no field '%s'", name);
  if (ag_tensor_rows(batch) != r->rows)
    return ag__fail(AG_ERR_SHAPE, "ag_replay_view: the batch has %lld rows, the table %lld",
                    (long long)ag_tensor_rows(batch), (long long)r->rows);
  return ag_slice_rows(batch, f->row0, f->width, out);
}

/* A field of width 1 named `name` (what names its role in messages). */
static ag_status flag_field(const ag_replay *r, const char *name, const char *what, const char *fn,
                            int64_t *row) {
  const ag__field *f = find(r, name);
  if (!f) return ag__fail(AG_ERR_INVALID_ARG, "%s: the table has no field '%s' (%s)", fn, name, what);
  if (f->width != 1)
    return ag__fail(AG_ERR_SHAPE, "%s: field '%s' (%s) has width %lld; it must have width 1", fn, name, what,
                    (long long)f->width);
  *row = f->row0;
  return AG_OK;
}

ag_status ag_replay_nstep(ag_replay *r, ag_tensor *idx, int n, float gamma, int64_t stride,
                          const char *reward, const char *terminated, const char *truncated, ag_tensor **ret,
                          ag_tensor **discount, ag_tensor **last) {
  return ag__replay_nstep_on(r, r ? r->size_dev : NULL, r ? r->pos_dev : NULL, idx, n, gamma, stride, reward,
                             terminated, truncated, "ag_replay_nstep", ret, discount, last);
}

ag_status ag__replay_nstep_on(ag_replay *r, ag_tensor *size_dev, ag_tensor *pos_dev, ag_tensor *idx, int n,
                              float gamma, int64_t stride, const char *reward, const char *terminated,
                              const char *truncated, const char *fn, ag_tensor **ret, ag_tensor **discount,
                              ag_tensor **last) {
  if (!r || !idx || !reward || !terminated || !ret || !discount || !last)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: replay, idx, reward, terminated, ret, discount and last must not be NULL", fn);
  ag_status s = ag__replay_check_sound(r, fn);
  if (s) return s;
  if (r->buf->freed) return ag__fail(AG_ERR_FREED, "%s: the table's buffer has been freed", fn);
  if (n < 1 || n > AG__NSTEP_MAX)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %d must be in 1..%d", fn, n, AG__NSTEP_MAX);
  if (!(gamma >= 0.0f && gamma <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: gamma = %g must be in [0, 1]", fn, (double)gamma);
  if (stride < 1 || stride > r->capacity)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: stride = %lld must be in 1..capacity (%lld)", fn,
                    (long long)stride, (long long)r->capacity);
  int64_t rew_row, term_row, trunc_row = -1;
  if ((s = flag_field(r, reward, "reward", fn, &rew_row)) ||
      (s = flag_field(r, terminated, "terminated", fn, &term_row)) ||
      (truncated && (s = flag_field(r, truncated, "truncated", fn, &trunc_row))))
    return s;
  if ((s = ag__check_tensor(idx, fn, "idx"))) return s;
  if (idx->ctx != r->ctx)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: idx belongs to another context than the table", fn);
  if (idx->dtype != AG_I32 && idx->dtype != AG_I64)
    return ag__fail(AG_ERR_SHAPE, "%s: idx has dtype %s; indices must be i32 or i64", fn,
                    ag_dtype_name(idx->dtype));
  if (idx->rows != 1 && idx->cols != 1)
    return ag__fail(AG_ERR_SHAPE, "%s: idx is [%lld, %lld]; give a row [1, B] or a column [B, 1]", fn,
                    (long long)idx->rows, (long long)idx->cols);
  const int64_t B = idx->rows * idx->cols;
  /* everything that can fail before the kernel: the position on the
   * device, the objects made resident, the outputs */
  if ((s = ag__replay_sync_pos(r, fn))) return s;
  void *ip = NULL, *sz = NULL, *ps = NULL;
  if ((s = ag__store_ensure(r->ctx, &r->buf->store)) || (s = ag__tensor_ptr(idx, &ip)) ||
      (s = ag__tensor_ptr(size_dev, &sz)) || (s = ag__tensor_ptr(pos_dev, &ps)))
    return s;
  ag_tensor *tr, *td, *tl;
  if ((s = ag__tensor_temp(r->ctx, 1, B, AG_F32, &tr)) || (s = ag__tensor_temp(r->ctx, 1, B, AG_F32, &td)) ||
      (s = ag__tensor_temp(r->ctx, 1, B, AG_I64, &tl)))
    return s;
  ag__nstep_args a = {r->buf->store.ptr,
                      r->buf->dtype,
                      r->rows,
                      r->capacity,
                      r->buf->scale,
                      rew_row,
                      term_row,
                      trunc_row,
                      sz,
                      ps,
                      ip,
                      idx->dtype,
                      idx->rows == 1 ? idx->ld : 1,
                      B,
                      n,
                      gamma,
                      stride,
                      (float *)tr->data,
                      (float *)td->data,
                      (int64_t *)tl->data};
  if ((s = ag__run(r->ctx, AG__K_NSTEP, &a, sizeof a))) return s;
  *ret = tr;
  *discount = td;
  *last = tl;
  return AG_OK;
}
