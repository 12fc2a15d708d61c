/* test_replay_file.c — replay files: ag_replay_save and ag_replay_load.
 *
 * Round trips of uniform and prioritized tables (every storage dtype, a
 * ring that wrapped, files of many parts) compared bit for bit: columns,
 * size, position, the sum tree, the largest priority, and the next draws
 * of ag_replay_sample and ag_per_sample with equal RNGs; a file saved on
 * the device under test loads on the CPU and back with the same bytes.
 * Refusals: every changed byte, every truncation, trailing bytes, a wrong
 * magic or container version, absurd keys under a correct CRC; the table made so far
 * is freed and *out kept. Injected faults at every step of a save leave the
 * earlier file, the table and the directory as they were; of a load, no
 * table and no memory. A section of more than one part goes through the
 * file's own thread (every test of many parts runs that path): its files
 * are those the calling thread writes alone, inside another file too.
 */
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agt.h"
#include "core/internal.h"
#include "replay/replay_internal.h"

ag_status ag__replay_save_parts(const ag_replay *r, const char *path, size_t part);
ag_status ag__replay_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_replay **out);
void ag__replay_file_overlap(int on);

#define SENTINEL ((ag_replay *)(uintptr_t)0x5e17e1)

static char dir[64];
static char path_a[128], path_b[128];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/agrl_rplXXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(path_a, sizeof path_a, "%s/a.rpl", dir);
  snprintf(path_b, sizeof path_b, "%s/b.rpl", dir);
  return 0;
}
static int teardown(void **state) {
  (void)state;
  unlink(path_a);
  unlink(path_b);
  return rmdir(dir);
}

/* ---- helpers ---- */

static int n_dir_entries(void) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static const ag_field fields[3] = {{"obs", 3, AG_F32}, {"action", 1, AG_I64}, {"reward", 1, AG_F32}};

/* Adds k transitions numbered from t0 (values that fit every storage). */
static void add(ag_replay *r, int64_t t0, int64_t k) {
  float *obs = malloc((size_t)k * 3 * sizeof *obs), *rew = malloc((size_t)k * sizeof *rew);
  int64_t *act = malloc((size_t)k * sizeof *act);
  for (int64_t j = 0; j < k; j++) {
    for (int e = 0; e < 3; e++)
      obs[3 * j + e] = (float)(((t0 + j) * 3 + e) % 250) + 0.25f * (float)((t0 + j) % 3 != 0);
    act[j] = (t0 + j) % 5;
    rew[j] = (float)((t0 + j) % 7);
  }
  const void *d[3] = {obs, act, rew};
  agt_ok(ag_replay_add(r, d, k));
  free(obs);
  free(rew);
  free(act);
}

/* The buffer's whole capacity as stored. */
static unsigned char *columns(ag_replay *r, size_t *n) {
  ag_buffer *b = ag_replay_buffer(r);
  ag_buffer_info info;
  agt_ok(ag_buffer_get_info(b, &info));
  *n = (size_t)(ag_buffer_rows(b) * ag_buffer_capacity(b)) * ag_dtype_size(info.dtype);
  unsigned char *p = malloc(*n);
  assert_non_null(p);
  agt_ok(ag_buffer_read(b, 0, ag_buffer_capacity(b), info.dtype, p, *n));
  return p;
}

static unsigned char *tensor_bytes(ag_tensor *t, size_t *n) {
  ag_dtype dt = AG_F32;
  (void)dt;
  *n = (size_t)(ag_tensor_rows(t) * ag_tensor_cols(t)) * ag_dtype_size(t->dtype);
  unsigned char *p = malloc(*n);
  assert_non_null(p);
  agt_ok(ag_tensor_read(t, p, *n));
  return p;
}

static void same_bytes(unsigned char *a, size_t na, unsigned char *b, size_t nb) {
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a);
  free(b);
}

