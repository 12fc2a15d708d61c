"""agrl.DQN: epsilon-greedy acting, a replay table on the device and the
recorded update, with a training loop for any Gymnasium-style environment."""

from collections import deque

import numpy as np

from . import _agrl


class DQN(_agrl._DQN):
    """DQN(ctx, obs_dim, n_actions, total_steps=100000, **config)

    ``config`` takes every field of the C library's ``ag_dqn_config`` by name
    (``hidden``, ``lr``, ``gamma``, ``batch_size``, ``buffer_size``,
    ``learning_starts``, ``train_freq``, ``gradient_steps``,
    ``target_update_interval``, ``tau``, ``exploration_fraction``,
    ``eps_start``, ``eps_end``, ``max_grad_norm``, ``double_dqn``, ``huber``,
    ``seed``, ``fused``); the defaults are ``agrl.DQN.defaults()``.
    ``total_steps`` plans the exploration schedule.

    - ``act(obs, explore=True, step=0)``: an action (an int for one
      observation, an int32 array for (n, obs_dim)).
    - ``store(obs, action, reward, next_obs, terminated)``: one transition or
      a batch; next_obs is the true last observation of an episode that ended.
    - ``train(gradient_steps)``: runs the recorded updates, returns the loss.
    - ``update_target()``, ``save(path)``, ``load(path)``.
    - ``learn(env, total_steps, callback=None)``: the training loop.
    """

    def __init__(self, ctx, obs_dim, n_actions, total_steps=100000, **config):
        if not isinstance(ctx, _agrl.Context):
            ctx = _agrl.Context(ctx)
        defaults = _agrl.dqn_defaults()
        for k in config:
            if k not in defaults:
                raise _agrl.InvalidArgError(f"DQN: unknown option {k!r} (options: {', '.join(sorted(defaults))})")
        self.ctx = ctx
        self.config = {**defaults, **config}
        self.total_steps = total_steps
        super().__init__(ctx, obs_dim, n_actions, total_steps, dict(config))

    @staticmethod
    def defaults():
        """The default configuration (Stable-Baselines3 zoo's CartPole DQN, tuned)."""
        return _agrl.dqn_defaults()

    def learn(self, env, total_steps=None, callback=None):
        """Trains on `env` (Gymnasium's API: reset(seed=) -> (obs, info),
        step(a) -> (obs, reward, terminated, truncated, info)) for
        total_steps environment steps, as the C library's ag_dqn_learn does
        on one copy: act, step, store (with the true last observation),
        target updates every target_update_interval steps, a training phase
        of gradient_steps updates every train_freq steps once
        learning_starts steps have been taken. The first reset is seeded with
        derive_seed(config seed, 0), so that agrl's own environments replay
        the episodes of `agrl train --seed S`.

        callback(event) receives a dict for every ended episode ("episode":
        return, length, truncated, mean of the last 20 returns) and every
        training phase ("phase": loss); a true return stops the run.
        Returns a dict with the episode returns and lengths."""
        cfg = self.config
        total = self.total_steps if total_steps is None else int(total_steps)
        if total < 1:
            raise _agrl.InvalidArgError(f"learn: total_steps = {total} must be at least 1")
        obs, _ = env.reset(seed=_agrl.derive_seed(cfg["seed"], 0))
        obs = np.asarray(obs, dtype=np.float32)
        if obs.shape != (self.obs_dim,):
            raise _agrl.ShapeError(f"learn: the environment's observations are {obs.shape}, the DQN's ({self.obs_dim},)")
        step = episodes = since_train = since_target = 0
        updates_at_target = self.updates
        ep_ret, ep_len = 0.0, 0
        recent = deque(maxlen=20)
        returns, lengths = [], []
        stop = False
        while not stop and step < total:
            action = self.act(obs, True, step)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            next_obs = np.asarray(next_obs, dtype=np.float32)
            reward = float(np.float32(reward))
            self.store(obs, action, reward, next_obs, 1 if terminated else 0)
            ep_ret += reward
            ep_len += 1
            step += 1
            since_train += 1
            since_target += 1
            if terminated or truncated:
                episodes += 1
                recent.append(ep_ret)
                returns.append(ep_ret)
                lengths.append(ep_len)
                if callback is not None:
                    ev = {"kind": "episode", "step": step, "episodes": episodes, "updates": self.updates,
                          "return": ep_ret, "length": ep_len, "truncated": bool(truncated and not terminated),
                          "mean_return": sum(recent) / len(recent), "epsilon": self.epsilon(step)}
                    stop = bool(callback(ev))
                ep_ret, ep_len = 0.0, 0
                obs, _ = env.reset()
                obs = np.asarray(obs, dtype=np.float32)
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
                    loss = self.train(cfg["gradient_steps"])
                    if callback is not None:
                        ev = {"kind": "phase", "step": step, "episodes": episodes, "updates": self.updates,
                              "loss": loss, "mean_return": sum(recent) / len(recent) if recent else 0.0,
                              "epsilon": self.epsilon(step)}
                        stop = bool(callback(ev)) or stop
        return {"steps": step, "episodes": episodes, "returns": returns, "lengths": lengths}

    def __repr__(self):
        try:
            return f"<agrl.DQN {self.obs_dim} -> {self.n_actions}, {self.updates} updates on {self.ctx.device}>"
        except _agrl.Error:
            return "<agrl.DQN (freed)>"
