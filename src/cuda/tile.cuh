/* tile.cuh — the tile product of the fused updates (qgrad.cu, acgrad.cu):
 * C = A B^T over 32 x 32 output tiles, its operands brought through a ring
 * of asynchronous copies into shared memory, every sum in a fixed order.
 */
#ifndef AGRL_CUDA_TILE_CUH
#define AGRL_CUDA_TILE_CUH

#include "cuda/cuda_internal.h"

#include <cuda_pipeline.h>

#ifndef QG_THREADS
#define QG_THREADS 512 /* a tile kernel's block: 8 groups of 64 (256: 4 groups) */
#endif
#define QG_GROUPS (QG_THREADS / 64)
#define QG_OUT (1024 / QG_THREADS) /* outputs of a 32 x 32 tile a thread keeps */
#ifndef QG_GS
#define QG_GS 4 /* stages of the rings in shared memory */
#endif

/* ---- the tile product the forward, backward and gradient kernels share ----
 * C [m0 + m, n0 + n] = sum over r of A (m, r) B (n, r), m, n < 32, by a
 * block of QG_THREADS threads. Each operand comes 32 x 32 a pass through a
 * ring of QG_GS stages in shared memory, QG_GS - 1 passes ahead of the one
 * being summed, a copy of four floats a thread a pass and operand (512
 * threads: the first half copies A, the second B). In a stage an
 * operand's rows are 32 floats of memory order (QG_P apart, so that a
 * column read by 8 lanes hits 8 different banks): rows of r when it is
 * stored with m along memory, rows of m when r runs along memory (kmaj).
 * The block's QG_GROUPS groups of 64 threads each take every QG_GROUPS-th
 * run of 4 r of a pass; a thread sums a 4 x 4 block of C from 4 float4
 * loads of each operand (m = 4 tm + q along memory, tm + 8 q in a kmaj
 * operand; n alike), and the groups' sums are added through shared memory
 * in group order: every sum in a fixed order. */
#define QG_P 36
#define QG_STAGE (32 * QG_P)
#define QG_SMEM (2 * QG_GS * QG_STAGE)
static_assert(QG_SMEM >= QG_GROUPS * 1056, "the rings hold the groups' sums at the end of a tile product");
static_assert(QG_THREADS == 256 || QG_THREADS == 512, "4 or 8 groups of 64 threads a tile");

/* One operand: element (m, r) at p[r + m ld] (kmaj) or p[m + r ld]; with
 * cols (kmaj, the table), row m is the table's column cols[m - m0] from
 * row0 (ld: the table's rows). Past M or R, zeros; with bias (not kmaj),
 * element (M, r < R) is 1, the bias's input. vec (never with cols): M (R
 * when kmaj) and ld multiples of 4 and p aligned: four floats along memory
 * are one 16-byte copy. */
typedef struct qg_op {
  const float *p;
  int64_t ld, M, R;
  int vec, bias;
  int64_t row0;
  const int64_t *cols;
} qg_op;

/* This thread's four floats of pass c into d (a stage's slot). base: the
 * slot's row (kmaj, element (m, 0)) or column (element (m, 0)); rs: the
 * slot's first r (kmaj) or its r within the pass. */
template <bool KM>
__device__ __forceinline__ void qg_feed(const qg_op &o, const float *base, bool mok, int64_t m, int rs, int c,
                                        float *d) {
  const int64_t r = (int64_t)c * 32 + rs;
  if (KM) {
    if (o.vec) {
      const bool ok = mok && r < o.R;
      __pipeline_memcpy_async(d, ok ? base + r : o.p, 4 * sizeof(float), ok ? 0 : 4 * sizeof(float));
    } else {
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const bool ok = mok && r + q < o.R;
        __pipeline_memcpy_async(d + q, ok ? base + r + q : o.p, sizeof(float), ok ? 0 : sizeof(float));
      }
    }
  } else {
    const bool rok = r < o.R;
    if (o.vec && !(o.bias && m == o.M)) {
      const bool ok = rok && m < o.M;
      __pipeline_memcpy_async(d, ok ? base + r * o.ld : o.p, 4 * sizeof(float), ok ? 0 : 4 * sizeof(float));
    } else {
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const bool ok = rok && m + q < o.M;
        if (o.bias && m + q == o.M)
          d[q] = rok ? 1.0f : 0.0f;
        else
          __pipeline_memcpy_async(d + q, ok ? base + q + r * o.ld : o.p, sizeof(float),
                                  ok ? 0 : sizeof(float));
      }
    }
  }
}

/* v[q][s]: the operand's value at (its q-th m, r0 + s) for the thread's
 * index u (tm or tn). */
template <bool KM>
__device__ __forceinline__ void qg_load4(const float *S, int r0, int u, float v[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float4 x =
        *reinterpret_cast<const float4 *>(KM ? &S[(u + 8 * i) * QG_P + r0] : &S[(r0 + i) * QG_P + 4 * u]);
    if (KM) {
      v[i][0] = x.x, v[i][1] = x.y, v[i][2] = x.z, v[i][3] = x.w;
    } else {
      v[0][i] = x.x, v[1][i] = x.y, v[2][i] = x.z, v[3][i] = x.w;
    }
  }
}

/* qg_mm's after() for a kernel that needs none */
struct qg_nothing {
  __device__ void operator()(int, const float *, int, int) const {}
};

