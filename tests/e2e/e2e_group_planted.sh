#!/usr/bin/env bash
# A group file planted by another user in a sticky directory anyone may write (as /tmp): user
# nobody makes the file first (0600, empty), root's process names it as its group (root may
# open any file that is not o+w), and nobody then truncates it. The process must refuse to join
# with one line naming the file and its owner, leave the file as it was, and keep running
# (every allocation out of memory, as for any group it cannot join) instead of dying of SIGBUS
# when the file shrinks under its mapping. Root only (setpriv makes the other user); skipped
# (77) elsewhere.
# Arguments: the preloaded library, e2e_reclaim (its busy mode allocates in a loop), the page
# directory.
. "$(dirname "$0")/e2e_lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "skip: needs root and setpriv (a file of another user)"
	exit 77
fi
asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
pdir=$(mktemp -d /tmp/gpupool-group-planted.XXXXXX)
TMPS="$TMPS $pdir"
chmod 1777 "$pdir"
g=$pdir/job.group
asnobody sh -c "umask 077; : > '$g'" || { echo "skip: user nobody cannot make a file in $pdir"; exit 77; }
export FAKECUDA_DEVICES=1

GPUPOOL_CONF=group:$g,group_limit:512M LD_PRELOAD=$preload GPUPOOL_SHM_DIR=$dir GPUPOOL_REPORT=none \
	"$prog" busy 0 30 >"$out" 2>"$err" &
v=$!
# its first allocations join (or refuse) the group
for _ in $(seq 100); do grep -q "group $g" "$err" || [ -s "$g" ] && break; sleep 0.05; done
asnobody truncate -s 0 "$g" || bad "nobody could not truncate the file"
sleep 0.3
kill -INT $v
wait $v
rc=$?
[ $rc = 0 ] || bad "the process ended with status $rc (135: SIGBUS), not 0"
[ "$(grep -c "^gpupool: error: group $g: it is owned by uid 65534, who is neither this user nor the owner of its sticky directory (uid 0): .*not joined.*; remove it, or keep the group file in a directory only the group's users may write" "$err")" = 1 ] ||
	bad "not one line naming the file, its owner and what to do"
grep -q "^busy rounds=[1-9]" "$out" || bad "the process did not keep running"
[ "$(stat -c '%U %s' "$g")" = "nobody 0" ] || bad "the planted file was changed: $(stat -c '%U %s' "$g")"

# root's own file in the same directory is joined: the group works there
GPUPOOL_CONF=group:$pdir/own.group,group_limit:512M LD_PRELOAD=$preload GPUPOOL_SHM_DIR=$dir \
	GPUPOOL_REPORT=none "$prog" ask 8 >"$out" 2>"$err" || bad "root's own file: exit status $?"
grep -q "^ok " "$out" || bad "root's own file: the allocation failed"
[ ! -s "$err" ] || bad "root's own file: a line on stderr"
[ $fail = 0 ] && echo "group-planted: all checks pass"
exit $fail
