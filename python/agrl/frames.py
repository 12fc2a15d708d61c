"""agrl.FrameReplayBuffer: pixel observations stored once per step, stacked
on the device when a batch is gathered (the C library's frame tables,
agrl/frames.h)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Self, Tuple, Union

import numpy as np

from . import _agrl
from .replay import FieldSpec, _field_spec, _finish_load

#: The fields a table has when none are given: what a discrete-action agent
#: stores beside each frame, each one value a transition.
DEFAULT_FIELDS: Dict[str, FieldSpec] = {
    "action": ((), "i64"),
    "reward": ((), "f32"),
    "terminated": ((), "u8"),
    "truncated": ((), "u8"),
}
# the keys of a batch besides the fields, and add()'s other arguments
_RESERVED = ("obs", "next_obs", "indices", "frames", "first")
_MAX_STACK = 64


def _int_arg(name: str, value: Any, lo: int, hi: Optional[int] = None) -> int:
    """`value` as an int in lo .. hi, or the package's exception naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"FrameReplayBuffer: {name} must be an int, not {type(value).__name__}")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        bound = f"{lo} .. {hi}" if hi is not None else f"at least {lo}"
        raise _agrl.InvalidArgError(f"FrameReplayBuffer: {name} = {v} is outside {bound}")
    return v


def _field_specs(fields: Any) -> List[Tuple[str, Tuple[int, ...], Any]]:
    if not isinstance(fields, Mapping) or not fields:
        raise TypeError("FrameReplayBuffer: fields must be a non-empty dict of name -> (shape, dtype)")
    specs = []
    for name, spec in fields.items():
        if name in _RESERVED:
            raise _agrl.InvalidArgError(
                f"FrameReplayBuffer: a field cannot be called {name!r} (a batch's or add()'s own name)")
        specs.append(_field_spec(name, spec))
    return specs


