#!/usr/bin/env python3
"""Host time of the driver's virtual memory calls, per chunk of the allocation granularity,
made the way gpupool's virtual-memory segments make them (src/driver/backend_vmm.c): per chunk
cuMemCreate + cuMemMap + cuMemRelease, one cuMemSetAccess over the whole range, then per chunk
cuMemUnmap. Through ctypes on libcuda.so.1, no torch.

    python3 bench/gpu/vmm_cost.py [--chunks N] [--rounds R] [--device D] [--handle-chunks K,...]

Prints one line per round and a last one, the medians over rounds:
    vmm_cost gran=BYTES chunks=N map_us=... access_us=... unmap_us=... reserve_us=...
map_us: create + map + release per chunk; access_us: the one cuMemSetAccess divided by N;
unmap_us: per chunk; reserve_us: cuMemAddressReserve + cuMemAddressFree of the range.
gpupool-replay --vmm-cost-us C models C as map_us + access_us for a map and unmap_us for an
unmap.

--handle-chunks K,... repeats the measure with handles of K chunks each (N a multiple of K:
N/K handles, each cuMemCreate'd, mapped and unmapped in one call), one line per K:
    vmm_cost_handle gran=BYTES chunks=N handle_chunks=K map_us=... access_us=... unmap_us=...
the figures still per chunk of the granularity, so K=1 is the line above and a smaller figure
at a larger K is what larger handles would save per byte. With it, one line more says whether
one cuMemUnmap may cover several chunk mappings, and its cost per chunk:
    vmm_cost_span gran=BYTES chunks=N unmap_us=... | refused: ... Exit 77 without a driver or a
device, 2 on bad arguments."""
import argparse
import ctypes
import statistics
import sys
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--chunks", type=int, default=256)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--device", type=int, default=0)
ap.add_argument("--handle-chunks", default="")
args = ap.parse_args()
if args.chunks < 1 or args.rounds < 1 or args.device < 0:
    ap.error("--chunks and --rounds must be >= 1, --device >= 0")
try:
    ks = [int(k) for k in args.handle_chunks.split(",") if k]
except ValueError:
    ap.error("--handle-chunks takes numbers, comma-separated")
if any(k < 1 or args.chunks % k for k in ks):
    ap.error("--handle-chunks: each K must be >= 1 and divide --chunks")

try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError:
    print("SKIP: no libcuda.so.1")
    sys.exit(77)


class Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Loc),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", AllocFlags)]


class Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", Loc), ("flags", ctypes.c_int)]


def ck(what, rc):
    if rc != 0:
        sys.exit("vmm_cost: %s failed (CUresult %d)" % (what, rc))


u64 = ctypes.c_uint64
if cu.cuInit(0) != 0:
    print("SKIP: cuInit failed (no device)")
    sys.exit(77)
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
n = ctypes.c_int()
ck("cuDeviceGetCount", cu.cuDeviceGetCount(ctypes.byref(n)))
if args.device >= n.value:
    print("SKIP: no device %d" % args.device)
    sys.exit(77)
ck("cuDeviceGet", cu.cuDeviceGet(ctypes.byref(dev), args.device))
ck("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
ck("cuCtxSetCurrent", cu.cuCtxSetCurrent(ctx))
prop = Prop(type=1, location=Loc(type=1, id=args.device))  # PINNED, DEVICE
gran = ctypes.c_size_t()
ck("cuMemGetAllocationGranularity", cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0))
g = gran.value
size = g * args.chunks
acc = Access(location=Loc(type=1, id=args.device), flags=3)  # READWRITE
cu.cuMemAddressReserve.argtypes = [ctypes.POINTER(u64), ctypes.c_size_t, ctypes.c_size_t, u64, ctypes.c_ulonglong]
cu.cuMemAddressFree.argtypes = [u64, ctypes.c_size_t]
cu.cuMemCreate.argtypes = [ctypes.POINTER(u64), ctypes.c_size_t, ctypes.POINTER(Prop), ctypes.c_ulonglong]
cu.cuMemMap.argtypes = [u64, ctypes.c_size_t, ctypes.c_size_t, u64, ctypes.c_ulonglong]
cu.cuMemRelease.argtypes = [u64]
cu.cuMemSetAccess.argtypes = [u64, ctypes.c_size_t, ctypes.POINTER(Access), ctypes.c_size_t]
cu.cuMemUnmap.argtypes = [u64, ctypes.c_size_t]
cu.cuMemsetD8_v2.argtypes = [u64, ctypes.c_ubyte, ctypes.c_size_t]

