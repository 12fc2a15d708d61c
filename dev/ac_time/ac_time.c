/* ac_time.c — one SAC or TD3 update on the CPU, the composed ops beside the
 * fused call (AG__K_ACGRAD, the fast path; AGRL_CPU_REFERENCE=1: its plain
 * reference), in one process. README.md says how to build and run it.
 *
 * usage: ac_time sac|td3 OBS ACT HIDDEN BATCH [UPDATES] [REPS] [both|fused|composed]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agrl/agrl.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void ok(ag_status s, const char *what) {
  if (s) {
    fprintf(stderr, "ac_time: %s: %s\n", what, ag_last_error());
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: ac_time sac|td3 OBS ACT HIDDEN BATCH [UPDATES] [REPS]\n");
    return 2;
  }
  const ag_ac_algo algo = strcmp(argv[1], "td3") == 0 ? AG_AC_TD3 : AG_AC_SAC;
  const int od = atoi(argv[2]), ad = atoi(argv[3]), hid = atoi(argv[4]), batch = atoi(argv[5]);
  const int upd = argc > 6 ? atoi(argv[6]) : 20, reps = argc > 7 ? atoi(argv[7]) : 9;
  const char *which = argc > 8 ? argv[8] : "both";
  ag_ctx *ctx;
  ok(ag_ctx_create(&ctx, AG_DEVICE_CPU, 0), "context");
  enum { N = 20000 };
  float *obs = malloc(sizeof(float) * N * (size_t)od), *nx = malloc(sizeof(float) * N * (size_t)od);
  float *act = malloc(sizeof(float) * N * (size_t)ad), *rew = malloc(sizeof(float) * N);
  int *term = calloc(N, sizeof(int));
  float lo[64], hi[64];
  for (int i = 0; i < ad; i++) lo[i] = -1.0f, hi[i] = 1.0f;
  uint64_t x = 12345;
  for (size_t k = 0; k < (size_t)N * (size_t)od; k++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    obs[k] = (float)(x >> 40) / 8388608.0f - 1.0f;
    nx[k] = (float)((x >> 20) & 0xfffff) / 524288.0f - 1.0f;
  }
  for (size_t k = 0; k < (size_t)N * (size_t)ad; k++) act[k] = (float)((k * 7919) % 2001) / 1000.0f - 1.0f;
  for (int k = 0; k < N; k++) rew[k] = -(float)(k % 17) / 4.0f;
  ag_ac *ag[2];
  for (int f = 0; f < 2; f++) {
    ag_ac_config c = ag_ac_defaults(algo);
    c.n_hidden = 2, c.hidden[0] = c.hidden[1] = hid;
    c.batch_size = batch, c.buffer_size = N, c.learning_starts = 0, c.fused = f;
    ok(ag_ac_create(ctx, od, ad, lo, hi, N, &c, &ag[f]), "agent");
    ok(ag_ac_store(ag[f], obs, act, rew, nx, term, NULL, N), "store");
    if (ag_ac_fused(ag[f]) != f) {
      fprintf(stderr, "ac_time: the agent of fused = %d runs the %s\n", f, f ? "composed ops" : "fused call");
      return 1;
    }
  }
  double med[2] = {0.0, 0.0};
  for (int f = 0; f < 2; f++) {
    if (strcmp(which, f ? "composed" : "fused") == 0) continue;
    double t[64];
    float l[2];
    ok(ag_ac_train(ag[f], upd, l), "train"); /* the warm-up: recordings made */
    for (int r = 0; r < reps && r < 64; r++) {
      const double t0 = now_s();
      ok(ag_ac_train(ag[f], upd, l), "train");
      t[r] = (now_s() - t0) / upd;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_d);
    med[f] = t[reps / 2];
  }
  printf(
      "%s obs %d act %d hidden %d-%d batch %d: composed %.3f ms, fused %.3f ms (%s), composed/fused %.2f\n",
      argv[1], od, ad, hid, hid, batch, 1e3 * med[0], 1e3 * med[1],
      getenv("AGRL_CPU_REFERENCE") ? "reference" : "fast path", med[0] / med[1]);
  for (int f = 0; f < 2; f++) ag_ac_free(ag[f]);
  ag_ctx_free(ctx);
  free(obs), free(nx), free(act), free(rew), free(term);
  return 0;
}
