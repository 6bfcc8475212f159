#!/usr/bin/env bash
# Four PyTorch processes churning one GPU (docs/sharing.md, "Waiting for memory"): each takes
# FRACTION (0.35) of the card in 1 GiB tensors, checks them, frees them into PyTorch's cache and
# idles 0-1 s, for SECONDS_EACH (30). Configurations, interleaved over ROUNDS (3):
#   native   PyTorch's default allocator, no gpupool
#   gpupool  the same program under gpupool (LD_PRELOAD=libgpupool.so)
# Lines in OUTDIR/CONFIG.ROUND, the table (bench/churn_table.py) in OUTDIR/table.md and on
# stdout; any tensor read back wrong is counted (wrong=) and reported. Exit status 1 when a
# tensor was read back wrong, or under gpupool an out of memory was not a hold and wait.
#   bench/gpu/churn.sh OUTDIR
# Environment: GPUPOOL_LIB (else scripts/build-gpu-lib builds one), ROUNDS, SECONDS_EACH, FRACTION,
# PY (python3).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/gpu/churn.sh OUTDIR}
rounds=${ROUNDS:-3}
secs=${SECONDS_EACH:-30}
fraction=${FRACTION:-0.35}
py=${PY:-python3}
lib=${GPUPOOL_LIB:-$(scripts/build-gpu-lib)}
mkdir -p "$out"
one() { # CONFIG ROUND
	local cfg=$1 r=$2 pids=()
	for k in 1 2 3 4; do
		if [ "$cfg" = gpupool ]; then
			env LD_PRELOAD="$lib" GPUPOOL_REPORT=none GPUPOOL_LOG=info "$py" bench/gpu/churn.py "$fraction" 1 "$secs" 1000
		else
			"$py" bench/gpu/churn.py "$fraction" 1 "$secs" 1000
		fi >"$out/$cfg.$r.$k" 2>"$out/$cfg.$r.$k.err" &
		pids+=($!)
	done
	wait "${pids[@]}"
	cat "$out/$cfg.$r".[1-4] >"$out/$cfg.$r"
	echo "churn: round $r $cfg: $(sed 's/waits=[0-9,]*//' "$out/$cfg.$r" | tr '\n' ' ')" >&2
}
for r in $(seq "$rounds"); do
	for c in native gpupool; do
		one "$c" "$r"
	done
done
"$py" bench/churn_table.py --check gpupool "$out" "$rounds" native gpupool | tee "$out/table.md"
check=${PIPESTATUS[0]}
bad=$(cat "$out"/native.* "$out"/gpupool.* 2>/dev/null | sed -n 's/.*wrong=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
echo "tensors read back wrong: $bad"
[ "$bad" = 0 ] && [ "$check" = 0 ]
