/* bench_dqn.c — the DQN update of PERF.md, recorded and replayed.
 *
 * usage: bench_dqn [cpu|cuda] — one JSON line per row (bench.h).
 * The update: sample B indices on the device, gather from a 1M-transition
 * buffer, split the batch into obs / action / reward / next obs / done, the
 * target max_a Q'(s', a) without gradient, Q(s, a), Huber loss, backward,
 * Adam. The same work as bench/peers/torch_dqn.py and jax_dqn.py.
 */
#include <string.h>

#include "agrl/agrl.h"
#include "bench.h"

#define CHECK(x)                                                                \
  do {                                                                          \
    ag_status s_ = (x);                                                         \
    if (s_) {                                                                   \
      fprintf(stderr, "%s: %s: %s\n", #x, ag_status_name(s_), ag_last_error()); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

enum { REPS = 9 };

typedef struct dqn {
  int64_t obs, acts, rows, B, cap;
  ag_buffer *buf;
  ag_mlp *online, *target;
  ag_optim *opt;
  ag_rng *rng;
} dqn;

/* one update (the rows: obs, action (index at the first action row), reward, next obs, done) */
static ag_status update(ag_ctx *ctx, void *user) {
  dqn *d = user;
  ag_tensor *idx, *batch, *obs, *act, *rew, *next, *done, *qn, *mx, *nd, *t, *y, *q, *qa, *loss;
  ag_status s;
  int64_t act_rows = d->rows == 11 ? 1 : 6;
  int64_t r_act = d->obs, r_rew = r_act + act_rows, r_next = r_rew + 1, r_done = r_next + d->obs;
  if ((s = ag_randint(d->rng, d->cap, d->B, AG_I32, &idx))) return s;
  if ((s = ag_get_rows_dev(d->buf, idx, &batch))) return s;
  if ((s = ag_slice_rows(batch, 0, d->obs, &obs)) || (s = ag_slice_rows(batch, r_act, 1, &act)) ||
      (s = ag_slice_rows(batch, r_rew, 1, &rew)) || (s = ag_slice_rows(batch, r_next, d->obs, &next)) ||
      (s = ag_slice_rows(batch, r_done, 1, &done)))
    return s;
  ag_no_grad_begin(ctx);
  s = ag_mlp_forward(d->target, next, &qn);
  if (!s) s = ag_max(qn, AG_AXIS_ROWS, &mx);
  if (!s) s = ag_affine(done, -0.99f, 0.99f, &nd); /* gamma * (1 - done) */
  if (!s) s = ag_mul(mx, nd, &t);
  if (!s) s = ag_add(rew, t, &y);
  ag_no_grad_end(ctx);
  if (s) return s;
  if ((s = ag_mlp_forward(d->online, obs, &q)) || (s = ag_pick(q, act, &qa))) return s;
  if ((s = ag_huber_loss(qa, y, 1.0f, &loss))) return s;
  if ((s = ag_optim_zero_grad(d->opt)) || (s = ag_backward(loss))) return s;
  return ag_optim_step(d->opt);
}

static void dqn_new(ag_ctx *ctx, dqn *d, int64_t obs, int64_t hidden, int64_t acts, int64_t B) {
  memset(d, 0, sizeof *d);
  d->obs = obs;
  d->acts = acts;
  d->rows = obs == 4 ? 11 : 42;
  d->B = B;
  d->cap = 1000000;
  CHECK(ag_buffer_create(ctx, d->rows, d->cap, AG_F32, &d->buf));
  /* random transitions, written in chunks */
  const int64_t chunk = 10000;
  float *v = malloc((size_t)(d->rows * chunk) * sizeof *v);
  uint64_t x = 12345;
  for (int64_t c0 = 0; c0 < d->cap; c0 += chunk) {
    for (int64_t j = 0; j < chunk; j++)
      for (int64_t r = 0; r < d->rows; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float u = (float)(x >> 40) / 16777216.0f;
        float val = 2.0f * u - 1.0f;
        if (r == obs) val = (float)(x % (uint64_t)acts);             /* action index */
        if (r == d->rows - 1) val = (x % 20) == 0 ? 1.0f : 0.0f;     /* done */
        v[j * d->rows + r] = val;
      }
    CHECK(ag_buffer_write(d->buf, v, AG_F32, d->rows, chunk, c0));
  }
  free(v);
  const int64_t sizes[4] = {obs, hidden, hidden, acts};
  CHECK(ag_mlp_create(ctx, sizes, 4, AG_ACT_RELU, AG_ACT_NONE, 1, &d->online));
  CHECK(ag_mlp_create(ctx, sizes, 4, AG_ACT_RELU, AG_ACT_NONE, 2, &d->target));
  CHECK(ag_mlp_copy(d->target, d->online));
  ag_adam_config cfg = ag_adam_defaults();
  CHECK(ag_adam_create(ctx, ag_mlp_params(d->online), ag_mlp_n_params(d->online), &cfg, &d->opt));
  CHECK(ag_rng_create(ctx, 7, &d->rng));
}

static void dqn_free(dqn *d) {
  ag_optim_free(d->opt);
  ag_mlp_free(d->online);
  ag_mlp_free(d->target);
  ag_rng_free(d->rng);
  ag_buffer_free(d->buf);
}

static void row(ag_ctx *ctx, const char *work, int64_t obs, int64_t hidden, int64_t acts, int64_t B, int iters,
                int eager_too) {
  dqn d;
  dqn_new(ctx, &d, obs, hidden, acts, B);
  ag_capture *cap;
  CHECK(ag_capture_create(ctx, update, &d, &cap));
  ag_capture_info info;
  double v[REPS];
  for (int r = -2; r < REPS; r++) {
    double t0 = bench_now_us();
    for (int i = 0; i < iters; i++) CHECK(ag_capture_replay(cap));
    CHECK(ag_ctx_sync(ctx));
    if (r >= 0) v[r] = (bench_now_us() - t0) / iters;
  }
  CHECK(ag_capture_get_info(cap, &info));
  char note[128];
  snprintf(note, sizeof note, "recorded: %d nodes", info.nodes);
  bench_print(work, bench_summarize(v, REPS), note);
  ag_capture_free(cap);
  if (eager_too) {
    for (int r = -2; r < REPS; r++) {
      double t0 = bench_now_us();
      for (int i = 0; i < iters; i++) {
        CHECK(update(ctx, &d));
        ag_ctx_reset(ctx);
      }
      CHECK(ag_ctx_sync(ctx));
      if (r >= 0) v[r] = (bench_now_us() - t0) / iters;
    }
    char w2[96];
    snprintf(w2, sizeof w2, "%s_eager", work);
    bench_print(w2, bench_summarize(v, REPS), "not recorded");
  }
  dqn_free(&d);
}

int main(int argc, char **argv) {
  int cpu = argc > 1 && strcmp(argv[1], "cpu") == 0;
  ag_ctx *ctx = NULL;
  CHECK(ag_ctx_create(&ctx, cpu ? AG_DEVICE_CPU : AG_DEVICE_CUDA, 0));
  fprintf(stderr, "bench_dqn on %s\n", ag_ctx_device_name(ctx));
  if (cpu) {
    row(ctx, "cpu_dqn_update_4_128_128_2_b128", 4, 128, 2, 128, 200, 1);
  } else {
    row(ctx, "dqn_update_4_128_128_2_b128", 4, 128, 2, 128, 2000, 1);
    row(ctx, "dqn_update_17_256_256_6_b256", 17, 256, 6, 256, 2000, 1);
  }
  ag_ctx_free(ctx);
  return 0;
}
