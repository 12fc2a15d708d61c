/* backend.cu — the CUDA backend: device memory, the stream, transfers.
 *
 * Memory comes from the stream-ordered allocator (cudaMallocAsync and
 * cudaFreeAsync on the context's stream): a release is ordered after every
 * queued kernel that reads the memory (S9, S16) without a host wait.
 * Uploads are copied into a pinned staging ring and sent with
 * cudaMemcpyAsync on the stream; the ring slot is reused only after an event
 * says its copy is done. Plain copies of 64 KB or more fill the ring with
 * non-temporal stores, so that the copy engine reads them from memory rather
 * than from the filling cores' caches. Large uploads are filled by the
 * helper threads in one job, each 2 MB part sent as soon as it is filled;
 * a large plain copy from page-locked memory, when the stream is idle, is
 * sent straight from the caller's memory and waited for. Downloads wait for
 * the stream, then come back in double-buffered parts of at most 16 MB.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "cuda/cuda_internal.h"

#define AG__CUBLAS_WS ((size_t)32 << 20)

ag_status ag__cublas_fail(cublasStatus_t s, const char *what) {
  return ag__fail(s == CUBLAS_STATUS_ALLOC_FAILED ? AG_ERR_OUT_OF_MEMORY : AG_ERR_DEVICE, "%s: %s (%s)", what,
                  cublasGetStatusName(s), cublasGetStatusString(s));
}

ag_status ag__cuda_fail(cudaError_t e, const char *what) {
  (void)cudaGetLastError(); /* clear a non-sticky error */
  ag_status s = (e == cudaErrorMemoryAllocation) ? AG_ERR_OUT_OF_MEMORY : AG_ERR_DEVICE;
  return ag__fail(s, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

ag_status ag__cuda_check_launch(const char *what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, what);
}

void ag__cuda_enter(ag__cuda_state *st) {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess || d != st->device) cudaSetDevice(st->device);
}

unsigned ag__cuda_grid(const ag__cuda_state *st, int64_t n, int block) {
  int64_t g = (n + block - 1) / block;
  int64_t cap = (int64_t)st->sm_count * 32;
  if (g > cap) g = cap;
  return (unsigned)(g < 1 ? 1 : g);
}

extern "C" int ag__cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/* ---- open / close ---- */

static void cuda_close(void *p) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  if (!st) return;
  ag__cuda_enter(st);
  if (st->main) cudaStreamSynchronize(st->main);
  for (int i = 0; i < AG__CUDA_RING_EVENTS; i++)
    if (st->ring[i].ev) cudaEventDestroy(st->ring[i].ev);
  for (int i = 0; i < 2; i++)
    if (st->part_ev[i]) cudaEventDestroy(st->part_ev[i]);
  if (st->staging) cudaFreeHost(st->staging);
  if (st->one_exec) cudaGraphExecDestroy(st->one_exec);
  if (st->one_graph) cudaGraphDestroy(st->one_graph);
  if (st->blas) cublasDestroy(st->blas);
  if (st->blas_ws) cudaFree(st->blas_ws);
  if (st->capture) cudaStreamDestroy(st->capture);
  if (st->main) cudaStreamDestroy(st->main);
  /* give the pool's freed memory back to the device at once */
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, st->device) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
  free(st);
}

