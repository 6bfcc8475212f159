#!/bin/sh
# A runtime that lacks entry points gpupool uses (an older or stripped libcudart): the
# program runs against the fakes of tests/fake/noasync and tests/fake/nosync (selected with
# LD_LIBRARY_PATH here, not by the test runner, which would put the full fake first).
# usage: e2e_partial.sh PRELOAD PROGRAM SHM_DIR FAKE_BUILD_DIR
set -u
. "$(dirname "$0")/e2e_lib.sh"
fake=$4
variant() { LD_LIBRARY_PATH=$fake/$1 GPUPOOL_REPORT=none FAKECUDA_DEVICES=1 run "$prog" "$1"; }

# no stream-ordered allocator, no capture: cudaMalloc pooled, nothing said at the default level
variant noasync || bad "noasync: exit status $?"
[ -s "$err" ] && bad "noasync: output on stderr"

# no cudaDeviceSynchronize: off, one line that says why, every call passed through
variant nosync || bad "nosync: exit status $?"
[ "$(wc -l <"$err")" -eq 1 ] || bad "nosync: expected one line on stderr"
grep -q "the CUDA runtime lacks cudaDeviceSynchronize.*gpupool is off" "$err" || bad "nosync: the line does not say why"
grep -q "cannot be applied" "$err" && bad "nosync: a cap named though none is set"

# the same under a limit: a cap that cannot be applied is not dropped: every allocation is
# refused, after one error line that says why
LD_LIBRARY_PATH=$fake/nosync GPUPOOL_REPORT=none FAKECUDA_DEVICES=1 GPUPOOL_CONF=limit:64M run "$prog" nosync-capped ||
	bad "nosync under a limit: exit status $?"
[ "$(wc -l <"$err")" -eq 1 ] || bad "nosync under a limit: expected one line on stderr"
grep -q "error: the CUDA runtime lacks cudaDeviceSynchronize.*the caps set (limit, group) cannot be applied: every allocation fails" "$err" ||
	bad "nosync under a limit: the line does not say the cap is not applied"
# and with GPUPOOL_DISABLE, on purpose: no cap, nothing refused
LD_LIBRARY_PATH=$fake/nosync GPUPOOL_REPORT=none FAKECUDA_DEVICES=1 GPUPOOL_CONF=limit:64M GPUPOOL_DISABLE=1 run "$prog" nosync ||
	bad "nosync disabled under a limit: exit status $?"

[ -z "$(ls -A "$dir")" ] || bad "pages left behind: $(ls -A "$dir")"
exit $fail
