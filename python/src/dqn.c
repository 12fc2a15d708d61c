/* dqn.c — the C sides of agrl.DQN and of the built-in environments. */
#include <math.h>

#include "agrl_py.h"

/* ---- DQN ---- */

typedef struct agpy_dqn {
  AGPY_ON_CTX;
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
    agpy_raisef(d->st, AG_ERR_FREED, "the DQN has been freed (or its context)");
    return NULL;
  }
  return d->d;
}

/* The values of cfg[key], a sequence of lo..hi integers, into out[0..); *n
 * their count (left as it was when the key is absent). */
static int cfg_ints(agpy_state *st, PyObject *cfg, const char *key, int lo, int hi, int64_t *out, int *n,
                    const char *what) {
  PyObject *v = PyDict_GetItemString(cfg, key);
  if (!v) return 0;
  char msg[128];
  PyOS_snprintf(msg, sizeof msg, "DQN: %s must be %s", key, what);
  PyObject *seq = PySequence_Fast(v, msg);
  if (!seq) return -1;
  Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
  if (k < lo || k > hi) {
    Py_DECREF(seq);
    agpy_raisef(st, AG_ERR_INVALID_ARG, "DQN: %s holds %zd values; it must be %s", key, k, what);
    return -1;
  }
  for (Py_ssize_t i = 0; i < k; i++)
    if (agpy_convert(st, "DQN", key, PySequence_Fast_GET_ITEM(seq, i), "L", &out[i])) {
      Py_DECREF(seq);
      return -1;
    }
  Py_DECREF(seq);
  *n = (int)k;
  return 0;
}

/* cfg["conv"]: a sequence of layers (channels, kernel[, stride[, pad]])
 * (stride 1 and pad 0 when left out); cfg["obs_shape"]: (C, H, W). */
static int cfg_conv(agpy_state *st, PyObject *cfg, ag_dqn_config *c) {
  PyObject *v = PyDict_GetItemString(cfg, "conv");
  if (v) {
    PyObject *seq =
        PySequence_Fast(v, "DQN: conv must be a sequence of layers (channels, kernel, stride, pad)");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > AG_MAX_CONV) {
      Py_DECREF(seq);
      agpy_raisef(st, AG_ERR_INVALID_ARG, "DQN: conv holds %zd layers (at most %d)", n, AG_MAX_CONV);
      return -1;
    }
    ag_conv_layer layers[AG_MAX_CONV];
    for (Py_ssize_t i = 0; i < n; i++) {
      int64_t x[4] = {0, 0, 1, 0};
      int got = 0;
      PyObject *one = PyDict_New();
      int bad = !one || PyDict_SetItemString(one, "conv", PySequence_Fast_GET_ITEM(seq, i)) ||
                cfg_ints(st, one, "conv", 2, 4, x, &got, "a layer (channels, kernel[, stride[, pad]])");
      Py_XDECREF(one);
      if (bad) {
        Py_DECREF(seq);
        return -1;
      }
      layers[i] = (ag_conv_layer){x[0], x[1], x[2], x[3]};
    }
    Py_DECREF(seq);
    c->n_conv = (int)n;
    memcpy(c->conv, layers, (size_t)n * sizeof *layers);
  }
  int n3 = 0;
  return cfg_ints(st, cfg, "obs_shape", 3, 3, c->obs_shape, &n3, "(C, H, W)");
}

/* Fills an ag_dqn_config from a dict of the names of its fields. */
static int parse_config(agpy_state *st, PyObject *cfg, ag_dqn_config *c) {
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
                                      "conv",
                                      "obs_shape",
                                      "frame_stack",
                                      NULL};
  static const char who[] = "DQN";
  *c = ag_dqn_defaults();
  if (!cfg || cfg == Py_None) return 0;
  if (agpy_cfg_keys(st, cfg, known, who, "ag_dqn_config") ||
      agpy_cfg_hidden(st, cfg, c->hidden, &c->n_hidden, AG_DQN_MAX_HIDDEN, who) ||
      agpy_cfg_get(st, cfg, "n_step", "i", &c->n_step, who) ||
      agpy_cfg_get(st, cfg, "seed", "K", &c->seed, who) || agpy_cfg_get(st, cfg, "lr", "f", &c->lr, who) ||
      agpy_cfg_get(st, cfg, "gamma", "f", &c->gamma, who) ||
      agpy_cfg_get(st, cfg, "batch_size", "L", &c->batch_size, who) ||
      agpy_cfg_get(st, cfg, "buffer_size", "L", &c->buffer_size, who) ||
      agpy_cfg_get(st, cfg, "learning_starts", "L", &c->learning_starts, who) ||
      agpy_cfg_get(st, cfg, "train_freq", "L", &c->train_freq, who) ||
      agpy_cfg_get(st, cfg, "gradient_steps", "L", &c->gradient_steps, who) ||
      agpy_cfg_get(st, cfg, "target_update_interval", "L", &c->target_update_interval, who) ||
      agpy_cfg_get(st, cfg, "tau", "f", &c->tau, who) ||
      agpy_cfg_get(st, cfg, "exploration_fraction", "f", &c->exploration_fraction, who) ||
      agpy_cfg_get(st, cfg, "eps_start", "f", &c->eps_start, who) ||
      agpy_cfg_get(st, cfg, "eps_end", "f", &c->eps_end, who) ||
      agpy_cfg_get(st, cfg, "max_grad_norm", "f", &c->max_grad_norm, who) ||
      agpy_cfg_get(st, cfg, "double_dqn", "b", &c->double_dqn, who) ||
      agpy_cfg_get(st, cfg, "huber", "b", &c->huber, who) ||
      agpy_cfg_get(st, cfg, "fused", "b", &c->fused, who) ||
      agpy_cfg_get(st, cfg, "per", "b", &c->per, who) ||
      agpy_cfg_get(st, cfg, "per_alpha", "f", &c->per_alpha, who) ||
      agpy_cfg_get(st, cfg, "per_beta", "f", &c->per_beta, who) ||
      agpy_cfg_get(st, cfg, "per_eps", "f", &c->per_eps, who) ||
      agpy_cfg_get(st, cfg, "n_envs", "L", &c->n_envs, who) ||
      agpy_cfg_get(st, cfg, "frame_stack", "i", &c->frame_stack, who) || cfg_conv(st, cfg, c))
    return -1;
  return 0;
}

