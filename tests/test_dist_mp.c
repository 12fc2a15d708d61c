/* test_dist_mp.c — groups of several processes, one per GPU, over NCCL.
 *
 * usage: test_dist_mp cuda [G]   (G = 2 by default)
 * The program starts G copies of itself through agrl's launcher (workers,
 * each a fresh process, so that no CUDA state crosses a fork), which join a
 * group and run the tests below in step; it fails when any worker fails. With fewer than G GPUs or
 * without NCCL the workers skip (exit 77) — unless AGRL_REQUIRE_GPUS is at
 * least G, as on a machine that has them, where that is a failure.
 *
 * What is checked, each against an independent reference:
 *   - all-reduce (sum, mean, max), broadcast and all-gather: closed forms;
 *   - an all-reduce recorded in a step and replayed with new inputs;
 *   - the union of the shards equals one table given the same writes;
 *   - the single-learner batch: the same on every rank, made of stored
 *     transitions, rank k's part drawn from rank k's shard;
 *   - a data-parallel step (local batches, averaged gradients, Adam) equals
 *     the one-process step on the gathered batch;
 *   - a data-parallel DQN keeps identical parameters on every rank, and a
 *     stop asked for by one rank stops all of them at the same boundary;
 *   - a table of G times what one GPU may hold is created, filled and
 *     sampled (and one GPU alone refuses it).
 */
#include <math.h>
#include <unistd.h>

#include "agt.h"
#include "cli/cli.h" /* cli_launch */

static int W_rank, W_world;
static ag_ctx *W_ctx;
static ag_dist *W_g;

/* ---- collectives ---- */

static void collectives(void **state) {
  (void)state;
  const int R = W_rank, G = W_world;
  float a[6];
  int64_t b[2] = {10 * R, -R};
  for (int i = 0; i < 6; i++) a[i] = (float)((R + 1) * (i + 1));
  ag_tensor *ta, *tb, *tm, *tx, *ty;
  agt_ok(ag_tensor_create(W_ctx, 3, 2, AG_F32, a, &ta));
  agt_ok(ag_tensor_create(W_ctx, 2, 1, AG_I64, b, &tb));
  ag_tensor *both[2] = {ta, tb};
  agt_ok(ag_dist_allreduce(W_g, both, 2, AG_REDUCE_SUM));
  float ra[6];
  int64_t rb[2];
  agt_ok(ag_tensor_read(ta, ra, sizeof ra));
  agt_ok(ag_tensor_read(tb, rb, sizeof rb));
  for (int i = 0; i < 6; i++) assert_true(ra[i] == (float)((i + 1) * G * (G + 1) / 2));
  assert_int_equal(rb[0], 10 * G * (G - 1) / 2);
  assert_int_equal(rb[1], -G * (G - 1) / 2);
  /* mean of f32, max of i32 */
  agt_ok(ag_tensor_create(W_ctx, 3, 2, AG_F32, a, &tm));
  agt_ok(ag_dist_allreduce(W_g, &tm, 1, AG_REDUCE_MEAN));
  agt_ok(ag_tensor_read(tm, ra, sizeof ra));
  for (int i = 0; i < 6; i++) assert_float_equal(ra[i], (i + 1) * (G + 1) / 2.0, 1e-5);
  int32_t x[4];
  for (int i = 0; i < 4; i++) x[i] = 3 * R - i * (R % 2 ? 1 : -1);
  agt_ok(ag_tensor_create(W_ctx, 4, 1, AG_I32, x, &tx));
  agt_ok(ag_dist_allreduce(W_g, &tx, 1, AG_REDUCE_MAX));
  int32_t rx[4];
  agt_ok(ag_tensor_read(tx, rx, sizeof rx));
  for (int i = 0; i < 4; i++) {
    int32_t m = INT32_MIN;
    for (int r = 0; r < G; r++) {
      int32_t v = 3 * r - i * (r % 2 ? 1 : -1);
      m = v > m ? v : m;
    }
    assert_int_equal(rx[i], m);
  }
  /* broadcast from the last rank */
  for (int i = 0; i < 4; i++) x[i] = R * 100 + i;
  agt_ok(ag_tensor_write(tx, x, sizeof x));
  agt_ok(ag_dist_broadcast(W_g, &tx, 1, G - 1));
  agt_ok(ag_tensor_read(tx, rx, sizeof rx));
  for (int i = 0; i < 4; i++) assert_int_equal(rx[i], (G - 1) * 100 + i);
  /* all-gather: rank k's [2, 3] at columns 3k .. 3k+2 */
  float y[6];
  for (int i = 0; i < 6; i++) y[i] = (float)(R * 1000 + i);
  agt_ok(ag_tensor_create(W_ctx, 2, 3, AG_F32, y, &ty));
  ag_tensor *all;
  agt_ok(ag_dist_allgather(W_g, ty, &all));
  assert_int_equal(ag_tensor_rows(all), 2);
  assert_int_equal(ag_tensor_cols(all), 3 * G);
  float *va = agt_read_f32(all);
  for (int k = 0; k < G; k++)
    for (int i = 0; i < 6; i++) assert_true(va[k * 6 + i] == (float)(k * 1000 + i));
  free(va);
  agt_err(ag_dist_broadcast(W_g, &tx, 1, G), AG_ERR_INVALID_ARG, "root");
  ag_tensor_free(ta), ag_tensor_free(tb), ag_tensor_free(tm), ag_tensor_free(tx), ag_tensor_free(ty);
  ag_ctx_reset(W_ctx);
  agt_ok(ag_dist_barrier(W_g));
}

