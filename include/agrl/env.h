/* agrl/env.h — environments on the host: Gymnasium's classic-control tasks,
 * MinAtar's five games, and the interface for your own, one at a time or N
 * copies stepped at once.
 *
 * An environment is a handle (ag_env) around a table of three functions
 * (ag_env_ops: reset with a seed, step, free) and a spec (ag_env_spec). The
 * handle adds what every environment needs: argument checks, the
 * reset/step/end-of-episode state machine, and the time limit (Gymnasium's
 * TimeLimit wrapper: `truncated` is 1 on the max_episode_steps-th step).
 *
 * Built-in environments follow Gymnasium 1.x exactly (constants, integrator,
 * float64 arithmetic in Gymnasium's order, float32 where numpy computes in
 * float32, with float32 observations, rewards, termination; with glibc's
 * libm, as numpy uses, trajectories from the same state are bit-identical to
 * Gymnasium's, which tests/test_env.c checks):
 *   "cartpole"    / "CartPole-v1"    discrete 2,  obs 4, 500 steps, threshold 475
 *   "acrobot"     / "Acrobot-v1"     discrete 3,  obs 6, 500 steps, threshold -100
 *   "mountaincar" / "MountainCar-v0" discrete 3,  obs 2, 200 steps, threshold -110
 *   "pendulum"    / "Pendulum-v1"    continuous 1 in [-2, 2], obs 3, 200 steps
 *   "mountaincar_continuous" / "MountainCarContinuous-v0"
 *                                    continuous 1 in [-1, 1], obs 2, 999 steps, threshold 90
 * Only the start states differ from Gymnasium's: they are drawn from the
 * documented generator below instead of numpy's, from the same ranges.
 *
 * MinAtar (Young & Tian 2019), bit for bit as the minatar package 1.0.15
 * plays it, numpy's RandomState included (see Seeds):
 *   "breakout-minatar"  / "MinAtar/Breakout-v1"  discrete 3 (no-op, left, right), obs 4 x 10 x 10
 *   "freeway-minatar"   / "MinAtar/Freeway-v1"   discrete 3 (no-op, up, down), obs 7 x 10 x 10
 *                         (ends after 2500 frames, on its 2501st step, as the package's does)
 *   "asterix-minatar"   / "MinAtar/Asterix-v1"   discrete 5 (no-op, left, up, right, down), obs 4 x 10 x 10
 *   "space_invaders-minatar" / "MinAtar/SpaceInvaders-v1"
 *                                                discrete 4 (no-op, left, right, fire), obs 6 x 10 x 10
 *   "seaquest-minatar"  / "MinAtar/Seaquest-v1"  discrete 6 (no-op, left, up, right, down, fire),
 *                                                obs 10 x 10 x 10
 * The observation is the package's 10 x 10 x C boolean state as floats 0/1,
 * channel-major: obs[(c * 10 + y) * 10 + x] is channel c (in the package's
 * order: Breakout paddle, ball, trail, brick; Freeway chicken, car, speed1
 * .. speed5; Asterix player, enemy, trail, gold;
 * SpaceInvaders cannon, alien, alien_left, alien_right, friendly_bullet,
 * enemy_bullet; Seaquest sub_front, sub_back, friendly_bullet, trail,
 * enemy_bullet, enemy_fish, enemy_sub, oxygen_guage, diver_guage, diver) at row y, column x. Action i
 * is the package's minimal_action_set()[i]. Sticky actions (probability 0.1:
 * the previous action is repeated; the previous action is the no-op at each
 * reset) and difficulty ramping are on, as the package's defaults; the
 * same games without them are "NAME-nosticky", "NAME-noramp" and
 * "NAME-nosticky-noramp" ("breakout-minatar-nosticky" ...: found by
 * ag_env_create, not listed by ag_env_builtin_name; their id is their
 * name). Rewards and termination are the package's; there is no time limit
 * (max_episode_steps 0, reward_threshold NAN): an episode ends when the
 * game does.
 *
 * Seeds. ag_env_reset(env, seed, obs) draws the start state from `seed`
 * alone: the same seed always gives the same start state, on every platform
 * (the generator uses integer arithmetic and one multiply-add), and, the
 * environments being deterministic, the same episode for the same actions
 * (across platforms up to the last bits of libm's cos and sin). The
 * start-state generator is splitmix64 started at
 * ag_env_derive_seed(seed, 0); a uniform number in [lo, hi) is
 * lo + (hi - lo) * (x >> 11) * 2^-53 for each 64-bit output x. To run a
 * sequence of episodes, seed episode k with ag_env_derive_seed(base, k)
 * (k = 0, 1, 2 ...) rather than base + k; the vector environment does exactly
 * this for each copy (see ag_vec_env_create).
 * A MinAtar game seeds numpy's legacy RandomState (MT19937) with the array
 * [lo, hi] of the two 32-bit words of s = ag_env_derive_seed(seed, 0)
 * (lo = s mod 2^32, hi = s >> 32): the package's
 *   env = minatar.Environment(game, sticky_action_prob, difficulty_ramping)
 *   env.seed([lo, hi]); env.reset()
 * then plays the same episode for the same actions.
 *
 * Actions are floats. A discrete action (spec.n_actions > 0) is one float
 * holding the whole index 0 .. n_actions-1; any other value is refused. A
 * continuous action (spec.act_dim > 0) is act_dim finite floats; Pendulum
 * clips its torque to [-2, 2] and MountainCarContinuous its force to
 * [-1, 1], as Gymnasium does; MountainCarContinuous's reward, -0.1 a^2 (and
 * +100 at the goal), takes the action as given, unclipped, like Gymnasium's.
 *
 * Errors follow agrl's rules (agrl/status.h): a failing call returns the
 * status, ag_last_error() names the argument and the bad value, and nothing
 * observable changes (the environment's state, its step count, and every
 * output array stay as they were). Handles are used by one thread at a time;
 * different handles may be used from different threads. A step never
 * allocates memory.
 */
