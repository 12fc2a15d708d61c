/* gather_floor.c — the floor of a CPU gather of 256 random transitions
 * (168-byte columns of a 1M-column table, as agrl's mujoco rows), by
 * prefetch hint (t0: into L1; t1, t2: into L2; nta) and distance in
 * columns; l2first: the first columns into L2 up front, then 8 ahead into
 * L1. Median and minimum of 1500 gathers, fresh random indices each.
 * With an argument: the first N columns into L2 at once (a burst), then a
 * prefetch a fixed distance ahead, for N and the distance in a grid; with a
 * second argument the table is a 2 MB-aligned mapping advised into 2 MB
 * pages (the process's AnonHugePages is printed: whether they were given).
 * Build: cc -O2 -o gather_floor dev/gather_floor/gather_floor.c
 * Run:   ./gather_floor | ./gather_floor burst | ./gather_floor burst huge */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
static uint64_t x = 88172645463325252ull;
static uint64_t rnd() {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}
#define ROWS 42
static float *t;
static float out[256 * ROWS];
static int32_t idx[256];
#define PF(hint)                                                           \
  static void run_##hint(int ahead) {                                      \
    for (int j = 0; j < 256; j++) {                                        \
      if (j + ahead < 256) {                                               \
        const char *p = (const char *)(t + (size_t)idx[j + ahead] * ROWS); \
        const char *q = (const char *)((uintptr_t)p & ~63ull);             \
        for (; q < p + ROWS * 4; q += 64) __builtin_prefetch(q, 0, hint);  \
      }                                                                    \
      memcpy(out + j * ROWS, t + (size_t)idx[j] * ROWS, ROWS * 4);         \
    }                                                                      \
  }
// clang-format off
PF(3)
PF(2)
PF(1)
PF(0)
// clang-format on
/* prefetch the first `ahead` to L2 up front, then distance 8 to L1 */
static void run_first(int ahead) {
  for (int j = 0; j < ahead && j < 256; j++) {
    const char *p = (const char *)(t + (size_t)idx[j] * ROWS);
    const char *q = (const char *)((uintptr_t)p & ~63ull);
    for (; q < p + ROWS * 4; q += 64) __builtin_prefetch(q, 0, 2);
  }
  run_3(8);
}
static int burst_n;
static void run_burst(int ahead) { /* the first burst_n into L2 at once, then `ahead` ahead into L2 */
  for (int j = 0; j < burst_n && j < 256; j++) {
    const char *p = (const char *)(t + (size_t)idx[j] * ROWS);
    const char *q = (const char *)((uintptr_t)p & ~63ull);
    for (; q < p + ROWS * 4; q += 64) __builtin_prefetch(q, 0, 2);
  }
  for (int j = 0; j < 256; j++) {
    if (j + ahead < 256 && j + ahead >= burst_n) {
      const char *p = (const char *)(t + (size_t)idx[j + ahead] * ROWS);
      const char *q = (const char *)((uintptr_t)p & ~63ull);
      for (; q < p + ROWS * 4; q += 64) __builtin_prefetch(q, 0, 2);
    }
    memcpy(out + j * ROWS, t + (size_t)idx[j] * ROWS, ROWS * 4);
  }
}
int main(int argc, char **argv) {
  int64_t cap = 1000000;
  if (argc > 2) {
    size_t sz = ((size_t)cap * ROWS * 4 + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    char *m = mmap(NULL, sz + (2u << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    m = (char *)(((uintptr_t)m + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
    int rc = madvise(m, sz, MADV_HUGEPAGE);
    printf("madvise rc %d\n", rc);
    t = (float *)m;
  } else
    t = aligned_alloc(64, cap * ROWS * 4);
  for (int64_t i = 0; i < cap * ROWS; i++) t[i] = (float)i;
  struct {
    const char *name;
    void (*f)(int);
  } fs[] = {{"t0", run_3}, {"t1", run_2}, {"t2", run_1}, {"nta", run_0}, {"l2first", run_first}};
  int aheads[] = {4, 8, 12, 16, 24, 32, 64};
  {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char l[256];
    while (f && fgets(l, sizeof l, f))
      if (strstr(l, "AnonHuge") || strstr(l, "Rss:")) fputs(l, stdout);
    if (f) fclose(f);
  }
  if (argc > 1) {
    int bs[] = {0, 16, 32, 64, 128, 256};
    int ah[] = {8, 12, 16, 24, 32};
    for (int rep = 0; rep < 2; rep++)
      for (int b = 0; b < 6; b++)
        for (int a = 0; a < 5; a++) {
          burst_n = bs[b];
          double v[1500];
          for (int r = 0; r < 1500; r++) {
            for (int j = 0; j < 256; j++) idx[j] = rnd() % cap;
            double t0 = now();
            run_burst(ah[a]);
            v[r] = now() - t0;
          }
          for (int i = 0; i < 1500; i++)
            for (int j = i + 1; j < 1500; j++)
              if (v[j] < v[i]) {
                double u = v[i];
                v[i] = v[j];
                v[j] = u;
              }
          printf("burst %3d then t1 ahead %2d: median %.2f us  min %.2f\n", bs[b], ah[a], v[750] / 1e3,
                 v[0] / 1e3);
        }
    return 0;
  }
  for (int f = 0; f < 5; f++)
    for (int a = 0; a < 7; a++) {
      double v[1500];
      double s = 0;
      for (int r = 0; r < 1500; r++) {
        for (int j = 0; j < 256; j++) idx[j] = rnd() % cap;
        double t0 = now();
        fs[f].f(aheads[a]);
        v[r] = now() - t0;
        s += out[r % 256];
      }
      for (int i = 0; i < 1500; i++)
        for (int j = i + 1; j < 1500; j++)
          if (v[j] < v[i]) {
            double u = v[i];
            v[i] = v[j];
            v[j] = u;
          }
      printf("%-8s ahead %2d: median %.2f us  min %.2f (%g)\n", fs[f].name, aheads[a], v[750] / 1e3,
             v[0] / 1e3, s > 0 ? 1.0 : 0.0);
    }
}
