#!/usr/bin/env python3
"""Tests of scripts/gpupool-maxbatch and scripts/gpupool-run without a GPU, driving
tests/scripts/fake_train.py. Run: python3 tests/scripts/test_maxbatch.py (exit status 0 = pass)."""
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAXBATCH = os.path.join(ROOT, "scripts", "gpupool-maxbatch")
RUN = os.path.join(ROOT, "scripts", "gpupool-run")
FAKE = os.path.join(HERE, "fake_train.py")


def expected_probes(t, lo=1):
    """Doubling from lo until > t, then bisection of the last doubling interval."""
    f = int(math.floor(math.log2(t / lo)))
    return f + 2 + f


class MaxBatchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.tmp.name, "log")

    def tearDown(self):
        self.tmp.cleanup()

    def run_mb(self, *opts, env=None, cmd=None, preload=False, quiet=True):
        e = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "GPUPOOL_"))}
        e.update(FAKE_LOG=self.log, **(env or {}))
        argv = [sys.executable, MAXBATCH] + (["--quiet"] if quiet else []) + ([] if preload else ["--no-preload"])
        argv += list(opts) + ["--"] + (cmd or [sys.executable, FAKE, "{}"])
        return subprocess.run(argv, env=e, capture_output=True, text=True, timeout=120)

    def tried(self):
        with open(self.log) as f:
            return [ln.split() for ln in f]

    def test_answer_equals_threshold(self):
        for t in (1, 2, 3, 5, 7, 8, 16, 31, 100, 1000):
            with self.subTest(threshold=t):
                if os.path.exists(self.log):
                    os.unlink(self.log)
                r = self.run_mb(env={"FAKE_OOM_ABOVE": str(t)})
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("max batch size: %d\n" % t, r.stdout)
                self.assertEqual(len(self.tried()), expected_probes(t))
                self.assertIn("probes: %d here" % expected_probes(t), r.stdout)

    def test_probe_sequence_and_table(self):
        r = self.run_mb(env={"FAKE_OOM_ABOVE": "5"})
        self.assertEqual([int(x[0]) for x in self.tried()], [1, 2, 4, 8, 6, 5])
        self.assertIn("grow-by-2-until-OOM needs 4 but stops at 4 (20% below), and 6 to reach 5", r.stdout)
        rows = [ln.split() for ln in r.stdout.splitlines() if ln.split()[:1] and ln.split()[0].isdigit()]
        self.assertEqual([(x[1], x[2]) for x in rows],
                         [("1", "ok"), ("2", "ok"), ("4", "ok"), ("8", "OOM"), ("6", "OOM"), ("5", "ok")])
        self.assertEqual(rows[2][3:5], ["4.0", "MiB"])  # peak reserved from the report

    def test_power_of_two_same_answer(self):
        r = self.run_mb(env={"FAKE_OOM_ABOVE": "16"})
        self.assertIn("probes: 10 here; grow-by-2-until-OOM needs 6 for the same answer", r.stdout)

    def test_min(self):
        r = self.run_mb("--min", "3", env={"FAKE_OOM_ABOVE": "20"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("max batch size: 20\n", r.stdout)
        self.assertEqual([int(x[0]) for x in self.tried()][:4], [3, 6, 12, 24])

    def test_min_fails(self):
        r = self.run_mb("--min", "4", env={"FAKE_OOM_ABOVE": "3"})
        self.assertEqual(r.returncode, 1)
        self.assertIn("even --min 4 runs out of memory", r.stdout)
        self.assertEqual(len(self.tried()), 1)

    def test_max_caps(self):
        r = self.run_mb("--max", "50", env={"FAKE_OOM_ABOVE": "100"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("max batch size: 50 (capped by --max", r.stdout)
        self.assertEqual([int(x[0]) for x in self.tried()], [1, 2, 4, 8, 16, 32, 50])
        r = self.run_mb("--max", "50", env={"FAKE_OOM_ABOVE": "40"})
        self.assertIn("max batch size: 40\n", r.stdout)

    def test_non_oom_error_stops(self):
        r = self.run_mb(env={"FAKE_OOM_ABOVE": "100", "FAKE_CRASH_AT": "8"})
        self.assertEqual(r.returncode, 3)
        self.assertIn("probe 4 (batch 8) failed with an error that is not out of memory", r.stderr)
        self.assertIn("ValueError: shapes do not match at batch 8", r.stderr)
        self.assertIn("largest batch that ran before the error: 4", r.stdout)
        self.assertEqual(len(self.tried()), 4)

    @unittest.skipUnless(os.environ.get("GPUPOOL_TEST_LIB") and os.environ.get("GPUPOOL_TEST_ERRORS"),
                         "the built library and tests/e2e/e2e_device_errors (not under the sanitizers)")
    def test_cuda_error_is_not_oom(self):
        """The real library over the fake runtime: a runtime with no usable driver gives its own
        error (35), which is not an out-of-memory, so the search stops there with that error in
        the probe's stderr; and the same command with the device working finds the limit."""
        env = {"GPUPOOL_LIB": os.environ["GPUPOOL_TEST_LIB"], "LD_LIBRARY_PATH": os.environ["GPUPOOL_TEST_FAKE_DIR"],
               "FAKECUDA_DEVICES": "1", "FAKECUDA_CAPACITY": "1G", "GPUPOOL_SHM_DIR": self.tmp.name}
        cmd = [os.environ["GPUPOOL_TEST_ERRORS"], "batch", "{}"]
        r = self.run_mb("--limit", "16M", env=dict(env, FAKECUDA_FAIL="*:1+:35"), cmd=cmd, preload=True)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("probe 1 (batch 1) failed with an error that is not out of memory", r.stderr)
        self.assertIn("cudaErrorInsufficientDriver", r.stderr)
        self.assertNotIn("runs out of memory", r.stdout + r.stderr)
        r = self.run_mb("--limit", "16M", env=env, cmd=cmd, preload=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("max batch size: 16 under limit 16M", r.stdout)

    def test_oom_from_stderr_without_report(self):
        r = self.run_mb(env={"FAKE_OOM_ABOVE": "12", "FAKE_NO_REPORT": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("max batch size: 12\n", r.stdout)
        self.assertIn("OOM told by stderr", r.stdout)

    def test_gpupool_oom_text_without_report(self):
        r = self.run_mb(env={"FAKE_OOM_ABOVE": "12", "FAKE_NO_REPORT": "1", "FAKE_GPUPOOL_TEXT": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("max batch size: 12\n", r.stdout)

    def test_crash_without_report_is_error(self):
        r = self.run_mb(env={"FAKE_CRASH_AT": "2", "FAKE_NO_REPORT": "1"})
        self.assertEqual(r.returncode, 3)

    def test_recovered_oom_is_success(self):
        r = self.run_mb(env={"FAKE_OOM_ABOVE": "9", "FAKE_RETRIED": "1"})
        self.assertIn("max batch size: 9\n", r.stdout)

    def test_timeout(self):
        r = self.run_mb("--timeout", "1", env={"FAKE_SLEEP_AT": "4"})
        self.assertEqual(r.returncode, 3)
        self.assertIn("timed out after 1s", r.stderr)

    def test_limit_and_report_env(self):
        r = self.run_mb("--limit", "8G", env={"FAKE_OOM_ABOVE": "2", "GPUPOOL_CONF": "fence:sync,limit:1G"})
        self.assertEqual(r.returncode, 0, r.stderr)
        # the limit replaced, and a short wait in the GPU's line for the probes
        self.assertEqual({x[1] for x in self.tried()}, {"fence:sync,limit:8G,reclaim_wait_ms:500"})

    def test_wait_set_by_the_user_kept(self):
        r = self.run_mb(env={"FAKE_OOM_ABOVE": "2", "GPUPOOL_CONF": "reclaim_wait_ms:3000"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual({x[1] for x in self.tried()}, {"reclaim_wait_ms:3000"})
        self.assertEqual({x[2] for x in self.tried()}, {"-"})  # --no-preload

    def test_limit_checked_first(self):
        r = self.run_mb("--limit", "1Q", env={"FAKE_OOM_ABOVE": "2"})
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("--limit 1Q: expected a size up to 256T", r.stderr)
        self.assertFalse(os.path.exists(self.log))  # nothing ran

    def test_limit_rules_are_the_shims(self):
        """parse_limit accepts exactly what the shim's parser accepts: gpupool-replay --conf
        runs src/config/config.c on the value (GPUPOOL_TEST_REPLAY, set by meson)."""
        cases = ["8G", "8g", "8GiB", "8gib", "8GB", "8Gb", "8Gi", "8iB", "8b", "512", "0", "0.0", "none", "NONE",
                 " 8G ", "1.5G", "1.5", "0.5K", "1.1234567G", "8.", ".5G", "+8G", "-1G", "1Q", "1e3", "8 G",
                 "256T", "257T", "256.000001T", "1%", "100%", "101%", "0%", "050%", "%", "50%%", "5%0", "1,2",
                 "99999999999999999999999T", "\u0668G"]
        sys.path.insert(0, os.path.dirname(MAXBATCH))
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.SourceFileLoader("gpupool_maxbatch", MAXBATCH)
        mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("gpupool_maxbatch", loader))
        loader.exec_module(mod)
        self.assertEqual(mod.parse_limit("8G"), ("bytes", 8 << 30))
        self.assertEqual(mod.parse_limit("1.5K"), ("bytes", 1536))
        self.assertEqual(mod.parse_limit("80%"), ("percent", 80))
        self.assertIsNone(mod.parse_limit("1Q"))
        replay = os.environ.get("GPUPOOL_TEST_REPLAY")
        if not replay:
            self.skipTest("GPUPOOL_TEST_REPLAY (a built gpupool-replay) not set")
        trace = os.path.join(ROOT, "tests", "traces", "simple_sync.csv")
        for v in cases:
            with self.subTest(value=v):
                r = subprocess.run([replay, "--conf", "limit:" + v, trace], capture_output=True, text=True)
                self.assertIn(r.returncode, (0, 2), r.stderr)
                self.assertEqual(mod.parse_limit(v) is not None, r.returncode == 0, r.stderr)

    def test_shim_warnings_shown(self):
        r = self.run_mb(env={"FAKE_OOM_ABOVE": "3", "FAKE_WARNING": "GPUPOOL_LOG: loud: expected a level"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("gpupool: warning: GPUPOOL_LOG: loud: expected a level"), 1, r.stderr)
        self.assertIn("probe 1: gpupool: warning:", r.stderr)

    def test_oom_warnings_not_echoed(self):
        # the out of memory each OOM probe ends with is what the search looks for: the table
        # says OOM; no line per probe, --quiet or not
        oom = ("device 0: out of memory allocating {} (reserved 1.0 GiB, in use 1.0 GiB); this device's "
               "further out-of-memory errors are logged at GPUPOOL_LOG=info, the exit report counts them")
        for quiet in (True, False):
            r = self.run_mb(env={"FAKE_OOM_ABOVE": "5", "FAKE_WARNING": oom}, quiet=quiet)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("out of memory", r.stderr)

    def test_limit_not_in_effect(self):
        r = self.run_mb("--limit", "8G", env={"FAKE_OOM_ABOVE": "5", "FAKE_LIMIT_IGNORED": "1"})
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("probe 1 (batch 1): the limit 8G did not take effect (the report shows limit_bytes 0, "
                      "not 8589934592)", r.stderr)
        self.assertNotIn("max batch size", r.stdout)
        self.assertIn("limit not in effect", r.stdout)
        self.assertEqual(len(self.tried()), 1)
        # told by the shim's warning (a report that says nothing of it)
        os.unlink(self.log)
        r = self.run_mb("--limit", "50%", env={"FAKE_OOM_ABOVE": "5", "FAKE_WARNING":
                                                "GPUPOOL_CONF: limit:50%: cannot read device memory; no limit"})
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("did not take effect (gpupool warned: gpupool: warning: GPUPOOL_CONF: limit:50%", r.stderr)
        # in effect: the report's limit is the one asked for; the shim's out-of-memory
        # warnings name the limit, and are no sign of it missing
        os.unlink(self.log)
        r = self.run_mb("--limit", "1.5G", env={"FAKE_OOM_ABOVE": "5", "FAKE_WARNING":
                                                 "device 0: out of memory allocating 2.0 GiB (reserved 1.0 GiB, "
                                                 "in use 1.0 GiB, limit 1.5 GiB)"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("max batch size: 5 under limit 1.5G", r.stdout)

    def test_preload(self):
        lib = os.path.join(self.tmp.name, "libgpupool.so")
        with open(lib, "wb") as f:  # an ELF header only: ld.so ignores it with a warning; the fake just logs LD_PRELOAD
            f.write(b"\x7fELF")
        r = self.run_mb(env={"FAKE_OOM_ABOVE": "2", "GPUPOOL_LIB": lib}, preload=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual({x[2] for x in self.tried()}, {lib})

    def test_never_oom_stops(self):
        r = self.run_mb(cmd=[sys.executable, FAKE, "{}"], env={"FAKE_OOM_ABOVE": str(1 << 30)})
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("batch 16777216 still ran without running out of memory", r.stderr)
        self.assertEqual(len(self.tried()), 25)

    def test_usage(self):
        self.assertEqual(self.run_mb(cmd=[sys.executable, FAKE, "3"]).returncode, 2)
        self.assertEqual(self.run_mb("--min", "0").returncode, 2)
        self.assertEqual(self.run_mb("--min", "5", "--max", "4").returncode, 2)
        self.assertEqual(self.run_mb("--max", str(1 << 41)).returncode, 2)
        for t in ("nan", "inf", "0", "-1"):
            r = self.run_mb("--timeout", t)
            self.assertEqual((r.returncode, r.stderr.count("\n")), (2, 1), t + ": " + r.stderr)
        r = subprocess.run([sys.executable, MAXBATCH], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        r = subprocess.run([sys.executable, MAXBATCH, "--bogus", "--", "x", "{}"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)

    def test_command_cannot_run(self):
        # one line, a shell's status (127 not found, 126 not executable), nothing run, no traceback
        d = self.tmp.name
        notexec = os.path.join(d, "train.py")
        with open(notexec, "w") as f:
            f.write("print(1)\n")
        garbage = os.path.join(d, "garbage")
        with open(garbage, "wb") as f:
            f.write(b"\0\1\2 not a program")
        os.chmod(garbage, 0o755)
        lib = os.path.join(d, "libgpupool.so")
        with open(lib, "wb") as f:  # an ELF header: gpupool-run refuses a GPUPOOL_LIB without one
            f.write(b"\x7fELF")
        for cmd, rc, msg in (([os.path.join(d, "nonexistent"), "{}"], 127, os.path.join(d, "nonexistent") + ": no such file"),
                             (["gpupool-no-such-command", "{}"], 127, "gpupool-no-such-command: command not found"),
                             ([d, "{}"], 126, d + ": is a directory, not a command"),
                             ([notexec, "{}"], 126, notexec + ": not executable (permission denied)"),
                             ([garbage, "{}"], 126, garbage + ": Exec format error")):
            with self.subTest(cmd=cmd[0]):
                for preload in (False, True):
                    r = self.run_mb("--limit", "1G", cmd=cmd, preload=preload, env={"GPUPOOL_LIB": lib})
                    self.assertEqual(r.returncode, rc, r.stdout + r.stderr)
                    self.assertEqual(r.stderr.strip().splitlines()[-1], "gpupool-maxbatch: " + msg, r.stderr)
                    self.assertNotIn("Traceback", r.stderr)
                    self.assertEqual(r.stdout, "")

    def test_dry_run(self):
        r = self.run_mb("--dry-run", "--limit", "8G", "--max", "20",
                        cmd=["python3", "train.py", "--batch={}"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("GPUPOOL_CONF=limit:8G", r.stdout)
        self.assertIn("1, 2, 4, 8, 16, 20", r.stdout)
        self.assertIn("python3 train.py --batch=1\n", r.stdout)
        self.assertFalse(os.path.exists(self.log))


class RunTest(unittest.TestCase):
    def test_no_library_is_127(self):
        # a GPUPOOL_LIB that is missing or not a library: gpupool-run's one line and its 127,
        # never 1 (which says that even --min ran out of memory)
        with tempfile.TemporaryDirectory() as d:
            junk = os.path.join(d, "junk.so")
            with open(junk, "w") as f:
                f.write("not a library\n")
            for lib, what in ((junk, "not a shared library"), (junk + ".missing", "no such file")):
                with self.subTest(lib=lib):
                    r = subprocess.run([MAXBATCH, "--limit", "1G", "--", "true", "{}"], capture_output=True,
                                       text=True, env=dict(os.environ, GPUPOOL_LIB=lib))
                    self.assertEqual(r.returncode, 127, r.stdout + r.stderr)
                    self.assertEqual(r.stdout, "")
                    self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                    self.assertIn("gpupool-maxbatch: gpupool-run: GPUPOOL_LIB=%s: %s" % (lib, what), r.stderr)

    def test_lookup_and_prepend(self):
        with tempfile.TemporaryDirectory() as d:
            lib = os.path.join(d, "libgpupool.so")
            with open(lib, "wb") as f:  # an ELF header: gpupool-run refuses a GPUPOOL_LIB without one
                f.write(b"\x7fELF")
            env = dict(os.environ, GPUPOOL_LIB=lib, LD_PRELOAD="")
            r = subprocess.run([RUN, "--print-lib"], env=env, capture_output=True, text=True)
            self.assertEqual(r.stdout.strip(), os.path.realpath(lib))
            env["LD_PRELOAD"] = "/nonexistent/other.so"
            r = subprocess.run([RUN, "sh", "-c", 'printf "%s\\n" "$LD_PRELOAD"'], env=env,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), os.path.realpath(lib) + " /nonexistent/other.so")
            env["GPUPOOL_LIB"] = lib + ".missing"
            r = subprocess.run([RUN, "true"], env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 127)
            self.assertIn("no such file", r.stderr)
        r = subprocess.run([RUN, "--help"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: gpupool-run", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
