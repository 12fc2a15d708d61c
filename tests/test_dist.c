/* test_dist.c — the single-process parts of several-GPU training: groups of
 * one, the routing of a sharded table (all shards of a group held by one
 * process, compared with one unsharded table given the same writes), and a
 * data-parallel DQN of one rank against the plain DQN. The collectives of
 * real groups are tested by test_dist_mp (one process per GPU). */
#include <unistd.h>

#include "agt.h"

/* a group of one: collectives leave values as they are */
static void group_of_one(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dist *g = NULL;
  agt_ok(ag_dist_create(ctx, 0, 1, NULL, 1.0, &g));
  assert_int_equal(ag_dist_rank(g), 0);
  assert_int_equal(ag_dist_world(g), 1);
  float a[6] = {1, -2, 3.5f, 4, 5, 6};
  int32_t b[3] = {7, -8, 9};
  ag_tensor *ta, *tb, *out;
  agt_ok(ag_tensor_create(ctx, 2, 3, AG_F32, a, &ta));
  agt_ok(ag_tensor_create(ctx, 3, 1, AG_I32, b, &tb));
  ag_tensor *both[2] = {ta, tb};
  agt_ok(ag_dist_allreduce(g, both, 2, AG_REDUCE_SUM));
  agt_ok(ag_dist_allreduce(g, both, 2, AG_REDUCE_MAX));
  agt_ok(ag_dist_allreduce(g, &ta, 1, AG_REDUCE_MEAN));
  agt_ok(ag_dist_broadcast(g, both, 2, 0));
  float ra[6];
  int32_t rb[3];
  agt_ok(ag_tensor_read(ta, ra, sizeof ra));
  agt_ok(ag_tensor_read(tb, rb, sizeof rb));
  assert_memory_equal(ra, a, sizeof a);
  assert_memory_equal(rb, b, sizeof b);
  agt_ok(ag_dist_allgather(g, ta, &out));
  assert_int_equal(ag_tensor_rows(out), 2);
  assert_int_equal(ag_tensor_cols(out), 3);
  float *ro = agt_read_f32(out);
  assert_memory_equal(ro, a, sizeof a);
  free(ro);
  agt_ok(ag_dist_barrier(g));
  /* bad input: a clear error, nothing changed */
  agt_err(ag_dist_allreduce(g, &tb, 1, AG_REDUCE_MEAN), AG_ERR_SHAPE, "mean needs f32");
  agt_err(ag_dist_allreduce(g, both, 0, AG_REDUCE_SUM), AG_ERR_INVALID_ARG, "at least one tensor");
  agt_err(ag_dist_allreduce(g, both, 2, (ag_reduce_op)7), AG_ERR_INVALID_ARG, "unknown reduction");
  agt_err(ag_dist_broadcast(g, both, 2, 1), AG_ERR_INVALID_ARG, "root 1");
  agt_err(ag_dist_allgather(g, NULL, &out), AG_ERR_INVALID_ARG, "tensor");
  agt_ok(ag_tensor_read(ta, ra, sizeof ra));
  assert_memory_equal(ra, a, sizeof a);
  ag_tensor_free(ta);
  ag_tensor_free(tb);
  ag_dist_free(g);
  ag_ctx_free(ctx);
}

