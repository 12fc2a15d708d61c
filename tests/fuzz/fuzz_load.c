/* fuzz_load.c — the one libFuzzer harness of everything agrl reads from
 * files: models, replay tables, DQN and SAC/TD3 agents, shards, in the agrl
 * container and in the formats of agrl 0.1.0; a training loop's run state
 * (kind "run", as a resume parses it) and `agrl train`'s state in a
 * checkpoint (kind "cli", src/cli/cli_state.c).
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
 *   - a loaded object, freed, left device memory allocated;
 *   - a refused run or cli state wrote its output; an accepted run state
 *     encodes to bytes that parse and encode again to the same bytes; an
 *     accepted cli state's settings are not NUL-separated flags.
 * scripts/fuzz.sh builds it (cmake -DAGRL_FUZZ=ON) and runs it on a copy
 * of corpus/load/ (make_corpus.py writes the seeds).
 */
#include <limits.h>

#include "agent/agent_internal.h" /* the run state's parser and encoder */
#include "base/agfile.h"          /* the container's reader: a shard's rank and group size */
#include "cli/cli_state.h"        /* the cli state's parser */
#include "fuzz_common.h"

/* The loaders' entries (src/nn/mlp.c, src/replay/replay_file.c,
 * src/agent/dqn_file.c, src/agent/ac_file.c, src/replay/frames_file.c,
 * src/dist/shard.c). */
ag_status ag__mlp_load_stream(ag_ctx *ctx, FILE *f, const char *name, ag_mlp **out);
ag_status ag__replay_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_replay **out);
ag_status ag__dqn_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_dqn **out);
ag_status ag__ac_load_stream(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes, ag_ac **out);
ag_status ag__frames_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_frames **out);
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

static ag_status frames_load(const uint8_t *d, size_t n, void **out) {
  FILE *f = input_stream(d, n);
  ag_frames *t = *out;
  ag_status s = ag__frames_load_stream(ctx, f, "input", MAX_TABLE, &t);
  fclose(f);
  *out = t;
  return s;
}
static ag_status frames_save(const void *x, const char *p) { return ag_frames_save(x, p); }
static void frames_free(void *x) { ag_frames_free(x); }

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
                             {"ag_shard_load", "shard", shard_load, shard_save, shard_free},
                             {"ag_frames_load", "frames", frames_load, frames_save, frames_free}};

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

/* ---- run states (src/agent/learn.c) ---- */

/* What a resume would ask of the run state in the input: the loop, copies,
 * observation width and environment state's bytes its own keys and
 * sections name (within small limits), else those of the corpus' seeds. */
static void run_shape(const uint8_t *d, size_t n, const char **loop, int *ne, int *od, size_t *env) {
  *loop = "dqn", *ne = 2, *od = 4, *env = 12;
  FILE *f = input_stream(d, n);
  ag__agf a;
  ag__agf_init(&a);
  if (ag__agf_read(&a, f, n, "fuzz_load", "input") == AG_OK) {
    const ag__agf_key *l = ag__agf_key_find(&a, "run.loop"), *kn = ag__agf_key_find(&a, "run.n_envs"),
                      *ko = ag__agf_key_find(&a, "run.obs_dim");
    const int es = ag__agf_section_find(&a, "env_state");
    if (l && l->type == AG__AGF_STR && !strcmp(l->data, "ac")) *loop = "ac";
    if (kn && ko && kn->type == AG__AGF_I64 && ko->type == AG__AGF_I64 && kn->v.i >= 1 && ko->v.i >= 1 &&
        kn->v.i <= 4096 && ko->v.i <= 4096 && kn->v.i * ko->v.i <= 65536)
      *ne = (int)kn->v.i, *od = (int)ko->v.i;
    if (es >= 0 && a.sections[es].bytes <= ((uint64_t)1 << 20)) *env = (size_t)a.sections[es].bytes;
  }
  ag__agf_free(&a);
  fclose(f);
}

/* A refusal of `fn` left *out as it was (sentinel) and named fn. */
static void check_plain_refusal(const void *out, const void *sentinel, size_t n, const char *fn) {
  if (memcmp(out, sentinel, n) != 0) die("a refused parse wrote its output");
  size_t k = strlen(fn);
  const char *msg = ag_last_error();
  if (strncmp(msg, fn, k) != 0 || strncmp(msg + k, ": ", 2) != 0)
    die("a refusal's message does not name its call");
}

static uint8_t *run_encoded(const ag__run_state *r, const char *loop, int ne, int od, size_t *n) {
  char *b = NULL;
  if (ag__run_encode(&r->loop, loop, ne, od, r->obs, r->env, r->env_bytes, "fuzz_run", &b, n) != AG_OK)
    die("an accepted run state does not encode");
  return (uint8_t *)b;
}

static void try_run(const uint8_t *d, size_t n) {
  const char *loop;
  int ne, od;
  size_t E;
  run_shape(d, n, &loop, &ne, &od, &E);
  ag__run_state r, sentinel;
  memset(&r, 0xA5, sizeof r);
  sentinel = r;
  if (ag__run_parse(d, n, loop, ne, od, E, "fuzz_run", &r) != AG_OK) {
    check_plain_refusal(&r, &sentinel, sizeof r, "fuzz_run");
    return;
  }
  size_t n1, n2;
  uint8_t *b1 = run_encoded(&r, loop, ne, od, &n1);
  ag__run_state again;
  if (ag__run_parse(b1, n1, loop, ne, od, E, "fuzz_run", &again) != AG_OK)
    die("an encoded run state does not parse");
  uint8_t *b2 = run_encoded(&again, loop, ne, od, &n2);
  if (n1 != n2 || memcmp(b1, b2, n1) != 0) die("a run state parsed and encoded again gave other bytes");
  free(b1), free(b2);
  ag__run_state_free(&r);
  ag__run_state_free(&again);
}

/* ---- the cli state of a checkpoint (src/cli/cli_state.c) ---- */

static void try_cli(const uint8_t *d, size_t n) {
  cli_ckpt c, sentinel;
  memset(&c, 0xA5, sizeof c);
  sentinel = c;
  FILE *f = input_stream(d, n);
  ag_status s = cli_ckpt_parse(f, n, "input", &c);
  fclose(f);
  if (s != AG_OK) {
    check_plain_refusal(&c, &sentinel, sizeof c, "agrl train");
    return;
  }
  /* the settings: "--NAME" NUL, then its value NUL unless a flag */
  if (c.args_len && c.args[c.args_len - 1] != '\0') die("an accepted cli state's settings do not end in NUL");
  for (size_t i = 0; i < c.args_len; i += strlen(c.args + i) + 1) {
    if (strncmp(c.args + i, "--", 2) != 0) die("an accepted cli state's settings are not flags");
    if (!cli_opts_is_flag(CLI_TRAIN, c.args + i + 2)) i += strlen(c.args + i) + 1;
  }
  if (!c.log[CLI_LOG_EPISODES] || !c.log[CLI_LOG_LOSSES]) die("an accepted cli state has no logs");
  cli_ckpt_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_begin("fuzz_load");
  uint8_t *in = input_copy(data, size);             /* a header CRC of 0 filled in */
  shard_group(in, size, &shard_rank, &shard_world); /* a shard file is loaded as the rank it names */
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) try_kind(&kinds[i], in, size);
  try_run(in, size);
  try_cli(in, size);
  free(in);
  fuzz_end();
  return 0;
}