static ag_status cuda_open(int index, void **out, char *desc, size_t desc_len) {
  ag__cuda_state *st = (ag__cuda_state *)ag__calloc(1, sizeof *st);
  if (!st) return ag__fail(AG_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
  st->device = index;
  cudaError_t e = cudaSetDevice(index);
  cudaDeviceProp prop;
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, index);
  /* blocking: ordered by the device with the legacy default stream, where
   * torch and CuPy queue their work unless told otherwise (cuda_ordered_with) */
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&st->main, cudaStreamDefault);
  st->stream = st->main;
  st->staging_size = 2 * AG_TRANSFER_PART_BYTES;
  if (e == cudaSuccess) e = cudaMallocHost((void **)&st->staging, st->staging_size);
  if (e == cudaSuccess &&
      cudaHostGetDevicePointer((void **)&st->staging_dev, st->staging, 0) != cudaSuccess) {
    st->staging_dev = NULL; /* not mapped: stage() is refused and its callers upload */
    (void)cudaGetLastError();
  }
  for (int i = 0; e == cudaSuccess && i < AG__CUDA_RING_EVENTS; i++)
    e = cudaEventCreateWithFlags(&st->ring[i].ev, cudaEventDisableTiming);
  for (int i = 0; e == cudaSuccess && i < 2; i++)
    e = cudaEventCreateWithFlags(&st->part_ev[i], cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaMalloc(&st->blas_ws, AG__CUBLAS_WS);
  if (e != cudaSuccess) {
    ag_status s = ag__cuda_fail(e, "cuda: opening the device");
    cuda_close(st);
    return s;
  }
  cublasStatus_t b = cublasCreate(&st->blas);
  if (b == CUBLAS_STATUS_SUCCESS) b = cublasSetStream(st->blas, st->stream);
  if (b == CUBLAS_STATUS_SUCCESS) b = cublasSetWorkspace(st->blas, st->blas_ws, AG__CUBLAS_WS);
  if (b != CUBLAS_STATUS_SUCCESS) {
    ag_status s = ag__cublas_fail(b, "cuda: creating the cuBLAS handle");
    cuda_close(st);
    return s;
  }
  st->sm_count = prop.multiProcessorCount;
  snprintf(desc, desc_len, "cuda:%d (%s)", index, prop.name);
  *out = st;
  return AG_OK;
}

static ag_status cuda_mem_info(void *p, size_t *free_b, size_t *total_b) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  /* memory released to the pool is returned to the device first */
  cudaError_t e = cudaStreamSynchronize(st->stream);
  cudaMemPool_t pool;
  if (e == cudaSuccess) e = cudaDeviceGetDefaultMemPool(&pool, st->device);
  if (e == cudaSuccess) e = cudaMemPoolTrimTo(pool, 0);
  if (e == cudaSuccess) e = cudaMemGetInfo(free_b, total_b);
  return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, "cuda: reading the free memory");
}

/* ---- memory ---- */

static ag_status cuda_alloc(void *p, size_t bytes, void **out) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  void *d = NULL;
  cudaError_t e = cudaMallocAsync(&d, bytes ? bytes : 1, st->stream);
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: cudaMallocAsync");
  *out = d;
  return AG_OK;
}

static void cuda_release(void *p, void *ptr) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  cudaFreeAsync(ptr, st->stream);
}

static ag_status cuda_zero(void *p, void *dst, size_t bytes) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  cudaError_t e = cudaMemsetAsync(dst, 0, bytes, st->stream);
  return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, "cuda: cudaMemsetAsync");
}

static ag_status cuda_copy(void *p, void *dst, const void *src, size_t bytes) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st->stream);
  return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, "cuda: device copy");
}

static ag_status cuda_sync(void *p) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  cudaError_t e = cudaStreamSynchronize(st->stream);
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: waiting for the stream");
  if (st->ring_open == 0) st->ring_count = 0; /* every staged copy is done: no event to ask */
  return AG_OK;
}

static void *cuda_native_stream(void *p) { return ((ag__cuda_state *)p)->stream; }

/* The legacy default stream (NULL or cudaStreamLegacy) and the context's
 * blocking stream are ordered by the device itself: work queued on either
 * runs after the work queued on the other before it. */
static int cuda_ordered_with(void *p, void *stream) {
  (void)p;
  return stream == NULL || (cudaStream_t)stream == cudaStreamLegacy;
}

/* ---- staging ring ----
 * Entries are reserved in order; the used bytes run from the oldest entry's
 * start to the newest entry's end, wrapping at most once. The newest
 * ring_open entries belong to a large upload in progress and have no event
 * yet: they are never popped (nothing could say when their copy is done). */

static ag__ring_entry *ring_at(ag__cuda_state *st, int k) {
  return &st->ring[(st->ring_first + k) % AG__CUDA_RING_EVENTS];
}

/* Drops the oldest entry (it must have its event), waiting for its copy when
 * `wait`. */
