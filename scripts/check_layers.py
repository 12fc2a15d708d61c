#!/usr/bin/env python3
"""The layers are folders, and a folder includes only from the folders below
it: this lists every `#include "FOLDER/..."` under src/ and include/ and
fails on an edge the table does not allow. The public headers (agrl/) may
be included from anywhere; they include only each other.

usage: scripts/check_layers.py [--table]
"""
import os
import re
import sys

# folder -> the folders its files may include from (besides itself and agrl/)
ALLOWED = {
    "base": [],
    "core": ["base"],
    "graph": ["core", "base"],
    "nn": ["graph", "core", "base"],
    "replay": ["nn", "graph", "core", "base"],
    "dist": ["replay", "nn", "graph", "core", "base"],
    "env": ["base"],
    "agent": ["replay", "nn"],
    "cli": ["base"],
    "cpu": ["base"],
    "cuda": ["base"],
    "vulkan": ["base"],
    "python": ["base"],  # python/src: the extension, over the public API
}
# Layers a folder sits on through the public headers alone (agrl/*.h), without
# including their internal ones: the agents train on env's environments and
# spread over dist's groups.
OVER_PUBLIC = {"agent": ["dist", "env"]}
# The one file below the backends that names their symbols: the registry finds
# each backend by the entry points that base/backend.h declares.
REGISTRY = ("core/registry.c", ["cpu", "cuda", "vulkan"])


def below(folder):
    """Every folder under `folder` in the layer order: those it may include
    from or sits on, and theirs (what scripts/check_symbols.py allows a
    folder's objects to use)."""
    seen, todo = set(), ALLOWED.get(folder, []) + OVER_PUBLIC.get(folder, [])
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo = todo + ALLOWED.get(f, []) + OVER_PUBLIC.get(f, [])
    return seen


INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.chdir(root)
    bad, edges = [], {}
    for top in ("src", "include", "python/src"):
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith((".c", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                parts = path.split(os.sep)
                folder = "agrl" if top == "include" else "python" if top == "python/src" else parts[1]
                for target in INCLUDE.findall(open(path, encoding="utf-8").read()):
                    edges.setdefault((folder, target), 0)
                    edges[(folder, target)] += 1
                    if target == folder or (target == "agrl" and folder != "agrl"):
                        continue
                    if folder == "agrl" or folder not in ALLOWED or target not in ALLOWED[folder]:
                        bad.append(f"{path}: includes {target}/ (allowed from {folder}/: "
                                   f"{', '.join(ALLOWED.get(folder, [])) or 'agrl only'})")
    if "--table" in sys.argv:
        print("folder   may include (besides itself and agrl/)   includes now")
        for folder, allowed in ALLOWED.items():
            now = ", ".join(f"{t} {n}" for (f, t), n in sorted(edges.items()) if f == folder and t != folder)
            print(f"{folder:8} {', '.join(allowed) or '-':40} {now}")
    for line in bad:
        print("layers:", line)
    if bad:
        print(f"layers: {len(bad)} include(s) against the table")
        return 1
    print(f"layers: {sum(edges.values())} includes between folders, every one allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
