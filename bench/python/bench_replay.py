"""agrl's Python replay buffer beside the replay buffers Python users pick
today, in one invocation on one machine, and beside agrl's own C rows.

usage: python3 bench/python/bench_replay.py [--device cpu|cuda] [--iters N] [--reps N]
           [--json FILE] [--cli PATH] [--only ROWS] [--peers IMPLS]

Rows (a mujoco transition: obs f32[17], action f32[6], reward f32[1],
next_obs f32[17], done f32[1] = 42 f32; tables of 1,000,000 transitions,
full, random values):

  sample           sample B=256 from the 1M transitions (data on the device
                   with --device cuda)
  sample_dlpack    agrl only: sample + torch.from_dlpack of every field (the
                   step a torch consumer takes); set beside the peers whose
                   sample already returns torch tensors
  add_1            add one transition from host (numpy) arrays
  add_65536        add 65,536 transitions from host arrays in one call
  per              prioritized sample of 256 + update_priorities of those 256
                   (alpha 0.6, beta 0.4), and each half on its own

Implementations (each that imports; the others are reported, never faked):

  agrl      agrl.ReplayBuffer(ctx, 1_000_000, fields, prioritized=...)
  torchrl   TensorDictReplayBuffer(storage=LazyTensorStorage(1M, device=D)) and
            TensorDictPrioritizedReplayBuffer(alpha, beta, storage=...); when its
            default sum tree does not load (the C++ extension built for another
            torch; no CUDA tree in the PyPI wheel) that is reported, and on cuda
            the rows are taken with sampler_device="cpu"
  flashbax  make_flat_buffer / make_prioritised_flat_buffer (JAX), one row of
            a 1M time axis; sample returns (t, t+1) pairs of transitions
  cpprb     ReplayBuffer / PrioritizedReplayBuffer (host only)
  sb3       stable_baselines3's ReplayBuffer(1M, Box(17), Box(6), device=D)

Timing is bench/peers/peerlib.py's (the same as `agrl bench`): a repetition
runs the call `iters` times back to back, then waits for the device once
(ctx.sync(), torch.cuda.synchronize(), jax.block_until_ready); per-call time
= wall time / iters; 2 warm-up repetitions, then --reps timed ones (9);
the median is reported with min and max. `iters` is chosen so that a
repetition lasts ~0.2 s unless --iters says otherwise. Every implementation
is checked once (shapes, sizes) before it is timed.

--cli PATH runs `PATH bench --device D --filter mujoco` and `--filter per_`
first, in the same invocation, and prints the Python rows against the C
rows of the same work, with the targets:
  sample() within 3 us of the C row sample_gather_mujoco_b256_eager (the same
    two launches: draw + gather) and at least 20x faster than TorchRL's sample;
  add() of one transition at most 12 us;
  add() of 65,536 at most 1.2x the C row write_65536_mujoco_pageable.
"""
import argparse
import contextlib
import gc
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import peerlib as pl  # noqa: E402

N = 1_000_000
B = 256
K = 65_536
ALPHA, BETA = 0.6, 0.4
SETS = 16  # prepared priority sets, used in turn
FIELDS = (("obs", 17), ("action", 6), ("reward", 1), ("next_obs", 17), ("done", 1))

ROWS = ("sample", "sample_dlpack", "add_1", "add_65536", "per", "door")
WORKS = {  # row key -> (work name, label)
    "sample": [("sample_mujoco_b256_1m", "sample B=256 of 1M")],
    "sample_dlpack": [("sample_dlpack_mujoco_b256_1m", "sample + from_dlpack (torch)")],
    "add_1": [("add_1_mujoco_host", "add 1 transition from host")],
    "add_65536": [("add_65536_mujoco_host", "add 65,536 from host, one call")],
    "per": [("per_sample_update_b256_1m", "PER sample + update_priorities B=256"),
            ("per_sample_b256_1m", "PER sample B=256 of 1M"),
            ("per_update_b256", "PER update_priorities of 256")],
    "door": [("sample_torch_out_b256_1m", "sample(256, out=) into torch"),
             ("sample_torch_b256_1m", "agrl.torch sample(256): new tensors"),
             ("sample_cupy_out_b256_1m", "sample(256, out=) into CuPy"),
             ("sample_jax_b256_1m", "agrl.jax sample(256): one array"),
             ("per_torch_b256_1m", "PER sample + update, torch"),
             ("update_torch_b256", "update_priorities(256), torch"),
             ("update_numpy_b256", "update_priorities(256), numpy"),
             ("add_1_torch", "add 1 transition, torch tensors"),
             ("call_noop", "profile: a method call (len)"),
             ("sample_out_nohandoff_b256_1m", "profile: sample(out=), no hand-off")],
}
LABEL = {w: label for rows in WORKS.values() for w, label in rows}
ORDER = [w for k in ROWS for w, _ in WORKS[k]]
IMPLS = ("agrl", "torchrl", "flashbax", "cpprb", "sb3")
# rows whose peers are another work's rows: (the peers' work, the peers)
TORCH_OUT = {"sample_dlpack_mujoco_b256_1m": ("sample_mujoco_b256_1m", ("torchrl", "sb3")),
             "sample_torch_out_b256_1m": ("sample_mujoco_b256_1m", ("torchrl", "sb3")),
             "sample_torch_b256_1m": ("sample_mujoco_b256_1m", ("torchrl", "sb3")),
             "sample_cupy_out_b256_1m": ("sample_mujoco_b256_1m", ("torchrl", "cpprb")),
             "sample_jax_b256_1m": ("sample_mujoco_b256_1m", ("flashbax",)),
             "per_torch_b256_1m": ("per_sample_update_b256_1m", ("torchrl", "cpprb")),
             "update_torch_b256": ("per_update_b256", ("torchrl", "cpprb")),
             "update_numpy_b256": ("per_update_b256", ("cpprb",)),
             "add_1_torch": ("add_1_mujoco_host", ("sb3", "torchrl"))}


