#!/usr/bin/env python3
"""PyTorch training under PyTorch's allocator vs gpupool's pluggable allocator (GPU machine).

    python3 bench/gpu/torch_pluggable.py default [--model resnet50|gpt2|bert|llama|all] [--warmup 5] [--steps 20] [--attn eager]
    python3 bench/gpu/torch_pluggable.py gpupool  [...]       # gpupool via CUDAPluggableAllocator
    scripts/gpupool-run python3 bench/gpu/torch_pluggable.py default   # LD_PRELOAD under PyTorch's cache

ResNet-50 (torchvision, batch 64, 3x224x224, bf16 autocast, SGD) and GPT-2 124M (transformers
GPT2Config(), 8x1024 tokens, bf16 autocast, AdamW); random init, one fixed synthetic batch,
fixed seeds, deterministic algorithms where PyTorch has them. Prints key=value lines:
<model>.losses (hex floats, every step), <model>.step_ms (median of the timed steps),
<model>.peak_reserved (torch.cuda.max_memory_reserved in default mode; gpupool's
reserved_bytes_peak in gpupool mode, which cannot be reset: with --model all the GPT-2 figure
is the process's peak so far, so compare models one process each).
bert and llama (workloads.py: dynamic-shape inference, generation; not in `all`) print
<model>.checksums (hex floats of each step's output checksum: the pooled outputs' sum for
bert, the generated ids' sum for llama) instead of losses, and the same step_ms and peak lines.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts: deterministic
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("mode", choices=["default", "gpupool"])
ap.add_argument("--model", choices=["resnet50", "gpt2", "bert", "llama", "all"], default="all")
ap.add_argument("--attn", default="", help="GPT-2 attention implementation (e.g. eager: deterministic, "
                "where PyTorch's fused attention backward is not); default: transformers' choice")
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--lib", help="libgpupool.so (default: gpupool.find_library())")
args = ap.parse_args()
if args.warmup < 0 or args.steps < 1:
    ap.error("--warmup must be >= 0 and --steps >= 1")

import torch  # noqa: E402

if args.mode == "gpupool":
    import gpupool  # noqa: E402
    print("gpupool.lib=%s" % gpupool.use_as_torch_allocator(args.lib))  # before any CUDA allocation

torch.manual_seed(0)
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.use_deterministic_algorithms(True, warn_only=True)
dev = torch.device("cuda", 0)
print("torch=%s cuda=%s device=%s" % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0)))
print("mode=%s ld_preload=%s" % (args.mode, os.environ.get("LD_PRELOAD", "")))


def peak_reserved():
    if args.mode == "gpupool":
        return gpupool.stats()[0]["reserved_bytes_peak"]
    return torch.cuda.max_memory_reserved(dev)


def train(name, model, opt, step_fn):
    losses, times = [], []
    for i in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn()
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss.detach().float().item()).hex())
    print("%s.losses=%s" % (name, ",".join(losses)))
    print("%s.step_ms=%.3f" % (name, statistics.median(times) if times else float("nan")))
    if times:
        q = statistics.quantiles(times, n=10) if len(times) > 1 else times * 9
        print("%s.step_ms_min=%.3f\n%s.step_ms_p10=%.3f\n%s.step_ms_p90=%.3f" % (
            name, min(times), name, q[0], name, q[-1]))
    print("%s.peak_reserved=%d" % (name, peak_reserved()))
    sys.stdout.flush()


def infer(name):
    """An inference workload of workloads.py: step times and a checksum per step."""
    sys.path.insert(0, HERE)
    import workloads
    torch.manual_seed(0)
    step, _ = workloads.build(name, dev, args.warmup + args.steps)
    sums, times = [], []
    for i in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = step()
        torch.cuda.synchronize()
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
        sums.append(float(out.double().sum().item()).hex())
    print("%s.checksums=%s" % (name, ",".join(sums)))
    print("%s.step_ms=%.3f" % (name, statistics.median(times)))
    q = statistics.quantiles(times, n=10) if len(times) > 1 else times * 9
    print("%s.step_ms_min=%.3f\n%s.step_ms_p10=%.3f\n%s.step_ms_p90=%.3f" % (
        name, min(times), name, q[0], name, q[-1]))
    print("%s.peak_reserved=%d" % (name, peak_reserved()))
    sys.stdout.flush()


def resnet50():
    import torchvision
    g = torch.Generator().manual_seed(1)
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(dev)
    x = torch.randn(64, 3, 224, 224, generator=g).to(dev)
    y = torch.randint(0, 1000, (64,), generator=g).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    lossf = torch.nn.CrossEntropyLoss()
    train("resnet50", model, opt, lambda: lossf(model(x), y))
    del model, opt, x, y


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    g = torch.Generator().manual_seed(2)
    torch.manual_seed(0)
    cfg = GPT2Config()
    if args.attn:
        cfg._attn_implementation = args.attn
    model = GPT2LMHeadModel(cfg).to(dev)
    print("gpt2.attn=%s" % getattr(model.config, "_attn_implementation", "?"))
    ids = torch.randint(0, cfg.vocab_size, (8, 1024), generator=g).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train("gpt2", model, opt, lambda: model(input_ids=ids, labels=ids).loss)
    del model, opt, ids


if args.model in ("resnet50", "all"):
    resnet50()
if args.model in ("gpt2", "all"):
    if args.mode == "default":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    else:
        gpupool.release()
    gpt2()
if args.model in ("bert", "llama"):
    infer(args.model)
if args.mode == "gpupool":
    s = gpupool.memory_stats(0)
    print("gpupool.allocs=%d gpupool.hits=%d gpupool.segment_allocs=%d gpupool.ooms=%d" % (
        s["gpupool.allocs"], s["gpupool.hits"], s["gpupool.segment_allocs"], s["gpupool.ooms"]))
