"""One side of the sharing scenarios (bench/gpu/sharing.sh): PyTorch processes on one GPU.

  python3 share_torch.py hold GIB [--empty] [--train STEPS] [--seconds S]
      A: takes GIB in tensors (1 GiB each), frees them, then idles for S seconds (a notebook
      waiting for its user), or with --train runs STEPS training steps of a small
      deterministic MLP, printing each step's time and the final loss checksum. --empty
      calls torch.cuda.empty_cache() after freeing. Prints "ready" once the memory is freed.
  python3 share_torch.py ask GIB [--beyond]
      B: takes GIB as one tensor (--beyond: the GPU's free memory as the driver reports it
      plus GIB, so that GIB is what the GPU lacks); prints the time the allocation took and
      whether it failed.
Lines are key=value, one event each, flushed at once."""
import argparse
import os
import sys
import time


def say(**kv):
    print(" ".join("%s=%s" % (k, v) for k, v in kv.items()), flush=True)


def train_steps(torch, steps, t_start):
    """A small MLP under fixed seeds and deterministic algorithms: the same losses whatever
    happens to the allocator's cache, so a reclaim in the middle must not change them."""
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    dev = "cuda"
    model = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 4096)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator(device=dev).manual_seed(1)
    total = 0.0
    for i in range(steps):
        t0 = time.perf_counter()
        x = torch.randn(4096, 4096, device=dev, generator=g)
        loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        l = loss.item()
        total += l
        say(step=i, ms="%.3f" % ((time.perf_counter() - t0) * 1e3), t="%.3f" % (time.perf_counter() - t_start),
            loss="%.9e" % l)
    say(done=1, loss_sum="%.12e" % total)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["hold", "ask"])
    ap.add_argument("gib", type=float)
    ap.add_argument("--empty", action="store_true")
    ap.add_argument("--train", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--beyond", action="store_true")
    a = ap.parse_args()
    import torch
    torch.cuda.init()
    t_start = time.perf_counter()
    if a.role == "hold":
        n = int(a.gib)
        ts = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(n)]
        for t in ts:
            t.fill_(1)
        torch.cuda.synchronize()
        del ts
        if a.empty:
            torch.cuda.empty_cache()
        say(ready=1, reserved=torch.cuda.memory_reserved(), free=torch.cuda.mem_get_info()[0])
        if a.train:
            train_steps(torch, a.train, t_start)
        else:
            time.sleep(a.seconds)
        say(end=1, reserved=torch.cuda.memory_reserved())
        return 0
    size = int(a.gib * (1 << 30))
    if a.beyond:
        free = torch.cuda.mem_get_info()[0]
        size += free
        say(free=free, asking=size)
    t0 = time.perf_counter()
    try:
        x = torch.empty(size, dtype=torch.uint8, device="cuda")
        x.fill_(2)
        torch.cuda.synchronize()
        say(ok=1, seconds="%.4f" % (time.perf_counter() - t0), gib=a.gib)
        return 0
    except torch.OutOfMemoryError as e:
        say(ok=0, seconds="%.4f" % (time.perf_counter() - t0), gib=a.gib, error="OutOfMemoryError")
        print(str(e).splitlines()[0], file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
