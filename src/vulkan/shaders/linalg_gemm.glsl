// linalg_gemm.glsl — AG__K_GEMM: C [m, n] = alpha op(A) op(B) + beta C, as a
// tiled product. The including shader defines the tile: BM x BN outputs per
// work group of 256 invocations, each computing TM x TN of them, with
// (BM / TM) * (BN / TN) == 256. Each K-step loads a BM x 16 panel of op(A)
// and a 16 x BN panel of op(B) into shared memory (zero past the matrices'
// ends, reading along each operand's stored columns so that neighbouring
// invocations read neighbouring addresses), then every invocation adds the
// products of the step to its accumulators. Each output is a float sum over
// k = 0, 1, ..., k-1 in that order (the zero padding past k adds 0 * 0), so
// the result does not depend on the tile or the schedule. alpha == 0 or
// k == 0 reads neither A nor B, and beta == 0 never reads C (BLAS's rules).
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "push.glsl"
#include "common.glsl"

#define BK 16
#define NT 256
#define TX (BM / TM) // invocations along a tile's rows
#define TY (BN / TN) // and along its columns
layout(local_size_x = NT) in;
layout(push_constant) uniform P { AGPC_LINALG_GEMM(AGPC_FIELD) } p;

shared float As[BK][BM + 1]; // op(A)[i0 + i, k0 + kk] at As[kk][i]
shared float Bs[BK][BN + 1]; // op(B)[k0 + kk, j0 + j] at Bs[kk][j]

void main() {
  const uint lid = gl_LocalInvocationIndex;
  const uint tx = lid % TX, ty = lid / TX;
  const int64_t tiles_m = (p.m + BM - 1) / BM, tiles_n = (p.n + BN - 1) / BN;
  const bool product = p.alpha != 0.0 && p.k > 0;
  for (int64_t tn = int64_t(gl_WorkGroupID.y); tn < tiles_n; tn += int64_t(gl_NumWorkGroups.y)) {
    for (int64_t tm = int64_t(gl_WorkGroupID.x); tm < tiles_m; tm += int64_t(gl_NumWorkGroups.x)) {
      const int64_t i0 = tm * BM, j0 = tn * BN;
      float acc[TM][TN];
      [[unroll]] for (int ii = 0; ii < TM; ii++)
        [[unroll]] for (int jj = 0; jj < TN; jj++) acc[ii][jj] = 0.0;
      if (product) {
        for (int64_t k0 = 0; k0 < p.k; k0 += BK) {
          [[unroll]] for (uint l = lid; l < BM * BK; l += NT) {
            // A stored [m, k]: down its columns (i fastest); stored [k, m]: kk fastest
            const uint i = p.trans_a == 0 ? l % BM : l / BK, kk = p.trans_a == 0 ? l / BM : l % BK;
            const int64_t gi = i0 + i, gk = k0 + kk;
            float v = 0.0;
            if (gi < p.m && gk < p.k) v = at(p.a, p.trans_a == 0 ? gk * p.lda + gi : gi * p.lda + gk).v;
            As[kk][i] = v;
          }
          [[unroll]] for (uint l = lid; l < BK * BN; l += NT) {
            // B stored [k, n]: kk fastest; stored [n, k]: j fastest
            const uint j = p.trans_b == 0 ? l / BK : l % BN, kk = p.trans_b == 0 ? l % BK : l / BN;
            const int64_t gj = j0 + j, gk = k0 + kk;
            float v = 0.0;
            if (gj < p.n && gk < p.k) v = at(p.b, p.trans_b == 0 ? gj * p.ldb + gk : gk * p.ldb + gj).v;
            Bs[kk][j] = v;
          }
          barrier();
          [[unroll]] for (uint kk = 0; kk < BK; kk++) {
            float av[TM], bv[TN];
            [[unroll]] for (int ii = 0; ii < TM; ii++) av[ii] = As[kk][tx + TX * ii];
            [[unroll]] for (int jj = 0; jj < TN; jj++) bv[jj] = Bs[kk][ty + TY * jj];
            [[unroll]] for (int ii = 0; ii < TM; ii++)
              [[unroll]] for (int jj = 0; jj < TN; jj++) acc[ii][jj] += av[ii] * bv[jj];
          }
          barrier();
        }
      }
      [[unroll]] for (int jj = 0; jj < TN; jj++) {
        const int64_t gj = j0 + ty + TY * jj;
        [[unroll]] for (int ii = 0; ii < TM; ii++) {
          const int64_t gi = i0 + tx + TX * ii;
          if (gi < p.m && gj < p.n) {
            F32 o = at(p.c, gj * p.ldc + gi);
            const float v = p.alpha * acc[ii][jj];
            o.v = p.beta == 0.0 ? v : v + p.beta * o.v;
          }
        }
      }
    }
  }
}
