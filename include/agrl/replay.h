/* agrl/replay.h — replay tables: named fields over the rows of one buffer.
 *
 * A schema lists fields (obs, action, reward, next_obs, terminated, ... or
 * any of your own) with a width and the dtype in which you hand them over;
 * each field takes `width` consecutive rows of one buffer whose storage
 * dtype you choose (f32 by default; values are converted on the way in, so
 * only storage bytes cross the bus). A ring writer appends transitions,
 * wrapping with two writes (S5), and keeps the number of valid transitions
 * and the ring position both on the host and on the device, so that a
 * recorded step can sample from however many transitions the table holds
 * at each replay, and walk n-step returns over the ring as it is then.
 *
 * Termination vs truncation: store `terminated` (the episode ended in a
 * terminal state: no bootstrap) and the true last observation as next_obs;
 * a truncated episode stores terminated = 0, so the target still bootstraps
 * from next_obs, as Gymnasium prescribes.
 */
#ifndef AGRL_REPLAY_H
#define AGRL_REPLAY_H

#include <stdint.h>

#include "agrl/buffer.h"
#include "agrl/capture.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_field {
  const char *name; /* copied */
  int64_t width;    /* values per transition */
  ag_dtype dtype;   /* dtype of the host data handed to ag_replay_add */
} ag_field;

typedef struct ag_replay ag_replay;

/* A table of `capacity` transitions with the given fields (names unique,
 * widths >= 1, host dtypes f32 / f16 / bf16 / u8 / i32 / i64), stored as
 * `storage` (f32, f16, bf16, u8 or i32). Sampling is refused while fewer
 * than `min_size` transitions are stored (at least 1). A batch's rows are
 * the fields' widths in order. The caller owns the table (its buffer and
 * size tensor with it); free it before ctx.
 * Errors: AG_ERR_INVALID_ARG: ctx, fields or out NULL, n_fields < 1,
 * capacity < 1, min_size outside 1..capacity, a field without a name, a
 * width < 1, an unknown dtype, a name given twice, a storage dtype not
 * listed; AG_ERR_STATE while a step is being recorded; AG_ERR_OUT_OF_MEMORY
 * (as ag_buffer_create: more than 85% of the device's free memory). */
AG_API ag_status ag_replay_create(ag_ctx *ctx, const ag_field *fields, int n_fields, int64_t capacity,
                                  ag_dtype storage, int64_t min_size, ag_replay **out);
/* Frees the table and its samplers. NULL is accepted. */
AG_API void ag_replay_free(ag_replay *r);

/* Appends k transitions. data[i] holds field i for the k transitions,
 * transition by transition (k * width values of the field's dtype). Values
 * must fit the storage dtype; integer fields are stored exactly: an
 * integer the storage cannot hold exactly is refused (integer storage
 * holds its range; f32 storage holds every integer up to 2^24 in
 * magnitude, f16 up to 2^11, bf16 up to 2^8, and larger ones that convert
 * there and back unchanged). Oldest transitions are overwritten when full.
 * All or nothing: the columns (two parts when the ring wraps), the size
 * and the position on the device and, with prioritized sampling, the new
 * priorities are written only after everything that can fail has
 * succeeded; on error the table, its size, position and priorities are as
 * before. Only a device error while the parts are sent (or the position
 * or the priorities set) can leave some columns written: the table then
 * refuses every later add, sample and gather with AG_ERR_STATE (free it).
 * k = 0 adds nothing.
 * Errors: AG_ERR_INVALID_ARG: r NULL, k < 0, data or a field's data NULL
 * for k > 0; AG_ERR_OUT_OF_RANGE: k > capacity, a value that does not fit
 * u8 or i32 storage, a value of an integer field (u8, i32, i64) that f32,
 * f16 or bf16 storage does not hold exactly (the message names the field,
 * the value and the storage); AG_ERR_STATE: the table is broken as above,
 * or a step is being recorded; AG_ERR_FREED: its buffer was freed;
 * AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_replay_add(ag_replay *r, const void *const *data, int64_t k);

/* The same from device memory: data[i] is a [width, k] tensor of field i
 * on the table's context (transition j in column j; any dtype), e.g.
 * another framework's tensor wrapped by ag_tensor_wrap (agrl/export.h).
 * The columns are converted to the storage dtype on the device, by the
 * device rules of agrl/export.h (values are not checked), and the size on
 * the device is set by a kernel: nothing crosses the bus. On CUDA and the
 * CPU that is one kernel launch for the columns (both parts of a wrap),
 * the size and the position (one for each 40 fields); on Vulkan a
 * conversion for each field and part. All or nothing up to the kernels: a
 * device error while they run leaves the table broken as above. Errors: those of ag_replay_add, AG_ERR_FREED
 * for a tensor released by ag_ctx_reset; AG_ERR_INVALID_ARG: a tensor NULL or of another context;
 * AG_ERR_SHAPE: a tensor not [width, k]; AG_ERR_STATE while a step is being recorded. */
