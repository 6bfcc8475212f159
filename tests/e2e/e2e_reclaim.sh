#!/usr/bin/env bash
# Idle memory goes where it is needed (docs/sharing.md), between processes on the fake
# runtime's machine-wide device: one capacity of 1 GiB that every process draws from
# (FAKECUDA_MACHINE). Each scenario: a holder A takes memory and frees it (or keeps it in a
# framework's cache), an asker B then needs more than the device has left.
#   reclaim      A's idle segments go to B; the counters on both sides
#   off          reclaim:0 in B: out of memory, A gives nothing
#   decay        decay_ms:300: A's idle memory goes back by itself; B needs no reclaim
#   stopped      A stopped (SIGSTOP): B's wait is bounded; A killed with -9: its memory returns
#   busy         A allocating all the while still gives its idle segments
#   user         B another user (as root only): A answers it
#   junk         datagrams of every wrong shape on A's socket: A stays, and answers B
#   framework    A's memory in a framework's cache (a stand-in for PyTorch) goes to B
#   gil          A keeps the interpreter's lock past B's wait: nothing emptied for nobody
#   raises       the framework's empty_cache raises: caught, named, A lives on, B fails cleanly
#   deep         A raised its recursion limit and its framework runs 2,500-deep Python when
#                emptied: it survives (the framework's thread has a Python thread's stack)
#   shutdown     A's framework is still emptying (a slow empty_cache) when A's interpreter
#                ends: A exits at once, never waiting for an answer that cannot come
#   flood        another process sends 20,000 queries as fast as it can: A answers at most
#                its per-process budget, and still serves B
# Arguments: the preloaded library, e2e_reclaim, the page directory, python3.
. "$(dirname "$0")/e2e_lib.sh"
. "$(dirname "$0")/e2e_procs.sh"
py=$4
here=$(cd "$(dirname "$0")" && pwd)
pdir=$dir # the page directory of A and B
export FAKECUDA_MACHINE=$dir/machine FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1
apid=
a_out=$(mktemp) a_err=$(mktemp)
TMPS="$TMPS $a_out $a_err"
# bad, with the holder's output too
abad() { bad "$@"; echo "--- holder's stdout"; tail -n 20 "$a_out"; echo "--- holder's stderr"; tail -n 30 "$a_err"; }

# start_a ENV... -- CMD...: A in the background, with the library, until it prints "ready"
start_a() {
	wait_empty
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	: >"$a_out" # before the start: the last holder's "ready" must not be read as this one's
	env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="$pdir" GPUPOOL_LOG=info "${envs[@]}" "$@" >"$a_out" 2>"$a_err" &
	apid=$!
	for _ in $(seq 200); do
		grep -q '^ready' "$a_out" && return 0
		kill -0 $apid 2>/dev/null || break
		sleep 0.05
	done
	bad "holder did not start"
	return 1
}
# stop_a: SIGINT, A's exit report written; its exit status in $arc
stop_a() {
	kill -INT $apid 2>/dev/null
	wait $apid
	arc=$?
}
# ask MIB ENV...: B, with the library, its report in $dir/b.json; status in $brc
ask() {
	local mib=$1
	shift
	rm -f "$dir/b.json"
	env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="$pdir" GPUPOOL_LOG=info GPUPOOL_REPORT="$dir/b.json" "$@" \
		"$prog" ask "$mib" >"$out" 2>"$err"
	brc=$?
}

# reclaim: 768 MiB idle in A; B needs 512 MiB, of which the device has 256
start_a GPUPOOL_REPORT="$dir/a.json" -- "$prog" hold 768 && {
	ask 512
	[ $brc = 0 ] || bad "reclaim: B failed ($brc)"
	grep -q "reclaim: device 0 needed 512.0 MiB.*pid $apid gave" "$err" || bad "reclaim: B's info line"
	[ "$(json "$dir/b.json" "d['reclaim_asks'] >= 1 and d['reclaim_answers'] == 1 and d['reclaim_received_bytes'] >= 256 << 20 and d['reclaim_wait_ns'] > 0 and d['ooms'] == 0")" = True ] ||
		bad "reclaim: B's counters (an allocation a reclaim served is no out of memory)"
	stop_a
	[ $arc = 0 ] || abad "reclaim: A's exit status $arc"
	grep -q "reclaim: gave .* on device 0 to pid" "$a_err" || bad "reclaim: A's info line"
	[ "$(json "$dir/a.json" "d['reclaims_served'] == 1 and d['reclaim_given_bytes'] >= 256 << 20 and d['reclaim_given_bytes'] < 768 << 20")" = True ] ||
		bad "reclaim: A's counters (it gives what B lacks, not all it has)"
}

