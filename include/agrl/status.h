/* agrl/status.h — status codes and the per-thread error message.
 *
 * Every fallible agrl call returns an ag_status: AG_OK (0) on success, a
 * negative code on failure. On failure the calling thread's last-error
 * message says in one sentence what was wrong (which argument, which columns,
 * how many MB ...); it stays until the next failure on that thread.
 * A call that fails changes nothing that the caller can observe, unless its
 * comment says otherwise, and writes none of its out-parameters: a handle
 * or value passed by address keeps what it held. Calls that change state in
 * several steps (a ring write of two parts, a run of updates) do every step
 * that can fail (allocation, residency after a device switch, recording)
 * before the first change; what can still fail after it is only the device
 * itself (an error of the CUDA driver). Where such an error leaves an object
 * half changed, the object's header says what is left, and the object
 * refuses every later call with AG_ERR_STATE.
 * ag_ctx_inject_fault (agrl/ctx.h) makes allocations and transfers fail on
 * purpose, so that tests can check all of this.
 */
#ifndef AGRL_STATUS_H
#define AGRL_STATUS_H

/* AG_API marks the library's public functions: the shared library is built
 * with every other symbol hidden, so it exports these and nothing else. */
#if defined(__GNUC__) || defined(__clang__)
#define AG_API __attribute__((visibility("default")))
#else
#define AG_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* X(code enum, value, name, generic description) — one table for all. */
#define AG_STATUS_TABLE(X)                                                                      \
  X(AG_OK, 0, "AG_OK", "success")                                                               \
  X(AG_ERR_INVALID_ARG, -1, "AG_ERR_INVALID_ARG", "invalid argument")                           \
  X(AG_ERR_OUT_OF_RANGE, -2, "AG_ERR_OUT_OF_RANGE", "index or range outside the object")        \
  X(AG_ERR_SHAPE, -3, "AG_ERR_SHAPE", "shapes or dtypes do not match")                          \
  X(AG_ERR_OUT_OF_MEMORY, -4, "AG_ERR_OUT_OF_MEMORY", "not enough memory")                      \
  X(AG_ERR_FREED, -5, "AG_ERR_FREED", "the object has been freed")                              \
  X(AG_ERR_NO_DEVICE, -6, "AG_ERR_NO_DEVICE", "the requested device is not available")          \
  X(AG_ERR_DEVICE, -7, "AG_ERR_DEVICE", "the device reported an error")                         \
  X(AG_ERR_INVALIDATED, -8, "AG_ERR_INVALIDATED", "a recording reads an object that was freed") \
  X(AG_ERR_UNSUPPORTED, -9, "AG_ERR_UNSUPPORTED", "operation not supported here")               \
  X(AG_ERR_STATE, -10, "AG_ERR_STATE", "the object is not in a state that allows this")         \
  X(AG_ERR_IO, -11, "AG_ERR_IO", "input/output error")                                          \
  X(AG_ERR_TIMEOUT, -12, "AG_ERR_TIMEOUT", "gave up waiting for another process")

typedef enum ag_status {
#define AG__STATUS_ENUM(code, value, name, desc) code = value,
  AG_STATUS_TABLE(AG__STATUS_ENUM)
#undef AG__STATUS_ENUM
} ag_status;

/* "AG_ERR_INVALID_ARG" etc.; "AG_UNKNOWN_STATUS" for values not in the table. */
AG_API const char *ag_status_name(ag_status s);

/* A generic description of the code ("invalid argument"). */
AG_API const char *ag_status_describe(ag_status s);

/* The message of the last failure on this thread (never NULL; "" if none).
 * The pointer stays valid until the next agrl call on this thread. */
AG_API const char *ag_last_error(void);

/* Clears this thread's last-error message. */
AG_API void ag_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_STATUS_H */
