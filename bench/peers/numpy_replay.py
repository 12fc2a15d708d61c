"""CPU replay-buffer peers: an SB3-style numpy buffer and cpprb (C++).

usage: python3 bench/peers/numpy_replay.py [cpu|cuda]   (runs on the CPU
either way: every row's work name starts with cpu_)

Rows (impl: work):
  numpy_sb3  cpu_sample_gather_mujoco_b256, cpu_add_1_mujoco
  cpprb      the same two (cpprb.ReplayBuffer), and cpu_per_sample_b256_1m,
             cpu_per_update_b256 (cpprb.PrioritizedReplayBuffer, alpha 0.6)

The buffers hold N = 1,000,000 mujoco transitions in separate float32 field
arrays: obs (N, 17), action (N, 6), reward (N,), next_obs (N, 17), done (N,),
filled with random values (never lazily zero pages) before timing.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib as pl  # noqa: E402

N = pl.CAPACITY
B = 256
FIELDS = (("obs", 17), ("action", 6), ("reward", 1), ("next_obs", 17), ("done", 1))
no_sync = lambda _last=None: None  # noqa: E731  (host work: nothing to wait for)


def random_fields(np, rng, n):
    """n random mujoco transitions, one float32 array a field."""
    out = {}
    for name, width in FIELDS:
        shape = (n,) if width == 1 else (n, width)
        out[name] = rng.standard_normal(shape, dtype=np.float32)
    out["done"] = (rng.random(n) < pl.DONE_P).astype(np.float32)
    return out


class SB3Buffer:
    """The storage and the two hot paths of stable-baselines3's ReplayBuffer
    (n_envs = 1, optimize_memory_usage False, no normalisation, no tensors)."""

    def __init__(self, np, n, rng):
        self.np, self.buffer_size, self.pos, self.full = np, n, 0, True
        f = random_fields(np, rng, n)
        self.observations, self.actions, self.rewards = f["obs"], f["action"], f["reward"]
        self.next_observations, self.dones = f["next_obs"], f["done"]

    def add(self, obs, next_obs, action, reward, done):
        """As SB3's add: np.array copy of each input into its field, ring advance."""
        np = self.np
        self.observations[self.pos] = np.array(obs)
        self.next_observations[self.pos] = np.array(next_obs)
        self.actions[self.pos] = np.array(action)
        self.rewards[self.pos] = np.array(reward)
        self.dones[self.pos] = np.array(done)
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True
            self.pos = 0

    def sample(self, batch_size):
        """As SB3's sample: np.random.randint, then fancy indexing of every field."""
        upper = self.buffer_size if self.full else self.pos
        inds = self.np.random.randint(0, upper, size=batch_size)
        return (self.observations[inds], self.actions[inds], self.next_observations[inds],
                self.dones[inds], self.rewards[inds])


def one_transition(np, rng):
    """A single transition as the environment loop hands it over."""
    f = random_fields(np, rng, 1)
    return dict(obs=f["obs"][0], next_obs=f["next_obs"][0], action=f["action"][0],
                reward=f["reward"][0], done=f["done"][0])


def bench_sb3(np, rng):
    buf = SB3Buffer(np, N, rng)
    obs, act, nobs, done, rew = buf.sample(B)
    assert obs.shape == (B, 17) and act.shape == (B, 6) and rew.shape == (B,)
    body = lambda i: buf.sample(B)  # noqa: E731
    pl.row("numpy_sb3", "cpu_sample_gather_mujoco_b256",
           pl.measure(body, pl.auto_iters(body, no_sync), no_sync),
           "np.random.randint + fancy indexing of 5 field arrays (SB3 sample)")

    t = one_transition(np, rng)
    buf.pos = 0
    buf.add(**t)
    assert buf.pos == 1 and np.array_equal(buf.observations[0], t["obs"])
    body = lambda i: buf.add(**t)  # noqa: E731
    pl.row("numpy_sb3", "cpu_add_1_mujoco",
           pl.measure(body, pl.auto_iters(body, no_sync), no_sync),
           "np.array copy into 5 field arrays + ring advance (SB3 add)")


