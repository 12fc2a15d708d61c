"""agrl.ReplayBuffer: named fields over one device table."""

from . import _agrl

_DTYPES = ("f32", "f16", "bf16", "u8", "i32", "i64")


def _field_spec(name, spec):
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


class ReplayBuffer(_agrl._Replay):
    """ReplayBuffer(ctx, capacity, fields, storage="f32", min_size=1,
    prioritized=False, alpha=0.6, beta=0.4, seed=0)

    ``fields`` maps a name to ``(shape, dtype)`` (or just a shape, f32):
    ``{"obs": ((17,), "f32"), "action": ((6,), "f32"), "reward": ((1,), "f32"),
    "next_obs": ((17,), "f32"), "done": ((1,), "f32")}``. The dtype is that of
    the data you hand to :meth:`add` (integers are stored exactly);
    ``storage`` is the table's dtype on the device.

    - ``add(**arrays)``: one transition (each field of its shape) or a batch
      (a first dimension of k), from host arrays or device arrays of the
      context's device (taken device to device).
    - ``sample(batch_size, beta=None)``: a dict of device :class:`agrl.Tensor`
      of shape (B, *shape), f32 (the table's values as gathered), with
      "indices" (B,) int32 and, when prioritized, "weights" (B,) f32.
    - ``update_priorities(indices, priorities)``: host or device arrays.
    - ``len(buf)``: valid transitions.

    ``ctx`` may be a :class:`agrl.Context` or a device string.
    """

    def __init__(self, ctx, capacity, fields, storage="f32", min_size=1, prioritized=False, alpha=0.6, beta=0.4,
                 seed=0):
        if not isinstance(fields, dict) or not fields:
            raise TypeError("ReplayBuffer: fields must be a non-empty dict of name -> (shape, dtype)")
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        self.fields = {}
        specs = []
        for name, spec in fields.items():
            f = _field_spec(name, spec)
            specs.append(f)
            self.fields[name] = (f[1], f[2])
        self.ctx = ctx
        super().__init__(ctx, capacity, specs, storage, min_size, bool(prioritized), float(alpha), float(beta), seed)

    @classmethod
    def load(cls, ctx, path, fields=None, seed=0, beta=0.4):
        """A table saved by :meth:`save` (a file of agrl's replay format), on
        `ctx`'s device, with its capacity, fields, valid transitions, ring
        position and, if it had one, its prioritized sampler. The file keeps
        each field's width, not its shape: pass `fields` (as to the
        constructor) to give the fields their shapes again; otherwise each is
        (width,). `seed` starts the sampling stream."""
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        obj = cls._load(ctx, path, seed, float(beta))
        saved = obj._fields()
        obj.ctx = ctx
        obj.fields = {name: ((width,), dtype) for name, width, dtype in saved}
        if fields is not None:
            if not isinstance(fields, dict) or [_field_spec(n, s)[0] for n, s in fields.items()] != [n for n, _, _ in saved]:
                raise _agrl.ShapeError(f"load: the file's fields are {[n for n, _, _ in saved]}, not {list(fields)}")
            for i, (name, spec) in enumerate(fields.items()):
                shape = _field_spec(name, spec)[1]
                obj._set_shape(i, shape)
                obj.fields[name] = (shape, saved[i][2])
        return obj

    def __repr__(self):
        try:
            n = len(self)
        except _agrl.Error:
            return "<agrl.ReplayBuffer (freed)>"
        kind = "prioritized" if self.prioritized else "uniform"
        return f"<agrl.ReplayBuffer {n}/{self.capacity} {kind} on {self.ctx.device}>"
