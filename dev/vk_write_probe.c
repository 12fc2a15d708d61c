/* vk_write_probe.c — where the time of a small waited-for write goes on a
 * device: the write alone, the wait alone, both, and a sync with nothing
 * queued. Build against a build directory B:
 *   cc -O2 dev/vk_write_probe.c -Iinclude -IB/include B/libagrl.so -o /tmp/wp
 * Usage: wp [vulkan|cuda|cpu] [columns] [wrap] [MB of another buffer] [1: free it first] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agrl/agrl.h"

#include "probe_time.h"

#define N 2000

int main(int argc, char **argv) {
  const char *dev = argc > 1 ? argv[1] : "vulkan";
  const int64_t cap = argc > 2 ? atoll(argv[2]) : 100000; /* the buffer's columns */
  const int64_t wrap = argc > 3 ? atoll(argv[3]) : 1000;  /* writes go to columns 0 .. wrap-1 in turn */
  const int64_t big = argc > 4 ? atoll(argv[4]) : 0;      /* MB of another buffer, written once, kept */
  const int freed = argc > 5 && atoi(argv[5]);            /* ... or freed before the writes */
  ag_device_kind kind = !strcmp(dev, "cuda")  ? AG_DEVICE_CUDA
                        : !strcmp(dev, "cpu") ? AG_DEVICE_CPU
                                              : AG_DEVICE_VULKAN;
  ag_ctx *ctx;
  ag_buffer *buf;
  if (ag_ctx_create(&ctx, kind, 0) || ag_buffer_create(ctx, 42, cap, AG_F32, &buf)) {
    fprintf(stderr, "%s\n", ag_last_error());
    return 1;
  }
  if (big > 0) {
    ag_buffer *b2;
    float *z = calloc((size_t)big << 20, 1);
    if (!z || ag_buffer_create(ctx, 256, big * 1024, AG_F32, &b2) ||
        ag_buffer_write(b2, z, AG_F32, 256, big * 1024, 0) || ag_buffer_wait(b2))
      return 1;
    free(z);
    if (freed) ag_buffer_free(b2);
  }
  float data[42];
  for (int i = 0; i < 42; i++) data[i] = (float)i;
  static double w[N], s[N], e[N];
  for (int it = 0; it < N; it++) {
    double t0 = now();
    if (ag_buffer_write(buf, data, AG_F32, 42, 1, it % wrap)) return 1;
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
  printf(
      "%s, %lld columns, writes over %lld: write %.2f us, its wait %.2f us (p90 %.2f), an idle sync %.2f "
      "us\n",
      dev, (long long)cap, (long long)wrap, w[N / 2], s[N / 2], s[9 * N / 10], e[N / 2]);
  double t0 = now();
  for (int it = 0; it < N; it++)
    if (ag_buffer_write(buf, data, AG_F32, 42, 1, it % wrap)) return 1;
  double t1 = now();
  ag_buffer_wait(buf);
  printf("%s: %d writes queued, %.2f us each; the wait after them %.2f us\n", dev, N, (t1 - t0) / N,
         now() - t1);
  ag_buffer_free(buf);
  ag_ctx_free(ctx);
  return 0;
}
