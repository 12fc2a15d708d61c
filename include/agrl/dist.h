/* agrl/dist.h — several GPUs of a host: a process group, one replay table
 * sharded over it, and data-parallel updates.
 *
 * One process drives one GPU (the usual NCCL launch). The processes of a
 * group find each other through a file: rank 0 writes an NCCL unique id to
 * `id_path` and the other ranks read it (`agrl train --gpus G` starts the
 * processes and picks a fresh path). Collectives run on the context's queue
 * through NCCL and can be recorded inside a step (ag_capture): a
 * data-parallel DQN averages its gradients with one all-reduce per replay,
 * so what crosses between GPUs each step is gradients, never transitions.
 *
 * A group of one (world = 1) needs neither NCCL nor a GPU: every collective
 * is then a local no-op or copy, on the CPU as on a GPU, so the same program
 * runs on one device unchanged. Groups of several processes need CUDA
 * contexts and a library built with NCCL (ag_dist_nccl_available()).
 *
 * agrl sets NCCL_NVLS_ENABLE=0 (NVLink multicast off) unless the variable
 * is already set: the collectives here are small and gain nothing from it.
 */
#ifndef AGRL_DIST_H
#define AGRL_DIST_H

#include <stdint.h>

#include "agrl/replay.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the library was built with NCCL (groups of several processes). */
AG_API int ag_dist_nccl_available(void);

typedef struct ag_dist ag_dist;

/* Joins group `world` as process `rank` (0 <= rank < world), computing on
 * ctx's device. world > 1: ctx must be a CUDA context; rank 0 creates
 * `id_path` (which must not exist: a stale id from an earlier run would
 * never connect) and removes it once every rank has joined; the others wait
 * for it. The whole join must finish within timeout_s seconds (> 0, also
 * for world = 1), else AG_ERR_TIMEOUT and nothing is kept. world = 1:
 * id_path may be NULL. The group lives until ag_dist_free; a device switch
 * of ctx ends it (its calls then return AG_ERR_STATE).
 * Errors: AG_ERR_INVALID_ARG: ctx or out NULL, world < 1, rank outside
 * 0..world-1, timeout_s <= 0, world > 1 without id_path;
 * AG_ERR_UNSUPPORTED: world > 1 on a CPU context or without NCCL;
 * AG_ERR_STATE: id_path exists (rank 0), or a step is being recorded;
 * AG_ERR_IO: id_path cannot be made or read; AG_ERR_TIMEOUT; AG_ERR_DEVICE
 * (NCCL); AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_dist_create(ag_ctx *ctx, int rank, int world, const char *id_path, double timeout_s,
                                ag_dist **out);
/* Leaves the group (waits for the context's queue first); before freeing the
 * context. NULL is accepted. */
AG_API void ag_dist_free(ag_dist *g);

AG_API int ag_dist_rank(const ag_dist *g);
AG_API int ag_dist_world(const ag_dist *g);
AG_API ag_ctx *ag_dist_ctx(const ag_dist *g);

typedef enum ag_reduce_op {
  AG_REDUCE_SUM = 0,
  AG_REDUCE_MEAN = 1, /* sum / world (f32 only) */
  AG_REDUCE_MAX = 2
} ag_reduce_op;

/* Every rank calls the collectives below in the same order with tensors of
 * the same shapes and dtypes: packed tensors (no gaps between columns) of
 * the group's context; reductions take f32, i32 or i64 (a mean f32 only),
 * broadcast and all-gather any dtype. They are queued on the context and
 * recordable; they are not differentiated. A group of one checks its
 * arguments and moves nothing. Errors of all: AG_ERR_INVALID_ARG: g or a
 * tensor NULL, a tensor of another context; AG_ERR_FREED: a temporary
 * released by ag_ctx_reset; AG_ERR_SHAPE: a view with gaps, a dtype the
 * call does not take; AG_ERR_STATE: ctx changed device since the group was
 * made; AG_ERR_DEVICE (NCCL); AG_ERR_OUT_OF_MEMORY. */

/* In place: each tensor becomes the reduction of that tensor over the
 * ranks (ts: n tensors, one grouped operation). Errors: AG_ERR_INVALID_ARG:
 * an unknown op, ts NULL, n < 1. */
AG_API ag_status ag_dist_allreduce(ag_dist *g, ag_tensor *const *ts, int n, ag_reduce_op op);
/* In place: each of the n tensors takes rank root's value.
 * Errors: AG_ERR_INVALID_ARG: ts NULL, n < 1, root outside 0..world-1. */
AG_API ag_status ag_dist_broadcast(ag_dist *g, ag_tensor *const *ts, int n, int root);
/* x [r, c] of every rank side by side: out [r, c * world] (a temporary of
 * x's dtype; for world = 1 a view of x itself), rank k's columns at
 * k*c .. k*c + c-1. Errors: AG_ERR_INVALID_ARG: out NULL. */
