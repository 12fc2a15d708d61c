/* frames.c — the C side of agrl.FrameReplayBuffer: frame tables
 * (agrl/frames.h), pixel observations stored one frame per environment
 * step and stacked on the device when a batch is gathered.
 *
 * A batch is one block of the context's device: the stacks obs and
 * next_obs (made there by ag_frames_sample or ag_frames_gather_dev while
 * the block is the context's workspace), then each field in the dtype it
 * was added with and the indices, written by ag_replay_gather_into over
 * the table's fields at the same entries. Its arrays are agrl.Tensors, or
 * the arrays of a framework's importer (_sample_import). Frame tables run
 * on the CPU, CUDA and Vulkan; on Vulkan a batch cannot be handed out (no
 * block: UnsupportedError), as for ReplayBuffer. */
#include <stdio.h>

#include "agrl_py.h"
#include "base/agfile.h"
#include "base/base.h"

typedef struct agpy_frames {
  AGPY_ON_CTX;
  ag_frames *t; /* NULL once freed */
  ag_rng *rng;
  int n_fields;
  agpy_field fields[AGPY_MAX_FIELDS];
  int64_t h, w, c, capacity, n_envs, obs_size;
  int stack;
  ag_tensor *idx_stage; /* host indices on the device */
  ag_tensor *cols;      /* sample(out=)'s entries: a persistent column of at least B i64 */
} agpy_frames;

static const char WHO[] = "FrameReplayBuffer";

/* ---- lifetime ---- */

void agpy_frames_release(PyObject *self) {
  agpy_frames *f = (agpy_frames *)self;
  ag_tensor_free(f->idx_stage);
  ag_tensor_free(f->cols);
  f->idx_stage = f->cols = NULL;
  if (f->rng) ag_rng_free(f->rng);
  if (f->t) ag_frames_free(f->t);
  f->rng = NULL;
  f->t = NULL;
}

static ag_frames *fr_get(agpy_frames *f) {
  if (!f->t || !f->ctx || !f->ctx->ctx) {
    agpy_raisef(f->st, AG_ERR_FREED, "the frame replay buffer has been freed (or its context)");
    return NULL;
  }
  return f->t;
}

static void fr_dealloc(agpy_frames *f) {
  if (f->ctx) {
    agpy_lock(f->ctx);
    agpy_frames_release((PyObject *)f);
    agpy_ctx_drop_dep(f->ctx, (PyObject *)f);
    agpy_unlock(f->ctx);
    Py_DECREF(f->ctx);
  }
  agpy_fields_clear(f->fields, f->n_fields);
  agpy_obj_free((PyObject *)f);
}

/* Sets the object up over a made table (taking it). */
static int fr_attach(agpy_frames *f, agpy_ctx *c, ag_frames *t, uint64_t seed) {
  f->t = t;
  f->capacity = ag_replay_capacity(ag_frames_replay(t));
  f->obs_size = ag_frames_obs_size(t);
  ag_status s = ag_rng_create(c->ctx, seed, &f->rng);
  if (s || agpy_ctx_add_dep(c, (PyObject *)f)) {
    if (s) agpy_raise(f->st, s);
    agpy_frames_release((PyObject *)f);
    return -1;
  }
  f->ctx = (agpy_ctx *)Py_NewRef(c);
  return 0;
}

/* _Frames(ctx, height, width, channels, stack, capacity, n_envs, fields, storage=None, min_size=1, seed=0)
 * fields: a sequence of (name, shape tuple, dtype) */
static int fr_init(agpy_frames *f, PyObject *args, PyObject *kw) {
  PyObject *ctxo, *fields, *storage = Py_None;
  ag_frames_config cfg = {0};
  cfg.min_size = 1;
  uint64_t seed = 0;
  const agpy_arg spec[] = {{"ctx", "O", &ctxo},          {"height", "L", &cfg.height},
                           {"width", "L", &cfg.width},   {"channels", "L", &cfg.channels},
                           {"stack", "i", &cfg.stack},   {"capacity", "L", &cfg.capacity},
                           {"n_envs", "L", &cfg.n_envs}, {"fields", "O", &fields},
                           {"storage", "O", &storage},   {"min_size", "L", &cfg.min_size},
                           {"seed", "K", &seed}};
  if (agpy_parse_tuple(f->st, WHO, args, kw, 8, spec, 11)) return -1;
  if (f->ctx || f->n_fields) {
    PyErr_SetString(PyExc_RuntimeError, "FrameReplayBuffer.__init__ called twice");
    return -1;
  }
  agpy_ctx *c = agpy_ctx_check(f->st, ctxo, WHO);
  if (!c) return -1;
  ag_dtype st = AG_F32;
  if (storage != Py_None && agpy_dtype_parse(f->st, storage, &st, "FrameReplayBuffer: storage")) return -1;
  if (cfg.stack < 1) /* the C library's 0 (its default) is the Python default's business */
    return agpy_raisef(f->st, AG_ERR_INVALID_ARG, "FrameReplayBuffer: stack = %d is outside 1 .. %d",
                       cfg.stack, AG_FRAMES_MAX_STACK),
           -1;
  if (cfg.min_size < 1)
    return agpy_raisef(f->st, AG_ERR_INVALID_ARG, "FrameReplayBuffer: min_size = %lld must be at least 1",
                       (long long)cfg.min_size),
           -1;
  ag_field cf[AGPY_MAX_FIELDS];
  if (agpy_fields_parse(f->st, WHO, fields, f->fields, &f->n_fields, cf) || agpy_lock(c)) return -1;
  ag_ctx *ctx = agpy_ctx_get(c);
  ag_frames *t = NULL;
  int ret = -1;
  if (ctx) {
    ag_status s = ag_frames_create(ctx, &cfg, cf, f->n_fields, st, &t);
    if (s) {
      agpy_raise(f->st, s);
    } else {
      f->h = cfg.height, f->w = cfg.width, f->c = cfg.channels, f->stack = cfg.stack, f->n_envs = cfg.n_envs;
      ret = fr_attach(f, c, t, seed);
    }
  }
  agpy_unlock(c);
  return ret;
}

