"""Where a torch / CuPy / JAX user's time goes when holding an agrl batch.

Measures, on one device in one process, the pieces a design for "a batch in
the consumer's framework" is made of: agrl's sample itself, each
framework's DLPack import, a packed export split by the consumer, the
consumer allocating and agrl writing, stream hand-offs, and the inputs'
costs (torch's __dlpack__ vs data_ptr). Prints one line per piece.

usage: PYTHONPATH=... python3 dev/python_door/probe.py [--device cuda]
"""
import argparse
import sys
import time

import numpy as np


def t_us(fn, n=2000, reps=7, sync=None):
    for _ in range(200):
        fn()
    if sync:
        sync()
    best = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if sync:
            sync()
        best.append((time.perf_counter() - t0) / n * 1e6)
    best.sort()
    return best[len(best) // 2]


def row(name, us, note=""):
    print(f"{name:52s} {us:9.2f} us  {note}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    import agrl
    import torch

    dev = torch.device("cuda:0")
    ctx = agrl.Context(a.device)
    fields = {"obs": (17,), "action": (6,), "reward": (1,), "next_obs": (17,), "done": (1,)}
    N = 1_000_000
    buf = agrl.ReplayBuffer(ctx, N, fields)
    rng = np.random.default_rng(0)
    chunk = 65536
    for s in range(0, N, chunk):
        buf.add(**{k: rng.standard_normal((chunk,) + v, dtype=np.float32) for k, v in fields.items()})
    ctx.sync()
    sync_all = lambda: (ctx.sync(), torch.cuda.synchronize())
    row("agrl sample(256)", t_us(lambda: buf.sample(256), sync=sync_all))

    def s_dlpack():
        b = buf.sample(256)
        return [torch.from_dlpack(v) for v in b.values()]

    row("sample + torch.from_dlpack x6", t_us(s_dlpack, n=500, sync=sync_all))
    b = buf.sample(256)
    t = b["obs"]
    row("torch.from_dlpack(agrl.Tensor) one", t_us(lambda: torch.from_dlpack(t), sync=sync_all))
    row("t.__dlpack__(stream=-1) one", t_us(lambda: t.__dlpack__(stream=-1)))
    row("torch._C._from_dlpack(t.__dlpack__(stream=-1))",
        t_us(lambda: torch._C._from_dlpack(t.__dlpack__(stream=-1))))
    row("torch.utils.dlpack.from_dlpack(capsule)",
        t_us(lambda: torch.utils.dlpack.from_dlpack(t.__dlpack__(stream=-1))))
    row("torch.cuda.current_stream()", t_us(lambda: torch.cuda.current_stream()))
    row("torch._C._cuda_getCurrentRawStream(0)", t_us(lambda: torch._C._cuda_getCurrentRawStream(0)))
    row("torch.empty((256, 42), cuda)", t_us(lambda: torch.empty((256, 42), device=dev)))
    blk = torch.empty((256, 42), device=dev)
    row("blk.split([17,6,1,17,1], 1)", t_us(lambda: blk.split([17, 6, 1, 17, 1], 1)))
    row("torch.empty + split + data_ptr",
        t_us(lambda: torch.empty((256, 42), device=dev).split([17, 6, 1, 17, 1], 1)[0].data_ptr()))
    row("blk[:, 0:17] (one view)", t_us(lambda: blk[:, 0:17]))
    row("blk.data_ptr()", t_us(lambda: blk.data_ptr()))
    ten = torch.randn(256, device=dev)
    row("torch tensor.__dlpack__()", t_us(lambda: ten.__dlpack__()))
    row("torch tensor.__dlpack__(stream=-1)", t_us(lambda: ten.__dlpack__(stream=-1)))
    row("tensor.dtype / shape / is_contiguous / device",
        t_us(lambda: (ten.dtype, ten.shape, ten.is_contiguous(), ten.device)))
    idx = torch.randint(0, N, (256,), device=dev, dtype=torch.int64)
    pri = torch.rand(256, device=dev)
    pbuf = agrl.ReplayBuffer(ctx, N, fields, prioritized=True)
    for s in range(0, N, chunk):
        pbuf.add(**{k: rng.standard_normal((chunk,) + v, dtype=np.float32) for k, v in fields.items()})
    row("agrl update_priorities(torch idx, torch prio)",
        t_us(lambda: pbuf.update_priorities(idx, pri), sync=sync_all))
    idn = rng.integers(0, N, 256)
    prn = rng.random(256).astype(np.float32)
    row("agrl update_priorities(numpy idx, numpy prio)",
        t_us(lambda: pbuf.update_priorities(idn, prn), sync=sync_all))
    one = {k: rng.standard_normal(v, dtype=np.float32) for k, v in fields.items()}
    row("agrl add(one, numpy)", t_us(lambda: buf.add(**one), sync=sync_all))
    onet = {k: torch.from_numpy(v).to(dev) for k, v in one.items()}
    row("agrl add(one, torch cuda)", t_us(lambda: buf.add(**onet), sync=sync_all))
    s1 = torch.cuda.Stream()
    e1 = torch.cuda.Event()
    row("torch event record + wait_event (cross stream)",
        t_us(lambda: (e1.record(), s1.wait_event(e1)), sync=sync_all))
    try:
        import cupy

        c = cupy.empty((256, 17), dtype=cupy.float32)
        row("cupy.from_dlpack(agrl.Tensor) one", t_us(lambda: cupy.from_dlpack(t), sync=sync_all))
        row("cupy.cuda.get_current_stream().ptr", t_us(lambda: cupy.cuda.get_current_stream().ptr))
        row("cupy.empty((256,42))", t_us(lambda: cupy.empty((256, 42), dtype=cupy.float32)))
        cb = cupy.empty((256, 42), dtype=cupy.float32)
        row("cupy view cb[:, 0:17]", t_us(lambda: cb[:, 0:17]))
    except Exception as e:  # noqa: BLE001
        print("cupy:", e)
    try:
        import jax
        import jax.dlpack

        bc = buf.sample(256, contiguous=True)
        tc = bc["obs"]
        row("jax.dlpack.from_dlpack(agrl.Tensor contiguous) one",
            t_us(lambda: jax.dlpack.from_dlpack(tc), n=500, sync=sync_all))
        packed = buf.sample(256)["obs"]
        x = jax.dlpack.from_dlpack(tc)
        row("jax x[:, 0:5] (eager slice)", t_us(lambda: x[:, 0:5], n=500))
    except Exception as e:  # noqa: BLE001
        print("jax:", e)


if __name__ == "__main__":
    sys.exit(main())
