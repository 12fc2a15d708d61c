/* outarray.c — arrays of the caller's framework given as the outputs of a
 * batch (ReplayBuffer's and FrameReplayBuffer's sample(out=...)): read
 * once (torch in place, the others through DLPack), checked against the
 * context's device and the batch's shape, and the stream that hands the
 * batch to their framework. */
#include "agrl_py.h"

static int framework_of(PyObject *v) {
  PyObject *mod = PyObject_GetAttrString((PyObject *)Py_TYPE(v), "__module__");
  const char *ms = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
  int fw = AGPY_FW_OTHER;
  if (ms && !strncmp(ms, "cupy", 4)) fw = AGPY_FW_CUPY;
  Py_XDECREF(mod);
  PyErr_Clear();
  return fw;
}

int agpy_out_read(agpy_state *st, ag_ctx *ctx, PyObject *v, const char *what, int64_t B, int n_inner,
                  const int64_t *inner, int64_t width, agpy_out *o) {
  memset(o, 0, sizeof *o);
  void *data = NULL;
  DLDataType dt;
  int ndim = 0, dev_type, dev_id;
  int64_t shape[8], strides[8];
  int have_strides = 1, readonly = 0;
  if (agpy_is_torch(st, v)) {
    int device;
    if (agpy_torch_layout(st, v, &data, &dt, &ndim, shape, strides, &device, what)) return -1;
    dev_type = device >= 0 ? kDLCUDA : kDLCPU;
    dev_id = device >= 0 ? device : 0;
    o->framework = AGPY_FW_TORCH;
  } else {
    /* the device first: a host array takes stream=None only, a device
     * array -1 (no synchronisation: each call orders the streams) */
    PyObject *devt =
        PyObject_HasAttr(v, st->s_dlpack) ? PyObject_CallMethodNoArgs(v, st->s_dlpack_device) : NULL;
    int host = 0;
    if (!devt && !PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "%s: expected an array of a framework (DLPack), got %.80s", what,
                   Py_TYPE(v)->tp_name);
    if (devt) {
      host = PyTuple_Check(devt) && PyTuple_GET_SIZE(devt) == 2 &&
             PyLong_AsLong(PyTuple_GET_ITEM(devt, 0)) != kDLCUDA && !PyErr_Occurred();
      Py_DECREF(devt);
    }
    if (!devt) return -1;
    PyObject *m1 = host ? NULL : PyLong_FromLong(-1);
    if (!host && !m1) return -1;
    DLTensor *dl = agpy_dlpack_take(st, v, m1, &o->managed, &o->versioned, &readonly, what);
    Py_XDECREF(m1);
    if (!dl) return -1;
    if (dl->ndim > 8) return agpy_raisef(st, AG_ERR_SHAPE, "%s: more than 8 dimensions", what), -1;
    data = (char *)dl->data + dl->byte_offset;
    dt = dl->dtype;
    ndim = dl->ndim;
    dev_type = dl->device.device_type;
    dev_id = dl->device.device_id;
    for (int i = 0; i < ndim; i++) shape[i] = dl->shape[i];
    have_strides = dl->strides != NULL;
    for (int i = 0; have_strides && i < ndim; i++) strides[i] = dl->strides[i];
    o->framework = framework_of(v);
  }
  if (readonly) return agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: the array is read-only", what), -1;
  /* the device: the context's (CUDA), or host memory for a CPU context */
  const ag_device_kind kind = ag_ctx_device(ctx);
  if (!((kind == AG_DEVICE_CUDA && dev_type == kDLCUDA && dev_id == ag_ctx_device_index(ctx)) ||
        (kind == AG_DEVICE_CPU && (dev_type == kDLCPU || dev_type == kDLCUDAHost))))
    return agpy_raisef(st, AG_ERR_INVALID_ARG,
                       "%s: the array is on DLPack device (%d, %d), not in the memory of the context (%s)",
                       what, dev_type, dev_id, ag_ctx_device_name(ctx)),
           -1;
  o->dev_index = dev_id;
  agpy_in tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.dt = dt;
  const int agdt = agpy_in_agdtype(&tmp);
  if (agdt < 0 || (dt.code == kDLBool))
    return agpy_raisef(st, AG_ERR_INVALID_ARG,
                       "%s: the array's dtype is not one agrl writes (f32, f16, bf16, u8, "
                       "i32, i64)",
                       what),
           -1;
  /* shape (B, *inner) (or (B,) for a width-1 field), inner dimensions contiguous */
  int ok = ndim >= 1 && shape[0] == B;
  if (ok && ndim == n_inner + 1) {
    for (int d = 0; d < n_inner; d++) ok &= shape[d + 1] == inner[d];
  } else if (ok) {
    ok = width == 1 && ndim == 1;
  }
  if (!ok) {
    char want[160];
    int at = PyOS_snprintf(want, sizeof want, "(%lld", (long long)B);
    for (int d = 0; d < n_inner && at > 0 && at < (int)sizeof want - 24; d++)
      at += PyOS_snprintf(want + at, sizeof want - (size_t)at, ", %lld", (long long)inner[d]);
    PyOS_snprintf(want + at, sizeof want - (size_t)at, n_inner ? ")" : ",)");
    return agpy_raisef(st, AG_ERR_SHAPE, "%s: the array must be %s for a batch of %lld", what, want,
                       (long long)B),
           -1;
  }
  int64_t ld = width;
  if (have_strides) {
    int64_t expect = 1;
    for (int d = ndim - 1; d >= 1; d--) {
      if (shape[d] > 1 && strides[d] != expect)
        return agpy_raisef(st, AG_ERR_SHAPE, "%s: the values of one transition must be contiguous", what), -1;
      expect *= shape[d];
    }
    ld = B > 1 ? strides[0] : width;
    if (ld < width)
      return agpy_raisef(st, AG_ERR_SHAPE, "%s: transitions overlap (stride %lld < %lld values)", what,
                         (long long)ld, (long long)width),
             -1;
  }
  if ((uintptr_t)data % ag_dtype_size((ag_dtype)agdt))
    return agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: the data is not aligned to its dtype", what), -1;
  o->data = data;
  o->dtype = (ag_dtype)agdt;
  o->ld = ld;
  return 0;
}

