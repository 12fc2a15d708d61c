"""agrl.torchrl: agrl's replay tables inside TorchRL's replay buffers.

Imported only by those who have TorchRL (``import agrl`` never imports it).
TorchRL builds a replay buffer from three parts, a ``Storage`` (where the
transitions live), a ``Sampler`` (which rows a batch takes) and a ``Writer``
(where the next rows go); this module gives the first two over one agrl
table::

    from agrl.torchrl import AgrlStorage, TensorDictReplayBuffer

    rb = TensorDictReplayBuffer(storage=AgrlStorage(1_000_000, device="cuda"), batch_size=256)
    rb.extend(collector_batch)        # TensorDict, batch_size [N], nested keys
    batch = rb.sample()               # TorchRL's layout, "index" included
    loss_module(batch)["loss"].backward()

- :class:`AgrlStorage` — a TorchRL ``Storage`` whose rows are an agrl table
  on a device (``"cpu"``, ``"cuda"``, ``"cuda:N"`` or an
  :class:`agrl.Context`). Its fields are the leaves of the first TensorDict
  written (every key but ``"index"``: nested keys such as ``("next",
  "observation")`` become the field ``"next.observation"``, and come back
  nested), with their shapes and dtypes, or those given by ``fields=``.
  float32, float16, bfloat16, uint8, int32, int64 and bool (kept as uint8 and
  handed back as bool without a copy) are stored; the table has one storage
  dtype (``storage_dtype``, f32 by default: integers up to 2^24 exactly).
- :class:`AgrlSampler` and :class:`AgrlPrioritizedSampler` — TorchRL
  ``Sampler`` s that draw on the device, in agrl's table: the draw, the gather
  of every field and, prioritized, the importance weights are one agrl call;
  the storage hands the batch it made to the ``get`` that follows. The
  prioritized sampler is a ``torchrl.data.PrioritizedSampler`` (so that
  ``update_tensordict_priority`` and TorchRL's loss modules see it as one)
  whose sum tree is agrl's.
- :class:`TensorDictReplayBuffer` and :class:`TensorDictPrioritizedReplayBuffer`
  — TorchRL's classes of those names (subclasses: ``isinstance`` holds) over
  an :class:`AgrlStorage`, with the samplers above by default. Their
  ``sample()`` takes the one agrl call straight to the TensorDict when the
  buffer has no transform, prefetch or pinned memory, and otherwise goes
  through TorchRL's own path (which gives the same batch).

TorchRL's ``ReplayBuffer``, ``TensorDictReplayBuffer`` and
``TensorDictPrioritizedReplayBuffer`` can also be given an ``AgrlStorage``
and a sampler directly (with ``collate_fn=agrl.torchrl.collate``, as TorchRL
only knows its own storages' collate function); TorchRL's ``RandomSampler``
and ``PrioritizedSampler`` work over an ``AgrlStorage`` too (the draw then
TorchRL's, the gather agrl's: two steps).

Why a Storage and a Sampler rather than a buffer class of agrl's own
--------------------------------------------------------------------
A class that only looked like TorchRL's buffer would have to follow each of
its behaviours by hand (the ``"index"`` and ``"priority_weight"`` of a
batch, ``update_tensordict_priority``'s reductions, ``write_count``,
``state_dict``/``dumps``'s layout, transforms, iteration, ``return_info``,
``empty``...), and no TorchRL code that checks for its classes would take
it. With TorchRL's extension points, TorchRL's own code runs each of these,
and agrl only holds and draws the rows. What the extension points cost is
TorchRL's bookkeeping around ``Sampler.sample`` and ``Storage.get`` (locks,
the info dict, ``_storage_index``), which the direct path of these
classes' ``sample()`` leaves out. Measured on a (busy) 2-core CPU machine,
a sample of 256 MuJoCo-shaped transitions, the three interleaved, fastest
of 15 runs: the bare agrl call 56 us, the direct path 74 us (the nested
TensorDict is made without its constructor's checks), TorchRL's path 117
us, TorchRL's LazyTensorStorage about 400 us (``bench/python/
bench_torchrl.py``'s rows ``agrl``, ``agrl_generic`` and ``torchrl``); a
TorchRL loss module's step takes milliseconds. The batch itself never
leaves the device and is made by one agrl call either way: the
sampler's draw leaves the whole batch with the storage, and ``get`` returns
it when asked for the indices that draw returned (any other indices are
gathered).

Semantics, as TorchRL's (``tests/python/test_torchrl.py`` compares them):
``extend`` returns the indices written; the rows are written in ring order
(TorchRL's round-robin writer; writing at other indices, ``rb[i] = td``,
raises, and a refused write leaves the buffer as it was); a sample is a
TensorDict of batch size [B] on the table's device with every stored key in
its dtype and shape, ``"index"`` int64 and, prioritized,
``"priority_weight"`` float32. A priority p is kept as (p + eps)^alpha, new
rows get the largest priority given so far (counting the 1 that the first
rows written get), and a row is drawn with probability
(p + eps)^alpha / sum. Differences:

- importance weights are (N P(i))^-beta normalized by the largest weight of
  the batch (agrl's); TorchRL normalizes by the table's smallest priority.
  Within a batch the two differ by one factor (>= 1: agrl's weights are the
  larger), so relative weights are the same; Adam and the other scale-free
  optimizers see nearly the same updates.
- agrl draws a prioritized batch by stratified sampling (one draw in each of
  B equal slices of the total mass); TorchRL draws B independent masses.
  Each row's probability is the same; a batch varies less.
- the draws come from agrl's random stream, seeded from ``seed`` (by default
  from torch's generator when the table is made, so that
  ``torch.manual_seed`` makes runs repeat); TorchRL's ``generator=`` and its
  random state in ``state_dict`` do not steer them.
- alpha is fixed when the table is made (agrl keeps p^alpha in its tree);
  setting ``sampler.alpha`` afterwards raises. beta may change at any time.
- ``state_dict()`` holds the table as agrl's replay file (bytes in a uint8
  tensor: rows, ring position, sum tree bit for bit); ``dumps(path)`` writes
  that file under ``path/storage``.
- an agrl table cannot be shared with other processes
  (``ReplayBuffer(shared=True)``, pickling) and its storage has one
  dimension (``ndim=1``).
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import torch
import torch.utils.dlpack

from . import _agrl
from .torch import ReplayBuffer as _Table

from tensordict import TensorDict, TensorDictBase  # type: ignore[import-untyped, import-not-found, unused-ignore]
from torchrl.data import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
    TensorDictPrioritizedReplayBuffer as _TDPRB,
    TensorDictReplayBuffer as _TDRB,
)
from torchrl.data.replay_buffers.samplers import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
    PrioritizedSampler as _PrioritizedSampler,
    Sampler as _Sampler,
)
from torchrl.data.replay_buffers.storages import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
    Storage as _Storage,
)
from torchrl.data.replay_buffers.writers import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
    RoundRobinWriter as _RoundRobinWriter,
)

__all__ = [
    "AgrlStorage",
    "AgrlSampler",
    "AgrlPrioritizedSampler",
    "TensorDictReplayBuffer",
    "TensorDictPrioritizedReplayBuffer",
    "collate",
]

#: A TensorDict key: a string or a tuple of strings (nested).
NestedKey = Union[str, Tuple[str, ...]]
#: A device: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, a ``torch.device`` or an agrl context.
DeviceLike = Union[str, torch.device, _agrl.Context]
#: Explicit fields: key -> (shape, torch dtype), or a TensorDict whose leaves
#: (past its batch dimensions) give them.
FieldsLike = Union[Mapping[NestedKey, Tuple[Sequence[int], torch.dtype]], Any]

_EMPTY = "Cannot sample from an empty storage."
_FILE = "table.agrl"
_META = "agrl_storage.json"

# torch dtype -> agrl field dtype (bool is kept as u8 and viewed back)
_AGRL_DTYPE: Dict[torch.dtype, str] = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.uint8: "u8",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "u8",
}
_DTYPE_NAMES: Dict[str, torch.dtype] = {str(d).replace("torch.", ""): d for d in _AGRL_DTYPE}


def collate(x: Any) -> Any:
    """The collate function of an :class:`AgrlStorage` (the batch as it is):
    pass ``collate_fn=agrl.torchrl.collate`` to TorchRL's own buffer classes."""
    return x


