/* replay_file.c — replay tables saved to and loaded from files.
 *
 * The layout is given byte by byte beside ag_replay_save in agrl/replay.h.
 * Every field is little-endian, written and read byte by byte whatever the
 * host's order. Columns and leaves go between the device and the file in
 * parts of at most the file's part length (AG_TRANSFER_PART_BYTES when the
 * library writes it), each part with its CRC-32; no host copy of a whole
 * table is made. The loader checks the whole header against the file's
 * length before it allocates anything but the header.
 *
 * A section of more than one part goes through RPL_BUFS part buffers
 * handed between the calling thread, which alone calls the device, and a
 * thread of the file: a save downloads part k+1 while the file's thread
 * writes part k and starts its writeback to the disk (so that the
 * commit's fsync finds little left to write); a load uploads part k while
 * the file's thread reads the parts after it. The CRC-32s are taken by
 * whichever of the two threads is free first. A table of a part or less
 * is written and read on the calling thread alone, through one buffer.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sync_file_range */
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "agrl/agrl.h"
#include "base/per_tree.h"
#include "replay/replay_internal.h"

#define RPL_VERSION 1u
#define RPL_FIXED 160 /* the header up to the field entries */
#define RPL_MAX_FIELDS 4096
#define RPL_MAX_NAME 1024
#define RPL_ENTRY_MAX (16 + RPL_MAX_NAME)
#define RPL_HEADER_MAX ((int64_t)RPL_FIXED + (int64_t)RPL_MAX_FIELDS * RPL_ENTRY_MAX + 4)
#define RPL_MAX_CAPACITY ((int64_t)1 << 40)
#define RPL_MAX_WIDTH ((int64_t)INT32_MAX)
#define RPL_PART_MIN 128

static const char rpl_magic[8] = {'A', 'G', 'R', 'L', 'R', 'P', 'L', '1'};

static int storage_ok(int64_t d) {
  return d == AG_F32 || d == AG_F16 || d == AG_BF16 || d == AG_U8 || d == AG_I32;
}
static int host_ok(int64_t d) { return d >= AG_F32 && d <= AG_I64; }

/* Bytes of a section of n data bytes cut into parts of `part`, each followed by its CRC-32. */
static int64_t section_bytes(int64_t n, int64_t part) { return n + 4 * ((n + part - 1) / part); }

static int64_t entry_bytes(size_t name_len) { return 16 + (((int64_t)name_len + 7) & ~(int64_t)7); }

/* Turns n elements of es bytes between the host's order and the file's
 * (little-endian): nothing to do on a little-endian host. */
static void file_order(unsigned char *p, size_t n, size_t es) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (size_t i = 0; i < n; i++, p += es)
    for (size_t a = 0, b = es - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b], p[b] = t;
    }
#else
  (void)p, (void)n, (void)es;
#endif
}

/* The device address of the table's columns (the buffer made resident). */
static ag_status columns_ptr(ag_replay *r, const char *fn, void **out) {
  ag__upload_part at;
  ag_status s = ag__buffer_part(r->buf, r, r->capacity, 0, fn, &at);
  if (!s) *out = at.dst;
  return s;
}

/* ---- parts handed between the calling thread and the file's ---- */

#define RPL_BUFS 3 /* part buffers of a save or load whose parts overlap */

/* Tests turn the overlap off (0) to compare a file written by the calling
 * thread alone, part after part through one buffer. */
static atomic_int overlap = 1;
void ag__replay_file_overlap(int on);
void ag__replay_file_overlap(int on) { atomic_store(&overlap, on != 0); }

/* The data sections of a file, the columns (0) and the leaves (1), cut in parts. */
typedef struct rpl_plan {
  int64_t bytes[2];
  size_t es[2]; /* bytes of an element, for the byte order */
  size_t part;
} rpl_plan;

static size_t part_len(const rpl_plan *pl, int sec, int64_t off) {
  return (size_t)(pl->bytes[sec] - off) < pl->part ? (size_t)(pl->bytes[sec] - off) : pl->part;
}

/* The buffer length of a plan: a part, or the larger section when it is
 * shorter (at least `least` bytes). */
static size_t plan_buf_len(const rpl_plan *pl, size_t least) {
  int64_t most = pl->bytes[0] > pl->bytes[1] ? pl->bytes[0] : pl->bytes[1];
  if (most < (int64_t)least) most = (int64_t)least;
  return most < (int64_t)pl->part ? (size_t)most : pl->part;
}

/* Whether the parts go through a thread of the file: a section of more than one part. */
static int plan_overlaps(const rpl_plan *pl) {
  return atomic_load(&overlap) && (pl->bytes[0] > (int64_t)pl->part || pl->bytes[1] > (int64_t)pl->part);
}

/* Where a part's CRC-32 stands: no thread took it yet, one is taking it, taken. */
enum { RPL_CRC_DUE, RPL_CRC_TAKEN, RPL_CRC_DONE };

/* A part buffer in a pipe, and the CRC-32 of the part it holds. */
typedef struct rpl_slot {
  unsigned char *buf;
  size_t len;
  uint32_t stored; /* a load: the part's CRC-32 as the file holds it */
  uint32_t crc;    /* the CRC-32 of its bytes, once state is RPL_CRC_DONE */
  int state;
} rpl_slot;

