/* agrl/buffer.h — the device buffer: a rows x capacity table read by index.
 *
 * One column per item (a transition), its `rows` values contiguous (S1). The
 * table lives on the context's device: written in place by column ranges,
 * read back by ranges, and read by column indices as a device operation
 * (ag_get_rows) whose result is an f32 tensor usable by later operations.
 * Storage types: f32, f16, bf16, u8, i32; gathers convert to f32 (u8 frames
 * may also be scaled, e.g. by 1/255).
 *
 * Lifetime: a buffer is not part of the workspace (S17); ag_buffer_free()
 * releases its memory at once, after queued work that reads it (S9, S16).
 * The handle itself stays valid until its context is freed, so that a use
 * after ag_buffer_free() is reported as AG_ERR_FREED instead of crashing.
 *
 * Generations (S19): every device allocation of a buffer takes a new,
 * never reused number; recordings compare it to refuse stale pointers.
 */
#ifndef AGRL_BUFFER_H
#define AGRL_BUFFER_H

#include <stdint.h>

#include "agrl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_buffer ag_buffer;

typedef enum ag_where {
  AG_WHERE_HOST = 0,   /* the value is in host memory (CPU context, or rescued) */
  AG_WHERE_DEVICE = 1, /* the value is in device memory */
  AG_WHERE_FREED = 2
} ag_where;

typedef struct ag_buffer_info {
  int64_t rows;
  int64_t capacity;
  ag_dtype dtype;
  ag_where where;
  uint64_t generation; /* 0 while never allocated on a device */
  float scale;         /* factor applied by gathers (1 unless set) */
} ag_buffer_info;

/* Share of the device's free memory one buffer may take (S3). */
#define AG_BUFFER_MEM_SHARE 0.85
/* Bytes per part when a whole buffer crosses the bus (upload, rescue). */
#define AG_TRANSFER_PART_BYTES ((size_t)16 << 20)

/* Creates a zero-filled rows x capacity buffer of `dtype` (AG_F32, AG_F16,
 * AG_BF16, AG_U8 or AG_I32) on ctx's device (S1, S2).
 * Errors: AG_ERR_INVALID_ARG for ctx or out NULL, rows or capacity < 1 or a
 * bad dtype; AG_ERR_OUT_OF_MEMORY when the buffer needs more than 85% of
 * the free memory the device reports (the message gives MB requested,
 * free, usable; S3) or when the allocation fails (the message names the
 * size; S4); AG_ERR_STATE while a step is being recorded; AG_ERR_DEVICE.
 * On error *out is untouched and nothing leaks. */
AG_API ag_status ag_buffer_create(ag_ctx *ctx, int64_t rows, int64_t capacity, ag_dtype dtype,
                                  ag_buffer **out);

/* Releases the buffer's memory (S9); queued work that reads it finishes
 * first. Later calls with the handle return AG_ERR_FREED. NULL is accepted;
 * freeing twice is a no-op. */
AG_API void ag_buffer_free(ag_buffer *buf);

/* Writes columns col_offset .. col_offset+k-1 from `data`: data_rows x k
 * values of `data_dtype`, column by column (S5). data_dtype is the buffer's
 * dtype or AG_F32 (converted on the way in). data_rows must equal the
 * buffer's rows; the range must lie inside the buffer; k = 0 is a no-op (data
 * may then be NULL). A ring buffer wraps with two writes.
 * Ordering (S6): work issued before the call reads the old columns, work
 * issued after reads the new ones; `data` may be reused on return. Only the
 * k new columns cross the bus (S7). On error nothing is written (but for a
 * device error part way through a write of 4 MB or more, sent in parts).
 * Errors: AG_ERR_INVALID_ARG: buf NULL, k < 0, data NULL for k > 0;
 * AG_ERR_FREED; AG_ERR_SHAPE: data_dtype or data_rows not as above;
 * AG_ERR_OUT_OF_RANGE: col_offset < 0, columns outside the buffer, an f32
 * value that u8 or i32 storage cannot hold (NaN, out of range);
 * AG_ERR_STATE while a step is being recorded; AG_ERR_DEVICE. */
