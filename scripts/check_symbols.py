#!/usr/bin/env python3
"""The layer rule on the linked code, not only on the includes: reads the
symbols of every object file of the library (`nm` on BUILD/CMakeFiles/
agrl_obj.dir/src/FOLDER/*.o), gives each object the layer of its folder and
each global symbol the layer whose object defines it, and fails on any
reference from one layer to a symbol of a layer that is not below it in
scripts/check_layers.py's table (a call up the layer order, or across to a
sibling); the registry (src/core/registry.c) alone may name the backends'
entry points.
A declaration that skips the headers (an `extern` written in a .c file) gets
past the include check; it does not get past this one. Symbols that no
object of the library defines (libc, CUDA, Vulkan, OpenBLAS) are outside
the layers and not checked.

usage: scripts/check_symbols.py [--build DIR] [--table]
       scripts/check_symbols.py --listing FILE [--table]
  --build DIR     the release build to read (default build/)
  --listing FILE  read an `nm -A` listing from FILE instead of running nm
                  (each line `PATH: VALUE TYPE NAME` or `PATH: U NAME`; the
                  layer is the folder after src/ in PATH); to check that the
                  checker fails, feed it a listing with an upward reference
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import ALLOWED, REGISTRY, below  # noqa: E402  (the one table of the layers)

# generated sources that belong to a layer without living in its folder
GENERATED = {"vk_shaders.c.o": "vulkan"}


def layer_of(path):
    """The layer an object path belongs to, or None (not library code)."""
    parts = path.replace("\\", "/").split("/")
    if "src" in parts:
        i = len(parts) - 1 - parts[::-1].index("src")
        if i + 1 < len(parts) - 1:
            return parts[i + 1]
    return GENERATED.get(parts[-1])


def parse(lines):
    """(defined, undefined): defined[name] = {layers}; undefined = [(layer, obj, name)]."""
    defined, undefined = {}, []
    for line in lines:
        if ":" not in line:
            continue
        path, rest = line.split(":", 1)
        fields = rest.split()
        if len(fields) == 2:  # an undefined symbol has no value
            kind, name = fields
        elif len(fields) == 3:
            _, kind, name = fields
        else:
            continue
        layer = layer_of(path)
        if layer is None:
            continue
        if kind == "U":
            undefined.append((layer, path, name))
        elif kind.isupper() or kind in "uvw":  # global (or weak) definitions
            defined.setdefault(name, set()).add(layer)
    return defined, undefined


def objects(build):
    root = os.path.join(build, "CMakeFiles", "agrl_obj.dir")
    found = []
    for dirpath, _, files in os.walk(root):
        found += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".o")]
    return sorted(found)


def main(argv):
    build, listing, table = "build", None, False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--build" and args:
            build = args.pop(0)
        elif a == "--listing" and args:
            listing = args.pop(0)
        elif a == "--table":
            table = True
        else:
            print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
            return 2
    if listing is not None:
        with open(listing, encoding="utf-8") as f:
            lines = f.read().splitlines()
        source = listing
    else:
        objs = objects(build)
        if not objs:
            print(f"symbols: no object files under {build}/CMakeFiles/agrl_obj.dir "
                  "(build the library first)", file=sys.stderr)
            return 2
        out = subprocess.run(["nm", "-A", *objs], check=True, capture_output=True, text=True)
        lines = out.stdout.splitlines()
        source = f"{len(objs)} object files of {build}/"

    defined, undefined = parse(lines)
    layers = {layer for names in defined.values() for layer in names}
    unknown = sorted((layers | {layer for layer, _, _ in undefined}) - set(ALLOWED))
    for layer in unknown:
        print(f"symbols: layer {layer}/ is not in check_layers.py's table")
    counts, bad = {}, []
    order = {layer: below(layer) for layer in ALLOWED}
    registry = "src/" + REGISTRY[0] + ".o"
    for layer, path, name in undefined:
        owners = defined.get(name)
        if not owners or layer in owners:
            continue  # outside the library, or defined in the layer itself
        for owner in sorted(owners):
            counts[(layer, owner)] = counts.get((layer, owner), 0) + 1
            if owner in order.get(layer, ()):
                continue
            if path.replace("\\", "/").endswith(registry) and owner in REGISTRY[1]:
                continue  # the registry's look-up of a backend's entry points
            bad.append(f"{path}: {layer}/ uses {name}, defined in {owner}/ (below {layer}/: "
                       f"{', '.join(sorted(order.get(layer, ()))) or 'nothing'})")
    if table:
        print("layer    references to symbols of the layers below (count)")
        for layer in ALLOWED:
            now = ", ".join(f"{o} {n}" for (f, o), n in sorted(counts.items()) if f == layer)
            if now or any(f == layer for f, _, _ in undefined):
                print(f"{layer:8} {now or '-'}")
    for line in bad:
        print("symbols:", line)
    if bad or unknown:
        print(f"symbols: {len(bad)} upward reference(s) in {source}")
        return 1
    print(f"symbols: {sum(counts.values())} references between layers in {source}, "
          "0 upward references")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
