/* internal.h — the core: the structures behind the opaque handles, and what
 * every core file and the layers above share: the device-memory wrappers
 * that count transfers and inject faults, stores (persistent memory that
 * follows the context across device switches), the workspace, snapshots.
 *
 * Internal non-static symbols carry the double prefix ag__.
 */
#ifndef AGRL_CORE_INTERNAL_H
#define AGRL_CORE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "agrl/buffer.h"
#include "agrl/ctx.h"
#include "agrl/status.h"
#include "agrl/tensor.h"
#include "base/backend.h"
#include "base/base.h"
#include "base/kernels.h"
#include "base/seed.h" /* the seed streams, for the layers above (agent/ over nn/ and replay/) */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- stores: persistent memory owned by a buffer or a tensor ---- */

typedef enum ag__owner_kind { AG__OWNER_BUFFER = 1, AG__OWNER_TENSOR = 2 } ag__owner_kind;

typedef struct ag__store {
  struct ag__store *prev, *next; /* the context's list of live stores */
  void *ptr;                     /* memory on backend `on`, NULL if none */
  const ag__backend *on;         /* ctx->be (resident) or the CPU backend (host copy) */
  size_t bytes;
  uint64_t gen; /* generation of the current allocation (S19) */
  ag__owner_kind owner_kind;
  void *owner;
} ag__store;

/* ---- workspace: a bump arena of device memory, tensor headers, the tape ---- */

typedef struct ag__chunk {
  void *ptr;
  size_t size;
} ag__chunk;

#define AG__TENSOR_SLAB 256

typedef struct ag__tensor_slab {
  struct ag__tensor_slab *next;
  struct ag_tensor *items; /* AG__TENSOR_SLAB headers */
} ag__tensor_slab;

/* One recorded operation of the autograd tape. */
typedef struct ag__node {
  int op; /* ag__op (graph.c) */
  struct ag_tensor *in[3];
  struct ag_tensor *out;
  float f[2];
  int64_t i[2];
  void *aux; /* e.g. argmax indices on the device */
} ag__node;

typedef struct ag__workspace {
  ag__chunk *chunks;
  int n_chunks, cap_chunks;
  int cur;       /* chunk being filled */
  size_t used;   /* bytes used in chunks[cur] */
  size_t total;  /* bytes held in all chunks */
  int is_static; /* memory from alloc_static (a recording's workspace) */
  ag__tensor_slab *slabs, *slab_cur;
  int slab_used;
  ag__node *tape;
  int n_tape, cap_tape;
} ag__workspace;

/* ---- tensors and buffers ---- */

enum {
  AG__T_PERSISTENT = 1u,    /* owns a store */
  AG__T_FREED = 2u,         /* freed, or its workspace was reset */
  AG__T_REQUIRES_GRAD = 4u, /* gradients flow into it */
  AG__T_GRAD_INIT = 8u,     /* its (temporary) gradient has been written */
  AG__T_IS_GRAD = 16u,      /* the persistent gradient of tensor `base` */
  AG__T_GRAD_STALE = 32u    /* zeroed by ag_zero_grad but not yet written: the
                               next contribution writes instead of adding */
};

struct ag_tensor {
  ag_ctx *ctx;
  int64_t rows, cols;
  int64_t ld; /* leading dimension: element (r, c) at data[c * ld + r] */
  ag_dtype dtype;
  uint32_t flags;
  void *data; /* temporaries and views: device memory */
  struct ag_tensor *grad;
  struct ag_tensor *base; /* a view's tensor (its offset is on the tape node) */
  int node;               /* tape index of the op that made it, -1 for none */
  int uses;               /* taped ops that read it (a gradient may be shared when 1) */
  ag__store store;        /* persistent tensors only */
};

struct ag_buffer {
  ag_ctx *ctx;
  int64_t rows, capacity;
  ag_dtype dtype;
  float scale;
  int freed;
  ag__store store;
  struct ag_buffer *next_handle; /* every handle of the context, freed ones too */
};

/* ---- the context ---- */

#define AG__XFER_MAX 64

struct ag_ctx {
  const ag__backend *be;
  void *st;
  ag_device_kind kind;
  int index;
  char desc[128];

  ag__store stores; /* sentinel of the circular list of live stores */
  ag_buffer *handles;

  ag__workspace ws_main;
  ag__workspace *ws;                     /* ws_main, or a recording's while it records */
  struct ag_capture *recording;          /* the recording in progress, or NULL (opaque here) */
  struct ag_capture *captures;           /* every live recording (opaque here) */
  const struct ag__capture_hooks *hooks; /* set by the graph layer's first recording */
  uint64_t epoch;                        /* incremented by every device switch */
  int no_grad;                           /* depth of no-grad scopes */
  struct ag__graph_ctx *graph;           /* the graph layer's own state (opaque here), or NULL */

  ag_xfer_entry xfer[AG__XFER_MAX];
  int n_xfer;
  ag_ctx_stats stats;
  int64_t fault_after[AG_FAULT_COUNT_];
  struct ag__bpool *pool;     /* blocks of this device kept for reuse (export.c), or NULL */
  struct ag_block *use_block; /* where temporaries come from while set (ag_ctx_use_block) */
  size_t block_used;
  struct ag__deferred *deferred; /* calls waiting for the queue (ag_ctx_defer) */
};

