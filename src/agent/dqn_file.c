/* dqn_file.c — a DQN saved whole and loaded back: an agrl container of
 * kind "dqn" (docs/container.md) whose keys hold its configuration and
 * counters and whose sections hold every tensor an update reads or changes,
 * the target network and the caller's run state (a blob, kept byte for
 * byte); the replay table follows the container as its own image
 * (replay_file.c). Files of agrl 0.1.0 (AGRLDQN1) are parsed into the same
 * keys and sections by agfile_legacy.c.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/agrl.h"
#include "agent/agent_internal.h"
#include "nn/nn_internal.h"
#include "replay/frames_internal.h"
#include "replay/replay_internal.h"

/* version 3: convolutions in front; 4: a frame table (with or without them) */
enum { DQN_VERSION = 2, DQN_VERSION_CONV = 3, DQN_VERSION_FRAMES = 4, DQN_MAX_TENSORS = 256 };

/* The tensors of the file, in its order (ag__agf_dqn_section's names); how many there are. */
static int dqn_tensors(const ag_dqn *d, ag_tensor **out, int max) {
  int n = ag__dqn_update_state(d, out, max);
  int np = ag_mlp_n_params(d->target);
  ag_tensor *const *p = ag_mlp_params(d->target);
  for (int i = 0; i < np; i++, n++)
    if (n < max) out[n] = p[i];
  return n;
}

static const char *const dqn_flags[4] = {"dqn.double_dqn", "dqn.huber", "dqn.fused", "dqn.per"};
static const char *const dqn_f32s[11] = {
    "dqn.lr",        "dqn.gamma",   "dqn.tau",           "dqn.exploration_fraction",
    "dqn.eps_start", "dqn.eps_end", "dqn.max_grad_norm", "dqn.per_alpha",
    "dqn.per_beta",  "dqn.per_eps", "dqn.beta"};
static const char *const dqn_i64s[11] = {
    "dqn.batch_size", "dqn.buffer_size",      "dqn.learning_starts",
    "dqn.train_freq", "dqn.gradient_steps",   "dqn.target_update_interval",
    "dqn.n_step",     "dqn.n_envs",           "dqn.total_steps",
    "dqn.updates",    "dqn.updates_at_target"};

