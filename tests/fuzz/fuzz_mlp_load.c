/* fuzz_mlp_load.c — libFuzzer harness of the model loader.
 *
 * Each input is a model file, fed to the loader's stream entry through
 * fmemopen on one CPU context made at the first input. Beyond what the
 * sanitizers catch (out-of-bounds reads, overflows, leaks, allocations past
 * -malloc_limit_mb), it aborts when the loader breaks its promises:
 *   - a refusal wrote *out, named no public call, or left device memory
 *     allocated (ctx stats live_bytes);
 *   - an accepted file holds values the loaded network does not hold: a
 *     version-2 file that loads is saved again and must come back byte for
 *     byte (the format has one encoding of a network).
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agrl/agrl.h"

/* The loader's stream entry (src/nn/mlp.c). */
ag_status ag__mlp_load_stream(ag_ctx *ctx, FILE *f, const char *name, ag_mlp **out);

static ag_ctx *ctx;
static char save_path[256];

static void die(const char *what) {
  fprintf(stderr, "fuzz_mlp_load: %s (last error: %s)\n", what, ag_last_error());
  abort();
}

static uint64_t live_bytes(void) {
  ag_ctx_stats st;
  ag_ctx_get_stats(ctx, &st);
  return st.live_bytes;
}

/* Saves m and compares the file with the input. */
static void check_resave(ag_mlp *m, const uint8_t *data, size_t size) {
  if (ag_mlp_save(m, save_path) != AG_OK) die("a loaded network could not be saved");
  FILE *f = fopen(save_path, "rb");
  if (!f) die("the saved file cannot be opened");
  int same = 1;
  size_t i = 0;
  for (int c; (c = fgetc(f)) != EOF; i++)
    if (i >= size || (uint8_t)c != data[i]) same = 0;
  fclose(f);
  unlink(save_path);
  if (!same || i != size) die("a version-2 file saved again after its load differs from the input");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t empty[1];
  if (!ctx) {
    if (ag_ctx_create(&ctx, AG_DEVICE_CPU, 0) != AG_OK) die("no CPU context");
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(save_path, sizeof save_path, "%s/agrl_fuzz_mlp_%ld.agrl", dir, (long)getpid());
  }
  FILE *f = fmemopen(size ? (void *)data : empty, size, "rb");
  if (!f) die("fmemopen failed");
  static int sentinel;
  ag_mlp *m = (ag_mlp *)&sentinel;
  uint64_t live0 = live_bytes();
  ag_status s = ag__mlp_load_stream(ctx, f, "input", &m);
  fclose(f);
  if (s != AG_OK) {
    if (m != (ag_mlp *)&sentinel) die("a refused load wrote *out");
    if (strncmp(ag_last_error(), "ag_mlp_load: ", 13) != 0)
      die("a refusal's message does not name ag_mlp_load");
    if (live_bytes() != live0) die("a refused load left device memory allocated");
    return 0;
  }
  if (size < 8 || (data[7] != '1' && data[7] != '2')) die("a file without a version byte loaded");
  if (data[7] == '2') check_resave(m, data, size);
  ag_mlp_free(m);
  if (live_bytes() != live0) die("a loaded and freed network left device memory allocated");
  return 0;
}
