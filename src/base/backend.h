/* backend.h — the backend vtable: what a device must provide.
 *
 * A backend is a table of plain C function pointers over an opaque state
 * (`void *st`) opened for one device. It knows nothing of buffers, tensors or
 * contexts: the core (src/core) validates arguments, counts transfers and
 * injects faults, then calls here. Every call that touches device memory is
 * ordered on the backend's queue (the CPU backend runs it at once).
 *
 * No CUDA type appears here, so that other backends (Vulkan later) fit.
 * This header is included from C and from CUDA C++.
 */
#ifndef AGRL_CORE_BACKEND_H
#define AGRL_CORE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "agrl/status.h"
#include "agrl/tensor.h"
#include "base/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills or drains `len` bytes of a transfer stream starting at byte `off`
 * (off and len are multiples of the element size). Used so that host-side
 * conversion and copies go straight into (out of) staging memory. */
typedef void (*ag__fill_fn)(void *host_dst, size_t off, size_t len, void *user);
typedef void (*ag__drain_fn)(const void *host_src, size_t off, size_t len, void *user);

/* ---- collectives: one communicator a process, one device each ----
 * A group of `world` processes joins with an id that one of them makes and
 * the others receive (as opaque bytes; src/dist passes them through a
 * file). The collectives take device memory and run on the backend's queue
 * (so a recording records them); a call on several buffers is one grouped
 * operation. `fn` names the public call in messages. Deadlines are
 * ag__mono_s() times (base.h); 0: none. */
typedef enum ag__comm_reduce { AG__COMM_SUM = 0, AG__COMM_MEAN = 1, AG__COMM_MAX = 2 } ag__comm_reduce;

/* The largest id any backend makes. */
#define AG__COMM_ID_MAX 256

/* One buffer of a collective: count elements of dtype at ptr. */
typedef struct ag__comm_buf {
  void *ptr;
  size_t count;
  ag_dtype dtype;
} ag__comm_buf;

typedef struct ag__comm_ops {
  size_t id_bytes; /* bytes of a group id (at most AG__COMM_ID_MAX) */
  /* Whether groups of several processes can be made (the library found). */
  int (*available)(void);
  /* Writes a fresh group id (id_bytes bytes). */
  ag_status (*make_id)(void *id, const char *fn);
  /* Joins group `id` as `rank` of `world` on st's device, giving up at
   * `deadline` (AG_ERR_TIMEOUT); on failure nothing is kept. */
  ag_status (*init)(void *st, int rank, int world, const void *id, double deadline, const char *fn,
                    void **comm);
  /* In place: every buffer becomes its reduction over the ranks (a mean:
   * f32 only). */
  ag_status (*allreduce)(void *st, void *comm, const ag__comm_buf *bufs, int n, ag__comm_reduce op,
                         const char *fn);
  /* In place: every buffer takes rank root's value. */
  ag_status (*broadcast)(void *st, void *comm, const ag__comm_buf *bufs, int n, int root, const char *fn);
  /* dst (world * src.count elements) = every rank's src in rank order. */
  ag_status (*allgather)(void *st, void *comm, ag__comm_buf src, void *dst, const char *fn);
  /* Leaving: finalize waits (until `deadline`) for the group's pending
   * work; destroy then releases comm, or with `abort` (after a failed
   * finalize) tears it down without waiting for the peers. */
  ag_status (*finalize)(void *comm, double deadline, const char *fn);
  void (*destroy)(void *comm, int abort);
} ag__comm_ops;

