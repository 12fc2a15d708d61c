/* launch.c — one process per GPU: starts the workers of a group and waits.
 *
 * `agrl train --gpus G ...` runs this program G times with the same
 * options plus --rank R --world G --id-file F, F a fresh path in a new
 * private directory (rank 0 writes the group id there). If a worker fails,
 * the others are stopped: they would otherwise wait for it in NCCL.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_launch(const char *cmd, int argc, char **argv, int world) {
  char dir[] = "/tmp/agrl-group.XXXXXX";
  if (!mkdtemp(dir)) {
    fprintf(stderr, "agrl %s: cannot make a directory for the group id: %s\n", cmd, strerror(errno));
    return 1;
  }
  char id_path[64], rank_s[16], world_s[16];
  snprintf(id_path, sizeof id_path, "%s/id", dir);
  snprintf(world_s, sizeof world_s, "%d", world);
  /* argv of a worker: agrl CMD ARGS... --rank R --world G --id-file F */
  char **args = calloc((size_t)argc + 8, sizeof *args);
  pid_t *pids = calloc((size_t)world, sizeof *pids);
  if (!args || !pids) {
    free(args), free(pids);
    rmdir(dir);
    fprintf(stderr, "agrl %s: out of memory\n", cmd);
    return 1;
  }
  args[0] = "agrl";
  for (int i = 0; i < argc; i++) args[i + 1] = argv[i];
  args[argc + 1] = "--rank";
  args[argc + 2] = rank_s;
  args[argc + 3] = "--world";
  args[argc + 4] = world_s;
  args[argc + 5] = "--id-file";
  args[argc + 6] = id_path;
  setenv("NCCL_NVLS_ENABLE", "0", 0); /* NVLink multicast stays off unless asked for */
  fflush(NULL);
  int started = 0, first = 0; /* the status of the first worker that failed */
  for (int r = 0; r < world; r++) {
    snprintf(rank_s, sizeof rank_s, "%d", r);
    pid_t p = fork();
    if (p == 0) {
      execv("/proc/self/exe", args);
      fprintf(stderr, "agrl %s: cannot start worker %d: %s\n", cmd, r, strerror(errno));
      _exit(127);
    }
    if (p < 0) {
      fprintf(stderr, "agrl %s: cannot start worker %d: %s\n", cmd, r, strerror(errno));
      first = 1;
      break;
    }
    pids[started++] = p;
  }
  int alive = started, stopping = first != 0;
  if (stopping)
    for (int i = 0; i < started; i++) kill(pids[i], SIGTERM);
  while (alive > 0) {
    int st;
    pid_t p = wait(&st);
    if (p < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int idx = -1;
    for (int i = 0; i < started; i++)
      if (pids[i] == p) idx = i;
    if (idx < 0) continue;
    pids[idx] = 0;
    alive--;
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    if (rc && !stopping) {
      if (alive > 0)
        fprintf(stderr, "agrl %s: worker %d ended with status %d; stopping the others\n", cmd, idx, rc);
      stopping = 1;
      first = rc;
      for (int i = 0; i < started; i++)
        if (pids[i] > 0) kill(pids[i], SIGTERM);
    }
  }
  unlink(id_path); /* left only when rank 0 failed before the group formed */
  rmdir(dir);
  free(args);
  free(pids);
  return first;
}
