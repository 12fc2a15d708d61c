/* replay.c — the C side of agrl.ReplayBuffer: named fields over one table,
 * uniform or prioritized sampling on the device into a block that the
 * returned tensors share. */
#include "agrl_py.h"

#define AGPY_MAX_FIELDS 32

typedef struct agpy_field {
  PyObject *name; /* str */
  int64_t width, row0;
  int n_inner;
  int64_t inner[5];
  ag_dtype dtype;
} agpy_field;

typedef struct agpy_replay {
  PyObject_HEAD agpy_ctx *ctx;
  ag_replay *r; /* NULL once freed */
  ag_per *per;
  ag_rng *rng;
  int n_fields;
  agpy_field fields[AGPY_MAX_FIELDS];
  int64_t rows;
  double beta;
  PyObject *k_indices, *k_weights;
} agpy_replay;

void agpy_replay_release(PyObject *self) {
  agpy_replay *r = (agpy_replay *)self;
  if (r->rng) ag_rng_free(r->rng);
  if (r->r) ag_replay_free(r->r); /* and its sampler */
  r->rng = NULL;
  r->r = NULL;
  r->per = NULL;
}

static ag_replay *rp_get(agpy_replay *r) {
  if (!r->r || !r->ctx || !r->ctx->ctx) {
    agpy_raisef(AG_ERR_FREED, "the replay buffer has been freed (or its context)");
    return NULL;
  }
  return r->r;
}

/* _Replay(ctx, capacity, fields, storage, min_size, prioritized, alpha, beta, seed)
 * fields: a sequence of (name, shape tuple, dtype) */
static int rp_init(agpy_replay *r, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"ctx",         "capacity", "fields", "storage", "min_size",
                           "prioritized", "alpha",    "beta",   "seed",    NULL};
  PyObject *ctxo, *fields, *storage = NULL;
  long long cap, min_size = 1;
  unsigned long long seed = 0;
  int prioritized = 0;
  double alpha = 0.6, beta = 0.4;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OLO|OLpddO&:_Replay", kwlist, &ctxo, &cap, &fields, &storage,
                                   &min_size, &prioritized, &alpha, &beta, agpy_u64_conv, &seed))
    return -1;
  if (r->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "ReplayBuffer.__init__ called twice");
    return -1;
  }
  if (!PyObject_TypeCheck(ctxo, &agpy_ctx_type)) {
    PyErr_Format(PyExc_TypeError, "ReplayBuffer: ctx must be an agrl.Context, not %.80s",
                 Py_TYPE(ctxo)->tp_name);
    return -1;
  }
  agpy_ctx *c = (agpy_ctx *)ctxo;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return -1;
  ag_dtype st = AG_F32;
  if (storage && storage != Py_None && agpy_dtype_parse(storage, &st, "ReplayBuffer: storage")) return -1;
  if (!(beta >= 0.0 && beta <= 1.0)) {
    char num[32]; /* PyUnicode_FromFormat has no %g */
    PyOS_snprintf(num, sizeof num, "%g", beta);
    agpy_raisef(AG_ERR_INVALID_ARG, "ReplayBuffer: beta = %s is outside [0, 1]", num);
    return -1;
  }
  PyObject *seq = PySequence_Fast(fields, "ReplayBuffer: fields must be a sequence of (name, shape, dtype)");
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  ag_field cf[AGPY_MAX_FIELDS];
  int ok = 1;
  if (n < 1 || n > AGPY_MAX_FIELDS) {
    agpy_raisef(AG_ERR_INVALID_ARG, "ReplayBuffer: %zd fields (give 1 to %d)", n, AGPY_MAX_FIELDS);
    ok = 0;
  }
  int64_t row0 = 0;
  for (Py_ssize_t i = 0; ok && i < n; i++) {
    PyObject *name, *shape, *dto;
    agpy_field *f = &r->fields[i];
    PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
    if (!PyTuple_Check(item)) {
      PyErr_SetString(PyExc_TypeError, "ReplayBuffer: each field must be a tuple (name, shape, dtype)");
      ok = 0;
      break;
    }
    if (!PyArg_ParseTuple(item, "UOO:field", &name, &shape, &dto) ||
        agpy_dtype_parse(dto, &f->dtype, "ReplayBuffer: field dtype")) {
      ok = 0;
      break;
    }
    PyObject *sh = PySequence_Fast(shape, "ReplayBuffer: a field's shape must be a tuple of sizes");
    if (!sh) {
      ok = 0;
      break;
    }
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(sh);
    f->width = 1;
    f->n_inner = 0;
    if (nd > 5) {
      agpy_raisef(AG_ERR_SHAPE, "ReplayBuffer: field '%U' has %zd dimensions (at most 5)", name, nd);
      ok = 0;
    }
    for (Py_ssize_t d = 0; ok && d < nd; d++) {
      long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(sh, d));
      if (v == -1 && PyErr_Occurred()) {
        ok = 0;
      } else if (v < 1 || v > (1ll << 40) / f->width) {
        agpy_raisef(AG_ERR_INVALID_ARG, "ReplayBuffer: field '%U' has a dimension of size %lld", name, v);
        ok = 0;
      } else {
        f->inner[f->n_inner++] = v;
        f->width *= v;
      }
    }
    Py_DECREF(sh);
    if (!ok) break;
    f->name = Py_NewRef(name);
    f->row0 = row0;
    row0 += f->width;
    r->n_fields = (int)i + 1;
    cf[i].name = PyUnicode_AsUTF8(name);
    cf[i].width = f->width;
    cf[i].dtype = f->dtype;
    if (!cf[i].name) ok = 0;
  }
  Py_DECREF(seq);
  if (!ok) return -1;
  r->rows = row0;
  ag_status s = ag_replay_create(ctx, cf, r->n_fields, cap, st, min_size, &r->r);
  if (!s && prioritized) s = ag_per_create(r->r, (float)alpha, &r->per);
  if (!s) s = ag_rng_create(ctx, seed, &r->rng);
  if (s) {
    agpy_raise(s);
    agpy_replay_release((PyObject *)r);
    return -1;
  }
  if (agpy_ctx_add_dep(c, (PyObject *)r)) {
    agpy_replay_release((PyObject *)r);
    return -1;
  }
  r->ctx = (agpy_ctx *)Py_NewRef(c);
  r->beta = beta;
  r->k_indices = PyUnicode_InternFromString("indices");
  r->k_weights = PyUnicode_InternFromString("weights");
  return 0;
}