#ifndef AGRL_ENV_H
#define AGRL_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "agrl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_env ag_env;
typedef struct ag_vec_env ag_vec_env;

/* What an environment looks like. Exactly one of n_actions (discrete) and
 * act_dim (continuous) is positive. The action bounds describe the action
 * space; the handle does not clip to them (an environment that clips, like
 * Pendulum, does it in its step). */
typedef struct ag_env_spec {
  const char *id;         /* "CartPole-v1" ... */
  int obs_dim;            /* floats per observation */
  int n_actions;          /* > 0: discrete, actions 0 .. n_actions-1 */
  int act_dim;            /* > 0: continuous, act_dim floats per action */
  const float *act_low;   /* continuous: act_dim lower bounds, or NULL (none) */
  const float *act_high;  /* continuous: act_dim upper bounds, or NULL (none) */
  int max_episode_steps;  /* truncation after this many steps; 0: no limit */
  float reward_threshold; /* return at which the task counts as solved; NAN if none */
  int obs_shape[3];       /* an image observation: {C, H, W}, channels first (C*H*W = obs_dim);
                             {0, 0, 0}: a flat vector (the MinAtar games: {C, 10, 10}) */
} ag_env_spec;

/* The functions of a user-defined environment. `state` is the pointer given
 * to ag_env_create_custom. The handle checks every argument before calling
 * them (pointers, the reset/step order, the action: a whole index in range or
 * act_dim finite floats), so they only see valid input.
 *   reset: put the environment in a start state drawn from `seed` (the same
 *          seed must give the same start state) and write obs_dim floats to
 *          obs. Required.
 *   step:  apply `action`, write obs_dim floats to obs, the reward, and
 *          *terminated (0 or 1; the handle sets it to 0 before the call). The
 *          time limit is the handle's business, not the step's. A step that
 *          fails must leave the state as it was. Required.
 *   free:  release `state` (called once by ag_env_free). May be NULL.
 * A function that fails returns a status other than AG_OK; the handle then
 * returns that status with a message naming the environment. */
