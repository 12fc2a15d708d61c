"""What the training loops of agrl.DQN, agrl.SAC and agrl.TD3 share: a step
of a Gymnasium-style environment as the C loops take it, the bookkeeping of
episodes, and evaluation episodes."""

from __future__ import annotations

import json
import os
from collections import deque
from typing import (TYPE_CHECKING, Any, Callable, Deque, Dict, Iterable, List, Optional, Protocol, SupportsFloat,
                    Tuple, TypedDict, TypeVar, Union)

import numpy as np
from numpy.typing import NDArray

from . import _agrl
from ._envstate import state_io
from .envs import evaluation_start

if TYPE_CHECKING:
    from .ac import _ActorCritic
    from .dqn import DQN

    Agent = Union[DQN, _ActorCritic]

_A = TypeVar("_A", bound="Agent")

WINDOW = 20  # the mean_return of the events: over the last 20 episodes

#: What a training loop reports to its callback: "kind" ("episode", "phase"
#: or "eval") and that kind's fields (see DQN.learn, SAC.learn)
Event = Dict[str, Any]
#: learn()'s callback: a true return stops the run
Callback = Callable[[Event], object]
Obs = NDArray[np.float32]


class EnvLike(Protocol):
    """What learn() and evaluate() call on an environment: Gymnasium's
    reset(seed=) -> (obs, info) and step(action) -> (obs, reward,
    terminated, truncated, info)."""

    def reset(self, *, seed: Optional[int] = None) -> Tuple[Any, Dict[str, Any]]: ...

    def step(self, action: Any) -> Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]: ...


class LearnResult(TypedDict):
    """learn()'s result: the steps taken so far, and the episodes that ended
    and the evaluations made in this call."""

    steps: int
    episodes: int
    returns: List[float]
    lengths: List[int]
    evals: List[Tuple[int, float]]  # (step, mean return)


def env_step(env: EnvLike, action: Any) -> Tuple[Obs, float, bool, bool]:
    """env.step(action) as agrl's C loops see it: (next_obs as float32, the
    reward rounded to float32, terminated, truncated)."""
    next_obs, reward, terminated, truncated, _ = env.step(action)
    return np.asarray(next_obs, dtype=np.float32), float(np.float32(reward)), bool(terminated), bool(truncated)


def env_reset(env: EnvLike, *, seed: Optional[int] = None) -> Obs:
    obs, _ = env.reset() if seed is None else env.reset(seed=seed)
    return np.asarray(obs, dtype=np.float32)


#: Gymnasium's autoreset modes (gymnasium.vector.AutoresetMode's values)
NEXT_STEP, SAME_STEP = "NextStep", "SameStep"


def autoreset_mode(env: Any, n_step: int) -> str:
    """The autoreset mode of a vector environment (its metadata's
    "autoreset_mode"; Gymnasium 1.0's vectors, which say none, reset on the
    next step), checked before the environment is touched: NEXT_STEP or
    SAME_STEP, not DISABLED (learn resets no copy itself), and SAME_STEP
    for n-step returns, whose walks need every copy's transition of every
    step side by side."""
    meta = getattr(env, "metadata", None)
    mode = meta.get("autoreset_mode", NEXT_STEP) if isinstance(meta, dict) else NEXT_STEP
    value = getattr(mode, "value", mode)
    if value not in (NEXT_STEP, SAME_STEP):
        raise _agrl.InvalidArgError(
            f"learn: the vector environment's autoreset_mode is {value!r}: learn takes NEXT_STEP (Gymnasium's "
            f"default) or SAME_STEP, where the vector resets a copy whose episode ended "
            f"(gymnasium.make_vec(..., vector_kwargs={{'autoreset_mode': AutoresetMode.SAME_STEP}}))")
    if value == NEXT_STEP and n_step > 1:
        raise _agrl.InvalidArgError(
            f"learn: n_step = {n_step} with the vector environment's autoreset_mode NEXT_STEP: a copy's reset "
            f"step holds no transition, and the n-step walks need every copy's transition of every step side by "
            f"side; make the vector with autoreset_mode SAME_STEP")
    return str(value)


