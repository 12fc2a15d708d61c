/* replay_file.c — replay tables saved to and loaded from files.
 *
 * The layout is given byte by byte beside ag_replay_save in agrl/replay.h.
 * Every field is little-endian, written and read byte by byte whatever the
 * host's order. Columns and leaves go between the device and the file in
 * parts of at most the file's part length (AG_TRANSFER_PART_BYTES when the
 * library writes it) through one host buffer, each part with its CRC-32;
 * no host copy of a whole table is made. The loader checks the whole header
 * against the file's length before it allocates anything but the header.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "agrl/agrl.h"
#include "base/per_tree.h"
#include "replay/replay_internal.h"

#define RPL_VERSION 1u
#define RPL_FIXED 160 /* the header up to the field entries */
#define RPL_MAX_FIELDS 4096
#define RPL_MAX_NAME 1024
#define RPL_ENTRY_MAX (16 + RPL_MAX_NAME)
#define RPL_HEADER_MAX ((int64_t)RPL_FIXED + (int64_t)RPL_MAX_FIELDS * RPL_ENTRY_MAX + 4)
#define RPL_MAX_CAPACITY ((int64_t)1 << 40)
#define RPL_MAX_WIDTH ((int64_t)INT32_MAX)
#define RPL_PART_MIN 128

static const char rpl_magic[8] = {'A', 'G', 'R', 'L', 'R', 'P', 'L', '1'};

static int storage_ok(int64_t d) {
  return d == AG_F32 || d == AG_F16 || d == AG_BF16 || d == AG_U8 || d == AG_I32;
}
static int host_ok(int64_t d) { return d >= AG_F32 && d <= AG_I64; }

/* Bytes of a section of n data bytes cut into parts of `part`, each followed by its CRC-32. */
static int64_t section_bytes(int64_t n, int64_t part) { return n + 4 * ((n + part - 1) / part); }

static int64_t entry_bytes(size_t name_len) { return 16 + (((int64_t)name_len + 7) & ~(int64_t)7); }

/* Turns n elements of es bytes between the host's order and the file's
 * (little-endian): nothing to do on a little-endian host. */
static void file_order(unsigned char *p, size_t n, size_t es) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (size_t i = 0; i < n; i++, p += es)
    for (size_t a = 0, b = es - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b], p[b] = t;
    }
#else
  (void)p, (void)n, (void)es;
#endif
}

/* The device address of the table's columns (the buffer made resident). */
static ag_status columns_ptr(ag_replay *r, const char *fn, void **out) {
  ag__upload_part at;
  ag_status s = ag__buffer_part(r->buf, r, r->capacity, 0, fn, &at);
  if (!s) *out = at.dst;
  return s;
}

/* ---- save ---- */

/* Downloads `bytes` from dev in parts of `part` through buf, writing each
 * part and its CRC-32 to f; *wrote turns 0 when a write fails. */
static ag_status save_section(ag_ctx *ctx, FILE *f, const char *fn, const unsigned char *dev, int64_t bytes,
                              size_t es, unsigned char *buf, size_t part, int *wrote) {
  for (int64_t off = 0; off < bytes && *wrote; off += (int64_t)part) {
    size_t len = (size_t)(bytes - off) < part ? (size_t)(bytes - off) : part;
    ag_status s = ag__mem_download_copy(ctx, fn, buf, dev + off, len);
    if (s) return s;
    file_order(buf, len / es, es);
    unsigned char c[4];
    ag__put32(c, ag__crc32_add(0, buf, len));
    *wrote = fwrite(buf, 1, len, f) == len && fwrite(c, 1, 4, f) == 4;
  }
  return AG_OK;
}

