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

#define MLP_VERSION 3      /* an MLP's files */
#define MLP_VERSION_CONV 4 /* a network with convolutions */
#define MLP_MAX_SIZES 64
#define MLP_PART_BYTES ((size_t)1 << 20)

struct ag_mlp {
  ag_ctx *ctx;
  int n_conv; /* convolutions in front (0: an MLP) */
  ag_conv_layer conv[AG_MAX_CONV];
  int64_t shape[AG_MAX_CONV + 1][3]; /* conv i's input {C, H, W}; shape[n_conv]: the last one's output */
  int n_layers;                      /* linear layers */
  int64_t *sizes;                    /* n_layers + 1; sizes[0] = C*H*W of shape[n_conv] */
  ag_act hidden, last;
  int n_params;       /* 2 * (n_conv + n_layers) */
  ag_tensor **params; /* w0, b0, ... of the convolutions, then W0, b0, W1, b1 ... */
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
  for (int i = 0; m->params && i < m->n_params; i++) ag_tensor_free(m->params[i]);
  free(m->params);
  free(m->sizes);
  free(m);
}

/* The shapes of the convolutions of a network over in_shape (checked as
 * ag_mlp_create_conv documents): shape[i] the input of layer i,
 * shape[n_conv] the last one's output. */
ag_status ag__conv_shapes(const int64_t in_shape[3], const ag_conv_layer *conv, int n_conv,
                          int64_t (*shape)[3], const char *fn) {
  const int64_t big = INT32_MAX, small = 65535;
  if (n_conv < 1 || n_conv > AG_MAX_CONV)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_conv = %d must be in 1..%d", fn, n_conv, AG_MAX_CONV);
  for (int d = 0; d < 3; d++)
    if (in_shape[d] < 1 || in_shape[d] > big)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: in_shape = {%lld, %lld, %lld}: each must be in 1..2^31-1", fn,
                      (long long)in_shape[0], (long long)in_shape[1], (long long)in_shape[2]);
  memcpy(shape[0], in_shape, 3 * sizeof *in_shape);
  for (int i = 0; i < n_conv; i++) {
    const ag_conv_layer *c = &conv[i];
    const int64_t C = shape[i][0], H = shape[i][1], W = shape[i][2];
    if (c->channels < 1 || c->channels > big || c->kernel < 1 || c->kernel > small || c->stride < 1 ||
        c->stride > small || c->pad < 0 || c->pad > small)
      return ag__fail(AG_ERR_INVALID_ARG,
                      "%s: conv[%d] = {channels %lld, kernel %lld, stride %lld, pad %lld}: channels must be "
                      "in 1..2^31-1, kernel and stride in 1..65535, pad in 0..65535",
                      fn, i, (long long)c->channels, (long long)c->kernel, (long long)c->stride,
                      (long long)c->pad);
    if (c->kernel > H + 2 * c->pad || c->kernel > W + 2 * c->pad)
      return ag__fail(AG_ERR_INVALID_ARG,
                      "%s: conv[%d]'s %lldx%lld kernel is larger than the %lldx%lld image it meets, padded "
                      "by %lld",
                      fn, i, (long long)c->kernel, (long long)c->kernel, (long long)H, (long long)W,
                      (long long)c->pad);
    const int64_t Ho = (H + 2 * c->pad - c->kernel) / c->stride + 1,
                  Wo = (W + 2 * c->pad - c->kernel) / c->stride + 1;
    size_t chw = 0, ckk = 0, kout = 0, cols = 0;
    if (!ag__mul3((uint64_t)C, (uint64_t)H, (uint64_t)W, &chw) || chw > (size_t)big ||
        !ag__mul3((uint64_t)C, (uint64_t)c->kernel, (uint64_t)c->kernel, &ckk) || ckk > (size_t)big ||
        !ag__mul3((uint64_t)c->channels, (uint64_t)Ho, (uint64_t)Wo, &kout) || kout > (size_t)big ||
        !ag__mul3((uint64_t)Ho, (uint64_t)Wo, ckk, &cols) || cols > (size_t)big)
      return ag__fail(AG_ERR_UNSUPPORTED,
                      "%s: conv[%d] on a %lldx%lldx%lld image: its image, filters, output or im2col matrix "
                      "is beyond 2^31 - 1 values",
                      fn, i, (long long)C, (long long)H, (long long)W);
    shape[i + 1][0] = c->channels, shape[i + 1][1] = Ho, shape[i + 1][2] = Wo;
  }
  return AG_OK;
}

