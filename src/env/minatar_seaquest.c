/* minatar_seaquest.c — MinAtar's Seaquest (minatar 1.0.15,
 * environments/seaquest.py): a two-cell submarine shoots enemy fish and
 * subs (+1 each), picks up divers (at most 6) and must surface with at
 * least one before its 200 units of oxygen run out; surfacing with 6 pays
 * the oxygen left (oxygen * 10 // 200) and each surfacing ramps the
 * difficulty (faster spawns and moves). Being hit by a fish, a sub or a
 * sub's bullet, running out of oxygen or surfacing with no diver ends the
 * game. Channels: sub_front, sub_back, friendly_bullet, trail,
 * enemy_bullet, enemy_fish, enemy_sub, oxygen_guage, diver_guage, diver.
 * Minimal actions: all six. An enemy spawn draws rand() (side), rand() (sub
 * below 1/3), randint(1, 9) (row); a diver spawn rand(), randint(1, 9).
 *
 * The package keeps its entities in Python lists, walks them backwards
 * while removing from them and removes by value (list.remove takes the
 * first element equal to the one given, which need not be the one in
 * hand); the lists below do the same: a backward walk by index that stops
 * when the index passes the end, removal of the first equal element, and
 * the element in hand followed to wherever the removal leaves it (or kept
 * as a copy once removed: a sub destroyed this step still fires when its
 * shot timer runs out, as the package's does). The package's quirks stay:
 * surfacing with 6 divers leaves -1 of them, a later surfacing with a
 * negative count is not an end.
 */
#include <string.h>

#include "env/minatar.h"

#define MAX_OXYGEN 200
#define INIT_SPAWN_SPEED 20
#define DIVER_SPAWN_SPEED 30
#define INIT_MOVE_INTERVAL 5
#define SHOT_COOL_DOWN 5
#define ENEMY_SHOT_INTERVAL 10
#define DIVER_MOVE_INTERVAL 5

/* List capacities. Enemies live at most 60 steps (10 moves, one every
 * move_speed + 1 <= 6 steps) and spawn at most once a step; a sub's bullet
 * lives at most 10 steps, one per sub every 11; the sub's own bullets live
 * at most 10 steps, one every 6; divers live at most 60 steps, one every
 * 31: no list of the package grows beyond these. */
#define CAP_ENEMY 64
#define CAP_F_BULLET 16
#define CAP_DIVER 8
#define W 5 /* fields per element, the widest (a sub's) */

typedef struct ent_list {
  int32_t n;
  int32_t v[CAP_ENEMY][W];
} ent_list;

typedef struct seaquest {
  int32_t oxygen, diver_count, sub_x, sub_y, sub_or, e_spawn_speed, e_spawn_timer, d_spawn_timer, move_speed,
      ramp_index, shot_timer, surface, terminal;
  /* elements: f_bullets and e_bullets x, y, direction; fish and divers x, y,
   * direction, move timer; subs x, y, direction, move timer, shot timer */
  ent_list f_bullets, e_bullets, fish, subs, divers;
} seaquest;
_Static_assert(sizeof(seaquest) == AG__MA_SEAQUEST_INTS * sizeof(int32_t), "seaquest: int32_t fields only");

enum { F_BULLET_W = 3, E_BULLET_W = 3, FISH_W = 4, SUB_W = 5, DIVER_W = 4 };

static int cap_of(const seaquest *g, const ent_list *l) {
  return l == &g->f_bullets ? CAP_F_BULLET : l == &g->divers ? CAP_DIVER : CAP_ENEMY;
}

static void append(const seaquest *g, ent_list *l, const int32_t *e, int w) {
  if (l->n >= cap_of(g, l)) return; /* beyond the bounds above: never reached */
  memset(l->v[l->n], 0, sizeof l->v[0]);
  memcpy(l->v[l->n], e, (size_t)w * sizeof *e);
  l->n++;
}

static void remove_at(ent_list *l, int i) {
  memmove(l->v[i], l->v[i + 1], (size_t)(l->n - i - 1) * sizeof l->v[0]);
  l->n--;
  memset(l->v[l->n], 0, sizeof l->v[0]); /* unused slots stay zero (check) */
}

/* list.remove(e): the first element equal to e in its w fields; its index. */
static int remove_value(ent_list *l, const int32_t *e, int w) {
  for (int i = 0; i < l->n; i++)
    if (memcmp(l->v[i], e, (size_t)w * sizeof *e) == 0) {
      remove_at(l, i);
      return i;
    }
  return -1; /* not reached: e is in the list */
}

/* The element in hand during a backward walk: its index in the list (-1
 * once removed) and its fields (kept after removal). */
typedef struct held {
  int at;
  int32_t e[W];
} held;

