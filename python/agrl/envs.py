"""The built-in environments as Gymnasium environments.

``make("CartPole-v1")`` (or a short name: "cartpole", "acrobot",
"mountaincar", "pendulum", "mountaincar_continuous") returns an :class:`Env`
for one of CartPole-v1, Acrobot-v1, MountainCar-v0, Pendulum-v1 and
MountainCarContinuous-v0, simulated by the C library; MinAtar's games too
("breakout-minatar" or "MinAtar/Breakout-v1", and the variants
"NAME-nosticky", "NAME-noramp", "NAME-nosticky-noramp"), bit for bit as the
minatar package plays them, with observations of C x 10 x 10 floats 0/1
flattened channel-major (agrl/env.h). ``reset(seed=None,
options=None)`` returns ``(obs, info)`` and ``step(action)`` returns ``(obs,
reward, terminated, truncated, info)``.

Gymnasium. When gymnasium can be imported, :class:`Env` is a
``gymnasium.Env`` and :data:`Box` and :data:`Discrete` are
``gymnasium.spaces.Box`` and ``gymnasium.spaces.Discrete``: the spaces are
Gymnasium's own for the task (bounds, shape and float32 dtype), ``spec`` is a
``gymnasium.envs.registration.EnvSpec`` (id, max_episode_steps,
reward_threshold; ``gymnasium.make(env.spec)`` makes the same environment
again), and ``gymnasium.utils.env_checker.check_env``, Gymnasium's wrappers
and vector environments accept it. Without gymnasium, the module works alone
with small classes of the same interface (:class:`FallbackBox`,
:class:`FallbackDiscrete`, :class:`FallbackEnvSpec` and a plain base class):
the same bounds, ``contains``, ``sample``, ``seed``, ``np_random``.

Observations are float32 arrays of the observation space's shape, inside its
bounds. A discrete action is a Python int or a numpy integer (a scalar or a
0-d array; a whole float or a one-element array is taken too); a continuous
action is an array-like of the action space's shape, clipped to its bounds as
Gymnasium's Pendulum-v1 and MountainCarContinuous-v0 clip it. An action the
environment cannot take raises the C library's error for ``step: action``:
agrl.OutOfRangeError for an index outside 0..n-1, agrl.InvalidArgError for a
discrete action that is not a whole number or a continuous one that is not
finite, agrl.ShapeError for the wrong number of values, TypeError for what is
not a number. Every episode ends by truncation at ``spec.max_episode_steps``
at the latest (the C library's time limit, Gymnasium's TimeLimit), so a
TimeLimit wrapper may shorten episodes but not lengthen them. The
environments do not render: ``metadata["render_modes"]`` is empty,
``render_mode`` is None and ``render()`` returns None.

Seeds: ``reset(seed=s)`` starts a sequence whose k-th episode (k = 0, 1, ...)
starts from agrl's start state of seed ``derive_seed(s, k)`` (drawn from
Gymnasium's start distribution with agrl's own generator, so not the
values Gymnasium draws for the same seed); ``reset()`` without a seed goes
on to the next episode of the sequence. ``options`` may be None or empty:
start states come from the seed alone, and other options raise
agrl.InvalidArgError. Copy i of agrl's
vector environment created with seed S plays the sequence of
``derive_seed(S, i)``, so ``reset(seed=derive_seed(S, 0))`` replays the
episodes of ``agrl train --seed S``. An environment never seeded starts a
sequence from a seed drawn from the operating system. ``reset(seed=s)`` also
seeds ``np_random`` as Gymnasium's ``Env.reset`` does (the C simulation does
not draw from it). :func:`evaluation_start` gives the start of evaluation
episode k; ``get_state()`` / ``set_state()`` save and restore the episode in
progress and the place in the seed sequence, bit for bit.
"""

from __future__ import annotations

import math
import operator
import os
import struct
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Literal, Optional, Self, Sequence, Tuple, Union, cast

import numpy as np
from numpy.typing import DTypeLike, NDArray

from . import _agrl

if TYPE_CHECKING:
    import gymnasium as _gym
    from typing_extensions import Buffer

    from ._loop import EnvLike
else:
    try:
        import gymnasium as _gym
        from gymnasium.envs.registration import EnvSpec as _GymEnvSpec
    except ImportError:
        _gym = None

