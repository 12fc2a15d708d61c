"""The SAC and TD3 update rows' shared definition (torch_sac.py, jax_sac.py,
bench/python/bench_ac.py): sizes, hyper-parameters, the synthetic Pendulum
table, the initial weights and the fixed draws of the cross-check.

Everything here is agrl's (include/agrl/ac.h, src/agent/ac.c, the defaults
of ag_ac_defaults), in the networks' action space [-1, 1]:

  critics   Q1, Q2: obs + act -> 256 -> 256 -> 1 (ReLU), one Adam over both
  actor     obs -> 256 -> 256 -> 2 act (SAC: means, then raw log stds,
            log std = -5 + 3.5 (tanh(raw) + 1)) or -> act (TD3: tanh(out))
  targets   copies of the critics (and of TD3's actor), Polyak tau = 0.005:
            every update for SAC, on the delayed (actor) update for TD3

The table holds N_FILL random Pendulum-v1 transitions: one row a transition
of ROW f32, obs[0:3] = (cos th, sin th, th_dot), action[3] in [-1, 1]
(the torque / 2), reward[4], next_obs[5:8] (gymnasium's Pendulum step),
terminated[8] = 0 (Pendulum never terminates).

AC_DEFS_DIMS="OBS,ACT" in the environment (e.g. "17,6", a MuJoCo-sized
row such as HalfCheetah's) changes the observation and action sizes; the
table then holds N_FILL uniform random transitions of those sizes (obs and
next_obs in [-1, 1], actions in [LOW, HIGH], rewards in [-1, 0]) instead
of Pendulum's, and every peer and agrl's rows take the same sizes.
"""
import argparse
import math
import os

OBS, ACT = 3, 1
if os.environ.get("AC_DEFS_DIMS"):
    OBS, ACT = (int(v) for v in os.environ["AC_DEFS_DIMS"].split(","))
HIDDEN = (256, 256)
BATCH = 256
N_FILL = 100_000
LOW, HIGH = -2.0, 2.0           # Pendulum-v1's torque bounds
GAMMA = 0.99
TAU = 0.005
ACTOR_LR = 1e-3
CRITIC_LR = 1e-3                # also the temperature's (agrl: critic_lr)
BETAS, ADAM_EPS = (0.9, 0.999), 1e-8
ALPHA0 = 1.0                    # the temperature's start
TARGET_ENTROPY = -float(ACT)
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
LOG_2PI = math.log(2.0 * math.pi)
POLICY_DELAY_TD3 = 2
TARGET_NOISE, NOISE_CLIP = 0.2, 0.5

# row layout of the table
C_OBS = (0, OBS)
C_ACT = (OBS, OBS + ACT)
C_REW = OBS + ACT
C_NOBS = (OBS + ACT + 1, 2 * OBS + ACT + 1)
C_TERM = 2 * OBS + ACT + 1
ROW = 2 * OBS + ACT + 2

FUSED = 100  # updates in one jitted call of jax-scan100
WORK = {"sac": "sac_update_B256", "td3": "td3_update_B256"}
SEED = 0


def pendulum_transitions(np, n=N_FILL, seed=SEED):
    """n random Pendulum-v1 transitions (gymnasium's dynamics and reward):
    th ~ U(-pi, pi), th_dot ~ U(-8, 8), torque ~ U(-2, 2). Returns a dict of
    f32 arrays obs (n, 3), action (n, 1) in the environment's bounds,
    reward (n,), next_obs (n, 3) and terminated (n,) int32 (all 0).
    With other sizes (AC_DEFS_DIMS): uniform random transitions of them."""
    rng = np.random.default_rng(seed)
    if (OBS, ACT) != (3, 1):
        f32 = np.float32
        return dict(obs=rng.uniform(-1.0, 1.0, (n, OBS)).astype(f32),
                    action=rng.uniform(LOW, HIGH, (n, ACT)).astype(f32),
                    reward=rng.uniform(-1.0, 0.0, n).astype(f32),
                    next_obs=rng.uniform(-1.0, 1.0, (n, OBS)).astype(f32),
                    terminated=np.zeros(n, np.int32))
    th = rng.uniform(-np.pi, np.pi, n)
    thdot = rng.uniform(-8.0, 8.0, n)
    u = rng.uniform(LOW, HIGH, n)
    g, m, l, dt = 10.0, 1.0, 1.0, 0.05
    norm = ((th + np.pi) % (2 * np.pi)) - np.pi
    cost = norm ** 2 + 0.1 * thdot ** 2 + 0.001 * u ** 2
    nthdot = np.clip(thdot + (3 * g / (2 * l) * np.sin(th) + 3.0 / (m * l * l) * u) * dt, -8.0, 8.0)
    nth = th + nthdot * dt
    f32 = np.float32
    return dict(obs=np.stack([np.cos(th), np.sin(th), thdot], 1).astype(f32),
                action=u[:, None].astype(f32),
                reward=(-cost).astype(f32),
                next_obs=np.stack([np.cos(nth), np.sin(nth), nthdot], 1).astype(f32),
                terminated=np.zeros(n, np.int32))