/* ---- an all-reduce inside a recorded step ---- */

typedef struct rec {
  ag_tensor *x, *y;
} rec;

static ag_status doubled_sum(ag_ctx *ctx, void *user) {
  rec *r = user;
  (void)ctx;
  ag_status s = ag_scale(r->x, 2.0f, &r->y);
  if (!s) s = ag_dist_allreduce(W_g, &r->y, 1, AG_REDUCE_SUM);
  return s;
}

static void recorded_allreduce(void **state) {
  (void)state;
  rec r = {0};
  float x[3] = {0};
  agt_ok(ag_tensor_create(W_ctx, 3, 1, AG_F32, x, &r.x));
  ag_capture *cap;
  agt_ok(ag_capture_create(W_ctx, doubled_sum, &r, &cap));
  for (int it = 0; it < 4; it++) {
    for (int i = 0; i < 3; i++) x[i] = (float)(W_rank + it * 10 + i);
    agt_ok(ag_tensor_write(r.x, x, sizeof x));
    agt_ok(ag_capture_replay(cap));
    float y[3];
    agt_ok(ag_tensor_read(r.y, y, sizeof y));
    for (int i = 0; i < 3; i++) {
      double want = 0;
      for (int k = 0; k < W_world; k++) want += 2.0 * (k + it * 10 + i);
      assert_float_equal(y[i], want, 1e-4);
    }
  }
  ag_capture_free(cap);
  ag_tensor_free(r.x);
  agt_ok(ag_dist_barrier(W_g));
}

/* ---- sharded tables ---- */

static const ag_field id_fields[2] = {{"obs", 2, AG_F32}, {"id", 1, AG_I32}};

/* transition `id` of the global stream */
static void make_transition(int64_t id, float *obs, int32_t *idv) {
  obs[0] = (float)id * 0.5f;
  obs[1] = (float)-id;
  *idv = (int32_t)id;
}

