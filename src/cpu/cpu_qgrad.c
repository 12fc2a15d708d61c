/* cpu_qgrad.c — AG__K_QGRAD on the CPU (kernels.h): the DQN loss of an MLP
 * and its gradient, as matrix products (CBLAS) over the whole batch.
 *
 * Scratch (a->ws), column-major [features, B] blocks (column j: transition j):
 *   A_0 .. A_L   the online network's layer inputs on s (A_0 = s, A_L = Q(s))
 *   D_0 .. D_L-1 d loss / d (W_i A_i + b_i)
 *   S            s' (with the n-step arrays: the next obs of column last[j])
 *   P, R         two [widest, B] blocks for the hidden layers of the s' passes
 *   Qo, Qt       Q(s') (double DQN) and Q'(s')
 *   part         one partial loss per group of AG__QG_LOSS_GROUP transitions
 *   cols         the batch's table columns (i64)
 */
#include <stdint.h>
#include <string.h>

#include "base/base.h"
#include "base/kernels.h"
#include "base/philox.h"
#include "base/scalar_ops.h"
#include "cpu/cpu_blas.h"
#include "cpu/cpu_internal.h"

/* Y [n, B] = act(W X + b) for W [n, k], X [k, B]. */
static void dense(const float *w, const float *b, const float *x, float *y, int64_t n, int64_t k, int64_t B,
                  int relu) {
  for (int64_t j = 0; j < B; j++) memcpy(y + j * n, b, (size_t)n * sizeof *y);
  ag__sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)B, (int)k, 1.0f, w, (int)n, x, (int)k,
            1.0f, y, (int)n);
  if (relu)
    for (int64_t e = 0; e < n * B; e++) y[e] = y[e] > 0.0f ? y[e] : 0.0f;
}

/* A network's output on X [sizes[0], B] into out, its hidden layers through P and R. */
static void forward(const ag__qgrad_args *a, const float *const *w, const float *const *b, const float *x,
                    float *P, float *R, float *out) {
  const float *in = x;
  for (int i = 0; i < a->L; i++) {
    float *y = i == a->L - 1 ? out : (i % 2 ? R : P);
    dense(w[i], b[i], in, y, a->sizes[i + 1], a->sizes[i], a->src.B, i < a->L - 1);
    in = y;
  }
}

size_t ag__cpu_qgrad_scratch(const void *args) {
  const ag__qgrad_args *a = args;
  int64_t widest = 0, hidden = 0;
  for (int i = 0; i <= a->L; i++) {
    if (i > 0 && i < a->L) hidden += a->sizes[i];
    widest = a->sizes[i] > widest ? a->sizes[i] : widest;
  }
  const int64_t A = a->sizes[a->L], S = a->sizes[0],
                groups = (a->src.B + AG__QG_LOSS_GROUP - 1) / AG__QG_LOSS_GROUP;
  /* A_0 .. A_L, D_0 .. D_L-1, S, P and R, Qo and Qt, the partials, the columns */
  const int64_t floats = a->src.B * (S + hidden + A) + a->src.B * (hidden + A) + a->src.B * S +
                         2 * widest * a->src.B + 2 * A * a->src.B + groups + 2 * a->src.B +
                         2; /* + 2: the columns start 8-byte aligned */
  return (size_t)floats * sizeof(float);
}