AG_API ag_status ag_replay_add_dev(ag_replay *r, ag_tensor *const *data, int64_t k);
AG_API int64_t ag_replay_size(const ag_replay *r); /* valid transitions */
AG_API int64_t ag_replay_capacity(const ag_replay *r);
AG_API int64_t ag_replay_position(const ag_replay *r);  /* column the next transition goes to */
AG_API int64_t ag_replay_rows(const ag_replay *r);      /* rows of a gathered batch */
AG_API ag_buffer *ag_replay_buffer(const ag_replay *r); /* the table's own */
AG_API ag_dtype ag_replay_storage(const ag_replay *r);  /* its storage dtype */
AG_API int64_t ag_replay_min_size(const ag_replay *r);
/* The number of fields (0 for r NULL), and field i as it was created: its
 * name (valid while the table lives), width and host dtype. Errors:
 * AG_ERR_INVALID_ARG: r or out NULL; AG_ERR_OUT_OF_RANGE: i outside
 * 0..n-1. */
AG_API int ag_replay_n_fields(const ag_replay *r);
AG_API ag_status ag_replay_field_at(const ag_replay *r, int i, ag_field *out);

/* The number of valid transitions as a 1 x 1 i64 tensor on the device,
 * kept up to date by every add (owned by the table, valid while it lives):
 * the bound for draws inside a recorded step of your own (ag_randint_dev). */
AG_API ag_tensor *ag_replay_size_tensor(const ag_replay *r);
/* The ring position (the column the next transition goes to, as
 * ag_replay_position) as a 1 x 1 i64 tensor on the device, kept up to date
 * by every add with the columns and the size, all or nothing (set by a
 * kernel: no byte crosses the bus for it; owned by the table, valid while
 * it lives; ag_replay_load puts the file's position there too). */
AG_API ag_tensor *ag_replay_position_tensor(const ag_replay *r);
/* AG_OK when ag_replay_sample would draw B transitions now; otherwise the
 * error it would return: AG_ERR_INVALID_ARG (B < 1), AG_ERR_STATE (fewer
 * than min_size stored, or a table a device error left unusable). */
AG_API ag_status ag_replay_can_sample(const ag_replay *r, int64_t B);

/* First row and width of a field in a gathered batch (row0 and width may
 * be NULL). Errors: AG_ERR_INVALID_ARG: r or name NULL, no such field. */
AG_API ag_status ag_replay_field(const ag_replay *r, const char *name, int64_t *row0, int64_t *width);

/* B transitions drawn uniformly on the device from the valid ones:
 * batch [rows, B] f32 (and, if idx is not NULL, the [B, 1] i32 indices),
 * temporaries. Works inside a recording: the bound is read on the device at
 * each replay. The indices are i32: a table of more than 2^31 valid
 * transitions is not sampled right. Errors: AG_ERR_INVALID_ARG: r, rng or
 * batch NULL, B < 1, rng of another context; AG_ERR_STATE while size <
 * min_size, or the table is broken; those of ag_get_rows_dev. */
AG_API ag_status ag_replay_sample(ag_replay *r, ag_rng *rng, int64_t B, ag_tensor **batch, ag_tensor **idx);
/* The transitions at the n indices idx (each in 0..size-1): batch [rows, n]
 * f32, a temporary. Errors: AG_ERR_INVALID_ARG: r, idx or batch NULL,
 * n < 1; AG_ERR_OUT_OF_RANGE: an index outside 0..size-1; AG_ERR_STATE: the
 * table is broken; those of ag_get_rows (AG_ERR_STATE while recording). */
AG_API ag_status ag_replay_gather(ag_replay *r, const int64_t *idx, int64_t n, ag_tensor **batch);

/* ---- a batch straight into other memory ----
 * ag_replay_gather_into writes the transitions at the indices idx into
 * memory the caller gives (e.g. another framework's tensors, through
 * their device addresses), each destination a field of the table in a
 * dtype of its own, or the indices, or the importance weights: a batch
 * drawn by ag_replay_sample or ag_per_sample, handed over with no
 * temporary and no copy after it. */

