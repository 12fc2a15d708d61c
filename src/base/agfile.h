/* agfile.h — the one file container of agrl (docs/container.md).
 *
 * Every file the library writes is one of these: a header of typed
 * key-value metadata ("kind" = "mlp", "mlp.version" = 3, ...) and a table
 * of named sections (tensors with a dtype and a shape, or byte blobs), then
 * the sections' bytes, each cut into parts of the file's part length, each
 * part followed by its CRC-32. The header ends with its own CRC-32.
 *
 * One in-memory form, ag__agf, serves the three sides:
 *   - a writer fills it (ag__agf_set_*, ag__agf_add_*, each section with a
 *     callback that produces its bytes part by part) and writes it
 *     (ag__agf_write into a stream, ag__agf_save to a path through a
 *     temporary name and a rename);
 *   - the reader (ag__agf_read) checks a whole header against fixed limits
 *     and the stream's real length before it allocates anything, then
 *     builds the form; ag__agf_stream then hands each section's parts, CRC
 *     checked, to a callback of the loader;
 *   - the files of agrl 0.1.0 (AGRLMLP1/2, ...) are parsed into the same
 *     form by agfile_legacy.c, the one place that knows their layouts; the
 *     loaders see only keys and sections.
 * Parts go through one pipeline: a section of more than one part is passed
 * between the calling thread (which alone calls the device) and a thread of
 * the file through a few part buffers, so that device transfers overlap
 * the disk; a smaller one is done on the calling thread alone.
 */
#ifndef AGRL_BASE_AGFILE_H
#define AGRL_BASE_AGFILE_H

#include "base/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits (the reader refuses anything beyond them) ---- */
#define AG__AGF_FIXED 48              /* the header up to its key entries */
#define AG__AGF_MAX_HEADER (1u << 22) /* bytes of a header, its CRC included */
#define AG__AGF_MAX_KEYS 2048
#define AG__AGF_MAX_SECTIONS 1024
#define AG__AGF_MAX_NAME 255                    /* bytes of a key's or a section's name */
#define AG__AGF_MAX_STRING 4096                 /* bytes of a string value */
#define AG__AGF_MAX_ARRAY 1024                  /* elements of an array value */
#define AG__AGF_MAX_DIMS 4                      /* dimensions of a tensor section */
#define AG__AGF_MAX_SECTION ((uint64_t)1 << 62) /* bytes of one section */
#define AG__AGF_PART_MIN 128                    /* part lengths: multiples of it ... */
#define AG__AGF_PART_MAX ((size_t)16 << 20)     /* ... up to this (AG_TRANSFER_PART_BYTES of agrl/buffer.h) */

/* Types of values (the u8 of a key entry). */
typedef enum ag__agf_type {
  AG__AGF_U64 = 1,
  AG__AGF_I64 = 2,
  AG__AGF_F64 = 3,
  AG__AGF_STR = 4,  /* UTF-8 bytes, no NUL */
  AG__AGF_I64S = 5, /* an array of i64 */
  AG__AGF_F64S = 6  /* an array of f64 */
} ag__agf_type;

/* The dtype codes of tensor sections: ag_dtype's (0 f32 .. 5 i64), and f64
 * (6), which files hold but tensors do not (a sum tree's leaves). */
#define AG__AGF_F64_DT ((ag_dtype)6)
/* Bytes of an element of a section dtype (0 for an unknown code). */
size_t ag__agf_dtype_size(ag_dtype dt);
/* "f32" .. "i64", "f64" ("?" for an unknown code). */
const char *ag__agf_dtype_name(ag_dtype dt);

/* Kinds of sections (the u8 of a section entry). */
enum { AG__AGF_BLOB = 1, AG__AGF_TENSOR = 2 };

/* How a section's parts are checked: a CRC-32 after each part (the
 * container); the files of 0.1.0 also have one CRC-32 after the whole
 * section (models of version 2) or none (version 1). */
enum { AG__AGF_CRC_PARTS = 0, AG__AGF_CRC_WHOLE = 1, AG__AGF_CRC_NONE = 2 };

/* A key: its value is v for a scalar, data for a string (NUL-terminated,
 * count bytes before the NUL) or an array (count elements in host order). */
typedef struct ag__agf_key {
  char *name;
  ag__agf_type type;
  uint32_t count;
  union {
    uint64_t u;
    int64_t i;
    double f;
  } v;
  void *data;
} ag__agf_key;

/* A writer's source of a section's bytes: fills dst with len bytes of the
 * section from byte off on, in host order (the pipeline puts elements in
 * the file's order). Called on the calling thread, in order. */