class VectorSteps:
    """The steps of a vector environment (Gymnasium's VectorEnv API, num_envs
    copies) as a learn() loop stores them. SAME_STEP: every step holds a
    transition of every copy, a copy whose episode ended having
    info["final_obs"][i] as its next observation (and the reset observation
    in the observations returned). NEXT_STEP: the step after a copy's
    episode ended resets that copy (its action unused, reward 0): it holds
    no transition, and `valid` leaves it out."""

    def __init__(self, env: Any, copies: int, mode: str) -> None:
        self.env, self.copies = env, copies
        self.next_step = mode == NEXT_STEP
        self.resetting = np.zeros(copies, np.bool_)  # NEXT_STEP: the copies whose next step resets them

    def reset(self, seed: int) -> Obs:
        obs, _ = self.env.reset(seed=seed)
        self.resetting[:] = False
        return np.asarray(obs, dtype=np.float32)

    def step(self, actions: Any) -> Tuple[Obs, Obs, NDArray[np.float32], NDArray[np.bool_], NDArray[np.bool_],
                                          Optional[NDArray[np.bool_]]]:
        """(the observations to act on next, the next observations to store,
        rewards as float32, terminated, truncated, valid: the copies whose
        transition is stored, None for all of them). The episodes that
        ended are those of terminated | truncated among the valid copies."""
        nobs, rew, term, trunc, info = self.env.step(actions)
        obs = np.asarray(nobs, dtype=np.float32)
        rewards = np.asarray(rew, dtype=np.float32)
        terminated, truncated = np.asarray(term, dtype=np.bool_), np.asarray(trunc, dtype=np.bool_)
        done = terminated | truncated
        if self.next_step:
            valid = None if not self.resetting.any() else ~self.resetting
            self.resetting = done
            return obs, obs, rewards, terminated, truncated, valid
        stored = obs
        if done.any():
            final = info.get("final_obs") if isinstance(info, dict) else None
            if final is None:
                raise _agrl.InvalidArgError("learn: a SAME_STEP vector environment ended an episode without "
                                            "info['final_obs'], the episode's last observation")
            stored = obs.copy()
            for i in np.flatnonzero(done):
                stored[i] = np.asarray(final[i], dtype=np.float32)
        return obs, stored, rewards, terminated, truncated, None


class Episodes:
    """The episode in progress (its return and length), the count of ended
    episodes, the last WINDOW returns, and the returns and lengths of the
    episodes that ended in this call."""

    def __init__(self, episodes: int = 0, ret: float = 0.0, length: int = 0, recent: Iterable[float] = ()) -> None:
        self.episodes, self.ret, self.length = episodes, ret, length
        self.recent: Deque[float] = deque(recent, maxlen=WINDOW)
        self.returns: List[float] = []
        self.lengths: List[int] = []

    def add(self, reward: float) -> None:
        self.ret += reward
        self.length += 1

    def mean(self) -> float:
        return sum(self.recent) / len(self.recent) if self.recent else 0.0

    def end(self, step: int, updates: int, truncated: bool, **extra: Any) -> Event:
        """Ends the episode in progress; its event dict for the callback."""
        self.episodes += 1
        self.recent.append(self.ret)
        self.returns.append(self.ret)
        self.lengths.append(self.length)
        ev = {"kind": "episode", "step": step, "episodes": self.episodes, "updates": updates, "return": self.ret,
              "length": self.length, "truncated": bool(truncated), "mean_return": self.mean(), **extra}
        self.ret, self.length = 0.0, 0
        return ev

    def state(self) -> Dict[str, Any]:
        """The fields of the run's record (Run.keep) that Run.resume reads back."""
        return {"episodes": self.episodes, "ep_ret": self.ret, "ep_len": self.length, "recent": list(self.recent)}


class CopyEpisodes(Episodes):
    """Episodes of the n copies of a vector environment: each copy's episode
    in progress (rets, lens), and the count, window and lists of Episodes
    over all copies, in the order the episodes end (copy order within a
    step)."""

    def __init__(self, copies: int, episodes: int = 0, rets: Optional[Iterable[float]] = None,
                 lens: Optional[Iterable[int]] = None, recent: Iterable[float] = ()) -> None:
        super().__init__(episodes, 0.0, 0, recent)
        self.rets = [float(x) for x in rets] if rets is not None else [0.0] * copies
        self.lens = [int(x) for x in lens] if lens is not None else [0] * copies

    def add_copies(self, rewards: NDArray[np.float32], valid: Optional[NDArray[np.bool_]]) -> None:
        """Adds each copy's reward of a step (valid: the copies that took a
        transition; None: all)."""
        for i, r in enumerate(rewards.tolist()):
            if valid is None or valid[i]:
                self.rets[i] += r
                self.lens[i] += 1

    def end_copy(self, i: int, step: int, updates: int, truncated: bool, **extra: Any) -> Event:
        """Ends copy i's episode; its event (with "copy": i)."""
        self.ret, self.length = self.rets[i], self.lens[i]
        self.rets[i], self.lens[i] = 0.0, 0
        return self.end(step, updates, truncated, copy=i, **extra)

    def state(self) -> Dict[str, Any]:
        return {"episodes": self.episodes, "ep_ret": list(self.rets), "ep_len": list(self.lens),
                "recent": list(self.recent)}


