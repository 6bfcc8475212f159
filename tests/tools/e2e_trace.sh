#!/usr/bin/env bash
# The trace through the shim: (1) a real trace driven through libgpupool.so on the fake runtime
# agrees with gpupool-replay of the same trace (same peak requested, peak reserved within 5%);
# (2) recording that run (trace:FILE) and replaying the recording gives the same call counts.
#   e2e_trace.sh DRIVER REPLAY LIBGPUPOOL FAKE_DIR TRACE
set -euo pipefail
driver=$1 replay=$2 lib=$3 fake=$4 trace=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$fake FAKECUDA_CAPACITY=16G FAKECUDA_DEVICES=1 GPUPOOL_SHM_DIR=$tmp
rows=6000
GPUPOOL_REPORT=$tmp/report.json GPUPOOL_CONF=trace:$tmp/rec.csv.gz LD_PRELOAD=$lib \
	"$driver" --limit-rows $rows "$trace" >"$tmp/driver.out"
grep -q '^errors=0$' "$tmp/driver.out" || { echo "FAIL: the driver saw errors"; cat "$tmp/driver.out"; exit 1; }
"$replay" --limit-rows $rows "$trace" >"$tmp/replay.out"
"$replay" "$tmp/rec.csv.gz" >"$tmp/rec.out"
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
def kv(path):
    d = {}
    for line in open(path):
        if "=" in line:
            k, v = line.strip().split("=", 1)
            d[k] = v
    return d
dev = json.load(open(f"{tmp}/report.json"))["processes"][0]["devices"][0]
rep, rec = kv(f"{tmp}/replay.out"), kv(f"{tmp}/rec.out")
fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)
check(int(rep["peak_requested_bytes"]) == dev["requested_bytes_peak"],
      f"peak requested: shim {dev['requested_bytes_peak']} == replay {rep['peak_requested_bytes']}")
ratio = dev["reserved_bytes_peak"] / int(rep["peak_reserved_bytes"])
check(0.95 <= ratio <= 1.05,
      f"peak reserved: shim {dev['reserved_bytes_peak']} vs replay {rep['peak_reserved_bytes']} (ratio {ratio:.3f})")
check(int(rec["allocs"]) == dev["allocs"], f"recorded allocs {rec['allocs']} == pool allocs {dev['allocs']}")
check(int(rec["frees"]) == dev["frees"], f"recorded frees {rec['frees']} == pool frees {dev['frees']}")
check(int(rec["peak_requested_bytes"]) == dev["requested_bytes_peak"],
      f"recorded peak requested {rec['peak_requested_bytes']} == {dev['requested_bytes_peak']}")
sys.exit(1 if fails else 0)
PY