typedef struct ag_env_ops {
  ag_status (*reset)(void *state, uint64_t seed, float *obs);
  ag_status (*step)(void *state, const float *action, float *obs, float *reward, int *terminated);
  void (*free)(void *state);
} ag_env_ops;

/* The name and id of each built-in environment, in the order listed above:
 * ag_env_builtin_name(i) is "cartpole", "acrobot" ...; NULL past the end. */
AG_API const char *ag_env_builtin_name(int i);

/* Creates the built-in environment called `name` (a short name or the
 * Gymnasium id, see above). On success *out owns it; free it with
 * ag_env_free(). It must be reset before the first step.
 * Errors: AG_ERR_INVALID_ARG for name or out NULL, or an unknown name (the
 * message lists the known ones); AG_ERR_OUT_OF_MEMORY. *out is untouched on
 * error. */
AG_API ag_status ag_env_create(const char *name, ag_env **out);

/* Creates an environment from your functions. On success the handle owns
 * `state` (ops->free releases it when the handle is freed) and keeps its own
 * copies of *ops and of *spec (id and bounds included), so those may go away.
 * spec->id may be NULL ("custom"); obs_dim >= 1; exactly one of n_actions
 * (at most 2^24) and act_dim positive; act_low and act_high are both NULL
 * (always so for a discrete one) or both set with low <= high;
 * max_episode_steps >= 0; obs_shape {0, 0, 0} or three positive sizes
 * whose product is obs_dim.
 * Errors: AG_ERR_INVALID_ARG for ops, ops->reset, ops->step, spec or out
 * NULL or a bad spec field (named in the message); AG_ERR_OUT_OF_MEMORY. On
 * error the caller still owns `state` and *out is untouched. */
AG_API ag_status ag_env_create_custom(const ag_env_ops *ops, void *state, const ag_env_spec *spec,
                                      ag_env **out);

/* Frees the environment (and its user state). NULL is accepted. */
AG_API void ag_env_free(ag_env *env);

/* The environment's spec, valid as long as the handle; NULL for env NULL. */
AG_API const ag_env_spec *ag_env_get_spec(const ag_env *env);

/* Starts a new episode from the start state drawn from `seed` (see Seeds
 * above) and writes its obs_dim floats to obs. Allowed at any time.
 * Errors: AG_ERR_INVALID_ARG for env or obs NULL; for a user environment,
 * the status of its reset — the handle then needs a successful reset before
 * the next step. */
AG_API ag_status ag_env_reset(ag_env *env, uint64_t seed, float *obs);

/* One step: writes the next observation (obs_dim floats), the reward, and
 * the two end flags (0 or 1). *terminated: the task's own end (the pole fell,
 * the goal was reached). *truncated: this was the max_episode_steps-th step
 * of the episode (both are 1 only when the task ended on that very step).
 * After either, the episode is over: step again only after ag_env_reset.
 * action: one float holding the index for a discrete environment, act_dim
 * floats for a continuous one. obs must not overlap action.
 * Errors: AG_ERR_INVALID_ARG for a NULL pointer, a discrete action that is
 * not a whole number (0.5, NaN) or a continuous action that is not finite;
 * AG_ERR_OUT_OF_RANGE for a discrete index outside 0 .. n_actions-1;
 * AG_ERR_STATE before the first reset or after the episode ended; a user
 * step's own status. Nothing changes on error. */
AG_API ag_status ag_env_step(ag_env *env, const float *action, float *obs, float *reward, int *terminated,
                             int *truncated);

/* A seed for item `index` of a sequence started at `seed` (two rounds of
 * splitmix64's mixer). Different (seed, index) pairs give unrelated seeds;
 * use ag_env_derive_seed(base, k) for the k-th episode. */
AG_API uint64_t ag_env_derive_seed(uint64_t seed, uint64_t index);

