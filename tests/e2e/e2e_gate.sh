#!/usr/bin/env bash
# Memory held back by the GPU's line is never passed uncounted (docs/sharing.md, "Waiting for
# memory"), on the fake's machine-wide device of 1 GiB (FAKECUDA_MACHINE) with no cap: A keeps
# 896 MiB in use; G (e2e_drv_vmmcap gate, the driver API) makes its pool; W asks for 512 MiB
# and waits in line. G's cuMemCreate and cuMemAllocPitch of 64 MiB are then held back by the
# line's gate, and when G's own wait ends (reclaim_wait_ms:500) each is an out of memory, or
# counted, never made uncounted (before, nothing capped the device and the call went to the
# driver with nothing counted).
# Arguments: the preloaded library, e2e_reclaim, the page directory, e2e_drv_vmmcap.
. "$(dirname "$0")/e2e_lib.sh"
. "$(dirname "$0")/e2e_procs.sh"
drv=$4
export FAKECUDA_MACHINE=$dir/machine FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1 GPUPOOL_REPORT=none
start() { # NAME CONF ARGS...: in the background, its pid in pid_NAME
	local name=$1 conf=$2
	shift 2
	env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="$dir" GPUPOOL_CONF="$conf" "$@" >"$dir/$name.out" 2>"$dir/$name.err" &
	eval "pid_$name=$!"
}

start a "" "$prog" keep 896
ready a
start g "reclaim_wait_ms:500" "$drv" gate procaddr
ready g
start w "reclaim_wait_ms:8000" "$prog" ask 512
sleep 3 # W's ticket heard by the others (W waits 8 s: time for a slow start under the sanitizers)
kill -USR1 "$pid_g"
wait "$pid_g"
grc=$?
[ $grc = 0 ] || { bad "G's memory held back by the gate passed uncounted ($grc)"; show g; }
# the gate held the calls back: the refusal says so
grep -q "cuMemCreate of 67108864 bytes refused: an earlier waiter on the GPU needs the memory" "$dir/g.err" ||
	{ bad "G's cuMemCreate was not held back by the gate"; show g w; }
kill -KILL "$pid_w" "$pid_a" 2>/dev/null
wait "$pid_w" "$pid_a" 2>/dev/null
[ $fail = 0 ] && echo "G: $(grep -c 'counted' "$dir/g.out") calls, each refused or counted"
exit $fail
