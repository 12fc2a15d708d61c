"""The built-in environments with Gymnasium's signatures.

``make("CartPole-v1")`` (or a short name: "cartpole", "acrobot",
"mountaincar", "pendulum", "mountaincar_continuous") returns an :class:`Env` whose ``reset(seed=None)``
returns ``(obs, info)`` and ``step(action)`` returns ``(obs, reward,
terminated, truncated, info)``, with ``observation_space`` and
``action_space`` like Gymnasium's spaces: :data:`Box` and :data:`Discrete`
(:class:`FallbackBox`, :class:`FallbackDiscrete`) have gymnasium.spaces'
interface: ``low``, ``high``, ``n``, ``shape``, ``dtype``, ``contains``,
``sample`` and ``seed``, drawing what Gymnasium's spaces draw from a seed.
Each observation space has the bounds of Gymnasium's environment of the
same id (CartPole-v1's: +-4.8, inf, +-0.41887903, inf), which every
observation, a terminal one included, lies within.

Seeds: ``reset(seed=s)`` starts a sequence whose k-th episode (k = 0, 1, ...)
starts from agrl's start state of seed ``derive_seed(s, k)``; ``reset()``
without a seed goes on to the next episode of the sequence. Copy i of agrl's
vector environment created with seed S plays the sequence of
``derive_seed(S, i)``, so ``reset(seed=derive_seed(S, 0))`` replays the
episodes of ``agrl train --seed S``. An environment never seeded starts a
sequence from a seed drawn from the operating system.
"""

import math
import operator
import os
import struct

import numpy as np

from . import _agrl


# ---- spaces with gymnasium.spaces' interface ----

def _rng_from_seed(seed=None):
    """A numpy Generator and its seed's entropy, made as Gymnasium's
    seeding.np_random makes them (PCG64 of a SeedSequence), so that the
    same seed samples the same values with or without gymnasium."""
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise ValueError(f"seed must be None or a non-negative Python int, not {seed!r}")
    seq = np.random.SeedSequence(seed)
    return np.random.Generator(np.random.PCG64(seq)), seq.entropy


class _FallbackSpace:
    """What FallbackBox and FallbackDiscrete share with gymnasium.spaces.Space:
    shape, dtype, a lazily seeded np_random, seed(), ``x in space``."""

    def __init__(self, shape, dtype, seed=None):
        self._shape = shape
        self.dtype = np.dtype(dtype)
        self._np_random = None
        if isinstance(seed, np.random.Generator):
            self._np_random = seed
        elif seed is not None:
            self.seed(seed)

    @property
    def shape(self):
        return self._shape

    @property
    def np_random(self):
        if self._np_random is None:
            self.seed()
        return self._np_random

    def seed(self, seed=None):
        """Seeds the space's sampler; returns the seed's entropy."""
        self._np_random, entropy = _rng_from_seed(seed)
        return entropy

    def __contains__(self, x):
        return self.contains(x)