/* Everything a saved table holds is the same in a and b, and the next draws are too. */
static void assert_same_table(ag_replay *a, ag_replay *b) {
  assert_int_equal(ag_replay_size(a), ag_replay_size(b));
  assert_int_equal(ag_replay_position(a), ag_replay_position(b));
  assert_int_equal(ag_replay_capacity(a), ag_replay_capacity(b));
  assert_int_equal(ag_replay_rows(a), ag_replay_rows(b));
  assert_int_equal(ag_replay_storage(a), ag_replay_storage(b));
  assert_int_equal(ag_replay_min_size(a), ag_replay_min_size(b));
  assert_int_equal(ag_replay_n_fields(b), 3);
  for (int i = 0; i < 3; i++) { /* the loaded table lists the fields as they were made */
    ag_field fb;
    agt_ok(ag_replay_field_at(b, i, &fb));
    assert_string_equal(fb.name, fields[i].name);
    assert_int_equal(fb.width, fields[i].width);
    assert_int_equal(fb.dtype, fields[i].dtype);
  }
  ag_field none;
  agt_err(ag_replay_field_at(b, 3, &none), AG_ERR_OUT_OF_RANGE, "outside 0..2");
  agt_err(ag_replay_field_at(b, -1, &none), AG_ERR_OUT_OF_RANGE, "outside");
  agt_err(ag_replay_field_at(b, 0, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
  for (int i = 0; i < 3; i++) {
    int64_t r0a, wa, r0b, wb;
    agt_ok(ag_replay_field(a, fields[i].name, &r0a, &wa));
    agt_ok(ag_replay_field(b, fields[i].name, &r0b, &wb));
    assert_int_equal(r0a, r0b);
    assert_int_equal(wa, wb);
  }
  size_t na, nb;
  unsigned char *ca = columns(a, &na), *cb = columns(b, &nb);
  same_bytes(ca, na, cb, nb);
  ag_per *pa = ag_replay_per(a), *pb = ag_replay_per(b);
  assert_true((pa == NULL) == (pb == NULL));
  if (pa) {
    ca = tensor_bytes(ag__per_tree(pa), &na);
    cb = tensor_bytes(ag__per_tree(pb), &nb);
    same_bytes(ca, na, cb, nb);
    ca = tensor_bytes(ag__per_state(pa), &na);
    cb = tensor_bytes(ag__per_state(pb), &nb);
    same_bytes(ca, na, cb, nb);
    assert_true(ag__per_alpha(pa) == ag__per_alpha(pb));
    double ta, tb;
    agt_ok(ag_per_total(pa, &ta));
    agt_ok(ag_per_total(pb, &tb));
    assert_memory_equal(&ta, &tb, sizeof ta);
  }
  if (ag_replay_size(a) < 1) return;
  ag_rng *ra, *rb;
  agt_ok(ag_rng_create(a->ctx, 77, &ra));
  agt_ok(ag_rng_create(b->ctx, 77, &rb));
  for (int round = 0; round < 3; round++) {
    if (ag_replay_can_sample(a, 8) == AG_OK) {
      ag_tensor *ba, *bb, *ia, *ib;
      agt_ok(ag_replay_sample(a, ra, 8, &ba, &ia));
      agt_ok(ag_replay_sample(b, rb, 8, &bb, &ib));
      ca = tensor_bytes(ba, &na), cb = tensor_bytes(bb, &nb);
      same_bytes(ca, na, cb, nb);
      ca = tensor_bytes(ia, &na), cb = tensor_bytes(ib, &nb);
      same_bytes(ca, na, cb, nb);
    }
    if (pa) {
      ag_tensor *ia, *ib, *wa, *wb;
      agt_ok(ag_per_sample(pa, ra, 16, 0.4f, &ia, &wa));
      agt_ok(ag_per_sample(pb, rb, 16, 0.4f, &ib, &wb));
      ca = tensor_bytes(ia, &na), cb = tensor_bytes(ib, &nb);
      same_bytes(ca, na, cb, nb);
      ca = tensor_bytes(wa, &na), cb = tensor_bytes(wb, &nb);
      if (a->ctx == b->ctx)
        same_bytes(ca, na, cb, nb);
      else { /* another device's pow may round a weight's last bit otherwise */
        assert_int_equal(na, nb);
        for (size_t i = 0; i < na / 4; i++) {
          float x, y;
          memcpy(&x, ca + 4 * i, 4);
          memcpy(&y, cb + 4 * i, 4);
          if (!(fabsf(x - y) <= 4e-7f * fabsf(x)))
            fail_msg("weight %zu: %.9g on one device, %.9g on the other", i, x, y);
        }
        free(ca);
        free(cb);
      }
    }
  }
  ag_rng_free(ra);
  ag_rng_free(rb);
  ag_ctx_reset(a->ctx);
  if (b->ctx != a->ctx) ag_ctx_reset(b->ctx);
}

/* A table of capacity cap holding n transitions added in batches, with a
 * prioritized sampler whose priorities were updated when per is set. */
static ag_replay *make(ag_ctx *ctx, int64_t cap, ag_dtype st, int64_t n, int per) {
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, fields, 3, cap, st, 2, &r));
  ag_per *p = NULL;
  if (per) agt_ok(ag_per_create(r, 0.6f, &p));
  for (int64_t t = 0; t < n; t += 7) add(r, t, n - t < 7 ? n - t : 7);
  if (per && ag_replay_size(r) > 0) {
    int64_t idx[5];
    float pr[5];
    for (int j = 0; j < 5; j++) idx[j] = (j * 13) % ag_replay_size(r), pr[j] = 0.5f + (float)j * 1.7f;
    agt_ok(ag_per_update_host(p, idx, pr, 5));
  }
  return r;
}