__all__ = ["Box", "Discrete", "Env", "EnvSpec", "FallbackBox", "FallbackDiscrete", "FallbackEnvSpec",
           "evaluation_start", "make"]


# ---- the spaces without gymnasium ----

def _rng_from_seed(seed: Optional[int] = None) -> Tuple[np.random.Generator, int]:
    """A numpy Generator and its seed's entropy, made as Gymnasium's
    seeding.np_random makes them (PCG64 of a SeedSequence), so that the
    same seed samples the same values with or without gymnasium."""
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise ValueError(f"seed must be None or a non-negative Python int, not {seed!r}")
    seq = np.random.SeedSequence(seed)
    return np.random.Generator(np.random.PCG64(seq)), cast(int, seq.entropy)  # an int for an int or None


class _FallbackSpace:
    """What FallbackBox and FallbackDiscrete share with gymnasium.spaces.Space:
    shape, dtype, a lazily seeded np_random, seed(), ``x in space``."""

    def __init__(self, shape: Tuple[int, ...], dtype: DTypeLike,
                 seed: Union[int, np.random.Generator, None] = None) -> None:
        self._shape = shape
        self.dtype = np.dtype(dtype)
        self._np_random: Optional[np.random.Generator] = None
        if isinstance(seed, np.random.Generator):
            self._np_random = seed
        elif seed is not None:
            self.seed(seed)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def np_random(self) -> np.random.Generator:
        if self._np_random is None:
            self.seed()
        return cast(np.random.Generator, self._np_random)  # seed() set it

    def seed(self, seed: Optional[int] = None) -> int:
        """Seeds the space's sampler; returns the seed's entropy."""
        self._np_random, entropy = _rng_from_seed(seed)
        return entropy

    contains: Callable[[Any], bool]  # FallbackBox's or FallbackDiscrete's

    def __contains__(self, x: Any) -> bool:
        return self.contains(x)


class FallbackDiscrete(_FallbackSpace):
    """The integers start .. start+n-1 (gymnasium.spaces.Discrete's interface,
    used when gymnasium is not installed): ``n`` and ``start`` are
    numpy int64, sample() returns a numpy int64, contains() takes Python
    ints and numpy integer scalars or 0-d arrays."""

    def __init__(self, n: Union[int, np.integer[Any]], seed: Union[int, np.random.Generator, None] = None,
                 start: Union[int, np.integer[Any]] = 0) -> None:
        if isinstance(n, bool) or not np.issubdtype(type(n), np.integer):
            raise TypeError(f"Discrete: n must be an integer, not {type(n).__name__}")
        if n <= 0:
            raise ValueError(f"Discrete: n = {n} must be positive")
        if isinstance(start, bool) or not np.issubdtype(type(start), np.integer):
            raise TypeError(f"Discrete: start must be an integer, not {type(start).__name__}")
        self.n = np.int64(n)
        self.start = np.int64(start)
        super().__init__((), np.int64, seed)

    def sample(self, mask: Optional[NDArray[np.int8]] = None,
               probability: Optional[NDArray[np.float64]] = None) -> np.int64:
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
            return cast(np.int64, self.start + self.np_random.choice(np.arange(self.n, dtype=np.int64), p=probability))
        return cast(np.int64, self.start + self.np_random.integers(self.n, dtype=np.int64))  # a scalar: no size

    def contains(self, x: Any) -> bool:
        if isinstance(x, int):
            value = x
        elif isinstance(x, (np.generic, np.ndarray)) and np.issubdtype(x.dtype, np.integer) and x.shape == ():
            if not np.can_cast(x.dtype, self.dtype):
                return False
            value = int(x)
        else:
            return False
        return bool(int(self.start) <= value < int(self.start) + int(self.n))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FallbackDiscrete) and self.n == other.n and self.start == other.start

    def __hash__(self) -> int:
        return hash((FallbackDiscrete, int(self.n), int(self.start)))

    def __repr__(self) -> str:
        return f"Discrete({self.n})" if self.start == 0 else f"Discrete({self.n}, start={self.start})"


