/* bench_dist.c — `agrl bench-dist`: the data-parallel DQN update on G GPUs.
 *
 * One process per GPU (as `agrl train --gpus G`). Each rank fills its shard
 * with random transitions, then times replays of the recorded update: sample
 * its share of the batch from its shard, gather, target, loss, backward, an
 * all-reduce of the gradients over the group, Adam. Rank 0 prints the time
 * per update (median of the repetitions, with min-max) and the throughput in
 * transitions per second over the group.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agrl/agrl.h"
#include "base/seed.h"
#include "cli/cli.h"
#include "cli/opts.h"

int agrl_cmd_bench_dist(int argc, char **argv) {
  static const char cmd[] = "bench-dist";
  void (*usage)(FILE *) = cli_opts_usage(CLI_BENCH_DIST);
  cli_settings o;
  int rc = cli_opts_parse(CLI_BENCH_DIST, argc, argv, &o);
  if (rc >= 0) return rc;
  const int64_t gpus = o.gpus, batch = o.batch, updates = o.updates, reps = o.reps;
  int64_t rank = o.rank, world = o.world;
  const char *id_file = o.id_file;
  if (gpus > 1 && world == 0) {
    if (ag_cuda_device_count() < gpus)
      return cli_bad_usage(cmd, usage, "--gpus %lld: this machine has %d GPUs", (long long)gpus,
                           ag_cuda_device_count());
    return cli_launch(cmd, argc, argv, (int)gpus);
  }
  if (world == 0) world = 1, rank = 0;
  if (rank < 0 || rank >= world || (world > 1 && !id_file))
    return cli_bad_usage(cmd, usage, "--world needs --rank in 0..world-1 and --id-file");
  int mujoco = o.shape == 1;
  int64_t obs_dim = mujoco ? 17 : 4, n_act = mujoco ? 6 : 2, hid = mujoco ? 256 : 128;

  ag_ctx *ctx = NULL;
  ag_dist *g = NULL;
  ag_dqn *d = NULL;
  float *obs = NULL;
  int32_t *act = NULL;
  int *term = NULL;
  float *rew = NULL;
  rc = 1;
  ag_status s;
  if ((s = ag_ctx_create(&ctx, AG_DEVICE_CUDA, (int)rank))) {
    rc = cli_fail(cmd, "creating the context", s);
    goto done;
  }
  if ((s = ag_dist_create(ctx, (int)rank, (int)world, id_file, 120.0, &g))) {
    rc = cli_fail(cmd, "joining the group", s);
    goto done;
  }
  ag_dqn_config cfg = ag_dqn_defaults();
  cfg.n_step = 1; /* groups take the one-step target */
  cfg.hidden[0] = cfg.hidden[1] = hid;
  cfg.batch_size = batch * world;
  const int64_t per_rank = 65536;
  cfg.buffer_size = per_rank * world;
  if ((s = ag_dqn_create_dist(ctx, g, obs_dim, n_act, 1000000, &cfg, &d))) {
    rc = cli_fail(cmd, "creating the learner", s);
    goto done;
  }
  obs = malloc(sizeof(float) * (size_t)(per_rank * obs_dim));
  rew = malloc(sizeof(float) * (size_t)per_rank);
  act = malloc(sizeof(int32_t) * (size_t)per_rank);
  term = malloc(sizeof(int) * (size_t)per_rank);
  if (!obs || !rew || !act || !term) goto done;
  uint64_t x = AG__SEED_GOLDEN * (uint64_t)(rank + 1);
  for (int64_t i = 0; i < per_rank * obs_dim; i++) {
    ag__xorshift64(&x);
    obs[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  for (int64_t i = 0; i < per_rank; i++) {
    ag__xorshift64(&x);
    act[i] = (int32_t)(x % (uint64_t)n_act);
    rew[i] = (float)(x >> 40) / 16777216.0f;
    term[i] = (x >> 8) % 50 == 0;
  }
  /* next_obs: the observations shifted by one transition */
  if ((s = ag_dqn_store(d, obs, act, rew, obs + obs_dim, term, (int)(per_rank - 1)))) {
    rc = cli_fail(cmd, "filling the table", s);
    goto done;
  }
  double *t = calloc((size_t)reps, sizeof *t);
  if (!t) goto done;
  if ((s = ag_dqn_train(d, 20, NULL)) || (s = ag_dist_barrier(g))) {
    free(t);
    rc = cli_fail(cmd, "warming up", s);
    goto done;
  }
  for (int64_t r = 0; r < reps && !s; r++) {
    if ((s = ag_dist_barrier(g))) break;
    double t0 = cli_now_s();
    if (!(s = ag_dqn_train(d, updates, NULL))) s = ag_ctx_sync(ctx);
    t[r] = (cli_now_s() - t0) / (double)updates * 1e6;
  }
  if (s) {
    free(t);
    rc = cli_fail(cmd, "timing", s);
    goto done;
  }
  qsort(t, (size_t)reps, sizeof *t, cli_cmp_double);
  double med = t[reps / 2];
  if (rank == 0)
    printf(
        "bench-dist dqn %lld-%lld-%lld-%lld gpus %lld batch/gpu %lld global %lld: %.2f us/update (min %.2f "
        "max %.2f), "
        "%.0f updates/s, %.3g transitions/s\n",
        (long long)obs_dim, (long long)hid, (long long)hid, (long long)n_act, (long long)world,
        (long long)batch, (long long)(batch * world), med, t[0], t[reps - 1], 1e6 / med,
        1e6 / med * (double)(batch * world));
  free(t);
  rc = 0;
done:
  free(obs), free(rew), free(act), free(term);
  ag_dqn_free(d);
  ag_dist_free(g);
  ag_ctx_free(ctx);
  return rc;
}
