#!/usr/bin/env bash
# gpupool as PyTorch's allocator on the GPU machine: the Python helper's tests with torch, what
# PyTorch does with a NULL from a pluggable allocator, step time / peak / losses of ResNet-50
# and GPT-2 under PyTorch's default allocator and under gpupool, alternated ROUNDS times in
# one session, and the batch-size finder with gpupool as the allocator. Logs go to DIR.
#   bench/gpu/pytorch-pluggable.sh DIR [ROUNDS] [PARTS]   PARTS: tests,compare,maxbatch (default all)
set -u
O=${1:-/tmp/gpu-pluggable}
ROUNDS=${2:-3}
PARTS=${3:-tests,compare,maxbatch}
part() { [[ ",$PARTS," == *",$1,"* ]]; }
mkdir -p "$O"
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
GPUPOOL_LIB=$(scripts/build-gpu-lib build-gpu 2>"$O/build.log") ||
	{ echo "build failed"; tail -20 "$O/build.log"; exit 1; }
export GPUPOOL_LIB
key() { grep -hE "$1" "$2" | tr '\n' ' ' | cut -c1-600; }

if part tests; then
echo "== python/test_gpupool.py"
timeout 300 python3 -m unittest -v python/test_gpupool.py >"$O/pytest.log" 2>&1
echo "rc=$? $(grep -E '^(Ran|OK|FAILED)' "$O/pytest.log" | tr '\n' ' ')"
grep -E 'Torch|ERROR|FAIL' "$O/pytest.log" | head -20

echo "== a pluggable allocator returning NULL"
timeout 120 python3 bench/gpu/pluggable_null.py 2>&1 | tee "$O/null.log"
fi

if part compare; then
echo "== default vs gpupool, $ROUNDS rounds"
ROUNDS_GPT2=${ROUNDS_GPT2:-$ROUNDS}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu --format=csv >"$O/smi.csv" 2>&1
for r in $(seq 1 "$ROUNDS"); do
	for model in resnet50 gpt2; do
		[ "$model" = gpt2 ] && [ "$r" -gt "$ROUNDS_GPT2" ] && continue
		for mode in default gpupool; do
			nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >>"$O/smi.csv" 2>&1
			n=pluggable-$model-$mode-$r
			GPUPOOL_REPORT=$O/$n.json timeout 240 python3 bench/gpu/torch_pluggable.py $mode --model $model \
				--warmup 10 --steps 40 >"$O/$n.log" 2>&1
			echo "$n rc=$? $(key '\.(step_ms|step_ms_min|peak_reserved)=' "$O/$n.log")"
		done
	done
done
python3 - "$O" "$ROUNDS" "$ROUNDS_GPT2" <<'PY'
import statistics, sys
o = sys.argv[1]
def kv(path):
    out = {}
    for line in open(path):
        if "=" in line and line.split("=", 1)[0].count(".") == 1:
            k, v = line.strip().split("=", 1)
            out[k] = v
    return out
for model, rounds in (("resnet50", int(sys.argv[2])), ("gpt2", int(sys.argv[3]))):
    if rounds < 1:
        continue
    runs = {m: [kv("%s/pluggable-%s-%s-%d.log" % (o, model, m, r)) for r in range(1, rounds + 1)]
            for m in ("default", "gpupool")}
    ms = {m: [float(x[model + ".step_ms"]) for x in runs[m]] for m in runs}
    pk = {m: [int(x[model + ".peak_reserved"]) for x in runs[m]] for m in runs}
    same = all(x[model + ".losses"] == runs["default"][0][model + ".losses"] for m in runs for x in runs[m])
    dflt = all(x[model + ".losses"] == runs["default"][0][model + ".losses"] for x in runs["default"])
    d, g = statistics.median(ms["default"]), statistics.median(ms["gpupool"])
    mn = {m: min(float(x[model + ".step_ms_min"]) for x in runs[m]) for m in runs}
    print("%s fastest step: default %.2f gpupool %.2f (%+.1f%%)" % (
        model, mn["default"], mn["gpupool"], 100 * (mn["gpupool"] / mn["default"] - 1)))
    print("%s step_ms default %s gpupool %s | medians %.2f vs %.2f (%+.1f%%) | peak GB default %s gpupool %s"
          " | losses all identical: %s (default runs among themselves: %s)" % (
              model, " ".join("%.2f" % x for x in ms["default"]), " ".join("%.2f" % x for x in ms["gpupool"]),
              d, g, 100 * (g / d - 1), " ".join("%.2f" % (x / 1e9) for x in pk["default"]),
              " ".join("%.2f" % (x / 1e9) for x in pk["gpupool"]), same, dflt))
PY
fi

part maxbatch || exit 0
echo "== batch-size finder, gpupool as PyTorch's allocator, 8 GiB"
timeout 400 scripts/gpupool-maxbatch --limit 8G --min 128 --timeout 60 -- \
	python3 bench/gpu/maxbatch_resnet.py --allocator gpupool {} >"$O/maxbatch-gpupool-8G.log" 2>&1
echo "rc=$?"
cat "$O/maxbatch-gpupool-8G.log" | tail -20
