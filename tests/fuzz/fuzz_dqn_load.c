/* fuzz_dqn_load.c — libFuzzer harness of the DQN loader.
 *
 * Each input is a DQN file (agrl/agent.h, "saving a DQN"), fed to the
 * loader's stream entry through fmemopen on a CPU context (fuzz_common.h;
 * a DQN whose networks or replay table take more than 1 MB is refused by
 * the entry's limit, so that an input cannot make it allocate more). It
 * aborts when the loader breaks its promises:
 *   - a refusal wrote *out, its message does not begin with "ag_dqn_load: "
 *     (or, for the table's image, "ag_replay_load: "), or it left device
 *     memory allocated (ctx stats live_bytes);
 *   - an accepted file holds what the loaded DQN does not: saved again with
 *     ag_dqn_save it must come back byte for byte up to its replay table's
 *     image, but for the library version (bytes 16..47) and the header's
 *     CRC; the image must come back as fuzz_replay_load's do (the same
 *     exceptions in its own header; a save writes parts of
 *     AG_TRANSFER_PART_BYTES, so an image of other parts is compared with
 *     the table saved again with its part length);
 *   - the loaded DQN, freed, left device memory allocated.
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include "fuzz_common.h"

/* The loader's stream entry (src/agent/dqn_file.c). */
ag_status ag__dqn_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_dqn **out);

/* Bytes a section of n bytes takes in the file: parts of at most
 * AG_TRANSFER_PART_BYTES, each followed by its CRC-32 (an empty section:
 * its CRC alone). */
static uint64_t parts_bytes(uint64_t n) {
  const uint64_t p = AG_TRANSFER_PART_BYTES;
  return n + 4 * (n ? (n + p - 1) / p : 1);
}

/* Where the replay table's image begins in a DQN file of size bytes: after
 * the header (H, the u32 at 12), the values of its T tensors (the u32 at
 * 264; entries of rows, cols and dtype from byte 488) and the run state
 * (R, the i64 at 256); UINT64_MAX for a header that is not all there. */
static uint64_t image_offset(const uint8_t *data, size_t size) {
  if (size < 488) return UINT64_MAX;
  uint64_t at = get(data + 12, 4), T = get(data + 264, 4);
  if (T > 256 || at != 488 + 24 * T + 4 || at > size) return UINT64_MAX;
  for (uint64_t i = 0; i < T; i++) {
    const uint8_t *e = data + 488 + 24 * i;
    at += parts_bytes(get(e, 8) * get(e + 8, 8) * ag_dtype_size((ag_dtype)get(e + 16, 4)));
  }
  return at + parts_bytes(get(data + 256, 8));
}

/* Saves d and compares the file with the input. */
static void check_resave(ag_dqn *d, const uint8_t *data, size_t size) {
  uint64_t at = image_offset(data, size);
  if (at > size || size - at < 160 || get(data + at + 152, 8) != size - at)
    die("an accepted file does not end with a replay image after its header and sections");
  char path[256];
  temp_path(path, sizeof path, "dqn");
  if (ag_dqn_save(d, path) != AG_OK) die("a loaded DQN could not be saved");
  size_t n;
  uint8_t *b = take_file(path, &n);
  int same = n >= at && same_but_stamp(data, at, b, at) &&
             image_resaves(ag_dqn_replay(d), data + at, size - at, b + at, n - at);
  free(b);
  if (!same) die("a file saved again after its load differs from the input");
}

static void load(const uint8_t *data, size_t size) {
  FILE *f = input_stream(data, size);
  static int sentinel;
  ag_dqn *d = (ag_dqn *)&sentinel;
  uint64_t live0 = live_bytes();
  ag_status s = ag__dqn_load_stream(ctx, f, "input", (size_t)1 << 20, &d);
  fclose(f);
  if (s != AG_OK) {
    check_refusal(d, &sentinel, "ag_dqn_load", live0);
    return;
  }
  check_resave(d, data, size);
  ag_dqn_free(d);
  ag_ctx_reset(ctx);
  if (live_bytes() != live0) die("a loaded and freed DQN left device memory allocated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_begin("fuzz_dqn_load");
  uint8_t *in = input_copy(data, size);
  uint64_t at = image_offset(in, size);
  if (at < size) fill_zero_crc(in + at, size - at); /* the table image's header */
  load(in, size);
  free(in);
  fuzz_end();
  return 0;
}
