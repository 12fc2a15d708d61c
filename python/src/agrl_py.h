/* agrl_py.h — what the files of agrl's Python extension share: the module
 * state, the object layouts, the per-context lock, argument parsing,
 * errors, inputs (DLPack, the buffer protocol, torch tensors) and results.
 *
 * The module is initialised in phases (PEP 489) and keeps everything in its
 * state: the exception classes, the heap types, numpy's and torch's
 * functions it calls. Every object made on a context holds the context and
 * takes its lock in one prologue (AGPY_WRAP_*) before any C call: agrl's
 * contexts are used by one thread at a time, and long calls run with the
 * GIL released. */
#ifndef AGRL_PY_H
#define AGRL_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <stdint.h>

#include "agrl/agrl.h"
#include "dlpack.h"

#define AGPY_N_STATUS 13 /* 0 and the 12 error statuses of agrl/status.h */

/* ---- module state (module.c) ---- */

typedef struct agpy_state {
  PyObject *error_base;
  PyObject *errors[AGPY_N_STATUS];
  PyTypeObject *ctx_type, *tensor_type, *buffer_type, *replay_type, *frames_type, *dqn_type, *ac_type,
      *env_type;
  PyObject *numpy_empty; /* numpy.empty, imported at first use */
  /* torch, seen when one of its tensors is first handed in (agrl never
   * imports it): torch.Tensor, torch._C._cuda_getCurrentRawStream (or
   * NULL, then torch.cuda.current_stream), torch.utils.dlpack.from_dlpack,
   * the dtype objects by agrl dtype */
  int torch_state; /* 0 unseen, 1 found, -1 not importable */
  PyObject *torch_tensor, *torch_raw_stream, *torch_current_stream, *torch_from_dlpack;
  PyObject *torch_dtypes[AG_DTYPE_COUNT_ + 1]; /* + bool */
  /* torch.Tensor's DLPack C exchange table (DLPack 1.3 and later), or NULL:
   * a tensor's layout and torch's current stream without Python calls */
  const DLPackExchangeAPI *torch_xapi;
  PyObject *torch_xapi_capsule;
  /* torch's current stream as last read, for the other tensors of the same
   * call: valid while `call` is the serial of the call under way (bumped
   * by every fresh agpy_lock) and `thread` the thread making it */
  struct {
    unsigned long thread;
    uint64_t call;
    int device;
    void *stream;
  } torch_stream_seen;
  uint64_t call_serial;
  /* interned names */
  PyObject *s_indices, *s_weights, *s_data_ptr, *s_dtype, *s_shape, *s_is_contiguous, *s_get_device,
      *s_dlpack, *s_dlpack_device, *s_cuda_stream, *s_stride;
} agpy_state;

/* The state of the module that defined `type` (or a base of it). */
agpy_state *agpy_state_of_type(PyTypeObject *type);

/* ---- errors (module.c) ---- */

/* Raises the exception of status s with the C library's message. */
PyObject *agpy_raise(agpy_state *st, ag_status s);
/* Raises agrl's exception of status s with a message of its own. */
PyObject *agpy_raisef(agpy_state *st, ag_status s, const char *fmt, ...);

/* ---- arguments (args.c) ----
 * One parser for every method: positional-or-keyword arguments in order,
 * the first n_required required. A kind converts the value and names the
 * argument in every message (a wrong type is a TypeError, a number out of
 * the C type's range agrl.InvalidArgError):
 *   'O' any object (borrowed; None included)   'L' int64   'K' uint64
 *   'i' int                                    'd' double  'p' bool (truth)
 *   'U' str (borrowed)                         'F' path (os.fspath: a new bytes object)
 * A kind in upper case after '?' ('?L', ...) also takes None, leaving the
 * output as it was. */
typedef struct agpy_arg {
  const char *name;
  const char *kind;
  void *out;
} agpy_arg;

int agpy_parse(agpy_state *st, const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               int n_required, const agpy_arg *spec, int n_spec);
/* The same for tp_init's (args, kwargs). */
int agpy_parse_tuple(agpy_state *st, const char *fn, PyObject *args, PyObject *kw, int n_required,
                     const agpy_arg *spec, int n_spec);
/* Converts one value as `kind` would (for dicts of options): 0 or -1. */
int agpy_convert(agpy_state *st, const char *fn, const char *name, PyObject *v, const char *kind, void *out);

