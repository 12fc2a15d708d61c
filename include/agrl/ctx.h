/* agrl/ctx.h — contexts: a device, its queue, a workspace, transfer counters.
 *
 * A context owns one device (the CPU or CUDA device N). All device work of
 * the context (writes, gathers, ops, replays) is ordered on its queue: on a
 * CUDA device this is one CUDA stream, on the CPU work runs at once in call
 * order. The CUDA stream is a blocking one: work queued on the device's
 * legacy default stream (where torch and CuPy queue theirs unless told
 * otherwise) runs after the context's work queued before it, and the
 * context's after it, ordered by the device with no call. Results of
 * operations live in the context's workspace until ag_ctx_reset(); buffers
 * and persistent tensors have their own lifetime.
 *
 * A context is used by one thread at a time.
 */
#ifndef AGRL_CTX_H
#define AGRL_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "agrl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_ctx ag_ctx;

typedef enum ag_device_kind {
  AG_DEVICE_CPU = 0,
  AG_DEVICE_CUDA = 1,
  AG_DEVICE_AUTO = 2, /* CUDA device 0 when one is present, else the CPU */
  /* A Vulkan 1.2 device with buffer device addresses. It runs every kernel
   * except the fused DQN and actor-critic updates (the agents compose those
   * from other kernels). RANDN (ag_randn) and the prioritized-replay kernels
   * (agrl/replay.h's ag_per_*) need shaderFloat64: on a device without it
   * they report AG_ERR_UNSUPPORTED. */
  AG_DEVICE_VULKAN = 3
} ag_device_kind;

/* The largest device index a device name may give ("cuda:1023"). */
#define AG_DEVICE_INDEX_MAX 1023

/* Number of CUDA devices usable by agrl: 0 when the library was built
 * without CUDA, when no driver is loaded or no device is present. */
AG_API int ag_cuda_device_count(void);

/* Number of devices of `kind` usable by agrl (the CPU: 1; CUDA as above;
 * Vulkan: devices of Vulkan 1.2 with a compute queue and buffer device
 * addresses; 0 for AG_DEVICE_AUTO, an unknown kind, or a kind this build
 * lacks). */
AG_API int ag_device_count(ag_device_kind kind);

/* Parses a device name, as the command line and the Python package take it:
 *   "auto"            AG_DEVICE_AUTO, index 0
 *   "cpu"             AG_DEVICE_CPU, index 0
 *   "cuda", "vulkan"  that kind, index 0
 *   "cuda:N", "vulkan:N"
 *                     that kind, index N, where N is one or more decimal
 *                     digits (no sign, blank or other character) of a value
 *                     from 0 to AG_DEVICE_INDEX_MAX (1023)
 * and nothing else: names are lower case and match whole. Every device
 * kind agrl knows has its name, whether or not this build has its backend;
 * whether the device exists is for ag_ctx_create to say.
 * Errors: AG_ERR_INVALID_ARG: an argument NULL, a name not of this grammar
 * or an index beyond AG_DEVICE_INDEX_MAX; *kind and *index are then
 * untouched. */
AG_API ag_status ag_device_parse(const char *name, ag_device_kind *kind, int *index);

/* Creates a context on `kind` (device `index` for CUDA; ignored for the CPU).
 * On success *out owns the context; free it with ag_ctx_free().
 * Errors: AG_ERR_INVALID_ARG (out NULL, bad kind), AG_ERR_NO_DEVICE (a
 * build without the kind's backend, or no device `index` of it, negative
 * ones included),
 * AG_ERR_OUT_OF_MEMORY, AG_ERR_DEVICE. *out is untouched on error. */
AG_API ag_status ag_ctx_create(ag_ctx **out, ag_device_kind kind, int index);

/* Waits for the context's queue, then frees every buffer, tensor and
 * recording still owned by the context and the context itself. NULL is
 * accepted. Objects made on it that hold more (MLPs, optimizers, RNGs,
 * replay tables, DQNs, groups, ag_host_alloc memory) are freed before it. */
AG_API void ag_ctx_free(ag_ctx *ctx);

/* The device the context computes on now (never AG_DEVICE_AUTO). */
AG_API ag_device_kind ag_ctx_device(const ag_ctx *ctx);
AG_API int ag_ctx_device_index(const ag_ctx *ctx);

/* A short description of the device: "cpu" or "cuda:0 (NVIDIA H200)". */
AG_API const char *ag_ctx_device_name(const ag_ctx *ctx);

/* Switches the context to another device (S18).
 * CUDA -> CPU: every buffer and persistent tensor on the device is first
 * copied to host memory in parts of 16 MB; only when all copies succeeded is
 * the device memory released and the device left. If any copy fails, the
 * switch is aborted: the context stays on its device, every object keeps its
 * value, and the status says what failed.
 * CPU -> CUDA: objects stay on the host and are uploaded at their next use
 * on the device, each into a new allocation with a new generation (S19).
 * The workspace is reset by a switch (temporary tensors become invalid),
 * and groups made on the context (agrl/dist.h) end. Switching to the device
 * already in use is a no-op. Errors: AG_ERR_INVALID_ARG: ctx NULL, a bad
 * kind; AG_ERR_NO_DEVICE as for ag_ctx_create; AG_ERR_STATE while a step is
 * being recorded; AG_ERR_OUT_OF_MEMORY (host copies); AG_ERR_DEVICE. */
