"""A CleanRL-style DQN in PyTorch whose replay buffer is agrl's, on the GPU.

usage: python3 examples/python/dqn_torch.py [--steps 60000] [--device cuda|cpu] [--seed 0]
           [--env CartPole-v1] [other hyper-parameters: --help]

The Q-network, the loss and Adam are plain PyTorch; the transitions live in
an agrl.ReplayBuffer on the same device. Each step's transition is added
from the host (a few hundred bytes cross the bus); a training step samples a
batch on the device and hands it to torch with from_dlpack, which
shares agrl's memory (no copy; torch's stream waits for agrl's queue). The
environment is Gymnasium's when it is installed, else agrl's built-in one
(agrl.make: the same CartPole-v1 dynamics). Prints progress, and the mean
return of the last 20 episodes at the end.
"""
import argparse
import random
import sys
import time
from typing import TYPE_CHECKING, Any, List, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.dlpack import from_dlpack

import agrl

if TYPE_CHECKING:
    import gymnasium


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60_000, help="environment steps (60,000)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    help="cuda (default when torch sees a GPU), cuda:N or cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--env", default="CartPole-v1")
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--buffer-size", type=int, default=50_000)
    ap.add_argument("--gamma", type=float, default=0.99)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--start-e", type=float, default=1.0)
    ap.add_argument("--end-e", type=float, default=0.02)
    ap.add_argument("--exploration-fraction", type=float, default=0.2,
                    help="the share of the run over which epsilon falls from start-e to end-e")
    ap.add_argument("--learning-starts", type=int, default=1000)
    ap.add_argument("--train-frequency", type=int, default=2, help="a training step every N environment steps")
    ap.add_argument("--target-network-frequency", type=int, default=500, help="a hard target copy every N steps")
    args = ap.parse_args()
    if args.steps < 1 or args.batch_size < 1 or args.buffer_size < args.batch_size:
        ap.error("--steps >= 1, --batch-size >= 1 and --buffer-size >= --batch-size")
    return args


def make_env(name: str) -> Tuple["gymnasium.Env[Any, Any]", str]:
    try:
        import gymnasium as gym
        return gym.make(name), f"gymnasium {gym.__version__}"
    except ImportError:
        return agrl.make(name), "agrl's built-in"


class QNetwork(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(nn.Linear(obs_dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                                     nn.Linear(84, n_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q: torch.Tensor = self.network(x)
        return q


def linear_schedule(start_e: float, end_e: float, duration: float, t: int) -> float:
    return max(start_e + (end_e - start_e) * t / duration, end_e)


def main() -> int:
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    env, env_kind = make_env(args.env)
    obs_shape, action_space = env.observation_space.shape, env.action_space
    if not isinstance(action_space, agrl.Discrete) or obs_shape is None or len(obs_shape) != 1:
        print(f"dqn_torch: {args.env} has no Discrete action space and 1-D observations", file=sys.stderr)
        return 2
    obs_dim, n_actions = obs_shape[0], int(action_space.n)
    action_space.seed(args.seed)

    # the replay buffer: one table on the same device as the network
    ctx = agrl.Context(args.device)
    rb = agrl.ReplayBuffer(ctx, args.buffer_size,
                           {"obs": (obs_dim,), "action": ((1,), "i32"), "reward": (1,), "next_obs": (obs_dim,),
                            "done": (1,)}, seed=args.seed)

    q_network = QNetwork(obs_dim, n_actions).to(device)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=args.learning_rate)
    target_network = QNetwork(obs_dim, n_actions).to(device)
    target_network.load_state_dict(q_network.state_dict())
    print(f"{args.env} ({env_kind}) on {args.device}, replay buffer {rb}, {args.steps} steps")

    returns: List[float] = []
    ep_ret, loss_v, updates = 0.0, float("nan"), 0
    t0 = time.perf_counter()
    next_report = args.steps // 10
    obs, _ = env.reset(seed=args.seed)
    for step in range(args.steps):
        epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.steps, step)
        if random.random() < epsilon:
            action = int(action_space.sample())
        else:
            with torch.no_grad():
                q = q_network(torch.as_tensor(np.asarray(obs, np.float32), device=device))
            action = int(q.argmax().item())
        next_obs, reward, terminated, truncated, _ = env.step(action)
        ep_ret += float(reward)
        # next_obs is the true last observation when the episode ended; done = terminated only
        rb.add(obs=np.asarray(obs, np.float32), action=action, reward=float(reward),
               next_obs=np.asarray(next_obs, np.float32), done=float(terminated))
        if terminated or truncated:
            returns.append(ep_ret)
            ep_ret = 0.0
            obs, _ = env.reset()
        else:
            obs = next_obs

        if step > args.learning_starts and step % args.train_frequency == 0:
            batch = {k: from_dlpack(v) for k, v in rb.sample(args.batch_size).items()}  # zero-copy views
            with torch.no_grad():
                target_max, _ = target_network(batch["next_obs"]).max(dim=1)
                td_target = batch["reward"].flatten() + args.gamma * target_max * (1 - batch["done"].flatten())
            old_val = q_network(batch["obs"]).gather(1, batch["action"].long()).squeeze(1)
            loss = F.smooth_l1_loss(old_val, td_target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
            optimizer.step()
            updates += 1
            if updates % 200 == 0:
                loss_v = loss.item()
        if step > args.learning_starts and step % args.target_network_frequency == 0:
            target_network.load_state_dict(q_network.state_dict())

        if step + 1 >= next_report:
            next_report += args.steps // 10
            last = returns[-20:]
            mean = sum(last) / len(last) if last else float("nan")
            dt = time.perf_counter() - t0
            print(f"  step {step + 1:7d}  episodes {len(returns):5d}  mean return (last 20) {mean:7.1f}  "
                  f"epsilon {epsilon:.3f}  loss {loss_v:8.4f}  {(step + 1) / dt:6.0f} steps/s", flush=True)

    dt = time.perf_counter() - t0
    last = returns[-20:]
    mean = sum(last) / len(last) if last else float("nan")
    print(f"done: {args.steps} steps, {len(returns)} episodes, {updates} updates in {dt:.1f} s "
          f"({args.steps / dt:.0f} steps/s)")
    print(f"mean return of the last 20 episodes: {mean:.1f}")
    env.close()
    ctx.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