static void shard_union(void **state) {
  (void)state;
  const int G = W_world;
  const int64_t C = 40 * G;
  ag_shard *sh;
  ag_replay *ref;
  agt_ok(ag_shard_create(W_ctx, id_fields, 2, C, AG_F32, G, W_rank, G, &sh));
  agt_ok(ag_replay_create(W_ctx, id_fields, 2, C, AG_F32, 1, &ref));
  int64_t id = 0;
  agt_rng rng = {4242}; /* the same on every rank: the same global stream */
  for (int c = 0; c < 12; c++) {
    int64_t k = 1 + agt_below(&rng, 3 * G + 7);
    float obs[2 * 64];
    int32_t ids[64];
    for (int64_t t = 0; t < k; t++) make_transition(id++, obs + 2 * t, ids + t);
    const void *data[2] = {obs, ids};
    agt_ok(ag_shard_add(sh, data, k));
    agt_ok(ag_replay_add(ref, data, k));
  }
  assert_true(id > C); /* wrapped */
  assert_int_equal(ag_shard_size(sh), ag_replay_size(ref));
  /* every shard's columns side by side, through NCCL */
  int64_t lc = C / G;
  float *mine = malloc(sizeof(float) * 3 * (size_t)lc), *want = malloc(sizeof(float) * 3 * (size_t)C);
  agt_ok(ag_buffer_read(ag_replay_buffer(ag_shard_local(sh)), 0, lc, AG_F32, mine,
                        sizeof(float) * 3 * (size_t)lc));
  agt_ok(ag_buffer_read(ag_replay_buffer(ref), 0, C, AG_F32, want, sizeof(float) * 3 * (size_t)C));
  ag_tensor *tm, *all;
  agt_ok(ag_tensor_create(W_ctx, 3, lc, AG_F32, mine, &tm));
  agt_ok(ag_dist_allgather(W_g, tm, &all));
  float *u = agt_read_f32(all);
  for (int k = 0; k < G; k++)
    for (int64_t l = 0; l < lc; l++)
      for (int r = 0; r < 3; r++)
        if (u[(k * lc + l) * 3 + r] != want[(l * G + k) * 3 + r])
          fail_msg("shard %d column %lld row %d: %g, the table's column %lld: %g", k, (long long)l, r,
                   (double)u[(k * lc + l) * 3 + r], (long long)(l * G + k),
                   (double)want[(l * G + k) * 3 + r]);
  free(u), free(mine), free(want);
  ag_tensor_free(tm);
  ag_ctx_reset(W_ctx);
  ag_shard_free(sh);
  ag_replay_free(ref);
  agt_ok(ag_dist_barrier(W_g));
}

static void sample_global(void **state) {
  (void)state;
  const int G = W_world;
  ag_shard *sh;
  agt_ok(ag_shard_create(W_ctx, id_fields, 2, 128 * G, AG_F32, G, W_rank, G, &sh));
  float obs[2 * 100];
  int32_t ids[100];
  for (int i = 0; i < 100; i++) make_transition(i, obs + 2 * i, ids + i);
  const void *data[2] = {obs, ids};
  agt_ok(ag_shard_add(sh, data, 100));
  ag_rng *rng;
  agt_ok(ag_rng_create(W_ctx, 10 + (uint64_t)W_rank, &rng));
  const int64_t B = 16 * G, b = 16;
  ag_tensor *batch, *all;
  agt_ok(ag_shard_sample_global(sh, W_g, rng, B, &batch));
  assert_int_equal(ag_tensor_cols(batch), B);
  float *v = agt_read_f32(batch); /* rows: obs (2), id (1), as f32 */
  int distinct = 0;
  for (int64_t c = 0; c < B; c++) {
    float id = v[c * 3 + 2];
    assert_true(id >= 0 && id < 100);
    assert_true(v[c * 3] == id * 0.5f && v[c * 3 + 1] == -id);
    assert_int_equal((int64_t)id % G, c / b); /* drawn from its owner's shard */
    if (v[c * 3 + 2] != v[2]) distinct = 1;
  }
  assert_true(distinct);
  /* every rank holds the same batch */
  agt_ok(ag_dist_allgather(W_g, batch, &all));
  float *u = agt_read_f32(all);
  for (int k = 0; k < G; k++) assert_memory_equal(u + k * B * 3, v, sizeof(float) * 3 * (size_t)B);
  free(u), free(v);
  ag_ctx_reset(W_ctx);
  ag_rng_free(rng);
  ag_shard_free(sh);
  agt_ok(ag_dist_barrier(W_g));
}

