/* ac_file.c — a SAC or TD3 agent saved whole and loaded back: an agrl
 * container of kind "ac" (docs/container.md) whose keys hold its
 * configuration, sizes, bounds and counters, the host stream's state and
 * the streams' seeds, and whose sections hold every tensor an update or an
 * exploring act reads or changes, the correlated noise's state and the
 * caller's run state (a blob, kept byte for byte); the replay table follows
 * the container as its own image (replay_file.c). Files of agrl 0.1.0
 * (AGRLACR1) are parsed into the same keys and sections by agfile_legacy.c.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/agrl.h"
#include "agent/agent_internal.h"
#include "replay/replay_internal.h"

enum { AC_VERSION = 2, AC_MAX_TENSORS = 256, AC_MAX_ACT = 64 };

const float *ag_ac_low(const ag_ac *a) { return a ? a->low : NULL; }
const float *ag_ac_high(const ag_ac *a) { return a ? a->high : NULL; }
int64_t ag_ac_total_steps(const ag_ac *a) { return a ? a->total_steps : 0; }

/* Appends a network's parameters to out[*n ..] (up to max). */
static void add_params(ag_mlp *m, ag_tensor **out, int *n, int max) {
  ag_tensor *const *p = ag_mlp_params(m);
  for (int i = 0; i < ag_mlp_n_params(m); i++, (*n)++)
    if (*n < max) out[*n] = p[i];
}

static void add_optim(const ag_optim *o, ag_tensor **out, int *n, int max) {
  *n += ag__optim_state(o, *n < max ? out + *n : out, *n < max ? max - *n : 0);
}

/* The tensors of the file, in its order (ag__agf_ac_section's names); how many there are. */
static int ac_tensors(const ag_ac *a, ag_tensor **out, int max) {
  int n = 0;
  add_params(a->actor, out, &n, max);
  for (int k = 0; k < 2; k++) add_params(a->q[k], out, &n, max);
  for (int k = 0; k < 2; k++) add_params(a->qt[k], out, &n, max);
  if (a->actor_t) add_params(a->actor_t, out, &n, max);
  ag_tensor *one[3] = {a->log_alpha, ag__rng_counter_tensor(a->rng), ag__rng_counter_tensor(a->act_rng)};
  for (int i = 0; i < 3; i++, n++)
    if (n < max) out[n] = one[i];
  add_optim(a->opt_actor, out, &n, max);
  add_optim(a->opt_critic, out, &n, max);
  if (a->opt_alpha) add_optim(a->opt_alpha, out, &n, max);
  return n;
}

/* The entries (rows, cols, dtype) the agent of configuration c makes, in
 * the file's order (ac_tensors'); how many there are. */
static int expected_entries(const ag_ac_config *c, int64_t obs_dim, int64_t act_dim, int64_t (*e)[3],
                            int max) {
  const int L = c->n_hidden + 1, sac = c->algo == AG_AC_SAC;
  int n = 0;
#define ENTRY(r, cl, dt)                                        \
  do {                                                          \
    if (n < max) e[n][0] = (r), e[n][1] = (cl), e[n][2] = (dt); \
    n++;                                                        \
  } while (0)
  /* a network of in inputs and out outputs: each layer's weights and biases
   * (moments: twice each) */
#define NET(in, out, times)                                                                    \
  for (int l = 0; l < L; l++) {                                                                \
    int64_t rows = l == L - 1 ? (out) : c->hidden[l], cols = l == 0 ? (in) : c->hidden[l - 1]; \
    for (int k = 0; k < (times); k++) ENTRY(rows, cols, AG_F32);                               \
    for (int k = 0; k < (times); k++) ENTRY(rows, 1, AG_F32);                                  \
  }
  const int64_t A = sac ? 2 * act_dim : act_dim, qin = obs_dim + act_dim;
  NET(obs_dim, A, 1);
  for (int k = 0; k < 4; k++) NET(qin, 1, 1); /* the critics, then their targets */
  if (!sac) NET(obs_dim, act_dim, 1);
  ENTRY(1, 1, AG_F32); /* log alpha */
  ENTRY(1, 1, AG_I64); /* the streams' counters */
  ENTRY(1, 1, AG_I64);
  ENTRY(AG__OPT_STATE_N, 1, AG_F32); /* the actor's Adam */
  NET(obs_dim, A, 2);
  ENTRY(AG__OPT_STATE_N, 1, AG_F32); /* the critics' */
  for (int k = 0; k < 2; k++) NET(qin, 1, 2);
  if (sac && c->autotune) { /* the temperature's */
    ENTRY(AG__OPT_STATE_N, 1, AG_F32);
    ENTRY(1, 1, AG_F32);
    ENTRY(1, 1, AG_F32);
  }
#undef NET
#undef ENTRY
  return n;
}

