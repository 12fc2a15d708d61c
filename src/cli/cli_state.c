/* cli_state.c — the command's own state in a checkpoint (cli_state.h): the
 * container of kind "cli" (docs/container.md), its writer and its reader,
 * and, in one marked place at the end, the files of agrl 0.1.0 it
 * replaces.
 *
 * The settings are one key per option given, in the option table's order:
 * cli.opt.NAME, a string of its value as cli_opts_pairs writes it, or, for
 * a flag (cli_opts_is_flag), the i64 1, so that a resume reads a flag as a
 * flag; cli.opts counts them. The counters are typed keys (f64 keys hold
 * the exact bits, so a resumed run's summary is the one an uninterrupted
 * run writes). The logs are the blob sections episodes.csv, losses.csv and
 * (with --eval-every) eval.csv.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/agfile.h"
#include "cli/cli.h"
#include "cli/cli_state.h"

#define FN "agrl train: --resume"            /* the reader's messages begin so */
#define CLI_PART ((size_t)1 << 20)           /* the container's part length */
#define MAX_LOG ((uint64_t)1 << 31)          /* bytes of a log a resume reads */
#define BIG (INT64_MAX / 2)                  /* the largest count */
static const char opt_prefix[] = "cli.opt."; /* the settings' keys */

static const char *const log_names[CLI_N_LOGS] = {"episodes.csv", "losses.csv", "eval.csv"};

const char *cli_log_name(int i) { return log_names[i]; }

/* ---- the counters as keys: one table for the writer and the reader ---- */

enum { T_I64, T_INT, T_KIND, T_F64, T_F32 };

typedef struct counter_key {
  const char *name;
  int type;
  size_t off;     /* in cli_counters */
  int64_t lo, hi; /* integers' range */
} counter_key;

#define LAST(f) offsetof(cli_counters, last) + offsetof(ag_train_event, f)
static const counter_key counter_keys[] = {
    {"cli.rows", T_I64, offsetof(cli_counters, rows), 0, BIG},
    {"cli.best_mean", T_F64, offsetof(cli_counters, best_mean), 0, 0},
    {"cli.solved_at", T_I64, offsetof(cli_counters, solved_at), -1, BIG},
    {"cli.last_loss", T_F32, offsetof(cli_counters, last_loss), 0, 0},
    {"cli.last.kind", T_KIND, LAST(kind), AG_TRAIN_EPISODE, AG_TRAIN_PHASE},
    {"cli.last.step", T_I64, LAST(step), 0, BIG},
    {"cli.last.episodes", T_I64, LAST(episodes), 0, BIG},
    {"cli.last.updates", T_I64, LAST(updates), 0, BIG},
    {"cli.last.episode_return", T_F64, LAST(episode_return), 0, 0},
    {"cli.last.episode_length", T_I64, LAST(episode_length), 0, BIG},
    {"cli.last.truncated", T_INT, LAST(truncated), 0, 1},
    {"cli.last.mean_return", T_F64, LAST(mean_return), 0, 0},
    {"cli.last.loss", T_F32, LAST(loss), 0, 0},
    {"cli.last.epsilon", T_F32, LAST(epsilon), 0, 0},
    {"cli.evals", T_I64, offsetof(cli_counters, evals), 0, BIG},
    {"cli.eval_solved_at", T_I64, offsetof(cli_counters, eval_solved_at), -1, BIG},
    {"cli.best_eval_at", T_I64, offsetof(cli_counters, best_eval_at), -1, BIG},
    {"cli.last_eval", T_F64, offsetof(cli_counters, last_eval), 0, 0},
    {"cli.best_eval", T_F64, offsetof(cli_counters, best_eval), 0, 0},
};
#undef LAST
enum { N_COUNTERS = sizeof counter_keys / sizeof counter_keys[0] };

