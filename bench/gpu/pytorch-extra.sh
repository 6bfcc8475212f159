#!/usr/bin/env bash
# The second GPU batch: training runs again with and without gpupool (for the run-to-run
# spread, after the pool's latest change), PyTorch's pluggable-allocator mode beside its
# default allocator, and the batch-size finder under an 8 GiB limit. Logs go to DIR.
#   bench/gpu/pytorch-extra.sh DIR
set -u
O=${1:-/tmp/gpu-extra}
mkdir -p "$O"
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
LIB=$(scripts/build-gpu-lib build-gpu 2>"$O/build.log") || { echo "build failed"; exit 1; }
export GPUPOOL_LIB=$LIB
run() { # NAME CMD...: one program, its key lines echoed
	local name=$1
	shift
	timeout 170 "$@" >"$O/$name.log" 2>&1
	echo "$name rc=$? $(grep -hE '^(model=|step_ms|peak|answer|probes|grow-by-2)' "$O/$name.log" | tr '\n' ' ' | cut -c1-400)"
}
for model in resnet50 gpt2; do
	for mode in default nocache; do
		run "train-$model-$mode-shim0" python3 bench/gpu/train.py --model $model --mode $mode --warmup 5 --steps 15
		GPUPOOL_REPORT=$O/train-$model-$mode.json LD_PRELOAD=$LIB \
			run "train-$model-$mode-shim1" python3 bench/gpu/train.py --model $model --mode $mode --warmup 5 --steps 15
	done
done
for model in resnet50 gpt2; do
	for mode in default gpupool; do
		GPUPOOL_REPORT=$O/pluggable-$model-$mode.json \
			run "pluggable-$model-$mode" python3 bench/gpu/torch_pluggable.py $mode --model $model --warmup 5 --steps 20
	done
done
run maxbatch-resnet50-8G scripts/gpupool-maxbatch --limit 8G --timeout 120 -- python3 bench/gpu/maxbatch_resnet.py {}
tail -30 "$O/maxbatch-resnet50-8G.log"