class Run:
    """Collects rows, absent implementations and notes; times bodies."""

    def __init__(self, args):
        self.args = args
        self.rows = []     # {"impl", "work", "us", "min", "max", "note"}
        self.absent = []   # {"impl", "why"}
        self.versions = {}
        self.checks = []

    def want(self, key):
        return key in self.args.only

    def time(self, impl, work, body, sync, note):
        a = self.args
        iters = a.iters or pl.auto_iters(body, sync)
        med, lo, hi = pl.measure(body, iters, sync, reps=a.reps)
        r = {"impl": impl, "work": work, "us": round(med, 3), "min": round(lo, 3), "max": round(hi, 3),
             "iters": iters, "note": note}
        self.rows.append(r)
        print(f"  {impl:9} {work:30} {med:11.2f} us  ({lo:.2f} - {hi:.2f}, {iters} calls a rep)  {note}",
              flush=True)

    def gone(self, impl, why):
        self.absent.append({"impl": impl, "why": why})
        print(f"  {impl:9} {why}", flush=True)

    def us(self, impl, work):
        for r in self.rows:
            if r["impl"] == impl and r["work"] == work:
                return r["us"]
        return None


def version_of(dist, module=None):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return getattr(module, "__version__", "?")


def host_data(np, n, seed=0):
    """n random mujoco transitions on the host, one float32 (n, width) array a field."""
    rng = np.random.default_rng(seed)
    out = {name: rng.standard_normal((n, w), dtype=np.float32) for name, w in FIELDS}
    out["done"] = (rng.random((n, 1)) < pl.DONE_P).astype(np.float32)
    return out


def chunks(data, size=100_000):
    n = len(data["obs"])
    for c0 in range(0, n, size):
        yield {k: v[c0:c0 + size] for k, v in data.items()}


def one(data, i=0):
    """Transition i as an environment loop hands it over: (17,), (6,), (1,), (17,), (1,)."""
    return {k: v[i].copy() for k, v in data.items()}


def sub(data, k):
    return {key: v[:k].copy() for key, v in data.items()}


# ---------------------------------------------------------------- agrl

def bench_agrl(run, np, data, dev, torch):
    import agrl
    run.versions["agrl"] = agrl.library_version()
    ctx = agrl.Context(dev)
    run.versions["agrl_device"] = ctx.device_name
    sync = lambda _last=None: ctx.sync()  # noqa: E731
    spec = {name: (w,) for name, w in FIELDS}
    t1, tk = one(data, 7), sub(data, K)

    if any(run.want(k) for k in ("sample", "sample_dlpack", "add_1", "add_65536")):
        rb = agrl.ReplayBuffer(ctx, N, spec, seed=1)
        for c in chunks(data):
            rb.add(**c)
        ctx.sync()
        assert len(rb) == N
        s = rb.sample(B)
        assert s["obs"].shape == (B, 17) and s["action"].shape == (B, 6) and s["done"].shape == (B, 1)
        idx = np.asarray(s["indices"].numpy(), dtype=np.int64)
        assert np.array_equal(s["obs"].numpy(), data["obs"][idx]), "agrl sample: rows differ from the stored ones"
        where = f"on {ctx.device}"
        if run.want("sample"):
            run.time("agrl", "sample_mujoco_b256_1m", lambda i: rb.sample(B), sync,
                     f"ReplayBuffer.sample(256): dict of 5 device tensors + indices, {where}")
        if run.want("sample_dlpack"):
            if torch is None:
                run.gone("agrl", "sample_dlpack_mujoco_b256_1m: torch does not import")
            else:
                from_dlpack = torch.from_dlpack
                t = {k: from_dlpack(v) for k, v in rb.sample(B).items()}
                assert t["obs"].shape == (B, 17) and str(t["obs"].device).startswith(dev)
                tsync = pl.torch_sync(torch, dev)

                def both(_last=None):
                    ctx.sync()
                    tsync()

                run.time("agrl", "sample_dlpack_mujoco_b256_1m",
                         lambda i: {k: from_dlpack(v) for k, v in rb.sample(B).items()}, both,
                         "sample(256) + torch.from_dlpack of the 6 tensors (zero-copy)")
        if run.want("add_1"):
            pos = rb.position
            rb.add(**t1)
            assert rb.position == (pos + 1) % N
            run.time("agrl", "add_1_mujoco_host", lambda i: rb.add(**t1), sync,
                     "ReplayBuffer.add(**5 numpy arrays of one transition)")
        if run.want("add_65536"):
            pos = rb.position
            rb.add(**tk)
            assert rb.position == (pos + K) % N
            run.time("agrl", "add_65536_mujoco_host", lambda i: rb.add(**tk), sync,
                     "ReplayBuffer.add(**5 numpy arrays of 65,536 transitions)")
        rb.free()
        del rb

    if run.want("per"):
        per = agrl.ReplayBuffer(ctx, N, spec, prioritized=True, alpha=ALPHA, beta=BETA, seed=2)
        for c in chunks(data):
            per.add(**c)
        rng = np.random.default_rng(3)
        per.update_priorities(np.arange(N, dtype=np.int64), (rng.random(N) + 1e-3).astype(np.float32))
        ctx.sync()
        host_sets = [(rng.integers(0, N, B).astype(np.int64), (rng.random(B) + 1e-3).astype(np.float32))
                     for _ in range(SETS)]
        # priorities as a training step has them: on the device (torch, where it imports)
        if dev == "cuda" and torch is not None:
            prio = [torch.as_tensor(p, device="cuda") for _, p in host_sets]
            idx_sets = [torch.as_tensor(i, device="cuda") for i, _ in host_sets]
            how = "torch device tensors"
        elif dev == "cuda":
            prio, idx_sets, how = None, None, "the sampled weights"
        else:
            prio, idx_sets, how = [p for _, p in host_sets], [i for i, _ in host_sets], "numpy arrays"
        s = per.sample(B)
        assert s["weights"].shape == (B,) and s["indices"].shape == (B,)
        total0 = per.total_priority()
        per.update_priorities(s["indices"], prio[0] if prio else s["weights"])
        assert per.total_priority() != total0

        def sample_update(i):
            s = per.sample(B)
            per.update_priorities(s["indices"], prio[i % SETS] if prio else s["weights"])
            return s

        run.time("agrl", "per_sample_update_b256_1m", sample_update, sync,
                 f"sample(256) + update_priorities(sampled indices, {how})")
        run.time("agrl", "per_sample_b256_1m", lambda i: per.sample(B), sync,
                 "prioritized sample(256): indices, weights, 5 fields")
        if idx_sets is not None:
            run.time("agrl", "per_update_b256",
                     lambda i: per.update_priorities(idx_sets[i % SETS], prio[i % SETS]), sync,
                     f"update_priorities of 256 ({how}), {SETS} sets in turn")
        per.free()
        del per
    if run.want("door"):
        bench_door(run, np, data, dev, torch, ctx)
    ctx.free()


