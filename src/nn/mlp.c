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
#include "base/agfile.h"
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
 * A model file is an agrl container (docs/container.md) of kind "mlp":
 * keys mlp.version (3), mlp.sizes, mlp.hidden, mlp.last, and one f32
 * tensor section per parameter, W0 [sizes[1], sizes[0]], b0 [sizes[1], 1],
 * W1, ... in that order, column-major. Files of versions 1 and 2 (agrl
 * 0.1.0) are read through the container's reader too (agfile_legacy.c).
 * The values go between the device and the file in parts of at most
 * MLP_PART_BYTES; the loader refuses NaNs and infinities, and the saver
 * refuses to write them.
 */

#define MLP_VERSION 3
#define MLP_MAX_SIZES 64
#define MLP_PART_BYTES ((size_t)1 << 20)

/* Parameter k of a network of `sizes`: W_l [sizes[l+1], sizes[l]] or b_l [sizes[l+1], 1]. */
static int64_t param_rows(const int64_t *sizes, int k) { return sizes[k / 2 + 1]; }
static int64_t param_cols(const int64_t *sizes, int k) { return k % 2 ? 1 : sizes[k / 2]; }
static void param_name(int k, char name[16]) { snprintf(name, 16, "%c%d", k % 2 ? 'b' : 'W', k / 2); }

/* The index of the first NaN or infinity among n f32 values in host order,
 * or -1; *nan tells which. Bits, not isfinite: no compiler flag changes it. */
static int64_t first_nonfinite(const unsigned char *p, size_t n, int *nan) {
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, p + 4 * i, 4);
    if ((b & 0x7f800000u) == 0x7f800000u) {
      *nan = (b & 0x007fffffu) != 0;
      return (int64_t)i;
    }
  }
  return -1;
}

/* A save's source of parameter k's values. */
typedef struct mlp_src {
  const ag_mlp *m;
  int k;
  const char *path;
} mlp_src;

static ag_status mlp_fill(void *user, unsigned char *dst, uint64_t off, size_t len) {
  static const char fn[] = "ag_mlp_save";
  const mlp_src *src = user;
  void *dev;
  ag_status s = ag__tensor_ptr(src->m->params[src->k], &dev);
  if (!s) s = ag__mem_download_copy(src->m->ctx, fn, dst, (const char *)dev + off, len);
  if (s) return s;
  int nan;
  int64_t bad = first_nonfinite(dst, len / 4, &nan);
  if (bad < 0) return AG_OK;
  char name[16];
  param_name(src->k, name);
  return ag__fail(
      AG_ERR_STATE,
      "%s: parameter %s holds %s at element %lld; such a file would not load, so %s is left as it "
      "was",
      fn, name, nan ? "a NaN" : "an infinity", (long long)(off / 4 + (uint64_t)bad), src->path);
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
  mlp_src src[2 * (MLP_MAX_SIZES - 1)];
  ag__agf a;
  ag__agf_init(&a);
  ag__agf_set_str(&a, "kind", "mlp");
  ag__agf_set_i64(&a, "mlp.version", MLP_VERSION);
  ag__agf_set_i64s(&a, "mlp.sizes", m->sizes, (uint32_t)n);
  ag__agf_set_i64(&a, "mlp.hidden", (int64_t)m->hidden);
  ag__agf_set_i64(&a, "mlp.last", (int64_t)m->last);
  for (int k = 0; k < 2 * m->n_layers; k++) {
    char name[16];
    param_name(k, name);
    const int64_t dims[2] = {param_rows(m->sizes, k), param_cols(m->sizes, k)};
    src[k] = (mlp_src){m, k, path};
    ag__agf_add_tensor(&a, name, AG_F32, 2, dims, mlp_fill, &src[k]);
  }
  s = ag__agf_save(&a, path, MLP_PART_BYTES, fn);
  ag__agf_free(&a);
  return s;
}

/* A load's sink: the values of parameter `sec` to the device, checked finite. */
typedef struct mlp_dst {
  ag_mlp *m;
  const char *name;
  int64_t bad; /* the first NaN or infinity of the parameter being read, or -1 */
  int nan;
} mlp_dst;

