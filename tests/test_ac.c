/* test_ac.c — SAC and TD3 (agrl/ac.h).
 *
 * One recorded update of each against a host computation in double from the
 * parameters before it: the draws of the update (indices, Gaussian noise)
 * made again on the host from the stream's seed and counter, the critics'
 * loss and the actor's loss against the values the update reports, every
 * gradient against central finite differences of the host's loss, Adam's
 * first step in closed form, SAC's temperature gradient and the targets'
 * Polyak averaging; TD3's delay (a critic-only update leaves the actor and
 * the targets alone). Then acting (deterministic actions against a host
 * forward pass, every action inside the bounds), storing (the actions
 * mapped into [-1, 1], bad input refused and nothing stored), refused
 * configurations, the learning loop's counts and evaluation; correlated
 * exploring noise (noise_rho) and SAC's 3-step targets on a wrapped ring.
 */
#include <math.h>
#include <unistd.h>

#include "agt.h"
#include "agent/agent_internal.h"
#include "base/kernels.h"
#include "base/normal.h"
#include "base/philox.h"
#include "graph/graph_internal.h"

enum { OD = 3, A = 1, H = 8, B = 8, N = 8, IN = OD + A };
static const float LOW[A] = {-2.0f}, HIGH[A] = {2.0f};

static ag_ac_config small_config(ag_ac_algo algo) {
  ag_ac_config c = ag_ac_defaults(algo);
  c.n_hidden = 1;
  c.hidden[0] = H;
  c.batch_size = B;
  c.buffer_size = N;
  c.learning_starts = 0;
  c.seed = 7;
  c.gamma = 0.9f;
  c.tau = 0.25f;
  c.actor_lr = 1e-3f;
  c.critic_lr = 2e-3f;
  return c;
}

/* An MLP of one hidden layer as the host holds it (double). */
typedef struct hmlp {
  int in, out;
  double w0[H * 16], b0[H], w1[16 * H], b1[16];
} hmlp;

static void hmlp_read(const ag_mlp *m, hmlp *h) {
  memset(h, 0, sizeof *h);
  h->in = (int)ag_mlp_in(m);
  h->out = (int)ag_mlp_out(m);
  assert_true(ag_mlp_n_params(m) == 4 && h->in <= 16 && h->out <= 16);
  const int n[4] = {H * h->in, H, h->out * H, h->out};
  double *dst[4] = {h->w0, h->b0, h->w1, h->b1};
  for (int i = 0; i < 4; i++) {
    float *p = agt_read_f32(ag_mlp_params(m)[i]);
    for (int k = 0; k < n[i]; k++) dst[i][k] = p[k];
    free(p);
  }
}

/* The parameters in order W0, b0, W1, b1 as one vector (for differences). */
static int hmlp_n(const hmlp *h) { return H * h->in + H + h->out * H + h->out; }
static double *hmlp_at(hmlp *h, int k) {
  if (k < H * h->in) return &h->w0[k];
  k -= H * h->in;
  if (k < H) return &h->b0[k];
  k -= H;
  if (k < h->out * H) return &h->w1[k];
  return &h->b1[k - h->out * H];
}

static void hmlp_forward(const hmlp *h, const double *x, double *y) {
  double hid[H];
  for (int r = 0; r < H; r++) {
    double v = h->b0[r];
    for (int c = 0; c < h->in; c++) v += h->w0[c * H + r] * x[c];
    hid[r] = v > 0 ? v : 0;
  }
  for (int r = 0; r < h->out; r++) {
    double v = h->b1[r];
    for (int c = 0; c < H; c++) v += h->w1[c * h->out + r] * hid[c];
    y[r] = v;
  }
}

/* The transitions, as stored (actions in the bounds) and as the table
 * holds them (actions in [-1, 1]). */
typedef struct data {
  float obs[N][OD], act[N][A], rew[N], next[N][OD];
  int term[N];
  double an[N][A];
} data;

static void make_data(data *d, uint64_t seed) {
  agt_rng r = {seed};
  for (int t = 0; t < N; t++) {
    for (int i = 0; i < OD; i++) {
      d->obs[t][i] = agt_uniform(&r, -1, 1);
      d->next[t][i] = agt_uniform(&r, -1, 1);
    }
    for (int i = 0; i < A; i++) {
      d->act[t][i] = agt_uniform(&r, LOW[i], HIGH[i]);
      d->an[t][i] = 2.0 * (d->act[t][i] - LOW[i]) / (HIGH[i] - LOW[i]) - 1.0;
    }
    d->rew[t] = agt_uniform(&r, -2, 1);
    d->term[t] = t % 3 == 0;
  }
}

static void store_data(ag_ac *a, const data *d) {
  agt_ok(ag_ac_store(a, &d->obs[0][0], &d->act[0][0], d->rew, &d->next[0][0], d->term, NULL, N));
}

/* The draws one update makes, in order: B indices, then Gaussian values. */
typedef struct draws {
  uint64_t seed, counter;
} draws;

static draws draws_of(ag_ac *a) {
  draws w;
  w.seed = ag__rng_seed(ag__ac_rng(a));
  int64_t c;
  agt_ok(ag_tensor_read(ag__rng_counter_tensor(ag__ac_rng(a)), &c, sizeof c));
  w.counter = (uint64_t)c;
  return w;
}
static int draw_index(draws *w, int64_t size) { return (int)ag__philox_below(w->seed, w->counter++, size); }
static double draw_normal(draws *w) { return ag__normal_of(ag__philox_u64(w->seed, w->counter++)); }

/* ---- SAC on the host ---- */

#define LS_MIN (-5.0)
#define LS_MAX 2.0

/* SAC's action (in [-1, 1]) and log pi for x and the noise eps. */
static double sac_host(const hmlp *actor, const double *x, const double *eps, double *act) {
  double out[2 * A], lp = 0;
  hmlp_forward(actor, x, out);
  for (int i = 0; i < A; i++) {
    double ls = LS_MIN + 0.5 * (LS_MAX - LS_MIN) * (tanh(out[A + i]) + 1.0);
    double u = out[i] + exp(ls) * eps[i], y = tanh(u);
    act[i] = y;
    lp += -0.5 * eps[i] * eps[i] - ls - 0.5 * log(2 * M_PI) - log(1.0 - y * y + 1e-6);
  }
  return lp;
}

