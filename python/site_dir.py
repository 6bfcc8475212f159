#!/usr/bin/env python3
"""site_dir.py PREFIX DEFAULT: where `meson install` puts gpupool.py for the interpreter that
runs this script (python/meson.build runs it with the one Meson chose). Prints two lines: the
directory, then `searched` when that interpreter imports from it, else `not-searched`.

The directory is DEFAULT (Meson's answer) when the interpreter searches it; else the first of
the interpreter's site directories (site.getsitepackages(), then the user's) that lies under
PREFIX; else DEFAULT. Debian's python3 shows why: Meson's answer for --prefix=/usr/local is
/usr/local/lib/python3/dist-packages, which it never searches; it searches
/usr/local/lib/python3.X/dist-packages. PYTHONPATH is not looked at: it is the caller's, not
the interpreter's."""
import os
import site
import sys


def main():
    if len(sys.argv) != 3:
        print("usage: site_dir.py PREFIX DEFAULT", file=sys.stderr)
        return 2
    prefix, default = (os.path.normpath(p) for p in sys.argv[1:])
    searched = [os.path.normpath(p) for p in site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        searched.append(os.path.normpath(site.getusersitepackages()))
    if default in searched:
        print(default + "\nsearched")
        return 0
    for d in searched:
        if d.startswith(prefix.rstrip(os.sep) + os.sep):
            print(d + "\nsearched")
            return 0
    print(default + "\nnot-searched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