/* ---- data-parallel learning ---- */

static void dp_step_equals_whole_batch(void **state) {
  (void)state;
  const int G = W_world;
  const ag_field f[2] = {{"x", 4, AG_F32}, {"y", 2, AG_F32}};
  ag_shard *sh;
  agt_ok(ag_shard_create(W_ctx, f, 2, 64 * G, AG_F32, G, W_rank, G, &sh));
  agt_rng rng = {77}; /* the same stream on every rank */
  float x[4 * 96], y[2 * 96];
  for (int i = 0; i < 96; i++) {
    for (int k = 0; k < 4; k++) x[4 * i + k] = agt_uniform(&rng, -1, 1);
    y[2 * i] = x[4 * i] - 2 * x[4 * i + 1];
    y[2 * i + 1] = x[4 * i + 2] * x[4 * i + 3];
  }
  const void *data[2] = {x, y};
  agt_ok(ag_shard_add(sh, data, 96));
  const int64_t sizes[3] = {4, 16, 2};
  ag_mlp *dp, *ref;
  agt_ok(ag_mlp_create(W_ctx, sizes, 3, AG_ACT_TANH, AG_ACT_NONE, 11, &dp));
  agt_ok(ag_mlp_create(W_ctx, sizes, 3, AG_ACT_TANH, AG_ACT_NONE, 11, &ref));
  ag_adam_config ac = ag_adam_defaults();
  ac.lr = 1e-2f;
  ac.max_grad_norm = 0.5f; /* clipping sees the averaged gradient */
  ag_optim *o_dp, *o_ref;
  int np = ag_mlp_n_params(dp);
  agt_ok(ag_adam_create(W_ctx, ag_mlp_params(dp), np, &ac, &o_dp));
  agt_ok(ag_adam_create(W_ctx, ag_mlp_params(ref), np, &ac, &o_ref));
  ag_rng *dr;
  agt_ok(ag_rng_create(W_ctx, 500 + (uint64_t)W_rank, &dr));
  ag_replay *loc = ag_shard_local(sh);
  for (int step = 0; step < 3; step++) {
    ag_tensor *batch, *bx, *by, *pred, *loss, *grads[8];
    agt_ok(ag_replay_sample(loc, dr, 8, &batch, NULL));
    agt_ok(ag_replay_view(loc, batch, "x", &bx));
    agt_ok(ag_replay_view(loc, batch, "y", &by));
    agt_ok(ag_mlp_forward(dp, bx, &pred));
    agt_ok(ag_mse_loss(pred, by, &loss));
    agt_ok(ag_optim_zero_grad(o_dp));
    agt_ok(ag_backward(loss));
    for (int i = 0; i < np; i++) assert_non_null(grads[i] = ag_tensor_grad(ag_mlp_params(dp)[i]));
    agt_ok(ag_dist_allreduce(W_g, grads, np, AG_REDUCE_MEAN));
    agt_ok(ag_optim_step(o_dp));
    /* the reference: one process, the whole batch */
    ag_tensor *full, *fx, *fy, *fp, *fl;
    agt_ok(ag_dist_allgather(W_g, batch, &full));
    agt_ok(ag_slice_rows(full, 0, 4, &fx));
    agt_ok(ag_slice_rows(full, 4, 2, &fy));
    agt_ok(ag_mlp_forward(ref, fx, &fp));
    agt_ok(ag_mse_loss(fp, fy, &fl));
    agt_ok(ag_optim_zero_grad(o_ref));
    agt_ok(ag_backward(fl));
    agt_ok(ag_optim_step(o_ref));
    for (int i = 0; i < np; i++) {
      float *a = agt_read_f32(ag_mlp_params(dp)[i]), *b = agt_read_f32(ag_mlp_params(ref)[i]);
      for (int64_t e = 0; e < ag_tensor_numel(ag_mlp_params(dp)[i]); e++)
        if (fabsf(a[e] - b[e]) > 2e-6f * (1.0f + fabsf(b[e])))
          fail_msg("step %d parameter %d element %lld: data-parallel %.9g, whole batch %.9g", step, i,
                   (long long)e, (double)a[e], (double)b[e]);
      free(a), free(b);
    }
    ag_ctx_reset(W_ctx);
  }
  ag_optim_free(o_dp), ag_optim_free(o_ref);
  ag_mlp_free(dp), ag_mlp_free(ref);
  ag_rng_free(dr);
  ag_shard_free(sh);
  agt_ok(ag_dist_barrier(W_g));
}

