"""The state of a Gymnasium environment as bytes, for learn()'s checkpoints:
what a resumed run needs to continue the same episodes for the same
actions, bit for bit, on environments that hold no get_state/set_state of
their own.

Read from each layer of the environment (its wrappers, then the base
environment; a SyncVectorEnv and each of its copies): every attribute that
is a number, a flag, None or a NumPy array (TimeLimit's step count,
CartPole's state, SyncVectorEnv's autoreset flags), the base environment's
random generator, and a MuJoCo environment's physics (mj_getState of the
integration state: positions, velocities, actuator activations, time, the
solver's warm start). Other attributes (spaces, specs, the MuJoCo model,
renderers) are taken to stay as the environment was made. An attribute
that a layer changes while it runs and that is none of these (an object,
a list) is not read, and the resumed run may then differ: the promise is
made for Gymnasium's MuJoCo and classic-control tasks under its own
wrappers, and an environment with a layer of any other class (whose
state may live in an emulator or an object: ale-py's Atari) is refused.
An AsyncVectorEnv's copies live in other processes, and have no
state readable here."""

from __future__ import annotations

import base64
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import _agrl

#: (get_state() -> bytes, set_state(bytes))
StateIO = Tuple[Callable[[], bytes], Callable[[bytes], None]]

_MAGIC = "agrl.gym_state/1"
_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
_PLAIN = (type(None), bool, int, float, np.bool_, np.integer, np.floating)


def _layers(env: Any) -> List[Any]:
    """env and every environment it wraps, outermost first."""
    out = [env]
    while True:
        inner = vars(out[-1]).get("env")
        if inner is None or inner is out[-1]:
            return out
        out.append(inner)


def _mujoco(layer: Any) -> Optional[Tuple[Any, Any, Any]]:
    """(mujoco, model, data) of a MuJoCo environment, else None."""
    d = vars(layer)
    model, data = d.get("model"), d.get("data")
    if model is None or data is None or type(model).__name__ != "MjModel" or type(data).__name__ != "MjData":
        return None
    import mujoco  # type: ignore[import-untyped]  # only for MuJoCo's environments
    return mujoco, model, data


def _enc_array(a: Any) -> List[Any]:
    a = np.ascontiguousarray(a)
    return [a.dtype.str, list(a.shape), base64.b64encode(a.tobytes()).decode("ascii")]


def _dec_array(v: Any) -> Any:
    dtype, shape, raw = v
    return np.frombuffer(base64.b64decode(raw), dtype=np.dtype(dtype)).reshape(shape).copy()


def _is_array_attr(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype.kind in "biuf"


def _layer_state(layer: Any) -> Dict[str, Any]:
    d = vars(layer)
    st: Dict[str, Any] = {"type": type(layer).__qualname__, "plain": {}, "arrays": {}}
    if _own(layer):  # an environment that reads its own state (agrl's)
        st["own"] = layer.get_state().hex()
        return st
    for k, v in d.items():
        if isinstance(v, _PLAIN):
            st["plain"][k] = v.item() if isinstance(v, np.generic) else v
        elif _is_array_attr(v):
            st["arrays"][k] = _enc_array(v)
    rng = d.get("_np_random")
    if isinstance(rng, np.random.Generator):
        st["rng"] = rng.bit_generator.state
    mj = _mujoco(layer)
    if mj is not None:
        mujoco, model, data = mj
        what = mujoco.mjtState.mjSTATE_INTEGRATION
        buf = np.empty(mujoco.mj_stateSize(model, what), np.float64)
        mujoco.mj_getState(model, data, buf, what)
        st["mujoco"] = _enc_array(buf)
    return st


def _check_layer(layer: Any, st: Any, where: str) -> None:
    """Raises InvalidArgError when st is not a state of this layer's kind."""
    if not isinstance(st, dict) or st.get("type") != type(layer).__qualname__:
        raise _agrl.InvalidArgError(f"set_state: {where} is a {type(layer).__qualname__}, the state's "
                                    f"{st.get('type') if isinstance(st, dict) else None}")
    if ("own" in st) != _own(layer) or ("own" in st and not isinstance(st["own"], str)):
        raise _agrl.InvalidArgError(f"set_state: {where}: a state of an environment of another kind")
    if not isinstance(st.get("plain"), dict) or not isinstance(st.get("arrays"), dict):
        raise _agrl.InvalidArgError(f"set_state: {where}: a damaged state")
    try:
        for v in st["arrays"].values():
            _dec_array(v)
        if "mujoco" in st:
            _dec_array(st["mujoco"])
    except (TypeError, ValueError):
        raise _agrl.InvalidArgError(f"set_state: {where}: a damaged array in the state") from None
    if "rng" in st and (not isinstance(st["rng"], dict) or st["rng"].get("bit_generator") not in _GENERATORS):
        raise _agrl.InvalidArgError(f"set_state: {where}: the random generator's state is damaged")
    mj = _mujoco(layer)
    if ("mujoco" in st) != (mj is not None):
        raise _agrl.InvalidArgError(f"set_state: {where}: a MuJoCo state for an environment of another kind")
    if mj is not None:
        mujoco, model, _ = mj
        if _dec_array(st["mujoco"]).shape != (mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_INTEGRATION),):
            raise _agrl.InvalidArgError(f"set_state: {where}: the MuJoCo state is of another model")


