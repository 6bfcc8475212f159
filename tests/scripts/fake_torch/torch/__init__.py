"""A stand-in for PyTorch, for tests of gpupool's pluggable-allocator mode without PyTorch or a
GPU (tests/scripts/test_gpupool_run.py). It has the shape of the parts gpupool touches, as in
PyTorch 2.11: torch.cuda.memory's functions look each other up in that module (memory_allocated
calls memory_stats, reset_max_memory_allocated calls reset_peak_memory_stats) and reach torch._C,
which refuses statistics under a pluggable allocator with PyTorch's own messages;
torch.backends.cudnn is a module object whose `benchmark` is a property over torch._C; a
benchmarked convolution asks the allocator's cacheInfo; CUDA graphs and CUDA IPC go through
torch.cuda.graphs.CUDAGraph.capture_begin and UntypedStorage._share_cuda_/_new_shared_cuda.
Device memory is real: tensors are allocated through the pluggable allocator's functions (the
library's gpupool_malloc/gpupool_free) over the CUDA runtime found as libcudart.so.13 (the fake
one, on LD_LIBRARY_PATH)."""
import ctypes
import os

# PyTorch's CUDA runtime, loaded with the library that needs it
_cudart = ctypes.CDLL("libcudart.so.13", mode=os.RTLD_GLOBAL)

from . import _C  # noqa: E402
from . import cuda  # noqa: E402
from . import backends  # noqa: E402


class UntypedStorage:
    def __init__(self, tensor):
        self.tensor = tensor

    def _share_cuda_(self):
        return ("handle", self.tensor.data_ptr())

    @classmethod
    def _new_shared_cuda(cls, *args):
        return cls(None)


class Tensor:
    """nbytes of device memory from the current allocator, on the current device and stream 0."""

    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.device = cuda.current_device()
        self._ptr = cuda.memory._allocate(nbytes, self.device)

    def data_ptr(self):
        return self._ptr

    def untyped_storage(self):
        return UntypedStorage(self)

    def __del__(self):
        if self._ptr:
            cuda.memory._free(self._ptr, self.nbytes, self.device)
            self._ptr = 0


def empty(nbytes, device="cuda"):
    assert str(device).startswith("cuda")
    return Tensor(nbytes)


def cudnn_convolution(x):
    """A convolution: cuDNN's autotuner, when on, asks the allocator for its largest free
    block (c10::cuda::CUDACachingAllocator::cacheInfo)."""
    if _C._get_cudnn_benchmark():
        cuda.memory._current_allocator().cacheInfo()
    return Tensor(x.nbytes)
