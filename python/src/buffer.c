/* buffer.c — agrl.Buffer: the rows x capacity device table (S1-S22). */
#include "agrl_py.h"

typedef struct agpy_buffer {
  AGPY_ON_CTX;
  ag_buffer *buf; /* NULL once its context is freed */
} agpy_buffer;

/* Copies of more bytes than this run with the GIL released. */
#define AGPY_LONG_COPY ((size_t)1 << 20)

void agpy_buffer_release(PyObject *self) {
  agpy_buffer *b = (agpy_buffer *)self;
  b->buf = NULL; /* ag_ctx_free frees it and its handle */
}

static ag_buffer *buf_get(agpy_buffer *b) {
  if (!b->buf || !b->ctx || !b->ctx->ctx) {
    agpy_raisef(b->st, AG_ERR_FREED, "the buffer's context has been freed");
    return NULL;
  }
  return b->buf;
}

static int buf_init(agpy_buffer *b, PyObject *args, PyObject *kw) {
  PyObject *ctxo, *dto = NULL;
  int64_t rows, cap;
  const agpy_arg spec[] = {
      {"ctx", "O", &ctxo}, {"rows", "L", &rows}, {"capacity", "L", &cap}, {"dtype", "?O", &dto}};
  if (agpy_parse_tuple(b->st, "Buffer", args, kw, 3, spec, 4)) return -1;
  if (b->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "Buffer.__init__ called twice");
    return -1;
  }
  ag_dtype dt = AG_F32;
  if (dto && agpy_dtype_parse(b->st, dto, &dt, "Buffer: dtype")) return -1;
  agpy_ctx *c = agpy_ctx_check(b->st, ctxo, "Buffer");
  if (!c || agpy_lock(c)) return -1;
  ag_ctx *ctx = agpy_ctx_get(c);
  ag_status s = ctx ? ag_buffer_create(ctx, rows, cap, dt, &b->buf) : AG_OK;
  int r = -1;
  if (!ctx)
    ;
  else if (s)
    agpy_raise(b->st, s);
  else if (agpy_ctx_add_dep(c, (PyObject *)b)) {
    ag_buffer_free(b->buf);
    b->buf = NULL;
  } else {
    b->ctx = (agpy_ctx *)Py_NewRef(c);
    r = 0;
  }
  agpy_unlock(c);
  return r;
}

static void buf_dealloc(agpy_buffer *b) {
  if (b->ctx) {
    agpy_lock(b->ctx);
    if (b->buf) ag_buffer_free(b->buf);
    agpy_ctx_drop_dep(b->ctx, (PyObject *)b);
    agpy_unlock(b->ctx);
    Py_DECREF(b->ctx);
  }
  agpy_obj_free((PyObject *)b);
}

/* write(data, col_offset=0): data is (k, rows) (or (rows,) for one column) */
static PyObject *buf_write(agpy_buffer *b, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *data;
  int64_t off = 0;
  const agpy_arg spec[] = {{"data", "O", &data}, {"col_offset", "L", &off}};
  if (agpy_parse(b->st, "Buffer.write", args, nargs, kwnames, 1, spec, 2)) return NULL;
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  ag_ctx *ctx = b->ctx->ctx;
  const int64_t rows = ag_buffer_rows(buf);
  agpy_in in;
  if (agpy_in_get(b->st, ctx, data, &in, "Buffer.write: data")) return NULL;
  int64_t k = -1;
  if (in.ndim == 1 && in.shape[0] == rows)
    k = 1;
  else if (in.ndim == 2 && in.shape[1] == rows)
    k = in.shape[0];
  else if (in.ndim == 0 && rows == 1)
    k = 1;
  PyObject *ret = NULL;
  if (k < 0) {
    agpy_raisef(b->st, AG_ERR_SHAPE,
                "Buffer.write: data must be (k, %lld) or (%lld,), one row per column; got %d dimensions",
                (long long)rows, (long long)rows, in.ndim);
  } else if (in.on_device) {
    ag_tensor *w;
    ag_status s = AG_OK;
    if (k > 0 && !agpy_in_order(b->st, ctx, &in, 1) &&
        !agpy_in_wrap(b->st, ctx, &in, rows, k, &w, "Buffer.write: data")) {
      s = ag_buffer_write_dev(buf, w, off);
      ag_ctx_reset(ctx);
      if (s)
        agpy_raise(b->st, s);
      else
        ret = Py_NewRef(Py_None);
    } else if (k == 0) {
      ret = Py_NewRef(Py_None);
    }
  } else {
    ag_buffer_info info;
    ag_buffer_get_info(buf, &info);
    void *scratch = NULL;
    const void *p = k ? agpy_in_as(b->st, &in, info.dtype, &scratch, "Buffer.write: data") : NULL;
    if (p || !k) {
      ag_status s;
      if ((size_t)(rows * k) * ag_dtype_size(info.dtype) >= AGPY_LONG_COPY) {
        Py_BEGIN_ALLOW_THREADS s = ag_buffer_write(buf, p, info.dtype, rows, k, off);
        Py_END_ALLOW_THREADS
      } else {
        s = ag_buffer_write(buf, p, info.dtype, rows, k, off);
      }
      if (s)
        agpy_raise(b->st, s);
      else
        ret = Py_NewRef(Py_None);
    }
    free(scratch);
  }
  agpy_in_release(&in, ctx);
  return ret;
}

