/* cartpole.c — CartPole-v1 as Gymnasium 1.x computes it (cartpole.py):
 * Barto, Sutton & Anderson's cart and pole, explicit Euler with tau 0.02, a
 * push of +-10 N, termination when |x| > 2.4 or |theta| > 12 degrees, reward
 * 1 on every step including the terminating one, start state uniform in
 * [-0.05, 0.05)^4. State (x, x_dot, theta, theta_dot) in float64, observed
 * as float32.
 */
#include <math.h>

#include "base/base.h"
#include "env/env_internal.h"

#define GRAVITY 9.8
#define MASSCART 1.0
#define MASSPOLE 0.1
#define LENGTH 0.5 /* half the pole's length */
#define FORCE_MAG 10.0
#define TAU 0.02
#define X_THRESHOLD 2.4

static void sample(double *s, ag__rng *r) {
  for (int i = 0; i < 4; i++) s[i] = ag__rng_uniform(r, -0.05, 0.05);
}

static void observe(const double *s, float *obs) {
  for (int i = 0; i < 4; i++) obs[i] = (float)s[i];
}

static int advance(double *s, const float *action, int64_t step, double *reward) {
  (void)step;
  const double total_mass = MASSPOLE + MASSCART;
  const double polemass_length = MASSPOLE * LENGTH;
  const double theta_threshold = 12 * 2 * AG__PI / 360;
  const double theta = s[2], theta_dot = s[3];
  const double force = action[0] == 1.0f ? FORCE_MAG : -FORCE_MAG;
  const double costheta = cos(theta), sintheta = sin(theta);
  const double temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
  const double thetaacc = (GRAVITY * sintheta - costheta * temp) /
                          (LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / total_mass));
  const double xacc = temp - polemass_length * thetaacc * costheta / total_mass;
  const double dsdt[4] = {s[1], xacc, theta_dot, thetaacc};
  ag__euler(s, dsdt, 4, TAU);
  *reward = 1.0;
  return s[0] < -X_THRESHOLD || s[0] > X_THRESHOLD || s[2] < -theta_threshold || s[2] > theta_threshold;
}

const ag__classic ag__cartpole = {
    .name = "cartpole",
    .spec = {.id = "CartPole-v1",
             .obs_dim = 4,
             .n_actions = 2,
             .max_episode_steps = 500,
             .reward_threshold = 475.0f},
    .state_dim = 4,
    .sample = sample,
    .observe = observe,
    .advance = advance,
};
