/* qgrad.cu — AG__K_QGRAD (kernels.h): the DQN loss of an MLP and its
 * gradient in 2L - 1 kernels for L layers, instead of a chain of ~30 ops.
 *
 * Each kernel spreads one step over the whole batch and every part of it
 * that runs on the same weights shape at once:
 *   forward, a kernel per hidden layer: the online network on s, the target
 *     network on s' and (double DQN) the online network on s', as up to
 *     three grids of 32 x 32 output tiles in one launch; the first layer
 *     gathers its inputs from the table by index;
 *   the output layer of every part, the TD target, the loss of a tile of
 *     AG__QG_TILE transitions, d loss / d Q and its way back through the
 *     output layer, a block per tile;
 *   backward, a kernel per hidden layer below: d loss / d (W_i-1 A_i-1 +
 *     b_i-1) from the layer above through W_i and the ReLU mask;
 *   the gradient of every layer's [W | b]: the sum over the batch of delta x
 *     input, in 32 x 32 tiles; its block 0 also adds up the partial losses;
 *     with a->opt, the optimizer's step for each value as soon as it is made.
 * The tile kernels bring their operands through rings of asynchronous
 * copies into shared memory, a few passes ahead of the sums, so that a
 * kernel waits on memory about once rather than once a pass.
 * Intermediate values live in the scratch (a->ws), column-major [features,
 * B] as on the CPU. Every sum runs in a fixed order, so a replay gives the
 * same bits.
 */
#include "core/philox.h"
#include "core/scalar_ops.h"
#include "cuda/cuda_internal.h"

#include <cuda_pipeline.h>

#define QG_THREADS 256
#define QG_T AG__QG_TILE
#define QG_KC 32 /* inputs (or outputs, backward) a tile reads per pass */
#define QG_GS 4  /* stages of the rings in shared memory */

typedef struct qg_ptrs {
  float *act[AG__QG_MAX_LAYERS]; /* A_i [sizes[i], B]: the online network's layer inputs on s */
  float *dl[AG__QG_MAX_LAYERS];  /* D_i [sizes[i+1], B] */
  float *tp[2], *op[2];          /* [widest, B] each: hidden layers of the target and online passes on s' */
  float *part;                   /* a partial loss per tile */
  float *opt;                    /* the optimizer step's values (qg_prep) */
  int first[AG__QG_MAX_LAYERS + 1]; /* gradient kernel: first block of each layer */
  int vec[AG__QG_MAX_LAYERS];       /* gradient kernel: D_i, A_i as 16-byte copies (sizes % 4 == 0, aligned) */
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
  if (a.idx) {
    c = a.idx[b];
  } else {
    const int64_t bound = *a.size_dev;
    c = bound < 1 ? 0 : (int64_t)ag__scale_u64(ag__philox_u64(a.seed, *a.counter + (uint64_t)b), (uint64_t)bound);
  }
  return c < 0 ? 0 : (c >= a.capacity ? a.capacity - 1 : c);
}

/* Input k of transition b (table column c when gathering). */
__device__ __forceinline__ float qg_in(const ag__qgrad_args &a, const qg_src &s, int64_t k, int64_t b, int64_t c) {
  if (!s.gather) return s.p[k + b * s.K];
  return a.table[c * a.rows + s.row0 + k] * a.scale;
}

/* acc[r] += sum over the first m rows of W[.][tx] X[.][4 ty + r]: a
 * thread's 4 outputs of a 32 x 32 tile, from a pass in shared memory. */
template <int WL>
__device__ __forceinline__ void qg_tile_step(const float (*W)[WL], const float (*X)[36], int i, int tx, int ty,
                                             float acc[4]) {
  const float w = W[i][tx];
  const float4 x = *reinterpret_cast<const float4 *>(&X[i][ty * 4]);
  acc[0] += w * x.x;
  acc[1] += w * x.y;
  acc[2] += w * x.z;
  acc[3] += w * x.w;
}

