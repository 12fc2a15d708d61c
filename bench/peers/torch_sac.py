"""PyTorch peer for the SAC and TD3 update rows (see README.md; the
definition is ac_defs.py's, agrl's update written as CleanRL's
sac_continuous_action.py and td3_continuous_action.py write it).

usage: python3 bench/peers/torch_sac.py [cpu|cuda] [--algos sac,td3]
           [--impls torch-eager,torch-cudagraph,torch-cudagraph-fused] [--iters N] [--reps N]
           [--threads N]

One update: B = 256 indices drawn on the device with torch.randint, a gather
of those rows of the (100000, 9) f32 table on the device, the target (no
gradient), the twin critics' loss mse(Q1, y) + mse(Q2, y), backward, one Adam
step over both critics; then (SAC: every update; TD3: every second) the
actor's loss through the critics, its Adam step, SAC's temperature step
(Adam on log alpha) and the Polyak averaging of the targets (SAC's critics'
targets: every update). Impls:

  torch-eager             a plain Python loop of updates (Adam's default
                          implementation: foreach on CUDA)
  torch-cudagraph         (cuda) the whole update, the draws included, captured
                          once with torch.cuda.graph and replayed a call;
                          Adam(capturable=True); TD3: one graph of an update
                          pair (critics; critics + actor)
  torch-cudagraph-fused   (cuda) the same with Adam(fused=True, capturable=True)

The rows are per update (TD3's: a pair / 2). Every impl is checked (finite
losses, parameters moved) before it is timed. A check line per algorithm
gives the losses of ac_defs.CHECK_UPDATES updates from ac_defs' weights with
ac_defs' fixed draws (the jax peer prints the same line; they must agree).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ac_defs as D  # noqa: E402
import peerlib as pl  # noqa: E402

IMPLS = ("torch-eager", "torch-cudagraph", "torch-cudagraph-fused")


def linear_from(torch, layers, device):
    """nn.Sequential of Linear-ReLU-...-Linear holding ac_defs' weights."""
    mods = []
    for i, (w, b) in enumerate(layers):
        lin = torch.nn.Linear(w.shape[0], w.shape[1])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(b))
        mods.append(lin)
        if i < len(layers) - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods).to(device)


def make_table(torch, np, device):
    """The (N_FILL, ROW) f32 table of ac_defs on the device."""
    return torch.from_numpy(D.table_rows(np, D.pendulum_transitions(np))).to(device)


