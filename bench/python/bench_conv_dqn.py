"""A convolutional DQN update (by default the Nature CNN over 4 x 84 x 84
observations, B = 32): agrl.DQN beside PyTorch (eager, and the step as one
CUDA graph) and a jitted JAX update, in one invocation on one machine, each
with the FLOP/s it achieves. bench/python/README.md defines the update, the
checks made before timing and the FLOP count.

usage: python3 bench/python/bench_conv_dqn.py [--device cpu|cuda] [--batch B]
           [--conv 32x8s4,64x4s2,64x3s1] [--hidden 512] [--buffer N] [--tf32]
           [--peak-tflops T] [--impls agrl,torch,torch_graph,jax] [--json FILE]
"""
import argparse
import copy
import json
import os
import re
import struct
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import peerlib as pl  # noqa: E402
from bench_replay import Run, version_of  # noqa: E402

IMPLS = ("agrl", "torch", "torch_graph", "jax")
GAMMA = 0.99
BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # agrl's ag_adam_defaults
R_READ = 10.0  # reward of the Q readouts (|Q| stays below R - 1: Huber's linear part)


class Spec:
    """The network's layers and their sizes, and the forward FLOPs of a sample."""

    def __init__(self, obs, conv, hidden, n_actions):
        self.obs, self.conv, self.hidden, self.n_actions = obs, conv, hidden, n_actions
        self.D = obs[0] * obs[1] * obs[2]
        c, h, w = obs
        self.flops = 0
        for K, k, s, p in conv:
            h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            if h < 1 or w < 1:
                raise ValueError(f"convolution {K}x{k}s{s}p{p} leaves no output")
            self.flops += 2 * K * h * w * c * k * k
            c = K
        self.flat = c * h * w
        sizes = [self.flat] + list(hidden) + [n_actions]
        self.flops += sum(2 * a * b for a, b in zip(sizes, sizes[1:]))
        self.row = 2 * self.D + 3  # a table row: obs | next_obs | action | reward | terminated


def parse_conv(text):
    out = []
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d+)x(\d+)(?:s(\d+))?(?:p(\d+))?", part.strip())
        if not m:
            raise argparse.ArgumentTypeError(f"{part!r}: want CHANNELSxKERNEL[sSTRIDE][pPAD], e.g. 32x8s4")
        out.append((int(m[1]), int(m[2]), int(m[3] or 1), int(m[4] or 0)))
    return out


def read_policy(np, path):
    """agrl's policy file (docs/container.md, kind "mlp"), every CRC-32
    checked: ([(w [K, C, k, k], b)] of the convolutions, [(W [out, in], b)]
    of the linear layers), float32."""
    raw = open(path, "rb").read()
    _, hlen, n_keys, n_secs, part, total, _ = struct.unpack_from("<IIIIQQQ", raw, 8)
    if raw[:8] != b"AGRLFILE" or total != len(raw) or struct.unpack_from("<I", raw, hlen - 4)[0] != zlib.crc32(
            raw[:hlen - 4]):
        raise ValueError(f"{path}: not an agrl file, or a bad length or header CRC")
    at, keys, secs = 48, {}, {}
    for _ in range(n_keys):  # the integer keys (types 1, 2, 5) are the ones read here
        typ, _, nlen, count = struct.unpack_from("<BBHI", raw, at)
        name, at = raw[at + 8:at + 8 + nlen].decode(), at + 8 + nlen
        size = count if typ == 4 else 8 * count if typ in (5, 6) else 8
        keys[name] = None if typ in (3, 4, 6) else struct.unpack_from(f"<{size // 8}q", raw, at)
        at += size
    for _ in range(n_secs):
        nlen, _, _, ndim, off, nbytes = struct.unpack_from("<HBBIQQ", raw, at)
        dims = struct.unpack_from(f"<{ndim}Q", raw, at + 24)
        name, at, data = raw[at + 24 + 8 * ndim:at + 24 + 8 * ndim + nlen].decode(), at + 24 + 8 * ndim + nlen, b""
        for p0 in range(0, nbytes, part):
            block = raw[off:off + min(part, nbytes - p0)]
            if struct.unpack_from("<I", raw, off + len(block))[0] != zlib.crc32(block):
                raise ValueError(f"{path}: section {name}: bad CRC")
            data, off = data + block, off + len(block) + 4
        secs[name] = (dims, np.frombuffer(data, "<f4").copy())
    conv, c, convs = keys["mlp.conv"], keys["mlp.in_shape"][0], []
    for i in range(len(conv) // 4):
        convs.append((secs[f"conv{i}.w"][1].reshape(conv[4 * i], c, conv[4 * i + 1], -1), secs[f"conv{i}.b"][1]))
        c = conv[4 * i]
    fcs = [(np.ascontiguousarray(secs[f"W{l}"][1].reshape(secs[f"W{l}"][0][::-1]).T), secs[f"b{l}"][1])
           for l in range(len(keys["mlp.sizes"]) - 1)]  # column-major [out, in]
    return convs, fcs


def params(W):
    """The weights and biases of read_policy's layers, in the order of torch's parameters()."""
    return [w for pair in W[0] + W[1] for w in pair]


def np_q(np, W, spec, obs):
    """Q-values in float64 (numpy, windows of the input): the reference."""
    x = np.asarray(obs, np.float64).reshape(-1, *spec.obs)
    for (w, b), (K, k, s, p) in zip(W[0], spec.conv):
        x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::s, ::s]
        x = np.maximum(np.einsum("nchwij,kcij->nkhw", win, w.astype(np.float64), optimize=True)
                       + b[None, :, None, None], 0)
    x = x.reshape(len(x), -1)
    for i, (w, b) in enumerate(W[1]):
        x = x @ w.T.astype(np.float64) + b
        if i + 1 < len(W[1]):
            x = np.maximum(x, 0)
    return x


