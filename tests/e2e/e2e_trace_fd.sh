#!/bin/sh
# The trace never writes into a file of the program's: a program that closes descriptors 3
# to 1023 (daemons do) and opens its own file may get the number gpupool's trace had. gpupool
# checks, before each write of its buffer, that the descriptor is still the file it opened
# (device and inode), and otherwise stops tracing with one warning; it also keeps the
# descriptor high, out of the numbers such programs reuse, when the descriptor limit allows.
# usage: e2e_trace_fd.sh PRELOAD PROGRAM SHM_DIR
set -u
. "$(dirname "$0")/e2e_lib.sh"
files=$(mktemp -d)
TMPS="$TMPS $files"
hdr=t_ns,op,tid,dev,stream,size,ptr,dur_ns,err

# check_own NAME: the program's own file holds only what the program wrote
check_own() {
	[ "$(cat "$files/own")" = mine ] ||
		bad "$1: the program's own file holds $(wc -c <"$files/own") bytes, not only its own line"
}

# limit 1024: the descriptor cannot be moved above the numbers the program closes, so the
# check is what keeps the rows out of the program's file; 4096: it is moved to 1024 and
# survives. Plain and gzip'd traces; the program's file reopened on a closed number, or
# every number 3-1022 made the program's file (1023 left free for the sanitizers).
for lim in 1024 4096; do
	for how in close dup; do
		for ext in csv csv.gz; do
			name="limit $lim, $how, .$ext"
			rm -f "$files/own" "$files/t.$ext"
			(ulimit -n $lim 2>/dev/null || exit 77
			 GPUPOOL_CONF=trace:$files/t.$ext GPUPOOL_REPORT=none FAKECUDA_DEVICES=1 \
				run "$prog" fd_reuse "$files/own" $how)
			rc=$?
			[ $rc -eq 77 ] && { echo "skip: $name (ulimit -n $lim refused)"; continue; }
			[ $rc -eq 0 ] || { bad "$name: exit status $rc"; continue; }
			check_own "$name"
			n=$(grep -c "gpupool: warning: trace" "$err")
			if [ "$ext" = csv ]; then rows() { cat "$files/t.csv"; }; else rows() { gzip -dc "$files/t.csv.gz" 2>/dev/null; }; fi
			# (zlib may still hold a .gz trace's first rows, header included, when its
			# descriptor is lost: they are lost with it)
			[ $lim-$ext = 1024-csv.gz ] || [ "$(rows | head -1)" = "$hdr" ] || bad "$name: the trace lost its header"
			if [ $lim = 1024 ]; then
				# the trace stopped where its descriptor was lost: one warning, and the
				# rows before it
				[ "$n" -eq 1 ] || bad "$name: $n warnings about the trace, expected 1"
				grep -q "gpupool: warning: trace: descriptor [0-9]* is no longer $files/t.$ext" "$err" ||
					bad "$name: the warning does not say what happened"
				[ "$ext" = csv.gz ] || [ "$(tail -c 1 "$files/t.csv" | od -An -c | tr -d ' ')" = '\n' ] ||
					bad "$name: the trace ends inside a row"
			else
				# the descriptor was out of the way: every row is in the trace
				[ "$n" -eq 0 ] || bad "$name: $n warnings about the trace, expected none"
				[ "$(rows | wc -l)" -eq 44001 ] || bad "$name: $(rows | wc -l) lines in the trace, expected 44001"
			fi
			echo "ok   $name"
		done
	done
done
exit $fail
