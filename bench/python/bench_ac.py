"""agrl's SAC and TD3 updates through the Python package beside PyTorch
(eager, CUDA graph) and JAX (jit, 100 updates in one jit), and agrl's SAC
training rate on Pendulum beside a CleanRL-style PyTorch SAC, in one
invocation: a table of microseconds per update, the ratios and the targets'
verdicts.

usage: python3 bench/python/bench_ac.py [--device cuda|cpu] [--algos sac,td3] [--peers torch,jax]
           [--cli PATH] [--steps N] [--no-train] [--threads N] [--iters K] [--reps N] [--json FILE]

The update rows (bench/peers/ac_defs.py: Pendulum-sized, critics 4-256-256-1,
actor 3-256-256-2 (SAC) or 3-256-256-1 (TD3), B = 256, a table of 100,000
random Pendulum transitions):

  agrl     agrl.SAC / agrl.TD3(ctx, 3, 1, [-2], [2], 10**6, batch_size=256,
           learning_starts=0), the table filled with store(); a repetition is
           train(K): K recorded updates issued back to back and one wait at
           the end; the row is its time / K (2 warm-up + 9 timed
           repetitions, the median); K chosen for ~0.2 s a repetition (even,
           for TD3's update pairs), or --iters
  torch    bench/peers/torch_sac.py: torch-eager, torch-cudagraph,
           torch-cudagraph-fused
  jax      bench/peers/jax_sac.py: jax-jit, jax-scan100

The peers run as child processes of this one (an argument vector, no
shell), one after the other, after agrl's rows; their JSON lines are read
back. The ratio is peer time / agrl time (above 1: agrl is faster).

Targets (issue: SAC and TD3 benchmark rows): the SAC update at least 5x
faster than torch-cudagraph, and faster than jax-scan100.

The training row (unless --no-train): bench/peers/torch_sac_train.py
(--total-steps N) and, with --cli PATH (default $AGRL_CLI), `PATH train
--algo sac --env pendulum --steps N --device D --stop-at none --quiet --out
TMP`, whose TMP/summary.json gives steps_per_s; the ratio is agrl's rate /
torch's.

--threads N (default 1 on the CPU, as bench/compare.py's CPU rows; 0: each
library's default) sets AGRL_THREADS, OMP/MKL/OPENBLAS_NUM_THREADS and the
peers' --threads. A row that cannot run (a package missing, no GPU, a check
that failed) is printed as absent with the reason; the exit status is 0
unless the arguments are wrong.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS_DIR = os.path.join(os.path.dirname(HERE), "peers")
sys.path.insert(0, PEERS_DIR)
import ac_defs as D  # noqa: E402
import peerlib as pl  # noqa: E402
sys.path.insert(0, os.path.dirname(PEERS_DIR))
from compare import run_lines  # noqa: E402  one way of running a child for every bench

PEER_SCRIPTS = {"torch": "torch_sac.py", "jax": "jax_sac.py"}
PEER_IMPLS = {"torch": ["torch-eager", "torch-cudagraph", "torch-cudagraph-fused"],
              "jax": ["jax-jit", "jax-scan100"]}
CUDA_ONLY = {"torch-cudagraph", "torch-cudagraph-fused"}
# (work, peer impl, the least peer/agrl ratio that meets the target, what it says)
TARGETS = [("sac_update_B256", "torch-cudagraph", 5.0, "SAC update >= 5x faster than torch-cudagraph"),
           ("sac_update_B256", "jax-scan100", 1.0, "SAC update faster than jax-scan100")]


# ------------------------------------------------------------ agrl's rows

def agrl_class(agrl, algo):
    cls = getattr(agrl, algo.upper(), None)
    if cls is None:
        from agrl import ac  # the module, where __init__ does not name it yet
        cls = getattr(ac, algo.upper())
    return cls


def agrl_agent(agrl, np, algo, ctx, data, seed=D.SEED):
    """An agent of the rows' sizes with the table filled."""
    agent = agrl_class(agrl, algo)(ctx, D.OBS, D.ACT, [D.LOW] * D.ACT, [D.HIGH] * D.ACT, 10 ** 6,
                                   batch_size=D.BATCH, learning_starts=0, seed=seed)
    step = 10_000
    for i in range(0, len(data["reward"]), step):
        s = slice(i, i + step)
        agent.store(data["obs"][s], data["action"][s], data["reward"][s], data["next_obs"][s],
                    data["terminated"][s])
    return agent


