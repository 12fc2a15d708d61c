/* base.h — the ground floor: what every layer and every backend may use.
 *
 * Error reporting (status.c), dtype conversions (dtype.c), host memory that
 * tests can make fail and files written whole (hostmem.c), the helper
 * threads and the copies into transfer memory (pool.c), and small integer
 * helpers. A backend includes this, backend.h and kernels.h, and nothing of
 * the layers above.
 *
 * Internal non-static symbols carry the double prefix ag__.
 */
#ifndef AGRL_BASE_BASE_H
#define AGRL_BASE_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agrl/status.h"
#include "agrl/tensor.h"
#include "base/backend.h"
#include "base/hd.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define AG__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define AG__PRINTF(a, b)
#endif

/* ---- errors (status.c) ---- */

/* Sets this thread's message (printf-style) and returns s. */
ag_status ag__fail(ag_status s, const char *fmt, ...) AG__PRINTF(2, 3);

/* ---- host memory and whole-file writes (hostmem.c) ---- */

/* malloc, calloc, realloc and strdup for every host allocation of the
 * library: they fail (return NULL) when a fault is injected on this thread
 * (AG_FAULT_HOST_ALLOC). Free with free(). A size of 0 is taken as 1. */
void *ag__malloc(size_t bytes);
void *ag__calloc(size_t n, size_t size);
void *ag__realloc(void *p, size_t bytes);
char *ag__strdup(const char *s);
/* Arms this thread's host-allocation fault (-1 disarms); the count left. */
void ag__host_fault_arm(int64_t after);
int64_t ag__host_fault_pending(void);

/* A file written whole: data goes to a new file beside `path`, which
 * commit flushes to disk and renames over `path`; until then (and if
 * anything fails, or on abort) `path` is untouched and the temporary is
 * removed. `fn` names the public call in messages. */
typedef struct ag__afile {
  FILE *f; /* write here */
  char *path, *tmp;
} ag__afile;
ag_status ag__afile_open(ag__afile *a, const char *path, const char *fn);
ag_status ag__afile_commit(ag__afile *a, const char *fn);
void ag__afile_abort(ag__afile *a);
/* Ends a file written whole: with s AG_OK and every write done (wrote),
 * commits it; else aborts it and returns s, or AG_ERR_IO (from errno) for a
 * failed write. */
ag_status ag__afile_finish(ag__afile *a, ag_status s, int wrote, const char *fn);
/* Reads n bytes at f's position into dst and goes back there: 0, or -1
 * when fewer are there (or the stream cannot seek). */
int ag__peek(FILE *f, void *dst, size_t n);
/* mkdir -p: every missing directory of path, mode 0777; -1 with errno set
 * when one cannot be made. */
int ag__make_dirs(const char *path);
/* Opens a regular file for reading (AG_ERR_IO naming fn and path otherwise). */
ag_status ag__open_read(const char *path, const char *fn, FILE **out);
/* The bytes of stream f from where it stands to its end (0 past it); f stays
 * where it was. `name` and `what` ("a model") word the error, AG_ERR_IO. */
ag_status ag__stream_left(FILE *f, const char *fn, const char *name, const char *what, uint64_t *left);

/* ---- file helpers (crc32.c) ---- */

/* CRC-32/IEEE (reflected polynomial 0xEDB88320, the CRC of zlib, gzip and
 * PNG) of the bytes so far (0 for none) extended by n more bytes:
 * ag__crc32_add(ag__crc32_add(0, a), b) is the CRC of a followed by b. */
uint32_t ag__crc32_add(uint32_t crc, const void *data, size_t n);
/* Little-endian fields, byte by byte whatever the host's order. */
static inline void ag__put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void ag__put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t ag__get32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static inline uint64_t ag__get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
/* IEEE 754 floats as their little-endian bit patterns. */
static inline void ag__put_f32(unsigned char *p, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  ag__put32(p, u);
}
static inline float ag__get_f32(const unsigned char *p) {
  uint32_t u = ag__get32(p);
  float v;
  memcpy(&v, &u, 4);
  return v;
}
static inline void ag__put_f64(unsigned char *p, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  ag__put64(p, u);
}
static inline double ag__get_f64(const unsigned char *p) {
  uint64_t u = ag__get64(p);
  double v;
  memcpy(&v, &u, 8);
  return v;
}

