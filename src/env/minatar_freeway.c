/* minatar_freeway.c — MinAtar's Freeway (minatar 1.0.15,
 * environments/freeway.py): a chicken in column 4 crosses eight lanes of
 * cars (rows 1-8) moving left or right, one cell every 1 to 5 frames; it
 * moves at most every 3 frames, goes back to the bottom when hit, and scores
 * +1 at the top, which also draws new car speeds. The game ends after 2500
 * frames (on the 2501st step). Channels: chicken, car, then one trail
 * channel per speed (1-5). Minimal actions: no-op, up, down. A start (and
 * each crossing) draws randint(1, 6, 8) for the speeds and rand(8) for the
 * directions. No difficulty ramping.
 */
#include <string.h>

#include "env/minatar.h"

#define PLAYER_SPEED 3
#define TIME_LIMIT 2500
#define N_CARS 8

typedef struct freeway {
  int32_t car[N_CARS][4]; /* x, y, timer, speed (its sign the direction, |speed| frames a move) */
  int32_t pos, move_timer, terminate_timer, terminal;
} freeway;
_Static_assert(sizeof(freeway) == AG__MA_FREEWAY_INTS * sizeof(int32_t), "freeway: int32_t fields only");

static int32_t iabs(int32_t v) { return v < 0 ? -v : v; }

/* _randomize_cars: speeds randint(1, 6, 8) times the signs of rand(8) - 0.5. */
static void randomize_cars(freeway *g, ag__mt *r, int initialize) {
  int32_t speed[N_CARS];
  for (int i = 0; i < N_CARS; i++) speed[i] = (int32_t)ag__mt_randint(r, 1, 6);
  for (int i = 0; i < N_CARS; i++) {
    const double d = ag__mt_rand(r) - 0.5;
    speed[i] *= d > 0.0 ? 1 : d < 0.0 ? -1 : 0;
  }
  for (int i = 0; i < N_CARS; i++) {
    if (initialize) {
      g->car[i][0] = 0;
      g->car[i][1] = i + 1;
    }
    g->car[i][2] = iabs(speed[i]);
    g->car[i][3] = speed[i];
  }
}

static void reset(void *gp, ag__mt *r) {
  freeway *g = gp;
  randomize_cars(g, r, 1);
  g->pos = 9;
  g->move_timer = PLAYER_SPEED;
  g->terminate_timer = TIME_LIMIT;
  g->terminal = 0;
}

static int act(void *gp, ag__mt *r, int a, int ramping, int *reward) {
  freeway *g = gp;
  (void)ramping;
  if (g->terminal) return 1;
  if (a == AG__MA_UP && g->move_timer == 0) {
    g->move_timer = PLAYER_SPEED;
    g->pos = g->pos - 1 > 0 ? g->pos - 1 : 0;
  } else if (a == AG__MA_DOWN && g->move_timer == 0) {
    g->move_timer = PLAYER_SPEED;
    g->pos = g->pos + 1 < 9 ? g->pos + 1 : 9;
  }
  if (g->pos == 0) {
    *reward += 1;
    randomize_cars(g, r, 0);
    g->pos = 9;
  }
  for (int i = 0; i < N_CARS; i++) {
    int32_t *c = g->car[i];
    if (c[0] == 4 && c[1] == g->pos) g->pos = 9;
    if (c[2] == 0) {
      c[2] = iabs(c[3]);
      c[0] += c[3] > 0 ? 1 : -1;
      if (c[0] < 0)
        c[0] = 9;
      else if (c[0] > 9)
        c[0] = 0;
      if (c[0] == 4 && c[1] == g->pos) g->pos = 9;
    } else {
      c[2] -= 1;
    }
  }
  g->move_timer -= g->move_timer > 0;
  g->terminate_timer -= 1;
  if (g->terminate_timer < 0) g->terminal = 1;
  return g->terminal;
}

static void observe(const void *gp, float *grid) {
  const freeway *g = gp;
  enum { CHICKEN, CAR, SPEED1 };
  ag__ma_set(grid, CHICKEN, g->pos, 4);
  int trail = -1; /* a speed of 0 (a direction draw of exactly 0.5) has no channel of its own: the
                     package's loop then reuses the previous car's */
  for (int i = 0; i < N_CARS; i++) {
    const int32_t *c = g->car[i];
    ag__ma_set(grid, CAR, c[1], c[0]);
    int back = c[3] > 0 ? c[0] - 1 : c[0] + 1;
    if (back < 0)
      back = 9;
    else if (back > 9)
      back = 0;
    if (iabs(c[3]) >= 1) trail = SPEED1 + iabs(c[3]) - 1;
    if (trail >= 0) ag__ma_set(grid, trail, c[1], back);
  }
}

static const char *check(const int32_t *v) {
  freeway g;
  memcpy(&g, v, sizeof g);
  for (int i = 0; i < N_CARS; i++) {
    const int32_t *c = g.car[i];
    if (c[0] < 0 || c[0] > 9 || c[1] != i + 1) return "a car is off its lane";
    if (c[3] < -5 || c[3] > 5 || c[2] < 0 || c[2] > 5) return "a car's speed or timer is outside -5..5, 0..5";
  }
  if (g.pos < 0 || g.pos > 9) return "the chicken is off the board";
  if (g.move_timer < 0 || g.move_timer > PLAYER_SPEED) return "the move timer is outside 0..3";
  if (g.terminate_timer < -1 || g.terminate_timer > TIME_LIMIT) return "the time left is outside -1..2500";
  if (g.terminal & ~1) return "the end flag is not 0 or 1";
  return NULL;
}

const ag__minatar_game ag__minatar_freeway = {
    .name = "freeway",
    .channels = 7,
    .n_actions = 3,
    .actions = {AG__MA_NOOP, AG__MA_UP, AG__MA_DOWN},
    .size = sizeof(freeway),
    .reset = reset,
    .act = act,
    .observe = observe,
    .check = check,
};
