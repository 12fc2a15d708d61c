"""agrl's frame tables (agrl.FrameReplayBuffer) beside the replay buffers
that Atari-style agents use today, in one invocation on one machine:
sampling 32 stacked transitions (obs and next_obs, 4 x 84 x 84 uint8) into
torch tensors on the device.

usage: python3 bench/python/bench_frames.py [--device cpu|cuda] [--capacity N]
           [--iters N] [--reps N] [--peers IMPLS] [--json FILE]

The table: --capacity environment steps (1,000,000 by default; the CPU
machine takes --capacity 20000), one environment, episodes of 400 to 1,200
steps, frames 84 x 84 uint8 drawn from a pool of 512 random frames, a
discrete action, a reward and a done flag a step. Each implementation is
filled with the same steps, checked once (a sampled stack against the
frames it was given), then timed on one call:

  agrl          agrl.torch.FrameReplayBuffer(stack=4).sample(32): new torch
                tensors; and sample(32, out=) into tensors kept by the caller
  sb3           stable_baselines3 ReplayBuffer(optimize_memory_usage=True) of
                stacked observations (VecFrameStack's): sample(32)
  cpprb         cpprb ReplayBuffer(next_of="obs", stack_compress="obs") of
                (84, 84, 4) stacks (it compresses along the last axis):
                sample(32) + torch.as_tensor(...).to(device) of each array,
                the stacks permuted to (4, 84, 84)
  torchrl       TensorDictReplayBuffer(LazyTensorStorage(N, device)) of
                stacked obs and next obs: sample()
  torchrl_cat   TorchRL's memory-saving path: a step's frame and next frame
                in LazyTensorStorage(N, device), CatFrames(N=4) applied at
                sampling time over slices of a SliceSampler
                (CatFrames.make_rb_transform_and_sampler, in a ReplayBuffer):
                sample()

Printed beside each: us per sample (median of --reps repetitions, as
bench_replay.py times them), agrl's new-tensor row over the peer's
(peer/agrl above 1: agrl is faster), and the memory the buffer takes for
1,000,000 steps: the arrays it keeps (agrl: agrl/frames.h's formula; SB3:
its numpy arrays; TorchRL: its storage's tensors; cpprb: the growth of the
process's resident memory while it is filled), scaled from --capacity.
Peers that do not import are reported as not installed, never faked.
"""
import argparse
import gc
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import peerlib as pl  # noqa: E402
from bench_replay import Run, version_of  # noqa: E402

B = 32
K = 4                # frames in a stack
H = W = 84
POOL = 512           # distinct frames the steps cycle through
IMPLS = ("agrl", "sb3", "cpprb", "torchrl", "torchrl_cat")
WORK, WORK_OUT = "sample_frames_b32", "sample_frames_out_b32"
MILLION = 1_000_000


class Steps:
    """The environment steps every implementation is filled with: frame
    index (into the pool) of each step's observation, episode starts, and
    the stacked observation of a step as Gymnasium's
    FrameStackObservation(padding_type="reset") gives it."""

    def __init__(self, np, n, seed=0):
        rng = np.random.default_rng(seed)
        self.np = np
        self.pool = rng.integers(0, 256, size=(POOL, H, W), dtype=np.uint8)
        self.frame = rng.integers(0, POOL, size=n + 1)
        self.first = np.zeros(n + 1, dtype=bool)
        t = 0
        while t <= n:
            self.first[t] = True
            t += int(rng.integers(400, 1201))
        self.action = rng.integers(0, 4, size=n + 1)
        self.reward = rng.standard_normal(n + 1).astype(np.float32)
        # the step before an episode's first observation ended the episode
        self.done = np.append(self.first[1:], False).astype(np.float32)
        self.n = n

    def stack(self, t):
        """The stacked observation at step t: [K, H, W], older slots padded
        with the episode's first frame."""
        idx, cur = [0] * K, t
        for i in range(K - 1, -1, -1):
            idx[i] = self.frame[cur]
            if i and not self.first[cur]:
                cur -= 1
        return self.pool[idx]


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def per_million(nbytes, capacity):
    return nbytes * MILLION / capacity


# ---------------------------------------------------------------- agrl

