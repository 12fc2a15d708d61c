/* ac.c — the C side of agrl.SAC and agrl.TD3 (agrl/ac.h). */
#include <math.h>

#include "agrl_py.h"

typedef struct agpy_ac {
  PyObject_HEAD agpy_ctx *ctx;
  ag_ac *a; /* NULL once freed */
  ag_ac_algo algo;
  int64_t obs_dim, act_dim;
  float low[64], high[64];
} agpy_ac;

static const char *who_of(ag_ac_algo algo) { return algo == AG_AC_TD3 ? "TD3" : "SAC"; }

void agpy_ac_release(PyObject *self) {
  agpy_ac *p = (agpy_ac *)self;
  if (p->a) ag_ac_free(p->a);
  p->a = NULL;
}

static ag_ac *ac_get(agpy_ac *p) {
  if (!p->a || !p->ctx || !p->ctx->ctx) {
    agpy_raisef(AG_ERR_FREED, "the %s agent has been freed (or its context)", who_of(p->algo));
    return NULL;
  }
  return p->a;
}

/* "sac" or "td3" (any case) */
static int algo_parse(const char *s, ag_ac_algo *out) {
  if (!PyOS_stricmp(s, "sac"))
    *out = AG_AC_SAC;
  else if (!PyOS_stricmp(s, "td3"))
    *out = AG_AC_TD3;
  else {
    agpy_raisef(AG_ERR_INVALID_ARG, "algo '%s' is neither 'sac' nor 'td3'", s);
    return -1;
  }
  return 0;
}

/* Fills an ag_ac_config of `algo` from a dict of the names of its fields
 * (target_entropy None: NaN, the default -act_dim). */
static int parse_config(PyObject *cfg, ag_ac_algo algo, ag_ac_config *c) {
  static const char *const known[] = {"hidden",
                                      "actor_lr",
                                      "critic_lr",
                                      "gamma",
                                      "tau",
                                      "batch_size",
                                      "buffer_size",
                                      "learning_starts",
                                      "train_freq",
                                      "gradient_steps",
                                      "policy_delay",
                                      "alpha",
                                      "autotune",
                                      "target_entropy",
                                      "expl_noise",
                                      "target_noise",
                                      "noise_clip",
                                      "noise_rho",
                                      "n_step",
                                      "n_envs",
                                      "seed",
                                      "fused",
                                      NULL};
  const char *who = who_of(algo);
  *c = ag_ac_defaults(algo);
  if (!cfg || cfg == Py_None) return 0;
  if (agpy_cfg_keys(cfg, known, who, "ag_ac_config") ||
      agpy_cfg_hidden(cfg, c->hidden, &c->n_hidden, AG_AC_MAX_HIDDEN, who))
    return -1;
  PyObject *te = PyDict_GetItemString(cfg, "target_entropy");
  if (te == Py_None)
    c->target_entropy = NAN;
  else if (agpy_cfg_f(cfg, "target_entropy", &c->target_entropy))
    return -1;
  if (agpy_cfg_f(cfg, "actor_lr", &c->actor_lr) || agpy_cfg_f(cfg, "critic_lr", &c->critic_lr) ||
      agpy_cfg_f(cfg, "gamma", &c->gamma) || agpy_cfg_f(cfg, "tau", &c->tau) ||
      agpy_cfg_i64(cfg, "batch_size", &c->batch_size, who) ||
      agpy_cfg_i64(cfg, "buffer_size", &c->buffer_size, who) ||
      agpy_cfg_i64(cfg, "learning_starts", &c->learning_starts, who) ||
      agpy_cfg_i64(cfg, "train_freq", &c->train_freq, who) ||
      agpy_cfg_i64(cfg, "gradient_steps", &c->gradient_steps, who) ||
      agpy_cfg_int(cfg, "policy_delay", &c->policy_delay, who) || agpy_cfg_f(cfg, "alpha", &c->alpha) ||
      agpy_cfg_bool(cfg, "autotune", &c->autotune) || agpy_cfg_f(cfg, "expl_noise", &c->expl_noise) ||
      agpy_cfg_f(cfg, "target_noise", &c->target_noise) || agpy_cfg_f(cfg, "noise_clip", &c->noise_clip) ||
      agpy_cfg_f(cfg, "noise_rho", &c->noise_rho) || agpy_cfg_int(cfg, "n_step", &c->n_step, who) ||
      agpy_cfg_i64(cfg, "n_envs", &c->n_envs, who) || agpy_cfg_u64(cfg, "seed", &c->seed) ||
      agpy_cfg_bool(cfg, "fused", &c->fused))
    return -1;
  return 0;
}

