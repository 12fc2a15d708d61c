/* dqn.c — the C sides of agrl.DQN and of the built-in environments. */
#include <math.h>

#include "agrl_py.h"

/* ---- DQN ---- */

typedef struct agpy_dqn {
  PyObject_HEAD agpy_ctx *ctx;
  ag_dqn *d; /* NULL once freed */
  int64_t obs_dim, n_actions;
} agpy_dqn;

void agpy_dqn_release(PyObject *self) {
  agpy_dqn *d = (agpy_dqn *)self;
  if (d->d) ag_dqn_free(d->d);
  d->d = NULL;
}

static ag_dqn *dqn_get(agpy_dqn *d) {
  if (!d->d || !d->ctx || !d->ctx->ctx) {
    agpy_raisef(AG_ERR_FREED, "the DQN has been freed (or its context)");
    return NULL;
  }
  return d->d;
}

/* Fills an ag_dqn_config from a dict of the names of its fields. */
static int parse_config(PyObject *cfg, ag_dqn_config *c) {
  static const char *const known[] = {"hidden",
                                      "lr",
                                      "gamma",
                                      "batch_size",
                                      "buffer_size",
                                      "learning_starts",
                                      "train_freq",
                                      "gradient_steps",
                                      "target_update_interval",
                                      "tau",
                                      "exploration_fraction",
                                      "eps_start",
                                      "eps_end",
                                      "max_grad_norm",
                                      "double_dqn",
                                      "huber",
                                      "seed",
                                      "fused",
                                      "per",
                                      "per_alpha",
                                      "per_beta",
                                      "per_eps",
                                      "n_step",
                                      "n_envs",
                                      NULL};
  static const char who[] = "DQN";
  *c = ag_dqn_defaults();
  if (!cfg || cfg == Py_None) return 0;
  if (agpy_cfg_keys(cfg, known, who, "ag_dqn_config") ||
      agpy_cfg_hidden(cfg, c->hidden, &c->n_hidden, AG_DQN_MAX_HIDDEN, who) ||
      agpy_cfg_int(cfg, "n_step", &c->n_step, who) || agpy_cfg_u64(cfg, "seed", &c->seed))
    return -1;
  if (agpy_cfg_f(cfg, "lr", &c->lr) || agpy_cfg_f(cfg, "gamma", &c->gamma) ||
      agpy_cfg_i64(cfg, "batch_size", &c->batch_size, who) ||
      agpy_cfg_i64(cfg, "buffer_size", &c->buffer_size, who) ||
      agpy_cfg_i64(cfg, "learning_starts", &c->learning_starts, who) ||
      agpy_cfg_i64(cfg, "train_freq", &c->train_freq, who) ||
      agpy_cfg_i64(cfg, "gradient_steps", &c->gradient_steps, who) ||
      agpy_cfg_i64(cfg, "target_update_interval", &c->target_update_interval, who) ||
      agpy_cfg_f(cfg, "tau", &c->tau) || agpy_cfg_f(cfg, "exploration_fraction", &c->exploration_fraction) ||
      agpy_cfg_f(cfg, "eps_start", &c->eps_start) || agpy_cfg_f(cfg, "eps_end", &c->eps_end) ||
      agpy_cfg_f(cfg, "max_grad_norm", &c->max_grad_norm) ||
      agpy_cfg_bool(cfg, "double_dqn", &c->double_dqn) || agpy_cfg_bool(cfg, "huber", &c->huber) ||
      agpy_cfg_bool(cfg, "fused", &c->fused) || agpy_cfg_bool(cfg, "per", &c->per) ||
      agpy_cfg_f(cfg, "per_alpha", &c->per_alpha) || agpy_cfg_f(cfg, "per_beta", &c->per_beta) ||
      agpy_cfg_f(cfg, "per_eps", &c->per_eps) || agpy_cfg_i64(cfg, "n_envs", &c->n_envs, who))
    return -1;
  return 0;
}

