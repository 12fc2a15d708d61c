/* conv_time.c — ag_conv2d on a device (the CPU by default) in the Nature DQN's shapes (B = 32):
 * 4x84x84 -> 32 8x8/4 -> 64 4x4/2 -> 64 3x3/1, each layer alone, forward
 * and forward + backward (gradients for x, w and b), median of REPS runs
 * after one warm-up. AGRL_CPU_REFERENCE=1 runs the reference kernels.
 * Build (after a build in build/), from the repository root:
 *   cc -O2 -Iinclude -Idev dev/conv_time/conv_time.c -o build/conv_time -Lbuild -lagrl \
 *      -Wl,-rpath,$PWD/build -lm
 * Run: build/conv_time [REPS] [DEVICE (cpu, cuda, vulkan...; default cpu)];
 *      AGRL_CPU_REFERENCE=1 build/conv_time 3 */
#include <stdio.h>
#include <stdlib.h>

#include "agrl/agrl.h"
#include "probe_time.h"

static double run(ag_ctx *ctx, ag_tensor *x, const ag_conv2d_geom *g, ag_tensor *w, ag_tensor *b, int bwd) {
  ag_tensor *y, *loss;
  const double t0 = now();
  OK(ag_conv2d(x, g, w, b, &y));
  if (bwd) {
    OK(ag_sum(y, AG_AXIS_ALL, &loss));
    OK(ag_backward(loss));
  }
  OK(ag_ctx_sync(ctx));
  const double t = now() - t0;
  ag_ctx_reset(ctx);
  return t;
}

int main(int argc, char **argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  const int64_t B = 32, K[3] = {32, 64, 64};
  const ag_conv2d_geom g[3] = {{4, 84, 84, 8, 8, 4, 0}, {32, 20, 20, 4, 4, 2, 0}, {64, 9, 9, 3, 3, 1, 0}};
  ag_device_kind kind = AG_DEVICE_CPU;
  int index = 0;
  if (argc > 2) OK(ag_device_parse(argv[2], &kind, &index));
  ag_ctx *ctx;
  OK(ag_ctx_create(&ctx, kind, index));
  printf("%s, B = %lld, median of %d\n", ag_ctx_device_name(ctx), (long long)B, reps);
  for (int l = 0; l < 3; l++) {
    const int64_t xr = g[l].C * g[l].H * g[l].W, wr = g[l].C * g[l].kh * g[l].kw;
    float *v = malloc((size_t)(xr * B) * sizeof(float));
    for (int64_t i = 0; i < xr * B; i++) v[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    ag_tensor *x, *w, *b;
    OK(ag_tensor_create(ctx, xr, B, AG_F32, v, &x));
    OK(ag_tensor_create(ctx, wr, K[l], AG_F32, v, &w));
    OK(ag_tensor_create(ctx, K[l], 1, AG_F32, v, &b));
    OK(ag_tensor_set_requires_grad(x, 1));
    OK(ag_tensor_set_requires_grad(w, 1));
    OK(ag_tensor_set_requires_grad(b, 1));
    double t[2][64];
    for (int bwd = 0; bwd < 2; bwd++) {
      run(ctx, x, &g[l], w, b, bwd);
      for (int r = 0; r < reps && r < 64; r++) t[bwd][r] = run(ctx, x, &g[l], w, b, bwd);
      qsort(t[bwd], (size_t)(reps < 64 ? reps : 64), sizeof(double), cmpd);
    }
    printf("layer %d %lldx%lldx%lld -> %lld %lldx%lld/%lld: forward %.2f ms, forward + backward %.2f ms\n",
           l + 1, (long long)g[l].C, (long long)g[l].H, (long long)g[l].W, (long long)K[l],
           (long long)g[l].kh, (long long)g[l].kw, (long long)g[l].stride, t[0][reps / 2] / 1e3,
           t[1][reps / 2] / 1e3);
    ag_tensor_free(x), ag_tensor_free(w), ag_tensor_free(b);
    free(v);
  }
  ag_ctx_free(ctx);
  return 0;
}
