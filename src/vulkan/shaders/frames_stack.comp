// frames_stack.comp — AG__K_FRAME_STACK: a frame table's stacked
// observations rebuilt from its frames with the CPU's ring arithmetic
// (frames_ring.glsl, base/frames.h step for step). Phases:
//   0: the columns, one work group: given ones clamped (idx), or drawn
//      (frames_draw from the counter every invocation read); after a
//      barrier the counter += B * FRAMES_TRIES (drawn only);
//   1: the same over many groups, without the counter (random_advance
//      follows);
//   2: the stacks: a work group per transition and half (obs, next_obs),
//      striding over them: invocation 0 walks the stack's entries into
//      shared memory, then the group writes its values. f32 values are
//      v / 255 correctly rounded, made from integers (a device's float
//      division need not round correctly). u8 values go a 32-bit word an
//      invocation, the word stored whole when all its bytes are the
//      stack's, else only its own bytes with atomicAnd / atomicOr (a stack
//      of D bytes starts anywhere in a word; its neighbours belong to the
//      stacks beside it or to other memory).
// The ring's size and position are read on the device and clamped, so a
// recorded call replayed after more adds reads the ring as it is then.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "random_philox.glsl"
#include "frames_ring.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32 { uint v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32 { int v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64 { int64_t v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U64 { uint64_t v; };
layout(push_constant) uniform P { AGPC_FRAMES_STACK(AGPC_FIELD) } p;

shared int64_t src[FRAMES_MAX_STACK];

// ag__frames_ring_of: the ring as the device holds it, clamped
FramesRing ring_of() {
  const int64_t size = I64(p.size_dev).v, pos = I64(p.pos_dev).v, fr = int64_t(p.hw) * int64_t(p.c) + 1l;
  FramesRing g;
  g.capacity = p.capacity;
  g.size = size < 0 ? 0l : (size > p.capacity ? p.capacity : size);
  g.pos = pos < 0 ? 0l : (pos >= p.capacity ? p.capacity - 1 : pos);
  g.n_envs = p.n_envs;
  g.stack = p.stack;
  g.flags = p.frames;
  g.ld = fr;
  g.off = fr - 1l;
  return g;
}

// ag__frames_pixel: value e of the stack whose entries are src
uint pixel(int64_t e) {
  const int64_t hw = int64_t(p.hw), plane = e / hw, px = e - plane * hw;
  const int64_t i = plane / p.c, ch = plane - i * p.c;
  return frames_byte(p.frames + uint64_t(src[int(i)] * (hw * p.c + 1l) + px * p.c + ch));
}

// the bits of the f32 nearest v / 255 (v in 0 .. 255), as (float)v / 255.0f
// rounds it: the quotient's 24 bits q from v 2^s / 255 (s = 31 - msb(v):
// 2^23 <= q < 2^24 for 1 <= v <= 254), rounded up when the remainder is past
// half of 255 (never exactly half: 255 is odd)
uint div255_bits(uint v) {
  if (v == 0u) return 0u;
  if (v == 255u) return 0x3f800000u;
  const int msb = findMSB(v);
  const uint64_t n = uint64_t(v) << uint(31 - msb);
  uint64_t q = n / 255ul;
  if (n - q * 255ul >= 128ul) q++;
  int k = msb - 8; // v / 255 in [2^k, 2^(k+1))
  if (q == 0x1000000ul) {
    q >>= 1;
    k++;
  }
  return (uint(k + 127) << 23) | (uint(q) - 0x800000u);
}

void columns() {
  const FramesRing g = ring_of();
  const uint64_t base = p.idx != 0ul ? 0ul : U64(p.counter).v;
  const int64_t stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int64_t j = int64_t(gl_GlobalInvocationID.x); j < p.B; j += stride) {
    int64_t x;
    if (p.idx != 0ul) {
      x = p.idx_dtype == 4 ? int64_t(I32(p.idx + 4ul * uint64_t(j)).v) : I64(p.idx + 8ul * uint64_t(j)).v;
      x = x < 0 ? 0l : (x >= p.capacity ? p.capacity - 1 : x);
    } else {
      x = frames_draw(g, p.seed, base, j);
    }
    I64(p.cols + 8ul * uint64_t(j)).v = x;
  }
  if (p.phase == 0 && p.idx == 0ul) {
    barrier(); // every invocation has read the counter
    if (gl_LocalInvocationID.x == 0u) U64(p.counter).v = base + uint64_t(p.B) * uint64_t(FRAMES_TRIES);
  }
}

void stacks() {
  const int64_t D = int64_t(p.stack) * int64_t(p.c) * int64_t(p.hw);
  const uint t = gl_LocalInvocationID.x;
  for (int64_t item = int64_t(gl_WorkGroupID.x); item < 2 * p.B; item += int64_t(gl_NumWorkGroups.x)) {
    const int64_t j = item >> 1;
    const bool nxt = (item & 1l) != 0l;
    if (t == 0u) { // ag__frames_walk from the column (obs) or the copy's next entry (next_obs)
      const FramesRing g = ring_of();
      const int64_t x = I64(p.cols + 8ul * uint64_t(j)).v;
      int64_t cur = nxt ? frames_step(g, x, 1) : x;
      src[p.stack - 1] = cur;
      for (int i = p.stack - 2; i >= 0; i--) {
        cur = frames_back(g, cur);
        src[i] = cur;
      }
    }
    barrier(); // the walk is in
    const uint64_t dst = nxt ? p.next_obs : p.obs;
    if (p.out_dtype == 0) {
      for (int64_t e = int64_t(t); e < D; e += 256)
        U32(dst + 4ul * uint64_t(j * D + e)).v = div255_bits(pixel(e));
    } else {
      const uint64_t b0 = dst + uint64_t(j * D), b1 = b0 + uint64_t(D), w0 = b0 & ~3ul;
      const int64_t words = int64_t((b1 - w0 + 3ul) >> 2);
      for (int64_t w = int64_t(t); w < words; w += 256) {
        const uint64_t word = w0 + 4ul * uint64_t(w);
        uint bits = 0u, mask = 0u;
        for (uint q = 0u; q < 4u; q++) {
          const uint64_t b = word + q;
          if (b < b0 || b >= b1) continue;
          bits |= pixel(int64_t(b - b0)) << (8u * q);
          mask |= 0xffu << (8u * q);
        }
        if (mask == 0xffffffffu) {
          U32(word).v = bits;
        } else {
          atomicAnd(U32(word).v, ~mask);
          atomicOr(U32(word).v, bits);
        }
      }
    }
    barrier(); // the walk is read before the next item's
  }
}

void main() {
  if (p.phase == 2)
    stacks();
  else
    columns();
}