static int dqn_init(agpy_dqn *d, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"ctx", "obs_dim", "n_actions", "total_steps", "config", NULL};
  PyObject *ctxo, *cfg = NULL;
  long long obs_dim, n_actions, total = 100000;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OLL|LO:DQN", kwlist, &ctxo, &obs_dim, &n_actions, &total, &cfg))
    return -1;
  if (d->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "DQN.__init__ called twice");
    return -1;
  }
  if (!PyObject_TypeCheck(ctxo, &agpy_ctx_type)) {
    PyErr_Format(PyExc_TypeError, "DQN: ctx must be an agrl.Context, not %.80s", Py_TYPE(ctxo)->tp_name);
    return -1;
  }
  agpy_ctx *c = (agpy_ctx *)ctxo;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return -1;
  ag_dqn_config conf;
  if (parse_config(cfg, &conf)) return -1;
  ag_status s = ag_dqn_create(ctx, obs_dim, n_actions, total, &conf, &d->d);
  if (s) {
    agpy_raise(s);
    return -1;
  }
  if (agpy_ctx_add_dep(c, (PyObject *)d)) {
    agpy_dqn_release((PyObject *)d);
    return -1;
  }
  d->ctx = (agpy_ctx *)Py_NewRef(c);
  d->obs_dim = obs_dim;
  d->n_actions = n_actions;
  return 0;
}

static void dqn_dealloc(agpy_dqn *d) {
  agpy_dqn_release((PyObject *)d);
  if (d->ctx) {
    agpy_ctx_drop_dep(d->ctx, (PyObject *)d);
    Py_DECREF(d->ctx);
  }
  Py_TYPE(d)->tp_free((PyObject *)d);
}

const float *agpy_obs_of(int64_t obs_dim, agpy_in *in, void **scratch, int *n, int *single,
                         const char *what) {
  *scratch = NULL;
  if (in->on_device) {
    agpy_raisef(AG_ERR_INVALID_ARG, "%s: pass host arrays", what);
    return NULL;
  }
  if (in->ndim == 1 && in->shape[0] == obs_dim)
    *n = 1, *single = 1;
  else if (in->ndim == 2 && in->shape[1] == obs_dim && in->shape[0] <= INT32_MAX)
    *n = (int)in->shape[0], *single = 0;
  else {
    agpy_raisef(AG_ERR_SHAPE, "%s: expected (n, %lld) or (%lld,) observations", what, (long long)obs_dim,
                (long long)obs_dim);
    return NULL;
  }
  return agpy_in_as(in, AG_F32, scratch, what);
}

static PyObject *dqn_act(agpy_dqn *d, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"obs", "explore", "step", NULL};
  PyObject *obs;
  int explore = 1;
  long long step = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|pL:act", kwlist, &obs, &explore, &step)) return NULL;
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  agpy_in in;
  if (agpy_in_get(NULL, obs, &in, "DQN.act: obs")) return NULL;
  void *scratch;
  int n = 0, single = 0;
  PyObject *ret = NULL;
  const float *o = agpy_obs_of(d->obs_dim, &in, &scratch, &n, &single, "DQN.act: obs");
  if (o && n == 0) {
    agpy_raisef(AG_ERR_INVALID_ARG, "DQN.act: no observations");
  } else if (o) {
    int32_t one;
    int32_t *acts = single ? &one : malloc(sizeof(int32_t) * (size_t)n);
    if (!acts) {
      PyErr_NoMemory();
    } else {
      ag_status s = ag_dqn_act(dq, o, n, step, explore, acts);
      if (s) {
        agpy_raise(s);
      } else if (single) {
        ret = PyLong_FromLong(one);
      } else {
        Py_buffer view;
        int64_t shape[1] = {n};
        ret = agpy_numpy_empty(1, shape, AG_I32, &view);
        if (ret) {
          memcpy(view.buf, acts, sizeof(int32_t) * (size_t)n);
          PyBuffer_Release(&view);
        }
      }
      if (!single) free(acts);
    }
  }
  free(scratch);
  agpy_in_release(&in, NULL);
  return ret;
}