class _Field(NamedTuple):
    key: Tuple[str, ...]  # the TensorDict key, as a tuple
    name: str  # the agrl field
    shape: Tuple[int, ...]  # one transition's
    dtype: torch.dtype  # as written and sampled


def _key(key: NestedKey) -> Tuple[str, ...]:
    k = (key,) if isinstance(key, str) else tuple(key)
    if not k or not all(isinstance(p, str) and p for p in k):
        raise TypeError(f"AgrlStorage: a key must be a non-empty string or tuple of strings, not {key!r}")
    return k


def _field(key: NestedKey, shape: Sequence[int], dtype: torch.dtype) -> _Field:
    k = _key(key)
    if dtype not in _AGRL_DTYPE:
        raise TypeError(
            f"AgrlStorage: {k!r} is {dtype}; agrl stores float32, float16, bfloat16, uint8, int32, int64 "
            "and bool (cast the data, or leave the key out with fields=)")
    return _Field(k, ".".join(k), tuple(int(s) for s in shape), dtype)


def _layout_of(data: Any, batch_dims: int) -> List[_Field]:
    """The fields of a TensorDict's leaves (all but "index"), shapes past
    its first `batch_dims` dimensions."""
    out = []
    for key, value in data.items(include_nested=True, leaves_only=True):
        k = _key(key)
        if k == ("index",):
            continue
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"AgrlStorage: {k!r} is a {type(value).__name__}, not a tensor: agrl stores tensors only "
                "(leave it out with fields=)")
        out.append(_field(k, value.shape[batch_dims:], value.dtype))
    if not out:
        raise ValueError("AgrlStorage: the TensorDict has no tensor to store")
    return out