class AC:
    """SAC or TD3: networks, targets, optimizers, and the table they read."""

    def __init__(self, torch, np, algo, table, device, capturable=False, fused=False):
        self.torch, self.algo, self.table, self.device = torch, algo, table, device
        self.sac = algo == "sac"
        self.n = table.shape[0]
        p = D.init_params(np, algo)
        self.actor = linear_from(torch, p["actor"], device)
        self.q1 = linear_from(torch, p["q1"], device)
        self.q2 = linear_from(torch, p["q2"], device)
        self.q1t = linear_from(torch, p["q1"], device).requires_grad_(False)
        self.q2t = linear_from(torch, p["q2"], device).requires_grad_(False)
        self.actor_t = None if self.sac else linear_from(torch, p["actor"], device).requires_grad_(False)
        self.actor_params = list(self.actor.parameters())
        self.q_params = list(self.q1.parameters()) + list(self.q2.parameters())
        self.t_pairs = (list(self.q1t.parameters()) + list(self.q2t.parameters()),
                        list(self.q1.parameters()) + list(self.q2.parameters()))
        if not self.sac:
            self.t_pairs = (self.t_pairs[0] + list(self.actor_t.parameters()),
                            self.t_pairs[1] + self.actor_params)
        kw = dict(betas=D.BETAS, eps=D.ADAM_EPS, capturable=capturable)
        if fused:
            kw["fused"] = True
        self.opt_q = torch.optim.Adam(self.q_params, lr=D.CRITIC_LR, **kw)
        self.opt_pi = torch.optim.Adam(self.actor_params, lr=D.ACTOR_LR, **kw)
        self.log_alpha = torch.full((1,), float(np.log(D.ALPHA0)), device=device, requires_grad=True)
        self.opt_alpha = torch.optim.Adam([self.log_alpha], lr=D.CRITIC_LR, **kw) if self.sac else None
        self.k = 0  # updates done

    # ---- the policies, in [-1, 1]
    def sample(self, x, eps):
        """SAC: tanh-squashed Gaussian action and log pi (B,)."""
        torch = self.torch
        out = self.actor(x)
        mu, raw = out[:, :D.ACT], out[:, D.ACT:]
        log_std = D.LOG_STD_MIN + 0.5 * (D.LOG_STD_MAX - D.LOG_STD_MIN) * (torch.tanh(raw) + 1.0)
        if eps is None:
            eps = torch.randn_like(mu)
        a = torch.tanh(mu + log_std.exp() * eps)
        logp = (-0.5 * eps * eps - log_std - 0.5 * D.LOG_2PI - torch.log(1.0 - a * a + 1e-6)).sum(1)
        return a, logp

    def polyak(self):
        torch = self.torch
        with torch.no_grad():
            try:
                torch._foreach_lerp_(self.t_pairs[0], self.t_pairs[1], D.TAU)
            except (AttributeError, RuntimeError):
                for t, p in zip(*self.t_pairs):
                    t.lerp_(p, D.TAU)

    # ---- one update
    def update(self, draws=None):
        """One update (draws = (idx, eps_next, eps_pi) tensors, else drawn
        here on the device). Returns (critic loss, actor loss or None)."""
        torch, F = self.torch, self.torch.nn.functional
        self.k += 1
        if draws is None:
            idx, eps_n, eps_p = torch.randint(0, self.n, (D.BATCH,), device=self.device), None, None
        else:
            idx, eps_n, eps_p = draws
        b = torch.index_select(self.table, 0, idx)
        obs, act = b[:, D.C_OBS[0]:D.C_OBS[1]], b[:, D.C_ACT[0]:D.C_ACT[1]]
        rew, nobs, term = b[:, D.C_REW], b[:, D.C_NOBS[0]:D.C_NOBS[1]], b[:, D.C_TERM]
        with torch.no_grad():
            if self.sac:
                alpha = self.log_alpha.detach().exp()
                na, nlp = self.sample(nobs, eps_n)
            else:
                if eps_n is None:
                    eps_n = torch.randn(D.BATCH, D.ACT, device=self.device)
                noise = (eps_n * D.TARGET_NOISE).clamp(-D.NOISE_CLIP, D.NOISE_CLIP)
                na = (torch.tanh(self.actor_t(nobs)) + noise).clamp(-1.0, 1.0)
            x = torch.cat([nobs, na], 1)
            v = torch.min(self.q1t(x), self.q2t(x)).squeeze(1)
            if self.sac:
                v = v - alpha * nlp
            y = rew + D.GAMMA * (1.0 - term) * v
        xq = torch.cat([obs, act], 1)
        closs = F.mse_loss(self.q1(xq).squeeze(1), y) + F.mse_loss(self.q2(xq).squeeze(1), y)
        self.opt_q.zero_grad(set_to_none=True)
        closs.backward()
        self.opt_q.step()
        if not D.is_actor_update(self.algo, self.k):
            return closs, None
        # the actor, through the critics (their weights get no gradient)
        if self.sac:
            pa, lp = self.sample(obs, eps_p)
            x = torch.cat([obs, pa], 1)
            aloss = (alpha * lp - torch.min(self.q1(x), self.q2(x)).squeeze(1)).mean()
        else:
            aloss = -self.q1(torch.cat([obs, torch.tanh(self.actor(obs))], 1)).mean()
        self.opt_pi.zero_grad(set_to_none=True)
        aloss.backward(inputs=self.actor_params)
        self.opt_pi.step()
        if self.sac:  # the temperature: -log alpha * mean(log pi + target entropy)
            tl = -(self.log_alpha * (lp.detach().mean() + D.TARGET_ENTROPY)).sum()
            self.opt_alpha.zero_grad(set_to_none=True)
            tl.backward()
            self.opt_alpha.step()
        self.polyak()
        return closs, aloss

    def snapshot(self):
        return [p.detach().clone() for p in self.actor_params + self.q_params]

    def moved(self, before):
        return any(not self.torch.equal(a, b.detach()) for a, b in zip(before, self.actor_params + self.q_params))


def per_call(algo):
    """Updates in one timed call: TD3's call is a pair (critics; critics + actor)."""
    return 1 if algo == "sac" else D.POLICY_DELAY_TD3


