/* train.c — `agrl train` and `agrl eval`.
 *
 * train: DQN, SAC or TD3 on a built-in environment, with a live progress
 * line, a final summary, and in --out: episodes.csv, losses.csv,
 * summary.json, the learning curve (learning_curve.png, drawn by
 * matplotlib) and the trained Q-network (q_network.agrl) or policy
 * (policy.agrl) that `agrl eval` loads. Every file is written
 * under a temporary name and renamed over its target when whole, so a
 * reader never sees half a file and an older run's file stays until the new
 * one is complete.
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
#include "base/base.h"

extern char **environ;

/* The most environment steps (and the most of any count of steps: learning
 * starts, train frequency, target update) a run takes. Every count below it
 * is exact: the step counters are 64-bit and the epsilon schedule divides in
 * double (exact below 2^53); the updates of a run, at most steps /
 * train-freq x gradient-steps <= 1e11 x 2^24 ~ 1.7e18, stay below 2^63 for
 * every setting of the flags. 1e11 steps is also months of training at the
 * fastest rate measured (about 15,000 steps a second). */
#define MAX_STEPS 100000000000LL
#define MAX_GRADIENT_STEPS (1 << 24)

static void train_usage(FILE *f) {
  ag_dqn_config c = ag_dqn_defaults();
  fprintf(f,
          "usage: agrl train [--algo dqn|sac|td3] [--env NAME] [--device auto|cpu|cuda[:N]|vulkan[:N]] "
          "[--steps N]\n"
          "                  [--seed S] [--out DIR] [options]\n"
          "\n"
          "Trains an agent; the replay table and the update live on the device.\n"
          "\n"
          "  --algo A              dqn (default; discrete actions), sac or td3 (continuous actions)\n"
          "  --env NAME            cartpole (default; pendulum for sac and td3), acrobot, mountaincar,\n"
          "                        pendulum, mountaincar_continuous\n"
          "  --device D            auto (default: the GPU when present), cpu, cuda[:N], vulkan[:N]\n"
          "  --steps N             environment steps (default 100000, at most %lld)\n"
          "  --seed S              seed of everything random (default 0)\n"
          "  --out DIR             where logs, the curve and the network go (default runs/ALGO-ENV-sSEED)\n"
          "  --n-envs N            environment copies stepped together (at most 4096; default 8 for\n"
          "                        a DQN on one device, else 1)\n"
          "  --stop-at R|none      stop once the mean return of the last 20 episodes reaches R\n"
          "                        (default: the environment's reward threshold, 475 for CartPole)\n"
          "  --quiet               no progress line\n"
          "  --gpus G              data-parallel on GPUs 0..G-1, one process each (NCCL); the\n"
          "                        batch and the replay table are split over them\n"
          "  --eval-every N        every N environment steps, greedy episodes on an environment of\n"
          "                        their own (the same seeds each time), logged to eval.csv\n"
          "  --eval-episodes K     episodes of each evaluation (default 10, at most 10000)\n"
          "  --stop-on train|eval  which mean --stop-at watches: the last 20 training episodes\n"
          "                        (default) or the last evaluation (needs --eval-every)\n"
          "  --checkpoint-every N  a checkpoint of the whole run every N environment steps, in\n"
          "                        DIR/checkpoints/ckpt-STEP (default 0: only when interrupted)\n"
          "  --keep K              checkpoints kept, the newest (default 3)\n"
          "  --resume PATH         continue the run of a checkpoint (PATH/agent.agrl) or of a run\n"
          "                        directory (its newest checkpoint) with the run's own settings;\n"
          "                        only --quiet and --device may be given beside it\n"
          "DQN options (defaults in brackets):\n"
          "  --lr X [%g]  --gamma X [%g]  --batch N [%lld]  --buffer N [%lld]\n"
          "  --learning-starts N [%lld]  --train-freq N [%lld]  --gradient-steps N [%lld]\n"
          "  --target-update N [%lld env steps]  --tau X [%g]  --hidden N,N,... [%lld,%lld]\n"
          "  --eps-fraction X [%g]  --eps-start X [%g]  --eps-end X [%g]  --max-grad-norm X [%g]\n"
          "  --double / --no-double  (Double DQN, on by default)   --mse  (MSE instead of Huber loss)\n"
          "  --per  (prioritized replay)  --per-alpha X [%g]  --per-beta X [%g, annealed to 1]\n"
          "  --per-eps X [%g]  --n-step N [%d, at most 64; 1 with --gpus]  (n-step returns)\n"
          "SAC and TD3 options (the DQN's --lr, --gamma, --batch, --buffer, --learning-starts,\n"
          "--train-freq, --gradient-steps, --tau, --hidden and --n-step apply as well; --lr sets\n"
          "both rates; defaults: agrl's ag_ac_defaults, e.g. --tau 0.005 --batch 256):\n"
          "  --actor-lr X  --critic-lr X  --policy-delay N [sac 1, td3 2]\n"
          "  --alpha X [1, the start]  --no-autotune (a fixed alpha)  --target-entropy X [-act_dim]\n"
          "  --expl-noise X [0.1]  --target-noise X [0.2]  --noise-clip X [0.5]   (td3)\n"
          "  --noise-rho X [0]     the exploring noise's step-to-step correlation, in [0, 1)\n"
          "  (--env mountaincar_continuous: --noise-rho 0.99 --hidden 64,64 unless given)\n"
          "Counts of steps (--steps, --learning-starts, --train-freq, --target-update) are at most\n"
          "%lld; --gradient-steps at most %d. Interrupted (Ctrl-C, SIGTERM), a run stops after\n"
          "the step in progress, writes a checkpoint and its files, and exits with 130 (SIGINT)\n"
          "or 143 (SIGTERM); --resume DIR continues it, writing the logs an uninterrupted run\n"
          "would have written.\n",
          MAX_STEPS, (double)c.lr, (double)c.gamma, (long long)c.batch_size, (long long)c.buffer_size,
          (long long)c.learning_starts, (long long)c.train_freq, (long long)c.gradient_steps,
          (long long)c.target_update_interval, (double)c.tau, (long long)c.hidden[0], (long long)c.hidden[1],
          (double)c.exploration_fraction, (double)c.eps_start, (double)c.eps_end, (double)c.max_grad_norm,
          (double)c.per_alpha, (double)c.per_beta, (double)c.per_eps, c.n_step, MAX_STEPS,
          MAX_GRADIENT_STEPS);
}

static void eval_usage(FILE *f) {
  fprintf(f,
          "usage: agrl eval --model FILE [--env NAME] [--episodes N] [--seed S] [--device D]\n"
          "\n"
          "Runs greedy episodes of a Q-network saved by `agrl train` (DIR/q_network.agrl), or\n"
          "deterministic episodes of a SAC or TD3 policy (DIR/policy.agrl), and prints each\n"
          "return and the mean.\n"
          "\n"
          "  --model FILE   the network (required)\n"
          "  --env NAME     the environment it was trained on (default cartpole)\n"
          "  --episodes N   episodes (default 10, at most 1000000)\n"
          "  --seed S       seed of the first episode (default 12345)\n"
          "  --device D     auto (default), cpu, cuda[:N], vulkan[:N]\n");
}

