/* frame_stack_time.c — ag_frames_sample on the CPU in the Atari shapes: a
 * table of 84x84x1 frames (stack 4, 100k entries, 4 copies, an episode
 * start every 250 steps), B = 32 transitions drawn with both stacks, u8 and
 * f32; median of REPS samples after a warm-up. AGRL_CPU_REFERENCE=1 runs
 * the reference kernels; AGRL_THREADS=1 keeps the fast path on one thread.
 * Build (after a build in build/), from the repository root:
 *   cc -O2 -Iinclude -Idev dev/frame_stack_time/frame_stack_time.c -o build/frame_stack_time \
 *      -Lbuild -lagrl -Wl,-rpath,$PWD/build -lm
 * Run: build/frame_stack_time [REPS]; AGRL_CPU_REFERENCE=1 build/frame_stack_time 5 */
#include <stdio.h>
#include <stdlib.h>

#include "agrl/agrl.h"
#include "probe_time.h"

int main(int argc, char **argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 50;
  const int64_t H = 84, W = 84, cap = 100000, envs = 4, steps = 1000, B = 32;
  ag_ctx *ctx;
  OK(ag_ctx_create(&ctx, AG_DEVICE_CPU, 0));
  const ag_field fields[1] = {{"reward", 1, AG_F32}};
  const ag_frames_config cfg = {H, W, 1, 4, envs, cap, 0, 0, 0.0f};
  ag_frames *t;
  OK(ag_frames_create(ctx, &cfg, fields, 1, AG_F32, &t));
  const int64_t n = steps * envs;
  uint8_t *frames = malloc((size_t)(n * H * W)), *first = malloc((size_t)n);
  float *reward = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n * H * W; i++) frames[i] = (uint8_t)(i * 2654435761u >> 13);
  for (int64_t i = 0; i < n; i++) first[i] = (i / envs) % 250 == 0, reward[i] = 1.0f;
  const void *data[1] = {reward};
  for (int64_t k = 0; k < cap / n; k++) OK(ag_frames_add(t, frames, first, data, steps));
  ag_rng *rng;
  OK(ag_rng_create(ctx, 1, &rng));
  printf("%s, %lld entries, B = %lld, stack 4 of %lldx%lld, median of %d (us)\n", ag_ctx_device_name(ctx),
         (long long)cap, (long long)B, (long long)H, (long long)W, reps);
  const ag_dtype dts[2] = {AG_U8, AG_F32};
  double *ts = malloc((size_t)reps * sizeof(double));
  for (int d = 0; d < 2; d++) {
    for (int r = -1; r < reps; r++) {
      ag_tensor *obs, *next;
      const double t0 = now();
      OK(ag_frames_sample(t, rng, B, dts[d], &obs, &next, NULL, NULL));
      OK(ag_ctx_sync(ctx));
      if (r >= 0) ts[r] = now() - t0;
      ag_ctx_reset(ctx);
    }
    qsort(ts, (size_t)reps, sizeof *ts, cmpd);
    printf("  %s stacks: %.1f\n", ag_dtype_name(dts[d]), ts[reps / 2]);
  }
  free(ts);
  ag_rng_free(rng);
  ag_frames_free(t);
  ag_ctx_free(ctx);
  free(frames);
  free(first);
  free(reward);
  return 0;
}
