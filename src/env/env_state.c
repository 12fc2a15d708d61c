/* env_state.c — a built-in environment's state as bytes (ag_env_state_size,
 * ag_env_get_state, ag_env_set_state): the handle's phase, step count and
 * end flags, and the task's double state, in the little-endian layout that
 * agrl/env.h documents. The vector environment embeds the same image once
 * per copy (vec_env.c).
 *
 * An image is checked whole (size, magic, version, task, every field and
 * every double) before anything of the handle changes.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "env/env_internal.h"

#define STATE_MAGIC 0x53454741u /* the bytes "AGES" */
#define STATE_VERSION 1u

enum {
  OFF_MAGIC = 0,
  OFF_VERSION = 4,
  OFF_TASK = 8,
  TASK_LEN = 16, /* the task's short name, NUL-padded */
  OFF_PHASE = 24,
  OFF_TERMINATED = 28,
  OFF_TRUNCATED = 32,
  OFF_DIM = 36,
  OFF_STEPS = 40,
  OFF_DOUBLES = 48
};

/* The task's tag: its short name padded with NULs. */
static void task_tag(const ag__classic *c, unsigned char tag[TASK_LEN]) {
  size_t len = strlen(c->name);
  memset(tag, 0, TASK_LEN);
  memcpy(tag, c->name, len < TASK_LEN ? len : TASK_LEN - 1);
}

/* An image's tag as a printable string (other bytes as '?'). */
typedef struct tag_text {
  char s[TASK_LEN + 1];
} tag_text;
static tag_text tag_printable(const unsigned char *tag) {
  tag_text t;
  int i = 0;
  for (; i < TASK_LEN && tag[i]; i++) t.s[i] = tag[i] >= 0x20 && tag[i] < 0x7f ? (char)tag[i] : '?';
  t.s[i] = '\0';
  return t;
}

size_t ag__env_state_bytes(const ag_env *env) {
  double *s;
  const ag__classic *c = ag__env_classic(env, &s);
  return c ? OFF_DOUBLES + 8 * (size_t)c->state_dim : 0;
}

ag_status ag__env_state_supported(const ag_env *env, const char *fn, int copy) {
  double *s;
  if (ag__env_classic(env, &s)) return AG_OK;
  return ag__fail(AG_ERR_UNSUPPORTED,
                  "%s: \"%s\" is a user environment, whose state is its own; only built-in environments "
                  "have a state image",
                  ag__env_who(fn, copy).s, env->id);
}

void ag__env_state_put(const ag_env *env, unsigned char *p) {
  double *s;
  const ag__classic *c = ag__env_classic(env, &s);
  ag__put32(p + OFF_MAGIC, STATE_MAGIC);
  ag__put32(p + OFF_VERSION, STATE_VERSION);
  task_tag(c, p + OFF_TASK);
  ag__put32(p + OFF_PHASE, (uint32_t)env->phase);
  ag__put32(p + OFF_TERMINATED, (uint32_t)env->ended_terminated);
  ag__put32(p + OFF_TRUNCATED, (uint32_t)env->ended_truncated);
  ag__put32(p + OFF_DIM, (uint32_t)c->state_dim);
  ag__put64(p + OFF_STEPS, (uint64_t)env->steps);
  if (c->own) {
    c->own->put(c, ag__env_own_state(env), p + OFF_DOUBLES);
    return;
  }
  for (int i = 0; i < c->state_dim; i++) ag__put64(p + OFF_DOUBLES + 8 * (size_t)i, ag__double_bits(s[i]));
}

