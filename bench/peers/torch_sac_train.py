"""A complete PyTorch SAC training run on Pendulum-v1, CleanRL's
sac_continuous_action.py loop with agrl's update and settings: the peer of
`agrl train --algo sac --env pendulum` for environment steps per second
(see README.md).

usage: python3 bench/peers/torch_sac_train.py [--device cpu|cuda] [--total-steps N]
                                              [--seed S] [--learning-starts N] [--threads N]

The loop (one environment, CleanRL's order):

  - the first learning_starts (1000) steps act uniformly at random in the
    action bounds, then by a sample of the policy (torch, on the device, one
    observation at a time: its action is read back every step);
  - every step stores (obs, action, reward, next_obs, terminated) and, once
    past learning_starts, runs one update of a batch of 256 drawn uniformly
    from what is stored; the target bootstraps on truncation (Pendulum's
    200-step limit), not on termination;
  - the update is torch_sac.py's SAC update (ac_defs.py: twin critics and
    actor 256-256, Adam 1e-3 for both and for the temperature, alpha tuned
    towards -1, Polyak 0.005 every update), eager, from ac_defs' weights.

The replay table is a (buffer 1,000,000, 9) f32 tensor on the device in the
update rows' layout (actions in [-1, 1]); each step writes its row there
before the update reads it (CleanRL keeps SB3's buffer on the host and
copies each batch to the device; on the device is the faster of the two).

The environment is gymnasium's Pendulum-v1 when gymnasium imports, else the
numpy re-implementation below (gymnasium's dynamics, reward, 200-step limit
and seeding: the same episodes). Progress goes to stderr; the result is one
JSON line on stdout: steps per second (wall time of the whole loop: acting,
stepping, storing, training; the device synchronised at the end) and the
mean return of the last 10 (and 20) episodes.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ac_defs as D  # noqa: E402
import peerlib as pl  # noqa: E402
from torch_dqn_train import GymCartPole  # noqa: E402

IMPL = "torch-sac"
WORK = "train_pendulum_sac"
BUFFER = 1_000_000


class NumpyPendulum:
    """gymnasium 1.x Pendulum-v1 (g = 10) with its TimeLimit of 200 steps:
    reset() -> obs, step(a) -> obs, r, terminated, truncated."""

    max_speed, max_torque, dt, g, m, l, max_steps = 8.0, 2.0, 0.05, 10.0, 1.0, 1.0, 200
    name = "numpy Pendulum-v1 re-implementation"

    def __init__(self, np, seed):
        self.np, self.rng, self.t = np, np.random.default_rng(seed), 0
        self.th = self.thdot = 0.0

    def _obs(self):
        np = self.np
        return np.array([np.cos(self.th), np.sin(self.th), self.thdot], dtype=np.float32)

    def reset(self):
        self.th, self.thdot = self.rng.uniform(low=[-math.pi, -1.0], high=[math.pi, 1.0])
        self.t = 0
        return self._obs()

    def step(self, action):
        # gymnasium's arithmetic, numpy scalars and all (the torque stays f32)
        np = self.np
        u = np.clip(np.asarray(action, np.float32), -self.max_torque, self.max_torque)[0]
        th, thdot = self.th, self.thdot
        norm = ((th + np.pi) % (2 * np.pi)) - np.pi
        cost = norm ** 2 + 0.1 * thdot ** 2 + 0.001 * (u ** 2)
        thdot = thdot + (3 * self.g / (2 * self.l) * np.sin(th) + 3.0 / (self.m * self.l ** 2) * u) * self.dt
        thdot = np.clip(thdot, -self.max_speed, self.max_speed)
        self.th, self.thdot = th + thdot * self.dt, thdot
        self.t += 1
        return self._obs(), float(-cost), False, self.t >= self.max_steps


class GymPendulum(GymCartPole):
    """gymnasium.make('Pendulum-v1') behind the same small interface (reset
    and step as torch_dqn_train's wrapper: the first reset seeded)."""

    def __init__(self, gym, seed):
        self.env, self.seed = gym.make("Pendulum-v1"), seed
        self.name = f"gymnasium {gym.__version__} Pendulum-v1"


def make_env(np, seed):
    try:
        import gymnasium as gym
        return GymPendulum(gym, seed)
    except Exception:
        return NumpyPendulum(np, seed)


def run(torch, np, args, device):
    import torch_sac
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed + 1)
    env = make_env(np, args.seed)
    table = torch.zeros(BUFFER, D.ROW, device=device)
    ac = torch_sac.AC(torch, np, "sac", table, device)
    ac.n = 0  # transitions stored: the update draws from [0, n)
    row = np.zeros(D.ROW, np.float32)
    half, mid = 0.5 * (D.HIGH - D.LOW), 0.5 * (D.HIGH + D.LOW)
    returns, ep_ret, updates, closs = [], 0.0, 0, float("nan")
    total, report_every = args.total_steps, max(1, args.total_steps // 10)
    obs = np.asarray(env.reset(), np.float32)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for step in range(1, total + 1):
        if step <= args.learning_starts:
            y = rng.uniform(-1.0, 1.0, D.ACT).astype(np.float32)
        else:
            with torch.no_grad():
                a, _ = ac.sample(torch.as_tensor(obs, device=device)[None], None)
            y = a[0].cpu().numpy()
        action = mid + half * y
        next_obs, reward, terminated, truncated = env.step(action)
        next_obs = np.asarray(next_obs, np.float32)
        row[D.C_OBS[0]:D.C_OBS[1]], row[D.C_ACT[0]:D.C_ACT[1]], row[D.C_REW] = obs, y, reward
        row[D.C_NOBS[0]:D.C_NOBS[1]], row[D.C_TERM] = next_obs, float(terminated)  # bootstrap on truncation
        table[(step - 1) % BUFFER].copy_(torch.from_numpy(row))
        ac.n = min(step, BUFFER)
        ep_ret += reward
        if terminated or truncated:
            returns.append(ep_ret)
            ep_ret, obs = 0.0, np.asarray(env.reset(), np.float32)
        else:
            obs = next_obs
        if step > args.learning_starts and ac.n >= D.BATCH:
            c, _ = ac.update()
            updates += 1
            if step % report_every == 0:
                closs = c.item()
        if step % report_every == 0:
            last = returns[-10:]
            sys.stderr.write(
                f"step {step:7d}  episodes {len(returns):4d}  mean return (last 10) "
                f"{(sum(last) / len(last)) if last else float('nan'):8.1f}  critic loss {closs:.4f}  "
                f"alpha {ac.log_alpha.exp().item():.4f}  {step / (time.perf_counter() - t0):7.0f} steps/s\n")
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    mean = lambda v: round(sum(v) / len(v), 2) if v else None  # noqa: E731
    return dict(impl=IMPL, work=WORK, steps=total, seconds=round(seconds, 3),
                steps_per_s=round(total / seconds, 1), final_mean_return_10=mean(returns[-10:]),
                final_mean_return_20=mean(returns[-20:]), episodes=len(returns), updates=updates,
                learning_starts=args.learning_starts, env=env.name, device=device.type,
                threads=torch.get_num_threads(), torch=torch.__version__)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--total-steps", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--learning-starts", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    args = ap.parse_args()
    if args.total_steps < 1 or args.learning_starts < 0:
        ap.error("--total-steps must be >= 1 and --learning-starts >= 0")
    try:
        import numpy as np
    except Exception as e:
        pl.absent(IMPL, f"numpy does not import: {type(e).__name__}: {e}")
        return
    torch = pl.import_torch(IMPL, args.device)
    if torch is None:
        return
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    sys.stderr.write(f"torch_sac_train: {json.dumps(vars(args))}\n")
    pl.emit(run(torch, np, args, torch.device(args.device)))


if __name__ == "__main__":
    main()