/* ---- add ---- */

/* The entries in a frames array: (N, h, w, c) or one frame (h, w, c), and
 * (N, h, w) or (h, w) for c = 1; -1 for another shape. */
static int64_t frame_count(const agpy_frames *f, const agpy_in *in) {
  agpy_field fr = {.n_inner = 3, .inner = {f->h, f->w, f->c}, .width = f->h * f->w * f->c};
  int64_t n = agpy_field_count(&fr, in);
  if (n < 0 && f->c == 1) {
    fr.n_inner = 2;
    n = agpy_field_count(&fr, in);
  }
  return n;
}

/* add(frames, first, fields=None, /, **arrays): N = steps * n_envs entries,
 * host arrays */
static PyObject *fr_add(agpy_frames *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  static const char *const names[2] = {"frames", "first"};
  PyObject *pos[2] = {NULL, NULL}, *val[AGPY_MAX_FIELDS];
  if (nargs > 3) {
    PyErr_Format(PyExc_TypeError,
                 "FrameReplayBuffer.add() takes frames, first and the fields (%zd positional given)", nargs);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < nargs && i < 2; i++) pos[i] = args[i];
  PyObject *dict = nargs == 3 ? args[2] : NULL;
  if (dict && kwnames && PyTuple_GET_SIZE(kwnames)) {
    PyErr_SetString(PyExc_TypeError,
                    "FrameReplayBuffer.add: pass the fields as keywords or one dict, not both");
    return NULL;
  }
  if (agpy_fields_collect(f->st, WHO, f->fields, f->n_fields, dict, args + nargs, kwnames, val, names, pos,
                          2))
    return NULL;
  for (int i = 0; i < 2; i++)
    if (!pos[i])
      return PyErr_Format(PyExc_TypeError, "FrameReplayBuffer.add() missing required argument '%s'",
                          names[i]);
  ag_frames *t = fr_get(f);
  if (!t) return NULL;
  agpy_in fin, first;
  agpy_fields_in a;
  void *fscratch = NULL, *first_scratch = NULL;
  int got = 0;
  PyObject *ret = NULL;
  memset(&a, 0, sizeof a);
  /* host arrays only (ctx NULL): ag_frames_add reads host memory */
  if (agpy_in_get(f->st, NULL, pos[0], &fin, "FrameReplayBuffer.add: frames")) goto done;
  got = 1;
  if (agpy_in_get(f->st, NULL, pos[1], &first, "FrameReplayBuffer.add: first")) goto done;
  got = 2;
  const int64_t n = frame_count(f, &fin);
  if (n < 0) {
    agpy_raisef(
        f->st, AG_ERR_SHAPE,
        "FrameReplayBuffer.add: frames must be (N, %lld, %lld, %lld) or one frame (%lld, %lld, %lld)%s",
        (long long)f->h, (long long)f->w, (long long)f->c, (long long)f->h, (long long)f->w, (long long)f->c,
        f->c == 1 ? ", the channel dimension optional" : "");
    goto done;
  }
  if (n % f->n_envs) {
    agpy_raisef(
        f->st, AG_ERR_SHAPE,
        "FrameReplayBuffer.add: frames has %lld entries, not a whole number of steps of n_envs = %lld",
        (long long)n, (long long)f->n_envs);
    goto done;
  }
  if (first.numel != n || first.ndim > 1) {
    agpy_raisef(f->st, AG_ERR_SHAPE,
                "FrameReplayBuffer.add: first has %lld flags of %d dimensions; give (%lld,)",
                (long long)first.numel, first.ndim, (long long)n);
    goto done;
  }
  if (agpy_fields_read(f->st, NULL, WHO, f->fields, f->n_fields, val, &a)) goto done;
  if (a.k != n) {
    agpy_raisef(f->st, AG_ERR_SHAPE,
                "FrameReplayBuffer.add: the fields have %lld transitions, frames %lld entries",
                (long long)a.k, (long long)n);
    goto done;
  }
  const uint8_t *fp = agpy_in_as(f->st, &fin, AG_U8, &fscratch, "FrameReplayBuffer.add: frames");
  const uint8_t *pf =
      fp ? agpy_in_as(f->st, &first, AG_U8, &first_scratch, "FrameReplayBuffer.add: first") : NULL;
  if (!pf) goto done;
  const int64_t steps = n / f->n_envs;
  ag_status s;
  if ((size_t)n * (size_t)(f->h * f->w * f->c) >= ((size_t)1 << 20)) {
    Py_BEGIN_ALLOW_THREADS s = ag_frames_add(t, fp, pf, a.ptr, steps);
    Py_END_ALLOW_THREADS
  } else {
    s = ag_frames_add(t, fp, pf, a.ptr, steps);
  }
  if (s)
    agpy_raise(f->st, s);
  else
    ret = Py_NewRef(Py_None);
done:
  agpy_fields_release(&a, NULL);
  free(fscratch);
  free(first_scratch);
  if (got > 0) agpy_in_release(&fin, NULL);
  if (got > 1) agpy_in_release(&first, NULL);
  return ret;
}

