# Sourced after e2e_lib.sh by the e2e shell tests whose scenarios run several processes on the
# fake's machine-wide device (FAKECUDA_MACHINE): each process's output in $dir/NAME.out and
# .err, its pid in pid_NAME. Uses $prog, $preload, $dir, and $pdir (the page directory, $dir
# unless set) and $py (python3) where named.

# The device empty again: the last scenario's processes have ended (a process's exit, its
# handlers included, can outlast its signal under load). Asked of the fake alone, no library.
wait_empty() {
	for _ in $(seq 100); do
		env -u LD_PRELOAD GPUPOOL_DISABLE=1 "$prog" ask 960 >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "note: the device did not empty within 10 s"
}
# ready NAME: NAME printed "ready" within 10 s (else bad)
ready() {
	for _ in $(seq 200); do
		grep -q '^ready' "$dir/$1.out" && return 0
		sleep 0.05
	done
	bad "$1 did not start"
	return 1
}
# bg NAME ENV... -- ARGS...: $prog ARGS with the library (GPUPOOL_LOG=info, then ENV) in the
# background; waits for its "ready" when WAITREADY=1
bg() {
	local name=$1
	shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	: >"$dir/$name.out" # before the start: the last one's "ready" must not be read as this one's
	env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="${pdir:-$dir}" GPUPOOL_LOG=info "${envs[@]}" "$prog" "$@" \
		>"$dir/$name.out" 2>"$dir/$name.err" &
	eval "pid_$name=$!"
	[ "${WAITREADY:-0}" = 1 ] || return 0
	ready "$name"
}
# show NAME...: the end of each one's output
show() { for f in "$@"; do echo "--- $f.out"; tail -n 5 "$dir/$f.out"; echo "--- $f.err"; tail -n 12 "$dir/$f.err"; done; }
# secs NAME: the seconds its allocation took (e2e_reclaim's "seconds=")
secs() { sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' "$dir/$1.out" | head -1; }
# stop PID...: ended with SIGINT (their exit report written), and waited for
stop() { for p in "$@"; do kill -INT "$p" 2>/dev/null; done; wait "$@" 2>/dev/null; }
# asks NAME: NAME (e2e_reclaim holdask) asks now (SIGUSR1); its exit status once it ended
asks() {
	local p
	eval "p=\$pid_$1"
	kill -USR1 "$p"
	wait "$p"
}
# gone PID...: ended (SIGTERM) and waited for, quietly
gone() { kill "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
# json REPORT EXPR: EXPR of the report's first process's first device (d), printed
json() { "$py" -c "import json,sys; d=json.load(open(sys.argv[1]))['processes'][0]['devices'][0]; print($2)" "$1"; }
# under SECONDS NAME: NAME's allocation took less than SECONDS
under() { "$py" -c "import sys; sys.exit(0 if float(sys.argv[2] or 99) < float(sys.argv[1]) else 1)" "$1" "$(secs "$2")"; }
