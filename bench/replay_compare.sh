#!/bin/sh
# Compares two gpupool-replay builds on the same traces: each trace at each modelled GPU lag,
# with markers (fence_marker:1), device syncs (fence_marker:0) and legacy_stream:1, as
# bench/fence_table.sh runs them, and prints one markdown table row per figure that differs
# (trace, lag, mode, figure, before, after). ns_per_op is left out: a time, never the same
# twice. Exit status 0 when nothing else differs, 1 when something does, 2 on a usage error.
# Usage: bench/replay_compare.sh OLD_BIN NEW_BIN [TRACE...] (default: bench/traces/*.csv.gz)
# Environment: LATENCIES (default "0 500 2000 5000", µs); IGNORE (more figures to leave out,
# space-separated, e.g. "wait_ms markers").
set -eu
case "${1:-}" in
--help | -h) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
-*) echo "replay_compare.sh: unknown option $1 (usage: bench/replay_compare.sh OLD_BIN NEW_BIN [TRACE...])" >&2; exit 2 ;;
esac
[ $# -ge 2 ] || { echo "usage: bench/replay_compare.sh OLD_BIN NEW_BIN [TRACE...]" >&2; exit 2; }
old=$1
new=$2
shift 2
for b in "$old" "$new"; do
	[ -x "$b" ] || { echo "replay_compare.sh: $b is not executable" >&2; exit 2; }
done
if [ $# -eq 0 ]; then
	set -- "$(cd "$(dirname "$0")" && pwd)"/traces/*.csv.gz
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| trace | lag (µs) | mode | figure | before | after |"
echo "| --- | ---: | --- | --- | ---: | ---: |"
differ=0
for f in "$@"; do
	for lat in ${LATENCIES:-0 500 2000 5000}; do
		for conf in fence_marker:1 fence_marker:0 legacy_stream:1; do
			"$old" --conf "$conf" --fence-latency-us "$lat" "$f" >"$tmp/old" 2>/dev/null
			"$new" --conf "$conf" --fence-latency-us "$lat" "$f" >"$tmp/new" 2>/dev/null
			if ! awk -F= -v name="$(basename "$f")" -v lat="$lat" -v conf="$conf" -v ignore="ns_per_op ${IGNORE:-}" '
				BEGIN { n = split(ignore, skip, " "); for (i = 1; i <= n; i++) left[skip[i]] = 1 }
				NR == FNR { a[$1] = $2; order[++keys] = $1; next }
				{ b[$1] = $2; if (!($1 in a)) order[++keys] = $1 }
				END {
					bad = 0
					for (i = 1; i <= keys; i++) {
						k = order[i]
						if ((k in left) || a[k] == b[k]) continue
						printf "| %s | %d | %s | %s | %s | %s |\n", name, lat, conf, k, a[k], b[k]
						bad = 1
					}
					exit bad
				}' "$tmp/old" "$tmp/new"; then
				differ=1
			fi
		done
	done
done
exit $differ