static void dqn_ranks_agree(void **state) {
  (void)state;
  const int G = W_world;
  ag_dqn_config cfg = ag_dqn_defaults();
  cfg.n_step = 1; /* groups take the one-step target */
  cfg.hidden[0] = cfg.hidden[1] = 32;
  cfg.batch_size = 16 * G;
  cfg.buffer_size = 256 * G;
  cfg.seed = 5;
  ag_dqn *d;
  agt_ok(ag_dqn_create_dist(W_ctx, W_g, 4, 2, 10000, &cfg, &d));
  assert_int_equal(ag_replay_capacity(ag_dqn_replay(d)), 256);
  ag_tensor *const *p = ag_mlp_params(ag_dqn_q(d));
  int np = ag_mlp_n_params(ag_dqn_q(d));
  float *init0 = agt_read_f32(p[0]);
  agt_rng rng = {1000 + (uint64_t)W_rank}; /* each rank its own transitions */
  for (int i = 0; i < 100; i++) {
    float o[4], n[4], rw = agt_uniform(&rng, -1, 1);
    for (int k = 0; k < 4; k++) o[k] = agt_uniform(&rng, -1, 1), n[k] = agt_uniform(&rng, -1, 1);
    int32_t a = (int32_t)agt_below(&rng, 2);
    int term = i % 9 == 0;
    agt_ok(ag_dqn_store(d, o, &a, &rw, n, &term, 1));
  }
  float loss;
  agt_ok(ag_dqn_train(d, 10, &loss));
  assert_true(isfinite(loss));
  float *now0 = agt_read_f32(p[0]);
  assert_memory_not_equal(init0, now0, sizeof(float) * (size_t)ag_tensor_numel(p[0]));
  free(init0), free(now0);
  for (int i = 0; i < np; i++) { /* identical on every rank, bit for bit */
    ag_tensor *all;
    agt_ok(ag_dist_allgather(W_g, p[i], &all));
    float *v = agt_read_f32(all);
    size_t n = (size_t)ag_tensor_numel(p[i]);
    for (int k = 1; k < G; k++) assert_memory_equal(v, v + k * n, n * sizeof(float));
    free(v);
  }
  ag_ctx_reset(W_ctx);
  ag_dqn_free(d);
  agt_ok(ag_dist_barrier(W_g));
}

/* a stop asked for by one rank's callback stops every rank at the same
 * training boundary (none is left waiting in an all-reduce) */
typedef struct stop_rec {
  int64_t last_step, phases;
} stop_rec;

static int stop_on_rank1(const ag_train_event *ev, void *user) {
  stop_rec *r = user;
  r->last_step = ev->step;
  if (ev->kind == AG_TRAIN_PHASE) r->phases++;
  return W_rank == 1 && ev->step >= 3000;
}

