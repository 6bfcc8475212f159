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
#   suite    what scripts/gpu-suite sharing runs, sized as a fraction of the card (FRACTION,
#            0.6): A takes that much in 1 GiB pieces, frees it and idles, B (PyTorch under
#            LD_PRELOAD) asks as much as one tensor, for A under gpupool in each mode:
#            PyTorch's default allocator, empty_cache(), expandable_segments, gpupool-run
#            --torch, a C++ program that freed with cudaFree, CuPy's default pool (skipped
#            without CuPy); then A training (STEPS, 300) alone and asked at step 100.
#            bench/gpu/share_table.py OUTDIR prints the verdicts and the table
# Environment: GPUPOOL_LIB (else scripts/build-gpu-lib builds one), ROUNDS (3), PY (python3),
# FRACTION, STEPS.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/gpu/sharing.sh OUTDIR [PART...]}
shift
parts=${*:-idle waits train}
for part in $parts; do # before anything is built
	case $part in
	idle | waits | train | suite) ;;
	*) echo "sharing.sh: unknown part $part (idle, waits, train, suite)" >&2; exit 2 ;;
	esac
done
fraction=${FRACTION:-0.6}
steps=${STEPS:-300}
if ! awk -v f="$fraction" 'BEGIN { exit !(f + 0 > 0 && f + 0 < 1) }' || ! [[ $steps =~ ^[1-9][0-9]*$ ]]; then
	echo "sharing.sh: FRACTION must be in (0, 1) and STEPS a positive integer (got $fraction, $steps)" >&2
	exit 2
fi
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

# train_run DIR GIB STEPS alone|asked ASK: A takes GIB, frees it into PyTorch's cache and
# trains STEPS steps; asked: B asks ASK GiB once A has reached step 100
train_run() {
	local d=$1 g=$2 n=$3 mode=$4 ask=$5
	mkdir -p "$d"
	echo "== train $mode: $d" >&2
	# shellcheck disable=SC2046
	env $(gp "$d/a.json") CUBLAS_WORKSPACE_CONFIG=:4096:8 \
		$py $here/share_torch.py hold "$g" --train "$n" >"$d/a.log" 2>"$d/a.err" &
	A_PID=$!
	if [ "$mode" = asked ]; then
		for _ in $(seq 1200); do
			grep -q '^step=100 ' "$d/a.log" 2>/dev/null && break
			kill -0 $A_PID 2>/dev/null || break
			sleep 0.1
		done
		env LD_PRELOAD="$lib" GPUPOOL_LOG=info GPUPOOL_REPORT="$d/b.json" \
			$py $here/share_torch.py ask "$ask" >"$d/b.log" 2>"$d/b.err"
		echo "b_rc=$?" >>"$d/b.log"
		cat "$d/b.log" >&2
	fi
	wait $A_PID
	grep '^done=' "$d/a.log" >&2
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
				train_run "$out/train-$mode-$r" 120 300 $mode 60
			done
		done
		;;
	suite)
		# the card's memory as the driver reports it (MiB), the first device the process sees
		cvd=${CUDA_VISIBLE_DEVICES:-0}
		total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i "${cvd%%,*}" 2>/dev/null | head -1)
		[ -n "$total" ] || total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
		g=$(awk -v m="$total" -v f="$fraction" 'BEGIN { printf "%d", m * f / 1024 }')
		echo "suite: ${fraction} of ${total} MiB: A holds and B asks ${g} GiB" >&2
		echo "fraction=$fraction total_mib=$total gib=$g" >"$out/suite.txt"
		holdpy="$py $here/share_torch.py hold $g --seconds 300"
		askpy="$py $here/share_torch.py ask $g"
		for m in default empty expandable torchmode cpp cupy; do
			d=$out/suite-$m
			rm -rf "$d"
			mkdir -p "$d"
			case $m in
			default) scenario suite-$m "$(gp "$d/a.json")" "$holdpy" "$(gp "$d/b.json")" "$askpy" ;;
			empty) scenario suite-$m "$(gp "$d/a.json")" "$holdpy --empty" "$(gp "$d/b.json")" "$askpy" ;;
			expandable)
				scenario suite-$m "$(gp "$d/a.json") PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" "$holdpy" \
					"$(gp "$d/b.json")" "$askpy" ;;
			torchmode)
				scenario suite-$m "GPUPOOL_LIB=$lib GPUPOOL_LOG=info GPUPOOL_REPORT=$d/a.json" \
					"scripts/gpupool-run --torch $holdpy" "$(gp "$d/b.json")" "$askpy" ;;
			cpp) scenario suite-$m "$(gp "$d/a.json")" "$hold_bin $g 300" "$(gp "$d/b.json")" "$askpy" ;;
			cupy)
				scenario suite-$m "$(gp "$d/a.json")" "$py $here/share_cupy.py hold $g --seconds 300" \
					"$(gp "$d/b.json")" "$askpy" ;;
			esac
		done
		for mode in alone asked; do
			rm -rf "$out/suite-train-$mode"
			train_run "$out/suite-train-$mode" "$g" "$steps" $mode "$g"
		done
		;;
	esac
done
