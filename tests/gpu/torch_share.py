"""torch.multiprocessing: a CUDA tensor shared with a spawned child (CUDA IPC).

PyTorch exports the cudaMalloc'd segment that holds the tensor. Under gpupool that
segment is a pool block: a whole gpupool segment for large tensors (exported fine), a
sub-block for small ones (gpupool refuses with a clear message). Either way the data the
child sees must never be wrong. Prints one line per tensor size:
  share size=... result=ok|refused|WRONG ...
and exits 1 on WRONG data or an unexpected failure, 77 without a GPU."""
import queue
import sys
import time

import torch
import torch.multiprocessing as mp


def child(t, n, q_out):
    try:
        expect = torch.arange(n, device=t.device, dtype=torch.int64) * 7 + 3
        ok = bool(torch.equal(t, expect))
        q_out.put(("ok" if ok else "WRONG", int((t != expect).sum().item())))
        del t
    except Exception as e:  # noqa: BLE001 - reported to the parent
        q_out.put(("child-error", repr(e)[:300]))


def one(ctx, n):
    t = torch.arange(n, device="cuda", dtype=torch.int64) * 7 + 3
    torch.cuda.synchronize()
    q_out = ctx.Queue()
    # the tensor travels as a Process argument: it is pickled (cudaIpcGetMemHandle) in
    # p.start(), in this thread, so a refused export raises here
    p = ctx.Process(target=child, args=(t, n, q_out))
    try:
        p.start()
    except Exception as e:  # noqa: BLE001 - the export failed
        return ("refused", repr(e)[:300])
    res = None
    deadline = time.time() + 90
    while res is None and time.time() < deadline:
        try:
            res = q_out.get(timeout=0.5)
        except queue.Empty:
            if not p.is_alive():
                try:
                    res = q_out.get(timeout=1)
                except queue.Empty:
                    res = ("child-died", f"exit code {p.exitcode}")
    if res is None:
        res = ("child-died", "timeout")
    p.join(timeout=30)
    if p.is_alive():
        p.kill()
    return res


def main():
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    ctx = mp.get_context("spawn")
    rc = 0
    # 1 KiB (inside one of PyTorch's 2 MiB segments), 64 MiB (a segment of its own)
    for n in (128, 8 << 20):
        res = one(ctx, n)
        print(f"share size={n * 8} result={res[0]} detail={res[1]!s}", flush=True)
        if res[0] == "WRONG":
            rc = 1
        elif res[0] == "child-error" or res[0] == "child-died":
            rc = 1
        elif res[0] != "ok":
            # a refusal is acceptable only with gpupool's clear message (the runner greps stderr)
            print("share: the export was refused", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
