/* cpu_backend.c — the CPU backend: the readable reference for every kernel.
 *
 * Device memory is host memory; the queue is the caller's thread (work runs
 * at once, in call order), so ordering (S6) and deferred release (S9) hold
 * trivially. Every CUDA kernel is tested against the functions here.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "base/base.h"
#include "cpu/cpu_blas.h"
#include "cpu/cpu_internal.h"

/* A recorded plan: the kernel calls in order, their arguments copied into
 * one blob. Replaying runs them without building anything again. */
typedef struct cpu_call {
  ag__kernel_id id;
  size_t off;
} cpu_call;

typedef struct cpu_plan {
  cpu_call *calls;
  size_t n, cap;
  unsigned char *blob;
  size_t blob_used, blob_cap;
  int failed; /* out of host memory while recording */
} cpu_plan;

typedef struct cpu_state {
  cpu_plan *rec; /* the plan being recorded, or NULL */
} cpu_state;

/* Host-side memory for contexts that reach this backend without opening it
 * (host copies made during a device switch). */
static cpu_state cpu_default_state;

static cpu_state *state_of(void *st) { return st ? (cpu_state *)st : &cpu_default_state; }

static ag_status cpu_open(int index, void **st, char *desc, size_t desc_len) {
  (void)index;
  /* OpenBLAS, loaded at the first open with the kernels the processor's
   * feature flags allow (cpu_blas.c); its name says which and why */
  const ag_status r = ag__blas_load();
  if (r) return r;
  cpu_state *s = ag__calloc(1, sizeof *s);
  if (!s) return ag__fail(AG_ERR_OUT_OF_MEMORY, "cpu: out of host memory");
  *st = s;
  snprintf(desc, desc_len, "cpu (%s)", ag__blas_desc());
  return AG_OK;
}

static void plan_free(cpu_plan *p) {
  if (!p) return;
  free(p->calls);
  free(p->blob);
  free(p);
}

static void cpu_close(void *st) {
  if (!st) return;
  plan_free(((cpu_state *)st)->rec);
  free(st);
}

/* MemAvailable from /proc/meminfo (what can be allocated without swapping). */
static int meminfo_available(size_t *avail) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  int ok = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long kb;
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
      *avail = (size_t)kb * 1024u;
      ok = 1;
      break;
    }
  }
  fclose(f);
  return ok;
}

static ag_status cpu_mem_info(void *st, size_t *free_bytes, size_t *total_bytes) {
  (void)st;
  struct sysinfo si;
  if (sysinfo(&si) != 0) return ag__fail(AG_ERR_DEVICE, "cpu: sysinfo failed");
  *total_bytes = (size_t)si.totalram * si.mem_unit;
  if (!meminfo_available(free_bytes)) *free_bytes = (size_t)si.freeram * si.mem_unit;
  return AG_OK;
}

/* Blocks of BIG_BYTES or more (replay tables, sum trees) are mapped on
 * their own, 2 MB-aligned, and asked for in 2 MB pages before their first
 * touch: a random read of a large table then costs no page walk of its
 * own (one TLB entry covers 512 times as much). Where the kernel does not
 * grant them the block is in 4 KB pages, as from malloc. The mapped blocks
 * are listed (any context's state may release a block another allocated,
 * as host copies do), the rest come from aligned_alloc. */
enum { BIG_BYTES = 4 << 20 };
#define HUGE_BYTES ((size_t)2 << 20)
typedef struct big_block {
  void *p;
  size_t len;
} big_block;
static pthread_mutex_t big_mu = PTHREAD_MUTEX_INITIALIZER;
static big_block *big;
static size_t n_big, cap_big;

