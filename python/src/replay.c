/* replay.c — the C side of agrl.ReplayBuffer: named fields over one table,
 * uniform or prioritized sampling on the device.
 *
 * A sample comes out in one of two ways:
 *   - sample(B): each field in a block of its own (B, *shape) in the dtype
 *     it was added with, indices i64, weights f32, as agrl.Tensors that
 *     share the block (DLPack hands them to any framework);
 *   - sample(B, out=arrays): written into the caller's arrays (torch, CuPy,
 *     numpy on the CPU ...), which are read once and remembered with a
 *     recording of the draw and the gather made for them, so that a call
 *     is one replay between two stream hand-offs: the consumer holds the
 *     batch when the call returns, with no import on its side.
 * On a Vulkan context the batch is gathered on the device and copied to
 * host memory (Vulkan memory is agrl's own: no framework maps it). */
#include "agrl_py.h"

#define AGPY_MAX_DST (AGPY_MAX_FIELDS + 2) /* the fields, indices, weights */
#define AGPY_OUT_SLOTS 4                   /* out= dicts remembered */
#define AGPY_BLOCK_SLOTS 4                 /* blocks whose draw and gather are recorded */
#define AGPY_BLOCK_SEEN 8                  /* blocks remembered before one is recorded */

struct agpy_replay;

/* One remembered out= dict: its arrays as read, and the recorded step. */
typedef struct agpy_outset {
  struct agpy_replay *owner;
  PyObject *dict; /* strong; NULL: a free slot */
  int64_t B;
  int n;
  PyObject *vals[AGPY_MAX_DST]; /* strong */
  void *managed[AGPY_MAX_DST];  /* DLPack imports, deleted with the slot */
  int versioned[AGPY_MAX_DST];
  ag_replay_dst dst[AGPY_MAX_DST];
  int framework, dev_index;
  ag_device_kind kind; /* the context's device when the arrays were read */
  int ctx_index;
  PyObject *stream_fn; /* CuPy: cupy.cuda.get_current_stream (strong) */
  ag_capture *cap;
  uint64_t used;
} agpy_outset;

typedef struct agpy_replay {
  AGPY_ON_CTX;
  ag_replay *r; /* NULL once freed */
  ag_per *per;
  ag_rng *rng;
  int n_fields;
  agpy_field fields[AGPY_MAX_FIELDS];
  int64_t rows;
  double beta;
  ag_tensor *beta_dev; /* beta read by recorded prioritized draws */
  float beta_dev_value;
  agpy_outset outs[AGPY_OUT_SLOTS];
  /* batches handed to a framework as new arrays: the pool gives the same few
   * blocks back again and again, so a block seen before gets the draw and
   * gather into it recorded, and later batches into it are one replay */
  agpy_outset blocks[AGPY_BLOCK_SLOTS];
  void *seen[AGPY_BLOCK_SEEN];
  int seen_at;
  uint64_t block_records, block_replays;
  uint64_t clock;
  ag_tensor *stage;     /* Vulkan: the batch on the device before its copy */
  ag_tensor *idx_stage; /* gather: host indices on the device */
  ag_ctx *host;         /* Vulkan: host blocks for the copies */
} agpy_replay;

/* ---- lifetime ---- */

static void out_clear(agpy_outset *o, ag_ctx *ctx) {
  if (o->cap) {
    ag_capture_free(o->cap); /* waits for the queue: no write into the arrays is pending after */
    o->cap = NULL;
  } else if (o->dict && ctx) {
    ag_ctx_sync(ctx);
  }
  for (int i = 0; i < o->n; i++) {
    agpy_dlpack_release(o->managed[i], o->versioned[i]);
    o->managed[i] = NULL;
    Py_CLEAR(o->vals[i]);
  }
  Py_CLEAR(o->stream_fn);
  Py_CLEAR(o->dict);
  o->n = 0;
}

void agpy_replay_release(PyObject *self) {
  agpy_replay *r = (agpy_replay *)self;
  ag_ctx *ctx = r->ctx ? r->ctx->ctx : NULL;
  for (int i = 0; i < AGPY_OUT_SLOTS; i++) out_clear(&r->outs[i], ctx);
  for (int i = 0; i < AGPY_BLOCK_SLOTS; i++) out_clear(&r->blocks[i], ctx);
  ag_tensor_free(r->beta_dev);
  ag_tensor_free(r->stage);
  ag_tensor_free(r->idx_stage);
  r->beta_dev = r->stage = r->idx_stage = NULL;
  if (r->rng) ag_rng_free(r->rng);
  if (r->r) ag_replay_free(r->r); /* and its sampler */
  if (r->host) ag_ctx_free(r->host);
  r->rng = NULL;
  r->r = NULL;
  r->per = NULL;
  r->host = NULL;
}

static ag_replay *rp_get(agpy_replay *r) {
  if (!r->r || !r->ctx || !r->ctx->ctx) {
    agpy_raisef(r->st, AG_ERR_FREED, "the replay buffer has been freed (or its context)");
    return NULL;
  }
  return r->r;
}

static void rp_dealloc(agpy_replay *r) {
  if (r->ctx) {
    agpy_lock(r->ctx);
    agpy_replay_release((PyObject *)r);
    agpy_ctx_drop_dep(r->ctx, (PyObject *)r);
    agpy_unlock(r->ctx);
    Py_DECREF(r->ctx);
  }
  agpy_fields_clear(r->fields, r->n_fields);
  agpy_obj_free((PyObject *)r);
}

/* Sets the object up over a made table (taking it): the fields' layout
 * (names and shapes given, or each (width,)), the sampler, the stream. */
static int rp_attach(agpy_replay *r, agpy_ctx *c, ag_replay *rep, uint64_t seed, double beta) {
  r->r = rep;
  r->per = ag_replay_per(rep);
  r->rows = ag_replay_rows(rep);
  r->beta = beta;
  ag_status s = ag_rng_create(c->ctx, seed, &r->rng);
  if (s || agpy_ctx_add_dep(c, (PyObject *)r)) {
    if (s) agpy_raise(r->st, s);
    agpy_replay_release((PyObject *)r);
    return -1;
  }
  r->ctx = (agpy_ctx *)Py_NewRef(c);
  return 0;
}

/* _Replay(ctx, capacity, fields, storage=None, min_size=1, prioritized=False, alpha=0.6, beta=0.4, seed=0)
 * fields: a sequence of (name, shape tuple, dtype) */
static int rp_init(agpy_replay *r, PyObject *args, PyObject *kw) {
  PyObject *ctxo, *fields, *storage = Py_None;
  int64_t cap, min_size = 1;
  uint64_t seed = 0;
  int prioritized = 0;
  double alpha = 0.6, beta = 0.4;
  const agpy_arg spec[] = {
      {"ctx", "O", &ctxo},        {"capacity", "L", &cap},      {"fields", "O", &fields},
      {"storage", "O", &storage}, {"min_size", "L", &min_size}, {"prioritized", "p", &prioritized},
      {"alpha", "d", &alpha},     {"beta", "d", &beta},         {"seed", "K", &seed}};
  if (agpy_parse_tuple(r->st, "ReplayBuffer", args, kw, 3, spec, 9)) return -1;
  if (r->ctx || r->n_fields) {
    PyErr_SetString(PyExc_RuntimeError, "ReplayBuffer.__init__ called twice");
    return -1;
  }
  agpy_ctx *c = agpy_ctx_check(r->st, ctxo, "ReplayBuffer");
  if (!c) return -1;
  ag_dtype st = AG_F32;
  if (storage != Py_None && agpy_dtype_parse(r->st, storage, &st, "ReplayBuffer: storage")) return -1;
  if (!(beta >= 0.0 && beta <= 1.0)) { /* kept for later draws: no C call sees it now */
    char num[32];
    PyOS_snprintf(num, sizeof num, "%g", beta);
    agpy_raisef(r->st, AG_ERR_INVALID_ARG, "ReplayBuffer: beta = %s is outside [0, 1]", num);
    return -1;
  }
  /* the sampler's limits before the table is made (nothing allocated when refused) */
  ag_status s = prioritized ? ag_per_validate(cap, (float)alpha) : AG_OK;
  if (s) {
    agpy_raise(r->st, s);
    return -1;
  }
  ag_field cf[AGPY_MAX_FIELDS];
  if (agpy_fields_parse(r->st, "ReplayBuffer", fields, r->fields, &r->n_fields, cf) || agpy_lock(c))
    return -1;
  ag_ctx *ctx = agpy_ctx_get(c);
  ag_replay *rep = NULL;
  int ret = -1;
  if (ctx) {
    s = ag_replay_create(ctx, cf, r->n_fields, cap, st, min_size, &rep);
    ag_per *per = NULL;
    if (!s && prioritized) s = ag_per_create(rep, (float)alpha, &per);
    if (s) {
      agpy_raise(r->st, s);
      ag_replay_free(rep);
    } else {
      ret = rp_attach(r, c, rep, seed, beta);
    }
  }
  agpy_unlock(c);
  return ret;
}

