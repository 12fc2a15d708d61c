/* opts.c — the option table of the agrl subcommands, its parser, its
 * --help and its (name, value) pairs.
 *
 * A row is one option of one or more subcommands. Its value goes to `to`
 * (offsets into cli_settings; a list of sizes takes two: the count and the
 * array). A row of the DQN's configuration that sac and td3 share names
 * where the value is copied for them in `ac` (--lr fills both learning
 * rates, --hidden the count and the array); the copy is made after all
 * flags are read, so the shared flag wins over --actor-lr whatever their
 * order. Nothing here allocates.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"

typedef enum cli_kind {
  K_I64,    /* int64_t in [lo, hi] */
  K_INT,    /* int in [lo, hi] */
  K_F32,    /* float, a finite number in [flo, fhi] */
  K_F64,    /* double, likewise (F_NONE: or "none", stored as INFINITY) */
  K_TEXT,   /* a string, not empty */
  K_CHOICE, /* int: the index of the value in choices ("a|b|c") */
  K_FLAG,   /* int = set; takes no value */
  K_DEVICE, /* cli_device, as ag_device_parse reads it */
  K_SIZES,  /* "N,N,...": 1 to AG_DQN_MAX_HIDDEN sizes in [lo, hi]; to[0] the count (int), to[1] the
               int64_t array */
  K_CONV,   /* "KxN[sS][pP],..." or "none": 0 to AG_MAX_CONV convolutions; to[0] the count (int), to[1]
               the ag_conv_layer array */
  K_HELP    /* prints the help */
} cli_kind;

enum {
  F_ONCE = 1,      /* refused when given twice */
  F_REQUIRED = 2,  /* must be given */
  F_NOSAVE = 4,    /* not one of the settings a checkpoint keeps */
  F_INTERNAL = 8,  /* set by the launcher of one process per GPU */
  F_NONE = 16,     /* K_F64: "none" is INFINITY */
  F_RESUMABLE = 32 /* train: may be given beside --resume */
};

#define CLI_IN(c) (1u << (c))
#define ALL_CMDS \
  (CLI_IN(CLI_TRAIN) | CLI_IN(CLI_EVAL) | CLI_IN(CLI_BENCH) | CLI_IN(CLI_BENCH_DIST) | CLI_IN(CLI_DEMO))
#define TRAIN CLI_IN(CLI_TRAIN)
#define DQN (1u << CLI_DQN)
#define AC ((1u << CLI_SAC) | (1u << CLI_TD3))
#define ALGOS (DQN | AC)
#define AT(field) ((uint16_t)offsetof(cli_settings, field))

typedef struct cli_opt {
  const char *name, *alias; /* "--help", "-h" */
  const char *arg;          /* the value's name in --help ("N"); NULL for a flag */
  cli_kind kind;
  unsigned cmds;  /* CLI_IN(cmd) of the subcommands that take it */
  unsigned algos; /* train: the algorithms that take it (1 << cli_algo) */
  unsigned flags; /* F_* */
  int64_t lo, hi; /* K_I64, K_INT, K_SIZES */
  double flo, fhi;
  const char *choices; /* K_CHOICE: "a|b|c" */
  int set;             /* K_FLAG: the value stored */
  uint16_t to[2];      /* where the value goes */
  uint16_t ac[2];      /* train, sac and td3: where it is copied to (0: nowhere) */
  const char *def;     /* the default as text; NULL: the library's (or none) */
  const char *def_ac;  /* the default for sac and td3 when it differs */
  const char *defhelp; /* --help's words for the default when not a value */
  const char *need;    /* "--lr needs NEED" */
  const char *help;
} cli_opt;

#define STEPS_NEED(lo) "a number of steps in " #lo "..100000000000"
#define DEVICE_NEED "auto, cpu, cuda, cuda:N, vulkan or vulkan:N"

/* one row a few lines, its fields in one order: clang-format would give each
 * field a line of its own */