/* The loss of the last actor update, as ag_ac_train reports it. */
static ag_status last_actor_loss(const ag_ac *a, float *out) {
  *out = a->aloss_loaded;
  return a->actor_updates && a->aloss_of ? ag_tensor_read(a->aloss_of, out, sizeof *out) : AG_OK;
}

/* The keys of the file besides kind, version, library, algo, sizes and bounds. */
static const char *const ac_f32s[11] = {
    "ac.actor_lr",   "ac.critic_lr",    "ac.gamma",      "ac.tau",       "ac.alpha",     "ac.target_entropy",
    "ac.expl_noise", "ac.target_noise", "ac.noise_clip", "ac.noise_rho", "ac.actor_loss"};
static const char *const ac_i64s[14] = {
    "ac.policy_delay", "ac.autotune",        "ac.fused",         "ac.n_step",         "ac.batch_size",
    "ac.buffer_size",  "ac.learning_starts", "ac.train_freq",    "ac.gradient_steps", "ac.n_envs",
    "ac.total_steps",  "ac.updates",         "ac.actor_updates", "ac.noise_copies"};
static const char *const ac_u64s[4] = {"ac.seed", "ac.host_rng", "ac.update_rng_seed", "ac.act_rng_seed"};

/* A save's source of a tensor's bytes: straight from the device. */
static ag_status tensor_fill(void *user, unsigned char *dst, uint64_t off, size_t len) {
  ag_tensor *t = user;
  void *dev;
  ag_status s = ag__tensor_ptr(t, &dev);
  return s ? s : ag__mem_download_copy(t->ctx, "ag_ac_save", dst, (const char *)dev + off, len);
}

