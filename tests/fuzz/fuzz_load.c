/* fuzz_load.c — the one libFuzzer harness of everything agrl reads from
 * files: models, replay tables, DQN and SAC/TD3 agents, shards, in the agrl
 * container and in the formats of agrl 0.1.0.
 *
 * Each input is handed to every loader (each through its stream entry,
 * fed memory through fmemopen, or a file for the shard's) on a CPU
 * context, tables limited to 1 MB of columns. Beyond what the sanitizers
 * catch (out-of-bounds reads, overflows, leaks, allocations past
 * -malloc_limit_mb), it aborts when a loader breaks its promises:
 *   - a refusal wrote *out, named no public call, or left device memory
 *     allocated (ctx stats live_bytes);
 *   - an accepted file gives an object that cannot be saved, whose file
 *     does not load, or that saves other bytes once loaded again (a save
 *     has one encoding of an object);
 *   - a loaded object, freed, left device memory allocated.
 * scripts/fuzz.sh builds it (cmake -DAGRL_FUZZ=ON) and runs it on a copy
 * of corpus/load/ (make_corpus.py writes the seeds).
 */
#include <limits.h>

#include "base/agfile.h" /* the container's reader: a shard's rank and group size */
#include "fuzz_common.h"

/* The loaders' entries (src/nn/mlp.c, src/replay/replay_file.c,
 * src/agent/dqn_file.c, src/agent/ac_file.c, src/dist/shard.c). */
ag_status ag__mlp_load_stream(ag_ctx *ctx, FILE *f, const char *name, ag_mlp **out);
ag_status ag__replay_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_replay **out);
ag_status ag__dqn_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_dqn **out);
ag_status ag__ac_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_ac **out);
ag_status ag__shard_load_limited(ag_ctx *ctx, const char *path, int rank, int world, size_t max_table_bytes,
                                 ag_shard **out);

#define MAX_TABLE ((size_t)1 << 20)

static char in_path[256];
static int shard_rank, shard_world;

/* One kind of object: its load from bytes, save, free. */
typedef struct kind {
  const char *load_fn, *tag;
  ag_status (*load)(const uint8_t *data, size_t size, void **out); /* *out kept on a refusal */
  ag_status (*save)(const void *x, const char *path);
  void (*free)(void *x);
} kind;

static ag_status mlp_load(const uint8_t *d, size_t n, void **out) {
  FILE *f = input_stream(d, n);
  ag_mlp *m = *out;
  ag_status s = ag__mlp_load_stream(ctx, f, "input", &m);
  fclose(f);
  *out = m;
  return s;
}
static ag_status mlp_save(const void *x, const char *p) { return ag_mlp_save(x, p); }
static void mlp_free(void *x) { ag_mlp_free(x); }

static ag_status replay_load(const uint8_t *d, size_t n, void **out) {
  FILE *f = input_stream(d, n);
  ag_replay *r = *out;
  ag_status s = ag__replay_load_stream(ctx, f, "input", MAX_TABLE, &r);
  fclose(f);
  *out = r;
  return s;
}
static ag_status replay_save(const void *x, const char *p) { return ag_replay_save(x, p); }
static void replay_free(void *x) { ag_replay_free(x); }

static ag_status dqn_load(const uint8_t *d, size_t n, void **out) {
  FILE *f = input_stream(d, n);
  ag_dqn *a = *out;
  ag_status s = ag__dqn_load_stream(ctx, f, "input", MAX_TABLE, &a);
  fclose(f);
  *out = a;
  return s;
}
static ag_status dqn_save(const void *x, const char *p) { return ag_dqn_save(x, p); }
static void dqn_free(void *x) { ag_dqn_free(x); }

static ag_status ac_load(const uint8_t *d, size_t n, void **out) {
  FILE *f = input_stream(d, n);
  ag_ac *a = *out;
  ag_status s = ag__ac_load_stream(ctx, f, "input", MAX_TABLE, &a);
  fclose(f);
  *out = a;
  return s;
}
static ag_status ac_save(const void *x, const char *p) { return ag_ac_save(x, p); }
static void ac_free(void *x) { ag_ac_free(x); }