def learn_args(agent: Agent, total_steps: Optional[int], eval_every: int,
               eval_env: Optional[EnvLike]) -> Tuple[int, int]:
    """learn()'s total_steps (None: the agent's) and eval_every, checked."""
    total = agent.total_steps if total_steps is None else int(total_steps)
    if total < 1:
        raise _agrl.InvalidArgError(f"learn: total_steps = {total} must be at least 1")
    eval_every = int(eval_every)
    if eval_every < 0 or (eval_every and eval_env is None):
        raise _agrl.InvalidArgError("learn: eval_every must be >= 0, and needs eval_env")
    return total, eval_every


def vector_copies(env: object) -> Optional[int]:
    """num_envs of a vector environment (Gymnasium's VectorEnv and its
    wrappers, or any environment with an int num_envs of its own), None for
    a single environment. Read without the attribute forwarding of
    Gymnasium's wrappers, which would warn for a single environment."""
    try:
        n = object.__getattribute__(env, "num_envs")
    except AttributeError:
        return None
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        return None
    return int(n)


def check_copies(agent: Agent, env: object, what: str, vectors: bool = False) -> Optional[int]:
    """The copies learn() plays: None for a single environment, num_envs
    for a vector one. Without `vectors` (a loop that plays one environment)
    refuses a vector environment; with it, refuses one of other than the
    agent's n_envs copies, or without single_observation_space and
    single_action_space. Refuses an agent whose n-step returns would walk
    every n_envs-th stored transition of one environment (n_step > 1 with
    n_envs other than 1). Called before the environment is touched."""
    cfg = agent.config
    copies = vector_copies(env)
    if copies is not None and not vectors:
        raise _agrl.InvalidArgError(
            f"learn: the environment is a vector of {copies} {'copy' if copies == 1 else 'copies'} (num_envs) "
            f"and the {what} has n_envs = {cfg['n_envs']}; learn plays one environment: give it a single one, "
            f"or step the copies with act and store (n_envs = num_envs)")
    if copies is not None:
        if copies != cfg["n_envs"]:
            raise _agrl.InvalidArgError(
                f"learn: the environment is a vector of {copies} {'copy' if copies == 1 else 'copies'} "
                f"(num_envs) and the {what} has n_envs = {cfg['n_envs']}: make the {what} with n_envs = "
                f"num_envs (for_env does), whose transitions each step stores side by side")
        env_spaces(env, "learn")
        return copies
    if cfg["n_step"] > 1 and cfg["n_envs"] != 1:
        raise _agrl.InvalidArgError(
            f"learn: n-step returns walk every n_envs-th stored transition: the {what} has n_envs = "
            f"{cfg['n_envs']}, the environment 1 copy (learn plays one environment; make the {what} with "
            f"n_envs=1)")
    return None


def env_spaces(env: Any, who: str) -> Tuple[Any, Any, Optional[int], str]:
    """(observation space, action space, copies, the action space's name) of
    env: a vector environment's single_observation_space and
    single_action_space with its num_envs, else env's own spaces and None.
    `who` names the caller in messages."""
    copies = vector_copies(env)
    if copies is None:
        return env.observation_space, env.action_space, None, "env.action_space"
    obs, act = getattr(env, "single_observation_space", None), getattr(env, "single_action_space", None)
    if obs is None or act is None:
        raise _agrl.InvalidArgError(f"{who}: a vector environment of {copies} copies (num_envs) without "
                                    f"single_observation_space and single_action_space")
    return obs, act, copies, "env.single_action_space"


def obs_dim_of(space: object, who: str) -> int:
    """The size of a 1-D observation space."""
    shape = tuple(getattr(space, "shape", None) or ())
    if len(shape) != 1:
        raise _agrl.ShapeError(f"{who}: observations of shape {shape}, not (obs_dim,)")
    return int(shape[0])


def evaluate_during(agent: Agent, eval_env: EnvLike, episodes: int, seed: int, step: int,
                    evals: List[Tuple[int, float]], callback: Optional[Callback]) -> bool:
    """An evaluation in a training loop: agent.evaluate(), kept in evals and
    reported to the callback; whether the callback stops the run."""
    mean, rets = agent.evaluate(eval_env, episodes, seed)
    evals.append((step, mean))
    return callback is not None and bool(callback({"kind": "eval", "step": step, "mean": mean, "returns": rets}))


