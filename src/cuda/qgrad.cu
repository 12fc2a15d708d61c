/* qgrad.cu — AG__K_QGRAD (kernels.h): the DQN loss of an MLP and its
 * gradient in 2L - 1 kernels for L layers, instead of a chain of ~30 ops.
 *
 * Each kernel spreads one step over the whole batch and every part of it
 * that runs on the same weights shape at once:
 *   forward, a kernel per hidden layer: the online network on s, the target
 *     network on s' and (double DQN) the online network on s', as up to
 *     three grids of 32 x 32 output tiles in one launch; the first layer
 *     gathers its inputs from the table by index;
 *   the output layer of every part, the TD target (one-step, or n-step from
 *     the given returns and discounts, s' then read at the walks' last
 *     columns), the loss of a tile of
 *     AG__QG_LOSS_GROUP transitions, d loss / d Q and its way back through the
 *     output layer, a block per tile;
 *   backward, a kernel per hidden layer below: d loss / d (W_i-1 A_i-1 +
 *     b_i-1) from the layer above through W_i and the ReLU mask;
 *   the gradient of every layer's [W | b]: the sum over the batch of delta x
 *     input, in 32 x 32 tiles; its last block also adds up the partial losses;
 *     with a->opt, the optimizer's step for each value as soon as it is made.
 * The forward, backward and gradient kernels are one tile product (qg_mm)
 * on different operands: each brings them through a ring of asynchronous
 * copies into shared memory, a few passes ahead of the sums, so that a
 * kernel waits on memory about once rather than once a pass, and sums a
 * 4 x 4 block of outputs a thread from float4 loads.
 * Intermediate values live in the scratch (a->ws), column-major [features,
 * B] as on the CPU. Every sum runs in a fixed order, so a replay gives the
 * same bits.
 * Every kernel lets the next one be scheduled as soon as its own wait for
 * the previous kernel returns (ag__pdl_trigger), and every kernel but the
 * call's first reads what was written two kernels back or earlier (its
 * weights, the forward pass's activations, the table's columns) before its
 * wait: the next kernel's blocks that find room wait on the SMs, with those
 * loads under way.
 */
#include "base/philox.h"
#include "base/scalar_ops.h"
#include "cuda/tile.cuh"

#define QG_T AG__QG_LOSS_GROUP /* a tile of the output kernel is one group of the loss's sum */

typedef struct qg_ptrs {
  float *act[AG__QG_MAX_LAYERS]; /* A_i [sizes[i], B]: the online network's layer inputs on s */
  float *dl[AG__QG_MAX_LAYERS];  /* D_i [sizes[i+1], B] */
  float *tp[2], *op[2];          /* [widest, B] each: hidden layers of the target and online passes on s' */
  float *part;                   /* a partial loss per tile */
  float *opt;                    /* the optimizer step's values (qg_prep) */
  int first[AG__QG_MAX_LAYERS + 1]; /* gradient kernel: first block of each layer */
  int vecd[AG__QG_MAX_LAYERS], veca[AG__QG_MAX_LAYERS],
      vecw[AG__QG_MAX_LAYERS]; /* D_i, A_i, W_i as 16-byte copies (qg_op's vec) */
} qg_ptrs;

/* Where a layer reads its input: a [K, B] block, or the table by index. */
typedef struct qg_src {
  const float *p;
  int64_t K, row0;
  int gather;
} qg_src;

/* The table column of transition b (clamped): given, or drawn as
 * AG__K_RANDINT draws (the stream's counter moves on in the last kernel). */
__device__ __forceinline__ int64_t qg_col(const ag__qgrad_args &a, int64_t b) {
  int64_t c;
  if (a.src.idx) {
    c = a.src.idx[b];
  } else {
    const int64_t bound = *a.src.size_dev;
    c = bound < 1 ? 0
                  : (int64_t)ag__scale_u64(ag__philox_u64(a.src.seed, *a.src.counter + (uint64_t)b),
                                           (uint64_t)bound);
  }
  return c < 0 ? 0 : (c >= a.src.capacity ? a.src.capacity - 1 : c);
}

