"""How far the GPU lags the program during a step: the fence latency a replay should model.

  python3 bench/gpu/lag.py --model resnet50|gpt2|bert|llama [--mode nocache|default]
                           [--warmup 3] [--steps 5] [--max-points 200000]

Runs the workload of workloads.py (random weights, fixed seeds) under one PyTorch allocator
mode (nocache: PYTORCH_NO_CUDA_MEMORY_CACHING=1, one cudaMalloc/cudaFree per tensor, as the
shared traces were recorded; default: PyTorch's caching allocator). In each timed step a
torch.cuda.Event is recorded, with the host's clock read next to it, at every module's
forward entry and exit and, for training, when the gradient of every module's output is
computed in the backward pass (a hook on the output tensor), and once at the end of the step.
Each step begins after a synchronize with a `start` event, the common origin of both clocks
(the device is idle then, so start completes as it is recorded, within the few us a launch
takes; a point where the device was idle can show a small negative lag). After the step, a
synchronize, and for each point:
    lag = start.elapsed_time(ev) (device completion, since start) - host time since start
the time the device finished the work issued before the point, after the program issued it:
what a fence (a device synchronize) issued at that point would wait. Prints one line:
  model=... mode=... points=N lag_us_p50=... lag_us_p90=... lag_us_max=... step_ms=<median>
Use the p50 as gpupool-replay's --fence-latency-us for a trace of the same workload.
Event timestamps resolve about 0.5 us. Warm-up steps record nothing.
"""
import argparse
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--model", choices=["resnet50", "gpt2", "bert", "llama"], required=True)
ap.add_argument("--mode", choices=["nocache", "default"], default="nocache")
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--max-points", type=int, default=200000, help="events recorded at most per step")
args = ap.parse_args()
if args.warmup < 0 or args.steps < 1 or args.max_points < 1:
    ap.error("--warmup must be >= 0, --steps and --max-points >= 1")

os.environ.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
if args.mode == "nocache":
    os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"

import torch  # noqa: E402

if not torch.cuda.is_available():
    print("SKIP: no CUDA device")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

dev = torch.device("cuda")
torch.manual_seed(0)
torch.backends.cudnn.benchmark = True
step, kind = workloads.build(args.model, dev, args.warmup + args.steps)

# Events are made before the step: creating one inside it would add a runtime call per point.
events = [torch.cuda.Event(enable_timing=True) for _ in range(args.max_points)]
host_ns = [0] * args.max_points
used = 0
armed = False


def mark():
    """Records the next event on the current stream, with the host time next to it."""
    global used
    if not armed or used >= args.max_points:
        return
    events[used].record()
    host_ns[used] = time.perf_counter_ns()
    used += 1


def on_grad(grad):
    mark()


def pre_hook(module, inputs):
    mark()


def post_hook(module, inputs, output):
    mark()
    if kind == "train" and armed and isinstance(output, torch.Tensor) and output.requires_grad:
        output.register_hook(on_grad)


for m in step.model.modules():
    m.register_forward_pre_hook(pre_hook)
    m.register_forward_hook(post_hook)

for _ in range(args.warmup):
    step()
torch.cuda.synchronize()

lags, times = [], []
start = torch.cuda.Event(enable_timing=True)
for _ in range(args.steps):
    used = 0
    torch.cuda.synchronize()
    start.record()
    t0 = time.perf_counter_ns()
    armed = True
    step()
    mark()
    armed = False
    torch.cuda.synchronize()
    times.append((time.perf_counter_ns() - t0) / 1e6)
    for i in range(used):
        lags.append(start.elapsed_time(events[i]) * 1e3 - (host_ns[i] - t0) / 1e3)

if not lags:
    print("lag: no points recorded (the workload has no modules?)", file=sys.stderr)
    sys.exit(1)
lags.sort()


def pct(q):
    return lags[min(len(lags) - 1, int(q * len(lags)))]


print(f"model={args.model} mode={args.mode} points={len(lags)} lag_us_p50={pct(0.5):.1f} "
      f"lag_us_p90={pct(0.9):.1f} lag_us_max={lags[-1]:.1f} lag_us_min={lags[0]:.1f} "
      f"step_ms={statistics.median(times):.2f}", flush=True)