def pick_k(agent, algo, args):
    """Updates a repetition: --iters, else about 0.2 s worth (even for TD3)."""
    even = lambda k: max(2, k + (k % 2)) if algo == "td3" else max(1, k)  # noqa: E731
    if args.iters:
        return even(args.iters)
    k, dt = 8, 0.0
    while True:
        t0 = time.perf_counter()
        agent.train(k)
        dt = time.perf_counter() - t0
        if dt > 0.02 or k >= 20000:
            break
        k *= 4
    return even(int(min(20000, max(2, round(0.2 * k / max(dt, 1e-9))))))


def agrl_rows(dev, algos, args):
    """agrl's timed rows (or absent lines), and a check line per algorithm."""
    out = []
    try:
        import numpy as np
        import agrl
    except Exception as e:
        return [{"impl": "agrl", "absent": f"{D.WORK[a]}: agrl does not import: {type(e).__name__}: {e}"}
                for a in algos]
    try:
        if dev == "cuda" and agrl.cuda_device_count() < 1:
            return [{"impl": "agrl", "absent": f"{D.WORK[a]}: agrl sees no CUDA device"} for a in algos]
        ctx = agrl.Context(dev)
    except Exception as e:
        return [{"impl": "agrl", "absent": f"no {dev} context: {type(e).__name__}: {e}"}]
    data = D.pendulum_transitions(np)
    for algo in algos:
        work = D.WORK[algo]
        try:
            agrl_class(agrl, algo)
        except (ImportError, AttributeError) as e:
            out.append({"impl": "agrl", "absent": f"{work}: agrl.{algo.upper()} is missing: {e}"})
            continue
        try:
            # information: the losses of the first updates of a fresh agent
            # (agrl's own initial weights and random streams)
            fresh = agrl_agent(agrl, np, algo, ctx, data)
            first = [list(fresh.train(1)) for _ in range(D.CHECK_UPDATES)]
            out.append({"impl": "agrl", "check": f"{algo}_losses_first_updates",
                        "value": [[round(c, 6), None if not math.isfinite(a) else round(a, 6)] for c, a in first],
                        "device": dev})
            if hasattr(fresh, "free"):
                fresh.free()
            agent = agrl_agent(agrl, np, algo, ctx, data)
            c, a = agent.train(2)
            if not (math.isfinite(c) and math.isfinite(a)):
                out.append({"impl": "agrl", "absent": f"{work}: check failed (losses {c}, {a})"})
                continue
            k = pick_k(agent, algo, args)
            stats = pl.measure(lambda i: agent.train(k), 1, lambda _l: None, reps=args.reps, per_call=k)
            med, lo, hi = stats
            out.append({"impl": "agrl", "work": work, "us": round(med, 3), "min": round(lo, 3),
                        "max": round(hi, 3), "note": f"train({k}): {k} recorded updates, one wait",
                        "updates_per_call": k, "version": agrl.library_version()})
            if hasattr(agent, "free"):
                agent.free()
        except Exception as e:
            out.append({"impl": "agrl", "absent": f"{work}: failed: {type(e).__name__}: {e}"[:500]})
    return out


# ------------------------------------------------------------- the peers

