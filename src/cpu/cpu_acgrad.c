/* cpu_acgrad.c — AG__K_ACGRAD on the CPU (kernels.h): a SAC or TD3 update
 * as matrix products (CBLAS) over the whole batch, in the steps of the CUDA
 * kernels (cuda/acgrad.cu) and through the same scratch (base/ac_layout.h):
 * the gathered batch, the forward passes, the output layers with the
 * actions and log pi, the critics' loss and their way back, their
 * gradients and steps, then the actor's. Partial sums are taken in groups
 * of AG__AC_TILE transitions, as there.
 */
#include <stdint.h>
#include <string.h>

#include "base/ac_layout.h"
#include "base/base.h"
#include "base/kernels.h"
#include "base/normal.h"
#include "base/philox.h"
#include "base/scalar_ops.h"
#include "cpu/cpu_blas.h"
#include "cpu/cpu_internal.h"

#define LOG_STD_MIN (-5.0f)
#define LOG_STD_MAX 2.0f
#define LOG_2PI 1.8378770664093453f

/* y [n, B] = act(W x + b) for W [n, k], x [k, B] with ld ldx. */
static void dense(const float *w, const float *b, const float *x, int64_t ldx, float *y, int64_t n, int64_t k,
                  int64_t B, int relu) {
  for (int64_t j = 0; j < B; j++) memcpy(y + j * n, b, (size_t)n * sizeof *y);
  ag__sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)B, (int)k, 1.0f, w, (int)n, x, (int)ldx,
            1.0f, y, (int)n);
  if (relu)
    for (int64_t e = 0; e < n * B; e++) y[e] = y[e] > 0.0f ? y[e] : 0.0f;
}

/* out [K, B] = (mask > 0) ? W^T d : 0 for W [n, K], d [n, B]. */
static void back(const float *w, int64_t n, int64_t K, const float *d, const float *mask, float *out,
                 int64_t B) {
  ag__sgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)K, (int)B, (int)n, 1.0f, w, (int)n, d, (int)n, 0.0f,
            out, (int)K);
  for (int64_t e = 0; e < K * B; e++) out[e] = mask[e] > 0.0f ? out[e] : 0.0f;
}

/* The optimizer's step values for this call (and its state moved on). */
static void prep(const ag__ac_opt *o, float *pv) {
  ag__adam_values(o->state, o->b1, o->b2, 0.0f, pv);
  ag__adam_store(o->state, pv);
}

/* One value's step (and, with t, the target's Polyak step). */
static void step(const ag__ac_opt *o, const float *pv, float g, float *p, float *m, float *v, float *t,
                 float tau) {
  float pp = *p, mm = m ? *m : 0.0f, vv = v ? *v : 0.0f;
  ag__adam_elem(o->sgd, o->lr, o->b1, o->b2, o->eps, o->wd, pv[1], pv[2], pv[3], g, &pp, &mm, &vv);
  *p = pp;
  if (!o->sgd) *m = mm, *v = vv;
  if (t) *t = tau * pp + (1.0f - tau) * *t;
}

/* A network's gradients from its deltas (d[i] [sizes[i+1], B], the
 * output's dout) and layer inputs (x[i], ld[i]), then the steps of entries
 * e0 + 2i, e0 + 2i + 1 and the target's Polyak steps (t NULL: none). */
