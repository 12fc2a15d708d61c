/* ac.c — the C side of agrl.SAC and agrl.TD3 (agrl/ac.h). */
#include <math.h>

#include "agrl_py.h"

typedef struct agpy_ac {
  AGPY_ON_CTX;
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
    agpy_raisef(p->st, AG_ERR_FREED, "the %s agent has been freed (or its context)", who_of(p->algo));
    return NULL;
  }
  return p->a;
}

/* "sac" or "td3" (any case) */
static int algo_parse(agpy_state *st, const char *s, ag_ac_algo *out) {
  if (!PyOS_stricmp(s, "sac"))
    *out = AG_AC_SAC;
  else if (!PyOS_stricmp(s, "td3"))
    *out = AG_AC_TD3;
  else {
    agpy_raisef(st, AG_ERR_INVALID_ARG, "algo '%s' is neither 'sac' nor 'td3'", s);
    return -1;
  }
  return 0;
}

/* Fills an ag_ac_config of `algo` from a dict of the names of its fields
 * (target_entropy None: NaN, the default -act_dim). */
static int parse_config(agpy_state *st, PyObject *cfg, ag_ac_algo algo, ag_ac_config *c) {
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
  if (agpy_cfg_keys(st, cfg, known, who, "ag_ac_config") ||
      agpy_cfg_hidden(st, cfg, c->hidden, &c->n_hidden, AG_AC_MAX_HIDDEN, who))
    return -1;
  PyObject *te = PyDict_GetItemString(cfg, "target_entropy");
  if (te == Py_None)
    c->target_entropy = NAN;
  else if (agpy_cfg_get(st, cfg, "target_entropy", "f", &c->target_entropy, who))
    return -1;
  if (agpy_cfg_get(st, cfg, "actor_lr", "f", &c->actor_lr, who) ||
      agpy_cfg_get(st, cfg, "critic_lr", "f", &c->critic_lr, who) ||
      agpy_cfg_get(st, cfg, "gamma", "f", &c->gamma, who) ||
      agpy_cfg_get(st, cfg, "tau", "f", &c->tau, who) ||
      agpy_cfg_get(st, cfg, "batch_size", "L", &c->batch_size, who) ||
      agpy_cfg_get(st, cfg, "buffer_size", "L", &c->buffer_size, who) ||
      agpy_cfg_get(st, cfg, "learning_starts", "L", &c->learning_starts, who) ||
      agpy_cfg_get(st, cfg, "train_freq", "L", &c->train_freq, who) ||
      agpy_cfg_get(st, cfg, "gradient_steps", "L", &c->gradient_steps, who) ||
      agpy_cfg_get(st, cfg, "policy_delay", "i", &c->policy_delay, who) ||
      agpy_cfg_get(st, cfg, "alpha", "f", &c->alpha, who) ||
      agpy_cfg_get(st, cfg, "autotune", "b", &c->autotune, who) ||
      agpy_cfg_get(st, cfg, "expl_noise", "f", &c->expl_noise, who) ||
      agpy_cfg_get(st, cfg, "target_noise", "f", &c->target_noise, who) ||
      agpy_cfg_get(st, cfg, "noise_clip", "f", &c->noise_clip, who) ||
      agpy_cfg_get(st, cfg, "noise_rho", "f", &c->noise_rho, who) ||
      agpy_cfg_get(st, cfg, "n_step", "i", &c->n_step, who) ||
      agpy_cfg_get(st, cfg, "n_envs", "L", &c->n_envs, who) ||
      agpy_cfg_get(st, cfg, "seed", "K", &c->seed, who) ||
      agpy_cfg_get(st, cfg, "fused", "b", &c->fused, who))
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
static int bounds_of(agpy_state *st, PyObject *obj, int64_t act_dim, float *out, const char *what) {
  agpy_in in;
  if (agpy_in_get(st, NULL, obj, &in, what)) return -1;
  int r = -1;
  if (in.numel != act_dim || in.ndim > 1)
    agpy_raisef(st, AG_ERR_SHAPE, "%s: %lld values for %lld actions", what, (long long)in.numel,
                (long long)act_dim);
  else
    r = agpy_in_convert(st, &in, AG_F32, out, what);
  agpy_in_release(&in, NULL);
  return r;
}

/* Sets the object up over a made agent (taking it). */
static int ac_attach(agpy_ac *p, agpy_ctx *c, ag_ac *a) {
  if (agpy_ctx_add_dep(c, (PyObject *)p)) {
    ag_ac_free(a);
    return -1;
  }
  p->a = a;
  p->ctx = (agpy_ctx *)Py_NewRef(c);
  p->algo = ag_ac_get_config(a)->algo;
  p->obs_dim = ag_mlp_in(ag_ac_actor(a));
  p->act_dim = ag_ac_act_dim(a);
  memcpy(p->low, ag_ac_low(a), sizeof(float) * (size_t)p->act_dim);
  memcpy(p->high, ag_ac_high(a), sizeof(float) * (size_t)p->act_dim);
  return 0;
}

static int ac_init(agpy_ac *p, PyObject *args, PyObject *kw) {
  PyObject *ctxo, *algoo, *lowo, *higho, *cfg = Py_None;
  int64_t obs_dim, act_dim, total = 100000;
  const agpy_arg spec[] = {{"ctx", "O", &ctxo},          {"algo", "U", &algoo}, {"obs_dim", "L", &obs_dim},
                           {"act_dim", "L", &act_dim},   {"low", "O", &lowo},   {"high", "O", &higho},
                           {"total_steps", "L", &total}, {"config", "O", &cfg}};
  if (agpy_parse_tuple(p->st, "_AC", args, kw, 6, spec, 8)) return -1;
  if (p->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "__init__ called twice");
    return -1;
  }
  const char *algo_s = PyUnicode_AsUTF8(algoo);
  ag_ac_algo algo;
  if (!algo_s || algo_parse(p->st, algo_s, &algo)) return -1;
  p->algo = algo;
  const char *who = who_of(algo);
  agpy_ctx *c = agpy_ctx_check(p->st, ctxo, who);
  ag_ac_config conf;
  if (!c || parse_config(p->st, cfg, algo, &conf)) return -1;
  char wl[32], wh[32];
  PyOS_snprintf(wl, sizeof wl, "%s: low", who);
  PyOS_snprintf(wh, sizeof wh, "%s: high", who);
  float low[64], high[64];
  /* act_dim outside 1..64: ag_ac_create refuses it before it reads a bound */
  if (act_dim >= 1 && act_dim <= 64 &&
      (bounds_of(p->st, lowo, act_dim, low, wl) || bounds_of(p->st, higho, act_dim, high, wh)))
    return -1;
  if (agpy_lock(c)) return -1;
  ag_ctx *ctx = agpy_ctx_get(c);
  ag_ac *a = NULL;
  int r = -1;
  ag_status s = ctx ? ag_ac_create(ctx, obs_dim, act_dim, low, high, total, &conf, &a) : AG_OK;
  if (!ctx)
    ;
  else if (s)
    agpy_raise(p->st, s);
  else
    r = ac_attach(p, c, a);
  agpy_unlock(c);
  return r;
}

