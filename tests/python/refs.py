"""References the tests compare agrl with: bfloat16 rounding in numpy, an
agrl container parsed with numpy and zlib, and where the command-line tool
is."""

import os
import shutil
import struct
import subprocess
import zlib
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


def container_keys(raw, base=0):
    """The keys of the agrl container whose header begins at byte `base`
    of raw (the header's CRC-32 checked with zlib's), the container's
    length (other bytes may follow it: an agent's table) and where its
    section table begins: (keys, total, at)."""
    assert raw[base:base + 8] == b"AGRLFILE"
    version, H, n_keys, n_secs, part, total, reserved = struct.unpack_from("<IIIIQQQ", raw, base + 8)
    assert version == 1 and reserved == 0 and base + total <= len(raw)
    assert struct.unpack_from("<I", raw, base + H - 4)[0] == zlib.crc32(raw[base:base + H - 4])
    at, keys = base + 48, {}
    for _ in range(n_keys):
        typ, _, nlen, count = struct.unpack_from("<BBHI", raw, at)
        name = raw[at + 8:at + 8 + nlen].decode()
        at += 8 + nlen
        if typ == 4:
            keys[name] = raw[at:at + count].decode()
            at += count
        elif typ == 5:
            keys[name] = struct.unpack_from(f"<{count}q", raw, at)
            at += 8 * count
        else:
            keys[name] = struct.unpack_from("<q", raw, at)[0]
            at += 8
    return keys, total, at


def read_container(path):
    """An agrl container (docs/container.md): its keys and its f32 tensor
    sections as numpy arrays of the bytes (rows, cols column-major), the
    header's and every part's CRC-32 checked with zlib's."""
    raw = open(path, "rb").read()
    keys, total, at = container_keys(raw)
    assert total == len(raw)
    _, H, _, n_secs, part, _, _ = struct.unpack_from("<IIIIQQQ", raw, 8)
    sections = {}
    for _ in range(n_secs):
        nlen, kind, dtype, ndim, off, nbytes = struct.unpack_from("<HBBIQQ", raw, at)
        dims = struct.unpack_from(f"<{ndim}Q", raw, at + 24)
        name = raw[at + 24 + 8 * ndim:at + 24 + 8 * ndim + nlen].decode()
        at += 24 + 8 * ndim + nlen
        assert kind == 2 and dtype == 0
        data = b""
        for p0 in range(0, nbytes, part):
            block = raw[off:off + min(part, nbytes - p0)]
            assert struct.unpack_from("<I", raw, off + len(block))[0] == zlib.crc32(block)
            data += block
            off += len(block) + 4
        sections[name] = (dims, np.frombuffer(data, "<f4").copy())
    assert at == H - 4
    return keys, sections
