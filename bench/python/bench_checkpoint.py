"""Saving and loading a full 1M-transition replay table with its prioritized
sampler: agrl beside TorchRL and beside the disk's own sequential speed, in
one invocation on one machine.

usage: python3 bench/python/bench_checkpoint.py [--device cpu|cuda] [--rows N] [--reps N]
           [--dir DIR] [--json FILE] [--peers IMPLS]

The table: --rows transitions (1,000,000) of obs f32[20], action f32[1],
reward f32[1], next_obs f32[19], terminated f32[1] = 42 f32 a transition
(168 MB), on the device (cuda when agrl sees a GPU, else cpu, said so),
filled completely from host arrays in batches of 250,000, random values;
prioritized (alpha 0.6, beta 0.4) with the priority of every transition
updated to a log-uniform value in [1e-3, 10], so the sum tree is not uniform.

Rows (each the median of --reps timed repetitions after one untimed one;
min and max beside it; GB/s is 1e9 bytes a second):

  agrl     save: ReplayBuffer.save(path) of the prioritized table (its fields,
           ring and sum tree's leaves; the write ends with fsync) and of the
           same table without prioritized sampling;
           load: ReplayBuffer.load(ctx, path) into the device table, cold (the
           file dropped from the page cache first: fsync, then
           posix_fadvise(DONTNEED)) and warm (the file in the page cache).
           After the loads a table loaded with the saver's seed draws the same
           batch (indices, weights, every field) as the saved one, holds the
           same total priority, and its rows equal the data that was added.
  disk     write: the agrl file's number of bytes written sequentially in
           16 MiB chunks to a new file, then fsync (plain os.write), and
           `dd if=/dev/zero of=F bs=16M count=N oflag=direct conv=fsync`;
           read: the plain file read back in 16 MiB chunks after it was
           dropped from the page cache, and `dd if=F of=/dev/null bs=16M
           iflag=direct`. dd runs from an argument vector (no shell); its row is
           left out, with the reason, where dd or O_DIRECT is not available.
  torchrl  ReplayBuffer(storage=LazyTensorStorage(N, device=D)) holding a
           TensorDict of the same fields, filled the same way, .dumps(dir) and
           a new buffer's .loads(dir) (cold and warm as above); and
           TensorDictPrioritizedReplayBuffer(alpha=0.6, beta=0.4,
           storage=LazyTensorStorage(N, device=D)) with the same priorities
           (where its sum tree does not load for device storage, with
           sampler_device="cpu", said in the note). Every file that dumps
           wrote is fsync'ed before the clock stops. A row that fails is
           reported with the reason.

Printed: the rows; agrl's save time over the disk's write time and load time
over the disk's read time (the target is at most 1.5x, judged against the
faster disk row of each); TorchRL's time over agrl's for each row. --json FILE
writes the rows, ratios, checks, versions (torch, torchrl, tensordict), the
device's name, the target directory's file system (/proc/mounts, statvfs) and
the bytes a transition takes in each format.

The big files live in a folder made under --dir (default: the JSON file's
folder's parent, else $TMPDIR or /tmp) and are removed after each row; the
folder itself is removed at the end.
"""
import argparse
import ctypes
import gc
import json
import logging
import math
import mmap
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import peerlib as pl  # noqa: E402

FIELDS = (("obs", 20), ("action", 1), ("reward", 1), ("next_obs", 19), ("terminated", 1))
WIDTH = sum(w for _, w in FIELDS)  # 42
ALPHA, BETA = 0.6, 0.4
SEED = 11
B = 256                 # the batch drawn to compare a loaded table with the saved one
CHUNK = 16 << 20        # 16 MiB: dd's bs=16M
ADD = 250_000           # transitions a fill call
SLOW_S = 5.0            # a row whose untimed repetition takes longer runs at most 3 timed ones
IMPLS = ("agrl", "disk", "torchrl")
TARGET = 1.5


# ---------------------------------------------------------------- files and the page cache