static void learn_stops_together(void **state) {
  (void)state;
  const int G = W_world;
  ag_dqn_config cfg = ag_dqn_defaults();
  cfg.n_step = 1;
  cfg.hidden[0] = cfg.hidden[1] = 16;
  cfg.batch_size = 8 * G;
  cfg.buffer_size = 1024 * G;
  cfg.learning_starts = 500;
  cfg.gradient_steps = 4;
  ag_dqn *d;
  ag_vec_env *env;
  agt_ok(ag_dqn_create_dist(W_ctx, W_g, 4, 2, 100000, &cfg, &d));
  agt_ok(ag_vec_env_create("cartpole", 1, 77 + (uint64_t)W_rank, &env));
  stop_rec rec = {0, 0};
  agt_ok(ag_dqn_learn(d, env, 100000, stop_on_rank1, &rec));
  /* the same number of updates everywhere, far fewer than a whole run */
  int64_t u = ag_dqn_updates(d);
  assert_true(u > 0 && u < 100000 / 256 * 4);
  ag_tensor *tu, *all;
  agt_ok(ag_tensor_create(W_ctx, 1, 1, AG_I64, &u, &tu));
  agt_ok(ag_dist_allgather(W_g, tu, &all));
  int64_t us[64];
  agt_ok(ag_tensor_read(all, us, sizeof(int64_t) * (size_t)G));
  for (int k = 1; k < G; k++) assert_int_equal(us[k], us[0]);
  /* phases come every 256 steps of the group: the stop came at the first after step 3000 */
  assert_true(rec.phases >= 1);
  ag_tensor_free(tu);
  ag_ctx_reset(W_ctx);
  ag_vec_env_free(env);
  ag_dqn_free(d);
  agt_ok(ag_dist_barrier(W_g));
}

/* ---- a table larger than one GPU may hold ---- */

static void table_beyond_one_gpu(void **state) {
  (void)state;
  const int G = W_world;
  size_t free_b, total_b;
  agt_ok(ag_ctx_mem_info(W_ctx, &free_b, &total_b));
  /* 16 f32 a column; each shard takes 80% of its GPU's free memory, so the
   * table is 0.8 G times that: more than the 85% one GPU may take */
  const int64_t rows = 16, chunk = (int64_t)1 << 22;
  int64_t lc = (int64_t)(0.80 * (double)free_b / (double)(rows * 4)) / chunk * chunk;
  if (lc > INT32_MAX) lc = (INT32_MAX / chunk) * chunk; /* indices are sampled as i32 */
  int64_t C = lc * G;
  const ag_field f[1] = {{"x", rows, AG_F32}};
  /* the smallest across ranks decides, so all ranks agree on C */
  ag_tensor *tc;
  int64_t cv = C;
  agt_ok(ag_tensor_create(W_ctx, 1, 1, AG_I64, &cv, &tc));
  cv = -C;
  agt_ok(ag_tensor_write(tc, &cv, sizeof cv));
  agt_ok(ag_dist_allreduce(W_g, &tc, 1, AG_REDUCE_MAX));
  agt_ok(ag_tensor_read(tc, &cv, sizeof cv));
  ag_tensor_free(tc);
  C = -cv;
  lc = C / G;
  ag_replay *one = NULL;
  agt_err(ag_replay_create(W_ctx, f, 1, C, AG_F32, 1, &one), AG_ERR_OUT_OF_MEMORY, "reduce the capacity");
  ag_shard *sh;
  agt_ok(ag_shard_create(W_ctx, f, 1, C, AG_F32, 1024, W_rank, G, &sh));
  printf(
      "rank %d: a table of %lld columns (%.1f GB) over %d GPUs, %lld columns (%.1f GB) here, %.1f GB were "
      "free\n",
      W_rank, (long long)C, (double)C * rows * 4 / 1e9, G, (long long)lc, (double)lc * rows * 4 / 1e9,
      (double)free_b / 1e9);
  /* fill it: column j holds (j mod 65536, j / 65536, ...) */
  void *mem;
  agt_ok(ag_host_alloc(W_ctx, sizeof(float) * (size_t)(rows * chunk), &mem));
  float *x = mem;
  for (int64_t t = 0; t < chunk; t++)
    for (int64_t r = 2; r < rows; r++) x[t * rows + r] = (float)r;
  const void *data[1] = {x};
  for (int64_t l0 = 0; l0 < lc; l0 += chunk) {
    for (int64_t t = 0; t < chunk; t++) {
      int64_t j = ag_shard_global_index(sh, l0 + t);
      x[t * rows] = (float)(j % 65536);
      x[t * rows + 1] = (float)(j / 65536);
    }
    agt_ok(ag_shard_add_local(sh, data, chunk));
  }
  ag_host_free(W_ctx, x);
  assert_int_equal(ag_shard_size(sh), C);
  /* sample it: each column is the one its index names */
  ag_rng *rng;
  agt_ok(ag_rng_create(W_ctx, 31 + (uint64_t)W_rank, &rng));
  ag_tensor *batch, *idx;
  const int64_t B = 4096;
  agt_ok(ag_replay_sample(ag_shard_local(sh), rng, B, &batch, &idx));
  float *v = agt_read_f32(batch);
  int32_t *iv = malloc(sizeof(int32_t) * B);
  agt_ok(ag_tensor_read(idx, iv, sizeof(int32_t) * B));
  int64_t hi = 0;
  for (int64_t c = 0; c < B; c++) {
    int64_t j = ag_shard_global_index(sh, iv[c]);
    assert_true(v[c * rows] == (float)(j % 65536) && v[c * rows + 1] == (float)(j / 65536));
    assert_true(v[c * rows + rows - 1] == (float)(rows - 1));
    if (iv[c] > hi) hi = iv[c];
  }
  assert_true(hi > lc / 2); /* the far half is reached */
  free(v), free(iv);
  ag_ctx_reset(W_ctx);
  ag_rng_free(rng);
  ag_shard_free(sh);
  agt_ok(ag_dist_barrier(W_g));
}