static ag_status ring_pop(ag__cuda_state *st, int wait) {
  ag__ring_entry *o = ring_at(st, 0);
  cudaError_t e = wait ? cudaEventSynchronize(o->ev) : cudaEventQuery(o->ev);
  if (e == cudaErrorNotReady) return AG_ERR_STATE;
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: staging copy");
  st->ring_first = (st->ring_first + 1) % AG__CUDA_RING_EVENTS;
  st->ring_count--;
  return AG_OK;
}

/* Reserves len bytes (<= staging_size / 2) of staging; writes their offset. */
static ag_status ring_reserve(ag__cuda_state *st, size_t len, size_t *start) {
  while (st->ring_count > st->ring_open && ring_pop(st, 0) == AG_OK) {
  }
  for (;;) {
    if (st->ring_count == 0) {
      *start = 0;
      return AG_OK;
    }
    if (st->ring_count < AG__CUDA_RING_EVENTS) {
      size_t lo = ring_at(st, 0)->start;
      ag__ring_entry *newest = ring_at(st, st->ring_count - 1);
      size_t head = newest->end;
      int wrapped = newest->start < lo;
      if (!wrapped) {
        if (st->staging_size - head >= len) {
          *start = head;
          return AG_OK;
        }
        if (lo >= len) {
          *start = 0;
          return AG_OK;
        }
      } else if (lo - head >= len) {
        *start = head;
        return AG_OK;
      }
    }
    /* open entries hold at most half the ring (AG__UP_WINDOW): not reached */
    if (st->ring_count == st->ring_open)
      return ag__fail(AG_ERR_STATE, "cuda: no staging room for %zu bytes beside an upload's open parts", len);
    ag_status s = ring_pop(st, 1);
    if (s) return s;
  }
}

/* A copy out of staging is queued but its event could not be recorded: its
 * entry is not kept, so its bytes would be reused at once; wait for it. */
static ag_status ring_event_fail(ag__cuda_state *st, cudaError_t e) {
  ag_status s = ag__cuda_fail(e, "cuda: recording a staging event");
  (void)cudaStreamSynchronize(st->stream);
  (void)cudaGetLastError();
  return s;
}

static ag_status ring_push(ag__cuda_state *st, size_t start, size_t len) {
  ag__ring_entry *e = &st->ring[(st->ring_first + st->ring_count) % AG__CUDA_RING_EVENTS];
  e->start = start;
  e->end = start + len;
  cudaError_t r = cudaEventRecord(e->ev, st->stream);
  if (r != cudaSuccess) return ring_event_fail(st, r);
  st->ring_count++;
  return AG_OK;
}

/* ---- large uploads: one fill job, each part sent as soon as it is filled ----
 * The transfer is cut into 2 MB parts of 128 KB slices. The helper threads
 * are woken once for the whole transfer (one ag__pool_run job); every thread
 * claims slices in order and fills them. Task 0, which runs on the calling
 * thread, is the only one that talks to CUDA and touches the ring: it
 * reserves staging for the parts ahead ("opens" them, at most AG__UP_WINDOW
 * parts ahead of the copies), queues the copy of each part, in order, as
 * soon as its last slice is filled, and fills slices itself in between.
 *
 * No thread waits while holding work another needs: a slice is claimed only
 * once its part is open, so every claimed slice gets filled and every open
 * part completes; the caller's only blocking wait (ring_reserve, for room in
 * the ring) is on copies already queued. */

#define AG__UP_MIN ((size_t)4 << 20) /* smaller uploads: one part (cuda_upload) */
#define AG__UP_PART ((size_t)2 << 20)
#define AG__UP_SLICE ((size_t)128 << 10) /* a multiple of every element size */
#define AG__UP_SLICES (AG__UP_PART / AG__UP_SLICE)
/* Open parts at most: half the ring. ring_reserve then always finds room for
 * the next part once the queued copies are done: the open parts (at most
 * 16 MB, contiguous but for one wrap that wastes less than a part) leave a
 * free stretch of at least 8 MB in the 32 MB ring. */
#define AG__UP_WINDOW ((size_t)(AG_TRANSFER_PART_BYTES / AG__UP_PART))
static_assert(AG__UP_WINDOW * AG__UP_PART <= AG_TRANSFER_PART_BYTES, "the window must fit half the ring");
static_assert(AG__UP_PART <= AG__UP_MIN, "a large upload has at least two parts");

#define AG__UP_NONE SIZE_MAX

