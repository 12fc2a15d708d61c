// launch_probe.cu — the host cost of one small kernel call, by launch path:
// <<<>>>, cudaLaunchKernelEx with and without programmatic serialization,
// the driver's cuLaunchKernel(Ex), a one-node graph (as it is, and with its
// node's parameters set before each launch), against agrl's eager gather
// and its recorded replay. Calls pipelined (2000, then one wait); "host
// submit" is the time to issue them. Cartpole rows: 256 of 11 f32 from 1M.
// Build (after agrl's CUDA build in build-gpu):
//   nvcc -arch=sm_90 -std=c++17 -O2 -Iinclude dev/launch_probe/launch_probe.cu -o launch_probe \
//        -Lbuild-gpu -lagrl -lcuda -Xlinker -rpath,$PWD/build-gpu
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <algorithm>
#include <cuda_runtime.h>
#include <cuda.h>
extern "C" {
#include "agrl/agrl.h"
}
static double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
__global__ void empty_k(int) {}
__global__ void empty_pdl(int) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__global__ void gath(const float *src, long rows, long cap, const int *idx, long n, float *dst) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  long total = rows * n;
  for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long)gridDim.x * blockDim.x) {
    long j = e / rows, r = e - j * rows;
    long c = idx[j];
    c = c < 0 ? 0 : c >= cap ? cap - 1 : c;
    dst[e] = src[c * rows + r];
  }
}
struct job {
  ag_buffer *buf;
  ag_tensor *idx;
};
static ag_status step(ag_ctx *, void *u) {
  job *j = (job *)u;
  ag_tensor *t;
  return ag_get_rows_dev(j->buf, j->idx, &t);
}
template <class F>
static void timeit(const char *name, F f, cudaStream_t s, ag_ctx *ctx, int iters = 2000) {
  double v[9], h[9];
  for (int r = -2; r < 9; r++) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
      f(i);
      if (ctx && i % 64 == 63) ag_ctx_reset(ctx);
    }
    double t1 = now_us();
    if (ctx)
      ag_ctx_sync(ctx);
    else
      cudaStreamSynchronize(s);
    if (ctx) ag_ctx_reset(ctx);
    if (r >= 0) {
      v[r] = (now_us() - t0) / iters;
      h[r] = (t1 - t0) / iters;
    }
  }
  std::sort(v, v + 9);
  std::sort(h, h + 9);
  printf("%-40s %6.2f us/call (min %.2f)  host submit %.2f\n", name, v[4], v[0], h[4]);
}
int main() {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float *src, *dst;
  int *idx;
  long cap = 1000000, rows = 11, B = 256;
  cudaMalloc(&src, cap * rows * 4);
  cudaMalloc(&dst, B * rows * 4);
  cudaMalloc(&idx, B * 4);
  int hidx[256];
  unsigned long x = 88172645463325252ull;
  for (int j = 0; j < 256; j++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    hidx[j] = (int)(x % cap);
  }
  cudaMemcpy(idx, hidx, sizeof hidx, cudaMemcpyHostToDevice);
  cudaMemset(src, 0, cap * rows * 4);
  timeit(
      "empty <<<1,32>>>", [&](int i) { empty_k<<<1, 32, 0, s>>>(i); }, s, nullptr);
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = 1;
  cfg.blockDim = 32;
  cfg.stream = s;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  timeit(
      "empty Ex + PDL", [&](int i) { cudaLaunchKernelEx(&cfg, empty_pdl, i); }, s, nullptr);
  timeit(
      "gather raw <<<11,256>>>", [&](int) { gath<<<11, 256, 0, s>>>(src, rows, cap, idx, B, dst); }, s,
      nullptr);
  cfg.gridDim = 11;
  cfg.blockDim = 256;
  timeit(
      "gather raw Ex + PDL",
      [&](int) { cudaLaunchKernelEx(&cfg, gath, (const float *)src, rows, cap, (const int *)idx, B, dst); },
      s, nullptr);
  cfg.numAttrs = 0;
  timeit(
      "gather raw Ex no attr",
      [&](int) { cudaLaunchKernelEx(&cfg, gath, (const float *)src, rows, cap, (const int *)idx, B, dst); },
      s, nullptr);
  {
    CUfunction f;
    cudaGetFuncBySymbol((cudaFunction_t *)&f, (const void *)gath);
    const float *a0 = src;
    long a1 = rows, a2 = cap;
    const int *a3 = idx;
    long a4 = B;
    float *a5 = dst;
    void *params[] = {&a0, &a1, &a2, &a3, &a4, &a5};
    CUlaunchAttribute ca[1];
    ca[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    ca[0].value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cc = {};
    cc.gridDimX = 11;
    cc.gridDimY = 1;
    cc.gridDimZ = 1;
    cc.blockDimX = 256;
    cc.blockDimY = 1;
    cc.blockDimZ = 1;
    cc.hStream = (CUstream)s;
    cc.attrs = ca;
    cc.numAttrs = 1;
    timeit(
        "gather driver cuLaunchKernelEx + PDL", [&](int) { cuLaunchKernelEx(&cc, f, params, nullptr); }, s,
        nullptr);
    cc.numAttrs = 0;
    timeit(
        "gather driver cuLaunchKernelEx no attr", [&](int) { cuLaunchKernelEx(&cc, f, params, nullptr); }, s,
        nullptr);
    timeit(
        "gather driver cuLaunchKernel",
        [&](int) { cuLaunchKernel(f, 11, 1, 1, 256, 1, 1, 0, (CUstream)s, params, nullptr); }, s, nullptr);
    cc.numAttrs = 1;
    timeit(
        "gather driver Ex + PDL again", [&](int) { cuLaunchKernelEx(&cc, f, params, nullptr); }, s, nullptr);
  }
  timeit(
      "gather raw Ex + PDL again",
      [&](int) {
        cfg.numAttrs = 1;
        cudaLaunchKernelEx(&cfg, gath, (const float *)src, rows, cap, (const int *)idx, B, dst);
      },
      s, nullptr);
  // one-node graph of the raw gather
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  gath<<<11, 256, 0, s>>>(src, rows, cap, idx, B, dst);
  cudaStreamEndCapture(s, &g);
  cudaGraphInstantiate(&ge, g, 0);
  timeit(
      "gather raw, 1-node graph", [&](int) { cudaGraphLaunch(ge, s); }, s, nullptr);
  {
    cudaGraphNode_t node;
    size_t nn = 1;
    cudaGraphGetNodes(g, &node, &nn);
    cudaKernelNodeParams kp;
    cudaGraphKernelNodeGetParams(node, &kp);
    const float *a0 = src;
    long a1 = rows, a2 = cap;
    const int *a3 = idx;
    long a4 = B;
    float *a5 = dst;
    void *params[] = {&a0, &a1, &a2, &a3, &a4, &a5};
    kp.kernelParams = params;
    kp.extra = nullptr;
    cudaError_t e = cudaGraphExecKernelNodeSetParams(ge, node, &kp);
    printf("set params: %s\n", cudaGetErrorString(e));
    timeit(
        "gather graph, set params + launch",
        [&](int i) {
          a5 = dst + (i & 1);
          cudaGraphExecKernelNodeSetParams(ge, node, &kp);
          cudaGraphLaunch(ge, s);
        },
        s, nullptr);
    kp.func = (void *)empty_k;
    int ai = 0;
    void *p2[] = {&ai};
    kp.kernelParams = p2;
    kp.gridDim = 1;
    kp.blockDim = 32;
    e = cudaGraphExecKernelNodeSetParams(ge, node, &kp);
    printf("set params with another function: %s\n", cudaGetErrorString(e));
    cudaGetLastError();
  }
  // a kernel's own time: 1 launch + sync
  timeit(
      "gather raw + stream sync each",
      [&](int) {
        gath<<<11, 256, 0, s>>>(src, rows, cap, idx, B, dst);
        cudaStreamSynchronize(s);
      },
      s, nullptr, 500);
  timeit(
      "empty + stream sync each",
      [&](int i) {
        empty_k<<<1, 32, 0, s>>>(i);
        cudaStreamSynchronize(s);
      },
      s, nullptr, 500);
  // agrl
  ag_ctx *ctx;
  if (ag_ctx_create(&ctx, AG_DEVICE_CUDA, 0)) {
    printf("no ctx\n");
    return 1;
  }
  job j;
  if (ag_buffer_create(ctx, rows, cap, AG_F32, &j.buf) || ag_tensor_create(ctx, B, 1, AG_I32, hidx, &j.idx)) {
    printf("create failed\n");
    return 1;
  }
  timeit(
      "agrl ag_get_rows_dev",
      [&](int) {
        ag_tensor *t;
        ag_get_rows_dev(j.buf, j.idx, &t);
      },
      s, ctx);
  ag_capture *cp;
  if (ag_capture_create(ctx, step, &j, &cp)) {
    printf("capture failed\n");
    return 1;
  }
  timeit(
      "agrl gather recorded, replay", [&](int) { ag_capture_replay(cp); }, s, ctx);
  return 0;
}
