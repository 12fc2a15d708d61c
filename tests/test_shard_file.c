/* test_shard_file.c — shard files: ag_shard_save and ag_shard_load.
 *
 * A group of three shards (all held here by one process) and one unsharded
 * table receive the same global stream, which wraps the ring; at each
 * checkpoint every rank saves its shard and a new shard is loaded from each
 * file. The loaded shards equal the saved ones (global size, position and
 * capacity, the local tables bit for bit with their prioritized samplers)
 * and, column by column, the unsharded table; the same further adds, global
 * and local, keep them equal, so the ring goes on as it would have. The
 * file is compared byte for byte with an agrl container of kind "shard"
 * encoded here from docs/container.md (its keys, no sections), followed by
 * the file ag_replay_save writes of the local table. Refusals: a file of
 * another rank or group size, every truncation, every changed byte, a wrong
 * magic, kind or version, a key missing, of another type or out of its
 * limits, a section, values not matching the table, trailing bytes, a
 * missing file; saves into a directory that does not exist or of a table
 * added to directly. Injected faults at every step of a save leave the
 * earlier file and the shard as they were; of a load, no shard and no
 * memory.
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

/* ---- a container encoded here, from docs/container.md ---- */

enum { K_U64 = 1, K_I64 = 2, K_F64 = 3, K_STR = 4, K_I64S = 5 };
typedef struct tkey {
  int type;
  const char *name;
  int64_t v;          /* a scalar's value (the bits of an f64) */
  const char *str;    /* a string's */
  const int64_t *arr; /* an array's, n elements */
  uint32_t n;
} tkey;
#define MAX_KEYS 16

/* The keys a shard file holds, in the order of docs/container.md. */
static int shard_keys(tkey *k, int rank, int world, int64_t cap, int64_t pos, int64_t size, const int64_t *w,
                      const int64_t *dt, uint32_t nf) {
  int n = 0;
  k[n++] = (tkey){K_STR, "kind", 0, "shard", NULL, 0};
  k[n++] = (tkey){K_I64, "shard.version", 2, NULL, NULL, 0};
  k[n++] = (tkey){K_STR, "shard.library", 0, ag_version(), NULL, 0};
  k[n++] = (tkey){K_I64, "shard.rank", rank, NULL, NULL, 0};
  k[n++] = (tkey){K_I64, "shard.world", world, NULL, NULL, 0};
  k[n++] = (tkey){K_I64, "shard.capacity", cap, NULL, NULL, 0};
  k[n++] = (tkey){K_I64, "shard.position", pos, NULL, NULL, 0};
  k[n++] = (tkey){K_I64, "shard.size", size, NULL, NULL, 0};
  k[n++] = (tkey){K_I64S, "shard.widths", 0, NULL, w, nf};
  k[n++] = (tkey){K_I64S, "shard.dtypes", 0, NULL, dt, nf};
  return n;
}

static int find_key(tkey *k, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(k[i].name, name)) return i;
  fail_msg("no key %s", name);
  return -1;
}

/* A container of the n keys and, with blob > 0, one blob section "extra"
 * of blob bytes, then `tail` (tn bytes: the table's image); malloc'd, *len
 * bytes. Part length 16 MiB, as the library writes. */