PyObject *agpy_ac_config_dict(const ag_ac_config *c) {
  PyObject *te = isnan(c->target_entropy) ? Py_NewRef(Py_None) : PyFloat_FromDouble(c->target_entropy);
  return Py_BuildValue(
      "{s:N,s:d,s:d,s:d,s:d,s:L,s:L,s:L,s:L,s:L,s:i,s:d,s:O,s:N,s:d,s:d,s:d,s:d,s:i,s:L,s:K,s:O}", "hidden",
      agpy_hidden_tuple(c->hidden, c->n_hidden), "actor_lr", (double)c->actor_lr, "critic_lr",
      (double)c->critic_lr, "gamma", (double)c->gamma, "tau", (double)c->tau, "batch_size",
      (long long)c->batch_size, "buffer_size", (long long)c->buffer_size, "learning_starts",
      (long long)c->learning_starts, "train_freq", (long long)c->train_freq, "gradient_steps",
      (long long)c->gradient_steps, "policy_delay", c->policy_delay, "alpha", (double)c->alpha, "autotune",
      c->autotune ? Py_True : Py_False, "target_entropy", te, "expl_noise", (double)c->expl_noise,
      "target_noise", (double)c->target_noise, "noise_clip", (double)c->noise_clip, "noise_rho",
      (double)c->noise_rho, "n_step", c->n_step, "n_envs", (long long)c->n_envs, "seed",
      (unsigned long long)c->seed, "fused", c->fused ? Py_True : Py_False);
}

/* The bounds `obj` (act_dim numbers) into out. */
static int bounds_of(PyObject *obj, int64_t act_dim, float *out, const char *what) {
  agpy_in in;
  if (agpy_in_get(NULL, obj, &in, what)) return -1;
  int r = -1;
  if (in.numel != act_dim || in.ndim > 1)
    agpy_raisef(AG_ERR_SHAPE, "%s: %lld values for %lld actions", what, (long long)in.numel,
                (long long)act_dim);
  else
    r = agpy_in_convert(&in, AG_F32, out, what);
  agpy_in_release(&in, NULL);
  return r;
}

static int ac_init(agpy_ac *p, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"ctx", "algo", "obs_dim", "act_dim", "low", "high", "total_steps", "config", NULL};
  PyObject *ctxo, *lowo, *higho, *cfg = NULL;
  const char *algo_s;
  long long obs_dim, act_dim, total = 100000;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OsLLOO|LO:_AC", kwlist, &ctxo, &algo_s, &obs_dim, &act_dim,
                                   &lowo, &higho, &total, &cfg))
    return -1;
  if (p->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "__init__ called twice");
    return -1;
  }
  ag_ac_algo algo;
  if (algo_parse(algo_s, &algo)) return -1;
  p->algo = algo;
  const char *who = who_of(algo);
  if (!PyObject_TypeCheck(ctxo, &agpy_ctx_type)) {
    PyErr_Format(PyExc_TypeError, "%s: ctx must be an agrl.Context, not %.80s", who, Py_TYPE(ctxo)->tp_name);
    return -1;
  }
  agpy_ctx *c = (agpy_ctx *)ctxo;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (!ctx) return -1;
  ag_ac_config conf;
  if (parse_config(cfg, algo, &conf)) return -1;
  char wl[32], wh[32];
  PyOS_snprintf(wl, sizeof wl, "%s: low", who);
  PyOS_snprintf(wh, sizeof wh, "%s: high", who);
  /* act_dim outside 1..64: ag_ac_create refuses it before it reads a bound */
  if (act_dim >= 1 && act_dim <= 64 &&
      (bounds_of(lowo, act_dim, p->low, wl) || bounds_of(higho, act_dim, p->high, wh)))
    return -1;
  ag_status s = ag_ac_create(ctx, obs_dim, act_dim, p->low, p->high, total, &conf, &p->a);
  if (s) {
    agpy_raise(s);
    return -1;
  }
  if (agpy_ctx_add_dep(c, (PyObject *)p)) {
    agpy_ac_release((PyObject *)p);
    return -1;
  }
  p->ctx = (agpy_ctx *)Py_NewRef(c);
  p->obs_dim = obs_dim;
  p->act_dim = act_dim;
  return 0;
}

