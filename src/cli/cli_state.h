/* cli_state.h — what `agrl train` keeps of itself in a checkpoint.
 *
 * Beside the agent (agent.agrl, whose run state holds the training loop's),
 * a checkpoint directory holds the command's own state as one agrl
 * container of kind "cli" (docs/container.md), cli.agrl: the run's
 * settings, the counters of its summary and its logs so far. `--resume`
 * reads it back (or, in a checkpoint of agrl 0.1.0, the files args,
 * cli.state, episodes.csv, losses.csv and eval.csv it replaces).
 */
#ifndef AGRL_CLI_STATE_H
#define AGRL_CLI_STATE_H

#include <stdint.h>
#include <stdio.h>

#include "agrl/agent.h"
#include "base/base.h"
#include "cli/opts.h"

/* The container's name in a checkpoint directory. */
#define CLI_STATE_FILE "cli.agrl"

/* The counters of a run's summary, as a resumed run continues them. */
typedef struct cli_counters {
  int64_t rows;                         /* lines logged, both logs */
  double best_mean;                     /* the best mean20 (-inf: none yet) */
  int64_t solved_at;                    /* the step mean20 reached --stop-at (-1: not yet) */
  float last_loss;                      /* the last PHASE event's loss */
  ag_train_event last;                  /* the last event (all but actor_loss and alpha) */
  int64_t evals;                        /* evaluations so far (--eval-every) */
  int64_t eval_solved_at, best_eval_at; /* -1: none yet */
  double last_eval, best_eval;
} cli_counters;

/* The logs a checkpoint keeps (the names of their sections and files). */
enum { CLI_LOG_EPISODES, CLI_LOG_LOSSES, CLI_LOG_EVAL, CLI_N_LOGS };

/* What a checkpoint holds for the command. */
typedef struct cli_ckpt {
  char *args;      /* the settings as flags: "--NAME" NUL, then "VALUE" NUL unless a flag */
  size_t args_len; /* bytes of args */
  cli_counters sum;
  char *log[CLI_N_LOGS]; /* the logs' bytes so far (NULL: not kept, e.g. eval.csv without --eval-every) */
  size_t log_len[CLI_N_LOGS];
} cli_ckpt;

/* The file name of log i ("episodes.csv", "losses.csv", "eval.csv"). */
const char *cli_log_name(int i);

/* Writes DIR/cli.agrl (through a temporary name and a rename): the settings
 * s (the options cli_opts_pairs gives), the counters and the logs so far,
 * the bytes of each temporary file logs[i]->tmp (logs[i] NULL: none). */
ag_status cli_ckpt_write(const char *dir, const cli_settings *s, const cli_counters *sum,
                         ag__afile *const logs[CLI_N_LOGS]);

/* The state of the checkpoint directory ckpt into *out: its cli.agrl, or,
 * where it has none, the files of agrl 0.1.0. Returns 0, or -1 with the
 * message printed ("agrl train: --resume: ..."), *out untouched. */
int cli_ckpt_read(const char *ckpt, cli_ckpt *out);

/* A container of kind "cli" of `left` bytes from f's position (`name` in
 * messages) into *out: every key's presence, type and range and every
 * section checked before anything is allocated for them. AG_OK, or a
 * status with the message "agrl train: --resume: ..." and *out untouched. */
ag_status cli_ckpt_parse(FILE *f, uint64_t left, const char *name, cli_ckpt *out);

/* Frees what *c holds (a zeroed one too). */
void cli_ckpt_free(cli_ckpt *c);

#endif /* AGRL_CLI_STATE_H */