typedef struct ag__upload {
  ag__cuda_state *st;
  char *dst;
  size_t bytes, n_parts, n_slices;
  ag__fill_fn fill;
  void *user;
  /* part p's staging offset and filled slices, at p % AG__UP_WINDOW: a slot
   * is reused only after its previous part's copy is queued */
  size_t start[AG__UP_WINDOW];
  std::atomic<size_t> filled[AG__UP_WINDOW];
  std::atomic<size_t> next_slice;  /* the next slice to claim */
  std::atomic<size_t> open_slices; /* slices of the open parts: claimable below this */
  std::atomic<bool> failed;        /* the caller failed: claim no more */
  ag_status status;                /* the caller's result */
} ag__upload;

static size_t up_part_len(const ag__upload *up, size_t p) {
  size_t off = p * AG__UP_PART;
  return up->bytes - off < AG__UP_PART ? up->bytes - off : AG__UP_PART;
}

static size_t up_part_slices(const ag__upload *up, size_t p) {
  return (up_part_len(up, p) + AG__UP_SLICE - 1) / AG__UP_SLICE;
}

/* Claims the next slice if its part is open; AG__UP_NONE when none is now. */
static size_t up_claim(ag__upload *up) {
  size_t limit = up->open_slices.load(std::memory_order_acquire); /* publishes start[] */
  size_t j = up->next_slice.load(std::memory_order_relaxed);
  while (j < limit && !up->next_slice.compare_exchange_weak(j, j + 1, std::memory_order_relaxed)) {
  }
  return j < limit ? j : AG__UP_NONE;
}

/* Fills slice j (any thread) and counts it in its part. */
static void up_fill(ag__upload *up, size_t j) {
  size_t p = j / AG__UP_SLICES, off = j * AG__UP_SLICE;
  size_t len = up->bytes - off < AG__UP_SLICE ? up->bytes - off : AG__UP_SLICE;
  char *host = up->st->staging + up->start[p % AG__UP_WINDOW] + (off - p * AG__UP_PART);
  up->fill(host, off, len, up->user); /* a streaming fill has fenced its stores */
  up->filled[p % AG__UP_WINDOW].fetch_add(1, std::memory_order_release); /* publishes the bytes */
}

/* Opens part p (the caller): reserves its staging, adds its ring entry
 * without an event and makes its slices claimable. */
static ag_status up_open(ag__upload *up, size_t p) {
  ag__cuda_state *st = up->st;
  size_t len = up_part_len(up, p), start;
  ag_status s = ring_reserve(st, len, &start); /* may wait for an older copy */
  if (s) return s;
  ag__ring_entry *r = ring_at(st, st->ring_count);
  r->start = start;
  r->end = start + len;
  st->ring_count++;
  st->ring_open++;
  up->start[p % AG__UP_WINDOW] = start;
  up->filled[p % AG__UP_WINDOW].store(0, std::memory_order_relaxed);
  size_t open_slices = (p + 1) * AG__UP_SLICES;
  up->open_slices.store(open_slices < up->n_slices ? open_slices : up->n_slices, std::memory_order_release);
  return AG_OK;
}

/* Queues the copy of part p (the caller, once it is filled) and records the
 * event of its ring entry, the oldest open one. */
static ag_status up_send(ag__upload *up, size_t p) {
  ag__cuda_state *st = up->st;
  size_t off = p * AG__UP_PART;
  cudaError_t e = cudaMemcpyAsync(up->dst + off, st->staging + up->start[p % AG__UP_WINDOW],
                                  up_part_len(up, p), cudaMemcpyHostToDevice, st->stream);
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: upload");
  e = cudaEventRecord(ring_at(st, st->ring_count - st->ring_open)->ev, st->stream);
  if (e != cudaSuccess) return ring_event_fail(st, e); /* the entry stays open, to be dropped */
  st->ring_open--;
  return AG_OK;
}

/* Task 0, on the calling thread: opens parts, queues the copies of filled
 * parts in order, and fills slices while neither can be done. */