/* A finite number in [lo, hi], stored as a float. */
static int parse_f(const char *s, double lo, double hi, float *out) {
  double v;
  if (cli_parse_f64(s, lo, hi, &v)) return -1;
  *out = (float)v;
  return 0;
}

/* "N,N,...": 1 to AG_DQN_MAX_HIDDEN sizes in 1..65536, decimal digits only;
 * an empty size (a leading, doubled or trailing comma) is an error. */
static int parse_hidden(const char *s, ag_dqn_config *c) {
  int64_t h[AG_DQN_MAX_HIDDEN];
  int n = 0;
  for (const char *p = s;; p++) {
    const char *q = p;
    int64_t v = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
      if (v > 65536) return -1; /* stops before the number could overflow */
      v = v * 10 + (*q - '0');
    }
    if (q == p || v < 1 || v > 65536 || n == AG_DQN_MAX_HIDDEN) return -1;
    h[n++] = v;
    if (!*q) break;
    if (*q != ',') return -1;
    p = q;
  }
  memcpy(c->hidden, h, (size_t)n * sizeof *h);
  c->n_hidden = n;
  return 0;
}

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
  int64_t rows;            /* lines logged, both files */
  int progress, tty, stopped;
  /* evaluation (--eval-every): its environment, its log and what it found */
  ag_env *eval_env;
  ag__afile *eval_log;
  int eval_episodes, stop_on_eval;
  uint64_t eval_seed;
  double *eval_returns;
  int64_t evals, eval_solved_at, best_eval_at;
  double last_eval, best_eval;
  int64_t total;
  double t0, last_print, stop_at;
  double best_mean;
  int64_t solved_at;
  int64_t last_step;
  ag_train_event last;
  float last_loss, last_alpha;
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
  double el = cli_now_s() - r->t0, sps = el > 0 ? (double)r->last.step / el : 0;
  double eta = sps > 0 ? (double)(r->total - r->last.step) / sps : 0;
  char eta_s[32];
  format_eta(eta_s, sizeof eta_s, final || eta < 0 ? 0.0 : eta);
  fprintf(
      stderr,
      "%sstep %7lld/%lld | episodes %5lld | mean20 %7.1f | loss %8.4f | %s %.3f | %6.0f steps/s | ETA %s%s",
      r->tty ? "\r" : "", (long long)r->last.step, (long long)r->total, (long long)r->last.episodes,
      r->last.mean_return, (double)r->last_loss, r->ac ? "alpha" : "eps",
      (double)(r->ac ? r->last_alpha : r->last.epsilon), sps, eta_s, r->tty && !final ? "   " : "\n");
  fflush(stderr);
}

static int on_event(const ag_train_event *ev, void *user) {
  run *r = user;
  r->last = *ev;
  if (ev->kind == AG_TRAIN_EPISODE) {
    if (r->episodes) {
      fprintf(r->episodes, "%lld,%lld,%.6g,%lld,%d,%.6g,%.6g,%lld\n", (long long)ev->episodes,
              (long long)ev->step, ev->episode_return, (long long)ev->episode_length, ev->truncated,
              ev->mean_return, (double)ev->epsilon, (long long)ev->updates);
      r->rows++;
    }
    if (ev->episodes >= 20 && ev->mean_return > r->best_mean) r->best_mean = ev->mean_return;
    if (r->solved_at < 0 && ev->episodes >= 20 && ev->mean_return >= r->stop_at) r->solved_at = ev->step;
  } else {
    r->last_loss = ev->loss;
    r->last_alpha = ev->alpha;
    if (r->losses && r->ac)
      fprintf(r->losses, "%lld,%lld,%.6g,%.6g,%.6g,%.6g\n", (long long)ev->step, (long long)ev->updates,
              (double)ev->loss, ev->mean_return, (double)ev->actor_loss, (double)ev->alpha);
    else if (r->losses)
      fprintf(r->losses, "%lld,%lld,%.6g,%.6g\n", (long long)ev->step, (long long)ev->updates,
              (double)ev->loss, ev->mean_return);
    r->rows += r->losses != NULL;
  }
  double t = cli_now_s();
  if (r->progress && t - r->last_print > (r->tty ? 0.25 : 5.0)) {
    r->last_print = t;
    print_progress(r, 0);
  }
  /* a signal stops the loop through should_stop, after the step in progress */
  if (r->solved_at >= 0 && !isinf(r->stop_at) && !r->stop_on_eval) r->stopped = 1;
  return r->stopped;
}

/* ---- checkpoints: the command's own files beside the agent ----
 * args       the run's settings: its flags, NUL after each (--out always)
 * episodes.csv, losses.csv   the logs so far
 * cli.state  the summary's counters, floats in C99's hexadecimal form */

typedef struct ckpt_files {
  run *r;
  ag__afile *ep, *loss;
  char **args;
  int n_args;
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
  r->evals++;
  r->last_eval = mean;
  if (r->evals == 1 || mean > r->best_eval) {
    r->best_eval = mean;
    r->best_eval_at = step;
  }
  if (r->eval_solved_at < 0 && mean >= r->stop_at) r->eval_solved_at = step;
  if (r->stop_on_eval && r->eval_solved_at >= 0 && !isinf(r->stop_at)) *stop = r->stopped = 1;
}

/* DIR/NAME written whole from the bytes of a temporary log so far. */
static ag_status copy_log(ag__afile *log, const char *dir, const char *name) {
  char *p = cli_path(dir, name);
  if (!p) return AG_ERR_OUT_OF_MEMORY;
  ag__afile out;
  ag_status s = ag__afile_open(&out, p, "train");
  free(p);
  if (s) return s;
  FILE *in = NULL;
  int ok = fflush(log->f) == 0 && (in = fopen(log->tmp, "rb")) != NULL;
  char buf[65536];
  size_t n;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out.f) == n;
  if (ok && in && ferror(in)) ok = 0;
  if (in) fclose(in);
  if (!ok) {
    ag__afile_abort(&out);
    return AG_ERR_IO;
  }
  return ag__afile_commit(&out, "train");
}

