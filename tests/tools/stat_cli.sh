#!/bin/sh
# The gpupool-stat CLI against live pages: a helper writer (stat_writer) in a private
# GPUPOOL_SHM_DIR; checks the GPU lines, the table, the PID view, --json (python3), --prometheus,
# the width, --watch (piped, with its reclaim and decay lines, and on a terminal), --release
# (one process and every process, acked and idle), --clean, junk in the directory, the exit
# report.
set -eu
. "$(dirname "$0")/stat_lib.sh"

# started here, not in a subshell, so that this shell can wait for them
"$WRITER" 3000 >"$D/w.out" 2>"$D/w.err" &
WPID=$!
"$WRITER" 500 idle >"$D/idle.out" 2>"$D/idle.err" &
IPID=$!
"$WRITER" 500 idle >"$D/idle2.out" 2>"$D/idle2.err" &
I2PID=$!
HELPERS="$WPID $IPID $I2PID"
wait_ready w
wait_ready idle
wait_ready idle2

# junk the reader must skip with one line each
head -c 100 /dev/urandom >"$GPUPOOL_SHM_DIR/gpupool.4000005"
mkdir "$GPUPOOL_SHM_DIR/gpupool.4000006"
mkfifo "$GPUPOOL_SHM_DIR/gpupool.4000007"
ln -s /dev/zero "$GPUPOOL_SHM_DIR/gpupool.4000008"
touch "$GPUPOOL_SHM_DIR/not-a-page"

# default table
"$STAT" >"$D/table" 2>"$D/table.err" || fail "table exit status"
cat "$D/table"
# rows: GPU, PID, USER (the page's owner), COMMAND, the CUDA index in the process
me=$(id -un)
grep -q "^  0 *$WPID $me *stat_writer *0 .* live$" "$D/table" || fail "table row dev 0"
grep -q "^  1 *$WPID $me *stat_writer *1 .* live$" "$D/table" || fail "table row dev 1"
grep -q "^  [01] *$IPID $me *stat_writer" "$D/table" || fail "idle writer row"
# the GPUs above the table: the three writers on each of the two GPUs, numbered (no driver
# here: the CUDA index they agree on), named (the page's name), the driver's 80 GiB; held =
# reserved + unpooled of the writers; no room for the UUID in 80 columns (--wide has it)
grep -q "^GPU  NAME  *MEMORY  *FREE  *GPUPOOL  *IDLE  *PROCS$" "$D/table" || fail "GPU header"
grep -q "^  0  fake GPU  *80.0 GiB  *[0-9.]* [KMG]iB  *[0-9.]* [KMG]iB  *[0-9.]* [KMG]\?i\?B  *3$" "$D/table" ||
	fail "GPU line of device 0"
grep -q "^  1  fake GPU  *80.0 GiB .*  3$" "$D/table" || fail "GPU line of device 1"
grep -q "^GPU  *PID USER  *COMMAND  *DEV  *HELD  *USED  *IDLE  *STATE$" "$D/table" || fail "table header"
# by GPU, then memory held: the rows of GPU 0 before those of GPU 1
[ "$(grep -n "^  0  *[0-9]* $me " "$D/table" | tail -1 | cut -d: -f1)" -lt "$(grep -n "^  1  *[0-9]* $me " "$D/table" | head -1 | cut -d: -f1)" ] ||
	fail "rows by GPU"
grep -q "^HELD: taken from the GPU; USED: in live blocks; IDLE: --release frees it now$" "$D/table" || fail "legend"
[ "$(wc -l <"$D/table.err")" -eq 4 ] || { cat "$D/table.err"; fail "expected 4 skip lines"; }
grep -q "gpupool.4000005 truncated/wrong size" "$D/table.err" || fail "truncated"
grep -q "gpupool.4000006 is a directory" "$D/table.err" || fail "directory"
grep -q "gpupool.4000007 is a fifo" "$D/table.err" || fail "fifo"
grep -q "gpupool.4000008 is a symbolic link" "$D/table.err" || fail "symlink"