static double q_host(const hmlp *q, const double *o, const double *act) {
  double x[IN], y;
  for (int i = 0; i < OD; i++) x[i] = o[i];
  for (int i = 0; i < A; i++) x[OD + i] = act[i];
  hmlp_forward(q, x, &y);
  return y;
}

typedef struct sac_case {
  const data *d;
  int idx[B];
  double eps_next[B][A], eps_pi[B][A];
  double alpha, gamma, target_entropy;
  int td3;
  double tnoise, tclip;
  /* n-step returns (nstep > 1): trunc flags as stored, the ring's write
   * position and its size */
  int nstep, pos, size;
  const int *trunc;
  hmlp actor, actor_t, q[2], qt[2];
} sac_case;

/* The n-step walk from column t of a ring of N columns, as agrl/replay.h
 * states it (one copy): the return, the discount and the last column. */
static double nstep_host(const sac_case *c, int t, double *disc, int *last) {
  double R = 0, g = 1;
  for (int k = 0;; k++) {
    int x = (t + k) % N;
    R += g * c->d->rew[x];
    g *= c->gamma;
    *last = x;
    if (c->d->term[x]) {
      *disc = 0;
      return R;
    }
    int rank = ((x - c->pos) % N + N) % N;
    if (c->trunc[x] || k == c->nstep - 1 || rank + 1 >= N) {
      *disc = g;
      return R;
    }
  }
}

static void obs_d(const float *f, double *o) {
  for (int i = 0; i < OD; i++) o[i] = f[i];
}

/* The critics' loss: sum over both of mean_j (Q_k(s_j, a_j) - y_j)^2. */
static double critic_loss(const sac_case *c) {
  double L = 0;
  for (int j = 0; j < B; j++) {
    int t = c->idx[j], last = t;
    double o[OD], no[OD], na[A], lp = 0, ret = c->d->rew[t], disc = c->gamma * (1 - c->d->term[t]);
    if (c->nstep > 1) ret = nstep_host(c, t, &disc, &last);
    obs_d(c->d->obs[t], o);
    obs_d(c->d->next[last], no);
    if (!c->td3) {
      lp = sac_host(&c->actor, no, c->eps_next[j], na);
    } else {
      double out[A];
      hmlp_forward(&c->actor_t, no, out);
      for (int i = 0; i < A; i++) {
        double n = c->tnoise * c->eps_next[j][i];
        n = n < -c->tclip ? -c->tclip : (n > c->tclip ? c->tclip : n);
        double v = tanh(out[i]) + n;
        na[i] = v < -1 ? -1 : (v > 1 ? 1 : v);
      }
    }
    double t0 = q_host(&c->qt[0], no, na), t1 = q_host(&c->qt[1], no, na);
    double v = (t0 < t1 ? t0 : t1) - (c->td3 ? 0.0 : c->alpha * lp);
    double y = ret + disc * v;
    for (int k = 0; k < 2; k++) {
      double e = q_host(&c->q[k], o, c->d->an[t]) - y;
      L += e * e / B;
    }
  }
  return L;
}

/* The actor's loss (SAC: mean(alpha log pi - min Q); TD3: -mean Q1), and
 * the mean log pi. */
static double actor_loss(const sac_case *c, double *mean_lp) {
  double L = 0, mlp = 0;
  for (int j = 0; j < B; j++) {
    double o[OD], pa[A];
    obs_d(c->d->obs[c->idx[j]], o);
    if (c->td3) {
      double out[A];
      hmlp_forward(&c->actor, o, out);
      for (int i = 0; i < A; i++) pa[i] = tanh(out[i]);
      L -= q_host(&c->q[0], o, pa) / B;
    } else {
      double lp = sac_host(&c->actor, o, c->eps_pi[j], pa);
      double q0 = q_host(&c->q[0], o, pa), q1 = q_host(&c->q[1], o, pa);
      L += (c->alpha * lp - (q0 < q1 ? q0 : q1)) / B;
      mlp += lp / B;
    }
  }
  if (mean_lp) *mean_lp = mlp;
  return L;
}

/* d loss / d p for every parameter of m (central differences, in double). */
static void fd_grad(sac_case *c, hmlp *m, double (*loss)(sac_case *), double *g) {
  for (int k = 0; k < hmlp_n(m); k++) {
    double *p = hmlp_at(m, k), p0 = *p, h = 1e-6 * (fabs(p0) > 1 ? fabs(p0) : 1);
    *p = p0 + h;
    double up = loss(c);
    *p = p0 - h;
    double dn = loss(c);
    *p = p0;
    g[k] = (up - dn) / (2 * h);
  }
}
static double closs_of(sac_case *c) { return critic_loss(c); }
static double aloss_of(sac_case *c) { return actor_loss(c, NULL); }

/* The device's gradients of m's parameters, in hmlp order. */
static void dev_grad(const ag_mlp *m, double *g) {
  int k = 0;
  for (int i = 0; i < 4; i++) {
    ag_tensor *gt = ag_tensor_grad(ag_mlp_params(m)[i]);
    assert_non_null(gt);
    float *v = agt_read_f32(gt);
    for (int64_t e = 0; e < ag_tensor_numel(gt); e++) g[k++] = v[e];
    free(v);
  }
}

static void assert_grads(const char *what, const double *dev, const double *host, int n) {
  double scale = 0;
  for (int k = 0; k < n; k++) scale = fmax(scale, fabs(host[k]));
  for (int k = 0; k < n; k++)
    if (fabs(dev[k] - host[k]) > 2e-3 * scale + 1e-5)
      fail_msg("%s: gradient %d is %.9g on the device, %.9g by differences (largest %.3g)", what, k, dev[k],
               host[k], scale);
}

