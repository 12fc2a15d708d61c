/* test_dqn_frames.c — the DQN whose replay is a frame table (cfg.frame_stack).
 *
 * The reference is built on the host from the raw episodes: each entry's
 * frame, first flag and fields kept in a mirror of the ring, and the
 * stacks of a transition rebuilt by frames.h's rule (slots oldest to
 * newest, an episode's first frame repeated into the older slots, [k*c, h,
 * w] channels first), with episodes that start, end by termination and by
 * truncation, two copies interleaved and a ring that wraps. Against it:
 * the loss and gradients of the frame DQN equal those of a DQN of full
 * observations fed the host's stacks; one recorded update (its draws
 * replayed) gives the loss and the parameters of that DQN's update on the
 * same batch; the n-step loss equals a host walk; prioritized replay
 * writes back (|TD| + eps)^alpha of the host's TD errors; bad input and
 * configurations are refused and change nothing; a saved and loaded DQN
 * goes on as the saved one, bit for bit.
 */
#include <math.h>
#include <unistd.h>

#include "agt.h"
#include "agent/agent_internal.h"
#include "graph/graph_internal.h"
#include "replay/replay_internal.h"

enum { FH = 5, FW = 4, FC = 2, K = 3, NE = 2, CAP = 40, ACTS = 3, HID = 16, B = 16 };
enum { HWC = FH * FW * FC, D = K * HWC, STEPS = 33 };

/* ---- the episodes, and the host's mirror of the ring ---- */

typedef struct entry {
  uint8_t frame[HWC];
  uint8_t first;
  int32_t act;
  float rew;
  int term, trn;
} entry;

/* Each copy plays episodes of 2..6 transitions ending by termination or
 * truncation; an episode's last observation is an entry of its own (its
 * fields 0), the next entry its next episode's first. */
typedef struct copy_gen {
  int t, len, ended;
} copy_gen;

typedef struct mirror {
  entry e[CAP];
  int64_t pos, size;
  agt_rng g;
  copy_gen c[NE];
} mirror;

static entry next_entry(mirror *m, int copy) {
  copy_gen *c = &m->c[copy];
  entry x;
  memset(&x, 0, sizeof x);
  for (int i = 0; i < HWC; i++) x.frame[i] = (uint8_t)agt_below(&m->g, 256);
  if (c->ended) { /* the last observation: fields 0 */
    c->ended = 0, c->t = 0, c->len = 0;
    return x;
  }
  if (c->t == 0) {
    x.first = 1;
    c->len = 2 + (int)agt_below(&m->g, 5);
  }
  x.act = (int32_t)agt_below(&m->g, ACTS);
  x.rew = agt_uniform(&m->g, -1, 1);
  if (++c->t == c->len) {
    if (agt_below(&m->g, 2))
      x.term = 1;
    else
      x.trn = 1;
    c->ended = 1;
  }
  return x;
}

/* `steps` steps of both copies into d and into the mirror. */
static void store_steps(ag_dqn *d, mirror *m, int steps) {
  const int n = steps * NE;
  uint8_t *fr = malloc((size_t)n * HWC), *first = malloc((size_t)n);
  int32_t *act = malloc((size_t)n * sizeof *act);
  float *rew = malloc((size_t)n * sizeof *rew);
  int *term = malloc((size_t)n * sizeof *term), *trn = malloc((size_t)n * sizeof *trn);
  assert_true(fr && first && act && rew && term && trn);
  for (int j = 0; j < n; j++) {
    entry x = next_entry(m, j % NE);
    memcpy(fr + (size_t)j * HWC, x.frame, HWC);
    first[j] = x.first, act[j] = x.act, rew[j] = x.rew, term[j] = x.term, trn[j] = x.trn;
    m->e[m->pos] = x;
    m->pos = (m->pos + 1) % CAP;
    if (m->size < CAP) m->size++;
  }
  agt_ok(ag_dqn_store_frames(d, fr, first, act, rew, term, trn, steps));
  free(fr), free(first), free(act), free(rew), free(term), free(trn);
}

/* The stack ending at entry x as f32 (v / 255), [K*FC, FH, FW]; returns
 * whether it reaches back across slot 0 (the ring's wrap). */
