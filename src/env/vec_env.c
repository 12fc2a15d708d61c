/* vec_env.c — N environments stepped together with same-step autoreset
 * (Gymnasium's vector autoreset mode "same-step"): when a copy's episode
 * ends, its final observation goes to final_obs and the copy starts its next
 * episode at once, seeded from its own sequence
 * ag_env_derive_seed(ag_env_derive_seed(seed, i), k). Per-copy episode
 * returns and lengths are kept for logging.
 *
 * Every argument and every copy's action are checked before any copy steps;
 * the step itself allocates nothing. The vector's state image (for
 * checkpoints) holds these counters per copy and each copy's own image
 * (env_state.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "env/env_internal.h"

struct ag_vec_env {
  int n;
  int started;       /* reset at least once, and no user function failed since */
  ag_env **envs;     /* owned */
  uint64_t *seeds;   /* per copy: ag_env_derive_seed(seed, i) */
  uint64_t *episode; /* per copy: index k of the next episode to start */
  double *ret;       /* per copy: return of the episode in progress */
  int64_t *len;      /* per copy: steps of the episode in progress */
  ag_episode_info *last;
};

/* Frees the vector's arrays and the vector (not its environments). */
static void free_arrays(ag_vec_env *v) {
  if (!v) return;
  free(v->envs);
  free(v->seeds);
  free(v->episode);
  free(v->ret);
  free(v->len);
  free(v->last);
  free(v);
}

/* Allocates a vector around envs (taken over on success). */
static ag_status vec_new(ag_env *const *envs, int n, uint64_t seed, const char *fn, ag_vec_env **out) {
  ag_vec_env *v = ag__calloc(1, sizeof *v);
  size_t un = (size_t)n;
  if (v) {
    v->envs = ag__malloc(un * sizeof *v->envs);
    v->seeds = ag__malloc(un * sizeof *v->seeds);
    v->episode = ag__calloc(un, sizeof *v->episode);
    v->ret = ag__calloc(un, sizeof *v->ret);
    v->len = ag__calloc(un, sizeof *v->len);
    v->last = ag__calloc(un, sizeof *v->last);
  }
  if (!v || !v->envs || !v->seeds || !v->episode || !v->ret || !v->len || !v->last) {
    free_arrays(v);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory for %d environments", fn, n);
  }
  v->n = n;
  for (int i = 0; i < n; i++) {
    v->envs[i] = envs[i];
    v->seeds[i] = ag_env_derive_seed(seed, (uint64_t)i);
  }
  *out = v;
  return AG_OK;
}

