/* agfile.c — the file container (agfile.h; the layout in docs/container.md):
 * its in-memory form, the writer, the reader that checks before it
 * allocates, and the one pipeline that moves sections in CRC-checked parts
 * between the calling thread and a thread of the file.
 *
 * Every field is little-endian, written and read byte by byte whatever the
 * host's order; tensor elements are put in the file's order by the
 * pipeline. Nothing here calls a device: the writers' fills and the
 * loaders' sinks do, on the calling thread.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sync_file_range */
#endif
#include "base/agfile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static const char agf_magic[8] = {'A', 'G', 'R', 'L', 'F', 'I', 'L', 'E'};
#define AGF_VERSION 1u

#define CORRUPT(...) ag__fail(AG_ERR_IO, __VA_ARGS__)

size_t ag__agf_dtype_size(ag_dtype dt) { return dt == AG__AGF_F64_DT ? 8 : ag_dtype_size(dt); }
const char *ag__agf_dtype_name(ag_dtype dt) { return dt == AG__AGF_F64_DT ? "f64" : ag_dtype_name(dt); }

/* ---- the in-memory form ---- */

void ag__agf_init(ag__agf *a) {
  memset(a, 0, sizeof *a);
  a->format = "agrl container 1";
}

void ag__agf_free(ag__agf *a) {
  if (!a) return;
  for (int i = 0; i < a->n_keys; i++) free(a->keys[i].name), free(a->keys[i].data);
  for (int i = 0; i < a->n_sections; i++) free(a->sections[i].name);
  free(a->keys);
  free(a->sections);
  const char *format = a->format;
  memset(a, 0, sizeof *a);
  a->format = format;
}

static ag__agf_key *key_new(ag__agf *a, const char *key, ag__agf_type type, uint32_t count, const void *data,
                            size_t data_bytes) {
  if (a->failed) return NULL;
  if (a->n_keys == a->cap_keys) {
    int cap = a->cap_keys ? 2 * a->cap_keys : 16;
    ag__agf_key *k = ag__realloc(a->keys, (size_t)cap * sizeof *k);
    if (!k) return a->failed = 1, NULL;
    a->keys = k, a->cap_keys = cap;
  }
  ag__agf_key *k = &a->keys[a->n_keys];
  memset(k, 0, sizeof *k);
  k->name = ag__strdup(key);
  if (data_bytes && (k->data = ag__malloc(data_bytes + 1))) {
    memcpy(k->data, data, data_bytes);
    ((char *)k->data)[data_bytes] = 0;
  }
  if (!k->name || (data_bytes && !k->data)) {
    free(k->name), free(k->data);
    return a->failed = 1, NULL;
  }
  k->type = type, k->count = count;
  a->n_keys++;
  return k;
}

void ag__agf_set_u64(ag__agf *a, const char *key, uint64_t v) {
  ag__agf_key *k = key_new(a, key, AG__AGF_U64, 1, NULL, 0);
  if (k) k->v.u = v;
}
void ag__agf_set_i64(ag__agf *a, const char *key, int64_t v) {
  ag__agf_key *k = key_new(a, key, AG__AGF_I64, 1, NULL, 0);
  if (k) k->v.i = v;
}
void ag__agf_set_f64(ag__agf *a, const char *key, double v) {
  ag__agf_key *k = key_new(a, key, AG__AGF_F64, 1, NULL, 0);
  if (k) k->v.f = v;
}
void ag__agf_set_str(ag__agf *a, const char *key, const char *v) {
  size_t n = strlen(v);
  ag__agf_key *k = key_new(a, key, AG__AGF_STR, (uint32_t)n, v, n ? n : 1);
  (void)k;
}
void ag__agf_set_i64s(ag__agf *a, const char *key, const int64_t *v, uint32_t n) {
  key_new(a, key, AG__AGF_I64S, n, v, 8 * (size_t)n);
}
void ag__agf_set_f64s(ag__agf *a, const char *key, const double *v, uint32_t n) {
  key_new(a, key, AG__AGF_F64S, n, v, 8 * (size_t)n);
}

static ag__agf_section *section_new(ag__agf *a, const char *name) {
  if (a->failed) return NULL;
  if (a->n_sections == a->cap_sections) {
    int cap = a->cap_sections ? 2 * a->cap_sections : 16;
    ag__agf_section *s = ag__realloc(a->sections, (size_t)cap * sizeof *s);
    if (!s) return a->failed = 1, NULL;
    a->sections = s, a->cap_sections = cap;
  }
  ag__agf_section *s = &a->sections[a->n_sections];
  memset(s, 0, sizeof *s);
  if (!(s->name = ag__strdup(name))) return a->failed = 1, NULL;
  a->n_sections++;
  return s;
}

void ag__agf_add_tensor(ag__agf *a, const char *name, ag_dtype dt, int ndim, const int64_t *dims,
                        ag__agf_fill fill, void *user) {
  ag__agf_section *s = section_new(a, name);
  if (!s) return;
  s->kind = AG__AGF_TENSOR, s->dtype = dt, s->ndim = ndim, s->fill = fill, s->user = user;
  uint64_t n = ag__agf_dtype_size(dt);
  for (int i = 0; i < ndim && i < AG__AGF_MAX_DIMS; i++) s->dims[i] = dims[i], n *= (uint64_t)dims[i];
  s->bytes = n;
}

void ag__agf_add_blob(ag__agf *a, const char *name, uint64_t n, ag__agf_fill fill, void *user) {
  ag__agf_section *s = section_new(a, name);
  if (!s) return;
  s->kind = AG__AGF_BLOB, s->dtype = AG_U8, s->bytes = n, s->fill = fill, s->user = user;
}

ag_status ag__agf_fill_host(void *user, unsigned char *dst, uint64_t off, size_t len) {
  memcpy(dst, (const unsigned char *)user + off, len);
  return AG_OK;
}

