"""TorchRL's replay buffer with its own storage and with agrl's
(agrl.torchrl), in one invocation on one machine: a TorchRL SAC training
step, and extend / sample alone.

usage: python3 bench/python/bench_torchrl.py [--device cpu|cuda] [--size 1000000] [--batch 256]
           [--chunk 1000] [--only ROWS] [--iters N] [--reps N] [--threads N] [--json FILE]

The table holds --size MuJoCo-shaped transitions (HalfCheetah: "observation"
f32[17], "action" f32[6], ("next", "observation") f32[17], ("next",
"reward") f32[1], ("next", "done" / "terminated" / "truncated") bool[1]),
full, random values made on the device, written by extend() in parts of
100,000 before anything is timed. The buffers:

  torchrl        torchrl.data.TensorDictReplayBuffer(storage=LazyTensorStorage(N, device=D))
                 (prioritized: TensorDictPrioritizedReplayBuffer(alpha 0.6, beta 0.4, ...);
                 when its sum tree does not load for the device, on cuda the tree
                 on the host, sampler_device="cpu", said in the note)
  agrl           agrl.torchrl.TensorDictReplayBuffer(storage=AgrlStorage(N, device=D)):
                 TorchRL's class, agrl's storage and sampler, sample() direct
                 (prioritized: agrl.torchrl.TensorDictPrioritizedReplayBuffer)
  agrl_generic   torchrl.data.TensorDictReplayBuffer(storage=AgrlStorage(...),
                 sampler=AgrlSampler(), collate_fn=agrl.torchrl.collate): the
                 same storage and sampler through TorchRL's own sample path
                 (sample row only: what the extension points cost)

Rows (--only, comma-separated; all by default):

  train    train_sac_b256: one TorchRL SAC step: rb.sample() (B), SACLoss
           (actor 17-256-256-2x6 TanhNormal, two Q nets 23-256-256-1) forward,
           the three losses summed, backward, Adam step, SoftUpdate of the
           target Q nets. Also `none`: the same step on one fixed batch (no
           buffer), for the buffer's share of the step.
  sample   sample_b256: rb.sample() alone
  extend   extend_<chunk>: rb.extend(TensorDict of --chunk transitions on the
           device, prepared beforehand: a collector's batch)
  per      per_sample_update_b256: prioritized sample() + update_priority(index,
           device priorities)

Timing is bench/peers/peerlib.py's: a repetition runs the call `iters`
times back to back, then waits for the device once
(torch.cuda.synchronize()); 2 warm-up repetitions, then --reps timed ones
(9); the median per call with min and max; `iters` chosen for ~0.2 s a
repetition unless --iters says. Each buffer is checked once before it is
timed (a sampled row equals the row written at its index). The table
printed at the end gives each row's times and torchrl / agrl (above 1: agrl
faster). --threads N sets torch's CPU threads (default 1 on the CPU, the
machine's default on cuda). A buffer that cannot run is reported as absent
with the reason; the exit status is 0.
"""
import argparse
import gc
import json
import logging
import os
import platform
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import peerlib as pl  # noqa: E402

ALPHA, BETA = 0.6, 0.4
OBS, ACT = 17, 6
ROWS = ("train", "sample", "extend", "per")
IMPLS = ("torchrl", "agrl", "agrl_generic", "none")


class Run:
    def __init__(self, args):
        self.args = args
        self.rows, self.absent, self.checks = [], [], []
        self.versions = {}

    def time(self, impl, work, body, sync, note):
        a = self.args
        iters = a.iters or pl.auto_iters(body, sync)
        med, lo, hi = pl.measure(body, iters, sync, reps=a.reps)
        self.rows.append({"impl": impl, "work": work, "us": round(med, 3), "min": round(lo, 3),
                          "max": round(hi, 3), "iters": iters, "note": note})
        print(f"  {impl:13} {work:24} {med:11.2f} us  ({lo:.2f} - {hi:.2f}, {iters} calls a rep)  {note}",
              flush=True)

    def gone(self, impl, why):
        self.absent.append({"impl": impl, "why": why})
        print(f"  {impl:13} absent: {why}", flush=True)

    def check(self, impl, name, ok, detail=""):
        self.checks.append({"impl": impl, "check": name, "ok": bool(ok), "detail": detail})
        if not ok:
            print(f"  {impl:13} CHECK FAILED {name}: {detail}", flush=True)
        return ok

    def us(self, impl, work):
        for r in self.rows:
            if r["impl"] == impl and r["work"] == work:
                return r["us"]
        return None


