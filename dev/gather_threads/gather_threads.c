/* gather_threads.c — a CPU gather of 256 random transitions (168-byte
 * columns of a 1M-column table in 2 MB pages, as agrl's mujoco rows) split
 * over 1, 2, 4 ... T threads: how much of a gather's time is one core's
 * misses in flight. Each thread takes a contiguous part of the batch, asks
 * for the lines of its first `burst` columns at once (into L2), then one
 * column 16 ahead for each copied; helpers look for the next job without
 * sleeping. Median, minimum and 90th percentile of 3000 gathers a count.
 * Build: cc -O2 -march=native -pthread -o gather_threads dev/gather_threads/gather_threads.c
 * Run:   ./gather_threads [T (8)] [burst (32)] */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define ROWS 42
#define B 256
#define REPS 3000

static float *table;
static float out[B * ROWS];
static int32_t idx[B];
static int threads, burst = 32;
static _Atomic uint64_t job;
static _Atomic int done;
static _Atomic int quit;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void ask(int j) {
  const char *p = (const char *)(table + (size_t)idx[j] * ROWS);
  for (const char *q = (const char *)((uintptr_t)p & ~(uintptr_t)63); q < p + ROWS * 4; q += 64)
    _mm_prefetch(q, _MM_HINT_T1);
}

static void part(int k) {
  const int a = B * k / threads, b = B * (k + 1) / threads;
  for (int j = a; j < a + burst && j < b; j++) ask(j);
  for (int j = a; j < b; j++) {
    if (j + 16 < b && j + 16 >= a + burst) ask(j + 16);
    memcpy(out + j * ROWS, table + (size_t)idx[j] * ROWS, ROWS * 4);
  }
}

static void *helper(void *arg) {
  const int k = (int)(intptr_t)arg;
  uint64_t seen = 0;
  while (!atomic_load_explicit(&quit, memory_order_relaxed)) {
    const uint64_t s = atomic_load_explicit(&job, memory_order_acquire);
    if (s == seen) {
      _mm_pause();
      continue;
    }
    seen = s;
    if (k < threads) {
      part(k);
      atomic_fetch_add_explicit(&done, 1, memory_order_release);
    }
  }
  return NULL;
}

static int cmp(const void *x, const void *y) {
  const double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

int main(int argc, char **argv) {
  const int64_t cap = 1000000;
  const int most = argc > 1 ? atoi(argv[1]) : 8;
  if (argc > 2) burst = atoi(argv[2]);
  if (most < 1 || most > 64) return 2;
  const size_t huge = (size_t)2 << 20, sz = ((size_t)cap * ROWS * 4 + huge - 1) & ~(huge - 1);
  char *m = mmap(NULL, sz + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 1;
  m = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
  madvise(m, sz, MADV_HUGEPAGE);
  table = (float *)m;
  for (int64_t i = 0; i < cap * ROWS; i++) table[i] = (float)i;
  pthread_t th[64];
  threads = 1;
  for (int k = 1; k < most; k++) pthread_create(&th[k], NULL, helper, (void *)(intptr_t)k);
  static double v[REPS];
  for (threads = 1; threads <= most; threads *= 2) {
    double check = 0;
    for (int r = 0; r < REPS; r++) {
      for (int j = 0; j < B; j++) idx[j] = (int32_t)(next() % cap);
      const double t0 = now_ns();
      atomic_store_explicit(&done, 0, memory_order_relaxed);
      atomic_fetch_add_explicit(&job, 1, memory_order_release);
      part(0);
      while (atomic_load_explicit(&done, memory_order_acquire) < threads - 1) _mm_pause();
      v[r] = now_ns() - t0;
      check += out[(r * 7) % (B * ROWS)];
    }
    qsort(v, REPS, sizeof v[0], cmp);
    printf("burst %d, %2d threads: median %.2f us  min %.2f  p90 %.2f%s\n", burst, threads, v[REPS / 2] / 1e3,
           v[0] / 1e3, v[REPS * 9 / 10] / 1e3, check >= 0 ? "" : " (?)");
  }
  atomic_store(&quit, 1);
  for (int k = 1; k < most; k++) pthread_join(th[k], NULL);
  return 0;
}
