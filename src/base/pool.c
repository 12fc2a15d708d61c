/* pool.c — a few helper threads for large host-side copies and gathers.
 *
 * Filling the staging memory of a large transfer (memcpy, or a conversion
 * to a compact dtype) is bound by one core's memory bandwidth; splitting it
 * over several threads lets it keep up with the bus. A CPU gather of random
 * columns is bound by how many misses one core keeps in flight; several
 * cores each gathering a part of the batch keep more. The pool is created at
 * the first parallel job and lives until the process exits. AGRL_THREADS
 * sets the number of threads that work on one job (1: no helpers; by
 * default one a core, at most 8; 16 at most); AGRL_SPIN_US how long a helper
 * keeps looking for the next job after one, before it sleeps (default 50 us:
 * jobs that come closer together than that, such as a training loop's
 * batches, find the helpers awake).
 *
 * A job is claimed task by task: the caller publishes it (a generation
 * number and the next task, in one word) and takes task 0, then any task
 * still unclaimed, so a job never waits for a helper to wake up; helpers
 * that are awake claim the rest. The caller returns once every task has
 * finished.
 *
 * The plain-copy fills live here too. A device backend whose staging memory
 * is read by a DMA engine right after the fill uses the streaming copy
 * (ag__fill_copy_stream): its non-temporal stores leave no modified lines in
 * the filling cores' caches, which the engine would otherwise have to fetch
 * from those caches line by line. Memory that the CPU reads again soon (the
 * CPU backend's uploads) keeps memcpy. So does the monotonic clock of
 * deadlines (ag__mono_s).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#include "base/base.h"

#define AG__POOL_MAX 16
/* threads a job may use unless AGRL_THREADS says: past 8, a gather of 256
 * columns ran slower on a 16-core Xeon (every thread looking for work reads
 * the job word the claims write), and large fills are held by the memory */
#define AG__POOL_DEFAULT 8
#define AG__POOL_SPIN_US 50
#define AG__NO_TASK 0xffffffffu /* the job word's task when the job is closed */

/* The job word, the job's description and its count of finished tasks
 * each have a cache line of their own: threads looking for work read the
 * first over and over, the tasks' ends write the last. */
typedef struct ag__pool {
  pthread_mutex_t mu; /* starting the helpers; their sleep */
  pthread_cond_t go;
  atomic_int n_threads;                 /* helpers started; -1: not yet */
  long spin_ns;                         /* how long a helper looks for a job before it sleeps */
  atomic_int busy;                      /* a job is running: another caller runs its tasks alone */
  atomic_int sleepers;                  /* helpers asleep (or going to sleep) on go */
  _Alignas(64) atomic_ullong job;       /* generation << 32 | next task to claim (AG__NO_TASK: closed) */
  _Alignas(64) _Atomic(ag__task_fn) fn; /* the job's, written only while it is closed */
  _Atomic(void *) arg;
  atomic_int n_tasks;
  _Alignas(64) atomic_int finished; /* tasks of the job done */
} ag__pool;

static ag__pool pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .n_threads = -1, .job = AG__NO_TASK};

static uint32_t generation(void) { return (uint32_t)(atomic_load(&pool.job) >> 32); }

/* Claims the next task of generation gen (n tasks); -1 when none is left or
 * the job is no longer gen's. A claim that succeeds saw the job open, so
 * fn, arg and n read after seeing gen were still its own (they are written
 * only while the job word is closed). */
static int claim(uint32_t gen, int n) {
  unsigned long long w = atomic_load(&pool.job);
  for (;;) {
    const uint32_t i = (uint32_t)w;
    if ((uint32_t)(w >> 32) != gen || i == AG__NO_TASK || (int64_t)i >= (int64_t)n) return -1;
    if (atomic_compare_exchange_weak(&pool.job, &w, w + 1)) return (int)i;
  }
}

/* Runs the tasks of generation gen that are left; returns how many. */
static int take_tasks(uint32_t gen) {
  const ag__task_fn fn = atomic_load(&pool.fn);
  void *const arg = atomic_load(&pool.arg);
  const int n = atomic_load(&pool.n_tasks);
  int i, k = 0;
  while ((i = claim(gen, n)) >= 0) {
    fn(arg, i);
    k++;
  }
  return k;
}