static void gradient(const ag__acgrad_args *a, const ag__ac_net *net, const ag__ac_net *t, float *const *d,
                     const float *dout, const float *const *x, const int64_t *ld, const int64_t *in,
                     int64_t nout, const ag__ac_opt *o, int e0, const float *pv) {
  const int L = a->L;
  const int64_t B = a->src.B;
  for (int i = 0; i < L; i++) {
    const int64_t n = i < L - 1 ? a->hidden[i] : nout, K = in[i];
    const float *di = i < L - 1 ? d[i] : dout;
    ag__sgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)n, (int)K, (int)B, 1.0f, di, (int)n, x[i],
              (int)ld[i], 0.0f, net->gw[i], (int)n);
    for (int64_t j = 0; j < n; j++) {
      float s = 0.0f;
      for (int64_t b = 0; b < B; b++) s += di[j + b * n];
      net->gb[i][j] = s;
    }
    const int e = e0 + 2 * i;
    for (int64_t q = 0; q < n * K; q++)
      step(o, pv, net->gw[i][q], &net->w[i][q], o->sgd ? NULL : o->m[e] + q, o->sgd ? NULL : o->v[e] + q,
           t ? t->w[i] + q : NULL, a->tau);
    for (int64_t q = 0; q < n; q++)
      step(o, pv, net->gb[i][q], &net->b[i][q], o->sgd ? NULL : o->m[e + 1] + q,
           o->sgd ? NULL : o->v[e + 1] + q, t ? t->b[i] + q : NULL, a->tau);
  }
}

/* A network's hidden layers on x [in, B] (ld ldx) into h[0 .. L-2]. */
static void hidden_pass(const ag__acgrad_args *a, const ag__ac_net *net, const float *x, int64_t ldx,
                        int64_t in, float *const *h) {
  for (int i = 0; i < a->L - 1; i++) {
    const int64_t K = i ? a->hidden[i - 1] : in;
    dense(net->w[i], net->b[i], i ? h[i - 1] : x, i ? K : ldx, h[i], a->hidden[i], K, a->src.B, 1);
  }
}

static float log_std(float th) {
  return ag__map_f(AG__MAP_AFFINE, th, 0.5f * (LOG_STD_MAX - LOG_STD_MIN),
                   LOG_STD_MIN + 0.5f * (LOG_STD_MAX - LOG_STD_MIN));
}

/* The actor's actions from its outputs o [nA, B] into rows S.. of x, with
 * normals from draw `base` on (SAC: log pi into lp, the normals into eps
 * when given; TD3 with noise: the smoothing noise). */
static void actions(const ag__acgrad_args *a, const float *o, uint64_t base, int noise, float *x, float *lp,
                    float *eps) {
  const int64_t A = a->A, S = a->S, X = S + A, nA = a->td3 ? A : 2 * A;
  for (int64_t b = 0; b < a->src.B; b++) {
    float lsum = 0.0f;
    for (int64_t r = 0; r < A; r++) {
      const float mu = o[r + b * nA];
      float y;
      if (a->td3) {
        y = ag__map_f(AG__MAP_TANH, mu, 0.0f, 0.0f);
        if (noise) {
          const float e = ag__normal_of(ag__philox_u64(a->src.seed, base + (uint64_t)(r + b * A)));
          const float nz = ag__map_f(AG__MAP_AFFINE, e, a->target_noise, 0.0f);
          const float nc =
              a->noise_clip >= 0.0f ? ag__map_f(AG__MAP_CLAMP, nz, -a->noise_clip, a->noise_clip) : nz;
          y = ag__map_f(AG__MAP_CLAMP, y + nc, -1.0f, 1.0f);
        }
      } else {
        const float ls = log_std(ag__map_f(AG__MAP_TANH, o[A + r + b * nA], 0.0f, 0.0f));
        const float sd = ag__map_f(AG__MAP_EXP, ls, 0.0f, 0.0f);
        const float e = ag__normal_of(ag__philox_u64(a->src.seed, base + (uint64_t)(r + b * A)));
        const float se = sd * e;
        y = ag__map_f(AG__MAP_TANH, mu + se, 0.0f, 0.0f);
        const float e2 = e * e, y2 = y * y;
        const float t1 = ag__map_f(AG__MAP_AFFINE, e2, -0.5f, -0.5f * LOG_2PI);
        const float om = ag__map_f(AG__MAP_AFFINE, y2, -1.0f, 1.0f + 1e-6f);
        lsum += (t1 - ls) - ag__map_f(AG__MAP_LOG, om, 0.0f, 0.0f);
        if (eps) eps[r + b * A] = e;
      }
      x[S + r + b * X] = y;
    }
    if (!a->td3) lp[b] = lsum;
  }
}