/* ---- an environment's state, for checkpoints ----
 *
 * The state of a built-in environment is the whole of its handle: the phase
 * (never reset / episode running / episode ended), the step count of the
 * current episode, how the last episode ended, and the task's float64 state.
 * Restored into an environment of the same task, it continues bit for bit
 * as the one it was taken from (same observations, rewards and flags for the
 * same actions). A user environment's state is its own (the handle cannot
 * see into it): the three calls return AG_ERR_UNSUPPORTED for one.
 *
 * The image is portable (little-endian whatever the host, doubles as their
 * IEEE-754 bit patterns); offsets in bytes, u32/i64 little-endian integers:
 *   0  u32  magic 0x53454741 (the bytes "AGES")
 *   4  u32  layout version, 1
 *   8  16   the task's short name ("cartpole" ...), padded with NUL bytes; a
 *           longer name, its first 15 bytes ("mountaincar_con")
 *  24  u32  phase: 0 needs a reset, 1 running, 2 ended
 *  28  u32  terminated: the ended episode's flag (0 or 1)
 *  32  u32  truncated: the same
 *  36  u32  d, the number of doubles (cartpole 4, acrobot 4, mountaincar 2,
 *           pendulum 2, mountaincar_continuous 2: Gymnasium's state vector,
 *           in its order; MountainCarContinuous's is float64 at step 0 and
 *           float32 after, which the step count tells). A MinAtar game's
 *           doubles, all whole numbers but the first: its sticky-action
 *           probability and ramping (0 or 1), which must be the
 *           environment's; the generator's position (0..624) and its 624
 *           key words; the previous action (MinAtar's index 0..5); then the
 *           game's own integer fields (Breakout 108, Freeway 36, Asterix 50,
 *           SpaceInvaders 308, Seaquest 1618: its scalars, then five
 *           lists of entities, each a length and 64 slots of 5 fields), checked to be a
 *           state the game can go on from
 *  40  i64  steps of the current episode
 *  48  d x f64  the task's state
 * 48 + 8 d bytes in all. */

/* The size in bytes of env's state image (48 + 8 d, see above), in *bytes.
 * Errors: AG_ERR_INVALID_ARG for env or bytes NULL; AG_ERR_UNSUPPORTED for a
 * user environment. *bytes is untouched on error. */
AG_API ag_status ag_env_state_size(const ag_env *env, size_t *bytes);

/* Writes env's state image, exactly ag_env_state_size bytes, to buf (which
 * holds `bytes` >= that; the bytes past the image are not touched).
 * Errors: AG_ERR_INVALID_ARG for env or buf NULL; AG_ERR_UNSUPPORTED for a
 * user environment; AG_ERR_SHAPE for `bytes` below the size. buf is
 * untouched on error. */
AG_API ag_status ag_env_get_state(const ag_env *env, void *buf, size_t bytes);

/* Puts env in the state of the image buf (`bytes` bytes, exactly the image),
 * as taken by ag_env_get_state from an environment of the same task. The
 * image is checked whole before anything changes: its size, the magic and
 * version, the task, and every field (phase 0..2; flags 0 or 1, set only
 * when the episode ended, one of them then, truncated exactly at
 * max_episode_steps; steps in 0 .. max_episode_steps, and below it while
 * running; d of the task; finite doubles).
 * Errors: AG_ERR_INVALID_ARG for env or buf NULL, a wrong magic or version
 * or a bad field (the message names it); AG_ERR_SHAPE for an image of
 * another task (same size or not) or of the wrong size (a truncated one);
 * AG_ERR_UNSUPPORTED for a user environment. Nothing changes on error. */
AG_API ag_status ag_env_set_state(ag_env *env, const void *buf, size_t bytes);

/* ---- vectors of environments, with same-step autoreset ---- */

