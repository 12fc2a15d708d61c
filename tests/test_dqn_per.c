/* test_dqn_per.c — the DQN with prioritized replay (cfg.per).
 *
 * After one recorded update, every column the update drew holds the
 * priority (|Q(s, a) - y| + eps)^alpha computed on the host from the
 * networks as they were before the update (Double DQN target, in double),
 * and every other column still holds the priority new transitions get; the
 * beta schedule in closed form and its device value; a recorded chain of
 * updates on a loaded DQN goes on as the saved one; settings out of range
 * are refused.
 */
#include <math.h>
#include <unistd.h>

#include "agt.h"
#include "replay/replay_internal.h"

enum { OBS = 4, ACTS = 3, H = 16, N = 64, B = 32 };

static ag_dqn_config per_config(void) {
  ag_dqn_config c = agt_dqn_config(H, B, N, 3, 1);
  c.per = 1;
  c.per_alpha = 0.6f;
  c.per_beta = 0.4f;
  c.per_eps = 1e-3f;
  c.max_grad_norm = 0.0f;
  return c;
}

/* Q-values of a 1-hidden-layer ReLU MLP (column-major [out, in] weights) in double. */
static void q_host(float *const *p, const float *x, double *q) {
  double h[H];
  for (int r = 0; r < H; r++) {
    double v = p[1][r];
    for (int c = 0; c < OBS; c++) v += (double)p[0][r + c * H] * x[c];
    h[r] = v > 0 ? v : 0;
  }
  for (int r = 0; r < ACTS; r++) {
    double v = p[3][r];
    for (int c = 0; c < H; c++) v += (double)p[2][r + c * ACTS] * h[c];
    q[r] = v;
  }
}

static void read_params(const ag_mlp *m, float *p[4]) {
  for (int i = 0; i < 4; i++) p[i] = agt_read_f32(ag_mlp_params(m)[i]);
}

static int argmax(const double *q) {
  int a = 0;
  for (int i = 1; i < ACTS; i++)
    if (q[i] > q[a]) a = i;
  return a;
}

/* The n-step target of column i on the host, as agrl/replay.h specifies it
 * (a full ring of N columns written 0..N-1: the head is at column 0):
 * R in f32 step by step, gamma^k by repeated f32 products. */
static float nstep_host(const float *rew, const int *term, const int *trn, int i, int n, float gamma,
                        float *disc, int *last) {
  float R = 0.0f, g = 1.0f;
  int c = i;
  for (int k = 0;; k++) {
    R = R + g * rew[c];
    g = g * gamma;
    if (term[c]) {
      *disc = 0.0f;
      break;
    }
    if (trn[c] || k == n - 1 || c + 1 >= N) {
      *disc = g;
      break;
    }
    c++;
  }
  *last = c;
  return R;
}

static void priorities_case(int n_step) {
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = per_config();
  c.n_step = n_step;
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, OBS, ACTS, 10000, &c, &d));
  assert_int_equal(ag_dqn_fused(d), 0);
  assert_non_null(ag_dqn_per(d));
  agt_rng g = {42};
  float obs[N * OBS], next[N * OBS], rew[N];
  int32_t act[N];
  int term[N], trn[N];
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < OBS; j++)
      obs[i * OBS + j] = agt_uniform(&g, -1, 1), next[i * OBS + j] = agt_uniform(&g, -1, 1);
    act[i] = (int32_t)agt_below(&g, ACTS);
    rew[i] = agt_uniform(&g, -1, 1);
    term[i] = agt_below(&g, 6) == 0;
    trn[i] = !term[i] && agt_below(&g, 6) == 0;
  }
  agt_ok(ag_dqn_store_ex(d, obs, act, rew, next, term, trn, N));
  float *pq[4], *pt[4];
  read_params(ag_dqn_q(d), pq);
  read_params(ag_dqn_target(d), pt);
  /* the host's priority of every column, from the networks before the update */
  double want[N];
  for (int i = 0; i < N; i++) {
    double q[ACTS], qn[ACTS], qt[ACTS];
    q_host(pq, obs + i * OBS, q);
    double y;
    if (n_step == 1) {
      q_host(pq, next + i * OBS, qn);
      q_host(pt, next + i * OBS, qt);
      y = rew[i] + (double)c.gamma * (1 - term[i]) * qt[argmax(qn)];
    } else {
      float disc;
      int last;
      float R = nstep_host(rew, term, trn, i, n_step, c.gamma, &disc, &last);
      q_host(pq, next + last * OBS, qn);
      q_host(pt, next + last * OBS, qt);
      y = (double)R + (double)disc * qt[argmax(qn)];
    }
    want[i] = pow(fabs(q[act[i]] - y) + (double)c.per_eps, (double)c.per_alpha);
  }
  float loss;
  agt_ok(ag_dqn_train(d, 1, &loss));
  assert_true(isfinite(loss) && loss > 0);
  ag_per *per = ag_dqn_per(d);
  const double *leaves;
  double *tree = agt_per_tree(per, &leaves);
  int drawn = 0;
  for (int i = 0; i < N; i++) {
    if (leaves[i] == 1.0) continue; /* not drawn: the first transitions' priority, 1^alpha */
    drawn++;
    if (!(fabs(leaves[i] - want[i]) <= 2e-5 * want[i] + 1e-7))
      fail_msg("column %d: priority %.9g on the device, %.9g on the host", i, leaves[i], want[i]);
  }
  assert_true(drawn >= B / 2); /* B draws, some of them repeated */
  assert_true(drawn <= B);
  double total;
  agt_ok(ag_per_total(per, &total));
  double sum = 0;
  for (int i = 0; i < N; i++) sum += leaves[i];
  assert_true(fabs(total - sum) <= 1e-9 * sum);
  free(tree);
  for (int i = 0; i < 4; i++) free(pq[i]), free(pt[i]);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