static void ac_dealloc(agpy_ac *p) {
  agpy_ac_release((PyObject *)p);
  if (p->ctx) {
    agpy_ctx_drop_dep(p->ctx, (PyObject *)p);
    Py_DECREF(p->ctx);
  }
  Py_TYPE(p)->tp_free((PyObject *)p);
}

/* A float32 array of n actions: (act_dim,) for one (single), else (n, act_dim). */
static PyObject *actions_array(agpy_ac *p, int n, int single, const float *src) {
  Py_buffer view;
  int64_t shape[2] = {n, p->act_dim};
  PyObject *r =
      single ? agpy_numpy_empty(1, shape + 1, AG_F32, &view) : agpy_numpy_empty(2, shape, AG_F32, &view);
  if (!r) return NULL;
  memcpy(view.buf, src, sizeof(float) * (size_t)n * (size_t)p->act_dim);
  PyBuffer_Release(&view);
  return r;
}

static PyObject *ac_act(agpy_ac *p, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"obs", "explore", NULL};
  PyObject *obs;
  int explore = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:act", kwlist, &obs, &explore)) return NULL;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  char what[32];
  PyOS_snprintf(what, sizeof what, "%s.act: obs", who_of(p->algo));
  agpy_in in;
  if (agpy_in_get(NULL, obs, &in, what)) return NULL;
  void *scratch;
  int n = 0, single = 0;
  PyObject *ret = NULL;
  const float *o = agpy_obs_of(p->obs_dim, &in, &scratch, &n, &single, what);
  if (o && n == 0) {
    agpy_raisef(AG_ERR_INVALID_ARG, "%s.act: no observations", who_of(p->algo));
  } else if (o) {
    float *acts = malloc(sizeof(float) * (size_t)n * (size_t)p->act_dim);
    if (!acts) {
      PyErr_NoMemory();
    } else {
      ag_status s = ag_ac_act(a, o, n, explore, acts);
      ret = s ? agpy_raise(s) : actions_array(p, n, single, acts);
      free(acts);
    }
  }
  free(scratch);
  agpy_in_release(&in, NULL);
  return ret;
}

static PyObject *ac_act_random(agpy_ac *p, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"n", NULL};
  PyObject *no = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:act_random", kwlist, &no)) return NULL;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  long long n = 1;
  if (no != Py_None) {
    n = PyLong_AsLongLong(no);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || n > INT32_MAX)
      return agpy_raisef(AG_ERR_INVALID_ARG, "%s.act_random: n = %lld must be in 1..2^31-1", who_of(p->algo),
                         n);
  }
  float *acts = malloc(sizeof(float) * (size_t)n * (size_t)p->act_dim);
  if (!acts) return PyErr_NoMemory();
  ag_status s = ag_ac_act_random(a, (int)n, acts);
  PyObject *ret = s ? agpy_raise(s) : actions_array(p, (int)n, no == Py_None, acts);
  free(acts);
  return ret;
}

