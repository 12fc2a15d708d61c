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
 *     input, in 64 x 32 tiles; its block 0 also adds up the partial losses.
 * Intermediate values live in the scratch (a->ws), column-major [features,
 * B] as on the CPU. Every sum runs in a fixed order, so a replay gives the
 * same bits.
 */
#include "core/philox.h"
#include "core/scalar_ops.h"
#include "cuda/cuda_internal.h"

#define QG_THREADS 256
#define QG_T AG__QG_TILE
#define QG_KC 128 /* inputs (or outputs, backward) a tile reads per pass */

typedef struct qg_ptrs {
  float *act[AG__QG_MAX_LAYERS]; /* A_i [sizes[i], B]: the online network's layer inputs on s */
  float *dl[AG__QG_MAX_LAYERS];  /* D_i [sizes[i+1], B] */
  float *tp[2], *op[2];          /* [widest, B] each: hidden layers of the target and online passes on s' */
  float *part;                   /* a partial loss per tile */
  int first[AG__QG_MAX_LAYERS + 1]; /* gradient kernel: first block of each layer */
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
__device__ __forceinline__ void qg_tile_sum(const float (*W)[33], const float (*X)[36], int m, int tx, int ty,
                                            float acc[4]) {
  for (int i = 0; i < m; i++) {
    const float w = W[i][tx];
    const float4 x = *reinterpret_cast<const float4 *>(&X[i][ty * 4]);
    acc[0] += w * x.x;
    acc[1] += w * x.y;
    acc[2] += w * x.z;
    acc[3] += w * x.w;
  }
}

/* A hidden layer's forward pass for up to three parts. */
typedef struct qg_fwd {
  int64_t n, K;
  qg_src in[3];
  const float *W[3], *bias[3];
  float *out[3];
  float *save; /* part 0's gathered input goes here too (A_0), or NULL */
} qg_fwd;

/* out = relu(W in + bias) for a 32 x 32 tile (outputs j0.., transitions b0..)
 * of part blockIdx.z. Thread (tx, ty): output j0 + tx for transitions
 * b0 + 4 ty .. + 3; the inputs pass through shared memory QG_KC at a time. */
__global__ void __launch_bounds__(QG_THREADS) qg_fwd_kernel(ag__qgrad_args a, qg_fwd f) {
  ag__pdl_wait();
  __shared__ float Ws[QG_KC][33];
  __shared__ __align__(16) float Xs[QG_KC][36];
  const int part = blockIdx.z, tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t j0 = (int64_t)blockIdx.x * 32, b0 = (int64_t)blockIdx.y * 32, n = f.n, K = f.K, B = a.B;
  const float *W = f.W[part];
  const qg_src in = f.in[part];
  const bool save = part == 0 && f.save && blockIdx.x == 0;
  __shared__ int64_t cols[32];
  if (in.gather) {
    if (threadIdx.x < 32) cols[threadIdx.x] = b0 + threadIdx.x < B ? qg_col(a, b0 + threadIdx.x) : 0;
    __syncthreads();
  }
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  enum { PER = 32 * QG_KC / QG_THREADS }; /* tile values a thread loads */
  for (int64_t k0 = 0; k0 < K; k0 += QG_KC) {
    float wv[PER], xv[PER]; /* every load of the pass is issued before any is used */
#pragma unroll
    for (int r = 0; r < PER; r++) {
      const int e = (int)threadIdx.x + r * QG_THREADS, kk = e / 32, jj = e % 32; /* W[j + k n]: along j */
      const int64_t k = k0 + kk, j = j0 + jj;
      wv[r] = k < K && j < n ? W[j + k * n] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < PER; r++) {
      const int e = (int)threadIdx.x + r * QG_THREADS, bb = e / QG_KC, kx = e % QG_KC; /* X[k + b K]: along k */
      const int64_t b = b0 + bb, k = k0 + kx;
      xv[r] = b < B && k < K ? qg_in(a, in, k, b, cols[bb]) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < PER; r++) {
      const int e = (int)threadIdx.x + r * QG_THREADS;
      Ws[e / 32][e % 32] = wv[r];
      Xs[e % QG_KC][e / QG_KC] = xv[r];
      const int64_t b = b0 + e / QG_KC, k = k0 + e % QG_KC;
      if (save && b < B && k < K) f.save[k + b * K] = xv[r];
    }
    __syncthreads();
    qg_tile_sum(Ws, Xs, K - k0 < QG_KC ? (int)(K - k0) : QG_KC, tx, ty, acc);
    __syncthreads();
  }
  const int64_t j = j0 + tx;
  if (j < n) {
    const float bj = f.bias[part][j];
    for (int r = 0; r < 4; r++) {
      const int64_t b = b0 + ty * 4 + r;
      if (b < B) {
        const float v = acc[r] + bj;
        f.out[part][j + b * n] = v > 0.0f ? v : 0.0f;
      }
    }
  }
}

/* The output layer of every part for a tile of QG_T transitions, then the
 * TD target, the loss and d loss / d Q(s) (into D_L-1). */
typedef struct qg_out {
  qg_src in[3];
  const float *W[3], *bias[3];
  int parts;
  float *save; /* A_0 when the network has no hidden layer */
} qg_out;

__global__ void __launch_bounds__(QG_THREADS) qg_out_kernel(ag__qgrad_args a, qg_out o, qg_ptrs p) {
  ag__pdl_wait();
  __shared__ float q[3][AG__QG_MAX_ACTIONS][QG_T];
  __shared__ float dq[AG__QG_MAX_ACTIONS][QG_T];
  __shared__ float lossv[QG_T];
  const int L = a.L, A = (int)a.sizes[L], lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t K = a.sizes[L - 1], B = a.B, b0 = (int64_t)blockIdx.x * QG_T;
  __shared__ int64_t cols[QG_T];
  if (threadIdx.x < QG_T) cols[threadIdx.x] = b0 + threadIdx.x < B ? qg_col(a, b0 + threadIdx.x) : 0;
  __syncthreads();
  const int items = o.parts * A * QG_T;
  for (int it = warp; it < items; it += QG_THREADS / 32) { /* a warp a value: lanes split the sum, added in a tree */
    const int part = it / (A * QG_T), r = it % (A * QG_T), act = r / QG_T, t = r % QG_T;
    const int64_t b = b0 + t;
    float s = 0.0f;
    if (b < B)
#pragma unroll 4
      for (int64_t k = lane; k < K; k += 32) s += o.W[part][act + k * A] * qg_in(a, o.in[part], k, b, cols[t]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) q[part][act][t] = s + o.bias[part][act];
  }
  if (o.save)
    for (int e = threadIdx.x; e < K * QG_T; e += QG_THREADS) {
      const int t = (int)(e / K);
      const int64_t k = e % K, b = b0 + t;
      if (b < B) o.save[k + b * K] = qg_in(a, o.in[0], k, b, cols[t]);
    }
  __syncthreads();
  if (threadIdx.x < QG_T) {
    const int t = threadIdx.x;
    const int64_t b = b0 + t;
    float lv = 0.0f;
    if (b < B) {
      const float *col = a.table + cols[t] * a.rows;
      const float af = col[a.act_row] * a.scale, rew = col[a.rew_row] * a.scale, done = col[a.done_row] * a.scale;
      float v;
      if (a.double_dqn) {
        int best = 0;
        for (int k = 1; k < A; k++)
          if (q[2][k][t] > q[2][best][t]) best = k;
        v = q[1][best][t];
      } else {
        v = q[1][0][t];
        for (int k = 1; k < A; k++) v = q[1][k][t] > v ? q[1][k][t] : v;
      }
      const float y = rew + a.gamma * (1.0f - done) * v;
      const int64_t ai = ag__pick_index(&af, AG_F32, 0, 0, A);
      const float diff = q[0][ai][t] - y;
      lv = ag__loss_f(a.kind, diff, a.delta);
      const float g = ag__loss_df(a.kind, diff, a.delta) * (1.0f / (float)B);
      for (int k = 0; k < A; k++) {
        dq[k][t] = k == ai ? g : 0.0f;
        p.dl[L - 1][k + b * A] = dq[k][t];
      }
    } else {
      for (int k = 0; k < A; k++) dq[k][t] = 0.0f;
    }
    lossv[t] = lv;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int t = 0; t < QG_T; t++) s += lossv[t];
    p.part[blockIdx.x] = s;
  }
  /* and the output layer's backward for the tile: D_L-2 [k, b] =
   * (A_L-1 [k, b] > 0) ? sum_a W_L-1 [a, k] dq [a, b] : 0 */
  if (L >= 2)
    for (int64_t e = threadIdx.x; e < K * QG_T; e += QG_THREADS) {
      const int t = (int)(e / K);
      const int64_t k = e % K, b = b0 + t;
      if (b >= B) continue;
      const float *w = a.w[L - 1] + k * A;
      float s = 0.0f;
      for (int c = 0; c < A; c++) s += w[c] * dq[c][t];
      p.dl[L - 2][k + b * K] = p.act[L - 1][k + b * K] > 0.0f ? s : 0.0f;
    }
}

