/* dqn_file.c — a DQN saved whole and loaded back (the layout is in
 * agrl/agent.h): its configuration and counters, every tensor an update
 * reads or changes, the target network, the caller's run state, and the
 * replay table in its own file image (replay_file.c). Values go device ->
 * host -> file tensor by tensor in parts of at most AG_TRANSFER_PART_BYTES,
 * each with its CRC-32; the file is written whole through ag__afile.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/agrl.h"
#include "agent/agent_internal.h"

enum { DQN_VERSION = 1, DQN_FIXED = 488, DQN_MAX_TENSORS = 256 };

static const ag__file_kind dqn_kind = {
    "ag_dqn_load", "a DQN",   "the DQN's", {'A', 'G', 'R', 'L', 'D', 'Q', 'N', '1'},
    DQN_VERSION,   DQN_FIXED, 264,         DQN_MAX_TENSORS};

/* The tensors of the file, in its order (see agrl/agent.h); how many there are. */
static int dqn_tensors(const ag_dqn *d, ag_tensor **out, int max) {
  int n = ag__dqn_update_state(d, out, max);
  int np = ag_mlp_n_params(d->target);
  ag_tensor *const *p = ag_mlp_params(d->target);
  for (int i = 0; i < np; i++, n++)
    if (n < max) out[n] = p[i];
  return n;
}

static void header_put(const ag_dqn *d, unsigned char *h, int T, ag_tensor **ts, float beta_now) {
  const ag_dqn_config *c = &d->cfg;
  memcpy(h, dqn_kind.magic, 8);
  ag__put32(h + 8, DQN_VERSION);
  ag__put32(h + 12, (uint32_t)(DQN_FIXED + AG__ENTRY * T + 4));
  snprintf((char *)h + 16, 32, "%s", ag_version());
  ag__put32(h + 48, (uint32_t)c->n_hidden);
  ag__put32(h + 52,
            (uint32_t)((c->double_dqn ? 1 : 0) | (c->huber ? 2 : 0) | (c->fused ? 4 : 0) | (c->per ? 8 : 0)));
  for (int i = 0; i < c->n_hidden; i++) ag__put64(h + 56 + 8 * i, (uint64_t)c->hidden[i]);
  const float fs[7] = {c->lr,        c->gamma,   c->tau,          c->exploration_fraction,
                       c->eps_start, c->eps_end, c->max_grad_norm};
  for (int i = 0; i < 7; i++) ag__put_f32(h + 120 + 4 * i, fs[i]);
  const int64_t is[6] = {c->batch_size, c->buffer_size,    c->learning_starts,
                         c->train_freq, c->gradient_steps, c->target_update_interval};
  for (int i = 0; i < 6; i++) ag__put64(h + 152 + 8 * i, (uint64_t)is[i]);
  ag__put64(h + 200, c->seed);
  const int64_t ks[5] = {d->obs_dim, d->n_actions, d->total_steps, d->updates, d->updates_at_target};
  for (int i = 0; i < 5; i++) ag__put64(h + 208 + 8 * i, (uint64_t)ks[i]);
  ag__put64(h + 248, d->host_rng);
  ag__put64(h + 256, (uint64_t)d->run_state_n);
  ag__put32(h + 264, (uint32_t)T);
  const float pf[4] = {c->per_alpha, c->per_beta, c->per_eps, beta_now};
  for (int i = 0; i < 4; i++) ag__put_f32(h + 272 + 4 * i, pf[i]);
  ag__put32(h + 288, (uint32_t)c->n_step);
  ag__put64(h + 296, (uint64_t)c->n_envs);
  ag__entries_put(h + DQN_FIXED, ts, T);
  int H = DQN_FIXED + AG__ENTRY * T + 4;
  ag__put32(h + H - 4, ag__crc32_add(0, h, (size_t)H - 4));
}

