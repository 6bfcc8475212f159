"""cuda-python's driver bindings (cuda.bindings.driver: cuGetProcAddress_v2 on libcuda's
handle): cuMemAlloc / cuMemFree of many buffers, filled with cuMemsetD32 and read back.
Prints the lines of reach_common.py."""
import ctypes

import reach_common


def check(r):
    err = r[0] if isinstance(r, tuple) else r
    if int(err) != 0:
        raise SystemExit("CUDA driver error %r" % (err,))
    return r[1:] if isinstance(r, tuple) else None


def work():
    from cuda.bindings import driver as cu

    check(cu.cuInit(0))
    (dev,) = check(cu.cuDeviceGet(0))
    (ctx,) = check(cu.cuDevicePrimaryCtxRetain(dev))
    check(cu.cuCtxSetCurrent(ctx))
    acc = 0
    for i in range(2000):
        n = 4 * (1024 + (i % 97) * 64)
        (p,) = check(cu.cuMemAlloc(n))
        check(cu.cuMemsetD32(p, i, n // 4))
        host = (ctypes.c_uint32 * (n // 4))()
        check(cu.cuMemcpyDtoH(host, p, n))
        acc += sum(host[:: max(1, (n // 4) // 16)])
        check(cu.cuMemFree(p))
    check(cu.cuCtxSynchronize())
    return acc


if __name__ == "__main__":
    reach_common.run(work)
