/* minatar.c — MinAtar's five games (Young & Tian 2019, the minatar package
 * 1.0.15) as built-in tasks: what the package's Environment adds to each
 * game (a numpy RandomState shared with the game, sticky actions, the
 * minimal action set), the seeds, the observation as floats, and the state
 * image. Each game is one file (minatar_breakout.c ...); their names are
 * listed in registry.c.
 *
 * Per step, as Environment.act: one rand(); if it is below the sticky
 * probability (0.1, or 0 for the "-nosticky" tasks, which still draw it) the
 * previous action is taken again instead of the given one; then the game's
 * act. The previous action is MinAtar's no-op at each reset (a fresh
 * Environment's), so that a seed alone gives its episode.
 *
 * Seeds: ag_env_reset(seed) seeds the RandomState with the array of two
 * words [lo, hi] of s = ag_env_derive_seed(seed, 0) (lo = s mod 2^32,
 * hi = s >> 32), as np.random.RandomState([lo, hi]) does, then runs the
 * game's reset. The package's `env = Environment(game, sticky_action_prob,
 * difficulty_ramping); env.seed([lo, hi]); env.reset()` then plays the same
 * episode bit for bit for the same actions (agrl's action i being MinAtar's
 * env.minimal_action_set()[i]).
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "env/env_internal.h"
#include "env/minatar.h"

typedef struct ag__minatar_params {
  const ag__minatar_game *game;
  double sticky; /* the sticky-action probability */
  int ramping;   /* difficulty ramping on */
} ag__minatar_params;

typedef struct minatar_state {
  ag__mt rng;
  int32_t last_action; /* MinAtar's index, 0..5 */
  int32_t pad;
} minatar_state;

/* The game's state follows the wrapper's in the same block. */
#define GAME_OFFSET ((sizeof(minatar_state) + 7) / 8 * 8)
static void *game_of(void *s) { return (unsigned char *)s + GAME_OFFSET; }
static const void *game_of_c(const void *s) { return (const unsigned char *)s + GAME_OFFSET; }

/* The image's doubles: sticky, ramping, the generator's position and key,
 * the previous action, then the game's int32 fields in their order. */
enum { IMG_STICKY = 0, IMG_RAMPING = 1, IMG_POS = 2, IMG_KEY = 3, IMG_LAST = IMG_KEY + AG__MT_N, IMG_GAME };

static void observe(const ag__minatar_game *g, const void *gs, float *obs) {
  memset(obs, 0, (size_t)g->channels * AG__MA_GRID * AG__MA_GRID * sizeof *obs);
  g->observe(gs, obs);
}

static void mn_reset(const ag__classic *c, void *sp, uint64_t seed, float *obs) {
  const ag__minatar_params *p = c->params;
  minatar_state *s = sp;
  const uint64_t d = ag_env_derive_seed(seed, 0);
  const uint32_t words[2] = {(uint32_t)d, (uint32_t)(d >> 32)};
  ag__mt_seed_array(&s->rng, words, 2);
  s->last_action = AG__MA_NOOP;
  p->game->reset(game_of(s), &s->rng);
  observe(p->game, game_of(s), obs);
}

static int mn_step(const ag__classic *c, void *sp, const float *action, float *obs, double *reward) {
  const ag__minatar_params *p = c->params;
  minatar_state *s = sp;
  int a = p->game->actions[(int)action[0]];
  if (ag__mt_rand(&s->rng) < p->sticky) a = s->last_action;
  s->last_action = a;
  int r = 0;
  const int term = p->game->act(game_of(s), &s->rng, a, p->ramping, &r);
  *reward = r;
  observe(p->game, game_of(s), obs);
  return term;
}

static void put_double(unsigned char *p, int i, double x) {
  ag__put64(p + 8 * (size_t)i, ag__double_bits(x));
}
static double get_double(const unsigned char *p, int i) {
  return ag__bits_double(ag__get64(p + 8 * (size_t)i));
}

static void mn_put(const ag__classic *c, const void *sp, unsigned char *p) {
  const ag__minatar_params *pr = c->params;
  const minatar_state *s = sp;
  put_double(p, IMG_STICKY, pr->sticky);
  put_double(p, IMG_RAMPING, pr->ramping);
  put_double(p, IMG_POS, s->rng.pos);
  for (int i = 0; i < AG__MT_N; i++) put_double(p, IMG_KEY + i, s->rng.key[i]);
  put_double(p, IMG_LAST, s->last_action);
  const size_t n = pr->game->size / 4;
  int32_t v[AG__MA_MAX_INTS];
  memcpy(v, game_of_c(s), pr->game->size);
  for (size_t i = 0; i < n; i++) put_double(p, IMG_GAME + (int)i, v[i]);
}

/* x is a whole number in lo .. hi. */
static int whole_in(double x, double lo, double hi) { return x == floor(x) && x >= lo && x <= hi; }

