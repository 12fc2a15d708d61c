/* input.c — reading arrays handed to agrl: DLPack producers (torch, JAX,
 * CuPy, numpy), the buffer protocol, Python numbers and lists.
 *
 * Device data is taken in place: the producer is asked (through __dlpack__'s
 * stream argument) to order its work before agrl's queue, and its deleter
 * runs once agrl's queued work that reads the memory has finished
 * (ag_ctx_defer). Host data is read during the call and let go at its end.
 * Only C-contiguous layouts are taken; anything else is refused with a
 * message instead of being copied behind the caller's back. */
#include <math.h>

#include "agrl_py.h"
#include "base/convert.h"

int agpy_in_agdtype(const agpy_in *in) {
  const DLDataType d = in->dt;
  if (d.lanes != 1) return -1;
  if (d.code == kDLFloat && d.bits == 32) return AG_F32;
  if (d.code == kDLFloat && d.bits == 16) return AG_F16;
  if (d.code == kDLBfloat && d.bits == 16) return AG_BF16;
  if ((d.code == kDLUInt || d.code == kDLBool) && d.bits == 8) return AG_U8;
  if (d.code == kDLInt && d.bits == 32) return AG_I32;
  if (d.code == kDLInt && d.bits == 64) return AG_I64;
  return -1;
}

static void dtype_str(DLDataType d, char *out, size_t n) {
  static const char *const codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  snprintf(out, n, "%s%u", d.code < 7 ? codes[d.code] : "?", (unsigned)d.bits);
}

typedef struct deferred_deleter {
  void *managed;
  int versioned;
} deferred_deleter;

void agpy_dlpack_release(void *managed, int versioned) {
  if (!managed) return;
  if (versioned) {
    DLManagedTensorVersioned *v = managed;
    if (v->deleter) v->deleter(v);
  } else {
    DLManagedTensor *l = managed;
    if (l->deleter) l->deleter(l);
  }
}

static void run_deferred(void *arg) {
  deferred_deleter *d = arg;
  agpy_dlpack_release(d->managed, d->versioned);
  free(d);
}

void agpy_in_release_all(agpy_in *in, int n, ag_ctx *ctx) {
  /* one wait per framework stream, however many of its tensors were read */
  for (int i = 0; i < n; i++) {
    if (!in[i].held || !in[i].on_device) continue;
    for (int j = i + 1; j < n; j++)
      if (in[j].held && in[j].on_device && in[j].stream == in[i].stream) in[j].stream_done = 1;
  }
  for (int i = 0; i < n; i++) agpy_in_release(&in[i], ctx);
}

void agpy_in_release(agpy_in *in, ag_ctx *ctx) {
  if (in->held) {
    /* the framework's stream waits for agrl's reads: memory it frees and
     * reuses on that stream is written only after them */
    if (in->on_device && ctx && !in->stream_done) ag_stream_wait_ctx(ctx, in->stream);
    Py_CLEAR(in->held);
  }
  if (in->has_view) PyBuffer_Release(&in->view);
  in->has_view = 0;
  free(in->tmp);
  in->tmp = NULL;
  if (in->managed) {
    deferred_deleter *d = in->on_device && ctx ? malloc(sizeof *d) : NULL;
    if (d) {
      d->managed = in->managed;
      d->versioned = in->versioned;
      ag_ctx_defer(ctx, run_deferred, d);
    } else {
      if (in->on_device && ctx) ag_ctx_sync(ctx); /* no memory for the wait: wait now */
      agpy_dlpack_release(in->managed, in->versioned);
    }
    in->managed = NULL;
  }
}

/* Checks the layout (C-contiguous, no negative strides) of a DLTensor. */
static int check_layout(agpy_state *st, const DLTensor *dl, const char *what) {
  if (dl->ndim < 0 || dl->ndim > 8) {
    agpy_raisef(st, AG_ERR_SHAPE, "%s: %d dimensions (at most 8)", what, (int)dl->ndim);
    return -1;
  }
  if (dl->dtype.lanes != 1) {
    PyErr_Format(PyExc_TypeError, "%s: vector dtypes (lanes %u) are not supported", what,
                 (unsigned)dl->dtype.lanes);
    return -1;
  }
  for (int i = 0; i < dl->ndim; i++)
    if (dl->shape[i] < 0) {
      agpy_raisef(st, AG_ERR_SHAPE, "%s: dimension %d has negative size", what, i);
      return -1;
    }
  if (!dl->strides) return 0;
  for (int i = 0; i < dl->ndim; i++)
    if (dl->shape[i] == 0) return 0; /* no elements: any strides (numpy gives 0) */
  int64_t expect = 1;
  for (int i = dl->ndim - 1; i >= 0; i--) {
    if (dl->shape[i] > 1) {
      if (dl->strides[i] < 0) {
        agpy_raisef(st, AG_ERR_SHAPE, "%s: negative strides are not supported (dimension %d has stride %lld)",
                    what, i, (long long)dl->strides[i]);
        return -1;
      }
      if (dl->strides[i] != expect) {
        agpy_raisef(st, AG_ERR_SHAPE,
                    "%s: the array is not C-contiguous (dimension %d has stride %lld, expected %lld); pass a "
                    "contiguous copy",
                    what, i, (long long)dl->strides[i], (long long)expect);
        return -1;
      }
    }
    expect *= dl->shape[i];
  }
  return 0;
}

