#!/usr/bin/env bash
# How fast a process gives idle memory back, and what the decay costs a training loop: the
# two figures docs/sharing.md's defaults (reclaim_wait_ms 2 s, decay_ms 10 s) are chosen by.
# Everything is sized as a fraction of the GPU. About 2 minutes on one H100.
#
#   bench/gpu/giveback.sh OUTDIR [--fake] [PART...]
# PARTs (default: release reclaim decay):
#   release  A (bench/gpu/giveback_hold.py under gpupool) takes FRACTION of the GPU in 1 GiB
#            pieces and frees them into gpupool's cache; `gpupool-stat --release A` asks for
#            it back: the time until A answered and what it handed back (its fence and its
#            cudaFree calls), ROUNDS rounds, a fresh A each
#   reclaim  the same A; B asks for the GPU's free memory and three quarters of what A holds,
#            which the GPU has only if A gives them: what A gave and how long it took (A's
#            GPUPOOL_LOG=info line), and B's cudaMalloc
#   decay    bench/gpu/train.py (resnet50, default allocator) under gpupool with the decay on
#            (decay_ms:10000, the default) and off (decay_ms:0), interleaved, ROUNDS rounds:
#            the step time of each (a loop that reuses its segments every step should see no
#            difference); needs torch and a GPU, skipped with --fake
# --fake: over the fake CUDA runtime (gpupool-run --fake; FAKECUDA_CAPACITY 4G, processes
# sharing it through FAKECUDA_MACHINE): the exchange itself, no GPU's time to free.
# Environment: GPUPOOL_LIB (else scripts/build-gpu-lib builds one; with --fake, the build
# tree's), FRACTION (0.6), ROUNDS (3), STEPS (60), PY (python3), GPUPOOL_STAT (else
# build-gpu's tools/gpupool-stat, built by scripts/build-gpu-lib; with --fake, the build tree's). Writes each run's logs and exit reports under OUTDIR, the
# figures as key=value lines to OUTDIR/giveback.txt, and prints a table last.
set -uo pipefail
usage() { echo "usage: bench/gpu/giveback.sh OUTDIR [--fake] [release|reclaim|decay...]" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 1
[ $# -ge 1 ] || usage
case $1 in -*) usage ;; esac
out=$1
shift
fake=0 parts=()
for a in "$@"; do
	case $a in
	--fake) fake=1 ;;
	release | reclaim | decay) parts+=("$a") ;;
	*) echo "giveback.sh: unknown part or option '$a'" >&2; usage ;;
	esac
done
[ ${#parts[@]} -gt 0 ] || parts=(release reclaim decay)
frac=${FRACTION:-0.6}
rounds=${ROUNDS:-3}
steps=${STEPS:-60}
py=${PY:-python3}
awk -v f="$frac" 'BEGIN { exit !(f > 0 && f <= 0.9) }' || { echo "giveback.sh: FRACTION $frac: expected above 0, at most 0.9" >&2; exit 2; }
case $rounds in '' | *[!0-9]* | 0) echo "giveback.sh: ROUNDS $rounds: expected a whole number from 1" >&2; exit 2 ;; esac
case $steps in '' | *[!0-9]* | 0) echo "giveback.sh: STEPS $steps: expected a whole number from 1" >&2; exit 2 ;; esac
mkdir -p "$out" || exit 1
here=bench/gpu
stat=${GPUPOOL_STAT:-}
if [ "$fake" = 1 ]; then
	stat=${stat:-build/tools/gpupool-stat}
	lib=${GPUPOOL_LIB:-build/src/libgpupool.so}
	run=(scripts/gpupool-run --fake)
	export FAKECUDA_MACHINE=$out/machine FAKECUDA_CAPACITY=${FAKECUDA_CAPACITY:-4G} FAKECUDA_DEVICES=1
	rm -f "$FAKECUDA_MACHINE"
else
	# the GPU machine's own build (scripts/build-gpu-lib) has gpupool-stat too
	if [ -z "$stat" ]; then
		scripts/build-gpu-lib build-gpu tools/gpupool-stat >/dev/null || exit 1
		stat=build-gpu/tools/gpupool-stat
	fi
	lib=${GPUPOOL_LIB:-$(scripts/build-gpu-lib)}
	run=(scripts/gpupool-run)
	# the runtime gpupool interposes: the toolkit's, found by ctypes
	for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
		[ -e "$d/libcudart.so.13" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} && break
	done
fi
[ -f "$lib" ] || { echo "giveback.sh: no library at $lib" >&2; exit 1; }
[ -x "$stat" ] || { echo "giveback.sh: no gpupool-stat at $stat (ninja -C build tools/gpupool-stat)" >&2; exit 1; }
export GPUPOOL_LIB=$lib GPUPOOL_SHM_DIR=$out/shm
mkdir -p "$GPUPOOL_SHM_DIR"
txt=$out/giveback.txt
: >"$txt"