static void priorities_after_one_update_equal_a_host_computation(void **state) {
  (void)state;
  priorities_case(1);
}

/* The same with 3-step returns over episodes that end, truncate and run
 * into the write head. */
static void nstep_priorities_after_one_update_equal_a_host_computation(void **state) {
  (void)state;
  priorities_case(3);
}

static void beta_schedule_and_settings(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = per_config();
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, OBS, ACTS, 1000, &c, &d));
  assert_true(ag_dqn_per_beta(d, 0) == 0.4f);
  assert_true(fabsf(ag_dqn_per_beta(d, 500) - 0.7f) < 1e-6f);
  assert_true(ag_dqn_per_beta(d, 1000) == 1.0f);
  assert_true(ag_dqn_per_beta(d, 5000) == 1.0f);
  agt_ok(ag_dqn_set_beta(d, 0.9f));
  agt_err(ag_dqn_set_beta(d, 1.5f), AG_ERR_INVALID_ARG, "beta");
  agt_err(ag_dqn_set_beta(NULL, 0.5f), AG_ERR_INVALID_ARG, "NULL");
  ag_dqn_free(d);
  ag_dqn_config plain = agt_dqn_config(H, B, N, 3, 1);
  agt_ok(ag_dqn_create(ctx, OBS, ACTS, 1000, &plain, &d));
  assert_null(ag_dqn_per(d));
  agt_err(ag_dqn_set_beta(d, 0.5f), AG_ERR_STATE, "no prioritized replay");
  ag_dqn_free(d);
  const struct {
    float alpha, beta, eps;
    int per;
    const char *part;
  } bad[] = {{1.5f, 0.4f, 1e-6f, 1, "per_alpha"}, {0.6f, -0.1f, 1e-6f, 1, "per_beta"},
             {0.6f, 0.4f, 0.0f, 1, "per_eps"},    {0.6f, 0.4f, 2.0f, 1, "per_eps"},
             {NAN, 0.4f, 1e-6f, 1, "per_alpha"},  {0.6f, 0.4f, 1e-6f, 2, "per = 2"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ag_dqn_config b = per_config();
    b.per_alpha = bad[i].alpha, b.per_beta = bad[i].beta, b.per_eps = bad[i].eps, b.per = bad[i].per;
    ag_dqn *x = (ag_dqn *)(uintptr_t)1;
    agt_err(ag_dqn_create(ctx, OBS, ACTS, 1000, &b, &x), AG_ERR_INVALID_ARG, bad[i].part);
    assert_true(x == (ag_dqn *)(uintptr_t)1);
  }
  ag_ctx_free(ctx);
}

/* n-step returns without prioritized replay take the fused kernel when
 * cfg.fused asks for it (with the n-step target): the loss of fused = 0
 * within rounding, and another than the one-step DQN's on the same
 * transitions. */
static void nstep_without_per_is_fused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  float loss[3];
  for (int k = 0; k < 3; k++) {
    ag_dqn_config c = agt_dqn_config(H, B, N, 3, k != 1);
    c.n_step = k < 2 ? 3 : 1;
    c.max_grad_norm = 0.0f;
    ag_dqn *d;
    agt_ok(ag_dqn_create(ctx, OBS, ACTS, 1000, &c, &d));
    assert_int_equal(ag_dqn_fused(d), k != 1 && agt_fused_dqn());
    agt_rng g = {17};
    float obs[N * OBS], next[N * OBS], rew[N];
    int32_t act[N];
    int term[N], trunc[N];
    for (int i = 0; i < N; i++) {
      for (int j = 0; j < OBS; j++)
        obs[i * OBS + j] = agt_uniform(&g, -1, 1), next[i * OBS + j] = agt_uniform(&g, -1, 1);
      act[i] = (int32_t)agt_below(&g, ACTS);
      rew[i] = agt_uniform(&g, -1, 1);
      term[i] = i % 11 == 10;
      trunc[i] = i % 7 == 6;
    }
    agt_ok(ag_dqn_store_ex(d, obs, act, rew, next, term, trunc, N));
    agt_ok(ag_dqn_train(d, 1, &loss[k]));
    ag_dqn_free(d);
  }
  assert_true(fabsf(loss[0] - loss[1]) <= 1e-5f * (1 + fabsf(loss[1]))); /* fused or not: one n-step update */
  assert_true(fabsf(loss[0] - loss[2]) > 1e-6f * fabsf(loss[2]));
  ag_ctx_free(ctx);
}