int ag__net_dims(const ag_conv_layer *conv, const int64_t (*shape)[3], int n_conv, const int64_t *sizes,
                 int n_sizes, int64_t (*dims)[2], int max) {
  int n = 0;
  for (int i = 0; i < n_conv; i++, n += 2)
    if (n + 1 < max) {
      dims[n][0] = shape[i][0] * conv[i].kernel * conv[i].kernel, dims[n][1] = conv[i].channels;
      dims[n + 1][0] = conv[i].channels, dims[n + 1][1] = 1;
    }
  for (int l = 0; l + 1 < n_sizes; l++, n += 2)
    if (n + 1 < max) {
      dims[n][0] = sizes[l + 1], dims[n][1] = sizes[l];
      dims[n + 1][0] = sizes[l + 1], dims[n + 1][1] = 1;
    }
  return n;
}

/* A network with uninitialised (zero) parameters: n_conv convolutions (0:
 * an MLP; conv and in_shape then unused) in front of the linear layers of
 * sizes (sizes[0] their input: the convolutions' output when n_conv > 0). */
static ag_status mlp_alloc(ag_ctx *ctx, const int64_t *in_shape, const ag_conv_layer *conv, int n_conv,
                           const int64_t *sizes, int n_sizes, ag_act hidden, ag_act last, const char *fn,
                           ag_mlp **out) {
  if (!ctx || !sizes || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, sizes and out must not be NULL", fn);
  int64_t shape[AG_MAX_CONV + 1][3];
  if (n_conv) {
    ag_status s = ag__conv_shapes(in_shape, conv, n_conv, shape, fn);
    if (s) return s;
    if (sizes[0] != shape[n_conv][0] * shape[n_conv][1] * shape[n_conv][2])
      return ag__fail(
          AG_ERR_INVALID_ARG, "%s: the linear layers take %lld inputs, the convolutions give %lld", fn,
          (long long)sizes[0], (long long)(shape[n_conv][0] * shape[n_conv][1] * shape[n_conv][2]));
  }
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
  m->n_conv = n_conv;
  if (n_conv) {
    memcpy(m->conv, conv, (size_t)n_conv * sizeof *conv);
    memcpy(m->shape, shape, (size_t)(n_conv + 1) * sizeof *shape);
  }
  m->n_layers = n_sizes - 1;
  m->hidden = hidden;
  m->last = last;
  m->n_params = 2 * (n_conv + m->n_layers);
  m->sizes = ag__malloc((size_t)n_sizes * sizeof *m->sizes);
  m->params = ag__calloc((size_t)m->n_params, sizeof *m->params);
  if (!m->sizes || !m->params) {
    ag_mlp_free(m);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  memcpy(m->sizes, sizes, (size_t)n_sizes * sizeof *sizes);
  int64_t(*dims)[2] = ag__malloc((size_t)m->n_params * sizeof *dims);
  if (!dims) {
    ag_mlp_free(m);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  ag__net_dims(m->conv, (const int64_t(*)[3])m->shape, n_conv, sizes, n_sizes, dims, m->n_params);
  for (int k = 0; k < m->n_params; k++) {
    ag_status s = ag_tensor_create(ctx, dims[k][0], dims[k][1], AG_F32, NULL, &m->params[k]);
    if (!s) s = ag_tensor_set_requires_grad(m->params[k], 1);
    if (s) {
      free(dims);
      ag_mlp_free(m);
      return s;
    }
  }
  free(dims);
  *out = m;
  return AG_OK;
}

/* Fills m's parameters from the Philox stream of seed: each layer's weight
 * and bias uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)]. */
static ag_status mlp_init(ag_mlp *m, uint64_t seed, const char *fn) {
  ag_status s = AG_OK;
  uint64_t draw = 0;
  for (int l = 0; l < m->n_conv + m->n_layers && !s; l++) {
    /* a weight is [fan_in, K] for a convolution, [out, fan_in] for a linear layer */
    ag_tensor *w = m->params[2 * l];
    float bound = 1.0f / sqrtf((float)(l < m->n_conv ? w->rows : w->cols));
    for (int k = 0; k < 2 && !s; k++) {
      ag_tensor *p = m->params[2 * l + k];
      size_t n = (size_t)(p->rows * p->cols);
      float *v = ag__malloc(n * sizeof *v);
      if (!v) {
        s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
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
  return s;
}

ag_status ag_mlp_create(ag_ctx *ctx, const int64_t *sizes, int n_sizes, ag_act hidden, ag_act last,
                        uint64_t seed, ag_mlp **out) {
  static const char fn[] = "ag_mlp_create";
  ag_mlp *m = NULL;
  ag_status s = mlp_alloc(ctx, NULL, NULL, 0, sizes, n_sizes, hidden, last, fn, &m);
  if (!s && (s = mlp_init(m, seed, fn))) ag_mlp_free(m);
  if (!s) *out = m;
  return s;
}

ag_status ag_mlp_create_conv(ag_ctx *ctx, const int64_t in_shape[3], const ag_conv_layer *conv, int n_conv,
                             const int64_t *fc, int n_fc, ag_act hidden, ag_act last, uint64_t seed,
                             ag_mlp **out) {
  static const char fn[] = "ag_mlp_create_conv";
  if (!ctx || !in_shape || !conv || !fc || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, in_shape, conv, fc and out must not be NULL", fn);
  if (n_fc < 1 || n_fc + 1 > MLP_MAX_SIZES)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n_fc = %d must be in 1..%d", fn, n_fc, MLP_MAX_SIZES - 1);
  int64_t shape[AG_MAX_CONV + 1][3], sizes[MLP_MAX_SIZES];
  ag_status s = ag__conv_shapes(in_shape, conv, n_conv, shape, fn);
  if (s) return s;
  sizes[0] = shape[n_conv][0] * shape[n_conv][1] * shape[n_conv][2];
  memcpy(sizes + 1, fc, (size_t)n_fc * sizeof *fc);
  ag_mlp *m = NULL;
  s = mlp_alloc(ctx, in_shape, conv, n_conv, sizes, n_fc + 1, hidden, last, fn, &m);
  if (!s && (s = mlp_init(m, seed, fn))) ag_mlp_free(m);
  if (!s) *out = m;
  return s;
}

int ag_mlp_n_conv(const ag_mlp *m) { return m ? m->n_conv : 0; }

int ag_mlp_conv(const ag_mlp *m, int i, ag_conv_layer *out, int64_t in_shape[3]) {
  if (!m || i < 0 || i >= m->n_conv) return -1;
  if (out) *out = m->conv[i];
  if (in_shape) memcpy(in_shape, m->shape[i], 3 * sizeof *in_shape);
  return 0;
}

ag_status ag_mlp_forward(ag_mlp *m, ag_tensor *x, ag_tensor **out) {
  static const char fn[] = "ag_mlp_forward";
  if (!m || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: mlp and out must not be NULL", fn);
  ag_status s = ag__check_tensor(x, fn, "x");
  if (s) return s;
  if (x->rows != ag_mlp_in(m))
    return ag__fail(AG_ERR_SHAPE, "%s: x has %lld rows, the MLP takes %lld inputs", fn, (long long)x->rows,
                    (long long)ag_mlp_in(m));
  ag_tensor *h = x;
  for (int i = 0; i < m->n_conv; i++) {
    const ag_conv2d_geom g = {m->shape[i][0],    m->shape[i][1],    m->shape[i][2], m->conv[i].kernel,
                              m->conv[i].kernel, m->conv[i].stride, m->conv[i].pad};
    ag_tensor *z;
    if ((s = ag_conv2d(h, &g, m->params[2 * i], m->params[2 * i + 1], &z))) return s;
    if ((s = ag_activate(z, m->hidden, &h))) return s;
  }
  ag_tensor *const *lin = m->params + 2 * m->n_conv;
  for (int l = 0; l < m->n_layers; l++) {
    ag_tensor *z;
    ag_act act = l + 1 < m->n_layers ? m->hidden : m->last; /* ag_act and ag_bias_act_kind agree */
    if ((s = ag_matmul(lin[2 * l], 0, h, 0, &z))) return s;
    if ((s = ag_bias_act(z, lin[2 * l + 1], (ag_bias_act_kind)act, &h))) return s;
  }
  *out = h;
  return AG_OK;
}

void ag__mlp_acts(const ag_mlp *m, ag_act *hidden, ag_act *last) {
  *hidden = m->hidden;
  *last = m->last;
}

int ag_mlp_n_params(const ag_mlp *m) { return m ? m->n_params : 0; }
ag_tensor *const *ag_mlp_params(const ag_mlp *m) { return m ? m->params : NULL; }
int64_t ag_mlp_in(const ag_mlp *m) {
  if (!m) return 0;
  return m->n_conv ? m->shape[0][0] * m->shape[0][1] * m->shape[0][2] : m->sizes[0];
}
int64_t ag_mlp_out(const ag_mlp *m) { return m ? m->sizes[m->n_layers] : 0; }

/* ---- target networks ---- */

static ag_status same_sizes(const ag_mlp *a, const ag_mlp *b, const char *fn) {
  if (!a || !b) return ag__fail(AG_ERR_INVALID_ARG, "%s: dst and src must not be NULL", fn);
  if (a->ctx != b->ctx) return ag__fail(AG_ERR_INVALID_ARG, "%s: the MLPs belong to different contexts", fn);
  if (a->n_layers != b->n_layers ||
      memcmp(a->sizes, b->sizes, (size_t)(a->n_layers + 1) * sizeof *a->sizes) || a->n_conv != b->n_conv ||
      memcmp(a->conv, b->conv, (size_t)a->n_conv * sizeof *a->conv) ||
      (a->n_conv && memcmp(a->shape, b->shape, sizeof a->shape[0])))
    return ag__fail(AG_ERR_SHAPE, "%s: the networks have different sizes or convolutions", fn);
  return AG_OK;
}

/* dst_i = a * src_i + b * dst_i for every parameter, in launches of AG__MT_MAX. */
static ag_status axpby(ag_mlp *dst, const ag_mlp *src, float a, float b, const char *fn) {
  ag_status s = same_sizes(dst, src, fn);
  if (s) return s;
  int n = dst->n_params;
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
 * W1, ... in that order, column-major. A network with convolutions is
 * mlp.version 4, with the keys mlp.in_shape {C, H, W} and mlp.conv (4
 * values a layer: channels, kernel, stride, pad) and the sections conv0.w,
 * conv0.b, conv1.w ... before W0 (mlp.sizes[0] the convolutions' output).
 * Files of versions 1 and 2 (agrl 0.1.0) are read through the container's
 * reader too (agfile_legacy.c). The values go between the device and the
 * file in parts of at most MLP_PART_BYTES; the loader refuses NaNs and
 * infinities, and the saver refuses to write them.
 */

/* The name of parameter k of a network of n_conv convolutions. */
static void param_name(int k, int n_conv, char name[24]) {
  if (k < 2 * n_conv)
    snprintf(name, 24, "conv%d.%c", k / 2, k % 2 ? 'b' : 'w');
  else
    snprintf(name, 24, "%c%d", k % 2 ? 'b' : 'W', (k - 2 * n_conv) / 2);
}

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
  char name[24];
  param_name(src->k, src->m->n_conv, name);
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
  mlp_src src[2 * (MLP_MAX_SIZES - 1 + AG_MAX_CONV)];
  ag__agf a;
  ag__agf_init(&a);
  ag__agf_set_str(&a, "kind", "mlp");
  ag__agf_set_i64(&a, "mlp.version", m->n_conv ? MLP_VERSION_CONV : MLP_VERSION);
  ag__agf_set_i64s(&a, "mlp.sizes", m->sizes, (uint32_t)n);
  ag__agf_set_i64(&a, "mlp.hidden", (int64_t)m->hidden);
  ag__agf_set_i64(&a, "mlp.last", (int64_t)m->last);
  if (m->n_conv) {
    int64_t conv[4 * AG_MAX_CONV];
    for (int i = 0; i < m->n_conv; i++) {
      conv[4 * i] = m->conv[i].channels, conv[4 * i + 1] = m->conv[i].kernel;
      conv[4 * i + 2] = m->conv[i].stride, conv[4 * i + 3] = m->conv[i].pad;
    }
    ag__agf_set_i64s(&a, "mlp.in_shape", m->shape[0], 3);
    ag__agf_set_i64s(&a, "mlp.conv", conv, (uint32_t)(4 * m->n_conv));
  }
  for (int k = 0; k < m->n_params; k++) {
    char name[24];
    param_name(k, m->n_conv, name);
    const int64_t dims[2] = {m->params[k]->rows, m->params[k]->cols};
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
  char pname[24];
  param_name(sec, d->m->n_conv, pname);
  return ag__fail(AG_ERR_IO,
                  "%s: %s is corrupt: parameter %s holds %s at element %lld (row %lld, column %lld)", fn,
                  d->name, pname, d->nan ? "a NaN" : "an infinity", (long long)d->bad,
                  (long long)(d->bad % p->rows), (long long)(d->bad / p->rows));
}

/* What a file holds: the network's description, as mlp_alloc takes it. */
typedef struct mlp_desc {
  int64_t sizes[MLP_MAX_SIZES];
  int n_sizes;
  int64_t hidden, last;
  int n_conv;
  int64_t in_shape[3];
  ag_conv_layer conv[AG_MAX_CONV];
} mlp_desc;

/* The convolutions a version-4 file describes, checked as ag_mlp_create_conv checks them. */
static ag_status conv_describe(const ag__agf *a, const char *name, mlp_desc *d) {
  static const char fn[] = "ag_mlp_load";
  const int64_t *sh, *cv;
  uint32_t nsh = 0, ncv = 0;
  ag_status s = ag__agf_get_i64s(a, "mlp.in_shape", 3, &sh, &nsh, fn, name);
  if (!s) s = ag__agf_get_i64s(a, "mlp.conv", 4 * AG_MAX_CONV, &cv, &ncv, fn, name);
  if (!s && (nsh != 3 || ncv < 4 || ncv % 4))
    s = ag__fail(AG_ERR_IO,
                 "%s: %s is corrupt: mlp.in_shape holds %u values (3 wanted), mlp.conv %u (4 a layer, 1..%d "
                 "layers)",
                 fn, name, nsh, ncv, AG_MAX_CONV);
  if (s) return s;
  memcpy(d->in_shape, sh, sizeof d->in_shape);
  d->n_conv = (int)(ncv / 4);
  for (int i = 0; i < d->n_conv; i++)
    d->conv[i] = (ag_conv_layer){cv[4 * i], cv[4 * i + 1], cv[4 * i + 2], cv[4 * i + 3]};
  int64_t shape[AG_MAX_CONV + 1][3];
  if ((s = ag__conv_shapes(d->in_shape, d->conv, d->n_conv, shape, fn))) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: its convolutions are not valid (%s)", fn, name, why);
  }
  const int64_t flat = shape[d->n_conv][0] * shape[d->n_conv][1] * shape[d->n_conv][2];
  if (d->sizes[0] != flat)
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: sizes[0] = %lld, where the convolutions give %lld", fn,
                    name, (long long)d->sizes[0], (long long)flat);
  return AG_OK;
}

/* What the keys and sections of a describe: checked, before anything is made. */
static ag_status mlp_describe(const ag__agf *a, const char *name, mlp_desc *d) {
  static const char fn[] = "ag_mlp_load";
  int64_t version;
  const int64_t *sz;
  uint32_t n;
  memset(d, 0, sizeof *d);
  ag_status s = ag__agf_check_kind(a, "mlp", MLP_VERSION_CONV, &version, fn, name);
  if (!s) s = ag__agf_get_i64(a, "mlp.hidden", INT32_MIN, INT32_MAX, &d->hidden, fn, name);
  if (!s) s = ag__agf_get_i64(a, "mlp.last", INT32_MIN, INT32_MAX, &d->last, fn, name);
  if (!s && (!act_ok((ag_act)d->hidden) || !act_ok((ag_act)d->last)))
    s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: the %s activation code %d is not one of 0..3", fn, name,
                 act_ok((ag_act)d->hidden) ? "last layer's" : "hidden layers'",
                 (int)(act_ok((ag_act)d->hidden) ? d->last : d->hidden));
  if (!s) s = ag__agf_get_i64s(a, "mlp.sizes", MLP_MAX_SIZES, &sz, &n, fn, name);
  if (!s && n < 2)
    s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: n_sizes = %u, outside 2..%d", fn, name, n, MLP_MAX_SIZES);
  for (uint32_t i = 0; !s && i < n; i++)
    if (sz[i] < 1 || sz[i] > INT32_MAX)
      s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: sizes[%u] = %lld, outside 1..%d", fn, name, i,
                   (long long)sz[i], INT32_MAX);
  if (s) return s;
  memcpy(d->sizes, sz, n * sizeof *sz);
  d->n_sizes = (int)n;
  if (version >= MLP_VERSION_CONV && (s = conv_describe(a, name, d))) return s;
  if (version < MLP_VERSION_CONV && (ag__agf_key_find(a, "mlp.conv") || ag__agf_key_find(a, "mlp.in_shape")))
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: mlp.version %lld with the keys of convolutions", fn, name,
                    (long long)version);
  const int P = 2 * (d->n_conv + (int)n - 1);
  if (a->n_sections != P)
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: %d sections, where the network has %d parameters", fn,
                    name, a->n_sections, P);
  int64_t shape[AG_MAX_CONV + 1][3], dims[2 * (MLP_MAX_SIZES - 1 + AG_MAX_CONV)][2];
  if (d->n_conv) ag__conv_shapes(d->in_shape, d->conv, d->n_conv, shape, fn); /* checked above */
  ag__net_dims(d->conv, (const int64_t(*)[3])shape, d->n_conv, d->sizes, d->n_sizes, dims, P);
  for (int k = 0; k < P; k++) {
    char pname[24];
    param_name(k, d->n_conv, pname);
    int at;
    if ((s = ag__agf_want_section(a, pname, AG_F32, 2, dims[k], &at, fn, name))) return s;
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
  mlp_desc d;
  ag_status s = ag__agf_read_stream(&a, f, fn, name);
  if (!s) s = mlp_describe(&a, name, &d);
  ag_mlp *m = NULL;
  if (!s && (s = mlp_alloc(ctx, d.in_shape, d.conv, d.n_conv, d.sizes, d.n_sizes, (ag_act)d.hidden,
                           (ag_act)d.last, fn, &m)) == AG_ERR_OUT_OF_MEMORY) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    uint64_t bytes = 0;
    for (int k = 0; k < a.n_sections; k++) bytes += a.sections[k].bytes;
    s = ag__fail(s,
                 "%s: the parameters of %s (%.1f MB, and as much again for their gradients) do not fit: %s",
                 fn, name, AG__MB((double)bytes), why);
  }
  if (!s) {
    mlp_dst dst = {m, name, -1, 0};
    s = ag__agf_stream(&a, f, mlp_take, &dst, fn, name);
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