static ag_status on_checkpoint(const char *dir, int64_t step, void *user) {
  (void)step;
  ckpt_files *c = user;
  const run *r = c->r;
  ag__afile a;
  char *p = cli_path(dir, "args");
  if (!p) return AG_ERR_OUT_OF_MEMORY;
  ag_status s = ag__afile_open(&a, p, "train");
  free(p);
  if (s) return s;
  for (int i = 0; i < c->n_args; i++) fwrite(c->args[i], 1, strlen(c->args[i]) + 1, a.f);
  if ((s = ag__afile_commit(&a, "train"))) return s;
  if ((s = copy_log(c->ep, dir, "episodes.csv")) || (s = copy_log(c->loss, dir, "losses.csv"))) return s;
  if (r->eval_log && (s = copy_log(r->eval_log, dir, "eval.csv"))) return s;
  if (!(p = cli_path(dir, "cli.state"))) return AG_ERR_OUT_OF_MEMORY;
  s = ag__afile_open(&a, p, "train");
  free(p);
  if (s) return s;
  fprintf(a.f, "rows %lld\nbest_mean %a\nsolved_at %lld\nlast_loss %a\n", (long long)r->rows, r->best_mean,
          (long long)r->solved_at, (double)r->last_loss);
  fprintf(a.f, "last %d %lld %lld %lld %a %lld %d %a %a %a\n", (int)r->last.kind, (long long)r->last.step,
          (long long)r->last.episodes, (long long)r->last.updates, r->last.episode_return,
          (long long)r->last.episode_length, r->last.truncated, r->last.mean_return, (double)r->last.loss,
          (double)r->last.epsilon);
  fprintf(a.f, "evals %lld %lld %lld %a %a\n", (long long)r->evals, (long long)r->eval_solved_at,
          (long long)r->best_eval_at, r->last_eval, r->best_eval);
  return ag__afile_commit(&a, "train");
}

/* A whole file of at most max bytes, NUL-terminated, in *out (free it); -1 with a message. */
static int read_whole(const char *path, size_t max, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "agrl train: --resume: cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  char *b = malloc(max + 1);
  size_t n = b ? fread(b, 1, max + 1, f) : 0;
  int bad = !b || ferror(f) || n > max;
  fclose(f);
  if (bad) {
    fprintf(stderr, "agrl train: --resume: %s cannot be read or is longer than %zu bytes\n", path, max);
    free(b);
    return -1;
  }
  b[n] = '\0';
  *out = b;
  *len = n;
  return 0;
}

/* The summary's counters back from DIR/cli.state; -1 with a message. */
static int restore_run(run *r, const char *dir) {
  char *p = cli_path(dir, "cli.state"), *b = NULL;
  size_t n;
  int rc = !p || read_whole(p, 4096, &b, &n) ? -1 : 0;
  long long rows, solved, st, eps, upd, len, evals, esolved, ebest_at;
  double best, loss, ret, mean, lo, ep, elast, ebest;
  int kind, tr;
  if (!rc &&
      sscanf(b,
             "rows %lld best_mean %la solved_at %lld last_loss %la last %d %lld %lld %lld %la %lld %d %la "
             "%la %la evals %lld %lld %lld %la %la",
             &rows, &best, &solved, &loss, &kind, &st, &eps, &upd, &ret, &len, &tr, &mean, &lo, &ep, &evals,
             &esolved, &ebest_at, &elast, &ebest) != 19) {
    fprintf(stderr, "agrl train: --resume: %s is not a checkpoint's cli.state\n", p);
    rc = -1;
  }
  if (!rc) {
    r->rows = rows;
    r->best_mean = best;
    r->solved_at = solved;
    r->last_loss = (float)loss;
    r->last.kind = (ag_train_event_kind)kind;
    r->last.step = st;
    r->last.episodes = eps;
    r->last.updates = upd;
    r->last.episode_return = ret;
    r->last.episode_length = len;
    r->last.truncated = tr;
    r->last.mean_return = mean;
    r->last.loss = (float)lo;
    r->last.epsilon = (float)ep;
    r->evals = evals;
    r->eval_solved_at = esolved;
    r->best_eval_at = ebest_at;
    r->last_eval = elast;
    r->best_eval = ebest;
  }
  free(p);
  free(b);
  return rc;
}

