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
bins="$1 ${2:-}"
for b in $bins; do [ -x "$b" ] || { echo "replay_moves.sh: $b is not an executable" >&2; exit 2; }; done
head="| trace | segments | cost (us) |"
rule="| --- | --- | ---: |"
set -- ${LABELS:-$bins}
for b in $bins; do head="$head ${1:-$b}: reserved ÷ requested | chunks mapped/unmapped |"; rule="$rule ---: | ---: |"; [ $# -gt 0 ] && shift; done
echo "$head"
echo "$rule"
for t in "$here"/bench/traces/*.csv.gz; do
	for seg in auto vmm; do
		for c in 0 20 38,29; do
			line="| $(basename "$t" .csv.gz) | $seg | $c |"
			for b in $bins; do
				out=$("$b" --conf "segments:$seg" --vmm-cost-us "$c" "$t")
				r=$(echo "$out" | sed -n 's/^reserved_over_requested=//p')
				m=$(echo "$out" | sed -n 's/^chunks_mapped=//p')
				u=$(echo "$out" | sed -n 's/^chunks_unmapped=//p')
				line="$line $r | $m/$u |"
			done
			echo "$line"
		done
	done
done
