/* agrl/frames.h — frame tables: pixel observations stored one frame per
 * environment step, stacks rebuilt on the device when a batch is gathered.
 *
 * An Atari-style DQN observes a stack of the last k frames; a table that
 * stored obs and next_obs stacks would hold every frame 2k times. A frame
 * table stores each step's newest frame once (u8, h x w x c) beside the
 * step's scalar fields (action, reward, terminated, truncated ...: an
 * ag_replay of the same capacity, agrl/replay.h), and the gather rebuilds
 * both stacks of each sampled transition from frame indices, in one kernel.
 *
 * Entries. Each add appends `steps` environment steps of `n_envs` copies,
 * step by step, copy by copy (entry s * n_envs + e of the call is copy e at
 * step s). An entry is one frame of a copy, a flag `first` (the frame is an
 * episode's first observation, as reset returns it), and the fields of the
 * transition taken from that observation. The copy's next entry holds the
 * next observation's frame, so transition x is
 *   obs      = the stack that ends at entry x,
 *   action, reward, ... = the fields of entry x,
 *   next_obs = the stack that ends at the copy's next entry (x + n_envs).
 * An episode's last observation (what step returned with terminated or
 * truncated set) is an entry of its own, whose fields are stored and never
 * sampled: the next entry of its copy is flagged first. This is the order
 * Gymnasium's vector environments give with autoreset_mode NEXT_STEP (the
 * step after the last returns the reset observation, its action ignored);
 * with one environment, add the last observation with any fields, then the
 * reset observation flagged first.
 *
 * Stacks. The stack that ends at entry x has slots 0 (oldest) .. k-1
 * (newest): slot k-1 is x's frame; going back, slot i is the frame of the
 * copy's entry before slot i+1's, except that an episode's first frame is
 * repeated into every older slot (Gymnasium's FrameStackObservation with
 * padding_type="reset"). Layout of one stacked observation (D = k*c*h*w
 * values): slot i, channel ch, pixel (y, x) at (i*c + ch)*h*w + y*w + x,
 * i.e. [k*c, h, w] channels first, slots outermost (for c = 1: [k, h, w]).
 * A batch of B is a [D, B] tensor (sample j's D values contiguous: as a
 * row-major array it is [B, k*c, h, w]), u8 as stored or f32 as v / 255.
 *
 * Which transitions are sampled. Entry x is a transition that may be
 * sampled (ag_frames_sampleable) when
 *   - x holds an entry and the copy's next entry x + n_envs (mod capacity)
 *     was written after it: the newest n_envs entries are never sampled;
 *   - that next entry is not flagged first (x is not an episode's last
 *     observation);
 *   - the stack ending at x reaches an episode's first frame, or has
 *     k - 1 older entries of its copy still held: the entries just after
 *     the write head whose stacks would need frames already overwritten are
 *     never sampled (while the table fills: entries whose stack reaches
 *     back before the copy's first entry without meeting a first flag).
 * Nothing sampled ever reads a frame overwritten or not yet written.
 * (Rank of slot x: (x - pos) mod capacity, as agrl/replay.h's n-step walk
 * defines it.) The copies' entries keep their places as long as every add
 * gives whole steps of n_envs entries, which the API makes so.
 *
 * Memory (device): capacity * (h*w*c + 1) bytes of frames and first flags,
 * plus capacity * rows * size(storage) of fields (rows = the sum of their
 * widths), plus 32 bytes (size and position, and the ring n-step walks
 * see); host: capacity bytes (a copy of the first flags) and a staging
 * area as large as the largest add. For 84 x 84 x 1 frames and action,
 * reward, terminated and truncated stored as f32: 1e6 * (7057 + 16) + 32
 * bytes = 7.07 GB per million entries (a million transitions, plus one
 * entry per episode for its last observation). A prioritized table adds
 * on the device capacity bytes (the mask below), 8 * (16 + 16^2 + ... +
 * 16^d + 1) bytes of sum tree (d >= 1 the least with 16^d >= capacity) and
 * 4 (the largest priority), on the host capacity bytes (the mask's copy):
 * 9.95 MB more per million entries.
 *
 * Prioritized sampling (cfg.prioritized = 1): proportional prioritization
 * as agrl/replay.h's ag_per, over the transitions that may be sampled.
 * Each entry x has a priority p_x; ag_frames_sample_per draws x with
 * probability P(x) = p_x^alpha / (sum of p_y^alpha over the entries y
 * that may be sampled) when x may be sampled, and never otherwise
 * (P(x) = 0), by stratified sampling down a sum tree on the device (one
 * draw in each of B equal slices of the total, as ag_per_sample). An entry
 * gets the largest priority seen so far (1 at first) when it becomes a
 * transition that may be sampled (the add that writes its copy's next
 * entry, or its own add when that one writes both), then what the updates
 * give it. An entry that may not be sampled holds no priority: its leaf in
 * the tree is 0 from the add that makes it so until it is overwritten, and
 * every update skips it. The table keeps a mask on the device, a byte per
 * entry (1: it may be sampled), as each add leaves the ring.
 *
 * Backends: every one, with the same ring arithmetic (src/base/frames.h;
 * in GLSL src/vulkan/shaders/frames_ring.glsl): the CPU, CUDA
 * (src/cuda/frames.cu) and Vulkan (src/vulkan/k_frames.c) draw the same
 * transitions from the same rng state and give the same bytes (u8) and
 * bits (f32) of every stack.
 */
