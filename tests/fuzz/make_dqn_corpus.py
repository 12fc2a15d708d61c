#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_dqn_load into corpus/dqn_load/.

Small DQN files in the layout of include/agrl/agent.h ("saving a DQN",
version 1): valid ones with one and two hidden layers (and none), fused on
and off, with and without a run state and prioritized replay, their replay
tables of 3 to 10 columns in parts of 128 bytes and of
AG_TRANSFER_PART_BYTES, one of them wrapped; and broken ones (truncated, a
changed byte in the header and in a tensor, trailing bytes, a setting out
of range, a tensor of another shape, a table of another capacity, a
sampler of another alpha, prioritized replay without a sampler and a
sampler without it, all under correct CRCs, a table past the
harness's limit, a newer version, not a DQN file); and two whose header
CRCs are 0 (the harness fills them in). The replay images come
from make_replay_corpus.replay; zlib.crc32 is the CRC-32 the format uses.
Run it again after a change of the format; the files are checked in.
"""
import os
import struct
import zlib

from make_replay_corpus import damaged, replay, write_seeds, zero_crc

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "dqn_load")
PART = 16 << 20  # AG_TRANSFER_PART_BYTES
OPT_STATE_N = 5  # Adam's state tensor (src/base/kernels.h)
F32, I32, I64 = 0, 4, 5


def section(data):
    """A DQN file's section of at most PART bytes: its bytes and their CRC-32."""
    assert len(data) <= PART
    return data + struct.pack("<I", zlib.crc32(data))


def entries(obs_dim, hidden, n_actions):
    """(rows, cols, dtype) of the tensors in the file's order."""
    sizes = [obs_dim] + hidden + [n_actions]
    L = len(sizes) - 1
    e = []
    for l in range(L):  # each parameter, then its gradient
        e += [(sizes[l + 1], sizes[l], F32)] * 2 + [(sizes[l + 1], 1, F32)] * 2
    e += [(1, 1, I64), (OPT_STATE_N, 1, F32)]  # the sampling counter, Adam's state
    for l in range(L):  # each parameter's first and second moments
        e += [(sizes[l + 1], sizes[l], F32)] * 2 + [(sizes[l + 1], 1, F32)] * 2
    for l in range(L):  # the target network
        e += [(sizes[l + 1], sizes[l], F32), (sizes[l + 1], 1, F32)]
    return e


def values(k, rows, cols, dtype):
    if dtype == I64:
        return struct.pack("<q", 1000 + k)
    return b"".join(struct.pack("<f", ((i * 7 + k * 13) % 23 - 11) / 16.0) for i in range(rows * cols))


def dqn(obs_dim=2, hidden=(4,), n_actions=2, flags=7, batch=2, buffer=6, size=4, pos=None, run_state=b"",
        part=PART, table_cap=None, gamma=0.99, total_steps=1000, updates=12, at_target=10, shape_fix=None,
        per=None, table_per=None, crc0=False, n_step=1, n_envs=1):
    """per: (alpha, beta, eps, the beta of the next updates) with prioritized
    replay (flag 8); table_per: the alpha of the table's sampler where it is
    not per's (-1: no sampler)."""
    hidden = list(hidden)
    pos = size if pos is None else pos
    ents = entries(obs_dim, hidden, n_actions)
    if shape_fix:  # (tensor, rows): an entry not the one the configuration makes
        i, r = shape_fix
        ents[i] = (r,) + ents[i][1:]
    T = len(ents)
    H = 488 + 24 * T + 4
    h = b"AGRLDQN1" + struct.pack("<II", 1, H) + b"0.1.0".ljust(32, b"\0")
    h += struct.pack("<II", len(hidden), flags)
    h += struct.pack("<8q", *(hidden + [0] * (8 - len(hidden))))
    # lr, gamma, tau, exploration_fraction, eps_start, eps_end, max_grad_norm, 0
    h += struct.pack("<7fI", 7e-4, gamma, 1.0, 0.16, 1.0, 0.01, 10.0, 0)
    # batch_size, buffer_size, learning_starts, train_freq, gradient_steps, target_update_interval, seed
    h += struct.pack("<6qQ", batch, buffer, 3, 4, 2, 10, 7)
    h += struct.pack("<5qQq", obs_dim, n_actions, total_steps, updates, at_target, 0x9E3779B97F4A7C15,
                     len(run_state))
    h += struct.pack("<II", T, 0)
    h += struct.pack("<4f", *(per or (0.6, 0.4, 1e-6, 0.0)))  # without per: the defaults, beta 0
    h += struct.pack("<IIq", n_step, 0, n_envs) + b"\0" * 184
    fields = [("obs", obs_dim, F32), ("action", 1, I32), ("reward", 1, F32), ("next_obs", obs_dim, F32),
              ("terminated", 1, I32), ("truncated", 1, I32)]
    alpha = table_per if table_per is not None else per[0] if per else -1
    leaves = (alpha, 2.5, [0.25 + 0.5 * i for i in range(size)]) if alpha >= 0 else None
    return agent_file(h, H, ents, [run_state], fields, batch, buffer if table_cap is None else table_cap, size,
                      pos, part, per=leaves, crc0=crc0)


def agent_file(h, H, ents, sections, fields, batch, capacity, size, pos, part, per=None, crc0=False):
    """An agent file of the layout the DQN's and the SAC/TD3 agent's share:
    the header h (up to its tensor entries; H bytes in all) with the entries
    ents and its CRC, the tensors' values and the sections after them, then
    the replay table of `fields` (make_replay_corpus.replay). crc0: the CRCs
    of the header and of the table's header 0."""
    for rows, cols, dt in ents:
        h += struct.pack("<qqII", rows, cols, dt, 0)
    h += struct.pack("<I", zlib.crc32(h))
    assert len(h) == H
    body = b"".join(section(values(k, r, c, dt)) for k, (r, c, dt) in enumerate(ents))
    body += b"".join(section(s) for s in sections)
    table = replay(fields, 0, capacity, batch, size, pos, part=part, per=per)
    return zero_crc(zero_crc(h + body + table), len(h + body)) if crc0 else h + body + table


def broken_seeds(make, **other):
    """The seeds both agent corpora hold beside their own, from make(**changes):
    settings out of range and shapes and tables that do not match under
    correct CRCs, a table past the harnesses' limit, files of another kind
    (other: {name: bytes}) and an empty one."""
    return {"gamma_2_crc_ok": make(gamma=2.0), "tensor_shape_crc_ok": make(shape_fix=(1, 5)),
            "table_capacity_crc_ok": make(table_cap=7), "table_past_limit": make(buffer=40000, size=0),
            **other, "empty": b""}


def main():
    seeds = {}
    seeds["h1_fused"] = dqn()
    seeds["h1_nstep3_two_copies"] = dqn(flags=1, n_step=3, n_envs=2)
    seeds["h2_composed_run_state_wrapped"] = dqn(obs_dim=3, hidden=(3, 5), n_actions=3, flags=1, batch=4,
                                                 buffer=10, size=10, pos=3, run_state=b"steps:1234;eps:7",
                                                 part=128)
    seeds["h2_fused_mse_empty_table"] = dqn(hidden=(2, 3), flags=4, batch=3, buffer=3, size=0, updates=0,
                                            at_target=0)
    seeds["h1_full_table_parts"] = dqn(obs_dim=1, hidden=(3,), flags=6, batch=1, buffer=5, size=5, pos=0,
                                       run_state=b"\x01\x02\x03", part=128)
    seeds["h0_linear"] = dqn(hidden=(), flags=0, batch=2, buffer=4, size=2)
    seeds["h1_fused_crc0"] = dqn(crc0=True)
    seeds["h2_per"] = dqn(hidden=(3, 2), flags=11, batch=2, buffer=8, size=8, pos=5, per=(0.6, 0.4, 1e-6, 0.55),
                          part=128)
    seeds["h1_per_crc0"] = dqn(flags=9, batch=3, buffer=6, size=5, per=(0.7, 0.5, 1e-3, 0.5), crc0=True)
    seeds["per_table_alpha_crc_ok"] = dqn(flags=9, per=(0.7, 0.5, 1e-3, 0.5), table_per=0.6)
    seeds["per_without_sampler_crc_ok"] = dqn(flags=8, per=(0.6, 0.4, 1e-6, 0.4), table_per=-1)
    seeds["sampler_without_per_crc_ok"] = dqn(table_per=0.6)
    seeds["h2_composed_crc0"] = dqn(obs_dim=3, hidden=(3, 5), n_actions=3, flags=1, batch=4, buffer=10, size=7,
                                    run_state=b"x" * 9, part=128, crc0=True)
    seeds.update(damaged(seeds["h2_composed_run_state_wrapped"], 300, 700))  # 700: in the tensors
    seeds["bad_counters_crc_ok"] = dqn(updates=3, at_target=5)
    seeds.update(broken_seeds(dqn, not_a_dqn=b"AGRLRPL1 this is a table, not a DQN"))
    write_seeds(OUT, seeds, ".agrl")


if __name__ == "__main__":
    main()
