"""Runs `agrl bench` and the peer scripts in one invocation and
prints one table: work, agrl, each peer that did the same work, and the ratio
(peer time / agrl time: above 1 means agrl is faster). A peer that is absent
or fails is reported, never fatal. Then each of PERF.md's targets that this
run can judge: met when the ratio measured here is at least the ratio of
PERF.md's peer figure to agrl's target (absolute times move from machine to
machine; the ratio to a peer run beside agrl does not).

usage: python3 bench/compare.py BUILD_DIR [cpu|cuda|vulkan] [--json FILE] [--only SUBSTRING]

With vulkan, agrl's Vulkan rows (vulkan_WORK) are printed beside the CUDA
backend's rows of the same work and PyTorch's eager rows on the GPU, all
measured in this one invocation, and judged against the Vulkan targets
(VULKAN_TARGETS).
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

PEERS = {  # most telling first: a run cut short still has them
    "cuda": ["torch_dqn.py", "torch_core.py", "torch_replay.py", "jax_dqn.py", "jax_replay.py", "flashbax_replay.py"],
    "cpu": ["torch_dqn.py", "numpy_replay.py"],
}

# PERF.md's table: (work, peer impl, the peer's figure there in us, agrl's
# target there in us). The ratio a target asks for is figure / target.
TARGETS = [
    ("gather_cartpole_b256", "torch", 14.4, 4.0),
    ("sample_gather_mujoco_b256", "torch", 26.6, 5.0),
    ("sample_gather_mujoco_b256", "jax_jit", 43.7, 5.0),
    ("sample_gather_mujoco_b256", "flashbax_flat", 85.0, 5.0),
    ("write_1_mujoco_visible", "torch", 17.4, 8.0),
    ("write_65536_mujoco_pageable", "torch", 782.0, 300.0),
    ("per_sample_b256_1m", "torch_multinomial", 449.0, 20.0),
    ("per_sample_b256_1m", "torch_cumsum_searchsorted", 50.0, 20.0),
    ("per_sample_b256_1m", "flashbax_per", 535.0, 20.0),
    ("per_update_b256", "torch_scatter", 9.2, 10.0),
    ("per_update_b256", "flashbax_per", 540.0, 10.0),
    ("dqn_update_4_128_128_2_b128", "torch_eager", 1954.0, 25.0),
    ("dqn_update_4_128_128_2_b128", "torch_graph", 189.0, 25.0),
    ("dqn_update_4_128_128_2_b128", "jax_jit", 87.0, 25.0),
    ("dqn_update_4_128_128_2_b128", "jax_fused", 37.0, 25.0),
    ("dqn_update_17_256_256_6_b256", "torch_eager", 2360.0, 30.0),
    ("dqn_update_17_256_256_6_b256", "torch_graph", 270.0, 30.0),
    ("dqn_update_17_256_256_6_b256", "jax_jit", 102.0, 30.0),
    ("dqn_update_17_256_256_6_b256", "jax_fused", 46.0, 30.0),
    ("cpu_sample_gather_mujoco_b256", "numpy_sb3", 101.0, 5.0),
    ("cpu_sample_gather_mujoco_b256", "cpprb", 111.0, 5.0),
    ("cpu_add_1_mujoco", "numpy_sb3", 3.2, 1.0),
    ("cpu_add_1_mujoco", "cpprb", 37.0, 1.0),
    ("cpu_per_sample_b256_1m", "cpprb", 405.0, 40.0),
    ("cpu_per_update_b256", "cpprb", 11.5, 10.0),
    ("cpu_dqn_update_4_128_128_2_b128", "torch_cpu_1thread", 1333.0, 500.0),
]
# The wide gather's target is a share of the device-to-device copy measured
# in the same run: (work, bytes read + written a call, share, ceiling row).
CEILING_TARGETS = [("gather_1024f32_b65536", 2 * 1024 * 65536 * 4, 0.90, "copy_d2d_1gib", 2 * 2**30)]


def judge(ours, peers):
    """One verdict per target whose agrl row ran: a dict with the work, the
    peer, the measured and the needed ratio, and 'met', 'missed' or 'peer
    absent'."""
    mine = {r["work"]: r for r in ours}
    theirs = {(r["work"], r["impl"]): r for r in peers if "work" in r and "us" in r}
    out = []
    for work, impl, figure, target in TARGETS:
        if work not in mine:
            continue
        need = figure / target
        p = theirs.get((work, impl))
        if p is None:
            out.append(dict(work=work, peer=impl, need=need, verdict="peer absent"))
            continue
        got = p["us"] / mine[work]["us"]
        out.append(dict(work=work, peer=impl, peer_us=p["us"], agrl_us=mine[work]["us"], ratio=got,
                        need=need, allowed_us=p["us"] / need, verdict="met" if got >= need else "missed"))
    for work, nbytes, share, ceiling, cbytes in CEILING_TARGETS:
        if work not in mine:
            continue
        c = theirs.get((ceiling, "ceiling"))
        if c is None:
            out.append(dict(work=work, peer=ceiling, need=share, verdict="peer absent"))
            continue
        got = (nbytes / mine[work]["us"]) / (cbytes / c["us"])
        out.append(dict(work=work, peer=ceiling, peer_us=c["us"], agrl_us=mine[work]["us"], ratio=got,
                        need=share, allowed_us=nbytes / (share * cbytes / c["us"]),
                        verdict="met" if got >= share else "missed"))
    return out


