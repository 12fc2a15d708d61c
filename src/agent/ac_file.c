/* ac_file.c — a SAC or TD3 agent saved whole and loaded back (the layout is
 * in agrl/ac.h): its configuration, sizes, bounds and counters, the host
 * stream and the correlated noise's state, every tensor an update or an
 * exploring act reads or changes, the caller's run state, and the replay
 * table in its own file image. Sections, the tensor table and the table's
 * image go through agent_file.c, as the DQN's do.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/agrl.h"
#include "agent/agent_internal.h"

enum { AC_VERSION = 1, AC_FIXED = 896, AC_MAX_TENSORS = 256, AC_MAX_ACT = 64 };

static const ag__file_kind ac_kind = {
    "ag_ac_load", "a SAC/TD3", "the agent's", {'A', 'G', 'R', 'L', 'A', 'C', 'R', '1'},
    AC_VERSION,   AC_FIXED,    312,           AC_MAX_TENSORS};

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

/* The tensors of the file, in its order (see agrl/ac.h); how many there are. */
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

static void header_put(const ag_ac *a, unsigned char *h, int T, ag_tensor **ts, float aloss) {
  const ag_ac_config *c = &a->cfg;
  memcpy(h, ac_kind.magic, 8);
  ag__put32(h + 8, AC_VERSION);
  ag__put32(h + 12, (uint32_t)(AC_FIXED + AG__ENTRY * T + 4));
  snprintf((char *)h + 16, 32, "%s", ag_version());
  const uint32_t us[4] = {(uint32_t)c->algo, (uint32_t)c->n_hidden, (uint32_t)c->policy_delay,
                          (uint32_t)c->autotune};
  for (int i = 0; i < 4; i++) ag__put32(h + 48 + 4 * i, us[i]);
  for (int i = 0; i < c->n_hidden; i++) ag__put64(h + 64 + 8 * i, (uint64_t)c->hidden[i]);
  const float fs[10] = {c->actor_lr,       c->critic_lr,  c->gamma,        c->tau,        c->alpha,
                        c->target_entropy, c->expl_noise, c->target_noise, c->noise_clip, c->noise_rho};
  for (int i = 0; i < 10; i++) ag__put_f32(h + 128 + 4 * i, fs[i]);
  ag__put32(h + 168, (uint32_t)c->n_step);
  ag__put32(h + 172, c->fused ? 0u : 1u); /* 1: the composed ops asked for */
  const int64_t is[6] = {c->batch_size, c->buffer_size,    c->learning_starts,
                         c->train_freq, c->gradient_steps, c->n_envs};
  for (int i = 0; i < 6; i++) ag__put64(h + 176 + 8 * i, (uint64_t)is[i]);
  ag__put64(h + 224, c->seed);
  const int64_t ks[5] = {a->obs_dim, a->act_dim, a->total_steps, a->updates, a->actor_updates};
  for (int i = 0; i < 5; i++) ag__put64(h + 232 + 8 * i, (uint64_t)ks[i]);
  ag__put64(h + 272, a->host_rng);
  ag__put64(h + 280, ag__rng_seed(a->rng));
  ag__put64(h + 288, ag__rng_seed(a->act_rng));
  ag__put64(h + 296, (uint64_t)a->noise_n);
  ag__put64(h + 304, (uint64_t)a->run_state_n);
  ag__put32(h + 312, (uint32_t)T);
  ag__put_f32(h + 316, aloss);
  for (int64_t i = 0; i < a->act_dim; i++) {
    ag__put_f32(h + 320 + 4 * i, a->low[i]);
    ag__put_f32(h + 576 + 4 * i, a->high[i]);
  }
  ag__entries_put(h + AC_FIXED, ts, T);
  int H = AC_FIXED + AG__ENTRY * T + 4;
  ag__put32(h + H - 4, ag__crc32_add(0, h, (size_t)H - 4));
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
  const int H = AC_FIXED + AG__ENTRY * T + 4;
  const size_t nz = (size_t)ca->noise_n * 4;
  unsigned char *h = ag__calloc(1, (size_t)H), *noise = h ? ag__malloc(nz) : NULL;
  if (!noise) {
    free(h);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  for (int64_t i = 0; i < ca->noise_n; i++) ag__put_f32(noise + 4 * i, ca->noise_z[i]);
  float aloss;
  if (!(s = last_actor_loss(ca, &aloss))) {
    header_put(ca, h, T, ts, aloss);
    const void *sec[2] = {noise, ca->run_state};
    const size_t sec_n[2] = {nz, ca->run_state_n};
    s = ag__agent_file_write(path, fn, h, (size_t)H, ts, T, sec, sec_n, 2, ca->replay);
  }
  free(h);
  free(noise);
  return s;
}

/* ---- load ---- */

/* What a header holds besides its tensor table. */
typedef struct ac_header {
  ag_ac_config c;
  int64_t obs_dim, act_dim, total_steps, updates, actor_updates, noise_n;
  uint64_t host_rng, seeds[2], R;
  float aloss;
  float low[AC_MAX_ACT], high[AC_MAX_ACT];
} ac_header;

static ag_status bad(const char *path, const char *what) { return ag__file_bad(&ac_kind, path, what); }

/* The configuration and counters of a header whose CRC holds, checked. */
static ag_status header_get(const unsigned char *h, const char *path, ac_header *x) {
  static const char fn[] = "ag_ac_load";
  memset(x, 0, sizeof *x);
  ag_ac_config *c = &x->c;
  *c = ag_ac_defaults(AG_AC_SAC);
  uint32_t algo = ag__get32(h + 48), nh = ag__get32(h + 52), delay = ag__get32(h + 56);
  if (algo > 1 || nh < 1 || nh > AG_AC_MAX_HIDDEN || delay > 1000 || ag__get32(h + 60) > 1)
    return bad(path, "algo, n_hidden, policy_delay or autotune out of range");
  c->algo = (ag_ac_algo)algo;
  c->n_hidden = (int)nh;
  c->policy_delay = (int)delay;
  c->autotune = (int)ag__get32(h + 60);
  for (int i = 0; i < AG_AC_MAX_HIDDEN; i++) {
    int64_t v = (int64_t)ag__get64(h + 64 + 8 * i);
    if (i < c->n_hidden && (v < 1 || v > ((int64_t)1 << 24))) return bad(path, "a hidden size out of range");
    if (i >= c->n_hidden && v) return bad(path, "an unused hidden size is not 0");
    if (i < c->n_hidden) c->hidden[i] = v;
  }
  float *fs[10] = {&c->actor_lr,       &c->critic_lr,  &c->gamma,        &c->tau,        &c->alpha,
                   &c->target_entropy, &c->expl_noise, &c->target_noise, &c->noise_clip, &c->noise_rho};
  for (int i = 0; i < 10; i++) *fs[i] = ag__get_f32(h + 128 + 4 * i);
  if (ag__get32(h + 168) > 64 || ag__get32(h + 172) > 1) return bad(path, "n_step or flags out of range");
  c->n_step = (int)ag__get32(h + 168);
  c->fused = ag__get32(h + 172) ? 0 : 1;
  int64_t *is[6] = {&c->batch_size, &c->buffer_size,    &c->learning_starts,
                    &c->train_freq, &c->gradient_steps, &c->n_envs};
  for (int i = 0; i < 6; i++) *is[i] = (int64_t)ag__get64(h + 176 + 8 * i);
  c->seed = ag__get64(h + 224);
  int64_t *ks[5] = {&x->obs_dim, &x->act_dim, &x->total_steps, &x->updates, &x->actor_updates};
  for (int i = 0; i < 5; i++) *ks[i] = (int64_t)ag__get64(h + 232 + 8 * i);
  x->host_rng = ag__get64(h + 272);
  x->seeds[0] = ag__get64(h + 280);
  x->seeds[1] = ag__get64(h + 288);
  x->noise_n = (int64_t)ag__get64(h + 296);
  x->R = ag__get64(h + 304);
  x->aloss = ag__get_f32(h + 316);
  for (int i = 832; i < AC_FIXED; i++)
    if (h[i]) return bad(path, "reserved bytes are not 0");
  ag_status s = ag__ac_check_config(c, fn);
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(AG_ERR_IO, "%s: %s holds a configuration ag_ac_create refuses: %s", fn, path, why);
  }
  if (c->buffer_size > ((int64_t)1 << 40)) return bad(path, "a setting out of range");
  if (x->obs_dim < 1 || x->obs_dim > ((int64_t)1 << 24) || x->act_dim < 1 || x->act_dim > AC_MAX_ACT ||
      x->total_steps < 1)
    return bad(path, "sizes out of range");
  for (int i = 0; i < AC_MAX_ACT; i++) {
    x->low[i] = ag__get_f32(h + 320 + 4 * i);
    x->high[i] = ag__get_f32(h + 576 + 4 * i);
    if (i < x->act_dim && !(isfinite(x->low[i]) && isfinite(x->high[i]) && x->low[i] < x->high[i]))
      return bad(path, "an action's bounds are not finite with low < high");
    if (i >= x->act_dim && (ag__get32(h + 320 + 4 * i) || ag__get32(h + 576 + 4 * i)))
      return bad(path, "an unused bound is not 0");
  }
  /* an actor update comes at every policy_delay-th update */
  if (x->updates < 0 || x->actor_updates != x->updates / c->policy_delay ||
      (x->actor_updates == 0 && !isnan(x->aloss)))
    return bad(path, "the update counters are out of range");
  if (x->noise_n < 0 || x->noise_n % x->act_dim || x->noise_n / x->act_dim > INT32_MAX)
    return bad(path, "the correlated noise's length is not a multiple of act_dim");
  if (x->noise_n && c->noise_rho == 0.0f) return bad(path, "correlated noise without noise_rho");
  if (x->R > AG__MAX_RUN_STATE) return bad(path, "the run state is longer than 2^30 bytes");
  return AG_OK;
}