ag_status ag_ac_save(const ag_ac *ca, const char *path) {
  static const char fn[] = "ag_ac_save";
  if (!ca || !path) return ag__fail(AG_ERR_INVALID_ARG, "%s: agent and path must not be NULL", fn);
  if (!*path) return ag__fail(AG_ERR_INVALID_ARG, "%s: path is empty", fn);
  ag_status s = ag__not_recording(ca->ctx, fn);
  if (s) return s;
  if (ca->broken)
    return ag__fail(AG_ERR_STATE, "%s: a device error left the agent part updated; it cannot be saved", fn);
  ag_tensor *ts[AC_MAX_TENSORS];
  int T = ac_tensors(ca, ts, AC_MAX_TENSORS);
  if (T > AC_MAX_TENSORS) return ag__fail(AG_ERR_UNSUPPORTED, "%s: %d tensors is too many", fn, T);
  float aloss;
  if ((s = last_actor_loss(ca, &aloss))) return s;
  const ag_ac_config *c = &ca->cfg;
  const int L = c->n_hidden + 1, td3 = c->algo == AG_AC_TD3;
  int64_t sizes[AG_AC_MAX_HIDDEN + 2];
  sizes[0] = ca->obs_dim;
  for (int i = 0; i < c->n_hidden; i++) sizes[i + 1] = c->hidden[i];
  sizes[L] = ca->act_dim;
  double low[AC_MAX_ACT], high[AC_MAX_ACT];
  for (int64_t i = 0; i < ca->act_dim; i++) low[i] = (double)ca->low[i], high[i] = (double)ca->high[i];
  const float fs[11] = {c->actor_lr,   c->critic_lr,      c->gamma,      c->tau,
                        c->alpha,      c->target_entropy, c->expl_noise, c->target_noise,
                        c->noise_clip, c->noise_rho,      aloss};
  const int64_t copies = ca->noise_n / ca->act_dim;
  const int64_t is[14] = {c->policy_delay,   c->autotune,    c->fused ? 1 : 0,   c->n_step,
                          c->batch_size,     c->buffer_size, c->learning_starts, c->train_freq,
                          c->gradient_steps, c->n_envs,      ca->total_steps,    ca->updates,
                          ca->actor_updates, copies};
  const uint64_t us[4] = {c->seed, ca->host_rng, ag__rng_seed(ca->rng), ag__rng_seed(ca->act_rng)};
  ag__agf a;
  ag__agf_init(&a);
  ag__agf_set_str(&a, "kind", "ac");
  ag__agf_set_i64(&a, "ac.version", AC_VERSION);
  ag__agf_set_str(&a, "ac.library", ag_version());
  ag__agf_set_str(&a, "ac.algo", td3 ? "td3" : "sac");
  ag__agf_set_i64s(&a, "ac.sizes", sizes, (uint32_t)(L + 1));
  ag__agf_set_f64s(&a, "ac.low", low, (uint32_t)ca->act_dim);
  ag__agf_set_f64s(&a, "ac.high", high, (uint32_t)ca->act_dim);
  for (int i = 0; i < 11; i++) ag__agf_set_f64(&a, ac_f32s[i], (double)fs[i]);
  for (int i = 0; i < 14; i++) ag__agf_set_i64(&a, ac_i64s[i], is[i]);
  for (int i = 0; i < 4; i++) ag__agf_set_u64(&a, ac_u64s[i], us[i]);
  for (int i = 0; i < T; i++) {
    char nm[48];
    const int64_t dims[2] = {ag_tensor_rows(ts[i]), ag_tensor_cols(ts[i])};
    ag__agf_add_tensor(&a, ag__agf_ac_section(i, L, td3, ca->opt_alpha != NULL, nm), ag_tensor_dtype(ts[i]),
                       2, dims, tensor_fill, ts[i]);
  }
  const int64_t ndims[2] = {ca->act_dim, copies};
  ag__agf_add_tensor(&a, "noise", AG_F32, 2, ndims, ag__agf_fill_host, ca->noise_z);
  ag__agf_add_blob(&a, "run_state", ca->run_state_n, ag__agf_fill_host, ca->run_state);
  ag__afile af;
  if (!(s = ag__afile_open(&af, path, fn))) {
    s = ag__agf_write(&a, af.f, AG_TRANSFER_PART_BYTES, fn, path);
    if (!s) s = ag__replay_write(ca->replay, af.f, AG_TRANSFER_PART_BYTES, fn, path);
    s = ag__afile_finish(&af, s, 1, fn);
  }
  ag__agf_free(&a);
  return s;
}

/* ---- load ---- */

/* What the keys hold, checked. */
typedef struct ac_keys {
  ag_ac_config c;
  int64_t obs_dim, act_dim, total_steps, updates, actor_updates, noise_n;
  uint64_t host_rng, seeds[2];
  float aloss;
  float low[AC_MAX_ACT], high[AC_MAX_ACT];
} ac_keys;

static ag_status bad(const char *path, const char *what) {
  return ag__fail(AG_ERR_IO, "ag_ac_load: %s is corrupt: %s", path, what);
}

