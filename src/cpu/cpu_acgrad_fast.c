/* cpu_acgrad_fast.c — AG__K_ACGRAD's fast path on the CPU: the update of
 * cpu_acgrad.c (the reference, kept plain) in the same steps and through
 * the same scratch (base/ac_layout.h), with
 *   - the optimizer's step and the target's Polyak step in one pass over a
 *     layer's values, AVX-512 or AVX2 where the processor has them
 *     (ag__cpu_vector_paths; cpu_fast_x86.c), else a portable loop;
 *   - the bias gradients summed a column of the batch at a time (unit
 *     stride), the actor's gradient through the critics' inputs as one
 *     matrix product, and the other loops over the batch in unit stride;
 *   - the independent networks' passes as tasks of the helper threads
 *     (ag__pool_run): the forward passes, the two critics' way back and
 *     steps, the actor's loss through each critic. Each task writes only
 *     its own values, so the results do not depend on the threads.
 * It differs from the reference in the order of some sums (the bias
 * gradients', the actor's input gradient) and in FMA contractions; the
 * batch's draws, the clamps and the tiled loss sums are the reference's.
 * tests/test_kernels.c compares the two within the kernel's tolerances.
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
#include "cpu/cpu_fast.h"
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
  if (relu) {
    float *restrict v = y;
    for (int64_t e = 0; e < n * B; e++) v[e] = v[e] > 0.0f ? v[e] : 0.0f;
  }
}

/* out [K, B] = (mask > 0) ? W^T d : 0 for W [n, K], d [n, B]. */
static void back(const float *w, int64_t n, int64_t K, const float *d, const float *mask, float *out,
                 int64_t B) {
  ag__sgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)K, (int)B, (int)n, 1.0f, w, (int)n, d, (int)n, 0.0f,
            out, (int)K);
  float *restrict o = out;
  const float *restrict mk = mask;
  for (int64_t e = 0; e < K * B; e++) o[e] = mk[e] > 0.0f ? o[e] : 0.0f;
}

/* The optimizer's step values for this call (and its state moved on). */
static void prep(const ag__ac_opt *o, float *pv) {
  ag__adam_values(o->state, o->b1, o->b2, 0.0f, pv);
  ag__adam_store(o->state, pv);
}

static ag__cpu_adam_c adam_c(const ag__ac_opt *o, const float *pv, float tau) {
  ag__cpu_adam_c c = {o->sgd, o->lr, o->b1, o->b2, o->eps, o->wd, pv[1], pv[2], pv[3], tau};
  return c;
}

/* n values' steps (m, v unused with sgd; t NULL: no target). */
static void adam_span(const ag__cpu_adam_c *c, int64_t n, const float *g, float *p, float *m, float *v,
                      float *t) {
  int64_t q = 0;
#ifdef AG__CPU_X86
  if (ag__cpu_vector_paths && __builtin_cpu_supports("avx512f"))
    q = ag__cpu_adam_avx512(c, n, g, p, m, v, t);
  else if (ag__cpu_vector_paths && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    q = ag__cpu_adam_avx2(c, n, g, p, m, v, t);
#endif
  for (; q < n; q++) {
    float pp = p[q], mm = c->sgd ? 0.0f : m[q], vv = c->sgd ? 0.0f : v[q];
    ag__adam_elem(c->sgd, c->lr, c->b1, c->b2, c->eps, c->wd, c->bc1, c->bc2, c->coef, g[q], &pp, &mm, &vv);
    p[q] = pp;
    if (!c->sgd) m[q] = mm, v[q] = vv;
    if (t) t[q] = c->tau * pp + (1.0f - c->tau) * t[q];
  }
}

/* A network's gradients from its deltas (d[i] [sizes[i+1], B], the
 * output's dout) and layer inputs (x[i], ld[i]), then the steps of entries
 * e0 + 2i, e0 + 2i + 1 and the target's Polyak steps (t NULL: none). */
static void gradient(const ag__acgrad_args *a, const ag__ac_net *net, const ag__ac_net *t, float *const *d,
                     const float *dout, const float *const *x, const int64_t *ld, const int64_t *in,
                     int64_t nout, const ag__ac_opt *o, int e0, const float *pv) {
  const int L = a->L;
  const int64_t B = a->src.B;
  const ag__cpu_adam_c c = adam_c(o, pv, a->tau);
  for (int i = 0; i < L; i++) {
    const int64_t n = i < L - 1 ? a->hidden[i] : nout, K = in[i];
    const float *di = i < L - 1 ? d[i] : dout;
    ag__sgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)n, (int)K, (int)B, 1.0f, di, (int)n, x[i],
              (int)ld[i], 0.0f, net->gw[i], (int)n);
    float *restrict gb = net->gb[i];
    memcpy(gb, di, (size_t)n * sizeof *gb);
    for (int64_t b = 1; b < B; b++) {
      const float *restrict col = di + b * n;
      for (int64_t j = 0; j < n; j++) gb[j] += col[j];
    }
    const int e = e0 + 2 * i;
    adam_span(&c, n * K, net->gw[i], net->w[i], o->sgd ? NULL : o->m[e], o->sgd ? NULL : o->v[e],
              t ? t->w[i] : NULL);
    adam_span(&c, n, net->gb[i], net->b[i], o->sgd ? NULL : o->m[e + 1], o->sgd ? NULL : o->v[e + 1],
              t ? t->b[i] : NULL);
  }
}

