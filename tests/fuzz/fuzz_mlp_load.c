/* fuzz_mlp_load.c — libFuzzer harness of the model loader.
 *
 * Each input is a model file, fed to the loader's stream entry through
 * fmemopen on a CPU context (fuzz_common.h). Beyond what the sanitizers
 * catch (out-of-bounds reads, overflows, leaks, allocations past
 * -malloc_limit_mb), it aborts when the loader breaks its promises:
 *   - a refusal wrote *out, named no public call, or left device memory
 *     allocated (ctx stats live_bytes);
 *   - an accepted file (a container, or a model file of agrl 0.1.0) gives
 *     a network that, saved and loaded again, holds the same values and
 *     saves the same bytes again (the container has one encoding of a
 *     network).
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include "fuzz_common.h"

/* The loader's stream entry (src/nn/mlp.c). */
ag_status ag__mlp_load_stream(ag_ctx *ctx, FILE *f, const char *name, ag_mlp **out);

/* The bytes m saves (malloc'd, *n of them). */
static uint8_t *saved(ag_mlp *m, size_t *n) {
  char path[256];
  temp_path(path, sizeof path, "mlp");
  if (ag_mlp_save(m, path) != AG_OK) die("a loaded network could not be saved");
  return take_file(path, n);
}

/* m saved, loaded and saved again: the same values and the same bytes. */
static void check_resave(ag_mlp *m) {
  size_t n1, n2;
  uint8_t *b1 = saved(m, &n1);
  FILE *f = input_stream(b1, n1);
  ag_mlp *m2 = NULL;
  if (ag__mlp_load_stream(ctx, f, "saved", &m2) != AG_OK) die("a network saved after its load does not load");
  fclose(f);
  for (int k = 0; k < ag_mlp_n_params(m); k++) {
    ag_tensor *a = ag_mlp_params(m)[k], *b = ag_mlp_params(m2)[k];
    size_t bytes = (size_t)ag_tensor_numel(a) * 4;
    float *va = malloc(bytes), *vb = malloc(bytes);
    if (!va || !vb || ag_tensor_numel(b) != ag_tensor_numel(a) || ag_tensor_read(a, va, bytes) != AG_OK ||
        ag_tensor_read(b, vb, bytes) != AG_OK || memcmp(va, vb, bytes) != 0)
      die("a network saved and loaded again holds other values");
    free(va), free(vb);
  }
  uint8_t *b2 = saved(m2, &n2);
  if (n1 != n2 || memcmp(b1, b2, n1) != 0) die("a network saved twice gave two files");
  free(b1), free(b2);
  ag_mlp_free(m2);
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
  if (size < 8) die("a file shorter than a magic loaded");
  check_resave(m);
  ag_mlp_free(m);
  if (live_bytes() != live0) die("a loaded and freed network left device memory allocated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_begin("fuzz_mlp_load");
  uint8_t *in = input_copy(data, size); /* a container's header CRC of 0 filled in */
  load(in, size);
  free(in);
  fuzz_end();
  return 0;
}