/* Saved after some prioritized updates and loaded: the same losses, the
 * same priorities, the same greedy actions from there on. */
static void saved_and_loaded_goes_on_alike(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = per_config();
  c.buffer_size = 200;
  ag_dqn *a, *b;
  agt_ok(ag_dqn_create(ctx, OBS, ACTS, 1000, &c, &a));
  agt_rng g = {5};
  for (int k = 0; k < 5; k++) {
    float obs[50 * OBS], next[50 * OBS], rew[50];
    int32_t act[50];
    int term[50];
    for (int i = 0; i < 50; i++) {
      for (int j = 0; j < OBS; j++)
        obs[i * OBS + j] = agt_uniform(&g, -1, 1), next[i * OBS + j] = agt_uniform(&g, -1, 1);
      act[i] = (int32_t)agt_below(&g, ACTS);
      rew[i] = agt_uniform(&g, -1, 1);
      term[i] = agt_below(&g, 4) == 0;
    }
    agt_ok(ag_dqn_store(a, obs, act, rew, next, term, 50));
  }
  agt_ok(ag_dqn_set_beta(a, 0.55f));
  float la, lb;
  agt_ok(ag_dqn_train(a, 11, &la));
  char path[] = "/tmp/agrl_dqn_per_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  agt_ok(ag_dqn_save(a, path));
  agt_ok(ag_dqn_load(ctx, path, &b));
  unlink(path);
  assert_non_null(ag_dqn_per(b));
  assert_int_equal(ag_dqn_get_config(b)->per, 1);
  for (int k = 0; k < 3; k++) {
    agt_ok(ag_dqn_train(a, 9, &la));
    agt_ok(ag_dqn_train(b, 9, &lb));
    assert_memory_equal(&la, &lb, sizeof la);
    double ta, tb;
    agt_ok(ag_per_total(ag_dqn_per(a), &ta));
    agt_ok(ag_per_total(ag_dqn_per(b), &tb));
    assert_memory_equal(&ta, &tb, sizeof ta);
  }
  ag_dqn_free(a);
  ag_dqn_free(b);
  ag_ctx_free(ctx);
}

/* ag_dqn_learn with prioritized replay: the loop anneals beta and the run
 * is deterministic (two runs report the same events). */
typedef struct events {
  double ret[512];
  float loss[512];
  int n, m;
} events;

static int record(const ag_train_event *ev, void *user) {
  events *e = user;
  if (ev->kind == AG_TRAIN_EPISODE && e->n < 512) e->ret[e->n++] = ev->episode_return;
  if (ev->kind == AG_TRAIN_PHASE && e->m < 512) e->loss[e->m++] = ev->loss;
  return 0;
}

static void learning_with_per_is_deterministic(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  static events e[2];
  for (int k = 0; k < 2; k++) {
    ag_dqn_config c = agt_dqn_config(32, 32, 1000, 8, 1);
    c.per = 1;
    c.learning_starts = 200;
    c.train_freq = 32;
    c.gradient_steps = 8;
    ag_dqn *d;
    ag_vec_env *env;
    agt_ok(ag_dqn_create(ctx, 4, 2, 2000, &c, &d));
    agt_ok(ag_vec_env_create("cartpole", 2, 4, &env));
    memset(&e[k], 0, sizeof e[k]);
    agt_ok(ag_dqn_learn(d, env, 2000, record, &e[k]));
    assert_true(ag_dqn_updates(d) > 100);
    ag_vec_env_free(env);
    ag_dqn_free(d);
  }
  assert_true(e[0].n > 20 && e[0].m > 20);
  assert_int_equal(e[0].n, e[1].n);
  assert_int_equal(e[0].m, e[1].m);
  assert_memory_equal(e[0].ret, e[1].ret, sizeof(double) * (size_t)e[0].n);
  assert_memory_equal(e[0].loss, e[1].loss, sizeof(float) * (size_t)e[0].m);
  for (int i = 0; i < e[0].m; i++) assert_true(isfinite(e[0].loss[i]));
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(priorities_after_one_update_equal_a_host_computation),
      cmocka_unit_test(nstep_priorities_after_one_update_equal_a_host_computation),
      cmocka_unit_test(beta_schedule_and_settings),
      cmocka_unit_test(nstep_without_per_is_fused),
      cmocka_unit_test(saved_and_loaded_goes_on_alike),
      cmocka_unit_test(learning_with_per_is_deterministic),
  };
  return agt_run(argc, argv, "dqn_per", tests, sizeof tests / sizeof tests[0]);
}