/* The column whose next-obs rows are transition b's s': the n-step walk's
 * last column (clamped as qg_col clamps), else the transition's own. */
__device__ __forceinline__ int64_t qg_next_col(const ag__qgrad_args &a, int64_t b) {
  if (!a.src.last) return qg_col(a, b);
  const int64_t c = a.src.last[b];
  return c < 0 ? 0 : (c >= a.src.capacity ? a.src.capacity - 1 : c);
}

/* Input k of transition b (table column c when gathering). */
__device__ __forceinline__ float qg_in(const ag__qgrad_args &a, const qg_src &s, int64_t k, int64_t b,
                                       int64_t c) {
  if (!s.gather) return s.p[k + b * s.K];
  return a.src.table[c * a.src.rows + s.row0 + k] * a.src.scale;
}

/* The optimizer's step values (t, bias corrections, clip coefficient 1)
 * without a barrier over the grid: the first kernel of the call reads the
 * state and leaves the values in the scratch, the output kernel (which runs
 * after every read of the state) stores them in the state, and the
 * gradient kernel reads them from the scratch. */
typedef struct qg_prep {
  float *pv;    /* 4 floats of scratch, or NULL: no optimizer step */
  float *state; /* the optimizer's */
  float b1, b2;
  int compute, store;
} qg_prep;

__device__ __forceinline__ void qg_prep_run(const qg_prep &q) {
  if (!q.pv || blockIdx.x != 0 || blockIdx.y != 0 || blockIdx.z != 0 || threadIdx.x != 0) return;
  float v[4];
  if (q.compute) {
    ag__adam_values(q.state, q.b1, q.b2, 0.0f, v);
    for (int r = 0; r < 4; r++) q.pv[r] = v[r];
  }
  if (q.store) {
    for (int r = 0; r < 4; r++) v[r] = q.pv[r];
    ag__adam_store(q.state, v);
  }
}

/* A hidden layer's output: relu(v xs + bias) */
__device__ __forceinline__ float qg_relu(float v, float xs, float bias) {
  const float y = fmaf(v, xs, bias);
  return y > 0.0f ? y : 0.0f;
}

/* A hidden layer's forward pass for up to three parts. */
typedef struct qg_fwd {
  int64_t n, K;
  qg_src in[3];
  const float *W[3], *bias[3];
  float *out[3];
  float *save;      /* part 0's gathered input goes here too (A_0), or NULL */
  int vec_w, vec_x; /* W, the inputs as 16-byte copies (qg_op's vec) */
  qg_prep prep;
} qg_fwd;

/* out = relu(W in + bias) for a 32 x 32 tile (outputs j0.., transitions b0..)
 * of part blockIdx.z, as the tile product of W (j along memory) and the
 * inputs (k along memory); a gathered input is the table's value, scaled
 * once in the sum (and in the saved copy). EARLY (a layer above the first:
 * the kernel is not the call's first, and its weights were written two
 * kernels back or earlier): the weights are asked for before the wait. */
