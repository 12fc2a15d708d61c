/* vk_replay_cost.c — what one replay of a recorded step costs the host on
 * a Vulkan device: a step of K small elementwise ops (K dispatches) is
 * recorded, then replayed R times. Prints, in microseconds per replay, the
 * host's time inside ag_capture_replay (the replay queued, a sync after
 * each: the device idle when it starts) and the whole round trip (replay
 * and sync), median of 9 rounds. Built and run by run.sh against two
 * builds of libagrl.a. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "agrl/agrl.h"

#define CK(x)                                           \
  do {                                                  \
    ag_status s_ = (x);                                 \
    if (s_) {                                           \
      fprintf(stderr, "%s: %s\n", #x, ag_last_error()); \
      exit(1);                                          \
    }                                                   \
  } while (0)

typedef struct job {
  ag_tensor *x;
  int k;
} job;

static ag_status step(ag_ctx *ctx, void *user) {
  (void)ctx;
  job *j = user;
  ag_tensor *y = j->x;
  for (int i = 0; i < j->k; i++) {
    ag_status s = ag_add(y, j->x, &y);
    if (s) return s;
  }
  return AG_OK;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const int k = argc > 1 ? atoi(argv[1]) : 64, reps = argc > 2 ? atoi(argv[2]) : 200;
  ag_ctx *ctx;
  CK(ag_ctx_create(&ctx, AG_DEVICE_VULKAN, 0));
  float v[64] = {0};
  job j = {NULL, k};
  CK(ag_tensor_create(ctx, 64, 1, AG_F32, v, &j.x));
  ag_capture *cap;
  CK(ag_capture_create(ctx, step, &j, &cap));
  double host[9], trip[9];
  for (int round = 0; round < 11; round++) {
    double in = 0, t0 = now();
    for (int i = 0; i < reps; i++) {
      const double a = now();
      CK(ag_capture_replay(cap));
      in += now() - a;
      CK(ag_ctx_sync(ctx));
    }
    const double all = now() - t0;
    if (round >= 2) host[round - 2] = 1e6 * in / reps, trip[round - 2] = 1e6 * all / reps;
  }
  qsort(host, 9, sizeof *host, cmp);
  qsort(trip, 9, sizeof *trip, cmp);
  printf("%s: %d dispatches a step: replay call %.2f us, replay + sync %.2f us\n", ag_ctx_device_name(ctx), k,
         host[4], trip[4]);
  ag_capture_free(cap);
  ag_tensor_free(j.x);
  ag_ctx_free(ctx);
  return 0;
}