def bench_agrl(run, np, steps, dev, torch, cap):
    import agrl
    import agrl.torch as at
    run.versions["agrl"] = agrl.library_version()
    ctx = agrl.Context(dev)
    run.versions["agrl_device"] = ctx.device_name
    fields = {"action": ((), "i64"), "reward": ((), "f32"), "done": ((), "f32")}
    rb = at.FrameReplayBuffer(ctx, cap, H, W, 1, stack=K, fields=fields, seed=1)
    # entries: each step's observation; an episode's last observation is the
    # entry before the next first one (the steps' `done`), so every step but
    # those is a transition, as in the peers (which sample across none either)
    for c0 in range(0, cap, 4096):
        c1 = min(cap, c0 + 4096)
        rb.add(steps.pool[steps.frame[c0:c1]], steps.first[c0:c1], action=steps.action[c0:c1],
               reward=steps.reward[c0:c1], done=steps.done[c0:c1])
    ctx.sync()
    b = rb.sample(B)
    assert b["obs"].shape == (B, K, H, W) and b["obs"].dtype == torch.uint8
    x = int(b["indices"][0])
    assert np.array_equal(b["obs"][0].cpu().numpy(), steps.stack(x)), "agrl: a stack differs from the frames"
    assert np.array_equal(b["next_obs"][0].cpu().numpy(), steps.stack(x + 1)), "agrl: a next stack differs"
    tsync = pl.torch_sync(torch, dev)

    def both(_last=None):
        ctx.sync()
        tsync()

    mem = per_million(cap * (H * W + 1) + cap * 3 * 4 + 32, cap)  # agrl/frames.h: frames, flags, 3 f32 fields
    run.time("agrl", WORK, lambda i: rb.sample(B), both,
             f"agrl.torch.FrameReplayBuffer.sample(32): new torch tensors on {ctx.device}")
    run.rows[-1]["mem"] = mem
    out = rb.empty_batch(B)
    run.time("agrl", WORK_OUT, lambda i: rb.sample(B, out=out), both,
             "sample(32, out=torch tensors kept by the caller)")
    run.rows[-1]["mem"] = mem
    rb.free()
    ctx.free()


# ---------------------------------------------------------------- SB3

def bench_sb3(run, np, steps, dev, torch, cap):
    try:
        import stable_baselines3
        from gymnasium import spaces
        from stable_baselines3.common.buffers import ReplayBuffer
    except ImportError as e:
        run.gone("sb3", f"not installed: {type(e).__name__}: {e}")
        return
    run.versions["sb3"] = stable_baselines3.__version__
    obs_space = spaces.Box(0, 255, (K, H, W), np.uint8)
    rb = ReplayBuffer(cap, obs_space, spaces.Discrete(4), device=dev, n_envs=1, optimize_memory_usage=True,
                      handle_timeout_termination=False)
    infos = [{}]
    for t in range(cap):
        rb.add(steps.stack(t)[None], steps.stack(t + 1)[None], steps.action[t:t + 1], steps.reward[t:t + 1],
               steps.done[t:t + 1], infos)
    s = rb.sample(B)
    assert s.observations.shape == (B, K, H, W) and s.observations.dtype == torch.uint8
    mem = sum(a.nbytes for a in (rb.observations, rb.actions, rb.rewards, rb.dones, rb.timeouts))
    run.time("sb3", WORK, lambda i: rb.sample(B), pl.torch_sync(torch, dev),
             f"ReplayBuffer(optimize_memory_usage=True).sample(32): torch tensors on {dev}")
    run.rows[-1]["mem"] = per_million(mem, cap)


# ---------------------------------------------------------------- cpprb

def bench_cpprb(run, np, steps, dev, torch, cap):
    try:
        import cpprb
    except ImportError as e:
        run.gone("cpprb", f"not installed: {type(e).__name__}: {e}")
        return
    run.versions["cpprb"] = version_of("cpprb", cpprb)
    before = rss()
    # stack_compress stacks along the last axis: observations (84, 84, 4), as Gym's frame stacks came
    rb = cpprb.ReplayBuffer(cap, {"obs": {"shape": (H, W, K), "dtype": np.uint8}, "act": {"dtype": np.int64},
                                  "rew": {}, "done": {}}, next_of="obs", stack_compress="obs")
    for t in range(cap):
        rb.add(obs=steps.stack(t).transpose(1, 2, 0), next_obs=steps.stack(t + 1).transpose(1, 2, 0),
               act=steps.action[t], rew=steps.reward[t], done=steps.done[t])
        if steps.first[t + 1]:
            rb.on_episode_end()
    mem = rss() - before
    d = torch.device(dev)

    def sample(_i):
        s = rb.sample(B)
        out = {k: torch.as_tensor(v).to(d, non_blocking=True) for k, v in s.items()}
        for k in ("obs", "next_obs"):  # [B, 84, 84, 4] -> [B, 4, 84, 84], as the other rows give them
            out[k] = out[k].permute(0, 3, 1, 2)
        return out

    s = sample(0)
    assert s["obs"].shape == (B, K, H, W) and s["next_obs"].shape == (B, K, H, W)
    # each slot one of the frames given, and next_obs the stack one step on (within an episode)
    pool = torch.as_tensor(steps.pool).to(d)
    for j in range(B):
        for i in range(K):
            assert bool((s["obs"][j, i] == pool).flatten(1).all(1).any()), "cpprb: a slot is no frame given"
    shifted = sum(bool(torch.equal(s["next_obs"][j, :-1], s["obs"][j, 1:])) for j in range(B))
    assert shifted >= B // 2, "cpprb: next_obs is not obs one step on"
    run.time("cpprb", WORK, sample, pl.torch_sync(torch, dev),
             f"ReplayBuffer(next_of, stack_compress).sample(32) + torch.as_tensor(...).to({dev})")
    run.rows[-1]["mem"] = per_million(mem, cap)


