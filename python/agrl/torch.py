"""agrl.torch: agrl's replay tables for PyTorch.

Imported only by those who have torch (``import agrl`` never imports it).

- :class:`ReplayBuffer` is :class:`agrl.ReplayBuffer` whose :meth:`sample`
  returns torch tensors on the table's device (``torch.device("cuda:N")`` or
  the CPU), each field in the dtype it was added with, ``"indices"`` int64
  and, prioritized, ``"weights"`` float32; with ``tensordict=True`` a
  ``tensordict.TensorDict`` of them.
- ``sample(B, out=batch)`` writes into torch tensors you keep
  (:meth:`ReplayBuffer.empty_batch` makes them): no tensor is made at all, and
  the call is one recorded launch ordered with torch's stream, so it also
  runs inside a loop that ``torch.cuda.graph`` captures.
- ``add``, ``update_priorities`` (and :class:`agrl.DQN` / :class:`agrl.SAC`'s
  ``store``) take torch tensors as they are, CUDA tensors device to device.
- :class:`FrameReplayBuffer` is :class:`agrl.FrameReplayBuffer` whose
  batches are torch tensors: stacked ``"obs"`` and ``"next_obs"`` made on
  the device, the fields, ``"indices"``.

Streams: agrl works on its own CUDA stream. Every call orders it after the
work torch has queued on its current stream, and torch's current stream
after agrl's writes, so a batch can be used at once on that stream, and a
tensor handed in may be freed when the call returns. agrl's stream is a
blocking one, so with torch's default stream (the legacy one) the device
keeps that order by itself and nothing is queued for it; with another
current stream each call records an event and waits for it, each way.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Literal, Mapping, Optional, overload

import torch

from . import _agrl
from .frames import FrameReplayBuffer as _FrameReplayBuffer
from .replay import ReplayBuffer as _ReplayBuffer

__all__ = ["FrameReplayBuffer", "ReplayBuffer", "TORCH_DTYPES", "device_of"]

#: agrl's dtype names and torch's dtypes
TORCH_DTYPES: Dict[str, torch.dtype] = {
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "u8": torch.uint8,
    "i32": torch.int32,
    "i64": torch.int64,
}


def device_of(ctx: _agrl.Context) -> torch.device:
    """The torch device of an agrl context's memory ("cuda:N" or "cpu").
    Vulkan memory is agrl's own: its context has no torch device."""
    dev = ctx.device
    if dev.startswith("vulkan"):
        raise _agrl.UnsupportedError(f"device_of: torch cannot use the memory of {dev}")
    return torch.device(dev)


def _from_dlpack() -> Callable[[Any], torch.Tensor]:
    import torch.utils.dlpack

    fn: Callable[[Any], torch.Tensor] = torch.utils.dlpack.from_dlpack
    return fn


def _stream_query(device: torch.device) -> Callable[[], Optional[int]]:
    """A function giving torch's current stream on `device` as a raw handle
    (None on the CPU): the C query where torch has it (the public
    torch.cuda.current_stream() builds a Stream object each time)."""
    if device.type != "cuda":
        return lambda: None
    raw: Optional[Callable[[int], int]] = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    index = device.index or 0
    if raw is not None:
        return lambda: raw(index)
    return lambda: int(torch.cuda.current_stream(device).cuda_stream)


class _OnTorch:
    """What the torch tables share: their torch device, the import of their
    batches and torch's current stream there, set up after construction
    and after load()."""

    device: torch.device
    ctx: _agrl.Context

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._after_load()

    def _after_load(self) -> None:
        self.device = device_of(self.ctx)
        self._import = _from_dlpack()
        self._stream: Callable[[], Optional[int]] = _stream_query(self.device)