static PyObject *dqn_store(agpy_dqn *d, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"obs", "action", "reward", "next_obs", "terminated", "truncated", NULL};
  PyObject *o[6] = {NULL, NULL, NULL, NULL, NULL, Py_None};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO|O:store", kwlist, &o[0], &o[1], &o[2], &o[3], &o[4],
                                   &o[5]))
    return NULL;
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  static const char *const what[6] = {"DQN.store: obs",      "DQN.store: action",     "DQN.store: reward",
                                      "DQN.store: next_obs", "DQN.store: terminated", "DQN.store: truncated"};
  static const ag_dtype dts[6] = {AG_F32, AG_I32, AG_F32, AG_F32, AG_I32, AG_I32};
  agpy_in in[6];
  memset(in, 0, sizeof in);
  void *scratch[6] = {0};
  const void *p[6] = {0};
  int n = -1, single = 0;
  const int k = o[5] == Py_None ? 5 : 6;
  PyObject *ret = NULL;
  for (int i = 0; i < k; i++) {
    if (agpy_in_get(NULL, o[i], &in[i], what[i])) goto done;
    if (i == 0 || i == 3) {
      int ni, si;
      if (!(p[i] = agpy_obs_of(d->obs_dim, &in[i], &scratch[i], &ni, &si, what[i]))) goto done;
      if (i == 0) n = ni, single = si;
      if (ni != n || si != single) {
        agpy_raisef(AG_ERR_SHAPE, "DQN.store: obs and next_obs have different shapes");
        goto done;
      }
    } else {
      if (in[i].numel != n || in[i].ndim > 2 || (in[i].ndim == 2 && in[i].shape[1] != 1)) {
        agpy_raisef(AG_ERR_SHAPE, "%s: %lld values for %d transitions", what[i], (long long)in[i].numel, n);
        goto done;
      }
      if (!(p[i] = agpy_in_as(&in[i], dts[i], &scratch[i], what[i]))) goto done;
    }
  }
  ag_status s = ag_dqn_store_ex(dq, p[0], p[1], p[2], p[3], p[4], p[5], n);
  if (s)
    agpy_raise(s);
  else
    ret = Py_NewRef(Py_None);
done:
  for (int i = 0; i < 6; i++) {
    free(scratch[i]);
    agpy_in_release(&in[i], NULL);
  }
  (void)single;
  return ret;
}

static PyObject *dqn_train(agpy_dqn *d, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"gradient_steps", "loss", NULL};
  long long n;
  int want = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "L|p:train", kwlist, &n, &want)) return NULL;
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  float loss = NAN;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_dqn_train(dq, n, want ? &loss : NULL);
  Py_END_ALLOW_THREADS if (s) return agpy_raise(s);
  if (!want || n == 0) Py_RETURN_NONE;
  return PyFloat_FromDouble(loss);
}

static PyObject *dqn_update_target(agpy_dqn *d, PyObject *a) {
  (void)a;
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  ag_status s = ag_dqn_update_target(dq);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

static PyObject *dqn_epsilon(agpy_dqn *d, PyObject *arg) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  long long step = PyLong_AsLongLong(arg);
  if (step == -1 && PyErr_Occurred()) return NULL;
  return PyFloat_FromDouble(ag_dqn_epsilon(dq, step));
}

static PyObject *dqn_save_policy(agpy_dqn *d, PyObject *arg) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  PyObject *path = NULL;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  ag_status s = ag_mlp_save(ag_dqn_q(dq), PyBytes_AS_STRING(path));
  Py_DECREF(path);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

