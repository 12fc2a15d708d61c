/* module.c — agrl._agrl: the module's state and initialisation (multi-phase,
 * heap types), the exceptions (one per status), dtypes, numpy helpers and
 * the module's functions. */
#include <stdarg.h>

#include "agrl_py.h"

static struct PyModuleDef module_def;

agpy_state *agpy_state_of_type(PyTypeObject *type) {
  PyObject *m = PyType_GetModuleByDef(type, &module_def);
  return m ? (agpy_state *)PyModule_GetState(m) : NULL;
}

/* ---- errors ---- */

static PyObject *error_of(agpy_state *st, ag_status s) {
  int i = -(int)s;
  return i > 0 && i < AGPY_N_STATUS && st->errors[i] ? st->errors[i] : st->error_base;
}

PyObject *agpy_raise(agpy_state *st, ag_status s) {
  const char *msg = ag_last_error();
  PyErr_SetString(error_of(st, s), msg && *msg ? msg : ag_status_describe(s));
  return NULL;
}

PyObject *agpy_raisef(agpy_state *st, ag_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *m = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (m) {
    PyErr_SetObject(error_of(st, s), m);
    Py_DECREF(m);
  }
  return NULL;
}

/* ---- dtypes ---- */

static const char *const dtype_names[AG_DTYPE_COUNT_] = {"f32", "f16", "bf16", "u8", "i32", "i64"};
static const char *const numpy_names[AG_DTYPE_COUNT_] = {"float32", "float16", "bfloat16",
                                                         "uint8",   "int32",   "int64"};

