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

/* The files at agt_path_a and agt_path_b hold the same bytes. */
static void saved_alike(void) { agt_assert_same_files(agt_path_a, agt_path_b); }

static ag_ctx *cpu_ctx(void) {
  ag_ctx *c;
  agt_ok(ag_ctx_create(&c, AG_DEVICE_CPU, 0));
  return c;
}

static void models_load(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu = cpu_ctx();
  ag_mlp *want = legacy_mlp(cpu);
  for (int which = LEGACY_MLP; which <= LEGACY_MLP_V1; which++) {
    char path[1024];
    legacy_path(path, sizeof path, which);
    ag_mlp *m = NULL;
    agt_ok(ag_mlp_load(ctx, path, &m));
    assert_int_equal(ag_mlp_n_params(m), 4);
    assert_int_equal(ag_mlp_in(m), 3);
    assert_int_equal(ag_mlp_out(m), 2);
    for (int k = 0; k < 4; k++) {
      float a[16], b[16];
      ag_tensor *ta = ag_mlp_params(m)[k], *tb = ag_mlp_params(want)[k];
      size_t n = (size_t)ag_tensor_numel(tb) * 4;
      assert_int_equal(ag_tensor_numel(ta), ag_tensor_numel(tb));
      agt_ok(ag_tensor_read(ta, a, n));
      agt_ok(ag_tensor_read(tb, b, n));
      assert_memory_equal(a, b, n);
    }
    agt_ok(ag_mlp_save(m, agt_path_a));
    agt_ok(ag_mlp_save(want, agt_path_b));
    saved_alike();
    ag_mlp_free(m);
  }
  ag_mlp_free(want);
  ag_ctx_free(cpu);
  ag_ctx_free(ctx);
}

static void replay_table_loads(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu = cpu_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_REPLAY);
  ag_replay *r = NULL, *want = legacy_replay(cpu);
  agt_ok(ag_replay_load(ctx, path, &r));
  assert_int_equal(ag_replay_size(r), 24);
  assert_int_equal(ag_replay_position(r), 6);
  assert_int_equal(ag_replay_storage(r), AG_F16);
  assert_non_null(ag_replay_per(r));
  agt_ok(ag_replay_save(r, agt_path_a));
  agt_ok(ag_replay_save(want, agt_path_b));
  saved_alike();
  ag_replay_free(r);
  ag_replay_free(want);
  ag_ctx_free(cpu);
  ag_ctx_free(ctx);
}

static void shard_loads(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu = cpu_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_SHARD);
  ag_shard *sh = NULL, *want = legacy_shard(cpu);
  agt_ok(ag_shard_load(ctx, path, 1, 2, &sh));
  assert_int_equal(ag_shard_size(sh), 10);
  assert_int_equal(ag_shard_capacity(sh), 16);
  assert_int_equal(ag_shard_rank(sh), 1);
  agt_ok(ag_shard_save(sh, agt_path_a));
  agt_ok(ag_shard_save(want, agt_path_b));
  saved_alike();
  ag_shard_free(sh);
  ag_shard_free(want);
  ag_ctx_free(cpu);
  ag_ctx_free(ctx);
}

static void dqn_loads(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu = cpu_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_DQN);
  ag_dqn *d = NULL, *want = legacy_dqn(cpu);
  agt_ok(ag_dqn_load(ctx, path, &d));
  assert_int_equal(ag_dqn_updates(d), ag_dqn_updates(want));
  size_t n = 0;
  const void *rs = ag_dqn_run_state(d, &n);
  assert_int_equal(n, 7);
  assert_memory_equal(rs, "dqn run", 7);
  agt_ok(ag_dqn_save(d, agt_path_a));
  agt_ok(ag_dqn_save(want, agt_path_b));
  saved_alike();
  ag_dqn_free(d);
  ag_dqn_free(want);
  ag_ctx_free(cpu);
  ag_ctx_free(ctx);
}

static void td3_loads(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu = cpu_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_TD3);
  ag_ac *a = NULL, *want = legacy_td3(cpu);
  agt_ok(ag_ac_load(ctx, path, &a));
  size_t n = 0;
  const void *rs = ag_ac_run_state(a, &n);
  assert_int_equal(n, 7);
  assert_memory_equal(rs, "td3 run", 7);
  agt_ok(ag_ac_save(a, agt_path_a));
  agt_ok(ag_ac_save(want, agt_path_b));
  saved_alike();
  ag_ac_free(a);
  ag_ac_free(want);
  ag_ctx_free(cpu);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
#define TEST(f) cmocka_unit_test_setup_teardown(f, agt_dir_setup, agt_dir_teardown)
  const struct CMUnitTest tests[] = {TEST(models_load), TEST(replay_table_loads), TEST(shard_loads),
                                     TEST(dqn_loads), TEST(td3_loads)};
#undef TEST
  return agt_run(argc, argv, "legacy_files", tests, sizeof tests / sizeof tests[0]);
}