class FallbackBox(_FallbackSpace):
    """A box of floating-point values, each coordinate in [low[i], high[i]]
    (infinite bounds allowed; gymnasium.spaces.Box's interface for floating
    dtypes, used when gymnasium is not installed). ``low`` and ``high`` are
    arrays of the box's dtype and shape; sample() draws each coordinate
    uniformly from a bounded interval, from an exponential distribution
    shifted to the finite bound of a half-bounded one, and from a standard
    normal distribution for an unbounded one."""

    def __init__(self, low: Any, high: Any, shape: Optional[Sequence[int]] = None, dtype: DTypeLike = np.float32,
                 seed: Union[int, np.random.Generator, None] = None) -> None:
        if dtype is None:
            raise ValueError("Box: dtype must be given")
        dt = np.dtype(dtype)
        if dt.kind != "f":
            raise ValueError(f"Box: dtype {dt} is not a floating-point type (gymnasium is needed for others)")
        dims: Tuple[int, ...]
        if shape is not None:
            dims = tuple(int(d) for d in shape)
        elif np.ndim(low) > 0 or np.ndim(high) > 0:
            if np.ndim(low) > 0 and np.ndim(high) > 0 and np.shape(low) != np.shape(high):
                raise ValueError(f"Box: low.shape {np.shape(low)} and high.shape {np.shape(high)} differ")
            dims = np.shape(low) if np.ndim(low) > 0 else np.shape(high)
        else:
            dims = (1,)
        lo, hi = np.asarray(low, np.float64), np.asarray(high, np.float64)
        for what, v in (("low", lo), ("high", hi)):
            if v.ndim > 0 and v.shape != dims:
                raise ValueError(f"Box: {what}.shape {v.shape} does not match the shape {dims}")
            if np.any(np.isnan(v)):
                raise ValueError(f"Box: {what} holds NaN")
        self.low: NDArray[Any] = np.broadcast_to(lo, dims).astype(dt)
        self.high: NDArray[Any] = np.broadcast_to(hi, dims).astype(dt)
        if np.any(self.low > self.high):
            raise ValueError(f"Box: low {self.low} is above high {self.high} somewhere")
        self.bounded_below: NDArray[np.bool_] = np.broadcast_to(lo > -np.inf, dims).copy()
        self.bounded_above: NDArray[np.bool_] = np.broadcast_to(hi < np.inf, dims).copy()
        super().__init__(dims, dt, seed)

    def is_bounded(self, manner: str = "both") -> bool:
        below, above = bool(np.all(self.bounded_below)), bool(np.all(self.bounded_above))
        if manner == "both":
            return below and above
        if manner == "below":
            return below
        if manner == "above":
            return above
        raise ValueError(f"Box.is_bounded: manner must be 'both', 'below' or 'above', not {manner!r}")

    def sample(self, mask: None = None, probability: None = None) -> NDArray[Any]:
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

    def contains(self, x: Any) -> bool:
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x, dtype=self.dtype)
            except (TypeError, ValueError, OverflowError):
                return False
        return bool(np.can_cast(x.dtype, self.dtype) and x.shape == self.shape
                    and np.all(x >= self.low) and np.all(x <= self.high))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FallbackBox) and self.shape == other.shape and self.dtype == other.dtype
                and np.allclose(self.low, other.low) and np.allclose(self.high, other.high))

    __hash__ = None  # type: ignore[assignment]  # unhashable; object's __hash__ is typed as a method

    def __repr__(self) -> str:
        def short(a: NDArray[Any]) -> str:
            return str(a.min()) if a.size and a.min() == a.max() else str(a)
        return f"Box({short(self.low)}, {short(self.high)}, {self.shape}, {self.dtype})"


class FallbackEnvSpec:
    """An environment's spec with gymnasium's EnvSpec's fields (used when
    gymnasium is not installed); make() makes the environment again."""

    def __init__(self, id: str, entry_point: Optional[str] = None, reward_threshold: Optional[float] = None,
                 nondeterministic: bool = False, max_episode_steps: Optional[int] = None, order_enforce: bool = True,
                 disable_env_checker: bool = False, kwargs: Optional[Dict[str, Any]] = None) -> None:
        self.id = id
        self.entry_point = entry_point
        self.reward_threshold = reward_threshold
        self.nondeterministic = nondeterministic
        self.max_episode_steps = max_episode_steps
        self.order_enforce = order_enforce
        self.disable_env_checker = disable_env_checker
        self.kwargs = dict(kwargs or {})

    def make(self, **kwargs: Any) -> Env:
        return Env(**{**self.kwargs, **kwargs})

    def __repr__(self) -> str:
        return (f"EnvSpec(id={self.id!r}, max_episode_steps={self.max_episode_steps}, "
                f"reward_threshold={self.reward_threshold})")