/* ---- round trips ---- */

static void round_trip_case(ag_ctx *ctx, int64_t cap, ag_dtype st, int64_t n, int per, size_t part) {
  ag_replay *r = make(ctx, cap, st, n, per), *l = SENTINEL;
  agt_ok(ag__replay_save_parts(r, path_a, part));
  agt_ok(ag_replay_load(ctx, path_a, &l));
  assert_true(l != SENTINEL);
  assert_same_table(r, l);
  /* both go on alike: more adds and priorities, then the same again */
  add(r, 1000, cap < 9 ? cap : 9);
  add(l, 1000, cap < 9 ? cap : 9);
  if (per) {
    int64_t idx[2] = {0, ag_replay_size(r) - 1};
    float pr[2] = {3.5f, 0.125f};
    agt_ok(ag_per_update_host(ag_replay_per(r), idx, pr, 2));
    agt_ok(ag_per_update_host(ag_replay_per(l), idx, pr, 2));
  }
  assert_same_table(r, l);
  /* the loaded table saves the same file */
  agt_ok(ag__replay_save_parts(r, path_a, part));
  agt_ok(ag__replay_save_parts(l, path_b, part));
  size_t na, nb;
  unsigned char *a = agt_slurp(path_a, &na), *b = agt_slurp(path_b, &nb);
  same_bytes(a, na, b, nb);
  ag_replay_free(l);
  ag_replay_free(r);
}

static void round_trip_uniform(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_dtype st[5] = {AG_F32, AG_F16, AG_BF16, AG_U8, AG_I32};
  for (int i = 0; i < 5; i++) {
    round_trip_case(ctx, 50, st[i], 37, 0, AG_TRANSFER_PART_BYTES); /* partly filled */
    round_trip_case(ctx, 50, st[i], 73, 0, 128);                    /* wrapped, many parts */
  }
  round_trip_case(ctx, 20, AG_F32, 0, 0, 128); /* empty */
  ag_ctx_free(ctx);
}

static void round_trip_prioritized(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_dtype st[5] = {AG_F32, AG_F16, AG_BF16, AG_U8, AG_I32};
  for (int i = 0; i < 5; i++) {
    round_trip_case(ctx, 300, st[i], 257, 1, AG_TRANSFER_PART_BYTES); /* a tree of depth 3 */
    round_trip_case(ctx, 300, st[i], 411, 1, 128);                    /* wrapped, many parts */
  }
  round_trip_case(ctx, 5, AG_F32, 3, 1, 128); /* depth 1 */
  round_trip_case(ctx, 40, AG_F32, 0, 1, 128);
  ag_ctx_free(ctx);
}

/* Saved on the device under test, loaded on the CPU, saved again: the same
 * bytes; and the other way round. */
static void device_neutral(void **state) {
  (void)state;
  ag_ctx *dev = agt_ctx(), *cpu;
  agt_ok(ag_ctx_create(&cpu, AG_DEVICE_CPU, 0));
  for (int per = 0; per < 2; per++) {
    ag_replay *r = make(dev, 300, AG_BF16, 333, per), *l, *back;
    agt_ok(ag__replay_save_parts(r, path_a, 256));
    agt_ok(ag_replay_load(cpu, path_a, &l));
    assert_same_table(r, l);
    agt_ok(ag__replay_save_parts(l, path_b, 256));
    size_t na, nb;
    unsigned char *a = agt_slurp(path_a, &na), *b = agt_slurp(path_b, &nb);
    same_bytes(a, na, b, nb);
    agt_ok(ag_replay_load(dev, path_b, &back));
    assert_same_table(l, back);
    agt_ok(ag__replay_save_parts(back, path_b, 256));
    a = agt_slurp(path_a, &na), b = agt_slurp(path_b, &nb);
    same_bytes(a, na, b, nb);
    ag_replay_free(back);
    ag_replay_free(l);
    ag_replay_free(r);
  }
  ag_ctx_free(cpu);
  ag_ctx_free(dev);
}