typedef ag_status (*ag__agf_fill)(void *user, unsigned char *dst, uint64_t off, size_t len);
/* A loader's sink: takes len bytes of section `sec` from byte off on, CRC
 * checked and in host order; buf is the pipeline's (the sink may change
 * it). Called on the calling thread, in order. A status other than AG_OK
 * stops the stream with that status. */
typedef ag_status (*ag__agf_take)(void *user, int sec, unsigned char *buf, uint64_t off, size_t len);

typedef struct ag__agf_section {
  char *name;
  int kind;       /* AG__AGF_BLOB, AG__AGF_TENSOR */
  ag_dtype dtype; /* a tensor's; AG_U8 for a blob */
  int ndim;       /* a tensor's, 1..AG__AGF_MAX_DIMS; 0 for a blob */
  int64_t dims[AG__AGF_MAX_DIMS];
  uint64_t offset;   /* in the stream: where its first part begins */
  uint64_t bytes;    /* its data bytes */
  int crc;           /* AG__AGF_CRC_* */
  uint64_t part;     /* its part length (the file's, or a legacy file's own) */
  ag__agf_fill fill; /* a writer's source */
  void *user;
} ag__agf_section;

typedef struct ag__agf {
  int n_keys, n_sections, cap_keys, cap_sections;
  ag__agf_key *keys;
  ag__agf_section *sections;
  uint64_t part;      /* the file's part length */
  uint64_t total;     /* the stream's bytes from its header to its end */
  int64_t base;       /* a read stream's offset of the header's first byte */
  const char *format; /* "agrl container 1", or the old format's name (static) */
  int failed;         /* a writer's host allocation failed (reported by ag__agf_write) */
} ag__agf;

/* An empty form (nothing allocated). */
void ag__agf_init(ag__agf *a);
/* Frees what the form holds and empties it; a zeroed form is accepted. */
void ag__agf_free(ag__agf *a);

/* ---- writing ---- */

/* Keys and sections, in the order they go to the file; names and values are
 * copied. A host allocation that fails is remembered and reported by
 * ag__agf_write (AG_ERR_OUT_OF_MEMORY). */
void ag__agf_set_u64(ag__agf *a, const char *key, uint64_t v);
void ag__agf_set_i64(ag__agf *a, const char *key, int64_t v);
void ag__agf_set_f64(ag__agf *a, const char *key, double v);
void ag__agf_set_str(ag__agf *a, const char *key, const char *v);
void ag__agf_set_i64s(ag__agf *a, const char *key, const int64_t *v, uint32_t n);
void ag__agf_set_f64s(ag__agf *a, const char *key, const double *v, uint32_t n);
/* A tensor of dtype dt and shape dims[ndim] (bytes: their product times the
 * dtype's size), or a blob of n bytes; fill(user, ...) produces its bytes. */
void ag__agf_add_tensor(ag__agf *a, const char *name, ag_dtype dt, int ndim, const int64_t *dims,
                        ag__agf_fill fill, void *user);
void ag__agf_add_blob(ag__agf *a, const char *name, uint64_t n, ag__agf_fill fill, void *user);
/* A fill that copies from user + off (a host array of the section's bytes). */
ag_status ag__agf_fill_host(void *user, unsigned char *dst, uint64_t off, size_t len);

/* Writes the header and every section, in parts of `part` bytes
 * (AG__AGF_PART_MIN multiple up to AG_TRANSFER_PART_BYTES), into f at its
 * position. Errors: AG_ERR_INVALID_ARG (a bad part length),
 * AG_ERR_UNSUPPORTED (a limit exceeded), AG_ERR_OUT_OF_MEMORY, AG_ERR_IO
 * naming `name` (a failed write), or a fill's status. What was written
 * before a failure stays in f: the caller aborts the file. `fn` names the
 * public call in messages. */
ag_status ag__agf_write(ag__agf *a, FILE *f, size_t part, const char *fn, const char *name);
/* ag__agf_write to path through a temporary name and a rename: on any
 * failure path is untouched. */
ag_status ag__agf_save(ag__agf *a, const char *path, size_t part, const char *fn);

/* ---- reading ---- */

/* Reads and checks the header of the stream f from its position (left
 * bytes to its end) into a (ag__agf_init'd; the caller frees it with
 * ag__agf_free, also on error), for a container or, through
 * ag__agf_legacy_read, a file of 0.1.0. Checks every length, count, name,
 * value, shape, offset and the stream's length before it allocates;
 * AG_ERR_IO with "fn: name is corrupt|truncated|not an agrl file: ..."
 * otherwise, AG_ERR_UNSUPPORTED for a newer container version. On success f
 * stands where it stood (ag__agf_stream reads the sections from there). */