template <int WL>
__device__ __forceinline__ void qg_tile_sum(const float (*W)[WL], const float (*X)[36], int m, int tx, int ty,
                                            float acc[4]) {
  if (m == QG_KC) { /* a whole pass, unrolled: the shared-memory loads run ahead of the products */
#pragma unroll
    for (int i = 0; i < QG_KC; i++) qg_tile_step<WL>(W, X, i, tx, ty, acc);
  } else {
    for (int i = 0; i < m; i++) qg_tile_step<WL>(W, X, i, tx, ty, acc);
  }
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

/* A hidden layer's forward pass for up to three parts. */
typedef struct qg_fwd {
  int64_t n, K;
  qg_src in[3];
  const float *W[3], *bias[3];
  float *out[3];
  float *save; /* part 0's gathered input goes here too (A_0), or NULL */
  int vec_w;   /* W's tile rows as 16-byte copies (n % 4 == 0, W aligned) */
  qg_prep prep;
} qg_fwd;

/* out = relu(W in + bias) for a 32 x 32 tile (outputs j0.., transitions b0..)
 * of part blockIdx.z. Thread (tx, ty): output j0 + tx for transitions
 * b0 + 4 ty .. + 3. The inputs come QG_KC at a time through a ring of QG_GS
 * stages in shared memory, copied asynchronously QG_GS - 1 passes ahead of
 * the pass being summed; a gathered input is the table's value, scaled
 * once in the sum (and in the saved copy). */
__global__ void __launch_bounds__(QG_THREADS) qg_fwd_kernel(ag__qgrad_args a, qg_fwd f) {
  ag__pdl_wait();
  qg_prep_run(f.prep);
  __shared__ __align__(16) float Ws[QG_GS][QG_KC][32];
  __shared__ __align__(16) float Xs[QG_GS][QG_KC][36];
  __shared__ int64_t cols[32];
  const int part = blockIdx.z, tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t j0 = (int64_t)blockIdx.x * 32, b0 = (int64_t)blockIdx.y * 32, n = f.n, K = f.K, B = a.B;
  const float *W = f.W[part];
  const qg_src in = f.in[part];
  const bool save = part == 0 && f.save && blockIdx.x == 0;
  if (in.gather) {
    if (threadIdx.x < 32) cols[threadIdx.x] = b0 + threadIdx.x < B ? qg_col(a, b0 + threadIdx.x) : 0;
    __syncthreads();
  }
  const int passes = (int)((K + QG_KC - 1) / QG_KC);
  auto issue = [&](int c) {
    if (c < passes) {
      const int st = c % QG_GS;
      const int64_t k0 = (int64_t)c * QG_KC;
      if (f.vec_w) { /* W [j + k n]: four along j a copy */
#pragma unroll
        for (int r = 0; r < QG_KC * 8 / QG_THREADS; r++) {
          const int e = (int)threadIdx.x + r * QG_THREADS, kk = e / 8, jj = (e % 8) * 4;
          const int64_t k = k0 + kk, j = j0 + jj;
          const bool ok = k < K && j < n;
          __pipeline_memcpy_async(&Ws[st][kk][jj], ok ? W + j + k * n : W, 4 * sizeof(float), ok ? 0 : 4 * sizeof(float));
        }
      }
#pragma unroll
      for (int r = 0; r < QG_KC * 32 / QG_THREADS; r++) {
        const int e = (int)threadIdx.x + r * QG_THREADS;
        if (!f.vec_w) { /* W [j + k n]: along j */
          const int kk = e / 32, jj = e % 32;
          const int64_t k = k0 + kk, j = j0 + jj;
          const bool ok = k < K && j < n;
          __pipeline_memcpy_async(&Ws[st][kk][jj], ok ? W + j + k * n : W, sizeof(float), ok ? 0 : sizeof(float));
        }
        { /* X [k + b K] or the table: along k */
          const int bb = e / QG_KC, kx = e % QG_KC;
          const int64_t b = b0 + bb, k = k0 + kx;
          const bool ok = b < B && k < K;
          const float *src = !ok ? W : (in.gather ? a.table + cols[bb] * a.rows + in.row0 + k : in.p + k + b * K);
          __pipeline_memcpy_async(&Xs[st][kx][bb], src, sizeof(float), ok ? 0 : sizeof(float));
        }
      }
    }
    __pipeline_commit();
  };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int c = 0; c < QG_GS - 1; c++) issue(c);
  for (int c = 0; c < passes; c++) {
    __pipeline_wait_prior(QG_GS - 2);
    __syncthreads(); /* pass c has landed; stage (c - 1) % QG_GS is summed */
    issue(c + QG_GS - 1);
    const int st = c % QG_GS;
    const int64_t k0 = (int64_t)c * QG_KC;
    qg_tile_sum(Ws[st], Xs[st], K - k0 < QG_KC ? (int)(K - k0) : QG_KC, tx, ty, acc);
    if (save) /* A_0 = the gathered inputs, scaled */
#pragma unroll
      for (int r = 0; r < QG_KC * 32 / QG_THREADS; r++) {
        const int e = (int)threadIdx.x + r * QG_THREADS, bb = e / QG_KC, kx = e % QG_KC;
        const int64_t b = b0 + bb, k = k0 + kx;
        if (b < B && k < K) f.save[k + b * K] = Xs[st][kx][bb] * a.scale;
      }
  }
  const float xs = in.gather ? a.scale : 1.0f;
  const int64_t j = j0 + tx;
  if (j < n) {
    const float bj = f.bias[part][j];
    for (int r = 0; r < 4; r++) {
      const int64_t b = b0 + ty * 4 + r;
      if (b < B) {
        const float v = acc[r] * xs + bj;
        f.out[part][j + b * n] = v > 0.0f ? v : 0.0f;
      }
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
  ag__pdl_wait();
  qg_prep_run(o.prep);
  __shared__ float q[3][AG__QG_MAX_ACTIONS][QG_T];
  __shared__ float lossv[QG_T], grad[QG_T];
  __shared__ int act[QG_T];
  __shared__ int64_t cols[QG_T];
  const int L = a.L, A = (int)a.sizes[L], lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t K = a.sizes[L - 1], B = a.B, b0 = (int64_t)blockIdx.x * QG_T;
  const int part = warp / QG_T, t = warp % QG_T;
  const int64_t b = b0 + t;
  float fa = 0.0f, fr = 0.0f, fd = 0.0f; /* thread t < QG_T: transition b0 + t's action, reward, done */
  if (threadIdx.x < QG_T) {
    const bool in = b0 + threadIdx.x < B;
    const int64_t c = in ? qg_col(a, b0 + threadIdx.x) : 0;
    cols[threadIdx.x] = c;
    if (in) {
      const float *col = a.table + c * a.rows;
      fa = col[a.act_row] * a.scale, fr = col[a.rew_row] * a.scale, fd = col[a.done_row] * a.scale;
    }
  }
  const qg_src in = o.in[part];
  if (o.in[0].gather) __syncthreads(); /* every part gathers or none does: the inputs need the columns */
  const float *W = o.W[part];
  const bool save = o.save && part == 0 && b < B;
  for (int a0 = 0; a0 < A; a0 += QG_OUT_AG) {
    float s[QG_OUT_AG];
#pragma unroll
    for (int c = 0; c < QG_OUT_AG; c++) s[c] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += 32 * QG_OUT_KR) {
      float x[QG_OUT_KR], w[QG_OUT_AG][QG_OUT_KR];
#pragma unroll
      for (int r = 0; r < QG_OUT_KR; r++) {
        const int64_t k = k0 + lane + 32 * r;
        x[r] = k < K && b < B ? qg_in(a, in, k, b, in.gather ? cols[t] : 0) : 0.0f;
#pragma unroll
        for (int c = 0; c < QG_OUT_AG; c++) w[c][r] = k < K && a0 + c < A ? W[a0 + c + k * A] : 0.0f;
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
      const float y = fr + a.gamma * (1.0f - fd) * v;
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
  if (L >= 2 && part == 0 && b < B) {
    const float g = grad[t], *wa = a.w[L - 1] + act[t];
    for (int64_t k = lane; k < K; k += 32) {
      const float h = p.act[L - 1][k + b * K];
      p.dl[L - 2][k + b * K] = h > 0.0f ? wa[k * A] * g : 0.0f;
    }
  }
}

/* Backward through layer i (W_i [n, K]): D_i-1 [k, b] = (A_i [k, b] > 0) ?
 * sum_j W_i [j, k] D_i [j, b] : 0, a 32 x 32 tile (inputs k0.., transitions
 * b0..) a block, the outputs QG_KC at a time through the ring as in
 * qg_fwd_kernel. */
__global__ void __launch_bounds__(QG_THREADS) qg_bwd_kernel(ag__qgrad_args a, qg_ptrs p, int i) {
  ag__pdl_wait();
  __shared__ __align__(16) float Ws[QG_GS][QG_KC][33];
  __shared__ __align__(16) float Ds[QG_GS][QG_KC][36];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t n = a.sizes[i + 1], K = a.sizes[i], B = a.B;
  const int64_t k0 = (int64_t)blockIdx.x * 32, b0 = (int64_t)blockIdx.y * 32;
  const float *W = a.w[i], *D = p.dl[i];
  const int passes = (int)((n + QG_KC - 1) / QG_KC);
  auto issue = [&](int c) {
    if (c < passes) {
      const int st = c % QG_GS;
      const int64_t j0 = (int64_t)c * QG_KC;
#pragma unroll
      for (int r = 0; r < QG_KC * 32 / QG_THREADS; r++) {
        const int e = (int)threadIdx.x + r * QG_THREADS, kk = e / QG_KC, jj = e % QG_KC; /* along j */
        const int64_t k = k0 + kk, j = j0 + jj, b = b0 + kk;
        const bool okw = k < K && j < n, okd = b < B && j < n;
        __pipeline_memcpy_async(&Ws[st][jj][kk], okw ? W + j + k * n : W, sizeof(float), okw ? 0 : sizeof(float));
        __pipeline_memcpy_async(&Ds[st][jj][kk], okd ? D + j + b * n : D, sizeof(float), okd ? 0 : sizeof(float));
      }
    }
    __pipeline_commit();
  };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int c = 0; c < QG_GS - 1; c++) issue(c);
  for (int c = 0; c < passes; c++) {
    __pipeline_wait_prior(QG_GS - 2);
    __syncthreads();
    issue(c + QG_GS - 1);
    const int st = c % QG_GS;
    const int64_t j0 = (int64_t)c * QG_KC;
    qg_tile_sum(Ws[st], Ds[st], n - j0 < QG_KC ? (int)(n - j0) : QG_KC, tx, ty, acc);
  }
  const int64_t k = k0 + tx;
  if (k < K)
    for (int r = 0; r < 4; r++) {
      const int64_t b = b0 + ty * 4 + r;
      if (b < B) p.dl[i - 1][k + b * K] = p.act[i][k + b * K] > 0.0f ? acc[r] : 0.0f;
    }
}

/* The optimizer step of AG__K_QGRAD's opt, for the gradient kernel. */
typedef struct qg_opt {
  int on, sgd;
  float lr, b1, b2, eps, wd;
  float *state;
  float *m[2 * AG__QG_MAX_LAYERS], *v[2 * AG__QG_MAX_LAYERS];
} qg_opt;

/* [gW | gb] of layer i, a 32 x 32 tile (outputs j0.., inputs k0..; input
 * k = sizes[i] is the bias): the sum over the batch of D_i [j, b] x
 * A_i [k, b], in chunks of 32 transitions summed in order. The chunks come
 * through a ring of QG_GS stages in shared memory, copied asynchronously
 * QG_GS - 1 chunks ahead of the one being summed: the loads of a block
 * overlap instead of following each other. Thread (lane, w): output j0 +
 * lane for inputs k0 + 4 w .. + 3. With o.on, each value is final once
 * summed: the optimizer's step for it follows at once (the step's values
 * from the scratch, qg_prep). */
__global__ void __launch_bounds__(QG_THREADS) qg_grad_kernel(ag__qgrad_args a, qg_ptrs p, qg_opt o) {
  ag__pdl_wait();
  __shared__ __align__(16) float Ds[QG_GS][32][32];
  __shared__ __align__(16) float As[QG_GS][32][32];
  int i = 0;
  while (i + 1 < a.L && p.first[i + 1] <= (int)blockIdx.x) i++;
  const int n = (int)a.sizes[i + 1], k = (int)a.sizes[i], tk = (k + 1 + 31) / 32;
  const int r = (int)blockIdx.x - p.first[i], j0 = (r / tk) * 32, k0 = (r % tk) * 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const float *D = p.dl[i], *X = p.act[i];
  const int64_t B = a.B;
  const int chunks = (int)((B + 31) / 32);
  /* chunk c into stage c % QG_GS (a commit group a chunk, empty past the end) */
  const bool vec = p.vec[i];
  auto issue = [&](int c) {
    if (c < chunks && vec) { /* four along j (D) and along k (A) a copy */
      const int st = c % QG_GS, bb = (int)threadIdx.x / 8, x = ((int)threadIdx.x % 8) * 4;
      const int64_t b = (int64_t)c * 32 + bb;
      const int j = j0 + x, kx = k0 + x;
      const bool dj = b < B && j < n;
      __pipeline_memcpy_async(&Ds[st][bb][x], dj ? D + b * n + j : D, 4 * sizeof(float), dj ? 0 : 4 * sizeof(float));
      if (b < B && kx < k) {
        __pipeline_memcpy_async(&As[st][bb][x], X + b * k + kx, 4 * sizeof(float));
      } else { /* past the inputs: the bias's 1 at k, zeros after */
        As[st][bb][x] = b < B && kx == k ? 1.0f : 0.0f;
        As[st][bb][x + 1] = As[st][bb][x + 2] = As[st][bb][x + 3] = 0.0f;
      }
    } else if (c < chunks) {
      const int st = c % QG_GS;
      const int64_t bb0 = (int64_t)c * 32;
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int e = (int)threadIdx.x + q * QG_THREADS, bb = e / 32, x = e % 32;
        const int64_t b = bb0 + bb;
        const int j = j0 + x, kx = k0 + x;
        const bool dj = b < B && j < n;
        __pipeline_memcpy_async(&Ds[st][bb][x], dj ? D + b * n + j : D, sizeof(float), dj ? 0 : sizeof(float));
        if (b < B && kx < k) __pipeline_memcpy_async(&As[st][bb][x], X + b * k + kx, sizeof(float));
        else As[st][bb][x] = b < B && kx == k ? 1.0f : 0.0f;
      }
    }
    __pipeline_commit();
  };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int c = 0; c < QG_GS - 1; c++) issue(c);
  /* with the optimizer's step: this thread's parameters and moments, early */
  const int j = j0 + lane;
  float pr[4], mr[4], vr[4];
#pragma unroll
  for (int q = 0; q < 4; q++) {
    const int kx = k0 + w * 4 + q;
    const bool on = o.on && j < n && kx <= k;
    const size_t e = kx < k ? j + (size_t)kx * n : (size_t)j;
    const int t = 2 * i + (kx < k ? 0 : 1);
    pr[q] = on ? (kx < k ? a.w[i] : a.b[i])[e] : 0.0f;
    mr[q] = on && !o.sgd ? o.m[t][e] : 0.0f;
    vr[q] = on && !o.sgd ? o.v[t][e] : 0.0f;
  }
  for (int c = 0; c < chunks; c++) {
    __pipeline_wait_prior(QG_GS - 2); /* chunk c has landed (this thread's part) */
    __syncthreads();                  /* every thread's part; stage (c - 1) % QG_GS is summed */
    issue(c + QG_GS - 1);
    const int st = c % QG_GS;
#pragma unroll
    for (int bb = 0; bb < 32; bb++) {
      const float d = Ds[st][bb][lane];
      const float4 x = *reinterpret_cast<const float4 *>(&As[st][bb][w * 4]);
      acc[0] += d * x.x;
      acc[1] += d * x.y;
      acc[2] += d * x.z;
      acc[3] += d * x.w;
    }
  }
  float pv[4] = {0.0f, 0.0f, 0.0f, 1.0f}; /* the step's t, bias corrections, clip coefficient (1: no clipping) */
  if (o.on)
    for (int q = 0; q < 3; q++) pv[q] = p.opt[q];
  if (j < n)
    for (int q = 0; q < 4; q++) {
      const int kx = k0 + w * 4 + q;
      if (kx > k) continue;
      const size_t e = kx < k ? j + (size_t)kx * n : (size_t)j;
      (kx < k ? a.gw[i] : a.gb[i])[e] = acc[q];
      if (o.on) { /* this gradient value is final: the optimizer's step for it */
        const int t = 2 * i + (kx < k ? 0 : 1);
        ag__adam_elem(o.sgd, o.lr, o.b1, o.b2, o.eps, o.wd, pv[1], pv[2], pv[3], acc[q], &pr[q], &mr[q], &vr[q]);
        ((float *)(kx < k ? a.w[i] : a.b[i]))[e] = pr[q];
        if (!o.sgd) o.m[t][e] = mr[q], o.v[t][e] = vr[q];
      }
    }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const int64_t tiles = (B + QG_T - 1) / QG_T;
    float sum = 0.0f;
    for (int64_t t = 0; t < tiles; t++) sum += p.part[t];
    *a.loss = sum * (1.0f / (float)B);
    if (!a.idx) *a.counter += (uint64_t)B; /* every draw of this call has been read */
  }
}