# off: the same, B with reclaim:0
start_a GPUPOOL_REPORT="$dir/a.json" -- "$prog" hold 768 && {
	ask 512 GPUPOOL_CONF=reclaim:0
	[ $brc = 3 ] || abad "off: B should fail with out of memory ($brc)"
	[ "$(json "$dir/b.json" "d['ooms']")" = 1 ] || bad "off: B's out of memory counted once"
	stop_a
	[ "$(json "$dir/a.json" "d['reclaims_served']")" = 0 ] || bad "off: A gave"
}

# decay: A's idle segments go back by themselves within decay_ms and a pass
start_a GPUPOOL_REPORT="$dir/a.json" GPUPOOL_CONF=decay_ms:300 -- "$prog" hold 768 && {
	sleep 2.5
	ask 512 GPUPOOL_CONF=reclaim:0
	[ $brc = 0 ] || bad "decay: B failed ($brc)"
	stop_a
	[ "$(json "$dir/a.json" "d['decayed_bytes'] == 768 << 20 and d['decay_releases'] == 12 and d['reserved_bytes'] == 0")" = True ] ||
		bad "decay: A's counters"
}

# stopped: A cannot answer; B waits a bounded time (reclaim_wait_ms 1000), then fails
start_a -- "$prog" hold 768 && {
	kill -STOP $apid
	t0=$(date +%s%N)
	ask 512 GPUPOOL_CONF=reclaim_wait_ms:1000
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ $brc = 3 ] || abad "stopped: B should fail ($brc)"
	[ $ms -lt 3000 ] || bad "stopped: B took $ms ms"
	# killed with -9 while stopped: its memory is the machine's again, and B needs no one
	kill -9 $apid
	wait $apid 2>/dev/null
	ask 512
	[ $brc = 0 ] || bad "killed: B failed after the holder was killed ($brc)"
}

# busy: A allocating all the while
start_a GPUPOOL_REPORT="$dir/a.json" -- "$prog" busy 768 && {
	ask 512
	[ $brc = 0 ] || bad "busy: B failed ($brc)"
	stop_a
	[ $arc = 0 ] || abad "busy: A's exit status $arc"
	grep -q "busy rounds=" "$a_out" || bad "busy: A did not allocate"
	served=$(json "$dir/a.json" "d['reclaims_served']")
	[ "$served" = 1 ] || abad "busy: A did not give once ($served times)"
}

# user: B is another user (root only: setpriv drops to nobody)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	# a page directory like /dev/shm (sticky, everyone's), out of the build tree, whose
	# folders another user may not cross
	pdir=$(mktemp -d /tmp/gpupool-reclaim-user.XXXXXX)
	TMPS="$TMPS $pdir"
	chmod 1777 "$pdir"
	FAKECUDA_MACHINE=$pdir/machine
	start_a GPUPOOL_REPORT="$dir/a.json" -- "$prog" hold 768 && {
		chmod 666 "$FAKECUDA_MACHINE"
		setpriv --reuid=65534 --regid=65534 --clear-groups env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="$pdir" \
			GPUPOOL_LOG=info GPUPOOL_REPORT=none "$prog" ask 512 >"$out" 2>"$err"
		brc=$?
		if [ $brc = 126 ] || [ $brc = 127 ]; then
			echo "SKIP user: nobody cannot run the test program here ($brc)"
		else
			[ $brc = 0 ] || bad "user: B (uid 65534) failed ($brc)"
			grep -q "to pid [0-9]* (uid 65534)" "$a_err" || bad "user: A's line names the other user"
		fi
		stop_a
	}
	pdir=$dir
	FAKECUDA_MACHINE=$dir/machine
