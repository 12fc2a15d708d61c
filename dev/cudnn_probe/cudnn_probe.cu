/* cudnn_probe.cu — cuDNN's convolutions in the Nature DQN's three layer
 * shapes (4x84x84 -> 32 8x8/4 -> 64 4x4/2 -> 64 3x3/1) at batch B: for each
 * of forward, backward data and backward filter, every algorithm cuDNN's
 * search returns (deterministic ones marked), FP32 (CUDNN_FMA_MATH) and
 * TF32 (CUDNN_TENSOR_OP_MATH), timed with CUDA events, median of REPS.
 * Build: nvcc -O2 -arch=sm_90 dev/cudnn_probe/cudnn_probe.cu -o build/cudnn_probe -lcudnn
 * Run:   build/cudnn_probe [B] [REPS] */
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(e)                                                                             \
  do {                                                                                    \
    cudnnStatus_t s_ = (e);                                                               \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                     \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #e, cudnnGetErrorString(s_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static float *dev_buf(size_t n) {
  float *p;
  if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) exit(2);
  std::vector<float> h(n);
  for (size_t i = 0; i < n; i++) h[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  return p;
}

template <class F>
static float time_it(F f, int reps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  f();
  std::vector<float> t;
  for (int r = 0; r < reps; r++) {
    cudaEventRecord(a);
    for (int i = 0; i < 10; i++) f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 100.0f); /* us per call */
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char **argv) {
  const int B = argc > 1 ? atoi(argv[1]) : 32, reps = argc > 2 ? atoi(argv[2]) : 15;
  const int C[3] = {4, 32, 64}, H[3] = {84, 20, 9}, K[3] = {32, 64, 64}, R[3] = {8, 4, 3}, S[3] = {4, 2, 1};
  cudnnHandle_t h;
  CK(cudnnCreate(&h));
  printf("cuDNN %zu, B = %d, us per call (median of %d x 10)\n", cudnnGetVersion(), B, reps);
  void *ws;
  const size_t ws_max = (size_t)256 << 20;
  cudaMalloc(&ws, ws_max);
  for (int l = 0; l < 3; l++) {
    const int Ho = (H[l] - R[l]) / S[l] + 1;
    float *x = dev_buf((size_t)B * C[l] * H[l] * H[l]), *w = dev_buf((size_t)K[l] * C[l] * R[l] * R[l]);
    float *y = dev_buf((size_t)B * K[l] * Ho * Ho);
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    CK(cudnnCreateTensorDescriptor(&xd));
    CK(cudnnCreateTensorDescriptor(&yd));
    CK(cudnnCreateFilterDescriptor(&wd));
    CK(cudnnCreateConvolutionDescriptor(&cd));
    CK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, C[l], H[l], H[l]));
    CK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, K[l], Ho, Ho));
    CK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K[l], C[l], R[l], R[l]));
    CK(cudnnSetConvolution2dDescriptor(cd, 0, 0, S[l], S[l], 1, 1, CUDNN_CROSS_CORRELATION,
                                       CUDNN_DATA_FLOAT));
    printf("layer %d: %dx%dx%d -> %d %dx%d/%d\n", l + 1, C[l], H[l], H[l], K[l], R[l], R[l], S[l]);
    const float one = 1.0f, zero = 0.0f;
    for (int m = 0; m < 2; m++) {
      CK(cudnnSetConvolutionMathType(cd, m ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
      const char *mn = m ? "tf32" : "fp32";
      int n;
      cudnnConvolutionFwdAlgoPerf_t pf[16];
      CK(cudnnFindConvolutionForwardAlgorithmEx(h, xd, x, wd, w, cd, yd, y, 16, &n, pf, ws, ws_max));
      for (int i = 0; i < n; i++) {
        if (pf[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (m == 1 && pf[i].mathType == CUDNN_FMA_MATH) continue;
        if (m == 0 && pf[i].mathType != CUDNN_FMA_MATH) continue;
        float t = time_it(
            [&] { cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, pf[i].algo, ws, ws_max, &zero, yd, y); },
            reps);
        printf("  %s fwd    algo %d %s ws %6zu KB: %8.2f us\n", mn, (int)pf[i].algo,
               pf[i].determinism == CUDNN_DETERMINISTIC ? "det " : "nondet", pf[i].memory >> 10, t);
      }
      cudnnConvolutionBwdDataAlgoPerf_t pd[16];
      CK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, w, yd, y, cd, xd, x, 16, &n, pd, ws, ws_max));
      for (int i = 0; i < n; i++) {
        if (pd[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (m == 1 && pd[i].mathType == CUDNN_FMA_MATH) continue;
        if (m == 0 && pd[i].mathType != CUDNN_FMA_MATH) continue;
        float t = time_it(
            [&] {
              cudnnConvolutionBackwardData(h, &one, wd, w, yd, y, cd, pd[i].algo, ws, ws_max, &zero, xd, x);
            },
            reps);
        printf("  %s bwd_x  algo %d %s ws %6zu KB: %8.2f us\n", mn, (int)pd[i].algo,
               pd[i].determinism == CUDNN_DETERMINISTIC ? "det " : "nondet", pd[i].memory >> 10, t);
      }
      cudnnConvolutionBwdFilterAlgoPerf_t pw[16];
      CK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, x, yd, y, cd, wd, w, 16, &n, pw, ws, ws_max));
      for (int i = 0; i < n; i++) {
        if (pw[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (m == 1 && pw[i].mathType == CUDNN_FMA_MATH) continue;
        if (m == 0 && pw[i].mathType != CUDNN_FMA_MATH) continue;
        float t = time_it(
            [&] {
              cudnnConvolutionBackwardFilter(h, &one, xd, x, yd, y, cd, pw[i].algo, ws, ws_max, &zero, wd, w);
            },
            reps);
        printf("  %s bwd_w  algo %d %s ws %6zu KB: %8.2f us\n", mn, (int)pw[i].algo,
               pw[i].determinism == CUDNN_DETERMINISTIC ? "det " : "nondet", pw[i].memory >> 10, t);
      }
    }
    cudaFree(x), cudaFree(w), cudaFree(y);
  }
  return 0;
}