/* qg_mm's gate: the wait for the previous kernel, then the early trigger */
struct qg_gate {
  __device__ void operator()() const {
    ag__pdl_wait();
    ag__pdl_trigger();
  }
};

/* The block's tile: out[s] = C [m0 + (t % 32), n0 + QG_OUT (t / 32) + s]
 * for thread t. after(c, x, sa, sb) runs in the threads that copy B once
 * their part of pass c has landed, before the ring moves on: x is their
 * slot of B's stage, row sa from column sb (the fwd kernel saves its
 * gathered inputs there). sm: QG_SMEM floats of shared memory.
 * EARLY 1 (2): A (B) may be read before the previous kernel has completed
 * (it was written two kernels back or earlier): its first QG_GS - 1 passes
 * are asked for, then gate() runs (the kernel's wait), then the other
 * operand's. */
template <bool AK, bool BK, int EARLY = 0, typename F, typename G = qg_gate>
__device__ __forceinline__ void qg_mm(float *sm, const qg_op &A, const qg_op &B, int64_t m0, int64_t n0,
                                      float out[QG_OUT], F &&after, G &&gate = G()) {
  float *As = sm, *Bs = sm + QG_GS * QG_STAGE;
  const int e = (int)threadIdx.x, g = e >> 6, tm = e & 7, tn = (e >> 3) & 7;
  const int sa = (e & 255) >> 3, sb = (e & 7) * 4, slot = sa * QG_P + sb;
  const bool copy_a = QG_THREADS == 256 || e < 256, copy_b = QG_THREADS == 256 || e >= 256;
  /* this thread's slot: kmaj, row m0 + sa from r = sb; else column m0 + sb at r = sa */
  const int64_t ma = AK ? m0 + sa : m0 + sb, mb = BK ? n0 + sa : n0 + sb;
  const bool oka = ma < A.M, okb = mb < B.M;
  const float *pa =
      AK ? (A.cols ? A.p + A.cols[sa] * A.ld + A.row0 : A.p + (oka ? ma : 0) * A.ld) : A.p + (oka ? ma : 0);
  const float *pb =
      BK ? (B.cols ? B.p + B.cols[sa] * B.ld + B.row0 : B.p + (okb ? mb : 0) * B.ld) : B.p + (okb ? mb : 0);
  const int passes = (int)((A.R + 31) / 32);
  /* pass c's copies of A (a) and B (b); commit: close a group of copies */
  auto issue = [&](int c, bool a, bool b, bool commit) {
    if (c < passes) {
      const int st = (c % QG_GS) * QG_STAGE + slot;
      if (a && copy_a) qg_feed<AK>(A, pa, oka, ma, AK ? sb : sa, c, As + st);
      if (b && copy_b) qg_feed<BK>(B, pb, okb, mb, BK ? sb : sa, c, Bs + st);
    }
    if (commit) __pipeline_commit();
  };
  float acc[4][4];
#pragma unroll
  for (int q = 0; q < 4; q++)
#pragma unroll
    for (int s = 0; s < 4; s++) acc[q][s] = 0.0f;
  if (EARLY) { /* the early operand's first passes in the first group (pass 0 waits for it) */
    for (int c = 0; c < QG_GS - 1; c++) issue(c, EARLY == 1, EARLY == 2, false);
    gate();
  }
  for (int c = 0; c < QG_GS - 1; c++) issue(c, EARLY != 1, EARLY != 2, true);
  for (int c = 0; c < passes; c++) {
    __pipeline_wait_prior(QG_GS - 2); /* pass c has landed (this thread's copies) */
    if (copy_b) after(c, Bs + (c % QG_GS) * QG_STAGE + slot, sa, sb);
    __syncthreads(); /* every thread's; stage (c - 1) % QG_GS is summed */
    issue(c + QG_GS - 1, true, true, true);
    const float *as = As + (c % QG_GS) * QG_STAGE, *bs = Bs + (c % QG_GS) * QG_STAGE;
#pragma unroll
    for (int h = 0; h < 8 / QG_GROUPS; h++) {
      float a[4][4], b[4][4];
      qg_load4<AK>(as, 4 * (g + QG_GROUPS * h), tm, a);
      qg_load4<BK>(bs, 4 * (g + QG_GROUPS * h), tn, b);
#pragma unroll
      for (int s = 0; s < 4; s++)
#pragma unroll
        for (int q = 0; q < 4; q++)
#pragma unroll
          for (int u = 0; u < 4; u++) acc[q][u] = fmaf(a[q][s], b[u][s], acc[q][u]);
    }
  }
  __pipeline_wait_prior(0);
  __syncthreads(); /* the ring is free: the groups' sums go through it */
  float *red = sm; /* [QG_GROUPS][32][33] */
#pragma unroll
  for (int q = 0; q < 4; q++)
#pragma unroll
    for (int u = 0; u < 4; u++)
      red[g * 1056 + (AK ? tm + 8 * q : 4 * tm + q) * 33 + (BK ? tn + 8 * u : 4 * tn + u)] = acc[q][u];
  __syncthreads();
  const int ox = e & 31, oy = e >> 5;
#pragma unroll
  for (int s = 0; s < QG_OUT; s++) {
    const int o = ox * 33 + QG_OUT * oy + s;
    float v = red[o];
#pragma unroll
    for (int h = 1; h < QG_GROUPS; h++) v += red[h * 1056 + o];
    out[s] = v;
  }
}

#endif /* AGRL_CUDA_TILE_CUH */