static ag_status up_lead(ag__upload *up) {
  size_t opened = 0, sent = 0;
  while (sent < up->n_parts) {
    if (sent < opened &&
        up->filled[sent % AG__UP_WINDOW].load(std::memory_order_acquire) == up_part_slices(up, sent)) {
      ag_status s = up_send(up, sent);
      if (s) return s;
      sent++;
    } else if (opened < up->n_parts && opened - sent < AG__UP_WINDOW) {
      ag_status s = up_open(up, opened);
      if (s) return s;
      opened++;
    } else {
      size_t j = up_claim(up);
      if (j != AG__UP_NONE) {
        up_fill(up, j);
      } else {
        sched_yield(); /* the helpers are filling the rest of part `sent` */
      }
    }
  }
  return AG_OK;
}

/* Tasks 1..n-1, on the helpers: fill slices until all are claimed. */
static void up_help(ag__upload *up) {
  while (!up->failed.load(std::memory_order_acquire)) {
    size_t j = up_claim(up);
    if (j != AG__UP_NONE) {
      up_fill(up, j);
    } else if (up->next_slice.load(std::memory_order_relaxed) >= up->n_slices) {
      return; /* all claimed: the others fill the rest */
    } else {
      sched_yield(); /* the next part opens when an earlier one is sent */
    }
  }
}

static void up_task(void *arg, int i) {
  ag__upload *up = (ag__upload *)arg;
  if (i != 0) {
    up_help(up);
    return;
  }
  up->status = up_lead(up); /* ag__pool_run runs task 0 on the caller */
  if (up->status) up->failed.store(true, std::memory_order_release);
}

static ag_status upload_large(ag__cuda_state *st, void *dst, size_t bytes, ag__fill_fn fill, void *user) {
  ag__upload up;
  up.st = st;
  up.dst = (char *)dst;
  up.bytes = bytes;
  up.n_parts = (bytes + AG__UP_PART - 1) / AG__UP_PART;
  up.n_slices = (bytes + AG__UP_SLICE - 1) / AG__UP_SLICE;
  up.fill = fill;
  up.user = user;
  for (size_t k = 0; k < AG__UP_WINDOW; k++) {
    up.start[k] = 0;
    up.filled[k].store(0, std::memory_order_relaxed);
  }
  up.next_slice.store(0, std::memory_order_relaxed);
  up.open_slices.store(0, std::memory_order_relaxed);
  up.failed.store(false, std::memory_order_relaxed);
  up.status = AG_OK;
  int n = ag__pool_threads();
  if ((size_t)n > up.n_slices) n = (int)up.n_slices;
  ag__pool_run(n, up_task, &up); /* returns when every thread has left the transfer */
  /* on failure, parts left open have no copy pending (ring_event_fail waited
   * for the one that was queued): their staging is free again */
  if (up.status) {
    st->ring_count -= st->ring_open;
    st->ring_open = 0;
  }
  return up.status;
}

/* ---- plain copies: streamed into the ring, or sent from page-locked memory ---- */

/* Plain copies at least this long fill the ring with non-temporal stores
 * (ag__fill_copy_stream); shorter ones keep memcpy. */
#define AG__STREAM_MIN ((size_t)64 << 10)

/* Whether the host address p is page-locked memory that CUDA knows
 * (cudaMallocHost, cudaHostAlloc, cudaHostRegister). */
static bool host_pinned(const void *p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

/* A large plain copy from page-locked memory needs no staging: the copy
 * engine reads the caller's memory itself, at the bus's full rate. But the
 * caller may reuse that memory as soon as the write returns (ag_buffer_write,
 * ag_tensor_write), so the copy must be done by then: it is taken only when
 * the stream is idle, so that the wait is for this copy alone and never for
 * kernels queued before it (those writes keep the staging path, which does
 * not wait). Both ends of the range must be page-locked. The test is only
 * for speed: a copy from any host range is correct, and the wait covers
 * it. */
static bool direct_ok(ag__cuda_state *st, const void *src, size_t bytes) {
  if (bytes < AG__UP_MIN) return false; /* small: staging is cheaper than a wait */
  if (!host_pinned(src) || !host_pinned((const char *)src + bytes - 1)) return false;
  cudaError_t e = cudaStreamQuery(st->stream);
  if (e == cudaSuccess) return true;
  if (e != cudaErrorNotReady) (void)cudaGetLastError(); /* the staging path reports it */
  return false;
}

static ag_status upload_direct(ag__cuda_state *st, void *dst, const void *src, size_t bytes) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st->stream);
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: upload from page-locked memory");
  e = cudaStreamSynchronize(st->stream); /* the caller may reuse src on return */
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: waiting for an upload from page-locked memory");
  return AG_OK;
}

