#!/bin/sh
# Contract 9: a program that never allocates prints nothing, starts no thread, leaves no page.
# usage: e2e_invisible.sh PRELOAD PROGRAM SHM_DIR
set -u
preload=$1 prog=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
LD_PRELOAD=$preload GPUPOOL_SHM_DIR=$dir "$prog" >"$out" 2>"$err"
rc=$?
fail=0
[ $rc -eq 0 ] || { echo "exit status $rc"; fail=1; }
[ -s "$out" ] && { echo "unexpected stdout:"; cat "$out"; fail=1; }
[ -s "$err" ] && { echo "unexpected stderr:"; cat "$err"; fail=1; }
left=$(ls -A "$dir")
[ -z "$left" ] || { echo "left in $dir: $left"; fail=1; }
exit $fail
