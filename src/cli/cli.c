/* cli.c — argument parsing helpers shared by the subcommands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

const char *cli_value(int argc, char **argv, int i) {
  if (i + 1 >= argc) return NULL;
  const char *v = argv[i + 1];
  return strncmp(v, "--", 2) == 0 ? NULL : v;
}

int cli_parse_device(const char *s, ag_device_kind *kind, int *index) {
  return ag_device_parse(s, kind, index) == AG_OK ? 0 : -1;
}

/* Whether s begins like a number: strtoll and strtod would skip blanks and
 * strtod would take "nan", "inf" and "infinity" in any case. */
static int number_start(const char *s, int dot) {
  const char *p = s + (*s == '+' || *s == '-');
  return (*p >= '0' && *p <= '9') || (dot && *p == '.' && p[1] >= '0' && p[1] <= '9');
}

int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (!s || !number_start(s, 0)) return -1;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end != '\0' || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int cli_parse_f64(const char *s, double lo, double hi, double *out) {
  if (!s || !number_start(s, 1)) return -1;
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end != '\0' || !isfinite(v) || !(v >= lo && v <= hi)) return -1;
  *out = v;
  return 0;
}

char *cli_path(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (!p) return NULL;
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

int cli_bad_usage(const char *cmd, void (*usage)(FILE *), const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "agrl %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  usage(stderr);
  return 2;
}

int cli_fail(const char *cmd, const char *what, ag_status s) {
  fprintf(stderr, "agrl %s: %s failed: %s: %s\n", cmd, what, ag_status_name(s), ag_last_error());
  return 1;
}

double cli_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int cli_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
