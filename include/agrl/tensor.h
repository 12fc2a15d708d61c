/* agrl/tensor.h — dtypes and 2-D tensors on a context's device.
 *
 * A tensor is a rows x cols matrix stored column by column: the `rows` values
 * of a column are contiguous (the layout of a buffer, S1). A vector is one
 * column. Tensors come in two lifetimes:
 *   - persistent: made by ag_tensor_create(), freed by ag_tensor_free(); they
 *     survive ag_ctx_reset() and move with the context on a device switch;
 *   - temporary: results of operations (ag_get_rows, graph ops), allocated in
 *     the context's workspace and released together by ag_ctx_reset().
 * A freed persistent tensor's handle is gone: using it is undefined. A
 * temporary used after ag_ctx_reset is reported as AG_ERR_FREED, but only
 * until the workspace hands its header to a new temporary.
 */
#ifndef AGRL_TENSOR_H
#define AGRL_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "agrl/ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ag_dtype {
  AG_F32 = 0,
  AG_F16 = 1,
  AG_BF16 = 2,
  AG_U8 = 3,
  AG_I32 = 4,
  AG_I64 = 5,
  AG_DTYPE_COUNT_ = 6
} ag_dtype;

/* Bytes per element (0 for a value outside the enum). */
AG_API size_t ag_dtype_size(ag_dtype dt);
/* "f32", "f16", "bf16", "u8", "i32", "i64" ("?" outside the enum). */
AG_API const char *ag_dtype_name(ag_dtype dt);

typedef struct ag_tensor ag_tensor;

/* Creates a persistent rows x cols tensor on ctx's device, filled from
 * `host` (rows*cols values of `dtype`, column by column) or with zeros when
 * `host` is NULL. rows and cols must be positive. The caller owns it
 * (ag_tensor_free, or ag_ctx_free).
 * Errors: AG_ERR_INVALID_ARG: ctx or out NULL, rows or cols < 1, an unknown
 * dtype; AG_ERR_OUT_OF_MEMORY (as ag_buffer_create: more than 85% of the
 * device's free memory, or the allocation fails); AG_ERR_STATE while a step
 * is being recorded; AG_ERR_DEVICE.
 * On error *out is untouched and nothing is allocated. */
AG_API ag_status ag_tensor_create(ag_ctx *ctx, int64_t rows, int64_t cols, ag_dtype dtype, const void *host,
                                  ag_tensor **out);

/* Frees a persistent tensor at once (pending work that reads it finishes
 * first), and its gradient with it. NULL, temporary tensors and gradients
 * are accepted and left alone (a temporary is released by ag_ctx_reset(), a
 * gradient with its tensor). */
AG_API void ag_tensor_free(ag_tensor *t);

AG_API int64_t ag_tensor_rows(const ag_tensor *t);
AG_API int64_t ag_tensor_cols(const ag_tensor *t);
AG_API int64_t ag_tensor_numel(const ag_tensor *t);
AG_API ag_dtype ag_tensor_dtype(const ag_tensor *t);
AG_API ag_ctx *ag_tensor_ctx(const ag_tensor *t);

/* Copies the whole tensor to `dst` (rows*cols values of the tensor's dtype,
 * column by column), after all queued work that writes it. dst_bytes must be
 * at least that size. t may be a view (its values arrive packed).
 * Errors: AG_ERR_INVALID_ARG: t or dst NULL, dst_bytes too small;
 * AG_ERR_FREED; AG_ERR_STATE while a step is being recorded;
 * AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE (which, part way through a read of
 * more than 16 MB, may leave dst partly written). */
AG_API ag_status ag_tensor_read(const ag_tensor *t, void *dst, size_t dst_bytes);

/* Replaces the tensor's contents with `src` (rows*cols values of the
 * tensor's dtype); src_bytes must be exactly their size. Ordered on the
 * queue like a buffer write (S6): work issued later reads the new values;
 * `src` may be reused when the call returns. Errors: AG_ERR_INVALID_ARG: t
 * or src NULL; AG_ERR_SHAPE: src_bytes is not the tensor's size;
 * AG_ERR_FREED; AG_ERR_STATE while a step is being recorded;
 * AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_tensor_write(ag_tensor *t, const void *src, size_t src_bytes);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_TENSOR_H */