static PyObject *ac_store(agpy_ac *p, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"obs", "action", "reward", "next_obs", "terminated", "truncated", NULL};
  static const char *const names[6] = {"obs", "action", "reward", "next_obs", "terminated", "truncated"};
  PyObject *o[6] = {NULL, NULL, NULL, NULL, NULL, Py_None};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO|O:store", kwlist, &o[0], &o[1], &o[2], &o[3], &o[4],
                                   &o[5]))
    return NULL;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  static const ag_dtype dts[6] = {AG_F32, AG_F32, AG_F32, AG_F32, AG_I32, AG_I32};
  char what[6][40];
  for (int i = 0; i < 6; i++)
    PyOS_snprintf(what[i], sizeof what[i], "%s.store: %s", who_of(p->algo), names[i]);
  agpy_in in[6];
  memset(in, 0, sizeof in);
  void *scratch[6] = {0};
  const void *v[6] = {0};
  int n = -1, single = 0;
  const int k = o[5] == Py_None ? 5 : 6;
  const int64_t A = p->act_dim;
  PyObject *ret = NULL;
  for (int i = 0; i < k; i++) {
    if (agpy_in_get(NULL, o[i], &in[i], what[i])) goto done;
    if (i == 0 || i == 3) {
      int ni, si;
      if (!(v[i] = agpy_obs_of(p->obs_dim, &in[i], &scratch[i], &ni, &si, what[i]))) goto done;
      if (i == 0) n = ni, single = si;
      if (ni != n || si != single) {
        agpy_raisef(AG_ERR_SHAPE, "%s.store: obs and next_obs have different shapes", who_of(p->algo));
        goto done;
      }
      continue;
    }
    const agpy_in *x = &in[i];
    int ok;
    if (i == 1) /* (act_dim,) for one; (n, act_dim), or (n,) of one action each, for a batch */
      ok = x->numel == (int64_t)n * A &&
           (x->ndim <= 1 ? single || A == 1 : x->ndim == 2 && x->shape[0] == n && x->shape[1] == A);
    else
      ok = x->numel == n && x->ndim <= 2 && (x->ndim < 2 || x->shape[1] == 1);
    if (!ok) {
      if (i == 1)
        agpy_raisef(AG_ERR_SHAPE, "%s: %lld values for %d transitions of %lld actions", what[i],
                    (long long)x->numel, n, (long long)A);
      else
        agpy_raisef(AG_ERR_SHAPE, "%s: %lld values for %d transitions", what[i], (long long)x->numel, n);
      goto done;
    }
    if (!(v[i] = agpy_in_as(x, dts[i], &scratch[i], what[i]))) goto done;
  }
  ag_status s = ag_ac_store(a, v[0], v[1], v[2], v[3], v[4], v[5], n);
  ret = s ? agpy_raise(s) : Py_NewRef(Py_None);
done:
  for (int i = 0; i < 6; i++) {
    free(scratch[i]);
    agpy_in_release(&in[i], NULL);
  }
  return ret;
}

static PyObject *ac_train(agpy_ac *p, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"gradient_steps", "losses", NULL};
  long long n;
  int want = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "L|p:train", kwlist, &n, &want)) return NULL;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  float losses[2] = {NAN, NAN};
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_ac_train(a, n, want ? losses : NULL);
  Py_END_ALLOW_THREADS if (s) return agpy_raise(s);
  if (!want || n == 0) Py_RETURN_NONE;
  return Py_BuildValue("(dd)", (double)losses[0], (double)losses[1]);
}

static PyObject *ac_alpha(agpy_ac *p, PyObject *x) {
  (void)x;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  float alpha;
  ag_status s = ag_ac_alpha(a, &alpha);
  return s ? agpy_raise(s) : PyFloat_FromDouble(alpha);
}

