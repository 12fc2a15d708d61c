/* mlp.c — multilayer perceptrons and target-network updates.
 *
 * A layer is W [out, in] and b [out, 1]; y = act(W x + b) for x [in, n].
 * Parameters are persistent tensors that require gradients. Initial values
 * come from a Philox stream on the host, so every device starts from the
 * same numbers.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "agrl/nn.h"
#include "nn/nn_internal.h"
#include "base/philox.h"

struct ag_mlp {
  ag_ctx *ctx;
  int n_layers;
  int64_t *sizes; /* n_layers + 1 */
  ag_act hidden, last;
  ag_tensor **params; /* 2 * n_layers: W0, b0, W1, b1 ... */
};

ag_status ag_activate(ag_tensor *x, ag_act act, ag_tensor **out) {
  switch (act) {
    case AG_ACT_NONE: {
      ag_status s = ag__check_tensor(x, "ag_activate", "x");
      if (s) return s;
      if (!out) return ag__fail(AG_ERR_INVALID_ARG, "ag_activate: out is NULL");
      *out = x;
      return AG_OK;
    }
    case AG_ACT_RELU: return ag_relu(x, out);
    case AG_ACT_TANH: return ag_tanh(x, out);
    case AG_ACT_SIGMOID: return ag_sigmoid(x, out);
    default: return ag__fail(AG_ERR_INVALID_ARG, "ag_activate: activation %d is unknown", (int)act);
  }
}

static int act_ok(ag_act a) { return a >= AG_ACT_NONE && a <= AG_ACT_SIGMOID; }

void ag_mlp_free(ag_mlp *m) {
  if (!m) return;
  for (int i = 0; m->params && i < 2 * m->n_layers; i++) ag_tensor_free(m->params[i]);
  free(m->params);
  free(m->sizes);
  free(m);
}

/* An MLP with uninitialised (zero) parameters. */
static ag_status mlp_alloc(ag_ctx *ctx, const int64_t *sizes, int n_sizes, ag_act hidden, ag_act last,
                           const char *fn, ag_mlp **out) {
  if (!ctx || !sizes || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, sizes and out must not be NULL", fn);
  if (n_sizes < 2)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_sizes = %d; give at least an input and an output size", fn,
                    n_sizes);
  for (int i = 0; i < n_sizes; i++)
    if (sizes[i] < 1 || sizes[i] > INT32_MAX)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: sizes[%d] = %lld must be a positive size", fn, i,
                      (long long)sizes[i]);
  if (!act_ok(hidden) || !act_ok(last))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: activation %d is unknown", fn,
                    act_ok(hidden) ? (int)last : (int)hidden);
  ag_mlp *m = ag__calloc(1, sizeof *m);
  if (!m) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  m->ctx = ctx;
  m->n_layers = n_sizes - 1;
  m->hidden = hidden;
  m->last = last;
  m->sizes = ag__malloc((size_t)n_sizes * sizeof *m->sizes);
  m->params = ag__calloc((size_t)(2 * m->n_layers), sizeof *m->params);
  if (!m->sizes || !m->params) {
    ag_mlp_free(m);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  memcpy(m->sizes, sizes, (size_t)n_sizes * sizeof *sizes);
  for (int l = 0; l < m->n_layers; l++) {
    ag_status s = ag_tensor_create(ctx, sizes[l + 1], sizes[l], AG_F32, NULL, &m->params[2 * l]);
    if (!s) s = ag_tensor_create(ctx, sizes[l + 1], 1, AG_F32, NULL, &m->params[2 * l + 1]);
    if (!s) s = ag_tensor_set_requires_grad(m->params[2 * l], 1);
    if (!s) s = ag_tensor_set_requires_grad(m->params[2 * l + 1], 1);
    if (s) {
      ag_mlp_free(m);
      return s;
    }
  }
  *out = m;
  return AG_OK;
}

