/* minatar_asterix.c — MinAtar's Asterix (minatar 1.0.15,
 * environments/asterix.py): the player moves in four directions (rows 1-8);
 * enemies and gold spawn on a side of rows 1-8 (one per row at most) and
 * cross the board. +1 a gold picked up; touching an enemy ends the game.
 * Difficulty ramping: every 100 frames after the first 101 the spawn
 * interval shrinks by one (to 1), and every second time the move interval
 * too (to 1). Channels: player, enemy, trail, gold. Minimal actions: no-op,
 * left, up, right, down. A spawn draws rand() for the side, rand() for gold
 * (below 1/3), then, if a row is free, randint(free rows).
 */
#include <string.h>

#include "env/minatar.h"

#define RAMP_INTERVAL 100
#define INIT_SPAWN_SPEED 10
#define INIT_MOVE_INTERVAL 5
#define N_SLOTS 8

typedef struct asterix {
  int32_t player_x, player_y;
  int32_t ent[N_SLOTS][5]; /* present, x, y (its slot + 1), moving right, gold */
  int32_t shot_timer, spawn_speed, spawn_timer, move_speed, move_timer, ramp_timer, ramp_index, terminal;
} asterix;
_Static_assert(sizeof(asterix) == AG__MA_ASTERIX_INTS * sizeof(int32_t), "asterix: int32_t fields only");

static void reset(void *gp, ag__mt *r) {
  asterix *g = gp;
  (void)r;
  memset(g, 0, sizeof *g);
  g->player_x = g->player_y = 5;
  g->shot_timer = 0;
  g->spawn_speed = g->spawn_timer = INIT_SPAWN_SPEED;
  g->move_speed = g->move_timer = INIT_MOVE_INTERVAL;
  g->ramp_timer = RAMP_INTERVAL;
  g->ramp_index = 0;
  g->terminal = 0;
}

static void spawn(asterix *g, ag__mt *r) {
  const int lr = ag__mt_rand(r) < 1.0 / 2.0;
  const int gold = ag__mt_rand(r) < 1.0 / 3.0;
  int slots[N_SLOTS], n = 0;
  for (int i = 0; i < N_SLOTS; i++)
    if (!g->ent[i][0]) slots[n++] = i;
  if (n == 0) return;
  const int s = slots[ag__mt_randint(r, 0, n)];
  g->ent[s][0] = 1;
  g->ent[s][1] = lr ? 0 : 9;
  g->ent[s][2] = s + 1;
  g->ent[s][3] = lr;
  g->ent[s][4] = gold;
}

/* The entity in slot i meets the player: gold is taken, an enemy ends the game. */
static void meet(asterix *g, int i, int *reward) {
  if (g->ent[i][1] != g->player_x || g->ent[i][2] != g->player_y) return;
  if (g->ent[i][4]) {
    g->ent[i][0] = 0;
    *reward += 1;
  } else {
    g->terminal = 1;
  }
}

static int act(void *gp, ag__mt *r, int a, int ramping, int *reward) {
  asterix *g = gp;
  if (g->terminal) return 1;
  if (g->spawn_timer == 0) {
    spawn(g, r);
    g->spawn_timer = g->spawn_speed;
  }
  if (a == AG__MA_LEFT)
    g->player_x = g->player_x - 1 > 0 ? g->player_x - 1 : 0;
  else if (a == AG__MA_RIGHT)
    g->player_x = g->player_x + 1 < 9 ? g->player_x + 1 : 9;
  else if (a == AG__MA_UP)
    g->player_y = g->player_y - 1 > 1 ? g->player_y - 1 : 1;
  else if (a == AG__MA_DOWN)
    g->player_y = g->player_y + 1 < 8 ? g->player_y + 1 : 8;
  for (int i = 0; i < N_SLOTS; i++)
    if (g->ent[i][0]) meet(g, i, reward);
  if (g->move_timer == 0) {
    g->move_timer = g->move_speed;
    for (int i = 0; i < N_SLOTS; i++) {
      if (!g->ent[i][0]) continue;
      g->ent[i][1] += g->ent[i][3] ? 1 : -1;
      if (g->ent[i][1] < 0 || g->ent[i][1] > 9)
        g->ent[i][0] = 0; /* off the board: it cannot meet the player */
      else
        meet(g, i, reward);
    }
  }
  g->spawn_timer -= 1;
  g->move_timer -= 1;
  if (ramping && (g->spawn_speed > 1 || g->move_speed > 1)) {
    if (g->ramp_timer >= 0) {
      g->ramp_timer -= 1;
    } else {
      if (g->move_speed > 1 && g->ramp_index % 2) g->move_speed -= 1;
      if (g->spawn_speed > 1) g->spawn_speed -= 1;
      g->ramp_index += 1;
      g->ramp_timer = RAMP_INTERVAL;
    }
  }
  return g->terminal;
}

static void observe(const void *gp, float *grid) {
  const asterix *g = gp;
  enum { PLAYER, ENEMY, TRAIL, GOLD };
  ag__ma_set(grid, PLAYER, g->player_y, g->player_x);
  for (int i = 0; i < N_SLOTS; i++) {
    const int32_t *e = g->ent[i];
    if (!e[0]) continue;
    ag__ma_set(grid, e[4] ? GOLD : ENEMY, e[2], e[1]);
    const int back = e[3] ? e[1] - 1 : e[1] + 1;
    if (back >= 0 && back <= 9) ag__ma_set(grid, TRAIL, e[2], back);
  }
}

static const char *check(const int32_t *v) {
  asterix g;
  memcpy(&g, v, sizeof g);
  if (g.player_x < 0 || g.player_x > 9 || g.player_y < 1 || g.player_y > 8)
    return "the player is off rows 1-8";
  for (int i = 0; i < N_SLOTS; i++) {
    const int32_t *e = g.ent[i];
    if ((e[0] | e[3] | e[4]) & ~1) return "an entity's flags are not 0 or 1";
    if (e[0] && (e[1] < 0 || e[1] > 9 || e[2] != i + 1)) return "an entity is off its row";
  }
  if (g.spawn_speed < 1 || g.spawn_speed > INIT_SPAWN_SPEED || g.spawn_timer < 0 ||
      g.spawn_timer > INIT_SPAWN_SPEED)
    return "the spawn interval or timer is outside 1..10, 0..10";
  if (g.move_speed < 1 || g.move_speed > INIT_MOVE_INTERVAL || g.move_timer < 0 ||
      g.move_timer > INIT_MOVE_INTERVAL)
    return "the move interval or timer is outside 1..5, 0..5";
  if (g.ramp_timer < -1 || g.ramp_timer > RAMP_INTERVAL || g.ramp_index < 0)
    return "the ramp timer or index is out of range";
  if (g.terminal & ~1) return "the end flag is not 0 or 1";
  return NULL;
}

const ag__minatar_game ag__minatar_asterix = {
    .name = "asterix",
    .channels = 4,
    .n_actions = 5,
    .actions = {AG__MA_NOOP, AG__MA_LEFT, AG__MA_UP, AG__MA_RIGHT, AG__MA_DOWN},
    .size = sizeof(asterix),
    .reset = reset,
    .act = act,
    .observe = observe,
    .check = check,
};