/* ---- contexts (context.c) ----
 * The lock is re-entrant for the thread that holds it (an input's
 * __dlpack__ may call back into agrl) and is waited for with the GIL
 * released. */
typedef struct agpy_ctx {
  PyObject_HEAD agpy_state *st;
  ag_ctx *ctx; /* NULL once freed */
  PyThread_type_lock lock;
  unsigned long owner; /* thread holding the lock (0: none) */
  int depth;
  PyObject **deps; /* borrowed: objects made on the context */
  int n_deps, cap_deps;
} agpy_ctx;

/* The fields every object made on a context starts with. */
#define AGPY_ON_CTX             \
  PyObject_HEAD agpy_state *st; \
  agpy_ctx *ctx /* strong; its ag_ctx may be gone */

typedef struct agpy_obj {
  AGPY_ON_CTX;
} agpy_obj;

int agpy_lock(agpy_ctx *c); /* c may be NULL; 0 or -1 with an exception */
void agpy_unlock(agpy_ctx *c);
/* The live context of a Context object, or NULL with FreedError set. */
ag_ctx *agpy_ctx_get(agpy_ctx *c);
/* A Context argument (exactly agrl.Context or a subclass), or NULL with a
 * TypeError naming `fn`. */
agpy_ctx *agpy_ctx_check(agpy_state *st, PyObject *obj, const char *fn);
int agpy_ctx_add_dep(agpy_ctx *c, PyObject *dep);
void agpy_ctx_drop_dep(agpy_ctx *c, PyObject *dep);
/* Sets self->st from its type and, for tp_new of every agrl type. */
PyObject *agpy_obj_new(PyTypeObject *type, PyObject *args, PyObject *kw);
/* tp_dealloc's end: frees the object and drops the heap type. */
void agpy_obj_free(PyObject *self);

/* Method prologues: the object's context lock around the implementation. */
#define AGPY_LOCKED(T, call)          \
  agpy_ctx *c_ = ((T *)self)->ctx;    \
  if (agpy_lock(c_) < 0) return NULL; \
  PyObject *r_ = call;                \
  agpy_unlock(c_);                    \
  return r_;
#define AGPY_WRAP_O(T, fn) \
  static PyObject *fn##_w(PyObject *self, PyObject *a) { AGPY_LOCKED(T, fn((T *)self, a)) }
#define AGPY_WRAP_FAST(T, fn)                                                              \
  static PyObject *fn##_w(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *k) { \
    AGPY_LOCKED(T, fn((T *)self, a, n, k))                                                 \
  }
#define AGPY_WRAP_GET(T, fn) \
  static PyObject *fn##_w(PyObject *self, void *x) { AGPY_LOCKED(T, fn((T *)self, x)) }
