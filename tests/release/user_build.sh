#!/bin/sh
# The library as users build it can never abort the program it is loaded into (contract 10):
# configured with the defaults (`meson setup build`, as in docs/install.md and
# scripts/build-gpu-lib), libgpupool.so references no assert, abort or exit function.
# usage: user_build.sh SOURCE_DIR WORK_DIR [CUDART_HEADERS]
set -u
src=$1 dir=$2/user-build
log=$dir.log
rm -rf "$dir"
set --
[ -n "${3:-}" ] && set -- "-Dcudart_headers=$3"
if ! meson setup "$dir" "$src" "$@" >"$log" 2>&1 || ! ninja -C "$dir" gpupool-lib >>"$log" 2>&1; then
	cat "$log"
	echo "cannot build libgpupool.so with the default options"
	exit 1
fi
lib=$dir/src/libgpupool.so
bad=$(nm -D --undefined-only "$lib" | awk '{print $2}' | sed 's/@.*//' |
	grep -xE '__assert_fail|__assert_perror_fail|__assert|abort|exit|_exit|_Exit|quick_exit' | sort -u)
if [ -n "$bad" ]; then
	echo "$lib, built with the default options, can end the program: it references" $bad
	meson configure "$dir" | grep -E '^ *(invariants|buildtype) ' | awk '{print $1 "=" $2}'
	exit 1
fi
echo "$lib (the default options) references no assert, abort or exit function"
rm -rf "$dir" "$log"
