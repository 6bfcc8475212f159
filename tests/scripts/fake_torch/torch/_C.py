"""torch._C's entry points that gpupool's mode reaches, with PyTorch's answers under a
pluggable allocator (torch/csrc/cuda/CUDAPluggableAllocator.cpp)."""
_cudnn_benchmark = False


def _get_cudnn_benchmark():
    return _cudnn_benchmark


def _set_cudnn_benchmark(value):
    global _cudnn_benchmark
    _cudnn_benchmark = bool(value)


def _refused(what):
    raise RuntimeError("CUDAPluggableAllocator does not yet support %s. If you need it, please file an "
                       "issue describing your use case." % what)


def _cuda_memoryStats(device):
    _refused("getDeviceStats")


def _cuda_resetPeakMemoryStats(device):
    _refused("resetPeakStats")


def _cuda_resetAccumulatedMemoryStats(device):
    _refused("resetAccumulatedStats")
