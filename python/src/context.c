/* context.c — agrl.Context: a device, its queue, transfer counters, and the
 * lock every object made on it takes.
 *
 * The lock. agrl's contexts are used by one thread at a time, and the
 * extension releases the GIL around long calls (training, files, waits), so
 * every method of every object on a context takes the context's lock first
 * (the AGPY_WRAP_* prologues). It is re-entrant for its holder (reading an
 * input may run Python code that calls agrl again) and a thread that must
 * wait for it waits with the GIL released, so a thread inside a long call
 * (holding the lock, not the GIL) and one waiting for it (holding the GIL)
 * cannot block each other. */
#include "agrl_py.h"

int agpy_lock(agpy_ctx *c) {
  if (!c || !c->lock) return 0;
  unsigned long me = PyThread_get_thread_ident();
  if (c->depth > 0 && c->owner == me) {
    c->depth++;
    return 0;
  }
  if (!PyThread_acquire_lock(c->lock, NOWAIT_LOCK)) {
    Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(c->lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
  }
  c->owner = me;
  c->depth = 1;
  c->st->call_serial++; /* what another call read of a framework's state is stale */
  return 0;
}

void agpy_unlock(agpy_ctx *c) {
  if (!c || !c->lock) return;
  if (--c->depth == 0) {
    c->owner = 0;
    c->st->call_serial++;
    PyThread_release_lock(c->lock);
  }
}

ag_ctx *agpy_ctx_get(agpy_ctx *c) {
  if (!c || !c->ctx) {
    if (c) agpy_raisef(c->st, AG_ERR_FREED, "the context has been freed");
    return NULL;
  }
  return c->ctx;
}

agpy_ctx *agpy_ctx_check(agpy_state *st, PyObject *obj, const char *fn) {
  if (!PyObject_TypeCheck(obj, st->ctx_type)) {
    PyErr_Format(PyExc_TypeError, "%s: ctx must be an agrl.Context, not %.80s", fn, Py_TYPE(obj)->tp_name);
    return NULL;
  }
  return (agpy_ctx *)obj;
}

PyObject *agpy_obj_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  (void)args, (void)kw;
  agpy_state *st = agpy_state_of_type(type);
  if (!st) return NULL;
  PyObject *o = type->tp_alloc(type, 0);
  if (o) ((agpy_obj *)o)->st = st;
  return o;
}

