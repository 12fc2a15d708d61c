/* shard.c — one rank's shard of a replay table spread over a group, and
 * its file (ag_shard_save / ag_shard_load).
 *
 * Global column j lives on rank j mod world at local column j / world.
 * Because the global capacity is a multiple of world, a global ring position
 * p maps to local position ceil((p - rank) / world) on every rank, so each
 * shard is an ordinary ring (an ag_replay) that receives every world-th
 * transition of the global stream, starting with the first one it owns.
 * The invariant "local position == global columns owned before p, local
 * size == global columns owned among the valid ones" is checked on every
 * add, before a save and after a load.
 *
 * A shard file is a header of the shard's own (agrl/dist.h gives it byte
 * by byte) followed by the local table's replay file image
 * (ag__replay_write / ag__replay_read), so the table keeps the one format.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/agrl.h"
#include "replay/replay_internal.h"

struct ag_shard {
  ag_ctx *ctx;
  ag_replay *local;
  int rank, world;
  int n_fields;
  int64_t *width;
  ag_dtype *dtype;
  int64_t capacity, pos, size;
  unsigned char **pack; /* per field: this rank's transitions of a global add */
  size_t *pack_cap;
  const void **ptrs;
};

void ag_shard_free(ag_shard *sh) {
  if (!sh) return;
  ag_replay_free(sh->local);
  for (int i = 0; sh->pack && i < sh->n_fields; i++) free(sh->pack[i]);
  free(sh->pack);
  free(sh->pack_cap);
  free(sh->ptrs);
  free(sh->width);
  free(sh->dtype);
  free(sh);
}

static ag_status check_rank(int rank, int world, const char *fn) {
  if (world < 1 || rank < 0 || rank >= world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: rank %d of world %d: need world >= 1 and 0 <= rank < world", fn,
                    rank, world);
  return AG_OK;
}

/* A shard of n_fields fields without its table (the caller sets widths,
 * dtypes and the table). */
