/* agrl/capture.h — record a step once, replay it many times; device RNG.
 *
 * ag_capture_create() calls a step function with recording switched on: the
 * kernels it issues are recorded, not run (on a GPU a CUDA graph, on the CPU
 * a plan of kernel calls with their arguments). Each ag_capture_replay() runs
 * the whole step once, as one launch on the GPU, without building anything,
 * allocating or moving host data.
 *
 * Inputs are persistent tensors that the step reads (e.g. indices, a batch
 * size bound): write new values into them with ag_tensor_write() before a
 * replay; the write is ordered before the replay on the queue (S6). Shapes
 * are part of the recording: a new batch size needs a new recording (S15).
 * Indices drawn inside the step from an ag_rng cost no transfer at all.
 *
 * Inside the step function, calls that move host data or wait for the
 * device (ag_get_rows with host indices, reads, writes, syncs, creating
 * buffers or persistent tensors) fail with AG_ERR_STATE.
 *
 * A recording notes every buffer and persistent tensor it reads. Freeing one
 * invalidates it: replay returns AG_ERR_INVALIDATED (S15). When one of them
 * gets a new allocation (a device switch and back, S19) or the context
 * changes device, the next replay records the step again first.
 */
#ifndef AGRL_CAPTURE_H
#define AGRL_CAPTURE_H

#include <stdint.h>

#include "agrl/buffer.h"
#include "agrl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_capture ag_capture;

/* The step: issue the ops of one step on ctx. Return AG_OK, or a status
 * to abandon the recording. */
typedef ag_status (*ag_step_fn)(ag_ctx *ctx, void *user);

/* Records fn(ctx, user). The step does not run yet. fn and user must stay
 * valid until ag_capture_free: a replay calls fn again to record anew when
 * what it reads moved. The temporaries the step makes belong to the
 * recording (each replay writes them, a new record replaces them,
 * ag_ctx_reset leaves them). The caller owns the recording.
 * Errors: AG_ERR_INVALID_ARG: ctx, fn or out NULL; AG_ERR_STATE: a step is
 * being recorded; the status fn returns; AG_ERR_OUT_OF_MEMORY;
 * AG_ERR_DEVICE. On error nothing is kept (what fn did outside ctx stays). */
AG_API ag_status ag_capture_create(ag_ctx *ctx, ag_step_fn fn, void *user, ag_capture **out);

/* Runs the recorded step once on the queue (re-recording first if needed).
 * Errors: AG_ERR_INVALID_ARG: cap NULL; AG_ERR_STATE while a step is being
 * recorded; AG_ERR_INVALIDATED: an object it reads was freed (for good);
 * the errors of ag_capture_create when it records again (the next replay
 * then tries again); AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. Short of a device
 * error while the step runs, a failed replay runs nothing. */
AG_API ag_status ag_capture_replay(ag_capture *cap);

/* The same on `stream`, another native queue of the context's device (a
 * cudaStream_t, where NULL and the values 1 and 2 name CUDA's legacy and
 * per-thread default streams; ignored on the CPU and Vulkan, which replay
 * on their own queue), instead of the context's queue: for a caller that
 * orders the two queues itself, e.g. inside another framework's stream
 * capture (the step then becomes part of what it captures, and runs each
 * time that is replayed). Nothing is ordered for the caller: the step sees
 * what the context's queue wrote only once `stream` waits for it
 * (ag_stream_wait_ctx), and the context's later work that writes what the
 * step reads must wait for `stream` (ag_ctx_wait_stream). A step that must
 * be recorded again is recorded on the context's queue first.
 * Errors: those of ag_capture_replay. */
AG_API ag_status ag_capture_replay_on(ag_capture *cap, void *stream);

/* Waits for queued work, then frees the recording. NULL is accepted. */
AG_API void ag_capture_free(ag_capture *cap);

/* Named inputs: gives the persistent tensor `t` (read by the step) a name,
 * so that callers can set it by name before a replay. Names are copied;
 * a name is given once; t must stay alive while its name is used.
 * Errors: AG_ERR_INVALID_ARG: cap or name NULL, name empty or given
 * already, t NULL, not persistent or of another context; AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_capture_add_input(ag_capture *cap, const char *name, ag_tensor *t);
/* Writes `bytes` of host data into the input `name` (ordered before the next
 * replay, as ag_tensor_write; the data may be reused on return).
 * Errors: AG_ERR_INVALID_ARG: cap NULL or no input called `name`; those of
 * ag_tensor_write (bytes not the tensor's size: AG_ERR_SHAPE). */