static void rp_dealloc(agpy_replay *r) {
  agpy_replay_release((PyObject *)r);
  for (int i = 0; i < r->n_fields; i++) Py_XDECREF(r->fields[i].name);
  Py_XDECREF(r->k_indices);
  Py_XDECREF(r->k_weights);
  if (r->ctx) {
    agpy_ctx_drop_dep(r->ctx, (PyObject *)r);
    Py_DECREF(r->ctx);
  }
  Py_TYPE(r)->tp_free((PyObject *)r);
}

/* The number of transitions in a field's array: (k, *shape) or (*shape). */
static int64_t transitions(const agpy_field *f, const agpy_in *in) {
  if (in->ndim == f->n_inner) {
    for (int d = 0; d < f->n_inner; d++)
      if (in->shape[d] != f->inner[d]) goto batch;
    return 1;
  }
batch:
  if (in->ndim == f->n_inner + 1) {
    for (int d = 0; d < f->n_inner; d++)
      if (in->shape[d + 1] != f->inner[d]) return -1;
    return in->shape[0];
  }
  if (f->width == 1 && in->ndim == 1 && f->n_inner == 1) return in->shape[0]; /* (k,) for a (1,) field */
  if (f->width == 1 && in->ndim == 0) return 1;
  return -1;
}

