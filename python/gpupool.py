"""gpupool from Python: find libgpupool.so, make it PyTorch's CUDA allocator (and then answer
torch.cuda's memory functions from gpupool's figures), read its statistics in PyTorch's terms
(memory_stats, memory_allocated, ..., memory_summary, reset_peak_memory_stats), write
PyTorch's memory snapshot of the run so far (dump_snapshot), release its cache.

Pure Python (stdlib only; torch is imported only by use_as_torch_allocator). Copy this file
next to your script or put python/ on sys.path.

    import gpupool
    gpupool.use_as_torch_allocator()      # before the first CUDA allocation
    ...
    print(gpupool.max_memory_reserved())  # = gpupool.memory_stats()["reserved_bytes.all.peak"]
    print(gpupool.memory_summary())
    gpupool.release()
"""

import collections
import ctypes
import errno
import os
import shutil
import stat as statmod
import struct
import subprocess
import sys
import tempfile
import time
import zlib

__all__ = ["GpupoolError", "TorchModeRefused", "find_library", "use_as_torch_allocator", "stats",
           "page_path", "read_page", "memory_stats", "memory_summary", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
           "dump_snapshot", "trace_flush", "find_replay", "release", "GAUGES", "COUNTERS",
           "MEMORY_STATS_ABSENT", "__version__"]

# gpupool's version (project() in meson.build; python/test_gpupool.py keeps them equal)
__version__ = "0.1.0"

LIB_NAME = "libgpupool.so"

# ---- the page layout: include/gpupool/stats.h, field for field --------------------------
# python/test_gpupool.py parses the header and checks these lists and sizes against it.
PAGE_MAGIC = 0x31504F4F4C505047  # "GPPLOOP1"
PAGE_VERSION = 5
MAX_DEVICES = 16
COMM_LEN = 16

GAUGES_3 = (  # GPUPOOL_GAUGES_3: each is <name>, <name>_peak (uint64)
    "requested_bytes", "allocated_bytes", "reserved_bytes", "cached_bytes",
    "largest_free_block", "live_blocks", "free_blocks", "segments", "pending_frees",
    "pending_bytes",
)
COUNTERS_3 = (  # GPUPOOL_COUNTERS_3: uint64 each
    "allocs", "frees", "requested_bytes_total", "hits", "misses", "splits", "merges",
    "segment_allocs", "segment_frees", "segment_alloc_failures", "fences", "inline_fences",
    "stream_steals", "releases", "released_bytes", "oom_retries", "ooms", "limit_refusals",
    "invalid_frees", "passthrough_allocs", "passthrough_frees", "driver_allocs", "driver_frees",
    "driver_passthrough_allocs",
)
GAUGES_4 = (  # GPUPOOL_GAUGES_4
    "unpooled_bytes", "unpooled_vmm_bytes", "unpooled_mempool_bytes", "unpooled_managed_bytes",
    "unpooled_pitched_bytes", "releasable_bytes",
)
COUNTERS_4 = (  # GPUPOOL_COUNTERS_4
    "unpooled_allocs", "unpooled_frees", "unpooled_refusals", "reclaim_asks", "reclaim_answers",
    "reclaim_received_bytes", "reclaim_wait_ns", "reclaims_served", "reclaims_refused",
    "reclaim_given_bytes", "framework_empties", "decay_releases", "decayed_bytes",
)
GAUGES_5 = ("waiting_bytes",)  # GPUPOOL_GAUGES_5
COUNTERS_5 = ("waits", "wait_ns", "waits_served", "waits_timed_out")  # GPUPOOL_COUNTERS_5
GAUGES = GAUGES_3 + GAUGES_4 + GAUGES_5  # GPUPOOL_GAUGES
COUNTERS = COUNTERS_3 + COUNTERS_4 + COUNTERS_5  # GPUPOOL_COUNTERS
DEVICE_NAME_LEN = 64

# struct gpupool_device_stats: seq u64, device i32, active u32, limit_bytes u64, uuid[16],
# the version 3 gauges and counters, the version 4 gauges and counters, device_total_bytes,
# device_free_bytes, device_seen_ns, vmm_granularity, reserved_[3], the version 5 gauges and
# counters, wait_started_ns, floor_bytes, device_name[64]
_V4_FIELDS = (tuple(x for g in GAUGES_3 for x in (g, g + "_peak")) + COUNTERS_3
              + tuple(x for g in GAUGES_4 for x in (g, g + "_peak")) + COUNTERS_4
              + ("device_total_bytes", "device_free_bytes", "device_seen_ns", "vmm_granularity"))
_V5_FIELDS = (tuple(x for g in GAUGES_5 for x in (g, g + "_peak")) + COUNTERS_5
              + ("wait_started_ns", "floor_bytes"))
DEV_FIELDS = (("seq", "device", "active", "limit_bytes", "uuid") + _V4_FIELDS + ("reserved_",)
              + _V5_FIELDS + ("device_name",))