void agpy_obj_free(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyObject *agpy_enter(PyObject *self, PyObject *a) {
  (void)a;
  return Py_NewRef(self);
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

/* 0: agents (they hold tables), 1: tables, 2: buffers, 3: others */
static int dep_kind(agpy_state *st, PyObject *o) {
  if (PyObject_TypeCheck(o, st->dqn_type) || PyObject_TypeCheck(o, st->ac_type)) return 0;
  if (PyObject_TypeCheck(o, st->replay_type) || PyObject_TypeCheck(o, st->frames_type)) return 1;
  if (PyObject_TypeCheck(o, st->buffer_type)) return 2;
  return 3;
}

static void release_dep(agpy_state *st, PyObject *o) {
  if (PyObject_TypeCheck(o, st->dqn_type))
    agpy_dqn_release(o);
  else if (PyObject_TypeCheck(o, st->ac_type))
    agpy_ac_release(o);
  else if (PyObject_TypeCheck(o, st->replay_type))
    agpy_replay_release(o);
  else if (PyObject_TypeCheck(o, st->frames_type))
    agpy_frames_release(o);
  else if (PyObject_TypeCheck(o, st->buffer_type))
    agpy_buffer_release(o);
}

/* Frees the C context and what was made on it; the caller holds the lock. */
static void ctx_free_locked(agpy_ctx *c) {
  if (!c->ctx) return;
  for (int pass = 0; pass < 3; pass++)
    for (int i = c->n_deps - 1; i >= 0; i--) {
      PyObject *o = c->deps[i];
      if (dep_kind(c->st, o) == pass) {
        release_dep(c->st, o);
        c->deps[i] = c->deps[--c->n_deps];
      }
    }
  ag_ctx *ctx = c->ctx;
  c->ctx = NULL;
  Py_BEGIN_ALLOW_THREADS ag_ctx_free(ctx); /* waits for the queue */
  Py_END_ALLOW_THREADS
}

/* None (auto) or a device name for ag_device_parse: "auto", "cpu", "cuda",
 * "cuda:N", "vulkan", "vulkan:N" (N up to AG_DEVICE_INDEX_MAX). */
static int parse_device(agpy_state *st, PyObject *dev, ag_device_kind *kind, int *index) {
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
  agpy_raisef(st, AG_ERR_INVALID_ARG,
              "device '%s' is not 'auto', 'cpu', 'cuda', 'cuda:N', 'vulkan' or 'vulkan:N'", s);
  return -1;
}

static PyObject *ctx_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  agpy_ctx *c = (agpy_ctx *)agpy_obj_new(type, args, kw);
  if (c && !(c->lock = PyThread_allocate_lock())) {
    Py_DECREF(c);
    return PyErr_NoMemory();
  }
  return (PyObject *)c;
}

static int ctx_init(agpy_ctx *c, PyObject *args, PyObject *kw) {
  PyObject *dev = Py_None;
  const agpy_arg spec[] = {{"device", "O", &dev}};
  if (agpy_parse_tuple(c->st, "Context", args, kw, 0, spec, 1)) return -1;
  ag_device_kind kind;
  int index;
  if (parse_device(c->st, dev, &kind, &index)) return -1;
  if (c->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "Context.__init__ called twice");
    return -1;
  }
  ag_status s;
  ag_ctx *ctx = NULL;
  Py_BEGIN_ALLOW_THREADS s = ag_ctx_create(&ctx, kind, index);
  Py_END_ALLOW_THREADS if (s) {
    agpy_raise(c->st, s);
    return -1;
  }
  c->ctx = ctx;
  return 0;
}

static void ctx_dealloc(agpy_ctx *c) {
  agpy_lock(c);
  ctx_free_locked(c);
  agpy_unlock(c);
  PyMem_Free(c->deps);
  if (c->lock) PyThread_free_lock(c->lock);
  agpy_obj_free((PyObject *)c);
}

/* The methods run with the context's own lock held. */
#define CTX_WRAP(fn)                                     \
  static PyObject *fn##_w(PyObject *self, PyObject *a) { \
    agpy_ctx *c_ = (agpy_ctx *)self;                     \
    if (agpy_lock(c_) < 0) return NULL;                  \
    PyObject *r_ = fn(c_, a);                            \
    agpy_unlock(c_);                                     \
    return r_;                                           \
  }

static PyObject *ctx_sync(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_ctx_sync(ctx);
  Py_END_ALLOW_THREADS if (s) return agpy_raise(c->st, s);
  Py_RETURN_NONE;
}
CTX_WRAP(ctx_sync)

static PyObject *ctx_reset(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  ag_ctx_reset(ctx);
  Py_RETURN_NONE;
}
CTX_WRAP(ctx_reset)

static PyObject *ctx_set_device(agpy_ctx *c, PyObject *dev) {
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  ag_device_kind kind;
  int index;
  if (parse_device(c->st, dev, &kind, &index)) return NULL;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_ctx_set_device(ctx, kind, index);
  Py_END_ALLOW_THREADS if (s) return agpy_raise(c->st, s);
  Py_RETURN_NONE;
}
CTX_WRAP(ctx_set_device)

static PyObject *ctx_free_m(agpy_ctx *c, PyObject *a) {
  (void)a;
  ctx_free_locked(c);
  Py_RETURN_NONE;
}
CTX_WRAP(ctx_free_m)

static PyObject *ctx_exit(agpy_ctx *c, PyObject *a) {
  (void)a;
  ctx_free_locked(c);
  Py_RETURN_FALSE;
}
CTX_WRAP(ctx_exit)