/* Backward through layer i (W_i [n, K]): D_i-1 [k, b] = (A_i [k, b] > 0) ?
 * sum_j W_i [j, k] D_i [j, b] : 0, a 32 x 32 tile (inputs k0.., transitions
 * b0..) a block, the outputs QG_KC at a time through shared memory. */
__global__ void __launch_bounds__(QG_THREADS) qg_bwd_kernel(ag__qgrad_args a, qg_ptrs p, int i) {
  ag__pdl_wait();
  __shared__ float Ws[QG_KC][33];
  __shared__ __align__(16) float Ds[QG_KC][36];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t n = a.sizes[i + 1], K = a.sizes[i], B = a.B;
  const int64_t k0 = (int64_t)blockIdx.x * 32, b0 = (int64_t)blockIdx.y * 32;
  const float *W = a.w[i], *D = p.dl[i];
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  enum { PER = 32 * QG_KC / QG_THREADS };
  for (int64_t j0 = 0; j0 < n; j0 += QG_KC) {
    float wv[PER], dv[PER]; /* every load of the pass is issued before any is used */
#pragma unroll
    for (int r = 0; r < PER; r++) {
      const int e = (int)threadIdx.x + r * QG_THREADS, kk = e / QG_KC, jj = e % QG_KC; /* along j */
      const int64_t k = k0 + kk, j = j0 + jj, b = b0 + kk;
      wv[r] = k < K && j < n ? W[j + k * n] : 0.0f;
      dv[r] = b < B && j < n ? D[j + b * n] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < PER; r++) {
      const int e = (int)threadIdx.x + r * QG_THREADS, kk = e / QG_KC, jj = e % QG_KC;
      Ws[jj][kk] = wv[r];
      Ds[jj][kk] = dv[r];
    }
    __syncthreads();
    qg_tile_sum(Ws, Ds, n - j0 < QG_KC ? (int)(n - j0) : QG_KC, tx, ty, acc);
    __syncthreads();
  }
  const int64_t k = k0 + tx;
  if (k < K)
    for (int r = 0; r < 4; r++) {
      const int64_t b = b0 + ty * 4 + r;
      if (b < B) p.dl[i - 1][k + b * K] = p.act[i][k + b * K] > 0.0f ? acc[r] : 0.0f;
    }
}