/* A save's source of a tensor's bytes: straight from the device. */
static ag_status tensor_fill(void *user, unsigned char *dst, uint64_t off, size_t len) {
  ag_tensor *t = user;
  void *dev;
  ag_status s = ag__tensor_ptr(t, &dev);
  return s ? s : ag__mem_download_copy(t->ctx, "ag_dqn_save", dst, (const char *)dev + off, len);
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
  float beta_now = 0.0f;
  if (d->per && (s = ag_tensor_read(d->beta, &beta_now, sizeof beta_now))) return s;
  const ag_dqn_config *c = &d->cfg;
  const int L = c->n_hidden + 1;
  int64_t sizes[AG_DQN_MAX_HIDDEN + 2];
  sizes[0] = d->obs_dim;
  for (int i = 0; i < c->n_hidden; i++) sizes[i + 1] = c->hidden[i];
  sizes[L] = d->n_actions;
  const int flags[4] = {c->double_dqn, c->huber, c->fused, c->per};
  const float fs[11] = {c->lr,        c->gamma,   c->tau,           c->exploration_fraction,
                        c->eps_start, c->eps_end, c->max_grad_norm, c->per_alpha,
                        c->per_beta,  c->per_eps, beta_now};
  const int64_t is[11] = {c->batch_size, c->buffer_size,      c->learning_starts,
                          c->train_freq, c->gradient_steps,   c->target_update_interval,
                          c->n_step,     c->n_envs,           d->total_steps,
                          d->updates,    d->updates_at_target};
  ag__agf a;
  ag__agf_init(&a);
  ag__agf_set_str(&a, "kind", "dqn");
  ag__agf_set_i64(&a, "dqn.version",
                  c->frame_stack ? DQN_VERSION_FRAMES
                  : c->n_conv    ? DQN_VERSION_CONV
                                 : DQN_VERSION);
  ag__agf_set_str(&a, "dqn.library", ag_version());
  ag__agf_set_i64s(&a, "dqn.sizes", sizes, (uint32_t)(L + 1));
  if (c->n_conv) { /* the convolutions in front (DQN_VERSION_CONV) */
    int64_t conv[4 * AG_MAX_CONV];
    for (int i = 0; i < c->n_conv; i++) {
      conv[4 * i] = c->conv[i].channels, conv[4 * i + 1] = c->conv[i].kernel;
      conv[4 * i + 2] = c->conv[i].stride, conv[4 * i + 3] = c->conv[i].pad;
    }
    ag__agf_set_i64s(&a, "dqn.conv", conv, (uint32_t)(4 * c->n_conv));
  }
  if (c->n_conv || c->frame_stack) ag__agf_set_i64s(&a, "dqn.obs_shape", c->obs_shape, 3);
  if (c->frame_stack) ag__agf_set_i64(&a, "dqn.frame_stack", c->frame_stack); /* DQN_VERSION_FRAMES */
  for (int i = 0; i < 4; i++) ag__agf_set_i64(&a, dqn_flags[i], flags[i] ? 1 : 0);
  for (int i = 0; i < 11; i++) ag__agf_set_f64(&a, dqn_f32s[i], (double)fs[i]);
  for (int i = 0; i < 11; i++) ag__agf_set_i64(&a, dqn_i64s[i], is[i]);
  ag__agf_set_u64(&a, "dqn.seed", c->seed);
  ag__agf_set_u64(&a, "dqn.host_rng", d->host_rng);
  for (int i = 0; i < T; i++) {
    char nm[32];
    const int64_t dims[2] = {ag_tensor_rows(ts[i]), ag_tensor_cols(ts[i])};
    ag__agf_add_tensor(&a, ag__agf_dqn_section(i, c->n_conv + L, nm), ag_tensor_dtype(ts[i]), 2, dims,
                       tensor_fill, ts[i]);
  }
  ag__agf_add_blob(&a, "run_state", d->run_state_n, ag__agf_fill_host, d->run_state);
  ag__afile af;
  if (!(s = ag__afile_open(&af, path, fn))) {
    s = ag__agf_write(&a, af.f, AG_TRANSFER_PART_BYTES, fn, path);
    if (!s)
      s = d->frames ? ag__frames_write(d->frames, af.f, AG_TRANSFER_PART_BYTES, fn, path)
                    : ag__replay_write(d->replay, af.f, AG_TRANSFER_PART_BYTES, fn, path);
    s = ag__afile_finish(&af, s, 1, fn);
  }
  ag__agf_free(&a);
  return s;
}

/* ---- load ---- */

static ag_status bad(const char *fn, const char *path, const char *what) {
  return ag__fail(AG_ERR_IO, "%s: %s is corrupt: %s", fn, path, what);
}

/* An f32 setting held as an f64 key: finite and exactly an f32. */
static ag_status get_f32(const ag__agf *a, const char *key, float *out, const char *fn, const char *path) {
  double v = 0.0;
  ag_status s = ag__agf_get_f64(a, key, &v, fn, path);
  if (s) return s;
  if (!isfinite(v) || (double)(float)v != v)
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: key '%s' (%.17g) is not a finite f32", fn, path, key, v);
  *out = (float)v;
  return AG_OK;
}

static ag_status get_u64(const ag__agf *a, const char *key, uint64_t *out, const char *fn, const char *path) {
  const ag__agf_key *k = ag__agf_key_find(a, key);
  if (!k) return ag__fail(AG_ERR_IO, "%s: %s is corrupt: key '%s' is missing", fn, path, key);
  if (k->type != AG__AGF_U64)
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: key '%s' is not a u64", fn, path, key);
  *out = k->v.u;
  return AG_OK;
}