/* Adam's first step from zero moments: p1 = p0 - lr g / (|g| + eps). */
static void assert_adam_first(const char *what, const hmlp *before, const hmlp *after, const double *g,
                              double lr) {
  hmlp b = *before, a = *after;
  for (int k = 0; k < hmlp_n(&b); k++) {
    double want = *hmlp_at(&b, k) - lr * g[k] / (fabs(g[k]) + 1e-8);
    if (fabs(*hmlp_at(&a, k) - want) > 1e-6 + 1e-5 * fabs(want))
      fail_msg("%s: parameter %d is %.9g after the step, Adam's first step gives %.9g", what, k,
               *hmlp_at(&a, k), want);
  }
}

static void assert_polyak(const char *what, const hmlp *t0, const hmlp *src, const hmlp *t1, double tau) {
  hmlp x = *t0, s = *src, y = *t1;
  for (int k = 0; k < hmlp_n(&x); k++) {
    double want = (1 - tau) * *hmlp_at(&x, k) + tau * *hmlp_at(&s, k);
    if (fabs(*hmlp_at(&y, k) - want) > 1e-6 + 1e-6 * fabs(want))
      fail_msg("%s: target parameter %d is %.9g, Polyak averaging gives %.9g", what, k, *hmlp_at(&y, k),
               want);
  }
}

/* A SAC agent's networks and temperature into c, and the indices of its
 * next update (the draws that follow them are left in the result). */
static draws read_case(ag_ac *a, sac_case *c, float *log_alpha) {
  hmlp_read(ag_ac_actor(a), &c->actor);
  for (int k = 0; k < 2; k++) {
    hmlp_read(ag_ac_critic(a, k), &c->q[k]);
    hmlp_read(ag__ac_target(a, k), &c->qt[k]);
  }
  agt_ok(ag_tensor_read(ag__ac_log_alpha(a), log_alpha, sizeof *log_alpha));
  c->alpha = exp((double)*log_alpha);
  draws w = draws_of(a);
  for (int j = 0; j < B; j++) c->idx[j] = draw_index(&w, N);
  return w;
}

static void sac_update(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ac_config cfg = small_config(AG_AC_SAC);
  cfg.alpha = 0.3f;
  ag_ac *a;
  agt_ok(ag_ac_create(ctx, OD, A, LOW, HIGH, 1000, &cfg, &a));
  data d;
  make_data(&d, 11);
  store_data(a, &d);
  sac_case c;
  memset(&c, 0, sizeof c);
  c.d = &d;
  c.gamma = cfg.gamma;
  c.target_entropy = -(double)A;
  float la0;
  draws w = read_case(a, &c, &la0);
  assert_true(fabs(la0 - log(0.3)) < 1e-6);
  for (int j = 0; j < B; j++)
    for (int i = 0; i < A; i++) c.eps_next[j][i] = draw_normal(&w);
  for (int j = 0; j < B; j++)
    for (int i = 0; i < A; i++) c.eps_pi[j][i] = draw_normal(&w);
  const double lc = critic_loss(&c);
  double gq_host[2][64], gq_dev[2][64];
  for (int k = 0; k < 2; k++) fd_grad(&c, &c.q[k], closs_of, gq_host[k]);
  hmlp q_before[2] = {c.q[0], c.q[1]}, qt_before[2] = {c.qt[0], c.qt[1]};

  float losses[2];
  agt_ok(ag_ac_train(a, 1, losses));
  assert_int_equal(ag_ac_updates(a), 1);
  if (fabs(losses[0] - lc) > 1e-4 * fabs(lc) + 1e-6)
    fail_msg("critic loss %.9g on the device, %.9g on the host", (double)losses[0], lc);
  for (int k = 0; k < 2; k++) {
    dev_grad(ag_ac_critic(a, k), gq_dev[k]);
    assert_grads("critic", gq_dev[k], gq_host[k], hmlp_n(&c.q[k]));
    hmlp after;
    hmlp_read(ag_ac_critic(a, k), &after);
    assert_adam_first("critic", &q_before[k], &after, gq_dev[k], cfg.critic_lr);
    c.q[k] = after; /* the actor's loss goes through the updated critics */
    hmlp t1;
    hmlp_read(ag__ac_target(a, k), &t1);
    assert_polyak("critic target", &qt_before[k], &after, &t1, cfg.tau);
  }
  /* the actor: its loss through the updated critics, its gradient, its step */
  double mlp;
  const double la = actor_loss(&c, &mlp);
  if (fabs(losses[1] - la) > 1e-4 * fabs(la) + 1e-6)
    fail_msg("actor loss %.9g on the device, %.9g on the host", (double)losses[1], la);
  double ga_host[64], ga_dev[64];
  fd_grad(&c, &c.actor, aloss_of, ga_host);
  dev_grad(ag_ac_actor(a), ga_dev);
  assert_grads("actor", ga_dev, ga_host, hmlp_n(&c.actor));
  hmlp actor_after;
  hmlp_read(ag_ac_actor(a), &actor_after);
  assert_adam_first("actor", &c.actor, &actor_after, ga_dev, cfg.actor_lr);
  /* the temperature: d/d log alpha of -log alpha (mean log pi + target entropy) */
  float galpha;
  agt_ok(ag_tensor_read(ag_tensor_grad(ag__ac_log_alpha(a)), &galpha, sizeof galpha));
  const double gwant = -(mlp + c.target_entropy);
  if (fabs(galpha - gwant) > 1e-4 * fabs(gwant) + 1e-5)
    fail_msg("log alpha's gradient %.9g, the host's %.9g", (double)galpha, gwant);
  float alpha;
  agt_ok(ag_ac_alpha(a, &alpha));
  const double awant = exp(la0 - cfg.critic_lr * galpha / (fabs(galpha) + 1e-8));
  assert_true(fabs(alpha - awant) < 1e-6 * awant + 1e-7);
  ag_ac_free(a);
  ag_ctx_free(ctx);
}