# ---------------------------------------------------------------- TorchRL

def import_torchrl(run, name):
    try:
        import logging
        import tensordict
        import torchrl
        logging.getLogger("torchrl").setLevel(logging.WARNING)
        run.versions["torchrl"] = version_of("torchrl", torchrl)
        run.versions["tensordict"] = version_of("tensordict", tensordict)
        return True
    except ImportError as e:
        run.gone(name, f"not installed: {type(e).__name__}: {e}")
    except Exception as e:
        run.gone(name, f"did not load: {type(e).__name__}: {e}"[:400])
    return False


def storage_bytes(storage):
    return sum(t.numel() * t.element_size() for t in storage._storage.values(include_nested=True, leaves_only=True))


def bench_torchrl(run, np, steps, dev, torch, cap):
    if not import_torchrl(run, "torchrl"):
        return
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    d = torch.device(dev)
    storage = LazyTensorStorage(cap, device=d)
    rb = TensorDictReplayBuffer(storage=storage, batch_size=B)
    for c0 in range(0, cap, 2048):
        c1 = min(cap, c0 + 2048)
        t = np.arange(c0, c1)
        obs = torch.from_numpy(np.stack([steps.stack(i) for i in t]))
        nobs = torch.from_numpy(np.stack([steps.stack(i + 1) for i in t]))
        rb.extend(TensorDict({"obs": obs, "action": torch.from_numpy(steps.action[c0:c1]),
                              "next": {"obs": nobs, "reward": torch.from_numpy(steps.reward[c0:c1]),
                                       "done": torch.from_numpy(steps.done[c0:c1]).bool()}}, batch_size=[c1 - c0]))
    s = rb.sample()
    assert s["obs"].shape == (B, K, H, W) and s["next", "obs"].shape == (B, K, H, W)
    i = int(s["index"][0])
    assert np.array_equal(s["obs"][0].cpu().numpy(), steps.stack(i)), "torchrl: a stack differs"
    run.time("torchrl", WORK, lambda i: rb.sample(), pl.torch_sync(torch, dev),
             f"TensorDictReplayBuffer(LazyTensorStorage(N, device={dev})) of stacked obs: sample()")
    run.rows[-1]["mem"] = per_million(storage_bytes(storage), cap)


def bench_torchrl_cat(run, np, steps, dev, torch, cap):
    if not import_torchrl(run, "torchrl_cat"):
        return
    import warnings
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.envs import CatFrames
    warnings.filterwarnings("ignore", message=".*time.*dimension", category=UserWarning)
    d = torch.device(dev)
    # reset_key and done_key given: outside an environment CatFrames cannot ask one for them
    cat = CatFrames(N=K, dim=-3, in_keys=["pixels"], out_keys=["pixels_stack"], padding="same", reset_key="_reset",
                    done_key="done")
    transform, sampler = cat.make_rb_transform_and_sampler(batch_size=B, traj_key=("collector", "traj_ids"),
                                                           strict_length=False)
    storage = LazyTensorStorage(cap, device=d)
    # a plain ReplayBuffer: TensorDictReplayBuffer cannot write the sample's indices back through a
    # transform that changes the batch's shape (TorchRL's message says so)
    rb = ReplayBuffer(storage=storage, sampler=sampler, transform=transform, batch_size=B)
    traj = np.cumsum(steps.first[:cap + 1]) - 1
    for c0 in range(0, cap, 4096):
        c1 = min(cap, c0 + 4096)
        px = torch.from_numpy(steps.pool[steps.frame[c0:c1]][:, None])
        npx = torch.from_numpy(steps.pool[steps.frame[c0 + 1:c1 + 1]][:, None])
        first = torch.from_numpy(steps.first[c0:c1])
        done = torch.from_numpy(steps.done[c0:c1]).bool()[:, None]
        rb.extend(TensorDict({
            "pixels": px, "action": torch.from_numpy(steps.action[c0:c1]), "is_init": first[:, None],
            "done": torch.zeros(c1 - c0, 1, dtype=torch.bool),
            "collector": {"traj_ids": torch.from_numpy(traj[c0:c1])},
            "next": {"pixels": npx, "reward": torch.from_numpy(steps.reward[c0:c1])[:, None], "done": done}},
            batch_size=[c1 - c0]))
    s = rb.sample()
    assert s["pixels_stack"].shape == (B, K, H, W) and s["next", "pixels_stack"].shape == (B, K, H, W)
    run.time("torchrl_cat", WORK, lambda i: rb.sample(), pl.torch_sync(torch, dev),
             f"one frame a step in LazyTensorStorage(N, device={dev}), CatFrames(N=4) over SliceSampler "
             f"slices at sampling: sample() gives {tuple(s['pixels_stack'].shape)}")
    run.rows[-1]["mem"] = per_million(storage_bytes(storage), cap)


