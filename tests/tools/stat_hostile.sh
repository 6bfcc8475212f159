#!/bin/sh
# gpupool-stat against pages planted by someone else: forged pages (a file whose owner is
# not the user of the process its name gives) are skipped and counted in every view.
# As root the forgeries are chowned to nobody (65534); otherwise pid 1 (root's) is the
# process another user's file claims.
set -eu
STAT=$1
WRITER=$2
D=$(mktemp -d)
export GPUPOOL_SHM_DIR="$D/shm"
mkdir "$GPUPOOL_SHM_DIR"
WPID=
cleanup() {
	[ -n "$WPID" ] && kill -9 "$WPID" 2>/dev/null || true
	rm -rf "$D"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$WRITER" 500 >"$D/w.out" 2>"$D/w.err" &
WPID=$!
i=0
while ! grep -q ready "$D/w.out" 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 500 ] || fail "writer not ready"; sleep 0.02
done

# "init-forged": 80 GiB claimed for pid 1, and (as root) a nobody page claiming this shell
"$WRITER" forge even 1 || fail "forge"
forged=1
if [ "$(id -u)" -eq 0 ]; then
	"$WRITER" forge even $$ || fail "forge"
	chown 65534:65534 "$GPUPOOL_SHM_DIR/gpupool.1" "$GPUPOOL_SHM_DIR/gpupool.$$"
	forged=2
fi

"$STAT" >"$D/table" 2>"$D/table.err" || fail "table exit status"
cat "$D/table" "$D/table.err"
grep -q "^ *$WPID stat_writer *0 .* live" "$D/table" || fail "the real writer is missing"
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
	grep -cv '^gpupool_[a-z_]*{\(pid="[0-9]*",comm="[^"]*"\(,device="[0-9]*"\)\?\|reason="[a-z_]*"\)} [0-9.]*$' || true)
[ "$bad" -eq 0 ] || fail "prom grammar: $bad bad lines"

# one process asked for by pid: the forged one is not shown either
if "$STAT" 1 >"$D/one" 2>"$D/one.err"; then fail "a forged pid 1 should have no readable page"; fi
grep -q "skipped 1 page: the file's owner is not the user of the process it names" "$D/one.err" ||
	fail "skip line for one pid"
if "$STAT" --release 1 --timeout 0.1 >/dev/null 2>"$D/rel.err"; then fail "release of a forged page"; fi
grep -q "not owned by the user of process 1" "$D/rel.err" || fail "release skip reason"
echo "stat_hostile: all checks passed"