def version_of(dist):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return "?"


def make_data(torch, TensorDict, n, dev, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dev)

    def flag(p):
        return (torch.rand(n, 1, generator=g) < p).to(dev)

    done = flag(0.001)
    return TensorDict({"observation": r(n, OBS), "action": r(n, ACT).clamp_(-1, 1),
                       "next": {"observation": r(n, OBS), "reward": r(n, 1), "done": done, "terminated": done.clone(),
                                "truncated": torch.zeros(n, 1, dtype=torch.bool, device=dev)}},
                      batch_size=[n], device=dev)


def fill(rb, data, part=100_000):
    n = data.shape[0]
    for c0 in range(0, n, part):
        rb.extend(data[c0:c0 + part].clone())


def sac(torch, dev, seed):
    """(loss module, optimizer, target updater) of TorchRL's SAC, seeded."""
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torchrl.data import Bounded
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import SACLoss, SoftUpdate

    torch.manual_seed(seed)
    net = torch.nn.Sequential(MLP(in_features=OBS, out_features=2 * ACT, num_cells=[256, 256]),
                              NormalParamExtractor())
    actor = ProbabilisticActor(TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
                               in_keys=["loc", "scale"], distribution_class=TanhNormal,
                               spec=Bounded(-1.0, 1.0, (ACT,)), return_log_prob=True)
    q = ValueOperator(MLP(in_features=OBS + ACT, out_features=1, num_cells=[256, 256]),
                      in_keys=["observation", "action"])
    loss = SACLoss(actor_network=actor, qvalue_network=q, num_qvalue_nets=2, loss_function="l2")
    loss.make_value_estimator(gamma=0.99)
    loss = loss.to(dev)
    opt = torch.optim.Adam(loss.parameters(), lr=3e-4)
    return loss, opt, SoftUpdate(loss, eps=0.995)