DEV_STRUCT = struct.Struct("=QiIQ16s" + "Q" * len(_V4_FIELDS) + "3Q" + "Q" * len(_V5_FIELDS)
                           + "%ds" % DEVICE_NAME_LEN)
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


class TorchModeRefused(GpupoolError):
    """Something PyTorch cannot do with gpupool as its allocator (CUDA graphs, CUDA tensors
    shared between processes): one line saying what to do instead. Under gpupool-run --torch
    an uncaught one ends the program with that line alone, no traceback."""


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
    gpupool_free). Call before anything allocates CUDA memory. Returns the library path.
    Then torch.cuda's memory functions, which PyTorch refuses under a pluggable allocator,
    answer from gpupool's figures (memory_allocated, max_memory_allocated, memory_reserved,
    max_memory_reserved, memory_stats, memory_stats_as_nested_dict, memory_summary,
    reset_peak_memory_stats, reset_accumulated_memory_stats); torch.backends.cudnn.benchmark
    stays off (said once on stderr: the autotuner asks the allocator what PyTorch's pluggable
    interface cannot answer); CUDA graph capture and CUDA tensors shared between processes
    raise TorchModeRefused, one line saying what to do instead (docs/pytorch.md)."""
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
    _answer_torch(torch)
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


# ---- PyTorch's memory snapshot of the run so far -----------------------------------------

def find_replay():
    """Path of gpupool-replay: $GPUPOOL_REPLAY, the build tree next to this file
    (../build/tools/), PATH, the environment's bin/ (pip). GpupoolError when none is found."""
    env = os.environ.get("GPUPOOL_REPLAY")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise GpupoolError("GPUPOOL_REPLAY=%s: no such program" % env)
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.path.join(here, "..", "build", "tools", "gpupool-replay"), shutil.which("gpupool-replay"),
             os.path.join(sys.prefix, "bin", "gpupool-replay")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.realpath(c)
    raise GpupoolError("gpupool-replay not found: set GPUPOOL_REPLAY=/path/to/gpupool-replay "
                       "(looked in the build tree, PATH and %s/bin)" % sys.prefix)


def trace_flush():
    """gpupool_trace_flush: every row recorded so far is in the trace file; returns its path.
    GpupoolError when this process records no trace."""
    fn = _handle().gpupool_trace_flush
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    buf = ctypes.create_string_buffer(4096)
    rc = fn(buf, len(buf))
    if rc == -2:  # ENOENT
        raise GpupoolError(
            "this process records no gpupool trace, which dump_snapshot needs: start it with "
            "GPUPOOL_CONF=trace:/path/run.csv (the trace begins with the first CUDA allocation; "
            "none has happened yet if the path is set)")
    if rc == -38:  # ENOSYS
        raise GpupoolError("gpupool is off in this process (GPUPOOL_DISABLE, or no CUDA runtime): no trace")
    if rc < 0:
        raise GpupoolError("gpupool_trace_flush failed: %s" % os.strerror(-rc))
    return buf.value.decode()


def _plain_copy(trace, tmpdir):
    """The trace's whole rows so far as a plain CSV in tmpdir: the process goes on writing
    rows while they are read, and a .gz trace of a running process has no gzip end yet (its
    rows are flushed to a byte boundary), so it is inflated here."""
    out = os.path.join(tmpdir, "trace.csv")
    gz = trace.endswith(".gz")
    d = zlib.decompressobj(16 + zlib.MAX_WBITS) if gz else None
    with open(trace, "rb") as f, open(out, "wb") as o:
        tail = b""
        for chunk in iter(lambda: f.read(1 << 20), b""):
            data = tail + (d.decompress(chunk) if gz else chunk)
            cut = data.rfind(b"\n") + 1
            o.write(data[:cut])
            tail = data[cut:]
    return out


def _vmm_granularity():
    """The chunk size of this process's virtual-memory segments (bytes; the largest over its
    devices), 0 when its pools have whole segments only (or it has none yet)."""
    n = _device_count() or MAX_DEVICES
    best = 0
    for d in range(min(n, MAX_DEVICES)):
        try:
            s = _slot(d)
        except GpupoolError:
            s = None
        if s:
            best = max(best, s.get("vmm_granularity", 0))
    return best


