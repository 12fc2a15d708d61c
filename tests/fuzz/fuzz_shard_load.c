/* fuzz_shard_load.c — libFuzzer harness of the shard-file loader.
 *
 * Each input is a shard file (agrl/dist.h, "ag_shard_save"), written to a
 * temporary file of this process (/dev/shm, else /tmp) and loaded with
 * ag_shard_load on a CPU context (fuzz_common.h), as the rank and group
 * size its header names (rank 0 of 1 where those bytes are none a call
 * accepts), so that the loader's own checks see every input. The
 * loader takes no limit: an input whose header or table image says more
 * than 1 MB of columns (global capacity times rows, 4 bytes a value) is
 * not loaded, so that it cannot make the loader allocate more. It aborts
 * when the loader breaks its promises:
 *   - a refusal wrote *out, its message does not begin with
 *     "ag_shard_load: ", or it left device memory allocated (ctx stats
 *     live_bytes);
 *   - an accepted file loads, as another group size, to anything but a
 *     refusal with AG_ERR_INVALID_ARG (and its promises);
 *   - an accepted file holds what the loaded shard does not: saved again
 *     with ag_shard_save it must come back byte for byte up to its table's
 *     image, but for the library version (bytes 16..47) and the header's
 *     CRC; the image must come back as fuzz_replay_load's do (a save writes
 *     parts of AG_TRANSFER_PART_BYTES, so an image of other parts is
 *     compared with the table saved again with its part length);
 *   - the loaded shard, freed, left device memory allocated.
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include <limits.h>

#include "fuzz_common.h"

static char in_path[256];

/* Whether the tables the input describes fit in 1 MB of columns: its
 * header's (global capacity at 56 times the widths of the n_fields at 80,
 * from byte 88) and its replay image's (capacity at image byte 56 times
 * rows at 88). What the input is too short to hold, the loader refuses
 * before it allocates. */
static int small_enough(const uint8_t *data, size_t size) {
  const uint64_t most = (uint64_t)1 << 20;
  if (size < 88) return 1;
  uint64_t cap = get(data + 56, 8), nf = get(data + 80, 4), rows = 0;
  for (uint64_t i = 0; i < nf && 88 + 16 * i + 8 <= size; i++) {
    uint64_t w = get(data + 88 + 16 * i, 8);
    if (w > most || (rows += w) > most) return 0;
  }
  if (cap > most || cap * rows * 4 > most) return 0;
  uint64_t at = get(data + 12, 4);
  if (at + 96 > size) return 1;
  uint64_t icap = get(data + at + 56, 8), irows = get(data + at + 88, 8);
  return icap <= most && irows <= most && icap * irows * 4 <= most;
}

/* Saves sh and compares the file with the input. */
static void check_resave(ag_shard *sh, const uint8_t *data, size_t size) {
  uint64_t at = get(data + 12, 4);
  char path[256];
  temp_path(path, sizeof path, "shard_saved");
  if (ag_shard_save(sh, path) != AG_OK) die("a loaded shard could not be saved");
  size_t n;
  uint8_t *b = take_file(path, &n);
  int same = at <= size && n >= at && same_but_stamp(data, at, b, at) &&
             image_resaves(ag_shard_local(sh), data + at, size - at, b + at, n - at);
  free(b);
  if (!same) die("a file saved again after its load differs from the input");
}

static void load(const uint8_t *data, size_t size) {
  if (!*in_path) temp_path(in_path, sizeof in_path, "shard");
  FILE *f = fopen(in_path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) die("the input cannot be written to a file");
  uint64_t rank = size >= 56 ? get(data + 48, 4) : 0, world = size >= 56 ? get(data + 52, 4) : 1;
  if (world < 1 || world > INT_MAX || rank >= world) rank = 0, world = 1;
  static int sentinel;
  ag_shard *sh = (ag_shard *)&sentinel;
  uint64_t live0 = live_bytes();
  ag_status s = ag_shard_load(ctx, in_path, (int)rank, (int)world, &sh);
  if (s != AG_OK) {
    unlink(in_path);
    check_refusal(sh, &sentinel, "ag_shard_load", live0);
    return;
  }
  ag_shard *other = (ag_shard *)&sentinel;
  uint64_t live1 = live_bytes();
  s = ag_shard_load(ctx, in_path, 0, world < INT_MAX ? (int)world + 1 : (int)world - 1, &other);
  unlink(in_path);
  if (s != AG_ERR_INVALID_ARG) die("a file loaded as another group size was not refused as such");
  check_refusal(other, &sentinel, "ag_shard_load", live1);
  check_resave(sh, data, size);
  ag_shard_free(sh);
  ag_ctx_reset(ctx);
  if (live_bytes() != live0) die("a loaded and freed shard left device memory allocated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!small_enough(data, size)) return 0;
  fuzz_begin("fuzz_shard_load");
  uint8_t *in = input_copy(data, size);
  size_t at = size >= 16 ? (size_t)get(in + 12, 4) : size;
  if (at < size) fill_zero_crc(in + at, size - at); /* the table image's header */
  load(in, size);
  free(in);
  fuzz_end();
  return 0;
}