/* ---- batches ---- */

static int parse_obs_dtype(agpy_frames *f, PyObject *o, const char *fn, ag_dtype *out) {
  char what[64];
  PyOS_snprintf(what, sizeof what, "%s: dtype", fn);
  if (agpy_dtype_parse(f->st, o, out, what)) return -1;
  if (*out != AG_U8 && *out != AG_F32)
    return agpy_raisef(f->st, AG_ERR_INVALID_ARG,
                       "%s: dtype must be 'u8' (as stored) or 'f32' (v / 255), not %s", fn,
                       ag_dtype_name(*out)),
           -1;
  return 0;
}

static int check_batch(agpy_frames *f, int64_t B, const char *fn) {
  if (B < 1 || B > INT32_MAX)
    return agpy_raisef(f->st, AG_ERR_INVALID_ARG, "%s: batch_size = %lld is outside 1 .. 2^31-1", fn,
                       (long long)B),
           -1;
  return 0;
}

/* The batch of B transitions at device indices idx, or drawn (idx NULL):
 * obs and next_obs (B, stack*c, h, w) of odt, each field (B, *shape) in its
 * dtype, indices (B,) i64, in one block; agrl.Tensors, or importer's arrays
 * once `consumer` (has_stream) is ordered after the batch. */
static PyObject *fr_batch(agpy_frames *f, int64_t B, ag_dtype odt, const ag_tensor *idx, PyObject *importer,
                          void *consumer, int has_stream) {
  ag_ctx *ctx = f->ctx->ctx;
  const size_t stacks =
      2 * agpy_align((size_t)(B * f->obs_size) * ag_dtype_size(odt)) + agpy_align((size_t)B * 8);
  size_t rest = agpy_align((size_t)B * 8);
  for (int i = 0; i < f->n_fields; i++)
    rest += agpy_align((size_t)(B * f->fields[i].width) * ag_dtype_size(f->fields[i].dtype));
  const size_t slack = 4096; /* what the stacking call may take beyond its three outputs */
  ag_block *blk = NULL;
  ag_tensor *obs = NULL, *next = NULL, *cols = NULL;
  void *po = NULL, *pn = NULL;
  ag_status s = ag_block_create(ctx, stacks + slack + rest, &blk);
  if (!s) s = ag_ctx_use_block(ctx, blk);
  if (!s) {
    s = idx ? ag_frames_gather_dev(f->t, idx, odt, &obs, &next, NULL)
            : ag_frames_sample(f->t, f->rng, B, odt, &obs, &next, NULL, &cols);
    const size_t used = ag_ctx_block_used(ctx);
    ag_ctx_use_block(ctx, NULL);
    if (!s && used > stacks + slack) s = AG_ERR_OUT_OF_MEMORY; /* not reached: the stacks are what it makes */
    if (!s) s = ag_tensor_data(obs, &po, NULL);
    if (!s) s = ag_tensor_data(next, &pn, NULL);
    if (!s && !idx) idx = cols;
    /* the fields and the indices after the stacks */
    char *base = (char *)ag_block_data(blk) + agpy_align(used);
    ag_replay_dst dst[AGPY_MAX_FIELDS + 1];
    for (int i = 0; i < f->n_fields; i++) {
      dst[i] = (ag_replay_dst){i, base, f->fields[i].dtype, f->fields[i].width};
      base += agpy_align((size_t)(B * f->fields[i].width) * ag_dtype_size(f->fields[i].dtype));
    }
    dst[f->n_fields] = (ag_replay_dst){AG_REPLAY_DST_INDICES, base, AG_I64, 1};
    if (!s) s = ag_replay_gather_into(ag_frames_replay(f->t), idx, NULL, dst, f->n_fields + 1);
    ag_ctx_reset(ctx);
    if (!s && has_stream && ag_ctx_device(ctx) == AG_DEVICE_CUDA) s = ag_stream_wait_ctx(ctx, consumer);
    PyObject *out = s ? NULL : PyDict_New();
    const int64_t shape[3] = {f->stack * f->c, f->h, f->w};
    PyObject *v;
    if (out && (!(v = agpy_hand_out(f->ctx, blk, po, odt, B, f->obs_size, shape, 3, importer, consumer)) ||
                PyDict_SetItemString(out, "obs", v) < 0 || (Py_DECREF(v), 0)))
      Py_CLEAR(out);
    if (out && (!(v = agpy_hand_out(f->ctx, blk, pn, odt, B, f->obs_size, shape, 3, importer, consumer)) ||
                PyDict_SetItemString(out, "next_obs", v) < 0 || (Py_DECREF(v), 0)))
      Py_CLEAR(out);
    for (int i = 0; out && i <= f->n_fields; i++) {
      const agpy_field *fd = i < f->n_fields ? &f->fields[i] : NULL;
      v = agpy_hand_out(f->ctx, blk, dst[i].data, dst[i].dtype, B, fd ? fd->width : 1, fd ? fd->inner : NULL,
                        fd ? fd->n_inner : 0, importer, consumer);
      if (!v || PyDict_SetItem(out, fd ? fd->name : f->st->s_indices, v) < 0) Py_CLEAR(out);
      Py_XDECREF(v);
    }
    ag_block_release(blk, NULL);
    if (s) return agpy_raise(f->st, s);
    return out;
  }
  ag_block_release(blk, NULL);
  return agpy_raise(f->st, s);
}

