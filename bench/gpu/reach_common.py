"""Shared by bench/gpu/reach_*.py: the lines each prints for bench/gpu/reach.sh.

  result <checksum>     a number computed on the GPU (must be identical with and without gpupool)
  time_s <seconds>      wall time of the work
  pool <allocs> <driver_allocs> <peak_reserved_bytes> <limit_bytes>   gpupool's figures from this
                        process's own statistics page, read live (before exit); "pool none"
                        without gpupool
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpupool  # noqa: E402  (python/gpupool.py: reads the page, no build step)


def pool_line(device=0):
    try:
        st = gpupool.stats(os.getpid())
    except Exception:  # no page: gpupool not loaded, or nothing pooled
        return "pool none"
    s = st.get(device)
    if not s:
        return "pool none"
    return "pool %d %d %d %d" % (s["allocs"], s.get("driver_allocs", 0), s["reserved_bytes_peak"], s["limit_bytes"])


def run(work):
    """Runs work() -> checksum (a float or int), prints the three lines."""
    t0 = time.perf_counter()
    checksum = work()
    dt = time.perf_counter() - t0
    print("result %r" % (checksum,))
    print("time_s %.3f" % dt)
    print(pool_line())
    sys.stdout.flush()
