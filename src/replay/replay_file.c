/* replay_file.c — replay tables saved to and loaded from files.
 *
 * A replay file is an agrl container (docs/container.md) of kind "replay":
 * keys give the schema, the storage dtype, the ring's counters and the
 * sampler; section "columns" holds the valid columns [rows, size] in the
 * storage dtype, and, with a prioritized sampler, section "leaves" the sum
 * tree's leaves [size] as f64. Columns and leaves go between the device
 * and the file in parts of the file's part length through the container's
 * pipeline (a thread of the file overlaps the device transfers); no host
 * copy of a whole table is made. Files of agrl 0.1.0 (AGRLRPL1) are read
 * through the same reader (agfile_legacy.c). The levels of the sum tree
 * above the leaves are rebuilt on load.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/agrl.h"
#include "base/agfile.h"
#include "base/per_tree.h"
#include "replay/replay_internal.h"

#define RPL_VERSION 2 /* 1: AGRLRPL1 of agrl 0.1.0 */
#define RPL_MAX_FIELDS AG__AGF_MAX_ARRAY
#define RPL_MAX_CAPACITY ((int64_t)1 << 40)
#define RPL_MAX_WIDTH ((int64_t)INT32_MAX)

#define CORRUPT(...) ag__fail(AG_ERR_IO, __VA_ARGS__)

static int storage_ok(int64_t d) {
  return d == AG_F32 || d == AG_F16 || d == AG_BF16 || d == AG_U8 || d == AG_I32;
}
static int host_ok(int64_t d) { return d >= AG_F32 && d <= AG_I64; }

void ag__replay_file_overlap(int on);
void ag__replay_file_overlap(int on) { ag__agf_overlap(on); }

/* The device address of the table's columns (the buffer made resident). */
static ag_status columns_ptr(ag_replay *r, const char *fn, void **out) {
  ag__upload_part at;
  ag_status s = ag__buffer_part(r->buf, r, r->capacity, 0, fn, &at);
  if (!s) *out = at.dst;
  return s;
}

/* ---- save ---- */

/* A section's device bytes, downloaded part by part. */
typedef struct rpl_src {
  ag_ctx *ctx;
  const char *fn;
  const unsigned char *dev;
} rpl_src;

static ag_status rpl_fill(void *user, unsigned char *dst, uint64_t off, size_t len) {
  const rpl_src *s = user;
  return ag__mem_download_copy(s->ctx, s->fn, dst, s->dev + off, len);
}

ag_status ag__replay_write(const ag_replay *cr, FILE *f, size_t part, const char *fn, const char *name) {
  if (!cr || !f) return ag__fail(AG_ERR_INVALID_ARG, "%s: replay and the file must not be NULL", fn);
  ag_replay *r = (ag_replay *)cr; /* made resident; nothing the caller sees changes */
  ag_status s = ag__not_recording(r->ctx, fn);
  if (s || (s = ag__replay_check_sound(r, fn))) return s;
  if (r->n_fields > RPL_MAX_FIELDS)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the table has %d fields; a replay file holds at most %d", fn,
                    r->n_fields, RPL_MAX_FIELDS);
  for (int i = 0; i < r->n_fields; i++)
    if (strlen(r->fields[i].name) > AG__AGF_MAX_STRING)
      return ag__fail(AG_ERR_UNSUPPORTED, "%s: field %d's name has %zu bytes; a replay file holds at most %d",
                      fn, i, strlen(r->fields[i].name), AG__AGF_MAX_STRING);
  ag_per *per = ag__replay_sampler(r, &ag__per_ops);
  float maxp = 0.0f;
  void *cols = NULL, *tree = NULL;
  if ((s = columns_ptr(r, fn, &cols))) return s;
  if (per) {
    void *st;
    if ((s = ag__tensor_ptr(ag__per_tree(per), &tree)) || (s = ag__tensor_ptr(ag__per_state(per), &st)) ||
        (s = ag__mem_download_copy(r->ctx, fn, &maxp, st, sizeof maxp)))
      return s;
  }
  int64_t *wd = ag__malloc(2 * (size_t)r->n_fields * sizeof *wd);
  if (!wd) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag__agf a;
  ag__agf_init(&a);
  ag__agf_set_str(&a, "kind", "replay");
  ag__agf_set_i64(&a, "replay.version", RPL_VERSION);
  ag__agf_set_i64(&a, "replay.storage", (int64_t)r->storage);
  ag__agf_set_i64(&a, "replay.capacity", r->capacity);
  ag__agf_set_i64(&a, "replay.min_size", r->min_size);
  ag__agf_set_i64(&a, "replay.size", r->size);
  ag__agf_set_i64(&a, "replay.position", r->pos);
  for (int i = 0; i < r->n_fields; i++) {
    wd[i] = r->fields[i].width, wd[r->n_fields + i] = (int64_t)r->fields[i].dtype;
    char key[32];
    snprintf(key, sizeof key, "replay.field.%d", i);
    ag__agf_set_str(&a, key, r->fields[i].name);
  }
  ag__agf_set_i64s(&a, "replay.widths", wd, (uint32_t)r->n_fields);
  ag__agf_set_i64s(&a, "replay.dtypes", wd + r->n_fields, (uint32_t)r->n_fields);
  free(wd);
  ag__agf_set_str(&a, "replay.sampler", per ? "per" : "none");
  if (per) {
    ag__agf_set_f64(&a, "replay.per.alpha", (double)ag__per_alpha(per));
    ag__agf_set_f64(&a, "replay.per.max_priority", (double)maxp);
  }
  rpl_src src[2] = {
      {r->ctx, fn, cols},
      {r->ctx, fn, per ? (const unsigned char *)tree + 8 * ag__per_offset(ag__per_depth(per) - 1) : NULL}};
  const int64_t cdims[2] = {r->rows, r->size}, ldims[1] = {r->size};
  ag__agf_add_tensor(&a, "columns", r->storage, 2, cdims, rpl_fill, &src[0]);
  if (per) ag__agf_add_tensor(&a, "leaves", AG__AGF_F64_DT, 1, ldims, rpl_fill, &src[1]);
  s = ag__agf_write(&a, f, part, fn, name);
  ag__agf_free(&a);
  return s;
}