ag_status ag_dqn_save(const ag_dqn *cd, const char *path) {
  static const char fn[] = "ag_dqn_save";
  if (!cd || !path) return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn and path must not be NULL", fn);
  if (!*path) return ag__fail(AG_ERR_INVALID_ARG, "%s: path is empty", fn);
  ag_dqn *d = (ag_dqn *)cd; /* tensors made resident; nothing the caller sees changes */
  if (d->dist)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: a DQN of a group of GPUs is not saved whole; save each rank's "
                    "shard with ag_shard_save",
                    fn);
  ag_status s = ag__not_recording(d->ctx, fn);
  if (s) return s;
  if (d->broken)
    return ag__fail(AG_ERR_STATE, "%s: a device error left the DQN half updated; it cannot be saved", fn);
  ag_tensor *ts[DQN_MAX_TENSORS];
  int T = dqn_tensors(d, ts, DQN_MAX_TENSORS);
  if (T > DQN_MAX_TENSORS) return ag__fail(AG_ERR_UNSUPPORTED, "%s: %d tensors is too many", fn, T);
  const int H = DQN_FIXED + AG__ENTRY * T + 4;
  unsigned char *h = ag__calloc(1, (size_t)H);
  if (!h) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory (%d bytes)", fn, H);
  float beta_now = 0.0f;
  if (d->per && (s = ag_tensor_read(d->beta, &beta_now, sizeof beta_now))) {
    free(h);
    return s;
  }
  header_put(d, h, T, ts, beta_now);
  const void *sec[1] = {d->run_state};
  const size_t sec_n[1] = {d->run_state_n};
  s = ag__agent_file_write(path, fn, h, (size_t)H, ts, T, sec, sec_n, 1, d->replay);
  free(h);
  return s;
}

/* ---- load ---- */

static ag_status bad(const char *fn, const char *path, const char *what) {
  (void)fn;
  return ag__file_bad(&dqn_kind, path, what);
}

/* The configuration and counters of a header whose CRC holds. */
static ag_status header_get(const unsigned char *h, const char *fn, const char *path, ag_dqn_config *c,
                            int64_t k[5], uint64_t *host_rng, uint64_t *R, float *beta_now) {
  memset(c, 0, sizeof *c);
  c->n_hidden = (int)ag__get32(h + 48);
  uint32_t flags = ag__get32(h + 52);
  if (ag__get32(h + 48) > AG_DQN_MAX_HIDDEN || flags > 15)
    return bad(fn, path, "n_hidden or flags out of range");
  c->double_dqn = (flags & 1) != 0;
  c->huber = (flags & 2) != 0;
  c->fused = (flags & 4) != 0;
  c->per = (flags & 8) != 0;
  float *pf[4] = {&c->per_alpha, &c->per_beta, &c->per_eps, beta_now};
  for (int i = 0; i < 4; i++) {
    *pf[i] = ag__get_f32(h + 272 + 4 * i);
    if (!isfinite(*pf[i])) return bad(fn, path, "a setting is not finite");
  }
  if (!c->per) { /* a DQN without prioritized replay writes the defaults' values */
    const ag_dqn_config dc = ag_dqn_defaults();
    if (c->per_alpha != dc.per_alpha || c->per_beta != dc.per_beta || c->per_eps != dc.per_eps ||
        ag__get32(h + 284) != 0) /* beta +0 exactly (not -0): what a save writes */
      return bad(fn, path, "prioritized replay settings without prioritized replay");
  } else if (!(*beta_now >= 0.0f && *beta_now <= 1.0f))
    return bad(fn, path, "beta out of range");
  for (int i = 0; i < AG_DQN_MAX_HIDDEN; i++) {
    int64_t v = (int64_t)ag__get64(h + 56 + 8 * i);
    if (i < c->n_hidden && (v < 1 || v > ((int64_t)1 << 24)))
      return bad(fn, path, "a hidden size out of range");
    if (i >= c->n_hidden && v) return bad(fn, path, "an unused hidden size is not 0");
    if (i < c->n_hidden) c->hidden[i] = v;
  }
  float *fs[7] = {&c->lr,        &c->gamma,   &c->tau,          &c->exploration_fraction,
                  &c->eps_start, &c->eps_end, &c->max_grad_norm};
  for (int i = 0; i < 7; i++) {
    *fs[i] = ag__get_f32(h + 120 + 4 * i);
    if (!isfinite(*fs[i])) return bad(fn, path, "a setting is not finite");
  }
  int64_t *is[6] = {&c->batch_size, &c->buffer_size,    &c->learning_starts,
                    &c->train_freq, &c->gradient_steps, &c->target_update_interval};
  for (int i = 0; i < 6; i++) *is[i] = (int64_t)ag__get64(h + 152 + 8 * i);
  c->seed = ag__get64(h + 200);
  for (int i = 0; i < 5; i++) k[i] = (int64_t)ag__get64(h + 208 + 8 * i);
  *host_rng = ag__get64(h + 248);
  *R = ag__get64(h + 256);
  if (ag__get32(h + 148) || ag__get32(h + 268)) return bad(fn, path, "reserved bytes are not 0");
  c->n_step = (int)ag__get32(h + 288);
  c->n_envs = (int64_t)ag__get64(h + 296);
  if (ag__get32(h + 288) > 64 || ag__get32(h + 292)) return bad(fn, path, "n_step out of range");
  for (int i = 304; i < DQN_FIXED; i++)
    if (h[i]) return bad(fn, path, "reserved bytes are not 0");
  if (c->lr <= 0.0f || c->lr >= 1e6f || c->max_grad_norm < 0.0f || c->buffer_size > ((int64_t)1 << 40))
    return bad(fn, path, "a setting out of range");
  if (k[0] < 1 || k[0] > ((int64_t)1 << 24) || k[1] < 2 || k[1] > ((int64_t)1 << 24) || k[2] < 1 ||
      k[3] < 0 || k[4] < 0 || k[4] > k[3])
    return bad(fn, path, "sizes or counters out of range");
  if (*R > AG__MAX_RUN_STATE) return bad(fn, path, "the run state is longer than 2^30 bytes");
  return AG_OK;
}