#ifndef AGRL_FRAMES_H
#define AGRL_FRAMES_H

#include <stdint.h>

#include "agrl/replay.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_frames ag_frames;

/* The largest stack. */
#define AG_FRAMES_MAX_STACK 64

typedef struct ag_frames_config {
  int64_t height, width, channels; /* one frame: h x w x c u8, c fastest (as environments give it) */
  int stack;                       /* k, 1 .. AG_FRAMES_MAX_STACK; 0 means 4 */
  int64_t n_envs;                  /* copies written interleaved, 1 .. capacity */
  int64_t capacity;                /* entries (frames) the ring holds */
  int64_t min_size;                /* sampling refused while fewer transitions may be sampled; 0 means 1 */
  int prioritized;                 /* 1: prioritized sampling (ag_frames_sample_per); 0: none */
  float alpha;                     /* with prioritized: the exponent, in [0, 1]; otherwise not read */
} ag_frames_config;

/* A frame table with the given scalar fields (as ag_replay_create takes
 * them: names unique, widths >= 1, stored as `storage`). The caller owns
 * it; free it before ctx.
 * Errors: AG_ERR_INVALID_ARG: ctx, cfg, fields or out NULL; height, width
 * or channels < 1; stack outside 0 .. AG_FRAMES_MAX_STACK; capacity < 1;
 * n_envs outside 1 .. capacity; min_size outside 0 .. capacity; a frame of
 * more than 2^31 - 2 bytes; prioritized not 0 or 1; with prioritized,
 * alpha outside [0, 1] (or NaN); the fields' errors of ag_replay_create;
 * AG_ERR_UNSUPPORTED: with prioritized, a capacity beyond
 * AG_PER_MAX_CAPACITY or a device without the prioritized sampler's
 * kernels (a Vulkan device without shaderFloat64); AG_ERR_STATE while a
 * step is being recorded; AG_ERR_OUT_OF_MEMORY (as ag_buffer_create). On
 * error nothing is allocated and *out is not written. */
AG_API ag_status ag_frames_create(ag_ctx *ctx, const ag_frames_config *cfg, const ag_field *fields,
                                  int n_fields, ag_dtype storage, ag_frames **out);
/* Frees the table. NULL is accepted. */
AG_API void ag_frames_free(ag_frames *t);