/* The configuration and counters the keys of a hold, checked. */
static ag_status keys_get(const ag__agf *a, const char *fn, const char *path, ag_dqn_config *c, int64_t k[5],
                          uint64_t *host_rng, float *beta_now) {
  memset(c, 0, sizeof *c);
  int64_t version;
  const int64_t *sz;
  uint32_t n = 0;
  ag_status s = ag__agf_check_kind(a, "dqn", DQN_VERSION_FRAMES, &version, fn, path);
  if (!s) s = ag__agf_get_i64s(a, "dqn.sizes", AG_DQN_MAX_HIDDEN + 2, &sz, &n, fn, path);
  if (!s && n < 2) s = bad(fn, path, "dqn.sizes has fewer than 2 sizes");
  for (uint32_t i = 0; !s && i < n; i++)
    if (sz[i] < (i + 1 == n ? 2 : 1) || sz[i] > ((int64_t)1 << 24)) s = bad(fn, path, "a size out of range");
  if (s) return s;
  c->n_hidden = (int)n - 2;
  for (int i = 0; i < c->n_hidden; i++) c->hidden[i] = sz[i + 1];
  k[0] = sz[0], k[1] = sz[n - 1];
  const int has_conv = ag__agf_key_find(a, "dqn.conv") != NULL;
  if (version < DQN_VERSION_CONV && (has_conv || ag__agf_key_find(a, "dqn.obs_shape")))
    return bad(fn, path, "the keys of convolutions in a version-2 file");
  if (version < DQN_VERSION_FRAMES && ag__agf_key_find(a, "dqn.frame_stack"))
    return bad(fn, path, "the key of a frame table in a file of version 2 or 3");
  if (version == DQN_VERSION_FRAMES) {
    int64_t k = 0;
    if ((s = ag__agf_get_i64(a, "dqn.frame_stack", 1, AG_FRAMES_MAX_STACK, &k, fn, path))) return s;
    c->frame_stack = (int)k;
  }
  if (version >= DQN_VERSION_CONV) { /* version 3 has convolutions; 4 may */
    const int64_t *cv = NULL, *sh;
    uint32_t ncv = 0, nsh = 0;
    if (version == DQN_VERSION_CONV || has_conv) {
      s = ag__agf_get_i64s(a, "dqn.conv", 4 * AG_MAX_CONV, &cv, &ncv, fn, path);
      if (!s && (ncv < 4 || ncv % 4)) s = bad(fn, path, "dqn.conv is not 1..8 layers of 4 values");
    }
    if (!s) s = ag__agf_get_i64s(a, "dqn.obs_shape", 3, &sh, &nsh, fn, path);
    if (!s && nsh != 3) s = bad(fn, path, "dqn.obs_shape is not 3 values");
    if (s) return s;
    c->n_conv = (int)(ncv / 4);
    for (int i = 0; i < c->n_conv; i++)
      c->conv[i] = (ag_conv_layer){cv[4 * i], cv[4 * i + 1], cv[4 * i + 2], cv[4 * i + 3]};
    memcpy(c->obs_shape, sh, sizeof c->obs_shape);
    for (int i = 0; i < 3; i++)
      if (sh[i] < 1 || sh[i] > ((int64_t)1 << 24)) return bad(fn, path, "dqn.obs_shape out of range");
    size_t n_obs = 0; /* three sizes of up to 2^24: their product in 64 bits, checked */
    if (!ag__mul3((uint64_t)sh[0], (uint64_t)sh[1], (uint64_t)sh[2], &n_obs) || (int64_t)n_obs != k[0])
      return bad(fn, path, "dqn.obs_shape does not hold the observation's size");
  }
  int64_t fl[4];
  for (int i = 0; !s && i < 4; i++) s = ag__agf_get_i64(a, dqn_flags[i], 0, 1, &fl[i], fn, path);
  if (s) return s;
  c->double_dqn = fl[0] != 0, c->huber = fl[1] != 0, c->fused = fl[2] != 0, c->per = fl[3] != 0;
  float *fs[11] = {&c->lr,        &c->gamma,   &c->tau,           &c->exploration_fraction,
                   &c->eps_start, &c->eps_end, &c->max_grad_norm, &c->per_alpha,
                   &c->per_beta,  &c->per_eps, beta_now};
  for (int i = 0; !s && i < 11; i++) s = get_f32(a, dqn_f32s[i], fs[i], fn, path);
  int64_t iv[11];
  for (int i = 0; !s && i < 11; i++)
    s = ag__agf_get_i64(a, dqn_i64s[i], INT64_MIN, INT64_MAX, &iv[i], fn, path);
  if (!s) s = get_u64(a, "dqn.seed", &c->seed, fn, path);
  if (!s) s = get_u64(a, "dqn.host_rng", host_rng, fn, path);
  if (s) return s;
  c->batch_size = iv[0], c->buffer_size = iv[1], c->learning_starts = iv[2], c->train_freq = iv[3];
  c->gradient_steps = iv[4], c->target_update_interval = iv[5];
  if (iv[6] < 0 || iv[6] > 64) return bad(fn, path, "n_step out of range");
  c->n_step = (int)iv[6];
  c->n_envs = iv[7];
  k[2] = iv[8], k[3] = iv[9], k[4] = iv[10];
  if (!c->per) { /* a DQN without prioritized replay writes the defaults' values */
    const ag_dqn_config dc = ag_dqn_defaults();
    if (c->per_alpha != dc.per_alpha || c->per_beta != dc.per_beta || c->per_eps != dc.per_eps ||
        *beta_now != 0.0f || signbit(*beta_now)) /* beta +0 exactly: what a save writes */
      return bad(fn, path, "prioritized replay settings without prioritized replay");
  } else if (!(*beta_now >= 0.0f && *beta_now <= 1.0f))
    return bad(fn, path, "beta out of range");
  if (c->lr <= 0.0f || c->lr >= 1e6f || c->max_grad_norm < 0.0f || c->buffer_size > ((int64_t)1 << 40))
    return bad(fn, path, "a setting out of range");
  if (k[2] < 1 || k[3] < 0 || k[4] < 0 || k[4] > k[3]) return bad(fn, path, "counters out of range");
  return AG_OK;
}

