"""agrl.sb3: a replay buffer for Stable-Baselines3 kept in agrl's tables.

Imported only by those who have torch and stable_baselines3 (``import
agrl`` never imports it).

:class:`ReplayBuffer` is a drop-in for
``stable_baselines3.common.buffers.ReplayBuffer``: pass it to SB3's off-policy
algorithms (DQN, SAC, TD3, ...) as ``replay_buffer_class=agrl.sb3.ReplayBuffer``.
It has SB3's constructor and methods and follows SB3's semantics (``n_envs``,
``optimize_memory_usage``, ``handle_timeout_termination``, ``pos``, ``full``,
``size()``, ``reset()``, pickling by ``save_replay_buffer`` /
``load_replay_buffer``), but the transitions live on the device SB3 trains
on (``"cuda:N"`` or the CPU), in agrl tables:

- one f32 table holds observations, next observations, actions, rewards and
  done flags when the observations are floating point;
- image observations (uint8, bool) stay one byte a value in a table of u8
  storage, other integer observations in one of i32 storage, beside an f32
  table of the rest; a sample draws the indices once, in the f32 table, and
  gathers the observation table at the same indices.

Each environment's transition of a step is a column: step ``pos`` of
environment ``e`` is column ``pos * n_envs + e``, so a uniform draw over the
valid columns is SB3's draw (a uniform step, then a uniform environment).
On CUDA, ``add`` copies a step into host arrays and sends 64 steps at a time
(``stage_steps``), or fewer when something reads the tables first.

``sample`` returns SB3's ``ReplayBufferSamples`` of tensors on the device in
the dtypes SB3 returns: observations in the observation space's dtype,
actions in the action space's (float64 cast to float32, as SB3 does),
rewards and dones float32 ``(B, 1)``. Each call returns new tensors (a
caller may keep a batch); ``reuse_batches=True`` writes every batch of one
size into the same tensors instead (faster; an earlier batch is then
overwritten by the next ``sample``). With ``env`` (SB3 passes its
VecNormalize), a plain VecNormalize's arithmetic runs on the device in
float64, giving SB3's values bit for bit; a VecNormalize whose
normalization is overridden is called on host copies, as SB3 calls it.

Stacked image observations (``frame_stack=k``, with
``optimize_memory_usage=True``): the observations VecFrameStack(n_stack=k)
gives, a uint8 Box ``[H, W, k*C]`` or ``[k*C, H, W]`` (after
VecTransposeImage), are kept one frame a step in an agrl frame table
(:class:`agrl.torch.FrameReplayBuffer`): each ``add`` stores the newest
``C`` channels of each environment's observation, and a sample rebuilds
both stacks on the device, the slots before an episode's first frame set
to zero as VecFrameStack pads them. That is SB3's optimized semantics
(the next observation of step ``i`` is the observation added at step
``i + 1``, the reset observation after a done) in about ``1/k`` of the
memory. ``add`` checks each observation against the frames stored before
it and refuses one that is not their stack (an observation that
VecFrameStack did not make). Two differences of the draw: the newest step
is drawn only once the next one is added (SB3 draws it with the next
observation ``add`` gave), and frames are kept for ``buffer_size + k - 2``
steps so that every step SB3 may draw has its stack. Pickling goes
through the frame table's file; the arrays ``observations``,
``actions``, ... are not read back in this mode.

Not provided: a prioritized variant. SB3's algorithms neither read
importance weights nor call ``update_priorities``, so priorities would
stay equal and the draw uniform.

Differences from SB3's buffer, all of storage:

- float64 observations are stored as float32 (agrl has no float64 storage):
  a sample returns them as float64 tensors of float32-rounded values;
- the arrays ``observations``, ``actions``, ... are read-only host copies
  read back from the device (slow; for inspection); ``dones[i] = v`` (which
  SB3's ``_setup_learn`` does with ``optimize_memory_usage``) is honoured;
- the random stream is agrl's, seeded from numpy's global generator at
  construction (or ``seed=``), so batches differ from SB3's for one seed;
- discrete actions are kept exactly in the f32 table up to 2^24, integer
  observations in i32 storage: a value past that is refused by ``add`` (or
  by the ``flush`` that sends it), where SB3's arrays would hold it;
- ``_get_samples`` refuses rows that hold no transition (SB3 reads whatever
  its arrays hold there).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.utils.dlpack
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.buffers import ReplayBuffer as _SB3ReplayBuffer
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

from . import _agrl
from .torch import ReplayBuffer as _Table

__all__ = ["ReplayBuffer"]

_NP_TO_AGRL = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.uint8): "u8",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
}
_AGRL_TO_NP = {"f32": np.float32, "f16": np.float16, "u8": np.uint8, "i32": np.int32, "i64": np.int64}
_META_FIELDS = ("reward", "done", "done_raw", "timeout")
_CHUNK = 1 << 16  # columns a read-back or a rebuild moves at a time
_STATE_VERSION = 1


def _field_dtype(dtype: np.dtype[Any]) -> str:
    """The agrl dtype a value of `dtype` is stored and sampled in (SB3's dtype
    is restored after the sample when they differ)."""
    if dtype in _NP_TO_AGRL:
        return _NP_TO_AGRL[dtype]
    if dtype == np.bool_:
        return "u8"
    if dtype.kind == "f":
        return "f32"
    if dtype.kind in "iu":
        return "i32" if dtype.itemsize < 4 or (dtype.kind == "i" and dtype.itemsize == 4) else "i64"
    raise NotImplementedError(f"agrl.sb3.ReplayBuffer: dtype {dtype} is not supported")


def _torch_dtype(dtype: np.dtype[Any]) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


def _ctx_device(device: torch.device) -> str:
    """agrl's name of a torch device."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index}"
    if device.type == "cpu":
        return "cpu"
    raise NotImplementedError(f"agrl.sb3.ReplayBuffer: device {device} is not supported (cpu or cuda)")


def _to_torch(t: Any) -> torch.Tensor:
    return t if isinstance(t, torch.Tensor) else torch.utils.dlpack.from_dlpack(t)


# numpy's dtype for float32 rewards divided by a float64 scalar (float64 under
# NumPy 2's promotion, float32 under NumPy 1's value-based casting)
_REWARD_DIV = _torch_dtype((np.ones(1, np.float32) / np.sqrt(np.ones((), np.float64) + 1e-8)).dtype)


