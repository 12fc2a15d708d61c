/* shard.c — one rank's shard of a replay table spread over a group.
 *
 * Global column j lives on rank j mod world at local column j / world.
 * Because the global capacity is a multiple of world, a global ring position
 * p maps to local position ceil((p - rank) / world) on every rank, so each
 * shard is an ordinary ring (an ag_replay) that receives every world-th
 * transition of the global stream, starting with the first one it owns.
 * The invariant "local position == global columns owned before p" is
 * checked on every add.
 */
#include <stdlib.h>
#include <string.h>

#include "agrl/dist.h"
#include "core/internal.h"

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

ag_status ag_shard_create(ag_ctx *ctx, const ag_field *fields, int n_fields, int64_t capacity,
                          ag_dtype storage, int64_t min_size, int rank, int world, ag_shard **out) {
  static const char fn[] = "ag_shard_create";
  if (!ctx || !fields || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, fields and out must not be NULL", fn);
  if (world < 1 || rank < 0 || rank >= world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: rank %d of world %d: need world >= 1 and 0 <= rank < world", fn,
                    rank, world);
  if (capacity < world || capacity % world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: capacity %lld must be a positive multiple of world (%d)", fn,
                    (long long)capacity, world);
  if (min_size < 1 || min_size > capacity)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: min_size = %lld must be in 1..capacity (%lld)", fn,
                    (long long)min_size, (long long)capacity);
  if (n_fields < 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_fields = %d; give at least one field", fn, n_fields);
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
  ag_status s = AG_OK;
  if (!sh->width || !sh->dtype || !sh->pack || !sh->pack_cap || !sh->ptrs)
    s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  for (int i = 0; i < n_fields && !s; i++) {
    sh->width[i] = fields[i].width;
    sh->dtype[i] = fields[i].dtype;
  }
  /* each shard needs its share of the minimum before it samples */
  int64_t local_min = (min_size + world - 1) / world;
  if (!s) s = ag_replay_create(ctx, fields, n_fields, capacity / world, storage, local_min, &sh->local);
  if (s) {
    ag_shard_free(sh);
    return s;
  }
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

/* The local ring position that global position p implies for this rank. */
static int64_t local_pos_of(const ag_shard *sh, int64_t p) {
  int64_t owned = p > sh->rank ? (p - sh->rank + sh->world - 1) / sh->world : 0;
  return owned % (sh->capacity / sh->world);
}

static ag_status check_in_step(const ag_shard *sh, const char *fn) {
  if (ag_replay_position(sh->local) != local_pos_of(sh, sh->pos))
    return ag__fail(AG_ERR_STATE,
                    "%s: the shard's table was added to directly (local position %lld, expected %lld); add "
                    "through ag_shard_add or ag_shard_add_local only",
                    fn, (long long)ag_replay_position(sh->local), (long long)local_pos_of(sh, sh->pos));
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