static void *big_map(size_t bytes, size_t *len) {
#if defined(MAP_ANONYMOUS) && defined(MADV_HUGEPAGE)
  const size_t n = (bytes + 4095u) & ~(size_t)4095u;
  char *m = mmap(NULL, n + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  char *p = (char *)(((uintptr_t)m + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
  if (p > m) munmap(m, (size_t)(p - m)); /* the slack before and after the aligned block */
  munmap(p + n, (size_t)(m + HUGE_BYTES - p));
  (void)madvise(p, n, MADV_HUGEPAGE); /* advice: refused where THP is off */
  *len = n;
  return p;
#else
  (void)bytes, (void)len;
  return NULL;
#endif
}

static ag_status cpu_alloc(void *st, size_t bytes, void **out) {
  (void)st;
  if (bytes > SIZE_MAX / 2) /* the rounding below would wrap */
    return ag__fail(AG_ERR_OUT_OF_MEMORY,
                    "cpu: %zu bytes cannot be allocated (more than the address space allows)", bytes);
  if (bytes >= BIG_BYTES) {
    pthread_mutex_lock(&big_mu);
    if (n_big == cap_big) {
      size_t c = cap_big ? 2 * cap_big : 16;
      big_block *b = ag__realloc(big, c * sizeof *b);
      if (b) big = b, cap_big = c;
    }
    size_t len = 0;
    void *p = n_big < cap_big ? big_map(bytes, &len) : NULL;
    if (p) big[n_big++] = (big_block){p, len};
    pthread_mutex_unlock(&big_mu);
    if (p) {
      *out = p;
      return AG_OK;
    }
  }
  size_t rounded = (bytes + 255u) & ~(size_t)255u;
  void *p = aligned_alloc(256, rounded ? rounded : 256);
  if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "cpu: could not allocate %.1f MB", AG__MB(bytes));
  *out = p;
  return AG_OK;
}

static void cpu_release(void *st, void *p) {
  (void)st;
  if (!p) return;
  pthread_mutex_lock(&big_mu);
  for (size_t i = 0; i < n_big; i++)
    if (big[i].p == p) {
      munmap(p, big[i].len);
      big[i] = big[--n_big];
      if (!n_big) free(big), big = NULL, cap_big = 0;
      pthread_mutex_unlock(&big_mu);
      return;
    }
  pthread_mutex_unlock(&big_mu);
  free(p);
}

static ag_status cpu_zero(void *st, void *dst, size_t bytes) {
  (void)st;
  memset(dst, 0, bytes);
  return AG_OK;
}

static ag_status cpu_upload(void *st, void *dst, size_t bytes, ag__fill_fn fill, void *user) {
  (void)st;
  ag__fill_parallel(fill, user, dst, 0, bytes);
  return AG_OK;
}

static ag_status cpu_download(void *st, const void *src, size_t bytes, ag__drain_fn drain, void *user) {
  (void)st;
  drain(src, 0, bytes, user);
  return AG_OK;
}

static ag_status cpu_copy(void *st, void *dst, const void *src, size_t bytes) {
  (void)st;
  memmove(dst, src, bytes);
  return AG_OK;
}

static ag_status cpu_sync(void *st) {
  (void)st;
  return AG_OK;
}

static void *cpu_native_stream(void *st) {
  (void)st;
  return NULL;
}

/* ---- kernels and recording ---- */

static int plan_append(cpu_plan *p, ag__kernel_id id, const void *args, size_t size) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 64;
    cpu_call *c = ag__realloc(p->calls, cap * sizeof *c);
    if (!c) return 0;
    p->calls = c;
    p->cap = cap;
  }
  size_t off = (p->blob_used + 15u) & ~(size_t)15u;
  if (off + size > p->blob_cap) {
    size_t cap = p->blob_cap ? 2 * p->blob_cap : 4096;
    while (cap < off + size) cap *= 2;
    unsigned char *b = ag__realloc(p->blob, cap);
    if (!b) return 0;
    p->blob = b;
    p->blob_cap = cap;
  }
  memcpy(p->blob + off, args, size);
  p->blob_used = off + size;
  p->calls[p->n].id = id;
  p->calls[p->n].off = off;
  p->n++;
  return 1;
}

/* Subnormal floats (|x| < 1.2e-38) are flushed to zero while agrl's
 * kernels run: on x86, MXCSR's flush-to-zero and denormals-are-zero bits,
 * set on the caller's thread for the call and restored after it. Training
 * makes such values (squared gradients that have all but vanished, moments
 * decaying towards zero), and on some processors each operation on one
 * costs about a hundred cycles: the CPU DQN update ran 1.6 times slower on
 * such a processor without the flush. */
#if defined(__x86_64__) || defined(__i386__)
#define FP_FLUSH 0x8040u /* FTZ (bit 15) | DAZ (bit 6) */
static inline unsigned fp_enter(void) {
  const unsigned m = _mm_getcsr();
  if ((m & FP_FLUSH) != FP_FLUSH) _mm_setcsr(m | FP_FLUSH);
  return m;
}
static inline void fp_leave(unsigned m) {
  if ((m & FP_FLUSH) != FP_FLUSH) _mm_setcsr(m);
}
#else
static inline unsigned fp_enter(void) { return 0; }
static inline void fp_leave(unsigned m) { (void)m; }
#endif

