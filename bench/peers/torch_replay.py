"""PyTorch peer for the replay rows of PERF.md that torch_core.py does not
cover, and the machine's ceilings (see README.md for the definitions).

usage: python3 bench/peers/torch_replay.py [cpu|cuda]

Rows (impl: work):
  torch                      sample_gather_mujoco_b256
  torch_multinomial          per_sample_b256_1m
  torch_cumsum_searchsorted  per_sample_b256_1m
  torch_scatter              per_update_b256
  ceiling                    copy_d2d_1gib, copy_h2d_pinned_64mib,
                             copy_h2d_pageable_64mib, empty_launch_pipelined,
                             empty_launch_sync
On the CPU the host-to-device rows are absent; the others run on the host
(a memcpy, a tiny op) so that the script can be checked there.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib as pl  # noqa: E402

CAP = pl.CAPACITY  # 1M transitions / priorities
B = 256
IMPLS = ["torch", "torch_multinomial", "torch_cumsum_searchsorted", "torch_scatter", "ceiling"]


def sample_gather(torch, d, sync):
    """Indices drawn on the device, then index_select of a (1M, 42) buffer."""
    buf = torch.randn(CAP, 42, device=d)

    def body(i):
        idx = torch.randint(0, CAP, (B,), device=d)
        return torch.index_select(buf, 0, idx)

    out = body(0)
    assert out.shape == (B, 42)
    iters = pl.auto_iters(body, sync)
    pl.row("torch", "sample_gather_mujoco_b256", pl.measure(body, iters, sync),
           "torch.randint on device + index_select")


def per_sample(torch, d, sync):
    """Prioritized sampling of B indices from 1M priorities, two ways."""
    prio = torch.rand(CAP, device=d) + 1e-3  # all positive

    def multinomial(i):
        return torch.multinomial(prio, B, replacement=True)

    def cumsum_searchsorted(i):
        c = torch.cumsum(prio, 0)
        u = torch.rand(B, device=d) * c[-1]
        return torch.searchsorted(c, u).clamp_(max=CAP - 1)  # f32 rounding at the top

    # Check: both give B in-range indices, and favour high priorities.
    hi_mean = float(prio.mean())
    for impl, body, note in (("torch_multinomial", multinomial,
                              "torch.multinomial(p, 256, replacement=True)"),
                             ("torch_cumsum_searchsorted", cumsum_searchsorted,
                              "cumsum + rand * total + searchsorted, no tree")):
        idx = torch.cat([body(0) for _ in range(40)])
        ok = (idx.shape == (40 * B,) and int(idx.min()) >= 0 and int(idx.max()) < CAP
              and float(prio[idx].mean()) > hi_mean)
        if not ok:
            pl.absent(impl, "per_sample_b256_1m: check failed")
            continue
        iters = pl.auto_iters(body, sync)
        pl.row(impl, "per_sample_b256_1m", pl.measure(body, iters, sync), note)


def per_update(torch, d, sync):
    """New priorities for B indices written with index_copy_ (no sum tree).
    The indices and values are made beforehand (in training they come from
    the sample and the TD errors, already on the device); 16 sets in turn."""
    prio = torch.rand(CAP, device=d)
    sets = [(torch.randint(0, CAP, (B,), device=d), torch.rand(B, device=d)) for _ in range(16)]

    def body(i):
        idx, val = sets[i % 16]
        return prio.index_copy_(0, idx, val)

    body(0)
    idx, val = sets[0]
    _, inv, cnt = torch.unique(idx, return_inverse=True, return_counts=True)
    once = cnt[inv] == 1  # a repeated index keeps one of its values: skip those
    if not torch.equal(prio[idx][once], val[once]):
        pl.absent("torch_scatter", "per_update_b256: check failed")
        return
    iters = pl.auto_iters(body, sync)
    pl.row("torch_scatter", "per_update_b256", pl.measure(body, iters, sync),
           "index_copy_ of 256 values, no tree")


def ceilings(torch, d, dev, sync):
    """Copy bandwidths and launch overheads (impl "ceiling")."""
    # device-to-device copy of 1 GiB; GB/s counts the bytes read + written
    n = 1 << 28  # f32 elements
    src = torch.ones(n, device=d)
    dst = torch.empty(n, device=d)
    body = lambda i: dst.copy_(src)  # noqa: E731
    stats = pl.measure(body, pl.auto_iters(body, sync, lo=1), sync)
    gbs = 2 * 4 * n / (stats[0] * 1e3)
    pl.row("ceiling", "copy_d2d_1gib", stats, f"{gbs:.0f} GB/s read+written",
           gb_per_s=round(gbs, 1))
    del src, dst

    if dev == "cuda":
        n = 1 << 24  # 64 MiB of f32
        dst = torch.empty(n, device=d)
        for work, pinned in (("copy_h2d_pinned_64mib", True), ("copy_h2d_pageable_64mib", False)):
            src = torch.ones(n, pin_memory=pinned)
            body = lambda i: dst.copy_(src, non_blocking=True)  # noqa: E731
            stats = pl.measure(body, pl.auto_iters(body, sync, lo=1), sync)
            gbs = 4 * n / (stats[0] * 1e3)
            pl.row("ceiling", work, stats, f"{gbs:.1f} GB/s up", gb_per_s=round(gbs, 2))
        del dst, src
    else:
        pl.absent("ceiling", "copy_h2d_pinned_64mib, copy_h2d_pageable_64mib: no device on cpu")

    # the smallest op: one element add, pipelined, then with a sync per call
    t = torch.zeros(1, device=d)
    body = lambda i: t.add_(1)  # noqa: E731
    pl.row("ceiling", "empty_launch_pipelined",
           pl.measure(body, pl.auto_iters(body, sync), sync), "t.add_(1) on a 1-element tensor")

    def body_sync(i):
        t.add_(1)
        sync()

    pl.row("ceiling", "empty_launch_sync",
           pl.measure(body_sync, pl.auto_iters(body_sync, sync), sync),
           "t.add_(1) + synchronize each call")


def main():
    dev = pl.device_arg()
    torch = pl.import_torch(IMPLS, dev)
    if torch is None:
        return
    d = torch.device(dev)
    sync = pl.torch_sync(torch, dev)
    torch.manual_seed(0)
    sample_gather(torch, d, sync)
    per_sample(torch, d, sync)
    per_update(torch, d, sync)
    ceilings(torch, d, dev, sync)


if __name__ == "__main__":
    main()