# one process
"$STAT" "$WPID" >"$D/detail" 2>/dev/null || fail "detail exit status"
grep -q "^pid $WPID  command stat_writer  user $me  live  devices 2  started [0-9-]* [0-9:]* ([0-9]* s ago)$" "$D/detail" ||
	fail "detail header"
grep -q "device 1  fake GPU  limit 68719476736 (64.0 GiB)" "$D/detail" || fail "detail limit"
for f in reserved_bytes largest_free_block segment_allocs passthrough_frees "driver calls saved"; do
	grep -q "$f" "$D/detail" || fail "detail lacks $f"
done
if "$STAT" 4000009 >/dev/null 2>&1; then fail "unknown pid should exit 1"; fi

# JSON
"$STAT" --json >"$D/json" 2>/dev/null || fail "json exit status"
python3 - "$D/json" "$WPID" <<'EOF' || fail "json content"
import json, sys
d = json.load(open(sys.argv[1]))
p = [p for p in d["processes"] if p["pid"] == int(sys.argv[2])][0]
assert p["comm"] == "stat_writer" and not p["stale"] and len(p["devices"]) == 2
assert p["source"] == "page" and p["user"] and p["uid"] is not None, p
for v in p["devices"]:
    assert v["consistent"] and v["allocated_bytes"] <= v["reserved_bytes"]
    assert v["reserved_bytes_peak"] >= v["reserved_bytes"] and v["allocs"] > 0
    assert v["device_total_bytes"] == 80 << 30 and v["device_free_bytes"] < v["device_total_bytes"]
# the GPUs: each of the three writers on each GPU, held = the sum of reserved + unpooled
live = [p for p in d["processes"] if not p["stale"]]
assert [g["uuid"] for g in d["gpus"]] == ["GPU-6770706f-6f6c-7465-7374-00000000000%d" % i for i in (0, 1)], d["gpus"]
assert [(g["index"], g["name"]) for g in d["gpus"]] == [(0, "fake GPU"), (1, "fake GPU")], d["gpus"]
for g in d["gpus"]:
    slots = [v for p in live for v in p["devices"] if v["uuid"] == g["uuid"]]
    assert g["processes"] == len(slots) == 3, g
    assert g["total_bytes"] == 80 << 30 and g["free_bytes"] <= g["total_bytes"], g
    assert g["seen_ns"] == max(v["device_seen_ns"] for v in slots), g
    # the writers run on: each reading is its own, no exact sum across two copies
    assert g["held_bytes"] > 0 and g["reclaimable_bytes"] >= 0, g
EOF
"$STAT" --json "$WPID" 2>/dev/null | python3 -c 'import json,sys; assert len(json.load(sys.stdin)["processes"]) == 1' ||
	fail "json for one pid"

# Prometheus
"$STAT" --prometheus >"$D/prom" 2>/dev/null || fail "prometheus exit status"
grep -q '^# TYPE gpupool_allocs_total counter$' "$D/prom" || fail "prom TYPE"
grep -q "^gpupool_reserved_bytes{pid=\"$WPID\",comm=\"stat_writer\",user=\"$me\",device=\"1\",UUID=\"GPU-6770706f-6f6c-7465-7374-000000000001\"} [0-9]*$" "$D/prom" ||
	fail "prom sample"
grep -q '^gpupool_gpu_info{UUID="GPU-6770706f-6f6c-7465-7374-000000000001",index="1",name="fake GPU"} 1$' "$D/prom" ||
	fail "prom GPU info"
# the GPUs: labelled UUID alone
grep -q '^gpupool_gpu_total_bytes{UUID="GPU-6770706f-6f6c-7465-7374-000000000001"} 85899345920$' "$D/prom" ||
	fail "prom GPU total"
grep -q '^gpupool_gpu_processes{UUID="GPU-6770706f-6f6c-7465-7374-000000000000"} 3$' "$D/prom" ||
	fail "prom GPU processes"
