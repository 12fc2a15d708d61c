"""CartPole-v1 in pure Python: Gymnasium's float64 dynamics (explicit Euler,
tau 0.02, force +-10 N, termination at |x| > 2.4 or |theta| > 12 degrees,
reward 1 on every step, truncation on the 500th step) with agrl's seeding
scheme, written from the documentation rather than from agrl's code:

- derive_seed(seed, index) = mix(mix(seed) + golden * (index + 1)), with
  splitmix64's mixer and golden = 0x9E3779B97F4A7C15 (all mod 2^64);
- an episode seed e starts splitmix64 at derive_seed(e, 0); each uniform
  number in [lo, hi) is lo + (hi - lo) * (x >> 11) * 2^-53 for the next
  64-bit output x; the start state is four of them in [-0.05, 0.05);
- reset(seed=s) starts a sequence whose k-th episode (k = 0, 1, ...) starts
  from the start state of seed derive_seed(s, k); reset() goes on to the
  next episode.
"""

import math

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    z &= MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def derive_seed(seed, index):
    return mix64((mix64(seed) + GOLDEN * (index + 1)) & MASK)


class SplitMix64:
    def __init__(self, seed):
        self.s = derive_seed(seed, 0)

    def next(self):
        self.s = (self.s + GOLDEN) & MASK
        return mix64(self.s)

    def uniform(self, lo, hi):
        return lo + (hi - lo) * ((self.next() >> 11) * 2.0**-53)


def start_state(episode_seed):
    r = SplitMix64(episode_seed)
    return [r.uniform(-0.05, 0.05) for _ in range(4)]


class PyCartPole:
    """Gymnasium's API: reset(seed=None) -> (obs, info), step(a) -> (obs,
    reward, terminated, truncated, info); observations float32 (4,)."""

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    max_episode_steps = 500

    def __init__(self):
        self.state = None
        self._base = None
        self._episode = 0
        self._steps = 0
        self._done = True

    def _obs(self):
        return np.array(self.state, dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._base, self._episode = int(seed), 0
        elif self._base is None:
            raise ValueError("PyCartPole: the first reset needs a seed")
        else:
            self._episode += 1
        self.state = start_state(derive_seed(self._base, self._episode))
        self._steps = 0
        self._done = False
        return self._obs(), {}

    def dynamics(self, action):
        """One Euler step of the state in place; returns terminated."""
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta = math.cos(theta)
        sintheta = math.sin(theta)
        temp = (force + self.polemass_length * (theta_dot * theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * (costheta * costheta) / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = [x, x_dot, theta, theta_dot]
        return bool(x < -self.x_threshold or x > self.x_threshold or theta < -self.theta_threshold_radians
                    or theta > self.theta_threshold_radians)

    def step(self, action):
        if self._done:
            raise RuntimeError("PyCartPole: step after the episode ended; call reset")
        a = int(action)
        if a != action or a not in (0, 1):
            raise ValueError(f"PyCartPole: invalid action {action!r}")
        terminated = self.dynamics(a)
        self._steps += 1
        truncated = self._steps >= self.max_episode_steps
        self._done = terminated or truncated
        return self._obs(), 1.0, terminated, truncated, {}

    def close(self):
        pass
