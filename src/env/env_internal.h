/* env_internal.h — what the environment files share: the structure behind
 * ag_env, the start-state generator, the integrators and bounds helpers used
 * by the classic-control dynamics, the table of built-in environments, the
 * pieces of the state images (reading, checking and loading one copy's), and
 * a hook that lets the tests place a built-in environment in a given state.
 *
 * Floating point: the dynamics are written operation for operation as
 * Gymnasium writes them (float64, same order), and this library is compiled
 * as ISO C11, where GCC and Clang do not contract a*b+c into FMA; that is
 * what makes the trajectories bit-identical to Gymnasium's on the same libm.
 */
#ifndef AGRL_ENV_ENV_INTERNAL_H
#define AGRL_ENV_ENV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agrl/env.h"
#include "base/seed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the handle (env.c) ---- */

typedef enum ag__env_phase {
  AG__ENV_NEEDS_RESET = 0, /* never reset, or a user reset failed */
  AG__ENV_RUNNING = 1,
  AG__ENV_ENDED = 2 /* the last step terminated or truncated */
} ag__env_phase;

struct ag_env {
  ag_env_ops ops;
  void *state;
  ag_env_spec spec; /* id, act_low, act_high point into the copies below */
  char *id;
  float *bounds;  /* act_low then act_high (2 x act_dim), or NULL */
  float *scratch; /* obs_dim floats: steps and resets write here first */
  ag__env_phase phase;
  int64_t steps; /* steps of the current episode */
  int ended_terminated, ended_truncated;
};

/* The call that failed, for messages: "ag_env_step", or "ag_vec_env_step:
 * copy 3" when copy >= 0. */
typedef struct ag__who {
  char s[96];
} ag__who;
ag__who ag__env_who(const char *fn, int copy);

/* Checks `action` against the spec: a whole index in range, or act_dim
 * finite floats. `fn` and, when copy >= 0, the copy name the call. */
ag_status ag__env_check_action(const ag_env_spec *spec, const float *action, const char *fn, int copy);

/* AG_ERR_STATE (with a message) unless env may step now. */
ag_status ag__env_check_phase(const ag_env *env, const char *fn, int copy);

/* Reset and step of a handle whose arguments are already checked (the vector
 * environment's path). The step writes into env->scratch; the caller copies. */
ag_status ag__env_reset_checked(ag_env *env, uint64_t seed, const char *fn, int copy);
ag_status ag__env_step_checked(ag_env *env, const float *action, float *reward, int *terminated,
                               int *truncated, const char *fn, int copy);

/* ---- start-state generator (env_util.c): splitmix64 ---- */

typedef struct ag__rng {
  uint64_t s;
} ag__rng;

/* A generator whose sequence is determined by `seed` (state = ag_env_derive_seed(seed, 0)). */
ag__rng ag__rng_seeded(uint64_t seed);
uint64_t ag__rng_next(ag__rng *r);
/* lo + (hi - lo) * u with u = (x >> 11) * 2^-53 in [0, 1): numpy's formula. */
double ag__rng_uniform(ag__rng *r, double lo, double hi);

/* ---- integrators and bounds (env_util.c) ---- */

#define AG__PI 3.141592653589793 /* the double nearest pi, as numpy.pi and math.pi */
#define AG__MAX_ODE_DIM 8

/* dy/dt at y (n values) into dydt; `ctx` carries constant inputs. */
typedef void (*ag__deriv_fn)(const double *y, double *dydt, const void *ctx);

/* Explicit Euler: y[i] = y[i] + dt * dydt[i], dydt taken at the old y. */
void ag__euler(double *y, const double *dydt, int n, double dt);

/* One classic 4th-order Runge-Kutta step of length dt (n <= AG__MAX_ODE_DIM),
 * in the operation order of Gymnasium's acrobot.rk4:
 * y + dt/6 * (((k1 + 2 k2) + 2 k3) + k4), stages at y + dt/2 k. */
void ag__rk4(ag__deriv_fn f, const void *ctx, double *y, int n, double dt);

/* min(max(x, lo), hi), as numpy.clip and Gymnasium's bound(). */
double ag__clip(double x, double lo, double hi);
float ag__clipf(float x, float lo, float hi);

/* Gymnasium's wrap(): adds or subtracts (hi - lo) until lo <= x <= hi. */
double ag__wrap(double x, double lo, double hi);

/* x ** 2 as numpy computes it for a float64 (float32) scalar: libm's pow
 * (powf), which is not always x * x; the exponent goes through a volatile so
 * that the compiler cannot rewrite the call as x * x. */
double ag__pow2(double x);
float ag__pow2f(float x);

/* ---- built-in environments (cartpole.c, acrobot.c, mountaincar.c, pendulum.c; classic.c) ----
 * mountaincar.c holds both MountainCar tasks. */

#define AG__MAX_STATE 4

struct ag__classic;

/* A task whose state is its own (the MinAtar games): a block of `size`
 * bytes allocated with the handle, which these functions keep; its state
 * image is the task's state_dim doubles that put writes. */