/* The entries (rows, cols, dtype) the DQN of configuration c makes, in the
 * file's order (dqn_tensors'); how many there are. */
static int expected_entries(const ag_dqn_config *c, int64_t obs_dim, int64_t n_actions, int64_t (*e)[3],
                            int max) {
  int64_t sizes[AG_DQN_MAX_HIDDEN + 2], shape[AG_MAX_CONV + 1][3];
  int L = c->n_hidden + 1, n = 0;
  sizes[0] = obs_dim;
  if (c->n_conv) { /* checked by ag__dqn_check_config */
    ag__conv_shapes(c->obs_shape, c->conv, c->n_conv, shape, "ag_dqn_load");
    sizes[0] = shape[c->n_conv][0] * shape[c->n_conv][1] * shape[c->n_conv][2];
  }
  for (int i = 0; i < c->n_hidden; i++) sizes[i + 1] = c->hidden[i];
  sizes[L] = n_actions;
  /* each parameter's [rows, cols]: the convolutions', then the linear layers' */
  int64_t d[2 * (AG_MAX_CONV + AG_DQN_MAX_HIDDEN + 1)][2];
  const int P = ag__net_dims(c->conv, (const int64_t(*)[3])shape, c->n_conv, sizes, L + 1, d,
                             2 * (AG_MAX_CONV + AG_DQN_MAX_HIDDEN + 1));
#define ENTRY(r, cl, dt)                                        \
  do {                                                          \
    if (n < max) e[n][0] = (r), e[n][1] = (cl), e[n][2] = (dt); \
    n++;                                                        \
  } while (0)
  for (int p = 0; p < P; p++) { /* each parameter and its gradient */
    ENTRY(d[p][0], d[p][1], AG_F32);
    ENTRY(d[p][0], d[p][1], AG_F32);
  }
  ENTRY(1, 1, AG_I64);               /* the sampling counter */
  ENTRY(AG__OPT_STATE_N, 1, AG_F32); /* Adam's state, then each parameter's moments */
  for (int p = 0; p < P; p++) {
    ENTRY(d[p][0], d[p][1], AG_F32);
    ENTRY(d[p][0], d[p][1], AG_F32);
  }
  for (int p = 0; p < P; p++) ENTRY(d[p][0], d[p][1], AG_F32); /* the target network */
#undef ENTRY
  return n;
}

