/* test_env_state.c — an environment's and a vector's state images
 * (ag_env_get_state / ag_env_set_state, ag_vec_env_get_state /
 * ag_vec_env_set_state) on the host.
 *
 * References: an uninterrupted run of the same environment under the same
 * script of actions and resets, every output recorded; the byte layout
 * written out by hand from agrl/env.h; untouched twins, stepped beside an
 * environment that refused an image, for "nothing changes". Run as
 * `test_env_state cpu`.
 */
#include <math.h>

#include "agt.h"
#include "agrl/env.h"
#include "env/env_internal.h"

#define MAX_OBS 1000 /* MinAtar's Seaquest: 10 x 10 x 10 */
#define N_COPIES 3
#define TICKS 2100 /* every task ends two episodes (mountaincar_continuous's random ones run to 999) */

/* ---- helpers ---- */

static ag_env *make_env(const char *name) {
  ag_env *e = NULL;
  agt_ok(ag_env_create(name, &e));
  return e;
}

static ag_vec_env *make_vec(const char *name, int n, uint64_t seed) {
  ag_vec_env *v = NULL;
  agt_ok(ag_vec_env_create(name, n, seed, &v));
  return v;
}

/* The size of e's state image, or of v's when e is NULL. */
static size_t image_bytes(const ag_env *e, const ag_vec_env *v) {
  size_t b = 0;
  agt_ok(e ? ag_env_state_size(e, &b) : ag_vec_env_state_size(v, &b));
  return b;
}

/* A new malloc'd image of e's state, or of v's when e is NULL. */
static unsigned char *image(const ag_env *e, const ag_vec_env *v) {
  size_t b = image_bytes(e, v);
  unsigned char *p = malloc(b);
  assert_non_null(p);
  agt_ok(e ? ag_env_get_state(e, p, b) : ag_vec_env_get_state(v, p, b));
  return p;
}

static size_t env_bytes(const ag_env *e) { return image_bytes(e, NULL); }
static size_t vec_bytes(const ag_vec_env *v) { return image_bytes(NULL, v); }
static unsigned char *env_image(const ag_env *e) { return image(e, NULL); }
static unsigned char *vec_image(const ag_vec_env *v) { return image(NULL, v); }

/* The action of tick t for a spec: an index, or a torque beyond the clip range at times. */
static float random_action(const ag_env_spec *spec, agt_rng *g) {
  return spec->n_actions > 0 ? (float)agt_below(g, spec->n_actions) : agt_uniform(g, -3.0f, 3.0f);
}

/* Little-endian fields written by hand, for the layout test. */
static void le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t f64_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* ---- one environment under a script of resets and steps ---- */

/* What tick t of a script did and gave. Zeroed before it is filled, so records compare with memcmp. */
typedef struct tick {
  int reset; /* 1: reset with seed 1000 + t; 0: step with the tick's action */
  ag_status st;
  float obs[MAX_OBS];
  float reward;
  int term, trunc;
} tick;

/* Runs tick t (its kind given in rec->reset) on e, filling rec. */
static void run_tick(ag_env *e, int t, float action, tick *rec) {
  if (rec->reset) {
    rec->st = ag_env_reset(e, 1000u + (uint64_t)t, rec->obs);
  } else {
    rec->st = ag_env_step(e, &action, rec->obs, &rec->reward, &rec->term, &rec->trunc);
  }
  assert_int_equal(rec->st, AG_OK);
}

/* For every built-in task: an uninterrupted run of TICKS ticks (a reset at
 * tick 0 and after every episode end, random actions otherwise) keeps the
 * image before every tick; a fresh environment given the image of tick s
 * replays ticks s.. bit for bit, from states before the first reset, in
 * mid-episode, right after an episode ended and right after a reset. */