/* Sets the object up over a made DQN (taking it). */
static int dqn_attach(agpy_dqn *d, agpy_ctx *c, ag_dqn *dq) {
  if (agpy_ctx_add_dep(c, (PyObject *)d)) {
    ag_dqn_free(dq);
    return -1;
  }
  d->d = dq;
  d->ctx = (agpy_ctx *)Py_NewRef(c);
  d->obs_dim = ag_mlp_in(ag_dqn_q(dq));
  d->n_actions = ag_mlp_out(ag_dqn_q(dq));
  return 0;
}

static int dqn_init(agpy_dqn *d, PyObject *args, PyObject *kw) {
  PyObject *ctxo, *cfg = Py_None;
  int64_t obs_dim, n_actions, total = 100000;
  const agpy_arg spec[] = {{"ctx", "O", &ctxo},
                           {"obs_dim", "L", &obs_dim},
                           {"n_actions", "L", &n_actions},
                           {"total_steps", "L", &total},
                           {"config", "O", &cfg}};
  if (agpy_parse_tuple(d->st, "DQN", args, kw, 3, spec, 5)) return -1;
  if (d->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "DQN.__init__ called twice");
    return -1;
  }
  agpy_ctx *c = agpy_ctx_check(d->st, ctxo, "DQN");
  ag_dqn_config conf;
  if (!c || parse_config(d->st, cfg, &conf) || agpy_lock(c)) return -1;
  ag_ctx *ctx = agpy_ctx_get(c);
  ag_dqn *dq = NULL;
  int r = -1;
  ag_status s = ctx ? ag_dqn_create(ctx, obs_dim, n_actions, total, &conf, &dq) : AG_OK;
  if (!ctx)
    ;
  else if (s)
    agpy_raise(d->st, s);
  else
    r = dqn_attach(d, c, dq);
  agpy_unlock(c);
  return r;
}

static void dqn_dealloc(agpy_dqn *d) {
  if (d->ctx) {
    agpy_lock(d->ctx);
    agpy_dqn_release((PyObject *)d);
    agpy_ctx_drop_dep(d->ctx, (PyObject *)d);
    agpy_unlock(d->ctx);
    Py_DECREF(d->ctx);
  }
  agpy_obj_free((PyObject *)d);
}

const float *agpy_obs_of(agpy_state *st, int64_t obs_dim, agpy_in *in, void **scratch, int *n, int *single,
                         const char *what) {
  return agpy_obs_as(st, obs_dim, in, AG_F32, scratch, n, single, what);
}

const void *agpy_obs_as(agpy_state *st, int64_t obs_dim, agpy_in *in, ag_dtype dtype, void **scratch, int *n,
                        int *single, const char *what) {
  *scratch = NULL;
  if (in->on_device) {
    agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: pass host arrays", what);
    return NULL;
  }
  if (in->ndim == 1 && in->shape[0] == obs_dim)
    *n = 1, *single = 1;
  else if (in->ndim == 2 && in->shape[1] == obs_dim && in->shape[0] <= INT32_MAX)
    *n = (int)in->shape[0], *single = 0;
  else {
    agpy_raisef(st, AG_ERR_SHAPE, "%s: expected (n, %lld) or (%lld,) observations", what, (long long)obs_dim,
                (long long)obs_dim);
    return NULL;
  }
  return agpy_in_as(st, in, dtype, scratch, what);
}