static void bad_groups(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dist *g = NULL;
  agt_err(ag_dist_create(ctx, 1, 1, NULL, 1.0, &g), AG_ERR_INVALID_ARG, "rank 1 of world 1");
  agt_err(ag_dist_create(ctx, 0, 0, NULL, 1.0, &g), AG_ERR_INVALID_ARG, "world 0");
  agt_err(ag_dist_create(ctx, -1, 2, "x", 1.0, &g), AG_ERR_INVALID_ARG, "rank -1");
  agt_err(ag_dist_create(ctx, 0, 1, NULL, 0.0, &g), AG_ERR_INVALID_ARG, "timeout_s");
  agt_err(ag_dist_create(ctx, 0, 2, NULL, 1.0, &g), AG_ERR_INVALID_ARG, "needs an id_path");
  agt_err(ag_dist_create(NULL, 0, 1, NULL, 1.0, &g), AG_ERR_INVALID_ARG, "must not be NULL");
  if (agt_kind != AG_DEVICE_CUDA) { /* groups of several processes run over NCCL, on CUDA */
    agt_err(ag_dist_create(ctx, 0, 2, "/tmp/agrl-none", 1.0, &g), AG_ERR_UNSUPPORTED, "needs CUDA contexts");
  } else if (ag_dist_nccl_available()) {
    /* rank 1 waits for an id that never comes: gives up at the timeout */
    char path[64];
    snprintf(path, sizeof path, "/tmp/agrl-test-noid-%ld", (long)getpid());
    agt_err(ag_dist_create(ctx, 1, 2, path, 0.2, &g), AG_ERR_TIMEOUT, "is rank 0 running");
    /* rank 0 refuses an id file left by an earlier run */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("stale", f);
    fclose(f);
    agt_err(ag_dist_create(ctx, 0, 2, path, 0.2, &g), AG_ERR_STATE, "exists");
    remove(path);
  }
  assert_null(g);
  ag_ctx_free(ctx);
}

/* the same global writes into G shards (held here by one process) and into
 * one table: column j of the table is column j / G of shard j mod G */
#define ROWS 3
static void compare_union(ag_replay *ref, ag_shard **sh, int G, int64_t C) {
  float *want = malloc(sizeof(float) * ROWS * (size_t)C),
        *got = malloc(sizeof(float) * ROWS * (size_t)(C / G));
  assert_non_null(want);
  assert_non_null(got);
  agt_ok(ag_buffer_read(ag_replay_buffer(ref), 0, C, AG_F32, want, sizeof(float) * ROWS * (size_t)C));
  int64_t local_total = 0;
  for (int r = 0; r < G; r++) {
    ag_replay *loc = ag_shard_local(sh[r]);
    assert_int_equal(ag_shard_size(sh[r]), ag_replay_size(ref));
    assert_int_equal(ag_shard_position(sh[r]), ag_replay_position(ref));
    local_total += ag_replay_size(loc);
    agt_ok(
        ag_buffer_read(ag_replay_buffer(loc), 0, C / G, AG_F32, got, sizeof(float) * ROWS * (size_t)(C / G)));
    for (int64_t l = 0; l < C / G; l++) {
      int64_t j = ag_shard_global_index(sh[r], l);
      int owner;
      int64_t back;
      ag_shard_locate(sh[r], j, &owner, &back);
      assert_int_equal(owner, r);
      assert_int_equal(back, l);
      for (int k = 0; k < ROWS; k++)
        if (got[l * ROWS + k] != want[j * ROWS + k])
          fail_msg("G=%d: shard %d column %lld row %d = %g, table column %lld = %g", G, r, (long long)l, k,
                   (double)got[l * ROWS + k], (long long)j, (double)want[j * ROWS + k]);
    }
  }
  assert_int_equal(local_total, ag_replay_size(ref));
  free(want);
  free(got);
}

static void shard_union(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field fields[2] = {{"obs", 2, AG_F32}, {"id", 1, AG_I32}};
  const int64_t C = 24;
  agt_rng rng = {99};
  for (int G = 1; G <= 4; G++) {
    ag_replay *ref;
    ag_shard *sh[4] = {0};
    agt_ok(ag_replay_create(ctx, fields, 2, C, AG_F32, 1, &ref));
    for (int r = 0; r < G; r++) {
      agt_ok(ag_shard_create(ctx, fields, 2, C, AG_F32, 4, r, G, &sh[r]));
      assert_int_equal(ag_replay_capacity(ag_shard_local(sh[r])), C / G);
    }
    int64_t id = 0;
    const int64_t ks[] = {1, 5, 7, 2, 24, 3, 11, 1, 13, 9};
    for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) {
      int64_t k = ks[c];
      float obs[2 * 24];
      int32_t ids[24];
      for (int64_t t = 0; t < k; t++) {
        obs[2 * t] = agt_uniform(&rng, -5, 5);
        obs[2 * t + 1] = (float)(id % 1000);
        ids[t] = (int32_t)id++;
      }
      const void *data[2] = {obs, ids};
      agt_ok(ag_replay_add(ref, data, k));
      for (int r = 0; r < G; r++) agt_ok(ag_shard_add(sh[r], data, k));
      compare_union(ref, sh, G, C);
    }
    /* shards stay within one transition of each other while filling */
    for (int r = 0; r < G; r++) ag_shard_free(sh[r]);
    ag_replay_free(ref);
  }
  ag_ctx_free(ctx);
}