def peer_cmd(name, dev, algos, args):
    cmd = [sys.executable, os.path.join(PEERS_DIR, PEER_SCRIPTS[name]), dev, "--algos", ",".join(algos),
           "--reps", str(args.reps)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.peer_iters:
        cmd += ["--iters", str(args.peer_iters)]
    return cmd


# ------------------------------------------------------- the training row

def agrl_train(cli, dev, steps, seed, env, timeout):
    """agrl train's summary as a row, or an absent line."""
    out = tempfile.mkdtemp(prefix="bench_ac_train.")
    try:
        cmd = [cli, "train", "--algo", "sac", "--env", "pendulum", "--steps", str(steps), "--device", dev,
               "--seed", str(seed), "--stop-at", "none", "--quiet", "--out", out]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"impl": "agrl", "absent": f"train_pendulum_sac: {type(e).__name__}: {e}"}
        path = os.path.join(out, "summary.json")
        if p.returncode != 0 or not os.path.exists(path):
            return {"impl": "agrl", "absent": f"train_pendulum_sac: {' '.join(cmd)} exited {p.returncode}: "
                                              f"{(p.stderr or p.stdout)[-300:].strip()}"}
        with open(path) as f:
            s = json.load(f)
        return {"impl": "agrl", "work": "train_pendulum_sac", "steps": s.get("steps"),
                "seconds": s.get("wall_s"), "steps_per_s": s.get("steps_per_s"),
                "final_mean_return_20": s.get("final_mean20"), "episodes": s.get("episodes"),
                "updates": s.get("updates"), "device": s.get("device"), "env": s.get("env")}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def torch_train(dev, steps, seed, args, env, timeout):
    cmd = [sys.executable, os.path.join(PEERS_DIR, "torch_sac_train.py"), "--device", dev, "--total-steps",
           str(steps), "--seed", str(seed)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    rows, err = run_lines(cmd, env, timeout)
    got = [r for r in rows if r.get("work") == "train_pendulum_sac" or "absent" in r]
    if got:
        return got[-1]
    return {"impl": "torch-sac", "absent": f"train_pendulum_sac: {err or 'no result line'}"}


# ---------------------------------------------------------------- output

def fmt_us(v):
    return f"{v:10.2f}" if v < 1e5 else f"{v:10.0f}"


def print_table(dev, rows, peer_rows):
    ours = {r["work"]: r for r in rows if "us" in r}
    print(f"\nSAC/TD3 updates, Pendulum sizes (critics 4-256-256-1, actor 3-256-256-2|1), B = {D.BATCH}, "
          f"{D.N_FILL} transitions stored; device {dev}; us per update, ratio = peer / agrl")
    print(f"{'row':18} {'agrl us':>10} {'(min-max)':>21}  {'peer':22} {'peer us':>10} {'peer/agrl':>10}")
    for work in sorted(set(D.WORK.values()) & ({r["work"] for r in rows if "work" in r}
                                                | {r["work"] for r in peer_rows if "work" in r})):
        a = ours.get(work)
        head = (f"{work:18} {fmt_us(a['us'])} {'(%.2f-%.2f)' % (a['min'], a['max']):>21}" if a
                else f"{work:18} {'absent':>10} {'':>21}")
        ps = [p for p in peer_rows if p.get("work") == work and "us" in p]
        if not ps:
            print(head)
        for i, p in enumerate(ps):
            ratio = f"{p['us'] / a['us']:9.2f}x" if a else f"{'-':>10}"
            print(f"{head if i == 0 else ' ' * 51}  {p['impl']:22} {fmt_us(p['us'])} {ratio}")


def judge(rows, peer_rows):
    ours = {r["work"]: r for r in rows if "us" in r}
    theirs = {(p["work"], p["impl"]): p for p in peer_rows if "work" in p and "us" in p}
    out = []
    for work, impl, need, what in TARGETS:
        a, p = ours.get(work), theirs.get((work, impl))
        if a is None or p is None:
            out.append(dict(target=what, work=work, peer=impl, need=need,
                            verdict="agrl absent" if a is None else "peer absent"))
            continue
        ratio = p["us"] / a["us"]
        out.append(dict(target=what, work=work, peer=impl, need=need, ratio=ratio, agrl_us=a["us"],
                        peer_us=p["us"], verdict="met" if (ratio >= need if need > 1 else ratio > need)
                        else "missed"))
    return out


def agreement(peer_rows):
    """The fixed-draw losses of the peers, compared: (algo, verdict text)."""
    out = []
    for algo in D.WORK:
        name = f"{algo}_losses_fixed_draws"
        got = {r["impl"]: r["value"] for r in peer_rows if r.get("check") == name}
        if len(got) < 2:
            continue
        (ia, va), (ib, vb) = list(got.items())[:2]

        def rel(u, w):
            d = [abs(x - y) / max(abs(x), abs(y), 1e-12) for x, y in zip(u, w) if x is not None and y is not None]
            return max(d) if d else 0.0

        first = rel(va[0], vb[0])
        worst = max(rel(u, w) for u, w in zip(va, vb))
        ok = first < 1e-4 and worst < 2e-2
        out.append((algo, f"{ia} vs {ib}: first update's losses differ by {first:.1e} (relative), the "
                          f"{len(va)} updates' by at most {worst:.1e}: {'agree' if ok else 'DISAGREE'}",
                    ok, first, worst))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--algos", default="sac,td3")
    ap.add_argument("--peers", default="torch,jax")
    ap.add_argument("--cli", default=os.environ.get("AGRL_CLI"), help="agrl's CLI for the training row")
    ap.add_argument("--steps", type=int, default=20000, help="environment steps of the training row")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-train", action="store_true", help="no training row")
    ap.add_argument("--threads", type=int, default=None, help="threads on the CPU (default 1; 0: defaults)")
    ap.add_argument("--iters", type=int, default=0, help="agrl's K (updates a repetition; default ~0.2 s)")
    ap.add_argument("--peer-iters", type=int, default=0, help="the peers' calls a repetition (default ~0.2 s)")
    ap.add_argument("--reps", type=int, default=pl.REPS, help="timed repetitions")
    ap.add_argument("--timeout", type=int, default=600, help="seconds for each child process")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    algos = [a for a in args.algos.split(",") if a]
    peers = [p for p in args.peers.split(",") if p]
    bad = [a for a in algos if a not in D.WORK] + [p for p in peers if p not in PEER_SCRIPTS]
    if bad or args.steps < 1 or args.reps < 1:
        ap.error(f"unknown: {', '.join(bad)}" if bad else "--steps and --reps must be at least 1")
    dev = args.device
    if args.threads is None:
        args.threads = 1 if dev == "cpu" else 0
    env = dict(os.environ)
    if dev == "cpu" and args.threads:
        n = str(args.threads)
        for k in ("AGRL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[k] = env[k] = n  # before agrl is imported, and for the children

    result = {"device": dev, "batch": D.BATCH, "stored": D.N_FILL, "threads": args.threads, "agrl": [],
              "peers": [], "train": [], "targets": [], "agreement": [], "problems": []}

    def save():
        if args.json:  # written whole under a temporary name, then renamed over the old one
            tmp = f"{args.json}.tmp{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(result, f, indent=1)
            os.replace(tmp, args.json)

    rows = agrl_rows(dev, algos, args)
    result["agrl"] = rows
    for r in rows:
        if "us" in r:
            print(f"agrl  {r['work']:18} {r['us']:10.2f} us  {r['note']}", flush=True)
    save()
    for name in peers:
        got, err = run_lines(peer_cmd(name, dev, algos, args), env, args.timeout)
        result["peers"] += got
        if err:
            result["problems"].append(err)
        for r in got:
            if "us" in r:
                print(f"peer  {r['work']:18} {r['us']:10.2f} us  {r['impl']}", flush=True)
        save()
    peer_rows = result["peers"]

    if not args.no_train:
        t = torch_train(dev, args.steps, args.seed, args, env, args.timeout)
        result["train"].append(t)
        save()
        if args.cli:
            result["train"].append(agrl_train(args.cli, dev, args.steps, args.seed, env, args.timeout))
        else:
            result["train"].append({"impl": "agrl", "absent": "train_pendulum_sac: no --cli (or $AGRL_CLI)"})
        save()

    print_table(dev, rows, peer_rows)
    for r in rows + peer_rows:
        if "absent" in r:
            print(f"absent: {r['impl']}: {r['absent']}")
    for r in rows + peer_rows:
        if "check" in r:
            print(f"check: {r['impl']}: {r['check']} = {r['value']}")
    for algo, text, ok, first, worst in agreement(peer_rows):
        print(f"check: {algo}: {text}")
        result["agreement"].append({"algo": algo, "agree": ok, "first_rel": first, "max_rel": worst})
    for p in result["problems"]:
        print("problem:", p)

    if result["train"]:
        tr = {r["impl"]: r for r in result["train"]}
        a, t = tr.get("agrl", {}), tr.get("torch-sac", {})
        print(f"\nSAC training on Pendulum-v1, {args.steps} steps (learning_starts 1000, 1 update a step, "
              f"B = {D.BATCH}), device {dev}: environment steps per second")
        print(f"{'impl':10} {'steps/s':>9} {'seconds':>8} {'updates':>8} {'return10':>9} {'return20':>9}  agrl/this")
        for name, r in (("agrl", a), ("torch-sac", t)):
            if "steps_per_s" not in r:
                print(f"{name:10} absent: {r.get('absent', '?')}")
                continue
            ratio = (f"{a['steps_per_s'] / r['steps_per_s']:8.2f}x" if "steps_per_s" in a and r["steps_per_s"]
                     else f"{'-':>9}")
            r10, r20 = r.get("final_mean_return_10"), r.get("final_mean_return_20")
            print(f"{name:10} {r['steps_per_s']:9.1f} {r.get('seconds') or 0:8.2f} {r.get('updates') or 0:8d} "
                  f"{'-' if r10 is None else r10:>9} {'-' if r20 is None else round(r20, 2):>9}  {ratio}")
        print("  (return10/20: the mean return of the last 10/20 training episodes; agrl train reports the 20)")

    result["targets"] = judge(rows, peer_rows)
    print("\ntargets (peer / agrl in this run)")
    for v in result["targets"]:
        if "ratio" in v:
            print(f"  {v['target']:48} {v['ratio']:8.2f}x (needs {'>=' if v['need'] > 1 else '>'} "
                  f"{v['need']:g}x): {v['verdict']}  (agrl {v['agrl_us']:.2f} us, {v['peer']} {v['peer_us']:.2f} us)")
        else:
            print(f"  {v['target']:48} {v['verdict']}")
    save()
    if args.json:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
