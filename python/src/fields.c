/* fields.c — named fields as agrl.ReplayBuffer and agrl.FrameReplayBuffer
 * take them: the specs given to the constructor, the arrays add() receives,
 * the layout a loaded table gets back.
 *
 * `who` names the class in every message ("ReplayBuffer", ...), so that a
 * bad field says whose it was. */
#include "agrl_py.h"

void agpy_fields_clear(agpy_field *f, int n) {
  for (int i = 0; i < n; i++) Py_CLEAR(f[i].name);
}

/* A field's layout from its name, shape and dtype: `who`'s message target. */
static int field_set(agpy_field *f, const char *who, PyObject *name, ag_dtype dtype, int64_t row0) {
  f->name = Py_NewRef(name);
  PyUnicode_InternInPlace(&f->name);
  const char *s = PyUnicode_AsUTF8(f->name);
  if (!s) return -1;
  PyOS_snprintf(f->what, sizeof f->what, "%s.add: field '%s'", who, s);
  f->dtype = dtype;
  f->row0 = row0;
  return 0;
}

int agpy_fields_parse(agpy_state *st, const char *who, PyObject *fields, agpy_field *out, int *n_out,
                      ag_field *cf) {
  char msg[96];
  PyOS_snprintf(msg, sizeof msg, "%s: fields must be a sequence of (name, shape, dtype)", who);
  PyObject *seq = PySequence_Fast(fields, msg);
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  int ok = 1;
  *n_out = 0;
  if (n < 1 || n > AGPY_MAX_FIELDS) {
    agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: %zd fields (give 1 to %d)", who, n, AGPY_MAX_FIELDS);
    ok = 0;
  }
  int64_t row0 = 0;
  for (Py_ssize_t i = 0; ok && i < n; i++) {
    PyObject *name, *shape, *dto;
    agpy_field *f = &out[i];
    ag_dtype dtype;
    PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
    char what[64];
    PyOS_snprintf(what, sizeof what, "%s: field dtype", who);
    if (!PyTuple_Check(item)) {
      PyErr_Format(PyExc_TypeError, "%s: each field must be a tuple (name, shape, dtype)", who);
      ok = 0;
      break;
    }
    if (!PyArg_ParseTuple(item, "UOO:field", &name, &shape, &dto) ||
        agpy_dtype_parse(st, dto, &dtype, what)) {
      ok = 0;
      break;
    }
    PyOS_snprintf(msg, sizeof msg, "%s: a field's shape must be a tuple of sizes", who);
    PyObject *sh = PySequence_Fast(shape, msg);
    if (!sh) {
      ok = 0;
      break;
    }
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(sh);
    f->width = 1;
    f->n_inner = 0;
    if (nd > 5) {
      agpy_raisef(st, AG_ERR_SHAPE, "%s: field '%U' has %zd dimensions (at most 5)", who, name, nd);
      ok = 0;
    }
    for (Py_ssize_t d = 0; ok && d < nd; d++) {
      int64_t v;
      if (agpy_convert(st, who, "a field's size", PySequence_Fast_GET_ITEM(sh, d), "L", &v)) {
        ok = 0;
      } else if (v < 1 || v > (INT64_C(1) << 40) / f->width) {
        agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: field '%U' has a dimension of size %lld", who, name,
                    (long long)v);
        ok = 0;
      } else {
        f->inner[f->n_inner++] = v;
        f->width *= v;
      }
    }
    Py_DECREF(sh);
    if (!ok || field_set(f, who, name, dtype, row0)) {
      ok = 0;
      break;
    }
    row0 += f->width;
    *n_out = (int)i + 1;
    cf[i].name = PyUnicode_AsUTF8(f->name);
    cf[i].width = f->width;
    cf[i].dtype = f->dtype;
  }
  Py_DECREF(seq);
  if (ok) return 0;
  agpy_fields_clear(out, *n_out);
  *n_out = 0;
  return -1;
}

int agpy_fields_of_replay(agpy_state *st, const char *who, const ag_replay *rep, agpy_field *out,
                          int *n_out) {
  const int n = ag_replay_n_fields(rep);
  *n_out = 0;
  if (n > AGPY_MAX_FIELDS) {
    agpy_raisef(st, AG_ERR_UNSUPPORTED, "%s.load: the table has more than %d fields", who, AGPY_MAX_FIELDS);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    ag_field f;
    agpy_field *pf = &out[i];
    ag_replay_field_at(rep, i, &f);
    ag_replay_field(rep, f.name, &pf->row0, &pf->width);
    pf->n_inner = 1;
    pf->inner[0] = f.width;
    PyObject *name = PyUnicode_FromString(f.name);
    const int bad = !name || field_set(pf, who, name, f.dtype, pf->row0);
    Py_XDECREF(name);
    if (bad) {
      agpy_fields_clear(out, i + (pf->name != NULL));
      return -1;
    }
    *n_out = i + 1;
  }
  return 0;
}

int agpy_field_index(const agpy_field *f, int n, PyObject *key) {
  for (int i = 0; i < n; i++) /* interned names compare by address first */
    if (f[i].name == key) return i;
  for (int i = 0; i < n; i++)
    if (PyUnicode_Check(key) && PyUnicode_Compare(f[i].name, key) == 0) return i;
  return -1;
}