def np_loss(np, W, spec, rows):
    D = spec.D
    a, r, t = rows[:, 2 * D].astype(int), rows[:, 2 * D + 1], rows[:, 2 * D + 2]
    qn = np_q(np, W, spec, rows[:, D:2 * D])
    y = r + GAMMA * (1 - t) * qn[np.arange(len(rows)), qn.argmax(1)]  # target = online at the start
    d = np_q(np, W, spec, rows[:, :D])[np.arange(len(rows)), a] - y
    return float(np.mean(np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5)))


def make_table(np, spec, n, seed):
    """n random transitions, a float32 row each: obs and next_obs uniform in
    [0, 1), the action index, a normal reward, terminated with p = 0.05."""
    rng, D = np.random.default_rng(seed), spec.D
    t = np.empty((n, spec.row), np.float32)
    for c0 in range(0, n, 1024):
        m = min(n, c0 + 1024) - c0
        t[c0:c0 + m, :2 * D] = rng.random((m, 2 * D), np.float32)
        t[c0:c0 + m, 2 * D:] = np.stack([rng.integers(0, spec.n_actions, m), rng.standard_normal(m),
                                         rng.random(m) < 0.05], 1)
    return t


def store_rows(np, q, spec, rows):
    D = spec.D
    for c0 in range(0, len(rows), 256):
        r = rows[c0:c0 + 256]
        q.store(np.ascontiguousarray(r[:, :D]), r[:, 2 * D].astype(np.int32), np.ascontiguousarray(r[:, 2 * D + 1]),
                np.ascontiguousarray(r[:, D:2 * D]), r[:, 2 * D + 2].astype(np.int32))


def agrl_dqn(agrl, ctx, spec, args, buffer):
    return agrl.DQN(ctx, obs_dim=spec.D, n_actions=spec.n_actions, conv=spec.conv, obs_shape=spec.obs,
                    hidden=spec.hidden, batch_size=args.batch, buffer_size=buffer, n_step=1, double_dqn=True,
                    huber=True, learning_starts=0, per=False, lr=args.lr, gamma=GAMMA, max_grad_norm=0.0,
                    seed=args.seed)


