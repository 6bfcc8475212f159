#!/usr/bin/env python3
"""Tests of scripts/gpupool-run without a GPU or PyTorch: --help fits a screen, --print-lib -v
lists every place the search looks (and the search finds a library in them), argument errors
(one line, exit 2), a command
that cannot run (one line, 127 or 126), and --torch: the startup hook (python/gpupool_hook)
makes gpupool PyTorch's allocator when the program imports torch, here a stand-in torch
package that records what PyTorch would be asked. With a built library (GPUPOOL_TEST_LIB,
GPUPOOL_TEST_STAT, GPUPOOL_TEST_CUDA_INC: Meson sets them) also --fake: the README's C program
("Your own program") and docs/install.md's Python one over the bundled fake runtime; and --torch with
the real library over that fake runtime, under tests/scripts/fake_torch (a stand-in with
PyTorch's shape and its refusals under a pluggable allocator): torch.cuda's memory functions
answer from gpupool's figures, cudnn.benchmark stays off, graphs and IPC are one line.
Run: python3 tests/scripts/test_gpupool_run.py"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUN = os.path.join(ROOT, "scripts", "gpupool-run")

# A stand-in for torch: the two calls gpupool.use_as_torch_allocator makes, and the refusal
# PyTorch answers once its allocator is initialised (FAKE_TORCH_CUDA_INITIALISED=1).
FAKE_TORCH = {
    "torch/__init__.py": "import sys\nIMPORTS = sys.modules.get('__main__') is not None\nfrom . import cuda\n",
    "torch/cuda/__init__.py": textwrap.dedent("""\
        import os
        from . import memory
        _initialized = os.environ.get("FAKE_TORCH_CUDA_INITIALISED") == "1"
        def is_initialized():
            return _initialized
        """),
    "torch/cuda/memory.py": textwrap.dedent("""\
        calls = []
        class CUDAPluggableAllocator:
            def __init__(self, path, malloc, free):
                self.args = (path, malloc, free)
        def change_current_allocator(a):
            import torch.cuda
            if torch.cuda._initialized:
                raise RuntimeError("Can't swap an already initialized allocator")
            calls.append(a.args)
        """),
}


class RunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.lib = os.path.join(self.tmp, "libgpupool.so")
        with open(self.lib, "wb") as f:  # an ELF header: GPUPOOL_LIB must look like a library
            f.write(b"\x7fELF")
        for name, text in FAKE_TORCH.items():
            p = os.path.join(self.tmp, "fake", name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)

    def run_(self, *args, env=None, **kw):
        e = dict(os.environ, GPUPOOL_LIB=self.lib)
        for k in ("LD_PRELOAD", "PYTHONPATH"):
            e.pop(k, None)
        e.update(env or {})
        return subprocess.run([RUN] + list(args), capture_output=True, text=True, env=e, timeout=60, **kw)

    def bad(self, *args, want):
        r = self.run_(*args)
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = r.stderr.splitlines()
        self.assertEqual(lines[0], "gpupool-run: " + want)
        self.assertTrue(lines[1].startswith("usage: gpupool-run"))
        self.assertEqual(r.stdout, "")

    def test_bad_usage(self):
        self.bad("--bogus", "true", want="unknown option --bogus")
        self.bad("-x", want="unknown option -x")
        self.bad("--print-lib=yes", want="option --print-lib takes no value")
        self.bad(want="no command given")
        self.bad("--torch", want="no command given")
        self.bad("--print-lib", "extra", want="--print-lib runs nothing: 'extra' is one word too many")
        self.assertEqual(self.run_("--", "true").returncode, 0)

    def test_command_cannot_run(self):
        # one line and a shell's status, before anything is preloaded: 127 not found, 126
        # cannot be executed (bash's own exec would say "exec: ...: not found")
        notexec = os.path.join(self.tmp, "train.py")
        open(notexec, "w").close()
        for cmd, rc, msg in (("gpupool-no-such-command", 127, "gpupool-no-such-command: command not found"),
                             (os.path.join(self.tmp, "nope"), 127, os.path.join(self.tmp, "nope") + ": no such file"),
                             (self.tmp, 126, self.tmp + ": is a directory, not a command"),
                             (notexec, 126, notexec + ": not executable (permission denied)")):
            for opts in ([], ["--torch"], ["--"]):
                with self.subTest(cmd=cmd, opts=opts):
                    r = self.run_(*opts, cmd, "arg")
                    self.assertEqual(r.returncode, rc, r.stderr)
                    self.assertEqual(r.stderr, "gpupool-run: " + msg + "\n")
                    self.assertEqual(r.stdout, "")
        # a command found on PATH runs; a shell builtin with no program of its name does not
        self.assertEqual(self.run_("true").returncode, 0)
        r = self.run_("cd", "/")
        self.assertEqual((r.returncode, r.stderr), (127, "gpupool-run: cd: command not found\n"))

    def test_library_that_is_not_a_file(self):
        for lib, what in ((self.tmp, "is a directory, not the library"), ("/dev/null", "is not a regular file"),
                          (os.path.join(self.tmp, "none.so"), "no such file"),
                          (os.path.join(self.tmp, "fake", "torch", "__init__.py"), "not a shared library (no ELF header)")):
            with self.subTest(lib=lib):
                for args in (["true"], ["--print-lib"]):
                    r = self.run_(*args, env={"GPUPOOL_LIB": lib})
                    self.assertEqual(r.returncode, 127, r.stderr)
                    self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                    self.assertTrue(r.stderr.startswith("gpupool-run: GPUPOOL_LIB=%s: %s" % (lib, what)), r.stderr)

    def test_help_fits_a_screen(self):
        for opt in ("--help", "-h"):
            h = self.run_(opt).stdout
            lines = h.splitlines()
            self.assertLessEqual(len(lines), 24, h)
            self.assertLessEqual(max(len(ln) for ln in lines), 79, h)
            self.assertIn("--print-lib", h)
            self.assertNotIn("/opt/gpupool", h)  # the places searched are --print-lib -v's
        for opt in ("-V", "--version"):
            r = self.run_(opt)
            self.assertRegex(r.stdout, r"^gpupool-run \S+\n$")
        self.bad("-v", "true", want="-v goes with --print-lib")

    def test_print_lib_lists_every_place_searched(self):
        # a copy of the script in a tree of its own: each place --print-lib -v names, tried in turn
        tree = os.path.join(self.tmp, "tree")
        os.makedirs(os.path.join(tree, "bin"))
        run = os.path.join(tree, "bin", "gpupool-run")
        shutil.copy(RUN, run)
        env = dict(os.environ)
        env.pop("GPUPOOL_LIB", None)
        h = subprocess.run([run, "--print-lib", "-v"], capture_output=True, text=True, env=env).stdout
        places = [ln.split(". ", 1)[1] for ln in h.splitlines() if ln[:4].strip().rstrip(".").isdigit()]
        self.assertIn("$GPUPOOL_LIB", h)
        for p in ("/opt/gpupool/lib/libgpupool.so", "/usr/local/lib/x86_64-linux-gnu/libgpupool.so", "ldconfig -p"):
            self.assertIn(p, places)
        # from the last place to the first: each new one comes earlier in the search and wins
        for rel in ("lib/python3.11/site-packages/gpupool.libs", "lib/x86_64-linux-gnu", "lib64", "build/src"):
            d = os.path.join(tree, rel)
            os.makedirs(d, exist_ok=True)
            lib = os.path.join(d, "libgpupool.so")
            open(lib, "w").close()
            got = subprocess.run([run, "--print-lib"], capture_output=True, text=True, env=env).stdout.strip()
            self.assertEqual(got, os.path.realpath(lib), rel)
            self.assertTrue(any(p.startswith(os.path.join(tree, "bin", "..")) and rel.split("/")[0] in p
                                for p in places), (rel, places))

    def test_preload(self):
        r = self.run_("sh", "-c", 'echo "$LD_PRELOAD"', env={"LD_PRELOAD": "/other.so"})
        self.assertEqual(r.stdout.strip(), os.path.realpath(self.lib) + " /other.so")

    def torch_child(self, code, **env):
        e = {"PYTHONPATH": os.path.join(self.tmp, "fake")}
        e.update(env)
        return self.run_("--torch", sys.executable, "-c", textwrap.dedent(code), env=e)

    def test_torch_switches_on_import(self):
        r = self.torch_child("""
            import os, sys
            hook = sys.modules["sitecustomize"]
            assert "LD_PRELOAD" not in os.environ, os.environ["LD_PRELOAD"]
            assert not hook.STATE["installed"] and "torch" not in sys.modules
            import torch
            print(torch.cuda.memory.calls)
            print(hook.STATE)
            """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        out = r.stdout.splitlines()
        self.assertEqual(out[0], str([(os.path.realpath(self.lib), "gpupool_malloc", "gpupool_free")]))
        self.assertIn("'active': True", out[1])

    def test_torch_never_imported(self):
        r = self.torch_child("import sys; print(sys.modules['sitecustomize'].STATE, 'torch' in sys.modules)")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "{'installed': False, 'active': False, 'error': None} False")

    def test_torch_refusal_warns_and_goes_on(self):
        r = self.torch_child("import torch; print('ran on', torch.cuda.memory.calls)",
                             FAKE_TORCH_CUDA_INITIALISED="1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "ran on []")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("gpupool-run --torch: PyTorch keeps its own allocator:"), lines[0])

    def test_torch_keeps_the_environments_sitecustomize(self):
        other = os.path.join(self.tmp, "site")
        os.makedirs(other)
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['OWN_SITECUSTOMIZE'] = 'ran'\n")
        r = self.torch_child("import os, torch; print(os.environ.get('OWN_SITECUSTOMIZE'), len(torch.cuda.memory.calls))",
                             PYTHONPATH=os.path.join(self.tmp, "fake") + os.pathsep + other)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "ran 1")


def doc_block(doc, after):
    """The first fenced block of the document `doc` (README.md, docs/NAME.md) after the text
    `after`, with the source tree's scripts/gpupool-run as the installed gpupool-run."""
    with open(os.path.join(ROOT, doc)) as f:
        text = f.read()
    i = text.index(after)
    return re.search(r"\n```\n(.*?)\n```\n", text[i:], re.S).group(1).replace("scripts/gpupool-run", "gpupool-run")


