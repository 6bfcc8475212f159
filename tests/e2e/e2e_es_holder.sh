#!/usr/bin/env bash
# A holder whose PyTorch runs on expandable segments (tests/e2e/es_framework: a stand-in that
# maps cuMemCreate pages taken through the runtime's cudaGetDriverEntryPoint, over the fake
# runtime built on the fake driver), on the fake machine-wide device of 1 GiB
# (FAKECUDA_MACHINE) with an asker B (e2e_reclaim, on the plain fake runtime):
#   listed   A's idle pages are counted, and gpupool-stat (table, --json, --prometheus) lists A
#            with no pool memory at all
#   reclaim  B needs more than the device has left: A is asked, empties its cache (unmaps and
#            releases the pages no tensor uses, through gpupool's cuMemRelease), and what the
#            driver got back is counted as given; pages in use stay
#   cap      under limit:512M, A's growth stops at 512 MiB with PyTorch's own error
# Arguments: the preloaded library, e2e_reclaim, the page directory, python3, gpupool-stat,
# the fake build directory.
. "$(dirname "$0")/e2e_lib.sh"
py=$4 stat=$5 fake=$6
here=$(cd "$(dirname "$0")" && pwd)
export FAKECUDA_MACHINE=$dir/machine FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1
if ldd "${preload##*:}" 2>/dev/null | grep -q libtsan; then
	echo "SKIP: a Python holder under ThreadSanitizer (e2e_reclaim.sh says why)"
	exit 0
fi
# not the leak checker's: the interpreter keeps memory at exit (e2e_reclaim.sh)
pyasan=ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
aenv=("$pyasan" PYTHONPATH="$here/es_framework" LD_LIBRARY_PATH="$fake/ondriver:$fake")
apid=
a_out=$(mktemp) a_err=$(mktemp)
TMPS="$TMPS $a_out $a_err"
abad() { bad "$@"; echo "--- holder's stdout"; tail -n 20 "$a_out"; echo "--- holder's stderr"; tail -n 30 "$a_err"; }
# start_a ENV... -- ARGS...: A in the background until it prints "ready"
start_a() {
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="$dir" GPUPOOL_LOG=info "${aenv[@]}" "${envs[@]}" \
		"$py" "$here/es_framework/hold.py" "$@" >"$a_out" 2>"$a_err" &
	apid=$!
	for _ in $(seq 200); do
		grep -q '^ready' "$a_out" && return 0
		kill -0 $apid 2>/dev/null || break
		sleep 0.05
	done
	abad "holder did not start"
	return 1
}
stop_a() {
	kill -INT $apid 2>/dev/null
	wait $apid
	arc=$?
}
json() { "$py" -c "import json,sys; d=json.load(open(sys.argv[1]))['processes'][0]['devices'][0]; print($2)" "$1"; }

