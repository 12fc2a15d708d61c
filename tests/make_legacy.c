/* make_legacy.c — writes tests/data/legacy/: one small file of each format
 * that agrl 0.1.0 wrote (AGRLMLP2, AGRLRPL1 with a prioritized sampler,
 * AGRLSHD1, AGRLDQN1, AGRLACR1 of a TD3 agent), made on the CPU from the
 * objects of legacy_objects.h. Those files were written once, by the
 * library of that release, and are committed; test_legacy_files.c loads
 * them with the current library and compares them with the same objects
 * made again. The program stays so that the objects' recipe is on record;
 * run with the current library it writes the current format.
 * usage: make_legacy DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEGACY_OK(call) legacy_ok((call), #call)
static void legacy_ok(int s, const char *call);
#include "legacy_objects.h"

static void legacy_ok(int s, const char *call) {
  if (s == 0) return;
  fprintf(stderr, "make_legacy: %s failed: %s\n", call, ag_last_error());
  exit(1);
}

/* 0.1.0 no longer wrote version 1 of the model files; this one is the
 * version-2 file laid out as version 1 (agrl/nn.h of that release): no
 * reserved word, no CRCs. */
static void mlp_v1_from_v2(const char *v2, const char *v1) {
  unsigned char b[4096], o[4096];
  FILE *f = fopen(v2, "rb");
  size_t n = f ? fread(b, 1, sizeof b, f) : 0;
  if (f) fclose(f);
  if (n < 24 || n == sizeof b) legacy_ok(1, "reading the version-2 model file");
  if (memcmp(b, "AGRLMLP2", 8)) { /* a library after 0.1.0: its own format */
    fprintf(stderr, "make_legacy: the model file is not of version 2; %s not written\n", v1);
    return;
  }
  uint32_t ns = (uint32_t)b[8] | (uint32_t)b[9] << 8, L = ns - 1;
  size_t at = 0, in = 24 + 8 * (size_t)ns + 4;
  memcpy(o, b, 20), o[7] = '1', at = 20;
  memcpy(o + at, b + 24, 8 * (size_t)ns), at += 8 * (size_t)ns;
  for (uint32_t l = 0; l < L; l++)
    for (int k = 0; k < 2; k++) {
      uint64_t rows = 0, in_size = 0;
      for (int i = 0; i < 8; i++) {
        rows |= (uint64_t)b[24 + 8 * (l + 1) + i] << 8 * i;
        in_size |= (uint64_t)b[24 + 8 * l + i] << 8 * i;
      }
      uint64_t cols = k == 0 ? in_size : 1;
      size_t bytes = (size_t)(rows * cols * 4);
      memcpy(o + at, b + in, bytes), at += bytes, in += bytes + 4;
    }
  if (in != n) legacy_ok(1, "laying out the version-1 model file");
  f = fopen(v1, "wb");
  if (!f || fwrite(o, 1, at, f) != at || fclose(f)) legacy_ok(1, "writing the version-1 model file");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_legacy DIR\n");
    return 2;
  }
  ag_ctx *ctx;
  LEGACY_OK(ag_ctx_create(&ctx, AG_DEVICE_CPU, 0));
  char path[LEGACY_N][1024];
  for (int i = 0; i < LEGACY_N; i++) snprintf(path[i], sizeof path[i], "%s/%s", argv[1], legacy_files[i]);
  ag_mlp *m = legacy_mlp(ctx);
  LEGACY_OK(ag_mlp_save(m, path[LEGACY_MLP]));
  ag_mlp_free(m);
  mlp_v1_from_v2(path[LEGACY_MLP], path[LEGACY_MLP_V1]);
  ag_replay *r = legacy_replay(ctx);
  LEGACY_OK(ag_replay_save(r, path[LEGACY_REPLAY]));
  ag_replay_free(r);
  ag_shard *sh = legacy_shard(ctx);
  LEGACY_OK(ag_shard_save(sh, path[LEGACY_SHARD]));
  ag_shard_free(sh);
  ag_dqn *d = legacy_dqn(ctx);
  LEGACY_OK(ag_dqn_save(d, path[LEGACY_DQN]));
  ag_dqn_free(d);
  ag_ac *a = legacy_td3(ctx);
  LEGACY_OK(ag_ac_save(a, path[LEGACY_TD3]));
  ag_ac_free(a);
  ag_ctx_free(ctx);
  return 0;
}
