"""gpupool-stat's Prometheus text (0.0.4) and OpenMetrics through both of prometheus_client's
parsers, against a live helper writer (stat_writer): no family twice, _total on counters
only, every name ending in its unit, gpupool_build_info, the figures equal to --json's
(the writer is stopped with SIGSTOP meanwhile); then the same over HTTP from
`gpupool-stat --listen 127.0.0.1:0` (content types, /, 404, SIGTERM).
Run: prom_parse.py GPUPOOL_STAT STAT_WRITER VERSION. Exit 77 (skip) without prometheus_client.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    from prometheus_client import parser as text_parser
    from prometheus_client.openmetrics import parser as om_parser
except ImportError:
    print("prom_parse: prometheus_client is not installed for %s: skipped" % sys.executable)
    sys.exit(77)

STAT, WRITER, VERSION = sys.argv[1:4]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
HEADER = os.path.join(ROOT, "include", "gpupool", "stats.h")
DASHBOARD = os.path.join(ROOT, "docs", "grafana-gpupool.json")
TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OM_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def byte_fields():
    """(gauges, counters) of stats.h whose unit is bytes."""
    t = open(HEADER).read().replace("\\\n", " ")
    out = []
    def fields(macro):
        body = re.search(r"#define\s+%s\(X\)(.*)" % macro, t).group(1)
        subs = re.findall(r"(GPUPOOL_\w+)\(X\)", body)  # a list of lists: GPUPOOL_GAUGES_3(X) ...
        if subs:
            return [f for sub in subs for f in fields(sub)]
        return re.findall(r"X\(\s*(\w+)\s*,\s*(\w+)\s*,", body)
    for macro in ("GPUPOOL_GAUGES", "GPUPOOL_COUNTERS"):
        out.append([n for n, u in fields(macro) if u == "bytes"])
    return out


def check_families(families, openmetrics):
    """The rules for either format; returns {sample name: [(labels, value)]}."""
    names = [f.name for f in families]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, "families declared twice: %s" % sorted(dup)
    samples = {}
    for f in families:
        assert f.name.startswith("gpupool_"), f.name
        for s in f.samples:
            if f.type == "counter":
                assert s.name == f.name + "_total", (f.name, s.name)
            else:
                assert not s.name.endswith("_total"), s.name
            samples.setdefault(s.name, []).append((s.labels, s.value))
        if openmetrics and f.unit:
            assert f.name.endswith("_" + f.unit), (f.name, f.unit)
        if "bytes" in f.name:
            assert f.name.endswith("_bytes"), f.name
            assert not openmetrics or f.unit == "bytes", (f.name, f.unit)
    gauges, counters = byte_fields()
    units = [f for f in families if f.name.endswith("_bytes")]
    # each byte gauge and its peak, each byte counter, the limit, the floor, the GPUs' total,
    # free, held, reclaimable and waiting
    assert len(units) == 2 * len(gauges) + len(counters) + 2 + 5, sorted(f.name for f in units)
    # the GPUs' families: labelled UUID alone, but the info family (its index and name)
    for f in families:
        if f.name in ("gpupool_gpu", "gpupool_gpu_info"):
            assert f.type == ("info" if openmetrics else "gauge"), f
            for s in f.samples:
                assert s.name == "gpupool_gpu_info" and s.value == 1.0, s
                assert set(s.labels) <= {"UUID", "index", "name"} and "UUID" in s.labels, s
        elif f.name.startswith("gpupool_gpu_"):
            assert f.type == "gauge", f
            for s in f.samples:
                assert list(s.labels) == ["UUID"], s
    build = [f for f in families if f.name == ("gpupool_build" if openmetrics else "gpupool_build_info")]
    assert len(build) == 1 and build[0].type == ("info" if openmetrics else "gauge"), build
    assert [(s.name, s.labels, s.value) for s in build[0].samples] == [
        ("gpupool_build_info", {"version": VERSION}, 1.0)], build[0].samples
    skipped = samples["gpupool_skipped_pages"]
    assert sorted(l["reason"] for l, _ in skipped) == ["foreign", "invalid", "limit", "other_user", "unverified"]
    return samples


def compare_with_json(samples, doc, pid):
    """Every sample of pid against --json's integers, read while the writer was stopped; the
    UUID label against --json's uuid (the writer gives both devices one); no limit sample for
    the device without a limit (0 in JSON)."""
    proc = [p for p in doc["processes"] if p["pid"] == pid][0]
    checked = 0
    for dev in proc["devices"]:
        assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", dev["uuid"]), dev["uuid"]
        for name, want in (("gpupool_reserved_bytes", dev["reserved_bytes"]),
                           ("gpupool_reserved_peak_bytes", dev["reserved_bytes_peak"]),
                           ("gpupool_largest_free_block_bytes", dev["largest_free_block"]),
                           ("gpupool_live_blocks_peak", dev["live_blocks_peak"]),
                           ("gpupool_allocs_total", dev["allocs"]),
                           ("gpupool_alloc_requested_bytes_total", dev["requested_bytes_total"]),
                           ("gpupool_limit_bytes", dev["limit_bytes"])):
            got = [(l.get("UUID"), v) for l, v in samples.get(name, [])
                   if l["pid"] == str(pid) and l["device"] == str(dev["device"])]
            want = [(dev["uuid"], float(want))] if name != "gpupool_limit_bytes" or want else []
            assert got == want, (name, dev["device"], got, want)
            checked += 1
    assert checked == 14, checked
    assert [d["limit_bytes"] > 0 for d in proc["devices"]] == [False, True], proc["devices"]
    # the GPUs: each of --json's "gpus" as a sample of each family
    for g in doc["gpus"]:
        for name, want in (("gpupool_gpu_total_bytes", g["total_bytes"]), ("gpupool_gpu_free_bytes", g["free_bytes"]),
                           ("gpupool_gpu_held_bytes", g["held_bytes"]),
                           ("gpupool_gpu_reclaimable_bytes", g["reclaimable_bytes"]),
                           ("gpupool_gpu_processes", g["processes"]),
                           ("gpupool_gpu_seen_timestamp_seconds", g["seen_ns"] // 1000000 / 1000)):
            got = [v for l, v in samples.get(name, []) if l["UUID"] == g["uuid"]]
            assert got == [float(want)], (name, g["uuid"], got, want)
        info = [l for l, v in samples.get("gpupool_gpu_info", []) if l["UUID"] == g["uuid"]]
        assert info == [{"UUID": g["uuid"], "index": str(g["index"]), "name": g["name"]}], (info, g)
    assert len(doc["gpus"]) == 2, doc["gpus"]


def check_dashboard(samples):
    """docs/grafana-gpupool.json is JSON, and every gpupool_* name its queries use is exported."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dash["templating"]["list"] if "definition" in v]
    used = {n for e in exprs for n in re.findall(r"\bgpupool_\w+", e)}
    unknown = used - set(samples)
    assert not unknown, "the dashboard queries names gpupool-stat does not export: %s" % sorted(unknown)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), ids
    return len(used)