static void restored_env_replays_uninterrupted_run_bit_for_bit(void **state) {
  (void)state;
  for (int k = 0; ag_env_builtin_name(k); k++) {
    const char *name = ag_env_builtin_name(k);
    if (strcmp(name, "freeway-minatar") == 0) continue; /* 2501-step episodes, beyond TICKS: test_minatar.c */
    ag_env *a = make_env(name);
    const ag_env_spec *spec = ag_env_get_spec(a);
    const size_t sb = env_bytes(a);
    unsigned char *images = malloc((size_t)TICKS * sb);
    tick *ref = calloc(TICKS, sizeof *ref);
    float *acts = malloc(TICKS * sizeof *acts);
    assert_true(images && ref && acts);
    agt_rng g = {0x5eed + (uint64_t)k};
    int ends = 0, first_end = -1;
    for (int t = 0; t < TICKS; t++) {
      acts[t] = random_action(spec, &g);
      agt_ok(ag_env_get_state(a, images + (size_t)t * sb, sb));
      ref[t].reset = t == 0 || ref[t - 1].term || ref[t - 1].trunc;
      if (ref[t].reset && t > 0) {
        ends++;
        if (first_end < 0) first_end = t;
      }
      run_tick(a, t, acts[t], &ref[t]);
    }
    assert_true(ends >= 2);
    /* restore points: never reset, just reset, mid-episode, right after the
     * first end (phase "ended"), after its reset, later ones */
    const int points[] = {0, 1, 2, 37, first_end, first_end + 1, first_end + 2, TICKS / 2, TICKS - 1};
    for (size_t p = 0; p < sizeof points / sizeof points[0]; p++) {
      const int s = points[p];
      const unsigned char *img = images + (size_t)s * sb;
      ag_env *b = make_env(name);
      agt_ok(ag_env_set_state(b, img, sb));
      unsigned char *back = env_image(b);
      assert_memory_equal(back, img, sb); /* the image round-trips */
      free(back);
      if (ref[s].reset) { /* before a reset the restored one refuses to step, as the original did */
        float o[MAX_OBS], r;
        int te, tr;
        agt_err(ag_env_step(b, &acts[s], o, &r, &te, &tr), AG_ERR_STATE, s == 0 ? "not been reset" : "ended");
      }
      for (int t = s; t < TICKS; t++) {
        tick rec;
        memset(&rec, 0, sizeof rec);
        rec.reset = ref[t].reset;
        run_tick(b, t, acts[t], &rec);
        if (memcmp(&rec, &ref[t], sizeof rec) != 0)
          fail_msg("%s restored at tick %d differs from the uninterrupted run at tick %d", name, s, t);
      }
      ag_env_free(b);
    }
    free(images);
    free(ref);
    free(acts);
    ag_env_free(a);
  }
}

/* ---- a vector ---- */

typedef struct vtick {
  float obs[N_COPIES * MAX_OBS], fin[N_COPIES * MAX_OBS], rew[N_COPIES];
  int term[N_COPIES], trunc[N_COPIES];
  ag_episode_info info[N_COPIES];
} vtick;

/* Tick t of a vector: reset at 0, else a step with acts[t]; fills rec (zeroed here). */
static void run_vtick(ag_vec_env *v, int t, const float *acts, vtick *rec) {
  memset(rec, 0, sizeof *rec);
  if (t == 0)
    agt_ok(ag_vec_env_reset(v, rec->obs));
  else
    agt_ok(ag_vec_env_step(v, acts, rec->obs, rec->rew, rec->term, rec->trunc, rec->fin));
  for (int i = 0; i < ag_vec_env_size(v); i++) agt_ok(ag_vec_env_last_episode(v, i, &rec->info[i]));
}

/* The same for a vector of N_COPIES: obs, rewards, flags, final_obs and every
 * copy's last-episode info replay bit for bit from a fresh vector given the
 * image of tick s, through autoresets (each copy's seed sequence continues),
 * and from a vector created with another seed too (the image carries the
 * seeds). */
static void restored_vec_env_replays_uninterrupted_run_bit_for_bit(void **state) {
  (void)state;
  const uint64_t seed = 42;
  for (int k = 0; ag_env_builtin_name(k); k++) {
    const char *name = ag_env_builtin_name(k);
    if (strcmp(name, "freeway-minatar") == 0) continue; /* 2501-step episodes, beyond TICKS: test_minatar.c */
    ag_vec_env *a = make_vec(name, N_COPIES, seed);
    const ag_env_spec *spec = ag_vec_env_get_spec(a);
    const size_t sb = vec_bytes(a);
    unsigned char *images = malloc((size_t)TICKS * sb);
    vtick *ref = malloc(TICKS * sizeof *ref);
    float(*acts)[N_COPIES] = malloc(TICKS * sizeof *acts);
    assert_true(images && ref && acts);
    agt_rng g = {0xabc + (uint64_t)k};
    int first_end = -1;
    for (int t = 0; t < TICKS; t++) {
      for (int i = 0; i < N_COPIES; i++) acts[t][i] = random_action(spec, &g);
      agt_ok(ag_vec_env_get_state(a, images + (size_t)t * sb, sb));
      run_vtick(a, t, acts[t], &ref[t]);
      for (int i = 0; i < N_COPIES; i++)
        if (t > 0 && first_end < 0 && (ref[t].term[i] || ref[t].trunc[i])) first_end = t;
    }
    assert_true(first_end > 0 && first_end + 2 < TICKS);
    for (int i = 0; i < N_COPIES; i++) assert_true(ref[TICKS - 1].info[i].episodes >= 2);
    /* never reset, just reset, mid-episode, right after an autoreset, later */
    const int points[] = {0, 1, 2, 29, first_end + 1, first_end + 2, TICKS / 2, TICKS - 1};
    for (size_t p = 0; p < sizeof points / sizeof points[0]; p++) {
      const int s = points[p];
      const unsigned char *img = images + (size_t)s * sb;
      for (int other_seed = 0; other_seed < 2; other_seed++) {
        if (other_seed && s != first_end + 1) continue;
        ag_vec_env *b = make_vec(name, N_COPIES, other_seed ? seed + 1 : seed);
        agt_ok(ag_vec_env_set_state(b, img, sb));
        unsigned char *back = vec_image(b);
        assert_memory_equal(back, img, sb);
        free(back);
        for (int t = s; t < TICKS; t++) {
          vtick rec;
          run_vtick(b, t, acts[t], &rec);
          if (memcmp(&rec, &ref[t], sizeof rec) != 0)
            fail_msg("%s vector restored at tick %d (seed %s) differs from the uninterrupted run at tick %d",
                     name, s, other_seed ? "other" : "same", t);
        }
        ag_vec_env_free(b);
      }
    }
    free(images);
    free(ref);
    free(acts);
    ag_vec_env_free(a);
  }
}