static void td3_update(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ac_config cfg = small_config(AG_AC_TD3);
  cfg.target_noise = 0.6f; /* clipped often at 0.5 */
  ag_ac *a;
  agt_ok(ag_ac_create(ctx, OD, A, LOW, HIGH, 1000, &cfg, &a));
  assert_int_equal(cfg.policy_delay, 2);
  data d;
  make_data(&d, 23);
  store_data(a, &d);
  sac_case c;
  memset(&c, 0, sizeof c);
  c.d = &d;
  c.td3 = 1;
  c.gamma = cfg.gamma;
  c.tnoise = cfg.target_noise;
  c.tclip = cfg.noise_clip;
  for (int u = 0; u < 2; u++) { /* a critic update, then a critic and actor update */
    hmlp_read(ag_ac_actor(a), &c.actor);
    hmlp_read(ag__ac_target(a, 2), &c.actor_t);
    for (int k = 0; k < 2; k++) {
      hmlp_read(ag_ac_critic(a, k), &c.q[k]);
      hmlp_read(ag__ac_target(a, k), &c.qt[k]);
    }
    draws w = draws_of(a);
    for (int j = 0; j < B; j++) c.idx[j] = draw_index(&w, N);
    for (int j = 0; j < B; j++)
      for (int i = 0; i < A; i++) c.eps_next[j][i] = draw_normal(&w);
    const double lc = critic_loss(&c);
    double g_host[64], g_dev[64];
    hmlp before = c.q[1];
    fd_grad(&c, &c.q[1], closs_of, g_host);
    float losses[2];
    agt_ok(ag_ac_train(a, 1, losses));
    if (fabs(losses[0] - lc) > 1e-4 * fabs(lc) + 1e-6)
      fail_msg("update %d: critic loss %.9g on the device, %.9g on the host", u, (double)losses[0], lc);
    dev_grad(ag_ac_critic(a, 1), g_dev);
    assert_grads("td3 critic", g_dev, g_host, hmlp_n(&before));
    hmlp actor1, actor_t1, q1[2], qt1[2];
    hmlp_read(ag_ac_actor(a), &actor1);
    hmlp_read(ag__ac_target(a, 2), &actor_t1);
    for (int k = 0; k < 2; k++) {
      hmlp_read(ag_ac_critic(a, k), &q1[k]);
      hmlp_read(ag__ac_target(a, k), &qt1[k]);
    }
    if (u == 0) { /* delayed: the actor and every target as they were */
      assert_true(isnan(losses[1]));
      assert_memory_equal(&actor1, &c.actor, sizeof actor1);
      assert_memory_equal(&actor_t1, &c.actor_t, sizeof actor_t1);
      for (int k = 0; k < 2; k++) assert_memory_equal(&qt1[k], &c.qt[k], sizeof qt1[k]);
      continue;
    }
    c.q[0] = q1[0];
    c.q[1] = q1[1];
    const double la = actor_loss(&c, NULL);
    if (fabs(losses[1] - la) > 1e-4 * fabs(la) + 1e-6)
      fail_msg("actor loss %.9g on the device, %.9g on the host", (double)losses[1], la);
    double ga_host[64], ga_dev[64];
    fd_grad(&c, &c.actor, aloss_of, ga_host);
    dev_grad(ag_ac_actor(a), ga_dev);
    assert_grads("td3 actor", ga_dev, ga_host, hmlp_n(&c.actor));
    assert_adam_first("td3 actor", &c.actor, &actor1, ga_dev, cfg.actor_lr);
    assert_polyak("td3 actor target", &c.actor_t, &actor1, &actor_t1, cfg.tau);
    for (int k = 0; k < 2; k++) assert_polyak("td3 critic target", &c.qt[k], &q1[k], &qt1[k], cfg.tau);
  }
  assert_int_equal(ag_ac_updates(a), 2);
  ag_ac_free(a);
  ag_ctx_free(ctx);
}

/* SAC with 3-step returns on a ring that wrapped (11 transitions in 8
 * columns), with terminations and truncations: the critics' loss and
 * gradients against the host's walk (nstep_host). */
static void sac_nstep(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ac_config cfg = small_config(AG_AC_SAC);
  cfg.n_step = 3;
  cfg.gamma = 0.8f;
  cfg.seed = 5; /* its draws take walks of all four kinds */
  ag_ac *a;
  agt_ok(ag_ac_create(ctx, OD, A, LOW, HIGH, 1000, &cfg, &a));
  data first, d;
  make_data(&first, 31);
  make_data(&d, 37); /* columns 0..2 get d's first three, written after first's 3..7 */
  int tr_first[N], tr[N];
  for (int t = 0; t < N; t++) {
    first.term[t] = t == 6;
    tr_first[t] = 0;
    d.term[t] = 0;
    tr[t] = t == 1;
  }
  agt_ok(ag_ac_store(a, &first.obs[0][0], &first.act[0][0], first.rew, &first.next[0][0], first.term,
                     tr_first, N));
  agt_ok(ag_ac_store(a, &d.obs[0][0], &d.act[0][0], d.rew, &d.next[0][0], d.term, tr, 3));
  for (int t = 3; t < N; t++) { /* the ring as it is now */
    memcpy(d.obs[t], first.obs[t], sizeof d.obs[t]);
    memcpy(d.act[t], first.act[t], sizeof d.act[t]);
    memcpy(d.next[t], first.next[t], sizeof d.next[t]);
    memcpy(d.an[t], first.an[t], sizeof d.an[t]);
    d.rew[t] = first.rew[t];
    d.term[t] = first.term[t];
    tr[t] = tr_first[t];
  }
  sac_case c;
  memset(&c, 0, sizeof c);
  c.d = &d;
  c.gamma = cfg.gamma;
  c.nstep = cfg.n_step;
  c.pos = 3;
  c.size = N;
  c.trunc = tr;
  float la0;
  draws w = read_case(a, &c, &la0);
  for (int j = 0; j < B; j++)
    for (int i = 0; i < A; i++) c.eps_next[j][i] = draw_normal(&w);
  int kinds[4] = {0}; /* walks that: terminated, truncated, ran n steps, met the write head */
  for (int j = 0; j < B; j++) {
    double disc;
    int last;
    nstep_host(&c, c.idx[j], &disc, &last);
    int steps = (last - c.idx[j] + N) % N + 1;
    kinds[d.term[last] ? 0 : tr[last] ? 1 : steps == c.nstep ? 2 : 3]++;
  }
  const double lc = critic_loss(&c);
  double g_host[2][64], g_dev[64];
  for (int k = 0; k < 2; k++) fd_grad(&c, &c.q[k], closs_of, g_host[k]);
  float losses[2];
  agt_ok(ag_ac_train(a, 1, losses));
  if (fabs(losses[0] - lc) > 1e-4 * fabs(lc) + 1e-6)
    fail_msg("3-step critic loss %.9g on the device, %.9g on the host", (double)losses[0], lc);
  for (int k = 0; k < 2; k++) {
    dev_grad(ag_ac_critic(a, k), g_dev);
    assert_grads("3-step critic", g_dev, g_host[k], hmlp_n(&c.q[k]));
  }
  /* the 1-step target differs, so the test tells them apart */
  c.nstep = 1;
  assert_true(fabs(critic_loss(&c) - lc) > 1e-3 * fabs(lc));
  for (int k = 0; k < 4; k++) assert_true(kinds[k] > 0);
  ag_ac_free(a);
  ag_ctx_free(ctx);
}