def bench_door(run, np, data, dev, torch, ctx):
    """The batch as the consumer's framework holds it, and the other calls
    from torch and numpy."""
    import agrl
    spec = {name: (w,) for name, w in FIELDS}
    sync = lambda _last=None: ctx.sync()  # noqa: E731
    if torch is None:
        run.gone("agrl", "door rows: torch does not import")
        return
    import agrl.torch as at
    tsync = pl.torch_sync(torch, dev)

    def both(_last=None):
        ctx.sync()
        tsync()

    rb = at.ReplayBuffer(ctx, N, spec, seed=5)
    for c in chunks(data):
        rb.add(**c)
    out = rb.empty_batch(B)
    b = rb.sample(B, out=out)
    tsync()
    idx = b["indices"].cpu().numpy()
    assert b is out and np.array_equal(out["obs"].cpu().numpy(), data["obs"][idx]), "sample(out=) rows differ"
    fresh = rb.sample(B)
    assert np.array_equal(fresh["action"].cpu().numpy(), data["action"][fresh["indices"].cpu().numpy()])
    run.time("agrl", "sample_torch_out_b256_1m", lambda i: rb.sample(B, out=out), both,
             "agrl.torch: sample(256, out=torch tensors kept by the caller): torch holds the batch on return")
    run.time("agrl", "sample_torch_b256_1m", lambda i: rb.sample(B), both,
             "agrl.torch: sample(256): 6 new torch tensors (one block, imported as capsules)")
    base = agrl.ReplayBuffer.sample
    run.time("agrl", "call_noop", lambda i: len(rb), both, "len(rb): the cost of a method call with the lock")
    run.time("agrl", "sample_out_nohandoff_b256_1m", lambda i: base(rb, B, out=out, stream=-1), both,
             "sample(256, out=, stream=-1): the recorded replay alone, no stream hand-off")
    try:
        import cupy
        cout = {k: cupy.empty((B, w), dtype=cupy.float32) for k, w in FIELDS}
        cout["indices"] = cupy.empty(B, dtype=cupy.int64)
        base(rb, B, out=cout)
        cupy.cuda.runtime.deviceSynchronize()
        assert np.array_equal(cupy.asnumpy(cout["obs"]), data["obs"][cupy.asnumpy(cout["indices"])])
        run.versions["cupy"] = cupy.__version__
        run.time("agrl", "sample_cupy_out_b256_1m", lambda i: base(rb, B, out=cout),
                 lambda _l=None: (ctx.sync(), cupy.cuda.runtime.deviceSynchronize()),
                 "sample(256, out=CuPy arrays kept by the caller)")
    except ImportError as e:
        run.gone("agrl", f"sample_cupy_out_b256_1m: cupy does not import: {e}")
    try:
        import jax
        import agrl.jax as aj
        run.versions["jax"] = jax.__version__
        jb = aj.ReplayBuffer(ctx, N, spec, seed=6)
        for c in chunks(data):
            jb.add(**c)
        p = jb.sample(B)
        u = jax.jit(jb.unpack)(p)
        ji = np.asarray(u["indices"])
        assert np.array_equal(np.asarray(u["obs"]), data["obs"][ji]), "agrl.jax rows differ"
        run.time("agrl", "sample_jax_b256_1m", lambda i: jb.sample(B), lambda last=None: (
            ctx.sync(), jax.block_until_ready(last) if last is not None else None),
            f"agrl.jax: sample(256): {len(p)} JAX array (whole rows of bytes), unpacked inside jit")
        jb.free()
    except ImportError as e:
        run.gone("agrl", f"sample_jax_b256_1m: jax does not import: {e}")
    rb.free()
    del rb
    per = at.ReplayBuffer(ctx, N, spec, prioritized=True, alpha=ALPHA, beta=BETA, seed=7)
    for c in chunks(data):
        per.add(**c)
    rng = np.random.default_rng(4)
    tdev = torch.device(dev)
    pout = per.empty_batch(B)
    prios = [torch.as_tensor(rng.random(B) + 1e-3, dtype=torch.float32, device=tdev) for _ in range(SETS)]
    tidx = [torch.as_tensor(rng.integers(0, N, B), device=tdev) for _ in range(SETS)]
    nidx = [i.cpu().numpy() for i in tidx]
    nprio = [p.cpu().numpy() for p in prios]

    def per_step(i):
        b = per.sample(B, out=pout)
        per.update_priorities(b["indices"], prios[i % SETS])

    t0 = per.total_priority()
    per_step(0)
    assert per.total_priority() != t0
    run.time("agrl", "per_torch_b256_1m", per_step, both,
             "agrl.torch: PER sample(256, out=) + update_priorities(its indices, torch priorities)")
    run.time("agrl", "update_torch_b256", lambda i: per.update_priorities(tidx[i % SETS], prios[i % SETS]), both,
             f"update_priorities(torch int64, torch float32) of 256, {SETS} sets in turn")
    run.time("agrl", "update_numpy_b256", lambda i: per.update_priorities(nidx[i % SETS], nprio[i % SETS]), both,
             f"update_priorities(numpy int64, numpy float32) of 256, {SETS} sets in turn")
    per.free()
    ub = agrl.ReplayBuffer(ctx, N, spec, seed=8)  # uniform, as add_1_mujoco_host's table
    t1 = {k: torch.as_tensor(v, device=tdev) for k, v in one(data, 9).items()}
    ub.add(**t1)
    assert ub.position == 1 and np.array_equal(ub.gather([0])["obs"].numpy()[0], one(data, 9)["obs"])
    run.time("agrl", "add_1_torch", lambda i: ub.add(**t1), both,
             "add(**5 torch tensors of one transition) on the table's device")
    ub.free()