else
	echo "SKIP user: not root"
fi

# junk: every wrong shape on A's socket, then a real request
start_a GPUPOOL_REPORT="$dir/a.json" -- "$prog" hold 768 && {
	"$py" - "$apid" <<'EOF' || bad "junk: the sender failed"
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
name = b"\0gpupool.%d.%d" % (os.stat("/proc/self/ns/pid").st_ino, int(sys.argv[1]))
F = "=IHHQ16sQQIIQ208x"  # share.h's struct gp_share_msg, version 2 (its status, 208 bytes, zero)
good = struct.pack(F, 0x48535047, 2, 8, 1, b"\0" * 16, 1 << 20, 1 << 62, 0, 0, 0)
for junk in (b"", b"x", good[:-1], good + b"y", b"\xff" * len(good),
             struct.pack(F, 0x48535047, 1, 8, 1, b"\0" * 16, 1, 0, 0, 0, 0),   # version 1
             struct.pack(F, 0x48535047, 2, 4, 1, b"\0" * 16, 1, 0, 0, 0, 0),   # version 1's ask
             struct.pack(F, 0x48535047, 2, 99, 1, b"\0" * 16, 1, 0, 0, 0, 0)):
    for _ in range(30):
        s.sendto(junk, name)
s.sendto(good, name)  # a wait on a GPU A does not have: nothing to answer
EOF
	sleep 0.3
	kill -0 $apid || bad "junk: A died"
	ask 512
	[ $brc = 0 ] || bad "junk: B failed after the junk ($brc)"
	stop_a
	[ $arc = 0 ] || abad "junk: A's exit status $arc"
}

# The Python holders: not the leak checker's (the interpreter keeps memory at exit, and
# LeakSanitizer's tracer is not reliable in a process of its threads under a preloaded ASan);
# not under ThreadSanitizer at all (an interpreter built without it does not start with a
# library that needs its runtime preloaded): those scenarios run in the other builds
pyasan=ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
if ldd "${preload##*:}" 2>/dev/null | grep -q libtsan; then
	echo "SKIP forged, liar, framework, gil, raises: Python holders under ThreadSanitizer"
	[ $fail = 0 ] && echo "reclaim: all scenarios pass"
	exit $fail
fi

# forged: a claim to wait for more than the whole GPU (no allocation needs it), with a ticket
# from before any wait could begin, or for hours, gets nothing; A keeps its idle memory and its
# framework's cache, and says why in one line each
start_a GPUPOOL_REPORT="$dir/a.json" "$pyasan" PYTHONPATH="$here/reclaim_framework" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -- \
	"$py" "$here/reclaim_framework/hold.py" 256 && {
	"$py" - "$apid" <<'EOF' || bad "forged: A gave memory to an ask for 1 TiB"
import os, socket, struct, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(b"")
s.settimeout(1)
h = 2166136261  # the fake device's (fm_uuid: FNV-1a of the machine's path)
for c in os.environ["FAKECUDA_MACHINE"].encode():
    h = ((h ^ c) * 16777619) & 0xffffffff
uuid = b"fakegpu\0" + h.to_bytes(4, "big") + b"\0\0\0\1"
F = "=IHHQ16sQQIIQ208x"  # struct gp_share_msg, version 2 (test_share checks its size)
now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
to = b"\0gpupool.%d.%d" % (os.stat("/proc/self/ns/pid").st_ino, int(sys.argv[1]))
s.sendto(struct.pack(F, 0x48535047, 2, 8, now, uuid, 1 << 40, now + 10**10, 0, 0, 0), to)          # 1 TiB
s.sendto(struct.pack(F, 0x48535047, 2, 8, now - 10**12, uuid, 1 << 20, now + 10**10, 0, 0, 0), to)  # an old ticket
s.sendto(struct.pack(F, 0x48535047, 2, 8, now, uuid, 1 << 20, now + 10**13, 0, 0, 0), to)          # hours
try:
    s.recv(512)
    sys.exit(1)  # answered: it took one of them for a wait
except socket.timeout:
    sys.exit(0)
EOF
	stop_a
	[ "$(grep -c "claims to wait on device 0 with a ticket, an end or a size no wait can have" "$a_err")" = 3 ] ||
		bad "forged: A's line for each false claim"
	grep -q "emptied=0 cached=" "$a_out" || bad "forged: A's framework cache was emptied"
}

