/* cpu_sample_parts.c — the CPU sample + gather of the mujoco row in parts,
 * each recorded and replayed 2000 times (median of 9): 256 draws alone, the
 * gather of 256 fixed columns (in cache after the first call: the work
 * without the misses), and draws + gather of fresh random columns (the
 * bench row). MODE=d|g|b runs one part 20 times (for perf record).
 * Build (after a CPU build in build-cpu):
 *   cc -O2 -Iinclude dev/cpu_sample_parts/cpu_sample_parts.c -o cpu_sample_parts build-cpu/libagrl.a \
 *      -ldl -lm -lpthread
 * Run with OPENBLAS_NUM_THREADS=1 (otherwise OpenBLAS's idle threads spin). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "agrl/agrl.h"
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
typedef struct {
  ag_buffer *buf;
  ag_rng *rng;
  ag_tensor *idx;
} J;
static ag_status s_draw(ag_ctx *c, void *u) {
  J *j = u;
  ag_tensor *i;
  (void)c;
  return ag_randint(j->rng, 1000000, 256, AG_I32, &i);
}
static ag_status s_gather(ag_ctx *c, void *u) {
  J *j = u;
  ag_tensor *t;
  (void)c;
  return ag_get_rows_dev(j->buf, j->idx, &t);
}
static ag_status s_both(ag_ctx *c, void *u) {
  J *j = u;
  ag_tensor *i, *t;
  (void)c;
  ag_status s = ag_randint(j->rng, 1000000, 256, AG_I32, &i);
  return s ? s : ag_get_rows_dev(j->buf, i, &t);
}
static int cmp(const void *a, const void *b) {
  double x = *(double *)a, y = *(double *)b;
  return x < y ? -1 : x > y;
}
static void timeit(const char *name, ag_capture *cp) {
  double v[9];
  for (int r = -2; r < 9; r++) {
    double t0 = now();
    for (int i = 0; i < 2000; i++) ag_capture_replay(cp);
    double t = (now() - t0) / 2000;
    if (r >= 0) v[r] = t;
  }
  qsort(v, 9, 8, cmp);
  printf("%-20s %.2f us (min %.2f)\n", name, v[4], v[0]);
}
int main() {
  ag_ctx *ctx;
  ag_ctx_create(&ctx, AG_DEVICE_CPU, 0);
  J j;
  ag_buffer_create(ctx, 42, 1000000, AG_F32, &j.buf);
  float *d = malloc(42 * 100000 * 4);
  for (int i = 0; i < 42 * 100000; i++) d[i] = i;
  for (int k = 0; k < 10; k++) ag_buffer_write(j.buf, d, AG_F32, 42, 100000, k * 100000);
  ag_rng_create(ctx, 3, &j.rng);
  int32_t ix[256];
  unsigned long x = 88172645463325252ull;
  for (int i = 0; i < 256; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ix[i] = x % 1000000;
  }
  ag_tensor_create(ctx, 256, 1, AG_I32, ix, &j.idx);
  ag_capture *cd, *cg, *cb;
  ag_capture_create(ctx, s_draw, &j, &cd);
  ag_capture_create(ctx, s_gather, &j, &cg);
  ag_capture_create(ctx, s_both, &j, &cb);
  const char *m = getenv("MODE");
  for (int rep = 0; rep < (m ? 20 : 2); rep++) {
    if (!m || m[0] == 0x64) timeit("draw 256", cd);
    if (!m || m[0] == 0x67) timeit("gather fixed idx", cg);
    if (!m || m[0] == 0x62) timeit("draw + gather", cb);
  }
  return 0;
}