/* ---- add ---- */

static int field_of(const agpy_replay *r, PyObject *key) {
  return agpy_field_index(r->fields, r->n_fields, key);
}

/* add(**fields) or add(fields_dict): one transition or a batch, host or device arrays */
static PyObject *rp_add(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  const int n = r->n_fields;
  PyObject *val[AGPY_MAX_FIELDS];
  Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs > 1 || (nargs == 1 && nk)) {
    PyErr_SetString(PyExc_TypeError, "ReplayBuffer.add: pass the fields as keywords (or one dict)");
    return NULL;
  }
  if (agpy_fields_collect(r->st, "ReplayBuffer", r->fields, n, nargs == 1 ? args[0] : NULL, args, kwnames,
                          val, NULL, NULL, 0))
    return NULL;
  ag_ctx *ctx = r->ctx->ctx;
  agpy_fields_in a;
  PyObject *ret = NULL;
  if (agpy_fields_read(r->st, ctx, "ReplayBuffer", r->fields, n, val, &a)) goto done;
  const int64_t k = a.k;
  ag_status s = AG_OK;
  if (a.device) {
    ag_tensor *t[AGPY_MAX_FIELDS];
    if (agpy_in_order(r->st, ctx, a.in, n)) goto done;
    for (int i = 0; i < n && !s && k > 0; i++)
      s = ag_tensor_wrap(ctx, a.in[i].data, r->fields[i].width, k, r->fields[i].width,
                         (ag_dtype)agpy_in_agdtype(&a.in[i]), &t[i]);
    if (!s) s = ag_replay_add_dev(rep, t, k);
    ag_ctx_reset(ctx);
  } else if ((size_t)(k * r->rows) * 4 >= ((size_t)1 << 20)) {
    Py_BEGIN_ALLOW_THREADS s = ag_replay_add(rep, a.ptr, k);
    Py_END_ALLOW_THREADS
  } else {
    s = ag_replay_add(rep, a.ptr, k);
  }
  if (s)
    agpy_raise(r->st, s);
  else
    ret = Py_NewRef(Py_None);
done:
  agpy_fields_release(&a, ctx);
  return ret;
}

/* ---- sample ---- */

static ag_dtype idx_dtype(const agpy_replay *r) {
  return ag_replay_capacity(r->r) > INT32_MAX ? AG_I64 : AG_I32;
}

/* The draw of B indices (and, prioritized, their weights): temporaries. */
static ag_status draw(agpy_replay *r, int64_t B, float beta, ag_tensor *beta_dev, ag_tensor **idx,
                      ag_tensor **w) {
  *w = NULL;
  if (r->per)
    return beta_dev ? ag_per_sample_dev(r->per, r->rng, B, beta_dev, idx, w)
                    : ag_per_sample(r->per, r->rng, B, beta, idx, w);
  return ag_randint_dev(r->rng, ag_replay_size_tensor(r->r), B, idx_dtype(r), idx);
}

/* The default destinations: each field packed (B, width) in its dtype,
 * then the indices (i64) and the weights (f32), at offsets from 0; the
 * bytes they take. */
static size_t default_layout(const agpy_replay *r, int64_t B, ag_replay_dst *dst, size_t *off, int *n) {
  size_t at = 0;
  int k = 0;
  for (int i = 0; i < r->n_fields; i++, k++) {
    const agpy_field *f = &r->fields[i];
    dst[k] = (ag_replay_dst){i, NULL, f->dtype, f->width};
    off[k] = at;
    at += agpy_align((size_t)(B * f->width) * ag_dtype_size(f->dtype));
  }
  dst[k] = (ag_replay_dst){AG_REPLAY_DST_INDICES, NULL, AG_I64, 1};
  off[k++] = at;
  at += agpy_align((size_t)B * 8);
  if (r->per) {
    dst[k] = (ag_replay_dst){AG_REPLAY_DST_WEIGHTS, NULL, AG_F32, 1};
    off[k++] = at;
    at += agpy_align((size_t)B * 4);
  }
  *n = k;
  return at;
}

/* The batch as agrl.Tensors over blk's memory at base + off[k]. */
static PyObject *batch_dict(agpy_replay *r, ag_block *blk, char *base, const ag_replay_dst *dst,
                            const size_t *off, int n, int64_t B) {
  PyObject *out = PyDict_New();
  for (int k = 0; out && k < n; k++) {
    PyObject *t, *key;
    if (dst[k].field >= 0) {
      const agpy_field *f = &r->fields[dst[k].field];
      t = agpy_tensor_new(r->ctx, blk, base + off[k], f->dtype, f->width, B, f->width, f->inner, f->n_inner);
      key = f->name;
    } else {
      t = agpy_tensor_new(r->ctx, blk, base + off[k], dst[k].dtype, 1, B, 1, NULL, 0);
      key = dst[k].field == AG_REPLAY_DST_INDICES ? r->st->s_indices : r->st->s_weights;
    }
    if (!t || PyDict_SetItem(out, key, t) < 0) Py_CLEAR(out);
    Py_XDECREF(t);
  }
  return out;
}

/* sample(B) on a CUDA or CPU context: a block of the context's device. */
static PyObject *sample_block(agpy_replay *r, int64_t B, double beta) {
  ag_ctx *ctx = r->ctx->ctx;
  ag_replay_dst dst[AGPY_MAX_DST];
  size_t off[AGPY_MAX_DST];
  int n;
  size_t need = default_layout(r, B, dst, off, &n);
  ag_block *blk;
  ag_status s = ag_block_create(ctx, need, &blk);
  if (s) return agpy_raise(r->st, s);
  char *base = ag_block_data(blk);
  for (int k = 0; k < n; k++) dst[k].data = base + off[k];
  ag_tensor *idx, *w;
  s = draw(r, B, (float)beta, NULL, &idx, &w);
  if (!s) s = ag_replay_gather_into(r->r, idx, w, dst, n);
  ag_ctx_reset(ctx);
  PyObject *out = s ? agpy_raise(r->st, s) : batch_dict(r, blk, base, dst, off, n, B);
  ag_block_release(blk, NULL);
  return out;
}

/* Vulkan: the device staging area a batch of `need` bytes is gathered
 * into (its address in *base), and the host block it is copied to. */
static ag_status host_stage(agpy_replay *r, size_t need, char **base, ag_block **blk) {
  ag_ctx *ctx = r->ctx->ctx;
  ag_status s = AG_OK;
  if (!r->host) s = ag_ctx_create(&r->host, AG_DEVICE_CPU, 0);
  if (!s && (!r->stage || (size_t)ag_tensor_rows(r->stage) < need)) {
    ag_tensor *t = NULL;
    s = ag_tensor_create(ctx, (int64_t)need, 1, AG_U8, NULL, &t);
    if (!s) {
      ag_tensor_free(r->stage);
      r->stage = t;
    }
  }
  void *dev = NULL;
  if (!s) s = ag_tensor_data(r->stage, &dev, NULL);
  if (!s) s = ag_block_create(r->host, need, blk);
  *base = dev;
  return s;
}

/* Vulkan: the staging area copied into the host block (one download); the
 * destinations then point into the block. */