AG_API ag_status ag_buffer_write(ag_buffer *buf, const void *data, ag_dtype data_dtype, int64_t data_rows,
                                 int64_t k, int64_t col_offset);

/* Blocks until every write issued so far is on the device (for consumers
 * outside the context's queue). Errors: AG_ERR_INVALID_ARG: buf NULL;
 * AG_ERR_FREED; AG_ERR_STATE while a step is being recorded; AG_ERR_DEVICE. */
AG_API ag_status ag_buffer_wait(ag_buffer *buf);

/* Reads columns col_offset .. col_offset+k-1 into `out` (rows x k values of
 * out_dtype: the buffer's dtype or AG_F32), after queued work that writes
 * the buffer (S8). out_bytes must hold them. k = 0 reads nothing. Large
 * reads go through a bounded staging area in parts.
 * Errors: AG_ERR_INVALID_ARG: buf NULL, k < 0, out NULL for k > 0,
 * out_bytes too small; AG_ERR_FREED; AG_ERR_SHAPE: out_dtype not as above;
 * AG_ERR_OUT_OF_RANGE: col_offset < 0, columns outside the buffer;
 * AG_ERR_STATE while a step is being recorded; AG_ERR_DEVICE (which, part
 * way through a read of more than 16 MB, may leave `out` partly written). */
AG_API ag_status ag_buffer_read(ag_buffer *buf, int64_t col_offset, int64_t k, ag_dtype out_dtype, void *out,
                                size_t out_bytes);

/* Selects columns by 0-based index as a device operation (S10): *out is a
 * temporary rows x n f32 tensor without gradient, computed on the queue.
 * Host indices are checked (S11): each in 0..capacity-1, n >= 1; only the
 * indices cross the bus (S14). Errors: AG_ERR_INVALID_ARG: buf, idx or out
 * NULL, n < 1; AG_ERR_FREED; AG_ERR_OUT_OF_RANGE: an index outside
 * 0..capacity-1; AG_ERR_STATE while a step is being recorded (host indices
 * cross the bus); AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_get_rows(ag_buffer *buf, const int64_t *idx, int64_t n, ag_tensor **out);
AG_API ag_status ag_get_rows_i32(ag_buffer *buf, const int32_t *idx, int64_t n, ag_tensor **out);

/* The same with indices already on the device: an AG_I32 or AG_I64 tensor
 * of the buffer's context, all its elements used in storage order. They are
 * not checked; each is clamped to 0..capacity-1 on the device before the
 * read (S13), so no read leaves the buffer. Nothing crosses the bus.
 * Recordable. Errors: AG_ERR_INVALID_ARG: buf, idx or out NULL, idx of
 * another context; AG_ERR_FREED; AG_ERR_SHAPE: idx not AG_I32 or AG_I64, or
 * a view with gaps between its columns; AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_get_rows_dev(ag_buffer *buf, const ag_tensor *idx, ag_tensor **out);

/* Factor applied to every gathered value (default 1; e.g. 1/255 for u8
 * frames). Must be finite. A recording keeps the factor of the time it was
 * recorded. Errors: AG_ERR_INVALID_ARG: buf NULL, scale not finite;
 * AG_ERR_FREED. */
AG_API ag_status ag_buffer_set_scale(ag_buffer *buf, float scale);

/* Rows, capacity, dtype, where it lives, generation (S21). Works on a freed
 * handle (where = AG_WHERE_FREED). Errors: AG_ERR_INVALID_ARG: buf or out
 * NULL. */
AG_API ag_status ag_buffer_get_info(const ag_buffer *buf, ag_buffer_info *out);

AG_API int64_t ag_buffer_rows(const ag_buffer *buf);
AG_API int64_t ag_buffer_capacity(const ag_buffer *buf);
AG_API ag_ctx *ag_buffer_ctx(const ag_buffer *buf);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_BUFFER_H */
