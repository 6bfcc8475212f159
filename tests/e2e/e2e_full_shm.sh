#!/bin/sh
# A statistics page that cannot be made is no page, never a crash. On a full /dev/shm,
# ftruncate still makes a (sparse) page and mmap maps it, but the first store through the
# mapping has no block behind it: SIGBUS at the program's first cudaMalloc. gpupool reserves
# the page's blocks before mapping it (posix_fallocate; EINTR tried again; where the C library
# or the filesystem cannot, EOPNOTSUPP, it writes the zeros itself), and a page it cannot
# reserve is no page, with one warning.
#   1. a page in /dev/shm (when it is a tmpfs) has every block allocated;
#   2. a full tmpfs as the page directory (a private mount namespace: unshare -m as root,
#      else an unprivileged user namespace, unshare -rm; skipped when neither is allowed):
#      the program runs, one warning, no page left;
#   3. the same, and 1, with posix_fallocate answering EINTR twice then EOPNOTSUPP.
# usage: e2e_full_shm.sh PRELOAD PROGRAM SHM_DIR FALLOCATE_SHIM
set -u
if [ "${GP_E2E_IN_NS:-}" != 1 ]; then
	. "$(dirname "$0")/e2e_lib.sh"
	shim=$4
	# 1. the blocks are reserved (needs no privilege)
	for with_shim in no yes; do
		p=$preload
		[ $with_shim = yes ] && p=$preload:$shim
		if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && d=$(mktemp -d /dev/shm/gpupool-e2e.XXXXXX); then
			TMPS="$TMPS $d"
			was=$fail fail=0
			name="page in /dev/shm (fallocate shim: $with_shim)"
			LD_PRELOAD=$p GPUPOOL_SHM_DIR=$d GPUPOOL_REPORT=none FAKECUDA_DEVICES=1 "$prog" page >"$out" 2>"$err" ||
				bad "$name: exit status $? (the page is sparse, or missing)"
			[ $with_shim = no ] || [ "$(grep -c "fallocate_shim: EINTR" "$err")-$(grep -c "fallocate_shim: EOPNOTSUPP" "$err")" = 2-1 ] ||
				bad "$name: the shim's posix_fallocate was not called twice with EINTR, then once"
			[ -z "$(ls -A "$d")" ] || bad "$name: left behind: $(ls -A "$d")"
			[ $fail -eq 1 ] || echo "ok   $name: every block reserved"
			[ $was -eq 0 ] || fail=1
		else
			echo "skip: /dev/shm is not a tmpfs"
		fi
	done
	# 2. and 3. in a private mount namespace, where a small tmpfs can be mounted
	rc=77
	for how in -m -rm; do
		if unshare $how true 2>/dev/null; then
			GP_E2E_IN_NS=1 unshare $how sh "$0" "$@"
			rc=$?
			break
		fi
	done
	[ $rc -eq 77 ] && echo "skip: a full filesystem: no private mount namespace here (unshare -m or -rm)"
	[ $rc -eq 0 ] || [ $rc -eq 77 ] || fail=1
	exit $fail
fi

# In the namespace: the page directory is a 64 KiB tmpfs, filled up.
preload=$1 prog=$2 dir=$3 shim=$4
mkdir -p "$dir"
mount -t tmpfs -o size=64k,mode=0777 gpupool-e2e-full "$dir" 2>/dev/null || { echo "skip: cannot mount a tmpfs"; exit 77; }
dd if=/dev/zero of="$dir/fill" bs=4096 2>/dev/null
[ "$(df -P "$dir" | awk 'NR == 2 { print $4 }')" -eq 0 ] || { echo "FAIL: the tmpfs is not full"; exit 1; }
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"; umount "$dir" 2>/dev/null' EXIT
fail=0
for with_shim in no yes; do
	p=$preload
	[ $with_shim = yes ] && p=$preload:$shim
	LD_PRELOAD=$p GPUPOOL_SHM_DIR=$dir GPUPOOL_REPORT=none FAKECUDA_DEVICES=1 "$prog" alloc >"$out" 2>"$err"
	rc=$?
	name="full page directory (fallocate shim: $with_shim)"
	if [ $rc -ne 0 ]; then
		echo "FAIL: $name: exit status $rc (135: SIGBUS)"; cat "$err"; fail=1; continue
	fi
	n=$(grep -c "^gpupool: warning: " "$err")
	[ "$n" -eq 1 ] || { echo "FAIL: $name: $n warnings, expected 1"; cat "$err"; fail=1; }
	grep -q "^gpupool: warning: statistics page $dir/gpupool\.[0-9]*: cannot reserve its [0-9]* bytes: No space left on device; counters stay private" "$err" ||
		{ echo "FAIL: $name: the warning does not say why"; cat "$err"; fail=1; }
	[ "$(ls -A "$dir")" = fill ] || { echo "FAIL: $name: left in the directory: $(ls -A "$dir")"; fail=1; }
	echo "ok   $name"
done
exit $fail
