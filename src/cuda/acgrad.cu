/* acgrad.cu — AG__K_ACGRAD (kernels.h): a SAC or TD3 update in about 8 L
 * kernels for networks of L layers, instead of ~170 composed ops.
 *
 * The call, kernel by kernel (H = L - 1 hidden layers):
 *   gather      the B columns (drawn or given) into X0 = [s; a], XN = [s';
 *               .], XP = [s; .] and the target's reward and done (or n-step
 *               return and discount); the optimizers' step values
 *   fwd x H     every forward pass that needs only the table: the actor on
 *               s' (TD3: the target actor) and on s, both critics on (s, a)
 *   heads       their output layers; the actions a' (into XN) and a~ (into
 *               XP) with log pi, from the stream's normals
 *   fwd x H     the target critics on (s', a')
 *   closs       their output layers, the target y, the critics' loss and its
 *               way back through the critics' output layers
 *   bwd x H-1   back through the critics' hidden layers
 *   grad        the critics' gradients, Adam's step for each value as soon
 *               as it is summed, the targets' Polyak step after it
 * and with the actor step:
 *   fwd x H     the updated critics on (s, a~)
 *   aloss       their output layers, the actor's loss and its way back
 *   bwd x H-1   back through the critics' hidden layers
 *   dact        back to a~, through the squashing and the sampling, and
 *               through the actor's output layer
 *   bwd x H-1   back through the actor's hidden layers
 *   grad        the actor's gradients and step (TD3: its target's Polyak
 *               step; SAC: the temperature's)
 * The products are tile.cuh's; intermediate values live in the scratch,
 * column-major [features, B] as on the CPU. Every kernel waits for the one
 * before it before it touches global memory, and every sum runs in a fixed
 * order, so a replay gives the same bits.
 */
#include <string.h>

#include "base/normal.h"
#include "base/philox.h"
#include "base/ac_layout.h"
#include "base/scalar_ops.h"
#include "cuda/tile.cuh"

#define AC_T AG__AC_TILE /* transitions a block of the output-layer kernels takes, a warp each */
#define AC_LOG_STD_MIN (-5.0f)
#define AC_LOG_STD_MAX 2.0f
#define AC_LOG_2PI 1.8378770664093453f

/* What the kernels read of the table and the stream. */
typedef struct ac_src {
  ag__batch_src b;
  int64_t S, A;
} ac_src;

__device__ __forceinline__ int64_t ac_clamp_col(int64_t c, int64_t cap) {
  return c < 0 ? 0 : (c >= cap ? cap - 1 : c);
}

/* The table column of transition b: given, or drawn as AG__K_RANDINT draws. */
__device__ __forceinline__ int64_t ac_col(const ac_src &s, int64_t b) {
  if (s.b.idx) return ac_clamp_col(s.b.idx[b], s.b.capacity);
  const int64_t bound = *s.b.size_dev;
  const int64_t c = bound < 1 ? 0
                              : (int64_t)ag__scale_u64(ag__philox_u64(s.b.seed, *s.b.counter + (uint64_t)b),
                                                       (uint64_t)bound);
  return ac_clamp_col(c, s.b.capacity);
}

/* ---- gather ---- */

typedef struct ac_gather {
  ac_src s;
  int64_t obs_row, next_row, rew_row, done_row;
  const float *ret, *disc;
  float *x0, *xn, *xp, *rd;
  /* the optimizers' step values: state (NULL: no step this call), b1, b2 */
  float *state[3];
  float b1[3], b2[3];
  float *pv;
} ac_gather;

