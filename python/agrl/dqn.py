"""agrl.DQN: epsilon-greedy acting, a replay table on the device and the
recorded update, with a training loop for any Gymnasium-style environment."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Optional, Self, Sequence, Tuple, TypedDict, Union, Unpack

import numpy as np
from numpy.typing import NDArray

from . import _agrl
from ._loop import (Callback, EnvLike, LearnResult, Run, check_copies, env_spaces, evaluate_during, finish_load,
                    learn_args, obs_dim_of, play, save_with_run)


class DQNConfig(TypedDict):
    """A DQN's configuration as the C library holds it (``DQN.defaults()``,
    ``DQN.config``): the fields of ``ag_dqn_config``."""

    hidden: Tuple[int, ...]
    lr: float
    gamma: float
    batch_size: int
    buffer_size: int
    learning_starts: int
    train_freq: int
    gradient_steps: int
    target_update_interval: int
    tau: float
    exploration_fraction: float
    eps_start: float
    eps_end: float
    max_grad_norm: float
    double_dqn: bool
    huber: bool
    seed: int
    fused: bool
    per: bool
    per_alpha: float
    per_beta: float
    per_eps: float
    n_step: int
    n_envs: int
    conv: Tuple[Tuple[int, int, int, int], ...]  # (channels, kernel, stride, pad) of each convolution
    obs_shape: Optional[Tuple[int, int, int]]  # (C, H, W) with convolutions or frames, else None
    frame_stack: int  # k > 0: the replay is a frame table of stacks of k frames (0: full observations)


class DQNOptions(TypedDict, total=False):
    """The options DQN(..., **config) takes: any fields of DQNConfig
    (``hidden`` any sequence of layer sizes)."""

    hidden: Sequence[int]
    lr: float
    gamma: float
    batch_size: int
    buffer_size: int
    learning_starts: int
    train_freq: int
    gradient_steps: int
    target_update_interval: int
    tau: float
    exploration_fraction: float
    eps_start: float
    eps_end: float
    max_grad_norm: float
    double_dqn: bool
    huber: bool
    seed: int
    fused: bool
    per: bool
    per_alpha: float
    per_beta: float
    per_eps: float
    n_step: int
    n_envs: int
    conv: Sequence[Sequence[int]]
    obs_shape: Sequence[int]
    frame_stack: int


class FrameStack:
    """The stack of one environment's last k frames as a frame table
    rebuilds it (agrl/frames.h): slots oldest to newest, an episode's first
    frame repeated into the older slots (Gymnasium's
    FrameStackObservation(padding_type="reset")), each frame of (h, w, c)
    laid out channels first, so that ``obs()`` is the [k*c, h, w] stack
    flattened (k*c*h*w uint8 values), what DQN.act_u8 takes.
    ``frame(obs)`` checks an environment's observation ((h, w) or (h, w, c)
    uint8) and gives it as (h, w, c)."""

    def __init__(self, k: int, h: int, w: int, c: int) -> None:
        self.k, self.h, self.w, self.c = k, h, w, c
        self.slots: NDArray[np.uint8] = np.zeros((k, c, h, w), np.uint8)

    def frame(self, obs: Any, who: str) -> NDArray[np.uint8]:
        a = np.asarray(obs)
        want = (self.h, self.w, self.c)
        if a.dtype != np.uint8:
            raise _agrl.InvalidArgError(f"{who}: observations of dtype {a.dtype}; a frame table takes uint8 images "
                                        f"(h, w) or (h, w, c)")
        if a.shape == want[:2] and self.c == 1:
            a = a[:, :, None]
        if a.shape != want:
            raise _agrl.ShapeError(f"{who}: an observation of shape {a.shape}; the DQN's frames are {want} "
                                   f"(h, w, c)")
        return np.ascontiguousarray(a)

    def reset(self, frame: NDArray[np.uint8]) -> None:
        """An episode's first frame, in every slot."""
        self.slots[:] = frame.transpose(2, 0, 1)

    def push(self, frame: NDArray[np.uint8]) -> None:
        """The next frame: the oldest slot drops out."""
        self.slots[:-1] = self.slots[1:]
        self.slots[-1] = frame.transpose(2, 0, 1)

    def obs(self) -> NDArray[np.uint8]:
        return self.slots.reshape(-1)


