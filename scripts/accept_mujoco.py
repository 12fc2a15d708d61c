#!/usr/bin/env python3
"""The MuJoCo learning rows of agrl's acceptance: SAC on HalfCheetah-v5,
Hopper-v5 and Walker2d-v5 and TD3 on HalfCheetah-v5, 1M environment steps
each, for the given seeds, every run one process of
examples/python/train_mujoco.py (CleanRL's settings, an evaluation of 10
deterministic episodes every 10k steps), --parallel of them at once sharing
the device. Prints per row and seed the final deterministic evaluation, the
curve file (eval.csv) and the wall time, then each row's mean and range.

usage: PYTHONPATH=BUILD/pyt python3 scripts/accept_mujoco.py --out DIR [--seeds 1,2,3] [--steps 1000000]
           [--parallel 1] [--device cuda] [--rows sac-halfcheetah,sac-hopper,sac-walker2d,td3-halfcheetah]
           [--n-envs 1] [--eval-every 10000] [--resume]

Each run's directory is DIR/ROW-sSEED (eval.csv, agent.agrl, summary.json,
log.txt). --resume continues the runs whose directory holds a checkpoint
and skips those whose summary.json says they reached --steps. The exit
status is 0 when every run ended with a final evaluation, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Dict, List, Optional, Tuple

ROWS = {
    "sac-halfcheetah": ("sac", "HalfCheetah-v5"),
    "sac-hopper": ("sac", "Hopper-v5"),
    "sac-walker2d": ("sac", "Walker2d-v5"),
    "td3-halfcheetah": ("td3", "HalfCheetah-v5"),
}
TRAIN = Path(__file__).resolve().parents[1] / "examples" / "python" / "train_mujoco.py"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--parallel", type=int, default=1,
                    help="runs at once (processes sharing the device; on one GPU they are time-sliced, and one run "
                         "alone was faster than 4 or 8 side by side in all: bench/NOTES.md, MuJoCo)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--n-envs", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=10_000)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()
    rows = args.rows.split(",")
    bad = [r for r in rows if r not in ROWS]
    if bad or args.parallel < 1:
        ap.error(f"--rows takes {', '.join(ROWS)} (not {', '.join(bad)}); --parallel at least 1")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds takes integers separated by commas, not {args.seeds!r}")
    out = Path(args.out)
    jobs: List[Tuple[str, int, Path, Optional[List[str]]]] = []
    for row in rows:
        algo, env = ROWS[row]
        for seed in seeds:
            d = out / f"{row}-s{seed}"
            summary = d / "summary.json"
            if args.resume and summary.exists() and json.loads(summary.read_text()).get("steps", 0) >= args.steps:
                jobs.append((row, seed, d, None))
                continue
            cmd = [sys.executable, str(TRAIN), "--env", env, "--algo", algo, "--steps", str(args.steps), "--seed",
                   str(seed), "--n-envs", str(args.n_envs), "--device", args.device, "--eval-every",
                   str(args.eval_every), "--out", str(d)]
            if args.resume and (d / "agent.agrl").exists():
                cmd.append("--resume")
            jobs.append((row, seed, d, cmd))
    start = time.perf_counter()
    running: List[Tuple[str, int, "subprocess.Popen[bytes]", IO[str]]] = []
    todo = [j for j in jobs if j[3] is not None]
    print(f"{len(todo)} runs, {args.parallel} at a time, into {out}", flush=True)
    while todo or running:
        while todo and len(running) < args.parallel:
            row, seed, d, todo_cmd = todo.pop(0)
            assert todo_cmd is not None
            d.mkdir(parents=True, exist_ok=True)
            log = open(d / "log.txt", "a")
            running.append((row, seed, subprocess.Popen(todo_cmd, stdout=log, stderr=subprocess.STDOUT), log))
            print(f"  started {row} seed {seed}", flush=True)
        time.sleep(2)
        for r in list(running):
            if r[2].poll() is not None:
                r[3].close()
                running.remove(r)
                print(f"  {r[0]} seed {r[1]}: exit {r[2].returncode} at {time.perf_counter() - start:.0f} s",
                      flush=True)
    ok = True
    print(f"\n{'row':18s} {'seed':>4s} {'final eval':>11s} {'at step':>8s} {'wall s':>8s}  curve")
    per_row: Dict[str, List[Optional[float]]] = {}
    for row, seed, d, _ in jobs:
        summary = d / "summary.json"
        s = json.loads(summary.read_text()) if summary.exists() else {}
        final = s.get("final_eval")
        ok = ok and final is not None
        per_row.setdefault(row, []).append(final)
        fin = f"{final:11.1f}" if final is not None else f"{'none':>11s}"
        print(f"{row:18s} {seed:4d} {fin} {s.get('final_eval_step') or 0:8d} {s.get('wall_s') or 0:8.0f}  "
              f"{d / 'eval.csv'}")
    for row, finals in per_row.items():
        got = [f for f in finals if f is not None]
        if got:
            print(f"{row}: mean {sum(got) / len(got):.1f} over {len(got)} seeds, range {min(got):.1f} .. "
                  f"{max(got):.1f}")
    print(f"all runs: {time.perf_counter() - start:.0f} s of wall time")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
