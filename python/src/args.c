/* args.c — one argument parser for every function of the extension.
 *
 * Arguments are positional-or-keyword, in the order of their spec. Each
 * value is converted by its kind, and every message names the function and
 * the argument: a value of the wrong type is a TypeError, a number outside
 * its C type agrl.InvalidArgError (a ValueError), so that "capacity = 2**70"
 * says which argument it was instead of a bare OverflowError. Checks of
 * meaning (a capacity of 0, a beta above 1) are the C library's, whose
 * messages name the argument too. */
#include "agrl_py.h"

static int is_int(PyObject *v) { return PyLong_Check(v); }

int agpy_convert(agpy_state *st, const char *fn, const char *name, PyObject *v, const char *kind, void *out) {
  int optional = kind[0] == '?';
  char k = kind[optional];
  if (optional && v == Py_None) return 0;
  switch (k) {
    case 'O': *(PyObject **)out = v; return 0;
    case 'U':
      if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a str, not %.80s", fn, name, Py_TYPE(v)->tp_name);
        return -1;
      }
      *(PyObject **)out = v;
      return 0;
    case 'p': {
      int t = PyObject_IsTrue(v);
      if (t < 0) return -1;
      *(int *)out = t;
      return 0;
    }
    case 'F': {
      PyObject *b = NULL;
      if (!PyUnicode_FSConverter(v, &b)) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
          PyErr_Clear();
          PyErr_Format(PyExc_TypeError, "%s: %s must be a path (str, bytes or os.PathLike), not %.80s", fn,
                       name, Py_TYPE(v)->tp_name);
        }
        return -1;
      }
      *(PyObject **)out = b;
      return 0;
    }
    case 'd': {
      if (!PyFloat_Check(v) && !PyLong_Check(v) && !PyIndex_Check(v) &&
          !PyObject_HasAttrString(v, "__float__")) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a number, not %.80s", fn, name, Py_TYPE(v)->tp_name);
        return -1;
      }
      double d = PyFloat_AsDouble(v);
      if (d == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
          PyErr_Clear();
          agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: %s = %R does not fit a double", fn, name, v);
        }
        return -1;
      }
      *(double *)out = d;
      return 0;
    }
    case 'L':
    case 'K':
    case 'i': {
      PyObject *iv = NULL;
      if (is_int(v)) {
        iv = Py_NewRef(v);
      } else if (PyIndex_Check(v) && !PyFloat_Check(v)) { /* numpy's integers */
        iv = PyNumber_Index(v);
        if (!iv) return -1;
      } else {
        PyErr_Format(PyExc_TypeError, "%s: %s must be an int, not %.80s", fn, name, Py_TYPE(v)->tp_name);
        return -1;
      }
      int bad = 0;
      if (k == 'K') {
        unsigned long long u = PyLong_AsUnsignedLongLong(iv);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
          PyErr_Clear();
          bad = 1;
        } else {
          *(uint64_t *)out = u;
        }
        if (bad) agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: %s = %R is outside 0 .. 2^64-1", fn, name, iv);
      } else {
        long long x = PyLong_AsLongLong(iv);
        if (x == -1 && PyErr_Occurred()) {
          PyErr_Clear();
          bad = 1;
        } else if (k == 'i' && (x < INT32_MIN || x > INT32_MAX)) {
          bad = 1;
        } else if (k == 'i') {
          *(int *)out = (int)x;
        } else {
          *(int64_t *)out = x;
        }
        if (bad)
          agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: %s = %R is outside %s", fn, name, iv,
                      k == 'i' ? "-2^31 .. 2^31-1" : "-2^63 .. 2^63-1");
      }
      Py_DECREF(iv);
      return bad ? -1 : 0;
    }
    default: PyErr_Format(PyExc_SystemError, "%s: bad argument kind '%s'", fn, kind); return -1;
  }
}

/* The spec's index of keyword `key`, or -1. */
static int find_kw(PyObject *key, const agpy_arg *spec, int n_spec) {
  for (int i = 0; i < n_spec; i++)
    if (PyUnicode_CompareWithASCIIString(key, spec[i].name) == 0) return i;
  return -1;
}

static int parse_core(agpy_state *st, const char *fn, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames, PyObject *const *kwvals, PyObject *kwdict, int n_required,
                      const agpy_arg *spec, int n_spec) {
  PyObject *vals[32] = {NULL};
  if (n_spec > 32) {
    PyErr_SetString(PyExc_SystemError, "agpy_parse: too many arguments in a spec");
    return -1;
  }
  if (nargs > n_spec) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", fn, n_spec, nargs);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; i++) vals[i] = args[i];
  Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nk; i++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, i);
    int j = find_kw(key, spec, n_spec);
    if (j < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn, key);
      return -1;
    }
    if (vals[j]) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn, spec[j].name);
      return -1;
    }
    vals[j] = kwvals[i];
  }
  if (kwdict) {
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwdict, &pos, &key, &val)) {
      int j = PyUnicode_Check(key) ? find_kw(key, spec, n_spec) : -1;
      if (j < 0) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fn, key);
        return -1;
      }
      if (vals[j]) {
        PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn, spec[j].name);
        return -1;
      }
      vals[j] = val;
    }
  }
  int made = 0; /* 'F' outputs made so far, released on a later failure */
  for (int i = 0; i < n_spec; i++) {
    if (!vals[i]) {
      if (i < n_required) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", fn, spec[i].name,
                     i + 1);
        goto fail;
      }
      continue;
    }
    if (agpy_convert(st, fn, spec[i].name, vals[i], spec[i].kind, spec[i].out)) goto fail;
    made = i + 1;
  }
  return 0;
fail:
  for (int i = 0; i < made; i++)
    if (vals[i] && spec[i].kind[spec[i].kind[0] == '?'] == 'F' && vals[i] != Py_None)
      Py_CLEAR(*(PyObject **)spec[i].out);
  return -1;
}

int agpy_parse(agpy_state *st, const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               int n_required, const agpy_arg *spec, int n_spec) {
  return parse_core(st, fn, args, nargs, kwnames, kwnames ? args + nargs : NULL, NULL, n_required, spec,
                    n_spec);
}

int agpy_parse_tuple(agpy_state *st, const char *fn, PyObject *args, PyObject *kw, int n_required,
                     const agpy_arg *spec, int n_spec) {
  return parse_core(st, fn, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), NULL, NULL,
                    kw && PyDict_GET_SIZE(kw) ? kw : NULL, n_required, spec, n_spec);
}