ag_status ag__replay_save_parts(const ag_replay *r, const char *path, size_t part) {
  static const char fn[] = "ag_replay_save";
  if (!r || !path) return ag__fail(AG_ERR_INVALID_ARG, "%s: replay and path must not be NULL", fn);
  if (!*path) return ag__fail(AG_ERR_INVALID_ARG, "%s: path is empty", fn);
  ag__afile a;
  ag_status s = ag__afile_open(&a, path, fn);
  if (s) return s;
  if ((s = ag__replay_write(r, a.f, part, fn, path))) {
    ag__afile_abort(&a);
    return s;
  }
  return ag__afile_commit(&a, fn);
}

ag_status ag_replay_save(const ag_replay *r, const char *path) {
  return ag__replay_save_parts(r, path, AG_TRANSFER_PART_BYTES);
}

/* ---- load ---- */

/* What a file's keys say, once checked. */
typedef struct rpl_header {
  int n_fields;
  ag_field fields[RPL_MAX_FIELDS]; /* names point into the form */
  ag_dtype storage;
  int64_t capacity, min_size, size, pos, rows;
  int sampler;
  float alpha, maxp;
} rpl_header;

/* Checks the keys and sections of a; fills h (names point into a). */
static ag_status describe(const ag__agf *a, const char *fn, const char *name, rpl_header *h) {
  int64_t version, st;
  ag_status s = ag__agf_check_kind(a, "replay", RPL_VERSION, &version, fn, name);
  if (!s) s = ag__agf_get_i64(a, "replay.storage", 0, INT32_MAX, &st, fn, name);
  if (s) return s;
  if (!storage_ok(st))
    return CORRUPT("%s: %s is corrupt: storage dtype code %lld is not f32, f16, bf16, u8 or i32", fn, name,
                   (long long)st);
  h->storage = (ag_dtype)st;
  if ((s = ag__agf_get_i64(a, "replay.capacity", 1, RPL_MAX_CAPACITY, &h->capacity, fn, name)) ||
      (s = ag__agf_get_i64(a, "replay.min_size", 1, h->capacity, &h->min_size, fn, name)) ||
      (s = ag__agf_get_i64(a, "replay.size", 0, h->capacity, &h->size, fn, name)) ||
      (s = ag__agf_get_i64(a, "replay.position", 0, h->capacity - 1, &h->pos, fn, name)))
    return s;
  if (h->size < h->capacity && h->pos != h->size)
    return CORRUPT("%s: %s is corrupt: position %lld is not one a ring of size %lld and capacity %lld has",
                   fn, name, (long long)h->pos, (long long)h->size, (long long)h->capacity);
  const int64_t *w, *dt;
  uint32_t nw, nd;
  if ((s = ag__agf_get_i64s(a, "replay.widths", RPL_MAX_FIELDS, &w, &nw, fn, name)) ||
      (s = ag__agf_get_i64s(a, "replay.dtypes", RPL_MAX_FIELDS, &dt, &nd, fn, name)))
    return s;
  if (nw != nd) return CORRUPT("%s: %s is corrupt: %u field widths and %u field dtypes", fn, name, nw, nd);
  h->n_fields = (int)nw;
  h->rows = 0;
  for (uint32_t i = 0; i < nw; i++) {
    char key[32];
    const char *fname;
    snprintf(key, sizeof key, "replay.field.%u", i);
    if ((s = ag__agf_get_str(a, key, &fname, fn, name))) return s;
    if (!*fname) return CORRUPT("%s: %s is corrupt: field %u's name is empty", fn, name, i);
    if (w[i] < 1 || w[i] > RPL_MAX_WIDTH)
      return CORRUPT("%s: %s is corrupt: field '%s' has width %lld, outside 1..2^31-1", fn, name, fname,
                     (long long)w[i]);
    if (!host_ok(dt[i]))
      return CORRUPT("%s: %s is corrupt: field '%s' has dtype code %lld, not a host dtype", fn, name, fname,
                     (long long)dt[i]);
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(h->fields[k].name, fname))
        return CORRUPT("%s: %s is corrupt: field name '%s' is used twice", fn, name, fname);
    h->fields[i] = (ag_field){fname, w[i], (ag_dtype)dt[i]};
    h->rows += w[i]; /* < 2^10 fields of < 2^31 rows */
  }
  size_t tb;
  if (!ag__mul3((uint64_t)h->rows, (uint64_t)h->capacity, ag_dtype_size(h->storage), &tb) ||
      tb > ((size_t)1 << 62))
    return CORRUPT("%s: %s is corrupt: %lld rows of %lld columns exceed 2^62 bytes", fn, name,
                   (long long)h->rows, (long long)h->capacity);
  const char *sampler;
  if ((s = ag__agf_get_str(a, "replay.sampler", &sampler, fn, name))) return s;
  if (strcmp(sampler, "none") && strcmp(sampler, "per"))
    return CORRUPT("%s: %s is corrupt: sampler \"%s\" is not \"none\" or \"per\"", fn, name, sampler);
  h->sampler = !strcmp(sampler, "per");
  if (h->sampler) {
    double alpha, maxp;
    if ((s = ag__agf_get_f64(a, "replay.per.alpha", &alpha, fn, name)) ||
        (s = ag__agf_get_f64(a, "replay.per.max_priority", &maxp, fn, name)))
      return s;
    h->alpha = (float)alpha, h->maxp = (float)maxp;
    if (!(alpha >= 0.0 && alpha <= 1.0) || (double)h->alpha != alpha)
      return CORRUPT("%s: %s is corrupt: alpha = %g, outside [0, 1] or not an f32", fn, name, alpha);
    if (!(maxp > 0.0 && maxp < INFINITY) || (double)h->maxp != maxp || !(h->maxp < INFINITY))
      return CORRUPT("%s: %s is corrupt: the max priority %g is not a finite and positive f32", fn, name,
                     maxp);
    if (h->capacity > INT32_MAX)
      return CORRUPT("%s: %s is corrupt: a prioritized table of %lld columns (more than 2^31)", fn, name,
                     (long long)h->capacity);
  }
  if (a->n_sections != 1 + h->sampler)
    return CORRUPT("%s: %s is corrupt: %d sections, where a table %s has %d", fn, name, a->n_sections,
                   h->sampler ? "with a prioritized sampler" : "without a sampler", 1 + h->sampler);
  const int64_t cdims[2] = {h->rows, h->size}, ldims[1] = {h->size};
  int at;
  if ((s = ag__agf_want_section(a, "columns", h->storage, 2, cdims, &at, fn, name))) return s;
  if (at != 0) return CORRUPT("%s: %s is corrupt: its columns are not its first section", fn, name);
  if (h->sampler && (s = ag__agf_want_section(a, "leaves", AG__AGF_F64_DT, 1, ldims, &at, fn, name)))
    return s;
  return AG_OK;
}