static ag_status shard_new(ag_ctx *ctx, int n_fields, int rank, int world, int64_t capacity, const char *fn,
                           ag_shard **out) {
  ag_shard *sh = ag__calloc(1, sizeof *sh);
  if (!sh) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  sh->ctx = ctx;
  sh->rank = rank;
  sh->world = world;
  sh->capacity = capacity;
  sh->n_fields = n_fields;
  sh->width = ag__calloc((size_t)n_fields, sizeof *sh->width);
  sh->dtype = ag__calloc((size_t)n_fields, sizeof *sh->dtype);
  sh->pack = ag__calloc((size_t)n_fields, sizeof *sh->pack);
  sh->pack_cap = ag__calloc((size_t)n_fields, sizeof *sh->pack_cap);
  sh->ptrs = ag__calloc((size_t)n_fields, sizeof *sh->ptrs);
  if (!sh->width || !sh->dtype || !sh->pack || !sh->pack_cap || !sh->ptrs) {
    ag_shard_free(sh);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  *out = sh;
  return AG_OK;
}

ag_status ag_shard_create(ag_ctx *ctx, const ag_field *fields, int n_fields, int64_t capacity,
                          ag_dtype storage, int64_t min_size, int rank, int world, ag_shard **out) {
  static const char fn[] = "ag_shard_create";
  if (!ctx || !fields || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, fields and out must not be NULL", fn);
  ag_status s = check_rank(rank, world, fn);
  if (s) return s;
  if (capacity < world || capacity % world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: capacity %lld must be a positive multiple of world (%d)", fn,
                    (long long)capacity, world);
  if (min_size < 1 || min_size > capacity)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: min_size = %lld must be in 1..capacity (%lld)", fn,
                    (long long)min_size, (long long)capacity);
  if (n_fields < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_fields = %d; give at least one field", fn, n_fields);
  ag_shard *sh;
  if ((s = shard_new(ctx, n_fields, rank, world, capacity, fn, &sh))) return s;
  for (int i = 0; i < n_fields; i++) {
    sh->width[i] = fields[i].width;
    sh->dtype[i] = fields[i].dtype;
  }
  /* each shard needs its share of the minimum before it samples */
  int64_t local_min = (min_size + world - 1) / world;
  if ((s = ag_replay_create(ctx, fields, n_fields, capacity / world, storage, local_min, &sh->local))) {
    ag_shard_free(sh);
    return s;
  }
  *out = sh;
  return AG_OK;
}

/* A shard around a table made elsewhere (a loaded one), at global position
 * pos and size; it takes the table, which is freed if this fails. The
 * caller has checked the table against rank, world and the sizes. */
static ag_status shard_around(ag_ctx *ctx, ag_replay *local, int rank, int world, int64_t capacity,
                              int64_t pos, int64_t size, const char *fn, ag_shard **out) {
  ag_shard *sh;
  ag_status s = shard_new(ctx, ag_replay_n_fields(local), rank, world, capacity, fn, &sh);
  if (s) {
    ag_replay_free(local);
    return s;
  }
  sh->local = local;
  for (int i = 0; i < sh->n_fields; i++) {
    ag_field f;
    if ((s = ag_replay_field_at(local, i, &f))) {
      ag_shard_free(sh);
      return s;
    }
    sh->width[i] = f.width;
    sh->dtype[i] = f.dtype;
  }
  sh->pos = pos;
  sh->size = size;
  *out = sh;
  return AG_OK;
}

int64_t ag_shard_size(const ag_shard *sh) { return sh ? sh->size : 0; }
int64_t ag_shard_capacity(const ag_shard *sh) { return sh ? sh->capacity : 0; }
int64_t ag_shard_position(const ag_shard *sh) { return sh ? sh->pos : 0; }
int ag_shard_rank(const ag_shard *sh) { return sh ? sh->rank : -1; }
int ag_shard_world(const ag_shard *sh) { return sh ? sh->world : 0; }
ag_replay *ag_shard_local(const ag_shard *sh) { return sh ? sh->local : NULL; }

int64_t ag_shard_global_index(const ag_shard *sh, int64_t local) { return local * sh->world + sh->rank; }

void ag_shard_locate(const ag_shard *sh, int64_t global, int *rank, int64_t *local) {
  if (rank) *rank = (int)(global % sh->world);
  if (local) *local = global / sh->world;
}

/* The global columns 0 .. p-1 that rank owns. */
static int64_t owned_below(int rank, int world, int64_t p) {
  return p > rank ? (p - rank + world - 1) / world : 0;
}

/* The local ring position that global position pos implies for rank of
 * world in a table of capacity global columns (the local size that a
 * global size n implies is owned_below(rank, world, n)). */
static int64_t local_pos_of(int rank, int world, int64_t capacity, int64_t pos) {
  return owned_below(rank, world, pos) % (capacity / world);
}

static ag_status check_in_step(const ag_shard *sh, const char *fn) {
  int64_t want_pos = local_pos_of(sh->rank, sh->world, sh->capacity, sh->pos);
  int64_t want_size = owned_below(sh->rank, sh->world, sh->size);
  if (ag_replay_position(sh->local) != want_pos || ag_replay_size(sh->local) != want_size)
    return ag__fail(
        AG_ERR_STATE,
        "%s: the shard's table was added to directly (local position %lld and size %lld, expected "
        "%lld and %lld); add through ag_shard_add or ag_shard_add_local only",
        fn, (long long)ag_replay_position(sh->local), (long long)ag_replay_size(sh->local),
        (long long)want_pos, (long long)want_size);
  return AG_OK;
}

ag_status ag_shard_add(ag_shard *sh, const void *const *data, int64_t k) {
  static const char fn[] = "ag_shard_add";
  if (!sh) return ag__fail(AG_ERR_INVALID_ARG, "%s: shard is NULL", fn);
  if (k < 0 || k > sh->capacity)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: k = %lld must be in 0..capacity (%lld)", fn, (long long)k,
                    (long long)sh->capacity);
  if (k == 0) return AG_OK;
  if (!data) return ag__fail(AG_ERR_INVALID_ARG, "%s: data is NULL", fn);
  for (int i = 0; i < sh->n_fields; i++)
    if (!data[i]) return ag__fail(AG_ERR_INVALID_ARG, "%s: data for field %d is NULL", fn, i);
  ag_status s = check_in_step(sh, fn);
  if (s) return s;
  /* transitions t of this call sit at global columns (pos + t) mod capacity;
   * ours are t = t0, t0 + world, ... (capacity is a multiple of world) */
  int64_t t0 = ((sh->rank - sh->pos % sh->world) % sh->world + sh->world) % sh->world;
  int64_t m = t0 < k ? (k - 1 - t0) / sh->world + 1 : 0;
  if (m > 0) {
    for (int i = 0; i < sh->n_fields; i++) {
      size_t row = (size_t)sh->width[i] * ag_dtype_size(sh->dtype[i]), need = row * (size_t)m;
      if (sh->pack_cap[i] < need) {
        unsigned char *p = ag__realloc(sh->pack[i], need);
        if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        sh->pack[i] = p;
        sh->pack_cap[i] = need;
      }
      const unsigned char *src = data[i];
      for (int64_t j = 0; j < m; j++)
        memcpy(sh->pack[i] + row * (size_t)j, src + row * (size_t)(t0 + j * sh->world), row);
      sh->ptrs[i] = sh->pack[i];
    }
    if ((s = ag_replay_add(sh->local, (const void *const *)sh->ptrs, m))) return s;
  }
  sh->pos = (sh->pos + k) % sh->capacity;
  sh->size = sh->size + k < sh->capacity ? sh->size + k : sh->capacity;
  return AG_OK;
}

ag_status ag_shard_add_local(ag_shard *sh, const void *const *data, int64_t k) {
  static const char fn[] = "ag_shard_add_local";
  if (!sh) return ag__fail(AG_ERR_INVALID_ARG, "%s: shard is NULL", fn);
  if (k < 0 || k > sh->capacity / sh->world)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: k = %lld must be in 0..%lld (the shard's capacity)", fn,
                    (long long)k, (long long)(sh->capacity / sh->world));
  if (k == 0) return AG_OK;
  if (sh->pos % sh->world)
    return ag__fail(
        AG_ERR_STATE,
        "%s: the global position %lld is not a multiple of the group size %d (after global adds): the "
        "shards would no longer interleave",
        fn, (long long)sh->pos, sh->world);
  ag_status s = check_in_step(sh, fn);
  if (!s) s = ag_replay_add(sh->local, data, k);
  if (s) return s;
  int64_t gk = k * sh->world;
  sh->pos = (sh->pos + gk) % sh->capacity;
  sh->size = sh->size + gk < sh->capacity ? sh->size + gk : sh->capacity;
  return AG_OK;
}

ag_status ag_shard_sample_global(ag_shard *sh, ag_dist *g, ag_rng *rng, int64_t B, ag_tensor **batch) {
  static const char fn[] = "ag_shard_sample_global";
  if (!sh || !g || !rng || !batch)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: shard, group, rng and batch must not be NULL", fn);
  if (ag_dist_rank(g) != sh->rank || ag_dist_world(g) != sh->world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: the shard is rank %d of %d, the group's process rank %d of %d",
                    fn, sh->rank, sh->world, ag_dist_rank(g), ag_dist_world(g));
  if (B < sh->world || B % sh->world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: B = %lld must be a positive multiple of the group size %d", fn,
                    (long long)B, sh->world);
  ag_tensor *mine;
  ag_status s = ag_replay_sample(sh->local, rng, B / sh->world, &mine, NULL);
  if (!s) s = ag_dist_allgather(g, mine, batch);
  return s;
}

/* ---- files ---- */

#define SHD_VERSION 1u
#define SHD_FIXED 88 /* the header up to the field entries */
#define SHD_ENTRY 16
#define SHD_MAX_FIELDS 4096
#define SHD_MAX_LOCAL ((int64_t)1 << 40) /* a replay file's largest capacity */
#define SHD_HEADER_MIN (SHD_FIXED + SHD_ENTRY + 4)
#define SHD_HEADER_MAX (SHD_FIXED + SHD_ENTRY * SHD_MAX_FIELDS + 4)

static const char shd_magic[8] = {'A', 'G', 'R', 'L', 'S', 'H', 'D', '1'};

ag_status ag_shard_save(const ag_shard *sh, const char *path) {
  static const char fn[] = "ag_shard_save";
  if (!sh || !path) return ag__fail(AG_ERR_INVALID_ARG, "%s: shard and path must not be NULL", fn);
  if (!*path) return ag__fail(AG_ERR_INVALID_ARG, "%s: path is empty", fn);
  ag_status s = ag__not_recording(sh->ctx, fn);
  if (s || (s = check_in_step(sh, fn))) return s;
  if (sh->n_fields > SHD_MAX_FIELDS)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the shard has %d fields; a shard file holds at most %d", fn,
                    sh->n_fields, SHD_MAX_FIELDS);
  const size_t hbytes = SHD_FIXED + SHD_ENTRY * (size_t)sh->n_fields + 4;
  unsigned char *h = ag__calloc(1, hbytes); /* before the file: a host without it leaves the disk alone */
  if (!h) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  memcpy(h, shd_magic, 8);
  ag__put32(h + 8, SHD_VERSION);
  ag__put32(h + 12, (uint32_t)hbytes);
  snprintf((char *)h + 16, 32, "%s", ag_version());
  ag__put32(h + 48, (uint32_t)sh->rank);
  ag__put32(h + 52, (uint32_t)sh->world);
  ag__put64(h + 56, (uint64_t)sh->capacity);
  ag__put64(h + 64, (uint64_t)sh->pos);
  ag__put64(h + 72, (uint64_t)sh->size);
  ag__put32(h + 80, (uint32_t)sh->n_fields);
  for (int i = 0; i < sh->n_fields; i++) {
    unsigned char *e = h + SHD_FIXED + SHD_ENTRY * i;
    ag__put64(e, (uint64_t)sh->width[i]);
    ag__put32(e + 8, (uint32_t)sh->dtype[i]);
  }
  ag__put32(h + hbytes - 4, ag__crc32_add(0, h, hbytes - 4));
  ag__afile a;
  if ((s = ag__afile_open(&a, path, fn))) {
    free(h);
    return s;
  }
  int wrote = fwrite(h, 1, hbytes, a.f) == hbytes;
  free(h);
  if (!wrote)
    s = ag__fail(AG_ERR_IO, "%s: writing beside %s failed: %s (the file is unchanged)", fn, path,
                 strerror(errno));
  if (!s) s = ag__replay_write(sh->local, a.f, AG_TRANSFER_PART_BYTES, fn, path);
  if (s) {
    ag__afile_abort(&a);
    return s;
  }
  return ag__afile_commit(&a, fn);
}

