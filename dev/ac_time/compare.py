"""agrl's SAC and TD3 updates on the CPU (dev/ac_time: the composed ops,
the fused call's fast path and its plain reference) beside JAX's jit and
scan (bench/peers/jax_sac.py), one thread each, in one invocation, rounds
interleaved so that a busy machine slows both alike; README.md says more.

usage: python3 dev/ac_time/compare.py AC_TIME PYTHON [--rounds R] [--dims 3,1 17,6] [--algos sac,td3]
  AC_TIME  the built dev/ac_time/ac_time.c; PYTHON  one with jax[cpu]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
JAX_PEER = os.path.join(HERE, "..", "..", "bench", "peers", "jax_sac.py")
ONE_THREAD = {"AGRL_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
              "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


def env_with(extra):
    e = dict(os.environ)
    e.update(ONE_THREAD)
    e.update(extra)
    return e


def agrl_ms(ac_time, algo, obs, act, which, reference=False):
    extra = {"AGRL_CPU_REFERENCE": "1"} if reference else {}
    out = subprocess.run(["taskset", "-c", "0", ac_time, algo, str(obs), str(act), "256", "256", "20", "9", which],
                         env=env_with(extra), capture_output=True, text=True, check=True).stdout
    m = re.search(r"composed ([\d.]+) ms, fused ([\d.]+) ms", out)
    return float(m.group(1) if which == "composed" else m.group(2))


def jax_ms(python, algo, obs, act):
    out = subprocess.run(["taskset", "-c", "0", python, JAX_PEER, "cpu", "--algos", algo, "--threads", "1"],
                         env=env_with({"AC_DEFS_DIMS": f"{obs},{act}"}), capture_output=True, text=True,
                         check=True).stdout
    rows = {}
    for line in out.splitlines():
        d = json.loads(line)
        if "us" in d:
            rows[d["impl"]] = d["us"] / 1e3
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ac_time")
    ap.add_argument("python")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dims", nargs="+", default=["3,1", "17,6"])
    ap.add_argument("--algos", default="sac,td3")
    args = ap.parse_args()
    print("ms per update, one thread (taskset -c 0), median of the rounds' medians; "
          "ratio = peer / agrl fused (above 1: agrl is faster)")
    print(f"{'algo':4} {'obs,act':7} {'composed':>9} {'fused ref':>9} {'fused':>9} {'jax-jit':>9} "
          f"{'jax-scan':>9} {'jit/fused':>9} {'scan/fused':>10}")
    for dims in args.dims:
        obs, act = (int(v) for v in dims.split(","))
        for algo in args.algos.split(","):
            t = {k: [] for k in ("composed", "ref", "fused", "jax-jit", "jax-scan100")}
            for _ in range(args.rounds):
                t["fused"].append(agrl_ms(args.ac_time, algo, obs, act, "fused"))
                j = jax_ms(args.python, algo, obs, act)
                t["jax-jit"].append(j.get("jax-jit", float("nan")))
                t["jax-scan100"].append(j.get("jax-scan100", float("nan")))
                t["composed"].append(agrl_ms(args.ac_time, algo, obs, act, "composed"))
                t["ref"].append(agrl_ms(args.ac_time, algo, obs, act, "fused", reference=True))
            m = {k: statistics.median(v) for k, v in t.items()}
            print(f"{algo:4} {dims:7} {m['composed']:9.3f} {m['ref']:9.3f} {m['fused']:9.3f} {m['jax-jit']:9.3f} "
                  f"{m['jax-scan100']:9.3f} {m['jax-jit'] / m['fused']:9.2f} {m['jax-scan100'] / m['fused']:10.2f}",
                  flush=True)
            print("  rounds: " + json.dumps({k: [round(x, 3) for x in v] for k, v in t.items()}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