typedef struct ag__task_ops {
  size_t size;
  /* Puts s in the start state of `seed`; writes the observation. */
  void (*reset)(const struct ag__classic *c, void *s, uint64_t seed, float *obs);
  /* Advances s by one step under a checked action; writes the observation
   * and the reward; returns terminated. */
  int (*step)(const struct ag__classic *c, void *s, const float *action, float *obs, double *reward);
  /* Writes the state_dim doubles of s's image at p (little-endian). */
  void (*put)(const struct ag__classic *c, const void *s, unsigned char *p);
  /* Checks the state_dim doubles at p (finite already) as an image of task
   * c: AG_ERR_SHAPE (image of another variant of the game) or
   * AG_ERR_INVALID_ARG with a message beginning with `who`. */
  ag_status (*check)(const struct ag__classic *c, const unsigned char *p, const char *who);
  /* Puts s in the state of an image that check accepted. */
  void (*load)(const struct ag__classic *c, void *s, const unsigned char *p);
} ag__task_ops;

/* One built-in task: its spec and its dynamics on a double state (the
 * classic-control tasks) or on a state of its own (`own`). */
typedef struct ag__classic {
  const char *name; /* short name: "cartpole" */
  ag_env_spec spec;
  int state_dim;
  /* Draws a start state (Gymnasium's ranges) from r. */
  void (*sample)(double *s, ag__rng *r);
  /* The float32 observation of state s. */
  void (*observe)(const double *s, float *obs);
  /* Advances s by one step under a checked action; returns terminated.
   * `step` counts the episode's steps before this one: 0 right after a reset
   * (or ag__env_set_state), for a task whose Gymnasium state changes type on
   * its first step. */
  int (*advance)(double *s, const float *action, int64_t step, double *reward);
  /* Non-NULL: the task keeps a state of its own (sample, observe, advance
   * unused); `params` is the task's, for those functions. */
  const ag__task_ops *own;
  const void *params;
} ag__classic;

extern const ag__classic ag__cartpole, ag__acrobot, ag__mountaincar, ag__pendulum, ag__mountaincar_continuous;

/* MinAtar (minatar.c): for each game, the default task (listed among the
 * built-in ones) and the three others without sticky actions and/or
 * difficulty ramping (found by name, not listed). */
extern const ag__classic ag__minatar_tasks[];
extern const int ag__minatar_n_tasks;

/* The built-in task called `name` (short name or id), or NULL. */
const ag__classic *ag__classic_find(const char *name);
/* The i-th built-in task, or NULL past the end. */
const ag__classic *ag__classic_at(int i);
/* Writes the "known: ..." list of names into buf. */
void ag__classic_names(char *buf, size_t size);
/* Creates a handle for task c. */
ag_status ag__classic_create(const ag__classic *c, const char *fn, ag_env **out);

/* Test hook: puts a built-in environment in state s (state_dim doubles) as if
 * a reset had produced it (step count 0), and writes its observation to obs.
 * Errors: AG_ERR_INVALID_ARG for NULL pointers or a non-finite value;
 * AG_ERR_UNSUPPORTED for a user environment. */
ag_status ag__env_set_state(ag_env *env, const double *s, float *obs);

/* Test hook: copies a built-in environment's state (state_dim doubles) to s
 * and its size to *dim. Errors as ag__env_set_state. */
ag_status ag__env_get_state(const ag_env *env, double *s, int *dim);

/* The task of a built-in environment, and in *s its double state (state_dim
 * values, writable); NULL (and *s untouched) for a user environment. */
const ag__classic *ag__env_classic(const ag_env *env, double **s);
/* The state of a built-in task that keeps its own (c->own), else NULL. */
void *ag__env_own_state(const ag_env *env);

/* ---- state images (env_state.c; the layout is in agrl/env.h) ---- */

/* A double's IEEE-754 bit pattern, and back. */
static inline uint64_t ag__double_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline double ag__bits_double(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* Bytes of env's state image; 0 for a user environment. */
size_t ag__env_state_bytes(const ag_env *env);
/* AG_ERR_UNSUPPORTED (with a message naming fn and copy) for a user
 * environment, AG_OK for a built-in one. */
ag_status ag__env_state_supported(const ag_env *env, const char *fn, int copy);
/* Writes the state image of built-in env (ag__env_state_bytes of them) to p. */
void ag__env_state_put(const ag_env *env, unsigned char *p);
/* Checks that the `bytes` bytes at p are a state image that built-in env can
 * take (ag_env_set_state's rules); changes nothing. */
ag_status ag__env_state_check(const ag_env *env, const unsigned char *p, size_t bytes, const char *fn,
                              int copy);
/* Puts built-in env in the state of an image that ag__env_state_check accepted. */
void ag__env_state_load(ag_env *env, const unsigned char *p);
/* The phase and step count an image that ag__env_state_check accepted holds. */
ag__env_phase ag__env_state_phase(const unsigned char *p);
int64_t ag__env_state_steps(const unsigned char *p);

/* ---- handles (env.c) ---- */

/* Builds a handle around ops/state/spec after checking them; `fn` names the call. */
ag_status ag__env_new(const ag_env_ops *ops, void *state, const ag_env_spec *spec, const char *fn,
                      ag_env **out);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_ENV_ENV_INTERNAL_H */
