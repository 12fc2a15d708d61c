/* frames.h — the frame table's ring arithmetic (AG__K_FRAME_STACK and the
 * host side of agrl/frames.h), written once for the CPU reference, the CUDA
 * kernel and the table's own checks, so that all three agree. The Vulkan
 * shader cannot include C: src/vulkan/shaders/frames_ring.glsl repeats
 * these functions step for step, each naming its original here; a change
 * here is a change there (test_kernels compares the two bit for bit).
 *
 * Entries are written in ring order pos, pos + 1, ... (mod capacity); with
 * `size` entries held, the rank of slot x is (x - pos) mod capacity (0: the
 * next to be overwritten, capacity - 1: the newest) and x holds an entry
 * when its rank is at least capacity - size. The n_envs copies write
 * interleaved, so the same copy's previous entry is x - n_envs and its next
 * x + n_envs (mod capacity). A flag read where the table does not say it is
 * done through `flags`: the flag of slot x is flags[x * ld + off].
 */
#ifndef AGRL_BASE_FRAMES_H
#define AGRL_BASE_FRAMES_H

#include <stdint.h>

#include "base/base.h"
#include "base/hd.h"
#include "base/kernels.h"
#include "base/philox.h"

/* The longest stack (a walk keeps its columns on the stack). */
#define AG__FRAMES_MAX_STACK 64

typedef struct ag__frames_ring {
  int64_t capacity, size, pos, n_envs;
  int stack;
  const uint8_t *flags;
  int64_t ld, off;
} ag__frames_ring;

AG__HD int64_t ag__frames_rank(const ag__frames_ring *g, int64_t x) {
  return x >= g->pos ? x - g->pos : x - g->pos + g->capacity;
}

AG__HD int ag__frames_first(const ag__frames_ring *g, int64_t x) { return g->flags[x * g->ld + g->off] != 0; }

/* The same copy's entry n steps away (n may be negative), mod capacity. */
AG__HD int64_t ag__frames_step(const ag__frames_ring *g, int64_t x, int64_t n) {
  int64_t y = (x + n * g->n_envs) % g->capacity;
  return y < 0 ? y + g->capacity : y;
}

/* The stack that ends at entry x: src[stack - 1] = x, and going back,
 * src[i] = the copy's previous entry of src[i + 1], except that an entry
 * flagged first (an episode's first frame) or one whose previous entry is
 * not held repeats itself: frames before an episode's first frame are that
 * first frame. */
AG__HD void ag__frames_walk(const ag__frames_ring *g, int64_t x, int64_t *src) {
  const int64_t held = g->capacity - g->size;
  int64_t cur = x;
  src[g->stack - 1] = cur;
  for (int i = g->stack - 2; i >= 0; i--) {
    if (!ag__frames_first(g, cur) && ag__frames_rank(g, cur) - g->n_envs >= held)
      cur = ag__frames_step(g, cur, -1);
    src[i] = cur;
  }
}

/* Whether entry x is a transition that may be sampled: x is held, the
 * copy's next entry is held too (written after x) and is not an episode's
 * first frame, and the stack ending at x reaches back to an episode's first
 * frame or over stack - 1 held entries (never across the write head). */
AG__HD int ag__frames_valid(const ag__frames_ring *g, int64_t x) {
  if (x < 0 || x >= g->capacity) return 0;
  const int64_t held = g->capacity - g->size, rank = ag__frames_rank(g, x);
  if (rank < held || rank + g->n_envs >= g->capacity) return 0;
  if (ag__frames_first(g, ag__frames_step(g, x, 1))) return 0;
  int64_t cur = x;
  for (int i = 1; i < g->stack; i++) {
    if (ag__frames_first(g, cur)) return 1;
    if (ag__frames_rank(g, cur) - g->n_envs < held) return 0;
    cur = ag__frames_step(g, cur, -1);
  }
  return 1;
}

/* Draw j: tries t = 0 .. AG__FRAMES_TRIES - 1 each take a rank uniformly
 * among the m = size - n_envs candidates (capacity - size .. capacity -
 * n_envs - 1) from draw base + j * AG__FRAMES_TRIES + t, and the first
 * valid one is taken. When every try fails, the candidates after the last
 * try (in rank order, wrapping among them) are searched for the first valid
 * one; when there is none, the last try is returned. */
AG__HD int64_t ag__frames_draw(const ag__frames_ring *g, uint64_t seed, uint64_t base, int64_t j) {
  const int64_t m = g->size - g->n_envs, held = g->capacity - g->size;
  if (m < 1) return 0;
  int64_t r = 0;
  for (int t = 0; t < AG__FRAMES_TRIES; t++) {
    r = ag__philox_below(seed, base + (uint64_t)j * AG__FRAMES_TRIES + (uint64_t)t, m);
    const int64_t x = (g->pos + held + r) % g->capacity;
    if (ag__frames_valid(g, x)) return x;
  }
  for (int64_t q = 1; q < m; q++) {
    const int64_t x = (g->pos + held + (r + q) % m) % g->capacity;
    if (ag__frames_valid(g, x)) return x;
  }
  return (g->pos + held + r) % g->capacity;
}

/* The ring as the kernel reads it from the device (values outside their
 * ranges clamped: no read leaves the table). */
AG__HD void ag__frames_ring_of(const ag__frame_stack_args *a, ag__frames_ring *g) {
  const int64_t size = *a->size_dev;
  g->capacity = a->capacity;
  g->size = size < 0 ? 0 : (size > a->capacity ? a->capacity : size);
  g->pos = ag__clamp_index(*a->pos_dev, a->capacity);
  g->n_envs = a->n_envs;
  g->stack = a->stack;
  g->flags = a->frames;
  g->ld = a->h * a->w * a->c + 1;
  g->off = a->h * a->w * a->c;
}

/* Element e (0 .. stack * c * h * w - 1) of the stack whose entries are
 * src: slot i = e / (c h w), channel ch, pixel p = y w + x. */
AG__HD uint8_t ag__frames_pixel(const ag__frame_stack_args *a, const int64_t *src, int64_t e) {
  const int64_t hw = a->h * a->w, plane = e / hw, p = e - plane * hw;
  const int64_t i = plane / a->c, ch = plane - i * a->c;
  return a->frames[src[i] * (a->h * a->w * a->c + 1) + p * a->c + ch];
}

AG__HD void ag__frames_put(const ag__frame_stack_args *a, void *out, int64_t k, uint8_t v) {
  if (a->out_dtype == AG_U8)
    ((uint8_t *)out)[k] = v;
  else
    ((float *)out)[k] = (float)v / 255.0f;
}

#endif /* AGRL_BASE_FRAMES_H */
