/* test_cli_opts.c — the option table of the command-line tool: every row
 * is in the --help of each subcommand that takes it and in no other's; the
 * settings written as (name, value) pairs read back as the same bits; the
 * values sac and td3 share with the DQN are copied into their
 * configuration by the table. */
#include <math.h>

#include "agt.h"
#include "cli/opts.h"

enum { MAX_PAIRS = 128 };

/* cmd's --help in a new string (free it). */
static char *help_of(cli_cmd cmd) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  assert_non_null(f);
  cli_opts_help(f, cmd);
  assert_int_equal(fclose(f), 0);
  return buf;
}

/* Whether help has a line that starts "  NAME" followed by a blank or a
 * comma: the line of that option. */
static int has_option_line(const char *help, const char *name) {
  size_t n = strlen(name);
  for (const char *p = help; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (!strncmp(p, "  ", 2) && !strncmp(p + 2, name, n) && (p[2 + n] == ' ' || p[2 + n] == ',')) return 1;
  return 0;
}

static void every_row_is_in_the_help_of_its_subcommands_only(void **state) {
  (void)state;
  int rows = 0;
  for (int c = 0; c < CLI_N_CMDS; c++) {
    char *help = help_of((cli_cmd)c);
    assert_true(!strncmp(help, "usage: agrl ", 12));
    int takes, taken = 0;
    const char *name;
    for (int i = 0; (name = cli_opts_row(i, (cli_cmd)c, &takes)); i++) {
      /* a name may have a row for each of several subcommands (--batch) */
      int any = 0, t;
      const char *other;
      for (int k = 0; (other = cli_opts_row(k, (cli_cmd)c, &t)); k++) any |= t && !strcmp(other, name);
      int listed = has_option_line(help, name);
      if (any != listed)
        fail_msg("agrl %s --help %s %s, which the table %s", cli_cmd_name((cli_cmd)c),
                 listed ? "lists" : "does not list", name, any ? "gives it" : "does not give it");
      taken += takes;
      if (c == 0) rows++;
    }
    assert_true(taken >= 4); /* --help, and at least three options of its own */
    free(help);
  }
  assert_true(rows >= 60);
  /* and a name that is no row is in no help */
  char *help = help_of(CLI_TRAIN);
  assert_false(has_option_line(help, "--bogus"));
  assert_true(has_option_line(help, "--lr") && has_option_line(help, "--help"));
  free(help);
}

typedef struct pairs {
  int n;
  char name[MAX_PAIRS][64], value[MAX_PAIRS][512];
  const char *names[MAX_PAIRS], *values[MAX_PAIRS];
} pairs;

static int collect(const char *name, const char *value, void *user) {
  pairs *p = user;
  assert_true(p->n < MAX_PAIRS);
  snprintf(p->name[p->n], sizeof p->name[0], "%s", name);
  snprintf(p->value[p->n], sizeof p->value[0], "%s", value);
  p->names[p->n] = p->name[p->n];
  p->values[p->n] = p->value[p->n];
  p->n++;
  return 0;
}

/* Parses the flags (NULL-terminated) of cmd into *s; fails unless they are good. */
static void parse_ok(cli_cmd cmd, cli_settings *s, const char *const *flags) {
  char *argv[64];
  int argc = 0;
  argv[argc++] = (char *)cli_cmd_name(cmd);
  for (; *flags; flags++) argv[argc++] = (char *)*flags;
  argv[argc] = NULL;
  assert_int_equal(cli_opts_parse(cmd, argc, argv, s), -1);
}

/* The value of the pair NAME, or NULL when there is none. */
static const char *pair(const pairs *p, const char *name) {
  for (int k = 0; k < p->n; k++)
    if (!strcmp(p->name[k], name)) return p->value[k];
  return NULL;
}

static const char *pair(const pairs *p, const char *name);

/* Every row's value of a and b, as text, is the same (defaults too), b has
 * exactly the options given that a wrote as pairs, and both write the same
 * pairs. */
static void assert_same_settings(const cli_settings *a, const cli_settings *b) {
  pairs pa = {0}, pb = {0};
  cli_opts_pairs(a, collect, &pa);
  cli_opts_pairs(b, collect, &pb);
  int takes;
  const char *name;
  for (int i = 0; (name = cli_opts_row(i, a->cmd, &takes)); i++) {
    if (!takes) continue;
    char va[512], vb[512];
    cli_opts_value_text(a, name, va, sizeof va);
    cli_opts_value_text(b, name, vb, sizeof vb);
    if (strcmp(va, vb)) fail_msg("%s: %s, read back as %s", name, va, vb);
    if (cli_opts_given(b, name) != (pair(&pa, name + 2) != NULL))
      fail_msg("%s: given %d, read back as given %d", name, pair(&pa, name + 2) != NULL,
               cli_opts_given(b, name));
  }
  assert_int_equal(pa.n, pb.n);
  for (int k = 0; k < pa.n; k++) {
    assert_string_equal(pa.name[k], pb.name[k]);
    assert_string_equal(pa.value[k], pb.value[k]);
  }
}

/* Parses flags, writes the pairs, reads them back into *back. */
static void round_trip(cli_cmd cmd, const char *const *flags, cli_settings *s, pairs *p, cli_settings *back) {
  parse_ok(cmd, s, flags);
  memset(p, 0, sizeof *p);
  assert_int_equal(cli_opts_pairs(s, collect, p), 0);
  assert_int_equal(cli_opts_read_pairs(cmd, p->n, p->names, p->values, back), 0);
  assert_same_settings(s, back);
}

static void dqn_settings_read_back_as_the_same_bits(void **state) {
  (void)state;
  static const char *const flags[] = {"--device",
                                      "cuda:1",
                                      "--steps",
                                      "5000",
                                      "--seed",
                                      "9223372036854775807",
                                      "--lr",
                                      "3e-4",
                                      "--gamma",
                                      "0.95",
                                      "--hidden",
                                      "64,32,16",
                                      "--no-double",
                                      "--mse",
                                      "--per",
                                      "--per-eps",
                                      "1e-12",
                                      "--eps-end",
                                      "0.1",
                                      "--n-step",
                                      "3",
                                      "--stop-at",
                                      "-2.5",
                                      "--max-grad-norm",
                                      "0.333333333333",
                                      "--out",
                                      "dir x",
                                      "--quiet",
                                      NULL};
  cli_settings s, b;
  pairs p;
  round_trip(CLI_TRAIN, flags, &s, &p, &b);
  /* the values themselves, against the flags */
  assert_true(b.dqn.lr == (float)3e-4 && b.dqn.gamma == (float)0.95 && b.dqn.per_eps == (float)1e-12);
  assert_true(b.dqn.max_grad_norm == (float)0.333333333333 && b.stop_at == -2.5);
  assert_true(b.dqn.n_hidden == 3 && b.dqn.hidden[0] == 64 && b.dqn.hidden[1] == 32 && b.dqn.hidden[2] == 16);
  assert_true(b.dqn.double_dqn == 0 && b.dqn.huber == 0 && b.dqn.per == 1 && b.dqn.n_step == 3);
  assert_true(b.device.kind == AG_DEVICE_CUDA && b.device.index == 1 && b.seed == INT64_MAX);
  assert_string_equal(b.out, "dir x");
  /* the texts: %g's where they read back, "true" for a flag, the words of a choice */
  assert_string_equal(pair(&p, "lr"), "0.0003");
  assert_string_equal(pair(&p, "hidden"), "64,32,16");
  assert_string_equal(pair(&p, "device"), "cuda:1");
  assert_string_equal(pair(&p, "no-double"), "true");
  assert_string_equal(pair(&p, "stop-at"), "-2.5");
  assert_string_equal(pair(&p, "max-grad-norm"),
                      "0.33333334"); /* the fewest digits from %g's six that read back */
  /* --quiet is not a setting of the run; what was not given is not written */
  assert_null(pair(&p, "quiet"));
  assert_null(pair(&p, "batch"));
  assert_null(pair(&p, "algo"));
  assert_int_equal(p.n, 15);
}

/* --conv: layers read with their defaults (stride 1, no padding), written
 * back whole, "none" for no convolution, and every malformed value refused
 * (exit status 2, the settings as they were). */
static void conv_layers_read_back_and_bad_ones_are_refused(void **state) {
  (void)state;
  static const char *const flags[] = {"--conv", "32x8s4,64x4s2p1,7x3", NULL};
  cli_settings s, b;
  pairs p;
  round_trip(CLI_TRAIN, flags, &s, &p, &b);
  assert_int_equal(b.dqn.n_conv, 3);
  const ag_conv_layer want[3] = {{32, 8, 4, 0}, {64, 4, 2, 1}, {7, 3, 1, 0}};
  assert_memory_equal(b.dqn.conv, want, sizeof want);
  assert_string_equal(pair(&p, "conv"), "32x8s4p0,64x4s2p1,7x3s1p0");
  static const char *const none[] = {"--conv", "none", NULL};
  round_trip(CLI_TRAIN, none, &s, &p, &b);
  assert_int_equal(b.dqn.n_conv, 0);
  assert_string_equal(pair(&p, "conv"), "none");
  static const char *const bad[] = {
      "",      "32",      "32x",       "x8",      "0x3",  "3x0",
      "3x3s0", "3x3s",    "3x3p",      "3x3p1s1", "3x3,", ",3x3",
      "3x3q1", "70000x3", "3x3s70000", "3x3 ",    "-3x3", "1x1,1x1,1x1,1x1,1x1,1x1,1x1,1x1,1x1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *argv[4] = {(char *)"train", (char *)"--conv", (char *)bad[i], NULL};
    int rc = cli_opts_parse(CLI_TRAIN, 3, argv, &s);
    if (rc != 2) fail_msg("--conv \"%s\" gave %d, not the usage error 2", bad[i], rc);
  }
  /* sac and td3 take no convolutions */
  char *argv[6] = {(char *)"train", (char *)"--algo", (char *)"sac", (char *)"--conv", (char *)"8x3", NULL};
  assert_int_equal(cli_opts_parse(CLI_TRAIN, 5, argv, &s), 2);
}

static void the_last_of_two_flags_on_one_field_is_the_one_given(void **state) {
  (void)state;
  static const char *const on[] = {"--no-double", "--double", NULL};
  static const char *const off[] = {"--double", "--no-double", NULL};
  cli_settings s, b;
  pairs p;
  round_trip(CLI_TRAIN, on, &s, &p, &b);
  assert_int_equal(b.dqn.double_dqn, 1);
  assert_int_equal(p.n, 1);
  assert_string_equal(p.name[0], "double");
  round_trip(CLI_TRAIN, off, &s, &p, &b);
  assert_int_equal(b.dqn.double_dqn, 0);
  assert_int_equal(p.n, 1);
  assert_string_equal(p.name[0], "no-double");
  static const char *const none[] = {"--stop-at", "100", "--stop-at", "none", NULL};
  round_trip(CLI_TRAIN, none, &s, &p, &b);
  assert_true(isinf(b.stop_at) && cli_opts_given(&b, "--stop-at"));
  assert_string_equal(pair(&p, "stop-at"), "none");
}

static void sac_takes_the_dqn_flags_it_shares_from_the_table(void **state) {
  (void)state;
  /* --algo last: the defaults are sac's all the same; --lr sets both rates
   * and wins over --actor-lr whatever the order */
  static const char *const flags[] = {"--lr",
                                      "0.002",
                                      "--actor-lr",
                                      "0.005",
                                      "--hidden",
                                      "8",
                                      "--batch",
                                      "32",
                                      "--n-step",
                                      "4",
                                      "--tau",
                                      "0.01",
                                      "--gamma",
                                      "0.9",
                                      "--buffer",
                                      "5000",
                                      "--alpha",
                                      "0.5",
                                      "--learning-starts",
                                      "7",
                                      "--train-freq",
                                      "2",
                                      "--gradient-steps",
                                      "3",
                                      "--algo",
                                      "sac",
                                      NULL};
  cli_settings s, b;
  pairs p;
  round_trip(CLI_TRAIN, flags, &s, &p, &b);
  const ag_ac_config d = ag_ac_defaults(AG_AC_SAC);
  assert_int_equal(b.algo, CLI_SAC);
  assert_true(b.ac.actor_lr == 0.002f && b.ac.critic_lr == 0.002f && b.dqn.lr == 0.002f);
  assert_true(b.ac.n_hidden == 1 && b.ac.hidden[0] == 8);
  assert_true(b.ac.batch_size == 32 && b.ac.n_step == 4 && b.ac.tau == 0.01f && b.ac.gamma == 0.9f);
  assert_true(b.ac.buffer_size == 5000 && b.ac.learning_starts == 7 && b.ac.train_freq == 2);
  assert_true(b.ac.gradient_steps == 3 && b.ac.alpha == 0.5f);
  /* what was not given keeps sac's defaults */
  assert_int_equal(b.ac.policy_delay, d.policy_delay);
  assert_true(b.ac.noise_clip == d.noise_clip && isnan(b.ac.target_entropy));
  assert_string_equal(b.env, "pendulum");
  /* td3's defaults with --algo td3, wherever it is among the flags */
  static const char *const td3[] = {"--batch", "64", "--algo", "td3", NULL};
  round_trip(CLI_TRAIN, td3, &s, &p, &b);
  assert_int_equal(b.ac.policy_delay, ag_ac_defaults(AG_AC_TD3).policy_delay);
  assert_true(b.ac.batch_size == 64 && b.ac.buffer_size == d.buffer_size);
  /* without --algo the DQN keeps its own and sac's stay as they were */
  static const char *const dqn[] = {"--lr", "0.002", NULL};
  round_trip(CLI_TRAIN, dqn, &s, &p, &b);
  assert_true(b.dqn.lr == 0.002f && b.ac.actor_lr == d.actor_lr);
}

static void float_values_read_back_as_the_same_float(void **state) {
  (void)state;
  /* values whose shortest text takes all nine digits, the ends of ranges,
   * and random ones */
  static const char *const texts[] = {
      "1e-9",           "10",     "0.1", "0.7", "1e-08", "9.99999999", "0.333333333333",
      "1.17549435e-38", "2.5e-5", "7e-4"};
  agt_rng r = {12345};
  for (int k = 0; k < 200; k++) {
    char v[64];
    if (k < (int)(sizeof texts / sizeof *texts))
      snprintf(v, sizeof v, "%s", texts[k]);
    else if (k % 2)
      snprintf(v, sizeof v, "%.17g", 1e-9 + 10.0 * (double)(agt_next(&r) >> 11) / 9007199254740992.0);
    else
      snprintf(v, sizeof v, "%.17g",
               pow(10.0, -9.0 + 10.0 * (double)(agt_next(&r) >> 11) / 9007199254740992.0));
    const char *flags[] = {"--lr", v, NULL};
    cli_settings s, b;
    pairs p;
    char *argv[3] = {"train", "--lr", v};
    if (cli_opts_parse(CLI_TRAIN, 3, argv, &s) != -1) continue; /* a value past 10 by rounding */
    round_trip(CLI_TRAIN, flags, &s, &p, &b);
    uint32_t x, y;
    memcpy(&x, &s.dqn.lr, 4);
    memcpy(&y, &b.dqn.lr, 4);
    if (x != y)
      fail_msg("--lr %s: %a, read back from \"%s\" as %a", v, (double)s.dqn.lr, p.value[0], (double)b.dqn.lr);
  }
}

static void other_subcommands_read_back_too(void **state) {
  (void)state;
  cli_settings s, b;
  pairs p;
  static const char *const ev[] = {"--model", "m.agrl",   "--episodes", "3", "--seed",
                                   "7",       "--device", "cpu",        NULL};
  round_trip(CLI_EVAL, ev, &s, &p, &b);
  assert_true(b.episodes == 3 && b.seed == 7 && b.device.kind == AG_DEVICE_CPU);
  static const char *const bd[] = {"--shape", "cartpole", "--batch", "128", "--reps", "3", NULL};
  round_trip(CLI_BENCH_DIST, bd, &s, &p, &b);
  assert_true(b.shape == 0 && b.batch == 128 && b.reps == 3 && b.updates == 200 && b.world == 0 &&
              b.rank == -1);
  assert_string_equal(pair(&p, "shape"), "cartpole");
  static const char *const de[] = {"--capacity", "1099511627776", "--device", "vulkan", NULL};
  round_trip(CLI_DEMO, de, &s, &p, &b);
  assert_true(b.capacity == (int64_t)1 << 40 && b.batch == 256 && b.device.kind == AG_DEVICE_VULKAN);
  assert_string_equal(pair(&p, "device"), "vulkan:0");
  static const char *const be[] = {"--filter", "a,b", "--iters", "5", NULL};
  round_trip(CLI_BENCH, be, &s, &p, &b);
  assert_true(b.iters == 5 && !strcmp(b.filter, "a,b") && !b.json);
}

static void pairs_that_are_not_settings_are_refused(void **state) {
  (void)state;
  cli_settings s;
  const char *names[2] = {"algo", "lr"}, *values[2] = {"sac", "0"};
  assert_int_equal(cli_opts_read_pairs(CLI_TRAIN, 2, names, values, &s), 2); /* below the range */
  values[1] = "0.001";
  assert_int_equal(cli_opts_read_pairs(CLI_TRAIN, 2, names, values, &s), 0);
  names[1] = "bogus";
  assert_int_equal(cli_opts_read_pairs(CLI_TRAIN, 2, names, values, &s), 2);
  names[1] = "per"; /* a DQN flag, for sac */
  values[1] = "true";
  assert_int_equal(cli_opts_read_pairs(CLI_TRAIN, 2, names, values, &s), 2);
  names[0] = "double"; /* a flag takes only true */
  values[0] = "1";
  assert_int_equal(cli_opts_read_pairs(CLI_TRAIN, 1, names, values, &s), 2);
  names[0] = "help";
  values[0] = "true";
  assert_int_equal(cli_opts_read_pairs(CLI_TRAIN, 1, names, values, &s), 2);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_row_is_in_the_help_of_its_subcommands_only),
      cmocka_unit_test(dqn_settings_read_back_as_the_same_bits),
      cmocka_unit_test(the_last_of_two_flags_on_one_field_is_the_one_given),
      cmocka_unit_test(conv_layers_read_back_and_bad_ones_are_refused),
      cmocka_unit_test(sac_takes_the_dqn_flags_it_shares_from_the_table),
      cmocka_unit_test(float_values_read_back_as_the_same_float),
      cmocka_unit_test(other_subcommands_read_back_too),
      cmocka_unit_test(pairs_that_are_not_settings_are_refused),
  };
  return agt_run(argc, argv, "cli_opts", tests, sizeof tests / sizeof tests[0]);
}
