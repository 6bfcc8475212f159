"""The verdicts and the table of bench/gpu/sharing.sh's suite part (scripts/gpu-suite sharing).

  python3 share_table.py OUTDIR
Prints one line per check, "PASS|FAIL|SKIP share/NAME (detail)", then a Markdown table. A
two-process check passes when B got its memory; the training check when B got its memory
and A's loss sum with B's ask is the one A alone had, to the last digit. Exit status: 0,
1 when a check failed or a log is missing, 2 bad usage."""
import json
import os
import re
import sys

MODES = [("default", "PyTorch, default allocator"), ("empty", "PyTorch, empty_cache()"),
         ("expandable", "PyTorch, expandable_segments:True"), ("torchmode", "gpupool-run --torch"),
         ("cpp", "C++, cudaFree"), ("cupy", "CuPy, default pool")]


def kv(path):
    """The key=value pairs of a log's lines, the last of each key winning; {} when absent."""
    d = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                for k, v in re.findall(r"(\w+)=(\S+)", line):
                    d[k] = v
    except OSError:
        pass
    return d


def report(path):
    """Device 0 of the first process of an exit report (JSON), {} when absent."""
    try:
        with open(path) as f:
            return json.load(f)["processes"][0]["devices"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return {}


def gib(b):
    return "%.1f GiB" % (int(b) / (1 << 30)) if b not in (None, "") else "-"


def main():
    if len(sys.argv) != 2:
        print("usage: share_table.py OUTDIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    if not os.path.isdir(out):
        print("share_table.py: no directory %s" % out, file=sys.stderr)
        return 1
    size = kv(os.path.join(out, "suite.txt")).get("gib", "?")
    rows, failed = [], False
    for m, what in MODES:
        d = os.path.join(out, "suite-" + m)
        a, b = kv(os.path.join(d, "a.log")), kv(os.path.join(d, "b.log"))
        ar, br = report(os.path.join(d, "a.json")), report(os.path.join(d, "b.json"))
        if a.get("skip"):
            print("SKIP share/%s (%s)" % (m, a.get("reason", "skipped")))
            rows.append((what, "skipped", "", "", ""))
            continue
        if "ok" not in b:
            print("FAIL share/%s (B did not run: A %s; see %s)" % (m, "never ready" if "ready" not in a else "ready", d))
            failed = True
            rows.append((what, "not run", "", "", ""))
            continue
        ok = b.get("ok") == "1"
        gave = ar.get("reclaim_given_bytes")
        detail = "B %s %s GiB in %s s; A gave %s, framework caches emptied %s; B asked %s" % (
            "got" if ok else "did not get", size, b.get("seconds", "?"), gib(gave), ar.get("framework_empties", "-"),
            br.get("reclaim_asks", "-"))
        print("%s share/%s (%s)" % ("PASS" if ok else "FAIL", m, detail))
        failed |= not ok
        rows.append((what, ("%s s" % b.get("seconds")) if ok else "out of memory", gib(gave),
                     str(ar.get("framework_empties", "-")), str(br.get("reclaim_asks", "-"))))
    alone = kv(os.path.join(out, "suite-train-alone", "a.log"))
    asked = kv(os.path.join(out, "suite-train-asked", "a.log"))
    tb = kv(os.path.join(out, "suite-train-asked", "b.log"))
    tr = report(os.path.join(out, "suite-train-asked", "a.json"))
    same = "loss_sum" in alone and alone.get("loss_sum") == asked.get("loss_sum")
    ok = same and tb.get("ok") == "1"
    print("%s share/train (A's loss sum %s alone, %s asked mid-run; B %s in %s s; A gave %s)" % (
        "PASS" if ok else "FAIL", alone.get("loss_sum", "missing"), asked.get("loss_sum", "missing"),
        "got its memory" if tb.get("ok") == "1" else "failed", tb.get("seconds", "?"),
        gib(tr.get("reclaim_given_bytes"))))
    failed |= not ok
    rows.append(("PyTorch training, asked at step 100", ("%s s" % tb.get("seconds")) if tb.get("ok") == "1" else "failed",
                 gib(tr.get("reclaim_given_bytes")), str(tr.get("framework_empties", "-")),
                 "loss sum " + ("identical" if same else "DIFFERS")))
    print()
    print("A takes %s GiB (1 GiB pieces), frees and idles; B asks %s GiB as one tensor; both under gpupool" % (size, size))
    print()
    print("| A | B's allocation | A gave | A's framework empties | B's asks / check |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print("| %s |" % " | ".join(r))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