/* An f32 setting held as an f64 key: exactly an f32, finite unless nan_ok. */
static ag_status get_f32(const ag__agf *a, const char *key, int nan_ok, float *out, const char *path) {
  double v = 0.0;
  ag_status s = ag__agf_get_f64(a, key, &v, "ag_ac_load", path);
  if (s) return s;
  if (isnan(v) ? !nan_ok : !isfinite(v) || (double)(float)v != v)
    return ag__fail(AG_ERR_IO, "ag_ac_load: %s is corrupt: key '%s' (%.17g) is not a finite f32", path, key,
                    v);
  *out = (float)v;
  return AG_OK;
}

/* An array of n f32 values held as an f64 array key, each finite and exactly an f32. */
static ag_status get_f32s(const ag__agf *a, const char *key, int64_t n, float *out, const char *path) {
  const ag__agf_key *k = ag__agf_key_find(a, key);
  if (!k) return ag__fail(AG_ERR_IO, "ag_ac_load: %s is corrupt: key '%s' is missing", path, key);
  if (k->type != AG__AGF_F64S || (int64_t)k->count != n)
    return ag__fail(AG_ERR_IO,
                    "ag_ac_load: %s is corrupt: key '%s' is not an f64 array of act_dim (%lld) values", path,
                    key, (long long)n);
  const double *v = k->data;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(v[i]) || (double)(float)v[i] != v[i])
      return ag__fail(AG_ERR_IO, "ag_ac_load: %s is corrupt: key '%s' holds %.17g, not a finite f32", path,
                      key, v[i]);
    out[i] = (float)v[i];
  }
  return AG_OK;
}

static ag_status get_u64(const ag__agf *a, const char *key, uint64_t *out, const char *path) {
  const ag__agf_key *k = ag__agf_key_find(a, key);
  if (!k) return ag__fail(AG_ERR_IO, "ag_ac_load: %s is corrupt: key '%s' is missing", path, key);
  if (k->type != AG__AGF_U64)
    return ag__fail(AG_ERR_IO, "ag_ac_load: %s is corrupt: key '%s' is not a u64", path, key);
  *out = k->v.u;
  return AG_OK;
}

/* The configuration, sizes, bounds and counters the keys of a hold, checked
 * as ag_ac_create checks them. */
