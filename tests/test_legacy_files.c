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
#include <string.h>
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

/* A 0.1.0 replay or DQN file whose version word (byte 8) says 2 is refused
 * as a newer format, one that says 0 as corrupt; nothing is handed out. */
static void version_word_checked(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const int which[2] = {LEGACY_REPLAY, LEGACY_DQN};
  for (int w = 0; w < 2; w++) {
    char path[1024];
    legacy_path(path, sizeof path, which[w]);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 16 && n < sizeof buf);
    assert_int_equal(buf[8], 1);
    const unsigned char words[2] = {2, 0};
    const ag_status want[2] = {AG_ERR_UNSUPPORTED, AG_ERR_IO};
    for (int k = 0; k < 2; k++) {
      buf[8] = words[k];
      f = fopen(agt_path_a, "wb");
      assert_non_null(f);
      assert_int_equal(fwrite(buf, 1, n, f), n);
      fclose(f);
      void *sentinel = (void *)&n, *out = sentinel;
      ag_status s = w == 0 ? ag_replay_load(ctx, agt_path_a, (ag_replay **)&out)
                           : ag_dqn_load(ctx, agt_path_a, (ag_dqn **)&out);
      assert_int_equal(s, want[k]);
      assert_ptr_equal(out, sentinel);
      assert_non_null(strstr(ag_last_error(), "version"));
    }
  }
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
#define TEST(f) cmocka_unit_test_setup_teardown(f, agt_dir_setup, agt_dir_teardown)
  const struct CMUnitTest tests[] = {TEST(models_load), TEST(replay_table_loads), TEST(shard_loads),
                                     TEST(dqn_loads),   TEST(td3_loads),          TEST(version_word_checked)};
#undef TEST
  return agt_run(argc, argv, "legacy_files", tests, sizeof tests / sizeof tests[0]);
}