/* add(**fields): one transition or a batch, host or device arrays */
static PyObject *rp_add(agpy_replay *r, PyObject *args, PyObject *kw) {
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  if (PyTuple_GET_SIZE(args) > 1 || (PyTuple_GET_SIZE(args) == 1 && kw)) {
    PyErr_SetString(PyExc_TypeError, "ReplayBuffer.add: pass the fields as keywords (or one dict)");
    return NULL;
  }
  PyObject *d = PyTuple_GET_SIZE(args) == 1 ? PyTuple_GET_ITEM(args, 0) : kw;
  if (!d || !PyDict_Check(d)) {
    PyErr_SetString(PyExc_TypeError, "ReplayBuffer.add: pass every field as a keyword");
    return NULL;
  }
  ag_ctx *ctx = r->ctx->ctx;
  const int n = r->n_fields;
  agpy_in in[AGPY_MAX_FIELDS];
  memset(in, 0, sizeof in);
  void *scratch[AGPY_MAX_FIELDS] = {0};
  const void *ptr[AGPY_MAX_FIELDS];
  int device = 0;
  int64_t k = -1;
  PyObject *ret = NULL;
  if (PyDict_GET_SIZE(d) != n) {
    /* name what is missing or unknown */
    for (int i = 0; i < n; i++)
      if (!PyDict_GetItemWithError(d, r->fields[i].name)) {
        if (!PyErr_Occurred())
          agpy_raisef(AG_ERR_INVALID_ARG, "ReplayBuffer.add: field '%U' is missing", r->fields[i].name);
        return NULL;
      }
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &key, &val)) {
      int known = 0;
      for (int i = 0; i < n; i++) known |= PyObject_RichCompareBool(key, r->fields[i].name, Py_EQ) == 1;
      if (!known) return agpy_raisef(AG_ERR_INVALID_ARG, "ReplayBuffer.add: the table has no field %R", key);
    }
  }
  for (int i = 0; i < n; i++) {
    const agpy_field *f = &r->fields[i];
    PyObject *v = PyDict_GetItemWithError(d, f->name);
    if (!v) {
      if (!PyErr_Occurred())
        agpy_raisef(AG_ERR_INVALID_ARG, "ReplayBuffer.add: field '%U' is missing", f->name);
      goto done;
    }
    char what[96];
    snprintf(what, sizeof what, "ReplayBuffer.add: field '%s'", PyUnicode_AsUTF8(f->name));
    if (agpy_in_get(ctx, v, &in[i], what)) goto done;
    int64_t ki = transitions(f, &in[i]);
    if (ki < 0) {
      agpy_raisef(AG_ERR_SHAPE, "%s: shape does not match the field's (k, ...) of width %lld", what,
                  (long long)f->width);
      goto done;
    }
    if (i == 0) k = ki, device = in[i].on_device;
    if (ki != k) {
      agpy_raisef(AG_ERR_SHAPE, "ReplayBuffer.add: field '%U' has %lld transitions, field '%U' %lld", f->name,
                  (long long)ki, r->fields[0].name, (long long)k);
      goto done;
    }
    if (in[i].on_device != device) {
      agpy_raisef(AG_ERR_INVALID_ARG,
                  "ReplayBuffer.add: fields must all be on the host or all on the device");
      goto done;
    }
    if (!device && !(ptr[i] = agpy_in_as(&in[i], f->dtype, &scratch[i], what))) goto done;
  }
  ag_status s;
  if (device) {
    ag_tensor *t[AGPY_MAX_FIELDS];
    s = AG_OK;
    for (int i = 0; i < n && !s && k > 0; i++)
      s = ag_tensor_wrap(ctx, in[i].data, r->fields[i].width, k, r->fields[i].width,
                         (ag_dtype)agpy_in_agdtype(&in[i]), &t[i]);
    if (!s) s = ag_replay_add_dev(rep, t, k);
    ag_ctx_reset(ctx);
  } else {
    s = ag_replay_add(rep, ptr, k);
  }
  if (s)
    agpy_raise(s);
  else
    ret = Py_NewRef(Py_None);
done:
  for (int i = 0; i < n; i++) {
    free(scratch[i]);
    agpy_in_release(&in[i], ctx);
  }
  return ret;
}

