// linalg_reduce.comp — AG__K_REDUCE over x [rows, cols]: sums (axis 0, 1, 2)
// and maxima with the first maximum's index (axis 0, 1).
//
// A work group of 256 invocations is `lanes` outputs (consecutive along the
// output, lanes a power of two) times 256 / lanes splits of the reduced
// line: split s takes the elements s, s + splits, s + 2 splits, ... of its
// line, summing them in four accumulators by turn (element s + q splits into
// accumulator q % 4, combined as (a0 + a1) + (a2 + a3)), and the splits are
// then combined by a tree in shared memory, always the same pairs. The
// host picks lanes and splits from the shape alone, so the same inputs give
// the same bits. lanes = 256 is one invocation per output, an exact
// sequential sum. Axis 2 is one work group over the elements in storage
// order (column by column), each invocation walking the flat index by 256
// without a division.
//
// MAX: each split keeps the first of its largest values, skipping NaN; the
// tree keeps the larger, the lower index on a tie. That is the CPU's
// sequential scan (best = x0; take x_i when x_i > best) unless x0 is NaN, in
// which case the scan keeps NaN at index 0: checked at the end.
#version 460
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"
#include "linalg_index.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P { AGPC_LINALG_REDUCE(AGPC_FIELD) } p;

shared float sv[256];
shared int64_t si[256];

float elem(int64_t o, int64_t i) {
  return at(p.x, p.axis == 0 ? o * p.ld + i : i * p.ld + o).v;
}

// (bv, bi) = the larger of (bv, bi) and (v, i), the lower index on a tie; NaN never taken
void take_max(inout float bv, inout int64_t bi, float v, int64_t i) {
  if (v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}

void store(int64_t o, float v, int64_t bi) {
  if (p.op == 0) {
    F32 d = at(p.out_p, p.axis == 0 ? o * p.out_ld : o);
    d.v = p.accumulate != 0 ? d.v + p.scale * v : p.scale * v;
    return;
  }
  if (p.out_p != 0ul) at(p.out_p, p.axis == 0 ? o * p.out_ld : o).v = v;
  if (p.arg != 0ul) index_put(p.arg, p.arg_dtype, o, bi);
}

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const uint lanes = uint(p.lanes), splits = 256u / lanes;
  const uint lane = lid % lanes, split = lid / lanes;
  if (p.axis == 2) { // one work group, sums only
    const int64_t n = p.rows * p.cols;
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    int64_t r = int64_t(lid) % p.rows, c = int64_t(lid) / p.rows;
    uint q = 0u;
    for (int64_t i = int64_t(lid); i < n; i += 256, q++) {
      acc[q & 3u] += at(p.x, c * p.ld + r).v;
      r += p.step_r;
      c += p.step_c;
      if (r >= p.rows) {
        r -= p.rows;
        c++;
      }
    }
    sv[lid] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
      if (lid < s) sv[lid] += sv[lid + s];
      barrier();
    }
    if (lid == 0u) {
      F32 d = at(p.out_p, 0);
      d.v = p.accumulate != 0 ? d.v + p.scale * sv[0] : p.scale * sv[0];
    }
    return;
  }
  const int64_t blocks = (p.outer + lanes - 1) / lanes;
  for (int64_t b = int64_t(gl_WorkGroupID.x); b < blocks; b += int64_t(gl_NumWorkGroups.x)) {
    const int64_t o = b * lanes + lane;
    const bool live = o < p.outer;
    float bv;
    int64_t bi = 0x7fffffffffffffffl;
    if (p.op == 0) {
      float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
      uint q = 0u;
      if (live)
        for (int64_t i = int64_t(split); i < p.inner; i += splits, q++) acc[q & 3u] += elem(o, i);
      bv = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    } else {
      bv = uintBitsToFloat(0xff800000u); // -inf
      if (live)
        for (int64_t i = int64_t(split); i < p.inner; i += splits) take_max(bv, bi, elem(o, i), i);
    }
    if (splits > 1u) {
      sv[lid] = bv;
      si[lid] = bi;
      barrier();
      for (uint s = splits / 2u; s > 0u; s >>= 1) {
        if (split < s) {
          if (p.op == 0) {
            sv[lid] += sv[lid + s * lanes];
          } else {
            float v = sv[lid];
            int64_t i = si[lid];
            take_max(v, i, sv[lid + s * lanes], si[lid + s * lanes]);
            sv[lid] = v;
            si[lid] = i;
          }
        }
        barrier();
      }
      bv = sv[lid];
      bi = si[lid];
      barrier(); // the next block's stores wait for these reads
    }
    if (live && split == 0u) {
      if (p.op != 0) {
        const float x0 = elem(o, 0);
        if (isnan(x0)) {
          bv = x0;
          bi = 0;
        }
      }
      store(o, bv, bi);
    }
  }
}