void agpy_out_release(agpy_out *o) {
  agpy_dlpack_release(o->managed, o->versioned);
  o->managed = NULL;
}

int agpy_out_stream(agpy_state *st, ag_ctx *ctx, int framework, int dev_index, PyObject *stream_fn,
                    PyObject *stream, void **out, int *sync) {
  *out = NULL;
  *sync = ag_ctx_device(ctx) == AG_DEVICE_CUDA;
  if (!*sync) return 0;
  if (stream != Py_None) {
    int64_t v;
    if (agpy_convert(st, "sample", "stream", stream, "L", &v)) return -1;
    if (v == -1) {
      *sync = 0;
      return 0;
    }
    if (v == 0 || v < -1) {
      agpy_raisef(st, AG_ERR_INVALID_ARG,
                  "sample: stream %lld is not a stream (1: legacy default, 2: per-thread "
                  "default, a handle, or -1 for no hand-off)",
                  (long long)v);
      return -1;
    }
    *out = (void *)(uintptr_t)v;
    return 0;
  }
  if (framework == AGPY_FW_TORCH) {
    void *p = agpy_torch_stream(st, dev_index);
    if (p == (void *)-1) return -1;
    *out = p;
  } else if (framework == AGPY_FW_CUPY) {
    PyObject *s = PyObject_CallNoArgs(stream_fn);
    PyObject *ptr = s ? PyObject_GetAttrString(s, "ptr") : NULL;
    Py_XDECREF(s);
    if (!ptr) return -1;
    *out = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (PyErr_Occurred()) return -1;
  } else {
    *out = NULL; /* the legacy default stream */
  }
  return 0;
}
