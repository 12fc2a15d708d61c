// random_per_sample.comp — AG__K_PER_SAMPLE: sample j < B descends the tree
// to the leaf whose running-sum interval holds u_j = (j + v_j) / B * root
// (v_j: 53 bits of draw *counter + j of the Philox stream `seed`), idx[j] =
// that leaf, w[j] = (size leaf / root) ^ -beta over the batch's largest;
// afterwards *counter += B. Phases:
//   0: all of it in one work group: the samples, a barrier, the largest
//      weight (a reduction in shared memory), the weights divided, the
//      counter advanced after every invocation has read it;
//   1: the samples only (many groups), their weights not yet divided;
//   2: one group: the largest weight of phase 1's, the division, the counter.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "random_philox.glsl"
#include "random_f64.glsl"
#include "random_per.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32 { int v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U64 { uint64_t v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64 { int64_t v; };
layout(push_constant) uniform P { AGPC_RANDOM_PER_SAMPLE(AGPC_FIELD) } p;

shared float red[256];

// one level of the descent (ag__per_step): from `node` of level d - 1 to
// the child at level d whose interval holds u; u becomes the remainder
int64_t per_step(int d, int64_t node, inout double u) {
  const int64_t first = per_offset(d) + node * 16;
  double x[16];
  for (int c = 0; c < 16; c++) x[c] = tree_at(p.tree, first + c);
  int pick = -1, last = 0;
  precise double v = u;
  for (int c = 0; c < 16; c++) {
    if (x[c] > 0.0lf) last = c;
    if (pick < 0 && x[c] > 0.0lf) {
      if (v < x[c])
        pick = c;
      else
        v = v - x[c];
    }
  }
  u = v;
  return node * 16 + (pick < 0 ? last : pick);
}

// the beta of the batch (ag__per_beta_of): *beta_dev clamped to [0, 1], NaN as 1
float beta_of() {
  if (p.has_beta_dev == 0) return p.beta;
  const float b = at(p.beta_dev, 0).v;
  return b >= 0.0 ? (b <= 1.0 ? b : 1.0) : (b < 0.0 ? 0.0 : 1.0);
}

// sample j: its leaf written, its weight (ag__per_weight) returned
float draw_sample(int64_t j, uint64_t base, double root, int64_t size, float beta) {
  precise double v = double(philox_u64(p.seed, base + uint64_t(j)) >> 11) * K(0x3ca0000000000000ul); // 2^-53
  precise double t = (double(j) + v) / double(p.B);
  precise double u = t * root;
  int64_t node = 0;
  for (int d = 0; d < p.depth; d++) node = per_step(d, node, u);
  I32(p.idx + 4ul * uint64_t(j)).v = int(node);
  const double leaf = tree_at(p.tree, per_offset(p.depth - 1) + node);
  precise double q = root > 0.0lf ? leaf / root : 0.0lf;
  precise double x = double(size > 0 ? size : 1l) * q;
  const float w = x > 0.0lf ? float(pow_d(x, -double(beta))) : 0.0;
  at(p.w, j).v = w;
  return w;
}

void main() {
  const int64_t first = int64_t(gl_GlobalInvocationID.x), stride = int64_t(gl_NumWorkGroups.x) * 256;
  const uint t = gl_LocalInvocationID.x;
  uint64_t base = 0ul;
  float wmax = 0.0;
  if (p.phase != 2) {
    base = U64(p.counter).v;
    const double root = tree_at(p.tree, per_offset(p.depth));
    const int64_t size = I64(p.size_dev).v;
    const float beta = beta_of();
    for (int64_t j = first; j < p.B; j += stride) {
      const float w = draw_sample(j, base, root, size, beta);
      wmax = w > wmax ? w : wmax;
    }
    if (p.phase == 1) return;
  } else {
    for (int64_t j = first; j < p.B; j += stride) {
      const float w = at(p.w, j).v;
      wmax = w > wmax ? w : wmax;
    }
  }
  // the largest weight: max is exact, so any order gives the CPU's
  red[t] = wmax;
  barrier();
  for (uint h = 128u; h > 0u; h >>= 1) {
    if (t < h) red[t] = red[t + h] > red[t] ? red[t + h] : red[t];
    barrier();
  }
  const float m = red[0];
  for (int64_t j = first; j < p.B; j += stride) {
    // w / m in double, rounded once to float: the float quotient, correctly
    // rounded (a double quotient's second rounding to float is harmless)
    F32 o = at(p.w, j);
    o.v = m > 0.0 ? float(double(o.v) / double(m)) : 0.0;
  }
  if (t == 0u) {
    if (p.phase == 2) base = U64(p.counter).v;
    memoryBarrierBuffer();
    U64(p.counter).v = base + uint64_t(p.B);
  }
}