def rm(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def files_of(path):
    if os.path.isdir(path):
        return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)
    return [path]


def size_of(path):
    return sum(os.path.getsize(f) for f in files_of(path))


def fsync_all(path):
    """fsync of every file under path (a file or a folder), and of the folders."""
    for f in files_of(path):
        fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    if os.path.isdir(path):
        for d, _, _ in os.walk(path):
            fd = os.open(d, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def drop_cache(path):
    """Writes back and drops every file under path from the page cache (fsync, then
    posix_fadvise DONTNEED); returns the fraction of its pages still resident, or None
    where that cannot be told."""
    for f in files_of(path):
        fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return resident(path)


_libc = None


def _mincore_file(f):
    """(resident pages, pages) of one file, through mmap + mincore."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mmap.restype = ctypes.c_void_p
        _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_long]
        _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
        _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(f)
    if size == 0:
        return 0, 0
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            raise OSError(ctypes.get_errno(), "mmap")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            return sum(1 for b in bytes(vec) if b & 1), pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def resident(path):
    try:
        got = [_mincore_file(f) for f in files_of(path)]
    except (OSError, AttributeError, ValueError):
        return None
    pages = sum(p for _, p in got)
    return sum(r for r, _ in got) / pages if pages else 0.0


def filesystem(path):
    """The file system that holds path: /proc/mounts' line of the longest mount
    point above it, statvfs, and the block device's model where sysfs has it."""
    real = os.path.realpath(path)
    best = None
    unesc = lambda s: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)  # noqa: E731
    try:
        with open("/proc/mounts") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 4:
                    continue
                dev, mnt, fstype, opts = (unesc(p) for p in parts[:4])
                inside = mnt == "/" or real == mnt or real.startswith(mnt.rstrip("/") + "/")
                if inside and (best is None or len(mnt) >= len(best["mount"])):
                    best = {"device": dev, "mount": mnt, "fstype": fstype, "options": opts}
    except OSError:
        pass
    info = {"path": real, **(best or {"fstype": "?", "device": "?", "mount": "?", "options": ""})}
    st = os.statvfs(real)
    info.update(block_size=st.f_bsize, fragment_size=st.f_frsize, free_bytes=st.f_bavail * st.f_frsize,
                total_bytes=st.f_blocks * st.f_frsize)
    dev = info["device"]
    if dev.startswith("/dev/"):
        try:
            sysd = os.path.realpath(f"/sys/class/block/{os.path.basename(os.path.realpath(dev))}")
            if os.path.exists(os.path.join(sysd, "partition")):
                sysd = os.path.dirname(sysd)
            for key, rel in (("model", "device/model"), ("rotational", "queue/rotational")):
                p = os.path.join(sysd, rel)
                if os.path.exists(p):
                    with open(p) as fh:
                        info[key] = fh.read().strip()
        except OSError:
            pass
    return info


# ---------------------------------------------------------------- timing and rows

