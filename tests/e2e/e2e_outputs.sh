#!/bin/sh
# What gpupool writes and says: the log's budgets (many bad knobs do not silence a later
# out-of-memory warning).
# usage: e2e_outputs.sh PRELOAD PROGRAM SHM_DIR
set -u
preload=$1 prog=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
err=$(mktemp) out=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
fail=0
run() { LD_PRELOAD=$preload GPUPOOL_SHM_DIR=$dir "$@" >"$out" 2>"$err"; }
bad() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; tail -5 "$err"; fail=1; }

# 205 bad GPUPOOL_CONF items: their lines have a budget of their own
conf=limit:8M
i=0
while [ $i -lt 205 ]; do conf="$conf,nokey$i:1"; i=$((i + 1)); done
GPUPOOL_CONF=$conf GPUPOOL_REPORT=none FAKECUDA_DEVICES=1 run "$prog" oom || bad "bad knobs: exit status $?"
grep -q "out of memory allocating 16.0 MiB" "$err" || bad "bad knobs: the out-of-memory warning was dropped"
n=$(grep -c "unknown key" "$err")
[ "$n" -ge 20 ] && [ "$n" -lt 205 ] || bad "bad knobs: $n lines about unknown keys (expected a capped number)"
grep -q "log limit reached" "$err" || bad "bad knobs: no line saying further messages are dropped"

[ -z "$(ls -A "$dir")" ] || bad "pages left behind: $(ls -A "$dir")"
exit $fail