static void ac_dealloc(agpy_ac *p) {
  if (p->ctx) {
    agpy_lock(p->ctx);
    agpy_ac_release((PyObject *)p);
    agpy_ctx_drop_dep(p->ctx, (PyObject *)p);
    agpy_unlock(p->ctx);
    Py_DECREF(p->ctx);
  }
  agpy_obj_free((PyObject *)p);
}

/* A float32 array of n actions: (act_dim,) for one (single), else (n, act_dim). */
static PyObject *actions_array(agpy_ac *p, int n, int single, const float *src) {
  Py_buffer view;
  int64_t shape[2] = {n, p->act_dim};
  PyObject *r = single ? agpy_numpy_empty(p->st, 1, shape + 1, AG_F32, &view)
                       : agpy_numpy_empty(p->st, 2, shape, AG_F32, &view);
  if (!r) return NULL;
  memcpy(view.buf, src, sizeof(float) * (size_t)n * (size_t)p->act_dim);
  PyBuffer_Release(&view);
  return r;
}

static PyObject *ac_act(agpy_ac *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *obs;
  int explore = 1;
  const agpy_arg spec[] = {{"obs", "O", &obs}, {"explore", "p", &explore}};
  if (agpy_parse(p->st, "act", args, nargs, kwnames, 1, spec, 2)) return NULL;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  char what[32];
  PyOS_snprintf(what, sizeof what, "%s.act: obs", who_of(p->algo));
  agpy_in in;
  if (agpy_in_get(p->st, NULL, obs, &in, what)) return NULL;
  void *scratch;
  int n = 0, single = 0;
  PyObject *ret = NULL;
  const float *o = agpy_obs_of(p->st, p->obs_dim, &in, &scratch, &n, &single, what);
  if (o && n == 0) {
    agpy_raisef(p->st, AG_ERR_INVALID_ARG, "%s.act: no observations", who_of(p->algo));
  } else if (o) {
    float *acts = malloc(sizeof(float) * (size_t)n * (size_t)p->act_dim);
    if (!acts) {
      PyErr_NoMemory();
    } else {
      ag_status s = ag_ac_act(a, o, n, explore, acts);
      ret = s ? agpy_raise(p->st, s) : actions_array(p, n, single, acts);
      free(acts);
    }
  }
  free(scratch);
  agpy_in_release(&in, NULL);
  return ret;
}

