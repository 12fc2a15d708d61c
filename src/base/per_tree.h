/* per_tree.h — the sum tree of prioritized replay (kernels.h), written once
 * for the CPU reference and the CUDA kernels: layout, the recomputation of
 * one node, and the descent that finds the leaf of a running-sum value. */
#ifndef AGRL_CORE_PER_TREE_H
#define AGRL_CORE_PER_TREE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/hd.h"
#include "base/kernels.h"
#include "base/philox.h"

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

/* Whether PER_SET writes leaf l: inside the table's columns and, with a
 * mask, one whose byte is not 0. */
AG__HD int ag__per_takes(const ag__per_set_args *a, int64_t l) {
  return l >= 0 && l < a->cols && (!a->mask || a->mask[l] != 0);
}

/* The priority PER_SET keeps: at least 1e-12 (a NaN becomes 1e-12 too). */
AG__HD float ag__per_clamp(float p) { return p > 1e-12f ? p : 1e-12f; }

/* prio ^ alpha for a priority clamped as PER_SET clamps it (ag__per_clamp:
 * at least 1e-12, so a normal float; +inf allowed) and alpha in [0, 1],
 * within 1e-15 of pow (about 2 ulp; alpha 0 and 1 exact), in fewer
 * dependent steps than a general pow: every device's PER_SET leaves take
 * it (the CPU's 8 at a time with AVX-512 where it can, the same steps;
 * PER_FILL takes pow).
 * p = m 2^e with m in [sqrt(1/2), sqrt(2)], both exact from the float's
 * bits; alpha e = k + r with k an integer and r in [-1/2, 1/2], exact;
 * p^alpha = 2^k exp(x), x = alpha ln(m) + r ln(2) in [-0.7, 0.7]. ln(m) is
 * 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: 11 terms of the odd
 * series; exp(x) is its Taylor series to x^16. Both polynomials go by
 * Estrin's scheme (independent pairs, then powers of x), so that the chain
 * of a thread is a few multiply-adds deep instead of one a coefficient. */
AG__HD double ag__per_pow(float p, float alpha) {
  if (alpha == 0.0f) return 1.0;
  if (alpha == 1.0f || !(p < INFINITY)) return (double)p;
  uint32_t fb;
  memcpy(&fb, &p, sizeof fb);
  int e = (int)(fb >> 23) - 127;
  const uint32_t frac = fb & 0x7fffffu;
  uint64_t mb = (uint64_t)frac << 29 | (uint64_t)1023 << 52;
  if (frac > 0x3504f3u) mb -= (uint64_t)1 << 52, e += 1; /* m > sqrt(2): halve it */
  double m;
  memcpy(&m, &mb, sizeof m);
  /* s without a division (whose CUDA code branches to a slow path): m + 1
   * is in [1.7, 2.5]; y, an approximate 1 / (m + 1) (the device's
   * rcp.approx, the host's float division: 2^-22 or better), one
   * third-order step (2^-66), then s = (m - 1) y with its remainder's
   * correction (within an ulp). */
  const double num = m - 1.0, den = m + 1.0;
#ifdef __CUDA_ARCH__
  double y;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(den));
#else
  double y = (double)(1.0f / (float)den);
#endif
  const double err = fma(-den, y, 1.0);
  y = fma(y, fma(err, err, err), y);
  const double s0 = num * y, s = fma(fma(-den, s0, num), y, s0);
  /* ln(m) = 2 s + s z R(z), z = s^2, R = sum over j of 2 z^j / (2 j + 3) */
  const double z = s * s, z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
  const double r0 = fma(2.0 / 5, z, 2.0 / 3), r1 = fma(2.0 / 9, z, 2.0 / 7), r2 = fma(2.0 / 13, z, 2.0 / 11),
               r3 = fma(2.0 / 17, z, 2.0 / 15), r4 = fma(2.0 / 21, z, 2.0 / 19);
  const double R = fma(fma(r3, z2, r2), z4, fma(r1, z2, r0)) + r4 * z8;
  const double lnm = fma(s * z, R, 2.0 * s);
  const double a = (double)alpha, ea = a * (double)e, k = rint(ea), r = ea - k;
  const double ln2_hi = 0x1.62e42fefa39efp-1, ln2_lo = 0x1.abc9e3b39803fp-56;
  const double x = fma(a, lnm, fma(r, ln2_hi, r * ln2_lo));
  /* exp(x) = 1 + x + x^2 Q(x), Q = sum over i of x^i / (i + 2)! */
  const double x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
  const double q0 = fma(1.0 / 6, x, 1.0 / 2), q1 = fma(1.0 / 120, x, 1.0 / 24),
               q2 = fma(1.0 / 5040, x, 1.0 / 720), q3 = fma(1.0 / 362880, x, 1.0 / 40320),
               q4 = fma(1.0 / 39916800, x, 1.0 / 3628800), q5 = fma(1.0 / 6227020800.0, x, 1.0 / 479001600),
               q6 = fma(1.0 / 1307674368000.0, x, 1.0 / 87178291200.0), q7 = 1.0 / 20922789888000.0;
  const double Q =
      fma(fma(fma(q7, x2, q6), x4, fma(q5, x2, q4)), x8, fma(fma(q3, x2, q2), x4, fma(q1, x2, q0)));
  const double ex = 1.0 + fma(x2, Q, x);
  const uint64_t kb = (uint64_t)((int64_t)k + 1023) << 52; /* 2^k: |k| < 128 */
  double scale;
  memcpy(&scale, &kb, sizeof scale);
  return ex * scale;
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
      if (v < x[c])
        pick = c;
      else
        v -= x[c];
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
/* The beta of a sample: *beta_dev when given (a recorded step's value of
 * now), clamped to [0, 1] (NaN as 1), else beta. */
AG__HD float ag__per_beta_of(float beta, const float *beta_dev) {
  if (!beta_dev) return beta;
  const float b = *beta_dev;
  return b >= 0.0f ? (b <= 1.0f ? b : 1.0f) : (b < 0.0f ? 0.0f : 1.0f);
}

AG__HD float ag__per_weight(double leaf, double root, int64_t size, float beta) {
  double p = root > 0.0 ? leaf / root : 0.0;
  double x = (double)(size > 0 ? size : 1) * p;
  return x > 0.0 ? (float)pow(x, -(double)beta) : 0.0f;
}

#endif /* AGRL_CORE_PER_TREE_H */