# liar: a peer (no gpupool: a socket of the library's name) that says it holds 16 EiB and gave
# 16 EiB: B, short because a process outside gpupool keeps 768 MiB in use, waits its bound
# and fails as it would have, and counts nothing received
env -u LD_PRELOAD GPUPOOL_DISABLE=1 "$prog" keep 768 >"$dir/keep.out" 2>&1 &
kpid=$!
for _ in $(seq 100); do grep -q ready "$dir/keep.out" 2>/dev/null && break; sleep 0.05; done
"$py" - >"$dir/liar.out" <<'EOF' &
import socket, struct, os
F = "=IHHQ16sQQIIQ208x"  # struct gp_share_msg, version 2 (test_share checks its size)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(b"\0gpupool.%d.%d" % (os.stat("/proc/self/ns/pid").st_ino, os.getpid()))
print("ready", flush=True)
while True:
    m, addr = s.recvfrom(512)
    mg, v, k, i, u, b, h, f, p, fl = struct.unpack(F, m)
    if k == 8:  # a WAIT: heard, holding everything, and a gift of everything
        s.sendto(struct.pack(F, mg, 2, 9, i, u, (1 << 64) - 1, (1 << 64) - 1, 0, 0, 0), addr)
        s.sendto(struct.pack(F, mg, 2, 10, i, u, (1 << 64) - 1, 0, 0, 0, 0), addr)
EOF
lpid=$!
for _ in $(seq 100); do grep -q ready "$dir/liar.out" 2>/dev/null && break; sleep 0.05; done
ask 512 GPUPOOL_CONF=reclaim_wait_ms:1000
[ $brc = 3 ] || bad "liar: B should fail with out of memory ($brc)"
[ "$(json "$dir/b.json" "d['reclaim_received_bytes'] == 0 and d['reclaim_answers'] == 0")" = True ] ||
	bad "liar: B counted what the liar said"
kill $lpid $kpid
wait $lpid $kpid 2>/dev/null

# framework: A's memory in a framework's cache above gpupool
start_a GPUPOOL_REPORT="$dir/a.json" "$pyasan" PYTHONPATH="$here/reclaim_framework" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -- \
	"$py" "$here/reclaim_framework/hold.py" 768 && {
	ask 512
	[ $brc = 0 ] || bad "framework: B failed ($brc)"
	stop_a
	grep -q "emptied=1 cached=0" "$a_out" || bad "framework: the cache was not emptied"
	grep -q "framework caches emptied" "$a_err" || bad "framework: A's info line"
	[ "$(json "$dir/a.json" "d['framework_empties'] == 1 and d['reclaim_given_bytes'] >= 256 << 20")" = True ] ||
		bad "framework: A's counters"
}

# gil: A's program keeps the interpreter's lock for 4 s; B gives up after 2 s; A's framework
# thread, once it has the lock, finds B gone from the line and empties nothing
start_a GPUPOOL_REPORT="$dir/a.json" "$pyasan" RECLAIM_HOLD_GIL=4 PYTHONPATH="$here/reclaim_framework" \
	LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -- "$py" "$here/reclaim_framework/hold.py" 768 && {
	ask 512 GPUPOOL_CONF=reclaim_wait_ms:2000
	[ $brc = 3 ] || bad "gil: B should fail with out of memory ($brc)"
	sleep 3
	stop_a
	grep -q "emptied=0 cached=12" "$a_out" || bad "gil: A emptied its cache for an asker long gone"
}

# raises: empty_cache raises; named in A's line, never printed as a traceback; B fails
start_a GPUPOOL_REPORT="$dir/a.json" "$pyasan" RECLAIM_TORCH_RAISE=1 PYTHONPATH="$here/reclaim_framework" \
	LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -- "$py" "$here/reclaim_framework/hold.py" 768 && {
	ask 512 GPUPOOL_CONF=reclaim_wait_ms:1000
	[ $brc = 3 ] || bad "raises: B should fail with out of memory ($brc)"
	kill -0 $apid || bad "raises: A died"
	stop_a
	[ $arc = 0 ] || abad "raises: A's exit status $arc"
	grep -q "torch: RuntimeError: empty_cache failed on purpose" "$a_err" || bad "raises: A's line names the error"
	! grep -q Traceback "$a_err" || bad "raises: a traceback was printed"
	grep -q "emptied=0 cached=12" "$a_out" || bad "raises: the cache changed"
}