AG_API ag_status ag_dist_allgather(ag_dist *g, ag_tensor *x, ag_tensor **out);
/* Returns once every rank has called it and this rank's queued work is
 * done (not recordable: AG_ERR_STATE while a step is being recorded). */
AG_API ag_status ag_dist_barrier(ag_dist *g);

/* ---- a replay table sharded over the ranks ----
 * A table of `capacity` columns (a multiple of world) in a global index
 * space: global column j lives on rank j mod world, at local column
 * j / world of that rank's table (an ordinary ag_replay on its device, with
 * every buffer behaviour). Interleaving keeps the shards within one
 * transition of each other in size while the table fills, so each rank can
 * sample its share of a batch from its own shard. */
typedef struct ag_shard ag_shard;

/* This rank's shard: capacity / world columns on ctx's device. rank and
 * world are given directly (not an ag_dist), so that routing works without
 * a group; min_size is the global minimum (each shard needs its share).
 * fields and storage as for ag_replay_create. The caller owns the shard,
 * which owns its table. Errors: AG_ERR_INVALID_ARG: ctx, fields or out
 * NULL, n_fields < 1, rank outside 0..world-1, capacity not a positive
 * multiple of world, min_size outside 1..capacity; those of
 * ag_replay_create. */
AG_API ag_status ag_shard_create(ag_ctx *ctx, const ag_field *fields, int n_fields, int64_t capacity,
                                 ag_dtype storage, int64_t min_size, int rank, int world, ag_shard **out);
AG_API void ag_shard_free(ag_shard *sh); /* and its table; NULL is accepted */

/* Appends k transitions of the global stream (every rank passes the same
 * data, laid out as for ag_replay_add); this rank keeps the ones whose
 * global column it owns (only their values are checked). All or nothing.
 * Errors: AG_ERR_INVALID_ARG: sh NULL, data or a field's data NULL for
 * k > 0; AG_ERR_OUT_OF_RANGE: k outside 0..capacity; AG_ERR_STATE: the
 * local table was added to directly; AG_ERR_OUT_OF_MEMORY; those of
 * ag_replay_add. */
AG_API ag_status ag_shard_add(ag_shard *sh, const void *const *data, int64_t k);
/* Appends k transitions of this rank's own (e.g. from its environments):
 * they take this rank's next local columns. Every rank adds the same k at
 * each call (data-parallel lockstep); the global position then advances by
 * k * world. Refused (AG_ERR_STATE) while the global position is not a
 * multiple of world, i.e. after global adds that left the shards uneven.
 * Errors besides: AG_ERR_INVALID_ARG: sh NULL; AG_ERR_OUT_OF_RANGE: k
 * outside 0..capacity / world; AG_ERR_STATE: the local table was added to
 * directly; those of ag_replay_add. */
AG_API ag_status ag_shard_add_local(ag_shard *sh, const void *const *data, int64_t k);

AG_API int64_t ag_shard_size(const ag_shard *sh);     /* valid global columns */
AG_API int64_t ag_shard_capacity(const ag_shard *sh); /* global columns */
AG_API int64_t ag_shard_position(const ag_shard *sh); /* next global column */
AG_API int ag_shard_rank(const ag_shard *sh);
AG_API int ag_shard_world(const ag_shard *sh);
/* This rank's table (sample, gather, PER on it as on any table), owned by
 * the shard; add to it only through ag_shard_add(_local), which refuse a
 * table added to directly. */
AG_API ag_replay *ag_shard_local(const ag_shard *sh);
/* Global column of a local one, and the owner and local column of a global one. */
AG_API int64_t ag_shard_global_index(const ag_shard *sh, int64_t local);
AG_API void ag_shard_locate(const ag_shard *sh, int64_t global, int *rank, int64_t *local);

/* A single-learner batch: every rank draws B / world transitions uniformly
 * from its shard and the group gathers them, so that each rank holds the
 * same batch [rows, B] f32, a temporary (rank k's draws at columns
 * k*B/world ...). B must be a multiple of world; recordable.
 * Errors: AG_ERR_INVALID_ARG: sh, g, rng or batch NULL, g's rank or world
 * not the shard's, B not a positive multiple of world; those of
 * ag_replay_sample (of B / world) and ag_dist_allgather. */
AG_API ag_status ag_shard_sample_global(ag_shard *sh, ag_dist *g, ag_rng *rng, int64_t B, ag_tensor **batch);

