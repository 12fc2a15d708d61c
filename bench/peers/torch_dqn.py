"""PyTorch peer for the DQN update rows (see README.md for the definition).

usage: python3 bench/peers/torch_dqn.py [cpu|cuda]

One update: indices drawn on the device, gather of a batch from a
(1M, rows) f32 buffer on the device, target = r + 0.99 (1 - done) max Q',
Huber loss on Q(s, a), backward, Adam step. Impls:

  torch_eager        a plain Python loop of updates
  torch_graph        (cuda) the whole update captured once with
                     torch.cuda.graph and replayed per call
  torch_cpu_1thread  the 4-128-128-2 update on the CPU with one thread
                     (work cpu_dqn_update_4_128_128_2_b128; printed on
                     either device, since it is host work)

Prints one JSON line per row, a "check" line with the loss of the 200th
eager update from seed 0 per shape, and absent lines for what cannot run.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib as pl  # noqa: E402

SEED = 0


def make_buffer(torch, spec, device, seed=SEED):
    """The synthetic replay buffer: (CAPACITY, rows) f32 on `device`,
    normal everywhere, then the action column a uniform index stored as a
    float and the done column Bernoulli(DONE_P)."""
    g = torch.Generator(device=device).manual_seed(seed)
    buf = torch.randn(pl.CAPACITY, spec["rows"], device=device, generator=g)
    n_act = spec["sizes"][-1]
    buf[:, spec["act"]] = torch.randint(0, n_act, (pl.CAPACITY,), device=device,
                                        generator=g).float()
    buf[:, spec["done"]] = (torch.rand(pl.CAPACITY, device=device, generator=g)
                            < pl.DONE_P).float()
    return buf


class DQN:
    """Online and target networks, Adam, and the buffer they read."""

    def __init__(self, torch, spec, buf, device, seed=SEED, capturable=False):
        self.torch, self.spec, self.buf, self.device = torch, spec, buf, device
        torch.manual_seed(seed + 1)
        self.online = pl.make_mlp(torch, spec["sizes"], device)
        self.target = pl.make_mlp(torch, spec["sizes"], device)
        self.target.load_state_dict(self.online.state_dict())
        for p in self.target.parameters():
            p.requires_grad_(False)
        self.opt = torch.optim.Adam(self.online.parameters(), lr=pl.LR, betas=pl.BETAS,
                                    eps=pl.EPS, capturable=capturable)

    def update(self):
        """One DQN update; returns the loss (a 0-d tensor on the device)."""
        torch, s, F = self.torch, self.spec, self.torch.nn.functional
        idx = torch.randint(0, pl.CAPACITY, (s["batch"],), device=self.device)
        batch = torch.index_select(self.buf, 0, idx)
        obs = batch[:, s["obs"][0]:s["obs"][1]]
        action = batch[:, s["act"]].long()
        reward = batch[:, s["rew"]]
        next_obs = batch[:, s["nobs"][0]:s["nobs"][1]]
        done = batch[:, s["done"]]
        with torch.no_grad():
            q_next = self.target(next_obs).max(1).values
            y = reward + pl.GAMMA * (1.0 - done) * q_next
        q = self.online(obs).gather(1, action[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, y)  # Huber, delta 1, mean
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss

    def params(self):
        return [p.detach().clone() for p in self.online.parameters()]


def changed_and_finite(torch, before, dqn, loss):
    """The correctness check before timing: finite loss, parameters moved."""
    moved = any(not torch.equal(a, b.detach()) for a, b in zip(before, dqn.online.parameters()))
    return pl.finite(loss.item()) and moved, f"loss {loss.item():.4g}, params moved {moved}"


def capture_graph(torch, dqn):
    """Captures one whole update (RNG, gather, forward, backward, Adam) in a
    CUDA graph after warm-up on a side stream; returns (graph, static loss)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            dqn.update()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    dqn.opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = dqn.update()
    torch.cuda.synchronize()
    return graph, static_loss


def run_eager(torch, impl, work, spec, buf, device, sync, note):
    dqn = DQN(torch, spec, buf, device)
    before = dqn.params()
    ok, why = changed_and_finite(torch, before, dqn, dqn.update())
    if not ok:
        pl.absent(impl, f"{work}: check failed ({why})")
        return
    iters = pl.auto_iters(lambda i: dqn.update(), sync)
    pl.row(impl, work, pl.measure(lambda i: dqn.update(), iters, sync), note)


def run_graph(torch, work, spec, buf, device, sync):
    impl = "torch_graph"
    try:
        dqn = DQN(torch, spec, buf, device, capturable=True)
        graph, loss = capture_graph(torch, dqn)
    except Exception as e:  # capture unsupported by this build: say so, go on
        pl.absent(impl, f"{work}: capture failed: {type(e).__name__}: {e}")
        return
    before = dqn.params()
    graph.replay()
    ok, why = changed_and_finite(torch, before, dqn, loss)
    if not ok:
        pl.absent(impl, f"{work}: check failed ({why})")
        return
    iters = pl.auto_iters(lambda i: graph.replay(), sync)
    pl.row(impl, work, pl.measure(lambda i: graph.replay(), iters, sync),
           "whole update in one CUDA graph, Adam(capturable=True)")


def loss_after(torch, spec, buf, device, n=200):
    """The loss returned by the n-th eager update from seed 0 (information)."""
    dqn = DQN(torch, spec, buf, device, seed=SEED)  # seeds every device's RNG
    for _ in range(n):
        loss = dqn.update()
    return loss.item()


def main():
    dev = pl.device_arg()
    impls = ["torch_eager", "torch_cpu_1thread"] + (["torch_graph"] if dev == "cuda" else [])
    torch = pl.import_torch(impls, dev)
    if torch is None:
        return
    device = torch.device(dev)
    sync = pl.torch_sync(torch, dev)

    for shape, spec in pl.DQN_SHAPES.items():
        work = pl.dqn_work(shape)
        buf = make_buffer(torch, spec, device)
        run_eager(torch, "torch_eager", work, spec, buf, device, sync,
                  f"eager loop, {torch.get_num_threads()} threads" if dev == "cpu"
                  else "eager loop")
        if dev == "cuda":
            run_graph(torch, work, spec, buf, device, sync)
        pl.check("torch_eager", "loss_of_update_200_" + shape,
                 round(loss_after(torch, spec, buf, device), 6), seed=SEED, device=dev)
        del buf

    # The CPU row, one thread, first shape only.
    shape = "4_128_128_2_b128"
    spec = pl.DQN_SHAPES[shape]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cpu = torch.device("cpu")
        run_eager(torch, "torch_cpu_1thread", "cpu_" + pl.dqn_work(shape), spec,
                  make_buffer(torch, spec, cpu), cpu, pl.torch_sync(torch, "cpu"),
                  "eager loop, torch.set_num_threads(1)")
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    main()