/* Parts handed to the file's thread write the bytes the calling thread
 * writes alone, and load the same table either way; at a position inside
 * another file too (the embedding of DQN and shard files). */
static void overlapped_parts_same_file(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const size_t parts[4] = {128, 128 * 3, 128 * 8, 128 * 40};
  for (int per = 0; per < 2; per++)
    for (int i = 0; i < 4; i++) {
      ag_replay *r = make(ctx, 700, i % 2 ? AG_BF16 : AG_F32, 1000, per), *l;
      agt_ok(ag__replay_save_parts(r, path_a, parts[i]));
      ag__replay_file_overlap(0);
      agt_ok(ag__replay_save_parts(r, path_b, parts[i]));
      size_t na, nb;
      unsigned char *a = agt_slurp(path_a, &na), *b = agt_slurp(path_b, &nb);
      same_bytes(a, na, b, nb);
      agt_ok(ag_replay_load(ctx, path_a, &l)); /* the calling thread alone */
      assert_same_table(r, l);
      ag_replay_free(l);
      ag__replay_file_overlap(1);
      agt_ok(ag_replay_load(ctx, path_b, &l));
      assert_same_table(r, l);
      ag_replay_free(l);

      /* inside another file, after 13 bytes of its own and before 5 more */
      FILE *f = fopen(path_b, "w+b");
      assert_non_null(f);
      assert_int_equal(fwrite("thirteen byte", 1, 13, f), 13);
      agt_ok(ag__replay_write(r, f, parts[i], "ag_replay_save", path_b));
      assert_int_equal(ftell(f), 13 + (long)na);
      assert_int_equal(fwrite("after", 1, 5, f), 5);
      assert_int_equal(fseek(f, 13, SEEK_SET), 0);
      agt_ok(ag__replay_read(ctx, f, path_b, na, 0, "ag_replay_load", &l));
      assert_int_equal(ftell(f), 13 + (long)na);
      char tail[5];
      assert_int_equal(fread(tail, 1, 5, f), 5);
      assert_memory_equal(tail, "after", 5);
      fclose(f);
      assert_same_table(r, l);
      ag_replay_free(l);
      b = agt_slurp(path_b, &nb);
      a = agt_slurp(path_a, &na);
      assert_int_equal(nb, 13 + na + 5);
      assert_memory_equal(b + 13, a, na);
      free(a);
      free(b);
      ag_replay_free(r);
    }
  ag_ctx_free(ctx);
}

/* ---- refusals ---- */

/* Loads bytes p from memory: must fail with `want` (any of IO / UNSUPPORTED
 * when want is 0), name ag_replay_load, keep *out and free all. */
static void refused(ag_ctx *ctx, const unsigned char *p, size_t n, ag_status want, const char *part) {
  static unsigned char empty[1];
  FILE *f = fmemopen(n ? (void *)p : empty, n, "rb");
  assert_non_null(f);
  ag_replay *r = SENTINEL;
  uint64_t l0 = agt_live_bytes(ctx);
  ag_status s = ag__replay_load_stream(ctx, f, "mem", 0, &r);
  fclose(f);
  if (s == AG_OK) fail_msg("a bad file of %zu bytes loaded", n);
  if (want ? s != want : (s != AG_ERR_IO && s != AG_ERR_UNSUPPORTED))
    fail_msg("status %s: %s", ag_status_name(s), ag_last_error());
  assert_true(r == SENTINEL);
  assert_int_equal(agt_live_bytes(ctx), l0);
  assert_true(strncmp(ag_last_error(), "ag_replay_load: ", 16) == 0);
  if (part && !strstr(ag_last_error(), part)) fail_msg("message \"%s\" lacks \"%s\"", ag_last_error(), part);
}