/* clang-format off */
static const cli_opt rows[] = {
    {.name = "--help", .alias = "-h", .kind = K_HELP, .cmds = ALL_CMDS, .algos = ALGOS, .flags = F_NOSAVE,
     .help = "this help"},
    /* ---- train: the run ---- */
    {.name = "--algo", .arg = "A", .kind = K_CHOICE, .cmds = TRAIN, .algos = ALGOS, .choices = "dqn|sac|td3",
     .to = {AT(algo)}, .def = "dqn", .need = "dqn, sac or td3",
     .help = "dqn (discrete actions), sac or td3 (continuous actions)"},
    {.name = "--env", .arg = "NAME", .kind = K_TEXT, .cmds = TRAIN, .algos = ALGOS, .to = {AT(env)},
     .def = "cartpole", .def_ac = "pendulum", .need = "a name (cartpole, acrobot, mountaincar)",
     .help = "cartpole, acrobot, mountaincar, pendulum or mountaincar_continuous (sac and td3 on "
             "mountaincar_continuous: --noise-rho 0.99 --hidden 64,64 unless given)"},
    {.name = "--device", .arg = "D", .kind = K_DEVICE, .cmds = ALL_CMDS & ~CLI_IN(CLI_BENCH_DIST),
     .algos = ALGOS, .flags = F_RESUMABLE, .to = {AT(device)}, .def = "auto", .need = DEVICE_NEED,
     .help = "where it runs: auto (the GPU when present), cpu, cuda[:N] or vulkan[:N]"},
    {.name = "--steps", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 1,
     .hi = CLI_MAX_STEPS,
     .to = {AT(steps)}, .def = "100000", .need = "a positive whole number up to 100000000000",
     .help = "environment steps, at most 100000000000"},
    {.name = "--seed", .arg = "S", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 0, .hi = INT64_MAX,
     .to = {AT(seed)}, .def = "0", .need = "a whole number >= 0 (64-bit)",
     .help = "seed of everything random"},
    {.name = "--out", .arg = "DIR", .kind = K_TEXT, .cmds = TRAIN, .algos = ALGOS, .to = {AT(out)},
     .defhelp = "runs/ALGO-ENV-sSEED", .need = "a directory",
     .help = "where the logs, the learning curve and the network go"},
    {.name = "--n-envs", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 1, .hi = 4096,
     .to = {AT(n_envs)}, .def = "1", .defhelp = "8 for a DQN on one device, else 1",
     .need = "a number of copies in 1..4096", .help = "environment copies stepped together"},
    {.name = "--stop-at", .arg = "R|none", .kind = K_F64, .cmds = TRAIN, .algos = ALGOS, .flags = F_NONE,
     .flo = -1e12, .fhi = 1e12, .to = {AT(stop_at)}, .def = "none",
     .defhelp = "the environment's reward threshold, 475 for CartPole",
     .need = "a return in [-1e12, 1e12] or none",
     .help = "stop once the mean return of the last 20 episodes (or of the last evaluation, see --stop-on) "
             "reaches R"},
    {.name = "--quiet", .kind = K_FLAG, .cmds = TRAIN, .algos = ALGOS, .flags = F_NOSAVE | F_RESUMABLE,
     .set = 1, .to = {AT(quiet)}, .help = "no progress line"},
    {.name = "--gpus", .arg = "G", .kind = K_I64, .cmds = TRAIN, .algos = DQN, .lo = 1, .hi = 64,
     .to = {AT(gpus)}, .def = "1", .need = "a number of GPUs in 1..64",
     .help = "data-parallel on GPUs 0..G-1, one process each (NCCL); the batch and the replay table are "
             "split over them (DQN)"},
    {.name = "--eval-every", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 0,
     .hi = CLI_MAX_STEPS, .to = {AT(eval_every)}, .def = "0", .need = STEPS_NEED(0),
     .help = "every N environment steps, greedy episodes on an environment of their own (the same seeds "
             "each time), logged to eval.csv (0: none)"},
    {.name = "--eval-episodes", .arg = "K", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 1,
     .hi = 10000,
     .to = {AT(eval_episodes)}, .def = "10", .need = "a number of episodes in 1..10000",
     .help = "episodes of each evaluation"},
    {.name = "--stop-on", .arg = "train|eval", .kind = K_CHOICE, .cmds = TRAIN, .algos = ALGOS,
     .choices = "train|eval", .to = {AT(stop_on)}, .def = "train", .need = "train or eval",
     .help = "which mean --stop-at watches: the last 20 training episodes or the last evaluation (needs "
             "--eval-every)"},
    {.name = "--checkpoint-every", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 0,
     .hi = CLI_MAX_STEPS, .to = {AT(checkpoint_every)}, .def = "0", .need = STEPS_NEED(0),
     .help = "a checkpoint of the whole run every N environment steps, in DIR/checkpoints/ckpt-STEP (0: only "
             "when interrupted)"},
    {.name = "--keep", .arg = "K", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 1, .hi = 1000000,
     .to = {AT(keep)}, .def = "3", .need = "a number of checkpoints in 1..1000000",
     .help = "checkpoints kept, the newest"},
    {.name = "--resume", .arg = "PATH", .kind = K_TEXT, .cmds = TRAIN, .algos = ALGOS,
     .flags = F_ONCE | F_NOSAVE | F_RESUMABLE, .to = {AT(resume)}, .need = "a checkpoint or a run directory",
     .help = "continue the run of a checkpoint (PATH/agent.agrl) or of a run directory (its newest "
             "checkpoint) with the run's own settings; only --quiet and --device may be given beside it"},
    /* ---- train: the agent, all three algorithms (the DQN's value, copied for sac and td3) ---- */
    {.name = "--lr", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = ALGOS, .flo = 1e-9, .fhi = 10,
     .to = {AT(dqn.lr)}, .ac = {AT(ac.actor_lr), AT(ac.critic_lr)}, .need = "a learning rate in [1e-9, 10]",
     .help = "learning rate (Adam; for sac and td3 both the actor's and the critics')"},
    {.name = "--gamma", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = ALGOS, .flo = 0, .fhi = 1,
     .to = {AT(dqn.gamma)}, .ac = {AT(ac.gamma)}, .need = "a discount in [0, 1]", .help = "discount"},
    {.name = "--batch", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 1, .hi = 1 << 20,
     .to = {AT(dqn.batch_size)}, .ac = {AT(ac.batch_size)}, .need = "a positive batch size up to 1048576",
     .help = "transitions an update"},
    {.name = "--buffer", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 1,
     .hi = (int64_t)1 << 36, .to = {AT(dqn.buffer_size)}, .ac = {AT(ac.buffer_size)},
     .need = "a positive capacity up to 2^36", .help = "transitions the replay table holds"},
    {.name = "--learning-starts", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 0,
     .hi = CLI_MAX_STEPS, .to = {AT(dqn.learning_starts)}, .ac = {AT(ac.learning_starts)},
     .need = STEPS_NEED(0), .help = "environment steps before the first update"},
    {.name = "--train-freq", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 1,
     .hi = CLI_MAX_STEPS, .to = {AT(dqn.train_freq)}, .ac = {AT(ac.train_freq)}, .need = STEPS_NEED(1),
     .help = "environment steps between two training phases"},
    {.name = "--gradient-steps", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = ALGOS, .lo = 0,
     .hi = CLI_MAX_GRADIENT_STEPS, .to = {AT(dqn.gradient_steps)}, .ac = {AT(ac.gradient_steps)},
     .need = "a number in 0..16777216", .help = "updates a training phase"},
    {.name = "--tau", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = ALGOS, .flo = 1e-9, .fhi = 1,
     .to = {AT(dqn.tau)}, .ac = {AT(ac.tau)}, .need = "a value in [1e-9, 1]",
     .help = "target update: 1 a copy, below 1 Polyak averaging"},
    {.name = "--hidden", .arg = "N,N,...", .kind = K_SIZES, .cmds = TRAIN, .algos = ALGOS, .lo = 1,
     .hi = 65536, .to = {AT(dqn.n_hidden), AT(dqn.hidden)}, .ac = {AT(ac.n_hidden), AT(ac.hidden)},
     .need = "sizes like 256,256 (1 to 8 of 1..65536)", .help = "hidden layers (ReLU), 1 to 8 of 1..65536"},
    {.name = "--conv", .arg = "KxN[sS][pP],...", .kind = K_CONV, .cmds = TRAIN, .algos = DQN,
     .to = {AT(dqn.n_conv), AT(dqn.conv)}, .defhelp = "none; 16x3 with --hidden 128 for MinAtar",
     .need = "convolutions like 32x8s4,64x4s2,64x3s1 (K filters of NxN, stride S, padding P; 1 to 8 of them) or none",
     .help = "convolutions (ReLU) in front of the hidden layers, for image observations"},
    {.name = "--n-step", .arg = "N", .kind = K_INT, .cmds = TRAIN, .algos = ALGOS, .lo = 1, .hi = 64,
     .to = {AT(dqn.n_step)}, .ac = {AT(ac.n_step)}, .need = "a number of steps in 1..64",
     .help = "n-step returns, at most 64 (1 with --gpus)"},
    /* ---- train: the DQN's own ---- */
    {.name = "--target-update", .arg = "N", .kind = K_I64, .cmds = TRAIN, .algos = DQN, .lo = 1,
     .hi = CLI_MAX_STEPS, .to = {AT(dqn.target_update_interval)}, .need = STEPS_NEED(1),
     .help = "environment steps between two target updates"},
    {.name = "--eps-fraction", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = DQN, .flo = 0, .fhi = 1,
     .to = {AT(dqn.exploration_fraction)}, .need = "a fraction in [0, 1]",
     .help = "fraction of the run over which epsilon falls"},
    {.name = "--eps-start", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = DQN, .flo = 0, .fhi = 1,
     .to = {AT(dqn.eps_start)}, .need = "a probability in [0, 1]", .help = "first epsilon"},
    {.name = "--eps-end", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = DQN, .flo = 0, .fhi = 1,
     .to = {AT(dqn.eps_end)}, .need = "a probability in [0, 1]", .help = "last epsilon"},
    {.name = "--max-grad-norm", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = DQN, .flo = 0, .fhi = 1e9,
     .to = {AT(dqn.max_grad_norm)}, .need = "a norm in [0, 1e9]",
     .help = "gradients clipped to it (0: none)"},
    {.name = "--double", .kind = K_FLAG, .cmds = TRAIN, .algos = DQN, .set = 1, .to = {AT(dqn.double_dqn)},
     .help = "Double DQN (on by default)"},
    {.name = "--no-double", .kind = K_FLAG, .cmds = TRAIN, .algos = DQN, .set = 0, .to = {AT(dqn.double_dqn)},
     .help = "the plain DQN's max target"},
    {.name = "--mse", .kind = K_FLAG, .cmds = TRAIN, .algos = DQN, .set = 0, .to = {AT(dqn.huber)},
     .help = "MSE instead of the Huber loss"},
    {.name = "--per", .kind = K_FLAG, .cmds = TRAIN, .algos = DQN, .set = 1, .to = {AT(dqn.per)},
     .help = "prioritized replay"},
    {.name = "--per-alpha", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = DQN, .flo = 0, .fhi = 1,
     .to = {AT(dqn.per_alpha)}, .need = "an exponent in [0, 1]", .help = "priority exponent"},
    {.name = "--per-beta", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = DQN, .flo = 0, .fhi = 1,
     .to = {AT(dqn.per_beta)}, .need = "a starting beta in [0, 1]",
     .help = "importance-weight exponent at the start, annealed to 1"},
    {.name = "--per-eps", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = DQN, .flo = 1e-12, .fhi = 1,
     .to = {AT(dqn.per_eps)}, .need = "a priority offset in [1e-12, 1]", .help = "added to each priority"},
    /* ---- train: sac's and td3's own ---- */
    {.name = "--actor-lr", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = AC, .flo = 1e-9, .fhi = 10,
     .to = {AT(ac.actor_lr)}, .need = "a learning rate in [1e-9, 10]", .help = "the actor's learning rate"},
    {.name = "--critic-lr", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = AC, .flo = 1e-9, .fhi = 10,
     .to = {AT(ac.critic_lr)}, .need = "a learning rate in [1e-9, 10]", .help = "the critics' learning rate"},
    {.name = "--policy-delay", .arg = "N", .kind = K_INT, .cmds = TRAIN, .algos = AC, .lo = 1, .hi = 1000,
     .to = {AT(ac.policy_delay)}, .need = "a number of updates in 1..1000",
     .help = "the actor (and td3's targets) every N-th update"},
    {.name = "--alpha", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = AC, .flo = 1e-9, .fhi = 1e5,
     .to = {AT(ac.alpha)}, .need = "a temperature in [1e-9, 1e5]",
     .help = "sac's temperature: its start, or its value with --no-autotune"},
    {.name = "--no-autotune", .kind = K_FLAG, .cmds = TRAIN, .algos = AC, .set = 0, .to = {AT(ac.autotune)},
     .help = "a fixed alpha (sac)"},
    {.name = "--target-entropy", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = AC, .flo = -1e6,
     .fhi = 1e6, .to = {AT(ac.target_entropy)}, .defhelp = "-act_dim", .need = "an entropy in [-1e6, 1e6]",
     .help = "the entropy alpha is tuned towards (sac)"},
    {.name = "--expl-noise", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = AC, .flo = 0, .fhi = 10,
     .to = {AT(ac.expl_noise)}, .need = "a noise scale in [0, 10]",
     .help = "td3's exploring noise, a fraction of the actions' half range"},
    {.name = "--target-noise", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = AC, .flo = 0, .fhi = 10,
     .to = {AT(ac.target_noise)}, .need = "a noise scale in [0, 10]", .help = "td3's target smoothing noise"},
    {.name = "--noise-clip", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = AC, .flo = 0, .fhi = 10,
     .to = {AT(ac.noise_clip)}, .need = "a noise bound in [0, 10]",
     .help = "td3's smoothing noise clipped to it"},
    {.name = "--noise-rho", .arg = "X", .kind = K_F32, .cmds = TRAIN, .algos = AC, .flo = 0, .fhi = 0.999999f,
     .to = {AT(ac.noise_rho)}, .need = "a correlation in [0, 1)",
     .help = "the exploring noise's step-to-step correlation, in [0, 1)"},
    /* ---- set by the launcher of one process per GPU ---- */
    {.name = "--rank", .arg = "R", .kind = K_I64, .cmds = TRAIN | CLI_IN(CLI_BENCH_DIST), .algos = ALGOS,
     .flags = F_INTERNAL, .lo = 0, .hi = 63, .to = {AT(rank)}, .def = "-1", .defhelp = "",
     .need = "a rank in 0..63",
     .help = "this process's rank in the group"},
    {.name = "--world", .arg = "G", .kind = K_I64, .cmds = TRAIN | CLI_IN(CLI_BENCH_DIST), .algos = ALGOS,
     .flags = F_INTERNAL, .lo = 1, .hi = 64, .to = {AT(world)}, .def = "0", .defhelp = "",
     .need = "a group size in 1..64", .help = "the processes of the group"},
    {.name = "--id-file", .arg = "F", .kind = K_TEXT, .cmds = TRAIN | CLI_IN(CLI_BENCH_DIST), .algos = ALGOS,
     .flags = F_INTERNAL, .to = {AT(id_file)}, .need = "a path",
     .help = "where rank 0 writes the group's id"},
    /* ---- eval ---- */
    {.name = "--model", .arg = "FILE", .kind = K_TEXT, .cmds = CLI_IN(CLI_EVAL), .flags = F_REQUIRED,
     .to = {AT(model)}, .need = "a path",
     .help = "the network: DIR/q_network.agrl of a DQN, DIR/policy.agrl of sac or td3 (required)"},
    {.name = "--env", .arg = "NAME", .kind = K_TEXT, .cmds = CLI_IN(CLI_EVAL), .to = {AT(env)},
     .def = "cartpole", .need = "a name (cartpole, acrobot, mountaincar)",
     .help = "the environment it was trained on"},
    {.name = "--episodes", .arg = "N", .kind = K_I64, .cmds = CLI_IN(CLI_EVAL), .lo = 1, .hi = 1000000,
     .to = {AT(episodes)}, .def = "10", .need = "a positive number up to 1000000",
     .help = "episodes, at most 1000000"},
    {.name = "--seed", .arg = "S", .kind = K_I64, .cmds = CLI_IN(CLI_EVAL), .lo = 0, .hi = INT64_MAX,
     .to = {AT(seed)}, .def = "12345", .need = "a whole number >= 0 (64-bit)",
     .help = "seed of the first episode"},
    /* ---- bench ---- */
    {.name = "--filter", .arg = "TEXT", .kind = K_TEXT, .cmds = CLI_IN(CLI_BENCH), .to = {AT(filter)},
     .need = "a text",
     .help = "only rows whose name contains TEXT; A,B,...: contains any of them (rows run in their own "
             "order, not the filter's)"},
    {.name = "--iters", .arg = "N", .kind = K_I64, .cmds = CLI_IN(CLI_BENCH), .lo = 1, .hi = 1000000,
     .to = {AT(iters)}, .def = "0", .defhelp = "each row's own", .need = "a count from 1 to 1000000",
     .help = "N calls a repetition instead of each row's own count, 1..1000000 (for a profiler: few calls, "
             "same work)"},
    {.name = "--json", .arg = "FILE", .kind = K_TEXT, .cmds = CLI_IN(CLI_BENCH), .to = {AT(json)},
     .need = "a file", .help = "also append one JSON object a row to FILE"},
    /* ---- bench-dist ---- */
    {.name = "--gpus", .arg = "G", .kind = K_I64, .cmds = CLI_IN(CLI_BENCH_DIST), .lo = 1, .hi = 64,
     .to = {AT(gpus)}, .def = "1", .need = "a number of GPUs in 1..64", .help = "GPUs, one process each"},
    {.name = "--shape", .arg = "S", .kind = K_CHOICE, .cmds = CLI_IN(CLI_BENCH_DIST),
     .choices = "cartpole|mujoco", .to = {AT(shape)}, .def = "mujoco", .need = "cartpole or mujoco",
     .help = "cartpole: 4-128-128-2, mujoco: 17-256-256-6"},
    {.name = "--batch", .arg = "B", .kind = K_I64, .cmds = CLI_IN(CLI_BENCH_DIST), .lo = 1, .hi = 1 << 20,
     .to = {AT(batch)}, .def = "256", .need = "a batch per GPU in 1..1048576",
     .help = "transitions per GPU per update"},
    {.name = "--updates", .arg = "N", .kind = K_I64, .cmds = CLI_IN(CLI_BENCH_DIST), .lo = 1, .hi = 1 << 20,
     .to = {AT(updates)}, .def = "200", .need = "a number of updates in 1..1048576",
     .help = "updates per repetition"},
    {.name = "--reps", .arg = "R", .kind = K_I64, .cmds = CLI_IN(CLI_BENCH_DIST), .lo = 1, .hi = 1000,
     .to = {AT(reps)}, .def = "9", .need = "a number of repetitions in 1..1000",
     .help = "repetitions; the median is reported"},
    /* ---- demo ---- */
    {.name = "--capacity", .arg = "N", .kind = K_I64, .cmds = CLI_IN(CLI_DEMO), .lo = 1,
     .hi = (int64_t)1 << 40, .to = {AT(capacity)}, .def = "100000",
     .need = "a positive whole number up to 2^40",
     .help = "transitions the buffer holds"},
    {.name = "--batch", .arg = "B", .kind = K_I64, .cmds = CLI_IN(CLI_DEMO), .lo = 1, .hi = 1 << 24,
     .to = {AT(batch)}, .def = "256", .need = "a positive whole number up to 2^24",
     .help = "transitions gathered"},
};
/* clang-format on */
enum { N_ROWS = sizeof rows / sizeof rows[0] };
_Static_assert(N_ROWS <= CLI_MAX_ROWS, "cli_settings.given has a bit a row");