ag_status ag__agf_read(ag__agf *a, FILE *f, uint64_t left, const char *fn, const char *name);
/* Whether a stream of left bytes holds the total its header describes:
 * AG_ERR_IO "fn: name is truncated" when it is shorter, "is corrupt:
 * trailing bytes" when it is longer and !head (a head may be followed by
 * other bytes); AG_OK otherwise. */
ag_status ag__agf_check_length(uint64_t left, uint64_t total, int head, const char *fn, const char *name);
/* ag__agf_read of a container (or an old file) that is the head of the
 * stream: other bytes may follow the a->total bytes it describes (an agent
 * file's replay table); a stands where ag__agf_read leaves it. */
ag_status ag__agf_read_head(ag__agf *a, FILE *f, uint64_t left, const char *fn, const char *name);
/* ag__agf_read of the file at path (opened and closed here), or of f when
 * it is not NULL (from its position to its end). */
ag_status ag__agf_read_stream(ag__agf *a, FILE *f, const char *fn, const char *name);

/* Reads every section of a (read from f, which stands where ag__agf_read
 * left it) in order, part by part, checking each part's CRC-32, and hands
 * each to take(user, ...); sections of 0 bytes are not handed. A failed CRC
 * or read is AG_ERR_IO naming the section and the part. */
ag_status ag__agf_stream(const ag__agf *a, FILE *f, ag__agf_take take, void *user, const char *fn,
                         const char *name);

/* The key of that name, or NULL. */
const ag__agf_key *ag__agf_key_find(const ag__agf *a, const char *key);
/* The section of that name, its index or -1. */
int ag__agf_section_find(const ag__agf *a, const char *name);

/* Typed getters: AG_ERR_IO "fn: name is corrupt: key 'k' is missing | is
 * not a TYPE | is outside lo..hi" unless the key is there with that type
 * (and, for integers, within [lo, hi]). */
ag_status ag__agf_get_i64(const ag__agf *a, const char *key, int64_t lo, int64_t hi, int64_t *out,
                          const char *fn, const char *name);
ag_status ag__agf_get_f64(const ag__agf *a, const char *key, double *out, const char *fn, const char *name);
ag_status ag__agf_get_str(const ag__agf *a, const char *key, const char **out, const char *fn,
                          const char *name);
/* An i64 array of 1..max elements: *n of them at *out (a's memory). */
ag_status ag__agf_get_i64s(const ag__agf *a, const char *key, uint32_t max, const int64_t **out, uint32_t *n,
                           const char *fn, const char *name);
/* The file holds kind `kind` ("kind" key) at version 1..max ("KIND.version"
 * key; a newer one is AG_ERR_UNSUPPORTED): *version. */
ag_status ag__agf_check_kind(const ag__agf *a, const char *kind, int64_t max, int64_t *version,
                             const char *fn, const char *name);
/* Section `sname` is a tensor of dtype dt and shape dims[ndim] (or, dt < 0,
 * a blob of bytes dims[0]): its index, or AG_ERR_IO naming what differs. */
ag_status ag__agf_want_section(const ag__agf *a, const char *sname, int dt, int ndim, const int64_t *dims,
                               int *index, const char *fn, const char *name);

/* Tests turn the pipeline's thread off (0) to compare files written by the
 * calling thread alone. */
void ag__agf_overlap(int on);

/* ---- the files of agrl 0.1.0 (agfile_legacy.c) ---- */

/* Parses an old file whose first 8 bytes are magic (left bytes from f's
 * position) into a; 1 in *known when the magic is one of the old formats
 * (else nothing is read). head: as ag__agf_read_head (bytes may follow).
 * Errors as ag__agf_read. An agent's file of 0.1.0 (AGRLDQN1, AGRLACR1) is
 * always read as a head: its replay table follows the a->total bytes parsed.
 * So is a shard's (AGRLSHD1): its header, then its local table. */
ag_status ag__agf_legacy_read(ag__agf *a, FILE *f, uint64_t left, int head, const unsigned char magic[8],
                              int *known, const char *fn, const char *name);

/* The name of section i of a DQN's file (kind "dqn") whose networks have
 * L layers: the tensors in the order of docs/container.md; NULL past them
 * (i >= 10 L + 2). buf holds at least 32 bytes. */
const char *ag__agf_dqn_section(int i, int L, char *buf);

/* The name of section i of a SAC/TD3 agent's file (kind "ac") whose
 * networks have L layers: td3 (a target actor) and alpha_opt (SAC with
 * autotune: the temperature's optimizer) say which tensors it has; the
 * tensors in the order of docs/container.md; NULL past them. buf holds at
 * least 48 bytes. */
const char *ag__agf_ac_section(int i, int L, int td3, int alpha_opt, char *buf);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_BASE_AGFILE_H */
