"""torch/cuda/memory.py's functions gpupool replaces, written as PyTorch writes them: each
helper is looked up in this module when called."""
import collections
import ctypes
import warnings

import torch
from torch import _C

from . import _get_device_index, is_initialized

__all__ = ["memory_stats", "memory_stats_as_nested_dict", "reset_accumulated_memory_stats",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "memory_cached", "max_memory_cached", "memory_summary", "CUDAPluggableAllocator",
           "change_current_allocator"]

_allocator = None

_ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)


class CUDAPluggableAllocator:
    def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
        lib = ctypes.CDLL(path_to_so_file)
        self._alloc = ctypes.cast(getattr(lib, alloc_fn_name), _ALLOC)
        self._free = ctypes.cast(getattr(lib, free_fn_name), _FREE)

    def cacheInfo(self):
        _C._refused("cacheInfo")


def change_current_allocator(allocator):
    global _allocator
    if torch.cuda._initialized:
        raise RuntimeError("Can't swap an already initialized allocator")
    _allocator = allocator


def _current_allocator():
    return _allocator


def _allocate(nbytes, device):
    ptr = _allocator._alloc(nbytes, device, None)
    if not ptr:
        raise RuntimeError("the allocator returned NULL")
    return ptr


def _free(ptr, nbytes, device):
    _allocator._free(ptr, nbytes, device, None)


def memory_stats(device=None):
    result = []

    def _recurse_add_to_result(prefix, obj):
        if isinstance(obj, dict):
            if len(prefix) > 0:
                prefix += "."
            for k, v in obj.items():
                _recurse_add_to_result(prefix + k, v)
        else:
            result.append((prefix, obj))

    stats = memory_stats_as_nested_dict(device=device)
    _recurse_add_to_result("", stats)
    result.sort()
    return collections.OrderedDict(result)


def memory_stats_as_nested_dict(device=None):
    if not is_initialized():
        return {}
    device = _get_device_index(device, optional=True)
    return torch._C._cuda_memoryStats(device)


def reset_accumulated_memory_stats(device=None):
    device = _get_device_index(device, optional=True)
    return torch._C._cuda_resetAccumulatedMemoryStats(device)


def reset_peak_memory_stats(device=None):
    device = _get_device_index(device, optional=True)
    return torch._C._cuda_resetPeakMemoryStats(device)


def reset_max_memory_allocated(device=None):
    warnings.warn("torch.cuda.reset_max_memory_allocated now calls torch.cuda.reset_peak_memory_stats, "
                  "which resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
    return reset_peak_memory_stats(device=device)


def reset_max_memory_cached(device=None):
    warnings.warn("torch.cuda.reset_max_memory_cached now calls torch.cuda.reset_peak_memory_stats, "
                  "which resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
    return reset_peak_memory_stats(device=device)


def memory_allocated(device=None):
    return memory_stats(device=device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    return memory_stats(device=device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    return memory_stats(device=device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device=device).get("reserved_bytes.all.peak", 0)


def memory_cached(device=None):
    return memory_reserved(device=device)


def max_memory_cached(device=None):
    return max_memory_reserved(device=device)


def memory_summary(device=None, abbreviated=False):
    device = _get_device_index(device, optional=True)
    stats = memory_stats(device=device)
    return "PyTorch CUDA memory summary, device ID %d: %d" % (device, stats["allocated_bytes.all.current"])
