#!/bin/sh
# meson install, complete: installs the build into a temporary DESTDIR and checks the files
# users are told about are there (the wrapper and the tools, the versioned library and its
# link, the headers, pkg-config, the Python module, the docs, the bash completion, the man
# pages when scdoc built them); runs the installed tools' --version and gpupool-run --help;
# runs PROG over the fake runtime under the installed gpupool-run, which must preload the
# installed library, and under the installed gpupool-run --fake, over the installed fake.
# usage: install_test.sh MESON BUILDDIR FAKEDIR PROG MAN(yes|no) RUN(yes|no)
set -u
meson=$1 build=$2 fake=$3 prog=$4 man=$5 run=$6
prog=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog") # absolute: the test moves to the DESTDIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$meson" install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; echo "FAIL: meson install"; exit 1; }
cd "$tmp/root" || exit 1
one() { # one installed file matching the pattern (a path under the DESTDIR), non-empty
	f=$(find . -path "$1" \( -type f -o -type l \) | head -1)
	[ -n "$f" ] && [ -s "$f" ] || { bad "nothing installed at $1"; return 1; }
	echo "$f"
}
bin=$(dirname "$(one '*/bin/gpupool-run')")
for f in '*/bin/gpupool-run' '*/bin/gpupool-maxbatch' '*/bin/gpupool-stat' '*/bin/gpupool-replay' '*/bin/gpupool-plot' \
	'*/lib*/libgpupool.so.0' '*/lib*/libgpupool.so' '*/include/gpupool.h' '*/include/gpupool/stats.h' \
	'*/pkgconfig/gpupool.pc' '*/gpupool.py' '*/gpupool_hook/sitecustomize.py' \
	'*/share/doc/gpupool/README.md' '*/share/doc/gpupool/knobs.md'; do
	one "$f" >/dev/null
done
# bash completion: one script under each command's name, loadable as bash-completion would
for t in gpupool-stat gpupool-replay gpupool-run gpupool-maxbatch; do
	c=$(one "*/bash-completion/completions/$t") || continue
	bash -c '. "$1" && complete -p "$2"' sh "$c" "$t" >/dev/null 2>&1 || bad "completion of $t from $c"
done
if [ "$man" = yes ]; then
	for f in man7/gpupool.7 man1/gpupool-stat.1 man1/gpupool-replay.1 man1/gpupool-run.1 \
		man1/gpupool-maxbatch.1; do
		p=$(one "*/share/man/$f") || continue
		if command -v man >/dev/null; then # renders, with its NAME section
			MANWIDTH=80 man -l "$p" 2>"$tmp/man.err" | grep -q '^NAME' || { cat "$tmp/man.err"; bad "man -l $f"; }
		fi
	done
fi
lib=$(one '*/lib*/libgpupool.so.0') || exit 1
[ -L "$(dirname "$lib")/libgpupool.so" ] || bad "libgpupool.so is not a link to the versioned library"
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libgpupool.so.0 ] || bad "soname '$soname', expected libgpupool.so.0"
pc=$(one '*/pkgconfig/gpupool.pc') && grep -q '^Libs:.*-lgpupool' "$pc" || bad "gpupool.pc: no -lgpupool"

for t in gpupool-stat gpupool-replay gpupool-run gpupool-maxbatch; do
	v=$("$bin/$t" --version 2>&1) || bad "$t --version: exit $?"
	case $v in "$t "[0-9]*.[0-9]*.[0-9]*) ;; *) bad "$t --version printed '$v'" ;; esac
done
help=$("$bin/gpupool-run" --help) || bad "gpupool-run --help: exit $?"
printf '%s\n' "$help" | grep -q '^usage: gpupool-run' || bad "gpupool-run --help"
want=$(cd "$(dirname "$lib")" && pwd -P)/libgpupool.so
got=$("$bin/gpupool-run" --print-lib) || bad "gpupool-run --print-lib: exit $?"
[ "$got" = "$want" ] || bad "installed gpupool-run preloads '$got', not the installed '$want'"
# --torch: the installed startup hook, and the installed gpupool.py beside it
hook=$(cd "$(dirname "$(one '*/gpupool_hook/sitecustomize.py')")" && pwd -P)
got=$(PYTHONPATH= "$bin/gpupool-run" --torch python3 -c \
	'import os, sys, gpupool; print(os.path.dirname(sys.modules["sitecustomize"].__file__), os.environ["GPUPOOL_LIB"])') ||
	bad "gpupool-run --torch: exit $?"
[ "$got" = "$hook $want" ] || bad "installed gpupool-run --torch runs with '$got', not '$hook $want'"

if [ "$run" = yes ]; then
	# the dynamic loader's own account (LD_DEBUG=files) says which library was preloaded
	LD_DEBUG=files LD_LIBRARY_PATH=$fake GPUPOOL_SHM_DIR=$tmp GPUPOOL_REPORT=$tmp/report.json \
		GPUPOOL_CONF=limit:64M "$bin/gpupool-run" "$prog" >"$tmp/run.out" 2>&1
	rc=$?
	[ $rc -eq 0 ] || { grep -v '^ *[0-9]*:' "$tmp/run.out" | tail -20; bad "$prog under the installed gpupool-run: exit $rc"; }
	grep -q "file=$want .*needed by" "$tmp/run.out" || bad "$prog did not load $want"
	grep -q '"processes"' "$tmp/report.json" 2>/dev/null || bad "no exit report from $prog under the installed library"
	v=$("$bin/gpupool-stat" --version | cut -d' ' -f2)
	grep -q "\"gpupool_version\":\"$v\"" "$tmp/report.json" || bad "the exit report does not say gpupool $v"
	# --fake: the fake runtime installed next to the library (LIBDIR/gpupool/fake), first on
	# the loader's path, with no LD_LIBRARY_PATH of the caller's
	fake=$(cd "$(dirname "$lib")/gpupool/fake" 2>/dev/null && pwd -P)/libcudart.so.13
	[ -f "$fake" ] || bad "the fake runtime is not installed at $(dirname "$lib")/gpupool/fake/libcudart.so.13"
	got=$("$bin/gpupool-run" --fake --print-lib | tail -1)
	[ "$got" = "$fake" ] || bad "installed gpupool-run --fake names '$got', not the installed '$fake'"
	LD_DEBUG=files GPUPOOL_SHM_DIR=$tmp GPUPOOL_REPORT=none "$bin/gpupool-run" --fake "$prog" >"$tmp/fake.out" 2>&1 ||
		{ grep -v '^ *[0-9]*:' "$tmp/fake.out" | tail -20; bad "$prog under the installed gpupool-run --fake: exit $?"; }
	grep -q "calling init: $fake" "$tmp/fake.out" || bad "$prog under gpupool-run --fake did not load $fake"
fi
[ $fail -eq 0 ] && echo "installed into a DESTDIR: $(find . \( -type f -o -type l \) | wc -l) files; tools answer --version; the installed gpupool-run preloads $want"
exit $fail