def make_body(ac, algo):
    """A call of per_call(algo) updates; returns the last (closs, aloss)."""
    if algo == "sac":
        return ac.update
    return lambda: (ac.update(), ac.update())[-1]


def checked(ac, impl, work, call, static=None):
    """Runs one call and checks it (the losses it returns, or `static`, the
    graph's output tensors); prints an absent line and returns False when a
    loss is not finite or the parameters did not move."""
    before = ac.snapshot()
    out = call()
    c, a = static if static is not None else out
    moved = ac.moved(before)
    if pl.finite(c.item()) and (a is None or pl.finite(a.item())) and moved:
        return True
    pl.absent(impl, f"{work}: check failed (losses {c.item()}, {None if a is None else a.item()}; "
                    f"params moved {moved})")
    return False


def timed(impl, work, call, sync, algo, args, note):
    iters = args.iters or pl.auto_iters(lambda i: call(), sync)
    pl.row(impl, work, pl.measure(lambda i: call(), iters, sync, reps=args.reps, per_call=per_call(algo)),
           note, updates_per_call=per_call(algo), iters=iters)


def run_eager(torch, np, algo, table, device, sync, args):
    impl, work = "torch-eager", D.WORK[algo]
    ac = AC(torch, np, algo, table, device)
    body = make_body(ac, algo)
    if not checked(ac, impl, work, body):
        return
    note = "eager loop, Adam's default implementation" + (" (foreach)" if device.type == "cuda" else "")
    if device.type == "cpu":
        note += f", {torch.get_num_threads()} threads"
    timed(impl, work, body, sync, algo, args, note)


def capture(torch, ac, body):
    """The whole call captured in one CUDA graph after warm-up on a side
    stream; returns (graph, static (closs, aloss))."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(s)
    for o in (ac.opt_q, ac.opt_pi, ac.opt_alpha):
        if o is not None:
            o.zero_grad(set_to_none=True)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = body()
    torch.cuda.synchronize()
    return g, out


def run_graph(torch, np, algo, table, device, sync, args, fused):
    impl, work = ("torch-cudagraph-fused" if fused else "torch-cudagraph"), D.WORK[algo]
    try:
        ac = AC(torch, np, algo, table, device, capturable=True, fused=fused)
        g, out = capture(torch, ac, make_body(ac, algo))
    except Exception as e:  # capture unsupported by this build: say so, go on
        pl.absent(impl, f"{work}: capture failed: {type(e).__name__}: {e}"[:400])
        return
    if not checked(ac, impl, work, g.replay, static=out):
        return
    timed(impl, work, g.replay, sync, algo, args,
          "whole update in one CUDA graph, Adam(" + ("fused=True, " if fused else "") + "capturable=True)"
          + ("; one graph of an update pair" if algo == "td3" else ""))


def fixed_losses(torch, np, algo, table, device):
    """The losses of CHECK_UPDATES eager updates with ac_defs' draws."""
    ac = AC(torch, np, algo, table, device)
    out = []
    for idx, en, ep in D.check_draws(np, table.shape[0]):
        draws = (torch.from_numpy(idx).to(device), torch.from_numpy(en).to(device),
                 torch.from_numpy(ep).to(device))
        c, a = ac.update(draws)
        out.append([round(c.item(), 6), None if a is None else round(a.item(), 6)])
    return out


def main():
    args = D.peer_args(__doc__, IMPLS, "torch.set_num_threads (0: torch's default)")
    dev = args.device
    impls = [i for i in args.impls if dev == "cuda" or i == "torch-eager"]
    torch = pl.import_torch(impls, dev)
    if torch is None:
        return
    try:
        import numpy as np
    except Exception as e:
        pl.absent(impls, f"numpy does not import: {type(e).__name__}: {e}")
        return
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(dev)
    sync = pl.torch_sync(torch, dev)
    table = make_table(torch, np, device)
    for algo in args.algos:
        if "torch-eager" in impls:
            run_eager(torch, np, algo, table, device, sync, args)
        if "torch-cudagraph" in impls:
            run_graph(torch, np, algo, table, device, sync, args, fused=False)
        if "torch-cudagraph-fused" in impls:
            run_graph(torch, np, algo, table, device, sync, args, fused=True)
        pl.check("torch-eager", f"{algo}_losses_fixed_draws", fixed_losses(torch, np, algo, table, device),
                 device=dev, updates=D.CHECK_UPDATES, torch=torch.__version__)


if __name__ == "__main__":
    main()
