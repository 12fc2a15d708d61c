/* vk_write_probe.c — where the time of a small waited-for write goes on a
 * device: the write alone, the wait alone, both, and a sync with nothing
 * queued. Build against a build directory B:
 *   cc -O2 dev/vk_write_probe.c -Iinclude -IB/include B/libagrl.so -o /tmp/wp
 * Usage: wp [vulkan|cuda|cpu] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agrl/agrl.h"

#include "probe_time.h"

#define N 2000

int main(int argc, char **argv) {
  const char *dev = argc > 1 ? argv[1] : "vulkan";
  ag_device_kind kind = !strcmp(dev, "cuda")  ? AG_DEVICE_CUDA
                        : !strcmp(dev, "cpu") ? AG_DEVICE_CPU
                                              : AG_DEVICE_VULKAN;
  ag_ctx *ctx;
  ag_buffer *buf;
  if (ag_ctx_create(&ctx, kind, 0) || ag_buffer_create(ctx, 42, 100000, AG_F32, &buf)) {
    fprintf(stderr, "%s\n", ag_last_error());
    return 1;
  }
  float data[42];
  for (int i = 0; i < 42; i++) data[i] = (float)i;
  static double w[N], s[N], e[N];
  for (int it = 0; it < N; it++) {
    double t0 = now();
    if (ag_buffer_write(buf, data, AG_F32, 42, 1, it % 1000)) return 1;
    double t1 = now();
    if (ag_buffer_wait(buf)) return 1;
    double t2 = now();
    if (ag_ctx_sync(ctx)) return 1; /* nothing queued now */
    double t3 = now();
    w[it] = t1 - t0, s[it] = t2 - t1, e[it] = t3 - t2;
  }
  qsort(w, N, sizeof *w, cmpd);
  qsort(s, N, sizeof *s, cmpd);
  qsort(e, N, sizeof *e, cmpd);
  printf("%s: write %.2f us, its wait %.2f us (p90 %.2f), an idle sync %.2f us\n", dev, w[N / 2], s[N / 2],
         s[9 * N / 10], e[N / 2]);
  double t0 = now();
  for (int it = 0; it < N; it++)
    if (ag_buffer_write(buf, data, AG_F32, 42, 1, it % 1000)) return 1;
  double t1 = now();
  ag_buffer_wait(buf);
  printf("%s: %d writes queued, %.2f us each; the wait after them %.2f us\n", dev, N, (t1 - t0) / N,
         now() - t1);
  ag_buffer_free(buf);
  ag_ctx_free(ctx);
  return 0;
}