static PyObject *ac_act_random(agpy_ac *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *no = Py_None;
  const agpy_arg spec[] = {{"n", "O", &no}};
  if (agpy_parse(p->st, "act_random", args, nargs, kwnames, 0, spec, 1)) return NULL;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  int64_t n = 1;
  if (no != Py_None) {
    if (agpy_convert(p->st, "act_random", "n", no, "L", &n)) return NULL;
    /* the buffer below is sized from n: checked here, before it is allocated */
    if (n < 1 || n > INT32_MAX)
      return agpy_raisef(p->st, AG_ERR_INVALID_ARG, "%s.act_random: n = %lld must be in 1..2^31-1",
                         who_of(p->algo), (long long)n);
  }
  float *acts = malloc(sizeof(float) * (size_t)n * (size_t)p->act_dim);
  if (!acts) return PyErr_NoMemory();
  ag_status s = ag_ac_act_random(a, (int)n, acts);
  PyObject *ret = s ? agpy_raise(p->st, s) : actions_array(p, (int)n, no == Py_None, acts);
  free(acts);
  return ret;
}

static PyObject *ac_store(agpy_ac *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char *const names[6] = {"obs", "action", "reward", "next_obs", "terminated", "truncated"};
  PyObject *o[6] = {NULL, NULL, NULL, NULL, NULL, Py_None};
  const agpy_arg spec[] = {{"obs", "O", &o[0]},      {"action", "O", &o[1]},     {"reward", "O", &o[2]},
                           {"next_obs", "O", &o[3]}, {"terminated", "O", &o[4]}, {"truncated", "O", &o[5]}};
  if (agpy_parse(p->st, "store", args, nargs, kwnames, 5, spec, 6)) return NULL;
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
    if (agpy_in_get(p->st, NULL, o[i], &in[i], what[i])) goto done;
    if (i == 0 || i == 3) {
      int ni, si;
      if (!(v[i] = agpy_obs_of(p->st, p->obs_dim, &in[i], &scratch[i], &ni, &si, what[i]))) goto done;
      if (i == 0) n = ni, single = si;
      if (ni != n || si != single) {
        agpy_raisef(p->st, AG_ERR_SHAPE, "%s.store: obs and next_obs have different shapes", who_of(p->algo));
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
        agpy_raisef(p->st, AG_ERR_SHAPE, "%s: %lld values for %d transitions of %lld actions", what[i],
                    (long long)x->numel, n, (long long)A);
      else
        agpy_raisef(p->st, AG_ERR_SHAPE, "%s: %lld values for %d transitions", what[i], (long long)x->numel,
                    n);
      goto done;
    }
    if (!(v[i] = agpy_in_as(p->st, x, dts[i], &scratch[i], what[i]))) goto done;
  }
  ag_status s = ag_ac_store(a, v[0], v[1], v[2], v[3], v[4], v[5], n);
  ret = s ? agpy_raise(p->st, s) : Py_NewRef(Py_None);
done:
  for (int i = 0; i < 6; i++) {
    free(scratch[i]);
    agpy_in_release(&in[i], NULL);
  }
  return ret;
}

