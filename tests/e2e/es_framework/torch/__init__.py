"""PyTorch with expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), for
e2e_es_holder.sh: the shape of what gpupool sees and calls. Device memory is physical pages
from cuMemCreate, mapped one after another into one reserved address range, through the
driver table PyTorch builds from the runtime's cudaGetDriverEntryPoint(ByVersion)
(c10/cuda/driver_api.cpp, get_symbol), over the fake runtime built on the fake driver. A
tensor is a run of pages; freeing it keeps its pages mapped (reserved, not allocated), and
empty_cache() unmaps and releases every page no tensor uses, as PyTorch's does. Out of memory
is torch.OutOfMemoryError, PyTorch's own."""
import ctypes
import os

_rt = ctypes.CDLL("libcudart.so.13", mode=os.RTLD_GLOBAL)
_g = ctypes.CDLL(None)  # the names as the program binds them: gpupool's first

PAGE = 32 << 20  # PyTorch's pages are 20 MiB (2 MiB on small segments); the fake's granule is 2 MiB
SPAN = 256 * PAGE
CUDA_ERROR_OUT_OF_MEMORY = 2


class OutOfMemoryError(RuntimeError):  # torch.OutOfMemoryError
    pass


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_u64, _sz = ctypes.c_ulonglong, ctypes.c_size_t
_SIGS = {
    "cuMemCreate": (ctypes.POINTER(_u64), _sz, ctypes.POINTER(_Prop), _u64),
    "cuMemRelease": (_u64,),
    "cuMemAddressReserve": (ctypes.POINTER(_u64), _sz, _sz, _u64, _u64),
    "cuMemMap": (_u64, _sz, _sz, _u64, _u64),
    "cuMemUnmap": (_u64, _sz),
    "cuMemSetAccess": (_u64, _sz, ctypes.POINTER(_Access), _sz),
}


def _get_symbol(name, version=12000):
    """PyTorch's get_symbol: by version first, then the unversioned call."""
    p, q = ctypes.c_void_p(), ctypes.c_int(1)
    if (_g.cudaGetDriverEntryPointByVersion(name.encode(), ctypes.byref(p), ctypes.c_uint(version), _u64(0),
                                            ctypes.byref(q)) == 0 and q.value == 0 and p.value):
        return p.value
    if _g.cudaGetDriverEntryPoint(name.encode(), ctypes.byref(p), _u64(0), ctypes.byref(q)) == 0 and q.value == 0:
        return p.value
    raise RuntimeError("no driver entry point " + name)


class cuda:  # noqa: N801 (torch.cuda's name)
    _drv = None
    _base = None
    _pages = []     # handles of the pages mapped at _base, in order
    _tensors = []   # (first page, pages) of live tensors
    emptied = 0

    @staticmethod
    def init():
        if cuda._drv is not None:
            return
        _g.cudaFree(None)  # the primary context made current
        cuda._drv = {n: ctypes.CFUNCTYPE(ctypes.c_int, *a)(_get_symbol(n)) for n, a in _SIGS.items()}
        base = _u64()
        if cuda._drv["cuMemAddressReserve"](ctypes.byref(base), SPAN, 0, 0, 0) != 0:
            raise RuntimeError("cuMemAddressReserve failed")
        cuda._base = base.value

    @staticmethod
    def is_initialized():
        return cuda._drv is not None

    @staticmethod
    def _grow(n):
        prop = _Prop()
        prop.type = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type, prop.location.id = 1, 0  # CU_MEM_LOCATION_TYPE_DEVICE, device 0
        acc = _Access()
        acc.location.type, acc.location.id, acc.flags = 1, 0, 3  # PROT_READWRITE
        for _ in range(n):
            h = _u64()
            e = cuda._drv["cuMemCreate"](ctypes.byref(h), PAGE, ctypes.byref(prop), 0)
            if e == CUDA_ERROR_OUT_OF_MEMORY:
                raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d MiB; %d MiB reserved by PyTorch"
                                       % (PAGE >> 20, cuda.memory_reserved() >> 20))
            if e != 0:
                raise RuntimeError("cuMemCreate: %d" % e)
            at = cuda._base + len(cuda._pages) * PAGE
            if cuda._drv["cuMemMap"](at, PAGE, 0, h.value, 0) != 0 or \
                    cuda._drv["cuMemSetAccess"](at, PAGE, ctypes.byref(acc), 1) != 0:
                raise RuntimeError("cuMemMap failed")
            cuda._pages.append(h.value)

    @staticmethod
    def alloc(mib):
        """A tensor of MIB (whole pages): its index. Pages past the mapped end are added."""
        cuda.init()
        n = max(1, (mib << 20) // PAGE)
        used = sum(k for _, k in cuda._tensors)
        if used + n > len(cuda._pages):
            cuda._grow(used + n - len(cuda._pages))
        cuda._tensors.append((used, n))
        return len(cuda._tensors) - 1

    @staticmethod
    def free_all():
        """Every tensor freed: the pages stay mapped, reserved."""
        cuda._tensors = []

    @staticmethod
    def empty_cache():
        """Every page past the last one in use unmapped and released, from the end."""
        if cuda._drv is None:
            return
        used = sum(k for _, k in cuda._tensors)
        while len(cuda._pages) > used:
            at = cuda._base + (len(cuda._pages) - 1) * PAGE
            if cuda._drv["cuMemUnmap"](at, PAGE) != 0 or cuda._drv["cuMemRelease"](cuda._pages[-1]) != 0:
                raise RuntimeError("unmap or release failed")
            cuda._pages.pop()
        cuda.emptied += 1

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def memory_reserved(device=0):
        return len(cuda._pages) * PAGE

    @staticmethod
    def memory_allocated(device=0):
        return sum(k for _, k in cuda._tensors) * PAGE
