/* minatar.h — what the MinAtar games (minatar_*.c) share with minatar.c,
 * which wraps each of them as built-in tasks: the game's rules on a state of
 * int32_t fields, driven with numpy's legacy generator (np_random.h) exactly
 * as the minatar package 1.0.15 drives its Python games.
 *
 * A game's `act` and `reset` are the package's Env.act and Env.reset: the
 * same draws in the same order, the same arithmetic. minatar.c adds what the
 * package's Environment adds: sticky actions (one rand() every step, before
 * the game's act) and the minimal action set.
 */
#ifndef AGRL_ENV_MINATAR_H
#define AGRL_ENV_MINATAR_H

#include <stddef.h>
#include <stdint.h>

#include "env/np_random.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MinAtar's action indices (its action_map: n l u r d f). */
enum { AG__MA_NOOP = 0, AG__MA_LEFT, AG__MA_UP, AG__MA_RIGHT, AG__MA_DOWN, AG__MA_FIRE };

#define AG__MA_GRID 10 /* the board is 10 x 10 */

/* The int32_t fields of each game's state (its file checks the count). */
#define AG__MA_BREAKOUT_INTS (8 + 100)
#define AG__MA_SPACE_INVADERS_INTS (1 + 300 + 7)
#define AG__MA_ASTERIX_INTS (2 + 40 + 8)
#define AG__MA_FREEWAY_INTS (32 + 4)
#define AG__MA_SEAQUEST_INTS (13 + 5 * (1 + 64 * 5))
#define AG__MA_MAX_INTS 2048

typedef struct ag__minatar_game {
  const char *name; /* the package's module: "breakout" */
  int channels;     /* the package's channel count, in its order */
  int n_actions;    /* the minimal action set's size */
  int actions[6];   /* agrl's action i is MinAtar's action actions[i] */
  size_t size;      /* bytes of the game's state, a struct of int32_t fields only */
  /* Env.reset, drawing from r. */
  void (*reset)(void *g, ag__mt *r);
  /* Env.act with MinAtar action a (0..5) on a game not yet ended: adds the
   * reward to *reward, returns 1 when the game ended. */
  int (*act)(void *g, ag__mt *r, int a, int ramping, int *reward);
  /* Env.state: sets to 1 the cells that are true, grid[(c * 10 + y) * 10 + x]
   * (grid all 0 on entry). */
  void (*observe)(const void *g, float *grid);
  /* Checks the state's fields (size / 4 values, in their order) for an image:
   * NULL if the game can go on from them without leaving the board, else
   * what is wrong. */
  const char *(*check)(const int32_t *v);
} ag__minatar_game;

extern const ag__minatar_game ag__minatar_breakout, ag__minatar_freeway, ag__minatar_asterix,
    ag__minatar_space_invaders, ag__minatar_seaquest;

/* Sets channel c's cell at row y, column x of an observation (agrl/env.h's
 * channel-major layout). */
static inline void ag__ma_set(float *grid, int c, int y, int x) {
  grid[(c * AG__MA_GRID + y) * AG__MA_GRID + x] = 1.0f;
}

/* Python's floor division and modulo for ints (rounding toward minus infinity). */
static inline int32_t ag__floordiv(int32_t a, int32_t b) {
  int32_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

#ifdef __cplusplus
}
#endif
#endif /* AGRL_ENV_MINATAR_H */
