#!/usr/bin/env python3
"""The table of a churn benchmark (bench/churn_fake.sh, bench/gpu/churn.sh): for each
configuration, the lines its processes printed in each round ("rounds=R ooms=O allocs=A
waits=w1,w2,...": waits in ms, those over 1 ms) in DIR/CONFIG.ROUND; prints one markdown
table: rounds done (all, and per process, sorted), out of memory errors, and the wait of an
allocation (p50 / p99 / max, ms, allocations without a wait counted as 0), medians over the
rounds with the range. Of the out of memory errors, those that ended a hold and wait (gpupool's
info line in DIR/CONFIG.ROUND.*.err: every process holding memory on the GPU was waiting, so
waiting could not help) are counted apart. Usage: churn_table.py [--check CONFIG] DIR ROUNDS CONFIG...
With --check, exits 1 (saying why) when CONFIG had an out of memory that was not a hold and
wait, or a process that never finished a round, in any round."""
import glob
import statistics
import sys


def parse(path):
    procs = []
    with open(path) as f:
        for line in f:
            fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if "rounds" not in fields:
                continue
            waits = [float(x) for x in fields.get("waits", "").split(",") if x]
            procs.append((int(fields["rounds"]), int(fields["ooms"]), int(fields["allocs"]), waits))
    return procs


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0.0


def med(xs, fmt="%g"):
    m = statistics.median(xs)
    spread = " (%s-%s)" % (fmt % min(xs), fmt % max(xs)) if len(xs) > 1 and min(xs) != max(xs) else ""
    return (fmt % m) + spread


def main():
    args = sys.argv[1:]
    check = None
    if args[:1] == ["--check"] and len(args) > 1:
        check, args = args[1], args[2:]
    if len(args) < 3:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    d, rounds, configs = args[0], int(args[1]), args[2:]
    bad = []
    print("| configuration | rounds done | per process (sorted) | out of memory (of which hold and wait) | wait p50 / p99 / max (ms) |")
    print("| --- | ---: | --- | ---: | --- |")
    for c in configs:
        done, ooms, hws, p50, p99, mx, per = [], [], [], [], [], [], []
        for r in range(1, rounds + 1):
            procs = parse("%s/%s.%d" % (d, c, r))
            done.append(sum(p[0] for p in procs))
            ooms.append(sum(p[1] for p in procs))
            hw = 0
            for e in glob.glob("%s/%s.%d.*.err" % (d, c, r)):
                with open(e, errors="replace") as f:
                    hw += sum("(hold and wait)" in line for line in f)
            hws.append(hw)
            waits = [w for p in procs for w in p[3]]
            allocs = sum(p[2] for p in procs)
            allw = waits + [0.0] * max(0, allocs - len(waits))
            p50.append(pct(allw, 0.5))
            p99.append(pct(allw, 0.99))
            mx.append(max(allw) if allw else 0.0)
            per.append(sorted((p[0] for p in procs), reverse=True))
            if c == check and (ooms[-1] > hws[-1] or not procs or min(p[0] for p in procs) == 0):
                bad.append("%s, round %d: %d out of memory (%d of them hold and wait), rounds per process %s"
                           % (c, r, ooms[-1], hws[-1], per[-1]))
                for e in sorted(glob.glob("%s/%s.%d.*.err" % (d, c, r))):  # each wait that did not end served
                    with open(e, errors="replace") as f:
                        bad += ["  %s: %s" % (e.rsplit(".", 2)[-2], line.strip()) for line in f
                                if line.startswith("gpupool: info: reclaim: ") and "; " in line.rsplit(" after ", 1)[-1]]
        mid = sorted(range(rounds), key=lambda i: done[i])[rounds // 2]
        print("| %s | %s | %s | %s (%s) | %s / %s / %s |" % (c, med(done), ", ".join(map(str, per[mid])), med(ooms),
              med(hws), med(p50, "%.0f"), med(p99, "%.0f"), med(mx, "%.0f")))
    for b in bad:
        print("churn: " + b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