static ag_status cpu_run(void *st, ag__kernel_id id, const void *args, size_t size) {
  cpu_state *s = state_of(st);
  if (s->rec) {
    if (!plan_append(s->rec, id, args, size)) {
      s->rec->failed = 1;
      return ag__fail(AG_ERR_OUT_OF_MEMORY, "cpu: out of host memory while recording");
    }
    return AG_OK;
  }
  if ((int)id < 0 || id >= AG__K_COUNT || !ag__cpu_kernels[id])
    return ag__fail(AG_ERR_UNSUPPORTED, "cpu: kernel %d is not provided", (int)id);
  const unsigned m = fp_enter();
  const ag_status r = ag__cpu_kernels[id](args);
  fp_leave(m);
  return r;
}

static ag_status cpu_record_begin(void *st) {
  cpu_state *s = state_of(st);
  if (s->rec) return ag__fail(AG_ERR_STATE, "cpu: a recording is already in progress");
  s->rec = ag__calloc(1, sizeof *s->rec);
  return s->rec ? AG_OK : ag__fail(AG_ERR_OUT_OF_MEMORY, "cpu: out of host memory");
}

static ag_status cpu_record_end(void *st, int ok, void **rec, int *n_nodes) {
  cpu_state *s = state_of(st);
  cpu_plan *p = s->rec;
  s->rec = NULL;
  if (!p) return ag__fail(AG_ERR_STATE, "cpu: no recording in progress");
  if (!ok || p->failed) {
    plan_free(p);
    return ok ? ag__fail(AG_ERR_OUT_OF_MEMORY, "cpu: out of host memory while recording") : AG_OK;
  }
  *rec = p;
  *n_nodes = (int)p->n;
  return AG_OK;
}

static ag_status cpu_replay(void *st, void *rec) {
  (void)st;
  const cpu_plan *p = rec;
  const unsigned m = fp_enter();
  ag_status r = AG_OK;
  for (size_t i = 0; i < p->n && !r; i++) r = ag__cpu_kernels[p->calls[i].id](p->blob + p->calls[i].off);
  fp_leave(m);
  return r;
}

static void cpu_record_free(void *st, void *rec) {
  (void)st;
  plan_free(rec);
}

static size_t cpu_scratch(void *st, ag__kernel_id id, const void *args, size_t size) {
  (void)st, (void)size;
  return id == AG__K_QGRAD    ? ag__cpu_qgrad_scratch(args)
         : id == AG__K_ACGRAD ? ag__cpu_acgrad_scratch(args)
         : id == AG__K_CONV2D ? ag__cpu_conv2d_scratch(args)
                              : 0;
}

/* ---- handoff: host memory; the CPU has nothing to wait for ---- */

static ag_status cpu_handoff_alloc(int index, size_t bytes, void **out) {
  (void)index;
  return cpu_alloc(NULL, bytes, out);
}

static void cpu_handoff_free(int index, void *p) {
  (void)index;
  cpu_release(NULL, p);
}

static void *cpu_mark(int index, void *stream, void *reuse) {
  (void)index, (void)stream, (void)reuse;
  return NULL;
}

static ag_status cpu_wait(void *stream, void *mark) {
  (void)stream, (void)mark;
  return AG_OK;
}

static int cpu_done(void *mark) {
  (void)mark;
  return 1;
}

static void cpu_mark_void(void *mark) { (void)mark; }

static const ag__handoff_ops cpu_handoff = {
    .alloc = cpu_handoff_alloc,
    .free = cpu_handoff_free,
    .mark = cpu_mark,
    .wait = cpu_wait,
    .done = cpu_done,
    .host_wait = cpu_mark_void,
    .mark_free = cpu_mark_void,
};

const ag__handoff_ops *ag__cpu_handoff(void) { return &cpu_handoff; }

static const ag__backend cpu_backend = {
    .name = "cpu",
    .kind = AG_DEVICE_CPU,
    .open = cpu_open,
    .close = cpu_close,
    .mem_info = cpu_mem_info,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .native_stream = cpu_native_stream,
    .alloc_static = cpu_alloc,
    .release_static = cpu_release,
    .host_alloc = cpu_alloc,
    .host_free = cpu_release,
    .run = cpu_run,
    .scratch = cpu_scratch,
    .record_begin = cpu_record_begin,
    .record_end = cpu_record_end,
    .replay = cpu_replay,
    .record_free = cpu_record_free,
};

const ag__backend *ag__cpu_backend(void) { return &cpu_backend; }