#define AGPY_FAST (METH_FASTCALL | METH_KEYWORDS)
#define AGPY_M(name, fn, flags, doc) \
  { name, (PyCFunction)(void (*)(void))fn##_w, flags, doc }

/* Context-manager methods of an object with free(): __enter__ returns it,
 * __exit__ frees it. */
PyObject *agpy_enter(PyObject *self, PyObject *a);

/* ---- results: tensors that hold a block (tensor.c) ----
 * An agrl.Tensor is a cols x rows table of elements (rows contiguous, ld
 * between columns), seen from Python with shape (cols, *inner) or (cols,),
 * inner multiplying to rows. It owns one reference to its block. */
typedef struct agpy_tensor {
  AGPY_ON_CTX;
  ag_block *block;
  void *data;
  ag_dtype dtype;
  ag_device_kind kind;
  int index;
  int64_t rows, cols, ld;
  int ndim;
  int64_t shape[6];
} agpy_tensor;

/* A Tensor over memory of `blk` (which gains a reference). inner/n_inner:
 * the shape of one column (NULL, 0: a 1-D tensor of cols values, each
 * column's first element). */
PyObject *agpy_tensor_new(agpy_ctx *c, ag_block *blk, void *data, ag_dtype dt, int64_t rows, int64_t cols,
                          int64_t ld, const int64_t *inner, int n_inner);
/* A Tensor of a C result carved out of blk. */
PyObject *agpy_tensor_of(agpy_ctx *c, ag_block *blk, ag_tensor *t, const int64_t *inner, int n_inner);
/* A DLPack capsule ("dltensor", legacy) over a tensor's memory, with a
 * reference to its block, for a consumer that has been ordered after the
 * context's queue already; `stream` is where it will use the memory (the
 * block is reused only after that stream's work queued before the release). */
PyObject *agpy_capsule_of(ag_block *blk, void *data, ag_dtype dt, int ndim, const int64_t *shape,
                          const int64_t *strides, int dev_type, int dev_id, void *stream);

/* One array of a batch at `data` in blk: B rows of `width` values of dt,
 * seen as (B, *inner) ((B,) for n_inner 0): an agrl.Tensor, or, with an
 * importer, importer(capsule) of a capsule for a consumer on `consumer`. */
PyObject *agpy_hand_out(agpy_ctx *c, ag_block *blk, void *data, ag_dtype dt, int64_t B, int64_t width,
                        const int64_t *inner, int n_inner, PyObject *importer, void *consumer);

/* ---- inputs (input.c) ----
 * Any object with __dlpack__ (torch, JAX, CuPy, numpy), the buffer protocol,
 * or Python numbers and (nested) lists; torch tensors are read through
 * their own accessors (no DLPack export). */
typedef struct agpy_in {
  int on_device; /* memory of the context's device */
  void *data;
  DLDataType dt;
  int ndim;
  int64_t shape[8];
  int64_t numel;
  /* owners */
  Py_buffer view;
  int has_view;
  void *managed;
  int versioned;
  void *tmp;
  PyObject *held;  /* a torch tensor read in place (strong) */
  void *stream;    /* its framework's current stream (device inputs of torch) */
  int stream_done; /* another input of the same stream does the release's wait */
} agpy_in;

/* Reads obj; `what` names it in messages. ctx: the context device data
 * must be on (NULL: host data only). Returns 0, or -1 with an exception. */
int agpy_in_get(agpy_state *st, ag_ctx *ctx, PyObject *obj, agpy_in *in, const char *what);
/* Calls obj.__dlpack__(max_version=(1, 0), stream=stream (NULL: not
 * given)), retried without max_version for a producer before DLPack 1.0,
 * and takes the capsule: the managed tensor in *managed (its deleter is
 * the caller's to call), *versioned, *readonly (the versioned flag). The
 * DLTensor, or NULL with an exception. */
DLTensor *agpy_dlpack_take(agpy_state *st, PyObject *obj, PyObject *stream, void **managed, int *versioned,
                           int *readonly, const char *what);
/* Calls a managed tensor's deleter (managed NULL: nothing). */
void agpy_dlpack_release(void *managed, int versioned);
/* Lets go of the input: at once (host data, or nothing queued reads it),
 * or after the work queued on ctx so far (device data). */
void agpy_in_release(agpy_in *in, ag_ctx *ctx_or_null);
/* agpy_in_release of n inputs, with one wait a framework stream. */
void agpy_in_release_all(agpy_in *in, int n, ag_ctx *ctx_or_null);
/* Orders ctx's queue after the producers of device inputs (their
 * framework's current streams), before the work that reads them. */
int agpy_in_order(agpy_state *st, ag_ctx *ctx, agpy_in *in, int n);
/* The agrl dtype of an input's elements, or -1 when it has none. */
int agpy_in_agdtype(const agpy_in *in);
/* Converts the input's numel values to `dst` (an agrl dtype) into out,
 * checking that whole-number dtypes receive whole numbers in range. */
int agpy_in_convert(agpy_state *st, const agpy_in *in, ag_dtype dst, void *out, const char *what);
/* Element i of a host input as a double (ints of more than 53 bits rounded). */
double agpy_in_value(const agpy_in *in, int64_t i);
/* A host pointer to the input as `dst`: the input itself when it already is,
 * otherwise a converted copy in *scratch (malloc'd; free it). */
const void *agpy_in_as(agpy_state *st, const agpy_in *in, ag_dtype dst, void **scratch, const char *what);
/* A device tensor over a device input: [rows, cols] with rows = numel / cols. */
int agpy_in_wrap(agpy_state *st, ag_ctx *ctx, const agpy_in *in, int64_t rows, int64_t cols, ag_tensor **out,
                 const char *what);

/* Indices handed to a gather: host ones checked by check(obj, h, n, fn)
 * (0, or -1 with an exception) and sent into *stage (a persistent [1, B]
 * i64 tensor, made or remade as needed), device ones (i32, i64) wrapped in
 * place with their producer's stream ordered first: *idx. *in and
 * *scratch are the caller's to release (also on failure, when *in was
 * read); returns 0 or -1. */
typedef int (*agpy_index_check)(void *obj, const int64_t *h, int64_t n, const char *fn);
int agpy_indices_get(agpy_state *st, ag_ctx *ctx, PyObject *io, agpy_in *in, void **scratch,
                     ag_tensor **stage, ag_tensor **idx, const char *fn, agpy_index_check check, void *obj);

/* ---- arrays given as a batch's outputs (outarray.c) ---- */

/* The framework of an output array: its stream is the one a batch is handed on. */
enum { AGPY_FW_OTHER = 0, AGPY_FW_TORCH = 1, AGPY_FW_CUPY = 2 };
typedef struct agpy_out {
  void *data;
  ag_dtype dtype;
  int64_t ld;    /* elements from one transition to the next */
  void *managed; /* a DLPack import (agpy_out_release lets it go) */
  int versioned;
  int framework; /* AGPY_FW_* */
  int dev_index;
} agpy_out;
/* Reads array v (torch in place, others through DLPack) as the destination
 * of B transitions of `width` values of shape inner[0 .. n_inner) (n_inner
 * 0: a (B,) vector, width 1): writable, in the context's memory, of a dtype
 * agrl writes, each transition's values contiguous, the transitions ld
 * apart. `what` names it in messages. 0, or -1 with an exception (*o then
 * holds what must still be released). */
int agpy_out_read(agpy_state *st, ag_ctx *ctx, PyObject *v, const char *what, int64_t B, int n_inner,
                  const int64_t *inner, int64_t width, agpy_out *o);
void agpy_out_release(agpy_out *o);
/* The consumer's stream of a call that writes output arrays: the `stream`
 * argument as DLPack numbers streams (None: the arrays' framework's current
 * stream, CuPy's through stream_fn, the legacy default for others; -1: no
 * hand-off). *sync: whether the context and the stream must be ordered (a
 * CUDA context). 0, or -1 with an exception. */
int agpy_out_stream(agpy_state *st, ag_ctx *ctx, int framework, int dev_index, PyObject *stream_fn,
                    PyObject *stream, void **out, int *sync);

/* torch (input.c): 1 when obj is a torch.Tensor (torch imported by the
 * caller), 0 otherwise. */
int agpy_is_torch(agpy_state *st, PyObject *obj);
/* The current CUDA stream of torch on device `index` (a cudaStream_t as a
 * pointer; NULL for the legacy default), or (void *)-1 with an exception. */
void *agpy_torch_stream(agpy_state *st, int index);
/* A torch tensor's data, dtype, shape, strides (elements; may be NULL) and
 * device index (-1: the CPU). */
int agpy_torch_layout(agpy_state *st, PyObject *obj, void **data, DLDataType *dt, int *ndim, int64_t *shape,
                      int64_t *strides, int *device, const char *what);

/* Host observations (n, obs_dim) or (obs_dim,) as f32 (dqn.c): *n of them,
 * *single for the 1-D form; a converted copy in *scratch (free it). */
const float *agpy_obs_of(agpy_state *st, int64_t obs_dim, agpy_in *in, void **scratch, int *n, int *single,
                         const char *what);
/* The same as any dtype (AG_F32, or AG_U8 for ag_dqn_act_u8). */
const void *agpy_obs_as(agpy_state *st, int64_t obs_dim, agpy_in *in, ag_dtype dtype, void **scratch, int *n,
                        int *single, const char *what);

/* ---- named fields (fields.c) ----
 * The fields of agrl.ReplayBuffer and agrl.FrameReplayBuffer: a name, the
 * shape of one transition's values (width of them), the dtype they are
 * added and sampled in. `who` names the class in messages. */
#define AGPY_MAX_FIELDS 32

typedef struct agpy_field {
  PyObject *name; /* str, interned */
  char what[80];  /* "<who>.add: field '<name>'", for messages */
  int64_t width, row0;
  int n_inner;
  int64_t inner[5];
  ag_dtype dtype;
} agpy_field;

/* Fields from a sequence of (name, shape tuple, dtype): their layout in
 * out[0 .. *n) and the C library's specs in cf (names borrowed from out). */
int agpy_fields_parse(agpy_state *st, const char *who, PyObject *fields, agpy_field *out, int *n,
                      ag_field *cf);
/* The fields of a loaded table, each of shape (width,). */
int agpy_fields_of_replay(agpy_state *st, const char *who, const ag_replay *rep, agpy_field *out, int *n);
void agpy_fields_clear(agpy_field *f, int n);
/* The field called `key`, or -1. */
int agpy_field_index(const agpy_field *f, int n, PyObject *key);
/* The transitions in an array of a field: (k, *shape) or (*shape); -1 when
 * the shape is neither. */
int64_t agpy_field_count(const agpy_field *f, const agpy_in *in);
/* add()'s fields by index into val[0 .. n): from `dict` (when not NULL) or
 * the keywords kwnames with values kwvals; each field must be given once.
 * Keywords named in extra[0 .. n_extra) (other arguments of the call) go
 * to extra_val instead (which the caller set to NULL or a positional value). */
int agpy_fields_collect(agpy_state *st, const char *who, const agpy_field *f, int n, PyObject *dict,
                        PyObject *const *kwvals, PyObject *kwnames, PyObject **val, const char *const *extra,
                        PyObject **extra_val, int n_extra);

/* The arrays of one add, read: k transitions each, all on the host (ptr:
 * each in its field's dtype) or all on the device. */
typedef struct agpy_fields_in {
  agpy_in in[AGPY_MAX_FIELDS];
  void *scratch[AGPY_MAX_FIELDS];
  const void *ptr[AGPY_MAX_FIELDS];
  int64_t k;
  int device, got;
} agpy_fields_in;
int agpy_fields_read(agpy_state *st, ag_ctx *ctx, const char *who, const agpy_field *f, int n,
                     PyObject *const *val, agpy_fields_in *a);
void agpy_fields_release(agpy_fields_in *a, ag_ctx *ctx);
/* [(name, width, dtype name)]: the _fields() of a table. */
PyObject *agpy_fields_list(const agpy_field *f, int n);
/* Field i's values take `shape` (a sequence multiplying to its width). */
int agpy_field_set_shape(agpy_state *st, agpy_field *f, int n, int i, PyObject *shape);

/* ---- configuration dicts (config.c) ----
 * agpy_cfg_keys: cfg is a dict whose keys are all in `known` (NULL-ended);
 * the readers leave *out as it is when the key is absent. `who` names the
 * caller in messages, cstruct the C struct. Each returns 0 or -1 with an
 * exception naming the key. */
int agpy_cfg_keys(agpy_state *st, PyObject *cfg, const char *const *known, const char *who,
                  const char *cstruct);
int agpy_cfg_get(agpy_state *st, PyObject *cfg, const char *key, const char *kind, void *out,
                 const char *who);
/* "hidden": a sequence of at most `max` layer sizes. */
int agpy_cfg_hidden(agpy_state *st, PyObject *cfg, int64_t *hidden, int *n_hidden, int max, const char *who);
PyObject *agpy_hidden_tuple(const int64_t *hidden, int n);

/* ---- dtypes (module.c) ---- */
int agpy_dtype_parse(agpy_state *st, PyObject *obj, ag_dtype *out, const char *what);
const char *agpy_numpy_name(ag_dtype dt);
/* A new numpy array of shape/dtype, and its writable buffer. */
PyObject *agpy_numpy_empty(agpy_state *st, int ndim, const int64_t *shape, ag_dtype dt, Py_buffer *view);

/* ---- the types (each file's spec) ---- */
extern PyType_Spec agpy_ctx_spec, agpy_tensor_spec, agpy_buffer_spec, agpy_replay_spec, agpy_frames_spec,
    agpy_dqn_spec, agpy_ac_spec, agpy_env_spec;
void agpy_buffer_release(PyObject *self);
void agpy_replay_release(PyObject *self);
void agpy_frames_release(PyObject *self);
void agpy_dqn_release(PyObject *self);
void agpy_ac_release(PyObject *self);
/* A DQN configuration as the dict agrl.DQN.defaults() returns (dqn.c). */
PyObject *agpy_config_dict(const ag_dqn_config *c);
/* The C environment of an agrl._Env, or NULL (no exception set) for another object. */
ag_env *agpy_env_of(agpy_state *st, PyObject *obj);
/* An actor-critic configuration as agrl.ac_defaults() returns it (ac.c). */
PyObject *agpy_ac_config_dict(const ag_ac_config *c);
/* agrl._agrl.ac_defaults(algo): the defaults of "sac" or "td3" as a dict. */
PyObject *agpy_ac_defaults(PyObject *module, PyObject *algo);
PyObject *agpy_dqn_defaults(PyObject *module, PyObject *unused);

/* Rounds up to the block alignment (256 bytes). */
static inline size_t agpy_align(size_t n) { return (n + 255) & ~(size_t)255; }

#endif /* AGRL_PY_H */