/* A network's hidden layers on x [in, B] (ld ldx) into h[0 .. L-2], and its
 * output layer (nout rows) into out. */
static void forward(const ag__acgrad_args *a, const ag__ac_net *net, const float *x, int64_t ldx, int64_t in,
                    float *const *h, int64_t nout, float *out) {
  const int H = a->L - 1;
  for (int i = 0; i < H; i++) {
    const int64_t K = i ? a->hidden[i - 1] : in;
    dense(net->w[i], net->b[i], i ? h[i - 1] : x, i ? K : ldx, h[i], a->hidden[i], K, a->src.B, 1);
  }
  dense(net->w[H], net->b[H], h[H - 1], a->hidden[H - 1], out, nout, a->hidden[H - 1], a->src.B, 0);
}

static float log_std(float th) {
  return ag__map_f(AG__MAP_AFFINE, th, 0.5f * (LOG_STD_MAX - LOG_STD_MIN),
                   LOG_STD_MIN + 0.5f * (LOG_STD_MAX - LOG_STD_MIN));
}

/* The actor's actions from its outputs o [nA, B] into rows S.. of x, with
 * normals from draw `base` on (SAC: log pi into lp; with eps, for the way
 * back, the normals times the standard deviations into eps [A, B] and the
 * tanh of the raw log standard deviations over them in o's rows A..; TD3
 * with noise: the smoothing noise): the reference's values. */
static void actions(const ag__acgrad_args *a, float *o, uint64_t base, int noise, float *x, float *lp,
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
        const float tl = ag__map_f(AG__MAP_TANH, o[A + r + b * nA], 0.0f, 0.0f), ls = log_std(tl);
        const float sd = ag__map_f(AG__MAP_EXP, ls, 0.0f, 0.0f);
        const float e = ag__normal_of(ag__philox_u64(a->src.seed, base + (uint64_t)(r + b * A)));
        const float se = sd * e;
        y = ag__map_f(AG__MAP_TANH, mu + se, 0.0f, 0.0f);
        const float e2 = e * e, y2 = y * y;
        const float t1 = ag__map_f(AG__MAP_AFFINE, e2, -0.5f, -0.5f * LOG_2PI);
        const float om = ag__map_f(AG__MAP_AFFINE, y2, -1.0f, 1.0f + 1e-6f);
        lsum += (t1 - ls) - ag__map_f(AG__MAP_LOG, om, 0.0f, 0.0f);
        if (eps) eps[r + b * A] = se, o[A + r + b * nA] = tl;
      }
      x[S + r + b * X] = y;
    }
    if (!a->td3) lp[b] = lsum;
  }
}

/* ---- the call's parts, as tasks of the helper threads ---- */

typedef struct job {
  const ag__acgrad_args *a;
  ag__ac_layout y;
  int phase;
  uint64_t normals;
  const float *pv;
  unsigned fp; /* the caller's floating-point mode (cpu_backend.c flushes subnormals on it) */
} job;

enum { PH_FIRST, PH_TARGETS, PH_CRITICS, PH_ON_NEW, PH_THROUGH };

/* Critic k's deltas of the loss (dout [1, B]) through its hidden layers
 * (activations h, deltas into d). */
static void critic_back(const ag__acgrad_args *a, int k, const float *dout, float *const *h,
                        float *const *d) {
  const int H = a->L - 1;
  const int64_t K = a->hidden[H - 1], B = a->src.B;
  const float *restrict w = a->q[k].w[H];
  for (int64_t b = 0; b < B; b++) {
    const float g = dout[b];
    const float *restrict hb = h[H - 1] + b * K;
    float *restrict db = d[H - 1] + b * K;
    for (int64_t j = 0; j < K; j++) db[j] = hb[j] > 0.0f ? w[j] * g : 0.0f;
  }
  for (int i = H - 1; i >= 1; i--)
    back(a->q[k].w[i], a->hidden[i], a->hidden[i - 1], d[i], h[i - 1], d[i - 1], B);
}