/* sample(batch_size, beta=None): {field: Tensor (B, *shape), "indices": (B,) i32[, "weights": (B,) f32]} */
static PyObject *rp_sample(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  if (nargs < 1 || nargs > 3 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
    /* the keyword form, rarely used: sample(batch_size=..., beta=...) */
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *bo = nargs >= 1 ? args[0] : NULL, *beo = nargs >= 2 ? args[1] : NULL,
             *co = nargs >= 3 ? args[2] : NULL;
    for (Py_ssize_t i = 0; i < nk; i++) {
      const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
      if (k && !strcmp(k, "batch_size") && !bo)
        bo = args[nargs + i];
      else if (k && !strcmp(k, "beta") && !beo)
        beo = args[nargs + i];
      else if (k && !strcmp(k, "contiguous") && !co)
        co = args[nargs + i];
      else {
        PyErr_Format(PyExc_TypeError, "sample() got an unexpected or repeated argument '%s'", k ? k : "?");
        return NULL;
      }
    }
    if (!bo || nargs > 3) {
      PyErr_SetString(PyExc_TypeError, "sample(batch_size, beta=None, contiguous=False)");
      return NULL;
    }
    PyObject *a3[3] = {bo, beo ? beo : Py_None, co ? co : Py_False};
    return rp_sample(r, a3, 3, NULL);
  }
  if (!PyLong_Check(args[0])) {
    PyErr_Format(PyExc_TypeError, "sample: batch_size must be an int, not %.80s", Py_TYPE(args[0])->tp_name);
    return NULL;
  }
  long long B = PyLong_AsLongLong(args[0]);
  if (B == -1 && PyErr_Occurred()) return NULL;
  double beta = r->beta;
  if (nargs >= 2 && args[1] != Py_None) { /* the keyword form passes 3 */
    beta = PyFloat_AsDouble(args[1]);
    if (beta == -1.0 && PyErr_Occurred()) return NULL;
  }
  int contiguous = 0;
  if (nargs == 3 && (contiguous = PyObject_IsTrue(args[2])) < 0) return NULL;
  if (B < 1) return agpy_raisef(AG_ERR_INVALID_ARG, "sample: batch_size = %lld must be at least 1", B);
  if (B > (1ll << 31) - 1)
    return agpy_raisef(AG_ERR_INVALID_ARG, "sample: batch_size = %lld is too large", B);
  ag_status s = ag_replay_can_sample(rep, B);
  if (s) return agpy_raise(s);
  ag_ctx *ctx = r->ctx->ctx;
  size_t need = 2 * agpy_align((size_t)B * 4) + agpy_align((size_t)(r->rows * B) * 4) + 1024;
  if (contiguous) /* each field packed after the batch */
    for (int i = 0; i < r->n_fields; i++) need += agpy_align((size_t)(r->fields[i].width * B) * 4);
  ag_block *blk;
  if ((s = ag_block_create(ctx, need, &blk))) return agpy_raise(s);
  ag_tensor *batch = NULL, *idx = NULL, *w = NULL;
  void *fp[AGPY_MAX_FIELDS] = {0};
  s = ag_ctx_use_block(ctx, blk);
  if (!s) {
    if (r->per) {
      s = ag_per_sample(r->per, r->rng, B, (float)beta, &idx, &w);
      if (!s) s = ag_get_rows_dev(ag_replay_buffer(rep), idx, &batch);
    } else {
      s = ag_replay_sample(rep, r->rng, B, &batch, &idx);
    }
    ag_tensor *packed[AGPY_MAX_FIELDS] = {0};
    for (int i = 0; contiguous && !s && i < r->n_fields; i++) {
      ag_tensor *v;
      s = ag_replay_view(rep, batch, PyUnicode_AsUTF8(r->fields[i].name), &v);
      if (!s) s = ag_contiguous(v, &packed[i]);
    }
    for (int i = 0; contiguous && !s && i < r->n_fields; i++) s = ag_tensor_data(packed[i], &fp[i], NULL);
    ag_ctx_use_block(ctx, NULL);
  }
  PyObject *out = NULL;
  void *bp = NULL, *ip = NULL, *wp = NULL;
  if (!s) s = ag_tensor_data(batch, &bp, NULL);
  if (!s) s = ag_tensor_data(idx, &ip, NULL);
  if (!s && w) s = ag_tensor_data(w, &wp, NULL);
  ag_ctx_reset(ctx);
  if (s) {
    ag_block_release(blk, NULL);
    return agpy_raise(s);
  }
  out = PyDict_New();
  for (int i = 0; out && i < r->n_fields; i++) {
    const agpy_field *f = &r->fields[i];
    PyObject *t =
        contiguous ? agpy_tensor_new(r->ctx, blk, fp[i], AG_F32, f->width, B, f->width, f->inner, f->n_inner)
                   : agpy_tensor_new(r->ctx, blk, (float *)bp + f->row0, AG_F32, f->width, B, r->rows,
                                     f->inner, f->n_inner);
    if (!t || PyDict_SetItem(out, f->name, t) < 0) Py_CLEAR(out);
    Py_XDECREF(t);
  }
  if (out) {
    PyObject *t = agpy_tensor_new(r->ctx, blk, ip, AG_I32, 1, B, 1, NULL, 0);
    if (!t || PyDict_SetItem(out, r->k_indices, t) < 0) Py_CLEAR(out);
    Py_XDECREF(t);
  }
  if (out && wp) {
    PyObject *t = agpy_tensor_new(r->ctx, blk, wp, AG_F32, 1, B, 1, NULL, 0);
    if (!t || PyDict_SetItem(out, r->k_weights, t) < 0) Py_CLEAR(out);
    Py_XDECREF(t);
  }
  ag_block_release(blk, NULL);
  return out;
}