# no limit on device 0: no gpupool_limit_bytes sample for it (a 0 would read as a limit of nothing)
grep -q "^gpupool_limit_bytes{pid=\"$WPID\",comm=\"stat_writer\",user=\"$me\",device=\"1\",UUID=\"GPU-[0-9a-f-]*\"} 68719476736$" "$D/prom" ||
	fail "prom limit of device 1"
if grep -q "^gpupool_limit_bytes{pid=\"$WPID\",comm=\"stat_writer\",user=\"$me\",device=\"0\"" "$D/prom"; then fail "a limit sample for no limit"; fi
bad=$(grep -v '^# \(HELP\|TYPE\) ' "$D/prom" |
	grep -cv '^gpupool_[a-z_]*{\(pid="[0-9]*",comm="[^"]*"\(,user="[^"]*"\)\?\(,device="[0-9]*"\(,UUID="GPU-[0-9a-f-]\{36\}"\)\?\)\?\|UUID="GPU-[0-9a-f-]\{36\}"\(,index="[0-9]*"\)\?\(,name="[^"]*"\)\?\|reason="[a-z_]*"\|version="[0-9A-Za-z.+~-]*"\)} [0-9.]*$' || true)
[ "$bad" -eq 0 ] || fail "prom grammar: $bad bad lines"

# the table fits the width: 80 columns (no terminal, no COLUMNS) gives one line per row;
# wider: UNPOOLED (the writers hold 256 MiB outside the pools on device 1, none on device 0),
# LIMIT/%LIM (device 1 has a 64 GiB limit); --wide every column; SEGS, not MALLOCS
"$STAT" >"$D/t80" 2>/dev/null || fail "table exit status"
awk 'length > 80 { bad = 1 } END { exit bad }' "$D/t80" || { cat "$D/t80"; fail "table wider than 80"; }
COLUMNS=140 "$STAT" >"$D/t140" 2>/dev/null || fail "table exit status"
awk 'length > 140 { bad = 1 } END { exit bad }' "$D/t140" || { cat "$D/t140"; fail "table wider than 140"; }
grep -q "^GPU  *PID USER  *COMMAND .* HELD  *USED  *IDLE .* UNPOOLED .* LIMIT  *%LIM .* STATE$" "$D/t140" ||
	{ cat "$D/t140"; fail "140-column header"; }
grep -q "^  1 *$WPID $me *stat_writer .* 256.0 MiB .*64.0 GiB *[0-9.]* .* live$" "$D/t140" || fail "limit and unpooled columns"
COLUMNS=200 "$STAT" >"$D/t200" 2>/dev/null || fail "table exit status"
"$STAT" --wide >"$D/twide" 2>/dev/null || fail "wide exit status"
for t in t200 twide; do
	grep -q "DEV       HELD       USED       IDLE   RESERVED   UNPOOLED  PEAK_RSVD     CACHED    LARGEST      LIMIT  %LIM  HIT%   SEGS  OOMS  STATE" "$D/$t" ||
		{ cat "$D/$t"; fail "$t: every column"; }
done
grep -q "GPU-6770706f-6f6c-7465-7374-000000000001$" "$D/twide" || fail "wide: the whole UUID"
if grep -q MALLOCS "$D/twide"; then fail "MALLOCS is SEGS now"; fi
COLUMNS=30 "$STAT" 2>/dev/null | grep -q "^GPU  *PID USER  *COMMAND  *STATE$" || fail "narrowest table"

