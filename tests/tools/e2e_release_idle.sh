#!/usr/bin/env bash
# gpupool-stat --release against the real library over the fake runtime: a process that holds
# memory and makes no call (idle at its hold point) answers at once from gpupool's own thread,
# woken through the channel, with or without a PID; its cached memory goes back, and its page
# then shows the device's figures as the driver gave them.
#   e2e_release_idle.sh PRELOAD PROGRAM GPUPOOL_STAT SHM_DIR
set -euo pipefail
preload=$1 prog=$2 stat=$3 shm=$4
rm -rf "$shm" && mkdir -p "$shm"
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
export GPUPOOL_SHM_DIR=$shm FAKECUDA_DEVICES=2 GPUPOOL_CONF=limit:64M
E2E_HOLD_FILE=$tmp/hold GPUPOOL_REPORT=none LD_PRELOAD=$preload "$prog" 2>"$tmp/err" &
pid=$!
for _ in $(seq 200); do [ -e "$tmp/hold" ] && break; sleep 0.05; done
[ -e "$tmp/hold" ] || fail "the program never reached its hold point"
# every process (this one), then by its PID: each answer well within the timeout, though the
# program makes no allocation call while it holds
"$stat" --release --timeout 3 >"$tmp/all" || { cat "$tmp/all"; fail "--release: exit $?"; }
cat "$tmp/all"
grep -q "^pid $pid (e2e_devices) released its cache: request 1 done after [0-9.]* ms, 2.0 MiB handed back$" "$tmp/all" ||
	fail "--release: the idle process's answer"
grep -qx "asked 1 process: 1 answered, 2.0 MiB handed back in all" "$tmp/all" || fail "--release: the summary"
"$stat" --release "$pid" --timeout 3 >"$tmp/one" || { cat "$tmp/one"; fail "--release $pid: exit $?"; }
cat "$tmp/one"
grep -q "^pid $pid (e2e_devices) released its cache: request 2 done after [0-9.]* ms, 0 B handed back$" "$tmp/one" ||
	fail "--release PID: the second answer (nothing left to hand back)"
for f in all one; do
	ms=$(sed -n 's/.* done after \([0-9.]*\) ms.*/\1/p' "$tmp/$f")
	awk -v ms="$ms" 'BEGIN { exit !(ms < 1000) }' || fail "$f: the answer took $ms ms"
done
# woken, not found by the thread's next pass (a few hundred ms apart): four answers of five
# within 50 ms (by chance, unwoken, about one run in 150)
fast=0
for i in 1 2 3 4 5; do
	"$stat" --release "$pid" --timeout 3 >"$tmp/r$i" || fail "--release $pid: exit $?"
	ms=$(sed -n 's/.* done after \([0-9.]*\) ms.*/\1/p' "$tmp/r$i")
	awk -v ms="$ms" 'BEGIN { exit !(ms < 50) }' && fast=$((fast + 1))
done
[ "$fast" -ge 4 ] || { cat "$tmp"/r?; fail "$fast answers of 5 within 50 ms: the process is not woken"; }
# the release thread's look at the devices (about once a second): the fake's 1 GiB each
for _ in $(seq 40); do
	"$stat" --json "$pid" >"$tmp/json"
	python3 - "$tmp/json" <<'PY' && break
import json, sys
d = json.load(open(sys.argv[1]))
devs = d["processes"][0]["devices"]
sys.exit(0 if len(devs) == 2 and all(v["device_total_bytes"] == 1 << 30 and v["device_seen_ns"] > 0
                                     and v["device_free_bytes"] <= v["device_total_bytes"] for v in devs) else 1)
PY
	sleep 0.1
done || true
python3 - "$tmp/json" <<'PY' || fail "the device's figures never reached the page"
import json, sys
d = json.load(open(sys.argv[1]))
devs = d["processes"][0]["devices"]
assert len(devs) == 2 and all(v["device_total_bytes"] == 1 << 30 and v["device_seen_ns"] > 0 for v in devs), devs
PY
rm -f "$tmp/hold"
wait "$pid" || fail "the program's exit status"
pid=
echo "e2e_release_idle: all checks passed"
