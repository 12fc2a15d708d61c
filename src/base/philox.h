/* philox.h — the Philox4x32-10 counter-based generator (Salmon et al.,
 * "Parallel random numbers: as easy as 1, 2, 3", SC 2011), shared by the CPU
 * and CUDA backends so that both draw the same numbers from the same seed
 * and counter. Included from C and CUDA C++.
 */
#ifndef AGRL_CORE_PHILOX_H
#define AGRL_CORE_PHILOX_H

#include <stdint.h>

#include "base/hd.h"

typedef struct ag__u32x4 {
  uint32_t v[4];
} ag__u32x4;

AG__HD uint32_t ag__mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * (uint64_t)b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

/* The round multipliers and the key's increments (Salmon et al.). */
#define AG__PHILOX_M0 0xD2511F53u
#define AG__PHILOX_M1 0xCD9E8D57u
#define AG__PHILOX_W0 0x9E3779B9u
#define AG__PHILOX_W1 0xBB67AE85u

/* Philox4x32 with 10 rounds on counter c and key (k0, k1). */
AG__HD ag__u32x4 ag__philox4x32_10(ag__u32x4 c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; round++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = ag__mulhilo32(AG__PHILOX_M0, c.v[0], &hi0);
    uint32_t lo1 = ag__mulhilo32(AG__PHILOX_M1, c.v[2], &hi1);
    ag__u32x4 n = {{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    c = n;
    k0 += AG__PHILOX_W0;
    k1 += AG__PHILOX_W1;
  }
  return c;
}

/* Block b of the stream `seed`: 128 random bits. */
AG__HD ag__u32x4 ag__philox_block(uint64_t seed, uint64_t b) {
  ag__u32x4 c = {{(uint32_t)b, (uint32_t)(b >> 32), 0u, 0u}};
  return ag__philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* Half h (0 or 1) of a block as 64 bits. */
AG__HD uint64_t ag__philox_half(ag__u32x4 r, int h) {
  return h ? ((uint64_t)r.v[3] << 32) | r.v[2] : ((uint64_t)r.v[1] << 32) | r.v[0];
}

/* Draw k of the stream `seed`: 64 random bits, half k % 2 of block k / 2. */
AG__HD uint64_t ag__philox_u64(uint64_t seed, uint64_t k) {
  return ag__philox_half(ag__philox_block(seed, k >> 1), (int)(k & 1));
}

/* floor(x / 2^64 * bound): an integer in [0, bound), exact on every backend. */
AG__HD uint64_t ag__scale_u64(uint64_t x, uint64_t bound) {
#ifdef __CUDA_ARCH__
  return __umul64hi(x, bound);
#else
  return (uint64_t)(((unsigned __int128)x * bound) >> 64);
#endif
}

/* Draw k of the stream `seed` as an integer in [0, bound): floor(u bound)
 * for the 64-bit fraction u (ag__scale_u64), 0 for a bound below 1. */
AG__HD int64_t ag__philox_below(uint64_t seed, uint64_t k, int64_t bound) {
  return bound < 1 ? 0 : (int64_t)ag__scale_u64(ag__philox_u64(seed, k), (uint64_t)bound);
}

#endif /* AGRL_CORE_PHILOX_H */
