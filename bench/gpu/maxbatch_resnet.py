#!/usr/bin/env python3
"""ResNet-50 bf16 training steps at a given batch size: exit 0 when they fit, PyTorch's
OutOfMemoryError (exit 1, "CUDA out of memory" on stderr) when not. The probe for

    scripts/gpupool-maxbatch --limit 8G -- python3 bench/gpu/maxbatch_resnet.py {}

Allocator: PyTorch's default caching allocator, with libgpupool.so in LD_PRELOAD (the finder
puts it there). PyTorch then takes its segments (2 MiB, 20 MiB, large) through cudaMalloc,
so gpupool's limit caps PyTorch's reserved memory as a smaller GPU would, and PyTorch's own
fragmentation and OOM handling (free its cache, retry, raise) stay in the measurement: the
answer is the batch that fits on an 8 GiB GPU with stock PyTorch. (PYTORCH_NO_CUDA_MEMORY_CACHING=1
would measure gpupool's packing instead, per-tensor cudaMalloc/cudaFree; not what users run.)

With --allocator gpupool, gpupool is PyTorch's allocator (pluggable mode, python/gpupool.py):
the limit then caps gpupool's own packing of every tensor, and an out-of-memory is gpupool's
RuntimeError (exit 1) with its OOM counted in the report.

Two steps by default, not one: SGD's momentum buffers are created by the first step and live
through the second, so step 2 is the steady state whose peak decides whether training fits.
"""
import argparse
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("batch", type=int)
ap.add_argument("--steps", type=int, default=2)
ap.add_argument("--size", type=int, default=224)
ap.add_argument("--allocator", choices=["default", "gpupool"], default="default")
args = ap.parse_args()

import torch  # noqa: E402
import torchvision  # noqa: E402

if args.allocator == "gpupool":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import gpupool  # noqa: E402
    gpupool.use_as_torch_allocator()

torch.manual_seed(0)
torch.backends.cudnn.benchmark = False  # no workspace-hungry autotuning: stable probes
dev = torch.device("cuda", 0)
model = torchvision.models.resnet50(weights=None).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
lossf = torch.nn.CrossEntropyLoss()
x = torch.randn(args.batch, 3, args.size, args.size, device=dev)
y = torch.randint(0, 1000, (args.batch,), device=dev)
for _ in range(args.steps):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = lossf(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
peak = (gpupool.memory_stats(0)["reserved_bytes.all.peak"] if args.allocator == "gpupool"
        else torch.cuda.max_memory_reserved(dev))
print("batch=%d loss=%s max_reserved=%d allocator=%s preload=%s" % (
    args.batch, float(loss.item()).hex(), peak, args.allocator,
    "libgpupool" in os.environ.get("LD_PRELOAD", "")))
sys.exit(0)
