#!/bin/sh
# gpupool-stat against pages planted by someone else: forged pages (a file whose owner is
# not the user of the process its name gives) are skipped and counted in every view; junk
# whose slots never settle costs a bounded time; a flood of junk hides no live process.
# As root the forgeries are chowned to nobody (65534); otherwise pid 1 (root's) is the
# process another user's file claims.
set -eu
. "$(dirname "$0")/stat_lib.sh"

"$WRITER" 500 >"$D/w.out" 2>"$D/w.err" &
WPID=$!
HELPERS=$WPID
wait_ready w

# "init-forged": 80 GiB claimed for pid 1, and (as root) a nobody page claiming this shell
"$WRITER" forge even 16 1 || fail "forge"
forged=1
if [ "$(id -u)" -eq 0 ]; then
	"$WRITER" forge even 16 $$ || fail "forge"
	chown 65534:65534 "$GPUPOOL_SHM_DIR/gpupool.1" "$GPUPOOL_SHM_DIR/gpupool.$$"
	forged=2
fi

"$STAT" >"$D/table" 2>"$D/table.err" || fail "table exit status"
cat "$D/table" "$D/table.err"
grep -q "^ *[0-9-]* *$WPID [^ ]* *stat_writer *0 .* live" "$D/table" || fail "the real writer is missing"
! grep -q forged "$D/table" || fail "a forged page is listed"
[ "$(wc -l <"$D/table.err")" -eq 1 ] || fail "expected one line on stderr"
grep -qx "gpupool-stat: skipped $forged pages\{0,1\}: the file's owner is not the user of the process it names" \
	"$D/table.err" || fail "skip line"

"$STAT" --json >"$D/json" 2>/dev/null || fail "json exit status"
python3 - "$D/json" "$WPID" "$forged" <<'PY' || fail "json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert [p["pid"] for p in d["processes"]] == [int(sys.argv[2])], d["processes"]
assert d["skipped_pages"] == int(sys.argv[3]), d["skipped_pages"]
assert d["skipped"]["foreign"] == int(sys.argv[3]) and sum(d["skipped"].values()) == d["skipped_pages"]
PY

"$STAT" --prometheus >"$D/prom" 2>/dev/null || fail "prometheus exit status"
! grep -q forged "$D/prom" || fail "a forged page in prometheus"
grep -q "^gpupool_reserved_bytes{pid=\"$WPID\"" "$D/prom" || fail "prometheus lacks the real writer"
grep -q '^# TYPE gpupool_skipped_pages gauge$' "$D/prom" || fail "prometheus skipped TYPE"
grep -qx "gpupool_skipped_pages{reason=\"foreign\"} $forged" "$D/prom" || fail "prometheus skipped count"
bad=$(grep -v '^# \(HELP\|TYPE\) ' "$D/prom" |
	grep -cv '^gpupool_[a-z_]*{\(pid="[0-9]*",comm="[^"]*"\(,user="[^"]*"\)\?\(,device="[0-9]*"\(,UUID="GPU-[0-9a-f-]\{36\}"\)\?\)\?\|UUID="GPU-[0-9a-f-]\{36\}"\(,index="[0-9]*"\)\?\(,name="[^"]*"\)\?\|reason="[a-z_]*"\|version="[0-9A-Za-z.+~-]*"\)} [0-9.]*$' || true)
[ "$bad" -eq 0 ] || fail "prom grammar: $bad bad lines"

# one process asked for by pid: the forged one is not shown either
if "$STAT" 1 >"$D/one" 2>"$D/one.err"; then fail "a forged pid 1 should have no readable page"; fi
grep -q "skipped 1 page: the file's owner is not the user of the process it names" "$D/one.err" ||
	fail "skip line for one pid"
if "$STAT" --release 1 --timeout 0.1 >/dev/null 2>"$D/rel.err"; then fail "release of a forged page"; fi
grep -q "not owned by the user of process 1" "$D/rel.err" || fail "release skip reason"
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# 50 pages whose 16 slots stay odd, as if their writers died mid-update: 25 of our live
# processes (sleepers) and 25 pids that do not exist. The listing must not wait on each.
SLEEPERS=
for i in $(seq 25); do
	sleep 300 &
	SLEEPERS="$SLEEPERS $!"
done
HELPERS="$HELPERS $SLEEPERS"
"$WRITER" forge odd 16 $SLEEPERS $(seq 5100000 5100024) || fail "forge odd"
t0=$(now_ms)
timeout 60 "$STAT" >"$D/junk" 2>"$D/junk.err" || fail "table with junk: exit status"
ms=$(($(now_ms) - t0))
echo "table with 50 odd junk pages: $ms ms"
head -3 "$D/junk.err"
[ "$ms" -lt 3000 ] || fail "the table with 50 odd junk pages took $ms ms"
grep -q "^ *[0-9-]* *$WPID [^ ]* *stat_writer *0 .* live" "$D/junk" || fail "the real writer is missing among junk"
[ "$(grep -c '^ *[0-9-]* *5100000 [^ ]* *forged .*inconsistent' "$D/junk")" -eq 16 ] || fail "odd slots not shown inconsistent"
[ "$(wc -l <"$D/junk.err")" -le 25 ] || fail "stderr flooded: $(wc -l <"$D/junk.err") lines"

# more junk than one listing keeps (4096 pages): 6000 consistent pages of pids that do not
# exist. Every live process (the writer, the sleepers) is still listed.
"$WRITER" forge even 1 $(seq 5200000 5205999) || fail "forge flood"
t0=$(now_ms)
timeout 120 "$STAT" --json >"$D/flood" 2>"$D/flood.err" || fail "json with a flood: exit status"
ms=$(($(now_ms) - t0))
echo "json with 6050 junk pages: $ms ms"
[ "$ms" -lt 10000 ] || fail "the listing with 6050 junk pages took $ms ms"
python3 - "$D/flood" "$WPID" $SLEEPERS <<'PY' || fail "flood json"
import json, sys
d = json.load(open(sys.argv[1]))
pids = {p["pid"] for p in d["processes"]}
live = [int(p) for p in sys.argv[2:]]
missing = [p for p in live if p not in pids]
assert not missing, "live processes hidden by junk: %s" % missing
assert len(d["processes"]) == 4096, len(d["processes"])
assert d["skipped"]["limit"] == 6000 + 50 + 1 - 4096, d["skipped"]
PY
echo "stat_hostile: all checks passed"
