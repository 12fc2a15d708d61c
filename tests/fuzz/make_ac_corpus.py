#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_ac_load into corpus/ac_load/.

Small SAC and TD3 files in the layout of include/agrl/ac.h ("saving an
agent", version 1): valid ones of one and two hidden layers, SAC with and
without autotune, TD3 between two actor updates, with and without the
correlated noise and a run state, their replay tables in parts of 128 bytes
and of AG_TRANSFER_PART_BYTES, one of them wrapped; broken ones (truncated,
a changed byte in the header and in a tensor, trailing bytes, a setting out
of range, counters that do not add up, a stream's seed, noise of a length
not a multiple of act_dim, bounds low >= high, a tensor of another shape, a
table of another capacity, all under correct CRCs, a table past the
harness's limit, a newer version, not an agent file); and two whose header
CRCs are 0 (the harness fills them in). The replay images come from
make_replay_corpus.replay; zlib.crc32 is the CRC-32 the format uses. Run it
again after a change of the format; the files are checked in.
"""
import os
import struct

from make_dqn_corpus import agent_file, broken_seeds, values
from make_replay_corpus import damaged, write_seeds

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "ac_load")
OPT_STATE_N = 5  # Adam's state tensor (src/base/kernels.h)
F32, I32, I64 = 0, 4, 5
M64 = (1 << 64) - 1
NAN = struct.unpack("<f", struct.pack("<I", 0x7fc00000))[0]


def net(inp, hidden, out, times=1):
    """(rows, cols, dtype) of a network's parameters (each layer's weights,
    then its biases), each `times` times (an optimizer's two moments)."""
    sizes = [inp] + hidden + [out]
    e = []
    for l in range(len(sizes) - 1):
        e += [(sizes[l + 1], sizes[l], F32)] * times + [(sizes[l + 1], 1, F32)] * times
    return e


def entries(sac, obs_dim, act_dim, hidden, autotune):
    a_out, q_in = (2 * act_dim if sac else act_dim), obs_dim + act_dim
    e = net(obs_dim, hidden, a_out) + 4 * net(q_in, hidden, 1)  # actor, critics, their targets
    if not sac:
        e += net(obs_dim, hidden, act_dim)  # the target actor
    e += [(1, 1, F32), (1, 1, I64), (1, 1, I64)]  # log alpha, the streams' counters
    e += [(OPT_STATE_N, 1, F32)] + net(obs_dim, hidden, a_out, 2)  # the actor's Adam
    e += [(OPT_STATE_N, 1, F32)] + 2 * net(q_in, hidden, 1, 2)  # the critics'
    if sac and autotune:
        e += [(OPT_STATE_N, 1, F32), (1, 1, F32), (1, 1, F32)]  # the temperature's
    return e


def agent(sac=True, obs_dim=2, act_dim=1, hidden=(4,), autotune=1, delay=None, batch=2, buffer=6, size=4,
          pos=None, updates=5, noise_copies=0, run_state=b"", part=128, seed=7, rho=0.5, table_cap=None,
          shape_fix=None, gamma=0.99, actor_updates=None, seed_fix=0, noise_n=None, low=None, crc0=False):
    hidden = list(hidden)
    delay = delay if delay is not None else (1 if sac else 2)
    pos = size if pos is None else pos
    ents = entries(sac, obs_dim, act_dim, hidden, autotune)
    if shape_fix:  # (tensor, rows): an entry not the one the configuration makes
        i, r = shape_fix
        ents[i] = (r,) + ents[i][1:]
    T = len(ents)
    H = 896 + 24 * T + 4
    au = updates // delay if actor_updates is None else actor_updates
    nn = act_dim * noise_copies if noise_n is None else noise_n
    h = b"AGRLACR1" + struct.pack("<II", 1, H) + b"0.1.0".ljust(32, b"\0")
    h += struct.pack("<IIII", 0 if sac else 1, len(hidden), delay, autotune)
    h += struct.pack("<8q", *(hidden + [0] * (8 - len(hidden))))
    # actor_lr, critic_lr, gamma, tau, alpha, target_entropy, expl_noise, target_noise, noise_clip, noise_rho
    h += struct.pack("<10f", 1e-3, 2e-3, gamma, 0.005, 1.0, NAN, 0.1, 0.2, 0.5, rho)
    h += struct.pack("<II", 1, 0)  # n_step
    # batch_size, buffer_size, learning_starts, train_freq, gradient_steps, n_envs, seed
    h += struct.pack("<6qQ", batch, buffer, 10, 1, 1, 1, seed)
    h += struct.pack("<5q", obs_dim, act_dim, 1000, updates, au)
    seeds = ((seed * 0x9E3779B97F4A7C15 + 0xAC + seed_fix) & M64, (seed * 0xD1B54A32D192ED03 + 0xAC7) & M64)
    h += struct.pack("<QQQqq", 0x1234567812345678, seeds[0], seeds[1], nn, len(run_state))
    h += struct.pack("<If", T, 0.25 if au else NAN)
    lo = [-2.0 + 0.5 * i for i in range(act_dim)] if low is None else low
    hi = [2.0 + i for i in range(act_dim)]
    h += struct.pack(f"<{act_dim}f", *lo) + b"\0" * 4 * (64 - act_dim)
    h += struct.pack(f"<{act_dim}f", *hi) + b"\0" * 4 * (64 - act_dim)
    h += b"\0" * 64
    fields = [("obs", obs_dim, F32), ("action", act_dim, F32), ("reward", 1, F32), ("next_obs", obs_dim, F32),
              ("terminated", 1, I32), ("truncated", 1, I32)]
    return agent_file(h, H, ents, [values(99, max(nn, 0), 1, F32), run_state], fields, batch,
                      buffer if table_cap is None else table_cap, size, pos, part, crc0=crc0)


def main():
    seeds = {}
    seeds["sac_h1"] = agent()
    seeds["sac_h1_fixed_alpha_noise"] = agent(autotune=0, noise_copies=3, act_dim=2)
    seeds["td3_h2_run_state_wrapped"] = agent(sac=False, obs_dim=3, act_dim=2, hidden=(3, 2), batch=3, buffer=7,
                                              size=7, pos=2, updates=7, noise_copies=2,
                                              run_state=b"AGRLRUNA state", part=(16 << 20))
    seeds["td3_fresh_empty_table"] = agent(sac=False, updates=0, size=0, rho=0.0)
    seeds["sac_h1_crc0"] = agent(crc0=True)
    seeds["td3_h1_crc0"] = agent(sac=False, noise_copies=1, crc0=True)
    seeds.update(damaged(seeds["td3_h2_run_state_wrapped"], 500, 700))  # 700: in the tensors
    seeds["bad_counters_crc_ok"] = agent(updates=6, actor_updates=2)
    seeds["stream_seed_crc_ok"] = agent(seed_fix=1)
    seeds["noise_length_crc_ok"] = agent(act_dim=2, noise_n=3)
    seeds["bounds_crc_ok"] = agent(low=[3.0])
    seeds.update(broken_seeds(agent, not_an_agent=b"AGRLDQN1 this is a DQN, not an actor-critic agent"))
    write_seeds(OUT, seeds, ".agrl")


if __name__ == "__main__":
    main()
