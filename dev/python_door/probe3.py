"""Where the missed door rows spend their time: each call timed two ways,
as a throughput (n calls, then one sync: what the benchmark rows report)
and as host time alone (a sync before each call, outside the timing), so
that a row bound by the device's queue shows a gap between the two.
usage: PYTHONPATH=... python3 dev/python_door/probe3.py"""
import sys
import time

import numpy as np


def thru(fn, sync, n=2000, reps=7):
    for _ in range(200):
        fn()
    sync()
    v = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        v.append((time.perf_counter() - t0) / n * 1e6)
    return sorted(v)[reps // 2]


def host(fn, sync, n=2000):
    for _ in range(100):
        fn()
    v = []
    pc = time.perf_counter
    for _ in range(n):
        sync()
        t0 = pc()
        fn()
        v.append(pc() - t0)
    sync()
    v.sort()
    return v[n // 2] * 1e6


def row(name, fn, sync):
    print(f"{name:58s} thru {thru(fn, sync):8.2f}  host {host(fn, sync):8.2f} us", flush=True)


def attr(name, fn, n=100000):
    for _ in range(1000):
        fn()
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    print(f"{name:58s} {best:8.3f} us", flush=True)


def main():
    import torch

    import agrl
    import agrl.torch as at

    ctx = agrl.Context("cuda")
    fields = {"obs": (17,), "action": (6,), "reward": (1,), "next_obs": (17,), "done": (1,)}
    N, B = 1_000_000, 256
    rng = np.random.default_rng(0)
    rb = agrl.ReplayBuffer(ctx, N, fields)
    one_field = agrl.ReplayBuffer(ctx, N, {"row": (42,)})
    prb = at.ReplayBuffer(ctx, N, fields, prioritized=True)
    for s in range(0, N, 65536):
        d = {k: rng.standard_normal((min(65536, N - s),) + v, dtype=np.float32) for k, v in fields.items()}
        rb.add(**d)
        prb.add(**d)
    sync = lambda: (ctx.sync(), torch.cuda.synchronize())  # noqa: E731
    nosync = lambda: ctx.sync()  # noqa: E731
    t = torch.zeros(17, device="cuda")
    attr("torch cuda: get_device()", t.get_device)
    attr("torch cuda: dtype", lambda: t.dtype)
    attr("torch cuda: shape", lambda: t.shape)
    attr("torch cuda: is_contiguous()", t.is_contiguous)
    attr("torch cuda: data_ptr()", t.data_ptr)
    attr("torch._C._cuda_getCurrentRawStream(0)", lambda: torch._C._cuda_getCurrentRawStream(0))
    attr("len(rb): a method call with the lock", lambda: len(rb))
    row("ctx.sync() alone", lambda: None, nosync)
    row("ctx.wait_stream(0) + ctx.stream_wait(0): two hand-offs", lambda: (ctx.wait_stream(0), ctx.stream_wait(0)),
        sync)
    side = torch.cuda.Stream().cuda_stream
    row("ctx.wait_stream(side) + ctx.stream_wait(side): two hand-offs", lambda: (ctx.wait_stream(side),
        ctx.stream_wait(side)), sync)
    ts = torch.cuda.current_stream().cuda_stream
    print("torch's current stream:", ts, flush=True)
    one = {k: rng.standard_normal(v, dtype=np.float32) for k, v in fields.items()}
    row("add(one, numpy), 5 fields", lambda: rb.add(**one), nosync)
    row("add(one, numpy), 1 field of 42", lambda: one_field.add(row=one["obs"].repeat(3)[:42].copy()), nosync)
    onet = {k: torch.from_numpy(v).cuda() for k, v in one.items()}
    row("add(one, torch cuda), 5 fields", lambda: rb.add(**onet), sync)
    r42 = torch.zeros(42, device="cuda")
    row("add(one, torch cuda), 1 field of 42", lambda: one_field.add(row=r42), sync)
    idx = torch.randint(0, N, (B,), device="cuda")
    pri = torch.rand(B, device="cuda")
    row("update_priorities(torch cuda)", lambda: prb.update_priorities(idx, pri), sync)
    idn = idx.cpu().numpy()
    prn = pri.cpu().numpy()
    row("update_priorities(numpy i64, f32)", lambda: prb.update_priorities(idn, prn), nosync)
    row("update_priorities(numpy i32, f32)", lambda: prb.update_priorities(idn.astype(np.int32), prn), nosync)
    idn16 = idn[:16].copy()
    prn16 = prn[:16].copy()
    row("update_priorities(numpy) of 16", lambda: prb.update_priorities(idn16, prn16), nosync)
    out = prb.empty_batch(B)
    row("PER sample(out=torch)", lambda: prb.sample(B, out=out), sync)
    try:
        import jax

        import agrl.jax as aj

        jb = aj.ReplayBuffer(ctx, N, fields, seed=6)
        for s in range(0, N, 65536):
            d = {k: rng.standard_normal((min(65536, N - s),) + v, dtype=np.float32) for k, v in fields.items()}
            jb.add(**d)
        jsync = lambda: (ctx.sync(), jax.block_until_ready(jb.sample(B)))  # noqa: E731
        row("agrl.jax sample(256)", lambda: jb.sample(B), jsync)
        keep = lambda cap: cap  # noqa: E731
        row("agrl.jax sample(256), capsule kept (no JAX import)",
            lambda: jb._sample_import(B, None, keep, jb._stream, 2, jb._index_dtype, jb._narrow), jsync)
        row("agrl.jax sample(256), no stream hand-off",
            lambda: jb._sample_import(B, None, jb._import, None, 2, jb._index_dtype, jb._narrow), jsync)
        from jax._src.lib import _jax as _lib

        dev = jb.device
        row("agrl.jax sample(256), JAX import without its stream (unordered)",
            lambda: jb._sample_import(B, None, lambda cap: _lib.dlpack_managed_tensor_to_buffer(cap, dev, None, None, 2),
                                      None, 2, jb._index_dtype, jb._narrow), jsync)
        print("jax stream for external ready events:", jb._stream, flush=True)
    except Exception as e:  # noqa: BLE001
        print("jax:", repr(e))


if __name__ == "__main__":
    sys.exit(main())
