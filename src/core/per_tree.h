/* per_tree.h — the sum tree of prioritized replay (kernels.h), written once
 * for the CPU reference and the CUDA kernels: layout, the recomputation of
 * one node, and the descent that finds the leaf of a running-sum value. */
#ifndef AGRL_CORE_PER_TREE_H
#define AGRL_CORE_PER_TREE_H

#include <math.h>
#include <stdint.h>

#include "core/hd.h"
#include "core/kernels.h"
#include "core/philox.h"

/* First node of level d (level `depth` is the root). */
AG__HD int64_t ag__per_offset(int d) {
  int64_t off = 0, width = AG__PER_FAN;
  for (int e = 0; e < d; e++, width *= AG__PER_FAN) off += width;
  return off;
}

/* The deepest tree: a table has at most 2^31 columns (ag_per_create), and
 * 16^8 leaves cover them. */
#define AG__PER_MAX_DEPTH 8

/* The sum of 16 children, pairwise in a fixed order: (c_i + c_i+8), then
 * those 8 folded in halves the same way. Every kernel on every device sums a
 * node this way (the CPU in vector registers, a CUDA thread in scalars), so
 * a node has the same bits whoever wrote it: the tree is a function of its
 * leaves, without drift, and the CPU and the GPU agree. */
AG__HD double ag__per_sum16(const double *ch) {
  double v[8], w[4];
  for (int i = 0; i < 8; i++) v[i] = ch[i] + ch[i + 8];
  for (int i = 0; i < 4; i++) w[i] = v[i] + v[i + 4];
  return (w[0] + w[2]) + (w[1] + w[3]);
}

/* Node `node` of level d = the sum of its children at level d + 1. */
AG__HD void ag__per_recompute(double *tree, int d, int64_t node) {
  tree[ag__per_offset(d) + node] = ag__per_sum16(tree + ag__per_offset(d + 1) + node * AG__PER_FAN);
}

/* The root = the sum of level 0. */
AG__HD void ag__per_recompute_root(double *tree, int depth) {
  tree[ag__per_offset(depth)] = ag__per_sum16(tree);
}

/* One level of the descent: from `node` of level d - 1 (0 for the root) to
 * the child at level d whose interval holds *u; *u becomes the remainder. */
AG__HD int64_t ag__per_step(const double *tree, int d, int64_t node, double *u) {
  const double *ch = tree + ag__per_offset(d) + node * AG__PER_FAN;
  /* the 16 children first, with no branch between the loads: a GPU thread
   * then waits for its line once a level, not once a child */
  double x[AG__PER_FAN];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int c = 0; c < AG__PER_FAN; c++) x[c] = ch[c];
  int pick = -1, last = 0;
  double v = *u;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int c = 0; c < AG__PER_FAN; c++) {
    if (x[c] > 0.0) last = c;
    if (pick < 0 && x[c] > 0.0) {
      if (v < x[c]) pick = c;
      else v -= x[c];
    }
  }
  *u = v;
  return node * AG__PER_FAN + (pick < 0 ? last : pick);
}

/* The leaf whose running-sum interval holds u. */
AG__HD int64_t ag__per_find(const double *tree, int depth, double u) {
  int64_t node = 0;
  for (int d = 0; d < depth; d++) node = ag__per_step(tree, d, node, &u);
  return node;
}

/* The uniform target of sample j of B (see AG__K_PER_SAMPLE). */
AG__HD double ag__per_target(uint64_t seed, uint64_t draw, int64_t j, int64_t B, double root) {
  double v = (double)(ag__philox_u64(seed, draw) >> 11) * (1.0 / 9007199254740992.0);
  return ((double)j + v) / (double)B * root;
}

/* The unnormalized importance weight of a leaf. */
AG__HD float ag__per_weight(double leaf, double root, int64_t size, float beta) {
  double p = root > 0.0 ? leaf / root : 0.0;
  double x = (double)(size > 0 ? size : 1) * p;
  return x > 0.0 ? (float)pow(x, -(double)beta) : 0.0f;
}

#endif /* AGRL_CORE_PER_TREE_H */
