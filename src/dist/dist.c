/* dist.c — a process group: bootstrap through a file, grouped collectives
 * on the context's queue.
 *
 * The device work goes through the backend's collectives (backend.h,
 * ag__comm_ops; the CUDA backend's are NCCL, src/cuda/comm.cu): this file
 * checks the arguments, publishes and reads the group id the backend makes,
 * and hands it device pointers. The collectives are enqueued on the
 * context's queue, so inside a recording they become part of the recorded
 * step.
 *
 * A group of one needs no collectives: all-reduce and broadcast leave the
 * tensors as they are, all-gather returns a detached view.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agrl/dist.h"
#include "agrl/graph.h"
#include "core/internal.h"

struct ag_dist {
  ag_ctx *ctx;
  int rank, world;
  uint64_t epoch;          /* ctx->epoch when the group was made: a device switch ends it */
  ag_tensor *token;        /* 1 x 1 i32 for barriers */
  const ag__comm_ops *ops; /* the collectives of the backend it was made on (world > 1) */
  void *comm;
};

/* A backend's collectives, NULL when it (or this build) has none. */
static const ag__comm_ops *comm_of(const ag__backend *be) {
  return be && be->comm && be->comm->available() ? be->comm : NULL;
}

/* Groups of several processes run on the CUDA backend's collectives (NCCL). */
int ag_dist_nccl_available(void) { return comm_of(ag__backend_of(AG_DEVICE_CUDA)) != NULL; }

int ag_dist_rank(const ag_dist *g) { return g ? g->rank : -1; }
int ag_dist_world(const ag_dist *g) { return g ? g->world : 0; }
ag_ctx *ag_dist_ctx(const ag_dist *g) { return g ? g->ctx : NULL; }

static ag_status check_group(const ag_dist *g, const char *fn) {
  if (!g) return ag__fail(AG_ERR_INVALID_ARG, "%s: the group is NULL", fn);
  if (g->ctx->epoch != g->epoch)
    return ag__fail(AG_ERR_STATE, "%s: the context changed device since the group was made; make a new group",
                    fn);
  return AG_OK;
}

#define ID_MAGIC "AGRLNCL1"

/* Rank 0: publishes the id (n bytes). link() makes the file appear whole
 * and refuses to replace one that exists. */
static ag_status write_id(const char *path, const unsigned char *id, size_t n, const char *fn) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: id_path is too long", fn);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return ag__fail(AG_ERR_IO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
  unsigned char rec[8 + AG__COMM_ID_MAX];
  memcpy(rec, ID_MAGIC, 8);
  memcpy(rec + 8, id, n);
  ssize_t w = write(fd, rec, 8 + n);
  int e = errno;
  close(fd);
  if (w != (ssize_t)(8 + n)) {
    unlink(tmp);
    return ag__fail(AG_ERR_IO, "%s: cannot write %s: %s", fn, tmp, strerror(e));
  }
  int l = link(tmp, path);
  e = errno;
  unlink(tmp);
  if (l) {
    if (e == EEXIST)
      return ag__fail(AG_ERR_STATE, "%s: %s exists (left by an earlier run?): remove it or use a fresh path",
                      fn, path);
    return ag__fail(AG_ERR_IO, "%s: cannot create %s: %s", fn, path, strerror(e));
  }
  return AG_OK;
}

/* Other ranks: waits for the id file (an id of n bytes). */
static ag_status read_id(const char *path, unsigned char *id, size_t n, double deadline, const char *fn) {
  unsigned char rec[8 + AG__COMM_ID_MAX];
  const ssize_t want = (ssize_t)(8 + n);
  for (;;) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
      ssize_t r = read(fd, rec, (size_t)want);
      close(fd);
      if (r == want && !memcmp(rec, ID_MAGIC, 8)) {
        memcpy(id, rec + 8, n);
        return AG_OK;
      }
      if (r == want) return ag__fail(AG_ERR_IO, "%s: %s is not an agrl group id", fn, path);
    } else if (errno != ENOENT) {
      return ag__fail(AG_ERR_IO, "%s: cannot read %s: %s", fn, path, strerror(errno));
    }
    if (ag__mono_s() > deadline)
      return ag__fail(AG_ERR_TIMEOUT, "%s: no group id at %s in time: is rank 0 running?", fn, path);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

