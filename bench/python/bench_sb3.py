"""Stable-Baselines3's DQN on CartPole-v1 and SAC on Pendulum-v1, each with
SB3's own ReplayBuffer and with agrl.sb3.ReplayBuffer, on the same seeds, in
one invocation: final mean return, environment steps per second, and
agrl's ratios over SB3.

usage: python3 bench/python/bench_sb3.py [--device cpu|cuda] [--steps N] [--seeds 0,1,2]
           [--algos dqn,sac] [--eval-episodes 10] [--no-micro] [--threads N] [--json FILE]

The hyper-parameters are RL Zoo's (hyperparams/dqn.yml CartPole-v1,
sac.yml Pendulum-v1; SB3's defaults for the rest); --steps replaces both
n_timesteps (50,000 and 20,000). The two runs of a seed differ only in
replay_buffer_class: SB3 seeds numpy, torch and the environment alike for
both; agrl's buffer draws its batches from its own stream (seeded from
numpy's), so the two runs see different batches and their returns differ
as two seeds' do.

Each run is timed over model.learn(steps) (acting, stepping, storing,
training; the device synchronised at the end), then evaluated with SB3's
evaluate_policy (deterministic actions, --eval-episodes episodes on a fresh
environment). Runs are interleaved (seed 0 sb3, seed 0 agrl, seed 1 sb3,
...), after an untimed 200-step run of each buffer for each algorithm (so
that the first timed run does not pay for torch's start-up).

Unless --no-micro, the buffers alone are timed first, on each algorithm's
spaces: add() of one step, and sample(B) of the algorithm's batch size,
from buffers of 100,000 transitions holding 20,000 (the median of 7
repetitions of a call repeated back to back; the device synchronised at the
end of each repetition).
"""
import argparse
import json
import os
import statistics
import sys
import time
import warnings

import numpy as np

# RL Zoo's hyper-parameters (n_timesteps apart)
ALGOS = {
    "dqn": {
        "env": "CartPole-v1",
        "n_timesteps": 50_000,
        "hp": dict(learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
                   target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
                   exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256])),
    },
    "sac": {
        "env": "Pendulum-v1",
        "n_timesteps": 20_000,
        "hp": dict(learning_rate=1e-3),
    },
}
BUFFERS = ("sb3", "agrl")


def _sync(torch, dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def _buffer_class(name):
    if name == "agrl":
        import agrl.sb3

        return agrl.sb3.ReplayBuffer
    from stable_baselines3.common.buffers import ReplayBuffer

    return ReplayBuffer


def train(torch, algo, buffer, seed, steps, dev, n_eval):
    import gymnasium as gym
    from stable_baselines3 import DQN, SAC
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    spec = ALGOS[algo]
    cls = {"dqn": DQN, "sac": SAC}[algo]
    model = cls("MlpPolicy", spec["env"], seed=seed, device=dev, verbose=0,
                replay_buffer_class=_buffer_class(buffer), **spec["hp"])
    _sync(torch, dev)
    t0 = time.perf_counter()
    model.learn(steps)
    _sync(torch, dev)
    seconds = time.perf_counter() - t0
    eval_env = Monitor(gym.make(spec["env"]))
    eval_env.reset(seed=10_000 + seed)
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=n_eval, deterministic=True)
    eval_env.close()
    rb = model.replay_buffer
    return {
        "algo": algo, "env": spec["env"], "buffer": buffer,
        "buffer_class": f"{type(rb).__module__}.{type(rb).__name__}",
        "seed": seed, "steps": steps, "seconds": round(seconds, 3), "steps_per_s": round(steps / seconds, 1),
        "updates": int(model._n_updates), "final_mean_return": round(float(mean), 2),
        "final_std_return": round(float(std), 2), "eval_episodes": n_eval,
    }


def warm_up(torch, algo, dev):
    """An untimed short run of each buffer (imports, torch's first kernels,
    the allocator), so that the first timed run does not pay for them."""
    from stable_baselines3 import DQN, SAC

    spec = ALGOS[algo]
    cls = {"dqn": DQN, "sac": SAC}[algo]
    hp = dict(spec["hp"], learning_starts=50, buffer_size=1000)
    if algo == "dqn":
        hp.update(train_freq=16, gradient_steps=4)
    for buffer in BUFFERS:
        model = cls("MlpPolicy", spec["env"], seed=0, device=dev, verbose=0,
                    replay_buffer_class=_buffer_class(buffer), **hp)
        model.learn(200)
    _sync(torch, dev)