/* Appends `steps` steps of every copy: steps * n_envs entries.
 *   frames: steps * n_envs frames of h*w*c u8 each, entry by entry;
 *   first:  steps * n_envs flags (non-zero: the frame is an episode's first
 *           observation);
 *   data:   the fields as ag_replay_add takes them, for steps * n_envs
 *           transitions.
 * The oldest entries are overwritten when the ring is full. All or
 * nothing: every check (those of ag_replay_add included) comes before the
 * first change; only a device error while the frames are sent can leave
 * the table half written, and it then refuses every later call with
 * AG_ERR_STATE (free it). steps = 0 adds nothing.
 * Errors: AG_ERR_INVALID_ARG: t NULL, steps < 0, frames, first or data
 * NULL for steps > 0; AG_ERR_OUT_OF_RANGE: steps * n_envs > capacity;
 * those of ag_replay_add; AG_ERR_STATE (broken as above, or a step is
 * being recorded); AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_frames_add(ag_frames *t, const uint8_t *frames, const uint8_t *first,
                               const void *const *data, int64_t steps);

/* B transitions drawn uniformly on the device from those that may be
 * sampled: obs and next_obs [D, B] of obs_dtype (AG_U8 or AG_F32, as
 * above), batch [rows, B] f32 (the fields, as ag_replay's batch; may be
 * NULL: not gathered), idx [B, 1] i64 (the entries; may be NULL), all
 * temporaries. Each draw takes a rank uniformly among the entries that
 * could hold a transition and takes it when it may be sampled, up to 64
 * tries (ag_rng's Philox stream, 64 draws per transition: the rng's
 * counter moves on by 64 B); after 64 failed tries it takes the next entry
 * that may be sampled after the last try. The draws are exactly uniform
 * over the sampleable transitions unless 64 tries in a row fail
 * (probability f^64, f the fraction of excluded entries). Queued, and
 * recordable: the ring is read on the device at each replay (a replay at
 * a moment when no entry may be sampled returns entries that may not be;
 * their stacks still read only the table's memory).
 * Errors: AG_ERR_INVALID_ARG: t, rng, obs or next_obs NULL, B < 1,
 * obs_dtype not AG_U8 / AG_F32, rng of another context; AG_ERR_STATE:
 * fewer than min_size transitions may be sampled (and none: always), or
 * the table is broken; AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_frames_sample(ag_frames *t, ag_rng *rng, int64_t B, ag_dtype obs_dtype, ag_tensor **obs,
                                  ag_tensor **next_obs, ag_tensor **batch, ag_tensor **idx);
/* B transitions drawn by priority (a prioritized table; see "Prioritized
 * sampling" above): obs, next_obs, batch and idx as ag_frames_sample gives
 * them (batch, idx may be NULL), and weights [1, B] f32 (may be NULL), the
 * importance weights as ag_per_sample makes them: (N P(x_j))^-beta over
 * the batch's largest, i.e. (P_min / P(x_j))^beta with P_min the least
 * P(x_i) of the batch (N, the entries held, cancels). The entries are
 * ag_per_sample's draws (the rng's counter moves on by B) over the tree
 * whose leaves of entries that may not be sampled are 0. Queued, and
 * recordable: the tree and the ring are read on the device at each replay
 * (a replay at a moment when no entry may be sampled returns entry 0 with
 * weight 0; its stacks still read only the table's memory).
 * Errors: those of ag_frames_sample; AG_ERR_INVALID_ARG: beta outside
 * [0, 1] (or NaN); AG_ERR_STATE: a table made without prioritized, or
 * whose sampler was freed (ag_per_free on ag_frames_replay's). */
AG_API ag_status ag_frames_sample_per(ag_frames *t, ag_rng *rng, int64_t B, float beta, ag_dtype obs_dtype,
                                      ag_tensor **obs, ag_tensor **next_obs, ag_tensor **batch,
                                      ag_tensor **idx, ag_tensor **weights);