class FallbackDiscrete(_FallbackSpace):
    """The integers start .. start+n-1 (gymnasium.spaces.Discrete's
    interface): ``n`` and ``start`` are
    numpy int64, sample() returns a numpy int64, contains() takes Python
    ints and numpy integer scalars or 0-d arrays."""

    def __init__(self, n, seed=None, start=0):
        if isinstance(n, bool) or not np.issubdtype(type(n), np.integer):
            raise TypeError(f"Discrete: n must be an integer, not {type(n).__name__}")
        if n <= 0:
            raise ValueError(f"Discrete: n = {n} must be positive")
        if isinstance(start, bool) or not np.issubdtype(type(start), np.integer):
            raise TypeError(f"Discrete: start must be an integer, not {type(start).__name__}")
        self.n = np.int64(n)
        self.start = np.int64(start)
        super().__init__((), np.int64, seed)

    def sample(self, mask=None, probability=None):
        """A uniform element; with `mask` (int8, shape (n,), 1 for allowed) a
        uniform allowed one (start if none is), with `probability` (float64,
        shape (n,), summing to 1) one drawn with those probabilities."""
        if mask is not None and probability is not None:
            raise ValueError("Discrete.sample: give mask or probability, not both")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (int(self.n),) or not np.all((mask == 0) | (mask == 1)):
                raise ValueError(f"Discrete.sample: the mask must be {int(self.n)} values of 0 or 1")
            allowed = np.flatnonzero(mask == 1)
            if allowed.size == 0:
                return self.start
            return self.start + np.int64(self.np_random.choice(allowed))
        if probability is not None:
            probability = np.asarray(probability, np.float64)
            if (probability.shape != (int(self.n),) or not np.all((probability >= 0) & (probability <= 1))
                    or not np.isclose(probability.sum(), 1)):
                raise ValueError(f"Discrete.sample: the probabilities must be {int(self.n)} values in [0, 1] "
                                 "summing to 1")
            return self.start + self.np_random.choice(np.arange(self.n, dtype=np.int64), p=probability)
        return self.start + self.np_random.integers(self.n, dtype=np.int64)

    def contains(self, x):
        if isinstance(x, int):
            value = x
        elif isinstance(x, (np.generic, np.ndarray)) and np.issubdtype(x.dtype, np.integer) and x.shape == ():
            if not np.can_cast(x.dtype, self.dtype):
                return False
            value = int(x)
        else:
            return False
        return bool(int(self.start) <= value < int(self.start) + int(self.n))

    def __eq__(self, other):
        return isinstance(other, FallbackDiscrete) and self.n == other.n and self.start == other.start

    def __hash__(self):
        return hash((FallbackDiscrete, int(self.n), int(self.start)))

    def __repr__(self):
        return f"Discrete({self.n})" if self.start == 0 else f"Discrete({self.n}, start={self.start})"


class FallbackBox(_FallbackSpace):
    """A box of floating-point values, each coordinate in [low[i], high[i]]
    (infinite bounds allowed; gymnasium.spaces.Box's interface for floating
    dtypes). ``low`` and ``high`` are
    arrays of the box's dtype and shape; sample() draws each coordinate
    uniformly from a bounded interval, from an exponential distribution
    shifted to the finite bound of a half-bounded one, and from a standard
    normal distribution for an unbounded one."""

    def __init__(self, low, high, shape=None, dtype=np.float32, seed=None):
        if dtype is None:
            raise ValueError("Box: dtype must be given")
        dt = np.dtype(dtype)
        if dt.kind != "f":
            raise ValueError(f"Box: dtype {dt} is not a floating-point type")
        if shape is not None:
            shape = tuple(int(d) for d in shape)
        elif np.ndim(low) > 0 or np.ndim(high) > 0:
            if np.ndim(low) > 0 and np.ndim(high) > 0 and np.shape(low) != np.shape(high):
                raise ValueError(f"Box: low.shape {np.shape(low)} and high.shape {np.shape(high)} differ")
            shape = np.shape(low) if np.ndim(low) > 0 else np.shape(high)
        else:
            shape = (1,)
        lo, hi = np.asarray(low, np.float64), np.asarray(high, np.float64)
        for what, v in (("low", lo), ("high", hi)):
            if v.ndim > 0 and v.shape != shape:
                raise ValueError(f"Box: {what}.shape {v.shape} does not match the shape {shape}")
            if np.any(np.isnan(v)):
                raise ValueError(f"Box: {what} holds NaN")
        self.low = np.broadcast_to(lo, shape).astype(dt)
        self.high = np.broadcast_to(hi, shape).astype(dt)
        if np.any(self.low > self.high):
            raise ValueError(f"Box: low {self.low} is above high {self.high} somewhere")
        self.bounded_below = np.broadcast_to(lo > -np.inf, shape).copy()
        self.bounded_above = np.broadcast_to(hi < np.inf, shape).copy()
        super().__init__(shape, dt, seed)

    def is_bounded(self, manner="both"):
        below, above = bool(np.all(self.bounded_below)), bool(np.all(self.bounded_above))
        if manner == "both":
            return below and above
        if manner == "below":
            return below
        if manner == "above":
            return above
        raise ValueError(f"Box.is_bounded: manner must be 'both', 'below' or 'above', not {manner!r}")

    def sample(self, mask=None, probability=None):
        if mask is not None or probability is not None:
            raise ValueError("Box.sample takes no mask or probability")
        rng = self.np_random
        out = np.empty(self.shape)
        free = ~self.bounded_below & ~self.bounded_above
        above_only = ~self.bounded_below & self.bounded_above
        below_only = self.bounded_below & ~self.bounded_above
        both = self.bounded_below & self.bounded_above
        out[free] = rng.normal(size=int(free.sum()))
        out[below_only] = self.low[below_only] + rng.exponential(size=int(below_only.sum()))
        out[above_only] = self.high[above_only] - rng.exponential(size=int(above_only.sum()))
        out[both] = rng.uniform(self.low[both], self.high[both], size=int(both.sum()))
        return out.astype(self.dtype)

    def contains(self, x):
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x, dtype=self.dtype)
            except (TypeError, ValueError, OverflowError):
                return False
        return bool(np.can_cast(x.dtype, self.dtype) and x.shape == self.shape
                    and np.all(x >= self.low) and np.all(x <= self.high))

    def __eq__(self, other):
        return (isinstance(other, FallbackBox) and self.shape == other.shape and self.dtype == other.dtype
                and np.allclose(self.low, other.low) and np.allclose(self.high, other.high))

    __hash__ = None

    def __repr__(self):
        def short(a):
            return str(a.min()) if a.size and a.min() == a.max() else str(a)
        return f"Box({short(self.low)}, {short(self.high)}, {self.shape}, {self.dtype})"


