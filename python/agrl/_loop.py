"""What the training loops of agrl.DQN, agrl.SAC and agrl.TD3 share: a step
of a Gymnasium-style environment as the C loops take it, the bookkeeping of
episodes, and evaluation episodes."""

import json
import os
from collections import deque

import numpy as np

from . import _agrl
from .envs import evaluation_start

WINDOW = 20  # the mean_return of the events: over the last 20 episodes


def env_step(env, action):
    """env.step(action) as agrl's C loops see it: (next_obs as float32, the
    reward rounded to float32, terminated, truncated)."""
    next_obs, reward, terminated, truncated, _ = env.step(action)
    return np.asarray(next_obs, dtype=np.float32), float(np.float32(reward)), bool(terminated), bool(truncated)


def env_reset(env, **kw):
    obs, _ = env.reset(**kw)
    return np.asarray(obs, dtype=np.float32)


class Episodes:
    """The episode in progress (its return and length), the count of ended
    episodes, the last WINDOW returns, and the returns and lengths of the
    episodes that ended in this call."""

    def __init__(self, episodes=0, ret=0.0, length=0, recent=()):
        self.episodes, self.ret, self.length = episodes, ret, length
        self.recent = deque(recent, maxlen=WINDOW)
        self.returns, self.lengths = [], []

    def add(self, reward):
        self.ret += reward
        self.length += 1

    def mean(self):
        return sum(self.recent) / len(self.recent) if self.recent else 0.0

    def end(self, step, updates, truncated, **extra):
        """Ends the episode in progress; its event dict for the callback."""
        self.episodes += 1
        self.recent.append(self.ret)
        self.returns.append(self.ret)
        self.lengths.append(self.length)
        ev = {"kind": "episode", "step": step, "episodes": self.episodes, "updates": updates, "return": self.ret,
              "length": self.length, "truncated": bool(truncated), "mean_return": self.mean(), **extra}
        self.ret, self.length = 0.0, 0
        return ev


def learn_args(agent, total_steps, eval_every, eval_env):
    """learn()'s total_steps (None: the agent's) and eval_every, checked."""
    total = agent.total_steps if total_steps is None else int(total_steps)
    if total < 1:
        raise _agrl.InvalidArgError(f"learn: total_steps = {total} must be at least 1")
    eval_every = int(eval_every)
    if eval_every < 0 or (eval_every and eval_env is None):
        raise _agrl.InvalidArgError("learn: eval_every must be >= 0, and needs eval_env")
    return total, eval_every


def vector_copies(env):
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


def check_copies(agent, env, what):
    """learn() plays one environment, one transition per step: refuses a
    vector environment, and an agent whose n-step returns would walk every
    n_envs-th stored transition (n_step > 1 with n_envs other than 1: the
    walk would stride n_envs transitions of that one environment). Called
    before the environment is touched."""
    cfg = agent.config
    copies = vector_copies(env)
    if copies is not None:
        raise _agrl.InvalidArgError(
            f"learn: the environment is a vector of {copies} {'copy' if copies == 1 else 'copies'} (num_envs) "
            f"and the {what} has n_envs = {cfg['n_envs']}; learn plays one environment: give it a single one, "
            f"or step the copies with act and store (n_envs = num_envs)")
    if cfg["n_step"] > 1 and cfg["n_envs"] != 1:
        raise _agrl.InvalidArgError(
            f"learn: n-step returns walk every n_envs-th stored transition: the {what} has n_envs = "
            f"{cfg['n_envs']}, the environment 1 copy (learn plays one environment; make the {what} with "
            f"n_envs=1)")


def env_spaces(env, who):
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


def obs_dim_of(space, who):
    """The size of a 1-D observation space."""
    shape = tuple(getattr(space, "shape", None) or ())
    if len(shape) != 1:
        raise _agrl.ShapeError(f"{who}: observations of shape {shape}, not (obs_dim,)")
    return int(shape[0])


def evaluate_during(agent, eval_env, episodes, seed, step, evals, callback):
    """An evaluation in a training loop: agent.evaluate(), kept in evals and
    reported to the callback; whether the callback stops the run."""
    mean, rets = agent.evaluate(eval_env, episodes, seed)
    evals.append((step, mean))
    return callback is not None and bool(callback({"kind": "eval", "step": step, "mean": mean, "returns": rets}))


