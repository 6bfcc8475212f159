# Sourced by the e2e shell tests, which pass on their arguments: $1 the preloaded library,
# $2 the test program, $3 the statistics page directory (emptied here). Sets preload, prog
# and dir; $out and $err, temporary files removed at exit (add more to $TMPS); fail=0;
# `run CMD...` (CMD with the library preloaded and the page directory set, stdout to $out,
# stderr to $err) and `bad MESSAGE` (prints it with the end of both, and sets fail=1).
preload=$1 prog=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
out=$(mktemp) err=$(mktemp)
TMPS=
trap 'rm -rf "$out" "$err" $TMPS' EXIT
fail=0
run() { LD_PRELOAD=$preload GPUPOOL_SHM_DIR=$dir "$@" >"$out" 2>"$err"; }
bad() { echo "FAIL: $*"; echo "--- stdout"; tail -n 20 "$out"; echo "--- stderr"; tail -n 20 "$err"; fail=1; }
