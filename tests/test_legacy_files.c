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
 * through the container's reader, which hands it to the legacy parser. The
 * TD3 agent is also checked to go through the parser of 0.1.0's layouts
 * (agfile_legacy.c), to hold the recipe's values and to act and train on as
 * the one made again does; its damaged copies are refused.
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

/* ---- the TD3 agent (AGRLACR1) ---- */

/* The bytes of the 0.1.0 TD3 file (*n of them; freed by the caller). */
static unsigned char *td3_bytes(size_t *n) {
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_TD3);
  return agt_slurp(path, n);
}

/* The file goes through agfile_legacy.c: the keys and sections of kind "ac"
 * at ac.version 1, as the file's header has them. */
static void td3_parsed_as_container(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  uint64_t left = 0;
  ag__agf form;
  agt_ok(ag__stream_left(f, "test", path, "a file", &left));
  agt_ok(ag__agf_read_head(&form, f, left, "test", path));
  fclose(f);
  assert_non_null(strstr(form.format, "AGRLACR1"));
  const char *str = NULL;
  int64_t v = 0;
  agt_ok(ag__agf_get_str(&form, "kind", &str, "test", path));
  assert_string_equal(str, "ac");
  agt_ok(ag__agf_get_str(&form, "ac.algo", &str, "test", path));
  assert_string_equal(str, "td3");
  agt_ok(ag__agf_get_i64(&form, "ac.version", 0, 9, &v, "test", path));
  assert_int_equal(v, 1);
  agt_ok(ag__agf_get_i64(&form, "ac.updates", 0, 99, &v, "test", path));
  assert_int_equal(v, 3);
  const int64_t *sizes = NULL, want_sizes[4] = {3, 6, 3, 2};
  uint32_t ns = 0;
  agt_ok(ag__agf_get_i64s(&form, "ac.sizes", 10, &sizes, &ns, "test", path));
  assert_int_equal(ns, 4);
  assert_memory_equal(sizes, want_sizes, sizeof want_sizes);
  /* 24 L + 5 tensors of a TD3 of L = 3 layers, the noise, the run state */
  assert_int_equal(form.n_sections, 24 * 3 + 5 + 2);
  assert_string_equal(form.sections[0].name, "actor.W0");
  assert_int_equal(form.sections[0].dims[0], 6);
  assert_int_equal(form.sections[0].dims[1], 3);
  assert_string_equal(form.sections[form.n_sections - 2].name, "noise");
  assert_int_equal(form.sections[form.n_sections - 2].bytes, 0);
  assert_string_equal(form.sections[form.n_sections - 1].name, "run_state");
  assert_int_equal(form.sections[form.n_sections - 1].bytes, 7);
  assert_true(form.total < left); /* its replay table follows */
  ag__agf_free(&form);
}

/* Loaded, it is the agent made again on the same context: its sizes,
 * bounds, configuration, counters and table, the file it saves, and the
 * actions and losses it gives from there on, bit for bit. */
static void td3_loads(void **state) {
  (void)state;
  SAVE_REFERENCE(ag_ac, legacy_td3, ag_ac_save, ag_ac_free);
  ag_ctx *ctx = agt_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_TD3);
  td3_parsed_as_container(path);
  ag_ac *a = NULL;
  agt_ok(ag_ac_load(ctx, path, &a));
  size_t n = 0;
  const void *rs = ag_ac_run_state(a, &n);
  assert_int_equal(n, 7);
  assert_memory_equal(rs, "td3 run", 7);
  agt_ok(ag_ac_save(a, agt_path_a));
  agt_assert_same_files(agt_path_a, agt_path_b);
  ag_ac *ref = legacy_td3(ctx);
  const ag_ac_config *c = ag_ac_get_config(a), *rc = ag_ac_get_config(ref);
  assert_int_equal(c->algo, AG_AC_TD3);
  assert_int_equal(c->n_hidden, 2);
  assert_int_equal(c->hidden[0], 6);
  assert_int_equal(c->hidden[1], 3);
  assert_int_equal(c->batch_size, 4);
  assert_int_equal(c->buffer_size, 12);
  assert_int_equal(c->seed, 9);
  assert_int_equal(c->policy_delay, rc->policy_delay);
  assert_memory_equal(&c->actor_lr, &rc->actor_lr, sizeof(float));
  assert_memory_equal(&c->target_noise, &rc->target_noise, sizeof(float));
  assert_memory_equal(&c->target_entropy, &rc->target_entropy, sizeof(float));
  assert_int_equal(ag_ac_act_dim(a), 2);
  assert_int_equal(ag_ac_total_steps(a), 1000);
  const float lo[2] = {-1.0f, 0.0f}, hi[2] = {1.0f, 0.5f};
  assert_memory_equal(ag_ac_low(a), lo, sizeof lo);
  assert_memory_equal(ag_ac_high(a), hi, sizeof hi);
  assert_int_equal(ag_ac_updates(a), 3);
  assert_int_equal(ag_replay_size(ag_ac_replay(a)), 12);
  assert_int_equal(ag_replay_position(ag_ac_replay(a)), 4);
  float obs[3 * 4], xa[2 * 4], xr[2 * 4], la[2], lr[2];
  uint64_t sd = 5;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 12; i++) obs[i] = legacy_val(&sd);
    for (int explore = 0; explore < 2; explore++) {
      agt_ok(ag_ac_act(a, obs, 4, explore, xa));
      agt_ok(ag_ac_act(ref, obs, 4, explore, xr));
      assert_memory_equal(xa, xr, sizeof xa);
    }
    agt_ok(ag_ac_act_random(a, 4, xa));
    agt_ok(ag_ac_act_random(ref, 4, xr));
    assert_memory_equal(xa, xr, sizeof xa);
    agt_ok(ag_ac_train(a, 3, la));
    agt_ok(ag_ac_train(ref, 3, lr));
    assert_memory_equal(la, lr, sizeof la);
  }
  ag_ac_free(ref);
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