static uint32_t crc(const unsigned char *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}
static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void wr32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void wr64(unsigned char *p, uint64_t v) {
  wr32(p, (uint32_t)v);
  wr32(p + 4, (uint32_t)(v >> 32));
}
/* The header's CRC made right again after a change. */
static void fix_crc(unsigned char *p) {
  uint32_t h = rd32(p + 12);
  wr32(p + h - 4, crc(p, h - 4));
}

static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* The offset of key `name`'s value in the container p (docs/container.md). */
static size_t key_at(const unsigned char *p, const char *name) {
  size_t at = 48, K = rd32(p + 16);
  for (size_t i = 0; i < K; i++) {
    unsigned type = p[at], n = p[at + 2] | (unsigned)p[at + 3] << 8;
    uint32_t count = rd32(p + at + 4);
    if (n == strlen(name) && !memcmp(p + at + 8, name, n)) return at + 8 + n;
    at += 8 + n + (type == 4 ? count : 8 * (size_t)count);
  }
  fail_msg("no key %s", name);
  return 0;
}

/* The offset of section `name`'s first part in the container p. */
static size_t section_at(const unsigned char *p, const char *name) {
  size_t at = 48, K = rd32(p + 16), S = rd32(p + 20);
  for (size_t i = 0; i < K; i++) {
    unsigned type = p[at], n = p[at + 2] | (unsigned)p[at + 3] << 8;
    at += 8 + n + (type == 4 ? rd32(p + at + 4) : 8 * (size_t)rd32(p + at + 4));
  }
  for (size_t i = 0; i < S; i++) {
    unsigned n = p[at] | (unsigned)p[at + 1] << 8;
    uint32_t nd = rd32(p + at + 4);
    if (n == strlen(name) && !memcmp(p + at + 24 + 8 * nd, name, n)) return (size_t)rd64(p + at + 8);
    at += 24 + 8 * nd + n;
  }
  fail_msg("no section %s", name);
  return 0;
}

static void corrupt_files_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_replay *r = make(ctx, 40, AG_F16, 45, 1);
  agt_ok(ag__replay_save_parts(r, path_a, 128));
  ag_replay_free(r);
  size_t n;
  unsigned char *p = agt_slurp(path_a, &n);
  assert_int_equal(crc((const unsigned char *)"123456789", 9), 0xcbf43926u);
  assert_memory_equal(p, "AGRLFILE", 8);
  assert_int_equal(rd64(p + 32), (uint64_t)n);
  { /* the file as it is loads */
    FILE *f = fmemopen(p, n, "rb");
    ag_replay *l;
    agt_ok(ag__replay_load_stream(ctx, f, "mem", 0, &l));
    fclose(f);
    ag_replay_free(l);
  }
  unsigned char *q = malloc(n + 64);
  assert_non_null(q);
  for (size_t i = 0; i < n; i++) { /* every byte changed, two ways */
    for (int k = 0; k < 2; k++) {
      memcpy(q, p, n);
      q[i] ^= k ? 0xff : 0x01;
      refused(ctx, q, n, 0, NULL);
    }
  }
  for (size_t len = 0; len < n; len++) refused(ctx, p, len, AG_ERR_IO, NULL);
  refused(ctx, p, n / 2, AG_ERR_IO, "truncated");
  for (size_t extra = 1; extra <= 64; extra *= 2) {
    memcpy(q, p, n);
    memset(q + n, 0, extra);
    refused(ctx, q, n + extra, AG_ERR_IO, "trailing");
  }
  memcpy(q, p, n);
  q[0] = 'X';
  refused(ctx, q, n, AG_ERR_IO, "not an agrl file");
  memcpy(q, p, n);
  wr32(q + 8, 2);
  refused(ctx, q, n, AG_ERR_UNSUPPORTED, "container version 2");
  memcpy(q, p, n);
  wr32(q + 8, 0);
  refused(ctx, q, n, AG_ERR_IO, "container version 0");
  /* absurd values under a correct CRC */
  const struct {
    const char *key; /* NULL: the fixed header at `at` */
    int at, bytes;
    uint64_t v;
    const char *part;
  } bad[] = {{"replay.capacity", 0, 8, (uint64_t)1 << 50, "replay.capacity"},
             {"replay.capacity", 0, 8, 0, "replay.capacity"},
             {"replay.min_size", 0, 8, 0, "replay.min_size"},
             {"replay.size", 0, 8, 41, "replay.size"},
             {"replay.position", 0, 8, 40, "replay.position"},
             {"replay.storage", 0, 8, 5, "storage"},
             {"replay.widths", 0, 8, (uint64_t)1 << 40, "width"},
             {"replay.widths", 0, 8, 6, "section 'columns' is not the tensor"},
             {"replay.dtypes", 0, 8, 9, "dtype"},
             {"replay.sampler", 0, 3, 0x787878, "sampler"},
             {"replay.per.alpha", 0, 8, 0x3ff8000000000000ull, "alpha"},
             {"replay.per.max_priority", 0, 8, 0x7ff0000000000000ull, "max priority"},
             {"kind", 0, 3, 0x6c6c6d, "is not replay file"},
             {NULL, 24, 8, 100, "part length"},
             {NULL, 32, 8, (uint64_t)1 << 40, "its sections make"},
             {NULL, 40, 8, 1, "reserved"}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    memcpy(q, p, n);
    size_t at = bad[k].key ? key_at(q, bad[k].key) : (size_t)bad[k].at;
    if (bad[k].bytes == 8)
      wr64(q + at, bad[k].v);
    else
      for (int b = 0; b < bad[k].bytes; b++) q[at + b] = (unsigned char)(bad[k].v >> (8 * b));
    fix_crc(q);
    refused(ctx, q, n, AG_ERR_IO, bad[k].part);
  }
  /* a part's CRC failure names the part, whichever thread read it */
  for (int over = 0; over < 2; over++) {
    ag__replay_file_overlap(over);
    size_t coff = section_at(p, "columns"), loff = section_at(p, "leaves");
    memcpy(q, p, n);
    q[coff + 2 * 132 + 7] ^= 1;
    refused(ctx, q, n, AG_ERR_IO, "part 2 of section 'columns' fails its CRC-32 check");
    memcpy(q, p, n);
    q[loff + 132 + 3] ^= 4;
    refused(ctx, q, n, AG_ERR_IO, "part 1 of section 'leaves' fails its CRC-32 check");
  }
  /* a leaf that is not finite, under correct CRCs: the first leaf part */
  memcpy(q, p, n);
  size_t loff = section_at(q, "leaves");
  wr64(q + loff, 0xfff0000000000000ull); /* -inf */
  wr32(q + loff + 128, crc(q + loff, 128));
  refused(ctx, q, n, AG_ERR_IO, "leaf 0");
  free(q);
  free(p);
  ag_ctx_free(ctx);
}