static ag_status cuda_upload(void *p, void *dst, size_t bytes, ag__fill_fn fill, void *user) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  if (fill == ag__fill_copy) { /* user is the source */
    if (direct_ok(st, user, bytes)) return upload_direct(st, dst, user, bytes);
    if (bytes >= AG__STREAM_MIN) fill = ag__fill_copy_stream;
  }
  if (bytes >= AG__UP_MIN) return upload_large(st, dst, bytes, fill, user);
  if (bytes == 0) return AG_OK;
  /* one part: filled (by the helper threads from 512 KB), then sent */
  size_t start;
  ag_status s = ring_reserve(st, bytes, &start);
  if (s) return s;
  ag__fill_parallel(fill, user, st->staging + start, 0, bytes);
  cudaError_t e = cudaMemcpyAsync(dst, st->staging + start, bytes, cudaMemcpyHostToDevice, st->stream);
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: upload");
  return ring_push(st, start, bytes);
}

/* ---- small inputs read in place (ag__backend.stage) ----
 * The bytes go into a ring entry like an upload's, held open (no event)
 * until the kernels that read them are queued: stage_done records the
 * event that frees them. */
static ag_status cuda_stage(void *p, size_t bytes, ag__fill_fn fill, void *user, void **dev) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  if (!st->staging_dev) return ag__fail(AG_ERR_UNSUPPORTED, "cuda: the staging memory is not mapped");
  if (bytes == 0 || bytes > AG__STAGE_MAX || st->ring_open || st->staged)
    return ag__fail(AG_ERR_INVALID_ARG, "cuda: stage of %zu bytes (at most %zu, one at a time)", bytes,
                    (size_t)AG__STAGE_MAX);
  /* the ring's entries end wherever their bytes do: the kernels' loads
   * want the inputs 256-aligned, so the entry holds room to align them */
  const size_t len = bytes + 255;
  size_t start;
  ag_status s = ring_reserve(st, len, &start);
  if (s) return s;
  const size_t at = (start + 255) & ~(size_t)255; /* the staging memory itself is page-aligned */
  fill(st->staging + at, 0, bytes, user);
  ag__ring_entry *r = ring_at(st, st->ring_count);
  r->start = start;
  r->end = start + len;
  st->ring_count++;
  st->ring_open++;
  st->staged = 1;
  *dev = st->staging_dev + at;
  return AG_OK;
}

static ag_status cuda_stage_done(void *p) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  if (!st->staged) return AG_OK;
  st->staged = 0;
  cudaError_t e = cudaEventRecord(ring_at(st, st->ring_count - 1)->ev, st->stream);
  if (e != cudaSuccess) { /* the readers are queued but cannot be marked: wait for them */
    ag_status s = ring_event_fail(st, e);
    st->ring_count--;
    st->ring_open--;
    return s;
  }
  st->ring_open--;
  return AG_OK;
}

static ag_status cuda_download(void *p, const void *src, size_t bytes, ag__drain_fn drain, void *user) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  const ag_status s = cuda_sync(p); /* the data is written; every staged upload is done */
  if (s != AG_OK) return s;
  cudaError_t e = cudaSuccess;
  const size_t part = AG_TRANSFER_PART_BYTES;
  size_t nparts = (bytes + part - 1) / part;
  for (size_t i = 0; i <= nparts && e == cudaSuccess; i++) {
    if (i < nparts) { /* start part i into half i % 2 */
      size_t off = i * part, len = bytes - off < part ? bytes - off : part;
      e = cudaMemcpyAsync(st->staging + (i % 2) * part, (const char *)src + off, len, cudaMemcpyDeviceToHost,
                          st->stream);
      if (e == cudaSuccess) e = cudaEventRecord(st->part_ev[i % 2], st->stream);
    }
    if (i > 0 && e == cudaSuccess) { /* finish part i-1 */
      size_t k = i - 1, off = k * part, len = bytes - off < part ? bytes - off : part;
      e = cudaEventSynchronize(st->part_ev[k % 2]);
      if (e == cudaSuccess) drain(st->staging + (k % 2) * part, off, len, user);
    }
  }
  return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, "cuda: download");
}

