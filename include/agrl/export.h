/* agrl/export.h — results handed to other frameworks without a copy, and
 * their data taken in place.
 *
 * Blocks. A block is memory of a context's device (host memory on the CPU)
 * that lives until its last reference is released, whatever happens to the
 * context afterwards (workspace resets, device switches, ag_ctx_free). It is
 * how a result outlives the workspace: while ag_ctx_use_block() is in force,
 * the context's temporaries (the results of ag_replay_sample, ag_get_rows,
 * graph ops) are carved out of the block instead of the workspace, so that
 * another framework can hold them (through DLPack, say) for as long as it
 * wants. Released blocks are kept by the context for reuse (up to a bound),
 * and a block that a consumer used on another stream is reused only after
 * that stream's work queued before the release (ag_block_release's
 * `stream`). Blocks are not counted in ag_ctx_stats.live_bytes; a new
 * block's allocation is counted in allocs and is subject to the
 * AG_FAULT_ALLOC fault.
 *
 * Streams. `stream` arguments are native queue handles of the context's
 * device: a cudaStream_t, where NULL and the values 1 and 2 name CUDA's
 * legacy and per-thread default streams (as DLPack numbers them). On the
 * CPU they are ignored: its work is done when a call returns.
 *
 * Threads: ag_block_retain and ag_block_release may be called from any
 * thread at any time (they need no context); everything else follows the
 * context's rule (one thread at a time).
 */
#ifndef AGRL_EXPORT_H
#define AGRL_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "agrl/buffer.h"
#include "agrl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_block ag_block;

/* A block of at least `bytes` (256-byte aligned) on ctx's current device,
 * with one reference, owned by the caller. Its contents are undefined.
 * Errors: AG_ERR_INVALID_ARG: ctx or out NULL, bytes = 0 or more than the
 * device's total memory; AG_ERR_STATE while a step is being recorded;
 * AG_ERR_OUT_OF_MEMORY (the allocation failed, or an injected fault);
 * AG_ERR_DEVICE. *out is untouched on error. */
AG_API ag_status ag_block_create(ag_ctx *ctx, size_t bytes, ag_block **out);
/* One more reference. NULL is accepted. */
AG_API void ag_block_retain(ag_block *b);
/* Drops a reference. `stream`: the stream on which the holder last used
 * the memory (its queued work there may still read it), or NULL when it
 * used it on the context's own queue or has finished with it. When the
 * last reference goes, the memory returns to its context for reuse, or is
 * freed when the context is gone or has left the device. NULL is accepted. */
AG_API void ag_block_release(ag_block *b, void *stream);
AG_API void *ag_block_data(const ag_block *b);
AG_API size_t ag_block_size(const ag_block *b);
/* The device the block's memory is on (and its index, if index is not NULL). */
AG_API ag_device_kind ag_block_device(const ag_block *b, int *index);

/* Makes the context's temporaries come from `b` (from its start, in order,
 * 256-byte aligned) until ag_ctx_use_block(ctx, NULL); a temporary that does
 * not fit in what is left fails with AG_ERR_OUT_OF_MEMORY (the call that
 * needed it fails and changes nothing, as for any allocation failure). The
 * context holds a reference meanwhile. Recordings keep their own workspace
 * and are not affected. Errors: AG_ERR_INVALID_ARG: ctx NULL, b of another
 * device than the context's current one; AG_ERR_STATE while a step is
 * being recorded. */
AG_API ag_status ag_ctx_use_block(ag_ctx *ctx, ag_block *b);
/* Bytes of the block in use taken so far (0 without one). */
AG_API size_t ag_ctx_block_used(const ag_ctx *ctx);

/* The device address of a tensor's first element and its column stride in
 * elements (element (r, c) at data[c * ld + r]); a persistent tensor is made
 * resident first (after a device switch it is uploaded here). The address
 * stays valid as long as the tensor's memory: a temporary's until
 * ag_ctx_reset (or its block's release), a persistent tensor's until it is
 * freed or the context switches device. Errors: AG_ERR_INVALID_ARG: t or
 * data NULL; AG_ERR_FREED; AG_ERR_STATE while a step is being recorded;
 * AG_ERR_OUT_OF_MEMORY, AG_ERR_DEVICE (making it resident). */
AG_API ag_status ag_tensor_data(const ag_tensor *t, void **data, int64_t *ld);
/* A temporary rows x cols tensor of `dtype` over memory of the context's
 * current device at `data` (element (r, c) at data[c * ld + r], ld >= rows),
 * e.g. another framework's tensor: it reads and writes that memory in
 * place. The caller keeps the memory valid until the work queued on it has
 * finished (see ag_ctx_defer). Released by ag_ctx_reset like any temporary.
 * Errors: AG_ERR_INVALID_ARG: ctx, data or out NULL, rows or cols < 1,
 * ld < rows, an unknown dtype, data not aligned to the dtype's size, a size
 * that overflows. */
AG_API ag_status ag_tensor_wrap(ag_ctx *ctx, void *data, int64_t rows, int64_t cols, int64_t ld,
                                ag_dtype dtype, ag_tensor **out);

/* `stream` waits (on the device, queued: no host wait) for the work queued
 * on the context so far: hand results to a consumer on another stream. The
 * legacy default stream (NULL or cudaStreamLegacy) already does (agrl/ctx.h):
 * nothing is queued for it, here and in ag_ctx_wait_stream.
 * Errors: AG_ERR_INVALID_ARG: ctx NULL; AG_ERR_STATE while a step is being
 * recorded; AG_ERR_DEVICE. */
AG_API ag_status ag_stream_wait_ctx(ag_ctx *ctx, void *stream);
/* The context's queue waits for the work queued on `stream` so far: take
 * inputs a producer wrote on another stream. Errors: as above. */
AG_API ag_status ag_ctx_wait_stream(ag_ctx *ctx, void *stream);
/* Calls fn(arg) once the work queued on the context so far has finished:
 * at once on the CPU; otherwise from a later ag_ctx_defer, ag_ctx_sync,
 * device switch or ag_ctx_free of this context, on the thread that makes
 * that call. For letting go of memory that queued work still reads. If the
 * wait cannot be set up (no host memory, no event), the call waits for the
 * queue and calls fn at once. ctx NULL: fn(arg) at once. */
AG_API void ag_ctx_defer(ag_ctx *ctx, void (*fn)(void *arg), void *arg);

/* ---- writes from device memory ----
 * Values in device memory cannot be checked before the kernels run: they
 * are converted by the rules of a device conversion (floating to integer
 * storage rounds to nearest even and saturates, NaN becomes 0) instead of
 * being refused as the host writes refuse them. Nothing crosses the bus. */

/* Writes columns col_offset .. col_offset+k-1 of buf from src, a
 * [rows, k] tensor of any dtype on buf's context (k = ag_tensor_cols(src)),
 * converted to the buffer's dtype on the device. Ordered as
 * ag_buffer_write (S6). Errors: AG_ERR_INVALID_ARG: buf or src NULL, src
 * of another context; AG_ERR_FREED; AG_ERR_SHAPE: src has not buf's rows;
 * AG_ERR_OUT_OF_RANGE: col_offset < 0, columns outside the buffer;
 * AG_ERR_STATE while a step is being recorded; AG_ERR_OUT_OF_MEMORY,
 * AG_ERR_DEVICE. */
AG_API ag_status ag_buffer_write_dev(ag_buffer *buf, const ag_tensor *src, int64_t col_offset);

#ifdef __cplusplus
}
#endif

#endif /* AGRL_EXPORT_H */
