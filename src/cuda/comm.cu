/* comm.cu — the CUDA backend's collectives (backend.h, ag__comm_ops) over
 * NCCL: one communicator a process, collectives on the state's stream.
 *
 * The communicator is made non-blocking (ncclConfig_t.blocking = 0) so that
 * joining can give up at a deadline instead of hanging when a peer never
 * comes; every NCCL call is therefore followed by a poll of
 * ncclCommGetAsyncError until it leaves ncclInProgress, as NCCL's contract
 * for non-blocking communicators asks. Collectives are enqueued on the
 * stream, so inside a recording they become nodes of the recorded graph.
 *
 * Built without NCCL (AGRL_WITH_NCCL undefined) this file is empty and the
 * backend has no collectives (AG__CUDA_COMM is NULL).
 */
#include "cuda/cuda_internal.h"

#ifdef AGRL_WITH_NCCL
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

static_assert(sizeof(ncclUniqueId) <= AG__COMM_ID_MAX, "an NCCL id must fit AG__COMM_ID_MAX");

/* NVLink multicast stays off unless asked for (agrl/dist.h says why). */
static void nccl_env(void) { setenv("NCCL_NVLS_ENABLE", "0", 0); }

/* Waits until a non-blocking NCCL call has finished (or the deadline passed,
 * deadline <= 0: no deadline). */
static ag_status nccl_wait(ncclComm_t comm, ncclResult_t r, const char *fn, const char *what,
                           double deadline) {
  while (r == ncclInProgress) {
    if (deadline > 0 && ag__mono_s() > deadline)
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

static int comm_available(void) {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess;
}

static ag_status comm_make_id(void *id, const char *fn) {
  nccl_env();
  ncclUniqueId u;
  ncclResult_t r = ncclGetUniqueId(&u);
  if (r != ncclSuccess)
    return ag__fail(AG_ERR_DEVICE, "%s: ncclGetUniqueId failed: %s", fn, ncclGetErrorString(r));
  memcpy(id, &u, sizeof u);
  return AG_OK;
}

static ag_status comm_init(void *p, int rank, int world, const void *id, double deadline, const char *fn,
                           void **out) {
  ag__cuda_state *st = (ag__cuda_state *)p;
  nccl_env();
  if (cudaSetDevice(st->device) != cudaSuccess) {
    (void)cudaGetLastError();
    return ag__fail(AG_ERR_DEVICE, "%s: cannot select cuda:%d", fn, st->device);
  }
  ncclUniqueId u;
  memcpy(&u, id, sizeof u);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, world, u, rank, &cfg);
  ag_status s = nccl_wait(comm, r, fn, "joining the group", deadline);
  if (s) {
    if (comm) ncclCommAbort(comm);
    return s;
  }
  *out = comm;
  return AG_OK;
}

/* The n buffers as one NCCL group: call(buffer, type) for each. */
template <typename Call>
static ag_status grouped(ncclComm_t comm, const ag__comm_buf *bufs, int n, const char *fn, const char *what,
                         Call call) {
  ag_status s = nccl_wait(comm, ncclGroupStart(), fn, "group start", 0);
  for (int i = 0; i < n && !s; i++) s = nccl_wait(comm, call(bufs[i], nccl_type(bufs[i].dtype)), fn, what, 0);
  ag_status e = nccl_wait(comm, ncclGroupEnd(), fn, what, 0);
  return s ? s : e;
}

static ag_status comm_allreduce(void *p, void *c, const ag__comm_buf *bufs, int n, ag__comm_reduce op,
                                const char *fn) {
  cudaStream_t stream = ((ag__cuda_state *)p)->stream;
  ncclComm_t comm = (ncclComm_t)c;
  const ncclRedOp_t nop = op == AG__COMM_SUM ? ncclSum : op == AG__COMM_MEAN ? ncclAvg : ncclMax;
  return grouped(comm, bufs, n, fn, "all-reduce", [&](const ag__comm_buf &b, ncclDataType_t t) {
    return ncclAllReduce(b.ptr, b.ptr, b.count, t, nop, comm, stream);
  });
}

static ag_status comm_broadcast(void *p, void *c, const ag__comm_buf *bufs, int n, int root, const char *fn) {
  cudaStream_t stream = ((ag__cuda_state *)p)->stream;
  ncclComm_t comm = (ncclComm_t)c;
  return grouped(comm, bufs, n, fn, "broadcast", [&](const ag__comm_buf &b, ncclDataType_t t) {
    return ncclBroadcast(b.ptr, b.ptr, b.count, t, root, comm, stream);
  });
}

static ag_status comm_allgather(void *p, void *c, ag__comm_buf src, void *dst, const char *fn) {
  cudaStream_t stream = ((ag__cuda_state *)p)->stream;
  ncclComm_t comm = (ncclComm_t)c;
  return nccl_wait(comm, ncclAllGather(src.ptr, dst, src.count, nccl_type(src.dtype), comm, stream), fn,
                   "all-gather", 0);
}

static ag_status comm_finalize(void *c, double deadline, const char *fn) {
  ncclComm_t comm = (ncclComm_t)c;
  return nccl_wait(comm, ncclCommFinalize(comm), fn, "finalize", deadline);
}

static void comm_destroy(void *c, int abort) {
  if (abort)
    ncclCommAbort((ncclComm_t)c);
  else
    ncclCommDestroy((ncclComm_t)c);
}

const ag__comm_ops ag__cuda_comm = {
    sizeof(ncclUniqueId), comm_available, comm_make_id,  comm_init,    comm_allreduce,
    comm_broadcast,       comm_allgather, comm_finalize, comm_destroy,
};
#endif /* AGRL_WITH_NCCL */
