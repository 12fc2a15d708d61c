/* main.c — the agrl command-line tool. */
#include <stdio.h>
#include <string.h>

#include "agrl/agrl.h"

int agrl_cmd_demo(int argc, char **argv);
int agrl_cmd_train(int argc, char **argv);
int agrl_cmd_eval(int argc, char **argv);
int agrl_cmd_bench(int argc, char **argv);
int agrl_cmd_bench_dist(int argc, char **argv);
int agrl_cmd_inspect(int argc, char **argv);

static void usage(FILE *f) {
  fprintf(f,
          "usage: agrl <command> [options]\n"
          "\n"
          "commands:\n"
          "  train     train an agent (DQN) on an environment\n"
          "  eval      run greedy episodes of a trained network\n"
          "  bench     time the performance table's work on a device\n"
          "  bench-dist  time the data-parallel DQN update on several GPUs\n"
          "  demo      write, gather and read a replay buffer on a device\n"
          "  inspect   print the kind, keys and sections of an agrl file\n"
          "  version   print the version\n"
          "\n"
          "Run 'agrl <command> --help' for the options of a command.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    printf("agrl %s\n", ag_version());
    return 0;
  }
  if (strcmp(cmd, "demo") == 0) return agrl_cmd_demo(argc - 1, argv + 1);
  if (strcmp(cmd, "train") == 0) return agrl_cmd_train(argc - 1, argv + 1);
  if (strcmp(cmd, "eval") == 0) return agrl_cmd_eval(argc - 1, argv + 1);
  if (strcmp(cmd, "bench") == 0) return agrl_cmd_bench(argc - 1, argv + 1);
  if (strcmp(cmd, "bench-dist") == 0) return agrl_cmd_bench_dist(argc - 1, argv + 1);
  if (strcmp(cmd, "inspect") == 0) return agrl_cmd_inspect(argc - 1, argv + 1);
  fprintf(stderr, "agrl: unknown command '%s'\n", cmd);
  usage(stderr);
  return 2;
}