class ReplayBuffer(_OnTorch, _ReplayBuffer):
    """:class:`agrl.ReplayBuffer` whose batches are torch tensors (see the
    module's documentation). Same constructor."""

    def _after_load(self) -> None:
        super()._after_load()
        self._captured = False
        capturing: Optional[Callable[[], bool]] = getattr(torch.cuda, "is_current_stream_capturing", None)
        self._capturing: Callable[[], bool] = (
            (lambda: False) if self.device.type != "cuda" or capturing is None else capturing)

    @overload  # type: ignore[override]
    def sample(
        self,
        batch_size: int,
        beta: Optional[float] = None,
        *,
        out: Optional[Dict[str, torch.Tensor]] = None,
        tensordict: Literal[False] = False,
    ) -> Dict[str, torch.Tensor]: ...

    @overload
    def sample(
        self,
        batch_size: int,
        beta: Optional[float] = None,
        *,
        out: Optional[Dict[str, torch.Tensor]] = None,
        tensordict: Literal[True],
    ) -> Any: ...  # a tensordict.TensorDict (tensordict has no type information)

    @overload
    def sample(
        self,
        batch_size: int,
        beta: Optional[float] = None,
        *,
        out: Optional[Dict[str, torch.Tensor]] = None,
        tensordict: bool = False,
    ) -> Any: ...

    def sample(
        self,
        batch_size: int,
        beta: Optional[float] = None,
        *,
        out: Optional[Dict[str, torch.Tensor]] = None,
        tensordict: bool = False,
    ) -> Any:
        """``batch_size`` transitions drawn on the device, as torch tensors:
        each field ``(B, *shape)`` in its dtype, ``"indices"`` (B,) int64 and,
        prioritized, ``"weights"`` (B,) float32 (importance weights of
        ``beta``, the buffer's by default).

        ``out``: a dict of your tensors (:meth:`empty_batch`), written in
        place and returned; torch's current stream waits for the write.
        ``tensordict=True``: a ``tensordict.TensorDict`` with batch size
        ``[B]`` instead of a dict."""
        if out is not None and self._capturing():
            # inside torch.cuda.graph: the recording joins torch's capture
            # on its stream (no events); adds are ordered with that stream
            # from now on (add)
            batch = self._sample_on(batch_size, beta, out, self._stream())
            self._captured = True
        elif out is not None:
            batch = super().sample(batch_size, beta, out=out)
        else:
            batch = self._sample_import(batch_size, beta, self._import, self._stream())
        if tensordict:
            from tensordict import TensorDict  # type: ignore[import-untyped, import-not-found, unused-ignore]

            return TensorDict(batch, batch_size=[batch_size], device=self.device)
        return batch

    def gather(  # type: ignore[override]
        self, indices: Any, out: Optional[Dict[str, torch.Tensor]] = None
    ) -> Dict[str, torch.Tensor]:
        """The transitions at ``indices`` (host or device, as
        :meth:`agrl.ReplayBuffer.gather`) as torch tensors: new ones, or
        written into ``out`` (then returned)."""
        if out is not None:
            batch: Dict[str, torch.Tensor] = super().gather(indices, out=out)
            return batch
        return self._gather_import(indices, self._import, self._stream())

    def add(self, *args: Any, **kwargs: Any) -> None:
        """:meth:`agrl.ReplayBuffer.add`. Once a sample has been captured
        into a torch CUDA graph (whose replays read the table on torch's
        stream), each add also waits for torch's current stream before it
        writes and makes that stream wait for the write."""
        if not self._captured:
            super().add(*args, **kwargs)
            return
        stream = self._stream() or 0
        self.ctx.wait_stream(stream)
        super().add(*args, **kwargs)
        self.ctx.stream_wait(stream)

    def empty_batch(self, batch_size: int) -> Dict[str, torch.Tensor]:
        """Tensors that ``sample(batch_size, out=...)`` fills: every field
        ``(B, *shape)`` in its dtype, ``"indices"`` int64 and, prioritized,
        ``"weights"`` float32, on the table's device."""
        out: Dict[str, torch.Tensor] = {}
        for name, (shape, dtype) in self.fields.items():
            out[name] = torch.empty((batch_size, *shape), dtype=TORCH_DTYPES[dtype], device=self.device)
        out["indices"] = torch.empty((batch_size,), dtype=torch.int64, device=self.device)
        if self.prioritized:
            out["weights"] = torch.empty((batch_size,), dtype=torch.float32, device=self.device)
        return out


