"""gpupool-replay's outputs and options: --torch-snapshot (PyTorch's memory snapshot pickle),
--timeline, --plot, --json, a trace on standard input, and the argument handling (getopt_long:
one-line errors, exit 2; every output checked before the replay and removed when it fails);
gpupool-plot on what is not a timeline and on each output format; the bench scripts that read
the key=value figures.

The snapshot is checked with bench/gpu/check_snapshot.py's schema and history checks (the
ones that need no PyTorch), against the replay's own peaks, and for the pickle opcodes that
PyTorch's browser viewer (MemoryViz.js) can read. Run by meson (suite python) with
GPUPOOL_TEST_REPLAY=path/to/gpupool-replay; the plot test skips without matplotlib.
"""

import csv
import gzip
import importlib.util
import json
import os
import re
import pickle
import pickletools
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REPLAY = os.environ.get("GPUPOOL_TEST_REPLAY") or os.path.join(ROOT, "build", "tools", "gpupool-replay")
TRACES = os.path.join(ROOT, "tests", "traces")
BENCH = os.path.join(ROOT, "bench", "traces")

spec = importlib.util.spec_from_file_location("check_snapshot", os.path.join(ROOT, "bench", "gpu", "check_snapshot.py"))
check_snapshot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_snapshot)

# The opcodes MemoryViz.js's unpickler implements (torch/utils/viz/MemoryViz.js, unpickle()).
VIEWER_OPCODES = {"PROTO", "FRAME", "APPEND", "APPENDS", "BINGET", "BININT", "BININT1", "BININT2",
                  "EMPTY_DICT", "EMPTY_LIST", "LONG1", "LONG_BINGET", "MARK", "MEMOIZE",
                  "SHORT_BINUNICODE", "BINUNICODE", "STOP", "TUPLE2", "NEWFALSE", "NEWTRUE",
                  "NONE", "BINFLOAT", "TUPLE", "TUPLE1", "TUPLE3", "EMPTY_TUPLE", "BINPUT",
                  "LONG_BINPUT", "LIST", "DICT", "SETITEM", "SETITEMS"}
PUSHES = {"BININT", "BININT1", "BININT2", "LONG1", "SHORT_BINUNICODE", "BINUNICODE", "EMPTY_DICT",
          "EMPTY_LIST", "NONE", "NEWTRUE", "NEWFALSE", "BINFLOAT"}


PLOT = os.path.join(ROOT, "scripts", "gpupool-plot")
DOCS = os.path.join(ROOT, "docs", "replay.md")


def replay(*args, check=True, stdin=None, env=None):
    p = subprocess.run([REPLAY] + list(args), capture_output=True, text=True, timeout=120, stdin=stdin,
                       env=env)
    if check and p.returncode != 0:
        raise AssertionError("gpupool-replay %s: exit %d\n%s" % (" ".join(args), p.returncode, p.stderr))
    return p


def figures(stdout):
    return {k: v for k, v in (ln.split("=", 1) for ln in stdout.splitlines() if "=" in ln)}


class Tmp(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)