ag_status ag__ac_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_ac **out);

/* Loads from f's position to its end; the entry of ag_ac_load and of the
 * fuzzer. An agent whose networks and table would take more than max_bytes
 * (0: no limit) is refused with AG_ERR_UNSUPPORTED before it is made. */
ag_status ag__ac_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_ac **out) {
  static const char fn[] = "ag_ac_load";
  uint64_t len = 0;
  unsigned char *h = NULL;
  uint32_t T = 0;
  ag_status s = ag__header_read(ctx, f, path, out, &ac_kind, &len, &h, &T);
  if (s) return s;
  const uint32_t H = ag__get32(h + 12);
  ac_header x;
  s = header_get(h, path, &x);
  /* the file's entries must be those its configuration makes, and the file
   * must hold their bytes, before anything is made */
  uint64_t need = H, params = 0, nz = (uint64_t)x.noise_n * 4;
  int64_t want[AC_MAX_TENSORS][3];
  if (!s && expected_entries(&x.c, x.obs_dim, x.act_dim, want, AC_MAX_TENSORS) != (int)T)
    s = bad(path, "its tensors are not those of the agent its configuration makes");
  if (!s && ag__entries_check(h + AC_FIXED, (const int64_t(*)[3])want, (int)T, &params, &need))
    s = bad(path, "a tensor's shape or dtype is not the one its configuration makes");
  need += ag__parts_bytes(nz) + ag__parts_bytes(x.R);
  if (!s && need > len) s = bad(path, "truncated (shorter than its header says)");
  uint64_t rows = 2 * (uint64_t)x.obs_dim + (uint64_t)x.act_dim + 3;
  if (!s && max_bytes &&
      (params > max_bytes || nz > max_bytes || (uint64_t)x.c.buffer_size * rows * 4 > max_bytes))
    s = ag__fail(AG_ERR_UNSUPPORTED, "%s: the agent of %s is larger than the limit of %zu bytes", fn, path,
                 max_bytes);
  ag_ac *a = NULL;
  if (!s) { /* made with a table of one batch: the file's table replaces it */
    ag_ac_config small = x.c;
    small.buffer_size = x.c.batch_size;
    if ((s = ag_ac_create(ctx, x.obs_dim, x.act_dim, x.low, x.high, x.total_steps, &small, &a))) {
      char why[512];
      snprintf(why, sizeof why, "%s", ag_last_error());
      s = ag__fail(s, "%s: making the agent of %s: %s", fn, path, why);
    }
  }
  ag_tensor *ts[AC_MAX_TENSORS];
  if (!s) {
    int n = ac_tensors(a, ts, AC_MAX_TENSORS);
    if (n != (int)T || !ag__entries_match(h + AC_FIXED, ts, n))
      s = bad(path, "its tensors are not those of the agent its configuration makes");
    else if (ag__rng_seed(a->rng) != x.seeds[0] || ag__rng_seed(a->act_rng) != x.seeds[1])
      s = bad(path, "its random streams' seeds are not those its configuration makes");
  }
  free(h);
  size_t most = s ? 0 : ag__tensors_most(ts, (int)T, (size_t)(x.R > nz ? x.R : nz));
  unsigned char *buf = s ? NULL : ag__malloc(most);
  float *noise = s || !x.noise_n ? NULL : ag__malloc((size_t)nz);
  if (!s && (!buf || (x.noise_n && !noise)))
    s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory (%zu bytes)", fn, most);
  if (!s) s = ag__tensors_read(f, ts, (int)T, buf, fn, path);
  if (!s && !(s = ag__parts_read(f, buf, (size_t)nz, fn, path, "the correlated noise")))
    for (int64_t i = 0; i < x.noise_n; i++) noise[i] = ag__get_f32(buf + 4 * i);
  if (!s && (s = ag__parts_read(f, buf, (size_t)x.R, fn, path, "the run state")) == AG_OK && x.R)
    s = ag_ac_set_run_state(a, buf, (size_t)x.R);
  free(buf);
  ag_replay *r = NULL;
  if (!s) s = ag__agent_table_read(ctx, f, path, max_bytes, &ac_kind, a->replay, x.c.buffer_size, &r);
  if (s) {
    free(noise);
    ag_ac_free(a);
    return s;
  }
  ag_replay_free(a->replay);
  a->replay = r;
  a->cfg.buffer_size = x.c.buffer_size;
  a->updates = x.updates;
  a->actor_updates = x.actor_updates;
  a->host_rng = x.host_rng;
  a->aloss_loaded = x.aloss;
  free(a->noise_z);
  a->noise_z = noise;
  a->noise_n = x.noise_n;
  *out = a;
  return AG_OK;
}

ag_status ag_ac_load(ag_ctx *ctx, const char *path, ag_ac **out) {
  FILE *f = NULL;
  ag_status s = ctx && path && out
                    ? ag__open_read(path, ac_kind.fn, &f)
                    : ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", ac_kind.fn);
  if (!s) {
    s = ag__ac_load_stream(ctx, f, path, 0, out);
    fclose(f);
  }
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
