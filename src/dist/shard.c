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
 * A shard file is an agrl container of kind "shard" (docs/container.md)
 * holding the shard's header as keys, followed by the local table's replay
 * container image (ag__replay_write / ag__replay_read), so the table keeps
 * the one format and the one loader.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/agrl.h"
#include "base/agfile.h"
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

/* ---- files ----
 * A shard file is an agrl container of kind "shard" (docs/container.md):
 * its keys alone, no sections; then the local table's container image
 * (ag__replay_write / ag__replay_read) to the end of the file, so the
 * table keeps its one format and its one loader. A shard file of agrl
 * 0.1.0 (AGRLSHD1) is parsed by base/agfile_legacy.c into the same keys,
 * with its table's image after them as here: the loader has one path. */

#define SHD_VERSION 2 /* 1: AGRLSHD1 of agrl 0.1.0 */
#define SHD_MAX_FIELDS AG__AGF_MAX_ARRAY
#define SHD_MAX_LOCAL ((int64_t)1 << 40) /* a replay file's largest capacity */

ag_status ag_shard_save(const ag_shard *sh, const char *path) {
  static const char fn[] = "ag_shard_save";
  if (!sh || !path) return ag__fail(AG_ERR_INVALID_ARG, "%s: shard and path must not be NULL", fn);
  if (!*path) return ag__fail(AG_ERR_INVALID_ARG, "%s: path is empty", fn);
  ag_status s = ag__not_recording(sh->ctx, fn);
  if (s || (s = check_in_step(sh, fn))) return s;
  if (sh->n_fields > SHD_MAX_FIELDS)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the shard has %d fields; a shard file holds at most %d", fn,
                    sh->n_fields, SHD_MAX_FIELDS);
  int64_t *dt = ag__malloc((size_t)sh->n_fields * sizeof *dt);
  if (!dt) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  for (int i = 0; i < sh->n_fields; i++) dt[i] = (int64_t)sh->dtype[i];
  ag__agf a;
  ag__agf_init(&a);
  ag__agf_set_str(&a, "kind", "shard");
  ag__agf_set_i64(&a, "shard.version", SHD_VERSION);
  ag__agf_set_str(&a, "shard.library", ag_version());
  ag__agf_set_i64(&a, "shard.rank", sh->rank);
  ag__agf_set_i64(&a, "shard.world", sh->world);
  ag__agf_set_i64(&a, "shard.capacity", sh->capacity);
  ag__agf_set_i64(&a, "shard.position", sh->pos);
  ag__agf_set_i64(&a, "shard.size", sh->size);
  ag__agf_set_i64s(&a, "shard.widths", sh->width, (uint32_t)sh->n_fields);
  ag__agf_set_i64s(&a, "shard.dtypes", dt, (uint32_t)sh->n_fields);
  free(dt);
  /* the keys in host memory before the file: a host without it leaves the disk alone */
  if (a.failed) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag__afile af;
  if (!s && !(s = ag__afile_open(&af, path, fn))) {
    s = ag__agf_write(&a, af.f, AG_TRANSFER_PART_BYTES, fn, path);
    if (!s) s = ag__replay_write(sh->local, af.f, AG_TRANSFER_PART_BYTES, fn, path);
    s = ag__afile_finish(&af, s, 1, fn);
  }
  ag__agf_free(&a);
  return s;
}

#define CORRUPT(...) ag__fail(AG_ERR_IO, __VA_ARGS__)

/* What a shard file's keys say, once checked (the arrays point into the form). */
typedef struct shd_keys {
  int rank, world, n_fields;
  int64_t capacity, pos, size;
  const int64_t *width, *dtype;
} shd_keys;

