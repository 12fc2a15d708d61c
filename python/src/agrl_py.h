/* agrl_py.h — what the files of agrl's Python extension share: the object
 * layouts, errors, DLPack-aware inputs and results. */
#ifndef AGRL_PY_H
#define AGRL_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "agrl/agrl.h"
#include "dlpack.h"

/* ---- errors (module.c) ---- */

/* Raises the exception of status s with the C library's message (or `fallback`). */
PyObject *agpy_raise(ag_status s);
/* Raises agrl's exception of status s with a message of its own. */
PyObject *agpy_raisef(ag_status s, const char *fmt, ...);

/* An O& converter to an unsigned long long (0 .. 2^64-1, checked). */
int agpy_u64_conv(PyObject *obj, void *out);

/* ---- contexts (context.c) ---- */

typedef struct agpy_ctx {
  PyObject_HEAD ag_ctx *ctx; /* NULL once freed */
  PyObject **deps;           /* borrowed: objects made on the context (buffers, tables, DQNs) */
  int n_deps, cap_deps;
} agpy_ctx;

extern PyTypeObject agpy_ctx_type;
/* The live context of a Context object, or NULL with FreedError set. */
ag_ctx *agpy_ctx_get(agpy_ctx *c);
/* Objects made on a context: freed (their C side) before it is. */
typedef void (*agpy_release_fn)(PyObject *self);
int agpy_ctx_add_dep(agpy_ctx *c, PyObject *dep);
void agpy_ctx_drop_dep(agpy_ctx *c, PyObject *dep);
/* An object of Context, or a device string / None (a new context is then made). */
agpy_ctx *agpy_ctx_arg(PyObject *obj);

/* ---- results: tensors that hold a block (tensor.c) ----
 * An agrl.Tensor is a cols x rows table of elements (rows contiguous, ld
 * between columns), seen from Python with shape (cols, *inner) or (cols,),
 * inner multiplying to rows. It owns one reference to its block. */
typedef struct agpy_tensor {
  PyObject_HEAD agpy_ctx *ctx; /* strong; its ag_ctx may be gone */
  ag_block *block;
  void *data;
  ag_dtype dtype;
  ag_device_kind kind;
  int index;
  int64_t rows, cols, ld;
  int ndim;
  int64_t shape[6];
} agpy_tensor;

extern PyTypeObject agpy_tensor_type;
/* A Tensor over memory of `blk` (which gains a reference). inner/n_inner:
 * the shape of one column (NULL, 0: a 1-D tensor of cols values, each
 * column's first element). */
PyObject *agpy_tensor_new(agpy_ctx *c, ag_block *blk, void *data, ag_dtype dt, int64_t rows, int64_t cols,
                          int64_t ld, const int64_t *inner, int n_inner);
/* A Tensor of a C result carved out of blk. */
PyObject *agpy_tensor_of(agpy_ctx *c, ag_block *blk, ag_tensor *t, const int64_t *inner, int n_inner);

/* ---- inputs (input.c) ----
 * Any object with __dlpack__ (torch, JAX, CuPy, numpy), the buffer protocol,
 * or Python numbers and (nested) lists. */
typedef struct agpy_in {
  int on_device; /* CUDA memory of the context's device */
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
} agpy_in;

/* Reads obj; `what` names it in messages. ctx: the context device data
 * must be on (NULL: host data only). Returns 0, or -1 with an exception. */
int agpy_in_get(ag_ctx *ctx, PyObject *obj, agpy_in *in, const char *what);
/* Lets go of the input: at once (host data, or nothing queued reads it),
 * or after the work queued on ctx so far (device data). */
void agpy_in_release(agpy_in *in, ag_ctx *ctx_or_null);
/* The agrl dtype of an input's elements, or -1 when it has none. */
int agpy_in_agdtype(const agpy_in *in);
/* Converts the input's numel values to `dst` (an agrl dtype) into out,
 * checking that whole-number dtypes receive whole numbers in range. */
int agpy_in_convert(const agpy_in *in, ag_dtype dst, void *out, const char *what);
/* Element i of a host input as a double (ints of more than 53 bits rounded). */
double agpy_in_value(const agpy_in *in, int64_t i);
/* A host pointer to the input as `dst`: the input itself when it already is,
 * otherwise a converted copy in *scratch (malloc'd; free it). */
const void *agpy_in_as(const agpy_in *in, ag_dtype dst, void **scratch, const char *what);
/* A device tensor over a device input: [rows, cols] with rows = numel / cols. */
int agpy_in_wrap(ag_ctx *ctx, const agpy_in *in, int64_t rows, int64_t cols, ag_tensor **out,
                 const char *what);

/* Host observations (n, obs_dim) or (obs_dim,) as f32 (dqn.c): *n of them,
 * *single for the 1-D form; a converted copy in *scratch (free it). */
const float *agpy_obs_of(int64_t obs_dim, agpy_in *in, void **scratch, int *n, int *single, const char *what);

/* ---- configuration dicts (config.c) ----
 * agpy_cfg_keys: cfg is a dict whose keys are all in `known` (NULL-ended);
 * the readers leave *out as it is when the key is absent. `who` names the
 * caller in messages, cstruct the C struct. Each returns 0 or -1 with an
 * exception. agpy_cfg_int clamps to a C int (a value past it is out of its
 * field's range either way). */
int agpy_cfg_keys(PyObject *cfg, const char *const *known, const char *who, const char *cstruct);
int agpy_cfg_f(PyObject *cfg, const char *key, float *out);
int agpy_cfg_i64(PyObject *cfg, const char *key, int64_t *out, const char *who);
int agpy_cfg_int(PyObject *cfg, const char *key, int *out, const char *who);
int agpy_cfg_bool(PyObject *cfg, const char *key, int *out);
int agpy_cfg_u64(PyObject *cfg, const char *key, uint64_t *out);
/* "hidden": a sequence of at most `max` layer sizes. */
int agpy_cfg_hidden(PyObject *cfg, int64_t *hidden, int *n_hidden, int max, const char *who);
PyObject *agpy_hidden_tuple(const int64_t *hidden, int n);

/* ---- dtypes ---- */
int agpy_dtype_parse(PyObject *obj, ag_dtype *out, const char *what);
const char *agpy_numpy_name(ag_dtype dt);
/* A new numpy array of shape/dtype, and its writable buffer. */
PyObject *agpy_numpy_empty(int ndim, const int64_t *shape, ag_dtype dt, Py_buffer *view);

/* ---- the types of the other files ---- */
extern PyTypeObject agpy_buffer_type;
extern PyTypeObject agpy_replay_type;
extern PyTypeObject agpy_dqn_type;
/* A DQN configuration as the dict agrl.DQN.defaults() returns (module.c). */
PyObject *agpy_config_dict(const ag_dqn_config *c);
extern PyTypeObject agpy_env_type;
/* The C environment of an agrl._Env, or NULL (no exception set) for another object. */
ag_env *agpy_env_of(PyObject *obj);
/* SAC and TD3 (ac.c); an actor-critic configuration as agrl.ac_defaults() returns it. */
extern PyTypeObject agpy_ac_type;
void agpy_ac_release(PyObject *self);
PyObject *agpy_ac_config_dict(const ag_ac_config *c);
/* agrl._agrl.ac_defaults(algo): the defaults of "sac" or "td3" as a dict. */
PyObject *agpy_ac_defaults(PyObject *module, PyObject *algo);

/* Rounds up to the block alignment (256 bytes). */
static inline size_t agpy_align(size_t n) { return (n + 255) & ~(size_t)255; }

#endif /* AGRL_PY_H */
