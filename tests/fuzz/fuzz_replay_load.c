/* fuzz_replay_load.c — libFuzzer harness of the replay-table loader.
 *
 * Each input is a replay file, fed to the loader's stream entry through
 * fmemopen on a CPU context (fuzz_common.h; tables of more than 1 MB of
 * columns are refused by the entry's limit, so that an input cannot make
 * it allocate more). It aborts when the loader breaks its promises:
 *   - a refusal wrote *out, named no public call, or left device memory
 *     allocated (ctx stats live_bytes);
 *   - an accepted file holds what the loaded table does not: it is saved
 *     again with the file's part length and must come back byte for byte,
 *     but for the library version (bytes 16..47) and the header's CRC.
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include "fuzz_common.h"

/* The loader's stream entry (src/replay/replay_file.c). */
ag_status ag__replay_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_replay **out);

static void load(const uint8_t *data, size_t size) {
  FILE *f = input_stream(data, size);
  static int sentinel;
  ag_replay *r = (ag_replay *)&sentinel;
  uint64_t live0 = live_bytes();
  ag_status s = ag__replay_load_stream(ctx, f, "input", (size_t)1 << 20, &r);
  fclose(f);
  if (s != AG_OK) {
    check_refusal(r, &sentinel, "ag_replay_load", live0);
    return;
  }
  if (!image_resaves(r, data, size, NULL, 0)) die("a file saved again after its load differs from the input");
  ag_replay_free(r);
  ag_ctx_reset(ctx);
  if (live_bytes() != live0) die("a loaded and freed table left device memory allocated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_begin("fuzz_replay_load");
  uint8_t *in = input_copy(data, size);
  load(in, size);
  free(in);
  fuzz_end();
  return 0;
}