def dump_snapshot(path, conf=None, replay=None, timeout=600):
    """Write PyTorch's memory snapshot (the pickle torch.cuda.memory._dump_snapshot writes, for
    https://pytorch.org/memory_viz) of this process's allocations so far: the trace this
    process records (GPUPOOL_CONF=trace:PATH) is flushed and replayed through gpupool's pool
    with gpupool-replay --torch-snapshot. Same requests and knobs (conf, default: this
    process's GPUPOOL_CONF), the pool's own algorithm; addresses are the replay's and the
    fences modelled, so the layout can differ slightly from the live one. Returns path."""
    trace = trace_flush()
    prog = replay or find_replay()
    conf = os.environ.get("GPUPOOL_CONF", "") if conf is None else conf
    # the device as the pools saw it: virtual-memory chunks of this size, or none (whole segments)
    gran = _vmm_granularity()
    with tempfile.TemporaryDirectory(prefix="gpupool-snapshot.") as tmp:
        src = _plain_copy(trace, tmp)
        # rows of different threads reach the file in flush order: restore time order
        cmd = [prog, "--conf", conf, "--granularity", str(gran), "--sort-window", "65536", "--torch-snapshot",
               path, src]
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)  # the replay needs no CUDA, and no gpupool in front of it
        env["GPUPOOL_CONF"] = conf
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except (OSError, subprocess.SubprocessError) as e:
            raise GpupoolError("%s: %s" % (prog, e)) from e
    if p.returncode != 0:
        raise GpupoolError("gpupool-replay could not make the snapshot (exit %d): %s"
                           % (p.returncode, p.stderr.strip()))
    return path


# ---- the statistics page ---------------------------------------------------------------
# Read as gpupool-stat reads it (src/stats/statpage.c): a regular file opened without following
# links and without blocking, owned by the reader (root reads any), whose owner is the user of
# the process it names (the page of a process that is gone: only the reader's own file), with
# the exact size and a header of the right magic, version, size, device count and pid; each
# slot copied under its seqlock. Read with pread on the descriptor, never mapped: a file
# truncated while it is read is an error, not a SIGBUS. /dev/shm is shared by every user, who
# may create any name there first (docs/security.md, "Statistics pages").

START_SLACK_NS = 2 * 10**9  # src/stats/statpage.c: a process started this much after a page was made is not its writer


def page_path(pid=None):
    """$GPUPOOL_SHM_DIR (default /dev/shm)/gpupool.<pid>."""
    d = os.environ.get("GPUPOOL_SHM_DIR") or "/dev/shm"
    return os.path.join(d, "gpupool.%d" % (os.getpid() if pid is None else int(pid)))


def _uuid_text(raw):
    """nvidia-smi's form of a device UUID (GPU-8-4-4-4-12 hex digits), "" while unknown."""
    if not any(raw):
        return ""
    h = raw.hex()
    return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def _decode_slot(raw):
    vals = list(DEV_STRUCT.unpack(raw))
    at = DEV_FIELDS.index("reserved_")
    vals[at:at + 3] = [tuple(vals[at:at + 3])]  # reserved_[3]: one field
    d = dict(zip(DEV_FIELDS, vals))
    d.pop("seq")
    d.pop("reserved_")
    d["uuid"] = _uuid_text(d["uuid"])
    d["device_name"] = d["device_name"].split(b"\0", 1)[0].decode("utf-8", "replace")
    return d


def _pread(fd, n, off, path):
    """Exactly n bytes at off, or GpupoolError (the file shrank while it was read)."""
    b = os.pread(fd, n, off)
    if len(b) != n:
        raise GpupoolError("%s: truncated while being read (%d bytes at offset %d, expected %d): "
                           "not a page" % (path, len(b), off, n))
    return b


def _snapshot(fd, off, path, tries=SNAPSHOT_TRIES):
    """Seqlock copy of the slot at `off`: (dict, True) or (None, False) when it never settled."""
    for i in range(tries):
        a = struct.unpack("=Q", _pread(fd, 8, off, path))[0]
        if not a & 1:
            raw = _pread(fd, DEV_STRUCT.size, off, path)
            b = struct.unpack("=Q", _pread(fd, 8, off, path))[0]
            if a == b and struct.unpack_from("=Q", raw)[0] == a:
                return _decode_slot(raw), True
        if i >= 10:
            time.sleep(20e-6)
    return None, False


def _proc_owner(pid):
    """The uid owning /proc/<pid> (the user of that process), or None when there is none."""
    try:
        return os.stat("/proc/%d" % pid).st_uid
    except (OSError, ValueError, OverflowError):
        return None


