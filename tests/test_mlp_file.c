/* test_mlp_file.c — model files: ag_mlp_save and ag_mlp_load.
 *
 * The layouts are rebuilt here from their description in agrl/nn.h, with a
 * bitwise CRC-32 of this file's own (no table), and compared byte for byte
 * with what the library writes; files the library must refuse are made
 * from those bytes: every truncation, every single changed byte, NaNs with
 * correct checksums, bad activation codes, sizes of terabytes. A failed
 * save (each injected download and host-allocation fault in turn) must
 * leave the previous file byte for byte and no temporary beside it; a
 * failed load must leave nothing allocated and *out as it was.
 */
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agt.h"

/* The loader's stream entry (src/nn/mlp.c), fed memory through fmemopen. */
ag_status ag__mlp_load_stream(ag_ctx *ctx, FILE *f, const char *name, ag_mlp **out);

/* Never a real MLP: out must still hold it after a failed load. */
#define SENTINEL ((ag_mlp *)(uintptr_t)0x5e17e1)

/* ---- the reference: CRC-32 bit by bit, and the layouts of agrl/nn.h ---- */

static uint32_t ref_crc(const void *data, size_t n) {
  const unsigned char *p = data;
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}

typedef struct bytes {
  unsigned char *p;
  size_t n, cap;
} bytes;

static void b_put(bytes *b, const void *d, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    assert_non_null(b->p);
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}
static void b_u32(bytes *b, uint32_t v) {
  unsigned char c[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  b_put(b, c, 4);
}
static void b_u64(bytes *b, uint64_t v) {
  b_u32(b, (uint32_t)v);
  b_u32(b, (uint32_t)(v >> 32));
}
static void b_f32s(bytes *b, const float *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &v[i], 4);
    b_u32(b, u);
  }
}

/* A network as the files describe it: sizes, activation codes, values. */
typedef struct net {
  int n;
  int64_t sizes[64];
  int32_t hidden, last;
  float *vals[128]; /* W0, b0, W1, b1, ... (after the convolutions' w0, b0, ...) */
  int n_conv;       /* a network with convolutions (mlp.version 4) */
  int64_t version;  /* written as mlp.version when not 0 */
  int conv_values;  /* written as mlp.conv's count when not 0 (the first values) */
  int64_t in[3];    /* its input {C, H, W} */
  int64_t conv[8][4];
  int64_t chans[8]; /* each convolution's input channels */
} net;

/* Parameter k's rows and columns (the convolutions' first). */
static void param_dims(const net *m, int k, int64_t *rows, int64_t *cols) {
  if (k < 2 * m->n_conv) {
    const int64_t *c = m->conv[k / 2];
    *rows = k % 2 ? c[0] : m->chans[k / 2] * c[1] * c[1];
    *cols = k % 2 ? 1 : c[0];
    return;
  }
  k -= 2 * m->n_conv;
  *rows = m->sizes[k / 2 + 1];
  *cols = k % 2 ? 1 : m->sizes[k / 2];
}

static size_t param_count(const net *m, int k) {
  int64_t r, c;
  param_dims(m, k, &r, &c);
  return (size_t)(r * c);
}
static int n_params(const net *m) { return 2 * (m->n_conv + m->n - 1); }

/* Version 2: magic, n, hidden, last, reserved 0, sizes, header CRC, then
 * each parameter's values and their CRC. */
static bytes ref_v2(const net *m) {
  bytes b = {0};
  b_put(&b, "AGRLMLP2", 8);
  b_u32(&b, (uint32_t)m->n);
  b_u32(&b, (uint32_t)m->hidden);
  b_u32(&b, (uint32_t)m->last);
  b_u32(&b, 0);
  for (int i = 0; i < m->n; i++) b_u64(&b, (uint64_t)m->sizes[i]);
  b_u32(&b, ref_crc(b.p, b.n));
  for (int k = 0; k < 2 * (m->n - 1); k++) {
    size_t at = b.n;
    b_f32s(&b, m->vals[k], param_count(m, k));
    b_u32(&b, ref_crc(b.p + at, b.n - at));
  }
  return b;
}

/* The container (docs/container.md) as ag_mlp_save writes it: keys kind,
 * mlp.version = 3, mlp.sizes, mlp.hidden, mlp.last; f32 tensor sections
 * W0, b0, ... of [rows, cols]; parts of 1 MB each followed by its CRC-32.
 * A network with convolutions: mlp.version = 4, the keys mlp.in_shape and
 * mlp.conv after those, and the sections conv0.w, conv0.b, ... first. */