class Run:
    def __init__(self, args, n):
        self.args = args
        self.n = n
        self.rows = []     # {"impl", "work", "s", "min", "max", "reps", "bytes", "gb_s", "note"}
        self.absent = []   # {"impl", "work", "why"}
        self.checks = []   # {"impl", "check", "ok", "detail"}
        self.versions = {}

    def time(self, impl, work, fn, nbytes, note, prepare=None, after=None):
        """Times fn() (which waits for the device itself): prepare() before and
        after(result) after each repetition, both untimed; one untimed repetition
        first. nbytes: an int, or a callable asked after the first repetition;
        note: a string, or a callable asked after the last."""
        reps, vals, r = self.args.reps, [], -1
        while r < reps:
            if prepare:
                prepare()
            t0 = time.perf_counter()
            out = fn()
            dt = time.perf_counter() - t0
            if after:
                after(out)
            del out
            if r < 0 and dt > SLOW_S:
                reps = min(reps, 3)
            if r >= 0:
                vals.append(dt)
            if r < 0 and callable(nbytes):
                nbytes = nbytes()
            r += 1
        med, lo, hi = pl.summarize(vals)
        if callable(note):
            note = note()
        row = {"impl": impl, "work": work, "s": round(med, 6), "min": round(lo, 6), "max": round(hi, 6),
               "reps": len(vals), "bytes": nbytes, "gb_s": round(nbytes / med / 1e9, 4),
               "bytes_per_transition": round(nbytes / self.n, 3), "note": note}
        self.rows.append(row)
        print(f"  {impl:8} {work:22} {nbytes:>13,} B {med:9.4f} s  ({lo:.4f} - {hi:.4f}, {len(vals)} reps) "
              f"{row['gb_s']:7.3f} GB/s  {note}", flush=True)
        return row

    def gone(self, impl, work, why):
        self.absent.append({"impl": impl, "work": work, "why": why})
        print(f"  {impl:8} {work:22} not measured: {why}", flush=True)

    def check(self, impl, name, ok, detail):
        self.checks.append({"impl": impl, "check": name, "ok": bool(ok), "detail": detail})
        print(f"  {impl:8} check {name}: {'ok' if ok else 'FAILED'} ({detail})", flush=True)

    def row(self, impl, work):
        for r in self.rows:
            if r["impl"] == impl and r["work"] == work:
                return r
        return None


class Cache:
    """The page cache around a read row: prepare() drops path from it (cold) or
    only looks (warm); note(text) appends how much of the file was resident
    before the reads (the most of any repetition when cold, the least when warm)."""

    def __init__(self, path, cold):
        self.path, self.cold, self.seen = path, cold, []

    def prepare(self):
        self.seen.append(drop_cache(self.path) if self.cold else resident(self.path))

    def note(self, text):
        def done():
            seen = [s for s in self.seen if s is not None]
            if not seen:
                return f"{text} (page cache residency unknown)"
            frac = max(seen) if self.cold else min(seen)
            bound = "at most" if self.cold else "at least"
            return f"{text} ({bound} {100 * frac:.1f}% in the page cache before a read)"
        return done


def version_of(dist, module=None):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return getattr(module, "__version__", "?")


# ---------------------------------------------------------------- data

def make_data(np, n):
    rng = np.random.default_rng(SEED)
    data = {name: rng.standard_normal((n, w), dtype=np.float32) for name, w in FIELDS}
    data["terminated"] = (rng.random((n, 1)) < 0.01).astype(np.float32)
    prios = np.exp(rng.uniform(np.log(1e-3), np.log(10.0), n)).astype(np.float32)
    return data, prios


# ---------------------------------------------------------------- agrl