ag_status ag__dqn_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_dqn **out);

/* A load's sink: each tensor's bytes to the device, the run state to host memory. */
typedef struct dqn_dst {
  ag_tensor **ts;
  int T;
  unsigned char *run;
} dqn_dst;

static ag_status dqn_take(void *user, int sec, unsigned char *buf, uint64_t off, size_t len) {
  dqn_dst *d = user;
  if (sec >= d->T) {
    memcpy(d->run + off, buf, len);
    return AG_OK;
  }
  ag_tensor *t = d->ts[sec];
  void *dev;
  ag_status s = ag__tensor_ptr(t, &dev);
  return s ? s : ag__mem_upload_copy(t->ctx, "ag_dqn_load", (char *)dev + off, buf, len);
}

/* Loads from f's position to its end; the entry of ag_dqn_load and of the
 * fuzzer. A DQN whose networks and table would take more than max_bytes
 * (0: no limit) is refused with AG_ERR_UNSUPPORTED before it is made. */
ag_status ag__dqn_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_dqn **out) {
  static const char fn[] = "ag_dqn_load";
  if (!ctx || !f || !path || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  ag_status s = ag__not_recording(ctx, fn);
  uint64_t len = 0;
  if (!s) s = ag__stream_left(f, fn, path, "a DQN file", &len);
  if (s) return s;
  ag__agf a;
  ag_dqn_config c;
  int64_t k[5] = {0, 0, 0, 0, 0};
  uint64_t host_rng = 0;
  float beta_now = 0.0f;
  unsigned char magic[8];
  if (len >= 8 && !ag__peek(f, magic, 8) && !memcmp(magic, "AGRL", 4) && memcmp(magic, "AGRLFILE", 8) &&
      memcmp(magic, "AGRLDQN1", 8))
    return ag__fail(AG_ERR_IO,
                    "%s: %s is not a DQN file: it begins with %.8s, the magic of another agrl file", fn, path,
                    (const char *)magic);
  s = ag__agf_read_head(&a, f, len, fn, path);
  const ag__agf_key *kind = s ? NULL : ag__agf_key_find(&a, "kind");
  if (kind && kind->type == AG__AGF_STR && strcmp((const char *)kind->data, "dqn"))
    s = ag__fail(AG_ERR_IO, "%s: %s is not a DQN file: its kind is \"%s\"", fn, path,
                 (const char *)kind->data);
  if (!s) s = keys_get(&a, fn, path, &c, k, &host_rng, &beta_now);
  if (!s && (s = ag__dqn_check_config(&c, fn))) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    s = ag__fail(AG_ERR_IO, "%s: %s holds a configuration ag_dqn_create refuses: %s", fn, path, why);
  }
  /* the file's sections must be those its configuration makes, before anything is made */
  int64_t want[DQN_MAX_TENSORS][3];
  int T = s ? 0 : expected_entries(&c, k[0], k[1], want, DQN_MAX_TENSORS);
  uint64_t params = 0, R = 0;
  if (!s && (T > DQN_MAX_TENSORS || a.n_sections != T + 1))
    s = bad(fn, path, "its sections are not those of the DQN its configuration makes");
  for (int i = 0; !s && i < T; i++) {
    char nm[32];
    int at = -1;
    s = ag__agf_want_section(&a, ag__agf_dqn_section(i, c.n_conv + c.n_hidden + 1, nm), (int)want[i][2], 2,
                             want[i], &at, fn, path);
    if (!s && at != i) s = bad(fn, path, "its sections are not in the order of its tensors");
    if (!s) params += a.sections[i].bytes;
  }
  if (!s) {
    const ag__agf_section *rs = &a.sections[T];
    if (strcmp(rs->name, "run_state") || rs->kind != AG__AGF_BLOB)
      s = bad(fn, path, "its last section is not the blob run_state");
    else if ((R = rs->bytes) > AG__MAX_RUN_STATE)
      s = bad(fn, path, "the run state is longer than 2^30 bytes");
  }
  uint64_t rows = 2 * (uint64_t)k[0] + 3; /* a frame table's size is checked by its loader */
  if (!s && max_bytes &&
      (params > max_bytes || (!c.frame_stack && (uint64_t)c.buffer_size * rows * 4 > max_bytes)))
    s = ag__fail(AG_ERR_UNSUPPORTED, "%s: the DQN of %s is larger than the limit of %zu bytes", fn, path,
                 max_bytes);
  ag_dqn *d = NULL;
  if (!s) { /* made with a table of one batch (or of the copies): the file's table replaces it */
    ag_dqn_config small = c;
    small.buffer_size = c.frame_stack && c.n_envs > c.batch_size ? c.n_envs : c.batch_size;
    s = ag__dqn_create(ctx, NULL, k[0], k[1], k[2], &small, fn, &d);
  }
  ag_tensor *ts[DQN_MAX_TENSORS];
  if (!s) {
    int n = dqn_tensors(d, ts, DQN_MAX_TENSORS);
    if (n != T) s = bad(fn, path, "its tensors are not those of the DQN its configuration makes");
    for (int i = 0; !s && i < n; i++)
      if (ag_tensor_rows(ts[i]) != want[i][0] || ag_tensor_cols(ts[i]) != want[i][1] ||
          ag_tensor_dtype(ts[i]) != (ag_dtype)want[i][2])
        s = bad(fn, path, "a tensor's shape or dtype is not the one its configuration makes");
  }
  unsigned char *run = NULL;
  if (!s && R && !(run = ag__malloc((size_t)R)))
    s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory (%llu bytes)", fn, (unsigned long long)R);
  if (!s) {
    dqn_dst dst = {ts, T, run};
    s = ag__agf_stream(&a, f, dqn_take, &dst, fn, path);
  }
  if (!s) s = ag_dqn_set_run_state(d, run, (size_t)R);
  free(run);
  if (!s && fseeko(f, a.base + (off_t)a.total, SEEK_SET))
    s = ag__fail(AG_ERR_IO, "%s: %s: cannot seek to its replay table: %s", fn, path, strerror(errno));
  ag__agf_free(&a);
  ag_replay *r = NULL;
  ag_frames *t = NULL;
  if (!s && c.frame_stack) { /* c is read only once its keys were (a failed read leaves it partly set) */
    const ag_frames_config fc = ag__dqn_frames_config(&c);
    s = ag__agent_frames_read(ctx, f, path, max_bytes, fn, "the DQN's", &fc, d->replay, &t);
  } else if (!s)
    s = ag__agent_table_read(ctx, f, path, max_bytes, fn, "the DQN's", d->replay, c.buffer_size, &r);
  if (!s && d->per) s = ag_tensor_write(d->beta, &beta_now, sizeof beta_now);
  if (s) {
    ag_replay_free(r);
    ag_frames_free(t);
    ag_dqn_free(d);
    return s;
  }
  if (t) { /* the small frame table (and its sampler) for the file's */
    ag_frames_free(d->frames);
    d->frames = t;
    r = ag_frames_replay(t);
  } else
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
