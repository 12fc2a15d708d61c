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

static void call_deleter(void *m, int versioned) {
  if (versioned) {
    DLManagedTensorVersioned *v = m;
    if (v->deleter) v->deleter(v);
  } else {
    DLManagedTensor *l = m;
    if (l->deleter) l->deleter(l);
  }
}

static void run_deferred(void *arg) {
  deferred_deleter *d = arg;
  call_deleter(d->managed, d->versioned);
  free(d);
}

void agpy_in_release(agpy_in *in, ag_ctx *ctx) {
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
      call_deleter(in->managed, in->versioned);
    }
    in->managed = NULL;
  }
}

/* Checks the layout (C-contiguous, no negative strides) of a DLTensor. */
static int check_layout(const DLTensor *dl, const char *what) {
  if (dl->ndim < 0 || dl->ndim > 8) {
    agpy_raisef(AG_ERR_SHAPE, "%s: %d dimensions (at most 8)", what, (int)dl->ndim);
    return -1;
  }
  if (dl->dtype.lanes != 1) {
    PyErr_Format(PyExc_TypeError, "%s: vector dtypes (lanes %u) are not supported", what,
                 (unsigned)dl->dtype.lanes);
    return -1;
  }
  for (int i = 0; i < dl->ndim; i++)
    if (dl->shape[i] < 0) {
      agpy_raisef(AG_ERR_SHAPE, "%s: dimension %d has negative size", what, i);
      return -1;
    }
  if (!dl->strides) return 0;
  for (int i = 0; i < dl->ndim; i++)
    if (dl->shape[i] == 0) return 0; /* no elements: any strides (numpy gives 0) */
  int64_t expect = 1;
  for (int i = dl->ndim - 1; i >= 0; i--) {
    if (dl->shape[i] > 1) {
      if (dl->strides[i] < 0) {
        agpy_raisef(AG_ERR_SHAPE, "%s: negative strides are not supported (dimension %d has stride %lld)",
                    what, i, (long long)dl->strides[i]);
        return -1;
      }
      if (dl->strides[i] != expect) {
        agpy_raisef(AG_ERR_SHAPE,
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

static int from_dlpack(ag_ctx *ctx, PyObject *obj, agpy_in *in, const char *what) {
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
        agpy_raisef(AG_ERR_INVALID_ARG, "%s: device memory (cuda:%d) is not taken here; pass host data", what,
                    dev_id);
      else
        agpy_raisef(AG_ERR_INVALID_ARG, "%s: the array is on cuda:%d, the context on %s", what, dev_id,
                    ag_ctx_device_name(ctx));
      return -1;
    }
    stream = PyLong_FromVoidPtr(ag_ctx_native_stream(ctx));
    if (!stream) return -1;
    in->on_device = 1;
  } else if (dev_type != kDLCPU && dev_type != kDLCUDAHost) {
    agpy_raisef(AG_ERR_INVALID_ARG, "%s: arrays on DLPack device type %d are not supported", what, dev_type);
    return -1;
  }
  PyObject *kw =
      Py_BuildValue("{s:O,s:(ii)}", "stream", stream, "max_version", AGPY_DLPACK_MAJOR, AGPY_DLPACK_MINOR);
  PyObject *meth = kw ? PyObject_GetAttrString(obj, "__dlpack__") : NULL, *cap = NULL;
  PyObject *empty = PyTuple_New(0);
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
  if (stream != Py_None) Py_DECREF(stream);
  if (!cap) return -1;
  DLTensor *dl = NULL;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m->version.major != 1) {
      Py_DECREF(cap);
      PyErr_Format(PyExc_BufferError, "%s: DLPack version %u.%u is not supported", what, m->version.major,
                   m->version.minor);
      return -1;
    }
    PyCapsule_SetName(cap, "used_dltensor_versioned");
    in->managed = m;
    in->versioned = 1;
    dl = &m->dl_tensor;
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    PyCapsule_SetName(cap, "used_dltensor");
    in->managed = m;
    dl = &m->dl_tensor;
  } else {
    Py_DECREF(cap);
    PyErr_Format(PyExc_TypeError, "%s: __dlpack__ did not return a DLPack capsule", what);
    return -1;
  }
  Py_DECREF(cap);
  if (check_layout(dl, what)) return -1;
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

static int from_buffer(PyObject *obj, agpy_in *in, const char *what) {
  if (PyObject_GetBuffer(obj, &in->view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) return -1;
  in->has_view = 1;
  if (!PyBuffer_IsContiguous(&in->view, 'C')) {
    for (int i = 0; i < in->view.ndim; i++)
      if (in->view.shape[i] > 1 && in->view.strides[i] < 0) { /* a[::-1]: say so, as DLPack's path does */
        agpy_raisef(AG_ERR_SHAPE,
                    "%s: negative strides are not supported (dimension %d has stride %zd bytes)", what, i,
                    in->view.strides[i]);
        return -1;
      }
    agpy_raisef(AG_ERR_SHAPE, "%s: the array is not C-contiguous; pass a contiguous copy", what);
    return -1;
  }
  if (in->view.ndim > 8) {
    agpy_raisef(AG_ERR_SHAPE, "%s: %d dimensions (at most 8)", what, in->view.ndim);
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
static int seq_shape(PyObject *o, agpy_in *in, int depth, const char *what) {
  if (PyList_Check(o) || PyTuple_Check(o)) {
    if (depth >= 4) {
      agpy_raisef(AG_ERR_SHAPE, "%s: lists nested deeper than 4", what);
      return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (depth == in->ndim) {
      in->shape[in->ndim++] = n;
    } else if (in->shape[depth] != n) {
      agpy_raisef(AG_ERR_SHAPE, "%s: the nested lists are not rectangular", what);
      return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
      if (seq_shape(PySequence_Fast_GET_ITEM(o, i), in, depth + 1, what)) return -1;
    return 0;
  }
  if (depth != in->ndim && !(depth == 0 && in->ndim == 0)) {
    agpy_raisef(AG_ERR_SHAPE, "%s: the nested lists are not rectangular", what);
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

static int from_sequence(PyObject *obj, agpy_in *in, const char *what) {
  in->dt.code = kDLInt, in->dt.bits = 64, in->dt.lanes = 1;
  if (seq_shape(obj, in, 0, what)) return -1;
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

int agpy_in_get(ag_ctx *ctx, PyObject *obj, agpy_in *in, const char *what) {
  memset(in, 0, sizeof *in);
  int r;
  if (!obj || obj == Py_None) {
    PyErr_Format(PyExc_TypeError, "%s: expected an array, got None", what);
    return -1;
  }
  if (PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj) || PyList_Check(obj) ||
      PyTuple_Check(obj)) {
    r = from_sequence(obj, in, what);
  } else if (PyObject_CheckBuffer(obj) && !PyUnicode_Check(obj) && !PyBytes_Check(obj)) {
    /* host memory behind the buffer protocol (numpy, array.array ...): the quickest way in */
    r = from_buffer(obj, in, what);
    if (r && PyErr_ExceptionMatches(PyExc_BufferError) && PyObject_HasAttrString(obj, "__dlpack__")) {
      PyErr_Clear();
      agpy_in_release(in, NULL);
      memset(in, 0, sizeof *in);
      r = from_dlpack(ctx, obj, in, what);
    }
  } else if (PyObject_HasAttrString(obj, "__dlpack__") && PyObject_HasAttrString(obj, "__dlpack_device__")) {
    r = from_dlpack(ctx, obj, in, what);
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

int agpy_in_convert(const agpy_in *in, ag_dtype dst, void *out, const char *what) {
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
          agpy_raisef(AG_ERR_OUT_OF_RANGE, "%s: value %s at position %lld is not a whole number that fits %s",
                      what, num, (long long)i, ag_dtype_name(dst));
          return -1;
        }
        iv = (int64_t)d;
      } else if ((double)iv < lo || (double)iv > hi) {
        agpy_raisef(AG_ERR_OUT_OF_RANGE, "%s: value %lld at position %lld does not fit %s", what,
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

const void *agpy_in_as(const agpy_in *in, ag_dtype dst, void **scratch, const char *what) {
  *scratch = NULL;
  if (agpy_in_agdtype(in) == (int)dst && in->dt.code != kDLBool) return in->data;
  if (in->dt.code == kDLBool && dst == AG_U8) return in->data;
  void *p = malloc((size_t)(in->numel ? in->numel : 1) * ag_dtype_size(dst));
  if (!p) {
    PyErr_NoMemory();
    return NULL;
  }
  if (agpy_in_convert(in, dst, p, what)) {
    free(p);
    return NULL;
  }
  *scratch = p;
  return p;
}

int agpy_in_wrap(ag_ctx *ctx, const agpy_in *in, int64_t rows, int64_t cols, ag_tensor **out,
                 const char *what) {
  int dt = agpy_in_agdtype(in);
  if (dt < 0 || !in->on_device) {
    PyErr_Format(PyExc_TypeError, "%s: not a device array of a dtype agrl takes", what);
    return -1;
  }
  ag_status s = ag_tensor_wrap(ctx, in->data, rows, cols, rows, (ag_dtype)dt, out);
  if (s) {
    agpy_raise(s);
    return -1;
  }
  return 0;
}