ag_status ag_mlp_create(ag_ctx *ctx, const int64_t *sizes, int n_sizes, ag_act hidden, ag_act last,
                        uint64_t seed, ag_mlp **out) {
  ag_mlp *m;
  ag_status s = mlp_alloc(ctx, sizes, n_sizes, hidden, last, "ag_mlp_create", &m);
  if (s) return s;
  uint64_t draw = 0;
  for (int l = 0; l < m->n_layers && !s; l++) {
    float bound = 1.0f / sqrtf((float)sizes[l]);
    for (int k = 0; k < 2 && !s; k++) {
      ag_tensor *p = m->params[2 * l + k];
      size_t n = (size_t)(p->rows * p->cols);
      float *v = ag__malloc(n * sizeof *v);
      if (!v) {
        s = ag__fail(AG_ERR_OUT_OF_MEMORY, "ag_mlp_create: out of host memory");
        break;
      }
      for (size_t i = 0; i < n; i++) {
        double u = (double)(ag__philox_u64(seed, draw++) >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
        v[i] = (float)((2.0 * u - 1.0) * bound);
      }
      s = ag_tensor_write(p, v, n * sizeof *v);
      free(v);
    }
  }
  if (s) {
    ag_mlp_free(m);
    return s;
  }
  *out = m;
  return AG_OK;
}

ag_status ag_mlp_forward(ag_mlp *m, ag_tensor *x, ag_tensor **out) {
  static const char fn[] = "ag_mlp_forward";
  if (!m || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: mlp and out must not be NULL", fn);
  ag_status s = ag__check_tensor(x, fn, "x");
  if (s) return s;
  if (x->rows != m->sizes[0])
    return ag__fail(AG_ERR_SHAPE, "%s: x has %lld rows, the MLP takes %lld inputs", fn, (long long)x->rows,
                    (long long)m->sizes[0]);
  ag_tensor *h = x;
  for (int l = 0; l < m->n_layers; l++) {
    ag_tensor *z;
    ag_act act = l + 1 < m->n_layers ? m->hidden : m->last; /* ag_act and ag_bias_act_kind agree */
    if ((s = ag_matmul(m->params[2 * l], 0, h, 0, &z))) return s;
    if ((s = ag_bias_act(z, m->params[2 * l + 1], (ag_bias_act_kind)act, &h))) return s;
  }
  *out = h;
  return AG_OK;
}

void ag__mlp_acts(const ag_mlp *m, ag_act *hidden, ag_act *last) {
  *hidden = m->hidden;
  *last = m->last;
}

int ag_mlp_n_params(const ag_mlp *m) { return m ? 2 * m->n_layers : 0; }
ag_tensor *const *ag_mlp_params(const ag_mlp *m) { return m ? m->params : NULL; }
int64_t ag_mlp_in(const ag_mlp *m) { return m ? m->sizes[0] : 0; }
int64_t ag_mlp_out(const ag_mlp *m) { return m ? m->sizes[m->n_layers] : 0; }

/* ---- target networks ---- */

static ag_status same_sizes(const ag_mlp *a, const ag_mlp *b, const char *fn) {
  if (!a || !b) return ag__fail(AG_ERR_INVALID_ARG, "%s: dst and src must not be NULL", fn);
  if (a->ctx != b->ctx) return ag__fail(AG_ERR_INVALID_ARG, "%s: the MLPs belong to different contexts", fn);
  if (a->n_layers != b->n_layers || memcmp(a->sizes, b->sizes, (size_t)(a->n_layers + 1) * sizeof *a->sizes))
    return ag__fail(AG_ERR_SHAPE, "%s: the MLPs have different sizes", fn);
  return AG_OK;
}

/* dst_i = a * src_i + b * dst_i for every parameter, in launches of AG__MT_MAX. */
static ag_status axpby(ag_mlp *dst, const ag_mlp *src, float a, float b, const char *fn) {
  ag_status s = same_sizes(dst, src, fn);
  if (s) return s;
  int n = 2 * dst->n_layers;
  /* every parameter resident first (after a device switch each is uploaded
   * here): with more than AG__MT_MAX of them the launches below are several,
   * and past this loop only the device can fail between them */
  for (int k = 0; k < n; k++) {
    void *p;
    if ((s = ag__tensor_ptr(dst->params[k], &p)) || (s = ag__tensor_ptr(src->params[k], &p))) return s;
  }
  for (int k0 = 0; k0 < n; k0 += AG__MT_MAX) {
    ag__axpby_args x;
    memset(&x, 0, sizeof x);
    x.a = a;
    x.b = b;
    for (int k = k0; k < n && k < k0 + AG__MT_MAX; k++) {
      void *pd, *ps;
      if ((s = ag__tensor_ptr(dst->params[k], &pd)) || (s = ag__tensor_ptr(src->params[k], &ps))) return s;
      ag__mt_entry e = {pd, ps, NULL, NULL, dst->params[k]->rows * dst->params[k]->cols};
      x.t[x.count++] = e;
    }
    if ((s = ag__run(dst->ctx, AG__K_AXPBY, &x, sizeof x))) return s;
  }
  return AG_OK;
}

ag_status ag_mlp_copy(ag_mlp *dst, const ag_mlp *src) { return axpby(dst, src, 1.0f, 0.0f, "ag_mlp_copy"); }

ag_status ag_mlp_polyak(ag_mlp *dst, const ag_mlp *src, float tau) {
  if (!(tau >= 0.0f && tau <= 1.0f))
    return ag__fail(AG_ERR_INVALID_ARG, "ag_mlp_polyak: tau = %g must be in [0, 1]", (double)tau);
  return axpby(dst, src, tau, 1.0f - tau, "ag_mlp_polyak");
}

/* ---- files ----
 *
 * The layouts (versions 1 and 2) are given byte by byte beside ag_mlp_save
 * in agrl/nn.h. Every field is little-endian, written and read byte by byte
 * whatever the host's order. The loader checks the whole header against
 * the file's length before it allocates anything, so what it allocates is
 * bounded by the size of the file; the values then go to the device in
 * parts of at most MLP_PART_BYTES through one host buffer, each part
 * checked on the way (CRC-32, finite values).
 */

#define MLP_MAX_SIZES 64
#define MLP_PART_BYTES ((size_t)1 << 20)
#define MLP_V1_FIXED 20 /* magic, n_sizes, hidden, last */
#define MLP_V2_FIXED 24 /* the same and a reserved word, so that the sizes start at an 8-byte offset */
#define MLP_HEADER_MAX (MLP_V2_FIXED + 8 * MLP_MAX_SIZES + 4)

/* "AGRLMLP" then the version as a digit: '1' or '2'. */
static const char mlp_magic[7] = {'A', 'G', 'R', 'L', 'M', 'L', 'P'};

/* Turns n f32 values between the host's byte order and the file's
 * (little-endian): nothing to do on a little-endian host. */
static void f32_file_order(unsigned char *p, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (size_t i = 0; i < n; i++, p += 4) {
    unsigned char t = p[0];
    p[0] = p[3], p[3] = t, t = p[1], p[1] = p[2], p[2] = t;
  }
#else
  (void)p, (void)n;
#endif
}

/* The index of the first NaN or infinity among n f32 values in file order,
 * or -1; *nan tells which. Bits, not isfinite: no compiler flag changes it. */
static int64_t first_nonfinite(const unsigned char *p, size_t n, int *nan) {
  for (size_t i = 0; i < n; i++) {
    uint32_t b = ag__get32(p + 4 * i);
    if ((b & 0x7f800000u) == 0x7f800000u) {
      *nan = (b & 0x007fffffu) != 0;
      return (int64_t)i;
    }
  }
  return -1;
}

/* Parameter k of a network of `sizes`: W_l [sizes[l+1], sizes[l]] or b_l [sizes[l+1], 1]. */
static int64_t param_rows(const int64_t *sizes, int k) { return sizes[k / 2 + 1]; }
static int64_t param_cols(const int64_t *sizes, int k) { return k % 2 ? 1 : sizes[k / 2]; }
static void param_name(int k, char name[16]) { snprintf(name, 16, "%c%d", k % 2 ? 'b' : 'W', k / 2); }

/* Bytes of the largest parameter, at most MLP_PART_BYTES: the host buffer
 * that every part goes through. */
static size_t part_bytes(const int64_t *sizes, int n_params) {
  size_t most = 4;
  for (int k = 0; k < n_params; k++) {
    uint64_t n = (uint64_t)param_rows(sizes, k) * (uint64_t)param_cols(sizes, k); /* < 2^62 */
    if (n >= MLP_PART_BYTES / 4) return MLP_PART_BYTES;
    if (4 * (size_t)n > most) most = 4 * (size_t)n;
  }
  return most;
}

ag_status ag_mlp_save(const ag_mlp *m, const char *path) {
  static const char fn[] = "ag_mlp_save";
  if (!m || !path) return ag__fail(AG_ERR_INVALID_ARG, "%s: mlp and path must not be NULL", fn);
  int n = m->n_layers + 1;
  if (n > MLP_MAX_SIZES)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: the MLP has %d sizes; a model file holds at most %d", fn, n,
                    MLP_MAX_SIZES);
  ag_status s = ag__not_recording(m->ctx, fn);
  if (s) return s;

  unsigned char hdr[MLP_HEADER_MAX];
  size_t hbytes = MLP_V2_FIXED + 8 * (size_t)n + 4;
  memcpy(hdr, mlp_magic, 7);
  hdr[7] = '2';
  ag__put32(hdr + 8, (uint32_t)n);
  ag__put32(hdr + 12, (uint32_t)m->hidden);
  ag__put32(hdr + 16, (uint32_t)m->last);
  ag__put32(hdr + 20, 0);
  for (int i = 0; i < n; i++) ag__put64(hdr + MLP_V2_FIXED + 8 * i, (uint64_t)m->sizes[i]);
  ag__put32(hdr + hbytes - 4, ag__crc32_add(0, hdr, hbytes - 4));

  /* the part buffer first: a host that cannot give it leaves the disk alone */
  size_t part = part_bytes(m->sizes, 2 * m->n_layers);
  unsigned char *buf = ag__malloc(part);
  if (!buf) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag__afile a;
  if ((s = ag__afile_open(&a, path, fn))) {
    free(buf);
    return s;
  }
  int wrote = fwrite(hdr, 1, hbytes, a.f) == hbytes;
  for (int k = 0; wrote && !s && k < 2 * m->n_layers; k++) {
    ag_tensor *p = m->params[k];
    size_t bytes = (size_t)(p->rows * p->cols) * 4;
    void *dev;
    uint32_t crc = 0;
    if ((s = ag__tensor_ptr(p, &dev))) break;
    for (size_t off = 0; off < bytes && !s && wrote; off += part) {
      size_t len = bytes - off < part ? bytes - off : part;
      if ((s = ag__mem_download_copy(m->ctx, fn, buf, (const char *)dev + off, len))) break;
      f32_file_order(buf, len / 4);
      int nan;
      int64_t bad = first_nonfinite(buf, len / 4, &nan);
      if (bad >= 0) {
        char name[16];
        param_name(k, name);
        s = ag__fail(AG_ERR_STATE,
                     "%s: parameter %s holds %s at element %lld; such a file would not load, so "
                     "%s is left as it was",
                     fn, name, nan ? "a NaN" : "an infinity", (long long)(off / 4 + (size_t)bad), path);
        break;
      }
      crc = ag__crc32_add(crc, buf, len);
      wrote = fwrite(buf, 1, len, a.f) == len;
    }
    unsigned char c[4];
    ag__put32(c, crc);
    if (!s && wrote) wrote = fwrite(c, 1, 4, a.f) == 4;
  }
  free(buf);
  if (!s && !wrote)
    s = ag__fail(AG_ERR_IO, "%s: writing beside %s failed: %s (the file is unchanged)", fn, path,
                 strerror(errno));
  if (s) {
    ag__afile_abort(&a);
    return s;
  }
  return ag__afile_commit(&a, fn);
}

/* What a header says, once checked. */
typedef struct mlp_header {
  int version;
  int n_sizes;
  int32_t hidden, last;
  int64_t sizes[MLP_MAX_SIZES];
  int64_t data_at; /* offset of the first value (from the start of the stream) */
} mlp_header;

/* Reads exactly n bytes; the length was checked, so a short read means a
 * read error or a file that shrank meanwhile. */
static ag_status read_exact(FILE *f, void *dst, size_t n, const char *name) {
  if (fread(dst, 1, n, f) == n) return AG_OK;
  if (ferror(f)) return ag__fail(AG_ERR_IO, "ag_mlp_load: reading %s failed: %s", name, strerror(errno));
  return ag__fail(
      AG_ERR_IO, "ag_mlp_load: %s is truncated: it ended before the length it had when the load began", name);
}

/* Reads and checks the header of a stream of `len` bytes: the magic and
 * version, n_sizes, (version 2) the header's CRC-32 and reserved word, the
 * activations, every size, and that the values the sizes describe (with
 * their CRCs in version 2) end exactly where the stream ends. */
static ag_status read_header(FILE *f, const char *name, int64_t len, mlp_header *h) {
  static const char fn[] = "ag_mlp_load";
  unsigned char hb[MLP_HEADER_MAX];
  size_t got = len < MLP_V1_FIXED ? (size_t)len : MLP_V1_FIXED;
  ag_status s = read_exact(f, hb, got, name);
  if (s) return s;
  if (memcmp(hb, mlp_magic, got < 7 ? got : 7) != 0)
    return ag__fail(AG_ERR_IO, "%s: %s is not an agrl MLP file (it does not begin with \"AGRLMLP\")", fn,
                    name);
  if (got < 8)
    return ag__fail(AG_ERR_IO, "%s: %s is truncated: %lld bytes, shorter than the 8-byte magic", fn, name,
                    (long long)len);
  if (hb[7] == '1' || hb[7] == '2') {
    h->version = hb[7] - '0';
  } else if (hb[7] >= '3' && hb[7] <= '9') {
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: %s is an agrl MLP file of version %c, which this library cannot read "
                    "(it reads versions 1 and 2)",
                    fn, name, hb[7]);
  } else {
    return ag__fail(AG_ERR_IO, "%s: %s is not an agrl MLP file (byte 7, 0x%02x, is not a version number)", fn,
                    name, hb[7]);
  }
  int64_t fixed = h->version == 1 ? MLP_V1_FIXED : MLP_V2_FIXED;
  if (len < fixed)
    return ag__fail(AG_ERR_IO,
                    "%s: %s is truncated: %lld bytes, shorter than the %lld-byte start of a version-%d "
                    "header",
                    fn, name, (long long)len, (long long)fixed, h->version);
  if ((s = read_exact(f, hb + got, (size_t)fixed - got, name))) return s;
  int32_t n = (int32_t)ag__get32(hb + 8);
  if (n < 2 || n > MLP_MAX_SIZES)
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: n_sizes = %d, outside 2..%d", fn, name, (int)n,
                    MLP_MAX_SIZES);
  int64_t hbytes = fixed + 8 * (int64_t)n + (h->version == 2 ? 4 : 0);
  if (len < hbytes)
    return ag__fail(AG_ERR_IO,
                    "%s: %s is truncated: %lld bytes, shorter than the %lld-byte header of %d sizes", fn,
                    name, (long long)len, (long long)hbytes, (int)n);
  if ((s = read_exact(f, hb + fixed, (size_t)(hbytes - fixed), name))) return s;
  if (h->version == 2) {
    uint32_t stored = ag__get32(hb + hbytes - 4), computed = ag__crc32_add(0, hb, (size_t)hbytes - 4);
    if (stored != computed)
      return ag__fail(AG_ERR_IO,
                      "%s: %s is corrupt: its header fails its CRC-32 check (stored %08x, computed %08x)", fn,
                      name, (unsigned)stored, (unsigned)computed);
    if (ag__get32(hb + 20) != 0)
      return ag__fail(AG_ERR_IO, "%s: %s is corrupt: the reserved header word at byte 20 is %u, not 0", fn,
                      name, (unsigned)ag__get32(hb + 20));
  }
  h->n_sizes = n;
  h->hidden = (int32_t)ag__get32(hb + 12);
  h->last = (int32_t)ag__get32(hb + 16);
  if (!act_ok((ag_act)h->hidden) || !act_ok((ag_act)h->last))
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: the %s activation code %d is not one of 0..3", fn, name,
                    act_ok((ag_act)h->hidden) ? "last layer's" : "hidden layers'",
                    (int)(act_ok((ag_act)h->hidden) ? h->last : h->hidden));
  for (int i = 0; i < n; i++) {
    int64_t v = (int64_t)ag__get64(hb + fixed + 8 * i);
    if (v < 1 || v > INT32_MAX)
      return ag__fail(AG_ERR_IO, "%s: %s is corrupt: sizes[%d] = %lld, outside 1..%d", fn, name, i,
                      (long long)v, INT32_MAX);
    h->sizes[i] = v;
  }
  /* the values: < 2^62 a weight matrix, at most 126 of them; the sum is
   * checked against 2^63 step by step */
  int64_t total = hbytes, per_crc = h->version == 2 ? 4 : 0;
  for (int k = 0; k < 2 * (n - 1); k++) {
    int64_t count = param_rows(h->sizes, k) * param_cols(h->sizes, k);
    if (count > (INT64_MAX - per_crc - total) / 4)
      return ag__fail(AG_ERR_IO, "%s: %s is corrupt: its sizes describe more than 2^63 bytes of parameters",
                      fn, name);
    total += 4 * count + per_crc;
  }
  if (len < total)
    return ag__fail(AG_ERR_IO,
                    "%s: %s is truncated: %lld bytes, where its header's sizes need %lld (%lld missing)", fn,
                    name, (long long)len, (long long)total, (long long)(total - len));
  if (len > total)
    return ag__fail(AG_ERR_IO,
                    "%s: %s is corrupt: %lld trailing bytes follow the %lld bytes its header describes", fn,
                    name, (long long)(len - total), (long long)total);
  h->data_at = hbytes;
  return AG_OK;
}

