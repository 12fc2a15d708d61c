"""agrl.DQN: epsilon-greedy acting, a replay table on the device and the
recorded update, with a training loop for any Gymnasium-style environment."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Self, Sequence, Tuple, TypedDict, Union, Unpack

import numpy as np

from . import _agrl
from ._loop import (Callback, EnvLike, LearnResult, Run, check_copies, env_reset, env_spaces, env_step,
                    evaluate_during, finish_load, learn_args, obs_dim_of, play, save_with_run)


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
    obs_shape: Optional[Tuple[int, int, int]]  # (C, H, W) with convolutions, else None


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
    flattened to obs_dim = C*H*W values); the defaults are
    ``agrl.DQN.defaults()``. E.g. MinAtar's DQN: ``conv=[(16, 3)],
    hidden=[128]``.
    ``total_steps`` plans the exploration schedule.
    ``DQN.for_env(ctx, env, total_steps, **config)`` takes obs_dim and
    n_actions from an environment's spaces.

    - ``act(obs, explore=True, step=0)``: an action (an int for one
      observation, an int32 array for (n, obs_dim)).
    - ``store(obs, action, reward, next_obs, terminated, truncated=None)``:
      one transition or a batch; next_obs is the true last observation of an
      episode that ended (n-step returns stop at a truncation).
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
        env.observation_space (a 1-D Box), n_actions from env.action_space,
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
        return play(env, lambda obs: self.act(obs, False), episodes, seed)

    def learn(self, env: EnvLike, total_steps: Optional[int] = None, callback: Optional[Callback] = None, *,
              resume: bool = False, checkpoint: Union[str, "os.PathLike[str]", None] = None,
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
        resume (the run would not be the same).

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
        run = Run(self, env, checkpoint, checkpoint_every, "DQN", "DQN.load")
        eval_seed = _agrl.derive_seed(cfg["seed"], 0xE7A15EED)  # agrl train's evaluation seed
        step: int
        since_train: int
        since_target: int
        updates_at_target: int
        last_eval: int
        if resume:
            rec, obs, eps = run.resume()
            step = rec["step"]
            since_train, since_target = rec["since_train"], rec["since_target"]
            updates_at_target = rec["updates_at_target"]
            last_eval = rec.get("last_eval", 0)
        else:
            obs, eps = run.start(cfg["seed"])
            step = since_train = since_target = 0
            updates_at_target = self.updates
            last_eval = 0
        run.check_obs(obs, self.obs_dim)
        evals: List[Tuple[int, float]] = []

        def record() -> None:
            run.keep(step, eps, obs, since_train=since_train, since_target=since_target,
                     updates_at_target=updates_at_target, last_eval=last_eval)

        stop = False
        while not stop and step < total:
            action = self.act(obs, True, step)
            next_obs, reward, terminated, truncated = env_step(env, action)
            self.store(obs, action, reward, next_obs, int(terminated), int(truncated))
            eps.add(reward)
            step += 1
            since_train += 1
            since_target += 1
            if terminated or truncated:
                ev = eps.end(step, self.updates, truncated and not terminated, epsilon=self.epsilon(step))
                if callback is not None:
                    stop = bool(callback(ev))
                obs = env_reset(env)
            else:
                obs = next_obs
            if since_target >= cfg["target_update_interval"]:
                since_target = 0
                if cfg["tau"] < 1.0 or self.updates != updates_at_target:
                    updates_at_target = self.updates
                    self.update_target()
            if since_train >= cfg["train_freq"]:
                since_train = 0
                if step > cfg["learning_starts"] and self.stored >= cfg["batch_size"] and cfg["gradient_steps"] > 0:
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
