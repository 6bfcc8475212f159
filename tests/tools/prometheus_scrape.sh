#!/bin/sh
# A real Prometheus server scrapes `gpupool-stat --listen` on loopback while a helper writer
# (stat_writer, stopped with SIGSTOP so that its figures hold still) has a live page; the
# figures Prometheus's HTTP API returns must be --json's. Installs Debian's prometheus when
# missing. Usage: prometheus_scrape.sh GPUPOOL_STAT STAT_WRITER (CI: .ci/run).
# Exit 0 passed, 1 failed, 77 skipped (prometheus cannot be installed, or libmicrohttpd cannot
# be loaded). Everything started here is killed at exit (stat_lib.sh).
set -eu
. "$(dirname "$0")/stat_lib.sh"
WAIT_S=30

if ! command -v prometheus >/dev/null; then
	echo "prometheus_scrape: installing prometheus"
	apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >"$D/apt.log" 2>&1; }
	if ! apt_install && ! { apt-get update -qq && apt_install; }; then
		tail -5 "$D/apt.log"
		echo "prometheus_scrape: prometheus cannot be installed: skipped"
		exit 77
	fi
fi
prometheus --version 2>&1 | head -1

# a port nobody listens on now (Prometheus's own; gpupool-stat takes port 0 and says which)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# one query's result as "device value" lines, sorted
query() { # promql
	python3 - "http://127.0.0.1:$PPORT/api/v1/query" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
try:
    url = sys.argv[1] + "?" + urllib.parse.urlencode({"query": sys.argv[2]})
    r = json.load(urllib.request.urlopen(url, timeout=5))
except Exception:
    sys.exit(0)
for s in sorted(r["data"]["result"], key=lambda s: s["metric"].get("device", "")):
    print(s["metric"].get("device", "-"), s["value"][1])
PY
}

"$WRITER" 3000 >"$D/w.out" 2>"$D/w.err" &
WPID=$!
HELPERS="$WPID"
wait_ready w
kill -STOP "$WPID"
# what Prometheus must show: --json's figures of the stopped writer, "device value" lines
"$STAT" --json "$WPID" >"$D/json" 2>/dev/null || fail "gpupool-stat --json"
want() { # field
	python3 -c 'import json, sys
for v in sorted(json.load(open(sys.argv[1]))["processes"][0]["devices"], key=lambda v: str(v["device"])):
    print(v["device"], v[sys.argv[2]])' "$D/json" "$1"
}
want reserved_bytes >"$D/want.reserved"
want allocs >"$D/want.allocs"
[ "$(wc -l <"$D/want.reserved")" -eq 2 ] || fail "expected two devices in --json"

"$STAT" --listen 127.0.0.1:0 2>"$D/listen.err" &
LPID=$!
HELPERS="$HELPERS $LPID"
i=0
until grep -qs "serving http" "$D/listen.err"; do
	if ! kill -0 "$LPID" 2>/dev/null; then
		wait "$LPID" && rc=0 || rc=$?
		cat "$D/listen.err"
		[ "$rc" -eq 2 ] && grep -q "needs libmicrohttpd" "$D/listen.err" && { echo "prometheus_scrape: skipped"; exit 77; }
		fail "gpupool-stat --listen exited $rc"
	fi
	i=$((i + 1)); [ $i -lt 250 ] || fail "gpupool-stat --listen did not start"; sleep 0.02
done
TARGET=$(sed -n 's|.*serving http://\(127\.0\.0\.1:[0-9]*\)/metrics.*|\1|p' "$D/listen.err")
echo "prometheus_scrape: gpupool-stat serving $TARGET"

cat >"$D/prometheus.yml" <<EOF2
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gpupool
    static_configs:
      - targets: ['$TARGET']
EOF2
# the free port can be taken between the probe and the bind: three tries
for try in 1 2 3; do
	PPORT=$(free_port)
	prometheus --config.file="$D/prometheus.yml" --storage.tsdb.path="$D/tsdb" \
		--web.listen-address="127.0.0.1:$PPORT" --log.level=warn >"$D/prom.log" 2>&1 &
	PROM=$!
	HELPERS="$HELPERS $PROM"
	sleep 1
	kill -0 "$PROM" 2>/dev/null && break
	grep -q "address already in use" "$D/prom.log" || { cat "$D/prom.log"; fail "prometheus did not start"; }
done
echo "prometheus_scrape: prometheus on 127.0.0.1:$PPORT (pid $PROM), scraping every 1 s"

# bounded: the series must show the writer's figures within WAIT_S seconds
start=$(date +%s)
while :; do
	query "gpupool_reserved_bytes{pid=\"$WPID\"}" >"$D/got.reserved"
	query "gpupool_allocs_total{pid=\"$WPID\"}" >"$D/got.allocs"
	if cmp -s "$D/want.reserved" "$D/got.reserved" && cmp -s "$D/want.allocs" "$D/got.allocs"; then
		break
	fi
	if [ $(($(date +%s) - start)) -ge $WAIT_S ]; then
		echo "want reserved:"; cat "$D/want.reserved"; echo "got:"; cat "$D/got.reserved"
		echo "want allocs:"; cat "$D/want.allocs"; echo "got:"; cat "$D/got.allocs"
		tail -20 "$D/prom.log"
		fail "Prometheus did not show the writer's figures within $WAIT_S s"
	fi
	sleep 0.5
done
echo "prometheus_scrape: after $(($(date +%s) - start)) s Prometheus has gpupool_reserved_bytes by device:"
cat "$D/got.reserved"
[ "$(query "up{job=\"gpupool\"}")" = "- 1" ] || fail "up{job=gpupool} is not 1"
query "gpupool_build_info" | grep -q "^- 1$" || fail "no gpupool_build_info"

# every query of the example Grafana dashboard is PromQL this Prometheus accepts
python3 - "http://127.0.0.1:$PPORT/api/v1/query" "$(dirname "$0")/../../docs/grafana-gpupool.json" <<'PY' ||
import json, sys, urllib.error, urllib.parse, urllib.request
dash = json.load(open(sys.argv[2]))
subst = {"$instance": ".*", "$comm": ".*", "$__rate_interval": "4s", "$__range": "1m"}
bad = 0
for p in dash["panels"]:
    for t in p["targets"]:
        q = t["expr"]
        for k, v in subst.items():
            q = q.replace(k, v)
        try:
            r = json.load(urllib.request.urlopen(sys.argv[1] + "?" + urllib.parse.urlencode({"query": q}), timeout=5))
        except urllib.error.HTTPError as e:
            r = json.load(e)
        if r.get("status") != "success":
            print("dashboard panel %r: %s: %s" % (p["title"], q, r.get("error")))
            bad += 1
sys.exit(1 if bad else 0)
PY
	fail "the Grafana dashboard has queries Prometheus rejects"
echo "prometheus_scrape: Prometheus accepts every query of docs/grafana-gpupool.json"

# a clean stop on SIGTERM
kill -CONT "$WPID"
kill -TERM "$LPID"
wait "$LPID" || fail "gpupool-stat --listen did not exit 0 on SIGTERM"
helper_done "$LPID"
echo "prometheus_scrape: all checks passed"