/* What a copy's last finished episode was (for logging). */
typedef struct ag_episode_info {
  double ret;     /* sum of its rewards (each as the float step returned) */
  int64_t length; /* its number of steps */
  int terminated; /* how it ended (the flags of its last step) */
  int truncated;
  int64_t episodes; /* episodes this copy has finished so far; 0: none yet
                       (then ret, length and the flags are 0) */
} ag_episode_info;

/* Creates n copies of the built-in environment `name`, stepped together.
 * Copy i's k-th episode (k = 0, 1 ... counted over the vector's whole life)
 * starts from seed ag_env_derive_seed(ag_env_derive_seed(seed, i), k): a
 * vector created with the same name, n and seed replays the same episodes
 * for the same actions. On success *out owns the copies; free it with
 * ag_vec_env_free(). It must be reset before the first step.
 * Errors: AG_ERR_INVALID_ARG for name or out NULL, an unknown name, or n < 1;
 * AG_ERR_OUT_OF_MEMORY. *out is untouched on error. */
AG_API ag_status ag_vec_env_create(const char *name, int n, uint64_t seed, ag_vec_env **out);

/* Like ag_vec_env_create with n environments you made (for instance with
 * ag_env_create_custom): envs[0 .. n-1], distinct, with equal obs_dim,
 * n_actions and act_dim (the vector reports envs[0]'s spec). Seeds as above.
 * On success the vector owns the environments (ag_vec_env_free frees them);
 * on error the caller still owns them and *out is untouched.
 * Errors: AG_ERR_INVALID_ARG for envs or out NULL, n < 1, envs[i] NULL or
 * repeated, or specs that differ (the message names the copy and field);
 * AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_vec_env_create_from(ag_env *const *envs, int n, uint64_t seed, ag_vec_env **out);

/* Frees the vector and its environments. NULL is accepted. */
AG_API void ag_vec_env_free(ag_vec_env *v);

/* Number of copies (0 for v NULL); the copies' spec (NULL for v NULL). */
AG_API int ag_vec_env_size(const ag_vec_env *v);
AG_API const ag_env_spec *ag_vec_env_get_spec(const ag_vec_env *v);

/* Starts a new episode in every copy (each from the next seed of its
 * sequence; episodes in progress are dropped without being counted) and
 * writes the n x obs_dim start observations, copy by copy.
 * Errors: AG_ERR_INVALID_ARG for v or obs NULL; a user reset's status (the
 * message names the copy; copies before it were reset and their rows of obs
 * written, and the vector needs a successful reset before the next step). */
AG_API ag_status ag_vec_env_reset(ag_vec_env *v, float *obs);

/* Steps every copy once. actions: n rows of 1 float (discrete: the index) or
 * act_dim floats (continuous). Writes obs (n x obs_dim), rewards (n),
 * terminated (n) and truncated (n), as ag_env_step does for each copy.
 * Same-step autoreset: when copy i's episode ends on this step, final_obs row
 * i receives the observation the step produced (its last observation, what a
 * replay buffer stores as next_obs), obs row i already holds the start
 * observation of its next episode (next seed of its sequence), and
 * ag_vec_env_last_episode(v, i, ...) describes the episode that just ended.
 * For the other copies final_obs row i equals obs row i, so final_obs is
 * always the true next observation of every transition. final_obs may be
 * NULL when not wanted; no output may overlap actions.
 * Errors: AG_ERR_INVALID_ARG for v, actions, obs, rewards, terminated or
 * truncated NULL, or a bad action (the message names the copy);
 * AG_ERR_OUT_OF_RANGE for a discrete index out of range; AG_ERR_STATE before
 * the first reset (or after a user function failed). Every action is
 * checked before any copy steps, so these change nothing. A user
 * environment's failing step or reset returns its status naming the copy;
 * copies before it have then stepped (their rows of the outputs written;
 * a copy whose autoreset failed has all but its obs row written), and the
 * vector needs ag_vec_env_reset before the next step. */
AG_API ag_status ag_vec_env_step(ag_vec_env *v, const float *actions, float *obs, float *rewards,
                                 int *terminated, int *truncated, float *final_obs);

