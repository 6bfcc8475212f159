#!/usr/bin/env bash
# gpupool-replay on hostile knobs and sizes: exit 2 and a short message naming the problem,
# never an abort (the pool's checker) or a wrapped sum.
#   replay_hostile.sh REPLAY
set -euo pipefail
replay=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/err"; exit 1; }
hdr=t_ns,op,tid,dev,stream,size,ptr,dur_ns,err

# expect_2 TRACE LINES NEEDLE ARGS...: exit 2, LINES lines on stderr, NEEDLE among them
expect_2() {
  local trace=$1 lines=$2 needle=$3 rc=0
  shift 3
  "$replay" "$@" "$trace" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "gpupool-replay $* $trace: exit $rc, expected 2"
  [ "$(wc -l <"$tmp/err")" -eq "$lines" ] || fail "gpupool-replay $* $trace: expected $lines line(s) on stderr"
  grep -qF -- "$needle" "$tmp/err" || fail "gpupool-replay $* $trace: no '$needle' on stderr"
  [ ! -s "$tmp/out" ] || fail "gpupool-replay $* $trace: printed results"
  echo "ok   gpupool-replay $* ($(tail -1 "$tmp/err"))"
}

# large requests, each a segment of its own rounded up to large_round
{ echo $hdr; for i in 1 2 3; do echo "$i,malloc,1,0,0,20000000,7f000${i}000000,1,0"; done; } >"$tmp/large.csv"
expect_2 "$tmp/large.csv" 2 "large_round:8388608T: expected a power of two" --check --conf large_round:8388608T
expect_2 "$tmp/large.csv" 2 "large_round:3M: expected a power of two" --conf large_round:3M
expect_2 "$tmp/large.csv" 2 "small_segment:300T: expected a size from 1 to 256T" --check --conf small_segment:300T

# 70,000 live allocations of 2^48 bytes (the format's largest)
python3 -c "
print('$hdr')
for i in range(70000): print(f'{i},malloc,1,0,0,{2**48},{(i + 1) * 16:x},1,0')" >"$tmp/huge.csv"
expect_2 "$tmp/huge.csv" 1 "huge.csv:6: the pool holds more than 2^50 bytes" --check