/* ---- device-memory wrappers (ctx.c): every core access goes through these ---- */

/* Allocates `bytes` on backend `be` (ctx->be or the CPU backend for host
 * copies); counts, and fails when a fault is injected. */
ag_status ag__mem_alloc(ag_ctx *ctx, const ag__backend *be, size_t bytes, void **out);
void ag__mem_release(ag_ctx *ctx, const ag__backend *be, void *p, size_t bytes);
/* Uploads through ctx->be, counting `bytes` up under `op`. */
ag_status ag__mem_upload(ag_ctx *ctx, const char *op, void *dst, size_t bytes, ag__fill_fn fill, void *user);
/* Small host inputs for the kernels queued next: on a backend with stage(),
 * `fill` writes `bytes` (1 to AG__STAGE_MAX) into page-locked memory that
 * the device reads in place at *dev, with no copy queued; the caller then
 * queues those kernels and calls ag__mem_stage_done, whether they could be
 * queued or not. AG_ERR_UNSUPPORTED, with no message: the backend has no
 * such memory, and the caller uploads the bytes into device memory itself.
 * Not while recording; an injected upload fault fails it. */
ag_status ag__mem_stage(ag_ctx *ctx, const char *op, size_t bytes, ag__fill_fn fill, void *user, void **dev);
ag_status ag__mem_stage_done(ag_ctx *ctx);
/* Plain copy of host memory `src` (the fill for unconverted uploads). */
ag_status ag__mem_upload_copy(ag_ctx *ctx, const char *op, void *dst, const void *src, size_t bytes);
ag_status ag__mem_download(ag_ctx *ctx, const char *op, const void *src, size_t bytes, ag__drain_fn drain,
                           void *user);
/* Download of device memory into plain host memory. */
ag_status ag__mem_download_copy(ag_ctx *ctx, const char *op, void *dst, const void *src, size_t bytes);
void ag__xfer_add(ag_ctx *ctx, const char *op, uint64_t up, uint64_t down);
/* True when an injected fault of `kind` fires now (and counts the operation). */
int ag__fault_fires(ag_ctx *ctx, ag_fault kind);

/* One piece of an upload made of several (the two parts of a ring write,
 * a counter beside them). */
typedef struct ag__upload_part {
  void *dst;
  size_t bytes;
  ag__fill_fn fill;
  void *user;
} ag__upload_part;
/* Uploads the parts, in order, as one operation: an injected fault fails
 * it before any part is sent. A device error while the parts are sent
 * leaves the first *landed parts written (landed may be NULL). */
ag_status ag__mem_upload_parts(ag_ctx *ctx, const char *op, const ag__upload_part *parts, int n, int *landed);
/* The part that writes columns col_offset .. col_offset+k-1 of buf from
 * `data` (storage dtype, rows x k values), after the checks of
 * ag_buffer_write; the buffer is made resident. Nothing is sent. */
ag_status ag__buffer_part(ag_buffer *buf, const void *data, int64_t k, int64_t col_offset, const char *fn,
                          ag__upload_part *out);
/* Queues the gather of ag_get_rows_dev into dst (buf->rows x n f32,
 * packed, on the device): the columns dev_idx[0 .. n-1] (idx_dt, clamped
 * in the kernel) times the buffer's scale; the buffer is made resident.
 * The caller has checked the buffer and the indices. */
ag_status ag__buffer_gather(ag_buffer *buf, const void *dev_idx, ag_dtype idx_dt, int64_t n, float *dst);
/* The part that replaces the whole of persistent or temporary tensor t
 * with `src` (its bytes); t is made resident. Nothing is sent. */
ag_status ag__tensor_part(ag_tensor *t, const void *src, const char *fn, ag__upload_part *out);

/* ---- stores (store.c) ---- */

uint64_t ag__next_generation(void);
/* Allocates a zero-filled store of `bytes` on the context's device and links
 * it. `op` names the operation in the error message. */
ag_status ag__store_init(ag_ctx *ctx, ag__store *s, size_t bytes, ag__owner_kind kind, void *owner,
                         const char *op);
/* Makes the store resident on ctx->be (uploading a host copy in parts). */
ag_status ag__store_ensure(ag_ctx *ctx, ag__store *s);
/* Releases the memory and unlinks the store. */
void ag__store_release(ag_ctx *ctx, ag__store *s);
/* Copies every store on the device to the host (all or nothing, S18). */
ag_status ag__stores_rescue(ag_ctx *ctx);
/* Where the store's value is. */
ag_where ag__store_where(const ag_ctx *ctx, const ag__store *s);

/* ---- workspace (workspace.c) ---- */