/* A destination of ag_replay_gather_into: element e (0 .. width-1) of
 * transition j (0 .. B-1) goes to data[j * ld + e] as dtype, width being
 * the field's width (1 for the indices and the weights). Fields are
 * numbered as ag_replay_field_at numbers them (the order of creation). */
typedef struct ag_replay_dst {
  int field;      /* 0..n_fields-1, or AG_REPLAY_DST_INDICES, AG_REPLAY_DST_WEIGHTS */
  void *data;     /* memory of the table's device (e.g. another framework's tensor) */
  ag_dtype dtype; /* any ag_dtype; indices: AG_I32 or AG_I64 */
  int64_t ld;     /* elements from one transition to the next, >= the field's width (1 for indices/weights) */
} ag_replay_dst;
#define AG_REPLAY_DST_INDICES (-1)
#define AG_REPLAY_DST_WEIGHTS (-2)

/* Writes the B transitions at idx into the n_dst destinations dst.
 * idx: an i32 or i64 tensor [1, B] or [B, 1] on the table's context (as
 * ag_replay_nstep takes it, e.g. what ag_replay_sample or ag_per_sample
 * drew); each index is clamped to 0 .. capacity-1 on the device, as
 * ag_get_rows_dev clamps (the table's unwritten columns are read as they
 * are). weights: NULL, or an f32 tensor of B values, [1, B] (packed) or
 * [B, 1], on the table's context (ag_per_sample's), read only for a
 * weights destination.
 * Values: a field's values as ag_replay_gather gives them (the stored
 * value times the buffer's scale, in f32; at a scale of 1 the stored value
 * itself) converted to the destination's dtype by the device rules of
 * agrl/export.h (round to nearest even; integer dtypes saturate, NaN
 * becomes 0); except that integer storage (u8, i32) at a scale of 1 goes
 * into an integer dtype exactly (an i32 value beyond 2^24 included). On a
 * backend without the one-launch kernel (Vulkan) the batch is gathered as
 * f32 first: there, integer storage is exact up to 2^24 in magnitude.
 * The indices destination receives the clamped columns; the weights
 * destination the weights, converted. A field may be asked for several
 * times (in several dtypes). The destinations must not overlap each other,
 * the table, idx or weights; the caller keeps their memory valid until the
 * queued work has finished (see ag_ctx_defer).
 * Queued, with no transfer and no host wait, and recordable: inside
 * ag_capture_create's step it makes nothing but temporaries of the
 * recording (where it composes), and each replay gathers the table as it
 * is then. One kernel launch on CUDA and the CPU (one for each 40
 * destinations); on Vulkan a gather and a conversion a destination (and a
 * kernel that clamps the indices when they are asked for, or come with
 * gaps).
 * Errors, all checked before anything runs (nothing is written on error):
 * AG_ERR_INVALID_ARG: r, idx or dst NULL, n_dst < 1, a destination's
 * field neither a field nor AG_REPLAY_DST_INDICES / _WEIGHTS, its data
 * NULL or not aligned to its dtype's size, an unknown dtype, indices asked
 * for as another dtype than i32 / i64, weights asked for with weights
 * NULL, idx or weights of another context, a destination's span (ld (B-1)
 * + width elements) that overflows; AG_ERR_SHAPE: idx not i32 / i64 or
 * neither a row nor a column, weights not f32, not B values as a row or a
 * column, or a row with gaps, a destination's ld below its width;
 * AG_ERR_STATE: the table is broken (see ag_replay_add); AG_ERR_FREED: the
 * table's buffer, idx or weights freed; AG_ERR_OUT_OF_MEMORY (temporaries
 * where it composes); AG_ERR_UNSUPPORTED (a backend that can neither run
 * the kernel nor compose it: none of agrl's); AG_ERR_DEVICE. */
AG_API ag_status ag_replay_gather_into(ag_replay *r, const ag_tensor *idx, const ag_tensor *weights,
                                       const ag_replay_dst *dst, int n_dst);

/* A field of a gathered batch: a [width, B] view (a temporary, as batch).
 * Errors: AG_ERR_INVALID_ARG: an argument NULL, no such field;
 * AG_ERR_FREED; AG_ERR_SHAPE: batch has not the table's rows. */
AG_API ag_status ag_replay_view(const ag_replay *r, ag_tensor *batch, const char *name, ag_tensor **out);