# ---------------------------------------------------------------- report

def table(run, cap):
    print(f"\n{'impl':12} {'work':24} {'us':>10} {'agrl/peer':>10} {'peer/agrl':>10} {'GB per 1M':>10}")
    a = run.us("agrl", WORK)
    for r in run.rows:
        ratio = f"{a / r['us']:9.3f}x" if a else "-"
        inv = f"{r['us'] / a:9.2f}x" if a else "-"
        mem = f"{r['mem'] / 1e9:10.2f}" if "mem" in r else f"{'-':>10}"
        print(f"{r['impl']:12} {r['work']:24} {r['us']:10.1f} {ratio:>10} {inv:>10} {mem}")
    for x in run.absent:
        print(f"{x['impl']}: {x['why']}")
    print(f"(GB per 1M: scaled from a table of {cap:,} steps)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="cuda when agrl sees a GPU, else cpu")
    ap.add_argument("--capacity", type=int, default=MILLION, help="steps each buffer holds (default 1,000,000)")
    ap.add_argument("--iters", type=int, default=0, help="calls a repetition (default: ~0.2 s a repetition)")
    ap.add_argument("--reps", type=int, default=pl.REPS, help="timed repetitions a row (default 9)")
    ap.add_argument("--peers", default=",".join(IMPLS), help=f"implementations of: {', '.join(IMPLS)}")
    ap.add_argument("--json", metavar="FILE", help="write the rows and versions as JSON")
    args = ap.parse_args()
    args.peers = [s.strip() for s in args.peers.split(",") if s.strip()]
    args.only = []
    bad = [s for s in args.peers if s not in IMPLS]
    if bad or args.iters < 0 or args.reps < 1 or args.capacity < 4 * B:
        ap.error(f"unknown implementations: {', '.join(bad)}" if bad else "--iters >= 0, --reps >= 1, --capacity >= 128")
    import numpy as np
    import agrl
    if args.device is None:
        args.device = "cuda" if agrl.cuda_device_count() > 0 else "cpu"
    dev, cap = args.device, args.capacity
    try:
        import torch
    except ImportError as e:
        print(f"bench_frames: torch does not import ({e}); every row hands batches to torch", file=sys.stderr)
        return 2
    if dev == "cuda" and not torch.cuda.is_available():
        print("bench_frames: torch sees no CUDA device", file=sys.stderr)
        return 2
    run = Run(args)
    run.versions.update(python=sys.version.split()[0], numpy=np.__version__, torch=torch.__version__)
    print(f"steps: {cap:,} of 84x84 uint8 frames, stacks of {K}, batches of {B}, on {dev}", flush=True)
    steps = Steps(np, cap)
    benches = {"agrl": bench_agrl, "sb3": bench_sb3, "cpprb": bench_cpprb, "torchrl": bench_torchrl,
               "torchrl_cat": bench_torchrl_cat}
    t0 = time.perf_counter()
    for impl in IMPLS:
        if impl not in args.peers:
            continue
        print(f"[{impl}]", flush=True)
        try:
            benches[impl](run, np, steps, dev, torch, cap)
        except Exception as e:  # an API that changed, memory: reported, never fatal
            run.gone(impl, f"failed: {type(e).__name__}: {e}"[:600])
        gc.collect()
        if dev == "cuda":
            torch.cuda.empty_cache()
    print(f"(fill and timing: {time.perf_counter() - t0:.0f} s)")
    print(f"\nframe rows on {dev} ({run.versions.get('agrl_device', dev)}), us per sample of {B}, median of "
          f"{args.reps}; agrl/peer below 1 and peer/agrl above 1: agrl is faster")
    table(run, cap)
    print("\nversions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
    if args.json:
        doc = {"device": dev, "capacity": cap, "rows": run.rows, "absent": run.absent, "versions": run.versions,
               "reps": args.reps, "iters": args.iters or "auto"}
        with open(args.json + ".tmp", "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(args.json + ".tmp", args.json)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
