/* test_legacy_files.c — the files agrl 0.1.0 wrote still load.
 *
 * tests/data/legacy/ holds one file of each format of that release (models
 * of versions 1 and 2, a prioritized replay table, a shard, a DQN, a TD3
 * agent), written by make_legacy.c from the objects of legacy_objects.h.
 * Each is loaded on the device under test and compared with the same
 * object made again on the CPU: the network's values bit for bit, and for
 * every kind the file that the loaded object saves is the one that the
 * object made again saves (both with this library), so every value,
 * counter and stream it holds is the same.
 */
#include <unistd.h>

#include "agt_agent.h"

#define LEGACY_OK(call) agt_ok(call)
#include "legacy_objects.h"

static void legacy_path(char *buf, size_t n, int which) {
  snprintf(buf, n, "%s/%s", AGRL_LEGACY_DIR, legacy_files[which]);
}

/* The reference: the object made again on a CPU context and saved to
 * agt_path_b (one context at a time). */
#define SAVE_REFERENCE(T, make, save, free_)        \
  do {                                              \
    ag_ctx *cpu_;                                   \
    agt_ok(ag_ctx_create(&cpu_, AG_DEVICE_CPU, 0)); \
    T *ref_ = make(cpu_);                           \
    agt_ok(save(ref_, agt_path_b));                 \
    free_(ref_);                                    \
    ag_ctx_free(cpu_);                              \
  } while (0)

/* The values of the reference network, parameter by parameter (16 floats each at most). */
static void reference_params(float vals[4][16]) {
  ag_ctx *cpu;
  agt_ok(ag_ctx_create(&cpu, AG_DEVICE_CPU, 0));
  ag_mlp *m = legacy_mlp(cpu);
  for (int k = 0; k < 4; k++) {
    ag_tensor *t = ag_mlp_params(m)[k];
    agt_ok(ag_tensor_read(t, vals[k], (size_t)ag_tensor_numel(t) * 4));
  }
  agt_ok(ag_mlp_save(m, agt_path_b));
  ag_mlp_free(m);
  ag_ctx_free(cpu);
}

static void models_load(void **state) {
  (void)state;
  float want[4][16];
  reference_params(want);
  ag_ctx *ctx = agt_ctx();
  for (int which = LEGACY_MLP; which <= LEGACY_MLP_V1; which++) {
    char path[1024];
    legacy_path(path, sizeof path, which);
    ag_mlp *m = NULL;
    agt_ok(ag_mlp_load(ctx, path, &m));
    assert_int_equal(ag_mlp_n_params(m), 4);
    assert_int_equal(ag_mlp_in(m), 3);
    assert_int_equal(ag_mlp_out(m), 2);
    const int64_t numel[4] = {15, 5, 10, 2};
    for (int k = 0; k < 4; k++) {
      float got[16];
      ag_tensor *t = ag_mlp_params(m)[k];
      assert_int_equal(ag_tensor_numel(t), numel[k]);
      agt_ok(ag_tensor_read(t, got, (size_t)numel[k] * 4));
      assert_memory_equal(got, want[k], (size_t)numel[k] * 4);
    }
    agt_ok(ag_mlp_save(m, agt_path_a));
    agt_assert_same_files(agt_path_a, agt_path_b);
    ag_mlp_free(m);
  }
  ag_ctx_free(ctx);
}

static void replay_table_loads(void **state) {
  (void)state;
  SAVE_REFERENCE(ag_replay, legacy_replay, ag_replay_save, ag_replay_free);
  ag_ctx *ctx = agt_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_REPLAY);
  ag_replay *r = NULL;
  agt_ok(ag_replay_load(ctx, path, &r));
  assert_int_equal(ag_replay_size(r), 24);
  assert_int_equal(ag_replay_position(r), 6);
  assert_int_equal(ag_replay_storage(r), AG_F16);
  assert_non_null(ag_replay_per(r));
  agt_ok(ag_replay_save(r, agt_path_a));
  agt_assert_same_files(agt_path_a, agt_path_b);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

static void shard_loads(void **state) {
  (void)state;
  SAVE_REFERENCE(ag_shard, legacy_shard, ag_shard_save, ag_shard_free);
  ag_ctx *ctx = agt_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_SHARD);
  ag_shard *sh = NULL;
  agt_ok(ag_shard_load(ctx, path, 1, 2, &sh));
  assert_int_equal(ag_shard_size(sh), 10);
  assert_int_equal(ag_shard_capacity(sh), 16);
  assert_int_equal(ag_shard_rank(sh), 1);
  agt_ok(ag_shard_save(sh, agt_path_a));
  agt_assert_same_files(agt_path_a, agt_path_b);
  ag_shard_free(sh);
  ag_ctx_free(ctx);
}

static void dqn_loads(void **state) {
  (void)state;
  SAVE_REFERENCE(ag_dqn, legacy_dqn, ag_dqn_save, ag_dqn_free);
  ag_ctx *ctx = agt_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_DQN);
  ag_dqn *d = NULL;
  agt_ok(ag_dqn_load(ctx, path, &d));
  assert_int_equal(ag_dqn_updates(d), 5);
  size_t n = 0;
  const void *rs = ag_dqn_run_state(d, &n);
  assert_int_equal(n, 7);
  assert_memory_equal(rs, "dqn run", 7);
  agt_ok(ag_dqn_save(d, agt_path_a));
  agt_assert_same_files(agt_path_a, agt_path_b);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

static void td3_loads(void **state) {
  (void)state;
  SAVE_REFERENCE(ag_ac, legacy_td3, ag_ac_save, ag_ac_free);
  ag_ctx *ctx = agt_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_TD3);
  ag_ac *a = NULL;
  agt_ok(ag_ac_load(ctx, path, &a));
  size_t n = 0;
  const void *rs = ag_ac_run_state(a, &n);
  assert_int_equal(n, 7);
  assert_memory_equal(rs, "td3 run", 7);
  agt_ok(ag_ac_save(a, agt_path_a));
  agt_assert_same_files(agt_path_a, agt_path_b);
  ag_ac_free(a);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
#define TEST(f) cmocka_unit_test_setup_teardown(f, agt_dir_setup, agt_dir_teardown)
  const struct CMUnitTest tests[] = {TEST(models_load), TEST(replay_table_loads), TEST(shard_loads),
                                     TEST(dqn_loads), TEST(td3_loads)};
#undef TEST
  return agt_run(argc, argv, "legacy_files", tests, sizeof tests / sizeof tests[0]);
}
