/* context.c — agrl.Context: a device, its queue, transfer counters. */
#include "agrl_py.h"

/* The release function of each kind of dependent object. */
void agpy_buffer_release(PyObject *self);
void agpy_replay_release(PyObject *self);
void agpy_dqn_release(PyObject *self);

ag_ctx *agpy_ctx_get(agpy_ctx *c) {
  if (!c || !c->ctx) {
    agpy_raisef(AG_ERR_FREED, "the context has been freed");
    return NULL;
  }
  return c->ctx;
}

int agpy_ctx_add_dep(agpy_ctx *c, PyObject *dep) {
  if (c->n_deps == c->cap_deps) {
    int cap = c->cap_deps ? 2 * c->cap_deps : 8;
    PyObject **d = PyMem_Realloc(c->deps, (size_t)cap * sizeof *d);
    if (!d) {
      PyErr_NoMemory();
      return -1;
    }
    c->deps = d;
    c->cap_deps = cap;
  }
  c->deps[c->n_deps++] = dep;
  return 0;
}

void agpy_ctx_drop_dep(agpy_ctx *c, PyObject *dep) {
  for (int i = 0; i < c->n_deps; i++)
    if (c->deps[i] == dep) {
      c->deps[i] = c->deps[--c->n_deps];
      return;
    }
}

static void release_dep(PyObject *o) {
  if (PyObject_TypeCheck(o, &agpy_dqn_type))
    agpy_dqn_release(o);
  else if (PyObject_TypeCheck(o, &agpy_ac_type))
    agpy_ac_release(o);
  else if (PyObject_TypeCheck(o, &agpy_replay_type))
    agpy_replay_release(o);
  else if (PyObject_TypeCheck(o, &agpy_buffer_type))
    agpy_buffer_release(o);
}

static void ctx_free(agpy_ctx *c) {
  if (!c->ctx) return;
  /* agents first (they hold tables), then tables, then buffers */
  for (int pass = 0; pass < 3; pass++)
    for (int i = c->n_deps - 1; i >= 0; i--) {
      PyObject *o = c->deps[i];
      const int agent = PyObject_TypeCheck(o, &agpy_dqn_type) || PyObject_TypeCheck(o, &agpy_ac_type);
      int kind = agent ? 0 : PyObject_TypeCheck(o, &agpy_replay_type) ? 1 : 2;
      if (kind == pass) {
        release_dep(o);
        c->deps[i] = c->deps[--c->n_deps];
      }
    }
  ag_ctx_free(c->ctx);
  c->ctx = NULL;
}

/* None (auto) or a device name for ag_device_parse: "auto", "cpu", "cuda",
 * "cuda:N", "vulkan", "vulkan:N" (N up to AG_DEVICE_INDEX_MAX). */
static int parse_device(PyObject *dev, ag_device_kind *kind, int *index) {
  if (!dev || dev == Py_None) {
    *kind = AG_DEVICE_AUTO;
    *index = 0;
    return 0;
  }
  if (!PyUnicode_Check(dev)) {
    PyErr_Format(
        PyExc_TypeError,
        "device must be a string ('auto', 'cpu', 'cuda', 'cuda:N', 'vulkan' or 'vulkan:N'), not %.80s",
        Py_TYPE(dev)->tp_name);
    return -1;
  }
  Py_ssize_t len = 0;
  const char *s = PyUnicode_AsUTF8AndSize(dev, &len);
  if (!s) return -1;
  /* a NUL inside the string would end the name early: refused with the rest */
  if ((size_t)len == strlen(s) && ag_device_parse(s, kind, index) == AG_OK) return 0;
  agpy_raisef(AG_ERR_INVALID_ARG,
              "device '%s' is not 'auto', 'cpu', 'cuda', 'cuda:N', 'vulkan' or 'vulkan:N'", s);
  return -1;
}

static PyObject *ctx_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  (void)args, (void)kw;
  agpy_ctx *c = (agpy_ctx *)type->tp_alloc(type, 0);
  return (PyObject *)c;
}