__global__ void __launch_bounds__(256) ac_gather_kernel(ac_gather g) {
  qg_gate()();
  const ac_src &s = g.s;
  const int64_t X = s.S + s.A, b0 = (int64_t)blockIdx.x * 32;
  __shared__ int64_t cols[2][32];
  if (threadIdx.x < 32) {
    const int64_t b = b0 + threadIdx.x;
    const int64_t c = b < s.b.B ? ac_col(s, b) : 0;
    cols[0][threadIdx.x] = c;
    cols[1][threadIdx.x] = b < s.b.B && s.b.last ? ac_clamp_col(s.b.last[b], s.b.capacity) : c;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (int o = 0; o < 3; o++)
      if (g.state[o]) {
        float v[4];
        ag__adam_values(g.state[o], g.b1[o], g.b2[o], 0.0f, v);
        for (int r = 0; r < 4; r++) g.pv[4 * o + r] = v[r];
        ag__adam_store(g.state[o], v);
      }
  __syncthreads();
  const int64_t per = X + s.S + 2; /* values a column: s and a, s', reward and done */
  for (int64_t e = threadIdx.x; e < 32 * per; e += blockDim.x) {
    const int64_t t = e / per, r = e % per, b = b0 + t;
    if (b >= s.b.B) continue;
    const float *col = s.b.table + cols[0][t] * s.b.rows;
    if (r < X) {
      const float v = col[g.obs_row + r] * s.b.scale;
      g.x0[r + b * X] = v;
      if (r < s.S) g.xp[r + b * X] = v;
    } else if (r < X + s.S) {
      const int64_t k = r - X;
      g.xn[k + b * X] = s.b.table[cols[1][t] * s.b.rows + g.next_row + k] * s.b.scale;
    } else if (r == X + s.S) {
      g.rd[2 * b] = g.ret ? g.ret[b] : col[g.rew_row] * s.b.scale;
    } else {
      g.rd[2 * b + 1] = g.disc ? g.disc[b] : col[g.done_row] * s.b.scale;
    }
  }
}

/* ---- the hidden layers' products ---- */

static int ac_vec(const void *p, int64_t m, int64_t ld) {
  return m % 4 == 0 && ld % 4 == 0 && (uintptr_t)p % 16 == 0;
}

typedef struct ac_fwd_part {
  const float *W, *bias, *x;
  int64_t K, ldx;
  float *out;
  int vec_w, vec_x;
} ac_fwd_part;

typedef struct ac_fwd {
  int64_t n, B;
  ac_fwd_part p[4];
} ac_fwd;

/* out = relu(W x + bias) for a 32 x 32 tile (outputs j0.., transitions b0..)
 * of part blockIdx.z. */
__global__ void __launch_bounds__(QG_THREADS) ac_fwd_kernel(ac_fwd f) {
  qg_gate()();
  __shared__ __align__(16) float sm[QG_SMEM];
  const ac_fwd_part &q = f.p[blockIdx.z];
  const int64_t j0 = (int64_t)blockIdx.x * 32, b0 = (int64_t)blockIdx.y * 32, n = f.n;
  const qg_op W = {q.W, n, n, q.K, q.vec_w, 0, 0, NULL};
  const qg_op Xo = {q.x, q.ldx, f.B, q.K, q.vec_x, 0, 0, NULL};
  const int64_t j = j0 + (threadIdx.x & 31);
  const float bj = j < n ? q.bias[j] : 0.0f;
  float v[QG_OUT];
  qg_mm<false, true>(sm, W, Xo, j0, b0, v, qg_nothing());
  if (j < n)
    for (int r = 0; r < QG_OUT; r++) {
      const int64_t b = b0 + (threadIdx.x >> 5) * QG_OUT + r;
      if (b < f.B) {
        const float y = v[r] + bj;
        q.out[j + b * n] = y > 0.0f ? y : 0.0f;
      }
    }
}

typedef struct ac_bwd_part {
  const float *W, *d, *mask;
  float *out;
  int vec_w, vec_d;
} ac_bwd_part;

typedef struct ac_bwd {
  int64_t n, K, B;
  ac_bwd_part p[2];
} ac_bwd;

/* out [k, b] = (mask [k, b] > 0) ? sum_j W [j, k] d [j, b] : 0 for a 32 x 32
 * tile of part blockIdx.z (W [n, K], d [n, B], mask and out [K, B]). */
__global__ void __launch_bounds__(QG_THREADS) ac_bwd_kernel(ac_bwd f) {
  qg_gate()();
  __shared__ __align__(16) float sm[QG_SMEM];
  const ac_bwd_part &q = f.p[blockIdx.z];
  const int64_t n = f.n, K = f.K, B = f.B;
  const int64_t k0 = (int64_t)blockIdx.x * 32, b0 = (int64_t)blockIdx.y * 32;
  const qg_op W = {q.W, n, K, n, q.vec_w, 0, 0, NULL};
  const qg_op D = {q.d, n, B, n, q.vec_d, 0, 0, NULL};
  float v[QG_OUT];
  qg_mm<true, true>(sm, W, D, k0, b0, v, qg_nothing());
  const int64_t k = k0 + (threadIdx.x & 31);
  if (k < K)
    for (int r = 0; r < QG_OUT; r++) {
      const int64_t b = b0 + (threadIdx.x >> 5) * QG_OUT + r;
      if (b < B) q.out[k + b * K] = q.mask[k + b * K] > 0.0f ? v[r] : 0.0f;
    }
}

/* ---- gradients and steps ---- */

typedef struct ac_gjob {
  const float *d, *x; /* d [n, B]; x [K, B] with ld ldx */
  int64_t n, K, ldx;
  int vec_d, vec_x;
  float *w, *b, *gw, *gb, *mw, *vw, *mb, *vb;
  float *tw, *tb; /* the target's, for the Polyak step, or NULL */
  int first;      /* the job's first block */
} ac_gjob;

/* What the last block of a gradient kernel does once the others' work is
 * not needed: the losses, the stream's counter, the temperature. */
typedef struct ac_fin {
  const float *part0, *part1; /* partial sums (part1 NULL: none) */
  int64_t tiles;
  float mul; /* the loss = mul (sum part0 + sum part1) */
  float *loss;
  uint64_t *counter;
  uint64_t draws; /* the call's, added to *counter */
  /* the temperature (log_alpha NULL: none) */
  const float *lpart;
  float *log_alpha, *log_alpha_grad, *m, *v;
  const float *pv;
  float target_entropy, inv_b;
  int sgd;
  float lr, b1, b2, eps, wd;
} ac_fin;

typedef struct ac_grad {
  int jobs, blocks;
  ac_gjob j[2 * AG__AC_MAX_LAYERS];
  int64_t B;
  const float *pv;
  int sgd;
  float lr, b1, b2, eps, wd, tau;
  ac_fin fin;
} ac_grad;

__device__ void ac_finish(const ac_fin &f) {
  if (threadIdx.x != 0) return;
  float s = 0.0f;
  for (int64_t t = 0; t < f.tiles; t++) s += f.part0[t];
  if (f.part1) {
    float s1 = 0.0f;
    for (int64_t t = 0; t < f.tiles; t++) s1 += f.part1[t];
    *f.loss = s * f.mul + s1 * f.mul;
  } else {
    *f.loss = s * f.mul;
  }
  if (f.counter) *f.counter += f.draws;
  if (f.log_alpha) { /* d/d log alpha of -log alpha (mean log pi + target entropy) */
    float ls = 0.0f;
    for (int64_t t = 0; t < f.tiles; t++) ls += f.lpart[t];
    const float g = -1.0f * (ls * f.inv_b) + -f.target_entropy;
    *f.log_alpha_grad = g;
    float p = *f.log_alpha, m = f.m[0], v = f.v[0];
    ag__adam_elem(f.sgd, f.lr, f.b1, f.b2, f.eps, f.wd, f.pv[1], f.pv[2], f.pv[3], g, &p, &m, &v);
    *f.log_alpha = p;
    if (!f.sgd) f.m[0] = m, f.v[0] = v;
  }
}

/* [gW | gb] of a job's layer, a 32 x 32 tile a block (outputs j0.., inputs
 * k0..; input K is the bias): the sum over the batch of d [j, b] x [k, b];
 * then the optimizer's step for each value and, with a target, its Polyak
 * step. The grid's last block finishes the call (ac_finish). */
__global__ void __launch_bounds__(QG_THREADS) ac_grad_kernel(ac_grad g) {
  qg_gate()();
  if ((int)blockIdx.x == g.blocks) {
    ac_finish(g.fin);
    return;
  }
  __shared__ __align__(16) float sm[QG_SMEM];
  int i = 0;
  while (i + 1 < g.jobs && g.j[i + 1].first <= (int)blockIdx.x) i++;
  const ac_gjob &o = g.j[i];
  const int n = (int)o.n, k = (int)o.K, tk = (k + 1 + 31) / 32;
  const int r = (int)blockIdx.x - o.first, j0 = (r / tk) * 32, k0 = (r % tk) * 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const qg_op D = {o.d, o.n, o.n, g.B, o.vec_d, 0, 0, NULL};
  const qg_op Xo = {o.x, o.ldx, o.K, g.B, o.vec_x, 1, 0, NULL};
  float acc[QG_OUT];
  qg_mm<false, false>(sm, D, Xo, j0, k0, acc, qg_nothing());
  const int j = j0 + lane;
  if (j >= n) return;
  const float bc1 = g.pv[1], bc2 = g.pv[2], coef = g.pv[3];
  for (int q = 0; q < QG_OUT; q++) {
    const int kx = k0 + w * QG_OUT + q;
    if (kx > k) continue;
    const bool wt = kx < k;
    const size_t e = wt ? j + (size_t)kx * n : (size_t)j;
    (wt ? o.gw : o.gb)[e] = acc[q];
    float *pp = wt ? o.w : o.b, *mp = wt ? o.mw : o.mb, *vp = wt ? o.vw : o.vb;
    float p = pp[e], m = g.sgd ? 0.0f : mp[e], v = g.sgd ? 0.0f : vp[e];
    ag__adam_elem(g.sgd, g.lr, g.b1, g.b2, g.eps, g.wd, bc1, bc2, coef, acc[q], &p, &m, &v);
    pp[e] = p;
    if (!g.sgd) mp[e] = m, vp[e] = v;
    if (o.tw) {
      float *tp = wt ? o.tw : o.tb;
      tp[e] = g.tau * p + (1.0f - g.tau) * tp[e];
    }
  }
}

/* ---- output layers ---- */

/* sum_k W [c, k] h [k] for a warp (W [nout, K], h K floats), every lane
 * with the same value. */
__device__ __forceinline__ float ac_dot(const float *W, int64_t nout, int64_t c, const float *h, int64_t K) {
  const int lane = threadIdx.x & 31;
  float s = 0.0f;
  for (int64_t k = lane; k < K; k += 32) s += W[c + k * nout] * h[k];
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  return s;
}

__device__ __forceinline__ float ac_warp_sum(float s) {
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  return s;
}

/* The log std of a raw output, as ac.c's affine of its tanh. */
__device__ __forceinline__ float ac_log_std(float th) {
  return ag__map_f(AG__MAP_AFFINE, th, 0.5f * (AC_LOG_STD_MAX - AC_LOG_STD_MIN),
                   AC_LOG_STD_MIN + 0.5f * (AC_LOG_STD_MAX - AC_LOG_STD_MIN));
}

typedef struct ac_heads {
  ac_src s;
  int td3, actor;
  int64_t K, nA;     /* the last hidden layer's width; the actor's outputs */
  const float *h[4]; /* the last hidden layers: actor on s', actor on s, critics on (s, a) */
  const float *W[4], *bias[4];
  float *xn, *xp, *lpn, *lp, *hout, *eps, *p;
  float target_noise, noise_clip;
} ac_heads;

#define AC_MAX_OUT 128 /* 2 x 64 actions */

/* Part blockIdx.y of the first output layers, a warp a transition: the
 * actor's actions and log pi on s' and on s, the critics' values on (s, a). */
__global__ void __launch_bounds__(32 * AC_T) ac_heads_kernel(ac_heads a) {
  qg_gate()();
  __shared__ float out[AC_T][AC_MAX_OUT];
  const int part = blockIdx.y == 0 ? 0 : (a.actor ? (int)blockIdx.y : (int)blockIdx.y + 1);
  const int lane = threadIdx.x & 31, t = threadIdx.x >> 5;
  const int64_t b = (int64_t)blockIdx.x * AC_T + t, B = a.s.b.B, K = a.K, A = a.s.A, S = a.s.S, X = S + A;
  if (b >= B) return;
  const float *h = a.h[part] + b * K;
  if (part >= 2) {
    const float v = ac_dot(a.W[part], 1, 0, h, K);
    if (lane == 0) a.p[(part - 2) + 2 * b] = v + a.bias[part][0];
    return;
  }
  const int64_t nA = a.nA;
  for (int64_t c = 0; c < nA; c++) {
    const float v = ac_dot(a.W[part], nA, c, h, K);
    if (lane == 0) out[t][c] = v + a.bias[part][c];
  }
  __syncwarp();
  /* the normals: a' draws first, then (SAC, actor) a~'s */
  const uint64_t base = *a.s.b.counter + (a.s.b.idx ? 0 : (uint64_t)B) + (part == 1 ? (uint64_t)(A * B) : 0);
  float *x = part == 0 ? a.xn : a.xp;
  float lsum = 0.0f;
  for (int64_t r = lane; r < A; r += 32) {
    const float mu = out[t][r];
    float y;
    if (a.td3) {
      const float y0 = ag__map_f(AG__MAP_TANH, mu, 0.0f, 0.0f);
      if (part == 0) {
        const float e = ag__normal_of(ag__philox_u64(a.s.b.seed, base + (uint64_t)(r + b * A)));
        const float nz = ag__map_f(AG__MAP_AFFINE, e, a.target_noise, 0.0f);
        const float nc =
            a.noise_clip >= 0.0f ? ag__map_f(AG__MAP_CLAMP, nz, -a.noise_clip, a.noise_clip) : nz;
        y = ag__map_f(AG__MAP_CLAMP, y0 + nc, -1.0f, 1.0f);
      } else {
        y = y0;
      }
    } else {
      const float raw = out[t][A + r];
      const float ls = ac_log_std(ag__map_f(AG__MAP_TANH, raw, 0.0f, 0.0f));
      const float sd = ag__map_f(AG__MAP_EXP, ls, 0.0f, 0.0f);
      const float e = ag__normal_of(ag__philox_u64(a.s.b.seed, base + (uint64_t)(r + b * A)));
      const float u = mu + __fmul_rn(sd, e);
      y = ag__map_f(AG__MAP_TANH, u, 0.0f, 0.0f);
      const float t1 = ag__map_f(AG__MAP_AFFINE, __fmul_rn(e, e), -0.5f, -0.5f * AC_LOG_2PI);
      const float om = ag__map_f(AG__MAP_AFFINE, __fmul_rn(y, y), -1.0f, 1.0f + 1e-6f);
      lsum += (t1 - ls) - ag__map_f(AG__MAP_LOG, om, 0.0f, 0.0f);
      if (part == 1) a.eps[r + b * A] = e;
    }
    x[S + r + b * X] = y;
  }
  if (part == 1)
    for (int64_t c = lane; c < nA; c += 32) a.hout[c + b * nA] = out[t][c];
  if (!a.td3) {
    lsum = ac_warp_sum(lsum);
    if (lane == 0) (part == 0 ? a.lpn : a.lp)[b] = lsum;
  }
}

/* The losses' output layers: closs (the targets on (s', a'), y, the
 * critics' loss) and aloss (the updated critics on (s, a~), the actor's
 * loss), each then back through the critics' output layers. */
typedef struct ac_loss {
  int64_t B, K, tiles;
  int td3, nstep, actor_side, nq;
  const float *h[2];           /* the last hidden layers of the two networks read */
  const float *W[2], *bias[2]; /* their output layers */
  const float *mh[2];          /* the ReLU masks below them: the last hidden layers of the critics' passes */
  const float *Wq[2];          /* the critics' output weights for the way back */
  float *dh[2];                /* out: the deltas of the last hidden layers [K, B] */
  float *dout[2];              /* out: the deltas of the critics' outputs [B] (closs), or NULL */
  const float *rd, *p, *lp;    /* closs: rd, Q(s, a), log pi(a'|s'); aloss: log pi(a~|s) in lp */
  const float *log_alpha;
  float gamma;
  float *part0, *part1, *lpart; /* partial sums */
} ac_loss;

__global__ void __launch_bounds__(64 * AC_T) ac_loss_kernel(ac_loss a) {
  qg_gate()();
  __shared__ float q[2][AC_T];
  __shared__ float g[2][AC_T];
  __shared__ float s0[AC_T], s1[AC_T], sl[AC_T];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, k = warp / AC_T, t = warp % AC_T;
  const int64_t b0 = (int64_t)blockIdx.x * AC_T, b = b0 + t, B = a.B, K = a.K;
  if (k < a.nq && b < B) {
    const float v = ac_dot(a.W[k], 1, 0, a.h[k] + b * K, K);
    if (lane == 0) q[k][t] = v + a.bias[k][0];
  }
  __syncthreads();
  if (threadIdx.x < AC_T) {
    const int tt = threadIdx.x;
    const int64_t bb = b0 + tt;
    float l0 = 0.0f, l1 = 0.0f, lps = 0.0f, g0 = 0.0f, g1 = 0.0f;
    if (bb < B) {
      const float alpha = a.td3 ? 0.0f : ag__map_f(AG__MAP_EXP, *a.log_alpha, 0.0f, 0.0f);
      const float inv_b = 1.0f / (float)B;
      if (!a.actor_side) {
        float v = ag__min_takes_a(q[0][tt], q[1][tt]) ? q[0][tt] : q[1][tt];
        if (!a.td3) v = v - __fmul_rn(alpha, a.lp[bb]);
        const float r = a.rd[2 * bb], d = a.rd[2 * bb + 1];
        const float y = a.nstep ? r + __fmul_rn(d, v) : r + a.gamma * (1.0f - d) * v;
        const float d0 = a.p[2 * bb] - y, d1 = a.p[2 * bb + 1] - y;
        l0 = ag__loss_f(0, d0, 0.0f), l1 = ag__loss_f(0, d1, 0.0f);
        g0 = ag__loss_df(0, d0, 0.0f) * inv_b, g1 = ag__loss_df(0, d1, 0.0f) * inv_b;
        a.dout[0][bb] = g0, a.dout[1][bb] = g1;
      } else if (a.td3) {
        l0 = q[0][tt];
        g0 = -inv_b;
      } else {
        const bool first = ag__min_takes_a(q[0][tt], q[1][tt]);
        const float m = first ? q[0][tt] : q[1][tt];
        l0 = __fmul_rn(alpha, a.lp[bb]) - m;
        lps = a.lp[bb];
        g0 = first ? -inv_b : 0.0f, g1 = first ? 0.0f : -inv_b;
      }
    }
    s0[tt] = l0, s1[tt] = l1, sl[tt] = lps;
    g[0][tt] = g0, g[1][tt] = g1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float x0 = 0.0f, x1 = 0.0f, xl = 0.0f;
    for (int tt = 0; tt < AC_T; tt++) x0 += s0[tt], x1 += s1[tt], xl += sl[tt];
    a.part0[blockIdx.x] = x0;
    if (a.part1) a.part1[blockIdx.x] = x1;
    if (a.lpart) a.lpart[blockIdx.x] = xl;
  }
  if (k < a.nq && b < B) { /* d [j, b] = (mask > 0) ? W_out [0, j] g : 0 */
    const float gv = g[k][t];
    for (int64_t j = lane; j < K; j += 32)
      a.dh[k][j + b * K] = a.mh[k][j + b * K] > 0.0f ? a.Wq[k][j] * gv : 0.0f;
  }
}

/* Back from the critics' first layers to a~, through the sampling and the
 * squashing, and through the actor's output layer, a warp a transition. */
typedef struct ac_dact {
  int64_t B, S, A, n0, K, nA;
  int td3, nq;
  const float *W0[2];  /* the critics' first layers [n0, S + A] */
  const float *dq0[2]; /* the deltas of their first layers [n0, B] */
  const float *xp, *eps, *hout, *lp, *log_alpha;
  const float *Wa;   /* the actor's output layer [nA, K] */
  const float *mask; /* the actor's last hidden layer on s [K, B] */
  float *dah, *da;   /* out: deltas of the actor's outputs [nA, B] and last hidden layer [K, B] */
} ac_dact;

__global__ void __launch_bounds__(32 * AC_T) ac_dact_kernel(ac_dact a) {
  qg_gate()();
  __shared__ float gh[AC_T][AC_MAX_OUT];
  const int lane = threadIdx.x & 31, t = threadIdx.x >> 5;
  const int64_t b = (int64_t)blockIdx.x * AC_T + t, B = a.B, S = a.S, A = a.A, X = S + A, n0 = a.n0;
  if (b >= B) return;
  for (int64_t r = 0; r < A; r++) { /* d loss / d a~_r through the critics */
    float s = 0.0f;
    for (int k = 0; k < a.nq; k++) {
      const float *W = a.W0[k] + (S + r) * n0, *d = a.dq0[k] + b * n0;
      float sk = 0.0f;
      for (int64_t j = lane; j < n0; j += 32) sk += W[j] * d[j];
      s += ac_warp_sum(sk);
    }
    if (lane == 0) gh[t][r] = s;
  }
  __syncwarp();
  const float alpha = a.td3 ? 0.0f : ag__map_f(AG__MAP_EXP, *a.log_alpha, 0.0f, 0.0f);
  const float ab = alpha / (float)B; /* d loss / d log pi */
  /* each lane reads and then overwrites only its own rows r and A + r */
  for (int64_t r = lane; r < A; r += 32) {
    const float y = a.xp[S + r + b * X], ga = gh[t][r];
    if (a.td3) {
      gh[t][r] = ag__map2_f(AG__MAP2_TANH_BWD, ga, y, 0.0f, 0.0f);
      continue;
    }
    const float e = a.eps[r + b * A], raw = a.hout[A + r + b * a.nA];
    const float th = ag__map_f(AG__MAP_TANH, raw, 0.0f, 0.0f);
    const float ls = ac_log_std(th), sd = ag__map_f(AG__MAP_EXP, ls, 0.0f, 0.0f);
    const float om = ag__map_f(AG__MAP_AFFINE, __fmul_rn(y, y), -1.0f, 1.0f + 1e-6f);
    const float gy = ga + 2.0f * y * (ab / om);
    const float gu = ag__map2_f(AG__MAP2_TANH_BWD, gy, y, 0.0f, 0.0f);
    const float gls = __fmul_rn(gu, e) * sd - ab;
    gh[t][r] = gu;
    gh[t][A + r] =
        ag__map2_f(AG__MAP2_TANH_BWD, 0.5f * (AC_LOG_STD_MAX - AC_LOG_STD_MIN) * gls, th, 0.0f, 0.0f);
  }
  __syncwarp();
  const int64_t nA = a.nA, K = a.K;
  for (int64_t c = lane; c < nA; c += 32) a.dah[c + b * nA] = gh[t][c];
  for (int64_t j = lane; j < K; j += 32) {
    float s = 0.0f;
    for (int64_t c = 0; c < nA; c++) s += a.Wa[c + j * nA] * gh[t][c];
    a.da[j + b * K] = a.mask[j + b * K] > 0.0f ? s : 0.0f;
  }
}

/* ---- the call ---- */

static ag_status ac_launched(cudaError_t e, const char *what) {
  return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, what);
}

