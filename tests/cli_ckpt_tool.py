#!/usr/bin/env python3
"""Changes a checkpoint's cli.agrl (a container of kind "cli",
docs/container.md) for tests/cli_resume.sh:

  to-legacy DIR        replaces DIR/cli.agrl with the files a checkpoint of
                       agrl 0.1.0 holds instead: args, cli.state and the logs
  damage FILE HOW OUT  writes a damaged copy of FILE to OUT: HOW is "cut"
                       (the last bytes missing), "flip" (a byte of a log
                       changed) or "key" (the key cli.rows missing, the
                       header's CRC-32 sound)
"""
import os
import struct
import sys
import zlib


def parse(data):
    """The keys {name: (type, offset of the value, value)} and the sections
    {name: bytes} of a container whose sections have one part each."""
    _, _, H, nk, ns, _part, _total, _ = struct.unpack_from("<8sIIIIQQQ", data, 0)
    keys, at = {}, 48
    for _ in range(nk):
        typ, _, n, count = struct.unpack_from("<BBHI", data, at)
        name = data[at + 8:at + 8 + n].decode()
        v = at + 8 + n
        size = count if typ == 4 else 8 * count
        raw = data[v:v + size]
        value = {1: lambda: struct.unpack("<Q", raw)[0], 2: lambda: struct.unpack("<q", raw)[0],
                 3: lambda: struct.unpack("<d", raw)[0], 4: lambda: raw.decode()}.get(typ, lambda: raw)()
        keys[name] = (typ, v, value)
        at = v + size
    sections = {}
    for _ in range(ns):
        n, _kind, _dt, nd, off, nbytes = struct.unpack_from("<HBBIQQ", data, at)
        at += 24 + 8 * nd
        sections[data[at:at + n].decode()] = data[off:off + nbytes]
        at += n
    return keys, sections


def to_legacy(d):
    path = os.path.join(d, "cli.agrl")
    with open(path, "rb") as f:
        keys, sections = parse(f.read())
    args = b""
    for name, (typ, _, value) in keys.items():
        if name.startswith("cli.opt."):
            args += b"--" + name[8:].encode() + b"\0"
            if typ == 4:
                args += value.encode() + b"\0"
    with open(os.path.join(d, "args"), "wb") as f:
        f.write(args)

    def v(name):
        x = keys["cli." + name][2]
        return float.hex(x) if isinstance(x, float) else str(x)

    with open(os.path.join(d, "cli.state"), "w") as f:
        f.write("rows %s\nbest_mean %s\nsolved_at %s\nlast_loss %s\n" %
                (v("rows"), v("best_mean"), v("solved_at"), v("last_loss")))
        f.write("last %s\n" % " ".join(v("last." + k) for k in (
            "kind", "step", "episodes", "updates", "episode_return", "episode_length", "truncated",
            "mean_return", "loss", "epsilon")))
        f.write("evals %s\n" % " ".join(v(k) for k in (
            "evals", "eval_solved_at", "best_eval_at", "last_eval", "best_eval")))
    for name, data in sections.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    os.unlink(path)


def damage(path, how, out):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if how == "cut":
        data = data[:-5]
    elif how == "flip":
        data[-10] ^= 0x08
    elif how == "key":
        _, at, _ = parse(bytes(data))[0]["cli.rows"]
        data[at - 1] = ord("z")  # cli.rowz
        H = struct.unpack_from("<I", data, 12)[0]
        struct.pack_into("<I", data, H - 4, zlib.crc32(bytes(data[:H - 4])))
    else:
        sys.exit("unknown damage " + how)
    with open(out, "wb") as f:
        f.write(bytes(data))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "to-legacy":
        to_legacy(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "damage":
        damage(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
