"""agrl's MinAtar games against the minatar package 1.0.15 itself (skipped
when it cannot be imported): for each game, with sticky actions and
difficulty ramping on and off, many seeds and long random action sequences
over episodes that end and start again, agrl's observation, reward and
termination equal the package's at every step. Seeds: agrl's reset(seed) is
the package's Environment(...).seed([lo, hi]) then reset(), with lo and hi
the words of derive_seed(seed, 0) (computed here with splitmix64 in
Python); agrl's action i is env.minimal_action_set()[i]. Also: the state
image restores an episode mid-way, bit for bit, generator included."""

import zlib

import numpy as np
import pytest

import agrl
from pycartpole import derive_seed

minatar = pytest.importorskip("minatar", reason="the minatar package (pip install minatar==1.0.15) is not "
                              "installed: agrl's MinAtar games are not compared with it")

GAMES = ["breakout", "freeway", "asterix", "space_invaders", "seaquest"]
VARIANTS = [("", 0.1, True), ("-nosticky", 0.0, True), ("-noramp", 0.1, False),
            ("-nosticky-noramp", 0.0, False)]
# steps compared per game and variant (a few thousand episodes' worth for the short games)
STEPS = 25000


def package_env(game, sticky, ramping, seed):
    """The package's Environment playing agrl's episode of `seed`."""
    env = minatar.Environment(game, sticky_action_prob=sticky, difficulty_ramping=ramping)
    d = derive_seed(seed, 0)
    env.seed([d & 0xFFFFFFFF, d >> 32])
    env.reset()
    return env


def package_obs(env):
    """The package's state (10, 10, C) booleans as agrl's C x 10 x 10 floats."""
    return np.ascontiguousarray(np.transpose(env.state(), (2, 0, 1))).astype(np.float32).ravel()


def channel(obs, c):
    return obs.reshape(-1, 10, 10)[c]


def cols(m):
    return np.nonzero(m.any(axis=0))[0]


def toward(x, target, left, right, stay):
    return left if target < x else right if target > x else stay


def scripted(game, obs, acts, g):
    """A playing policy for the game (agrl's action index), to reach what
    random play rarely does: Breakout's cleared walls, SpaceInvaders'
    cleared waves, Seaquest's surfacing with six divers, Freeway's
    crossings."""
    a = {m: i for i, m in enumerate(acts)}  # MinAtar's index -> agrl's
    n, left, up, right, down, fire = 0, 1, 2, 3, 4, 5
    if game == "breakout":
        paddle, ball, trail = cols(channel(obs, 0)), cols(channel(obs, 1)), cols(channel(obs, 2))
        target = min(9, max(0, 2 * ball[0] - trail[0]))  # where the ball goes next
        return a[toward(paddle[0], target, left, right, n)]
    if game == "freeway":
        return a[up]
    if game == "space_invaders":
        cannon, aliens = cols(channel(obs, 0))[0], cols(channel(obs, 1))
        shots = channel(obs, 5)[6:9]
        if shots[:, cannon].any():  # a bullet coming down: step aside
            return a[left if cannon > 0 and not shots[:, cannon - 1].any() else right]
        if g.random() < 0.5 or not len(aliens):
            return a[fire]
        return a[toward(cannon, aliens[np.argmin(abs(aliens - cannon))], left, right, fire)]
    if game == "seaquest":
        sub = np.argwhere(channel(obs, 0))[0]
        oxygen, divers = channel(obs, 7)[9].sum(), channel(obs, 8)[9].sum()
        if divers == 6 or (divers >= 1 and oxygen <= 3):
            return a[up]
        found = np.argwhere(channel(obs, 9))
        if len(found) and g.random() < 0.8:
            y, x = found[np.argmin(abs(found - sub).sum(axis=1))]
            if y != sub[0]:
                return a[up if y < sub[0] else down]
            return a[toward(sub[1], x, left, right, fire)]
        return a[fire] if sub[0] > 0 else a[down]
    return int(g.integers(0, len(acts)))


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("suffix,sticky,ramping", VARIANTS)
def test_minatar_steps_equal_the_package(game, suffix, sticky, ramping):
    name = f"{game}-minatar{suffix}"
    env = agrl.make(name)._env
    g = np.random.default_rng(zlib.crc32(name.encode()))
    steps = episodes = 0
    n_actions = None
    while steps < STEPS:
        seed = int(g.integers(0, 2**64, dtype=np.uint64))
        ref = package_env(game, sticky, ramping, seed)
        acts = ref.minimal_action_set()
        n_actions = len(acts)
        obs = env.reset(seed)
        assert np.array_equal(obs, package_obs(ref)), f"{name} seed {seed}: start states differ"
        # a policy per episode: the scripted player with some random moves,
        # uniform, or one favourite action most of the time
        kind = episodes % 3
        fav, p_fav = int(g.integers(0, n_actions)), float(g.choice([0.5, 0.9]))
        t = 0
        while True:
            if kind == 0:
                a = scripted(game, obs, acts, g) if g.random() < 0.97 else int(g.integers(0, n_actions))
            else:
                a = fav if kind == 2 and g.random() < p_fav else int(g.integers(0, n_actions))
            obs, r, term, trunc = env.step(a)
            r_ref, term_ref = ref.act(acts[a])
            t += 1
            steps += 1
            where = f"{name} seed {seed} step {t}"
            assert r == float(r_ref), f"{where}: reward {r}, package {r_ref}"
            assert term == bool(term_ref), f"{where}: terminated {term}, package {term_ref}"
            assert not trunc, f"{where}: truncated"
            assert np.array_equal(obs, package_obs(ref)), f"{where}: observations differ"
            if term or t >= 5000:
                break
        episodes += 1
    assert episodes >= 1 and n_actions == agrl.make(name).action_space.n
    print(f"{name}: {steps} steps of {episodes} episodes equal to the package's")


@pytest.mark.parametrize("game,title", [("breakout", "Breakout"), ("freeway", "Freeway"), ("asterix", "Asterix"),
                                        ("space_invaders", "SpaceInvaders"), ("seaquest", "Seaquest")])
def test_minatar_names_spaces_and_state_round_trip(game, title):
    ref = minatar.Environment(game)
    env = agrl.make(f"MinAtar/{title}-v1")
    assert env.spec.id == f"MinAtar/{title}-v1" and agrl.make(f"{game}-minatar").spec.id == env.spec.id
    assert f"{game}-minatar" in agrl._agrl.builtin_envs()
    channels = ref.state_shape()[2]
    assert env.observation_space.shape == (channels * 100,) and env.action_space.n == len(ref.minimal_action_set())
    assert env.spec.max_episode_steps is None
    g = np.random.default_rng(5)
    env.reset(seed=11)
    for _ in range(60):  # into the episode (or the next ones)
        _, _, term, _, _ = env.step(int(g.integers(0, env.action_space.n)))
        if term:
            env.reset()
    saved = env.get_state()
    acts = [int(g.integers(0, env.action_space.n)) for _ in range(300)]

    def play():
        out = []
        for a in acts:
            obs, r, term, trunc, _ = env.step(a)
            assert obs in env.observation_space
            out.append((obs.tobytes(), r, term, trunc))
            if term:
                out.append(env.reset()[0].tobytes())
        return out

    first = play()
    env.set_state(saved)
    assert play() == first
    other = agrl.make(f"{game}-minatar-nosticky")
    with pytest.raises(agrl.ShapeError):
        other.set_state(saved)
