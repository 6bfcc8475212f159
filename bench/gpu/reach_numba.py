"""Numba through the driver API (ctypes on libcuda.so.1: dlsym of each name):
numba.cuda.device_array and a small kernel. Prints the lines of reach_common.py."""
import numpy as np

import reach_common


def work():
    from numba import cuda

    @cuda.jit
    def axpy(out, x, y, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    acc = 0.0
    rng = np.random.default_rng(1234)
    for i in range(100):
        n = 1 << (14 + i % 6)
        x = cuda.to_device(rng.standard_normal(n).astype(np.float32))
        y = cuda.device_array(n, dtype=np.float32)
        y.copy_to_device(np.ones(n, dtype=np.float32))
        out = cuda.device_array(n, dtype=np.float32)
        axpy[(n + 255) // 256, 256](out, x, y, np.float32(0.5))
        acc += float(out.copy_to_host().astype(np.float64).sum())
        del x, y, out
    cuda.synchronize()
    return round(acc, 6)


if __name__ == "__main__":
    reach_common.run(work)