static PyObject *dqn_load_policy(agpy_dqn *d, PyObject *arg) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  PyObject *path = NULL;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  ag_mlp *m = NULL;
  ag_status s = ag_mlp_load(d->ctx->ctx, PyBytes_AS_STRING(path), &m);
  Py_DECREF(path);
  if (!s && (ag_mlp_in(m) != d->obs_dim || ag_mlp_out(m) != d->n_actions)) {
    agpy_raisef(
        AG_ERR_SHAPE, "DQN.load_policy: the file holds a %lld -> %lld network, the DQN's is %lld -> %lld",
        (long long)ag_mlp_in(m), (long long)ag_mlp_out(m), (long long)d->obs_dim, (long long)d->n_actions);
    ag_mlp_free(m);
    return NULL;
  }
  /* both networks take the file's parameters (ag_mlp_copy checks the shapes first) */
  if (!s) s = ag_mlp_copy(ag_dqn_q(dq), m);
  if (!s) s = ag_mlp_copy(ag_dqn_target(dq), m);
  ag_mlp_free(m);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

/* _save(path, run_state): the whole DQN (ag_dqn_save) with the loop's
 * record (bytes, or None for none). */
static PyObject *dqn_save(agpy_dqn *d, PyObject *args) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  PyObject *path = NULL;
  Py_buffer rs = {0};
  PyObject *rso = Py_None;
  if (!PyArg_ParseTuple(args, "O&|O:save", PyUnicode_FSConverter, &path, &rso)) return NULL;
  if (rso != Py_None && PyObject_GetBuffer(rso, &rs, PyBUF_SIMPLE)) {
    Py_DECREF(path);
    return NULL;
  }
  ag_status s = ag_dqn_set_run_state(dq, rs.buf, rso == Py_None ? 0 : (size_t)rs.len);
  if (rso != Py_None) PyBuffer_Release(&rs);
  if (!s) {
    Py_BEGIN_ALLOW_THREADS s = ag_dqn_save(dq, PyBytes_AS_STRING(path));
    Py_END_ALLOW_THREADS
  }
  Py_DECREF(path);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

/* _load_from(ctx, path) on an object made by __new__: the DQN of the file. */
static PyObject *dqn_load_from(agpy_dqn *d, PyObject *args) {
  PyObject *ctxo, *path = NULL;
  if (!PyArg_ParseTuple(args, "OO&:load", &ctxo, PyUnicode_FSConverter, &path)) return NULL;
  if (d->ctx || d->d) {
    Py_DECREF(path);
    PyErr_SetString(PyExc_RuntimeError, "DQN.load: the object already holds a DQN");
    return NULL;
  }
  if (!PyObject_TypeCheck(ctxo, &agpy_ctx_type)) {
    Py_DECREF(path);
    PyErr_Format(PyExc_TypeError, "DQN.load: ctx must be an agrl.Context, not %.80s", Py_TYPE(ctxo)->tp_name);
    return NULL;
  }
  agpy_ctx *c = (agpy_ctx *)ctxo;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) {
    Py_DECREF(path);
    return NULL;
  }
  ag_dqn *dq = NULL;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_dqn_load(ctx, PyBytes_AS_STRING(path), &dq);
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (s) return agpy_raise(s);
  d->d = dq;
  if (agpy_ctx_add_dep(c, (PyObject *)d)) {
    agpy_dqn_release((PyObject *)d);
    return NULL;
  }
  d->ctx = (agpy_ctx *)Py_NewRef(c);
  d->obs_dim = ag_mlp_in(ag_dqn_q(dq));
  d->n_actions = ag_mlp_out(ag_dqn_q(dq));
  Py_RETURN_NONE;
}

static PyObject *dqn_run_state(agpy_dqn *d, PyObject *a) {
  (void)a;
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  size_t n;
  const void *p = ag_dqn_run_state(dq, &n);
  if (!p) Py_RETURN_NONE;
  return PyBytes_FromStringAndSize(p, (Py_ssize_t)n);
}

static PyObject *dqn_per_beta(agpy_dqn *d, PyObject *arg) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  long long step = PyLong_AsLongLong(arg);
  if (step == -1 && PyErr_Occurred()) return NULL;
  return PyFloat_FromDouble(ag_dqn_per_beta(dq, step));
}

static PyObject *dqn_set_beta(agpy_dqn *d, PyObject *arg) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  double b = PyFloat_AsDouble(arg);
  if (b == -1.0 && PyErr_Occurred()) return NULL;
  ag_status s = ag_dqn_set_beta(dq, (float)b);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

