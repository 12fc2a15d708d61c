/* tensor.c — agrl.Tensor: a result in a block, handed to other frameworks
 * through DLPack without a copy.
 *
 * Export follows the DLPack specification: __dlpack__ returns a capsule
 * named "dltensor" (or "dltensor_versioned" when the consumer's max_version
 * allows 1.x); a consumer renames it "used_dltensor(_versioned)" and calls
 * the deleter when done; a capsule never consumed is deleted by its
 * destructor. The deleter only drops the block's reference (no Python API),
 * so it is safe without the GIL and at interpreter exit. The block stays
 * valid until every holder has let go, whatever agrl does meanwhile. */
#include "agrl_py.h"

static DLDataType dl_dtype(ag_dtype dt) {
  DLDataType d = {kDLFloat, 32, 1};
  switch (dt) {
    case AG_F32: break;
    case AG_F16: d.bits = 16; break;
    case AG_BF16: d.code = kDLBfloat, d.bits = 16; break;
    case AG_U8: d.code = kDLUInt, d.bits = 8; break;
    case AG_I32: d.code = kDLInt, d.bits = 32; break;
    default: d.code = kDLInt, d.bits = 64; break;
  }
  return d;
}

PyObject *agpy_tensor_new(agpy_ctx *c, ag_block *blk, void *data, ag_dtype dt, int64_t rows, int64_t cols,
                          int64_t ld, const int64_t *inner, int n_inner) {
  agpy_tensor *t = PyObject_New(agpy_tensor, c->st->tensor_type);
  if (!t) return NULL;
  Py_INCREF(c->st->tensor_type); /* instances of heap types hold their type */
  t->st = c->st;
  Py_INCREF(c);
  t->ctx = c;
  ag_block_retain(blk);
  t->block = blk;
  t->data = data;
  t->dtype = dt;
  t->kind = ag_block_device(blk, &t->index);
  t->rows = rows;
  t->cols = cols;
  t->ld = ld;
  t->shape[0] = cols;
  t->ndim = 1;
  for (int i = 0; i < n_inner && i < 5; i++) t->shape[t->ndim++] = inner[i];
  return (PyObject *)t;
}

PyObject *agpy_tensor_of(agpy_ctx *c, ag_block *blk, ag_tensor *t, const int64_t *inner, int n_inner) {
  void *p;
  int64_t ld;
  ag_status s = ag_tensor_data(t, &p, &ld);
  if (s) return agpy_raise(c->st, s);
  int64_t rows = ag_tensor_rows(t), cols = ag_tensor_cols(t);
  if (!inner && rows > 1) inner = &rows, n_inner = 1; /* (cols, rows); a [1, n] row is (n,) */
  return agpy_tensor_new(c, blk, p, ag_tensor_dtype(t), rows, cols, ld, inner, n_inner);
}

static void tensor_dealloc(agpy_tensor *t) {
  ag_block_release(t->block, NULL); /* safe without the context's lock (agrl/export.h) */
  Py_XDECREF(t->ctx);
  PyTypeObject *tp = Py_TYPE(t);
  PyObject_Free(t);
  Py_DECREF(tp);
}

/* strides in elements: the outer dimension steps ld, the inner ones are
 * contiguous within a column */
static void tensor_strides(const agpy_tensor *t, int64_t *strides) {
  strides[0] = t->ld;
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 1; i--) {
    strides[i] = s;
    s *= t->shape[i];
  }
}

/* ---- DLPack export ---- */

typedef struct export_ctx {
  ag_block *block;
  void *stream; /* where the consumer said it would use the memory */
  int64_t shape[6], strides[6];
} export_ctx;

static void free_export(export_ctx *e) {
  ag_block_release(e->block, e->stream);
  free(e);
}

static void delete_legacy(DLManagedTensor *m) {
  free_export(m->manager_ctx);
  free(m);
}

static void delete_versioned(DLManagedTensorVersioned *m) {
  free_export(m->manager_ctx);
  free(m);
}

static void capsule_destructor(PyObject *cap) {
  /* a capsule nobody consumed: the deleter is ours to call */
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter) m->deleter(m);
  } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m && m->deleter) m->deleter(m);
  }
  PyErr_Restore(type, value, tb);
}