def cpprb_env_dict():
    return {"obs": {"shape": 17}, "act": {"shape": 6}, "rew": {}, "next_obs": {"shape": 17},
            "done": {}}


def fill_cpprb(np, rb, rng):
    """Fills a cpprb buffer to N transitions, in chunks of 100,000."""
    chunk = 100_000
    for _ in range(N // chunk):
        f = random_fields(np, rng, chunk)
        rb.add(obs=f["obs"], act=f["action"], rew=f["reward"], next_obs=f["next_obs"],
               done=f["done"])


def bench_cpprb(np, rng, cpprb):
    """cpprb.ReplayBuffer: sample and add (freed on return)."""
    t = one_transition(np, rng)
    rb = cpprb.ReplayBuffer(N, cpprb_env_dict())
    fill_cpprb(np, rb, rng)
    s = rb.sample(B)
    assert rb.get_stored_size() == N and s["obs"].shape == (B, 17)
    body = lambda i: rb.sample(B)  # noqa: E731
    pl.row("cpprb", "cpu_sample_gather_mujoco_b256",
           pl.measure(body, pl.auto_iters(body, no_sync), no_sync),
           f"cpprb {cpprb_version(cpprb)} ReplayBuffer.sample (5 fields)")
    body = lambda i: rb.add(obs=t["obs"], act=t["action"], rew=t["reward"],  # noqa: E731
                            next_obs=t["next_obs"], done=t["done"])
    pl.row("cpprb", "cpu_add_1_mujoco",
           pl.measure(body, pl.auto_iters(body, no_sync), no_sync),
           "ReplayBuffer.add of one transition (5 fields)")


def bench_cpprb_per(np, rng, cpprb):
    """cpprb.PrioritizedReplayBuffer: sample and priority update."""
    per = cpprb.PrioritizedReplayBuffer(N, cpprb_env_dict(), alpha=0.6)
    fill_cpprb(np, per, rng)
    per.update_priorities(np.arange(N), rng.random(N) + 1e-3)  # not all max priority
    s = per.sample(B, beta=0.4)
    assert s["indexes"].shape == (B,) and np.all(np.isfinite(s["weights"]))
    body = lambda i: per.sample(B, beta=0.4)  # noqa: E731
    pl.row("cpprb", "cpu_per_sample_b256_1m",
           pl.measure(body, pl.auto_iters(body, no_sync), no_sync),
           "PrioritizedReplayBuffer(alpha 0.6).sample(256, beta 0.4): tree + weights + gather")
    sets = [(rng.integers(0, N, B), rng.random(B) + 1e-3) for _ in range(16)]
    body = lambda i: per.update_priorities(*sets[i % 16])  # noqa: E731
    pl.row("cpprb", "cpu_per_update_b256",
           pl.measure(body, pl.auto_iters(body, no_sync), no_sync),
           "PrioritizedReplayBuffer.update_priorities of 256 (sum/min trees)")


def cpprb_version(cpprb):
    try:
        from importlib.metadata import version
        return version("cpprb")
    except Exception:
        return getattr(cpprb, "__version__", "?")


def main():
    try:
        import numpy as np
    except Exception as e:
        pl.absent(["numpy_sb3", "cpprb"], f"numpy does not import: {type(e).__name__}: {e}")
        return
    rng = np.random.default_rng(0)
    np.random.seed(0)  # SB3's sample draws from the global generator
    bench_sb3(np, rng)
    try:
        import cpprb
    except Exception as e:
        pl.absent("cpprb", f"cpprb does not import: {type(e).__name__}: {e}")
        return
    bench_cpprb(np, rng, cpprb)
    bench_cpprb_per(np, rng, cpprb)


if __name__ == "__main__":
    main()