class FrameReplayBuffer(_OnTorch, _FrameReplayBuffer):
    """:class:`agrl.FrameReplayBuffer` whose batches are torch tensors on the
    table's device. Same constructor.

    ``add`` takes torch tensors too: CPU tensors as they are, CUDA tensors
    through a copy to the host (a frame table is written from host memory).
    ``sample(B, out=batch)`` writes the batch into your tensors
    (:meth:`empty_batch`) in place, handed over on torch's current
    stream."""

    def add(self, frames: Any, first: Any, fields: Optional[Mapping[str, Any]] = None, /, **arrays: Any) -> None:
        """:meth:`agrl.FrameReplayBuffer.add`, CUDA tensors copied to the host first."""

        def host(a: Any) -> Any:
            return a.cpu() if isinstance(a, torch.Tensor) and a.device.type != "cpu" else a

        if fields is not None:
            super().add(host(frames), host(first), {k: host(v) for k, v in fields.items()})
        else:
            super().add(host(frames), host(first), **{k: host(v) for k, v in arrays.items()})

    def sample(  # type: ignore[override]
        self,
        batch_size: int,
        dtype: Any = "u8",
        *,
        out: Optional[Dict[str, torch.Tensor]] = None,
        stream: Optional[int] = None,
    ) -> Dict[str, torch.Tensor]:
        """``batch_size`` transitions drawn on the device as torch tensors:
        ``"obs"``, ``"next_obs"`` (B, stack * channels, height, width) uint8
        or float32 (``dtype="f32"``: v / 255), each field (B, *shape) in its
        dtype, ``"indices"`` (B,) int64. ``out``: a dict of your tensors
        (:meth:`empty_batch`; "indices" optional), written in place as
        :meth:`agrl.FrameReplayBuffer.sample` writes ``out`` (on torch's
        current stream unless ``stream`` says) and returned."""
        if out is not None:
            return _FrameReplayBuffer.sample(self, batch_size, dtype, out=out, stream=stream)
        if stream is not None:
            raise _agrl.InvalidArgError("sample: stream is taken with out= only")
        batch: Dict[str, torch.Tensor] = self._sample_import(batch_size, dtype, self._import, self._stream())
        return batch

    def gather(self, indices: Any, dtype: Any = "u8") -> Dict[str, torch.Tensor]:  # type: ignore[override]
        """The transitions at ``indices`` (host or device, as
        :meth:`agrl.FrameReplayBuffer.gather`) as torch tensors."""
        batch: Dict[str, torch.Tensor] = self._gather_import(indices, dtype, self._import, self._stream())
        return batch

    def nstep(  # type: ignore[override]
        self,
        indices: Any,
        n: int,
        gamma: float,
        reward: str = "reward",
        terminated: str = "terminated",
        truncated: Optional[str] = None,
    ) -> Dict[str, torch.Tensor]:
        """:meth:`agrl.FrameReplayBuffer.nstep` as torch tensors."""
        r = super().nstep(indices, n, gamma, reward, terminated, truncated)
        return {k: self._import(v) for k, v in r.items()}

    def empty_batch(self, batch_size: int, dtype: Any = "u8") -> Dict[str, torch.Tensor]:
        """Tensors that ``sample(batch_size, dtype, out=...)`` fills."""
        odt = torch.float32 if dtype in ("f32", "float32", torch.float32) else torch.uint8
        out: Dict[str, torch.Tensor] = {
            "obs": torch.empty((batch_size, *self.obs_shape), dtype=odt, device=self.device),
            "next_obs": torch.empty((batch_size, *self.obs_shape), dtype=odt, device=self.device),
        }
        for name, (shape, fdt) in self.fields.items():
            out[name] = torch.empty((batch_size, *shape), dtype=TORCH_DTYPES[fdt], device=self.device)
        out["indices"] = torch.empty((batch_size,), dtype=torch.int64, device=self.device)
        return out