def bench_agrl(run, np, agrl, ctx, data, prios, work):
    n = run.n
    spec = {name: (w,) for name, w in FIELDS}
    sync = ctx.sync
    for prioritized in (True, False):
        kind = "prioritized" if prioritized else "uniform"
        rb = agrl.ReplayBuffer(ctx, n, spec, prioritized=prioritized, alpha=ALPHA, beta=BETA, seed=SEED)
        for c0 in range(0, n, ADD):
            rb.add(**{k: v[c0:c0 + ADD] for k, v in data.items()})
        if prioritized:
            rb.update_priorities(np.arange(n, dtype=np.int64), prios)
        sync()
        assert len(rb) == n and rb.position == 0
        path = os.path.join(work, f"{kind}.agrl")

        def save():
            rb.save(path)

        run.time("agrl", f"save_{kind}", save, lambda: os.path.getsize(path),
                 f"ReplayBuffer.save(path), {kind}, fsync included",
                 prepare=lambda: (rm(path), sync()))
        nbytes = os.path.getsize(path)

        def load():
            b = agrl.ReplayBuffer.load(ctx, path, fields=spec, seed=SEED)
            sync()
            return b

        def freed(b):
            b.free()

        c = Cache(path, cold=True)
        run.time("agrl", f"load_{kind}_cold", load, nbytes,
                 c.note("ReplayBuffer.load(ctx, path) onto the device, the file dropped from the page cache first"),
                 prepare=c.prepare, after=freed)
        c = Cache(path, cold=False)
        run.time("agrl", f"load_{kind}_warm", load, nbytes,
                 c.note("ReplayBuffer.load(ctx, path), the file in the page cache"), prepare=c.prepare, after=freed)

        # the loaded table against the saved one and against the data
        back = agrl.ReplayBuffer.load(ctx, path, fields=spec, seed=SEED)
        same = (len(back), back.capacity, back.position, back.prioritized) == (n, n, rb.position, prioritized)
        run.check("agrl", f"{kind}_header", same,
                  f"size {len(back)}, capacity {back.capacity}, position {back.position}, "
                  f"prioritized {back.prioritized}")
        if prioritized:
            t0, t1 = rb.total_priority(), back.total_priority()
            run.check("agrl", f"{kind}_total_priority", t0 == t1, f"saved {t0!r}, loaded {t1!r}")
        a, b = rb.sample(B), back.sample(B)  # the first draw of each, the same seed
        differ = [k for k in a if not np.array_equal(a[k].numpy(), b[k].numpy())]
        run.check("agrl", f"{kind}_same_draw", not differ and a.keys() == b.keys(),
                  f"sample({B}) with seed {SEED}: " + (f"{', '.join(differ)} differ" if differ else
                                                      "indices, " + ("weights, " if prioritized else "")
                                                      + "every field equal"))
        idx = np.asarray(b["indices"].numpy(), dtype=np.int64)
        bad = [k for k in data if not np.array_equal(b[k].numpy(), data[k][idx])]
        run.check("agrl", f"{kind}_rows", not bad,
                  f"the loaded table's sampled rows {'differ in ' + ', '.join(bad) if bad else 'equal the added data'}")
        back.free()
        rb.free()
        rb = back = a = b = None
        rm(path)
        gc.collect()


# ---------------------------------------------------------------- the disk