# watch, piped: plain frames one after the other, each after a timestamp line; never an
# escape code (nor in JSON or Prometheus text)
"$STAT" --watch 0.2 --count 2 >"$D/watch" 2>/dev/null || fail "watch exit status"
cat "$D/watch"
if grep -q "$(printf '\033')" "$D/watch"; then fail "escape codes in piped --watch"; fi
[ "$(grep -c '^-- gpupool-stat .* every 0.2s  [0-9-]* [0-9:]*$' "$D/watch")" -eq 2 ] || fail "watch frames"
[ "$(grep -c '^GPU  *PID USER' "$D/watch")" -eq 2 ] || fail "watch tables"
# a reclaim between two refreshes (SIGUSR1 to the writer: device 0 gives 2 GiB and 1 GiB
# idle, device 1 receives 2 GiB after 0.41 s): a line each, under the table of the frame
# after it and in no other (piped frames are a log: each line once)
"$STAT" --watch 0.3 --count 5 >"$D/watchev" 2>/dev/null &
SPID=$!
sleep 0.5
kill -USR1 "$WPID"
wait "$SPID" || fail "watch with events exit status"
cat "$D/watchev"
for l in "gave 2.0 GiB for a reclaim" "received 2.0 GiB after waiting 0.41 s" "gave back 1.0 GiB that sat unused (3 segments)"; do
	n=$(grep -c "^[0-9:]\{8\} pid $WPID (stat_writer) $l$" "$D/watchev" || true)
	[ "$n" -eq 1 ] || fail "watch: '$l' in $n frames, expected 1"
done
# the frame that found them (not the first: the reclaim came after it) ends with them
awk -v RS= '/^-- gpupool-stat/ { f++ } / gave 2.0 GiB for a reclaim/ { print f }' "$D/watchev" | grep -qx '[2-5]' ||
	fail "watch: the reclaim's lines not in the frame after it"
if grep -q "pid $IPID .*reclaim" "$D/watchev"; then fail "watch: an event for an idle writer"; fi
# a process that appears between two refreshes having already received memory (a new job
# whose first allocation found the GPU full): its lines, once; one whose page predates the
# watch: none for its history, but a line for a reclaim that found no one to ask (SIGUSR2:
# device 1 waits 0.05 s for nothing)
"$WRITER" 500 reclaimed >"$D/old.out" 2>/dev/null &
OPID=$!
HELPERS="$HELPERS $OPID"
wait_ready old
# (12 frames: the new writer has 3 s to start and write its page, on a busy machine too)
"$STAT" --watch 0.3 --count 12 >"$D/watchnew" 2>/dev/null &
SPID=$!
sleep 0.45
"$WRITER" 500 reclaimed >"$D/new.out" 2>/dev/null &
NPID=$!
HELPERS="$HELPERS $NPID"
kill -USR2 "$OPID"
wait "$SPID" || fail "watch with a new process exit status"
cat "$D/watchnew"
for l in "gave 2.0 GiB for a reclaim" "received 2.0 GiB after waiting 0.41 s" "gave back 1.0 GiB that sat unused (3 segments)"; do
	n=$(grep -c "^[0-9:]\{8\} pid $NPID (stat_writer) $l$" "$D/watchnew" || true)
	[ "$n" -eq 1 ] || fail "watch: a new process's '$l' in $n frames, expected 1"
done
n=$(grep -c "^[0-9:]\{8\} pid $OPID (stat_writer) waited 0.05 s for a reclaim and received nothing$" "$D/watchnew" || true)
[ "$n" -eq 1 ] || fail "watch: a reclaim that received nothing in $n frames, expected 1"
[ "$(grep -c "pid $OPID " "$D/watchnew")" -eq 1 ] || fail "watch: lines for the history of a process older than the watch"
if grep -q "pid $WPID " "$D/watchnew"; then fail "watch: an earlier watch's reclaim told again"; fi
for p in "$OPID" "$NPID"; do
	kill -TERM "$p"
	wait "$p" || fail "writer $p exit status"
	helper_done "$p"
done
for m in --json --prometheus --openmetrics; do
	"$STAT" $m --watch 0.1 --count 2 >"$D/watchm" 2>/dev/null || fail "watch $m exit status"
	if grep -q "$(printf '\033')" "$D/watchm"; then fail "escape codes in $m --watch"; fi
done
"$STAT" --json --watch 0.1 --count 3 2>/dev/null | python3 -c '
import json, sys
dec, text, docs = json.JSONDecoder(), sys.stdin.read(), 0
i = 0
while text[i:].strip():
    while text[i].isspace():
        i += 1
    _, i = dec.raw_decode(text, i)
    docs += 1
