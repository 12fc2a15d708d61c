/* handoff.cu — memory and events for results handed to other frameworks:
 * calls without backend state, safe from any thread (a consumer's deleter,
 * perhaps at interpreter exit, when the runtime may already be gone: errors
 * are then ignored). Each call selects the device it works on and puts the
 * thread's current device back. */
#include <cuda_runtime.h>

#include "base/backend.h"
#include "base/base.h"

namespace {

struct device_scope {
  int prev = -1;
  explicit device_scope(int index) {
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    if (prev != index) cudaSetDevice(index);
  }
  ~device_scope() {
    int now = -1;
    if (prev >= 0 && cudaGetDevice(&now) == cudaSuccess && now != prev) cudaSetDevice(prev);
  }
};

cudaStream_t as_stream(void *s) { return (cudaStream_t)s; }

ag_status handoff_alloc(int index, size_t bytes, void **out) {
  device_scope scope(index);
  void *d = nullptr;
  cudaError_t e = cudaMalloc(&d, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ag__fail(e == cudaErrorMemoryAllocation ? AG_ERR_OUT_OF_MEMORY : AG_ERR_DEVICE,
                    "cuda: cudaMalloc of %zu bytes for exported memory failed: %s", bytes,
                    cudaGetErrorString(e));
  }
  *out = d;
  return AG_OK;
}

void handoff_free(int index, void *p) {
  if (!p) return;
  device_scope scope(index);
  if (cudaFree(p) != cudaSuccess) cudaGetLastError(); /* at exit the runtime may be gone */
}

void *handoff_mark(int index, void *stream, void *reuse) {
  device_scope scope(index);
  cudaEvent_t ev = (cudaEvent_t)reuse;
  if (!ev && cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
    cudaGetLastError();
    cudaStreamSynchronize(as_stream(stream));
    return nullptr;
  }
  if (cudaEventRecord(ev, as_stream(stream)) != cudaSuccess) {
    cudaGetLastError();
    cudaEventDestroy(ev);
    cudaStreamSynchronize(as_stream(stream));
    return nullptr;
  }
  return ev;
}

ag_status handoff_wait(void *stream, void *mark) {
  if (!mark) return AG_OK;
  cudaError_t e = cudaStreamWaitEvent(as_stream(stream), (cudaEvent_t)mark, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ag__fail(AG_ERR_DEVICE, "cuda: cudaStreamWaitEvent failed: %s", cudaGetErrorString(e));
  }
  return AG_OK;
}

int handoff_done(void *mark) {
  if (!mark) return 1;
  cudaError_t e = cudaEventQuery((cudaEvent_t)mark);
  if (e == cudaErrorNotReady) return 0;
  if (e != cudaSuccess) cudaGetLastError(); /* an error: nothing more to wait for */
  return 1;
}

void handoff_host_wait(void *mark) {
  if (mark && cudaEventSynchronize((cudaEvent_t)mark) != cudaSuccess) cudaGetLastError();
}

void handoff_mark_free(void *mark) {
  if (mark && cudaEventDestroy((cudaEvent_t)mark) != cudaSuccess) cudaGetLastError();
}

const ag__handoff_ops cuda_handoff = {
    handoff_alloc, handoff_free,      handoff_mark,      handoff_wait,
    handoff_done,  handoff_host_wait, handoff_mark_free,
};

}  // namespace

extern "C" const ag__handoff_ops *ag__cuda_handoff(void) { return &cuda_handoff; }
