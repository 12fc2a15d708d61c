/* test_shard_file.c — shard files: ag_shard_save and ag_shard_load.
 *
 * A group of three shards (all held here by one process) and one unsharded
 * table receive the same global stream, which wraps the ring; at each
 * checkpoint every rank saves its shard and a new shard is loaded from each
 * file. The loaded shards equal the saved ones (global size, position and
 * capacity, the local tables bit for bit with their prioritized samplers)
 * and, column by column, the unsharded table; the same further adds, global
 * and local, keep them equal, so the ring goes on as it would have. The
 * file's header is read back byte by byte against its layout, and its table
 * part is the file ag_replay_save writes of the local table. Refusals: a
 * file of another rank or group size, every truncation, every changed byte,
 * a wrong magic or version, values out of their limits or not matching the
 * table under a correct CRC, a missing file; saves into a directory that
 * does not exist or of a table added to directly. Injected faults at every
 * step of a save leave the earlier file and the shard as they were; of a
 * load, no shard and no memory.
 */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agt.h"
#include "core/internal.h"
#include "replay/replay_internal.h"

#define SENTINEL ((ag_shard *)(uintptr_t)0x5e17e1)
#define G 3
#define CAP 24 /* global columns: 8 per rank */
#define ROWS 4

static char dir[64], paths[G][128], path_x[128];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/agrl_shdXXXXXX");
  if (!mkdtemp(dir)) return -1;
  for (int r = 0; r < G; r++) snprintf(paths[r], sizeof paths[r], "%s/replay.%d", dir, r);
  snprintf(path_x, sizeof path_x, "%s/x", dir);
  return 0;
}
static int teardown(void **state) {
  (void)state;
  for (int r = 0; r < G; r++) unlink(paths[r]);
  unlink(path_x);
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
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void wr64(unsigned char *p, uint64_t v) {
  wr32(p, (uint32_t)v);
  wr32(p + 4, (uint32_t)(v >> 32));
}
/* The shard header's CRC made right again after a change. */
static void fix_crc(unsigned char *p) {
  uint32_t h = rd32(p + 12);
  wr32(p + h - 4, crc(p, h - 4));
}

static const ag_field fields[3] = {{"obs", 2, AG_F32}, {"id", 1, AG_I32}, {"act", 1, AG_I64}};

/* The global transitions t0 .. t0+k-1 (values every storage holds exactly). */
static void global_add(ag_shard **sh, int n, ag_replay *ref, int64_t t0, int64_t k) {
  float obs[2 * CAP];
  int32_t id[CAP];
  int64_t act[CAP];
  for (int64_t j = 0; j < k; j++) {
    obs[2 * j] = (float)((t0 + j) % 200) * 0.5f;
    obs[2 * j + 1] = -(float)((t0 + j) % 50);
    id[j] = (int32_t)((t0 + j) % 1000);
    act[j] = (t0 + j) % 5;
  }
  const void *d[3] = {obs, id, act};
  for (int r = 0; r < n; r++) agt_ok(ag_shard_add(sh[r], d, k));
  if (ref) agt_ok(ag_replay_add(ref, d, k));
}

/* Every rank adds k of its own in lockstep: rank r's j-th is global
 * transition t0 + j * G + r of the stream; ref gets them in global order. */
static void local_adds(ag_shard **a, ag_shard **b, ag_replay *ref, int64_t t0, int64_t k) {
  float gobs[2 * CAP], obs[2 * CAP];
  int32_t gid[CAP], id[CAP];
  int64_t gact[CAP], act[CAP];
  for (int64_t j = 0; j < k * G; j++) {
    gobs[2 * j] = (float)((t0 + j) % 200) * 0.5f;
    gobs[2 * j + 1] = -(float)((t0 + j) % 50);
    gid[j] = (int32_t)((t0 + j) % 1000);
    gact[j] = (t0 + j) % 5;
  }
  for (int r = 0; r < G; r++) {
    for (int64_t j = 0; j < k; j++) {
      int64_t g = j * G + r;
      obs[2 * j] = gobs[2 * g], obs[2 * j + 1] = gobs[2 * g + 1];
      id[j] = gid[g], act[j] = gact[g];
    }
    const void *d[3] = {obs, id, act};
    agt_ok(ag_shard_add_local(a[r], d, k));
    agt_ok(ag_shard_add_local(b[r], d, k));
  }
  const void *gd[3] = {gobs, gid, gact};
  agt_ok(ag_replay_add(ref, gd, k * G));
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

/* Everything a shard file holds is the same in a and b. */
static void assert_same_shard(ag_shard *a, ag_shard *b) {
  assert_int_equal(ag_shard_rank(a), ag_shard_rank(b));
  assert_int_equal(ag_shard_world(a), ag_shard_world(b));
  assert_int_equal(ag_shard_capacity(a), ag_shard_capacity(b));
  assert_int_equal(ag_shard_size(a), ag_shard_size(b));
  assert_int_equal(ag_shard_position(a), ag_shard_position(b));
  ag_replay *la = ag_shard_local(a), *lb = ag_shard_local(b);
  assert_int_equal(ag_replay_size(la), ag_replay_size(lb));
  assert_int_equal(ag_replay_position(la), ag_replay_position(lb));
  assert_int_equal(ag_replay_capacity(la), ag_replay_capacity(lb));
  assert_int_equal(ag_replay_min_size(la), ag_replay_min_size(lb));
  assert_int_equal(ag_replay_storage(la), ag_replay_storage(lb));
  assert_int_equal(ag_replay_n_fields(lb), 3);
  for (int i = 0; i < 3; i++) {
    ag_field fb;
    agt_ok(ag_replay_field_at(lb, i, &fb));
    assert_string_equal(fb.name, fields[i].name);
    assert_int_equal(fb.width, fields[i].width);
    assert_int_equal(fb.dtype, fields[i].dtype);
  }
  size_t na, nb;
  unsigned char *ca = columns(la, &na), *cb = columns(lb, &nb);
  same_bytes(ca, na, cb, nb);
  ag_per *pa = ag_replay_per(la), *pb = ag_replay_per(lb);
  assert_true((pa == NULL) == (pb == NULL));
  if (pa) {
    ca = tensor_bytes(ag__per_tree(pa), &na);
    cb = tensor_bytes(ag__per_tree(pb), &nb);
    same_bytes(ca, na, cb, nb);
    ca = tensor_bytes(ag__per_state(pa), &na);
    cb = tensor_bytes(ag__per_state(pb), &nb);
    same_bytes(ca, na, cb, nb);
    double ta, tb;
    agt_ok(ag_per_total(pa, &ta));
    agt_ok(ag_per_total(pb, &tb));
    assert_memory_equal(&ta, &tb, sizeof ta);
  }
}

/* Column j of ref is local column j / G of shard j mod G (read as f32). */
static void assert_union(ag_replay *ref, ag_shard **sh) {
  float want[ROWS * CAP], got[ROWS * (CAP / G)];
  agt_ok(ag_buffer_read(ag_replay_buffer(ref), 0, CAP, AG_F32, want, sizeof want));
  int64_t total = 0;
  for (int r = 0; r < G; r++) {
    ag_replay *loc = ag_shard_local(sh[r]);
    assert_int_equal(ag_shard_size(sh[r]), ag_replay_size(ref));
    assert_int_equal(ag_shard_position(sh[r]), ag_replay_position(ref));
    total += ag_replay_size(loc);
    agt_ok(ag_buffer_read(ag_replay_buffer(loc), 0, CAP / G, AG_F32, got, sizeof got));
    for (int64_t l = 0; l < ag_replay_size(loc); l++) {
      int64_t j = l * G + r;
      for (int k = 0; k < ROWS; k++)
        if (got[l * ROWS + k] != want[j * ROWS + k])
          fail_msg("shard %d column %lld row %d = %g, table column %lld = %g", r, (long long)l, k,
                   (double)got[l * ROWS + k], (long long)j, (double)want[j * ROWS + k]);
    }
  }
  assert_int_equal(total, ag_replay_size(ref));
}

/* Priorities set on a few valid columns of each local table (the same on a and b). */
static void set_priorities(ag_shard **a, ag_shard **b, int seed) {
  for (int r = 0; r < G; r++) {
    int64_t n = ag_replay_size(ag_shard_local(a[r]));
    if (n < 1) continue;
    int64_t idx[3];
    float pr[3];
    for (int j = 0; j < 3; j++) idx[j] = (j * 5 + seed) % n, pr[j] = 0.25f + (float)(j + seed) * 1.3f;
    agt_ok(ag_per_update_host(ag_replay_per(ag_shard_local(a[r])), idx, pr, 3));
    if (b) agt_ok(ag_per_update_host(ag_replay_per(ag_shard_local(b[r])), idx, pr, 3));
  }
}

static void make_group(ag_ctx *ctx, ag_dtype st, int per, ag_shard **sh) {
  for (int r = 0; r < G; r++) {
    agt_ok(ag_shard_create(ctx, fields, 3, CAP, st, 5, r, G, &sh[r]));
    ag_per *p;
    if (per) agt_ok(ag_per_create(ag_shard_local(sh[r]), 0.7f, &p));
  }
}

/* A group of G shards holding transitions 0 .. n-1, added in batches of up
 * to 19 (29 wrap the ring to position 5), with priorities set when per is. */
static void filled_group(ag_ctx *ctx, ag_dtype st, int per, int64_t n, ag_shard **sh) {
  make_group(ctx, st, per, sh);
  for (int64_t t = 0; t < n; t += 19) global_add(sh, G, NULL, t, n - t < 19 ? n - t : 19);
  if (per) set_priorities(sh, NULL, 2);
}

static void save_and_load(ag_ctx *ctx, ag_shard **sh, ag_shard **out) {
  for (int r = 0; r < G; r++) agt_ok(ag_shard_save(sh[r], paths[r]));
  for (int r = 0; r < G; r++) {
    out[r] = SENTINEL;
    agt_ok(ag_shard_load(ctx, paths[r], r, G, &out[r]));
    assert_true(out[r] != SENTINEL);
  }
}

/* ---- round trips ---- */

static void round_trip_case(ag_ctx *ctx, ag_dtype st, int per) {
  ag_replay *ref;
  ag_shard *sh[G], *ld[G];
  agt_ok(ag_replay_create(ctx, fields, 3, CAP, st, 1, &ref));
  make_group(ctx, st, per, sh);
  /* checkpoints: empty, part filled, just full, wrapped at uneven positions */
  const int64_t ks[] = {0, 1, 7, 13, 3, 11, 24, 5, 17};
  int64_t t = 0;
  for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) {
    global_add(sh, G, ref, t, ks[c]);
    t += ks[c];
    if (per) set_priorities(sh, NULL, (int)c);
    save_and_load(ctx, sh, ld);
    for (int r = 0; r < G; r++) assert_same_shard(sh[r], ld[r]);
    assert_union(ref, ld);
    /* the same next batch on both: the ring goes on alike */
    int64_t k = 1 + (int64_t)c * 4 % 19;
    global_add(sh, G, NULL, t, k);
    global_add(ld, G, ref, t, k);
    t += k;
    if (per) set_priorities(sh, ld, (int)c + 7);
    for (int r = 0; r < G; r++) assert_same_shard(sh[r], ld[r]);
    assert_union(ref, ld);
    assert_union(ref, sh);
    for (int r = 0; r < G; r++) {
      ag_shard_free(sh[r]);
      sh[r] = ld[r]; /* the loaded ones go on */
    }
  }
  /* lockstep local adds from a loaded group, at a position that is a multiple of G */
  int64_t pad = (G - ag_shard_position(sh[0]) % G) % G;
  global_add(sh, G, ref, t, pad);
  t += pad;
  save_and_load(ctx, sh, ld);
  for (int round = 0; round < 4; round++) {
    local_adds(sh, ld, ref, t, 1 + round);
    t += (1 + round) * G;
    for (int r = 0; r < G; r++) assert_same_shard(sh[r], ld[r]);
    assert_union(ref, ld);
  }
  for (int r = 0; r < G; r++) {
    ag_shard_free(sh[r]);
    ag_shard_free(ld[r]);
  }
  ag_replay_free(ref);
}

static void round_trip(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_dtype st[2] = {AG_F32, AG_F16};
  for (int i = 0; i < 2; i++)
    for (int per = 0; per < 2; per++) round_trip_case(ctx, st[i], per);
  ag_ctx_free(ctx);
}

/* The header byte by byte, and the table part as ag_replay_save writes it;
 * a file saved on the device under test loads on the CPU the same. */
static void layout(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu;
  agt_ok(ag_ctx_create(&cpu, AG_DEVICE_CPU, 0));
  ag_shard *sh[G];
  filled_group(ctx, AG_BF16, 1, 29, sh); /* wrapped: size 24, position 5 */
  for (int r = 0; r < G; r++) {
    agt_ok(ag_shard_save(sh[r], paths[r]));
    size_t n, nr;
    unsigned char *p = agt_slurp(paths[r], &n);
    assert_memory_equal(p, "AGRLSHD1", 8);
    assert_int_equal(rd32(p + 8), 1);
    uint32_t H = rd32(p + 12);
    assert_int_equal(H, 92 + 16 * 3);
    assert_string_equal((const char *)p + 16, ag_version());
    for (size_t i = 16 + strlen(ag_version()); i < 48; i++) assert_int_equal(p[i], 0);
    assert_int_equal(rd32(p + 48), r);
    assert_int_equal(rd32(p + 52), G);
    assert_int_equal(rd64(p + 56), CAP);
    assert_int_equal(rd64(p + 64), 5);
    assert_int_equal(rd64(p + 72), CAP);
    assert_int_equal(rd32(p + 80), 3);
    assert_int_equal(rd32(p + 84), 0);
    for (int i = 0; i < 3; i++) {
      assert_int_equal(rd64(p + 88 + 16 * i), fields[i].width);
      assert_int_equal(rd32(p + 96 + 16 * i), fields[i].dtype);
      assert_int_equal(rd32(p + 100 + 16 * i), 0);
    }
    assert_int_equal(rd32(p + H - 4), crc(p, H - 4));
    agt_ok(ag_replay_save(ag_shard_local(sh[r]), path_x));
    unsigned char *q = agt_slurp(path_x, &nr);
    assert_int_equal(n, H + nr);
    assert_memory_equal(p + H, q, nr);
    free(p);
    free(q);
    ag_shard *c = SENTINEL;
    agt_ok(ag_shard_load(cpu, paths[r], r, G, &c));
    assert_same_shard(sh[r], c);
    ag_shard_free(c);
  }
  for (int r = 0; r < G; r++) ag_shard_free(sh[r]);
  ag_ctx_free(cpu);
  ag_ctx_free(ctx);
}

/* ---- refusals ---- */

/* Loading bytes p as rank 1 of G must fail with `want` (any of IO /
 * UNSUPPORTED when want is 0), keep *out and free all. */
static void refused(ag_ctx *ctx, const unsigned char *p, size_t n, ag_status want, const char *part) {
  agt_spit(path_x, p, n);
  ag_shard *sh = SENTINEL;
  uint64_t l0 = agt_live_bytes(ctx);
  ag_status s = ag_shard_load(ctx, path_x, 1, G, &sh);
  if (s == AG_OK) fail_msg("a bad file of %zu bytes loaded", n);
  if (want ? s != want : (s != AG_ERR_IO && s != AG_ERR_UNSUPPORTED))
    fail_msg("status %s: %s", ag_status_name(s), ag_last_error());
  assert_true(sh == SENTINEL);
  assert_int_equal(agt_live_bytes(ctx), l0);
  assert_true(strncmp(ag_last_error(), "ag_shard_load: ", 15) == 0);
  if (part && !strstr(ag_last_error(), part)) fail_msg("message \"%s\" lacks \"%s\"", ag_last_error(), part);
}

static void bad_files_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_shard *sh[G];
  filled_group(ctx, AG_F32, 1, 29, sh);
  agt_ok(ag_shard_save(sh[1], paths[1]));
  size_t n;
  unsigned char *p = agt_slurp(paths[1], &n);
  const uint32_t H = rd32(p + 12);
  ag_shard *out = SENTINEL;
  /* another rank, another group size, bad arguments */
  agt_err(ag_shard_load(ctx, paths[1], 2, G, &out), AG_ERR_INVALID_ARG,
          "was written by rank 1 of 3; loading it as rank 2 of 3 is not supported");
  agt_err(
      ag_shard_load(ctx, paths[1], 1, 2, &out), AG_ERR_INVALID_ARG,
      "was written by rank 1 of 3; loading it as rank 1 of 2 is not supported: load it with a group of 3");
  agt_err(ag_shard_load(ctx, paths[1], 1, 4, &out), AG_ERR_INVALID_ARG, "with a group of 3");
  agt_err(ag_shard_load(ctx, paths[1], 0, 1, &out), AG_ERR_INVALID_ARG, "rank 0 of 1 is not supported");
  agt_err(ag_shard_load(ctx, paths[1], 3, 3, &out), AG_ERR_INVALID_ARG, "rank 3 of world 3");
  agt_err(ag_shard_load(ctx, paths[1], -1, 3, &out), AG_ERR_INVALID_ARG, "rank -1");
  agt_err(ag_shard_load(ctx, paths[1], 0, 0, &out), AG_ERR_INVALID_ARG, "world 0");
  agt_err(ag_shard_load(NULL, paths[1], 1, G, &out), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_shard_load(ctx, NULL, 1, G, &out), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_shard_load(ctx, paths[1], 1, G, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_shard_load(ctx, paths[0], 0, G, &out), AG_ERR_IO, "cannot open");
  agt_err(ag_shard_load(ctx, dir, 1, G, &out), AG_ERR_IO, dir);
  assert_true(out == SENTINEL);
  /* the file as it is loads (through the helper) */
  agt_spit(path_x, p, n);
  agt_ok(ag_shard_load(ctx, path_x, 1, G, &out));
  assert_same_shard(sh[1], out);
  ag_shard_free(out);
  /* every truncation; every byte changed, two ways, in the header and in the table */
  for (size_t len = 0; len < n; len++) refused(ctx, p, len, AG_ERR_IO, NULL);
  refused(ctx, p, H - 1, AG_ERR_IO, "shorter than its 140-byte header");
  refused(ctx, p, 10, AG_ERR_IO, "shorter than a shard file's header");
  refused(ctx, p, n - 1, AG_ERR_IO, "truncated");
  unsigned char *q = malloc(n + 64);
  assert_non_null(q);
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 2; k++) {
      memcpy(q, p, n);
      q[i] ^= k ? 0xff : 0x01;
      refused(ctx, q, n, 0, NULL);
    }
  memcpy(q, p, n);
  q[4] ^= 1;
  refused(ctx, q, n, AG_ERR_IO, "not a shard file");
  memcpy(q, p, n);
  q[H + 100] ^= 1;
  refused(ctx, q, n, AG_ERR_IO, "the table in");
  memcpy(q, p, n);
  q[n - 10] ^= 1;
  refused(ctx, q, n, AG_ERR_IO, "fails its CRC-32");
  memcpy(q, p, n);
  q[20] ^= 1;
  refused(ctx, q, n, AG_ERR_IO, "header fails its CRC-32");
  memcpy(q, p, n);
  memset(q + n, 0, 8);
  refused(ctx, q, n + 8, AG_ERR_IO, "trailing");
  memcpy(q, p, n);
  wr32(q + 8, 2);
  refused(ctx, q, n, AG_ERR_UNSUPPORTED, "version 2");
  memcpy(q, p, n);
  wr32(q + 8, 0);
  refused(ctx, q, n, AG_ERR_IO, "version 0");
  agt_ok(ag_replay_save(ag_shard_local(sh[1]), path_x)); /* a replay file is not a shard file */
  out = SENTINEL;
  agt_err(ag_shard_load(ctx, path_x, 1, G, &out), AG_ERR_IO, "not a shard file");
  assert_true(out == SENTINEL);
  /* values out of their limits, or not those of the table, under a correct CRC */
  const struct {
    int at, bytes;
    uint64_t v;
    const char *part;
  } bad[] = {{48, 4, 3, "rank 3 of world 3"},
             {52, 4, 0, "world 0"},
             {52, 4, 0x80000000u, "world"},
             {56, 8, 25, "capacity 25"},
             {56, 8, 0, "capacity 0"},
             {56, 8, (uint64_t)3 << 41, "capacity"},
             {72, 8, 25, "size = 25"},
             {64, 8, 24, "position 24"},
             {80, 4, 0, "n_fields = 0"},
             {80, 4, 4, "n_fields = 4"},
             {84, 4, 1, "reserved"},
             {88, 8, 0, "width 0"},
             {88, 8, (uint64_t)1 << 40, "width"},
             {96, 4, 6, "dtype code 6"},
             {100, 4, 1, "reserved word of field 0"},
             {104, 8, 3, "is not the header's field 1"}, /* a valid width, not the table's */
             {112, 4, AG_I64, "dtype code 5"},
             {12, 4, 141, "header length"},
             {16, 4, 0x41414141u, "byte 24 after the library version"}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    memcpy(q, p, n);
    if (bad[k].bytes == 8)
      wr64(q + bad[k].at, bad[k].v);
    else
      wr32(q + bad[k].at, (uint32_t)bad[k].v);
    if (bad[k].at == 16) memset(q + 20, 0, 4), q[24] = 'x'; /* a NUL, then not padding */
    if (bad[k].at != 12) fix_crc(q);
    refused(ctx, q, n, AG_ERR_IO, bad[k].part);
  }
  memcpy(q, p, n); /* a global table of twice the columns */
  wr64(q + 56, 2 * CAP), wr64(q + 64, CAP), wr64(q + 72, CAP);
  fix_crc(q);
  refused(ctx, q, n, AG_ERR_IO, "its table has 8 columns; rank 1 of 3 of a table of 48 holds 16");
  memcpy(q, p, n); /* global size and position that give rank 1 another local size */
  wr64(q + 64, 5), wr64(q + 72, 5);
  fix_crc(q);
  refused(ctx, q, n, AG_ERR_IO, "gives rank 1 of 3 size 2 at position 2");
  memcpy(q, p, n); /* another global position of the full ring: another local one */
  wr64(q + 64, 8);
  fix_crc(q);
  refused(ctx, q, n, AG_ERR_IO, "at position 3");
  memcpy(q, p, n); /* rank 1's file claimed as rank 2's */
  wr32(q + 48, 2);
  fix_crc(q);
  out = SENTINEL;
  agt_spit(path_x, q, n);
  agt_err(ag_shard_load(ctx, path_x, 2, G, &out), AG_ERR_IO, "is corrupt");
  assert_true(out == SENTINEL);
  free(q);
  free(p);
  for (int r = 0; r < G; r++) ag_shard_free(sh[r]);
  ag_ctx_free(ctx);
}