/* ---- the documented layout ---- */

/* The image of an environment, written byte by byte from agrl/env.h's table. */
static void expected_env_image(unsigned char *p, const char *task, uint32_t phase, uint32_t term,
                               uint32_t trunc, int64_t steps, const double *s, int d) {
  le32(p, 0x53454741u);
  assert_memory_equal(p, "AGES", 4);
  le32(p + 4, 1);
  memset(p + 8, 0, 16);
  memcpy(p + 8, task, strlen(task));
  le32(p + 24, phase);
  le32(p + 28, term);
  le32(p + 32, trunc);
  le32(p + 36, (uint32_t)d);
  le64(p + 40, (uint64_t)steps);
  for (int i = 0; i < d && i < AG__MAX_STATE; i++) le64(p + 48 + 8 * i, f64_bits(s[i]));
}

static void env_image_follows_documented_layout(void **state) {
  (void)state;
  ag_env *e = make_env("CartPole-v1");
  unsigned char want[48 + 8 * AG__MAX_STATE], *got;
  double s[4] = {0};
  int d = 0;
  assert_int_equal(env_bytes(e), 80);
  expected_env_image(want, "cartpole", 0, 0, 0, 0, s, 4); /* a fresh handle: never reset, zero state */
  got = env_image(e);
  assert_memory_equal(got, want, 80);
  free(got);

  float obs[MAX_OBS], r;
  int te = 0, tr = 0, steps = 0;
  agt_ok(ag_env_reset(e, 5, obs));
  for (; steps < 3; steps++) agt_ok(ag_env_step(e, &(float){1.0f}, obs, &r, &te, &tr));
  agt_ok(ag__env_get_state(e, s, &d));
  assert_int_equal(d, 4);
  expected_env_image(want, "cartpole", 1, 0, 0, 3, s, 4);
  got = env_image(e);
  assert_memory_equal(got, want, 80);
  free(got);

  while (!te && !tr) {
    agt_ok(ag_env_step(e, &(float){1.0f}, obs, &r, &te, &tr));
    steps++;
  }
  agt_ok(ag__env_get_state(e, s, &d));
  expected_env_image(want, "cartpole", 2, (uint32_t)te, (uint32_t)tr, steps, s, 4);
  got = env_image(e);
  assert_memory_equal(got, want, 80);
  free(got);

  /* a larger buffer: exactly the image is written, the rest untouched */
  unsigned char big[100];
  memset(big, 0xab, sizeof big);
  agt_ok(ag_env_get_state(e, big, sizeof big));
  assert_memory_equal(big, want, 80);
  for (int i = 80; i < 100; i++) assert_int_equal(big[i], 0xab);
  ag_env_free(e);

  /* the other tasks: their short names and d */
  const char *names[] = {"acrobot", "mountaincar", "pendulum"};
  const int dims[] = {4, 2, 2};
  for (int k = 0; k < 3; k++) {
    e = make_env(names[k]);
    agt_ok(ag_env_reset(e, 11, obs));
    agt_ok(ag__env_get_state(e, s, &d));
    assert_int_equal(d, dims[k]);
    assert_int_equal(env_bytes(e), 48 + 8 * (size_t)d);
    expected_env_image(want, names[k], 1, 0, 0, 0, s, d);
    got = env_image(e);
    assert_memory_equal(got, want, 48 + 8 * (size_t)d);
    free(got);
    ag_env_free(e);
  }
}