class TorchSnapshot(Tmp):
    def snapshot(self, trace, *opts):
        out = self.path("snap.pickle")
        p = replay("--torch-snapshot", out, *opts, trace)
        with open(out, "rb") as f:
            raw = f.read()
        return pickle.loads(raw), raw, figures(p.stdout)

    def check_history(self, s, fig):
        check_snapshot.check_schema(s)
        peaks_res = peaks_req = 0
        for dev in range(len(s["device_traces"])):
            check_snapshot.check_backward(s, dev)
            r, q = check_snapshot.check_forward(s, dev)
            peaks_res += r
            peaks_req += q
        # the events alone give back the replay's own peaks
        self.assertEqual(peaks_res, int(fig["peak_reserved_bytes"]))
        self.assertEqual(peaks_req, int(fig["peak_requested_bytes"]))
        # and the final layout the reserved bytes the segments add up to
        self.assertEqual(sum(1 for tr in s["device_traces"] for e in tr if e["action"] == "segment_alloc"),
                         int(fig["backend_allocs"]))

    def test_traces_every_fence_policy(self):
        traces = [os.path.join(TRACES, t) for t in sorted(os.listdir(TRACES))]
        traces += [os.path.join(BENCH, "nocache_resnet50_train.csv.gz"),
                   os.path.join(BENCH, "async_resnet50_train.csv.gz")]
        for t in traces:
            for fence in ("thread", "inline", "sync"):
                with self.subTest(trace=os.path.basename(t), fence=fence):
                    s, _, fig = self.snapshot(t, "--conf", "fence:" + fence)
                    self.check_history(s, fig)
                    self.assertEqual(s["gpupool"]["dropped_events"], 0)
                    self.assertEqual(s["gpupool"]["conf"], "fence:" + fence)
                    acts = {e["action"] for e in s["device_traces"][0]}
                    self.assertLessEqual({"alloc", "free_requested"}, acts)
                    # whole segments (cudaMalloc of at least medium_max) or mapped chunks
                    self.assertTrue(acts & {"segment_alloc", "segment_map"}, acts)
                    if "bench" in t:
                        self.assertIn("free_completed", acts)

    def test_markers_and_lag_change_nothing_but_the_output(self):
        # the observers see the pool through the same markers and clock as a plain replay: the
        # same figures, and a marker retires only the blocks freed before it
        t = os.path.join(BENCH, "nocache_resnet50_train.csv.gz")
        for lat in ("0", "2000"):
            with self.subTest(latency=lat):
                plain = figures(replay("--fence-latency-us", lat, t).stdout)
                s, _, fig = self.snapshot(t, "--fence-latency-us", lat)
                for k in ("peak_reserved_bytes", "backend_allocs", "markers", "wait_ms", "inline_fences"):
                    self.assertEqual(fig[k], plain[k], k)
                self.assertGreater(int(fig["markers"]), 0)
                self.check_history(s, fig)
                acts = [e["action"] for e in s["device_traces"][0]]
                self.assertLessEqual(acts.count("free_completed"), acts.count("free_requested"))
                self.assertGreater(acts.count("free_completed"), 0.9 * acts.count("free_requested"))

    def test_cudafree_waits_for_its_fence(self):
        # fence:inline: the replay never fences on its own, so simple_sync's cudaFree'd blocks
        # are still pending at the end: active_pending_free, free_requested without completion
        s, _, fig = self.snapshot(os.path.join(TRACES, "simple_sync.csv"), "--conf", "fence:inline")
        self.check_history(s, fig)
        states = [b["state"] for seg in s["segments"] for b in seg["blocks"]]
        self.assertIn("active_pending_free", states)
        acts = [e["action"] for e in s["device_traces"][0]]
        self.assertEqual(acts.count("free_requested"), 3)
        self.assertEqual(acts.count("free_completed"), 0)
        # with the fence thread modelled, the same frees complete, after their request
        s, _, _ = self.snapshot(os.path.join(TRACES, "simple_sync.csv"), "--conf", "fence:sync")
        acts = [(e["action"], e["addr"]) for e in s["device_traces"][0]]
        for a, addr in acts:
            if a == "free_completed":
                self.assertLess(acts.index(("free_requested", addr)), acts.index((a, addr)))

    def test_event_fields(self):
        t = os.path.join(TRACES, "async_streams.csv")
        s, _, _ = self.snapshot(t)
        ev = s["device_traces"][0]
        allocs = [e for e in ev if e["action"] == "alloc"]
        self.assertTrue(allocs)
        with open(t) as f:
            rows = list(csv.DictReader(f))
        first = next(r for r in rows if r["op"] in ("malloc", "malloc_async") and r["err"] == "0")
        a = allocs[0]
        self.assertEqual(a["size"], int(first["size"]))  # the bytes asked for, as PyTorch records
        self.assertEqual(a["time_us"], int(first["t_ns"]) // 1000)
        self.assertEqual(a["stream"], int(first["stream"], 16))
        self.assertEqual(a["frames"][0]["filename"], t)
        self.assertEqual(a["frames"][0]["line"], rows.index(first) + 2)
        times = [e["time_us"] for e in ev]
        self.assertEqual(times, sorted(times))
        st = s["allocator_settings"]
        self.assertEqual(st["expandable_segments"], False)
        self.assertIsInstance(st["max_split_size"], int)

    def test_opcodes_the_viewer_reads(self):
        _, raw, _ = self.snapshot(os.path.join(BENCH, "nocache_resnet50_train.csv.gz"))
        marks = []
        for op, arg, _ in pickletools.genops(raw):
            self.assertIn(op.name, VIEWER_OPCODES)
            if op.name == "PROTO":
                self.assertTrue(2 <= arg <= 4)
            elif op.name == "LONG1":
                self.assertLess(abs(arg), 2**63)  # the viewer reads up to 8 bytes as a Number
            if op.name == "MARK":
                marks.append(0)
            elif op.name in ("APPENDS", "SETITEMS"):
                n = marks.pop()
                # batches of at most 1000 items, as Python's pickler writes: the viewer
                # spreads each batch into one call's arguments
                self.assertLessEqual(n, 1000 if op.name == "APPENDS" else 2000)
                if marks:
                    pass  # the container was counted in its parent when it was opened
            elif op.name in PUSHES and marks:
                marks[-1] += 1
            elif op.name == "TUPLE2" and marks:
                marks[-1] -= 1
        self.assertEqual(marks, [])

    def test_max_entries_keeps_the_newest(self):
        t = os.path.join(BENCH, "nocache_resnet50_train.csv.gz")
        full, _, _ = self.snapshot(t)
        s, _, _ = self.snapshot(t, "--snapshot-max-entries", "100")
        self.assertEqual(len(s["device_traces"][0]), 100)
        self.assertEqual(s["device_traces"][0], full["device_traces"][0][-100:])
        self.assertEqual(s["gpupool"]["dropped_events"], len(full["device_traces"][0]) - 100)
        self.assertEqual(s["segments"], full["segments"])
        check_snapshot.check_schema(s)
        check_snapshot.check_backward(s, 0)

    def test_limit_rows_is_the_state_after_that_row(self):
        t = os.path.join(BENCH, "nocache_resnet50_train.csv.gz")
        s, _, fig = self.snapshot(t, "--limit-rows", "3000")
        self.check_history(s, fig)
        self.assertEqual(fig["ops"], "3000")
        self.assertTrue(max(e["frames"][0]["line"] for e in s["device_traces"][0]) <= 3001)

    def test_checker_catches_a_broken_snapshot(self):
        s, _, _ = self.snapshot(os.path.join(TRACES, "simple_sync.csv"))
        s["segments"][0]["blocks"][0]["size"] += 512
        with self.assertRaises(check_snapshot.Bad):
            check_snapshot.check_schema(s)
        s, _, _ = self.snapshot(os.path.join(TRACES, "simple_sync.csv"))
        del s["device_traces"][0][0]  # the first segment_alloc
        with self.assertRaises(check_snapshot.Bad):
            check_snapshot.check_forward(s, 0)
        bad = self.path("bad.pickle")
        with open(bad, "wb") as f:
            f.write(b"not a pickle")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gpu", "check_snapshot.py"), bad],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)


class Timeline(Tmp):
    def rows(self, *opts, trace=os.path.join(BENCH, "nocache_resnet50_train.csv.gz")):
        out = self.path("t.csv")
        p = replay("--timeline", out, *opts, trace)
        with open(out) as f:
            rd = list(csv.reader(f))
        self.assertEqual(rd[0], ["time_ms", "device", "requested_bytes", "allocated_bytes", "reserved_bytes"])
        return [(float(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rd[1:]], figures(p.stdout)

    def test_every_change_and_downsampled(self):
        every, fig = self.rows("--timeline-rows", "0")
        some, _ = self.rows("--timeline-rows", "500")
        dflt, _ = self.rows()
        self.assertGreater(len(every), 10000)
        self.assertEqual(len(some), 500)
        self.assertEqual(len(dflt), 10000)
        for rows in (every, some, dflt):
            times = [r[0] for r in rows]
            self.assertEqual(times, sorted(times))
            # the peaks survive downsampling
            self.assertEqual(max(r[4] for r in rows), int(fig["peak_reserved_bytes"]))
            self.assertEqual(max(r[3] for r in rows), int(fig["peak_allocated_bytes"]))
            self.assertEqual(max(r[2] for r in rows), int(fig["peak_requested_bytes"]))
            self.assertEqual(rows[-1], every[-1])
        # consecutive rows differ: one row per change
        for a, b in zip(every, every[1:]):
            self.assertNotEqual(a[2:], b[2:])

    def test_small_trace_rows(self):
        rows, _ = self.rows(trace=os.path.join(TRACES, "simple_sync.csv"))
        self.assertEqual([r[2] for r in rows], [1000, 4000, 3000, 3500, 500, 0])
        self.assertEqual(rows[0][0], 0.001)

    def test_plot(self):
        probe = subprocess.run([os.path.join(ROOT, "scripts", "gpupool-plot"), "/nonexistent.csv", "/dev/null"],
                               capture_output=True, text=True)
        self.assertEqual(probe.returncode, 2)
        self.assertEqual(len(probe.stderr.strip().splitlines()), 1, probe.stderr)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            if subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], capture_output=True).returncode:
                self.skipTest("matplotlib is not installed (python3-matplotlib)")
        png = self.path("t.png")
        replay("--plot", png, os.path.join(BENCH, "nocache_resnet50_train.csv.gz"))
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(png), 10000)
        self.assertEqual([n for n in os.listdir(self.tmp.name)], ["t.png"])  # the temp CSV is gone
        # --plot with --timeline keeps the CSV
        replay("--plot", png, "--timeline", self.path("t.csv"), os.path.join(TRACES, "simple_sync.csv"))
        self.assertTrue(os.path.exists(self.path("t.csv")))
        # a malformed timeline: one line, exit 2
        with open(self.path("bad.csv"), "w") as f:
            f.write("time_ms,device\n1,2\n")
        p = subprocess.run([os.path.join(ROOT, "scripts", "gpupool-plot"), self.path("bad.csv"), png],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a gpupool timeline", p.stderr)


def have_matplotlib():
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import matplotlib"],
                                                 capture_output=True).returncode == 0:
            return True
    return False