# listed: 768 MiB idle in PyTorch's cache, nothing in gpupool's pool
start_a GPUPOOL_REPORT="$dir/a.json" -- 768 && {
	GPUPOOL_SHM_DIR=$dir "$stat" --json "$apid" >"$out" 2>"$err" || bad "listed: gpupool-stat --json $apid failed"
	[ "$("$py" -c "import json,sys; d=json.load(open(sys.argv[1])); p=[p for p in d['processes'] if p['pid']==$apid][0]['devices'][0]; print(p['unpooled_vmm_bytes'] == 768 << 20 and p['reserved_bytes'] == 0 and p['allocs'] == 0)" "$out")" = True ] ||
		bad "listed: A's JSON figures"
	GPUPOOL_SHM_DIR=$dir "$stat" --wide >"$out" 2>"$err" || bad "listed: gpupool-stat failed"
	grep -qE "^ *[0-9-]+ +$apid " "$out" || bad "listed: the table has no row for A"
	grep -q 'GPU-66616b65' "$out" || bad "listed: the table has no GPU line"
	GPUPOOL_SHM_DIR=$dir "$stat" --prometheus >"$out" 2>"$err" || bad "listed: gpupool-stat --prometheus failed"
	grep -qE "^gpupool_unpooled_vmm_bytes\{[^}]*pid=\"$apid\"[^}]*\} 805306368" "$out" || bad "listed: A's Prometheus gauge"

	# reclaim: B needs 512 MiB where the device has 256 MiB
	rm -f "$dir/b.json"
	env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="$dir" GPUPOOL_LOG=info GPUPOOL_REPORT="$dir/b.json" \
		LD_LIBRARY_PATH="$fake" "$prog" ask 512 >"$out" 2>"$err"
	brc=$?
	[ $brc = 0 ] || abad "reclaim: B failed ($brc)"
	# B asked (what B credits A with is reclaim.c's to measure: the GPU's free memory before
	# the ask is read after sending it, so a holder as quick as this one may be credited 0)
	grep -q "reclaim: device 0 needed 512.0 MiB" "$err" || abad "reclaim: B's info line"
	stop_a
	[ $arc = 0 ] || abad "reclaim: A's exit status $arc"
	grep -q "emptied=1 reserved=0 allocated=0" "$a_out" || abad "reclaim: A's cache was not emptied"
	grep -q "framework caches emptied" "$a_err" || abad "reclaim: A's info line"
	[ "$(json "$dir/a.json" "d['framework_empties'] == 1 and d['reclaims_served'] == 1 and d['reclaim_given_bytes'] == 768 << 20 and d['unpooled_vmm_bytes'] == 0 and d['unpooled_frees'] == 24")" = True ] ||
		abad "reclaim: A's counters (what the driver got back counts as given)"
	[ "$(json "$dir/b.json" "d['reclaim_asks'] == 1 and d['ooms'] == 0")" = True ] || bad "reclaim: B's counters"
}

# in use: 256 MiB of A's tensors live, 512 MiB idle; B needs 512: only the idle pages go
start_a GPUPOOL_REPORT="$dir/a.json" -- 768 256 && {
	env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="$dir" GPUPOOL_REPORT=none LD_LIBRARY_PATH="$fake" \
		"$prog" ask 512 >"$out" 2>"$err"
	brc=$?
	[ $brc = 0 ] || abad "in use: B failed ($brc)"
	stop_a
	grep -q "emptied=1 reserved=$((256 << 20)) allocated=$((256 << 20))" "$a_out" || abad "in use: A's pages in use"
	# its idle pages, and whatever its own pool held idle (a second ask may come before the
	# framework's thread has emptied the cache: a whole free segment goes with it), never a
	# page in use
	[ "$(json "$dir/a.json" "512 << 20 <= d['reclaim_given_bytes'] <= (512 << 20) + d['reserved_bytes_peak'] and d['unpooled_vmm_bytes'] == 256 << 20")" = True ] ||
		abad "in use: A gave more than its idle memory ($(json "$dir/a.json" "d['reclaim_given_bytes'], d['reserved_bytes_peak'], d['unpooled_vmm_bytes'], d['reclaims_served']"))"
}

# cap: limit:512M, A takes 64 MiB tensors until PyTorch's own error
env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="$dir" GPUPOOL_CONF=limit:512M GPUPOOL_REPORT="$dir/a.json" "${aenv[@]}" \
	"$py" "$here/es_framework/hold.py" 1024 --oom >"$a_out" 2>"$a_err"
arc=$?
[ $arc = 0 ] || abad "cap: A's exit status $arc"
grep -q "^oom tensors=8 reserved=$((512 << 20)) error=CUDA out of memory" "$a_out" || abad "cap: A did not stop at 512 MiB"
grep -q "cuMemCreate of .* refused: the limit" "$a_err" || abad "cap: gpupool's line"
[ "$(json "$dir/a.json" "d['unpooled_vmm_bytes_peak'] == 512 << 20 and d['unpooled_refusals'] == 1")" = True ] ||
	abad "cap: A's counters"

[ $fail = 0 ] && echo "expandable segments: listed, asked, emptied, capped"
exit $fail