/* Deterministic actions are the host's squashed mean in the bounds;
 * exploring ones and random ones stay inside the bounds. */
static void acting(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  for (int algo = 0; algo < 2; algo++) {
    ag_ac_config cfg = small_config((ag_ac_algo)algo);
    ag_ac *a;
    const float lo[2] = {-1.0f, 0.5f}, hi[2] = {3.0f, 0.75f};
    agt_ok(ag_ac_create(ctx, OD, 2, lo, hi, 1000, &cfg, &a));
    hmlp actor;
    hmlp_read(ag_ac_actor(a), &actor);
    enum { M = 64 };
    float obs[M][OD], act[M][2];
    agt_rng r = {99};
    for (int j = 0; j < M; j++)
      for (int i = 0; i < OD; i++) obs[j][i] = agt_uniform(&r, -3, 3);
    agt_ok(ag_ac_act(a, &obs[0][0], M, 0, &act[0][0]));
    for (int j = 0; j < M; j++) {
      double o[OD], out[4];
      obs_d(obs[j], o);
      hmlp_forward(&actor, o, out);
      for (int i = 0; i < 2; i++) {
        double want = lo[i] + (tanh(out[i]) + 1) * 0.5 * (hi[i] - lo[i]);
        if (fabs(act[j][i] - want) > 1e-5 * (hi[i] - lo[i]))
          fail_msg("algo %d: action %d,%d is %.9g, the host's %.9g", algo, j, i, (double)act[j][i], want);
      }
    }
    for (int rep = 0; rep < 3; rep++) {
      if (rep < 2)
        agt_ok(ag_ac_act(a, &obs[0][0], M, 1, &act[0][0]));
      else
        agt_ok(ag_ac_act_random(a, M, &act[0][0]));
      int moved = 0;
      for (int j = 0; j < M; j++)
        for (int i = 0; i < 2; i++) {
          assert_true(act[j][i] >= lo[i] && act[j][i] <= hi[i]);
          double o[OD], out[4];
          obs_d(obs[j], o);
          hmlp_forward(&actor, o, out);
          moved += fabs(act[j][i] - (lo[i] + (tanh(out[i]) + 1) * 0.5 * (hi[i] - lo[i]))) > 1e-4;
        }
      assert_true(moved > M); /* noise (or chance) moved most of them */
    }
    agt_err(ag_ac_act(a, NULL, 1, 0, &act[0][0]), AG_ERR_INVALID_ARG, "ag_ac_act");
    agt_err(ag_ac_act(a, &obs[0][0], 0, 0, &act[0][0]), AG_ERR_INVALID_ARG, "n >= 1");
    ag_ac_free(a);
  }
  ag_ctx_free(ctx);
}

/* The normals behind exploring actions, recovered on the host: TD3's
 * (y - tanh(mu)) / expl_noise, SAC's (atanh(y) - mu) / std (NaN where the
 * action is too near a bound to recover). */
static void normals_of(ag_ac_algo algo, const hmlp *actor, const float obs[][OD], const float act[][2], int m,
                       const float *lo, const float *hi, float expl, double *z) {
  for (int j = 0; j < m; j++) {
    double o[OD], out[4];
    obs_d(obs[j], o);
    hmlp_forward(actor, o, out);
    for (int i = 0; i < 2; i++) {
      double y = 2.0 * (act[j][i] - lo[i]) / (hi[i] - lo[i]) - 1.0;
      double *zi = &z[j * 2 + i];
      if (fabs(y) > 0.98) {
        *zi = NAN;
      } else if (algo == AG_AC_TD3) {
        *zi = (y - tanh(out[i])) / expl;
      } else {
        double sd = exp(-5.0 + 3.5 * (tanh(out[2 + i]) + 1.0));
        *zi = (atanh(y) - out[i]) / sd;
      }
    }
  }
}

/* noise_rho: exploring normals z_t = rho z_{t-1} + sqrt(1 - rho^2) e_t, with
 * e_t the normals an agent without correlation (the same seed) draws; the
 * first call, and a call for another number of copies, start afresh. */
