"""References the tests compare agrl with: bfloat16 rounding in numpy, and
where the command-line tool is."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import agrl


def bf16_round(x):
    """float32 -> bfloat16 (round to nearest even, NaN kept NaN) -> float32, in numpy."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    out = (r & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out)


def find_cli():
    """The agrl command-line tool: $AGRL_CLI, the build tree's beside the
    imported package (BUILD/python/agrl -> BUILD/agrl), or `agrl` on PATH
    (an installed wheel's script). None when there is none."""
    env = os.environ.get("AGRL_CLI")
    if env:
        return env
    build = Path(agrl.__file__).resolve().parents[2] / "agrl"
    if build.is_file() and os.access(build, os.X_OK):
        return str(build)
    return shutil.which("agrl")


def cli_version(cli):
    out = subprocess.run([cli, "version"], capture_output=True, text=True, timeout=30)
    return out.stdout.split()[1] if out.returncode == 0 and out.stdout.startswith("agrl ") else None


def cli_or_skip():
    """find_cli(), of the package's version; the test skips without one."""
    cli = find_cli()
    if cli is None:
        pytest.skip("the agrl command-line tool was not found: set AGRL_CLI, build it beside the package "
                    "(BUILD/agrl for PYTHONPATH=BUILD/python) or install the wheel that puts `agrl` on PATH")
    v = cli_version(cli)
    assert v == agrl.__version__, f"{cli} is agrl {v}, the package {agrl.__version__}"
    return cli


def subprocess_env():
    """The environment for a child Python that imports the same agrl
    (PYTHONPATH may be relative to a directory the child does not start in)."""
    env = dict(os.environ)
    pkg_parent = str(Path(agrl.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env