AG_API ag_status ag_ctx_set_device(ag_ctx *ctx, ag_device_kind kind, int index);

/* Blocks until all work queued on the context has finished (S6: for
 * consumers outside the context). Errors: AG_ERR_INVALID_ARG: ctx NULL;
 * AG_ERR_STATE while a step is being recorded; AG_ERR_DEVICE. */
AG_API ag_status ag_ctx_sync(ag_ctx *ctx);

/* The native queue: a cudaStream_t on CUDA, NULL on the CPU. For handing
 * results to another framework; agrl keeps ownership. */
AG_API void *ag_ctx_native_stream(const ag_ctx *ctx);

/* Host memory that transfers can read at full speed (page-locked on a CUDA
 * device, ordinary memory on the CPU), for data that is written into
 * buffers often. Free with ag_host_free on the same context (NULL is
 * accepted) before the context is freed or switches device: the memory
 * belongs to the device's allocator. Errors: AG_ERR_INVALID_ARG: ctx or
 * out NULL, bytes = 0; AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_host_alloc(ag_ctx *ctx, size_t bytes, void **out);
AG_API void ag_host_free(ag_ctx *ctx, void *p);

/* Releases every temporary tensor of the workspace (results of operations);
 * their handles become invalid. Buffers, persistent tensors and recordings
 * are not affected (S17). Memory is kept for reuse. Does nothing while a
 * step is being recorded. */
AG_API void ag_ctx_reset(ag_ctx *ctx);

/* Free and total memory of the context's device in bytes, as the device
 * reports it (on the CPU: available and total physical memory).
 * Errors: AG_ERR_INVALID_ARG: an argument NULL; AG_ERR_STATE while a step
 * is being recorded; AG_ERR_DEVICE. */
AG_API ag_status ag_ctx_mem_info(ag_ctx *ctx, size_t *free_bytes, size_t *total_bytes);

/* ---- transfer accounting (S20) -------------------------------------------
 * Every byte that crosses between the caller's host memory and the context's
 * storage is counted, per operation name ("ag_buffer_write", "ag_get_rows",
 * "ag_buffer_read", "upload", "rescue" ...). On the CPU backend the same
 * copies happen inside host memory and are counted alike, so that the same
 * checks hold on both devices. */
typedef struct ag_xfer_entry {
  const char *op;      /* operation name; valid while the context lives */
  uint64_t up_bytes;   /* host -> device */
  uint64_t down_bytes; /* device -> host */
  uint64_t up_calls;
  uint64_t down_calls;
} ag_xfer_entry;

/* Totals over all operations since the last reset. Either pointer may be NULL. */
AG_API void ag_xfer_total(const ag_ctx *ctx, uint64_t *up_bytes, uint64_t *down_bytes);

/* Bytes for one operation name (0 and 0 if it never transferred). */
AG_API void ag_xfer_get(const ag_ctx *ctx, const char *op, uint64_t *up_bytes, uint64_t *down_bytes);

/* Number of operation names recorded, and the i-th entry (0-based).
 * Errors: AG_ERR_INVALID_ARG: ctx or out NULL; AG_ERR_OUT_OF_RANGE: i
 * outside 0..count-1. */
AG_API int ag_xfer_count(const ag_ctx *ctx);
AG_API ag_status ag_xfer_entry_at(const ag_ctx *ctx, int i, ag_xfer_entry *out);

/* Sets every counter to zero. */
AG_API void ag_xfer_reset(ag_ctx *ctx);

/* ---- statistics ---------------------------------------------------------- */
typedef struct ag_ctx_stats {
  uint64_t allocs;          /* storage allocations on the current backend */
  uint64_t frees;           /* storage releases */
  uint64_t live_bytes;      /* bytes allocated and not yet released */
  uint64_t workspace_bytes; /* bytes held by the workspace (in use or kept) */
  uint64_t syncs;           /* host waits on the queue */
  uint64_t kernels;         /* kernels run (or recorded) */
  uint64_t replays;         /* recordings replayed */
  uint64_t records;         /* recordings made (first records and re-records) */
} ag_ctx_stats;

AG_API void ag_ctx_get_stats(const ag_ctx *ctx, ag_ctx_stats *out);

/* ---- fault injection (for tests of error paths) --------------------------
 * After `after` further successful operations of the kind, the next one fails
 * once with AG_ERR_DEVICE (upload/download) or AG_ERR_OUT_OF_MEMORY
 * (allocation). A negative `after` disarms. Device allocations, uploads and
 * downloads are counted per context; host allocations (AG_FAULT_HOST_ALLOC:
 * every malloc of the library) are counted on the calling thread, whatever
 * the context, and for that kind ctx may be NULL.
 * Errors: AG_ERR_INVALID_ARG: an unknown kind, ctx NULL for another kind. */
typedef enum ag_fault {
  AG_FAULT_ALLOC = 0,
  AG_FAULT_UPLOAD = 1,
  AG_FAULT_DOWNLOAD = 2,
  AG_FAULT_HOST_ALLOC = 3,
  AG_FAULT_COUNT_ = 4
} ag_fault;

AG_API ag_status ag_ctx_inject_fault(ag_ctx *ctx, ag_fault kind, int64_t after);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_CTX_H */
