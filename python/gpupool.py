"""gpupool from Python: find libgpupool.so, make it PyTorch's CUDA allocator, read its
statistics page, release its cache.

Pure Python (stdlib only; torch is imported only by use_as_torch_allocator). Copy this file
next to your script or put python/ on sys.path.

    import gpupool
    gpupool.use_as_torch_allocator()      # before the first CUDA allocation
    ...
    print(gpupool.memory_stats(0)["reserved_bytes.all.peak"])
    gpupool.release()
"""

import ctypes
import mmap
import os
import shutil
import struct
import subprocess
import time

__all__ = ["GpupoolError", "find_library", "use_as_torch_allocator", "stats", "page_path",
           "memory_stats", "release", "GAUGES", "COUNTERS"]

LIB_NAME = "libgpupool.so"

# ---- the page layout: include/gpupool/stats.h, field for field --------------------------
# python/test_gpupool.py parses the header and checks these lists and sizes against it.
PAGE_MAGIC = 0x31504F4F4C505047  # "GPPLOOP1"
PAGE_VERSION = 2
MAX_DEVICES = 16
COMM_LEN = 16

GAUGES = (  # GPUPOOL_GAUGES: each is <name>, <name>_peak (uint64)
    "requested_bytes", "allocated_bytes", "reserved_bytes", "cached_bytes",
    "largest_free_block", "live_blocks", "free_blocks", "segments", "pending_frees",
    "pending_bytes",
)
COUNTERS = (  # GPUPOOL_COUNTERS: uint64 each
    "allocs", "frees", "requested_bytes_total", "hits", "misses", "splits", "merges",
    "segment_allocs", "segment_frees", "segment_alloc_failures", "fences", "inline_fences",
    "stream_steals", "releases", "released_bytes", "oom_retries", "ooms", "limit_refusals",
    "invalid_frees", "passthrough_allocs", "passthrough_frees", "driver_allocs", "driver_frees",
    "driver_passthrough_allocs",
)

# struct gpupool_device_stats: seq u64, device i32, active u32, limit_bytes u64, gauges, counters
DEV_FIELDS = (("seq", "device", "active", "limit_bytes")
              + tuple(x for g in GAUGES for x in (g, g + "_peak")) + COUNTERS)
DEV_STRUCT = struct.Struct("=QiIQ" + "Q" * (2 * len(GAUGES) + len(COUNTERS)))
# struct gpupool_page header: magic, version, size, pid, ndevices, start_time_ns, comm[16],
# release_request, release_done, lib_version[16], reserved_[4]
VERSION_LEN = 16
HDR_FIELDS = ("magic", "version", "size", "pid", "ndevices", "start_time_ns", "comm",
              "release_request", "release_done", "lib_version")
HDR_STRUCT = struct.Struct("=QIIiIQ%dsQQ%ds4Q" % (COMM_LEN, VERSION_LEN))
PAGE_SIZE = HDR_STRUCT.size + MAX_DEVICES * DEV_STRUCT.size
OFF_RELEASE_REQUEST = 48  # offsetof(struct gpupool_page, release_request)

SNAPSHOT_TRIES = 2000  # bounded like gpupool-stat: a dead writer leaves seq odd forever


class GpupoolError(RuntimeError):
    """A gpupool problem with a message that says what to do."""


# ---- the library ----------------------------------------------------------------------

def find_library():
    """Path of libgpupool.so: $GPUPOOL_LIB, the one installed with this file by pip
    (gpupool.libs/ next to it), the build tree, ../lib, this file's folder, ldconfig, common
    prefixes (scripts/gpupool-run's order, plus this folder). Raises GpupoolError when none
    is found."""
    env = os.environ.get("GPUPOOL_LIB")
    if env:
        if os.path.isfile(env):
            return os.path.abspath(env)
        raise GpupoolError("GPUPOOL_LIB=%s: no such file" % env)
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.path.join(here, "gpupool.libs", LIB_NAME), os.path.join(here, "..", "build", "src", LIB_NAME), os.path.join(here, "..", "lib", LIB_NAME),
             os.path.join(here, LIB_NAME)]
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=10).stdout
        cands += [ln.split("=>", 1)[1].strip() for ln in out.splitlines()
                  if "=>" in ln and ln.split()[0] == LIB_NAME]
    except (OSError, subprocess.SubprocessError):
        pass
    for pre in ("/usr/local/lib", "/usr/local/lib64", "/usr/local/lib/x86_64-linux-gnu",
                "/usr/lib", "/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/opt/gpupool/lib"):
        cands.append(os.path.join(pre, LIB_NAME))
    for c in cands:
        if os.path.isfile(c):
            return os.path.realpath(c)
    raise GpupoolError("libgpupool.so not found: set GPUPOOL_LIB=/path/to/libgpupool.so "
                       "(looked in the build tree, ldconfig -p and /usr[/local]/lib*)")