const ag__agf_key *ag__agf_key_find(const ag__agf *a, const char *key) {
  for (int i = 0; i < a->n_keys; i++)
    if (!strcmp(a->keys[i].name, key)) return &a->keys[i];
  return NULL;
}

int ag__agf_section_find(const ag__agf *a, const char *name) {
  for (int i = 0; i < a->n_sections; i++)
    if (!strcmp(a->sections[i].name, name)) return i;
  return -1;
}

/* ---- the encoding of a header ---- */

static size_t elem_size(const ag__agf_section *s) {
  return s->kind == AG__AGF_TENSOR ? ag__agf_dtype_size(s->dtype) : 1;
}

static uint64_t value_bytes(const ag__agf_key *k) {
  return k->type == AG__AGF_STR ? k->count : (k->type >= AG__AGF_I64S ? 8 * (uint64_t)k->count : 8);
}

/* Bytes a section of n bytes takes in parts of `part`, each followed by its CRC-32. */
static uint64_t stored_bytes(uint64_t n, uint64_t part) { return n + 4 * ((n + part - 1) / part); }

/* Puts elements between the host's order and the file's (little-endian). */
static void file_order(unsigned char *p, size_t n, size_t es) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (size_t i = 0; i < n; i++, p += es)
    for (size_t x = 0, y = es - 1; x < y; x++, y--) {
      unsigned char t = p[x];
      p[x] = p[y], p[y] = t;
    }
#else
  (void)p, (void)n, (void)es;
#endif
}

/* ---- the pipeline: part buffers handed between two threads ---- */

#define AGF_BUFS 3

static atomic_int overlap = 1;
void ag__agf_overlap(int on) { atomic_store(&overlap, on != 0); }

enum { CRC_DUE, CRC_TAKEN, CRC_DONE };

typedef struct agf_slot {
  unsigned char *buf;
  size_t len;
  uint32_t stored; /* a read: the CRC-32 the file holds after this part (if any) */
  uint32_t crc;    /* the CRC-32 of its bytes, once state is CRC_DONE */
  int state;
} agf_slot;

/* Part i goes through slot[i % AGF_BUFS]; made counts the parts handed
 * over, used those given back. A part's CRC-32 is taken by whichever
 * thread gets to it first: the producer while it waits for a free buffer,
 * or the consumer when the part comes to its turn. */
typedef struct agf_pipe {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  agf_slot slot[AGF_BUFS];
  int64_t made, used;
  int closed;  /* the producer hands over no more parts */
  int stopped; /* the consumer takes no more: the producer stops */
} agf_pipe;

static int pipe_alloc(agf_pipe *p, int n, size_t len) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < n; i++)
    if (!(p->slot[i].buf = ag__malloc(len))) return 0;
  return 1;
}

static void pipe_free(agf_pipe *p) {
  for (int i = 0; i < AGF_BUFS; i++) free(p->slot[i].buf), p->slot[i].buf = NULL;
}

/* Runs fn(arg) on a thread with every signal blocked; 0 when it cannot
 * start (the caller then does the work alone). */