def step_fn(loss, opt, upd, get):
    def step(i):
        td = get()
        out = loss(td)
        total = out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]
        opt.zero_grad(set_to_none=True)
        total.backward()
        opt.step()
        upd.step()
        return total
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=1000)
    ap.add_argument("--only", default=",".join(ROWS))
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--reps", type=int, default=pl.REPS)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    only = set(x for x in args.only.split(",") if x)
    bad = only - set(ROWS)
    if bad:
        ap.error(f"--only: unknown rows {sorted(bad)} (rows: {', '.join(ROWS)})")
    run = Run(args)
    n, B, dev = args.size, args.batch, args.device
    work = {"train": f"train_sac_b{B}", "sample": f"sample_b{B}", "extend": f"extend_{args.chunk}",
            "per": f"per_sample_update_b{B}"}
    print(f"bench_torchrl: {n:,} transitions, B={B}, device {dev}", flush=True)
    try:
        import torch
    except ImportError as e:
        run.gone("*", f"not installed: torch ({e})")
        return finish(run, work)
    threads = args.threads if args.threads is not None else (1 if dev == "cpu" else 0)
    if threads:
        torch.set_num_threads(threads)
    if dev == "cuda" and not torch.cuda.is_available():
        run.gone("*", "no CUDA device for torch")
        return finish(run, work)
    try:
        logging.getLogger("torchrl").setLevel(logging.WARNING)
        import tensordict
        import torchrl
        from tensordict import TensorDict
        from torchrl.data import LazyTensorStorage, TensorDictPrioritizedReplayBuffer, TensorDictReplayBuffer
        logging.getLogger("torchrl").setLevel(logging.WARNING)  # its import sets INFO
    except Exception as e:
        run.gone("*", f"not installed: torchrl / tensordict ({type(e).__name__}: {e})"[:400])
        return finish(run, work)
    try:
        import agrl
        from agrl.torchrl import AgrlSampler, AgrlStorage, collate
        import agrl.torchrl as atr
        run.versions["agrl"] = agrl.__version__
    except Exception as e:
        run.gone("agrl", f"did not import: {type(e).__name__}: {e}"[:400])
        atr = None
    run.versions.update(torch=torch.__version__, torchrl=version_of("torchrl"),
                        tensordict=version_of("tensordict"), python=platform.python_version(),
                        threads=torch.get_num_threads())
    sync = pl.torch_sync(torch, dev)
    d = torch.device(dev)
    data = make_data(torch, TensorDict, n, d, args.seed)
    chunk = make_data(torch, TensorDict, args.chunk, d, args.seed + 1)
    v = f"torchrl {run.versions['torchrl']}"

    def checked(impl, rb):
        s = rb.sample()
        ok = (s.batch_size == torch.Size([B]) and s["observation"].device.type == d.type
              and s["next", "done"].dtype is torch.bool and s["index"].dtype is torch.int64)
        idx = s["index"]
        ok = ok and all(torch.equal(s[k], data[k][idx]) for k in
                        ("observation", "action", ("next", "observation"), ("next", "reward"), ("next", "done")))
        return run.check(impl, "sample_rows", ok, "a sampled row differs from the row written at its index")

    buffers = {}  # impl -> uniform buffer
    if only & {"train", "sample", "extend"}:
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(n, device=d), batch_size=B)
        fill(rb, data)
        if checked("torchrl", rb):
            buffers["torchrl"] = (rb, f"{v} TensorDictReplayBuffer(LazyTensorStorage(N, device={dev}))")
        if atr is not None:
            try:
                rb = atr.TensorDictReplayBuffer(storage=AgrlStorage(n, device=dev, seed=args.seed), batch_size=B)
                fill(rb, data)
                if checked("agrl", rb):
                    buffers["agrl"] = (rb, f"agrl.torchrl.TensorDictReplayBuffer(AgrlStorage(N, device={dev}))")
            except Exception as e:
                run.gone("agrl", f"failed: {type(e).__name__}: {e}"[:600])
    if "sample" in only and "agrl" in buffers:
        st = buffers["agrl"][0].storage  # the same table through TorchRL's own class and sample path
        gen = TensorDictReplayBuffer(storage=st, sampler=AgrlSampler(), collate_fn=collate, batch_size=B)
        if checked("agrl_generic", gen):
            buffers["agrl_generic"] = (gen, "torchrl.data.TensorDictReplayBuffer(AgrlStorage, AgrlSampler): "
                                            "TorchRL's sample path")

    if "train" in only:
        print(f"-- {work['train']}", flush=True)
        fixed = buffers["torchrl"][0].sample() if "torchrl" in buffers else None
        for impl in ("none", "torchrl", "agrl"):
            if impl != "none" and impl not in buffers:
                continue
            loss, opt, upd = sac(torch, d, args.seed)
            if impl == "none":
                if fixed is None:
                    continue
                get, note = (lambda: fixed.clone(False)), "one fixed batch, no buffer: the step without sampling"
            else:
                rb, note = buffers[impl]
                get = rb.sample
            step = step_fn(loss, opt, upd, get)
            ok = bool(torch.isfinite(step(0)).item())
            if run.check(impl, "train_loss_finite", ok, "the SAC loss is not finite"):
                run.time(impl, work["train"], step, sync, f"SACLoss fwd+bwd+Adam+SoftUpdate; {note}")
            del loss, opt, upd
    if "sample" in only:
        print(f"-- {work['sample']}", flush=True)
        for impl in ("torchrl", "agrl", "agrl_generic"):
            if impl in buffers:
                rb, note = buffers[impl]
                run.time(impl, work["sample"], lambda i, rb=rb: rb.sample(), sync, f"sample(); {note}")
    if "extend" in only:
        print(f"-- {work['extend']}", flush=True)
        for impl in ("torchrl", "agrl"):
            if impl in buffers:
                rb, note = buffers[impl]
                run.time(impl, work["extend"], lambda i, rb=rb: rb.extend(chunk), sync,
                         f"extend({args.chunk} on {dev}); {note}")
    buffers.clear()
    gc.collect()

    if "per" in only:
        print(f"-- {work['per']}", flush=True)
        g = torch.Generator(device="cpu").manual_seed(args.seed + 2)
        prios = [(torch.rand(B, generator=g) + 1e-3).to(d) for _ in range(16)]

        def per_row(impl, per, note):
            per.update_priority(torch.arange(n, device=d), (torch.rand(n, generator=g) + 1e-3).to(d))
            if not checked(impl, per) or "priority_weight" not in per.sample().keys():
                return

            def body(i):
                s = per.sample()
                per.update_priority(s["index"], prios[i % 16])
                return s
            run.time(impl, work["per"], body, sync, f"sample() + update_priority(index, device prios); {note}")

        try:
            per = TensorDictPrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, storage=LazyTensorStorage(n, device=d),
                                                    batch_size=B)
            fill(per, data)
            tree = type(getattr(per.prioritized_sampler, "_sum_tree", None)).__name__
        except Exception as e:
            per = None
            why = f"TensorDictPrioritizedReplayBuffer did not load: {type(e).__name__}: {e}"[:600]
            if dev != "cuda":
                run.gone("torchrl", why)
            else:
                try:
                    per = TensorDictPrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, batch_size=B,
                                                            storage=LazyTensorStorage(n, device=d),
                                                            sampler_device="cpu")
                    fill(per, data)
                    tree = "tree on the host (sampler_device='cpu'; the default did not load)"
                except Exception as e2:
                    run.gone("torchrl", f"{why}; with sampler_device='cpu' neither: {type(e2).__name__}: {e2}"[:600])
                    per = None
        if per is not None:
            per_row("torchrl", per, f"{v} TensorDictPrioritizedReplayBuffer(alpha {ALPHA}, beta {BETA}); {tree}")
            del per
            gc.collect()
        if atr is not None:
            try:
                per = atr.TensorDictPrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, batch_size=B,
                                                            storage=AgrlStorage(n, device=dev, seed=args.seed))
                fill(per, data)
                per_row("agrl", per, f"agrl.torchrl.TensorDictPrioritizedReplayBuffer(alpha {ALPHA}, beta {BETA})")
                del per
            except Exception as e:
                run.gone("agrl", f"prioritized failed: {type(e).__name__}: {e}"[:600])
    return finish(run, work)