/* Appends the checkpoint's DIR/NAME to a log; -1 with a message. */
static int restore_log(FILE *to, const char *dir, const char *name) {
  char *p = cli_path(dir, name), *b = NULL;
  size_t n = 0;
  int rc = !p || read_whole(p, (size_t)1 << 31, &b, &n) ? -1 : 0;
  if (!rc && fwrite(b, 1, n, to) != n) rc = -1;
  free(p);
  free(b);
  return rc;
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

/* The run of `agrl train`: argv as given, or (ckpt set) the settings of the
 * checkpoint ckpt, which the run continues. */
static int train_run(int argc, char **argv, const char *ckpt) {
  static const char cmd[] = "train";
  ag_dqn_config cfg = ag_dqn_defaults();
  const char *env_name = "cartpole", *out_dir = NULL, *algo = "dqn";
  ag_device_kind kind = AG_DEVICE_AUTO;
  int index = 0, quiet = 0, stop_given = 0;
  double stop_value = INFINITY; /* --stop-at: INFINITY is none */
  int64_t steps = 100000, seed = 0, n_envs = 1, ckpt_every = 0, keep = 3, eval_every = 0, eval_episodes = 10;
  int stop_on_eval = 0;
  int64_t gpus = 1, rank = -1, world = 0; /* rank/world/id-file: set by the launcher */
  const char *id_file = NULL;
  /* sac and td3: their own defaults, the flags they share with the DQN's
   * copied from it once all are read (given: which), the DQN's own refused */
  int acm = 0, rho_given = 0, envs_given = 0;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--algo") && (!strcmp(argv[i + 1], "sac") || !strcmp(argv[i + 1], "td3")))
      acm = !strcmp(argv[i + 1], "sac") ? 1 : 2;
  ag_ac_config acfg = ag_ac_defaults(acm == 2 ? AG_AC_TD3 : AG_AC_SAC);
  if (acm) env_name = "pendulum";
  enum {
    G_LR = 1,
    G_GAMMA = 2,
    G_BATCH = 4,
    G_BUFFER = 8,
    G_STARTS = 16,
    G_FREQ = 32,
    G_GRAD = 64,
    G_TAU = 128,
    G_HIDDEN = 256,
    G_NSTEP = 512
  };
  unsigned given = 0;
  const char *dqn_flag = NULL, *ac_flag = NULL; /* a flag of the other kind of agent */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = cli_value(argc, argv, i);
#define NEEDS(bad, what) CLI_NEEDS(train_usage, bad, what)
    static const char *const dqn_only[] = {"--target-update", "--eps-fraction", "--eps-start", "--eps-end",
                                           "--max-grad-norm", "--double",       "--no-double", "--mse",
                                           "--per",           "--per-alpha",    "--per-beta",  "--per-eps",
                                           "--gpus"};
    static const char *const ac_only[] = {
        "--actor-lr",       "--critic-lr",  "--policy-delay", "--alpha",      "--no-autotune",
        "--target-entropy", "--expl-noise", "--target-noise", "--noise-clip", "--noise-rho"};
    for (size_t k = 0; k < sizeof dqn_only / sizeof *dqn_only; k++)
      if (!strcmp(a, dqn_only[k]) && !dqn_flag) dqn_flag = a;
    for (size_t k = 0; k < sizeof ac_only / sizeof *ac_only; k++)
      if (!strcmp(a, ac_only[k]) && !ac_flag) ac_flag = a;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      train_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--algo")) {
      NEEDS(strcmp(v, "dqn") && strcmp(v, "sac") && strcmp(v, "td3"), "dqn, sac or td3");
      algo = v;
    } else if (!strcmp(a, "--actor-lr"))
      NEEDS(parse_f(v, 1e-9, 10, &acfg.actor_lr), "a learning rate in [1e-9, 10]");
    else if (!strcmp(a, "--critic-lr"))
      NEEDS(parse_f(v, 1e-9, 10, &acfg.critic_lr), "a learning rate in [1e-9, 10]");
    else if (!strcmp(a, "--policy-delay")) {
      int64_t pd;
      NEEDS(cli_parse_i64(v, 1, 1000, &pd), "a number of updates in 1..1000");
      acfg.policy_delay = (int)pd;
    } else if (!strcmp(a, "--alpha"))
      NEEDS(parse_f(v, 1e-9, 1e5, &acfg.alpha), "a temperature in [1e-9, 1e5]");
    else if (!strcmp(a, "--no-autotune"))
      acfg.autotune = 0;
    else if (!strcmp(a, "--target-entropy"))
      NEEDS(parse_f(v, -1e6, 1e6, &acfg.target_entropy), "an entropy in [-1e6, 1e6]");
    else if (!strcmp(a, "--expl-noise"))
      NEEDS(parse_f(v, 0, 10, &acfg.expl_noise), "a noise scale in [0, 10]");
    else if (!strcmp(a, "--target-noise"))
      NEEDS(parse_f(v, 0, 10, &acfg.target_noise), "a noise scale in [0, 10]");
    else if (!strcmp(a, "--noise-clip"))
      NEEDS(parse_f(v, 0, 10, &acfg.noise_clip), "a noise bound in [0, 10]");
    else if (!strcmp(a, "--noise-rho") && (rho_given = 1))
      NEEDS(parse_f(v, 0, 0.999999f, &acfg.noise_rho), "a correlation in [0, 1)");
    else if (!strcmp(a, "--env")) {
      NEEDS(!*v, "a name (cartpole, acrobot, mountaincar)");
      env_name = v;
    } else if (!strcmp(a, "--device"))
      NEEDS(cli_parse_device(v, &kind, &index), "auto, cpu, cuda, cuda:N, vulkan or vulkan:N");
    else if (!strcmp(a, "--steps"))
      NEEDS(cli_parse_i64(v, 1, MAX_STEPS, &steps), "a positive whole number up to 100000000000");
    else if (!strcmp(a, "--seed"))
      NEEDS(cli_parse_i64(v, 0, INT64_MAX, &seed), "a whole number >= 0 (64-bit)");
    else if (!strcmp(a, "--out")) {
      NEEDS(!*v, "a directory");
      out_dir = v;
    } else if (!strcmp(a, "--n-envs") && (envs_given = 1))
      NEEDS(cli_parse_i64(v, 1, 4096, &n_envs), "a number of copies in 1..4096");
    else if (!strcmp(a, "--stop-at")) {
      NEEDS(strcmp(v, "none") && cli_parse_f64(v, -1e12, 1e12, &stop_value),
            "a return in [-1e12, 1e12] or none");
      if (!strcmp(v, "none")) stop_value = INFINITY;
      stop_given = 1;
    } else if (!strcmp(a, "--quiet"))
      quiet = 1;
    else if (!strcmp(a, "--eval-every"))
      NEEDS(cli_parse_i64(v, 0, MAX_STEPS, &eval_every), "a number of steps in 0..100000000000");
    else if (!strcmp(a, "--eval-episodes"))
      NEEDS(cli_parse_i64(v, 1, 10000, &eval_episodes), "a number of episodes in 1..10000");
    else if (!strcmp(a, "--stop-on")) {
      NEEDS(strcmp(v, "train") && strcmp(v, "eval"), "train or eval");
      stop_on_eval = !strcmp(v, "eval");
    } else if (!strcmp(a, "--checkpoint-every"))
      NEEDS(cli_parse_i64(v, 0, MAX_STEPS, &ckpt_every), "a number of steps in 0..100000000000");
    else if (!strcmp(a, "--keep"))
      NEEDS(cli_parse_i64(v, 1, 1000000, &keep), "a number of checkpoints in 1..1000000");
    else if (!strcmp(a, "--gpus"))
      NEEDS(cli_parse_i64(v, 1, 64, &gpus), "a number of GPUs in 1..64");
    else if (!strcmp(a, "--rank"))
      NEEDS(cli_parse_i64(v, 0, 63, &rank), "a rank in 0..63");
    else if (!strcmp(a, "--world"))
      NEEDS(cli_parse_i64(v, 1, 64, &world), "a group size in 1..64");
    else if (!strcmp(a, "--id-file")) {
      NEEDS(!*v, "a path");
      id_file = v;
    } else if (!strcmp(a, "--lr")) {
      given |= G_LR;
      NEEDS(parse_f(v, 1e-9, 10, &cfg.lr), "a learning rate in [1e-9, 10]");
    } else if (!strcmp(a, "--gamma")) {
      given |= G_GAMMA;
      NEEDS(parse_f(v, 0, 1, &cfg.gamma), "a discount in [0, 1]");
    } else if (!strcmp(a, "--batch")) {
      given |= G_BATCH;
      NEEDS(cli_parse_i64(v, 1, 1 << 20, &cfg.batch_size), "a positive batch size up to 1048576");
    } else if (!strcmp(a, "--buffer")) {
      given |= G_BUFFER;
      NEEDS(cli_parse_i64(v, 1, (int64_t)1 << 36, &cfg.buffer_size), "a positive capacity up to 2^36");
    } else if (!strcmp(a, "--learning-starts")) {
      given |= G_STARTS;
      NEEDS(cli_parse_i64(v, 0, MAX_STEPS, &cfg.learning_starts), "a number of steps in 0..100000000000");
    } else if (!strcmp(a, "--train-freq")) {
      given |= G_FREQ;
      NEEDS(cli_parse_i64(v, 1, MAX_STEPS, &cfg.train_freq), "a number of steps in 1..100000000000");
    } else if (!strcmp(a, "--gradient-steps")) {
      given |= G_GRAD;
      NEEDS(cli_parse_i64(v, 0, MAX_GRADIENT_STEPS, &cfg.gradient_steps), "a number in 0..16777216");
    } else if (!strcmp(a, "--target-update"))
      NEEDS(cli_parse_i64(v, 1, MAX_STEPS, &cfg.target_update_interval),
            "a number of steps in 1..100000000000");
    else if (!strcmp(a, "--tau")) {
      given |= G_TAU;
      NEEDS(parse_f(v, 1e-9, 1, &cfg.tau), "a value in [1e-9, 1]");
    } else if (!strcmp(a, "--hidden")) {
      given |= G_HIDDEN;
      NEEDS(parse_hidden(v, &cfg), "sizes like 256,256 (1 to 8 of 1..65536)");
    } else if (!strcmp(a, "--eps-fraction"))
      NEEDS(parse_f(v, 0, 1, &cfg.exploration_fraction), "a fraction in [0, 1]");
    else if (!strcmp(a, "--eps-start"))
      NEEDS(parse_f(v, 0, 1, &cfg.eps_start), "a probability in [0, 1]");
    else if (!strcmp(a, "--eps-end"))
      NEEDS(parse_f(v, 0, 1, &cfg.eps_end), "a probability in [0, 1]");
    else if (!strcmp(a, "--max-grad-norm"))
      NEEDS(parse_f(v, 0, 1e9, &cfg.max_grad_norm), "a norm in [0, 1e9]");
    else if (!strcmp(a, "--double"))
      cfg.double_dqn = 1;
    else if (!strcmp(a, "--no-double"))
      cfg.double_dqn = 0;
    else if (!strcmp(a, "--mse"))
      cfg.huber = 0;
    else if (!strcmp(a, "--per"))
      cfg.per = 1;
    else if (!strcmp(a, "--per-alpha"))
      NEEDS(parse_f(v, 0, 1, &cfg.per_alpha), "an exponent in [0, 1]");
    else if (!strcmp(a, "--per-beta"))
      NEEDS(parse_f(v, 0, 1, &cfg.per_beta), "a starting beta in [0, 1]");
    else if (!strcmp(a, "--n-step")) {
      int64_t ns;
      given |= G_NSTEP;
      NEEDS(cli_parse_i64(v, 1, 64, &ns), "a number of steps in 1..64");
      cfg.n_step = (int)ns;
    } else if (!strcmp(a, "--per-eps"))
      NEEDS(parse_f(v, 1e-12, 1, &cfg.per_eps), "a priority offset in [1e-12, 1]");
    else
      return cli_bad_usage(cmd, train_usage, "unknown option '%s'", a);
#undef NEEDS
  }
  /* a DQN on one device steps 8 copies at a time: as sample-efficient per
   * environment step as one copy with the default 64 gradient steps every
   * 64 steps, and a fraction of the acting calls */
  if (!acm && !envs_given && gpus == 1 && world == 0) n_envs = 8;
  cfg.seed = (uint64_t)seed;
  cfg.n_envs = n_envs; /* the copies whose transitions each step stores side by side */
  if (acm && dqn_flag)
    return cli_bad_usage(cmd, train_usage, "%s is a DQN option, not one of %s", dqn_flag, algo);
  if (!acm && ac_flag)
    return cli_bad_usage(cmd, train_usage, "%s is an option of sac and td3, not of dqn", ac_flag);
  if (acm) {
    if (given & G_LR) acfg.actor_lr = acfg.critic_lr = cfg.lr;
    if (given & G_GAMMA) acfg.gamma = cfg.gamma;
    if (given & G_BATCH) acfg.batch_size = cfg.batch_size;
    if (given & G_BUFFER) acfg.buffer_size = cfg.buffer_size;
    if (given & G_STARTS) acfg.learning_starts = cfg.learning_starts;
    if (given & G_FREQ) acfg.train_freq = cfg.train_freq;
    if (given & G_GRAD) acfg.gradient_steps = cfg.gradient_steps;
    if (given & G_TAU) acfg.tau = cfg.tau;
    if (given & G_HIDDEN) {
      acfg.n_hidden = cfg.n_hidden;
      memcpy(acfg.hidden, cfg.hidden, sizeof acfg.hidden);
    }
    if (given & G_NSTEP) acfg.n_step = cfg.n_step;
    acfg.seed = (uint64_t)seed;
    acfg.n_envs = n_envs;
    /* MountainCarContinuous-v0 rewards only the goal: exploring pushes that
     * last many steps (noise_rho 0.99) find it where independent noise does
     * not, and 64-unit layers suffice */
    if (!strcmp(env_name, "mountaincar_continuous")) {
      if (!rho_given) acfg.noise_rho = 0.99f;
      if (!(given & G_HIDDEN)) {
        acfg.n_hidden = 2;
        acfg.hidden[0] = acfg.hidden[1] = 64;
      }
    }
    if (acfg.buffer_size < acfg.batch_size)
      return cli_bad_usage(cmd, train_usage, "--buffer (%lld) must hold at least --batch (%lld) transitions",
                           (long long)acfg.buffer_size, (long long)acfg.batch_size);
  }
  if (cfg.buffer_size < cfg.batch_size)
    return cli_bad_usage(cmd, train_usage, "--buffer (%lld) must hold at least --batch (%lld) transitions",
                         (long long)cfg.buffer_size, (long long)cfg.batch_size);
  if (gpus > 1 || world > 0) {
    if (kind == AG_DEVICE_CPU)
      return cli_bad_usage(cmd, train_usage, "--gpus %lld needs CUDA devices, not --device cpu",
                           (long long)gpus);
    if (cfg.batch_size % (world > 0 ? world : gpus))
      return cli_bad_usage(cmd, train_usage,
                           "the batch (%lld) must be a multiple of the number of GPUs (%lld)",
                           (long long)cfg.batch_size, (long long)(world > 0 ? world : gpus));
  }
  if (stop_on_eval && eval_every == 0)
    return cli_bad_usage(cmd, train_usage, "--stop-on eval needs --eval-every N");
  if ((gpus > 1 || world > 0) && eval_every > 0)
    return cli_bad_usage(cmd, train_usage, "--eval-every is not supported with --gpus");
  /* a group takes the one-step target unless --n-step asks (refused below) */
  if ((gpus > 1 || world > 0) && !(given & G_NSTEP)) cfg.n_step = 1;
  if ((gpus > 1 || world > 0) && (cfg.per || cfg.n_step > 1))
    return cli_bad_usage(cmd, train_usage, "--per and --n-step are not supported with --gpus");
  if ((gpus > 1 || world > 0) && ckpt_every > 0)
    return cli_bad_usage(cmd, train_usage, "--checkpoint-every is not supported with --gpus");
  if (world > 0 && (rank < 0 || rank >= world || !id_file))
    return cli_bad_usage(cmd, train_usage, "--world needs --rank in 0..world-1 and --id-file");
  if (world == 0 && (rank >= 0 || id_file))
    return cli_bad_usage(cmd, train_usage, "%s is set by the launcher of --gpus, with --world",
                         rank >= 0 ? "--rank" : "--id-file");
  if (gpus > 1 && world == 0) { /* the launcher: one worker per GPU */
    int have = ag_cuda_device_count();
    if (have < gpus + index)
      return cli_bad_usage(cmd, train_usage, "--gpus %lld needs GPUs %d..%lld; this machine has %d",
                           (long long)gpus, index, (long long)(index + gpus - 1), have);
    return cli_launch(cmd, argc, argv, (int)gpus);
  }
  int worker = world > 0, lead = !worker || rank == 0;
  if (worker) {
    kind = AG_DEVICE_CUDA;
    index += (int)rank;
    if (!lead) quiet = 1;
  }

  ag_vec_env *env = NULL;
  /* each worker's environments get their own seeds; rank 0 those of a one-GPU run */
  ag_status s = ag_vec_env_create(env_name, (int)n_envs,
                                  (uint64_t)seed + (uint64_t)(worker ? rank : 0) * 1000003u, &env);
  if (s) return cli_bad_usage(cmd, train_usage, "--env %s: %s", env_name, ag_last_error());
  const ag_env_spec *spec = ag_vec_env_get_spec(env);
  if (!acm && spec->n_actions < 2) {
    int rc = cli_bad_usage(cmd, train_usage, "--env %s: DQN needs discrete actions; %s has continuous ones",
                           env_name, spec->id);
    ag_vec_env_free(env); /* after the message: spec belongs to env */
    return rc;
  }
  if (acm && (spec->n_actions > 0 || !spec->act_low || !spec->act_high)) {
    int rc =
        cli_bad_usage(cmd, train_usage, "--env %s: %s needs bounded continuous actions; %s has %s", env_name,
                      algo, spec->id, spec->n_actions > 0 ? "discrete ones" : "unbounded ones");
    ag_vec_env_free(env);
    return rc;
  }
  double stop_at = stop_given                      ? stop_value
                   : isnan(spec->reward_threshold) ? INFINITY
                                                   : spec->reward_threshold;
  /* the directory as given, whatever its length: a path is never cut */
  char *dir = out_dir ? strdup(out_dir) : format_new("runs/%s-%s-s%lld", algo, env_name, (long long)seed);
  if (!dir) {
    ag_vec_env_free(env);
    fprintf(stderr, "agrl train: out of memory\n");
    return 1;
  }
  if (lead && ag__make_dirs(dir)) {
    int e = errno;
    fprintf(stderr, "agrl train: cannot create the %sdirectory %s: %s\n", out_dir ? "--out " : "", dir,
            strerror(e));
    ag_vec_env_free(env);
    free(dir);
    return 1;
  }

  ag_ctx *ctx = NULL;
  ag_dist *group = NULL;
  ag_dqn *dqn = NULL;
  ag_ac *acg = NULL;
  ag__afile ep_log, loss_log, summary, eval_log;
  memset(&ep_log, 0, sizeof ep_log);
  memset(&loss_log, 0, sizeof loss_log);
  memset(&summary, 0, sizeof summary);
  memset(&eval_log, 0, sizeof eval_log);
  char *path = NULL;
  run r;
  memset(&r, 0, sizeof r);
  r.solved_at = -1;
  r.best_mean = -INFINITY;
  r.stop_at = stop_at;
  r.total = steps;
  r.progress = !quiet;
  r.tty = isatty(2);
  r.eval_solved_at = r.best_eval_at = -1;
  r.eval_episodes = (int)eval_episodes;
  r.ac = acm != 0;
  r.stop_on_eval = stop_on_eval;
  /* the evaluations' episodes: the same seeds each time, none of training's */
  r.eval_seed = ag_env_derive_seed((uint64_t)seed, 0xE7A15EEDull);
  int rc = 1;
  if (eval_every > 0 && (ag_env_create(env_name, &r.eval_env) ||
                         !(r.eval_returns = malloc(sizeof(double) * (size_t)eval_episodes)))) {
    fprintf(stderr, "agrl train: the evaluation's environment cannot be made: %s\n", ag_last_error());
    goto done;
  }
  /* a worker is stopped by its launcher, which stops them all: one that
   * stopped on its own would leave the others waiting for it */
  if (!worker) catch_stop_signals();
  if ((s = ag_ctx_create(&ctx, kind, index))) {
    rc = cli_fail(cmd, "creating the context", s);
    goto done;
  }
  if (worker && (s = ag_dist_create(ctx, (int)rank, (int)world, id_file, 120.0, &group))) {
    rc = cli_fail(cmd, "joining the group of GPUs", s);
    goto done;
  }
  if (ckpt) {
    if (!(path = cli_path(ckpt, "agent.agrl"))) {
      fprintf(stderr, "agrl train: out of memory\n");
      goto done;
    }
    if ((s = acm ? ag_ac_load(ctx, path, &acg) : ag_dqn_load(ctx, path, &dqn))) {
      rc = cli_fail(cmd, "loading the checkpoint's agent", s);
      goto done;
    }
    free(path);
    path = NULL;
  } else if (acm) {
    if ((s = ag_ac_create(ctx, spec->obs_dim, spec->act_dim, spec->act_low, spec->act_high, steps, &acfg,
                          &acg))) {
      rc = cli_fail(cmd, "creating the agent", s);
      goto done;
    }
  } else if ((s = worker ? ag_dqn_create_dist(ctx, group, spec->obs_dim, spec->n_actions, steps, &cfg, &dqn)
                         : ag_dqn_create(ctx, spec->obs_dim, spec->n_actions, steps, &cfg, &dqn))) {
    rc = cli_fail(cmd, "creating the agent", s);
    goto done;
  }
  if (!lead) { /* another rank trains in step with rank 0, which reports */
    r.stop_at = INFINITY;
    if ((s = ag_dqn_learn(dqn, env, steps, on_event, &r)))
      rc = cli_fail(cmd, "training", s);
    else
      rc = 0;
    goto done;
  }
  /* the logs grow under temporary names and are renamed when the run ends,
   * also when it failed part-way: what it logged is kept */
  if (open_whole(&ep_log, dir, "episodes.csv") || open_whole(&loss_log, dir, "losses.csv")) goto done;
  r.episodes = ep_log.f;
  r.losses = loss_log.f;
  if (!ckpt) {
    fprintf(r.episodes, "episode,step,return,length,truncated,mean20,epsilon,updates\n");
    fprintf(r.losses, acm ? "step,updates,loss,mean20,actor_loss,alpha\n" : "step,updates,loss,mean20\n");
  } else if (restore_log(r.episodes, ckpt, "episodes.csv") || restore_log(r.losses, ckpt, "losses.csv") ||
             restore_run(&r, ckpt)) {
    fprintf(stderr, "agrl train: --resume: the logs of %s cannot be restored\n", ckpt);
    goto done;
  }
  if (eval_every > 0) {
    if (open_whole(&eval_log, dir, "eval.csv")) goto done;
    r.eval_log = &eval_log;
    if (!ckpt)
      fprintf(eval_log.f, "step,updates,mean,std,min,max,episodes\n");
    else if (restore_log(eval_log.f, ckpt, "eval.csv")) {
      fprintf(stderr, "agrl train: --resume: the evaluations of %s cannot be restored\n", ckpt);
      goto done;
    }
  }
  char devs[160];
  if (worker)
    snprintf(devs, sizeof devs, "%lld GPUs (cuda:%d..%lld, NCCL)", (long long)world, index,
             (long long)(index + world - 1));
  else
    snprintf(devs, sizeof devs, "%s", ag_ctx_device_name(ctx));
  fprintf(stderr, "agrl train: %s on %s, %s, %lld steps, seed %lld, %lld copies -> %s\n", algo, spec->id,
          devs, (long long)steps, (long long)seed, (long long)n_envs, dir);
  if (ckpt) fprintf(stderr, "agrl train: resumed from %s\n", ckpt);
  if (acm && !strcmp(env_name, "mountaincar_continuous")) {
    char hs[AG_AC_MAX_HIDDEN * 12] = "";
    for (int i = 0, o = 0; i < acfg.n_hidden; i++)
      o += snprintf(hs + o, sizeof hs - (size_t)o, "%s%lld", i ? "," : "", (long long)acfg.hidden[i]);
    fprintf(stderr, "agrl train: %s's exploring noise correlated at %g, hidden layers %s\n", spec->id,
            (double)acfg.noise_rho, hs);
  }
  /* the run's settings, kept in each checkpoint: the flags as given (a
   * --quiet dropped), and --out always */
  ckpt_files keepf = {&r, &ep_log, &loss_log, NULL, 0};
  if (!(keepf.args = malloc(sizeof(char *) * (size_t)(argc + 2)))) {
    fprintf(stderr, "agrl train: out of memory\n");
    goto done;
  }
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--quiet")) keepf.args[keepf.n_args++] = argv[i];
  if (!out_dir) {
    keepf.args[keepf.n_args++] = "--out";
    keepf.args[keepf.n_args++] = dir;
  }
  char *ckpt_dir = cli_path(dir, "checkpoints");
  if (!ckpt_dir) {
    free(keepf.args);
    fprintf(stderr, "agrl train: out of memory\n");
    goto done;
  }
  ag_learn_opts lo = ag_learn_defaults();
  lo.checkpoint_dir = ckpt_dir;
  lo.checkpoint_every = ckpt_every;
  lo.keep = (int)keep;
  lo.should_stop = should_stop;
  lo.on_checkpoint = on_checkpoint;
  lo.user = &keepf;
  lo.eval_every = eval_every;
  lo.on_eval = eval_every > 0 ? on_eval : NULL;
  lo.resume = ckpt != NULL;
  if (acm) {
    lo.on_eval = NULL;
    lo.on_eval_ac = eval_every > 0 ? on_eval_ac : NULL;
  }
  r.t0 = cli_now_s();
  s = acm ? ag_ac_learn(acg, env, steps, &lo, on_event, &r)
          : ag_dqn_learn_ex(dqn, env, steps, worker ? NULL : &lo, on_event, &r);
  double wall = cli_now_s() - r.t0;
  free(keepf.args);
  free(ckpt_dir);
  /* stopped by a signal (one after the last step changes nothing) */
  int interrupted = lo.stopped ? (int)stop_signal : 0;
  if (s) {
    rc = cli_fail(cmd, "training", s);
    goto done;
  }
  /* the steps taken: the loop takes n_envs (x GPUs) at a time and ends at
   * the first multiple at or past --steps, unless a stop came at an event */
  int64_t per = n_envs * (worker ? world : 1);
  int64_t taken = worker ? (r.stopped ? r.last.step : (steps + per - 1) / per * per) : lo.step;
  r.last.step = taken;
  if (r.progress) print_progress(&r, 1);
  r.episodes = r.losses = NULL;
  if (close_whole(&ep_log, 1) | close_whole(&loss_log, 1) | close_whole(&eval_log, 1)) goto done;
  const char *net_file = acm ? "policy.agrl" : "q_network.agrl";
  if (!(path = cli_path(dir, net_file))) {
    fprintf(stderr, "agrl train: out of memory\n");
    goto done;
  }
  if ((s = ag_mlp_save(acm ? ag_ac_actor(acg) : ag_dqn_q(dqn), path))) {
    rc = cli_fail(cmd, "saving the network", s);
    goto done;
  }
  double sps = wall > 0 ? (double)(taken - lo.resumed_at) / wall : 0; /* the steps this invocation took */
  if (open_whole(&summary, dir, "summary.json")) goto done;
  const int64_t updates = acm ? ag_ac_updates(acg) : ag_dqn_updates(dqn);
  fprintf(summary.f, "{\"algo\": \"%s\", \"env\": ", algo);
  json_str(summary.f, spec->id);
  fprintf(summary.f, ", \"device\": ");
  json_str(summary.f, devs);
  fprintf(summary.f,
          ", \"gpus\": %lld, \"seed\": %lld, \"steps\": %lld, \"episodes\": %lld,\n"
          " \"updates\": %lld, \"final_mean20\": %.6g, \"best_mean20\": %.6g, \"solved_at_step\": %lld,\n"
          " \"stop_at\": %.6g, \"stop_on\": \"%s\", \"wall_s\": %.3f, \"steps_per_s\": %.1f, "
          "\"interrupted\": %s,\n"
          " \"eval_every\": %lld, \"eval_episodes\": %lld, \"evals\": %lld, \"last_eval_mean\": %.6g,\n"
          " \"best_eval_mean\": %.6g, \"best_eval_at_step\": %lld, \"eval_solved_at_step\": %lld,\n"
          " \"eval_seed\": %llu}\n",
          (long long)(worker ? world : 1), (long long)seed, (long long)taken, (long long)r.last.episodes,
          (long long)updates, r.last.mean_return, isinf(r.best_mean) ? 0.0 : r.best_mean,
          (long long)r.solved_at, isinf(stop_at) ? -1.0 : stop_at, stop_on_eval ? "eval" : "train", wall, sps,
          interrupted ? "true" : "false", (long long)eval_every, (long long)(eval_every ? eval_episodes : 0),
          (long long)r.evals, r.evals ? r.last_eval : 0.0, r.evals ? r.best_eval : 0.0,
          (long long)r.best_eval_at, (long long)r.eval_solved_at, (unsigned long long)r.eval_seed);
  if (close_whole(&summary, 1)) goto done;
  char title[256];
  snprintf(title, sizeof title, "%s on %s (seed %lld, %s)",
           acm == 1   ? "SAC"
           : acm == 2 ? "TD3"
                      : "DQN",
           spec->id, (long long)seed, devs);
  int plotted = plot_curve(dir, title) == 0;
  printf("agrl train: %lld steps, %lld episodes, %lld updates in %.1f s (%.0f steps/s) on %s\n",
         (long long)taken, (long long)r.last.episodes, (long long)updates, wall, sps, devs);
  printf("  mean return of the last 20 episodes: %.1f (best %.1f)\n", r.last.mean_return,
         isinf(r.best_mean) ? 0.0 : r.best_mean);
  if (interrupted && !worker)
    printf("  interrupted by signal %d at step %lld; continue with: agrl train --resume %s\n", interrupted,
           (long long)taken, dir);
  else if (interrupted)
    printf("  interrupted by signal %d at step %lld\n", interrupted, (long long)taken);
  if (r.evals)
    printf("  evaluation (%lld %s episodes, %lld times): last %.1f, best %.1f at step %lld\n",
           (long long)eval_episodes, acm ? "deterministic" : "greedy", (long long)r.evals, r.last_eval,
           r.best_eval, (long long)r.best_eval_at);
  if (!isinf(stop_at) && stop_on_eval) {
    if (r.eval_solved_at >= 0)
      printf("  solved: evaluation mean >= %g at step %lld\n", stop_at, (long long)r.eval_solved_at);
    else
      printf("  not solved: the evaluation mean stayed below %g\n", stop_at);
  } else if (!isinf(stop_at)) {
    if (r.solved_at >= 0)
      printf("  solved: mean20 >= %g at step %lld\n", stop_at, (long long)r.solved_at);
    else
      printf("  not solved: mean20 stayed below %g\n", stop_at);
  }
  printf("  logs: %s/episodes.csv, %s/losses.csv, %s/summary.json\n", dir, dir, dir);
  printf("  network: %s/%s (agrl eval --model %s/%s --env %s)\n", dir, net_file, dir, net_file, env_name);
  printf("  learning curve: %s\n",
         plotted ? "written to learning_curve.png" : "not drawn (python3 with matplotlib is missing)");
  if (plotted) printf("    %s/learning_curve.png\n", dir);
  /* stopped by a signal: the status a shell expects of it */
  rc = interrupted ? 128 + interrupted : 0;