ag_status ag__env_state_check(const ag_env *env, const unsigned char *p, size_t bytes, const char *fn,
                              int copy) {
  double *s;
  const ag__classic *c = ag__env_classic(env, &s);
  const ag__who w = ag__env_who(fn, copy);
  const size_t need = ag__env_state_bytes(env);
  if (bytes < OFF_DOUBLES)
    return ag__fail(AG_ERR_SHAPE, "%s: %zu bytes are too few for a state of \"%s\" (%zu bytes)", w.s, bytes,
                    c->name, need);
  const uint32_t magic = ag__get32(p + OFF_MAGIC), version = ag__get32(p + OFF_VERSION);
  if (magic != STATE_MAGIC)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: the bytes are not an environment state (magic 0x%08x, expected 0x%08x, \"AGES\")",
                    w.s, (unsigned)magic, (unsigned)STATE_MAGIC);
  if (version != STATE_VERSION)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: state layout version %u; this library reads version %u", w.s,
                    (unsigned)version, (unsigned)STATE_VERSION);
  unsigned char tag[TASK_LEN];
  task_tag(c, tag);
  if (memcmp(p + OFF_TASK, tag, TASK_LEN) != 0)
    return ag__fail(AG_ERR_SHAPE, "%s: the state is of task \"%s\", the environment is \"%s\"", w.s,
                    tag_printable(p + OFF_TASK).s, c->name);
  if (bytes != need)
    return ag__fail(AG_ERR_SHAPE, "%s: %zu bytes; a state of \"%s\" is %zu bytes", w.s, bytes, c->name, need);
  const uint32_t dim = ag__get32(p + OFF_DIM);
  if (dim != (uint32_t)c->state_dim)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: state_dim %u; \"%s\" has %d", w.s, (unsigned)dim, c->name,
                    c->state_dim);
  const uint32_t phase = ag__get32(p + OFF_PHASE);
  if (phase > AG__ENV_ENDED)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: phase %u is not 0 (needs reset), 1 (running) or 2 (ended)", w.s,
                    (unsigned)phase);
  const uint32_t term = ag__get32(p + OFF_TERMINATED), trunc = ag__get32(p + OFF_TRUNCATED);
  if (term > 1 || trunc > 1)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: end flags terminated %u, truncated %u must be 0 or 1", w.s,
                    (unsigned)term, (unsigned)trunc);
  const int64_t steps = (int64_t)ag__get64(p + OFF_STEPS);
  const int max = env->spec.max_episode_steps;
  if (steps < 0 || (max > 0 && steps > max))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: step count %lld is negative or beyond max_episode_steps %d", w.s,
                    (long long)steps, max);
  if (phase == AG__ENV_RUNNING && (term || trunc || (max > 0 && steps == max)))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: a running episode at step %lld with end flags %u, %u (it would have ended)", w.s,
                    (long long)steps, (unsigned)term, (unsigned)trunc);
  if (phase == AG__ENV_ENDED && (!(term || trunc) || (int)trunc != (max > 0 && steps == max)))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: an ended episode at step %lld with end flags terminated %u, truncated %u (truncated "
                    "is 1 exactly at step %d, and one flag must be 1)",
                    w.s, (long long)steps, (unsigned)term, (unsigned)trunc, max);
  for (int i = 0; i < c->state_dim; i++) {
    double x = ag__bits_double(ag__get64(p + OFF_DOUBLES + 8 * (size_t)i));
    if (!isfinite(x)) return ag__fail(AG_ERR_INVALID_ARG, "%s: state value %d = %g is not finite", w.s, i, x);
  }
  return c->own ? c->own->check(c, p + OFF_DOUBLES, w.s) : AG_OK;
}

void ag__env_state_load(ag_env *env, const unsigned char *p) {
  double *s;
  const ag__classic *c = ag__env_classic(env, &s);
  if (c->own)
    c->own->load(c, ag__env_own_state(env), p + OFF_DOUBLES);
  else
    for (int i = 0; i < c->state_dim; i++) s[i] = ag__bits_double(ag__get64(p + OFF_DOUBLES + 8 * (size_t)i));
  env->phase = (ag__env_phase)ag__get32(p + OFF_PHASE);
  env->steps = ag__env_state_steps(p);
  env->ended_terminated = (int)ag__get32(p + OFF_TERMINATED);
  env->ended_truncated = (int)ag__get32(p + OFF_TRUNCATED);
}

ag__env_phase ag__env_state_phase(const unsigned char *p) { return (ag__env_phase)ag__get32(p + OFF_PHASE); }

int64_t ag__env_state_steps(const unsigned char *p) { return (int64_t)ag__get64(p + OFF_STEPS); }

ag_status ag_env_state_size(const ag_env *env, size_t *bytes) {
  static const char fn[] = "ag_env_state_size";
  if (!env) return ag__fail(AG_ERR_INVALID_ARG, "%s: env is NULL", fn);
  if (!bytes) return ag__fail(AG_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
  ag_status st = ag__env_state_supported(env, fn, -1);
  if (st != AG_OK) return st;
  *bytes = ag__env_state_bytes(env);
  return AG_OK;
}

ag_status ag_env_get_state(const ag_env *env, void *buf, size_t bytes) {
  static const char fn[] = "ag_env_get_state";
  if (!env) return ag__fail(AG_ERR_INVALID_ARG, "%s: env is NULL", fn);
  if (!buf) return ag__fail(AG_ERR_INVALID_ARG, "%s: buf is NULL", fn);
  ag_status st = ag__env_state_supported(env, fn, -1);
  if (st != AG_OK) return st;
  const size_t need = ag__env_state_bytes(env);
  if (bytes < need)
    return ag__fail(AG_ERR_SHAPE, "%s: buf holds %zu bytes; the state of \"%s\" is %zu (ag_env_state_size)",
                    fn, bytes, env->id, need);
  ag__env_state_put(env, buf);
  return AG_OK;
}

ag_status ag_env_set_state(ag_env *env, const void *buf, size_t bytes) {
  static const char fn[] = "ag_env_set_state";
  if (!env) return ag__fail(AG_ERR_INVALID_ARG, "%s: env is NULL", fn);
  if (!buf) return ag__fail(AG_ERR_INVALID_ARG, "%s: buf is NULL", fn);
  ag_status st = ag__env_state_supported(env, fn, -1);
  if (st == AG_OK) st = ag__env_state_check(env, buf, bytes, fn, -1);
  if (st == AG_OK) ag__env_state_load(env, buf);
  return st;
}
