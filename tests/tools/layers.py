#!/usr/bin/env python3
"""The house by layers, checked (docs/architecture.md, "The layers"):

1. no source file sits directly in src/: each lives in its layer's folder;
2. every #include "x.h" of a layer's files names a header of the layer itself, of a layer
   it may depend on, or the public include/ (a header found in two folders is an error);
3. every symbol a layer's library leaves
   undefined that another layer defines is defined in a layer it may depend on (the names
   the hooks interpose for other libraries, such as dlsym, are those libraries' API).

A layer may depend on the layers LAYERS lists for it and, through them, on theirs (the
closure): the table is ordered bottom to top, so no arrow points up and no circle can form.

Usage: layers.py SOURCE_ROOT BUILD_ROOT (nm from binutils for 3). Exit 0, or 1 with one line
per broken rule."""
import os
import re
import subprocess
import sys

# layer: the layers it uses directly, bottom to top (docs/architecture.md has the same table)
LAYERS = {
    "port": [],
    "base": [],
    "group": ["base"],
    "capture": ["port"],
    "stats": ["base"],
    "trace": ["port", "base"],
    "pool": ["port", "base", "stats"],
    "config": ["pool", "base"],
    "replay": ["config", "pool", "trace", "base"],
    "runtime": ["pool", "capture", "port", "base"],
    "driver": ["pool", "capture", "port", "base"],
    "budget": ["group", "config", "driver", "stats", "pool", "base"],
    "process": ["budget", "runtime", "driver", "config", "stats", "trace", "pool", "capture", "port", "base"],
    "sharing": ["process", "driver", "config", "stats", "pool", "port", "base"],
    "calls": ["sharing", "process", "budget", "runtime", "driver", "config", "group", "stats", "trace", "pool",
              "capture", "port", "base"],
    "hooks": ["calls", "driver", "port", "base"],
}


def closure(layer):
    seen, todo = set(), list(LAYERS[layer])
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(LAYERS[d])
    return seen


def main():
    if len(sys.argv) != 3:
        print("usage: layers.py SOURCE_ROOT BUILD_ROOT", file=sys.stderr)
        return 2
    src = os.path.join(sys.argv[1], "src")
    build = os.path.join(sys.argv[2], "src")
    errors = []
    order = list(LAYERS)
    for layer, deps in LAYERS.items():
        for d in deps:
            if order.index(d) >= order.index(layer):
                errors.append(f"table: {layer} uses {d}, which is not below it")

    # 1. the folders
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if os.path.isfile(path) and name != "meson.build":
            errors.append(f"src/{name}: a file directly in src/ (each belongs to a layer's folder)")
        if os.path.isdir(path) and name not in LAYERS:
            errors.append(f"src/{name}/: a folder that is not a layer of the table")

    # 2. includes
    home = {}
    for layer in LAYERS:
        for name in os.listdir(os.path.join(src, layer)):
            if name.endswith(".h"):
                if name in home:
                    errors.append(f"{name}: in src/{home[name]}/ and src/{layer}/ (one home per header)")
                home[name] = layer
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for layer in LAYERS:
        allowed = closure(layer) | {layer}
        for name in sorted(os.listdir(os.path.join(src, layer))):
            if not name.endswith((".c", ".h")):
                continue
            with open(os.path.join(src, layer, name), encoding="utf-8") as f:
                text = f.read()
            for h in inc.findall(text):
                if "/" in h or (h not in home and os.path.exists(os.path.join(sys.argv[1], "include", h))):
                    if not os.path.exists(os.path.join(sys.argv[1], "include", h)):
                        errors.append(f"src/{layer}/{name}: includes \"{h}\", not a public header")
                    continue
                owner = home.get(h)
                if owner is None:
                    errors.append(f"src/{layer}/{name}: includes \"{h}\", which no layer has")
                elif owner not in allowed:
                    errors.append(f"src/{layer}/{name}: includes {owner}'s \"{h}\": {layer} may not depend on {owner}")

    # 3. symbols
    def objects(layer):
        return [os.path.join(build, layer, f"libgp{layer}.a")]

    defined, undefined = {}, {}
    for layer in LAYERS:
        files = objects(layer)
        if not files or not all(os.path.exists(f) for f in files):
            errors.append(f"{layer}: no built objects under {build} (build first)")
            continue
        out = subprocess.run(["nm", "-P"] + files, capture_output=True, text=True, check=True).stdout
        undefined[layer] = set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2 or parts[0].endswith(":") or parts[0].endswith("]"):
                continue
            sym, kind = parts[0], parts[1]
            if kind == "U":
                undefined[layer].add(sym)
            elif kind in "TDBRVWtdbr" and kind.isupper():
                defined.setdefault(sym, set()).add(layer)
    # The names the hooks interpose (the version script's, less gpupool's own API) are other
    # libraries' (libc's dlsym, the CUDA runtime's, the driver's): a lower layer that calls
    # one calls that library's API, which the hooks answer as they answer the program.
    with open(os.path.join(src, "hooks", "libgpupool.map"), encoding="utf-8") as f:
        text = f.read()
    block = text[text.find("exports:"):text.find("(end of exports)")]
    mapped = set(re.findall(r"^\s*\*\s+([A-Za-z_][A-Za-z0-9_]*)\s*$", block, re.M))
    if "dlsym" not in mapped:
        errors.append("src/hooks/libgpupool.map: no exports list (a comment, from \"exports:\" to \"(end of exports)\")")
    interposed = {n for n in mapped if not n.startswith("gpupool_")}
    for layer, syms in undefined.items():
        allowed = closure(layer) | {layer}
        for sym in sorted(syms - interposed):
            owners = defined.get(sym, set()) - {layer}
            for owner in sorted(owners):
                if owner not in allowed and layer not in defined.get(sym, set()):
                    errors.append(f"{layer}: calls {owner}'s {sym}: {layer} may not depend on {owner}")

    for e in errors:
        print(f"layers: {e}")
    if not errors:
        print(f"layers: {len(LAYERS)} layers, includes and calls all point down")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