# ---------------------------------------------------------------- TorchRL

def bench_torchrl(run, np, data, dev, torch):
    if torch is None:
        run.gone("torchrl", "not installed (torch does not import)")
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            logging.getLogger("torchrl").setLevel(logging.WARNING)
            import tensordict
            import torchrl
            from tensordict import TensorDict
            from torchrl.data import (LazyTensorStorage, TensorDictPrioritizedReplayBuffer,
                                      TensorDictReplayBuffer)
        except ImportError as e:
            run.gone("torchrl", f"not installed: {type(e).__name__}: {e}")
            return
        except Exception as e:
            run.gone("torchrl", f"did not load: {type(e).__name__}: {e}"[:400])
            return
    logging.getLogger("torchrl").setLevel(logging.WARNING)  # its import sets INFO
    ext_warn = [str(w.message) for w in caught if "_torchrl" in str(w.message) or "symbol" in str(w.message)]
    run.versions["torchrl"] = version_of("torchrl", torchrl)
    run.versions["tensordict"] = version_of("tensordict", tensordict)
    d = torch.device(dev)
    sync = pl.torch_sync(torch, dev)
    tdata = {k: torch.from_numpy(v) for k, v in data.items()}

    def td_of(arrays, batch):
        return TensorDict({k: torch.from_numpy(v) for k, v in arrays.items()}, batch_size=batch)

    def fill(rb):
        for c0 in range(0, N, 100_000):
            rb.extend(TensorDict({k: v[c0:c0 + 100_000] for k, v in tdata.items()}, batch_size=[min(100_000, N - c0)]))

    t1 = td_of(one(data, 7), [])      # prepared on the host beforehand
    tk = td_of(sub(data, K), [K])
    note_v = f"torchrl {run.versions['torchrl']}"
    if any(run.want(k) for k in ("sample", "add_1", "add_65536")):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(N, device=d), batch_size=B)
        fill(rb)
        s = rb.sample()
        assert len(rb) == N and s["obs"].shape == (B, 17) and s["obs"].device.type == d.type
        assert torch.equal(s["obs"].cpu(), tdata["obs"][s["index"].cpu()])
        if run.want("sample"):
            run.time("torchrl", "sample_mujoco_b256_1m", lambda i: rb.sample(), sync,
                     f"{note_v} TensorDictReplayBuffer(LazyTensorStorage(1M, device={dev})).sample()")
        if run.want("add_1"):
            rb.add(t1)
            run.time("torchrl", "add_1_mujoco_host", lambda i: rb.add(t1), sync,
                     "rb.add(TensorDict of one transition on the host, prepared beforehand)")
        if run.want("add_65536"):
            rb.extend(tk)
            run.time("torchrl", "add_65536_mujoco_host", lambda i: rb.extend(tk), sync,
                     "rb.extend(TensorDict of 65,536 on the host, prepared beforehand)")
        del rb, s
        gc.collect()

    if run.want("per"):
        def make_per(**kw):
            per = TensorDictPrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, storage=LazyTensorStorage(N, device=d),
                                                    batch_size=B, **kw)
            fill(per)
            return per, type(getattr(per.prioritized_sampler, "_sum_tree", None)).__name__

        try:
            per, tree = make_per()
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
            if ext_warn:
                why += f" ({ext_warn[0]})"
            run.gone("torchrl", f"TensorDictPrioritizedReplayBuffer did not load: {why}"[:600])
            gc.collect()
            if dev != "cuda":
                return
            # the documented alternative for device storage: the sum tree on the host
            try:
                per, tree = make_per(sampler_device="cpu")
            except Exception as e:
                run.gone("torchrl", f"TensorDictPrioritizedReplayBuffer(sampler_device='cpu') did not load either: "
                                    f"{type(e).__name__}: {e}"[:600])
                return
            tree += " on the host (sampler_device='cpu'; the default CUDA tree did not load)"
        rng = np.random.default_rng(3)
        per.update_priority(torch.arange(N), torch.as_tensor(rng.random(N) + 1e-3, dtype=torch.float32))
        sets = [(torch.as_tensor(rng.integers(0, N, B), device=d),
                 torch.as_tensor(rng.random(B) + 1e-3, dtype=torch.float32, device=d)) for _ in range(SETS)]
        s = per.sample()
        assert s["obs"].shape == (B, 17) and "index" in s.keys()
        per.update_priority(s["index"], sets[0][1])

        def sample_update(i):
            s = per.sample()
            per.update_priority(s["index"], sets[i % SETS][1])
            return s

        run.time("torchrl", "per_sample_update_b256_1m", sample_update, sync,
                 f"TensorDictPrioritizedReplayBuffer: sample() + update_priority(index, device prios); {tree}")
        run.time("torchrl", "per_sample_b256_1m", lambda i: per.sample(), sync, f"sample(); {tree}")
        run.time("torchrl", "per_update_b256", lambda i: per.update_priority(*sets[i % SETS]), sync,
                 f"update_priority of 256 device values, {SETS} sets in turn")
        del per
        gc.collect()


