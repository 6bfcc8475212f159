#!/bin/sh
# Knobs reach the pool: GPUPOOL_DISABLE, GPUPOOL_REPORT=<file.json>, fence:sync, fence:inline.
# usage: e2e_knobs.sh PRELOAD PROGRAM SHM_DIR
set -u
. "$(dirname "$0")/e2e_lib.sh"

GPUPOOL_DISABLE=1 run "$prog" disable || bad "disable: exit status $?"
[ -s "$err" ] && bad "disable: output on stderr"
[ -z "$(ls -A "$dir")" ] || bad "disable: page left"

report=$dir/report.json
GPUPOOL_REPORT=$report run "$prog" basic || bad "report: exit status $?"
[ -s "$err" ] && bad "report: output on stderr although the report goes to a file"
python3 - "$report" <<'PY' || bad "report: $report is not the expected JSON"
import json, sys
doc = json.load(open(sys.argv[1]))
text = json.dumps(doc)
assert '"allocs": 20' in text and '"frees": 20' in text, text[:400]
PY
rm -f "$report"

GPUPOOL_REPORT=none GPUPOOL_CONF=fence:sync run "$prog" sync || bad "fence:sync: exit status $?"
GPUPOOL_REPORT=none GPUPOOL_CONF=fence:inline run "$prog" inline || bad "fence:inline: exit status $?"
GPUPOOL_REPORT=none run "$prog" thread || bad "fence:thread: exit status $?"
[ -z "$(ls -A "$dir")" ] || bad "pages left behind: $(ls -A "$dir")"
exit $fail
