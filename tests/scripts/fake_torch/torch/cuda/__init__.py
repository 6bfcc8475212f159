import contextlib
import ctypes

import torch

_initialized = False
_device = 0


def _lazy_init():
    global _initialized
    if not _initialized:
        torch._cudart.cudaFree(None)  # creates the context, as torch's lazy init does
        _initialized = True


def is_initialized():
    return _initialized


def device_count():
    n = ctypes.c_int(0)
    torch._cudart.cudaGetDeviceCount(ctypes.byref(n))
    return n.value


def current_device():
    _lazy_init()
    return _device


def set_device(d):
    global _device
    _lazy_init()
    torch._cudart.cudaSetDevice(int(d))
    _device = int(d)


@contextlib.contextmanager
def device(d):
    old = _device
    set_device(d)
    try:
        yield
    finally:
        set_device(old)


def _get_device_index(device, optional=False):
    """torch.cuda._get_device_index: None is the current device (initialising CUDA)."""
    if isinstance(device, str):
        typ, _, idx = device.partition(":")
        if typ != "cuda":
            raise ValueError("Expected a cuda device, but got: %s" % device)
        device = int(idx) if idx else None
    if device is None:
        if not optional:
            raise ValueError("Expected a torch.device with a specified index or an integer, but got:None")
        return current_device()
    return int(device)


# last, as in PyTorch: these import the helpers above
from . import graphs, memory  # noqa: E402,F401
from .graphs import CUDAGraph, graph  # noqa: E402,F401
from .memory import *  # noqa: E402,F401,F403
