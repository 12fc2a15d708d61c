/* np_random.c — numpy's legacy RandomState for MinAtar's calls (see
 * np_random.h): Matsumoto and Nishimura's MT19937 (period 2^19937 - 1, the
 * 2002 seeding by init_genrand and init_by_array), numpy's 53-bit double and
 * its masked rejection for bounded integers.
 */
#include "env/np_random.h"

#define MT_M 397
#define MATRIX_A 0x9908b0dfu
#define UPPER 0x80000000u
#define LOWER 0x7fffffffu

void ag__mt_seed(ag__mt *r, uint32_t seed) {
  r->key[0] = seed;
  for (int i = 1; i < AG__MT_N; i++)
    r->key[i] = 1812433253u * (r->key[i - 1] ^ (r->key[i - 1] >> 30)) + (uint32_t)i;
  r->pos = AG__MT_N;
}

void ag__mt_seed_array(ag__mt *r, const uint32_t *words, size_t n) {
  uint32_t *mt = r->key;
  size_t i = 1, j = 0;
  ag__mt_seed(r, 19650218u);
  for (size_t k = n > AG__MT_N ? n : AG__MT_N; k; k--) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + words[j] + (uint32_t)j;
    i++, j++;
    if (i >= AG__MT_N) mt[0] = mt[AG__MT_N - 1], i = 1;
    if (j >= n) j = 0;
  }
  for (size_t k = AG__MT_N - 1; k; k--) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
    i++;
    if (i >= AG__MT_N) mt[0] = mt[AG__MT_N - 1], i = 1;
  }
  mt[0] = 0x80000000u;
  r->pos = AG__MT_N;
}

static uint32_t twist(uint32_t a, uint32_t b, uint32_t m) {
  uint32_t y = (a & UPPER) | (b & LOWER);
  return m ^ (y >> 1) ^ ((y & 1u) ? MATRIX_A : 0u);
}

static void regenerate(ag__mt *r) {
  uint32_t *mt = r->key;
  int i = 0;
  for (; i < AG__MT_N - MT_M; i++) mt[i] = twist(mt[i], mt[i + 1], mt[i + MT_M]);
  for (; i < AG__MT_N - 1; i++) mt[i] = twist(mt[i], mt[i + 1], mt[i + MT_M - AG__MT_N]);
  mt[AG__MT_N - 1] = twist(mt[AG__MT_N - 1], mt[0], mt[MT_M - 1]);
  r->pos = 0;
}

uint32_t ag__mt_next32(ag__mt *r) {
  if (r->pos >= AG__MT_N) regenerate(r);
  uint32_t y = r->key[r->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

double ag__mt_rand(ag__mt *r) {
  const uint32_t a = ag__mt_next32(r) >> 5, b = ag__mt_next32(r) >> 6;
  return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

int64_t ag__mt_randint(ag__mt *r, int64_t low, int64_t high) {
  const uint64_t rng = (uint64_t)(high - low) - 1; /* the largest offset */
  if (rng == 0) return low;
  if (rng == 0xffffffffu) return low + (int64_t)ag__mt_next32(r);
  uint32_t mask = (uint32_t)rng;
  mask |= mask >> 1, mask |= mask >> 2, mask |= mask >> 4, mask |= mask >> 8, mask |= mask >> 16;
  uint32_t v;
  while ((v = ag__mt_next32(r) & mask) > rng) {
  }
  return low + (int64_t)v;
}
