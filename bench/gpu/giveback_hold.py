"""A process of bench/gpu/giveback.sh that calls the CUDA runtime through ctypes, so that one
script runs on a GPU and over the fake runtime (gpupool-run --fake) alike; under LD_PRELOAD its
calls reach gpupool (the runtime loaded RTLD_GLOBAL, called through ctypes.CDLL(None)).

  python3 giveback_hold.py hold FRACTION [--seconds S]
        takes FRACTION of the GPU's memory (of cudaMemGetInfo's total) in 1 GiB pieces,
        writes them, frees them with cudaFree (gpupool keeps them cached), prints
        "ready=1 held=<bytes> total=<bytes>" and idles for S seconds (default 300) or until
        SIGINT, then returns (the exit report is written)
  python3 giveback_hold.py ask BYTES [--beyond-free]
        one cudaMalloc of BYTES (--beyond-free: of the GPU's free memory and BYTES more, so
        that the GPU lacks BYTES): prints "ok=1 seconds=<s>" or "ok=0 err=<code> seconds=<s>";
        exit status 0, 3 when out of memory
Exit status 2 on bad arguments (before the runtime is loaded)."""
import argparse
import ctypes
import os
import signal
import sys
import time

ap = argparse.ArgumentParser()
sub = ap.add_subparsers(dest="cmd", required=True)
h = sub.add_parser("hold")
h.add_argument("fraction", type=float)
h.add_argument("--seconds", type=float, default=300)
a = sub.add_parser("ask")
a.add_argument("bytes", type=int)
a.add_argument("--beyond-free", action="store_true")
args = ap.parse_args()
if args.cmd == "hold" and not 0 < args.fraction <= 0.95:
    ap.error("FRACTION must be above 0 and at most 0.95")
if args.cmd == "ask" and args.bytes < 1:
    ap.error("BYTES must be at least 1")

GIB = 1 << 30
ctypes.CDLL("libcudart.so.13", mode=os.RTLD_GLOBAL)
cuda = ctypes.CDLL(None)  # the preloaded gpupool first, as the program's own calls would be
cuda.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cuda.cudaFree.argtypes = [ctypes.c_void_p]
cuda.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
cuda.cudaMemGetInfo.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]

if args.cmd == "ask":
    want = args.bytes
    if args.beyond_free:
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        cuda.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        want += free.value
    p = ctypes.c_void_p()
    t0 = time.monotonic()
    e = cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(want))
    dt = time.monotonic() - t0
    if e == 0:
        print("ok=1 seconds=%.3f" % dt, flush=True)
        cuda.cudaFree(p)
        sys.exit(0)
    print("ok=0 err=%d seconds=%.3f" % (e, dt), flush=True)
    sys.exit(3 if e == 2 else 1)

free, total = ctypes.c_size_t(), ctypes.c_size_t()
if cuda.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) != 0:
    print("giveback_hold: cudaMemGetInfo failed", file=sys.stderr)
    sys.exit(1)
n = int(args.fraction * total.value) // GIB
ptrs = []
for i in range(n):
    p = ctypes.c_void_p()
    if cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(GIB)) != 0:
        print("giveback_hold: cudaMalloc %d of %d GiB failed" % (i, n), file=sys.stderr)
        sys.exit(1)
    cuda.cudaMemset(p, 1, ctypes.c_size_t(GIB))
    ptrs.append(p)
for p in ptrs:
    cuda.cudaFree(p)
cuda.cudaDeviceSynchronize()
print("ready=1 held=%d total=%d" % (n * GIB, total.value), flush=True)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])  # taken below: main returns, the report is written
end = time.monotonic() + args.seconds
while time.monotonic() < end:
    if signal.sigtimedwait([signal.SIGINT], max(0.0, min(1.0, end - time.monotonic()))):
        break