def image_shape(space: Any) -> Optional[Tuple[int, int, int]]:
    """(h, w, c) of an image observation space (a uint8 Box of shape (h,
    w) or (h, w, c)), else None."""
    shape = tuple(getattr(space, "shape", None) or ())
    if np.dtype(getattr(space, "dtype", np.float32)) != np.uint8 or len(shape) not in (2, 3):
        return None
    return (int(shape[0]), int(shape[1]), int(shape[2]) if len(shape) == 3 else 1)


class _Side(ABC):
    """What learn() holds of the environment between steps and how it acts
    and stores: the observation in hand (_Full) or the stack of frames
    (_Frames)."""

    @abstractmethod
    def act(self, step: int) -> int: ...

    @abstractmethod
    def store(self, action: int, next_raw: Any, reward: float, terminated: bool, truncated: bool) -> None: ...

    @abstractmethod
    def advance(self, next_raw: Any) -> None: ...

    @abstractmethod
    def restart(self, first_raw: Any) -> None: ...

    @abstractmethod
    def resume(self, rec: Dict[str, Any], held: Optional[NDArray[np.float32]], new_obs: Any) -> None: ...

    def held(self) -> Optional[NDArray[np.float32]]:
        return None

    def fields(self) -> Dict[str, Any]:
        return {}


class _Full(_Side):
    """The observation in hand, stored with its transition in full."""

    def __init__(self, dqn: "DQN") -> None:
        self.dqn = dqn
        self.obs: NDArray[np.float32] = np.zeros(0, np.float32)
        self.next: NDArray[np.float32] = self.obs

    def _set(self, raw: Any) -> None:
        self.obs = np.asarray(raw, dtype=np.float32)
        if self.obs.shape != (self.dqn.obs_dim,):
            raise _agrl.ShapeError(f"learn: the environment's observations are {self.obs.shape}, the DQN's "
                                   f"({self.dqn.obs_dim},)")

    def act(self, step: int) -> int:
        return int(self.dqn.act(self.obs, True, step))

    def store(self, action: int, next_raw: Any, reward: float, terminated: bool, truncated: bool) -> None:
        self.next = np.asarray(next_raw, dtype=np.float32)
        self.dqn.store(self.obs, action, reward, self.next, int(terminated), int(truncated))

    def advance(self, next_raw: Any) -> None:
        self.obs = self.next

    def restart(self, first_raw: Any) -> None:
        self._set(first_raw)

    def resume(self, rec: Dict[str, Any], held: Optional[NDArray[np.float32]], new_obs: Any) -> None:
        self._set(held if held is not None else new_obs)

    def held(self) -> Optional[NDArray[np.float32]]:
        return self.obs


class _Frames(_Side):
    """The stack of frames in hand (FrameStack) and its newest frame, stored
    with its step's fields (flagged first at an episode's start); an ended
    episode's last observation is stored as an entry of its own. The run's
    record keeps the stack's k frames and the flag."""

    def __init__(self, dqn: "DQN") -> None:
        self.dqn = dqn
        self.st = dqn.frame_stack_of()
        self.frame: NDArray[np.uint8] = np.zeros((self.st.h, self.st.w, self.st.c), np.uint8)
        self.next = self.frame
        self.first = True
        self.zero_i, self.zero_f = np.zeros(1, np.int32), np.zeros(1, np.float32)

    def act(self, step: int) -> int:
        return int(self.dqn.act_u8(self.st.obs(), True, step))

    def store(self, action: int, next_raw: Any, reward: float, terminated: bool, truncated: bool) -> None:
        self.next = self.st.frame(next_raw, "learn")
        self.dqn.store_frames(self.frame, np.uint8(self.first), np.int32(action), np.float32(reward),
                              np.int32(terminated), np.int32(truncated))
        if terminated or truncated:  # the last observation (its fields never read)
            z, f = self.zero_i, self.zero_f
            self.dqn.store_frames(self.next, np.zeros(1, np.uint8), z, f, z, z)

    def advance(self, next_raw: Any) -> None:
        self.frame, self.first = self.next, False
        self.st.push(self.frame)

    def restart(self, first_raw: Any) -> None:
        self.frame, self.first = self.st.frame(first_raw, "learn"), True
        self.st.reset(self.frame)

    def resume(self, rec: Dict[str, Any], held: Optional[NDArray[np.float32]], new_obs: Any) -> None:
        if new_obs is not None:  # resume="new_episode"
            self.restart(new_obs)
            return
        self.st.slots[:] = np.frombuffer(bytes.fromhex(rec["frames"]), np.uint8).reshape(self.st.slots.shape)
        self.frame = np.ascontiguousarray(self.st.slots[-1].transpose(1, 2, 0))
        self.first = bool(rec["first"])

    def fields(self) -> Dict[str, Any]:
        return {"frames": self.st.obs().tobytes().hex(), "first": int(self.first)}


