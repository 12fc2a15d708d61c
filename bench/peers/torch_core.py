"""PyTorch on the same work as bench/bench_core.c, timed the same way.

Each row: the body runs `iters` times, then torch.cuda.synchronize(); the
time per call is wall time / iters; 9 repetitions after 2 warm-ups, median,
min and max. Prints one JSON line per row.
"""
import json
import sys
import time

try:
    import torch
except ImportError:  # the caller reports the peer as absent
    print(json.dumps({"impl": "torch", "absent": "torch is not installed"}))
    sys.exit(0)

REPS = 9


def measure(body, iters, sync):
    vals = []
    for r in range(-2, REPS):
        t0 = time.perf_counter()
        for i in range(iters):
            body(i)
        sync()
        if r >= 0:
            vals.append((time.perf_counter() - t0) * 1e6 / iters)
    vals.sort()
    return vals[REPS // 2], vals[0], vals[-1]


def row(work, stats, note=""):
    med, lo, hi = stats
    print(json.dumps({"impl": "torch", "work": work, "us": med, "min": lo, "max": hi, "note": note}),
          flush=True)


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"impl": "torch", "absent": "no CUDA device for torch"}))
        return
    d = torch.device(dev)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    g = torch.Generator(device="cpu").manual_seed(0)

    # gather, indices on the device: (capacity, rows) row-major, one transition a row
    for work, rows, cap, B, iters in (("gather_cartpole_b256", 11, 1_000_000, 256, 2000),
                                      ("gather_1024f32_b65536", 1024, 200_000, 65536, 20)):
        buf = torch.zeros(cap, rows, device=d)
        idx = torch.randint(0, cap, (B,), generator=g).to(d)
        row(work, measure(lambda i: torch.index_select(buf, 0, idx), iters, sync), "index_select")
        del buf

    # one transition written from pageable host memory and visible on the device
    buf = torch.zeros(1_000_000, 42, device=d)
    src = torch.arange(42, dtype=torch.float32)
    def write1(i):
        buf[i % 1_000_000].copy_(src)
        sync()
    row("write_1_mujoco_visible", measure(write1, 2000, sync), "copy_ + synchronize")
    src = torch.arange(42 * 65536, dtype=torch.float32).reshape(65536, 42)
    def write_many(i):
        s = (i * 65536) % (1_000_000 - 65536)
        buf[s:s + 65536].copy_(src)
        sync()
    row("write_65536_mujoco_pageable", measure(write_many, 10, sync), "copy_ + synchronize")


if __name__ == "__main__":
    main()
