/* np_random_dump — runs a script of RandomState calls on agrl's copy of
 * numpy's legacy generator (src/env/np_random.c) and prints each result, for
 * tests/np_random_check.py to compare with numpy itself. One call a line on
 * stdin:
 *   seed S            RandomState(S), S in 0 .. 2^32-1
 *   seed_array W...   RandomState([W, ...]), 1 to 64 words
 *   rand              prints rand() as the hex bits of the double
 *   randint LOW HIGH  prints randint(LOW, HIGH)
 *   state             prints the position and the 624 key words
 * Exit status 2 on a line it cannot read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "env/np_random.h"

int main(void) {
  ag__mt r;
  ag__mt_seed(&r, 0);
  char line[2048];
  while (fgets(line, sizeof line, stdin)) {
    char *p = line;
    int used = 0;
    unsigned long long a = 0;
    long long lo = 0, hi = 0;
    if (sscanf(p, "seed_array%n", &used) == 0 && used > 0) {
      uint32_t w[64];
      size_t n = 0;
      p += used;
      while (n < 64 && sscanf(p, " %llu%n", &a, &used) == 1) w[n++] = (uint32_t)a, p += used;
      if (n == 0) return 2;
      ag__mt_seed_array(&r, w, n);
    } else if (sscanf(p, "seed %llu", &a) == 1) {
      ag__mt_seed(&r, (uint32_t)a);
    } else if (strncmp(p, "rand\n", 5) == 0) {
      double x = ag__mt_rand(&r);
      uint64_t bits;
      memcpy(&bits, &x, sizeof bits);
      printf("%016" PRIx64 "\n", bits);
    } else if (sscanf(p, "randint %lld %lld", &lo, &hi) == 2 && lo < hi) {
      printf("%" PRId64 "\n", ag__mt_randint(&r, lo, hi));
    } else if (strncmp(p, "state\n", 6) == 0) {
      printf("%d", r.pos);
      for (int i = 0; i < AG__MT_N; i++) printf(" %" PRIu32, r.key[i]);
      printf("\n");
    } else {
      return 2;
    }
  }
  return 0;
}
