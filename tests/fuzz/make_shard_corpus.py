#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_shard_load into corpus/shard_load/.

Small shard files in the layout of include/agrl/dist.h ("ag_shard_save",
version 1): valid ones of ranks 0 and 1 of a group of 2, filling and
wrapped, one prioritized, one of a group of 1, their local tables in parts
of 128 bytes and of AG_TRANSFER_PART_BYTES; and broken ones (truncated, a
changed byte in the header and in the table, trailing bytes, a local size
or capacity not the header's, a rank outside its group, a capacity not a
multiple of the group size, a reserved word set, all under correct CRCs,
a newer version, not a shard file); and two whose header CRCs are 0 (the
harness fills them in). The local tables come from
make_replay_corpus.replay; zlib.crc32 is the CRC-32 the format uses. Run
it again after a change of the format; the files are checked in.
"""
import os
import struct
import zlib

from make_replay_corpus import damaged, replay, write_seeds, zero_crc

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "shard_load")
PART = 16 << 20  # AG_TRANSFER_PART_BYTES
FIELDS = [("obs", 3, 0), ("action", 1, 4), ("reward", 1, 0)]


def owned_below(rank, world, p):
    """Global columns below p that rank owns (columns rank, rank + world, ...)."""
    return (p - rank + world - 1) // world if p > rank else 0


def shard(rank, world, cap, size, pos=None, fields=FIELDS, storage=0, part=PART, per=None, lsize=None,
          lcap=None, reserved=0, crc0=False):
    """per: (alpha, maxp) or None; lsize, lcap: a local table not the header's;
    crc0: the CRCs of the header and of the table's header 0."""
    pos = size if pos is None else pos
    h = b"AGRLSHD1" + struct.pack("<II", 1, 92 + 16 * len(fields)) + b"0.1.0".ljust(32, b"\0")
    h += struct.pack("<IIqqqII", rank, world, cap, pos, size, len(fields), reserved)
    for _, w, dt in fields:
        h += struct.pack("<qII", w, dt, 0)
    h += struct.pack("<I", zlib.crc32(h))
    local_cap = cap // world if lcap is None else lcap
    n = owned_below(rank, world, size) if lsize is None else lsize
    lpos = owned_below(rank, world, pos) % local_cap if n == local_cap else n
    leaves = (per[0], per[1], [0.5 + 0.25 * i for i in range(n)]) if per else None
    table = replay(fields, storage, local_cap, 1, n, lpos, part=part, per=leaves)
    return zero_crc(zero_crc(h + table), len(h)) if crc0 else h + table


def main():
    seeds = {}
    seeds["rank0_of_2"] = shard(0, 2, 8, 5)
    seeds["rank1_of_2_parts"] = shard(1, 2, 8, 5, part=128)
    seeds["rank0_of_2_wrapped"] = shard(0, 2, 8, 8, pos=3)
    seeds["rank1_of_2_wrapped_per"] = shard(1, 2, 20, 20, pos=7, storage=2, part=128, per=(0.6, 3.0))
    seeds["rank0_of_1_u8"] = shard(0, 1, 6, 4, fields=[("x", 2, 3)], storage=3)
    seeds["rank1_of_2_empty"] = shard(1, 2, 4, 1)
    seeds["rank0_of_2_crc0"] = shard(0, 2, 8, 5, crc0=True)
    seeds["rank1_of_2_wrapped_per_crc0"] = shard(1, 2, 20, 20, pos=7, storage=2, part=128, per=(0.6, 3.0),
                                                 crc0=True)
    seeds.update(damaged(seeds["rank1_of_2_wrapped_per"], 100, 30))  # 30: in the leaves
    seeds["local_size_crc_ok"] = shard(0, 2, 8, 5, lsize=2)
    seeds["local_capacity_crc_ok"] = shard(0, 2, 8, 5, lcap=5)
    seeds["rank2_of_2"] = shard(2, 2, 8, 5)
    seeds["capacity_not_multiple"] = shard(0, 2, 7, 5, lcap=3)
    seeds["reserved_set"] = shard(0, 2, 8, 5, reserved=1)
    seeds["not_a_shard"] = b"AGRLDQN1 this is a DQN, not a shard"
    seeds["empty"] = b""
    write_seeds(OUT, seeds, ".shd")


if __name__ == "__main__":
    main()