static ag_status host_copy(agpy_replay *r, size_t need, ag_block *blk, ag_replay_dst *dst, int n) {
  ag_ctx *ctx = r->ctx->ctx;
  void *dev = NULL, *host = ag_block_data(blk);
  ag_tensor *view = NULL;
  ag_status s = ag_tensor_data(r->stage, &dev, NULL);
  if (!s) s = ag_tensor_wrap(ctx, dev, (int64_t)need, 1, (int64_t)need, AG_U8, &view);
  if (!s) {
    Py_BEGIN_ALLOW_THREADS s = ag_tensor_read(view, host, need);
    Py_END_ALLOW_THREADS
  }
  for (int k = 0; k < n; k++) dst[k].data = (char *)host + ((char *)dst[k].data - (char *)dev);
  return s;
}

/* sample(B) on a Vulkan context: gathered into a device staging tensor,
 * then copied into a host block. */
static PyObject *sample_host(agpy_replay *r, int64_t B, double beta) {
  ag_ctx *ctx = r->ctx->ctx;
  ag_replay_dst dst[AGPY_MAX_DST];
  size_t off[AGPY_MAX_DST];
  int n;
  size_t need = default_layout(r, B, dst, off, &n);
  char *base = NULL;
  ag_block *blk = NULL;
  ag_status s = host_stage(r, need, &base, &blk);
  for (int k = 0; !s && k < n; k++) dst[k].data = base + off[k];
  ag_tensor *idx, *w;
  if (!s) s = draw(r, B, (float)beta, NULL, &idx, &w);
  if (!s) s = ag_replay_gather_into(r->r, idx, w, dst, n);
  if (!s) s = host_copy(r, need, blk, dst, n);
  ag_ctx_reset(ctx);
  PyObject *out = s ? agpy_raise(r->st, s) : batch_dict(r, blk, ag_block_data(blk), dst, off, n, B);
  ag_block_release(blk, NULL);
  return out;
}

/* The packed layout of a batch: the destinations (fields, indices of
 * `index_dt`, weights when prioritized) grouped by dtype, in order of first
 * appearance, each group a [B, width] array of its own whose members are
 * consecutive columns. group[k]: destination k's group; col[k]: its first
 * column there; the groups' dtypes and widths. */
typedef struct packed_layout {
  int n, n_groups;
  ag_replay_dst dst[AGPY_MAX_DST];
  int group[AGPY_MAX_DST];
  int64_t col[AGPY_MAX_DST];
  ag_dtype gdt[AGPY_MAX_DST];
  int64_t gwidth[AGPY_MAX_DST];
  /* the bytes layout: every destination in one row of row_bytes (a
   * multiple of 8), destination k from byte boff[k], aligned to its dtype */
  int64_t boff[AGPY_MAX_DST], row_bytes;
} packed_layout;

static void packed_of(const agpy_replay *r, ag_dtype index_dt, int narrow, packed_layout *L) {
  size_t off[AGPY_MAX_DST];
  default_layout(r, 1, L->dst, off, &L->n);
  L->n_groups = 0;
  for (int k = 0; k < L->n; k++) {
    if (L->dst[k].field == AG_REPLAY_DST_INDICES) L->dst[k].dtype = index_dt;
    if (narrow && L->dst[k].dtype == AG_I64) L->dst[k].dtype = AG_I32;
    const ag_dtype dt = L->dst[k].dtype;
    const int64_t w = L->dst[k].field >= 0 ? r->fields[L->dst[k].field].width : 1;
    int g = 0;
    while (g < L->n_groups && L->gdt[g] != dt) g++;
    if (g == L->n_groups) L->gdt[L->n_groups] = dt, L->gwidth[L->n_groups++] = 0;
    L->group[k] = g;
    L->col[k] = L->gwidth[g];
    L->gwidth[g] += w;
  }
  int64_t at = 0;
  for (int k = 0; k < L->n; k++) {
    const int64_t es = (int64_t)ag_dtype_size(L->dst[k].dtype);
    const int64_t w = L->dst[k].field >= 0 ? r->fields[L->dst[k].field].width : 1;
    at = (at + es - 1) / es * es;
    L->boff[k] = at;
    at += w * es;
  }
  L->row_bytes = (at + 7) / 8 * 8;
}

static int parse_index_dtype(agpy_replay *r, PyObject *o, ag_dtype *out) {
  *out = AG_I64;
  if (o == Py_None) return 0;
  if (agpy_dtype_parse(r->st, o, out, "sample: index_dtype")) return -1;
  if (*out == AG_I32 && ag_replay_capacity(r->r) > INT32_MAX) {
    agpy_raisef(r->st, AG_ERR_INVALID_ARG, "sample: index_dtype int32 cannot index a table of %lld",
                (long long)ag_replay_capacity(r->r));
    return -1;
  }
  if (*out != AG_I32 && *out != AG_I64) {
    agpy_raisef(r->st, AG_ERR_INVALID_ARG, "sample: index_dtype must be int32 or int64");
    return -1;
  }
  return 0;
}

/* _packed_layout(index_dtype=None): [(key, group dtype, first column,
 * width, shape)] of _sample_import(packed=True)'s arrays */
static PyObject *rp_packed_layout(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
  PyObject *ido = Py_None;
  int narrow = 0, bytes = 0;
  const agpy_arg spec[] = {{"index_dtype", "O", &ido}, {"narrow", "p", &narrow}, {"bytes", "p", &bytes}};
  if (agpy_parse(r->st, "_packed_layout", args, nargs, kwnames, 0, spec, 3)) return NULL;
  if (!rp_get(r)) return NULL;
  ag_dtype idt;
  if (parse_index_dtype(r, ido, &idt)) return NULL;
  packed_layout L;
  packed_of(r, idt, narrow, &L);
  PyObject *l = PyList_New(L.n);
  for (int k = 0; l && k < L.n; k++) {
    const int f = L.dst[k].field;
    PyObject *key = f >= 0                       ? r->fields[f].name
                    : f == AG_REPLAY_DST_INDICES ? r->st->s_indices
                                                 : r->st->s_weights;
    PyObject *shape = f >= 0 ? agpy_hidden_tuple(r->fields[f].inner, r->fields[f].n_inner) : PyTuple_New(0);
    const int64_t w = f >= 0 ? r->fields[f].width : 1;
    /* bytes: (key, its dtype, first byte, width, shape); else (key, its
     * group's dtype, first column, width, shape) */
    PyObject *t = !shape  ? NULL
                  : bytes ? Py_BuildValue("(OsLLN)", key, ag_dtype_name(L.dst[k].dtype), (long long)L.boff[k],
                                          (long long)w, shape)
                          : Py_BuildValue("(OsLLN)", key, ag_dtype_name(L.gdt[L.group[k]]),
                                          (long long)L.col[k], (long long)w, shape);
    if (!t) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, k, t);
  }
  return l;
}

/* The batch of B transitions at given indices (idx, no weights) or drawn
 * (idx NULL), each entry (packed: each dtype group of _packed_layout)
 * handed to importer(capsule) after `consumer` (has_stream) is ordered after
 * the gather: a dict by key (packed: by dtype name). */
static ag_status out_step(ag_ctx *ctx, void *user);
static ag_status beta_on_device(agpy_replay *r, double beta);

/* The draw of B and its gather into dst[0 .. n) (a block's memory) as one
 * replay of a recording on CUDA, where the block was recorded into or was
 * seen before (*replayed set); otherwise nothing is done (the caller
 * launches them). Recording stops where blocks come too rarely back for
 * recordings to pay. */
