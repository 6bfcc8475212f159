#!/usr/bin/env bash
# gpupool-stat on a GPU several users share, with real processes over the fake runtime's
# machine-wide device (FAKECUDA_MACHINE):
#   none        no process: one line, "no gpupool processes"; JSON an empty listing
#   own         a holder A (768 MiB taken and freed): its row under GPU 0 with USER, HELD and
#               IDLE counted afresh (A's release thread answers at once, not a second later)
#   other       as another user (root only: setpriv to nobody): A listed from its answer on
#               the channel, never from its page; JSON source "channel", null for what the
#               answer lacks; the PID view; no "skipped" line
#   stopped     A stopped: no answer within the listing's wait; A counted as skipped, and the
#               listing still quick
#   release     --release hands back what IDLE said
#   colour      on a terminal: colour; --no-color, NO_COLOR: none; piped: none
# Arguments: the preloaded library, e2e_reclaim (a holder), the page directory, gpupool-stat,
# python3.
. "$(dirname "$0")/e2e_lib.sh"
stat=$4 py=$5
export FAKECUDA_MACHINE=$dir/machine FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1
# a page directory like /dev/shm (sticky, everyone's), out of the build tree, whose folders
# another user may not cross
pdir=$(mktemp -d /tmp/gpupool-stat-users.XXXXXX)
TMPS="$TMPS $pdir"
chmod 1777 "$pdir"
export GPUPOOL_SHM_DIR=$pdir

# none
"$stat" >"$out" 2>"$err" || bad "none: exit status $?"
[ "$(cat "$out")" = "no gpupool processes" ] || bad "none: not the one line"
[ ! -s "$err" ] || bad "none: a line on stderr"
"$stat" --json | "$py" -c 'import json,sys; d=json.load(sys.stdin); assert d["processes"] == [] and d["gpus"] == []' ||
	bad "none: JSON"

# own
LD_PRELOAD=$preload GPUPOOL_REPORT=none "$prog" hold 768 60 >"$dir/a.out" 2>"$dir/a.err" &
a=$!
for _ in $(seq 200); do grep -q ready "$dir/a.out" && break; sleep 0.05; done
grep -q ready "$dir/a.out" || bad "holder did not start"
"$stat" >"$out" 2>"$err" || bad "own: exit status $?"
grep -Eq "^  0  fake GPU +1\.0 GiB +256\.0 MiB +768\.0 MiB +768\.0 MiB +1$" "$out" || bad "own: the GPU line"
grep -Eq "^  0 +$a $(id -un) +e2e_reclaim +0 +768\.0 MiB +0 B +768\.0 MiB  live$" "$out" || bad "own: A's row"

# other
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	asnobody "$stat" >"$out" 2>"$err"
	rc=$?
	if [ $rc = 126 ] || [ $rc = 127 ]; then
		echo "SKIP other, stopped: nobody cannot run gpupool-stat here ($rc)"
	else
		[ $rc = 0 ] || bad "other: exit status $rc"
		grep -Eq "^  0 +$a root +e2e_reclaim +0 +768\.0 MiB +0 B +768\.0 MiB  live$" "$out" || bad "other: A's row"
		grep -Eq "^  0  fake GPU +1\.0 GiB +256\.0 MiB +768\.0 MiB +768\.0 MiB +1$" "$out" || bad "other: the GPU line"
		[ ! -s "$err" ] || bad "other: a line on stderr (A answered: nothing was left out)"
		asnobody "$stat" --json >"$out" 2>"$err" || bad "other: --json exit status"
		"$py" - "$out" "$a" <<'EOF' || bad "other: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
p, = [p for p in d["processes"] if p["pid"] == int(sys.argv[2])]
assert (p["source"], p["uid"], p["user"], p["comm"]) == ("channel", 0, "root", "e2e_reclaim"), p
assert p["release_request"] is None, p
v, = p["devices"]
assert v["reserved_bytes"] == v["releasable_bytes"] == 768 << 20 and v["allocated_bytes"] == 0, v
assert v["allocs"] is None and v["reserved_bytes_peak"] is None, v
assert v["device_name"] == "fake GPU" and v["device_total_bytes"] == 1 << 30, v
assert d["skipped"]["other_user"] == 0, d["skipped"]
EOF
		asnobody "$stat" "$a" >"$out" 2>"$err" || bad "other: PID view exit status"
		grep -q "^pid $a  command e2e_reclaim  user root  live  devices 1  started " "$out" || bad "other: PID view's first line"
		grep -q "^another user's process: its answer on the channel" "$out" || bad "other: PID view says where its figures come from"
		grep -Eq "^  releasable_bytes +805306368 \(768\.0 MiB\) +-$" "$out" || bad "other: PID view's idle bytes"

		# stopped: no answer; A is skipped as another user's page, and the wait is bounded
		kill -STOP $a
		t0=$(date +%s%N)
		asnobody "$stat" >"$out" 2>"$err" || bad "stopped: exit status"
		t1=$(date +%s%N)
		kill -CONT $a
		grep -q " $a " "$out" && bad "stopped: A listed without an answer"
		grep -q "^gpupool-stat: skipped 1 page: owned by another user" "$err" || bad "stopped: the skip line"
		[ $(((t1 - t0) / 1000000)) -lt 2000 ] || bad "stopped: the listing took $(((t1 - t0) / 1000000)) ms"
	fi
else
	echo "SKIP other, stopped: not root"
fi

# release: what --release hands back is what IDLE said (768 MiB), and a listing right after
# shows the memory back, FREE included: the pool changed, so its answer looks again
"$stat" >"$out" 2>"$err"
grep -Eq "^  0 +$a $(id -un) +e2e_reclaim +0 +768\.0 MiB +0 B +768\.0 MiB  live$" "$out" || bad "release: A's row before"
"$stat" --release "$a" >"$dir/rel" 2>"$err" || bad "release: exit status $?"
"$stat" >"$out" 2>"$err"
grep -q "^pid $a (e2e_reclaim) released its cache: request 1 done after [0-9.]* ms, 768.0 MiB handed back$" "$dir/rel" ||
	bad "release: not what IDLE said"
grep -Eq "^  0 +$a $(id -un) +e2e_reclaim +0 +0 B +0 B +0 B  live$" "$out" || bad "release: A's row after"
grep -Eq "^  0  fake GPU +1\.0 GiB +1\.0 GiB +0 B +0 B +1$" "$out" || bad "release: the GPU line after (FREE not fresh)"

# colour: on a terminal (a pty), none with --no-color or NO_COLOR, none when piped
"$stat" | grep -q "$(printf '\033')" && bad "colour: escape codes in a pipe"
"$py" - "$stat" "$(dirname "$0")/../tools" <<'EOF' || bad "colour on a terminal"
import sys
sys.path.insert(0, sys.argv[2])
from ptyrun import run as pty_run

def run(args, env=None):
    return pty_run([sys.argv[1]] + args, env)[0]

assert b"\x1b[1mGPU " in run([]), "no bold head"
assert b"\x1b[" not in run(["--no-color"]), "--no-color"
assert b"\x1b[" not in run([], {"NO_COLOR": "1"}), "NO_COLOR"
assert b"\x1b[1mGPU " in run([], {"NO_COLOR": ""}), "an empty NO_COLOR turns nothing off"
EOF
kill -INT $a
wait $a
[ $fail = 0 ] && echo "stat-users: all checks pass"
exit $fail