static ag_status keys_get(const ag__agf *a, const char *path, ac_keys *x) {
  static const char fn[] = "ag_ac_load";
  memset(x, 0, sizeof *x);
  ag_ac_config *c = &x->c;
  *c = ag_ac_defaults(AG_AC_SAC);
  int64_t version;
  const char *algo = NULL;
  const int64_t *sz;
  uint32_t n = 0;
  ag_status s = ag__agf_check_kind(a, "ac", AC_VERSION, &version, fn, path);
  if (!s) s = ag__agf_get_str(a, "ac.algo", &algo, fn, path);
  if (!s && strcmp(algo, "sac") && strcmp(algo, "td3"))
    s = bad(path, "ac.algo is neither \"sac\" nor \"td3\"");
  if (!s) s = ag__agf_get_i64s(a, "ac.sizes", AG_AC_MAX_HIDDEN + 2, &sz, &n, fn, path);
  if (!s && n < 3) s = bad(path, "ac.sizes has fewer than 3 sizes (one hidden layer at least)");
  for (uint32_t i = 0; !s && i < n; i++)
    if (sz[i] < 1 || sz[i] > (i + 1 == n ? AC_MAX_ACT : ((int64_t)1 << 24)))
      s = bad(path, "a size out of range");
  if (s) return s;
  c->algo = strcmp(algo, "td3") ? AG_AC_SAC : AG_AC_TD3;
  c->n_hidden = (int)n - 2;
  for (int i = 0; i < c->n_hidden; i++) c->hidden[i] = sz[i + 1];
  x->obs_dim = sz[0], x->act_dim = sz[n - 1];
  float *fs[11] = {&c->actor_lr,   &c->critic_lr,      &c->gamma,      &c->tau,
                   &c->alpha,      &c->target_entropy, &c->expl_noise, &c->target_noise,
                   &c->noise_clip, &c->noise_rho,      &x->aloss};
  for (int i = 0; !s && i < 11; i++) s = get_f32(a, ac_f32s[i], i == 5 || i == 10, fs[i], path);
  int64_t iv[14];
  /* ints within int's range (ag_ac_create's checks follow), the counters' own ranges */
  static const int64_t lo[14] = {INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT64_MIN, INT64_MIN, INT64_MIN,
                                 INT64_MIN, INT64_MIN, INT64_MIN, 1,         0,         0,         0};
  static const int64_t hi[14] = {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, INT64_MAX, INT64_MAX, INT64_MAX,
                                 INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT32_MAX};
  for (int i = 0; !s && i < 14; i++) s = ag__agf_get_i64(a, ac_i64s[i], lo[i], hi[i], &iv[i], fn, path);
  uint64_t us[4];
  for (int i = 0; !s && i < 4; i++) s = get_u64(a, ac_u64s[i], &us[i], path);
  if (!s) s = get_f32s(a, "ac.low", x->act_dim, x->low, path);
  if (!s) s = get_f32s(a, "ac.high", x->act_dim, x->high, path);
  if (s) return s;
  c->policy_delay = (int)iv[0], c->autotune = (int)iv[1], c->fused = (int)iv[2], c->n_step = (int)iv[3];
  c->batch_size = iv[4], c->buffer_size = iv[5], c->learning_starts = iv[6], c->train_freq = iv[7];
  c->gradient_steps = iv[8], c->n_envs = iv[9];
  x->total_steps = iv[10], x->updates = iv[11], x->actor_updates = iv[12];
  x->noise_n = iv[13] * x->act_dim;
  c->seed = us[0], x->host_rng = us[1], x->seeds[0] = us[2], x->seeds[1] = us[3];
  if ((s = ag__ac_check_config(c, fn))) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(AG_ERR_IO, "%s: %s holds a configuration ag_ac_create refuses: %s", fn, path, why);
  }
  if (c->buffer_size > ((int64_t)1 << 40)) return bad(path, "a setting out of range");
  for (int64_t i = 0; i < x->act_dim; i++)
    if (!(x->low[i] < x->high[i])) return bad(path, "an action's bounds are not low < high");
  /* an actor update comes at every policy_delay-th update */
  if (x->actor_updates != x->updates / c->policy_delay || (x->actor_updates == 0 && !isnan(x->aloss)))
    return bad(path, "the update counters are out of range");
  if (x->noise_n && c->noise_rho == 0.0f) return bad(path, "correlated noise without noise_rho");
  return AG_OK;
}

ag_status ag__ac_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_ac **out);

/* A load's sink: each tensor's bytes to the device, the noise and the run state to host memory. */
typedef struct ac_dst {
  ag_tensor **ts;
  int T;
  unsigned char *noise, *run;
} ac_dst;

static ag_status ac_take(void *user, int sec, unsigned char *buf, uint64_t off, size_t len) {
  ac_dst *d = user;
  if (sec >= d->T) {
    memcpy((sec == d->T ? d->noise : d->run) + off, buf, len);
    return AG_OK;
  }
  ag_tensor *t = d->ts[sec];
  void *dev;
  ag_status s = ag__tensor_ptr(t, &dev);
  return s ? s : ag__mem_upload_copy(t->ctx, "ag_ac_load", (char *)dev + off, buf, len);
}

/* The file's sections are those the agent of keys x makes, in its order:
 * the tensors of want (rows, cols, dtype each), the noise, the run state
 * (its bytes in *R); each tensor's bytes added to *params. */
