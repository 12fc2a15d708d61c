/* buffer.c — agrl.Buffer: the rows x capacity device table (S1-S22). */
#include "agrl_py.h"

typedef struct agpy_buffer {
  PyObject_HEAD agpy_ctx *ctx;
  ag_buffer *buf; /* NULL once its context is freed */
} agpy_buffer;

void agpy_buffer_release(PyObject *self) {
  agpy_buffer *b = (agpy_buffer *)self;
  b->buf = NULL; /* ag_ctx_free frees it and its handle */
}

static ag_buffer *buf_get(agpy_buffer *b) {
  if (!b->buf || !b->ctx || !b->ctx->ctx) {
    agpy_raisef(AG_ERR_FREED, "the buffer's context has been freed");
    return NULL;
  }
  return b->buf;
}

static int buf_init(agpy_buffer *b, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"ctx", "rows", "capacity", "dtype", NULL};
  PyObject *ctxo, *dto = NULL;
  long long rows, cap;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OLL|O:Buffer", kwlist, &ctxo, &rows, &cap, &dto)) return -1;
  if (b->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "Buffer.__init__ called twice");
    return -1;
  }
  ag_dtype dt = AG_F32;
  if (dto && agpy_dtype_parse(dto, &dt, "Buffer: dtype")) return -1;
  if (!PyObject_TypeCheck(ctxo, &agpy_ctx_type)) {
    PyErr_Format(PyExc_TypeError, "Buffer: ctx must be an agrl.Context, not %.80s", Py_TYPE(ctxo)->tp_name);
    return -1;
  }
  agpy_ctx *c = (agpy_ctx *)ctxo;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return -1;
  ag_status s = ag_buffer_create(ctx, rows, cap, dt, &b->buf);
  if (s) {
    agpy_raise(s);
    return -1;
  }
  if (agpy_ctx_add_dep(c, (PyObject *)b)) {
    ag_buffer_free(b->buf);
    b->buf = NULL;
    return -1;
  }
  Py_INCREF(c);
  b->ctx = c;
  return 0;
}

static void buf_dealloc(agpy_buffer *b) {
  if (b->buf) ag_buffer_free(b->buf);
  if (b->ctx) {
    agpy_ctx_drop_dep(b->ctx, (PyObject *)b);
    Py_DECREF(b->ctx);
  }
  Py_TYPE(b)->tp_free((PyObject *)b);
}

/* write(data, col_offset=0): data is (k, rows) (or (rows,) for one column) */
static PyObject *buf_write(agpy_buffer *b, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"data", "col_offset", NULL};
  PyObject *data;
  long long off = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|L:write", kwlist, &data, &off)) return NULL;
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  ag_ctx *ctx = b->ctx->ctx;
  const int64_t rows = ag_buffer_rows(buf);
  agpy_in in;
  if (agpy_in_get(ctx, data, &in, "Buffer.write: data")) return NULL;
  int64_t k = -1;
  if (in.ndim == 1 && in.shape[0] == rows)
    k = 1;
  else if (in.ndim == 2 && in.shape[1] == rows)
    k = in.shape[0];
  else if (in.ndim == 0 && rows == 1)
    k = 1;
  PyObject *ret = NULL;
  if (k < 0) {
    agpy_raisef(AG_ERR_SHAPE,
                "Buffer.write: data must be (k, %lld) or (%lld,), one row per column; got %d dimensions",
                (long long)rows, (long long)rows, in.ndim);
  } else if (in.on_device) {
    ag_tensor *w;
    ag_status s = AG_OK;
    if (k > 0 && !agpy_in_wrap(ctx, &in, rows, k, &w, "Buffer.write: data")) {
      s = ag_buffer_write_dev(buf, w, off);
      ag_ctx_reset(ctx);
      if (s)
        agpy_raise(s);
      else
        ret = Py_NewRef(Py_None);
    } else if (k == 0) {
      ret = Py_NewRef(Py_None);
    }
  } else {
    ag_buffer_info info;
    ag_buffer_get_info(buf, &info);
    void *scratch = NULL;
    const void *p = k ? agpy_in_as(&in, info.dtype, &scratch, "Buffer.write: data") : NULL;
    if (p || !k) {
      ag_status s = ag_buffer_write(buf, p, info.dtype, rows, k, off);
      if (s)
        agpy_raise(s);
      else
        ret = Py_NewRef(Py_None);
    }
    free(scratch);
  }
  agpy_in_release(&in, ctx);
  return ret;
}

