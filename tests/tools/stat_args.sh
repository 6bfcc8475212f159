#!/bin/sh
# gpupool-stat's command line: every bad argument is one line naming it, then one line
# pointing at --help, exit status 2; conflicting options are refused; every other non-zero
# exit says why on stderr; --help goes to stdout. $1: gpupool-stat.
set -u
STAT=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
export GPUPOOL_SHM_DIR="$D/shm"
mkdir "$GPUPOOL_SHM_DIR"
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }

# expect STATUS "first line of stderr (grep -x pattern)" ARGS...
expect() {
	want=$1 line=$2
	shift 2
	"$STAT" "$@" >"$D/out" 2>"$D/err" </dev/null
	rc=$?
	[ "$rc" -eq "$want" ] || { fail "gpupool-stat $*: exit $rc, expected $want"; cat "$D/err" >&2; return; }
	head -1 "$D/err" | grep -qx -- "$line" || { fail "gpupool-stat $*: stderr: $(head -1 "$D/err")"; return; }
	if [ "$want" -eq 2 ]; then
		sed -n 2p "$D/err" | grep -qx "Try 'gpupool-stat --help' for more information." ||
			fail "gpupool-stat $*: no pointer to --help"
		[ "$(wc -l <"$D/err")" -eq 2 ] || fail "gpupool-stat $*: more than two lines"
		[ ! -s "$D/out" ] || fail "gpupool-stat $*: wrote to stdout"
	fi
	echo "ok: gpupool-stat $* -> $rc: $(head -1 "$D/err")"
}

expect 2 'gpupool-stat: unknown or ambiguous option --bogus' --bogus
expect 2 'gpupool-stat: unknown or ambiguous option --bogus' --bogus=3
expect 2 'gpupool-stat: unknown or ambiguous option --c' --c
expect 2 'gpupool-stat: unknown option -x' -x
expect 2 'gpupool-stat: --watch needs a value' --watch
expect 2 'gpupool-stat: --watch 0.01: expected seconds from 0.1 to 86400' --watch 0.01
expect 2 'gpupool-stat: --watch nan: expected seconds from 0.1 to 86400' --watch nan
expect 2 'gpupool-stat: --count 1.5: expected a whole number from 1 to 1000000000' --watch 1 --count 1.5
expect 2 'gpupool-stat: --count 0: expected a whole number from 1 to 1000000000' --watch 1 --count 0
expect 2 'gpupool-stat: --count 99999999999999999999: expected a whole number from 1 to 1000000000' \
	--watch 1 --count 99999999999999999999
expect 2 'gpupool-stat: --release abc: expected a process id' --release abc
expect 2 'gpupool-stat: --release 0: expected a process id' --release 0
expect 2 'gpupool-stat: --timeout -1: expected seconds from 0 to 3600' --release 5 --timeout -1
expect 2 'gpupool-stat: 12x: expected a process id' 12x
expect 2 'gpupool-stat: 99999999999: expected a process id' 99999999999
expect 2 'gpupool-stat: unexpected argument 13 (one PID at most)' 12 13
expect 2 'gpupool-stat: --json and --prometheus cannot be used together' --json --prometheus
expect 2 'gpupool-stat: --openmetrics and --json cannot be used together' --openmetrics --json
expect 2 'gpupool-stat: --clean and --release cannot be used together' --clean --release 5
expect 2 'gpupool-stat: --clean and --json cannot be used together' --clean --json
expect 2 'gpupool-stat: --clean and --watch cannot be used together' --clean --watch 1
expect 2 'gpupool-stat: --clean takes no PID argument' --clean 42
expect 2 'gpupool-stat: --release and --prometheus cannot be used together' --release 5 --prometheus
expect 2 'gpupool-stat: unexpected argument 42 (one PID at most)' --release 5 42
expect 2 'gpupool-stat: --release 12x: expected a process id' --release 12x
expect 2 'gpupool-stat: --release and --listen cannot be used together' --release 5 --listen 0
expect 2 'gpupool-stat: --listen serves Prometheus and OpenMetrics text: it takes no --json' --listen 0 --json
expect 2 'gpupool-stat: --listen and --watch cannot be used together' --listen 0 --watch 1
expect 2 'gpupool-stat: --count goes with --watch' --count 3
expect 2 'gpupool-stat: --timeout goes with --release' --timeout 3
expect 2 'gpupool-stat: --wide is for the table of all processes' --wide --json
expect 2 'gpupool-stat: --wide is for the table of all processes' -w 42

# not bad usage, but no answer: exit 1, and stderr says why in every mode
for m in "" --json --prometheus --openmetrics; do
	expect 1 "gpupool-stat: no readable page for pid 999999 in $GPUPOOL_SHM_DIR" $m 999999
done
GPUPOOL_SHM_DIR=$D/missing expect 1 "gpupool-stat: $D/missing: No such file or directory"
GPUPOOL_SHM_DIR=$D/missing expect 1 "gpupool-stat: $D/missing: No such file or directory" --json
GPUPOOL_SHM_DIR=$D/missing expect 1 "gpupool-stat: $D/missing: No such file or directory" --clean
GPUPOOL_SHM_DIR=$D/missing expect 1 "gpupool-stat: $D/missing: No such file or directory" --release
# --release of a pid that names no process, or a process without a page: said so, exit 1
expect 1 'gpupool-stat: no process 999999' --release 999999
expect 1 "gpupool-stat: pid $$ has no statistics page in $GPUPOOL_SHM_DIR (it has not allocated through gpupool)" \
	--release $$
# --release of every process where there is none: not an error
"$STAT" --release >"$D/out" 2>"$D/err" || fail "--release with no page: exit $?"
grep -qx "no process to ask in $GPUPOOL_SHM_DIR" "$D/out" && [ ! -s "$D/err" ] || fail "--release with no page: output"

# help and version: stdout, exit 0
for h in --help -h; do
	"$STAT" $h >"$D/out" 2>"$D/err" || fail "$h exit status"
	grep -q '^usage: gpupool-stat ' "$D/out" && [ ! -s "$D/err" ] || fail "$h output"
done
"$STAT" --version | grep -q '^gpupool-stat [0-9]' || fail "--version"
"$STAT" -V | grep -q '^gpupool-stat [0-9]' || fail "-V"
# the help fits a screen: 24 lines of 79 columns at most
"$STAT" --help >"$D/out"
[ "$(wc -l <"$D/out")" -le 24 ] || fail "--help: $(wc -l <"$D/out") lines"
awk 'length > 79 { bad = 1 } END { exit bad }' "$D/out" || fail "--help: a line wider than 79"
# an empty directory is no error: one line says there is nothing
"$STAT" >"$D/out" 2>"$D/err" || fail "empty directory: exit $?"
[ "$(cat "$D/out")" = "no gpupool processes" ] || fail "empty directory: $(cat "$D/out")"
[ "$failed" -eq 0 ] && echo "stat_args: all checks passed"
exit "$failed"