/* ---- memory outside the stream order ---- */

static ag_status cuda_alloc_static(void *p, size_t bytes, void **out) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  void *d = NULL;
  cudaError_t e = cudaMalloc(&d, bytes ? bytes : 1);
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: cudaMalloc");
  *out = d;
  return AG_OK;
}

static void cuda_release_static(void *p, void *ptr) {
  ag__cuda_enter((ag__cuda_state *)p);
  cudaFree(ptr); /* waits for the device: no recorded graph still reads it */
}

static ag_status cuda_host_alloc(void *p, size_t bytes, void **out) {
  ag__cuda_enter((ag__cuda_state *)p);
  void *h = NULL;
  cudaError_t e = cudaMallocHost(&h, bytes);
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: cudaMallocHost");
  *out = h;
  return AG_OK;
}

static void cuda_host_free(void *p, void *ptr) {
  ag__cuda_enter((ag__cuda_state *)p);
  cudaFreeHost(ptr);
}

/* ---- kernels ---- */

ag_status ag__cuda_nstep(ag__cuda_state *st, const void *args);       /* nstep.cu */
ag_status ag__cuda_frame_stack(ag__cuda_state *st, const void *args); /* frames.cu */

/* in the order of ag__kernel_id */
static const ag__cuda_launch_fn launchers[AG__K_COUNT] = {
    ag__cuda_gather,      ag__cuda_gemm,          ag__cuda_map,
    ag__cuda_map2,        ag__cuda_reduce,        ag__cuda_pick,
    ag__cuda_pick_bwd,    ag__cuda_fill,          ag__cuda_copy,
    ag__cuda_adam_prep,   ag__cuda_adam,          ag__cuda_sumsq,
    ag__cuda_axpby,       ag__cuda_randint,       ag__cuda_td_target,
    ag__cuda_loss,        ag__cuda_per_set,       ag__cuda_per_fill,
    ag__cuda_per_sample,  ag__cuda_qgrad,         ag__cuda_convert,
    ag__cuda_set_i64,     ag__cuda_nstep,         ag__cuda_randn,
    ag__cuda_acgrad,      ag__cuda_gather_fields, ag__cuda_scatter_fields,
    ag__cuda_frame_stack, ag__cuda_conv2d,
};

static ag_status cuda_run(void *p, ag__kernel_id id, const void *args, size_t size) {
  (void)size;
  if ((int)id < 0 || id >= AG__K_COUNT || !launchers[id])
    return ag__fail(AG_ERR_UNSUPPORTED, "cuda: kernel %d is not provided", (int)id);
  return launchers[id]((ag__cuda_state *)p, args);
}

static size_t cuda_scratch(void *p, ag__kernel_id id, const void *args, size_t size) {
  (void)p, (void)size;
  return id == AG__K_ADAM     ? ag__cuda_adam_scratch(args)
         : id == AG__K_QGRAD  ? ag__cuda_qgrad_scratch(args)
         : id == AG__K_ACGRAD ? ag__cuda_acgrad_scratch(args)
         : id == AG__K_CONV2D ? ag__cuda_conv2d_scratch(args)
                              : 0;
}

/* ---- recording: stream capture into a CUDA graph ---- */

/* Kernels and cuBLAS go to `q` from now on. */
static void set_queue(ag__cuda_state *st, cudaStream_t q) {
  st->stream = q;
  if (st->blas) cublasSetStream(st->blas, q);
}

