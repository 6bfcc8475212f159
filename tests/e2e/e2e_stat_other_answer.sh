#!/usr/bin/env bash
# The GPU line of gpupool-stat takes the driver's figures (MEMORY, FREE) only from processes
# the reader trusts (its own user's, root's), never from another user's answer on the channel:
#   other   a process O of user nobody (a page name of its own in the page directory, so that
#           readers ask it) answers every status query for the GPU of a root holder A with
#           80 TiB of memory, none free, a look of the far future and a name of its own. Read
#           by a third user (uid 1234): the GPU line and JSON "gpus" keep A's figures and name;
#           O is listed as its own row
#   alone   A gone, O is the only process on that GPU: its row and the GPU's line are listed,
#           with O's name for it and O's figures marked as its word only ("?"; JSON
#           figures_from_other_user; no Prometheus sample)
# Root only (setpriv makes the other users), in a network namespace of its own (unshare -n),
# so that no other test's process finds O on the channel; skipped (77) elsewhere.
# Arguments: the preloaded library, e2e_reclaim (a holder), the page directory, gpupool-stat,
# python3.
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || [ ! -x /usr/bin/python3 ]; then
	echo "skip: needs root, setpriv and /usr/bin/python3 (processes of other users)"
	exit 77
fi
if [ -z "${E2E_OWN_NETNS:-}" ]; then
	unshare -n true 2>/dev/null || { echo "skip: no network namespace of its own (unshare -n)"; exit 77; }
	exec unshare -n env E2E_OWN_NETNS=1 "$0" "$@"
fi
. "$(dirname "$0")/e2e_lib.sh"
stat=$4 py=$5
asreader() { setpriv --reuid=1234 --regid=1234 --clear-groups "$@"; }
export FAKECUDA_MACHINE=$dir/machine FAKECUDA_CAPACITY=1G FAKECUDA_DEVICES=1
# a page directory like /dev/shm (sticky, everyone's), whose folders other users may cross
pdir=$(mktemp -d /tmp/gpupool-stat-other.XXXXXX)
TMPS="$TMPS $pdir"
chmod 1777 "$pdir"
export GPUPOOL_SHM_DIR=$pdir
asreader "$stat" >/dev/null 2>&1
rc=$?
if [ $rc = 126 ] || [ $rc = 127 ]; then
	echo "skip: uid 1234 cannot run gpupool-stat here ($rc)"
	exit 77
fi

LD_PRELOAD=$preload GPUPOOL_REPORT=none "$prog" hold 256 60 >"$dir/a.out" 2>"$dir/a.err" &
a=$!
for _ in $(seq 200); do grep -q ready "$dir/a.out" && break; sleep 0.05; done
grep -q ready "$dir/a.out" || bad "holder did not start"

# O: learns A's GPU from A's own answer, makes a page name of its own (junk), then answers
# every query with its own figures
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 - "$a" "$pdir" >"$dir/o.out" 2>&1 <<'EOF' &
import os, socket, struct, sys
SIZE, STATUS, ANSWER = 272, 6, 7

def msg(kind, id, uuid=b"\0" * 16):
    head = struct.pack("<IHHQ16sQQIIQ", 0x48535047, 2, kind, id, uuid, 0, 0, 0, 0, 0)
    return bytearray(head + b"\0" * (SIZE - len(head)))

ns = os.stat("/proc/self/ns/pid").st_ino
name = lambda pid: b"\0gpupool.%d.%d" % (ns, pid)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind(name(os.getpid()))
s.settimeout(5)
s.sendto(bytes(msg(STATUS, 1)), name(int(sys.argv[1])))
while True:
    b = s.recv(4096)
    if len(b) == SIZE and struct.unpack_from("<H", b, 6)[0] == ANSWER:
        uuid = b[16:32]
        break
s.settimeout(None)
with open("%s/gpupool.%d" % (sys.argv[2], os.getpid()), "w") as f:
    f.write("junk\n")
print("ready", os.getpid(), flush=True)
while True:
    b, addr = s.recvfrom(4096)
    if len(b) != SIZE or struct.unpack_from("<H", b, 6)[0] != STATUS:
        continue
    m = msg(ANSWER, struct.unpack_from("<Q", b, 8)[0], uuid)
    # start, reserved .. floor, then the driver's total, free and the time of its look
    struct.pack_into("<13Q", m, 64, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 80 << 40, 0, 1 << 63)
    struct.pack_into("<iHH", m, 168, 0, 0, 1)
    m[176:182] = b"other\0"
    m[208:222] = b"their GPU name"
    s.sendto(bytes(m), addr)
EOF
l=$!
trap 'kill $a $l 2>/dev/null; rm -rf "$out" "$err" $TMPS' EXIT
for _ in $(seq 100); do grep -q ready "$dir/o.out" && break; sleep 0.05; done
grep -q "^ready $l$" "$dir/o.out" || bad "O did not start"

# other
asreader "$stat" >"$out" 2>"$err" || bad "other: exit status $?"
grep -Eq "^  0  fake GPU +1\.0 GiB +768\.0 MiB +256\.0 MiB +256\.0 MiB +2$" "$out" || bad "other: the GPU line is not A's"
grep -Eq "^  0 +$l nobody +other +0 +0 B +0 B +0 B  live$" "$out" || bad "other: its own row"
asreader "$stat" --json >"$out" 2>"$err" || bad "other: --json exit status"
"$py" - "$out" <<'EOF' || bad "other: JSON"
import json, sys
g, = json.load(open(sys.argv[1]))["gpus"]
assert (g["total_bytes"], g["free_bytes"], g["name"], g["processes"]) == (1 << 30, 768 << 20, "fake GPU", 2), g
EOF

# alone
kill -INT $a
wait $a
asreader "$stat" >"$out" 2>"$err" || bad "alone: exit status $?"
grep -Eq "^  0  their GPU name +80.0 TiB\? +0 B\? +0 B +0 B +1$" "$out" || bad "alone: the GPU line"
grep -Eq "^  0 +$l nobody +other " "$out" || bad "alone: its own row"
asreader "$stat" --json >"$out" 2>"$err" || bad "alone: --json exit status"
"$py" - "$out" <<'EOF' || bad "alone: JSON"
import json, sys
g, = json.load(open(sys.argv[1]))["gpus"]
assert g["total_bytes"] == 80 << 40 and g["free_bytes"] == 0 and g["figures_from_other_user"] is True, g
EOF
asreader "$stat" --prometheus >"$out" 2>"$err" || bad "alone: --prometheus exit status"
grep -q "^gpupool_gpu_total_bytes" "$out" && bad "alone: another user's figures in Prometheus"
kill $l
wait $l 2>/dev/null
[ $fail = 0 ] && echo "stat-other-answer: all checks pass"
exit $fail