done:
  /* a run that failed keeps the logs it wrote; none were written: the
   * files of an earlier run stay as they were */
  if (close_whole(&ep_log, r.rows > 0) | close_whole(&loss_log, r.rows > 0) |
      close_whole(&eval_log, r.evals > 0))
    rc = 1;
  ag_env_free(r.eval_env);
  free(r.eval_returns);
  ag__afile_abort(&summary);
  free(path);
  free(dir);
  ag_dqn_free(dqn);
  ag_ac_free(acg);
  ag_dist_free(group);
  ag_vec_env_free(env);
  ag_ctx_free(ctx);
  return rc;
}

int agrl_cmd_train(int argc, char **argv) {
  static const char cmd[] = "train";
  const char *resume = NULL;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--resume")) {
      const char *v = cli_value(argc, argv, i);
      if (!v || !*v) return cli_bad_usage(cmd, train_usage, "--resume needs a checkpoint or a run directory");
      if (resume) return cli_bad_usage(cmd, train_usage, "--resume is given twice");
      resume = v;
    }
  for (int i = 1; resume && i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--resume") || !strcmp(a, "--device"))
      i++; /* --device's value is checked by the run */
    else if (strcmp(a, "--quiet"))
      return cli_bad_usage(cmd, train_usage,
                           "--resume continues a run with its own settings: give only --quiet and --device "
                           "beside it, not %s",
                           a);
  }
  if (!resume) return train_run(argc, argv, NULL);
  /* the checkpoint: PATH itself, the newest under PATH/checkpoints, or under PATH */
  char ckpt[4096], *agent = cli_path(resume, "agent.agrl"), *sub = cli_path(resume, "checkpoints");
  struct stat st;
  int rc = 1;
  if (!agent || !sub) {
    fprintf(stderr, "agrl train: out of memory\n");
  } else if (stat(agent, &st) == 0) {
    snprintf(ckpt, sizeof ckpt, "%s", resume);
    rc = 0;
  } else if (ag_learn_latest(sub, ckpt, sizeof ckpt, NULL) == AG_OK ||
             ag_learn_latest(resume, ckpt, sizeof ckpt, NULL) == AG_OK) {
    rc = 0;
  } else
    fprintf(stderr, "agrl train: --resume %s: no checkpoint there (%s)\n", resume, ag_last_error());
  free(agent);
  free(sub);
  if (rc) return 1;
  /* its settings, then --quiet and --device as given now */
  char *p = cli_path(ckpt, "args"), *b = NULL;
  size_t n = 0;
  if (!p || read_whole(p, (size_t)1 << 20, &b, &n)) {
    free(p);
    return 1;
  }
  free(p);
  int m = 1;
  for (size_t i = 0; i < n; i++) m += b[i] == '\0';
  char **av = malloc(sizeof(char *) * (size_t)(m + argc + 1));
  if (!av) {
    free(b);
    fprintf(stderr, "agrl train: out of memory\n");
    return 1;
  }
  int ac = 0;
  av[ac++] = argv[0];
  for (size_t i = 0; i < n; i += strlen(b + i) + 1) av[ac++] = b + i;
  if (n && b[n - 1] != '\0') {
    fprintf(stderr, "agrl train: --resume: %s/args is damaged\n", ckpt);
    free(av), free(b);
    return 1;
  }
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--quiet"))
      av[ac++] = argv[i];
    else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
      av[ac++] = argv[i];
      av[ac++] = argv[++i];
    } else if (!strcmp(argv[i], "--resume"))
      i++;
  av[ac] = NULL;
  for (int i = 1; i < ac; i++)
    if (!strcmp(av[i], "--resume")) {
      fprintf(stderr, "agrl train: --resume: %s/args holds --resume\n", ckpt);
      free(av), free(b);
      return 1;
    }
  rc = train_run(ac, av, ckpt);
  free(av);
  free(b);
  return rc;
}

