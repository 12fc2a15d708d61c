/* train.c — `agrl train` and `agrl eval`.
 *
 * train: DQN, SAC or TD3 on a built-in environment, with a live progress
 * line, a final summary, and in --out: episodes.csv, losses.csv,
 * summary.json, the learning curve (learning_curve.png, drawn by
 * matplotlib) and the trained Q-network (q_network.agrl) or policy
 * (policy.agrl) that `agrl eval` loads; with --checkpoint-every, in
 * DIR/checkpoints/ckpt-STEP, the agent (agent.agrl) and the command's own
 * state (cli.agrl: settings, counters and logs, cli_state.c), which
 * --resume continues from. Every file is written under a temporary name
 * and renamed over its target when whole, so a reader never sees half a
 * file and an older run's file stays until the new one is complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agrl/ac.h"
#include "agrl/agent.h"
#include "cli/cli.h"
#include "cli/cli_state.h"
#include "cli/opts.h"
#include "base/base.h"
#include "base/seed.h"

extern char **environ;

/* A file of the run written whole: DIR/NAME under a temporary name until
 * commit. Prints why not and returns -1 when it cannot be created. */
static int open_whole(ag__afile *a, const char *dir, const char *name) {
  memset(a, 0, sizeof *a);
  char *p = cli_path(dir, name);
  if (!p) {
    fprintf(stderr, "agrl train: out of memory\n");
    return -1;
  }
  ag_status s = ag__afile_open(a, p, "train");
  free(p);
  if (s) fprintf(stderr, "agrl %s\n", ag_last_error());
  return s ? -1 : 0;
}

/* Ends a file written whole: renamed over its target when keep (and it was
 * all written), else removed. Returns -1, with a message, when it failed. */
static int close_whole(ag__afile *a, int keep) {
  if (!a->f) return 0;
  if (!keep) {
    ag__afile_abort(a);
    return 0;
  }
  if (ag__afile_commit(a, "train")) {
    fprintf(stderr, "agrl %s\n", ag_last_error());
    return -1;
  }
  return 0;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* ---- stopping on a signal ---- */

/* SIGINT or SIGTERM received (0: none). The training loop stops at the next
 * event and the run's files are written as at any other end; the handler is
 * reset once it ran, so a second signal ends the process at once. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static void catch_stop_signals(void) {
  static const int sigs[2] = {SIGINT, SIGTERM};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  for (int i = 0; i < 2; i++) {
    struct sigaction old;
    /* a signal the caller ignores (a background job's SIGINT) stays ignored */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
  }
}

/* ---- the run's state, for the callback ---- */

typedef struct run {
  FILE *episodes, *losses; /* NULL: not logged (another rank than 0) */
  cli_counters sum;        /* the summary's counters, kept in checkpoints */
  int progress, tty, stopped;
  /* evaluation (--eval-every): its environment, its log */
  ag_env *eval_env;
  ag__afile *eval_log;
  int eval_episodes, stop_on_eval;
  uint64_t eval_seed;
  double *eval_returns;
  int64_t total;
  double t0, last_print, stop_at;
  int64_t last_step;
  float last_alpha;
  int ac; /* sac or td3: losses.csv has the actor's loss and alpha too */
} run;

/* Seconds left as "1234s", "12.3h" or "45d": a long run's ETA stays short. */
static void format_eta(char *buf, size_t n, double s) {
  if (s < 9999.5)
    snprintf(buf, n, "%4.0fs", s);
  else if (s < 99.95 * 3600)
    snprintf(buf, n, "%4.1fh", s / 3600);
  else
    snprintf(buf, n, "%4.0fd", s / 86400);
}

static void print_progress(run *r, int final) {
  double el = cli_now_s() - r->t0, sps = el > 0 ? (double)r->sum.last.step / el : 0;
  double eta = sps > 0 ? (double)(r->total - r->sum.last.step) / sps : 0;
  char eta_s[32];
  format_eta(eta_s, sizeof eta_s, final || eta < 0 ? 0.0 : eta);
  fprintf(
      stderr,
      "%sstep %7lld/%lld | episodes %5lld | mean20 %7.1f | loss %8.4f | %s %.3f | %6.0f steps/s | ETA %s%s",
      r->tty ? "\r" : "", (long long)r->sum.last.step, (long long)r->total, (long long)r->sum.last.episodes,
      r->sum.last.mean_return, (double)r->sum.last_loss, r->ac ? "alpha" : "eps",
      (double)(r->ac ? r->last_alpha : r->sum.last.epsilon), sps, eta_s, r->tty && !final ? "   " : "\n");
  fflush(stderr);
}

static int on_event(const ag_train_event *ev, void *user) {
  run *r = user;
  r->sum.last = *ev;
  if (ev->kind == AG_TRAIN_EPISODE) {
    if (r->episodes) {
      fprintf(r->episodes, "%lld,%lld,%.6g,%lld,%d,%.6g,%.6g,%lld\n", (long long)ev->episodes,
              (long long)ev->step, ev->episode_return, (long long)ev->episode_length, ev->truncated,
              ev->mean_return, (double)ev->epsilon, (long long)ev->updates);
      r->sum.rows++;
    }
    if (ev->episodes >= 20 && ev->mean_return > r->sum.best_mean) r->sum.best_mean = ev->mean_return;
    if (r->sum.solved_at < 0 && ev->episodes >= 20 && ev->mean_return >= r->stop_at)
      r->sum.solved_at = ev->step;
  } else {
    r->sum.last_loss = ev->loss;
    r->last_alpha = ev->alpha;
    if (r->losses && r->ac)
      fprintf(r->losses, "%lld,%lld,%.6g,%.6g,%.6g,%.6g\n", (long long)ev->step, (long long)ev->updates,
              (double)ev->loss, ev->mean_return, (double)ev->actor_loss, (double)ev->alpha);
    else if (r->losses)
      fprintf(r->losses, "%lld,%lld,%.6g,%.6g\n", (long long)ev->step, (long long)ev->updates,
              (double)ev->loss, ev->mean_return);
    r->sum.rows += r->losses != NULL;
  }
  double t = cli_now_s();
  if (r->progress && t - r->last_print > (r->tty ? 0.25 : 5.0)) {
    r->last_print = t;
    print_progress(r, 0);
  }
  /* a signal stops the loop through should_stop, after the step in progress */
  if (r->sum.solved_at >= 0 && !isinf(r->stop_at) && !r->stop_on_eval) r->stopped = 1;
  return r->stopped;
}