/* update_priorities(indices, priorities): host or device arrays of n values */
static PyObject *rp_update(agpy_replay *r, PyObject *args) {
  PyObject *io, *po;
  if (!PyArg_ParseTuple(args, "OO:update_priorities", &io, &po)) return NULL;
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  if (!r->per)
    return agpy_raisef(AG_ERR_STATE, "update_priorities: the buffer was made without prioritized=True");
  ag_ctx *ctx = r->ctx->ctx;
  agpy_in ii, pi;
  if (agpy_in_get(ctx, io, &ii, "update_priorities: indices")) return NULL;
  if (agpy_in_get(ctx, po, &pi, "update_priorities: priorities")) {
    agpy_in_release(&ii, ctx);
    return NULL;
  }
  PyObject *ret = NULL;
  void *s1 = NULL, *s2 = NULL;
  ag_status s = AG_OK;
  if (ii.numel != pi.numel) {
    agpy_raisef(AG_ERR_SHAPE, "update_priorities: %lld indices and %lld priorities", (long long)ii.numel,
                (long long)pi.numel);
  } else if (ii.on_device != pi.on_device) {
    agpy_raisef(AG_ERR_INVALID_ARG,
                "update_priorities: indices and priorities must both be on the host or the device");
  } else if (ii.on_device) {
    int idt = agpy_in_agdtype(&ii), pdt = agpy_in_agdtype(&pi);
    ag_tensor *ti, *tp;
    if (idt != AG_I32 && idt != AG_I64)
      PyErr_SetString(PyExc_TypeError, "update_priorities: device indices must be int32 or int64");
    else if (pdt != AG_F32)
      PyErr_SetString(PyExc_TypeError, "update_priorities: device priorities must be float32");
    else if (ii.numel < 1)
      agpy_raisef(AG_ERR_INVALID_ARG, "update_priorities: no indices");
    else {
      s = ag_tensor_wrap(ctx, ii.data, ii.numel, 1, ii.numel, (ag_dtype)idt, &ti);
      if (!s) s = ag_tensor_wrap(ctx, pi.data, 1, pi.numel, 1, AG_F32, &tp);
      if (!s) s = ag_per_update(r->per, ti, tp);
      ag_ctx_reset(ctx);
      if (s)
        agpy_raise(s);
      else
        ret = Py_NewRef(Py_None);
    }
  } else {
    const int64_t *hi = agpy_in_as(&ii, AG_I64, &s1, "update_priorities: indices");
    const float *hp = hi ? agpy_in_as(&pi, AG_F32, &s2, "update_priorities: priorities") : NULL;
    if (hp) {
      s = ag_per_update_host(r->per, hi, hp, ii.numel);
      if (s)
        agpy_raise(s);
      else
        ret = Py_NewRef(Py_None);
    }
  }
  free(s1);
  free(s2);
  agpy_in_release(&ii, ctx);
  agpy_in_release(&pi, ctx);
  return ret;
}

static PyObject *rp_total(agpy_replay *r, PyObject *a) {
  (void)a;
  if (!rp_get(r)) return NULL;
  if (!r->per)
    return agpy_raisef(AG_ERR_STATE, "total_priority: the buffer was made without prioritized=True");
  double t;
  ag_status s = ag_per_total(r->per, &t);
  if (s) return agpy_raise(s);
  return PyFloat_FromDouble(t);
}

static PyObject *rp_free(agpy_replay *r, PyObject *a) {
  (void)a;
  agpy_replay_release((PyObject *)r);
  Py_RETURN_NONE;
}

static Py_ssize_t rp_len(agpy_replay *r) {
  if (!rp_get(r)) return -1;
  return (Py_ssize_t)ag_replay_size(r->r);
}

static PyObject *rp_get_capacity(agpy_replay *r, void *x) {
  (void)x;
  return rp_get(r) ? PyLong_FromLongLong(ag_replay_capacity(r->r)) : NULL;
}

static PyObject *rp_get_position(agpy_replay *r, void *x) {
  (void)x;
  return rp_get(r) ? PyLong_FromLongLong(ag_replay_position(r->r)) : NULL;
}

