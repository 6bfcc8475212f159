#!/bin/sh
# Replays every trace (*.csv, *.csv.gz) in a folder through gpupool-replay and prints one
# markdown table for BENCHMARKS.md. Usage: bench/replay_all.sh [TRACE_DIR] [REPLAY_BIN]
# Defaults: bench/traces (bench/traces/README.md), build-trace/tools/gpupool-replay.
# Extra knobs go through GPUPOOL_CONF as usual.
set -eu
case "${1:-}" in
--help | -h) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
-*) echo "replay_all.sh: unknown option $1 (usage: bench/replay_all.sh [TRACE_DIR] [REPLAY_BIN])" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/bench/traces}
bin=${2:-}
if [ -z "$bin" ]; then
	for b in "$here/build-trace/tools/gpupool-replay" "$here/build/tools/gpupool-replay"; do
		if [ -x "$b" ]; then bin=$b; break; fi
	done
fi
[ -n "$bin" ] && [ -x "$bin" ] || { echo "replay_all.sh: gpupool-replay not found; pass it as \$2" >&2; exit 2; }
[ -d "$dir" ] || { echo "replay_all.sh: no trace folder $dir" >&2; exit 2; }

echo "| trace | ops | peak requested (GiB) | peak allocated (GiB) | peak reserved (GiB) | reserved ÷ requested | reserved ÷ allocated | whole segments (taken/given back) | chunks (mapped/unmapped) | ns per op |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
found=0
for f in "$dir"/*.csv "$dir"/*.csv.gz; do
	[ -f "$f" ] || continue
	found=1
	name=$(basename "$f")
	if ! out=$("$bin" "$f" 2>/dev/null); then
		echo "| $name | replay failed: $("$bin" "$f" 2>&1 >/dev/null | head -1) | | | | | | | | |"
		continue
	fi
	printf '%s\n' "$out" | awk -F= -v name="$name" '
		{ v[$1] = $2 }
		END {
			g = 1024 * 1024 * 1024
			printf "| %s | %d | %.3f | %.3f | %.3f | %s | %s | %d/%d | %d/%d | %.0f |\n", name, v["ops"],
			       v["peak_requested_bytes"] / g, v["peak_allocated_bytes"] / g,
			       v["peak_reserved_bytes"] / g, v["reserved_over_requested"],
			       v["reserved_over_allocated"], v["backend_allocs"], v["backend_frees"],
			       v["chunks_mapped"], v["chunks_unmapped"], v["ns_per_op"]
		}'
done
[ "$found" = 1 ] || { echo "replay_all.sh: no *.csv or *.csv.gz in $dir" >&2; exit 2; }