/* ---- checkpoints: the command's own state beside the agent ----
 * cli.agrl, a container of kind "cli" (cli_state.c, docs/container.md):
 * the run's settings (the options given, --out always), the summary's
 * counters and the logs so far; --resume reads it back, or the files a
 * checkpoint of agrl 0.1.0 holds instead. */

typedef struct ckpt_files {
  run *r;
  ag__afile *ep, *loss;
  const cli_settings *s;
} ckpt_files;

static int should_stop(void *user) {
  (void)user;
  return stop_signal != 0;
}

/* --eval-every: greedy (deterministic) episodes of the online network (the
 * actor), each evaluation on the same seeds, one line of eval.csv each. */
static void log_eval(run *r, int64_t step, int64_t updates, double mean, int *stop);

static ag_status on_eval(ag_dqn *d, int64_t step, int *stop, void *user) {
  run *r = ((ckpt_files *)user)->r;
  double mean;
  ag_status s =
      ag_q_evaluate(ag_dqn_q(d), r->eval_env, r->eval_episodes, r->eval_seed, &mean, r->eval_returns);
  if (!s) log_eval(r, step, ag_dqn_updates(d), mean, stop);
  return s;
}

static ag_status on_eval_ac(ag_ac *a, int64_t step, int *stop, void *user) {
  run *r = ((ckpt_files *)user)->r;
  double mean;
  ag_status s = ag_ac_evaluate(a, r->eval_env, r->eval_episodes, r->eval_seed, &mean, r->eval_returns);
  if (!s) log_eval(r, step, ag_ac_updates(a), mean, stop);
  return s;
}

static void log_eval(run *r, int64_t step, int64_t updates, double mean, int *stop) {
  double lo = INFINITY, hi = -INFINITY, var = 0;
  for (int i = 0; i < r->eval_episodes; i++) {
    double x = r->eval_returns[i];
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
    var += (x - mean) * (x - mean);
  }
  fprintf(r->eval_log->f, "%lld,%lld,%.6g,%.6g,%.6g,%.6g,%d\n", (long long)step, (long long)updates, mean,
          sqrt(var / r->eval_episodes), lo, hi, r->eval_episodes);
  r->sum.evals++;
  r->sum.last_eval = mean;
  if (r->sum.evals == 1 || mean > r->sum.best_eval) {
    r->sum.best_eval = mean;
    r->sum.best_eval_at = step;
  }
  if (r->sum.eval_solved_at < 0 && mean >= r->stop_at) r->sum.eval_solved_at = step;
  if (r->stop_on_eval && r->sum.eval_solved_at >= 0 && !isinf(r->stop_at)) *stop = r->stopped = 1;
}

static ag_status on_checkpoint(const char *dir, int64_t step, void *user) {
  (void)step;
  const ckpt_files *c = user;
  ag__afile *const logs[CLI_N_LOGS] = {c->ep, c->loss, c->r->eval_log};
  return cli_ckpt_write(dir, c->s, &c->r->sum, logs);
}

/* ---- the learning curve ---- */

/* Runs argv (argv[0] looked up on PATH unless it holds a '/') without a
 * shell, stdin, stdout and stderr on /dev/null; its exit status, or -1 when
 * it did not start or did not exit. */
static int run_quiet(char *const argv[]) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa)) return -1;
  int rc = -1;
  pid_t pid;
  if (!posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) &&
      !posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) &&
      !posix_spawn_file_actions_adddup2(&fa, 1, 2) &&
      posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) == 0) {
    int st;
    pid_t w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
    }
    if (w == pid && WIFEXITED(st)) rc = WEXITSTATUS(st);
  }
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

/* The learning curve, drawn by matplotlib (python3). The script travels in
 * the argument vector (python3 -c SCRIPT DIR TITLE): no shell reads the
 * directory's name and no file is written but the picture, itself under a
 * temporary name renamed when whole. The working directory is taken off
 * Python's path so that no module there is imported instead of matplotlib's.
 * Returns 0 when drawn. */