void ag_dist_free(ag_dist *g) {
  if (!g) return;
  if (g->ctx->epoch == g->epoch) (void)ag_ctx_sync(g->ctx);
  if (g->comm)
    g->ops->destroy(g->comm, g->ops->finalize(g->comm, ag__mono_s() + 60.0, "ag_dist_free") != AG_OK);
  ag_tensor_free(g->token);
  free(g);
}

/* Joins the group through the id file and the backend's collectives
 * (world > 1); writes g->comm. */
static ag_status join(ag_dist *g, const char *id_path, double timeout_s, const char *fn) {
  const ag__comm_ops *ops = g->ops;
  double deadline = ag__mono_s() + timeout_s;
  unsigned char id[AG__COMM_ID_MAX]; /* id_bytes of them (backend.h) */
  ag_status s;
  int wrote = 0;
  if (g->rank == 0) {
    s = ops->make_id(id, fn);
    if (!s) s = write_id(id_path, id, ops->id_bytes, fn);
    wrote = !s;
  } else {
    s = read_id(id_path, id, ops->id_bytes, deadline, fn);
  }
  if (!s) s = ops->init(g->ctx->st, g->rank, g->world, id, deadline, fn, &g->comm);
  /* once the join is over (done or given up) nobody needs the id */
  if (wrote) unlink(id_path);
  return s;
}

ag_status ag_dist_create(ag_ctx *ctx, int rank, int world, const char *id_path, double timeout_s,
                         ag_dist **out) {
  static const char fn[] = "ag_dist_create";
  if (!ctx || !out) return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx and out must not be NULL", fn);
  if (world < 1 || rank < 0 || rank >= world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: rank %d of world %d: need world >= 1 and 0 <= rank < world", fn,
                    rank, world);
  if (!(timeout_s > 0.0))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: timeout_s = %g must be positive", fn, timeout_s);
  ag_status s = ag__not_recording(ctx, fn);
  if (s) return s;
  const ag__comm_ops *ops = NULL;
  if (world > 1) {
    if (!id_path || !id_path[0])
      return ag__fail(AG_ERR_INVALID_ARG, "%s: a group of %d needs an id_path", fn, world);
    if (ag_ctx_device(ctx) != AG_DEVICE_CUDA)
      return ag__fail(AG_ERR_UNSUPPORTED,
                      "%s: a group of %d processes needs CUDA contexts (this one is on %s)", fn, world,
                      ag_ctx_device_name(ctx));
    if (!(ops = comm_of(ctx->be)))
      return ag__fail(
          AG_ERR_UNSUPPORTED,
          "%s: this agrl was built without NCCL: groups of more than one process are not available", fn);
  }
  ag_dist *g = ag__calloc(1, sizeof *g);
  if (!g) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  g->ctx = ctx;
  g->rank = rank;
  g->world = world;
  g->epoch = ctx->epoch;
  g->ops = ops;
  if ((s = ag_tensor_create(ctx, 1, 1, AG_I32, NULL, &g->token))) {
    free(g);
    return s;
  }
  if (world > 1 && (s = join(g, id_path, timeout_s, fn))) {
    ag_tensor_free(g->token);
    free(g);
    return s;
  }
  *out = g;
  return AG_OK;
}

/* Validates a list of tensors for a collective. */
static ag_status check_tensors(ag_dist *g, ag_tensor *const *ts, int n, const char *fn, int reduce) {
  ag_status s = check_group(g, fn);
  if (s) return s;
  if (n < 1 || !ts) return ag__fail(AG_ERR_INVALID_ARG, "%s: give at least one tensor (n = %d)", fn, n);
  for (int i = 0; i < n; i++) {
    if ((s = ag__check_tensor(ts[i], fn, "a tensor"))) return s;
    if (ts[i]->ctx != g->ctx)
      return ag__fail(AG_ERR_INVALID_ARG, "%s: tensor %d belongs to another context", fn, i);
    if (ts[i]->rows != ts[i]->ld && ts[i]->cols > 1)
      return ag__fail(AG_ERR_SHAPE, "%s: tensor %d is a strided view; make it contiguous first", fn, i);
    ag_dtype dt = ts[i]->dtype;
    if (reduce && dt != AG_F32 && dt != AG_I32 && dt != AG_I64)
      return ag__fail(AG_ERR_SHAPE, "%s: tensor %d is %s; reductions take f32, i32 or i64", fn, i,
                      ag_dtype_name(dt));
    if (reduce == 2 && dt != AG_F32)
      return ag__fail(AG_ERR_SHAPE, "%s: a mean needs f32 tensors (tensor %d is %s)", fn, i,
                      ag_dtype_name(dt));
  }
  return AG_OK;
}