static int ctx_init(agpy_ctx *c, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"device", NULL};
  PyObject *dev = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Context", kwlist, &dev)) return -1;
  ag_device_kind kind;
  int index;
  if (parse_device(dev, &kind, &index)) return -1;
  if (c->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "Context.__init__ called twice");
    return -1;
  }
  ag_status s = ag_ctx_create(&c->ctx, kind, index);
  if (s) {
    agpy_raise(s);
    return -1;
  }
  return 0;
}

static void ctx_dealloc(agpy_ctx *c) {
  ctx_free(c);
  PyMem_Free(c->deps);
  Py_TYPE(c)->tp_free((PyObject *)c);
}

agpy_ctx *agpy_ctx_arg(PyObject *obj) {
  if (obj && PyObject_TypeCheck(obj, &agpy_ctx_type)) {
    Py_INCREF(obj);
    return (agpy_ctx *)obj;
  }
  if (obj && obj != Py_None && !PyUnicode_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "ctx must be an agrl.Context or a device string, not %.80s",
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  return (agpy_ctx *)PyObject_CallFunctionObjArgs((PyObject *)&agpy_ctx_type, obj ? obj : Py_None, NULL);
}

static PyObject *ctx_sync(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  ag_status s = ag_ctx_sync(ctx);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

static PyObject *ctx_reset(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  ag_ctx_reset(ctx);
  Py_RETURN_NONE;
}

static PyObject *ctx_set_device(agpy_ctx *c, PyObject *dev) {
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  ag_device_kind kind;
  int index;
  if (parse_device(dev, &kind, &index)) return NULL;
  ag_status s = ag_ctx_set_device(ctx, kind, index);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

static PyObject *ctx_free_m(agpy_ctx *c, PyObject *a) {
  (void)a;
  ctx_free(c);
  Py_RETURN_NONE;
}

static PyObject *ctx_enter(agpy_ctx *c, PyObject *a) {
  (void)a;
  if (!agpy_ctx_get(c)) return NULL;
  Py_INCREF(c);
  return (PyObject *)c;
}

static PyObject *ctx_exit(agpy_ctx *c, PyObject *a) {
  (void)a;
  ctx_free(c);
  Py_RETURN_FALSE;
}

static PyObject *ctx_transfers(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  PyObject *d = PyDict_New();
  int n = ag_xfer_count(ctx);
  for (int i = 0; d && i < n; i++) {
    ag_xfer_entry e;
    if (ag_xfer_entry_at(ctx, i, &e)) continue;
    PyObject *v = Py_BuildValue("{s:K,s:K,s:K,s:K}", "up_bytes", (unsigned long long)e.up_bytes, "down_bytes",
                                (unsigned long long)e.down_bytes, "up_calls", (unsigned long long)e.up_calls,
                                "down_calls", (unsigned long long)e.down_calls);
    if (!v || PyDict_SetItemString(d, e.op, v) < 0) Py_CLEAR(d);
    Py_XDECREF(v);
  }
  return d;
}

static PyObject *ctx_transfer_totals(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  uint64_t up = 0, down = 0;
  ag_xfer_total(ctx, &up, &down);
  return Py_BuildValue("(KK)", (unsigned long long)up, (unsigned long long)down);
}

static PyObject *ctx_reset_transfers(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  ag_xfer_reset(ctx);
  Py_RETURN_NONE;
}

static PyObject *ctx_stats(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  ag_ctx_stats s;
  ag_ctx_get_stats(ctx, &s);
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "allocs", (unsigned long long)s.allocs, "frees",
                       (unsigned long long)s.frees, "live_bytes", (unsigned long long)s.live_bytes,
                       "workspace_bytes", (unsigned long long)s.workspace_bytes, "syncs",
                       (unsigned long long)s.syncs, "kernels", (unsigned long long)s.kernels, "replays",
                       (unsigned long long)s.replays, "records", (unsigned long long)s.records);
}

static PyObject *ctx_mem_info(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  size_t f = 0, t = 0;
  ag_status s = ag_ctx_mem_info(ctx, &f, &t);
  if (s) return agpy_raise(s);
  return Py_BuildValue("(nn)", (Py_ssize_t)f, (Py_ssize_t)t);
}

static PyObject *ctx_inject_fault(agpy_ctx *c, PyObject *args) {
  const char *kind;
  long long after;
  if (!PyArg_ParseTuple(args, "sL:inject_fault", &kind, &after)) return NULL;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  static const char *const names[] = {"alloc", "upload", "download", "host_alloc"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(kind, names[i])) {
      ag_status s = ag_ctx_inject_fault(ctx, (ag_fault)i, after);
      if (s) return agpy_raise(s);
      Py_RETURN_NONE;
    }
  return agpy_raisef(AG_ERR_INVALID_ARG,
                     "inject_fault: kind '%s' is not alloc, upload, download or host_alloc", kind);
}

static PyObject *ctx_get_device(agpy_ctx *c, void *x) {
  (void)x;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  const ag_device_kind k = ag_ctx_device(ctx);
  if (k == AG_DEVICE_CPU) return PyUnicode_FromString("cpu");
  return PyUnicode_FromFormat("%s:%d", k == AG_DEVICE_VULKAN ? "vulkan" : "cuda", ag_ctx_device_index(ctx));
}

static PyObject *ctx_get_name(agpy_ctx *c, void *x) {
  (void)x;
  ag_ctx *ctx = agpy_ctx_get(c);
  return ctx ? PyUnicode_FromString(ag_ctx_device_name(ctx)) : NULL;
}

static PyObject *ctx_get_stream(agpy_ctx *c, void *x) {
  (void)x;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  void *s = ag_ctx_native_stream(ctx);
  if (!s) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(s);
}

static PyObject *ctx_get_closed(agpy_ctx *c, void *x) {
  (void)x;
  return PyBool_FromLong(c->ctx == NULL);
}

static PyObject *ctx_repr(agpy_ctx *c) {
  if (!c->ctx) return PyUnicode_FromString("<agrl.Context (freed)>");
  return PyUnicode_FromFormat("<agrl.Context %s>", ag_ctx_device_name(c->ctx));
}

static PyMethodDef ctx_methods[] = {
    {"sync", (PyCFunction)ctx_sync, METH_NOARGS, "Waits for all work queued on the context."},
    {"reset", (PyCFunction)ctx_reset, METH_NOARGS,
     "Releases the workspace's temporaries (not agrl.Tensors)."},
    {"set_device", (PyCFunction)ctx_set_device, METH_O,
     "set_device(device): moves the context and everything on it to another device."},
    {"free", (PyCFunction)ctx_free_m, METH_NOARGS,
     "Frees the context and the buffers, tables and DQNs made on it; agrl.Tensors stay valid."},
    {"transfers", (PyCFunction)ctx_transfers, METH_NOARGS, "Bytes and calls across the bus, per operation."},
    {"transfer_totals", (PyCFunction)ctx_transfer_totals, METH_NOARGS,
     "(up_bytes, down_bytes) over all operations."},
    {"reset_transfers", (PyCFunction)ctx_reset_transfers, METH_NOARGS, "Sets the transfer counters to zero."},
    {"stats", (PyCFunction)ctx_stats, METH_NOARGS, "Allocation, kernel and recording counters."},
    {"mem_info", (PyCFunction)ctx_mem_info, METH_NOARGS, "(free_bytes, total_bytes) of the device."},
    {"inject_fault", (PyCFunction)ctx_inject_fault, METH_VARARGS,
     "inject_fault(kind, after): the next operation of kind after `after` more fails (for tests)."},
    {"__enter__", (PyCFunction)ctx_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)ctx_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ctx_getset[] = {
    {"device", (getter)ctx_get_device, NULL, "'cpu', 'cuda:N' or 'vulkan:N'", NULL},
    {"device_name", (getter)ctx_get_name, NULL, "a description of the device", NULL},
    {"stream", (getter)ctx_get_stream, NULL, "the context's CUDA stream as an int (None on the CPU)", NULL},
    {"closed", (getter)ctx_get_closed, NULL, "True once freed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject agpy_ctx_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "agrl.Context",
    .tp_basicsize = sizeof(agpy_ctx),
    .tp_dealloc = (destructor)ctx_dealloc,
    .tp_repr = (reprfunc)ctx_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "Context(device='auto' | 'cpu' | 'cuda' | 'cuda:N' | 'vulkan' | 'vulkan:N'): a device and its queue.",
    .tp_methods = ctx_methods,
    .tp_getset = ctx_getset,
    .tp_init = (initproc)ctx_init,
    .tp_new = ctx_new,
};