# ---------------------------------------------------------------- Flashbax

def bench_flashbax(run, np, data, dev):
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # agrl and torch share the GPU
    try:
        import jax
    except ImportError as e:
        run.gone("flashbax", f"not installed: jax: {type(e).__name__}: {e}")
        return
    try:
        device = jax.devices("cpu" if dev == "cpu" else "gpu")[0]
    except Exception as e:
        run.gone("flashbax", f"no {dev} device for jax: {type(e).__name__}: {e}"[:400])
        return
    try:
        with contextlib.redirect_stdout(sys.stderr):
            import flashbax as fbx
    except ImportError as e:
        run.gone("flashbax", f"not installed: {type(e).__name__}: {e}")
        return
    run.versions["flashbax"] = version_of("flashbax", fbx)
    run.versions["jax"] = jax.__version__
    jnp = jax.numpy
    sync = pl.jax_sync
    seq_data = {k: (v[:, 0] if v.shape[1] == 1 else v) for k, v in data.items()}  # scalars as ()
    shapes = {k: v.shape[1:] for k, v in seq_data.items()}

    def fill(buffer):
        with jax.default_device(device):
            state = buffer.init({k: jnp.zeros(s, jnp.float32) for k, s in shapes.items()})
        seq = jax.device_put(seq_data, device)
        state = jax.jit(buffer.add, donate_argnums=0)(state, seq)
        del seq
        return state

    t1 = {k: v[7:8].copy() for k, v in seq_data.items()}   # a sequence of one transition, host
    tk = {k: v[:K].copy() for k, v in seq_data.items()}
    v = f"flashbax {run.versions['flashbax']}"
    if any(run.want(k) for k in ("sample", "add_1", "add_65536")):
        with contextlib.redirect_stdout(sys.stderr):
            buffer = fbx.make_flat_buffer(max_length=N, min_length=B, sample_batch_size=B, add_sequences=True,
                                          add_batch_size=None)
        st = {"state": fill(buffer), "key": jax.device_put(jax.random.PRNGKey(0), device)}
        assert bool(st["state"].is_full)

        @jax.jit
        def sample(state, key):
            key, k2 = jax.random.split(key)
            return key, buffer.sample(state, k2).experience

        _, pair = sample(st["state"], st["key"])
        assert pair.first["obs"].shape == (B, 17)

        def body_sample(i):
            st["key"], out = sample(st["state"], st["key"])
            return out

        if run.want("sample"):
            run.time("flashbax", "sample_mujoco_b256_1m", body_sample, sync,
                     f"{v} jit(key split + make_flat_buffer.sample): 256 (t, t+1) pairs = 2 x 42 f32 each")
        add = jax.jit(buffer.add, donate_argnums=0)

        def adder(seq):
            def body(i):
                st["state"] = add(st["state"], seq)
                return st["state"].experience["obs"]
            return body

        if run.want("add_1"):
            run.time("flashbax", "add_1_mujoco_host", adder(t1), sync,
                     "jit(buffer.add)(state, numpy sequence of 1), state donated")
        if run.want("add_65536"):
            run.time("flashbax", "add_65536_mujoco_host", adder(tk), sync,
                     "jit(buffer.add)(state, numpy sequence of 65,536), state donated")
        del st, buffer
        gc.collect()

    if run.want("per"):
        fdev = "gpu" if dev == "cuda" else "cpu"
        with contextlib.redirect_stdout(sys.stderr):
            buffer = fbx.make_prioritised_flat_buffer(max_length=N, min_length=B, sample_batch_size=B,
                                                      add_sequences=True, add_batch_size=None,
                                                      priority_exponent=ALPHA, device=fdev)
        state = fill(buffer)
        rng = np.random.default_rng(3)
        set_prio = jax.jit(buffer.set_priorities, donate_argnums=0)
        state = set_prio(state, jax.device_put(np.arange(N - 1, dtype=np.int32), device),
                         jax.device_put((rng.random(N - 1, dtype=np.float32) + 1e-3), device))
        sets = [(jax.device_put(rng.integers(0, N - 1, B, dtype=np.int32), device),
                 jax.device_put(rng.random(B, dtype=np.float32) + 1e-3, device)) for _ in range(SETS)]

        @jax.jit
        def sample(state, key):
            key, k2 = jax.random.split(key)
            return key, buffer.sample(state, k2)

        st = {"state": state, "key": jax.device_put(jax.random.PRNGKey(0), device)}
        st["key"], s = sample(st["state"], st["key"])
        assert s.indices.shape == (B,)
        st["state"] = set_prio(st["state"], s.indices, sets[0][1])

        def sample_update(i):
            st["key"], s = sample(st["state"], st["key"])
            st["state"] = set_prio(st["state"], s.indices, sets[i % SETS][1])
            return st["state"].sum_tree_state.nodes

        def sample_only(i):
            st["key"], s = sample(st["state"], st["key"])
            return s.indices

        def update_only(i):
            st["state"] = set_prio(st["state"], *sets[i % SETS])
            return st["state"].sum_tree_state.nodes

        run.time("flashbax", "per_sample_update_b256_1m", sample_update, sync,
                 f"{v} jit(sample) + jit(set_priorities)(sampled indices), device={fdev!r}, state donated")
        run.time("flashbax", "per_sample_b256_1m", sample_only, sync, "jit(key split + buffer.sample)")
        run.time("flashbax", "per_update_b256", update_only, sync,
                 f"jit(set_priorities) of 256, {SETS} sets in turn, state donated")
        del st, state, buffer
        gc.collect()


# ---------------------------------------------------------------- cpprb