static void part(const job *jb, int i);

/* A part on a helper thread runs in the caller's floating-point mode: its
 * values do not depend on the thread that takes it. */
static void task(void *arg, int i) {
  const job *jb = arg;
  const unsigned mine = ag__cpu_fp_mode();
  if (mine != jb->fp) ag__cpu_fp_set(jb->fp);
  part(jb, i);
  if (mine != jb->fp) ag__cpu_fp_set(mine);
}

static void part(const job *jb, int i) {
  const ag__acgrad_args *a = jb->a;
  const ag__ac_layout *y = &jb->y;
  const int H = a->L - 1, td3 = a->td3;
  const int64_t B = a->src.B, S = a->S, A = a->A, X = S + A, nA = td3 ? A : 2 * A;
  switch (jb->phase) {
    case PH_FIRST: /* the actor on s' and its a', the actor on s and its a~ (with the actor), the critics
                      on (s, a) */
      if (!a->actor && i >= 1) i++;
      if (i == 0) {
        forward(a, td3 ? &a->pi_t : &a->pi, y->xn, X, S, y->h[0], nA, y->dah);
        actions(a, y->dah, jb->normals, 1, y->xn, y->lpn, NULL);
      } else if (i == 1) {
        forward(a, &a->pi, y->x0, X, S, y->h[1], nA, y->hout);
        actions(a, y->hout, jb->normals + (uint64_t)(A * B), 0, y->xp, y->lp, y->eps);
      } else {
        const int k = i - 2;
        forward(a, &a->q[k], y->x0, X, X, y->h[2 + k], 1, y->dch[k]);
      }
      return;
    case PH_TARGETS: /* Q'_k(s', a'), into dq[k][0] for now */
      forward(a, &a->qt[i], y->xn, X, X, y->h[4 + i], 1, y->dq[i][0]);
      return;
    case PH_CRITICS: { /* critic i's way back, gradient and step */
      critic_back(a, i, y->dch[i], y->h[2 + i], y->dc[i]);
      const float *x[AG__AC_MAX_LAYERS];
      int64_t ld[AG__AC_MAX_LAYERS], in[AG__AC_MAX_LAYERS];
      x[0] = y->x0, ld[0] = X, in[0] = X;
      for (int l = 1; l <= H; l++) x[l] = y->h[2 + i][l - 1], ld[l] = in[l] = a->hidden[l - 1];
      gradient(a, &a->q[i], a->targets ? &a->qt[i] : NULL, y->dc[i], y->dch[i], x, ld, in, 1, &a->opt_critic,
               i * 2 * a->L, jb->pv);
      return;
    }
    case PH_ON_NEW: /* Q_k(s, a~) on the updated critic, into dch[k] for now */
      forward(a, &a->q[i], y->xp, X, X, y->h[6 + i], 1, y->dch[i]);
      return;
    case PH_THROUGH: /* the actor's loss back through critic i's hidden layers */
      critic_back(a, i, y->dch[i], y->h[6 + i], y->dq[i]);
      return;
  }
}

static void run_phase(job *jb, int phase, int tasks) {
  jb->phase = phase;
  if (tasks > 1 && ag__pool_threads() > 1)
    ag__pool_run(tasks, task, jb);
  else
    for (int i = 0; i < tasks; i++) part(jb, i);
}