/* What a shard file's header says, once checked; hb holds its bytes. */
typedef struct shd_header {
  unsigned char *hb;
  int64_t hbytes;
  int rank, world, n_fields;
  int64_t capacity, pos, size;
} shd_header;

#define CORRUPT(...) ag__fail(AG_ERR_IO, __VA_ARGS__)

static ag_status read_exact(FILE *f, void *dst, size_t n, const char *name, const char *fn) {
  if (fread(dst, 1, n, f) == n) return AG_OK;
  if (ferror(f)) return ag__fail(AG_ERR_IO, "%s: reading %s failed: %s", fn, name, strerror(errno));
  return ag__fail(AG_ERR_IO, "%s: %s is truncated: it ended while being read (did it shrink?)", fn, name);
}

/* Checks the fields of a header whose CRC-32 holds. */
static ag_status check_header(shd_header *h, const char *name, const char *fn) {
  const unsigned char *hb = h->hb, *v = hb + 16;
  if (!memchr(v, 0, 32))
    return CORRUPT("%s: %s is corrupt: the library version at byte 16 has no end", fn, name);
  for (size_t i = strlen((const char *)v); i < 32; i++)
    if (v[i])
      return CORRUPT("%s: %s is corrupt: byte %zu after the library version is not 0", fn, name, 16 + i);
  uint32_t rank = ag__get32(hb + 48), world = ag__get32(hb + 52), nf = ag__get32(hb + 80);
  if (world < 1 || world > INT32_MAX || rank >= world)
    return CORRUPT("%s: %s is corrupt: rank %u of world %u (need world in 1..2^31-1 and rank below it)", fn,
                   name, (unsigned)rank, (unsigned)world);
  h->rank = (int)rank;
  h->world = (int)world;
  h->capacity = (int64_t)ag__get64(hb + 56);
  h->pos = (int64_t)ag__get64(hb + 64);
  h->size = (int64_t)ag__get64(hb + 72);
  if (h->capacity < h->world || h->capacity % h->world || h->capacity / h->world > SHD_MAX_LOCAL)
    return CORRUPT(
        "%s: %s is corrupt: capacity %lld is not a multiple of world (%d) of 1..2^40 columns per "
        "rank",
        fn, name, (long long)h->capacity, h->world);
  if (h->size < 0 || h->size > h->capacity)
    return CORRUPT("%s: %s is corrupt: size = %lld, outside 0..capacity (%lld)", fn, name, (long long)h->size,
                   (long long)h->capacity);
  if (h->size < h->capacity ? h->pos != h->size : (h->pos < 0 || h->pos >= h->capacity))
    return CORRUPT("%s: %s is corrupt: position %lld is not one a ring of size %lld and capacity %lld has",
                   fn, name, (long long)h->pos, (long long)h->size, (long long)h->capacity);
  if (nf < 1 || nf > SHD_MAX_FIELDS || h->hbytes != SHD_FIXED + SHD_ENTRY * (int64_t)nf + 4)
    return CORRUPT("%s: %s is corrupt: n_fields = %u does not fit its %lld-byte header (1..%d fields)", fn,
                   name, (unsigned)nf, (long long)h->hbytes, SHD_MAX_FIELDS);
  h->n_fields = (int)nf;
  if (ag__get32(hb + 84))
    return CORRUPT("%s: %s is corrupt: the reserved header word at byte 84 is not 0", fn, name);
  for (int i = 0; i < h->n_fields; i++) {
    const unsigned char *e = hb + SHD_FIXED + SHD_ENTRY * i;
    uint64_t w = ag__get64(e);
    uint32_t dt = ag__get32(e + 8);
    if (w < 1 || w > INT32_MAX)
      return CORRUPT("%s: %s is corrupt: field %d has width %llu, outside 1..2^31-1", fn, name, i,
                     (unsigned long long)w);
    if (dt > AG_I64)
      return CORRUPT("%s: %s is corrupt: field %d has dtype code %u, not a host dtype", fn, name, i,
                     (unsigned)dt);
    if (ag__get32(e + 12))
      return CORRUPT("%s: %s is corrupt: the reserved word of field %d is not 0", fn, name, i);
  }
  return AG_OK;
}