static void b_u16(bytes *b, unsigned v) {
  unsigned char c[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
  b_put(b, c, 2);
}
static void b_key(bytes *b, int type, const char *name, uint32_t count) {
  unsigned char t[2] = {(unsigned char)type, 0};
  b_put(b, t, 2);
  b_u16(b, (unsigned)strlen(name));
  b_u32(b, count);
  b_put(b, name, strlen(name));
}
static bytes ref_v3(const net *m) {
  const size_t part = (size_t)1 << 20;
  const int P = n_params(m);
  bytes keys = {0}, secs = {0}, data = {0};
  b_key(&keys, 4, "kind", 3);
  b_put(&keys, "mlp", 3);
  b_key(&keys, 2, "mlp.version", 1);
  b_u64(&keys, m->version ? (uint64_t)m->version : m->n_conv ? 4 : 3);
  b_key(&keys, 5, "mlp.sizes", (uint32_t)m->n);
  for (int i = 0; i < m->n; i++) b_u64(&keys, (uint64_t)m->sizes[i]);
  b_key(&keys, 2, "mlp.hidden", 1);
  b_u64(&keys, (uint64_t)(int64_t)m->hidden);
  b_key(&keys, 2, "mlp.last", 1);
  b_u64(&keys, (uint64_t)(int64_t)m->last);
  if (m->n_conv) {
    b_key(&keys, 5, "mlp.in_shape", 3);
    for (int i = 0; i < 3; i++) b_u64(&keys, (uint64_t)m->in[i]);
    const int nv = m->conv_values ? m->conv_values : 4 * m->n_conv;
    b_key(&keys, 5, "mlp.conv", (uint32_t)nv);
    for (int i = 0; i < nv; i++) b_u64(&keys, (uint64_t)m->conv[i / 4][i % 4]);
  }
  char names[128][24];
  size_t H = 48 + keys.n + 4;
  for (int k = 0; k < P; k++) {
    if (k < 2 * m->n_conv)
      snprintf(names[k], 24, "conv%d.%c", k / 2, k % 2 ? 'b' : 'w');
    else
      snprintf(names[k], 24, "%c%d", k % 2 ? 'b' : 'W', (k - 2 * m->n_conv) / 2);
    H += 24 + 16 + strlen(names[k]);
  }
  for (int k = 0; k < P; k++) {
    const char *name = names[k];
    size_t n = param_count(m, k);
    int64_t rows, cols;
    param_dims(m, k, &rows, &cols);
    b_u16(&secs, (unsigned)strlen(name));
    unsigned char kd[2] = {2, 0}; /* a tensor of f32 */
    b_put(&secs, kd, 2);
    b_u32(&secs, 2);
    b_u64(&secs, H + data.n);
    b_u64(&secs, 4 * n);
    b_u64(&secs, (uint64_t)rows);
    b_u64(&secs, (uint64_t)cols);
    b_put(&secs, name, strlen(name));
    bytes v = {0};
    b_f32s(&v, m->vals[k], n);
    for (size_t off = 0; off < v.n; off += part) {
      size_t len = v.n - off < part ? v.n - off : part;
      b_put(&data, v.p + off, len);
      b_u32(&data, ref_crc(v.p + off, len));
    }
    free(v.p);
  }
  bytes b = {0};
  b_put(&b, "AGRLFILE", 8);
  b_u32(&b, 1);
  b_u32(&b, (uint32_t)H);
  b_u32(&b, m->n_conv ? 7 : 5);
  b_u32(&b, (uint32_t)P);
  b_u64(&b, part);
  b_u64(&b, H + data.n);
  b_u64(&b, 0);
  b_put(&b, keys.p, keys.n);
  b_put(&b, secs.p, secs.n);
  assert_int_equal(b.n, H - 4);
  b_u32(&b, ref_crc(b.p, b.n));
  b_put(&b, data.p, data.n);
  free(keys.p), free(secs.p), free(data.p);
  return b;
}

/* Version 1 (the old layout): magic, n, hidden, last, sizes, values. */
static bytes ref_v1(const net *m) {
  bytes b = {0};
  b_put(&b, "AGRLMLP1", 8);
  b_u32(&b, (uint32_t)m->n);
  b_u32(&b, (uint32_t)m->hidden);
  b_u32(&b, (uint32_t)m->last);
  for (int i = 0; i < m->n; i++) b_u64(&b, (uint64_t)m->sizes[i]);
  for (int k = 0; k < 2 * (m->n - 1); k++) b_f32s(&b, m->vals[k], param_count(m, k));
  return b;
}

/* A network of known values: value i of parameter k is a small fraction. */
static net make_net(const int64_t *sizes, int n, int32_t hidden, int32_t last) {
  net m;
  memset(&m, 0, sizeof m);
  m.n = n;
  memcpy(m.sizes, sizes, (size_t)n * sizeof *sizes);
  m.hidden = hidden;
  m.last = last;
  for (int k = 0; k < 2 * (n - 1); k++) {
    size_t c = param_count(&m, k);
    m.vals[k] = malloc(c * sizeof(float));
    assert_non_null(m.vals[k]);
    for (size_t i = 0; i < c; i++) m.vals[k][i] = (float)((int)((i * 7 + (size_t)k * 13) % 23) - 11) / 16.0f;
  }
  return m;
}

/* The network of an ag_mlp, its values read back from the device. */
static net read_net(const ag_mlp *a, const int64_t *sizes, int n, int32_t hidden, int32_t last) {
  net m;
  memset(&m, 0, sizeof m);
  m.n = n;
  memcpy(m.sizes, sizes, (size_t)n * sizeof *sizes);
  m.hidden = hidden;
  m.last = last;
  assert_int_equal(ag_mlp_n_params(a), 2 * (n - 1));
  for (int k = 0; k < 2 * (n - 1); k++) m.vals[k] = agt_read_f32(ag_mlp_params(a)[k]);
  return m;
}

static void free_net(net *m) {
  for (int k = 0; k < 128; k++) free(m->vals[k]);
  memset(m, 0, sizeof *m);
}

/* ---- files and directories ---- */

typedef struct tdir {
  char dir[64];
  char path[128]; /* dir/model.agrl */
} tdir;

static void tdir_make(tdir *t) {
  snprintf(t->dir, sizeof t->dir, "/tmp/agrl_mlpfile_XXXXXX");
  assert_non_null(mkdtemp(t->dir));
  snprintf(t->path, sizeof t->path, "%s/model.agrl", t->dir);
}

/* Entries of the directory besides . and ..; the first name in `first`. */
static int dir_entries(const char *dir, char *first, size_t cap) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  if (first && cap) first[0] = 0;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (n++ == 0 && first) snprintf(first, cap, "%s", e->d_name);
  }
  closedir(d);
  return n;
}

static void tdir_remove(tdir *t) {
  DIR *d = opendir(t->dir);
  assert_non_null(d);
  struct dirent *e;
  char p[400];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", t->dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  assert_int_equal(rmdir(t->dir), 0);
}

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static bytes read_bytes(const char *path) {
  bytes b = {0};
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  unsigned char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) b_put(&b, buf, k);
  fclose(f);
  return b;
}

/* ---- loads that must fail ---- */

static uint64_t live_bytes(ag_ctx *ctx) {
  ag_ctx_stats st;
  ag_ctx_get_stats(ctx, &st);
  return st.live_bytes;
}
static uint64_t allocs(ag_ctx *ctx) {
  ag_ctx_stats st;
  ag_ctx_get_stats(ctx, &st);
  return st.allocs;
}

/* Loads p[0..n) from memory through the stream entry. */
static ag_status load_mem(ag_ctx *ctx, const void *p, size_t n, ag_mlp **out) {
  static const char empty[1] = {0};
  FILE *f = fmemopen((void *)(n ? p : empty), n ? n : 1, "rb");
  assert_non_null(f);
  if (n == 0) assert_int_equal(fgetc(f), 0); /* at the end of a 1-byte stream: 0 bytes left */
  ag_status s = ag__mlp_load_stream(ctx, f, "memory", out);
  fclose(f);
  return s;
}