static void counters_to_keys(const cli_counters *c, ag__agf *a) {
  for (int i = 0; i < N_COUNTERS; i++) {
    const counter_key *k = &counter_keys[i];
    const char *p = (const char *)c + k->off;
    switch (k->type) {
      case T_I64: ag__agf_set_i64(a, k->name, *(const int64_t *)(const void *)p); break;
      case T_INT: ag__agf_set_i64(a, k->name, *(const int *)(const void *)p); break;
      case T_KIND: ag__agf_set_i64(a, k->name, *(const ag_train_event_kind *)(const void *)p); break;
      case T_F64: ag__agf_set_f64(a, k->name, *(const double *)(const void *)p); break;
      default: ag__agf_set_f64(a, k->name, *(const float *)(const void *)p); break;
    }
  }
}

/* The counters from a's keys into *c (written only when all are sound);
 * AG_ERR_IO naming the first that is not. */
static ag_status counters_from_keys(const ag__agf *a, const char *name, cli_counters *c) {
  cli_counters t = *c;
  for (int i = 0; i < N_COUNTERS; i++) {
    const counter_key *k = &counter_keys[i];
    char *p = (char *)&t + k->off;
    int64_t v = 0;
    double f = 0;
    ag_status s = k->type <= T_KIND ? ag__agf_get_i64(a, k->name, k->lo, k->hi, &v, FN, name)
                                    : ag__agf_get_f64(a, k->name, &f, FN, name);
    if (s) return s;
    if (k->type == T_F32 && !isnan(f) && (fabs(f) > FLT_MAX ? !isinf(f) : (double)(float)f != f))
      return ag__fail(AG_ERR_IO, "%s: %s is corrupt: key '%s' is not an f32", FN, name, k->name);
    switch (k->type) {
      case T_I64: *(int64_t *)(void *)p = v; break;
      case T_INT: *(int *)(void *)p = (int)v; break;
      case T_KIND: *(ag_train_event_kind *)(void *)p = (ag_train_event_kind)v; break;
      case T_F64: *(double *)(void *)p = f; break;
      default: *(float *)(void *)p = (float)f; break;
    }
  }
  *c = t;
  return AG_OK;
}

/* ---- writing ---- */

/* A log's bytes so far, read from its temporary file part by part. */
typedef struct log_src {
  const char *path;
  FILE *in;
} log_src;

static ag_status fill_log(void *user, unsigned char *dst, uint64_t off, size_t len) {
  log_src *l = user;
  if (!l->in && !(l->in = fopen(l->path, "rb")))
    return ag__fail(AG_ERR_IO, "agrl train: cannot read %s: %s", l->path, strerror(errno));
  if (fseeko(l->in, (off_t)off, SEEK_SET) || fread(dst, 1, len, l->in) != len)
    return ag__fail(AG_ERR_IO, "agrl train: cannot read %s", l->path);
  return AG_OK;
}

static int count_opt(const char *name, const char *value, void *user) {
  (void)name, (void)value;
  ++*(int64_t *)user;
  return 0;
}

/* One option as a key: a flag's i64 1, else its value's text. */
static int put_opt(const char *name, const char *value, void *user) {
  char key[AG__AGF_MAX_NAME + 1];
  snprintf(key, sizeof key, "%s%s", opt_prefix, name);
  if (!strcmp(value, "true") && cli_opts_is_flag(CLI_TRAIN, name))
    ag__agf_set_i64(user, key, 1);
  else
    ag__agf_set_str(user, key, value);
  return 0;
}