/* lockstep local adds equal the global adds of the interleaved stream */
static void shard_local_adds(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field fields[2] = {{"obs", 2, AG_F32}, {"id", 1, AG_I32}};
  const int G = 3;
  const int64_t C = 18;
  ag_replay *ref;
  ag_shard *sh[3];
  agt_ok(ag_replay_create(ctx, fields, 2, C, AG_F32, 1, &ref));
  for (int r = 0; r < G; r++) agt_ok(ag_shard_create(ctx, fields, 2, C, AG_F32, 3, r, G, &sh[r]));
  int32_t next_id = 0;
  for (int round = 0; round < 5; round++) {
    int64_t k = 1 + round % 3; /* the same k on every rank */
    float obs[3][6], gobs[18];
    int32_t ids[3][3], gids[9];
    for (int r = 0; r < G; r++)
      for (int64_t t = 0; t < k; t++) {
        int32_t id = next_id + (int32_t)(t * G + r); /* rank r's t-th is global t*G + r of this round */
        ids[r][t] = id;
        obs[r][2 * t] = (float)id * 0.5f;
        obs[r][2 * t + 1] = (float)-id;
        gids[t * G + r] = id;
        gobs[2 * (t * G + r)] = obs[r][2 * t];
        gobs[2 * (t * G + r) + 1] = obs[r][2 * t + 1];
      }
    next_id += (int32_t)(k * G);
    for (int r = 0; r < G; r++) {
      const void *data[2] = {obs[r], ids[r]};
      agt_ok(ag_shard_add_local(sh[r], data, k));
    }
    const void *gdata[2] = {gobs, gids};
    agt_ok(ag_replay_add(ref, gdata, k * G));
    compare_union(ref, sh, G, C);
  }
  /* a global add that leaves the shards uneven stops local adds */
  float o1[2] = {1, 2};
  int32_t i1 = 5;
  const void *d1[2] = {o1, &i1};
  for (int r = 0; r < G; r++) agt_ok(ag_shard_add(sh[r], d1, 1));
  int64_t pos = ag_shard_position(sh[0]), lsize = ag_replay_size(ag_shard_local(sh[1]));
  agt_err(ag_shard_add_local(sh[1], d1, 1), AG_ERR_STATE, "not a multiple of the group size");
  assert_int_equal(ag_shard_position(sh[1]), pos);
  assert_int_equal(ag_replay_size(ag_shard_local(sh[1])), lsize);
  /* the shard's own table written behind its back is noticed */
  agt_ok(ag_replay_add(ag_shard_local(sh[2]), d1, 1));
  agt_err(ag_shard_add(sh[2], d1, 1), AG_ERR_STATE, "added to directly");
  agt_err(ag_shard_add(sh[0], d1, C + 1), AG_ERR_OUT_OF_RANGE, "capacity");
  for (int r = 0; r < G; r++) ag_shard_free(sh[r]);
  ag_replay_free(ref);
  ag_shard *bad = NULL;
  agt_err(ag_shard_create(ctx, fields, 2, 10, AG_F32, 1, 0, 3, &bad), AG_ERR_INVALID_ARG,
          "multiple of world");
  agt_err(ag_shard_create(ctx, fields, 2, 12, AG_F32, 1, 3, 3, &bad), AG_ERR_INVALID_ARG,
          "rank 3 of world 3");
  agt_err(ag_shard_create(ctx, fields, 2, 12, AG_F32, 13, 0, 3, &bad), AG_ERR_INVALID_ARG, "min_size");
  assert_null(bad);
  ag_ctx_free(ctx);
}