/* The last finished episode of copy i (see ag_episode_info).
 * Errors: AG_ERR_INVALID_ARG for v or out NULL; AG_ERR_OUT_OF_RANGE for i
 * outside 0 .. n-1. *out is untouched on error. */
AG_API ag_status ag_vec_env_last_episode(const ag_vec_env *v, int i, ag_episode_info *out);

/* ---- a vector's state, for checkpoints ----
 *
 * The whole state of a vector of built-in environments: whether it was
 * reset, and per copy its seed sequence and position in it (the index k of
 * its next episode), the return and length of the episode in progress, its
 * last finished episode (ag_vec_env_last_episode) and its environment's
 * state (the image above). Restored into a vector of as many copies of the
 * same task, it continues bit for bit as the one it was taken from: the same
 * outputs of ag_vec_env_step for the same actions, autoresets included (each
 * copy's next episodes start from the same seeds, whatever seed the vector
 * was created with), and the same episode info. A vector with a user
 * environment among its copies: AG_ERR_UNSUPPORTED for the three calls.
 *
 * The image (little-endian, doubles as IEEE-754 bit patterns):
 *   0  u32  magic 0x53564741 (the bytes "AGVS")
 *   4  u32  layout version, 1
 *   8  u32  n, the number of copies
 *  12  u32  started: 1 once reset (the vector may step), else 0
 *  16  then n parts, copy by copy, each 64 bytes and the copy's image:
 *       0  u64  the copy's seed, ag_env_derive_seed(seed, i)
 *       8  u64  k, the index of its next episode in the sequence
 *      16  f64  return of the episode in progress
 *      24  i64  length of the episode in progress
 *      32  f64  last finished episode: ret
 *      40  i64                         length
 *      48  i64                         episodes (finished so far)
 *      56  u32                         terminated
 *      60  u32                         truncated
 *      64  the copy's environment image (48 + 8 d bytes)
 * 16 + n (112 + 8 d) bytes in all. */

/* The size in bytes of v's state image, in *bytes.
 * Errors: AG_ERR_INVALID_ARG for v or bytes NULL; AG_ERR_UNSUPPORTED when a
 * copy is a user environment (the message names it). *bytes is untouched on
 * error. */
AG_API ag_status ag_vec_env_state_size(const ag_vec_env *v, size_t *bytes);

/* Writes v's state image, exactly ag_vec_env_state_size bytes, to buf (which
 * holds `bytes` >= that; the bytes past the image are not touched).
 * Errors: AG_ERR_INVALID_ARG for v or buf NULL; AG_ERR_UNSUPPORTED when a
 * copy is a user environment; AG_ERR_SHAPE for `bytes` below the size. buf
 * is untouched on error. */
AG_API ag_status ag_vec_env_get_state(const ag_vec_env *v, void *buf, size_t bytes);

/* Puts v in the state of the image buf (`bytes` bytes, exactly the image),
 * as taken by ag_vec_env_get_state from a vector of n copies of the same
 * task. The image is checked whole, every copy's part included, before
 * anything changes: its size, magic, version and n; started 0 or 1; each
 * copy's environment image as ag_env_set_state checks it; finite returns;
 * an episode length in 0 .. max_episode_steps; no more finished episodes
 * than started ones; a last episode that is all zeros before the first one
 * ended, else of length 1 .. max_episode_steps with its flags as a step
 * leaves them; and in a started vector every copy running, its step count
 * equal to the episode length.
 * Errors: AG_ERR_INVALID_ARG for v or buf NULL, a wrong magic or version or
 * a bad field (the message names the copy and field); AG_ERR_SHAPE for an
 * image of another number of copies or of another task, or of the wrong
 * size; AG_ERR_UNSUPPORTED when a copy is a user environment. Nothing
 * changes on error. */
AG_API ag_status ag_vec_env_set_state(ag_vec_env *v, const void *buf, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_ENV_H */
