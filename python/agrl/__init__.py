"""agrl: device-resident replay tables and on-device RL updates, from Python.

The objects mirror the C library's layers:

- :class:`Context` — a device ("auto", "cpu", "cuda", "cuda:N", "vulkan",
  "vulkan:N"; Vulkan memory is not exported through DLPack), its queue and
  transfer counters.
- :class:`Buffer` — a rows x capacity table on the device, read by index.
- :class:`ReplayBuffer` — named fields over one table, uniform or prioritized
  sampling on the device.
- :class:`FrameReplayBuffer` — pixel observations stored one frame a step,
  stacks rebuilt on the device when a batch is sampled.
- :class:`DQN` — acting, storing, and the recorded update; :meth:`DQN.learn`
  trains on any environment with Gymnasium's API (pixels through a frame
  table with ``frame_stack=k``; :class:`FrameStack` keeps one environment's
  stack as the table does).
- :class:`SAC`, :class:`TD3` — the same for continuous actions (a Box
  action space), actor-critic updates recorded on the device.
- :func:`make` — the built-in environments with Gymnasium's signatures.

Results (sampled batches, gathered rows) are :class:`Tensor` objects that
implement DLPack: ``torch.from_dlpack``, ``jax.dlpack.from_dlpack``,
``cupy.from_dlpack`` and ``numpy.from_dlpack`` share their memory. Inputs may
be any DLPack producer, an object with the buffer protocol, or lists.
Every failure raises a subclass of :class:`Error` carrying the C message.
"""

from . import _agrl
from ._agrl import (  # noqa: F401
    Buffer,
    Context,
    Error,
    Tensor,
    __version__,
    cuda_device_count,
    derive_seed,
    library_version,
    vulkan_device_count,
)
# Public, though outside __all__ (a star import leaves them out): "X as X"
# marks them exported for type checkers.
from ._agrl import (  # noqa: F401  one exception per status
    DeviceError as DeviceError,
    FreedError as FreedError,
    InvalidArgError as InvalidArgError,
    InvalidatedError as InvalidatedError,
    IoError as IoError,
    NoDeviceError as NoDeviceError,
    OutOfMemoryError as OutOfMemoryError,
    OutOfRangeError as OutOfRangeError,
    ShapeError as ShapeError,
    StateError as StateError,
    TimeoutError as TimeoutError,
    UnsupportedError as UnsupportedError,
)
from .envs import Box as Box, Discrete as Discrete, Env as Env, make  # noqa: F401
from .replay import ReplayBuffer  # noqa: F401
from .frames import FrameReplayBuffer  # noqa: F401
from .dqn import DQN, FrameStack  # noqa: F401
from .ac import SAC, TD3  # noqa: F401

__all__ = [
    "Buffer",
    "Context",
    "DQN",
    "Error",
    "FrameReplayBuffer",
    "FrameStack",
    "ReplayBuffer",
    "SAC",
    "TD3",
    "Tensor",
    "make",
    "derive_seed",
    "cuda_device_count",
    "vulkan_device_count",
    "library_version",
    "__version__",
]
