/* The MinAtar games' C side (their steps are compared with the minatar
 * package in tests/python/test_minatar.py, and the generator with numpy in
 * tests/np_random_check.py): MT19937 against its published test vectors,
 * bad actions and bad state images refused with nothing changed, a state
 * saved mid-episode and restored replaying the same steps, and the
 * documented observation layout. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agt.h"
#include "env/np_random.h"

#define MAX_OBS 1000
#define IMG_GAME (48 + 8 * (3 + 624 + 1)) /* the game's fields in an image (agrl/env.h) */

static const char *const games[] = {"breakout-minatar", "freeway-minatar", "asterix-minatar",
                                    "space_invaders-minatar", "seaquest-minatar"};
enum { N_GAMES = (int)(sizeof games / sizeof games[0]) };
static const char *const variants[] = {"", "-nosticky", "-noramp", "-nosticky-noramp"};

static ag_env *make_env(const char *name) {
  ag_env *e = NULL;
  agt_ok(ag_env_create(name, &e));
  return e;
}

static unsigned char *image(const ag_env *e, size_t *bytes) {
  agt_ok(ag_env_state_size(e, bytes));
  unsigned char *p = malloc(*bytes);
  assert_non_null(p);
  agt_ok(ag_env_get_state(e, p, *bytes));
  return p;
}

/* MT19937's published outputs: the 10000th of seed 5489 (C++'s std::mt19937
 * requirement) and the first of init_by_array({0x123, 0x234, 0x345, 0x456})
 * (mt19937ar.out of Matsumoto and Nishimura). */
static void mt19937_matches_published_vectors(void **state) {
  (void)state;
  ag__mt r;
  ag__mt_seed(&r, 5489);
  uint32_t x = 0;
  for (int i = 0; i < 10000; i++) x = ag__mt_next32(&r);
  assert_int_equal(x, 4123659995u);
  const uint32_t key[4] = {0x123, 0x234, 0x345, 0x456};
  const uint32_t first[5] = {1067595299u, 955945823u, 477289528u, 4107218783u, 4228976476u};
  ag__mt_seed_array(&r, key, 4);
  for (int i = 0; i < 5; i++) assert_int_equal(ag__mt_next32(&r), first[i]);
  /* randint over one value draws nothing; rand() lies in [0, 1) */
  ag__mt a = r;
  assert_int_equal(ag__mt_randint(&r, 7, 8), 7);
  assert_memory_equal(&a, &r, sizeof a);
  for (int i = 0; i < 1000; i++) {
    const double u = ag__mt_rand(&r);
    assert_true(u >= 0.0 && u < 1.0);
    const int64_t k = ag__mt_randint(&r, -2, 3);
    assert_true(k >= -2 && k < 3);
  }
}

static void bad_actions_are_refused_and_change_nothing(void **state) {
  (void)state;
  for (int k = 0; k < N_GAMES; k++) {
    ag_env *e = make_env(games[k]);
    const ag_env_spec *spec = ag_env_get_spec(e);
    float obs[MAX_OBS], r = 5.0f;
    int te = 7, tr = 7;
    agt_err(ag_env_step(e, &(float){0.0f}, obs, &r, &te, &tr), AG_ERR_STATE, "has not been reset");
    agt_ok(ag_env_reset(e, 9, obs));
    size_t n;
    unsigned char *before = image(e, &n);
    const float bad[] = {(float)spec->n_actions, -1.0f, 0.5f, NAN, INFINITY};
    for (int i = 0; i < 5; i++) {
      agt_err(ag_env_step(e, &bad[i], obs, &r, &te, &tr), i < 2 ? AG_ERR_OUT_OF_RANGE : AG_ERR_INVALID_ARG,
              "action");
      assert_true(r == 5.0f && te == 7 && tr == 7);
    }
    unsigned char *after = image(e, &n);
    assert_memory_equal(before, after, n);
    free(before);
    free(after);
    ag_env_free(e);
  }
}

/* Random play over episode ends; at step `save` the image is taken; after
 * `more` steps it is restored (into the same environment and into a new one)
 * and the same actions replay the same observations, rewards and flags. */