def _loaded_path():
    """Path of the libgpupool.so mapped into this process, or None."""
    try:
        with open("/proc/self/maps") as f:
            for ln in f:
                p = ln.split(None, 5)
                if len(p) == 6 and os.path.basename(p[5].strip()).startswith(LIB_NAME):
                    return p[5].strip()
    except OSError:
        pass
    return None


def _handle():
    """ctypes handle of the loaded library (never loads it). GpupoolError when absent."""
    path = _loaded_path()
    if path:
        return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    raise GpupoolError("libgpupool.so is not loaded in this process: run under LD_PRELOAD "
                       "(scripts/gpupool-run) or call use_as_torch_allocator() first")


_torch_allocator = None  # keep the CUDAPluggableAllocator object alive


def use_as_torch_allocator(path=None):
    """Make gpupool PyTorch's CUDA allocator (CUDAPluggableAllocator with gpupool_malloc /
    gpupool_free). Call before anything allocates CUDA memory. Returns the library path."""
    global _torch_allocator
    import torch  # lazily: the rest of this module works without torch
    path = os.path.abspath(path) if path else (_loaded_path() or find_library())
    try:
        alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "gpupool_malloc", "gpupool_free")
        torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        raise GpupoolError(
            "PyTorch refused to switch its CUDA allocator to gpupool (%s). The switch must "
            "happen before the first CUDA allocation: call gpupool.use_as_torch_allocator() "
            "right after 'import torch', before creating CUDA tensors, moving models with "
            ".cuda()/.to('cuda'), or anything that initialises CUDA. Or run the whole program "
            "under LD_PRELOAD instead (scripts/gpupool-run)." % e) from e
    _torch_allocator = alloc
    return path


def release(device=-1):
    """Hand gpupool's cached memory back to CUDA (gpupool_release); returns bytes released."""
    fn = _handle().gpupool_release
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_longlong
    r = fn(device)
    if r < 0:
        raise GpupoolError("gpupool_release(%d) failed: %s" % (device, os.strerror(-r)))
    return r


# ---- the statistics page ---------------------------------------------------------------

def page_path(pid=None):
    """$GPUPOOL_SHM_DIR (default /dev/shm)/gpupool.<pid>."""
    d = os.environ.get("GPUPOOL_SHM_DIR") or "/dev/shm"
    return os.path.join(d, "gpupool.%d" % (os.getpid() if pid is None else int(pid)))


def _decode_slot(raw):
    d = dict(zip(DEV_FIELDS, DEV_STRUCT.unpack(raw)))
    d.pop("seq")
    return d


def _snapshot(buf, off, tries=SNAPSHOT_TRIES):
    """Seqlock copy of the slot at `off`: (dict, True) or (None, False) when it never settled."""
    for i in range(tries):
        a = struct.unpack_from("=Q", buf, off)[0]
        if not a & 1:
            raw = bytes(buf[off:off + DEV_STRUCT.size])
            b = struct.unpack_from("=Q", buf, off)[0]
            if a == b and struct.unpack_from("=Q", raw)[0] == a:
                return _decode_slot(raw), True
        if i >= 10:
            time.sleep(20e-6)
    return None, False


