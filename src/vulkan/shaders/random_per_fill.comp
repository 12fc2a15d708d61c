// random_per_fill.comp — AG__K_PER_FILL: leaves pos .. pos+k-1 =
// state[0] ^ alpha (without a mask), or those of them whose mask byte is 0
// = 0 (a masking pass), then their ancestors level by level, then the root.
// Steps s_begin .. s_end-1 of: 0 the leaves; 1 .. depth-1 the levels
// depth-2 .. 0 (the nodes above the range, as the CPU's ranges: lo / 16,
// hi / 16 a level); depth the root. A dispatch of several steps is one work
// group (a barrier between steps). The host has checked pos >= 0, k >= 1 and
// pos + k <= 16^depth.
//
// The power: the CPU takes libm's pow (CUDA its own), whose last bits no
// shader can reproduce; this is ag__per_pow (PER_SET's, within about 2 ulp
// of pow), which the test's tolerance for the tree (1e-12) covers.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "random_f64.glsl"
#include "random_per.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P { AGPC_RANDOM_PER_FILL(AGPC_FIELD) } p;

void main() {
  const int64_t first = int64_t(gl_GlobalInvocationID.x), stride = int64_t(gl_NumWorkGroups.x) * 256;
  for (int s = p.s_begin; s < p.s_end; s++) {
    if (s > p.s_begin) step_barrier();
    if (s == 0 && p.mask != 0ul) {
      const uint64_t leaves = p.tree + 8ul * uint64_t(per_offset(p.depth - 1) + p.pos);
      for (int64_t i = first; i < p.k; i += stride)
        if (mask_byte(p.mask + uint64_t(p.pos + i)) == 0u) TreeF64(leaves + 8ul * uint64_t(i)).v = 0.0lf;
    } else if (s == 0) {
      const float st = at(p.state, 0).v;
      const float a = p.alpha;
      // per_pow's domain: a positive normal state and alpha in [0, 1]; pow's
      // values elsewhere (the CPU's pow(state, alpha) is what is matched)
      double v;
      if (st > 0.0 && (floatBitsToUint(st) >> 23) != 0u && a >= 0.0 && a <= 1.0)
        v = per_pow(st, a);
      else
        v = pow_d(double(st), double(a));
      const uint64_t leaves = p.tree + 8ul * uint64_t(per_offset(p.depth - 1) + p.pos);
      for (int64_t i = first; i < p.k; i += stride) TreeF64(leaves + 8ul * uint64_t(i)).v = v;
    } else if (s == p.depth) {
      if (first == 0) per_recompute(p.tree, p.depth, p.depth, 0);
    } else {
      const int d = p.depth - 1 - s, sh = 4 * s;
      const int64_t lo = p.pos >> sh, hi = (p.pos + p.k - 1) >> sh;
      for (int64_t node = lo + first; node <= hi; node += stride) per_recompute(p.tree, p.depth, d, node);
    }
  }
}