def play(env: EnvLike, policy: Callable[[Any], Any], episodes: int, seed: int,
         start: Optional[Callable[[Any], None]] = None) -> Tuple[float, List[float]]:
    """Returns (mean, [returns]) of `episodes` episodes of policy(obs) ->
    action on env, episode k started by evaluation_start(env, seed, k).
    policy sees float32 observations; with start, start(first observation)
    is called as each episode begins and policy sees the observations as
    the environment gives them (a policy that keeps its own stack of
    frames)."""
    if int(episodes) < 1:
        raise _agrl.InvalidArgError(f"evaluate: episodes = {episodes} must be at least 1")
    returns: List[float] = []
    for k in range(int(episodes)):
        obs = evaluation_start(env, seed, k)
        if start is not None:
            start(obs)
        ret, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(
                policy(obs if start is not None else np.asarray(obs, np.float32)))
            ret += float(np.float32(reward))
            done = bool(terminated) or bool(truncated)
        returns.append(ret)
    return sum(returns) / len(returns), returns


def finish_load(agent: _A, ctx: _agrl.Context, kind: str) -> _A:
    """What load() sets on an agent read from a file on ctx: its context,
    configuration, total_steps and the record of learn() (loaded_run)."""
    agent.ctx = ctx
    agent.config = agent._config()
    agent.total_steps = agent._total_steps
    agent._run = loaded_run(agent, kind)
    return agent


def loaded_run(agent: Agent, kind: str) -> Optional[Dict[str, Any]]:
    """The record of learn() (kind: the class's _RUN_KIND) that a loaded
    agent's file holds as its run state, or None (none, or another
    program's: agrl train's checkpoints keep their own)."""
    raw = agent._run_state()
    if raw is None:
        return None
    try:
        rec = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("kind") == kind else None


def save_with_run(agent: Agent, path: Union[str, "os.PathLike[str]"]) -> None:
    """agent._save(path) with where its learn() stands as the run state."""
    run = getattr(agent, "_run", None)
    agent._save(os.fspath(path), None if run is None else json.dumps(run).encode("utf-8"))