static int pipe_start(agf_pipe *p, void *(*fn)(void *), void *arg) {
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

static void pipe_join(agf_pipe *p) {
  pthread_join(p->thread, NULL);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
}

static void slot_crc(agf_pipe *p, agf_slot *q) {
  q->state = CRC_TAKEN;
  pthread_mutex_unlock(&p->mu);
  uint32_t crc = ag__crc32_add(0, q->buf, q->len);
  pthread_mutex_lock(&p->mu);
  q->crc = crc;
  q->state = CRC_DONE;
  pthread_cond_broadcast(&p->cv);
}

/* Producer: the next free buffer (NULL once the consumer stopped). */
static unsigned char *pipe_empty(agf_pipe *p) {
  pthread_mutex_lock(&p->mu);
  for (;;) {
    if (p->stopped || p->made - p->used < AGF_BUFS) break;
    agf_slot *due = NULL;
    for (int64_t i = p->used; i < p->made && !due; i++)
      if (p->slot[i % AGF_BUFS].state == CRC_DUE) due = &p->slot[i % AGF_BUFS];
    if (due)
      slot_crc(p, due);
    else
      pthread_cond_wait(&p->cv, &p->mu);
  }
  unsigned char *b = p->stopped ? NULL : p->slot[p->made % AGF_BUFS].buf;
  pthread_mutex_unlock(&p->mu);
  return b;
}

static void pipe_put(agf_pipe *p, size_t len, uint32_t stored) {
  pthread_mutex_lock(&p->mu);
  agf_slot *q = &p->slot[p->made % AGF_BUFS];
  q->len = len, q->stored = stored, q->state = CRC_DUE;
  p->made++;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* Consumer: the next part with its CRC-32 taken; NULL once the producer closed. */
static const agf_slot *pipe_full(agf_pipe *p) {
  pthread_mutex_lock(&p->mu);
  while (p->used == p->made && !p->closed) pthread_cond_wait(&p->cv, &p->mu);
  agf_slot *q = p->used < p->made ? &p->slot[p->used % AGF_BUFS] : NULL;
  if (q && q->state == CRC_DUE) slot_crc(p, q);
  while (q && q->state != CRC_DONE) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  return q;
}

static void pipe_release(agf_pipe *p) {
  pthread_mutex_lock(&p->mu);
  p->used++;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static void pipe_end(agf_pipe *p, int *flag) {
  pthread_mutex_lock(&p->mu);
  *flag = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* The length of part k of section s (0-based, from byte off). */
static size_t part_len(const ag__agf_section *s, uint64_t off) {
  return s->bytes - off < s->part ? (size_t)(s->bytes - off) : (size_t)s->part;
}

/* The buffer length of a pipeline over a's sections: the longest part. */
static size_t buf_len(const ag__agf *a) {
  size_t most = 8;
  for (int i = 0; i < a->n_sections; i++) {
    const ag__agf_section *s = &a->sections[i];
    size_t n = s->bytes < s->part ? (size_t)s->bytes : (size_t)s->part;
    if (n > most) most = n;
  }
  return most;
}

/* Whether the parts go through a thread of the file: more than one part in all. */
static int overlaps(const ag__agf *a) {
  uint64_t parts = 0;
  for (int i = 0; i < a->n_sections; i++)
    if (a->sections[i].bytes) parts += (a->sections[i].bytes + a->sections[i].part - 1) / a->sections[i].part;
  return atomic_load(&overlap) && parts > 1;
}

/* ---- writing ---- */

typedef struct agf_writer {
  agf_pipe pipe;
  const ag__agf *a;
  FILE *f;
  int fd;             /* f's descriptor when a regular file, else -1 (no writeback started) */
  int64_t at, synced; /* f's offset after the parts written; writeback started before synced */
  int wrote, err;     /* 0 and errno once a write failed */
} agf_writer;

static void write_part(agf_writer *w, const unsigned char *buf, size_t len, uint32_t crc) {
  unsigned char c[4];
  ag__put32(c, crc);
  if (fwrite(buf, 1, len, w->f) != len || fwrite(c, 1, 4, w->f) != 4) {
    w->wrote = 0, w->err = errno;
    return;
  }
  w->at += (int64_t)len + 4;
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
  if (w->fd < 0) return;
  if (fflush(w->f)) {
    w->wrote = 0, w->err = errno;
    return;
  }
  (void)sync_file_range(w->fd, w->synced, w->at - w->synced, SYNC_FILE_RANGE_WRITE); /* a hint only */
  w->synced = w->at;
#endif
}

static void *writer_main(void *arg) {
  agf_writer *w = arg;
  for (int i = 0; i < w->a->n_sections && w->wrote; i++)
    for (uint64_t off = 0; off < w->a->sections[i].bytes && w->wrote; off += w->a->sections[i].part) {
      const agf_slot *q = pipe_full(&w->pipe);
      if (!q) return NULL; /* a fill failed */
      write_part(w, q->buf, q->len, q->crc);
      pipe_release(&w->pipe);
    }
  pipe_end(&w->pipe, &w->pipe.stopped);
  return NULL;
}

/* Every section's parts: filled here, written by the file's thread or here. */
static ag_status write_sections(agf_writer *w, int threaded) {
  ag_status s = AG_OK;
  int go = w->wrote;
  for (int i = 0; i < w->a->n_sections && go && !s; i++) {
    const ag__agf_section *sec = &w->a->sections[i];
    for (uint64_t off = 0; off < sec->bytes && go; off += sec->part) {
      size_t len = part_len(sec, off), es = elem_size(sec);
      unsigned char *b = threaded ? pipe_empty(&w->pipe) : w->pipe.slot[0].buf;
      if (!(go = b != NULL)) break; /* a write failed */
      if ((s = sec->fill(sec->user, b, off, len))) break;
      file_order(b, len / es, es);
      if (threaded)
        pipe_put(&w->pipe, len, 0);
      else
        write_part(w, b, len, ag__crc32_add(0, b, len)), go = w->wrote;
    }
  }
  if (threaded) {
    pipe_end(&w->pipe, &w->pipe.closed);
    pipe_join(&w->pipe);
  }
  return s;
}

/* Checks what a writer set against the limits; the header's length. */
static ag_status check_form(const ag__agf *a, const char *fn, uint64_t *hbytes) {
  if (a->n_keys > AG__AGF_MAX_KEYS || a->n_sections > AG__AGF_MAX_SECTIONS)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: %d keys and %d sections; a file holds at most %d and %d", fn,
                    a->n_keys, a->n_sections, AG__AGF_MAX_KEYS, AG__AGF_MAX_SECTIONS);
  uint64_t h = AG__AGF_FIXED + 4;
  for (int i = 0; i < a->n_keys; i++) {
    const ag__agf_key *k = &a->keys[i];
    size_t n = strlen(k->name);
    uint32_t most =
        k->type == AG__AGF_STR ? AG__AGF_MAX_STRING : (k->type >= AG__AGF_I64S ? AG__AGF_MAX_ARRAY : 1);
    if (n < 1 || n > AG__AGF_MAX_NAME || k->count > most)
      return ag__fail(AG_ERR_UNSUPPORTED, "%s: key '%s' or its value is longer than a file holds", fn,
                      k->name);
    h += 8 + n + value_bytes(k);
  }
  for (int i = 0; i < a->n_sections; i++) {
    const ag__agf_section *s = &a->sections[i];
    size_t n = strlen(s->name);
    if (n < 1 || n > AG__AGF_MAX_NAME || s->ndim < 0 || s->ndim > AG__AGF_MAX_DIMS ||
        s->bytes > AG__AGF_MAX_SECTION)
      return ag__fail(AG_ERR_UNSUPPORTED, "%s: section '%s' is not one a file holds", fn, s->name);
    h += 24 + 8 * (uint64_t)s->ndim + n;
  }
  if (h > AG__AGF_MAX_HEADER)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: a header of %llu bytes; a file holds at most %u", fn,
                    (unsigned long long)h, AG__AGF_MAX_HEADER);
  *hbytes = h;
  return AG_OK;
}

/* The header of a (whose sections have their offsets) into h (hbytes). */
static void encode_header(const ag__agf *a, unsigned char *h, uint64_t hbytes) {
  memcpy(h, agf_magic, 8);
  ag__put32(h + 8, AGF_VERSION);
  ag__put32(h + 12, (uint32_t)hbytes);
  ag__put32(h + 16, (uint32_t)a->n_keys);
  ag__put32(h + 20, (uint32_t)a->n_sections);
  ag__put64(h + 24, a->part);
  ag__put64(h + 32, a->total);
  ag__put64(h + 40, 0);
  unsigned char *e = h + AG__AGF_FIXED;
  for (int i = 0; i < a->n_keys; i++) {
    const ag__agf_key *k = &a->keys[i];
    size_t n = strlen(k->name);
    e[0] = (unsigned char)k->type, e[1] = 0;
    e[2] = (unsigned char)n, e[3] = (unsigned char)(n >> 8);
    ag__put32(e + 4, k->count);
    memcpy(e + 8, k->name, n);
    e += 8 + n;
    if (k->type == AG__AGF_STR) {
      memcpy(e, k->data, k->count);
      e += k->count;
    } else if (k->type >= AG__AGF_I64S) {
      for (uint32_t j = 0; j < k->count; j++, e += 8) ag__put64(e, ((const uint64_t *)k->data)[j]);
    } else {
      ag__put64(e, k->v.u);
      e += 8;
    }
  }
  for (int i = 0; i < a->n_sections; i++) {
    const ag__agf_section *s = &a->sections[i];
    size_t n = strlen(s->name);
    e[0] = (unsigned char)n, e[1] = (unsigned char)(n >> 8);
    e[2] = (unsigned char)s->kind, e[3] = (unsigned char)s->dtype;
    ag__put32(e + 4, (uint32_t)s->ndim);
    ag__put64(e + 8, s->offset);
    ag__put64(e + 16, s->bytes);
    e += 24;
    for (int d = 0; d < s->ndim; d++, e += 8) ag__put64(e, (uint64_t)s->dims[d]);
    memcpy(e, s->name, n);
    e += n;
  }
  ag__put32(h + hbytes - 4, ag__crc32_add(0, h, hbytes - 4));
}

ag_status ag__agf_write(ag__agf *a, FILE *f, size_t part, const char *fn, const char *name) {
  if (a->failed) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (part < AG__AGF_PART_MIN || part > AG__AGF_PART_MAX || part % AG__AGF_PART_MIN)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: part length %zu is not a multiple of %d up to %zu", fn, part,
                    AG__AGF_PART_MIN, AG__AGF_PART_MAX);
  uint64_t hbytes = 0;
  ag_status s = check_form(a, fn, &hbytes);
  if (s) return s;
  a->part = part;
  uint64_t at = hbytes;
  for (int i = 0; i < a->n_sections; i++) {
    ag__agf_section *sec = &a->sections[i];
    sec->offset = at, sec->part = part, sec->crc = AG__AGF_CRC_PARTS;
    at += stored_bytes(sec->bytes, part);
  }
  a->total = at;

  /* the header and the part buffers first: a host that cannot give them leaves the disk alone */
  int threaded = overlaps(a);
  agf_writer w;
  memset(&w, 0, sizeof w);
  unsigned char *h = ag__malloc((size_t)hbytes);
  if (!h || !pipe_alloc(&w.pipe, threaded ? AGF_BUFS : 1, buf_len(a))) {
    free(h);
    pipe_free(&w.pipe);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  encode_header(a, h, hbytes);
  w.a = a;
  w.f = f;
  if (!(w.wrote = fwrite(h, 1, (size_t)hbytes, f) == (size_t)hbytes)) w.err = errno;
  free(h);
  struct stat st;
  w.fd = fileno(f);
  w.at = ftello(f);
  if (w.fd < 0 || w.at < 0 || fstat(w.fd, &st) != 0 || !S_ISREG(st.st_mode)) w.fd = -1;
  w.synced = w.at > 0 ? w.at : 0;
  threaded = threaded && w.wrote && pipe_start(&w.pipe, writer_main, &w);
  s = write_sections(&w, threaded);
  pipe_free(&w.pipe);
  if (!s && !w.wrote)
    s = ag__fail(AG_ERR_IO, "%s: writing beside %s failed: %s (the file is unchanged)", fn, name,
                 strerror(w.err));
  return s;
}

ag_status ag__agf_save(ag__agf *a, const char *path, size_t part, const char *fn) {
  if (a->failed) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag__afile af;
  ag_status s = ag__afile_open(&af, path, fn);
  if (s) return s;
  if ((s = ag__agf_write(a, af.f, part, fn, path))) {
    ag__afile_abort(&af);
    return s;
  }
  return ag__afile_commit(&af, fn);
}

/* ---- reading ---- */

static ag_status read_failed(int failed, int err, const char *fn, const char *name) {
  if (failed) return ag__fail(AG_ERR_IO, "%s: reading %s failed: %s", fn, name, strerror(err));
  return ag__fail(AG_ERR_IO, "%s: %s is truncated: it ended while being read (did it shrink?)", fn, name);
}

static int dtype_ok(unsigned v) { return v <= AG_I64 || v == (unsigned)AG__AGF_F64_DT; }

/* The checks of the header hb (hbytes, CRC checked) before anything is
 * allocated: every entry within the header, every limit, every name
 * unique, the sections' offsets and lengths against the stream's. */
static ag_status check_header(const unsigned char *hb, uint64_t hbytes, uint64_t left, int head,
                              const char *fn, const char *name) {
  uint32_t nk = ag__get32(hb + 16), ns = ag__get32(hb + 20);
  uint64_t part = ag__get64(hb + 24), total = ag__get64(hb + 32);
  if (nk > AG__AGF_MAX_KEYS)
    return CORRUPT("%s: %s is corrupt: %u keys, more than %d", fn, name, nk, AG__AGF_MAX_KEYS);
  if (ns > AG__AGF_MAX_SECTIONS)
    return CORRUPT("%s: %s is corrupt: %u sections, more than %d", fn, name, ns, AG__AGF_MAX_SECTIONS);
  if (part < AG__AGF_PART_MIN || part > AG__AGF_PART_MAX || part % AG__AGF_PART_MIN)
    return CORRUPT("%s: %s is corrupt: part length %llu is not a multiple of %d up to %zu", fn, name,
                   (unsigned long long)part, AG__AGF_PART_MIN, AG__AGF_PART_MAX);
  if (ag__get64(hb + 40))
    return CORRUPT("%s: %s is corrupt: the reserved word at byte 40 is not 0", fn, name);
  const uint64_t end = hbytes - 4;
  uint64_t at = AG__AGF_FIXED;
  for (uint32_t i = 0; i < nk; i++) {
    if (at + 8 > end) return CORRUPT("%s: %s is corrupt: its header ends inside key %u", fn, name, i);
    const unsigned char *e = hb + at;
    unsigned type = e[0], n = e[2] | (unsigned)e[3] << 8;
    uint32_t count = ag__get32(e + 4);
    if (type < AG__AGF_U64 || type > AG__AGF_F64S || e[1])
      return CORRUPT("%s: %s is corrupt: key %u has type code %u, not one of 1..6", fn, name, i, type);
    if (n < 1 || n > AG__AGF_MAX_NAME || at + 8 + n > end)
      return CORRUPT("%s: %s is corrupt: key %u's name length %u does not fit its header", fn, name, i, n);
    if (memchr(e + 8, 0, n)) return CORRUPT("%s: %s is corrupt: key %u's name holds a NUL byte", fn, name, i);
    uint64_t most = type == AG__AGF_STR ? AG__AGF_MAX_STRING : (type >= AG__AGF_I64S ? AG__AGF_MAX_ARRAY : 1);
    if (count > most || (type < AG__AGF_STR && count != 1) || (type > AG__AGF_STR && count < 1))
      return CORRUPT("%s: %s is corrupt: key '%.*s' has a count of %u", fn, name, (int)n, (const char *)e + 8,
                     count);
    uint64_t vb = type == AG__AGF_STR ? count : 8 * (uint64_t)count;
    if (at + 8 + n + vb > end)
      return CORRUPT("%s: %s is corrupt: key '%.*s''s value does not fit its header", fn, name, (int)n,
                     (const char *)e + 8);
    if (type == AG__AGF_STR && memchr(e + 8 + n, 0, count))
      return CORRUPT("%s: %s is corrupt: string key '%.*s' holds a NUL byte", fn, name, (int)n,
                     (const char *)e + 8);
    for (uint64_t b = AG__AGF_FIXED; b < at;) { /* names are unique */
      unsigned m = hb[b + 2] | (unsigned)hb[b + 3] << 8, t = hb[b];
      uint64_t c = ag__get32(hb + b + 4);
      if (m == n && !memcmp(hb + b + 8, e + 8, n))
        return CORRUPT("%s: %s is corrupt: key '%.*s' is there twice", fn, name, (int)n, (const char *)e + 8);
      b += 8 + m + (t == AG__AGF_STR ? c : 8 * c);
    }
    at += 8 + n + vb;
  }
  const uint64_t keys_end = at;
  uint64_t off = hbytes;
  for (uint32_t i = 0; i < ns; i++) {
    if (at + 24 > end) return CORRUPT("%s: %s is corrupt: its header ends inside section %u", fn, name, i);
    const unsigned char *e = hb + at;
    unsigned n = e[0] | (unsigned)e[1] << 8, kind = e[2], dt = e[3];
    uint32_t ndim = ag__get32(e + 4);
    uint64_t so = ag__get64(e + 8), bytes = ag__get64(e + 16);
    if (ndim > AG__AGF_MAX_DIMS)
      return CORRUPT("%s: %s is corrupt: section %u has %u dimensions, more than %d", fn, name, i, ndim,
                     AG__AGF_MAX_DIMS);
    if (n < 1 || n > AG__AGF_MAX_NAME || at + 24 + 8 * (uint64_t)ndim + n > end)
      return CORRUPT("%s: %s is corrupt: section %u's name length %u does not fit its header", fn, name, i,
                     n);
    const char *nm = (const char *)e + 24 + 8 * ndim;
    if (memchr(nm, 0, n))
      return CORRUPT("%s: %s is corrupt: section %u's name holds a NUL byte", fn, name, i);
    if (kind == AG__AGF_BLOB ? (dt != AG_U8 || ndim != 0)
                             : (kind != AG__AGF_TENSOR || !dtype_ok(dt) || ndim < 1))
      return CORRUPT(
          "%s: %s is corrupt: section '%.*s' has kind %u, dtype %u and %u dimensions, not a blob or "
          "a tensor",
          fn, name, (int)n, nm, kind, dt, ndim);
    if (bytes > AG__AGF_MAX_SECTION)
      return CORRUPT("%s: %s is corrupt: section '%.*s' has %llu bytes, more than 2^62", fn, name, (int)n, nm,
                     (unsigned long long)bytes);
    if (kind == AG__AGF_TENSOR) {
      uint64_t want = ag__agf_dtype_size((ag_dtype)dt);
      for (uint32_t d = 0; d < ndim; d++) {
        uint64_t v = ag__get64(e + 24 + 8 * d);
        if (v > AG__AGF_MAX_SECTION || (v && want > AG__AGF_MAX_SECTION / v))
          return CORRUPT("%s: %s is corrupt: section '%.*s''s dimension %u (%llu) is too large", fn, name,
                         (int)n, nm, d, (unsigned long long)v);
        want *= v;
      }
      if (want != bytes)
        return CORRUPT("%s: %s is corrupt: section '%.*s' holds %llu bytes, its shape and dtype %llu", fn,
                       name, (int)n, nm, (unsigned long long)bytes, (unsigned long long)want);
    }
    for (uint64_t b = keys_end; b < at;) {
      unsigned m = hb[b] | (unsigned)hb[b + 1] << 8;
      uint64_t nd = ag__get32(hb + b + 4);
      if (m == n && !memcmp(hb + b + 24 + 8 * nd, nm, n))
        return CORRUPT("%s: %s is corrupt: section '%.*s' is there twice", fn, name, (int)n, nm);
      b += 24 + 8 * nd + m;
    }
    if (so != off)
      return CORRUPT("%s: %s is corrupt: section '%.*s' is said to begin at byte %llu, not %llu", fn, name,
                     (int)n, nm, (unsigned long long)so, (unsigned long long)off);
    off += stored_bytes(bytes, part); /* < 2^10 sections of < 2^62 bytes with their CRCs: no overflow */
    at += 24 + 8 * (uint64_t)ndim + n;
  }
  if (at != end)
    return CORRUPT("%s: %s is corrupt: %llu header bytes follow its last section", fn, name,
                   (unsigned long long)(end - at));
  if (total != off)
    return CORRUPT("%s: %s is corrupt: its header says %llu bytes, its sections make %llu", fn, name,
                   (unsigned long long)total, (unsigned long long)off);
  return ag__agf_check_length(left, total, head, fn, name);
}

ag_status ag__agf_check_length(uint64_t left, uint64_t total, int head, const char *fn, const char *name) {
  if (left < total)
    return CORRUPT("%s: %s is truncated: %llu bytes, where its header describes %llu (%llu missing)", fn,
                   name, (unsigned long long)left, (unsigned long long)total,
                   (unsigned long long)(total - left));
  if (left > total && !head)
    return CORRUPT("%s: %s is corrupt: %llu trailing bytes follow the %llu bytes its header describes", fn,
                   name, (unsigned long long)(left - total), (unsigned long long)total);
  return AG_OK;
}

/* Builds the form from a checked header. */
static ag_status build_form(ag__agf *a, const unsigned char *hb, uint64_t hbytes, const char *fn) {
  uint32_t nk = ag__get32(hb + 16), ns = ag__get32(hb + 20);
  a->part = ag__get64(hb + 24);
  a->total = ag__get64(hb + 32);
  a->keys = ag__calloc(nk ? nk : 1, sizeof *a->keys);
  a->sections = ag__calloc(ns ? ns : 1, sizeof *a->sections);
  if (!a->keys || !a->sections) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  a->cap_keys = (int)nk, a->cap_sections = (int)ns;
  uint64_t at = AG__AGF_FIXED;
  for (uint32_t i = 0; i < nk; i++) {
    const unsigned char *e = hb + at;
    unsigned n = e[2] | (unsigned)e[3] << 8;
    ag__agf_key *k = &a->keys[i];
    k->type = (ag__agf_type)e[0], k->count = ag__get32(e + 4);
    const unsigned char *v = e + 8 + n;
    uint64_t vb = k->type == AG__AGF_STR ? k->count : 8 * (uint64_t)k->count;
    k->name = ag__malloc(n + 1);
    if (k->type >= AG__AGF_STR) k->data = ag__malloc((size_t)vb + 1);
    if (!k->name || (k->type >= AG__AGF_STR && !k->data)) {
      free(k->name), free(k->data);
      return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
    a->n_keys++;
    memcpy(k->name, e + 8, n), k->name[n] = 0;
    if (k->type == AG__AGF_STR)
      memcpy(k->data, v, k->count), ((char *)k->data)[k->count] = 0;
    else if (k->type >= AG__AGF_I64S)
      for (uint32_t j = 0; j < k->count; j++) ((uint64_t *)k->data)[j] = ag__get64(v + 8 * j);
    else
      k->v.u = ag__get64(v);
    at += 8 + n + vb;
  }
  for (uint32_t i = 0; i < ns; i++) {
    const unsigned char *e = hb + at;
    unsigned n = e[0] | (unsigned)e[1] << 8;
    ag__agf_section *s = &a->sections[i];
    s->kind = e[2], s->dtype = (ag_dtype)e[3], s->ndim = (int)ag__get32(e + 4);
    s->offset = ag__get64(e + 8), s->bytes = ag__get64(e + 16);
    s->part = a->part, s->crc = AG__AGF_CRC_PARTS;
    for (int d = 0; d < s->ndim; d++) s->dims[d] = (int64_t)ag__get64(e + 24 + 8 * d);
    if (!(s->name = ag__malloc(n + 1))) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    a->n_sections++;
    memcpy(s->name, e + 24 + 8 * s->ndim, n), s->name[n] = 0;
    at += 24 + 8 * (uint64_t)s->ndim + n;
  }
  (void)hbytes;
  return AG_OK;
}

static ag_status agf_read(ag__agf *a, FILE *f, uint64_t left, int head, const char *fn, const char *name) {
  ag__agf_init(a);
  a->base = ftello(f);
  unsigned char fixed[AG__AGF_FIXED];
  size_t got = left < sizeof fixed ? (size_t)left : sizeof fixed;
  if (fread(fixed, 1, got, f) != got) return read_failed(ferror(f) != 0, errno, fn, name);
  if (got < 8 || memcmp(fixed, agf_magic, 8)) {
    int known = 0;
    ag_status s = AG_OK;
    if (got >= 8 && fseeko(f, a->base, SEEK_SET) == 0)
      s = ag__agf_legacy_read(a, f, left, head, fixed, &known, fn, name);
    if (known || s) return s;
    if (got < 8 && !memcmp(fixed, agf_magic, got < 4 ? got : 4)) /* "AGRL": the start of every agrl magic */
      return CORRUPT("%s: %s is truncated: %llu bytes, shorter than an agrl file's magic", fn, name,
                     (unsigned long long)left);
    return CORRUPT("%s: %s is not an agrl file (it does not begin with \"AGRLFILE\" nor an older agrl magic)",
                   fn, name);
  }
  if (got < AG__AGF_FIXED)
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than an agrl file's header", fn, name,
                   (unsigned long long)left);
  uint32_t version = ag__get32(fixed + 8);
  if (version > AGF_VERSION)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: %s has container version %u; this library reads version %u", fn,
                    name, version, AGF_VERSION);
  if (version == 0) return CORRUPT("%s: %s is corrupt: container version 0 (versions start at 1)", fn, name);
  uint64_t hbytes = ag__get32(fixed + 12);
  if (hbytes < AG__AGF_FIXED + 4 || hbytes > AG__AGF_MAX_HEADER)
    return CORRUPT("%s: %s is corrupt: a header length of %llu bytes, outside %d..%u", fn, name,
                   (unsigned long long)hbytes, AG__AGF_FIXED + 4, AG__AGF_MAX_HEADER);
  if (hbytes > left)
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than its %llu-byte header", fn, name,
                   (unsigned long long)left, (unsigned long long)hbytes);
  unsigned char *hb = ag__malloc((size_t)hbytes); /* at most 4 MB, and no more than the file holds */
  if (!hb) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  memcpy(hb, fixed, AG__AGF_FIXED);
  ag_status s = AG_OK;
  size_t rest = (size_t)hbytes - AG__AGF_FIXED;
  if (fread(hb + AG__AGF_FIXED, 1, rest, f) != rest) s = read_failed(ferror(f) != 0, errno, fn, name);
  if (!s) {
    uint32_t stored = ag__get32(hb + hbytes - 4), computed = ag__crc32_add(0, hb, (size_t)hbytes - 4);
    if (stored != computed)
      s = CORRUPT("%s: %s is corrupt: its header fails its CRC-32 check (stored %08x, computed %08x)", fn,
                  name, (unsigned)stored, (unsigned)computed);
  }
  if (!s) s = check_header(hb, hbytes, left, head, fn, name);
  if (!s) s = build_form(a, hb, hbytes, fn);
  free(hb);
  return s;
}