static int stack_host(const mirror *m, int64_t x, float *out) {
  int64_t cur = x;
  int wrapped = 0;
  for (int slot = K - 1; slot >= 0; slot--) {
    const entry *e = &m->e[cur];
    for (int ch = 0; ch < FC; ch++)
      for (int y = 0; y < FH; y++)
        for (int xx = 0; xx < FW; xx++)
          out[((slot * FC + ch) * FH + y) * FW + xx] = (float)e->frame[(y * FW + xx) * FC + ch] / 255.0f;
    if (!e->first && slot > 0) {
      if (cur - NE < 0) wrapped = 1;
      cur = (cur - NE + CAP) % CAP;
    }
  }
  return wrapped;
}

/* Rank of entry x in the full ring: 0 the oldest. */
static int64_t rank_of(const mirror *m, int64_t x) { return (x - m->pos + CAP) % CAP; }

/* The host's n-step walk from x (frames.h: stride NE, on only while the
 * entry after the next is written); the return, the discount and the
 * entry whose next stack the target bootstraps from. */
static float walk_host(const mirror *m, int64_t x, int n, float gamma, float *disc, int64_t *last) {
  float R = 0.0f, g = 1.0f;
  int64_t c = x;
  for (int k = 0;; k++) {
    const entry *e = &m->e[c];
    R = R + g * e->rew;
    g = g * gamma;
    if (e->term) {
      *disc = 0.0f;
      break;
    }
    if (e->trn || k == n - 1 || rank_of(m, c) + 2 * NE >= m->size) {
      *disc = g;
      break;
    }
    c = (c + NE) % CAP;
  }
  *last = c;
  return R;
}

/* ---- the DQNs ---- */

static ag_dqn_config frame_config(int conv, int n_step, int per) {
  ag_dqn_config c = agt_dqn_config(HID, B, CAP, 11, 0);
  c.frame_stack = K;
  c.obs_shape[0] = K * FC, c.obs_shape[1] = FH, c.obs_shape[2] = FW;
  if (conv) {
    c.n_conv = 1;
    c.conv[0] = (ag_conv_layer){4, 2, 1, 0};
  }
  c.n_envs = NE;
  c.n_step = n_step;
  c.per = per;
  if (per) c.per_eps = 1e-3f; /* without per, a file holds the defaults */
  c.max_grad_norm = 0.0f;
  c.lr = 1e-2f;
  return c;
}

/* A frame DQN filled with STEPS steps of both copies (the ring wraps). */
static ag_dqn *filled(ag_ctx *ctx, const ag_dqn_config *c, mirror *m) {
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, D, ACTS, 10000, c, &d));
  memset(m, 0, sizeof *m);
  m->g.s = 77;
  const int parts[] = {1, 5, 10, 2, 15};
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) store_steps(d, m, parts[i]);
  assert_int_equal(ag_frames_position(ag_dqn_frames(d)), m->pos);
  assert_int_equal(ag_frames_size(ag_dqn_frames(d)), CAP);
  return d;
}

/* The sampleable entries; each kind of stack the test must see is among them. */
static int sampleable(ag_dqn *d, const mirror *m, int64_t *idx) {
  int n = 0, starts = 0, wraps = 0;
  float s[D];
  for (int64_t x = 0; x < CAP; x++)
    if (ag_frames_sampleable(ag_dqn_frames(d), x)) {
      idx[n++] = x;
      starts += m->e[x].first;
      wraps += stack_host(m, x, s);
    }
  assert_true(n >= B);
  assert_true(starts > 0);
  assert_true(wraps > 0);
  return n;
}

/* Q-values [ACTS, n] of net on n host observations. */
static void q_values(ag_ctx *ctx, ag_mlp *net, const float *x, int n, float *q) {
  ag_tensor *in, *out;
  agt_ok(ag_tensor_create(ctx, D, n, AG_F32, x, &in));
  ag_no_grad_begin(ctx);
  agt_ok(ag_mlp_forward(net, in, &out));
  ag_no_grad_end(ctx);
  agt_ok(ag_tensor_read(out, q, (size_t)n * ACTS * sizeof *q));
  ag_tensor_free(in);
  ag_ctx_reset(ctx);
}

/* Each of the n transitions idx: the host's TD error Q(s, a) - y (Double
 * DQN; n-step with n_step > 1), from the DQN's networks as they are. */
