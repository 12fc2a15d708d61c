#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_replay_load into corpus/replay_load/.

Small replay files in the layout of include/agrl/replay.h (version 1):
valid uniform and prioritized tables of a few shapes and storage dtypes,
one of them wrapped and cut into many parts, and broken ones (truncated, a
changed byte, trailing bytes, a bad leaf under a correct CRC, absurd sizes,
a newer version, not a replay file), and one whose header CRC is 0 (the
harness fills it in). zlib.crc32 is the CRC-32 the format uses. Run it
again after a change of the format; the files are checked in.
"""
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "replay_load")
ES = {0: 4, 1: 2, 2: 2, 3: 1, 4: 4}  # storage dtype code: bytes


def section(data, part):
    out = b""
    for i in range(0, len(data), part):
        p = data[i:i + part]
        out += p + struct.pack("<I", zlib.crc32(p))
    return out


def replay(fields, storage, cap, min_size, size, pos, part=128, per=None):
    """fields: [(name, width, dtype)]; per: (alpha, maxp, leaves) or None."""
    rows = sum(w for _, w, _ in fields)
    entries = b""
    for name, w, dt in fields:
        n = name.encode()
        entries += struct.pack("<qII", w, dt, len(n)) + n + b"\0" * (-len(n) % 8)
    hbytes = 160 + len(entries) + 4
    cols = bytes((i * 37 + 11) % 256 for i in range(size * rows * ES[storage]))
    if storage in (0, 1, 2):  # finite values: bytes of small floats
        if storage == 0:
            cols = b"".join(struct.pack("<f", (i % 17) / 4.0) for i in range(size * rows))
        else:
            cols = b"".join(struct.pack("<H", 0x3c00 + (i % 64)) for i in range(size * rows))
    leaves = b""
    if per:
        leaves = b"".join(struct.pack("<d", v) for v in per[2])
    coff = hbytes
    loff = coff + len(section(cols, part))
    total = loff + len(section(leaves, part))
    h = b"AGRLRPL1" + struct.pack("<II", 1, hbytes) + b"0.1.0".ljust(32, b"\0")
    h += struct.pack("<IIqqqqqq", len(fields), storage, cap, min_size, size, pos, rows, part)
    alpha, maxp = (per[0], per[1]) if per else (0.0, 0.0)
    h += struct.pack("<IffI", 1 if per else 0, alpha, maxp, 0)
    h += struct.pack("<qqqqq", coff, len(cols), loff, len(leaves), total)
    h += entries
    h += struct.pack("<I", zlib.crc32(h))
    return h + section(cols, part) + section(leaves, part)


def zero_crc(data, at=0):
    """data with the CRC-32 of the header at byte `at` set to 0 (its length
    H is the u32 at at+12): the harnesses fill in the right CRC where it is
    0, so that mutations of such a seed's header reach what is behind it."""
    h = at + struct.unpack_from("<I", data, at + 12)[0]
    return data[:h - 4] + b"\0" * 4 + data[h:]


def write_seeds(out, seeds, ext):
    """Writes seeds {name: bytes} as out/name+ext (the corpora's writer)."""
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out, name + ext), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), out))


def damaged(good, header_cut, data_back):
    """The broken copies of a valid file every corpus holds: cut short in its
    data and in its header (at header_cut), a byte after it, a changed byte
    in the header (byte 60, under the old CRC) and in the data (data_back
    bytes before the end), format version 2."""
    flipped_data, flipped_header = bytearray(good), bytearray(good)
    flipped_data[len(good) - data_back] ^= 0x10
    flipped_header[60] ^= 0x01
    return {"truncated_data": good[:-5], "truncated_header": good[:header_cut], "trailing": good + b"\0",
            "flipped_data": bytes(flipped_data), "flipped_header": bytes(flipped_header),
            "version2": good[:8] + struct.pack("<I", 2) + good[12:]}


FIELDS = [("obs", 3, 0), ("action", 1, 5), ("reward", 1, 0)]


def main():
    seeds = {}
    seeds["uniform_f32"] = replay(FIELDS, 0, 8, 1, 5, 5)
    seeds["uniform_u8_full"] = replay([("x", 2, 3)], 3, 6, 2, 6, 2)
    seeds["uniform_empty"] = replay([("x", 1, 0)], 1, 4, 1, 0, 0)
    seeds["uniform_wrapped_parts"] = replay(FIELDS, 4, 12, 3, 12, 7, part=128)
    seeds["per_bf16"] = replay(FIELDS, 2, 20, 1, 17, 17, per=(0.6, 3.0, [0.5 + i * 0.25 for i in range(17)]))
    seeds["per_bf16_crc0"] = zero_crc(seeds["per_bf16"])
    seeds["per_depth1"] = replay([("s", 1, 4)], 0, 3, 1, 3, 1, per=(1.0, 1.0, [1.0, 1.0, 1.0]))
    seeds.update(damaged(seeds["per_bf16"], 40, 30))
    seeds["nan_leaf_crc_ok"] = replay(FIELDS, 2, 20, 1, 2, 2, per=(0.6, 3.0, [float("nan"), 1.0]))
    seeds["terabytes"] = replay(FIELDS, 0, 1 << 39, 1, 0, 0)
    seeds["bad_pos"] = replay(FIELDS, 0, 8, 1, 5, 3)
    seeds["not_a_replay"] = b"AGRLMLP2 this is a model, not a table"
    seeds["empty"] = b""
    write_seeds(OUT, seeds, ".rpl")


if __name__ == "__main__":
    main()
