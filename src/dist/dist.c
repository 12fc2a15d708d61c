/* dist.c — a process group over NCCL: bootstrap through a file, grouped
 * collectives on the context's queue.
 *
 * The communicator is made non-blocking (ncclConfig_t.blocking = 0) so that
 * joining can give up after a timeout instead of hanging when a peer never
 * comes; every NCCL call is therefore followed by a poll of
 * ncclCommGetAsyncError until it leaves ncclInProgress, as NCCL's contract
 * for non-blocking communicators asks. Collectives are enqueued on the
 * context's CUDA stream, so inside a recording they become nodes of the
 * recorded graph.
 *
 * A group of one needs no NCCL: all-reduce and broadcast leave the tensors
 * as they are, all-gather returns a detached view.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agrl/dist.h"
#include "agrl/graph.h"
#include "core/internal.h"

#ifdef AGRL_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

struct ag_dist {
  ag_ctx *ctx;
  int rank, world;
  uint64_t epoch;   /* ctx->epoch when the group was made: a device switch ends it */
  ag_tensor *token; /* 1 x 1 i32 for barriers */
#ifdef AGRL_WITH_NCCL
  ncclComm_t comm;
#endif
};

int ag_dist_nccl_available(void) {
#ifdef AGRL_WITH_NCCL
  return 1;
#else
  return 0;
#endif
}

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

#ifdef AGRL_WITH_NCCL

#define ID_MAGIC "AGRLNCL1"

static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Waits until a non-blocking NCCL call has finished (or the deadline passed,
 * deadline <= 0: no deadline). */
static ag_status nccl_wait(ncclComm_t comm, ncclResult_t r, const char *fn, const char *what,
                           double deadline) {
  while (r == ncclInProgress) {
    if (deadline > 0 && mono_s() > deadline)
      return ag__fail(AG_ERR_TIMEOUT, "%s: %s did not finish in time: are all ranks running?", fn, what);
    sched_yield();
    ncclResult_t a = ncclCommGetAsyncError(comm, &r);
    if (a != ncclSuccess) r = a;
  }
  if (r != ncclSuccess)
    return ag__fail(AG_ERR_DEVICE, "%s: NCCL %s failed: %s (%s)", fn, what, ncclGetErrorString(r),
                    comm ? ncclGetLastError(comm) : "");
  return AG_OK;
}

/* Rank 0: publishes the id. link() makes the file appear whole and refuses
 * to replace one that exists. */
