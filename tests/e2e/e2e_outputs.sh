#!/bin/sh
# What gpupool writes and says: the log's budgets (many bad knobs do not silence a later
# out-of-memory warning); the report and the trace files (no symbolic link followed, no
# fifo opened, mode 0600, failures said in one line); the statistics page (what keeps it
# from being created; what a child that ends with _exit leaves).
# usage: e2e_outputs.sh PRELOAD PROGRAM SHM_DIR GPUPOOL_STAT
set -u
. "$(dirname "$0")/e2e_lib.sh"
stat=$4

# 205 bad GPUPOOL_CONF items: their lines have a budget of their own
conf=limit:8M
i=0
while [ $i -lt 205 ]; do conf="$conf,nokey$i:1"; i=$((i + 1)); done
GPUPOOL_CONF=$conf GPUPOOL_REPORT=none FAKECUDA_DEVICES=1 run "$prog" oom || bad "bad knobs: exit status $?"
grep -q "out of memory allocating 16.0 MiB" "$err" || bad "bad knobs: the out-of-memory warning was dropped"
n=$(grep -c "unknown key" "$err")
[ "$n" -ge 20 ] && [ "$n" -lt 205 ] || bad "bad knobs: $n lines about unknown keys (expected a capped number)"
grep -q "log limit reached" "$err" || bad "bad knobs: no line saying further messages are dropped"

# The report and the trace never follow a symbolic link: another user's link in a shared
# directory must not make this process overwrite one of its own files.
files=$(mktemp -d)
TMPS="$TMPS $files"
echo precious >"$files/victim"
ln -s "$files/victim" "$files/report.txt"
GPUPOOL_REPORT=$files/report.txt run "$prog" alloc || bad "report symlink: exit status $?"
[ "$(cat "$files/victim")" = precious ] || bad "report symlink: the file behind the link was written"
grep -q "cannot write the report to $files/report.txt.*symbolic link" "$err" ||
	bad "report symlink: no line saying why"
grep -q "gpupool: report for pid" "$err" || bad "report symlink: the report did not go to stderr instead"
ln -s "$files/victim" "$files/trace.csv"
GPUPOOL_CONF=trace:$files/trace.csv GPUPOOL_REPORT=none run "$prog" alloc || bad "trace symlink: exit status $?"
[ "$(cat "$files/victim")" = precious ] || bad "trace symlink: the file behind the link was written"
grep -q "trace: cannot record to $files/trace.csv.*symbolic link" "$err" || bad "trace symlink: no line saying why"

# a fifo as the report never hangs the process at exit: refused, the report goes to stderr
mkfifo "$files/fifo"
GPUPOOL_REPORT=$files/fifo run timeout 20 "$prog" alloc; rc=$?
[ $rc -eq 0 ] || bad "report fifo: exit status $rc (124: it hung)"
grep -q "cannot write the report to $files/fifo.*not a regular file" "$err" || bad "report fifo: no line saying why"

# files are created for this user only; a trace in a missing directory says so
GPUPOOL_CONF=trace:$files/t.csv GPUPOOL_REPORT=$files/r.txt run "$prog" alloc || bad "modes: exit status $?"
[ "$(stat -c %a "$files/t.csv")" = 600 ] || bad "trace mode $(stat -c %a "$files/t.csv"), expected 600"
[ "$(stat -c %a "$files/r.txt")" = 600 ] || bad "report mode $(stat -c %a "$files/r.txt"), expected 600"
grep -q "gpupool: report for pid" "$files/r.txt" || bad "the report file lacks the report"
GPUPOOL_CONF=trace:$files/missing/t.csv GPUPOOL_REPORT=none run "$prog" alloc || bad "trace dir: exit status $?"
[ "$(grep -c "trace: cannot record to $files/missing/t.csv: No such file or directory" "$err")" -eq 1 ] ||
	bad "trace in a missing directory: expected one warning"

# a report that cannot be written says so in one line (a file size limit of 0 makes every
# write fail; stderr goes through a pipe, which the limit does not cover)
(GPUPOOL_REPORT=$files/big.txt GPUPOOL_CONF=stats_page:0 LD_PRELOAD=$preload GPUPOOL_SHM_DIR=$dir \
	sh -c 'trap "" XFSZ; ulimit -f 0; exec "$@"' sh "$prog" alloc 2>&1; echo "rc=$?") | cat >"$err"
grep -q "^rc=0$" "$err" || bad "report write error: exit status"
[ "$(grep -c "gpupool: .*report.*$files/big.txt" "$err")" -eq 1 ] || bad "report write error: expected one line"

# a name for the page taken by something else: the line says what is in the way
for kind in "symbolic link:ln -s /nonexistent" "fifo:mkfifo"; do
	mk=${kind#*:} what=${kind%%:*}
	GPUPOOL_LOG=info GPUPOOL_REPORT=none run sh -c "$mk \"\$0/gpupool.\$\$\"; exec \"\$@\"" "$dir" "$prog" alloc ||
		bad "page name taken by a $what: exit status $?"
	grep -q "statistics page $dir/gpupool\.[0-9]*: cannot create it: a $what is in the way; counters stay private" "$err" ||
		bad "page name taken by a $what: the line does not say so"
	rm -f "$dir"/gpupool.*
done

# a forked child that ends with _exit runs no exit handler: its page stays, gpupool-stat
# shows it as gone and --clean removes it
GPUPOOL_REPORT=none run "$prog" fork_exit || bad "fork_exit: exit status $?"
child=$(cat "$out")
[ -e "$dir/gpupool.$child" ] || bad "fork_exit: no page of the child $child"
GPUPOOL_SHM_DIR=$dir "$stat" >"$out" 2>"$err" || bad "gpupool-stat: exit status $?"
grep -q "^ *[0-9-]* *$child [^ ]* *e2e_outputs .* gone$" "$out" || bad "gpupool-stat: the child's page is not shown as gone"
GPUPOOL_SHM_DIR=$dir "$stat" --clean >"$out" 2>"$err" || bad "gpupool-stat --clean: exit status $?"
grep -q "removed gpupool.$child: pid $child is gone" "$out" || bad "gpupool-stat --clean: the child's page stays"

[ -z "$(ls -A "$dir")" ] || bad "pages left behind: $(ls -A "$dir")"
exit $fail
