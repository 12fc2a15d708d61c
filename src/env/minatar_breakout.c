/* minatar_breakout.c — MinAtar's Breakout (minatar 1.0.15,
 * environments/breakout.py): a paddle on the bottom row, a ball that moves
 * along diagonals, three rows of bricks (rows 1-3) that come back when all
 * are gone. +1 a brick; the game ends when the ball reaches the bottom row
 * away from the paddle. Channels: paddle, ball, trail, brick. Minimal
 * actions: no-op, left, right. The start draws randint(2) for the ball's
 * side. No difficulty ramping.
 */
#include <string.h>

#include "env/minatar.h"

typedef struct breakout {
  int32_t ball_x, ball_y, ball_dir, pos, last_x, last_y, strike, terminal;
  int32_t brick[AG__MA_GRID][AG__MA_GRID];
} breakout;
_Static_assert(sizeof(breakout) == AG__MA_BREAKOUT_INTS * sizeof(int32_t), "breakout: int32_t fields only");

static void reset(void *gp, ag__mt *r) {
  breakout *g = gp;
  g->ball_y = 3;
  const int start = (int)ag__mt_randint(r, 0, 2);
  g->ball_x = start ? 9 : 0;
  g->ball_dir = start ? 3 : 2;
  g->pos = 4;
  memset(g->brick, 0, sizeof g->brick);
  for (int y = 1; y < 4; y++)
    for (int x = 0; x < AG__MA_GRID; x++) g->brick[y][x] = 1;
  g->strike = 0;
  g->last_x = g->ball_x;
  g->last_y = g->ball_y;
  g->terminal = 0;
}

static int bricks_left(const breakout *g) {
  int n = 0;
  for (int y = 0; y < AG__MA_GRID; y++)
    for (int x = 0; x < AG__MA_GRID; x++) n += g->brick[y][x] != 0;
  return n;
}

static int act(void *gp, ag__mt *r, int a, int ramping, int *reward) {
  breakout *g = gp;
  (void)r, (void)ramping;
  if (g->terminal) return 1;
  static const int32_t flip_x[4] = {1, 0, 3, 2}, flip_y[4] = {3, 2, 1, 0}, paddle_edge[4] = {2, 3, 0, 1};
  if (a == AG__MA_LEFT) g->pos = g->pos - 1 > 0 ? g->pos - 1 : 0;
  if (a == AG__MA_RIGHT) g->pos = g->pos + 1 < 9 ? g->pos + 1 : 9;
  g->last_x = g->ball_x;
  g->last_y = g->ball_y;
  int32_t nx = g->ball_x + (g->ball_dir == 1 || g->ball_dir == 2 ? 1 : -1);
  int32_t ny = g->ball_y + (g->ball_dir >= 2 ? 1 : -1);
  int strike_toggle = 0;
  if (nx < 0 || nx > 9) {
    nx = nx < 0 ? 0 : 9;
    g->ball_dir = flip_x[g->ball_dir];
  }
  if (ny < 0) {
    ny = 0;
    g->ball_dir = flip_y[g->ball_dir];
  } else if (g->brick[ny][nx] == 1) {
    strike_toggle = 1;
    if (!g->strike) {
      *reward += 1;
      g->strike = 1;
      g->brick[ny][nx] = 0;
      ny = g->last_y;
      g->ball_dir = flip_y[g->ball_dir];
    }
  } else if (ny == 9) {
    if (bricks_left(g) == 0)
      for (int y = 1; y < 4; y++)
        for (int x = 0; x < AG__MA_GRID; x++) g->brick[y][x] = 1;
    if (g->ball_x == g->pos) {
      g->ball_dir = flip_y[g->ball_dir];
      ny = g->last_y;
    } else if (nx == g->pos) {
      g->ball_dir = paddle_edge[g->ball_dir];
      ny = g->last_y;
    } else {
      g->terminal = 1;
    }
  }
  if (!strike_toggle) g->strike = 0;
  g->ball_x = nx;
  g->ball_y = ny;
  return g->terminal;
}

static void observe(const void *gp, float *grid) {
  const breakout *g = gp;
  enum { PADDLE, BALL, TRAIL, BRICK };
  ag__ma_set(grid, BALL, g->ball_y, g->ball_x);
  ag__ma_set(grid, PADDLE, 9, g->pos);
  ag__ma_set(grid, TRAIL, g->last_y, g->last_x);
  for (int y = 0; y < AG__MA_GRID; y++)
    for (int x = 0; x < AG__MA_GRID; x++)
      if (g->brick[y][x]) ag__ma_set(grid, BRICK, y, x);
}

static const char *check(const int32_t *v) {
  breakout g;
  memcpy(&g, v, sizeof g);
  if (g.ball_x < 0 || g.ball_x > 9 || g.ball_y < 0 || g.ball_y > 9) return "the ball is off the board";
  if (g.last_x < 0 || g.last_x > 9 || g.last_y < 0 || g.last_y > 9) return "the trail is off the board";
  if (g.pos < 0 || g.pos > 9) return "the paddle is off the board";
  if (g.ball_dir < 0 || g.ball_dir > 3) return "the ball's direction is not 0..3";
  if ((g.strike | g.terminal) & ~1) return "a flag is not 0 or 1";
  /* a ball on the bottom row ended the game; one moving down from it would leave the board */
  if (g.ball_y == 9 && !g.terminal) return "the ball is on the bottom row of a running game";
  for (int y = 0; y < AG__MA_GRID; y++)
    for (int x = 0; x < AG__MA_GRID; x++)
      if (g.brick[y][x] & ~1 || (g.brick[y][x] && (y < 1 || y > 3)))
        return "a brick is not 0 or 1, or lies outside rows 1-3";
  return NULL;
}

const ag__minatar_game ag__minatar_breakout = {
    .name = "breakout",
    .channels = 4,
    .n_actions = 3,
    .actions = {AG__MA_NOOP, AG__MA_LEFT, AG__MA_RIGHT},
    .size = sizeof(breakout),
    .reset = reset,
    .act = act,
    .observe = observe,
    .check = check,
};
