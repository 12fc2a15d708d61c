/* config.c — the agents' configuration dicts: the keys checked against
 * the names of the C struct's fields, each value read by its field's type
 * (a value of the wrong type, or one outside the C type, raises naming the
 * key). A value out of its field's range is left for the C library's check,
 * whose message names the field. */
#include <math.h>

#include "agrl_py.h"

int agpy_cfg_keys(agpy_state *st, PyObject *cfg, const char *const *known, const char *who,
                  const char *cstruct) {
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
      agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: unknown option %R (options: the fields of %s)", who, key,
                  cstruct);
      return -1;
    }
  }
  return 0;
}

/* kind: as agpy_convert's, 'f' a float (a double rounded to one), 'b' a bool
 * field (True / False, or an int that the C library checks) */
int agpy_cfg_get(agpy_state *st, PyObject *cfg, const char *key, const char *kind, void *out,
                 const char *who) {
  if (!cfg || cfg == Py_None) return 0;
  PyObject *v = PyDict_GetItemString(cfg, key);
  if (!v) return 0;
  if (kind[0] == 'f') { /* a float field: a value float cannot hold is refused, not rounded to 0 or inf */
    double d;
    if (agpy_convert(st, who, key, v, "d", &d)) return -1;
    const float f = (float)d;
    if (isfinite(d) && (isinf(f) || (f == 0.0f && d != 0.0))) {
      char num[32];
      PyOS_snprintf(num, sizeof num, "%g", d);
      agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: %s = %s is beyond a float's range", who, key, num);
      return -1;
    }
    *(float *)out = f;
    return 0;
  }
  if (kind[0] == 'b') { /* a 0 / 1 field: a bool, or an int the C library checks */
    if (PyBool_Check(v)) {
      *(int *)out = v == Py_True;
      return 0;
    }
    if (!PyLong_Check(v) && !PyIndex_Check(v)) {
      PyErr_Format(PyExc_TypeError, "%s: %s must be a bool, not %.80s", who, key, Py_TYPE(v)->tp_name);
      return -1;
    }
    return agpy_convert(st, who, key, v, "i", out);
  }
  return agpy_convert(st, who, key, v, kind, out);
}

int agpy_cfg_hidden(agpy_state *st, PyObject *cfg, int64_t *hidden, int *n_hidden, int max, const char *who) {
  PyObject *h = cfg && cfg != Py_None ? PyDict_GetItemString(cfg, "hidden") : NULL;
  if (!h) return 0;
  char msg[96];
  PyOS_snprintf(msg, sizeof msg, "%s: hidden must be a sequence of layer sizes", who);
  PyObject *seq = PySequence_Fast(h, msg);
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > max) {
    Py_DECREF(seq);
    agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: %zd hidden layers (at most %d)", who, n, max);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    if (agpy_convert(st, who, "hidden", PySequence_Fast_GET_ITEM(seq, i), "L", &hidden[i])) {
      Py_DECREF(seq);
      return -1;
    }
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
