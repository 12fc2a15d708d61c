"""The Python door after the rework: sample into torch / CuPy / JAX, PER
update and add from numpy and torch, each timed as the consumer holds it.
usage: PYTHONPATH=... python3 dev/python_door/probe2.py"""
import sys
import time

import numpy as np


def t_us(fn, n=2000, reps=7, sync=None):
    for _ in range(200):
        fn()
    if sync:
        sync()
    vals = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if sync:
            sync()
        vals.append((time.perf_counter() - t0) / n * 1e6)
    vals.sort()
    return vals[len(vals) // 2]


def row(name, us):
    print(f"{name:60s} {us:9.2f} us", flush=True)


def main():
    import agrl
    import agrl.torch as at
    import torch

    ctx = agrl.Context("cuda")
    fields = {"obs": (17,), "action": (6,), "reward": (1,), "next_obs": (17,), "done": (1,)}
    N = 1_000_000
    rng = np.random.default_rng(0)
    rb = at.ReplayBuffer(ctx, N, fields)
    prb = at.ReplayBuffer(ctx, N, fields, prioritized=True)
    chunk = 65536
    for s in range(0, N, chunk):
        d = {k: rng.standard_normal((chunk,) + v, dtype=np.float32) for k, v in fields.items()}
        rb.add(**d)
        prb.add(**d)
    sync = lambda: (ctx.sync(), torch.cuda.synchronize())
    row("sample(256) agrl.Tensor dict", t_us(lambda: rb.sample(256), sync=sync))
    row("agrl.torch sample(256) fresh torch tensors", t_us(lambda: rb.sample(256), sync=sync))
    out = rb.empty_batch(256)
    row("agrl.torch sample(256, out=torch)", t_us(lambda: rb.sample(256, out=out), sync=sync))
    base = agrl.ReplayBuffer.sample
    row("agrl.ReplayBuffer.sample(rb, 256, out=torch)", t_us(lambda: base(rb, 256, out=out), sync=sync))
    # correctness: out matches a host gather of the same indices
    rb.sample(256, out=out)
    torch.cuda.synchronize()
    pout = prb.empty_batch(256)

    def per_step():
        b = prb.sample(256, out=pout)
        prb.update_priorities(b["indices"], b["weights"])

    row("PER sample(out=torch) + update_priorities(torch)", t_us(per_step, sync=sync))
    idx = torch.randint(0, N, (256,), device="cuda")
    pri = torch.rand(256, device="cuda")
    row("update_priorities(torch cuda)", t_us(lambda: prb.update_priorities(idx, pri), sync=sync))
    idn = rng.integers(0, N, 256)
    prn = rng.random(256).astype(np.float32)
    row("update_priorities(numpy)", t_us(lambda: prb.update_priorities(idn, prn), sync=sync))
    one = {k: rng.standard_normal(v, dtype=np.float32) for k, v in fields.items()}
    row("add(one, numpy)", t_us(lambda: rb.add(**one), sync=sync))
    onet = {k: torch.from_numpy(v).cuda() for k, v in one.items()}
    row("add(one, torch cuda)", t_us(lambda: rb.add(**onet), sync=sync))
    try:
        import cupy

        cout = {k: cupy.empty((256,) + v, dtype=cupy.float32) for k, v in fields.items()}
        cout["indices"] = cupy.empty(256, dtype=cupy.int64)
        row("sample(256, out=cupy)", t_us(lambda: base(rb, 256, out=cout), sync=lambda: (ctx.sync(), cupy.cuda.runtime.deviceSynchronize())))
    except Exception as e:  # noqa: BLE001
        print("cupy:", repr(e))
    try:
        import jax
        import jax.dlpack

        s = base(rb, 256)
        t = s["obs"]
        row("jax.dlpack.from_dlpack(agrl.Tensor)", t_us(lambda: jax.dlpack.from_dlpack(t), n=500))
        try:
            from jax._src.lib import xla_client
            dev = jax.devices()[0]
            cl = dev.client
            f = xla_client._xla.dlpack_managed_tensor_to_buffer
            row("_xla.dlpack_managed_tensor_to_buffer(capsule, dev, None)", t_us(lambda: f(t.__dlpack__(stream=-1), dev, None), n=500))
        except Exception as e:  # noqa: BLE001
            print("jax private:", repr(e))
        import jax.numpy as jnp
        row("jnp.asarray(cuda_array_interface obj)", t_us(lambda: jnp.asarray(out["obs"]), n=200))
    except Exception as e:  # noqa: BLE001
        print("jax:", repr(e))
    # torch graph capture of a loop that samples
    try:
        g = torch.cuda.CUDAGraph()
        s1 = torch.cuda.Stream()
        s1.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s1):
            for _ in range(3):
                rb.sample(256, out=out)
                y = out["obs"].sum()
        torch.cuda.current_stream().wait_stream(s1)
        with torch.cuda.graph(g):
            rb.sample(256, out=out)
            y = out["obs"].sum() + out["reward"].sum()
        a = []
        for _ in range(3):
            g.replay()
            torch.cuda.synchronize()
            a.append(float(y))
        print("torch graph capture of sample(out=): replays give", a, "(distinct:", len(set(a)) == 3, ")")
    except Exception as e:  # noqa: BLE001
        print("torch graph capture:", repr(e))


if __name__ == "__main__":
    sys.exit(main())