def agrl_guard(np, agrl, ctx, spec, args, tmp, probe, one):
    """agrl's initial weights, Q-values of `probe` read through the loss, its
    greedy actions there, and one update on `one` repeated: (W0, Q, actions,
    loss, W1)."""
    B = args.batch
    q = agrl_dqn(agrl, ctx, spec, args, B)
    w0 = os.path.join(tmp, "w0.agrl")
    q.save_policy(w0)
    W0 = read_policy(np, w0)
    acts = q.act(probe, explore=False)
    Q = np.zeros((len(probe), spec.n_actions))
    for i, s in enumerate(probe):
        for a in range(spec.n_actions):
            rows = np.tile(np.concatenate([s, s, [a, R_READ, 1]]).astype(np.float32), (B, 1))
            store_rows(np, q, spec, rows)
            Q[i, a] = R_READ - 0.5 - q.train(1)
            q.load_policy(w0)  # the loss is taken before the step; the weights go back
    q.free()
    q = agrl_dqn(agrl, ctx, spec, args, B)  # a fresh Adam
    store_rows(np, q, spec, np.tile(one, (B, 1)))
    loss = q.train(1)
    q.save_policy(os.path.join(tmp, "w1.agrl"))
    W1 = read_policy(np, os.path.join(tmp, "w1.agrl"))
    q.free()
    return W0, Q, acts, loss, W1


def bench_agrl(run, np, agrl, ctx, spec, args, table):
    q = agrl_dqn(agrl, ctx, spec, args, len(table))
    store_rows(np, q, spec, table)
    q.train(8)  # records the chain of updates
    t0 = time.perf_counter()
    q.train(8)
    k = args.iters or max(8, int(round(0.25 / max((time.perf_counter() - t0) / 8, 1e-9) / 8)) * 8)
    med, lo, hi = pl.measure(lambda i: q.train(k), 1, lambda _l=None: None, reps=args.reps, per_call=k)
    run.rows.append({"impl": "agrl", "work": WORK, "us": round(med, 3), "min": round(lo, 3), "max": round(hi, 3),
                     "iters": k, "note": f"train({k}): K recorded updates, each drawing and gathering its batch "
                                         f"on the device; the last loss read back (a wait)"})
    print(f"  agrl        {med:11.1f} us  ({lo:.1f} - {hi:.1f}, train({k}) a rep)", flush=True)
    q.free()


class TorchDQN:
    def __init__(self, torch, W, spec, args, dev, capturable):
        nn, self.torch, self.spec, self.B = torch.nn, torch, spec, args.batch
        layers, c = [], spec.obs[0]
        for K, k, s, p in spec.conv:
            layers += [nn.Conv2d(c, K, k, s, p), nn.ReLU()]
            c = K
        layers.append(nn.Flatten())
        sizes = [spec.flat] + list(spec.hidden) + [spec.n_actions]
        for i in range(len(sizes) - 1):
            layers += [nn.Linear(sizes[i], sizes[i + 1])] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
        self.fmt = torch.channels_last if args.channels_last else torch.contiguous_format
        self.q = nn.Sequential(*layers).to(dev, memory_format=self.fmt)
        self.t = copy.deepcopy(self.q)
        with torch.no_grad():
            for net in (self.q, self.t):
                for p, w in zip(net.parameters(), params(W)):
                    p.copy_(torch.from_numpy(w.reshape(p.shape)))
        self.t.requires_grad_(False)
        self.opt = torch.optim.Adam(self.q.parameters(), lr=args.lr, betas=BETAS, eps=ADAM_EPS,
                                    capturable=capturable)

    def image(self, x):
        return x.reshape(len(x), *self.spec.obs).contiguous(memory_format=self.fmt)

    def loss(self, rows):
        torch, D = self.torch, self.spec.D
        a, r, term = rows[:, 2 * D].long(), rows[:, 2 * D + 1], rows[:, 2 * D + 2]
        with torch.no_grad():
            nx = self.image(rows[:, D:2 * D])
            best = self.q(nx).argmax(1, keepdim=True)
            y = r + GAMMA * (1 - term) * self.t(nx).gather(1, best).squeeze(1)
        qa = self.q(self.image(rows[:, :D])).gather(1, a[:, None]).squeeze(1)
        return torch.nn.functional.huber_loss(qa, y, delta=1.0)

    def update(self, rows):
        loss = self.loss(rows)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss

    def step(self, table):
        idx = self.torch.randint(0, len(table), (self.B,), device=table.device)
        return self.update(table.index_select(0, idx))

    def weights(self):
        return [p.detach().cpu().numpy() for p in self.q.parameters()]