def read_page(pid=None, path=None, tries=SNAPSHOT_TRIES):
    """The whole page: (header dict, {device: stats dict}). Each stats dict has
    'consistent' (False: the slot stayed odd, writer died mid-update; counters absent)."""
    path = path or page_path(pid)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise GpupoolError("%s: no statistics page; the process has not allocated through "
                           "gpupool yet (or is not using it, or GPUPOOL_SHM_DIR differs)" % path)
    try:
        size = os.fstat(fd).st_size
        if size != PAGE_SIZE:
            raise GpupoolError("%s: wrong size (%d bytes, expected %d): not a gpupool page of "
                               "this version" % (path, size, PAGE_SIZE))
        buf = mmap.mmap(fd, PAGE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
    finally:
        os.close(fd)
    try:
        hdr = dict(zip(HDR_FIELDS, HDR_STRUCT.unpack_from(buf, 0)))
        if hdr["magic"] != PAGE_MAGIC:
            raise GpupoolError("%s: bad magic 0x%016x%s" % (path, hdr["magic"],
                               " (being created?)" if hdr["magic"] == 0 else ""))
        if hdr["version"] != PAGE_VERSION:
            raise GpupoolError("%s: page version %d, this module reads %d"
                               % (path, hdr["version"], PAGE_VERSION))
        if hdr["size"] != PAGE_SIZE:
            raise GpupoolError("%s: header size %d, expected %d" % (path, hdr["size"], PAGE_SIZE))
        if hdr["ndevices"] > MAX_DEVICES:
            raise GpupoolError("%s: ndevices %d > %d" % (path, hdr["ndevices"], MAX_DEVICES))
        for k in ("comm", "lib_version"):
            hdr[k] = hdr[k].split(b"\0", 1)[0].decode("utf-8", "replace")
        devs = {}
        for i in range(hdr["ndevices"]):
            off = HDR_STRUCT.size + i * DEV_STRUCT.size
            if not struct.unpack_from("=I", buf, off + 12)[0]:  # active
                continue
            s, ok = _snapshot(buf, off, tries)
            if not ok:
                s = {"device": struct.unpack_from("=i", buf, off + 8)[0]}
            s["consistent"] = ok
            devs[s["device"]] = s
        return hdr, devs
    finally:
        buf.close()


def stats(pid=None):
    """{device: counters} from gpupool.<pid> (default: this process): every field of
    struct gpupool_device_stats (gauges also as <name>_peak) plus 'consistent'."""
    return read_page(pid)[1]


# PyTorch's torch.cuda.memory_stats() keys -> gpupool fields, where the meaning matches.
TORCH_KEYS = (
    ("allocated_bytes.all.current", "allocated_bytes"),
    ("allocated_bytes.all.peak", "allocated_bytes_peak"),
    ("reserved_bytes.all.current", "reserved_bytes"),
    ("reserved_bytes.all.peak", "reserved_bytes_peak"),
    ("requested_bytes.all.current", "requested_bytes"),
    ("requested_bytes.all.peak", "requested_bytes_peak"),
    ("requested_bytes.all.allocated", "requested_bytes_total"),
    ("allocation.all.current", "live_blocks"),
    ("allocation.all.peak", "live_blocks_peak"),
    ("allocation.all.allocated", "allocs"),
    ("allocation.all.freed", "frees"),
    ("active.all.current", "live_blocks"),
    ("active.all.peak", "live_blocks_peak"),
    ("active_bytes.all.current", "allocated_bytes"),
    ("active_bytes.all.peak", "allocated_bytes_peak"),
    ("segment.all.current", "segments"),
    ("segment.all.peak", "segments_peak"),
    ("segment.all.allocated", "segment_allocs"),
    ("segment.all.freed", "segment_frees"),
    ("num_device_alloc", "segment_allocs"),
    ("num_device_free", "segment_frees"),
    ("num_alloc_retries", "oom_retries"),
    ("num_ooms", "ooms"),
)


def memory_stats(device=0, pid=None):
    """torch.cuda.memory_stats()-style dict for `device` (keys in TORCH_KEYS) plus every raw
    counter as 'gpupool.<name>'. {} when gpupool holds no pool for the device."""
    try:
        s = stats(pid).get(device)
    except GpupoolError:
        if pid is not None or not _loaded_path():
            raise
        s = _stats_from_library(device)  # page could not be created: private counters
    if not s or not s.get("consistent", True):
        return {}
    out = {k: s[f] for k, f in TORCH_KEYS}
    out.update(("gpupool." + k, v) for k, v in s.items() if k not in ("device", "consistent"))
    return dict(sorted(out.items()))


def _stats_from_library(device):
    buf = ctypes.create_string_buffer(DEV_STRUCT.size)
    fn = _handle().gpupool_stats
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    if fn(device, buf) != 0:
        return None
    s = _decode_slot(buf.raw)
    s["consistent"] = True
    return s