ag_status ag__agf_read(ag__agf *a, FILE *f, uint64_t left, const char *fn, const char *name) {
  return agf_read(a, f, left, 0, fn, name);
}

ag_status ag__agf_read_head(ag__agf *a, FILE *f, uint64_t left, const char *fn, const char *name) {
  return agf_read(a, f, left, 1, fn, name);
}

ag_status ag__agf_read_stream(ag__agf *a, FILE *f, const char *fn, const char *name) {
  uint64_t left = 0;
  ag__agf_init(a);
  ag_status s = ag__stream_left(f, fn, name, "an agrl file", &left);
  return s ? s : ag__agf_read(a, f, left, fn, name);
}

/* ---- streaming the sections of a read ---- */

typedef struct agf_reader {
  agf_pipe pipe;
  const ag__agf *a;
  FILE *f;
  int failed, err; /* the read that stopped it failed (ferror, errno), else it came short */
} agf_reader;

/* Reads part `off` of section sec into buf and the CRC-32 the file holds
 * after it (if any); goes to the section's offset first. 0 when it cannot. */
static int read_part(agf_reader *rd, const ag__agf_section *sec, uint64_t off, unsigned char *buf, size_t len,
                     uint32_t *stored) {
  if (off == 0 && ftello(rd->f) != rd->a->base + (int64_t)sec->offset &&
      fseeko(rd->f, rd->a->base + (off_t)sec->offset, SEEK_SET) != 0) {
    rd->err = errno, rd->failed = 1;
    return 0;
  }
  unsigned char c[4];
  int last = off + len == sec->bytes;
  int with_crc = sec->crc == AG__AGF_CRC_PARTS || (sec->crc == AG__AGF_CRC_WHOLE && last);
  if (fread(buf, 1, len, rd->f) == len && (!with_crc || fread(c, 1, 4, rd->f) == 4)) {
    *stored = with_crc ? ag__get32(c) : 0;
    return 1;
  }
  rd->err = errno;
  rd->failed = ferror(rd->f) != 0;
  return 0;
}