/* read(col_offset=0, k=None, dtype=None): numpy (k, rows) */
static PyObject *buf_read(agpy_buffer *b, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  int64_t off = 0, k = -1;
  int has_k = 0;
  PyObject *ko = Py_None, *dto = Py_None;
  const agpy_arg spec[] = {{"col_offset", "L", &off}, {"k", "O", &ko}, {"dtype", "O", &dto}};
  if (agpy_parse(b->st, "Buffer.read", args, nargs, kwnames, 0, spec, 3)) return NULL;
  if (ko != Py_None) {
    if (agpy_convert(b->st, "Buffer.read", "k", ko, "L", &k)) return NULL;
    has_k = 1;
  }
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  ag_buffer_info info;
  ag_buffer_get_info(buf, &info);
  if (!has_k) k = info.capacity - off;                       /* to the end */
  ag_dtype dt = info.dtype == AG_BF16 ? AG_F32 : info.dtype; /* numpy has no bfloat16 */
  if (dto != Py_None && agpy_dtype_parse(b->st, dto, &dt, "Buffer.read: dtype")) return NULL;
  /* the shape of the result must be known before the C call checks the range */
  if (k < 0)
    return agpy_raisef(b->st, AG_ERR_INVALID_ARG, "Buffer.read: k = %lld must not be negative", (long long)k);
  if (off < 0 || off > info.capacity || k > info.capacity - off)
    return agpy_raisef(b->st, AG_ERR_OUT_OF_RANGE,
                       "Buffer.read: columns %lld..%lld are outside the buffer (capacity %lld)",
                       (long long)off, (long long)(off + k - 1), (long long)info.capacity);
  Py_buffer view;
  int64_t shape[2] = {k, info.rows};
  PyObject *arr = agpy_numpy_empty(b->st, 2, shape, dt, &view);
  if (!arr) return NULL;
  ag_status s;
  if ((size_t)view.len >= AGPY_LONG_COPY) {
    Py_BEGIN_ALLOW_THREADS s = ag_buffer_read(buf, off, k, dt, view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
  } else {
    s = ag_buffer_read(buf, off, k, dt, view.buf, (size_t)view.len);
  }
  PyBuffer_Release(&view);
  if (s) {
    Py_DECREF(arr);
    return agpy_raise(b->st, s);
  }
  return arr;
}

/* get_rows(idx): an agrl.Tensor (n, rows) f32 in a block of its own */
static PyObject *buf_get_rows(agpy_buffer *b, PyObject *idx) {
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  ag_ctx *ctx = b->ctx->ctx;
  agpy_in in;
  if (agpy_in_get(b->st, ctx, idx, &in, "Buffer.get_rows: idx")) return NULL;
  PyObject *ret = NULL;
  void *scratch = NULL;
  ag_block *blk = NULL;
  const int64_t rows = ag_buffer_rows(buf), n = in.numel;
  if (in.ndim > 1) {
    agpy_raisef(b->st, AG_ERR_SHAPE, "Buffer.get_rows: idx must be one-dimensional, got %d dimensions",
                in.ndim);
    goto done;
  }
  if (n < 1) {
    agpy_raisef(b->st, AG_ERR_INVALID_ARG, "Buffer.get_rows: give at least one index");
    goto done;
  }
  const int dt = agpy_in_agdtype(&in);
  if (in.on_device && dt != AG_I32 && dt != AG_I64) {
    PyErr_SetString(PyExc_TypeError, "Buffer.get_rows: device indices must be int32 or int64");
    goto done;
  }
  const int64_t *hidx = NULL;
  if (!in.on_device && !(hidx = agpy_in_as(b->st, &in, AG_I64, &scratch, "Buffer.get_rows: idx"))) goto done;
  ag_status s =
      ag_block_create(ctx, agpy_align((size_t)n * 8) + agpy_align((size_t)(rows * n) * 4) + 512, &blk);
  if (!s) s = ag_ctx_use_block(ctx, blk);
  ag_tensor *out = NULL;
  if (!s) {
    if (in.on_device) {
      ag_tensor *w;
      s = agpy_in_order(b->st, ctx, &in, 1) ? AG_ERR_DEVICE
                                            : ag_tensor_wrap(ctx, in.data, n, 1, n, (ag_dtype)dt, &w);
      if (!s) s = ag_get_rows_dev(buf, w, &out);
    } else {
      s = ag_get_rows(buf, hidx, n, &out);
    }
    ag_ctx_use_block(ctx, NULL);
  }
  if (s)
    agpy_raise(b->st, s);
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

static PyObject *buf_exit(agpy_buffer *b, PyObject *a) {
  (void)a;
  if (b->buf) ag_buffer_free(b->buf);
  Py_RETURN_FALSE;
}

static PyObject *buf_wait(agpy_buffer *b, PyObject *a) {
  (void)a;
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_buffer_wait(buf);
  Py_END_ALLOW_THREADS if (s) return agpy_raise(b->st, s);
  Py_RETURN_NONE;
}

static PyObject *buf_set_scale(agpy_buffer *b, PyObject *v) {
  ag_buffer *buf = buf_get(b);
  if (!buf) return NULL;
  double d;
  if (agpy_convert(b->st, "Buffer.set_scale", "scale", v, "d", &d)) return NULL;
  ag_status s = ag_buffer_set_scale(buf, (float)d);
  if (s) return agpy_raise(b->st, s);
  Py_RETURN_NONE;
}

static int info_of(agpy_buffer *b, ag_buffer_info *info) {
  if (!b->buf || !b->ctx->ctx) {
    agpy_raisef(b->st, AG_ERR_FREED, "the buffer's context has been freed");
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

AGPY_WRAP_FAST(agpy_buffer, buf_write)
AGPY_WRAP_FAST(agpy_buffer, buf_read)
AGPY_WRAP_O(agpy_buffer, buf_get_rows)
AGPY_WRAP_O(agpy_buffer, buf_free)
AGPY_WRAP_O(agpy_buffer, buf_exit)
AGPY_WRAP_O(agpy_buffer, buf_wait)
AGPY_WRAP_O(agpy_buffer, buf_set_scale)
AGPY_WRAP_GET(agpy_buffer, buf_get_rows_n)
AGPY_WRAP_GET(agpy_buffer, buf_get_capacity)
AGPY_WRAP_GET(agpy_buffer, buf_get_dtype)
AGPY_WRAP_GET(agpy_buffer, buf_get_where)
AGPY_WRAP_GET(agpy_buffer, buf_get_generation)
AGPY_WRAP_GET(agpy_buffer, buf_get_scale)

static PyMethodDef buf_methods[] = {
    AGPY_M("write", buf_write, AGPY_FAST,
           "write($self, /, data, col_offset=0)\n--\n\n"
           "Columns col_offset.. from data of shape (k, rows) or (rows,) (host or device arrays)."),
    AGPY_M("read", buf_read, AGPY_FAST,
           "read($self, /, col_offset=0, k=None, dtype=None)\n--\n\nColumns as a numpy array (k, rows)."),
    AGPY_M("get_rows", buf_get_rows, METH_O,
           "get_rows($self, idx, /)\n--\n\n"
           "The columns idx (host or device indices) as an agrl.Tensor (n, rows) of f32 on the device."),
    AGPY_M("wait", buf_wait, METH_NOARGS,
           "wait($self, /)\n--\n\nWaits until every write issued so far is on the device."),
    AGPY_M("set_scale", buf_set_scale, METH_O,
           "set_scale($self, scale, /)\n--\n\nThe factor gathers apply (e.g. 1/255)."),
    AGPY_M("free", buf_free, METH_NOARGS,
           "free($self, /)\n--\n\nReleases the memory; later calls raise FreedError."),
    {"__enter__", agpy_enter, METH_NOARGS, "__enter__($self, /)\n--\n\n"},
    AGPY_M("__exit__", buf_exit, METH_VARARGS, "__exit__($self, *exc_info)\n--\n\nFrees the buffer."),
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef buf_getset[] = {
    {"rows", buf_get_rows_n_w, NULL, "values per column", NULL},
    {"capacity", buf_get_capacity_w, NULL, "columns", NULL},
    {"dtype", buf_get_dtype_w, NULL, "storage dtype", NULL},
    {"where", buf_get_where_w, NULL, "'device', 'host' or 'freed'", NULL},
    {"generation", buf_get_generation_w, NULL, "the device allocation's generation (S19)", NULL},
    {"scale", buf_get_scale_w, NULL, "the gathers' factor", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot buf_slots[] = {
    {Py_tp_new, agpy_obj_new},
    {Py_tp_init, buf_init},
    {Py_tp_dealloc, buf_dealloc},
    {Py_tp_methods, buf_methods},
    {Py_tp_getset, buf_getset},
    {Py_tp_doc,
     "Buffer(ctx, rows, capacity, dtype=None)\n--\n\n"
     "A rows x capacity table on ctx's device (dtype 'f32' by default: f32, f16, bf16, u8, i32)."},
    {0, NULL},
};

PyType_Spec agpy_buffer_spec = {"agrl.Buffer", sizeof(agpy_buffer), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, buf_slots};