ag_status ag_vec_env_create(const char *name, int n, uint64_t seed, ag_vec_env **out) {
  static const char fn[] = "ag_vec_env_create";
  if (!name) return ag__fail(AG_ERR_INVALID_ARG, "%s: name is NULL", fn);
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  if (n < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %d copies must be positive", fn, n);
  const ag__classic *c = ag__classic_find(name);
  if (!c) {
    char known[1024];
    ag__classic_names(known, sizeof known);
    return ag__fail(AG_ERR_INVALID_ARG, "%s: unknown environment \"%.64s\"; known: %s", fn, name, known);
  }
  ag_env **envs = ag__calloc((size_t)n, sizeof *envs);
  if (!envs) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory for %d environments", fn, n);
  ag_status st = AG_OK;
  for (int i = 0; i < n && st == AG_OK; i++) st = ag__classic_create(c, fn, &envs[i]);
  if (st == AG_OK) st = vec_new(envs, n, seed, fn, out);
  if (st != AG_OK)
    for (int i = 0; i < n; i++) ag_env_free(envs[i]);
  free(envs);
  return st;
}

ag_status ag_vec_env_create_from(ag_env *const *envs, int n, uint64_t seed, ag_vec_env **out) {
  static const char fn[] = "ag_vec_env_create_from";
  if (!envs) return ag__fail(AG_ERR_INVALID_ARG, "%s: envs is NULL", fn);
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  if (n < 1) return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %d copies must be positive", fn, n);
  for (int i = 0; i < n; i++) {
    if (!envs[i]) return ag__fail(AG_ERR_INVALID_ARG, "%s: envs[%d] is NULL", fn, i);
    for (int j = 0; j < i; j++)
      if (envs[j] == envs[i])
        return ag__fail(AG_ERR_INVALID_ARG, "%s: envs[%d] is envs[%d]; each copy needs its own environment",
                        fn, i, j);
    const ag_env_spec *a = &envs[0]->spec, *b = &envs[i]->spec;
    const char *field = a->obs_dim != b->obs_dim       ? "obs_dim"
                        : a->n_actions != b->n_actions ? "n_actions"
                        : a->act_dim != b->act_dim     ? "act_dim"
                                                       : NULL;
    if (field)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: envs[%d] (\"%s\") differs from envs[0] (\"%s\") in %s", fn, i,
                      b->id, a->id, field);
  }
  return vec_new(envs, n, seed, fn, out);
}

void ag_vec_env_free(ag_vec_env *v) {
  if (!v) return;
  for (int i = 0; i < v->n; i++) ag_env_free(v->envs[i]);
  free_arrays(v);
}

int ag_vec_env_size(const ag_vec_env *v) { return v ? v->n : 0; }

const ag_env_spec *ag_vec_env_get_spec(const ag_vec_env *v) { return v ? &v->envs[0]->spec : NULL; }

/* Starts copy i's next episode; its start observation is in envs[i]->scratch. */
static ag_status start_episode(ag_vec_env *v, int i, const char *fn) {
  ag_status st = ag__env_reset_checked(v->envs[i], ag_env_derive_seed(v->seeds[i], v->episode[i]), fn, i);
  if (st != AG_OK) return st;
  v->episode[i]++;
  v->ret[i] = 0.0;
  v->len[i] = 0;
  return AG_OK;
}

ag_status ag_vec_env_reset(ag_vec_env *v, float *obs) {
  static const char fn[] = "ag_vec_env_reset";
  if (!v) return ag__fail(AG_ERR_INVALID_ARG, "%s: v is NULL", fn);
  if (!obs) return ag__fail(AG_ERR_INVALID_ARG, "%s: obs is NULL", fn);
  const size_t od = (size_t)v->envs[0]->spec.obs_dim;
  for (int i = 0; i < v->n; i++) {
    ag_status st = start_episode(v, i, fn);
    if (st != AG_OK) {
      v->started = 0;
      return st;
    }
    memcpy(obs + (size_t)i * od, v->envs[i]->scratch, od * sizeof *obs);
  }
  v->started = 1;
  return AG_OK;
}

ag_status ag_vec_env_step(ag_vec_env *v, const float *actions, float *obs, float *rewards, int *terminated,
                          int *truncated, float *final_obs) {
  static const char fn[] = "ag_vec_env_step";
  if (!v) return ag__fail(AG_ERR_INVALID_ARG, "%s: v is NULL", fn);
  if (!actions) return ag__fail(AG_ERR_INVALID_ARG, "%s: actions is NULL", fn);
  if (!obs) return ag__fail(AG_ERR_INVALID_ARG, "%s: obs is NULL", fn);
  if (!rewards) return ag__fail(AG_ERR_INVALID_ARG, "%s: rewards is NULL", fn);
  if (!terminated) return ag__fail(AG_ERR_INVALID_ARG, "%s: terminated is NULL", fn);
  if (!truncated) return ag__fail(AG_ERR_INVALID_ARG, "%s: truncated is NULL", fn);
  if (!v->started)
    return ag__fail(AG_ERR_STATE, "%s: the vector has not been reset; call ag_vec_env_reset first", fn);
  const ag_env_spec *spec = &v->envs[0]->spec;
  const size_t od = (size_t)spec->obs_dim;
  const size_t aw = spec->n_actions > 0 ? 1u : (size_t)spec->act_dim;
  for (int i = 0; i < v->n; i++) {
    ag_status st = ag__env_check_phase(v->envs[i], fn, i);
    if (st == AG_OK) st = ag__env_check_action(spec, actions + (size_t)i * aw, fn, i);
    if (st != AG_OK) return st;
  }
  for (int i = 0; i < v->n; i++) {
    ag_env *e = v->envs[i];
    float r;
    int term, trunc;
    ag_status st = ag__env_step_checked(e, actions + (size_t)i * aw, &r, &term, &trunc, fn, i);
    if (st != AG_OK) {
      v->started = 0;
      return st;
    }
    v->ret[i] += (double)r;
    v->len[i]++;
    rewards[i] = r;
    terminated[i] = term;
    truncated[i] = trunc;
    if (final_obs) memcpy(final_obs + (size_t)i * od, e->scratch, od * sizeof *final_obs);
    if (term || trunc) {
      v->last[i].ret = v->ret[i];
      v->last[i].length = v->len[i];
      v->last[i].terminated = term;
      v->last[i].truncated = trunc;
      v->last[i].episodes++;
      st = start_episode(v, i, fn);
      if (st != AG_OK) {
        v->started = 0;
        return st;
      }
    }
    memcpy(obs + (size_t)i * od, e->scratch, od * sizeof *obs);
  }
  return AG_OK;
}

ag_status ag_vec_env_last_episode(const ag_vec_env *v, int i, ag_episode_info *out) {
  static const char fn[] = "ag_vec_env_last_episode";
  if (!v) return ag__fail(AG_ERR_INVALID_ARG, "%s: v is NULL", fn);
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  if (i < 0 || i >= v->n)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: copy %d is outside 0..%d", fn, i, v->n - 1);
  *out = v->last[i];
  return AG_OK;
}

/* ---- state images (layout in agrl/env.h) ---- */

#define VEC_MAGIC 0x53564741u /* the bytes "AGVS" */
#define VEC_VERSION 1u

enum {
  VEC_HEAD = 16, /* magic, version, n, started */
  /* per copy: seed, episode, ret, len, last.ret, last.length, last.episodes,
   * last.terminated, last.truncated; then the copy's environment image */
  COPY_HEAD = 64
};

/* The image's size; AG_ERR_UNSUPPORTED for a copy that is a user
 * environment. It cannot overflow: the image is smaller than the memory the
 * copies' handles already occupy. */
static ag_status vec_state_bytes(const ag_vec_env *v, const char *fn, size_t *out) {
  size_t total = VEC_HEAD;
  for (int i = 0; i < v->n; i++) {
    ag_status st = ag__env_state_supported(v->envs[i], fn, i);
    if (st != AG_OK) return st;
    total += COPY_HEAD + ag__env_state_bytes(v->envs[i]);
  }
  *out = total;
  return AG_OK;
}

ag_status ag_vec_env_state_size(const ag_vec_env *v, size_t *bytes) {
  static const char fn[] = "ag_vec_env_state_size";
  if (!v) return ag__fail(AG_ERR_INVALID_ARG, "%s: v is NULL", fn);
  if (!bytes) return ag__fail(AG_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
  return vec_state_bytes(v, fn, bytes);
}

/* The checks that get and set share: v and buf set, no user copy; the image's size in *need. */
static ag_status state_args(const ag_vec_env *v, const void *buf, const char *fn, size_t *need) {
  if (!v) return ag__fail(AG_ERR_INVALID_ARG, "%s: v is NULL", fn);
  if (!buf) return ag__fail(AG_ERR_INVALID_ARG, "%s: buf is NULL", fn);
  return vec_state_bytes(v, fn, need);
}

ag_status ag_vec_env_get_state(const ag_vec_env *v, void *buf, size_t bytes) {
  static const char fn[] = "ag_vec_env_get_state";
  size_t need = 0;
  ag_status st = state_args(v, buf, fn, &need);
  if (st != AG_OK) return st;
  if (bytes < need)
    return ag__fail(AG_ERR_SHAPE,
                    "%s: buf holds %zu bytes; the state of %d copies is %zu (ag_vec_env_state_size)", fn,
                    bytes, v->n, need);
  unsigned char *p = buf;
  ag__put32(p, VEC_MAGIC);
  ag__put32(p + 4, VEC_VERSION);
  ag__put32(p + 8, (uint32_t)v->n);
  ag__put32(p + 12, (uint32_t)v->started);
  p += VEC_HEAD;
  for (int i = 0; i < v->n; i++) {
    const ag_episode_info *last = &v->last[i];
    ag__put64(p, v->seeds[i]);
    ag__put64(p + 8, v->episode[i]);
    ag__put64(p + 16, ag__double_bits(v->ret[i]));
    ag__put64(p + 24, (uint64_t)v->len[i]);
    ag__put64(p + 32, ag__double_bits(last->ret));
    ag__put64(p + 40, (uint64_t)last->length);
    ag__put64(p + 48, (uint64_t)last->episodes);
    ag__put32(p + 56, (uint32_t)last->terminated);
    ag__put32(p + 60, (uint32_t)last->truncated);
    ag__env_state_put(v->envs[i], p + COPY_HEAD);
    p += COPY_HEAD + ag__env_state_bytes(v->envs[i]);
  }
  return AG_OK;
}

/* Checks copy i's part of an image (at p) for v; `started` is the image's flag. */
static ag_status check_copy(const ag_vec_env *v, int i, const unsigned char *p, int started, const char *fn) {
  const ag_env *e = v->envs[i];
  const size_t es = ag__env_state_bytes(e);
  ag_status st = ag__env_state_check(e, p + COPY_HEAD, es, fn, i);
  if (st != AG_OK) return st;
  const ag__who w = ag__env_who(fn, i);
  const uint64_t episode = ag__get64(p + 8);
  const double ret = ag__bits_double(ag__get64(p + 16)), last_ret = ag__bits_double(ag__get64(p + 32));
  const int64_t len = (int64_t)ag__get64(p + 24), last_len = (int64_t)ag__get64(p + 40);
  const int64_t done = (int64_t)ag__get64(p + 48);
  const uint32_t term = ag__get32(p + 56), trunc = ag__get32(p + 60);
  const int max = e->spec.max_episode_steps;
  if (!isfinite(ret) || !isfinite(last_ret))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: episode return %g or last return %g is not finite", w.s, ret,
                    last_ret);
  if (len < 0 || (max > 0 && len > max))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: episode length %lld is negative or beyond max_episode_steps %d",
                    w.s, (long long)len, max);
  if (done < 0 || (uint64_t)done > episode || (started && (uint64_t)done >= episode))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: %lld finished episodes do not fit %llu started ones (the vector is %s)", w.s,
                    (long long)done, (unsigned long long)episode, started ? "running" : "not reset");
  if (done == 0 && (last_ret != 0.0 || last_len != 0 || term || trunc))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: no finished episode, yet the last episode's info is not zero",
                    w.s);
  if (done > 0 && (term > 1 || trunc > 1 || !(term || trunc) || last_len < 1 || (max > 0 && last_len > max) ||
                   (int)trunc != (max > 0 && last_len == max)))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: the last episode's length %lld and end flags terminated %u, truncated %u do not fit "
                    "(one flag 1, truncated exactly at step %d)",
                    w.s, (long long)last_len, (unsigned)term, (unsigned)trunc, max);
  if (started &&
      (ag__env_state_phase(p + COPY_HEAD) != AG__ENV_RUNNING || ag__env_state_steps(p + COPY_HEAD) != len))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: in a running vector the copy must be running at its episode length %lld (phase %d, "
                    "step %lld)",
                    w.s, (long long)len, (int)ag__env_state_phase(p + COPY_HEAD),
                    (long long)ag__env_state_steps(p + COPY_HEAD));
  return AG_OK;
}