static void td_host(ag_ctx *ctx, ag_dqn *d, const mirror *m, const int64_t *idx, int n, int n_step,
                    float gamma, double *td) {
  float *obs = malloc((size_t)n * D * sizeof *obs), *nx = malloc((size_t)n * D * sizeof *nx);
  float *q = malloc((size_t)n * ACTS * sizeof *q), *qn = malloc((size_t)n * ACTS * sizeof *qn),
        *qt = malloc((size_t)n * ACTS * sizeof *qt), *R = malloc((size_t)n * sizeof *R),
        *disc = malloc((size_t)n * sizeof *disc);
  assert_true(obs && nx && q && qn && qt && R && disc);
  for (int j = 0; j < n; j++) {
    int64_t last;
    stack_host(m, idx[j], obs + (size_t)j * D);
    R[j] = walk_host(m, idx[j], n_step, gamma, &disc[j], &last);
    stack_host(m, (last + NE) % CAP, nx + (size_t)j * D);
  }
  q_values(ctx, ag_dqn_q(d), obs, n, q);
  q_values(ctx, ag_dqn_q(d), nx, n, qn);
  q_values(ctx, ag_dqn_target(d), nx, n, qt);
  for (int j = 0; j < n; j++) {
    int a = 0;
    for (int i = 1; i < ACTS; i++)
      if (qn[j * ACTS + i] > qn[j * ACTS + a]) a = i;
    const double y = (double)R[j] + (double)disc[j] * qt[j * ACTS + a];
    td[j] = (double)q[j * ACTS + m->e[idx[j]].act] - y;
  }
  free(obs), free(nx), free(q), free(qn), free(qt), free(R), free(disc);
}

static double huber(double x) { return fabs(x) <= 1.0 ? 0.5 * x * x : fabs(x) - 0.5; }

/* A DQN of full observations (the regular table) with d's networks,
 * holding the host's transitions idx[0..n) at columns 0..n-1. */
static ag_dqn *regular_twin(ag_ctx *ctx, ag_dqn *d, const mirror *m, const int64_t *idx, int n) {
  ag_dqn_config c = *ag_dqn_get_config(d);
  c.frame_stack = 0;
  c.buffer_size = n;
  c.n_envs = 1;
  ag_dqn *r;
  agt_ok(ag_dqn_create(ctx, D, ACTS, 10000, &c, &r));
  agt_ok(ag_mlp_copy(ag_dqn_q(r), ag_dqn_q(d)));
  agt_ok(ag_mlp_copy(ag_dqn_target(r), ag_dqn_target(d)));
  float *obs = malloc((size_t)n * D * sizeof *obs), *nx = malloc((size_t)n * D * sizeof *nx);
  float *rew = malloc((size_t)n * sizeof *rew);
  int32_t *act = malloc((size_t)n * sizeof *act);
  int *term = malloc((size_t)n * sizeof *term), *trn = malloc((size_t)n * sizeof *trn);
  assert_true(obs && nx && rew && act && term && trn);
  for (int j = 0; j < n; j++) {
    const entry *e = &m->e[idx[j]];
    stack_host(m, idx[j], obs + (size_t)j * D);
    stack_host(m, (idx[j] + NE) % CAP, nx + (size_t)j * D);
    act[j] = e->act, rew[j] = e->rew, term[j] = e->term, trn[j] = e->trn;
  }
  agt_ok(ag_dqn_store_ex(r, obs, act, rew, nx, term, trn, n));
  free(obs), free(nx), free(rew), free(act), free(term), free(trn);
  return r;
}

static void close_f32(const float *a, const float *b, size_t n, double tol, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs((double)a[i] - (double)b[i]) <= tol * (1.0 + fabs((double)b[i]))))
      fail_msg("%s[%zu]: %.9g against %.9g", what, i, (double)a[i], (double)b[i]);
}

/* Every parameter (with_grad: its gradient) of a and b agree within tol. */
static void same_params(const ag_mlp *a, const ag_mlp *b, int with_grad, double tol) {
  assert_int_equal(ag_mlp_n_params(a), ag_mlp_n_params(b));
  for (int i = 0; i < ag_mlp_n_params(a); i++) {
    const ag_tensor *ta = ag_mlp_params(a)[i], *tb = ag_mlp_params(b)[i];
    if (with_grad) ta = ag_tensor_grad(ta), tb = ag_tensor_grad(tb);
    assert_non_null(ta);
    assert_non_null(tb);
    float *x = agt_read_f32(ta), *y = agt_read_f32(tb);
    close_f32(x, y, (size_t)ag_tensor_numel(ta), tol, with_grad ? "gradient" : "parameter");
    free(x), free(y);
  }
}

