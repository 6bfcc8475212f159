"""CuPy through the driver API: `python reach_cupy.py default` (CuPy's own memory pool, which
takes large blocks from cuMemAlloc) or `python reach_cupy.py none` (cupy.cuda.set_allocator(None):
one cuMemAlloc per array). Prints the lines of reach_common.py."""
import sys

import reach_common


def work(mode):
    import cupy as cp
    if mode == "none":
        cp.cuda.set_allocator(None)
    elif mode != "default":
        raise SystemExit("usage: reach_cupy.py default|none")
    rs = cp.random.RandomState(1234)
    acc = cp.zeros((), dtype=cp.float64)
    for i in range(200):
        n = 256 + (i % 7) * 128
        a = rs.standard_normal((n, n), dtype=cp.float32)
        b = rs.standard_normal((n, n), dtype=cp.float32)
        c = a @ b
        acc += cp.tanh(c).astype(cp.float64).sum()
        del a, b, c
    cp.cuda.Device().synchronize()
    return float(acc)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "default"
    reach_common.run(lambda: work(mode))