/* The entries (rows, cols, dtype) the DQN of configuration c makes, in the
 * file's order (dqn_tensors'); how many there are. */
static int expected_entries(const ag_dqn_config *c, int64_t obs_dim, int64_t n_actions, int64_t (*e)[3],
                            int max) {
  int64_t sizes[AG_DQN_MAX_HIDDEN + 2];
  int L = c->n_hidden + 1, n = 0;
  sizes[0] = obs_dim;
  for (int i = 0; i < c->n_hidden; i++) sizes[i + 1] = c->hidden[i];
  sizes[L] = n_actions;
#define ENTRY(r, cl, dt)                                        \
  do {                                                          \
    if (n < max) e[n][0] = (r), e[n][1] = (cl), e[n][2] = (dt); \
    n++;                                                        \
  } while (0)
  for (int l = 0; l < L; l++) { /* each parameter and its gradient */
    ENTRY(sizes[l + 1], sizes[l], AG_F32);
    ENTRY(sizes[l + 1], sizes[l], AG_F32);
    ENTRY(sizes[l + 1], 1, AG_F32);
    ENTRY(sizes[l + 1], 1, AG_F32);
  }
  ENTRY(1, 1, AG_I64);               /* the sampling counter */
  ENTRY(AG__OPT_STATE_N, 1, AG_F32); /* Adam's state, then each parameter's moments */
  for (int l = 0; l < L; l++) {
    for (int k = 0; k < 2; k++) ENTRY(sizes[l + 1], sizes[l], AG_F32);
    for (int k = 0; k < 2; k++) ENTRY(sizes[l + 1], 1, AG_F32);
  }
  for (int l = 0; l < L; l++) { /* the target network */
    ENTRY(sizes[l + 1], sizes[l], AG_F32);
    ENTRY(sizes[l + 1], 1, AG_F32);
  }
#undef ENTRY
  return n;
}

ag_status ag__dqn_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_dqn **out);

/* Loads from f's position to its end; the entry of ag_dqn_load and of the
 * fuzzer. A DQN whose networks and table would take more than max_bytes
 * (0: no limit) is refused with AG_ERR_UNSUPPORTED before it is made. */