/* Loads a file of these bytes with ag_mlp_load and expects `status` with
 * `part` in the message, nothing left allocated, *out untouched; with
 * `before_alloc`, nothing allocated at all. */
static void expect_refused(ag_ctx *ctx, const char *path, const bytes *b, size_t n, ag_status status,
                           const char *part, int before_alloc) {
  write_bytes(path, b->p, n);
  uint64_t live0 = live_bytes(ctx), allocs0 = allocs(ctx);
  ag_mlp *out = SENTINEL;
  agt_err(ag_mlp_load(ctx, path, &out), status, part);
  if (strncmp(ag_last_error(), "ag_mlp_load: ", 13) != 0)
    fail_msg("message \"%s\" does not name ag_mlp_load", ag_last_error());
  assert_ptr_equal(out, SENTINEL);
  assert_int_equal(live_bytes(ctx), live0);
  if (before_alloc) assert_int_equal(allocs(ctx), allocs0);
}

/* ---- tests ---- */

/* The bitwise reference itself: the standard check value. */
static void reference_crc_is_crc32(void **state) {
  (void)state;
  assert_int_equal(ref_crc("123456789", 9), 0xcbf43926u);
  assert_int_equal(ref_crc("", 0), 0);
}

/* Save writes exactly the documented version-2 bytes; load gives back the
 * same sizes, values (bit for bit) and activations (a second save of the
 * loaded network is the same file, and its outputs are the same bits). */
static void round_trip(void **state) {
  (void)state;
  static const struct {
    int n;
    int64_t sizes[5];
    ag_act hidden, last;
  } shapes[] = {
      {2, {3, 1}, AG_ACT_RELU, AG_ACT_NONE},    /* one layer */
      {2, {1, 1}, AG_ACT_NONE, AG_ACT_SIGMOID}, /* one weight */
      {3, {4, 8, 2}, AG_ACT_TANH, AG_ACT_NONE},
      {5, {5, 7, 6, 3, 2}, AG_ACT_RELU, AG_ACT_TANH},  /* four layers */
      {3, {600, 600, 3}, AG_ACT_SIGMOID, AG_ACT_RELU}, /* W0 1.4 MB: uploaded in parts */
  };
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  char again[160];
  snprintf(again, sizeof again, "%s/again.agrl", t.dir);
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    int n = shapes[si].n;
    const int64_t *sizes = shapes[si].sizes;
    ag_mlp *a, *b = SENTINEL;
    agt_ok(ag_mlp_create(ctx, sizes, n, shapes[si].hidden, shapes[si].last, 100 + si, &a));
    agt_ok(ag_mlp_save(a, t.path));
    net ref = read_net(a, sizes, n, shapes[si].hidden, shapes[si].last);
    bytes want = ref_v3(&ref), got = read_bytes(t.path);
    assert_int_equal(got.n, want.n);
    assert_memory_equal(got.p, want.p, want.n);

    ag_xfer_reset(ctx);
    agt_ok(ag_mlp_load(ctx, t.path, &b));
    assert_ptr_not_equal(b, SENTINEL);
    uint64_t up = 0;
    ag_xfer_get(ctx, "ag_mlp_load", &up, NULL);
    size_t values = 0;
    for (int k = 0; k < 2 * (n - 1); k++) values += param_count(&ref, k);
    assert_int_equal(up, 4 * values); /* each value crossed once */
    assert_int_equal(ag_mlp_in(b), sizes[0]);
    assert_int_equal(ag_mlp_out(b), sizes[n - 1]);
    net back = read_net(b, sizes, n, shapes[si].hidden, shapes[si].last);
    for (int k = 0; k < 2 * (n - 1); k++) {
      ag_tensor *p = ag_mlp_params(b)[k];
      assert_int_equal(ag_tensor_rows(p), sizes[k / 2 + 1]);
      assert_int_equal(ag_tensor_cols(p), k % 2 ? 1 : sizes[k / 2]);
      assert_true(ag_tensor_requires_grad(p));
      assert_memory_equal(back.vals[k], ref.vals[k], param_count(&ref, k) * sizeof(float));
    }
    agt_ok(ag_mlp_save(b, again));
    bytes got2 = read_bytes(again);
    assert_int_equal(got2.n, want.n);
    assert_memory_equal(got2.p, want.p, want.n); /* activations included (bytes 12..19) */

    /* the same outputs, bit for bit, from inputs that make every activation matter */
    agt_rng r = {7 + si};
    int64_t cols = 5;
    float *x = malloc((size_t)(sizes[0] * cols) * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < sizes[0] * cols; i++) x[i] = agt_uniform(&r, -3, 3);
    ag_tensor *tx, *ya, *yb;
    agt_ok(ag_tensor_create(ctx, sizes[0], cols, AG_F32, x, &tx));
    agt_ok(ag_mlp_forward(a, tx, &ya));
    agt_ok(ag_mlp_forward(b, tx, &yb));
    float *va = agt_read_f32(ya), *vb = agt_read_f32(yb);
    assert_memory_equal(va, vb, (size_t)(sizes[n - 1] * cols) * sizeof(float));
    free(va), free(vb), free(x);
    ag_tensor_free(tx);
    ag_ctx_reset(ctx);
    free(want.p), free(got.p), free(got2.p);
    free_net(&ref), free_net(&back);
    ag_mlp_free(a), ag_mlp_free(b);
  }
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

/* y = act(W x + b) on the host, layer by layer, for one input column. */
static void host_forward(const net *m, const float *x, float *y) {
  double h[64], z[64];
  for (int64_t i = 0; i < m->sizes[0]; i++) h[i] = x[i];
  for (int l = 0; l + 1 < m->n; l++) {
    int64_t in = m->sizes[l], out = m->sizes[l + 1];
    int32_t act = l + 2 < m->n ? m->hidden : m->last;
    for (int64_t r = 0; r < out; r++) {
      double s = m->vals[2 * l + 1][r];
      for (int64_t c = 0; c < in; c++) s += (double)m->vals[2 * l][c * out + r] * h[c]; /* column-major */
      z[r] = act == AG_ACT_RELU      ? (s > 0 ? s : 0)
             : act == AG_ACT_TANH    ? tanh(s)
             : act == AG_ACT_SIGMOID ? 1 / (1 + exp(-s))
                                     : s;
    }
    for (int64_t r = 0; r < out; r++) h[r] = z[r];
  }
  for (int64_t i = 0; i < m->sizes[m->n - 1]; i++) y[i] = (float)h[i];
}