/* read(col_offset=0, k=None, dtype=None): numpy (k, rows) */
static PyObject *buf_read(agpy_buffer *b, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"col_offset", "k", "dtype", NULL};
  long long off = 0;
  PyObject *ko = Py_None, *dto = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|LOO:read", kwlist, &off, &ko, &dto)) return NULL;
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  ag_buffer_info info;
  ag_buffer_get_info(buf, &info);
  long long k = info.capacity - off;
  if (ko != Py_None) {
    k = PyLong_AsLongLong(ko);
    if (k == -1 && PyErr_Occurred()) return NULL;
  }
  ag_dtype dt = info.dtype == AG_BF16 ? AG_F32 : info.dtype; /* numpy has no bfloat16 */
  if (dto != Py_None && agpy_dtype_parse(dto, &dt, "Buffer.read: dtype")) return NULL;
  if (k < 0) return agpy_raisef(AG_ERR_INVALID_ARG, "Buffer.read: k = %lld must not be negative", k);
  if (off < 0 || off > info.capacity || k > info.capacity - off)
    return agpy_raisef(AG_ERR_OUT_OF_RANGE,
                       "Buffer.read: columns %lld..%lld are outside the buffer (capacity %lld)", off,
                       off + k - 1, (long long)info.capacity);
  Py_buffer view;
  int64_t shape[2] = {k, info.rows};
  PyObject *arr = agpy_numpy_empty(2, shape, dt, &view);
  if (!arr) return NULL;
  ag_status s = ag_buffer_read(buf, off, k, dt, view.buf, (size_t)view.len);
  PyBuffer_Release(&view);
  if (s) {
    Py_DECREF(arr);
    return agpy_raise(s);
  }
  return arr;
}

/* get_rows(idx): an agrl.Tensor (n, rows) f32 in a block of its own */
static PyObject *buf_get_rows(agpy_buffer *b, PyObject *idx) {
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  ag_ctx *ctx = b->ctx->ctx;
  agpy_in in;
  if (agpy_in_get(ctx, idx, &in, "Buffer.get_rows: idx")) return NULL;
  PyObject *ret = NULL;
  void *scratch = NULL;
  ag_block *blk = NULL;
  const int64_t rows = ag_buffer_rows(buf), n = in.numel;
  if (in.ndim > 1) {
    agpy_raisef(AG_ERR_SHAPE, "Buffer.get_rows: idx must be one-dimensional, got %d dimensions", in.ndim);
    goto done;
  }
  if (n < 1) {
    agpy_raisef(AG_ERR_INVALID_ARG, "Buffer.get_rows: give at least one index");
    goto done;
  }
  const int dt = agpy_in_agdtype(&in);
  if (in.on_device && dt != AG_I32 && dt != AG_I64) {
    PyErr_SetString(PyExc_TypeError, "Buffer.get_rows: device indices must be int32 or int64");
    goto done;
  }
  const int64_t *hidx = NULL;
  if (!in.on_device && !(hidx = agpy_in_as(&in, AG_I64, &scratch, "Buffer.get_rows: idx"))) goto done;
  ag_status s =
      ag_block_create(ctx, agpy_align((size_t)n * 8) + agpy_align((size_t)(rows * n) * 4) + 512, &blk);
  if (!s) s = ag_ctx_use_block(ctx, blk);
  ag_tensor *out = NULL;
  if (!s) {
    if (in.on_device) {
      ag_tensor *w;
      s = ag_tensor_wrap(ctx, in.data, n, 1, n, (ag_dtype)dt, &w);
      if (!s) s = ag_get_rows_dev(buf, w, &out);
    } else {
      s = ag_get_rows(buf, hidx, n, &out);
    }
    ag_ctx_use_block(ctx, NULL);
  }
  if (s)
    agpy_raise(s);
  else
    ret = agpy_tensor_of(b->ctx, blk, out, &rows, 1);
  ag_ctx_reset(ctx);
done:
  ag_block_release(blk, NULL);
  free(scratch);
  agpy_in_release(&in, ctx);
  return ret;
}

static PyObject *buf_free(agpy_buffer *b, PyObject *a) {
  (void)a;
  if (b->buf) ag_buffer_free(b->buf); /* the handle stays: later calls say it was freed */
  Py_RETURN_NONE;
}