/* ---- a sample into the caller's tensors ----
 * ag_frames_sample_into draws as ag_frames_sample and writes the batch
 * into tensors the caller gives (persistent tensors, or another
 * framework's memory through ag_tensor_wrap, agrl/export.h): no
 * temporaries for the outputs and no copy after the call.
 *   obs:      [D, B] u8 or f32, packed (ld = D): B and the stacks' dtype
 *             are obs's (D = ag_frames_obs_size);
 *   next_obs: [D, B] of obs's dtype, packed;
 *   batch:    NULL, or [rows, B] f32 packed (rows: the fields' rows, as
 *             ag_replay's batch): the fields of the transitions;
 *   idx:      NULL, or B i64 values, [B, 1] or [1, B] packed: the entries.
 * The values, the draws and the rng's counter are those ag_frames_sample
 * gives from the same state (the same bits). All are tensors of the
 * table's context; no two may overlap (checked), nor may any overlap the
 * table (not checked); the caller keeps wrapped memory valid until the
 * queued work has finished (see ag_ctx_defer). Queued, and recordable, as
 * ag_frames_sample. Every check comes before anything is queued: on error
 * nothing is written and the rng is unchanged.
 * Errors: AG_ERR_INVALID_ARG: t, rng, obs or next_obs NULL, an output or
 * the rng of another context, two outputs overlapping; AG_ERR_FREED: an
 * output freed (or its workspace reset); AG_ERR_SHAPE: obs not a packed
 * [D, B] u8 or f32 tensor, next_obs not packed [D, B] of obs's dtype,
 * batch not packed [rows, B] f32, idx not B packed i64 values as a row or
 * a column; AG_ERR_STATE: fewer than min_size transitions may be sampled,
 * or the table is broken; AG_ERR_OUT_OF_MEMORY (the temporaries of the
 * columns: idx NULL, or a prioritized draw); AG_ERR_DEVICE. */
AG_API ag_status ag_frames_sample_into(ag_frames *t, ag_rng *rng, ag_tensor *obs, ag_tensor *next_obs,
                                       ag_tensor *batch, ag_tensor *idx);
/* The same drawn by priority, as ag_frames_sample_per (same state, same
 * draws and bits): obs, next_obs, batch and idx as ag_frames_sample_into
 * takes them, and weights: NULL, or B f32 values, [1, B] or [B, 1]
 * packed, the importance weights. Errors: those of ag_frames_sample_into
 * (weights checked as idx, f32); AG_ERR_INVALID_ARG: beta outside [0, 1]
 * (or NaN); AG_ERR_STATE: a table made without prioritized, or whose
 * sampler was freed. */
AG_API ag_status ag_frames_sample_per_into(ag_frames *t, ag_rng *rng, float beta, ag_tensor *obs,
                                           ag_tensor *next_obs, ag_tensor *batch, ag_tensor *idx,
                                           ag_tensor *weights);

/* Sets the priorities (n f32 values, any shape, e.g. |TD error| + eps) of
 * the entries idx (i32 / i64 on the device, as many; e.g.
 * ag_frames_sample_per's idx) of a prioritized table, as ag_per_update:
 * values below 1e-12 (and NaN) count as 1e-12, and the largest priority
 * seen grows with them. Indices on the device are not checked before the
 * kernel runs: one outside 0 .. capacity-1, or of an entry that may not be
 * sampled when the kernel runs (as the last add left the ring: an entry
 * overwritten or gone stale since it was drawn), is skipped: nothing is
 * written for it. Queued; recordable.
 * Errors: AG_ERR_INVALID_ARG: t, idx or priorities NULL or of another
 * context; AG_ERR_FREED; AG_ERR_SHAPE: idx not i32 / i64 or a view with
 * gaps, priorities not f32, not as many, or a view with gaps that is not a
 * row; AG_ERR_STATE: not prioritized, its sampler freed, or the table is
 * broken. */