/* The consumer's stream as DLPack numbers it: None is the legacy default
 * stream (1) on CUDA; -1 asks for no synchronisation; 0 is refused. A CPU
 * tensor takes None only. */
static int parse_stream(agpy_tensor *t, PyObject *stream, void **out, int *sync) {
  *out = NULL;
  *sync = 0;
  if (t->kind == AG_DEVICE_CPU) {
    /* the array API: on devices without streams only None is accepted */
    if (stream != Py_None && !PyLong_Check(stream)) {
      PyErr_SetString(PyExc_TypeError, "__dlpack__: stream must be None or an int");
      return -1;
    }
    if (stream != Py_None) {
      PyErr_SetString(PyExc_BufferError, "__dlpack__: a CPU tensor takes stream=None only");
      return -1;
    }
    return 0;
  }
  long long v = 1;
  if (stream != Py_None) {
    if (!PyLong_Check(stream)) {
      PyErr_SetString(PyExc_TypeError, "__dlpack__: stream must be None or an int (a CUDA stream handle)");
      return -1;
    }
    v = PyLong_AsLongLong(stream);
    if (v == -1 && PyErr_Occurred()) return -1;
  }
  if (v == 0) {
    agpy_raisef(t->st, AG_ERR_INVALID_ARG,
                "__dlpack__: stream 0 is ambiguous on CUDA; pass 1 (legacy default), 2 (per-thread default), "
                "a stream handle, or -1 for no synchronisation");
    return -1;
  }
  if (v < -1) {
    agpy_raisef(t->st, AG_ERR_INVALID_ARG, "__dlpack__: stream %lld is not a stream", v);
    return -1;
  }
  if (v == -1) return 0;
  *out = (void *)(uintptr_t)v;
  *sync = 1;
  return 0;
}

/* A capsule over data (a view of blk, which gains a reference): versioned
 * (DLPack 1.x) or legacy; `stream` is kept for the block's release. */
static PyObject *make_capsule(ag_block *blk, void *data, ag_dtype dtype, int ndim, const int64_t *shape,
                              const int64_t *strides, int dev_type, int dev_id, int versioned, void *stream) {
  export_ctx *e = calloc(1, sizeof *e);
  void *m = e ? calloc(1, versioned ? sizeof(DLManagedTensorVersioned) : sizeof(DLManagedTensor)) : NULL;
  if (!m) {
    free(e);
    return PyErr_NoMemory();
  }
  ag_block_retain(blk);
  e->block = blk;
  e->stream = stream;
  memcpy(e->shape, shape, sizeof(int64_t) * (size_t)ndim);
  memcpy(e->strides, strides, sizeof(int64_t) * (size_t)ndim);
  DLTensor *dl;
  if (versioned) {
    DLManagedTensorVersioned *v = m;
    v->version.major = AGPY_DLPACK_MAJOR;
    v->version.minor = AGPY_DLPACK_MINOR;
    v->manager_ctx = e;
    v->deleter = delete_versioned;
    v->flags = 0;
    dl = &v->dl_tensor;
  } else {
    DLManagedTensor *l = m;
    l->manager_ctx = e;
    l->deleter = delete_legacy;
    dl = &l->dl_tensor;
  }
  dl->data = data;
  dl->device.device_type = dev_type;
  dl->device.device_id = dev_id;
  dl->ndim = ndim;
  dl->dtype = dl_dtype(dtype);
  dl->shape = e->shape;
  dl->strides = e->strides;
  dl->byte_offset = 0;
  PyObject *cap = PyCapsule_New(m, versioned ? "dltensor_versioned" : "dltensor", capsule_destructor);
  if (!cap) {
    if (versioned)
      delete_versioned(m);
    else
      delete_legacy(m);
  }
  return cap;
}

PyObject *agpy_capsule_of(ag_block *blk, void *data, ag_dtype dt, int ndim, const int64_t *shape,
                          const int64_t *strides, int dev_type, int dev_id, void *stream) {
  return make_capsule(blk, data, dt, ndim, shape, strides, dev_type, dev_id, 0, stream);
}