size_t ag__cuda_acgrad_scratch(const void *args) {
  ag__acgrad_args a = *(const ag__acgrad_args *)args;
  a.ws = NULL;
  return ag__ac_layout_of(&a).floats * sizeof(float);
}

ag_status ag__cuda_acgrad(ag__cuda_state *st, const void *args) {
  const ag__acgrad_args *a = (const ag__acgrad_args *)args;
  const int L = a->L, H = L - 1, td3 = a->td3, actor = a->actor;
  const int64_t B = a->src.B, S = a->S, A = a->A, X = S + A, nA = td3 ? A : 2 * A;
  if (L < 2 || L > AG__AC_MAX_LAYERS || A < 1 || 2 * A > AC_MAX_OUT || B < 1)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "cuda: %d layers and %lld actions are outside the fused SAC/TD3 update", L, (long long)A);
  const ag__ac_layout y = ag__ac_layout_of(a);
  const int64_t tiles = (B + AC_T - 1) / AC_T, K = a->hidden[H - 1];
  const ac_src src = {a->src, S, A};
  const ag__ac_net &pn = td3 ? a->pi_t : a->pi; /* the actor on s' */
  ag_status s;
  { /* gather */
    ac_gather g;
    memset(&g, 0, sizeof g);
    g.s = src;
    g.obs_row = a->src.obs_row, g.next_row = a->src.next_row, g.rew_row = a->src.rew_row,
    g.done_row = a->src.done_row;
    g.ret = a->src.ret, g.disc = a->src.disc;
    g.x0 = y.x0, g.xn = y.xn, g.xp = y.xp, g.rd = y.rd;
    const ag__ac_opt *o[3] = {&a->opt_critic, &a->opt_actor, &a->opt_alpha};
    const int on[3] = {1, actor, actor && !td3 && a->autotune};
    for (int q = 0; q < 3; q++)
      if (on[q]) g.state[q] = o[q]->state, g.b1[q] = o[q]->b1, g.b2[q] = o[q]->b2;
    g.pv = y.pv;
    if ((s = ac_launched(ag__launch(ac_gather_kernel, (unsigned)((B + 31) / 32), 256, 0, st->stream, g),
                         "cuda: acgrad gather kernel")))
      return s;
  }
  /* the forward passes of parts ps through the hidden layers */
  auto forward = [&](const int *ps, int np) -> ag_status {
    for (int i = 0; i < H; i++) {
      ac_fwd f;
      memset(&f, 0, sizeof f);
      f.n = a->hidden[i], f.B = B;
      for (int q = 0; q < np; q++) {
        const int p = ps[q];
        const ag__ac_net &net = p == 0   ? pn
                                : p == 1 ? a->pi
                                : p <= 3 ? a->q[p - 2]
                                : p <= 5 ? a->qt[p - 4]
                                         : a->q[p - 6];
        ac_fwd_part &fp = f.p[q];
        fp.W = net.w[i], fp.bias = net.b[i];
        if (i == 0) {
          const float *x0 = p == 0 || (p >= 4 && p <= 5) ? y.xn : p >= 6 ? y.xp : y.x0;
          fp.x = x0, fp.ldx = X, fp.K = p <= 1 ? S : X;
        } else {
          fp.x = y.h[p][i - 1], fp.ldx = a->hidden[i - 1], fp.K = a->hidden[i - 1];
        }
        fp.out = y.h[p][i];
        fp.vec_w = ac_vec(fp.W, f.n, f.n);
        fp.vec_x = ac_vec(fp.x, fp.K, fp.ldx);
      }
      dim3 grid((unsigned)((f.n + 31) / 32), (unsigned)((B + 31) / 32), (unsigned)np);
      ag_status r = ac_launched(ag__launch(ac_fwd_kernel, grid, QG_THREADS, 0, st->stream, f),
                                "cuda: acgrad forward kernel");
      if (r) return r;
    }
    return AG_OK;
  };
  /* back through hidden layers H-1 .. 1 of nets, deltas d[q][i], masks h[part[q]][i-1] */
  auto backward = [&](const ag__ac_net *const *nets, float *const(*d)[AG__AC_MAX_LAYERS - 1],
                      const int *parts, int np) -> ag_status {
    for (int i = H - 1; i >= 1; i--) {
      ac_bwd f;
      memset(&f, 0, sizeof f);
      f.n = a->hidden[i], f.K = a->hidden[i - 1], f.B = B;
      for (int q = 0; q < np; q++) {
        ac_bwd_part &bp = f.p[q];
        bp.W = nets[q]->w[i], bp.d = d[q][i], bp.mask = y.h[parts[q]][i - 1], bp.out = d[q][i - 1];
        bp.vec_w = ac_vec(bp.W, f.n, f.n), bp.vec_d = ac_vec(bp.d, f.n, f.n);
      }
      dim3 grid((unsigned)((f.K + 31) / 32), (unsigned)((B + 31) / 32), (unsigned)np);
      ag_status r = ac_launched(ag__launch(ac_bwd_kernel, grid, QG_THREADS, 0, st->stream, f),
                                "cuda: acgrad backward kernel");
      if (r) return r;
    }
    return AG_OK;
  };
  /* the gradients and steps of nets (their deltas d, inputs from parts), with fin */
  auto gradient = [&](const ag__ac_net *const *nets, const ag__ac_net *const *targets,
                      float *const(*d)[AG__AC_MAX_LAYERS - 1], float *const *dout, const int *parts, int nn,
                      const ag__ac_opt &o, const float *pv, const ac_fin &fin) -> ag_status {
    ac_grad g;
    memset(&g, 0, sizeof g);
    int blocks = 0;
    for (int q = 0; q < nn; q++)
      for (int i = 0; i < L; i++) {
        ac_gjob &j = g.j[g.jobs++];
        const int p = parts[q];
        j.n = i < H ? a->hidden[i] : (p == 1 ? nA : 1);
        if (i == 0) {
          j.x = p == 1 ? y.xp : y.x0, j.K = p == 1 ? S : X, j.ldx = X;
        } else {
          j.x = y.h[p][i - 1], j.K = a->hidden[i - 1], j.ldx = a->hidden[i - 1];
        }
        j.d = i < H ? d[q][i] : dout[q];
        j.vec_d = ac_vec(j.d, j.n, j.n), j.vec_x = ac_vec(j.x, j.K, j.ldx);
        const ag__ac_net *net = nets[q];
        j.w = net->w[i], j.b = net->b[i], j.gw = net->gw[i], j.gb = net->gb[i];
        const int e = q * 2 * L + 2 * i;
        j.mw = o.m[e], j.vw = o.v[e], j.mb = o.m[e + 1], j.vb = o.v[e + 1];
        if (targets && targets[q]) j.tw = targets[q]->w[i], j.tb = targets[q]->b[i];
        j.first = blocks;
        blocks += (int)(((j.n + 31) / 32) * ((j.K + 1 + 31) / 32));
      }
    g.blocks = blocks;
    g.B = B, g.pv = pv, g.sgd = o.sgd, g.lr = o.lr, g.b1 = o.b1, g.b2 = o.b2, g.eps = o.eps, g.wd = o.wd;
    g.tau = a->tau;
    g.fin = fin;
    return ac_launched(ag__launch(ac_grad_kernel, (unsigned)(blocks + 1), QG_THREADS, 0, st->stream, g),
                       "cuda: acgrad gradient kernel");
  };
  /* 1: the forward passes on the table's values */
  {
    int ps[4], np = 0;
    ps[np++] = 0;
    if (actor) ps[np++] = 1;
    ps[np++] = 2, ps[np++] = 3;
    if ((s = forward(ps, np))) return s;
  }
  { /* 2: their output layers */
    ac_heads h;
    memset(&h, 0, sizeof h);
    h.s = src, h.td3 = td3, h.actor = actor, h.K = K, h.nA = nA;
    const ag__ac_net *nets[4] = {&pn, &a->pi, &a->q[0], &a->q[1]};
    for (int p = 0; p < 4; p++) h.h[p] = y.h[p][H - 1], h.W[p] = nets[p]->w[H], h.bias[p] = nets[p]->b[H];
    h.xn = y.xn, h.xp = y.xp, h.lpn = y.lpn, h.lp = y.lp, h.hout = y.hout, h.eps = y.eps, h.p = y.p;
    h.target_noise = a->target_noise, h.noise_clip = a->noise_clip;
    dim3 grid((unsigned)tiles, actor ? 4u : 3u);
    if ((s = ac_launched(ag__launch(ac_heads_kernel, grid, 32 * AC_T, 0, st->stream, h),
                         "cuda: acgrad output kernel")))
      return s;
  }
  { /* 3: the targets on (s', a') */
    const int ps[2] = {4, 5};
    if ((s = forward(ps, 2))) return s;
  }
  { /* 4: the critics' loss, back through their output layers */
    ac_loss l;
    memset(&l, 0, sizeof l);
    l.B = B, l.K = K, l.tiles = tiles, l.td3 = td3, l.nstep = a->src.ret != NULL, l.nq = 2;
    for (int k = 0; k < 2; k++) {
      l.h[k] = y.h[4 + k][H - 1], l.W[k] = a->qt[k].w[H], l.bias[k] = a->qt[k].b[H];
      l.mh[k] = y.h[2 + k][H - 1], l.Wq[k] = a->q[k].w[H], l.dh[k] = y.dc[k][H - 1], l.dout[k] = y.dch[k];
    }
    l.rd = y.rd, l.p = y.p, l.lp = y.lpn, l.log_alpha = a->log_alpha, l.gamma = a->gamma;
    l.part0 = y.cpart, l.part1 = y.cpart + tiles;
    if ((s = ac_launched(ag__launch(ac_loss_kernel, (unsigned)tiles, 64 * AC_T, 0, st->stream, l),
                         "cuda: acgrad critic loss kernel")))
      return s;
  }
  const ag__ac_net *qs[2] = {&a->q[0], &a->q[1]}, *qts[2] = {&a->qt[0], &a->qt[1]};
  {
    const int parts[2] = {2, 3};
    if ((s = backward(qs, y.dc, parts, 2))) return s;
    ac_fin fin;
    memset(&fin, 0, sizeof fin);
    fin.part0 = y.cpart, fin.part1 = y.cpart + tiles, fin.tiles = tiles, fin.mul = 1.0f / (float)B;
    fin.loss = a->closs;
    fin.counter = a->src.counter;
    fin.draws = ag__ac_draws(a);
    if ((s = gradient(qs, a->targets ? qts : NULL, y.dc, y.dch, parts, 2, a->opt_critic, y.pv, fin)))
      return s;
  }
  if (!actor) return AG_OK;
  const int nq = td3 ? 1 : 2;
  { /* 5: the updated critics on (s, a~) */
    const int ps[2] = {6, 7};
    if ((s = forward(ps, nq))) return s;
  }
  { /* 6: the actor's loss, back through the critics' output layers */
    ac_loss l;
    memset(&l, 0, sizeof l);
    l.B = B, l.K = K, l.tiles = tiles, l.td3 = td3, l.actor_side = 1, l.nq = nq;
    for (int k = 0; k < nq; k++) {
      l.h[k] = y.h[6 + k][H - 1], l.W[k] = a->q[k].w[H], l.bias[k] = a->q[k].b[H];
      l.mh[k] = y.h[6 + k][H - 1], l.Wq[k] = a->q[k].w[H], l.dh[k] = y.dq[k][H - 1];
    }
    l.lp = y.lp, l.log_alpha = a->log_alpha;
    l.part0 = y.apart, l.lpart = td3 ? NULL : y.lpart;
    if ((s = ac_launched(ag__launch(ac_loss_kernel, (unsigned)tiles, 64 * AC_T, 0, st->stream, l),
                         "cuda: acgrad actor loss kernel")))
      return s;
    const int parts[2] = {6, 7};
    if ((s = backward(qs, y.dq, parts, nq))) return s;
  }
  { /* 7: back to a~ and through the actor's output layer */
    ac_dact d;
    memset(&d, 0, sizeof d);
    d.B = B, d.S = S, d.A = A, d.n0 = a->hidden[0], d.K = K, d.nA = nA, d.td3 = td3, d.nq = nq;
    for (int k = 0; k < nq; k++) d.W0[k] = a->q[k].w[0], d.dq0[k] = y.dq[k][0];
    d.xp = y.xp, d.eps = y.eps, d.hout = y.hout, d.lp = y.lp, d.log_alpha = a->log_alpha;
    d.Wa = a->pi.w[H], d.mask = y.h[1][H - 1], d.dah = y.dah, d.da = y.da[H - 1];
    if ((s = ac_launched(ag__launch(ac_dact_kernel, (unsigned)tiles, 32 * AC_T, 0, st->stream, d),
                         "cuda: acgrad action kernel")))
      return s;
  }
  {
    const ag__ac_net *pis[1] = {&a->pi}, *pits[1] = {&a->pi_t};
    float *const(*da)[AG__AC_MAX_LAYERS - 1] = &y.da;
    const int parts[1] = {1};
    if ((s = backward(pis, da, parts, 1))) return s;
    ac_fin fin;
    memset(&fin, 0, sizeof fin);
    fin.part0 = y.apart, fin.tiles = tiles, fin.mul = td3 ? -1.0f / (float)B : 1.0f / (float)B;
    fin.loss = a->aloss;
    if (!td3 && a->autotune) {
      const ag__ac_opt &o = a->opt_alpha;
      fin.lpart = y.lpart, fin.log_alpha = a->log_alpha, fin.log_alpha_grad = a->log_alpha_grad;
      fin.m = o.m[0], fin.v = o.v[0], fin.pv = y.pv + 8, fin.target_entropy = a->target_entropy;
      fin.inv_b = 1.0f / (float)B, fin.sgd = o.sgd, fin.lr = o.lr, fin.b1 = o.b1, fin.b2 = o.b2,
      fin.eps = o.eps, fin.wd = o.wd;
    }
    float *const dout[1] = {y.dah};
    if ((s = gradient(pis, td3 ? pits : NULL, da, dout, parts, 1, a->opt_actor, y.pv + 4, fin))) return s;
  }
  return AG_OK;
}
