#!/usr/bin/env bash
# Step time and peak reserved memory of the workloads (workloads.py) under PyTorch's
# allocators and under gpupool, interleaved: in each round, for each model, each
# configuration runs once, in this order (one process each):
#   default         PyTorch's caching allocator
#   expandable      PyTorch's caching allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
#   nocache-gp      PYTORCH_NO_CUDA_MEMORY_CACHING=1 under LD_PRELOAD=libgpupool.so
#   empty_cache-gp  torch.cuda.empty_cache() after every step, under LD_PRELOAD
#   nocache         caching off, no gpupool: every tensor a cudaMalloc/cudaFree (slow; only
#                   with --slow or when CONFIGS names it)
#   empty_cache     empty_cache() after every step, no gpupool
#   async-gp        PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync under LD_PRELOAD
#   pluggable       gpupool as PyTorch's allocator (train.py --mode pluggable)
#   nocache-gpl     nocache-gp with GPUPOOL_CONF=legacy_stream:1 (PyTorch issues all its work on
#                   the legacy stream: cudaFree'd blocks reused in its order, no fence)
#   empty_cache-gpl empty_cache-gp with GPUPOOL_CONF=legacy_stream:1
#   default-gp      PyTorch's caching allocator under LD_PRELOAD (its segments from the pool)
#   expandable-gp   expandable_segments:True under LD_PRELOAD (its memory counted, not pooled)
#   pluggable-whole pluggable with GPUPOOL_CONF=segments:whole (the pool before virtual-memory
#                   segments: one cudaMalloc per segment)
#   nocache-gpw     nocache-gp with GPUPOOL_CONF=segments:whole
#   nocache-gpv     nocache-gp with GPUPOOL_CONF=segments:vmm (every cudaMalloc in chunks)
# Every gpupool run writes its exit report as JSON (GPUPOOL_REPORT) next to its log; the
# peak reserved of a gpupool run is the pool's reserved_bytes_peak from it, else PyTorch's
# max_memory_reserved. bench/gpu/steps_table.py OUTDIR... prints the table.
#
#   bench/gpu/steps.sh [--slow] OUTDIR [ROUNDS] [MODELS...]     ROUNDS 3, MODELS all four
#   bench/gpu/steps.sh --traces OUTDIR [MODELS...]   gpupool traces of the workloads under
#                   nocache (GPUPOOL_CONF=trace:...): OUTDIR/nocache_<model>_<kind>.csv.gz
#   bench/gpu/steps.sh --lag OUTDIR [MODELS...]      lag.py under nocache and default
# Environment: CONFIGS (comma-separated names from the list above; default all but
# nocache), WARMUP_<model> and STEPS_<model> (defaults below), ROUND0 (first round's
# number, 1: give each call its own range when several calls fill one table),
# GPUPOOL_LIB (else scripts/build-gpu-lib builds one).
#
# Time on an H200 (estimates from ANCHORS.md's step times, not measured): a process costs
# 5-10 s before its first step (Python, torch, transformers, the model); the steps add
# resnet50 20 x ~29 ms = 0.6 s, gpt2 20 x ~60 ms = 1.2 s, bert 10 x 0.42-0.62 s = 4-6 s,
# llama 8 steps of 128 generated tokens, ~0.5-1 s each by our estimate (an 8-layer decoder
# step is host-bound: ~4-7 ms per token) = 4-8 s. One round of all four models and the six
# default configurations is 24 processes, about 4-6 minutes: more than half of a 10-minute
# call. Fits in one call (about 8 minutes at most):
#   CONFIGS=default,nocache-gp,empty_cache-gp,pluggable bench/gpu/steps.sh $OUT/steps 2 bert llama
# and the rest in calls of their own, with ROUND0 set so rounds do not collide, e.g.
#   ROUND0=1 bench/gpu/steps.sh $OUT/steps 1 resnet50 gpt2
# A run that takes longer than 300 s is stopped (timeout) and counted as failed.
set -u
slow=0 what=steps
case "${1:-}" in
--slow) slow=1; shift ;;
--traces) what=traces; shift ;;
--lag) what=lag; shift ;;
-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
[ $# -ge 1 ] || { echo "usage: bench/gpu/steps.sh [--slow|--traces|--lag] OUTDIR [ROUNDS] [MODELS...]" >&2; exit 2; }
O=$1
shift
ROUNDS=3
if [ "$what" = steps ] && [ $# -ge 1 ] && [[ $1 =~ ^[0-9]+$ ]]; then
	ROUNDS=$1
	shift
fi
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(resnet50 gpt2 bert llama)
for m in "${MODELS[@]}"; do
	case $m in resnet50 | gpt2 | bert | llama) ;; *) echo "steps.sh: unknown model '$m' (resnet50, gpt2, bert, llama)" >&2; exit 2 ;; esac