ag_status cli_ckpt_write(const char *dir, const cli_settings *s, const cli_counters *sum,
                         ag__afile *const logs[CLI_N_LOGS]) {
  ag__agf a;
  ag__agf_init(&a);
  ag__agf_set_str(&a, "kind", "cli");
  ag__agf_set_i64(&a, "cli.version", 1);
  int64_t n = 0;
  cli_opts_pairs(s, count_opt, &n);
  ag__agf_set_i64(&a, "cli.opts", n);
  cli_opts_pairs(s, put_opt, &a);
  counters_to_keys(sum, &a);
  log_src src[CLI_N_LOGS] = {{NULL, NULL}};
  ag_status st = AG_OK;
  for (int i = 0; i < CLI_N_LOGS && !st; i++) {
    struct stat sb;
    if (!logs[i]) continue;
    src[i].path = logs[i]->tmp;
    if (fflush(logs[i]->f) || stat(logs[i]->tmp, &sb))
      st = ag__fail(AG_ERR_IO, "agrl train: cannot read %s: %s", logs[i]->tmp, strerror(errno));
    else
      ag__agf_add_blob(&a, log_names[i], (uint64_t)sb.st_size, fill_log, &src[i]);
  }
  char *path = st ? NULL : cli_path(dir, CLI_STATE_FILE);
  if (!st && !path) st = ag__fail(AG_ERR_OUT_OF_MEMORY, "agrl train: out of memory");
  if (!st) st = ag__agf_save(&a, path, CLI_PART, "agrl train");
  for (int i = 0; i < CLI_N_LOGS; i++)
    if (src[i].in) fclose(src[i].in);
  free(path);
  ag__agf_free(&a);
  return st;
}

/* ---- reading ---- */

void cli_ckpt_free(cli_ckpt *c) {
  free(c->args);
  for (int i = 0; i < CLI_N_LOGS; i++) free(c->log[i]);
  memset(c, 0, sizeof *c);
}

/* Whether NAME ("lr") is an option of train a checkpoint may keep. */
static int kept_option(const char *name) {
  int takes = 0;
  const char *row;
  if (!strcmp(name, "resume") || !strcmp(name, "help")) return 0;
  for (int i = 0; (row = cli_opts_row(i, CLI_TRAIN, &takes)); i++)
    if (takes && !strcmp(row + 2, name)) return 1;
  return 0;
}

/* The settings' keys checked: *bytes, the length of their flags. */
static ag_status check_opts(const ag__agf *a, const char *name, size_t *bytes) {
  int64_t want = 0, n = 0;
  ag_status s = ag__agf_get_i64(a, "cli.opts", 0, AG__AGF_MAX_KEYS, &want, FN, name);
  *bytes = 0;
  for (int i = 0; !s && i < a->n_keys; i++) {
    const ag__agf_key *k = &a->keys[i];
    if (strncmp(k->name, opt_prefix, sizeof opt_prefix - 1)) continue;
    const char *opt = k->name + sizeof opt_prefix - 1;
    const int flag = cli_opts_is_flag(CLI_TRAIN, opt);
    if (!kept_option(opt))
      s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: key '%s' is no option of agrl train", FN, name, k->name);
    else if (flag && (k->type != AG__AGF_I64 || k->v.i != 1))
      s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: key '%s' (a flag) is not the i64 1", FN, name, k->name);
    else if (!flag && k->type != AG__AGF_STR)
      s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: key '%s' is not a string", FN, name, k->name);
    n++;
    *bytes += strlen(opt) + 3 + (flag ? 0 : (size_t)k->count + 1);
  }
  if (!s && n != want)
    s = ag__fail(AG_ERR_IO, "%s: %s is corrupt: it holds %lld options, cli.opts says %lld", FN, name,
                 (long long)n, (long long)want);
  return s;
}

/* The sections: the logs (episodes.csv and losses.csv; eval.csv may be
 * missing), blobs of at most MAX_LOG bytes, nothing else; their indices. */
static ag_status check_logs(const ag__agf *a, const char *name, int sec[CLI_N_LOGS]) {
  int found = 0;
  for (int i = 0; i < CLI_N_LOGS; i++) {
    sec[i] = ag__agf_section_find(a, log_names[i]);
    if (sec[i] < 0 && i != CLI_LOG_EVAL)
      return ag__fail(AG_ERR_IO, "%s: %s is corrupt: it has no section %s", FN, name, log_names[i]);
    if (sec[i] < 0) continue;
    const ag__agf_section *x = &a->sections[sec[i]];
    if (x->kind != AG__AGF_BLOB || x->bytes > MAX_LOG)
      return ag__fail(AG_ERR_IO, "%s: %s is corrupt: section %s is not a blob of at most %llu bytes", FN,
                      name, log_names[i], (unsigned long long)MAX_LOG);
    found++;
  }
  if (found != a->n_sections)
    return ag__fail(AG_ERR_IO, "%s: %s is corrupt: it has %d sections; the logs are %d", FN, name,
                    a->n_sections, found);
  return AG_OK;
}