/* The load's sink: columns (section 0) and leaves (1) to the device, each
 * leaf checked finite and >= 0. */
typedef struct rpl_dst {
  ag_ctx *ctx;
  const char *fn, *name;
  unsigned char *dev[2];
} rpl_dst;

static ag_status rpl_take(void *user, int sec, unsigned char *buf, uint64_t off, size_t len) {
  rpl_dst *d = user;
  for (size_t i = 0; sec == 1 && i < len / 8; i++) {
    double v;
    memcpy(&v, buf + 8 * i, 8);
    if (!(v >= 0.0 && v < INFINITY))
      return CORRUPT("%s: %s is corrupt: leaf %lld of its sum tree is %g, not finite and >= 0", d->fn,
                     d->name, (long long)(off / 8 + i), v);
  }
  return ag__mem_upload_copy(d->ctx, d->fn, d->dev[sec] + off, buf, len);
}

/* The levels above the leaves from the n valid leaves (the rest are 0, as
 * in a new tree), with the sum every kernel takes: each level streamed down
 * in parts, its parents computed on the host and sent up. */
static ag_status rebuild_tree(ag_ctx *ctx, double *tree, int depth, int64_t n, unsigned char *buf,
                              size_t part, const char *fn) {
  const int64_t step = (int64_t)(part / 8) / AG__PER_FAN * AG__PER_FAN; /* children per part */
  for (int d = depth - 2; d >= -1; d--) {                               /* d = -1: the root, from level 0 */
    const int64_t np = d >= 0 ? (n + AG__PER_FAN - 1) / AG__PER_FAN : 1;
    double *child = tree + ag__per_offset(d + 1), *dst = tree + ag__per_offset(d >= 0 ? d : depth);
    for (int64_t c0 = 0; c0 < np * AG__PER_FAN; c0 += step) {
      int64_t cn = np * AG__PER_FAN - c0 < step ? np * AG__PER_FAN - c0 : step;
      double *v = (double *)(void *)buf;
      ag_status s = ag__mem_download_copy(ctx, fn, v, child + c0, (size_t)cn * 8);
      if (s) return s;
      for (int64_t j = 0; j < cn / AG__PER_FAN; j++) v[j] = ag__per_sum16(v + j * AG__PER_FAN);
      if ((s = ag__mem_upload_copy(ctx, fn, dst + c0 / AG__PER_FAN, v, (size_t)(cn / AG__PER_FAN) * 8)))
        return s;
    }
    n = np;
  }
  return AG_OK;
}

