#!/usr/bin/env python3
"""The pool's files in their one order (docs/architecture.md, "The pool, file by file"): each
file of src/pool may include the headers of files after it in ORDER, never of one before it
or of itself by another name, so the dependencies run one way and no circle comes back; a new
file must be placed here. And only pool.c defines the public entry points (pool.h's gp_pool_*);
the other files hold the *_locked bodies they run. Usage: pool_order.py SRC_POOL_DIR."""
import pathlib
import re
import sys

# Each file uses only files after it. fence_schedule and streamkey hold no pool state and use
# no other file: they stand last.
ORDER = ["pool", "pool_walk", "pool_check", "bypass", "fence", "vmm", "segment", "freelist", "treap",
         "addrmap", "fence_schedule", "streamkey"]
# Headers without a file of their own, which any file may include.
SHARED = {"pool.h", "pool_internal.h", "block.h", "backend.h", "lock.h", "stats.h", "log.h"}


def main():
    pool = pathlib.Path(sys.argv[1])
    bad = []
    files = sorted(pool.glob("*.c")) + sorted(pool.glob("*.h"))
    for f in files:
        if f.suffix == ".c" and f.stem not in ORDER:
            bad.append(f"{f.name}: not in ORDER: place it in the pool's order")
            continue
        me = ORDER.index(f.stem) if f.stem in ORDER else None
        text = f.read_text()
        for inc in re.findall(r'^#include "([^"]+)"', text, re.M):
            if inc in SHARED or inc == f.stem + ".h":
                continue
            stem = inc[:-2] if inc.endswith(".h") else inc
            if stem not in ORDER:
                if (pool / inc).exists():
                    bad.append(f"{f.name}: includes {inc}, which has no place in ORDER")
                continue
            if me is not None and ORDER.index(stem) <= me:
                bad.append(f"{f.name}: includes {inc}, a file before it in the pool's order")
        if f.suffix == ".c" and f.stem != "pool":
            for name in re.findall(r"^\w[\w \*]*\b(gp_pool_\w+)\(", text, re.M):
                if not name.endswith("_locked"):
                    bad.append(f"{f.name}: defines {name}: the public entry points are pool.c's")
    for b in bad:
        print(b)
    print(f"{len(files)} files checked: {'ok' if not bad else 'FAILED'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
