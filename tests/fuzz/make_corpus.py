#!/usr/bin/env python3
"""Writes the model seeds of fuzz_load's corpus into corpus/load/ (mlp_*).

Small model files: agrl containers of kind "mlp" (docs/container.md), and
the layouts of agrl 0.1.0: valid version-2 and version-1 files of a few shapes, and broken ones (truncated, a changed
byte, trailing bytes, a NaN under a correct CRC, a bad activation code,
n_sizes out of range, sizes of terabytes, a newer version, not a model).
zlib.crc32 is the CRC-32 the format uses. Run it again after a change of
the format; the files are checked in. The corpus also holds, committed as
data, the replay, DQN, SAC/TD3 and shard seeds of agrl 0.1.0's formats
(replay_*, dqn_*, ac_*, shard_*: valid files and broken ones) and one file
of every kind as this library writes it (current_*: tests/make_legacy).
"""
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "load")


def values(sizes, seed):
    """W0, b0, W1, b1, ...: small fractions, W column-major [out, in]."""
    params = []
    for l in range(len(sizes) - 1):
        for count in (sizes[l + 1] * sizes[l], sizes[l + 1]):
            params.append([((i * 7 + seed * 13 + len(params)) % 23 - 11) / 16.0 for i in range(count)])
    return params


def v2(sizes, hidden, last, params, reserved=0):
    h = b"AGRLMLP2" + struct.pack("<iiiI", len(sizes), hidden, last, reserved)
    h += struct.pack("<%dq" % len(sizes), *sizes)
    out = h + struct.pack("<I", zlib.crc32(h))
    for p in params:
        d = struct.pack("<%df" % len(p), *p)
        out += d + struct.pack("<I", zlib.crc32(d))
    return out


def v1(sizes, hidden, last, params):
    out = b"AGRLMLP1" + struct.pack("<iii", len(sizes), hidden, last)
    out += struct.pack("<%dq" % len(sizes), *sizes)
    for p in params:
        out += struct.pack("<%df" % len(p), *p)
    return out


def container(keys, sections, part=1 << 20, crc=True):
    """An agrl container (docs/container.md): keys [(type, name, value)],
    sections [(name, dtype, dims, bytes)] of f32 tensors; crc=False leaves
    the header's CRC 0 (the harness fills it in)."""
    k = b""
    for typ, name, value in keys:
        n = name.encode()
        if typ == 4:
            v = value.encode()
            k += struct.pack("<BBHI", typ, 0, len(n), len(v)) + n + v
        elif typ == 5:
            k += struct.pack("<BBHI", typ, 0, len(n), len(value)) + n + struct.pack("<%dq" % len(value), *value)
        else:
            k += struct.pack("<BBHI", typ, 0, len(n), 1) + n + struct.pack("<q", value)
    H = 48 + len(k) + 4 + sum(24 + 8 * len(d) + len(nm) for nm, _, d, _ in sections)
    s, data = b"", b""
    for name, dtype, dims, payload in sections:
        n = name.encode()
        s += struct.pack("<HBBIQQ", len(n), 2, dtype, len(dims), H + len(data), len(payload))
        s += struct.pack("<%dQ" % len(dims), *dims) + n
        for at in range(0, len(payload), part):
            block = payload[at:at + part]
            data += block + struct.pack("<I", zlib.crc32(block))
    head = b"AGRLFILE" + struct.pack("<IIIIQQQ", 1, H, len(keys), len(sections), part, H + len(data), 0) + k + s
    return head + struct.pack("<I", zlib.crc32(head) if crc else 0) + data


def v3(sizes, hidden, last, params, crc=True):
    keys = [(4, "kind", "mlp"), (2, "mlp.version", 3), (5, "mlp.sizes", sizes), (2, "mlp.hidden", hidden),
            (2, "mlp.last", last)]
    secs = []
    for k, p in enumerate(params):
        dims = [sizes[k // 2 + 1], 1 if k % 2 else sizes[k // 2]]
        secs.append(("%s%d" % ("b" if k % 2 else "W", k // 2), 0, dims, struct.pack("<%df" % len(p), *p)))
    return container(keys, secs, crc=crc)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    shapes = [([2, 3, 1], 1, 0), ([1, 1], 0, 3), ([4, 8, 2], 2, 0), ([3, 2, 2, 2, 1], 1, 2)]
    for i, (sizes, hid, last) in enumerate(shapes):
        seeds["v2_valid_%d" % i] = v2(sizes, hid, last, values(sizes, i))
        seeds["v1_valid_%d" % i] = v1(sizes, hid, last, values(sizes, i))
    good = seeds["v2_valid_0"]
    seeds["v2_truncated_data"] = good[:-5]
    seeds["v2_truncated_header"] = good[:30]
    seeds["v2_trailing"] = good + b"\0"
    flipped = bytearray(good)
    flipped[60] ^= 0x10
    seeds["v2_flipped_data"] = bytes(flipped)
    flipped = bytearray(good)
    flipped[30] ^= 0x01
    seeds["v2_flipped_size"] = bytes(flipped)
    p = values([2, 3, 1], 0)
    p[2][1] = float("nan")
    seeds["v2_nan_crc_ok"] = v2([2, 3, 1], 1, 0, p)
    seeds["v1_inf"] = v1([2, 3, 1], 1, 0, [[float("inf")] + q[1:] if k == 0 else q for k, q in enumerate(p)])
    seeds["v2_bad_act"] = v2([2, 3, 1], 7, 0, values([2, 3, 1], 0))
    seeds["v2_reserved"] = v2([2, 3, 1], 1, 0, values([2, 3, 1], 0), reserved=1)
    seeds["v2_n_sizes_65"] = b"AGRLMLP2" + struct.pack("<iiiI", 65, 1, 0, 0) + b"\1" * 64
    huge = b"AGRLMLP2" + struct.pack("<iiiI", 3, 1, 0, 0) + struct.pack("<3q", 1000000, 1000000, 1)
    seeds["v2_terabytes"] = huge + struct.pack("<I", zlib.crc32(huge)) + b"\0" * 16
    seeds["v1_terabytes"] = b"AGRLMLP1" + struct.pack("<iii3q", 3, 1, 0, 1000000, 1000000, 1) + b"\0" * 16
    seeds["v3"] = b"AGRLMLP3" + good[8:]
    for i, (sizes, hid, last) in enumerate(shapes):
        seeds["container_valid_%d" % i] = v3(sizes, hid, last, values(sizes, i))
    seeds["container_crc0"] = v3([2, 3, 1], 1, 0, values([2, 3, 1], 0), crc=False)
    seeds["container_bad_act_crc0"] = v3([2, 3, 1], 9, 0, values([2, 3, 1], 0), crc=False)
    seeds["container_nan_crc0"] = v3([2, 3, 1], 1, 0, p, crc=False)
    seeds["not_a_model"] = b"PK\x03\x04 this is not a model file"
    seeds["empty"] = b""
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, "mlp_" + name + ".agrl"), "wb") as f:
            f.write(data)
    print("%d model seeds in %s" % (len(seeds), OUT))


if __name__ == "__main__":
    main()