AG_API ag_status ag_frames_update_priorities(ag_frames *t, ag_tensor *idx, ag_tensor *priorities);
/* The same from host arrays of n values, checked before anything changes:
 * every index an entry that may be sampled now, every priority finite and
 * >= 0. Errors: AG_ERR_INVALID_ARG: t, idx or priorities NULL, n < 1, a
 * priority negative or not finite; AG_ERR_OUT_OF_RANGE: an index that may
 * not be sampled now (the message names it); AG_ERR_STATE: not
 * prioritized, its sampler freed, the table broken, or a step is being
 * recorded; AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_frames_update_priorities_host(ag_frames *t, const int64_t *idx, const float *priorities,
                                                  int64_t n);
/* The n transitions at host indices idx (each one that may be sampled
 * now): obs, next_obs and batch as ag_frames_sample gives them (batch may
 * be NULL). Errors: AG_ERR_INVALID_ARG: t, idx, obs or next_obs NULL,
 * n < 1, obs_dtype not AG_U8 / AG_F32; AG_ERR_OUT_OF_RANGE: an index that
 * may not be sampled (the message names it); AG_ERR_STATE (broken, or a
 * step is being recorded); AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_frames_gather(ag_frames *t, const int64_t *idx, int64_t n, ag_dtype obs_dtype,
                                  ag_tensor **obs, ag_tensor **next_obs, ag_tensor **batch);
/* The same at indices on the device: idx an i32 or i64 tensor of B packed
 * values ([1, B] or [B, 1]) on the table's context, e.g. ag_frames_nstep's
 * last. Unchecked (they are on the device): each is clamped to
 * 0 .. capacity-1, and an entry that may not be sampled gives stacks read
 * inside the table by the same rule. Queued and recordable.
 * Errors: AG_ERR_INVALID_ARG: t, idx, obs or next_obs NULL, obs_dtype not
 * AG_U8 / AG_F32, idx of another context; AG_ERR_SHAPE: idx not i32 / i64,
 * not a row or column, or a row with gaps; AG_ERR_FREED; AG_ERR_STATE (a
 * broken table); AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_frames_gather_dev(ag_frames *t, const ag_tensor *idx, ag_dtype obs_dtype, ag_tensor **obs,
                                      ag_tensor **next_obs, ag_tensor **batch);

/* Whether entry x may be sampled now (0 for t NULL or x outside
 * 0 .. capacity-1). */
AG_API int ag_frames_sampleable(const ag_frames *t, int64_t x);
/* The number of entries that may be sampled now. */
AG_API int64_t ag_frames_count(const ag_frames *t);
/* Entries held (0 .. capacity), and the slot the next entry goes to. */
AG_API int64_t ag_frames_size(const ag_frames *t);
AG_API int64_t ag_frames_position(const ag_frames *t);
/* Values of one stacked observation: stack * channels * height * width. */
AG_API int64_t ag_frames_obs_size(const ag_frames *t);
/* The table's configuration (a loaded table's: its file's) with the
 * defaults resolved: stack as used (4 for 0), min_size as used (1 for 0),
 * alpha 0 for a table without prioritized sampling. Errors:
 * AG_ERR_INVALID_ARG: t or out NULL (*out unchanged). */
AG_API ag_status ag_frames_get_config(const ag_frames *t, ag_frames_config *out);
/* The table of the scalar fields (owned by the frame table): its field
 * rows in a batch (ag_replay_field), its size and position tensors. Do not
 * add to it directly (and walk it with ag_frames_nstep, not
 * ag_replay_nstep, whose walks know nothing of frames). A prioritized
 * table's sampler is this table's (ag_replay_per): ag_per_total and
 * ag_per_alpha read it, and its samples and updates keep to the entries
 * that may be sampled as the table's do; do not free it, nor attach one
 * to an unprioritized table's. */
AG_API ag_replay *ag_frames_replay(const ag_frames *t);

