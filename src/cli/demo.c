/* demo.c — `agrl demo`: a replay buffer written as a ring, gathered by index
 * on the device, read back and checked against a host copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

static void demo_usage(FILE *f) {
  fprintf(f,
          "usage: agrl demo [--device auto|cpu|cuda[:N]|vulkan[:N]] [--capacity N] [--batch B]\n"
          "\n"
          "Fills a CartPole-shaped replay buffer (11 f32 rows a transition) as a ring,\n"
          "gathers a random batch on the device, checks it against a host copy and\n"
          "prints what crossed the bus.\n"
          "\n"
          "  --device    where the buffer lives (default auto: the GPU when present)\n"
          "  --capacity  transitions the buffer holds (default 100000)\n"
          "  --batch     transitions gathered (default 256)\n");
}

int agrl_cmd_demo(int argc, char **argv) {
  static const char cmd[] = "demo";
  ag_device_kind kind = AG_DEVICE_AUTO;
  int index = 0;
  int64_t cap = 100000, batch = 256;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = cli_value(argc, argv, i);
#define NEEDS(bad, what) CLI_NEEDS(demo_usage, bad, what)
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      demo_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--device"))
      NEEDS(cli_parse_device(v, &kind, &index), "auto, cpu, cuda, cuda:N, vulkan or vulkan:N");
    else if (!strcmp(a, "--capacity"))
      NEEDS(cli_parse_i64(v, 1, (int64_t)1 << 40, &cap), "a positive whole number up to 2^40");
    else if (!strcmp(a, "--batch"))
      NEEDS(cli_parse_i64(v, 1, 1 << 24, &batch), "a positive whole number up to 2^24");
    else
      return cli_bad_usage(cmd, demo_usage, "unknown option '%s'", a);
#undef NEEDS
  }

  const int64_t rows = 11;
  ag_ctx *ctx = NULL;
  ag_buffer *buf = NULL;
  ag_status s;
  int rc = 1;
  float *host = NULL, *chunk = NULL, *got = NULL;
  int64_t *idx = NULL;
  if ((s = ag_ctx_create(&ctx, kind, index))) return cli_fail(cmd, "creating the context", s);
  printf("agrl %s on %s\n", ag_version(), ag_ctx_device_name(ctx));
  if ((s = ag_buffer_create(ctx, rows, cap, AG_F32, &buf))) {
    rc = cli_fail(cmd, "creating the buffer", s);
    goto done;
  }
  printf("buffer: %lld x %lld f32 (%.1f MB)\n", (long long)rows, (long long)cap,
         (double)rows * (double)cap * 4.0 / 1048576.0);

  /* write cap + cap/2 transitions in chunks of 1000: the ring wraps */
  const int64_t chunk_n = 1000, total = cap + cap / 2;
  host = calloc((size_t)(rows * cap), sizeof *host);
  chunk = malloc((size_t)(rows * chunk_n) * sizeof *chunk);
  idx = malloc((size_t)batch * sizeof *idx);
  got = malloc((size_t)(rows * batch) * sizeof *got);
  if (!host || !chunk || !idx || !got) {
    fprintf(stderr, "agrl demo: out of host memory\n");
    goto done;
  }
  ag_xfer_reset(ctx);
  double t0 = cli_now_s();
  int64_t pos = 0;
  for (int64_t done_n = 0; done_n < total; done_n += chunk_n) {
    int64_t k = total - done_n < chunk_n ? total - done_n : chunk_n;
    for (int64_t j = 0; j < k; j++)
      for (int64_t r = 0; r < rows; r++) chunk[j * rows + r] = (float)(done_n + j) + 0.01f * (float)r;
    int64_t first = k < cap - pos ? k : cap - pos;
    if ((s = ag_buffer_write(buf, chunk, AG_F32, rows, first, pos))) goto fail_write;
    if (k > first && (s = ag_buffer_write(buf, chunk + first * rows, AG_F32, rows, k - first, 0)))
      goto fail_write;
    for (int64_t j = 0; j < k; j++)
      memcpy(host + ((pos + j) % cap) * rows, chunk + j * rows, (size_t)rows * sizeof(float));
    pos = (pos + k) % cap;
  }
  if ((s = ag_ctx_sync(ctx))) goto fail_write;
  double t1 = cli_now_s();
  printf("wrote %lld transitions as a ring in %.1f ms\n", (long long)total, (t1 - t0) * 1e3);

  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int64_t j = 0; j < batch; j++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    idx[j] = (int64_t)(seed % (uint64_t)cap);
  }
  ag_tensor *t = NULL;
  uint64_t up0, down0, up1, down1;
  ag_xfer_total(ctx, &up0, &down0);
  if ((s = ag_get_rows(buf, idx, batch, &t))) {
    rc = cli_fail(cmd, "ag_get_rows", s);
    goto done;
  }
  ag_xfer_total(ctx, &up1, &down1);
  if ((s = ag_tensor_read(t, got, (size_t)(rows * batch) * sizeof *got))) {
    rc = cli_fail(cmd, "reading the batch", s);
    goto done;
  }
  int64_t wrong = 0;
  for (int64_t j = 0; j < batch; j++)
    if (memcmp(got + j * rows, host + idx[j] * rows, (size_t)rows * sizeof(float))) wrong++;
  printf("gathered %lld transitions: %llu index bytes up, %s\n", (long long)batch,
         (unsigned long long)(up1 - up0), wrong ? "MISMATCH" : "all equal to the host copy");
  printf("first sampled transition (column %lld): obs [%.2f %.2f %.2f %.2f] ...\n", (long long)idx[0],
         (double)got[0], (double)got[1], (double)got[2], (double)got[3]);
  printf("transfers:\n");
  for (int i = 0; i < ag_xfer_count(ctx); i++) {
    ag_xfer_entry e;
    ag_xfer_entry_at(ctx, i, &e);
    printf("  %-16s %12llu bytes up in %6llu calls, %10llu bytes down\n", e.op,
           (unsigned long long)e.up_bytes, (unsigned long long)e.up_calls, (unsigned long long)e.down_bytes);
  }
  rc = wrong ? 1 : 0;
  goto done;
fail_write:
  rc = cli_fail(cmd, "ag_buffer_write", s);
done:
  free(host);
  free(chunk);
  free(idx);
  free(got);
  ag_ctx_free(ctx);
  return rc;
}