# deep: Python 2,500 deep on the thread that empties the cache (a 256 KiB stack ended it in SIGSEGV)
start_a GPUPOOL_REPORT="$dir/a.json" "$pyasan" RECLAIM_RECURSION=100000 RECLAIM_EMPTY_DEEP=2500 \
	PYTHONPATH="$here/reclaim_framework" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -- \
	"$py" "$here/reclaim_framework/hold.py" 768 && {
	ask 512
	[ $brc = 0 ] || abad "deep: B failed ($brc)"
	kill -0 $apid || abad "deep: A died"
	stop_a
	[ $arc = 0 ] || abad "deep: A's exit status $arc"
	grep -q "emptied=1 cached=0" "$a_out" || abad "deep: the cache was not emptied"
}

# shutdown: the framework's thread is inside a 3 s empty_cache when A's interpreter ends
start_a "$pyasan" RECLAIM_EMPTY_SLEEP=3 RECLAIM_EXIT_MARK=1 PYTHONPATH="$here/reclaim_framework" \
	LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -- "$py" "$here/reclaim_framework/hold.py" 768 && {
	ask 512 GPUPOOL_CONF=reclaim_wait_ms:500
	kill -INT $apid
	t0=$(date +%s%N)
	wait $apid
	arc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ $arc = 0 ] || abad "shutdown: A's exit status $arc"
	# the interpreter's end, then exit: nothing waits for the framework's thread (it waited 2 s)
	[ $ms -lt 1500 ] || abad "shutdown: A took $ms ms to exit with its framework's thread inside Python"
}

# flood: 20,000 queries from one process in one second; A answers at most its budget for one
# process (200 a second, 64 at once) and still serves B
start_a "$pyasan" GPUPOOL_REPORT="$dir/a.json" -- "$prog" hold 768 && {
	"$py" - "$apid" >"$dir/flood.out" <<'EOF' || bad "flood: the sender failed"
import os, socket, struct, sys, time
F = "=IHHQ16sQQIIQ208x"  # struct gp_share_msg, version 2 (test_share checks its size)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(b"")
s.setblocking(False)
to = b"\0gpupool.%d.%d" % (os.stat("/proc/self/ns/pid").st_ino, int(sys.argv[1]))
h = 2166136261  # the fake device's (fm_uuid: FNV-1a of the machine's path)
for c in os.environ["FAKECUDA_MACHINE"].encode():
    h = ((h ^ c) * 16777619) & 0xffffffff
uuid = b"fakegpu\0" + h.to_bytes(4, "big") + b"\0\0\0\1"
sent = answers = 0
end = time.monotonic() + 1
while time.monotonic() < end and sent < 20000:
    try:
        s.sendto(struct.pack(F, 0x48535047, 2, 2, sent, uuid, 1, 0, 0, 0, 0), to)
        sent += 1
    except BlockingIOError:
        pass
    try:
        while True:
            s.recv(512)
            answers += 1
    except BlockingIOError:
        pass
end = time.monotonic() + 1
while time.monotonic() < end:
    try:
        s.recv(512)
        answers += 1
    except BlockingIOError:
        time.sleep(0.01)
print("sent=%d answers=%d" % (sent, answers))
EOF
	answers=$(sed -n 's/.*answers=\([0-9]*\).*/\1/p' "$dir/flood.out")
	# at most 64 at once and 200 a second over the two seconds
	[ -n "$answers" ] && [ "$answers" -le 500 ] || { bad "flood: A answered ${answers:-?} queries of one process"; cat "$dir/flood.out"; }
	ask 512
	[ $brc = 0 ] || abad "flood: B failed after the flood ($brc)"
	stop_a
}

[ $fail = 0 ] && echo "reclaim: all scenarios pass"
exit $fail