# start_a DIR: A holds FRACTION of the GPU idle in gpupool's cache; its pid in A, what it holds in HELD
start_a() {
	local d=$1
	GPUPOOL_LOG=info GPUPOOL_REPORT=$d/a.json "${run[@]}" "$py" $here/giveback_hold.py hold "$frac" \
		>"$d/a.log" 2>"$d/a.err" &
	A=$!
	for _ in $(seq 600); do
		grep -q '^ready=1' "$d/a.log" 2>/dev/null && break
		kill -0 $A 2>/dev/null || { echo "giveback.sh: A failed: $(tail -3 "$d/a.err")" >&2; return 1; }
		sleep 0.1
	done
	HELD=$(sed -n 's/^ready=1 held=\([0-9]*\).*/\1/p' "$d/a.log")
	[ -n "$HELD" ]
}
stop_a() { kill -INT $A 2>/dev/null; wait $A 2>/dev/null; }

for part in "${parts[@]}"; do
	for r in $(seq "$rounds"); do
		d=$out/$part-$r
		mkdir -p "$d"
		case $part in
		release)
			start_a "$d" || { stop_a; continue; }
			"$stat" --release "$A" --timeout 30 >"$d/release.log" 2>&1
			# "pid N (python3) released its cache: request 1 done after 2.1 ms, 48.0 GiB handed back"
			sed -n "s/.*done after \([0-9.]*\) ms, \(.*\) handed back$/release round=$r held=$HELD ms=\1 handed_back=\2/p" \
				"$d/release.log" | sed 's/handed_back=\([0-9.]*\) \([KMGT]\?i\?B\)/handed_back=\1\2/' >>"$txt"
			stop_a ;;
		reclaim)
			start_a "$d" || { stop_a; continue; }
			GPUPOOL_LOG=info GPUPOOL_REPORT=$d/b.json "${run[@]}" "$py" $here/giveback_hold.py ask \
				$((HELD / 4 * 3)) --beyond-free >"$d/b.log" 2>"$d/b.err"
			stop_a # its line is written when it answers; stopped, every line is out
			# A: "reclaim: gave 36.3 GiB on device 0 to pid N (uid U) in 0.105 s (GPU free ...)"
			gave=$(sed -n 's/.*reclaim: gave \([0-9.]*\) \([KMGT]\?i\?B\) on device [0-9]* to pid [0-9]* (uid [0-9]*) in \([0-9.]*\) s.*/gave=\1\2 gave_s=\3/p' "$d/a.err" | head -1)
			echo "reclaim round=$r held=$HELD ${gave:-gave=none} $(sed -n 's/^ok=\([01]\).* seconds=\([0-9.]*\)$/b_ok=\1 b_malloc_s=\2/p' "$d/b.log")" >>"$txt" ;;
		decay)
			if [ "$fake" = 1 ]; then
				echo "decay round=$r skipped=fake" >>"$txt"
				continue
			fi
			for conf in decay_ms:10000 decay_ms:0; do
				GPUPOOL_CONF=$conf GPUPOOL_REPORT=$d/$conf.json "${run[@]}" "$py" $here/train.py --model resnet50 \
					--mode default --steps "$steps" >"$d/$conf.log" 2>"$d/$conf.err"
				echo "decay round=$r conf=$conf $(grep -o 'step_ms=[0-9.]*' "$d/$conf.log" | head -1) rc=$?" >>"$txt"
			done ;;
		esac
	done
done

# the table: each figure, round by round
echo
echo "giveback.sh: $(grep -c . "$txt") lines in $txt ($( [ "$fake" = 1 ] && echo "fake runtime" || nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), FRACTION $frac)"
awk '
	function v(k,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "-" }
	$1 == "release" { rel = rel sprintf(" %s in %s ms;", v("handed_back"), v("ms")) }
	$1 == "reclaim" { rec = rec sprintf(" %s in %s s (B %s s);", v("gave"), v("gave_s"), v("b_malloc_s")) }
	$1 == "decay" && v("skipped") == "-" { dec[v("conf")] = dec[v("conf")] " " v("step_ms") }
	END {
		printf "%-34s %s\n", "release (gpupool-stat --release):", rel
		printf "%-34s %s\n", "reclaim (A gave, for B):", rec
		printf "%-34s %s\n", "step ms, decay on (decay_ms:10000):", dec["decay_ms:10000"]
		printf "%-34s %s\n", "step ms, decay off (decay_ms:0):", dec["decay_ms:0"]
	}' "$txt"