template <bool EARLY>
__global__ void __launch_bounds__(QG_THREADS) qg_fwd_kernel(ag__qgrad_args a, qg_fwd f) {
  if (!EARLY) {
    qg_gate()();
    qg_prep_run(f.prep);
  }
  __shared__ __align__(16) float sm[QG_SMEM];
  __shared__ int64_t cols[32];
  const int part = blockIdx.z;
  const int64_t j0 = (int64_t)blockIdx.x * 32, b0 = (int64_t)blockIdx.y * 32, n = f.n, K = f.K, B = a.src.B;
  const qg_src in = f.in[part];
  if (in.gather) {
    if (threadIdx.x < 32) { /* part 0 reads s, the others s' */
      const int64_t b = b0 + threadIdx.x;
      cols[threadIdx.x] = b < B ? (part == 0 ? qg_col(a, b) : qg_next_col(a, b)) : 0;
    }
    __syncthreads();
  }
  const qg_op W = {f.W[part], n, n, K, f.vec_w, 0, 0, NULL};
  const qg_op X = in.gather ? qg_op{a.src.table, a.src.rows, B, K, f.vec_x, 0, in.row0, cols}
                            : qg_op{in.p, K, B, K, f.vec_x, 0, 0, NULL};
  const int64_t j = j0 + (threadIdx.x & 31);
  const float bj = j < n ? f.bias[part][j] : 0.0f; /* loaded before the product, not after */
  float v[QG_OUT];
  if (!EARLY && part == 0 && f.save && blockIdx.x == 0) { /* A_0 = the gathered inputs, scaled */
    qg_mm<false, true>(sm, W, X, j0, b0, v, [&](int c, const float *x, int sa, int sb) {
      const int64_t b = b0 + sa;
      for (int q = 0; q < 4; q++) {
        const int64_t k = (int64_t)c * 32 + sb + q;
        if (b < B && k < K) f.save[k + b * K] = x[q] * a.src.scale;
      }
    });
  } else {
    qg_mm<false, true, EARLY ? 1 : 0>(sm, W, X, j0, b0, v, qg_nothing());
  }
  const float xs = in.gather ? a.src.scale : 1.0f;
  if (j < n) {
    for (int r = 0; r < QG_OUT; r++) {
      const int64_t b = b0 + (threadIdx.x >> 5) * QG_OUT + r;
      if (b < B) f.out[part][j + b * n] = qg_relu(v[r], xs, bj);
    }
  }
}

/* The output layer of every part for a tile of QG_T transitions, then the
 * TD target, the loss and d loss / d Q(s) (into D_L-1), and d loss / d
 * A_L-1 through W_L-1 and the ReLU mask (into D_L-2). */
typedef struct qg_out {
  qg_src in[3];
  const float *W[3], *bias[3];
  int parts;
  float *save; /* A_0 when the network has no hidden layer */
  qg_prep prep;
} qg_out;

#define QG_OUT_AG 8 /* actions a warp sums at once */
#define QG_OUT_KR 8 /* inputs a lane holds at once: a warp takes 256 */

/* A warp a (part, transition) pair. Its lanes split the inputs; for each
 * group of QG_OUT_AG actions a lane loads its inputs and their weights
 * together (one round trip for a group: the whole output layer for up to 8
 * actions and 256 inputs), then the warp adds its lanes' sums in a fixed
 * tree. The threads of the first QG_T lanes of warp 0 draw the tile's
 * columns and fetch their action, reward and done flags meanwhile. */