def _pid_stale(pid, start_time_ns):
    """True when process `pid` is gone, a zombie, or started well after a page made at
    start_time_ns (CLOCK_REALTIME), so is not that page's writer (src/stats/statpage.c)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        pass
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        if rest[0] in ("Z", "X"):
            return True
        since_boot = int(rest[19]) * 10**9 // os.sysconf("SC_CLK_TCK")  # field 22: starttime
        start = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_BOOTTIME) + since_boot
    except (OSError, IndexError, ValueError, AttributeError):
        return False  # alive by kill(2); /proc hidden or another pid namespace
    return bool(start_time_ns) and start > start_time_ns + START_SLACK_NS


def _page_pid(path):
    """The pid of a page name "gpupool.<digits>" (no sign, no leading zero), else None."""
    name = os.path.basename(path)
    digits = name[len("gpupool."):]
    if not name.startswith("gpupool.") or not digits.isascii() or not digits.isdigit() or digits[0] == "0":
        return None
    return int(digits)


def read_page(pid=None, path=None, tries=SNAPSHOT_TRIES):
    """The whole page of process `pid` (default this one; or the page file `path`, named
    gpupool.<pid>): (header dict, {device: stats dict}). Each stats dict has 'consistent'
    (False: the slot stayed odd, writer died mid-update; counters absent); the header has
    'stale' (the process is gone, or is not the page's writer). GpupoolError, one line, for
    anything that is not a page of that process: missing, not a regular file, a symbolic
    link, owned by another user than the process's, wrong size or header, another pid. A
    page of this process's pid left by an earlier process is not this process's."""
    if path is None:
        pid = os.getpid() if pid is None else int(pid)
        path = page_path(pid)
    elif pid is None:
        pid = _page_pid(path)
        if pid is None:
            raise GpupoolError("%s: not a page name (gpupool.<pid>)" % path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise GpupoolError("%s: no statistics page; the process has not allocated through "
                           "gpupool yet (or is not using it, or GPUPOOL_SHM_DIR differs)" % path) from None
    except OSError as e:
        why = "a symbolic link (not followed)" if e.errno == errno.ELOOP else e.strerror
        raise GpupoolError("%s: %s: not a page" % (path, why)) from None
    try:
        st = os.fstat(fd)
        euid = os.geteuid()
        if not statmod.S_ISREG(st.st_mode):
            raise GpupoolError("%s: not a regular file: not a page" % path)
        if euid != 0 and st.st_uid != euid:
            raise GpupoolError("%s: owned by uid %d, not by you: only root reads other users' pages"
                               % (path, st.st_uid))
        owner = _proc_owner(pid)
        if owner is not None and owner != st.st_uid:
            raise GpupoolError("%s: owned by uid %d, but process %d is uid %d's: not that process's "
                               "page (another user made the file)" % (path, st.st_uid, pid, owner))
        if owner is None and st.st_uid != euid:
            raise GpupoolError("%s: owned by uid %d and process %d is gone: nothing to check the "
                               "file against, so it is not read" % (path, st.st_uid, pid))
        if st.st_size != PAGE_SIZE:
            raise GpupoolError("%s: wrong size (%d bytes, expected %d): not a gpupool page of "
                               "this version" % (path, st.st_size, PAGE_SIZE))
        hdr = dict(zip(HDR_FIELDS, HDR_STRUCT.unpack(_pread(fd, HDR_STRUCT.size, 0, path))))
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
        if hdr["pid"] != pid:
            raise GpupoolError("%s: the page names pid %d, not %d: not that process's page"
                               % (path, hdr["pid"], pid))
        hdr["stale"] = _pid_stale(pid, hdr["start_time_ns"])
        if hdr["stale"] and pid == os.getpid():
            raise GpupoolError("%s: left by an earlier process with this pid: this process has "
                               "no statistics page yet" % path)
        for k in ("comm", "lib_version"):
            hdr[k] = hdr[k].split(b"\0", 1)[0].decode("utf-8", "replace")
        devs = {}
        for i in range(hdr["ndevices"]):
            off = HDR_STRUCT.size + i * DEV_STRUCT.size
            head = _pread(fd, 16, off, path)
            if not struct.unpack_from("=I", head, 12)[0]:  # active
                continue
            # a writer that is gone will never finish an update: one round of tries
            s, ok = _snapshot(fd, off, path, min(tries, 200) if hdr["stale"] else tries)
            if not ok:
                s = {"device": struct.unpack_from("=i", head, 8)[0]}
            s["consistent"] = ok
            devs[s["device"]] = s
        return hdr, devs
    finally:
        os.close(fd)


def stats(pid=None):
    """{device: counters} from gpupool.<pid> (default: this process): every field of
    struct gpupool_device_stats (gauges also as <name>_peak) plus 'consistent'."""
    return read_page(pid)[1]


# ---- PyTorch's names ---------------------------------------------------------------------
# torch.cuda.memory_stats() keys from gpupool's counters, where the meaning matches. Each value
# is a field of the page, or a function of the slot dict for figures derived exactly.
TORCH_KEYS = (
    ("allocated_bytes.all.current", "allocated_bytes"),
    ("allocated_bytes.all.peak", "allocated_bytes_peak"),
    ("reserved_bytes.all.current", "reserved_bytes"),
    ("reserved_bytes.all.peak", "reserved_bytes_peak"),
    # every segment gpupool gives back goes through a release: reserved = taken - released
    ("reserved_bytes.all.allocated", lambda s: s["reserved_bytes"] + s["released_bytes"]),
    ("reserved_bytes.all.freed", "released_bytes"),
    ("requested_bytes.all.current", "requested_bytes"),
    ("requested_bytes.all.peak", "requested_bytes_peak"),
    ("requested_bytes.all.allocated", "requested_bytes_total"),
    ("requested_bytes.all.freed", lambda s: s["requested_bytes_total"] - s["requested_bytes"]),
    ("allocation.all.current", "live_blocks"),
    ("allocation.all.peak", "live_blocks_peak"),
    ("allocation.all.allocated", "allocs"),
    ("allocation.all.freed", "frees"),
    # PyTorch's "active": allocated, or freed and still in use on the GPU; gpupool's blocks
    # freed with cudaFree wait for a fence (pending) the same way
    ("active.all.current", lambda s: s["live_blocks"] + s["pending_frees"]),
    ("active_bytes.all.current", lambda s: s["allocated_bytes"] + s["pending_bytes"]),
    ("segment.all.current", "segments"),
    ("segment.all.peak", "segments_peak"),
    ("segment.all.allocated", "segment_allocs"),
    ("segment.all.freed", "segment_frees"),
    ("num_device_alloc", "segment_allocs"),
    ("num_device_free", "segment_frees"),
    ("num_alloc_retries", "oom_retries"),
    ("num_ooms", "ooms"),
    # device-wide synchronizations the allocator made (gpupool's fences)
    ("num_sync_all_streams", "fences"),
)

_STATS4 = ("current", "peak", "allocated", "freed")
_POOLS = ("all", "large_pool", "small_pool")
_why_pool = ("gpupool keeps no per-pool (small/large segment) split of its counters; the .all "
             "figures cover both")
# torch.cuda.memory_stats() keys memory_stats() leaves out, and why: gpupool does not keep the
# figure. None is ever reported as 0.
MEMORY_STATS_ABSENT = {}
for _m in ("allocated_bytes", "reserved_bytes", "requested_bytes", "active_bytes", "allocation",
           "active", "segment", "inactive_split", "inactive_split_bytes"):
    for _p in ("large_pool", "small_pool"):
        for _k in _STATS4:
            MEMORY_STATS_ABSENT["%s.%s.%s" % (_m, _p, _k)] = _why_pool
for _k in ("allocated", "freed"):
    MEMORY_STATS_ABSENT["allocated_bytes.all." + _k] = (
        "gpupool totals the bytes asked for (requested_bytes.all.*), not the rounded bytes")
for _m in ("active", "active_bytes"):
    for _k in ("peak", "allocated", "freed"):
        MEMORY_STATS_ABSENT["%s.all.%s" % (_m, _k)] = (
            "gpupool keeps live and pending blocks apart (allocation.*, gpupool.pending_*); "
            "their sum has no peak or totals")
for _m in ("inactive_split", "inactive_split_bytes"):
    for _k in _STATS4:
        MEMORY_STATS_ABSENT["%s.all.%s" % (_m, _k)] = (
            "gpupool does not count free blocks of partly used segments apart (gpupool.free_blocks "
            "and gpupool.cached_bytes count every free and pending block)")
for _m in ("oversize_allocations", "oversize_segments"):
    for _k in _STATS4:
        MEMORY_STATS_ABSENT["%s.%s" % (_m, _k)] = "gpupool does not count blocks above max_split_size"
MEMORY_STATS_ABSENT["max_split_size"] = "a knob of the process (GPUPOOL_CONF), not on the statistics page"
del _m, _p, _k


def _current_device():
    """torch.cuda.current_device() when torch is imported and has initialised CUDA (asking
    it otherwise would initialise CUDA), else 0."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.current_device())
    except (AttributeError, RuntimeError):
        pass
    return 0


def _device_index(device):
    """An int for None (the current device), an int, "cuda", "cuda:N" or a torch.device."""
    if device is None:
        return _current_device()
    if isinstance(device, bool):
        raise GpupoolError("device: expected an int, 'cuda:N' or a torch.device, got %r" % (device,))
    if isinstance(device, int):
        return device
    typ, idx = getattr(device, "type", None), getattr(device, "index", None)
    if typ is None and isinstance(device, str):
        typ, _, rest = device.partition(":")
        try:
            idx = int(rest) if rest else None
        except ValueError:
            raise GpupoolError("device %r: expected 'cuda' or 'cuda:N'" % device) from None
    if typ != "cuda":
        raise GpupoolError("device %r is not a CUDA device" % (device,))
    return _current_device() if idx is None else int(idx)


def _device_count():
    """CUDA devices this process sees, or None when that is not known: torch's count once
    torch is imported, else the count of the CUDA runtime the process has loaded (gpupool
    pools only in a process that has one)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return int(torch.cuda.device_count())
        except Exception:  # a torch without CUDA, or a stand-in: ask the runtime
            pass
    try:
        fn = ctypes.CDLL(None).cudaGetDeviceCount
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
    fn.restype = ctypes.c_int
    n = ctypes.c_int(0)
    return n.value if fn(ctypes.byref(n)) == 0 else None


def _check_device(device, pid=None):
    """GpupoolError (a RuntimeError, as torch.cuda.memory_stats raises) for a device that
    does not exist: outside 0..15 (what gpupool serves), or, for this process, at or past
    the number of CUDA devices it sees."""
    if not 0 <= device < MAX_DEVICES:
        raise GpupoolError("invalid device argument %d: gpupool serves CUDA devices 0 to %d"
                           % (device, MAX_DEVICES - 1))
    if pid is None or int(pid) == os.getpid():
        n = _device_count()
        if n is not None and device >= n:
            raise GpupoolError("invalid device argument %d: this process has %d CUDA device%s"
                               % (device, n, "" if n == 1 else "s"))


def _slot(device, pid=None):
    """The counters of `device` (a dict as stats() gives), or None when gpupool holds no pool
    for it. This process's come from the library when it is loaded (gpupool_stats: exact, and
    no file another user could have made first), else from the page."""
    if pid is None or int(pid) == os.getpid():
        if _loaded_path():
            return _stats_from_library(device)
        pid = None
    return stats(pid).get(device)


def memory_stats(device=None, pid=None):
    """torch.cuda.memory_stats()-style dict for `device` (default: the current device, as
    PyTorch's; an int, 'cuda:N' or a torch.device) of this process (or process `pid`, from
    its page): PyTorch's keys where gpupool keeps the figure (TORCH_KEYS), plus every raw
    counter as 'gpupool.<name>'. Keys gpupool does not keep are left out, never reported as
    0: MEMORY_STATS_ABSENT says which and why. {} when gpupool holds no pool for the device
    (nothing allocated there yet); GpupoolError, a RuntimeError as torch raises, for a device
    that does not exist."""
    device = _device_index(device)
    s = _slot(device, pid)
    if s is None:
        _check_device(device, pid)
        return {}
    if not s.get("consistent", True):
        return {}
    out = {k: (f(s) if callable(f) else s[f]) for k, f in TORCH_KEYS}
    out.update(("gpupool." + k, v) for k, v in s.items() if k not in ("device", "consistent"))
    return dict(sorted(out.items()))


def memory_allocated(device=None):
    """torch.cuda.memory_allocated(): bytes in live blocks of `device` (after rounding)."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    """torch.cuda.max_memory_allocated(): the peak of memory_allocated() since the process
    began, or since the last reset_peak_memory_stats()."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    """torch.cuda.memory_reserved(): bytes of the segments gpupool holds on `device`."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    """torch.cuda.max_memory_reserved(): the peak of memory_reserved() since the process
    began, or since the last reset_peak_memory_stats()."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None):
    """torch.cuda.reset_peak_memory_stats(): every peak of `device` (each gauge's _peak,
    *.peak in memory_stats) restarts from its current value (gpupool_reset_peak_stats), in
    this process's figures, its statistics page and its exit report. Counters are kept."""
    device = _device_index(device)
    _check_device(device)
    fn = _handle().gpupool_reset_peak_stats
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    rc = fn(device)
    if rc == -errno.ENODEV:
        raise GpupoolError("invalid device argument %d: gpupool found fewer CUDA devices in this process"
                           % device)
    if rc == -errno.ENOSYS:
        raise GpupoolError("gpupool is off in this process (GPUPOOL_DISABLE, or no CUDA runtime): "
                           "no peaks to reset")
    if rc < 0:
        raise GpupoolError("gpupool_reset_peak_stats(%d) failed: %s" % (device, os.strerror(-rc)))


