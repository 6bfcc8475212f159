#!/bin/sh
# What interposing dlsym costs each dlsym call: gpupool-dlsym-bench run ROUNDS times (default 3)
# without and with LD_PRELOAD=libgpupool.so, interleaved, then the median of each look-up
# kind per mode and the difference, in ns per call.
# usage: bench/dlsym_bench.sh BUILD_DIR [ROUNDS] [CALLS]
set -eu
build=${1:?usage: dlsym_bench.sh BUILD_DIR [ROUNDS] [CALLS]}
rounds=${2:-3}
calls=${3:-200000}
bench=$build/bench/gpupool-dlsym-bench
lib=$build/src/libgpupool.so
[ -x "$bench" ] && [ -e "$lib" ] || { echo "dlsym_bench.sh: build $build first (ninja -C $build)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=1
while [ "$i" -le "$rounds" ]; do
	LD_LIBRARY_PATH=$build/tests/fake "$bench" "$calls" >"$out/without.$i"
	GPUPOOL_REPORT=none LD_PRELOAD=$lib LD_LIBRARY_PATH=$build/tests/fake "$bench" "$calls" >"$out/with.$i"
	i=$((i + 1))
done
printf '%-32s %12s %12s %10s\n' "look-up" "without ns" "with ns" "added ns"
for kind in $(cut -d' ' -f1 "$out/without.1"); do
	wo=$(cat "$out"/without.* | awk -v k="$kind" '$1 == k {print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	wi=$(cat "$out"/with.* | awk -v k="$kind" '$1 == k {print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	printf '%-32s %12s %12s %10.1f\n' "$kind" "$wo" "$wi" "$(echo "$wi - $wo" | bc -l)"
done
echo "($rounds rounds of $calls calls each, interleaved; the best of 5 runs within a round, the median over rounds)"