static void correlated_noise(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const float lo[2] = {-1.0f, 0.5f}, hi[2] = {3.0f, 0.75f}, rho = 0.9f;
  for (int algo = 0; algo < 2; algo++) {
    ag_ac_config c0 = small_config((ag_ac_algo)algo), c1 = c0;
    c0.expl_noise = c1.expl_noise = 0.05f;
    c1.noise_rho = rho;
    ag_ac *a0, *a1;
    agt_ok(ag_ac_create(ctx, OD, 2, lo, hi, 1000, &c0, &a0));
    agt_ok(ag_ac_create(ctx, OD, 2, lo, hi, 1000, &c1, &a1));
    hmlp actor;
    hmlp_read(ag_ac_actor(a1), &actor);
    enum { M = 16, T = 4 };
    float obs[M][OD], act[M][2];
    agt_rng r = {5};
    for (int j = 0; j < M; j++)
      for (int i = 0; i < OD; i++) obs[j][i] = agt_uniform(&r, -3, 3);
    double e[T][M * 2], z[T][M * 2];
    for (int t = 0; t < T; t++) {
      const int m = t == T - 1 ? M / 2 : M; /* the last call: fewer copies */
      agt_ok(ag_ac_act(a0, &obs[0][0], m, 1, &act[0][0]));
      normals_of((ag_ac_algo)algo, &actor, obs, act, m, lo, hi, c0.expl_noise, e[t]);
      agt_ok(ag_ac_act(a1, &obs[0][0], m, 1, &act[0][0]));
      normals_of((ag_ac_algo)algo, &actor, obs, act, m, lo, hi, c1.expl_noise, z[t]);
      if (t == 1) { /* a deterministic call in between leaves the process alone */
        agt_ok(ag_ac_act(a1, &obs[0][0], M, 0, &act[0][0]));
        agt_ok(ag_ac_act(a0, &obs[0][0], M, 0, &act[0][0]));
      }
    }
    int checked = 0;
    for (int t = 0; t < T; t++)
      for (int k = 0; k < (t == T - 1 ? M : 2 * M); k++) {
        double want =
            (t == 0 || t == T - 1) ? e[t][k] : rho * z[t - 1][k] + sqrt(1.0 - (double)rho * rho) * e[t][k];
        if (isnan(want) || isnan(z[t][k])) continue;
        checked++;
        if (fabs(z[t][k] - want) > 2e-3 * (1 + fabs(want)))
          fail_msg("algo %d, call %d, value %d: normal %.6g, want %.6g", algo, t, k, z[t][k], want);
      }
    assert_true(checked > T * M); /* most were recoverable */
    ag_ac_free(a0);
    ag_ac_free(a1);
  }
  ag_ac_config bad = small_config(AG_AC_SAC);
  ag_ac *a = NULL;
  const float rhos[3] = {1.0f, -0.1f, NAN};
  for (int k = 0; k < 3; k++) {
    bad.noise_rho = rhos[k];
    agt_err(ag_ac_create(ctx, OD, 2, lo, hi, 10, &bad, &a), AG_ERR_INVALID_ARG, "noise_rho");
    assert_null(a);
  }
  ag_ctx_free(ctx);
}

static void storing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ac_config cfg = small_config(AG_AC_SAC);
  ag_ac *a;
  agt_ok(ag_ac_create(ctx, OD, A, LOW, HIGH, 1000, &cfg, &a));
  data d;
  make_data(&d, 5);
  d.act[1][0] = 7.0f; /* beyond the bound: clipped to 1 */
  float losses[2];
  agt_err(ag_ac_train(a, 1, losses), AG_ERR_STATE, "");
  float bad = NAN;
  int two = 2, zero = 0;
  agt_err(ag_ac_store(a, d.obs[0], &bad, d.rew, d.next[0], d.term, NULL, 1), AG_ERR_OUT_OF_RANGE, "finite");
  agt_err(ag_ac_store(a, d.obs[0], d.act[0], d.rew, d.next[0], &two, NULL, 1), AG_ERR_OUT_OF_RANGE, "0 or 1");
  agt_err(ag_ac_store(a, d.obs[0], d.act[0], d.rew, d.next[0], &zero, &two, 1), AG_ERR_OUT_OF_RANGE,
          "0 or 1");
  agt_err(ag_ac_store(a, NULL, d.act[0], d.rew, d.next[0], &zero, NULL, 1), AG_ERR_INVALID_ARG, "arrays");
  assert_int_equal(ag_replay_size(ag_ac_replay(a)), 0);
  store_data(a, &d);
  assert_int_equal(ag_replay_size(ag_ac_replay(a)), N);
  int64_t idx[N];
  for (int t = 0; t < N; t++) idx[t] = t;
  ag_tensor *batch, *act, *obs;
  agt_ok(ag_replay_gather(ag_ac_replay(a), idx, N, &batch));
  agt_ok(ag_replay_view(ag_ac_replay(a), batch, "action", &act));
  agt_ok(ag_replay_view(ag_ac_replay(a), batch, "obs", &obs));
  float got[N * A], o[N * OD];
  agt_ok(ag_tensor_read(act, got, sizeof got));
  agt_ok(ag_tensor_read(obs, o, sizeof o));
  for (int t = 0; t < N; t++) {
    double want = t == 1 ? 1.0 : d.an[t][0];
    assert_true(fabs(got[t] - want) < 1e-6);
    for (int i = 0; i < OD; i++) assert_true(o[t * OD + i] == d.obs[t][i]);
  }
  ag_ctx_reset(ctx);
  ag_ac_free(a);
  ag_ctx_free(ctx);
}

static void refusals(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ac *a = NULL;
  const ag_ac_config good = small_config(AG_AC_SAC);
  const uint64_t live = agt_live_bytes(ctx);
  ag_ac_config c = good;
  c.algo = (ag_ac_algo)5;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "algo");
  c = good, c.n_hidden = 0;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "n_hidden");
  c = good, c.actor_lr = 0;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "actor_lr");
  c = good, c.tau = 0;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "tau");
  c = good, c.buffer_size = B - 1;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "buffer_size");
  c = good, c.policy_delay = 0;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "policy_delay");
  c = good, c.alpha = -1;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "alpha");
  c = good, c.target_entropy = INFINITY;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "target_entropy");
  c = good, c.noise_clip = NAN;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "noise_clip");
  c = good, c.n_step = 65;
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, &a), AG_ERR_INVALID_ARG, "n_step");
  const float lo[1] = {1.0f}, hi[1] = {1.0f}, inf[1] = {INFINITY};
  agt_err(ag_ac_create(ctx, OD, A, lo, hi, 10, &good, &a), AG_ERR_INVALID_ARG, "bounds");
  agt_err(ag_ac_create(ctx, OD, A, LOW, inf, 10, &good, &a), AG_ERR_INVALID_ARG, "bounds");
  agt_err(ag_ac_create(ctx, OD, 0, LOW, HIGH, 10, &good, &a), AG_ERR_INVALID_ARG, "act_dim");
  agt_err(ag_ac_create(ctx, OD, A, NULL, HIGH, 10, &good, &a), AG_ERR_INVALID_ARG, "NULL");
  assert_null(a);
  assert_int_equal(agt_live_bytes(ctx), live);
  ag_ctx_free(ctx);
}

/* The loop: random actions until learning_starts, then updates every
 * train_freq steps; the events count the episodes; the evaluation of the
 * agent equals that of its saved policy. */
typedef struct counts {
  int64_t episodes, phases, last_updates;
  double sum;
} counts;