DLTensor *agpy_dlpack_take(agpy_state *st, PyObject *obj, PyObject *stream, void **managed, int *versioned,
                           int *readonly, const char *what) {
  *managed = NULL;
  *versioned = *readonly = 0;
  PyObject *kw = Py_BuildValue("{s:(ii)}", "max_version", AGPY_DLPACK_MAJOR, AGPY_DLPACK_MINOR);
  if (kw && stream && PyDict_SetItemString(kw, "stream", stream) < 0) Py_CLEAR(kw);
  PyObject *meth = kw ? PyObject_GetAttr(obj, st->s_dlpack) : NULL, *cap = NULL, *empty = PyTuple_New(0);
  if (meth && empty) {
    cap = PyObject_Call(meth, empty, kw);
    if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) { /* a producer before DLPack 1.0 */
      PyErr_Clear();
      PyDict_DelItemString(kw, "max_version");
      cap = PyObject_Call(meth, empty, kw);
    }
  }
  Py_XDECREF(empty);
  Py_XDECREF(meth);
  Py_XDECREF(kw);
  if (!cap) return NULL;
  DLTensor *dl = NULL;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m->version.major != 1) {
      Py_DECREF(cap);
      PyErr_Format(PyExc_BufferError, "%s: DLPack version %u.%u is not supported", what, m->version.major,
                   m->version.minor);
      return NULL;
    }
    PyCapsule_SetName(cap, "used_dltensor_versioned");
    *managed = m;
    *versioned = 1;
    *readonly = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    dl = &m->dl_tensor;
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    PyCapsule_SetName(cap, "used_dltensor");
    *managed = m;
    dl = &m->dl_tensor;
  } else {
    PyErr_Format(PyExc_TypeError, "%s: __dlpack__ did not return a DLPack capsule", what);
  }
  Py_DECREF(cap);
  return dl;
}

static int from_dlpack(agpy_state *st, ag_ctx *ctx, PyObject *obj, agpy_in *in, const char *what) {
  PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
  if (!dev) return -1;
  int dev_type = 0, dev_id = 0;
  int ok = PyTuple_Check(dev) && PyArg_ParseTuple(dev, "ii", &dev_type, &dev_id);
  if (!ok && !PyErr_Occurred())
    PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__ did not return a tuple (device_type, device_id)",
                 what);
  Py_DECREF(dev);
  if (!ok) return -1;
  PyObject *stream = Py_None;
  if (dev_type == kDLCUDA) {
    if (!ctx || ag_ctx_device(ctx) != AG_DEVICE_CUDA || ag_ctx_device_index(ctx) != dev_id) {
      if (!ctx)
        agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: device memory (cuda:%d) is not taken here; pass host data",
                    what, dev_id);
      else
        agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: the array is on cuda:%d, the context on %s", what, dev_id,
                    ag_ctx_device_name(ctx));
      return -1;
    }
    stream = PyLong_FromVoidPtr(ag_ctx_native_stream(ctx));
    if (!stream) return -1;
    in->on_device = 1;
  } else if (dev_type != kDLCPU && dev_type != kDLCUDAHost) {
    agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: arrays on DLPack device type %d are not supported", what,
                dev_type);
    return -1;
  }
  int readonly;
  DLTensor *dl = agpy_dlpack_take(st, obj, stream, &in->managed, &in->versioned, &readonly, what);
  if (stream != Py_None) Py_DECREF(stream);
  if (!dl) return -1;
  if (check_layout(st, dl, what)) return -1;
  in->data = (char *)dl->data + dl->byte_offset;
  in->dt = dl->dtype;
  in->ndim = dl->ndim;
  in->numel = 1;
  for (int i = 0; i < dl->ndim; i++) in->shape[i] = dl->shape[i], in->numel *= dl->shape[i];
  if (in->on_device && agpy_in_agdtype(in) < 0) {
    char d[32];
    dtype_str(in->dt, d, sizeof d);
    PyErr_Format(PyExc_TypeError,
                 "%s: device arrays of %s are not supported (f32, f16, bf16, u8, bool, i32, i64)", what, d);
    return -1;
  }
  return 0;
}