/* A version-1 file written here in the old layout loads with its values,
 * sizes and activations; the checks that need no checksum apply to it. */
static void version1_loads(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  const int64_t sizes[4] = {3, 5, 4, 2};
  net m = make_net(sizes, 4, AG_ACT_TANH, AG_ACT_SIGMOID);
  bytes b = ref_v1(&m);
  assert_int_equal(b.n, 20 + 8 * 4 + 4 * (15 + 5 + 20 + 4 + 8 + 2));
  write_bytes(t.path, b.p, b.n);
  ag_mlp *a = SENTINEL;
  agt_ok(ag_mlp_load(ctx, t.path, &a));
  assert_int_equal(ag_mlp_in(a), 3);
  assert_int_equal(ag_mlp_out(a), 2);
  net back = read_net(a, sizes, 4, 0, 0);
  for (int k = 0; k < 6; k++)
    assert_memory_equal(back.vals[k], m.vals[k], param_count(&m, k) * sizeof(float));
  float x[3] = {0.5f, -1.25f, 2.0f}, want[2], got[2];
  host_forward(&m, x, want);
  ag_tensor *tx, *y;
  agt_ok(ag_tensor_create(ctx, 3, 1, AG_F32, x, &tx));
  agt_ok(ag_mlp_forward(a, tx, &y));
  agt_ok(ag_tensor_read(y, got, sizeof got));
  for (int i = 0; i < 2; i++) assert_float_equal(got[i], want[i], 1e-5);
  /* relu/none instead would give other outputs: the activations were read */
  net other = m;
  other.hidden = AG_ACT_RELU, other.last = AG_ACT_NONE;
  float alt[2];
  host_forward(&other, x, alt);
  assert_true(fabsf(alt[0] - want[0]) > 1e-3f || fabsf(alt[1] - want[1]) > 1e-3f);
  ag_tensor_free(tx);
  ag_mlp_free(a);

  /* a save of it is the container */
  char v2[160];
  snprintf(v2, sizeof v2, "%s/v2.agrl", t.dir);
  agt_ok(ag_mlp_load(ctx, t.path, &a));
  agt_ok(ag_mlp_save(a, v2));
  bytes want2 = ref_v3(&m), got2 = read_bytes(v2);
  assert_int_equal(got2.n, want2.n);
  assert_memory_equal(got2.p, want2.p, want2.n);
  ag_mlp_free(a);

  /* version 1: truncated, trailing bytes, a NaN, a bad size are refused */
  expect_refused(ctx, t.path, &b, b.n - 1, AG_ERR_IO, "is truncated", 1);
  expect_refused(ctx, t.path, &b, 20 + 8 * 3, AG_ERR_IO, "is truncated", 1);
  bytes longer = {0};
  b_put(&longer, b.p, b.n);
  b_put(&longer, "x", 1);
  expect_refused(ctx, t.path, &longer, longer.n, AG_ERR_IO, "1 trailing bytes", 1);
  m.vals[2][7] = NAN;
  bytes nan = ref_v1(&m);
  expect_refused(ctx, t.path, &nan, nan.n, AG_ERR_IO, "parameter W1 holds a NaN at element 7", 0);
  m.vals[2][7] = 0.25f;
  m.sizes[1] = 0;
  bytes zero = ref_v1(&m);
  expect_refused(ctx, t.path, &zero, zero.n, AG_ERR_IO, "sizes[1] = 0", 1);

  free(b.p), free(longer.p), free(nan.p), free(zero.p), free(want2.p), free(got2.p);
  free_net(&m), free_net(&back);
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

static void truncated_and_trailing_of(bytes *bp);
static void every_changed_byte_of(bytes *bp, size_t header, size_t unchecked);

/* Every prefix of a small valid file is "truncated"; bytes after it are
 * "trailing"; both found before anything is allocated. */
static void truncated_and_trailing(void **state) {
  (void)state;
  const int64_t sizes[3] = {2, 3, 1};
  net m = make_net(sizes, 3, AG_ACT_RELU, AG_ACT_NONE);
  for (int v = 2; v <= 3; v++) {
    bytes b = v == 2 ? ref_v2(&m) : ref_v3(&m);
    if (v == 2) assert_int_equal(b.n, 28 + 8 * 3 + (24 + 4) + (12 + 4) + (12 + 4) + (4 + 4));
    truncated_and_trailing_of(&b);
    free(b.p);
  }
  free_net(&m);
}

static void truncated_and_trailing_of(bytes *bp) {
  bytes b = *bp;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  for (size_t len = 0; len < b.n; len++) {
    expect_refused(ctx, t.path, &b, len, AG_ERR_IO, "is truncated", 1);
    ag_mlp *out = SENTINEL;
    assert_int_equal(load_mem(ctx, b.p, len, &out), AG_ERR_IO);
    assert_non_null(strstr(ag_last_error(), "is truncated"));
    assert_ptr_equal(out, SENTINEL);
  }
  const size_t extra[] = {1, 3, 4, 1000};
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
    bytes longer = {0};
    b_put(&longer, b.p, b.n);
    for (size_t k = 0; k < extra[i]; k++) b_put(&longer, "\0", 1);
    char part[64];
    snprintf(part, sizeof part, "%zu trailing bytes", extra[i]);
    expect_refused(ctx, t.path, &longer, longer.n, AG_ERR_IO, part, 1);
    free(longer.p);
  }
  /* the whole file loads: the refusals were for the lengths alone */
  write_bytes(t.path, b.p, b.n);
  ag_mlp *a;
  agt_ok(ag_mlp_load(ctx, t.path, &a));
  ag_mlp_free(a);
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

/* Every single changed byte of a small file, to each of the 255 other
 * values, is refused: header bytes before anything is allocated, data
 * bytes by their parameter's CRC-32 (see agrl/nn.h for why no change can
 * leave a valid file). */
static void every_changed_byte_refused(void **state) {
  (void)state;
  const int64_t sizes[3] = {2, 3, 1};
  net m = make_net(sizes, 3, AG_ACT_TANH, AG_ACT_SIGMOID);
  bytes b2 = ref_v2(&m), b3 = ref_v3(&m);
  /* version 2: all but magic, version and n_sizes under a CRC; the
   * container: all but magic, version and header length */
  every_changed_byte_of(&b2, 28 + 8 * 3, 12);
  every_changed_byte_of(&b3, b3.p[12] | (size_t)b3.p[13] << 8, 16);
  free(b2.p), free(b3.p);
  free_net(&m);
}

static void every_changed_byte_of(bytes *bp, size_t header, size_t unchecked) {
  bytes b = *bp;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  ag_mlp *ok;
  agt_ok(load_mem(ctx, b.p, b.n, &ok));
  ag_mlp_free(ok);
  int n_checksum = 0, n_other = 0;
  for (size_t at = 0; at < b.n; at++) {
    for (int x = 1; x < 256; x++) {
      b.p[at] ^= (unsigned char)x;
      uint64_t live0 = live_bytes(ctx), allocs0 = allocs(ctx);
      ag_mlp *out = SENTINEL;
      ag_status s = load_mem(ctx, b.p, b.n, &out);
      const char *msg = ag_last_error();
      if (s == AG_OK) fail_msg("byte %zu changed by 0x%02x: the file loaded", at, x);
      assert_ptr_equal(out, SENTINEL);
      assert_int_equal(live_bytes(ctx), live0);
      if (at < header) assert_int_equal(allocs(ctx), allocs0);
      if (s == AG_ERR_UNSUPPORTED) { /* a newer version, of the old file (byte 7) or the container (8..11) */
        assert_true(at >= 7 && at < 12);
        assert_non_null(strstr(msg, "version"));
      } else {
        assert_int_equal(s, AG_ERR_IO);
        if (!strstr(msg, "is corrupt") && !strstr(msg, "is truncated") && !strstr(msg, "not an agrl"))
          fail_msg("byte %zu changed by 0x%02x: message \"%s\"", at, x, msg);
      }
      if (strstr(msg, "CRC-32"))
        n_checksum++;
      else
        n_other++;
      if (at >= header) assert_non_null(strstr(msg, "fails its CRC-32 check"));
      b.p[at] ^= (unsigned char)x;
    }
  }
  assert_int_equal(n_checksum + n_other, (int)b.n * 255);
  assert_true(n_checksum >= (int)(b.n - unchecked) * 255);
  /* and through ag_mlp_load, the bytes of each region flipped whole */
  for (size_t at = 0; at < b.n; at++) {
    b.p[at] ^= 0xff;
    int newer = unchecked == 16 && at >= 8 && at < 12; /* the container's version */
    expect_refused(ctx, t.path, &b, b.n, newer ? AG_ERR_UNSUPPORTED : AG_ERR_IO, "ag_mlp_load", at < header);
    b.p[at] ^= 0xff;
  }
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

/* NaN and infinities are refused with correct checksums, in weights and
 * biases, and the message names the parameter and the element. */
static void nonfinite_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  const int64_t sizes[4] = {3, 4, 4, 2};
  static const struct {
    int k;
    size_t i;
    float v;
    const char *part;
  } cases[] = {
      {0, 0, NAN, "parameter W0 holds a NaN at element 0 (row 0, column 0)"},
      {2, 13, NAN, "parameter W1 holds a NaN at element 13 (row 1, column 3)"},
      {1, 3, INFINITY, "parameter b0 holds an infinity at element 3"},
      {5, 1, -INFINITY, "parameter b2 holds an infinity at element 1"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    net m = make_net(sizes, 4, AG_ACT_RELU, AG_ACT_NONE);
    m.vals[cases[c].k][cases[c].i] = cases[c].v;
    bytes b = ref_v2(&m); /* checksums of the NaN-holding values: correct */
    expect_refused(ctx, t.path, &b, b.n, AG_ERR_IO, cases[c].part, 0);
    assert_non_null(strstr(ag_last_error(), "is corrupt"));
    /* a NaN of another payload too */
    uint32_t payload = 0x7fc00123u;
    if (cases[c].v != cases[c].v) {
      memcpy(&m.vals[cases[c].k][cases[c].i], &payload, 4);
      bytes b2 = ref_v2(&m);
      expect_refused(ctx, t.path, &b2, b2.n, AG_ERR_IO, "holds a NaN", 0);
      free(b2.p);
    }
    free(b.p);
    free_net(&m);
  }
  /* the largest finite value loads */
  net m = make_net(sizes, 4, AG_ACT_RELU, AG_ACT_NONE);
  m.vals[2][0] = 3.4028234663852886e38f;
  m.vals[2][1] = -3.4028234663852886e38f;
  bytes b = ref_v2(&m);
  write_bytes(t.path, b.p, b.n);
  ag_mlp *a;
  agt_ok(ag_mlp_load(ctx, t.path, &a));
  ag_mlp_free(a);
  free(b.p);
  free_net(&m);
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

/* Activation codes outside the enum are refused (with a correct header CRC). */
static void bad_activation_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  const int64_t sizes[3] = {2, 2, 1};
  const int32_t bad[] = {4, -1, 255, INT32_MAX, INT32_MIN};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    for (int which = 0; which < 2; which++) {
      net m = make_net(sizes, 3, which ? AG_ACT_RELU : bad[i], which ? bad[i] : AG_ACT_NONE);
      char part[96];
      snprintf(part, sizeof part, "the %s activation code %d is not one of 0..3",
               which ? "last layer's" : "hidden layers'", (int)bad[i]);
      bytes b2 = ref_v2(&m), b1 = ref_v1(&m);
      expect_refused(ctx, t.path, &b2, b2.n, AG_ERR_IO, part, 1);
      expect_refused(ctx, t.path, &b1, b1.n, AG_ERR_IO, part, 1);
      free(b2.p), free(b1.p);
      free_net(&m);
    }
  }
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Headers of valid form declaring terabytes (or sizes out of range) in
 * files of a few hundred bytes: refused at once, nothing allocated. */
static void huge_declarations_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  /* headers only: ref_v2/ref_v1 of a net without values, cut after the header */
  static const struct {
    int n;
    int64_t sizes[4];
    const char *part;
  } cases[] = {
      {3, {1000000, 1000000, 1}, "is truncated"},                     /* 4 TB */
      {2, {INT32_MAX, INT32_MAX}, "more than 2^63 bytes"},            /* 2^64 bytes */
      {2, {1 << 30, 1 << 30}, "is truncated"},                        /* 2^62 bytes */
      {3, {INT32_MAX, INT32_MAX, INT32_MAX}, "more than 2^63 bytes"}, /* overflow */
      {4, {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX}, "more than 2^63 bytes"},
      {3, {4, (int64_t)INT32_MAX + 1, 2}, "sizes[1] = 2147483648, outside 1..2147483647"},
      {3, {4, -5, 2}, "sizes[1] = -5"},
      {2, {0, 2}, "sizes[0] = 0"},
      {3, {4, 2, INT64_MAX}, "sizes[2] = 9223372036854775807"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int v = 1; v <= 2; v++) {
      net m;
      memset(&m, 0, sizeof m);
      m.n = cases[c].n;
      memcpy(m.sizes, cases[c].sizes, sizeof cases[c].sizes);
      m.hidden = AG_ACT_RELU;
      /* values left out: 2 * (n - 1) parameters of 0 values would be written,
       * so write the header alone */
      bytes b = {0};
      b_put(&b, v == 2 ? "AGRLMLP2" : "AGRLMLP1", 8);
      b_u32(&b, (uint32_t)m.n);
      b_u32(&b, (uint32_t)m.hidden);
      b_u32(&b, (uint32_t)m.last);
      if (v == 2) b_u32(&b, 0);
      for (int i = 0; i < m.n; i++) b_u64(&b, (uint64_t)m.sizes[i]);
      if (v == 2) b_u32(&b, ref_crc(b.p, b.n));
      for (int i = 0; i < 200; i++) b_put(&b, "\x01", 1); /* a few values */
      double t0 = now_s();
      expect_refused(ctx, t.path, &b, b.n, AG_ERR_IO, cases[c].part, 1);
      assert_true(now_s() - t0 < 1.0);
      free(b.p);
    }
  }
  /* n_sizes outside 2..64 */
  const int32_t bad_n[] = {0, 1, 65, -1, INT32_MAX};
  for (size_t i = 0; i < sizeof bad_n / sizeof bad_n[0]; i++) {
    bytes b = {0};
    b_put(&b, "AGRLMLP2", 8);
    b_u32(&b, (uint32_t)bad_n[i]);
    for (int k = 0; k < 100; k++) b_u32(&b, 1);
    char part[64];
    snprintf(part, sizeof part, "n_sizes = %d, outside 2..64", (int)bad_n[i]);
    expect_refused(ctx, t.path, &b, b.n, AG_ERR_IO, part, 1);
    free(b.p);
  }
  /* not a model at all, a newer version, an empty file */
  bytes junk = {0};
  const char *zip = "PK\x03\x04 not a model file at all, but long enough";
  b_put(&junk, zip, strlen(zip));
  expect_refused(ctx, t.path, &junk, junk.n, AG_ERR_IO, "is not an agrl", 1);
  memcpy(junk.p, "AGRLMLP3", 8);
  expect_refused(ctx, t.path, &junk, junk.n, AG_ERR_UNSUPPORTED,
                 "of version 3, which this library cannot read", 1);
  memcpy(junk.p, "AGRLMLPX", 8);
  expect_refused(ctx, t.path, &junk, junk.n, AG_ERR_IO, "is not a version number", 1);
  expect_refused(ctx, t.path, &junk, 0, AG_ERR_IO, "is truncated", 1);
  free(junk.p);
  /* a reserved word that is not 0, with its CRC correct */
  const int64_t sizes[2] = {1, 1};
  net m = make_net(sizes, 2, AG_ACT_NONE, AG_ACT_NONE);
  bytes b = ref_v2(&m);
  b.p[21] = 1;
  uint32_t crc = ref_crc(b.p, 40);
  for (int i = 0; i < 4; i++) b.p[40 + i] = (unsigned char)(crc >> (8 * i));
  expect_refused(ctx, t.path, &b, b.n, AG_ERR_IO, "reserved header word at byte 20 is 256", 1);
  free(b.p);
  free_net(&m);
  /* a directory, a missing file */
  ag_mlp *out = SENTINEL;
  agt_err(ag_mlp_load(ctx, t.dir, &out), AG_ERR_IO, "is not a regular file");
  agt_err(ag_mlp_load(ctx, "/nonexistent/agrl.mlp", &out), AG_ERR_IO, "cannot open /nonexistent/agrl.mlp");
  assert_ptr_equal(out, SENTINEL);
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

/* The stream entry reads from the stream's position to its end. */
static void stream_from_position(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const int64_t sizes[3] = {3, 2, 2};
  net m = make_net(sizes, 3, AG_ACT_TANH, AG_ACT_NONE);
  bytes model = ref_v2(&m), b = {0};
  b_put(&b, "prefix--", 8);
  b_put(&b, model.p, model.n);
  FILE *f = fmemopen(b.p, b.n, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 8, SEEK_SET), 0);
  ag_mlp *a = SENTINEL;
  agt_ok(ag__mlp_load_stream(ctx, f, "memory", &a));
  net back = read_net(a, sizes, 3, 0, 0);
  for (int k = 0; k < 4; k++)
    assert_memory_equal(back.vals[k], m.vals[k], param_count(&m, k) * sizeof(float));
  ag_mlp_free(a);
  rewind(f);
  a = SENTINEL;
  agt_err(ag__mlp_load_stream(ctx, f, "memory", &a), AG_ERR_IO, "ag_mlp_load: memory is not an agrl");
  assert_ptr_equal(a, SENTINEL);
  fclose(f);
  free(b.p), free(model.p);
  free_net(&m), free_net(&back);
  ag_ctx_free(ctx);
}

/* A failed save leaves the previous file byte for byte and no temporary:
 * a download fault at each download in turn, then a host-allocation fault
 * at each allocation in turn, until the save succeeds. */
static void failed_saves_leave_the_old_file(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  const int64_t sizes[4] = {4, 300, 1000, 2}; /* W1 1.2 MB: downloaded in two parts */
  ag_mlp *a, *b;
  agt_ok(ag_mlp_create(ctx, sizes, 4, AG_ACT_RELU, AG_ACT_NONE, 1, &a));
  agt_ok(ag_mlp_create(ctx, sizes, 4, AG_ACT_TANH, AG_ACT_RELU, 2, &b));
  net nb = read_net(b, sizes, 4, AG_ACT_TANH, AG_ACT_RELU);
  bytes want_b = ref_v3(&nb);
  char name[256];
  for (int kind = 0; kind < 2; kind++) {
    ag_fault fault = kind ? AG_FAULT_HOST_ALLOC : AG_FAULT_DOWNLOAD;
    agt_ok(ag_mlp_save(a, t.path));
    bytes old = read_bytes(t.path);
    int failures = 0;
    for (int64_t n = 0;; n++) {
      assert_true(n < 1000);
      agt_ok(ag_ctx_inject_fault(ctx, fault, n));
      ag_status s = ag_mlp_save(b, t.path);
      agt_ok(ag_ctx_inject_fault(ctx, fault, -1)); /* disarmed whether it fired or not */
      assert_int_equal(dir_entries(t.dir, name, sizeof name), 1);
      assert_string_equal(name, "model.agrl");
      bytes now = read_bytes(t.path);
      if (s == AG_OK) {
        assert_int_equal(now.n, want_b.n);
        assert_memory_equal(now.p, want_b.p, now.n);
        free(now.p);
        break;
      }
      failures++;
      assert_int_equal(s, kind ? AG_ERR_OUT_OF_MEMORY : AG_ERR_DEVICE);
      assert_non_null(strstr(ag_last_error(), "ag_mlp_save: "));
      assert_non_null(strstr(ag_last_error(), kind ? "out of host memory" : "injected fault"));
      assert_int_equal(now.n, old.n);
      assert_memory_equal(now.p, old.p, old.n);
      free(now.p);
    }
    /* downloads: 6 parameters, W1 in two parts */
    if (!kind)
      assert_int_equal(failures, 7);
    else
      assert_true(failures >= 3); /* the part buffer, the two names of the temporary, ... */
    free(old.p);
  }
  /* no previous file: a failed save creates none */
  unlink(t.path);
  agt_ok(ag_ctx_inject_fault(ctx, AG_FAULT_DOWNLOAD, 2));
  agt_err(ag_mlp_save(b, t.path), AG_ERR_DEVICE, "ag_mlp_save: download");
  agt_ok(ag_ctx_inject_fault(ctx, AG_FAULT_DOWNLOAD, -1));
  assert_int_equal(dir_entries(t.dir, NULL, 0), 0);
  /* a directory that does not exist */
  char missing[200];
  snprintf(missing, sizeof missing, "%s/no/such/dir/model.agrl", t.dir);
  agt_err(ag_mlp_save(b, missing), AG_ERR_IO, "ag_mlp_save: cannot create a file beside");
  agt_err(ag_mlp_save(b, ""), AG_ERR_INVALID_ARG, "ag_mlp_save: the path is empty");
  agt_err(ag_mlp_save(NULL, t.path), AG_ERR_INVALID_ARG, "ag_mlp_save");
  assert_int_equal(dir_entries(t.dir, NULL, 0), 0);
  free(want_b.p);
  free_net(&nb);
  ag_mlp_free(a), ag_mlp_free(b);
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

/* A network holding a NaN is not saved (the file would not load): the old
 * file stays. */
static void nan_network_not_saved(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  const int64_t sizes[3] = {2, 3, 2};
  ag_mlp *a;
  agt_ok(ag_mlp_create(ctx, sizes, 3, AG_ACT_RELU, AG_ACT_NONE, 3, &a));
  agt_ok(ag_mlp_save(a, t.path));
  bytes old = read_bytes(t.path);
  float b1[2] = {0.5f, NAN};
  agt_ok(ag_tensor_write(ag_mlp_params(a)[3], b1, sizeof b1));
  agt_err(ag_mlp_save(a, t.path), AG_ERR_STATE, "ag_mlp_save: parameter b1 holds a NaN at element 1");
  bytes now = read_bytes(t.path);
  assert_int_equal(now.n, old.n);
  assert_memory_equal(now.p, old.p, old.n);
  assert_int_equal(dir_entries(t.dir, NULL, 0), 1);
  free(old.p), free(now.p);
  ag_mlp_free(a);
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

/* A network with convolutions of known values, as make_net makes them. */
static net make_conv_net(const int64_t in[3], const int64_t (*conv)[4], int n_conv, const int64_t *fc,
                         int n_fc) {
  net m;
  memset(&m, 0, sizeof m);
  memcpy(m.in, in, sizeof m.in);
  m.n_conv = n_conv;
  int64_t C = in[0], H = in[1], W = in[2];
  for (int i = 0; i < n_conv; i++) {
    memcpy(m.conv[i], conv[i], sizeof m.conv[i]);
    m.chans[i] = C;
    C = conv[i][0];
    H = (H + 2 * conv[i][3] - conv[i][1]) / conv[i][2] + 1;
    W = (W + 2 * conv[i][3] - conv[i][1]) / conv[i][2] + 1;
  }
  m.n = n_fc + 1;
  m.sizes[0] = C * H * W;
  memcpy(m.sizes + 1, fc, (size_t)n_fc * sizeof *fc);
  m.hidden = AG_ACT_RELU;
  m.last = AG_ACT_NONE;
  for (int k = 0; k < n_params(&m); k++) {
    size_t c = param_count(&m, k);
    m.vals[k] = malloc(c * sizeof(float));
    assert_non_null(m.vals[k]);
    for (size_t i = 0; i < c; i++) m.vals[k][i] = (float)((int)((i * 7 + (size_t)k * 13) % 23) - 11) / 16.0f;
  }
  return m;
}

/* Values again for the parameters m describes now (after a change of its shapes). */
static void refill(net *m) {
  for (int k = 0; k < 128; k++) {
    free(m->vals[k]);
    m->vals[k] = NULL;
  }
  for (int k = 0; k < n_params(m); k++) {
    size_t c = param_count(m, k);
    m->vals[k] = calloc(c ? c : 1, sizeof(float));
    assert_non_null(m->vals[k]);
  }
}

static const int64_t cnn_in[3] = {2, 9, 8};
static const int64_t cnn_conv[2][4] = {{3, 3, 2, 1}, {4, 2, 1, 0}};
static const int64_t cnn_fc[2] = {6, 3};

/* A network with convolutions is saved as the documented version-4 bytes
 * and loads back with its convolutions, values and outputs, bit for bit. */
static void conv_network_round_trip(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  ag_conv_layer conv[2];
  for (int i = 0; i < 2; i++)
    conv[i] = (ag_conv_layer){cnn_conv[i][0], cnn_conv[i][1], cnn_conv[i][2], cnn_conv[i][3]};
  ag_mlp *a, *b = SENTINEL;
  agt_ok(ag_mlp_create_conv(ctx, cnn_in, conv, 2, cnn_fc, 2, AG_ACT_RELU, AG_ACT_NONE, 17, &a));
  net ref = make_conv_net(cnn_in, cnn_conv, 2, cnn_fc, 2);
  for (int k = 0; k < n_params(&ref); k++) {
    free(ref.vals[k]);
    ref.vals[k] = agt_read_f32(ag_mlp_params(a)[k]);
  }
  agt_ok(ag_mlp_save(a, t.path));
  bytes want = ref_v3(&ref), got = read_bytes(t.path);
  assert_int_equal(got.n, want.n);
  assert_memory_equal(got.p, want.p, want.n);
  agt_ok(ag_mlp_load(ctx, t.path, &b));
  assert_int_equal(ag_mlp_n_conv(b), 2);
  for (int i = 0; i < 2; i++) {
    ag_conv_layer l;
    int64_t sh[3], sa[3];
    assert_int_equal(ag_mlp_conv(b, i, &l, sh), 0);
    assert_memory_equal(&l, &conv[i], sizeof l);
    assert_int_equal(ag_mlp_conv(a, i, NULL, sa), 0);
    assert_memory_equal(sh, sa, sizeof sh);
  }
  for (int k = 0; k < n_params(&ref); k++) {
    float *v = agt_read_f32(ag_mlp_params(b)[k]);
    assert_memory_equal(v, ref.vals[k], param_count(&ref, k) * sizeof(float));
    free(v);
  }
  const int64_t xr = 2 * 9 * 8, cols = 4;
  float *x = malloc((size_t)(xr * cols) * sizeof *x);
  assert_non_null(x);
  agt_rng r = {29};
  for (int64_t i = 0; i < xr * cols; i++) x[i] = agt_uniform(&r, -3, 3);
  ag_tensor *tx, *ya, *yb;
  agt_ok(ag_tensor_create(ctx, xr, cols, AG_F32, x, &tx));
  agt_ok(ag_mlp_forward(a, tx, &ya));
  agt_ok(ag_mlp_forward(b, tx, &yb));
  float *va = agt_read_f32(ya), *vb = agt_read_f32(yb);
  assert_memory_equal(va, vb, (size_t)(3 * cols) * sizeof(float));
  free(va), free(vb), free(x);
  ag_tensor_free(tx);
  free(want.p), free(got.p);
  free_net(&ref);
  ag_mlp_free(a), ag_mlp_free(b);
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

/* Files whose convolutions are not valid, or disagree with the version,
 * the linear sizes or the sections, are refused before anything is
 * allocated. */
static void conv_network_files_refused(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  tdir t;
  tdir_make(&t);
  net m = make_conv_net(cnn_in, cnn_conv, 2, cnn_fc, 2);
  bytes b = ref_v3(&m);
  ag_mlp *ok;
  write_bytes(t.path, b.p, b.n);
  agt_ok(ag_mlp_load(ctx, t.path, &ok)); /* the reference itself loads */
  ag_mlp_free(ok);
  free(b.p);
  /* a kernel larger than the image it meets */
  m.conv[1][1] = 9;
  refill(&m);
  b = ref_v3(&m);
  expect_refused(ctx, t.path, &b, b.n, AG_ERR_IO, "its convolutions are not valid", 1);
  free(b.p);
  m.conv[1][1] = 2;
  /* the linear layers' input is not the convolutions' output */
  m.sizes[0] += 1;
  refill(&m);
  b = ref_v3(&m);
  expect_refused(ctx, t.path, &b, b.n, AG_ERR_IO, "sizes[0] = 49, where the convolutions give 48", 1);
  free(b.p);
  m.sizes[0] -= 1;
  refill(&m);
  /* mlp.conv not whole layers */
  m.conv_values = 7;
  b = ref_v3(&m);
  expect_refused(ctx, t.path, &b, b.n, AG_ERR_IO, "mlp.conv 7", 1);
  free(b.p);
  m.conv_values = 0;
  /* version 3 with the keys of convolutions */
  m.version = 3;
  b = ref_v3(&m);
  expect_refused(ctx, t.path, &b, b.n, AG_ERR_IO, "mlp.version 3 with the keys of convolutions", 1);
  free(b.p);
  /* version 5: newer than this library */
  m.version = 5;
  b = ref_v3(&m);
  expect_refused(ctx, t.path, &b, b.n, AG_ERR_UNSUPPORTED, "reads versions up to 4", 1);
  free(b.p);
  free_net(&m);
  /* version 4 without them */
  const int64_t sizes[3] = {4, 5, 2};
  m = make_net(sizes, 3, AG_ACT_RELU, AG_ACT_NONE);
  m.version = 4;
  b = ref_v3(&m);
  expect_refused(ctx, t.path, &b, b.n, AG_ERR_IO, "mlp.in_shape", 1);
  free(b.p);
  free_net(&m);
  tdir_remove(&t);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reference_crc_is_crc32),
      cmocka_unit_test(round_trip),
      cmocka_unit_test(version1_loads),
      cmocka_unit_test(truncated_and_trailing),
      cmocka_unit_test(every_changed_byte_refused),
      cmocka_unit_test(nonfinite_refused),
      cmocka_unit_test(bad_activation_refused),
      cmocka_unit_test(huge_declarations_refused),
      cmocka_unit_test(stream_from_position),
      cmocka_unit_test(failed_saves_leave_the_old_file),
      cmocka_unit_test(nan_network_not_saved),
      cmocka_unit_test(conv_network_round_trip),
      cmocka_unit_test(conv_network_files_refused),
  };
  return agt_run(argc, argv, "mlp_file", tests, sizeof tests / sizeof tests[0]);
}