static void *reader_main(void *arg) {
  agf_reader *rd = arg;
  int go = 1;
  for (int i = 0; i < rd->a->n_sections && go; i++) {
    const ag__agf_section *sec = &rd->a->sections[i];
    for (uint64_t off = 0; off < sec->bytes && go; off += sec->part) {
      size_t len = part_len(sec, off);
      unsigned char *b = pipe_empty(&rd->pipe);
      uint32_t stored = 0;
      if ((go = b && read_part(rd, sec, off, b, len, &stored))) pipe_put(&rd->pipe, len, stored);
    }
  }
  pipe_end(&rd->pipe, &rd->pipe.closed);
  return NULL;
}

ag_status ag__agf_stream(const ag__agf *a, FILE *f, ag__agf_take take, void *user, const char *fn,
                         const char *name) {
  int threaded = overlaps(a);
  agf_reader rd;
  memset(&rd, 0, sizeof rd);
  if (!pipe_alloc(&rd.pipe, threaded ? AGF_BUFS : 1, buf_len(a))) {
    pipe_free(&rd.pipe);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  rd.a = a, rd.f = f;
#if defined(POSIX_FADV_SEQUENTIAL)
  if (fileno(f) >= 0) (void)posix_fadvise(fileno(f), 0, 0, POSIX_FADV_SEQUENTIAL); /* a hint only */
#endif
  threaded = threaded && pipe_start(&rd.pipe, reader_main, &rd);
  ag_status s = AG_OK;
  int cut = 0;
  for (int i = 0; i < a->n_sections && !s && !cut; i++) {
    const ag__agf_section *sec = &a->sections[i];
    uint32_t whole = 0;
    int64_t k = 0;
    for (uint64_t off = 0; off < sec->bytes && !s; off += sec->part, k++) {
      size_t len = part_len(sec, off), es = elem_size(sec);
      unsigned char *buf = rd.pipe.slot[0].buf;
      uint32_t stored = 0, crc = 0;
      if (threaded) {
        const agf_slot *q = pipe_full(&rd.pipe);
        if (q) buf = q->buf, stored = q->stored, crc = q->crc;
        cut = !q;
      } else if (!(cut = !read_part(&rd, sec, off, buf, len, &stored)) && sec->crc == AG__AGF_CRC_PARTS)
        crc = ag__crc32_add(0, buf, len);
      if (cut) break;
      if (sec->crc == AG__AGF_CRC_PARTS && stored != crc)
        s = CORRUPT(
            "%s: %s is corrupt: part %lld of section '%s' fails its CRC-32 check (stored %08x, "
            "computed %08x)",
            fn, name, (long long)k, sec->name, (unsigned)stored, (unsigned)crc);
      if (sec->crc == AG__AGF_CRC_WHOLE) {
        whole = ag__crc32_add(whole, buf, len);
        if (off + len == sec->bytes && whole != stored)
          s = CORRUPT("%s: %s is corrupt: section '%s' fails its CRC-32 check (stored %08x, computed %08x)",
                      fn, name, sec->name, (unsigned)stored, (unsigned)whole);
      }
      if (!s) {
        file_order(buf, len / es, es);
        s = take(user, i, buf, off, len);
      }
      if (threaded) pipe_release(&rd.pipe);
    }
  }
  if (threaded) {
    pipe_end(&rd.pipe, &rd.pipe.stopped);
    pipe_join(&rd.pipe);
  }
  pipe_free(&rd.pipe);
  if (!s && cut) s = read_failed(rd.failed, rd.err, fn, name);
  return s;
}

/* ---- typed getters ---- */

static const char *type_name(ag__agf_type t) {
  static const char *const names[] = {"?", "u64", "i64", "f64", "string", "i64 array", "f64 array"};
  return t >= AG__AGF_U64 && t <= AG__AGF_F64S ? names[t] : names[0];
}

static ag_status find_typed(const ag__agf *a, const char *key, ag__agf_type t, const ag__agf_key **out,
                            const char *fn, const char *name) {
  const ag__agf_key *k = ag__agf_key_find(a, key);
  if (!k) return CORRUPT("%s: %s is corrupt: key '%s' is missing", fn, name, key);
  int ok = k->type == t || (t == AG__AGF_I64 && k->type == AG__AGF_U64 && k->v.u <= INT64_MAX);
  if (!ok)
    return CORRUPT("%s: %s is corrupt: key '%s' is a %s, not a %s", fn, name, key, type_name(k->type),
                   type_name(t));
  *out = k;
  return AG_OK;
}

ag_status ag__agf_get_i64(const ag__agf *a, const char *key, int64_t lo, int64_t hi, int64_t *out,
                          const char *fn, const char *name) {
  const ag__agf_key *k;
  ag_status s = find_typed(a, key, AG__AGF_I64, &k, fn, name);
  if (s) return s;
  if (k->v.i < lo || k->v.i > hi)
    return CORRUPT("%s: %s is corrupt: key '%s' = %lld, outside %lld..%lld", fn, name, key, (long long)k->v.i,
                   (long long)lo, (long long)hi);
  *out = k->v.i;
  return AG_OK;
}

ag_status ag__agf_get_f64(const ag__agf *a, const char *key, double *out, const char *fn, const char *name) {
  const ag__agf_key *k;
  ag_status s = find_typed(a, key, AG__AGF_F64, &k, fn, name);
  if (!s) *out = k->v.f;
  return s;
}

ag_status ag__agf_get_str(const ag__agf *a, const char *key, const char **out, const char *fn,
                          const char *name) {
  const ag__agf_key *k;
  ag_status s = find_typed(a, key, AG__AGF_STR, &k, fn, name);
  if (!s) *out = (const char *)k->data;
  return s;
}

ag_status ag__agf_get_i64s(const ag__agf *a, const char *key, uint32_t max, const int64_t **out, uint32_t *n,
                           const char *fn, const char *name) {
  const ag__agf_key *k;
  ag_status s = find_typed(a, key, AG__AGF_I64S, &k, fn, name);
  if (s) return s;
  if (k->count < 1 || k->count > max)
    return CORRUPT("%s: %s is corrupt: key '%s' has %u elements, outside 1..%u", fn, name, key, k->count,
                   max);
  *out = (const int64_t *)k->data;
  *n = k->count;
  return AG_OK;
}

ag_status ag__agf_check_kind(const ag__agf *a, const char *kind, int64_t max, int64_t *version,
                             const char *fn, const char *name) {
  const ag__agf_key *k = ag__agf_key_find(a, "kind");
  if (!k || k->type != AG__AGF_STR || strcmp((const char *)k->data, kind))
    return ag__fail(AG_ERR_IO, "%s: %s is not %s file: its kind is %s%s%s", fn, name, kind,
                    k && k->type == AG__AGF_STR ? "\"" : "",
                    k && k->type == AG__AGF_STR ? (const char *)k->data : "missing",
                    k && k->type == AG__AGF_STR ? "\"" : "");
  char vk[AG__AGF_MAX_NAME + 1];
  snprintf(vk, sizeof vk, "%s.version", kind);
  const ag__agf_key *v = ag__agf_key_find(a, vk);
  if (v && (v->type == AG__AGF_U64 || v->type == AG__AGF_I64) && v->v.u > (uint64_t)max &&
      v->v.u <= INT64_MAX)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: %s holds %s version %lld; this library reads versions up to %lld", fn, name, kind,
                    (long long)v->v.i, (long long)max);
  return ag__agf_get_i64(a, vk, 1, max, version, fn, name);
}