def one_line(test, p, code, want):
    """p failed with exit `code` and one line on stderr holding `want`, no traceback."""
    test.assertEqual(p.returncode, code, p.stderr)
    test.assertNotIn("Traceback", p.stderr)
    test.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
    test.assertIn(want, p.stderr)


class Plot(Tmp):
    """gpupool-plot on its own: what is not a timeline, and the format of OUT."""

    def plot(self, *args):
        return subprocess.run([PLOT] + list(args), capture_output=True, text=True, timeout=120)

    def test_not_a_timeline(self):
        gz = os.path.join(BENCH, "nocache_resnet50_train.csv.gz")
        one_line(self, self.plot(gz, self.path("o.png")), 2, "a gzip file")
        one_line(self, self.plot(os.path.join(TRACES, "simple_sync.csv"), self.path("o.png")), 2, "a trace")
        rnd = self.path("random")
        for seed in range(5):
            with open(rnd, "wb") as f:
                f.write(bytes((i * 2654435761 + seed * 97) >> 7 & 0xFF for i in range(4096)))
            one_line(self, self.plot(rnd, self.path("o.png")), 2, "not a gpupool timeline")
        with open(rnd, "wb") as f:
            f.write(b"time_ms,device,requested_bytes,allocated_bytes,reserved_bytes\n1,0,1,1,\xff\n")
        one_line(self, self.plot(rnd, self.path("o.png")), 2, "not a gpupool timeline")
        with open(rnd, "w") as f:
            f.write("time_ms,device,requested_bytes,allocated_bytes,reserved_bytes\n")
            f.writelines("%d,%d,1,1,1\n" % (d, d) for d in range(17))
        one_line(self, self.plot(rnd, self.path("o.png")), 2, "more than 16 devices")
        # a field that is not a number: the column named, not Python's "invalid literal for int()"
        for row, want in (("1,0,nan,1,1", "rnd:2: requested_bytes: expected a whole number, got 'nan'"),
                          ("x,0,1,1,1", "rnd:2: time_ms: expected a number, got 'x'"),
                          ("1,0.5,1,1,1", "rnd:2: device: expected a whole number, got '0.5'")):
            with open(rnd, "w") as f:
                f.write("time_ms,device,requested_bytes,allocated_bytes,reserved_bytes\n%s\n" % row)
            p = self.plot(rnd, self.path("o.png"))
            one_line(self, p, 2, want.replace("rnd", rnd))
            self.assertNotIn("invalid literal", p.stderr)
        self.assertFalse(os.path.exists(self.path("o.png")))

    def test_format_follows_the_extension(self):
        tl = self.path("t.csv")
        replay("--timeline", tl, os.path.join(TRACES, "simple_sync.csv"))
        for name in ("x.txt", "x", "x.png.gz", ".png"):
            one_line(self, self.plot(tl, self.path(name)), 2, "must be .png, .svg or .pdf")
            self.assertFalse(os.path.exists(self.path(name)))
        if not have_matplotlib():
            self.skipTest("matplotlib is not installed (python3-matplotlib)")
        for name, magic in (("x.png", b"\x89PNG"), ("x.svg", b"<?xml"), ("x.pdf", b"%PDF"), ("X.SVG", b"<?xml")):
            p = self.plot(tl, self.path(name))
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(self.path(name), "rb") as f:
                self.assertEqual(f.read(len(magic)), magic, name)


