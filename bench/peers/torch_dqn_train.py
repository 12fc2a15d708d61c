"""A complete PyTorch DQN training run on CartPole-v1, the peer of agrl's
trainer for environment steps per second (see README.md).

usage: python3 bench/peers/torch_dqn_train.py [--device cpu|cuda] [--config FILE]
                                              [--total-steps N] [--seed S]

The algorithm is stable-baselines3's DQN with RL-Zoo's CartPole-v1
hyper-parameters (the defaults below; a JSON --config file overrides any of
them; --total-steps and --seed override the file):

  - one environment; the first `learning_starts` steps act uniformly at
    random, then epsilon-greedy with epsilon falling linearly from
    exploration_initial_eps to exploration_final_eps over the first
    exploration_fraction of total_steps;
  - every `train_freq` steps (once past learning_starts) `gradient_steps`
    updates of `batch_size` transitions drawn uniformly from the replay
    buffer; target r + gamma (1 - terminated) max_a' Q_target(s', a')
    (argmax from the online net when double_dqn); Huber (or MSE) loss,
    gradient norm clipped to max_grad_norm (unless null), Adam(lr);
  - the target network is a hard copy of the online one every
    `target_update_interval` ENVIRONMENT steps (Stable-Baselines3's
    convention, and agrl's);
  - bootstrapping on truncation (the 500-step limit), not on termination.

The replay buffer is a (buffer_size, 11) f32 tensor on the device, laid out
as agrl's cartpole rows (obs 4, action, reward, next obs 4, done); the
transitions of a rollout are staged on the host and uploaded in one copy
before its training phase (nothing samples them earlier). Actions are chosen
by the online network on the device, one observation at a time.

The environment is gymnasium's CartPole-v1 when gymnasium imports, else the
numpy re-implementation below (the same equations, constants and seeding: a
run gives the same returns with either). Progress goes to stderr; the result
is one JSON line on stdout.

"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib as pl  # noqa: E402

IMPL = "torch_dqn"
# agrl's defaults (include/agrl/agent.h, ag_dqn_defaults)
DEFAULTS = dict(total_steps=100000, buffer_size=100000, learning_starts=1000, batch_size=128,
                gamma=0.99, lr=7e-4, train_freq=256, gradient_steps=128,
                target_update_interval=10, exploration_fraction=0.16,
                exploration_initial_eps=1.0, exploration_final_eps=0.01, hidden=[256, 256],
                huber=True, max_grad_norm=10.0, double_dqn=True, seed=0)
OBS, N_ACT = 4, 2
ROW = 2 * OBS + 3  # obs[0:4], action[4], reward[5], next_obs[6:10], done[10]


class NumpyCartPole:
    """gymnasium 1.0 CartPole-v1 (Euler, reward 1 every step) with its
    TimeLimit of 500 steps: reset() -> obs, step(a) -> obs, r, term, trunc."""

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass = masspole + masscart
    polemass_length = masspole * length
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    max_steps = 500
    name = "numpy CartPole-v1 re-implementation"

    def __init__(self, np, seed):
        self.np, self.rng = np, np.random.default_rng(seed)
        self.state, self.t = None, 0

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=(4,))
        self.t = 0
        return self.state.astype(self.np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + self.polemass_length * theta_dot ** 2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = self.np.array((x, x_dot, theta, theta_dot), dtype=self.np.float64)
        self.t += 1
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold or theta > self.theta_threshold)
        truncated = self.t >= self.max_steps and not terminated
        return self.state.astype(self.np.float32), 1.0, terminated, truncated


class GymCartPole:
    """gymnasium.make('CartPole-v1') behind the same small interface."""

    def __init__(self, gym, seed):
        self.env, self.seed = gym.make("CartPole-v1"), seed
        self.name = f"gymnasium {gym.__version__} CartPole-v1"

    def reset(self):
        obs, _ = self.env.reset(seed=self.seed)
        self.seed = None  # seed the first reset only, as SB3 does
        return obs

    def step(self, action):
        obs, r, term, trunc, _ = self.env.step(action)
        return obs, float(r), bool(term), bool(trunc)


def make_env(np, seed):
    try:
        import gymnasium as gym
        return GymCartPole(gym, seed)
    except Exception:
        return NumpyCartPole(np, seed)


def load_config(args):
    cfg = dict(DEFAULTS)
    if args.config:
        with open(args.config) as f:
            user = json.load(f)
        unknown = sorted(set(user) - set(DEFAULTS))
        if unknown:
            raise SystemExit(f"torch_dqn_train: unknown config keys {unknown}")
        cfg.update(user)
    if args.total_steps is not None:
        cfg["total_steps"] = args.total_steps
    if args.seed is not None:
        cfg["seed"] = args.seed
    return cfg


def epsilon(cfg, step):
    """SB3's linear schedule over the first exploration_fraction of the run."""
    frac = step / cfg["total_steps"]
    e0, e1, f = cfg["exploration_initial_eps"], cfg["exploration_final_eps"], \
        cfg["exploration_fraction"]
    return e1 if f <= 0 or frac > f else e0 + frac * (e1 - e0) / f


