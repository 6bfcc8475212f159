#!/bin/sh
# Exported symbols: libgpupool.so exports exactly the names of the "exports:" list of
# src/hooks/libgpupool.map (the interposed CUDA runtime and driver entry points, dlsym and
# gpupool_*), all at the base version (unversioned to the dynamic linker), so that references
# bound to cudaMalloc@libcudart.so.13 reach them; and dlsym also as dlsym@GLIBC_2.34,
# dlsym@GLIBC_2.2.5 and dlsym@GLIBC_2.17 (non-default versions, for another interposer's
# dlvsym), the only versions it defines. And it holds only what a preloaded process runs: no
# replay engine, trace reader or fake backend, no zlib needed.
# usage: e2e_symbols.sh LIBGPUPOOL MAPFILE
set -u
lib=$1 map=$2
# nm -D: "ADDRESS TYPE NAME"; the version nodes are absolute symbols of their own (type A)
syms=$(nm -D --defined-only "$lib" | awk '$2 != "A"')
got=$(printf '%s\n' "$syms" | awk '{print $3}' | grep -v @ | sort)
versioned=$(printf '%s\n' "$syms" | awk '{print $3}' | grep @ | sort | tr '\n' ' ')
want=$(sed -n '/^ \* exports:/,/(end of exports)/p' "$map" | sed -n 's/^ \*   \([A-Za-z_][A-Za-z_0-9]*\)$/\1/p' | sort)
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
done
# dlsym under glibc's versions, non-default (one @), and nothing else versioned
if [ "$versioned" != "dlsym@GLIBC_2.17 dlsym@GLIBC_2.2.5 dlsym@GLIBC_2.34 " ]; then
	echo "versioned exports: $versioned(expected dlsym@GLIBC_2.17, dlsym@GLIBC_2.2.5, dlsym@GLIBC_2.34)"; fail=1
fi
defs=$(readelf -V "$lib" | sed -n '/Version definition/,/^$/p' | sed -n 's/.*Flags: \([A-Za-z]*\).*Name: \(.*\)$/\1 \2/p' | awk '$1 != "BASE" {print $2}' | sort | tr '\n' ' ')
if [ "$defs" != "GLIBC_2.17 GLIBC_2.2.5 GLIBC_2.34 " ]; then
	echo "version definitions: $defs(expected GLIBC_2.17 GLIBC_2.2.5 GLIBC_2.34)"; fail=1
fi
# every export is a function
nonfunc=$(printf '%s\n' "$syms" | awk '$2 != "T" {print $3}')
[ -z "$nonfunc" ] || { echo "exports that are not functions: $nonfunc"; fail=1; }
# only the layers a preloaded process runs (src/meson.build)
extra=$(nm "$lib" | awk '{print $NF}' | grep -E '^(gp_replay|gp_tracefile|gp_fake_backend)' | sort -u)
[ -z "$extra" ] || { echo "code a preloaded process never runs is linked in: $(echo $extra)"; fail=1; }
if readelf -d "$lib" | grep NEEDED | grep -q 'libz\.'; then
	echo "zlib is a load-time dependency: $(readelf -d "$lib" | grep NEEDED | grep libz)"; fail=1
fi
[ $fail -eq 0 ] && echo "$(printf '%s\n' "$got" | wc -l) exports at the base version, as in the map, and dlsym at glibc's 3 versions; no replay, trace-reader or fake-backend code; zlib not needed at load"
exit $fail
