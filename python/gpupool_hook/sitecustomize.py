"""gpupool's startup hook for `gpupool-run --torch`: makes gpupool PyTorch's CUDA allocator
with no change to the program. Python imports this module at startup because gpupool-run puts
its folder first on PYTHONPATH. It imports nothing heavy: it installs an import hook, and when
the program imports torch (if it ever does), right after torch's own import has finished and
before anything can allocate CUDA memory, it calls gpupool.use_as_torch_allocator() with the
library gpupool-run chose (GPUPOOL_LIB).

A sitecustomize found further along sys.path (the environment's own) still runs, after this one.
If PyTorch refuses the switch, one line on stderr says why and the program goes on with
PyTorch's own allocator: the hook never stops the program. Once gpupool is PyTorch's allocator,
torch.cuda's memory functions answer from gpupool's figures and cudnn.benchmark stays off (one
line says so), as use_as_torch_allocator() makes them; what PyTorch cannot do in this mode (CUDA
graphs, CUDA tensors shared between processes) raises gpupool.TorchModeRefused, and if the
program does not catch it, it ends with that one line (exit status 1), not a traceback.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

STATE = {"installed": False, "active": False, "error": None}


def _warn(msg):
    sys.stderr.write("gpupool-run --torch: %s\n" % msg)


def _excepthook(kind, value, tb, _next=sys.excepthook):
    """An uncaught gpupool.TorchModeRefused is its one line; anything else goes on as before."""
    gp = sys.modules.get("gpupool")
    if gp is not None and isinstance(value, getattr(gp, "TorchModeRefused", ())):
        _warn(str(value))  # the interpreter then exits with status 1, as after any uncaught error
        return None
    return _next(kind, value, tb)


def _switch(torch):
    try:
        import gpupool
        path = gpupool.use_as_torch_allocator(os.environ.get("GPUPOOL_LIB") or None)
        STATE["active"] = True
        sys.excepthook = _excepthook
        if os.environ.get("GPUPOOL_LOG") in ("info", "debug"):
            _warn("gpupool (%s) is PyTorch's CUDA allocator" % path)
    except Exception as e:  # never stop the program: it runs on with PyTorch's allocator
        STATE["error"] = str(e)
        _warn("PyTorch keeps its own allocator: %s" % e)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _switch(module)

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self.inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loader of the top-level torch package, once."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch" or STATE["installed"]:
            return None
        STATE["installed"] = True
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


def _chain_next_sitecustomize():
    """Run the sitecustomize this one hides (the first one further along sys.path)."""
    here = os.path.dirname(os.path.abspath(__file__))
    me = sys.modules.get(__name__)
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        _warn("the environment's sitecustomize (%s) failed: %r" % (spec.origin, e))
    finally:
        if me is not None:
            sys.modules[__name__] = me


if "torch" in sys.modules:
    _switch(sys.modules["torch"])
else:
    sys.meta_path.insert(0, _Finder())
_chain_next_sitecustomize()