static PyObject *ctx_enter(agpy_ctx *c, PyObject *a) {
  (void)a;
  if (!agpy_ctx_get(c)) return NULL;
  return Py_NewRef(c);
}
CTX_WRAP(ctx_enter)

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
CTX_WRAP(ctx_transfers)

static PyObject *ctx_transfer_totals(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  uint64_t up = 0, down = 0;
  ag_xfer_total(ctx, &up, &down);
  return Py_BuildValue("(KK)", (unsigned long long)up, (unsigned long long)down);
}
CTX_WRAP(ctx_transfer_totals)

static PyObject *ctx_reset_transfers(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  ag_xfer_reset(ctx);
  Py_RETURN_NONE;
}
CTX_WRAP(ctx_reset_transfers)

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
CTX_WRAP(ctx_stats)

static PyObject *ctx_mem_info(agpy_ctx *c, PyObject *a) {
  (void)a;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  size_t f = 0, t = 0;
  ag_status s = ag_ctx_mem_info(ctx, &f, &t);
  if (s) return agpy_raise(c->st, s);
  return Py_BuildValue("(nn)", (Py_ssize_t)f, (Py_ssize_t)t);
}
CTX_WRAP(ctx_mem_info)

static PyObject *ctx_inject_fault(agpy_ctx *c, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *kind;
  int64_t after;
  const agpy_arg spec[] = {{"kind", "U", &kind}, {"after", "L", &after}};
  if (agpy_parse(c->st, "inject_fault", args, nargs, kwnames, 2, spec, 2)) return NULL;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  static const char *const names[] = {"alloc", "upload", "download", "host_alloc"};
  for (int i = 0; i < 4; i++)
    if (!PyUnicode_CompareWithASCIIString(kind, names[i])) {
      ag_status s = ag_ctx_inject_fault(ctx, (ag_fault)i, after);
      if (s) return agpy_raise(c->st, s);
      Py_RETURN_NONE;
    }
  return agpy_raisef(c->st, AG_ERR_INVALID_ARG,
                     "inject_fault: kind '%U' is not alloc, upload, download or host_alloc", kind);
}
static PyObject *ctx_inject_fault_w(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *k) {
  agpy_ctx *c = (agpy_ctx *)self;
  if (agpy_lock(c) < 0) return NULL;
  PyObject *r = ctx_inject_fault(c, a, n, k);
  agpy_unlock(c);
  return r;
}

/* stream_wait(stream) / wait_stream(stream): ag_stream_wait_ctx and
 * ag_ctx_wait_stream with a native stream handle (an int, 0 the legacy default) */
static PyObject *ctx_order(agpy_ctx *c, PyObject *arg, int ctx_waits) {
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return NULL;
  uint64_t h;
  if (agpy_convert(c->st, ctx_waits ? "wait_stream" : "stream_wait", "stream", arg, "K", &h)) return NULL;
  void *stream = (void *)(uintptr_t)h;
  ag_status s = ctx_waits ? ag_ctx_wait_stream(ctx, stream) : ag_stream_wait_ctx(ctx, stream);
  if (s) return agpy_raise(c->st, s);
  Py_RETURN_NONE;
}
static PyObject *ctx_stream_wait(agpy_ctx *c, PyObject *arg) { return ctx_order(c, arg, 0); }
static PyObject *ctx_wait_stream(agpy_ctx *c, PyObject *arg) { return ctx_order(c, arg, 1); }
CTX_WRAP(ctx_stream_wait)
CTX_WRAP(ctx_wait_stream)

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

#define CTX_GETW(fn)                                 \
  static PyObject *fn##_w(PyObject *self, void *x) { \
    agpy_ctx *c_ = (agpy_ctx *)self;                 \
    if (agpy_lock(c_) < 0) return NULL;              \
    PyObject *r_ = fn(c_, x);                        \
    agpy_unlock(c_);                                 \
    return r_;                                       \
  }
CTX_GETW(ctx_get_device)
CTX_GETW(ctx_get_name)
CTX_GETW(ctx_get_stream)