static void vec_env_image_follows_documented_layout(void **state) {
  (void)state;
  const uint64_t seed = 9;
  ag_vec_env *v = make_vec("cartpole", N_COPIES, seed);
  const size_t part = 64 + 80;
  assert_int_equal(vec_bytes(v), 16 + N_COPIES * part);
  unsigned char *got = vec_image(v);
  assert_memory_equal(got, "AGVS", 4);
  unsigned char head[16];
  le32(head, 0x53564741u);
  le32(head + 4, 1);
  le32(head + 8, N_COPIES);
  le32(head + 12, 0);
  assert_memory_equal(got, head, 16);
  free(got);

  /* after a reset and steps, beside single environments stepped alike */
  float obs[N_COPIES * MAX_OBS], fin[N_COPIES * MAX_OBS], rew[N_COPIES], acts[N_COPIES] = {1, 0, 1};
  int term[N_COPIES], trunc[N_COPIES];
  ag_env *single[N_COPIES];
  int64_t len[N_COPIES] = {0}, done[N_COPIES] = {0}, last_len[N_COPIES] = {0};
  double ret[N_COPIES] = {0}, last_ret[N_COPIES] = {0};
  int last_term[N_COPIES] = {0}, last_trunc[N_COPIES] = {0};
  agt_ok(ag_vec_env_reset(v, obs));
  for (int i = 0; i < N_COPIES; i++) {
    single[i] = make_env("cartpole");
    agt_ok(ag_env_reset(single[i], ag_env_derive_seed(ag_env_derive_seed(seed, (uint64_t)i), 0), obs));
  }
  for (int t = 0; t < 30; t++) { /* always pushing one way: episodes end (terminated) within 30 steps */
    agt_ok(ag_vec_env_step(v, acts, obs, rew, term, trunc, fin));
    for (int i = 0; i < N_COPIES; i++) {
      float o[4], r;
      int te, tr;
      agt_ok(ag_env_step(single[i], &acts[i], o, &r, &te, &tr));
      ret[i] += (double)r;
      len[i]++;
      if (te || tr) {
        done[i]++;
        last_ret[i] = ret[i];
        last_len[i] = len[i];
        last_term[i] = te;
        last_trunc[i] = tr;
        ret[i] = 0;
        len[i] = 0;
        agt_ok(ag_env_reset(single[i],
                            ag_env_derive_seed(ag_env_derive_seed(seed, (uint64_t)i), (uint64_t)done[i]), o));
      }
    }
  }
  got = vec_image(v);
  le32(head + 12, 1);
  assert_memory_equal(got, head, 16);
  for (int i = 0; i < N_COPIES; i++) {
    assert_true(done[i] >= 1);
    unsigned char want[64];
    le64(want, ag_env_derive_seed(seed, (uint64_t)i));
    le64(want + 8, (uint64_t)done[i] + 1); /* the next episode's index */
    le64(want + 16, f64_bits(ret[i]));
    le64(want + 24, (uint64_t)len[i]);
    le64(want + 32, f64_bits(last_ret[i]));
    le64(want + 40, (uint64_t)last_len[i]);
    le64(want + 48, (uint64_t)done[i]);
    le32(want + 56, (uint32_t)last_term[i]);
    le32(want + 60, (uint32_t)last_trunc[i]);
    const unsigned char *p = got + 16 + (size_t)i * part;
    assert_memory_equal(p, want, 64);
    unsigned char *img = env_image(single[i]);
    assert_memory_equal(p + 64, img, 80);
    free(img);
    ag_env_free(single[i]);
  }
  free(got);
  ag_vec_env_free(v);
}

/* ---- refused images change nothing ---- */

/* Fails unless the two malloc'd images of n bytes are equal; frees them. */
static void assert_same_images(unsigned char *a, unsigned char *b, size_t n, const char *what) {
  if (memcmp(a, b, n) != 0) fail_msg("%s: the state changed", what);
  free(a);
  free(b);
}

/* Steps e and its twin alike (resetting after ends) and compares every output. */
static void assert_env_same_as_twin(ag_env *e, ag_env *twin, const char *what) {
  assert_same_images(env_image(e), env_image(twin), env_bytes(e), what);
  agt_rng g = {77};
  int reset = e->phase != AG__ENV_RUNNING;
  for (int t = 0; t < 60; t++) {
    tick x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    x.reset = y.reset = reset;
    float act = random_action(ag_env_get_spec(e), &g);
    run_tick(e, t, act, &x);
    run_tick(twin, t, act, &y);
    if (memcmp(&x, &y, sizeof x) != 0) fail_msg("%s: step %d differs from the untouched twin", what, t);
    reset = x.term || x.trunc;
  }
}

typedef struct corruption {
  const char *what;
  size_t off;
  int width; /* 4 or 8 bytes */
  uint64_t value;
  ag_status st;
  const char *part;
} corruption;

/* img = the sb bytes of good with c's field overwritten. */
static void corrupt(unsigned char *img, const unsigned char *good, size_t sb, const corruption *c) {
  memcpy(img, good, sb);
  if (c->width == 4)
    le32(img + c->off, (uint32_t)c->value);
  else
    le64(img + c->off, c->value);
}