static ag_status sections_check(const ag__agf *a, const ac_keys *x, const int64_t (*want)[3], int T,
                                const char *path, uint64_t *params, uint64_t *R) {
  static const char fn[] = "ag_ac_load";
  const int L = x->c.n_hidden + 1, td3 = x->c.algo == AG_AC_TD3, alpha_opt = !td3 && x->c.autotune;
  if (a->n_sections != T + 2)
    return bad(path, "its sections are not those of the agent its configuration makes");
  ag_status s = AG_OK;
  for (int i = 0; !s && i < T; i++) {
    char nm[48];
    int at = -1;
    s = ag__agf_want_section(a, ag__agf_ac_section(i, L, td3, alpha_opt, nm), (int)want[i][2], 2, want[i],
                             &at, fn, path);
    if (!s && at != i) s = bad(path, "its sections are not in the order of its tensors");
    if (!s) *params += a->sections[i].bytes;
  }
  int at = -1;
  const int64_t ndims[2] = {x->act_dim, x->noise_n / x->act_dim};
  if (!s) s = ag__agf_want_section(a, "noise", AG_F32, 2, ndims, &at, fn, path);
  if (!s && at != T) s = bad(path, "its section noise does not follow its tensors");
  if (s) return s;
  const ag__agf_section *rs = &a->sections[T + 1];
  if (strcmp(rs->name, "run_state") || rs->kind != AG__AGF_BLOB)
    return bad(path, "its last section is not the blob run_state");
  if ((*R = rs->bytes) > AG__MAX_RUN_STATE) return bad(path, "the run state is longer than 2^30 bytes");
  return AG_OK;
}

/* Loads from f's position to its end; the entry of ag_ac_load and of the
 * fuzzer. An agent whose networks and table would take more than max_bytes
 * (0: no limit) is refused with AG_ERR_UNSUPPORTED before it is made. */
