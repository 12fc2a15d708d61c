// random_per.glsl — base/per_tree.h's layout and node sums for the shaders
// of the prioritized-replay tree (fan-out 16, doubles). The tree is
// `coherent`: a dispatch of one work group runs several levels, one after
// another with a barrier between them, each reading what the one before
// wrote. Needs random_f64.glsl.
layout(buffer_reference, std430, buffer_reference_align = 8) coherent buffer TreeF64 { double v; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer TreeU32 { uint v; };

// the first node of level d (ag__per_offset): 16 + 16^2 + ... + 16^d
int64_t per_offset(int d) { return ((1l << (4 * (d + 1))) - 16l) / 15l; }

double tree_at(uint64_t tree, int64_t i) { return TreeF64(tree + 8ul * uint64_t(i)).v; }

// the sum of the 16 nodes from node `first`, in ag__per_sum16's order
double per_sum16(uint64_t tree, int64_t first) {
  double c[16];
  for (int i = 0; i < 16; i++) c[i] = tree_at(tree, first + i);
  precise double v0 = c[0] + c[8], v1 = c[1] + c[9], v2 = c[2] + c[10], v3 = c[3] + c[11];
  precise double v4 = c[4] + c[12], v5 = c[5] + c[13], v6 = c[6] + c[14], v7 = c[7] + c[15];
  precise double w0 = v0 + v4, w1 = v1 + v5, w2 = v2 + v6, w3 = v3 + v7;
  precise double s = (w0 + w2) + (w1 + w3);
  return s;
}

// node `node` of level d = the sum of its 16 children at level d + 1; the
// root (d = depth) = the sum of level 0 (ag__per_recompute(_root))
void per_recompute(uint64_t tree, int depth, int d, int64_t node) {
  if (d == depth)
    TreeF64(tree + 8ul * uint64_t(per_offset(depth))).v = per_sum16(tree, 0);
  else
    TreeF64(tree + 8ul * uint64_t(per_offset(d) + node)).v = per_sum16(tree, per_offset(d + 1) + node * 16);
}

// the byte at address b (a mask of PER_SET and PER_FILL), from the aligned
// word that holds it (each allocation has room past its end for that word)
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer MaskU32 { uint v; };
uint mask_byte(uint64_t b) { return (MaskU32(b & ~3ul).v >> ((uint(b) & 3u) * 8u)) & 0xffu; }

// the barrier between two steps of a one-group dispatch: the tree's writes
// before it are seen by every invocation after it
void step_barrier() {
  memoryBarrierBuffer();
  barrier();
}