static void corrupted_env_images_are_refused_and_change_nothing(void **state) {
  (void)state;
  float obs[MAX_OBS], r;
  int te, tr;
  /* a valid image: cartpole at step 5 of an episode */
  ag_env *src = make_env("cartpole");
  agt_ok(ag_env_reset(src, 3, obs));
  for (int i = 0; i < 5; i++) agt_ok(ag_env_step(src, &(float){(float)(i & 1)}, obs, &r, &te, &tr));
  unsigned char *good = env_image(src);
  const size_t sb = env_bytes(src);
  /* the target and its twin: another episode, at step 2 */
  ag_env *e = make_env("cartpole"), *twin = make_env("cartpole");
  agt_ok(ag_env_reset(e, 77, obs));
  agt_ok(ag_env_reset(twin, 77, obs));
  for (int i = 0; i < 2; i++) {
    agt_ok(ag_env_step(e, &(float){1.0f}, obs, &r, &te, &tr));
    agt_ok(ag_env_step(twin, &(float){1.0f}, obs, &r, &te, &tr));
  }
  const double nan = NAN, inf = INFINITY;
  const corruption bad[] = {
      {"magic", 0, 4, 0x53454742u, AG_ERR_INVALID_ARG, "not an environment state"},
      {"version", 4, 4, 2, AG_ERR_INVALID_ARG, "layout version 2"},
      {"task tag", 8, 4, 0x64657261u, AG_ERR_SHAPE, "of task"},
      {"phase 3", 24, 4, 3, AG_ERR_INVALID_ARG, "phase 3"},
      {"phase 2^32-1", 24, 4, 0xffffffffu, AG_ERR_INVALID_ARG, "phase 4294967295"},
      {"terminated flag 2", 28, 4, 2, AG_ERR_INVALID_ARG, "end flags"},
      {"running with a flag", 32, 4, 1, AG_ERR_INVALID_ARG, "running episode"},
      {"state_dim", 36, 4, 3, AG_ERR_INVALID_ARG, "state_dim 3"},
      {"negative step count", 40, 8, (uint64_t)-1, AG_ERR_INVALID_ARG, "step count -1"},
      {"step count past the limit", 40, 8, 501, AG_ERR_INVALID_ARG, "step count 501"},
      {"running at the limit", 40, 8, 500, AG_ERR_INVALID_ARG, "running episode"},
      {"NaN double", 48 + 8 * 2, 8, f64_bits(nan), AG_ERR_INVALID_ARG, "state value 2"},
      {"infinite double", 48 + 8 * 3, 8, f64_bits(-inf), AG_ERR_INVALID_ARG, "state value 3"},
  };
  unsigned char img[80];
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    corrupt(img, good, sb, &bad[k]);
    agt_err(ag_env_set_state(e, img, sb), bad[k].st, bad[k].part);
    assert_env_same_as_twin(e, twin, bad[k].what);
  }
  /* ended: needs a flag, and truncated only at the limit */
  memcpy(img, good, sb);
  le32(img + 24, 2);
  agt_err(ag_env_set_state(e, img, sb), AG_ERR_INVALID_ARG, "ended episode");
  le32(img + 32, 1);
  agt_err(ag_env_set_state(e, img, sb), AG_ERR_INVALID_ARG, "ended episode");
  assert_env_same_as_twin(e, twin, "ended without a flag, truncated early");
  le32(img + 32, 0);
  le32(img + 28, 1);
  ag_env *ended = make_env("cartpole");
  agt_ok(ag_env_set_state(ended, img, sb)); /* terminated at step 5 is a state a step leaves */
  agt_err(ag_env_step(ended, &(float){1.0f}, obs, &r, &te, &tr), AG_ERR_STATE, "terminated");
  ag_env_free(ended);

  /* sizes: truncated, too short for a header, one byte more */
  agt_err(ag_env_set_state(e, good, sb - 1), AG_ERR_SHAPE, "79 bytes");
  agt_err(ag_env_set_state(e, good, 10), AG_ERR_SHAPE, "too few");
  agt_err(ag_env_set_state(e, good, 0), AG_ERR_SHAPE, "too few");
  unsigned char longer[81];
  memcpy(longer, good, sb);
  longer[80] = 0;
  agt_err(ag_env_set_state(e, longer, sizeof longer), AG_ERR_SHAPE, "81 bytes");
  assert_env_same_as_twin(e, twin, "sizes");

  /* another task's image: acrobot's has the same size as cartpole's, mountaincar's not */
  const char *others[] = {"acrobot", "mountaincar", "pendulum"};
  for (int k = 0; k < 3; k++) {
    ag_env *o = make_env(others[k]);
    agt_ok(ag_env_reset(o, 1, obs));
    unsigned char *oi = env_image(o);
    char part[64];
    snprintf(part, sizeof part, "of task \"%s\", the environment is \"cartpole\"", others[k]);
    agt_err(ag_env_set_state(e, oi, env_bytes(o)), AG_ERR_SHAPE, part);
    agt_err(ag_env_set_state(o, good, sb), AG_ERR_SHAPE, "of task \"cartpole\"");
    free(oi);
    ag_env_free(o);
  }
  assert_env_same_as_twin(e, twin, "another task");

  /* the good image itself is taken */
  agt_ok(ag_env_set_state(e, good, sb));
  agt_ok(ag_env_set_state(twin, good, sb));
  unsigned char *now = env_image(e);
  assert_memory_equal(now, good, sb);
  free(now);
  assert_env_same_as_twin(e, twin, "the good image");
  ag_env_free(twin);
  ag_env_free(src);
  ag_env_free(e);
  free(good);
}