/* The logs' bytes into the buffers of the sections they are. */
typedef struct log_dst {
  const int *sec;
  char **at;
} log_dst;

static ag_status take_log(void *user, int sec, unsigned char *buf, uint64_t off, size_t len) {
  const log_dst *d = user;
  for (int i = 0; i < CLI_N_LOGS; i++)
    if (sec == d->sec[i]) memcpy(d->at[i] + off, buf, len);
  return AG_OK;
}

/* The flags of the settings' keys into args (bytes long, as check_opts counted). */
static void write_args(const ag__agf *a, char *args) {
  size_t at = 0;
  for (int i = 0; i < a->n_keys; i++) {
    const ag__agf_key *k = &a->keys[i];
    if (strncmp(k->name, opt_prefix, sizeof opt_prefix - 1)) continue;
    at += (size_t)sprintf(args + at, "--%s", k->name + sizeof opt_prefix - 1) + 1;
    if (k->type == AG__AGF_STR) {
      memcpy(args + at, k->data, (size_t)k->count + 1);
      at += (size_t)k->count + 1;
    }
  }
}

ag_status cli_ckpt_parse(FILE *f, uint64_t left, const char *name, cli_ckpt *out) {
  ag__agf a;
  ag__agf_init(&a);
  cli_ckpt t;
  memset(&t, 0, sizeof t);
  int64_t version = 0;
  int sec[CLI_N_LOGS];
  ag_status s = ag__agf_read(&a, f, left, FN, name);
  if (!s) s = ag__agf_check_kind(&a, "cli", 1, &version, FN, name);
  if (!s) s = check_opts(&a, name, &t.args_len);
  if (!s) s = counters_from_keys(&a, name, &t.sum);
  if (!s) s = check_logs(&a, name, sec);
  if (!s && !(t.args = malloc(t.args_len ? t.args_len : 1)))
    s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of memory", FN);
  for (int i = 0; !s && i < CLI_N_LOGS; i++) {
    if (sec[i] < 0) continue;
    t.log_len[i] = (size_t)a.sections[sec[i]].bytes;
    if (!(t.log[i] = malloc(t.log_len[i] ? t.log_len[i] : 1)))
      s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of memory", FN);
  }
  log_dst d = {sec, t.log};
  if (!s) s = ag__agf_stream(&a, f, take_log, &d, FN, name);
  if (!s) write_args(&a, t.args);
  ag__agf_free(&a);
  if (s) {
    cli_ckpt_free(&t);
    return s;
  }
  *out = t;
  return AG_OK;
}

static int read_legacy(const char *ckpt, cli_ckpt *out);

int cli_ckpt_read(const char *ckpt, cli_ckpt *out) {
  char *path = cli_path(ckpt, CLI_STATE_FILE);
  struct stat sb;
  if (!path) {
    fprintf(stderr, "agrl train: out of memory\n");
    return -1;
  }
  if (stat(path, &sb) && errno == ENOENT) { /* a checkpoint of agrl 0.1.0 */
    free(path);
    return read_legacy(ckpt, out);
  }
  FILE *f = NULL;
  uint64_t left = 0;
  ag_status s = ag__open_read(path, FN, &f);
  if (!s) s = ag__stream_left(f, FN, path, "an agrl file", &left);
  if (!s) s = cli_ckpt_parse(f, left, path, out);
  if (f) fclose(f);
  free(path);
  if (s) fprintf(stderr, "%s\n", ag_last_error());
  return s ? -1 : 0;
}

/* ---- the checkpoints of agrl 0.1.0 ----
 * Where a checkpoint directory has no cli.agrl, its state is in the files
 * of 0.1.0: args (the settings as cli_ckpt.args holds them, NUL-separated
 * "--NAME" and values), cli.state (the counters as text, floats in C99's
 * hexadecimal form) and the logs as files. Read here, and only here. */

/* DIR/NAME whole, of at most max bytes, NUL-terminated, in *out (free it):
 * 0; 1 when it is not there and may_miss; -1 with a message. */