PyObject *agpy_hand_out(agpy_ctx *c, ag_block *blk, void *data, ag_dtype dt, int64_t B, int64_t width,
                        const int64_t *inner, int n_inner, PyObject *importer, void *consumer) {
  if (!importer) return agpy_tensor_new(c, blk, data, dt, width, B, width, inner, n_inner);
  int64_t shape[6], strides[6];
  int ndim = 1, index = 0;
  shape[0] = B;
  for (int d = 0; d < n_inner && d < 5; d++) shape[ndim++] = inner[d];
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) strides[d] = st, st *= shape[d];
  const int cuda = ag_block_device(blk, &index) == AG_DEVICE_CUDA;
  PyObject *cap = agpy_capsule_of(blk, data, dt, ndim, shape, strides, cuda ? kDLCUDA : kDLCPU,
                                  cuda ? index : 0, consumer);
  PyObject *t = cap ? PyObject_CallOneArg(importer, cap) : NULL;
  Py_XDECREF(cap);
  return t;
}

/* DLPack's device of a tensor: the CPU, CUDA, or Vulkan (which no consumer
 * maps: an export of Vulkan memory is refused) */
static int dl_device_type(const agpy_tensor *t) {
  return t->kind == AG_DEVICE_CPU ? kDLCPU : t->kind == AG_DEVICE_CUDA ? kDLCUDA : kDLVulkan;
}

static PyObject *tensor_dlpack(agpy_tensor *t, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (nargs) {
    PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
    return NULL;
  }
  const agpy_arg spec[] = {{"stream", "O", &stream},
                           {"max_version", "O", &max_version},
                           {"dl_device", "O", &dl_device},
                           {"copy", "O", &copy}};
  if (agpy_parse(t->st, "__dlpack__", args, 0, kwnames, 0, spec, 4)) return NULL;
  const int dev_type = dl_device_type(t), dev_id = t->kind == AG_DEVICE_CPU ? 0 : t->index;
  if (t->kind == AG_DEVICE_VULKAN) {
    PyErr_SetString(
        PyExc_BufferError,
        "__dlpack__: the tensor is in Vulkan memory, which no DLPack consumer maps; use .numpy() for "
        "a host copy");
    return NULL;
  }
  if (dl_device != Py_None) {
    int want_type, want_id;
    if (!PyTuple_Check(dl_device)) {
      PyErr_Format(PyExc_TypeError,
                   "__dlpack__: dl_device must be a tuple (device_type, device_id), not %.80s",
                   Py_TYPE(dl_device)->tp_name);
      return NULL;
    }
    if (!PyArg_ParseTuple(dl_device, "ii:dl_device", &want_type, &want_id)) return NULL;
    if (want_type != dev_type || want_id != dev_id) {
      PyErr_Format(
          PyExc_BufferError,
          "__dlpack__: the tensor is on device (%d, %d); it cannot be exported to (%d, %d) without a "
          "copy (use .numpy() for a host copy)",
          dev_type, dev_id, want_type, want_id);
      return NULL;
    }
  }
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: copy=True is not supported; agrl exports its memory in place");
    return NULL;
  }
  int versioned = 0;
  if (max_version != Py_None) {
    unsigned major = 0, minor = 0;
    if (!PyTuple_Check(max_version)) {
      PyErr_Format(PyExc_TypeError, "__dlpack__: max_version must be a tuple (major, minor), not %.80s",
                   Py_TYPE(max_version)->tp_name);
      return NULL;
    }
    if (!PyArg_ParseTuple(max_version, "II:max_version", &major, &minor)) return NULL;
    versioned = major >= 1;
  }
  void *consumer = NULL;
  int sync = 0;
  if (parse_stream(t, stream, &consumer, &sync)) return NULL;
  /* the consumer's stream waits for agrl's queue (when the context still
   * runs on this device; a freed or moved context has waited already) */
  if (sync && t->ctx->ctx && ag_ctx_device(t->ctx->ctx) == t->kind &&
      ag_ctx_device_index(t->ctx->ctx) == t->index) {
    ag_status s = ag_stream_wait_ctx(t->ctx->ctx, consumer);
    if (s) return agpy_raise(t->st, s);
  }
  int64_t strides[6];
  tensor_strides(t, strides);
  return make_capsule(t->block, t->data, t->dtype, t->ndim, t->shape, strides, dev_type, dev_id, versioned,
                      consumer);
}
AGPY_WRAP_FAST(agpy_tensor, tensor_dlpack)