typedef struct ag__backend {
  const char *name; /* "cpu", "cuda" */
  ag_device_kind kind;

  /* Opens device `index`; writes its state and a description ("cuda:0 (...)"). */
  ag_status (*open)(int index, void **st, char *desc, size_t desc_len);
  /* Waits for the queue and releases the state (memory must be freed first). */
  void (*close)(void *st);
  ag_status (*mem_info)(void *st, size_t *free_bytes, size_t *total_bytes);

  /* Uninitialised device memory, aligned to at least 256 bytes. */
  ag_status (*alloc)(void *st, size_t bytes, void **out);
  /* Releases memory after the queued work that uses it. */
  void (*release)(void *st, void *p);
  ag_status (*zero)(void *st, void *dst, size_t bytes);
  /* Host -> device: `fill` writes the bytes into host memory that the backend
   * provides (staging), in parts; ordered; the caller's memory may be reused
   * when the call returns. */
  ag_status (*upload)(void *st, void *dst, size_t bytes, ag__fill_fn fill, void *user);
  /* Device -> host: waits for queued work, then hands the bytes to `drain`
   * in parts of at most AG_TRANSFER_PART_BYTES. */
  ag_status (*download)(void *st, const void *src, size_t bytes, ag__drain_fn drain, void *user);
  ag_status (*copy)(void *st, void *dst, const void *src, size_t bytes);
  ag_status (*sync)(void *st);
  /* The native queue handle (cudaStream_t) or NULL. */
  void *(*native_stream)(void *st);

  /* Memory outside the stream order (cudaMalloc): for recordings, whose
   * workspace must not be a node of the recorded graph. */
  ag_status (*alloc_static)(void *st, size_t bytes, void **out);
  void (*release_static)(void *st, void *p);

  /* Page-locked host memory (ordinary memory on the CPU). */
  ag_status (*host_alloc)(void *st, size_t bytes, void **out);
  void (*host_free)(void *st, void *p);

  /* ---- kernels ---- */
  /* Runs (or, while recording, records) kernel `id` with its arguments
   * (kernels.h); `args` may be reused when the call returns. */
  ag_status (*run)(void *st, ag__kernel_id id, const void *args, size_t size);
  /* Whether run() takes kernel `id` with these arguments: a backend may lack
   * a kernel (a fused one, say) or take it for some shapes only; its caller
   * then composes the same work from other kernels. NULL: it takes every
   * kernel of kernels.h with any arguments that header allows. */
  int (*supports)(void *st, ag__kernel_id id, const void *args, size_t size);
  /* Bytes of device scratch kernel `id` needs with these arguments, which
   * the caller provides through the arguments' scratch field (see
   * kernels.h). st may be NULL: the answer depends on the arguments only,
   * so that memory can be made before the context is on this backend.
   * NULL: no kernel needs scratch. */
  size_t (*scratch)(void *st, ag__kernel_id id, const void *args, size_t size);

  /* ---- recording ----
   * Between record_begin and record_end, kernels are recorded, not run;
   * record_end always ends the recording and, when ok, writes a replayable
   * handle (and its number of nodes). replay runs it on the queue. */
  ag_status (*record_begin)(void *st);
  ag_status (*record_end)(void *st, int ok, void **rec, int *n_nodes);
  ag_status (*replay)(void *st, void *rec);
  void (*record_free)(void *st, void *rec);

  /* ---- collectives ----
   * NULL: this backend (or this build of it) has none, and only groups of
   * one process can be made on it. */
  const ag__comm_ops *comm;

  /* Replays a recording on `stream`, another native queue of the device,
   * instead of the backend's own (the caller orders the two). NULL: the
   * backend has no other queues (replay is used). */
  ag_status (*replay_on)(void *st, void *rec, void *stream);

  /* ---- small inputs read in place ----
   * stage reserves `bytes` (at most AG__STAGE_MAX) of page-locked host
   * memory that kernels read directly, has `fill` write them, and writes
   * the address the device reads them at: no copy is queued. The caller
   * then queues the kernels that read them and calls stage_done, which
   * keeps the bytes until that work has run (nothing but kernels may be
   * queued in between). A failed stage leaves nothing reserved. NULL: the
   * backend has no such memory (the caller uploads into device memory). */
  ag_status (*stage)(void *st, size_t bytes, ag__fill_fn fill, void *user, void **dev);
  ag_status (*stage_done)(void *st);

  /* 1 when work queued on `stream` (a native queue of the device) and on
   * the backend's own queue is ordered by the device itself, each after
   * what the other had queued before it, so that handing memory between
   * them needs no mark (CUDA: the legacy default stream and a blocking
   * stream). NULL: never. */
  int (*ordered_with)(void *st, void *stream);
} ag__backend;

/* The largest stage() a backend takes: inputs of a call (a priority update,
 * one transition), not bulk data, which the copy engine moves faster. */
#define AG__STAGE_MAX ((size_t)64 << 10)

const ag__backend *ag__cpu_backend(void);
/* NULL when the library was built without CUDA. */
const ag__backend *ag__cuda_backend(void);
/* Number of CUDA devices (0 without CUDA, driver or device). */
int ag__cuda_device_count(void);
/* NULL when the library was built without Vulkan. */
const ag__backend *ag__vulkan_backend(void);
/* Number of usable Vulkan devices (Vulkan 1.2, a compute queue, buffer
 * device addresses; 0 without Vulkan, loader or driver). */
int ag__vulkan_device_count(void);
/* The Khronos validation layer's errors over every Vulkan state of the
 * process so far, the states it checked into *states, and the last error's
 * message into last (0 and 0 without Vulkan). */
int ag__vulkan_validation_total(int *states, char *last, size_t last_len);
/* For tests: the VkDeviceMemory objects Vulkan state st holds now; with
 * limit > 0 it may hold at most limit from now on (never more than the
 * device's maxMemoryAllocationCount). 0 without Vulkan. */
uint32_t ag__vulkan_memory_objects(void *st, uint32_t limit);
/* Commands the Vulkan backend state `state` (an ag_ctx's st) has encoded
 * into command buffers on the host so far (0 without Vulkan): a replay
 * adds none. */
uint64_t ag__vulkan_encodes(const void *state);

/* ---- memory handed to other frameworks (agrl/export.h) ----
 * Calls that need no open backend state, so that they work from any thread
 * (a consumer's deleter) and after the context that made the memory is gone.
 * `stream` is a native queue handle (a cudaStream_t: NULL and the values 1
 * and 2 are CUDA's legacy and per-thread default streams); a mark is an
 * event recorded on one. */
typedef struct ag__handoff_ops {
  /* Memory outside the stream order on device `index`, and its release. */
  ag_status (*alloc)(int index, size_t bytes, void **out);
  void (*free)(int index, void *p);
  /* A mark after the work queued on `stream` (of device `index`) so far,
   * made anew or, when `reuse` is a mark whose earlier waits are all queued,
   * recorded again into it. NULL: there is nothing to wait for (the CPU),
   * or it could not be made (then the call has waited for the stream on
   * the host instead, and `reuse`, if any, has been freed). */
  void *(*mark)(int index, void *stream, void *reuse);
  /* `stream` waits for the mark, queued (no host wait). */
  ag_status (*wait)(void *stream, void *mark);
  /* 1 when the work before the mark has finished. */
  int (*done)(void *mark);
  void (*host_wait)(void *mark);
  void (*mark_free)(void *mark);
} ag__handoff_ops;

const ag__handoff_ops *ag__cpu_handoff(void);
/* NULL when the library was built without CUDA. */
const ag__handoff_ops *ag__cuda_handoff(void);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_CORE_BACKEND_H */