class JaxDQN:
    def __init__(self, jax, W, spec, args, device):
        import jax.numpy as jnp
        from jax import lax
        self.jax, self.spec, self.B = jax, spec, args.batch
        prec = lax.Precision.DEFAULT if args.tf32 else lax.Precision.HIGHEST
        nconv, D = len(spec.conv), spec.D

        def net(params, x):
            x = x.reshape(len(x), *spec.obs)
            for (w, b), (K, k, s, p) in zip(params[:nconv], spec.conv):
                x = lax.conv_general_dilated(x, w, (s, s), [(p, p), (p, p)],
                                             dimension_numbers=("NCHW", "OIHW", "NCHW"), precision=prec)
                x = jax.nn.relu(x + b[None, :, None, None])
            x = x.reshape(len(x), -1)
            for i, (w, b) in enumerate(params[nconv:]):
                x = jnp.dot(x, w.T, precision=prec) + b
                if i + 1 < len(params) - nconv:
                    x = jax.nn.relu(x)
            return x

        def loss(params, target, rows):
            a, r, term = rows[:, 2 * D].astype(jnp.int32), rows[:, 2 * D + 1], rows[:, 2 * D + 2]
            nx, ar = rows[:, D:2 * D], jnp.arange(len(rows))
            best = jnp.argmax(net(lax.stop_gradient(params), nx), 1)
            y = lax.stop_gradient(r + GAMMA * (1 - term) * net(target, nx)[ar, best])
            d = net(params, rows[:, :D])[ar, a] - y
            return jnp.mean(jnp.where(jnp.abs(d) < 1, 0.5 * d * d, jnp.abs(d) - 0.5))

        def update(state, target, rows):
            params, m, v, t = state
            lv, g = jax.value_and_grad(loss)(params, target, rows)
            t = t + 1
            m = jax.tree.map(lambda m, g: BETAS[0] * m + (1 - BETAS[0]) * g, m, g)
            v = jax.tree.map(lambda v, g: BETAS[1] * v + (1 - BETAS[1]) * g * g, v, g)
            c1, c2 = 1 - BETAS[0] ** t, 1 - BETAS[1] ** t
            params = jax.tree.map(lambda p, m, v: p - args.lr * (m / c1) / (jnp.sqrt(v / c2) + ADAM_EPS),
                                  params, m, v)
            return (params, m, v, t), lv

        def step(state, key, target, table):
            key, sub = jax.random.split(key)
            idx = jax.random.randint(sub, (self.B,), 0, len(table))
            state, lv = update(state, target, jnp.take(table, idx, axis=0))
            return state, key, lv

        params = [tuple(jax.device_put(jnp.asarray(w), device) for w in pair) for pair in W[0] + W[1]]
        self.target = jax.tree.map(jnp.copy, params)
        zero = jax.tree.map(jnp.zeros_like, params)
        self.state = (params, zero, jax.tree.map(jnp.copy, zero), jax.device_put(jnp.float32(0), device))
        self.key = jax.device_put(jax.random.key(args.seed), device)
        self.q, self.loss, self.update = jax.jit(net), jax.jit(loss), jax.jit(update)
        self.step = jax.jit(step, donate_argnums=(0, 1))

    def weights(self):
        return [self.jax.device_get(w) for pair in self.state[0] for w in pair]