/* Removes the element in hand by value and follows it. */
static void remove_held(ent_list *l, held *h, int w) {
  memcpy(h->e, l->v[h->at], sizeof h->e);
  const int j = remove_value(l, h->e, w);
  if (j == h->at)
    h->at = -1;
  else if (j >= 0 && j < h->at)
    h->at--;
}

/* Sets field k of the element in hand, in the list while it is there. */
static void set_held(ent_list *l, held *h, int k, int32_t v) {
  h->e[k] = v;
  if (h->at >= 0) l->v[h->at][k] = v;
}

static int at(const int32_t *e, int x, int y) { return e[0] == x && e[1] == y; }

static void reset(void *gp, ag__mt *r) {
  seaquest *g = gp;
  (void)r;
  memset(g, 0, sizeof *g);
  g->oxygen = MAX_OXYGEN;
  g->sub_x = 5;
  g->e_spawn_speed = g->e_spawn_timer = INIT_SPAWN_SPEED;
  g->d_spawn_timer = DIVER_SPAWN_SPEED;
  g->move_speed = INIT_MOVE_INTERVAL;
  g->surface = 1;
}

static void spawn_enemy(seaquest *g, ag__mt *r) {
  const int32_t lr = ag__mt_rand(r) < 1.0 / 2.0;
  const int is_sub = ag__mt_rand(r) < 1.0 / 3.0;
  const int32_t x = lr ? 0 : 9, y = (int32_t)ag__mt_randint(r, 1, 9);
  /* not in a row where an enemy moves the other way */
  const ent_list *lists[2] = {&g->subs, &g->fish};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < lists[k]->n; i++)
      if (lists[k]->v[i][1] == y && lists[k]->v[i][2] != lr) return;
  if (is_sub)
    append(g, &g->subs, (const int32_t[]){x, y, lr, g->move_speed, ENEMY_SHOT_INTERVAL}, SUB_W);
  else
    append(g, &g->fish, (const int32_t[]){x, y, lr, g->move_speed}, FISH_W);
}

static void spawn_diver(seaquest *g, ag__mt *r) {
  const int32_t lr = ag__mt_rand(r) < 1.0 / 2.0;
  const int32_t y = (int32_t)ag__mt_randint(r, 1, 9);
  append(g, &g->divers, (const int32_t[]){lr ? 0 : 9, y, lr, DIVER_MOVE_INTERVAL}, DIVER_W);
}

/* The first element of l on the cell of e, or -1. */
static int first_on(const ent_list *l, const int32_t *e) {
  for (int i = 0; i < l->n; i++)
    if (at(l->v[i], e[0], e[1])) return i;
  return -1;
}

static int32_t surface(seaquest *g, int ramping) {
  g->surface = 1;
  int32_t r = 0;
  if (g->diver_count == 6) {
    g->diver_count = 0;
    r = ag__floordiv(g->oxygen * 10, MAX_OXYGEN);
  }
  g->oxygen = MAX_OXYGEN;
  g->diver_count -= 1;
  if (ramping && (g->e_spawn_speed > 1 || g->move_speed > 2)) {
    if (g->move_speed > 2 && g->ramp_index % 2) g->move_speed -= 1;
    if (g->e_spawn_speed > 1) g->e_spawn_speed -= 1;
    g->ramp_index += 1;
  }
  return r;
}

/* One backward walk step: the element at index i (the package's reversed()
 * iterator), or 0 when the walk is over. */
static int walk(const ent_list *l, int i, held *h) {
  if (i < 0 || i >= l->n) return 0;
  h->at = i;
  memcpy(h->e, l->v[i], sizeof h->e);
  return 1;
}

static void move_f_bullets(seaquest *g, int *reward) {
  ent_list *l = &g->f_bullets;
  held h;
  for (int i = l->n - 1; walk(l, i, &h); i--) {
    set_held(l, &h, 0, h.e[0] + (h.e[2] ? 1 : -1));
    if (h.e[0] < 0 || h.e[0] > 9) {
      remove_held(l, &h, F_BULLET_W);
      continue;
    }
    int k = first_on(&g->fish, h.e);
    ent_list *hit = &g->fish;
    if (k < 0) k = first_on(hit = &g->subs, h.e);
    if (k >= 0) {
      remove_at(hit, k);
      remove_held(l, &h, F_BULLET_W);
      *reward += 1;
    }
  }
}

static void move_divers(seaquest *g) {
  ent_list *l = &g->divers;
  held h;
  for (int i = l->n - 1; walk(l, i, &h); i--) {
    if (at(h.e, g->sub_x, g->sub_y) && g->diver_count < 6) {
      remove_held(l, &h, DIVER_W);
      g->diver_count += 1;
    } else if (h.e[3] == 0) {
      set_held(l, &h, 3, DIVER_MOVE_INTERVAL);
      set_held(l, &h, 0, h.e[0] + (h.e[2] ? 1 : -1));
      if (h.e[0] < 0 || h.e[0] > 9) {
        remove_held(l, &h, DIVER_W);
      } else if (at(h.e, g->sub_x, g->sub_y) && g->diver_count < 6) {
        remove_held(l, &h, DIVER_W);
        g->diver_count += 1;
      }
    } else {
      set_held(l, &h, 3, h.e[3] - 1);
    }
  }
}