/* Checks the keys of a shard's header (either layout) against their limits. */
static ag_status describe(const ag__agf *a, const char *fn, const char *name, shd_keys *h) {
  const ag__agf_key *kind = ag__agf_key_find(a, "kind");
  if (!kind || kind->type != AG__AGF_STR)
    return CORRUPT("%s: %s is not a shard file: its key 'kind' is %s", fn, name,
                   kind ? "not a string" : "missing");
  if (strcmp((const char *)kind->data, "shard"))
    return CORRUPT("%s: %s is not a shard file: its kind is \"%s\"", fn, name, (const char *)kind->data);
  int64_t version, rank, world;
  ag_status s = ag__agf_check_kind(a, "shard", SHD_VERSION, &version, fn, name);
  if (s) return s;
  if (a->n_sections)
    return CORRUPT("%s: %s is corrupt: its header has %d sections; a shard's has none (its table follows it)",
                   fn, name, a->n_sections);
  if ((s = ag__agf_get_i64(a, "shard.world", 1, INT32_MAX, &world, fn, name)) ||
      (s = ag__agf_get_i64(a, "shard.rank", 0, world - 1, &rank, fn, name)) ||
      (s = ag__agf_get_i64(a, "shard.capacity", 1, INT64_MAX, &h->capacity, fn, name)))
    return s;
  h->rank = (int)rank, h->world = (int)world;
  if (h->capacity < world || h->capacity % world || h->capacity / world > SHD_MAX_LOCAL)
    return CORRUPT(
        "%s: %s is corrupt: capacity %lld is not a multiple of world (%d) of 1..2^40 columns per rank", fn,
        name, (long long)h->capacity, h->world);
  if ((s = ag__agf_get_i64(a, "shard.size", 0, h->capacity, &h->size, fn, name)) ||
      (s = ag__agf_get_i64(a, "shard.position", 0, h->capacity - 1, &h->pos, fn, name)))
    return s;
  if (h->size < h->capacity && h->pos != h->size)
    return CORRUPT("%s: %s is corrupt: position %lld is not one a ring of size %lld and capacity %lld has",
                   fn, name, (long long)h->pos, (long long)h->size, (long long)h->capacity);
  uint32_t nw, nd;
  if ((s = ag__agf_get_i64s(a, "shard.widths", SHD_MAX_FIELDS, &h->width, &nw, fn, name)) ||
      (s = ag__agf_get_i64s(a, "shard.dtypes", SHD_MAX_FIELDS, &h->dtype, &nd, fn, name)))
    return s;
  if (nw != nd) return CORRUPT("%s: %s is corrupt: %u field widths and %u field dtypes", fn, name, nw, nd);
  h->n_fields = (int)nw;
  for (int i = 0; i < h->n_fields; i++) {
    if (h->width[i] < 1 || h->width[i] > INT32_MAX)
      return CORRUPT("%s: %s is corrupt: field %d has width %lld, outside 1..2^31-1", fn, name, i,
                     (long long)h->width[i]);
    if (h->dtype[i] < AG_F32 || h->dtype[i] > AG_I64)
      return CORRUPT("%s: %s is corrupt: field %d has dtype code %lld, not a host dtype", fn, name, i,
                     (long long)h->dtype[i]);
  }
  return AG_OK;
}

/* The loaded table is the one the keys describe: this rank's share of the
 * global capacity, size and position, and the keys' fields. */
static ag_status check_table(const shd_keys *h, const ag_replay *t, const char *name, const char *fn) {
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
    ag_field fd;
    ag_status s = ag_replay_field_at(t, i, &fd);
    if (s) return s;
    if (fd.width != h->width[i] || (int64_t)fd.dtype != h->dtype[i])
      return CORRUPT(
          "%s: %s is corrupt: its table's field '%s' (width %lld, dtype code %d) is not the "
          "header's field %d (width %lld, dtype code %lld)",
          fn, name, fd.name, (long long)fd.width, (int)fd.dtype, i, (long long)h->width[i],
          (long long)h->dtype[i]);
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
  unsigned char magic[8];
  ag__agf a;
  ag__agf_init(&a);
  shd_keys h;
  memset(&h, 0, sizeof h);
  ag_replay *t = NULL;
  s = ag__stream_left(f, fn, path, "a shard file", &len);
  if (!s && len >= 8 && !ag__peek(f, magic, 8) && !memcmp(magic, "AGRL", 4) && memcmp(magic, "AGRLFILE", 8) &&
      memcmp(magic, "AGRLSHD1", 8))
    s = CORRUPT("%s: %s is not a shard file: it begins with %.8s, the magic of another agrl file", fn, path,
                (const char *)magic);
  /* the header, whole and checked, in either layout; then its keys */
  if (!s) s = ag__agf_read_head(&a, f, len, fn, path);
  if (!s) s = describe(&a, fn, path, &h);
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
  const uint64_t at = a.total, left = len - (s ? 0 : at); /* the table's image: after the header */
  if (!s && fseeko(f, a.base + (off_t)at, SEEK_SET))
    s = ag__fail(AG_ERR_IO, "%s: %s: cannot seek to its table: %s", fn, path, strerror(errno));
  if (!s) { /* the image's capacity against the keys' before a table of it is made */
    int64_t icap = ag__replay_image_capacity(f, left);
    if (icap >= 0 && icap != h.capacity / h.world) /* unreadable: ag__replay_read says why */
      s = CORRUPT(
          "%s: %s is corrupt: its table has %lld columns; rank %d of %d of a table of %lld holds %lld", fn,
          path, (long long)icap, h.rank, h.world, (long long)h.capacity, (long long)(h.capacity / h.world));
  }
  if (!s && (s = ag__replay_read(ctx, f, path, left, max_table_bytes, "ag_replay_load", &t))) {
    char why[1024]; /* the table's own reader speaks of ag_replay_load */
    snprintf(why, sizeof why, "%s", ag_last_error());
    s = ag__fail(s, "%s: the table in %s: %s", fn, path, why);
  }
  fclose(f);
  if (!s) s = check_table(&h, t, path, fn);
  if (s) {
    ag__agf_free(&a);
    ag_replay_free(t);
    return s;
  }
  int64_t capacity = h.capacity, pos = h.pos, size = h.size;
  ag__agf_free(&a); /* h's arrays were the form's */
  return shard_around(ctx, t, rank, world, capacity, pos, size, fn, out);
}
