"""agrl.jax: agrl's replay tables for JAX.

Imported only by those who have JAX (``import agrl`` never imports it).

JAX arrays are immutable, so a batch cannot be written into arrays the
caller keeps (``sample(out=...)``); each batch is new memory handed to JAX.
Each array JAX imports costs it many microseconds, so
:meth:`ReplayBuffer.sample` hands over one array a batch: ``{"bytes": (B,
row_bytes) uint8}``, each transition's fields (and its index and, prioritized,
its weight) side by side in one row, each at a byte offset aligned to its
dtype (:meth:`layout`), and :meth:`ReplayBuffer.unpack` takes a row apart
into the fields (slices and bit casts, little-endian as every device agrl
runs on). ``unpack`` is a pure function of JAX arrays: call it inside your
jitted update, where it costs nothing::

    rb = agrl.jax.ReplayBuffer(ctx, 1_000_000, fields)
    @jax.jit
    def update(params, packed):
        batch = rb.unpack(packed)   # {"obs": (B, 17), ..., "indices": (B,)}
        ...
    params = update(params, rb.sample(256))

:meth:`ReplayBuffer.sample_fields` gives the fields as arrays of their own
(one import each). Without JAX's 64-bit types (``jax_enable_x64`` off, its
default) indices and int64 fields come as int32, as JAX would narrow them
anyway (int64 values beyond int32 saturate).

:class:`FrameReplayBuffer` is :class:`agrl.FrameReplayBuffer` whose
batches are JAX arrays, one a key (the stacks are most of a batch's bytes;
packing the rest would save little), each in the dtype the table gives it
(int64 indices and fields as JAX's import makes them).

Streams: the import orders JAX's stream for external arrays after agrl's
draw, so the arrays are ready for any JAX computation.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp

from . import _agrl
from .frames import FrameReplayBuffer as _FrameReplayBuffer
from .replay import ReplayBuffer as _ReplayBuffer

__all__ = ["FrameReplayBuffer", "ReplayBuffer", "device_of"]

_KDL_CPU, _KDL_CUDA = 1, 2
_JNP = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "u8": "uint8", "i32": "int32", "i64": "int64"}


def device_of(ctx: _agrl.Context) -> jax.Device:
    """The JAX device of an agrl context's memory (a GPU, or the CPU).
    Vulkan memory is agrl's own: its context has no JAX device."""
    dev = ctx.device
    if dev.startswith("vulkan"):
        raise _agrl.UnsupportedError(f"device_of: JAX cannot use the memory of {dev}")
    if dev == "cpu":
        return jax.devices("cpu")[0]
    index = int(dev.split(":")[1])
    for d in jax.devices():
        if d.platform == "gpu" and getattr(d, "local_hardware_id", d.id) == index:
            return d
    raise _agrl.NoDeviceError(f"device_of: JAX has no GPU of CUDA index {index}")


class _Capsule:
    """A DLPack producer of one capsule, for jax.dlpack.from_dlpack."""

    def __init__(self, cap: Any, device: Tuple[int, int]) -> None:
        self._cap, self._device = cap, device

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return self._cap

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._device


def _importer(device: jax.Device, on_gpu: bool) -> Tuple[Callable[[Any], Any], Optional[int]]:
    """A function of a capsule to a jax.Array on `device`, and the stream
    agrl must order before the arrays are used (None on the CPU)."""
    stream = device.get_stream_for_external_ready_events() if on_gpu else None
    kind = _KDL_CUDA if on_gpu else _KDL_CPU
    try:  # JAX's own import, without its from_dlpack's per-call queries
        from jax._src.lib import _jax as _lib  # type: ignore[attr-defined, unused-ignore]

        fn = _lib.dlpack_managed_tensor_to_buffer
        return (lambda cap: fn(cap, device, stream, None, kind)), stream
    except (ImportError, AttributeError):
        dl = (kind, device.id if on_gpu else 0)
        return (lambda cap: jax.dlpack.from_dlpack(_Capsule(cap, dl))), stream


