#!/usr/bin/env bash
# Waiting for memory (docs/sharing.md, "Waiting for memory"), between processes on the fake
# runtime's machine-wide device of 1 GiB (FAKECUDA_MACHINE). Each scenario starts on an empty
# device.
#   wait       A keeps 768 MiB in use and frees it after 0.5 s: B, short of 512 MiB, waits and
#              is woken by what A frees (not refused, not polled: within 0.25 s of the free)
#   alone      nobody else holds anything: B's out of memory comes at once, as natively
#   fair       B then C wait for 512 MiB each behind A's 768 MiB in use, and D allocates 64 MiB
#              pieces all the while: B is served first, then C; D took nothing B needed
#   holdwait   P1 and P2 each hold 384 MiB in use and ask for 384 more: the later ticket (P2)
#              ends in out of memory soon (hold and wait), P1 is served once P2 has freed
#   floor      A keeps 768 MiB idle with reserve:512M: B gets only what is above the floor;
#              a second floor that would pass the GPU is refused with one line; a floor larger
#              than the GPU too
#   overlap    four askers of 192 MiB at once beside a holder of 896 MiB idle: all served
#   junk       300 files named like pages of live processes in the page directory: B still
#              finds A (peers are the library's listening sockets)
#   silent     a peer that hears every wait and never answers: B is served by the honest holder
#              without waiting for it (under 2 s, where a stall would cost it its 10 s)
#   gifts      eight rounds: B credits what A gave in every one
# Arguments: the preloaded library, e2e_reclaim, the page directory, python3.
. "$(dirname "$0")/e2e_lib.sh"
. "$(dirname "$0")/e2e_procs.sh"
py=$4
export FAKECUDA_MACHINE=$dir/machine FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1


# wait
wait_empty
WAITREADY=1 bg a GPUPOOL_REPORT="$dir/a.json" -- keep 768 0.5 && {
	t0=$(date +%s%N)
	bg b GPUPOOL_REPORT="$dir/b.json" -- ask 512
	wait $pid_b
	brc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ $brc = 0 ] || { bad "wait: B failed ($brc)"; show a b; }
	grep -q freed "$dir/a.out" || bad "wait: A did not free"
	# B waited for A's free at 0.5 s, and no longer than a look round after it
	[ $ms -ge 400 ] && [ $ms -lt 3000 ] || { bad "wait: B took $ms ms"; show a b; }
	grep -q "reclaim: device 0 needed 512.0 MiB" "$dir/b.err" || bad "wait: B's line"
	stop $pid_a
}

# alone: nothing to wait for
wait_empty
env -u LD_PRELOAD GPUPOOL_DISABLE=1 "$prog" keep 768 >"$dir/k.out" 2>&1 &
kpid=$!
for _ in $(seq 100); do grep -q ready "$dir/k.out" 2>/dev/null && break; sleep 0.05; done
t0=$(date +%s%N)
bg b -- ask 512
wait $pid_b
brc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $brc = 3 ] || { bad "alone: B should fail with out of memory ($brc)"; show b; }
[ $ms -lt 1500 ] || bad "alone: B waited $ms ms for nobody"
stop $kpid

# fair
wait_empty
WAITREADY=1 bg a -- keep 768 1.0 && WAITREADY=1 bg b -- holdask 0 512 && WAITREADY=1 bg c -- holdask 0 512 && {
	# both started (a slow start, as under the sanitizers, cannot reorder them): B asks, then C
	kill -USR1 $pid_b
	sleep 0.2
	kill -USR1 $pid_c
	sleep 0.1
	bg d GPUPOOL_REPORT="$dir/d.json" -- churn 128 64 1.5 20
	wait $pid_b
	brc=$?
	wait $pid_c
	crc=$?
	wait $pid_d
	[ $brc = 0 ] && [ $crc = 0 ] || { bad "fair: B ($brc) and C ($crc) should both be served"; show a b c d; }
	b=$(secs b) c=$(secs c)
	# B began 0.2 s before C: B's end (b) no later than C's (0.2 + c), give or take a look
	"$py" -c "import sys; b, c = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if b <= 0.2 + c + 0.05 else 1)" "$b" "$c" ||
		{ bad "fair: B (first, ${b} s) should be served before C (${c} s, 0.2 s later)"; show b c; }
	stop $pid_a
}