ag_status ag__dqn_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_dqn **out) {
  static const char fn[] = "ag_dqn_load";
  uint64_t len = 0;
  unsigned char *h = NULL;
  uint32_t T = 0, H;
  ag_status s = ag__header_read(ctx, f, path, out, &dqn_kind, &len, &h, &T);
  if (s) return s;
  H = ag__get32(h + 12);
  ag_dqn_config c;
  int64_t k[5];
  uint64_t host_rng = 0, R = 0;
  float beta_now = 0.0f;
  s = header_get(h, fn, path, &c, k, &host_rng, &R, &beta_now);
  if (!s && (s = ag__dqn_check_config(&c, fn))) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    s = ag__fail(AG_ERR_IO, "%s: %s holds a configuration ag_dqn_create refuses: %s", fn, path, why);
  }
  /* the file's entries must be those its configuration makes, and the file
   * must hold their bytes, before anything is made */
  uint64_t need = H, params = 0;
  int64_t want[DQN_MAX_TENSORS][3];
  if (!s && expected_entries(&c, k[0], k[1], want, DQN_MAX_TENSORS) != (int)T)
    s = bad(fn, path, "its tensors are not those of the DQN its configuration makes");
  if (!s && ag__entries_check(h + DQN_FIXED, (const int64_t(*)[3])want, (int)T, &params, &need))
    s = bad(fn, path, "a tensor's shape or dtype is not the one its configuration makes");
  need += ag__parts_bytes(R);
  if (!s && need > len) s = bad(fn, path, "truncated (shorter than its header says)");
  uint64_t rows = 2 * (uint64_t)k[0] + 3;
  if (!s && max_bytes && (params > max_bytes || (uint64_t)c.buffer_size * rows * 4 > max_bytes))
    s = ag__fail(AG_ERR_UNSUPPORTED, "%s: the DQN of %s is larger than the limit of %zu bytes", fn, path,
                 max_bytes);
  ag_dqn *d = NULL;
  if (!s) { /* made with a table of one batch: the file's table replaces it */
    ag_dqn_config small = c;
    small.buffer_size = c.batch_size;
    s = ag__dqn_create(ctx, NULL, k[0], k[1], k[2], &small, fn, &d);
  }
  ag_tensor *ts[DQN_MAX_TENSORS];
  if (!s) {
    int n = dqn_tensors(d, ts, DQN_MAX_TENSORS);
    if (n != (int)T) s = bad(fn, path, "its tensors are not those of the DQN its configuration makes");
    if (!s && !ag__entries_match(h + DQN_FIXED, ts, n))
      s = bad(fn, path, "a tensor's shape or dtype is not the one its configuration makes");
  }
  free(h);
  size_t most = s ? 0 : ag__tensors_most(ts, (int)T, (size_t)R);
  unsigned char *buf = s ? NULL : ag__malloc(most);
  if (!s && !buf) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory (%zu bytes)", fn, most);
  if (!s) s = ag__tensors_read(f, ts, (int)T, buf, fn, path);
  if (!s && (s = ag__parts_read(f, buf, (size_t)R, fn, path, "the run state")) == AG_OK && R)
    s = ag_dqn_set_run_state(d, buf, (size_t)R);
  free(buf);
  ag_replay *r = NULL;
  if (!s) s = ag__agent_table_read(ctx, f, path, max_bytes, &dqn_kind, d->replay, c.buffer_size, &r);
  if (s) {
    ag_replay_free(r);
    ag_dqn_free(d);
    return s;
  }
  if (d->per && (s = ag_tensor_write(d->beta, &beta_now, sizeof beta_now))) {
    ag_replay_free(r);
    ag_dqn_free(d);
    return s;
  }
  ag_replay_free(d->replay); /* and the small table's sampler */
  d->replay = r;
  d->per = ag_replay_per(r);
  d->cfg.buffer_size = c.buffer_size;
  d->updates = k[3];
  d->updates_at_target = k[4];
  d->host_rng = host_rng;
  *out = d;
  return AG_OK;
}

ag_status ag_dqn_load(ag_ctx *ctx, const char *path, ag_dqn **out) {
  static const char fn[] = "ag_dqn_load";
  if (!ctx || !path || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  FILE *f;
  ag_status s = ag__open_read(path, fn, &f);
  if (s) return s;
  s = ag__dqn_load_stream(ctx, f, path, 0, out);
  fclose(f);
  return s;
}

ag_status ag_dqn_set_run_state(ag_dqn *d, const void *data, size_t n) {
  static const char fn[] = "ag_dqn_set_run_state";
  if (!d || (!data && n))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dqn is NULL, or data is NULL for n > 0", fn);
  return ag__run_state_set(&d->run_state, &d->run_state_n, data, n, fn);
}

const void *ag_dqn_run_state(const ag_dqn *d, size_t *n) {
  if (n) *n = d ? d->run_state_n : 0;
  return d ? d->run_state : NULL;
}
