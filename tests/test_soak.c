/* test_soak.c — a long run of adds and sample+gathers (label "slow").
 *
 * 10^8 adds (mostly one transition, every 1000th a batch that wraps the
 * ring) and 10^7 sample+gathers of 32 on one replay table, with a host
 * mirror of the table: every gathered batch equals the mirror's columns at
 * the drawn indices, the whole table equals the mirror at every checkpoint,
 * and the resident memory stays flat (no growth past the first checkpoint
 * beyond 4 MB). AGRL_SOAK_ADDS and AGRL_SOAK_SAMPLES change the counts.
 */
#include <stdio.h>
#include <unistd.h>

#include "agt.h"

enum { ROWS = 5, CAP = 4099, B = 32 };

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int64_t env_count(const char *name, int64_t dflt) {
  const char *v = getenv(name);
  return v && atoll(v) > 0 ? atoll(v) : dflt;
}

static void soak_adds_and_samples_stay_exact_and_flat(void **state) {
  (void)state;
  const int64_t adds = env_count("AGRL_SOAK_ADDS", 100000000),
                samples = env_count("AGRL_SOAK_SAMPLES", 10000000);
  ag_ctx *ctx = agt_ctx();
  const ag_field f[3] = {{"obs", 3, AG_F32}, {"action", 1, AG_I32}, {"reward", 1, AG_F32}};
  ag_replay *r;
  ag_rng *rng;
  agt_ok(ag_replay_create(ctx, f, 3, CAP, AG_F32, 1, &r));
  agt_ok(ag_rng_create(ctx, 77, &rng));
  float *mirror = calloc((size_t)ROWS * CAP, sizeof *mirror),
        *table = malloc((size_t)ROWS * CAP * sizeof *table);
  assert_true(mirror && table);
  int64_t pos = 0, size = 0, t = 0;
  float obs[3 * 7], rew[7];
  int32_t act[7];
  long rss0 = 0, rss_max = 0;
  const int64_t checkpoints = 20, every = adds / checkpoints > 0 ? adds / checkpoints : 1;
  const int64_t samples_per_add = samples / adds > 0 ? samples / adds : 1;
  const int64_t adds_per_sample = adds / samples > 0 ? adds / samples : 1;
  int64_t sampled = 0;
  float got[ROWS * B];
  int32_t idx[B];
  for (int64_t a = 0; a < adds; a++) {
    int k = a % 1000 == 999 ? 7 : 1;
    for (int j = 0; j < k; j++, t++) {
      for (int e = 0; e < 3; e++) obs[3 * j + e] = (float)((t * 3 + e) % 16777216);
      act[j] = (int32_t)(t % 1000003);
      rew[j] = (float)(t % 8191) * 0.5f;
    }
    const void *data[3] = {obs, act, rew};
    agt_ok(ag_replay_add(r, data, k));
    for (int j = 0; j < k; j++) {
      float *col = mirror + (size_t)((pos + j) % CAP) * ROWS;
      col[0] = obs[3 * j], col[1] = obs[3 * j + 1], col[2] = obs[3 * j + 2];
      col[3] = (float)act[j], col[4] = rew[j];
    }
    pos = (pos + k) % CAP;
    size = size + k < CAP ? size + k : CAP;
    assert_int_equal(ag_replay_position(r), pos);
    assert_int_equal(ag_replay_size(r), size);
    if (a % adds_per_sample == 0 && sampled < samples) {
      for (int64_t s = 0; s < samples_per_add && sampled < samples; s++, sampled++) {
        ag_tensor *batch, *ti;
        agt_ok(ag_replay_sample(r, rng, B, &batch, &ti));
        agt_ok(ag_tensor_read(ti, idx, sizeof idx));
        agt_ok(ag_tensor_read(batch, got, sizeof got));
        for (int j = 0; j < B; j++) {
          assert_true(idx[j] >= 0 && idx[j] < size);
          assert_memory_equal(got + j * ROWS, mirror + (size_t)idx[j] * ROWS, ROWS * sizeof(float));
        }
        ag_ctx_reset(ctx);
      }
    }
    if ((a + 1) % every == 0) {
      agt_ok(ag_buffer_read(ag_replay_buffer(r), 0, CAP, AG_F32, table, (size_t)ROWS * CAP * sizeof *table));
      assert_memory_equal(table, mirror, (size_t)ROWS * CAP * sizeof *table);
      long rss = rss_kb();
      if (!rss0) rss0 = rss;
      if (rss > rss_max) rss_max = rss;
      printf("soak: %lld adds, %lld sample+gathers, table exact, RSS %ld KB\n", (long long)(a + 1),
             (long long)sampled, rss);
      fflush(stdout);
    }
  }
  printf("soak: RSS at the first checkpoint %ld KB, highest %ld KB (growth %ld KB)\n", rss0, rss_max,
         rss_max - rss0);
  assert_true(rss_max - rss0 < 4096);
  assert_int_equal(sampled, samples);
  free(mirror);
  free(table);
  ag_rng_free(rng);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(soak_adds_and_samples_stay_exact_and_flat)};
  return agt_run(argc, argv, "soak", tests, 1);
}