class Stdin(Tmp):
    def test_dash_reads_standard_input(self):
        t = os.path.join(BENCH, "nocache_resnet50_train.csv.gz")
        want = figures(replay(t).stdout)
        want.pop("ns_per_op")
        plain = self.path("plain.csv")
        with gzip.open(t, "rb") as f, open(plain, "wb") as o:
            o.write(f.read())
        for src in (t, plain):
            with open(src, "rb") as f:
                got = figures(replay("-", stdin=f).stdout)
            got.pop("ns_per_op")
            self.assertEqual(got, want, src)
        # through a pipe, too (not seekable)
        with open(t, "rb") as f:
            cat = subprocess.Popen(["cat"], stdin=f, stdout=subprocess.PIPE)
            got = figures(replay("-", stdin=cat.stdout).stdout)
            cat.stdout.close()
            cat.wait()
        got.pop("ns_per_op")
        self.assertEqual(got, want)
        # errors name it
        with open(self.path("bad.csv"), "w") as f:
            f.write("t_ns,op,tid,dev,stream,size,ptr,dur_ns,err\n1,bogus\n")
        with open(self.path("bad.csv")) as f:
            p = replay("-", stdin=f, check=False)
        one_line(self, p, 2, "gpupool-replay: <stdin>:2: ")
        # an output naming the file behind standard input would empty it before it is read
        with open(plain, "rb") as f:
            p = replay("--timeline", plain, "-", stdin=f, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--timeline would overwrite TRACE", p.stderr)
        self.assertGreater(os.path.getsize(plain), 1000)

    def test_gzip_with_bytes_after_its_end(self):
        t = os.path.join(TRACES, "simple_sync.csv")
        with open(t, "rb") as f:
            data = gzip.compress(f.read())
        for tail in (b"junk", b"\0" * 16, b"\n"):
            bad = self.path("tail.csv.gz")
            with open(bad, "wb") as f:
                f.write(data + tail)
            tl = self.path("t.csv")
            p = replay("--timeline", tl, bad, check=False)
            one_line(self, p, 2, "after the end of the gzip stream")
            self.assertEqual(p.stdout, "")
            self.assertFalse(os.path.exists(tl))
        # two whole members are one gzip file, as gzip reads them
        with open(bad, "wb") as f:
            f.write(data + gzip.compress(b""))
        self.assertEqual(figures(replay(bad).stdout)["ops"], "6")


def doc_json_fields():
    """The fields docs/replay.md's table of --json lists, in order."""
    with open(DOCS) as f:
        text = f.read()
    m = re.search(r"<!-- replay-json-fields -->(.*?)<!-- /replay-json-fields -->", text, re.S)
    assert m, "docs/replay.md has no <!-- replay-json-fields --> table"
    return [r.group(1) for r in re.finditer(r"^\| `([a-z_]+)` \|", m.group(1), re.M)]


class Json(Tmp):
    def test_json_is_the_figures(self):
        t = os.path.join(TRACES, "async_streams.csv")
        kv = replay("--conf", "fence:sync", t).stdout.splitlines()
        p = replay("--conf", "fence:sync", "--json", t)
        self.assertEqual(len(p.stdout.splitlines()), 1)
        j = json.loads(p.stdout)
        self.assertEqual(j["trace"], t)
        self.assertEqual(j["conf"], "fence:sync")
        keys = [ln.split("=", 1)[0] for ln in kv]
        self.assertEqual(list(j)[2:], keys)  # the same figures in the same order
        for ln in kv:
            k, v = ln.split("=", 1)
            if k != "ns_per_op":
                self.assertEqual(j[k], json.loads(v), k)
            self.assertIsInstance(j[k], (int, float))
        for k in keys:
            if k.endswith(("_ms", "ns_per_op")) or k.startswith("reserved_over"):
                continue
            self.assertIsInstance(j[k], int, k)
        # every field is documented, in order
        self.assertEqual(doc_json_fields(), list(j))

    def test_json_strings_escaped(self):
        weird = self.path('a "b"\\c\x01\xe9.csv')
        with open(os.path.join(TRACES, "simple_sync.csv"), "rb") as f, open(weird, "wb") as o:
            o.write(f.read())
        p = subprocess.run([REPLAY, "--json", weird], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["trace"], weird)
        raw = os.fsencode(self.tmp.name) + b"/bad\xff.csv"
        with open(raw, "wb") as o, open(os.path.join(TRACES, "simple_sync.csv"), "rb") as f:
            o.write(f.read())
        p = subprocess.run([REPLAY, "--json", raw], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(json.loads(p.stdout)["trace"].endswith("/bad\ufffd.csv"))

    def test_bench_scripts_read_the_default_output(self):
        # bench/replay_all.sh and bench/fence_table.sh parse the key=value lines
        p = subprocess.run(["sh", os.path.join(ROOT, "bench", "replay_all.sh"), TRACES, REPLAY],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [ln for ln in p.stdout.splitlines() if ln.startswith("| simple_sync.csv")]
        self.assertEqual(len(rows), 1, p.stdout)
        self.assertIn("| 6 | 0.000 | 0.000 | 0.002 | 524.288 | 512.000 | 0/0 | 1/0 |", rows[0])
        p = subprocess.run(["sh", os.path.join(ROOT, "bench", "fence_table.sh"), REPLAY,
                            os.path.join(TRACES, "simple_sync.csv")], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, LATENCIES="0"))
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [ln for ln in p.stdout.splitlines() if ln.startswith("| simple_sync.csv | 0 |")]
        self.assertEqual(len(rows), 3, p.stdout)
        self.assertTrue(all("| 524.288 |" in r for r in rows), rows)


class Usage(Tmp):
    def bad(self, *args, want, env=None):
        p = replay(*args, check=False, env=env)
        self.assertEqual(p.returncode, 2, p.stderr)
        first = p.stderr.splitlines()[0]
        self.assertIn(want, first)
        self.assertTrue(first.startswith("gpupool-replay: "), first)
        self.assertEqual(p.stdout, "")
        return p

    def test_knobs(self):
        # the knobs as the library reads them: exit 2 only where it would refuse every
        # allocation; the environment's scheduler variables and GPUPOOL_DISABLE count
        base = {k: v for k, v in os.environ.items() if not k.startswith(("GPUPOOL_", "CUDA_DEVICE_MEMORY_LIMIT"))}
        for env, rc, out in (({}, 0, "knobs: all at their defaults (no limit)\n"),
                             ({"GPUPOOL_CONF": "limit:8G"}, 0, "knobs: limit:8G\n"),
                             ({"GPUPOOL_CONF": "round:3"}, 0, "knobs: all at their defaults (no limit)\n"),
                             ({"CUDA_DEVICE_MEMORY_LIMIT": "4g"}, 0, "knobs: limit:4G (CUDA_DEVICE_MEMORY_LIMIT)\n"),
                             ({"GPUPOOL_CONF": "limit:abc"}, 2, ""), ({"GPUPOOL_CONF": "limt:1G"}, 2, ""),
                             ({"GPUPOOL_CONF": "strict:1,round:3"}, 2, ""), ({"CUDA_DEVICE_MEMORY_LIMIT": "junk"}, 2, ""),
                             ({"GPUPOOL_CONF": "limit:abc", "GPUPOOL_DISABLE": "1"}, 0, None)):
            with self.subTest(env=env):
                p = replay("--knobs", check=False, env=dict(base, **env))
                self.assertEqual(p.returncode, rc, p.stderr)
                if out is not None:
                    self.assertEqual(p.stdout, out)
                if rc == 2:
                    self.assertIn("refuses every allocation", p.stderr.splitlines()[-1])
        self.assertEqual(replay("--knobs", "--conf", "limit:abc", check=False, env=base).returncode, 2)
        self.bad("--knobs", "x.csv", want="--knobs takes no TRACE")

    def test_bad_usage(self):
        t = os.path.join(TRACES, "simple_sync.csv")
        p = self.bad("--bogus", t, want="unknown option --bogus")
        self.assertIn("usage: gpupool-replay", p.stderr)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)  # one line, the usage in it
        self.bad("-x", t, want="unknown option -x")
        self.bad(t, "--torch-snapshot", want="option --torch-snapshot needs a value")
        self.bad(want="no TRACE given")
        self.bad(t, t, want="one TRACE expected")
        self.bad("--check=yes", t, want="option --check takes no value")
        self.bad("--limit-rows", "-1", t, want="--limit-rows needs a number")
        self.bad("--snapshot-max-entries", "5", t, want="--snapshot-max-entries is for --torch-snapshot")
        self.bad("--timeline-rows", "5", t, want="--timeline-rows is for --timeline or --plot")
        self.bad("--torch-snapshot", self.path("x"), "--timeline", self.path("x"), t, want="name the same file")
        self.bad("--timeline", t, t, want="--timeline would overwrite TRACE")
        p = self.bad("--torch-snapshot", self.path("y.png"), "--plot", self.path("y.png"), t, want="name the same file")
        self.assertIn("usage: gpupool-replay", p.stderr)
        for v in ("0", "-1", "4294967296"):
            self.bad("--torch-snapshot", self.path("s"), "--snapshot-max-entries", v, t,
                     want="--snapshot-max-entries needs a number from 1 to 4294967295")
        self.bad("--timeline", self.path("t"), "--timeline-rows", "1", t, want="0 (every change) or at least 2")
        for conf in (["--conf", "round:3"], ["--conf=bogus:1"]):
            p = replay(*conf, t, check=False)
            self.assertEqual(p.returncode, 2)
            lines = p.stderr.splitlines()
            self.assertEqual(len(lines), 2, p.stderr)
            self.assertIn("GPUPOOL_CONF: " + conf[-1].split("=")[-1], lines[0])  # the knob, named
            self.assertIn("gpupool-replay: not replaying: a knob above is bad", lines[1])

    def test_vmm_cost(self):
        # one figure for a chunk's map and unmap, or two (map, unmap), each modelled apart:
        # with release_threshold:0 every chunk mapped is unmapped again (15 of each)
        t = os.path.join(TRACES, "async_streams.csv")
        for cost, want in (("10", 0.3), ("10,0", 0.15), ("0,10", 0.15), ("38,29", 1.005), ("0", 0.0)):
            with self.subTest(cost=cost):
                d = json.loads(replay("--json", "--conf", "release_threshold:0", "--vmm-cost-us", cost, t).stdout)
                self.assertEqual((d["chunks_mapped"], d["chunks_unmapped"]), (15, 15))
                self.assertAlmostEqual(d["vmm_ms"], want, places=3)
        for v in ("x", "38,", ",29", "1,2,3", "-1", "1000001", "5,1000001"):
            with self.subTest(v=v):
                self.bad("--vmm-cost-us", v, t, want="--vmm-cost-us")

    def test_outputs_that_cannot_be_written(self):
        t = os.path.join(TRACES, "simple_sync.csv")
        self.bad("--torch-snapshot", "/nonexistent/dir/s.pickle", t, want="cannot write /nonexistent/dir/s.pickle")
        os.symlink(self.path("elsewhere"), self.path("link.csv"))
        self.bad("--timeline", self.path("link.csv"), t, want="symbolic link")
        self.assertFalse(os.path.exists(self.path("elsewhere")))

    def test_outputs_checked_before_the_replay(self):
        # a --plot that cannot be written stops before the replay: nothing printed, nothing
        # left, however long the trace
        t = os.path.join(BENCH, "nocache_resnet50_train.csv.gz")
        snap, tl = self.path("s.pickle"), self.path("t.csv")
        os.mkdir(self.path("dir.png"))
        for plot, want in ((self.tmp.name, "--plot names a directory"),
                           (self.path("dir.png"), "--plot names a directory"),
                           (self.path("x.txt"), "--plot writes PNG, SVG or PDF"),
                           ("/nonexistent/dir/x.png", "cannot write /nonexistent/dir/x.png")):
            with self.subTest(plot=plot):
                p = self.bad("--torch-snapshot", snap, "--timeline", tl, "--plot", plot, t, want=want)
                self.assertNotIn("ops=", p.stdout)
                self.assertFalse(os.path.exists(snap))
                self.assertFalse(os.path.exists(tl))
                self.assertFalse(os.path.exists(self.path("x.txt")))
        p = self.bad("--plot", self.path("p.png"), t, want="cannot find gpupool-plot",
                     env=dict(os.environ, GPUPOOL_PLOT=self.path("none")))
        self.assertEqual(os.listdir(self.tmp.name), ["dir.png"])

    def test_no_output_when_the_plot_fails(self):
        # the replay succeeded, the plot did not: no figures, and no output of the run left
        fake = self.path("fake-plot")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho 'gpupool-plot: cannot write it' >&2\nexit 1\n")
        os.chmod(fake, 0o755)
        snap, tl, png = self.path("s.pickle"), self.path("t.csv"), self.path("p.png")
        tmpdir = self.path("tmp")  # where the plot's own timeline is made
        os.mkdir(tmpdir)
        for named_timeline in (True, False):
            args = ["--torch-snapshot", snap, "--plot", png] + (["--timeline", tl] if named_timeline else [])
            p = replay(*args, os.path.join(TRACES, "simple_sync.csv"), check=False,
                       env=dict(os.environ, GPUPOOL_PLOT=fake, TMPDIR=tmpdir))
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(p.stdout, "")
            self.assertEqual(p.stderr.splitlines(), ["gpupool-plot: cannot write it",
                                                     "gpupool-replay: the plot was not made (gpupool-plot "
                                                     "exited 1); no output kept"])
            self.assertEqual(sorted(os.listdir(self.tmp.name)), ["fake-plot", "tmp"])
            self.assertEqual(os.listdir(tmpdir), [])

    def test_no_output_from_a_failed_replay(self):
        bad = self.path("bad.csv")
        with open(bad, "w") as f:
            f.write("t_ns,op,tid,dev,stream,size,ptr,dur_ns,err\n1000,malloc,1,0,0,1000,7f00,10,0\n2000,bogus\n")
        snap, tl = self.path("s.pickle"), self.path("t.csv")
        p = replay("--torch-snapshot", snap, "--timeline", tl, bad, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("bad.csv:3:", p.stderr)
        self.assertFalse(os.path.exists(snap))
        self.assertFalse(os.path.exists(tl))

    def test_help(self):
        p = replay("--help")
        for opt in ("--torch-snapshot", "--timeline", "--plot", "--snapshot-max-entries", "--timeline-rows",
                    "--conf", "--limit-rows", "memory_viz"):
            self.assertIn(opt, p.stdout)
        self.assertEqual(replay("-h").stdout, p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