/* The consumer's stream of an import: a native handle, or None. */
static int consumer_of(PyObject *stream, void **out) {
  *out = NULL;
  if (stream == Py_None) return 0;
  *out = PyLong_AsVoidPtr(stream);
  return PyErr_Occurred() ? -1 : 0;
}

/* ---- sample(out=...) ---- */

enum { OUT_MAX = AGPY_MAX_FIELDS + 3 }; /* obs, next_obs, the fields, indices */

/* Reads out[key] = v into a[k]: the stacks (B, stack*c, h, w) of odt, one
 * packed array each, or a field or the indices as destination dst of a
 * gather. */
static int out_entry(agpy_frames *f, PyObject *key, PyObject *v, int64_t B, ag_dtype odt, agpy_out *a,
                     ag_replay_dst *dst, int *is_stack) {
  agpy_state *st = f->st;
  const char *ks = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
  const int fi = agpy_field_index(f->fields, f->n_fields, key);
  *is_stack = ks && (!strcmp(ks, "obs") || !strcmp(ks, "next_obs"));
  if (!*is_stack && fi < 0 && !(ks && !strcmp(ks, "indices"))) {
    PyErr_Clear();
    return agpy_raisef(st, AG_ERR_INVALID_ARG,
                       "sample: out has %R, which is neither 'obs', 'next_obs', a field nor 'indices'", key),
           -1;
  }
  char what[96];
  PyOS_snprintf(what, sizeof what, "sample: out['%s']", ks);
  if (*is_stack) {
    const int64_t inner[3] = {f->stack * f->c, f->h, f->w};
    if (agpy_out_read(st, f->ctx->ctx, v, what, B, 3, inner, f->obs_size, a)) return -1;
    if (a->dtype != odt)
      return agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: the array is %s; dtype='%s' stacks are %s", what,
                         agpy_numpy_name(a->dtype), odt == AG_U8 ? "u8" : "f32", agpy_numpy_name(odt)),
             -1;
    if (B > 1 && a->ld != f->obs_size)
      return agpy_raisef(st, AG_ERR_SHAPE,
                         "%s: the stacks must be one contiguous array (stride %lld, not %lld)", what,
                         (long long)a->ld, (long long)f->obs_size),
             -1;
    return 0;
  }
  const agpy_field *fd = fi >= 0 ? &f->fields[fi] : NULL;
  if (agpy_out_read(st, f->ctx->ctx, v, what, B, fd ? fd->n_inner : 0, fd ? fd->inner : NULL,
                    fd ? fd->width : 1, a))
    return -1;
  if (!fd && a->dtype != AG_I32 && a->dtype != AG_I64)
    return agpy_raisef(st, AG_ERR_INVALID_ARG, "%s: the indices must be int32 or int64", what), -1;
  *dst = (ag_replay_dst){fd ? fi : AG_REPLAY_DST_INDICES, a->data, a->dtype, a->ld};
  return 0;
}

/* The entries' column, a view of B values of f->cols (made or remade when
 * shorter). */
static ag_status cols_view(agpy_frames *f, int64_t B, ag_tensor **out) {
  ag_ctx *ctx = f->ctx->ctx;
  if (f->cols && ag_tensor_rows(f->cols) < B) {
    ag_tensor_free(f->cols);
    f->cols = NULL;
  }
  void *p = NULL;
  ag_status s = f->cols ? AG_OK : ag_tensor_create(ctx, B, 1, AG_I64, NULL, &f->cols);
  if (!s) s = ag_tensor_data(f->cols, &p, NULL);
  return s ? s : ag_tensor_wrap(ctx, p, B, 1, B, AG_I64, out);
}

/* The batch written into the caller's arrays: the stacks by
 * ag_frames_sample_into, the fields and the indices by
 * ag_replay_gather_into at the same entries, between two hand-offs of the
 * arrays' stream. */
