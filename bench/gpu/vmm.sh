#!/usr/bin/env bash
# The GPU figures of gpupool's virtual-memory segments (segments:auto, the default), in one
# call: what the driver's virtual memory calls cost here, how much of a scattered cache goes
# back on a release, and step time and peak reserved memory against PyTorch's expandable
# segments, interleaved. Parts, in this order (PARTS picks some, comma-separated):
#   cost       bench/gpu/vmm_cost.py: host us per 2 MiB chunk mapped and unmapped, the
#              figure gpupool-replay --vmm-cost-us models, then the same with handles of
#              1, 4, 16, 64 and 256 chunks, interleaved (OUTDIR/vmm_cost.log)
#   scattered  bench/gpu/scattered.py under gpupool as PyTorch's allocator (segments:auto and
#              segments:whole, then gpupool.release()) and PyTorch's default and expandable
#              segments (torch.cuda.empty_cache()): the share of the free cache given back
#              (OUTDIR/scattered-*.log)
#   steps      bench/gpu/steps.sh with CONFIGS=expandable,pluggable (STEP_CONFIGS to change),
#              ROUNDS rounds (default 3) of resnet50, gpt2, bert and llama, interleaved
#              (OUTDIR/steps)
#   nocache    steps.sh, one round of the four models under PyTorch's caching off, gpupool
#              preloaded, segments:auto and segments:vmm (nocache-gp, nocache-gpv): the ratio
#              of peak reserved to PyTorch's peak allocated under cudaFree semantics
#              (OUTDIR/steps, rounds 9; NOCACHE_CONFIGS to change)
#   trace      GPT-2 as PyTorch's allocator (train.py --mode pluggable) with gpupool's trace
#              on (OUTDIR/pluggable_gpt2_train.csv.gz and its exit report): the requests of
#              the steps' pluggable run, for gpupool-replay --vmm-cost-us with the cost part's
#              figures, whose peak should be the run's
# Prints the tables last: the steps table (bench/gpu/steps_table.py), the scattered lines, the
# cost line. GPUPOOL_LIB names the library (else scripts/build-gpu-lib builds one).
#
#   bench/gpu/vmm.sh OUTDIR [ROUNDS]
#
# Time on an H100 (the processes of section 28's run, BENCHMARKS.md): a steps process takes
# resnet50 9-21 s, gpt2 14-19 s, bert 16-18 s, llama 56-71 s (6 steps; STEPS_llama=4
# WARMUP_llama=1 about 40 s), so a round of the four models under two configurations is
# about 4 minutes and three rounds 12; nocache 8 processes, about 3 minutes; cost and
# trace under a minute each. More than one 10-minute call: split it with PARTS and ROUND0
# (steps.sh), or start it in the background and collect it over several calls.
set -u
case "${1:-}" in
-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
"" | -*) echo "usage: bench/gpu/vmm.sh OUTDIR [ROUNDS]" >&2; exit 2 ;;
esac
O=$1
ROUNDS=${2:-3}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "vmm.sh: ROUNDS must be a number from 1" >&2; exit 2; }
PARTS=${PARTS:-cost,scattered,steps,nocache,trace}
IFS=, read -ra PS <<<"$PARTS"
for p in "${PS[@]}"; do
	case $p in cost | scattered | steps | nocache | trace) ;; *) echo "vmm.sh: unknown part '$p' (cost, scattered, steps, nocache, trace)" >&2; exit 2 ;; esac
done
has() { [[ ",$PARTS," == *",$1,"* ]]; }
mkdir -p "$O" || exit 2
O=$(cd "$O" && pwd)
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
if [ -z "${GPUPOOL_LIB:-}" ]; then
	GPUPOOL_LIB=$(scripts/build-gpu-lib build-gpu 2>"$O/build.log") ||
		{ echo "vmm.sh: build failed"; tail -20 "$O/build.log"; exit 1; }
fi
export GPUPOOL_LIB
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$O/smi.csv" 2>&1

if has cost; then
	timeout 300 python3 bench/gpu/vmm_cost.py --handle-chunks 1,4,16,64,256 >"$O/vmm_cost.log" 2>&1
	echo "cost rc=$? $(grep -h '^vmm_cost ' "$O/vmm_cost.log")"
fi
if has scattered; then
	for c in pluggable:auto pluggable:whole default: expandable:; do
		mode=${c%%:*} seg=${c#*:}
		name=scattered-$mode${seg:+-$seg}
		if [ -n "$seg" ]; then
			GPUPOOL_CONF=segments:$seg GPUPOOL_REPORT=none timeout 180 python3 bench/gpu/scattered.py --mode "$mode" >"$O/$name.log" 2>&1
		else
			timeout 180 python3 bench/gpu/scattered.py --mode "$mode" >"$O/$name.log" 2>&1
		fi
		echo "$name rc=$? $(grep -h '^scattered' "$O/$name.log")"
	done
fi
if has steps; then
	CONFIGS=${STEP_CONFIGS:-expandable,pluggable} bench/gpu/steps.sh "$O/steps" "$ROUNDS" resnet50 gpt2 bert llama >"$O/steps.out" 2>&1
	echo "steps rc=$?"
fi
if has nocache; then
	CONFIGS=${NOCACHE_CONFIGS:-nocache-gp,nocache-gpv} ROUND0=9 bench/gpu/steps.sh "$O/steps" 1 resnet50 gpt2 bert llama >"$O/nocache.out" 2>&1
	echo "nocache rc=$?"
fi
if has trace; then
	GPUPOOL_CONF=trace:$O/pluggable_gpt2_train.csv.gz GPUPOOL_REPORT=$O/trace-gpt2.json timeout 300 \
		python3 bench/gpu/train.py --model gpt2 --mode pluggable >"$O/trace-gpt2.log" 2>&1
	echo "trace rc=$? $(grep -h '^model=' "$O/trace-gpt2.log")"
fi
echo
[ -d "$O/steps" ] && python3 bench/gpu/steps_table.py "$O/steps"
grep -h '^scattered' "$O"/scattered-*.log 2>/dev/null
grep -h '^vmm_cost' "$O/vmm_cost.log" 2>/dev/null # both kinds of line
exit 0