static int read_whole(const char *dir, const char *name, uint64_t max, int may_miss, char **out,
                      size_t *len) {
  char *path = cli_path(dir, name);
  FILE *f = path ? fopen(path, "rb") : NULL;
  if (!f) {
    int missing = path && errno == ENOENT && may_miss;
    if (!missing)
      fprintf(stderr, "%s: cannot read %s/%s: %s\n", FN, dir, name, path ? strerror(errno) : "out of memory");
    free(path);
    return missing ? 1 : -1;
  }
  uint64_t n = 0;
  char *b = NULL;
  ag_status s = ag__stream_left(f, FN, path, "a file", &n);
  if (!s && n > max)
    s = ag__fail(AG_ERR_IO, "%s: %s is longer than %llu bytes", FN, path, (unsigned long long)max);
  if (!s && !(b = malloc((size_t)n + 1))) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of memory", FN);
  if (!s && fread(b, 1, (size_t)n, f) != (size_t)n) s = ag__fail(AG_ERR_IO, "%s: cannot read %s", FN, path);
  fclose(f);
  free(path);
  if (s) {
    fprintf(stderr, "%s\n", ag_last_error());
    free(b);
    return -1;
  }
  b[n] = '\0';
  *out = b;
  *len = (size_t)n;
  return 0;
}

/* cli.state's text into the keys of kind "cli", read as the container's. */
static int legacy_counters(const char *ckpt, cli_counters *c) {
  char *b = NULL;
  size_t n;
  if (read_whole(ckpt, "cli.state", 4096, 0, &b, &n)) return -1;
  long long v[11];
  double f[9];
  int m =
      sscanf(b,
             "rows %lld best_mean %la solved_at %lld last_loss %la last %lld %lld %lld %lld %la %lld %lld "
             "%la %la %la evals %lld %lld %lld %la %la",
             &v[0], &f[0], &v[1], &f[1], &v[2], &v[3], &v[4], &v[5], &f[2], &v[6], &v[7], &f[3], &f[4], &f[5],
             &v[8], &v[9], &v[10], &f[6], &f[7]);
  free(b);
  if (m != 19) {
    fprintf(stderr, "%s: %s/cli.state is not a checkpoint's cli.state\n", FN, ckpt);
    return -1;
  }
  /* the values in the order of counter_keys */
  const int is_f[N_COUNTERS] = {0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1};
  ag__agf a;
  ag__agf_init(&a);
  for (int i = 0, iv = 0, jf = 0; i < N_COUNTERS; i++) {
    if (is_f[i])
      ag__agf_set_f64(&a, counter_keys[i].name, f[jf++]);
    else
      ag__agf_set_i64(&a, counter_keys[i].name, v[iv++]);
  }
  char what[4200];
  snprintf(what, sizeof what, "%s/cli.state", ckpt);
  ag_status s =
      a.failed ? ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of memory", FN) : counters_from_keys(&a, what, c);
  ag__agf_free(&a);
  if (s) fprintf(stderr, "%s\n", ag_last_error());
  return s ? -1 : 0;
}

static int read_legacy(const char *ckpt, cli_ckpt *out) {
  cli_ckpt t;
  memset(&t, 0, sizeof t);
  int rc = read_whole(ckpt, "args", (size_t)1 << 20, 0, &t.args, &t.args_len);
  if (!rc && t.args_len && t.args[t.args_len - 1] != '\0') {
    fprintf(stderr, "%s: %s/args is damaged\n", FN, ckpt);
    rc = -1;
  }
  if (!rc) rc = legacy_counters(ckpt, &t.sum);
  for (int i = 0; !rc && i < CLI_N_LOGS; i++)
    if ((rc = read_whole(ckpt, log_names[i], MAX_LOG, i == CLI_LOG_EVAL, &t.log[i], &t.log_len[i])) > 0)
      rc = 0; /* no eval.csv: a run without --eval-every */
  if (rc) {
    cli_ckpt_free(&t);
    return -1;
  }
  *out = t;
  return 0;
}