/* Steps v and its twin alike and compares every output and episode info. */
static void assert_vec_same_as_twin(ag_vec_env *v, ag_vec_env *twin, const char *what) {
  assert_same_images(vec_image(v), vec_image(twin), vec_bytes(v), what);
  agt_rng g = {99};
  for (int t = 1; t < 80; t++) {
    float acts[N_COPIES];
    for (int i = 0; i < N_COPIES; i++) acts[i] = random_action(ag_vec_env_get_spec(v), &g);
    vtick x, y;
    run_vtick(v, t, acts, &x);
    run_vtick(twin, t, acts, &y);
    if (memcmp(&x, &y, sizeof x) != 0) fail_msg("%s: step %d differs from the untouched twin", what, t);
  }
}

static void corrupted_vec_env_images_are_refused_and_change_nothing(void **state) {
  (void)state;
  float obs[N_COPIES * MAX_OBS], fin[N_COPIES * MAX_OBS], rew[N_COPIES];
  int term[N_COPIES], trunc[N_COPIES];
  /* a valid image: 40 random steps, episodes ended and autoreset in every copy */
  ag_vec_env *src = make_vec("cartpole", N_COPIES, 1);
  agt_ok(ag_vec_env_reset(src, obs));
  agt_rng g = {5};
  for (int t = 0; t < 40; t++) {
    float acts[N_COPIES];
    for (int i = 0; i < N_COPIES; i++) acts[i] = (float)agt_below(&g, 2);
    agt_ok(ag_vec_env_step(src, acts, obs, rew, term, trunc, fin));
  }
  for (int i = 0; i < N_COPIES; i++) {
    ag_episode_info info;
    agt_ok(ag_vec_env_last_episode(src, i, &info));
    assert_true(info.episodes >= 1);
  }
  unsigned char *good = vec_image(src);
  const size_t sb = vec_bytes(src), part = 64 + 80;
  /* the target and its twin: another seed, 3 steps in */
  ag_vec_env *v = make_vec("cartpole", N_COPIES, 2), *twin = make_vec("cartpole", N_COPIES, 2);
  agt_ok(ag_vec_env_reset(v, obs));
  agt_ok(ag_vec_env_reset(twin, obs));
  for (int t = 0; t < 3; t++) {
    const float acts[N_COPIES] = {1, 0, 1};
    agt_ok(ag_vec_env_step(v, acts, obs, rew, term, trunc, fin));
    agt_ok(ag_vec_env_step(twin, acts, obs, rew, term, trunc, fin));
  }
#define COPY(i, off) (16 + (size_t)(i)*part + (off))
  const corruption bad[] = {
      {"magic", 0, 4, 0, AG_ERR_INVALID_ARG, "not a vector environment state"},
      {"version", 4, 4, 7, AG_ERR_INVALID_ARG, "layout version 7"},
      {"n in the header", 8, 4, 4, AG_ERR_SHAPE, "of 4 copies, the vector has 3"},
      {"started flag", 12, 4, 2, AG_ERR_INVALID_ARG, "started flag 2"},
      {"copy 2's phase", COPY(2, 64 + 24), 4, 3, AG_ERR_INVALID_ARG, "copy 2: phase 3"},
      {"copy 1's step count", COPY(1, 64 + 40), 8, 501, AG_ERR_INVALID_ARG, "copy 1: step count 501"},
      {"copy 0's NaN double", COPY(0, 64 + 48), 8, f64_bits(NAN), AG_ERR_INVALID_ARG,
       "copy 0: state value 0"},
      {"copy 2's task", COPY(2, 64 + 8), 4, 0x6f726361u, AG_ERR_SHAPE, "copy 2: the state is of task"},
      {"copy 0's NaN return", COPY(0, 16), 8, f64_bits(NAN), AG_ERR_INVALID_ARG, "copy 0: episode return"},
      {"copy 1's infinite last return", COPY(1, 32), 8, f64_bits(INFINITY), AG_ERR_INVALID_ARG,
       "copy 1: episode return"},
      {"copy 1's length beside its step count", COPY(1, 24), 8, 499, AG_ERR_INVALID_ARG,
       "copy 1: in a running vector"},
      {"copy 2's negative length", COPY(2, 24), 8, (uint64_t)-3, AG_ERR_INVALID_ARG,
       "copy 2: episode length -3"},
      {"copy 0 next episode 0", COPY(0, 8), 8, 0, AG_ERR_INVALID_ARG, "copy 0: 1 finished episodes"},
      {"copy 1's finished episodes", COPY(1, 48), 8, 1000, AG_ERR_INVALID_ARG, "copy 1: 1000 finished"},
      {"copy 2's last flags", COPY(2, 56), 4, 7, AG_ERR_INVALID_ARG, "copy 2: the last episode's length"},
      {"copy 0's last length", COPY(0, 40), 8, 0, AG_ERR_INVALID_ARG, "copy 0: the last episode's length"},
  };
  unsigned char *img = malloc(sb + 1);
  assert_non_null(img);
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    corrupt(img, good, sb, &bad[k]);
    agt_err(ag_vec_env_set_state(v, img, sb), bad[k].st, bad[k].part);
    assert_vec_same_as_twin(v, twin, bad[k].what);
  }
  /* a running vector's copy that ended (a state the single env accepts) */
  memcpy(img, good, sb);
  le32(img + COPY(1, 64 + 24), 2);
  le32(img + COPY(1, 64 + 28), 1);
  agt_err(ag_vec_env_set_state(v, img, sb), AG_ERR_INVALID_ARG, "copy 1: in a running vector");
  /* no episode finished yet, but last-episode info */
  memcpy(img, good, sb);
  le64(img + COPY(0, 48), 0);
  agt_err(ag_vec_env_set_state(v, img, sb), AG_ERR_INVALID_ARG, "copy 0: no finished episode");
  assert_vec_same_as_twin(v, twin, "ended copy, stray info");