/* The n-step returns of the transitions idx (entries, as ag_frames_sample
 * draws them), as ag_replay_nstep computes them over the fields' table
 * with stride = n_envs (agrl/replay.h: reward and flags by name, the same
 * arithmetic, ret [1, B] f32, discount [1, B] f32, last [1, B] i64), except
 * that the walk goes on from entry c to c + n_envs only when the entry
 * after c + n_envs is written too: it never ends at an entry whose next_obs
 * stack could not be built (the ring's newest n_envs entries). The
 * transition whose next observation is an episode's last must carry
 * terminated or truncated (as Gymnasium sets them), so that no walk steps
 * onto an episode's last observation. last[j] is the entry whose next_obs
 * the target bootstraps from: ag_frames_gather_dev(last) gives its
 * next_obs. Queued and recordable; errors those of
 * ag_replay_nstep (AG_ERR_INVALID_ARG for t NULL; AG_ERR_STATE for a
 * broken table). */
AG_API ag_status ag_frames_nstep(ag_frames *t, ag_tensor *idx, int n, float gamma, const char *reward,
                                 const char *terminated, const char *truncated, ag_tensor **ret,
                                 ag_tensor **discount, ag_tensor **last);

/* ---- files ----
 * ag_frames_save writes the table to `path` as an agrl container
 * (docs/container.md) of kind "frames", frames.version 1: keys
 * frames.height, frames.width, frames.channels (1..2^31-1, a frame of at
 * most 2^31 - 2 bytes), frames.stack (1..64), frames.capacity (1..2^40),
 * frames.n_envs (1..capacity), frames.min_size (1..capacity), frames.size
 * (0..capacity); one section "frames", a u8 tensor [h*w*c + 1, size]: the
 * held columns 0..size-1 of the frame buffer as stored (frame, then the
 * first flag), whatever the position. The fields' table follows the
 * container as a replay file's image (agrl/replay.h; its capacity and size
 * those of the keys, no sampler). A prioritized table is written as
 * frames.version 2: the same with key frames.alpha (f64, an f32 in
 * [0, 1]) and its fields' table's image with its sampler (replay.h: that
 * alpha, the largest priority seen, the leaves bit for bit); an
 * unprioritized one is written as version 1. Written beside `path`,
 * flushed and renamed over it, in parts of AG_TRANSFER_PART_BYTES with a
 * CRC-32 each, never a host copy of the whole table (as ag_replay_save).
 * ag_frames_load makes a NEW table on ctx from such a file (of the file's
 * configuration, prioritized for version 2); the same rng state then
 * draws the same transitions (the same priorities: ag_frames_sample_per
 * too; the leaves of entries that may not be sampled are 0 whatever the
 * file holds).
 * It checks the header against the container's limits and the file's
 * length, the keys against the limits above and each other, before it
 * allocates anything but the header; it refuses with AG_ERR_IO and a
 * message naming the path and the fault: not an agrl file or not of kind
 * "frames", a key missing or outside its limits, sections other than
 * "frames" of the keys' shape, a fields' table that is not a replay image
 * of the same capacity and size, one with a sampler (version 1) or without
 * one of frames.alpha (version 2), truncated or trailing bytes, a part
 * failing its CRC-32. A newer container or frames.version is
 * AG_ERR_UNSUPPORTED, and so is a version 2 file on a device without the
 * prioritized sampler's kernels. Nothing is half-loaded: on failure *out
 * is not written and nothing stays allocated.
 * ag_frames_save errors: AG_ERR_INVALID_ARG (t or path NULL, path empty);
 * AG_ERR_STATE (a step is being recorded, the table is broken, or its
 * prioritized sampler was freed);
 * AG_ERR_OUT_OF_MEMORY; AG_ERR_IO (the file cannot be created, written,
 * flushed or renamed); AG_ERR_DEVICE. On error the file under path is
 * unchanged and the table is as before.
 * ag_frames_load errors: the refusals above; AG_ERR_INVALID_ARG (ctx,
 * path or out NULL); AG_ERR_IO (the file cannot be opened or read);
 * AG_ERR_STATE (a step is being recorded); AG_ERR_OUT_OF_MEMORY;
 * AG_ERR_DEVICE. The caller owns the table. */
AG_API ag_status ag_frames_save(const ag_frames *t, const char *path);
AG_API ag_status ag_frames_load(ag_ctx *ctx, const char *path, ag_frames **out);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_FRAMES_H */