class _OnJax:
    """What the JAX tables share: their JAX device and the import of their
    batches, set up after construction and after load()."""

    device: jax.Device
    ctx: _agrl.Context

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._after_load()

    def _after_load(self) -> None:
        self.device = device_of(self.ctx)
        self._import, self._stream = _importer(self.device, self.device.platform == "gpu")


class ReplayBuffer(_OnJax, _ReplayBuffer):
    """:class:`agrl.ReplayBuffer` whose batches are JAX arrays (see the
    module's documentation). Same constructor."""

    def _after_load(self) -> None:
        super()._after_load()
        x64 = bool(jax.config.read("jax_enable_x64"))  # type: ignore[no-untyped-call, unused-ignore]
        # without 64-bit types JAX narrows int64 itself: narrowed here instead
        self._narrow = not x64
        self._index_dtype = "i64" if x64 or self.capacity > 2**31 - 1 else "i32"
        self._layout: List[Tuple[str, str, int, int, Tuple[int, ...]]] = self._packed_layout(
            self._index_dtype, self._narrow, True)

    def sample(self, batch_size: int, beta: Optional[float] = None) -> Dict[str, jax.Array]:  # type: ignore[override]
        """``batch_size`` transitions drawn on the device as one array,
        ``{"bytes": (B, row_bytes) uint8}`` (see :meth:`layout`);
        :meth:`unpack` takes it apart."""
        return self._sample_import(batch_size, beta, self._import, self._stream, 2, self._index_dtype, self._narrow)

    def sample_fields(self, batch_size: int, beta: Optional[float] = None) -> Dict[str, jax.Array]:
        """The same draw as one array a field (and "indices", "weights"):
        simpler, one import each."""
        return self._sample_import(batch_size, beta, self._import, self._stream, False, self._index_dtype,
                                   self._narrow)

    def layout(self) -> List[Tuple[str, str, int, int, Tuple[int, ...]]]:
        """[(key, dtype, first byte, width, shape)] of the packed batch: key's
        ``width`` values of ``dtype`` start at byte ``first`` of each row, and
        come back as (B, *shape)."""
        return list(self._layout)

    def unpack(self, packed: Dict[str, jax.Array]) -> Dict[str, jax.Array]:
        """The fields (and "indices", "weights") of a packed batch: slices,
        bit casts and reshapes, for use inside jax.jit."""
        rows = packed["bytes"]
        b = rows.shape[0]
        out: Dict[str, jax.Array] = {}
        for key, dtype, first, width, shape in self._layout:
            dt = jnp.dtype(_JNP[dtype])
            a = rows[:, first : first + width * dt.itemsize]
            if dt.itemsize > 1:
                a = jax.lax.bitcast_convert_type(jnp.reshape(a, (b, width, dt.itemsize)), dt)
            elif dt != jnp.uint8:
                a = jax.lax.bitcast_convert_type(a, dt)
            out[key] = jnp.reshape(a, (b,) + tuple(shape))
        return out


class FrameReplayBuffer(_OnJax, _FrameReplayBuffer):
    """:class:`agrl.FrameReplayBuffer` whose batches are JAX arrays on the
    table's device (see the module's documentation). Same constructor."""

    def sample(  # type: ignore[override]
        self, batch_size: int, dtype: Any = "u8"
    ) -> Dict[str, jax.Array]:
        """``batch_size`` transitions drawn on the device as JAX arrays: "obs",
        "next_obs" (B, stack * channels, height, width), the fields,
        "indices"."""
        batch: Dict[str, jax.Array] = self._sample_import(batch_size, dtype, self._import, self._stream)
        return batch

    def gather(self, indices: Any, dtype: Any = "u8") -> Dict[str, jax.Array]:  # type: ignore[override]
        """The transitions at ``indices`` as JAX arrays."""
        batch: Dict[str, jax.Array] = self._gather_import(indices, dtype, self._import, self._stream)
        return batch
