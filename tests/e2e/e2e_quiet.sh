#!/usr/bin/env bash
# Quiet by default: a program that probes its way up under a limit, handling each out of
# memory, gets one warning line for its device (which says where the others go), not one per
# failure; GPUPOOL_LOG=info has each; the exit report counts them all.
# Arguments: the preloaded library, e2e_reclaim (its probe mode), the page directory.
. "$(dirname "$0")/e2e_lib.sh"
export FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=1G GPUPOOL_CONF=limit:50M
# 4 MiB at a time, kept: 12 fit under 50 MiB, the next 200 fail
run "$prog" probe 4 212 || bad "probe: exit status $?"
grep -qx "ok 12 failed 200" "$out" || bad "probe: not 12 served and 200 refused"
n=$(grep -c "^gpupool: warning: device 0: out of memory" "$err")
[ "$n" = 1 ] || bad "probe: $n warnings of out of memory, expected 1"
grep -q "^gpupool: warning: device 0: out of memory allocating 4.0 MiB (.*); this device's further out-of-memory errors are logged at GPUPOOL_LOG=info, the exit report counts them$" "$err" ||
	bad "probe: the warning does not say where the others go"
grep -q "log limit reached" "$err" && bad "probe: the log's limit reached"
grep -q "^  fences [0-9]*, OOMs 200 (retried [0-9]*), invalid frees 0$" "$err" || bad "probe: the report's count"
grep -q "^  out of memory 200 times: the first logged as a warning, each one at GPUPOOL_LOG=info$" "$err" ||
	bad "probe: the report's line about the others"
[ "$(wc -l <"$err")" -lt 20 ] || bad "probe: $(wc -l <"$err") lines on stderr"
# each one at info
GPUPOOL_LOG=info run "$prog" probe 4 30 || bad "info: exit status $?"
n=$(grep -c "device 0: out of memory allocating 4.0 MiB" "$err")
[ "$n" = 18 ] || bad "info: $n lines of out of memory, expected 18"
[ $fail = 0 ] && echo "quiet: all checks pass"
exit $fail