/* A 0.1.0 DQN file whose first tensor entry (byte 488) claims 2^40 x 2^40
 * values, or 2^20 x 2^39 (each within the section limit, together past the
 * file), under a sound CRC: refused before anything is made. */
static void dqn_tensor_sizes_past_the_file_are_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  char path[1024];
  legacy_path(path, sizeof path, LEGACY_DQN);
  size_t n = 0;
  unsigned char *f = agt_slurp(path, &n), *g = malloc(n);
  assert_non_null(g);
  assert_memory_equal(f, "AGRLDQN1", 8);
  const uint32_t H = ag__get32(f + 12);
  static const struct {
    uint64_t rows, cols;
    const char *part;
  } cases[] = {{(uint64_t)1 << 40, (uint64_t)1 << 40, "tensor 0's entry"},
               {(uint64_t)1 << 20, (uint64_t)1 << 39, "shorter than its tensors up to tensor 0"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    memcpy(g, f, n);
    ag__put64(g + 488, cases[k].rows);
    ag__put64(g + 496, cases[k].cols);
    ag__put32(g + H - 4, ag__crc32_add(0, g, H - 4));
    agt_spit(agt_path_a, g, n);
    ag_dqn *out = (ag_dqn *)&n;
    ag_status s = ag_dqn_load(ctx, agt_path_a, &out);
    if (s != AG_ERR_IO || !strstr(ag_last_error(), cases[k].part) || out != (ag_dqn *)&n)
      fail_msg("case %zu: %s: %s", k, ag_status_name(s), ag_last_error());
  }
  free(f);
  free(g);
  ag_ctx_free(ctx);
}

/* The 0.1.0 TD3 file damaged: its version word 2 (a newer format) or 0, a
 * changed header byte, a cut, a noise length that is not a whole number of
 * copies and a tensor count that is not the configuration's (each under a
 * sound CRC): refused by the legacy parser with a clear message, nothing
 * handed out. */
static void td3_refusals(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  size_t n = 0;
  unsigned char *f = td3_bytes(&n), *g = malloc(n);
  assert_non_null(g);
  assert_memory_equal(f, "AGRLACR1", 8);
  const uint32_t H = ag__get32(f + 12);
  assert_int_equal(H, 900 + 24 * ag__get32(f + 312));
  static const struct {
    size_t at;
    uint32_t v;
    int crc;
    ag_status want;
    const char *part;
  } cases[] = {{8, 2, 0, AG_ERR_UNSUPPORTED, "format version 2"},
               {8, 0, 0, AG_ERR_IO, "format version 0"},
               {100, 0x12345678u, 0, AG_ERR_IO, "CRC-32"},
               {296, 3, 1, AG_ERR_IO, "whole number of copies"},
               {48, 0, 1, AG_ERR_IO, "tensors, where"}, /* a SAC's count differs */
               {52, 9, 1, AG_ERR_IO, "n_hidden"},
               {840, 1, 1, AG_ERR_IO, "reserved"},
               {320 + 4 * 2, 1, 1, AG_ERR_IO, "unused bound"},
               {304, 1u << 31, 1, AG_ERR_IO, "run state"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    memcpy(g, f, n);
    ag__put32(g + cases[k].at, cases[k].v);
    if (cases[k].crc) ag__put32(g + H - 4, ag__crc32_add(0, g, H - 4));
    agt_spit(agt_path_a, g, n);
    ag_ac *out = (ag_ac *)&n;
    ag_status s = ag_ac_load(ctx, agt_path_a, &out);
    if (s != cases[k].want || !strstr(ag_last_error(), cases[k].part) || out != (ag_ac *)&n)
      fail_msg("case %zu: %s: %s", k, ag_status_name(s), ag_last_error());
  }
  const size_t cuts[3] = {100, H + 50, n - 30}; /* in its header, its tensors, its table */
  for (int k = 0; k < 3; k++) {
    agt_spit(agt_path_a, f, cuts[k]);
    ag_ac *out = (ag_ac *)&n;
    ag_status s = ag_ac_load(ctx, agt_path_a, &out);
    if (s != AG_ERR_IO || !strstr(ag_last_error(), "truncated") || out != (ag_ac *)&n)
      fail_msg("cut at %zu: %s: %s", cuts[k], ag_status_name(s), ag_last_error());
  }
  free(f);
  free(g);
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
                                     TEST(td3_refusals),
                                     TEST(dqn_tensor_sizes_past_the_file_are_refused),
                                     TEST(version_word_checked),
                                     TEST(shard_read_by_legacy_parser)};
#undef TEST
  return agt_run(argc, argv, "legacy_files", tests, sizeof tests / sizeof tests[0]);
}