ag_status ag__agf_want_section(const ag__agf *a, const char *sname, int dt, int ndim, const int64_t *dims,
                               int *index, const char *fn, const char *name) {
  int i = ag__agf_section_find(a, sname);
  if (i < 0) return CORRUPT("%s: %s is corrupt: section '%s' is missing", fn, name, sname);
  const ag__agf_section *s = &a->sections[i];
  int same = dt < 0 ? s->kind == AG__AGF_BLOB && s->bytes == (uint64_t)dims[0]
                    : s->kind == AG__AGF_TENSOR && s->dtype == (ag_dtype)dt && s->ndim == ndim;
  uint64_t bytes =
      dt < 0 ? 0 : ag__agf_dtype_size((ag_dtype)dt); /* an old file's sections: their own lengths */
  for (int d = 0; same && dt >= 0 && d < ndim; d++) {
    same = s->dims[d] == dims[d] && dims[d] >= 0 &&
           (!dims[d] || bytes <= AG__AGF_MAX_SECTION / (uint64_t)dims[d]);
    bytes *= same ? (uint64_t)dims[d] : 1;
  }
  if (same && dt >= 0) same = s->bytes == bytes;
  if (!same)
    return CORRUPT("%s: %s is corrupt: section '%s' is not the %s its keys describe", fn, name, sname,
                   dt < 0 ? "blob" : "tensor");
  *index = i;
  return AG_OK;
}
