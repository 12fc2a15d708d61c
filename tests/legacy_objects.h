/* legacy_objects.h — the small objects whose files tests/data/legacy/ holds:
 * a network, a prioritized replay table, a shard, a DQN and a TD3 agent,
 * each made from fixed seeds and fixed data through the public API only, so
 * that make_legacy.c (which wrote the files with agrl 0.1.0) and
 * test_legacy_files.c (which loads them) make the same objects.
 * Every call's status is passed to LEGACY_OK, which the includer defines.
 */
#ifndef AGRL_TESTS_LEGACY_OBJECTS_H
#define AGRL_TESTS_LEGACY_OBJECTS_H

#include <stdint.h>

#include "agrl/agrl.h"

#ifndef LEGACY_OK
#error "define LEGACY_OK(call) before including legacy_objects.h"
#endif

/* The files of tests/data/legacy/, each with what it holds. */
static const char *const legacy_files[] = {"mlp_v2.agrl", "mlp_v1.agrl", "replay_per.agrl",
                                           "shard.agrl",  "dqn.agrl",    "td3.agrl"};
enum { LEGACY_MLP, LEGACY_MLP_V1, LEGACY_REPLAY, LEGACY_SHARD, LEGACY_DQN, LEGACY_TD3, LEGACY_N };

/* A small deterministic stream of numbers in [-1, 1). */
static inline float legacy_val(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

/* 3 -> 5 -> 2, tanh hidden, no last activation, seed 7. */
static inline ag_mlp *legacy_mlp(ag_ctx *ctx) {
  const int64_t sizes[3] = {3, 5, 2};
  ag_mlp *m = NULL;
  LEGACY_OK(ag_mlp_create(ctx, sizes, 3, AG_ACT_TANH, AG_ACT_NONE, 7, &m));
  return m;
}

static const ag_field legacy_fields[3] = {{"obs", 3, AG_F32}, {"act", 1, AG_I32}, {"rew", 1, AG_F32}};

/* k transitions from stream s into r (or sh when r is NULL). */
static inline void legacy_add(ag_replay *r, ag_shard *sh, uint64_t *s, int64_t k) {
  float obs[3 * 16], rew[16];
  int32_t act[16];
  for (int64_t j = 0; j < k; j++) {
    for (int i = 0; i < 3; i++) obs[3 * j + i] = legacy_val(s);
    act[j] = (int32_t)(*s >> 33) % 4;
    rew[j] = legacy_val(s);
  }
  const void *d[3] = {obs, act, rew};
  if (r)
    LEGACY_OK(ag_replay_add(r, d, k));
  else
    LEGACY_OK(ag_shard_add(sh, d, k));
}

/* A table of 24 columns stored as f16, PER alpha 0.6, wrapped (30 added),
 * some priorities set. */
static inline ag_replay *legacy_replay(ag_ctx *ctx) {
  ag_replay *r = NULL;
  ag_per *p = NULL;
  LEGACY_OK(ag_replay_create(ctx, legacy_fields, 3, 24, AG_F16, 2, &r));
  LEGACY_OK(ag_per_create(r, 0.6f, &p));
  uint64_t s = 11;
  legacy_add(r, NULL, &s, 16);
  legacy_add(r, NULL, &s, 14);
  const int64_t idx[4] = {0, 3, 9, 23};
  const float pr[4] = {0.5f, 2.0f, 1.25f, 3.5f};
  LEGACY_OK(ag_per_update_host(p, idx, pr, 4));
  return r;
}

/* Rank 1 of 2 of a table of 16 global columns, u8 storage of small whole
 * values is not used: f32, 10 global transitions added. */
static inline ag_shard *legacy_shard(ag_ctx *ctx) {
  ag_shard *sh = NULL;
  LEGACY_OK(ag_shard_create(ctx, legacy_fields, 3, 16, AG_F32, 2, 1, 2, &sh));
  uint64_t s = 23;
  legacy_add(NULL, sh, &s, 10);
  return sh;
}

/* A DQN of 4 observations, 3 actions, hidden 8, a table of 16 (wrapped),
 * trained 5 steps, with a run state. */
static inline ag_dqn *legacy_dqn(ag_ctx *ctx) {
  ag_dqn_config c = ag_dqn_defaults();
  c.n_hidden = 1;
  c.hidden[0] = 8;
  c.batch_size = 4;
  c.buffer_size = 16;
  c.learning_starts = 0;
  c.seed = 5;
  c.n_step = 1;
  ag_dqn *d = NULL;
  LEGACY_OK(ag_dqn_create(ctx, 4, 3, 1000, &c, &d));
  uint64_t s = 31;
  float obs[4 * 10], next[4 * 10], rew[10];
  int32_t act[10];
  int term[10];
  for (int round = 0; round < 2; round++) {
    for (int j = 0; j < 10; j++) {
      for (int i = 0; i < 4; i++) obs[4 * j + i] = legacy_val(&s), next[4 * j + i] = legacy_val(&s);
      act[j] = (int32_t)(s >> 35) % 3;
      rew[j] = legacy_val(&s);
      term[j] = j == 7;
    }
    LEGACY_OK(ag_dqn_store(d, obs, act, rew, next, term, 10));
  }
  float loss;
  LEGACY_OK(ag_dqn_train(d, 5, &loss));
  LEGACY_OK(ag_dqn_set_run_state(d, "dqn run", 7));
  return d;
}

/* A TD3 agent of 3 observations, 2 actions, hidden 6 and 3, a table of 12
 * (wrapped), trained 3 steps, with a run state. */
static inline ag_ac *legacy_td3(ag_ctx *ctx) {
  static const float lo[2] = {-1.0f, 0.0f}, hi[2] = {1.0f, 0.5f};
  ag_ac_config c = ag_ac_defaults(AG_AC_TD3);
  c.n_hidden = 2;
  c.hidden[0] = 6;
  c.hidden[1] = 3;
  c.batch_size = 4;
  c.buffer_size = 12;
  c.learning_starts = 0;
  c.seed = 9;
  ag_ac *a = NULL;
  LEGACY_OK(ag_ac_create(ctx, 3, 2, lo, hi, 1000, &c, &a));
  uint64_t s = 41;
  float obs[3 * 8], next[3 * 8], act[2 * 8], rew[8];
  int term[8], trunc[8];
  for (int round = 0; round < 2; round++) {
    for (int j = 0; j < 8; j++) {
      for (int i = 0; i < 3; i++) obs[3 * j + i] = legacy_val(&s), next[3 * j + i] = legacy_val(&s);
      act[2 * j] = legacy_val(&s), act[2 * j + 1] = 0.25f + 0.25f * legacy_val(&s);
      rew[j] = legacy_val(&s);
      term[j] = j == 5, trunc[j] = 0;
    }
    LEGACY_OK(ag_ac_store(a, obs, act, rew, next, term, trunc, 8));
  }
  float losses[2];
  LEGACY_OK(ag_ac_train(a, 3, losses));
  LEGACY_OK(ag_ac_set_run_state(a, "td3 run", 7));
  return a;
}

#endif /* AGRL_TESTS_LEGACY_OBJECTS_H */
