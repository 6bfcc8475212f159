#!/usr/bin/env python3
"""The table of bench/gpu/steps.sh: per model and configuration, the median over rounds of
each run's median step time, with the range (min-max of the runs' medians), the peak reserved
memory, and the ratio to PyTorch default's median step time.

    python3 bench/gpu/steps_table.py OUTDIR [OUTDIR...]

Reads OUTDIR/r<round>-<model>-<config>.log (train.py's line: step_ms, peak_reserved) and, for
the gpupool configurations, OUTDIR/r<round>-<model>-<config>.json (the exit report:
reserved_bytes_peak of every device, summed), whose figure is used where present. Rounds from
several OUTDIRs are pooled. A run without a result line counts as failed. Prints markdown.
"""
import glob
import json
import os
import re
import statistics
import sys

ORDER = ["default", "expandable", "nocache-gp", "nocache-gpl", "nocache-gpw", "nocache-gpv", "empty_cache-gp",
         "empty_cache-gpl", "nocache", "empty_cache", "async-gp", "pluggable", "pluggable-whole", "default-gp",
         "expandable-gp"]
MODELS = ["resnet50", "gpt2", "bert", "llama"]
NAME = re.compile(r"^r(\d+)-(resnet50|gpt2|bert|llama)-([a-z_-]+)\.log$")


def report_peak(path):
    """Sum of reserved_bytes_peak over the report's devices, or None."""
    try:
        with open(path) as f:
            doc = json.load(f)
        procs = doc.get("processes") or []
        return sum(int(d["reserved_bytes_peak"]) for d in procs[0]["devices"]) if procs else None
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def read(dirs):
    """{(model, config): {"ms": [..], "peak": [..], "failed": n}}"""
    runs = {}
    for d in dirs:
        if not os.path.isdir(d):
            sys.exit("steps_table: %s: not a directory" % d)
        for path in sorted(glob.glob(os.path.join(d, "r*-*.log"))):
            m = NAME.match(os.path.basename(path))
            if not m or m.group(3) not in ORDER:
                continue
            r = runs.setdefault((m.group(2), m.group(3)), {"ms": [], "peak": [], "alloc": [], "failed": 0})
            with open(path, errors="replace") as f:
                line = next((ln for ln in f if ln.startswith("model=")), None)
            if line is None:
                r["failed"] += 1
                continue
            kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
            r["ms"].append(float(kv["step_ms"]))
            gp = m.group(3).endswith(("-gp", "-gpl", "-gpw", "-gpv")) or m.group(3).startswith("pluggable")
            peak = report_peak(path[:-4] + ".json") if gp else None
            if peak is None:
                peak = int(kv.get("peak_reserved", "0"))
            if peak:
                r["peak"].append(peak)
            if int(kv.get("peak_allocated", "0")):
                r["alloc"].append(int(kv["peak_allocated"]))
    return runs


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 else 2)
    runs = read(sys.argv[1:])
    if not runs:
        sys.exit("steps_table: no r<round>-<model>-<config>.log in %s" % " ".join(sys.argv[1:]))
    print("| model | configuration | runs | step ms, median (min-max) | peak reserved GiB | peak allocated GiB | ÷ default |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for model in MODELS:
        base = runs.get((model, "default"), {}).get("ms")
        base_med = statistics.median(base) if base else None
        for cfg in ORDER:
            r = runs.get((model, cfg))
            if not r:
                continue
            fail = " (%d failed)" % r["failed"] if r["failed"] else ""
            if not r["ms"]:
                print("| %s | %s | 0%s | failed | | | |" % (model, cfg, fail))
                continue
            med = statistics.median(r["ms"])
            peak = "%.2f" % (statistics.median(r["peak"]) / 2**30) if r["peak"] else "n/a"
            alloc = "%.2f" % (statistics.median(r["alloc"]) / 2**30) if r["alloc"] else "n/a"
            ratio = "%.2f" % (med / base_med) if base_med else "n/a"
            print("| %s | %s | %d%s | %.1f (%.1f-%.1f) | %s | %s | %s |" % (
                model, cfg, len(r["ms"]), fail, med, min(r["ms"]), max(r["ms"]), peak, alloc, ratio))


if __name__ == "__main__":
    main()