static PyObject *rp_get_rows(agpy_replay *r, void *x) {
  (void)x;
  return PyLong_FromLongLong(r->rows);
}

static PyObject *rp_get_prioritized(agpy_replay *r, void *x) {
  (void)x;
  return PyBool_FromLong(r->per != NULL);
}

static PyObject *rp_get_beta(agpy_replay *r, void *x) {
  (void)x;
  return PyFloat_FromDouble(r->beta);
}

static int rp_set_beta(agpy_replay *r, PyObject *v, void *x) {
  (void)x;
  if (!v) {
    PyErr_SetString(PyExc_AttributeError, "beta cannot be deleted");
    return -1;
  }
  double b = PyFloat_AsDouble(v);
  if (b == -1.0 && PyErr_Occurred()) return -1;
  if (!(b >= 0.0 && b <= 1.0)) {
    char num[32];
    PyOS_snprintf(num, sizeof num, "%g", b);
    agpy_raisef(AG_ERR_INVALID_ARG, "beta = %s is outside [0, 1]", num);
    return -1;
  }
  r->beta = b;
  return 0;
}

static PyObject *rp_save(agpy_replay *r, PyObject *arg) {
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  PyObject *path = NULL;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  ag_status s = ag_replay_save(rep, PyBytes_AS_STRING(path));
  Py_DECREF(path);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

/* _load(ctx, path, seed, beta): a new object of the class over the table of the file */
static PyObject *rp_load(PyObject *cls, PyObject *args) {
  PyObject *ctxo, *patho;
  unsigned long long seed = 0;
  double beta = 0.4;
  if (!PyArg_ParseTuple(args, "OO|Kd:load", &ctxo, &patho, &seed, &beta)) return NULL;
  if (!PyObject_TypeCheck(ctxo, &agpy_ctx_type)) {
    PyErr_Format(PyExc_TypeError, "load: ctx must be an agrl.Context, not %.80s", Py_TYPE(ctxo)->tp_name);
    return NULL;
  }
  if (!(beta >= 0.0 && beta <= 1.0)) {
    char b[32];
    PyOS_snprintf(b, sizeof b, "%g", beta);
    return agpy_raisef(AG_ERR_INVALID_ARG, "load: beta = %s is outside [0, 1]", b);
  }
  agpy_ctx *c = (agpy_ctx *)ctxo;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  PyObject *path = NULL;
  if (!PyUnicode_FSConverter(patho, &path)) return NULL;
  ag_replay *rep = NULL;
  ag_status s = ag_replay_load(ctx, PyBytes_AS_STRING(path), &rep);
  Py_DECREF(path);
  if (s) return agpy_raise(s);
  if (ag_replay_n_fields(rep) > AGPY_MAX_FIELDS) {
    ag_replay_free(rep);
    return agpy_raisef(AG_ERR_UNSUPPORTED, "load: the table has more than %d fields", AGPY_MAX_FIELDS);
  }
  agpy_replay *r = (agpy_replay *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
  if (!r) {
    ag_replay_free(rep);
    return NULL;
  }
  r->r = rep;
  r->per = ag_replay_per(rep);
  r->rows = ag_replay_rows(rep);
  for (int i = 0; i < ag_replay_n_fields(rep); i++) {
    ag_field f;
    agpy_field *pf = &r->fields[i];
    ag_replay_field_at(rep, i, &f);
    ag_replay_field(rep, f.name, &pf->row0, &pf->width);
    pf->dtype = f.dtype;
    pf->n_inner = 1;
    pf->inner[0] = f.width;
    if (!(pf->name = PyUnicode_FromString(f.name))) {
      Py_DECREF(r);
      return NULL;
    }
    r->n_fields = i + 1;
  }
  if ((s = ag_rng_create(ctx, seed, &r->rng))) {
    Py_DECREF(r);
    return agpy_raise(s);
  }
  if (agpy_ctx_add_dep(c, (PyObject *)r)) {
    Py_DECREF(r);
    return NULL;
  }
  r->ctx = (agpy_ctx *)Py_NewRef(c);
  r->beta = beta;
  r->k_indices = PyUnicode_InternFromString("indices");
  r->k_weights = PyUnicode_InternFromString("weights");
  return (PyObject *)r;
}

/* _fields(): [(name, width, dtype)] of the table */
static PyObject *rp_fields(agpy_replay *r, PyObject *a) {
  (void)a;
  PyObject *l = PyList_New(r->n_fields);
  for (int i = 0; l && i < r->n_fields; i++) {
    PyObject *t = Py_BuildValue("(OLs)", r->fields[i].name, (long long)r->fields[i].width,
                                ag_dtype_name(r->fields[i].dtype));
    if (!t) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, i, t);
  }
  return l;
}

/* _set_shape(i, shape): the shape of field i's values (multiplying to its width) */
static PyObject *rp_set_shape(agpy_replay *r, PyObject *args) {
  int i;
  PyObject *shape;
  if (!PyArg_ParseTuple(args, "iO:_set_shape", &i, &shape)) return NULL;
  if (i < 0 || i >= r->n_fields) return agpy_raisef(AG_ERR_OUT_OF_RANGE, "_set_shape: no field %d", i);
  PyObject *sh = PySequence_Fast(shape, "_set_shape: shape must be a sequence of sizes");
  if (!sh) return NULL;
  Py_ssize_t nd = PySequence_Fast_GET_SIZE(sh);
  int64_t inner[5], w = 1;
  int ok = nd <= 5;
  for (Py_ssize_t d = 0; ok && d < nd; d++) {
    long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(sh, d));
    ok = v >= 1 && !PyErr_Occurred();
    inner[d] = v;
    w *= ok ? v : 1;
  }
  Py_DECREF(sh);
  if (PyErr_Occurred()) return NULL;
  if (!ok || w != r->fields[i].width)
    return agpy_raisef(AG_ERR_SHAPE, "the shape of field '%U' must have %lld values", r->fields[i].name,
                       (long long)r->fields[i].width);
  memcpy(r->fields[i].inner, inner, sizeof(int64_t) * (size_t)nd);
  r->fields[i].n_inner = (int)nd;
  Py_RETURN_NONE;
}