/* Reads and checks the header at f's position, of a file of len bytes. */
static ag_status read_header(FILE *f, const char *name, uint64_t len, const char *fn, shd_header *h) {
  memset(h, 0, sizeof *h);
  unsigned char fixed[16];
  if (len < 16) { /* too short for any header: tell a non-file from a cut one by the magic */
    size_t n = (size_t)(len < 8 ? len : 8);
    ag_status s = read_exact(f, fixed, n, name, fn);
    if (s) return s;
    if (memcmp(fixed, shd_magic, n) != 0)
      return CORRUPT("%s: %s is not a shard file (it does not begin with \"AGRLSHD1\")", fn, name);
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than a shard file's header", fn, name,
                   (unsigned long long)len);
  }
  ag_status s = read_exact(f, fixed, 16, name, fn);
  if (s) return s;
  if (memcmp(fixed, shd_magic, 8) != 0)
    return CORRUPT("%s: %s is not a shard file (it does not begin with \"AGRLSHD1\")", fn, name);
  uint32_t version = ag__get32(fixed + 8);
  if (version > SHD_VERSION)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: %s has format version %u; this library reads version %u", fn,
                    name, (unsigned)version, (unsigned)SHD_VERSION);
  if (version != SHD_VERSION)
    return CORRUPT("%s: %s is corrupt: format version %u (versions start at 1)", fn, name, (unsigned)version);
  h->hbytes = ag__get32(fixed + 12);
  if (h->hbytes < SHD_HEADER_MIN || h->hbytes > SHD_HEADER_MAX || h->hbytes % SHD_ENTRY != 12)
    return CORRUPT("%s: %s is corrupt: the header length %lld is not a valid one", fn, name,
                   (long long)h->hbytes);
  if ((uint64_t)h->hbytes > len)
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than its %lld-byte header", fn, name,
                   (unsigned long long)len, (long long)h->hbytes);
  if (!(h->hb = ag__malloc((size_t)h->hbytes)))
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  memcpy(h->hb, fixed, 16);
  if (!(s = read_exact(f, h->hb + 16, (size_t)h->hbytes - 16, name, fn))) {
    uint32_t stored = ag__get32(h->hb + h->hbytes - 4),
             computed = ag__crc32_add(0, h->hb, (size_t)h->hbytes - 4);
    if (stored != computed)
      s = CORRUPT("%s: %s is corrupt: its header fails its CRC-32 check (stored %08x, computed %08x)", fn,
                  name, (unsigned)stored, (unsigned)computed);
  }
  if (!s) s = check_header(h, name, fn);
  if (s) {
    free(h->hb);
    h->hb = NULL;
  }
  return s;
}

