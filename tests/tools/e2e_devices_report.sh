#!/usr/bin/env bash
# Two devices seen from outside: while a process holds memory on two fake devices,
# gpupool-stat lists one row per device with the right figures; at exit the report (text and
# JSON) has a section per device, with the per-device limit and out-of-memory count.
#   e2e_devices_report.sh PRELOAD PROGRAM GPUPOOL_STAT SHM_DIR
set -euo pipefail
preload=$1 prog=$2 stat=$3 shm=$4
rm -rf "$shm" && mkdir -p "$shm"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GPUPOOL_SHM_DIR=$shm FAKECUDA_DEVICES=2 GPUPOOL_CONF=limit:64M
E2E_HOLD_FILE=$tmp/hold GPUPOOL_REPORT=$tmp/report.json LD_PRELOAD=$preload "$prog" &
pid=$!
for _ in $(seq 200); do [ -e "$tmp/hold" ] && break; sleep 0.05; done
[ -e "$tmp/hold" ] || { echo "FAIL: the program never reached its hold point"; exit 1; }
"$stat" >"$tmp/table.txt"
"$stat" --json >"$tmp/live.json"
rm -f "$tmp/hold"
wait "$pid"
GPUPOOL_REPORT=stderr LD_PRELOAD=$preload "$prog" 2>"$tmp/report.txt"
python3 - "$tmp" "$pid" <<'PY'
import json, sys
tmp, pid = sys.argv[1], int(sys.argv[2])
MB = 1 << 20
fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)
# the table's rows: GPU PID USER COMMAND DEV ...
rows = [l.split() for l in open(f"{tmp}/table.txt") if len(l.split()) > 4 and l.split()[1] == str(pid)]
check(sorted(r[4] for r in rows) == ["0", "1"], f"gpupool-stat shows one row per device: {[r[4] for r in rows]}")
check(sorted(r[0] for r in rows) == ["0", "1"], f"each row names its GPU: {[r[0] for r in rows]}")
live = [p for p in json.load(open(f"{tmp}/live.json"))["processes"] if p["pid"] == pid]
check(len(live) == 1, "gpupool-stat --json lists the process")
devs = {d["device"]: d for d in live[0]["devices"]} if live else {}
check(devs.get(0, {}).get("requested_bytes") == 3 * MB, "device 0 holds 3 MiB live")
check(devs.get(1, {}).get("requested_bytes") == 5 * MB, "device 1 holds 5 MiB live")
rep = {d["device"]: d for d in json.load(open(f"{tmp}/report.json"))["processes"][0]["devices"]}
check(sorted(rep) == [0, 1], "the JSON exit report has both devices")
check(all(rep[d]["limit_bytes"] == 64 * MB for d in rep), "the limit applies per device")
check(rep.get(0, {}).get("ooms") == 1 and rep.get(1, {}).get("ooms") == 0, "device 0 ran out of memory once, device 1 never")
check(all(rep[d]["live_blocks"] == 0 for d in rep), "nothing live at exit")
text = open(f"{tmp}/report.txt").read()
check("device 0" in text and "device 1" in text, "the text exit report has a section per device")
sys.exit(1 if fails else 0)
PY
