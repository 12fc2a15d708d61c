/* demo.c — `agrl demo`: a replay buffer written as a ring, gathered by index
 * on the device, read back and checked against a host copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/seed.h"
#include "cli/cli.h"
#include "cli/opts.h"

int agrl_cmd_demo(int argc, char **argv) {
  static const char cmd[] = "demo";
  cli_settings o;
  int rc = cli_opts_parse(CLI_DEMO, argc, argv, &o);
  if (rc >= 0) return rc;
  const int64_t cap = o.capacity, batch = o.batch;

  const int64_t rows = 11;
  ag_ctx *ctx = NULL;
  ag_buffer *buf = NULL;
  ag_status s;
  rc = 1;
  float *host = NULL, *chunk = NULL, *got = NULL;
  int64_t *idx = NULL;
  if ((s = ag_ctx_create(&ctx, o.device.kind, o.device.index)))
    return cli_fail(cmd, "creating the context", s);
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

  uint64_t seed = AG__SEED_GOLDEN;
  for (int64_t j = 0; j < batch; j++) idx[j] = (int64_t)(ag__xorshift64(&seed) % (uint64_t)cap);
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