/* ---- writes that fail ---- */

static void unwritable_places(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_replay *r = make(ctx, 30, AG_F32, 12, 1);
  char p[256];
  snprintf(p, sizeof p, "%s/no/such/dir/t.rpl", dir);
  agt_err(ag_replay_save(r, p), AG_ERR_IO, "no/such/dir");
  agt_err(ag_replay_save(r, "/proc/agrl_replay_test.rpl"), AG_ERR_IO, "/proc");
  agt_err(ag_replay_save(r, ""), AG_ERR_INVALID_ARG, "empty");
  agt_err(ag_replay_save(NULL, path_a), AG_ERR_INVALID_ARG, "NULL");
  ag_replay *l = SENTINEL;
  agt_err(ag_replay_load(ctx, p, &l), AG_ERR_IO, "cannot open");
  agt_err(ag_replay_load(ctx, dir, &l), AG_ERR_IO, "");
  assert_true(l == SENTINEL);
  /* a directory in the way of the rename: the earlier file beside it stays */
  agt_ok(ag_replay_save(r, path_a));
  size_t n0;
  unsigned char *before = agt_slurp(path_a, &n0);
  char d2[192];
  snprintf(d2, sizeof d2, "%s/adir", dir);
  assert_int_equal(mkdir(d2, 0700), 0);
  char inner[256];
  snprintf(inner, sizeof inner, "%s/x", d2);
  agt_spit(inner, "x", 1);
  agt_err(ag_replay_save(r, d2), AG_ERR_IO, "adir");
  unlink(inner);
  rmdir(d2);
  size_t n1;
  unsigned char *after = agt_slurp(path_a, &n1);
  same_bytes(before, n0, after, n1);
  assert_int_equal(n_dir_entries(), 1);
  ag_replay_free(r);
  /* a disk that fills up under a write of many parts, by either thread */
  FILE *full = fopen("/dev/full", "wb");
  if (full) {
    r = make(ctx, 3000, AG_F32, 2500, 1);
    for (int over = 0; over < 2; over++) { /* ends with the overlap on, as the other tests run */
      ag__replay_file_overlap(over);
      agt_err(ag__replay_write(r, full, 128, "ag_replay_save", "/dev/full"), AG_ERR_IO,
              "writing beside /dev/full failed: No space left on device (the file is unchanged)");
      clearerr(full);
    }
    fclose(full);
    ag_replay_free(r);
  }
  ag_ctx_free(ctx);
}