def _set_layer(layer: Any, st: Dict[str, Any]) -> None:
    d = vars(layer)
    if "own" in st:
        layer.set_state(bytes.fromhex(st["own"]))
        return
    for k, v in st["plain"].items():
        setattr(layer, k, v)
    for k, v in st["arrays"].items():
        a, cur = _dec_array(v), d.get(k)
        if _is_array_attr(cur) and cur.shape == a.shape and cur.dtype == a.dtype:
            cur[...] = a  # in place: whatever holds the array sees the state
        else:
            setattr(layer, k, a)
    if "rng" in st:
        rng = d.get("_np_random")
        if not isinstance(rng, np.random.Generator):  # an environment never reset has none yet
            rng = layer._np_random = np.random.Generator(getattr(np.random, st["rng"]["bit_generator"])())
        rng.bit_generator.state = st["rng"]
    mj = _mujoco(layer)
    if mj is not None:
        mujoco, model, data = mj
        mujoco.mj_setState(model, data, _dec_array(st["mujoco"]), mujoco.mjtState.mjSTATE_INTEGRATION)


def _own(layer: Any) -> bool:
    """Whether the layer's class reads and sets its own state as bytes."""
    return callable(getattr(type(layer), "get_state", None)) and callable(getattr(type(layer), "set_state", None))


def _copies_of(layer: Any) -> Optional[List[Any]]:
    """A SyncVectorEnv's copies (its list `envs`), else None."""
    envs = vars(layer).get("envs")
    return list(envs) if isinstance(envs, (list, tuple)) else None


def _tree(env: Any) -> Dict[str, Any]:
    """The state of env's layers, and of the copies of a vector among them."""
    layers = []
    for layer in _layers(env):
        st = _layer_state(layer)
        copies = _copies_of(layer)
        if copies is not None:
            st["copies"] = [_tree(e) for e in copies]
        layers.append(st)
    return {"layers": layers}


def _plan(env: Any, tree: Any, where: str, out: List[Tuple[Any, Dict[str, Any]]]) -> None:
    """Checks tree against env (raising before any change) and lists the
    (layer, state) pairs to set."""
    layers = _layers(env)
    got = tree.get("layers") if isinstance(tree, dict) else None
    if not isinstance(got, list) or len(got) != len(layers):
        raise _agrl.InvalidArgError(f"set_state: {where} has {len(layers)} layers (wrappers and the environment), "
                                    f"the state {len(got) if isinstance(got, list) else 'none'}")
    for k, (layer, st) in enumerate(zip(layers, got)):
        at = f"{where}[{k}]"
        _check_layer(layer, st, at)
        copies = _copies_of(layer)
        sub = st.get("copies")
        if (copies is None) != (sub is None) or (copies is not None and len(copies) != len(sub)):
            raise _agrl.InvalidArgError(f"set_state: {at}: the state is of another number of copies")
        for i, e in enumerate(copies or []):
            _plan(e, sub[i], f"{at}.envs[{i}]", out)
        out.append((layer, st))


#: the modules whose environments and wrappers keep their state in what
#: _layer_state reads (any other class may hold state elsewhere: an
#: emulator's, a simulator's, an object's, which a resumed run would lose)
_KNOWN = ("gymnasium.core", "gymnasium.wrappers.", "gymnasium.vector.", "gymnasium.envs.classic_control.",
          "gymnasium.envs.mujoco.")


def _unreadable(env: Any) -> Optional[str]:
    """Why env's state cannot be read here, or None."""
    for layer in _layers(env):
        if type(layer).__name__ == "AsyncVectorEnv":
            return "an AsyncVectorEnv's copies run in other processes (use SyncVectorEnv for resumable runs)"
        module = type(layer).__module__ or ""
        if not _own(layer) and not (module in _KNOWN or module.startswith(_KNOWN)):
            return (f"{type(layer).__qualname__} of {module} may hold state that is not read: neither a Gymnasium "
                    f"MuJoCo or classic-control task or wrapper, nor get_state/set_state of its own")
        for e in _copies_of(layer) or []:
            why = _unreadable(e)
            if why is not None:
                return why
    return None


def state_io(env: Any) -> Tuple[Optional[StateIO], str]:
    """(get_state, set_state) of a Gymnasium environment, or (None, why not)."""
    why = _unreadable(env)
    if why is not None:
        return None, why

    def get() -> bytes:
        return json.dumps({"magic": _MAGIC, "env": _tree(env)}).encode("utf-8")

    def put(raw: bytes) -> None:
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            rec = None
        if not isinstance(rec, dict) or rec.get("magic") != _MAGIC:
            raise _agrl.InvalidArgError("set_state: not a state of a Gymnasium environment saved by learn()")
        todo: List[Tuple[Any, Dict[str, Any]]] = []
        _plan(env, rec["env"], "env", todo)
        for layer, st in todo:
            _set_layer(layer, st)

    return (get, put), ""