/* ---- the launcher ---- */

static int worker(int rank, int world, const char *id_path) {
  const char *req = getenv("AGRL_REQUIRE_GPUS");
  int required = req ? atoi(req) : 0;
  if (!ag_dist_nccl_available() || ag_cuda_device_count() < world) {
    if (required >= world) {
      fprintf(stderr, "dist_mp rank %d: FAILED: AGRL_REQUIRE_GPUS=%d but %d GPUs and NCCL %s\n", rank,
              required, ag_cuda_device_count(), ag_dist_nccl_available() ? "present" : "missing");
      return 1;
    }
    if (rank == 0)
      printf("dist_mp.cuda: SKIPPED: needs %d GPUs and NCCL (%d GPUs, NCCL %s)\n", world,
             ag_cuda_device_count(), ag_dist_nccl_available() ? "present" : "missing");
    return 77;
  }
  W_rank = rank;
  W_world = world;
  if (ag_ctx_create(&W_ctx, AG_DEVICE_CUDA, rank) ||
      ag_dist_create(W_ctx, rank, world, id_path, 120.0, &W_g)) {
    fprintf(stderr, "dist_mp rank %d: cannot join the group: %s\n", rank, ag_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(collectives),
      cmocka_unit_test(recorded_allreduce),
      cmocka_unit_test(shard_union),
      cmocka_unit_test(sample_global),
      cmocka_unit_test(dp_step_equals_whole_batch),
      cmocka_unit_test(dqn_ranks_agree),
      cmocka_unit_test(learn_stops_together),
      cmocka_unit_test(table_beyond_one_gpu),
  };
  char name[64];
  snprintf(name, sizeof name, "dist_mp.cuda.rank%d", rank);
  int rc = _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], NULL, NULL);
  ag_dist_free(W_g);
  ag_ctx_free(W_ctx);
  return rc;
}

/* The launcher (agrl's own, src/cli/launch.c) starts this program once per
 * GPU with --rank R --world G --id-file F appended. */
int main(int argc, char **argv) {
  for (int i = 1; i + 5 < argc; i++)
    if (!strcmp(argv[i], "--rank") && !strcmp(argv[i + 2], "--world") && !strcmp(argv[i + 4], "--id-file"))
      return worker(atoi(argv[i + 1]), atoi(argv[i + 3]), argv[i + 5]);
  if (argc < 2 || strcmp(argv[1], "cuda")) {
    fprintf(stderr, "usage: %s cuda [G]\n", argv[0]);
    return 2;
  }
  int world = argc > 2 ? atoi(argv[2]) : 2;
  if (world < 2 || world > 64) {
    fprintf(stderr, "%s: G must be in 2..64\n", argv[0]);
    return 2;
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  return cli_launch("dist_mp", argc - 1, argv + 1, world);
}
