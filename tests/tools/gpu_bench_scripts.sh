#!/usr/bin/env bash
# The GPU benchmark scripts (bench/gpu/) checked where there is no GPU and no torch: they
# compile, refuse bad arguments with a message and exit 2 before importing torch or building
# anything, the workloads draw the same shapes in every run within their ranges, and
# steps_table.py makes the table from logs and exit reports, and vmm_cost.py runs its calls
# on the fake driver (FAKE_DIR: the build's tests/fake, where libcuda.so.1 is).
#   gpu_bench_scripts.sh SOURCE_ROOT [FAKE_DIR]
set -u
src=${1:?usage: gpu_bench_scripts.sh SOURCE_ROOT [FAKE_DIR]}
fake=${2:-}
g=$src/bench/gpu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

PYTHONPYCACHEPREFIX=$tmp/pyc python3 -m py_compile "$g"/*.py && ok "py_compile" || bad "py_compile"
bash -n "$g/steps.sh" && ok "bash -n steps.sh" || bad "bash -n steps.sh"
bash -n "$g/sharing.sh" && ok "bash -n sharing.sh" || bad "bash -n sharing.sh"
bash -n "$g/vmm.sh" && ok "bash -n vmm.sh" || bad "bash -n vmm.sh"

# exit 2 and one message, before any build or GPU work
expect2() { # DESC CMD...
	local desc=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc = 2 ] && [ -n "$out" ] && ! grep -q Traceback <<<"$out"; then ok "$desc"; else bad "$desc: rc=$rc: $out"; fi
}
expect2 "steps.sh without OUTDIR" "$g/steps.sh"
expect2 "steps.sh unknown model" "$g/steps.sh" "$tmp/o" 1 bogus
expect2 "steps.sh unknown configuration" env CONFIGS=default,bogus "$g/steps.sh" "$tmp/o" 1 bert
expect2 "steps.sh bad ROUND0" env ROUND0=x "$g/steps.sh" "$tmp/o" 1 bert
expect2 "train.py unknown model" python3 "$g/train.py" --model bogus --mode default
expect2 "train.py --steps 0" python3 "$g/train.py" --model bert --mode default --steps 0
expect2 "lag.py unknown mode" python3 "$g/lag.py" --model llama --mode async
expect2 "torch_pluggable.py --steps 0" python3 "$g/torch_pluggable.py" default --model bert --steps 0
# the sharing stage's scripts (scripts/gpu-suite sharing)
expect2 "sharing.sh unknown part" "$g/sharing.sh" "$tmp/o" bogus
expect2 "sharing.sh FRACTION out of range" env FRACTION=1.5 "$g/sharing.sh" "$tmp/o" suite
expect2 "sharing.sh STEPS 0" env STEPS=0 "$g/sharing.sh" "$tmp/o" suite
expect2 "cap_paths.py unknown mode" python3 "$g/cap_paths.py" bogus
expect2 "cap_paths.py --fraction 0" python3 "$g/cap_paths.py" jax --fraction 0
expect2 "share_cupy.py 0 GiB" python3 "$g/share_cupy.py" hold 0
expect2 "share_table.py without OUTDIR" python3 "$g/share_table.py"

# share_table.py: the verdicts from the logs and exit reports sharing.sh suite leaves
o=$tmp/share
rep() { echo "{\"processes\":[{\"pid\":1,\"devices\":[{\"device\":0$1}]}]}" >"$2"; }
mkdir -p "$o"
echo "fraction=0.6 total_mib=81559 gib=47" >"$o/suite.txt"
for m in default empty expandable torchmode cpp cupy; do
	mkdir -p "$o/suite-$m"
	echo "ready=1 reserved=50465865728" >"$o/suite-$m/a.log"
	printf 'ok=1 seconds=0.1400 gib=47\nb_rc=0\n' >"$o/suite-$m/b.log"
	rep ',"reclaim_given_bytes":18253611008,"framework_empties":1' "$o/suite-$m/a.json"
	rep ',"reclaim_asks":1' "$o/suite-$m/b.json"
done
printf 'ok=0 seconds=2.0100 gib=47 error=OutOfMemoryError\nb_rc=3\n' >"$o/suite-expandable/b.log"
echo "skip=1 reason=no_cupy" >"$o/suite-cupy/a.log"
rm "$o/suite-cupy/b.log"
mkdir -p "$o/suite-train-alone" "$o/suite-train-asked"
printf 'step=299 ms=3.1 t=9.0 loss=1.0e+00\ndone=1 loss_sum=3.141592653589e+02\n' >"$o/suite-train-alone/a.log"
cp "$o/suite-train-alone/a.log" "$o/suite-train-asked/a.log"
printf 'ok=1 seconds=0.2100 gib=47\nb_rc=0\n' >"$o/suite-train-asked/b.log"
rep ',"reclaim_given_bytes":17179869184,"framework_empties":1' "$o/suite-train-asked/a.json"
t=$(python3 "$g/share_table.py" "$o" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q '^PASS share/default (B got 47 GiB in 0.1400 s; A gave 17.0 GiB' <<<"$t" &&
	grep -q '^FAIL share/expandable (B did not get 47 GiB' <<<"$t" && grep -q '^SKIP share/cupy' <<<"$t" &&
	grep -q '^PASS share/train' <<<"$t" && grep -qF '| PyTorch, expandable_segments:True | out of memory |' <<<"$t" &&
	ok "share_table verdicts" || bad "share_table verdicts: rc=$rc: $t"
printf 'ok=1 seconds=0.1 gib=47\nb_rc=0\n' >"$o/suite-expandable/b.log"
echo "done=1 loss_sum=3.141592653590e+02" >"$o/suite-train-asked/a.log"
t=$(python3 "$g/share_table.py" "$o" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q '^FAIL share/train' <<<"$t" && grep -qF 'loss sum DIFFERS' <<<"$t" &&
	ok "share_table: a loss sum that moved fails" || bad "share_table loss sum: rc=$rc: $t"
cp "$o/suite-train-alone/a.log" "$o/suite-train-asked/a.log"
python3 "$g/share_table.py" "$o" >/dev/null 2>&1 && ok "share_table: all pass" || bad "share_table: all pass"
expect2 "steps.sh unknown -gpw configuration" env CONFIGS=default-gpw "$g/steps.sh" "$tmp/o" 1 bert
expect2 "vmm.sh without OUTDIR" "$g/vmm.sh"
expect2 "vmm.sh bad ROUNDS" "$g/vmm.sh" "$tmp/o" 0
expect2 "vmm.sh unknown part" env PARTS=cost,bogus "$g/vmm.sh" "$tmp/o"
expect2 "vmm_cost.py --chunks 0" python3 "$g/vmm_cost.py" --chunks 0
expect2 "vmm_cost.py --handle-chunks not dividing --chunks" python3 "$g/vmm_cost.py" --handle-chunks 3
expect2 "vmm_cost.py --handle-chunks not a number" python3 "$g/vmm_cost.py" --handle-chunks 4,x
expect2 "scattered.py --fraction 2" python3 "$g/scattered.py" --mode pluggable --fraction 2
expect2 "scattered.py unknown mode" python3 "$g/scattered.py" --mode bogus

# vmm_cost.py's calls on the fake driver: the same flow as on a GPU, a line of figures
if [ -n "$fake" ] && [ -e "$fake/libcuda.so.1" ]; then
	out=$(LD_LIBRARY_PATH=$fake FAKECUDA_DEVICES=1 python3 "$g/vmm_cost.py" --chunks 8 --rounds 2 2>&1)
	if [ $? = 0 ] && grep -qE '^vmm_cost gran=2097152 chunks=8 map_us=[0-9.]+ access_us=[0-9.]+ unmap_us=[0-9.]+' <<<"$out"; then
		ok "vmm_cost.py on the fake driver"
	else
		bad "vmm_cost.py on the fake driver: $out"
	fi
	# handles of several chunks: a line per size, and one for an unmap over several mappings
	out=$(LD_LIBRARY_PATH=$fake FAKECUDA_DEVICES=1 python3 "$g/vmm_cost.py" --chunks 8 --rounds 2 --handle-chunks 1,4,8 2>&1)
	if [ $? = 0 ] && [ "$(grep -cE '^vmm_cost_handle gran=2097152 chunks=8 handle_chunks=(1|4|8) map_us=[0-9.]+ access_us=[0-9.]+ unmap_us=[0-9.]+' <<<"$out")" = 3 ] &&
		grep -qE '^vmm_cost_span gran=2097152 chunks=8 (unmap_us=[0-9.]+|refused)' <<<"$out"; then
		ok "vmm_cost.py --handle-chunks on the fake driver"
	else
		bad "vmm_cost.py --handle-chunks on the fake driver: $out"
	fi
fi

# the shape plans: fixed by the seed, inside the ranges workloads.py states
PYTHONPYCACHEPREFIX=$tmp/pyc python3 - "$g" <<'PY' && ok "workload shapes" || bad "workload shapes"
import sys, types
sys.modules["torch"] = types.ModuleType("torch")  # the plans need no torch
sys.path.insert(0, sys.argv[1])
import workloads as w
a = w.shapes(w.BERT_SEED, 20, w.BERT_PASSES, (1, 32), (16, 512))
assert a == w.shapes(w.BERT_SEED, 20, w.BERT_PASSES, (1, 32), (16, 512)), "bert plan not repeatable"
assert len(a) == 20 and all(len(s) == 8 for s in a), "bert: 8 passes per step"
assert all(1 <= b <= 32 and 16 <= n <= 512 for s in a for b, n in s), "bert shape out of range"
assert len({p for s in a for p in s}) > 100, "bert shapes do not vary"
assert a[:5] == w.shapes(w.BERT_SEED, 5, w.BERT_PASSES, (1, 32), (16, 512)), "a shorter run is not a prefix"
l = w.shapes(w.LLAMA_SEED, 10, 1, (1, 4), (32, 256))
assert all(1 <= b <= 4 and 32 <= n <= 256 for s in l for b, n in s), "llama shape out of range"
assert set(w.MODELS) == {"resnet50", "gpt2", "bert", "llama"}
PY

# steps_table.py: medians over rounds, the report's peak for gpupool runs, a failed run
o=$tmp/steps
mkdir -p "$o"
line() { echo "model=$1 mode=x shim=0 step_ms=$2 step_ms_min=1 step_ms_max=1 steps=3 peak_reserved=$3 peak_allocated=${4:-0}"; }
line bert 500.00 2147483648 >"$o/r1-bert-default.log"
line gpt2 60.00 1073741824 >"$o/r1-gpt2-pluggable-whole.log"
echo '{"version":1,"processes":[{"pid":1,"devices":[{"device":0,"reserved_bytes_peak":536870912}]}]}' >"$o/r1-gpt2-pluggable-whole.json"
line bert 540.00 2147483648 >"$o/r2-bert-default.log"
line bert 700.00 2147483648 >"$o/r3-bert-default.log"
line bert 520.00 1610612736 1073741824 >"$o/r1-bert-expandable.log"
line bert 400.00 0 >"$o/r1-bert-nocache-gp.log"
line bert 300.00 0 >"$o/r2-bert-nocache-gp.log"
echo '{"version":1,"processes":[{"pid":1,"devices":[{"device":0,"reserved_bytes_peak":1073741824}]}]}' >"$o/r1-bert-nocache-gp.json"
echo '{"version":1,"processes":[{"pid":1,"devices":[{"device":0,"reserved_bytes_peak":3221225472}]}]}' >"$o/r2-bert-nocache-gp.json"
echo "Traceback (most recent call last):" >"$o/r1-llama-pluggable.log"
t=$(python3 "$g/steps_table.py" "$o" 2>&1)
grep -qF '| bert | default | 3 | 540.0 (500.0-700.0) | 2.00 | n/a | 1.00 |' <<<"$t" &&
	grep -qF '| bert | expandable | 1 | 520.0 (520.0-520.0) | 1.50 | 1.00 | 0.96 |' <<<"$t" &&
	grep -qF '| bert | nocache-gp | 2 | 350.0 (300.0-400.0) | 2.00 | n/a | 0.65 |' <<<"$t" &&
	grep -qF '| llama | pluggable | 0 (1 failed) | failed | | | |' <<<"$t" &&
	grep -qF '| gpt2 | pluggable-whole | 1 | 60.0 (60.0-60.0) | 0.50 | n/a | n/a |' <<<"$t" && ok "steps_table" || bad "steps_table: $t"
expect2 "steps_table.py without OUTDIR" python3 "$g/steps_table.py"
python3 "$g/steps_table.py" "$tmp/none" >/dev/null 2>&1
[ $? = 1 ] && ok "steps_table.py missing dir" || bad "steps_table.py missing dir"
# giveback.sh (docs/sharing.md's figures): bad arguments, then, where the build's library and
# gpupool-stat are given (Meson gives them outside the sanitizers), one round of its release
# and reclaim parts over the fake runtime, and its table
bash -n "$g/giveback.sh" && ok "bash -n giveback.sh" || bad "bash -n giveback.sh"
expect2 "giveback.sh without OUTDIR" "$g/giveback.sh"
expect2 "giveback.sh unknown part" "$g/giveback.sh" "$tmp/gb" bogus
expect2 "giveback.sh bad FRACTION" env FRACTION=1.5 "$g/giveback.sh" "$tmp/gb" --fake
expect2 "giveback.sh bad ROUNDS" env ROUNDS=0 "$g/giveback.sh" "$tmp/gb" --fake
expect2 "giveback_hold.py bad fraction" python3 "$g/giveback_hold.py" hold 2
if [ -n "${GPUPOOL_TEST_LIB:-}" ] && [ -n "${GPUPOOL_TEST_STAT:-}" ]; then
	t=$(ROUNDS=1 GPUPOOL_LIB=$GPUPOOL_TEST_LIB GPUPOOL_STAT=$GPUPOOL_TEST_STAT FAKECUDA_CAPACITY=3G \
		"$g/giveback.sh" "$tmp/gb" --fake release reclaim decay 2>&1)
	grep -q "^release round=1 held=1073741824 ms=[0-9.]* handed_back=1.0GiB$" "$tmp/gb/giveback.txt" &&
		grep -q "^reclaim round=1 held=1073741824 gave=[0-9.]*[KMG]iB gave_s=[0-9.]* b_ok=1 b_malloc_s=[0-9.]*$" "$tmp/gb/giveback.txt" &&
		grep -q "^decay round=1 skipped=fake$" "$tmp/gb/giveback.txt" &&
		grep -q "^release (gpupool-stat --release): *1.0GiB in [0-9.]* ms;$" <<<"$t" &&
		ok "giveback.sh --fake" || bad "giveback.sh --fake: $t $(cat "$tmp/gb/giveback.txt")"
else
	echo "SKIP: giveback.sh --fake (GPUPOOL_TEST_LIB, GPUPOOL_TEST_STAT not set)"
fi
exit $fail
