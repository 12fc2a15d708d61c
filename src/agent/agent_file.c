/* agent_file.c — what the files of whole agents (dqn_file.c, ac_file.c)
 * share beyond the container (base/agfile.h) they are written as: the
 * agent's replay table, whose own image (replay_file.c: an agrl container,
 * or the AGRLRPL1 image of agrl 0.1.0) follows the agent's container to the
 * end of the file, and the caller's run state the agent keeps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_internal.h"
#include "replay/frames_internal.h"
#include "replay/replay_internal.h"

/* AG_ERR_IO: the table in path is not the agent's. */
static ag_status not_mine(const char *fn, const char *path, const char *own) {
  return ag__fail(AG_ERR_IO,
                  "%s: %s is corrupt: its replay table is not %s (fields, storage, capacity or sampler)", fn,
                  path, own);
}

/* Whether table r is the one the agent makes (`mine`: fields, storage,
 * minimum, sampler and its alpha), of `capacity` columns. */
static int same_table(const ag_replay *r, const ag_replay *mine, int64_t capacity) {
  ag_per *rp = ag_replay_per(r), *mp = ag_replay_per(mine);
  int same = ag_replay_n_fields(r) == ag_replay_n_fields(mine) &&
             ag_replay_storage(r) == ag_replay_storage(mine) && ag_replay_capacity(r) == capacity &&
             ag_replay_min_size(r) == ag_replay_min_size(mine) && (rp != NULL) == (mp != NULL) &&
             (!rp || ag__per_alpha(rp) == ag__per_alpha(mp));
  for (int i = 0; same && i < ag_replay_n_fields(r); i++) {
    ag_field a, b;
    same = !ag_replay_field_at(r, i, &a) && !ag_replay_field_at(mine, i, &b) && a.width == b.width &&
           a.dtype == b.dtype && !strcmp(a.name, b.name);
  }
  return same;
}

ag_status ag__agent_table_read(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, const char *fn,
                               const char *own, const ag_replay *mine, int64_t capacity, ag_replay **out) {
  uint64_t left = 0;
  ag_status s = ag__stream_left(f, fn, path, "an agent's file", &left);
  /* the image's header against the agent's table before anything is made for it */
  if (!s && ag__replay_image_differs(f, left, mine, capacity)) s = not_mine(fn, path, own);
  ag_replay *r = NULL;
  if (!s && (s = ag__replay_read(ctx, f, path, left, max_bytes, fn, &r))) {
    char why[512]; /* the table's refusal, as this call's */
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(s, "%s: the replay table in %s: %s", fn, path, why);
  }
  if (s) return s;
  if (!same_table(r, mine, capacity)) {
    ag_replay_free(r);
    return not_mine(fn, path, own);
  }
  *out = r;
  return AG_OK;
}

ag_status ag__agent_frames_read(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, const char *fn,
                                const char *own, const ag_frames_config *want, const ag_replay *mine,
                                ag_frames **out) {
  uint64_t left = 0;
  ag_status s = ag__stream_left(f, fn, path, "an agent's file", &left);
  /* the image's header against the agent's table before anything is made for it */
  if (!s && ag__frames_image_differs(f, left, want))
    s = ag__fail(AG_ERR_IO,
                 "%s: %s is corrupt: its frame table is not %s (frame, stack, copies, capacity or "
                 "sampler)",
                 fn, path, own);
  ag_frames *t = NULL;
  if (!s && (s = ag__frames_load_stream(ctx, f, path, max_bytes, &t))) {
    char why[512]; /* the table's refusal, as this call's */
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(s, "%s: the frame table in %s: %s", fn, path, why);
  }
  if (s) return s;
  if (!same_table(ag_frames_replay(t), mine, want->capacity)) {
    ag_frames_free(t);
    return not_mine(fn, path, own);
  }
  *out = t;
  return AG_OK;
}

ag_status ag__run_state_set(void **state, size_t *len, const void *data, size_t n, const char *fn) {
  if (n > AG__MAX_RUN_STATE)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %zu bytes is more than 2^30", fn, n);
  void *p = NULL;
  if (n) {
    if (!(p = ag__malloc(n))) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    memcpy(p, data, n);
  }
  free(*state);
  *state = p;
  *len = n;
  return AG_OK;
}