class Checks:
    """The references every implementation is held to: float64 Q-values of
    the probe observations and loss of B distinct transitions (numpy, from
    agrl's initial weights W0), and agrl's own first update on B copies of
    one transition (its loss and the weights W1 after Adam's step)."""

    def __init__(self, np, run, spec, args, table, guard, probe, one):
        self.np, self.run, self.args, self.tol, self.probe, self.one = np, run, args, args.tol, probe, one
        self.W0, Qa, acts, self.loss_a, self.W1 = guard
        self.rows = table[1:1 + args.batch]
        self.ref_q, self.ref_loss = np_q(np, self.W0, spec, probe), np_loss(np, self.W0, spec, self.rows)
        self.agrl_ok = self.close(Qa, self.ref_q) and np.array_equal(acts, self.ref_q.argmax(1))
        run.checks.append({"impl": "agrl", "q_readout": Qa.tolist(), "q_f64": self.ref_q.tolist(),
                           "greedy": acts.tolist(), "one_update_loss": self.loss_a, "ok": self.agrl_ok})
        print(f"checks (tolerance {self.tol:g} of the largest value): agrl's Q read through its loss, max diff "
              f"{np.abs(Qa - self.ref_q).max():.2e} from numpy float64 (max |Q| {np.abs(self.ref_q).max():.4f}), "
              f"greedy actions {'equal' if np.array_equal(acts, self.ref_q.argmax(1)) else 'DIFFERENT'} -> "
              f"{'ok' if self.agrl_ok else 'FAILED'}; its first update's loss {self.loss_a:.6f}", flush=True)

    def close(self, got, want):
        got, want = self.np.asarray(got, self.np.float64), self.np.asarray(want, self.np.float64)
        return float(self.np.max(self.np.abs(got - want)) / max(self.np.max(self.np.abs(want)), 1e-6)) <= self.tol

    def peer(self, name, q_fn, loss_fn, update_fn, weights):
        """Q-values, the loss of the distinct batch, then one update on the
        repeated transition (it changes the peer's weights): the share of
        weights whose step differs from agrl's by more than lr x tolerance
        (Adam's first step is up to lr a weight), and of those agrl's step
        moved by more than lr / 10."""
        np, lr = self.np, self.args.lr
        qv, lv = np.asarray(q_fn(self.probe)), float(loss_fn(self.rows))
        l1 = float(update_fn(np.tile(self.one, (len(self.rows), 1))))
        w0, w1, got = (np.concatenate([w.ravel() for w in ws]) for ws in (params(self.W0), params(self.W1), weights()))
        off, moved = float(np.mean(np.abs(got - w1) > lr * self.tol)), float(np.mean(np.abs(w1 - w0) > lr / 10))
        good = (self.close(qv, self.ref_q) and self.close(lv, self.ref_loss) and self.close(l1, self.loss_a)
                and off <= 1e-3)
        self.run.checks.append({"impl": name, "q_max_diff": float(np.abs(qv - self.ref_q).max()), "loss": lv,
                                "loss_f64": self.ref_loss, "one_update_loss": l1, "agrl_one_update_loss": self.loss_a,
                                "weights_off": off, "agrl_moved": moved, "ok": good})
        print(f"  {name}: Q max diff {np.abs(qv - self.ref_q).max():.2e}; loss of {len(self.rows)} distinct "
              f"{lv:.6f} (float64 {self.ref_loss:.6f}); one update: loss {l1:.6f} (agrl {self.loss_a:.6f}), "
              f"{off:.2e} of the weights stepped apart from agrl's by > lr x {self.tol:g} (agrl's step moved "
              f"{moved:.1%}) -> {'ok' if good else 'FAILED'}", flush=True)
        if not good:
            self.run.gone(name, "failed its check; not timed")
        return good


WORK = "dqn_update_conv"


def bench_torch(run, spec, args, table, chk, impl):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = args.tf32
    if args.device == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    run.versions.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    if impl == "torch_graph" and args.device != "cuda":
        return run.gone(impl, "skipped: CUDA graphs need --device cuda")
    dev = torch.device(args.device)
    if args.device == "cuda":
        run.versions["gpu"] = torch.cuda.get_device_name()
    m = TorchDQN(torch, chk.W0, spec, args, dev, capturable=impl == "torch_graph")
    if not chk.peer(impl, lambda x: m.q(m.image(torch.from_numpy(x).to(dev))).detach().cpu(),
                    lambda r: m.loss(torch.from_numpy(r).to(dev)).item(),
                    lambda r: m.update(torch.from_numpy(r).to(dev)).item(), m.weights):
        return
    sync, ttable = pl.torch_sync(torch, args.device), torch.from_numpy(table).to(dev)
    layout = ", channels_last" if args.channels_last else ""
    if impl == "torch":
        return run.time(impl, WORK, lambda i: m.step(ttable), sync, f"randint + index_select of {args.batch} rows, "
                        f"forward, backward, torch.optim.Adam (its default implementation){layout}")
    s = torch.cuda.Stream()  # warm-up on a side stream, as torch's capture asks
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            m.step(ttable)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    m.opt.zero_grad(set_to_none=True)  # backward then takes the gradients from the graph's pool
    with torch.cuda.graph(g):
        m.step(ttable)
    run.time(impl, WORK, lambda i: g.replay(), sync,
             f"the same step (draw, gather, update, Adam capturable=True) as one CUDA graph{layout}")