/* Every occurrence of every fault in a save and a load. */
static void faults_at_every_step(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_fault kinds[4] = {AG_FAULT_ALLOC, AG_FAULT_UPLOAD, AG_FAULT_DOWNLOAD, AG_FAULT_HOST_ALLOC};
  for (int per = 0; per < 2; per++) {
    ag_replay *r = make(ctx, 300, AG_F32, 290, per);
    agt_spit(path_a, "earlier", 7);
    size_t nc0, nt0 = 0;
    unsigned char *c0 = columns(r, &nc0),
                  *t0 = per ? tensor_bytes(ag__per_tree(ag_replay_per(r)), &nt0) : NULL;
    int failures = 0;
    for (int k = 0; k < 4; k++) {
      for (int64_t after = 0;; after++) {
        assert_true(after < 100000);
        agt_ok(ag_ctx_inject_fault(ctx, kinds[k], after));
        ag_status s = ag__replay_save_parts(r, path_a, 128 * 8);
        agt_ok(ag_ctx_inject_fault(ctx, kinds[k], -1));
        if (s == AG_OK) {
          if (k < 3) agt_spit(path_a, "earlier", 7);
          break;
        }
        failures++;
        size_t n;
        unsigned char *f = agt_slurp(path_a, &n);
        assert_int_equal(n, 7);
        assert_memory_equal(f, "earlier", 7);
        free(f);
        assert_int_equal(n_dir_entries(), 1);
        size_t nc;
        unsigned char *c = columns(r, &nc);
        assert_int_equal(nc, nc0);
        assert_memory_equal(c, c0, nc);
        free(c);
        if (per) {
          size_t nt;
          unsigned char *t = tensor_bytes(ag__per_tree(ag_replay_per(r)), &nt);
          assert_memory_equal(t, t0, nt0);
          free(t);
        }
        agt_spit(path_a, "earlier", 7);
      }
    }
    assert_true(failures > 0);
    failures = 0;
    for (int k = 0; k < 4; k++) {
      for (int64_t after = 0;; after++) {
        assert_true(after < 100000);
        ag_replay *l = SENTINEL;
        uint64_t l0 = agt_live_bytes(ctx);
        agt_ok(ag_ctx_inject_fault(ctx, kinds[k], after));
        ag_status s = ag_replay_load(ctx, path_a, &l);
        agt_ok(ag_ctx_inject_fault(ctx, kinds[k], -1));
        if (s == AG_OK) {
          assert_same_table(r, l);
          ag_replay_free(l);
          break;
        }
        failures++;
        assert_true(l == SENTINEL);
        assert_int_equal(agt_live_bytes(ctx), l0);
      }
    }
    assert_true(failures > 0);
    free(c0);
    free(t0);
    ag_replay_free(r);
  }
  ag_ctx_free(ctx);
}

static void broken_or_recording_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_replay *r = make(ctx, 10, AG_F32, 4, 0);
  ag__replay_set_broken(r);
  agt_err(ag_replay_save(r, path_b), AG_ERR_STATE, "free the table");
  assert_int_equal(access(path_b, F_OK), -1);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(round_trip_uniform, setup, teardown),
      cmocka_unit_test_setup_teardown(round_trip_prioritized, setup, teardown),
      cmocka_unit_test_setup_teardown(device_neutral, setup, teardown),
      cmocka_unit_test_setup_teardown(overlapped_parts_same_file, setup, teardown),
      cmocka_unit_test_setup_teardown(corrupt_files_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(unwritable_places, setup, teardown),
      cmocka_unit_test_setup_teardown(faults_at_every_step, setup, teardown),
      cmocka_unit_test_setup_teardown(broken_or_recording_refused, setup, teardown),
  };
  return agt_run(argc, argv, "replay_file", tests, sizeof tests / sizeof tests[0]);
}