/* Device memory from the workspace, aligned to 256 bytes. */
ag_status ag__ws_alloc(ag_ctx *ctx, size_t bytes, void **out);
/* A temporary tensor header with memory for rows x cols of dtype. */
ag_status ag__tensor_temp(ag_ctx *ctx, int64_t rows, int64_t cols, ag_dtype dtype, ag_tensor **out);
void ag__ws_reset(ag_ctx *ctx, ag__workspace *ws);
/* Rewinds ws without giving back or merging its chunks (whose addresses a
 * recording in progress may already hold): the next temporaries reuse its
 * memory from the start, and every header handed out so far is freed. For
 * a recording of several steps whose temporaries die with each step. */
void ag__ws_rewind(ag__workspace *ws);
void ag__ws_destroy(ag_ctx *ctx, ag__workspace *ws);
/* Appends a tape node; returns its index or -1 (out of host memory). */
int ag__tape_push(ag_ctx *ctx, const ag__node *n);

/* ---- kernels (ctx.c) ---- */

/* Runs (or records) a kernel on the context's backend. */
ag_status ag__run(ag_ctx *ctx, ag__kernel_id id, const void *args, size_t size);
/* Fails with AG_ERR_STATE when a recording is in progress (for calls that
 * move host data or wait for the device). */
ag_status ag__not_recording(ag_ctx *ctx, const char *fn);

/* ---- what the graph layer hooks into the core ----
 * Recordings live above the core (src/graph). They note the stores a step
 * reads, are invalidated when one is released, let go of what they hold on
 * a backend before a device switch, and are freed with the context (with
 * the rest of ctx->graph): the core calls these hooks, which the graph
 * layer sets when it first keeps state in a context. */
typedef struct ag__capture_hooks {
  void (*note_read)(ag_ctx *ctx, ag__store *s); /* while ctx->recording */
  void (*forget)(ag_ctx *ctx, ag__store *s);    /* s is being released */
  void (*release_backend)(ag_ctx *ctx);         /* before a device switch */
  void (*free_all)(ag_ctx *ctx);                /* the context is being freed: recordings and ctx->graph */
} ag__capture_hooks;

/* ---- the backends agrl was built with (registry.c) ---- */

/* The backend of a device kind, or NULL when this build has none. */
const ag__backend *ag__backend_of(ag_device_kind kind);
/* Devices of a kind present (the CPU: 1; a kind not built: 0). */
int ag__device_count(ag_device_kind kind);
/* The handoff calls of a device kind (NULL when this build has none). */
/* The registry's name of a device kind ("CUDA"), NULL for one it lacks. */
const char *ag__device_kind_name(ag_device_kind kind);
const ag__handoff_ops *ag__handoff_of(ag_device_kind kind);
/* Where host copies of stores live (after a switch to the CPU, or while
 * waiting for their next upload): the CPU backend. */
const ag__backend *ag__host_backend(void);
/* Whether the context's backend runs kernel id with these arguments. */
int ag__kernel_supported(ag_ctx *ctx, ag__kernel_id id, const void *args, size_t size);
/* The scratch bytes kernel id needs on the context's backend. */
size_t ag__kernel_scratch(ag_ctx *ctx, ag__kernel_id id, const void *args, size_t size);
/* The most scratch kernel id needs with these arguments on any backend of
 * this build: memory made once that serves on every device the context may
 * move to. */
size_t ag__kernel_scratch_max(ag__kernel_id id, const void *args, size_t size);

/* ---- blocks and deferred calls (export.c) ---- */

/* Carves `bytes` out of the block in use; AG_ERR_OUT_OF_MEMORY when it does not fit. */
ag_status ag__block_carve(ag_ctx *ctx, size_t bytes, void **out);
/* Runs the deferred calls whose work has finished (all of them with all = 1,
 * after the caller waited for the queue). */
void ag__deferred_run(ag_ctx *ctx, int all);
/* Before the context leaves its device or is freed (its queue has been
 * waited for): deferred calls run, the block in use is let go, the cached
 * blocks are freed, and blocks still held elsewhere free themselves when
 * released. */
void ag__blocks_leave(ag_ctx *ctx);

/* ---- snapshots (snapshot.c) ---- */

/* Device copies of a list of persistent tensors. take copies them (making
 * the copies at the first take, or when the list changed); restore copies
 * them back. Both are queued; past their first checks only the device can
 * fail. The copies are persistent tensors of the context: free the
 * snapshot before the tensors' context. */
typedef struct ag__snapshot {
  int n;
  struct ag_tensor **src, **copy;
} ag__snapshot;
ag_status ag__snapshot_take(ag__snapshot *sn, struct ag_tensor *const *ts, int n, const char *fn);
ag_status ag__snapshot_restore(ag__snapshot *sn);
void ag__snapshot_free(ag__snapshot *sn);

/* ---- tensor headers (tensor.c) ---- */

/* A temporary tensor header (from the workspace in use's slabs) over
 * existing device memory (a view). */
ag_status ag__tensor_view(ag_ctx *ctx, int64_t rows, int64_t cols, int64_t ld, ag_dtype dtype, void *data,
                          ag_tensor **out);
/* The device pointer of a tensor (persistent ones are made resident). */
ag_status ag__tensor_ptr(ag_tensor *t, void **out);
/* Checks that a handle is a live tensor; `what` names it in the message. */
ag_status ag__check_tensor(const ag_tensor *t, const char *fn, const char *what);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_CORE_INTERNAL_H */
