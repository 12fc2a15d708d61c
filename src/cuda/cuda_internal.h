/* cuda_internal.h — state of the CUDA backend, shared by its .cu files.
 *
 * One state per opened device: the context's stream (its queue), a pinned
 * staging ring through which uploads and downloads pass (so a caller's
 * memory may be reused as soon as a write returns, without a host wait; a
 * large copy from page-locked memory on an idle stream is sent directly and
 * waited for instead), and the library handles the kernels need.
 */
#ifndef AGRL_CUDA_INTERNAL_H
#define AGRL_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <tuple>
#include <utility>

#include "agrl/buffer.h" /* AG_TRANSFER_PART_BYTES */
#include "base/base.h"

#define AG__CUDA_RING_EVENTS 128

/* A reservation of staging bytes [start, end) and the event recorded after
 * the copy that reads them. */
typedef struct ag__ring_entry {
  size_t start, end;
  cudaEvent_t ev;
} ag__ring_entry;

typedef struct ag__cuda_state {
  int device;
  int sm_count;
  /* the queue kernels go to: `main` (a blocking stream, so that work on
   * the device's legacy default stream is ordered with it by the device),
   * or `capture` while recording */
  cudaStream_t stream;
  cudaStream_t main;
  /* a non-blocking stream that recordings are captured on: a capture on a
   * blocking stream would make any thread's use of the legacy default
   * stream (torch's, CuPy's) an error until it ends. Made at the first
   * recording. */
  cudaStream_t capture;
  char *staging;       /* pinned host memory */
  char *staging_dev;   /* where kernels read it (NULL: it is not mapped) */
  size_t staging_size; /* 2 * AG_TRANSFER_PART_BYTES */
  ag__ring_entry ring[AG__CUDA_RING_EVENTS];
  int ring_first, ring_count;
  /* the newest ring_open entries are parts of a large upload in progress
   * whose copy is not queued yet (no event); 0 between calls */
  int ring_open;
  int staged; /* the newest entry is a stage() whose readers are not queued yet */
  cudaEvent_t part_ev[2];
  cublasHandle_t blas;
  void *blas_ws; /* cuBLAS workspace (fixed, so that recordings need no allocation) */
  int recording;
  /* a graph of one kernel node, instantiated once: eager launches of the
   * small kernels that a step issues alone (a gather) set its node and
   * launch it (ag__launch_one) */
  cudaGraph_t one_graph;
  cudaGraphNode_t one_node;
  cudaGraphExec_t one_exec;
  int one_off; /* the graph could not be made: plain launches */
} ag__cuda_state;

/* A kernel launcher: checks nothing, launches on st->stream. */
typedef ag_status (*ag__cuda_launch_fn)(ag__cuda_state *st, const void *args);

/* Sets the message from a CUDA error and returns AG_ERR_DEVICE
 * (AG_ERR_OUT_OF_MEMORY for allocation failures). */
ag_status ag__cuda_fail(cudaError_t e, const char *what);

/* Checks the last launch; `what` names the kernel. */
ag_status ag__cuda_check_launch(const char *what);

/* Makes st's device current for this thread. */
void ag__cuda_enter(ag__cuda_state *st);

/* Grid size for a grid-stride loop over n items with `block` threads. */
unsigned ag__cuda_grid(const ag__cuda_state *st, int64_t n, int block);

/* ---- launches: programmatic dependent launch (sm_90) ----
 * Every kernel is launched with programmatic stream serialization allowed,
 * so that it may be scheduled while the kernel before it on the stream
 * finishes (in a recorded graph, a programmatic edge): the launch latency
 * between the small kernels of a step overlaps the previous kernel's tail.
 * In exchange every kernel calls ag__pdl_wait() first, before it reads or
 * writes global memory: it returns once the previous kernel has completed
 * and its writes are visible. Only the kernels of the fused DQN update
 * trigger early (ag__pdl_trigger); every other kernel's successor is
 * scheduled when it ends. */
__device__ __forceinline__ void ag__pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

/* Lets the kernel after this one on the stream be scheduled now, while
 * this one runs: its blocks take free room on the SMs and wait in
 * ag__pdl_wait() (which still returns only once this kernel has completed
 * and its writes are visible). Called by a kernel right after its own
 * ag__pdl_wait(), so that a kernel two places later in the stream is
 * launched only after this one's predecessor has completed: such a kernel
 * may read what that predecessor (or anything earlier) wrote before its
 * own wait. */
__device__ __forceinline__ void ag__pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

template <typename... KArgs, typename... Args>
static inline cudaError_t ag__launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                     cudaStream_t stream, Args &&...args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args &&>(args)...);
}

/* Launches a kernel as the node of st's one-node graph: the node's
 * function, grid and arguments are set, then the graph is launched on the
 * stream, in order with everything before and after it. A graph launch
 * costs the host less than a kernel launch (on the machines measured,
 * 2.2 against 3.2-3.9 us), which decides the rate of small calls issued
 * one at a time. While recording, and from then on if the graph cannot be
 * made, a plain launch. */
#ifndef AG__ONE_GRAPH
#define AG__ONE_GRAPH 1
#endif
template <typename... KArgs, size_t... I>
static inline void ag__param_ptrs(std::tuple<KArgs...> &t, void **p, std::index_sequence<I...>) {
  ((p[I] = (void *)&std::get<I>(t)), ...);
}

