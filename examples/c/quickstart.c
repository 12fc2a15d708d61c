/* A table of transitions on the device, a batch gathered by index, fed to a network.
 * cc quickstart.c $(pkg-config --cflags --libs agrl) && ./a.out */
#include <agrl/agrl.h>
#include <stdio.h>
#include <stdlib.h>

static void check(ag_status s) {
  if (s != AG_OK) fprintf(stderr, "%s\n", ag_last_error()), exit(1);
}

int main(void) {
  ag_ctx *ctx;
  ag_buffer *buf;
  check(ag_ctx_create(&ctx, AG_DEVICE_AUTO, 0));           /* the GPU when there is one */
  check(ag_buffer_create(ctx, 11, 1000000, AG_F32, &buf)); /* 11 rows x 1M transitions */
  float t[11];                                             /* one transition */
  for (int r = 0; r < 11; r++) t[r] = 0.5f * r;
  check(ag_buffer_write(buf, t, AG_F32, 11, 1, 42)); /* column 42: 44 bytes cross the bus */
  const int64_t idx[3] = {42, 7, 42}, sizes[3] = {4, 64, 2};
  ag_tensor *batch, *obs, *q;
  ag_mlp *net;
  check(ag_get_rows(buf, idx, 3, &batch)); /* [11, 3] f32: only the indices cross */
  check(ag_slice_rows(batch, 0, 4, &obs)); /* rows 0..3: the observations */
  check(ag_mlp_create(ctx, sizes, 3, AG_ACT_RELU, AG_ACT_NONE, /*seed*/ 1, &net));
  check(ag_mlp_forward(net, obs, &q)); /* Q-values [2, 3] */
  float b[33], out[6];
  check(ag_tensor_read(batch, b, sizeof b));
  check(ag_tensor_read(q, out, sizeof out));
  printf("%s: row 3 of columns 42 and 7: %g %g; Q: %g %g\n", ag_ctx_device_name(ctx), b[3], b[14], out[0],
         out[1]);
  int ok = b[3] == 1.5f && b[14] == 0.0f && out[0] == out[4] && out[1] == out[5]; /* written, zero-filled */
  ag_mlp_free(net);
  ag_ctx_free(ctx); /* frees the buffer and the tensors too */
  return ok ? 0 : 1;
}
