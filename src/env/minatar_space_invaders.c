/* minatar_space_invaders.c — MinAtar's SpaceInvaders (minatar 1.0.15,
 * environments/space_invaders.py): a cannon on the bottom row shoots up at
 * a 4 x 6 block of aliens that moves sideways, steps down and turns at the
 * edges, and shoots back from the alien nearest the cannon. +1 an alien hit;
 * an alien or a bullet reaching the cannon, or aliens stepping down from the
 * bottom row, end the game. The aliens move every min(aliens left, interval)
 * frames; with ramping each cleared wave shortens the interval by one (12
 * down to 6). Channels: cannon, alien, alien_left, alien_right,
 * friendly_bullet, enemy_bullet. Minimal actions: no-op, left, right, fire.
 * No random draws (only the sticky action's).
 */
#include <string.h>

#include "env/minatar.h"

#define SHOT_COOL_DOWN 5
#define ENEMY_MOVE_INTERVAL 12
#define ENEMY_SHOT_INTERVAL 10
#define N AG__MA_GRID

typedef struct space_invaders {
  int32_t pos;
  int32_t f_bullet[N][N], e_bullet[N][N], alien[N][N];
  int32_t alien_dir, enemy_move_interval, alien_move_timer, alien_shot_timer, ramp_index, shot_timer,
      terminal;
} space_invaders;
_Static_assert(sizeof(space_invaders) == AG__MA_SPACE_INVADERS_INTS * sizeof(int32_t),
               "space_invaders: int32_t fields only");

static void new_wave(int32_t alien[N][N]) {
  for (int y = 0; y < 4; y++)
    for (int x = 2; x < 8; x++) alien[y][x] = 1;
}

static void reset(void *gp, ag__mt *r) {
  space_invaders *g = gp;
  (void)r;
  memset(g, 0, sizeof *g);
  g->pos = 5;
  new_wave(g->alien);
  g->alien_dir = -1;
  g->enemy_move_interval = ENEMY_MOVE_INTERVAL;
  g->alien_move_timer = g->enemy_move_interval;
  g->alien_shot_timer = ENEMY_SHOT_INTERVAL;
}

/* np.roll(m, dy, axis=0) then np.roll(.., dx, axis=1): out[y][x] = m[y - dy][x - dx] (mod 10). */
static void roll(int32_t m[N][N], int dy, int dx) {
  int32_t t[N][N];
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++) t[y][x] = m[((y - dy) % N + N) % N][((x - dx) % N + N) % N];
  memcpy(m, t, sizeof t);
}

static int count(const int32_t m[N][N]) {
  int n = 0;
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++) n += m[y][x] != 0;
  return n;
}

static int column_has(const int32_t m[N][N], int x) {
  for (int y = 0; y < N; y++)
    if (m[y][x]) return 1;
  return 0;
}