static ag_status block_replay(agpy_replay *r, int64_t B, double beta, const ag_replay_dst *dst, int n,
                              int *replayed) {
  *replayed = 0;
  ag_ctx *ctx = r->ctx->ctx;
  if (ag_ctx_device(ctx) != AG_DEVICE_CUDA || (r->per && !(beta >= 0.0 && beta <= 1.0)))
    return AG_OK; /* (a bad beta: the draw says so) */
  const int index = ag_ctx_device_index(ctx);
  agpy_outset *hit = NULL, *lru = &r->blocks[0];
  for (int i = 0; i < AGPY_BLOCK_SLOTS && !hit; i++) {
    agpy_outset *o = &r->blocks[i];
    int same = o->cap && o->B == B && o->n == n && o->ctx_index == index;
    for (int k = 0; same && k < n; k++)
      same = o->dst[k].field == dst[k].field && o->dst[k].data == dst[k].data &&
             o->dst[k].dtype == dst[k].dtype && o->dst[k].ld == dst[k].ld;
    if (same)
      hit = o;
    else if (o->used < lru->used)
      lru = o;
  }
  if (!hit) {
    void *key = dst[0].data;
    int seen = 0;
    for (int j = 0; j < AGPY_BLOCK_SEEN; j++) seen |= r->seen[j] == key;
    if (!seen || r->block_records > 16 + r->block_replays / 16) {
      r->seen[r->seen_at++ % AGPY_BLOCK_SEEN] = key;
      return AG_OK;
    }
  }
  ag_status s = r->per ? beta_on_device(r, beta) : AG_OK;
  if (!s && !hit) {
    out_clear(lru, ctx); /* waits for its replays: the block it wrote is another's now */
    lru->owner = r;
    lru->B = B;
    lru->n = n;
    lru->kind = AG_DEVICE_CUDA;
    lru->ctx_index = index;
    memcpy(lru->dst, dst, (size_t)n * sizeof *dst);
    s = ag_capture_create(ctx, out_step, lru, &lru->cap);
    if (s) {
      lru->cap = NULL;
      lru->n = 0;
      return s;
    }
    r->block_records++;
    hit = lru;
  } else if (!s) {
    r->block_replays++;
  }
  if (!s) s = ag_capture_replay(hit->cap);
  hit->used = ++r->clock;
  *replayed = s == AG_OK;
  return s;
}

static PyObject *import_batch(agpy_replay *r, int64_t B, double beta, ag_tensor *idx, PyObject *importer,
                              void *consumer, int has_stream, int packed, ag_dtype idt, int narrow) {
  ag_replay *rep = r->r;
  ag_ctx *ctx = r->ctx->ctx;
  const ag_device_kind kind = ag_ctx_device(ctx);
  packed_layout L;
  packed_of(r, idt, narrow, &L);
  if (idx &&
      r->per) { /* a gather has no weights: the last destination, alone in its group or the last of it */
    L.n--;
    const int g = L.group[L.n];
    L.gwidth[g]--;
    if (L.gwidth[g] == 0) L.n_groups--;
  }
  const int bytes = packed == 2; /* one u8 array of whole rows */
  const int n_arr = bytes ? 1 : packed ? L.n_groups : L.n;
  size_t aoff[AGPY_MAX_DST], need = 0;
  for (int a = 0; a < n_arr; a++) {
    const int64_t w = bytes                 ? L.row_bytes
                      : packed              ? L.gwidth[a]
                      : L.dst[a].field >= 0 ? r->fields[L.dst[a].field].width
                                            : 1;
    const ag_dtype dt = bytes ? AG_U8 : packed ? L.gdt[a] : L.dst[a].dtype;
    aoff[a] = need;
    need += agpy_align((size_t)(B * w) * ag_dtype_size(dt));
  }
  ag_block *blk;
  ag_status s = ag_block_create(ctx, need, &blk);
  if (s) return agpy_raise(r->st, s);
  char *base = ag_block_data(blk);
  for (int k = 0; k < L.n; k++) {
    if (bytes) {
      L.dst[k].data = base + L.boff[k];
      L.dst[k].ld = L.row_bytes / (int64_t)ag_dtype_size(L.dst[k].dtype);
    } else if (packed) {
      const int g = L.group[k];
      L.dst[k].data = base + aoff[g] + (size_t)L.col[k] * ag_dtype_size(L.gdt[g]);
      L.dst[k].ld = L.gwidth[g];
    } else {
      L.dst[k].data = base + aoff[k];
    }
  }
  ag_tensor *w = NULL;
  int replayed = 0;
  if (!idx) s = block_replay(r, B, beta, L.dst, L.n, &replayed);
  if (!s && !replayed && !idx) s = draw(r, B, (float)beta, NULL, &idx, &w);
  if (!s && !replayed) s = ag_replay_gather_into(rep, idx, w, L.dst, L.n);
  ag_ctx_reset(ctx);
  if (!s && kind == AG_DEVICE_CUDA && has_stream) s = ag_stream_wait_ctx(ctx, consumer);
  if (s) {
    ag_block_release(blk, NULL);
    return agpy_raise(r->st, s);
  }
  const int dev_type = kind == AG_DEVICE_CUDA ? kDLCUDA : kDLCPU,
            dev_id = kind == AG_DEVICE_CUDA ? ag_ctx_device_index(ctx) : 0;
  PyObject *out = PyDict_New();
  for (int a = 0; out && a < n_arr; a++) {
    int64_t shape[6], strides[6];
    int ndim = 1;
    shape[0] = B;
    PyObject *key = NULL;
    ag_dtype dt;
    if (bytes) {
      shape[ndim++] = L.row_bytes;
      dt = AG_U8;
      key = PyUnicode_FromString("bytes");
    } else if (packed) {
      shape[ndim++] = L.gwidth[a];
      dt = L.gdt[a];
      key = PyUnicode_FromString(ag_dtype_name(dt));
    } else {
      const int f = L.dst[a].field;
      if (f >= 0) {
        for (int d = 0; d < r->fields[f].n_inner; d++) shape[ndim++] = r->fields[f].inner[d];
        key = Py_NewRef(r->fields[f].name);
      } else {
        key = Py_NewRef(f == AG_REPLAY_DST_INDICES ? r->st->s_indices : r->st->s_weights);
      }
      dt = L.dst[a].dtype;
    }
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; d--) strides[d] = st, st *= shape[d];
    PyObject *cap =
        key ? agpy_capsule_of(blk, base + aoff[a], dt, ndim, shape, strides, dev_type, dev_id, consumer)
            : NULL;
    PyObject *t = cap ? PyObject_CallOneArg(importer, cap) : NULL;
    Py_XDECREF(cap);
    if (!t || PyDict_SetItem(out, key, t) < 0) Py_CLEAR(out);
    Py_XDECREF(t);
    Py_XDECREF(key);
  }
  ag_block_release(blk, NULL);
  return out;
}

/* The common arguments of the _import calls. */
static int import_args(agpy_replay *r, PyObject *stream, PyObject *ido, void **consumer, ag_dtype *idt) {
  if (parse_index_dtype(r, ido, idt)) return -1;
  *consumer = NULL;
  if (stream != Py_None) {
    *consumer = PyLong_AsVoidPtr(stream);
    if (PyErr_Occurred()) return -1;
  }
  if (ag_ctx_device(r->ctx->ctx) == AG_DEVICE_VULKAN) {
    agpy_raisef(r->st, AG_ERR_UNSUPPORTED, "sample: Vulkan memory cannot be handed to a framework");
    return -1;
  }
  return 0;
}

/* _sample_import(batch_size, beta, importer, stream=None, packed=0,
 * index_dtype=None, narrow=False): sample(B)'s batch made by importer
 * (e.g. torch.utils.dlpack.from_dlpack) from capsules, after `stream` (a
 * native handle, None: none) is ordered after the draw: the consumer's own
 * arrays without its __dlpack__ protocol's costs. packed: 0 an array an
 * entry, 1 an array a dtype group, 2 one u8 array of whole rows
 * (_packed_layout gives where each entry is). */
static PyObject *rp_sample_import(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
  int64_t B;
  int packed = 0, narrow = 0;
  PyObject *betao = Py_None, *importer, *stream = Py_None, *ido = Py_None;
  const agpy_arg spec[] = {{"batch_size", "L", &B},  {"beta", "O", &betao},    {"importer", "O", &importer},
                           {"stream", "O", &stream}, {"packed", "i", &packed}, {"index_dtype", "O", &ido},
                           {"narrow", "p", &narrow}};
  if (agpy_parse(r->st, "sample", args, nargs, kwnames, 3, spec, 7)) return NULL;
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  double beta = r->beta;
  if (betao != Py_None && agpy_convert(r->st, "sample", "beta", betao, "d", &beta)) return NULL;
  void *consumer;
  ag_dtype idt;
  if (import_args(r, stream, ido, &consumer, &idt)) return NULL;
  ag_status s = ag_replay_can_sample(rep, B);
  if (s) return agpy_raise(r->st, s);
  if (B > INT32_MAX)
    return agpy_raisef(r->st, AG_ERR_INVALID_ARG, "sample: batch_size = %lld is too large (at most 2^31-1)",
                       (long long)B);
  return import_batch(r, B, beta, NULL, importer, consumer, stream != Py_None, packed, idt, narrow);
}