/* The device memory of tensor t as a buffer of a collective. */
static ag_status comm_buf(ag_tensor *t, ag__comm_buf *out) {
  out->count = (size_t)ag_tensor_numel(t);
  out->dtype = t->dtype;
  return ag__tensor_ptr(t, &out->ptr);
}

/* The buffers of n tensors, in host memory the caller frees. */
static ag_status comm_bufs(ag_tensor *const *ts, int n, const char *fn, ag__comm_buf **out) {
  ag__comm_buf *b = ag__malloc(sizeof *b * (size_t)n);
  if (!b) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag_status s = AG_OK;
  for (int i = 0; i < n && !s; i++) s = comm_buf(ts[i], &b[i]);
  if (s) {
    free(b);
    return s;
  }
  *out = b;
  return AG_OK;
}

ag_status ag_dist_allreduce(ag_dist *g, ag_tensor *const *ts, int n, ag_reduce_op op) {
  static const char fn[] = "ag_dist_allreduce";
  if (op != AG_REDUCE_SUM && op != AG_REDUCE_MEAN && op != AG_REDUCE_MAX)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: unknown reduction %d", fn, (int)op);
  ag_status s = check_tensors(g, ts, n, fn, op == AG_REDUCE_MEAN ? 2 : 1);
  if (s || g->world == 1) return s;
  ag__comm_buf *b = NULL;
  if ((s = comm_bufs(ts, n, fn, &b))) return s;
  const ag__comm_reduce cop = op == AG_REDUCE_SUM    ? AG__COMM_SUM
                              : op == AG_REDUCE_MEAN ? AG__COMM_MEAN
                                                     : AG__COMM_MAX;
  s = g->ops->allreduce(g->ctx->st, g->comm, b, n, cop, fn);
  free(b);
  return s;
}

ag_status ag_dist_broadcast(ag_dist *g, ag_tensor *const *ts, int n, int root) {
  static const char fn[] = "ag_dist_broadcast";
  ag_status s = check_tensors(g, ts, n, fn, 0);
  if (s) return s;
  if (root < 0 || root >= g->world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: root %d is not a rank of a group of %d", fn, root, g->world);
  if (g->world == 1) return AG_OK;
  ag__comm_buf *b = NULL;
  if ((s = comm_bufs(ts, n, fn, &b))) return s;
  s = g->ops->broadcast(g->ctx->st, g->comm, b, n, root, fn);
  free(b);
  return s;
}

ag_status ag_dist_allgather(ag_dist *g, ag_tensor *x, ag_tensor **out) {
  static const char fn[] = "ag_dist_allgather";
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  ag_status s = check_tensors(g, &x, 1, fn, 0);
  if (s) return s;
  if (g->world == 1) return ag_detach(x, out);
  ag_tensor *o;
  if ((s = ag__tensor_temp(g->ctx, x->rows, x->cols * g->world, x->dtype, &o))) return s;
  ag__comm_buf src;
  if ((s = comm_buf(x, &src))) return s;
  s = g->ops->allgather(g->ctx->st, g->comm, src, o->data, fn);
  if (!s) *out = o;
  return s;
}

ag_status ag_dist_barrier(ag_dist *g) {
  static const char fn[] = "ag_dist_barrier";
  ag_status s = check_group(g, fn);
  if (!s) s = ag__not_recording(g->ctx, fn);
  if (!s && g->world > 1) s = ag_dist_allreduce(g, &g->token, 1, AG_REDUCE_SUM);
  if (!s) s = ag_ctx_sync(g->ctx);
  return s;
}
