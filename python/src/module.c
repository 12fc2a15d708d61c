/* module.c — agrl._agrl: the exceptions (one per status), dtypes, numpy
 * helpers and the module's functions. */
#include <stdarg.h>

#include "agrl_py.h"

/* status -> exception class, built from agrl's status table */
#define AGPY_N_STATUS 13
static PyObject *error_base;
static PyObject *errors[AGPY_N_STATUS];

static PyObject *error_of(ag_status s) {
  int i = -(int)s;
  return i > 0 && i < AGPY_N_STATUS && errors[i] ? errors[i] : error_base;
}

PyObject *agpy_raise(ag_status s) {
  const char *msg = ag_last_error();
  PyErr_SetString(error_of(s), msg && *msg ? msg : ag_status_describe(s));
  return NULL;
}

PyObject *agpy_raisef(ag_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *m = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (m) {
    PyErr_SetObject(error_of(s), m);
    Py_DECREF(m);
  }
  return NULL;
}

/* ---- dtypes ---- */

static const char *const dtype_names[AG_DTYPE_COUNT_] = {"f32", "f16", "bf16", "u8", "i32", "i64"};
static const char *const numpy_names[AG_DTYPE_COUNT_] = {"float32", "float16", "bfloat16",
                                                         "uint8",   "int32",   "int64"};