ag_status ag__replay_read(ag_ctx *ctx, FILE *f, const char *name, uint64_t left, size_t max_table_bytes,
                          const char *fn, ag_replay **out) {
  if (!ctx || !f || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, the file and out must not be NULL", fn);
  if (!name) name = "the stream";
  ag_status s = ag__not_recording(ctx, fn);
  if (s) return s;
  ag__agf a;
  rpl_header *h = ag__malloc(sizeof *h);
  if (!h) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  s = ag__agf_read(&a, f, left, fn, name);
  if (!s) s = describe(&a, fn, name, h);
  size_t table = 0;
  if (!s) {
    table = (size_t)(h->rows * h->capacity) * ag_dtype_size(h->storage);
    if (max_table_bytes && table > max_table_bytes)
      s = ag__fail(AG_ERR_UNSUPPORTED,
                   "%s: the table of %s (%zu bytes) is larger than the limit of %zu bytes", fn, name, table,
                   max_table_bytes);
  }
  /* the rebuild's buffer: a part of the leaves, at least a node's children */
  size_t blen = 8 * AG__PER_FAN;
  if (!s && h->sampler && a.part > blen) blen = (size_t)a.part / blen * blen;
  if (!s && h->sampler && (uint64_t)blen > 8 * (uint64_t)h->size + 8 * AG__PER_FAN)
    blen = (size_t)(8 * h->size + 8 * AG__PER_FAN) / (8 * AG__PER_FAN) * (8 * AG__PER_FAN);
  unsigned char *buf = s || !h->sampler ? NULL : ag__malloc(blen);
  if (!s && h->sampler && !buf) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag_replay *r = NULL;
  ag_per *per = NULL;
  if (!s) {
    s = ag_replay_create(ctx, h->fields, h->n_fields, h->capacity, h->storage, h->min_size, &r);
    if (!s && h->sampler) s = ag_per_create(r, h->alpha, &per);
    if (s) {
      char why[512];
      snprintf(why, sizeof why, "%s", ag_last_error());
      s = ag__fail(s, "%s: the table of %s (%.1f MB) cannot be made: %s", fn, name, AG__MB((double)table),
                   why);
    }
  }
  void *cols = NULL, *tree = NULL, *st = NULL;
  if (!s) s = columns_ptr(r, fn, &cols);
  if (!s && per && !(s = ag__tensor_ptr(ag__per_tree(per), &tree)))
    s = ag__tensor_ptr(ag__per_state(per), &st);
  if (!s) {
    rpl_dst d = {ctx,
                 fn,
                 name,
                 {cols, per ? (unsigned char *)tree + 8 * ag__per_offset(ag__per_depth(per) - 1) : NULL}};
    s = ag__agf_stream(&a, f, rpl_take, &d, fn, name);
  }
  if (!s && per && h->size > 0) s = rebuild_tree(ctx, tree, ag__per_depth(per), h->size, buf, blen, fn);
  if (!s && per) s = ag__mem_upload_copy(ctx, fn, st, &h->maxp, sizeof h->maxp);
  if (!s && h->size > 0) {
    void *sz = NULL;
    s = ag__tensor_ptr(r->size_dev, &sz);
    if (!s) s = ag__mem_upload_copy(ctx, fn, sz, &h->size, sizeof h->size);
  }
  if (!s) { /* the position on the device too, for what reads it there (ag_replay_nstep) */
    r->size = h->size;
    r->pos = h->pos;
    s = ag__replay_sync_pos(r, fn);
  }
  free(buf);
  free(h);
  ag__agf_free(&a);
  if (s) {
    ag_replay_free(r);
    return s;
  }
  *out = r;
  return AG_OK;
}

int64_t ag__replay_image_capacity(FILE *f, uint64_t left) {
  ag__agf a;
  off_t at = ftello(f);
  int64_t cap = -1;
  if (at >= 0 && ag__agf_read(&a, f, left, "ag_replay_load", "the table") == AG_OK) {
    const ag__agf_key *c = ag__agf_key_find(&a, "replay.capacity");
    if (c && c->type == AG__AGF_I64 && c->v.i >= 0) cap = c->v.i;
  }
  ag__agf_free(&a);
  if (at >= 0) (void)fseeko(f, at, SEEK_SET);
  return cap;
}

int ag__replay_image_differs(FILE *f, uint64_t left, const ag_replay *mine, int64_t capacity) {
  ag__agf a;
  off_t at = ftello(f);
  int differs = 0;
  if (at >= 0 && ag__agf_read(&a, f, left, "ag_replay_load", "the table") == AG_OK) {
    const ag__agf_key *c = ag__agf_key_find(&a, "replay.capacity"),
                      *st = ag__agf_key_find(&a, "replay.storage");
    const ag__agf_key *w = ag__agf_key_find(&a, "replay.widths"),
                      *sm = ag__agf_key_find(&a, "replay.sampler");
    differs =
        !c || c->type != AG__AGF_I64 || c->v.i != capacity || !st || st->type != AG__AGF_I64 ||
        st->v.i != (int64_t)mine->storage || !w || w->type != AG__AGF_I64S ||
        w->count != (uint32_t)mine->n_fields || !sm || sm->type != AG__AGF_STR ||
        strcmp((const char *)sm->data, ag__replay_sampler((ag_replay *)mine, &ag__per_ops) ? "per" : "none");
  }
  ag__agf_free(&a);
  if (at >= 0) (void)fseeko(f, at, SEEK_SET);
  return differs;
}

ag_status ag__replay_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_replay **out) {
  static const char fn[] = "ag_replay_load";
  if (!f) return ag__fail(AG_ERR_INVALID_ARG, "%s: the file is NULL", fn);
  uint64_t left = 0;
  ag_status s = ag__stream_left(f, fn, name ? name : "the stream", "a table", &left);
  if (s) return s;
  return ag__replay_read(ctx, f, name, left, max_table_bytes, fn, out);
}

ag_status ag_replay_load(ag_ctx *ctx, const char *path, ag_replay **out) {
  static const char fn[] = "ag_replay_load";
  if (!ctx || !path || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  FILE *f;
  ag_status s = ag__open_read(path, fn, &f);
  if (s) return s;
  s = ag__replay_load_stream(ctx, f, path, 0, out);
  fclose(f);
  return s;
}
