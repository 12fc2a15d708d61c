/* crc32.c — the CRC-32 of the file formats (model, replay, DQN and shard
 * files): zlib's crc32 where the build found zlib (AGRL_HAVE_ZLIB; several
 * GB/s, so that checking a file costs less than reading it), else eight
 * bytes a step through eight tables (slicing-by-8) built on first use.
 * Both give zlib's CRC-32 (reflected polynomial 0xEDB88320). */
#include "base/base.h"

#ifdef AGRL_HAVE_ZLIB
#include <zlib.h>

uint32_t ag__crc32_add(uint32_t crc, const void *data, size_t n) {
  const unsigned char *p = data;
  while (n > 0) { /* zlib's length is a uInt */
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    crc = (uint32_t)crc32(crc, p, k);
    p += k;
    n -= k;
  }
  return crc;
}

#else
#include <pthread.h>

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    crc_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xffu];
}

uint32_t ag__crc32_add(uint32_t crc, const void *data, size_t n) {
  pthread_once(&crc_once, crc_init);
  const unsigned char *p = data;
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) { /* the bytes in file order, whatever the host's */
    uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    crc = crc_table[7][lo & 0xffu] ^ crc_table[6][(lo >> 8) & 0xffu] ^ crc_table[5][(lo >> 16) & 0xffu] ^
          crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
          crc_table[0][p[7]];
  }
  for (; n > 0; n--, p++) crc = crc_table[0][(crc ^ *p) & 0xffu] ^ (crc >> 8);
  return ~crc;
}
#endif
