/* config.c — the agents' configuration dicts: the keys checked against
 * the names of the C struct's fields, each value read by its field's type.
 * A value out of its field's range is left for the C library's check,
 * whose message names the field. */
#include <limits.h>

#include "agrl_py.h"

int agpy_cfg_keys(PyObject *cfg, const char *const *known, const char *who, const char *cstruct) {
  if (!PyDict_Check(cfg)) {
    PyErr_Format(PyExc_TypeError, "%s: config must be a dict", who);
    return -1;
  }
  PyObject *key, *val;
  Py_ssize_t pos = 0;
  while (PyDict_Next(cfg, &pos, &key, &val)) {
    const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
    if (!k) PyErr_Clear();
    int ok = 0;
    for (int i = 0; k && known[i]; i++) ok |= !strcmp(k, known[i]);
    if (!ok) {
      agpy_raisef(AG_ERR_INVALID_ARG, "%s: unknown option %R (options: the fields of %s)", who, key, cstruct);
      return -1;
    }
  }
  return 0;
}

int agpy_cfg_f(PyObject *cfg, const char *key, float *out) {
  PyObject *v = PyDict_GetItemString(cfg, key);
  if (!v) return 0;
  double x = PyFloat_AsDouble(v);
  if (x == -1.0 && PyErr_Occurred()) return -1;
  *out = (float)x;
  return 0;
}

int agpy_cfg_i64(PyObject *cfg, const char *key, int64_t *out, const char *who) {
  PyObject *v = PyDict_GetItemString(cfg, key);
  if (!v) return 0;
  if (!PyLong_Check(v)) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be an int, not %.80s", who, key, Py_TYPE(v)->tp_name);
    return -1;
  }
  long long x = PyLong_AsLongLong(v);
  if (x == -1 && PyErr_Occurred()) return -1;
  *out = x;
  return 0;
}

int agpy_cfg_int(PyObject *cfg, const char *key, int *out, const char *who) {
  int64_t x = *out;
  if (agpy_cfg_i64(cfg, key, &x, who)) return -1;
  *out = x < INT_MIN ? INT_MIN : (x > INT_MAX ? INT_MAX : (int)x); /* out of range either way */
  return 0;
}

int agpy_cfg_bool(PyObject *cfg, const char *key, int *out) {
  PyObject *v = PyDict_GetItemString(cfg, key);
  if (!v) return 0;
  int t = PyObject_IsTrue(v);
  if (t < 0) return -1;
  *out = t;
  return 0;
}

int agpy_cfg_u64(PyObject *cfg, const char *key, uint64_t *out) {
  PyObject *v = PyDict_GetItemString(cfg, key);
  if (!v) return 0;
  unsigned long long s = PyLong_AsUnsignedLongLong(v);
  if (s == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *out = s;
  return 0;
}

int agpy_cfg_hidden(PyObject *cfg, int64_t *hidden, int *n_hidden, int max, const char *who) {
  PyObject *h = PyDict_GetItemString(cfg, "hidden");
  if (!h) return 0;
  char msg[96];
  PyOS_snprintf(msg, sizeof msg, "%s: hidden must be a sequence of layer sizes", who);
  PyObject *seq = PySequence_Fast(h, msg);
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > max) {
    Py_DECREF(seq);
    agpy_raisef(AG_ERR_INVALID_ARG, "%s: %zd hidden layers (at most %d)", who, n, max);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return -1;
    }
    hidden[i] = v;
  }
  *n_hidden = (int)n;
  Py_DECREF(seq);
  return 0;
}

PyObject *agpy_hidden_tuple(const int64_t *hidden, int n) {
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t && i < n; i++) {
    PyObject *v = PyLong_FromLongLong(hidden[i]);
    if (!v) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, v);
  }
  return t;
}