def bench_cpprb(run, np, data, dev):
    try:
        import cpprb
    except ImportError as e:
        run.gone("cpprb", f"not installed: {type(e).__name__}: {e}")
        return
    run.versions["cpprb"] = version_of("cpprb", cpprb)
    env_dict = {"obs": {"shape": 17}, "act": {"shape": 6}, "rew": {}, "next_obs": {"shape": 17}, "done": {}}
    no_sync = lambda _last=None: None  # noqa: E731  (host memory: nothing to wait for)

    def kw(d):
        return dict(obs=d["obs"], act=d["action"], rew=d["reward"], next_obs=d["next_obs"], done=d["done"])

    def fill(rb):
        for c in chunks(data):
            rb.add(**kw(c))

    t1, tk = kw(one(data, 7)), kw(sub(data, K))
    host = " (host memory)" if dev == "cuda" else ""
    if any(run.want(k) for k in ("sample", "add_1", "add_65536")):
        rb = cpprb.ReplayBuffer(N, env_dict)
        fill(rb)
        assert rb.get_stored_size() == N and rb.sample(B)["obs"].shape == (B, 17)
        if run.want("sample"):
            run.time("cpprb", "sample_mujoco_b256_1m", lambda i: rb.sample(B), no_sync,
                     f"cpprb {run.versions['cpprb']} ReplayBuffer.sample(256): dict of numpy arrays{host}")
        if run.want("add_1"):
            run.time("cpprb", "add_1_mujoco_host", lambda i: rb.add(**t1), no_sync, "ReplayBuffer.add(one transition)")
        if run.want("add_65536"):
            run.time("cpprb", "add_65536_mujoco_host", lambda i: rb.add(**tk), no_sync,
                     "ReplayBuffer.add(65,536 transitions)")
        del rb
        gc.collect()
    if run.want("per"):
        per = cpprb.PrioritizedReplayBuffer(N, env_dict, alpha=ALPHA)
        fill(per)
        rng = np.random.default_rng(3)
        per.update_priorities(np.arange(N), rng.random(N) + 1e-3)
        sets = [(rng.integers(0, N, B), rng.random(B) + 1e-3) for _ in range(SETS)]
        s = per.sample(B, beta=BETA)
        assert s["indexes"].shape == (B,) and np.all(np.isfinite(s["weights"]))

        def sample_update(i):
            s = per.sample(B, beta=BETA)
            per.update_priorities(s["indexes"], sets[i % SETS][1])
            return s

        run.time("cpprb", "per_sample_update_b256_1m", sample_update, no_sync,
                 f"PrioritizedReplayBuffer.sample(256, beta) + update_priorities(indexes, p){host}")
        run.time("cpprb", "per_sample_b256_1m", lambda i: per.sample(B, beta=BETA), no_sync,
                 "PrioritizedReplayBuffer.sample(256, beta 0.4)")
        run.time("cpprb", "per_update_b256", lambda i: per.update_priorities(*sets[i % SETS]), no_sync,
                 f"update_priorities of 256, {SETS} sets in turn")
        del per
        gc.collect()


# ---------------------------------------------------------------- Stable-Baselines3

def bench_sb3(run, np, data, dev, torch):
    if torch is None:
        run.gone("sb3", "not installed (torch does not import)")
        return
    try:
        import stable_baselines3
        from gymnasium import spaces
        from stable_baselines3.common.buffers import ReplayBuffer
    except ImportError as e:
        run.gone("sb3", f"not installed: {type(e).__name__}: {e}")
        return
    run.versions["stable_baselines3"] = version_of("stable_baselines3", stable_baselines3)
    sync = pl.torch_sync(torch, dev)
    if not any(run.want(k) for k in ("sample", "add_1", "add_65536")):
        return
    obs_space = spaces.Box(-np.inf, np.inf, (17,), np.float32)
    act_space = spaces.Box(-1.0, 1.0, (6,), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its memory check
        rb = ReplayBuffer(N, obs_space, act_space, device=dev, n_envs=1)
    # filled through its storage arrays (its add takes one step of n_envs at a time)
    rb.observations[:] = data["obs"][:, None]
    rb.next_observations[:] = data["next_obs"][:, None]
    rb.actions[:] = data["action"][:, None]
    rb.rewards[:] = data["reward"]
    rb.dones[:] = data["done"]
    rb.full, rb.pos = True, 0
    s = rb.sample(B)
    assert s.observations.shape == (B, 17) and s.observations.device.type == dev
    v = f"stable-baselines3 {run.versions['stable_baselines3']}"
    if run.want("sample"):
        run.time("sb3", "sample_mujoco_b256_1m", lambda i: rb.sample(B), sync,
                 f"{v} ReplayBuffer(device={dev}).sample(256): numpy gather + copies to {dev}")
    t = one(data, 7)
    o, no, a, r, d = (t["obs"][None], t["next_obs"][None], t["action"][None], t["reward"], t["done"])
    infos = [{}]
    if run.want("add_1"):
        run.time("sb3", "add_1_mujoco_host", lambda i: rb.add(o, no, a, r, d, infos), sync,
                 "ReplayBuffer.add(obs, next_obs, action, reward, done, infos) of one step")
    if run.want("add_65536"):
        tk = sub(data, K)
        ok, nk, ak, rk, dk = tk["obs"][:, None], tk["next_obs"][:, None], tk["action"][:, None], tk["reward"], tk["done"]

        def add_k(i):
            for j in range(K):
                rb.add(ok[j], nk[j], ak[j], rk[j], dk[j], infos)

        run.time("sb3", "add_65536_mujoco_host", add_k, sync,
                 "65,536 add() calls: SB3's ReplayBuffer has no batch add")


# ---------------------------------------------------------------- the C rows

def run_cli(run, path, dev):
    """`agrl bench` for the rows of the same work; returns {work (no cpu_ prefix): row}."""
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "c.json")
        for f in ("mujoco", "per_"):
            cmd = [path, "bench", "--device", dev, "--filter", f, "--json", out]
            if run.args.iters:
                cmd += ["--iters", str(run.args.iters)]
            print("$ " + " ".join(cmd), flush=True)
            try:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
                print(p.stdout, end="", flush=True)
                if p.returncode:
                    print(f"agrl bench exited with status {p.returncode}")
            except (OSError, subprocess.TimeoutExpired) as e:
                print(f"agrl bench did not run: {type(e).__name__}: {e}")
        if os.path.exists(out):
            with open(out) as fh:
                for line in fh:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    w = r.get("work", "")
                    rows[w[4:] if w.startswith("cpu_") else w] = r
    return rows