/* a group of one: the global sample is the local sample of the same stream */
static void sample_global_one(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field fields[1] = {{"x", 2, AG_F32}};
  ag_shard *sh;
  ag_dist *g;
  ag_rng *r1, *r2;
  agt_ok(ag_dist_create(ctx, 0, 1, NULL, 1.0, &g));
  agt_ok(ag_shard_create(ctx, fields, 1, 64, AG_F32, 8, 0, 1, &sh));
  float x[2 * 40];
  for (int i = 0; i < 80; i++) x[i] = (float)i;
  const void *data[1] = {x};
  agt_ok(ag_shard_add(sh, data, 40));
  agt_ok(ag_rng_create(ctx, 5, &r1));
  agt_ok(ag_rng_create(ctx, 5, &r2));
  ag_tensor *a, *b;
  agt_ok(ag_shard_sample_global(sh, g, r1, 16, &a));
  agt_ok(ag_replay_sample(ag_shard_local(sh), r2, 16, &b, NULL));
  float *va = agt_read_f32(a), *vb = agt_read_f32(b);
  assert_memory_equal(va, vb, sizeof(float) * 32);
  for (int c = 0; c < 16; c++) { /* a stored transition: (2i, 2i+1) with i < 40 */
    assert_true(va[2 * c] >= 0 && va[2 * c] < 80);
    assert_true(va[2 * c + 1] == va[2 * c] + 1);
  }
  free(va);
  free(vb);
  agt_err(ag_shard_sample_global(sh, g, r1, 0, &a), AG_ERR_INVALID_ARG, "multiple of the group size");
  ag_shard *other;
  agt_ok(ag_shard_create(ctx, fields, 1, 64, AG_F32, 8, 1, 2, &other));
  agt_err(ag_shard_sample_global(other, g, r1, 16, &a), AG_ERR_INVALID_ARG, "rank 1 of 2");
  ag_shard_free(other);
  ag_rng_free(r1);
  ag_rng_free(r2);
  ag_shard_free(sh);
  ag_dist_free(g);
  ag_ctx_free(ctx);
}

/* a data-parallel DQN of one rank is the plain DQN: same parameters, bit for bit */
static void dqn_group_of_one(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dist *g;
  agt_ok(ag_dist_create(ctx, 0, 1, NULL, 1.0, &g));
  ag_dqn_config cfg = ag_dqn_defaults();
  cfg.n_step = 1; /* groups take the one-step target */
  cfg.hidden[0] = cfg.hidden[1] = 16;
  cfg.batch_size = 8;
  cfg.buffer_size = 64;
  cfg.seed = 3;
  ag_dqn *plain, *dp;
  agt_ok(ag_dqn_create(ctx, 4, 2, 1000, &cfg, &plain));
  agt_ok(ag_dqn_create_dist(ctx, g, 4, 2, 1000, &cfg, &dp));
  assert_ptr_equal(ag_dqn_dist(dp), g);
  assert_null(ag_dqn_dist(plain));
  agt_rng rng = {7};
  for (int i = 0; i < 20; i++) {
    float o[4], n[4], rw = agt_uniform(&rng, -1, 1);
    for (int k = 0; k < 4; k++) o[k] = agt_uniform(&rng, -1, 1), n[k] = agt_uniform(&rng, -1, 1);
    int32_t a = (int32_t)agt_below(&rng, 2);
    int term = i % 7 == 0;
    agt_ok(ag_dqn_store(plain, o, &a, &rw, n, &term, 1));
    agt_ok(ag_dqn_store(dp, o, &a, &rw, n, &term, 1));
  }
  float l1, l2;
  agt_ok(ag_dqn_train(plain, 4, &l1));
  agt_ok(ag_dqn_train(dp, 4, &l2));
  assert_true(l1 == l2);
  ag_tensor *const *p1 = ag_mlp_params(ag_dqn_q(plain)), *const *p2 = ag_mlp_params(ag_dqn_q(dp));
  for (int i = 0; i < ag_mlp_n_params(ag_dqn_q(plain)); i++) {
    float *a = agt_read_f32(p1[i]), *b = agt_read_f32(p2[i]);
    assert_memory_equal(a, b, sizeof(float) * (size_t)ag_tensor_numel(p1[i]));
    free(a);
    free(b);
  }
  ag_dqn *bad = NULL;
  agt_err(ag_dqn_create_dist(ctx, NULL, 4, 2, 1000, &cfg, &bad), AG_ERR_INVALID_ARG, "group is NULL");
  assert_null(bad);
  ag_dqn_free(plain);
  ag_dqn_free(dp);
  ag_dist_free(g);
  ag_ctx_free(ctx);
}