ag_status ag__replay_write(const ag_replay *cr, FILE *f, size_t part, const char *fn, const char *name) {
  if (!cr || !f) return ag__fail(AG_ERR_INVALID_ARG, "%s: replay and the file must not be NULL", fn);
  if (part < RPL_PART_MIN || part > AG_TRANSFER_PART_BYTES || part % RPL_PART_MIN)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: part length %zu is not a multiple of %d up to %zu", fn, part,
                    RPL_PART_MIN, AG_TRANSFER_PART_BYTES);
  ag_replay *r = (ag_replay *)cr; /* made resident; nothing the caller sees changes */
  ag_status s = ag__not_recording(r->ctx, fn);
  if (s || (s = ag__replay_check_sound(r, fn))) return s;
  if (r->n_fields > RPL_MAX_FIELDS)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the table has %d fields; a replay file holds at most %d", fn,
                    r->n_fields, RPL_MAX_FIELDS);
  int64_t hbytes = RPL_FIXED + 4;
  for (int i = 0; i < r->n_fields; i++) {
    size_t n = strlen(r->fields[i].name);
    if (n > RPL_MAX_NAME)
      return ag__fail(AG_ERR_UNSUPPORTED, "%s: field %d's name has %zu bytes; a replay file holds at most %d",
                      fn, i, n, RPL_MAX_NAME);
    hbytes += entry_bytes(n);
  }
  ag_per *per = ag__replay_sampler(r, &ag__per_ops);
  const size_t es = ag_dtype_size(r->storage);
  const int64_t cbytes = r->size * r->rows * (int64_t)es, lbytes = per ? r->size * 8 : 0;
  const int64_t coff = hbytes, loff = coff + section_bytes(cbytes, (int64_t)part);
  const int64_t total = loff + section_bytes(lbytes, (int64_t)part);
  float maxp = 0.0f;
  void *cols = NULL, *tree = NULL;
  if ((s = columns_ptr(r, fn, &cols))) return s;
  if (per) {
    void *st;
    if ((s = ag__tensor_ptr(ag__per_tree(per), &tree)) || (s = ag__tensor_ptr(ag__per_state(per), &st)) ||
        (s = ag__mem_download_copy(r->ctx, fn, &maxp, st, sizeof maxp)))
      return s;
  }

  /* the header and the part buffer first: a host that cannot give them leaves the disk alone */
  unsigned char *h = ag__calloc(1, (size_t)hbytes);
  int64_t most = cbytes > lbytes ? cbytes : lbytes;
  size_t blen = most < (int64_t)part ? (size_t)(most > 8 ? most : 8) : part;
  unsigned char *buf = h ? ag__malloc(blen) : NULL;
  if (!buf) {
    free(h);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  memcpy(h, rpl_magic, 8);
  ag__put32(h + 8, RPL_VERSION);
  ag__put32(h + 12, (uint32_t)hbytes);
  snprintf((char *)h + 16, 32, "%s", ag_version());
  ag__put32(h + 48, (uint32_t)r->n_fields);
  ag__put32(h + 52, (uint32_t)r->storage);
  ag__put64(h + 56, (uint64_t)r->capacity);
  ag__put64(h + 64, (uint64_t)r->min_size);
  ag__put64(h + 72, (uint64_t)r->size);
  ag__put64(h + 80, (uint64_t)r->pos);
  ag__put64(h + 88, (uint64_t)r->rows);
  ag__put64(h + 96, (uint64_t)part);
  if (per) {
    float alpha = ag__per_alpha(per);
    uint32_t ab, mb;
    memcpy(&ab, &alpha, 4);
    memcpy(&mb, &maxp, 4);
    ag__put32(h + 104, 1);
    ag__put32(h + 108, ab);
    ag__put32(h + 112, mb);
  }
  ag__put64(h + 120, (uint64_t)coff);
  ag__put64(h + 128, (uint64_t)cbytes);
  ag__put64(h + 136, (uint64_t)loff);
  ag__put64(h + 144, (uint64_t)lbytes);
  ag__put64(h + 152, (uint64_t)total);
  unsigned char *e = h + RPL_FIXED;
  for (int i = 0; i < r->n_fields; i++) {
    size_t n = strlen(r->fields[i].name);
    ag__put64(e, (uint64_t)r->fields[i].width);
    ag__put32(e + 8, (uint32_t)r->fields[i].dtype);
    ag__put32(e + 12, (uint32_t)n);
    memcpy(e + 16, r->fields[i].name, n);
    e += entry_bytes(n);
  }
  ag__put32(h + hbytes - 4, ag__crc32_add(0, h, (size_t)hbytes - 4));

  int wrote = fwrite(h, 1, (size_t)hbytes, f) == (size_t)hbytes;
  free(h);
  s = save_section(r->ctx, f, fn, cols, cbytes, es, buf, part, &wrote);
  if (!s && per)
    s = save_section(r->ctx, f, fn, (const unsigned char *)tree + 8 * ag__per_offset(ag__per_depth(per) - 1),
                     lbytes, 8, buf, part, &wrote);
  free(buf);
  if (!s && !wrote)
    s = ag__fail(AG_ERR_IO, "%s: writing beside %s failed: %s (the file is unchanged)", fn, name,
                 strerror(errno));
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

/* What a header says, once checked. */
typedef struct rpl_header {
  int n_fields;
  ag_field *fields; /* names point into names */
  char *names;
  ag_dtype storage;
  int64_t capacity, min_size, size, pos, rows, part;
  int sampler;
  float alpha, maxp;
  int64_t cbytes, lbytes;
} rpl_header;

static void header_free(rpl_header *h) {
  free(h->fields);
  free(h->names);
  h->fields = NULL;
  h->names = NULL;
}

static ag_status read_exact(FILE *f, void *dst, size_t n, const char *name) {
  static const char fn[] = "ag_replay_load";
  if (fread(dst, 1, n, f) == n) return AG_OK;
  if (ferror(f)) return ag__fail(AG_ERR_IO, "%s: reading %s failed: %s", fn, name, strerror(errno));
  return ag__fail(AG_ERR_IO, "%s: %s is truncated: it ended while being read (did it shrink?)", fn, name);
}

#define CORRUPT(...) ag__fail(AG_ERR_IO, __VA_ARGS__)

/* Checks the fields of the fixed header; hb holds RPL_FIXED bytes. */
static ag_status check_fixed(const unsigned char *hb, const char *name, rpl_header *h) {
  static const char fn[] = "ag_replay_load";
  const unsigned char *v = hb + 16;
  if (!memchr(v, 0, 32))
    return CORRUPT("%s: %s is corrupt: the library version at byte 16 has no end", fn, name);
  for (size_t i = strlen((const char *)v); i < 32; i++)
    if (v[i])
      return CORRUPT("%s: %s is corrupt: byte %zu after the library version is not 0", fn, name, 16 + i);
  int64_t nf = ag__get32(hb + 48), st = ag__get32(hb + 52);
  if (nf < 1 || nf > RPL_MAX_FIELDS)
    return CORRUPT("%s: %s is corrupt: n_fields = %lld, outside 1..%d", fn, name, (long long)nf,
                   RPL_MAX_FIELDS);
  if (!storage_ok(st))
    return CORRUPT("%s: %s is corrupt: storage dtype code %lld is not f32, f16, bf16, u8 or i32", fn, name,
                   (long long)st);
  h->n_fields = (int)nf;
  h->storage = (ag_dtype)st;
  h->capacity = (int64_t)ag__get64(hb + 56);
  h->min_size = (int64_t)ag__get64(hb + 64);
  h->size = (int64_t)ag__get64(hb + 72);
  h->pos = (int64_t)ag__get64(hb + 80);
  h->rows = (int64_t)ag__get64(hb + 88);
  h->part = (int64_t)ag__get64(hb + 96);
  if (h->capacity < 1 || h->capacity > RPL_MAX_CAPACITY)
    return CORRUPT("%s: %s is corrupt: capacity = %lld, outside 1..2^40", fn, name, (long long)h->capacity);
  if (h->min_size < 1 || h->min_size > h->capacity)
    return CORRUPT("%s: %s is corrupt: min_size = %lld, outside 1..capacity (%lld)", fn, name,
                   (long long)h->min_size, (long long)h->capacity);
  if (h->size < 0 || h->size > h->capacity)
    return CORRUPT("%s: %s is corrupt: size = %lld, outside 0..capacity (%lld)", fn, name, (long long)h->size,
                   (long long)h->capacity);
  if (h->size < h->capacity ? h->pos != h->size : (h->pos < 0 || h->pos >= h->capacity))
    return CORRUPT("%s: %s is corrupt: position %lld is not one a ring of size %lld and capacity %lld has",
                   fn, name, (long long)h->pos, (long long)h->size, (long long)h->capacity);
  if (h->rows < 1 || h->rows > (int64_t)RPL_MAX_FIELDS * RPL_MAX_WIDTH)
    return CORRUPT("%s: %s is corrupt: rows = %lld is out of range", fn, name, (long long)h->rows);
  size_t es = ag_dtype_size(h->storage), tb;
  if (!ag__mul3((uint64_t)h->rows, (uint64_t)h->capacity, es, &tb) || tb > ((size_t)1 << 62))
    return CORRUPT("%s: %s is corrupt: %lld rows of %lld columns exceed 2^62 bytes", fn, name,
                   (long long)h->rows, (long long)h->capacity);
  if (h->part < RPL_PART_MIN || h->part > (int64_t)AG_TRANSFER_PART_BYTES || h->part % RPL_PART_MIN)
    return CORRUPT("%s: %s is corrupt: part length %lld is not a multiple of %d up to %zu", fn, name,
                   (long long)h->part, RPL_PART_MIN, AG_TRANSFER_PART_BYTES);
  uint32_t sampler = ag__get32(hb + 104), ab = ag__get32(hb + 108), mb = ag__get32(hb + 112);
  if (sampler > 1)
    return CORRUPT("%s: %s is corrupt: sampler code %u is not 0 (none) or 1 (prioritized)", fn, name,
                   (unsigned)sampler);
  if (ag__get32(hb + 116) != 0)
    return CORRUPT("%s: %s is corrupt: the reserved header word at byte 116 is not 0", fn, name);
  memcpy(&h->alpha, &ab, 4);
  memcpy(&h->maxp, &mb, 4);
  h->sampler = (int)sampler;
  if (!sampler && (ab || mb))
    return CORRUPT("%s: %s is corrupt: a table without a sampler has a non-zero alpha or max priority", fn,
                   name);
  if (sampler && !(h->alpha >= 0.0f && h->alpha <= 1.0f))
    return CORRUPT("%s: %s is corrupt: alpha = %g, outside [0, 1]", fn, name, (double)h->alpha);
  if (sampler && !(h->maxp > 0.0f && h->maxp < INFINITY))
    return CORRUPT("%s: %s is corrupt: the max priority %g is not finite and positive", fn, name,
                   (double)h->maxp);
  if (sampler && h->capacity > INT32_MAX)
    return CORRUPT("%s: %s is corrupt: a prioritized table of %lld columns (more than 2^31)", fn, name,
                   (long long)h->capacity);
  h->cbytes = h->size * h->rows * (int64_t)es;
  h->lbytes = sampler ? h->size * 8 : 0;
  return AG_OK;
}

/* Reads and checks the header at f's position, of a stream of len bytes. */
static ag_status read_header(FILE *f, const char *name, int64_t len, rpl_header *h) {
  static const char fn[] = "ag_replay_load";
  memset(h, 0, sizeof *h);
  unsigned char fixed[16];
  if (len < 16) { /* too short for any header: tell a non-file from a cut one by the magic */
    size_t n = (size_t)(len < 8 ? len : 8);
    ag_status s = read_exact(f, fixed, n, name);
    if (s) return s;
    if (memcmp(fixed, rpl_magic, n) != 0)
      return CORRUPT("%s: %s is not a replay file (it does not begin with \"AGRLRPL1\")", fn, name);
    return CORRUPT("%s: %s is truncated: %lld bytes, shorter than a replay file's header", fn, name,
                   (long long)len);
  }
  ag_status s = read_exact(f, fixed, 16, name);
  if (s) return s;
  if (memcmp(fixed, rpl_magic, 8) != 0)
    return CORRUPT("%s: %s is not a replay file (it does not begin with \"AGRLRPL1\")", fn, name);
  uint32_t version = ag__get32(fixed + 8);
  if (version > RPL_VERSION)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: %s has format version %u; this library reads version %u", fn,
                    name, (unsigned)version, (unsigned)RPL_VERSION);
  if (version != RPL_VERSION)
    return CORRUPT("%s: %s is corrupt: format version %u (versions start at 1)", fn, name, (unsigned)version);
  int64_t hbytes = ag__get32(fixed + 12);
  if (hbytes < RPL_FIXED + 4 + 24 || hbytes > RPL_HEADER_MAX || hbytes % 8 != 4)
    return CORRUPT("%s: %s is corrupt: the header length %lld is not a valid one", fn, name,
                   (long long)hbytes);
  if (hbytes > len)
    return CORRUPT("%s: %s is truncated: %lld bytes, shorter than its %lld-byte header", fn, name,
                   (long long)len, (long long)hbytes);
  unsigned char *hb = ag__malloc((size_t)hbytes);
  if (!hb) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  memcpy(hb, fixed, 16);
  if (!(s = read_exact(f, hb + 16, (size_t)hbytes - 16, name))) {
    uint32_t stored = ag__get32(hb + hbytes - 4), computed = ag__crc32_add(0, hb, (size_t)hbytes - 4);
    if (stored != computed)
      s = CORRUPT("%s: %s is corrupt: its header fails its CRC-32 check (stored %08x, computed %08x)", fn,
                  name, (unsigned)stored, (unsigned)computed);
  }
  if (!s) s = check_fixed(hb, name, h);
  if (!s) {
    h->fields = ag__calloc((size_t)h->n_fields, sizeof *h->fields);
    h->names = ag__malloc((size_t)hbytes); /* every name with its NUL fits */
    if (!h->fields || !h->names) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  int64_t at = RPL_FIXED, rows = 0;
  char *np = h->names;
  for (int i = 0; !s && i < h->n_fields; i++) {
    if (at + 16 > hbytes - 4) {
      s = CORRUPT("%s: %s is corrupt: its header ends inside field %d", fn, name, i);
      break;
    }
    int64_t w = (int64_t)ag__get64(hb + at), dt = ag__get32(hb + at + 8), n = ag__get32(hb + at + 12);
    if (n < 1 || n > RPL_MAX_NAME || at + entry_bytes((size_t)n) > hbytes - 4) {
      s = CORRUPT("%s: %s is corrupt: field %d's name length %lld does not fit its header", fn, name, i,
                  (long long)n);
      break;
    }
    const unsigned char *nm = hb + at + 16;
    if (memchr(nm, 0, (size_t)n)) {
      s = CORRUPT("%s: %s is corrupt: field %d's name holds a NUL byte", fn, name, i);
      break;
    }
    for (int64_t k = n; k < entry_bytes((size_t)n) - 16; k++)
      if (nm[k]) s = CORRUPT("%s: %s is corrupt: the padding after field %d's name is not 0", fn, name, i);
    if (s) break;
    memcpy(np, nm, (size_t)n);
    np[n] = 0;
    if (w < 1 || w > RPL_MAX_WIDTH) {
      s = CORRUPT("%s: %s is corrupt: field '%s' has width %lld, outside 1..2^31-1", fn, name, np,
                  (long long)w);
      break;
    }
    if (!host_ok(dt)) {
      s = CORRUPT("%s: %s is corrupt: field '%s' has dtype code %lld, not a host dtype", fn, name, np,
                  (long long)dt);
      break;
    }
    for (int k = 0; k < i && !s; k++)
      if (strcmp(h->fields[k].name, np) == 0)
        s = CORRUPT("%s: %s is corrupt: field name '%s' is used twice", fn, name, np);
    if (s) break;
    h->fields[i].name = np;
    h->fields[i].width = w;
    h->fields[i].dtype = (ag_dtype)dt;
    rows += w;
    np += n + 1;
    at += entry_bytes((size_t)n);
  }
  if (!s && at != hbytes - 4)
    s = CORRUPT("%s: %s is corrupt: %lld header bytes follow the last field", fn, name,
                (long long)(hbytes - 4 - at));
  if (!s && rows != h->rows)
    s = CORRUPT("%s: %s is corrupt: the fields' widths add up to %lld rows, the header says %lld", fn, name,
                (long long)rows, (long long)h->rows);
  if (!s) {
    int64_t coff = (int64_t)ag__get64(hb + 120), cb = (int64_t)ag__get64(hb + 128);
    int64_t loff = (int64_t)ag__get64(hb + 136), lb = (int64_t)ag__get64(hb + 144);
    int64_t total = (int64_t)ag__get64(hb + 152);
    int64_t want_loff = hbytes + section_bytes(h->cbytes, h->part);
    int64_t want_total = want_loff + section_bytes(h->lbytes, h->part);
    if (coff != hbytes || cb != h->cbytes || loff != want_loff || lb != h->lbytes || total != want_total)
      s = CORRUPT("%s: %s is corrupt: its section offsets and lengths do not match its sizes", fn, name);
    else if (len < total)
      s = CORRUPT("%s: %s is truncated: %lld bytes, where its header describes %lld (%lld missing)", fn, name,
                  (long long)len, (long long)total, (long long)(total - len));
    else if (len > total)
      s = CORRUPT("%s: %s is corrupt: %lld trailing bytes follow the %lld bytes its header describes", fn,
                  name, (long long)(len - total), (long long)total);
  }
  free(hb);
  if (s) header_free(h);
  return s;
}

/* Reads a section of `bytes` in parts, checking each CRC-32, and uploads
 * it to dev; with leaves set, each value must be a finite double >= 0. */
static ag_status load_section(ag_ctx *ctx, FILE *f, const char *name, const char *what, unsigned char *dev,
                              int64_t bytes, size_t es, int leaves, unsigned char *buf, size_t part) {
  static const char fn[] = "ag_replay_load";
  int64_t k = 0;
  for (int64_t off = 0; off < bytes; off += (int64_t)part, k++) {
    size_t len = (size_t)(bytes - off) < part ? (size_t)(bytes - off) : part;
    unsigned char c[4];
    ag_status s = read_exact(f, buf, len, name);
    if (s || (s = read_exact(f, c, 4, name))) return s;
    uint32_t crc = ag__crc32_add(0, buf, len);
    if (ag__get32(c) != crc)
      return CORRUPT(
          "%s: %s is corrupt: part %lld of its %s fails its CRC-32 check (stored %08x, computed %08x)", fn,
          name, (long long)k, what, (unsigned)ag__get32(c), (unsigned)crc);
    file_order(buf, len / es, es);
    for (size_t i = 0; leaves && i < len / 8; i++) {
      double v;
      memcpy(&v, buf + 8 * i, 8);
      if (!(v >= 0.0 && v < INFINITY))
        return CORRUPT("%s: %s is corrupt: leaf %lld of its sum tree is %g, not finite and >= 0", fn, name,
                       (long long)(off / 8 + (int64_t)i), v);
    }
    if ((s = ag__mem_upload_copy(ctx, fn, dev + off, buf, len))) return s;
  }
  return AG_OK;
}

/* The levels above the leaves from the n valid leaves (the rest are 0, as
 * in a new tree), with the sum every kernel takes: each level streamed down
 * in parts, its parents computed on the host and sent up. */
static ag_status rebuild_tree(ag_ctx *ctx, double *tree, int depth, int64_t n, unsigned char *buf,
                              size_t part) {
  static const char fn[] = "ag_replay_load";
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
  rpl_header h;
  if ((s = read_header(f, name, (int64_t)left, &h))) return s;
  const size_t es = ag_dtype_size(h.storage);
  size_t table = (size_t)(h.rows * h.capacity) * es;
  if (max_table_bytes && table > max_table_bytes) {
    header_free(&h);
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: the table of %s (%zu bytes) is larger than the limit of %zu bytes", fn, name, table,
                    max_table_bytes);
  }
  size_t part = (size_t)h.part;
  int64_t most = h.cbytes > h.lbytes ? h.cbytes : h.lbytes;
  if (h.sampler) most = most > 8 * AG__PER_FAN ? most : 8 * AG__PER_FAN; /* the rebuild's level 0 */
  size_t blen = most < (int64_t)part ? (size_t)most : part;
  unsigned char *buf = ag__malloc(blen);
  if (!buf) {
    header_free(&h);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  ag_replay *r = NULL;
  ag_per *per = NULL;
  s = ag_replay_create(ctx, h.fields, h.n_fields, h.capacity, h.storage, h.min_size, &r);
  if (!s && h.sampler) s = ag_per_create(r, h.alpha, &per);
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    s = ag__fail(s, "%s: the table of %s (%.1f MB) cannot be made: %s", fn, name, AG__MB((double)table), why);
  }
  void *cols = NULL;
  if (!s) s = columns_ptr(r, fn, &cols);
  if (!s) s = load_section(ctx, f, name, "columns", cols, h.cbytes, es, 0, buf, part);
  if (!s && per) {
    void *tree = NULL, *st = NULL;
    int depth = ag__per_depth(per);
    s = ag__tensor_ptr(ag__per_tree(per), &tree);
    if (!s) s = ag__tensor_ptr(ag__per_state(per), &st);
    if (!s)
      s = load_section(ctx, f, name, "sum tree leaves", (unsigned char *)tree + 8 * ag__per_offset(depth - 1),
                       h.lbytes, 8, 1, buf, part);
    if (!s && h.size > 0) s = rebuild_tree(ctx, tree, depth, h.size, buf, blen);
    if (!s) s = ag__mem_upload_copy(ctx, fn, st, &h.maxp, sizeof h.maxp);
  }
  if (!s && h.size > 0) {
    void *sz = NULL;
    s = ag__tensor_ptr(r->size_dev, &sz);
    if (!s) s = ag__mem_upload_copy(ctx, fn, sz, &h.size, sizeof h.size);
  }
  free(buf);
  header_free(&h);
  if (s) {
    ag_replay_free(r);
    return s;
  }
  r->size = h.size;
  r->pos = h.pos;
  *out = r;
  return AG_OK;
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
