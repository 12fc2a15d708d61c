/* fuzz_common.h — what the loader harnesses of tests/fuzz share: their CPU
 * context, the abort on a broken promise, the promises of a refusal, the
 * comparison of a file saved again with the input it was loaded from, and
 * the whole harness of an agent file (fuzz_agent_input).
 * Each harness is one program that includes it once (its state is static).
 */
#ifndef AGRL_FUZZ_COMMON_H
#define AGRL_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agrl/agrl.h"

/* The save with a part length (src/replay/replay_file.c) and the
 * library's CRC-32 (src/base/base.h). */
ag_status ag__replay_save_parts(const ag_replay *r, const char *path, size_t part);
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
 * u32 at byte 12) stores a CRC-32 of 0, the CRC of its bytes is written in
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

/* Whether b (nb bytes) is a (na bytes) but for what a save stamps in every
 * agrl file header: the library version (bytes 16..47) and the header's
 * CRC-32 (the 4 bytes ending at H, the u32 at byte 12). */
static inline int same_but_stamp(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
  if (na != nb) return 0;
  size_t h = na >= 16 ? (size_t)get(a + 12, 4) : 0;
  for (size_t i = 0; i < na; i++) {
    int skip = (i >= 16 && i < 48) || (i + 4 >= h && i < h);
    if (!skip && a[i] != b[i]) return 0;
  }
  return 1;
}

/* Whether the accepted replay file image img (n bytes) holds what the table
 * r loaded from it does. A save writes parts of AG_TRANSFER_PART_BYTES:
 * saved (ns bytes, NULL for none) is r's image as such a save wrote it,
 * and must be img when img's parts have that length; otherwise (any part
 * length is valid) r is saved again with img's part length and must give
 * img back. Both but for the header's stamp. */
static inline int image_resaves(const ag_replay *r, const uint8_t *img, size_t n, const uint8_t *saved,
                                size_t ns) {
  size_t part = n >= 104 ? (size_t)get(img + 96, 8) : 0;
  if (saved && part == AG_TRANSFER_PART_BYTES) return same_but_stamp(img, n, saved, ns);
  char path[256];
  temp_path(path, sizeof path, "image");
  if (ag__replay_save_parts(r, path, part) != AG_OK) die("a loaded table could not be saved");
  size_t m;
  uint8_t *b = take_file(path, &m);
  int same = same_but_stamp(img, n, b, m);
  free(b);
  return same;
}

/* Bytes a section of n bytes takes in a file: parts of at most
 * AG_TRANSFER_PART_BYTES, each followed by its CRC-32 (an empty section:
 * its CRC alone). */
static inline uint64_t parts_bytes(uint64_t n) {
  const uint64_t p = AG_TRANSFER_PART_BYTES;
  return n + 4 * (n ? (n + p - 1) / p : 1);
}

/* An agent file (a DQN's, a SAC/TD3 agent's): a header of H bytes (the u32
 * at 12) whose tensor entries (rows, cols and dtype, 24 bytes each) begin
 * at `entries`, their count the u32 at `count_at`; the tensors' values;
 * then `n_sections` sections whose lengths are the i64 at sections[i].at
 * times sections[i].scale; then the replay table's image. The calls on it
 * take `void *` agents (FUZZ_AGENT writes them). */
typedef struct fuzz_agent {
  const char *harness, *load_fn, *noun, *tag; /* "fuzz_dqn_load", "ag_dqn_load", "DQN", "dqn" */
  uint64_t entries, count_at;
  int n_sections;
  struct {
    uint64_t at, scale;
  } sections[2];
  ag_status (*load)(FILE *f, size_t max_bytes, void **out); /* *out kept on a refusal */
  ag_status (*save)(const void *a, const char *path);
  const ag_replay *(*replay)(const void *a);
  void (*free)(void *a);
} fuzz_agent;

/* The fuzz_agent `var` of the agent type T whose calls are ag__N_load_stream
 * (declared here), ag_N_save, ag_N_replay and ag_N_free. */