/* ---- the tests ---- */

/* (a) The loss and its gradients on every sampleable transition equal
 * those of the regular DQN on the host's stacks (episode starts and the
 * ring's wrap among them), convolutions over [k*c, h, w]. */
static void loss_and_gradients_equal_the_regular_dqn_on_host_stacks(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = frame_config(1, 1, 0);
  mirror m;
  ag_dqn *d = filled(ctx, &c, &m);
  int64_t idx[CAP];
  const int n = sampleable(d, &m, idx);
  ag_dqn *r = regular_twin(ctx, d, &m, idx, n);
  int64_t cols[CAP];
  for (int j = 0; j < n; j++) cols[j] = j;
  ag_tensor *lf, *lr, *batch;
  float vf, vr;
  agt_ok(ag_optim_zero_grad(d->opt));
  agt_ok(ag_dqn_loss_frames(d, idx, n, &lf));
  agt_ok(ag_backward(lf));
  agt_ok(ag_tensor_read(lf, &vf, sizeof vf));
  agt_ok(ag_optim_zero_grad(r->opt));
  agt_ok(ag_replay_gather(ag_dqn_replay(r), cols, n, &batch));
  agt_ok(ag_dqn_loss(r, batch, &lr));
  agt_ok(ag_backward(lr));
  agt_ok(ag_tensor_read(lr, &vr, sizeof vr));
  assert_true(isfinite(vf) && vf > 0);
  close_f32(&vf, &vr, 1, 1e-6, "loss");
  same_params(ag_dqn_q(d), ag_dqn_q(r), 1, 1e-5);
  /* and the host's Huber mean of the TD errors */
  double td[CAP], want = 0;
  ag_ctx_reset(ctx);
  td_host(ctx, d, &m, idx, n, 1, c.gamma, td);
  for (int j = 0; j < n; j++) want += huber(td[j]) / n;
  assert_true(fabs(vf - want) <= 1e-5 * (1 + want));
  ag_dqn_free(r);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* The entries the next update of d draws: its stream's draw made once
 * eagerly, the counter then put back. */
static void next_draws(ag_dqn *d, int64_t *idx) {
  ag_tensor *ctr = ag__rng_counter_tensor(d->rng), *o, *no, *ix;
  int64_t keep;
  agt_ok(ag_tensor_read(ctr, &keep, sizeof keep));
  agt_ok(ag_frames_sample(ag_dqn_frames(d), d->rng, B, AG_U8, &o, &no, NULL, &ix));
  agt_ok(ag_tensor_read(ix, idx, B * sizeof *idx));
  agt_ok(ag_tensor_write(ctr, &keep, sizeof keep));
  ag_ctx_reset(d->ctx);
}

/* (b) One recorded update draws a batch whose loss, and the parameters
 * after Adam's step, are the regular DQN's update on the same stacks. */
static void one_update_equals_the_regular_update_on_the_same_batch(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = frame_config(1, 1, 0);
  mirror m;
  ag_dqn *d = filled(ctx, &c, &m);
  int64_t drawn[B], cols[B];
  next_draws(d, drawn);
  for (int j = 0; j < B; j++) {
    assert_true(ag_frames_sampleable(ag_dqn_frames(d), drawn[j]));
    cols[j] = j;
  }
  ag_dqn *r = regular_twin(ctx, d, &m, drawn, B);
  float lf, lr;
  agt_ok(ag_dqn_train(d, 1, &lf));
  ag_tensor *batch, *l;
  agt_ok(ag_optim_zero_grad(r->opt));
  agt_ok(ag_replay_gather(ag_dqn_replay(r), cols, B, &batch));
  agt_ok(ag_dqn_loss(r, batch, &l));
  agt_ok(ag_backward(l));
  agt_ok(ag_optim_step(r->opt));
  agt_ok(ag_tensor_read(l, &lr, sizeof lr));
  close_f32(&lf, &lr, 1, 1e-6, "loss");
  same_params(ag_dqn_q(d), ag_dqn_q(r), 0, 1e-5);
  assert_int_equal(ag_dqn_updates(d), 1);
  ag_dqn_free(r);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* n-step returns over the frame table: the update's loss is the Huber
 * mean of the host's n-step TD errors of the drawn entries (walks that
 * stop at terminations, truncations, after n steps and before the head). */
static void nstep_update_loss_equals_a_host_walk(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = frame_config(0, 3, 0);
  mirror m;
  ag_dqn *d = filled(ctx, &c, &m);
  int64_t drawn[B];
  next_draws(d, drawn);
  double td[B], want = 0;
  td_host(ctx, d, &m, drawn, B, 3, c.gamma, td);
  for (int j = 0; j < B; j++) want += huber(td[j]) / B;
  float loss;
  agt_ok(ag_dqn_train(d, 1, &loss));
  if (!(fabs(loss - want) <= 1e-5 * (1 + want))) fail_msg("loss %.9g, host %.9g", (double)loss, want);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* (e) Prioritized replay on frames: after one update each drawn entry's
 * leaf is (|TD| + eps)^alpha of the host's TD error (networks before the
 * update), the others keep 1 (sampleable, never drawn) or 0. */
static void per_priorities_written_back_equal_the_host_td(void **state) {
  (void)state;
  for (int n_step = 1; n_step <= 3; n_step += 2) {
    ag_ctx *ctx = agt_ctx();
    ag_dqn_config c = frame_config(0, n_step, 1);
    mirror m;
    ag_dqn *d = filled(ctx, &c, &m);
    assert_non_null(ag_dqn_per(d));
    int64_t all[CAP];
    for (int64_t x = 0; x < CAP; x++) all[x] = x;
    double td[CAP];
    td_host(ctx, d, &m, all, CAP, n_step, c.gamma, td);
    agt_ok(ag_dqn_set_beta(d, 0.5f));
    float loss;
    agt_ok(ag_dqn_train(d, 1, &loss));
    assert_true(isfinite(loss) && loss > 0);
    ag_per *per = ag_dqn_per(d);
    const double *leaves;
    double *tree = agt_per_tree(per, &leaves);
    int drawn = 0;
    for (int x = 0; x < CAP; x++) {
      if (!ag_frames_sampleable(ag_dqn_frames(d), x)) {
        assert_true(leaves[x] == 0.0);
        continue;
      }
      if (leaves[x] == 1.0) continue;
      drawn++;
      const double want = pow(fabs(td[x]) + (double)c.per_eps, (double)c.per_alpha);
      if (!(fabs(leaves[x] - want) <= 2e-5 * want + 1e-7))
        fail_msg("n_step %d, entry %d: priority %.9g on the device, %.9g on the host", n_step, x, leaves[x],
                 want);
    }
    assert_true(drawn >= 4 && drawn <= B);
    free(tree);
    ag_dqn_free(d);
    ag_ctx_free(ctx);
  }
}

/* ag_dqn_act_u8 acts as ag_dqn_act on v / 255. */
static void act_u8_equals_act_on_scaled_values(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = frame_config(1, 1, 0);
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, D, ACTS, 10000, &c, &d));
  agt_rng g = {5};
  enum { NO = 9 };
  uint8_t u[NO * D];
  float f[NO * D];
  for (int i = 0; i < NO * D; i++) u[i] = (uint8_t)agt_below(&g, 256), f[i] = (float)u[i] / 255.0f;
  int32_t a[NO], b[NO];
  float q[NO * ACTS];
  agt_ok(ag_dqn_act_u8(d, u, NO, 0, 0, a));
  agt_ok(ag_dqn_act(d, f, NO, 0, 0, b));
  q_values(ctx, ag_dqn_q(d), f, NO, q);
  for (int j = 0; j < NO; j++) {
    assert_int_equal(a[j], b[j]);
    for (int i = 0; i < ACTS; i++) assert_true(q[j * ACTS + i] <= q[j * ACTS + a[j]]);
  }
  agt_err(ag_dqn_act_u8(d, NULL, 1, 0, 0, a), AG_ERR_INVALID_ARG, "obs");
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* (c) Bad input to the new calls and configuration: each refused with a
 * message naming it, nothing changed. */
