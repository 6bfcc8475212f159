#!/usr/bin/env bash
# gpupool-stat --group FILE: a group's budget per GPU against what its members hold, and its
# members, while one holds memory and after it ended; a missing file and bad usage.
# Arguments: the preloaded library, e2e_reclaim (a holder), the page directory, gpupool-stat.
. "$(dirname "$0")/e2e_lib.sh"
stat=$4
g=$dir/job.group
export FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=2G
GPUPOOL_CONF=group:$g,group_limit:1G LD_PRELOAD=$preload GPUPOOL_SHM_DIR=$dir GPUPOOL_REPORT=none \
	"$prog" hold 512 30 >"$out" 2>"$err" &
h=$!
for _ in $(seq 100); do grep -q ready "$out" && break; sleep 0.05; done
"$stat" --group "$g" >"$out" 2>"$err" || bad "--group: exit status $?"
grep -q "^group $g: 1 member (1 alive)$" "$out" || bad "--group: the member line"
grep -Eq "^GPU-[0-9a-f]{8} +1\.0 GiB +512\.0 MiB +512\.0 MiB +0 B +50\.0%$" "$out" || bad "--group: the GPU's line"
grep -Eq "^ *$h yes +512\.0 MiB$" "$out" || bad "--group: the member's row"
kill -INT $h
wait $h
"$stat" --group "$g" >"$out" 2>"$err" || bad "--group after: exit status $?"
grep -q "0 members (0 alive)" "$out" || bad "--group after: the member left"
grep -Eq "^GPU-[0-9a-f]{8} +1\.0 GiB +0 B +512\.0 MiB" "$out" || bad "--group after: used back to 0, the peak kept"
"$stat" --group "$dir/none.group" >"$out" 2>"$err"
[ $? = 1 ] || bad "--group of a missing file: exit status 1"
grep -q "group $dir/none.group: " "$err" || bad "--group of a missing file: one line"
"$stat" --group "$g" --json >"$out" 2>"$err"
[ $? = 2 ] || bad "--group with another option: exit status 2"
[ $fail = 0 ] && echo "group-stat: all checks pass"
exit $fail