static int count_event(const ag_train_event *ev, void *user) {
  counts *k = user;
  if (ev->kind == AG_TRAIN_EPISODE) {
    k->episodes++;
    k->sum += ev->episode_return;
    assert_int_equal(ev->episode_length, 200); /* Pendulum: every episode truncated */
    assert_true(ev->truncated);
  } else {
    k->phases++;
    assert_true(isfinite(ev->loss) && ev->alpha > 0);
  }
  k->last_updates = ev->updates;
  return 0;
}

static void learning_loop(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_vec_env *env;
  agt_ok(ag_vec_env_create("pendulum", 2, 3, &env));
  ag_ac_config cfg = small_config(AG_AC_SAC);
  cfg.buffer_size = 4096;
  cfg.batch_size = 32;
  cfg.learning_starts = 200;
  cfg.train_freq = 4;
  cfg.gradient_steps = 3;
  const ag_env_spec *sp = ag_vec_env_get_spec(env);
  ag_ac *a;
  agt_ok(ag_ac_create(ctx, sp->obs_dim, sp->act_dim, sp->act_low, sp->act_high, 1200, &cfg, &a));
  counts k = {0};
  agt_ok(ag_ac_learn(a, env, 1200, NULL, count_event, &k));
  assert_int_equal(k.episodes, 6); /* 1200 steps over 2 copies of 200-step episodes */
  assert_int_equal(ag_replay_size(ag_ac_replay(a)), 1200);
  /* phases past step 200 at steps 204, 208, ..., 1200: 250 of them, 3 updates each */
  assert_int_equal(ag_ac_updates(a), 3 * ((1200 - 204) / 4 + 1));
  assert_true(k.phases >= 1);
  ag_env *e1;
  agt_ok(ag_env_create("pendulum", &e1));
  double m1, m2, r1[3], r2[3];
  agt_ok(ag_ac_evaluate(a, e1, 3, 42, &m1, r1));
  ag_env *cp;
  agt_ok(ag_env_create("cartpole", &cp)); /* discrete actions: refused, not played as a Q-network */
  agt_err(ag_ac_evaluate(a, cp, 1, 42, &m2, NULL), AG_ERR_SHAPE, "discrete 2 actions");
  ag_env_free(cp);
  char path[] = "/tmp/agrl_test_ac_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  agt_ok(ag_mlp_save(ag_ac_actor(a), path));
  ag_mlp *pol;
  agt_ok(ag_mlp_load(ctx, path, &pol));
  unlink(path);
  agt_ok(ag_policy_evaluate(pol, e1, 3, 42, &m2, r2));
  assert_memory_equal(r1, r2, sizeof r1);
  assert_true(m1 == m2 && m1 < 0);
  ag_mlp_free(pol);
  ag_env_free(e1);
  ag_ac_free(a);
  ag_vec_env_free(env);
  ag_ctx_free(ctx);
}

/* ---- the fused update against the composed ops ----
 * Two agents of one configuration and table, one with fused = 0: the
 * losses of each update and, after them, every parameter (actor, critics,
 * targets, log alpha) agree to float rounding. Where the backend takes the
 * fused kernel (CUDA; the CPU's when forced) ag_ac_fused says so and the
 * two paths differ in the order of their sums only. Sizes
 * that are not multiples of the kernels' tiles, 1 to 3 hidden layers,
 * 1 to 3 actions, n-step targets, a fixed temperature, and TD3's and
 * SAC's delayed steps. */
typedef struct fused_case {
  ag_ac_algo algo;
  int n_hidden;
  int64_t hidden[3];
  int64_t od, ad, batch;
  int n_step, delay, autotune;
} fused_case;

static void close_params(const char *what, const ag_mlp *x, const ag_mlp *y) {
  for (int i = 0; i < ag_mlp_n_params(x); i++) {
    const ag_tensor *tx = ag_mlp_params(x)[i], *ty = ag_mlp_params(y)[i];
    const int64_t n = ag_tensor_rows(tx) * ag_tensor_cols(tx);
    float *px = agt_read_f32(tx), *py = agt_read_f32(ty);
    double worst = 0.0;
    for (int64_t k = 0; k < n; k++) {
      const double d = fabs((double)px[k] - py[k]) - (1e-4 + 1e-3 * fabs((double)px[k]));
      worst = d > worst ? d : worst;
    }
    if (worst > 0.0)
      fail_msg("%s: parameter %d differs beyond rounding (by %g over the tolerance)", what, i, worst);
    free(px);
    free(py);
  }
}