def run(*args):
    return subprocess.run([STAT, *args], check=True, capture_output=True, text=True).stdout


def get(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def check_listen(pid):
    srv = subprocess.Popen([STAT, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    try:
        line = srv.stderr.readline()
        if srv.poll() == 2 or "needs libmicrohttpd" in line:
            print("prom_parse: libmicrohttpd cannot be loaded: --listen not tried")
            return
        m = re.search(r"serving (http://127\.0\.0\.1:\d+)/metrics", line)
        assert m, line
        base = m.group(1)
        status, ctype, body = get(base + "/metrics")
        assert (status, ctype) == (200, TEXT_TYPE), (status, ctype)
        check_families(list(text_parser.text_string_to_metric_families(body)), False)
        assert 'gpupool_reserved_bytes{pid="%d"' % pid in body
        # Prometheus's own Accept header
        accept = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                  "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
        status, ctype, body = get(base + "/metrics", accept)
        assert (status, ctype) == (200, OM_TYPE), (status, ctype)
        assert body.endswith("# EOF\n")
        check_families(list(om_parser.text_string_to_metric_families(body)), True)
        status, ctype, body = get(base + "/")
        assert status == 200 and ctype.startswith("text/html") and 'href="/metrics"' in body, (status, body)
        assert get(base + "/metricsx")[0] == 404
        assert get(base + "/nope")[0] == 404
        srv.send_signal(signal.SIGTERM)
        assert srv.wait(timeout=10) == 0
        print("prom_parse: --listen served %s: text 0.0.4, OpenMetrics, /, 404, SIGTERM" % base)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()


def main():
    d = tempfile.mkdtemp()
    os.environ["GPUPOOL_SHM_DIR"] = os.path.join(d, "shm")
    os.mkdir(os.environ["GPUPOOL_SHM_DIR"])
    out = open(os.path.join(d, "w.out"), "w+")
    w = subprocess.Popen([WRITER, "3000"], stdout=out, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            out.seek(0)
            if "ready" in out.read():
                break
            time.sleep(0.02)
        else:
            raise AssertionError("stat_writer not ready")
        # a page someone else left: counted in gpupool_skipped_pages{reason="invalid"}
        with open(os.path.join(os.environ["GPUPOOL_SHM_DIR"], "gpupool.4000005"), "wb") as f:
            f.write(b"x" * 50)
        os.kill(w.pid, signal.SIGSTOP)  # the figures hold still while the three views are read
        doc = json.loads(run("--json"))
        text, om = run("--prometheus"), run("--openmetrics")
        os.kill(w.pid, signal.SIGCONT)
        assert om.endswith("# EOF\n") and "# EOF" not in text
        for fams, is_om in ((list(text_parser.text_string_to_metric_families(text)), False),
                            (list(om_parser.text_string_to_metric_families(om)), True)):
            samples = check_families(fams, is_om)
            compare_with_json(samples, doc, w.pid)
            assert [v for l, v in samples["gpupool_skipped_pages"] if l["reason"] == "invalid"] == [1.0]
        print("prom_parse: %d families, both parsers agree with --json" % len(fams))
        print("prom_parse: the Grafana dashboard's %d names are all exported" % check_dashboard(samples))
        check_listen(w.pid)
    finally:
        w.kill()
        w.wait()
        shutil.rmtree(d, ignore_errors=True)
    print("prom_parse: all checks passed")


if __name__ == "__main__":
    main()