static PyMethodDef rp_methods[] = {
    {"add", (PyCFunction)(void (*)(void))rp_add, METH_VARARGS | METH_KEYWORDS,
     "add(**fields): appends one transition or a batch (first dimension), from host or device arrays."},
    {"sample", (PyCFunction)(void (*)(void))rp_sample, METH_FASTCALL | METH_KEYWORDS,
     "sample(batch_size, beta=None, contiguous=False): a dict of device tensors (B, *shape), with 'indices' "
     "(and\n"
     "'weights'). The fields are views of one gathered batch (row stride: the table's rows); with "
     "contiguous=True\n"
     "each field is packed on its own (for consumers that take only compact arrays, such as JAX)."},
    {"update_priorities", (PyCFunction)rp_update, METH_VARARGS,
     "update_priorities(indices, priorities): new priorities (e.g. |TD error| + eps), host or device."},
    {"total_priority", (PyCFunction)rp_total, METH_NOARGS, "The sum of p^alpha over the table."},
    {"free", (PyCFunction)rp_free, METH_NOARGS, "Frees the table; later calls raise FreedError."},
    {"save", (PyCFunction)rp_save, METH_O,
     "save(path): the table (fields, ring, valid columns, the prioritized sampler's tree) in agrl's replay "
     "format."},
    {"_load", (PyCFunction)rp_load, METH_VARARGS | METH_CLASS, NULL},
    {"_fields", (PyCFunction)rp_fields, METH_NOARGS, NULL},
    {"_set_shape", (PyCFunction)rp_set_shape, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef rp_getset[] = {
    {"capacity", (getter)rp_get_capacity, NULL, "transitions the table holds", NULL},
    {"position", (getter)rp_get_position, NULL, "where the next transition goes", NULL},
    {"rows", (getter)rp_get_rows, NULL, "values per transition", NULL},
    {"prioritized", (getter)rp_get_prioritized, NULL, "whether sampling is prioritized", NULL},
    {"beta", (getter)rp_get_beta, (setter)rp_set_beta, "the importance-weight exponent", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods rp_seq = {.sq_length = (lenfunc)rp_len};

PyTypeObject agpy_replay_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "agrl._Replay",
    .tp_basicsize = sizeof(agpy_replay),
    .tp_dealloc = (destructor)rp_dealloc,
    .tp_as_sequence = &rp_seq,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C side of agrl.ReplayBuffer.",
    .tp_methods = rp_methods,
    .tp_getset = rp_getset,
    .tp_init = (initproc)rp_init,
    .tp_new = PyType_GenericNew,
};
