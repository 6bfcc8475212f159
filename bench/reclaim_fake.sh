#!/usr/bin/env bash
# The reclaim's own cost, on the fake runtime's machine-wide device (no GPU: the fake frees
# host memory, so this is the exchange between processes, not the driver's time to free).
# A holds 960 MiB idle of a 1 GiB device; B asks 128, 320 and 896 MiB, so that the device
# lacks 64, 256 and 832 MiB; ROUNDS rounds (5), a fresh A for each ask. Prints one line per
# run: shortfall, B's allocation time (ms), B's reclaim_wait_ns (ms), what A gave (MiB).
#   bench/reclaim_fake.sh BUILD_DIR [ROUNDS]
set -euo pipefail
b=${1:?usage: bench/reclaim_fake.sh BUILD_DIR [ROUNDS]}
rounds=${2:-5}
prog=$b/tests/e2e/e2e_reclaim
[ -x "$prog" ] || { echo "reclaim_fake: no $prog (a build with tests)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$b/tests/fake FAKECUDA_MACHINE=$tmp/machine FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1
export GPUPOOL_SHM_DIR=$tmp
lib=$b/src/libgpupool.so
echo "short_mib b_alloc_ms b_wait_ms a_gave_mib"
for r in $(seq "$rounds"); do
	for short in 64 256 832; do
		LD_PRELOAD=$lib GPUPOOL_REPORT=$tmp/a.json "$prog" hold 960 30 >"$tmp/a.out" 2>/dev/null &
		a=$!
		for _ in $(seq 200); do grep -q ready "$tmp/a.out" && break; sleep 0.02; done
		out=$(LD_PRELOAD=$lib GPUPOOL_REPORT=$tmp/b.json "$prog" ask $((64 + short)) 2>/dev/null)
		kill -INT $a
		wait $a || true
		python3 - "$short" "$out" "$tmp/a.json" "$tmp/b.json" <<'PY'
import json, sys
short, out, a, b = sys.argv[1:]
ad = json.load(open(a))["processes"][0]["devices"][0]
bd = json.load(open(b))["processes"][0]["devices"][0]
secs = float(out.split("seconds=")[1]) if out.startswith("ok") else float("nan")
print(short, "%.3f" % (secs * 1e3), "%.3f" % (bd["reclaim_wait_ns"] / 1e6), ad["reclaim_given_bytes"] >> 20)
PY
	done
done
