/* acrobot.c — Acrobot-v1 as Gymnasium 1.x computes it (acrobot.py): the
 * "book" dynamics of Sutton & Barto, one RK4 step of 0.2 s per action,
 * torques {-1, 0, +1} without noise, angles wrapped to [-pi, pi], angular
 * velocities bounded to +-4 pi and +-9 pi, reward -1 per step and 0 on the
 * terminating one, termination when -cos(s0) - cos(s1 + s0) > 1, start state
 * uniform in [-0.1, 0.1]^4 rounded to float32 (as Gymnasium's reset does).
 * Observation (cos s0, sin s0, cos s1, sin s1, dtheta1, dtheta2) as float32.
 */
#include <math.h>

#include "base/base.h"
#include "env/env_internal.h"

#define DT 0.2
#define LINK_LENGTH_1 1.0
#define LINK_MASS_1 1.0
#define LINK_MASS_2 1.0
#define LINK_COM_POS_1 0.5
#define LINK_COM_POS_2 0.5
#define LINK_MOI 1.0
#define G 9.8

/* _dsdt of acrobot.py ("book"), with the torque a as the constant input. */
static void dsdt(const double *s, double *d, const void *ctx) {
  const double a = *(const double *)ctx;
  const double m1 = LINK_MASS_1, m2 = LINK_MASS_2, l1 = LINK_LENGTH_1;
  const double lc1 = LINK_COM_POS_1, lc2 = LINK_COM_POS_2, I1 = LINK_MOI, I2 = LINK_MOI;
  const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
  const double d1 = m1 * (lc1 * lc1) + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * cos(theta2)) + I1 + I2;
  const double d2 = m2 * (lc2 * lc2 + l1 * lc2 * cos(theta2)) + I2;
  const double phi2 = m2 * lc2 * G * cos(theta1 + theta2 - AG__PI / 2.0);
  const double phi1 = -m2 * l1 * lc2 * ag__pow2(dtheta2) * sin(theta2) -
                      2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin(theta2) +
                      (m1 * lc1 + m2 * l1) * G * cos(theta1 - AG__PI / 2) + phi2;
  const double ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * ag__pow2(dtheta1) * sin(theta2) - phi2) /
                          (m2 * (lc2 * lc2) + I2 - ag__pow2(d2) / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  d[0] = dtheta1;
  d[1] = dtheta2;
  d[2] = ddtheta1;
  d[3] = ddtheta2;
}

static void sample(double *s, ag__rng *r) {
  for (int i = 0; i < 4; i++) s[i] = (double)(float)ag__rng_uniform(r, -0.1, 0.1);
}

static void observe(const double *s, float *obs) {
  obs[0] = (float)cos(s[0]);
  obs[1] = (float)sin(s[0]);
  obs[2] = (float)cos(s[1]);
  obs[3] = (float)sin(s[1]);
  obs[4] = (float)s[2];
  obs[5] = (float)s[3];
}

static int advance(double *s, const float *action, int64_t step, double *reward) {
  (void)step;
  const double torque = (double)action[0] - 1.0; /* AVAIL_TORQUE = [-1, 0, +1] */
  ag__rk4(dsdt, &torque, s, 4, DT);
  s[0] = ag__wrap(s[0], -AG__PI, AG__PI);
  s[1] = ag__wrap(s[1], -AG__PI, AG__PI);
  s[2] = ag__clip(s[2], -4 * AG__PI, 4 * AG__PI);
  s[3] = ag__clip(s[3], -9 * AG__PI, 9 * AG__PI);
  const int terminated = -cos(s[0]) - cos(s[1] + s[0]) > 1.0;
  *reward = terminated ? 0.0 : -1.0;
  return terminated;
}

const ag__classic ag__acrobot = {
    .name = "acrobot",
    .spec = {.id = "Acrobot-v1",
             .obs_dim = 6,
             .n_actions = 3,
             .max_episode_steps = 500,
             .reward_threshold = -100.0f},
    .state_dim = 4,
    .sample = sample,
    .observe = observe,
    .advance = advance,
};