static void fused_composed(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const fused_case cases[] = {
      {AG_AC_SAC, 2, {64, 48}, 3, 2, 50, 1, 1, 1},     {AG_AC_SAC, 1, {37}, 5, 3, 33, 3, 2, 0},
      {AG_AC_TD3, 3, {40, 24, 36}, 4, 2, 64, 1, 2, 1}, {AG_AC_TD3, 2, {256, 256}, 3, 1, 256, 3, 2, 1},
      {AG_AC_SAC, 2, {256, 256}, 3, 1, 256, 1, 1, 1},
  };
  enum { M = 300, UPDATES = 6 };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const fused_case *fc = &cases[ci];
    ag_ac_config c = ag_ac_defaults(fc->algo);
    c.n_hidden = fc->n_hidden;
    for (int i = 0; i < fc->n_hidden; i++) c.hidden[i] = fc->hidden[i];
    c.batch_size = fc->batch;
    c.buffer_size = M;
    c.learning_starts = 0;
    c.n_step = fc->n_step;
    c.policy_delay = fc->delay;
    c.autotune = fc->autotune;
    c.alpha = 0.3f;
    c.seed = 11 + ci;
    float lo[3], hi[3];
    for (int i = 0; i < 3; i++) lo[i] = -1.0f - (float)i, hi[i] = 2.0f + (float)i;
    ag_ac *ag[2];
    for (int f = 0; f < 2; f++) {
      c.fused = f;
      agt_ok(ag_ac_create(ctx, fc->od, fc->ad, lo, hi, 1000, &c, &ag[f]));
    }
    assert_int_equal(ag_ac_fused(ag[0]), 0);
    if (agt_kind == AG_DEVICE_VULKAN) { /* no fused kernel there: both compose */
      assert_int_equal(ag_ac_fused(ag[1]), 0);
      for (int f = 0; f < 2; f++) ag_ac_free(ag[f]);
      continue;
    }
    /* the CPU and CUDA take the fused call when asked */
    assert_int_equal(ag_ac_fused(ag[1]), 1);
    /* the table: M random transitions, terminations and truncations among them */
    float *obs = malloc(sizeof(float) * M * (size_t)fc->od),
          *next = malloc(sizeof(float) * M * (size_t)fc->od);
    float *act = malloc(sizeof(float) * M * (size_t)fc->ad), rew[M];
    int term[M], trunc[M];
    agt_rng r = {100 + ci};
    for (int t = 0; t < M; t++) {
      for (int i = 0; i < fc->od; i++)
        obs[t * fc->od + i] = agt_uniform(&r, -1, 1), next[t * fc->od + i] = agt_uniform(&r, -1, 1);
      for (int i = 0; i < fc->ad; i++) act[t * fc->ad + i] = agt_uniform(&r, lo[i], hi[i]);
      rew[t] = agt_uniform(&r, -2, 1);
      term[t] = t % 7 == 3;
      trunc[t] = !term[t] && t % 5 == 1;
    }
    for (int f = 0; f < 2; f++) agt_ok(ag_ac_store(ag[f], obs, act, rew, next, term, trunc, M));
    free(obs);
    free(next);
    free(act);
    for (int u = 0; u < UPDATES; u++) {
      float l[2][2];
      for (int f = 0; f < 2; f++) agt_ok(ag_ac_train(ag[f], 1, l[f]));
      for (int k = 0; k < 2; k++) {
        if (isnan(l[0][k]) || isnan(l[1][k])) {
          assert_true(isnan(l[0][k]) && isnan(l[1][k])); /* no actor update yet in either */
          continue;
        }
        if (fabsf(l[0][k] - l[1][k]) > 1e-5f + 1e-3f * fabsf(l[0][k]))
          fail_msg("case %zu update %d: loss %d is %g composed, %g fused", ci, u, k, (double)l[0][k],
                   (double)l[1][k]);
      }
    }
    char what[64];
    snprintf(what, sizeof what, "case %zu actor", ci);
    close_params(what, ag_ac_actor(ag[0]), ag_ac_actor(ag[1]));
    for (int k = 0; k < 2; k++) {
      snprintf(what, sizeof what, "case %zu critic %d", ci, k);
      close_params(what, ag_ac_critic(ag[0], k), ag_ac_critic(ag[1], k));
      snprintf(what, sizeof what, "case %zu target %d", ci, k);
      close_params(what, ag[0]->qt[k], ag[1]->qt[k]);
    }
    if (fc->algo == AG_AC_TD3) close_params("target actor", ag[0]->actor_t, ag[1]->actor_t);
    float al[2];
    for (int f = 0; f < 2; f++) agt_ok(ag_ac_alpha(ag[f], &al[f]));
    assert_true(fabsf(al[0] - al[1]) <= 1e-5f * al[0]);
    if (ci == 0) { /* the flag goes through a file */
      char path[] = "/tmp/agrl_test_ac_fused_XXXXXX";
      int fd = mkstemp(path);
      assert_true(fd >= 0);
      close(fd);
      agt_ok(ag_ac_save(ag[0], path));
      ag_ac *b;
      agt_ok(ag_ac_load(ctx, path, &b));
      unlink(path);
      assert_int_equal(ag_ac_get_config(b)->fused, 0);
      assert_int_equal(ag_ac_fused(b), 0);
      ag_ac_free(b);
    }
    for (int f = 0; f < 2; f++) ag_ac_free(ag[f]);
  }
  /* past the fused kernels' sizes the update is composed, even when asked */
  const struct {
    int64_t width, batch;
    int fused;
  } sizes[] = {{AG__AC_MAX_WIDTH, 8, 1}, {AG__AC_MAX_WIDTH + 1, 8, 0}, {8, AG__AC_MAX_TILED + 1, 0}};
  for (int i = 0; i < 3; i++) {
    ag_ac_config c = ag_ac_defaults(AG_AC_TD3);
    c.n_hidden = 1;
    c.hidden[0] = sizes[i].width;
    c.batch_size = c.buffer_size = sizes[i].batch;
    ag_ac *a;
    float lo = -1.0f, hi = 1.0f;
    agt_ok(ag_ac_create(ctx, 3, 1, &lo, &hi, 10, &c, &a));
    assert_int_equal(ag_ac_fused(a), sizes[i].fused && agt_kind != AG_DEVICE_VULKAN);
    ag_ac_free(a);
  }
  /* on the CPU, networks narrower than 32 units compose (no faster fused there) */
  for (int w = 31; w <= 32; w++) {
    ag_ac_config c = ag_ac_defaults(AG_AC_SAC);
    c.n_hidden = 2;
    c.hidden[0] = 8, c.hidden[1] = w;
    ag_ac *a;
    float lo = -1.0f, hi = 1.0f;
    agt_ok(ag_ac_create(ctx, 3, 1, &lo, &hi, 10, &c, &a));
    assert_int_equal(ag_ac_fused(a), agt_kind == AG_DEVICE_CUDA || (agt_kind == AG_DEVICE_CPU && w == 32));
    ag_ac_free(a);
  }
  ag_ac_config bad = ag_ac_defaults(AG_AC_SAC);
  bad.fused = 2;
  ag_ac *a;
  float lo = -1.0f, hi = 1.0f;
  agt_err(ag_ac_create(ctx, 3, 1, &lo, &hi, 10, &bad, &a), AG_ERR_INVALID_ARG, "fused");
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sac_update),       cmocka_unit_test(td3_update), cmocka_unit_test(acting),
      cmocka_unit_test(storing),          cmocka_unit_test(refusals),   cmocka_unit_test(learning_loop),
      cmocka_unit_test(correlated_noise), cmocka_unit_test(sac_nstep),  cmocka_unit_test(fused_composed),
  };
  return agt_run(argc, argv, "ac", tests, sizeof tests / sizeof tests[0]);
}