/* ---- the subcommands ---- */

typedef struct cli_cmd_text {
  const char *name, *usage, *about, *footer;
} cli_cmd_text;

static const cli_cmd_text cmds[CLI_N_CMDS] = {
    [CLI_TRAIN] =
        {"train",
         "usage: agrl train [--algo dqn|sac|td3] [--env NAME] [--device auto|cpu|cuda[:N]|vulkan[:N]] "
         "[--steps N]\n                  [--seed S] [--out DIR] [options]\n",
         "Trains an agent; the replay table and the update live on the device.",
         "Counts of steps (--steps, --learning-starts, --train-freq, --target-update) are at most "
         "100000000000; --gradient-steps at most 16777216. Interrupted (Ctrl-C, SIGTERM), a run "
         "stops after the step in progress, writes a checkpoint and its files, and exits with 130 "
         "(SIGINT) or 143 (SIGTERM); --resume DIR continues it, writing the logs an uninterrupted "
         "run would have written."},
    [CLI_EVAL] = {"eval",
                  "usage: agrl eval --model FILE [--env NAME] [--episodes N] [--seed S] [--device D]\n",
                  "Runs greedy episodes of a Q-network saved by `agrl train` (DIR/q_network.agrl), or "
                  "deterministic episodes of a SAC or TD3 policy (DIR/policy.agrl), and prints each return "
                  "and the mean.",
                  NULL},
    [CLI_BENCH] =
        {"bench",
         "usage: agrl bench [--device auto|cpu|cuda[:N]|vulkan[:N]] [--filter TEXT] [--iters N] "
         "[--json FILE]\n",
         "Times the work of the performance table on one device: gathers, sampling, writes, table "
         "inserts and the DQN update (the DQN's own fused update, and the same work composed of "
         "ops, recorded and eager). Each row is the median of 9 repetitions after 2 warm-ups, with "
         "min and max. bench/compare.py runs this and the peers (PyTorch, JAX, numpy, cpprb) in one "
         "invocation and prints the ratios.",
         NULL},
    [CLI_BENCH_DIST] =
        {"bench-dist",
         "usage: agrl bench-dist [--gpus G] [--shape cartpole|mujoco] [--batch B] [--updates N] "
         "[--reps R]\n",
         "Times the data-parallel DQN update (sample + gather + update with gradients "
         "all-reduced through NCCL), recorded and replayed, on GPUs 0..G-1.",
         NULL},
    [CLI_DEMO] =
        {"demo", "usage: agrl demo [--device auto|cpu|cuda[:N]|vulkan[:N]] [--capacity N] [--batch B]\n",
         "Fills a CartPole-shaped replay buffer (11 f32 rows a transition) as a ring, gathers a "
         "random batch on the device, checks it against a host copy and prints what crossed the bus.",
         NULL},
};

