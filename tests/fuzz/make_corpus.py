#!/usr/bin/env python3
"""Writes the model seeds of fuzz_load's corpus into corpus/load/ (mlp_*),
DQN seeds of the container layout (dqn_c_*) made from current_dqn.agrl,
SAC/TD3 seeds of the container layout (ac_c_*) made from current_td3.agrl,
shard seeds of the container layout (shard_c_*) made from
current_shard.agrl and current_replay_per.agrl, run states of kind "run"
(run_c_*: the DQN's loop and SAC's and TD3's) and checkpoints' cli states
of kind "cli" (cli_*) and frame tables of kind "frames" (frames_*: the
frames' container, then its fields' table), valid and damaged, and DQNs
over a frame table (dqn_f_*) made from current_dqn_frames.agrl
(make_frame_dqn.py).

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
    """An agrl container (docs/container.md): keys [(type, name, value)]
    (1 u64, 2 i64, 3 f64, 4 string, 5 i64 array, 6 f64 array), sections
    [(name, dtype, dims, bytes)]: tensors, or blobs where dims is None;
    crc=False leaves the header's CRC 0 (the harness fills it in)."""
    k = b""
    for typ, name, value in keys:
        n = name.encode()
        if typ == 4:
            v = value.encode()
            k += struct.pack("<BBHI", typ, 0, len(n), len(v)) + n + v
        elif typ in (5, 6):
            code = "q" if typ == 5 else "d"
            k += struct.pack("<BBHI", typ, 0, len(n), len(value)) + n + struct.pack("<%d%s" % (len(value), code), *value)
        else:
            k += struct.pack("<BBHI", typ, 0, len(n), 1) + n + struct.pack({1: "<Q", 2: "<q", 3: "<d"}[typ], value)
    H = 48 + len(k) + 4 + sum(24 + 8 * len(d or []) + len(nm) for nm, _, d, _ in sections)
    s, data = b"", b""
    for name, dtype, dims, payload in sections:
        n = name.encode()
        blob = dims is None
        dims = [] if blob else dims
        s += struct.pack("<HBBIQQ", len(n), 1 if blob else 2, 3 if blob else dtype, len(dims), H + len(data),
                         len(payload))
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