ag_status ag__cpu_acgrad(const void *args) {
  const ag__acgrad_args *a = args;
  const int L = a->L, H = L - 1, td3 = a->td3;
  const int64_t B = a->src.B, S = a->S, A = a->A, X = S + A, nA = td3 ? A : 2 * A, K = a->hidden[H - 1];
  if (L < 2 || L > AG__AC_MAX_LAYERS || A < 1 || A > 64 || B < 1)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "cpu: %d layers and %lld actions are outside the fused SAC/TD3 update", L, (long long)A);
  const ag__ac_layout y = ag__ac_layout_of(a);
  const uint64_t counter = *a->src.counter, normals = counter + (a->src.idx ? 0 : (uint64_t)B);
  /* the batch */
  const int64_t bound = a->src.idx ? 0 : *a->src.size_dev;
  for (int64_t b = 0; b < B; b++) {
    int64_t c = a->src.idx
                    ? a->src.idx[b]
                    : (bound < 1 ? 0
                                 : (int64_t)ag__scale_u64(ag__philox_u64(a->src.seed, counter + (uint64_t)b),
                                                          (uint64_t)bound));
    c = c < 0 ? 0 : (c >= a->src.capacity ? a->src.capacity - 1 : c);
    int64_t cn = a->src.last ? a->src.last[b] : c;
    cn = cn < 0 ? 0 : (cn >= a->src.capacity ? a->src.capacity - 1 : cn);
    const float *col = a->src.table + c * a->src.rows, *ncol = a->src.table + cn * a->src.rows;
    for (int64_t r = 0; r < X; r++) {
      y.x0[r + b * X] = col[a->src.obs_row + r] * a->src.scale;
      if (r < S)
        y.xp[r + b * X] = y.x0[r + b * X], y.xn[r + b * X] = ncol[a->src.next_row + r] * a->src.scale;
    }
    y.rd[2 * b] = a->src.ret ? a->src.ret[b] : col[a->src.rew_row] * a->src.scale;
    y.rd[2 * b + 1] = a->src.disc ? a->src.disc[b] : col[a->src.done_row] * a->src.scale;
  }
  float *pv = y.pv;
  prep(&a->opt_critic, pv);
  if (a->actor) prep(&a->opt_actor, pv + 4);
  if (a->actor && !td3 && a->autotune) prep(&a->opt_alpha, pv + 8);
  const float alpha = td3 ? 0.0f : ag__map_f(AG__MAP_EXP, *a->log_alpha, 0.0f, 0.0f), inv_b = 1.0f / (float)B;
  /* the forward passes on the table's values and their output layers */
  const ag__ac_net *pn = td3 ? &a->pi_t : &a->pi;
  hidden_pass(a, pn, y.xn, X, S, y.h[0]);
  dense(pn->w[H], pn->b[H], y.h[0][H - 1], K, y.dah, nA, K, B, 0);
  actions(a, y.dah, normals, 1, y.xn, y.lpn, NULL);
  if (a->actor) {
    hidden_pass(a, &a->pi, y.x0, X, S, y.h[1]);
    dense(a->pi.w[H], a->pi.b[H], y.h[1][H - 1], K, y.hout, nA, K, B, 0);
    actions(a, y.hout, normals + (uint64_t)(A * B), 0, y.xp, y.lp, y.eps);
  }
  for (int k = 0; k < 2; k++) {
    hidden_pass(a, &a->q[k], y.x0, X, X, y.h[2 + k]);
    dense(a->q[k].w[H], a->q[k].b[H], y.h[2 + k][H - 1], K, y.dch[k], 1, K, B, 0);
    for (int64_t b = 0; b < B; b++) y.p[k + 2 * b] = y.dch[k][b];
    hidden_pass(a, &a->qt[k], y.xn, X, X, y.h[4 + k]);
    dense(a->qt[k].w[H], a->qt[k].b[H], y.h[4 + k][H - 1], K, y.dq[k][0], 1, K, B, 0); /* Q'_k, for now */
  }
  /* the critics' loss and its way back */
  ag__tiled sq[2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
  for (int64_t b = 0; b < B; b++) {
    const float t0 = y.dq[0][0][b], t1 = y.dq[1][0][b];
    float v = ag__min_takes_a(t0, t1) ? t0 : t1;
    if (!td3) v = v - alpha * y.lpn[b];
    const float r = y.rd[2 * b], d = y.rd[2 * b + 1];
    const float target = a->src.ret ? r + d * v : r + a->gamma * (1.0f - d) * v;
    for (int k = 0; k < 2; k++) {
      const float diff = y.p[k + 2 * b] - target;
      ag__tiled_add(&sq[k], b, B, ag__loss_f(0, diff, 0.0f));
      y.dch[k][b] = ag__loss_df(0, diff, 0.0f) * inv_b;
    }
  }
  *a->closs = sq[0].total * inv_b + sq[1].total * inv_b;
  for (int k = 0; k < 2; k++) {
    for (int64_t b = 0; b < B; b++)
      for (int64_t j = 0; j < K; j++) {
        const int64_t e = j + b * K;
        y.dc[k][H - 1][e] = y.h[2 + k][H - 1][e] > 0.0f ? a->q[k].w[H][j] * y.dch[k][b] : 0.0f;
      }
    for (int i = H - 1; i >= 1; i--)
      back(a->q[k].w[i], a->hidden[i], a->hidden[i - 1], y.dc[k][i], y.h[2 + k][i - 1], y.dc[k][i - 1], B);
  }
  for (int k = 0; k < 2; k++) {
    const float *x[AG__AC_MAX_LAYERS];
    int64_t ld[AG__AC_MAX_LAYERS], in[AG__AC_MAX_LAYERS];
    x[0] = y.x0, ld[0] = X, in[0] = X;
    for (int i = 1; i < L; i++) x[i] = y.h[2 + k][i - 1], ld[i] = in[i] = a->hidden[i - 1];
    gradient(a, &a->q[k], a->targets ? &a->qt[k] : NULL, y.dc[k], y.dch[k], x, ld, in, 1, &a->opt_critic,
             k * 2 * L, pv);
  }
  if (!a->actor) {
    *a->src.counter = counter + ag__ac_draws(a);
    return AG_OK;
  }
  /* the actor's loss on the updated critics, and its way back */
  const int nq = td3 ? 1 : 2;
  for (int k = 0; k < nq; k++) {
    hidden_pass(a, &a->q[k], y.xp, X, X, y.h[6 + k]);
    dense(a->q[k].w[H], a->q[k].b[H], y.h[6 + k][H - 1], K, y.dch[k], 1, K, B, 0); /* Q_k(s, a~), for now */
  }
  ag__tiled al = {0.0f, 0.0f};
  for (int64_t b = 0; b < B; b++) {
    float g0, g1 = 0.0f;
    if (td3) {
      ag__tiled_add(&al, b, B, y.dch[0][b]);
      g0 = -inv_b;
    } else {
      const float q0 = y.dch[0][b], q1 = y.dch[1][b];
      const int first = ag__min_takes_a(q0, q1);
      ag__tiled_add(&al, b, B, alpha * y.lp[b] - (first ? q0 : q1));
      g0 = first ? -inv_b : 0.0f, g1 = first ? 0.0f : -inv_b;
    }
    for (int k = 0; k < nq; k++)
      for (int64_t j = 0; j < K; j++) {
        const int64_t e = j + b * K;
        y.dq[k][H - 1][e] = y.h[6 + k][H - 1][e] > 0.0f ? a->q[k].w[H][j] * (k ? g1 : g0) : 0.0f;
      }
  }
  *a->aloss = al.total * (td3 ? -inv_b : inv_b);
  for (int k = 0; k < nq; k++)
    for (int i = H - 1; i >= 1; i--)
      back(a->q[k].w[i], a->hidden[i], a->hidden[i - 1], y.dq[k][i], y.h[6 + k][i - 1], y.dq[k][i - 1], B);
  const int64_t n0 = a->hidden[0];
  const float ab = alpha * inv_b;
  for (int64_t b = 0; b < B; b++)
    for (int64_t r = 0; r < A; r++) {
      float ga = 0.0f;
      for (int k = 0; k < nq; k++) {
        const float *w = a->q[k].w[0] + (S + r) * n0, *d = y.dq[k][0] + b * n0;
        float s = 0.0f;
        for (int64_t j = 0; j < n0; j++) s += w[j] * d[j];
        ga += s;
      }
      const float yy = y.xp[S + r + b * X];
      if (td3) {
        y.dah[r + b * nA] = ag__map2_f(AG__MAP2_TANH_BWD, ga, yy, 0.0f, 0.0f);
        continue;
      }
      const float e = y.eps[r + b * A], th = ag__map_f(AG__MAP_TANH, y.hout[A + r + b * nA], 0.0f, 0.0f);
      const float ls = log_std(th), sd = ag__map_f(AG__MAP_EXP, ls, 0.0f, 0.0f);
      const float om = ag__map_f(AG__MAP_AFFINE, yy * yy, -1.0f, 1.0f + 1e-6f);
      const float gy = ga + 2.0f * yy * (ab / om);
      const float gu = ag__map2_f(AG__MAP2_TANH_BWD, gy, yy, 0.0f, 0.0f);
      const float gls = gu * e * sd - ab;
      y.dah[r + b * nA] = gu;
      y.dah[A + r + b * nA] =
          ag__map2_f(AG__MAP2_TANH_BWD, 0.5f * (LOG_STD_MAX - LOG_STD_MIN) * gls, th, 0.0f, 0.0f);
    }
  back(a->pi.w[H], nA, K, y.dah, y.h[1][H - 1], y.da[H - 1], B);
  for (int i = H - 1; i >= 1; i--)
    back(a->pi.w[i], a->hidden[i], a->hidden[i - 1], y.da[i], y.h[1][i - 1], y.da[i - 1], B);
  {
    const float *x[AG__AC_MAX_LAYERS];
    int64_t ld[AG__AC_MAX_LAYERS], in[AG__AC_MAX_LAYERS];
    x[0] = y.xp, ld[0] = X, in[0] = S;
    for (int i = 1; i < L; i++) x[i] = y.h[1][i - 1], ld[i] = in[i] = a->hidden[i - 1];
    gradient(a, &a->pi, td3 ? &a->pi_t : NULL, y.da, y.dah, x, ld, in, nA, &a->opt_actor, 0, pv + 4);
  }
  if (!td3 && a->autotune) { /* d/d log alpha of -log alpha (mean log pi + target entropy) */
    const float gl = -1.0f * (ag__tiled_sum(y.lp, B) * inv_b) + -a->target_entropy;
    *a->log_alpha_grad = gl;
    step(&a->opt_alpha, pv + 8, gl, a->log_alpha, a->opt_alpha.m[0], a->opt_alpha.v[0], NULL, 0.0f);
  }
  *a->src.counter = counter + ag__ac_draws(a);
  return AG_OK;
}

size_t ag__cpu_acgrad_scratch(const void *args) {
  ag__acgrad_args a = *(const ag__acgrad_args *)args;
  a.ws = NULL;
  return ag__ac_layout_of(&a).floats * sizeof(float);
}
