/* fuzz_mlp_load.c — libFuzzer harness of the model loader.
 *
 * Each input is a model file, fed to the loader's stream entry through
 * fmemopen on a CPU context (fuzz_common.h). Beyond what the sanitizers
 * catch (out-of-bounds reads, overflows, leaks, allocations past
 * -malloc_limit_mb), it aborts when the loader breaks its promises:
 *   - a refusal wrote *out, named no public call, or left device memory
 *     allocated (ctx stats live_bytes);
 *   - an accepted file holds values the loaded network does not hold: a
 *     version-2 file that loads is saved again and must come back byte for
 *     byte (the format has one encoding of a network).
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include "fuzz_common.h"

/* The loader's stream entry (src/nn/mlp.c). */
ag_status ag__mlp_load_stream(ag_ctx *ctx, FILE *f, const char *name, ag_mlp **out);

/* Saves m and compares the file with the input. */
static void check_resave(ag_mlp *m, const uint8_t *data, size_t size) {
  char path[256];
  temp_path(path, sizeof path, "mlp");
  if (ag_mlp_save(m, path) != AG_OK) die("a loaded network could not be saved");
  size_t n;
  uint8_t *b = take_file(path, &n);
  int same = n == size && memcmp(b, data, n) == 0;
  free(b);
  if (!same) die("a version-2 file saved again after its load differs from the input");
}

static void load(const uint8_t *data, size_t size) {
  FILE *f = input_stream(data, size);
  static int sentinel;
  ag_mlp *m = (ag_mlp *)&sentinel;
  uint64_t live0 = live_bytes();
  ag_status s = ag__mlp_load_stream(ctx, f, "input", &m);
  fclose(f);
  if (s != AG_OK) {
    check_refusal(m, &sentinel, "ag_mlp_load", live0);
    return;
  }
  if (size < 8 || (data[7] != '1' && data[7] != '2')) die("a file without a version byte loaded");
  if (data[7] == '2') check_resave(m, data, size);
  ag_mlp_free(m);
  if (live_bytes() != live0) die("a loaded and freed network left device memory allocated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_begin("fuzz_mlp_load");
  load(data, size);
  fuzz_end();
  return 0;
}
