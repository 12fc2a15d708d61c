/* mlp.c — multilayer perceptrons and target-network updates.
 *
 * A layer is W [out, in] and b [out, 1]; y = act(W x + b) for x [in, n].
 * Parameters are persistent tensors that require gradients. Initial values
 * come from a Philox stream on the host, so every device starts from the
 * same numbers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/nn.h"
#include "core/graph_internal.h"
#include "core/philox.h"

struct ag_mlp {
  ag_ctx *ctx;
  int n_layers;
  int64_t *sizes; /* n_layers + 1 */
  ag_act hidden, last;
  ag_tensor **params; /* 2 * n_layers: W0, b0, W1, b1 ... */
};

ag_status ag_activate(ag_tensor *x, ag_act act, ag_tensor **out) {
  switch (act) {
    case AG_ACT_NONE:
      if (!out) return ag__fail(AG_ERR_INVALID_ARG, "ag_activate: out is NULL");
      *out = x;
      return ag__check_tensor(x, "ag_activate", "x");
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
  if (!ctx || !sizes || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, sizes and out must not be NULL", fn);
  if (n_sizes < 2) return ag__fail(AG_ERR_INVALID_ARG, "%s: n_sizes = %d; give at least an input and an output size", fn, n_sizes);
  for (int i = 0; i < n_sizes; i++)
    if (sizes[i] < 1 || sizes[i] > INT32_MAX)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: sizes[%d] = %lld must be a positive size", fn, i, (long long)sizes[i]);
  if (!act_ok(hidden) || !act_ok(last))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: activation %d is unknown", fn, act_ok(hidden) ? (int)last : (int)hidden);
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

ag_status ag_mlp_create(ag_ctx *ctx, const int64_t *sizes, int n_sizes, ag_act hidden, ag_act last, uint64_t seed,
                        ag_mlp **out) {
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

/* ---- files ---- */

static const char mlp_magic[8] = {'A', 'G', 'R', 'L', 'M', 'L', 'P', '1'};

ag_status ag_mlp_save(const ag_mlp *m, const char *path) {
  static const char fn[] = "ag_mlp_save";
  if (!m || !path) return ag__fail(AG_ERR_INVALID_ARG, "%s: mlp and path must not be NULL", fn);
  FILE *f = fopen(path, "wb");
  if (!f) return ag__fail(AG_ERR_IO, "%s: cannot open %s for writing", fn, path);
  int32_t hdr[3] = {m->n_layers + 1, (int32_t)m->hidden, (int32_t)m->last};
  int ok = fwrite(mlp_magic, 1, 8, f) == 8 && fwrite(hdr, sizeof hdr, 1, f) == 1 &&
           fwrite(m->sizes, sizeof *m->sizes, (size_t)(m->n_layers + 1), f) == (size_t)(m->n_layers + 1);
  ag_status s = AG_OK;
  for (int k = 0; ok && k < 2 * m->n_layers; k++) {
    size_t n = (size_t)(m->params[k]->rows * m->params[k]->cols);
    float *v = ag__malloc(n * sizeof *v);
    if (!v) {
      s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
      break;
    }
    s = ag_tensor_read(m->params[k], v, n * sizeof *v);
    ok = !s && fwrite(v, sizeof *v, n, f) == n;
    free(v);
  }
  if (fclose(f) != 0) ok = 0;
  if (s) return s;
  if (!ok) return ag__fail(AG_ERR_IO, "%s: writing %s failed", fn, path);
  return AG_OK;
}

ag_status ag_mlp_load(ag_ctx *ctx, const char *path, ag_mlp **out) {
  static const char fn[] = "ag_mlp_load";
  if (!ctx || !path || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  FILE *f = fopen(path, "rb");
  if (!f) return ag__fail(AG_ERR_IO, "%s: cannot open %s", fn, path);
  char magic[8];
  int32_t hdr[3];
  int64_t sizes[64];
  ag_status s = AG_OK;
  ag_mlp *m = NULL;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, mlp_magic, 8) || fread(hdr, sizeof hdr, 1, f) != 1 ||
      hdr[0] < 2 || hdr[0] > 64 || fread(sizes, sizeof *sizes, (size_t)hdr[0], f) != (size_t)hdr[0]) {
    fclose(f);
    return ag__fail(AG_ERR_IO, "%s: %s is not an agrl MLP file", fn, path);
  }
  if ((s = mlp_alloc(ctx, sizes, hdr[0], (ag_act)hdr[1], (ag_act)hdr[2], fn, &m))) {
    fclose(f);
    return s;
  }
  for (int k = 0; k < 2 * m->n_layers && !s; k++) {
    size_t n = (size_t)(m->params[k]->rows * m->params[k]->cols);
    float *v = ag__malloc(n * sizeof *v);
    if (!v) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    else if (fread(v, sizeof *v, n, f) != n) s = ag__fail(AG_ERR_IO, "%s: %s is truncated", fn, path);
    else s = ag_tensor_write(m->params[k], v, n * sizeof *v);
    free(v);
  }
  fclose(f);
  if (s) {
    ag_mlp_free(m);
    return s;
  }
  *out = m;
  return AG_OK;
}
