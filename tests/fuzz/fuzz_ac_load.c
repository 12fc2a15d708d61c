/* fuzz_ac_load.c — libFuzzer harness of the SAC/TD3 loader.
 *
 * Each input is an agent file (agrl/ac.h, "saving an agent"), fed to the
 * loader's stream entry through fmemopen on a CPU context (fuzz_common.h;
 * an agent whose networks, correlated noise or replay table take more than
 * 1 MB is refused by the entry's limit, so that an input cannot make it
 * allocate more). It aborts when the loader breaks its promises:
 *   - a refusal wrote *out, its message does not begin with "ag_ac_load: ",
 *     or it left device memory allocated (ctx stats live_bytes);
 *   - an accepted file holds what the loaded agent does not: saved again
 *     with ag_ac_save it must come back byte for byte up to its replay
 *     table's image, but for the library version (bytes 16..47) and the
 *     header's CRC; the image must come back as fuzz_replay_load's do;
 *   - the loaded agent, freed, left device memory allocated.
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include "fuzz_common.h"

/* The loader's stream entry (src/agent/ac_file.c). */
ag_status ag__ac_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_ac **out);

/* Where the replay table's image begins in an agent file: after the header
 * (H, the u32 at 12), the values of its T tensors (the u32 at 312; entries
 * of rows, cols and dtype from byte 896), the correlated noise (N f32, the
 * i64 at 296) and the run state (R, the i64 at 304), each section in parts
 * of at most AG_TRANSFER_PART_BYTES with a CRC-32 each (an empty one: its
 * CRC alone); UINT64_MAX for a header that is not all there. */
static uint64_t image_offset(const uint8_t *data, size_t size) {
  if (size < 896) return UINT64_MAX;
  const uint64_t p = AG_TRANSFER_PART_BYTES;
  uint64_t at = get(data + 12, 4), T = get(data + 312, 4);
  if (T > 256 || at != 896 + 24 * T + 4 || at > size) return UINT64_MAX;
  uint64_t n[3] = {0, get(data + 296, 8), get(data + 304, 8)};
  if (n[1] > size || n[2] > size) return UINT64_MAX;
  n[1] *= 4;
  for (uint64_t i = 0; i < T + 2; i++) {
    const uint8_t *e = data + 896 + 24 * i;
    uint64_t b = i < T ? get(e, 8) * get(e + 8, 8) * ag_dtype_size((ag_dtype)get(e + 16, 4)) : n[i - T + 1];
    at += b + 4 * (b ? (b + p - 1) / p : 1);
  }
  return at;
}

/* Saves a and compares the file with the input. */
static void check_resave(ag_ac *a, const uint8_t *data, size_t size) {
  uint64_t at = image_offset(data, size);
  if (at > size || size - at < 160 || get(data + at + 152, 8) != size - at)
    die("an accepted file does not end with a replay image after its header and sections");
  char path[256];
  temp_path(path, sizeof path, "ac");
  if (ag_ac_save(a, path) != AG_OK) die("a loaded agent could not be saved");
  size_t n;
  uint8_t *b = take_file(path, &n);
  int same = n >= at && same_but_stamp(data, at, b, at) &&
             image_resaves(ag_ac_replay(a), data + at, size - at, b + at, n - at);
  free(b);
  if (!same) die("a file saved again after its load differs from the input");
}

static void load(const uint8_t *data, size_t size) {
  FILE *f = input_stream(data, size);
  static int sentinel;
  ag_ac *a = (ag_ac *)&sentinel;
  uint64_t live0 = live_bytes();
  ag_status s = ag__ac_load_stream(ctx, f, "input", (size_t)1 << 20, &a);
  fclose(f);
  if (s != AG_OK) {
    check_refusal(a, &sentinel, "ag_ac_load", live0);
    return;
  }
  check_resave(a, data, size);
  ag_ac_free(a);
  ag_ctx_reset(ctx);
  if (live_bytes() != live0) die("a loaded and freed agent left device memory allocated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_begin("fuzz_ac_load");
  uint8_t *in = input_copy(data, size);
  uint64_t at = image_offset(in, size);
  if (at < size) fill_zero_crc(in + at, size - at); /* the table image's header */
  load(in, size);
  free(in);
  fuzz_end();
  return 0;
}
