#!/bin/sh
# A real Prometheus server scrapes `gpupool-stat --listen` on loopback while a helper writer
# (stat_writer, stopped with SIGSTOP so that its figures hold still) has a live page; the
# figures Prometheus's HTTP API returns must be --json's. It also scrapes a stand-in
# dcgm-exporter (DCGM_FI_DEV_FB_USED for the writer's two device UUIDs), and the join of
# docs/stats.md ("Joining dcgm-exporter") must give each GPU's share. Installs Debian's
# prometheus when missing. Usage: prometheus_scrape.sh GPUPOOL_STAT STAT_WRITER (CI: .ci/run).
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
# the join's answer: reserved / (FB_USED MiB), FB_USED being 4096 MiB on device 0 and 8192 on 1
python3 -c 'import json, sys
for v in json.load(open(sys.argv[1]))["processes"][0]["devices"]:
    print(v["uuid"], "%.9f" % (v["reserved_bytes"] / ((4096 << v["device"]) * 1048576.0)))' "$D/json" | sort >"$D/want.join"

# a stand-in dcgm-exporter: the writer's UUIDs, with labels of the real one's
python3 - "$D/json" "$D/dcgm.port" <<'PY' 2>"$D/dcgm.err" &
import http.server, json, sys
devs = json.load(open(sys.argv[1]))["processes"][0]["devices"]
body = "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n# TYPE DCGM_FI_DEV_FB_USED gauge\n"
for v in devs:
    body += 'DCGM_FI_DEV_FB_USED{gpu="%d",UUID="%s",device="nvidia%d",modelName="NVIDIA H200",Hostname="h"} %d\n' % (
        v["device"] + 4, v["uuid"], v["device"] + 4, 4096 << v["device"])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body.encode())
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
HELPERS="$HELPERS $!"
i=0
until [ -s "$D/dcgm.port" ]; do
	i=$((i + 1)); [ $i -lt 250 ] || { cat "$D/dcgm.err"; fail "the stand-in dcgm-exporter did not start"; }; sleep 0.02
done
DCGM="127.0.0.1:$(cat "$D/dcgm.port")"

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
  - job_name: dcgm
    static_configs:
      - targets: ['$DCGM']
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

# the join of docs/stats.md, as written there, with the stand-in dcgm-exporter's figures
JOIN=$(sed -n '/<!-- dcgm-join:begin -->/,/<!-- dcgm-join:end -->/p' "$(dirname "$0")/../../docs/stats.md" | grep -v '^<!--\|^```')
[ -n "$JOIN" ] || fail "no dcgm-join query in docs/stats.md"
start=$(date +%s)
until python3 - "http://127.0.0.1:$PPORT/api/v1/query" "$JOIN" >"$D/got.join" <<'PY' && cmp -s "$D/want.join" "$D/got.join"
import json, sys, urllib.parse, urllib.request
r = json.load(urllib.request.urlopen(sys.argv[1] + "?" + urllib.parse.urlencode({"query": sys.argv[2]}), timeout=5))
for s in sorted(r["data"]["result"], key=lambda s: s["metric"].get("UUID", "")):
    print(s["metric"].get("UUID", "-"), "%.9f" % float(s["value"][1]))
PY
do
	if [ $(($(date +%s) - start)) -ge $WAIT_S ]; then
		echo "want:"; cat "$D/want.join"; echo "got:"; cat "$D/got.join"
		fail "the dcgm-exporter join of docs/stats.md did not give each GPU's share"
	fi
	sleep 0.5
done
echo "prometheus_scrape: the join on UUID with dcgm-exporter's DCGM_FI_DEV_FB_USED:"
cat "$D/got.join"

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