/* Part buffers handed in order from a producer thread to a consumer: part
 * i goes through slot[i % RPL_BUFS]; made counts the parts handed over,
 * used those given back. A part's CRC-32 is taken by whichever thread
 * gets to it first: the producer while it waits for a free buffer, or the
 * consumer when the part comes to its turn; so the two threads share the
 * work that either can do. */
typedef struct rpl_pipe {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  rpl_slot slot[RPL_BUFS];
  int64_t made, used;
  int closed;  /* the producer hands over no more parts */
  int stopped; /* the consumer takes no more: the producer stops */
} rpl_pipe;

/* n buffers of len bytes, allocated on the calling thread (whose host
 * faults tests inject); 0 when one is missing (pipe_free frees the rest). */
static int pipe_alloc(rpl_pipe *p, int n, size_t len) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < n; i++)
    if (!(p->slot[i].buf = ag__malloc(len))) return 0;
  return 1;
}

static void pipe_free(rpl_pipe *p) {
  for (int i = 0; i < RPL_BUFS; i++) free(p->slot[i].buf), p->slot[i].buf = NULL;
}

/* Runs fn(arg) on a thread of its own, with every signal blocked (they go
 * to the caller's threads); 0 when it cannot start: the caller then does
 * the work alone. */
static int pipe_start(rpl_pipe *p, void *(*fn)(void *), void *arg) {
  if (pthread_mutex_init(&p->mu, NULL)) return 0;
  if (pthread_cond_init(&p->cv, NULL)) {
    pthread_mutex_destroy(&p->mu);
    return 0;
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = pthread_create(&p->thread, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
  }
  return !e;
}

static void pipe_join(rpl_pipe *p) {
  pthread_join(p->thread, NULL);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
}

/* With mu held: takes the CRC-32 of slot q (RPL_CRC_DUE), mu let go meanwhile. */
static void slot_crc(rpl_pipe *p, rpl_slot *q) {
  q->state = RPL_CRC_TAKEN;
  pthread_mutex_unlock(&p->mu);
  uint32_t crc = ag__crc32_add(0, q->buf, q->len);
  pthread_mutex_lock(&p->mu);
  q->crc = crc;
  q->state = RPL_CRC_DONE;
  pthread_cond_broadcast(&p->cv);
}

/* Producer: the buffer of the next part once one is free (taking the
 * CRC-32s of the parts handed over while none is); NULL once the consumer
 * stopped. */
static unsigned char *pipe_empty(rpl_pipe *p) {
  pthread_mutex_lock(&p->mu);
  for (;;) {
    if (p->stopped || p->made - p->used < RPL_BUFS) break;
    rpl_slot *due = NULL;
    for (int64_t i = p->used; i < p->made && !due; i++)
      if (p->slot[i % RPL_BUFS].state == RPL_CRC_DUE) due = &p->slot[i % RPL_BUFS];
    if (due)
      slot_crc(p, due);
    else
      pthread_cond_wait(&p->cv, &p->mu);
  }
  unsigned char *b = p->stopped ? NULL : p->slot[p->made % RPL_BUFS].buf;
  pthread_mutex_unlock(&p->mu);
  return b;
}

/* Producer: hands that part over, of len bytes (and, on a load, the CRC-32 the file holds). */
static void pipe_put(rpl_pipe *p, size_t len, uint32_t stored) {
  pthread_mutex_lock(&p->mu);
  rpl_slot *q = &p->slot[p->made % RPL_BUFS];
  q->len = len;
  q->stored = stored;
  q->state = RPL_CRC_DUE;
  p->made++;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* Consumer: the next part once handed over, with its CRC-32 taken; NULL
 * once the producer closed the pipe before it. */
static const rpl_slot *pipe_full(rpl_pipe *p) {
  pthread_mutex_lock(&p->mu);
  while (p->used == p->made && !p->closed) pthread_cond_wait(&p->cv, &p->mu);
  rpl_slot *q = p->used < p->made ? &p->slot[p->used % RPL_BUFS] : NULL;
  if (q && q->state == RPL_CRC_DUE) slot_crc(p, q);
  while (q && q->state != RPL_CRC_DONE) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  return q;
}

/* Consumer: gives the buffer of its part back. */
static void pipe_release(rpl_pipe *p) {
  pthread_mutex_lock(&p->mu);
  p->used++;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* Producer: no more parts (closed); consumer: no more wanted (stopped). */
static void pipe_end(rpl_pipe *p, int *flag) {
  pthread_mutex_lock(&p->mu);
  *flag = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* ---- save ---- */

/* The file's side of a save. */
typedef struct rpl_writer {
  rpl_pipe pipe;
  rpl_plan plan;
  FILE *f;
  int fd;             /* f's descriptor when it is a regular file, else -1 (no writeback started) */
  int64_t at, synced; /* f's offset after the parts written; writeback started before synced */
  int wrote, err;     /* 0 and the errno once a write failed */
} rpl_writer;

/* Writes a part (in file order) and its CRC-32, then starts the disk's
 * writeback of what f holds so far. */
static void write_part(rpl_writer *w, const unsigned char *buf, size_t len, uint32_t crc) {
  unsigned char c[4];
  ag__put32(c, crc);
  if (fwrite(buf, 1, len, w->f) != len || fwrite(c, 1, 4, w->f) != 4) {
    w->wrote = 0;
    w->err = errno;
    return;
  }
  w->at += (int64_t)len + 4;
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
  if (w->fd < 0) return;
  if (fflush(w->f)) {
    w->wrote = 0;
    w->err = errno;
    return;
  }
  (void)sync_file_range(w->fd, w->synced, w->at - w->synced, SYNC_FILE_RANGE_WRITE); /* a hint only */
  w->synced = w->at;
#endif
}

/* The file's thread: each part as the calling thread hands it over. */
static void *writer_main(void *arg) {
  rpl_writer *w = arg;
  for (int sec = 0; sec < 2 && w->wrote; sec++)
    for (int64_t off = 0; off < w->plan.bytes[sec] && w->wrote; off += (int64_t)w->plan.part) {
      const rpl_slot *q = pipe_full(&w->pipe);
      if (!q) return NULL; /* a download failed */
      write_part(w, q->buf, q->len, q->crc);
      pipe_release(&w->pipe);
    }
  pipe_end(&w->pipe, &w->pipe.stopped); /* all written, or a write failed */
  return NULL;
}

/* Downloads the sections from dev[0] and dev[1] part by part, each put in
 * file order and written by the file's thread (threaded: its thread runs)
 * or here; w->wrote turns 0 when a write fails. */
static ag_status save_sections(ag_ctx *ctx, const char *fn, rpl_writer *w, const unsigned char *const dev[2],
                               int threaded) {
  ag_status s = AG_OK;
  int go = w->wrote;
  for (int sec = 0; sec < 2 && go && !s; sec++)
    for (int64_t off = 0; off < w->plan.bytes[sec] && go; off += (int64_t)w->plan.part) {
      size_t len = part_len(&w->plan, sec, off);
      unsigned char *b = threaded ? pipe_empty(&w->pipe) : w->pipe.slot[0].buf;
      if (!(go = b != NULL)) break; /* a write failed */
      if ((s = ag__mem_download_copy(ctx, fn, b, dev[sec] + off, len))) break;
      file_order(b, len / w->plan.es[sec], w->plan.es[sec]);
      if (threaded)
        pipe_put(&w->pipe, len, 0);
      else
        write_part(w, b, len, ag__crc32_add(0, b, len)), go = w->wrote;
    }
  if (threaded) {
    pipe_end(&w->pipe, &w->pipe.closed);
    pipe_join(&w->pipe);
  }
  return s;
}

ag_status ag__replay_write(const ag_replay *cr, FILE *f, size_t part, const char *fn, const char *name) {
  if (!cr || !f) return ag__fail(AG_ERR_INVALID_ARG, "%s: replay and the file must not be NULL", fn);
  if (part < RPL_PART_MIN || part > AG_TRANSFER_PART_BYTES || part % RPL_PART_MIN)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: part length %zu is not a multiple of %d up to %zu", fn, part,
                    RPL_PART_MIN, AG_TRANSFER_PART_BYTES);
  ag_replay *r = (ag_replay *)cr; /* made resident; nothing the caller sees changes */
  ag_status s = ag__not_recording(r->ctx, fn);
  if (s || (s = ag__replay_check_sound(r, fn))) return s;
  if (r->n_fields > RPL_MAX_FIELDS)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the table has %d fields; a replay file holds at most %d", fn,
                    r->n_fields, RPL_MAX_FIELDS);
  int64_t hbytes = RPL_FIXED + 4;
  for (int i = 0; i < r->n_fields; i++) {
    size_t n = strlen(r->fields[i].name);
    if (n > RPL_MAX_NAME)
      return ag__fail(AG_ERR_UNSUPPORTED, "%s: field %d's name has %zu bytes; a replay file holds at most %d",
                      fn, i, n, RPL_MAX_NAME);
    hbytes += entry_bytes(n);
  }
  ag_per *per = ag__replay_sampler(r, &ag__per_ops);
  const size_t es = ag_dtype_size(r->storage);
  const int64_t cbytes = r->size * r->rows * (int64_t)es, lbytes = per ? r->size * 8 : 0;
  const int64_t coff = hbytes, loff = coff + section_bytes(cbytes, (int64_t)part);
  const int64_t total = loff + section_bytes(lbytes, (int64_t)part);
  const rpl_plan plan = {{cbytes, lbytes}, {es, 8}, part};
  float maxp = 0.0f;
  void *cols = NULL, *tree = NULL;
  if ((s = columns_ptr(r, fn, &cols))) return s;
  if (per) {
    void *st;
    if ((s = ag__tensor_ptr(ag__per_tree(per), &tree)) || (s = ag__tensor_ptr(ag__per_state(per), &st)) ||
        (s = ag__mem_download_copy(r->ctx, fn, &maxp, st, sizeof maxp)))
      return s;
  }

  /* the header and the part buffers first: a host that cannot give them leaves the disk alone */
  int threaded = plan_overlaps(&plan);
  rpl_writer w;
  memset(&w, 0, sizeof w);
  unsigned char *h = ag__calloc(1, (size_t)hbytes);
  if (!h || !pipe_alloc(&w.pipe, threaded ? RPL_BUFS : 1, plan_buf_len(&plan, 8))) {
    free(h);
    pipe_free(&w.pipe);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  memcpy(h, rpl_magic, 8);
  ag__put32(h + 8, RPL_VERSION);
  ag__put32(h + 12, (uint32_t)hbytes);
  snprintf((char *)h + 16, 32, "%s", ag_version());
  ag__put32(h + 48, (uint32_t)r->n_fields);
  ag__put32(h + 52, (uint32_t)r->storage);
  ag__put64(h + 56, (uint64_t)r->capacity);
  ag__put64(h + 64, (uint64_t)r->min_size);
  ag__put64(h + 72, (uint64_t)r->size);
  ag__put64(h + 80, (uint64_t)r->pos);
  ag__put64(h + 88, (uint64_t)r->rows);
  ag__put64(h + 96, (uint64_t)part);
  if (per) {
    float alpha = ag__per_alpha(per);
    uint32_t ab, mb;
    memcpy(&ab, &alpha, 4);
    memcpy(&mb, &maxp, 4);
    ag__put32(h + 104, 1);
    ag__put32(h + 108, ab);
    ag__put32(h + 112, mb);
  }
  ag__put64(h + 120, (uint64_t)coff);
  ag__put64(h + 128, (uint64_t)cbytes);
  ag__put64(h + 136, (uint64_t)loff);
  ag__put64(h + 144, (uint64_t)lbytes);
  ag__put64(h + 152, (uint64_t)total);
  unsigned char *e = h + RPL_FIXED;
  for (int i = 0; i < r->n_fields; i++) {
    size_t n = strlen(r->fields[i].name);
    ag__put64(e, (uint64_t)r->fields[i].width);
    ag__put32(e + 8, (uint32_t)r->fields[i].dtype);
    ag__put32(e + 12, (uint32_t)n);
    memcpy(e + 16, r->fields[i].name, n);
    e += entry_bytes(n);
  }
  ag__put32(h + hbytes - 4, ag__crc32_add(0, h, (size_t)hbytes - 4));

  w.plan = plan;
  w.f = f;
  if (!(w.wrote = fwrite(h, 1, (size_t)hbytes, f) == (size_t)hbytes)) w.err = errno;
  free(h);
  struct stat st;
  w.fd = fileno(f);
  w.at = ftello(f);
  if (w.fd < 0 || w.at < 0 || fstat(w.fd, &st) != 0 || !S_ISREG(st.st_mode)) w.fd = -1;
  threaded = threaded && w.wrote && pipe_start(&w.pipe, writer_main, &w);
  const unsigned char *const dev[2] = {
      cols, per ? (const unsigned char *)tree + 8 * ag__per_offset(ag__per_depth(per) - 1) : NULL};
  s = save_sections(r->ctx, fn, &w, dev, threaded);
  pipe_free(&w.pipe);
  if (!s && !w.wrote)
    s = ag__fail(AG_ERR_IO, "%s: writing beside %s failed: %s (the file is unchanged)", fn, name,
                 strerror(w.err));
  return s;
}

ag_status ag__replay_save_parts(const ag_replay *r, const char *path, size_t part) {
  static const char fn[] = "ag_replay_save";
  if (!r || !path) return ag__fail(AG_ERR_INVALID_ARG, "%s: replay and path must not be NULL", fn);
  if (!*path) return ag__fail(AG_ERR_INVALID_ARG, "%s: path is empty", fn);
  ag__afile a;
  ag_status s = ag__afile_open(&a, path, fn);
  if (s) return s;
  if ((s = ag__replay_write(r, a.f, part, fn, path))) {
    ag__afile_abort(&a);
    return s;
  }
  return ag__afile_commit(&a, fn);
}

ag_status ag_replay_save(const ag_replay *r, const char *path) {
  return ag__replay_save_parts(r, path, AG_TRANSFER_PART_BYTES);
}

/* ---- load ---- */

/* What a header says, once checked. */
typedef struct rpl_header {
  int n_fields;
  ag_field *fields; /* names point into names */
  char *names;
  ag_dtype storage;
  int64_t capacity, min_size, size, pos, rows, part;
  int sampler;
  float alpha, maxp;
  int64_t cbytes, lbytes;
} rpl_header;

static void header_free(rpl_header *h) {
  free(h->fields);
  free(h->names);
  h->fields = NULL;
  h->names = NULL;
}

/* A read that failed (failed: ferror, with errno err) or came short. */
static ag_status read_failed(int failed, int err, const char *name) {
  static const char fn[] = "ag_replay_load";
  if (failed) return ag__fail(AG_ERR_IO, "%s: reading %s failed: %s", fn, name, strerror(err));
  return ag__fail(AG_ERR_IO, "%s: %s is truncated: it ended while being read (did it shrink?)", fn, name);
}

static ag_status read_exact(FILE *f, void *dst, size_t n, const char *name) {
  if (fread(dst, 1, n, f) == n) return AG_OK;
  return read_failed(ferror(f), errno, name);
}

#define CORRUPT(...) ag__fail(AG_ERR_IO, __VA_ARGS__)

/* Checks the fields of the fixed header; hb holds RPL_FIXED bytes. */
static ag_status check_fixed(const unsigned char *hb, const char *name, rpl_header *h) {
  static const char fn[] = "ag_replay_load";
  const unsigned char *v = hb + 16;
  if (!memchr(v, 0, 32))
    return CORRUPT("%s: %s is corrupt: the library version at byte 16 has no end", fn, name);
  for (size_t i = strlen((const char *)v); i < 32; i++)
    if (v[i])
      return CORRUPT("%s: %s is corrupt: byte %zu after the library version is not 0", fn, name, 16 + i);
  int64_t nf = ag__get32(hb + 48), st = ag__get32(hb + 52);
  if (nf < 1 || nf > RPL_MAX_FIELDS)
    return CORRUPT("%s: %s is corrupt: n_fields = %lld, outside 1..%d", fn, name, (long long)nf,
                   RPL_MAX_FIELDS);
  if (!storage_ok(st))
    return CORRUPT("%s: %s is corrupt: storage dtype code %lld is not f32, f16, bf16, u8 or i32", fn, name,
                   (long long)st);
  h->n_fields = (int)nf;
  h->storage = (ag_dtype)st;
  h->capacity = (int64_t)ag__get64(hb + 56);
  h->min_size = (int64_t)ag__get64(hb + 64);
  h->size = (int64_t)ag__get64(hb + 72);
  h->pos = (int64_t)ag__get64(hb + 80);
  h->rows = (int64_t)ag__get64(hb + 88);
  h->part = (int64_t)ag__get64(hb + 96);
  if (h->capacity < 1 || h->capacity > RPL_MAX_CAPACITY)
    return CORRUPT("%s: %s is corrupt: capacity = %lld, outside 1..2^40", fn, name, (long long)h->capacity);
  if (h->min_size < 1 || h->min_size > h->capacity)
    return CORRUPT("%s: %s is corrupt: min_size = %lld, outside 1..capacity (%lld)", fn, name,
                   (long long)h->min_size, (long long)h->capacity);
  if (h->size < 0 || h->size > h->capacity)
    return CORRUPT("%s: %s is corrupt: size = %lld, outside 0..capacity (%lld)", fn, name, (long long)h->size,
                   (long long)h->capacity);
  if (h->size < h->capacity ? h->pos != h->size : (h->pos < 0 || h->pos >= h->capacity))
    return CORRUPT("%s: %s is corrupt: position %lld is not one a ring of size %lld and capacity %lld has",
                   fn, name, (long long)h->pos, (long long)h->size, (long long)h->capacity);
  if (h->rows < 1 || h->rows > (int64_t)RPL_MAX_FIELDS * RPL_MAX_WIDTH)
    return CORRUPT("%s: %s is corrupt: rows = %lld is out of range", fn, name, (long long)h->rows);
  size_t es = ag_dtype_size(h->storage), tb;
  if (!ag__mul3((uint64_t)h->rows, (uint64_t)h->capacity, es, &tb) || tb > ((size_t)1 << 62))
    return CORRUPT("%s: %s is corrupt: %lld rows of %lld columns exceed 2^62 bytes", fn, name,
                   (long long)h->rows, (long long)h->capacity);
  if (h->part < RPL_PART_MIN || h->part > (int64_t)AG_TRANSFER_PART_BYTES || h->part % RPL_PART_MIN)
    return CORRUPT("%s: %s is corrupt: part length %lld is not a multiple of %d up to %zu", fn, name,
                   (long long)h->part, RPL_PART_MIN, AG_TRANSFER_PART_BYTES);
  uint32_t sampler = ag__get32(hb + 104), ab = ag__get32(hb + 108), mb = ag__get32(hb + 112);
  if (sampler > 1)
    return CORRUPT("%s: %s is corrupt: sampler code %u is not 0 (none) or 1 (prioritized)", fn, name,
                   (unsigned)sampler);
  if (ag__get32(hb + 116) != 0)
    return CORRUPT("%s: %s is corrupt: the reserved header word at byte 116 is not 0", fn, name);
  memcpy(&h->alpha, &ab, 4);
  memcpy(&h->maxp, &mb, 4);
  h->sampler = (int)sampler;
  if (!sampler && (ab || mb))
    return CORRUPT("%s: %s is corrupt: a table without a sampler has a non-zero alpha or max priority", fn,
                   name);
  if (sampler && !(h->alpha >= 0.0f && h->alpha <= 1.0f))
    return CORRUPT("%s: %s is corrupt: alpha = %g, outside [0, 1]", fn, name, (double)h->alpha);
  if (sampler && !(h->maxp > 0.0f && h->maxp < INFINITY))
    return CORRUPT("%s: %s is corrupt: the max priority %g is not finite and positive", fn, name,
                   (double)h->maxp);
  if (sampler && h->capacity > INT32_MAX)
    return CORRUPT("%s: %s is corrupt: a prioritized table of %lld columns (more than 2^31)", fn, name,
                   (long long)h->capacity);
  h->cbytes = h->size * h->rows * (int64_t)es;
  h->lbytes = sampler ? h->size * 8 : 0;
  return AG_OK;
}

/* Reads and checks the header at f's position, of a stream of len bytes. */
static ag_status read_header(FILE *f, const char *name, int64_t len, rpl_header *h) {
  static const char fn[] = "ag_replay_load";
  memset(h, 0, sizeof *h);
  unsigned char fixed[16];
  if (len < 16) { /* too short for any header: tell a non-file from a cut one by the magic */
    size_t n = (size_t)(len < 8 ? len : 8);
    ag_status s = read_exact(f, fixed, n, name);
    if (s) return s;
    if (memcmp(fixed, rpl_magic, n) != 0)
      return CORRUPT("%s: %s is not a replay file (it does not begin with \"AGRLRPL1\")", fn, name);
    return CORRUPT("%s: %s is truncated: %lld bytes, shorter than a replay file's header", fn, name,
                   (long long)len);
  }
  ag_status s = read_exact(f, fixed, 16, name);
  if (s) return s;
  if (memcmp(fixed, rpl_magic, 8) != 0)
    return CORRUPT("%s: %s is not a replay file (it does not begin with \"AGRLRPL1\")", fn, name);
  uint32_t version = ag__get32(fixed + 8);
  if (version > RPL_VERSION)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: %s has format version %u; this library reads version %u", fn,
                    name, (unsigned)version, (unsigned)RPL_VERSION);
  if (version != RPL_VERSION)
    return CORRUPT("%s: %s is corrupt: format version %u (versions start at 1)", fn, name, (unsigned)version);
  int64_t hbytes = ag__get32(fixed + 12);
  if (hbytes < RPL_FIXED + 4 + 24 || hbytes > RPL_HEADER_MAX || hbytes % 8 != 4)
    return CORRUPT("%s: %s is corrupt: the header length %lld is not a valid one", fn, name,
                   (long long)hbytes);
  if (hbytes > len)
    return CORRUPT("%s: %s is truncated: %lld bytes, shorter than its %lld-byte header", fn, name,
                   (long long)len, (long long)hbytes);
  unsigned char *hb = ag__malloc((size_t)hbytes);
  if (!hb) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  memcpy(hb, fixed, 16);
  if (!(s = read_exact(f, hb + 16, (size_t)hbytes - 16, name))) {
    uint32_t stored = ag__get32(hb + hbytes - 4), computed = ag__crc32_add(0, hb, (size_t)hbytes - 4);
    if (stored != computed)
      s = CORRUPT("%s: %s is corrupt: its header fails its CRC-32 check (stored %08x, computed %08x)", fn,
                  name, (unsigned)stored, (unsigned)computed);
  }
  if (!s) s = check_fixed(hb, name, h);
  if (!s) {
    h->fields = ag__calloc((size_t)h->n_fields, sizeof *h->fields);
    h->names = ag__malloc((size_t)hbytes); /* every name with its NUL fits */
    if (!h->fields || !h->names) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  int64_t at = RPL_FIXED, rows = 0;
  char *np = h->names;
  for (int i = 0; !s && i < h->n_fields; i++) {
    if (at + 16 > hbytes - 4) {
      s = CORRUPT("%s: %s is corrupt: its header ends inside field %d", fn, name, i);
      break;
    }
    int64_t w = (int64_t)ag__get64(hb + at), dt = ag__get32(hb + at + 8), n = ag__get32(hb + at + 12);
    if (n < 1 || n > RPL_MAX_NAME || at + entry_bytes((size_t)n) > hbytes - 4) {
      s = CORRUPT("%s: %s is corrupt: field %d's name length %lld does not fit its header", fn, name, i,
                  (long long)n);
      break;
    }
    const unsigned char *nm = hb + at + 16;
    if (memchr(nm, 0, (size_t)n)) {
      s = CORRUPT("%s: %s is corrupt: field %d's name holds a NUL byte", fn, name, i);
      break;
    }
    for (int64_t k = n; k < entry_bytes((size_t)n) - 16; k++)
      if (nm[k]) s = CORRUPT("%s: %s is corrupt: the padding after field %d's name is not 0", fn, name, i);
    if (s) break;
    memcpy(np, nm, (size_t)n);
    np[n] = 0;
    if (w < 1 || w > RPL_MAX_WIDTH) {
      s = CORRUPT("%s: %s is corrupt: field '%s' has width %lld, outside 1..2^31-1", fn, name, np,
                  (long long)w);
      break;
    }
    if (!host_ok(dt)) {
      s = CORRUPT("%s: %s is corrupt: field '%s' has dtype code %lld, not a host dtype", fn, name, np,
                  (long long)dt);
      break;
    }
    for (int k = 0; k < i && !s; k++)
      if (strcmp(h->fields[k].name, np) == 0)
        s = CORRUPT("%s: %s is corrupt: field name '%s' is used twice", fn, name, np);
    if (s) break;
    h->fields[i].name = np;
    h->fields[i].width = w;
    h->fields[i].dtype = (ag_dtype)dt;
    rows += w;
    np += n + 1;
    at += entry_bytes((size_t)n);
  }
  if (!s && at != hbytes - 4)
    s = CORRUPT("%s: %s is corrupt: %lld header bytes follow the last field", fn, name,
                (long long)(hbytes - 4 - at));
  if (!s && rows != h->rows)
    s = CORRUPT("%s: %s is corrupt: the fields' widths add up to %lld rows, the header says %lld", fn, name,
                (long long)rows, (long long)h->rows);
  if (!s) {
    int64_t coff = (int64_t)ag__get64(hb + 120), cb = (int64_t)ag__get64(hb + 128);
    int64_t loff = (int64_t)ag__get64(hb + 136), lb = (int64_t)ag__get64(hb + 144);
    int64_t total = (int64_t)ag__get64(hb + 152);
    int64_t want_loff = hbytes + section_bytes(h->cbytes, h->part);
    int64_t want_total = want_loff + section_bytes(h->lbytes, h->part);
    if (coff != hbytes || cb != h->cbytes || loff != want_loff || lb != h->lbytes || total != want_total)
      s = CORRUPT("%s: %s is corrupt: its section offsets and lengths do not match its sizes", fn, name);
    else if (len < total)
      s = CORRUPT("%s: %s is truncated: %lld bytes, where its header describes %lld (%lld missing)", fn, name,
                  (long long)len, (long long)total, (long long)(total - len));
    else if (len > total)
      s = CORRUPT("%s: %s is corrupt: %lld trailing bytes follow the %lld bytes its header describes", fn,
                  name, (long long)(len - total), (long long)total);
  }
  free(hb);
  if (s) header_free(h);
  return s;
}

/* The file's side of a load. */
typedef struct rpl_reader {
  rpl_pipe pipe;
  rpl_plan plan;
  FILE *f;
  int failed, err; /* the read that stopped it failed (ferror, errno err), else it came short */
} rpl_reader;

/* Reads a part of len bytes into buf and the CRC-32 the file holds for it
 * into *stored; 0 when it cannot (rd says why). */
static int read_part(rpl_reader *rd, unsigned char *buf, size_t len, uint32_t *stored) {
  unsigned char c[4];
  if (fread(buf, 1, len, rd->f) == len && fread(c, 1, 4, rd->f) == 4) {
    *stored = ag__get32(c);
    return 1;
  }
  rd->err = errno;
  rd->failed = ferror(rd->f) != 0;
  return 0;
}

/* The file's thread: reads the parts ahead of the calling thread's uploads. */
static void *reader_main(void *arg) {
  rpl_reader *rd = arg;
  int go = 1;
  for (int sec = 0; sec < 2 && go; sec++)
    for (int64_t off = 0; off < rd->plan.bytes[sec] && go; off += (int64_t)rd->plan.part) {
      size_t len = part_len(&rd->plan, sec, off);
      unsigned char *b = pipe_empty(&rd->pipe);
      uint32_t stored = 0;
      if ((go = b && read_part(rd, b, len, &stored))) pipe_put(&rd->pipe, len, stored);
    }
  pipe_end(&rd->pipe, &rd->pipe.closed);
  return NULL;
}

/* Stops the file's thread (threaded: it runs) and waits for it. */
static void reader_stop(rpl_reader *rd, int threaded) {
  if (!threaded) return;
  pipe_end(&rd->pipe, &rd->pipe.stopped);
  pipe_join(&rd->pipe);
}

/* Uploads the sections to dev[0] and dev[1] part by part, each read by the
 * file's thread (threaded: its thread runs) or here, after checking its
 * CRC-32 and, for the leaves, that each value is a finite double >= 0. */
static ag_status load_sections(ag_ctx *ctx, rpl_reader *rd, const char *name, unsigned char *const dev[2],
                               int threaded) {
  static const char fn[] = "ag_replay_load";
  static const char *const what[2] = {"columns", "sum tree leaves"};
  ag_status s = AG_OK;
  int cut = 0; /* a read stopped short; why is in rd once its thread is joined */
  for (int sec = 0; sec < 2 && !s && !cut; sec++) {
    int64_t k = 0;
    for (int64_t off = 0; off < rd->plan.bytes[sec] && !s; off += (int64_t)rd->plan.part, k++) {
      size_t len = part_len(&rd->plan, sec, off);
      unsigned char *buf = rd->pipe.slot[0].buf;
      uint32_t stored = 0, crc = 0;
      if (threaded) {
        const rpl_slot *q = pipe_full(&rd->pipe);
        if (q) buf = q->buf, stored = q->stored, crc = q->crc;
        cut = !q;
      } else if (!(cut = !read_part(rd, buf, len, &stored)))
        crc = ag__crc32_add(0, buf, len);
      if (cut) break;
      if (stored != crc)
        s = CORRUPT(
            "%s: %s is corrupt: part %lld of its %s fails its CRC-32 check (stored %08x, computed %08x)", fn,
            name, (long long)k, what[sec], (unsigned)stored, (unsigned)crc);
      if (!s) file_order(buf, len / rd->plan.es[sec], rd->plan.es[sec]);
      for (size_t i = 0; !s && sec == 1 && i < len / 8; i++) {
        double v;
        memcpy(&v, buf + 8 * i, 8);
        if (!(v >= 0.0 && v < INFINITY))
          s = CORRUPT("%s: %s is corrupt: leaf %lld of its sum tree is %g, not finite and >= 0", fn, name,
                      (long long)(off / 8 + (int64_t)i), v);
      }
      if (!s) s = ag__mem_upload_copy(ctx, fn, dev[sec] + off, buf, len);
      if (threaded) pipe_release(&rd->pipe);
    }
  }
  reader_stop(rd, threaded);
  if (!s && cut) s = read_failed(rd->failed, rd->err, name);
  return s;
}

/* The levels above the leaves from the n valid leaves (the rest are 0, as
 * in a new tree), with the sum every kernel takes: each level streamed down
 * in parts, its parents computed on the host and sent up. */
static ag_status rebuild_tree(ag_ctx *ctx, double *tree, int depth, int64_t n, unsigned char *buf,
                              size_t part) {
  static const char fn[] = "ag_replay_load";
  const int64_t step = (int64_t)(part / 8) / AG__PER_FAN * AG__PER_FAN; /* children per part */
  for (int d = depth - 2; d >= -1; d--) {                               /* d = -1: the root, from level 0 */
    const int64_t np = d >= 0 ? (n + AG__PER_FAN - 1) / AG__PER_FAN : 1;
    double *child = tree + ag__per_offset(d + 1), *dst = tree + ag__per_offset(d >= 0 ? d : depth);
    for (int64_t c0 = 0; c0 < np * AG__PER_FAN; c0 += step) {
      int64_t cn = np * AG__PER_FAN - c0 < step ? np * AG__PER_FAN - c0 : step;
      double *v = (double *)(void *)buf;
      ag_status s = ag__mem_download_copy(ctx, fn, v, child + c0, (size_t)cn * 8);
      if (s) return s;
      for (int64_t j = 0; j < cn / AG__PER_FAN; j++) v[j] = ag__per_sum16(v + j * AG__PER_FAN);
      if ((s = ag__mem_upload_copy(ctx, fn, dst + c0 / AG__PER_FAN, v, (size_t)(cn / AG__PER_FAN) * 8)))
        return s;
    }
    n = np;
  }
  return AG_OK;
}

ag_status ag__replay_read(ag_ctx *ctx, FILE *f, const char *name, uint64_t left, size_t max_table_bytes,
                          const char *fn, ag_replay **out) {
  if (!ctx || !f || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, the file and out must not be NULL", fn);
  if (!name) name = "the stream";
  ag_status s = ag__not_recording(ctx, fn);
  if (s) return s;
  rpl_header h;
  if ((s = read_header(f, name, (int64_t)left, &h))) return s;
  const size_t es = ag_dtype_size(h.storage);
  size_t table = (size_t)(h.rows * h.capacity) * es;
  if (max_table_bytes && table > max_table_bytes) {
    header_free(&h);
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: the table of %s (%zu bytes) is larger than the limit of %zu bytes", fn, name, table,
                    max_table_bytes);
  }
  const rpl_plan plan = {{h.cbytes, h.lbytes}, {es, 8}, (size_t)h.part};
  const size_t blen = plan_buf_len(&plan, h.sampler ? 8 * AG__PER_FAN : 1); /* the rebuild's level 0 */
  int threaded = plan_overlaps(&plan);
  rpl_reader rd;
  memset(&rd, 0, sizeof rd);
  if (!pipe_alloc(&rd.pipe, threaded ? RPL_BUFS : 1, blen)) {
    pipe_free(&rd.pipe);
    header_free(&h);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  rd.plan = plan;
  rd.f = f;
#if defined(POSIX_FADV_SEQUENTIAL)
  if (fileno(f) >= 0) (void)posix_fadvise(fileno(f), 0, 0, POSIX_FADV_SEQUENTIAL); /* a hint only */
#endif
  threaded = threaded && pipe_start(&rd.pipe, reader_main, &rd); /* reads while the table is made */
  ag_replay *r = NULL;
  ag_per *per = NULL;
  s = ag_replay_create(ctx, h.fields, h.n_fields, h.capacity, h.storage, h.min_size, &r);
  if (!s && h.sampler) s = ag_per_create(r, h.alpha, &per);
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    s = ag__fail(s, "%s: the table of %s (%.1f MB) cannot be made: %s", fn, name, AG__MB((double)table), why);
  }
  void *cols = NULL, *tree = NULL, *st = NULL;
  if (!s) s = columns_ptr(r, fn, &cols);
  if (!s && per && !(s = ag__tensor_ptr(ag__per_tree(per), &tree)))
    s = ag__tensor_ptr(ag__per_state(per), &st);
  if (!s) {
    unsigned char *const dev[2] = {
        cols, per ? (unsigned char *)tree + 8 * ag__per_offset(ag__per_depth(per) - 1) : NULL};
    s = load_sections(ctx, &rd, name, dev, threaded);
  } else
    reader_stop(&rd, threaded);
  if (!s && per && h.size > 0)
    s = rebuild_tree(ctx, tree, ag__per_depth(per), h.size, rd.pipe.slot[0].buf, blen);
  if (!s && per) s = ag__mem_upload_copy(ctx, fn, st, &h.maxp, sizeof h.maxp);
  if (!s && h.size > 0) {
    void *sz = NULL;
    s = ag__tensor_ptr(r->size_dev, &sz);
    if (!s) s = ag__mem_upload_copy(ctx, fn, sz, &h.size, sizeof h.size);
  }
  pipe_free(&rd.pipe);
  header_free(&h);
  if (!s) { /* the position on the device too, for what reads it there (ag_replay_nstep) */
    r->size = h.size;
    r->pos = h.pos;
    s = ag__replay_sync_pos(r, fn);
  }
  if (s) {
    ag_replay_free(r);
    return s;
  }
  *out = r;
  return AG_OK;
}

ag_status ag__replay_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_replay **out) {
  static const char fn[] = "ag_replay_load";
  if (!f) return ag__fail(AG_ERR_INVALID_ARG, "%s: the file is NULL", fn);
  uint64_t left = 0;
  ag_status s = ag__stream_left(f, fn, name ? name : "the stream", "a table", &left);
  if (s) return s;
  return ag__replay_read(ctx, f, name, left, max_table_bytes, fn, out);
}

ag_status ag_replay_load(ag_ctx *ctx, const char *path, ag_replay **out) {
  static const char fn[] = "ag_replay_load";
  if (!ctx || !path || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  FILE *f;
  ag_status s = ag__open_read(path, fn, &f);
  if (s) return s;
  s = ag__replay_load_stream(ctx, f, path, 0, out);
  fclose(f);
  return s;
}