static ag_status cuda_record_begin(void *p) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  cudaError_t e = cudaSuccess;
  if (!st->capture) e = cudaStreamCreateWithFlags(&st->capture, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaStreamBeginCapture(st->capture, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: beginning a stream capture");
  set_queue(st, st->capture);
  st->recording = 1;
  return AG_OK;
}

/* A recording: the instantiated graph, replayed on the stream, and the
 * graph itself, which another framework's capture takes as a child node. */
struct cuda_rec {
  cudaGraphExec_t exec;
  cudaGraph_t graph;
};

static ag_status cuda_record_end(void *p, int ok, void **rec, int *n_nodes) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  cudaGraph_t graph = NULL;
  cudaError_t e = cudaStreamEndCapture(st->capture, &graph);
  set_queue(st, st->main);
  st->recording = 0;
  if (!ok) {
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return AG_OK;
  }
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: ending the stream capture");
  cuda_rec *r = (cuda_rec *)calloc(1, sizeof *r);
  if (!r) {
    cudaGraphDestroy(graph);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "cuda: out of host memory for a recording");
  }
  size_t n = 0;
  e = cudaGraphGetNodes(graph, NULL, &n);
  if (e == cudaSuccess) e = cudaGraphInstantiate(&r->exec, graph, 0);
  if (e != cudaSuccess) {
    cudaGraphDestroy(graph);
    free(r);
    return ag__cuda_fail(e, "cuda: instantiating the recorded graph");
  }
  e = cudaGraphUpload(r->exec, st->stream);
  if (e != cudaSuccess) {
    cudaGraphExecDestroy(r->exec);
    cudaGraphDestroy(graph);
    free(r);
    return ag__cuda_fail(e, "cuda: uploading the recorded graph");
  }
  r->graph = graph;
  *rec = r;
  *n_nodes = (int)n;
  return AG_OK;
}

static ag_status cuda_replay(void *p, void *rec) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  cudaError_t e = cudaGraphLaunch(((cuda_rec *)rec)->exec, st->stream);
  return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, "cuda: launching the recorded graph");
}

/* On a stream another framework is capturing, a graph launch is refused:
 * the recording joins that capture as a child-graph node after the
 * stream's current dependencies, and becomes the stream's one dependency. */
static ag_status cuda_replay_on(void *p, void *rec, void *stream) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  ag__cuda_enter(st);
  cuda_rec *r = (cuda_rec *)rec;
  cudaStream_t s = (cudaStream_t)stream;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = NULL;
  const cudaGraphNode_t *deps = NULL;
  const cudaGraphEdgeData *edges = NULL;
  size_t n_deps = 0;
  cudaError_t e = cudaStreamGetCaptureInfo(s, &status, NULL, &graph, &deps, &edges, &n_deps);
  if (e != cudaSuccess) return ag__cuda_fail(e, "cuda: asking whether a stream is capturing");
  if (status != cudaStreamCaptureStatusActive) {
    e = cudaGraphLaunch(r->exec, s);
    return e == cudaSuccess ? AG_OK
                            : ag__cuda_fail(e, "cuda: launching the recorded graph on another stream");
  }
  /* after every current dependency in full (a stronger order than any
   * programmatic edge among them asks for) */
  (void)edges;
  cudaGraphNode_t node = NULL;
  e = cudaGraphAddChildGraphNode(&node, graph, deps, n_deps, r->graph);
  if (e == cudaSuccess)
    e = cudaStreamUpdateCaptureDependencies(s, &node, NULL, 1, cudaStreamSetCaptureDependencies);
  return e == cudaSuccess ? AG_OK : ag__cuda_fail(e, "cuda: adding the recorded graph to a stream capture");
}

static void cuda_record_free(void *p, void *rec) {
  ag__cuda_enter((ag__cuda_state *)p);
  cuda_rec *r = (cuda_rec *)rec;
  cudaGraphExecDestroy(r->exec);
  cudaGraphDestroy(r->graph);
  free(r);
}

static const ag__backend cuda_backend = {
    "cuda",
    AG_DEVICE_CUDA,
    cuda_open,
    cuda_close,
    cuda_mem_info,
    cuda_alloc,
    cuda_release,
    cuda_zero,
    cuda_upload,
    cuda_download,
    cuda_copy,
    cuda_sync,
    cuda_native_stream,
    cuda_alloc_static,
    cuda_release_static,
    cuda_host_alloc,
    cuda_host_free,
    cuda_run,
    NULL,
    cuda_scratch,
    cuda_record_begin,
    cuda_record_end,
    cuda_replay,
    cuda_record_free,
    AG__CUDA_COMM,
    cuda_replay_on,
    cuda_stage,
    cuda_stage_done,
    cuda_ordered_with,
};

extern "C" const ag__backend *ag__cuda_backend(void) { return &cuda_backend; }