def measure(k, span=False):
    """One round's figures with handles of k chunks, per chunk of the granularity; span: the
    whole range unmapped in one cuMemUnmap (None when the driver refuses it)."""
    hs = g * k
    nh = args.chunks // k
    va = u64()
    t0 = time.perf_counter()
    ck("cuMemAddressReserve", cu.cuMemAddressReserve(ctypes.byref(va), size, g, 0, 0))
    t1 = time.perf_counter()
    for i in range(nh):
        h = u64()
        ck("cuMemCreate", cu.cuMemCreate(ctypes.byref(h), hs, ctypes.byref(prop), 0))
        ck("cuMemMap", cu.cuMemMap(va.value + i * hs, hs, 0, h.value, 0))
        ck("cuMemRelease", cu.cuMemRelease(h.value))
    t2 = time.perf_counter()
    ck("cuMemSetAccess", cu.cuMemSetAccess(va.value, size, ctypes.byref(acc), 1))
    t3 = time.perf_counter()
    ck("cuMemsetD8", cu.cuMemsetD8_v2(va.value, 0x5A, size))  # the memory works
    ck("cuCtxSynchronize", cu.cuCtxSynchronize())
    t4 = time.perf_counter()
    if span and cu.cuMemUnmap(va.value, size) != 0:
        for i in range(nh):
            ck("cuMemUnmap", cu.cuMemUnmap(va.value + i * hs, hs))
        ck("cuMemAddressFree", cu.cuMemAddressFree(va.value, size))
        return None
    for i in range(0 if span else nh):
        ck("cuMemUnmap", cu.cuMemUnmap(va.value + i * hs, hs))
    t5 = time.perf_counter()
    ck("cuMemAddressFree", cu.cuMemAddressFree(va.value, size))
    t6 = time.perf_counter()
    return {"map_us": (t2 - t1) * 1e6 / args.chunks, "access_us": (t3 - t2) * 1e6 / args.chunks,
            "unmap_us": (t5 - t4) * 1e6 / args.chunks, "reserve_us": ((t1 - t0) + (t6 - t5)) * 1e6}


def fmt(row):
    return " ".join("%s=%.2f" % kv for kv in row.items())


rows = []
for r in range(args.rounds):
    row = measure(1)
    rows.append(row)
    print("round=%d gran=%d chunks=%d %s" % (r + 1, g, args.chunks, fmt(row)), flush=True)
med = {k: statistics.median(x[k] for x in rows) for k in rows[0]}
print("vmm_cost gran=%d chunks=%d %s" % (g, args.chunks, fmt(med)), flush=True)
# the handle sizes interleaved: each round measures every size once
per = {k: [] for k in ks}
for r in range(args.rounds):
    for k in ks:
        per[k].append(measure(k))
spans = [measure(1, True) for _ in range(args.rounds)] if ks else []
if spans and None in spans:
    print("vmm_cost_span gran=%d chunks=%d refused: cuMemUnmap over several mappings" % (g, args.chunks))
elif spans:
    print("vmm_cost_span gran=%d chunks=%d unmap_us=%.2f (one cuMemUnmap over the %d chunk mappings, "
          "per chunk, median of %d)" % (g, args.chunks, statistics.median(x["unmap_us"] for x in spans),
                                       args.chunks, len(spans)))
for k in ks:
    med = {n: statistics.median(x[n] for x in per[k]) for n in per[k][0]}
    lo = {n: min(x[n] for x in per[k]) for n in per[k][0]}
    hi = {n: max(x[n] for x in per[k]) for n in per[k][0]}
    print("vmm_cost_handle gran=%d chunks=%d handle_chunks=%d %s range %s" % (
        g, args.chunks, k, fmt(med), " ".join("%s=%.2f-%.2f" % (n, lo[n], hi[n]) for n in med)))
