"""agrl's SAC or TD3 learning a Gymnasium MuJoCo task, with deterministic
evaluations, checkpoints and resume.

usage: python3 examples/python/train_mujoco.py --out DIR [--env HalfCheetah-v5] [--algo sac|td3]
           [--steps 1000000] [--seed 1] [--n-envs 1] [--vector sync|async] [--device auto|cpu|cuda]
           [--eval-every 10000] [--eval-episodes 10] [--checkpoint-every 50000] [--resume]

The environment is gymnasium.make(--env) (one copy) or gymnasium.make_vec
(--n-envs copies, --vector sync or async, Gymnasium's default NEXT_STEP
autoreset); the agent is agrl.SAC or agrl.TD3 and agrl's learn() runs the
loop. Every --eval-every environment steps the deterministic policy plays
--eval-episodes episodes of a separate environment; each evaluation is
printed and written to DIR/eval.csv (step, mean return, wall seconds of
this process). DIR/agent.agrl is the checkpoint (every --checkpoint-every
steps and at the end); --resume continues the run it holds, bit for bit
with one copy or a sync vector (an async vector's copies live in other
processes: its runs are not resumable). DIR/summary.json holds the final
evaluation, the steps and the wall time.

The settings are CleanRL's for MuJoCo (sac_continuous_action.py,
td3_continuous_action.py), in agrl's terms:
  SAC: 256-256 ReLU networks, actor_lr 3e-4, critic_lr 1e-3 (and the
       temperature's, autotuned from alpha 1 towards -act_dim), batch 256,
       buffer 1e6, gamma 0.99, tau 0.005, learning_starts 5000,
       policy_delay 1. CleanRL's policy_frequency 2 takes two actor steps
       every second critic step, and moves the targets at every critic
       step; agrl's policy_delay would halve the actor's steps and move
       the targets with them, so 1 keeps CleanRL's counts of both.
  TD3: 256-256, actor_lr = critic_lr = 3e-4, batch 256, buffer 1e6, gamma
       0.99, tau 0.005, learning_starts 25000, policy_delay 2, expl_noise
       0.1, target_noise 0.2, noise_clip 0.5 (fractions of the actions'
       half range, as CleanRL scales them).
With N copies, train_freq = gradient_steps = N: a phase of N updates every
vector step, one update per environment step as with one copy.
"""
import argparse
import csv
import io
import json
import os
import sys
import time
from typing import Any, Dict, List

import agrl

SAC = dict(hidden=[256, 256], actor_lr=3e-4, critic_lr=1e-3, batch_size=256, buffer_size=1_000_000, gamma=0.99,
           tau=0.005, learning_starts=5000, policy_delay=1, autotune=True, alpha=1.0)
TD3 = dict(hidden=[256, 256], actor_lr=3e-4, critic_lr=3e-4, batch_size=256, buffer_size=1_000_000, gamma=0.99,
           tau=0.005, learning_starts=25000, policy_delay=2, expl_noise=0.1, target_noise=0.2, noise_clip=0.5)


def write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def csv_text(rows: List[List[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["step", "mean_return", "wall_s"])
    w.writerows(rows)
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="HalfCheetah-v5", help="a Gymnasium id with a Box action space")
    ap.add_argument("--algo", choices=["sac", "td3"], default="sac")
    ap.add_argument("--steps", type=int, default=1_000_000, help="environment steps over all copies")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n-envs", type=int, default=1, help="copies stepped together (1: gymnasium.make)")
    ap.add_argument("--vector", choices=["sync", "async"], default="sync", help="make_vec's mode for --n-envs > 1")
    ap.add_argument("--device", default="auto", help="auto (the GPU when there is one), cpu, cuda, cuda:N")
    ap.add_argument("--eval-every", type=int, default=10_000)
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--checkpoint-every", type=int, default=50_000)
    ap.add_argument("--out", required=True, help="the run's directory (eval.csv, agent.agrl, summary.json)")
    ap.add_argument("--resume", action="store_true", help="continue the run that DIR/agent.agrl holds")
    args = ap.parse_args()
    if args.steps < 1 or args.seed < 0 or args.n_envs < 1 or args.eval_every < 1 or args.checkpoint_every < 1:
        ap.error("--steps, --n-envs, --eval-every and --checkpoint-every must be at least 1, --seed at least 0")
    try:
        import gymnasium as gym
    except ImportError:
        print("train_mujoco: gymnasium is not installed (pip install 'gymnasium[mujoco]')", file=sys.stderr)
        return 2
    device = args.device
    if device == "auto":
        device = "cuda" if agrl.cuda_device_count() > 0 else "cpu"
    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "agent.agrl")
    eval_csv = os.path.join(args.out, "eval.csv")

    env = (gym.make(args.env) if args.n_envs == 1
           else gym.make_vec(args.env, args.n_envs, vectorization_mode=args.vector))
    eval_env = gym.make(args.env)
    cls = agrl.SAC if args.algo == "sac" else agrl.TD3
    rows: List[List[Any]] = []
    at = 0  # the step this process starts from
    if args.resume:
        agent = cls.load(device, ckpt)
        at = agent._run["step"] if agent._run else 0
        if os.path.exists(eval_csv):  # the evaluations up to the checkpoint; later ones are made again
            with open(eval_csv, newline="") as f:
                rows = [[int(r["step"]), r["mean_return"], r["wall_s"]] for r in csv.DictReader(f)
                        if int(r["step"]) <= at]
        print(f"resuming {ckpt} at step {at}")
    else:
        config: Dict[str, Any] = dict(SAC if args.algo == "sac" else TD3)
        config.update(seed=args.seed, train_freq=args.n_envs, gradient_steps=args.n_envs)
        agent = cls.for_env(device, env, args.steps, **config)
    print(f"{args.algo} on {args.env}, {args.n_envs} {'copy' if args.n_envs == 1 else 'copies'}, device "
          f"{agent.ctx.device}, {args.steps} steps; config {agent.config}")
    start = time.perf_counter()

    def on_event(ev: Dict[str, Any]) -> bool:
        if ev["kind"] == "eval":
            wall = time.perf_counter() - start
            rows.append([ev["step"], f"{ev['mean']:.6g}", f"{wall:.1f}"])
            write_atomic(eval_csv, csv_text(rows))
            print(f"step {ev['step']:>8}  eval {ev['mean']:10.2f}  wall {wall:8.1f} s  "
                  f"{(ev['step'] - at) / max(wall, 1e-9):.0f} steps/s", flush=True)
        return False

    res = agent.learn(env, args.steps, on_event, resume=args.resume, checkpoint=ckpt,
                      checkpoint_every=args.checkpoint_every, eval_env=eval_env, eval_every=args.eval_every,
                      eval_episodes=args.eval_episodes)
    wall = time.perf_counter() - start
    env.close()
    final = float(rows[-1][1]) if rows else None
    summary = {"env": args.env, "algo": args.algo, "seed": args.seed, "n_envs": args.n_envs, "steps": res["steps"],
               "final_eval": final, "final_eval_step": rows[-1][0] if rows else None, "wall_s": round(wall, 1),
               "updates": agent.updates, "device": agent.ctx.device}
    write_atomic(os.path.join(args.out, "summary.json"), json.dumps(summary, indent=1) + "\n")
    print(f"done: {res['steps']} steps, final evaluation {final}, wall {wall:.1f} s "
          f"({(res['steps'] - at) / wall:.0f} steps/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