/* ---- n-step returns ----
 * The n-step returns of sampled transitions, computed on the device from
 * the table. For each index c = idx[j] (an i32 or i64 tensor [1, B] or
 * [B, 1] on the table's context, e.g. what ag_replay_sample or
 * ag_per_sample drew), clamped to 0 .. capacity-1 on the device as
 * ag_get_rows_dev clamps, the walk takes steps k = 0, 1, ... over the
 * columns c_k = (c + k * stride) mod capacity, adding gamma^k * reward[c_k]
 * (the reward as a gathered batch holds it: times the buffer's scale) to
 * the return, and stops
 *   - after a step whose terminated flag is set: discount 0 (no bootstrap);
 *   - else after a step whose truncated flag is set: discount gamma^(k+1);
 *   - else after step n - 1: discount gamma^n;
 *   - else before step k + 1 when c_{k+1} was not written after c_k: the
 *     ring writes its columns in the order pos, pos + 1, ... (mod
 *     capacity), so the rank of column x is (x - pos) mod capacity (while
 *     the table fills, x itself), x holds a transition when its rank is at
 *     least capacity - size, and the walk goes on only from a column that
 *     holds one, and only while rank(c_k) + stride < capacity: it never
 *     reads across the write head, the wrap included; discount gamma^(k+1).
 * A flag is set where its stored value is not 0 (f32, i32 or another
 * storage, read as stored, without the scale); terminated wins over
 * truncated on the same step. last[j] is c_k of the last step taken, the
 * column whose next_obs the target bootstraps from:
 *   target_j = ret[j] + discount[j] * V(next_obs[last[j]]).
 * An index outside the valid columns (a column not written yet) gives its
 * first step only. `stride` is the number of environment copies whose
 * transitions the table interleaves (copy i of a vector environment adds
 * its transition at pos + i each step, so its next one is stride columns
 * later): 1 for a single environment.
 * Arithmetic: f32, in the order k = 0, 1, ..., gamma^k by repeated
 * products, every product and sum rounded on its own: the CPU and a GPU
 * give the same bits (for values that never become subnormal, which the
 * CPU flushes to zero).
 * Outputs, temporaries: ret [1, B] f32, discount [1, B] f32, last [1, B]
 * i64. Queued and recordable: the size and the position are read on the
 * device (ag_replay_size_tensor, ag_replay_position_tensor) each time it
 * runs, so a recorded step replayed after more adds walks the ring as it
 * is then.
 * Errors: AG_ERR_INVALID_ARG: r, idx, reward, terminated or an output
 * NULL, n outside 1..64, gamma outside [0, 1] (or NaN), stride outside
 * 1..capacity, a field name the table does not have (truncated may be
 * NULL: no truncations), idx of another context; AG_ERR_SHAPE: a field of
 * width other than 1, idx not i32 / i64, or neither a row nor a column;
 * AG_ERR_FREED: idx or the table's buffer freed; AG_ERR_STATE: the table
 * is broken (see ag_replay_add), or a loaded table's position is not on
 * the device yet (see ag_replay_position_tensor) while a step is being
 * recorded; AG_ERR_OUT_OF_MEMORY. On error nothing changes and the outputs
 * are not written. */
AG_API ag_status ag_replay_nstep(ag_replay *r, ag_tensor *idx, int n, float gamma, int64_t stride,
                                 const char *reward, const char *terminated, const char *truncated,
                                 ag_tensor **ret, ag_tensor **discount, ag_tensor **last);

/* ---- prioritized replay (Schaul et al., "Prioritized Experience Replay") ----
 * Proportional prioritization over the columns of a table: column i is drawn
 * with probability p_i^alpha / sum_k p_k^alpha, by stratified sampling (one
 * draw in each of B equal slices of the total) down a sum tree of fan-out 16
 * kept on the device. New transitions get the largest priority seen so far
 * (1 at first). Importance weights (N P(i))^-beta are normalized by the
 * largest of the batch. Everything is a device operation and recordable. */
typedef struct ag_per ag_per;