int agpy_dtype_parse(agpy_state *st, PyObject *obj, ag_dtype *out, const char *what) {
  if (!PyUnicode_Check(obj)) {
    /* numpy dtypes and types, torch dtypes: by their name (a type's
     * "name" is a descriptor, its __name__ the name: np.float32) */
    PyObject *name = PyObject_GetAttrString(obj, PyType_Check(obj) ? "__name__" : "name");
    if (!name) {
      PyErr_Clear();
      name = PyObject_Str(obj);
    }
    if (!name) return -1;
    int r = PyUnicode_Check(name) ? agpy_dtype_parse(st, name, out, what) : -1;
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
  agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: dtype '%s' is not one of f32, f16, bf16, u8, i32, i64", what, s);
  return -1;
}

const char *agpy_numpy_name(ag_dtype dt) {
  return (int)dt >= 0 && dt < AG_DTYPE_COUNT_ ? numpy_names[dt] : "float32";
}

PyObject *agpy_numpy_empty(agpy_state *st, int ndim, const int64_t *shape, ag_dtype dt, Py_buffer *view) {
  if (!st->numpy_empty) {
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np) return NULL;
    st->numpy_empty = PyObject_GetAttrString(np, "empty");
    Py_DECREF(np);
    if (!st->numpy_empty) return NULL;
  }
  PyObject *sh = PyTuple_New(ndim);
  if (!sh) return NULL;
  for (int i = 0; i < ndim; i++) {
    PyObject *v = PyLong_FromLongLong(shape[i]);
    if (!v) {
      Py_DECREF(sh);
      return NULL;
    }
    PyTuple_SET_ITEM(sh, i, v);
  }
  PyObject *a = PyObject_CallFunction(st->numpy_empty, "Os", sh, agpy_numpy_name(dt));
  Py_DECREF(sh);
  if (!a) return NULL;
  if (PyObject_GetBuffer(a, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
    Py_DECREF(a);
    return NULL;
  }
  return a;
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

static PyObject *py_derive_seed(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  agpy_state *st = PyModule_GetState(m);
  uint64_t seed, index;
  const agpy_arg spec[] = {{"seed", "K", &seed}, {"index", "K", &index}};
  if (agpy_parse(st, "derive_seed", args, nargs, kwnames, 2, spec, 2)) return NULL;
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

static PyMethodDef module_methods[] = {
    {"library_version", py_version, METH_NOARGS,
     "library_version($module, /)\n--\n\nThe C library's version string, e.g. '0.1.0 (cpu+cuda)'."},
    {"cuda_device_count", py_cuda_device_count, METH_NOARGS,
     "cuda_device_count($module, /)\n--\n\nNumber of CUDA devices agrl can use."},
    {"vulkan_device_count", py_vulkan_device_count, METH_NOARGS,
     "vulkan_device_count($module, /)\n--\n\n"
     "Number of Vulkan devices agrl can use (Vulkan 1.2, compute, buffer device addresses)."},
    {"derive_seed", (PyCFunction)(void (*)(void))py_derive_seed, METH_FASTCALL | METH_KEYWORDS,
     "derive_seed($module, /, seed, index)\n--\n\nThe seed of item `index` of the sequence of `seed`."},
    {"builtin_envs", py_builtin_envs, METH_NOARGS,
     "builtin_envs($module, /)\n--\n\nShort names of the built-in environments."},
    {"dqn_defaults", agpy_dqn_defaults, METH_NOARGS,
     "dqn_defaults($module, /)\n--\n\nThe DQN's default configuration as a dict."},
    {"ac_defaults", agpy_ac_defaults, METH_O,
     "ac_defaults($module, algo, /)\n--\n\n"
     "The default configuration of 'sac' or 'td3' as a dict (ag_ac_defaults)."},
    {NULL, NULL, 0, NULL},
};

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

static int add_type(PyObject *m, PyType_Spec *spec, PyObject *base, PyTypeObject **out) {
  PyObject *t = PyType_FromModuleAndSpec(m, spec, base);
  if (!t) return -1;
  *out = (PyTypeObject *)t;
  const char *dot = strrchr(spec->name, '.');
  return PyModule_AddObjectRef(m, dot ? dot + 1 : spec->name, t);
}

static PyObject *intern(const char *s) { return PyUnicode_InternFromString(s); }

static int module_exec(PyObject *m) {
  agpy_state *st = PyModule_GetState(m);
  st->error_base = PyErr_NewExceptionWithDoc(
      "agrl.Error", "Any error agrl reports; .status is its C status name.", PyExc_RuntimeError, NULL);
  if (!st->error_base || PyModule_AddObjectRef(m, "Error", st->error_base) < 0) return -1;
  for (int i = 1; i < AGPY_N_STATUS; i++) {
    ag_status s = (ag_status)-i;
    char cname[64], full[80];
    class_name(ag_status_name(s), cname, sizeof cname);
    snprintf(full, sizeof full, "agrl.%s", cname);
    PyObject *extra = builtin_base(s);
    PyObject *bases = extra ? PyTuple_Pack(2, st->error_base, extra) : PyTuple_Pack(1, st->error_base);
    PyObject *dict = Py_BuildValue("{s:s}", "status", ag_status_name(s));
    st->errors[i] =
        bases && dict ? PyErr_NewExceptionWithDoc(full, ag_status_describe(s), bases, dict) : NULL;
    Py_XDECREF(bases);
    Py_XDECREF(dict);
    if (!st->errors[i] || PyModule_AddObjectRef(m, cname, st->errors[i]) < 0) return -1;
  }
  if (add_type(m, &agpy_ctx_spec, NULL, &st->ctx_type) ||
      add_type(m, &agpy_tensor_spec, NULL, &st->tensor_type) ||
      add_type(m, &agpy_buffer_spec, NULL, &st->buffer_type) ||
      add_type(m, &agpy_replay_spec, NULL, &st->replay_type) ||
      add_type(m, &agpy_frames_spec, NULL, &st->frames_type) ||
      add_type(m, &agpy_dqn_spec, NULL, &st->dqn_type) || add_type(m, &agpy_ac_spec, NULL, &st->ac_type) ||
      add_type(m, &agpy_env_spec, NULL, &st->env_type))
    return -1;
  if (!(st->s_indices = intern("indices")) || !(st->s_weights = intern("weights")) ||
      !(st->s_data_ptr = intern("data_ptr")) || !(st->s_dtype = intern("dtype")) ||
      !(st->s_shape = intern("shape")) || !(st->s_is_contiguous = intern("is_contiguous")) ||
      !(st->s_get_device = intern("get_device")) || !(st->s_dlpack = intern("__dlpack__")) ||
      !(st->s_dlpack_device = intern("__dlpack_device__")) || !(st->s_cuda_stream = intern("cuda_stream")) ||
      !(st->s_stride = intern("stride")))
    return -1;
  return PyModule_AddStringConstant(m, "__version__", AGRL_VERSION);
}

/* clang-format does not settle on a layout of this list: left as written */
// clang-format off
#define AGPY_STATE_OBJECTS(X) \
  X(error_base) X(ctx_type) X(tensor_type) X(buffer_type) X(replay_type) X(frames_type) X(dqn_type) \
  X(ac_type) X(env_type) X(numpy_empty) X(torch_tensor) X(torch_raw_stream) X(torch_current_stream) \
  X(torch_from_dlpack) X(torch_xapi_capsule) X(s_indices) X(s_weights) X(s_data_ptr) X(s_dtype) X(s_shape) \
  X(s_is_contiguous) X(s_get_device) X(s_dlpack) X(s_dlpack_device) X(s_cuda_stream) X(s_stride)
// clang-format on

static int module_traverse(PyObject *m, visitproc visit, void *arg) {
  agpy_state *st = PyModule_GetState(m);
  if (!st) return 0;
#define VISIT(f) Py_VISIT(st->f);
  AGPY_STATE_OBJECTS(VISIT)
#undef VISIT
  for (int i = 0; i < AGPY_N_STATUS; i++) Py_VISIT(st->errors[i]);
  for (int i = 0; i <= AG_DTYPE_COUNT_; i++) Py_VISIT(st->torch_dtypes[i]);
  return 0;
}

static int module_clear(PyObject *m) {
  agpy_state *st = PyModule_GetState(m);
  if (!st) return 0;
#define CLEAR(f) Py_CLEAR(st->f);
  AGPY_STATE_OBJECTS(CLEAR)
#undef CLEAR
  st->torch_xapi = NULL; /* its capsule is gone */
  for (int i = 0; i < AGPY_N_STATUS; i++) Py_CLEAR(st->errors[i]);
  for (int i = 0; i <= AG_DTYPE_COUNT_; i++) Py_CLEAR(st->torch_dtypes[i]);
  return 0;
}

static void module_free(void *m) { module_clear((PyObject *)m); }

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_agrl",
    .m_doc = "agrl's C extension (use the agrl package).",
    .m_size = sizeof(agpy_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__agrl(void) { return PyModuleDef_Init(&module_def); }