def write_plain(path, nbytes, chunk):
    mv = memoryview(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        left = nbytes
        while left > 0:
            k, off = min(left, len(mv)), 0
            while off < k:
                off += os.write(fd, mv[off:k])
            left -= k
        os.fsync(fd)
    finally:
        os.close(fd)


def read_plain(path, buf):
    total = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(buf)
            if not k:
                break
            total += k
    return total


def dd(args):
    """Runs dd with an argument vector; raises RuntimeError with dd's message on failure."""
    p = subprocess.run(["dd", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, env={**os.environ, "LC_ALL": "C"})
    if p.returncode:
        msg = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[0]
        raise RuntimeError(f"dd {' '.join(args)}: {msg}")
    return p.stderr


def bench_disk(run, work, nbytes, fs):
    chunk = os.urandom(CHUNK)
    path = os.path.join(work, "plain.bin")
    run.time("disk", "write_plain", lambda: write_plain(path, nbytes, chunk), nbytes,
             "os.write of 16 MiB chunks (random bytes) to a new file, then fsync", prepare=lambda: rm(path))
    buf = bytearray(CHUNK)

    def read():
        got = read_plain(path, buf)
        assert got == nbytes, f"read {got} of {nbytes} bytes"

    c = Cache(path, cold=True)
    run.time("disk", "read_plain_cold", read, nbytes,
             c.note("unbuffered readinto of 16 MiB chunks, the file dropped from the page cache first"),
             prepare=c.prepare)
    rm(path)

    if not shutil.which("dd"):
        run.gone("disk", "write_dd_direct", "dd is not installed")
        run.gone("disk", "read_dd_direct", "dd is not installed")
        return
    count = math.ceil(nbytes / CHUNK)
    dpath = os.path.join(work, "dd.bin")
    wargs = ["if=/dev/zero", f"of={dpath}", "bs=16M", f"count={count}", "oflag=direct", "conv=fsync"]
    try:
        dd(wargs)  # O_DIRECT may be refused (tmpfs, some overlays): found out before timing
    except (RuntimeError, OSError) as e:
        why = f"{e} (file system {fs.get('fstype', '?')})"
        run.gone("disk", "write_dd_direct", why)
        run.gone("disk", "read_dd_direct", why)
        rm(dpath)
        return
    zeros = " (zeros: a compressing file system would flatter it)" if fs.get("fstype") in ("zfs", "btrfs") else ""
    run.time("disk", "write_dd_direct", lambda: dd(wargs), count * CHUNK,
             f"dd {' '.join(wargs)}, a new file each time{zeros}", prepare=lambda: rm(dpath))
    rargs = [f"if={dpath}", "of=/dev/null", "bs=16M", "iflag=direct"]
    try:
        dd(rargs)
    except (RuntimeError, OSError) as e:
        run.gone("disk", "read_dd_direct", str(e))
    else:
        run.time("disk", "read_dd_direct", lambda: dd(rargs), count * CHUNK, f"dd {' '.join(rargs)}")
    rm(dpath)


# ---------------------------------------------------------------- TorchRL

def bench_torchrl(run, np, torch, dev, data, prios, work):
    n = run.n
    if torch is None:
        run.gone("torchrl", "*", "torch does not import")
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            logging.getLogger("torchrl").setLevel(logging.WARNING)
            import tensordict
            import torchrl
            from tensordict import TensorDict
            from torchrl.data import LazyTensorStorage, ReplayBuffer, TensorDictPrioritizedReplayBuffer
        except ImportError as e:
            run.gone("torchrl", "*", f"not installed: {type(e).__name__}: {e}")
            return
        except Exception as e:
            run.gone("torchrl", "*", f"did not load: {type(e).__name__}: {e}"[:400])
            return
    logging.getLogger("torchrl").setLevel(logging.WARNING)  # its import sets INFO
    ext_warn = [str(w.message) for w in caught if "_torchrl" in str(w.message) or "symbol" in str(w.message)]
    run.versions["torchrl"] = version_of("torchrl", torchrl)
    run.versions["tensordict"] = version_of("tensordict", tensordict)
    d = torch.device(dev)
    sync = pl.torch_sync(torch, dev)
    tdata = {k: torch.from_numpy(v) for k, v in data.items()}
    v = f"torchrl {run.versions['torchrl']}"

    def fill(rb):
        for c0 in range(0, n, ADD):
            k = min(ADD, n - c0)
            rb.extend(TensorDict({key: t[c0:c0 + k] for key, t in tdata.items()}, batch_size=[k]))
        sync()

    def rows_equal(rb, idx):
        got = rb[torch.as_tensor(idx)]
        return [k for k in data if not np.array_equal(got[k].cpu().numpy(), data[k][idx])]

    def dumps_loads(kind, rb, make, label):
        path = os.path.join(work, f"torchrl_{kind}")

        def dumps():
            rb.dumps(path)
            fsync_all(path)

        run.time("torchrl", f"save_{kind}", dumps, lambda: size_of(path),
                 f"{v} {label}.dumps(dir) + fsync of every file it wrote", prepare=lambda: (rm(path), sync()))
        run.rows[-1]["files"] = len(files_of(path))
        nbytes = size_of(path)

        def loads():
            other = make()
            other.loads(path)
            sync()
            return other

        def dropped(other):
            del other
            gc.collect()

        c = Cache(path, cold=True)
        run.time("torchrl", f"load_{kind}_cold", loads, nbytes,
                 c.note(f"a new {label}'s .loads(dir), the files dropped from the page cache first"),
                 prepare=c.prepare, after=dropped)
        c = Cache(path, cold=False)
        run.time("torchrl", f"load_{kind}_warm", loads, nbytes,
                 c.note(f"a new {label}'s .loads(dir), the files in the page cache"), prepare=c.prepare, after=dropped)
        back = loads()
        rng = np.random.default_rng(SEED)
        idx = rng.integers(0, n, B)
        bad = rows_equal(back, idx)
        ok_len = len(back) == n
        run.check("torchrl", f"{kind}_rows", ok_len and not bad,
                  f"len {len(back)}; rows at {B} indices "
                  + (f"differ in {', '.join(bad)}" if bad else "equal the data"))
        return path, back

    # uniform
    try:
        rb = ReplayBuffer(storage=LazyTensorStorage(n, device=d))
        fill(rb)
        assert len(rb) == n
        assert not rows_equal(rb, np.arange(0, n, max(1, n // 97)))
        make = lambda: ReplayBuffer(storage=LazyTensorStorage(n, device=d))  # noqa: E731
        path, back = dumps_loads("uniform", rb, make, f"ReplayBuffer(LazyTensorStorage({n}, device={dev}))")
        del back, rb
        rm(path)
    except Exception as e:
        run.gone("torchrl", "uniform", f"failed: {type(e).__name__}: {e}"[:600])
    gc.collect()
    if dev == "cuda":
        torch.cuda.empty_cache()

    # prioritized
    kw, how = {}, ""

    def make_per():
        return TensorDictPrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, storage=LazyTensorStorage(n, device=d), **kw)

    def filled_per():
        per = make_per()
        fill(per)
        per.update_priority(torch.arange(n), torch.from_numpy(prios))
        return per

    try:
        per = filled_per()
    except Exception as e:
        why = f"{type(e).__name__}: {e}"
        if ext_warn:
            why += f" ({ext_warn[0]})"
        run.gone("torchrl", "prioritized", f"TensorDictPrioritizedReplayBuffer did not load: {why}"[:600])
        gc.collect()
        if dev != "cuda":
            return
        kw, how = {"sampler_device": "cpu"}, " (sum tree on the host: sampler_device='cpu')"
        try:
            per = filled_per()
        except Exception as e:
            run.gone("torchrl", "prioritized", f"with sampler_device='cpu' neither: {type(e).__name__}: {e}"[:600])
            return
    try:
        tree = type(per.sampler._sum_tree).__name__
        label = f"TensorDictPrioritizedReplayBuffer(alpha {ALPHA}, LazyTensorStorage({n}, device={dev}), {tree}{how})"
        path, back = dumps_loads("prioritized", per, make_per, label)
        t0, t1 = per.sampler._sum_tree.query(0, n), back.sampler._sum_tree.query(0, n)
        run.check("torchrl", "prioritized_total_priority", t0 == t1, f"saved {t0!r}, loaded {t1!r}")
        draws = []
        for buf in (per, back):  # a host tree draws from numpy's global generator, a CUDA one from torch's
            torch.manual_seed(SEED)
            np.random.seed(SEED)
            draws.append(buf.sample(B))
        a, b = draws
        same = torch.equal(a["index"].cpu(), b["index"].cpu()) and torch.equal(a["obs"].cpu(), b["obs"].cpu())
        run.check("torchrl", "prioritized_same_draw", same,
                  f"sample({B}) after torch.manual_seed({SEED}) and np.random.seed({SEED}): index, obs")
        del back, per, a, b, draws
        rm(path)
    except Exception as e:
        run.gone("torchrl", "prioritized", f"failed: {type(e).__name__}: {e}"[:600])
    gc.collect()


# ---------------------------------------------------------------- report

def ratios(run):
    """agrl against the disk (the target) and TorchRL against agrl."""
    out, verdicts = [], []
    print("\nagrl / the disk (same bytes: the time agrl takes over the time the disk takes, from GB/s; "
          f"target <= {TARGET}x against the faster disk row)")
    for a_work, disk_works, what in (("save_prioritized", ("write_plain", "write_dd_direct"), "save / disk write"),
                                     ("load_prioritized_cold", ("read_plain_cold", "read_dd_direct"),
                                      "load (cold) / disk read")):
        a = run.row("agrl", a_work)
        disks = [r for r in (run.row("disk", w) for w in disk_works) if r]
        for r in disks:
            if a:
                x = r["gb_s"] / a["gb_s"]
                out.append({"what": what, "agrl": a_work, "other": f"disk {r['work']}", "ratio": round(x, 3)})
                print(f"  agrl {a_work:22} / disk {r['work']:16} {x:6.2f}x  "
                      f"({a['gb_s']:.3f} vs {r['gb_s']:.3f} GB/s)")
        if not a or not disks:
            verdicts.append({"target": f"{what} <= {TARGET}x", "verdict": "not judged",
                             "detail": "no agrl row" if not a else "no disk row"})
            continue
        best = max(disks, key=lambda r: r["gb_s"])
        x = best["gb_s"] / a["gb_s"]
        verdicts.append({"target": f"{what} <= {TARGET}x", "verdict": "PASS" if x <= TARGET else "FAIL",
                         "detail": f"agrl {a['gb_s']:.3f} GB/s, disk {best['work']} {best['gb_s']:.3f} GB/s: {x:.2f}x"})
    print("\nTorchRL / agrl (time over time; above 1: agrl is faster)")
    for kind in ("uniform", "prioritized"):
        for w in (f"save_{kind}", f"load_{kind}_cold", f"load_{kind}_warm"):
            a, t = run.row("agrl", w), run.row("torchrl", w)
            if a and t:
                x = t["s"] / a["s"]
                out.append({"what": "torchrl / agrl", "agrl": w, "other": f"torchrl {w}", "ratio": round(x, 3)})
                print(f"  {w:26} torchrl {t['s']:8.4f} s / agrl {a['s']:8.4f} s = {x:6.2f}x  "
                      f"(bytes a transition: {t['bytes_per_transition']:.1f} vs {a['bytes_per_transition']:.1f})")
            elif a:
                print(f"  {w:26} torchrl: no row")
    print("\ntargets")
    for v in verdicts:
        print(f"  {v['verdict']:10} {v['target']:32} {v['detail']}")
    return out, verdicts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="cuda when agrl sees a GPU, else cpu")
    ap.add_argument("--rows", type=int, default=1_000_000, help="transitions in the table (default 1,000,000)")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions a row, at least 3 (default 5)")
    ap.add_argument("--dir", help="where the folder of big files is made (default: the JSON file's folder's "
                                  "parent, else $TMPDIR or /tmp)")
    ap.add_argument("--json", metavar="FILE", help="write the rows, ratios, checks, versions and file system as JSON")
    ap.add_argument("--peers", default=",".join(IMPLS), help=f"of: {', '.join(IMPLS)}")
    args = ap.parse_args()
    args.peers = [s.strip() for s in args.peers.split(",") if s.strip()]
    bad = [s for s in args.peers if s not in IMPLS]
    if bad or args.reps < 3 or args.rows < B:
        ap.error(f"unknown implementations: {', '.join(bad)}" if bad else f"--reps >= 3, --rows >= {B}")
    import numpy as np
    import agrl
    notes = []
    if args.device is None:
        args.device = "cuda" if agrl.cuda_device_count() > 0 else "cpu"
        if args.device == "cpu":
            notes.append("agrl sees no GPU: the tables are on the cpu (--device cuda on a machine with one)")
            print("note: " + notes[-1])
    dev = args.device
    try:
        ctx = agrl.Context(dev)
    except agrl.Error as e:
        print(f"bench_checkpoint: agrl has no {dev} device: {e}", file=sys.stderr)
        return 2
    n = args.rows
    run = Run(args, n)
    run.versions.update(python=sys.version.split()[0], numpy=np.__version__, agrl=agrl.library_version())
    device_name = ctx.device_name
    torch = None
    if "torchrl" in args.peers:
        try:
            import torch
            run.versions["torch"] = torch.__version__
            if dev == "cuda" and not torch.cuda.is_available():
                notes.append("torch sees no CUDA device: no TorchRL rows")
                print("note: " + notes[-1])
                torch = None
        except Exception as e:
            notes.append(f"torch does not import: {type(e).__name__}: {e}")
            print("note: " + notes[-1])
            torch = None

    base = args.dir or (os.path.dirname(os.path.dirname(os.path.abspath(args.json))) if args.json else None) \
        or os.environ.get("TMPDIR") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix="agrl_ckpt.", dir=base)
    try:
        fs = filesystem(work)
        need = 3 * n * (WIDTH * 4 + 16) + (1 << 30)
        data_mb = n * WIDTH * 4 / 1e6
        print(f"checkpoint rows: {n:,} transitions x {WIDTH} f32 ({data_mb:.1f} MB of data) on {dev} ({device_name})")
        print(f"target folder {work}: {fs['fstype']} on {fs['device']} (mounted at {fs['mount']}"
              f"{', ' + fs['model'] if fs.get('model') else ''}), {fs['free_bytes'] / 2**30:.1f} GiB free")
        if fs["fstype"] in ("tmpfs", "ramfs"):
            notes.append(f"the target folder is on {fs['fstype']}: the rows measure memory, not a disk (give --dir)")
            print("note: " + notes[-1])
        if fs["free_bytes"] < need:
            print(f"bench_checkpoint: {fs['free_bytes']:,} bytes free under {work}, {need:,} needed", file=sys.stderr)
            return 2
        print(f"median of {args.reps} timed repetitions after one untimed (at most 3 where one takes over "
              f"{SLOW_S:.0f} s);"
              " every write ends with fsync; cold loads and reads: the files dropped from the page cache first",
              flush=True)
        t0 = time.perf_counter()
        data, prios = make_data(np, n)
        nbytes = None
        for impl in IMPLS:
            if impl not in args.peers:
                continue
            print(f"[{impl}]", flush=True)
            try:
                if impl == "agrl":
                    bench_agrl(run, np, agrl, ctx, data, prios, work)
                elif impl == "disk":
                    a = run.row("agrl", "save_prioritized")
                    nbytes = a["bytes"] if a else n * (WIDTH + 1) * 4
                    bench_disk(run, work, nbytes, fs)
                elif impl == "torchrl":
                    bench_torchrl(run, np, torch, dev, data, prios, work)
            except Exception as e:  # reported, never fatal
                run.gone(impl, "*", f"failed: {type(e).__name__}: {e}"[:600])
            for f in os.listdir(work):
                rm(os.path.join(work, f))
            gc.collect()
        print(f"(all rows: {time.perf_counter() - t0:.0f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\ncheckpoint rows on {dev} ({device_name}), seconds, median of up to {args.reps}; "
          f"file system {fs['fstype']}")
    print(f"  {'impl':8} {'work':22} {'bytes':>13}   {'B/transition':>12} {'s':>9} {'GB/s':>8}")
    for r in run.rows:
        print(f"  {r['impl']:8} {r['work']:22} {r['bytes']:>13,}   {r['bytes_per_transition']:12.1f} {r['s']:9.4f} "
              f"{r['gb_s']:8.3f}")
    for a in run.absent:
        print(f"  {a['impl']:8} {a['work']:22} not measured: {a['why']}")
    failed = [c for c in run.checks if not c["ok"]]
    print(f"checks: {len(run.checks) - len(failed)} of {len(run.checks)} ok"
          + "".join(f"\n  FAILED {c['impl']} {c['check']}: {c['detail']}" for c in failed))
    rat, verdicts = ratios(run)
    if torch is not None and dev == "cuda":
        run.versions["torch_device"] = torch.cuda.get_device_name(0)
    print("\nversions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
    ctx.free()
    if args.json:
        doc = {"device": dev, "device_name": device_name, "transitions": n, "f32_a_transition": WIDTH,
               "fields": dict(FIELDS), "alpha": ALPHA, "beta": BETA, "reps": args.reps, "rows": run.rows,
               "absent": run.absent, "checks": run.checks, "ratios": rat, "targets": verdicts,
               "filesystem": fs, "versions": run.versions, "notes": notes}
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, args.json)
        print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