static ag_status fast_acgrad(const void *args) {
  const ag__acgrad_args *a = args;
  const int L = a->L, H = L - 1, td3 = a->td3;
  const int64_t B = a->src.B, S = a->S, A = a->A, X = S + A, nA = td3 ? A : 2 * A, K = a->hidden[H - 1];
  if (L < 2 || L > AG__AC_MAX_LAYERS || A < 1 || A > 64 || B < 1)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "cpu: %d layers and %lld actions are outside the fused SAC/TD3 update", L, (long long)A);
  job jb = {a, ag__ac_layout_of(a), 0, 0, NULL, ag__cpu_fp_mode()};
  const ag__ac_layout y = jb.y;
  const uint64_t counter = *a->src.counter;
  jb.normals = counter + (a->src.idx ? 0 : (uint64_t)B);
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
    const float *col = a->src.table + c * a->src.rows + a->src.obs_row,
                *ncol = a->src.table + cn * a->src.rows + a->src.next_row;
    float *x0 = y.x0 + b * X, *xp = y.xp + b * X, *xn = y.xn + b * X;
    const float sc = a->src.scale;
    for (int64_t r = 0; r < X; r++) x0[r] = col[r] * sc;
    for (int64_t r = 0; r < S; r++) xp[r] = x0[r], xn[r] = ncol[r] * sc;
    const float *row = a->src.table + c * a->src.rows;
    y.rd[2 * b] = a->src.ret ? a->src.ret[b] : row[a->src.rew_row] * sc;
    y.rd[2 * b + 1] = a->src.disc ? a->src.disc[b] : row[a->src.done_row] * sc;
  }
  float *pv = y.pv;
  jb.pv = pv;
  prep(&a->opt_critic, pv);
  if (a->actor) prep(&a->opt_actor, pv + 4);
  if (a->actor && !td3 && a->autotune) prep(&a->opt_alpha, pv + 8);
  const float alpha = td3 ? 0.0f : ag__map_f(AG__MAP_EXP, *a->log_alpha, 0.0f, 0.0f), inv_b = 1.0f / (float)B;
  /* the forward passes on the table's values and their output layers: the
   * actor's on s' (a'), the actor's on s (a~, with the actor), the critics' */
  run_phase(&jb, PH_FIRST, a->actor ? 4 : 3);
  run_phase(&jb, PH_TARGETS, 2);
  for (int64_t b = 0; b < B; b++) y.p[2 * b] = y.dch[0][b], y.p[1 + 2 * b] = y.dch[1][b];
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
  run_phase(&jb, PH_CRITICS, 2);
  if (!a->actor) {
    *a->src.counter = counter + ag__ac_draws(a);
    return AG_OK;
  }
  /* the actor's loss on the updated critics, and its way back */
  const int nq = td3 ? 1 : 2;
  run_phase(&jb, PH_ON_NEW, nq);
  ag__tiled al = {0.0f, 0.0f};
  for (int64_t b = 0; b < B; b++) {
    if (td3) {
      ag__tiled_add(&al, b, B, y.dch[0][b]);
      y.dch[0][b] = -inv_b;
    } else {
      const float q0 = y.dch[0][b], q1 = y.dch[1][b];
      const int first = ag__min_takes_a(q0, q1);
      ag__tiled_add(&al, b, B, alpha * y.lp[b] - (first ? q0 : q1));
      y.dch[0][b] = first ? -inv_b : 0.0f, y.dch[1][b] = first ? 0.0f : -inv_b;
    }
  }
  *a->aloss = al.total * (td3 ? -inv_b : inv_b);
  run_phase(&jb, PH_THROUGH, nq);
  /* d loss / d a~ [A, B] into rows 0 .. A-1 of dah: the critics' first
   * layers' action columns, transposed, times their deltas */
  const int64_t n0 = a->hidden[0];
  for (int k = 0; k < nq; k++)
    ag__sgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)A, (int)B, (int)n0, 1.0f, a->q[k].w[0] + S * n0,
              (int)n0, y.dq[k][0], (int)n0, k ? 1.0f : 0.0f, y.dah, (int)nA);
  const float ab = alpha * inv_b;
  for (int64_t b = 0; b < B; b++)
    for (int64_t r = 0; r < A; r++) {
      const float ga = y.dah[r + b * nA];
      const float yy = y.xp[S + r + b * X];
      if (td3) {
        y.dah[r + b * nA] = ag__map2_f(AG__MAP2_TANH_BWD, ga, yy, 0.0f, 0.0f);
        continue;
      }
      const float se = y.eps[r + b * A], th = y.hout[A + r + b * nA];
      const float om = ag__map_f(AG__MAP_AFFINE, yy * yy, -1.0f, 1.0f + 1e-6f);
      const float gy = ga + 2.0f * yy * (ab / om);
      const float gu = ag__map2_f(AG__MAP2_TANH_BWD, gy, yy, 0.0f, 0.0f);
      const float gls = gu * se - ab;
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
    const int sgd = a->opt_alpha.sgd;
    float la = *a->log_alpha, m = sgd ? 0.0f : a->opt_alpha.m[0][0], v = sgd ? 0.0f : a->opt_alpha.v[0][0];
    const float *p8 = pv + 8;
    ag__adam_elem(a->opt_alpha.sgd, a->opt_alpha.lr, a->opt_alpha.b1, a->opt_alpha.b2, a->opt_alpha.eps,
                  a->opt_alpha.wd, p8[1], p8[2], p8[3], gl, &la, &m, &v);
    *a->log_alpha = la;
    if (!sgd) a->opt_alpha.m[0][0] = m, a->opt_alpha.v[0][0] = v;
  }
  *a->src.counter = counter + ag__ac_draws(a);
  return AG_OK;
}

ag_status ag__cpu_run_acgrad(const void *args) {
  return ag__cpu_reference_forced() ? ag__cpu_ref_kernels[AG__K_ACGRAD](args) : fast_acgrad(args);
}

ag_status ag__cpu_fast_acgrad(const void *args) { return fast_acgrad(args); }
