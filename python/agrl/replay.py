"""agrl.ReplayBuffer: named fields over one device table."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Self, Tuple, Union

from . import _agrl

_DTYPES = ("f32", "f16", "bf16", "u8", "i32", "i64")

#: A field's spec: a size (``1``), a shape (``(17,)``), or ``(shape, dtype)``.
FieldSpec = Union[int, Tuple[int, ...], Tuple[Union[int, Tuple[int, ...]], Any]]


def _field_spec(name: Any, spec: Any) -> Tuple[str, Tuple[int, ...], Any]:
    if not isinstance(name, str) or not name:
        raise _agrl.InvalidArgError(f"ReplayBuffer: field names must be non-empty strings, not {name!r}")
    if isinstance(spec, int):  # "reward": 1
        return (name, (spec,), "f32")
    if isinstance(spec, tuple) and len(spec) == 2 and not isinstance(spec[0], int):
        shape, dtype = spec
    else:  # "obs": (17,)
        shape, dtype = spec, "f32"
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"ReplayBuffer: field {name!r}: the shape must be a tuple of sizes, not {shape!r}") from None
    for s in shape:
        if not isinstance(s, int) or isinstance(s, bool):
            raise TypeError(f"ReplayBuffer: field {name!r}: sizes must be ints, not {s!r}")
    return (name, shape, dtype)


def _finish_load(
    obj: Any,
    ctx: _agrl.Context,
    fields: Optional[Mapping[str, FieldSpec]],
    specs: Callable[[Mapping[str, FieldSpec]], List[Tuple[str, Tuple[int, ...], Any]]],
) -> None:
    """A loaded table's context and fields: each of shape (width,) as the file
    keeps them, or the shapes of `fields` (the constructor's, read by
    `specs`) when the names agree; then its class's _after_load()."""
    saved = obj._fields()
    obj.ctx = ctx
    obj.fields = {name: ((width,), dtype) for name, width, dtype in saved}
    if fields is not None:
        names = [n for n, _, _ in saved]
        given = specs(fields) if isinstance(fields, Mapping) else None
        if given is None or [g[0] for g in given] != names:
            raise _agrl.ShapeError(f"load: the file's fields are {names}, not {list(fields)}")
        for i, (name, shape, _) in enumerate(given):
            obj._set_shape(i, shape)
            obj.fields[name] = (shape, saved[i][2])
    obj._after_load()


class ReplayBuffer(_agrl._Replay):
    """ReplayBuffer(ctx, capacity, fields, storage="f32", min_size=1,
    prioritized=False, alpha=0.6, beta=0.4, seed=0)

    ``fields`` maps a name to ``(shape, dtype)`` (or just a shape, f32):
    ``{"obs": ((17,), "f32"), "action": ((6,), "f32"), "reward": ((1,), "f32"),
    "next_obs": ((17,), "f32"), "done": ((1,), "f32")}``. The dtype is that of
    the data you hand to :meth:`add`, and the dtype a sampled field comes
    back in; ``storage`` is the table's dtype on the device (f32, f16, bf16,
    u8 or i32). Integer fields are stored exactly: an integer the storage
    cannot hold exactly (above 2^24 in f32 storage, say) is refused by
    ``add``.

    - ``add(**arrays)``: one transition (each field of its shape) or a batch
      (a first dimension of k), from host arrays or device arrays of the
      context's device (torch, CuPy, JAX: taken device to device).
    - ``sample(batch_size, beta=None)``: a dict of :class:`agrl.Tensor` on the
      device, each field ``(B, *shape)`` in its dtype and packed on its own,
      ``"indices"`` (B,) int64 and, when prioritized, ``"weights"`` (B,) f32.
      On a Vulkan context the tensors are host copies.
    - ``sample(batch_size, out=arrays)``: the batch written into your arrays
      (a dict of torch or CuPy tensors, numpy arrays on the CPU: every field,
      optionally "indices" and "weights"), which is returned. The arrays are
      read once and remembered (up to 4 dicts), with a recording of the draw
      and the gather, so a call is one launch; the stream of the arrays'
      framework (torch's or CuPy's current stream, or ``stream=``) is ordered
      before and after it. The fastest way into another framework.
    - ``update_priorities(indices, priorities)``: host or device arrays.
    - ``len(buf)``: valid transitions.

    Every method takes the context's lock: one thread at a time uses the
    table, whatever the threads do. ``ctx`` may be a :class:`agrl.Context`
    or a device string. ``with ReplayBuffer(...) as rb:`` frees it at the end.
    """

    fields: Dict[str, Tuple[Tuple[int, ...], str]]
    ctx: _agrl.Context

    def __init__(
        self,
        ctx: Union[_agrl.Context, str, None],
        capacity: int,
        fields: Mapping[str, FieldSpec],
        storage: Any = "f32",
        min_size: int = 1,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        seed: int = 0,
    ) -> None:
        if not isinstance(fields, Mapping) or not fields:
            raise TypeError("ReplayBuffer: fields must be a non-empty dict of name -> (shape, dtype)")
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        specs: List[Tuple[str, Tuple[int, ...], Any]] = []
        self.fields = {}
        for name, spec in fields.items():
            f = _field_spec(name, spec)
            specs.append(f)
            self.fields[name] = (f[1], f[2])
        self.ctx = ctx
        super().__init__(ctx, capacity, specs, storage, min_size, bool(prioritized), alpha, beta, seed)
        for name, (_, _, dtype) in zip(self.fields, self._fields()):
            self.fields[name] = (self.fields[name][0], dtype)  # the dtype's agrl name

    @classmethod
    def load(
        cls,
        ctx: Union[_agrl.Context, str, None],
        path: Union[str, "os.PathLike[str]"],
        fields: Optional[Mapping[str, FieldSpec]] = None,
        seed: int = 0,
        beta: float = 0.4,
    ) -> Self:
        """A table saved by :meth:`save` (a file of agrl's replay format), on
        `ctx`'s device, with its capacity, fields, valid transitions, ring
        position and, if it had one, its prioritized sampler. The file keeps
        each field's width, not its shape: pass `fields` (as to the
        constructor) to give the fields their shapes again; otherwise each is
        (width,). `seed` starts the sampling stream."""
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        obj = cls._load(ctx, path, seed, beta)
        _finish_load(obj, ctx, fields, lambda given: [_field_spec(n, s) for n, s in given.items()])
        return obj

    def _after_load(self) -> None:
        """Called on a table load() made (subclasses finish their setup)."""

    def __repr__(self) -> str:
        try:
            n = len(self)
        except _agrl.Error:
            return "<agrl.ReplayBuffer (freed)>"
        kind = "prioritized" if self.prioritized else "uniform"
        return f"<agrl.ReplayBuffer {n}/{self.capacity} {kind} on {self.ctx.device}>"
