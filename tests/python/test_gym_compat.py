"""agrl's environments and spaces against Gymnasium itself: the spaces
agrl uses have the bounds, draws and membership of gymnasium.spaces."""

import inspect
import warnings

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")


# ---- spaces ----

def probes_box(space):
    return [np.zeros(space.shape, np.float32), np.zeros(space.shape, np.float64), space.high.copy(),
            space.high * 2, np.zeros(space.shape[0] + 1, np.float32), [0.0] * space.shape[0],
            np.full(space.shape, np.nan, np.float32), "x"]


def probes_discrete(n):
    return [0, n - 1, n, -1, True, np.int64(1), np.int32(n), np.array(1), np.array([1]), 1.0, np.float32(0),
            None, "1"]


def test_fallback_spaces_behave_like_gymnasium_spaces():
    from agrl.envs import FallbackBox, FallbackDiscrete

    cases = [(-1.0, 2.0, (3,)), (np.array([-4.8, -np.inf, -0.4, -np.inf], np.float32),
                                 np.array([4.8, np.inf, 0.4, np.inf], np.float32), None),
             (np.array([0.0, -np.inf], np.float32), np.array([np.inf, 5.0], np.float32), None),
             # all four kinds of interval: bounded, above only, below only, neither
             (np.array([-1.0, -np.inf, 0.5, -np.inf], np.float32), np.array([1.0, 5.0, np.inf, np.inf], np.float32),
              None),
             (np.array([-2.0], np.float32), np.array([2.0], np.float32), None)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Box.contains warns of its casts
        for low, high, shape in cases:
            mine, theirs = FallbackBox(low, high, shape, np.float32), gym.spaces.Box(low, high, shape, np.float32)
            assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
            assert np.array_equal(mine.low, theirs.low) and np.array_equal(mine.high, theirs.high)
            assert mine.low.dtype == theirs.low.dtype == np.float32
            assert np.array_equal(mine.bounded_below, theirs.bounded_below)
            assert np.array_equal(mine.bounded_above, theirs.bounded_above)
            assert all(mine.is_bounded(m) == theirs.is_bounded(m) for m in ("both", "below", "above"))
            assert mine.seed(21) == theirs.seed(21) == 21
            for _ in range(20):  # the same draws from the same seed
                x, y = mine.sample(), theirs.sample()
                assert x.dtype == y.dtype and np.array_equal(x, y) and x in theirs
            for p in probes_box(theirs):
                assert mine.contains(p) == theirs.contains(p), p
            assert repr(mine) == repr(theirs)
        for n in (2, 3):
            mine, theirs = FallbackDiscrete(n, seed=5), gym.spaces.Discrete(n, seed=5)
            assert (mine.n, mine.start, mine.shape, mine.dtype) == (theirs.n, theirs.start, theirs.shape, theirs.dtype)
            assert type(mine.n) is type(theirs.n) is np.int64
            draws = [mine.sample() for _ in range(50)]
            assert draws == [theirs.sample() for _ in range(50)] and type(draws[0]) is np.int64
            mask = np.array([0] * (n - 1) + [1], np.int8)
            assert mine.sample(mask=mask) == theirs.sample(mask=mask) == n - 1
            if "probability" in inspect.signature(theirs.sample).parameters:  # gymnasium >= 1.1
                p = np.full(n, 1.0 / n)
                assert [mine.sample(probability=p) for _ in range(9)] == [theirs.sample(probability=p) for _ in range(9)]
            for x in probes_discrete(n):
                assert mine.contains(x) == theirs.contains(x), x
            assert repr(mine) == repr(theirs)