@unittest.skipUnless(os.environ.get("GPUPOOL_TEST_LIB"), "set GPUPOOL_TEST_LIB to a built libgpupool.so (Meson does)")
class FakeRunTest(unittest.TestCase):
    """gpupool-run --fake: the fake runtime found next to the library (the build tree's
    tests/fake here), programs run over it with gpupool preloaded, README's example."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.env = dict(os.environ, GPUPOOL_LIB=os.environ["GPUPOOL_TEST_LIB"], GPUPOOL_SHM_DIR=self.tmp,
                        PYTHONPATH=os.path.join(ROOT, "python"))
        for k in ("LD_PRELOAD", "LD_LIBRARY_PATH", "GPUPOOL_CONF", "GPUPOOL_REPORT", "FAKECUDA_DEVICES",
                  "FAKECUDA_CAPACITY"):
            self.env.pop(k, None)
        # README's commands run as written: gpupool-run and gpupool-stat on PATH
        bindir = os.path.join(self.tmp, "bin")
        os.mkdir(bindir)
        os.symlink(RUN, os.path.join(bindir, "gpupool-run"))
        if os.environ.get("GPUPOOL_TEST_STAT"):
            os.symlink(os.environ["GPUPOOL_TEST_STAT"], os.path.join(bindir, "gpupool-stat"))
        self.env["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")

    def test_print_lib_names_the_fake(self):
        r = subprocess.run([RUN, "--fake", "--print-lib"], env=self.env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        lib, fake = r.stdout.splitlines()
        self.assertEqual(lib, os.path.realpath(os.environ["GPUPOOL_TEST_LIB"]))
        self.assertTrue(fake.endswith("/libcudart.so.13") and os.path.isfile(fake), fake)
        # without --fake, one line: what gpupool-maxbatch and scripts read
        r = subprocess.run([RUN, "--print-lib"], env=self.env, capture_output=True, text=True)
        self.assertEqual(r.stdout.splitlines(), [lib])

    @unittest.skipUnless(os.access(os.path.join(ROOT, "build", "tools", "gpupool-replay"), os.X_OK),
                         "no build/tools/gpupool-replay beside the script")
    def test_refused_cap_stops_before_the_command(self):
        # the knobs the library would refuse every allocation for: said before the command
        # runs, one line each and one more, exit 2; a knob it only warns about lets it run
        marker = os.path.join(self.tmp, "ran")
        for env, first in (({"GPUPOOL_CONF": "limit:abc"}, "gpupool-run: GPUPOOL_CONF: limit:abc: expected a size"),
                           ({"GPUPOOL_CONF": "limt:1G"}, "gpupool-run: GPUPOOL_CONF: limt:1G: unknown key; did you mean limit?"),
                           ({"CUDA_DEVICE_MEMORY_LIMIT": "junk"}, "gpupool-run: CUDA_DEVICE_MEMORY_LIMIT=junk: expected")):
            with self.subTest(env=env):
                r = subprocess.run([RUN, "--fake", "touch", marker], env=dict(self.env, **env), capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual(r.returncode, 2, r.stderr)
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 2, r.stderr)
                self.assertTrue(lines[0].startswith(first), lines[0])
                self.assertTrue(lines[1].startswith("gpupool-run: not running touch: "), lines[1])
                self.assertFalse(os.path.exists(marker))
        for env in ({"GPUPOOL_CONF": "round:3"}, {"GPUPOOL_CONF": "limit:0.0009K", "GPUPOOL_DISABLE": "1"},
                    {"GPUPOOL_CONF": "limit:64M"}):
            with self.subTest(env=env):
                r = subprocess.run([RUN, "--fake", "touch", marker], env=dict(self.env, **env), capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertTrue(os.path.exists(marker))
                os.unlink(marker)

    def test_no_fake_next_to_the_library(self):
        lib = os.path.join(self.tmp, "libgpupool.so")
        shutil.copy(os.environ["GPUPOOL_TEST_LIB"], lib)
        r = subprocess.run([RUN, "--fake", "true"], env=dict(self.env, GPUPOOL_LIB=lib), capture_output=True, text=True)
        self.assertEqual(r.returncode, 127)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("--fake: the fake CUDA runtime (libcudart.so.13) is not next to %s" % os.path.realpath(lib), r.stderr)

    def test_python_example_from_readme(self):
        code = doc_block(os.path.join("docs", "install.md"), "From Python, load the runtime")
        r = subprocess.run(["bash", "-c", code], env=dict(self.env, GPUPOOL_REPORT=os.path.join(self.tmp, "r.json")),
                           capture_output=True, text=True, timeout=120, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("gpupool CUDA memory summary, device ID 0", r.stdout)
        row = next(ln for ln in r.stdout.splitlines() if ln.startswith("| Allocated memory"))
        self.assertEqual(row.split("|")[2].split(), ["65536", "KiB"])
        with open(os.path.join(self.tmp, "r.json")) as f:
            dev = json.load(f)["processes"][0]["devices"]
        self.assertEqual([d["device"] for d in dev], [0])  # one fake device
        self.assertEqual(dev[0]["allocs"], 1)

    @unittest.skipUnless(shutil.which("cc") and os.environ.get("GPUPOOL_TEST_CUDA_INC"),
                         "needs cc and the CUDA headers (GPUPOOL_TEST_CUDA_INC)")
    def test_c_example_from_readme(self):
        # README's program, built as README says when the toolkit's libcudart is there (the
        # fake must still be what runs), else against the fake itself
        script = doc_block("README.md", "### One process").replace("/usr/local/cuda/include",
                                                                   os.environ["GPUPOOL_TEST_CUDA_INC"])
        toolkit = any(os.path.exists(os.path.join(d, "libcudart.so")) for d in ("/usr/local/cuda/lib64",))
        if not toolkit:
            script = re.sub(r"-L/usr/local/cuda/lib64 -lcudart", '-L"$(dirname "$(gpupool-run --fake --print-lib | '
                            'tail -1)")" -l:libcudart.so.13', script)
        self.assertIn("gpupool-run --fake ./try", script)
        build, run = script.split("gpupool-run --fake ./try")[0], "gpupool-run --fake ./try"
        r = subprocess.run(["bash", "-c", build], env=self.env, capture_output=True, text=True, timeout=120, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        report = os.path.join(self.tmp, "report.json")
        p = subprocess.Popen(["bash", "-c", run], env=dict(self.env, GPUPOOL_REPORT=report, LD_DEBUG="libs"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.tmp)
        try:
            # while it runs, gpupool-stat sees it (README: "in another terminal")
            seen = None
            if os.environ.get("GPUPOOL_TEST_STAT"):
                deadline = time.monotonic() + 30
                while seen is None and time.monotonic() < deadline and p.poll() is None:
                    q = subprocess.run(["gpupool-stat", "--json"], env=self.env, capture_output=True, text=True)
                    procs = json.loads(q.stdout)["processes"] if q.returncode == 0 else []
                    seen = next((x for x in procs if x["comm"] == "try" and x["devices"]
                                 and x["devices"][0].get("allocs", 0) > 0), None)
                    time.sleep(0.05)
            out, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0, err[-3000:])
        self.assertEqual(out, "done\n")
        fake = subprocess.run([RUN, "--fake", "--print-lib"], env=self.env, capture_output=True,
                              text=True).stdout.splitlines()[1]
        self.assertRegex(err, r"calling init: %s\b" % re.escape(fake))  # the fake, not the toolkit's runtime
        with open(report) as f:
            dev = json.load(f)["processes"][0]["devices"][0]
        self.assertEqual(dev["allocs"], 200 * 32)
        self.assertLess(dev["segment_allocs"], 100)  # served from the pool
        if os.environ.get("GPUPOOL_TEST_STAT"):
            self.assertIsNotNone(seen, "gpupool-stat did not list the program's allocations while it ran")


FAKE_TORCH_DIR = os.path.join(HERE, "fake_torch")


@unittest.skipUnless(os.environ.get("GPUPOOL_TEST_LIB"), "set GPUPOOL_TEST_LIB to a built libgpupool.so (Meson does)")
class TorchModeTest(unittest.TestCase):
    """gpupool-run --torch over the real library: a script written for plain PyTorch runs to
    its end, or stops with one line saying why."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        env = dict(os.environ, GPUPOOL_LIB=os.environ["GPUPOOL_TEST_LIB"])
        fake = subprocess.run([RUN, "--fake", "--print-lib"], env=env, capture_output=True, text=True,
                              check=True).stdout.splitlines()[1]
        self.env = dict(env, GPUPOOL_SHM_DIR=self.tmp, PYTHONPATH=FAKE_TORCH_DIR,
                        LD_LIBRARY_PATH=os.path.dirname(fake), FAKECUDA_DEVICES="1", GPUPOOL_REPORT="none")
        for k in ("LD_PRELOAD", "GPUPOOL_CONF"):
            self.env.pop(k, None)

    def run_torch(self, code):
        return subprocess.run([RUN, "--torch", sys.executable, "-c", textwrap.dedent(code)], env=self.env,
                              capture_output=True, text=True, timeout=120)

    def test_memory_functions_answer_from_gpupool(self):
        r = self.run_torch("""
            import json, warnings
            import torch
            from torch.cuda import memory_allocated            # imported before anything ran
            from torch.cuda.memory import max_memory_allocated as peak
            import gpupool
            out = {"before": [torch.cuda.memory_allocated(), dict(torch.cuda.memory_stats()),
                              torch.cuda.is_initialized()]}
            MB = 1 << 20
            x = torch.empty(8 * MB, device="cuda")
            y = torch.empty(16 * MB, device="cuda")
            z = torch.empty(4 * MB, device="cuda")
            del y
            g = gpupool.memory_stats(0)
            out["torch"] = [torch.cuda.memory_allocated(), memory_allocated(0), torch.cuda.max_memory_allocated(),
                            peak("cuda:0"), torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved(),
                            torch.cuda.memory_cached()]
            out["gpupool"] = [g["allocated_bytes.all.current"], g["allocated_bytes.all.peak"],
                              g["reserved_bytes.all.current"], g["reserved_bytes.all.peak"]]
            st = torch.cuda.memory_stats()
            out["stats"] = {k: v for k, v in st.items()}
            out["nested"] = torch.cuda.memory_stats_as_nested_dict()["allocated_bytes"]["all"]
            try:
                st["active_bytes.all.peak"]
            except KeyError as e:
                out["absent"] = str(e)
            out["summary"] = torch.cuda.memory_summary(abbreviated=True).splitlines()[1]
            torch.cuda.reset_peak_memory_stats()
            out["after_reset"] = [torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated(),
                                  gpupool.stats()[0]["allocated_bytes_peak"]]
            w = torch.empty(2 * MB, device="cuda"); del w
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.reset_max_memory_allocated()        # PyTorch's own, through the reset above
            out["deprecated"] = [str(c.message) for c in caught]
            out["after_reset_max"] = torch.cuda.max_memory_allocated()
            torch.cuda.reset_accumulated_memory_stats(0)
            out["accumulated"] = [torch.cuda.memory_stats()["allocation.all.allocated"],
                                  torch.cuda.memory_stats()["num_device_alloc"],
                                  gpupool.memory_stats()["allocation.all.allocated"]]
            try:
                torch.cuda.memory_allocated(5)
            except RuntimeError as e:
                out["bad_device"] = str(e)
            print(json.dumps(out))
            """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        out, MB = json.loads(r.stdout), 1 << 20
        self.assertEqual(out["before"], [0, {}, False])  # as PyTorch: no figures, no CUDA initialised
        alloc, alloc_imported, max_alloc, max_imported, res, max_res, cached = out["torch"]
        self.assertEqual([alloc, max_alloc, res, max_res], out["gpupool"])
        self.assertEqual((alloc, alloc_imported), (12 * MB, 12 * MB))
        self.assertEqual((max_alloc, max_imported), (28 * MB, 28 * MB))
        self.assertEqual(cached, res)
        st = out["stats"]
        self.assertEqual(st["allocated_bytes.all.current"], 12 * MB)
        self.assertEqual(st["allocation.all.current"], 2)
        self.assertFalse([k for k in st if k.startswith("gpupool.") or k in gpupool_absent()])
        self.assertEqual(out["nested"], {k.split(".")[-1]: v for k, v in st.items()
                                         if k.startswith("allocated_bytes.all.")})
        self.assertIn("active_bytes.all.peak: gpupool, PyTorch's allocator here, does not keep this figure", out["absent"])
        self.assertIn("gpupool CUDA memory summary, device ID 0", out["summary"])
        self.assertEqual(out["after_reset"], [12 * MB, 12 * MB, 12 * MB])
        self.assertEqual(len(out["deprecated"]), 1)
        self.assertIn("reset_max_memory_allocated now calls torch.cuda.reset_peak_memory_stats", out["deprecated"][0])
        self.assertEqual(out["after_reset_max"], 12 * MB)
        self.assertEqual(out["accumulated"][:2], [0, 0])
        self.assertEqual(out["accumulated"][2], 4)  # gpupool's own figures are the whole run's
        self.assertIn("invalid device argument 5: this process has 1 CUDA device", out["bad_device"])

    def test_cudnn_benchmark_stays_off_said_once(self):
        r = self.run_torch("""
            import torch
            torch.backends.cudnn.benchmark = True
            x = torch.empty(1 << 20, device="cuda")
            for _ in range(3):
                y = torch.cudnn_convolution(x)
            with torch.backends.cudnn.flags(enabled=True, benchmark=True):
                y = torch.cudnn_convolution(x)
            torch.backends.cudnn.benchmark = True
            print("ran to the end; benchmark", torch.backends.cudnn.benchmark)
            """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "ran to the end; benchmark False\n")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("gpupool: torch.backends.cudnn.benchmark = True is left off: "), lines[0])
        self.assertIn("gpupool-run without --torch", lines[0])

    def test_graphs_and_ipc_are_one_line(self):
        for code, what in (("""
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    y = torch.empty(1 << 20, device="cuda")
                """, "CUDA graph capture needs PyTorch's own allocator"),
                           ("""
                x.untyped_storage()._share_cuda_()
                """, "CUDA tensors shared between processes need PyTorch's own allocator"),
                           ("""
                torch.UntypedStorage._new_shared_cuda("dev", "handle")
                """, "CUDA tensors shared between processes need PyTorch's own allocator")):
            with self.subTest(what=what):
                r = self.run_torch("import torch\nx = torch.empty(1 << 20, device='cuda')\n"
                                   + textwrap.dedent(code) + "print('not reached')\n")
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stdout, "")
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith("gpupool-run --torch: " + what), lines[0])
                self.assertIn("gpupool-run without --torch", lines[0])
        # a program that catches it goes on
        r = self.run_torch("""
            import torch, gpupool
            try:
                torch.cuda.CUDAGraph().capture_begin()
            except RuntimeError as e:
                print("caught", type(e).__name__)
            """)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "caught TorchModeRefused\n", ""))


def gpupool_absent():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import gpupool
    return gpupool.MEMORY_STATS_ABSENT


if __name__ == "__main__":
    unittest.main(verbosity=2)
