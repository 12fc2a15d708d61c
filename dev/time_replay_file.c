/* time_replay_file.c — ag_replay_save and ag_replay_load of a full table
 * of 1M columns of 42 f32 with a prioritized sampler, on the CPU context,
 * beside a plain write + fsync and read of the same byte count in 16 MB
 * chunks: the median of 5 (or REPS) of each, in seconds and GB/s, and the
 * ratio to the plain row. A cold load or read comes after the file was
 * fsynced and dropped from the page cache (posix_fadvise DONTNEED); a warm
 * one right after a read of the whole file.
 * Build (after a CPU build in build-pipe), from the repository root:
 *   cc -O2 -Iinclude dev/time_replay_file.c -o /tmp/time_replay_file build-pipe/libagrl.a \
 *      -ldl -lz -lm -lpthread
 * Run: /tmp/time_replay_file [DIR] [COLUMNS] [REPS] (default: /tmp, 1000000, 5). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agrl/agrl.h"

#define MAX_REPS 99
static int reps = 5;
#define CHUNK ((size_t)16 << 20)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void ok(ag_status s, const char *what) {
  if (s) {
    fprintf(stderr, "%s: %s: %s\n", what, ag_status_name(s), ag_last_error());
    exit(1);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *t) {
  qsort(t, (size_t)reps, sizeof *t, cmp);
  return t[reps / 2];
}

/* Flushes path to disk and drops its pages from the page cache. */
static void drop(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0 || fsync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) {
    perror(path);
    exit(1);
  }
  close(fd);
}

/* Reads the whole of path in chunks (into the page cache). */
static void read_all(const char *path, unsigned char *buf) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    exit(1);
  }
  while (read(fd, buf, CHUNK) > 0) {
  }
  close(fd);
}

static void plain_write(const char *path, const unsigned char *buf, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  for (size_t off = 0; fd >= 0 && off < n; off += CHUNK) {
    size_t len = n - off < CHUNK ? n - off : CHUNK;
    if (write(fd, buf, len) != (ssize_t)len) fd = -1;
  }
  if (fd < 0 || fsync(fd) || close(fd)) {
    perror(path);
    exit(1);
  }
}

static void row(const char *what, double t, double bytes, double ref) {
  printf("%-26s %8.4f s %7.3f GB/s", what, t, bytes / t * 1e-9);
  if (ref > 0) printf("  %5.2fx plain", t / ref);
  printf("\n");
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "/tmp";
  const int64_t cap = argc > 2 ? atoll(argv[2]) : 1000000;
  if (argc > 3) reps = atoi(argv[3]);
  if (reps < 1 || reps > MAX_REPS) reps = 5;
  char path[512], plain[512];
  snprintf(path, sizeof path, "%s/time_replay_file.rpl", dir);
  snprintf(plain, sizeof plain, "%s/time_replay_file.plain", dir);

  ag_ctx *ctx;
  ok(ag_ctx_create(&ctx, AG_DEVICE_CPU, 0), "ctx");
  const ag_field fields[4] = {
      {"obs", 20, AG_F32}, {"next_obs", 20, AG_F32}, {"action", 1, AG_F32}, {"reward", 1, AG_F32}};
  ag_replay *r;
  ag_per *per;
  ok(ag_replay_create(ctx, fields, 4, cap, AG_F32, 1, &r), "create");
  ok(ag_per_create(r, 0.6f, &per), "per");
  const int64_t batch = 10000;
  float *cols[4];
  for (int i = 0; i < 4; i++) cols[i] = malloc((size_t)(batch * fields[i].width) * sizeof(float));
  int64_t *idx = malloc((size_t)batch * sizeof *idx);
  float *pr = malloc((size_t)batch * sizeof *pr);
  for (int64_t t = 0; t < cap; t += batch) {
    int64_t k = cap - t < batch ? cap - t : batch;
    for (int i = 0; i < 4; i++)
      for (int64_t j = 0; j < k * fields[i].width; j++)
        cols[i][j] = (float)((t * 7 + j * 13 + i) % 1000) * 0.01f;
    const void *d[4] = {cols[0], cols[1], cols[2], cols[3]};
    ok(ag_replay_add(r, d, k), "add");
    for (int64_t j = 0; j < k; j++) idx[j] = t + j, pr[j] = 0.1f + (float)((t + j) % 97) * 0.05f;
    ok(ag_per_update_host(per, idx, pr, k), "priorities");
  }

  double ts[MAX_REPS], tc[MAX_REPS], tw[MAX_REPS], pw[MAX_REPS], pc[MAX_REPS], pwarm[MAX_REPS];
  for (int k = 0; k < reps; k++) {
    double t0 = now();
    ok(ag_replay_save(r, path), "save");
    ts[k] = now() - t0;
  }
  struct stat st;
  if (stat(path, &st)) {
    perror(path);
    exit(1);
  }
  const size_t n = (size_t)st.st_size;
  unsigned char *buf = malloc(CHUNK);
  for (size_t i = 0; i < CHUNK; i++) buf[i] = (unsigned char)(i * 2654435761u >> 24);
  for (int k = 0; k < reps; k++) {
    drop(path);
    ag_replay *l;
    double t0 = now();
    ok(ag_replay_load(ctx, path, &l), "cold load");
    tc[k] = now() - t0;
    ag_replay_free(l);
    read_all(path, buf);
    t0 = now();
    ok(ag_replay_load(ctx, path, &l), "warm load");
    tw[k] = now() - t0;
    ag_replay_free(l);
  }
  for (int k = 0; k < reps; k++) {
    double t0 = now();
    plain_write(plain, buf, n);
    pw[k] = now() - t0;
    drop(plain);
    t0 = now();
    read_all(plain, buf);
    pc[k] = now() - t0;
    t0 = now();
    read_all(plain, buf);
    pwarm[k] = now() - t0;
  }
  double ms = median(ts), mc = median(tc), mw = median(tw), mpw = median(pw), mpc = median(pc),
         mpwarm = median(pwarm);
  printf("%lld columns of 42 f32, prioritized: %zu bytes, median of %d\n", (long long)cap, n, reps);
  row("plain write + fsync", mpw, (double)n, 0);
  row("ag_replay_save", ms, (double)n, mpw);
  row("plain read, cold", mpc, (double)n, 0);
  row("ag_replay_load, cold", mc, (double)n, mpc);
  row("plain read, warm", mpwarm, (double)n, 0);
  row("ag_replay_load, warm", mw, (double)n, mpwarm);
  unlink(path);
  unlink(plain);
  free(buf);
  free(idx);
  free(pr);
  for (int i = 0; i < 4; i++) free(cols[i]);
  ag_replay_free(r);
  ag_ctx_free(ctx);
  return 0;
}
