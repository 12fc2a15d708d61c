/* bench.h — timing helpers for agrl's benchmarks (not part of the library).
 *
 * A measurement runs a body `iters` times, then waits for the context's
 * queue; the time per call is the wall time over iters (calls pipelined, as
 * a training loop issues them). It is repeated `reps` times after a warm-up
 * and the median, min and max are reported.
 */
#ifndef AGRL_BENCH_H
#define AGRL_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct bench_stat {
  double median, min, max;
} bench_stat;

static inline bench_stat bench_summarize(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  bench_stat s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
  return s;
}

/* One JSON line per row: work, median, spread, and a free-form note. */
static inline void bench_print(const char *work, bench_stat s, const char *note) {
  printf("{\"impl\": \"agrl\", \"work\": \"%s\", \"us\": %.3f, \"min\": %.3f, \"max\": %.3f, \"note\": \"%s\"}\n",
         work, s.median, s.min, s.max, note ? note : "");
  fflush(stdout);
}

#endif /* AGRL_BENCH_H */