/* ---- sample(out=...) ---- */

/* Reads array v as the destination k of B transitions of field f (NULL: a
 * (B,) vector), remembering it in o. */
static int out_read(agpy_replay *r, agpy_outset *o, int k, PyObject *v, const agpy_field *f, int64_t B,
                    const char *key) {
  char what[96];
  PyOS_snprintf(what, sizeof what, "sample: out['%s']", key);
  agpy_out a;
  if (agpy_out_read(r->st, r->ctx->ctx, v, what, B, f ? f->n_inner : 0, f ? f->inner : NULL, f ? f->width : 1,
                    &a)) {
    agpy_out_release(&a);
    return -1;
  }
  o->managed[k] = a.managed;
  o->versioned[k] = a.versioned;
  if (a.framework == AGPY_FW_TORCH || o->framework == AGPY_FW_OTHER) o->framework = a.framework;
  o->dev_index = a.dev_index;
  o->dst[k].data = a.data;
  o->dst[k].dtype = a.dtype;
  o->dst[k].ld = a.ld;
  o->vals[k] = Py_NewRef(v);
  return 0;
}

static ag_status out_step(ag_ctx *ctx, void *user) {
  (void)ctx;
  agpy_outset *o = user;
  agpy_replay *r = o->owner;
  ag_tensor *idx, *w;
  ag_status s = draw(r, o->B, 0, r->beta_dev, &idx, &w);
  return s ? s : ag_replay_gather_into(r->r, idx, w, o->dst, o->n);
}

/* The remembered destinations for (out, B), read and recorded anew when
 * they are not those of an earlier call. */
static agpy_outset *out_find(agpy_replay *r, PyObject *out, int64_t B) {
  agpy_state *st = r->st;
  if (!PyDict_Check(out)) {
    PyErr_Format(PyExc_TypeError, "sample: out must be a dict of arrays (one a field), not %.80s",
                 Py_TYPE(out)->tp_name);
    return NULL;
  }
  const Py_ssize_t size = PyDict_GET_SIZE(out);
  for (int i = 0; i < AGPY_OUT_SLOTS; i++) {
    agpy_outset *o = &r->outs[i];
    if (o->dict != out || o->B != B || o->n != size || o->kind != ag_ctx_device(r->ctx->ctx) ||
        o->ctx_index != ag_ctx_device_index(r->ctx->ctx))
      continue;
    int same = 1;
    for (int k = 0; same && k < o->n; k++) {
      PyObject *key = o->dst[k].field >= 0                       ? r->fields[o->dst[k].field].name
                      : o->dst[k].field == AG_REPLAY_DST_INDICES ? st->s_indices
                                                                 : st->s_weights;
      same = PyDict_GetItemWithError(out, key) == o->vals[k];
    }
    if (PyErr_Occurred()) return NULL;
    if (same) {
      o->used = ++r->clock;
      return o;
    }
  }
  /* a new set: in the least recently used slot */
  agpy_outset *o = &r->outs[0];
  for (int i = 1; i < AGPY_OUT_SLOTS; i++)
    if (r->outs[i].used < o->used) o = &r->outs[i];
  out_clear(o, r->ctx->ctx);
  o->owner = r;
  o->B = B;
  o->framework = AGPY_FW_OTHER;
  o->kind = ag_ctx_device(r->ctx->ctx);
  o->ctx_index = ag_ctx_device_index(r->ctx->ctx);
  int k = 0;
  PyObject *key, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(out, &pos, &key, &v)) {
    int fi = field_of(r, key); /* -1: none, which is also AG_REPLAY_DST_INDICES */
    const int is_str = PyUnicode_Check(key);
    if (fi < 0 && is_str && !PyUnicode_Compare(key, st->s_indices))
      fi = AG_REPLAY_DST_INDICES;
    else if (fi < 0 && is_str && !PyUnicode_Compare(key, st->s_weights))
      fi = AG_REPLAY_DST_WEIGHTS;
    else if (fi < 0) {
      agpy_raisef(st, AG_ERR_INVALID_ARG,
                  "sample: out has %R, which is neither a field, 'indices' nor 'weights'", key);
      goto fail;
    }
    o->dst[k].field = fi;
    const char *ks = PyUnicode_AsUTF8(key);
    if (!ks || out_read(r, o, k, v, fi >= 0 ? &r->fields[fi] : NULL, B, ks)) {
      o->n = k + 1; /* what was read so far is let go below */
      goto fail;
    }
    if (fi == AG_REPLAY_DST_INDICES && o->dst[k].dtype != AG_I32 && o->dst[k].dtype != AG_I64) {
      o->n = k + 1;
      agpy_raisef(st, AG_ERR_INVALID_ARG, "sample: out['indices'] must be int32 or int64");
      goto fail;
    }
    k++;
  }
  o->n = k;
  for (int i = 0; i < r->n_fields; i++) {
    int have = 0;
    for (int j = 0; j < k; j++) have |= o->dst[j].field == i;
    if (!have) {
      agpy_raisef(st, AG_ERR_INVALID_ARG, "sample: out has no array for field '%U'", r->fields[i].name);
      goto fail;
    }
  }
  if (o->framework == AGPY_FW_CUPY) {
    PyObject *cp = PyImport_ImportModule("cupy.cuda");
    o->stream_fn = cp ? PyObject_GetAttrString(cp, "get_current_stream") : NULL;
    Py_XDECREF(cp);
    if (!o->stream_fn) goto fail;
  }
  o->dict = Py_NewRef(out);
  o->used = ++r->clock;
  return o;
fail:
  out_clear(o, NULL);
  return NULL;
}

static int out_stream(agpy_replay *r, agpy_outset *o, PyObject *stream, void **out, int *sync) {
  return agpy_out_stream(r->st, r->ctx->ctx, o->framework, o->dev_index, o->stream_fn, stream, out, sync);
}

/* Beta where recorded prioritized draws read it, made or written when it
 * is not `beta` (in [0, 1]: the caller has checked it). */
static ag_status beta_on_device(agpy_replay *r, double beta) {
  const float b = (float)beta;
  if (!r->beta_dev) {
    ag_status s = ag_tensor_create(r->ctx->ctx, 1, 1, AG_F32, &b, &r->beta_dev);
    if (!s) r->beta_dev_value = b;
    return s;
  }
  if (b == r->beta_dev_value) return AG_OK;
  ag_status s = ag_tensor_write(r->beta_dev, &b, sizeof b);
  if (!s) r->beta_dev_value = b;
  return s;
}

static PyObject *sample_out(agpy_replay *r, int64_t B, double beta, PyObject *out, PyObject *stream) {
  if (r->per && !(beta >= 0.0 && beta <= 1.0)) {
    char num[32];
    PyOS_snprintf(num, sizeof num, "%g", beta);
    return agpy_raisef(r->st, AG_ERR_INVALID_ARG, "sample: beta = %s is outside [0, 1]", num);
  }
  agpy_outset *o = out_find(r, out, B);
  if (!o) return NULL;
  ag_ctx *ctx = r->ctx->ctx;
  void *consumer;
  int sync;
  if (out_stream(r, o, stream, &consumer, &sync)) return NULL;
  ag_status s = AG_OK;
  if (!o->cap) { /* the first sample into these arrays: recorded */
    for (int k = 0; k < o->n; k++)
      if (o->dst[k].field == AG_REPLAY_DST_WEIGHTS && !r->per)
        return agpy_raisef(r->st, AG_ERR_INVALID_ARG,
                           "sample: out['weights'] is given, but the buffer is not prioritized");
    if (r->per) s = beta_on_device(r, beta);
    if (!s) s = ag_capture_create(ctx, out_step, o, &o->cap);
    if (s) return agpy_raise(r->st, s);
  }
  if (r->per && (s = beta_on_device(r, beta))) return agpy_raise(r->st, s);
  if (!s && sync) s = ag_ctx_wait_stream(ctx, consumer); /* the consumer is done with the last batch */
  if (!s) s = ag_capture_replay(o->cap);
  if (!s && sync) s = ag_stream_wait_ctx(ctx, consumer); /* and waits for this one */
  if (s) return agpy_raise(r->st, s);
  return Py_NewRef(out);
}