def memory_summary(device=None, abbreviated=False, pid=None):
    """torch.cuda.memory_summary()'s table from memory_stats(device): the same rows and
    columns; 'n/a' where gpupool does not keep the figure (MEMORY_STATS_ABSENT)."""
    device = _device_index(device)
    st = memory_stats(device, pid)
    if not st:
        raise GpupoolError("gpupool holds no pool for device %d in %s" % (
            device, "process %d" % pid if pid is not None else "this process"))
    return _summary_table(device, st, abbreviated)


def _summary_table(device, st, abbreviated):
    """The table of memory_summary for the stats dict st (PyTorch's keys)."""

    def scaled(v, pref, units, step, limit, fmt):
        # PyTorch's _format_size/_format_count: the unit the reference value `pref` calls for
        if v is None:
            return "%10s" % "n/a"
        unit = units[0]
        pref = v if pref is None else pref
        for u in units[1:]:
            if pref < limit * step:
                break
            unit = u
            v //= step
            pref /= step
        return fmt % (v, unit)

    def fmt_size(sz, pref):
        return scaled(sz, pref, ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"], 1024, 768, "%6d %s")

    def fmt_count(cnt, pref):
        return scaled(cnt, pref, [" ", "K", "M"], 1000, 750, "%7d %s ")

    metrics = [
        ("allocated_bytes", "Allocated memory", fmt_size),
        ("active_bytes", "Active memory", fmt_size),
        ("requested_bytes", "Requested memory", fmt_size),
        ("reserved_bytes", "GPU reserved memory", fmt_size),
        ("inactive_split_bytes", "Non-releasable memory", fmt_size),
        ("allocation", "Allocations", fmt_count),
        ("active", "Active allocs", fmt_count),
        ("segment", "GPU reserved segments", fmt_count),
        ("inactive_split", "Non-releasable allocs", fmt_count),
    ]
    lines = ["=" * 75,
             " %16s gpupool CUDA memory summary, device ID %-17d " % ("", device),
             "-" * 75,
             "  %9s CUDA OOMs: %-12d | %6s cudaMalloc retries: %-8d  " % (
                 "", st["num_ooms"], "", st["num_alloc_retries"]),
             "=" * 75,
             "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    for key, name, f in metrics:
        lines.append("-" * 75)
        subs = [("all", name)]
        if not abbreviated:
            subs += [("large_pool", "      from large pool"), ("small_pool", "      from small pool")]
        pref = None
        for sub, subname in subs:
            vals = [st.get("%s.%s.%s" % (key, sub, k)) for k in _STATS4]
            if pref is None:
                pref = vals
            lines.append(" %-21s | %s | %s | %s | %s " % ((subname,) + tuple(
                f(v, p) for v, p in zip(vals, pref))))
    for key, name in (("oversize_allocations", "Oversize allocations"),
                      ("oversize_segments", "Oversize GPU segments")):
        lines.append("-" * 75)
        vals = [st.get("%s.%s" % (key, k)) for k in _STATS4]
        lines.append(" %-21s | %s | %s | %s | %s " % ((name,) + tuple(fmt_count(v, v) for v in vals)))
    lines.append("=" * 75)
    return "|" + "|\n|".join(lines) + "|\n"


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


# ---- torch.cuda's memory functions with gpupool as PyTorch's allocator -----------------------
# Under a pluggable allocator PyTorch refuses its memory statistics (getDeviceStats,
# resetPeakStats: RuntimeError "does not yet support"), stops a benchmarked convolution
# (cacheInfo), and has no graph pools or IPC. _answer_torch, run once the switch is made,
# puts gpupool's figures behind the first, keeps the cuDNN autotuner off, and turns the last
# two into one line saying what to do. Each function is replaced in torch.cuda.memory (whose
# own functions, wherever they were imported, look their helpers up there) and in torch.cuda.

_torch_baseline = {}  # device: accumulated figures at reset_accumulated_memory_stats()
_said = set()         # warnings already printed (each once per process)
# what torch.cuda.reset_accumulated_memory_stats restarts: the .allocated and .freed totals
# and these counters
_TORCH_ACCUMULATED = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
                      "num_device_free")


def _say_once(key, msg):
    if key not in _said:
        _said.add(key)
        sys.stderr.write("gpupool: %s\n" % msg)


class _TorchStats(collections.OrderedDict):
    """torch.cuda.memory_stats()'s answer: a key gpupool does not keep raises a KeyError that
    says why (a figure left out is never reported as 0)."""

    def __missing__(self, key):
        why = MEMORY_STATS_ABSENT.get(key)
        if why is None:
            raise KeyError(key)
        raise KeyError("%s: gpupool, PyTorch's allocator here, does not keep this figure (%s)" % (key, why))


def _torch_device(torch, device):
    """torch's device index (its rules: None is the current device), checked as torch does."""
    idx = torch.cuda._get_device_index(device, optional=True)
    if idx is None:  # no current device known without initialising CUDA: as torch, initialise it
        idx = torch.cuda.current_device()
    n = torch.cuda.device_count()
    if not 0 <= idx < n:
        raise GpupoolError("invalid device argument %d: this process has %d CUDA device%s"
                           % (idx, n, "" if n == 1 else "s"))
    return idx


def _torch_memory_stats(device=None):
    torch = sys.modules["torch"]
    out = _TorchStats()
    if not torch.cuda.is_initialized():
        return out  # as torch: nothing yet, and asking would initialise CUDA
    idx = _torch_device(torch, device)
    st = memory_stats(idx) or {k: 0 for k, _ in TORCH_KEYS}  # no pool yet: nothing allocated
    base = _torch_baseline.get(idx, {})
    for k in sorted(st):
        if not k.startswith("gpupool."):
            out[k] = st[k] - base.get(k, 0)
    return out


def _torch_memory_stats_as_nested_dict(device=None):
    nested = {}
    for k, v in _torch_memory_stats(device).items():
        parts = k.split(".")
        d = nested
        for part in parts[:-1]:
            d = d.setdefault(part, {})
        d[parts[-1]] = v
    return nested


def _torch_memory_allocated(device=None):
    return _torch_memory_stats(device).get("allocated_bytes.all.current", 0)


def _torch_max_memory_allocated(device=None):
    return _torch_memory_stats(device).get("allocated_bytes.all.peak", 0)


def _torch_memory_reserved(device=None):
    return _torch_memory_stats(device).get("reserved_bytes.all.current", 0)


def _torch_max_memory_reserved(device=None):
    return _torch_memory_stats(device).get("reserved_bytes.all.peak", 0)


def _torch_reset_peak_memory_stats(device=None):
    reset_peak_memory_stats(_torch_device(sys.modules["torch"], device))


def _torch_reset_accumulated_memory_stats(device=None):
    idx = _torch_device(sys.modules["torch"], device)
    st = memory_stats(idx)
    _torch_baseline[idx] = {k: v for k, v in st.items() if not k.startswith("gpupool.") and (
        k.endswith((".allocated", ".freed")) or k in _TORCH_ACCUMULATED)}


def _torch_memory_summary(device=None, abbreviated=False):
    idx = _torch_device(sys.modules["torch"], device)
    return _summary_table(idx, _torch_memory_stats(idx), abbreviated)


_TORCH_MEMORY = {
    "memory_stats": _torch_memory_stats,
    "memory_stats_as_nested_dict": _torch_memory_stats_as_nested_dict,
    "memory_allocated": _torch_memory_allocated,
    "max_memory_allocated": _torch_max_memory_allocated,
    "memory_reserved": _torch_memory_reserved,
    "max_memory_reserved": _torch_max_memory_reserved,
    "reset_peak_memory_stats": _torch_reset_peak_memory_stats,
    "reset_accumulated_memory_stats": _torch_reset_accumulated_memory_stats,
    "memory_summary": _torch_memory_summary,
}

BENCHMARK_OFF = (
    "torch.backends.cudnn.benchmark = True is left off: cuDNN's autotuner asks PyTorch's allocator "
    "for its largest free block (cacheInfo), which PyTorch's pluggable allocator interface cannot "
    "answer, and the first benchmarked convolution would stop the program; convolutions use "
    "cuDNN's heuristics instead (to autotune, run gpupool under LD_PRELOAD: gpupool-run without --torch)")
GRAPHS_REFUSED = (
    "CUDA graph capture needs PyTorch's own allocator, which keeps the memory a graph uses apart "
    "for its replays; with gpupool as PyTorch's allocator it would be reused under the graph: "
    "run this program with gpupool under LD_PRELOAD instead (gpupool-run without --torch)")
IPC_REFUSED = (
    "CUDA tensors shared between processes need PyTorch's own allocator (the block's base and "
    "offset in its segment); with gpupool as PyTorch's allocator the other process would get the "
    "wrong memory: run this program with gpupool under LD_PRELOAD instead (gpupool-run without --torch)")


def _refuse(msg):
    def refused(*args, **kwargs):
        raise TorchModeRefused(msg)
    return refused


def _answer_torch(torch):
    """With gpupool as PyTorch's allocator: torch.cuda's memory functions answer from
    gpupool's figures; cudnn.benchmark stays off (one line, once); graph capture and CUDA IPC
    raise TorchModeRefused. Once per process; a part that this torch lacks is left alone."""
    if getattr(torch, "_gpupool_answered", False):
        return
    mods = [m for m in (getattr(torch.cuda, "memory", None), torch.cuda) if m is not None]
    for name, fn in _TORCH_MEMORY.items():
        for m in mods:
            if hasattr(m, name):
                setattr(m, name, fn)

    # cuDNN's autotuner: every way to turn it on goes through torch._C._set_cudnn_benchmark
    # (torch.backends.cudnn.flags) or the module's benchmark property, which holds its own
    # reference to it
    C = getattr(torch, "_C", None)
    set_bench = getattr(C, "_set_cudnn_benchmark", None)
    get_bench = getattr(C, "_get_cudnn_benchmark", None)
    if set_bench is not None and get_bench is not None:
        def _set_cudnn_benchmark(value, _set=set_bench):
            if value:
                _say_once("benchmark", BENCHMARK_OFF)
            return _set(False)
        C._set_cudnn_benchmark = _set_cudnn_benchmark
        try:
            import torch.backends.cudnn as cudnn
            prop = type(cudnn).__dict__.get("benchmark")
            if prop is not None and hasattr(prop, "setter"):
                prop.setter = _set_cudnn_benchmark
        except Exception:  # a torch without cuDNN's module: _C's setter is patched anyway
            pass
        if get_bench():
            _set_cudnn_benchmark(True)

    graphs = getattr(torch.cuda, "graphs", None)
    graph_cls = getattr(graphs, "CUDAGraph", None) or getattr(torch.cuda, "CUDAGraph", None)
    if graph_cls is not None and hasattr(graph_cls, "capture_begin"):
        graph_cls.capture_begin = _refuse(GRAPHS_REFUSED)
    storage = getattr(torch, "UntypedStorage", None)
    if storage is not None:
        for name in ("_share_cuda_", "_new_shared_cuda"):
            if hasattr(storage, name):
                setattr(storage, name, staticmethod(_refuse(IPC_REFUSED)) if name == "_new_shared_cuda"
                        else _refuse(IPC_REFUSED))
    torch._gpupool_answered = True
