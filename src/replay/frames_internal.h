/* frames_internal.h — the frame table, shared by frames.c and its files (frames_file.c). */
#ifndef AGRL_REPLAY_FRAMES_INTERNAL_H
#define AGRL_REPLAY_FRAMES_INTERNAL_H

#include <stdio.h>

#include "agrl/frames.h"
#include "core/internal.h"

struct ag_frames {
  ag_ctx *ctx;
  ag_replay *r;      /* the fields; its size and position are the ring's */
  ag_buffer *frames; /* [hwc + 1, capacity] u8 */
  int64_t h, w, c, hwc, n_envs, capacity, min_size;
  int stack;
  uint8_t *first; /* host copy of the flags, capacity bytes */
  int64_t count;  /* entries that may be sampled */
  uint8_t *stage; /* an add's frames and flags, interleaved as the buffer holds them */
  size_t stage_cap;
  ag_tensor *nsize_dev, *npos_dev; /* 1 x 1 i64: the ring n-step walks see (ag__frames_set_walk_ring) */
  int broken;
  /* prioritized sampling: the sampler is the fields' table's (ag_replay_per),
   * its updates masked by `mask`, a byte per entry on the device (1: it may
   * be sampled), of which `valid` is the host's copy */
  int prioritized;
  float alpha;
  ag_tensor *mask; /* capacity x 1 u8 */
  uint8_t *valid;  /* capacity bytes */
};

/* A table without its fields' table (t->r NULL): the checks of the
 * configuration and the device (errors as ag_frames_create's), the host
 * copy of the flags and the frame buffer. */
ag_status ag__frames_alloc(ag_ctx *ctx, const ag_frames_config *cfg, const char *fn, ag_frames **out);
/* Sets the ring ag_frames_nstep's walks read on the device: size - n_envs
 * entries (at least 0) ending at position - n_envs, so that a walk goes on
 * to an entry only when the entry after it is written too (its next_obs
 * stack can be built). Only the device can fail. */
ag_status ag__frames_set_walk_ring(ag_frames *t);
/* AG_ERR_STATE when a device error left the table (or its fields' table) half written. */
ag_status ag__frames_check_sound(const ag_frames *t, const char *fn);
/* The entries that may be sampled among slots from .. from+n-1 (mod capacity). */
int64_t ag__frames_count_in(const ag_frames *t, int64_t from, int64_t n);
/* A prioritized table's sampler made to match the table: the mask of every
 * entry sent to the device (host copy first), the sampler told of it, and
 * the leaves of the entries that may not be sampled set to 0 (a table
 * loaded from a file: its leaves are the file's). AG_ERR_STATE when the
 * fields' table has no prioritized sampler; only the device can fail
 * otherwise. */
ag_status ag__frames_per_attach(ag_frames *t, const char *fn);
/* A prioritized table's sampler; AG_ERR_STATE for a table made without
 * prioritized sampling, or whose sampler was freed. */
ag_status ag__frames_per(const ag_frames *t, const char *fn, ag_per **out);
/* ag_frames_load of f from its position to its end (the fuzzer's entry);
 * tables of more than max_table_bytes (0: no limit) are AG_ERR_UNSUPPORTED. */
ag_status ag__frames_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_frames **out);

/* The table's image (its container, then its fields' table's) written to
 * f at its position (ag_frames_save's body; an agent's file carries it). */
ag_status ag__frames_write(ag_frames *t, FILE *f, size_t part, const char *fn, const char *name);
/* Whether the frame table image at f's position (left bytes to the end)
 * is not one of configuration `want` (every field of ag_frames_config; a
 * header that cannot be read does not differ: the load then refuses it).
 * Reads the header only and puts f back where it was. */
int ag__frames_image_differs(FILE *f, uint64_t left, const ag_frames_config *want);

#endif /* AGRL_REPLAY_FRAMES_INTERNAL_H */