const char *cli_cmd_name(cli_cmd cmd) { return cmds[cmd].name; }

const char *cli_algo_name(int algo) {
  static const char *const names[CLI_N_ALGOS] = {"dqn", "sac", "td3"};
  return algo >= 0 && algo < CLI_N_ALGOS ? names[algo] : "?";
}

static void usage_train(FILE *f) { cli_opts_help(f, CLI_TRAIN); }
static void usage_eval(FILE *f) { cli_opts_help(f, CLI_EVAL); }
static void usage_bench(FILE *f) { cli_opts_help(f, CLI_BENCH); }
static void usage_bench_dist(FILE *f) { cli_opts_help(f, CLI_BENCH_DIST); }
static void usage_demo(FILE *f) { cli_opts_help(f, CLI_DEMO); }

void (*cli_opts_usage(cli_cmd cmd))(FILE *) {
  static void (*const fns[CLI_N_CMDS])(FILE *) = {usage_train, usage_eval, usage_bench, usage_bench_dist,
                                                  usage_demo};
  return fns[cmd];
}

/* ---- values ---- */

static void *at(cli_settings *s, uint16_t off) { return (char *)s + off; }
static const void *cat(const cli_settings *s, uint16_t off) { return (const char *)s + off; }

static int has_cmd(const cli_opt *o, cli_cmd cmd) { return (o->cmds & CLI_IN(cmd)) != 0; }

