/* cli.h — helpers shared by the agrl subcommands. */
#ifndef AGRL_CLI_H
#define AGRL_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "agrl/agrl.h"

/* The value of the flag argv[i]: argv[i + 1], or NULL when there is none or
 * it is itself a flag (begins with "--"), so that `--out --quiet` reports
 * the missing directory instead of making one named --quiet. */
const char *cli_value(int argc, char **argv, int i);
/* Parses a device name ("auto", "cpu", "cuda", "cuda:N", "vulkan",
 * "vulkan:N"; N up to AG_DEVICE_INDEX_MAX) as ag_device_parse does.
 * Returns 0 on success. */
int cli_parse_device(const char *s, ag_device_kind *kind, int *index);
/* Parses a whole number in [lo, hi]: decimal digits after an optional sign,
 * nothing before or after them. Returns 0 on success. */
int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* Parses a finite number in [lo, hi] (never nan or inf, whatever the bounds;
 * no leading blanks). Returns 0 on success. */
int cli_parse_f64(const char *s, double lo, double hi, double *out);
/* DIR/NAME in a new allocation (free it), or NULL when out of memory: paths
 * are never cut to a fixed buffer. */
char *cli_path(const char *dir, const char *name);
/* Prints "agrl CMD: MESSAGE" and the usage to stderr; returns 2. */
int cli_bad_usage(const char *cmd, void (*usage)(FILE *), const char *fmt, ...);
/* Prints "agrl CMD: <what> failed: STATUS: last error" to stderr; returns 1. */
int cli_fail(const char *cmd, const char *what, ag_status s);

/* Seconds on a monotonic clock. */
double cli_now_s(void);

/* qsort comparator of doubles, ascending. */
int cli_cmp_double(const void *a, const void *b);

/* Runs `world` copies of this program's subcommand (argv[0] = its name) with
 * --rank R --world G --id-file F added, one per GPU; returns 0 when every
 * one succeeded, else the exit status of the first that did not (the others
 * are then stopped: they would wait for it). */
int cli_launch(const char *cmd, int argc, char **argv, int world);

#endif /* AGRL_CLI_H */