/* _evaluate(env, episodes, seed): ag_ac_evaluate on an agrl._Env. */
static PyObject *ac_evaluate(agpy_ac *p, PyObject *args) {
  PyObject *envo;
  int episodes;
  unsigned long long seed;
  if (!PyArg_ParseTuple(args, "OiO&:evaluate", &envo, &episodes, agpy_u64_conv, &seed)) return NULL;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  ag_env *env = agpy_env_of(envo);
  if (!env) {
    PyErr_Format(PyExc_TypeError, "%s.evaluate: env must be an agrl environment, not %.80s", who_of(p->algo),
                 Py_TYPE(envo)->tp_name);
    return NULL;
  }
  if (episodes < 1)
    return agpy_raisef(AG_ERR_INVALID_ARG, "%s.evaluate: episodes = %d must be at least 1", who_of(p->algo),
                       episodes);
  double mean = 0, *rets = malloc(sizeof(double) * (size_t)episodes);
  if (!rets) return PyErr_NoMemory();
  ag_status s = ag_ac_evaluate(a, env, episodes, seed, &mean, rets);
  PyObject *list = s ? agpy_raise(s) : PyList_New(episodes);
  for (int i = 0; list && !s && i < episodes; i++) {
    PyObject *r = PyFloat_FromDouble(rets[i]);
    if (!r) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, i, r);
  }
  free(rets);
  return list ? Py_BuildValue("(dN)", mean, list) : NULL;
}