static long elapsed_ns(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long)(t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* Waits for a generation other than seen: looking for spin_ns, then asleep. */
static uint32_t next_job(uint32_t seen) {
  uint32_t g;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (unsigned k = 1;; k++) {
    if ((g = generation()) != seen) return g;
    cpu_relax();
    if (k % 256 == 0 && elapsed_ns(&t0) >= pool.spin_ns) break;
  }
  pthread_mutex_lock(&pool.mu);
  atomic_fetch_add(&pool.sleepers, 1); /* before looking again: a caller that publishes after this wakes us */
  while ((g = generation()) == seen) pthread_cond_wait(&pool.go, &pool.mu);
  atomic_fetch_sub(&pool.sleepers, 1);
  pthread_mutex_unlock(&pool.mu);
  return g;
}

/* Helper number `index` (1, 2 ...) claims tasks only of jobs with more
 * tasks than that: the job word is fought over by as many threads as the
 * job can use, not by every helper. */
static void *helper(void *index) {
  const int me = (int)(intptr_t)index;
  uint32_t seen = generation();
  for (;;) {
    seen = next_job(seen);
    if (atomic_load(&pool.n_tasks) <= me) continue;
    const int k = take_tasks(seen);
    if (k) atomic_fetch_add(&pool.finished, k);
  }
  return NULL;
}

/* Starts the helpers once; returns how many threads a job may use. */
static int pool_size(void) {
  int n = atomic_load(&pool.n_threads);
  if (n >= 0) return n + 1;
  pthread_mutex_lock(&pool.mu);
  if ((n = atomic_load(&pool.n_threads)) < 0) {
    const char *env = getenv("AGRL_THREADS");
    long want = sysconf(_SC_NPROCESSORS_ONLN);
    if (want > AG__POOL_DEFAULT) want = AG__POOL_DEFAULT;
    if (env) want = strtol(env, NULL, 10);
    if (want < 1) want = 1;
    if (want > AG__POOL_MAX) want = AG__POOL_MAX;
    const char *spin = getenv("AGRL_SPIN_US");
    long us = spin ? strtol(spin, NULL, 10) : AG__POOL_SPIN_US;
    pool.spin_ns = (us < 0 ? 0 : us > 1000000 ? 1000000 : us) * 1000L;
    n = 0;
    for (long i = 0; i + 1 < want; i++) {
      pthread_t t;
      pthread_attr_t at;
      pthread_attr_init(&at);
      pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
      if (pthread_create(&t, &at, helper, (void *)(intptr_t)(n + 1)) == 0) n++;
      pthread_attr_destroy(&at);
    }
    atomic_store(&pool.n_threads, n);
  }
  pthread_mutex_unlock(&pool.mu);
  return n + 1;
}

int ag__pool_threads(void) { return pool_size(); }

/* Task 0 always runs on the calling thread: alone, the caller runs the
 * tasks in order; with helpers, no helper can claim task 0. The CUDA
 * backend's large uploads rely on it (their task 0 is the only one that
 * calls CUDA, and the others wait for it to open their parts). */
void ag__pool_run(int n_tasks, ag__task_fn fn, void *arg) {
  int idle = 0;
  if (n_tasks <= 1 || pool_size() == 1 || !atomic_compare_exchange_strong(&pool.busy, &idle, 1)) {
    for (int i = 0; i < n_tasks; i++) fn(arg, i); /* no helpers, one task, or a job running: alone */
    return;
  }
  atomic_store(&pool.fn, fn);
  atomic_store(&pool.arg, arg);
  atomic_store(&pool.n_tasks, n_tasks);
  atomic_store(&pool.finished, 0);
  const uint32_t gen = generation() + 1;
  atomic_store(&pool.job, (unsigned long long)gen << 32 | 1u); /* open; task 0 is the caller's */
  if (atomic_load(&pool.sleepers) > 0) {
    pthread_mutex_lock(&pool.mu);
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
  }
  fn(arg, 0);
  atomic_fetch_add(&pool.finished, 1 + take_tasks(gen));
  for (unsigned k = 0; atomic_load(&pool.finished) < n_tasks; k++) { /* the helpers' last tasks */
    if (k < 4096)
      cpu_relax();
    else
      sched_yield();
  }
  atomic_store(&pool.job, (unsigned long long)gen << 32 | AG__NO_TASK); /* closed: fn, arg, n may change */
  atomic_store(&pool.busy, 0);
}

/* ---- parallel fills of transfer parts ---- */

typedef struct par_fill {
  ag__fill_fn fill;
  void *user;
  char *dst;
  size_t off, len, slice;
} par_fill;

static void fill_slice(void *arg, int i) {
  const par_fill *p = arg;
  size_t a = (size_t)i * p->slice, b = a + p->slice < p->len ? a + p->slice : p->len;
  if (a < b) p->fill(p->dst + a, p->off + a, b - a, p->user);
}

void ag__fill_parallel(ag__fill_fn fill, void *user, void *dst, size_t off, size_t len) {
  const size_t min_slice = (size_t)256 << 10;
  int n = ag__pool_threads();
  if (len < 2 * min_slice || n == 1) {
    fill(dst, off, len, user);
    return;
  }
  size_t slice = (len + (size_t)n - 1) / (size_t)n;
  if (slice < min_slice) slice = min_slice;
  slice = (slice + 63) & ~(size_t)63; /* whole elements of any dtype */
  par_fill p = {fill, user, dst, off, len, slice};
  ag__pool_run((int)((len + slice - 1) / slice), fill_slice, &p);
}

double ag__mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
