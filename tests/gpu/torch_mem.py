"""torch.cuda.empty_cache() and torch.cuda.mem_get_info() under gpupool.

- mem_get_info: with GPUPOOL_CONF=limit:SIZE and the shim loaded, total must equal the
  limit and free must stay <= total; a tensor larger than the limit raises
  torch.OutOfMemoryError and the next allocation works (no stale CUDA error).
- empty_cache: after freeing tensors and empty_cache(), memory_reserved() is 0 and
  mem_get_info's free comes back to within 64 MiB of where it was.
Exit 0 pass, 1 fail, 77 without a GPU."""
import ctypes
import os
import re
import sys
import time

import torch

GiB = 1 << 30


def parse_limit():
    m = re.search(r"(?:^|,)\s*limit:\s*([0-9.]+)\s*([KMGT]?)", os.environ.get("GPUPOOL_CONF", ""), re.I)
    if not m:
        return None
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2).upper()]
    return int(float(m.group(1)) * mult)


def shim_loaded():
    try:
        ctypes.CDLL(None).gpupool_version
        return True
    except AttributeError:
        return False


def fail(msg):
    print("FAIL torch_mem: " + msg, flush=True)
    sys.exit(1)


def main():
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    shim = shim_loaded()
    limit = parse_limit() if shim else None
    torch.cuda.init()
    f0, t0 = torch.cuda.mem_get_info()
    print(f"mem: shim={int(shim)} limit={limit} total={t0} free={f0}", flush=True)
    if limit is not None and t0 != limit:
        fail(f"mem_get_info total {t0} != limit {limit}")
    if f0 > t0:
        fail("free > total")
    xs = [torch.empty(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(8)]
    f1, _ = torch.cuda.mem_get_info()
    print(f"mem: with 2 GiB of tensors free={f1}", flush=True)
    if f1 + 2 * GiB > f0 + (64 << 20):
        fail(f"free did not drop by 2 GiB ({f0} -> {f1})")
    del xs
    torch.cuda.empty_cache()
    if torch.cuda.memory_reserved() != 0:
        fail(f"memory_reserved after empty_cache: {torch.cuda.memory_reserved()}")
    deadline = time.time() + 0.5
    while True:
        f2, _ = torch.cuda.mem_get_info()
        if f2 + (64 << 20) >= f0 or time.time() > deadline:
            break
        time.sleep(0.01)
    print(f"mem: after empty_cache free={f2}", flush=True)
    if f2 + (64 << 20) < f0:
        fail(f"free did not come back after empty_cache ({f0} -> {f2})")
    if limit is not None:
        try:
            torch.empty(limit + GiB, dtype=torch.uint8, device="cuda")
            fail("a tensor larger than the limit was allocated")
        except torch.OutOfMemoryError as e:
            print("mem: over-limit tensor raised OutOfMemoryError: " + str(e).splitlines()[0][:200], flush=True)
        y = torch.ones(GiB // 4, dtype=torch.float32, device="cuda")
        if int(y.sum().item()) != GiB // 4:
            fail("wrong sum after recovering from OOM")
        del y
        torch.cuda.empty_cache()
    torch.cuda.synchronize()
    print("PASS torch_mem", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
