#!/usr/bin/env bash
# Which programs gpupool reaches through the driver layer: each reach_*.py run without and with
# the shim (LD_PRELOAD=LIB, default build-gpu/src/libgpupool.so), logs in OUTDIR, then a table:
# program, how it allocates, served (the pool counted its allocations), result equal (the
# checksum is identical with and without), time without/with, peak reserved by the pool.
# A program whose framework is not installed is "skipped".
# usage: bench/gpu/reach.sh OUTDIR [LIB]
set -uo pipefail
out=${1:?usage: reach.sh OUTDIR [LIB]}
here=$(cd "$(dirname "$0")" && pwd)
lib=${2:-$here/../../build-gpu/src/libgpupool.so}
[ -e "$lib" ] || { echo "reach.sh: $lib not found (scripts/build-gpu-lib build-gpu)" >&2; exit 2; }
mkdir -p "$out"
PY=${PY:-python3}
TO=${REACH_TIMEOUT:-300}
unset LD_PRELOAD GPUPOOL_CONF GPUPOOL_DISABLE

# name | how it allocates | environment | script and arguments
cases=(
	"cupy-pool|CuPy's pool over cuMemAlloc||reach_cupy.py default"
	"cupy-none|CuPy set_allocator(None): cuMemAlloc per array||reach_cupy.py none"
	"numba|Numba device_array (ctypes dlsym on libcuda)||reach_numba.py"
	"jax-platform|JAX XLA_PYTHON_CLIENT_ALLOCATOR=platform|XLA_PYTHON_CLIENT_ALLOCATOR=platform|reach_jax.py"
	"jax-prealloc|JAX default preallocation (75% of cuMemGetInfo)||reach_jax.py"
	"jax-prealloc-limit4G|JAX preallocation under GPUPOOL_CONF=limit:4G|GPUPOOL_CONF=limit:4G|reach_jax.py"
	"cuda-python|cuda.bindings.driver cuMemAlloc (cuGetProcAddress_v2)||reach_cudapython.py"
)

field() { awk -v k="$1" '$1 == k {print $2; exit}' "$2" 2>/dev/null; }

printf '%-22s %-52s %-7s %-6s %9s %9s %14s\n' program "how it allocates" served equal "time w/o" "time w/" "peak reserved"
for c in "${cases[@]}"; do
	IFS='|' read -r name how envs script <<<"$c"
	a=$out/$name-without.log b=$out/$name-with.log
	# shellcheck disable=SC2086 # the case's variables and arguments
	(cd "$here" && timeout -k 5 "$TO" env $envs $PY $script) >"$a" 2>&1
	ra=$?
	if [ $ra -ne 0 ] && grep -qE "ModuleNotFoundError|ImportError" "$a"; then
		printf '%-22s %-52s %-7s\n' "$name" "$how" skipped
		continue
	fi
	# shellcheck disable=SC2086
	(cd "$here" && timeout -k 5 "$TO" env $envs LD_PRELOAD="$lib" GPUPOOL_REPORT="$out/$name.report.json" $PY $script) >"$b" 2>&1
	rb=$?
	pool=$(grep -m1 '^pool ' "$b" | cut -d' ' -f2-)
	served=no
	if [ -n "$pool" ] && [ "$pool" != none ] && [ "$(echo "$pool" | cut -d' ' -f1)" -gt 0 ]; then served=yes; fi
	equal=no
	[ $ra -eq 0 ] && [ $rb -eq 0 ] && [ "$(field result "$a")" = "$(field result "$b")" ] && equal=yes
	[ $ra -ne 0 ] && equal="w/o:$ra"
	[ $rb -ne 0 ] && equal="w/:$rb"
	peak=-
	[ "$served" = yes ] && peak=$(echo "$pool" | awk '{printf "%.1f MiB", $3 / 1048576}')
	printf '%-22s %-52s %-7s %-6s %9s %9s %14s\n' "$name" "$how" "$served" "$equal" "$(field time_s "$a")" "$(field time_s "$b")" "$peak"
done
echo "(logs and exit reports: $out; the pool line of each log: allocs driver_allocs peak_reserved limit)"