/* The row of NAME (or its alias) for cmd, or NULL. */
static const cli_opt *find(cli_cmd cmd, const char *name) {
  for (int i = 0; i < N_ROWS; i++)
    if (has_cmd(&rows[i], cmd) &&
        (!strcmp(rows[i].name, name) || (rows[i].alias && !strcmp(rows[i].alias, name))))
      return &rows[i];
  return NULL;
}

/* The index of word in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *word) {
  size_t n = strlen(word);
  int k = 0;
  for (const char *p = choices;; k++) {
    const char *end = strchr(p, '|');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && !strncmp(p, word, n)) return k;
    if (!end) return -1;
    p = end + 1;
  }
}

/* "N,N,...": 1 to AG_DQN_MAX_HIDDEN sizes in [lo, hi], decimal digits only;
 * an empty size (a leading, doubled or trailing comma) is an error. */
static int parse_sizes(const char *s, int64_t lo, int64_t hi, int *count, int64_t *sizes) {
  int64_t h[AG_DQN_MAX_HIDDEN];
  int n = 0;
  for (const char *p = s;; p++) {
    const char *q = p;
    int64_t v = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
      if (v > hi) return -1; /* stops before the number could overflow */
      v = v * 10 + (*q - '0');
    }
    if (q == p || v < lo || v > hi || n == AG_DQN_MAX_HIDDEN) return -1;
    h[n++] = v;
    if (!*q) break;
    if (*q != ',') return -1;
    p = q;
  }
  memcpy(sizes, h, (size_t)n * sizeof *h);
  *count = n;
  return 0;
}

/* A decimal number in 1..65535 (lo 0: 0..65535) at *p, which moves past it; -1 when there is none. */
static int64_t conv_number(const char **p, int64_t lo) {
  int64_t v = 0;
  const char *q = *p;
  for (; *q >= '0' && *q <= '9'; q++) {
    v = v * 10 + (*q - '0');
    if (v > 65535) return -1;
  }
  if (q == *p || v < lo) return -1;
  *p = q;
  return v;
}

/* "none", or "KxN[sS][pP],...": 1 to AG_MAX_CONV convolutions of K filters
 * (1..65535) of NxN taps, stride S (1) and padding P (0), each 1..65535
 * (P 0..65535); anything else is an error. */
static int parse_conv(const char *s, int *count, ag_conv_layer *conv) {
  if (!strcmp(s, "none")) {
    *count = 0;
    return 0;
  }
  ag_conv_layer c[AG_MAX_CONV];
  int n = 0;
  for (const char *p = s;;) {
    if (n == AG_MAX_CONV) return -1;
    ag_conv_layer l = {0, 0, 1, 0};
    if ((l.channels = conv_number(&p, 1)) < 0 || *p++ != 'x' || (l.kernel = conv_number(&p, 1)) < 0)
      return -1;
    if (*p == 's' && (p++, (l.stride = conv_number(&p, 1)) < 0)) return -1;
    if (*p == 'p' && (p++, (l.pad = conv_number(&p, 0)) < 0)) return -1;
    c[n++] = l;
    if (!*p) break;
    if (*p++ != ',') return -1;
  }
  memcpy(conv, c, (size_t)n * sizeof *c);
  *count = n;
  return 0;
}

/* Reads v (NULL: none given) into the row's place in s; -1 when it is not a
 * value of the row (s unchanged). */