assert docs == 3, docs' || fail "watch --json: three documents"
# on a terminal (a pty from python3): alternate screen in, clear and home per frame, out
# again; the same when SIGTERM or SIGINT ends it
python3 - "$STAT" "$(dirname "$0")" <<'PYEOF' || fail "watch on a terminal"
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from ptyrun import run as pty_run

def run(args, sig=None):
    out, st = pty_run([sys.argv[1]] + args, when=b"PID", sig=sig)  # PID: the table's head
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, st
    assert out.startswith(b"\x1b[?1049h"), out[:40]
    assert out.rstrip(b"\r\n").endswith(b"\x1b[?1049l"), out[-40:]
    return out

assert run(["--watch", "0.1", "--count", "2"]).count(b"\x1b[H\x1b[2J") == 2
run(["--watch", "10"], signal.SIGTERM)
run(["--watch", "10"], signal.SIGINT)
PYEOF

# release: acked by the busy writer, timed out by the idle one
"$STAT" --release "$WPID" >"$D/rel" || fail "release exit status"
cat "$D/rel"
grep -q "^pid $WPID (stat_writer) released its cache: request 1 done after [0-9.]* ms, [0-9.]* [KMG]\?i\?B handed back$" "$D/rel" ||
	fail "release text"
if "$STAT" --release "$IPID" --timeout 0.3 >"$D/rel2"; then fail "idle release should exit 1"; fi
cat "$D/rel2"
grep -q "^pid $IPID (stat_writer) did not answer release request 1 within 0.3 s" "$D/rel2" || fail "idle release text"
# every process: the busy one answers, the two idle ones do not; the waits run together
# (one after the other they would take 2 s)
t0=$(date +%s%N)
if "$STAT" --release --timeout 1 >"$D/relall"; then fail "release of all with idle ones should exit 1"; fi
t1=$(date +%s%N)
cat "$D/relall"
grep -q "^pid $WPID (stat_writer) released its cache: request 2 done after" "$D/relall" || fail "release all: busy"
grep -q "^pid $IPID (stat_writer) did not answer release request 2 within 1.0 s" "$D/relall" || fail "release all: idle"
grep -q "^pid $I2PID (stat_writer) did not answer release request 1 within 1.0 s" "$D/relall" || fail "release all: idle 2"
grep -q "^asked 3 processes: 1 answered, [0-9.]* [KMG]\?i\?B handed back in all$" "$D/relall" || fail "release all: summary"
[ $(((t1 - t0) / 1000000)) -lt 1900 ] || fail "release all took $(((t1 - t0) / 1000000)) ms: the waits were not concurrent"
kill -9 "$I2PID"
wait "$I2PID" 2>/dev/null || true
helper_done "$I2PID"
rm "$GPUPOOL_SHM_DIR/gpupool.$I2PID" # --clean is tested with the other idle writer below

# clean: the killed idle writer's page and the junk file go, the live page stays
kill -9 "$IPID"
wait "$IPID" 2>/dev/null || true
"$STAT" >"$D/gone" 2>/dev/null || fail "table exit status with a gone process"
cat "$D/gone"
grep -q "^  [-01] *$IPID $me *stat_writer .* gone$" "$D/gone" || fail "gone row"
grep -q "^1 process gone without removing its page (gpupool-stat --clean removes it)$" "$D/gone" || fail "gone line"
"$STAT" --clean >"$D/clean" 2>/dev/null || fail "clean exit status"
cat "$D/clean"
grep -q "removed gpupool.$IPID: pid $IPID is gone" "$D/clean" || fail "clean idle page"
grep -q "removed gpupool.4000005" "$D/clean" || fail "clean junk"
[ ! -e "$GPUPOOL_SHM_DIR/gpupool.$IPID" ] || fail "stale page still there"
[ -e "$GPUPOOL_SHM_DIR/gpupool.$WPID" ] || fail "live page removed"
helper_done "$IPID"

