"""gpupool-replay's outputs and options: --torch-snapshot (PyTorch's memory snapshot pickle),
--timeline, --plot, and the argument handling (getopt_long: one-line errors, exit 2).

The snapshot is checked with bench/gpu/check_snapshot.py's schema and history checks (the
ones that need no PyTorch), against the replay's own peaks, and for the pickle opcodes that
PyTorch's browser viewer (MemoryViz.js) can read. Run by meson (suite python) with
GPUPOOL_TEST_REPLAY=path/to/gpupool-replay; the plot test skips without matplotlib.
"""

import csv
import importlib.util
import os
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


def replay(*args, check=True):
    p = subprocess.run([REPLAY] + list(args), capture_output=True, text=True, timeout=120)
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
                    self.assertLessEqual({"alloc", "free_requested", "segment_alloc"}, acts)
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


class Usage(Tmp):
    def bad(self, *args, want):
        p = replay(*args, check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        first = p.stderr.splitlines()[0]
        self.assertIn(want, first)
        self.assertTrue(first.startswith("gpupool-replay: "), first)
        self.assertEqual(p.stdout, "")
        return p

    def test_bad_usage(self):
        t = os.path.join(TRACES, "simple_sync.csv")
        p = self.bad("--bogus", t, want="unknown option --bogus")
        self.assertIn("usage: gpupool-replay", p.stderr)
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
        p = self.bad("--torch-snapshot", self.path("y"), "--plot", self.path("y"), t, want="name the same file")
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

    def test_outputs_that_cannot_be_written(self):
        t = os.path.join(TRACES, "simple_sync.csv")
        self.bad("--torch-snapshot", "/nonexistent/dir/s.pickle", t, want="cannot write /nonexistent/dir/s.pickle")
        os.symlink(self.path("elsewhere"), self.path("link.csv"))
        self.bad("--timeline", self.path("link.csv"), t, want="symbolic link")
        self.assertFalse(os.path.exists(self.path("elsewhere")))

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