static unsigned char *encode(const tkey *k, int n, size_t blob, const unsigned char *tail, size_t tn,
                             size_t *len) {
  const uint64_t part = (uint64_t)16 << 20;
  size_t H = 48 + 4;
  for (int i = 0; i < n; i++)
    H += 8 + strlen(k[i].name) +
         (k[i].type == K_STR    ? strlen(k[i].str)
          : k[i].type == K_I64S ? 8 * k[i].n
                                : 8);
  if (blob) H += 24 + 5;
  size_t data = blob ? blob + 4 : 0;
  unsigned char *p = calloc(1, H + data + tn);
  assert_non_null(p);
  memcpy(p, "AGRLFILE", 8);
  wr32(p + 8, 1);
  wr32(p + 12, (uint32_t)H);
  wr32(p + 16, (uint32_t)n);
  wr32(p + 20, blob ? 1 : 0);
  wr64(p + 24, part);
  wr64(p + 32, H + data);
  unsigned char *e = p + 48;
  for (int i = 0; i < n; i++) {
    size_t nl = strlen(k[i].name);
    uint32_t count = k[i].type == K_STR ? (uint32_t)strlen(k[i].str) : k[i].type == K_I64S ? k[i].n : 1;
    e[0] = (unsigned char)k[i].type, e[2] = (unsigned char)nl;
    wr32(e + 4, count);
    memcpy(e + 8, k[i].name, nl);
    e += 8 + nl;
    if (k[i].type == K_STR)
      memcpy(e, k[i].str, count), e += count;
    else if (k[i].type == K_I64S)
      for (uint32_t j = 0; j < count; j++, e += 8) wr64(e, (uint64_t)k[i].arr[j]);
    else
      wr64(e, (uint64_t)k[i].v), e += 8;
  }
  if (blob) { /* a blob section: name length, kind 1, dtype u8, 0 dims, offset, bytes, name */
    e[0] = 5, e[2] = 1, e[3] = 3;
    wr64(e + 8, H);
    wr64(e + 16, blob);
    memcpy(e + 24, "extra", 5);
    memset(p + H, 0x5a, blob);
    wr32(p + H + blob, crc(p + H, blob));
  }
  wr32(p + H - 4, crc(p, H - 4));
  if (tn) memcpy(p + H + data, tail, tn);
  *len = H + data + tn;
  return p;
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

/* The file is the container encoded here from the shard's keys, then the
 * table as ag_replay_save writes it; a file saved on the device under test
 * loads on the CPU the same. */
static void layout(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx(), *cpu;
  agt_ok(ag_ctx_create(&cpu, AG_DEVICE_CPU, 0));
  ag_shard *sh[G];
  filled_group(ctx, AG_BF16, 1, 29, sh); /* wrapped: size 24, position 5 */
  const int64_t w[3] = {2, 1, 1}, dt[3] = {AG_F32, AG_I32, AG_I64};
  for (int r = 0; r < G; r++) {
    agt_ok(ag_shard_save(sh[r], paths[r]));
    size_t n, nr, ne;
    unsigned char *p = agt_slurp(paths[r], &n);
    agt_ok(ag_replay_save(ag_shard_local(sh[r]), path_x));
    unsigned char *q = agt_slurp(path_x, &nr);
    tkey k[MAX_KEYS];
    int nk = shard_keys(k, r, G, CAP, 5, CAP, w, dt, 3);
    unsigned char *e = encode(k, nk, 0, q, nr, &ne);
    assert_int_equal(n, ne);
    assert_memory_equal(p, e, n);
    /* the fields read back: its header's length, no sections, its CRC */
    const uint32_t H = rd32(p + 12);
    assert_int_equal(rd32(p + 20), 0);
    assert_int_equal(rd64(p + 32), H);
    assert_int_equal(rd32(p + H - 4), crc(p, H - 4));
    assert_memory_equal(p + H, "AGRLFILE", 8);
    free(e);
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

/* The shard file of rank 1 with keys k (n of them) and blob bytes of a
 * section: refused as `want` with `part`. */
static void refused_keys(ag_ctx *ctx, const tkey *k, int n, size_t blob, const unsigned char *table,
                         size_t tn, ag_status want, const char *part) {
  size_t len;
  unsigned char *p = encode(k, n, blob, table, tn, &len);
  refused(ctx, p, len, want, part);
  free(p);
}

static void bad_files_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_shard *sh[G];
  filled_group(ctx, AG_F32, 1, 29, sh);
  agt_ok(ag_shard_save(sh[1], paths[1]));
  size_t n, tn;
  unsigned char *p = agt_slurp(paths[1], &n);
  const uint32_t H = rd32(p + 12);
  agt_ok(ag_replay_save(ag_shard_local(sh[1]), path_x));
  unsigned char *table = agt_slurp(path_x, &tn); /* the local table's image */
  assert_int_equal(n, H + tn);
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
  refused(ctx, p, H - 1, AG_ERR_IO, "truncated");
  refused(ctx, p, 30, AG_ERR_IO, "shorter than an agrl file's header");
  refused(ctx, p, H, AG_ERR_IO, "the table in");
  refused(ctx, p, H + 100, AG_ERR_IO, "truncated");
  refused(ctx, p, n - 1, AG_ERR_IO, "truncated");
  unsigned char *q = malloc(n + 64);
  assert_non_null(q);
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 2; k++) {
      memcpy(q, p, n);
      q[i] ^= k ? 0xff : 0x01;
      refused(ctx, q, n, 0, NULL);
    }
  memcpy(q, p, n); /* the magic of no agrl file, of another one */
  q[0] ^= 1;
  refused(ctx, q, n, AG_ERR_IO, "not an agrl file");
  memcpy(q, p, n);
  memcpy(q, "AGRLRPL1", 8);
  refused(ctx, q, n, AG_ERR_IO, "not a shard file: it begins with AGRLRPL1");
  memcpy(q, p, n); /* the container's CRCs: its header's, a part of the table's */
  q[60] ^= 1;
  refused(ctx, q, n, AG_ERR_IO, "header fails its CRC-32");
  memcpy(q, p, n);
  q[H - 1] ^= 1;
  refused(ctx, q, n, AG_ERR_IO, "header fails its CRC-32");
  memcpy(q, p, n);
  q[n - 10] ^= 1;
  refused(ctx, q, n, AG_ERR_IO, "fails its CRC-32");
  memcpy(q, p, n);
  q[H + 20] ^= 1;
  refused(ctx, q, n, AG_ERR_IO, "the table in");
  memcpy(q, p, n);
  memset(q + n, 0, 8);
  refused(ctx, q, n + 8, AG_ERR_IO, "trailing");
  memcpy(q, p, n);
  wr32(q + 8, 2);
  refused(ctx, q, n, AG_ERR_UNSUPPORTED, "container version 2");
  agt_ok(ag_replay_save(ag_shard_local(sh[1]), path_x)); /* a replay file is not a shard file */
  out = SENTINEL;
  agt_err(ag_shard_load(ctx, path_x, 1, G, &out), AG_ERR_IO, "not a shard file: its kind is \"replay\"");
  assert_true(out == SENTINEL);
  /* the keys: each under a correct CRC, encoded here */
  const int64_t w[3] = {2, 1, 1}, dt[3] = {AG_F32, AG_I32, AG_I64};
  tkey k[MAX_KEYS];
  int nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
  size_t len;
  unsigned char *e = encode(k, nk, 0, table, tn, &len);
  assert_int_equal(len, n);
  assert_memory_equal(e, p, n); /* the encoding here is the library's */
  free(e);
  const struct {
    const char *key;
    int64_t v;
    ag_status want;
    const char *part;
  } bad[] = {{"shard.version", 3, AG_ERR_UNSUPPORTED, "holds shard version 3"},
             {"shard.version", 0, AG_ERR_IO, "'shard.version' = 0, outside 1..2"},
             {"shard.rank", 3, AG_ERR_IO, "'shard.rank' = 3, outside 0..2"},
             {"shard.rank", -1, AG_ERR_IO, "'shard.rank' = -1"},
             {"shard.world", 0, AG_ERR_IO, "'shard.world' = 0"},
             {"shard.world", (int64_t)1 << 31, AG_ERR_IO, "'shard.world' = 2147483648"},
             {"shard.capacity", 25, AG_ERR_IO, "capacity 25 is not a multiple of world (3)"},
             {"shard.capacity", 0, AG_ERR_IO, "'shard.capacity' = 0"},
             {"shard.capacity", (int64_t)3 << 41, AG_ERR_IO, "of 1..2^40 columns per rank"},
             {"shard.size", 25, AG_ERR_IO, "'shard.size' = 25, outside 0..24"},
             {"shard.size", -1, AG_ERR_IO, "'shard.size' = -1"},
             {"shard.position", 24, AG_ERR_IO, "'shard.position' = 24, outside 0..23"},
             {"shard.size", 7, AG_ERR_IO, "position 5 is not one a ring of size 7"},
             {"shard.position", 8, AG_ERR_IO, "at position 3"}}; /* not the table's local position */
  for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
    nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
    k[find_key(k, nk, bad[b].key)].v = bad[b].v;
    refused_keys(ctx, k, nk, 0, table, tn, bad[b].want, bad[b].part);
  }
  /* a global table of twice the columns: not the table's image */
  nk = shard_keys(k, 1, G, 2 * CAP, CAP, CAP, w, dt, 3);
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO,
               "its table has 8 columns; rank 1 of 3 of a table of 48 holds 16");
  /* global size and position that give rank 1 another local size */
  nk = shard_keys(k, 1, G, CAP, 5, 5, w, dt, 3);
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, "gives rank 1 of 3 size 2 at position 2");
  /* the fields: out of their limits, or not the table's */
  const struct {
    int field, dtype;
    int64_t v;
    const char *part;
  } badf[] = {{0, 0, 0, "field 0 has width 0"},
              {0, 0, (int64_t)1 << 40, "field 0 has width 1099511627776"},
              {2, 1, 6, "field 2 has dtype code 6"},
              {2, 1, -1, "field 2 has dtype code -1"},
              {1, 0, 3, "is not the header's field 1 (width 3"},
              {1, 1, AG_I64, "is not the header's field 1 (width 1, dtype code 5)"}};
  for (size_t b = 0; b < sizeof badf / sizeof badf[0]; b++) {
    int64_t w2[3] = {2, 1, 1}, dt2[3] = {AG_F32, AG_I32, AG_I64};
    (badf[b].dtype ? dt2 : w2)[badf[b].field] = badf[b].v;
    nk = shard_keys(k, 1, G, CAP, 5, CAP, w2, dt2, 3);
    refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, badf[b].part);
  }
  nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 2); /* two fields, the table three */
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, "its table has 3 fields, its header 2");
  nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
  k[find_key(k, nk, "shard.dtypes")].n = 2;
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, "3 field widths and 2 field dtypes");
  /* a key missing, or of another type */
  const char *needed[] = {"shard.version",  "shard.rank", "shard.world",  "shard.capacity",
                          "shard.position", "shard.size", "shard.widths", "shard.dtypes"};
  for (size_t b = 0; b < sizeof needed / sizeof needed[0]; b++) {
    nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
    int at = find_key(k, nk, needed[b]);
    k[at] = k[--nk];
    char want[64];
    snprintf(want, sizeof want, "key '%s' is missing", needed[b]);
    refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, want);
  }
  nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
  k[find_key(k, nk, "shard.rank")].type = K_F64;
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, "key 'shard.rank' is a f64, not a i64");
  nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
  k[find_key(k, nk, "shard.world")] = (tkey){K_STR, "shard.world", 0, "3", NULL, 0};
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, "key 'shard.world' is a string, not a i64");
  nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
  k[find_key(k, nk, "shard.widths")] = (tkey){K_I64, "shard.widths", 2, NULL, NULL, 0};
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, "key 'shard.widths' is a i64, not a i64 array");
  nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3); /* a u64 within i64 reads as one */
  k[find_key(k, nk, "shard.rank")].type = K_U64;
  e = encode(k, nk, 0, table, tn, &len);
  agt_spit(path_x, e, len);
  free(e);
  out = SENTINEL;
  agt_ok(ag_shard_load(ctx, path_x, 1, G, &out));
  assert_same_shard(sh[1], out);
  ag_shard_free(out);
  /* the kind: another, missing, not a string */
  nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
  k[0].str = "replay";
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, "not a shard file: its kind is \"replay\"");
  k[0] = k[--nk];
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, "not a shard file: its key 'kind' is missing");
  nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
  k[0] = (tkey){K_I64, "kind", 1, NULL, NULL, 0};
  refused_keys(ctx, k, nk, 0, table, tn, AG_ERR_IO, "its key 'kind' is not a string");
  /* a section in a shard's header; keys unknown to this library are ignored */
  nk = shard_keys(k, 1, G, CAP, 5, CAP, w, dt, 3);
  refused_keys(ctx, k, nk, 16, table, tn, AG_ERR_IO, "its header has 1 sections; a shard's has none");
  k[nk++] = (tkey){K_I64, "shard.future", 7, NULL, NULL, 0};
  e = encode(k, nk, 0, table, tn, &len);
  agt_spit(path_x, e, len);
  free(e);
  out = SENTINEL;
  agt_ok(ag_shard_load(ctx, path_x, 1, G, &out));
  assert_same_shard(sh[1], out);
  ag_shard_free(out);
  /* rank 1's file claimed as rank 2's */
  nk = shard_keys(k, 2, G, CAP, 5, CAP, w, dt, 3);
  e = encode(k, nk, 0, table, tn, &len);
  agt_spit(path_x, e, len);
  free(e);
  out = SENTINEL;
  agt_err(ag_shard_load(ctx, path_x, 2, G, &out), AG_ERR_IO, "is corrupt");
  assert_true(out == SENTINEL);
  free(q);
  free(p);
  free(table);
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
