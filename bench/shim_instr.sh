#!/usr/bin/env bash
# Instructions per allocation pair through the interposer, counted by callgrind on the fake
# runtime: gpupool-shim-bench runs N1 and N2 pairs of one kind and size under LD_PRELOAD, and
# the difference of the two totals over N2 - N1 is the cost of one pair (start-up, the warm-up
# pair and exit cancel out). Whole process: hook, shim, pool, the fake runtime when reached,
# the benchmark's loop (a few instructions), every thread (the fence thread's too).
#   bench/shim_instr.sh BUILD_DIR [N1 N2]     prints: kind size instructions_per_pair
# GPUPOOL_LIB names another libgpupool.so to preload (another build, for a before/after);
# FAKECUDA_DEVICES (the fake's device count, default 2) passes through. FAKE_DIRS (default
# BUILD_DIR/tests/fake) is the fake runtime's LD_LIBRARY_PATH: BUILD_DIR/tests/fake/ondriver:BUILD_DIR/tests/fake
# runs the runtime built on the fake driver, where the pool's memory is the driver's virtual
# memory (segments:auto). Needs valgrind and a build with tests (the fake runtime and gpupool-shim-bench).
set -euo pipefail
b=${1:?usage: bench/shim_instr.sh BUILD_DIR [N1 N2]}
n1=${2:-2000}
n2=${3:-12000}
[ -x "$b/bench/gpupool-shim-bench" ] || { echo "shim_instr: no $b/bench/gpupool-shim-bench (build with tests)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "shim_instr: valgrind not found" >&2; exit 2; }
lib=${GPUPOOL_LIB:-$b/src/libgpupool.so}
[ -f "$lib" ] || { echo "shim_instr: no $lib" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
total() { # KIND SIZE N: instructions of the whole run
	LD_LIBRARY_PATH=${FAKE_DIRS:-$b/tests/fake} FAKECUDA_CAPACITY=8G GPUPOOL_REPORT=none LD_PRELOAD=$lib \
		valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" --vgdb=no \
		"$b/bench/gpupool-shim-bench" "$1" "$2" "$3" >/dev/null 2>"$tmp/log" || { cat "$tmp/log" >&2; return 1; }
	awk '/^(summary|totals):/ {print $2; exit}' "$tmp/cg.out"
}
for kind in async sync; do
	for size in 512 65536 524288; do
		a=$(total $kind $size "$n1")
		c=$(total $kind $size "$n2")
		echo "$kind $size $(( (c - a) / (n2 - n1) ))"
	done
done
