#!/usr/bin/env bash
# Four processes churning one GPU, on the fake runtime's machine-wide device (no GPU needed):
# each takes 35% of the device in 32 MiB pieces, touches them, frees them and idles 0-1 s,
# again and again for SECONDS. Configurations, interleaved over ROUNDS:
#   native-cache    no gpupool; each keeps its pieces from round to round (a framework's caching
#                   allocator, PyTorch's default), emptying its cache and trying once more on an
#                   out of memory
#   native-nocache  no gpupool; each frees its pieces every round (empty_cache() each round)
#   gpupool         under gpupool (LD_PRELOAD), freeing every round: gpupool caches, shares and
#                   makes an allocation the GPU cannot serve wait in the GPU's line
#   gpupool-noqueue the same with reclaim:0: gpupool caches, nobody shares or waits
# Prints one markdown table: rounds done (all, and per process), out of memory errors, the
# wait of an allocation (p50 / p99 / max, ms) as the processes saw it; medians over the rounds
# with the range. Out of memory errors that ended a hold and wait (every process holding memory
# was waiting: waiting could not help) are counted apart. With CHECK=1 (the test churn-fake),
# exits 1 when under gpupool any round had any other out of memory or a process that finished
# no round. Usage: bench/churn_fake.sh BUILD_DIR
# [SECONDS] [ROUNDS]
set -euo pipefail
b=${1:?usage: bench/churn_fake.sh BUILD_DIR [SECONDS] [ROUNDS]}
secs=${2:-20}
rounds=${3:-3}
prog=$b/tests/e2e/e2e_reclaim
lib=${GPUPOOL_LIB:-$b/src/libgpupool.so}
[ -x "$prog" ] || { echo "churn_fake: no $prog (build with tests)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$b/tests/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1
mib=352 piece=32 # 35% of 1 GiB, in 11 pieces
one() { # CONFIG ROUND: four processes at once, their lines in $tmp/CONFIG.ROUND
	local cfg=$1 r=$2 pids=()
	export FAKECUDA_MACHINE=$tmp/machine.$cfg.$r
	for k in 1 2 3 4; do
		case $cfg in
		native-cache) env -u LD_PRELOAD "$prog" churn $mib $piece "$secs" 1000 cache ;;
		native-nocache) env -u LD_PRELOAD "$prog" churn $mib $piece "$secs" 1000 ;;
		gpupool) env LD_PRELOAD="$lib" GPUPOOL_SHM_DIR="$tmp" GPUPOOL_REPORT=none GPUPOOL_LOG=info \
			"$prog" churn $mib $piece "$secs" 1000 ;;
		gpupool-noqueue) env LD_PRELOAD="$lib" GPUPOOL_SHM_DIR="$tmp" GPUPOOL_REPORT=none GPUPOOL_CONF=reclaim:0 \
			"$prog" churn $mib $piece "$secs" 1000 ;;
		esac >"$tmp/$cfg.$r.$k" 2>"$tmp/$cfg.$r.$k.err" &
		pids+=($!)
	done
	wait "${pids[@]}"
	cat "$tmp/$cfg.$r".[1-4] >"$tmp/$cfg.$r"
}
configs="native-cache native-nocache gpupool gpupool-noqueue"
for r in $(seq "$rounds"); do
	for c in $configs; do
		one "$c" "$r"
		echo "churn_fake: round $r $c: $(tr '\n' ' ' <"$tmp/$c.$r" | sed 's/waits=[0-9,]*//g')" >&2
	done
done
python3 "$(dirname "$0")/churn_table.py" ${CHECK:+--check gpupool} "$tmp" "$rounds" $configs