static PyObject *sample_out(agpy_frames *f, int64_t B, ag_dtype odt, PyObject *out, PyObject *stream) {
  agpy_state *st = f->st;
  ag_ctx *ctx = f->ctx->ctx;
  if (!PyDict_Check(out))
    return PyErr_Format(PyExc_TypeError, "sample: out must be a dict of arrays, not %.80s",
                        Py_TYPE(out)->tp_name);
  if (ag_ctx_device(ctx) == AG_DEVICE_VULKAN)
    return agpy_raisef(st, AG_ERR_UNSUPPORTED,
                       "sample: out= arrays must be in the context's memory, and no framework maps Vulkan's");
  if (PyDict_GET_SIZE(out) > OUT_MAX)
    return agpy_raisef(st, AG_ERR_INVALID_ARG, "sample: out has %zd arrays; a batch has at most %d keys",
                       PyDict_GET_SIZE(out), OUT_MAX);
  agpy_out a[OUT_MAX];
  ag_replay_dst dst[OUT_MAX];
  int n = 0, nd = 0, stacks[2] = {-1, -1}, framework = AGPY_FW_OTHER, dev_index = 0, sync = 0;
  PyObject *key, *v, *stream_fn = NULL, *ret = NULL;
  Py_ssize_t pos = 0;
  void *consumer = NULL;
  memset(a, 0, sizeof a);
  while (PyDict_Next(out, &pos, &key, &v)) {
    int is_stack = 0;
    const int r = out_entry(f, key, v, B, odt, &a[n], &dst[nd], &is_stack);
    n++;
    if (r) goto done;
    if (is_stack)
      stacks[strcmp(PyUnicode_AsUTF8(key), "obs") != 0] = n - 1;
    else
      nd++;
    if (a[n - 1].framework == AGPY_FW_TORCH || framework == AGPY_FW_OTHER) framework = a[n - 1].framework;
    dev_index = a[n - 1].dev_index;
  }
  if (stacks[0] < 0 || stacks[1] < 0) {
    agpy_raisef(st, AG_ERR_INVALID_ARG, "sample: out has no array for '%s'",
                stacks[0] < 0 ? "obs" : "next_obs");
    goto done;
  }
  for (int i = 0; i < f->n_fields; i++) {
    int have = 0;
    for (int j = 0; j < nd; j++) have |= dst[j].field == i;
    if (!have) {
      agpy_raisef(st, AG_ERR_INVALID_ARG, "sample: out has no array for field '%U'", f->fields[i].name);
      goto done;
    }
  }
  if (framework == AGPY_FW_CUPY) {
    PyObject *cp = PyImport_ImportModule("cupy.cuda");
    stream_fn = cp ? PyObject_GetAttrString(cp, "get_current_stream") : NULL;
    Py_XDECREF(cp);
    if (!stream_fn) goto done;
  }
  if (agpy_out_stream(st, ctx, framework, dev_index, stream_fn, stream, &consumer, &sync)) goto done;
  ag_tensor *to = NULL, *tn = NULL, *cols = NULL;
  const int64_t D = f->obs_size;
  ag_status s = sync ? ag_ctx_wait_stream(ctx, consumer) : AG_OK; /* the consumer is done with the arrays */
  if (!s) s = ag_tensor_wrap(ctx, a[stacks[0]].data, D, B, D, odt, &to);
  if (!s) s = ag_tensor_wrap(ctx, a[stacks[1]].data, D, B, D, odt, &tn);
  if (!s) s = cols_view(f, B, &cols);
  if (!s) s = ag_frames_sample_into(f->t, f->rng, to, tn, NULL, cols);
  if (!s && nd) s = ag_replay_gather_into(ag_frames_replay(f->t), cols, NULL, dst, nd);
  ag_ctx_reset(ctx);
  if (!s && sync) s = ag_stream_wait_ctx(ctx, consumer); /* and waits for this batch */
  if (s)
    agpy_raise(st, s);
  else
    ret = Py_NewRef(out);
done:
  for (int i = 0; i < n; i++) agpy_out_release(&a[i]);
  Py_XDECREF(stream_fn);
  return ret;
}

/* sample(batch_size, dtype="u8", out=None, stream=None) */
static PyObject *fr_sample(agpy_frames *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  int64_t B;
  PyObject *dto = NULL, *out = Py_None, *stream = Py_None;
  const agpy_arg spec[] = {
      {"batch_size", "L", &B}, {"dtype", "O", &dto}, {"out", "O", &out}, {"stream", "O", &stream}};
  if (agpy_parse(f->st, "sample", args, nargs, kwnames, 1, spec, 4)) return NULL;
  ag_dtype odt = AG_U8;
  if (!fr_get(f) || (dto && dto != Py_None && parse_obs_dtype(f, dto, "sample", &odt)) ||
      check_batch(f, B, "sample"))
    return NULL;
  if (out != Py_None) return sample_out(f, B, odt, out, stream);
  if (stream != Py_None)
    return agpy_raisef(f->st, AG_ERR_INVALID_ARG,
                       "sample: stream is taken with out= only (a result's consumer passes its stream to "
                       "__dlpack__)");
  return fr_batch(f, B, odt, NULL, NULL, NULL, 0);
}

/* _sample_import(batch_size, dtype, importer, stream=None) */
static PyObject *fr_sample_import(agpy_frames *f, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
  int64_t B;
  PyObject *dto, *importer, *stream = Py_None;
  const agpy_arg spec[] = {
      {"batch_size", "L", &B}, {"dtype", "O", &dto}, {"importer", "O", &importer}, {"stream", "O", &stream}};
  if (agpy_parse(f->st, "sample", args, nargs, kwnames, 3, spec, 4)) return NULL;
  ag_dtype odt;
  void *consumer;
  if (!fr_get(f) || parse_obs_dtype(f, dto, "sample", &odt) || check_batch(f, B, "sample") ||
      consumer_of(stream, &consumer))
    return NULL;
  return fr_batch(f, B, odt, NULL, importer, consumer, stream != Py_None);
}

/* Host indices must be transitions that may be sampled now. */
static int sampleable(void *obj, const int64_t *h, int64_t n, const char *fn) {
  agpy_frames *f = obj;
  for (int64_t j = 0; j < n; j++)
    if (!ag_frames_sampleable(f->t, h[j]))
      return agpy_raisef(f->st, AG_ERR_OUT_OF_RANGE,
                         "%s: indices[%lld] = %lld is not a transition that may be sampled now", fn,
                         (long long)j, (long long)h[j]),
             -1;
  return 0;
}