/* _sample_on(batch_size, beta, out, stream): sample(out=)'s recording run
 * on `stream` itself, with no hand-off: for a stream another framework is
 * capturing (the caller orders the streams; the arrays must have been
 * sampled into once already, outside the capture, and beta must not change). */
static PyObject *rp_sample_on(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  int64_t B;
  PyObject *betao, *out, *stream;
  const agpy_arg spec[] = {
      {"batch_size", "L", &B}, {"beta", "O", &betao}, {"out", "O", &out}, {"stream", "O", &stream}};
  if (agpy_parse(r->st, "sample", args, nargs, kwnames, 4, spec, 4)) return NULL;
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  double beta = r->beta;
  if (betao != Py_None && agpy_convert(r->st, "sample", "beta", betao, "d", &beta)) return NULL;
  void *consumer = PyLong_AsVoidPtr(stream);
  if (PyErr_Occurred()) return NULL;
  ag_status s = ag_replay_can_sample(rep, B);
  if (s) return agpy_raise(r->st, s);
  agpy_outset *o = out_find(r, out, B);
  if (!o) return NULL;
  if (!o->cap)
    return agpy_raisef(r->st, AG_ERR_STATE,
                       "sample: inside a stream capture, sample into arrays that were sampled "
                       "into once before the capture (its warm-up)");
  if (r->per && (float)beta != r->beta_dev_value)
    return agpy_raisef(r->st, AG_ERR_STATE,
                       "sample: beta cannot change inside a stream capture (set it before)");
  if ((s = ag_capture_replay_on(o->cap, consumer))) return agpy_raise(r->st, s);
  return Py_NewRef(out);
}

/* sample(batch_size, beta=None, contiguous=None, out=None, stream=None) */
static PyObject *rp_sample(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  int64_t B = 0;
  double beta;
  PyObject *betao = Py_None, *contiguous = Py_None, *out = Py_None, *stream = Py_None;
  if (nargs == 1 && !kwnames) { /* the common call: sample(B) */
    if (agpy_convert(r->st, "sample", "batch_size", args[0], "L", &B)) return NULL;
  } else {
    const agpy_arg spec[] = {{"batch_size", "L", &B},
                             {"beta", "O", &betao},
                             {"contiguous", "O", &contiguous},
                             {"out", "O", &out},
                             {"stream", "O", &stream}};
    if (agpy_parse(r->st, "sample", args, nargs, kwnames, 1, spec, 5)) return NULL;
  }
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  if (betao == Py_None)
    beta = r->beta;
  else if (agpy_convert(r->st, "sample", "beta", betao, "d", &beta))
    return NULL;
  ag_status s = ag_replay_can_sample(rep, B);
  if (s) return agpy_raise(r->st, s);
  /* the batch's memory is sized here from B, before any C call sees it */
  if (B > INT32_MAX)
    return agpy_raisef(r->st, AG_ERR_INVALID_ARG, "sample: batch_size = %lld is too large (at most 2^31-1)",
                       (long long)B);
  if (out != Py_None) {
    if (ag_ctx_device(r->ctx->ctx) == AG_DEVICE_VULKAN)
      return agpy_raisef(
          r->st, AG_ERR_UNSUPPORTED,
          "sample: out= arrays must be in the context's memory, and no framework maps Vulkan's; "
          "call sample(batch_size) for host copies");
    return sample_out(r, B, beta, out, stream);
  }
  if (stream != Py_None)
    return agpy_raisef(r->st, AG_ERR_INVALID_ARG,
                       "sample: stream is taken with out= only (a result's consumer "
                       "passes its stream to __dlpack__)");
  return ag_ctx_device(r->ctx->ctx) == AG_DEVICE_VULKAN ? sample_host(r, B, beta) : sample_block(r, B, beta);
}

/* Host indices must be held transitions: each in 0 .. size-1. */
static int held(void *obj, const int64_t *h, int64_t n, const char *fn) {
  agpy_replay *r = obj;
  const int64_t size = ag_replay_size(r->r);
  for (int64_t j = 0; j < n; j++)
    if (h[j] < 0 || h[j] >= size)
      return agpy_raisef(r->st, AG_ERR_OUT_OF_RANGE,
                         "%s: indices[%lld] = %lld is outside the %lld valid transitions", fn, (long long)j,
                         (long long)h[j], (long long)size),
             -1;
  return 0;
}

static int indices_of(agpy_replay *r, PyObject *io, agpy_in *in, void **scratch, ag_tensor **idx,
                      const char *fn) {
  return agpy_indices_get(r->st, r->ctx->ctx, io, in, scratch, &r->idx_stage, idx, fn, held, r);
}

/* _gather_import(indices, importer, stream=None, packed=0,
 * index_dtype=None, narrow=False): gather's batch made by importer, as
 * _sample_import makes sample's. */
static PyObject *rp_gather_import(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
  int packed = 0, narrow = 0;
  PyObject *io, *importer, *stream = Py_None, *ido = Py_None;
  const agpy_arg spec[] = {{"indices", "O", &io},    {"importer", "O", &importer}, {"stream", "O", &stream},
                           {"packed", "i", &packed}, {"index_dtype", "O", &ido},   {"narrow", "p", &narrow}};
  if (agpy_parse(r->st, "gather", args, nargs, kwnames, 2, spec, 6)) return NULL;
  if (!rp_get(r)) return NULL;
  void *consumer;
  ag_dtype idt;
  if (import_args(r, stream, ido, &consumer, &idt)) return NULL;
  agpy_in in;
  void *scratch;
  ag_tensor *idx = NULL;
  if (indices_of(r, io, &in, &scratch, &idx, "gather")) return NULL;
  PyObject *out =
      import_batch(r, in.numel, r->beta, idx, importer, consumer, stream != Py_None, packed, idt, narrow);
  free(scratch);
  agpy_in_release(&in, r->ctx->ctx);
  return out;
}

/* gather(indices, out=None): the transitions at `indices` (host indices
 * checked against the valid ones, device indices clamped), as sample's
 * batch without weights, or into `out` (then returned). */
static PyObject *rp_gather(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *io, *out = Py_None;
  const agpy_arg spec[] = {{"indices", "O", &io}, {"out", "O", &out}};
  if (agpy_parse(r->st, "gather", args, nargs, kwnames, 1, spec, 2)) return NULL;
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  ag_ctx *ctx = r->ctx->ctx;
  const ag_device_kind kind = ag_ctx_device(ctx);
  if (kind == AG_DEVICE_VULKAN && out != Py_None)
    return agpy_raisef(r->st, AG_ERR_UNSUPPORTED, "gather: out= arrays cannot be in Vulkan memory");
  agpy_in in;
  void *scratch = NULL;
  ag_tensor *idx = NULL;
  if (indices_of(r, io, &in, &scratch, &idx, "gather")) return NULL;
  PyObject *ret = NULL;
  ag_block *blk = NULL;
  const int64_t B = in.numel;
  ag_status s = AG_OK;
  if (out != Py_None) {
    agpy_outset *o = out_find(r, out, B);
    if (!o) goto done;
    void *consumer;
    int sync;
    for (int k = 0; k < o->n; k++)
      if (o->dst[k].field == AG_REPLAY_DST_WEIGHTS) {
        agpy_raisef(r->st, AG_ERR_INVALID_ARG, "gather: out['weights']: a gather has no weights");
        goto done;
      }
    if (out_stream(r, o, Py_None, &consumer, &sync)) goto done;
    if (sync) s = ag_ctx_wait_stream(ctx, consumer);
    if (!s) s = ag_replay_gather_into(rep, idx, NULL, o->dst, o->n);
    if (!s && sync) s = ag_stream_wait_ctx(ctx, consumer);
    if (!s) ret = Py_NewRef(out);
  } else {
    ag_replay_dst dst[AGPY_MAX_DST];
    size_t off[AGPY_MAX_DST];
    int n;
    size_t need = default_layout(r, B, dst, off, &n);
    if (r->per) n--; /* no weights */
    char *base = NULL;
    if (kind == AG_DEVICE_VULKAN) {
      s = host_stage(r, need, &base, &blk);
    } else if (!(s = ag_block_create(ctx, need, &blk))) {
      base = ag_block_data(blk);
    }
    for (int k = 0; !s && k < n; k++) dst[k].data = base + off[k];
    if (!s) s = ag_replay_gather_into(rep, idx, NULL, dst, n);
    if (!s && kind == AG_DEVICE_VULKAN) s = host_copy(r, need, blk, dst, n);
    if (!s) ret = batch_dict(r, blk, ag_block_data(blk), dst, off, n, B);
  }
  if (s && !PyErr_Occurred()) agpy_raise(r->st, s);
done:
  ag_ctx_reset(ctx);
  ag_block_release(blk, NULL);
  free(scratch);
  agpy_in_release(&in, ctx);
  return ret;
}

