import sys
from contextlib import contextmanager

import torch


def set_flags(_enabled=None, _benchmark=None):
    orig = (None, torch._C._get_cudnn_benchmark())
    if _benchmark is not None:
        torch._C._set_cudnn_benchmark(_benchmark)
    return orig


@contextmanager
def flags(enabled=False, benchmark=False):
    orig = set_flags(enabled, benchmark)
    try:
        yield
    finally:
        set_flags(*orig)


def _module_class():
    from torch.backends import ContextProp, PropModule

    class CudnnModule(PropModule):
        benchmark = ContextProp(torch._C._get_cudnn_benchmark, torch._C._set_cudnn_benchmark)
    return CudnnModule


sys.modules[__name__] = _module_class()(sys.modules[__name__], __name__)