int agrl_cmd_eval(int argc, char **argv) {
  static const char cmd[] = "eval";
  const char *model = NULL, *env_name = "cartpole";
  ag_device_kind kind = AG_DEVICE_AUTO;
  int index = 0;
  int64_t episodes = 10, seed = 12345;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = cli_value(argc, argv, i);
#define NEEDS(bad, what) CLI_NEEDS(eval_usage, bad, what)
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      eval_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--model")) {
      NEEDS(!*v, "a path");
      model = v;
    } else if (!strcmp(a, "--env")) {
      NEEDS(!*v, "a name (cartpole, acrobot, mountaincar)");
      env_name = v;
    } else if (!strcmp(a, "--episodes"))
      NEEDS(cli_parse_i64(v, 1, 1000000, &episodes), "a positive number up to 1000000");
    else if (!strcmp(a, "--seed"))
      NEEDS(cli_parse_i64(v, 0, INT64_MAX, &seed), "a whole number >= 0 (64-bit)");
    else if (!strcmp(a, "--device"))
      NEEDS(cli_parse_device(v, &kind, &index), "auto, cpu, cuda, cuda:N, vulkan or vulkan:N");
    else
      return cli_bad_usage(cmd, eval_usage, "unknown option '%s'", a);
#undef NEEDS
  }
  if (!model) return cli_bad_usage(cmd, eval_usage, "--model FILE is required");
  ag_env *env = NULL;
  ag_status s = ag_env_create(env_name, &env);
  if (s) return cli_bad_usage(cmd, eval_usage, "--env %s: %s", env_name, ag_last_error());
  const ag_env_spec *spec = ag_env_get_spec(env);
  ag_ctx *ctx = NULL;
  ag_mlp *q = NULL;
  int rc = 1;
  double mean = 0, *rets = malloc((size_t)episodes * sizeof *rets);
  if (!rets) {
    fprintf(stderr, "agrl eval: out of memory\n");
    goto done;
  }
  if ((s = ag_ctx_create(&ctx, kind, index))) {
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