/* ---- torch tensors, read through their own accessors ----
 * torch.Tensor.__dlpack__ is Python code that costs several microseconds a
 * call; a tensor's data_ptr, dtype, shape and device are C accessors. torch
 * is never imported here: it is found in sys.modules once a caller hands
 * in one of its tensors. */

static const char *const torch_dtype_names[AG_DTYPE_COUNT_ + 1] = {"float32", "float16", "bfloat16", "uint8",
                                                                   "int32",   "int64",   "bool"};

static PyObject *attr_path(PyObject *root, const char *path) {
  PyObject *o = Py_NewRef(root);
  char part[64];
  while (o && *path) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    if (n >= sizeof part) n = sizeof part - 1;
    memcpy(part, path, n);
    part[n] = 0;
    PyObject *next = PyObject_GetAttrString(o, part);
    Py_DECREF(o);
    o = next;
    path += n + (dot ? 1 : 0);
  }
  return o;
}

static int torch_find(agpy_state *st) {
  if (st->torch_state) return st->torch_state;
  PyObject *mods = PyImport_GetModuleDict();
  PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL; /* borrowed */
  if (!torch) return 0;                                                /* not imported (yet) */
  st->torch_tensor = PyObject_GetAttrString(torch, "Tensor");
  for (int i = 0; st->torch_tensor && i <= AG_DTYPE_COUNT_; i++)
    st->torch_dtypes[i] = PyObject_GetAttrString(torch, torch_dtype_names[i]);
  if (!st->torch_tensor || PyErr_Occurred()) {
    PyErr_Clear();
    st->torch_state = -1;
    return -1;
  }
  /* the fast query of the current stream, else the public one */
  st->torch_raw_stream = attr_path(torch, "_C._cuda_getCurrentRawStream");
  if (!st->torch_raw_stream) PyErr_Clear();
  st->torch_current_stream = attr_path(torch, "cuda.current_stream");
  if (!st->torch_current_stream) PyErr_Clear();
  PyObject *dl = PyImport_ImportModule("torch.utils.dlpack");
  if (dl) {
    st->torch_from_dlpack = PyObject_GetAttrString(dl, "from_dlpack");
    Py_DECREF(dl);
  }
  if (!st->torch_from_dlpack) PyErr_Clear();
  /* DLPack's C exchange table, where this torch has one of a layout agrl
   * knows (1.x with x >= 3) */
  PyObject *cap = PyObject_GetAttrString(st->torch_tensor, "__dlpack_c_exchange_api__");
  const DLPackExchangeAPI *x = cap && PyCapsule_IsValid(cap, "dlpack_exchange_api")
                                   ? PyCapsule_GetPointer(cap, "dlpack_exchange_api")
                                   : NULL;
  if (x && x->header.version.major == 1 && x->header.version.minor >= 3 &&
      x->dltensor_from_py_object_no_sync && x->current_work_stream) {
    st->torch_xapi = x;
    st->torch_xapi_capsule = cap;
  } else {
    Py_XDECREF(cap);
  }
  PyErr_Clear();
  st->torch_state = 1;
  return 1;
}

int agpy_is_torch(agpy_state *st, PyObject *obj) {
  if (st->torch_state <= 0 && torch_find(st) <= 0) return 0;
  return PyObject_TypeCheck(obj, (PyTypeObject *)st->torch_tensor);
}

void *agpy_torch_stream(agpy_state *st, int index) {
  PyObject *r = NULL;
  if (st->torch_xapi) {
    void *s = NULL;
    return st->torch_xapi->current_work_stream(kDLCUDA, index, &s) ? (void *)-1 : s;
  }
  if (st->torch_raw_stream) {
    PyObject *i = PyLong_FromLong(index);
    if (i) r = PyObject_CallOneArg(st->torch_raw_stream, i);
    Py_XDECREF(i);
  } else if (st->torch_current_stream) {
    PyObject *i = PyLong_FromLong(index);
    PyObject *s = i ? PyObject_CallOneArg(st->torch_current_stream, i) : NULL;
    Py_XDECREF(i);
    if (s) r = PyObject_GetAttr(s, st->s_cuda_stream);
    Py_XDECREF(s);
  } else {
    PyErr_SetString(PyExc_RuntimeError, "torch.cuda.current_stream is not available");
  }
  if (!r) return (void *)-1;
  void *p = PyLong_AsVoidPtr(r);
  Py_DECREF(r);
  return p == NULL && PyErr_Occurred() ? (void *)-1 : p;
}