static PyObject *gather_common(agpy_frames *f, PyObject *io, PyObject *dto, PyObject *importer,
                               PyObject *stream) {
  ag_dtype odt = AG_U8;
  void *consumer;
  if (!fr_get(f) || (dto && dto != Py_None && parse_obs_dtype(f, dto, "gather", &odt)) ||
      consumer_of(stream, &consumer))
    return NULL;
  agpy_in in;
  void *scratch;
  ag_tensor *idx = NULL;
  ag_ctx *ctx = f->ctx->ctx;
  if (agpy_indices_get(f->st, ctx, io, &in, &scratch, &f->idx_stage, &idx, "gather", sampleable, f))
    return NULL;
  PyObject *out = fr_batch(f, in.numel, odt, idx, importer, consumer, stream != Py_None);
  free(scratch);
  agpy_in_release(&in, ctx);
  return out;
}

/* gather(indices, dtype="u8") */
static PyObject *fr_gather(agpy_frames *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *io, *dto = NULL;
  const agpy_arg spec[] = {{"indices", "O", &io}, {"dtype", "O", &dto}};
  if (agpy_parse(f->st, "gather", args, nargs, kwnames, 1, spec, 2)) return NULL;
  return gather_common(f, io, dto, NULL, Py_None);
}

/* _gather_import(indices, dtype, importer, stream=None) */
static PyObject *fr_gather_import(agpy_frames *f, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
  PyObject *io, *dto, *importer, *stream = Py_None;
  const agpy_arg spec[] = {
      {"indices", "O", &io}, {"dtype", "O", &dto}, {"importer", "O", &importer}, {"stream", "O", &stream}};
  if (agpy_parse(f->st, "gather", args, nargs, kwnames, 3, spec, 4)) return NULL;
  return gather_common(f, io, dto, importer, stream);
}

/* nstep(indices, n, gamma, reward="reward", terminated="terminated", truncated=None) */
static PyObject *fr_nstep(agpy_frames *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *io, *ro = NULL, *to = NULL, *uo = Py_None;
  int n;
  double gamma;
  const agpy_arg spec[] = {{"indices", "O", &io}, {"n", "i", &n},           {"gamma", "d", &gamma},
                           {"reward", "U", &ro},  {"terminated", "U", &to}, {"truncated", "?U", &uo}};
  if (agpy_parse(f->st, "nstep", args, nargs, kwnames, 3, spec, 6)) return NULL;
  const char *rn = ro ? PyUnicode_AsUTF8(ro) : "reward", *tn = to ? PyUnicode_AsUTF8(to) : "terminated";
  const char *un = uo != Py_None ? PyUnicode_AsUTF8(uo) : NULL;
  if (!rn || !tn || (uo != Py_None && !un) || !fr_get(f)) return NULL;
  agpy_in in;
  void *scratch;
  ag_tensor *idx = NULL;
  ag_ctx *ctx = f->ctx->ctx;
  if (agpy_indices_get(f->st, ctx, io, &in, &scratch, &f->idx_stage, &idx, "nstep", sampleable, f))
    return NULL;
  const int64_t B = in.numel;
  ag_block *blk = NULL;
  ag_tensor *ret = NULL, *disc = NULL, *last = NULL;
  PyObject *out = NULL;
  ag_status s = ag_block_create(ctx, 3 * agpy_align((size_t)B * 8) + 4096, &blk);
  if (!s) s = ag_ctx_use_block(ctx, blk);
  if (!s) {
    s = ag_frames_nstep(f->t, idx, n, (float)gamma, rn, tn, un, &ret, &disc, &last);
    ag_ctx_use_block(ctx, NULL);
  }
  if (!s) {
    static const char *const keys[3] = {"return", "discount", "last"};
    ag_tensor *const ts[3] = {ret, disc, last};
    out = PyDict_New();
    for (int i = 0; out && i < 3; i++) {
      PyObject *v = agpy_tensor_of(f->ctx, blk, ts[i], NULL, 0);
      if (!v || PyDict_SetItemString(out, keys[i], v) < 0) Py_CLEAR(out);
      Py_XDECREF(v);
    }
  } else {
    agpy_raise(f->st, s);
  }
  ag_ctx_reset(ctx);
  ag_block_release(blk, NULL);
  free(scratch);
  agpy_in_release(&in, ctx);
  return out;
}

/* ---- the table ---- */

static PyObject *fr_sampleable(agpy_frames *f, PyObject *arg) {
  int64_t x;
  if (!fr_get(f) || agpy_convert(f->st, "sampleable", "index", arg, "L", &x)) return NULL;
  return PyBool_FromLong(ag_frames_sampleable(f->t, x));
}

static PyObject *fr_free(agpy_frames *f, PyObject *a) {
  (void)a;
  agpy_frames_release((PyObject *)f);
  Py_RETURN_NONE;
}

static PyObject *fr_exit(agpy_frames *f, PyObject *a) {
  (void)a;
  agpy_frames_release((PyObject *)f);
  Py_RETURN_FALSE;
}

static Py_ssize_t fr_len(agpy_frames *f) {
  if (agpy_lock(f->ctx)) return -1;
  Py_ssize_t n = fr_get(f) ? (Py_ssize_t)ag_frames_count(f->t) : -1;
  agpy_unlock(f->ctx);
  return n;
}

/* The getters of the table's counts: (void *)0 count, 1 size, 2 position. */
static PyObject *fr_get_count(agpy_frames *f, void *which) {
  if (!fr_get(f)) return NULL;
  const intptr_t w = (intptr_t)which;
  return PyLong_FromLongLong(w == 0   ? ag_frames_count(f->t)
                             : w == 1 ? ag_frames_size(f->t)
                                      : ag_frames_position(f->t));
}