# holdwait
wait_empty
WAITREADY=1 bg p1 -- holdask 384 384 && WAITREADY=1 bg p2 -- holdask 384 384 && {
	kill -USR1 $pid_p1
	sleep 0.1
	kill -USR1 $pid_p2
	wait $pid_p1
	r1=$?
	wait $pid_p2
	r2=$?
	[ $r1 = 0 ] || { bad "holdwait: P1 (first) should be served ($r1)"; show p1 p2; }
	[ $r2 = 3 ] || { bad "holdwait: P2 (later, holding memory) should end in out of memory ($r2)"; show p1 p2; }
	grep -q "hold and wait" "$dir/p2.err" || { bad "holdwait: P2's line"; show p2; }
	s2=$(secs p2)
	"$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 3 else 1)" "$s2" || bad "holdwait: P2 waited $s2 s"
}

# floor
wait_empty
WAITREADY=1 bg a GPUPOOL_CONF=reserve:512M GPUPOOL_REPORT="$dir/a.json" -- hold 768 && {
	bg b GPUPOOL_CONF=reclaim_wait_ms:1000 -- ask 640
	wait $pid_b
	brc=$?
	[ $brc = 3 ] || { bad "floor: B should not get what is under A's floor ($brc)"; show a b; }
	bg c GPUPOOL_CONF=reserve:600M -- hold 64
	sleep 1.5
	grep -q "reserve: 600.0 MiB on device 0 refused: the other processes on the GPU keep floors of 512.0 MiB" \
		"$dir/c.err" || { bad "floor: C's floor should be refused"; show c; }
	stop $pid_c $pid_a
	[ "$(json "$dir/a.json" "d['reserved_bytes_peak'] == 768 << 20 and d['reclaim_given_bytes'] <= 256 << 20")" = True ] ||
		{ bad "floor: A gave from under its floor"; show a; }
}
wait_empty
WAITREADY=1 bg e GPUPOOL_CONF=reserve:2G -- hold 64 && {
	sleep 1.5
	grep -q "reserve: 2.0 GiB on device 0 is more than the GPU's 1.0 GiB" "$dir/e.err" ||
		{ bad "floor: a floor larger than the GPU should be refused"; show e; }
	stop $pid_e
}

# overlap
wait_empty
WAITREADY=1 bg a -- hold 896 && {
	for k in 1 2 3 4; do bg "o$k" -- ask 192; done
	for k in 1 2 3 4; do
		eval "p=\$pid_o$k"
		wait "$p" || { bad "overlap: asker $k failed"; show a "o$k"; }
	done
	stop $pid_a
}

# junk
wait_empty
for i in $(seq 300); do : >"$dir/gpupool.$i"; done
WAITREADY=1 bg a -- hold 768 && {
	bg b -- ask 512
	wait $pid_b || { bad "junk: B failed beside 300 junk pages"; show a b; }
	grep -q "pid $pid_a gave" "$dir/b.err" || bad "junk: B's line names A"
	stop $pid_a
}
for i in $(seq 300); do rm -f "$dir/gpupool.$i"; done

# silent
wait_empty
"$py" - >"$dir/silent.out" <<'EOF' &
import os, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(b"\0gpupool.%d.%d" % (os.stat("/proc/self/ns/pid").st_ino, os.getpid()))
print("ready", flush=True)
while True:
    s.recvfrom(512)  # hears everything, answers nothing
EOF
spid=$!
for _ in $(seq 100); do grep -q ready "$dir/silent.out" 2>/dev/null && break; sleep 0.05; done
WAITREADY=1 bg a -- hold 768 && {
	bg b -- ask 512
	wait $pid_b || { bad "silent: B failed"; show a b; }
	s=$(secs b)
	# a peer that stalled B would cost it its whole wait (10 s); the fake's 512 MiB take
	# itself can take a few tenths under load (it fills host memory)
	"$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 2 else 1)" "$s" ||
		{ bad "silent: B took $s s beside a silent peer"; show b; }
	stop $pid_a
}
kill $spid
wait $spid 2>/dev/null

# gifts: counted in every round
for round in 1 2 3 4 5 6 7 8; do
	wait_empty
	WAITREADY=1 bg a -- hold 768 && {
		bg b GPUPOOL_REPORT="$dir/b.json" -- ask 512
		wait $pid_b || bad "gifts: round $round: B failed"
		[ "$(json "$dir/b.json" "d['reclaim_received_bytes'] >= 256 << 20 and d['reclaim_answers'] >= 1")" = True ] ||
			{ bad "gifts: round $round: B did not count A's gift"; show a b; }
		stop $pid_a
	}
done

[ $fail = 0 ] && echo "wait: all scenarios pass"
exit $fail