class FrameReplayBuffer(_agrl._Frames):
    """FrameReplayBuffer(ctx, capacity, height, width, channels=1, *, stack=4,
    n_envs=1, fields=DEFAULT_FIELDS, storage="f32", min_size=1, seed=0)

    A replay table of pixel observations that keeps each environment step's
    newest frame once (``height x width x channels`` uint8) beside the
    step's fields, and rebuilds the stacks of the last ``stack`` frames of a
    sampled transition on the device, obs and next_obs alike: about
    ``capacity * (h*w*c + 1)`` bytes of frames, where a table of stacked
    observations would keep every frame ``2 * stack`` times.

    Entries. :meth:`add` appends ``N = steps * n_envs`` entries, step by
    step, copy by copy (entry ``s * n_envs + e`` of a call is copy ``e`` at
    step ``s``): each entry is an observation's frame, a flag ``first`` (the
    frame is an episode's first observation, as ``reset`` returns it) and
    the fields of the transition taken from that observation. Transition
    ``x`` is obs = the stack ending at entry ``x``, the fields of ``x``,
    next_obs = the stack ending at the copy's next entry. An episode's last
    observation is an entry of its own (its fields are stored, never
    sampled), followed by the next episode's first, flagged: the order of
    Gymnasium's vector environments with autoreset mode NEXT_STEP. Older
    slots of a stack that reaches back past an episode's first frame repeat
    that frame (Gymnasium's ``FrameStackObservation(padding_type="reset")``).

    Sampling draws uniformly among the transitions that may be sampled
    (:meth:`sampleable`): never the newest ``n_envs`` entries (their next
    observation is not stored yet), an episode's last observation, or an
    entry whose stack would read frames already overwritten. ``len(buf)``
    and ``count`` are their number, ``size`` the entries held.

    A batch (:meth:`sample`, :meth:`gather`) is a dict: ``"obs"`` and
    ``"next_obs"`` ``(B, stack * channels, height, width)`` (slots oldest
    first, each slot's channels together), uint8 as stored or float32
    ``v / 255`` (``dtype="f32"``), each field ``(B, *shape)`` in the dtype
    it was added with, and ``"indices"`` ``(B,)`` int64, the entries, as
    :class:`agrl.Tensor` objects on the context's device that DLPack hands
    to any framework (:class:`agrl.torch.FrameReplayBuffer` returns torch
    tensors). ``sample(B, out=arrays)`` writes the batch into arrays you
    keep (numpy, torch, CuPy in the context's memory), in place.

    ``fields`` are given as to :class:`agrl.ReplayBuffer` (a shape, or
    ``(shape, dtype)``; shape ``()`` is one value a transition, sampled as
    ``(B,)``); ``storage`` is their dtype on the device. Frame tables run on
    the CPU, CUDA and Vulkan; on a Vulkan context ``sample`` and ``gather``
    raise :class:`agrl.UnsupportedError`, as ReplayBuffer's do (a Vulkan
    device hands no memory out). Every method takes the context's lock;
    ``with FrameReplayBuffer(...) as rb:`` frees the table at the end.
    """

    fields: Dict[str, Tuple[Tuple[int, ...], str]]
    ctx: _agrl.Context

    def __init__(
        self,
        ctx: Union[_agrl.Context, str, None],
        capacity: int,
        height: int,
        width: int,
        channels: int = 1,
        *,
        stack: int = 4,
        n_envs: int = 1,
        fields: Optional[Mapping[str, FieldSpec]] = None,
        storage: Any = "f32",
        min_size: int = 1,
        seed: int = 0,
    ) -> None:
        # every argument checked before anything is made
        capacity = _int_arg("capacity", capacity, 1)
        height = _int_arg("height", height, 1, 2**31 - 1)
        width = _int_arg("width", width, 1, 2**31 - 1)
        channels = _int_arg("channels", channels, 1, 2**31 - 1)
        if height * width * channels > 2**31 - 2:
            raise _agrl.InvalidArgError(
                f"FrameReplayBuffer: a frame of {height} x {width} x {channels} is larger than 2^31 - 2 bytes")
        stack = _int_arg("stack", stack, 1, _MAX_STACK)
        n_envs = _int_arg("n_envs", n_envs, 1, capacity)
        min_size = _int_arg("min_size", min_size, 1, capacity)
        seed = _int_arg("seed", seed, 0, 2**64 - 1)
        specs = _field_specs(DEFAULT_FIELDS if fields is None else fields)
        if ctx is not None and not isinstance(ctx, (_agrl.Context, str)):
            raise TypeError(f"FrameReplayBuffer: ctx must be an agrl.Context or a device name, not "
                            f"{type(ctx).__name__}")
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        self.ctx = ctx
        super().__init__(ctx, height, width, channels, stack, capacity, n_envs, specs, storage, min_size, seed)
        self.fields = {name: (shape, dtype) for (name, shape, _), (_, _, dtype) in zip(specs, self._fields())}

    @classmethod
    def load(
        cls,
        ctx: Union[_agrl.Context, str, None],
        path: Union[str, "os.PathLike[str]"],
        fields: Optional[Mapping[str, FieldSpec]] = None,
        seed: int = 0,
    ) -> Self:
        """A table saved by :meth:`save`, on `ctx`'s device: its frames, first
        flags, fields and ring as they were. The file keeps each field's
        width, not its shape: pass `fields` (as to the constructor) to give
        the fields their shapes again; otherwise each is (width,). `seed`
        starts the sampling stream (the same seed draws the same
        transitions)."""
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        obj = cls._load(ctx, path, seed)
        _finish_load(obj, ctx, fields, _field_specs)
        return obj

    def _after_load(self) -> None:
        """Called on a table load() made (subclasses finish their setup)."""

    @property
    def obs_shape(self) -> Tuple[int, int, int]:
        """One stacked observation's shape: (stack * channels, height, width)."""
        return (self.stack * self.channels, self.height, self.width)

    def sample(  # type: ignore[override]
        self,
        batch_size: int,
        dtype: Any = "u8",
        out: Optional[Dict[str, Any]] = None,
        stream: Optional[int] = None,
    ) -> Dict[str, Any]:
        """``batch_size`` transitions drawn uniformly on the device (see the
        class's documentation).

        ``out``: a dict of your arrays (numpy or torch on a CPU context,
        torch or CuPy on CUDA: the context's memory), written in place with
        no copy and returned: ``"obs"`` and ``"next_obs"``, each one
        contiguous ``(B, stack * channels, height, width)`` array of the
        stacks' dtype (uint8 for ``"u8"``, float32 for ``"f32"``), every
        field ``(B, *shape)`` (its values contiguous, any dtype agrl writes:
        float32, float16, bfloat16, uint8, int32, int64), optionally
        ``"indices"`` ``(B,)`` int32 or int64. The draws are those of a
        sample without ``out`` from the same state. On CUDA the batch is
        handed over between two waits of ``stream`` (None: the arrays'
        framework's current stream; -1: none), as
        :meth:`agrl.ReplayBuffer.sample` hands its ``out=`` batch over. A
        Vulkan context raises :class:`agrl.UnsupportedError` (no framework
        maps its memory)."""
        return super().sample(batch_size, dtype, out, stream)

    def __repr__(self) -> str:
        try:
            n, size = self.count, self.size
        except _agrl.Error:
            return "<agrl.FrameReplayBuffer (freed)>"
        return (f"<agrl.FrameReplayBuffer {self.height}x{self.width}x{self.channels} stack {self.stack}, "
                f"{size}/{self.capacity} entries ({n} sampleable), {self.n_envs} envs on {self.ctx.device}>")