ag_status ag__cpu_qgrad(const void *args) {
  const ag__qgrad_args *a = args;
  if ((a->src.ret || a->src.disc || a->src.last) && !(a->src.ret && a->src.disc && a->src.last && a->src.idx))
    return ag__fail(AG_ERR_INVALID_ARG, "cpu: qgrad's n-step targets need ret, disc, last and given columns");
  const int L = a->L;
  const int64_t B = a->src.B, A = a->sizes[L], K0 = a->sizes[0];
  int64_t widest = 0;
  for (int i = 0; i <= L; i++) widest = a->sizes[i] > widest ? a->sizes[i] : widest;
  float *act[AG__QG_MAX_LAYERS + 1], *dl[AG__QG_MAX_LAYERS];
  float *cur = a->ws;
  for (int i = 0; i <= L; i++) {
    act[i] = cur;
    cur += a->sizes[i] * B;
  }
  for (int i = 0; i < L; i++) {
    dl[i] = cur;
    cur += a->sizes[i + 1] * B;
  }
  float *S = cur, *P = S + K0 * B, *R = P + widest * B, *Qo = R + widest * B, *Qt = Qo + A * B,
        *part = Qt + A * B;
  const int64_t tiles = (B + AG__QG_LOSS_GROUP - 1) / AG__QG_LOSS_GROUP;
  int64_t *cols =
      (int64_t *)(((uintptr_t)(part + tiles) + 7) & ~(uintptr_t)7); /* 8-byte aligned; the scratch has room */
  const int64_t bound = a->src.idx ? 0 : *a->src.size_dev;
  for (int64_t j = 0; j < B; j++) {
    const int64_t c =
        a->src.idx ? a->src.idx[j] : ag__philox_below(a->src.seed, *a->src.counter + (uint64_t)j, bound);
    cols[j] = ag__clamp_index(c, a->src.capacity);
  }
  if (!a->src.idx) *a->src.counter += (uint64_t)B;
  for (int64_t j = 0; j < B; j++) {
    const float *col = a->src.table + cols[j] * a->src.rows;
    /* s': the n-step walk's last column, else the transition's own */
    const float *ncol =
        a->src.last ? a->src.table + ag__clamp_index(a->src.last[j], a->src.capacity) * a->src.rows : col;
    for (int64_t k = 0; k < K0; k++) {
      act[0][j * K0 + k] = col[a->src.obs_row + k] * a->src.scale;
      S[j * K0 + k] = ncol[a->src.next_row + k] * a->src.scale;
    }
  }
  for (int i = 0; i < L; i++)
    dense(a->w[i], a->b[i], act[i], act[i + 1], a->sizes[i + 1], a->sizes[i], B, i < L - 1);
  forward(a, a->tw, a->tb, S, P, R, Qt);
  if (a->double_dqn) forward(a, a->w, a->b, S, P, R, Qo);
  /* the TD target, the loss in tiles, d loss / d Q(s) */
  const float inv = 1.0f / (float)B;
  float *dq = dl[L - 1];
  memset(dq, 0, (size_t)(A * B) * sizeof *dq);
  for (int64_t t = 0; t < tiles; t++) {
    float sum = 0.0f;
    for (int64_t j = t * AG__QG_LOSS_GROUP; j < B && j < (t + 1) * AG__QG_LOSS_GROUP; j++) {
      const float *col = a->src.table + cols[j] * a->src.rows;
      const float act_f = col[a->src.act_row] * a->src.scale;
      const float *qt = Qt + j * A;
      float v;
      if (a->double_dqn) {
        const float *qo = Qo + j * A;
        int64_t best = 0;
        for (int64_t k = 1; k < A; k++)
          if (qo[k] > qo[best]) best = k;
        v = qt[best];
      } else {
        v = qt[0];
        for (int64_t k = 1; k < A; k++) v = qt[k] > v ? qt[k] : v;
      }
      float y;
      if (a->src.ret) { /* n-step: disc holds gamma^k and the termination */
        y = a->src.ret[j] + a->src.disc[j] * v;
      } else {
        const float r = col[a->src.rew_row] * a->src.scale, d = col[a->src.done_row] * a->src.scale;
        y = r + a->gamma * (1.0f - d) * v;
      }
      int64_t ai = ag__pick_index(&act_f, AG_F32, 0, 0, A);
      float diff = act[L][j * A + ai] - y;
      sum += ag__loss_f(a->kind, diff, a->delta);
      dq[j * A + ai] = ag__loss_df(a->kind, diff, a->delta) * inv;
    }
    part[t] = sum;
  }
  float total = 0.0f;
  for (int64_t t = 0; t < tiles; t++) total += part[t];
  *a->loss = total * inv;
  /* backward: D_i-1 = (W_i^T D_i) * (A_i > 0); dW_i = D_i A_i^T, db_i = D_i 1 */
  for (int i = L - 1; i >= 0; i--) {
    const int64_t n = a->sizes[i + 1], k = a->sizes[i];
    ag__sgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)n, (int)k, (int)B, 1.0f, dl[i], (int)n, act[i],
              (int)k, 0.0f, a->gw[i], (int)n);
    float *gb = a->gb[i];
    memset(gb, 0, (size_t)n * sizeof *gb);
    for (int64_t j = 0; j < B; j++)
      for (int64_t r = 0; r < n; r++) gb[r] += dl[i][j * n + r];
    if (i == 0) break;
    ag__sgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)k, (int)B, (int)n, 1.0f, a->w[i], (int)n, dl[i],
              (int)n, 0.0f, dl[i - 1], (int)k);
    for (int64_t e = 0; e < k * B; e++)
      if (!(act[i][e] > 0.0f)) dl[i - 1][e] = 0.0f;
  }
  if (a->opt.on) { /* the step, as one AG__K_ADAM launch with prep would make it */
    ag__adam_args step;
    memset(&step, 0, sizeof step);
    step.sgd = a->opt.sgd, step.prep = 1, step.count = 2 * L;
    step.lr = a->opt.lr, step.b1 = a->opt.b1, step.b2 = a->opt.b2, step.eps = a->opt.eps, step.wd = a->opt.wd;
    step.state = a->opt.state;
    for (int i = 0; i < L; i++) {
      const int64_t n = a->sizes[i + 1], k = a->sizes[i];
      ag__mt_entry w = {(float *)a->w[i], a->gw[i], a->opt.m[2 * i], a->opt.v[2 * i], n * k};
      ag__mt_entry b = {(float *)a->b[i], a->gb[i], a->opt.m[2 * i + 1], a->opt.v[2 * i + 1], n};
      step.t[2 * i] = w;
      step.t[2 * i + 1] = b;
    }
    return ag__cpu_kernels[AG__K_ADAM](&step);
  }
  return AG_OK;
}
