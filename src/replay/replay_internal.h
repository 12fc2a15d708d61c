/* replay_internal.h — shared by the replay table and its prioritized sampler. */
#ifndef AGRL_REPLAY_INTERNAL_H
#define AGRL_REPLAY_INTERNAL_H

#include "agrl/replay.h"
#include "base/agfile.h" /* the container the table's image is, and the files that hold it */
#include "core/internal.h"

/* ---- samplers ----
 * A sampler attached to a table (prioritized replay today; n-step and
 * sequence samplers later) keeps state of its own about the table's
 * columns, and hears of every add through these hooks. The table calls
 * prepare for each attached sampler before it changes anything (it may fail
 * and must change nothing), then added for the columns written (only the
 * device can fail there), and release when the table is freed first. */
typedef struct ag__sampler_ops {
  const char *name;
  ag_status (*prepare)(void *self);
  ag_status (*added)(void *self, int64_t pos, int64_t k); /* columns pos .. pos+k-1, no wrap */
  void (*release)(void *self);
} ag__sampler_ops;

#define AG__MAX_SAMPLERS 4

/* The table (replay.c; read by the file code, replay_file.c). */
typedef struct ag__field {
  char *name;
  int64_t width, row0;
  ag_dtype dtype;
} ag__field;

struct ag_replay {
  ag_ctx *ctx;
  ag_buffer *buf;
  ag__field *fields;
  int n_fields;
  int64_t rows, capacity, min_size;
  int64_t size, pos;
  ag_dtype storage;
  ag_tensor *size_dev; /* 1 x 1 i64: valid transitions, on the device */
  ag_tensor *pos_dev;  /* 1 x 1 i64: the ring position, on the device */
  int64_t pos_on_dev;  /* the position pos_dev holds (pos, except in a table loaded before its first add) */
  struct {
    const ag__sampler_ops *ops;
    void *self;
  } samplers[AG__MAX_SAMPLERS]; /* attached samplers (prioritized replay ...) */
  int n_samplers;
  unsigned char *stage;
  size_t stage_cap;
  ag_tensor *dev_stage; /* large host batches land here, field by field, before the kernels scatter them */
  int broken;           /* a device error interrupted an add: the columns are undefined */
};

/* Attaches a sampler (at most one of each ops; AG_ERR_STATE otherwise). */
ag_status ag__replay_attach(ag_replay *r, const ag__sampler_ops *ops, void *self, const char *fn);
/* Detaches it (nothing if it is not attached). */
void ag__replay_detach(ag_replay *r, void *self);
/* The attached sampler of these ops, or NULL. */
void *ag__replay_sampler(const ag_replay *r, const ag__sampler_ops *ops);
/* AG_ERR_STATE when a device error left the table half written. */
ag_status ag__replay_check_sound(const ag_replay *r, const char *fn);
/* For tests: marks the table as a device error half way through an add
 * would (no backend here fails between the parts of one upload). */
void ag__replay_set_broken(ag_replay *r);
/* The checks of ag_replay_sample for a batch of B (errors name fn). */
ag_status ag__replay_check_sample(const ag_replay *r, int64_t B, const char *fn);
/* The [B, 1] i32 indices ag_replay_sample draws (its checks, then
 * ag_randint_dev of rng bounded by the table's size: the same draws and the
 * same counter progression), without the gather. */
ag_status ag__replay_sample_idx(ag_replay *r, ag_rng *rng, int64_t B, const char *fn, ag_tensor **idx);
/* Writes r->pos into the position tensor when it holds another value (a
 * table whose pos was set without an add, as a loader sets it); AG_OK when
 * it holds it already. Errors: AG_ERR_STATE while a step is being recorded
 * (when there is something to write); those of the upload. */
ag_status ag__replay_sync_pos(ag_replay *r, const char *fn);

/* ag_replay_nstep's checks and walk with the ring's size and position
 * read from the 1 x 1 i64 tensors size_dev and pos_dev (the table's own,
 * or another ring over its columns: a frame table's). Errors name fn. */
ag_status ag__replay_nstep_on(ag_replay *r, ag_tensor *size_dev, ag_tensor *pos_dev, ag_tensor *idx, int n,
                              float gamma, int64_t stride, const char *reward, const char *terminated,
                              const char *truncated, const char *fn, ag_tensor **ret, ag_tensor **discount,
                              ag_tensor **last);