static void bad_saves(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_shard *sh[G];
  filled_group(ctx, AG_F32, 0, 10, sh);
  char p[256];
  snprintf(p, sizeof p, "%s/no/such/dir/replay.0", dir);
  agt_err(ag_shard_save(sh[0], p), AG_ERR_IO, "no/such/dir");
  assert_int_equal(access(p, F_OK), -1);
  assert_int_equal(n_dir_entries(), 0);
  agt_err(ag_shard_save(sh[0], ""), AG_ERR_INVALID_ARG, "empty");
  agt_err(ag_shard_save(sh[0], NULL), AG_ERR_INVALID_ARG, "NULL");
  agt_err(ag_shard_save(NULL, paths[0]), AG_ERR_INVALID_ARG, "NULL");
  /* a directory in the way of the rename: the earlier file beside it stays */
  agt_ok(ag_shard_save(sh[0], paths[0]));
  size_t n0, n1;
  unsigned char *before = agt_slurp(paths[0], &n0);
  char d2[192], inner[256];
  snprintf(d2, sizeof d2, "%s/adir", dir);
  assert_int_equal(mkdir(d2, 0700), 0);
  snprintf(inner, sizeof inner, "%s/x", d2);
  agt_spit(inner, "x", 1);
  agt_err(ag_shard_save(sh[0], d2), AG_ERR_IO, "adir");
  unlink(inner);
  rmdir(d2);
  unsigned char *after = agt_slurp(paths[0], &n1);
  same_bytes(before, n0, after, n1);
  assert_int_equal(n_dir_entries(), 1);
  /* a local table added to directly is not saved (it would not load) */
  float o[2] = {1, 2};
  int32_t i1 = 3;
  int64_t a1 = 4;
  const void *d[3] = {o, &i1, &a1};
  agt_ok(ag_replay_add(ag_shard_local(sh[1]), d, 1));
  agt_err(ag_shard_save(sh[1], paths[1]), AG_ERR_STATE, "added to directly");
  assert_int_equal(access(paths[1], F_OK), -1);
  /* ... nor one filled directly to its capacity, which keeps its position */
  float o8[16] = {0};
  int32_t i8[8] = {0};
  int64_t a8[8] = {0};
  const void *d8[3] = {o8, i8, a8};
  int64_t pos = ag_replay_position(ag_shard_local(sh[2]));
  agt_ok(ag_replay_add(ag_shard_local(sh[2]), d8, 8));
  assert_int_equal(ag_replay_position(ag_shard_local(sh[2])), pos);
  agt_err(ag_shard_save(sh[2], paths[2]), AG_ERR_STATE, "added to directly");
  agt_err(ag_shard_add(sh[2], d, 1), AG_ERR_STATE, "added to directly");
  assert_int_equal(n_dir_entries(), 1);
  for (int r = 0; r < G; r++) ag_shard_free(sh[r]);
  ag_ctx_free(ctx);
}