/* The configuration: (void *)0 height, 1 width, 2 channels, 3 stack, 4 capacity, 5 n_envs. */
static PyObject *fr_get_config(agpy_frames *f, void *which) {
  const int64_t v[6] = {f->h, f->w, f->c, f->stack, f->capacity, f->n_envs};
  return PyLong_FromLongLong(v[(intptr_t)which]);
}

static PyObject *fr_save(agpy_frames *f, PyObject *arg) {
  ag_frames *t = fr_get(f);
  if (!t) return NULL;
  PyObject *path = NULL;
  if (agpy_convert(f->st, "save", "path", arg, "F", &path)) return NULL;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_frames_save(t, PyBytes_AS_STRING(path));
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (s) return agpy_raise(f->st, s);
  Py_RETURN_NONE;
}

/* A loaded table's frame, stack and copies, from the keys of its file (which
 * ag_frames_load has just checked). */
static int frame_config(agpy_state *st, const char *path, agpy_frames *f) {
  static const char fn[] = "FrameReplayBuffer.load";
  FILE *fp = fopen(path, "rb");
  if (!fp) return agpy_raisef(st, AG_ERR_IO, "%s: %s cannot be opened again", fn, path), -1;
  ag__agf a;
  int64_t v[5] = {0};
  uint64_t left = 0;
  ag__agf_init(&a);
  ag_status s = ag__stream_left(fp, fn, path, "a frame table", &left);
  if (!s) s = ag__agf_read_head(&a, fp, left, fn, path);
  static const char *const keys[5] = {"frames.height", "frames.width", "frames.channels", "frames.stack",
                                      "frames.n_envs"};
  for (int i = 0; i < 5 && !s; i++) s = ag__agf_get_i64(&a, keys[i], 1, INT64_MAX, &v[i], fn, path);
  ag__agf_free(&a);
  fclose(fp);
  if (s) return agpy_raise(st, s), -1;
  f->h = v[0], f->w = v[1], f->c = v[2], f->stack = (int)v[3], f->n_envs = v[4];
  return 0;
}

/* _load(ctx, path, seed=0): a new object of the class over the table of the file */
static PyObject *fr_load(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  agpy_state *st = agpy_state_of_type((PyTypeObject *)cls);
  if (!st) return NULL;
  PyObject *ctxo, *path = NULL;
  uint64_t seed = 0;
  const agpy_arg spec[] = {{"ctx", "O", &ctxo}, {"path", "F", &path}, {"seed", "K", &seed}};
  if (agpy_parse(st, "FrameReplayBuffer.load", args, nargs, kwnames, 2, spec, 3)) return NULL;
  agpy_ctx *c = agpy_ctx_check(st, ctxo, "FrameReplayBuffer.load");
  if (!c || agpy_lock(c)) {
    Py_DECREF(path);
    return NULL;
  }
  agpy_frames *f = NULL;
  ag_ctx *ctx = agpy_ctx_get(c);
  ag_frames *t = NULL;
  ag_status s = AG_OK;
  if (ctx) {
    Py_BEGIN_ALLOW_THREADS s = ag_frames_load(ctx, PyBytes_AS_STRING(path), &t);
    Py_END_ALLOW_THREADS
  }
  if (!ctx) {
  } else if (s) {
    agpy_raise(st, s);
  } else if (!(f = (agpy_frames *)agpy_obj_new((PyTypeObject *)cls, NULL, NULL))) {
    ag_frames_free(t);
  } else if (agpy_fields_of_replay(st, WHO, ag_frames_replay(t), f->fields, &f->n_fields)) {
    ag_frames_free(t);
    Py_CLEAR(f);
  } else if (frame_config(st, PyBytes_AS_STRING(path), f)) {
    ag_frames_free(t);
    Py_CLEAR(f);
  } else if (fr_attach(f, c, t, seed)) {
    Py_CLEAR(f);
  }
  Py_DECREF(path);
  agpy_unlock(c);
  return (PyObject *)f;
}

static PyObject *fr_fields(agpy_frames *f, PyObject *a) {
  (void)a;
  return agpy_fields_list(f->fields, f->n_fields);
}

/* _set_shape(i, shape): the shape of field i's values (multiplying to its width) */
static PyObject *fr_set_shape(agpy_frames *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  int i;
  PyObject *shape;
  const agpy_arg spec[] = {{"i", "i", &i}, {"shape", "O", &shape}};
  if (agpy_parse(f->st, "_set_shape", args, nargs, kwnames, 2, spec, 2) ||
      agpy_field_set_shape(f->st, f->fields, f->n_fields, i, shape))
    return NULL;
  Py_RETURN_NONE;
}

AGPY_WRAP_FAST(agpy_frames, fr_add)
AGPY_WRAP_FAST(agpy_frames, fr_sample)
AGPY_WRAP_FAST(agpy_frames, fr_sample_import)
AGPY_WRAP_FAST(agpy_frames, fr_gather)
AGPY_WRAP_FAST(agpy_frames, fr_gather_import)
AGPY_WRAP_FAST(agpy_frames, fr_nstep)
AGPY_WRAP_FAST(agpy_frames, fr_set_shape)
AGPY_WRAP_O(agpy_frames, fr_sampleable)
AGPY_WRAP_O(agpy_frames, fr_free)
AGPY_WRAP_O(agpy_frames, fr_exit)
AGPY_WRAP_O(agpy_frames, fr_save)
AGPY_WRAP_O(agpy_frames, fr_fields)
AGPY_WRAP_GET(agpy_frames, fr_get_count)