static PyObject *dqn_config(agpy_dqn *d, PyObject *a) {
  (void)a;
  ag_dqn *dq = dqn_get(d);
  return dq ? agpy_config_dict(ag_dqn_get_config(dq)) : NULL;
}

static PyObject *dqn_free(agpy_dqn *d, PyObject *a) {
  (void)a;
  agpy_dqn_release((PyObject *)d);
  Py_RETURN_NONE;
}

static PyObject *dqn_get_updates(agpy_dqn *d, void *x) {
  (void)x;
  return dqn_get(d) ? PyLong_FromLongLong(ag_dqn_updates(d->d)) : NULL;
}

static PyObject *dqn_get_fused(agpy_dqn *d, void *x) {
  (void)x;
  return dqn_get(d) ? PyBool_FromLong(ag_dqn_fused(d->d)) : NULL;
}

static PyObject *dqn_get_stored(agpy_dqn *d, void *x) {
  (void)x;
  return dqn_get(d) ? PyLong_FromLongLong(ag_replay_size(ag_dqn_replay(d->d))) : NULL;
}

static PyObject *dqn_get_total_steps(agpy_dqn *d, void *x) {
  (void)x;
  return dqn_get(d) ? PyLong_FromLongLong(ag_dqn_total_steps(d->d)) : NULL;
}

static PyObject *dqn_get_obs_dim(agpy_dqn *d, void *x) {
  (void)x;
  return PyLong_FromLongLong(d->obs_dim);
}

static PyObject *dqn_get_n_actions(agpy_dqn *d, void *x) {
  (void)x;
  return PyLong_FromLongLong(d->n_actions);
}