def judge(run, c):
    """The Python-vs-C differences and the targets; returns the verdicts."""
    us = lambda w: run.us("agrl", w)  # noqa: E731
    cu = lambda w: c[w]["us"] if w in c else None  # noqa: E731
    print("\nagrl Python vs agrl C (agrl bench, same invocation)")
    print(f"{'python row':32} {'py us':>9}  {'C row':36} {'C us':>9} {'py - C':>9} {'py / C':>7}")
    pairs = [("sample_mujoco_b256_1m", "sample_gather_mujoco_b256_eager"),
             ("sample_mujoco_b256_1m", "sample_gather_mujoco_b256"),
             ("add_1_mujoco_host", "add_1_mujoco" if run.args.device == "cpu" else "write_1_mujoco_visible"),
             ("add_65536_mujoco_host", "write_65536_mujoco_pageable"),
             ("add_65536_mujoco_host", "write_65536_mujoco_pinned"),
             ("per_sample_b256_1m", "per_sample_b256_1m"),
             ("per_update_b256", "per_update_b256")]
    diffs = []
    for pw, cw in pairs:
        p, q = us(pw), cu(cw)
        if p is None or q is None:
            continue
        print(f"{pw:32} {p:9.2f}  {cw:36} {q:9.2f} {p - q:9.2f} {p / q:6.2f}x")
        diffs.append({"python": pw, "c": cw, "py_us": p, "c_us": q, "diff_us": round(p - q, 3)})

    verdicts = []

    def verdict(name, ok, detail):
        v = "PASS" if ok is True else ("FAIL" if ok is False else "not judged")
        verdicts.append({"target": name, "verdict": v, "detail": detail})

    p, q = us("sample_mujoco_b256_1m"), cu("sample_gather_mujoco_b256_eager")
    if p is None:
        verdict("sample() within 3 us of C", None, "no agrl sample row")
    elif q is None:
        verdict("sample() within 3 us of C", None, "no C row (give --cli PATH)")
    else:
        verdict("sample() within 3 us of C", p - q <= 3.0,
                f"{p:.2f} - {q:.2f} (sample_gather_mujoco_b256_eager) = {p - q:.2f} us (allowed 3)")
    t = run.us("torchrl", "sample_mujoco_b256_1m")
    if p is None or t is None:
        verdict("sample() >= 20x TorchRL", None, "no agrl or TorchRL sample row")
    else:
        verdict("sample() >= 20x TorchRL", t / p >= 20.0, f"TorchRL {t:.2f} / agrl {p:.2f} = {t / p:.1f}x (needs 20)")
    p = us("add_1_mujoco_host")
    if p is None:
        verdict("add() of 1 from numpy <= 8 us", None, "no agrl add_1 row")
    else:
        verdict("add() of 1 from numpy <= 8 us", p <= 8.0, f"{p:.2f} us (allowed 8)")

    gpu = run.args.device == "cuda"

    def at_most(work, limit, name):
        p = us(work)
        if not gpu:
            verdict(name, None, "a GPU target (the H200's)")
            return
        verdict(name, None if p is None else p <= limit,
                "no row" if p is None else f"{p:.2f} us (allowed {limit:g})")

    at_most("sample_torch_out_b256_1m", 15.0, "sample(256) into torch <= 15 us")
    p, t = us("sample_torch_out_b256_1m"), run.us("torchrl", "sample_mujoco_b256_1m")
    verdict("sample into torch >= 12x TorchRL", None if p is None or t is None or not gpu else t / p >= 12.0,
            "no agrl or TorchRL row" if p is None or t is None else f"TorchRL {t:.2f} / agrl {p:.2f} = {t / p:.1f}x")
    at_most("sample_cupy_out_b256_1m", 15.0, "sample(256) into CuPy <= 15 us")
    at_most("sample_jax_b256_1m", 25.0, "sample(256) into JAX <= 25 us")
    at_most("update_torch_b256", 10.0, "update_priorities torch <= 10 us")
    at_most("update_numpy_b256", 12.0, "update_priorities numpy <= 12 us")
    p, q = us("update_numpy_b256"), run.us("cpprb", "per_update_b256")
    verdict("update_priorities numpy < cpprb", None if p is None or q is None else p < q,
            "no agrl or cpprb row" if p is None or q is None else f"agrl {p:.2f} vs cpprb {q:.2f} us")
    at_most("add_1_torch", 6.0, "add() of 1 from torch <= 6 us")
    at_most("per_torch_b256_1m", 30.0, "PER sample + update torch <= 30 us")
    p, q = us("add_65536_mujoco_host"), cu("write_65536_mujoco_pageable")
    if p is None:
        verdict("add() of 65,536 <= 1.2x C", None, "no agrl add_65536 row")
    elif q is None:
        verdict("add() of 65,536 <= 1.2x C", None, "no C row (give --cli PATH)")
    else:
        verdict("add() of 65,536 <= 1.2x C", p <= 1.2 * q,
                f"{p:.2f} / {q:.2f} (write_65536_mujoco_pageable) = {p / q:.2f}x (allowed 1.2)")
    a, b, c_, d = us("call_noop"), us("sample_out_nohandoff_b256_1m"), cu("sample_gather_mujoco_b256"), \
        us("sample_torch_out_b256_1m")
    if a is not None and b is not None and d is not None:
        print("\nper-call profile of sample(256, out=torch) (us)")
        print(f"  a method call with its lock (len)                 {a:8.2f}")
        if c_ is not None:
            print(f"  the recorded draw + gather in C (agrl bench)      {c_:8.2f}")
            print(f"  the extension's call around it (parse, lookup)    {b - c_:8.2f}")
        print(f"  sample(out=, stream=-1): no stream hand-off       {b:8.2f}")
        print(f"  the two stream hand-offs (torch's stream)         {d - b:8.2f}")
        print(f"  sample(out=): what the torch user pays            {d:8.2f}")
    print("\ntargets")
    for v in verdicts:
        print(f"  {v['verdict']:10} {v['target']:30} {v['detail']}")
    return diffs, verdicts