class Learner:
    """The device-resident replay buffer, the networks and the update."""

    def __init__(self, torch, np, cfg, device):
        self.torch, self.np, self.cfg, self.device = torch, np, cfg, device
        sizes = [OBS] + list(cfg["hidden"]) + [N_ACT]
        self.online = pl.make_mlp(torch, sizes, device)
        self.target = pl.make_mlp(torch, sizes, device)
        self.target.load_state_dict(self.online.state_dict())
        self.target.requires_grad_(False)
        self.opt = torch.optim.Adam(self.online.parameters(), lr=cfg["lr"])
        self.buf = torch.zeros(cfg["buffer_size"], ROW, device=device)
        self.pos, self.size = 0, 0                # ring position, transitions stored
        self.stage = np.zeros((cfg["train_freq"] + 1, ROW), np.float32)
        self.staged = 0
        self.grad_steps = 0
        self.last_loss = float("nan")

    def act(self, obs):
        with self.torch.no_grad():
            q = self.online(self.torch.as_tensor(obs, device=self.device)[None])
            return int(q.argmax(1).item())

    def store(self, obs, action, reward, next_obs, terminated):
        """Stages one transition on the host; flush() uploads the stage."""
        r = self.stage[self.staged]
        r[0:OBS], r[OBS], r[OBS + 1] = obs, action, reward
        r[OBS + 2:2 * OBS + 2], r[2 * OBS + 2] = next_obs, float(terminated)
        self.staged += 1
        if self.staged == len(self.stage):
            self.flush()

    def flush(self):
        """Uploads the staged transitions into the ring (one copy, two at a wrap)."""
        n, cap = self.staged, self.cfg["buffer_size"]
        src = self.torch.from_numpy(self.stage[:n])
        done = 0
        while done < n:
            k = min(n - done, cap - self.pos)
            self.buf[self.pos:self.pos + k].copy_(src[done:done + k], non_blocking=False)
            self.pos, done = (self.pos + k) % cap, done + k
        self.size = min(cap, self.size + n)
        self.staged = 0

    def train(self, steps):
        torch, cfg, F = self.torch, self.cfg, self.torch.nn.functional
        self.flush()
        for _ in range(steps):
            idx = torch.randint(0, self.size, (cfg["batch_size"],), device=self.device)
            b = self.buf[idx]
            obs, action, reward = b[:, 0:OBS], b[:, OBS].long(), b[:, OBS + 1]
            next_obs, done = b[:, OBS + 2:2 * OBS + 2], b[:, 2 * OBS + 2]
            with torch.no_grad():
                qt = self.target(next_obs)
                if cfg["double_dqn"]:
                    q_next = qt.gather(1, self.online(next_obs).argmax(1, keepdim=True)).squeeze(1)
                else:
                    q_next = qt.max(1).values
                y = reward + cfg["gamma"] * (1.0 - done) * q_next
            q = self.online(obs).gather(1, action[:, None]).squeeze(1)
            loss = F.smooth_l1_loss(q, y) if cfg["huber"] else F.mse_loss(q, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg["max_grad_norm"] is not None:
                torch.nn.utils.clip_grad_norm_(self.online.parameters(), cfg["max_grad_norm"])
            self.opt.step()
            self.grad_steps += 1
        self.last_loss = loss.item()

    def update_target(self):
        with self.torch.no_grad():
            for tp, p in zip(self.target.parameters(), self.online.parameters()):
                tp.copy_(p)


def run(torch, np, cfg, device):
    torch.manual_seed(cfg["seed"])
    rng = np.random.default_rng(cfg["seed"] + 1)
    env = make_env(np, cfg["seed"])
    learner = Learner(torch, np, cfg, device)
    returns, ep_ret = [], 0.0
    total, report_every = cfg["total_steps"], max(1, cfg["total_steps"] // 10)
    obs = env.reset()
    t0 = time.perf_counter()
    for step in range(1, total + 1):
        if step <= cfg["learning_starts"] or rng.random() < epsilon(cfg, step):
            action = int(rng.integers(N_ACT))
        else:
            action = learner.act(obs)
        next_obs, reward, terminated, truncated = env.step(action)
        learner.store(obs, action, reward, next_obs, terminated)  # bootstrap on truncation
        ep_ret += reward
        if terminated or truncated:
            returns.append(ep_ret)
            ep_ret, obs = 0.0, env.reset()
        else:
            obs = next_obs
        if step % cfg["target_update_interval"] == 0:
            learner.update_target()
        if step > cfg["learning_starts"] and step % cfg["train_freq"] == 0:
            learner.train(cfg["gradient_steps"])
        if step % report_every == 0:
            last = returns[-20:]
            sys.stderr.write(
                f"step {step:7d}  episodes {len(returns):5d}  mean return (last 20) "
                f"{(sum(last) / len(last)) if last else float('nan'):7.1f}  "
                f"eps {epsilon(cfg, step):.3f}  loss {learner.last_loss:.4f}  "
                f"{step / (time.perf_counter() - t0):8.0f} steps/s\n")
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    last = returns[-20:]
    return dict(impl=IMPL, work="train_cartpole_dqn", steps=total, seconds=round(seconds, 3),
                steps_per_s=round(total / seconds, 1),
                final_mean_return_20=round(sum(last) / len(last), 2) if last else None,
                episodes=len(returns), gradient_steps=learner.grad_steps,
                env=env.name, device=device.type)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--config", help="JSON file of hyper-parameters (keys of DEFAULTS)")
    ap.add_argument("--total-steps", type=int, help="overrides total_steps")
    ap.add_argument("--seed", type=int, help="overrides seed")
    args = ap.parse_args()
    cfg = load_config(args)
    try:
        import numpy as np
    except Exception as e:
        pl.absent(IMPL, f"numpy does not import: {type(e).__name__}: {e}")
        return
    torch = pl.import_torch(IMPL, args.device)
    if torch is None:
        return
    sys.stderr.write(f"torch_dqn_train: {json.dumps(cfg)}\n")
    pl.emit(run(torch, np, cfg, torch.device(args.device)))


if __name__ == "__main__":
    main()