/* Every occurrence of every fault in a save and a load. */
static void faults_at_every_step(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_fault kinds[4] = {AG_FAULT_ALLOC, AG_FAULT_UPLOAD, AG_FAULT_DOWNLOAD, AG_FAULT_HOST_ALLOC};
  for (int per = 0; per < 2; per++) {
    ag_shard *sh[G];
    filled_group(ctx, AG_F32, per, 29, sh);
    ag_shard *orig = sh[2];
    size_t nc0;
    unsigned char *c0 = columns(ag_shard_local(orig), &nc0);
    int failures = 0;
    agt_spit(paths[2], "earlier", 7);
    for (int k = 0; k < 4; k++) {
      for (int64_t after = 0;; after++) {
        assert_true(after < 100000);
        agt_ok(ag_ctx_inject_fault(ctx, kinds[k], after));
        ag_status s = ag_shard_save(orig, paths[2]);
        agt_ok(ag_ctx_inject_fault(ctx, kinds[k], -1));
        if (s == AG_OK) {
          agt_spit(paths[2], "earlier", 7);
          break;
        }
        failures++;
        size_t n;
        unsigned char *f = agt_slurp(paths[2], &n);
        assert_int_equal(n, 7);
        assert_memory_equal(f, "earlier", 7);
        free(f);
        assert_int_equal(n_dir_entries(), 1);
        size_t nc;
        unsigned char *c = columns(ag_shard_local(orig), &nc);
        assert_int_equal(nc, nc0);
        assert_memory_equal(c, c0, nc);
        free(c);
        assert_int_equal(ag_shard_size(orig), CAP);
        assert_int_equal(ag_shard_position(orig), 5);
      }
    }
    assert_true(failures > 0);
    agt_ok(ag_shard_save(orig, paths[2]));
    failures = 0;
    for (int k = 0; k < 4; k++) {
      for (int64_t after = 0;; after++) {
        assert_true(after < 100000);
        ag_shard *l = SENTINEL;
        uint64_t l0 = agt_live_bytes(ctx);
        agt_ok(ag_ctx_inject_fault(ctx, kinds[k], after));
        ag_status s = ag_shard_load(ctx, paths[2], 2, G, &l);
        agt_ok(ag_ctx_inject_fault(ctx, kinds[k], -1));
        if (s == AG_OK) {
          assert_same_shard(orig, l);
          ag_shard_free(l);
          break;
        }
        failures++;
        assert_true(l == SENTINEL);
        assert_int_equal(agt_live_bytes(ctx), l0);
      }
    }
    assert_true(failures > 0);
    free(c0);
    for (int r = 0; r < G; r++) ag_shard_free(sh[r]);
  }
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(layout, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_files_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_saves, setup, teardown),
      cmocka_unit_test_setup_teardown(faults_at_every_step, setup, teardown),
  };
  return agt_run(argc, argv, "shard_file", tests, sizeof tests / sizeof tests[0]);
}
