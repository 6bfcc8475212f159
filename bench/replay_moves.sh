#!/bin/sh
# Peak reserved ÷ peak requested of every bundled trace under virtual-memory segments, at
# several modelled chunk costs, for one or two gpupool-replay binaries side by side (before
# and after a change of the pool's moving rule): one markdown table for BENCHMARKS.md.
# Usage: bench/replay_moves.sh BIN [BIN2]
# Costs (--vmm-cost-us): 0 (moving is free), 20 (the replay's default), 38,29 (an H100's
# measured map and unmap: BENCHMARKS.md section 28). Configurations: segments:auto (the
# default) and segments:vmm. Traces: bench/traces/*.csv.gz. LABELS names the two columns'
# binaries (default: BIN and BIN2 as given), e.g. LABELS="before after".
set -eu
case "${1:-}" in
-h | --help) sed -n '2,/^set -eu/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
"") echo "usage: bench/replay_moves.sh BIN [BIN2]" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -le 2 ] || { echo "usage: bench/replay_moves.sh BIN [BIN2]" >&2; exit 2; }
b1=$1 b2=${2:-}
for b in "$b1" ${b2:+"$b2"}; do [ -x "$b" ] || { echo "replay_moves.sh: $b is not an executable" >&2; exit 2; }; done
labels=${LABELS:-}
l1=${labels%% *} l2=${labels#* }
[ -n "$labels" ] || { l1=$b1 l2=$b2; }
# one column pair per binary
cols() {
	"$1" --conf "segments:$2" --vmm-cost-us "$3" "$4" >"$tmp" || { echo "replay_moves.sh: $1 failed on $4 at $3" >&2; exit 1; }
	printf ' %s | %s/%s |' "$(sed -n 's/^reserved_over_requested=//p' "$tmp")" \
		"$(sed -n 's/^chunks_mapped=//p' "$tmp")" "$(sed -n 's/^chunks_unmapped=//p' "$tmp")"
}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
head="| trace | segments | cost (us) | $l1: reserved ÷ requested | chunks mapped/unmapped |"
rule="| --- | --- | ---: | ---: | ---: |"
if [ -n "$b2" ]; then
	head="$head $l2: reserved ÷ requested | chunks mapped/unmapped |"
	rule="$rule ---: | ---: |"
fi
echo "$head"
echo "$rule"
for t in "$here"/bench/traces/*.csv.gz; do
	for seg in auto vmm; do
		for c in 0 20 38,29; do
			line="| $(basename "$t" .csv.gz) | $seg | $c |$(cols "$b1" "$seg" "$c" "$t")"
			[ -z "$b2" ] || line="$line$(cols "$b2" "$seg" "$c" "$t")"
			echo "$line"
		done
	done
done
