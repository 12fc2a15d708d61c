"""Runs `agrl bench` and the peer scripts in one invocation and
prints one table: work, agrl, each peer that did the same work, and the ratio
(peer time / agrl time: above 1 means agrl is faster). A peer that is absent
or fails is reported, never fatal.

usage: python3 bench/compare.py BUILD_DIR [cpu|cuda] [--json FILE] [--only SUBSTRING]
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

PEERS = {  # most telling first: a run cut short still has them
    "cuda": ["torch_dqn.py", "torch_core.py", "torch_replay.py", "jax_dqn.py"],
    "cpu": ["torch_dqn.py", "numpy_replay.py"],
}


def run_lines(cmd, env=None):
    """The JSON lines a command prints, and an error text when it failed."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], f"{os.path.basename(cmd[-2] if len(cmd) > 1 else cmd[0])}: {e}"
    rows = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    sys.stderr.write(p.stderr[-4000:])
    err = None if p.returncode == 0 else f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-300:]}"
    return rows, err


def main():
    args = sys.argv[1:]
    build = args[0] if args else "build"
    dev = args[1] if len(args) > 1 and not args[1].startswith("--") else "cuda"
    json_out = args[args.index("--json") + 1] if "--json" in args else None
    only = args[args.index("--only") + 1] if "--only" in args else ""
    env = dict(os.environ)
    if dev == "cpu":  # one thread, as PERF.md's CPU rows
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    ours, peers, problems = [], [], []

    def save():
        if json_out:
            with open(json_out, "w") as f:
                json.dump({"device": dev, "agrl": ours, "peers": peers, "problems": problems}, f, indent=1)

    jf = os.path.join(build, f"agrl_bench_{dev}.jsonl")
    _, err = run_lines([os.path.join(build, "agrl"), "bench", "--device", dev, "--json", jf], env)
    if err:
        problems.append("agrl " + err)
    if os.path.exists(jf):
        ours = [json.loads(l) for l in open(jf) if l.strip()]
    for r in ours:
        print(f"agrl  {r['work']:38} {r['us']:10.2f} us  {r.get('note', '')}", flush=True)
    save()
    for script in PEERS[dev]:
        rows, err = run_lines([sys.executable, os.path.join(HERE, "peers", script), dev], env)
        peers += rows
        if err:
            problems.append("peer " + err)
        for r in rows:
            if "work" in r and "us" in r:
                print(f"peer  {r['work']:38} {r['us']:10.2f} us  {r['impl']}", flush=True)
        save()
    by_work = {}
    for r in peers:
        if "work" in r and "us" in r:
            by_work.setdefault(r["work"], []).append(r)
    print(f"\ndevice: {dev}")
    print(f"{'work':38} {'agrl us':>10} {'(min-max)':>21}  {'peer':22} {'peer us':>10} {'ratio':>7}")
    for r in ours:
        if only not in r["work"]:
            continue
        spread = f"({r['min']:.2f}-{r['max']:.2f})"
        ps = by_work.get(r["work"], [])
        if not ps:
            print(f"{r['work']:38} {r['us']:10.2f} {spread:>21}  {'-':22} {'-':>10} {'-':>7}  {r.get('note', '')}")
        for i, p in enumerate(ps):
            head = f"{r['work']:38} {r['us']:10.2f} {spread:>21}" if i == 0 else " " * 71
            print(f"{head}  {p['impl']:22} {p['us']:10.2f} {p['us'] / r['us']:6.2f}x"
                  + (f"  {r.get('note', '')}" if i == 0 else ""))
    extra = sorted({r["work"] for r in peers if "work" in r} - {r["work"] for r in ours})
    if extra:
        print("peer rows without an agrl row yet:", ", ".join(extra))
    for r in peers:
        if "absent" in r:
            print(f"peer absent: {r['impl']}: {r['absent']}")
        if "check" in r:
            print(f"peer check: {r['impl']}: {r['check']} = {r.get('value')}")
    for p in problems:
        print("problem:", p)


if __name__ == "__main__":
    main()
