#!/bin/sh
# The gcc command docs/replay.md gives for the trace driver (the block after the
# "driver-command" marker) still builds it: run from the source tree with the fake runtime's
# directory for /usr/local/cuda/lib64 and CUDA's headers from the build, then the driver
# replays a test trace over the fake runtime with no errors.
# $1 source tree, $2 fake runtime directory, $3 CUDA include directory.
set -eu
src=$1 fake=$2 cudainc=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cmd=$(awk '/<!-- driver-command -->/ { m = 1; next } m && /^```/ { if (++f == 2) exit; next } m && f == 1' \
	"$src/docs/replay.md" | tr -d '\\' | tr '\n' ' ')
case $cmd in gcc\ *) ;; *) echo "FAIL: no gcc command after the driver-command marker: '$cmd'"; exit 1 ;; esac
cmd=$(echo "$cmd" | sed "s|-L/usr/local/cuda/lib64|-L$fake|; s|-I/usr/local/cuda/include|-I$cudainc|; s|-o gpupool-trace-driver|-o $T/driver|")
echo "$cmd"
(cd "$src" && sh -c "$cmd") || { echo "FAIL: the documented command does not build the driver"; exit 1; }
LD_LIBRARY_PATH=$fake FAKECUDA_CAPACITY=1G "$T/driver" "$src/tests/traces/simple_sync.csv" >"$T/out" ||
	{ cat "$T/out"; echo "FAIL: the driver it built"; exit 1; }
grep -q '^errors=0$' "$T/out" || { cat "$T/out"; echo "FAIL: errors"; exit 1; }
echo "driver_doc: the documented command builds a working driver"
