/* np_random.h — numpy's legacy RandomState, for exactly the calls MinAtar
 * makes: the MT19937 generator with numpy's two ways of seeding it (one
 * 32-bit integer; an array of 32-bit words), rand() (a 53-bit double from two
 * 32-bit outputs) and randint(low, high) (numpy's legacy bounded integers:
 * the smallest all-ones mask that covers high - low - 1, drawing 32-bit
 * outputs until the masked value falls in range; no draw at all when the
 * range holds one value). With the same seed and the same calls, every value
 * equals numpy's. MinAtar draws no normal deviates, so there is no cached
 * gauss to keep: the state is the 624 key words and the position.
 */
#ifndef AGRL_ENV_NP_RANDOM_H
#define AGRL_ENV_NP_RANDOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AG__MT_N 624

typedef struct ag__mt {
  uint32_t key[AG__MT_N];
  int pos; /* 0 .. AG__MT_N; AG__MT_N: the key is used up, the next draw regenerates it */
} ag__mt;

/* np.random.RandomState(seed) for an int seed in 0 .. 2^32-1. */
void ag__mt_seed(ag__mt *r, uint32_t seed);
/* np.random.RandomState(words) for a 1-d array of n >= 1 words in 0 .. 2^32-1. */
void ag__mt_seed_array(ag__mt *r, const uint32_t *words, size_t n);
/* The next tempered 32-bit output. */
uint32_t ag__mt_next32(ag__mt *r);
/* RandomState.rand(): (a * 2^26 + b) / 2^53 with a, b the top 27, 26 bits of two outputs. */
double ag__mt_rand(ag__mt *r);
/* RandomState.randint(low, high) for low < high, high - low <= 2^32: an
 * integer in low .. high-1. */
int64_t ag__mt_randint(ag__mt *r, int64_t low, int64_t high);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_ENV_NP_RANDOM_H */
