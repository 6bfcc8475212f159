#!/usr/bin/env bash
# A hostile neighbour on a shared GPU (docs/sharing.md, "Who may ask whom"), on the fake
# runtime's machine-wide device of 1 GiB (FAKECUDA_MACHINE): forged claims to wait, lying
# answers and floors (e2e_wait_hostile.py) cost the honest processes nothing they would not
# have paid alone. Each scenario starts on an empty device.
#   fill       8 processes with 32 claims each (1 byte) fill the line of a holder H (768 MiB
#              idle) and of V (64 MiB in use), from sockets that are no process's name: V,
#              short of 512 MiB, still waits in its own line and H still serves it
#   fill-user  the same from processes of another user (root only) that listen under their
#              names, have pages and say they wait: V still gets in, and H still serves it
#   head       a claim for 900 MiB told again and again with one ticket, from a socket that is
#              no process's name: V's growth of 200 MiB beside 960 MiB free is served at once
#   head-lost  the same (800 MiB) from a process that listens, has a page and says it waits: V,
#              asking behind it, is served once it has left the memory unused for a second
#              and lost its place; asked again, it never gets that place back
#   liar       a peer that answers every wait with "I hold 1 GiB" and never frees: V, short
#              because a process outside gpupool keeps 512 MiB in use, fails as soon as it
#              would without the liar (not after reclaim_wait_ms)
#   floor      a peer that answers the floor query with a floor of the whole GPU (holding
#              nothing, then claiming to hold 1 GiB): V keeps its reserve:512M
# Arguments: the preloaded library, e2e_reclaim, the page directory, python3.
. "$(dirname "$0")/e2e_lib.sh"
. "$(dirname "$0")/e2e_procs.sh"
py=$4
hostile=$(cd "$(dirname "$0")" && pwd)/e2e_wait_hostile.py
pdir=$dir
export FAKECUDA_MACHINE=$dir/machine FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1 GPUPOOL_REPORT=none
WAITREADY=1 # every bg waits for its "ready"

# hostile NAME [AS...] -- ARGS...: e2e_wait_hostile.py in the background (AS: a command to
# run it as another user), its pid in pid_NAME, once it printed "ready"
hostile() {
	local name=$1
	shift
	local as=()
	while [ "$1" != -- ]; do as+=("$1"); shift; done
	shift
	: >"$dir/$name.out"
	"${as[@]}" env GPUPOOL_SHM_DIR="$pdir" "$py" - "$@" <"$hostile" >"$dir/$name.out" 2>&1 &
	eval "pid_$name=$!"
	ready "$name"
}

# fill WHAT LISTEN [AS...]: H holds 768 MiB idle, V 64 MiB in use; the forgers (run by AS)
# fill both lines, then V asks for 512 MiB
fill() {
	local what=$1 listen=$2
	shift 2
	wait_empty
	bg h -- hold 768 && bg v -- holdask 64 512 && hostile f "$@" -- fill "$listen" "$pid_h" "$pid_v" && {
		asks v
		vrc=$?
		[ $vrc = 0 ] || { bad "$what: V should be served beside a line full of forged claims ($vrc)"; show h v; }
		# H gave to V: V's line names it, or (V's wait over before H's answer came, as
		# under ThreadSanitizer, V then served by its retry) H's line does
		grep -q "pid $pid_h gave" "$dir/v.err" || grep -q "to pid $pid_v " "$dir/h.err" ||
			{ bad "$what: H should have given to V"; show h v; }
	}
	gone $pid_f
	stop $pid_h
}
fill fill 0
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	# a page directory like /dev/shm (sticky, everyone's), where the other user's processes
	# make pages of their own
	pdir=$(mktemp -d /tmp/gpupool-wait-hostile.XXXXXX)
	TMPS="$TMPS $pdir"
	chmod 1777 "$pdir"
	fill fill-user 1 setpriv --reuid=65534 --regid=65534 --clear-groups
	pdir=$dir
else
	echo "SKIP fill-user: not root"
fi

# head: V holds 64 MiB and asks for 200 MiB while a forged claim for 900 MiB is told again
wait_empty
bg v -- holdask 64 200 && hostile f -- head $((900 << 20)) 0 "$pid_v" && {
	asks v
	vrc=$?
	[ $vrc = 0 ] && under 0.5 v || { bad "head: V should be served at once beside a forged claim ($vrc)"; show v; }
}
gone $pid_f

# head-lost: the claim from a process that looks like a waiter; V asks 0.3 s after it came
# (then it is first in line with the memory free), and V2 asks once it has lost its place
wait_empty
bg v -- holdask 64 200 && bg v2 -- holdask 64 200 && {
	env GPUPOOL_SHM_DIR="$pdir" "$py" "$hostile" head $((800 << 20)) 1 "$pid_v" "$pid_v2" >"$dir/f.out" 2>&1 &
	pid_f=$!
	sleep 0.3
	asks v
	vrc=$?
	[ $vrc = 0 ] && under 3 v || { bad "head-lost: V should be served once the claim lost its place ($vrc)"; show v; }
	grep -q "loses its place" "$dir/v.err" || { bad "head-lost: V's line about the claim"; show v; }
	sleep 1.5
	asks v2
	vrc=$?
	[ $vrc = 0 ] && under 0.5 v2 || { bad "head-lost: V2 should be served at once: the claim lost its place ($vrc)"; show v2; }
}
gone $pid_f

# liar: V's 768 MiB can come from nowhere (512 MiB in use outside gpupool)
wait_empty
env -u LD_PRELOAD GPUPOOL_DISABLE=1 "$prog" keep 512 >"$dir/k.out" 2>&1 &
kpid=$!
for _ in $(seq 100); do grep -q ready "$dir/k.out" 2>/dev/null && break; sleep 0.05; done
hostile l -- liar $((1 << 30)) && {
	env LD_PRELOAD="$preload" GPUPOOL_SHM_DIR="$pdir" GPUPOOL_LOG=info "$prog" ask 768 \
		>"$dir/v.out" 2>"$dir/v.err"
	vrc=$?
	[ $vrc = 3 ] && under 1.5 v || { bad "liar: V should fail as it would alone, not wait for the liar ($vrc)"; show v; }
}
gone $pid_l $kpid

# floor: the liar's floor, holding nothing and then claiming 1 GiB
for held in 0 $((1 << 30)); do
	wait_empty
	hostile l -- liar $held && bg v GPUPOOL_CONF=reserve:512M -- hold 768 && {
		sleep 1
		grep -q "reserve: .* refused" "$dir/v.err" && { bad "floor: V's reserve refused on a liar's word (held $held)"; show v; }
		stop $pid_v
	}
	gone $pid_l
done

[ $fail = 0 ] && echo "wait-hostile: all scenarios pass"
exit $fail