static ag_status write_id(const char *path, const ncclUniqueId *id, const char *fn) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: id_path is too long", fn);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return ag__fail(AG_ERR_IO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
  unsigned char rec[8 + sizeof *id];
  memcpy(rec, ID_MAGIC, 8);
  memcpy(rec + 8, id, sizeof *id);
  ssize_t w = write(fd, rec, sizeof rec);
  int e = errno;
  close(fd);
  if (w != (ssize_t)sizeof rec) {
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

/* Other ranks: waits for the id file. */
static ag_status read_id(const char *path, ncclUniqueId *id, double deadline, const char *fn) {
  unsigned char rec[8 + sizeof *id];
  for (;;) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
      ssize_t r = read(fd, rec, sizeof rec);
      close(fd);
      if (r == (ssize_t)sizeof rec && !memcmp(rec, ID_MAGIC, 8)) {
        memcpy(id, rec + 8, sizeof *id);
        return AG_OK;
      }
      if (r >= 0 && r == (ssize_t)sizeof rec)
        return ag__fail(AG_ERR_IO, "%s: %s is not an agrl group id", fn, path);
    } else if (errno != ENOENT) {
      return ag__fail(AG_ERR_IO, "%s: cannot read %s: %s", fn, path, strerror(errno));
    }
    if (mono_s() > deadline)
      return ag__fail(AG_ERR_TIMEOUT, "%s: no group id at %s in time: is rank 0 running?", fn, path);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

static ncclDataType_t nccl_type(ag_dtype dt) {
  switch (dt) {
    case AG_F32: return ncclFloat32;
    case AG_F16: return ncclFloat16;
    case AG_BF16: return ncclBfloat16;
    case AG_U8: return ncclUint8;
    case AG_I32: return ncclInt32;
    default: return ncclInt64;
  }
}
#endif /* AGRL_WITH_NCCL */

void ag_dist_free(ag_dist *g) {
  if (!g) return;
  if (g->ctx->epoch == g->epoch) (void)ag_ctx_sync(g->ctx);
#ifdef AGRL_WITH_NCCL
  if (g->comm) {
    ncclResult_t r = ncclCommFinalize(g->comm);
    if (nccl_wait(g->comm, r, "ag_dist_free", "finalize", mono_s() + 60.0) == AG_OK)
      ncclCommDestroy(g->comm);
    else
      ncclCommAbort(g->comm);
  }
#endif
  ag_tensor_free(g->token);
  free(g);
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
  if (world > 1) {
    if (!id_path || !id_path[0])
      return ag__fail(AG_ERR_INVALID_ARG, "%s: a group of %d needs an id_path", fn, world);
    if (ag_ctx_device(ctx) != AG_DEVICE_CUDA)
      return ag__fail(AG_ERR_UNSUPPORTED,
                      "%s: a group of %d processes needs CUDA contexts (this one is on %s)", fn, world,
                      ag_ctx_device_name(ctx));
#ifndef AGRL_WITH_NCCL
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: this agrl was built without NCCL: groups of more than one process are not available",
                    fn);
#endif
  }
  ag_dist *g = ag__calloc(1, sizeof *g);
  if (!g) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  g->ctx = ctx;
  g->rank = rank;
  g->world = world;
  g->epoch = ctx->epoch;
  if ((s = ag_tensor_create(ctx, 1, 1, AG_I32, NULL, &g->token))) {
    free(g);
    return s;
  }
#ifdef AGRL_WITH_NCCL
  if (world > 1) {
    setenv("NCCL_NVLS_ENABLE", "0", 0); /* see dist.h */
    double deadline = mono_s() + timeout_s;
    ncclUniqueId id;
    ncclResult_t r;
    int wrote = 0;
    if (rank == 0) {
      if ((r = ncclGetUniqueId(&id)) != ncclSuccess)
        s = ag__fail(AG_ERR_DEVICE, "%s: ncclGetUniqueId failed: %s", fn, ncclGetErrorString(r));
      if (!s) s = write_id(id_path, &id, fn);
      wrote = !s;
    } else {
      s = read_id(id_path, &id, deadline, fn);
    }
    if (!s && cudaSetDevice(ag_ctx_device_index(ctx)) != cudaSuccess)
      s = ag__fail(AG_ERR_DEVICE, "%s: cannot select cuda:%d", fn, ag_ctx_device_index(ctx));
    if (!s) {
      ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
      cfg.blocking = 0;
      r = ncclCommInitRankConfig(&g->comm, world, id, rank, &cfg);
      s = nccl_wait(g->comm, r, fn, "joining the group", deadline);
      if (s && g->comm) {
        ncclCommAbort(g->comm);
        g->comm = NULL;
      }
    }
    /* once the join is over (done or given up) nobody needs the id */
    if (wrote) unlink(id_path);
    if (s) {
      ag_tensor_free(g->token);
      free(g);
      return s;
    }
  }
#endif
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

#ifdef AGRL_WITH_NCCL
/* Runs n NCCL calls as one group: call(g, i, ptr, count, type, stream). */
typedef ncclResult_t (*coll_fn)(ag_dist *g, void *p, size_t count, ncclDataType_t t, cudaStream_t st,
                                const void *arg);

static ag_status grouped(ag_dist *g, ag_tensor *const *ts, int n, coll_fn call, const void *arg,
                         const char *fn, const char *what) {
  void **ptrs = ag__malloc(sizeof *ptrs * (size_t)n);
  if (!ptrs) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag_status s = AG_OK;
  for (int i = 0; i < n && !s; i++) s = ag__tensor_ptr(ts[i], &ptrs[i]);
  if (s) {
    free(ptrs);
    return s;
  }
  cudaStream_t st = (cudaStream_t)ag_ctx_native_stream(g->ctx);
  s = nccl_wait(g->comm, ncclGroupStart(), fn, "group start", 0);
  for (int i = 0; i < n && !s; i++)
    s = nccl_wait(g->comm, call(g, ptrs[i], (size_t)ag_tensor_numel(ts[i]), nccl_type(ts[i]->dtype), st, arg),
                  fn, what, 0);
  ag_status e = nccl_wait(g->comm, ncclGroupEnd(), fn, what, 0);
  free(ptrs);
  return s ? s : e;
}

static ncclResult_t do_allreduce(ag_dist *g, void *p, size_t count, ncclDataType_t t, cudaStream_t st,
                                 const void *arg) {
  return ncclAllReduce(p, p, count, t, *(const ncclRedOp_t *)arg, g->comm, st);
}

static ncclResult_t do_broadcast(ag_dist *g, void *p, size_t count, ncclDataType_t t, cudaStream_t st,
                                 const void *arg) {
  return ncclBroadcast(p, p, count, t, *(const int *)arg, g->comm, st);
}
#endif

ag_status ag_dist_allreduce(ag_dist *g, ag_tensor *const *ts, int n, ag_reduce_op op) {
  static const char fn[] = "ag_dist_allreduce";
  if (op != AG_REDUCE_SUM && op != AG_REDUCE_MEAN && op != AG_REDUCE_MAX)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: unknown reduction %d", fn, (int)op);
  ag_status s = check_tensors(g, ts, n, fn, op == AG_REDUCE_MEAN ? 2 : 1);
  if (s || g->world == 1) return s;
#ifdef AGRL_WITH_NCCL
  ncclRedOp_t nop = op == AG_REDUCE_SUM ? ncclSum : op == AG_REDUCE_MEAN ? ncclAvg : ncclMax;
  return grouped(g, ts, n, do_allreduce, &nop, fn, "all-reduce");
#else
  return AG_ERR_UNSUPPORTED;
#endif
}

ag_status ag_dist_broadcast(ag_dist *g, ag_tensor *const *ts, int n, int root) {
  static const char fn[] = "ag_dist_broadcast";
  ag_status s = check_tensors(g, ts, n, fn, 0);
  if (s) return s;
  if (root < 0 || root >= g->world)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: root %d is not a rank of a group of %d", fn, root, g->world);
  if (g->world == 1) return AG_OK;
#ifdef AGRL_WITH_NCCL
  return grouped(g, ts, n, do_broadcast, &root, fn, "broadcast");
#else
  return AG_ERR_UNSUPPORTED;
#endif
}

ag_status ag_dist_allgather(ag_dist *g, ag_tensor *x, ag_tensor **out) {
  static const char fn[] = "ag_dist_allgather";
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "%s: out is NULL", fn);
  ag_status s = check_tensors(g, &x, 1, fn, 0);
  if (s) return s;
  if (g->world == 1) return ag_detach(x, out);
#ifdef AGRL_WITH_NCCL
  ag_tensor *o;
  if ((s = ag__tensor_temp(g->ctx, x->rows, x->cols * g->world, x->dtype, &o))) return s;
  void *src;
  if ((s = ag__tensor_ptr(x, &src))) return s;
  cudaStream_t st = (cudaStream_t)ag_ctx_native_stream(g->ctx);
  s = nccl_wait(g->comm,
                ncclAllGather(src, o->data, (size_t)ag_tensor_numel(x), nccl_type(x->dtype), g->comm, st), fn,
                "all-gather", 0);
  if (!s) *out = o;
  return s;
#else
  return AG_ERR_UNSUPPORTED;
#endif
}

ag_status ag_dist_barrier(ag_dist *g) {
  static const char fn[] = "ag_dist_barrier";
  ag_status s = check_group(g, fn);
  if (!s) s = ag__not_recording(g->ctx, fn);
  if (!s && g->world > 1) s = ag_dist_allreduce(g, &g->token, 1, AG_REDUCE_SUM);
  if (!s) s = ag_ctx_sync(g->ctx);
  return s;
}