static int set_value(const cli_opt *o, const char *v, cli_settings *s) {
  int64_t i;
  double d;
  if (o->kind == K_FLAG) {
    *(int *)at(s, o->to[0]) = o->set;
    return 0;
  }
  if (!v) return -1;
  switch (o->kind) {
    case K_I64:
      if (cli_parse_i64(v, o->lo, o->hi, &i)) return -1;
      *(int64_t *)at(s, o->to[0]) = i;
      return 0;
    case K_INT:
      if (cli_parse_i64(v, o->lo, o->hi, &i)) return -1;
      *(int *)at(s, o->to[0]) = (int)i;
      return 0;
    case K_F32:
      if (cli_parse_f64(v, o->flo, o->fhi, &d)) return -1;
      *(float *)at(s, o->to[0]) = (float)d;
      return 0;
    case K_F64:
      if ((o->flags & F_NONE) && !strcmp(v, "none"))
        d = INFINITY;
      else if (cli_parse_f64(v, o->flo, o->fhi, &d))
        return -1;
      *(double *)at(s, o->to[0]) = d;
      return 0;
    case K_TEXT:
      if (!*v) return -1;
      *(const char **)at(s, o->to[0]) = v;
      return 0;
    case K_CHOICE: {
      int k = choice_index(o->choices, v);
      if (k < 0) return -1;
      *(int *)at(s, o->to[0]) = k;
      return 0;
    }
    case K_DEVICE: {
      cli_device *dev = at(s, o->to[0]);
      return cli_parse_device(v, &dev->kind, &dev->index);
    }
    case K_SIZES: return parse_sizes(v, o->lo, o->hi, (int *)at(s, o->to[0]), (int64_t *)at(s, o->to[1]));
    case K_CONV: return parse_conv(v, (int *)at(s, o->to[0]), (ag_conv_layer *)at(s, o->to[1]));
    default: return -1;
  }
}

/* The shortest "%.Ng" of a float (or double) that reads back as the same
 * bits through the row's own parse; "%a" when none does. */
static void real_text(const cli_opt *o, double x, int is_f32, char *buf, size_t size) {
  for (int digits = 6; digits <= 17; digits++) { /* %g's own, or more when it does not read back */
    snprintf(buf, size, "%.*g", digits, x);
    double y;
    if (cli_parse_f64(buf, o->flo, o->fhi, &y)) continue;
    if (is_f32 ? (float)y == (float)x : y == x) return;
  }
  snprintf(buf, size, "%a", x);
}

/* The value at the row's place (offsets to) as text. */
static void value_text(const cli_opt *o, const cli_settings *s, const uint16_t to[2], char *buf,
                       size_t size) {
  buf[0] = '\0';
  switch (o->kind) {
    case K_I64: snprintf(buf, size, "%lld", (long long)*(const int64_t *)cat(s, to[0])); break;
    case K_INT: snprintf(buf, size, "%d", *(const int *)cat(s, to[0])); break;
    case K_F32: real_text(o, *(const float *)cat(s, to[0]), 1, buf, size); break;
    case K_F64: {
      double x = *(const double *)cat(s, to[0]);
      if (isinf(x) && (o->flags & F_NONE))
        snprintf(buf, size, "none");
      else
        real_text(o, x, 0, buf, size);
      break;
    }
    case K_TEXT: {
      const char *t = *(const char *const *)cat(s, to[0]);
      snprintf(buf, size, "%s", t ? t : "");
      break;
    }
    case K_CHOICE: {
      const char *p = o->choices;
      for (int k = *(const int *)cat(s, to[0]); k > 0 && p; k--) p = strchr(p, '|'), p = p ? p + 1 : p;
      size_t len = p ? strcspn(p, "|") : 0;
      snprintf(buf, size, "%.*s", (int)len, p ? p : "");
      break;
    }
    case K_FLAG: snprintf(buf, size, "true"); break;
    case K_DEVICE: {
      const cli_device *d = cat(s, to[0]);
      if (d->kind == AG_DEVICE_AUTO || d->kind == AG_DEVICE_CPU)
        snprintf(buf, size, "%s", d->kind == AG_DEVICE_AUTO ? "auto" : "cpu");
      else
        snprintf(buf, size, "%s:%d", d->kind == AG_DEVICE_CUDA ? "cuda" : "vulkan", d->index);
      break;
    }
    case K_CONV: {
      int n = *(const int *)cat(s, to[0]);
      const ag_conv_layer *c = cat(s, to[1]);
      size_t o2 = 0;
      if (!n) snprintf(buf, size, "none");
      for (int k = 0; k < n && o2 < size; k++)
        o2 += (size_t)snprintf(buf + o2, size - o2, "%s%lldx%llds%lldp%lld", k ? "," : "",
                               (long long)c[k].channels, (long long)c[k].kernel, (long long)c[k].stride,
                               (long long)c[k].pad);
      break;
    }
    case K_SIZES: {
      int n = *(const int *)cat(s, to[0]);
      const int64_t *h = cat(s, to[1]);
      size_t o2 = 0;
      for (int k = 0; k < n && o2 < size; k++)
        o2 += (size_t)snprintf(buf + o2, size - o2, "%s%lld", k ? "," : "", (long long)h[k]);
      break;
    }
    default: break;
  }
}

const char *cli_opts_row(int i, cli_cmd cmd, int *takes) {
  if (i < 0 || i >= N_ROWS) return NULL;
  *takes = has_cmd(&rows[i], cmd);
  return rows[i].name;
}

int cli_opts_is_flag(cli_cmd cmd, const char *name) {
  char flag[64];
  snprintf(flag, sizeof flag, "--%s", name);
  const cli_opt *o = find(cmd, flag);
  return o && o->kind == K_FLAG;
}

int cli_opts_beside_resume(const char *arg, int *takes_value) {
  const cli_opt *o = find(CLI_TRAIN, arg);
  if (!o || !(o->flags & F_RESUMABLE)) return 0;
  *takes_value = o->kind != K_FLAG;
  return 1;
}

/* ---- given ---- */

static int row_index(const cli_opt *o) { return (int)(o - rows); }
static int given(const cli_settings *s, int i) { return (s->given[i / 8] >> (i % 8)) & 1; }

/* Marks row o given; a row writing the same place (--double, --no-double)
 * is no longer: the last given decides. */