def table_rows(np, data):
    """The (n, ROW) f32 table of pendulum_transitions' dict, the actions
    mapped into [-1, 1] as agrl stores them."""
    n = len(data["reward"])
    t = np.empty((n, ROW), np.float32)
    t[:, C_OBS[0]:C_OBS[1]] = data["obs"]
    t[:, C_ACT[0]:C_ACT[1]] = np.clip(2.0 * (data["action"] - LOW) / (HIGH - LOW) - 1.0, -1.0, 1.0)
    t[:, C_REW] = data["reward"]
    t[:, C_NOBS[0]:C_NOBS[1]] = data["next_obs"]
    t[:, C_TERM] = data["terminated"]
    return t


def mlp_sizes(algo):
    """(actor sizes, critic sizes)."""
    out = 2 * ACT if algo == "sac" else ACT
    return (OBS,) + HIDDEN + (out,), (OBS + ACT,) + HIDDEN + (1,)


def init_mlp(np, sizes, rng):
    """[(W (fan_in, fan_out), b (fan_out,)), ...] f32, W and b ~ U(+-1/sqrt(fan_in))
    (the bounds of PyTorch's nn.Linear and of agrl's ag_mlp_create)."""
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        w = rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32)
        b = rng.uniform(-bound, bound, (fan_out,)).astype(np.float32)
        layers.append((w, b))
    return layers


def init_params(np, algo, seed=SEED):
    """The starting weights every peer loads: a dict actor, q1, q2 (the
    targets start as copies) of init_mlp lists."""
    rng = np.random.default_rng(seed + 1000)
    a_sizes, q_sizes = mlp_sizes(algo)
    return dict(actor=init_mlp(np, a_sizes, rng), q1=init_mlp(np, q_sizes, rng),
                q2=init_mlp(np, q_sizes, rng))


# The cross-check: CHECK_UPDATES updates from init_params with these draws
# instead of the frameworks' random streams; the losses they give must agree
# between frameworks (float rounding only).
CHECK_UPDATES = 4


def check_draws(np, n=N_FILL, updates=CHECK_UPDATES, seed=SEED):
    """[(idx (B,) int64, eps_next (B, ACT) f32, eps_pi (B, ACT) f32), ...]:
    the batch, the Gaussian draws of the target's action (SAC's policy
    sample, TD3's smoothing noise) and of SAC's policy sample in the actor
    loss, one triple an update."""
    rng = np.random.default_rng(seed + 2000)
    return [(rng.integers(0, n, BATCH).astype(np.int64),
             rng.standard_normal((BATCH, ACT)).astype(np.float32),
             rng.standard_normal((BATCH, ACT)).astype(np.float32)) for _ in range(updates)]


def is_actor_update(algo, k):
    """Whether update k (1, 2, ...) also steps the actor (agrl: (updates + 1)
    % policy_delay == 0)."""
    return algo == "sac" or k % POLICY_DELAY_TD3 == 0


def peer_args(doc, impls, threads_help, extra=None, argv=None):
    """The update peers' command line: [cpu|cuda] (or --device X), --algos,
    --impls, --iters, --reps, --threads, and what extra(parser) adds.
    Returns the namespace with device a string and algos, impls lists."""
    import peerlib as pl
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("device", nargs="?", choices=("cpu", "cuda"), default=None)
    ap.add_argument("--device", dest="device_opt", choices=("cpu", "cuda"), default=None)
    ap.add_argument("--algos", default=",".join(WORK))
    ap.add_argument("--impls", default=",".join(impls))
    ap.add_argument("--iters", type=int, default=0, help="calls a repetition (default: ~0.2 s a repetition)")
    ap.add_argument("--reps", type=int, default=pl.REPS, help="timed repetitions")
    ap.add_argument("--threads", type=int, default=0, help=threads_help)
    if extra:
        extra(ap)
    a = ap.parse_args(argv)
    a.device = a.device_opt or a.device or "cuda"
    a.algos = [x for x in a.algos.split(",") if x]
    a.impls = [x for x in a.impls.split(",") if x]
    bad = [x for x in a.algos if x not in WORK] + [x for x in a.impls if x not in impls]
    if bad:
        ap.error(f"unknown: {', '.join(bad)}")
    return a
