/* mountaincar.c — the two MountainCar tasks as Gymnasium 1.x computes them.
 *
 * MountainCar-v0 (mountain_car.py): force 0.001, gravity 0.0025, velocity
 * clipped to +-0.07, position to [-1.2, 0.6] (the velocity is zeroed against
 * the left wall), reward -1 per step, termination at position >= 0.5 with
 * velocity >= 0. State (position, velocity) in float64, observed as float32.
 *
 * MountainCarContinuous-v0 (continuous_mountain_car.py): the same valley, a
 * force in [-1, 1] times power 0.0015, reward -0.1 a^2 per step (a the action
 * as given, not clipped) plus 100 on the step that reaches the goal, position
 * >= 0.45 with velocity >= 0. Its step ends with np.array(..., dtype=float32),
 * so the state is float64 as reset leaves it and float32 after any step, and
 * numpy 2 computes in the state's type (see advance_continuous).
 *
 * Both start at a position uniform in [-0.6, -0.4) with velocity 0.
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

#define CONT_GOAL_POSITION 0.45
#define CONT_POWER 0.0015
#define CONT_MAX_ACTION 1.0f

static void sample(double *s, ag__rng *r) {
  s[0] = ag__rng_uniform(r, -0.6, -0.4);
  s[1] = 0.0;
}

static void observe(const double *s, float *obs) {
  obs[0] = (float)s[0];
  obs[1] = (float)s[1];
}

static int advance(double *s, const float *action, int64_t step, double *reward) {
  (void)step;
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

static const float cont_act_low[1] = {-CONT_MAX_ACTION}, cont_act_high[1] = {CONT_MAX_ACTION};

/* Gymnasium's step, with numpy 2's types (NEP 50: a Python float or int
 * meeting a numpy scalar takes the scalar's type, also in comparisons):
 *   force = min(max(a, -1.0), 1.0)   the float32 a inside, else the Python float +-1.0
 *   velocity += force * power - 0.0025 * math.cos(3 * position)
 *   velocity, position clipped (to Python floats), the wall, the goal
 *   reward = (100.0 if terminated else 0) - math.pow(a, 2) * 0.1
 *   state = np.array([position, velocity], dtype=float32)
 * math.cos and math.pow compute in float64. On the first step of an episode
 * the state is float64 and so is everything but force * power - ... (float32
 * when force is); after that the state is float32, and so is every operation
 * on it (3 * position too), the Python floats rounded to float32 first. */
static int advance_continuous(double *s, const float *action, int64_t step, double *reward) {
  const float a = action[0];
  const int inside = a >= -CONT_MAX_ACTION && a <= CONT_MAX_ACTION;
  const double bound = a > 0.0f ? 1.0 : -1.0; /* force when a is outside [-1, 1] */
  int terminated;
  if (step == 0) {
    double position = s[0], velocity = s[1];
    const double slope = 0.0025 * cos(3 * position);
    if (inside)
      velocity = velocity + (double)(a * (float)CONT_POWER - (float)slope);
    else
      velocity = velocity + (bound * CONT_POWER - slope);
    if (velocity > MAX_SPEED) velocity = MAX_SPEED;
    if (velocity < -MAX_SPEED) velocity = -MAX_SPEED;
    position = position + velocity;
    if (position > MAX_POSITION) position = MAX_POSITION;
    if (position < MIN_POSITION) position = MIN_POSITION;
    if (position == MIN_POSITION && velocity < 0) velocity = 0.0;
    terminated = position >= CONT_GOAL_POSITION && velocity >= 0;
    s[0] = (double)(float)position;
    s[1] = (double)(float)velocity;
  } else {
    /* the clipped values are Python floats, but every later use rounds them to float32 */
    float position = (float)s[0], velocity = (float)s[1];
    const double slope = 0.0025 * cos((double)(3.0f * position));
    if (inside)
      velocity = velocity + (a * (float)CONT_POWER - (float)slope);
    else
      velocity = velocity + (float)(bound * CONT_POWER - slope);
    if (velocity > (float)MAX_SPEED) velocity = (float)MAX_SPEED;
    if (velocity < (float)-MAX_SPEED) velocity = (float)-MAX_SPEED;
    position = position + velocity;
    if (position > (float)MAX_POSITION) position = (float)MAX_POSITION;
    if (position < (float)MIN_POSITION) position = (float)MIN_POSITION;
    if (position == (float)MIN_POSITION && velocity < 0) velocity = 0.0f;
    terminated = position >= (float)CONT_GOAL_POSITION && velocity >= 0;
    s[0] = (double)position;
    s[1] = (double)velocity;
  }
  *reward = (terminated ? 100.0 : 0.0) - ag__pow2((double)a) * 0.1;
  return terminated;
}

const ag__classic ag__mountaincar_continuous = {
    .name = "mountaincar_continuous",
    .spec = {.id = "MountainCarContinuous-v0",
             .obs_dim = 2,
             .act_dim = 1,
             .act_low = cont_act_low,
             .act_high = cont_act_high,
             .max_episode_steps = 999,
             .reward_threshold = 90.0f},
    .state_dim = 2,
    .sample = sample,
    .observe = observe,
    .advance = advance_continuous,
};
