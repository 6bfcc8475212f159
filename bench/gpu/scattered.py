#!/usr/bin/env python3
"""How much of a process's free cached memory goes back to the driver on a release when its
live tensors are scattered, under one allocator configuration.

    python3 bench/gpu/scattered.py --mode pluggable|default|expandable [--fraction F] [--rounds R]

The process churns tensors (uniformly 1-64 MiB, a fixed seed) for R rounds: it fills F of the
GPU's memory (default 0.3), frees a random half, fills again; then frees a random half of what
is live, so that the live tensors lie scattered over everything it allocated, and releases:
gpupool.release() with gpupool as PyTorch's allocator (pluggable; GPUPOOL_CONF picks the
segments knob), torch.cuda.empty_cache() under PyTorch's own (default, expandable:
expandable_segments:True). The driver's free memory (cudaMemGetInfo) before and after tells
what went back. Prints one line:
    scattered mode=... conf=... live=BYTES free_cached=BYTES given=BYTES given_share=X
free_cached: what the allocator held beyond the live tensors before the release (reserved less
allocated); given: what the driver got back; given_share = given / free_cached. Exit 77 without
a GPU, 2 on bad arguments."""
import argparse
import os
import random
import sys

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--mode", choices=["pluggable", "default", "expandable"], required=True)
ap.add_argument("--fraction", type=float, default=0.3)
ap.add_argument("--rounds", type=int, default=4)
args = ap.parse_args()
if not 0.01 <= args.fraction <= 0.8 or args.rounds < 1:
    ap.error("--fraction must be in [0.01, 0.8] and --rounds >= 1")

os.environ.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
if args.mode == "expandable":
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import torch  # noqa: E402

if not torch.cuda.is_available():
    print("SKIP: no CUDA device")
    sys.exit(77)
if args.mode == "pluggable":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import gpupool  # noqa: E402

    gpupool.use_as_torch_allocator()

MiB = 1 << 20
rng = random.Random(20261207)
total = torch.cuda.mem_get_info()[1]
target = int(total * args.fraction)
live = []


def fill():
    held = sum(t.numel() for t in live)
    while held < target:
        n = rng.randint(1, 64) * MiB - rng.randrange(0, MiB, 512)
        live.append(torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1))
        held += n


def drop_half():
    rng.shuffle(live)
    del live[: len(live) // 2]


for _ in range(args.rounds):
    fill()
    drop_half()
fill()
drop_half()
torch.cuda.synchronize()


def held():
    """(reserved, allocated) bytes of the allocator in use."""
    if args.mode == "pluggable":
        s = gpupool.stats()[0]
        return s["reserved_bytes"], s["allocated_bytes"]
    return torch.cuda.memory_reserved(), torch.cuda.memory_allocated()


res0, alloc0 = held()
free0 = torch.cuda.mem_get_info()[0]
if args.mode == "pluggable":
    gpupool.release()
else:
    torch.cuda.empty_cache()
torch.cuda.synchronize()
free1 = torch.cuda.mem_get_info()[0]
res1, _ = held()
cached = res0 - alloc0
given = free1 - free0
print("scattered mode=%s conf=%s tensors=%d live=%d free_cached=%d given=%d reserved_after=%d given_share=%.3f" % (
    args.mode, os.environ.get("GPUPOOL_CONF", "") or "-", len(live), alloc0, cached, given, res1,
    given / cached if cached else 0.0))