ag_status ag_vec_env_set_state(ag_vec_env *v, const void *buf, size_t bytes) {
  static const char fn[] = "ag_vec_env_set_state";
  size_t need = 0;
  ag_status st = state_args(v, buf, fn, &need);
  if (st != AG_OK) return st;
  const unsigned char *p = buf;
  if (bytes < VEC_HEAD)
    return ag__fail(AG_ERR_SHAPE, "%s: %zu bytes are too few for the state of %d copies (%zu bytes)", fn,
                    bytes, v->n, need);
  const uint32_t magic = ag__get32(p), version = ag__get32(p + 4), n = ag__get32(p + 8),
                 started = ag__get32(p + 12);
  if (magic != VEC_MAGIC)
    return ag__fail(
        AG_ERR_INVALID_ARG,
        "%s: the bytes are not a vector environment state (magic 0x%08x, expected 0x%08x, \"AGVS\")", fn,
        (unsigned)magic, (unsigned)VEC_MAGIC);
  if (version != VEC_VERSION)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: state layout version %u; this library reads version %u", fn,
                    (unsigned)version, (unsigned)VEC_VERSION);
  if (n != (uint32_t)v->n)
    return ag__fail(AG_ERR_SHAPE, "%s: the state is of %u copies, the vector has %d", fn, (unsigned)n, v->n);
  if (bytes != need)
    return ag__fail(AG_ERR_SHAPE, "%s: %zu bytes; the state of these %d copies is %zu bytes", fn, bytes, v->n,
                    need);
  if (started > 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: started flag %u must be 0 or 1", fn, (unsigned)started);
  const unsigned char *q = p + VEC_HEAD;
  for (int i = 0; i < v->n; i++) {
    st = check_copy(v, i, q, (int)started, fn);
    if (st != AG_OK) return st;
    q += COPY_HEAD + ag__env_state_bytes(v->envs[i]);
  }
  v->started = (int)started;
  q = p + VEC_HEAD;
  for (int i = 0; i < v->n; i++) {
    ag_episode_info *last = &v->last[i];
    v->seeds[i] = ag__get64(q);
    v->episode[i] = ag__get64(q + 8);
    v->ret[i] = ag__bits_double(ag__get64(q + 16));
    v->len[i] = (int64_t)ag__get64(q + 24);
    last->ret = ag__bits_double(ag__get64(q + 32));
    last->length = (int64_t)ag__get64(q + 40);
    last->episodes = (int64_t)ag__get64(q + 48);
    last->terminated = (int)ag__get32(q + 56);
    last->truncated = (int)ag__get32(q + 60);
    ag__env_state_load(v->envs[i], q + COPY_HEAD);
    q += COPY_HEAD + ag__env_state_bytes(v->envs[i]);
  }
  return AG_OK;
}