/* The DLPack dtypes of torch_dtype_names, in that order. */
static const DLDataType torch_dl[AG_DTYPE_COUNT_ + 1] = {
    {kDLFloat, 32, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1}, {kDLUInt, 8, 1},
    {kDLInt, 32, 1},   {kDLInt, 64, 1},   {kDLBool, 8, 1}};

/* The DLPack dtype of a torch dtype object, or code 255 for another. */
static DLDataType torch_dl_dtype(agpy_state *st, PyObject *dt) {
  for (int i = 0; i <= AG_DTYPE_COUNT_; i++)
    if (dt == st->torch_dtypes[i]) return torch_dl[i];
  DLDataType none = {255, 0, 0};
  return none;
}

/* A TypeError naming the torch dtype of obj, which agrl does not take. */
static int torch_dtype_refused(agpy_state *st, PyObject *obj, const char *what) {
  PyObject *v = PyObject_GetAttr(obj, st->s_dtype);
  if (v)
    PyErr_Format(
        PyExc_TypeError,
        "%s: torch tensors of %R are not taken (float32, float16, bfloat16, uint8, int32, int64, bool)", what,
        v);
  Py_XDECREF(v);
  return -1;
}

/* agpy_torch_layout through torch's DLPack exchange table: one C call. */
static int torch_layout_c(agpy_state *st, PyObject *obj, void **data, DLDataType *dt, int *ndim,
                          int64_t *shape, int64_t *strides, int *device, const char *what) {
  DLTensor dl;
  if (st->torch_xapi->dltensor_from_py_object_no_sync(obj, &dl)) return -1;
  if (dl.ndim < 0 || dl.ndim > 8) {
    agpy_raisef(st, AG_ERR_SHAPE, "%s: more than 8 dimensions", what);
    return -1;
  }
  if (dl.device.device_type == kDLCUDA) {
    *device = dl.device.device_id;
  } else if (dl.device.device_type == kDLCPU) {
    *device = -1;
  } else {
    agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: torch tensors on DLPack device type %d are not taken", what,
                (int)dl.device.device_type);
    return -1;
  }
  int known = 0;
  for (int i = 0; i <= AG_DTYPE_COUNT_ && !known; i++)
    known = torch_dl[i].code == dl.dtype.code && torch_dl[i].bits == dl.dtype.bits && dl.dtype.lanes == 1;
  if (!known) return torch_dtype_refused(st, obj, what);
  *dt = dl.dtype;
  *ndim = dl.ndim;
  int64_t st_elems = 1;
  for (int i = dl.ndim - 1; i >= 0; i--) {
    shape[i] = dl.shape[i];
    if (strides) strides[i] = dl.strides ? dl.strides[i] : st_elems;
    st_elems *= dl.shape[i];
  }
  *data = (char *)dl.data + dl.byte_offset;
  return 0;
}

int agpy_torch_layout(agpy_state *st, PyObject *obj, void **data, DLDataType *dt, int *ndim, int64_t *shape,
                      int64_t *strides, int *device, const char *what) {
  if (st->torch_xapi && Py_TYPE(obj) == (PyTypeObject *)st->torch_tensor)
    return torch_layout_c(st, obj, data, dt, ndim, shape, strides, device, what);
  PyObject *v = PyObject_CallMethodNoArgs(obj, st->s_get_device);
  if (!v) return -1;
  *device = (int)PyLong_AsLong(v);
  Py_DECREF(v);
  if (*device == -1 && PyErr_Occurred()) return -1;
  v = PyObject_GetAttr(obj, st->s_dtype);
  if (!v) return -1;
  *dt = torch_dl_dtype(st, v);
  Py_DECREF(v);
  if (dt->code == 255) return torch_dtype_refused(st, obj, what);
  v = PyObject_GetAttr(obj, st->s_shape);
  if (!v) return -1;
  if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) > 8) {
    Py_DECREF(v);
    agpy_raisef(st, AG_ERR_SHAPE, "%s: more than 8 dimensions", what);
    return -1;
  }
  *ndim = (int)PyTuple_GET_SIZE(v);
  for (int i = 0; i < *ndim; i++) shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(v, i));
  Py_DECREF(v);
  if (PyErr_Occurred()) return -1;
  if (strides) {
    v = PyObject_CallMethodNoArgs(obj, st->s_stride);
    if (!v) return -1;
    for (int i = 0; i < *ndim && PyTuple_Check(v) && i < PyTuple_GET_SIZE(v); i++)
      strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(v, i));
    Py_DECREF(v);
    if (PyErr_Occurred()) return -1;
  }
  v = PyObject_CallMethodNoArgs(obj, st->s_data_ptr);
  if (!v) return -1;
  *data = PyLong_AsVoidPtr(v);
  Py_DECREF(v);
  return PyErr_Occurred() ? -1 : 0;
}