/* ---- priorities ---- */

/* update_priorities(indices, priorities): host or device arrays of n values */
static PyObject *rp_update(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *io, *po;
  const agpy_arg spec[] = {{"indices", "O", &io}, {"priorities", "O", &po}};
  if (agpy_parse(r->st, "update_priorities", args, nargs, kwnames, 2, spec, 2)) return NULL;
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  if (!r->per)
    return agpy_raisef(r->st, AG_ERR_STATE,
                       "update_priorities: the buffer was made without prioritized=True");
  ag_ctx *ctx = r->ctx->ctx;
  agpy_in in[2];
  if (agpy_in_get(r->st, ctx, io, &in[0], "update_priorities: indices")) return NULL;
  if (agpy_in_get(r->st, ctx, po, &in[1], "update_priorities: priorities")) {
    agpy_in_release(&in[0], ctx);
    return NULL;
  }
  PyObject *ret = NULL;
  void *s1 = NULL, *s2 = NULL;
  ag_status s = AG_OK;
  if (in[0].numel != in[1].numel) {
    agpy_raisef(r->st, AG_ERR_SHAPE, "update_priorities: %lld indices and %lld priorities",
                (long long)in[0].numel, (long long)in[1].numel);
  } else if (in[0].on_device != in[1].on_device) {
    agpy_raisef(r->st, AG_ERR_INVALID_ARG,
                "update_priorities: indices and priorities must both be on the host or the device");
  } else if (in[0].on_device) {
    ag_tensor *ti, *tp;
    const int idt = agpy_in_agdtype(&in[0]), pdt = agpy_in_agdtype(&in[1]);
    if (in[0].numel < 1) agpy_raisef(r->st, AG_ERR_INVALID_ARG, "update_priorities: no indices");
    s = in[0].numel < 1 || agpy_in_order(r->st, ctx, in, 2) ? AG_ERR_INVALID_ARG : AG_OK;
    if (!s) s = ag_tensor_wrap(ctx, in[0].data, in[0].numel, 1, in[0].numel, (ag_dtype)idt, &ti);
    if (!s) s = ag_tensor_wrap(ctx, in[1].data, 1, in[1].numel, 1, (ag_dtype)pdt, &tp);
    if (!s) s = ag_per_update(r->per, ti, tp);
    ag_ctx_reset(ctx);
    if (!s)
      ret = Py_NewRef(Py_None);
    else if (!PyErr_Occurred())
      agpy_raise(r->st, s);
  } else {
    const int64_t *hi = agpy_in_as(r->st, &in[0], AG_I64, &s1, "update_priorities: indices");
    const float *hp = hi ? agpy_in_as(r->st, &in[1], AG_F32, &s2, "update_priorities: priorities") : NULL;
    if (hp) {
      s = ag_per_update_host(r->per, hi, hp, in[0].numel);
      ag_ctx_reset(ctx); /* its temporaries */
      if (s)
        agpy_raise(r->st, s);
      else
        ret = Py_NewRef(Py_None);
    }
  }
  free(s1);
  free(s2);
  agpy_in_release_all(in, 2, ctx);
  return ret;
}

static PyObject *rp_total(agpy_replay *r, PyObject *a) {
  (void)a;
  if (!rp_get(r)) return NULL;
  if (!r->per)
    return agpy_raisef(r->st, AG_ERR_STATE, "total_priority: the buffer was made without prioritized=True");
  double t;
  ag_status s = ag_per_total(r->per, &t);
  if (s) return agpy_raise(r->st, s);
  return PyFloat_FromDouble(t);
}

static PyObject *rp_free(agpy_replay *r, PyObject *a) {
  (void)a;
  agpy_replay_release((PyObject *)r);
  Py_RETURN_NONE;
}

static PyObject *rp_exit(agpy_replay *r, PyObject *a) {
  (void)a;
  agpy_replay_release((PyObject *)r);
  Py_RETURN_FALSE;
}

static Py_ssize_t rp_len(agpy_replay *r) {
  if (agpy_lock(r->ctx)) return -1;
  Py_ssize_t n = rp_get(r) ? (Py_ssize_t)ag_replay_size(r->r) : -1;
  agpy_unlock(r->ctx);
  return n;
}

static PyObject *rp_get_capacity(agpy_replay *r, void *x) {
  (void)x;
  return rp_get(r) ? PyLong_FromLongLong(ag_replay_capacity(r->r)) : NULL;
}

static PyObject *rp_get_position(agpy_replay *r, void *x) {
  (void)x;
  return rp_get(r) ? PyLong_FromLongLong(ag_replay_position(r->r)) : NULL;
}

static PyObject *rp_get_rows(agpy_replay *r, void *x) {
  (void)x;
  return PyLong_FromLongLong(r->rows);
}

static PyObject *rp_get_prioritized(agpy_replay *r, void *x) {
  (void)x;
  return PyBool_FromLong(r->per != NULL);
}

static PyObject *rp_get_alpha(agpy_replay *r, void *x) {
  (void)x;
  if (!rp_get(r)) return NULL;
  if (!r->per) Py_RETURN_NONE;
  return PyFloat_FromDouble(ag_per_alpha(r->per));
}

static PyObject *rp_get_beta(agpy_replay *r, void *x) {
  (void)x;
  return PyFloat_FromDouble(r->beta);
}

static int rp_set_beta(PyObject *self, PyObject *v, void *x) {
  (void)x;
  agpy_replay *r = (agpy_replay *)self;
  if (!v) {
    PyErr_SetString(PyExc_AttributeError, "beta cannot be deleted");
    return -1;
  }
  double b;
  if (agpy_convert(r->st, "ReplayBuffer", "beta", v, "d", &b)) return -1;
  if (!(b >= 0.0 && b <= 1.0)) { /* kept for later draws: no C call sees it now */
    char num[32];
    PyOS_snprintf(num, sizeof num, "%g", b);
    agpy_raisef(r->st, AG_ERR_INVALID_ARG, "beta = %s is outside [0, 1]", num);
    return -1;
  }
  r->beta = b;
  return 0;
}

static PyObject *rp_save(agpy_replay *r, PyObject *arg) {
  ag_replay *rep = rp_get(r);
  if (!rep) return NULL;
  PyObject *path = NULL;
  if (agpy_convert(r->st, "save", "path", arg, "F", &path)) return NULL;
  ag_status s;
  Py_BEGIN_ALLOW_THREADS s = ag_replay_save(rep, PyBytes_AS_STRING(path));
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (s) return agpy_raise(r->st, s);
  Py_RETURN_NONE;
}

/* _load(ctx, path, seed=0, beta=0.4): a new object of the class over the table of the file */
static PyObject *rp_load(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  agpy_state *st = agpy_state_of_type((PyTypeObject *)cls);
  if (!st) return NULL;
  PyObject *ctxo, *path = NULL;
  uint64_t seed = 0;
  double beta = 0.4;
  const agpy_arg spec[] = {
      {"ctx", "O", &ctxo}, {"path", "F", &path}, {"seed", "K", &seed}, {"beta", "d", &beta}};
  if (agpy_parse(st, "ReplayBuffer.load", args, nargs, kwnames, 2, spec, 4)) return NULL;
  agpy_ctx *c = agpy_ctx_check(st, ctxo, "ReplayBuffer.load");
  if (c && !(beta >= 0.0 && beta <= 1.0)) {
    char b[32];
    PyOS_snprintf(b, sizeof b, "%g", beta);
    agpy_raisef(st, AG_ERR_INVALID_ARG, "ReplayBuffer.load: beta = %s is outside [0, 1]", b);
    c = NULL;
  }
  if (!c || agpy_lock(c)) {
    Py_DECREF(path);
    return NULL;
  }
  agpy_replay *r = NULL;
  ag_ctx *ctx = agpy_ctx_get(c);
  ag_replay *rep = NULL;
  ag_status s = AG_OK;
  if (ctx) {
    Py_BEGIN_ALLOW_THREADS s = ag_replay_load(ctx, PyBytes_AS_STRING(path), &rep);
    Py_END_ALLOW_THREADS
  }
  Py_DECREF(path);
  if (!ctx) {
  } else if (s) {
    agpy_raise(st, s);
  } else if (!(r = (agpy_replay *)agpy_obj_new((PyTypeObject *)cls, NULL, NULL))) {
    ag_replay_free(rep);
  } else if (agpy_fields_of_replay(st, "ReplayBuffer", rep, r->fields, &r->n_fields)) {
    ag_replay_free(rep);
    Py_CLEAR(r);
  } else if (rp_attach(r, c, rep, seed, beta)) {
    Py_CLEAR(r);
  }
  agpy_unlock(c);
  return (PyObject *)r;
}

