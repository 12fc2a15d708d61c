"""tests/typing/api_usage.py run as a smoke test, on the CPU: the program
that mypy --strict checks against the package's annotations must also run,
so that what it declares is what the package does. A part whose framework
(torch, JAX, Stable-Baselines3, TorchRL) cannot be imported is skipped."""

import importlib.util
from pathlib import Path

import pytest

import agrl
from agrl.ac import ACConfig, ACOptions
from agrl.dqn import DQNConfig, DQNOptions

_PATH = Path(__file__).resolve().parents[1] / "typing" / "api_usage.py"


def _load():
    spec = importlib.util.spec_from_file_location("api_usage", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


api_usage = _load()


@pytest.mark.parametrize("part", list(api_usage.PARTS))
def test_api_usage_runs(part):
    absent = api_usage.missing(part)
    if absent:
        pytest.skip(f"{', '.join(absent)} not installed")
    assert api_usage.main([part]) == 0


@pytest.mark.parametrize("typed,options,defaults", [
    (DQNConfig, DQNOptions, agrl.DQN.defaults),
    (ACConfig, ACOptions, agrl.SAC.defaults),
    (ACConfig, ACOptions, agrl.TD3.defaults),
])
def test_config_types_name_every_option(typed, options, defaults):
    """The TypedDicts of the configurations list the C library's fields:
    every key defaults() returns, all required in the config, none in the
    options that the constructors take."""
    keys = set(defaults())
    assert set(typed.__required_keys__) == keys and not typed.__optional_keys__
    assert set(options.__optional_keys__) == keys and not options.__required_keys__
