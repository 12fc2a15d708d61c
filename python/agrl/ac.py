"""agrl.SAC and agrl.TD3: actor-critic agents for continuous actions, with
the replay table on the device and every update one recorded step, and a
training loop for any Gymnasium-style environment with a Box action space."""

from __future__ import annotations

import os
from typing import Any, ClassVar, Dict, List, Optional, Self, Sequence, Tuple, TypedDict, Union, Unpack

import numpy as np

from . import _agrl
from ._loop import (Callback, CopyEpisodes, EnvLike, LearnResult, Run, VectorSteps, autoreset_mode, check_copies, env_reset,
                    env_spaces, env_step, evaluate_during, finish_load, learn_args, obs_dim_of, play, save_with_run,
                    vector_copies)
from .envs import Env

# ag_ac_learn reports a training phase (its losses read back) at the first
# phase after every REPORT_EVERY more environment steps
REPORT_EVERY = 1000


class ACConfig(TypedDict):
    """A SAC's or TD3's configuration as the C library holds it
    (``SAC.defaults()``, ``.config``): the fields of ``ag_ac_config``
    (target_entropy None: -act_dim)."""

    hidden: Tuple[int, ...]
    actor_lr: float
    critic_lr: float
    gamma: float
    tau: float
    batch_size: int
    buffer_size: int
    learning_starts: int
    train_freq: int
    gradient_steps: int
    policy_delay: int
    alpha: float
    autotune: bool
    target_entropy: Optional[float]
    expl_noise: float
    target_noise: float
    noise_clip: float
    noise_rho: float
    n_step: int
    n_envs: int
    seed: int
    fused: bool


class ACOptions(TypedDict, total=False):
    """The options SAC(..., **config) and TD3(..., **config) take: any
    fields of ACConfig (``hidden`` any sequence of layer sizes)."""

    hidden: Sequence[int]
    actor_lr: float
    critic_lr: float
    gamma: float
    tau: float
    batch_size: int
    buffer_size: int
    learning_starts: int
    train_freq: int
    gradient_steps: int
    policy_delay: int
    alpha: float
    autotune: bool
    target_entropy: Optional[float]
    expl_noise: float
    target_noise: float
    noise_clip: float
    noise_rho: float
    n_step: int
    n_envs: int
    seed: int
    fused: bool


def _bounds(b: Any, act_dim: int) -> Any:
    """A scalar bound repeated for each action; anything else as given."""
    if isinstance(b, (int, float, np.number)) and isinstance(act_dim, int) and 1 <= act_dim <= 64:
        return [float(b)] * act_dim
    return b