static void mark(cli_settings *s, const cli_opt *o) {
  for (int i = 0; i < N_ROWS; i++)
    if (rows[i].to[0] == o->to[0] && (rows[i].cmds & o->cmds)) s->given[i / 8] &= (uint8_t) ~(1u << (i % 8));
  int i = row_index(o);
  s->given[i / 8] |= (uint8_t)(1u << (i % 8));
}

int cli_opts_given(const cli_settings *s, const char *name) {
  const cli_opt *o = find(s->cmd, name);
  return o && given(s, row_index(o));
}

void cli_opts_mark(cli_settings *s, const char *name) {
  const cli_opt *o = find(s->cmd, name);
  if (o) mark(s, o);
}

/* ---- defaults, parsing ---- */

/* The defaults of cmd (train: of algo). */
static void defaults(cli_cmd cmd, int algo, cli_settings *s) {
  memset(s, 0, sizeof *s);
  s->cmd = cmd;
  s->dqn = ag_dqn_defaults();
  s->ac = ag_ac_defaults(algo == CLI_TD3 ? AG_AC_TD3 : AG_AC_SAC);
  for (int i = 0; i < N_ROWS; i++) {
    cli_opt o = rows[i]; /* a default may lie outside what may be given (--rank -1: none) */
    o.lo = INT64_MIN, o.hi = INT64_MAX, o.flo = -HUGE_VAL, o.fhi = HUGE_VAL;
    const char *def = algo != CLI_DQN && o.def_ac ? o.def_ac : o.def;
    if (has_cmd(&o, cmd) && def && set_value(&o, def, s)) abort(); /* a default that does not read */
  }
  if (cmd == CLI_TRAIN) s->algo = algo; /* the algo the flags give, wherever --algo is among them */
}

/* train: the algo of the last --algo with a value it takes (dqn without one) */
static int find_algo(cli_cmd cmd, int argc, char **argv) {
  const cli_opt *o = find(cmd, "--algo");
  int algo = CLI_DQN;
  for (int i = 1; o && i + 1 < argc; i++)
    if (!strcmp(argv[i], o->name) && choice_index(o->choices, argv[i + 1]) >= 0)
      algo = choice_index(o->choices, argv[i + 1]);
  return algo;
}

/* After the flags: the values sac and td3 share with the DQN copied into
 * their configuration (the table's `ac`); an option of another algorithm
 * (first, the first given) refused. Returns 0 or 2 (after the message). */
static int finish(cli_settings *s, const cli_opt *other_algo) {
  if (s->cmd != CLI_TRAIN) return 0;
  const char *cmd = cmds[s->cmd].name;
  void (*usage)(FILE *) = cli_opts_usage(s->cmd);
  if (other_algo && s->algo != CLI_DQN)
    return cli_bad_usage(cmd, usage, "%s is a DQN option, not one of %s", other_algo->name,
                         cli_algo_name(s->algo));
  if (other_algo)
    return cli_bad_usage(cmd, usage, "%s is an option of sac and td3, not of dqn", other_algo->name);
  if (s->algo == CLI_DQN) return 0;
  for (int i = 0; i < N_ROWS; i++) {
    const cli_opt *o = &rows[i];
    if (!o->ac[0] || !given(s, i)) continue;
    if (o->kind == K_SIZES) {
      *(int *)at(s, o->ac[0]) = *(const int *)cat(s, o->to[0]);
      memcpy(at(s, o->ac[1]), cat(s, o->to[1]), sizeof s->ac.hidden);
      continue;
    }
    size_t n = o->kind == K_F32 ? sizeof(float) : o->kind == K_INT ? sizeof(int) : sizeof(int64_t);
    for (int k = 0; k < 2 && o->ac[k]; k++) memcpy(at(s, o->ac[k]), cat(s, o->to[0]), n);
  }
  return 0;
}

static int takes_algo(const cli_opt *o, const cli_settings *s) {
  return s->cmd != CLI_TRAIN || (o->algos & (1u << s->algo));
}

int cli_opts_parse(cli_cmd cmd, int argc, char **argv, cli_settings *s) {
  const char *name = cmds[cmd].name;
  void (*usage)(FILE *) = cli_opts_usage(cmd);
  defaults(cmd, find_algo(cmd, argc, argv), s);
  const cli_opt *other_algo = NULL; /* the first option given of another algorithm */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = cli_value(argc, argv, i);
    const cli_opt *o = find(cmd, a);
    if (!o) return cli_bad_usage(name, usage, "unknown option '%s'", a);
    if (o->kind == K_HELP) {
      usage(stdout);
      return 0;
    }
    if (!takes_algo(o, s) && !other_algo) other_algo = o;
    if ((o->flags & F_ONCE) && given(s, row_index(o)))
      return cli_bad_usage(name, usage, "%s is given twice", a);
    if (set_value(o, v, s)) return cli_bad_usage(name, usage, "%s needs %s", a, o->need);
    if (o->kind != K_FLAG) i++;
    mark(s, o);
  }
  for (int i = 0; i < N_ROWS; i++)
    if (has_cmd(&rows[i], cmd) && (rows[i].flags & F_REQUIRED) && !given(s, i))
      return cli_bad_usage(name, usage, "%s %s is required", rows[i].name, rows[i].arg);
  int rc = finish(s, other_algo);
  return rc ? rc : -1;
}

/* ---- pairs ---- */

int cli_opts_pairs(const cli_settings *s, cli_pair_fn fn, void *user) {
  char buf[512];
  for (int i = 0; i < N_ROWS; i++) {
    const cli_opt *o = &rows[i];
    if (!has_cmd(o, s->cmd) || !given(s, i) || (o->flags & F_NOSAVE)) continue;
    value_text(o, s, o->to, buf, sizeof buf);
    int rc = fn(o->name + 2, buf, user);
    if (rc) return rc;
  }
  return 0;
}

void cli_opts_value_text(const cli_settings *s, const char *name, char *buf, size_t size) {
  const cli_opt *o = find(s->cmd, name);
  if (o)
    value_text(o, s, o->to, buf, size);
  else if (size)
    buf[0] = '\0';
}