static PyObject *ac_save_policy(agpy_ac *p, PyObject *arg) {
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  PyObject *path = NULL;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  ag_status s = ag_mlp_save(ag_ac_actor(a), PyBytes_AS_STRING(path));
  Py_DECREF(path);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

static PyObject *ac_load_policy(agpy_ac *p, PyObject *arg) {
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  PyObject *path = NULL;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  ag_mlp *m = NULL, *actor = ag_ac_actor(a);
  ag_status s = ag_mlp_load(p->ctx->ctx, PyBytes_AS_STRING(path), &m);
  Py_DECREF(path);
  if (!s && (ag_mlp_in(m) != ag_mlp_in(actor) || ag_mlp_out(m) != ag_mlp_out(actor))) {
    agpy_raisef(AG_ERR_SHAPE,
                "%s.load_policy: the file holds a %lld -> %lld network, the actor is %lld -> %lld",
                who_of(p->algo), (long long)ag_mlp_in(m), (long long)ag_mlp_out(m),
                (long long)ag_mlp_in(actor), (long long)ag_mlp_out(actor));
    ag_mlp_free(m);
    return NULL;
  }
  if (!s) s = ag_mlp_copy(actor, m); /* checks the hidden sizes first */
  ag_mlp_free(m);
  if (s) return agpy_raise(s);
  Py_RETURN_NONE;
}

/* _save(path, run_state): the whole agent (ag_ac_save) with the loop's
 * record (bytes, or None for none). */
static PyObject *ac_save(agpy_ac *p, PyObject *args) {
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  PyObject *path = NULL, *rso = Py_None;
  if (!PyArg_ParseTuple(args, "O&|O:save", PyUnicode_FSConverter, &path, &rso)) return NULL;
  Py_buffer rs = {0};
  if (rso != Py_None && PyObject_GetBuffer(rso, &rs, PyBUF_SIMPLE)) {
    Py_DECREF(path);
    return NULL;
  }
  ag_status s = ag_ac_set_run_state(a, rs.buf, rso == Py_None ? 0 : (size_t)rs.len);
  if (rso != Py_None) PyBuffer_Release(&rs);
  if (!s) {
    Py_BEGIN_ALLOW_THREADS s = ag_ac_save(a, PyBytes_AS_STRING(path));
    Py_END_ALLOW_THREADS
  }
  Py_DECREF(path);
  return s ? agpy_raise(s) : Py_NewRef(Py_None);
}

/* _load_from(ctx, path) on an object made by __new__: the agent of the
 * file, its algo, sizes and bounds. */
static PyObject *ac_load_from(agpy_ac *p, PyObject *args) {
  PyObject *ctxo, *path = NULL;
  if (!PyArg_ParseTuple(args, "OO&:load", &ctxo, PyUnicode_FSConverter, &path)) return NULL;
  PyObject *ret = NULL;
  ag_ctx *ctx = NULL;
  if (p->ctx || p->a)
    PyErr_SetString(PyExc_RuntimeError, "load: the object already holds an agent");
  else if (!PyObject_TypeCheck(ctxo, &agpy_ctx_type))
    PyErr_Format(PyExc_TypeError, "load: ctx must be an agrl.Context, not %.80s", Py_TYPE(ctxo)->tp_name);
  else
    ctx = agpy_ctx_get((agpy_ctx *)ctxo);
  if (ctx) {
    ag_ac *a = NULL;
    ag_status s;
    Py_BEGIN_ALLOW_THREADS s = ag_ac_load(ctx, PyBytes_AS_STRING(path), &a);
    Py_END_ALLOW_THREADS if (s) agpy_raise(s);
    else if (agpy_ctx_add_dep((agpy_ctx *)ctxo, (PyObject *)p)) ag_ac_free(a);
    else {
      p->a = a;
      p->ctx = (agpy_ctx *)Py_NewRef(ctxo);
      p->algo = ag_ac_get_config(a)->algo;
      p->obs_dim = ag_mlp_in(ag_ac_actor(a));
      p->act_dim = ag_ac_act_dim(a);
      memcpy(p->low, ag_ac_low(a), sizeof(float) * (size_t)p->act_dim);
      memcpy(p->high, ag_ac_high(a), sizeof(float) * (size_t)p->act_dim);
      ret = Py_NewRef(Py_None);
    }
  }
  Py_DECREF(path);
  return ret;
}

static PyObject *ac_run_state(agpy_ac *p, PyObject *x) {
  (void)x;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  size_t n;
  const void *rs = ag_ac_run_state(a, &n);
  return rs ? PyBytes_FromStringAndSize(rs, (Py_ssize_t)n) : Py_NewRef(Py_None);
}

static PyObject *ac_get_total_steps(agpy_ac *p, void *x) {
  (void)x;
  return ac_get(p) ? PyLong_FromLongLong(ag_ac_total_steps(p->a)) : NULL;
}

static PyObject *ac_config(agpy_ac *p, PyObject *x) {
  (void)x;
  ag_ac *a = ac_get(p);
  return a ? agpy_ac_config_dict(ag_ac_get_config(a)) : NULL;
}

static PyObject *ac_free(agpy_ac *p, PyObject *x) {
  (void)x;
  agpy_ac_release((PyObject *)p);
  Py_RETURN_NONE;
}

static PyObject *bounds_array(agpy_ac *p, const float *b) {
  Py_buffer view;
  int64_t shape[1] = {p->act_dim};
  PyObject *r = agpy_numpy_empty(1, shape, AG_F32, &view);
  if (!r) return NULL;
  memcpy(view.buf, b, sizeof(float) * (size_t)p->act_dim);
  PyBuffer_Release(&view);
  return r;
}

static PyObject *ac_get_low(agpy_ac *p, void *x) {
  (void)x;
  return bounds_array(p, p->low);
}

static PyObject *ac_get_high(agpy_ac *p, void *x) {
  (void)x;
  return bounds_array(p, p->high);
}

static PyObject *ac_get_updates(agpy_ac *p, void *x) {
  (void)x;
  return ac_get(p) ? PyLong_FromLongLong(ag_ac_updates(p->a)) : NULL;
}

static PyObject *ac_get_fused(agpy_ac *p, void *x) {
  (void)x;
  return ac_get(p) ? PyBool_FromLong(ag_ac_fused(p->a)) : NULL;
}

static PyObject *ac_get_stored(agpy_ac *p, void *x) {
  (void)x;
  return ac_get(p) ? PyLong_FromLongLong(ag_replay_size(ag_ac_replay(p->a))) : NULL;
}

static PyObject *ac_get_obs_dim(agpy_ac *p, void *x) {
  (void)x;
  return PyLong_FromLongLong(p->obs_dim);
}

static PyObject *ac_get_act_dim(agpy_ac *p, void *x) {
  (void)x;
  return PyLong_FromLongLong(p->act_dim);
}

static PyObject *ac_get_algo(agpy_ac *p, void *x) {
  (void)x;
  return PyUnicode_FromString(p->algo == AG_AC_TD3 ? "td3" : "sac");
}

static PyMethodDef ac_methods[] = {
    {"act", (PyCFunction)(void (*)(void))ac_act, METH_VARARGS | METH_KEYWORDS,
     "act(obs, explore=True): float32 actions in the bounds, (act_dim,) for one observation, (n, act_dim) "
     "for "
     "(n, obs_dim)."},
    {"act_random", (PyCFunction)(void (*)(void))ac_act_random, METH_VARARGS | METH_KEYWORDS,
     "act_random(n=None): uniform actions in the bounds from the agent's host stream ((act_dim,), or (n, "
     "act_dim))."},
    {"store", (PyCFunction)(void (*)(void))ac_store, METH_VARARGS | METH_KEYWORDS,
     "store(obs, action, reward, next_obs, terminated, truncated=None): one transition or a batch."},
    {"train", (PyCFunction)(void (*)(void))ac_train, METH_VARARGS | METH_KEYWORDS,
     "train(gradient_steps, losses=True): runs the recorded updates; returns (critic_loss, actor_loss)."},
    {"alpha", (PyCFunction)ac_alpha, METH_NOARGS, "SAC's entropy temperature now (TD3: 0)."},
    {"_evaluate", (PyCFunction)ac_evaluate, METH_VARARGS,
     "_evaluate(env, episodes, seed): ag_ac_evaluate on an agrl._Env; (mean, returns)."},
    {"save_policy", (PyCFunction)ac_save_policy, METH_O,
     "save_policy(path): the actor in agrl's model format (what agrl eval --model reads)."},
    {"load_policy", (PyCFunction)ac_load_policy, METH_O,
     "load_policy(path): the actor's parameters from a model file of the same shape (TD3's target actor "
     "keeps "
     "its own)."},
    {"_config", (PyCFunction)ac_config, METH_NOARGS, "The configuration as a dict."},
    {"_save", (PyCFunction)ac_save, METH_VARARGS,
     "_save(path, run_state=None): the whole agent (ag_ac_save)."},
    {"_load_from", (PyCFunction)ac_load_from, METH_VARARGS,
     "_load_from(ctx, path): ag_ac_load into a new object."},
    {"_run_state", (PyCFunction)ac_run_state, METH_NOARGS,
     "The run state saved with the agent (bytes or None)."},
    {"free", (PyCFunction)ac_free, METH_NOARGS, "Frees the agent."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ac_getset[] = {
    {"updates", (getter)ac_get_updates, NULL, "gradient steps (critic updates) so far", NULL},
    {"stored", (getter)ac_get_stored, NULL, "transitions in the replay table", NULL},
    {"fused", (getter)ac_get_fused, NULL, "whether an update runs as one fused call (ag_ac_fused)", NULL},
    {"obs_dim", (getter)ac_get_obs_dim, NULL, NULL, NULL},
    {"act_dim", (getter)ac_get_act_dim, NULL, NULL, NULL},
    {"low", (getter)ac_get_low, NULL, "the actions' lower bounds (float32)", NULL},
    {"high", (getter)ac_get_high, NULL, "the actions' upper bounds (float32)", NULL},
    {"algo", (getter)ac_get_algo, NULL, "'sac' or 'td3'", NULL},
    {"_total_steps", (getter)ac_get_total_steps, NULL, "the steps the agent was planned for", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject agpy_ac_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "agrl._AC",
    .tp_basicsize = sizeof(agpy_ac),
    .tp_dealloc = (destructor)ac_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C side of agrl.SAC and agrl.TD3.",
    .tp_methods = ac_methods,
    .tp_getset = ac_getset,
    .tp_init = (initproc)ac_init,
    .tp_new = PyType_GenericNew,
};

PyObject *agpy_ac_defaults(PyObject *m, PyObject *arg) {
  (void)m;
  const char *s = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
  if (!s) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "ac_defaults: algo must be a str, not %.80s", Py_TYPE(arg)->tp_name);
    return NULL;
  }
  ag_ac_algo algo;
  if (algo_parse(s, &algo)) return NULL;
  ag_ac_config c = ag_ac_defaults(algo);
  return agpy_ac_config_dict(&c);
}