/* act (f32 observations) and act_u8 (u8 ones, seen as v / 255): `fn` the
 * method's name, `what` its observations' in messages. */
static PyObject *act_as(agpy_dqn *d, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                        ag_dtype dtype, const char *fn, const char *what) {
  PyObject *obs;
  int explore = 1;
  int64_t step = 0;
  const agpy_arg spec[] = {{"obs", "O", &obs}, {"explore", "p", &explore}, {"step", "L", &step}};
  if (agpy_parse(d->st, fn, args, nargs, kwnames, 1, spec, 3)) return NULL;
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  agpy_in in;
  if (agpy_in_get(d->st, NULL, obs, &in, what)) return NULL;
  void *scratch;
  int n = 0, single = 0;
  PyObject *ret = NULL;
  const void *o = agpy_obs_as(d->st, d->obs_dim, &in, dtype, &scratch, &n, &single, what);
  if (o && n == 0) {
    agpy_raisef(d->st, AG_ERR_INVALID_ARG, "%s: no observations", fn);
  } else if (o) {
    int32_t one;
    int32_t *acts = single ? &one : malloc(sizeof(int32_t) * (size_t)n);
    if (!acts) {
      PyErr_NoMemory();
    } else {
      ag_status s = dtype == AG_U8 ? ag_dqn_act_u8(dq, o, n, step, explore, acts)
                                   : ag_dqn_act(dq, o, n, step, explore, acts);
      if (s) {
        agpy_raise(d->st, s);
      } else if (single) {
        ret = PyLong_FromLong(one);
      } else {
        Py_buffer view;
        int64_t shape[1] = {n};
        ret = agpy_numpy_empty(d->st, 1, shape, AG_I32, &view);
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

static PyObject *dqn_act(agpy_dqn *d, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  return act_as(d, args, nargs, kwnames, AG_F32, "DQN.act", "DQN.act: obs");
}

static PyObject *dqn_act_u8(agpy_dqn *d, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  return act_as(d, args, nargs, kwnames, AG_U8, "DQN.act_u8", "DQN.act_u8: obs");
}

/* store_frames(frames, first, action, reward, terminated, truncated=None):
 * n entries (steps of the DQN's n_envs copies, entry by entry) of
 * h*w*c bytes each, any shape of n * h*w*c values whose first dimension
 * is n (one entry: any shape of h*w*c values). */
static PyObject *dqn_store_frames(agpy_dqn *d, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *o[6] = {NULL, NULL, NULL, NULL, NULL, Py_None};
  const agpy_arg spec[] = {{"frames", "O", &o[0]}, {"first", "O", &o[1]},      {"action", "O", &o[2]},
                           {"reward", "O", &o[3]}, {"terminated", "O", &o[4]}, {"truncated", "O", &o[5]}};
  if (agpy_parse(d->st, "DQN.store_frames", args, nargs, kwnames, 5, spec, 6)) return NULL;
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  const ag_dqn_config *c = ag_dqn_get_config(dq);
  if (!c->frame_stack)
    return agpy_raisef(d->st, AG_ERR_STATE,
                       "DQN.store_frames: the DQN keeps full observations (frame_stack = 0): use store");
  const int64_t frame = c->obs_shape[0] / c->frame_stack * c->obs_shape[1] * c->obs_shape[2];
  static const char *const what[6] = {"DQN.store_frames: frames",     "DQN.store_frames: first",
                                      "DQN.store_frames: action",     "DQN.store_frames: reward",
                                      "DQN.store_frames: terminated", "DQN.store_frames: truncated"};
  static const ag_dtype dts[6] = {AG_U8, AG_U8, AG_I32, AG_F32, AG_I32, AG_I32};
  agpy_in in[6];
  memset(in, 0, sizeof in);
  void *scratch[6] = {0};
  const void *p[6] = {0};
  const int k = o[5] == Py_None ? 5 : 6;
  int64_t n = 0;
  PyObject *ret = NULL;
  for (int i = 0; i < k; i++) {
    if (agpy_in_get(d->st, NULL, o[i], &in[i], what[i])) goto done;
    if (in[i].on_device) {
      agpy_raisef(d->st, AG_ERR_INVALID_ARG, "%s: pass host arrays", what[i]);
      goto done;
    }
    if (i == 0) {
      if (in[0].numel % frame || in[0].numel == 0 ||
          (in[0].numel != frame && (in[0].ndim < 1 || in[0].shape[0] * frame != in[0].numel))) {
        agpy_raisef(d->st, AG_ERR_SHAPE,
                    "%s: %lld values are not n frames of %lld x %lld x %lld (h, w, c) with n first", what[0],
                    (long long)in[0].numel, (long long)c->obs_shape[1], (long long)c->obs_shape[2],
                    (long long)(c->obs_shape[0] / c->frame_stack));
        goto done;
      }
      n = in[0].numel / frame;
      if (n % c->n_envs) {
        agpy_raisef(d->st, AG_ERR_SHAPE,
                    "%s: %lld frames are not whole steps of the DQN's %lld copies (n_envs)", what[0],
                    (long long)n, (long long)c->n_envs);
        goto done;
      }
    } else if (in[i].numel != n || in[i].ndim > 2 || (in[i].ndim == 2 && in[i].shape[1] != 1)) {
      agpy_raisef(d->st, AG_ERR_SHAPE, "%s: %lld values for %lld frames", what[i], (long long)in[i].numel,
                  (long long)n);
      goto done;
    }
    if (!(p[i] = agpy_in_as(d->st, &in[i], dts[i], &scratch[i], what[i]))) goto done;
  }
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_dqn_store_frames(dq, p[0], p[1], p[2], p[3], p[4], p[5], n / c->n_envs);
  Py_END_ALLOW_THREADS if (s) agpy_raise(d->st, s);
  else ret = Py_NewRef(Py_None);
done:
  for (int i = 0; i < 6; i++) {
    free(scratch[i]);
    agpy_in_release(&in[i], NULL);
  }
  return ret;
}

static PyObject *dqn_store(agpy_dqn *d, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *o[6] = {NULL, NULL, NULL, NULL, NULL, Py_None};
  const agpy_arg spec[] = {{"obs", "O", &o[0]},      {"action", "O", &o[1]},     {"reward", "O", &o[2]},
                           {"next_obs", "O", &o[3]}, {"terminated", "O", &o[4]}, {"truncated", "O", &o[5]}};
  if (agpy_parse(d->st, "DQN.store", args, nargs, kwnames, 5, spec, 6)) return NULL;
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
    if (agpy_in_get(d->st, NULL, o[i], &in[i], what[i])) goto done;
    if (i == 0 || i == 3) {
      int ni, si;
      if (!(p[i] = agpy_obs_of(d->st, d->obs_dim, &in[i], &scratch[i], &ni, &si, what[i]))) goto done;
      if (i == 0) n = ni, single = si;
      if (ni != n || si != single) {
        agpy_raisef(d->st, AG_ERR_SHAPE, "DQN.store: obs and next_obs have different shapes");
        goto done;
      }
    } else {
      if (in[i].numel != n || in[i].ndim > 2 || (in[i].ndim == 2 && in[i].shape[1] != 1)) {
        agpy_raisef(d->st, AG_ERR_SHAPE, "%s: %lld values for %d transitions", what[i],
                    (long long)in[i].numel, n);
        goto done;
      }
      if (!(p[i] = agpy_in_as(d->st, &in[i], dts[i], &scratch[i], what[i]))) goto done;
    }
  }
  ag_status s = ag_dqn_store_ex(dq, p[0], p[1], p[2], p[3], p[4], p[5], n);
  if (s)
    agpy_raise(d->st, s);
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

static PyObject *dqn_train(agpy_dqn *d, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  int64_t n;
  int want = 1;
  const agpy_arg spec[] = {{"gradient_steps", "L", &n}, {"loss", "p", &want}};
  if (agpy_parse(d->st, "DQN.train", args, nargs, kwnames, 1, spec, 2)) return NULL;
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  float loss = NAN;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_dqn_train(dq, n, want ? &loss : NULL);
  Py_END_ALLOW_THREADS if (s) return agpy_raise(d->st, s);
  if (!want || n == 0) Py_RETURN_NONE;
  return PyFloat_FromDouble(loss);
}

static PyObject *dqn_update_target(agpy_dqn *d, PyObject *a) {
  (void)a;
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  ag_status s = ag_dqn_update_target(dq);
  if (s) return agpy_raise(d->st, s);
  Py_RETURN_NONE;
}

static PyObject *dqn_epsilon(agpy_dqn *d, PyObject *arg) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  int64_t step;
  if (agpy_convert(d->st, "DQN.epsilon", "step", arg, "L", &step)) return NULL;
  return PyFloat_FromDouble(ag_dqn_epsilon(dq, step));
}

static PyObject *dqn_save_policy(agpy_dqn *d, PyObject *arg) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  PyObject *path = NULL;
  if (agpy_convert(d->st, "DQN.save_policy", "path", arg, "F", &path)) return NULL;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_mlp_save(ag_dqn_q(dq), PyBytes_AS_STRING(path));
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (s) return agpy_raise(d->st, s);
  Py_RETURN_NONE;
}

static PyObject *dqn_load_policy(agpy_dqn *d, PyObject *arg) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  PyObject *path = NULL;
  if (agpy_convert(d->st, "DQN.load_policy", "path", arg, "F", &path)) return NULL;
  ag_mlp *m = NULL;
  ag_ctx *ctx = d->ctx->ctx;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_mlp_load(ctx, PyBytes_AS_STRING(path), &m);
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (!s && (ag_mlp_in(m) != d->obs_dim || ag_mlp_out(m) != d->n_actions)) {
    agpy_raisef(d->st, AG_ERR_SHAPE,
                "DQN.load_policy: the file holds a %lld -> %lld network, the DQN's is %lld -> %lld",
                (long long)ag_mlp_in(m), (long long)ag_mlp_out(m), (long long)d->obs_dim,
                (long long)d->n_actions);
    ag_mlp_free(m);
    return NULL;
  }
  /* both networks take the file's parameters (ag_mlp_copy checks the shapes first) */
  if (!s) s = ag_mlp_copy(ag_dqn_q(dq), m);
  if (!s) s = ag_mlp_copy(ag_dqn_target(dq), m);
  ag_mlp_free(m);
  if (s) return agpy_raise(d->st, s);
  Py_RETURN_NONE;
}

/* _save(path, run_state): the whole DQN (ag_dqn_save) with the loop's
 * record (bytes, or None for none). */
static PyObject *dqn_save(agpy_dqn *d, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *path = NULL;
  Py_buffer rs = {0};
  PyObject *rso = Py_None;
  const agpy_arg spec[] = {{"path", "F", &path}, {"run_state", "O", &rso}};
  if (agpy_parse(d->st, "DQN.save", args, nargs, kwnames, 1, spec, 2)) return NULL;
  ag_dqn *dq = dqn_get(d);
  if (!dq) {
    Py_DECREF(path);
    return NULL;
  }
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
  if (s) return agpy_raise(d->st, s);
  Py_RETURN_NONE;
}

/* _load_from(ctx, path) on an object made by __new__: the DQN of the file. */
static PyObject *dqn_load_from(agpy_dqn *d, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *ctxo, *path = NULL;
  const agpy_arg spec[] = {{"ctx", "O", &ctxo}, {"path", "F", &path}};
  if (agpy_parse(d->st, "DQN.load", args, nargs, kwnames, 2, spec, 2)) return NULL;
  agpy_ctx *c = NULL;
  if (d->ctx || d->d)
    PyErr_SetString(PyExc_RuntimeError, "DQN.load: the object already holds a DQN");
  else
    c = agpy_ctx_check(d->st, ctxo, "DQN.load");
  if (!c || agpy_lock(c)) {
    Py_DECREF(path);
    return NULL;
  }
  PyObject *ret = NULL;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (ctx) {
    ag_dqn *dq = NULL;
    ag_status s;
    Py_BEGIN_ALLOW_THREADS s = ag_dqn_load(ctx, PyBytes_AS_STRING(path), &dq);
    Py_END_ALLOW_THREADS if (s) agpy_raise(d->st, s);
    else if (!dqn_attach(d, c, dq)) ret = Py_NewRef(Py_None);
  }
  agpy_unlock(c);
  Py_DECREF(path);
  return ret;
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
  int64_t step;
  if (agpy_convert(d->st, "DQN.per_beta", "step", arg, "L", &step)) return NULL;
  return PyFloat_FromDouble(ag_dqn_per_beta(dq, step));
}

static PyObject *dqn_set_beta(agpy_dqn *d, PyObject *arg) {
  ag_dqn *dq = dqn_get(d);
  if (!dq) return NULL;
  double b;
  if (agpy_convert(d->st, "DQN.set_beta", "beta", arg, "d", &b)) return NULL;
  ag_status s = ag_dqn_set_beta(dq, (float)b);
  if (s) return agpy_raise(d->st, s);
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

static PyObject *dqn_get_sampleable(agpy_dqn *d, void *x) {
  (void)x;
  if (!dqn_get(d)) return NULL;
  ag_frames *t = ag_dqn_frames(d->d);
  return PyLong_FromLongLong(t ? ag_frames_count(t) : ag_replay_size(ag_dqn_replay(d->d)));
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

static PyObject *dqn_exit(agpy_dqn *d, PyObject *a) {
  (void)a;
  agpy_dqn_release((PyObject *)d);
  Py_RETURN_FALSE;
}

AGPY_WRAP_FAST(agpy_dqn, dqn_act)
AGPY_WRAP_FAST(agpy_dqn, dqn_act_u8)
AGPY_WRAP_FAST(agpy_dqn, dqn_store_frames)
AGPY_WRAP_FAST(agpy_dqn, dqn_store)
AGPY_WRAP_FAST(agpy_dqn, dqn_train)
AGPY_WRAP_O(agpy_dqn, dqn_update_target)
AGPY_WRAP_O(agpy_dqn, dqn_epsilon)
AGPY_WRAP_O(agpy_dqn, dqn_save_policy)
AGPY_WRAP_O(agpy_dqn, dqn_load_policy)
AGPY_WRAP_FAST(agpy_dqn, dqn_save)
AGPY_WRAP_O(agpy_dqn, dqn_run_state)
AGPY_WRAP_O(agpy_dqn, dqn_config)
AGPY_WRAP_O(agpy_dqn, dqn_per_beta)
AGPY_WRAP_O(agpy_dqn, dqn_set_beta)
AGPY_WRAP_O(agpy_dqn, dqn_free)
AGPY_WRAP_O(agpy_dqn, dqn_exit)
AGPY_WRAP_GET(agpy_dqn, dqn_get_updates)
AGPY_WRAP_GET(agpy_dqn, dqn_get_fused)
AGPY_WRAP_GET(agpy_dqn, dqn_get_stored)
AGPY_WRAP_GET(agpy_dqn, dqn_get_sampleable)
AGPY_WRAP_GET(agpy_dqn, dqn_get_total_steps)

/* _load_from locks the context it is given (the object has none yet) */
static PyObject *dqn_load_from_w(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *k) {
  return dqn_load_from((agpy_dqn *)self, a, n, k);
}

static PyMethodDef dqn_methods[] = {
    AGPY_M("act", dqn_act, AGPY_FAST,
           "act($self, /, obs, explore=True, step=0)\n--\n\n"
           "Epsilon-greedy actions for (n, obs_dim) observations (an int for one (obs_dim,) observation)."),
    AGPY_M("act_u8", dqn_act_u8, AGPY_FAST,
           "act_u8($self, /, obs, explore=True, step=0)\n--\n\n"
           "act on (n, obs_dim) or (obs_dim,) uint8 observations, each value v seen as v / 255."),
    AGPY_M(
        "store_frames", dqn_store_frames, AGPY_FAST,
        "store_frames($self, /, frames, first, action, reward, terminated, truncated=None)\n--\n\n"
        "Entries of a frame-table DQN (frame_stack): n frames of (h, w, c) uint8, n a multiple of n_envs."),
    AGPY_M("store", dqn_store, AGPY_FAST,
           "store($self, /, obs, action, reward, next_obs, terminated, truncated=None)\n--\n\n"
           "One transition or a batch."),
    AGPY_M("train", dqn_train, AGPY_FAST,
           "train($self, /, gradient_steps, loss=True)\n--\n\n"
           "Runs the recorded updates; returns the last loss (None with loss=False). The GIL is released."),
    AGPY_M("update_target", dqn_update_target, METH_NOARGS,
           "update_target($self, /)\n--\n\nCopies (or Polyak-averages) into the target."),
    AGPY_M("epsilon", dqn_epsilon, METH_O,
           "epsilon($self, step, /)\n--\n\nExploration at environment step `step`."),
    AGPY_M("save_policy", dqn_save_policy, METH_O,
           "save_policy($self, path, /)\n--\n\n"
           "The online network in agrl's model format (what agrl eval --model reads)."),
    AGPY_M("load_policy", dqn_load_policy, METH_O,
           "load_policy($self, path, /)\n--\n\nBoth networks from a model file of the same shape."),
    AGPY_M("_save", dqn_save, AGPY_FAST,
           "_save($self, /, path, run_state=None)\n--\n\nThe whole DQN (ag_dqn_save)."),
    AGPY_M("_load_from", dqn_load_from, AGPY_FAST,
           "_load_from($self, /, ctx, path)\n--\n\nag_dqn_load into a new object."),
    AGPY_M("_run_state", dqn_run_state, METH_NOARGS,
           "_run_state($self, /)\n--\n\nThe run state saved with the DQN (bytes or None)."),
    AGPY_M("_config", dqn_config, METH_NOARGS, "_config($self, /)\n--\n\nThe configuration as a dict."),
    AGPY_M("per_beta", dqn_per_beta, METH_O,
           "per_beta($self, step, /)\n--\n\nPrioritized replay's beta at environment step `step`."),
    AGPY_M("set_beta", dqn_set_beta, METH_O,
           "set_beta($self, beta, /)\n--\n\nThe beta the next updates draw with."),
    AGPY_M("free", dqn_free, METH_NOARGS,
           "free($self, /)\n--\n\nFrees the DQN; later calls raise FreedError."),
    {"__enter__", agpy_enter, METH_NOARGS, "__enter__($self, /)\n--\n\n"},
    AGPY_M("__exit__", dqn_exit, METH_VARARGS, "__exit__($self, *exc_info)\n--\n\nFrees the DQN."),
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dqn_getset[] = {
    {"updates", dqn_get_updates_w, NULL, "gradient steps so far", NULL},
    {"fused", dqn_get_fused_w, NULL, "whether the update runs the fused kernel", NULL},
    {"stored", dqn_get_stored_w, NULL, "transitions in the replay table (a frame table: entries)", NULL},
    {"sampleable", dqn_get_sampleable_w, NULL, "transitions that updates may draw now", NULL},
    {"obs_dim", (getter)dqn_get_obs_dim, NULL, "the observation's size", NULL},
    {"_total_steps", dqn_get_total_steps_w, NULL, "the steps the exploration schedule plans for", NULL},
    {"n_actions", (getter)dqn_get_n_actions, NULL, "the number of actions", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot dqn_slots[] = {
    {Py_tp_new, agpy_obj_new},
    {Py_tp_init, dqn_init},
    {Py_tp_dealloc, dqn_dealloc},
    {Py_tp_methods, dqn_methods},
    {Py_tp_getset, dqn_getset},
    {Py_tp_doc,
     "_DQN(ctx, obs_dim, n_actions, total_steps=100000, config=None)\n--\n\nThe C side of agrl.DQN."},
    {0, NULL},
};

PyType_Spec agpy_dqn_spec = {"agrl._DQN", sizeof(agpy_dqn), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                             dqn_slots};

PyObject *agpy_dqn_defaults(PyObject *m, PyObject *a) {
  (void)m, (void)a;
  ag_dqn_config c = ag_dqn_defaults();
  return agpy_config_dict(&c);
}

PyObject *agpy_config_dict(const ag_dqn_config *cp) {
  const ag_dqn_config c = *cp;
  PyObject *hidden = agpy_hidden_tuple(c.hidden, c.n_hidden);
  if (!hidden) return NULL;
  PyObject *conv = PyTuple_New(c.n_conv), *shape = NULL;
  for (int i = 0; conv && i < c.n_conv; i++) {
    PyObject *l = Py_BuildValue("(LLLL)", (long long)c.conv[i].channels, (long long)c.conv[i].kernel,
                                (long long)c.conv[i].stride, (long long)c.conv[i].pad);
    if (!l)
      Py_CLEAR(conv);
    else
      PyTuple_SET_ITEM(conv, i, l);
  }
  if (conv)
    shape = c.n_conv || c.frame_stack ? Py_BuildValue("(LLL)", (long long)c.obs_shape[0],
                                                      (long long)c.obs_shape[1], (long long)c.obs_shape[2])
                                      : Py_NewRef(Py_None);
  if (!shape) {
    Py_XDECREF(conv);
    Py_DECREF(hidden);
    return NULL;
  }
  PyObject *d = Py_BuildValue(
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
  PyObject *k = PyLong_FromLong(c.frame_stack);
  if (d && (!k || PyDict_SetItemString(d, "conv", conv) || PyDict_SetItemString(d, "obs_shape", shape) ||
            PyDict_SetItemString(d, "frame_stack", k)))
    Py_CLEAR(d);
  Py_XDECREF(k);
  Py_DECREF(conv);
  Py_DECREF(shape);
  return d;
}

/* ---- built-in environments ---- */

typedef struct agpy_env {
  PyObject_HEAD agpy_state *st;
  ag_env *env;
} agpy_env;

ag_env *agpy_env_of(agpy_state *st, PyObject *obj) {
  return PyObject_TypeCheck(obj, st->env_type) ? ((agpy_env *)obj)->env : NULL;
}

static int env_init(agpy_env *e, PyObject *args, PyObject *kw) {
  PyObject *nameo;
  const agpy_arg spec[] = {{"name", "U", &nameo}};
  if (agpy_parse_tuple(e->st, "make", args, kw, 1, spec, 1)) return -1;
  Py_ssize_t len;
  const char *name = PyUnicode_AsUTF8AndSize(nameo, &len);
  if (!name) return -1;
  if ((size_t)len != strlen(name)) {
    agpy_raisef(e->st, AG_ERR_INVALID_ARG, "make: the name %R holds a NUL character", nameo);
    return -1;
  }
  if (e->env) {
    PyErr_SetString(PyExc_RuntimeError, "__init__ called twice");
    return -1;
  }
  ag_status s = ag_env_create(name, &e->env);
  if (s) {
    agpy_raise(e->st, s);
    return -1;
  }
  return 0;
}

static void env_dealloc(agpy_env *e) {
  ag_env_free(e->env);
  agpy_obj_free((PyObject *)e);
}

static PyObject *new_obs(agpy_state *st, const ag_env_spec *sp, Py_buffer *view) {
  int64_t shape[1] = {sp->obs_dim};
  return agpy_numpy_empty(st, 1, shape, AG_F32, view);
}

static PyObject *env_reset(agpy_env *e, PyObject *arg) {
  uint64_t seed;
  if (agpy_convert(e->st, "reset", "seed", arg, "K", &seed)) return NULL;
  Py_buffer view;
  PyObject *obs = new_obs(e->st, ag_env_get_spec(e->env), &view);
  if (!obs) return NULL;
  ag_status s = ag_env_reset(e->env, seed, view.buf);
  PyBuffer_Release(&view);
  if (s) {
    Py_DECREF(obs);
    return agpy_raise(e->st, s);
  }
  return obs;
}

static PyObject *env_step(agpy_env *e, PyObject *arg) {
  const ag_env_spec *sp = ag_env_get_spec(e->env);
  float act[64];
  const int na = sp->n_actions > 0 ? 1 : sp->act_dim;
  if (na > 64) return agpy_raisef(e->st, AG_ERR_UNSUPPORTED, "step: actions wider than 64");
  if (sp->n_actions > 0 && PyLong_Check(arg)) {
    long long a = PyLong_AsLongLong(arg);
    if (a == -1 && PyErr_Occurred()) return NULL;
    if (a < 0 || a >= sp->n_actions)
      return agpy_raisef(e->st, AG_ERR_OUT_OF_RANGE, "step: action %lld is outside 0..%d", a,
                         sp->n_actions - 1);
    act[0] = (float)a;
  } else {
    agpy_in in;
    if (agpy_in_get(e->st, NULL, arg, &in, "step: action")) return NULL;
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
        return agpy_raisef(e->st, AG_ERR_INVALID_ARG, "step: action %s is not a whole number", num);
      }
      if (v < 0 || v >= sp->n_actions) {
        char num[32];
        PyOS_snprintf(num, sizeof num, "%.17g", v);
        return agpy_raisef(e->st, AG_ERR_OUT_OF_RANGE, "step: action %s is outside 0..%d", num,
                           sp->n_actions - 1);
      }
      act[0] = (float)v;
    } else if (!bad) {
      bad = agpy_in_convert(e->st, &in, AG_F32, act, "step: action");
      if (bad) {
        agpy_in_release(&in, NULL);
        return NULL;
      }
    }
    agpy_in_release(&in, NULL);
    if (bad)
      return agpy_raisef(e->st, AG_ERR_SHAPE, "step: the action has %lld values, the environment takes %d",
                         (long long)in.numel, na);
  }
  Py_buffer view;
  PyObject *obs = new_obs(e->st, sp, &view);
  if (!obs) return NULL;
  float reward = 0;
  int term = 0, trunc = 0;
  ag_status s = ag_env_step(e->env, act, view.buf, &reward, &term, &trunc);
  PyBuffer_Release(&view);
  if (s) {
    Py_DECREF(obs);
    return agpy_raise(e->st, s);
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
  PyObject *shape = sp->obs_shape[0]
                        ? Py_BuildValue("(iii)", sp->obs_shape[0], sp->obs_shape[1], sp->obs_shape[2])
                        : Py_NewRef(Py_None);
  if (!shape) {
    Py_DECREF(low);
    Py_DECREF(high);
    return NULL;
  }
  return Py_BuildValue("{s:s,s:i,s:i,s:i,s:N,s:N,s:i,s:d,s:N}", "id", sp->id, "obs_dim", sp->obs_dim,
                       "n_actions", sp->n_actions, "act_dim", sp->act_dim, "act_low", low, "act_high", high,
                       "max_episode_steps", sp->max_episode_steps, "reward_threshold",
                       (double)sp->reward_threshold, "obs_shape", shape);
}

static PyObject *env_get_state(agpy_env *e, PyObject *a) {
  (void)a;
  size_t n;
  ag_status s = ag_env_state_size(e->env, &n);
  if (s) return agpy_raise(e->st, s);
  PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
  if (!b) return NULL;
  if ((s = ag_env_get_state(e->env, PyBytes_AS_STRING(b), n))) {
    Py_DECREF(b);
    return agpy_raise(e->st, s);
  }
  return b;
}

static PyObject *env_set_state(agpy_env *e, PyObject *arg) {
  Py_buffer v;
  if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE)) return NULL;
  ag_status s = ag_env_set_state(e->env, v.buf, (size_t)v.len);
  PyBuffer_Release(&v);
  if (s) return agpy_raise(e->st, s);
  Py_RETURN_NONE;
}

static PyMethodDef env_methods[] = {
    {"get_state", (PyCFunction)env_get_state, METH_NOARGS,
     "get_state($self, /)\n--\n\nThe environment's exact state (ag_env_get_state)."},
    {"set_state", (PyCFunction)env_set_state, METH_O,
     "set_state($self, state, /)\n--\n\nBack to a state get_state gave."},
    {"reset", (PyCFunction)env_reset, METH_O,
     "reset($self, seed, /)\n--\n\nThe start observation drawn from seed."},
    {"step", (PyCFunction)env_step, METH_O,
     "step($self, action, /)\n--\n\n(obs, reward, terminated, truncated)."},
    {"spec", (PyCFunction)env_spec, METH_NOARGS, "spec($self, /)\n--\n\nThe environment's spec as a dict."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot env_slots[] = {
    {Py_tp_new, agpy_obj_new},
    {Py_tp_init, env_init},
    {Py_tp_dealloc, env_dealloc},
    {Py_tp_methods, env_methods},
    {Py_tp_doc, "_Env(name)\n--\n\nA built-in environment (use agrl.make)."},
    {0, NULL},
};

PyType_Spec agpy_env_spec = {"agrl._Env", sizeof(agpy_env), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                             env_slots};