def _layout_from(fields: Any) -> List[_Field]:
    if isinstance(fields, TensorDictBase):
        return _layout_of(fields, fields.batch_dims)
    if not isinstance(fields, Mapping) or not fields:
        raise TypeError("AgrlStorage: fields must be a TensorDict or a non-empty dict of key -> (shape, dtype)")
    out = []
    for key, spec in fields.items():
        if not (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], torch.dtype)):
            raise TypeError(f"AgrlStorage: fields[{key!r}] must be (shape, torch dtype), not {spec!r}")
        out.append(_field(key, spec[0], spec[1]))
    return out


def _check_names(layout: List[_Field]) -> None:
    names = [f.name for f in layout]
    if len(set(names)) != len(names):
        raise ValueError(f"AgrlStorage: two keys give the same field name among {names}")


def _new_td(source: Dict[str, Any], batch: int, device: torch.device) -> Any:
    """A TensorDict of nested dicts of tensors already on `device`, without
    the constructor's checks (they cost more than the sample)."""
    new = getattr(TensorDict, "_new_unsafe", None)
    if new is not None:
        return new(source=source, batch_size=torch.Size([batch]), device=device)
    return TensorDict(source, batch_size=[batch], device=device)


def _is_int(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    if isinstance(x, torch.Tensor):
        return x.ndim == 0 and not x.is_floating_point() and x.dtype is not torch.bool
    return type(x).__module__ == "numpy" and getattr(x, "ndim", None) == 0 and x.dtype.kind in "iu"


class AgrlStorage(_Storage):  # type: ignore[misc]
    """AgrlStorage(max_size, *, device="cpu", fields=None, storage_dtype="f32", seed=None)

    A TorchRL ``Storage`` of ``max_size`` transitions in an agrl table on
    ``device``. The table is made at the first write, its fields from that
    TensorDict's leaves (every key but ``"index"``), or from ``fields`` (key
    -> (shape, torch dtype), or a TensorDict whose leaves past its batch
    dimensions give them). Keys a later write has beyond the table's are
    left out, as a locked TorchRL storage does. Prioritized when the buffer's sampler is an
    :class:`AgrlPrioritizedSampler` (its alpha). ``seed``: agrl's random
    stream for the draws (None: taken from torch's generator when the table
    is made). See the module's documentation."""

    ndim = 1

    def __init__(
        self,
        max_size: int,
        *,
        device: DeviceLike = "cpu",
        fields: Optional[FieldsLike] = None,
        storage_dtype: str = "f32",
        seed: Optional[int] = None,
    ) -> None:
        if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 1:
            raise ValueError(f"AgrlStorage: max_size must be a positive int, not {max_size!r}")
        super().__init__(max_size)
        if isinstance(device, _agrl.Context):
            self._ctx = device
        else:
            dev = torch.device(device)
            if dev.type == "cuda" and dev.index is None:
                dev = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
            self._ctx = _agrl.Context(str(dev))
        from .torch import device_of

        self.device: torch.device = device_of(self._ctx)
        self.storage_dtype = storage_dtype
        self._seed = seed
        self._layout: Optional[List[_Field]] = None
        if fields is not None:
            self._layout = _layout_from(fields)
            _check_names(self._layout)
        self._table: Optional[_Table] = None
        self._stash: Optional[Tuple[torch.Tensor, Any]] = None

    # ---- the table ----

    @property
    def table(self) -> Optional[_Table]:
        """The agrl table (an :class:`agrl.torch.ReplayBuffer`), None until the first write."""
        return self._table

    @property
    def fields(self) -> Optional[Dict[Tuple[str, ...], Tuple[Tuple[int, ...], torch.dtype]]]:
        """key -> (shape, dtype) of the stored transitions (None before the first write)."""
        if self._layout is None:
            return None
        return {f.key: (f.shape, f.dtype) for f in self._layout}

    def _agrl_sampler(self) -> Optional["AgrlPrioritizedSampler"]:
        for ent in self._attached_entities:
            for attr in ("_sampler", "_prioritized_sampler"):
                s = getattr(ent, attr, None)
                if isinstance(s, AgrlPrioritizedSampler):
                    return s
        return None

    def _check_writers(self) -> None:
        for ent in self._attached_entities:
            w = getattr(ent, "_writer", None)
            if w is not None and not isinstance(w, _RoundRobinWriter):
                raise NotImplementedError(
                    f"AgrlStorage: agrl tables are written in ring order; {type(w).__name__} writes elsewhere "
                    "(use TorchRL's default round-robin writer)")

    def _spec(self) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        assert self._layout is not None
        return {f.name: (f.shape, _AGRL_DTYPE[f.dtype]) for f in self._layout}

    def _make_table(self) -> _Table:
        self._check_writers()
        sampler = self._agrl_sampler()
        seed = self._seed if self._seed is not None else int(torch.randint(0, 2**62, ()).item())
        kw: Dict[str, Any] = {}
        if sampler is not None:
            kw = {"prioritized": True, "alpha": float(sampler.alpha), "beta": float(sampler.beta)}
            sampler._bind(self)
        self._table = _Table(self._ctx, self.max_size, self._spec(), storage=self.storage_dtype, seed=seed, **kw)
        return self._table

    def _require_table(self) -> _Table:
        if self._table is None:
            raise RuntimeError(_EMPTY)
        return self._table

    # ---- writes ----

    def _column(self, data: Any, f: _Field, rows: Optional[int]) -> torch.Tensor:
        try:
            t = data.get(f.key)
        except KeyError:
            t = None
        if t is None:
            raise KeyError(f"AgrlStorage: the TensorDict has no {f.key!r} (the table's keys: "
                           f"{[x.key for x in self._layout or []]})")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"AgrlStorage: {f.key!r} is a {type(t).__name__}, not a tensor")
        want = f.shape if rows is None else (rows, *f.shape)
        if tuple(t.shape) != want:
            raise ValueError(f"AgrlStorage: {f.key!r} has shape {tuple(t.shape)}, the table takes {want}")
        if t.dtype != f.dtype:
            t = t.to(f.dtype)
        if t.device != self.device and not (t.device.type == "cpu"):
            t = t.to(self.device)  # host data is uploaded by agrl itself
        t = t.contiguous()
        return t.view(torch.uint8) if f.dtype is torch.bool else t

    def set(self, cursor: Any, data: Any, *, set_cursor: bool = True) -> None:
        """Writes `data` (a TensorDict: one transition when `cursor` is an
        int, else a batch of ``len(cursor)``) at the ring position, which
        `cursor` must be (TorchRL's round-robin writer)."""
        if not set_cursor:
            raise NotImplementedError(
                "AgrlStorage: rows are written in ring order only (extend / add); writing at given indices "
                "(rb[i] = ..., storage[i] = ...) is not supported")
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"AgrlStorage: writes take a TensorDict, not {type(data).__name__}")
        single = _is_int(cursor)
        if single:
            rows = None
        elif isinstance(cursor, slice):
            rows = len(range(*cursor.indices(self.max_size)))
        else:
            cursor = torch.as_tensor(cursor)
            rows = int(cursor.numel())
        if self._layout is None:
            self._layout = _layout_of(data, 0 if single else 1)
            _check_names(self._layout)
        if rows == 0:
            return
        table = self._table if self._table is not None else self._make_table()
        at = table.position
        first = None
        if single:
            first = int(cursor)
        elif isinstance(cursor, slice):
            first = cursor.indices(self.max_size)[0]
        elif cursor.device.type == "cpu":  # a device index is not read back (that would wait for the device)
            first = int(cursor.reshape(-1)[0])
        if first is not None and first != at:
            raise NotImplementedError(
                f"AgrlStorage: the write starts at row {first}, the table's ring is at {at}: agrl tables are "
                "written in ring order only (was the writer's cursor moved?)")
        layout = self._layout
        assert layout is not None
        try:
            cols = {f.name: self._column(data, f, rows) for f in layout}
            if len({t.device for t in cols.values()}) > 1:  # agrl takes all from the host or all from the device
                cols = {k: t.to(self.device) for k, t in cols.items()}
            table.add(cols)
        except Exception:
            self._rewind_writers(1 if rows is None else rows)
            raise

    def _rewind_writers(self, rows: int) -> None:
        """A refused write: TorchRL's writer moved its cursor before asking,
        put it back where the table's ring is, so that the buffer stays as
        it was."""
        at = self._table.position if self._table is not None else 0
        for ent in self._attached_entities:
            w = getattr(ent, "_writer", None)
            if isinstance(w, _RoundRobinWriter):
                w._cursor = at
                w._write_count = max(0, w._write_count - rows)

    # ---- reads ----

    def _build(self, flat: Dict[str, torch.Tensor], batch: int, index: torch.Tensor,
               weight: Optional[torch.Tensor]) -> Any:
        assert self._layout is not None
        root: Dict[str, Any] = {}
        for f in self._layout:
            d = root
            for part in f.key[:-1]:
                d = d.setdefault(part, {})
            t = flat[f.name]
            d[f.key[-1]] = t.view(torch.bool) if f.dtype is torch.bool else t
        root["index"] = index
        if weight is not None:
            root["priority_weight"] = weight
        return _new_td(root, batch, self.device)

    def _draw(self, batch_size: int, beta: Optional[float],
              weights: bool) -> Tuple[Any, torch.Tensor, Optional[torch.Tensor]]:
        """One agrl call: (the batch as a TensorDict, its indices, its
        importance weights or None); ``weights`` puts them in the TensorDict
        as "priority_weight"."""
        table = self._table
        if table is None or len(table) == 0:
            raise RuntimeError(_EMPTY)
        b = table.sample(batch_size, beta)
        assert isinstance(b, dict)
        w = b.get("weights")
        return self._build(b, batch_size, b["indices"], w if weights else None), b["indices"], w

    def _stash_batch(self, index: torch.Tensor, td: Any) -> None:
        self._stash = (index, td)

    def _index(self, index: Any, n: int) -> Tuple[torch.Tensor, bool]:
        """(int64 indices, whether the result drops the batch dimension)."""
        if _is_int(index):
            i = int(index)
            if not -n <= i < n:
                raise IndexError(f"AgrlStorage: index {i} is outside the {n} stored transitions")
            return torch.tensor([i % n], dtype=torch.int64), True
        if isinstance(index, slice):
            return torch.arange(n, dtype=torch.int64)[index], False
        if isinstance(index, range):
            index = list(index)
        t = torch.as_tensor(index)
        if t.dtype is torch.bool or t.is_floating_point():
            raise TypeError(f"AgrlStorage: indices must be integers, not {t.dtype}")
        t = t.reshape(-1).to(torch.int64)
        if t.device.type == "cpu":
            if t.numel() and (t.min() < -n or t.max() >= n):
                raise IndexError(f"AgrlStorage: an index is outside the {n} stored transitions")
            return torch.where(t < 0, t + n, t), False
        return torch.where(t < 0, t + n, t), False  # device indices: agrl clamps them to the table

    def get(self, index: Any) -> Any:
        """The transitions at `index` (an int, a slice, a list, a numpy or
        torch array, host or device) as a TensorDict with "index"; the batch
        the sampler just drew when `index` is its indices."""
        stash = self._stash
        if stash is not None:
            self._stash = None
            if index is stash[0]:
                return stash[1]
        n = len(self)
        if n == 0 or self._table is None or self._layout is None:
            raise RuntimeError("AgrlStorage: nothing is stored yet")
        idx, single = self._index(index, n)
        if idx.numel() == 0:
            empty = {f.name: torch.empty((0, *f.shape), dtype=torch.uint8 if f.dtype is torch.bool else f.dtype,
                                         device=self.device) for f in self._layout}
            return self._build(empty, 0, torch.empty(0, dtype=torch.int64, device=self.device), None)
        raw = self._table.gather(idx)
        flat = {k: torch.utils.dlpack.from_dlpack(v) for k, v in raw.items()}
        td = self._build(flat, int(idx.numel()), flat["indices"], None)
        return td[0] if single else td

    def __len__(self) -> int:
        return 0 if self._table is None else len(self._table)

    def contains(self, item: Any) -> Any:
        n = len(self)
        if _is_int(item):
            return -n <= int(item) < n
        t = torch.as_tensor(item)
        return (t >= -n) & (t < n)

    # ---- state ----

    def _layout_meta(self) -> Optional[List[List[Any]]]:
        if self._layout is None:
            return None
        return [[list(f.key), list(f.shape), str(f.dtype).replace("torch.", "")] for f in self._layout]

    def _set_layout_meta(self, meta: Optional[Sequence[Sequence[Any]]]) -> None:
        if meta is None:
            return
        self._layout = [_field(tuple(k), s, _DTYPE_NAMES[d]) for k, s, d in meta]

    def _load_file(self, path: Union[str, "os.PathLike[str]"]) -> None:
        if self._layout is None:
            raise RuntimeError("AgrlStorage: the saved state has no fields")
        sampler = self._agrl_sampler()
        seed = self._seed if self._seed is not None else int(torch.randint(0, 2**62, ()).item())
        beta = float(sampler.beta) if sampler is not None else 0.4
        table = _Table.load(self._ctx, path, fields=self._spec(), seed=seed, beta=beta)
        assert isinstance(table, _Table)
        if table.capacity != self.max_size:
            cap = table.capacity
            table.free()
            raise ValueError(f"AgrlStorage: the saved table holds {cap} transitions, this storage {self.max_size}")
        if sampler is not None:
            if not table.prioritized:
                table.free()
                raise ValueError("AgrlStorage: the saved table is not prioritized, the buffer's sampler is")
            sampler._bind(self)
        self._free_table()
        self._table = table

    def _free_table(self) -> None:
        self._stash = None
        if self._table is not None:
            self._table.free()
            self._table = None

    def state_dict(self) -> Dict[str, Any]:
        """The fields, the storage dtype and, once written, the table as
        agrl's replay file (bytes in a uint8 tensor)."""
        sd: Dict[str, Any] = {"max_size": self.max_size, "storage_dtype": self.storage_dtype,
                              "layout": self._layout_meta(), "table": None}
        if self._table is not None:
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, _FILE)
                self._table.save(p)
                with open(p, "rb") as fh:
                    sd["table"] = torch.frombuffer(bytearray(fh.read()), dtype=torch.uint8)
        return sd

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        if int(state_dict["max_size"]) != self.max_size:
            raise ValueError(f"AgrlStorage: the state holds {state_dict['max_size']} transitions, "
                             f"this storage {self.max_size}")
        self.storage_dtype = state_dict["storage_dtype"]
        self._set_layout_meta(state_dict["layout"])
        blob = state_dict["table"]
        if blob is None:
            self._free_table()
            return
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, _FILE)
            with open(p, "wb") as fh:
                fh.write(blob.cpu().numpy().tobytes())
            self._load_file(p)

    def dumps(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the table (agrl's replay file) and its fields under `path`."""
        p = Path(path).absolute()
        p.mkdir(parents=True, exist_ok=True)
        if self._table is not None:
            self._table.save(p / _FILE)
        elif (p / _FILE).exists():
            (p / _FILE).unlink()
        with open(p / _META, "w") as fh:
            json.dump({"max_size": self.max_size, "storage_dtype": self.storage_dtype,
                       "layout": self._layout_meta()}, fh)

    def loads(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Reads what :meth:`dumps` wrote under `path`."""
        p = Path(path).absolute()
        with open(p / _META) as fh:
            meta = json.load(fh)
        if int(meta["max_size"]) != self.max_size:
            raise ValueError(f"AgrlStorage: the saved storage holds {meta['max_size']} transitions, "
                             f"this one {self.max_size}")
        self.storage_dtype = meta["storage_dtype"]
        self._set_layout_meta(meta["layout"])
        if (p / _FILE).exists():
            self._load_file(p / _FILE)
        else:
            self._free_table()

    def _empty(self) -> None:
        self._free_table()  # the next write makes a new table with the same fields

    def __getstate__(self) -> Dict[str, Any]:
        raise RuntimeError("AgrlStorage: an agrl table cannot be pickled or shared with another process "
                           "(use state_dict() or dumps())")

    def __repr__(self) -> str:
        kind = "no table yet" if self._table is None else ("prioritized" if self._table.prioritized else "uniform")
        return f"AgrlStorage(max_size={self.max_size}, len={len(self)}, device={self.device}, {kind})"


def _agrl_storage(storage: Any, who: str) -> AgrlStorage:
    if not isinstance(storage, AgrlStorage):
        raise TypeError(f"{who} draws from an AgrlStorage, not {type(storage).__name__}")
    return storage


class AgrlSampler(_Sampler):  # type: ignore[misc]
    """Uniform draws with replacement, as TorchRL's ``RandomSampler``, made
    on the device by the :class:`AgrlStorage`'s table in the same call as
    the gather of the batch."""

    def sample(self, storage: Any, batch_size: int) -> Tuple[torch.Tensor, Dict[str, Any]]:
        st = _agrl_storage(storage, "AgrlSampler")
        if st.table is not None and st.table.prioritized:
            raise RuntimeError("AgrlSampler: the storage's table is prioritized; use AgrlPrioritizedSampler")
        td, index, _ = st._draw(batch_size, None, False)
        st._stash_batch(index, td)
        return index, {}

    def _empty(self) -> None:
        pass

    def dumps(self, path: Any) -> None:
        pass

    def loads(self, path: Any) -> None:
        pass

    def state_dict(self) -> Dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        pass


class AgrlPrioritizedSampler(_PrioritizedSampler):  # type: ignore[misc]
    """AgrlPrioritizedSampler(max_capacity, alpha, beta, eps=1e-8, reduction="max")

    TorchRL's ``PrioritizedSampler`` over an :class:`AgrlStorage`: the sum
    tree is the agrl table's (made prioritized with this alpha), the draw,
    the gather and the weights one call on the device. Priorities p are kept
    as (p + eps)^alpha; rows written get the largest priority given so far,
    counting the 1 the first rows written get, as TorchRL's. alpha and beta
    in [0, 1]."""

    # TorchRL's property: (the largest priority given, as a tensor, None) or None
    _max_priority: Any

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        reduction: str = "max",
        max_priority_within_buffer: bool = False,
        device: Any = None,
    ) -> None:
        # TorchRL's __init__ would make its own sum and min trees: not called.
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"AgrlPrioritizedSampler: alpha must be in [0, 1], not {alpha}")
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"AgrlPrioritizedSampler: beta must be in [0, 1], not {beta}")
        if not eps > 0.0:
            raise ValueError(f"AgrlPrioritizedSampler: eps must be positive, not {eps}")
        if max_priority_within_buffer:
            raise NotImplementedError("AgrlPrioritizedSampler: max_priority_within_buffer=True is not supported")
        if dtype not in (torch.float, torch.float64):
            raise NotImplementedError(f"AgrlPrioritizedSampler: dtype {dtype}")
        self._max_capacity = int(max_capacity)
        self._alpha = float(alpha)
        self._beta = float(beta)
        self._eps = float(eps)
        self.dtype = dtype
        self.reduction = reduction
        self._max_priority_within_buffer = False
        self._warned_alpha_change = False
        self._device = None
        self._storage_ref: Optional[AgrlStorage] = None
        self._max_priority = None

    def _bind(self, storage: AgrlStorage) -> None:
        self._storage_ref = storage

    def _init(self) -> None:
        pass

    def _empty(self) -> None:
        self._max_priority = None

    @property
    def device(self) -> torch.device:
        st = self._storage_ref
        return st.device if st is not None else torch.device("cpu")

    @property
    def alpha(self) -> float:
        return self._alpha

    @alpha.setter
    def alpha(self, value: float) -> None:
        st = self._storage_ref
        if value != self._alpha and st is not None and st.table is not None:
            raise NotImplementedError(
                "AgrlPrioritizedSampler: alpha is fixed once the table is made (agrl keeps p^alpha in its tree)")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"AgrlPrioritizedSampler: alpha must be in [0, 1], not {value}")
        self._alpha = float(value)

    @property
    def beta(self) -> float:
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"AgrlPrioritizedSampler: beta must be in [0, 1], not {value}")
        self._beta = float(value)

    def _maybe_init_from_storage(self, storage: Any) -> None:
        if isinstance(storage, AgrlStorage):
            self._storage_ref = storage

    def _maybe_erase_max_priority(self, index: Any) -> None:
        pass

    def _table(self, storage: Any) -> _Table:
        st = storage if storage is not None else self._storage_ref
        st = _agrl_storage(st, "AgrlPrioritizedSampler")
        self._storage_ref = st
        table = st._require_table()
        if not table.prioritized:
            raise RuntimeError("AgrlPrioritizedSampler: the storage's table was made uniform (made before the "
                               "sampler was attached to its buffer?)")
        return table

    def sample(self, storage: Any, batch_size: int) -> Tuple[torch.Tensor, Dict[str, Any]]:
        st = _agrl_storage(storage, "AgrlPrioritizedSampler")
        self._table(st)
        td, index, w = st._draw(batch_size, self._beta, False)
        st._stash_batch(index, td)
        return index, {"priority_weight": w}

    @torch.no_grad()
    def update_priority(self, index: Any, priority: Any, *, storage: Any = None) -> None:
        """Sets the priorities of the rows at `index` (p, kept as (p + eps)^alpha);
        indices below 0 are skipped (TorchRL's writers mark rows so)."""
        table = self._table(storage)
        dev = self.device
        index = torch.as_tensor(index, dtype=torch.long, device=dev)
        priority = torch.as_tensor(priority, device=dev).detach()
        if index.ndim > 1:
            raise NotImplementedError("AgrlPrioritizedSampler: the storage has one dimension (index.ndim > 1)")
        index = index.reshape(-1)
        if priority.numel() > 1 and priority.shape != index.shape:
            try:
                priority = priority.reshape(index.shape)
            except RuntimeError as err:
                raise RuntimeError(
                    f"priority should be a number or as many as the indices: got priority of shape "
                    f"{tuple(priority.shape)} and index {tuple(index.shape)}") from err
        else:
            priority = priority.reshape(-1).expand(index.shape)
        if index.numel() == 0:
            return
        priority = priority.to(torch.float32)
        valid = index >= 0
        if dev.type == "cpu":
            if not bool(valid.all()):
                index, priority = index[valid], priority[valid]
                if index.numel() == 0:
                    return
            top = priority.max()
        else:  # agrl skips indices outside the table on the device; no read back
            top = torch.where(valid, priority, torch.zeros((), device=dev)).max()
        cur = self._max_priority[0]
        top = top if cur is None else torch.maximum(torch.as_tensor(cur, device=dev), top)
        self._max_priority = (top, None)
        table.update_priorities(index.contiguous(), (priority + self._eps).contiguous())

    def mark_update(self, index: Any, *, storage: Any = None) -> None:
        # Rows just written. TorchRL sets them to its default priority, the
        # largest given since the first write (which it sets to 1, so 1 is
        # always among them), as (p + eps)^alpha; agrl has already given
        # them max(1, largest p + eps)^alpha, the same value (but for
        # (1 + eps)^alpha against 1 before any update): only the bookkeeping
        # of the largest priority is left, with no call on the table.
        if self._max_priority[0] is None:
            self._max_priority = (torch.ones((), device=self.device), None)

    def state_dict(self) -> Dict[str, Any]:
        mp = self._max_priority[0]
        return {"_alpha": self._alpha, "_beta": self._beta, "_eps": self._eps,
                "_max_priority": None if mp is None else float(mp)}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self._alpha = float(state_dict["_alpha"])
        self._beta = float(state_dict["_beta"])
        self._eps = float(state_dict["_eps"])
        mp = state_dict["_max_priority"]
        if isinstance(mp, tuple):
            mp = mp[0]
        self._max_priority = None if mp is None else (torch.tensor(float(mp), device=self.device), None)

    def dumps(self, path: Union[str, "os.PathLike[str]"]) -> None:
        p = Path(path).absolute()
        p.mkdir(parents=True, exist_ok=True)
        with open(p / "sampler_metadata.json", "w") as fh:
            json.dump({**self.state_dict(), "_max_capacity": self._max_capacity}, fh)

    def loads(self, path: Union[str, "os.PathLike[str]"]) -> None:
        with open(Path(path).absolute() / "sampler_metadata.json") as fh:
            meta = json.load(fh)
        if int(meta["_max_capacity"]) != self._max_capacity:
            raise RuntimeError(f"AgrlPrioritizedSampler: saved for {meta['_max_capacity']} rows, "
                               f"this one holds {self._max_capacity}")
        self.load_state_dict(meta)


class _DirectSample:
    """sample() straight from the agrl call to the TensorDict when TorchRL's
    path would add nothing to it (no transform, prefetch or pinned memory)."""

    _storage: Any
    _sampler: Any
    _batch_size: Optional[int]

    def _direct(self) -> bool:
        if not getattr(self, "_initialized", False) or self._prefetch or self._pin_memory:  # type: ignore[attr-defined]
            return False
        tr = self._transform  # type: ignore[attr-defined]
        if tr is not None and len(tr):
            return False
        return isinstance(self._storage, AgrlStorage) and type(self._sampler) in (AgrlSampler, AgrlPrioritizedSampler)

    def sample(self, batch_size: Optional[int] = None, return_info: bool = False,
               include_info: Optional[bool] = None) -> Any:
        if include_info is not None or not self._direct():
            return super().sample(batch_size, return_info=return_info, include_info=include_info)  # type: ignore[misc]
        if batch_size is None:
            batch_size = self._batch_size
            if batch_size is None:
                raise RuntimeError("batch_size not specified: give it to the buffer's constructor or to sample()")
        elif self._batch_size is not None and batch_size != self._batch_size:
            warnings.warn(f"sample({batch_size}) on a buffer made with batch_size={self._batch_size}: "
                          f"the batch size given to sample() prevails", stacklevel=2)
        sampler = self._sampler
        prioritized = isinstance(sampler, AgrlPrioritizedSampler)
        if prioritized:
            sampler._table(self._storage)
        with self._replay_lock, self._write_lock:  # type: ignore[attr-defined]
            td, index, w = self._storage._draw(batch_size, sampler._beta if prioritized else None, prioritized)
        if return_info:
            info: Dict[str, Any] = {"index": index}
            if prioritized:
                info["priority_weight"] = w
            return td, info
        return td


def _kwargs(kwargs: Dict[str, Any], storage: Any) -> Dict[str, Any]:
    if not isinstance(storage, AgrlStorage):
        raise TypeError(f"storage must be an AgrlStorage, not {type(storage).__name__}")
    kwargs.setdefault("collate_fn", collate)
    return kwargs


class TensorDictReplayBuffer(_DirectSample, _TDRB):  # type: ignore[misc]
    """TorchRL's ``TensorDictReplayBuffer`` over an :class:`AgrlStorage`
    (``storage=``, required), drawing with :class:`AgrlSampler` unless
    ``sampler=`` says otherwise. Every other argument is TorchRL's."""

    def __init__(self, *, storage: AgrlStorage, sampler: Any = None, **kwargs: Any) -> None:
        super().__init__(storage=storage, sampler=sampler if sampler is not None else AgrlSampler(),
                         **_kwargs(kwargs, storage))


class TensorDictPrioritizedReplayBuffer(_DirectSample, _TDPRB):  # type: ignore[misc]
    """TorchRL's ``TensorDictPrioritizedReplayBuffer`` over an
    :class:`AgrlStorage` (``storage=``, required) with an
    :class:`AgrlPrioritizedSampler` of ``alpha``, ``beta`` and ``eps``.
    ``priority_key`` (``"td_error"``), ``reduction`` and the other
    arguments are TorchRL's; ``sync=False`` and ``sampler_device`` are not
    taken."""

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        priority_key: NestedKey = "td_error",
        eps: float = 1e-8,
        storage: AgrlStorage,
        reduction: str = "max",
        **kwargs: Any,
    ) -> None:
        for bad in ("sync", "sampler_device", "sampler"):
            if bad in kwargs and not (bad == "sync" and kwargs[bad] is True):
                raise TypeError(f"TensorDictPrioritizedReplayBuffer over agrl does not take {bad}=")
        kwargs.pop("sync", None)
        _kwargs(kwargs, storage)
        sampler = AgrlPrioritizedSampler(storage.max_size, alpha, beta, eps, reduction=reduction)
        # TorchRL's own __init__ makes its PrioritizedSampler: set what it sets, with ours
        self._sync = True
        self._prioritized_sampler = None
        self._prioritized_sampler_write_count = 0
        _TDRB.__init__(self, priority_key=priority_key, storage=storage, sampler=sampler, **kwargs)
