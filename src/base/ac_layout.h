/* ac_layout.h — where AG__K_ACGRAD's scratch holds what, for every backend
 * (included from C and from CUDA C++).
 *
 * Every block starts on a 16-byte boundary of ws. Parts of the hidden
 * activations: 0 the actor on s' (TD3: the target actor), 1 the actor on s,
 * 2 + k critic k on (s, a), 4 + k target k on (s', a'), 6 + k critic k
 * (updated) on (s, a~). tiles: the output-layer kernels' groups of
 * AG__AC_TILE transitions, a partial sum each.
 */
#ifndef AGRL_BASE_AC_LAYOUT_H
#define AGRL_BASE_AC_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/kernels.h"

#define AG__AC_TILE 8
#define AG__AC_PARTS 8

/* A sum over the batch in groups of AG__AC_TILE transitions, the groups'
 * sums added in order: the CUDA kernels' partial sums, which the CPU's
 * reference and fast path add up the same way. */
typedef struct ag__tiled {
  float total, part;
} ag__tiled;

static inline void ag__tiled_add(ag__tiled *t, int64_t b, int64_t B, float v) {
  t->part += v;
  if (b % AG__AC_TILE == AG__AC_TILE - 1 || b == B - 1) t->total += t->part, t->part = 0.0f;
}

static inline float ag__tiled_sum(const float *v, int64_t B) {
  ag__tiled t = {0.0f, 0.0f};
  for (int64_t b = 0; b < B; b++) ag__tiled_add(&t, b, B, v[b]);
  return t.total;
}

typedef struct ag__ac_layout {
  float *x0, *xn, *xp; /* [s; a], [s'; a'], [s; a~]: [S + A, B] each */
  float *rd;           /* the target's reward (or n-step return) and done (or discount) [2, B] */
  float *h[AG__AC_PARTS][AG__AC_MAX_LAYERS - 1];
  float *dc[2][AG__AC_MAX_LAYERS - 1], *dch[2]; /* the critics' deltas: hidden layers, outputs [1, B] */
  float *dq[2][AG__AC_MAX_LAYERS - 1];          /* the actor's loss through critic k */
  float *da[AG__AC_MAX_LAYERS - 1], *dah;       /* the actor's deltas: hidden layers, outputs [nA, B] */
  float *p;                                     /* Q_k(s, a) [2, B] */
  float *lpn, *lp;                              /* log pi(a'|s'), log pi(a~|s) [B] */
  float *hout, *eps;                            /* the actor's outputs on s [nA, B], its normals [A, B] */
  float *cpart, *apart, *lpart;                 /* partial sums: 2 x tiles, tiles, tiles */
  float *pv;                                    /* 3 x 4 optimizer step values: critic, actor, alpha */
  size_t floats;                                /* the scratch's length */
} ag__ac_layout;

static inline float *ag__ac_take(float *base, size_t *cur, int64_t n) {
  float *p = base ? base + *cur : NULL;
  *cur += ((size_t)n + 3) & ~(size_t)3;
  return p;
}

/* The layout of a->ws (a->ws NULL: the pointers NULL, floats still set). */
static inline ag__ac_layout ag__ac_layout_of(const ag__acgrad_args *a) {
  ag__ac_layout y;
  memset(&y, 0, sizeof y);
  float *w = a->ws;
  size_t c = 0;
  const int64_t B = a->src.B, X = a->S + a->A, H = a->L - 1, nA = a->td3 ? a->A : 2 * a->A;
  const int64_t tiles = (B + AG__AC_TILE - 1) / AG__AC_TILE;
  y.x0 = ag__ac_take(w, &c, X * B), y.xn = ag__ac_take(w, &c, X * B), y.xp = ag__ac_take(w, &c, X * B);
  y.rd = ag__ac_take(w, &c, 2 * B);
  for (int p = 0; p < AG__AC_PARTS; p++)
    for (int i = 0; i < H; i++) y.h[p][i] = ag__ac_take(w, &c, a->hidden[i] * B);
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < H; i++) {
      y.dc[k][i] = ag__ac_take(w, &c, a->hidden[i] * B);
      y.dq[k][i] = ag__ac_take(w, &c, a->hidden[i] * B);
    }
    y.dch[k] = ag__ac_take(w, &c, B);
  }
  for (int i = 0; i < H; i++) y.da[i] = ag__ac_take(w, &c, a->hidden[i] * B);
  y.dah = ag__ac_take(w, &c, nA * B);
  y.p = ag__ac_take(w, &c, 2 * B), y.lpn = ag__ac_take(w, &c, B), y.lp = ag__ac_take(w, &c, B);
  y.hout = ag__ac_take(w, &c, nA * B), y.eps = ag__ac_take(w, &c, a->A * B);
  y.cpart = ag__ac_take(w, &c, 2 * tiles), y.apart = ag__ac_take(w, &c, tiles);
  y.lpart = ag__ac_take(w, &c, tiles), y.pv = ag__ac_take(w, &c, 12);
  y.floats = c;
  return y;
}

/* The call's normal draws after its index draws (kernels.h's order): a'
 * first, then (SAC with the actor) a~; and all of the call's draws. */
static inline uint64_t ag__ac_draws(const ag__acgrad_args *a) {
  return (a->src.idx ? 0 : (uint64_t)a->src.B) + (uint64_t)(a->A * a->src.B) +
         (a->actor && !a->td3 ? (uint64_t)(a->A * a->src.B) : 0);
}

#endif /* AGRL_BASE_AC_LAYOUT_H */