static PyObject *ac_train(agpy_ac *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  int64_t n;
  int want = 1;
  const agpy_arg spec[] = {{"gradient_steps", "L", &n}, {"losses", "p", &want}};
  if (agpy_parse(p->st, "train", args, nargs, kwnames, 1, spec, 2)) return NULL;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  float losses[2] = {NAN, NAN};
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_ac_train(a, n, want ? losses : NULL);
  Py_END_ALLOW_THREADS if (s) return agpy_raise(p->st, s);
  if (!want || n == 0) Py_RETURN_NONE;
  return Py_BuildValue("(dd)", (double)losses[0], (double)losses[1]);
}

static PyObject *ac_alpha(agpy_ac *p, PyObject *x) {
  (void)x;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  float alpha;
  ag_status s = ag_ac_alpha(a, &alpha);
  return s ? agpy_raise(p->st, s) : PyFloat_FromDouble(alpha);
}

/* _evaluate(env, episodes, seed): ag_ac_evaluate on an agrl._Env. */
static PyObject *ac_evaluate(agpy_ac *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *envo;
  int episodes;
  uint64_t seed;
  const agpy_arg spec[] = {{"env", "O", &envo}, {"episodes", "i", &episodes}, {"seed", "K", &seed}};
  if (agpy_parse(p->st, "evaluate", args, nargs, kwnames, 3, spec, 3)) return NULL;
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  ag_env *env = agpy_env_of(p->st, envo);
  if (!env) {
    PyErr_Format(PyExc_TypeError, "%s.evaluate: env must be an agrl environment, not %.80s", who_of(p->algo),
                 Py_TYPE(envo)->tp_name);
    return NULL;
  }
  if (episodes < 1)
    return agpy_raisef(p->st, AG_ERR_INVALID_ARG, "%s.evaluate: episodes = %d must be at least 1",
                       who_of(p->algo), episodes);
  double mean = 0, *rets = malloc(sizeof(double) * (size_t)episodes);
  if (!rets) return PyErr_NoMemory();
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_ac_evaluate(a, env, episodes, seed, &mean, rets);
  Py_END_ALLOW_THREADS PyObject *list = s ? agpy_raise(p->st, s) : PyList_New(episodes);
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
  if (agpy_convert(p->st, "save_policy", "path", arg, "F", &path)) return NULL;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_mlp_save(ag_ac_actor(a), PyBytes_AS_STRING(path));
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (s) return agpy_raise(p->st, s);
  Py_RETURN_NONE;
}

static PyObject *ac_load_policy(agpy_ac *p, PyObject *arg) {
  ag_ac *a = ac_get(p);
  if (!a) return NULL;
  PyObject *path = NULL;
  if (agpy_convert(p->st, "load_policy", "path", arg, "F", &path)) return NULL;
  ag_mlp *m = NULL, *actor = ag_ac_actor(a);
  ag_ctx *ctx = p->ctx->ctx;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_mlp_load(ctx, PyBytes_AS_STRING(path), &m);
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (!s && (ag_mlp_in(m) != ag_mlp_in(actor) || ag_mlp_out(m) != ag_mlp_out(actor))) {
    agpy_raisef(p->st, AG_ERR_SHAPE,
                "%s.load_policy: the file holds a %lld -> %lld network, the actor is %lld -> %lld",
                who_of(p->algo), (long long)ag_mlp_in(m), (long long)ag_mlp_out(m),
                (long long)ag_mlp_in(actor), (long long)ag_mlp_out(actor));
    ag_mlp_free(m);
    return NULL;
  }
  if (!s) s = ag_mlp_copy(actor, m); /* checks the hidden sizes first */
  ag_mlp_free(m);
  if (s) return agpy_raise(p->st, s);
  Py_RETURN_NONE;
}