static PyMethodDef fr_methods[] = {
    AGPY_M("add", fr_add, AGPY_FAST,
           "add($self, frames, first, fields=None, /, **arrays)\n--\n\n"
           "Appends N = steps * n_envs entries (step by step, copy by copy): frames (N, h, w, c) uint8 (one "
           "frame (h, w, c) when n_envs is 1), first (N,) flags (the frame is an episode's first "
           "observation), and each field (N, *shape), as keywords or one dict; host arrays."),
    AGPY_M("sample", fr_sample, AGPY_FAST,
           "sample($self, /, batch_size, dtype='u8', out=None, stream=None)\n--\n\n"
           "B transitions drawn uniformly on the device from those that may be sampled: a dict of "
           "agrl.Tensor, 'obs' and 'next_obs' (B, stack*c, h, w) of dtype ('u8' as stored, 'f32' v / 255), "
           "each field (B, *shape) in the dtype it was added with, 'indices' (B,) int64 (the entries). "
           "With out= (a dict of the caller's arrays in the context's memory: 'obs' and 'next_obs' of "
           "dtype, contiguous, every field in any dtype agrl writes, optionally 'indices' int32 or int64), "
           "the batch is written into them in place and `out` is returned; on CUDA between two hand-offs "
           "of `stream` (None: the arrays' framework's current stream; -1: none)."),
    AGPY_M("_sample_import", fr_sample_import, AGPY_FAST,
           "_sample_import($self, /, batch_size, dtype, importer, stream=None)\n--\n\n"
           "sample's batch, each array made by importer(capsule) once `stream` waits for it."),
    AGPY_M("gather", fr_gather, AGPY_FAST,
           "gather($self, /, indices, dtype='u8')\n--\n\n"
           "The transitions at `indices` (host indices: each one that may be sampled now; device indices are "
           "clamped to the table), as sample's batch."),
    AGPY_M("_gather_import", fr_gather_import, AGPY_FAST,
           "_gather_import($self, /, indices, dtype, importer, stream=None)\n--\n\n"
           "gather's batch made by importer(capsule), as _sample_import makes sample's."),
    AGPY_M(
        "nstep", fr_nstep, AGPY_FAST,
        "nstep($self, /, indices, n, gamma, reward='reward', terminated='terminated', truncated=None)\n--\n\n"
        "The n-step returns of the transitions at `indices` over the fields `reward`, `terminated` and "
        "`truncated` (each of width 1; truncated None: none): a dict of agrl.Tensor, 'return' and "
        "'discount' (B,) float32, 'last' (B,) int64, the entry whose next_obs the target bootstraps "
        "from (gather(last) gives it)."),
    AGPY_M(
        "sampleable", fr_sampleable, METH_O,
        "sampleable($self, index, /)\n--\n\nWhether entry `index` is a transition that may be sampled now."),
    AGPY_M("free", fr_free, METH_NOARGS,
           "free($self, /)\n--\n\nFrees the table; later calls raise FreedError."),
    {"__enter__", agpy_enter, METH_NOARGS, "__enter__($self, /)\n--\n\n"},
    AGPY_M("__exit__", fr_exit, METH_VARARGS, "__exit__($self, *exc_info)\n--\n\nFrees the table."),
    AGPY_M(
        "save", fr_save, METH_O,
        "save($self, path, /)\n--\n\nThe table (frames, first flags, fields, ring) in agrl's frames format."),
    {"_load", (PyCFunction)(void (*)(void))fr_load, AGPY_FAST | METH_CLASS,
     "_load($type, /, ctx, path, seed=0)\n--\n\n"},
    AGPY_M("_fields", fr_fields, METH_NOARGS, "_fields($self, /)\n--\n\n"),
    AGPY_M("_set_shape", fr_set_shape, AGPY_FAST, "_set_shape($self, /, i, shape)\n--\n\n"),
    {NULL, NULL, 0, NULL},
};

#define FR_COUNT(name, i, doc) \
  { name, fr_get_count_w, NULL, doc, (void *)(intptr_t)(i) }
#define FR_CONFIG(name, i, doc) \
  { name, (getter)fr_get_config, NULL, doc, (void *)(intptr_t)(i) }

static PyGetSetDef fr_getset[] = {
    FR_COUNT("count", 0, "transitions that may be sampled now"),
    FR_COUNT("size", 1, "entries held (0 .. capacity)"),
    FR_COUNT("position", 2, "the slot the next entry goes to"),
    FR_CONFIG("height", 0, "a frame's height"),
    FR_CONFIG("width", 1, "a frame's width"),
    FR_CONFIG("channels", 2, "a frame's channels"),
    FR_CONFIG("stack", 3, "frames in a stacked observation"),
    FR_CONFIG("capacity", 4, "entries (frames) the ring holds"),
    FR_CONFIG("n_envs", 5, "environment copies written interleaved"),
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot fr_slots[] = {
    {Py_tp_new, agpy_obj_new},
    {Py_tp_init, fr_init},
    {Py_tp_dealloc, fr_dealloc},
    {Py_sq_length, fr_len},
    {Py_tp_methods, fr_methods},
    {Py_tp_getset, fr_getset},
    {Py_tp_doc,
     "_Frames(ctx, height, width, channels, stack, capacity, n_envs, fields, storage=None, min_size=1, "
     "seed=0)\n--\n\nThe C side of agrl.FrameReplayBuffer."},
    {0, NULL},
};

PyType_Spec agpy_frames_spec = {"agrl._Frames", sizeof(agpy_frames), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, fr_slots};