static PyObject *ctx_repr(agpy_ctx *c) {
  if (!c->ctx) return PyUnicode_FromString("<agrl.Context (freed)>");
  return PyUnicode_FromFormat("<agrl.Context %s>", ag_ctx_device_name(c->ctx));
}

static PyMethodDef ctx_methods[] = {
    {"sync", ctx_sync_w, METH_NOARGS, "sync($self, /)\n--\n\nWaits for all work queued on the context."},
    {"reset", ctx_reset_w, METH_NOARGS,
     "reset($self, /)\n--\n\nReleases the workspace's temporaries (not agrl.Tensors)."},
    {"set_device", ctx_set_device_w, METH_O,
     "set_device($self, device, /)\n--\n\nMoves the context and everything on it to another device."},
    {"free", ctx_free_m_w, METH_NOARGS,
     "free($self, /)\n--\n\nFrees the context and the buffers, tables and agents made on it; agrl.Tensors "
     "stay "
     "valid."},
    {"transfers", ctx_transfers_w, METH_NOARGS,
     "transfers($self, /)\n--\n\nBytes and calls across the bus, per operation."},
    {"transfer_totals", ctx_transfer_totals_w, METH_NOARGS,
     "transfer_totals($self, /)\n--\n\n(up_bytes, down_bytes) over all operations."},
    {"reset_transfers", ctx_reset_transfers_w, METH_NOARGS,
     "reset_transfers($self, /)\n--\n\nSets the transfer counters to zero."},
    {"stats", ctx_stats_w, METH_NOARGS, "stats($self, /)\n--\n\nAllocation, kernel and recording counters."},
    {"stream_wait", ctx_stream_wait_w, METH_O,
     "stream_wait($self, stream, /)\n--\n\n"
     "`stream` (a CUDA stream handle as an int: torch's stream.cuda_stream, CuPy's stream.ptr; 0 the legacy "
     "default) waits for the work queued on the context so far, on the device (no host wait)."},
    {"wait_stream", ctx_wait_stream_w, METH_O,
     "wait_stream($self, stream, /)\n--\n\nThe context's queue waits for the work queued on `stream` so "
     "far."},
    {"mem_info", ctx_mem_info_w, METH_NOARGS,
     "mem_info($self, /)\n--\n\n(free_bytes, total_bytes) of the device."},
    {"inject_fault", (PyCFunction)(void (*)(void))ctx_inject_fault_w, AGPY_FAST,
     "inject_fault($self, /, kind, after)\n--\n\n"
     "The next operation of `kind` ('alloc', 'upload', 'download', 'host_alloc') after `after` more fails "
     "(for tests)."},
    {"__enter__", ctx_enter_w, METH_NOARGS, "__enter__($self, /)\n--\n\n"},
    {"__exit__", ctx_exit_w, METH_VARARGS, "__exit__($self, *exc_info)\n--\n\nFrees the context."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ctx_getset[] = {
    {"device", ctx_get_device_w, NULL, "'cpu', 'cuda:N' or 'vulkan:N'", NULL},
    {"device_name", ctx_get_name_w, NULL, "a description of the device", NULL},
    {"stream", ctx_get_stream_w, NULL, "the context's CUDA stream as an int (None on the CPU)", NULL},
    {"closed", (getter)ctx_get_closed, NULL, "True once freed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot ctx_slots[] = {
    {Py_tp_new, ctx_new},
    {Py_tp_init, ctx_init},
    {Py_tp_dealloc, ctx_dealloc},
    {Py_tp_repr, ctx_repr},
    {Py_tp_methods, ctx_methods},
    {Py_tp_getset, ctx_getset},
    {Py_tp_doc,
     "Context(device=None)\n--\n\n"
     "A device and its queue: device 'auto' (None), 'cpu', 'cuda', 'cuda:N', 'vulkan' or 'vulkan:N'.\n"
     "Every object made on a context is used by one thread at a time: its methods take the "
     "context's lock."},
    {0, NULL},
};

PyType_Spec agpy_ctx_spec = {"agrl.Context", sizeof(agpy_ctx), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                             ctx_slots};