class _FallbackEnvBase:
    """What Env takes from gymnasium.Env when gymnasium is not installed."""

    metadata: Dict[str, Any] = {"render_modes": []}
    render_mode: Optional[str] = None
    spec: Optional[FallbackEnvSpec] = None
    _np_random: Optional[np.random.Generator] = None
    _np_random_seed: Optional[int] = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> None:
        if seed is not None:
            self._np_random, self._np_random_seed = _rng_from_seed(seed)

    @property
    def np_random(self) -> np.random.Generator:
        if self._np_random is None:
            self._np_random, self._np_random_seed = _rng_from_seed()
        return self._np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self._np_random, self._np_random_seed = value, -1

    @property
    def np_random_seed(self) -> int:
        if self._np_random_seed is None:
            self._np_random, self._np_random_seed = _rng_from_seed()
        return self._np_random_seed

    @property
    def unwrapped(self) -> Self:
        return self

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *args: object) -> Literal[False]:
        self.close()
        return False


if TYPE_CHECKING:
    # What a type checker sees: Gymnasium's classes, whose interface the
    # fallbacks above have (at run time without gymnasium, they are the
    # fallbacks).
    from gymnasium.envs.registration import EnvSpec
    from gymnasium.spaces import Box, Discrete

    _EnvBase = _gym.Env[NDArray[np.float32], Any]
elif _gym is not None:
    Box = _gym.spaces.Box
    Discrete = _gym.spaces.Discrete
    EnvSpec = _GymEnvSpec
    _EnvBase = _gym.Env
else:
    Box = FallbackBox
    Discrete = FallbackDiscrete
    EnvSpec = FallbackEnvSpec
    _EnvBase = _FallbackEnvBase


# ---- the tasks' observation bounds, Gymnasium's (classic_control) ----

def _symmetric(high: List[float]) -> Tuple[NDArray[np.float32], NDArray[np.float32]]:
    bound = np.array(high, np.float32)
    return -bound, bound


