/* mountaincar.c — MountainCar-v0 as Gymnasium 1.x computes it
 * (mountain_car.py): force 0.001, gravity 0.0025, velocity clipped to
 * +-0.07, position to [-1.2, 0.6] (the velocity is zeroed against the left
 * wall), reward -1 per step, termination at position >= 0.5 with velocity
 * >= 0, start position uniform in [-0.6, -0.4) with velocity 0. State
 * (position, velocity) in float64, observed as float32.
 */
#include <math.h>

#include "base/base.h"
#include "env/env_internal.h"

#define MIN_POSITION -1.2
#define MAX_POSITION 0.6
#define MAX_SPEED 0.07
#define GOAL_POSITION 0.5
#define GOAL_VELOCITY 0.0
#define FORCE 0.001
#define GRAVITY 0.0025

static void sample(double *s, ag__rng *r) {
  s[0] = ag__rng_uniform(r, -0.6, -0.4);
  s[1] = 0.0;
}

static void observe(const double *s, float *obs) {
  obs[0] = (float)s[0];
  obs[1] = (float)s[1];
}

static int advance(double *s, const float *action, double *reward) {
  double position = s[0], velocity = s[1];
  velocity = velocity + (((double)action[0] - 1.0) * FORCE + cos(3 * position) * (-GRAVITY));
  velocity = ag__clip(velocity, -MAX_SPEED, MAX_SPEED);
  position = position + velocity;
  position = ag__clip(position, MIN_POSITION, MAX_POSITION);
  if (position == MIN_POSITION && velocity < 0) velocity = 0.0;
  s[0] = position;
  s[1] = velocity;
  *reward = -1.0;
  return position >= GOAL_POSITION && velocity >= GOAL_VELOCITY;
}

const ag__classic ag__mountaincar = {
    .name = "mountaincar",
    .spec = {.id = "MountainCar-v0",
             .obs_dim = 2,
             .n_actions = 3,
             .max_episode_steps = 200,
             .reward_threshold = -110.0f},
    .state_dim = 2,
    .sample = sample,
    .observe = observe,
    .advance = advance,
};
