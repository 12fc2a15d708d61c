/* seed.h — the one splitmix64 generator and the derivation of every seeded
 * stream from a user's seed.
 *
 * A stream's seed is ag__seed_stream(stream, seed, index): the seed mixed
 * with the stream's key, scaled, offset, then moved by index (a rank, or
 * the number of a network) times the stream's step. The constants below
 * name the streams the agents have drawn from since their first release:
 * changing one changes every seeded run, so they never change.
 * ag__seed_hash is the environments' derivation (ag_env_derive_seed):
 * splitmix64's mixer over the seed and the index.
 */
#ifndef AGRL_BASE_SEED_H
#define AGRL_BASE_SEED_H

#include <stdint.h>

/* splitmix64's increment: 2^64 divided by the golden ratio, odd. */
#define AG__SEED_GOLDEN 0x9E3779B97F4A7C15ull

/* splitmix64's output mixer (a bijection of 64-bit words). */
static inline uint64_t ag__mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* The next word of the splitmix64 stream whose state is *s. */
static inline uint64_t ag__splitmix64(uint64_t *s) {
  *s += AG__SEED_GOLDEN;
  return ag__mix64(*s);
}

/* The next uniform double in [0, 1) of the stream *s: the top 53 bits of
 * its next word times 2^-53. */
static inline double ag__splitmix64_unit(uint64_t *s) {
  return (double)(ag__splitmix64(s) >> 11) * 0x1.0p-53;
}

/* A stream: (seed ^ key) * mul + add + index * step. */
typedef struct ag__seed_stream_def {
  uint64_t key, mul, add, step;
} ag__seed_stream_def;

static inline uint64_t ag__seed_stream(ag__seed_stream_def st, uint64_t seed, uint64_t index) {
  return (seed ^ st.key) * st.mul + st.add + index * st.step;
}

/* The agents' streams (index in brackets). */
#define AG__SEED_STEP_RANK 0xD1B54A32D192ED03ull  /* a second odd 64-bit multiplier */
#define AG__SEED_STEP_RANK2 0x632BE59BD9B4E019ull /* a third, for the DQN's update stream */
/* the DQN's epsilon-greedy host stream [the rank in its group] */
#define AG__SEED_DQN_HOST ((ag__seed_stream_def){0x5DEECE66Dull, 1, 0, AG__SEED_STEP_RANK})
/* the DQN's networks' initial weights [1: the Q-network, 2: its target] */
#define AG__SEED_DQN_NETS ((ag__seed_stream_def){0, 2, 0, 1})
/* the DQN's device stream of updates [the rank in its group] */
#define AG__SEED_DQN_UPDATE ((ag__seed_stream_def){0, AG__SEED_GOLDEN, 17, AG__SEED_STEP_RANK2})
/* SAC's and TD3's host stream of random actions before learning starts */
#define AG__SEED_AC_HOST ((ag__seed_stream_def){0xA5A5C3C3F00DBEEFull, 1, 0, 0})
/* SAC's and TD3's networks' initial weights [1: the actor, 2 + k: critic k,
 * 4 + k: its target, 6: the actor's target] */
#define AG__SEED_AC_NETS ((ag__seed_stream_def){0, 8, 0, 1})
/* SAC's and TD3's device stream of updates */
#define AG__SEED_AC_UPDATE ((ag__seed_stream_def){0, AG__SEED_GOLDEN, 0xAC, 0})
/* SAC's and TD3's device stream of exploring noise */
#define AG__SEED_AC_ACT ((ag__seed_stream_def){0, AG__SEED_STEP_RANK, 0xAC7, 0})

/* The index of the evaluation episodes' environments, from the run's seed:
 * ag_env_derive_seed(seed, AG__SEED_EVAL_INDEX) (agrl train --eval-every). */
#define AG__SEED_EVAL_INDEX 0xE7A15EEDull

/* Marsaglia's xorshift64 (shifts 13, 7, 17): the next word of the stream
 * *x (never 0). For synthetic data (agrl demo, bench-dist), not for
 * anything a user's seed decides. */
static inline uint64_t ag__xorshift64(uint64_t *x) {
  uint64_t v = *x;
  v ^= v << 13, v ^= v >> 7, v ^= v << 17;
  return *x = v;
}

/* The environments' derivation: mix64(mix64(seed) + golden * (index + 1)). */
static inline uint64_t ag__seed_hash(uint64_t seed, uint64_t index) {
  return ag__mix64(ag__mix64(seed) + AG__SEED_GOLDEN * (index + 1u));
}

#endif /* AGRL_BASE_SEED_H */