class DQN(_agrl._DQN):
    """DQN(ctx, obs_dim, n_actions, total_steps=100000, **config)

    ``config`` takes every field of the C library's ``ag_dqn_config`` by name
    (``hidden``, ``lr``, ``gamma``, ``batch_size``, ``buffer_size``,
    ``learning_starts``, ``train_freq``, ``gradient_steps``,
    ``target_update_interval``, ``tau``, ``exploration_fraction``,
    ``eps_start``, ``eps_end``, ``max_grad_norm``, ``double_dqn``, ``huber``,
    ``seed``, ``fused``, prioritized replay's ``per``, ``per_alpha``,
    ``per_beta``, ``per_eps``, n-step returns' ``n_step`` and ``n_envs``,
    and for image observations ``conv``, convolutions in front of the
    hidden layers (each ``(channels, kernel[, stride[, pad]])``, ReLU after
    each), over observations of ``obs_shape`` ``(C, H, W)``, channels first,
    flattened to obs_dim = C*H*W values), and for pixel observations
    ``frame_stack`` (k >= 1: the replay is a frame table, each step's frame
    stored once as uint8 and the stacks of a batch rebuilt on the device;
    obs_shape is then ``(k*c, h, w)`` for frames of (h, w, c) and obs_dim =
    k*c*h*w: the network sees the stack channels first, oldest frame first,
    each value v as v / 255); the defaults are ``agrl.DQN.defaults()``.
    E.g. MinAtar's DQN: ``conv=[(16, 3)], hidden=[128]``; the Nature DQN on
    Atari: ``frame_stack=4, conv=[(32, 8, 4), (64, 4, 2), (64, 3, 1)],
    hidden=[512]`` (``DQN.for_env`` fills obs_shape from the environment's
    images).
    ``total_steps`` plans the exploration schedule.
    ``DQN.for_env(ctx, env, total_steps, **config)`` takes obs_dim and
    n_actions from an environment's spaces.

    - ``act(obs, explore=True, step=0)``: an action (an int for one
      observation, an int32 array for (n, obs_dim)).
    - ``store(obs, action, reward, next_obs, terminated, truncated=None)``:
      one transition or a batch; next_obs is the true last observation of an
      episode that ended (n-step returns stop at a truncation).
    - with frame_stack: ``store_frames(frames, first, action, reward,
      terminated, truncated=None)`` stores entries of the frame table (an
      episode's last observation an entry of its own, the next one flagged
      first: agrl/frames.h), ``act_u8(stack)`` acts on uint8 stacks, and
      ``FrameStack`` keeps one environment's stack as the table does.
    - ``train(gradient_steps)``: runs the recorded updates, returns the loss.
    - ``update_target()``.
    - ``save(path)`` writes the whole DQN (both networks, Adam's moments
      and step, the replay table, the random streams, the counters and
      where ``learn`` stands); ``DQN.load(ctx, path)`` makes it again, and
      it then acts and trains exactly as the saved one would have.
    - ``save_policy(path)`` / ``load_policy(path)``: the online network alone
      in agrl's model format (what ``agrl eval --model`` reads).
    - ``learn(env, total_steps, callback=None, resume=False, checkpoint=None,
      checkpoint_every=0)``: the training loop, resumable.
    """

    _RUN_KIND = "agrl.DQN.learn/1"
    ctx: _agrl.Context
    total_steps: int
    config: DQNConfig
    _run: Optional[Dict[str, Any]]  # where learn() stands (what save() keeps)

    def __init__(self, ctx: Union[_agrl.Context, str, None], obs_dim: int, n_actions: int, total_steps: int = 100000,
                 **config: Unpack[DQNOptions]) -> None:
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        defaults = _agrl.dqn_defaults()
        for k in config:
            if k not in defaults:
                raise _agrl.InvalidArgError(f"DQN: unknown option {k!r} (options: {', '.join(sorted(defaults))})")
        self.ctx = ctx
        self.total_steps = total_steps
        super().__init__(ctx, obs_dim, n_actions, total_steps, dict(config))
        self.config = self._config()  # as the C library holds it (float32 values, hidden a tuple)

    @classmethod
    def for_env(cls, ctx: Union[_agrl.Context, str, None], env: Any, total_steps: int = 100000,
                **config: Unpack[DQNOptions]) -> Self:
        """A DQN for `env` (Gymnasium's or agrl's spaces): obs_dim from
        env.observation_space (a 1-D Box; or uint8 images of (h, w) or (h,
        w, c), which need frame_stack=k: obs_shape is then (k*c, h, w)),
        n_actions from env.action_space,
        which must be Discrete (actions 0 .. n-1). Of a vector environment
        (num_envs copies, e.g. gymnasium.vector.VectorEnv) it takes
        single_observation_space and single_action_space, and n_envs =
        num_envs: the copies that each store() of one step of all of them
        holds side by side (for a loop of your own; learn plays one
        environment). Raises InvalidArgError naming the action space when it
        is not Discrete (or its actions do not start at 0), or when config's
        n_envs is not the vector's num_envs; ShapeError for observations
        that are not (obs_dim,)."""
        obs_space, space, copies, name = env_spaces(env, "DQN.for_env")
        n = getattr(space, "n", None)
        if (isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer))
                or tuple(getattr(space, "shape", None) or ()) != ()):
            raise _agrl.InvalidArgError(f"DQN.for_env: {name} {space!r} is not Discrete (DQN takes n discrete "
                                        f"actions; SAC.for_env and TD3.for_env take a Box)")
        start = getattr(space, "start", 0)
        if start != 0:
            raise _agrl.InvalidArgError(f"DQN.for_env: {name} {space!r} starts at {start}; DQN's actions are "
                                        f"0 .. n-1")
        image = image_shape(obs_space)
        k = int(config.get("frame_stack", 0))
        if k and image is None:
            raise _agrl.InvalidArgError(f"DQN.for_env: frame_stack = {k} needs image observations, a uint8 Box of "
                                        f"shape (h, w) or (h, w, c); the environment's are {obs_space!r}")
        if image is not None and not k:
            raise _agrl.InvalidArgError(f"DQN.for_env: the observations are uint8 images {obs_space!r}: give "
                                        f"frame_stack=k (4 for the Nature DQN) to keep them in a frame table")
        if image is not None:
            h, w, c = image
            stack = (k * c, h, w)
            if "obs_shape" in config and tuple(config["obs_shape"]) != stack:
                raise _agrl.InvalidArgError(f"DQN.for_env: obs_shape = {tuple(config['obs_shape'])}, but a stack "
                                            f"of {k} frames of {image} (h, w, c) is {stack} (k*c, h, w)")
            config["obs_shape"] = stack
            return cls(ctx, k * c * h * w, int(n), total_steps, **config)
        obs_dim = obs_dim_of(obs_space, "DQN.for_env")
        if config.get("conv") and "obs_shape" not in config:  # an agrl environment knows its image's shape
            shape = getattr(getattr(env, "unwrapped", env), "image_shape", None)
            if shape is None:
                raise _agrl.InvalidArgError("DQN.for_env: conv needs obs_shape=(C, H, W): the environment does not "
                                            "say how its flat observations are an image")
            config["obs_shape"] = tuple(shape)
        if copies is not None:
            if config.get("n_envs", copies) != copies:
                raise _agrl.InvalidArgError(f"DQN.for_env: n_envs = {config['n_envs']}, but the vector "
                                            f"environment has {copies} copies (num_envs)")
            config["n_envs"] = copies
        return cls(ctx, obs_dim, int(n), total_steps, **config)

    @classmethod
    def load(cls, ctx: Union[_agrl.Context, str, None], path: Union[str, "os.PathLike[str]"]) -> Self:
        """The DQN saved in `path` by save(), on ctx (a Context or a device
        name): the configuration, the networks, the optimizer, the replay
        table and the random streams of the file, and where learn() stood,
        so that learn(env, resume=True) continues the run."""
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        self = cls.__new__(cls)
        self._load_from(ctx, os.fspath(path))
        return finish_load(self, ctx, cls._RUN_KIND)

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the whole DQN to `path` (written beside it and renamed: a
        failure keeps an earlier file), with where learn() stands."""
        save_with_run(self, path)

    @staticmethod
    def defaults() -> DQNConfig:
        """The default configuration, the C library's ag_dqn_defaults
        (Stable-Baselines3 zoo's CartPole DQN with Double DQN, 5-step
        returns and 64 gradient steps every 64 environment steps, tuned with
        agrl train's 8 environment copies; n_envs is 1, learn's one
        environment)."""
        return _agrl.dqn_defaults()

    def evaluate(self, env: EnvLike, episodes: int = 10, seed: int = 12345) -> Tuple[float, List[float]]:
        """Mean return of `episodes` greedy episodes on `env` (Gymnasium's
        API): on agrl's own environments episode k starts from the seed
        derive_seed(seed, k), the episodes of `agrl eval --seed SEED`;
        another environment's episode k is reset with seed=derive_seed(seed,
        k). Returns (mean, [returns])."""
        if not self.config["frame_stack"]:
            return play(env, lambda obs: self.act(obs, False), episodes, seed)
        st = self.frame_stack_of()
        fresh = [True]

        def start(obs: Any) -> None:
            st.reset(st.frame(obs, "evaluate"))
            fresh[0] = True

        def policy(obs: Any) -> int:
            if not fresh[0]:
                st.push(st.frame(obs, "evaluate"))
            fresh[0] = False
            return int(self.act_u8(st.obs(), False))

        return play(env, policy, episodes, seed, start)

    def frame_stack_of(self) -> FrameStack:
        """A new FrameStack of this frame-table DQN's stack and frame (raises
        StateError for a DQN of full observations)."""
        cfg = self.config
        shape = cfg["obs_shape"]
        if not cfg["frame_stack"] or shape is None:
            raise _agrl.StateError("DQN.frame_stack_of: the DQN keeps full observations (frame_stack = 0)")
        k = cfg["frame_stack"]
        return FrameStack(k, shape[1], shape[2], shape[0] // k)

    def learn(self, env: EnvLike, total_steps: Optional[int] = None, callback: Optional[Callback] = None, *,
              resume: Union[bool, str] = False, checkpoint: Union[str, "os.PathLike[str]", None] = None,
              checkpoint_every: int = 0, eval_env: Optional[EnvLike] = None, eval_every: int = 0,
              eval_episodes: int = 10) -> LearnResult:
        """Trains on `env` (Gymnasium's API: reset(seed=) -> (obs, info),
        step(a) -> (obs, reward, terminated, truncated, info)) for
        total_steps environment steps, as the C library's ag_dqn_learn does
        on one copy: act, step, store (with the true last observation),
        target updates every target_update_interval steps, a training phase
        of gradient_steps updates every train_freq steps once
        learning_starts steps have been taken. The first reset is seeded with
        derive_seed(config seed, 0), so that agrl's own environments replay
        the episodes of `agrl train --seed S`.

        learn plays one environment: a vector environment (num_envs, e.g.
        gymnasium.vector.VectorEnv) is refused with InvalidArgError, and so
        are n-step returns (n_step > 1) with n_envs other than 1, whose walk
        would stride n_envs transitions of the one environment (make the DQN
        with n_envs=1; n_envs = num_envs is for a loop of your own that acts
        and stores every copy at once). Nothing is stepped before a refusal.

        callback(event) receives a dict for every ended episode ("episode":
        return, length, truncated, mean of the last 20 returns) and every
        training phase ("phase": loss); a true return stops the run after
        the step in progress.

        Where the loop stands when it returns is kept, and save() writes
        it: with checkpoint=PATH the DQN is saved there every
        checkpoint_every steps (and when the run ends), and
        DQN.load(ctx, PATH).learn(env, total_steps, resume=True) continues
        from the last save: for an environment with get_state/set_state
        (agrl's own), it then takes the steps, updates and episodes of the
        uninterrupted run, bit for bit; an environment without them cannot
        resume so (the run would not be the same). resume="new_episode"
        continues the run (its steps, schedules, networks, table and
        returns) on any environment, but not the episode in progress: env
        is reset with seed derive_seed(config seed, episodes + 1), and the
        dropped episode is neither reported nor counted (refused with
        n_step > 1, whose walks would run from its last stored transition
        into the next episode).

        With frame_stack (a frame table), env gives uint8 images of the
        DQN's frames ((h, w) or (h, w, c); e.g. Gymnasium's
        AtariPreprocessing over ale-py): learn keeps the stack of the last
        k frames itself (FrameStack: the table's stacks, an episode's first
        frame repeated), acts on it (act_u8) and stores each step's frame
        once (store_frames), an episode's last observation as an entry of
        its own. The DQN must have n_envs = 1.

        With eval_env and eval_every, every eval_every steps the policy plays
        eval_episodes greedy episodes there (evaluate(), the same seeds each
        time, agrl train --eval-every's: derive_seed(config seed, 0xE7A15EED)), reported to the
        callback as {"kind": "eval", "step", "mean", "returns"} (a true
        return stops the run) and listed in the result's "evals".

        Returns a dict with the steps taken so far and the episode returns
        and lengths (and evaluations) of this call."""
        cfg = self.config
        total, eval_every = learn_args(self, total_steps, eval_every, eval_env)
        check_copies(self, env, "DQN")
        if cfg["frame_stack"] and cfg["n_envs"] != 1:
            raise _agrl.InvalidArgError(f"learn: the DQN's frame table interleaves n_envs = {cfg['n_envs']} "
                                        f"copies; learn plays one environment (make the DQN with n_envs=1)")
        run = Run(self, env, checkpoint, checkpoint_every, "DQN", "DQN.load")
        eval_seed = _agrl.derive_seed(cfg["seed"], 0xE7A15EED)  # agrl train's evaluation seed
        side: _Side = _Frames(self) if cfg["frame_stack"] else _Full(self)
        step: int
        since_train: int
        since_target: int
        updates_at_target: int
        last_eval: int
        if resume:
            rec, held, eps = run.resume(resume, cfg["seed"])
            side.resume(rec, held, run.new_obs)
            step = rec["step"]
            since_train, since_target = rec["since_train"], rec["since_target"]
            updates_at_target = rec["updates_at_target"]
            last_eval = rec.get("last_eval", 0)
        else:
            obs, eps = run.start_raw(cfg["seed"])
            side.restart(obs)
            step = since_train = since_target = 0
            updates_at_target = self.updates
            last_eval = 0
        evals: List[Tuple[int, float]] = []

        def record() -> None:
            run.keep(step, eps, side.held(), since_train=since_train, since_target=since_target,
                     updates_at_target=updates_at_target, last_eval=last_eval, **side.fields())

        stop = False
        while not stop and step < total:
            action = side.act(step)
            next_raw, r, term, trunc, _ = env.step(action)
            reward, terminated, truncated = float(np.float32(r)), bool(term), bool(trunc)
            side.store(action, next_raw, reward, terminated, truncated)
            eps.add(reward)
            step += 1
            since_train += 1
            since_target += 1
            if terminated or truncated:
                ev = eps.end(step, self.updates, truncated and not terminated, epsilon=self.epsilon(step))
                if callback is not None:
                    stop = bool(callback(ev))
                side.restart(env.reset()[0])
            else:
                side.advance(next_raw)
            if since_target >= cfg["target_update_interval"]:
                since_target = 0
                if cfg["tau"] < 1.0 or self.updates != updates_at_target:
                    updates_at_target = self.updates
                    self.update_target()
            if since_train >= cfg["train_freq"]:
                since_train = 0
                if step > cfg["learning_starts"] and self.sampleable >= cfg["batch_size"] and cfg["gradient_steps"] > 0:
                    if cfg["per"]:
                        self.set_beta(self.per_beta(step))
                    loss = self.train(cfg["gradient_steps"])
                    if callback is not None:
                        ev = {"kind": "phase", "step": step, "episodes": eps.episodes, "updates": self.updates,
                              "loss": loss, "mean_return": eps.mean(),
                              "epsilon": self.epsilon(step)}
                        stop = bool(callback(ev)) or stop
            if eval_every and step - last_eval >= eval_every and eval_env is not None:
                last_eval = step
                stop = evaluate_during(self, eval_env, eval_episodes, eval_seed, step, evals, callback) or stop
            run.tick(step, record)
        return run.finish(step, eps, evals, record)

    def __repr__(self) -> str:
        try:
            return f"<agrl.DQN {self.obs_dim} -> {self.n_actions}, {self.updates} updates on {self.ctx.device}>"
        except _agrl.Error:
            return "<agrl.DQN (freed)>"