static int plot_curve(const char *dir, const char *title) {
  static const char script[] =
      "import sys\n"
      "if sys.path and sys.path[0] == '':\n"
      "    del sys.path[0]\n"
      "import csv, os\n"
      "import matplotlib\n"
      "matplotlib.use('Agg')\n"
      "import matplotlib.pyplot as plt\n"
      "d, title = sys.argv[1], sys.argv[2]\n"
      "with open(os.path.join(d, 'episodes.csv'), newline='') as f:\n"
      "    rows = list(csv.DictReader(f))\n"
      "st = [int(r['step']) for r in rows]\n"
      "fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)\n"
      "ax.plot(st, [float(r['return']) for r in rows], '.', ms=2, alpha=0.35, label='episode return')\n"
      "ax.plot(st, [float(r['mean20']) for r in rows], lw=2, label='mean of the last 20')\n"
      "ev = os.path.join(d, 'eval.csv')\n"
      "if os.path.exists(ev):\n"
      "    with open(ev, newline='') as f:\n"
      "        er = list(csv.DictReader(f))\n"
      "    if er:\n"
      "        ax.errorbar([int(r['step']) for r in er], [float(r['mean']) for r in er],\n"
      "                    yerr=[float(r['std']) for r in er], fmt='o-', ms=3, capsize=2,\n"
      "                    label='evaluation (%s greedy episodes)' % er[0]['episodes'])\n"
      "ax.set_xlabel('environment steps'); ax.set_ylabel('return'); ax.set_title(title)\n"
      "ax.grid(alpha=0.3); ax.legend(loc='lower right')\n"
      "fig.tight_layout()\n"
      "out = os.path.join(d, 'learning_curve.png')\n"
      "tmp = '%s.tmp%d' % (out, os.getpid())\n"
      "try:\n"
      "    fig.savefig(tmp, format='png')\n"
      "    os.replace(tmp, out)\n"
      "finally:\n"
      "    if os.path.exists(tmp):\n"
      "        os.unlink(tmp)\n";
  /* the first Python that has matplotlib: the one on PATH, else the system's */
  static const char *const pythons[] = {"python3", "/usr/bin/python3"};
  for (int i = 0; i < 2; i++) {
    char *const argv[] = {(char *)pythons[i], "-c", (char *)script, (char *)dir, (char *)title, NULL};
    if (run_quiet(argv) == 0) return 0;
  }
  return -1;
}