__global__ void __launch_bounds__(32 * 3 * QG_T) qg_out_kernel(ag__qgrad_args a, qg_out o, qg_ptrs p) {
  /* Below the first layer the kernel is not the call's first: the columns,
   * their action, reward and done, and the weights were written two
   * kernels back or earlier, and are read before the wait. */
  const bool early = a.L >= 2;
  if (!early) qg_gate()();
  __shared__ float q[3][AG__QG_MAX_ACTIONS][QG_T];
  __shared__ float lossv[QG_T], grad[QG_T];
  __shared__ int act[QG_T];
  __shared__ int64_t cols[2][QG_T]; /* the tile's columns of s and of s' */
  const int L = a.L, A = (int)a.sizes[L], lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t K = a.sizes[L - 1], B = a.src.B, b0 = (int64_t)blockIdx.x * QG_T;
  const int part = warp / QG_T, t = warp % QG_T;
  const int64_t b = b0 + t;
  /* thread t < QG_T: transition b0 + t's action, reward and done (n-step:
   * its return and discount) */
  float fa = 0.0f, fr = 0.0f, fd = 0.0f;
  if (threadIdx.x < QG_T) {
    const int64_t bt = b0 + threadIdx.x;
    const bool in = bt < B;
    const int64_t c = in ? qg_col(a, bt) : 0;
    cols[0][threadIdx.x] = c;
    cols[1][threadIdx.x] = in && a.src.last ? qg_next_col(a, bt) : c;
    if (in) {
      const float *col = a.src.table + c * a.src.rows;
      fa = col[a.src.act_row] * a.src.scale;
      if (a.src.ret)
        fr = a.src.ret[bt], fd = a.src.disc[bt];
      else
        fr = col[a.src.rew_row] * a.src.scale, fd = col[a.src.done_row] * a.src.scale;
    }
  }
  const qg_src in = o.in[part];
  const float *W = o.W[part];
  const bool save = o.save && part == 0 && b < B;
  /* one group of actions and one round of inputs (A <= 8, K <= 256): x and
   * w keep every input and weight of part 0's transition for the backward
   * below, and w is loaded once, first */
  const bool one = A <= QG_OUT_AG && K <= 32 * QG_OUT_KR;
  float x[QG_OUT_KR], w[QG_OUT_AG][QG_OUT_KR];
  auto load_w = [&](int a0, int64_t k0) {
#pragma unroll
    for (int r = 0; r < QG_OUT_KR; r++) {
      const int64_t k = k0 + lane + 32 * r;
#pragma unroll
      for (int c = 0; c < QG_OUT_AG; c++) w[c][r] = k < K && a0 + c < A ? W[a0 + c + k * A] : 0.0f;
    }
  };
  if (one) load_w(0, 0);
  if (early) qg_gate()();
  qg_prep_run(o.prep);
  if (o.in[0].gather) __syncthreads(); /* every part gathers or none does: the inputs need the columns */
  for (int a0 = 0; a0 < A; a0 += QG_OUT_AG) {
    float s[QG_OUT_AG];
#pragma unroll
    for (int c = 0; c < QG_OUT_AG; c++) s[c] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += 32 * QG_OUT_KR) {
      if (!one) load_w(a0, k0);
#pragma unroll
      for (int r = 0; r < QG_OUT_KR; r++) {
        const int64_t k = k0 + lane + 32 * r;
        x[r] = k < K && b < B ? qg_in(a, in, k, b, in.gather ? cols[part == 0 ? 0 : 1][t] : 0) : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < QG_OUT_KR; r++) {
        const int64_t k = k0 + lane + 32 * r;
        if (save && a0 == 0 && k < K) o.save[k + b * K] = x[r];
#pragma unroll
        for (int c = 0; c < QG_OUT_AG; c++) s[c] += w[c][r] * x[r];
      }
    }
#pragma unroll
    for (int c = 0; c < QG_OUT_AG; c++) {
      float v = s[c];
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0 && a0 + c < A) q[part][a0 + c][t] = v + o.bias[part][a0 + c];
    }
  }
  __syncthreads();
  if (threadIdx.x < QG_T) {
    const int tt = threadIdx.x;
    const int64_t bb = b0 + tt;
    float lv = 0.0f, g = 0.0f;
    int64_t ai = 0;
    if (bb < B) {
      float v;
      if (a.double_dqn) {
        int best = 0;
        for (int k = 1; k < A; k++)
          if (q[2][k][tt] > q[2][best][tt]) best = k;
        v = q[1][best][tt];
      } else {
        v = q[1][0][tt];
        for (int k = 1; k < A; k++) v = q[1][k][tt] > v ? q[1][k][tt] : v;
      }
      const float y =
          a.src.ret ? fr + fd * v : fr + a.gamma * (1.0f - fd) * v; /* n-step: fd is the discount */
      ai = ag__pick_index(&fa, AG_F32, 0, 0, A);
      const float diff = q[0][ai][tt] - y;
      lv = ag__loss_f(a.kind, diff, a.delta);
      g = ag__loss_df(a.kind, diff, a.delta) * (1.0f / (float)B);
      for (int k = 0; k < A; k++) p.dl[L - 1][k + bb * A] = k == ai ? g : 0.0f;
    }
    lossv[tt] = lv;
    grad[tt] = g;
    act[tt] = (int)ai;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int tt = 0; tt < QG_T; tt++) sum += lossv[tt];
    p.part[blockIdx.x] = sum;
  }
  /* D_L-2 [k, b] = (A_L-1 [k, b] > 0) ? sum_c W_L-1 [c, k] dq [c, b] : 0,
   * where dq is g at the action taken and 0 elsewhere: W_L-1 [ai, k] g */
  if (L >= 2 && part == 0 && b < B && one) { /* A_L-1 is x, W_L-1 [ai, k] is w[ai][.]: no second trip */
    const float g = grad[t];
    const int ai = act[t];
#pragma unroll
    for (int r = 0; r < QG_OUT_KR; r++) {
      const int64_t k = lane + 32 * r;
      float wv = 0.0f;
#pragma unroll
      for (int c = 0; c < QG_OUT_AG; c++) wv = c == ai ? w[c][r] : wv;
      if (k < K) p.dl[L - 2][k + b * K] = x[r] > 0.0f ? wv * g : 0.0f;
    }
  } else if (L >= 2 && part == 0 && b < B) {
    const float g = grad[t], *wa = a.w[L - 1] + act[t];
    for (int64_t k = lane; k < K; k += 32) {
      const float h = p.act[L - 1][k + b * K];
      p.dl[L - 2][k + b * K] = h > 0.0f ? wa[k * A] * g : 0.0f;
    }
  }
}