done
ALL=default,expandable,nocache-gp,empty_cache-gp,nocache,empty_cache,async-gp,pluggable,nocache-gpl,empty_cache-gpl,default-gp,expandable-gp,pluggable-whole,nocache-gpw,nocache-gpv
if [ -n "${CONFIGS:-}" ]; then
	IFS=, read -ra CFGS <<<"$CONFIGS"
	for c in "${CFGS[@]}"; do
		[[ ",$ALL," == *",$c,"* ]] || { echo "steps.sh: unknown configuration '$c' (one of $ALL)" >&2; exit 2; }
	done
else
	IFS=, read -ra CFGS <<<"$ALL"
	if [ $slow = 0 ]; then
		keep=()
		for c in "${CFGS[@]}"; do [ "$c" = nocache ] || keep+=("$c"); done
		CFGS=("${keep[@]}")
	fi
fi
ROUND0=${ROUND0:-1}
[[ $ROUND0 =~ ^[0-9]+$ ]] || { echo "steps.sh: ROUND0 must be a number" >&2; exit 2; }

mkdir -p "$O" || exit 2
O=$(cd "$O" && pwd)
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
if [ -z "${GPUPOOL_LIB:-}" ]; then
	GPUPOOL_LIB=$(scripts/build-gpu-lib build-gpu 2>"$O/build.log") ||
		{ echo "steps.sh: build failed"; tail -20 "$O/build.log"; exit 1; }
fi
export GPUPOOL_LIB

warmup() { local v="WARMUP_$1" d; case $1 in resnet50 | gpt2) d=5 ;; bert) d=2 ;; llama) d=2 ;; esac; echo "${!v:-$d}"; }
steps() { local v="STEPS_$1" d; case $1 in resnet50 | gpt2) d=15 ;; bert) d=8 ;; llama) d=6 ;; esac; echo "${!v:-$d}"; }

# run NAME CMD...: one process, 300 s at most; prints its key line
run() {
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	timeout 300 "$@" >"$O/$name.log" 2>&1
	rc=$?
	echo "$name rc=$rc wall_s=$(($(date +%s) - t0)) $(grep -hE '^(model=|[a-z0-9]+\.(step_ms|peak_reserved)=)' "$O/$name.log" | tr '\n' ' ' | cut -c1-300)"
}

if [ "$what" = traces ]; then
	for m in "${MODELS[@]}"; do
		case $m in resnet50 | gpt2) k=train ;; bert) k=infer ;; llama) k=generate ;; esac
		GPUPOOL_CONF=trace:$O/nocache_${m}_$k.csv.gz GPUPOOL_REPORT=$O/trace-$m.json LD_PRELOAD=$GPUPOOL_LIB \
			run "trace-$m" python3 bench/gpu/train.py --model "$m" --mode nocache --warmup "$(warmup "$m")" --steps "$(steps "$m")"
		ls -l "$O/nocache_${m}_$k.csv.gz" 2>&1
	done
	exit 0
fi
if [ "$what" = lag ]; then
	for m in "${MODELS[@]}"; do
		for mode in nocache default; do
			run "lag-$m-$mode" python3 bench/gpu/lag.py --model "$m" --mode "$mode"
		done
	done
	exit 0
fi

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$O/smi.csv" 2>&1
for r in $(seq "$ROUND0" $((ROUND0 + ROUNDS - 1))); do
	for m in "${MODELS[@]}"; do
		w=$(warmup "$m") n=$(steps "$m")
		for c in "${CFGS[@]}"; do
			name=r$r-$m-$c
			nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >>"$O/smi.csv" 2>&1
			case $c in
			default | expandable | nocache | empty_cache)
				run "$name" python3 bench/gpu/train.py --model "$m" --mode "$c" --warmup "$w" --steps "$n" ;;
			*-gp)
				GPUPOOL_REPORT=$O/$name.json LD_PRELOAD=$GPUPOOL_LIB \
					run "$name" python3 bench/gpu/train.py --model "$m" --mode "${c%-gp}" --warmup "$w" --steps "$n" ;;
			*-gpl)
				GPUPOOL_CONF=legacy_stream:1 GPUPOOL_REPORT=$O/$name.json LD_PRELOAD=$GPUPOOL_LIB \
					run "$name" python3 bench/gpu/train.py --model "$m" --mode "${c%-gpl}" --warmup "$w" --steps "$n" ;;
			*-gpw | *-gpv)
				if [ "${c##*-}" = gpw ]; then seg=whole; else seg=vmm; fi
				GPUPOOL_CONF=segments:$seg GPUPOOL_REPORT=$O/$name.json LD_PRELOAD=$GPUPOOL_LIB \
					run "$name" python3 bench/gpu/train.py --model "$m" --mode "${c%-*}" --warmup "$w" --steps "$n" ;;
			pluggable-whole)
				GPUPOOL_CONF=segments:whole GPUPOOL_REPORT=$O/$name.json \
					run "$name" python3 bench/gpu/train.py --model "$m" --mode pluggable --warmup "$w" --steps "$n" ;;
			pluggable)
				GPUPOOL_REPORT=$O/$name.json \
					run "$name" python3 bench/gpu/train.py --model "$m" --mode pluggable --warmup "$w" --steps "$n" ;;
			esac
		done
	done
done
python3 bench/gpu/steps_table.py "$O"