# The Vulkan backend's targets: (vulkan row, what it is judged against, the
# bound). "cuda": at most `bound` times the CUDA row of the same work;
# "eager": faster than every PyTorch eager row of the work (bound 1);
# "ceiling": at least `bound` of the device-to-device copy's bandwidth.
VULKAN_TARGETS = [
    ("vulkan_gather_1024f32_b65536", "ceiling", 0.80),
    ("vulkan_sample_gather_mujoco_b256", "cuda", 2.0),
    ("vulkan_sample_gather_mujoco_b256_eager", "cuda", 2.0),
    ("vulkan_dqn_update_4_128_128_2_b128_ops", "cuda", 2.0),
    ("vulkan_dqn_update_17_256_256_6_b256_ops", "cuda", 2.0),
]
EAGER_IMPLS = ("torch", "torch_eager")


def judge_vulkan(ours, cuda, peers):
    """The Vulkan targets, and ahead of PyTorch eager on every row it has."""
    mine = {r["work"]: r for r in ours}
    theirs = {r["work"]: r for r in cuda}
    out = []
    for work, kind, bound in VULKAN_TARGETS:
        if work not in mine:
            continue
        base = work[len("vulkan_"):]
        if kind == "cuda":
            c = theirs.get(base)
            if c is None:
                out.append(dict(work=work, peer="cuda " + base, need=bound, verdict="peer absent"))
                continue
            got = mine[work]["us"] / c["us"]
            out.append(dict(work=work, peer="cuda " + base, peer_us=c["us"], agrl_us=mine[work]["us"], ratio=got,
                            need=bound, verdict="met" if got <= bound else "missed", smaller=True))
        elif kind == "ceiling":
            for w, nbytes, _, ceiling, cbytes in CEILING_TARGETS:
                if w != base:
                    continue
                c = next((p for p in peers if p.get("work") == ceiling and p.get("impl") == "ceiling"), None)
                if c is None:
                    out.append(dict(work=work, peer=ceiling, need=bound, verdict="peer absent"))
                    continue
                got = (nbytes / mine[work]["us"]) / (cbytes / c["us"])
                out.append(dict(work=work, peer=ceiling, peer_us=c["us"], agrl_us=mine[work]["us"], ratio=got,
                                need=bound, verdict="met" if got >= bound else "missed"))
    for work, r in mine.items():
        base = work[len("vulkan_"):]
        for p in peers:
            if p.get("work") == base and p.get("impl") in EAGER_IMPLS and "us" in p:
                got = p["us"] / r["us"]
                out.append(dict(work=work, peer=p["impl"], peer_us=p["us"], agrl_us=r["us"], ratio=got, need=1.0,
                                verdict="met" if got > 1.0 else "missed"))
    return out