static int from_torch(agpy_state *st, ag_ctx *ctx, PyObject *obj, agpy_in *in, const char *what) {
  int device;
  int64_t strides[8];
  if (agpy_torch_layout(st, obj, &in->data, &in->dt, &in->ndim, in->shape, strides, &device, what)) return -1;
  int contiguous = 1; /* as torch's is_contiguous(): dimensions of one element have any stride */
  int64_t expect = 1;
  for (int i = in->ndim - 1; i >= 0; i--) {
    if (in->shape[i] == 0) {
      contiguous = 1;
      break;
    }
    if (in->shape[i] != 1 && strides[i] != expect) contiguous = 0;
    expect *= in->shape[i];
  }
  if (!contiguous) {
    agpy_raisef(st, AG_ERR_SHAPE, "%s: the tensor is not C-contiguous; pass .contiguous()", what);
    return -1;
  }
  if (device >= 0) {
    if (!ctx || ag_ctx_device(ctx) != AG_DEVICE_CUDA || ag_ctx_device_index(ctx) != device) {
      if (!ctx)
        agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: device memory (cuda:%d) is not taken here; pass host data",
                    what, device);
      else
        agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: the tensor is on cuda:%d, the context on %s", what, device,
                    ag_ctx_device_name(ctx));
      return -1;
    }
    in->on_device = 1;
    const unsigned long me = PyThread_get_thread_ident();
    if (st->call_serial && st->torch_stream_seen.call == st->call_serial &&
        st->torch_stream_seen.thread == me && st->torch_stream_seen.device == device) {
      in->stream = st->torch_stream_seen.stream; /* another tensor of this call: one query a call */
    } else {
      in->stream = agpy_torch_stream(st, device);
      if (in->stream == (void *)-1) {
        in->stream = NULL;
        return -1;
      }
      st->torch_stream_seen.thread = me;
      st->torch_stream_seen.call = st->call_serial;
      st->torch_stream_seen.device = device;
      st->torch_stream_seen.stream = in->stream;
    }
  }
  in->numel = 1;
  for (int i = 0; i < in->ndim; i++) in->numel *= in->shape[i];
  in->held = Py_NewRef(obj);
  return 0;
}

int agpy_in_order(agpy_state *st, ag_ctx *ctx, agpy_in *in, int n) {
  for (int i = 0; i < n; i++) {
    if (!in[i].held || !in[i].on_device) continue;
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= in[j].held && in[j].on_device && in[j].stream == in[i].stream;
    if (seen) continue;
    ag_status s = ag_ctx_wait_stream(ctx, in[i].stream);
    if (s) {
      agpy_raise(st, s);
      return -1;
    }
  }
  return 0;
}

/* struct-module format -> DLPack dtype */
static int format_dtype(const char *f, Py_ssize_t itemsize, DLDataType *out) {
  if (!f) f = "B";
  while (*f == '@' || *f == '=' || *f == '<' || *f == '!') f++;
  if (f[0] && f[1]) return -1;
  out->lanes = 1;
  out->bits = (uint8_t)(itemsize * 8);
  switch (f[0]) {
    case 'f':
    case 'd':
    case 'e': out->code = kDLFloat; break;
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
    case 'n': out->code = kDLInt; break;
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
    case 'N': out->code = kDLUInt; break;
    case '?': out->code = kDLBool; break;
    default: return -1;
  }
  return itemsize >= 1 && itemsize <= 8 ? 0 : -1;
}

