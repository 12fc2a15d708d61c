/* test_legacy_files.c — the files agrl 0.1.0 wrote still load.
 *
 * tests/data/legacy/ holds one file of each format of that release (models
 * of versions 1 and 2, a prioritized replay table, a shard, a DQN, a TD3
 * agent), written by make_legacy.c from the objects of legacy_objects.h.
 * Each is loaded on the device under test and compared with the same
 * object made again on the CPU: the network's values bit for bit, and for
 * every kind the file that the loaded object saves is the one that the
 * object made again saves (both with this library), so every value,
 * counter and stream it holds is the same. The shard file is also read
 * through the container's reader, which hands it to the legacy parser.
 */
#include <string.h>
#include <unistd.h>

#include "agt_agent.h"
#include "base/agfile.h"

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

/* ---- the shard file of 0.1.0, through agfile_legacy.c ---- */

static uint32_t shd_crc(const unsigned char *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}
static void shd_put(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static const ag__agf_key *shd_key(const ag__agf *a, const char *name, ag__agf_type type) {
  const ag__agf_key *k = ag__agf_key_find(a, name);
  if (!k) fail_msg("no key %s", name);
  assert_int_equal(k->type, type);
  return k;
}

/* The 0.1.0 shard file (AGRLSHD1: a 140-byte header, then its table as
 * AGRLRPL1) is read by the container's reader through the legacy parser
 * into the keys of a shard container, with the values its header holds
 * (rank 1 of 2, global capacity 16, size and position 10, legacy_fields),
 * no sections, its table following its 140 bytes; and ag_shard_load takes
 * those keys as it takes a container's: the same checks and messages. A
 * header out of its layout (version word, reserved bytes, the library
 * version's padding, n_fields against its length, its CRC, cut short) is
 * refused; nothing is handed out. */
static void shard_read_by_legacy_parser(void **state) {
  (void)state;
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_SHARD);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  unsigned char buf[4096];
  size_t n = fread(buf, 1, sizeof buf, f);
  assert_true(n > 140 && n < sizeof buf);
  rewind(f);
  ag__agf a;
  agt_ok(ag__agf_read_head(&a, f, n, "test", path));
  fclose(f);
  assert_string_equal(a.format, "AGRLSHD1 (agrl 0.1.0 replay shard)");
  assert_string_equal((const char *)shd_key(&a, "kind", AG__AGF_STR)->data, "shard");
  assert_int_equal(shd_key(&a, "shard.version", AG__AGF_I64)->v.i, 1);
  assert_string_equal((const char *)shd_key(&a, "shard.library", AG__AGF_STR)->data, "0.1.0 (cpu+vulkan)");
  assert_int_equal(shd_key(&a, "shard.rank", AG__AGF_I64)->v.i, 1);
  assert_int_equal(shd_key(&a, "shard.world", AG__AGF_I64)->v.i, 2);
  assert_int_equal(shd_key(&a, "shard.capacity", AG__AGF_I64)->v.i, 16);
  assert_int_equal(shd_key(&a, "shard.position", AG__AGF_I64)->v.i, 10);
  assert_int_equal(shd_key(&a, "shard.size", AG__AGF_I64)->v.i, 10);
  const ag__agf_key *w = shd_key(&a, "shard.widths", AG__AGF_I64S),
                    *dt = shd_key(&a, "shard.dtypes", AG__AGF_I64S);
  assert_int_equal(w->count, 3);
  assert_int_equal(dt->count, 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(((const int64_t *)w->data)[i], legacy_fields[i].width);
    assert_int_equal(((const int64_t *)dt->data)[i], legacy_fields[i].dtype);
  }
  assert_int_equal(a.n_sections, 0);
  assert_int_equal(a.total, 140);
  ag__agf_free(&a);
  assert_memory_equal(buf + 140, "AGRLRPL1", 8);

  ag_ctx *ctx = agt_ctx();
  const struct {
    int at, bytes;
    uint64_t v;
    int fix; /* the header's CRC made right again */
    ag_status want;
    const char *part;
  } bad[] = {{8, 4, 2, 0, AG_ERR_UNSUPPORTED, "format version 2"},
             {8, 4, 0, 0, AG_ERR_IO, "format version 0"},
             {12, 4, 141, 0, AG_ERR_IO, "the header length 141 is not a valid one"},
             {12, 4, 156, 0, AG_ERR_IO, "header fails its CRC-32"},
             {20, 1, 0x41, 0, AG_ERR_IO, "header fails its CRC-32"},
             {40, 1, 'x', 1, AG_ERR_IO, "byte 40 after the library version is not 0"},
             {80, 4, 4, 1, AG_ERR_IO, "n_fields = 4 does not fit its 140-byte header"},
             {80, 4, 0, 1, AG_ERR_IO, "n_fields = 0"},
             {84, 4, 1, 1, AG_ERR_IO, "reserved header word at byte 84"},
             {100, 4, 1, 1, AG_ERR_IO, "reserved word of field 0"},
             /* values: checked from the keys, as in a container */
             {48, 4, 2, 1, AG_ERR_IO, "key 'shard.rank' = 2, outside 0..1"},
             {52, 4, 0, 1, AG_ERR_IO, "key 'shard.world' = 0"},
             {56, 8, 15, 1, AG_ERR_IO, "capacity 15 is not a multiple of world (2)"},
             {64, 8, 9, 1, AG_ERR_IO, "position 9 is not one a ring of size 10"},
             {88, 8, 0, 1, AG_ERR_IO, "field 0 has width 0"},
             {96, 4, 6, 1, AG_ERR_IO, "field 0 has dtype code 6"},
             {104, 8, 2, 1, AG_ERR_IO, "is not the header's field 1 (width 2"}};
  for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
    unsigned char q[4096];
    memcpy(q, buf, n);
    shd_put(q + bad[b].at, bad[b].v, bad[b].bytes);
    if (bad[b].fix) shd_put(q + 136, shd_crc(q, 136), 4);
    agt_spit(agt_path_a, q, n);
    ag_shard *sh = (ag_shard *)(void *)q;
    uint64_t l0 = agt_live_bytes(ctx);
    ag_status s = ag_shard_load(ctx, agt_path_a, 1, 2, &sh);
    if (s != bad[b].want || !strstr(ag_last_error(), bad[b].part))
      fail_msg("byte %d = %llu: %s: %s (want \"%s\")", bad[b].at, (unsigned long long)bad[b].v,
               ag_status_name(s), ag_last_error(), bad[b].part);
    assert_ptr_equal(sh, (ag_shard *)(void *)q);
    assert_int_equal(agt_live_bytes(ctx), l0);
  }
  const struct {
    size_t len;
    const char *part;
  } cut[] = {{10, "shorter than a shard file's header"},
             {100, "truncated: 100 bytes, shorter than its 140-byte header"},
             {140, "the table in"},
             {n - 1, "truncated"}};
  for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++) {
    agt_spit(agt_path_a, buf, cut[c].len);
    ag_shard *sh = NULL;
    agt_err(ag_shard_load(ctx, agt_path_a, 1, 2, &sh), AG_ERR_IO, cut[c].part);
    assert_null(sh);
  }
  buf[n] = 0; /* a byte after its table */
  agt_spit(agt_path_a, buf, n + 1);
  ag_shard *sh = NULL;
  agt_err(ag_shard_load(ctx, agt_path_a, 1, 2, &sh), AG_ERR_IO, "trailing");
  agt_err(ag_shard_load(ctx, path, 0, 2, &sh), AG_ERR_INVALID_ARG, "was written by rank 1 of 2");
  assert_null(sh);
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
  const struct CMUnitTest tests[] = {TEST(models_load),
                                     TEST(replay_table_loads),
                                     TEST(shard_loads),
                                     TEST(dqn_loads),
                                     TEST(td3_loads),
                                     TEST(version_word_checked),
                                     TEST(shard_read_by_legacy_parser)};
#undef TEST
  return agt_run(argc, argv, "legacy_files", tests, sizeof tests / sizeof tests[0]);
}
