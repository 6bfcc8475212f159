#!/bin/sh
# Fences at the point of the free, in the replay: each trace at each modelled GPU lag, with
# markers (fence_marker:1) and with device syncs (fence_marker:0), one markdown table row per
# run: inline fences, the program's modelled wait and its share of the trace's span,
# reserved ÷ requested, ns per op. Usage: bench/fence_table.sh REPLAY_BIN TRACE... 
# Environment: LATENCIES (default "0 500 2000 5000", µs).
set -eu
bin=$1
shift
[ -x "$bin" ] || { echo "fence_table.sh: $bin is not executable" >&2; exit 2; }
echo "| trace | lag (µs) | fences | inline fences | wait (ms) | duration (ms) | wait ÷ duration | reserved ÷ requested | ns per op |"
echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for f in "$@"; do
	for lat in ${LATENCIES:-0 500 2000 5000}; do
		for m in 1 0; do
			out=$("$bin" --conf "fence_marker:$m" --fence-latency-us "$lat" "$f")
			printf '%s\n' "$out" | awk -F= -v name="$(basename "$f")" -v lat="$lat" -v m="$m" '
				{ v[$1] = $2 }
				END {
					share = v["duration_ms"] > 0 ? 100 * v["wait_ms"] / v["duration_ms"] : 0
					printf "| %s | %d | %s | %d | %.1f | %.0f | %.2f%% | %s | %.0f |\n", name, lat,
					       m ? "markers" : "device sync", v["inline_fences"], v["wait_ms"],
					       v["duration_ms"], share, v["reserved_over_requested"], v["ns_per_op"]
				}'
		done
	done
done