ag_status ag__mlp_load_stream(ag_ctx *ctx, FILE *f, const char *name, ag_mlp **out);

/* Loads from f's current position to its end; the entry of ag_mlp_load and
 * of the fuzzer (which feeds it memory through fmemopen). */
ag_status ag__mlp_load_stream(ag_ctx *ctx, FILE *f, const char *name, ag_mlp **out) {
  static const char fn[] = "ag_mlp_load";
  if (!ctx || !f || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, the file and out must not be NULL", fn);
  if (!name) name = "the stream";
  uint64_t left = 0;
  ag_status s = ag__stream_left(f, fn, name, "a model", &left);
  if (s) return s;
  mlp_header h;
  s = read_header(f, name, (int64_t)left, &h);
  if (s) return s;

  int n_params = 2 * (h.n_sizes - 1);
  size_t part = part_bytes(h.sizes, n_params);
  unsigned char *buf = ag__malloc(part);
  if (!buf) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag_mlp *m = NULL;
  if ((s = mlp_alloc(ctx, h.sizes, h.n_sizes, (ag_act)h.hidden, (ag_act)h.last, fn, &m))) {
    free(buf);
    if (s != AG_ERR_OUT_OF_MEMORY) return s;
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    double mb = AG__MB((double)((int64_t)left - h.data_at));
    return ag__fail(
        s, "%s: the parameters of %s (%.1f MB, and as much again for their gradients) do not fit: %s", fn,
        name, mb, why);
  }
  for (int k = 0; k < n_params && !s; k++) {
    ag_tensor *p = m->params[k];
    size_t bytes = (size_t)(p->rows * p->cols) * 4;
    void *dev;
    uint32_t crc = 0;
    int64_t bad = -1;
    int nan = 0;
    if ((s = ag__tensor_ptr(p, &dev))) break;
    for (size_t off = 0; off < bytes && !s; off += part) {
      size_t len = bytes - off < part ? bytes - off : part;
      if ((s = read_exact(f, buf, len, name))) break;
      crc = ag__crc32_add(crc, buf, len);
      if (bad < 0) {
        bad = first_nonfinite(buf, len / 4, &nan);
        if (bad >= 0) bad += (int64_t)(off / 4);
      }
      f32_file_order(buf, len / 4);
      s = ag__mem_upload_copy(ctx, fn, (char *)dev + off, buf, len);
    }
    if (s) break;
    char pname[16];
    param_name(k, pname);
    /* a checksum that fails says more than the NaN a flipped bit may make */
    if (h.version == 2) {
      unsigned char c[4];
      if ((s = read_exact(f, c, 4, name))) break;
      if (ag__get32(c) != crc) {
        s = ag__fail(AG_ERR_IO,
                     "%s: %s is corrupt: parameter %s fails its CRC-32 check (stored %08x, computed %08x)",
                     fn, name, pname, (unsigned)ag__get32(c), (unsigned)crc);
        break;
      }
    }
    if (bad >= 0)
      s = ag__fail(AG_ERR_IO,
                   "%s: %s is corrupt: parameter %s holds %s at element %lld (row %lld, column %lld)", fn,
                   name, pname, nan ? "a NaN" : "an infinity", (long long)bad, (long long)(bad % p->rows),
                   (long long)(bad / p->rows));
  }
  free(buf);
  if (s) {
    ag_mlp_free(m);
    return s;
  }
  *out = m;
  return AG_OK;
}

ag_status ag_mlp_load(ag_ctx *ctx, const char *path, ag_mlp **out) {
  static const char fn[] = "ag_mlp_load";
  if (!ctx || !path || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  FILE *f;
  ag_status s = ag__open_read(path, fn, &f);
  if (s) return s;
  s = ag__mlp_load_stream(ctx, f, path, out);
  fclose(f);
  return s;
}