ag_status ag__cuda_qgrad(ag__cuda_state *st, const void *args) {
  const ag__qgrad_args *a = (const ag__qgrad_args *)args;
  const int L = a->L;
  const int64_t B = a->B;
  if (L < 1 || L > AG__QG_MAX_LAYERS || a->sizes[L] > AG__QG_MAX_ACTIONS)
    return ag__fail(AG_ERR_UNSUPPORTED, "cuda: %d layers and %lld actions are outside the fused DQN gradient", L,
                    (long long)a->sizes[L]);
  qg_opt opt;
  memset(&opt, 0, sizeof opt);
  if (a->opt) {
    const ag__adam_args *q = a->opt;
    if (q->count != 2 * L || !q->prep || q->max_norm > 0.0f)
      return ag__fail(AG_ERR_INVALID_ARG, "cuda: qgrad's optimizer step must be one launch over the %d tensors", 2 * L);
    for (int i = 0; i < L; i++)
      if (q->t[2 * i].p != a->w[i] || q->t[2 * i + 1].p != a->b[i])
        return ag__fail(AG_ERR_INVALID_ARG, "cuda: qgrad's optimizer step is not over the online network");
    opt.on = 1, opt.sgd = q->sgd, opt.lr = q->lr, opt.b1 = q->b1, opt.b2 = q->b2, opt.eps = q->eps, opt.wd = q->wd;
    opt.state = q->state;
    for (int t = 0; t < 2 * L; t++) opt.m[t] = q->t[t].m, opt.v[t] = q->t[t].v;
  }
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
    p.vec[i] = a->sizes[i + 1] % 4 == 0 && a->sizes[i] % 4 == 0 && ((uintptr_t)p.dl[i] | (uintptr_t)p.act[i]) % 16 == 0;
    blocks += (int)(((a->sizes[i + 1] + 31) / 32) * ((a->sizes[i] + 1 + 31) / 32));
  }
  p.first[L] = blocks;
  const int parts = a->double_dqn ? 3 : 2;
  /* inputs of layer i for the three parts */
  qg_src src[3];
  for (int i = 0; i < L; i++) {
    if (i == 0) {
      src[0] = qg_src{a->table, a->sizes[0], a->obs_row, 1};
      src[1] = src[2] = qg_src{a->table, a->sizes[0], a->next_row, 1};
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
      f.prep = qg_prep{i == 0 && opt.on ? p.opt : NULL, opt.state, opt.b1, opt.b2, 1, 0};
      dim3 grid((unsigned)((f.n + 31) / 32), (unsigned)((B + 31) / 32), (unsigned)parts);
      e = ag__launch(qg_fwd_kernel, grid, QG_THREADS, 0, st->stream, *a, f);
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
  ag__launch(qg_grad_kernel, blocks, QG_THREADS, 0, st->stream, *a, p, opt);
  return ag__cuda_check_launch("cuda: qgrad gradient kernel");
}