class _ActorCritic(_agrl._AC):
    _ALGO: ClassVar[str]  # "sac" or "td3"
    _RUN_KIND = "agrl.AC.learn/1"
    ctx: _agrl.Context
    total_steps: int
    config: ACConfig
    _run: Optional[Dict[str, Any]]  # where learn() stands (what save() keeps)

    def __init__(self, ctx: Union[_agrl.Context, str, None], obs_dim: int, act_dim: int, low: Any, high: Any,
                 total_steps: int = 100000, **config: Unpack[ACOptions]) -> None:
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        name = type(self).__name__
        defaults = _agrl.ac_defaults(self._ALGO)
        for k in config:
            if k not in defaults:
                raise _agrl.InvalidArgError(f"{name}: unknown option {k!r} (options: {', '.join(sorted(defaults))})")
        self.ctx = ctx
        self.total_steps = total_steps
        super().__init__(ctx, self._ALGO, obs_dim, act_dim, _bounds(low, act_dim), _bounds(high, act_dim),
                         total_steps, dict(config))
        self.config = self._config()  # as the C library holds it (float32 values, hidden a tuple)

    @classmethod
    def for_env(cls, ctx: Union[_agrl.Context, str, None], env: Any, total_steps: int = 100000,
                **config: Unpack[ACOptions]) -> Self:
        """An agent for `env`'s observations (a 1-D space) and Box action
        space (its bounds), Gymnasium's or agrl's; of a vector environment
        (num_envs copies, e.g. gymnasium.vector.VectorEnv) for its
        single_observation_space and single_action_space, with n_envs =
        num_envs (the copies each store() of one step of all of them holds
        side by side; learn plays one environment). Raises InvalidArgError
        naming the action space when it is not a 1-D Box, or when config's
        n_envs is not the vector's num_envs; ShapeError for observations
        that are not (obs_dim,)."""
        who = f"{cls.__name__}.for_env"
        obs_space, space, copies, name = env_spaces(env, who)
        if not (hasattr(space, "low") and hasattr(space, "high") and len(getattr(space, "shape", None) or ()) == 1):
            raise _agrl.InvalidArgError(f"{who}: {name} {space!r} is not a 1-D Box")
        obs_dim = obs_dim_of(obs_space, who)
        if copies is not None:
            if config.get("n_envs", copies) != copies:
                raise _agrl.InvalidArgError(f"{who}: n_envs = {config['n_envs']}, but the vector environment has "
                                            f"{copies} copies (num_envs)")
            config["n_envs"] = copies
        return cls(ctx, obs_dim, int(space.shape[0]), np.asarray(space.low, np.float32),
                   np.asarray(space.high, np.float32), total_steps, **config)

    @classmethod
    def load(cls, ctx: Union[_agrl.Context, str, None], path: Union[str, "os.PathLike[str]"]) -> Self:
        """The agent saved in `path` by save(), on ctx (a Context or a device
        name): the configuration, sizes and bounds, every network and
        optimizer, the replay table, the random streams and the correlated
        noise of the file, and where learn() stood, so that it acts and
        trains as the saved one would have and learn(env, resume=True)
        continues the run. A file of the other algorithm (a TD3 file given
        to SAC.load) is refused with agrl.InvalidArgError."""
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        self = cls.__new__(cls)
        self._load_from(ctx, os.fspath(path))
        if self.algo != cls._ALGO:
            algo = self.algo
            self.free()
            raise _agrl.InvalidArgError(f"{cls.__name__}.load: {os.fspath(path)} holds a {algo.upper()} agent")
        return finish_load(self, ctx, cls._RUN_KIND)

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the whole agent to `path` (written beside it and renamed: a
        failure keeps an earlier file), with where learn() stands."""
        save_with_run(self, path)

    @classmethod
    def defaults(cls) -> ACConfig:
        """The default configuration (the C library's ag_ac_defaults)."""
        return _agrl.ac_defaults(cls._ALGO)

    def evaluate(self, env: EnvLike, episodes: int = 10, seed: int = 12345) -> Tuple[float, List[float]]:
        """Mean return of `episodes` episodes of the deterministic policy (the
        squashed mean) on `env` (Gymnasium's API). On agrl's own environments
        it is ag_ac_evaluate: episode k starts from the seed
        derive_seed(seed, k), the episodes of `agrl eval --seed SEED` of the
        saved policy; another environment's episode k is reset with
        seed=derive_seed(seed, k). Returns (mean, [returns])."""
        if int(episodes) < 1:
            raise _agrl.InvalidArgError(f"evaluate: episodes = {episodes} must be at least 1")
        self._check_env(env, "evaluate", bounds=False)
        if isinstance(env, Env):
            return self._evaluate(env._env, int(episodes), seed)
        return play(env, lambda obs: self.act(obs, False), episodes, seed)

    def _check_env(self, env: object, what: str, bounds: bool = True) -> None:
        """A Box action space of the agent's size (and bounds); a vector
        environment's single_action_space."""
        space = getattr(env, "action_space", None)
        if vector_copies(env) is not None:
            space = getattr(env, "single_action_space", None)
        low, high = getattr(space, "low", None), getattr(space, "high", None)
        if low is None or high is None or np.shape(low) != (self.act_dim,):
            raise _agrl.ShapeError(f"{what}: the action space {space!r} is not the agent's Box of "
                                   f"({self.act_dim},) actions")
        if bounds and not (np.array_equal(np.asarray(low, np.float32), self.low)
                and np.array_equal(np.asarray(high, np.float32), self.high)):
            raise _agrl.InvalidArgError(f"{what}: the action bounds [{low}, {high}] are not the agent's "
                                        f"[{self.low}, {self.high}]")

    def learn(self, env: EnvLike, total_steps: Optional[int] = None, callback: Optional[Callback] = None, *,
              resume: bool = False, checkpoint: Union[str, "os.PathLike[str]", None] = None,
              checkpoint_every: int = 0, eval_env: Optional[EnvLike] = None, eval_every: int = 0,
              eval_episodes: int = 10) -> LearnResult:
        """Trains on `env` (Gymnasium's API: reset(seed=) -> (obs, info),
        step(a) -> (obs, reward, terminated, truncated, info), a Box action
        space with the agent's bounds) for total_steps environment steps, in
        the order of the C library's ag_ac_learn: uniform random actions
        (act_random) for the first learning_starts steps, then
        act(explore=True); step; store (with the true last observation of an
        episode that ended); then, every train_freq steps once more than
        learning_starts steps have been taken and batch_size transitions are
        stored, a training phase of gradient_steps updates. The first reset is
        seeded with derive_seed(config seed, 0), so that agrl's own
        environments replay the episodes of `agrl train --algo sac|td3 --seed
        S` and the run is the same, step for step.

        A vector environment (gymnasium.vector.SyncVectorEnv,
        AsyncVectorEnv, gymnasium.make_vec: num_envs copies; the agent made
        with n_envs = num_envs, as for_env does) is stepped for all copies at
        once: one act (or act_random(n)) for the n observations, one step,
        one store of the step's transitions side by side (copy 0 to n-1, the
        order n-step returns walk), and n environment steps counted, so that
        total_steps, learning_starts, train_freq and the evaluations'
        eval_every count the steps of all copies (the run may end up to
        n - 1 steps past total_steps). A training phase of gradient_steps
        updates runs when train_freq or more steps have passed since the
        last: with n copies and train_freq <= n, one phase every vector step,
        i.e. gradient_steps / n updates per environment step; gradient_steps
        = n keeps one update per environment step. Gymnasium's autoreset
        modes: SAME_STEP stores every copy's transition of every step, the
        next observation of an episode that ended being info["final_obs"];
        NEXT_STEP (the default) stores none for a copy's reset step (the step
        after its episode ended, which returns the reset observation; its
        steps still count), and takes n_step = 1 only; DISABLED is refused.
        Episodes are kept per copy; their events carry "copy". On a SAME_STEP
        vector of agrl's environments seeded as agrl's vector is, the run is
        `agrl train --n-envs n`'s.

        callback(event) receives a dict for every ended episode ("episode":
        return, length, truncated, mean of the last 20 returns) and, as
        ag_ac_learn reports them, for the first training phase after every
        1000 more steps ("phase": the critics' loss, the actor's loss, SAC's
        alpha; the losses.csv rows of agrl train); a true return stops the
        run after the step in progress.

        eval_env (a single environment), eval_every and eval_episodes
        evaluate as DQN.learn's do, at the steps and on the episodes of agrl
        train --eval-every (its eval.csv), with deterministic actions: the
        mean return of eval_episodes episodes, each reset with its own seed.

        Where the loop stands when it returns is kept, and save() writes it:
        with checkpoint=PATH the agent is saved there every checkpoint_every
        steps (and when the run ends), and load(ctx, PATH).learn(env,
        total_steps, resume=True) continues from the last save, as
        DQN.learn's: the environment's state travels in the file (agrl's
        environments' get_state; Gymnasium's MuJoCo and classic-control
        tasks, single or in a SyncVectorEnv, as agrl._envstate reads them),
        and the run then takes the steps, updates and episodes of the
        uninterrupted run, bit for bit on the same device. An
        AsyncVectorEnv's state cannot be read: its run is checkpointed, but
        resume refuses it.

        Returns a dict with the steps taken and the episode returns and
        lengths (and evaluations) of this call."""
        cfg = self.config
        total, eval_every = learn_args(self, total_steps, eval_every, eval_env)
        copies = check_copies(self, env, "agent", vectors=True)
        steps = None if copies is None else VectorSteps(env, copies, autoreset_mode(env, cfg["n_step"]))
        self._check_env(env, "learn")
        if eval_every:
            if vector_copies(eval_env) is not None:
                raise _agrl.InvalidArgError("learn: eval_env must be a single environment, not a vector")
            self._check_env(eval_env, "learn: eval_env")
        run = Run(self, env, checkpoint, checkpoint_every, "agent", "load", copies)
        eval_seed = _agrl.derive_seed(cfg["seed"], 0xE7A15EED)  # agrl train's evaluation seed
        step: int
        since_train: int
        last_eval: int
        last_report: int
        if resume:
            rec, held, eps = run.resume(True, cfg["seed"])
            assert held is not None  # resume=True: the observation in hand
            obs = held
            step, since_train, last_eval, last_report = (rec["step"], rec["since_train"], rec["last_eval"],
                                                         rec["last_report"])
            if steps is not None:
                steps.resetting = np.asarray(rec.get("resetting", [False] * steps.copies), dtype=np.bool_)
        else:
            obs, eps = run.start(cfg["seed"], steps)
            step = since_train = last_eval = 0
            last_report = -REPORT_EVERY
        run.check_obs(obs, self.obs_dim)
        evals: List[Tuple[int, float]] = []

        def record() -> None:
            extra = {} if steps is None else {"resetting": steps.resetting.tolist()}
            run.keep(step, eps, obs, since_train=since_train, last_eval=last_eval, last_report=last_report, **extra)

        starts, freq, grad, batch = cfg["learning_starts"], cfg["train_freq"], cfg["gradient_steps"], cfg["batch_size"]
        per = 1 if copies is None else copies
        stop = False
        while not stop and step < total:
            if steps is None:
                action = self.act_random() if step < starts else self.act(obs, True)
                next_obs, reward, terminated, truncated = env_step(env, action)
                self.store(obs, action, reward, next_obs, int(terminated), int(truncated))
                eps.add(reward)
                step += 1
                if terminated or truncated:
                    ev = eps.end(step, self.updates, truncated and not terminated)
                    if callback is not None:
                        stop = bool(callback(ev))
                    obs = env_reset(env)
                else:
                    obs = next_obs
            else:
                assert isinstance(eps, CopyEpisodes)
                obs, ended = self._vector_step(steps, obs, step, starts, eps, callback)
                stop = ended or stop
                step += per
            since_train += per
            if since_train >= freq:
                since_train = 0
                if step > starts and self.stored >= batch and grad > 0:
                    report = step - last_report >= REPORT_EVERY
                    losses = self.train(grad, report)
                    if report:
                        last_report = step
                        if callback is not None and losses is not None:  # losses: gradient steps were run
                            ev = {"kind": "phase", "step": step, "episodes": eps.episodes, "updates": self.updates,
                                  "loss": losses[0], "actor_loss": losses[1], "alpha": self.alpha(),
                                  "mean_return": eps.mean()}
                            stop = bool(callback(ev)) or stop
            if eval_every and step - last_eval >= eval_every and eval_env is not None:
                last_eval = step
                stop = evaluate_during(self, eval_env, eval_episodes, eval_seed, step, evals, callback) or stop
            run.tick(step, record)
        return run.finish(step, eps, evals, record)

    def _vector_step(self, steps: VectorSteps, obs: Any, step: int, starts: int, eps: CopyEpisodes,
                     callback: Optional[Callback]) -> Tuple[Any, bool]:
        """One step of every copy at `step`: act, step, store the step's
        transitions side by side, and report the episodes that ended (in
        copy order, at the step count after this step). Returns (the
        observations to act on next, whether the callback stops the run)."""
        n = steps.copies
        action = self.act_random(n) if step < starts else self.act(obs, True)
        nobs, stored, rewards, term, trunc, valid = steps.step(action)
        if valid is None:
            self.store(obs, action, rewards, stored, term.astype(np.int32), trunc.astype(np.int32))
        elif valid.any():
            self.store(obs[valid], action[valid], rewards[valid], stored[valid], term[valid].astype(np.int32),
                       trunc[valid].astype(np.int32))
        eps.add_copies(rewards, valid)
        stop = False
        done = term | trunc
        if valid is not None:
            done &= valid
        for i in np.flatnonzero(done).tolist():
            ev = eps.end_copy(i, step + n, self.updates, bool(trunc[i] and not term[i]))
            if callback is not None:
                stop = bool(callback(ev)) or stop
        return nobs, stop

    def __repr__(self) -> str:
        name = type(self).__name__
        try:
            return f"<agrl.{name} {self.obs_dim} -> {self.act_dim}, {self.updates} updates on {self.ctx.device}>"
        except _agrl.Error:
            return f"<agrl.{name} (freed)>"


_COMMON_DOC = """
    ``config`` takes every field of the C library's ``ag_ac_config`` by name
    (``hidden``, ``actor_lr``, ``critic_lr``, ``gamma``, ``tau``,
    ``batch_size``, ``buffer_size``, ``learning_starts``, ``train_freq``,
    ``gradient_steps``, ``policy_delay``, SAC's ``alpha``, ``autotune`` and
    ``target_entropy`` (None: -act_dim), TD3's ``expl_noise``,
    ``target_noise`` and ``noise_clip`` (fractions of the actions' half
    range), ``noise_rho`` (the exploring noise's correlation from one step
    to the next, an AR(1) process per copy; 0: independent), n-step returns' ``n_step`` and ``n_envs``, ``seed``,
    and ``fused`` (True: each update one fused call where it pays, on the GPU and on the CPU from 32
    hidden units; ``.fused`` says whether it
    does)); the
    defaults are ``{name}.defaults()``. ``low`` and ``high`` are the action
    bounds (act_dim values, or one for all): the networks work in [-1, 1]
    and the agent maps to and from the bounds. ``{name}.for_env(ctx, env,
    ...)`` takes the sizes and bounds from a Gymnasium environment.

    - ``act(obs, explore=True)``: float32 actions inside the bounds,
      (act_dim,) for one observation, (n, act_dim) for (n, obs_dim);
      ``explore=False`` gives the deterministic action.
    - ``act_random(n=None)``: uniform actions from the agent's own stream
      (what ``learn`` takes for the first learning_starts steps).
    - ``store(obs, action, reward, next_obs, terminated, truncated=None)``:
      one transition or a batch, actions in the bounds; next_obs is the true
      last observation of an episode that ended (the target bootstraps on a
      truncation, not on a termination).
    - ``train(gradient_steps, losses=True)``: runs the recorded updates and
      returns (critics' loss, actor's loss) of the last ones (the actor's is
      NaN before its first update); ``alpha()``; ``updates``; ``stored``.
    - ``save(path)`` writes the whole agent (every network, optimizer,
      random stream and counter, the correlated noise, the replay table and
      where ``learn`` stands); ``{name}.load(ctx, path)`` makes it again, and
      it then acts and trains exactly as the saved one would have.
    - ``save_policy(path)`` / ``load_policy(path)``: the actor alone in
      agrl's model format (what ``agrl eval --model`` reads); load_policy
      sets the actor that acts and is evaluated (TD3's target actor keeps
      its own parameters).
    - ``learn(env, total_steps, callback=None, resume=False,
      checkpoint=None, checkpoint_every=0, eval_env=None, eval_every=0,
      eval_episodes=10)``, resumable, and ``evaluate(env, episodes, seed)``.
"""


class SAC(_ActorCritic):
    __doc__ = """SAC(ctx, obs_dim, act_dim, low, high, total_steps=100000, **config)

    Soft actor-critic (Haarnoja et al. 2018): twin Q-networks, a
    tanh-squashed Gaussian policy and an entropy temperature tuned towards
    target_entropy (autotune).
""" + _COMMON_DOC.format(name="SAC")
    _ALGO = "sac"


class TD3(_ActorCritic):
    __doc__ = """TD3(ctx, obs_dim, act_dim, low, high, total_steps=100000, **config)

    Twin delayed DDPG (Fujimoto et al. 2018): twin Q-networks, a
    deterministic tanh policy explored with Gaussian noise, target policy
    smoothing, and the actor and targets updated every policy_delay-th
    critic update.
""" + _COMMON_DOC.format(name="TD3")
    _ALGO = "td3"