/* _fields(): [(name, width, dtype)] of the table */
static PyObject *rp_fields(agpy_replay *r, PyObject *a) {
  (void)a;
  return agpy_fields_list(r->fields, r->n_fields);
}

/* _set_shape(i, shape): the shape of field i's values (multiplying to its width) */
static PyObject *rp_set_shape(agpy_replay *r, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  int i;
  PyObject *shape;
  const agpy_arg spec[] = {{"i", "i", &i}, {"shape", "O", &shape}};
  if (agpy_parse(r->st, "_set_shape", args, nargs, kwnames, 2, spec, 2)) return NULL;
  if (agpy_field_set_shape(r->st, r->fields, r->n_fields, i, shape)) return NULL;
  for (int o = 0; o < AGPY_OUT_SLOTS; o++) out_clear(&r->outs[o], r->ctx ? r->ctx->ctx : NULL);
  Py_RETURN_NONE;
}

AGPY_WRAP_FAST(agpy_replay, rp_add)
AGPY_WRAP_FAST(agpy_replay, rp_sample)
AGPY_WRAP_FAST(agpy_replay, rp_update)
AGPY_WRAP_FAST(agpy_replay, rp_sample_import)
AGPY_WRAP_FAST(agpy_replay, rp_packed_layout)
AGPY_WRAP_FAST(agpy_replay, rp_gather)
AGPY_WRAP_FAST(agpy_replay, rp_gather_import)
AGPY_WRAP_FAST(agpy_replay, rp_sample_on)
AGPY_WRAP_O(agpy_replay, rp_total)
AGPY_WRAP_O(agpy_replay, rp_free)
AGPY_WRAP_O(agpy_replay, rp_exit)
AGPY_WRAP_O(agpy_replay, rp_save)
AGPY_WRAP_O(agpy_replay, rp_fields)
AGPY_WRAP_FAST(agpy_replay, rp_set_shape)
AGPY_WRAP_GET(agpy_replay, rp_get_capacity)
AGPY_WRAP_GET(agpy_replay, rp_get_position)
AGPY_WRAP_GET(agpy_replay, rp_get_alpha)

static PyMethodDef rp_methods[] = {
    AGPY_M("add", rp_add, AGPY_FAST,
           "add($self, fields=None, /, **arrays)\n--\n\n"
           "Appends one transition (each field of its shape) or a batch (a first dimension of k), from host "
           "arrays or arrays of the context's device (torch, CuPy, JAX: taken device to device)."),
    AGPY_M(
        "sample", rp_sample, AGPY_FAST,
        "sample($self, /, batch_size, beta=None, contiguous=None, out=None, stream=None)\n--\n\n"
        "B transitions drawn on the device: a dict of agrl.Tensor, each field (B, *shape) in the dtype it "
        "was "
        "added with, 'indices' (B,) int64 and, prioritized, 'weights' (B,) float32.\n"
        "With out= (a dict of the caller's arrays: every field, optionally 'indices' and 'weights'), the "
        "batch is written into them and `out` is returned; the arrays are read once and remembered, and the "
        "caller's stream (torch's or CuPy's current stream, or `stream`) is ordered around the write."),
    AGPY_M(
        "_gather_import", rp_gather_import, AGPY_FAST,
        "_gather_import($self, /, indices, importer, stream=None, packed=0, index_dtype=None, "
        "narrow=False)\n--\n\ngather's batch made by importer(capsule), as _sample_import makes sample's."),
    AGPY_M("_sample_on", rp_sample_on, AGPY_FAST,
           "_sample_on($self, /, batch_size, beta, out, stream)\n--\n\n"
           "sample(out=)'s recording run on `stream` with no hand-off (inside a stream capture)."),
    AGPY_M("gather", rp_gather, AGPY_FAST,
           "gather($self, /, indices, out=None)\n--\n\n"
           "The transitions at `indices` (host indices: each in 0..len-1; device indices are clamped to the "
           "table), as sample's batch (no weights), or written into `out`."),
    AGPY_M("_sample_import", rp_sample_import, AGPY_FAST,
           "_sample_import($self, /, batch_size, beta, importer, stream=None, packed=0, "
           "index_dtype=None, narrow=False)\n--\n\n"
           "sample(batch_size)'s batch, each entry (packed: each dtype group of _packed_layout) made by "
           "importer(capsule) once `stream` waits for it."),
    AGPY_M("_packed_layout", rp_packed_layout, AGPY_FAST,
           "_packed_layout($self, /, index_dtype=None, narrow=False, bytes=False)\n--\n\n"
           "[(key, group dtype, first column, width, shape)] of the packed batch's dtype groups."),
    AGPY_M("update_priorities", rp_update, AGPY_FAST,
           "update_priorities($self, /, indices, priorities)\n--\n\n"
           "New priorities (e.g. |TD error| + eps) of the transitions at `indices`, host or device arrays."),
    AGPY_M("total_priority", rp_total, METH_NOARGS,
           "total_priority($self, /)\n--\n\nThe sum of p^alpha over the table."),
    AGPY_M("free", rp_free, METH_NOARGS,
           "free($self, /)\n--\n\nFrees the table; later calls raise FreedError."),
    {"__enter__", agpy_enter, METH_NOARGS, "__enter__($self, /)\n--\n\n"},
    AGPY_M("__exit__", rp_exit, METH_VARARGS, "__exit__($self, *exc_info)\n--\n\nFrees the table."),
    AGPY_M(
        "save", rp_save, METH_O,
        "save($self, path, /)\n--\n\n"
        "The table (fields, ring, valid columns, the prioritized sampler's tree) in agrl's replay format."),
    {"_load", (PyCFunction)(void (*)(void))rp_load, AGPY_FAST | METH_CLASS,
     "_load($type, /, ctx, path, seed=0, beta=0.4)\n--\n\n"},
    AGPY_M("_fields", rp_fields, METH_NOARGS, "_fields($self, /)\n--\n\n"),
    AGPY_M("_set_shape", rp_set_shape, AGPY_FAST, "_set_shape($self, /, i, shape)\n--\n\n"),
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef rp_getset[] = {
    {"capacity", rp_get_capacity_w, NULL, "transitions the table holds", NULL},
    {"position", rp_get_position_w, NULL, "where the next transition goes", NULL},
    {"rows", (getter)rp_get_rows, NULL, "values per transition", NULL},
    {"prioritized", (getter)rp_get_prioritized, NULL, "whether sampling is prioritized", NULL},
    {"alpha", rp_get_alpha_w, NULL, "the priority exponent (None for a uniform table)", NULL},
    {"beta", (getter)rp_get_beta, rp_set_beta, "the importance-weight exponent", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot rp_slots[] = {
    {Py_tp_new, agpy_obj_new},
    {Py_tp_init, rp_init},
    {Py_tp_dealloc, rp_dealloc},
    {Py_sq_length, rp_len},
    {Py_tp_methods, rp_methods},
    {Py_tp_getset, rp_getset},
    {Py_tp_doc,
     "_Replay(ctx, capacity, fields, storage=None, min_size=1, prioritized=False, alpha=0.6, beta=0.4, "
     "seed=0)\n--\n\nThe C side of agrl.ReplayBuffer."},
    {0, NULL},
};

PyType_Spec agpy_replay_spec = {"agrl._Replay", sizeof(agpy_replay), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, rp_slots};