/* Backward through layer i (W_i [n, K]): D_i-1 [k, b] = (A_i [k, b] > 0) ?
 * sum_j W_i [j, k] D_i [j, b] : 0, a 32 x 32 tile (inputs k0.., transitions
 * b0..) a block, as the tile product of W_i and D_i (j along memory in
 * both). The kernel follows the output kernel: W_i and the mask (A_i, from
 * the forward kernels) were written two kernels back or earlier and are
 * read before the wait, D_i after it. */
__global__ void __launch_bounds__(QG_THREADS) qg_bwd_kernel(ag__qgrad_args a, qg_ptrs p, int i) {
  __shared__ __align__(16) float sm[QG_SMEM];
  const int64_t n = a.sizes[i + 1], K = a.sizes[i], B = a.src.B;
  const int64_t k0 = (int64_t)blockIdx.x * 32, b0 = (int64_t)blockIdx.y * 32;
  const qg_op W = {a.w[i], n, K, n, p.vecw[i], 0, 0, NULL};
  const qg_op D = {p.dl[i], n, B, n, p.vecd[i], 0, 0, NULL};
  const int64_t k = k0 + (threadIdx.x & 31);
  bool on[QG_OUT]; /* the ReLU's mask, loaded before the product */
  for (int r = 0; r < QG_OUT; r++) {
    const int64_t b = b0 + (threadIdx.x >> 5) * QG_OUT + r;
    on[r] = k < K && b < B && p.act[i][k + b * K] > 0.0f;
  }
  float v[QG_OUT];
  qg_mm<true, true, 1>(sm, W, D, k0, b0, v, qg_nothing());
  if (k < K)
    for (int r = 0; r < QG_OUT; r++) {
      const int64_t b = b0 + (threadIdx.x >> 5) * QG_OUT + r;
      if (b < B) p.dl[i - 1][k + b * K] = on[r] ? v[r] : 0.0f;
    }
}

/* The optimizer step of AG__K_QGRAD's opt, for the gradient kernel. */
typedef ag__qgrad_step qg_opt;

/* [gW | gb] of layer i, a 32 x 32 tile (outputs j0.., inputs k0..; input
 * k = sizes[i] is the bias): the sum over the batch of D_i [j, b] x
 * A_i [k, b], as the tile product of D_i (j along memory) and A_i (k along
 * memory, with the bias's 1 at k = sizes[i]). Thread (lane, w): output
 * j0 + lane for inputs k0 + QG_OUT w ... With o.on, each value is final once
 * summed: the optimizer's step for it follows at once (the step's values
 * from the scratch, qg_prep). */
