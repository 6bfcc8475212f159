#!/usr/bin/env bash
# What a full line costs the process that holds the memory, on the fake runtime: H holds 768
# MiB of a 1 GiB fake device; 8 processes, each with 32 waits on the device (256: a full line,
# docs/sharing.md), tell their waits once a second as a waiter does and answer H's status
# queries (tests/e2e/e2e_wait_hostile.py fill 1). Prints H's CPU time (user + system) over
# SECONDS, per build given, the builds interleaved, ROUNDS rounds.
#   bench/line_cpu.sh [ROUNDS] [SECONDS] BUILD_DIR...   (each a build with tests)
set -euo pipefail
rounds=${1:?usage: bench/line_cpu.sh ROUNDS SECONDS BUILD_DIR...}
secs=${2:?usage: bench/line_cpu.sh ROUNDS SECONDS BUILD_DIR...}
shift 2
fill=$(cd "$(dirname "$0")/.." && pwd)/tests/e2e/e2e_wait_hostile.py
tck=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "round build h_cpu_ms_per_s"
for r in $(seq "$rounds"); do
	for b in "$@"; do
		b=$(cd "$b" && pwd)
		tmp=$(mktemp -d)
		export LD_LIBRARY_PATH=$b/tests/fake FAKECUDA_MACHINE=$tmp/machine FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1
		LD_PRELOAD=$b/src/libgpupool.so GPUPOOL_SHM_DIR=$tmp GPUPOOL_REPORT=none "$b/tests/e2e/e2e_reclaim" hold 768 \
			>"$tmp/h.out" 2>/dev/null &
		h=$!
		for _ in $(seq 200); do grep -q ready "$tmp/h.out" && break; sleep 0.05; done
		GPUPOOL_SHM_DIR=$tmp python3 - fill 1 "$h" <"$fill" >"$tmp/f.out" 2>&1 &
		f=$!
		for _ in $(seq 100); do grep -q ready "$tmp/f.out" && break; sleep 0.1; done
		t0=$(ticks "$h")
		sleep "$secs"
		t1=$(ticks "$h")
		kill "$f"
		kill -INT "$h"
		wait "$f" "$h" 2>/dev/null || true
		rm -rf "$tmp"
		echo "$r $b $(( (t1 - t0) * 1000 / tck / secs ))"
	done
done
