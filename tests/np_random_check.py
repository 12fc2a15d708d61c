#!/usr/bin/env python3
"""agrl's copy of numpy's legacy RandomState (src/env/np_random.c) against
numpy itself: scripts of the calls MinAtar makes (seeding by an int and by
an array of words, rand(), randint(low, high) over ranges from one value to
2^32, scalar and in runs) go through tests/np_random_dump and through
np.random.RandomState; every value and the generator's state after each
script must be identical.

usage: tests/np_random_check.py PATH/TO/np_random_dump
(without numpy it runs again under the system's /usr/bin/python3, where
deps.sh's python3-matplotlib brings numpy; exit 77, skipped, without any)
"""
import os
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3" \
            and "AGRL_NP_RANDOM_REEXEC" not in os.environ:
        os.environ["AGRL_NP_RANDOM_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("numpy is not installed: skipped")
    sys.exit(77)


def numpy_run(script):
    rs, out = np.random.RandomState(0), []
    for line in script:
        op, *args = line.split()
        if op == "seed":
            rs = np.random.RandomState(int(args[0]))
        elif op == "seed_array":
            rs = np.random.RandomState([int(a) for a in args])
        elif op == "rand":
            out.append("%016x" % struct.unpack("<Q", struct.pack("<d", rs.rand()))[0])
        elif op == "randint":
            out.append(str(int(rs.randint(int(args[0]), int(args[1])))))
        elif op == "state":
            _, key, pos, _, _ = rs.get_state()
            out.append(" ".join([str(pos)] + [str(int(k)) for k in key]))
    return out


def make_script(g, k):
    s = ["seed %d" % g.integers(0, 2**32)] if k % 2 else \
        ["seed_array " + " ".join(str(w) for w in g.integers(0, 2**32, g.integers(1, 8)))]
    if k == 0:
        s = ["seed 0"]
    elif k == 1:
        s = ["seed %d" % (2**32 - 1)]
    for _ in range(int(g.integers(1, 3000))):
        c = g.integers(0, 4)
        if c == 0:
            s.append("rand")
        elif c == 1:  # MinAtar's small ranges, a one-value range included
            lo = int(g.integers(-3, 3))
            s.append("randint %d %d" % (lo, lo + int(g.integers(1, 12))))
        elif c == 2:  # wide ones: masks of every width up to 32 bits
            lo = int(g.integers(-2**40, 2**40))
            s.append("randint %d %d" % (lo, lo + int(g.integers(1, 2**32 + 1))))
        else:  # a run, as randint(1, 6, 8) and rand(8) draw one value at a time
            s += ["randint 1 6"] * 8 + ["rand"] * 8
    s.append("state")
    return s


def main():
    g = np.random.default_rng(20190628)
    compared = 0
    for k in range(60):
        script = make_script(g, k)
        got = subprocess.run([sys.argv[1]], input="\n".join(script) + "\n", capture_output=True, text=True,
                             check=True).stdout.split("\n")[:-1]
        want = numpy_run(script)
        if got != want:
            bad = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) if got[:1] else 0
            print(f"script {k}: value {bad} differs: agrl {got[bad][:80] if bad < len(got) else None!r}, "
                  f"numpy {want[bad][:80]!r}")
            return 1
        compared += len(want)
    print(f"np_random: {compared} values identical to numpy {np.__version__}'s RandomState")
    return 0


if __name__ == "__main__":
    sys.exit(main())