#define FUZZ_AGENT(var, T, N, NOUN, ENTRIES, COUNT_AT, N_SECTIONS, ...)                                     \
  ag_status ag__##N##_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, T **out);       \
  static ag_status var##_load(FILE *f, size_t max_bytes, void **out) {                                      \
    T *x = *out;                                                                                            \
    ag_status s = ag__##N##_load_stream(ctx, f, "input", max_bytes, &x);                                    \
    *out = x;                                                                                               \
    return s;                                                                                               \
  }                                                                                                         \
  static ag_status var##_save(const void *a, const char *path) { return ag_##N##_save(a, path); }           \
  static const ag_replay *var##_replay(const void *a) { return ag_##N##_replay(a); }                        \
  static void var##_free(void *a) { ag_##N##_free(a); }                                                     \
  static const fuzz_agent var = {"fuzz_" #N "_load", "ag_" #N "_load", NOUN,        #N,         ENTRIES,    \
                                 COUNT_AT,           N_SECTIONS,       __VA_ARGS__, var##_load, var##_save, \
                                 var##_replay,       var##_free}

/* Where the replay table's image begins in agent file k of size bytes:
 * after the header, the tensors' values and the sections; UINT64_MAX for
 * a header that is not all there. */
static inline uint64_t agent_image_offset(const fuzz_agent *k, const uint8_t *data, size_t size) {
  if (size < k->entries) return UINT64_MAX;
  uint64_t at = get(data + 12, 4), T = get(data + k->count_at, 4);
  if (T > 256 || at != k->entries + 24 * T + 4 || at > size) return UINT64_MAX;
  for (uint64_t i = 0; i < T; i++) {
    const uint8_t *e = data + k->entries + 24 * i;
    at += parts_bytes(get(e, 8) * get(e + 8, 8) * ag_dtype_size((ag_dtype)get(e + 16, 4)));
  }
  for (int i = 0; i < k->n_sections; i++) {
    uint64_t n = get(data + k->sections[i].at, 8);
    if (n > size) return UINT64_MAX;
    at += parts_bytes(n * k->sections[i].scale);
  }
  return at;
}

/* Dies with "a loaded NOUN WHAT". */
static inline void die_loaded(const fuzz_agent *k, const char *what) {
  char msg[128];
  snprintf(msg, sizeof msg, "a loaded %s %s", k->noun, what);
  die(msg);
}

/* Saves a and compares the file with the input. */
static inline void agent_check_resave(const fuzz_agent *k, const void *a, const uint8_t *data, size_t size) {
  uint64_t at = agent_image_offset(k, data, size);
  if (at > size || size - at < 160 || get(data + at + 152, 8) != size - at)
    die("an accepted file does not end with a replay image after its header and sections");
  char path[256];
  temp_path(path, sizeof path, k->tag);
  if (k->save(a, path) != AG_OK) die_loaded(k, "could not be saved");
  size_t n;
  uint8_t *b = take_file(path, &n);
  int same = n >= at && same_but_stamp(data, at, b, at) &&
             image_resaves(k->replay(a), data + at, size - at, b + at, n - at);
  free(b);
  if (!same) die("a file saved again after its load differs from the input");
}

static inline void agent_load(const fuzz_agent *k, const uint8_t *data, size_t size) {
  FILE *f = input_stream(data, size);
  static int sentinel;
  void *a = &sentinel;
  uint64_t live0 = live_bytes();
  ag_status s = k->load(f, (size_t)1 << 20, &a);
  fclose(f);
  if (s != AG_OK) {
    check_refusal(a, &sentinel, k->load_fn, live0);
    return;
  }
  agent_check_resave(k, a, data, size);
  k->free(a);
  ag_ctx_reset(ctx);
  if (live_bytes() != live0) die_loaded(k, "and freed left device memory allocated");
}

/* The harness of agent file k: LLVMFuzzerTestOneInput's body. */
static inline int fuzz_agent_input(const fuzz_agent *k, const uint8_t *data, size_t size) {
  fuzz_begin(k->harness);
  uint8_t *in = input_copy(data, size);
  uint64_t at = agent_image_offset(k, in, size);
  if (at < size) fill_zero_crc(in + at, size - at); /* the table image's header */
  agent_load(k, in, size);
  free(in);
  fuzz_end();
  return 0;
}

#endif /* AGRL_FUZZ_COMMON_H */