static ag_status mn_check(const ag__classic *c, const unsigned char *p, const char *who) {
  const ag__minatar_params *pr = c->params;
  if (get_double(p, IMG_STICKY) != pr->sticky || get_double(p, IMG_RAMPING) != pr->ramping)
    return ag__fail(AG_ERR_SHAPE,
                    "%s: the state is of MinAtar's %s with sticky actions %g and ramping %g; the environment "
                    "is \"%s\" (sticky %g, ramping %d)",
                    who, pr->game->name, get_double(p, IMG_STICKY), get_double(p, IMG_RAMPING), c->name,
                    pr->sticky, pr->ramping);
  if (!whole_in(get_double(p, IMG_POS), 0, AG__MT_N))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: the generator's position %g is not a whole number in 0..%d", who,
                    get_double(p, IMG_POS), AG__MT_N);
  for (int i = 0; i < AG__MT_N; i++)
    if (!whole_in(get_double(p, IMG_KEY + i), 0, 4294967295.0))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: the generator's key word %d = %g is not a 32-bit word", who, i,
                      get_double(p, IMG_KEY + i));
  if (!whole_in(get_double(p, IMG_LAST), 0, 5))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: the previous action %g is not one of MinAtar's 0..5", who,
                    get_double(p, IMG_LAST));
  const int n = (int)(pr->game->size / 4);
  int32_t v[AG__MA_MAX_INTS];
  for (int i = 0; i < n; i++) {
    const double x = get_double(p, IMG_GAME + i);
    if (!whole_in(x, INT32_MIN, INT32_MAX))
      return ag__fail(AG_ERR_INVALID_ARG, "%s: %s's state value %d = %g is not a 32-bit integer", who,
                      pr->game->name, i, x);
    v[i] = (int32_t)x;
  }
  const char *why = pr->game->check(v);
  if (why)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: not a state of MinAtar's %s: %s", who, pr->game->name, why);
  return AG_OK;
}

static void mn_load(const ag__classic *c, void *sp, const unsigned char *p) {
  const ag__minatar_params *pr = c->params;
  minatar_state *s = sp;
  s->rng.pos = (int)get_double(p, IMG_POS);
  for (int i = 0; i < AG__MT_N; i++) s->rng.key[i] = (uint32_t)get_double(p, IMG_KEY + i);
  s->last_action = (int32_t)get_double(p, IMG_LAST);
  const int n = (int)(pr->game->size / 4);
  int32_t v[AG__MA_MAX_INTS];
  for (int i = 0; i < n; i++) v[i] = (int32_t)get_double(p, IMG_GAME + i);
  memcpy(game_of(s), v, pr->game->size);
}

static const ag__task_ops minatar_ops = {
    .size = GAME_OFFSET + AG__MA_MAX_INTS * sizeof(int32_t),
    .reset = mn_reset,
    .step = mn_step,
    .put = mn_put,
    .check = mn_check,
    .load = mn_load,
};

/* The four tasks of a game: sticky actions and ramping as the package's
 * defaults, then without sticky actions, without ramping, without both. */
#define PARAMS(game)                                                             \
  {                                                                              \
    {&(game), 0.1, 1}, {&(game), 0.0, 1}, {&(game), 0.1, 0}, { &(game), 0.0, 0 } \
  }
static const ag__minatar_params p_breakout[4] = PARAMS(ag__minatar_breakout);
static const ag__minatar_params p_freeway[4] = PARAMS(ag__minatar_freeway);
static const ag__minatar_params p_asterix[4] = PARAMS(ag__minatar_asterix);
static const ag__minatar_params p_space_invaders[4] = PARAMS(ag__minatar_space_invaders);
static const ag__minatar_params p_seaquest[4] = PARAMS(ag__minatar_seaquest);

#define TASK(NAME, ID, CHANNELS, ACTIONS, INTS, PARAMS)                      \
  {                                                                          \
    .name = NAME,                                                            \
    .spec = {.id = ID,                                                       \
             .obs_dim = (CHANNELS)*AG__MA_GRID * AG__MA_GRID,                \
             .n_actions = ACTIONS,                                           \
             .max_episode_steps = 0,                                         \
             .reward_threshold = NAN,                                        \
             .obs_shape = {CHANNELS, AG__MA_GRID, AG__MA_GRID}},             \
    .state_dim = IMG_GAME + (INTS), .own = &minatar_ops, .params = &(PARAMS) \
  }
#define GAME(SHORT, TITLE, CHANNELS, ACTIONS, INTS, P)                                                  \
  TASK(SHORT "-minatar", "MinAtar/" TITLE "-v1", CHANNELS, ACTIONS, INTS, P[0]),                        \
      TASK(SHORT "-minatar-nosticky", SHORT "-minatar-nosticky", CHANNELS, ACTIONS, INTS, P[1]),        \
      TASK(SHORT "-minatar-noramp", SHORT "-minatar-noramp", CHANNELS, ACTIONS, INTS, P[2]),            \
      TASK(SHORT "-minatar-nosticky-noramp", SHORT "-minatar-nosticky-noramp", CHANNELS, ACTIONS, INTS, \
           P[3])

const ag__classic ag__minatar_tasks[] = {
    GAME("breakout", "Breakout", 4, 3, AG__MA_BREAKOUT_INTS, p_breakout),
    GAME("freeway", "Freeway", 7, 3, AG__MA_FREEWAY_INTS, p_freeway),
    GAME("asterix", "Asterix", 4, 5, AG__MA_ASTERIX_INTS, p_asterix),
    GAME("space_invaders", "SpaceInvaders", 6, 4, AG__MA_SPACE_INVADERS_INTS, p_space_invaders),
    GAME("seaquest", "Seaquest", 10, 6, AG__MA_SEAQUEST_INTS, p_seaquest),
};
const int ag__minatar_n_tasks = (int)(sizeof ag__minatar_tasks / sizeof ag__minatar_tasks[0]);
