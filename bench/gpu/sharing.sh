#!/usr/bin/env bash
# One GPU, two processes (docs/sharing.md): A takes memory, frees it and idles (or trains);
# B then asks for memory the GPU only has if A's idle cache goes back. Each scenario runs A in
# the background until it prints ready=1, then B, then stops A; logs, exit reports (JSON) and
# GPUPOOL_LOG=info lines land in OUTDIR/<scenario>/. bench/gpu/sharing_table.py OUTDIR prints
# the tables of BENCHMARKS.md section 24.
#
#   bench/gpu/sharing.sh OUTDIR [PART...]
# PARTs (default: all, in this order):
#   idle     A idle with 83 GiB freed, B asks 83 GiB: without gpupool (PyTorch's default
#            allocator, with and without empty_cache() in A, and expandable_segments), and
#            under gpupool: A under plain LD_PRELOAD (default allocator, empty_cache(),
#            expandable_segments), A under gpupool-run --torch, A a C++ program that freed
#            with cudaFree. B is PyTorch under LD_PRELOAD wherever A is under gpupool.
#   waits    the time B waits when the GPU lacks 1, 10 and 80 GiB of what it asks, A holding
#            100 GiB idle (a C++ program, then PyTorch's default allocator), ROUNDS rounds
#   train    A trains (a deterministic MLP, 300 steps) with 120 GiB idle in PyTorch's cache
#            while B asks 60 GiB at step ~100; and A alone: step times and losses
# Environment: GPUPOOL_LIB (else scripts/build-gpu-lib builds one), ROUNDS (3), PY (python3).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/gpu/sharing.sh OUTDIR [PART...]}
shift
parts=${*:-idle waits train}
rounds=${ROUNDS:-3}
py=${PY:-python3}
lib=${GPUPOOL_LIB:-$(scripts/build-gpu-lib)}
here=bench/gpu
mkdir -p "$out"
hold_bin=$out/share_hold
cudalib=$(dirname "$(command -v nvcc)")/../lib64
[ -x "$hold_bin" ] || nvcc -O2 -cudart shared -Xlinker -rpath -Xlinker "$cudalib" -o "$hold_bin" $here/share_hold.cu || exit 1

# run_a DIR ENV... -- CMD...: A in the background, until ready=1 (120 s at most); its pid in A_PID
run_a() {
	local d=$1
	shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" "$@" >"$d/a.log" 2>"$d/a.err" &
	A_PID=$!
	for _ in $(seq 1200); do
		grep -q '^ready=1' "$d/a.log" 2>/dev/null && return 0
		kill -0 $A_PID 2>/dev/null || { echo "A died: $d" >&2; return 1; }
		sleep 0.1
	done
	echo "A not ready in 120 s: $d" >&2
	return 1
}
# SIGINT: Python ends with KeyboardInterrupt and share_hold returns from main, so that both
# run their exit handlers (gpupool's exit report)
stop_a() {
	kill -INT $A_PID 2>/dev/null
	wait $A_PID 2>/dev/null
}
gp() { echo LD_PRELOAD=$lib GPUPOOL_LOG=info "GPUPOOL_REPORT=$1"; }

# scenario NAME A_ENV A_CMD B_ENV B_CMD (each a string split on spaces)
scenario() {
	local name=$1 aenv=$2 acmd=$3 benv=$4 bcmd=$5
	local d=$out/$name
	mkdir -p "$d"
	echo "== $name" >&2
	# shellcheck disable=SC2086
	if run_a "$d" $aenv -- $acmd; then
		# shellcheck disable=SC2086
		env $benv $bcmd >"$d/b.log" 2>"$d/b.err"
		echo "b_rc=$?" >>"$d/b.log"
	fi
	stop_a
	cat "$d/b.log" >&2
}

for part in $parts; do
	case $part in
	idle)
		holdpy="$py $here/share_torch.py hold 83 --seconds 300"
		askpy="$py $here/share_torch.py ask 83"
		scenario native-default "X=1" "$holdpy" "X=1" "$askpy"
		scenario native-empty "X=1" "$holdpy --empty" "X=1" "$askpy"
		scenario native-expandable "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" "$holdpy" "X=1" "$askpy"
		scenario gp-default "$(gp $out/gp-default/a.json)" "$holdpy" "$(gp $out/gp-default/b.json)" "$askpy"
		scenario gp-empty "$(gp $out/gp-empty/a.json)" "$holdpy --empty" "$(gp $out/gp-empty/b.json)" "$askpy"
		scenario gp-expandable "$(gp $out/gp-expandable/a.json) PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" \
			"$holdpy" "$(gp $out/gp-expandable/b.json)" "$askpy"
		scenario gp-torchmode "GPUPOOL_LIB=$lib GPUPOOL_LOG=info GPUPOOL_REPORT=$out/gp-torchmode/a.json" \
			"scripts/gpupool-run --torch $holdpy" "$(gp $out/gp-torchmode/b.json)" "$askpy"
		scenario gp-cpp "$(gp $out/gp-cpp/a.json)" "$hold_bin 83 300" "$(gp $out/gp-cpp/b.json)" "$askpy"
		;;
	waits)
		for r in $(seq "$rounds"); do
			for a in cpp torch; do
				d=$out/waits-$a-$r
				mkdir -p "$d"
				echo "== waits $a round $r" >&2
				if [ $a = cpp ]; then acmd="$hold_bin 100 600"; else acmd="$py $here/share_torch.py hold 100 --seconds 600"; fi
				# shellcheck disable=SC2086
				run_a "$d" $(gp "$d/a.json") -- $acmd || { stop_a; continue; }
				for g in 1 10 80; do
					env LD_PRELOAD="$lib" GPUPOOL_LOG=info GPUPOOL_REPORT="$d/b$g.json" \
						$py $here/share_torch.py ask $g --beyond >"$d/b$g.log" 2>"$d/b$g.err"
					echo "b_rc=$?" >>"$d/b$g.log"
					grep '^ok=' "$d/b$g.log" >&2
				done
				stop_a
			done
		done
		;;
	train)
		for r in $(seq "$rounds"); do
			for mode in alone asked; do
				d=$out/train-$mode-$r
				mkdir -p "$d"
				echo "== train $mode round $r" >&2
				# shellcheck disable=SC2046
				env $(gp "$d/a.json") CUBLAS_WORKSPACE_CONFIG=:4096:8 \
					$py $here/share_torch.py hold 120 --train 300 >"$d/a.log" 2>"$d/a.err" &
				A_PID=$!
				if [ $mode = asked ]; then
					for _ in $(seq 1200); do
						grep -q '^step=100 ' "$d/a.log" 2>/dev/null && break
						kill -0 $A_PID 2>/dev/null || break
						sleep 0.1
					done
					env LD_PRELOAD="$lib" GPUPOOL_LOG=info GPUPOOL_REPORT="$d/b.json" \
						$py $here/share_torch.py ask 60 >"$d/b.log" 2>"$d/b.err"
					echo "b_rc=$?" >>"$d/b.log"
					cat "$d/b.log" >&2
				fi
				wait $A_PID
				grep '^done=' "$d/a.log" >&2
			done
		done
		;;
	*) echo "sharing.sh: unknown part $part" >&2; exit 2 ;;
	esac
done