int64_t agpy_field_count(const agpy_field *f, const agpy_in *in) {
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

int agpy_fields_collect(agpy_state *st, const char *who, const agpy_field *f, int n, PyObject *dict,
                        PyObject *const *kwvals, PyObject *kwnames, PyObject **val, const char *const *extra,
                        PyObject **extra_val, int n_extra) {
  for (int i = 0; i < n; i++) val[i] = NULL;
  if (dict) {
    if (!PyDict_Check(dict)) {
      PyErr_Format(PyExc_TypeError, "%s.add: pass the fields as keywords or a dict, not %.80s", who,
                   Py_TYPE(dict)->tp_name);
      return -1;
    }
    PyObject *key, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &v)) {
      int i = agpy_field_index(f, n, key);
      if (i < 0)
        return agpy_raisef(st, AG_ERR_INVALID_ARG, "%s.add: the table has no field %R", who, key), -1;
      val[i] = v;
    }
  } else {
    const Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t j = 0; j < nk; j++) {
      PyObject *key = PyTuple_GET_ITEM(kwnames, j);
      int x = 0;
      while (x < n_extra && PyUnicode_CompareWithASCIIString(key, extra[x])) x++;
      if (x < n_extra) {
        if (extra_val[x])
          return PyErr_Format(PyExc_TypeError, "%s.add() got multiple values for argument '%s'", who,
                              extra[x]),
                 -1;
        extra_val[x] = kwvals[j];
        continue;
      }
      int i = agpy_field_index(f, n, key);
      if (i < 0)
        return agpy_raisef(st, AG_ERR_INVALID_ARG, "%s.add: the table has no field %R", who, key), -1;
      val[i] = kwvals[j];
    }
  }
  for (int i = 0; i < n; i++)
    if (!val[i])
      return agpy_raisef(st, AG_ERR_INVALID_ARG, "%s.add: field '%U' is missing", who, f[i].name), -1;
  return 0;
}

int agpy_fields_read(agpy_state *st, ag_ctx *ctx, const char *who, const agpy_field *f, int n,
                     PyObject *const *val, agpy_fields_in *a) {
  memset(a, 0, sizeof *a);
  a->k = -1;
  for (int i = 0; i < n; i++) {
    const char *what = f[i].what;
    if (agpy_in_get(st, ctx, val[i], &a->in[i], what)) return -1;
    a->got = i + 1;
    int64_t ki = agpy_field_count(&f[i], &a->in[i]);
    if (ki < 0)
      return agpy_raisef(st, AG_ERR_SHAPE, "%s: shape does not match the field's (k, ...) of width %lld",
                         what, (long long)f[i].width),
             -1;
    if (i == 0) a->k = ki, a->device = a->in[i].on_device;
    if (ki != a->k)
      return agpy_raisef(st, AG_ERR_SHAPE, "%s.add: field '%U' has %lld transitions, field '%U' %lld", who,
                         f[i].name, (long long)ki, f[0].name, (long long)a->k),
             -1;
    if (a->in[i].on_device != a->device)
      return agpy_raisef(st, AG_ERR_INVALID_ARG,
                         "%s.add: fields must all be on the host or all on the device", who),
             -1;
    if (!a->device && !(a->ptr[i] = agpy_in_as(st, &a->in[i], f[i].dtype, &a->scratch[i], what))) return -1;
  }
  return 0;
}

void agpy_fields_release(agpy_fields_in *a, ag_ctx *ctx) {
  agpy_in_release_all(a->in, a->got, ctx);
  for (int i = 0; i < a->got; i++) free(a->scratch[i]);
  a->got = 0;
}

PyObject *agpy_fields_list(const agpy_field *f, int n) {
  PyObject *l = PyList_New(n);
  for (int i = 0; l && i < n; i++) {
    PyObject *t = Py_BuildValue("(OLs)", f[i].name, (long long)f[i].width, ag_dtype_name(f[i].dtype));
    if (!t) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, i, t);
  }
  return l;
}

int agpy_field_set_shape(agpy_state *st, agpy_field *f, int n, int i, PyObject *shape) {
  if (i < 0 || i >= n) return agpy_raisef(st, AG_ERR_OUT_OF_RANGE, "_set_shape: no field %d", i), -1;
  PyObject *sh = PySequence_Fast(shape, "_set_shape: shape must be a sequence of sizes");
  if (!sh) return -1;
  Py_ssize_t nd = PySequence_Fast_GET_SIZE(sh);
  int64_t inner[5], w = 1;
  int ok = nd <= 5;
  for (Py_ssize_t d = 0; ok && d < nd; d++) {
    int64_t v;
    ok = !agpy_convert(st, "_set_shape", "a size", PySequence_Fast_GET_ITEM(sh, d), "L", &v) && v >= 1;
    inner[d] = v;
    w *= ok ? v : 1;
  }
  Py_DECREF(sh);
  if (PyErr_Occurred()) return -1;
  if (!ok || w != f[i].width)
    return agpy_raisef(st, AG_ERR_SHAPE, "the shape of field '%U' must have %lld values", f[i].name,
                       (long long)f[i].width),
           -1;
  memcpy(f[i].inner, inner, sizeof(int64_t) * (size_t)nd);
  f[i].n_inner = (int)nd;
  return 0;
}