def table(run):
    print(f"\n{'work':38} {'agrl us':>9}  {'peer':9} {'peer us':>10} {'peer/agrl':>9}  note")
    for w in ORDER:
        a = run.us("agrl", w)
        peers_w, peer_impls = w, IMPLS[1:]
        if w in TORCH_OUT:
            peers_w, peer_impls = TORCH_OUT[w]
        peers = [(i, run.us(i, peers_w)) for i in peer_impls if run.us(i, peers_w) is not None]
        if a is None and not peers:
            continue
        head = f"{LABEL[w]:38} {a:9.2f}" if a is not None else f"{LABEL[w]:38} {'-':>9}"
        if not peers:
            print(f"{head}  {'-':9} {'-':>10} {'-':>9}")
        for k, (impl, u) in enumerate(peers):
            ratio = f"{u / a:8.2f}x" if a else f"{'-':>9}"
            note = f"(its {LABEL[peers_w]})" if w in TORCH_OUT else ""
            print(f"{head if k == 0 else ' ' * 48}  {impl:9} {u:10.2f} {ratio}  {note}")
    seen = {r["impl"] for r in run.rows}
    for a in run.absent:
        print(f"{a['impl']}: {a['why']}")
    for impl in IMPLS:
        if impl not in seen and impl in run.args.peers and not any(a["impl"] == impl for a in run.absent):
            print(f"{impl}: no row ran")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="cuda when agrl sees a GPU, else cpu")
    ap.add_argument("--iters", type=int, default=0, help="calls a repetition (default: ~0.2 s a repetition)")
    ap.add_argument("--reps", type=int, default=pl.REPS, help="timed repetitions a row (default 9)")
    ap.add_argument("--json", metavar="FILE", help="write the rows, targets and versions as JSON")
    ap.add_argument("--cli", metavar="PATH", help="the agrl binary: run its bench rows of the same work first")
    ap.add_argument("--only", default=",".join(ROWS), help=f"rows, comma-separated, of: {', '.join(ROWS)}")
    ap.add_argument("--peers", default=",".join(IMPLS), help=f"implementations of: {', '.join(IMPLS)}")
    args = ap.parse_args()
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    args.peers = [s.strip() for s in args.peers.split(",") if s.strip()]
    bad = [s for s in args.only if s not in ROWS] + [s for s in args.peers if s not in IMPLS]
    if bad or args.iters < 0 or args.reps < 1:
        ap.error(f"unknown rows or implementations: {', '.join(bad)}" if bad else "--iters >= 0, --reps >= 1")
    import numpy as np
    import agrl
    if args.device is None:
        args.device = "cuda" if agrl.cuda_device_count() > 0 else "cpu"
    dev = args.device
    if dev == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"  # before anything imports jax
    try:
        agrl.Context(dev).free()
    except agrl.Error as e:
        print(f"bench_replay: agrl has no {dev} device: {e}", file=sys.stderr)
        return 2
    run = Run(args)
    run.versions["python"] = sys.version.split()[0]
    run.versions["numpy"] = np.__version__
    c_rows = run_cli(run, args.cli, dev) if args.cli else {}

    try:
        import torch
        run.versions["torch"] = torch.__version__
        if dev == "cuda" and not torch.cuda.is_available():
            print("torch: no CUDA device; the torch-based peers are skipped")
            torch = None
    except Exception as e:
        print(f"torch does not import: {type(e).__name__}: {e}")
        torch = None
    np.random.seed(0)  # SB3 samples from numpy's global generator
    print(f"filling: {N:,} random mujoco transitions on the host", flush=True)
    data = host_data(np, N)
    t0 = time.perf_counter()
    for impl in IMPLS:
        if impl not in args.peers:
            continue
        print(f"[{impl}]", flush=True)
        try:
            if impl == "agrl":
                bench_agrl(run, np, data, dev, torch)
            elif impl == "torchrl":
                bench_torchrl(run, np, data, dev, torch)
            elif impl == "flashbax":
                bench_flashbax(run, np, data, dev)
            elif impl == "cpprb":
                bench_cpprb(run, np, data, dev)
            elif impl == "sb3":
                bench_sb3(run, np, data, dev, torch)
        except Exception as e:  # an API that changed, memory: reported, never fatal
            run.gone(impl, f"failed: {type(e).__name__}: {e}"[:600])
        gc.collect()
        if torch is not None and dev == "cuda":
            torch.cuda.empty_cache()
    print(f"(peers and agrl: {time.perf_counter() - t0:.0f} s)")

    print(f"\nreplay rows on {dev} ({run.versions.get('agrl_device', dev)}), us per call, median of {args.reps}; "
          "peer/agrl above 1: agrl is faster")
    table(run)
    diffs, verdicts = judge(run, c_rows)
    print("\nversions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
    if args.json:
        doc = {"device": dev, "rows": run.rows, "absent": run.absent, "c_rows": list(c_rows.values()),
               "python_vs_c": diffs, "targets": verdicts, "versions": run.versions,
               "reps": args.reps, "iters": args.iters or "auto"}
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, args.json)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