# an allocation that waits for memory (the wait queue's figures, written by the writer):
# WAITING in the table (bytes and how long, the row kept in 80 columns before USED), in the
# GPU lines, the PID view, JSON and Prometheus
"$WRITER" 500 waiting >"$D/waiting.out" 2>/dev/null &
XPID=$!
HELPERS="$HELPERS $XPID"
wait_ready waiting
"$STAT" >"$D/wt" 2>/dev/null || fail "waiting: table exit status"
cat "$D/wt"
grep -q "^GPU  NAME  *MEMORY  *FREE  *GPUPOOL  *IDLE  *WAITING  *PROCS$" "$D/wt" || fail "waiting: GPU header"
grep -q "^  1  fake GPU .*  1.0 GiB  *2$" "$D/wt" || fail "waiting: GPU 1's line"
grep -q "^GPU  *PID USER  *COMMAND  *HELD  *IDLE  *WAITING  STATE$" "$D/wt" || fail "waiting: table header in 80 columns"
grep -q "^  1 *$XPID $me *stat_writer .*  1.0 GiB [0-9]* s  live$" "$D/wt" || fail "waiting: the row"
grep -q "^  0 *$XPID $me *stat_writer .*  -  live$" "$D/wt" || fail "waiting: the row of the device that does not wait"
"$STAT" "$XPID" | grep -q "^  waiting for 1.0 GiB since [0-9-]* [0-9:]* ([0-9]* s ago)$" || fail "waiting: PID view"
"$STAT" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
p, = [p for p in d["processes"] if p["pid"] == '"$XPID"']
v = p["devices"][1]
assert v["waiting_bytes"] == 1 << 30 and v["waits"] == 1 and v["wait_started_ns"] > 0, v
assert [g["waiting_bytes"] for g in d["gpus"]] == [0, 1 << 30], d["gpus"]' || fail "waiting: JSON"
"$STAT" --prometheus >"$D/wprom"
grep -q "^gpupool_waiting_bytes{pid=\"$XPID\",comm=\"stat_writer\",user=\"$me\",device=\"1\",UUID=\"GPU-[0-9a-f-]*\"} 1073741824$" "$D/wprom" ||
	fail "waiting: prometheus"
grep -q '^gpupool_gpu_waiting_bytes{UUID="GPU-6770706f-6f6c-7465-7374-000000000001"} 1073741824$' "$D/wprom" ||
	fail "waiting: prometheus GPU"
grep -q "^gpupool_wait_started_timestamp_seconds{pid=\"$XPID\",.*device=\"1\".*} [0-9]*\.[0-9]*$" "$D/wprom" ||
	fail "waiting: prometheus wait start"
kill -TERM "$XPID"
wait "$XPID" || true
helper_done "$XPID"

# normal exit: the exit report, page unlinked
kill -TERM "$WPID"
wait "$WPID" || fail "writer exit status"
cat "$D/w.err"
grep -q "report for pid $WPID (stat_writer)" "$D/w.err" || fail "exit report"
grep -q "driver calls saved" "$D/w.err" || fail "exit report content"
# the figures of the reclaim above, and the memory outside the pools on device 1
grep -q "^  unpooled  *512.0 MiB  *256.0 MiB$" "$D/w.err" || fail "exit report: unpooled"
grep -q "^    vmm  *512.0 MiB  *256.0 MiB$" "$D/w.err" || fail "exit report: unpooled by kind"
grep -q "^  reclaims served 1, refused 0: gave 2.0 GiB; framework caches emptied 0$" "$D/w.err" || fail "exit report: served"
grep -q "^  reclaims asked 1, answered 1: received 2.0 GiB, waited 0.41 s$" "$D/w.err" || fail "exit report: asked"
grep -q "^  decay: 3 segments, 1.0 GiB given back after sitting unused$" "$D/w.err" || fail "exit report: decay"
[ "$(grep -c "^  reclaims asked" "$D/w.err")" -eq 1 ] || fail "exit report: a reclaim line for a device without one"
[ ! -e "$GPUPOOL_SHM_DIR/gpupool.$WPID" ] || fail "page not unlinked at exit"
helper_done "$WPID"
echo "stat_cli: all checks passed"
