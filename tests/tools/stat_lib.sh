# Sourced by the gpupool-stat CLI tests (stat_cli.sh, stat_hostile.sh), which pass on their
# arguments: $1 gpupool-stat, $2 the helper writer (stat_writer). Sets STAT and WRITER, a
# private directory $D with GPUPOOL_SHM_DIR=$D/shm, `fail MESSAGE`, `wait_ready NAME` (the
# writer's "ready" line in $D/NAME.out); at exit kills the pids in $HELPERS (add with
# HELPERS="$HELPERS $!", drop one that was waited for with `helper_done PID`) and removes $D.
STAT=$1
WRITER=$2
D=$(mktemp -d)
export GPUPOOL_SHM_DIR="$D/shm"
mkdir "$GPUPOOL_SHM_DIR"
HELPERS=
cleanup() {
	for p in $HELPERS; do kill -9 "$p" 2>/dev/null || true; done
	rm -rf "$D"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
helper_done() { HELPERS=$(echo " $HELPERS " | sed "s/ $1 / /"); }

wait_ready() { # name
	i=0
	while ! grep -q ready "$D/$1.out" 2>/dev/null; do
		i=$((i + 1)); [ $i -lt 500 ] || fail "writer $1 not ready"; sleep 0.02
	done
}