/* _save(path, run_state): the whole agent (ag_ac_save) with the loop's
 * record (bytes, or None for none). */
static PyObject *ac_save(agpy_ac *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *path = NULL, *rso = Py_None;
  const agpy_arg spec[] = {{"path", "F", &path}, {"run_state", "O", &rso}};
  if (agpy_parse(p->st, "save", args, nargs, kwnames, 1, spec, 2)) return NULL;
  ag_ac *a = ac_get(p);
  if (!a) {
    Py_DECREF(path);
    return NULL;
  }
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
  return s ? agpy_raise(p->st, s) : Py_NewRef(Py_None);
}

/* _load_from(ctx, path) on an object made by __new__: the agent of the
 * file, its algo, sizes and bounds. */
static PyObject *ac_load_from(agpy_ac *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *ctxo, *path = NULL;
  const agpy_arg spec[] = {{"ctx", "O", &ctxo}, {"path", "F", &path}};
  if (agpy_parse(p->st, "load", args, nargs, kwnames, 2, spec, 2)) return NULL;
  agpy_ctx *c = NULL;
  if (p->ctx || p->a)
    PyErr_SetString(PyExc_RuntimeError, "load: the object already holds an agent");
  else
    c = agpy_ctx_check(p->st, ctxo, "load");
  if (!c || agpy_lock(c)) {
    Py_DECREF(path);
    return NULL;
  }
  PyObject *ret = NULL;
  ag_ctx *ctx = agpy_ctx_get(c);
  if (ctx) {
    ag_ac *a = NULL;
    ag_status s;
    Py_BEGIN_ALLOW_THREADS s = ag_ac_load(ctx, PyBytes_AS_STRING(path), &a);
    Py_END_ALLOW_THREADS if (s) agpy_raise(p->st, s);
    else if (!ac_attach(p, c, a)) ret = Py_NewRef(Py_None);
  }
  agpy_unlock(c);
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
  PyObject *r = agpy_numpy_empty(p->st, 1, shape, AG_F32, &view);
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

static PyObject *ac_exit(agpy_ac *p, PyObject *x) {
  (void)x;
  agpy_ac_release((PyObject *)p);
  Py_RETURN_FALSE;
}

AGPY_WRAP_FAST(agpy_ac, ac_act)
AGPY_WRAP_FAST(agpy_ac, ac_act_random)
AGPY_WRAP_FAST(agpy_ac, ac_store)
AGPY_WRAP_FAST(agpy_ac, ac_train)
AGPY_WRAP_O(agpy_ac, ac_alpha)
AGPY_WRAP_FAST(agpy_ac, ac_evaluate)
AGPY_WRAP_O(agpy_ac, ac_save_policy)
AGPY_WRAP_O(agpy_ac, ac_load_policy)
AGPY_WRAP_O(agpy_ac, ac_config)
AGPY_WRAP_FAST(agpy_ac, ac_save)
AGPY_WRAP_O(agpy_ac, ac_run_state)
AGPY_WRAP_O(agpy_ac, ac_free)
AGPY_WRAP_O(agpy_ac, ac_exit)
AGPY_WRAP_GET(agpy_ac, ac_get_updates)
AGPY_WRAP_GET(agpy_ac, ac_get_stored)
AGPY_WRAP_GET(agpy_ac, ac_get_fused)
AGPY_WRAP_GET(agpy_ac, ac_get_total_steps)

/* _load_from locks the context it is given (the object has none yet) */
static PyObject *ac_load_from_w(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *k) {
  return ac_load_from((agpy_ac *)self, a, n, k);
}

static PyMethodDef ac_methods[] = {
    AGPY_M("act", ac_act, AGPY_FAST,
           "act($self, /, obs, explore=True)\n--\n\n"
           "Actions in the environment's bounds for (n, obs_dim) observations ((act_dim,) for one)."),
    AGPY_M("act_random", ac_act_random, AGPY_FAST,
           "act_random($self, /, n=None)\n--\n\nUniform random actions in the bounds (one, or n)."),
    AGPY_M("store", ac_store, AGPY_FAST,
           "store($self, /, obs, action, reward, next_obs, terminated, truncated=None)\n--\n\n"
           "One transition or a batch."),
    AGPY_M("train", ac_train, AGPY_FAST,
           "train($self, /, gradient_steps, losses=True)\n--\n\n"
           "Runs the recorded updates; returns (critic loss, actor loss) of the last. The GIL is released."),
    AGPY_M("alpha", ac_alpha, METH_NOARGS, "alpha($self, /)\n--\n\nSAC's entropy temperature now (TD3: 0)."),
    AGPY_M("_evaluate", ac_evaluate, AGPY_FAST,
           "_evaluate($self, /, env, episodes, seed)\n--\n\nag_ac_evaluate on an agrl environment."),
    AGPY_M("save_policy", ac_save_policy, METH_O,
           "save_policy($self, path, /)\n--\n\nThe actor in agrl's model format (what agrl eval --model "
           "reads)."),
    AGPY_M("load_policy", ac_load_policy, METH_O,
           "load_policy($self, path, /)\n--\n\nThe actor's parameters from a model file of the same shape."),
    AGPY_M("_config", ac_config, METH_NOARGS, "_config($self, /)\n--\n\nThe configuration as a dict."),
    AGPY_M("_save", ac_save, AGPY_FAST,
           "_save($self, /, path, run_state=None)\n--\n\nThe whole agent (ag_ac_save)."),
    AGPY_M("_load_from", ac_load_from, AGPY_FAST,
           "_load_from($self, /, ctx, path)\n--\n\nag_ac_load into a new object."),
    AGPY_M("_run_state", ac_run_state, METH_NOARGS,
           "_run_state($self, /)\n--\n\nThe run state saved with the agent (bytes or None)."),
    AGPY_M("free", ac_free, METH_NOARGS,
           "free($self, /)\n--\n\nFrees the agent; later calls raise FreedError."),
    {"__enter__", agpy_enter, METH_NOARGS, "__enter__($self, /)\n--\n\n"},
    AGPY_M("__exit__", ac_exit, METH_VARARGS, "__exit__($self, *exc_info)\n--\n\nFrees the agent."),
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ac_getset[] = {
    {"updates", ac_get_updates_w, NULL, "gradient steps (critic updates) so far", NULL},
    {"stored", ac_get_stored_w, NULL, "transitions in the replay table", NULL},
    {"fused", ac_get_fused_w, NULL, "whether an update runs as one fused call (ag_ac_fused)", NULL},
    {"obs_dim", (getter)ac_get_obs_dim, NULL, "the observation's size", NULL},
    {"act_dim", (getter)ac_get_act_dim, NULL, "the action's size", NULL},
    {"low", (getter)ac_get_low, NULL, "the actions' lower bounds (float32)", NULL},
    {"high", (getter)ac_get_high, NULL, "the actions' upper bounds (float32)", NULL},
    {"algo", (getter)ac_get_algo, NULL, "'sac' or 'td3'", NULL},
    {"_total_steps", ac_get_total_steps_w, NULL, "the steps the agent was planned for", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot ac_slots[] = {
    {Py_tp_new, agpy_obj_new},
    {Py_tp_init, ac_init},
    {Py_tp_dealloc, ac_dealloc},
    {Py_tp_methods, ac_methods},
    {Py_tp_getset, ac_getset},
    {Py_tp_doc,
     "_AC(ctx, algo, obs_dim, act_dim, low, high, total_steps=100000, config=None)\n--\n\n"
     "The C side of agrl.SAC and agrl.TD3."},
    {0, NULL},
};

PyType_Spec agpy_ac_spec = {"agrl._AC", sizeof(agpy_ac), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                            ac_slots};

PyObject *agpy_ac_defaults(PyObject *m, PyObject *arg) {
  const char *s = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
  if (!s) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "ac_defaults: algo must be a str, not %.80s", Py_TYPE(arg)->tp_name);
    return NULL;
  }
  ag_ac_algo algo;
  if (algo_parse(PyModule_GetState(m), s, &algo)) return NULL;
  ag_ac_config c = ag_ac_defaults(algo);
  return agpy_ac_config_dict(&c);
}
