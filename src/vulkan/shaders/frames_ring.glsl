// frames_ring.glsl — base/frames.h in GLSL: a frame table's ring (the rank
// of a slot, a copy's neighbouring entries, one step of a stack's walk,
// which entries may be sampled, the draw of a transition), step for step,
// so that the shaders take the CPU's and CUDA's columns and stacks. Each
// function names the one of base/frames.h it mirrors; a change there is a
// change here. Needs common.glsl and random_philox.glsl.
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer FramesU32 { uint v; };

// base/frames.h's AG__FRAMES_MAX_STACK and kernels.h's AG__FRAMES_TRIES
#define FRAMES_MAX_STACK 64
#define FRAMES_TRIES 64

// ag__frames_ring: entries written in ring order from pos; the flag of slot
// x is the byte at flags + x * ld + off
struct FramesRing {
  int64_t capacity, size, pos, n_envs;
  int stack;
  uint64_t flags;
  int64_t ld, off;
};

// the byte at address b, from the aligned word that holds it (each
// allocation has room past its end for that word)
uint frames_byte(uint64_t b) { return (FramesU32(b & ~3ul).v >> ((uint(b) & 3u) * 8u)) & 0xffu; }

// ag__frames_rank
int64_t frames_rank(FramesRing g, int64_t x) { return x >= g.pos ? x - g.pos : x - g.pos + g.capacity; }

// ag__frames_first
bool frames_first(FramesRing g, int64_t x) { return frames_byte(g.flags + uint64_t(x * g.ld + g.off)) != 0u; }

// ag__frames_step for n = 1 or -1 (the only steps the kernel takes), x in
// 0 .. capacity-1: the same value without a remainder of a negative number
// (whose sign GLSL leaves undefined)
int64_t frames_step(FramesRing g, int64_t x, int n) {
  int64_t y = x + int64_t(n) * g.n_envs;
  if (y < 0) y += g.capacity;
  if (y >= g.capacity) y -= g.capacity;
  return y;
}

// one step back of ag__frames_walk: the entry of the slot before cur's,
// cur itself when cur is flagged first or its copy's previous entry is not
// held
int64_t frames_back(FramesRing g, int64_t cur) {
  const int64_t held = g.capacity - g.size;
  return !frames_first(g, cur) && frames_rank(g, cur) - g.n_envs >= held ? frames_step(g, cur, -1) : cur;
}

// ag__frames_valid
bool frames_valid(FramesRing g, int64_t x) {
  if (x < 0 || x >= g.capacity) return false;
  const int64_t held = g.capacity - g.size, rank = frames_rank(g, x);
  if (rank < held || rank + g.n_envs >= g.capacity) return false;
  if (frames_first(g, frames_step(g, x, 1))) return false;
  int64_t cur = x;
  for (int i = 1; i < g.stack; i++) {
    if (frames_first(g, cur)) return true;
    if (frames_rank(g, cur) - g.n_envs < held) return false;
    cur = frames_step(g, cur, -1);
  }
  return true;
}

// ag__frames_draw (every operand of % is non-negative)
int64_t frames_draw(FramesRing g, uint64_t seed, uint64_t base, int64_t j) {
  const int64_t m = g.size - g.n_envs, held = g.capacity - g.size;
  if (m < 1) return 0l;
  int64_t r = 0l;
  for (int t = 0; t < FRAMES_TRIES; t++) {
    r = philox_below(seed, base + uint64_t(j) * uint64_t(FRAMES_TRIES) + uint64_t(t), m);
    const int64_t x = (g.pos + held + r) % g.capacity;
    if (frames_valid(g, x)) return x;
  }
  for (int64_t q = 1l; q < m; q++) {
    const int64_t x = (g.pos + held + (r + q) % m) % g.capacity;
    if (frames_valid(g, x)) return x;
  }
  return (g.pos + held + r) % g.capacity;
}
