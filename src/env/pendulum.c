/* pendulum.c — Pendulum-v1 as Gymnasium 1.x computes it (pendulum.py):
 * g 10, m 1, l 1, dt 0.05, torque clipped to [-2, 2], speed to [-8, 8],
 * semi-implicit Euler, reward -(angle_normalize(th)^2 + 0.1 thdot^2 +
 * 0.001 u^2), never terminates, start th uniform in [-pi, pi), thdot in
 * [-1, 1). State (th, thdot) in float64; as in numpy, the torque u stays a
 * float32, so 0.001 * u^2 and 3 * u are float32 products. Observation
 * (cos th, sin th, thdot) as float32.
 */
#include <math.h>

#include "base/base.h"
#include "env/env_internal.h"

#define MAX_SPEED 8.0
#define MAX_TORQUE 2.0f
#define DT 0.05
#define G 10.0
#define M 1.0
#define L 1.0

static const float act_low[1] = {-MAX_TORQUE}, act_high[1] = {MAX_TORQUE};

/* ((x + pi) mod 2 pi) - pi with numpy's floored modulo. */
static double angle_normalize(double x) {
  const double b = 2 * AG__PI;
  double mod = fmod(x + AG__PI, b);
  if (mod != 0.0 && mod < 0.0) mod += b;
  return mod - AG__PI;
}

static void sample(double *s, ag__rng *r) {
  s[0] = ag__rng_uniform(r, -AG__PI, AG__PI);
  s[1] = ag__rng_uniform(r, -1.0, 1.0);
}

static void observe(const double *s, float *obs) {
  obs[0] = (float)cos(s[0]);
  obs[1] = (float)sin(s[0]);
  obs[2] = (float)s[1];
}

static int advance(double *s, const float *action, int64_t step, double *reward) {
  (void)step;
  const double th = s[0], thdot = s[1];
  const float u = ag__clipf(action[0], -MAX_TORQUE, MAX_TORQUE);
  const float u_cost = 0.001f * ag__pow2f(u);
  const double costs = ag__pow2(angle_normalize(th)) + 0.1 * ag__pow2(thdot) + (double)u_cost;
  const float u_acc = (float)(3.0 / (M * (L * L))) * u;
  double newthdot = thdot + (3 * G / (2 * L) * sin(th) + (double)u_acc) * DT;
  newthdot = ag__clip(newthdot, -MAX_SPEED, MAX_SPEED);
  s[0] = th + newthdot * DT;
  s[1] = newthdot;
  *reward = -costs;
  return 0;
}

const ag__classic ag__pendulum = {
    .name = "pendulum",
    .spec = {.id = "Pendulum-v1",
             .obs_dim = 3,
             .act_dim = 1,
             .act_low = act_low,
             .act_high = act_high,
             .max_episode_steps = 200,
             .reward_threshold = NAN},
    .state_dim = 2,
    .sample = sample,
    .observe = observe,
    .advance = advance,
};
