/* pool.c — a few helper threads for large host-side copies.
 *
 * Filling the staging memory of a large transfer (memcpy, or a conversion
 * to a compact dtype) is bound by one core's memory bandwidth; splitting it
 * over several threads lets it keep up with the bus. The pool is created at
 * the first large transfer and lives until the process exits. AGRL_THREADS
 * sets the number of threads that work on one transfer (1: no helpers).
 *
 * The plain-copy fills live here too. A device backend whose staging memory
 * is read by a DMA engine right after the fill uses the streaming copy
 * (ag__fill_copy_stream): its non-temporal stores leave no modified lines in
 * the filling cores' caches, which the engine would otherwise have to fetch
 * from those caches line by line. Memory that the CPU reads again soon (the
 * CPU backend's uploads) keeps memcpy.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define AG__HAVE_SSE2 1
#endif

#include "core/internal.h"

#define AG__POOL_MAX 16

typedef struct ag__pool {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  int n_threads;      /* helpers; the caller works too */
  uint64_t round;     /* incremented for every job */
  ag__task_fn fn;
  void *arg;
  int n_tasks, next_task, pending;
} ag__pool;

static ag__pool pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, -1, 0,
                        NULL, NULL, 0, 0, 0};

/* Takes tasks of the current job until none is left. Called with mu held. */
static void work(void) {
  while (pool.next_task < pool.n_tasks) {
    int i = pool.next_task++;
    ag__task_fn fn = pool.fn;
    void *arg = pool.arg;
    pthread_mutex_unlock(&pool.mu);
    fn(arg, i);
    pthread_mutex_lock(&pool.mu);
    if (--pool.pending == 0) pthread_cond_broadcast(&pool.done);
  }
}

static void *helper(void *unused) {
  (void)unused;
  pthread_mutex_lock(&pool.mu);
  uint64_t seen = pool.round;
  for (;;) {
    while (pool.round == seen) pthread_cond_wait(&pool.go, &pool.mu);
    seen = pool.round;
    work();
  }
  return NULL;
}

/* Starts the helpers once; returns how many threads a job may use. */
static int pool_size(void) {
  if (pool.n_threads >= 0) return pool.n_threads + 1;
  const char *env = getenv("AGRL_THREADS");
  long want = env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  if (want < 1) want = 1;
  if (want > AG__POOL_MAX) want = AG__POOL_MAX;
  int started = 0;
  for (long i = 0; i + 1 < want; i++) {
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, helper, NULL) == 0) started++;
    pthread_attr_destroy(&at);
  }
  pool.n_threads = started;
  return started + 1;
}

int ag__pool_threads(void) {
  pthread_mutex_lock(&pool.mu);
  int n = pool_size();
  pthread_mutex_unlock(&pool.mu);
  return n;
}

/* Task 0 always runs on the calling thread: alone, the caller runs the tasks
 * in order; with helpers, it holds mu from here until work() has taken task
 * 0. The CUDA backend's large uploads rely on it (their task 0 is the only
 * one that calls CUDA, and the others wait for it to open their parts). */
void ag__pool_run(int n_tasks, ag__task_fn fn, void *arg) {
  pthread_mutex_lock(&pool.mu);
  if (pool_size() == 1 || n_tasks <= 1 || pool.pending) { /* no helpers, one task, or a job running: alone */
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < n_tasks; i++) fn(arg, i);
    return;
  }
  pool.fn = fn;
  pool.arg = arg;
  pool.n_tasks = n_tasks;
  pool.next_task = 0;
  pool.pending = n_tasks;
  pool.round++;
  pthread_cond_broadcast(&pool.go);
  work(); /* takes task 0 first: no helper can before mu is released */
  while (pool.pending) pthread_cond_wait(&pool.done, &pool.mu);
  pool.fn = NULL;
  pool.n_tasks = 0;
  pthread_mutex_unlock(&pool.mu);
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

/* ---- plain copies into transfer memory ---- */

void ag__fill_copy(void *host_dst, size_t off, size_t len, void *user) {
  memcpy(host_dst, (const char *)user + off, len);
}

void ag__fill_copy_stream(void *host_dst, size_t off, size_t len, void *user) {
  ag__copy_stream(host_dst, (const char *)user + off, len);
}

/* The whole cache lines of dst are written with non-temporal stores, 64
 * bytes per step from unaligned loads; the partial lines at both ends with
 * memcpy. Short copies are a memcpy: they have no whole line to skip the
 * caches with, and a fence would cost more than it saves. */
void ag__copy_stream(void *dst, const void *src, size_t len) {
#ifdef AG__HAVE_SSE2
  if (len < 256) {
    memcpy(dst, src, len);
    return;
  }
  char *d = (char *)dst;
  const char *s = (const char *)src;
  size_t head = (64 - ((uintptr_t)d & 63)) & 63;
  memcpy(d, s, head);
  d += head;
  s += head;
  len -= head;
  size_t body = len & ~(size_t)63;
  for (size_t i = 0; i < body; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
    _mm_stream_si128((__m128i *)(d + i), a);
    _mm_stream_si128((__m128i *)(d + i + 16), b);
    _mm_stream_si128((__m128i *)(d + i + 32), c);
    _mm_stream_si128((__m128i *)(d + i + 48), e);
  }
  memcpy(d + body, s + body, len - body);
  _mm_sfence(); /* the streamed lines are in memory before anyone is told */
#else
  memcpy(dst, src, len);
#endif
}