def finish(run, work):
    print("\n== torchrl / agrl (above 1: agrl faster)", flush=True)
    ratios = []
    for w in work.values():
        t, a = run.us("torchrl", w), run.us("agrl", w)
        line = f"  {w:24} torchrl {t if t is not None else '-':>10} us  agrl {a if a is not None else '-':>10} us"
        if t and a:
            ratios.append({"work": w, "torchrl_us": t, "agrl_us": a, "ratio": round(t / a, 3)})
            line += f"  = {t / a:6.2f}x"
        g = run.us("agrl_generic", w)
        if g is not None:
            line += f"  (agrl through TorchRL's sample path: {g} us)"
        nb = run.us("none", w)
        if nb is not None:
            line += f"  (the step without a buffer: {nb} us)"
        print(line, flush=True)
    bad = [c for c in run.checks if not c["ok"]]
    print(f"checks: {len(run.checks) - len(bad)} passed, {len(bad)} failed", flush=True)
    if run.args.json:
        with open(run.args.json, "w") as fh:
            json.dump({"bench": "bench_torchrl", "device": run.args.device, "size": run.args.size,
                       "batch": run.args.batch, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                       "versions": run.versions, "rows": run.rows, "absent": run.absent,
                       "checks": run.checks, "ratios": ratios}, fh, indent=1)
        print(f"wrote {run.args.json}", flush=True)
    return 0


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*batch.size.*")
        sys.exit(main())
