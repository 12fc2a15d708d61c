/* opts.h — the options of every subcommand, as one table.
 *
 * Each option is a row (src/cli/opts.c): its name, the kind and range of
 * its value, its default, its help, the subcommands and algorithms that
 * take it, and where its value goes in a cli_settings (a field of the
 * settings, or of the DQN's or the actor-critic's configuration). One
 * parser walks the table for every subcommand: it reads the flags, checks
 * each value's kind and range, refuses an option of another algorithm, and
 * prints --help; the settings can be written as (name, value) pairs and
 * read back. Relations between options (--buffer against --batch, --gpus
 * against --device) stay with the subcommand that has them.
 */
#ifndef AGRL_CLI_OPTS_H
#define AGRL_CLI_OPTS_H

#include <stdint.h>
#include <stdio.h>

#include "agrl/ac.h"
#include "agrl/agent.h"
#include "agrl/agrl.h"

/* The subcommands with options; a row's cmds is a mask of CLI_IN(cmd). */
typedef enum cli_cmd { CLI_TRAIN, CLI_EVAL, CLI_BENCH, CLI_BENCH_DIST, CLI_DEMO, CLI_N_CMDS } cli_cmd;
/* train's algorithms, in the order of --algo's choices. */
typedef enum cli_algo { CLI_DQN, CLI_SAC, CLI_TD3, CLI_N_ALGOS } cli_algo;

/* The most environment steps (and the most of any count of steps: learning
 * starts, train frequency, target update) a run takes. Every count below it
 * is exact: the step counters are 64-bit and the epsilon schedule divides in
 * double (exact below 2^53); the updates of a run, at most steps /
 * train-freq x gradient-steps <= 1e11 x 2^24 ~ 1.7e18, stay below 2^63 for
 * every setting of the flags. 1e11 steps is also months of training at the
 * fastest rate measured (about 15,000 steps a second). */
#define CLI_MAX_STEPS 100000000000LL
#define CLI_MAX_GRADIENT_STEPS (1 << 24)
/* Rows the table may have (the bits of cli_settings.given). */
#define CLI_MAX_ROWS 128

typedef struct cli_device {
  ag_device_kind kind;
  int index;
} cli_device;

/* The settings of one run of a subcommand. Pointers point into the
 * argument vector that was parsed (or the pairs that were read). */
typedef struct cli_settings {
  cli_cmd cmd; /* no row writes here: an offset of 0 is "nowhere" */
  cli_device device;
  int64_t seed;
  /* set by the launcher of one process per GPU (train, bench-dist) */
  int64_t rank, world;
  const char *id_file;
  /* train */
  int algo; /* cli_algo */
  const char *env, *out, *resume;
  int64_t steps, n_envs, gpus, eval_every, eval_episodes, checkpoint_every, keep;
  double stop_at; /* INFINITY: none */
  int stop_on;    /* 0: the training episodes, 1: the evaluations */
  int quiet;
  ag_dqn_config dqn;
  ag_ac_config ac; /* sac and td3; the rows they share with the DQN's are copied in */
  /* eval */
  const char *model;
  int64_t episodes;
  /* bench */
  const char *filter, *json;
  int64_t iters; /* 0: each row's own count */
  /* bench-dist (gpus, batch shared with the others) and demo */
  int shape; /* 0: cartpole, 1: mujoco */
  int64_t batch, updates, reps, capacity;
  /* the rows given, one bit each (cli_opts_given) */
  uint8_t given[CLI_MAX_ROWS / 8];
} cli_settings;

/* The name of a subcommand ("bench-dist") and its usage printer (for
 * cli_bad_usage). */
const char *cli_cmd_name(cli_cmd cmd);
void (*cli_opts_usage(cli_cmd cmd))(FILE *);
/* Prints cmd's --help, every line from the table. */
void cli_opts_help(FILE *f, cli_cmd cmd);

/* Reads the flags argv[1..argc-1] of cmd into *s (first set to the
 * defaults: the table's, ag_dqn_defaults and ag_ac_defaults of the --algo
 * given). A flag may be given more than once (the last wins) unless its row
 * says once. Returns -1 when the run goes on; else the exit status to
 * return: 0 after --help (printed to stdout), 2 after a usage error (the
 * message and the usage printed to stderr). */
int cli_opts_parse(cli_cmd cmd, int argc, char **argv, cli_settings *s);

/* Whether the option NAME ("--hidden") was given. */
int cli_opts_given(const cli_settings *s, const char *name);
/* Marks NAME given (its value written by the caller). */
void cli_opts_mark(cli_settings *s, const char *name);

/* The table's row i (from 0): its name ("--lr"), and in *takes whether cmd
 * takes it; NULL past the last row. */
const char *cli_opts_row(int i, cli_cmd cmd, int *takes);
/* Whether NAME (without the dashes: "double") is a flag of cmd, one that
 * takes no value. */
int cli_opts_is_flag(cli_cmd cmd, const char *name);
/* train: whether ARG ("--quiet") may be given beside --resume; *takes_value
 * says whether it takes a value. */
int cli_opts_beside_resume(const char *arg, int *takes_value);

/* The name of --algo's value (dqn, sac, td3). */
const char *cli_algo_name(int algo);

/* ---- the settings as (name, value) pairs ---- */

/* Called once a pair; a nonzero return stops the walk and is returned. */
typedef int (*cli_pair_fn)(const char *name, const char *value, void *user);
/* Each option given (save_all 0: those a checkpoint keeps, i.e. not
 * --quiet, --resume nor --help) as its name without the dashes ("lr") and
 * its value as text ("0.0007"; "true" for a flag), in the table's order. The
 * text reads back as the same bits. Returns 0 or fn's nonzero return. */
int cli_opts_pairs(const cli_settings *s, cli_pair_fn fn, void *user);
/* The value of one pair, as cli_opts_pairs writes it, into buf (size >= 64;
 * a text longer than buf is cut). */
void cli_opts_value_text(const cli_settings *s, const char *name, char *buf, size_t size);
/* The pairs back into *s, as flags given in that order would be, after the
 * defaults of cmd (the algo from an "algo" pair). Returns 0, or 2 after a
 * usage error printed to stderr (an unknown name, a bad value). */
int cli_opts_read_pairs(cli_cmd cmd, int n, const char *const *names, const char *const *values,
                        cli_settings *s);

#endif /* AGRL_CLI_OPTS_H */
