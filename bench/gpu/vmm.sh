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
# Prints the tables last: the steps table (bench/gpu/steps_table.py), the scattered lines, the
# cost line. GPUPOOL_LIB names the library (else scripts/build-gpu-lib builds one).
#
#   bench/gpu/vmm.sh OUTDIR [ROUNDS]
#
# Time on an H100 (estimated from the step times of ANCHORS.md, not measured): cost 10-20 s;
# scattered 4 processes of 10-20 s; steps 3 rounds x 4 models x 2 configurations = 24
# processes of 6-15 s (Python, torch and the model first, then 20 short steps, or bert's and
# llama's longer ones) = 4-5 min; nocache 8 processes, 1.5 min. About 7-8 minutes in all.
set -u
case "${1:-}" in
-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
"" | -*) echo "usage: bench/gpu/vmm.sh OUTDIR [ROUNDS]" >&2; exit 2 ;;
esac
O=$1
ROUNDS=${2:-3}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "vmm.sh: ROUNDS must be a number from 1" >&2; exit 2; }
PARTS=${PARTS:-cost,scattered,steps,nocache}
IFS=, read -ra PS <<<"$PARTS"
for p in "${PS[@]}"; do
	case $p in cost | scattered | steps | nocache) ;; *) echo "vmm.sh: unknown part '$p' (cost, scattered, steps, nocache)" >&2; exit 2 ;; esac
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
echo
[ -d "$O/steps" ] && python3 bench/gpu/steps_table.py "$O/steps"
grep -h '^scattered' "$O"/scattered-*.log 2>/dev/null
grep -h '^vmm_cost' "$O/vmm_cost.log" 2>/dev/null # both kinds of line
exit 0