ag_status ag__ac_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_ac **out) {
  static const char fn[] = "ag_ac_load";
  if (!ctx || !f || !path || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  ag_status s = ag__not_recording(ctx, fn);
  uint64_t len = 0;
  if (!s) s = ag__stream_left(f, fn, path, "a SAC/TD3 file", &len);
  if (s) return s;
  unsigned char magic[8];
  if (len >= 8 && !ag__peek(f, magic, 8) && !memcmp(magic, "AGRL", 4) && memcmp(magic, "AGRLFILE", 8) &&
      memcmp(magic, "AGRLACR1", 8))
    return ag__fail(AG_ERR_IO,
                    "%s: %s is not a SAC/TD3 file: it begins with %.8s, the magic of another agrl file", fn,
                    path, (const char *)magic);
  ag__agf a;
  ac_keys x;
  s = ag__agf_read_head(&a, f, len, fn, path);
  const ag__agf_key *kind = s ? NULL : ag__agf_key_find(&a, "kind");
  if (kind && kind->type == AG__AGF_STR && strcmp((const char *)kind->data, "ac"))
    s = ag__fail(AG_ERR_IO, "%s: %s is not a SAC/TD3 file: its kind is \"%s\"", fn, path,
                 (const char *)kind->data);
  if (!s) s = keys_get(&a, path, &x);
  /* the file's sections must be those its configuration makes, before anything is made */
  int64_t want[AC_MAX_TENSORS][3];
  int T = s ? 0 : expected_entries(&x.c, x.obs_dim, x.act_dim, want, AC_MAX_TENSORS);
  uint64_t params = 0, R = 0, nz = 4 * (uint64_t)x.noise_n;
  if (!s && T > AC_MAX_TENSORS) s = bad(path, "its configuration makes too many tensors");
  if (!s) s = sections_check(&a, &x, (const int64_t(*)[3])want, T, path, &params, &R);
  uint64_t rows = 2 * (uint64_t)x.obs_dim + (uint64_t)x.act_dim + 3;
  if (!s && max_bytes &&
      (params > max_bytes || nz > max_bytes || (uint64_t)x.c.buffer_size * rows * 4 > max_bytes))
    s = ag__fail(AG_ERR_UNSUPPORTED, "%s: the agent of %s is larger than the limit of %zu bytes", fn, path,
                 max_bytes);
  ag_ac *ac = NULL;
  if (!s) { /* made with a table of one batch: the file's table replaces it */
    ag_ac_config small = x.c;
    small.buffer_size = x.c.batch_size;
    if ((s = ag_ac_create(ctx, x.obs_dim, x.act_dim, x.low, x.high, x.total_steps, &small, &ac))) {
      char why[512];
      snprintf(why, sizeof why, "%s", ag_last_error());
      s = ag__fail(s, "%s: making the agent of %s: %s", fn, path, why);
    }
  }
  ag_tensor *ts[AC_MAX_TENSORS];
  if (!s) {
    int n = ac_tensors(ac, ts, AC_MAX_TENSORS);
    if (n != T) s = bad(path, "its tensors are not those of the agent its configuration makes");
    for (int i = 0; !s && i < n; i++)
      if (ag_tensor_rows(ts[i]) != want[i][0] || ag_tensor_cols(ts[i]) != want[i][1] ||
          ag_tensor_dtype(ts[i]) != (ag_dtype)want[i][2])
        s = bad(path, "a tensor's shape or dtype is not the one its configuration makes");
    if (!s && (ag__rng_seed(ac->rng) != x.seeds[0] || ag__rng_seed(ac->act_rng) != x.seeds[1]))
      s = bad(path, "its random streams' seeds are not those its configuration makes");
  }
  unsigned char *run = NULL;
  float *noise = NULL;
  if (!s && ((R && !(run = ag__malloc((size_t)R))) || (nz && !(noise = ag__malloc((size_t)nz)))))
    s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory (%llu bytes)", fn,
                 (unsigned long long)(R + nz));
  if (!s) {
    ac_dst dst = {ts, T, (unsigned char *)noise, run};
    s = ag__agf_stream(&a, f, ac_take, &dst, fn, path);
  }
  if (!s) s = ag_ac_set_run_state(ac, run, (size_t)R);
  free(run);
  if (!s && fseeko(f, a.base + (off_t)a.total, SEEK_SET))
    s = ag__fail(AG_ERR_IO, "%s: %s: cannot seek to its replay table: %s", fn, path, strerror(errno));
  ag__agf_free(&a);
  ag_replay *r = NULL;
  if (!s)
    s = ag__agent_table_read(ctx, f, path, max_bytes, fn, "the agent's", ac->replay, x.c.buffer_size, &r);
  if (s) {
    free(noise);
    ag_ac_free(ac);
    return s;
  }
  ag_replay_free(ac->replay);
  ac->replay = r;
  ac->cfg.buffer_size = x.c.buffer_size;
  ac->updates = x.updates;
  ac->actor_updates = x.actor_updates;
  ac->host_rng = x.host_rng;
  ac->aloss_loaded = x.aloss;
  free(ac->noise_z);
  ac->noise_z = noise;
  ac->noise_n = x.noise_n;
  *out = ac;
  return AG_OK;
}

ag_status ag_ac_load(ag_ctx *ctx, const char *path, ag_ac **out) {
  static const char fn[] = "ag_ac_load";
  if (!ctx || !path || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  FILE *f;
  ag_status s = ag__open_read(path, fn, &f);
  if (s) return s;
  s = ag__ac_load_stream(ctx, f, path, 0, out);
  fclose(f);
  return s;
}

ag_status ag_ac_set_run_state(ag_ac *a, const void *data, size_t n) {
  if (a && (data || !n))
    return ag__run_state_set(&a->run_state, &a->run_state_n, data, n, "ag_ac_set_run_state");
  return ag__fail(AG_ERR_INVALID_ARG, "ag_ac_set_run_state: agent is NULL, or data is NULL for n > 0");
}

const void *ag_ac_run_state(const ag_ac *a, size_t *n) {
  if (n) *n = a ? a->run_state_n : 0;
  return a ? a->run_state : NULL;
}
