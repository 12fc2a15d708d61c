/* fuzz_common.h — what the harnesses of tests/fuzz share: their CPU
 * context, the abort on a broken promise, the promises of a refusal, the
 * input as a stream or a copy with its header CRC filled in, and the files
 * a harness saves. Each harness is one program that includes it once (its
 * state is static).
 */
#ifndef AGRL_FUZZ_COMMON_H
#define AGRL_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agrl/agrl.h"

/* The library's CRC-32 (src/base/base.h). */
uint32_t ag__crc32_add(uint32_t crc, const void *data, size_t n);

static ag_ctx *ctx;
static const char *harness; /* the program, in its messages */
static char tmp_dir[16];    /* where the temporary files go */

static inline void die(const char *what) {
  fprintf(stderr, "%s: %s (last error: %s)\n", harness, what, ag_last_error());
  abort();
}

static inline uint64_t live_bytes(void) {
  ag_ctx_stats st;
  ag_ctx_get_stats(ctx, &st);
  return st.live_bytes;
}

/* The little-endian integer of n bytes at p. */
static inline uint64_t get(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static uint64_t allocs0; /* the context's storage allocations when the input began */

static inline uint64_t allocs(void) {
  ag_ctx_stats st;
  ag_ctx_get_stats(ctx, &st);
  return st.allocs;
}

static inline void make_ctx(void) {
  if (ag_ctx_create(&ctx, AG_DEVICE_CPU, 0) != AG_OK) die("no CPU context");
}

/* At each input: the context (made at the first), and /dev/shm (else
 * /tmp) for the files. */
static inline void fuzz_begin(const char *name) {
  if (!ctx) {
    harness = name;
    make_ctx();
    snprintf(tmp_dir, sizeof tmp_dir, "%s", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  }
  allocs0 = allocs();
}

/* At the end of each input: a context keeps the handle of every buffer
 * freed on it until it is freed itself (agrl/buffer.h), so after an input
 * that allocated storage the context is freed with them and a new one made
 * (45 us on the CPU). Then each input frees as many host blocks as it
 * allocates and the heap does not grow from input to input: libFuzzer runs
 * its leak check (a scan of the whole heap) after every input that does
 * not, and stops checking after 1000 of them. */
static inline void fuzz_end(void) {
  if (allocs() == allocs0) return;
  ag_ctx_free(ctx);
  make_ctx();
}

/* Where the agrl file header at p (n bytes from p on; H, its length, the
 * u32 at byte 12, in the container and in the formats of 0.1.0) stores a
 * CRC-32 of 0, the CRC of its bytes is written in
 * its place: a mutation of a seed whose CRC is 0 then reaches the checks
 * behind the CRC (a real header's CRC is 0 once in 2^32). */
static inline void fill_zero_crc(uint8_t *p, size_t n) {
  size_t h = n >= 16 ? (size_t)get(p + 12, 4) : 0;
  if (h < 20 || h > n || get(p + h - 4, 4) != 0) return;
  uint32_t c = ag__crc32_add(0, p, h - 4);
  for (int i = 0; i < 4; i++) p[h - 4 + i] = (uint8_t)(c >> 8 * i);
}

/* A copy of the input (malloc'd) with its header's CRC filled in where it
 * is 0 (fill_zero_crc): what the harness loads and compares with. */
static inline uint8_t *input_copy(const uint8_t *data, size_t size) {
  uint8_t *b = malloc(size ? size : 1);
  if (!b) die("out of host memory for the input");
  memcpy(b, data, size);
  fill_zero_crc(b, size);
  return b;
}

/* The input as a stream to read from its start (close it with fclose). */
static inline FILE *input_stream(const uint8_t *data, size_t size) {
  static uint8_t empty[1];
  FILE *f = fmemopen(size ? (void *)data : empty, size, "rb");
  if (!f) die("fmemopen failed");
  return f;
}

/* This process's temporary file `tag` in buf. */
static inline void temp_path(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "%s/agrl_fuzz_%s_%ld", tmp_dir, tag, (long)getpid());
}

/* The promises of a refusal by the call `fn`: *out was not written (it is
 * still `sentinel`), the message begins with "fn: ", and the device memory
 * in use is what it was before the load (live0). */
static inline void check_refusal(const void *out, const void *sentinel, const char *fn, uint64_t live0) {
  if (out != sentinel) die("a refused load wrote *out");
  size_t n = strlen(fn);
  const char *msg = ag_last_error();
  if (strncmp(msg, fn, n) != 0 || strncmp(msg + n, ": ", 2) != 0) {
    char what[96];
    snprintf(what, sizeof what, "a refusal's message does not name %s", fn);
    die(what);
  }
  if (live_bytes() != live0) die("a refused load left device memory allocated");
}

/* The bytes of the file at path (*n of them, malloc'd); the file is removed. */
static inline uint8_t *take_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) die("the saved file cannot be opened");
  size_t cap = 4096, len = 0;
  uint8_t *b = malloc(cap);
  for (size_t got; b && (got = fread(b + len, 1, cap - len, f)) > 0;)
    if ((len += got) == cap) {
      uint8_t *more = realloc(b, cap *= 2);
      if (!more) free(b);
      b = more;
    }
  fclose(f);
  unlink(path);
  if (!b) die("out of host memory for the saved file");
  *n = len;
  return b;
}

#endif /* AGRL_FUZZ_COMMON_H */