/* ---- a shard's file: each rank saves its own, a group of the same size loads them ----
 *
 * ag_shard_save writes this rank's shard to `path` (one file per rank, e.g.
 * "replay.<rank>"): its rank, the group size, the global capacity,
 * position and size, its fields' widths and host dtypes, and then its table
 * as ag_replay_save writes one (agrl/replay.h: the valid columns only, with
 * the prioritized sampler when the table has one, its data in parts of
 * AG_TRANSFER_PART_BYTES through one host buffer), written beside `path`,
 * flushed and renamed over it: a failure never leaves a half file under
 * `path`, and an earlier file there stays as it was. Like the table's
 * file, it is device-neutral. The ranks save independently (no group is
 * needed); to restore a consistent table, save every rank's shard at the
 * same point of the global stream.
 *
 * ag_shard_load makes a NEW shard on ctx from such a file, for the rank
 * and group size that wrote it only: the shard equals the saved one (the
 * same global capacity, position and size, its table bit for bit with its
 * prioritized sampler, which ag_replay_per(ag_shard_local(sh)) returns and
 * the table owns), so ag_shard_add and ag_shard_add_local continue the
 * global ring exactly as the saved shard would have. The global min_size
 * is not kept as such: the table keeps its share (ag_replay_min_size).
 * Another group size is refused: re-sharding is not supported, as a
 * global column's rank and local column depend on world. A group of
 * another size starts from new shards; a program that needs the old
 * transitions there reads the old shards' columns (ag_buffer_read of each
 * local table: global column j is local column j / world of rank j mod
 * world) and adds them to the new shards with ag_shard_add, oldest first
 * (global columns position .. capacity-1, then 0 .. position-1, once the
 * ring has wrapped); priorities then start afresh.
 *
 * Layout: an agrl container (docs/container.md) of kind "shard",
 * shard.version 2, holding the shard's header as typed keys and no
 * sections: shard.library (the library that wrote it, ag_version()),
 * shard.rank (0..world-1), shard.world (1..2^31-1), shard.capacity (global,
 * a multiple of world, capacity / world in 1..2^40), shard.position
 * (global: = size while size < capacity, else 0..capacity-1), shard.size
 * (global, 0..capacity), shard.widths and shard.dtypes (each field's width,
 * 1..2^31-1, and host dtype code, 0..5; 1..1024 fields). The container's
 * length covers its header alone; the local table follows it to the end
 * of the file as its own container image, kind "replay", as
 * ag_replay_save writes it (agrl/replay.h). A shard file of agrl 0.1.0
 * (magic "AGRLSHD1": a header of its own, then the table's image) is read
 * into the same keys (shard.version 1) and loads the same way.
 *
 * The loader reads the container's header whole and checks it (its CRC-32,
 * every length against the file's) and then the keys against their limits
 * before the rank and group size, and those before it reads the table;
 * then the table against the keys: capacity / world columns (checked
 * before the table is made), the local size and position that the global
 * ones give this rank (it owns global columns rank, rank + world, ... of
 * the valid ones), the keys' fields. It refuses with AG_ERR_IO and a
 * message naming the path and what is wrong: not an agrl file, another
 * agrl file ("not a shard file": another magic, or another kind), a header
 * failing its CRC-32, a key missing, of another type or outside its
 * limits, a section in the shard's header, a table not the one the keys
 * describe, shorter than the header ("truncated"), and each refusal of
 * ag_replay_load for the table (a part failing its CRC-32, truncated,
 * trailing bytes, ...). A newer container or shard.version is
 * AG_ERR_UNSUPPORTED. A file of another rank or another group size is
 * AG_ERR_INVALID_ARG, the message saying what the file holds and what was
 * asked ("written by rank 1 of 4; loading it as rank 1 of 2 is not
 * supported: load it with a group of 4"). Nothing is half-loaded: on any
 * failure everything made so far is freed and *out is not written.
 *
 * ag_shard_save errors: AG_ERR_INVALID_ARG (sh or path NULL, path empty);
 * AG_ERR_STATE (a step is being recorded, the local table was added to
 * directly, or it is broken by a device error); AG_ERR_UNSUPPORTED (more
 * than 1024 fields, a name longer than 4096 bytes); AG_ERR_OUT_OF_MEMORY
 * (host memory for the keys and the part buffer); AG_ERR_IO (the file
 * cannot be created, written, flushed or renamed: a full disk, a directory
 * that does not exist or cannot be written); AG_ERR_DEVICE and the faults
 * of the downloads. On any error the file under path is unchanged, the
 * temporary is removed, and the shard is as before.
 * ag_shard_load errors: the refusals above; AG_ERR_INVALID_ARG (ctx, path
 * or out NULL, world < 1, rank outside 0..world-1); AG_ERR_IO (the file
 * cannot be opened or read, or is not a regular file); AG_ERR_STATE (a
 * step is being recorded); AG_ERR_OUT_OF_MEMORY (host memory, or a table
 * that does not fit the device); AG_ERR_DEVICE. The caller owns the shard. */
AG_API ag_status ag_shard_save(const ag_shard *sh, const char *path);
AG_API ag_status ag_shard_load(ag_ctx *ctx, const char *path, int rank, int world, ag_shard **out);

/* The data-parallel DQN (ag_dqn_create_dist) is declared in agrl/agent.h. */

#ifdef __cplusplus
}
#endif
#endif /* AGRL_DIST_H */
