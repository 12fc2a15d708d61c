// random_philox.glsl — base/philox.h in GLSL: Philox4x32-10, its 64-bit
// draws and the exact mapping of a draw to an integer below a bound, so that
// the shaders draw the CPU's and CUDA's bits from the same seed and counter.
// Needs only 32- and 64-bit integers (common.glsl's int64 extension).

// Philox4x32 with 10 rounds on counter c and key (k0, k1) (ag__philox4x32_10)
uvec4 philox4x32_10(uvec4 c, uint k0, uint k1) {
  for (int round = 0; round < 10; round++) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
    c = uvec4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// draw k of the stream `seed`: half k % 2 of block k / 2 (ag__philox_u64)
uint64_t philox_u64(uint64_t seed, uint64_t k) {
  const uint64_t b = k >> 1;
  const uvec4 r = philox4x32_10(uvec4(uint(b), uint(b >> 32), 0u, 0u), uint(seed), uint(seed >> 32));
  return (k & 1ul) != 0ul ? (uint64_t(r.w) << 32) | uint64_t(r.z) : (uint64_t(r.y) << 32) | uint64_t(r.x);
}

// the high 64 bits of the 128-bit product x * y (ag__scale_u64)
uint64_t mulhi_u64(uint64_t x, uint64_t y) {
  const uint xl = uint(x), xh = uint(x >> 32), yl = uint(y), yh = uint(y >> 32);
  uint ll_hi, ll_lo;
  umulExtended(xl, yl, ll_hi, ll_lo);
  // each partial sum stays below 2^64: (2^32 - 1)^2 + 2 (2^32 - 1) = 2^64 - 1
  const uint64_t t = uint64_t(xh) * uint64_t(yl) + uint64_t(ll_hi);
  const uint64_t u = uint64_t(xl) * uint64_t(yh) + (t & 0xfffffffful);
  return uint64_t(xh) * uint64_t(yh) + (t >> 32) + (u >> 32);
}

// draw k as an integer in [0, bound), 0 for a bound below 1 (ag__philox_below)
int64_t philox_below(uint64_t seed, uint64_t k, int64_t bound) {
  return bound < 1 ? 0l : int64_t(mulhi_u64(philox_u64(seed, k), uint64_t(bound)));
}
