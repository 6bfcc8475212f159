#!/bin/sh
# meson install, complete: installs the build into a temporary DESTDIR and checks the files
# users are told about are there (the wrapper and the tools, the versioned library and its
# link, the headers, pkg-config, the Python module, the docs, the bash completion, the man
# pages when scdoc built them); that every command installed has its bash completion and
# man page; that the Python module went to a folder PYTHON imports from for that prefix
# (when PYCHECK is yes: Meson chose the folder) and imports from the staged copy; that every
# document the README and the man pages cite is in the staged DOCDIR, and the man pages cite
# it by that path; runs the installed tools' --version and gpupool-run --help; runs PROG over
# the fake runtime under the installed gpupool-run, which must preload the installed library,
# and under the installed gpupool-run --fake, over the installed fake.
# usage: install_test.sh MESON BUILDDIR FAKEDIR PROG MAN(yes|no) RUN(yes|no) SRC PYTHON
#                        PREFIX DOCDIR PYCHECK(yes|no)
set -u
[ $# -eq 11 ] || { echo "usage: install_test.sh MESON BUILDDIR FAKEDIR PROG MAN RUN SRC PYTHON PREFIX DOCDIR PYCHECK" >&2; exit 2; }
meson=$1 build=$2 fake=$3 prog=$4 man=$5 run=$6 src=$7 python=$8 prefix=$9
docdir=${10} pycheck=${11}
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
cmds="gpupool-run gpupool-maxbatch gpupool-stat gpupool-replay gpupool-plot"
for f in $(for t in $cmds; do echo "*/bin/$t"; done) \
	'*/lib*/libgpupool.so.0' '*/lib*/libgpupool.so' '*/include/gpupool.h' '*/include/gpupool/stats.h' \
	'*/pkgconfig/gpupool.pc' '*/gpupool.py' '*/gpupool_hook/sitecustomize.py' \
	'*/share/doc/gpupool/README.md' '*/share/doc/gpupool/knobs.md' '*/share/doc/gpupool/driver.md' \
	'*/share/doc/gpupool/grafana-gpupool.json'; do
	one "$f" >/dev/null
done
# every command installed is one of the five, with its completion (one script under each
# command's name, loadable as bash-completion would) and, with scdoc, its man page
[ "$(ls "$bin" | sort | tr '\n' ' ')" = "$(echo $cmds | tr ' ' '\n' | sort | tr '\n' ' ')" ] ||
	bad "$bin holds $(ls "$bin" | tr '\n' ' '), not the five commands $cmds"
for t in $(ls "$bin"); do
	c=$(one "*/bash-completion/completions/$t") || continue
	bash -c '. "$1" && complete -p "$2"' sh "$c" "$t" >/dev/null 2>&1 || bad "completion of $t from $c"
done
if [ "$man" = yes ]; then
	for f in man7/gpupool.7 $(for t in $(ls "$bin"); do echo "man1/$t.1"; done); do
		p=$(one "*/share/man/$f") || continue
		if command -v man >/dev/null; then # renders, with its NAME section
			MANWIDTH=80 man -l "$p" 2>"$tmp/man.err" | grep -q '^NAME' || { cat "$tmp/man.err"; bad "man -l $f"; }
		fi
		# cites the docs by their installed path, and only what is installed there
		! grep -q '@DOCDIR' "$p" || bad "$f: @DOCDIR left in"
		! grep -q '\(^\|[^/]\)share/doc/gpupool' "$p" || bad "$f cites share/doc/gpupool, not $docdir"
		for d in $(sed 's/\\&//g' "$p" | grep -o "$docdir/[A-Za-z0-9_.-]*[A-Za-z0-9]" | sort -u); do # roff: .\&md
			[ -s ".$d" ] || bad "$f cites $d, which is not installed"
		done
	done
fi
# every document the README (docs/NAME, BENCHMARKS.md) and the man pages' sources cite
[ -d ".$docdir" ] || bad "no $docdir in the staged install"
cited=$({
	grep -o 'docs/[A-Za-z0-9_-]*\.\(md\|json\)' "$src/README.md" | sed 's|^docs/||'
	grep -o '\(^\|[^/A-Za-z]\)[A-Z][A-Z]*\.md' "$src/README.md" | sed 's/^[^A-Z]//'
	grep -ho '@DOCDIR@/[A-Za-z0-9_.-]*[A-Za-z0-9]' "$src"/docs/man/*.scd | sed 's|^@DOCDIR@/||'
} | sort -u)
[ "$(echo $cited | wc -w)" -ge 10 ] || bad "only '$(echo $cited)' found cited in README.md and docs/man"
for d in $cited; do
	[ -s ".$docdir/$d" ] || bad "cited in README.md or a man page, not installed: $docdir/$d"
done
# the Python module: in a folder the interpreter searches for this prefix, and importable
py=$(one '*/gpupool.py') && pydir=$(dirname "${py#.}")
case $pydir in "$prefix"/*) ;; *) bad "gpupool.py went to $pydir, outside the prefix $prefix" ;; esac
if [ "$pycheck" = yes ]; then
	"$python" -c 'import os, site, sys
dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
sys.exit(os.path.normpath(sys.argv[1]) not in [os.path.normpath(d) for d in dirs])' "$pydir" ||
		bad "gpupool.py went to $pydir, where $python does not look ($("$python" -c 'import site; print(" ".join(site.getsitepackages()))'))"
fi
got=$(cd / && PYTHONPATH="$tmp/root$pydir" "$python" -c 'import os, gpupool; print(os.path.realpath(gpupool.__file__))') ||
	bad "$python cannot import the staged gpupool.py"
[ "$got" = "$(cd "$tmp/root$pydir" && pwd -P)/gpupool.py" ] || bad "$python imports gpupool from $got, not from the staged $pydir"
lib=$(one '*/lib*/libgpupool.so.0') || exit 1
[ -L "$(dirname "$lib")/libgpupool.so" ] || bad "libgpupool.so is not a link to the versioned library"
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libgpupool.so.0 ] || bad "soname '$soname', expected libgpupool.so.0"
pc=$(one '*/pkgconfig/gpupool.pc') && grep -q '^Libs:.*-lgpupool' "$pc" || bad "gpupool.pc: no -lgpupool"

for t in $cmds; do
	for o in --version -V; do
		v=$("$bin/$t" $o 2>&1) || bad "$t $o: exit $?"
		case $v in "$t "[0-9]*.[0-9]*.[0-9]*) ;; *) bad "$t $o printed '$v'" ;; esac
	done
	# each one's help fits a screen (80 columns)
	"$bin/$t" --help | awk 'length > 79 { bad = 1 } END { exit bad }' || bad "$t --help: a line wider than 79"
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
[ $fail -eq 0 ] && echo "installed into a DESTDIR: $(find . \( -type f -o -type l \) | wc -l) files; tools answer --version; gpupool.py in $pydir ($python imports it); the docs cited in $docdir; the installed gpupool-run preloads $want"
exit $fail