def _fill(buf, obs_space, act_space, steps, rng):
    for _ in range(steps):
        buf.add(*_step(obs_space, act_space, rng))


def _step(obs_space, act_space, rng):
    from gymnasium import spaces

    obs = rng.standard_normal((1, *obs_space.shape)).astype(obs_space.dtype)
    if isinstance(act_space, spaces.Discrete):
        act = rng.integers(0, act_space.n, size=1)
    else:
        act = rng.uniform(-1, 1, (1, *act_space.shape)).astype(np.float32)
    return obs, obs + 1, act, rng.standard_normal(1).astype(np.float32), rng.random(1) < 0.05, [{}]


def _per_call(torch, dev, fn, calls, reps=7):
    fn()
    times = []
    for _ in range(reps):
        _sync(torch, dev)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync(torch, dev)
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def micro(torch, algo, dev):
    """add() of one step and sample(B) of each buffer on the algorithm's spaces."""
    import gymnasium as gym

    spec = ALGOS[algo]
    env = gym.make(spec["env"])
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    B = spec["hp"].get("batch_size", 256)
    rows = []
    for name in BUFFERS:
        rng = np.random.default_rng(0)
        buf = _buffer_class(name)(100_000, obs_space, act_space, device=dev)
        _fill(buf, obs_space, act_space, 20_000, rng)
        one = _step(obs_space, act_space, rng)
        add_us = _per_call(torch, dev, lambda: buf.add(*one), 2000)
        sample_us = _per_call(torch, dev, lambda: buf.sample(B), 200)
        rows.append({"algo": algo, "buffer": name, "add_us": round(add_us, 2), "sample_us": round(sample_us, 2),
                     "batch_size": B})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="cuda when torch sees a GPU, else cpu")
    ap.add_argument("--steps", type=int, default=None,
                    help="environment steps a run, for every algorithm (default: RL Zoo's n_timesteps, "
                         "50,000 for DQN and 20,000 for SAC)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (0,1,2)")
    ap.add_argument("--algos", default="dqn,sac", help="comma-separated, of: dqn, sac")
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--no-micro", action="store_true", help="skip the add()/sample() timings")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads(N) (default: torch's choice; on a busy machine of few cores, "
                         "1 avoids threads that wait on each other)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        ap.error("--seeds takes comma-separated integers")
    if any(a not in ALGOS for a in algos) or not algos or not seeds:
        ap.error("--algos: of dqn, sac; --seeds: at least one")
    if (args.steps is not None and args.steps < 1) or args.eval_episodes < 1:
        ap.error("--steps and --eval-episodes must be at least 1")
    try:
        import torch
        import stable_baselines3
        import gymnasium
        import agrl
        import agrl.sb3  # noqa: F401
    except ImportError as e:
        print(f"bench_sb3: {e}; it needs torch, stable_baselines3, gymnasium and agrl", file=sys.stderr)
        return 2
    dev = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dev == "cuda" and not torch.cuda.is_available():
        print("bench_sb3: torch sees no CUDA device", file=sys.stderr)
        return 2
    if args.threads is not None:
        if args.threads < 1:
            ap.error("--threads must be at least 1")
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", module="stable_baselines3")
    versions = {"torch": torch.__version__, "stable_baselines3": stable_baselines3.__version__,
                "gymnasium": gymnasium.__version__, "agrl": agrl.__version__, "numpy": np.__version__}
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items())
          + f"; device {dev}; torch threads {torch.get_num_threads()}", flush=True)

    micro_rows = []
    if not args.no_micro:
        for algo in algos:
            micro_rows += micro(torch, algo, dev)
        print(f"\nthe buffers alone on {dev} (us a call; 100,000 transitions, 20,000 held)")
        print(f"{'algo':5} {'buffer':6} {'add 1 step':>11} {'sample B':>9} {'B':>4}")
        for r in micro_rows:
            print(f"{r['algo']:5} {r['buffer']:6} {r['add_us']:11.2f} {r['sample_us']:9.2f} {r['batch_size']:4d}")
        for algo in algos:
            s, a = (next(r for r in micro_rows if r["algo"] == algo and r["buffer"] == b) for b in BUFFERS)
            print(f"{algo}: agrl/sb3 time a call: add {a['add_us'] / s['add_us']:.2f}, "
                  f"sample {a['sample_us'] / s['sample_us']:.2f}")

    runs = []
    for algo in algos:
        steps = args.steps or ALGOS[algo]["n_timesteps"]
        warm_up(torch, algo, dev)
        for seed in seeds:
            for buffer in BUFFERS:
                print(f"[{algo} {ALGOS[algo]['env']} seed {seed} {buffer}] {steps} steps on {dev}", flush=True)
                r = train(torch, algo, buffer, seed, steps, dev, args.eval_episodes)
                runs.append(r)
                print(f"  {r['steps_per_s']:.0f} steps/s ({r['seconds']:.1f} s, {r['updates']} updates), "
                      f"final mean return {r['final_mean_return']:.1f} +- {r['final_std_return']:.1f}", flush=True)

    print(f"\nSB3 training with each replay buffer on {dev} (RL Zoo hyper-parameters; "
          f"return: evaluate_policy, {args.eval_episodes} episodes)")
    print(f"{'algo':5} {'seed':>4} {'buffer':6} {'steps':>7} {'steps/s':>9} {'return':>9} "
          f"{'agrl/sb3 speed':>15} {'agrl-sb3 return':>16}")
    ratios = []
    for algo in algos:
        for seed in seeds:
            pair = {r["buffer"]: r for r in runs if r["algo"] == algo and r["seed"] == seed}
            s, a = pair["sb3"], pair["agrl"]
            ratio = {"algo": algo, "seed": seed, "speed": round(a["steps_per_s"] / s["steps_per_s"], 3),
                     "return_diff": round(a["final_mean_return"] - s["final_mean_return"], 2)}
            ratios.append(ratio)
            for r in (s, a):
                extra = (f"{ratio['speed']:14.2f}x {ratio['return_diff']:16.1f}" if r is a else "")
                print(f"{algo:5} {seed:4d} {r['buffer']:6} {r['steps']:7d} {r['steps_per_s']:9.0f} "
                      f"{r['final_mean_return']:9.1f} {extra}")
    summary = []
    for algo in algos:
        row = {"algo": algo}
        for b in BUFFERS:
            rs = [r for r in runs if r["algo"] == algo and r["buffer"] == b]
            row[f"{b}_steps_per_s_mean"] = round(statistics.mean(r["steps_per_s"] for r in rs), 1)
            row[f"{b}_return_mean"] = round(statistics.mean(r["final_mean_return"] for r in rs), 2)
        row["speed_ratio_mean"] = round(statistics.mean(x["speed"] for x in ratios if x["algo"] == algo), 3)
        row["speed_ratio_of_means"] = round(row["agrl_steps_per_s_mean"] / row["sb3_steps_per_s_mean"], 3)
        summary.append(row)
        print(f"{algo}: mean over seeds: steps/s sb3 {row['sb3_steps_per_s_mean']:.0f}, "
              f"agrl {row['agrl_steps_per_s_mean']:.0f} (agrl/sb3 {row['speed_ratio_of_means']:.2f}x; "
              f"mean of the seeds' ratios {row['speed_ratio_mean']:.2f}x); "
              f"return sb3 {row['sb3_return_mean']:.1f}, agrl {row['agrl_return_mean']:.1f}")
    if args.json:
        with open(args.json + ".tmp", "w") as fh:
            json.dump({"work": "sb3_train_with_agrl_buffer", "device": dev, "seeds": seeds, "versions": versions,
                       "torch_threads": torch.get_num_threads(),
                       "hyperparameters": {a: dict(ALGOS[a], hp={k: str(v) if isinstance(v, dict) else v
                                                                 for k, v in ALGOS[a]["hp"].items()})
                                           for a in algos},
                       "micro": micro_rows, "runs": runs, "ratios": ratios, "summary": summary}, fh, indent=1)
        os.replace(args.json + ".tmp", args.json)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
