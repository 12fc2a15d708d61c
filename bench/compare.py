"""Runs agrl's benchmark binaries and the peer scripts in one invocation and
prints one table: work, agrl, peer, ratio (peer time / agrl time; > 1 means
agrl is faster). A missing peer is reported, not fatal.

usage: python3 bench/compare.py BUILD_DIR [cpu|cuda] [--json FILE]
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_lines(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], f"{cmd[0]}: {e}"
    rows = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    err = None if p.returncode == 0 else f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-400:]}"
    sys.stderr.write(p.stderr)
    return rows, err


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    dev = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    json_out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    ours, err = run_lines([os.path.join(build, "bench", "bench_core"), dev])
    if err:
        print("agrl:", err)
    peers, perr = run_lines([sys.executable, os.path.join(HERE, "peers", "torch_core.py"), dev])
    if perr:
        print("torch peer:", perr)
    absent = [r["absent"] for r in peers if "absent" in r]
    peer = {r["work"]: r for r in peers if "work" in r}
    print(f"\n{'work':34} {'agrl us':>10} {'(min-max)':>19} {'peer us':>10} {'ratio':>7}  note")
    for r in ours:
        p = peer.get(r["work"])
        ratio = f"{p['us'] / r['us']:.2f}x" if p else "-"
        ps = f"{p['us']:10.2f}" if p else f"{'absent':>10}"
        spread = f"({r['min']:.2f}-{r['max']:.2f})"
        print(f"{r['work']:34} {r['us']:10.2f} {spread:>19} {ps} {ratio:>7}  {r.get('note','')}"
              + (f" | peer: {p.get('note','')}" if p else ""))
    for a in absent:
        print("peer absent:", a)
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"device": dev, "agrl": ours, "peers": peers}, f, indent=1)


if __name__ == "__main__":
    main()
