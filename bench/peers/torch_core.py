"""PyTorch on the same work as bench/bench_core.c, timed the same way.

usage: python3 bench/peers/torch_core.py [cpu|cuda]

Each row: the body runs `iters` times, then torch.cuda.synchronize(); the
time per call is wall time / iters; 9 repetitions after 2 warm-ups, median,
min and max (peerlib.measure). Prints one JSON line per row, impl "torch".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib as pl  # noqa: E402

IMPL = "torch"


def main():
    dev = pl.device_arg()
    torch = pl.import_torch(IMPL, dev)
    if torch is None:
        return
    d = torch.device(dev)
    sync = pl.torch_sync(torch, dev)
    g = torch.Generator(device="cpu").manual_seed(0)

    # gather, indices on the device: (capacity, rows) row-major, one transition a row
    for work, rows, cap, B, iters in (("gather_cartpole_b256", 11, 1_000_000, 256, 2000),
                                      ("gather_1024f32_b65536", 1024, 200_000, 65536, 20)):
        buf = torch.zeros(cap, rows, device=d)
        idx = torch.randint(0, cap, (B,), generator=g).to(d)
        pl.row(IMPL, work, pl.measure(lambda i: torch.index_select(buf, 0, idx), iters, sync),
               "index_select")
        del buf

    # one transition written from pageable host memory and visible on the device
    buf = torch.zeros(1_000_000, 42, device=d)
    src = torch.arange(42, dtype=torch.float32)

    def write1(i):
        buf[i % 1_000_000].copy_(src)
        sync()

    pl.row(IMPL, "write_1_mujoco_visible", pl.measure(write1, 2000, sync), "copy_ + synchronize")
    src = torch.arange(42 * 65536, dtype=torch.float32).reshape(65536, 42)

    def write_many(i):
        s = (i * 65536) % (1_000_000 - 65536)
        buf[s:s + 65536].copy_(src)
        sync()

    pl.row(IMPL, "write_65536_mujoco_pageable", pl.measure(write_many, 10, sync),
           "copy_ + synchronize")


if __name__ == "__main__":
    main()