template <typename... KArgs, typename... Args>
static inline cudaError_t ag__launch_one(ag__cuda_state *st, void (*kernel)(KArgs...), dim3 grid, dim3 block,
                                         Args &&...args) {
  if (!AG__ONE_GRAPH || st->recording || st->one_off)
    return ag__launch(kernel, grid, block, 0, st->stream, static_cast<Args &&>(args)...);
  std::tuple<KArgs...> vals(static_cast<Args &&>(args)...);
  void *ptrs[sizeof...(KArgs) > 0 ? sizeof...(KArgs) : 1];
  ag__param_ptrs(vals, ptrs, std::index_sequence_for<KArgs...>{});
  cudaKernelNodeParams kp = {};
  kp.func = (void *)kernel;
  kp.gridDim = grid;
  kp.blockDim = block;
  kp.sharedMemBytes = 0;
  kp.kernelParams = ptrs;
  cudaError_t e;
  if (!st->one_exec) {
    cudaGraph_t g = NULL;
    cudaGraphNode_t node = NULL;
    cudaGraphExec_t x = NULL;
    e = cudaGraphCreate(&g, 0);
    if (e == cudaSuccess) e = cudaGraphAddKernelNode(&node, g, NULL, 0, &kp);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
    if (e != cudaSuccess) {
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      st->one_off = 1; /* not tried again at every call */
      return ag__launch(kernel, grid, block, 0, st->stream, static_cast<Args &&>(args)...);
    }
    st->one_graph = g, st->one_node = node, st->one_exec = x;
  } else if ((e = cudaGraphExecKernelNodeSetParams(st->one_exec, st->one_node, &kp)) != cudaSuccess) {
    return e;
  }
  return cudaGraphLaunch(st->one_exec, st->stream);
}

/* Launchers, one family a file. */
ag_status ag__cuda_gather(ag__cuda_state *st, const void *args);
ag_status ag__cuda_gemm(ag__cuda_state *st, const void *args);
ag_status ag__cuda_map(ag__cuda_state *st, const void *args);
ag_status ag__cuda_map2(ag__cuda_state *st, const void *args);
ag_status ag__cuda_reduce(ag__cuda_state *st, const void *args);
ag_status ag__cuda_pick(ag__cuda_state *st, const void *args);
ag_status ag__cuda_pick_bwd(ag__cuda_state *st, const void *args);
ag_status ag__cuda_fill(ag__cuda_state *st, const void *args);
ag_status ag__cuda_copy(ag__cuda_state *st, const void *args);
ag_status ag__cuda_adam_prep(ag__cuda_state *st, const void *args);
ag_status ag__cuda_adam(ag__cuda_state *st, const void *args);
/* Scratch bytes of an AG__K_ADAM launch (the block count of a prep-fused one). */
size_t ag__cuda_adam_scratch(const void *args);
/* Scratch bytes of an AG__K_QGRAD call (the layout qgrad.cu describes). */
size_t ag__cuda_qgrad_scratch(const void *args);
ag_status ag__cuda_sumsq(ag__cuda_state *st, const void *args);
ag_status ag__cuda_axpby(ag__cuda_state *st, const void *args);
ag_status ag__cuda_randint(ag__cuda_state *st, const void *args);
ag_status ag__cuda_randn(ag__cuda_state *st, const void *args);
ag_status ag__cuda_td_target(ag__cuda_state *st, const void *args);
ag_status ag__cuda_loss(ag__cuda_state *st, const void *args);
ag_status ag__cuda_per_set(ag__cuda_state *st, const void *args);
ag_status ag__cuda_per_fill(ag__cuda_state *st, const void *args);
ag_status ag__cuda_per_sample(ag__cuda_state *st, const void *args);
ag_status ag__cuda_qgrad(ag__cuda_state *st, const void *args);
/* AG__K_ACGRAD and its scratch bytes (acgrad.cu) */
ag_status ag__cuda_acgrad(ag__cuda_state *st, const void *args);
size_t ag__cuda_acgrad_scratch(const void *args);
/* AG__K_CONV2D and its scratch bytes (conv.cu) */
ag_status ag__cuda_conv2d(ag__cuda_state *st, const void *args);
size_t ag__cuda_conv2d_scratch(const void *args);
ag_status ag__cuda_convert(ag__cuda_state *st, const void *args);
ag_status ag__cuda_set_i64(ag__cuda_state *st, const void *args);
/* AG__K_GATHER_FIELDS and AG__K_SCATTER_FIELDS (gather_fields.cu) */
ag_status ag__cuda_gather_fields(ag__cuda_state *st, const void *args);
ag_status ag__cuda_scatter_fields(ag__cuda_state *st, const void *args);

/* cuBLAS status to an agrl status with a message. */
ag_status ag__cublas_fail(cublasStatus_t s, const char *what);

/* The collectives over NCCL (comm.cu); the backend's `comm` entry, NULL
 * when built without NCCL. */
#ifdef AGRL_WITH_NCCL
extern const ag__comm_ops ag__cuda_comm;
#define AG__CUDA_COMM (&ag__cuda_comm)
#else
#define AG__CUDA_COMM NULL
#endif

#endif /* AGRL_CUDA_INTERNAL_H */