_OBSERVATION_BOUNDS: Dict[str, Tuple[NDArray[np.float32], NDArray[np.float32]]] = {
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


def _observation_space(d: _agrl._EnvSpec) -> Box[np.float32]:
    if d["id"].startswith("MinAtar/") or "-minatar" in d["id"]:  # cells 0 or 1
        return Box(0.0, 1.0, (d["obs_dim"],), np.float32)
    bounds = _OBSERVATION_BOUNDS.get(d["id"])
    if bounds is None or bounds[0].shape != (d["obs_dim"],):
        return Box(-np.inf, np.inf, (d["obs_dim"],), np.float32)
    return Box(bounds[0].copy(), bounds[1].copy(), dtype=np.float32)


def _action_space(d: _agrl._EnvSpec) -> Union[Discrete[np.int64], Box[np.float32]]:
    if d["n_actions"] > 0:
        return Discrete(d["n_actions"])
    n = d["act_dim"]
    low = np.array(d["act_low"] if d["act_low"] is not None else [-np.inf] * n, np.float32)
    high = np.array(d["act_high"] if d["act_high"] is not None else [np.inf] * n, np.float32)
    return Box(low, high, dtype=np.float32)


def _env_spec(d: _agrl._EnvSpec) -> EnvSpec:
    t = d["reward_threshold"]
    return EnvSpec(id=d["id"], entry_point="agrl.envs:Env", reward_threshold=None if t != t else float(t),
                   nondeterministic=False, max_episode_steps=d["max_episode_steps"] or None,
                   kwargs={"name": d["id"]})


class Env(_EnvBase):
    """A built-in environment: a gymnasium.Env when gymnasium is installed
    (see the module's documentation for spaces, actions and seeds)."""

    metadata: Dict[str, Any] = {"render_modes": []}
    render_mode: Optional[str] = None
    spec: EnvSpec
    observation_space: Box[np.float32]
    # Discrete for DQN's tasks, Box for SAC's and TD3's
    action_space: Union[Discrete[np.int64], Box[np.float32]]

    def __init__(self, name: str, render_mode: Optional[str] = None) -> None:
        if render_mode is not None:
            raise _agrl.UnsupportedError(f"Env: render_mode {render_mode!r}: agrl's environments do not render "
                                         "(metadata['render_modes'] is empty)")
        self._env = _agrl._Env(name)
        d = self._env.spec()
        self.spec = _env_spec(d)
        self.observation_space = _observation_space(d)
        self.action_space = _action_space(d)
        # the flat observation as an image (C, H, W), channels first; None for a vector
        self.image_shape: Optional[Tuple[int, int, int]] = d["obs_shape"]
        self._base: Optional[int] = None
        self._episode = 0

    def reset(self, *, seed: Optional[int] = None,
              options: Optional[Dict[str, Any]] = None) -> Tuple[NDArray[np.float32], Dict[str, Any]]:
        if seed is not None:
            try:  # Python's and numpy's ints, not bools
                s = operator.index(seed) if not isinstance(seed, (bool, np.bool_)) else -1
            except TypeError:
                s = -1
            if s < 0 or s >= 1 << 64:
                raise _agrl.InvalidArgError(f"reset: seed must be an int in 0 .. 2^64-1, not {seed!r}")
        if options:
            raise _agrl.InvalidArgError(f"reset: options {options!r}: agrl's start states come from the seed "
                                        "alone, no option is taken")
        if seed is not None:
            super().reset(seed=s)
            self._base, self._episode = s, 0
        elif self._base is None:
            self._base, self._episode = int.from_bytes(os.urandom(8), "little"), 0
        else:
            self._episode += 1
        obs = self._env.reset(_agrl.derive_seed(self._base, self._episode))
        return obs, {}

    def step(self, action: Any) -> Tuple[NDArray[np.float32], float, bool, bool, Dict[str, Any]]:
        obs, reward, terminated, truncated = self._env.step(action)
        return obs, reward, terminated, truncated, {}

    def render(self) -> None:
        """None: agrl's environments do not render (render_mode is None)."""
        return None

    def get_state(self) -> bytes:
        """The environment's exact state as bytes: the episode in progress
        (agrl's C state of the task) and where its seed sequence stands.
        set_state(get_state()) on a new Env of the same task continues the
        same episodes for the same actions, bit for bit."""
        head = struct.pack("<8sBQQ", b"AGPYENV1", self._base is not None, self._base or 0, self._episode)
        return head + self._env.get_state()

    def set_state(self, state: Buffer) -> None:
        """Puts the environment in a state get_state() gave; a state of
        another task, or a damaged one, raises and changes nothing."""
        raw = bytes(state)
        n = struct.calcsize("<8sBQQ")
        if len(raw) < n or raw[:8] != b"AGPYENV1":
            raise _agrl.InvalidArgError("set_state: not a state of agrl.Env.get_state")
        _, has_base, base, episode = struct.unpack("<8sBQQ", raw[:n])
        if has_base > 1:
            raise _agrl.InvalidArgError("set_state: a damaged state")
        self._env.set_state(raw[n:])
        self._base, self._episode = (base if has_base else None), episode

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<agrl.Env {self.spec.id}>"


def evaluation_start(env: EnvLike, seed: int, k: int) -> Any:
    """The first observation of evaluation episode k of `seed`: for agrl's
    own environments the start of seed derive_seed(seed, k) that the C
    library's evaluations (ag_q_evaluate, ag_policy_evaluate: `agrl eval
    --seed SEED`) play, for any other env.reset(seed=derive_seed(seed, k))."""
    s = _agrl.derive_seed(seed, k)
    if isinstance(env, Env):
        return env._env.reset(s)
    obs, _ = env.reset(seed=s)
    return obs


def make(name: str) -> Env:
    """The built-in environment `name` ("CartPole-v1", "cartpole", ...)."""
    if not isinstance(name, str):
        raise TypeError(f"make: name must be a string, not {type(name).__name__}")
    return Env(name)