static int act(void *gp, ag__mt *r, int a, int ramping, int *reward) {
  space_invaders *g = gp;
  (void)r;
  if (g->terminal) return 1;
  if (a == AG__MA_FIRE && g->shot_timer == 0) {
    g->f_bullet[9][g->pos] = 1;
    g->shot_timer = SHOT_COOL_DOWN;
  } else if (a == AG__MA_LEFT) {
    g->pos = g->pos - 1 > 0 ? g->pos - 1 : 0;
  } else if (a == AG__MA_RIGHT) {
    g->pos = g->pos + 1 < 9 ? g->pos + 1 : 9;
  }
  roll(g->f_bullet, -1, 0);
  memset(g->f_bullet[9], 0, sizeof g->f_bullet[9]);
  roll(g->e_bullet, 1, 0);
  memset(g->e_bullet[0], 0, sizeof g->e_bullet[0]);
  if (g->e_bullet[9][g->pos]) g->terminal = 1;
  if (g->alien[9][g->pos]) g->terminal = 1;
  if (g->alien_move_timer == 0) {
    const int left = count(g->alien);
    g->alien_move_timer = left < g->enemy_move_interval ? left : g->enemy_move_interval;
    if ((column_has(g->alien, 0) && g->alien_dir < 0) || (column_has(g->alien, 9) && g->alien_dir > 0)) {
      g->alien_dir = -g->alien_dir;
      for (int x = 0; x < N; x++)
        if (g->alien[9][x]) g->terminal = 1;
      roll(g->alien, 1, 0);
    } else {
      roll(g->alien, 0, g->alien_dir);
    }
    if (g->alien[9][g->pos]) g->terminal = 1;
  }
  if (g->alien_shot_timer == 0) {
    g->alien_shot_timer = ENEMY_SHOT_INTERVAL;
    /* the lowest alien of the column nearest the cannon (the left one of two as near) */
    for (int d = 0; d < N; d++) {
      const int cols[2] = {g->pos - d, g->pos + d};
      int found = 0;
      for (int k = 0; k < (d ? 2 : 1) && !found; k++) {
        const int x = cols[k];
        if (x < 0 || x >= N || !column_has(g->alien, x)) continue;
        int y = N - 1;
        while (!g->alien[y][x]) y--;
        g->e_bullet[y][x] = 1;
        found = 1;
      }
      if (found) break;
    }
  }
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++)
      if (g->alien[y][x] && g->f_bullet[y][x]) {
        *reward += 1;
        g->alien[y][x] = g->f_bullet[y][x] = 0;
      }
  g->shot_timer -= g->shot_timer > 0;
  g->alien_move_timer -= 1;
  g->alien_shot_timer -= 1;
  if (count(g->alien) == 0) {
    if (g->enemy_move_interval > 6 && ramping) {
      g->enemy_move_interval -= 1;
      g->ramp_index += 1;
    }
    new_wave(g->alien);
  }
  return g->terminal;
}

static void observe(const void *gp, float *grid) {
  const space_invaders *g = gp;
  enum { CANNON, ALIEN, ALIEN_LEFT, ALIEN_RIGHT, FRIENDLY_BULLET, ENEMY_BULLET };
  ag__ma_set(grid, CANNON, 9, g->pos);
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++) {
      if (g->alien[y][x]) {
        ag__ma_set(grid, ALIEN, y, x);
        ag__ma_set(grid, g->alien_dir < 0 ? ALIEN_LEFT : ALIEN_RIGHT, y, x);
      }
      if (g->f_bullet[y][x]) ag__ma_set(grid, FRIENDLY_BULLET, y, x);
      if (g->e_bullet[y][x]) ag__ma_set(grid, ENEMY_BULLET, y, x);
    }
}

static const char *check(const int32_t *v) {
  space_invaders g;
  memcpy(&g, v, sizeof g);
  if (g.pos < 0 || g.pos > 9) return "the cannon is off the board";
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++)
      if ((g.f_bullet[y][x] | g.e_bullet[y][x] | g.alien[y][x]) & ~1) return "a cell is not 0 or 1";
  if (count(g.alien) == 0) return "no alien is left (a cleared wave is replaced in the same step)";
  if (g.alien_dir != -1 && g.alien_dir != 1) return "the aliens' direction is not -1 or 1";
  if (g.enemy_move_interval < 6 || g.enemy_move_interval > ENEMY_MOVE_INTERVAL)
    return "the aliens' move interval is outside 6..12";
  if (g.alien_move_timer < 0 || g.alien_move_timer > ENEMY_MOVE_INTERVAL || g.alien_shot_timer < 0 ||
      g.alien_shot_timer > ENEMY_SHOT_INTERVAL || g.shot_timer < 0 || g.shot_timer > SHOT_COOL_DOWN)
    return "a timer is out of its range";
  if (g.ramp_index < 0) return "the ramp index is negative";
  if (g.terminal & ~1) return "the end flag is not 0 or 1";
  return NULL;
}

const ag__minatar_game ag__minatar_space_invaders = {
    .name = "space_invaders",
    .channels = 6,
    .n_actions = 4,
    .actions = {AG__MA_NOOP, AG__MA_LEFT, AG__MA_RIGHT, AG__MA_FIRE},
    .size = sizeof(space_invaders),
    .reset = reset,
    .act = act,
    .observe = observe,
    .check = check,
};