static PyObject *tensor_dlpack_device(agpy_tensor *t, PyObject *a) {
  (void)a;
  return Py_BuildValue("(ii)", dl_device_type(t), t->kind == AG_DEVICE_CPU ? 0 : t->index);
}

/* ---- host copies ---- */

static PyObject *tensor_numpy(agpy_tensor *t, PyObject *a) {
  (void)a;
  Py_buffer view;
  PyObject *arr = agpy_numpy_empty(t->st, t->ndim, t->shape, t->dtype, &view);
  if (!arr) return NULL;
  const size_t es = ag_dtype_size(t->dtype), col = (size_t)t->rows * es;
  ag_status s = AG_OK;
  if (t->kind == AG_DEVICE_CPU) {
    for (int64_t c = 0; c < t->cols; c++)
      memcpy((char *)view.buf + (size_t)c * col, (const char *)t->data + (size_t)(c * t->ld) * es, col);
  } else {
    /* through the context when it is on the tensor's device, else through one made for the copy */
    ag_ctx *ctx = t->ctx->ctx, *own = NULL;
    if (!ctx || ag_ctx_device(ctx) != t->kind || ag_ctx_device_index(ctx) != t->index) {
      s = ag_ctx_create(&own, t->kind, t->index);
      ctx = own;
    }
    ag_tensor *w = NULL;
    if (!s) s = ag_tensor_wrap(ctx, t->data, t->rows, t->cols, t->ld, t->dtype, &w);
    if (!s) {
      Py_BEGIN_ALLOW_THREADS s = ag_tensor_read(w, view.buf, (size_t)view.len);
      Py_END_ALLOW_THREADS
    }
    if (own)
      ag_ctx_free(own);
    else if (ctx)
      ag_ctx_reset(ctx);
  }
  PyBuffer_Release(&view);
  if (s) {
    Py_DECREF(arr);
    return agpy_raise(t->st, s);
  }
  return arr;
}
AGPY_WRAP_O(agpy_tensor, tensor_numpy)

static PyObject *tensor_array(agpy_tensor *t, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *dtype = Py_None, *copy = Py_None;
  const agpy_arg spec[] = {{"dtype", "O", &dtype}, {"copy", "O", &copy}};
  if (agpy_parse(t->st, "__array__", args, nargs, kwnames, 0, spec, 2)) return NULL;
  if (copy == Py_False) {
    PyErr_SetString(PyExc_ValueError,
                    "__array__: an agrl.Tensor is copied to the host; copy=False is refused");
    return NULL;
  }
  PyObject *arr = tensor_numpy(t, NULL);
  if (!arr || dtype == Py_None) return arr;
  PyObject *r = PyObject_CallMethod(arr, "astype", "O", dtype);
  Py_DECREF(arr);
  return r;
}
AGPY_WRAP_FAST(agpy_tensor, tensor_array)

static PyObject *tensor_tolist(agpy_tensor *t, PyObject *a) {
  (void)a;
  PyObject *arr = tensor_numpy(t, NULL);
  if (!arr) return NULL;
  PyObject *l = PyObject_CallMethod(arr, "tolist", NULL);
  Py_DECREF(arr);
  return l;
}
AGPY_WRAP_O(agpy_tensor, tensor_tolist)

static PyObject *tensor_get_shape(agpy_tensor *t, void *x) {
  (void)x;
  PyObject *s = PyTuple_New(t->ndim);
  for (int i = 0; s && i < t->ndim; i++) {
    PyObject *v = PyLong_FromLongLong(t->shape[i]);
    if (!v) {
      Py_CLEAR(s);
      break;
    }
    PyTuple_SET_ITEM(s, i, v);
  }
  return s;
}