static void restored_state_replays_the_same_steps(void **state) {
  (void)state;
  enum { MORE = 400 };
  static float ref_obs[MORE][MAX_OBS], got_obs[MAX_OBS];
  for (int k = 0; k < N_GAMES; k++)
    for (int v = 0; v < 4; v++) {
      char name[64];
      snprintf(name, sizeof name, "%s%s", games[k], variants[v]);
      ag_env *e = make_env(name), *f = make_env(name);
      const int na = ag_env_get_spec(e)->n_actions, od = ag_env_get_spec(e)->obs_dim;
      assert_true(od <= MAX_OBS);
      const int *sh = ag_env_get_spec(e)->obs_shape; /* C x 10 x 10, channels first */
      assert_true(sh[1] == 10 && sh[2] == 10 && sh[0] * 100 == od);
      agt_rng g = {77 + (uint64_t)k * 4 + (uint64_t)v};
      float obs[MAX_OBS], acts[MORE], ref_r[MORE], r;
      int ref_flags[MORE], te, tr;
      uint64_t seed = 1000;
      agt_ok(ag_env_reset(e, seed, obs));
      for (int t = 0; t < 150; t++) { /* into the game, past some episode ends */
        agt_ok(ag_env_step(e, &(float){(float)agt_below(&g, na)}, obs, &r, &te, &tr));
        if (te || tr) agt_ok(ag_env_reset(e, ++seed, obs));
      }
      size_t n;
      unsigned char *saved = image(e, &n);
      const uint64_t seed_saved = seed;
      for (int t = 0; t < MORE; t++) {
        acts[t] = (float)agt_below(&g, na);
        agt_ok(ag_env_step(e, &acts[t], ref_obs[t], &ref_r[t], &te, &tr));
        ref_flags[t] = te | tr << 1;
        if (te || tr) agt_ok(ag_env_reset(e, ++seed, obs));
      }
      ag_env *targets[2] = {e, f};
      for (int w = 0; w < 2; w++) {
        agt_ok(ag_env_set_state(targets[w], saved, n));
        seed = seed_saved;
        for (int t = 0; t < MORE; t++) {
          agt_ok(ag_env_step(targets[w], &acts[t], got_obs, &r, &te, &tr));
          if (memcmp(got_obs, ref_obs[t], (size_t)od * sizeof(float)) != 0 || r != ref_r[t] ||
              (te | tr << 1) != ref_flags[t])
            fail_msg("%s restored (%s) differs at step %d", name, w ? "new env" : "same env", t);
          if (te || tr) agt_ok(ag_env_reset(targets[w], ++seed, obs));
        }
      }
      free(saved);
      ag_env_free(e);
      ag_env_free(f);
    }
}

static void put_f64(unsigned char *p, double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(u >> (8 * i));
}

/* Images that are not a state of the game: refused, and nothing changes. */
static void bad_images_are_refused_and_change_nothing(void **state) {
  (void)state;
  for (int k = 0; k < N_GAMES; k++) {
    char other[64];
    snprintf(other, sizeof other, "%s-nosticky", games[k]);
    ag_env *e = make_env(games[k]), *o = make_env(other);
    float obs[MAX_OBS];
    agt_ok(ag_env_reset(e, 3, obs));
    agt_ok(ag_env_reset(o, 3, obs));
    size_t n, no;
    unsigned char *mine = image(e, &n), *theirs = image(o, &no);
    assert_int_equal(n, no);
    agt_err(ag_env_set_state(e, theirs, no), AG_ERR_SHAPE, "sticky actions 0");
    struct {
      size_t off;
      double value;
      const char *part;
    } cases[] = {
        {48 + 8 * 2, 624.5, "position"},
        {48 + 8 * 2, 625.0, "position"},
        {48 + 8 * 3, 4294967296.0, "key word 0"},
        {48 + 8 * 100, -1.0, "key word 97"},
        {48 + 8 * 627, 6.0, "previous action"},
        {IMG_GAME, 2147483648.0, "not a 32-bit integer"},
        {IMG_GAME, 1000.0, "not a state of MinAtar"},
        {IMG_GAME, -5.0, "not a state of MinAtar"},
    };
    unsigned char *bad = malloc(n);
    assert_non_null(bad);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      memcpy(bad, mine, n);
      put_f64(bad + cases[c].off, cases[c].value);
      agt_err(ag_env_set_state(e, bad, n), AG_ERR_INVALID_ARG, cases[c].part);
    }
    unsigned char *after = image(e, &n);
    assert_memory_equal(mine, after, n);
    free(bad);
    free(after);
    free(mine);
    free(theirs);
    ag_env_free(e);
    ag_env_free(o);
  }
}

/* agrl/env.h's layout, channel-major C x 10 x 10, on Breakout's start:
 * the paddle (channel 0) at row 9 column 4, the ball (1) and its trail (2)
 * on row 3 at column 0 or 9, the bricks (3) filling rows 1-3; nothing else,
 * and all values 0 or 1. */
static void breakout_start_follows_documented_layout(void **state) {
  (void)state;
  ag_env *e = make_env("breakout-minatar");
  float obs[400];
  int sides[2] = {0, 0};
  for (uint64_t seed = 0; seed < 20; seed++) {
    agt_ok(ag_env_reset(e, seed, obs));
    float sum = 0.0f;
    for (int i = 0; i < 400; i++) {
      assert_true(obs[i] == 0.0f || obs[i] == 1.0f);
      sum += obs[i];
    }
    assert_true(sum == 33.0f);
    assert_true(obs[0 * 100 + 9 * 10 + 4] == 1.0f);
    const int x = obs[1 * 100 + 3 * 10 + 0] == 1.0f ? 0 : 9;
    assert_true(obs[1 * 100 + 3 * 10 + x] == 1.0f && obs[2 * 100 + 3 * 10 + x] == 1.0f);
    sides[x == 9]++;
    for (int y = 1; y < 4; y++)
      for (int c = 0; c < 10; c++) assert_true(obs[3 * 100 + y * 10 + c] == 1.0f);
  }
  assert_true(sides[0] > 0 && sides[1] > 0);
  ag_env_free(e);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mt19937_matches_published_vectors),
      cmocka_unit_test(bad_actions_are_refused_and_change_nothing),
      cmocka_unit_test(restored_state_replays_the_same_steps),
      cmocka_unit_test(bad_images_are_refused_and_change_nothing),
      cmocka_unit_test(breakout_start_follows_documented_layout),
  };
  return agt_run(argc, argv, "minatar", tests, sizeof tests / sizeof tests[0]);
}
