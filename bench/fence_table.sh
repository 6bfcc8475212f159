#!/bin/sh
# Fences at the point of the free, in the replay: each trace at each modelled GPU lag, with
# markers (fence_marker:1), with device syncs (fence_marker:0) and stream-ordered on the
# legacy stream (legacy_stream:1), one markdown table row per run: inline fences, the
# program's modelled wait for fences and in segment frees (cudaFree synchronizes) and their
# share of the trace's span, reserved ÷ requested, ns per op.
# Usage: bench/fence_table.sh REPLAY_BIN TRACE...
# Environment: LATENCIES (default "0 500 2000 5000", µs).
set -eu
bin=$1
shift
[ -x "$bin" ] || { echo "fence_table.sh: $bin is not executable" >&2; exit 2; }
echo "| trace | lag (µs) | fences | inline fences | fence wait (ms) | segment-free wait (ms) | duration (ms) | fence wait ÷ duration | all waits ÷ duration | reserved ÷ requested | ns per op |"
echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for f in "$@"; do
	for lat in ${LATENCIES:-0 500 2000 5000}; do
		for m in markers sync legacy; do
			case $m in markers) conf=fence_marker:1 ;; sync) conf=fence_marker:0 ;; legacy) conf=legacy_stream:1 ;; esac
			out=$("$bin" --conf "$conf" --fence-latency-us "$lat" "$f")
			printf '%s\n' "$out" | awk -F= -v name="$(basename "$f")" -v lat="$lat" -v m="$m" '
				{ v[$1] = $2 }
				END {
					d = v["duration_ms"] > 0 ? v["duration_ms"] : 1
					share = 100 * v["wait_ms"] / d
					all = 100 * (v["wait_ms"] + v["segment_free_wait_ms"]) / d
					kind = m == "markers" ? "markers" : m == "sync" ? "device sync" : "legacy_stream"
					printf "| %s | %d | %s | %d | %.1f | %.1f | %.0f | %.2f%% | %.2f%% | %s | %.0f |\n", name, lat,
					       kind, v["inline_fences"], v["wait_ms"], v["segment_free_wait_ms"],
					       v["duration_ms"], share, all, v["reserved_over_requested"], v["ns_per_op"]
				}'
		done
	done
done