def vulkan_main(build, json_out, env):
    """agrl bench on vulkan and on cuda, and PyTorch's GPU rows, in one invocation."""
    rows = {}
    problems = []
    for dev in ("vulkan", "cuda"):
        jf = os.path.join(build, f"agrl_bench_{dev}.jsonl")
        if os.path.exists(jf):
            os.remove(jf)
        _, err = run_lines([os.path.join(build, "agrl"), "bench", "--device", dev, "--json", jf], env)
        if err:
            problems.append(f"agrl ({dev}) " + err)
        rows[dev] = [json.loads(l) for l in open(jf) if l.strip()] if os.path.exists(jf) else []
    peers = []
    # torch_replay.py brings the copy ceiling the wide gather is judged against
    for script in ("torch_core.py", "torch_dqn.py", "torch_replay.py"):
        got, err = run_lines([sys.executable, os.path.join(HERE, "peers", script), "cuda"], env)
        peers += got
        if err:
            problems.append("peer " + err)
    cuda = {r["work"]: r for r in rows["cuda"]}
    print("\ndevice: vulkan (beside the CUDA backend and PyTorch eager on the same GPU)")
    print(f"{'work':44} {'vulkan us':>10} {'cuda us':>10} {'vk/cuda':>8}  {'torch eager us':>14} {'torch/vk':>8}")
    for r in rows["vulkan"]:
        base = r["work"][len("vulkan_"):]
        c = cuda.get(base)
        eager = [p for p in peers if p.get("work") == base and p.get("impl") in EAGER_IMPLS and "us" in p]
        cs = f"{c['us']:10.2f} {r['us'] / c['us']:7.2f}x" if c else f"{'-':>10} {'-':>8}"
        es = f"{eager[0]['us']:14.2f} {eager[0]['us'] / r['us']:7.2f}x" if eager else f"{'-':>14} {'-':>8}"
        print(f"{r['work']:44} {r['us']:10.2f} {cs}  {es}  {r.get('note', '')}")
    verdicts = judge_vulkan(rows["vulkan"], rows["cuda"], peers)
    print("\nVulkan targets: vk/cuda at most the bound; the wide gather's share of the copy ceiling;"
          " torch eager / vulkan above 1")
    for v in verdicts:
        if "ratio" in v:
            print(f"{v['work']:44} {v['peer']:40} {v['ratio']:7.2f} {'<=' if v.get('smaller') else '>='} "
                  f"{v['need']:5.2f}  {v['verdict']}")
        else:
            print(f"{v['work']:44} {v['peer']:40} {'-':>7}    {v['need']:5.2f}  {v['verdict']}")
    print(f"targets met: {sum(v['verdict'] == 'met' for v in verdicts)} of {len(verdicts)} judged")
    for p in problems:
        print("problem:", p)
    if json_out:
        tmp = f"{json_out}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump({"device": "vulkan", "agrl": rows["vulkan"], "agrl_cuda": rows["cuda"], "peers": peers,
                       "problems": problems, "targets": verdicts}, f, indent=1)
        os.replace(tmp, json_out)


def run_lines(cmd, env=None, timeout=1200):
    """The JSON lines a command prints, and an error text when it failed
    (also bench/python/bench_ac.py's, which gives each child its timeout)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], f"{os.path.basename(cmd[1] if len(cmd) > 1 else cmd[0])}: {type(e).__name__}: {e}"
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
    if dev == "vulkan":
        vulkan_main(build, json_out, env)
        return
    ours, peers, problems, verdicts = [], [], [], []

    def save():
        if json_out:  # written whole under a temporary name, then renamed over the old one
            tmp = f"{json_out}.tmp{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump({"device": dev, "agrl": ours, "peers": peers, "problems": problems,
                           "targets": verdicts}, f, indent=1)
            os.replace(tmp, json_out)

    jf = os.path.join(build, f"agrl_bench_{dev}.jsonl")
    if os.path.exists(jf):
        os.remove(jf)  # agrl bench appends its rows: this run's only
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
    verdicts += [v for v in judge(ours, peers) if only in v["work"]]
    save()
    if verdicts:
        print("\ntargets (PERF.md): met when peer / agrl here >= PERF's peer figure / agrl's target"
              " (for the wide gather: its bandwidth / the copy's)")
        print(f"{'work':38} {'against':26} {'ratio':>7} {'needs':>7}  {'verdict':11} agrl us (allowed here)")
        for v in verdicts:
            if "ratio" in v:
                print(f"{v['work']:38} {v['peer']:26} {v['ratio']:7.2f} {v['need']:7.2f}  {v['verdict']:11} "
                      f"{v['agrl_us']:.2f} ({v['allowed_us']:.2f})")
            else:
                print(f"{v['work']:38} {v['peer']:26} {'-':>7} {v['need']:7.2f}  {v['verdict']}")
        met = sum(v["verdict"] == "met" for v in verdicts)
        print(f"targets met: {met} of {len(verdicts)} judged")


if __name__ == "__main__":
    main()
