"""The built-in environments with Gymnasium's signatures.

``make("CartPole-v1")`` (or a short name: "cartpole", "acrobot",
"mountaincar", "pendulum", "mountaincar_continuous") returns an :class:`Env` whose ``reset(seed=None)``
returns ``(obs, info)`` and ``step(action)`` returns ``(obs, reward,
terminated, truncated, info)``, with ``observation_space`` and
``action_space`` like Gymnasium's spaces.

Seeds: ``reset(seed=s)`` starts a sequence whose k-th episode (k = 0, 1, ...)
starts from agrl's start state of seed ``derive_seed(s, k)``; ``reset()``
without a seed goes on to the next episode of the sequence. Copy i of agrl's
vector environment created with seed S plays the sequence of
``derive_seed(S, i)``, so ``reset(seed=derive_seed(S, 0))`` replays the
episodes of ``agrl train --seed S``. An environment never seeded starts a
sequence from a seed drawn from the operating system.
"""

import operator
import os
import struct

import numpy as np

from . import _agrl


class Discrete:
    """The actions 0 .. n-1 (like gymnasium.spaces.Discrete)."""

    def __init__(self, n, seed=None):
        self.n = int(n)
        self.shape = ()
        self.dtype = np.dtype(np.int64)
        self._rng = np.random.default_rng(seed)

    def sample(self):
        return int(self._rng.integers(self.n))

    def seed(self, seed=None):
        self._rng = np.random.default_rng(seed)

    def contains(self, x):
        try:
            v = int(x)
        except (TypeError, ValueError):
            return False
        return v == x and 0 <= v < self.n

    def __repr__(self):
        return f"Discrete({self.n})"


class Box:
    """A box of float32 values (like gymnasium.spaces.Box)."""

    def __init__(self, low, high, shape, dtype=np.float32, seed=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.low = np.broadcast_to(np.asarray(low, dtype=self.dtype), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=self.dtype), self.shape).copy()
        self._rng = np.random.default_rng(seed)

    def sample(self):
        lo = np.where(np.isfinite(self.low), self.low, -1.0)
        hi = np.where(np.isfinite(self.high), self.high, 1.0)
        return self._rng.uniform(lo, hi).astype(self.dtype)

    def seed(self, seed=None):
        self._rng = np.random.default_rng(seed)

    def contains(self, x):
        x = np.asarray(x)
        return x.shape == self.shape and bool(np.all(x >= self.low) and np.all(x <= self.high))

    def __repr__(self):
        return f"Box({self.low.min()}, {self.high.max()}, {self.shape}, {self.dtype})"


class EnvSpec:
    def __init__(self, d):
        self.id = d["id"]
        self.max_episode_steps = d["max_episode_steps"] or None
        t = d["reward_threshold"]
        self.reward_threshold = None if t != t else t

    def __repr__(self):
        return f"EnvSpec(id={self.id!r}, max_episode_steps={self.max_episode_steps})"


class Env:
    """A built-in environment (see the module's documentation for seeds)."""

    metadata = {"render_modes": []}
    render_mode = None

    def __init__(self, name):
        self._env = _agrl._Env(name)
        d = self._env.spec()
        self.spec = EnvSpec(d)
        self.observation_space = Box(-np.inf, np.inf, (d["obs_dim"],))
        if d["n_actions"] > 0:
            self.action_space = Discrete(d["n_actions"])
        else:
            low = d["act_low"] if d["act_low"] is not None else [-np.inf] * d["act_dim"]
            high = d["act_high"] if d["act_high"] is not None else [np.inf] * d["act_dim"]
            self.action_space = Box(low, high, (d["act_dim"],))
        self._base = None
        self._episode = 0

    @property
    def unwrapped(self):
        return self

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            try:  # Python's and numpy's ints, not bools
                s = operator.index(seed) if not isinstance(seed, (bool, np.bool_)) else -1
            except TypeError:
                s = -1
            if s < 0 or s >= 1 << 64:
                raise _agrl.InvalidArgError(f"reset: seed must be an int in 0 .. 2^64-1, not {seed!r}")
            self._base, self._episode = s, 0
        elif self._base is None:
            self._base, self._episode = int.from_bytes(os.urandom(8), "little"), 0
        else:
            self._episode += 1
        obs = self._env.reset(_agrl.derive_seed(self._base, self._episode))
        return obs, {}

    def step(self, action):
        obs, reward, terminated, truncated = self._env.step(action)
        return obs, reward, terminated, truncated, {}

    def get_state(self):
        """The environment's exact state as bytes: the episode in progress
        (agrl's C state of the task) and where its seed sequence stands.
        set_state(get_state()) on a new Env of the same task continues the
        same episodes for the same actions, bit for bit."""
        head = struct.pack("<8sBQQ", b"AGPYENV1", self._base is not None, self._base or 0, self._episode)
        return head + self._env.get_state()

    def set_state(self, state):
        """Puts the environment in a state get_state() gave; a state of
        another task, or a damaged one, raises and changes nothing."""
        state = bytes(state)
        n = struct.calcsize("<8sBQQ")
        if len(state) < n or state[:8] != b"AGPYENV1":
            raise _agrl.InvalidArgError("set_state: not a state of agrl.Env.get_state")
        _, has_base, base, episode = struct.unpack("<8sBQQ", state[:n])
        if has_base > 1:
            raise _agrl.InvalidArgError("set_state: a damaged state")
        self._env.set_state(state[n:])
        self._base, self._episode = (base if has_base else None), episode

    def close(self):
        pass

    def __repr__(self):
        return f"<agrl.Env {self.spec.id}>"


def evaluation_start(env, seed, k):
    """The first observation of evaluation episode k of `seed`: for agrl's
    own environments the start of seed derive_seed(seed, k) that the C
    library's evaluations (ag_q_evaluate, ag_policy_evaluate: `agrl eval
    --seed SEED`) play, for any other env.reset(seed=derive_seed(seed, k))."""
    s = _agrl.derive_seed(seed, k)
    if isinstance(env, Env):
        return env._env.reset(s)
    obs, _ = env.reset(seed=s)
    return obs


def make(name):
    """The built-in environment `name` ("CartPole-v1", "cartpole", ...)."""
    if not isinstance(name, str):
        raise TypeError(f"make: name must be a string, not {type(name).__name__}")
    return Env(name)