/* Attaches prioritized sampling to a table (one per table; freed with it or
 * by ag_per_free). alpha in [0, 1]. Transitions already stored get priority 1.
 * Errors: AG_ERR_INVALID_ARG: r or out NULL, alpha outside [0, 1];
 * AG_ERR_STATE: the table has a prioritized sampler already, or a step is
 * being recorded; AG_ERR_UNSUPPORTED: capacity beyond AG_PER_MAX_CAPACITY, or a device
 * that lacks the tree's kernels (a Vulkan device without shaderFloat64;
 * a table moved onto such a device later fails its adds and samples with
 * AG_ERR_UNSUPPORTED); AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_per_create(ag_replay *r, float alpha, ag_per **out);
/* The largest table prioritized sampling takes (2^31 - 1 columns). */
#define AG_PER_MAX_CAPACITY ((int64_t)2147483647)
/* AG_OK when ag_per_create would take a table of `capacity` columns and
 * this alpha as far as they go, before any table is made (so that a caller
 * refuses a size before allocating it): AG_ERR_INVALID_ARG for alpha
 * outside [0, 1] (or NaN), AG_ERR_UNSUPPORTED for a capacity beyond
 * AG_PER_MAX_CAPACITY. */
AG_API ag_status ag_per_validate(int64_t capacity, float alpha);
/* The alpha the sampler was made with (0 for per NULL). */
AG_API float ag_per_alpha(const ag_per *per);
/* Detaches the sampler from its table and frees it. NULL is accepted. */
AG_API void ag_per_free(ag_per *per);

/* B indices ([B, 1] i32) and their importance weights ([1, B] f32),
 * temporaries, drawn from the valid columns (min_size does not apply).
 * Errors: AG_ERR_INVALID_ARG: an argument NULL, B < 1, beta outside
 * [0, 1], rng of another context than the table; AG_ERR_STATE: the table
 * is empty; AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_per_sample(ag_per *per, ag_rng *rng, int64_t B, float beta, ag_tensor **idx,
                               ag_tensor **weights);
/* The same with beta read on the device from a [1, 1] f32 tensor when the
 * kernel runs (a recorded step then samples with the beta of each replay:
 * write the tensor between replays to anneal it); a value outside [0, 1] is
 * clamped to it (NaN as 1). Errors: those of ag_per_sample; AG_ERR_INVALID_ARG:
 * beta NULL or of another context; AG_ERR_FREED; AG_ERR_SHAPE: beta not a
 * [1, 1] f32 tensor. */
AG_API ag_status ag_per_sample_dev(ag_per *per, ag_rng *rng, int64_t B, ag_tensor *beta, ag_tensor **idx,
                                   ag_tensor **weights);
/* Sets the priorities (n f32 values, any shape, e.g. |TD error| + eps) of the
 * columns idx (i32 / i64, as many). Values below 1e-12 (and NaN) count as
 * 1e-12. Indices are on the device, where they cannot be checked before the
 * kernel runs: one outside 0 .. capacity-1 is skipped (nothing is written
 * for it). Queued; recordable. Errors: AG_ERR_INVALID_ARG: per, idx or
 * priorities NULL or of another context than the table; AG_ERR_FREED;
 * AG_ERR_SHAPE: idx not i32 / i64 or a view with gaps, priorities not f32,
 * not as many, or a view with gaps that is not a row. */
AG_API ag_status ag_per_update(ag_per *per, ag_tensor *idx, ag_tensor *priorities);
/* The same from host arrays of n values (checked: indices inside the valid
 * part, priorities finite and >= 0). Errors: AG_ERR_INVALID_ARG: per, idx
 * or priorities NULL, n < 1, a priority negative or not finite;
 * AG_ERR_OUT_OF_RANGE: an index outside 0..size-1; AG_ERR_STATE while a
 * step is being recorded; AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_per_update_host(ag_per *per, const int64_t *idx, const float *priorities, int64_t n);
/* Sum of p^alpha over the table (reads the device: waits for the queue).
 * Errors: AG_ERR_INVALID_ARG: per or total NULL; AG_ERR_STATE while a step
 * is being recorded; AG_ERR_DEVICE. */
AG_API ag_status ag_per_total(ag_per *per, double *total);

