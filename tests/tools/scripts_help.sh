#!/bin/sh
# Every script answers --help on stdout (exit 0, nothing on stderr, nothing built or
# installed first: each must answer within seconds), and a bad option or argument with one
# line on stderr and exit 2. $1: the source tree.
set -u
S=$1/scripts
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

for s in demo test build-gpu-lib gpu-suite fuzz cross-test wheel-test gpupool-run gpupool-maxbatch; do
	for h in --help -h; do
		timeout 10 "$S/$s" $h >"$T/out" 2>"$T/err" </dev/null
		rc=$?
		[ "$rc" -eq 0 ] || { fail "$s $h: exit $rc"; continue; }
		[ ! -s "$T/err" ] || fail "$s $h: stderr: $(head -2 "$T/err")"
		[ "$(wc -l <"$T/out")" -ge 2 ] || fail "$s $h: no help text"
		grep -q "$s" "$T/out" || grep -q "usage" "$T/out" || fail "$s $h: help text without usage"
	done
	echo "ok: $s --help"
done

# bad usage: exit 2, one line (plus at most a usage line) naming the culprit
bad() { # SCRIPT WORD-IN-MESSAGE ARGS...
	s=$1 word=$2
	shift 2
	timeout 10 "$S/$s" "$@" >"$T/out" 2>"$T/err" </dev/null
	rc=$?
	[ "$rc" -eq 2 ] || { fail "$s $*: exit $rc, expected 2"; return; }
	[ "$(wc -l <"$T/err")" -le 2 ] && grep -q -- "$word" "$T/err" || fail "$s $*: stderr: $(cat "$T/err")"
	echo "ok: $s $* -> 2: $(head -1 "$T/err")"
}
bad demo --bogus --bogus
bad demo "no such trace" "$T/none.csv.gz"
bad demo "one trace at most" a b
bad build-gpu-lib --bogus --bogus
bad gpu-suite --bogus --bogus
bad gpu-suite bogus bogus
bad fuzz --bogus --bogus
bad fuzz "0 seconds" 0
bad fuzz "no harness nope" 5 nope
bad wheel-test --bogus --bogus
bad wheel-test "one BUILD_DIR" a b
bad wheel-test "needs a directory" --dist
bad wheel-test "needs a directory" --dist=
bad wheel-test "not a directory" --dist "$0"
bad gpupool-run --bogus --bogus
bad gpupool-maxbatch --limit --limit 1Q -- x "{}"
[ "$failed" -eq 0 ] && echo "scripts_help: all checks passed"
exit "$failed"