int cli_opts_read_pairs(cli_cmd cmd, int n, const char *const *names, const char *const *values,
                        cli_settings *s) {
  const char *name = cmds[cmd].name;
  void (*usage)(FILE *) = cli_opts_usage(cmd);
  const cli_opt *algo_row = find(cmd, "--algo");
  int algo = CLI_DQN;
  for (int k = 0; algo_row && k < n; k++)
    if (!strcmp(names[k], "algo") && choice_index(algo_row->choices, values[k]) >= 0)
      algo = choice_index(algo_row->choices, values[k]);
  defaults(cmd, algo, s);
  const cli_opt *other_algo = NULL;
  for (int k = 0; k < n; k++) {
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", names[k]);
    const cli_opt *o = find(cmd, flag);
    if (!o || o->kind == K_HELP) return cli_bad_usage(name, usage, "unknown option '%s'", flag);
    if (!takes_algo(o, s) && !other_algo) other_algo = o;
    if ((o->kind == K_FLAG && strcmp(values[k], "true")) || set_value(o, values[k], s))
      return cli_bad_usage(name, usage, "%s needs %s", flag, o->kind == K_FLAG ? "the value true" : o->need);
    mark(s, o);
  }
  return finish(s, other_algo);
}

/* ---- --help ---- */

enum { HELP_COL = 24, HELP_WIDTH = 100 };

/* Prints text's words from column *col on, lines broken before HELP_WIDTH
 * and continued at column indent. */
static void wrap(FILE *f, int *col, int indent, const char *text) {
  for (const char *p = text; *p;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (!n) break;
    if (*col > indent && *col + 1 + (int)n > HELP_WIDTH) {
      fprintf(f, "\n%*s", indent, "");
      *col = indent;
    } else if (*col > indent) {
      fputc(' ', f);
      (*col)++;
    }
    fwrite(p, 1, n, f);
    *col += (int)n;
    p += n;
  }
}

/* The section of a row in train's --help: 0 the run, 1 all three
 * algorithms' agent, 2 the DQN's, 3 sac's and td3's, 4 the launcher's. */
static int section(const cli_opt *o) {
  if (o->flags & F_INTERNAL) return 4;
  int agent = o->to[0] >= AT(dqn) && o->to[0] < AT(ac) + sizeof(ag_ac_config);
  if (!agent) return 0;
  return o->algos == ALGOS ? 1 : o->algos == DQN ? 2 : 3;
}

/* The row's default as --help writes it, in buf ("" for none). */
static void default_text(const cli_opt *o, cli_cmd cmd, char *buf, size_t size) {
  buf[0] = '\0';
  if (o->defhelp) {
    snprintf(buf, size, "%s", o->defhelp);
    return;
  }
  if (o->kind == K_FLAG || o->kind == K_HELP || (o->kind == K_TEXT && !o->def)) return;
  cli_settings d[CLI_N_ALGOS];
  char v[CLI_N_ALGOS][64];
  for (int a = 0; a < CLI_N_ALGOS; a++) defaults(cmd, a, &d[a]);
  if (cmd != CLI_TRAIN || (o->algos & DQN)) value_text(o, &d[CLI_DQN], o->to, v[CLI_DQN], sizeof v[0]);
  if (cmd == CLI_TRAIN && (o->algos & AC)) {
    const uint16_t *to = o->ac[0] ? o->ac : o->to; /* where sac and td3 keep it */
    value_text(o, &d[CLI_SAC], to, v[CLI_SAC], sizeof v[0]);
    value_text(o, &d[CLI_TD3], to, v[CLI_TD3], sizeof v[0]);
  }
  if (cmd != CLI_TRAIN || o->algos == DQN || (o->def && !o->def_ac))
    snprintf(buf, size, "%s", v[CLI_DQN]);
  else if (o->def_ac && !strcmp(v[CLI_SAC], v[CLI_TD3]))
    snprintf(buf, size, "%s; %s for sac and td3", v[CLI_DQN], v[CLI_SAC]);
  else if (o->algos == AC && !strcmp(v[CLI_SAC], v[CLI_TD3]))
    snprintf(buf, size, "%s", v[CLI_SAC]);
  else if (o->algos == AC)
    snprintf(buf, size, "sac %s, td3 %s", v[CLI_SAC], v[CLI_TD3]);
  else if (!strcmp(v[CLI_SAC], v[CLI_TD3]) && !strcmp(v[CLI_DQN], v[CLI_SAC]))
    snprintf(buf, size, "%s", v[CLI_DQN]);
  else if (!strcmp(v[CLI_SAC], v[CLI_TD3]))
    snprintf(buf, size, "%s; sac and td3 %s", v[CLI_DQN], v[CLI_SAC]);
  else
    snprintf(buf, size, "%s; sac %s, td3 %s", v[CLI_DQN], v[CLI_SAC], v[CLI_TD3]);
}

static void help_row(FILE *f, const cli_opt *o, cli_cmd cmd) {
  int col = fprintf(f, "  %s%s%s%s%s", o->name, o->alias ? ", " : "", o->alias ? o->alias : "",
                    o->arg ? " " : "", o->arg ? o->arg : "");
  if (col < HELP_COL) {
    fprintf(f, "%*s", HELP_COL - col, "");
    col = HELP_COL;
  }
  wrap(f, &col, HELP_COL, o->help);
  char def[256], part[288];
  default_text(o, cmd, def, sizeof def);
  if (def[0]) {
    snprintf(part, sizeof part, "[default %s]", def);
    wrap(f, &col, HELP_COL, part);
  }
  fputc('\n', f);
}

void cli_opts_help(FILE *f, cli_cmd cmd) {
  static const char *const titles[5] = {
      NULL,
      "The agent, all three algorithms (for sac and td3 --lr sets both learning rates):", "DQN options:",
      "SAC and TD3 options:", "Set by the launcher of one process per GPU (not given by hand):"};
  const cli_cmd_text *c = &cmds[cmd];
  int col = 0;
  fputs(c->usage, f);
  fputc('\n', f);
  wrap(f, &col, 0, c->about);
  fputs("\n\n", f);
  for (int sec = 0; sec < 5; sec++) {
    int printed = 0;
    for (int i = 0; i < N_ROWS; i++) {
      if (!has_cmd(&rows[i], cmd) || section(&rows[i]) != sec) continue;
      if (!printed++ && titles[sec]) fprintf(f, "\n%s\n", titles[sec]);
      help_row(f, &rows[i], cmd);
    }
  }
  if (c->footer) {
    fputc('\n', f);
    col = 0;
    wrap(f, &col, 0, c->footer);
    fputc('\n', f);
  }
}