class Run:
    """Where a learn() loop stands and its checkpoints: checkpoint_every
    (checked), the run that resume=True continues, the record that save()
    keeps as the run state (agent._run) and the saves to `checkpoint` every
    checkpoint_every steps and at the end. `what` names the agent in
    messages ("DQN", "agent"), `load` the call that reads its file; copies
    is a vector environment's num_envs (None: a single environment).

    The environment's state travels in the record: through its own
    get_state() -> bytes and set_state(bytes) (agrl's environments), else
    as _envstate reads a Gymnasium environment (a single one or a
    SyncVectorEnv of them; see that module for what it holds)."""

    def __init__(self, agent: Agent, env: EnvLike, checkpoint: Union[str, "os.PathLike[str]", None],
                 checkpoint_every: int, what: str, load: str, copies: Optional[int] = None) -> None:
        every = int(checkpoint_every)
        if every < 0 or (every and checkpoint is None):
            raise _agrl.InvalidArgError("learn: checkpoint_every must be >= 0, and needs checkpoint=PATH")
        self.agent, self.env, self.path, self.every = agent, env, checkpoint, every
        self.what, self.load, self.copies = what, load, copies
        get, put = getattr(env, "get_state", None), getattr(env, "set_state", None)
        self.why_no_state = ""
        if not (callable(get) and callable(put)):
            io, self.why_no_state = state_io(env)
            get, put = io if io is not None else (None, None)
        self.get_state: Optional[Callable[[], bytes]] = get
        self.set_state: Optional[Callable[[bytes], object]] = put
        self.can_state = callable(self.get_state) and callable(self.set_state)
        self.last_saved = 0
        self.new_obs: Any = None  # resume="new_episode": the reset's observation

    def resume(self, mode: Union[bool, str], seed: int) -> Tuple[Dict[str, Any], Optional[Obs], Episodes]:
        """The record of the agent's run: (record, obs, Episodes, or
        CopyEpisodes for a vector). resume=True restores its environment's
        state (obs: the observation in hand, None for a loop that kept it in
        its own fields); "new_episode" (one environment) resets the
        environment instead, seeded with derive_seed(seed, episodes + 1), and
        drops the episode in progress (obs: None; the caller takes the
        reset's observation, self.new_obs)."""
        if mode not in (True, "new_episode"):
            raise _agrl.InvalidArgError(f"learn: resume = {mode!r}; give False, True or \"new_episode\"")
        if mode == "new_episode" and self.copies is not None:
            raise _agrl.InvalidArgError("learn: resume=\"new_episode\" plays one environment, this one is a "
                                        f"vector of {self.copies} copies")
        run = getattr(self.agent, "_run", None)
        if run is None:
            raise _agrl.StateError(f"learn: resume=True, but this {self.what} holds no run of learn() "
                                   f"({self.load} a file that learn's checkpoint or save() wrote)")
        self.last_saved = run["step"]
        if mode == "new_episode":
            if self.agent.config.get("n_step", 1) > 1:
                raise _agrl.InvalidArgError(
                    "learn: resume=\"new_episode\" with n_step > 1: the dropped episode's last stored "
                    "transition carries no truncation, and n-step walks would run on into the next episode")
            self.new_obs = self.env.reset(seed=_agrl.derive_seed(seed, run["episodes"] + 1))[0]
            return run, None, Episodes(run["episodes"], 0.0, 0, run["recent"])
        if run["env_state"] is None or not self.can_state or self.set_state is None:
            why = f" ({self.why_no_state})" if self.why_no_state else ""
            raise _agrl.StateError(f"learn: resume needs an environment whose state can be read and set{why}, and "
                                   f"a run saved with one (one with get_state/set_state such as agrl.make's, "
                                   f"Gymnasium's MuJoCo and classic-control tasks and SyncVectorEnv of them); "
                                   f"resume=\"new_episode\" continues without them from a new episode")
        obs = None if run.get("obs") is None else np.asarray(run["obs"], dtype=np.float32)
        want = 1 if self.copies is None else 2
        if obs is not None and (obs.ndim != want or (self.copies is not None and obs.shape[0] != self.copies)):
            raise _agrl.InvalidArgError(f"learn: resume: the run played observations of shape {obs.shape}, this "
                                        f"environment has {self.copies or 1} {'copy' if not self.copies else 'copies'}")
        self.set_state(bytes.fromhex(run["env_state"]))
        eps: Episodes
        if self.copies is None:
            eps = Episodes(run["episodes"], run["ep_ret"], run["ep_len"], run["recent"])
        else:
            eps = CopyEpisodes(self.copies, run["episodes"], run["ep_ret"], run["ep_len"], run["recent"])
        return run, obs, eps

    def start(self, seed: int, steps: Optional[VectorSteps] = None) -> Tuple[Obs, Episodes]:
        """A new run: (the first observation, reset with derive_seed(seed,
        0), Episodes); of a vector through `steps` (copy i reset with that
        seed + i, Gymnasium's rule), with CopyEpisodes."""
        seed0 = _agrl.derive_seed(seed, 0)
        if steps is None:
            return env_reset(self.env, seed=seed0), Episodes()
        return steps.reset(seed0), CopyEpisodes(steps.copies)

    def start_raw(self, seed: int) -> Tuple[Any, Episodes]:
        """start() with the observation as the environment gives it."""
        return self.env.reset(seed=_agrl.derive_seed(seed, 0))[0], Episodes()

    def check_obs(self, obs: Obs, obs_dim: int) -> None:
        want = (obs_dim,) if self.copies is None else (self.copies, obs_dim)
        if obs.shape != want:
            raise _agrl.ShapeError(f"learn: the environment's observations are {obs.shape}, the {self.what}'s "
                                   f"{want}")

    def keep(self, step: int, eps: Episodes, obs: Optional[Obs], **fields: Any) -> None:
        """The agent's record of the run at `step` (with the loop's own
        fields; obs None for a loop that keeps its observation in them)."""
        state = self.get_state().hex() if self.can_state and self.get_state is not None else None
        self.agent._run = {"kind": self.agent._RUN_KIND, "step": step, **fields, **eps.state(),
                           "obs": None if obs is None else np.asarray(obs, dtype=np.float64).tolist(),
                           "env_state": state}

    def tick(self, step: int, record: Callable[[], None]) -> None:
        """After a step: record() and a save when checkpoint_every steps have passed."""
        if self.every and step - self.last_saved >= self.every and self.path is not None:
            self.last_saved = step
            record()
            self.agent.save(self.path)

    def finish(self, step: int, eps: Episodes, evals: List[Tuple[int, float]],
               record: Callable[[], None]) -> LearnResult:
        """record() where the run stopped (what save() keeps), its last save,
        and learn()'s result."""
        record()
        if self.path is not None and self.last_saved != step:
            self.agent.save(self.path)
        return {"steps": step, "episodes": eps.episodes, "returns": eps.returns, "lengths": eps.lengths,
                "evals": evals}