static PyObject *tensor_get_strides(agpy_tensor *t, void *x) {
  (void)x;
  int64_t st[6];
  tensor_strides(t, st);
  PyObject *s = PyTuple_New(t->ndim);
  for (int i = 0; s && i < t->ndim; i++) {
    PyObject *v = PyLong_FromLongLong(st[i]);
    if (!v) {
      Py_CLEAR(s);
      break;
    }
    PyTuple_SET_ITEM(s, i, v);
  }
  return s;
}

static PyObject *tensor_get_dtype(agpy_tensor *t, void *x) {
  (void)x;
  return PyUnicode_FromString(ag_dtype_name(t->dtype));
}

static PyObject *tensor_get_device(agpy_tensor *t, void *x) {
  (void)x;
  if (t->kind == AG_DEVICE_CPU) return PyUnicode_FromString("cpu");
  return PyUnicode_FromFormat("%s:%d", t->kind == AG_DEVICE_VULKAN ? "vulkan" : "cuda", t->index);
}

static PyObject *tensor_get_ptr(agpy_tensor *t, void *x) {
  (void)x;
  return PyLong_FromVoidPtr(t->data);
}

static Py_ssize_t tensor_len(agpy_tensor *t) { return (Py_ssize_t)t->shape[0]; }

static PyObject *tensor_repr(agpy_tensor *t) {
  PyObject *shape = tensor_get_shape(t, NULL), *dev = tensor_get_device(t, NULL);
  PyObject *r = shape && dev
                    ? PyUnicode_FromFormat("<agrl.Tensor %R %s on %U>", shape, ag_dtype_name(t->dtype), dev)
                    : NULL;
  Py_XDECREF(shape);
  Py_XDECREF(dev);
  return r;
}

static PyMethodDef tensor_methods[] = {
    AGPY_M("__dlpack__", tensor_dlpack, AGPY_FAST,
           "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
           "A DLPack capsule sharing the memory; the consumer's `stream` waits for agrl's queue first."),
    {"__dlpack_device__", (PyCFunction)tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(device_type, device_id) as DLPack numbers them."},
    AGPY_M("numpy", tensor_numpy, METH_NOARGS, "numpy($self, /)\n--\n\nA host copy as a numpy array."),
    AGPY_M("__array__", tensor_array, AGPY_FAST,
           "__array__($self, /, dtype=None, copy=None)\n--\n\nA host copy as a numpy array (numpy.asarray)."),
    AGPY_M("tolist", tensor_tolist, METH_NOARGS,
           "tolist($self, /)\n--\n\nThe values as (nested) Python lists."),
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_get_shape, NULL, "the shape (batch first)", NULL},
    {"strides", (getter)tensor_get_strides, NULL, "strides in elements", NULL},
    {"dtype", (getter)tensor_get_dtype, NULL, "'f32', 'i32' ...", NULL},
    {"device", (getter)tensor_get_device, NULL, "'cpu', 'cuda:N' or 'vulkan:N'", NULL},
    {"data_ptr", (getter)tensor_get_ptr, NULL, "the address of the first element", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *tensor_new_refused(PyTypeObject *type, PyObject *args, PyObject *kw) {
  (void)type, (void)args, (void)kw;
  PyErr_SetString(PyExc_TypeError, "agrl.Tensor objects are made by agrl (sample, get_rows), not directly");
  return NULL;
}

static PyType_Slot tensor_slots[] = {
    {Py_tp_new, tensor_new_refused},
    {Py_tp_dealloc, tensor_dealloc},
    {Py_tp_repr, tensor_repr},
    {Py_sq_length, tensor_len},
    {Py_tp_methods, tensor_methods},
    {Py_tp_getset, tensor_getset},
    {Py_tp_doc,
     "A result of agrl on its device; hand it to torch, JAX, CuPy or numpy with their from_dlpack."},
    {0, NULL},
};

PyType_Spec agpy_tensor_spec = {"agrl.Tensor", sizeof(agpy_tensor), 0, Py_TPFLAGS_DEFAULT, tensor_slots};