AG_API ag_status ag_capture_set_input(ag_capture *cap, const char *name, const void *data, size_t bytes);
/* The tensor of input `name`, or NULL. */
AG_API ag_tensor *ag_capture_input(const ag_capture *cap, const char *name);

typedef struct ag_capture_info {
  int nodes;   /* kernels and copies in the recording (CUDA graph nodes) */
  int reads;   /* buffers and persistent tensors it reads */
  int records; /* times recorded (1 + re-records) */
  uint64_t replays;
  uint64_t workspace_bytes;
  int valid; /* 0 once something it reads was freed */
} ag_capture_info;

/* Errors: AG_ERR_INVALID_ARG: cap or out NULL. */
AG_API ag_status ag_capture_get_info(const ag_capture *cap, ag_capture_info *out);

/* The i-th object the recording reads: a buffer (*buf set, *tensor NULL) or
 * a persistent tensor (the reverse), still its owner's. Errors:
 * AG_ERR_INVALID_ARG: an argument NULL; AG_ERR_OUT_OF_RANGE: i outside
 * 0..reads-1; AG_ERR_FREED: that object was freed. */
AG_API ag_status ag_capture_read_at(const ag_capture *cap, int i, ag_buffer **buf, ag_tensor **tensor);

/* ---- device random numbers ----
 * A Philox4x32-10 stream: a seed and a counter kept on the device. Each
 * draw of n numbers takes the next n counter values, so the same seed gives
 * the same numbers on the CPU and the GPU, eager or replayed. */
typedef struct ag_rng ag_rng;

/* The caller owns the stream; free it before ctx. Errors: AG_ERR_INVALID_ARG:
 * ctx or out NULL; AG_ERR_STATE while a step is being recorded;
 * AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_rng_create(ag_ctx *ctx, uint64_t seed, ag_rng **out);
AG_API void ag_rng_free(ag_rng *rng); /* NULL is accepted */
/* Sets the counter (queued, as ag_tensor_write). Errors: AG_ERR_INVALID_ARG:
 * rng NULL; AG_ERR_STATE while a step is being recorded; AG_ERR_DEVICE. */
AG_API ag_status ag_rng_set_counter(ag_rng *rng, uint64_t counter);

/* n uniform integers in [0, bound) as an [n, 1] AG_I32 or AG_I64 temporary
 * (recordable: each replay draws the next n). Errors: AG_ERR_INVALID_ARG:
 * rng or out NULL, n < 1, dtype not AG_I32 or AG_I64, bound < 1, bound
 * beyond 2^31 for AG_I32; AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_randint(ag_rng *rng, int64_t bound, int64_t n, ag_dtype dtype, ag_tensor **out);
/* The same with the bound read on the device from a 1 x 1 AG_I64 tensor
 * of rng's context (e.g. the number of transitions in a replay buffer); a
 * bound < 1 gives 0, and with AG_I32 a bound beyond 2^31 is not checked
 * (the values wrap). Errors: as ag_randint; AG_ERR_INVALID_ARG: bound NULL
 * or of another context; AG_ERR_FREED; AG_ERR_SHAPE: bound not 1 x 1 i64. */
AG_API ag_status ag_randint_dev(ag_rng *rng, ag_tensor *bound, int64_t n, ag_dtype dtype, ag_tensor **out);
/* rows x cols standard normal f32 values as a temporary (recordable: each
 * replay draws the next ones), from the Philox stream: the same numbers bit
 * for bit on the CPU and on CUDA. Value i (element (r, c) is value
 * c * rows + r) is made by Box-Muller from counter value counter + i
 * alone: its 64 bits are two uniforms in (0, 1), the low 32 for the radius
 * and the high 32 for the angle (the pair's second value is not used). So
 * a call takes the next rows * cols counter values, as ag_randint takes n:
 * the counter moves on by rows * cols on the device, the draws of one
 * stream never overlap, and two calls give the values of one call of both
 * sizes, the first call's first. Each value is within 1 ulp of float of
 * the exact Box-Muller value of its uniforms, and |value| <= 6.77 (the
 * smallest uniform is 2^-33). Errors: AG_ERR_INVALID_ARG: rng or out
 * NULL, rows or cols < 1; AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_randn(ag_rng *rng, int64_t rows, int64_t cols, ag_tensor **out);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_CAPTURE_H */