int agpy_dtype_parse(PyObject *obj, ag_dtype *out, const char *what) {
  if (!PyUnicode_Check(obj)) {
    /* numpy dtypes and types, torch dtypes: by their name (a type's
     * "name" is a descriptor, its __name__ the name: np.float32) */
    PyObject *name = PyObject_GetAttrString(obj, PyType_Check(obj) ? "__name__" : "name");
    if (!name) {
      PyErr_Clear();
      name = PyObject_Str(obj);
    }
    if (!name) return -1;
    int r = PyUnicode_Check(name) ? agpy_dtype_parse(name, out, what) : -1;
    Py_DECREF(name);
    if (r && !PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s: not a dtype: %R", what, obj);
    return r;
  }
  const char *s = PyUnicode_AsUTF8(obj);
  if (!s) return -1;
  if (!strncmp(s, "torch.", 6)) s += 6;
  for (int i = 0; i < AG_DTYPE_COUNT_; i++)
    if (!strcmp(s, dtype_names[i]) || !strcmp(s, numpy_names[i])) {
      *out = (ag_dtype)i;
      return 0;
    }
  if (!strcmp(s, "float")) {
    *out = AG_F32;
    return 0;
  }
  agpy_raisef(AG_ERR_INVALID_ARG, "%s: dtype '%s' is not one of f32, f16, bf16, u8, i32, i64", what, s);
  return -1;
}

const char *agpy_numpy_name(ag_dtype dt) {
  return (int)dt >= 0 && dt < AG_DTYPE_COUNT_ ? numpy_names[dt] : "float32";
}

static PyObject *numpy_mod;

PyObject *agpy_numpy_empty(int ndim, const int64_t *shape, ag_dtype dt, Py_buffer *view) {
  if (!numpy_mod && !(numpy_mod = PyImport_ImportModule("numpy"))) return NULL;
  PyObject *sh = PyTuple_New(ndim);
  if (!sh) return NULL;
  for (int i = 0; i < ndim; i++) PyTuple_SET_ITEM(sh, i, PyLong_FromLongLong(shape[i]));
  PyObject *a = PyObject_CallMethod(numpy_mod, "empty", "Os", sh, agpy_numpy_name(dt));
  Py_DECREF(sh);
  if (!a) return NULL;
  if (PyObject_GetBuffer(a, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
    Py_DECREF(a);
    return NULL;
  }
  return a;
}

/* ---- arguments ---- */

int agpy_u64_conv(PyObject *obj, void *out) {
  /* "K" would wrap negative numbers and drop high bits silently */
  if (!PyLong_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "expected an int in 0 .. 2^64-1, not %.80s", Py_TYPE(obj)->tp_name);
    return 0;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(obj);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return 0;
  *(unsigned long long *)out = v;
  return 1;
}

/* ---- module functions ---- */

static PyObject *py_version(PyObject *m, PyObject *a) {
  (void)m, (void)a;
  return PyUnicode_FromString(ag_version());
}

static PyObject *py_cuda_device_count(PyObject *m, PyObject *a) {
  (void)m, (void)a;
  return PyLong_FromLong(ag_cuda_device_count());
}

static PyObject *py_vulkan_device_count(PyObject *m, PyObject *a) {
  (void)m, (void)a;
  return PyLong_FromLong(ag_device_count(AG_DEVICE_VULKAN));
}

static PyObject *py_derive_seed(PyObject *m, PyObject *args) {
  (void)m;
  unsigned long long seed, index;
  if (!PyArg_ParseTuple(args, "O&O&:derive_seed", agpy_u64_conv, &seed, agpy_u64_conv, &index)) return NULL;
  return PyLong_FromUnsignedLongLong(ag_env_derive_seed(seed, index));
}

static PyObject *py_builtin_envs(PyObject *m, PyObject *a) {
  (void)m, (void)a;
  PyObject *l = PyList_New(0);
  for (int i = 0; l && ag_env_builtin_name(i); i++) {
    PyObject *s = PyUnicode_FromString(ag_env_builtin_name(i));
    if (!s || PyList_Append(l, s) < 0) {
      Py_XDECREF(s);
      Py_CLEAR(l);
      break;
    }
    Py_DECREF(s);
  }
  return l;
}

PyObject *agpy_config_dict(const ag_dqn_config *cp) {
  const ag_dqn_config c = *cp;
  PyObject *hidden = agpy_hidden_tuple(c.hidden, c.n_hidden);
  return Py_BuildValue(
      "{s:N,s:d,s:d,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:d,s:d,s:d,s:d,s:O,s:O,s:K,s:O,s:O,s:d,s:d,s:d,s:i,s:L}",
      "hidden", hidden, "lr", (double)c.lr, "gamma", (double)c.gamma, "batch_size", (long long)c.batch_size,
      "buffer_size", (long long)c.buffer_size, "learning_starts", (long long)c.learning_starts, "train_freq",
      (long long)c.train_freq, "gradient_steps", (long long)c.gradient_steps, "target_update_interval",
      (long long)c.target_update_interval, "tau", (double)c.tau, "exploration_fraction",
      (double)c.exploration_fraction, "eps_start", (double)c.eps_start, "eps_end", (double)c.eps_end,
      "max_grad_norm", (double)c.max_grad_norm, "double_dqn", c.double_dqn ? Py_True : Py_False, "huber",
      c.huber ? Py_True : Py_False, "seed", (unsigned long long)c.seed, "fused", c.fused ? Py_True : Py_False,
      "per", c.per ? Py_True : Py_False, "per_alpha", (double)c.per_alpha, "per_beta", (double)c.per_beta,
      "per_eps", (double)c.per_eps, "n_step", c.n_step, "n_envs", (long long)c.n_envs);
}

static PyObject *py_dqn_defaults(PyObject *m, PyObject *a) {
  (void)m, (void)a;
  ag_dqn_config c = ag_dqn_defaults();
  return agpy_config_dict(&c);
}

static PyMethodDef module_methods[] = {
    {"library_version", py_version, METH_NOARGS, "The C library's version string, e.g. '0.1.0 (cpu+cuda)'."},
    {"cuda_device_count", py_cuda_device_count, METH_NOARGS, "Number of CUDA devices agrl can use."},
    {"vulkan_device_count", py_vulkan_device_count, METH_NOARGS,
     "Number of Vulkan devices agrl can use (Vulkan 1.2, compute, buffer device addresses)."},
    {"derive_seed", py_derive_seed, METH_VARARGS,
     "derive_seed(seed, index): the seed of item index of a sequence."},
    {"builtin_envs", py_builtin_envs, METH_NOARGS, "Short names of the built-in environments."},
    {"dqn_defaults", py_dqn_defaults, METH_NOARGS, "The DQN's default configuration as a dict."},
    {"ac_defaults", agpy_ac_defaults, METH_O,
     "ac_defaults(algo): the default configuration of 'sac' or 'td3' as a dict (ag_ac_defaults)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_agrl",
    "agrl's C extension (use the agrl package).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int add_type(PyObject *m, PyTypeObject *t, const char *name) {
  if (PyType_Ready(t) < 0) return -1;
  Py_INCREF(t);
  if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
    Py_DECREF(t);
    return -1;
  }
  return 0;
}

/* Builtin bases of each status's exception, beside agrl.Error. */
static PyObject *builtin_base(ag_status s) {
  switch (s) {
    case AG_ERR_INVALID_ARG: return PyExc_ValueError;
    case AG_ERR_OUT_OF_RANGE: return PyExc_IndexError;
    case AG_ERR_SHAPE: return PyExc_ValueError;
    case AG_ERR_OUT_OF_MEMORY: return PyExc_MemoryError;
    case AG_ERR_IO: return PyExc_OSError;
    case AG_ERR_TIMEOUT: return PyExc_TimeoutError;
    case AG_ERR_UNSUPPORTED: return PyExc_NotImplementedError;
    default: return NULL;
  }
}

/* "AG_ERR_OUT_OF_RANGE" -> "OutOfRangeError" */
static void class_name(const char *status, char *out, size_t n) {
  const char *p = status + 7; /* past "AG_ERR_" */
  size_t k = 0;
  int up = 1;
  for (; *p && k + 6 < n; p++) {
    if (*p == '_') {
      up = 1;
      continue;
    }
    out[k++] = up ? *p : (char)(*p - 'A' + 'a');
    up = 0;
  }
  snprintf(out + k, n - k, "Error");
}

PyMODINIT_FUNC PyInit__agrl(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  error_base = PyErr_NewExceptionWithDoc(
      "agrl.Error", "Any error agrl reports; .status is its C status name.", PyExc_RuntimeError, NULL);
  if (!error_base || PyModule_AddObjectRef(m, "Error", error_base) < 0) goto fail;
  for (int i = 1; i < AGPY_N_STATUS; i++) {
    ag_status s = (ag_status)-i;
    char cname[64], full[80];
    class_name(ag_status_name(s), cname, sizeof cname);
    snprintf(full, sizeof full, "agrl.%s", cname);
    PyObject *extra = builtin_base(s);
    PyObject *bases = extra ? PyTuple_Pack(2, error_base, extra) : PyTuple_Pack(1, error_base);
    PyObject *dict = Py_BuildValue("{s:s}", "status", ag_status_name(s));
    errors[i] = bases && dict ? PyErr_NewExceptionWithDoc(full, ag_status_describe(s), bases, dict) : NULL;
    Py_XDECREF(bases);
    Py_XDECREF(dict);
    if (!errors[i] || PyModule_AddObjectRef(m, cname, errors[i]) < 0) goto fail;
  }
  if (add_type(m, &agpy_ctx_type, "Context") || add_type(m, &agpy_tensor_type, "Tensor") ||
      add_type(m, &agpy_buffer_type, "Buffer") || add_type(m, &agpy_replay_type, "_Replay") ||
      add_type(m, &agpy_dqn_type, "_DQN") || add_type(m, &agpy_ac_type, "_AC") ||
      add_type(m, &agpy_env_type, "_Env"))
    goto fail;
  if (PyModule_AddStringConstant(m, "__version__", AGRL_VERSION) < 0) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