def bench_jax(run, spec, args, table, chk, impl="jax"):
    if args.device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
        if args.threads == 1:  # XLA's own thread pool: one thread, as the other rows
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # beside torch and agrl on the GPU
    import jax
    if not args.tf32:
        jax.config.update("jax_default_matmul_precision", "highest")
    jdev = jax.devices("cpu" if args.device == "cpu" else "gpu")[0]
    run.versions.update(jax=jax.__version__, jaxlib=version_of("jaxlib"), jax_device=str(jdev))
    m = JaxDQN(jax, chk.W0, spec, args, jdev)

    def one_update(rows):
        m.state, lv = m.update(m.state, m.target, jax.device_put(rows, jdev))
        return lv

    if not chk.peer("jax", lambda x: m.q(m.state[0], jax.device_put(x, jdev)),
                    lambda r: m.loss(m.state[0], m.target, jax.device_put(r, jdev)), one_update, m.weights):
        return
    jtable = jax.device_put(table, jdev)

    def body(i):
        m.state, m.key, lv = m.step(m.state, m.key, m.target, jtable)
        return lv

    run.time("jax", WORK, body, pl.jax_sync,
             f"one jitted call: random.randint + take of {args.batch} rows, the loss and its gradient, "
             "hand-written Adam; state donated")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add = ap.add_argument
    add("--device", choices=("cpu", "cuda"), default=None, help="cuda when agrl sees a GPU, else cpu")
    add("--batch", type=int, default=32)
    add("--conv", type=parse_conv, default=parse_conv("32x8s4,64x4s2,64x3s1"),
        help="convolutions, CHANNELSxKERNEL[sSTRIDE][pPAD] each (default 32x8s4,64x4s2,64x3s1)")
    add("--hidden", default="512", help="hidden layer sizes after the convolutions (default 512)")
    add("--obs", default="4x84x84", help="observation shape CxHxW (default 4x84x84)")
    add("--actions", type=int, default=6)
    add("--buffer", type=int, default=10000, help="transitions in each table (default 10,000)")
    add("--lr", type=float, default=1e-4)
    add("--seed", type=int, default=0)
    add("--tf32", action="store_true", help="let the peers use TF32 (agrl computes FP32 only)")
    add("--channels-last", action="store_true", help="torch rows in channels_last layout")
    add("--peak-tflops", type=float, default=67.0, help="the peak set against (default 67: H100/H200 SXM FP32)")
    add("--impls", default=",".join(IMPLS), help=f"of: {', '.join(IMPLS)}")
    add("--threads", type=int, default=None, help="threads on the CPU (default 1; 0: each library's default)")
    add("--iters", type=int, default=0, help="updates a repetition (default: ~0.25 s a repetition)")
    add("--reps", type=int, default=pl.REPS, help="timed repetitions (default 9)")
    add("--tol", type=float, default=None, help="the checks' relative tolerance (1e-3; 3e-2 with --tf32)")
    add("--json", metavar="FILE", help="write rows, checks and versions as JSON")
    args = ap.parse_args()
    impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    bad = [s for s in impls if s not in IMPLS]
    try:
        spec = Spec(tuple(int(v) for v in args.obs.split("x")), args.conv, [int(v) for v in args.hidden.split(",")
                                                                           if v], args.actions)
    except ValueError as e:
        ap.error(str(e))
    if bad or not args.conv or args.batch < 1 or args.buffer < args.batch or args.reps < 1 or args.iters < 0:
        ap.error(f"unknown implementations: {', '.join(bad)}" if bad else
                 "--conv not empty, --batch >= 1, --buffer >= --batch, --reps >= 1, --iters >= 0")
    args.tol = args.tol or (3e-2 if args.tf32 else 1e-3)
    args.threads = (0 if args.device == "cuda" else 1) if args.threads is None else args.threads
    if args.device != "cuda" and args.threads:
        for k in ("AGRL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[k] = str(args.threads)  # before agrl, numpy and torch load
    import numpy as np
    import agrl
    dev = args.device = args.device or ("cuda" if agrl.cuda_device_count() > 0 else "cpu")
    args.only, run = [], Run(args)
    run.versions.update(python=sys.version.split()[0], numpy=np.__version__, agrl=agrl.library_version())
    B, flops = args.batch, 5 * args.batch * spec.flops
    print(f"DQN update: obs {args.obs}, conv {spec.conv}, hidden {spec.hidden}, {spec.n_actions} actions, B = {B}, "
          f"a table of {args.buffer:,} on {dev}; Adam lr {args.lr:g}, betas {BETAS}, eps {ADAM_EPS:g} (agrl's "
          f"defaults, on every side), no clipping, gamma {GAMMA}, Double DQN, Huber (delta 1)")
    print(f"FLOPs: {spec.flops / 1e6:.2f} MFLOP a sample's forward; an update = 5 forwards of B = "
          f"{flops / 1e9:.3f} GFLOP; peak assumed {args.peak_tflops:g} TFLOP/s (--peak-tflops; default: an "
          f"H100/H200 SXM's dense FP32 without tensor cores)")
    print(f"TF32: {'allowed' if args.tf32 else 'off'} on the peers (torch: backends.cuda.matmul.allow_tf32 = "
          f"backends.cudnn.allow_tf32 = {args.tf32}; JAX: lax.Precision.{'DEFAULT' if args.tf32 else 'HIGHEST'} in "
          f"every product{'' if args.tf32 else ', jax_default_matmul_precision highest'}); agrl: FP32, no TF32",
          flush=True)
    ctx = agrl.Context(dev)
    run.versions["agrl_device"] = ctx.device_name
    table = make_table(np, spec, args.buffer, args.seed)
    probe = np.random.default_rng(args.seed + 1).random((2, spec.D), np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        guard = agrl_guard(np, agrl, ctx, spec, args, tmp, probe, table[0])
    chk = Checks(np, run, spec, args, table, guard, probe, table[0])

    def attempt(impl, fn, *a):
        print(f"[{impl}]", flush=True)
        try:
            fn(*a)
        except ImportError as e:
            run.gone(impl, f"not installed: {type(e).__name__}: {e}"[:300])
        except Exception as e:  # memory, an API that changed: reported, never fatal
            run.gone(impl, f"failed: {type(e).__name__}: {e}"[:400])

    if "agrl" in impls and chk.agrl_ok:
        attempt("agrl", bench_agrl, run, np, agrl, ctx, spec, args, table)
    elif "agrl" in impls:
        run.gone("agrl", "failed its check; not timed")
    ctx.free()
    for impl in (i for i in IMPLS[1:] if i in impls):
        attempt(impl, bench_jax if impl == "jax" else bench_torch, run, spec, args, table, chk, impl)
        if dev == "cuda" and "torch" in sys.modules:  # what the row kept, given back before the next one
            sys.modules["torch"].cuda.empty_cache()
    a = run.us("agrl", WORK)
    print(f"\nDQN update on {dev} ({run.versions.get('gpu', run.versions['agrl_device'])}), B = {B}: us per update, "
          f"median of {args.reps}; peer/agrl above 1: agrl faster; TFLOP/s: {flops / 1e9:.3f} GFLOP an update over "
          f"the median; % of the assumed peak {args.peak_tflops:g} TFLOP/s")
    print(f"{'impl':12} {'us/update':>11} {'min':>10} {'max':>10} {'peer/agrl':>10} {'TFLOP/s':>8} {'% peak':>7}")
    for r in run.rows:
        r["tflops"] = flops / (r["us"] * 1e-6) / 1e12
        r["peak_frac"] = r["tflops"] / args.peak_tflops
        ratio = f"{r['us'] / a:9.2f}x" if a else "-"
        print(f"{r['impl']:12} {r['us']:11.1f} {r['min']:10.1f} {r['max']:10.1f} {ratio:>10} {r['tflops']:8.4f} "
              f"{100 * r['peak_frac']:6.2f}%  {r['note']}")
    for x in run.absent:
        print(f"{x['impl']:12} {x['why']}")
    print("\nversions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
    if args.json:
        doc = {**{k: v for k, v in vars(args).items() if k not in ("only", "json")}, "adam": [*BETAS, ADAM_EPS],
               "gamma": GAMMA, "forward_flops_per_sample": spec.flops, "update_flops": flops, "rows": run.rows,
               "absent": run.absent, "checks": run.checks, "versions": run.versions}
        with open(args.json + ".tmp", "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(args.json + ".tmp", args.json)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