template <bool XE>
__global__ void __launch_bounds__(QG_THREADS) qg_grad_kernel(ag__qgrad_args a, qg_ptrs p) {
  const qg_opt &o = a.opt;
  __shared__ __align__(16) float sm[QG_SMEM];
  int i = 0;
  while (i + 1 < a.L && p.first[i + 1] <= (int)blockIdx.x) i++;
  const int n = (int)a.sizes[i + 1], k = (int)a.sizes[i], tk = (k + 1 + 31) / 32;
  const int r = (int)blockIdx.x - p.first[i], j0 = (r / tk) * 32, k0 = (r % tk) * 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int64_t B = a.src.B;
  /* with the optimizer's step: this thread's parameters and moments, before
   * the wait (the kernel is never the call's first: the last to write them
   * was the previous call's gradient kernel) */
  const int j = j0 + lane;
  float pr[QG_OUT], mr[QG_OUT], vr[QG_OUT];
#pragma unroll
  for (int q = 0; q < QG_OUT; q++) {
    const int kx = k0 + w * QG_OUT + q;
    const bool on = o.on && j < n && kx <= k;
    const size_t e = kx < k ? j + (size_t)kx * n : (size_t)j;
    const int t = 2 * i + (kx < k ? 0 : 1);
    pr[q] = on ? (kx < k ? a.w[i] : a.b[i])[e] : 0.0f;
    mr[q] = on && !o.sgd ? o.m[t][e] : 0.0f;
    vr[q] = on && !o.sgd ? o.v[t][e] : 0.0f;
  }
  /* the wait, then (last block) the loss */
  auto gate = [&]() {
    qg_gate()();
    if (blockIdx.x ==
        gridDim.x - 1) { /* the loss, first: the partials loaded together, added in a fixed order */
      __shared__ float wsum[QG_THREADS / 32];
      const int64_t tiles = (a.src.B + QG_T - 1) / QG_T;
      float sum = 0.0f;
      for (int64_t t = threadIdx.x; t < tiles; t += QG_THREADS) sum += p.part[t];
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off);
      if ((threadIdx.x & 31) == 0) wsum[threadIdx.x >> 5] = sum;
      __syncthreads();
      if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int q = 0; q < QG_THREADS / 32; q++) total += wsum[q];
        *a.loss = total * (1.0f / (float)a.src.B);
        if (!a.src.idx) *a.src.counter += (uint64_t)a.src.B; /* every draw of this call has been read */
      }
    }
  };
  if (!XE) gate();
  const qg_op D = {p.dl[i], n, n, B, p.vecd[i], 0, 0, NULL};
  const qg_op X = {p.act[i], k, k, B, p.veca[i], 1, 0, NULL};
  /* the step's t, bias corrections, clip coefficient (1: no clipping): made
   * by the first forward kernel, two kernels back or earlier (XE), or,
   * without a hidden layer, by the output kernel just before, and then read
   * after the wait (the gate above) */
  float pv[4] = {0.0f, 0.0f, 0.0f, 1.0f};
  if (o.on)
    for (int q = 0; q < 3; q++) pv[q] = p.opt[q];
  float acc[QG_OUT];
  qg_mm<false, false, XE ? 2 : 0>(sm, D, X, j0, k0, acc, qg_nothing(), gate);
  if (j < n)
    for (int q = 0; q < QG_OUT; q++) {
      const int kx = k0 + w * QG_OUT + q;
      if (kx > k) continue;
      const size_t e = kx < k ? j + (size_t)kx * n : (size_t)j;
      (kx < k ? a.gw[i] : a.gb[i])[e] = acc[q];
      if (o.on) { /* this gradient value is final: the optimizer's step for it */
        const int t = 2 * i + (kx < k ? 0 : 1);
        ag__adam_elem(o.sgd, o.lr, o.b1, o.b2, o.eps, o.wd, pv[1], pv[2], pv[3], acc[q], &pr[q], &mr[q],
                      &vr[q]);
        ((float *)(kx < k ? a.w[i] : a.b[i]))[e] = pr[q];
        if (!o.sgd) o.m[t][e] = mr[q], o.v[t][e] = vr[q];
      }
    }
}

