// random_per_set.comp — AG__K_PER_SET: leaf idx_j = prio_j ^ alpha (prio at
// least 1e-12), j < n with 0 <= idx_j < limit (the table's columns, at most
// the tree's leaves) and, with a mask, mask[idx_j] != 0 (others skipped; the
// mask's bytes read from the aligned words that hold them), then the
// ancestors of those leaves,
// then the root; state[0] = max(state[0], prio_j).
//
// Steps s_begin .. s_end-1 of:
//   0: the high word of each named leaf = 0;
//   1: atomicMax(high word, 2^31 + j): the word holds the marker of the
//      last j naming the leaf (the one whose value the CPU keeps);
//   2: that j alone finds its marker (a compare-and-swap that writes the
//      value's high word), then writes the low word: the leaf gets the last
//      j's value whatever the order the invocations run in. A value's high
//      word is below 2^31 (a positive double), never a marker, so no other
//      j can match. state[0] by an integer atomicMax of the float's bits
//      (the priorities are positive: their order is their bits' order);
//   3 .. depth+1: the levels depth-2 .. 0: every valid j sums its ancestor
//      from its 16 children; j naming leaves under the same node write the
//      same bits, read after the same barrier;
//   depth+2: the root.
// A dispatch of several steps is one work group (a barrier between steps);
// one of a single step may have many (the barrier between dispatches).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "random_f64.glsl"
#include "random_per.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32 { int v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64 { int64_t v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer StateI32 { int v; };
layout(push_constant) uniform P { AGPC_RANDOM_PER_SET(AGPC_FIELD) } p;

// the leaf of entry j, -1 when it is skipped (ag__per_takes)
int64_t leaf_of(int64_t j) {
  const int64_t l = p.idx_dtype == 4 ? int64_t(I32(p.idx + 4ul * uint64_t(j)).v) : I64(p.idx + 8ul * uint64_t(j)).v;
  if (l < 0 || l >= p.limit) return -1l;
  return p.mask == 0ul || mask_byte(p.mask + uint64_t(l)) != 0u ? l : -1l;
}

void main() {
  const int64_t first = int64_t(gl_GlobalInvocationID.x), stride = int64_t(gl_NumWorkGroups.x) * 256;
  const int64_t leaves = per_offset(p.depth - 1);
  const int last_level_step = p.depth + 1; // step of level 0
  for (int s = p.s_begin; s < p.s_end; s++) {
    if (s > p.s_begin) step_barrier();
    if (s == last_level_step + 1) { // the root
      if (first == 0) per_recompute(p.tree, p.depth, p.depth, 0);
      continue;
    }
    int pmax = 0;
    for (int64_t j = first; j < p.n; j += stride) {
      const int64_t l = leaf_of(j);
      if (l < 0) continue;
      const uint64_t word = p.tree + 8ul * uint64_t(leaves + l);
      if (s == 0) {
        TreeU32(word + 4ul).v = 0u;
      } else if (s == 1) {
        atomicMax(TreeU32(word + 4ul).v, 0x80000000u + uint(j));
      } else if (s == 2) {
        const float raw = F32(p.prio + 4ul * uint64_t(j * p.prio_stride)).v;
        const float kept = raw > 1e-12 ? raw : 1e-12; // ag__per_clamp: NaN too
        const uint marker = 0x80000000u + uint(j);
        const uvec2 v = unpackDouble2x32(per_pow(kept, p.alpha));
        if (atomicCompSwap(TreeU32(word + 4ul).v, marker, v.y) == marker) TreeU32(word).v = v.x;
        pmax = max(pmax, floatBitsToInt(kept));
      } else {
        const int d = p.depth - 2 - (s - 3);
        per_recompute(p.tree, p.depth, d, l >> (4 * (p.depth - 1 - d)));
      }
    }
    if (s == 2 && pmax > 0) atomicMax(StateI32(p.state).v, pmax);
  }
}