/* [gW | gb] of layer i, tile (j0 .. j0+63, k0 .. k0+31), k = sizes[i] the bias. */
__global__ void __launch_bounds__(QG_THREADS) qg_grad_kernel(ag__qgrad_args a, qg_ptrs p) {
  ag__pdl_wait();
  __shared__ float Ds[32][64];
  __shared__ __align__(16) float As[32][32];
  int i = 0;
  while (i + 1 < a.L && p.first[i + 1] <= (int)blockIdx.x) i++;
  const int n = (int)a.sizes[i + 1], k = (int)a.sizes[i], tk = (k + 1 + 31) / 32;
  const int r = (int)blockIdx.x - p.first[i], j0 = (r / tk) * 64, k0 = (r % tk) * 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const float *D = p.dl[i], *X = p.act[i];
  const int64_t B = a.B;
  float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
  /* a chunk's loads go to registers while the chunk before is summed */
  float rd[8], ra[4];
  auto load = [&](int64_t bb0) {
#pragma unroll
    for (int r = 0; r < 8; r++) {
      const int e = (int)threadIdx.x + r * QG_THREADS, bb = e / 64, j = j0 + e % 64;
      rd[r] = (bb0 + bb < B && j < n) ? D[(bb0 + bb) * n + j] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
      const int e = (int)threadIdx.x + r * QG_THREADS, bb = e / 32, kx = k0 + e % 32;
      ra[r] = bb0 + bb < B ? (kx < k ? X[(bb0 + bb) * k + kx] : (kx == k ? 1.0f : 0.0f)) : 0.0f;
    }
  };
  load(0);
  for (int64_t bb0 = 0; bb0 < B; bb0 += 32) {
#pragma unroll
    for (int r = 0; r < 8; r++) {
      const int e = (int)threadIdx.x + r * QG_THREADS;
      Ds[e / 64][e % 64] = rd[r];
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
      const int e = (int)threadIdx.x + r * QG_THREADS;
      As[e / 32][e % 32] = ra[r];
    }
    __syncthreads();
    if (bb0 + 32 < B) load(bb0 + 32);
#pragma unroll 8
    for (int bb = 0; bb < 32; bb++) {
      const float d0 = Ds[bb][lane], d1 = Ds[bb][lane + 32];
      const float4 x = *reinterpret_cast<const float4 *>(&As[bb][w * 4]);
      acc[0][0] += d0 * x.x;
      acc[0][1] += d0 * x.y;
      acc[0][2] += d0 * x.z;
      acc[0][3] += d0 * x.w;
      acc[1][0] += d1 * x.x;
      acc[1][1] += d1 * x.y;
      acc[1][2] += d1 * x.z;
      acc[1][3] += d1 * x.w;
    }
    __syncthreads();
  }
  for (int q = 0; q < 4; q++) {
    const int kx = k0 + w * 4 + q;
    if (kx > k) continue;
    for (int h = 0; h < 2; h++) {
      const int j = j0 + lane + 32 * h;
      if (j >= n) continue;
      float *dst = kx < k ? a.gw[i] + j + (size_t)kx * n : a.gb[i] + j;
      *dst = acc[h][q];
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const int64_t tiles = (B + QG_T - 1) / QG_T;
    float s = 0.0f;
    for (int64_t t = 0; t < tiles; t++) s += p.part[t];
    *a.loss = s * (1.0f / (float)B);
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
  int blocks = 0;
  for (int i = 0; i < L; i++) {
    p.first[i] = blocks;
    blocks += (int)(((a->sizes[i + 1] + 63) / 64) * ((a->sizes[i] + 1 + 31) / 32));
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
      dim3 grid((unsigned)((f.n + 31) / 32), (unsigned)((B + 31) / 32), (unsigned)parts);
      e = ag__launch(qg_fwd_kernel, grid, QG_THREADS, 0, st->stream, *a, f);
    } else {
      qg_out o;
      for (int q = 0; q < 3; q++) o.in[q] = src[q];
      o.W[0] = a->w[i], o.W[1] = a->tw[i], o.W[2] = a->w[i];
      o.bias[0] = a->b[i], o.bias[1] = a->tb[i], o.bias[2] = a->b[i];
      o.parts = parts;
      o.save = L == 1 ? p.act[0] : NULL;
      e = ag__launch(qg_out_kernel, (unsigned)tiles, QG_THREADS, 0, st->stream, *a, o, p);
    }
    if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: qgrad forward kernel");
  }
  for (int i = L - 2; i >= 1; i--) { /* layer L-1's backward is in the output kernel */
    dim3 grid((unsigned)((a->sizes[i] + 31) / 32), (unsigned)((B + 31) / 32));
    cudaError_t e = ag__launch(qg_bwd_kernel, grid, QG_THREADS, 0, st->stream, *a, p, i);
    if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: qgrad backward kernel");
  }
  ag__launch(qg_grad_kernel, blocks, QG_THREADS, 0, st->stream, *a, p);
  return ag__cuda_check_launch("cuda: qgrad gradient kernel");
}