static PyMethodDef dqn_methods[] = {
    {"act", (PyCFunction)(void (*)(void))dqn_act, METH_VARARGS | METH_KEYWORDS,
     "act(obs, explore=True, step=0): actions for (n, obs_dim) observations (an int for one)."},
    {"store", (PyCFunction)(void (*)(void))dqn_store, METH_VARARGS | METH_KEYWORDS,
     "store(obs, action, reward, next_obs, terminated, truncated=None): one transition or a batch."},
    {"train", (PyCFunction)(void (*)(void))dqn_train, METH_VARARGS | METH_KEYWORDS,
     "train(gradient_steps, loss=True): runs the recorded updates; returns the last loss."},
    {"update_target", (PyCFunction)dqn_update_target, METH_NOARGS,
     "Copies (or Polyak-averages) into the target."},
    {"epsilon", (PyCFunction)dqn_epsilon, METH_O, "epsilon(step): exploration at environment step `step`."},
    {"save_policy", (PyCFunction)dqn_save_policy, METH_O,
     "save_policy(path): the online network in agrl's model format (what agrl eval --model reads)."},
    {"load_policy", (PyCFunction)dqn_load_policy, METH_O,
     "load_policy(path): both networks from a model file of the same shape."},
    {"_save", (PyCFunction)dqn_save, METH_VARARGS,
     "_save(path, run_state=None): the whole DQN (ag_dqn_save)."},
    {"_load_from", (PyCFunction)dqn_load_from, METH_VARARGS,
     "_load_from(ctx, path): ag_dqn_load into a new object."},
    {"_run_state", (PyCFunction)dqn_run_state, METH_NOARGS,
     "The run state saved with the DQN (bytes or None)."},
    {"_config", (PyCFunction)dqn_config, METH_NOARGS, "The configuration as a dict."},
    {"per_beta", (PyCFunction)dqn_per_beta, METH_O, "per_beta(step): prioritized replay's beta at a step."},
    {"set_beta", (PyCFunction)dqn_set_beta, METH_O, "set_beta(beta): the beta the next updates draw with."},
    {"free", (PyCFunction)dqn_free, METH_NOARGS, "Frees the DQN."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dqn_getset[] = {
    {"updates", (getter)dqn_get_updates, NULL, "gradient steps so far", NULL},
    {"fused", (getter)dqn_get_fused, NULL, "whether the update runs the fused kernel", NULL},
    {"stored", (getter)dqn_get_stored, NULL, "transitions in the replay table", NULL},
    {"obs_dim", (getter)dqn_get_obs_dim, NULL, NULL, NULL},
    {"_total_steps", (getter)dqn_get_total_steps, NULL, "the steps the exploration schedule plans for", NULL},
    {"n_actions", (getter)dqn_get_n_actions, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject agpy_dqn_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "agrl._DQN",
    .tp_basicsize = sizeof(agpy_dqn),
    .tp_dealloc = (destructor)dqn_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C side of agrl.DQN.",
    .tp_methods = dqn_methods,
    .tp_getset = dqn_getset,
    .tp_init = (initproc)dqn_init,
    .tp_new = PyType_GenericNew,
};

/* ---- built-in environments ---- */

typedef struct agpy_env {
  PyObject_HEAD ag_env *env;
} agpy_env;

ag_env *agpy_env_of(PyObject *obj) {
  return PyObject_TypeCheck(obj, &agpy_env_type) ? ((agpy_env *)obj)->env : NULL;
}

static int env_init(agpy_env *e, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"name", NULL};
  const char *name;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s:make", kwlist, &name)) return -1;
  if (e->env) {
    PyErr_SetString(PyExc_RuntimeError, "__init__ called twice");
    return -1;
  }
  ag_status s = ag_env_create(name, &e->env);
  if (s) {
    agpy_raise(s);
    return -1;
  }
  return 0;
}

static void env_dealloc(agpy_env *e) {
  ag_env_free(e->env);
  Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyObject *new_obs(const ag_env_spec *sp, Py_buffer *view) {
  int64_t shape[1] = {sp->obs_dim};
  return agpy_numpy_empty(1, shape, AG_F32, view);
}

static PyObject *env_reset(agpy_env *e, PyObject *arg) {
  unsigned long long seed = PyLong_AsUnsignedLongLong(arg);
  if (seed == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  Py_buffer view;
  PyObject *obs = new_obs(ag_env_get_spec(e->env), &view);
  if (!obs) return NULL;
  ag_status s = ag_env_reset(e->env, seed, view.buf);
  PyBuffer_Release(&view);
  if (s) {
    Py_DECREF(obs);
    return agpy_raise(s);
  }
  return obs;
}

static PyObject *env_step(agpy_env *e, PyObject *arg) {
  const ag_env_spec *sp = ag_env_get_spec(e->env);
  float act[64];
  const int na = sp->n_actions > 0 ? 1 : sp->act_dim;
  if (na > 64) return agpy_raisef(AG_ERR_UNSUPPORTED, "step: actions wider than 64");
  if (sp->n_actions > 0 && PyLong_Check(arg)) {
    long long a = PyLong_AsLongLong(arg);
    if (a == -1 && PyErr_Occurred()) return NULL;
    if (a < 0 || a >= sp->n_actions)
      return agpy_raisef(AG_ERR_OUT_OF_RANGE, "step: action %lld is outside 0..%d", a, sp->n_actions - 1);
    act[0] = (float)a;
  } else {
    agpy_in in;
    if (agpy_in_get(NULL, arg, &in, "step: action")) return NULL;
    int bad = in.numel != na;
    if (!bad && sp->n_actions > 0) {
      /* as ag_env_step: not a whole number is an invalid argument, a whole
       * number outside 0..n-1 out of range (checked here in double, before
       * a conversion to float could round 0.9999999999 to 1) */
      const double v = agpy_in_value(&in, 0);
      agpy_in_release(&in, NULL);
      if (!(v == floor(v))) {
        char num[32];
        PyOS_snprintf(num, sizeof num, "%.17g", v);
        return agpy_raisef(AG_ERR_INVALID_ARG, "step: action %s is not a whole number", num);
      }
      if (v < 0 || v >= sp->n_actions) {
        char num[32];
        PyOS_snprintf(num, sizeof num, "%.17g", v);
        return agpy_raisef(AG_ERR_OUT_OF_RANGE, "step: action %s is outside 0..%d", num, sp->n_actions - 1);
      }
      act[0] = (float)v;
    } else if (!bad) {
      bad = agpy_in_convert(&in, AG_F32, act, "step: action");
      if (bad) {
        agpy_in_release(&in, NULL);
        return NULL;
      }
    }
    agpy_in_release(&in, NULL);
    if (bad)
      return agpy_raisef(AG_ERR_SHAPE, "step: the action has %lld values, the environment takes %d",
                         (long long)in.numel, na);
  }
  Py_buffer view;
  PyObject *obs = new_obs(sp, &view);
  if (!obs) return NULL;
  float reward = 0;
  int term = 0, trunc = 0;
  ag_status s = ag_env_step(e->env, act, view.buf, &reward, &term, &trunc);
  PyBuffer_Release(&view);
  if (s) {
    Py_DECREF(obs);
    return agpy_raise(s);
  }
  return Py_BuildValue("(NdOO)", obs, (double)reward, term ? Py_True : Py_False, trunc ? Py_True : Py_False);
}

static PyObject *env_spec(agpy_env *e, PyObject *a) {
  (void)a;
  const ag_env_spec *sp = ag_env_get_spec(e->env);
  PyObject *low = Py_None, *high = Py_None;
  if (sp->act_dim > 0 && sp->act_low) {
    low = PyList_New(sp->act_dim);
    high = PyList_New(sp->act_dim);
    for (int i = 0; low && high && i < sp->act_dim; i++) {
      PyList_SET_ITEM(low, i, PyFloat_FromDouble(sp->act_low[i]));
      PyList_SET_ITEM(high, i, PyFloat_FromDouble(sp->act_high[i]));
    }
  } else {
    Py_INCREF(low);
    Py_INCREF(high);
  }
  return Py_BuildValue("{s:s,s:i,s:i,s:i,s:N,s:N,s:i,s:d}", "id", sp->id, "obs_dim", sp->obs_dim, "n_actions",
                       sp->n_actions, "act_dim", sp->act_dim, "act_low", low, "act_high", high,
                       "max_episode_steps", sp->max_episode_steps, "reward_threshold",
                       (double)sp->reward_threshold);
}

static PyObject *env_get_state(agpy_env *e, PyObject *a) {
  (void)a;
  size_t n;
  ag_status s = ag_env_state_size(e->env, &n);
  if (s) return agpy_raise(s);
  PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
  if (!b) return NULL;
  if ((s = ag_env_get_state(e->env, PyBytes_AS_STRING(b), n))) {
    Py_DECREF(b);
    return agpy_raise(s);
  }
  return b;
}

static PyObject *env_set_state(agpy_env *e, PyObject *arg) {
  Py_buffer v;
  if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE)) return NULL;
  ag_status s = ag_env_set_state(e->env, v.buf, (size_t)v.len);
  PyBuffer_Release(&v);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

static PyMethodDef env_methods[] = {
    {"get_state", (PyCFunction)env_get_state, METH_NOARGS,
     "The environment's exact state (ag_env_get_state)."},
    {"set_state", (PyCFunction)env_set_state, METH_O, "set_state(bytes): back to a state get_state gave."},
    {"reset", (PyCFunction)env_reset, METH_O, "reset(seed): the start observation drawn from seed."},
    {"step", (PyCFunction)env_step, METH_O, "step(action): (obs, reward, terminated, truncated)."},
    {"spec", (PyCFunction)env_spec, METH_NOARGS, "The environment's spec as a dict."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject agpy_env_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "agrl._Env",
    .tp_basicsize = sizeof(agpy_env),
    .tp_dealloc = (destructor)env_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A built-in environment (use agrl.make).",
    .tp_methods = env_methods,
    .tp_init = (initproc)env_init,
    .tp_new = PyType_GenericNew,
};