/* ---- prioritized replay (per.c) ---- */
extern const ag__sampler_ops ag__per_ops;
/* The sum tree and the sampler's state (largest priority seen), for tests
 * that compare a sampler before and after a call. */
ag_tensor *ag__per_tree(const ag_per *per);
ag_tensor *ag__per_state(const ag_per *per);
/* Its exponent and the depth of its tree (leaves at level depth - 1, 16^depth of them). */
float ag__per_alpha(const ag_per *per);
int ag__per_depth(const ag_per *per);
/* What ag_per_create checks of a table of `capacity` columns on ctx before
 * it allocates anything (alpha, the capacity, the device's kernels), its
 * errors named fn. */
ag_status ag__per_check(ag_ctx *ctx, int64_t capacity, float alpha, const char *fn);
/* A mask (a byte per column, at least capacity of them, owned by the
 * caller and outliving the sampler; NULL: none) that every later update
 * of the sampler obeys: a column whose byte is 0 is skipped, as one
 * outside the table (AG__K_PER_SET's mask). */
void ag__per_set_mask(ag_per *per, ag_tensor *mask);
/* Leaves pos .. pos+k-1 (inside the tree's leaves) = the largest priority
 * seen ^ alpha, or, masked, those of them whose mask byte is 0 = 0 (the
 * others unchanged; the mask must be set); then their ancestors. Queued. */
ag_status ag__per_fill(ag_per *per, int64_t pos, int64_t k, int masked);
/* ag_per_sample (beta_t NULL) or ag_per_sample_dev (beta_t: beta on the
 * device), and ag_per_update, ag_per_update_host, their errors named fn.
 * ag__per_sample writes the weights at w_into (B f32 on the device, the
 * caller's; *weights is then NULL) or, w_into NULL, into a temporary. */
ag_status ag__per_sample(ag_per *per, ag_rng *rng, int64_t B, float beta, ag_tensor *beta_t, const char *fn,
                         float *w_into, ag_tensor **idx, ag_tensor **weights);
ag_status ag__per_update(ag_per *per, ag_tensor *idx, ag_tensor *priorities, const char *fn);
ag_status ag__per_update_host(ag_per *per, const int64_t *idx, const float *priorities, int64_t n,
                              const char *fn);

/* ---- the file format of agrl/replay.h, inside other files ---- */

/* Writes the table's file image (an agrl container, docs/container.md; data parts of
 * `part` bytes: a multiple of 128 up to AG_TRANSFER_PART_BYTES) at f's
 * position. Checks and errors as ag_replay_save's; a failed write is
 * AG_ERR_IO naming `name` (the file written). What was written before a
 * failure stays in f: the caller writes through an ag__afile and aborts. */
ag_status ag__replay_write(const ag_replay *r, FILE *f, size_t part, const char *fn, const char *name);
/* Reads a table from the image of exactly `left` bytes at f's position
 * (nothing may follow it within those bytes). Checks and errors as
 * ag_replay_load's, naming `name` and `fn`; a table of more than
 * max_table_bytes of columns is AG_ERR_UNSUPPORTED (0: no limit). */
ag_status ag__replay_read(ag_ctx *ctx, FILE *f, const char *name, uint64_t left, size_t max_table_bytes,
                          const char *fn, ag_replay **out);
/* Whether the image at f's position (left bytes) describes a table of
 * another capacity, storage, number of fields or sampler than `mine` with
 * `capacity`: reads its header alone and puts f back (0 when the header
 * cannot be read: ag__replay_read then says why). */
int ag__replay_image_differs(FILE *f, uint64_t left, const ag_replay *mine, int64_t capacity);
/* The capacity the image at f's position says (header alone, f put back); -1 when unreadable. */
int64_t ag__replay_image_capacity(FILE *f, uint64_t left);
/* ag_replay_save with parts of `part` bytes (tests write many-part files);
 * ag__replay_read of f from its position to its end (the fuzzer's entry). */
ag_status ag__replay_save_parts(const ag_replay *r, const char *path, size_t part);
ag_status ag__replay_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_replay **out);

#endif /* AGRL_REPLAY_INTERNAL_H */
