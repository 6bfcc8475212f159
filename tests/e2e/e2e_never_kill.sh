#!/bin/sh
# Contract 10: the exit report appears and the process exits 0, even while another thread is
# inside the pool at exit; a bad knob prints one line and the program continues; strict
# mode fails allocations with an error instead of aborting.
# usage: e2e_never_kill.sh PRELOAD PROGRAM SHM_DIR
set -u
. "$(dirname "$0")/e2e_lib.sh"

run "$prog" report; rc=$?
[ $rc -eq 0 ] || bad "report: exit status $rc"
grep -q "gpupool: report for pid" "$err" || bad "report: no exit report on stderr"

for i in 1 2 3 4 5; do
	run "$prog" teardown; rc=$?
	[ $rc -eq 0 ] || bad "teardown #$i: exit status $rc"
	grep -q "gpupool: report for pid" "$err" || bad "teardown #$i: no exit report"
done

GPUPOOL_CONF=round:banana GPUPOOL_REPORT=none run "$prog" basic; rc=$?
[ $rc -eq 0 ] || bad "bad knob: exit status $rc"
[ "$(wc -l <"$err")" -eq 1 ] || bad "bad knob: expected exactly one line on stderr"
grep -q "GPUPOOL_CONF.*banana" "$err" || bad "bad knob: the line does not name GPUPOOL_CONF and the value"

GPUPOOL_CONF=limit:banana,strict:1 GPUPOOL_REPORT=none run "$prog" strict; rc=$?
[ $rc -eq 0 ] || bad "strict: exit status $rc"
grep -q "strict: cudaMalloc -> cudaError" "$out" || bad "strict: allocation did not fail"
grep -q "banana" "$err" || bad "strict: the bad value was not reported"

# the error names the variable that was bad, a scheduler's too
CUDA_DEVICE_MEMORY_LIMIT=junk GPUPOOL_CONF=strict:1 GPUPOOL_REPORT=none run "$prog" strict; rc=$?
[ $rc -eq 0 ] || bad "strict, scheduler's variable: exit status $rc"
grep -q "strict: cudaMalloc -> cudaError" "$out" || bad "strict, scheduler's variable: allocation did not fail"
grep -q "error: CUDA_DEVICE_MEMORY_LIMIT has a bad value and strict mode is on" "$err" ||
	bad "strict, scheduler's variable: the error does not name CUDA_DEVICE_MEMORY_LIMIT"

# the report's knobs line says where a scheduler's limit came from
CUDA_DEVICE_MEMORY_LIMIT_0=3000m run "$prog" report; rc=$?
[ $rc -eq 0 ] || bad "report, scheduler's limit: exit status $rc"
grep -q "^  knobs: limit:3000M (CUDA_DEVICE_MEMORY_LIMIT_0)$" "$err" ||
	bad "report, scheduler's limit: the knobs line does not name CUDA_DEVICE_MEMORY_LIMIT_0"

left=$(ls -A "$dir")
[ -z "$left" ] || bad "pages left behind: $left"
exit $fail