static int from_buffer(agpy_state *st, PyObject *obj, agpy_in *in, const char *what) {
  if (PyObject_GetBuffer(obj, &in->view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) return -1;
  in->has_view = 1;
  if (!PyBuffer_IsContiguous(&in->view, 'C')) {
    for (int i = 0; i < in->view.ndim; i++)
      if (in->view.shape[i] > 1 && in->view.strides[i] < 0) { /* a[::-1]: say so, as DLPack's path does */
        agpy_raisef(st, AG_ERR_SHAPE,
                    "%s: negative strides are not supported (dimension %d has stride %zd bytes)", what, i,
                    in->view.strides[i]);
        return -1;
      }
    agpy_raisef(st, AG_ERR_SHAPE, "%s: the array is not C-contiguous; pass a contiguous copy", what);
    return -1;
  }
  if (in->view.ndim > 8) {
    agpy_raisef(st, AG_ERR_SHAPE, "%s: %d dimensions (at most 8)", what, in->view.ndim);
    return -1;
  }
  if (format_dtype(in->view.format, in->view.itemsize, &in->dt)) {
    PyErr_Format(PyExc_TypeError, "%s: element format '%s' is not a number", what,
                 in->view.format ? in->view.format : "?");
    return -1;
  }
  in->data = in->view.buf;
  in->ndim = in->view.ndim;
  in->numel = 1;
  for (int i = 0; i < in->ndim; i++) in->shape[i] = in->view.shape[i], in->numel *= in->view.shape[i];
  return 0;
}

/* Python numbers and nested lists/tuples (rectangular, up to 4 levels). */
static int seq_shape(agpy_state *st, PyObject *o, agpy_in *in, int depth, const char *what) {
  if (PyList_Check(o) || PyTuple_Check(o)) {
    if (depth >= 4) {
      agpy_raisef(st, AG_ERR_SHAPE, "%s: lists nested deeper than 4", what);
      return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (depth == in->ndim) {
      in->shape[in->ndim++] = n;
    } else if (in->shape[depth] != n) {
      agpy_raisef(st, AG_ERR_SHAPE, "%s: the nested lists are not rectangular", what);
      return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
      if (seq_shape(st, PySequence_Fast_GET_ITEM(o, i), in, depth + 1, what)) return -1;
    return 0;
  }
  if (depth != in->ndim && !(depth == 0 && in->ndim == 0)) {
    agpy_raisef(st, AG_ERR_SHAPE, "%s: the nested lists are not rectangular", what);
    return -1;
  }
  if (PyFloat_Check(o)) {
    in->dt.code = kDLFloat;
    return 0;
  }
  if (PyLong_Check(o) || PyIndex_Check(o)) return 0;
  /* numpy's scalars (np.float32(1), np.bool_(True) ...): 0-d buffers of a number */
  int code = -1;
  if (PyObject_CheckBuffer(o)) {
    Py_buffer v;
    DLDataType d;
    if (PyObject_GetBuffer(o, &v, PyBUF_FORMAT | PyBUF_ND) == 0) {
      if (v.ndim == 0 && !format_dtype(v.format, v.itemsize, &d)) code = d.code;
      PyBuffer_Release(&v);
    } else {
      PyErr_Clear();
    }
  }
  if (code < 0) {
    PyErr_Format(PyExc_TypeError, "%s: expected numbers, got %.80s", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  if (code == kDLFloat) in->dt.code = kDLFloat;
  return 0;
}

static int seq_fill(PyObject *o, agpy_in *in, int64_t *at) {
  if (PyList_Check(o) || PyTuple_Check(o)) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); i++)
      if (seq_fill(PySequence_Fast_GET_ITEM(o, i), in, at)) return -1;
    return 0;
  }
  if (in->dt.code == kDLInt) {
    long long v;
    if (PyLong_Check(o)) {
      v = PyLong_AsLongLong(o);
    } else { /* np.int64, np.bool_ ... */
      PyObject *l = PyNumber_Long(o);
      if (!l) return -1;
      v = PyLong_AsLongLong(l);
      Py_DECREF(l);
    }
    if (v == -1 && PyErr_Occurred()) return -1;
    ((int64_t *)in->tmp)[(*at)++] = v;
  } else {
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    ((double *)in->tmp)[(*at)++] = v;
  }
  return 0;
}

static int from_sequence(agpy_state *st, PyObject *obj, agpy_in *in, const char *what) {
  in->dt.code = kDLInt, in->dt.bits = 64, in->dt.lanes = 1;
  if (seq_shape(st, obj, in, 0, what)) return -1;
  in->numel = 1;
  for (int i = 0; i < in->ndim; i++) in->numel *= in->shape[i];
  in->tmp = malloc((size_t)(in->numel ? in->numel : 1) * 8);
  if (!in->tmp) {
    PyErr_NoMemory();
    return -1;
  }
  int64_t at = 0;
  if (seq_fill(obj, in, &at)) return -1;
  in->data = in->tmp;
  return 0;
}

/* The element types `load` reads: ints and uints of 8 to 64 bits, bool8,
 * f16, f32, f64, bf16 (complex, opaque and others are refused). */
static int loadable(DLDataType d) {
  if (d.lanes != 1) return 0;
  switch (d.code) {
    case kDLInt:
    case kDLUInt: return d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
    case kDLBool: return d.bits == 8;
    case kDLFloat: return d.bits == 16 || d.bits == 32 || d.bits == 64;
    case kDLBfloat: return d.bits == 16;
    default: return 0;
  }
}

int agpy_in_get(agpy_state *st, ag_ctx *ctx, PyObject *obj, agpy_in *in, const char *what) {
  memset(in, 0, sizeof *in);
  int r;
  if (!obj || obj == Py_None) {
    PyErr_Format(PyExc_TypeError, "%s: expected an array, got None", what);
    return -1;
  }
  if (agpy_is_torch(st, obj)) {
    r = from_torch(st, ctx, obj, in, what);
  } else if (PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj) || PyList_Check(obj) ||
             PyTuple_Check(obj)) {
    r = from_sequence(st, obj, in, what);
  } else if (PyObject_CheckBuffer(obj) && !PyUnicode_Check(obj) && !PyBytes_Check(obj)) {
    /* host memory behind the buffer protocol (numpy, array.array ...): the quickest way in */
    r = from_buffer(st, obj, in, what);
    if (r && PyErr_ExceptionMatches(PyExc_BufferError) && PyObject_HasAttrString(obj, "__dlpack__")) {
      PyErr_Clear();
      agpy_in_release(in, NULL);
      memset(in, 0, sizeof *in);
      r = from_dlpack(st, ctx, obj, in, what);
    }
  } else if (PyObject_HasAttrString(obj, "__dlpack__") && PyObject_HasAttrString(obj, "__dlpack_device__")) {
    r = from_dlpack(st, ctx, obj, in, what);
  } else {
    PyErr_Format(PyExc_TypeError,
                 "%s: expected an array (DLPack, buffer protocol or a list of numbers), got %.80s", what,
                 Py_TYPE(obj)->tp_name);
    r = -1;
  }
  if (!r && !in->on_device && !loadable(in->dt)) {
    char d[32];
    dtype_str(in->dt, d, sizeof d);
    PyErr_Format(PyExc_TypeError, "%s: elements of %s are not numbers agrl takes (bool, ints, floats)", what,
                 d);
    r = -1;
  }
  if (r) agpy_in_release(in, NULL);
  return r;
}

/* ---- conversion on the host ---- */

static int load(const agpy_in *in, int64_t i, double *d, int64_t *iv) {
  const unsigned char *p = (const unsigned char *)in->data;
  const DLDataType t = in->dt;
  switch (t.code) {
    case kDLInt:
      switch (t.bits) {
        case 8: *iv = ((const int8_t *)p)[i]; return 1;
        case 16: *iv = ((const int16_t *)p)[i]; return 1;
        case 32: *iv = ((const int32_t *)p)[i]; return 1;
        default: *iv = ((const int64_t *)p)[i]; return 1;
      }
    case kDLUInt:
    case kDLBool:
      switch (t.bits) {
        case 8: *iv = ((const uint8_t *)p)[i]; return 1;
        case 16: *iv = ((const uint16_t *)p)[i]; return 1;
        case 32: *iv = ((const uint32_t *)p)[i]; return 1;
        default: {
          uint64_t u = ((const uint64_t *)p)[i];
          if (u > (uint64_t)INT64_MAX) {
            *d = (double)u;
            return 0;
          }
          *iv = (int64_t)u;
          return 1;
        }
      }
    case kDLBfloat: *d = ag__bf16_decode(((const uint16_t *)p)[i]); return 0;
    default:
      switch (t.bits) {
        case 16: *d = ag__f16_decode(((const uint16_t *)p)[i]); return 0;
        case 32: *d = ((const float *)p)[i]; return 0;
        default: *d = ((const double *)p)[i]; return 0;
      }
  }
}

double agpy_in_value(const agpy_in *in, int64_t i) {
  double d = 0;
  int64_t iv = 0;
  return load(in, i, &d, &iv) ? (double)iv : d;
}

int agpy_in_convert(agpy_state *st, const agpy_in *in, ag_dtype dst, void *out, const char *what) {
  const int to_int = dst == AG_U8 || dst == AG_I32 || dst == AG_I64;
  const double lo = dst == AG_U8 ? 0 : dst == AG_I32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = dst == AG_U8 ? 255 : dst == AG_I32 ? 2147483647.0 : 9223372036854775807.0;
  for (int64_t i = 0; i < in->numel; i++) {
    double d = 0;
    int64_t iv = 0;
    const int is_int = load(in, i, &d, &iv);
    if (to_int) {
      if (!is_int) {
        if (!(d == floor(d)) || !(d >= lo && d <= hi) || (dst == AG_I64 && d >= 9223372036854775807.0)) {
          char num[32]; /* PyUnicode_FromFormat has no %g */
          PyOS_snprintf(num, sizeof num, "%g", d);
          agpy_raisef(st, AG_ERR_OUT_OF_RANGE,
                      "%s: value %s at position %lld is not a whole number that fits %s", what, num,
                      (long long)i, ag_dtype_name(dst));
          return -1;
        }
        iv = (int64_t)d;
      } else if ((double)iv < lo || (double)iv > hi) {
        agpy_raisef(st, AG_ERR_OUT_OF_RANGE, "%s: value %lld at position %lld does not fit %s", what,
                    (long long)iv, (long long)i, ag_dtype_name(dst));
        return -1;
      }
      ag__store_int(out, dst, i, iv);
    } else {
      ag__store_f32(out, dst, i, is_int ? (float)iv : (float)d);
    }
  }
  return 0;
}

const void *agpy_in_as(agpy_state *st, const agpy_in *in, ag_dtype dst, void **scratch, const char *what) {
  *scratch = NULL;
  if (agpy_in_agdtype(in) == (int)dst && in->dt.code != kDLBool) return in->data;
  if (in->dt.code == kDLBool && dst == AG_U8) return in->data;
  void *p = malloc((size_t)(in->numel ? in->numel : 1) * ag_dtype_size(dst));
  if (!p) {
    PyErr_NoMemory();
    return NULL;
  }
  if (agpy_in_convert(st, in, dst, p, what)) {
    free(p);
    return NULL;
  }
  *scratch = p;
  return p;
}

int agpy_in_wrap(agpy_state *st, ag_ctx *ctx, const agpy_in *in, int64_t rows, int64_t cols, ag_tensor **out,
                 const char *what) {
  int dt = agpy_in_agdtype(in);
  if (dt < 0 || !in->on_device) {
    PyErr_Format(PyExc_TypeError, "%s: not a device array of a dtype agrl takes", what);
    return -1;
  }
  ag_status s = ag_tensor_wrap(ctx, in->data, rows, cols, rows, (ag_dtype)dt, out);
  if (s) {
    agpy_raise(st, s);
    return -1;
  }
  return 0;
}

/* ---- indices ---- */

/* The persistent [1, B] i64 tensor *stage that host indices go to the
 * device in. */
static ag_status idx_stage(ag_ctx *ctx, ag_tensor **stage, int64_t B, const int64_t *h, ag_tensor **out) {
  if (!*stage || ag_tensor_cols(*stage) != B) {
    ag_tensor *t = NULL;
    ag_status s = ag_tensor_create(ctx, 1, B, AG_I64, NULL, &t);
    if (s) return s;
    ag_tensor_free(*stage);
    *stage = t;
  }
  *out = *stage;
  return ag_tensor_write(*stage, h, (size_t)B * sizeof *h);
}

int agpy_indices_get(agpy_state *st, ag_ctx *ctx, PyObject *io, agpy_in *in, void **scratch,
                     ag_tensor **stage, ag_tensor **idx, const char *fn, agpy_index_check check, void *obj) {
  char what[48];
  PyOS_snprintf(what, sizeof what, "%s: indices", fn);
  *scratch = NULL;
  if (agpy_in_get(st, ctx, io, in, what)) return -1;
  const int64_t B = in->numel;
  const int dt = agpy_in_agdtype(in);
  ag_status s = AG_OK;
  if (in->ndim > 1) {
    agpy_raisef(st, AG_ERR_SHAPE, "%s: indices must be one-dimensional, got %d dimensions", fn, in->ndim);
  } else if (B < 1 || B > INT32_MAX) {
    agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: %lld indices (give 1 to 2^31-1)", fn, (long long)B);
  } else if (in->on_device) {
    if (dt != AG_I32 && dt != AG_I64)
      PyErr_Format(PyExc_TypeError, "%s: device indices must be int32 or int64", fn);
    else if (!agpy_in_order(st, ctx, in, 1) &&
             (s = ag_tensor_wrap(ctx, in->data, 1, B, 1, (ag_dtype)dt, idx)))
      agpy_raise(st, s);
  } else {
    const int64_t *h = agpy_in_as(st, in, AG_I64, scratch, what);
    if (h && !check(obj, h, B, fn) && (s = idx_stage(ctx, stage, B, h, idx))) agpy_raise(st, s);
  }
  if (!PyErr_Occurred()) return 0;
  free(*scratch);
  *scratch = NULL;
  agpy_in_release(in, ctx);
  return -1;
}