/* Subs (shoot = 1, width 5) and fish (0, width 4) move alike. */
static void move_enemies(seaquest *g, ent_list *l, int shoot, int w, int *reward) {
  held h;
  for (int i = l->n - 1; walk(l, i, &h); i--) {
    if (at(h.e, g->sub_x, g->sub_y)) g->terminal = 1;
    if (h.e[3] == 0) {
      set_held(l, &h, 3, g->move_speed);
      set_held(l, &h, 0, h.e[0] + (h.e[2] ? 1 : -1));
      if (h.e[0] < 0 || h.e[0] > 9) {
        remove_held(l, &h, w);
      } else if (at(h.e, g->sub_x, g->sub_y)) {
        g->terminal = 1;
      } else {
        const int k = first_on(&g->f_bullets, h.e);
        if (k >= 0) {
          remove_held(l, &h, w);
          remove_at(&g->f_bullets, k);
          *reward += 1;
        }
      }
    } else {
      set_held(l, &h, 3, h.e[3] - 1);
    }
    if (!shoot) continue;
    if (h.e[4] == 0) {
      set_held(l, &h, 4, ENEMY_SHOT_INTERVAL);
      append(g, &g->e_bullets, (const int32_t[]){h.e[0], h.e[1], h.e[2]}, E_BULLET_W);
    } else {
      set_held(l, &h, 4, h.e[4] - 1);
    }
  }
}

static void move_e_bullets(seaquest *g) {
  ent_list *l = &g->e_bullets;
  held h;
  for (int i = l->n - 1; walk(l, i, &h); i--) {
    if (at(h.e, g->sub_x, g->sub_y)) g->terminal = 1;
    set_held(l, &h, 0, h.e[0] + (h.e[2] ? 1 : -1));
    if (h.e[0] < 0 || h.e[0] > 9)
      remove_held(l, &h, E_BULLET_W);
    else if (at(h.e, g->sub_x, g->sub_y))
      g->terminal = 1;
  }
}

static int act(void *gp, ag__mt *r, int a, int ramping, int *reward) {
  seaquest *g = gp;
  if (g->terminal) return 1;
  if (g->e_spawn_timer == 0) {
    spawn_enemy(g, r);
    g->e_spawn_timer = g->e_spawn_speed;
  }
  if (g->d_spawn_timer == 0) {
    spawn_diver(g, r);
    g->d_spawn_timer = DIVER_SPAWN_SPEED;
  }
  if (a == AG__MA_FIRE && g->shot_timer == 0) {
    append(g, &g->f_bullets, (const int32_t[]){g->sub_x, g->sub_y, g->sub_or}, F_BULLET_W);
    g->shot_timer = SHOT_COOL_DOWN;
  } else if (a == AG__MA_LEFT) {
    g->sub_x = g->sub_x - 1 > 0 ? g->sub_x - 1 : 0;
    g->sub_or = 0;
  } else if (a == AG__MA_RIGHT) {
    g->sub_x = g->sub_x + 1 < 9 ? g->sub_x + 1 : 9;
    g->sub_or = 1;
  } else if (a == AG__MA_UP) {
    g->sub_y = g->sub_y - 1 > 0 ? g->sub_y - 1 : 0;
  } else if (a == AG__MA_DOWN) {
    g->sub_y = g->sub_y + 1 < 8 ? g->sub_y + 1 : 8;
  }
  move_f_bullets(g, reward);
  move_divers(g);
  move_enemies(g, &g->subs, 1, SUB_W, reward);
  move_e_bullets(g);
  move_enemies(g, &g->fish, 0, FISH_W, reward);
  g->e_spawn_timer -= g->e_spawn_timer > 0;
  g->d_spawn_timer -= g->d_spawn_timer > 0;
  g->shot_timer -= g->shot_timer > 0;
  if (g->oxygen <= 0) g->terminal = 1;
  if (g->sub_y > 0) {
    g->oxygen -= 1;
    g->surface = 0;
  } else if (!g->surface) {
    if (g->diver_count == 0)
      g->terminal = 1;
    else
      *reward += surface(g, ramping);
  }
  return g->terminal;
}

/* An entity and, where it is on the board, its trail behind it. */
static void observe_list(const ent_list *l, int channel, int trail, float *grid) {
  for (int i = 0; i < l->n; i++) {
    const int32_t *e = l->v[i];
    ag__ma_set(grid, channel, e[1], e[0]);
    if (trail < 0) continue;
    const int back = e[2] ? e[0] - 1 : e[0] + 1;
    if (back >= 0 && back <= 9) ag__ma_set(grid, trail, e[1], back);
  }
}

