"""A framework's cache above gpupool, for e2e_reclaim.sh: the shape of what gpupool calls in
PyTorch when another process needs the GPU's memory (torch.cuda.is_initialized(),
torch.cuda.empty_cache(), and what it reserves and uses). Device memory is real: taken with cudaMalloc through the process's
global namespace (the preloaded libgpupool.so first), over the fake runtime. With
RECLAIM_TORCH_RAISE set, empty_cache raises, as a framework's callback may; with
RECLAIM_EMPTY_DEEP=N it first serialises a list N deep (deep Python on the thread that runs it);
with RECLAIM_EMPTY_SLEEP=S it first sleeps S seconds (a slow framework)."""
import ctypes
import os

ctypes.CDLL("libcudart.so.13", mode=os.RTLD_GLOBAL)
_rt = ctypes.CDLL(None)  # cudaMalloc as the program sees it: gpupool's


class cuda:  # noqa: N801 (torch.cuda's name)
    cached = []   # device pointers the "framework" keeps for reuse
    emptied = 0

    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def memory_reserved(device=0):
        return sum(64 << 20 for _ in cuda.cached)

    @staticmethod
    def memory_allocated(device=0):
        return 0  # everything held is cache: nothing is in use

    @staticmethod
    def hold(mib, piece=64):
        for _ in range(mib // piece):
            p = ctypes.c_void_p()
            if _rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(piece << 20)) != 0:
                raise MemoryError("cudaMalloc failed")
            cuda.cached.append(p)

    @staticmethod
    def empty_cache():
        if os.environ.get("RECLAIM_TORCH_RAISE"):
            raise RuntimeError("empty_cache failed on purpose")
        if os.environ.get("RECLAIM_EMPTY_DEEP"):
            # deep Python, as a model's code may run (a program that raised its recursion limit)
            import json
            deep = []
            for _ in range(int(os.environ["RECLAIM_EMPTY_DEEP"])):
                deep = [deep]
            json.dumps(deep)
        if os.environ.get("RECLAIM_EMPTY_SLEEP"):
            import time
            time.sleep(float(os.environ["RECLAIM_EMPTY_SLEEP"]))
        for p in cuda.cached:
            _rt.cudaFree(p)
        cuda.cached.clear()
        cuda.emptied += 1
