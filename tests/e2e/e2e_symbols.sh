#!/bin/sh
# Exported symbols: libgpupool.so exports exactly the names of the global section of
# src/libgpupool.map (the interposed CUDA runtime and driver entry points, dlsym and
# gpupool_*), all unversioned, so
# that references bound to cudaMalloc@libcudart.so.13 reach them. And it holds only what a
# preloaded process runs: no replay engine, trace reader or fake backend, no zlib needed.
# usage: e2e_symbols.sh LIBGPUPOOL MAPFILE
set -u
lib=$1 map=$2
got=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
want=$(sed -n '/global:/,/local:/p' "$map" | grep -o '^[[:space:]]*[A-Za-z_][A-Za-z_0-9]*;' | tr -d ' \t;' | sort)
fail=0
[ -n "$want" ] || { echo "no names found in $map"; exit 1; }
if [ "$got" != "$want" ]; then
	echo "exported names differ from $map (< exported, > map):"
	printf '%s\n' "$got" >/tmp/gpupool-sym-got.$$; printf '%s\n' "$want" >/tmp/gpupool-sym-want.$$
	diff /tmp/gpupool-sym-got.$$ /tmp/gpupool-sym-want.$$
	rm -f /tmp/gpupool-sym-got.$$ /tmp/gpupool-sym-want.$$
	fail=1
fi
for n in $got; do
	case $n in
	cuda*|gpupool_*|cu[A-Z]*|dlsym) ;;
	*) echo "unexpected export: $n"; fail=1 ;;
	esac
	case $n in *@*) echo "versioned export: $n"; fail=1 ;; esac
done
if readelf -V "$lib" | grep -q "Version definition"; then
	echo "$lib defines symbol versions"; fail=1
fi
# every export is a function
nonfunc=$(nm -D --defined-only "$lib" | awk '$2 != "T" {print $3}')
[ -z "$nonfunc" ] || { echo "exports that are not functions: $nonfunc"; fail=1; }
# only the layers a preloaded process runs (src/meson.build)
extra=$(nm "$lib" | awk '{print $NF}' | grep -E '^(gp_replay|gp_tracefile|gp_fake_backend)' | sort -u)
[ -z "$extra" ] || { echo "code a preloaded process never runs is linked in: $(echo $extra)"; fail=1; }
if readelf -d "$lib" | grep NEEDED | grep -q 'libz\.'; then
	echo "zlib is a load-time dependency: $(readelf -d "$lib" | grep NEEDED | grep libz)"; fail=1
fi
[ $fail -eq 0 ] && echo "$(printf '%s\n' "$got" | wc -l) exports, all unversioned, as in the map; no replay, trace-reader or fake-backend code; zlib not needed at load"
exit $fail
