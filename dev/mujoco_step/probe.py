"""Where the time of one step of SAC.learn goes on Gymnasium's
HalfCheetah-v5: the loop of learn() taken apart, each part timed with
time.perf_counter (act, the MuJoCo step, the conversions of its results,
store, the update), then learn() itself under cProfile for the same steps,
whose total the parts should account for.

usage: PYTHONPATH=BUILD/pyt python3 dev/mujoco_step/probe.py [--steps 3000] [--hidden 256]
           [--device cpu] [--n-envs 1]

The first learning_starts = 1000 steps act at random (no update); the
figures are per step over the steps after them. See README.md.
"""
import argparse
import cProfile
import pstats
import time

import numpy as np

import agrl
from agrl._loop import env_step

import gymnasium as gym


def parts(agent, env, steps, starts):
    """learn()'s single-environment loop, each part timed (seconds per step after learning starts)."""
    t = {k: 0.0 for k in ("act", "env.step", "convert", "store", "train", "reset")}
    obs, _ = env.reset(seed=1)
    obs = np.asarray(obs, np.float32)
    pc = time.perf_counter
    for step in range(steps):
        timed = step >= starts
        t0 = pc()
        action = agent.act_random() if step < starts else agent.act(obs, True)
        t1 = pc()
        nxt, rew, term, trunc, _ = env.step(action)
        t2 = pc()
        nxt, rew, term, trunc = np.asarray(nxt, np.float32), float(np.float32(rew)), bool(term), bool(trunc)
        t3 = pc()
        agent.store(obs, action, rew, nxt, int(term), int(trunc))
        t4 = pc()
        if step >= starts:
            agent.train(1, False)
        t5 = pc()
        if term or trunc:
            nxt = np.asarray(env.reset()[0], np.float32)
        t6 = pc()
        obs = nxt
        if timed:
            for k, a, b in (("act", t0, t1), ("env.step", t1, t2), ("convert", t2, t3), ("store", t3, t4),
                            ("train", t4, t5), ("reset", t5, t6)):
                t[k] += b - a
    n = steps - starts
    return {k: v / n for k, v in t.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--env", default="HalfCheetah-v5")
    args = ap.parse_args()
    starts = 1000
    cfg = dict(hidden=[args.hidden, args.hidden], batch_size=256, learning_starts=starts, buffer_size=100_000,
               seed=1)
    env = gym.make(args.env)
    agent = agrl.SAC.for_env(args.device, env, args.steps, **cfg)
    per = parts(agent, env, args.steps, starts)
    total = sum(per.values())
    print(f"{args.env}, SAC {args.hidden}-{args.hidden}, device {agent.ctx.device}: per step after learning starts")
    for k, v in per.items():
        print(f"  {k:9s} {v * 1e6:9.1f} us  {100 * v / total:5.1f} %")
    print(f"  {'total':9s} {total * 1e6:9.1f} us")
    # the MuJoCo step alone (the raw env, no wrappers) and agrl's own part beside it
    raw = gym.make(args.env).unwrapped
    raw.reset(seed=2)
    a = np.zeros(raw.action_space.shape, np.float32)
    t0 = time.perf_counter()
    for _ in range(2000):
        raw.step(a)
    print(f"  unwrapped env.step alone {(time.perf_counter() - t0) / 2000 * 1e6:.1f} us")
    wrapped = gym.make(args.env)
    wrapped.reset(seed=2)
    t0 = time.perf_counter()
    for k in range(2000):
        if any(wrapped.step(a)[2:4]):
            wrapped.reset()
    print(f"  gym.make's env.step alone (its wrappers) {(time.perf_counter() - t0) / 2000 * 1e6:.1f} us")

    env = gym.make(args.env)
    agent = agrl.SAC.for_env(args.device, env, args.steps, **cfg)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    agent.learn(env)
    prof.disable()
    wall = time.perf_counter() - t0
    print(f"learn(): {args.steps} steps in {wall:.2f} s ({args.steps / wall:.0f} steps/s overall)")
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