/* ---- dtypes (dtype.c) ---- */

uint16_t ag__f32_to_f16(float f);
float ag__f16_to_f32(uint16_t h);
uint16_t ag__f32_to_bf16(float f);
float ag__bf16_to_f32(uint16_t h);
/* Element i of src as f32. */
float ag__load_f32(const void *src, ag_dtype dt, size_t i);
/* dst[i] = (dst_dt) src[i] for any two dtypes: between integer dtypes (u8,
 * i32, i64) exactly, otherwise through f32; integer targets of floating
 * values round to nearest (values must already be checked to fit). */
void ag__convert(void *dst, ag_dtype dst_dt, const void *src, ag_dtype src_dt, size_t n);
/* Checks that f32 values fit dtype dt (integers: finite and in range).
 * Returns the index of the first value that does not fit, or -1. */
int64_t ag__first_unfit(const float *src, size_t n, ag_dtype dt);
/* ---- index arrays (AG_I32 / AG_I64), on the host and the device ---- */

/* Reads element i of an index array. */
AG__HD int64_t ag__index_at(const void *idx, ag_dtype dt, int64_t i) {
  return dt == AG_I32 ? (int64_t)((const int32_t *)idx)[i] : ((const int64_t *)idx)[i];
}
/* Element k of an index array = v. */
AG__HD void ag__index_put(void *idx, ag_dtype dt, int64_t k, int64_t v) {
  if (dt == AG_I32)
    ((int32_t *)idx)[k] = (int32_t)v;
  else
    ((int64_t *)idx)[k] = v;
}
/* An index clamped to 0 .. limit-1 (limit >= 1): every read by index from
 * the device stays inside its table (S13). */
AG__HD int64_t ag__clamp_index(int64_t i, int64_t limit) { return i < 0 ? 0 : (i >= limit ? limit - 1 : i); }

/* ---- helper threads (pool.c) ---- */

typedef void (*ag__task_fn)(void *arg, int i);
/* Runs fn(arg, i) for i in 0 .. n_tasks-1 over the helper threads and the
 * caller; returns when all are done. */
void ag__pool_run(int n_tasks, ag__task_fn fn, void *arg);
int ag__pool_threads(void);
/* fill(dst, off, len, user) split over the helper threads (large lengths). */
void ag__fill_parallel(ag__fill_fn fill, void *user, void *dst, size_t off, size_t len);
/* Seconds on a monotonic clock (CLOCK_MONOTONIC): for deadlines. */
double ag__mono_s(void);

/* ---- plain copies into transfer memory (pool.c) ---- */

/* The fill of every unconverted upload: memcpy from user + off. A backend may
 * recognise it by its address (the source is then `user`, `bytes` long) and
 * replace it, e.g. by ag__fill_copy_stream, or skip the staging. */
void ag__fill_copy(void *host_dst, size_t off, size_t len, void *user);
/* The same with ag__copy_stream, for staging memory that a DMA engine reads
 * next. */
void ag__fill_copy_stream(void *host_dst, size_t off, size_t len, void *user);
/* memcpy that writes dst's whole cache lines with non-temporal stores (x86:
 * SSE2), then fences: on return the bytes are in memory, not in this core's
 * caches. Any alignment and length; a plain memcpy elsewhere. */
void ag__copy_stream(void *dst, const void *src, size_t len);

/* Overflow-checked a*b*c; returns 0 on overflow. */
static inline int ag__mul3(uint64_t a, uint64_t b, uint64_t c, size_t *out) {
  if (a && b > SIZE_MAX / a) return 0;
  uint64_t ab = a * b;
  if (ab && c > SIZE_MAX / ab) return 0;
  *out = (size_t)(ab * c);
  return 1;
}

#define AG__MB(b) ((double)(b) / (1024.0 * 1024.0))

#ifdef __cplusplus
}
#endif
#endif /* AGRL_BASE_BASE_H */