def conv_net(in_shape, conv, fc, hidden, last, seed, crc=True, version=4, conv_values=None):
    """A network with convolutions (mlp.version 4): conv [(channels, kernel,
    stride, pad)], fc the linear sizes after the flattened output."""
    c, h, w = in_shape
    dims = []
    for ch, k, st, pd in conv:
        dims += [[c * k * k, ch], [ch, 1]]
        c, h, w = ch, (h + 2 * pd - k) // st + 1, (w + 2 * pd - k) // st + 1
    sizes = [c * h * w] + list(fc)
    for l in range(len(sizes) - 1):
        dims += [[sizes[l + 1], sizes[l]], [sizes[l + 1], 1]]
    flat = [v for layer in conv for v in layer]
    keys = [(4, "kind", "mlp"), (2, "mlp.version", version), (5, "mlp.sizes", sizes), (2, "mlp.hidden", hidden),
            (2, "mlp.last", last), (5, "mlp.in_shape", list(in_shape)),
            (5, "mlp.conv", flat if conv_values is None else flat[:conv_values])]
    secs = []
    for k, d in enumerate(dims):
        n = d[0] * d[1]
        name = ("conv%d.%s" % (k // 2, "b" if k % 2 else "w") if k < 2 * len(conv) else
                "%s%d" % ("b" if k % 2 else "W", (k - 2 * len(conv)) // 2))
        vals = [((i * 7 + seed * 13 + k) % 23 - 11) / 16.0 for i in range(n)]
        secs.append((name, 0, d, struct.pack("<%df" % n, *vals)))
    return container(keys, secs, crc=crc)


def key_value_at(f, name):
    """The offset of key `name`'s value in the container f."""
    nkeys = struct.unpack_from("<I", f, 16)[0]
    at = 48
    for _ in range(nkeys):
        typ, _, n, count = struct.unpack_from("<BBHI", f, at)
        if f[at + 8:at + 8 + n] == name.encode():
            return at + 8 + n
        at += 8 + n + (count if typ == 4 else 8 * count)
    raise KeyError(name)


def fix_crc(f):
    H = struct.unpack_from("<I", f, 12)[0]
    struct.pack_into("<I", f, H - 4, zlib.crc32(bytes(f[:H - 4])))
    return bytes(f)


def valid_and_crc0(seeds, prefix, good):
    """The container good as it is, and with its header's CRC 0."""
    seeds[prefix + "valid"] = good
    crc0 = bytearray(good)
    struct.pack_into("<I", crc0, struct.unpack_from("<I", good, 12)[0] - 4, 0)
    seeds[prefix + "crc0"] = bytes(crc0)


def dqn_seeds(seeds):
    """Variants of the DQN container that tests/make_legacy writes: its
    keys changed under a sound CRC, a CRC of 0, its table cut or missing."""
    path = os.path.join(OUT, "current_dqn.agrl")
    with open(path, "rb") as fh:
        good = fh.read()
    total = struct.unpack_from("<Q", good, 32)[0]
    valid_and_crc0(seeds, "dqn_c_", good)
    for name, key, value in [("version3", "dqn.version", 3), ("obs_dim5", "dqn.sizes", 5),
                             ("batch0", "dqn.batch_size", 0), ("per2", "dqn.per", 2),
                             ("updates_at_target", "dqn.updates_at_target", 99),
                             ("hidden_huge", "dqn.sizes", 1 << 23)]:
        g = bytearray(good)
        at = key_value_at(good, key) + (8 if name == "hidden_huge" else 0)
        struct.pack_into("<q", g, at, value)
        seeds["dqn_c_" + name] = fix_crc(g)
    g = bytearray(good)
    struct.pack_into("<d", g, key_value_at(good, "dqn.lr"), 0.1)
    seeds["dqn_c_lr_not_f32"] = fix_crc(g)
    g = bytearray(good)
    g[key_value_at(good, "dqn.lr") - 1] = ord("R")
    seeds["dqn_c_lr_missing"] = fix_crc(g)
    seeds["dqn_c_no_table"] = good[:total]
    seeds["dqn_c_table_cut"] = good[:total + 100]
    seeds["dqn_c_trailing"] = good + b"\0"


def shard_seeds(seeds):
    """Variants of the shard container that tests/make_legacy writes (rank 1
    of 2, its table after the container): its keys changed under a sound
    CRC, a CRC of 0, a key missing or of another type, its table cut,
    missing or followed by a byte; and a shard of a wrapped prioritized
    table (rank 0 of 2) made of current_replay_per.agrl's table."""
    with open(os.path.join(OUT, "current_shard.agrl"), "rb") as fh:
        good = fh.read()
    total = struct.unpack_from("<Q", good, 32)[0]
    valid_and_crc0(seeds, "shard_c_", good)
    for name, key, value, elem in [("version3", "shard.version", 3, 0), ("version0", "shard.version", 0, 0),
                                   ("rank2", "shard.rank", 2, 0), ("world3", "shard.world", 3, 0),
                                   ("world1", "shard.world", 1, 0),
                                   ("capacity15", "shard.capacity", 15, 0),
                                   ("capacity32", "shard.capacity", 32, 0),
                                   ("size17", "shard.size", 17, 0), ("size16", "shard.size", 16, 0),
                                   ("position9", "shard.position", 9, 0),
                                   ("width0", "shard.widths", 0, 0), ("width_not_table", "shard.widths", 2, 0),
                                   ("dtype6", "shard.dtypes", 6, 1), ("dtype_not_table", "shard.dtypes", 5, 2)]:
        g = bytearray(good)
        struct.pack_into("<q", g, key_value_at(good, key) + 8 * elem, value)
        seeds["shard_c_" + name] = fix_crc(g)
    g = bytearray(good)
    g[key_value_at(good, "shard.rank") - 1] = ord("K")
    seeds["shard_c_rank_missing"] = fix_crc(g)
    g = bytearray(good)
    at = key_value_at(good, "shard.rank")
    g[at - 8 - len("shard.rank")] = 3  # an f64
    seeds["shard_c_rank_f64"] = fix_crc(g)
    g = bytearray(good)
    g[key_value_at(good, "kind")] = ord("t")  # "thard"
    seeds["shard_c_kind_other"] = fix_crc(g)
    seeds["shard_c_no_table"] = good[:total]
    seeds["shard_c_table_cut"] = good[:total + 100]
    seeds["shard_c_trailing"] = good + b"\0"
    with open(os.path.join(OUT, "current_replay_per.agrl"), "rb") as fh:
        table = fh.read()  # 24 columns, full, at position 6: rank 0 of 2 of 48 at global position 11
    keys = [(4, "kind", "shard"), (2, "shard.version", 2), (4, "shard.library", "0.1.0"), (2, "shard.rank", 0),
            (2, "shard.world", 2), (2, "shard.capacity", 48), (2, "shard.position", 11), (2, "shard.size", 48),
            (5, "shard.widths", [3, 1, 1]), (5, "shard.dtypes", [0, 4, 0])]
    seeds["shard_c_per_rank0_of_2"] = container(keys, [], part=16 << 20) + table
    seeds["shard_c_per_rank0_of_2_crc0"] = container(keys, [], part=16 << 20, crc=False) + table


def ac_seeds(seeds):
    """Variants of the SAC/TD3 container that tests/make_legacy writes (a
    TD3 agent): its keys changed under a sound CRC (sizes, configuration,
    counters, seeds, bounds, the noise's copies, an f64 that is not an f32,
    counts past their limits), the wrong kind or algo, a newer version, a
    key missing or of another type, a CRC of 0, its table cut or missing,
    a trailing byte."""
    path = os.path.join(OUT, "current_td3.agrl")
    with open(path, "rb") as fh:
        good = fh.read()
    total = struct.unpack_from("<Q", good, 32)[0]
    valid_and_crc0(seeds, "ac_c_", good)
    for name, key, extra, value in [("version3", "ac.version", 0, 3), ("obs_dim4", "ac.sizes", 0, 4),
                                    ("hidden_huge", "ac.sizes", 8, 1 << 23), ("act_dim65", "ac.sizes", 24, 65),
                                    ("batch0", "ac.batch_size", 0, 0), ("actor_updates0", "ac.actor_updates", 0, 0),
                                    ("stream_seed", "ac.update_rng_seed", 0, 12345),
                                    ("noise_copies3", "ac.noise_copies", 0, 3),
                                    ("noise_copies_huge", "ac.noise_copies", 0, 1 << 40),
                                    ("buffer5", "ac.buffer_size", 0, 5)]:
        g = bytearray(good)
        struct.pack_into("<q", g, key_value_at(good, key) + extra, value)
        seeds["ac_c_" + name] = fix_crc(g)
    for name, key, value in [("low3", "ac.low", 3.0), ("gamma_not_f32", "ac.gamma", 0.1),
                             ("high_nan", "ac.high", float("nan"))]:
        g = bytearray(good)
        struct.pack_into("<d", g, key_value_at(good, key), value)
        seeds["ac_c_" + name] = fix_crc(g)
    for name, key, at, data in [("kind_dq", "kind", 0, b"dq"), ("algo_ddp", "ac.algo", 0, b"ddp"),
                                ("tau_missing", "ac.tau", -1, b"U"),
                                ("gamma_i64", "ac.gamma", -8 - len("ac.gamma"), b"\x02"),
                                ("seed_i64", "ac.seed", -8 - len("ac.seed"), b"\x02")]:
        g = bytearray(good)
        o = key_value_at(good, key) + at
        g[o:o + len(data)] = data
        seeds["ac_c_" + name] = fix_crc(g)
    seeds["ac_c_no_table"] = good[:total]
    seeds["ac_c_table_cut"] = good[:total + 100]
    seeds["ac_c_trailing"] = good + b"\0"


def run_seeds(seeds):
    """Run states in the packed layout of agrl 0.1.0 (AGRLRUN1: the DQN's
    loop, AGRLRUNA: SAC's and TD3's), which agfile_legacy.c reads into the
    keys of kind "run": two copies of four observations and 12 bytes of
    environment state, and one whose lengths do not add up."""
    for magic, fixed in ((b"AGRLRUN1", 248), (b"AGRLRUNA", 264)):
        h = bytearray(fixed)
        h[0:8] = magic
        struct.pack_into("<IIII", h, 8, 1, 2, 4, 0)
        struct.pack_into("<qqqq", h, 24, 640, 31, 3, 0 if magic[7:] == b"A" else 17)
        struct.pack_into("<ii", h, 56, 5, 5)
        struct.pack_into("<20d", h, 64, *[float(i) for i in range(20)])
        struct.pack_into("<dQq", h, 224, 2.5, 12, 600)
        if magic[7:] == b"A":
            struct.pack_into("<qff", h, 248, 512, 0.25, -1.5)
        body = struct.pack("<8f", *[0.125 * i for i in range(8)]) + bytes(range(12))
        name = "run_" + magic[4:].decode().lower()
        seeds[name] = bytes(h) + body
        seeds[name + "_cut"] = bytes(h) + body[:-1]


def damaged(seeds, prefix, good, keys_to_drop, changes):
    """Damaged copies of the container good: cut, a data byte flipped, a
    trailing byte, a header CRC of 0, each key of keys_to_drop renamed
    (missing), and each change (name, key, struct format, value) packed
    over a key's value under a sound CRC."""
    seeds[prefix + "valid"] = good
    seeds[prefix + "truncated"] = good[:-3]
    seeds[prefix + "truncated_header"] = good[:60]
    flipped = bytearray(good)
    flipped[-6] ^= 0x40
    seeds[prefix + "flipped_data"] = bytes(flipped)
    seeds[prefix + "trailing"] = good + b"\0"
    crc0 = bytearray(good)
    struct.pack_into("<I", crc0, struct.unpack_from("<I", good, 12)[0] - 4, 0)
    seeds[prefix + "crc0"] = bytes(crc0)
    for key in keys_to_drop:
        g = bytearray(good)
        g[key_value_at(good, key) - 1] ^= 0x20  # the name's last letter in the other case
        seeds[prefix + "missing_" + key.split(".")[-1]] = fix_crc(g)
    for name, key, fmt, value in changes:
        g = bytearray(good)
        struct.pack_into(fmt, g, key_value_at(good, key), value)
        seeds[prefix + name] = fix_crc(g)


def run_container_seeds(seeds):
    """Run states of kind "run" (version 2), as the training loop writes
    them: the DQN's loop and SAC's and TD3's ("ac"), two copies of four
    observations and 12 bytes of environment state, and damaged copies: cut,
    flipped, keys missing, counters out of range, the ring inconsistent,
    sizes that differ from the sections, the other loop."""
    obs = struct.pack("<8f", *[0.125 * i for i in range(8)])
    env = bytes(range(12))
    for loop in ("dqn", "ac"):
        keys = [(4, "kind", "run"), (2, "run.version", 2), (4, "run.loop", loop), (2, "run.n_envs", 2),
                (2, "run.obs_dim", 4), (2, "run.step", 640), (2, "run.episodes", 31), (2, "run.since_train", 3),
                (2, "run.since_target", 17 if loop == "dqn" else 0), (2, "run.returns_kept", 5),
                (2, "run.returns_next", 5), (6, "run.returns", [float(i) for i in range(20)]),
                (3, "run.mean", 2.5), (2, "run.last_eval", 600)]
        if loop == "ac":
            keys += [(2, "run.last_report", 512), (6, "run.losses", [0.25, -1.5])]
        good = container(keys, [("obs", 0, [2, 4], obs), ("env_state", 3, None, env)])
        damaged(seeds, "run_c_%s_" % loop, good, ["run.step", "run.mean", "run.returns", "run.loop"],
                [("next6", "run.returns_next", "<q", 6), ("next20", "run.returns_next", "<q", 20),
                 ("kept21", "run.returns_kept", "<q", 21), ("eval_late", "run.last_eval", "<q", 641),
                 ("n_envs3", "run.n_envs", "<q", 3), ("obs_dim0", "run.obs_dim", "<q", 0),
                 ("step_negative", "run.step", "<q", -1)])
        ring = {"run.returns_kept": 20, "run.returns_next": 7}  # a full ring, its next slot anywhere
        full = [(t, name, ring.get(name, v)) for t, name, v in keys]
        seeds["run_c_%s_ring_full" % loop] = container(full, [("obs", 0, [2, 4], obs), ("env_state", 3, None, env)])
    g = bytearray(seeds["run_c_dqn_valid"])
    at = key_value_at(g, "run.loop")
    g[at:at + 3] = b"acx"
    seeds["run_c_dqn_loop_other"] = fix_crc(g)
    seeds["run_c_obs_i32"] = container([(4, "kind", "run"), (2, "run.version", 2)], [("obs", 4, [2, 4], obs)])


def cli_seeds(seeds):
    """`agrl train`'s state in a checkpoint (kind "cli", version 1): the
    settings as keys (a flag as the i64 1), the summary's counters, the logs
    as blobs; with and without eval.csv, and damaged copies: cut, flipped,
    keys missing, counters out of range, a loss that is not an f32, the
    settings miscounted, a flag as a string, an option train does not
    have, --resume among them, another section."""
    counters = [(2, "cli.rows", 28), (3, "cli.best_mean", float("-inf")), (2, "cli.solved_at", -1),
                (3, "cli.last_loss", 0.5), (2, "cli.last.kind", 1), (2, "cli.last.step", 960),
                (2, "cli.last.episodes", 14), (2, "cli.last.updates", 896), (3, "cli.last.episode_return", 12.0),
                (2, "cli.last.episode_length", 12), (2, "cli.last.truncated", 0), (3, "cli.last.mean_return", 30.25),
                (3, "cli.last.loss", 0.5), (3, "cli.last.epsilon", 0.25), (2, "cli.evals", 1),
                (2, "cli.eval_solved_at", -1), (2, "cli.best_eval_at", 1000), (3, "cli.last_eval", 101.5),
                (3, "cli.best_eval", 101.5)]
    opts = [(4, "cli.opt.env", "cartpole"), (4, "cli.opt.steps", "3000"), (2, "cli.opt.double", 1),
            (4, "cli.opt.eval-every", "1000")]
    logs = [("episodes.csv", 3, None, b"episode,step,return,length,truncated,mean20,epsilon,updates\n1,12,12,12,0,12,1,0\n"),
            ("losses.csv", 3, None, b"step,updates,loss,mean20\n64,32,0.5,12\n"),
            ("eval.csv", 3, None, b"step,updates,mean,std,min,max,episodes\n1000,896,101.5,0,101.5,101.5,2\n")]
    head = [(4, "kind", "cli"), (2, "cli.version", 1), (2, "cli.opts", len(opts))]
    good = container(head + opts + counters, logs)
    damaged(seeds, "cli_", good, ["cli.rows", "cli.best_eval", "cli.opt.steps", "cli.last.kind"],
            [("kind2", "cli.last.kind", "<q", 2), ("rows_negative", "cli.rows", "<q", -5),
             ("truncated2", "cli.last.truncated", "<q", 2), ("solved_at_minus2", "cli.solved_at", "<q", -2),
             ("loss_not_f32", "cli.last_loss", "<d", 0.1), ("epsilon_huge", "cli.last.epsilon", "<d", 1e300),
             ("opts5", "cli.opts", "<q", 5), ("version2", "cli.version", "<q", 2), ("flag2", "cli.opt.double", "<q", 2)])
    seeds["cli_no_eval"] = container([(4, "kind", "cli"), (2, "cli.version", 1), (2, "cli.opts", 3)] + opts[:3] + counters,
                                     logs[:2])
    seeds["cli_no_losses"] = container(head + opts + counters, [logs[0], logs[2]])
    seeds["cli_extra_section"] = container(head + opts + counters, logs + [("notes", 3, None, b"x")])
    seeds["cli_log_tensor"] = container(head + opts + counters, [("episodes.csv", 3, [4], b"abcd"), logs[1]])
    seeds["cli_flag_string"] = container(head + [(4, "cli.opt.double", "true")] + opts[:2] + opts[3:] + counters, logs)
    seeds["cli_value_i64"] = container(head + [(2, "cli.opt.steps", 3000)] + opts[:1] + opts[2:] + counters, logs)
    seeds["cli_unknown_option"] = container(head + [(4, "cli.opt.colour", "blue")] + opts[1:] + counters, logs)
    seeds["cli_resume_option"] = container(head + [(4, "cli.opt.resume", "x")] + opts[1:] + counters, logs)
    seeds["cli_kind_run"] = container([(4, "kind", "run"), (2, "cli.version", 1), (2, "cli.opts", 4)] + opts + counters,
                                      logs)


def frames_seeds(seeds):
    """Frame tables (kind "frames", docs/container.md): 3 x 2 x 1 frames,
    stack 4, 2 copies, a ring of 10 holding 7 entries, then the fields'
    table (action and reward, f32); valid, and with a key changed, the
    frames' section of another shape, the fields' table of another size,
    missing, cut, followed by a byte, and another kind. Prioritized tables
    (version 2, frames.alpha, the fields' table with its sampler: leaves
    p^alpha, some of entries that may not be sampled): valid, and with
    alpha outside [0, 1] or not the sampler's, the sampler missing, a
    sampler in a version 1 file, a newer version."""
    fr, cap, size = 3 * 2 * 1 + 1, 10, 7
    frames = bytearray((7 * i + 3) % 251 for i in range(fr * size))
    for c in range(size):
        frames[c * fr + fr - 1] = 1 if c in (0, 1, 4) else 0  # first flags
    def head(size=size, changes=()):
        keys = [(4, "kind", "frames"), (2, "frames.version", 1), (2, "frames.height", 3), (2, "frames.width", 2),
                (2, "frames.channels", 1), (2, "frames.stack", 4), (2, "frames.n_envs", 2),
                (2, "frames.capacity", cap), (2, "frames.min_size", 1), (2, "frames.size", size)]
        keys = [(t, n, dict(changes).get(n, v)) for t, n, v in keys]
        return container(keys, [("frames", 3, [fr, size], bytes(frames[:fr * size]))])
    def table(size=size, alpha=None):
        keys = [(4, "kind", "replay"), (2, "replay.version", 2), (2, "replay.storage", 0), (2, "replay.capacity", cap),
                (2, "replay.min_size", 1), (2, "replay.size", size), (2, "replay.position", size % cap),
                (5, "replay.widths", [1, 1]), (5, "replay.dtypes", [0, 0]), (4, "replay.field.0", "action"),
                (4, "replay.field.1", "reward"), (4, "replay.sampler", "none" if alpha is None else "per")]
        cols = struct.pack("<%df" % (2 * size), *[float(i % 5) for i in range(2 * size)])
        if alpha is None:
            return container(keys, [("columns", 0, [2, size], cols)])
        keys += [(3, "replay.per.alpha", alpha), (3, "replay.per.max_priority", 2.0)]
        leaves = struct.pack("<%dd" % size, *[(0.5 + c % 3) ** alpha for c in range(size)])
        return container(keys, [("columns", 0, [2, size], cols), ("leaves", 6, [size], leaves)])
    good = head() + table()
    seeds["frames_valid"] = good
    seeds["frames_stack65"] = head(changes=[("frames.stack", 65)]) + table()
    seeds["frames_envs11"] = head(changes=[("frames.n_envs", 11)]) + table()
    seeds["frames_huge_frame"] = head(changes=[("frames.height", 1 << 30), ("frames.width", 1 << 30)]) + table()
    seeds["frames_version2"] = head(changes=[("frames.version", 2)]) + table()
    seeds["frames_table_size6"] = head() + table(6)
    seeds["frames_no_table"] = head()
    seeds["frames_table_cut"] = good[:-9]
    seeds["frames_trailing"] = good + b"\0"
    seeds["frames_kind_replay"] = table() + table()
    def per_head(alpha=0.5, version=2):
        k = [(4, "kind", "frames"), (2, "frames.version", version), (2, "frames.height", 3), (2, "frames.width", 2),
             (2, "frames.channels", 1), (2, "frames.stack", 4), (2, "frames.n_envs", 2), (2, "frames.capacity", cap),
             (2, "frames.min_size", 1), (2, "frames.size", size), (3, "frames.alpha", alpha)]
        return container(k, [("frames", 3, [fr, size], bytes(frames[:fr * size]))])
    seeds["frames_per_valid"] = per_head() + table(alpha=0.5)
    seeds["frames_per_alpha_other"] = per_head(0.25) + table(alpha=0.5)
    seeds["frames_per_alpha_1_5"] = per_head(1.5) + table(alpha=0.5)
    seeds["frames_per_no_sampler"] = per_head() + table()
    seeds["frames_v1_with_sampler"] = head() + table(alpha=0.5)
    seeds["frames_per_version3"] = per_head(version=3) + table(alpha=0.5)


def dqn_frames_seeds(seeds):
    """Variants of the frame-table DQN (dqn.version 4) that make_frame_dqn.py
    writes: the DQN's keys changed under a sound CRC (a stack that is not
    the network's, no stack in a version-4 file, an image of another shape),
    the frame table's keys changed under its own sound CRC (another stack,
    another frame), a CRC of 0, the frame table or its fields' table cut,
    missing or followed by a byte."""
    path = os.path.join(OUT, "current_dqn_frames.agrl")
    if not os.path.exists(path):
        return
    with open(path, "rb") as fh:
        good = fh.read()
    total = struct.unpack_from("<Q", good, 32)[0]
    ft = struct.unpack_from("<Q", good, total + 32)[0]
    valid_and_crc0(seeds, "dqn_f_", good)
    for name, key, elem, value in [("stack3", "dqn.frame_stack", 0, 3), ("stack0", "dqn.frame_stack", 0, 0),
                                   ("stack65", "dqn.frame_stack", 0, 65), ("version3", "dqn.version", 0, 3),
                                   ("obs_channels3", "dqn.obs_shape", 0, 3),
                                   ("obs_height_huge", "dqn.obs_shape", 1, 1 << 40)]:
        g = bytearray(good)
        struct.pack_into("<q", g, key_value_at(good, key) + 8 * elem, value)
        seeds["dqn_f_" + name] = fix_crc(g)
    inner = good[total:total + ft]
    for name, key, value in [("table_stack3", "frames.stack", 3), ("table_height2", "frames.height", 2),
                             ("table_envs2", "frames.n_envs", 2), ("table_size25", "frames.size", 25)]:
        g = bytearray(inner)
        struct.pack_into("<q", g, key_value_at(inner, key), value)
        seeds["dqn_f_" + name] = good[:total] + fix_crc(g) + good[total + ft:]
    seeds["dqn_f_no_table"] = good[:total]
    seeds["dqn_f_table_cut"] = good[:total + ft // 2]
    seeds["dqn_f_no_fields"] = good[:total + ft]
    seeds["dqn_f_fields_cut"] = good[:-7]
    seeds["dqn_f_trailing"] = good + b"\0"


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
    seeds["conv_valid_0"] = conv_net((2, 9, 8), [(3, 3, 2, 1), (4, 2, 1, 0)], [6, 3], 1, 0, 0)
    seeds["conv_valid_1"] = conv_net((1, 5, 5), [(2, 5, 1, 0)], [2], 2, 0, 1)
    seeds["conv_crc0"] = conv_net((2, 9, 8), [(3, 3, 2, 1), (4, 2, 1, 0)], [6, 3], 1, 0, 0, crc=False)
    seeds["conv_kernel_too_large_crc0"] = conv_net((2, 3, 3), [(3, 3, 1, 0), (4, 2, 1, 0)], [3], 1, 0, 0,
                                                   crc=False)
    seeds["conv_values7_crc0"] = conv_net((2, 9, 8), [(3, 3, 2, 1), (4, 2, 1, 0)], [6, 3], 1, 0, 0, crc=False,
                                          conv_values=7)
    seeds["conv_version3_crc0"] = conv_net((1, 5, 5), [(2, 5, 1, 0)], [2], 2, 0, 1, crc=False, version=3)
    seeds["not_a_model"] = b"PK\x03\x04 this is not a model file"
    seeds["empty"] = b""
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, "mlp_" + name + ".agrl"), "wb") as f:
            f.write(data)
    print("%d model seeds in %s" % (len(seeds), OUT))
    agents = {}
    dqn_seeds(agents)
    shard_seeds(agents)
    ac_seeds(agents)
    run_seeds(agents)
    run_container_seeds(agents)
    cli_seeds(agents)
    frames_seeds(agents)
    dqn_frames_seeds(agents)
    for name, data in sorted(agents.items()):
        with open(os.path.join(OUT, name + ".agrl"), "wb") as f:
            f.write(data)
    print("%d agent seeds in %s" % (len(agents), OUT))


if __name__ == "__main__":
    main()