static PyObject *buf_wait(agpy_buffer *b, PyObject *a) {
  (void)a;
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  ag_status s = ag_buffer_wait(buf);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

static PyObject *buf_set_scale(agpy_buffer *b, PyObject *v) {
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  double d = PyFloat_AsDouble(v);
  if (d == -1.0 && PyErr_Occurred()) return NULL;
  ag_status s = ag_buffer_set_scale(buf, (float)d);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

static PyObject *buf_enter(agpy_buffer *b, PyObject *a) {
  (void)a;
  return Py_NewRef(b);
}

static PyObject *buf_exit(agpy_buffer *b, PyObject *a) {
  (void)a;
  if (b->buf) ag_buffer_free(b->buf);
  Py_RETURN_FALSE;
}

static int info_of(agpy_buffer *b, ag_buffer_info *info) {
  if (!b->buf || !b->ctx->ctx) {
    agpy_raisef(AG_ERR_FREED, "the buffer's context has been freed");
    return -1;
  }
  ag_buffer_get_info(b->buf, info);
  return 0;
}

static PyObject *buf_get_rows_n(agpy_buffer *b, void *x) {
  (void)x;
  ag_buffer_info i;
  return info_of(b, &i) ? NULL : PyLong_FromLongLong(i.rows);
}

static PyObject *buf_get_capacity(agpy_buffer *b, void *x) {
  (void)x;
  ag_buffer_info i;
  return info_of(b, &i) ? NULL : PyLong_FromLongLong(i.capacity);
}

static PyObject *buf_get_dtype(agpy_buffer *b, void *x) {
  (void)x;
  ag_buffer_info i;
  return info_of(b, &i) ? NULL : PyUnicode_FromString(ag_dtype_name(i.dtype));
}

static PyObject *buf_get_where(agpy_buffer *b, void *x) {
  (void)x;
  if (!b->buf || !b->ctx->ctx) return PyUnicode_FromString("freed");
  ag_buffer_info i;
  ag_buffer_get_info(b->buf, &i);
  return PyUnicode_FromString(i.where == AG_WHERE_HOST     ? "host"
                              : i.where == AG_WHERE_DEVICE ? "device"
                                                           : "freed");
}

static PyObject *buf_get_generation(agpy_buffer *b, void *x) {
  (void)x;
  ag_buffer_info i;
  return info_of(b, &i) ? NULL : PyLong_FromUnsignedLongLong(i.generation);
}

static PyObject *buf_get_scale(agpy_buffer *b, void *x) {
  (void)x;
  ag_buffer_info i;
  return info_of(b, &i) ? NULL : PyFloat_FromDouble(i.scale);
}

static PyMethodDef buf_methods[] = {
    {"write", (PyCFunction)(void (*)(void))buf_write, METH_VARARGS | METH_KEYWORDS,
     "write(data, col_offset=0): columns col_offset.. from data of shape (k, rows) (host or device)."},
    {"read", (PyCFunction)(void (*)(void))buf_read, METH_VARARGS | METH_KEYWORDS,
     "read(col_offset=0, k=None, dtype=None): columns as a numpy array (k, rows)."},
    {"get_rows", (PyCFunction)buf_get_rows, METH_O,
     "get_rows(idx): the columns idx (host or device indices) as an agrl.Tensor (n, rows) of f32 on the "
     "device."},
    {"wait", (PyCFunction)buf_wait, METH_NOARGS, "Waits until every write issued so far is on the device."},
    {"set_scale", (PyCFunction)buf_set_scale, METH_O, "set_scale(s): the factor gathers apply (e.g. 1/255)."},
    {"free", (PyCFunction)buf_free, METH_NOARGS, "Releases the memory; later calls raise FreedError."},
    {"__enter__", (PyCFunction)buf_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)buf_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef buf_getset[] = {
    {"rows", (getter)buf_get_rows_n, NULL, "values per column", NULL},
    {"capacity", (getter)buf_get_capacity, NULL, "columns", NULL},
    {"dtype", (getter)buf_get_dtype, NULL, "storage dtype", NULL},
    {"where", (getter)buf_get_where, NULL, "'device', 'host' or 'freed'", NULL},
    {"generation", (getter)buf_get_generation, NULL, "the device allocation's generation (S19)", NULL},
    {"scale", (getter)buf_get_scale, NULL, "the gathers' factor", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject agpy_buffer_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "agrl.Buffer",
    .tp_basicsize = sizeof(agpy_buffer),
    .tp_dealloc = (destructor)buf_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Buffer(ctx, rows, capacity, dtype='f32'): a rows x capacity table on ctx's device.",
    .tp_methods = buf_methods,
    .tp_getset = buf_getset,
    .tp_init = (initproc)buf_init,
    .tp_new = PyType_GenericNew,
};
