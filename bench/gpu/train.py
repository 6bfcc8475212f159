"""Time per step of one workload (workloads.py) under one PyTorch allocator mode.

  python3 train.py --model resnet50|gpt2|bert|llama --mode default|expandable|empty_cache|nocache|async|pluggable
                   [--warmup 5] [--steps 15]

Workloads (workloads.py says what one step is): resnet50 and gpt2 training, bert dynamic-shape
inference (eight forward passes per step), llama generation (128 new tokens per step).
Modes: default (PyTorch's caching allocator), empty_cache (default + torch.cuda.empty_cache()
after every step), nocache (PYTORCH_NO_CUDA_MEMORY_CACHING=1), async
(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync), pluggable (gpupool as PyTorch's allocator,
python/gpupool.py's use_as_torch_allocator: $GPUPOOL_LIB or the library it finds); the
environment is set here, before torch is imported. Random init, synthetic data, bf16. The
same workloads and settings in every mode (torch_pluggable.py differs: deterministic
algorithms, losses printed). Prints one line:
  model=... mode=... shim=0|1 step_ms=<median> step_ms_min=... step_ms_max=... steps=N peak_reserved=<bytes>
(peak_reserved: torch.cuda.max_memory_reserved; 0 where PyTorch does not count it, as
with nocache; with pluggable, gpupool's reserved_bytes_peak). The runner adds gpupool's figures from GPUPOOL_REPORT."""
import argparse
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--model", choices=["resnet50", "gpt2", "bert", "llama"], required=True)
ap.add_argument("--mode", choices=["default", "expandable", "empty_cache", "nocache", "async", "pluggable"], required=True)
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--steps", type=int, default=15)
args = ap.parse_args()
if args.warmup < 0 or args.steps < 1:
    ap.error("--warmup must be >= 0 and --steps >= 1")

os.environ.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
if args.mode == "nocache":
    os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
elif args.mode == "async":
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
elif args.mode == "expandable":
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import torch  # noqa: E402

if not torch.cuda.is_available():
    print("SKIP: no CUDA device")
    sys.exit(77)

shim = int("libgpupool" in os.environ.get("LD_PRELOAD", ""))
if args.mode == "pluggable":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import gpupool  # noqa: E402

    gpupool.use_as_torch_allocator()  # before any CUDA allocation
dev = torch.device("cuda")
torch.manual_seed(0)
# cuDNN's autotuner asks the allocator for cacheInfo, which PyTorch refuses under a pluggable
# allocator (docs/pytorch.md): the pluggable mode runs without it
torch.backends.cudnn.benchmark = args.mode != "pluggable"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

step, _ = workloads.build(args.model, dev, args.warmup + args.steps)

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

if args.mode == "pluggable":
    st = gpupool.stats()[0]
    peak, peak_alloc = st["reserved_bytes_peak"], st["allocated_bytes_peak"]
else:
    peak, peak_alloc = torch.cuda.max_memory_reserved(), torch.cuda.max_memory_allocated()
print(f"model={args.model} mode={args.mode} shim={shim} step_ms={statistics.median(times):.2f} "
      f"step_ms_min={min(times):.2f} step_ms_max={max(times):.2f} steps={len(times)} peak_reserved={peak} "
      f"peak_allocated={peak_alloc}", flush=True)
