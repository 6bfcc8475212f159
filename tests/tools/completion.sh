#!/bin/bash
# completions/gpupool.bash in a plain bash (no bash-completion package): each of the five
# commands has a completion and the file completes no other, --wa completes to --watch, every
# knob of the table completes after --conf, every option a command's --help lists completes
# (so a new option cannot be left out), gpupool-plot's arguments complete to timelines (.csv)
# and to the figures it can write (.png, .svg, .pdf). $1: the source tree, $2 gpupool-stat,
# $3 gpupool-replay.
set -u
src=$1 stat=$2 replay=$3
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
. "$src/completions/gpupool.bash" || { echo "FAIL: sourcing completions/gpupool.bash"; exit 1; }

# comp WORD...: the completion of the last word, in COMPREPLY
comp() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMP_LINE="$*"
	COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	local spec fn
	spec=$(complete -p "$1") || { fail "no completion for $1"; return; }
	fn=$(sed 's/.*-F \([^ ]*\) .*/\1/' <<<"$spec")
	"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
}
expect() { # WANT WORD...
	local want=$1
	shift
	comp "$@"
	[ "${COMPREPLY[*]-}" = "$want" ] || fail "completing '$*': got '${COMPREPLY[*]-}', expected '$want'"
}

cmds="gpupool-stat gpupool-replay gpupool-run gpupool-maxbatch gpupool-plot"
for t in $cmds; do
	complete -p "$t" >/dev/null 2>&1 || fail "complete -p $t"
done
got=$(complete -p | sed -n 's/.* \(gpupool-[a-z]*\)$/\1/p' | sort | tr '\n' ' ')
[ "$got" = "$(tr ' ' '\n' <<<"$cmds" | sort | tr '\n' ' ')" ] || fail "the file completes '$got', not '$cmds'"
# the header and completions/meson.build name the same commands
for f in "$src/completions/gpupool.bash" "$src/completions/meson.build"; do
	for t in $cmds; do
		grep -q -- "$t" "$f" || fail "$f does not name $t"
	done
done
complete -p gpupool-stat | grep -q -- '-F _gpupool_stat gpupool-stat$' || fail "complete -p gpupool-stat: $(complete -p gpupool-stat)"
expect --watch gpupool-stat --wa
expect "--openmetrics" gpupool-stat --op
expect "--fence-latency-us" gpupool-replay --fe
expect "--torch-snapshot" gpupool-replay --to
expect "--timeline --timeline-rows" gpupool-replay --ti
expect "--plot" gpupool-replay --pl
expect "limit:" gpupool-replay --conf lim
expect "fence:sync,max_split_size:" gpupool-replay --conf fence:sync,max
expect "--print-lib" gpupool-run --pr
expect "--limit" gpupool-maxbatch --li
expect "" gpupool-stat --watch ""
expect "--title" gpupool-plot --ti
expect "" gpupool-plot run.csv --title ""
# pids from the pages in GPUPOOL_SHM_DIR
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
touch "$d/gpupool.4242" "$d/gpupool.77"
GPUPOOL_SHM_DIR=$d expect "4242" gpupool-stat --release 42
# gpupool-plot TIMELINE OUT: timelines, then the formats it writes; directories for both
mkdir "$d/plots" "$d/plots/sub.d"
touch "$d/plots/run.csv" "$d/plots/run.csv.gz" "$d/plots/run.png" "$d/plots/run.svg" "$d/plots/run.pdf" \
	"$d/plots/run.jpg" "$d/plots/notes.txt"
cd "$d/plots" || exit 1
expect "sub.d run.csv" gpupool-plot ""
expect "sub.d run.png run.svg run.pdf" gpupool-plot run.csv ""
expect "sub.d run.png run.svg run.pdf" gpupool-plot --title "a b" run.csv ""
expect "" gpupool-plot run.csv run.png ""
cd - >/dev/null || exit 1
# after gpupool-run and gpupool-maxbatch's --, commands
comp gpupool-run bas
[[ " ${COMPREPLY[*]-} " == *" bash "* ]] || fail "gpupool-run bas: no bash in '${COMPREPLY[*]-}'"
comp gpupool-maxbatch --limit 8G -- bas
[[ " ${COMPREPLY[*]-} " == *" bash "* ]] || fail "gpupool-maxbatch -- bas: no bash"
# every knob of the table completes (the list gpupool-replay prints for an unknown key)
knobs=$("$replay" --conf no_such_knob:1 /dev/null 2>&1 | sed -n 's/.*expected one of \(.*\); ignoring.*/\1/p' | tr -d ,)
[ -n "$knobs" ] || fail "no knob list from $replay --conf no_such_knob:1"
for k in $knobs; do
	comp gpupool-replay --conf "$k"
	[[ " ${COMPREPLY[*]-} " == *" $k: "* ]] || fail "gpupool-replay --conf $k: got '${COMPREPLY[*]-}'"
done
# every long option of --help completes
for tool in "$stat" "$replay"; do
	name=$(basename "$tool")
	for opt in $("$tool" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
		comp "$name" "$opt"
		[[ " ${COMPREPLY[*]-} " == *" $opt "* ]] || fail "$name: $opt (in --help) does not complete"
	done
done
for opt in $("$src/scripts/gpupool-maxbatch" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	comp gpupool-maxbatch "$opt"
	[[ " ${COMPREPLY[*]-} " == *" $opt "* ]] || fail "gpupool-maxbatch: $opt (in --help) does not complete"
done
help=$(python3 "$src/scripts/gpupool-plot" --help) || fail "gpupool-plot --help: exit $?"
for opt in $(grep -E '^  -' <<<"$help" | grep -o -- '--[a-z][a-z-]*' | sort -u); do # argparse's option lines
	comp gpupool-plot "$opt"
	[[ " ${COMPREPLY[*]-} " == *" $opt "* ]] || fail "gpupool-plot: $opt (in --help) does not complete"
done
for opt in $("$src/scripts/gpupool-run" --help | sed -n '/^Options:/,$p' | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	comp gpupool-run "$opt"
	[[ " ${COMPREPLY[*]-} " == *" $opt "* ]] || fail "gpupool-run: $opt (in --help) does not complete"
done
[ "$failed" -eq 0 ] && echo "completion: all checks passed"
exit "$failed"
