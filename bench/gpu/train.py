"""Time per training step of ResNet-50 or GPT-2 124M under one PyTorch allocator mode.

  python3 train.py --model resnet50|gpt2 --mode default|empty_cache|nocache|async
                   [--warmup 5] [--steps 15]

Modes: default (PyTorch's caching allocator), empty_cache (default + torch.cuda.empty_cache()
after every step), nocache (PYTORCH_NO_CUDA_MEMORY_CACHING=1), async
(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync); the environment is set here, before
torch is imported. Random init, synthetic data, bf16 autocast. Prints one line:
  model=... mode=... shim=0|1 step_ms=<median> step_ms_min=... peak_reserved=<bytes>
(peak_reserved: torch.cuda.max_memory_reserved; 0 where PyTorch does not count it, as
with nocache). The runner adds gpupool's figures from GPUPOOL_REPORT."""
import argparse
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--model", choices=["resnet50", "gpt2"], required=True)
ap.add_argument("--mode", choices=["default", "empty_cache", "nocache", "async"], required=True)
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--steps", type=int, default=15)
args = ap.parse_args()

os.environ.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
if args.mode == "nocache":
    os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
elif args.mode == "async":
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"

import torch  # noqa: E402

if not torch.cuda.is_available():
    print("SKIP: no CUDA device")
    sys.exit(77)

shim = int("libgpupool" in os.environ.get("LD_PRELOAD", ""))
dev = torch.device("cuda")
torch.manual_seed(0)
torch.backends.cudnn.benchmark = True

if args.model == "resnet50":
    import torchvision

    model = torchvision.models.resnet50(weights=None).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (64,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
else:
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (8, 1024), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()

times = []
for i in range(args.warmup + args.steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    step()
    if args.mode == "empty_cache":
        torch.cuda.empty_cache()
    torch.cuda.synchronize()
    if i >= args.warmup:
        times.append((time.perf_counter() - t0) * 1e3)

peak = torch.cuda.max_memory_reserved()
print(f"model={args.model} mode={args.mode} shim={shim} step_ms={statistics.median(times):.2f} "
      f"step_ms_min={min(times):.2f} steps={len(times)} peak_reserved={peak}", flush=True)
