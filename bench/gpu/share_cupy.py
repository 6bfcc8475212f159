"""A CuPy holder for the sharing scenarios (bench/gpu/sharing.sh): takes GIB GiB in 1 GiB
arrays from CuPy's default memory pool (cuMemAlloc through gpupool's driver layer), frees
them (they stay in CuPy's pool), prints "ready=1", idles SECONDS or until SIGINT.

  python3 share_cupy.py hold GIB [--seconds S]
Exit status: 0, 2 bad arguments, 77 no CuPy (skipped)."""
import argparse
import signal
import sys
import time


def say(**kv):
    print(" ".join("%s=%s" % (k, v) for k, v in kv.items()), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["hold"])
    ap.add_argument("gib", type=int)
    ap.add_argument("--seconds", type=float, default=60)
    a = ap.parse_args()
    if a.gib < 1:
        ap.error("GIB must be at least 1")
    try:
        import cupy as cp
    except ImportError as e:
        say(skip=1, reason="no cupy (%s)" % e)
        return 77
    xs = [cp.ones(1 << 30, dtype=cp.uint8) for _ in range(a.gib)]
    cp.cuda.Device().synchronize()
    del xs
    pool = cp.get_default_memory_pool()
    say(ready=1, pool_total=pool.total_bytes(), pool_used=pool.used_bytes())
    stop = []
    signal.signal(signal.SIGINT, lambda *x: stop.append(1))
    end = time.time() + a.seconds
    while not stop and time.time() < end:
        time.sleep(0.05)
    say(end=1, pool_total=pool.total_bytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