static ag_status mlp_take(void *user, int sec, unsigned char *buf, uint64_t off, size_t len) {
  static const char fn[] = "ag_mlp_load";
  mlp_dst *d = user;
  ag_tensor *p = d->m->params[sec];
  if (off == 0) d->bad = -1;
  if (d->bad < 0) {
    d->bad = first_nonfinite(buf, len / 4, &d->nan);
    if (d->bad >= 0) d->bad += (int64_t)(off / 4);
  }
  void *dev;
  ag_status s = ag__tensor_ptr(p, &dev);
  if (!s) s = ag__mem_upload_copy(d->m->ctx, fn, (char *)dev + off, buf, len);
  if (s || d->bad < 0 || off + len < (uint64_t)(p->rows * p->cols) * 4) return s;
  char pname[16];
  param_name(sec, pname);
  return ag__fail(AG_ERR_IO,
                  "%s: %s is corrupt: parameter %s holds %s at element %lld (row %lld, column %lld)", fn,
                  d->name, pname, d->nan ? "a NaN" : "an infinity", (long long)d->bad,
                  (long long)(d->bad % p->rows), (long long)(d->bad / p->rows));
}

/* What the keys and sections of a describe: checked, before anything is made. */
static ag_status mlp_describe(const ag__agf *a, const char *name, int64_t *sizes, int *n_sizes,
                              int64_t *hidden, int64_t *last) {
  static const char fn[] = "ag_mlp_load";
  int64_t version;
  const int64_t *sz;
  uint32_t n;
  ag_status s = ag__agf_check_kind(a, "mlp", MLP_VERSION, &version, fn, name);
  if (!s) s = ag__agf_get_i64(a, "mlp.hidden", INT32_MIN, INT32_MAX, hidden, fn, name);
  if (!s) s = ag__agf_get_i64(a, "mlp.last", INT32_MIN, INT32_MAX, last, fn, name);
  if (!s && (!act_ok((ag_act)*hidden) || !act_ok((ag_act)*last)))
    s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: the %s activation code %d is not one of 0..3", fn, name,
                 act_ok((ag_act)*hidden) ? "last layer's" : "hidden layers'",
                 (int)(act_ok((ag_act)*hidden) ? *last : *hidden));
  if (!s) s = ag__agf_get_i64s(a, "mlp.sizes", MLP_MAX_SIZES, &sz, &n, fn, name);
  if (!s && n < 2)
    s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: n_sizes = %u, outside 2..%d", fn, name, n, MLP_MAX_SIZES);
  for (uint32_t i = 0; !s && i < n; i++)
    if (sz[i] < 1 || sz[i] > INT32_MAX)
      s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: sizes[%u] = %lld, outside 1..%d", fn, name, i,
                   (long long)sz[i], INT32_MAX);
  if (s) return s;
  memcpy(sizes, sz, n * sizeof *sz);
  *n_sizes = (int)n;
  if (a->n_sections != 2 * ((int)n - 1))
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: %d sections, where %u sizes make %u parameters", fn, name,
                    a->n_sections, n, 2 * (n - 1));
  for (int k = 0; k < a->n_sections; k++) {
    char pname[16];
    param_name(k, pname);
    const int64_t dims[2] = {param_rows(sizes, k), param_cols(sizes, k)};
    int at;
    if ((s = ag__agf_want_section(a, pname, AG_F32, 2, dims, &at, fn, name))) return s;
    if (at != k)
      return ag__fail(AG_ERR_IO, "%s: %s is corrupt: section %s is not parameter %d", fn, name, pname, k);
  }
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
  ag__agf a;
  int64_t sizes[MLP_MAX_SIZES], hidden = 0, last = 0;
  int n = 0;
  ag_status s = ag__agf_read_stream(&a, f, fn, name);
  if (!s) s = mlp_describe(&a, name, sizes, &n, &hidden, &last);
  ag_mlp *m = NULL;
  if (!s && (s = mlp_alloc(ctx, sizes, n, (ag_act)hidden, (ag_act)last, fn, &m)) == AG_ERR_OUT_OF_MEMORY) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    uint64_t bytes = 0;
    for (int k = 0; k < a.n_sections; k++) bytes += a.sections[k].bytes;
    s = ag__fail(s,
                 "%s: the parameters of %s (%.1f MB, and as much again for their gradients) do not fit: %s",
                 fn, name, AG__MB((double)bytes), why);
  }
  if (!s) {
    mlp_dst d = {m, name, -1, 0};
    s = ag__agf_stream(&a, f, mlp_take, &d, fn, name);
  }
  ag__agf_free(&a);
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
