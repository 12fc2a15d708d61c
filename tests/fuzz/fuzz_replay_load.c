/* fuzz_replay_load.c — libFuzzer harness of the replay-table loader.
 *
 * Each input is a replay file, fed to the loader's stream entry through
 * fmemopen on one CPU context made at the first input (tables of more than
 * 1 MB of columns are refused by the entry's limit, so that an input cannot
 * make it allocate more). It aborts when the loader breaks its promises:
 *   - a refusal wrote *out, named no public call, or left device memory
 *     allocated (ctx stats live_bytes);
 *   - an accepted file holds what the loaded table does not: it is saved
 *     again with the file's part length and must come back byte for byte,
 *     but for the library version (bytes 16..47) and the header's CRC.
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agrl/agrl.h"

/* The loader's stream entry and the save with a part length (src/replay/replay_file.c). */
ag_status ag__replay_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_replay **out);
ag_status ag__replay_save_parts(const ag_replay *r, const char *path, size_t part);

static ag_ctx *ctx;
static char save_path[256];

static void die(const char *what) {
  fprintf(stderr, "fuzz_replay_load: %s (last error: %s)\n", what, ag_last_error());
  abort();
}

static uint64_t live_bytes(void) {
  ag_ctx_stats st;
  ag_ctx_get_stats(ctx, &st);
  return st.live_bytes;
}

static uint64_t get(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void check_resave(ag_replay *r, const uint8_t *data, size_t size) {
  size_t hbytes = (size_t)get(data + 12, 4);
  if (ag__replay_save_parts(r, save_path, (size_t)get(data + 96, 8)) != AG_OK)
    die("a loaded table could not be saved");
  FILE *f = fopen(save_path, "rb");
  if (!f) die("the saved file cannot be opened");
  int same = 1;
  size_t i = 0;
  for (int c; (c = fgetc(f)) != EOF; i++) {
    int skip = (i >= 16 && i < 48) || (i + 4 >= hbytes && i < hbytes);
    if (i >= size || (!skip && (uint8_t)c != data[i])) same = 0;
  }
  fclose(f);
  unlink(save_path);
  if (!same || i != size) die("a file saved again after its load differs from the input");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t empty[1];
  if (!ctx) {
    if (ag_ctx_create(&ctx, AG_DEVICE_CPU, 0) != AG_OK) die("no CPU context");
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(save_path, sizeof save_path, "%s/agrl_fuzz_rpl_%ld.rpl", dir, (long)getpid());
  }
  FILE *f = fmemopen(size ? (void *)data : empty, size, "rb");
  if (!f) die("fmemopen failed");
  static int sentinel;
  ag_replay *r = (ag_replay *)&sentinel;
  uint64_t live0 = live_bytes();
  ag_status s = ag__replay_load_stream(ctx, f, "input", (size_t)1 << 20, &r);
  fclose(f);
  if (s != AG_OK) {
    if (r != (ag_replay *)&sentinel) die("a refused load wrote *out");
    if (strncmp(ag_last_error(), "ag_replay_load: ", 16) != 0)
      die("a refusal's message does not name ag_replay_load");
    if (live_bytes() != live0) die("a refused load left device memory allocated");
    return 0;
  }
  check_resave(r, data, size);
  ag_replay_free(r);
  ag_ctx_reset(ctx);
  if (live_bytes() != live0) die("a loaded and freed table left device memory allocated");
  return 0;
}