def play(env, policy, episodes, seed):
    """Returns (mean, [returns]) of `episodes` episodes of policy(obs) ->
    action on env, episode k started by evaluation_start(env, seed, k)."""
    if int(episodes) < 1:
        raise _agrl.InvalidArgError(f"evaluate: episodes = {episodes} must be at least 1")
    returns = []
    for k in range(int(episodes)):
        obs = evaluation_start(env, seed, k)
        ret, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated = env_step(env, policy(np.asarray(obs, np.float32)))
            ret += reward
            done = terminated or truncated
        returns.append(ret)
    return sum(returns) / len(returns), returns


def finish_load(agent, ctx, kind):
    """What load() sets on an agent read from a file on ctx: its context,
    configuration, total_steps and the record of learn() (loaded_run)."""
    agent.ctx = ctx
    agent.config = agent._config()
    agent.total_steps = agent._total_steps
    agent._run = loaded_run(agent, kind)
    return agent


def loaded_run(agent, kind):
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


def save_with_run(agent, path):
    """agent._save(path) with where its learn() stands as the run state."""
    run = getattr(agent, "_run", None)
    agent._save(os.fspath(path), None if run is None else json.dumps(run).encode("utf-8"))


class Run:
    """Where a learn() loop stands and its checkpoints: checkpoint_every
    (checked), the run that resume=True continues, the record that save()
    keeps as the run state (agent._run) and the saves to `checkpoint` every
    checkpoint_every steps and at the end. `what` names the agent in
    messages ("DQN", "agent"), `load` the call that reads its file."""

    def __init__(self, agent, env, checkpoint, checkpoint_every, what, load):
        every = int(checkpoint_every)
        if every < 0 or (every and checkpoint is None):
            raise _agrl.InvalidArgError("learn: checkpoint_every must be >= 0, and needs checkpoint=PATH")
        self.agent, self.env, self.path, self.every = agent, env, checkpoint, every
        self.what, self.load = what, load
        self.can_state = callable(getattr(env, "get_state", None)) and callable(getattr(env, "set_state", None))
        self.last_saved = 0

    def resume(self):
        """The record of the agent's run (its environment's state restored):
        (record, obs, Episodes)."""
        run = getattr(self.agent, "_run", None)
        if run is None:
            raise _agrl.StateError(f"learn: resume=True, but this {self.what} holds no run of learn() "
                                   f"({self.load} a file that learn's checkpoint or save() wrote)")
        if run["env_state"] is None or not self.can_state:
            raise _agrl.StateError("learn: resume needs an environment with get_state/set_state, and a "
                                   "run saved with one (agrl.make's environments have them)")
        self.env.set_state(bytes.fromhex(run["env_state"]))
        self.last_saved = run["step"]
        eps = Episodes(run["episodes"], run["ep_ret"], run["ep_len"], run["recent"])
        return run, np.asarray(run["obs"], dtype=np.float32), eps

    def start(self, seed):
        """A new run: (the first observation, reset with derive_seed(seed, 0), Episodes)."""
        return env_reset(self.env, seed=_agrl.derive_seed(seed, 0)), Episodes()

    def check_obs(self, obs, obs_dim):
        if obs.shape != (obs_dim,):
            raise _agrl.ShapeError(f"learn: the environment's observations are {obs.shape}, the {self.what}'s "
                                   f"({obs_dim},)")

    def keep(self, step, eps, obs, **fields):
        """The agent's record of the run at `step` (with the loop's own fields)."""
        self.agent._run = {"kind": self.agent._RUN_KIND, "step": step, **fields, "episodes": eps.episodes,
                           "ep_ret": eps.ret, "ep_len": eps.length, "recent": list(eps.recent),
                           "obs": [float(x) for x in obs],
                           "env_state": self.env.get_state().hex() if self.can_state else None}

    def tick(self, step, record):
        """After a step: record() and a save when checkpoint_every steps have passed."""
        if self.every and step - self.last_saved >= self.every:
            self.last_saved = step
            record()
            self.agent.save(self.path)

    def finish(self, step, eps, evals, record):
        """record() where the run stopped (what save() keeps), its last save,
        and learn()'s result."""
        record()
        if self.path is not None and self.last_saved != step:
            self.agent.save(self.path)
        return {"steps": step, "episodes": eps.episodes, "returns": eps.returns, "lengths": eps.lengths,
                "evals": evals}