#undef COPY

  /* sizes */
  agt_err(ag_vec_env_set_state(v, good, sb - 1), AG_ERR_SHAPE, "bytes");
  agt_err(ag_vec_env_set_state(v, good, 8), AG_ERR_SHAPE, "too few");
  memcpy(img, good, sb);
  img[sb] = 0;
  agt_err(ag_vec_env_set_state(v, img, sb + 1), AG_ERR_SHAPE, "bytes");
  free(img);
  /* another n, another task */
  ag_vec_env *two = make_vec("cartpole", 2, 1);
  agt_ok(ag_vec_env_reset(two, obs));
  unsigned char *two_img = vec_image(two);
  agt_err(ag_vec_env_set_state(v, two_img, vec_bytes(two)), AG_ERR_SHAPE, "of 2 copies, the vector has 3");
  agt_err(ag_vec_env_set_state(two, good, sb), AG_ERR_SHAPE, "of 3 copies, the vector has 2");
  free(two_img);
  ag_vec_env_free(two);
  ag_vec_env *acro = make_vec("acrobot", N_COPIES, 1);
  agt_ok(ag_vec_env_reset(acro, obs));
  unsigned char *acro_img = vec_image(acro);
  assert_int_equal(vec_bytes(acro), sb); /* the same size: only the tags tell them apart */
  agt_err(ag_vec_env_set_state(v, acro_img, sb), AG_ERR_SHAPE, "copy 0: the state is of task \"acrobot\"");
  free(acro_img);
  ag_vec_env_free(acro);
  /* an env's image is no vector's */
  ag_env *single = make_env("cartpole");
  unsigned char *single_img = env_image(single);
  agt_err(ag_vec_env_set_state(v, single_img, env_bytes(single)), AG_ERR_INVALID_ARG, "not a vector");
  free(single_img);
  ag_env_free(single);
  assert_vec_same_as_twin(v, twin, "sizes, n, task");

  /* the good image is taken by both, which then step alike */
  agt_ok(ag_vec_env_set_state(v, good, sb));
  agt_ok(ag_vec_env_set_state(twin, good, sb));
  assert_vec_same_as_twin(v, twin, "the good image");
  free(good);
  ag_vec_env_free(src);
  ag_vec_env_free(v);
  ag_vec_env_free(twin);
}

/* ---- user environments, NULL arguments, short buffers ---- */

static ag_status user_reset(void *state, uint64_t seed, float *obs) {
  (void)state;
  for (int i = 0; i < 4; i++) obs[i] = (float)(seed % 7u);
  return AG_OK;
}

static ag_status user_step(void *state, const float *action, float *obs, float *reward, int *terminated) {
  (void)state;
  for (int i = 0; i < 4; i++) obs[i] = action[0];
  *reward = 1.0f;
  *terminated = 0;
  return AG_OK;
}

static ag_env *make_user_env(void) {
  static const ag_env_ops ops = {user_reset, user_step, NULL};
  static const ag_env_spec spec = {"User-v0", 4, 2, 0, NULL, NULL, 10, 5.0f, {0, 0, 0}};
  ag_env *e = NULL;
  agt_ok(ag_env_create_custom(&ops, NULL, &spec, &e));
  return e;
}