static void observe(const void *gp, float *grid) {
  const seaquest *g = gp;
  enum { SUB_FRONT, SUB_BACK, FRIENDLY_BULLET, TRAIL, ENEMY_BULLET, FISH, SUB, OXYGEN, DIVERS, DIVER };
  ag__ma_set(grid, SUB_FRONT, g->sub_y, g->sub_x);
  ag__ma_set(grid, SUB_BACK, g->sub_y, g->sub_or ? g->sub_x - 1 : g->sub_x + 1);
  const int oxygen_cells = (g->oxygen > 0 ? g->oxygen : 0) * 10 / MAX_OXYGEN;
  for (int x = 0; x < oxygen_cells; x++) ag__ma_set(grid, OXYGEN, 9, x);
  for (int x = 9 - g->diver_count; x < 9; x++) ag__ma_set(grid, DIVERS, 9, x);
  observe_list(&g->f_bullets, FRIENDLY_BULLET, -1, grid);
  observe_list(&g->e_bullets, ENEMY_BULLET, -1, grid);
  observe_list(&g->fish, FISH, TRAIL, grid);
  observe_list(&g->subs, SUB, TRAIL, grid);
  observe_list(&g->divers, DIVER, TRAIL, grid);
}

/* Each of l's n elements: x on the board, y in y_lo..8, a direction 0/1,
 * timers (fields 3.. of w) in 0..timer_max; the unused slots zero. */
static const char *check_list(const ent_list *l, int cap, int w, int y_lo, int timer_max) {
  if (l->n < 0 || l->n > cap) return "a list's length is beyond its capacity";
  for (int i = 0; i < CAP_ENEMY; i++)
    for (int k = 0; k < W; k++) {
      const int32_t v = l->v[i][k];
      if (i >= l->n || k >= w) {
        if (v != 0) return "an unused list slot is not zero";
      } else if ((k == 0 && (v < 0 || v > 9)) || (k == 1 && (v < y_lo || v > 8)) || (k == 2 && (v & ~1)) ||
                 (k >= 3 && (v < 0 || v > timer_max))) {
        return "an entity is off the board or a field out of range";
      }
    }
  return NULL;
}

static const char *check(const int32_t *v) {
  seaquest g;
  memcpy(&g, v, sizeof g);
  if (g.sub_x < 0 || g.sub_x > 9 || g.sub_y < 0 || g.sub_y > 8 || (g.sub_or & ~1))
    return "the submarine is off rows 0-8";
  if (g.sub_or ? g.sub_x < 1 : g.sub_x > 8) return "the submarine's back is off the board";
  if (g.oxygen < -1 || g.oxygen > MAX_OXYGEN) return "the oxygen is outside -1..200";
  if (g.diver_count > 6 || g.diver_count < -(1 << 30)) return "the diver count is above 6";
  if (g.e_spawn_speed < 1 || g.e_spawn_speed > INIT_SPAWN_SPEED || g.e_spawn_timer < 0 ||
      g.e_spawn_timer > INIT_SPAWN_SPEED || g.d_spawn_timer < 0 || g.d_spawn_timer > DIVER_SPAWN_SPEED)
    return "a spawn interval or timer is out of range";
  if (g.move_speed < 1 || g.move_speed > INIT_MOVE_INTERVAL || g.shot_timer < 0 ||
      g.shot_timer > SHOT_COOL_DOWN)
    return "the move interval or the shot timer is out of range";
  if (g.ramp_index < 0 || ((g.surface | g.terminal) & ~1)) return "the ramp index or a flag is out of range";
  const char *why = check_list(&g.f_bullets, CAP_F_BULLET, F_BULLET_W, 0, 0);
  if (!why) why = check_list(&g.e_bullets, CAP_ENEMY, E_BULLET_W, 1, 0);
  if (!why) why = check_list(&g.fish, CAP_ENEMY, FISH_W, 1, INIT_MOVE_INTERVAL);
  if (!why) why = check_list(&g.subs, CAP_ENEMY, SUB_W, 1, ENEMY_SHOT_INTERVAL);
  if (!why) why = check_list(&g.divers, CAP_DIVER, DIVER_W, 1, DIVER_MOVE_INTERVAL);
  return why;
}

const ag__minatar_game ag__minatar_seaquest = {
    .name = "seaquest",
    .channels = 10,
    .n_actions = 6,
    .actions = {AG__MA_NOOP, AG__MA_LEFT, AG__MA_UP, AG__MA_RIGHT, AG__MA_DOWN, AG__MA_FIRE},
    .size = sizeof(seaquest),
    .reset = reset,
    .act = act,
    .observe = observe,
    .check = check,
};
