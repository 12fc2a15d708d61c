/* probe_time.h — the clock and the sort of the dev probes' medians, and
 * OK(call): the probe stops with agrl's message when an agrl call fails. */
#ifndef AGRL_DEV_PROBE_TIME_H
#define AGRL_DEV_PROBE_TIME_H
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define OK(e)                                                  \
  do {                                                         \
    if ((e) != AG_OK) {                                        \
      fprintf(stderr, "%s failed: %s\n", #e, ag_last_error()); \
      exit(1);                                                 \
    }                                                          \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
#endif