static void user_environments_have_no_state_image(void **state) {
  (void)state;
  ag_env *u = make_user_env();
  float obs[4];
  agt_ok(ag_env_reset(u, 3, obs));
  size_t b = 12345;
  unsigned char buf[256];
  memset(buf, 0xcd, sizeof buf);
  agt_err(ag_env_state_size(u, &b), AG_ERR_UNSUPPORTED, "\"User-v0\" is a user environment");
  assert_int_equal(b, 12345);
  agt_err(ag_env_get_state(u, buf, sizeof buf), AG_ERR_UNSUPPORTED, "user environment");
  for (size_t i = 0; i < sizeof buf; i++) assert_int_equal(buf[i], 0xcd);
  ag_env *c = make_env("cartpole");
  unsigned char *ci = env_image(c);
  agt_err(ag_env_set_state(u, ci, env_bytes(c)), AG_ERR_UNSUPPORTED, "user environment");
  free(ci);

  /* a vector with a user copy: copy 1 of [cartpole, user] */
  ag_env *envs[2] = {c, u};
  ag_vec_env *v = NULL;
  agt_ok(ag_vec_env_create_from(envs, 2, 4, &v));
  agt_err(ag_vec_env_state_size(v, &b), AG_ERR_UNSUPPORTED, "ag_vec_env_state_size: copy 1");
  assert_int_equal(b, 12345);
  agt_err(ag_vec_env_get_state(v, buf, sizeof buf), AG_ERR_UNSUPPORTED, "ag_vec_env_get_state: copy 1");
  for (size_t i = 0; i < sizeof buf; i++) assert_int_equal(buf[i], 0xcd);
  agt_err(ag_vec_env_set_state(v, buf, sizeof buf), AG_ERR_UNSUPPORTED, "ag_vec_env_set_state: copy 1");
  ag_vec_env_free(v);
}

static void null_arguments_and_short_buffers_are_refused(void **state) {
  (void)state;
  ag_env *e = make_env("pendulum");
  ag_vec_env *v = make_vec("pendulum", 2, 8);
  float obs[6];
  agt_ok(ag_env_reset(e, 1, obs));
  agt_ok(ag_vec_env_reset(v, obs));
  size_t b = 0;
  unsigned char buf[512];
  agt_err(ag_env_state_size(NULL, &b), AG_ERR_INVALID_ARG, "env is NULL");
  agt_err(ag_env_state_size(e, NULL), AG_ERR_INVALID_ARG, "bytes is NULL");
  agt_err(ag_env_get_state(NULL, buf, sizeof buf), AG_ERR_INVALID_ARG, "env is NULL");
  agt_err(ag_env_get_state(e, NULL, sizeof buf), AG_ERR_INVALID_ARG, "buf is NULL");
  agt_err(ag_env_set_state(NULL, buf, sizeof buf), AG_ERR_INVALID_ARG, "env is NULL");
  agt_err(ag_env_set_state(e, NULL, sizeof buf), AG_ERR_INVALID_ARG, "buf is NULL");
  agt_err(ag_vec_env_state_size(NULL, &b), AG_ERR_INVALID_ARG, "v is NULL");
  agt_err(ag_vec_env_state_size(v, NULL), AG_ERR_INVALID_ARG, "bytes is NULL");
  agt_err(ag_vec_env_get_state(NULL, buf, sizeof buf), AG_ERR_INVALID_ARG, "v is NULL");
  agt_err(ag_vec_env_get_state(v, NULL, sizeof buf), AG_ERR_INVALID_ARG, "buf is NULL");
  agt_err(ag_vec_env_set_state(NULL, buf, sizeof buf), AG_ERR_INVALID_ARG, "v is NULL");
  agt_err(ag_vec_env_set_state(v, NULL, sizeof buf), AG_ERR_INVALID_ARG, "buf is NULL");
  assert_int_equal(b, 0);

  /* a buffer one byte short is refused and left untouched */
  const size_t eb = env_bytes(e), vb = vec_bytes(v);
  assert_int_equal(eb, 64);
  assert_int_equal(vb, 16 + 2 * (64 + 64));
  memset(buf, 0xee, sizeof buf);
  agt_err(ag_env_get_state(e, buf, eb - 1), AG_ERR_SHAPE, "buf holds 63 bytes");
  agt_err(ag_vec_env_get_state(v, buf, vb - 1), AG_ERR_SHAPE, "buf holds 271 bytes");
  agt_err(ag_vec_env_get_state(v, buf, 0), AG_ERR_SHAPE, "buf holds 0 bytes");
  for (size_t i = 0; i < sizeof buf; i++) assert_int_equal(buf[i], 0xee);
  ag_env_free(e);
  ag_vec_env_free(v);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(restored_env_replays_uninterrupted_run_bit_for_bit),
      cmocka_unit_test(restored_vec_env_replays_uninterrupted_run_bit_for_bit),
      cmocka_unit_test(env_image_follows_documented_layout),
      cmocka_unit_test(vec_env_image_follows_documented_layout),
      cmocka_unit_test(corrupted_env_images_are_refused_and_change_nothing),
      cmocka_unit_test(corrupted_vec_env_images_are_refused_and_change_nothing),
      cmocka_unit_test(user_environments_have_no_state_image),
      cmocka_unit_test(null_arguments_and_short_buffers_are_refused),
  };
  return agt_run(argc, argv, "env_state", tests, sizeof tests / sizeof tests[0]);
}