/* The loaded table is the one the header describes: this rank's share of
 * the global capacity, size and position, and the header's fields. */
static ag_status check_table(const shd_header *h, const ag_replay *t, const char *name, const char *fn) {
  const int64_t lcap = h->capacity / h->world;
  const int64_t lpos = local_pos_of(h->rank, h->world, h->capacity, h->pos);
  const int64_t lsize = owned_below(h->rank, h->world, h->size);
  if (ag_replay_capacity(t) != lcap)
    return CORRUPT(
        "%s: %s is corrupt: its table has %lld columns; rank %d of %d of a table of %lld holds %lld", fn,
        name, (long long)ag_replay_capacity(t), h->rank, h->world, (long long)h->capacity, (long long)lcap);
  if (ag_replay_position(t) != lpos || ag_replay_size(t) != lsize)
    return CORRUPT(
        "%s: %s is corrupt: its table has size %lld at position %lld; global size %lld at "
        "position %lld gives rank %d of %d size %lld at position %lld",
        fn, name, (long long)ag_replay_size(t), (long long)ag_replay_position(t), (long long)h->size,
        (long long)h->pos, h->rank, h->world, (long long)lsize, (long long)lpos);
  if (ag_replay_n_fields(t) != h->n_fields)
    return CORRUPT("%s: %s is corrupt: its table has %d fields, its header %d", fn, name,
                   ag_replay_n_fields(t), h->n_fields);
  for (int i = 0; i < h->n_fields; i++) {
    const unsigned char *e = h->hb + SHD_FIXED + SHD_ENTRY * i;
    ag_field fd;
    ag_status s = ag_replay_field_at(t, i, &fd);
    if (s) return s;
    if (fd.width != (int64_t)ag__get64(e) || (uint32_t)fd.dtype != ag__get32(e + 8))
      return CORRUPT(
          "%s: %s is corrupt: its table's field '%s' (width %lld, dtype code %d) is not the "
          "header's field %d (width %lld, dtype code %u)",
          fn, name, fd.name, (long long)fd.width, (int)fd.dtype, i, (long long)ag__get64(e),
          (unsigned)ag__get32(e + 8));
  }
  return AG_OK;
}

