"""Shared fixtures for agrl's Python tests (all on the CPU)."""

import numpy as np
import pytest

import agrl


@pytest.fixture
def ctx():
    c = agrl.Context("cpu")
    yield c
    c.free()


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