static void bad_input_is_refused_and_changes_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = frame_config(0, 1, 0);
  mirror m;
  ag_dqn *d = filled(ctx, &c, &m);
  ag_frames *t = ag_dqn_frames(d);
  const int64_t pos = ag_frames_position(t), count = ag_frames_count(t);
  uint8_t fr[2 * NE * HWC] = {0}, first[2 * NE] = {0};
  int32_t act[2 * NE] = {0};
  float rew[2 * NE] = {0}, obs[D] = {0};
  int term[2 * NE] = {0}, trn[2 * NE] = {0};
  agt_err(ag_dqn_store_frames(NULL, fr, first, act, rew, term, trn, 1), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_dqn_store_frames(d, fr, first, act, rew, term, trn, -1), AG_ERR_INVALID_ARG, "steps");
  agt_err(ag_dqn_store_frames(d, NULL, first, act, rew, term, trn, 1), AG_ERR_INVALID_ARG, "frames");
  agt_err(ag_dqn_store_frames(d, fr, first, act, rew, NULL, trn, 1), AG_ERR_INVALID_ARG, "terminated");
  agt_err(ag_dqn_store_frames(d, fr, first, act, rew, term, trn, CAP / NE + 1), AG_ERR_OUT_OF_RANGE,
          "do not fit");
  act[3] = ACTS;
  agt_err(ag_dqn_store_frames(d, fr, first, act, rew, term, trn, 2), AG_ERR_OUT_OF_RANGE, "actions[3]");
  act[3] = -1;
  agt_err(ag_dqn_store_frames(d, fr, first, act, rew, term, trn, 2), AG_ERR_OUT_OF_RANGE, "actions[3]");
  act[3] = 0, term[2] = 2;
  agt_err(ag_dqn_store_frames(d, fr, first, act, rew, term, trn, 2), AG_ERR_OUT_OF_RANGE, "terminated[2]");
  term[2] = 0, trn[1] = -1;
  agt_err(ag_dqn_store_frames(d, fr, first, act, rew, term, trn, 2), AG_ERR_OUT_OF_RANGE, "truncated[1]");
  trn[1] = 0;
  agt_err(ag_dqn_store_ex(d, obs, act, rew, obs, term, trn, 1), AG_ERR_STATE, "ag_dqn_store_frames");
  agt_err(ag_dqn_store(d, obs, act, rew, obs, term, 1), AG_ERR_STATE, "ag_dqn_store_frames");
  agt_ok(ag_dqn_store_frames(d, fr, first, act, rew, term, trn, 0));
  assert_int_equal(ag_frames_position(t), pos);
  assert_int_equal(ag_frames_count(t), count);
  /* the losses: each for its own kind of table */
  ag_tensor *l;
  int64_t bad_idx = -1;
  for (int64_t x = 0; x < CAP && bad_idx < 0; x++)
    if (!ag_frames_sampleable(t, x)) bad_idx = x;
  assert_true(bad_idx >= 0);
  agt_err(ag_dqn_loss_frames(d, &bad_idx, 1, &l), AG_ERR_OUT_OF_RANGE, "may be sampled");
  agt_err(ag_dqn_loss_frames(d, &bad_idx, 0, &l), AG_ERR_INVALID_ARG, "n = 0");
  agt_err(ag_dqn_loss_frames(d, NULL, 1, &l), AG_ERR_INVALID_ARG, "NULL");
  ag_tensor *batch;
  agt_ok(ag_tensor_create(ctx, 4, 1, AG_F32, NULL, &batch));
  agt_err(ag_dqn_loss(d, batch, &l), AG_ERR_STATE, "ag_dqn_loss_frames");
  ag_tensor_free(batch);
  /* the loop of the library's environments takes no frame table */
  ag_vec_env *env;
  agt_ok(ag_vec_env_create("CartPole-v1", 1, 0, &env));
  agt_err(ag_dqn_learn(d, env, 10, NULL, NULL), AG_ERR_UNSUPPORTED, "ag_dqn_store_frames");
  ag_vec_env_free(env);
  assert_int_equal(ag_frames_position(t), pos);
  assert_int_equal(ag_dqn_updates(d), 0);
  /* the frame calls on a DQN of full observations */
  ag_dqn_config pc = agt_dqn_config(HID, B, CAP, 1, 0);
  ag_dqn *p;
  agt_ok(ag_dqn_create(ctx, D, ACTS, 100, &pc, &p));
  assert_null(ag_dqn_frames(p));
  agt_err(ag_dqn_store_frames(p, fr, first, act, rew, term, trn, 1), AG_ERR_STATE, "ag_dqn_store_ex");
  int64_t zero = 0;
  agt_err(ag_dqn_loss_frames(p, &zero, 1, &l), AG_ERR_STATE, "ag_dqn_loss");
  assert_int_equal(ag_replay_size(ag_dqn_replay(p)), 0);
  ag_dqn_free(p);
  /* configurations */
  const struct {
    int k;
    int64_t shape0, n_envs;
    int64_t obs_dim;
    const char *part;
  } bad[] = {
      {-1, K * FC, NE, D, "frame_stack = -1"}, {AG_FRAMES_MAX_STACK + 1, K * FC, NE, D, "frame_stack = 65"},
      {K, K * FC + 1, NE, D, "multiple of k"}, {K, K * FC, NE, D + 1, "obs_dim"},
      {K, K * FC, CAP + 1, D, "n_envs"},       {K, 0, NE, D, "positive sizes"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ag_dqn_config b = frame_config(0, 1, 0);
    b.frame_stack = bad[i].k, b.obs_shape[0] = bad[i].shape0, b.n_envs = bad[i].n_envs;
    ag_dqn *x = (ag_dqn *)(uintptr_t)1;
    const uint64_t live = agt_live_bytes(ctx);
    agt_err(ag_dqn_create(ctx, bad[i].obs_dim, ACTS, 100, &b, &x), AG_ERR_INVALID_ARG, bad[i].part);
    assert_true(x == (ag_dqn *)(uintptr_t)1);
    assert_int_equal(agt_live_bytes(ctx), live);
  }
  ag_dqn_config huge = frame_config(0, 1, 0);
  huge.obs_shape[0] = K * 4096, huge.obs_shape[1] = huge.obs_shape[2] = 1024;
  ag_dqn *x = NULL;
  agt_err(ag_dqn_create(ctx, K * 4096 * 1024 * (int64_t)1024, ACTS, 100, &huge, &x), AG_ERR_INVALID_ARG,
          "2^31 - 2");
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

static void tmp_path(char *buf, size_t n, const char *what) {
  snprintf(buf, n, "/tmp/agrl_dqn_frames_%s_%s_%d.agrl", what, agt_kind_name(), (int)getpid());
}

/* (d) Saved and loaded, a frame DQN acts, draws and trains as the saved
 * one: the same parameters after more updates, bit for bit, and the same
 * table (position, sampleable entries, stacks). */
static void save_load_round_trip_resumes_bit_for_bit(void **state) {
  (void)state;
  for (int per = 0; per <= 1; per++) {
    ag_ctx *ctx = agt_ctx();
    ag_dqn_config c = frame_config(1, per ? 3 : 1, per);
    mirror m;
    ag_dqn *d = filled(ctx, &c, &m);
    agt_ok(ag_dqn_train(d, 3, NULL));
    char path[256];
    tmp_path(path, sizeof path, per ? "per" : "uniform");
    agt_ok(ag_dqn_save(d, path));
    ag_dqn *e;
    agt_ok(ag_dqn_load(ctx, path, &e));
    const ag_dqn_config *ce = ag_dqn_get_config(e);
    assert_int_equal(ce->frame_stack, K);
    assert_int_equal(ce->obs_shape[0], K * FC);
    assert_int_equal(ce->n_conv, 1);
    assert_int_equal(ce->buffer_size, CAP);
    ag_frames *ta = ag_dqn_frames(d), *tb = ag_dqn_frames(e);
    assert_non_null(tb);
    assert_int_equal(ag_frames_position(tb), ag_frames_position(ta));
    assert_int_equal(ag_frames_count(tb), ag_frames_count(ta));
    assert_int_equal(ag_dqn_updates(e), 3);
    assert_true((ag_dqn_per(e) != NULL) == per);
    int64_t idx[CAP];
    const int n = sampleable(e, &m, idx);
    ag_tensor *o, *no, *o2, *no2;
    agt_ok(ag_frames_gather(tb, idx, n, AG_F32, &o, &no, NULL));
    float *got = agt_read_f32(o);
    float want[D];
    for (int j = 0; j < n; j++) {
      stack_host(&m, idx[j], want);
      close_f32(got + (size_t)j * D, want, D, 0.0, "stack");
    }
    free(got);
    agt_ok(ag_frames_gather(ta, idx, n, AG_F32, &o2, &no2, NULL));
    ag_ctx_reset(ctx);
    /* both go on: the same steps, draws and updates */
    for (int round = 0; round < 2; round++) {
      ag_dqn *both[2] = {d, e};
      mirror mm[2] = {m, m};
      for (int i = 0; i < 2; i++) {
        store_steps(both[i], &mm[i], 4);
        if (per) agt_ok(ag_dqn_set_beta(both[i], 0.7f));
        agt_ok(ag_dqn_train(both[i], 9, NULL));
      }
      m = mm[0];
    }
    same_params(ag_dqn_q(d), ag_dqn_q(e), 0, 0.0);
    same_params(ag_dqn_target(d), ag_dqn_target(e), 0, 0.0);
    float la, lb;
    agt_ok(ag_dqn_train(d, 1, &la));
    agt_ok(ag_dqn_train(e, 1, &lb));
    assert_true(la == lb);
    unlink(path);
    ag_dqn_free(e);
    ag_dqn_free(d);
    ag_ctx_free(ctx);
  }
}

/* A file whose frame table is not the DQN's configuration is refused,
 * naming the path, and nothing is made. */
static void a_file_of_another_frame_table_is_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = frame_config(0, 1, 0);
  mirror m;
  ag_dqn *d = filled(ctx, &c, &m);
  char path[256], bad[256];
  tmp_path(path, sizeof path, "whole");
  tmp_path(bad, sizeof bad, "spliced");
  agt_ok(ag_dqn_save(d, path));
  /* the same DQN's container followed by the frame table of another stack */
  ag_frames_config fc = ag__dqn_frames_config(&c);
  fc.stack = K + 1;
  ag_frames *other;
  static const ag_field fields[4] = {
      {"action", 1, AG_I32}, {"reward", 1, AG_F32}, {"terminated", 1, AG_I32}, {"truncated", 1, AG_I32}};
  agt_ok(ag_frames_create(ctx, &fc, fields, 4, AG_F32, &other));
  char tpath[256];
  tmp_path(tpath, sizeof tpath, "table");
  agt_ok(ag_frames_save(other, tpath));
  size_t nw, nt;
  unsigned char *whole = agt_slurp(path, &nw), *table = agt_slurp(tpath, &nt);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  ag__agf a;
  uint64_t left = nw;
  agt_ok(ag__agf_read_head(&a, f, left, "test", path));
  const size_t head = (size_t)a.total;
  ag__agf_free(&a);
  fclose(f);
  unsigned char *spliced = malloc(head + nt);
  assert_non_null(spliced);
  memcpy(spliced, whole, head);
  memcpy(spliced + head, table, nt);
  agt_spit(bad, spliced, head + nt);
  ag_dqn *e = (ag_dqn *)(uintptr_t)1;
  agt_err(ag_dqn_load(ctx, bad, &e), AG_ERR_IO, "frame table is not the DQN's");
  assert_true(e == (ag_dqn *)(uintptr_t)1);
  free(whole), free(table), free(spliced);
  unlink(path), unlink(bad), unlink(tpath);
  ag_frames_free(other);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loss_and_gradients_equal_the_regular_dqn_on_host_stacks),
      cmocka_unit_test(one_update_equals_the_regular_update_on_the_same_batch),
      cmocka_unit_test(nstep_update_loss_equals_a_host_walk),
      cmocka_unit_test(per_priorities_written_back_equal_the_host_td),
      cmocka_unit_test(act_u8_equals_act_on_scaled_values),
      cmocka_unit_test(bad_input_is_refused_and_changes_nothing),
      cmocka_unit_test(save_load_round_trip_resumes_bit_for_bit),
      cmocka_unit_test(a_file_of_another_frame_table_is_refused),
  };
  return agt_run(argc, argv, "dqn_frames", tests, sizeof tests / sizeof tests[0]);
}