static ag_status shard_load(const uint8_t *d, size_t n, void **out) {
  if (!*in_path) temp_path(in_path, sizeof in_path, "shard_in");
  FILE *f = fopen(in_path, "wb");
  if (!f || fwrite(d, 1, n, f) != n || fclose(f) != 0) die("the input cannot be written to a file");
  ag_shard *sh = *out;
  ag_status s = ag__shard_load_limited(ctx, in_path, shard_rank, shard_world, MAX_TABLE, &sh);
  unlink(in_path);
  *out = sh;
  return s;
}
/* The rank and group size a shard file names: its keys shard.rank and
 * shard.world as the container's reader gives them, in the container and
 * in the layout of agrl 0.1.0 alike; rank 0 of 1 when it names none, or a
 * group outside 1..64. */
static void shard_group(const uint8_t *d, size_t n, int *rank, int *world) {
  int64_t r = 0, w = 1;
  FILE *f = input_stream(d, n);
  ag__agf a;
  if (ag__agf_read_head(&a, f, n, "fuzz_load", "input") == AG_OK) {
    const ag__agf_key *kr = ag__agf_key_find(&a, "shard.rank"), *kw = ag__agf_key_find(&a, "shard.world");
    if (kr && kw && (kr->type == AG__AGF_I64 || kr->type == AG__AGF_U64) &&
        (kw->type == AG__AGF_I64 || kw->type == AG__AGF_U64))
      r = kr->v.i, w = kw->v.i;
  }
  ag__agf_free(&a);
  fclose(f);
  if (w < 1 || w > 64 || r < 0 || r >= w) r = 0, w = 1;
  *rank = (int)r, *world = (int)w;
}
static ag_status shard_save(const void *x, const char *p) { return ag_shard_save(x, p); }
static void shard_free(void *x) { ag_shard_free(x); }

static const kind kinds[] = {{"ag_mlp_load", "mlp", mlp_load, mlp_save, mlp_free},
                             {"ag_replay_load", "replay", replay_load, replay_save, replay_free},
                             {"ag_dqn_load", "dqn", dqn_load, dqn_save, dqn_free},
                             {"ag_ac_load", "ac", ac_load, ac_save, ac_free},
                             {"ag_shard_load", "shard", shard_load, shard_save, shard_free}};

/* The bytes x saves (malloc'd, *n of them). */
static uint8_t *saved(const kind *k, const void *x, size_t *n) {
  char path[256];
  temp_path(path, sizeof path, k->tag);
  if (k->save(x, path) != AG_OK) die("a loaded object could not be saved");
  return take_file(path, n);
}

/* x saved, loaded again and saved again: the two files are the same. */
static void check_resave(const kind *k, const void *x) {
  size_t n1, n2;
  uint8_t *b1 = saved(k, x, &n1);
  static int sentinel;
  void *y = &sentinel;
  if (k->load(b1, n1, &y) != AG_OK) die("an object saved after its load does not load");
  uint8_t *b2 = saved(k, y, &n2);
  if (n1 != n2 || memcmp(b1, b2, n1) != 0) die("an object saved, loaded and saved again gave another file");
  free(b1), free(b2);
  k->free(y);
}

static void try_kind(const kind *k, const uint8_t *data, size_t size) {
  static int sentinel;
  void *x = &sentinel;
  uint64_t live0 = live_bytes();
  ag_status s = k->load(data, size, &x);
  if (s != AG_OK) {
    check_refusal(x, &sentinel, k->load_fn, live0);
    return;
  }
  check_resave(k, x);
  k->free(x);
  ag_ctx_reset(ctx);
  if (live_bytes() != live0) die("a loaded and freed object left device memory allocated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_begin("fuzz_load");
  uint8_t *in = input_copy(data, size);             /* a header CRC of 0 filled in */
  shard_group(in, size, &shard_rank, &shard_world); /* a shard file is loaded as the rank it names */
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) try_kind(&kinds[i], in, size);
  free(in);
  fuzz_end();
  return 0;
}
