#!/usr/bin/env python3
"""Tests of scripts/gpupool-run without a GPU or PyTorch: --help lists every place the search
looks (and the search finds a library in them), argument errors (one line, exit 2), and
--torch: the startup hook (python/gpupool_hook) makes gpupool PyTorch's allocator when the
program imports torch, here a stand-in torch package that records what PyTorch would be asked.
Run: python3 tests/scripts/test_gpupool_run.py"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
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
        open(self.lib, "w").close()
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
        self.assertEqual(self.run_("--", "true").returncode, 0)

    def test_help_lists_every_place_searched(self):
        # a copy of the script in a tree of its own: each place --help names, tried in turn
        tree = os.path.join(self.tmp, "tree")
        os.makedirs(os.path.join(tree, "bin"))
        run = os.path.join(tree, "bin", "gpupool-run")
        shutil.copy(RUN, run)
        env = dict(os.environ)
        env.pop("GPUPOOL_LIB", None)
        h = subprocess.run([run, "--help"], capture_output=True, text=True, env=env).stdout
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