/* The learning loop of a one-rank group runs the plain loop's episodes, and
 * each training phase reports the mean of the last (up to) 20 episode
 * returns, recomputed here from the episodes seen so far. */
typedef struct run_log {
  double ret[1024], phase_mean[256], phase_ref[256];
  int n, phases;
  int64_t updates[256];
} run_log;

static int log_events(const ag_train_event *ev, void *user) {
  run_log *l = user;
  if (ev->kind == AG_TRAIN_EPISODE && l->n < 1024) {
    l->ret[l->n++] = ev->episode_return;
  } else if (ev->kind == AG_TRAIN_PHASE && l->phases < 256) {
    int k = l->n < 20 ? l->n : 20;
    double sum = 0;
    for (int i = l->n - k; i < l->n; i++) sum += l->ret[i];
    l->phase_ref[l->phases] = k ? sum / k : 0.0;
    l->phase_mean[l->phases] = ev->mean_return;
    l->updates[l->phases++] = ev->updates;
  }
  return 0;
}

static void learn_in_a_group_of_one(void **state) {
  (void)state;
  static run_log logs[2];
  for (int k = 0; k < 2; k++) {
    ag_ctx *ctx = agt_ctx();
    ag_dist *g = NULL;
    ag_vec_env *env;
    ag_dqn *d;
    agt_ok(ag_vec_env_create("cartpole", 1, 21, &env));
    ag_dqn_config cfg = ag_dqn_defaults();
    cfg.n_step = 1;
    cfg.hidden[0] = cfg.hidden[1] = 16;
    cfg.batch_size = 16;
    cfg.gradient_steps = 8;
    cfg.learning_starts = 500;
    cfg.seed = 4;
    if (k == 1) agt_ok(ag_dist_create(ctx, 0, 1, NULL, 1.0, &g));
    agt_ok(k == 0 ? ag_dqn_create(ctx, 4, 2, 6000, &cfg, &d)
                  : ag_dqn_create_dist(ctx, g, 4, 2, 6000, &cfg, &d));
    memset(&logs[k], 0, sizeof logs[k]);
    agt_ok(ag_dqn_learn(d, env, 6000, log_events, &logs[k]));
    ag_dqn_free(d);
    ag_dist_free(g);
    ag_vec_env_free(env);
    ag_ctx_free(ctx);
  }
  assert_true(logs[0].n > 20 && logs[0].phases > 10);
  assert_int_equal(logs[0].n, logs[1].n);
  assert_memory_equal(logs[0].ret, logs[1].ret, sizeof(double) * (size_t)logs[0].n);
  assert_int_equal(logs[0].phases, logs[1].phases);
  for (int i = 0; i < logs[1].phases; i++) {
    assert_int_equal(logs[0].updates[i], logs[1].updates[i]);
    assert_float_equal(logs[1].phase_mean[i], logs[1].phase_ref[i], 1e-9);
    assert_float_equal(logs[0].phase_mean[i], logs[0].phase_ref[i], 1e-9);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(group_of_one),
      cmocka_unit_test(bad_groups),
      cmocka_unit_test(shard_union),
      cmocka_unit_test(shard_local_adds),
      cmocka_unit_test(sample_global_one),
      cmocka_unit_test(dqn_group_of_one),
      cmocka_unit_test(learn_in_a_group_of_one),
  };
  return agt_run(argc, argv, "dist", tests, sizeof tests / sizeof tests[0]);
}