Box = FallbackBox
Discrete = FallbackDiscrete


# ---- the tasks' observation bounds, Gymnasium's (classic_control) ----

def _symmetric(high):
    high = np.array(high, np.float32)
    return -high, high


_OBSERVATION_BOUNDS = {
    # 2 x_threshold (2.4), 2 theta_threshold_radians (12 degrees): a
    # terminal observation is still inside
    "CartPole-v1": _symmetric([2 * 2.4, np.inf, 2 * (12 * 2 * math.pi / 360), np.inf]),
    # cos, sin of both angles; the velocities' limits 4 pi and 9 pi
    "Acrobot-v1": _symmetric([1.0, 1.0, 1.0, 1.0, 4 * math.pi, 9 * math.pi]),
    # position in [-1.2, 0.6], velocity in [-0.07, 0.07]
    "MountainCar-v0": (np.array([-1.2, -0.07], np.float32), np.array([0.6, 0.07], np.float32)),
    "MountainCarContinuous-v0": (np.array([-1.2, -0.07], np.float32), np.array([0.6, 0.07], np.float32)),
    # cos, sin of the angle; the speed's limit 8
    "Pendulum-v1": _symmetric([1.0, 1.0, 8.0]),
}


def _observation_space(d):
    bounds = _OBSERVATION_BOUNDS.get(d["id"])
    if bounds is None or bounds[0].shape != (d["obs_dim"],):
        return Box(-np.inf, np.inf, (d["obs_dim"],), np.float32)
    return Box(bounds[0].copy(), bounds[1].copy(), dtype=np.float32)


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
        self.observation_space = _observation_space(d)
        if d["n_actions"] > 0:
            self.action_space = Discrete(d["n_actions"])
        else:
            n = d["act_dim"]
            low = np.array(d["act_low"] if d["act_low"] is not None else [-np.inf] * n, np.float32)
            high = np.array(d["act_high"] if d["act_high"] is not None else [np.inf] * n, np.float32)
            self.action_space = Box(low, high, dtype=np.float32)
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