/* A new string of printf's output, or NULL when out of memory. */
static char *format_new(const char *fmt, ...) AG__PRINTF(1, 2);
static char *format_new(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n < 0 ? NULL : malloc((size_t)n + 1);
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

/* ---- the run ---- */

/* What a run holds; job_free frees it all. */
typedef struct job {
  cli_settings s;
  const char *ckpt;      /* the checkpoint the run continues, or NULL */
  const cli_ckpt *state; /* what it holds for the command (ckpt set) */
  int acm;               /* 0: the DQN, 1: sac, 2: td3 */
  int worker, lead;      /* one process of a group (--world), and the one that reports (rank 0) */
  double stop_at;
  ag_vec_env *env;
  const ag_env_spec *spec;
  char *dir;
  ag_ctx *ctx;
  ag_dist *group;
  ag_dqn *dqn;
  ag_ac *acg;
  ag__afile ep_log, loss_log, summary, eval_log;
  run r;
  char devs[160]; /* the device(s), as the summary names them */
} job;

/* The MinAtar games (every name of theirs holds "minatar"): the DQN of
 * Young & Tian (2019) where an option does not say otherwise: one 16x3
 * convolution and 128 hidden units, batches of 32 from the last 100,000
 * transitions, one update a step (over all copies), a target copy every
 * 1,000 steps, training from step 5,000, epsilon down to its end over the
 * first 100,000 steps; Adam at 2.5e-4 where they used RMSProp. */
static void minatar_defaults(cli_settings *s) {
  ag_dqn_config *c = &s->dqn;
  if (!cli_opts_given(s, "--conv")) {
    c->n_conv = 1;
    c->conv[0] = (ag_conv_layer){16, 3, 1, 0};
  }
  if (!cli_opts_given(s, "--hidden")) {
    c->n_hidden = 1;
    c->hidden[0] = 128;
  }
  if (!cli_opts_given(s, "--batch")) c->batch_size = 32;
  if (!cli_opts_given(s, "--buffer")) c->buffer_size = 100000;
  if (!cli_opts_given(s, "--lr")) c->lr = 2.5e-4f;
  if (!cli_opts_given(s, "--train-freq")) c->train_freq = s->n_envs;
  if (!cli_opts_given(s, "--gradient-steps")) c->gradient_steps = s->n_envs;
  if (!cli_opts_given(s, "--target-update")) c->target_update_interval = 1000;
  if (!cli_opts_given(s, "--learning-starts")) c->learning_starts = 5000;
  if (!cli_opts_given(s, "--eps-fraction"))
    c->exploration_fraction = s->steps > 100000 ? 100000.0f / (float)s->steps : 1.0f;
}

/* The settings of a run: the table's, then those that follow from others
 * and the checks of one option against another. Returns -1 when the run
 * goes on, else the exit status (2: a usage error, printed). */
static int train_settings(int argc, char **argv, cli_settings *s) {
  static const char cmd[] = "train";
  void (*usage)(FILE *) = cli_opts_usage(CLI_TRAIN);
  int rc = cli_opts_parse(CLI_TRAIN, argc, argv, s);
  if (rc >= 0) return rc;
  ag_dqn_config *cfg = &s->dqn;
  ag_ac_config *acfg = &s->ac;
  const int group = s->gpus > 1 || s->world > 0;
  /* a DQN on one device steps 8 copies at a time: as sample-efficient per
   * environment step as one copy with the default 64 gradient steps every
   * 64 steps, and a fraction of the acting calls */
  if (s->algo == CLI_DQN && !cli_opts_given(s, "--n-envs") && s->gpus == 1 && s->world == 0) s->n_envs = 8;
  cfg->seed = (uint64_t)s->seed;
  cfg->n_envs = s->n_envs; /* the copies whose transitions each step stores side by side */
  if (s->algo == CLI_DQN && strstr(s->env, "minatar")) minatar_defaults(s);
  if (s->algo != CLI_DQN) {
    acfg->seed = (uint64_t)s->seed;
    acfg->n_envs = s->n_envs;
    /* MountainCarContinuous-v0 rewards only the goal: exploring pushes that
     * last many steps (noise_rho 0.99) find it where independent noise does
     * not, and 64-unit layers suffice */
    if (!strcmp(s->env, "mountaincar_continuous")) {
      if (!cli_opts_given(s, "--noise-rho")) acfg->noise_rho = 0.99f;
      if (!cli_opts_given(s, "--hidden")) {
        acfg->n_hidden = 2;
        acfg->hidden[0] = acfg->hidden[1] = 64;
      }
    }
    if (acfg->buffer_size < acfg->batch_size)
      return cli_bad_usage(cmd, usage, "--buffer (%lld) must hold at least --batch (%lld) transitions",
                           (long long)acfg->buffer_size, (long long)acfg->batch_size);
  }
  if (cfg->buffer_size < cfg->batch_size)
    return cli_bad_usage(cmd, usage, "--buffer (%lld) must hold at least --batch (%lld) transitions",
                         (long long)cfg->buffer_size, (long long)cfg->batch_size);
  const int64_t g = s->world > 0 ? s->world : s->gpus;
  if (group && s->device.kind == AG_DEVICE_CPU)
    return cli_bad_usage(cmd, usage, "--gpus %lld needs CUDA devices, not --device cpu", (long long)s->gpus);
  if (group && cfg->batch_size % g)
    return cli_bad_usage(cmd, usage, "the batch (%lld) must be a multiple of the number of GPUs (%lld)",
                         (long long)cfg->batch_size, (long long)g);
  if (s->stop_on && s->eval_every == 0)
    return cli_bad_usage(cmd, usage, "--stop-on eval needs --eval-every N");
  if (group && s->eval_every > 0)
    return cli_bad_usage(cmd, usage, "--eval-every is not supported with --gpus");
  /* a group takes the one-step target unless --n-step asks (refused below) */
  if (group && !cli_opts_given(s, "--n-step")) cfg->n_step = 1;
  if (group && (cfg->per || cfg->n_step > 1))
    return cli_bad_usage(cmd, usage, "--per and --n-step are not supported with --gpus");
  if (group && s->checkpoint_every > 0)
    return cli_bad_usage(cmd, usage, "--checkpoint-every is not supported with --gpus");
  if (s->world > 0 && (s->rank < 0 || s->rank >= s->world || !s->id_file))
    return cli_bad_usage(cmd, usage, "--world needs --rank in 0..world-1 and --id-file");
  if (s->world == 0 && (s->rank >= 0 || s->id_file))
    return cli_bad_usage(cmd, usage, "%s is set by the launcher of --gpus, with --world",
                         s->rank >= 0 ? "--rank" : "--id-file");
  return -1;
}

/* The environments, the run's directory, the context (and group) and the
 * agent, new or the checkpoint's. Returns 0, or the exit status (with the
 * message printed); job_free frees what was made. */
static int job_setup(job *j) {
  static const char cmd[] = "train";
  const cli_settings *s = &j->s;
  const char *algo = cli_algo_name(s->algo);
  void (*usage)(FILE *) = cli_opts_usage(CLI_TRAIN);
  /* each worker's environments get their own seeds; rank 0 those of a one-GPU run */
  ag_status st = ag_vec_env_create(
      s->env, (int)s->n_envs, (uint64_t)s->seed + (uint64_t)(j->worker ? s->rank : 0) * 1000003u, &j->env);
  if (st) return cli_bad_usage(cmd, usage, "--env %s: %s", s->env, ag_last_error());
  const ag_env_spec *spec = j->spec = ag_vec_env_get_spec(j->env);
  if (!j->acm && spec->n_actions < 2)
    return cli_bad_usage(cmd, usage, "--env %s: DQN needs discrete actions; %s has continuous ones", s->env,
                         spec->id);
  if (j->acm && (spec->n_actions > 0 || !spec->act_low || !spec->act_high))
    return cli_bad_usage(cmd, usage, "--env %s: %s needs bounded continuous actions; %s has %s", s->env, algo,
                         spec->id, spec->n_actions > 0 ? "discrete ones" : "unbounded ones");
  if (!j->acm && s->dqn.n_conv) { /* the convolutions see the observation as the image it is */
    if (!spec->obs_shape[0])
      return cli_bad_usage(cmd, usage,
                           "--conv needs image observations; those of %s are a vector of %d values", spec->id,
                           spec->obs_dim);
    for (int i = 0; i < 3; i++) j->s.dqn.obs_shape[i] = spec->obs_shape[i];
  }
  j->stop_at = cli_opts_given(s, "--stop-at")  ? s->stop_at
               : isnan(spec->reward_threshold) ? INFINITY
                                               : spec->reward_threshold;
  /* the directory as given, whatever its length: a path is never cut */
  j->dir = s->out ? strdup(s->out) : format_new("runs/%s-%s-s%lld", algo, s->env, (long long)s->seed);
  if (!j->dir) {
    fprintf(stderr, "agrl train: out of memory\n");
    return 1;
  }
  if (j->lead && ag__make_dirs(j->dir)) {
    int e = errno;
    fprintf(stderr, "agrl train: cannot create the %sdirectory %s: %s\n", s->out ? "--out " : "", j->dir,
            strerror(e));
    return 1;
  }
  run *r = &j->r;
  r->sum.solved_at = -1;
  r->sum.best_mean = -INFINITY;
  r->stop_at = j->stop_at;
  r->total = s->steps;
  r->progress = !s->quiet;
  r->tty = isatty(2);
  r->sum.eval_solved_at = r->sum.best_eval_at = -1;
  r->eval_episodes = (int)s->eval_episodes;
  r->ac = j->acm != 0;
  r->stop_on_eval = s->stop_on;
  /* the evaluations' episodes: the same seeds each time, none of training's */
  r->eval_seed = ag_env_derive_seed((uint64_t)s->seed, AG__SEED_EVAL_INDEX);
  if (s->eval_every > 0 && (ag_env_create(s->env, &r->eval_env) ||
                            !(r->eval_returns = malloc(sizeof(double) * (size_t)s->eval_episodes)))) {
    fprintf(stderr, "agrl train: the evaluation's environment cannot be made: %s\n", ag_last_error());
    return 1;
  }
  /* a worker is stopped by its launcher, which stops them all: one that
   * stopped on its own would leave the others waiting for it */
  if (!j->worker) catch_stop_signals();
  if ((st = ag_ctx_create(&j->ctx, s->device.kind, s->device.index)))
    return cli_fail(cmd, "creating the context", st);
  if (j->worker && (st = ag_dist_create(j->ctx, (int)s->rank, (int)s->world, s->id_file, 120.0, &j->group)))
    return cli_fail(cmd, "joining the group of GPUs", st);
  if (j->ckpt) {
    char *path = cli_path(j->ckpt, "agent.agrl");
    if (!path) {
      fprintf(stderr, "agrl train: out of memory\n");
      return 1;
    }
    st = j->acm ? ag_ac_load(j->ctx, path, &j->acg) : ag_dqn_load(j->ctx, path, &j->dqn);
    free(path);
    return st ? cli_fail(cmd, "loading the checkpoint's agent", st) : 0;
  }
  if (j->acm)
    st = ag_ac_create(j->ctx, spec->obs_dim, spec->act_dim, spec->act_low, spec->act_high, s->steps, &s->ac,
                      &j->acg);
  else if (j->worker)
    st = ag_dqn_create_dist(j->ctx, j->group, spec->obs_dim, spec->n_actions, s->steps, &s->dqn, &j->dqn);
  else
    st = ag_dqn_create(j->ctx, spec->obs_dim, spec->n_actions, s->steps, &s->dqn, &j->dqn);
  return st ? cli_fail(cmd, "creating the agent", st) : 0;
}

/* The logs, under temporary names until the run ends (also when it failed
 * part-way: what it logged is kept): new, or the checkpoint's so far.
 * Returns 0 or -1 (with a message). */
static int open_logs(job *j) {
  run *r = &j->r;
  if (open_whole(&j->ep_log, j->dir, "episodes.csv") || open_whole(&j->loss_log, j->dir, "losses.csv"))
    return -1;
  r->episodes = j->ep_log.f;
  r->losses = j->loss_log.f;
  if (!j->ckpt) {
    fprintf(r->episodes, "episode,step,return,length,truncated,mean20,epsilon,updates\n");
    fprintf(r->losses, j->acm ? "step,updates,loss,mean20,actor_loss,alpha\n" : "step,updates,loss,mean20\n");
  } else {
    const cli_ckpt *c = j->state;
    if (fwrite(c->log[CLI_LOG_EPISODES], 1, c->log_len[CLI_LOG_EPISODES], r->episodes) !=
            c->log_len[CLI_LOG_EPISODES] ||
        fwrite(c->log[CLI_LOG_LOSSES], 1, c->log_len[CLI_LOG_LOSSES], r->losses) !=
            c->log_len[CLI_LOG_LOSSES]) {
      fprintf(stderr, "agrl train: --resume: the logs of %s cannot be restored\n", j->ckpt);
      return -1;
    }
    r->sum = c->sum;
  }
  if (j->s.eval_every > 0) {
    if (open_whole(&j->eval_log, j->dir, "eval.csv")) return -1;
    r->eval_log = &j->eval_log;
    if (!j->ckpt)
      fprintf(j->eval_log.f, "step,updates,mean,std,min,max,episodes\n");
    else if (!j->state->log[CLI_LOG_EVAL] ||
             fwrite(j->state->log[CLI_LOG_EVAL], 1, j->state->log_len[CLI_LOG_EVAL], j->eval_log.f) !=
                 j->state->log_len[CLI_LOG_EVAL]) {
      fprintf(stderr, "agrl train: --resume: the evaluations of %s cannot be restored\n", j->ckpt);
      return -1;
    }
  }
  return 0;
}

/* The lines that open a run, on stderr. */
static void announce(job *j) {
  const cli_settings *s = &j->s;
  if (j->worker)
    snprintf(j->devs, sizeof j->devs, "%lld GPUs (cuda:%d..%lld, NCCL)", (long long)s->world, s->device.index,
             (long long)(s->device.index + s->world - 1));
  else
    snprintf(j->devs, sizeof j->devs, "%s", ag_ctx_device_name(j->ctx));
  fprintf(stderr, "agrl train: %s on %s, %s, %lld steps, seed %lld, %lld copies -> %s\n",
          cli_algo_name(s->algo), j->spec->id, j->devs, (long long)s->steps, (long long)s->seed,
          (long long)s->n_envs, j->dir);
  if (j->ckpt) fprintf(stderr, "agrl train: resumed from %s\n", j->ckpt);
  if (j->acm && !strcmp(s->env, "mountaincar_continuous")) {
    char hs[AG_AC_MAX_HIDDEN * 12] = "";
    for (int i = 0, o = 0; i < s->ac.n_hidden; i++)
      o += snprintf(hs + o, sizeof hs - (size_t)o, "%s%lld", i ? "," : "", (long long)s->ac.hidden[i]);
    fprintf(stderr, "agrl train: %s's exploring noise correlated at %g, hidden layers %s\n", j->spec->id,
            (double)s->ac.noise_rho, hs);
  }
}

/* Trains to the end (or a stop), checkpoints in DIR/checkpoints; lo then
 * holds what the loop reports. Returns 0 or the exit status (with the
 * message printed). */
static int learn(job *j, ag_learn_opts *lo, double *wall) {
  run *r = &j->r;
  const cli_settings *s = &j->s;
  ckpt_files keepf = {r, &j->ep_log, &j->loss_log, s};
  *lo = ag_learn_defaults();
  char *ckpt_dir = cli_path(j->dir, "checkpoints");
  if (!ckpt_dir) {
    fprintf(stderr, "agrl train: out of memory\n");
    return 1;
  }
  lo->checkpoint_dir = ckpt_dir;
  lo->checkpoint_every = s->checkpoint_every;
  lo->keep = (int)s->keep;
  lo->should_stop = should_stop;
  lo->on_checkpoint = on_checkpoint;
  lo->user = &keepf;
  lo->eval_every = s->eval_every;
  lo->resume = j->ckpt != NULL;
  if (s->eval_every > 0 && j->acm)
    lo->on_eval_ac = on_eval_ac;
  else if (s->eval_every > 0)
    lo->on_eval = on_eval;
  r->t0 = cli_now_s();
  ag_status st = j->acm ? ag_ac_learn(j->acg, j->env, s->steps, lo, on_event, r)
                        : ag_dqn_learn_ex(j->dqn, j->env, s->steps, j->worker ? NULL : lo, on_event, r);
  *wall = cli_now_s() - r->t0;
  free(ckpt_dir);
  lo->checkpoint_dir = NULL;
  lo->user = NULL;
  return st ? cli_fail("train", "training", st) : 0;
}

/* summary.json: the run in numbers. Returns 0 or -1 (with a message). */
static int write_summary(job *j, int64_t taken, int64_t updates, double wall, double sps, int interrupted) {
  const cli_settings *s = &j->s;
  const run *r = &j->r;
  if (open_whole(&j->summary, j->dir, "summary.json")) return -1;
  FILE *f = j->summary.f;
  fprintf(f, "{\"algo\": \"%s\", \"env\": ", cli_algo_name(s->algo));
  json_str(f, j->spec->id);
  fprintf(f, ", \"device\": ");
  json_str(f, j->devs);
  fprintf(f,
          ", \"gpus\": %lld, \"seed\": %lld, \"steps\": %lld, \"episodes\": %lld,\n"
          " \"updates\": %lld, \"final_mean20\": %.6g, \"best_mean20\": %.6g, \"solved_at_step\": %lld,\n"
          " \"stop_at\": %.6g, \"stop_on\": \"%s\", \"wall_s\": %.3f, \"steps_per_s\": %.1f, "
          "\"interrupted\": %s,\n"
          " \"eval_every\": %lld, \"eval_episodes\": %lld, \"evals\": %lld, \"last_eval_mean\": %.6g,\n"
          " \"best_eval_mean\": %.6g, \"best_eval_at_step\": %lld, \"eval_solved_at_step\": %lld,\n"
          " \"eval_seed\": %llu}\n",
          (long long)(j->worker ? s->world : 1), (long long)s->seed, (long long)taken,
          (long long)r->sum.last.episodes, (long long)updates, r->sum.last.mean_return,
          isinf(r->sum.best_mean) ? 0.0 : r->sum.best_mean, (long long)r->sum.solved_at,
          isinf(j->stop_at) ? -1.0 : j->stop_at, s->stop_on ? "eval" : "train", wall, sps,
          interrupted ? "true" : "false", (long long)s->eval_every,
          (long long)(s->eval_every ? s->eval_episodes : 0), (long long)r->sum.evals,
          r->sum.evals ? r->sum.last_eval : 0.0, r->sum.evals ? r->sum.best_eval : 0.0,
          (long long)r->sum.best_eval_at, (long long)r->sum.eval_solved_at, (unsigned long long)r->eval_seed);
  return close_whole(&j->summary, 1);
}

/* The run's end on stdout: what it did, whether it solved the environment,
 * where its files are. */
static void print_report(const job *j, int64_t taken, int64_t updates, double wall, double sps,
                         int interrupted, const char *net_file, int plotted) {
  const cli_settings *s = &j->s;
  const run *r = &j->r;
  const char *dir = j->dir;
  printf("agrl train: %lld steps, %lld episodes, %lld updates in %.1f s (%.0f steps/s) on %s\n",
         (long long)taken, (long long)r->sum.last.episodes, (long long)updates, wall, sps, j->devs);
  printf("  mean return of the last 20 episodes: %.1f (best %.1f)\n", r->sum.last.mean_return,
         isinf(r->sum.best_mean) ? 0.0 : r->sum.best_mean);
  if (interrupted && !j->worker)
    printf("  interrupted by signal %d at step %lld; continue with: agrl train --resume %s\n", interrupted,
           (long long)taken, dir);
  else if (interrupted)
    printf("  interrupted by signal %d at step %lld\n", interrupted, (long long)taken);
  if (r->sum.evals)
    printf("  evaluation (%lld %s episodes, %lld times): last %.1f, best %.1f at step %lld\n",
           (long long)s->eval_episodes, j->acm ? "deterministic" : "greedy", (long long)r->sum.evals,
           r->sum.last_eval, r->sum.best_eval, (long long)r->sum.best_eval_at);
  const double stop_at = j->stop_at;
  if (!isinf(stop_at) && s->stop_on) {
    if (r->sum.eval_solved_at >= 0)
      printf("  solved: evaluation mean >= %g at step %lld\n", stop_at, (long long)r->sum.eval_solved_at);
    else
      printf("  not solved: the evaluation mean stayed below %g\n", stop_at);
  } else if (!isinf(stop_at)) {
    if (r->sum.solved_at >= 0)
      printf("  solved: mean20 >= %g at step %lld\n", stop_at, (long long)r->sum.solved_at);
    else
      printf("  not solved: mean20 stayed below %g\n", stop_at);
  }
  printf("  logs: %s/episodes.csv, %s/losses.csv, %s/summary.json\n", dir, dir, dir);
  printf("  network: %s/%s (agrl eval --model %s/%s --env %s)\n", dir, net_file, dir, net_file, s->env);
  printf("  learning curve: %s\n",
         plotted ? "written to learning_curve.png" : "not drawn (python3 with matplotlib is missing)");
  if (plotted) printf("    %s/learning_curve.png\n", dir);
}

/* After the loop: the logs renamed into place, the network, summary.json,
 * the learning curve and the report. Returns the exit status. */
static int finish_run(job *j, const ag_learn_opts *lo, double wall) {
  static const char cmd[] = "train";
  const cli_settings *s = &j->s;
  run *r = &j->r;
  /* stopped by a signal (one after the last step changes nothing) */
  int interrupted = lo->stopped ? (int)stop_signal : 0;
  /* the steps taken: the loop takes n_envs (x GPUs) at a time and ends at
   * the first multiple at or past --steps, unless a stop came at an event */
  int64_t per = s->n_envs * (j->worker ? s->world : 1);
  int64_t taken = j->worker ? (r->stopped ? r->sum.last.step : (s->steps + per - 1) / per * per) : lo->step;
  r->sum.last.step = taken;
  if (r->progress) print_progress(r, 1);
  r->episodes = r->losses = NULL;
  if (close_whole(&j->ep_log, 1) | close_whole(&j->loss_log, 1) | close_whole(&j->eval_log, 1)) return 1;
  const char *net_file = j->acm ? "policy.agrl" : "q_network.agrl";
  char *path = cli_path(j->dir, net_file);
  if (!path) {
    fprintf(stderr, "agrl train: out of memory\n");
    return 1;
  }
  ag_status st = ag_mlp_save(j->acm ? ag_ac_actor(j->acg) : ag_dqn_q(j->dqn), path);
  free(path);
  if (st) return cli_fail(cmd, "saving the network", st);
  double sps = wall > 0 ? (double)(taken - lo->resumed_at) / wall : 0; /* the steps this invocation took */
  const int64_t updates = j->acm ? ag_ac_updates(j->acg) : ag_dqn_updates(j->dqn);
  if (write_summary(j, taken, updates, wall, sps, interrupted)) return 1;
  char title[256];
  snprintf(title, sizeof title, "%s on %s (seed %lld, %s)",
           j->acm == 1   ? "SAC"
           : j->acm == 2 ? "TD3"
                         : "DQN",
           j->spec->id, (long long)s->seed, j->devs);
  int plotted = plot_curve(j->dir, title) == 0;
  print_report(j, taken, updates, wall, sps, interrupted, net_file, plotted);
  /* stopped by a signal: the status a shell expects of it */
  return interrupted ? 128 + interrupted : 0;
}

/* Frees what the run made. A run that failed keeps the logs it wrote; none
 * were written: the files of an earlier run stay as they were. Returns rc,
 * or 1 when a log could not be kept. */
static int job_free(job *j, int rc) {
  if (close_whole(&j->ep_log, j->r.sum.rows > 0) | close_whole(&j->loss_log, j->r.sum.rows > 0) |
      close_whole(&j->eval_log, j->r.sum.evals > 0))
    rc = 1;
  ag_env_free(j->r.eval_env);
  free(j->r.eval_returns);
  ag__afile_abort(&j->summary);
  free(j->dir);
  ag_dqn_free(j->dqn);
  ag_ac_free(j->acg);
  ag_dist_free(j->group);
  ag_vec_env_free(j->env);
  ag_ctx_free(j->ctx);
  return rc;
}

/* The run of `agrl train`: argv as given, or (ckpt set) the settings of the
 * checkpoint ckpt, which the run continues from its state. */
static int train_run(int argc, char **argv, const char *ckpt, const cli_ckpt *state) {
  static const char cmd[] = "train";
  job j;
  memset(&j, 0, sizeof j);
  int rc = train_settings(argc, argv, &j.s);
  if (rc >= 0) return rc;
  cli_settings *s = &j.s;
  if (s->gpus > 1 && s->world == 0) { /* the launcher: one worker per GPU */
    int have = ag_cuda_device_count();
    if (have < s->gpus + s->device.index)
      return cli_bad_usage(cmd, cli_opts_usage(CLI_TRAIN),
                           "--gpus %lld needs GPUs %d..%lld; this machine has %d", (long long)s->gpus,
                           s->device.index, (long long)(s->device.index + s->gpus - 1), have);
    return cli_launch(cmd, argc, argv, (int)s->gpus);
  }
  j.ckpt = ckpt;
  j.state = state;
  j.acm = s->algo;
  j.worker = s->world > 0;
  j.lead = !j.worker || s->rank == 0;
  if (j.worker) {
    s->device.kind = AG_DEVICE_CUDA;
    s->device.index += (int)s->rank;
    if (!j.lead) s->quiet = 1;
  }
  if ((rc = job_setup(&j))) return job_free(&j, rc);
  rc = 1;
  ag_status st;
  if (!j.lead) { /* another rank trains in step with rank 0, which reports */
    j.r.stop_at = INFINITY;
    st = ag_dqn_learn(j.dqn, j.env, s->steps, on_event, &j.r);
    return job_free(&j, st ? cli_fail(cmd, "training", st) : 0);
  }
  if (open_logs(&j)) return job_free(&j, 1);
  announce(&j);
  /* the run's settings, kept in each checkpoint: --out always */
  if (!s->out) {
    s->out = j.dir;
    cli_opts_mark(s, "--out");
  }
  ag_learn_opts lo;
  double wall = 0;
  if ((rc = learn(&j, &lo, &wall))) return job_free(&j, rc);
  return job_free(&j, finish_run(&j, &lo, wall));
}

/* The checkpoint --resume PATH names: PATH itself (it holds agent.agrl),
 * the newest under PATH/checkpoints, or the newest under PATH; its path in
 * ckpt. Returns 0, or -1 with a message. */
static int find_checkpoint(const char *resume, char *ckpt, size_t size) {
  char *agent = cli_path(resume, "agent.agrl"), *sub = cli_path(resume, "checkpoints");
  struct stat st;
  int rc = -1;
  if (!agent || !sub) {
    fprintf(stderr, "agrl train: out of memory\n");
  } else if (stat(agent, &st) == 0) {
    snprintf(ckpt, size, "%s", resume);
    rc = 0;
  } else if (ag_learn_latest(sub, ckpt, size, NULL) == AG_OK ||
             ag_learn_latest(resume, ckpt, size, NULL) == AG_OK) {
    rc = 0;
  } else
    fprintf(stderr, "agrl train: --resume %s: no checkpoint there (%s)\n", resume, ag_last_error());
  free(agent);
  free(sub);
  return rc;
}

/* The flags of the run a checkpoint continues: its settings (c->args),
 * then those given now beside --resume (--quiet, --device). *av (free it)
 * points into c->args and argv. Returns their count, or -1 with a message. */
static int resume_argv(const char *ckpt, const cli_ckpt *c, int argc, char **argv, char ***av_out) {
  int m = 1;
  for (size_t i = 0; i < c->args_len; i++) m += c->args[i] == '\0';
  char **av = malloc(sizeof(char *) * (size_t)(m + argc + 1));
  if (!av) {
    fprintf(stderr, "agrl train: out of memory\n");
    return -1;
  }
  int ac = 0;
  av[ac++] = argv[0];
  for (size_t i = 0; i < c->args_len; i += strlen(c->args + i) + 1) av[ac++] = c->args + i;
  for (int i = 1; i < argc; i++) {
    int takes_value = 0;
    if (!strcmp(argv[i], "--resume") || !cli_opts_beside_resume(argv[i], &takes_value))
      i++;
    else if (!takes_value)
      av[ac++] = argv[i];
    else if (i + 1 < argc) {
      av[ac++] = argv[i];
      av[ac++] = argv[++i];
    }
  }
  av[ac] = NULL;
  for (int i = 1; i < ac; i++)
    if (!strcmp(av[i], "--resume")) {
      fprintf(stderr, "agrl train: --resume: the settings of %s hold --resume\n", ckpt);
      free(av);
      return -1;
    }
  *av_out = av;
  return ac;
}

int agrl_cmd_train(int argc, char **argv) {
  static const char cmd[] = "train";
  void (*usage)(FILE *) = cli_opts_usage(CLI_TRAIN);
  const char *resume = NULL;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--resume")) {
      const char *v = cli_value(argc, argv, i);
      if (!v || !*v) return cli_bad_usage(cmd, usage, "--resume needs a checkpoint or a run directory");
      if (resume) return cli_bad_usage(cmd, usage, "--resume is given twice");
      resume = v;
    }
  for (int i = 1; resume && i < argc; i++) {
    int takes_value = 0;
    if (!cli_opts_beside_resume(argv[i], &takes_value))
      return cli_bad_usage(cmd, usage,
                           "--resume continues a run with its own settings: give only --quiet and --device "
                           "beside it, not %s",
                           argv[i]);
    i += takes_value; /* --device's value is checked by the run */
  }
  if (!resume) return train_run(argc, argv, NULL, NULL);
  char ckpt[4096], **av = NULL;
  cli_ckpt state;
  memset(&state, 0, sizeof state);
  int ac = find_checkpoint(resume, ckpt, sizeof ckpt) || cli_ckpt_read(ckpt, &state)
               ? -1
               : resume_argv(ckpt, &state, argc, argv, &av);
  int rc = ac < 0 ? 1 : train_run(ac, av, ckpt, &state);
  free(av);
  cli_ckpt_free(&state);
  return rc;
}

