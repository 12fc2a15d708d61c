"""Counts cmocka results per device from a `ctest -V` log.

usage: python3 scripts/count_tests.py CTEST_LOG
Prints, for each CTest test (name.device), the cmocka tests run, passed,
failed and skipped, then totals per device.
"""
import re
import sys
from collections import defaultdict


def main():
    names = {}
    per = defaultdict(lambda: [0, 0, 0, 0])  # run, passed, failed, skipped
    skipped_groups = []
    for line in open(sys.argv[1], errors="replace"):
        m = re.match(r"\s*(\d+): Test command: .*/test_(\w+) \"?(\w+)", line)
        if m:
            names[m.group(1)] = f"{m.group(2)}.{m.group(3)}"
            continue
        m = re.match(r"(\d+): (.*)", line)
        if not m or m.group(1) not in names:
            continue
        key, text = names[m.group(1)], m.group(2)
        if re.search(r"\[==========\] (\d+) test\(s\) run", text):
            per[key][0] += int(re.search(r"(\d+) test", text).group(1))
        elif text.startswith("[  PASSED  ]"):
            per[key][1] += int(re.search(r"(\d+) test", text).group(1))
        elif text.startswith("[  FAILED  ]") and "test(s)" in text:
            per[key][2] += int(re.search(r"(\d+) test", text).group(1))
        elif "SKIPPED" in text and "no CUDA device" in text:
            per[key][3] += int(re.search(r"\((\d+) tests", text).group(1))
            skipped_groups.append(key)
    tot = defaultdict(lambda: [0, 0, 0, 0])
    for key in sorted(per):
        r, p, f, s = per[key]
        print(f"{key:22} run {r:4}  passed {p:4}  failed {f:3}  skipped {s:3}")
        dev = key.split(".")[-1]
        for i, v in enumerate(per[key]):
            tot[dev][i] += v
    for dev, (r, p, f, s) in sorted(tot.items()):
        print(f"total {dev:16} run {r:4}  passed {p:4}  failed {f:3}  skipped {s:3}")


if __name__ == "__main__":
    main()