/* ---- files: a table and its prioritized sampler saved and loaded ----
 *
 * ag_replay_save writes the table to `path`: its fields, storage dtype,
 * capacity, min_size, size and ring position, its valid columns only
 * (columns 0 .. size-1 of the buffer as stored, whatever the position; not
 * the whole capacity) and, with a prioritized sampler, alpha, the largest
 * priority seen and the leaves of its sum tree (p^alpha as stored, bit for
 * bit) of the valid columns; the inner nodes are rebuilt from them on load
 * with the sum every device takes, so the tree, ag_per_total and every
 * later draw are those of the saved table (loaded on another device, the
 * importance weights of the draws may differ in their last bit: each
 * device's pow rounds its own way). The draw counters live in the
 * caller's ag_rng, not in the table: the same rng state gives the same
 * draws after a load. The data go device -> host -> file in parts of at
 * most AG_TRANSFER_PART_BYTES through at most three host buffers, the device
 * copies on the calling thread overlapping the file's reads or writes and
 * CRCs on a second one (never a host copy of
 * the whole table), and the file is written beside `path`, flushed and
 * renamed over it (ag_mlp_save's way): a failure or a crash never leaves a
 * half file under `path`, and an earlier file there stays as it was.
 * The file is device-neutral: one saved on a GPU loads on the CPU and back
 * with the same bytes.
 *
 * ag_replay_load makes a NEW table on ctx from such a file, always of the
 * file's capacity, fields, storage and min_size (there is no loading into
 * an existing table or another capacity), with its prioritized sampler
 * attached when the file has one (ag_replay_per returns it; the table owns
 * it). The data go file -> host -> device in the file's parts. Priorities
 * set (by ag_per_update's device indices) on columns beyond the valid ones
 * are not saved: they load as 0 until those columns are added.
 *
 * The file is an agrl container (docs/container.md) of kind "replay",
 * replay.version 2: keys replay.storage (ag_dtype code: f32 0, f16 1,
 * bf16 2, u8 3, i32 4), replay.capacity (1..2^40), replay.min_size
 * (1..capacity), replay.size (0..capacity), replay.position (= size while
 * size < capacity, else 0..capacity-1), replay.widths and replay.dtypes
 * (i64 arrays, one per field, 1..1024 fields: widths 1..2^31-1, host dtype
 * codes 0..5), replay.field.<i> (field i's name), replay.sampler ("none"
 * or "per") and, for "per", replay.per.alpha and replay.per.max_priority
 * (f64 values of f32s); section "columns", a tensor [rows, size] of the
 * storage dtype (column c's rows at c * rows, as the buffer holds them),
 * and for "per" section "leaves", size f64 values (finite, >= 0), the leaf
 * of column c at 8c. Parts of AG_TRANSFER_PART_BYTES, each with its
 * CRC-32. Files of agrl 0.1.0 ("AGRLRPL1", replay.version 1) still load.
 *
 * The loader checks the whole header against the container's limits and
 * the file's real length, then the keys against the limits above and each
 * other, before it allocates anything but the header; it refuses with
 * AG_ERR_IO and a message naming the path and what is wrong: not an agrl
 * file or not of kind "replay"; a header failing its CRC-32; a key missing
 * or outside its limits, a name twice, sections other than those the keys
 * describe, a table of more than 2^62 bytes, alpha outside [0, 1], a
 * largest priority not finite and positive, a prioritized table beyond
 * 2^31; shorter than the header or its sections ("truncated"), or longer
 * ("trailing bytes"); a part failing its CRC-32, a leaf not finite and
 * >= 0. A newer container or replay.version is AG_ERR_UNSUPPORTED. Nothing
 * is half-loaded: on any failure the table made so far is freed and *out is
 * not written.
 *
 * ag_replay_save errors: AG_ERR_INVALID_ARG (r or path NULL, path empty);
 * AG_ERR_STATE (a step is being recorded, or the table is broken by a
 * device error: see ag_replay_add); AG_ERR_UNSUPPORTED (more than 1024
 * fields, a name longer than 4096 bytes); AG_ERR_OUT_OF_MEMORY (host
 * memory for the header and the part buffers); AG_ERR_IO (the file cannot
 * be created, written, flushed or renamed: a full disk, a directory that
 * does not exist or cannot be written); AG_ERR_DEVICE and the faults of
 * the downloads. On any error the file under path is unchanged, the
 * temporary is removed, and the table is as before.
 * ag_replay_load errors: the above refusals; AG_ERR_INVALID_ARG (ctx, path
 * or out NULL); AG_ERR_IO (the file cannot be opened or read, or is not a
 * regular file); AG_ERR_STATE (a step is being recorded);
 * AG_ERR_OUT_OF_MEMORY (host memory, or a table that does not fit the
 * device, as ag_replay_create); AG_ERR_DEVICE. The caller owns the table. */
AG_API ag_status ag_replay_save(const ag_replay *r, const char *path);
AG_API ag_status ag_replay_load(ag_ctx *ctx, const char *path, ag_replay **out);
/* The prioritized sampler attached to a table (e.g. one ag_replay_load
 * made), or NULL when it has none (or r is NULL). The table owns it. */
AG_API ag_per *ag_replay_per(const ag_replay *r);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_REPLAY_H */