ag_status ag__shard_load_limited(ag_ctx *ctx, const char *path, int rank, int world, size_t max_table_bytes,
                                 ag_shard **out);

ag_status ag_shard_load(ag_ctx *ctx, const char *path, int rank, int world, ag_shard **out) {
  return ag__shard_load_limited(ctx, path, rank, world, 0, out);
}

/* ag_shard_load, refusing a table of more than max_table_bytes of columns
 * (0: no limit) before it is made: the fuzzer's entry. */
ag_status ag__shard_load_limited(ag_ctx *ctx, const char *path, int rank, int world, size_t max_table_bytes,
                                 ag_shard **out) {
  static const char fn[] = "ag_shard_load";
  if (!ctx || !path || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  ag_status s = check_rank(rank, world, fn);
  if (s || (s = ag__not_recording(ctx, fn))) return s;
  FILE *f;
  if ((s = ag__open_read(path, fn, &f))) return s;
  uint64_t len = 0;
  shd_header h = {0};
  ag_replay *t = NULL;
  s = ag__stream_left(f, fn, path, "a shard", &len);
  if (!s) s = read_header(f, path, len, fn, &h);
  if (!s && h.world != world)
    s = ag__fail(AG_ERR_INVALID_ARG,
                 "%s: %s was written by rank %d of %d; loading it as rank %d of %d is not supported: load it "
                 "with a group of %d (a table does not move between group sizes)",
                 fn, path, h.rank, h.world, rank, world, h.world);
  else if (!s && h.rank != rank)
    s = ag__fail(AG_ERR_INVALID_ARG,
                 "%s: %s was written by rank %d of %d; loading it as rank %d of %d is not supported: each "
                 "rank loads the file its own rank wrote",
                 fn, path, h.rank, h.world, rank, world);
  if (!s) { /* the image's capacity against the header's before a table of it is made */
    int64_t icap = ag__replay_image_capacity(f, len - (uint64_t)h.hbytes);
    if (icap >= 0 && icap != h.capacity / h.world) /* unreadable: ag__replay_read says why */
      s = ag__fail(
          AG_ERR_IO, "%s: %s: its table has %lld columns; rank %d of %d of a table of %lld holds %lld", fn,
          path, (long long)icap, h.rank, h.world, (long long)h.capacity, (long long)(h.capacity / h.world));
  }
  if (!s &&
      (s = ag__replay_read(ctx, f, path, len - (uint64_t)h.hbytes, max_table_bytes, "ag_replay_load", &t))) {
    const char *why = ag_last_error();
    if (strncmp(why, fn, sizeof fn - 1) != 0) { /* the table's own reader speaks of ag_replay_load */
      char copy[1024];
      snprintf(copy, sizeof copy, "%s", why);
      s = ag__fail(s, "%s: the table in %s: %s", fn, path, copy);
    }
  }
  fclose(f);
  if (!s) s = check_table(&h, t, path, fn);
  free(h.hb);
  if (s) {
    ag_replay_free(t);
    return s;
  }
  return shard_around(ctx, t, rank, world, h.capacity, h.pos, h.size, fn, out);
}