ag_status ag__cuda_qgrad(ag__cuda_state *st, const void *args) {
  const ag__qgrad_args *a = (const ag__qgrad_args *)args;
  const int L = a->L;
  const int64_t B = a->src.B;
  if (L < 1 || L > AG__QG_MAX_LAYERS || a->sizes[L] > AG__QG_MAX_ACTIONS)
    return ag__fail(AG_ERR_UNSUPPORTED, "cuda: %d layers and %lld actions are outside the fused DQN gradient",
                    L, (long long)a->sizes[L]);
  const qg_opt opt = a->opt;
  if (opt.on && !opt.state) return ag__fail(AG_ERR_INVALID_ARG, "cuda: qgrad's optimizer step has no state");
  if ((a->src.ret || a->src.disc || a->src.last) && !(a->src.ret && a->src.disc && a->src.last && a->src.idx))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "cuda: qgrad's n-step targets need ret, disc, last and given columns");
  /* the scratch as cpu_qgrad.c lays it out (A_0 .. A_L, D_0 .. D_L-1, s',
   * two widest blocks, Q(s'), Q'(s'), the partials), then two more widest
   * blocks for the online pass on s' */
  qg_ptrs p;
  float *cur = a->ws;
  int64_t widest = 0;
  for (int i = 0; i <= L; i++) {
    if (i < L) p.act[i] = cur;
    cur += a->sizes[i] * B;
    widest = a->sizes[i] > widest ? a->sizes[i] : widest;
  }
  for (int i = 0; i < L; i++) {
    p.dl[i] = cur;
    cur += a->sizes[i + 1] * B;
  }
  cur += a->sizes[0] * B;
  p.tp[0] = cur, p.tp[1] = cur + widest * B;
  cur += 2 * widest * B + 2 * a->sizes[L] * B;
  p.part = cur;
  const int64_t tiles = (B + QG_T - 1) / QG_T;
  p.op[0] = cur + tiles, p.op[1] = cur + tiles + widest * B;
  p.opt = cur + tiles + 2 * widest * B; /* 4 of the scratch's last 2 B + 16 floats */
  int blocks = 0;
  for (int i = 0; i < L; i++) {
    p.first[i] = blocks;
    p.vecd[i] = a->sizes[i + 1] % 4 == 0 && (uintptr_t)p.dl[i] % 16 == 0;
    p.veca[i] = a->sizes[i] % 4 == 0 && (uintptr_t)p.act[i] % 16 == 0;
    p.vecw[i] = a->sizes[i + 1] % 4 == 0 && (uintptr_t)a->w[i] % 16 == 0;
    blocks += (int)(((a->sizes[i + 1] + 31) / 32) * ((a->sizes[i] + 1 + 31) / 32));
  }
  p.first[L] = blocks;
  const int parts = a->double_dqn ? 3 : 2;
  /* inputs of layer i for the three parts */
  qg_src src[3];
  for (int i = 0; i < L; i++) {
    if (i == 0) {
      src[0] = qg_src{a->src.table, a->sizes[0], a->src.obs_row, 1};
      src[1] = src[2] = qg_src{a->src.table, a->sizes[0], a->src.next_row, 1};
    } else {
      src[0] = qg_src{p.act[i], a->sizes[i], 0, 0};
      src[1] = qg_src{p.tp[(i - 1) & 1], a->sizes[i], 0, 0};
      src[2] = qg_src{p.op[(i - 1) & 1], a->sizes[i], 0, 0};
    }
    cudaError_t e;
    if (i < L - 1) {
      qg_fwd f;
      f.n = a->sizes[i + 1];
      f.K = a->sizes[i];
      for (int q = 0; q < 3; q++) f.in[q] = src[q];
      f.W[0] = a->w[i], f.W[1] = a->tw[i], f.W[2] = a->w[i];
      f.bias[0] = a->b[i], f.bias[1] = a->tb[i], f.bias[2] = a->b[i];
      f.out[0] = p.act[i + 1], f.out[1] = p.tp[i & 1], f.out[2] = p.op[i & 1];
      f.save = i == 0 ? p.act[0] : NULL;
      f.vec_w = f.n % 4 == 0 && ((uintptr_t)a->w[i] | (uintptr_t)a->tw[i]) % 16 == 0;
      f.vec_x = i > 0 && f.K % 4 == 0; /* the table's rows: a float at a time */
      for (int q = 0; q < parts; q++) f.vec_x = f.vec_x && (uintptr_t)src[q].p % 16 == 0;
      f.prep = qg_prep{i == 0 && opt.on ? p.opt : NULL, opt.state, opt.b1, opt.b2, 1, 0};
      dim3 grid((unsigned)((f.n + 31) / 32), (unsigned)((B + 31) / 32), (unsigned)parts);
      if (i == 0)
        e = ag__launch(qg_fwd_kernel<false>, grid, QG_THREADS, 0, st->stream, *a, f);
      else
        e = ag__launch(qg_fwd_kernel<true>, grid, QG_THREADS, 0, st->stream, *a, f);
    } else {
      qg_out o;
      for (int q = 0; q < 3; q++) o.in[q] = src[q];
      o.W[0] = a->w[i], o.W[1] = a->tw[i], o.W[2] = a->w[i];
      o.bias[0] = a->b[i], o.bias[1] = a->tb[i], o.bias[2] = a->b[i];
      o.parts = parts;
      o.save = L == 1 ? p.act[0] : NULL;
      o.prep = qg_prep{opt.on ? p.opt : NULL, opt.state, opt.b1, opt.b2, L == 1, 1};
      e = ag__launch(qg_out_kernel, (unsigned)tiles, (unsigned)(32 * parts * QG_T), 0, st->stream, *a, o, p);
    }
    if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: qgrad forward kernel");
  }
  for (int i = L - 2; i >= 1; i--) { /* layer L-1's backward is in the output kernel */
    dim3 grid((unsigned)((a->sizes[i] + 31) / 32), (unsigned)((B + 31) / 32));
    cudaError_t e = ag__launch(qg_bwd_kernel, grid, QG_THREADS, 0, st->stream, *a, p, i);
    if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: qgrad backward kernel");
  }
  /* the layers' inputs (A_i) are read before the wait when the output
   * kernel, which saves A_0 when there is no hidden layer, is not the
   * previous kernel */
  if (L >= 2)
    ag__launch(qg_grad_kernel<true>, blocks, QG_THREADS, 0, st->stream, *a, p);
  else
    ag__launch(qg_grad_kernel<false>, blocks, QG_THREADS, 0, st->stream, *a, p);
  return ag__cuda_check_launch("cuda: qgrad gradient kernel");
}

size_t ag__cuda_qgrad_scratch(const void *args) {
  const ag__qgrad_args *a = (const ag__qgrad_args *)args;
  int64_t widest = 0, hidden = 0;
  for (int i = 0; i <= a->L; i++) {
    if (i > 0 && i < a->L) hidden += a->sizes[i];
    widest = a->sizes[i] > widest ? a->sizes[i] : widest;
  }
  const int64_t A = a->sizes[a->L], S = a->sizes[0], tiles = (a->src.B + QG_T - 1) / QG_T;
  /* A_0 .. A_L, D_0 .. D_L-1, s', two widest blocks (the target's pass),
   * Q(s') and Q'(s'), the partials, two widest blocks (the online pass on
   * s'), then 16 floats (the optimizer step's values) */
  const int64_t floats = a->src.B * (S + hidden + A) + a->src.B * (hidden + A) + a->src.B * S +
                         2 * widest * a->src.B + 2 * A * a->src.B + tiles + 2 * widest * a->src.B + 16;
  return (size_t)floats * sizeof(float);
}