def _normalizes_on_device(env: Any) -> bool:
    """Whether `env` normalizes with VecNormalize's own arithmetic over float64
    statistics (then the device reproduces it bit for bit)."""
    cls = type(env)
    if not (
        isinstance(env, VecNormalize)
        and cls.normalize_obs is VecNormalize.normalize_obs
        and cls.normalize_reward is VecNormalize.normalize_reward
        and cls._normalize_obs is VecNormalize._normalize_obs
    ):
        return False
    if env.norm_obs:
        rms = env.obs_rms
        if not isinstance(rms, RunningMeanStd) or rms.mean.dtype != np.float64 or rms.var.dtype != np.float64:
            return False
    if env.norm_reward:
        if np.asarray(env.ret_rms.var).dtype != np.float64:
            return False
    return True


def _frame_layout(space: spaces.Space[Any], k: Optional[int], optimize: bool) -> Optional[int]:
    """frame_stack's k, checked against the observation space: a uint8 Box
    of stacked images, channels last [H, W, k*C] or first [k*C, H, W] (the
    smallest dimension first, as SB3 decides), with optimize_memory_usage."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= 64:
        raise ValueError(f"agrl.sb3.ReplayBuffer: frame_stack = {k!r} must be an int in 1 .. 64")
    if not optimize:
        raise ValueError(
            "agrl.sb3.ReplayBuffer: frame_stack needs optimize_memory_usage=True: without it SB3 keeps each "
            "transition's own next observation (the terminal one at an episode's end), which is not the next "
            "step's frame")
    if not isinstance(space, spaces.Box) or space.dtype != np.uint8 or len(space.shape) != 3:
        raise ValueError(f"agrl.sb3.ReplayBuffer: frame_stack needs a uint8 Box of 3 dimensions, not {space}")
    shape = tuple(space.shape)
    stacked = shape[0] if int(np.argmin(shape)) == 0 else shape[2]
    if stacked % k:
        raise ValueError(f"agrl.sb3.ReplayBuffer: frame_stack = {k}: the observation's {stacked} channels are not "
                         f"{k} stacked frames")
    return int(k)


class _Dones:
    """``buffer.dones``: reads return a host copy of SB3's ``dones`` array
    (n_steps, n_envs); ``dones[key] = value`` sets the done flag of those
    stored transitions, as SB3's array assignment does (kept beside the
    table until the transition is overwritten, applied to samples)."""

    def __init__(self, buf: "ReplayBuffer") -> None:
        self._buf = buf

    @property
    def shape(self) -> Tuple[int, int]:
        return (self._buf.buffer_size, self._buf.n_envs)

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.dtype(np.float32)

    def __len__(self) -> int:
        return self._buf.buffer_size

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        a = self._buf._read_back()["dones"]
        return a if dtype is None else a.astype(dtype)

    def __getitem__(self, key: Any) -> Any:
        return self._buf._read_back()["dones"][key]

    def __setitem__(self, key: Any, value: Any) -> None:
        buf = self._buf
        flat = np.arange(buf.buffer_size * buf.n_envs, dtype=np.int64).reshape(buf.buffer_size, buf.n_envs)[key]
        vals = np.broadcast_to(np.asarray(value, dtype=np.float32), np.shape(flat))
        for p, v in zip(np.ravel(flat).tolist(), np.ravel(vals).tolist()):
            buf._forced[int(p)] = float(v)

    def __repr__(self) -> str:
        return repr(np.asarray(self))


class ReplayBuffer(_SB3ReplayBuffer):
    """SB3's ``ReplayBuffer`` over agrl tables on SB3's device (see the
    module's documentation).

    :param buffer_size: transitions kept (``buffer_size // n_envs`` steps).
    :param observation_space: a Box, Discrete, MultiDiscrete or MultiBinary.
    :param action_space: a Box, Discrete, MultiDiscrete or MultiBinary.
    :param device: a torch device (cuda or cpu); "auto" is cuda when present.
    :param n_envs: environments whose transitions each ``add`` brings.
    :param optimize_memory_usage: each observation stored once: the next
        observation of step ``i`` is read at step ``i + 1`` (the step at
        ``pos`` is never sampled), as SB3 does.
    :param handle_timeout_termination: a transition whose info has
        ``"TimeLimit.truncated"`` set samples with done = 0.
    :param seed: seed of the sampling stream; by default one drawn from
        numpy's global generator (which SB3's ``set_random_seed`` seeds).
    :param reuse_batches: return every batch of one size in the same
        tensors (overwritten by the next sample) instead of new ones.
    :param frame_stack: ``k`` of VecFrameStack(n_stack=k) when the
        observations are its stacks of uint8 images: each step's newest
        frame is stored once (an agrl frame table; needs
        ``optimize_memory_usage=True``). None: the observations are stored
        whole.
    :param stage_steps: steps that ``add`` keeps in host arrays before it
        sends them to the device in one call (sooner when something reads
        the tables: ``sample``, ``flush()``, ...); 0 sends each step at once.
        By default 64 on CUDA (one upload for many small adds) and 0 on the
        CPU.

    Beside SB3's attributes: ``table`` (the f32 :class:`agrl.torch.ReplayBuffer`
    that is sampled: actions, rewards, flags and, when it holds them, the
    observations), ``obs_table`` (the observations' table, or None),
    ``last_indices`` (the columns of ``table`` the last ``sample`` drew) and
    :meth:`positions` (SB3's step row and environment of columns).
    """

    _table: _Table
    _obs_table: Optional[_Table]
    last_indices: Optional[torch.Tensor]

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        device: Union[torch.device, str] = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        *,
        seed: Optional[int] = None,
        reuse_batches: bool = False,
        stage_steps: Optional[int] = None,
        frame_stack: Optional[int] = None,
    ) -> None:
        if isinstance(observation_space, spaces.Dict):
            raise NotImplementedError("agrl.sb3.ReplayBuffer: Dict observation spaces are not supported")
        BaseBuffer.__init__(self, buffer_size, observation_space, action_space, device, n_envs=n_envs)
        self.buffer_size = max(buffer_size // n_envs, 1)
        if optimize_memory_usage and handle_timeout_termination:
            raise ValueError(
                "ReplayBuffer does not support optimize_memory_usage = True "
                "and handle_timeout_termination = True simultaneously."
            )
        self.optimize_memory_usage = optimize_memory_usage
        self.handle_timeout_termination = handle_timeout_termination
        self.seed = int(np.random.randint(0, 2**31 - 1)) if seed is None else int(seed)
        self.reuse_batches = bool(reuse_batches)
        if stage_steps is not None and stage_steps < 0:
            raise ValueError(f"stage_steps = {stage_steps} (give 0 or more)")
        self.stage_steps = stage_steps
        self.frame_stack = _frame_layout(observation_space, frame_stack, optimize_memory_usage)
        obs_dtype = np.dtype(observation_space.dtype)
        act_dtype = np.dtype(self._maybe_cast_dtype(action_space.dtype))
        self._obs_np = obs_dtype  # SB3's dtypes
        self._act_np = act_dtype
        self._steps = 0  # add calls since the last reset
        self._forced: Dict[int, float] = {}  # SB3 position row * n_envs + env -> done set through `dones`
        self._setup()

    # ---- construction ----

    def _setup(self) -> None:
        """Derives the layout from the configuration and makes empty tables on
        self.device (also after unpickling and on a change of device)."""
        if self.frame_stack is not None:
            self._setup_frames()
            return
        n, bs = self.n_envs, self.buffer_size
        shape = tuple(self.obs_shape)
        self._obs_field = _field_dtype(self._obs_np)
        self._act_field = _field_dtype(self._act_np)
        self._obs_torch = _torch_dtype(self._obs_np)
        self._act_torch = _torch_dtype(self._act_np)
        # SB3's dtype when the stored one differs (float64, int8, bool, ...)
        stored_obs = _torch_dtype(np.dtype(_AGRL_TO_NP[self._obs_field]))
        stored_act = _torch_dtype(np.dtype(_AGRL_TO_NP[self._act_field]))
        self._obs_cast = self._obs_torch if stored_obs != self._obs_torch else None
        self._act_cast = self._act_torch if stored_act != self._act_torch else None
        self._obs_batch = (n, *shape)
        self._act_batch = (n, self.action_dim)
        self._zeros_n = np.zeros(n, dtype=np.float32)
        if self._obs_field in ("u8",):
            obs_storage = "u8"
        elif self._obs_field in ("i32", "i64"):
            obs_storage = "i32"
        else:
            obs_storage = "f32"
        self._single = obs_storage == "f32" and not self.optimize_memory_usage
        dev = self._device
        self._ctx = _agrl.Context(_ctx_device(dev))
        # the optimized layout keeps the valid steps only (the last bs - 1)
        self._meta_rows = max(bs - 1, 1) if self.optimize_memory_usage else bs
        obs_fields: Dict[str, Any] = {"obs": (shape, self._obs_field)}
        if not self.optimize_memory_usage:
            obs_fields["next_obs"] = (shape, self._obs_field)
        meta_fields: Dict[str, Any] = {"action": ((self.action_dim,), self._act_field)}
        for name in _META_FIELDS:
            meta_fields[name] = ((1,), "f32")
        if self._single:
            self._table = _Table(self._ctx, bs * n, {**obs_fields, **meta_fields}, storage="f32", seed=self.seed)
            self._obs_table = None
        else:
            self._table = _Table(self._ctx, self._meta_rows * n, meta_fields, storage="f32", seed=self.seed)
            self._obs_table = _Table(self._ctx, bs * n, obs_fields, storage=obs_storage, seed=self.seed)
        # steps added but not sent yet: host arrays of each table's fields
        k = self.stage_steps if self.stage_steps is not None else (64 if dev.type == "cuda" else 0)
        self._stage_cap = min(k, self._meta_rows, bs)
        self._staged = 0
        self._stage_obs: Dict[str, np.ndarray[Any, Any]] = {}
        self._stage_meta: Dict[str, np.ndarray[Any, Any]] = {}
        if self._stage_cap:
            rows = self._stage_cap * n
            for name, (fshape, fdtype) in obs_fields.items():
                self._stage_obs[name] = np.zeros((rows, *fshape), dtype=_AGRL_TO_NP[fdtype])
            for name, (fshape, fdtype) in meta_fields.items():
                self._stage_meta[name] = np.zeros((rows, *fshape), dtype=_AGRL_TO_NP[fdtype])
        # each step's views of them, in add()'s order
        self._slots: List[Tuple[Any, ...]] = []
        for k in range(self._stage_cap):
            i, j = k * n, k * n + n
            so, sm = self._stage_obs, self._stage_meta
            self._slots.append((
                so["obs"][i:j], so["next_obs"][i:j] if "next_obs" in so else None, sm["action"][i:j],
                *(sm[name][i:j, 0] for name in _META_FIELDS),
            ))
        # optimize_memory_usage: the next observation of the last step, on the
        # host, sent to the device by the first sample after it changed
        self._pending_host = np.zeros(self._obs_batch, dtype=_AGRL_TO_NP[self._obs_field])
        self._pending_dev: Optional[torch.Tensor] = None
        self._pending_dirty = True
        self._outs: Dict[int, Tuple[Dict[str, torch.Tensor], Optional[Dict[str, torch.Tensor]]]] = {}
        self.last_indices = None
        if self.optimize_memory_usage:
            self._draw: Callable[[int], Tuple[Any, ...]] = self._draw_optimized
        elif self._single:
            self._draw = self._draw_single
        else:
            self._draw = self._draw_two

    def _free(self) -> None:
        self._staged = 0
        for t in (self.__dict__.get("_table"), self.__dict__.get("_obs_table"), self.__dict__.get("_fr")):
            if t is not None:
                t.free()
        self._outs = {}
        self._pending_dev = None
        self.last_indices = None

    # SB3 sets `device` (BaseBuffer.__init__, load_replay_buffer): the tables
    # move with it
    @property
    def device(self) -> torch.device:
        return self._device

    @device.setter
    def device(self, value: Union[torch.device, str]) -> None:
        dev = torch.device(value)
        if "_table" not in self.__dict__:  # during construction
            self._device = dev
            return
        if _ctx_device(dev) == _ctx_device(self._device):
            self._device = dev
            return
        dump = self._dump()
        self._free()
        self._device = dev
        self._setup()
        self._restore(dump)

    # ---- add ----

    def add(
        self,
        obs: np.ndarray[Any, Any],
        next_obs: np.ndarray[Any, Any],
        action: np.ndarray[Any, Any],
        reward: np.ndarray[Any, Any],
        done: np.ndarray[Any, Any],
        infos: Sequence[Dict[str, Any]],
    ) -> None:
        """One step of the n_envs environments (SB3's ``add``): the arrays'
        first dimension is n_envs; ``infos[i]["TimeLimit.truncated"]`` marks a
        timeout when handle_timeout_termination is on."""
        if self.frame_stack is not None:
            self._add_frames(obs, action, reward, done)
            self._advance()
            return
        obs = np.asarray(obs).reshape(self._obs_batch)
        action = np.asarray(action).reshape(self._act_batch)
        # done flags go in as they come (bool arrays, converted by the table)
        eff = done
        to: Any = self._zeros_n
        if self.handle_timeout_termination:
            truncated = [info.get("TimeLimit.truncated", False) for info in infos]
            if any(truncated):
                to = np.array(truncated, dtype=np.float32)
                eff = np.asarray(done, dtype=np.float32) * (1.0 - to)
        next_obs = np.asarray(next_obs).reshape(self._obs_batch)
        if self._stage_cap:
            vo, vn, va, vr, vd, vdr, vt = self._slots[self._staged]
            vo[...] = obs
            if vn is not None:
                vn[...] = next_obs
            va[...] = action
            vr[...] = reward
            vd[...] = eff
            vdr[...] = done
            vt[...] = to
            self._staged += 1
        elif self._single:
            self._table.add(obs=obs, next_obs=next_obs, action=action, reward=reward, done=eff, done_raw=done,
                            timeout=to)
        else:
            self._store({"obs": obs, "next_obs": next_obs},
                        {"action": action, "reward": reward, "done": eff, "done_raw": done, "timeout": to})
        if self.optimize_memory_usage:
            np.copyto(self._pending_host, next_obs, casting="unsafe")
            self._pending_dirty = True
        self._advance()
        if self._staged == self._stage_cap and self._staged:
            self.flush()

    def _advance(self) -> None:
        """One step added: SB3's position moves on (a forced done of the row
        it overwrites is dropped)."""
        self._steps += 1
        if self._forced:
            base = self.pos * self.n_envs
            for e in range(self.n_envs):
                self._forced.pop(base + e, None)
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True
            self.pos = 0

    def _store(self, obs: Dict[str, Any], meta: Dict[str, Any]) -> None:
        """Sends steps to the tables: the observations' fields and the rest."""
        if self._single:
            self._table.add(**obs, **meta)
            return
        assert self._obs_table is not None
        # the observations first: a failure there leaves both tables as they were
        if self.optimize_memory_usage:
            self._obs_table.add(obs=obs["obs"])
        else:
            self._obs_table.add(obs=obs["obs"], next_obs=obs["next_obs"])
        try:
            if self.buffer_size > 1 or not self.optimize_memory_usage:
                self._table.add(**meta)
        except BaseException:
            self._draw = self._draw_broken
            raise

    def flush(self) -> None:
        """Sends the steps ``add`` has kept on the host to the device (see
        ``stage_steps``); every method that reads the tables calls it."""
        k = self._staged * self.n_envs
        if not k:
            return
        self._staged = 0
        try:
            self._store({name: a[:k] for name, a in self._stage_obs.items()},
                        {name: a[:k] for name, a in self._stage_meta.items()})
        except BaseException:
            self._draw = self._draw_broken  # pos and full counted steps the tables lack
            raise

    @property
    def table(self) -> _Table:
        """The f32 table that is sampled (steps kept on the host sent first;
        with frame_stack, see frame_table instead)."""
        if self.frame_stack is not None:
            raise AttributeError("table: with frame_stack the steps are in frame_table")
        self.flush()
        return self._table

    @property
    def obs_table(self) -> Optional[_Table]:
        """The observations' table, or None when ``table`` holds them (steps
        kept on the host sent first; with frame_stack, None: see frame_table)."""
        self.flush()
        return self.__dict__.get("_obs_table")

    def reset(self) -> None:
        """Empties the buffer (SB3's ``reset``): new, empty tables."""
        self._free()
        self.pos = 0
        self.full = False
        self._steps = 0
        self._forced = {}
        self._setup()

    # ---- sample ----

    def sample(self, batch_size: int, env: Optional[VecNormalize] = None) -> ReplayBufferSamples:
        """`batch_size` transitions drawn uniformly on the device from the
        valid ones, as SB3's ``ReplayBufferSamples`` (observations,
        actions, next_observations, dones, rewards) on the device, normalized
        through `env` (a VecNormalize) as SB3 does."""
        if self._staged:
            self.flush()
        obs, nobs, b, flat = self._draw(batch_size)
        self.last_indices = b["indices"]
        done = b["done"]
        if self._forced:
            done = self._apply_forced(done, b["timeout"], flat if flat is not None else b["indices"])
        act = b["action"]
        if self._act_cast is not None:
            act = act.to(self._act_cast)
        if self._obs_cast is not None:
            obs = obs.to(self._obs_cast)
            nobs = nobs.to(self._obs_cast)
        rew = b["reward"]
        if env is not None:
            obs, nobs, rew = self._normalize(env, obs, nobs, rew)
        return ReplayBufferSamples(obs, act, nobs, done, rew)

    def _batch(self, batch_size: int) -> Dict[str, torch.Tensor]:
        if not self.reuse_batches:
            return self._table.sample(batch_size)
        outs = self._outs.get(batch_size)
        if outs is None:
            mo = self._table.empty_batch(batch_size)
            oo = None
            if self._obs_table is not None:
                rows = 2 * batch_size if self.optimize_memory_usage else batch_size
                oo = self._obs_table.empty_batch(rows)
                del oo["indices"]
            outs = self._outs[batch_size] = (mo, oo)
        return self._table.sample(batch_size, out=outs[0])

    def _gather_obs(self, idx: torch.Tensor, batch_size: int) -> Dict[str, torch.Tensor]:
        assert self._obs_table is not None
        if self.reuse_batches:
            oo = self._outs[batch_size][1]
            assert oo is not None
            self._obs_table.gather(idx, out=oo)
            return oo
        g = self._obs_table.gather(idx)
        return {k: _to_torch(g[k]) for k in ("obs", "next_obs") if k in g}

    def _draw_broken(self, batch_size: int) -> Tuple[Any, ...]:
        raise _agrl.StateError(
            "agrl.sb3.ReplayBuffer: an add failed after the buffer had counted its steps (or stored "
            "their observations only), so the tables no longer line up; reset() the buffer"
        )

    def _draw_single(self, batch_size: int) -> Tuple[Any, ...]:
        b = self._batch(batch_size)
        return b["obs"], b["next_obs"], b, None

    def _draw_two(self, batch_size: int) -> Tuple[Any, ...]:
        b = self._batch(batch_size)
        g = self._gather_obs(b["indices"], batch_size)
        return g["obs"], g["next_obs"], b, None

    def _draw_optimized(self, batch_size: int) -> Tuple[Any, ...]:
        if self.buffer_size < 2:
            raise ValueError("optimize_memory_usage with a buffer of one step holds no transition to sample")
        b = self._batch(batch_size)
        flat, nflat, env_idx, last = self._locate(b["indices"])
        # the last step's next observation is not in the table: read a valid
        # column there (replaced below)
        nflat = torch.where(last, flat, nflat)
        g = self._gather_obs(torch.cat((flat, nflat)), batch_size)
        both = g["obs"]
        obs, nobs = both[:batch_size], both[batch_size:]
        # the next observation of the last step is not in the table yet
        if self._pending_dirty or self._pending_dev is None:
            src = torch.from_numpy(self._pending_host)
            if self._pending_dev is None:
                self._pending_dev = torch.empty(src.shape, dtype=src.dtype, device=self.device)
            self._pending_dev.copy_(src)
            self._pending_dirty = False
        pend = self._pending_dev[0] if self.n_envs == 1 else self._pending_dev[env_idx]
        mask = last.view((batch_size,) + (1,) * (nobs.dim() - 1))
        nobs = torch.where(mask, pend, nobs)
        return obs, nobs, b, flat

    def _locate(self, idx: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """optimize_memory_usage: for columns of the f32 table, SB3's flat
        positions (step row * n_envs + env) of the observation and of the
        next observation, the environment, and whether the step is the last
        one added (its next observation is the pending one)."""
        n, bs, m = self.n_envs, self.buffer_size, self._meta_rows
        steps = self._steps
        lastm, lastrow = (steps - 1) % m, (steps - 1) % bs
        if n == 1:
            r, e = idx, idx
        else:
            r = torch.div(idx, n, rounding_mode="floor")
            e = idx - r * n
        back = torch.remainder(lastm - r, m)  # steps before the last
        row = torch.remainder(lastrow - back, bs)
        nrow = torch.remainder(row + 1, bs)
        if n == 1:
            return row, nrow, e, back == 0
        return row * n + e, nrow * n + e, e, back == 0

    def positions(self, indices: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """SB3's (batch_inds, env_indices) of columns of :attr:`table` (such
        as :attr:`last_indices`, the last sample's), as the buffer is now:
        the step row and the environment of each transition."""
        self.flush()
        idx = torch.as_tensor(indices, device=self.device).long()
        if self.frame_stack is not None:
            flat = self._frame_flat(idx)
        else:
            flat = self._locate(idx)[0] if self.optimize_memory_usage else idx
        n = self.n_envs
        return torch.div(flat, n, rounding_mode="floor"), torch.remainder(flat, n)

    def _apply_forced(self, done: torch.Tensor, timeout: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
        keys = torch.tensor(list(self._forced.keys()), dtype=torch.int64, device=done.device)
        vals = torch.tensor(list(self._forced.values()), dtype=torch.float32, device=done.device)
        hit = flat.view(-1, 1) == keys.view(1, -1)
        found = hit.any(dim=1, keepdim=True)
        v = vals[hit.to(torch.int8).argmax(dim=1)].view(-1, 1)
        return torch.where(found, v * (1.0 - timeout), done)

    def _normalize(
        self, env: VecNormalize, obs: torch.Tensor, nobs: torch.Tensor, rew: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if _normalizes_on_device(env):
            if env.norm_obs:
                rms = env.obs_rms
                assert isinstance(rms, RunningMeanStd)
                mean = torch.from_numpy(np.asarray(rms.mean)).to(self.device)
                scale = torch.from_numpy(np.asarray(np.sqrt(rms.var + env.epsilon))).to(self.device)
                c = float(env.clip_obs)
                obs = ((obs.to(torch.float64) - mean) / scale).clamp_(-c, c).to(torch.float32)
                nobs = ((nobs.to(torch.float64) - mean) / scale).clamp_(-c, c).to(torch.float32)
            if env.norm_reward:
                den = torch.tensor(np.sqrt(env.ret_rms.var + env.epsilon), dtype=_REWARD_DIV, device=self.device)
                c = float(env.clip_reward)
                rew = (rew.to(_REWARD_DIV) / den).clamp_(-c, c).to(torch.float32)
            return obs, nobs, rew
        # anything else: SB3's own arithmetic on host copies
        o = self._normalize_obs(obs.cpu().numpy(), env)
        no = self._normalize_obs(nobs.cpu().numpy(), env)
        r = self._normalize_reward(rew.cpu().numpy(), env)
        return self.to_torch(o), self.to_torch(no), self.to_torch(r)  # type: ignore[arg-type]

    def _get_samples(self, batch_inds: np.ndarray[Any, Any], env: Optional[VecNormalize] = None) -> ReplayBufferSamples:
        """The transitions at SB3 step rows `batch_inds`, each of an
        environment drawn by numpy's global generator (SB3's
        ``_get_samples``)."""
        self.flush()
        batch_inds = np.asarray(batch_inds, dtype=np.int64).reshape(-1)
        if self.frame_stack is not None:
            return self._get_frames(batch_inds, env)
        env_indices = np.random.randint(0, high=self.n_envs, size=(len(batch_inds),))
        flat = batch_inds * self.n_envs + env_indices
        if self.optimize_memory_usage:
            cols = self._columns_of(flat)
        else:
            cols = flat
        size = len(self._table)
        if cols.size == 0 or (cols < 0).any() or (cols >= size).any():
            raise IndexError("_get_samples: a row that holds no stored transition")
        idx = torch.from_numpy(cols).to(self.device)
        b = {k: _to_torch(v) for k, v in self._table.gather(idx).items()}
        if self._single:
            obs, nobs = b["obs"], b["next_obs"]
        elif not self.optimize_memory_usage:
            g = self._obs_table.gather(idx)  # type: ignore[union-attr]
            obs, nobs = _to_torch(g["obs"]), _to_torch(g["next_obs"])
        else:
            nflat = ((batch_inds + 1) % self.buffer_size) * self.n_envs + env_indices
            obs, nobs = self._obs_rows(flat), self._obs_rows(nflat)
        done = b["done"]
        if self._forced:
            done = self._apply_forced(done, b["timeout"], torch.from_numpy(flat).to(self.device))
        act = b["action"] if self._act_cast is None else b["action"].to(self._act_cast)
        if self._obs_cast is not None:
            obs, nobs = obs.to(self._obs_cast), nobs.to(self._obs_cast)
        rew = b["reward"]
        if env is not None:
            obs, nobs, rew = self._normalize(env, obs, nobs, rew)
        return ReplayBufferSamples(obs, act, nobs, done, rew)

    def _columns_of(self, flat: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """optimize_memory_usage: the f32 table's columns of SB3 flat
        positions (-1 where the step is not a valid transition)."""
        n, bs, m = self.n_envs, self.buffer_size, self._meta_rows
        steps = self._steps
        row, e = flat // n, flat % n
        back = (((steps - 1) % bs) - row) % bs  # steps before the last
        valid = back < min(steps, bs - 1)
        step = steps - 1 - back
        return np.where(valid, (step % m) * n + e, -1)

    def _obs_rows(self, flat: np.ndarray[Any, Any]) -> torch.Tensor:
        """optimize_memory_usage: SB3's observations at flat positions: the
        table's, and the pending next observation at the row after the last
        step."""
        assert self._obs_table is not None
        n = self.n_envs
        pend = (flat // n == self._steps % self.buffer_size) & (self._steps > 0)
        g = self._obs_table.gather(np.where(pend, 0, flat))
        o = _to_torch(g["obs"]).cpu().numpy().copy()
        if pend.any():
            o[pend] = self._pending_host[(flat % n)[pend]]
        return torch.from_numpy(o).to(self.device)

    # ---- frame_stack: the observations in a frame table ----

    def _setup_frames(self) -> None:
        from .torch import FrameReplayBuffer

        k, n = self.frame_stack, self.n_envs
        assert k is not None
        shape = tuple(self.obs_shape)
        self._channels_first = int(np.argmin(shape)) == 0
        if self._channels_first:
            kc, h, w = shape
        else:
            h, w, kc = shape
        self._frame_hwc = (h, w, kc // k)
        self._act_field = _field_dtype(self._act_np)
        self._act_torch = _torch_dtype(self._act_np)
        stored_act = _torch_dtype(np.dtype(_AGRL_TO_NP[self._act_field]))
        self._act_cast = self._act_torch if stored_act != self._act_torch else None
        self._obs_cast = None
        self._act_batch = (n, self.action_dim)
        self._obs_batch = (n, *shape)
        self._zeros_n = np.zeros(n, dtype=np.float32)
        self._ctx = _agrl.Context(_ctx_device(self._device))
        # SB3 draws the last buffer_size - 1 steps; each keeps its stack (k - 1
        # steps before it) and the newest its next frame: buffer_size + k - 2 steps
        self._fr_steps = max(self.buffer_size + k - 2, 2)
        fields: Dict[str, Any] = {"action": ((self.action_dim,), self._act_field), "reward": ((), "f32"),
                                  "done": ((), "f32"), "done_raw": ((), "f32"), "timeout": ((), "f32"),
                                  "age": ((), "u8")}
        self._fr = FrameReplayBuffer(self._ctx, self._fr_steps * n, h, w, kc // k, stack=k, n_envs=n,
                                     fields=fields, seed=self.seed)
        c = kc // k
        self._hist = np.zeros((n, k, c, h, w), dtype=np.uint8)  # each copy's last k frames, oldest first
        self._age = np.zeros(n, dtype=np.int64)  # frames of its episode before the newest, at most k - 1
        self._last_done = np.ones(n, dtype=bool)  # (the first observation starts an episode)
        self._fresh = True
        self._stage_cap = self._staged = 0
        self._outs = {}
        self.last_indices = None
        self._draw = self._draw_frames

    def _frame_slots(self, obs: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Observations (n, *obs_shape) as (n, k, C, H, W): slots oldest first."""
        k = self.frame_stack
        assert k is not None
        h, w, c = self._frame_hwc
        if self._channels_first:
            return obs.reshape(len(obs), k, c, h, w)
        return obs.reshape(len(obs), h, w, k, c).transpose(0, 3, 4, 1, 2)

    def _add_frames(self, obs: Any, action: Any, reward: Any, done: Any) -> None:
        k, n = self.frame_stack, self.n_envs
        assert k is not None
        slots = self._frame_slots(np.asarray(obs).reshape(self._obs_batch))
        # an episode starts after a done (or a done set through `dones`, as SB3's learn() does)
        prev = (self.pos - 1) % self.buffer_size
        reset = self._last_done | np.array([self._forced.get(prev * n + e, 0.0) != 0 for e in range(n)])
        age = np.where(reset, 0, np.minimum(self._age + 1, k - 1))
        hist = np.concatenate([self._hist[:, 1:], slots[:, k - 1 :]], axis=1)
        want = hist.copy()
        want[np.arange(k)[None, :] < (k - 1 - age)[:, None]] = 0  # VecFrameStack's zero padding
        if not np.array_equal(want, slots):
            bad = int(np.argmax([not np.array_equal(a, b) for a, b in zip(want, slots)]))
            raise ValueError(
                f"agrl.sb3.ReplayBuffer: frame_stack = {k}: the observation of environment {bad} is not the stack "
                f"of its last {k} frames (zeros before its episode's first) that the buffer holds; give the "
                f"observations of VecFrameStack(n_stack={k}) and a done flag at each episode's end")
        done = np.asarray(done, dtype=np.float32).reshape(n)
        newest = np.ascontiguousarray(slots[:, k - 1].transpose(0, 2, 3, 1))  # (n, H, W, C)
        first = np.full(n, self._fresh)
        self._fr.add(newest, first, action=np.asarray(action).reshape(self._act_batch),
                     reward=np.asarray(reward, dtype=np.float32).reshape(n), done=done, done_raw=done,
                     timeout=self._zeros_n, age=age.astype(np.uint8))
        self._hist, self._age, self._last_done, self._fresh = hist, age, done != 0, False

    @property
    def frame_table(self) -> Any:
        """With frame_stack: the :class:`agrl.torch.FrameReplayBuffer` that
        holds the steps (None otherwise)."""
        return self.__dict__.get("_fr")

    def _frame_flat(self, idx: torch.Tensor) -> torch.Tensor:
        """SB3's flat positions (step row * n_envs + env) of frame table entries."""
        n, m, last = self.n_envs, self._fr_steps, self._steps - 1
        slot = torch.div(idx, n, rounding_mode="floor")
        step = last - torch.remainder(last - slot, m)
        return torch.remainder(step, self.buffer_size) * n + (idx - slot * n)

    def _entries_of(self, flat: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Frame table entries of SB3 flat positions (-1 where the row holds no
        step that may be drawn)."""
        n, bs, last = self.n_envs, self.buffer_size, self._steps - 1
        row, e = flat // n, flat % n
        step = last - (last - row) % bs
        ok = (step >= 0) & (step > last - bs + (1 if self.full else 0))  # SB3's rows but `pos` once full
        return np.where(ok, (step % self._fr_steps) * n + e, -1)

    def _stacks(self, b: Dict[str, torch.Tensor], flat: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The batch's obs and next obs as VecFrameStack gives them: zeros
        before an episode's first frame, in the observation space's layout."""
        k = self.frame_stack
        assert k is not None
        h, w, c = self._frame_hwc
        age = b["age"].long()
        reset = b["done_raw"] != 0
        if self._forced:
            found, vals = self._forced_at(flat)
            reset = torch.where(found, vals != 0, reset)
        nage = torch.where(reset, torch.zeros_like(age), torch.clamp(age + 1, max=k - 1))
        slot = torch.arange(k, device=age.device).view(1, k)
        out = []
        for stack, a in ((b["obs"], age), (b["next_obs"], nage)):
            keep = (slot >= (k - 1 - a).view(-1, 1)).to(stack.dtype).view(-1, k, 1, 1, 1)
            x = (stack.view(-1, k, c, h, w) * keep).view(-1, k * c, h, w)
            out.append(x if self._channels_first else x.permute(0, 2, 3, 1).contiguous())
        return out[0], out[1]

    def _draw_frames(self, batch_size: int) -> Tuple[Any, ...]:
        b = self._fr.sample(batch_size)
        flat = self._frame_flat(b["indices"])
        obs, nobs = self._stacks(b, flat)
        b["done"] = b["done"].view(-1, 1)
        b["reward"] = b["reward"].view(-1, 1)
        b["timeout"] = b["timeout"].view(-1, 1)
        return obs, nobs, b, flat

    def _forced_at(self, flat: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Whether a done was set through `dones` at each flat position, and its value."""
        keys = torch.tensor(list(self._forced.keys()), dtype=torch.int64, device=flat.device)
        vals = torch.tensor(list(self._forced.values()), dtype=torch.float32, device=flat.device)
        hit = flat.view(-1, 1) == keys.view(1, -1)
        return hit.any(dim=1), vals[hit.to(torch.int8).argmax(dim=1)]

    def _get_frames(self, batch_inds: np.ndarray[Any, Any], env: Optional[VecNormalize]) -> ReplayBufferSamples:
        env_indices = np.random.randint(0, high=self.n_envs, size=(len(batch_inds),))
        flat = batch_inds * self.n_envs + env_indices
        entries = self._entries_of(flat)
        if entries.size == 0 or (entries < 0).any() or not all(self._fr.sampleable(int(x)) for x in entries):
            raise IndexError("_get_samples: a row that holds no step that may be drawn (the newest step is drawn "
                             "once the next one is added)")
        b = self._fr.gather(entries)
        tflat = torch.from_numpy(flat).to(self.device)
        obs, nobs = self._stacks(b, tflat)
        done = b["done"].view(-1, 1)
        if self._forced:
            done = self._apply_forced(done, b["timeout"].view(-1, 1), tflat)
        act = b["action"] if self._act_cast is None else b["action"].to(self._act_cast)
        rew = b["reward"].view(-1, 1)
        if env is not None:
            obs, nobs, rew = self._normalize(env, obs, nobs, rew)
        return ReplayBufferSamples(obs, act, nobs, done, rew)

    def _dump_frames(self) -> Dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "frames.agrl")
            self._fr.save(path)
            with open(path, "rb") as f:
                data = f.read()
        return {"frames": data, "hist": self._hist.copy(), "age": self._age.copy(),
                "last_done": self._last_done.copy(), "fresh": self._fresh}

    def _restore_frames(self, dump: Dict[str, Any]) -> None:
        from .torch import FrameReplayBuffer

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "frames.agrl")
            with open(path, "wb") as f:
                f.write(dump["frames"])
            fields = dict(self._fr.fields)
            self._fr.free()
            self._fr = FrameReplayBuffer.load(self._ctx, path, fields=fields, seed=self.seed)
        self._hist, self._age = dump["hist"], dump["age"]
        self._last_done, self._fresh = dump["last_done"], dump["fresh"]

    # ---- read-back, pickling ----

    @staticmethod
    def _dump_table(t: _Table) -> Dict[str, Any]:
        size = len(t)
        arrays: Dict[str, np.ndarray[Any, Any]] = {}
        for name, (shape, dtype) in t.fields.items():
            arrays[name] = np.empty((size, *shape), dtype=_AGRL_TO_NP[dtype])
        for start in range(0, size, _CHUNK):
            stop = min(size, start + _CHUNK)
            g = t.gather(np.arange(start, stop, dtype=np.int64))
            for name in arrays:
                arrays[name][start:stop] = _to_torch(g[name]).cpu().numpy().reshape(arrays[name][start:stop].shape)
        return {"size": size, "position": t.position, "capacity": t.capacity, "arrays": arrays}

    @staticmethod
    def _restore_table(t: _Table, dump: Dict[str, Any]) -> None:
        """Fills an empty table so that every column holds what it held and
        the ring is at the same position."""
        size, position, arrays = dump["size"], dump["position"], dump["arrays"]
        if size != t.capacity and position != size:
            raise _agrl.StateError("agrl.sb3: a saved table's position does not match its size")
        spans = [(0, size)]
        if size == t.capacity and position:
            spans.append((0, position))
        for lo, hi in spans:
            for start in range(lo, hi, _CHUNK):
                stop = min(hi, start + _CHUNK)
                t.add(**{name: np.ascontiguousarray(a[start:stop]) for name, a in arrays.items()})

    def _dump(self) -> Dict[str, Any]:
        self.flush()
        if self.frame_stack is not None:
            return {"frames": self._dump_frames()}
        return {
            "table": self._dump_table(self._table),
            "obs_table": None if self._obs_table is None else self._dump_table(self._obs_table),
            "pending": self._pending_host.copy(),
        }

    def _restore(self, dump: Dict[str, Any]) -> None:
        if self.frame_stack is not None:
            self._restore_frames(dump["frames"])
            return
        self._restore_table(self._table, dump["table"])
        if self._obs_table is not None and dump["obs_table"] is not None:
            self._restore_table(self._obs_table, dump["obs_table"])
        self._pending_host[...] = dump["pending"]
        self._pending_dirty = True

    def _read_back(self) -> Dict[str, np.ndarray[Any, Any]]:
        """SB3's arrays (n_steps, n_envs, ...) from the device, zeros where no
        valid transition is stored."""
        if self.frame_stack is not None:
            raise NotImplementedError(
                "agrl.sb3.ReplayBuffer: with frame_stack the observations are kept one frame a step in "
                "frame_table; SB3's arrays are not read back (sample() and _get_samples() give transitions)")
        self.flush()
        bs, n = self.buffer_size, self.n_envs
        total = bs * n
        out: Dict[str, np.ndarray[Any, Any]] = {
            "observations": np.zeros((total, *self.obs_shape), dtype=self._obs_np),
            "actions": np.zeros((total, self.action_dim), dtype=self._act_np),
            "rewards": np.zeros(total, dtype=np.float32),
            "dones": np.zeros(total, dtype=np.float32),
            "timeouts": np.zeros(total, dtype=np.float32),
        }
        if not self.optimize_memory_usage:
            out["next_observations"] = np.zeros((total, *self.obs_shape), dtype=self._obs_np)
        meta = self._dump_table(self._table)
        cols = np.arange(meta["size"], dtype=np.int64)
        if self.optimize_memory_usage:
            if self.buffer_size < 2:
                cols = cols[:0]
            r, e = cols // n, cols % n
            back = ((self._steps - 1) % self._meta_rows - r) % self._meta_rows
            flat = ((self._steps - 1 - back) % bs) * n + e
        else:
            flat = cols
        a = meta["arrays"]
        out["actions"][flat] = a["action"][: len(flat)]
        out["rewards"][flat] = a["reward"][: len(flat), 0]
        out["dones"][flat] = a["done_raw"][: len(flat), 0]
        out["timeouts"][flat] = a["timeout"][: len(flat), 0]
        if self._single:
            out["observations"][flat] = a["obs"]
            out["next_observations"][flat] = a["next_obs"]
        else:
            assert self._obs_table is not None
            o = self._dump_table(self._obs_table)["arrays"]
            ocols = np.arange(len(o["obs"]))
            out["observations"][ocols] = o["obs"]
            if self.optimize_memory_usage:
                if self._steps:
                    row = self._steps % bs
                    out["observations"][row * n : row * n + n] = self._pending_host
            else:
                out["next_observations"][ocols] = o["next_obs"]
        for p, v in self._forced.items():
            out["dones"][p] = v
        shaped: Dict[str, np.ndarray[Any, Any]] = {}
        for k, arr in out.items():
            arr = arr.reshape(bs, n, *arr.shape[1:])
            arr.setflags(write=False)
            shaped[k] = arr
        return shaped

    def __getstate__(self) -> Dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_") or k in _KEPT}
        state.pop("last_indices", None)
        state["_device"] = str(self._device)
        state["_agrl_dump"] = self._dump()
        state["_agrl_state_version"] = _STATE_VERSION
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        version = state.pop("_agrl_state_version", None)
        if version != _STATE_VERSION:
            raise _agrl.StateError(f"agrl.sb3: a saved buffer of state version {version}, not {_STATE_VERSION}")
        dump = state.pop("_agrl_dump")
        dev = torch.device(state.pop("_device"))
        if dev.type == "cuda" and not torch.cuda.is_available():
            dev = torch.device("cpu")  # SB3 sets the device it trains on afterwards
        self.__dict__.update(state)
        self._device = dev
        self._setup()
        self._restore(dump)

    # ---- SB3's arrays, read back ----

    @property
    def observations(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        """SB3's ``observations`` (n_steps, n_envs, *obs_shape): a read-only
        host copy."""
        return self._read_back()["observations"]

    @property
    def next_observations(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        """SB3's ``next_observations`` (absent with optimize_memory_usage): a
        read-only host copy."""
        if self.optimize_memory_usage:
            raise AttributeError("next_observations: observations hold them with optimize_memory_usage")
        return self._read_back()["next_observations"]

    @property
    def actions(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        """SB3's ``actions`` (n_steps, n_envs, action_dim): a read-only host copy."""
        return self._read_back()["actions"]

    @property
    def rewards(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        """SB3's ``rewards`` (n_steps, n_envs): a read-only host copy."""
        return self._read_back()["rewards"]

    @property
    def timeouts(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        """SB3's ``timeouts`` (n_steps, n_envs): a read-only host copy."""
        return self._read_back()["timeouts"]

    @property
    def dones(self) -> _Dones:  # type: ignore[override]
        """SB3's ``dones`` (n_steps, n_envs): reads are host copies,
        ``dones[key] = value`` sets stored transitions' done flags."""
        return _Dones(self)

    def __repr__(self) -> str:
        return (
            f"<agrl.sb3.ReplayBuffer {self.size()}/{self.buffer_size} steps x {self.n_envs} envs "
            f"on {self._device}>"
        )


# private attributes that are configuration (pickled); the rest is rebuilt
_KEPT = frozenset({"_obs_np", "_act_np", "_steps", "_forced"})  # noqa: E305