int agrl_cmd_eval(int argc, char **argv) {
  static const char cmd[] = "eval";
  cli_settings o;
  int rc = cli_opts_parse(CLI_EVAL, argc, argv, &o);
  if (rc >= 0) return rc;
  const char *model = o.model, *env_name = o.env;
  const int64_t episodes = o.episodes, seed = o.seed;
  ag_env *env = NULL;
  ag_status s = ag_env_create(env_name, &env);
  if (s) return cli_bad_usage(cmd, cli_opts_usage(CLI_EVAL), "--env %s: %s", env_name, ag_last_error());
  const ag_env_spec *spec = ag_env_get_spec(env);
  ag_ctx *ctx = NULL;
  ag_mlp *q = NULL;
  rc = 1;
  double mean = 0, *rets = malloc((size_t)episodes * sizeof *rets);
  if (!rets) {
    fprintf(stderr, "agrl eval: out of memory\n");
    goto done;
  }
  if ((s = ag_ctx_create(&ctx, o.device.kind, o.device.index))) {
    rc = cli_fail(cmd, "creating the context", s);
    goto done;
  }
  if ((s = ag_mlp_load(ctx, model, &q))) {
    rc = cli_fail(cmd, "loading the network", s);
    goto done;
  }
  if ((s = ag_policy_evaluate(q, env, (int)episodes, (uint64_t)seed, &mean, rets))) {
    rc = cli_fail(cmd, "evaluating", s);
    goto done;
  }
  for (int64_t e = 0; e < episodes; e++) printf("episode %lld: return %.1f\n", (long long)e, rets[e]);
  printf("mean return over %lld %s episodes: %.2f\n", (long long)episodes,
         spec->n_actions > 0 ? "greedy" : "deterministic", mean);
  rc = 0;
done:
  free(rets);
  ag_mlp_free(q);
  ag_ctx_free(ctx);
  ag_env_free(env);
  return rc;
}
