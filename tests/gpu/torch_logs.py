"""A small training script written for plain PyTorch, that logs its memory as scripts do:
torch.backends.cudnn.benchmark = True, a small conv net, torch.cuda.reset_peak_memory_stats()
at each step's start and torch.cuda.max_memory_allocated() at its end. Meant to run under
`gpupool-run --torch` (gpupool as PyTorch's allocator, where PyTorch itself refuses these
calls and the autotuner; scripts/gpu-suite, check torch/logs-torch-mode) and unchanged without
it. Under gpupool it also checks torch.cuda's figures against gpupool.memory_stats().

Checks, each step: right after the reset the peak equals the current figure (allocated and
reserved); the step's peak is at least what is allocated at its end and more than at its start
(the activations); no out-of-memory; the loss is finite; and under gpupool, torch.cuda's
allocated, reserved and their peaks equal gpupool's. Ends with one line of figures.
Usage: python3 torch_logs.py [STEPS]. Exit 0 pass, 1 fail, 77 without a GPU."""
import math
import sys

import torch


def fail(msg):
    print("FAIL torch_logs: " + msg, flush=True)
    sys.exit(1)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    gp = sys.modules.get("gpupool") if getattr(torch, "_gpupool_answered", False) else None
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1, stride=2), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 128, 3, padding=1, stride=2), torch.nn.BatchNorm2d(128), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(128, 3, 64, 64, device=dev)
    y = torch.randint(0, 10, (128,), device=dev)
    peaks = []
    for step in range(steps):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        if torch.cuda.max_memory_allocated() != start:
            fail("step %d: max_memory_allocated() %d right after reset_peak_memory_stats(), allocated %d"
                 % (step, torch.cuda.max_memory_allocated(), start))
        if torch.cuda.max_memory_reserved() != torch.cuda.memory_reserved():
            fail("step %d: max_memory_reserved() %d right after the reset, reserved %d"
                 % (step, torch.cuda.max_memory_reserved(), torch.cuda.memory_reserved()))
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        value = loss.item()
        peak, alloc = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
        reserved, peak_reserved = torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved()
        print("step %d loss %.6f max_memory_allocated %d memory_allocated %d memory_reserved %d "
              "max_memory_reserved %d" % (step, value, peak, alloc, reserved, peak_reserved), flush=True)
        if not math.isfinite(value):
            fail("step %d: loss %r" % (step, value))
        if peak < alloc or peak <= start:
            fail("step %d: peak %d below what is allocated (%d at the start, %d at the end)" % (step, peak, start, alloc))
        if peak_reserved < reserved:
            fail("step %d: peak reserved %d below reserved %d" % (step, peak_reserved, reserved))
        stats = torch.cuda.memory_stats()
        if stats.get("num_ooms", 0):
            fail("step %d: %d out-of-memory errors" % (step, stats["num_ooms"]))
        if gp is not None:
            g = gp.memory_stats()
            want = (g["allocated_bytes.all.current"], g["allocated_bytes.all.peak"],
                    g["reserved_bytes.all.current"], g["reserved_bytes.all.peak"])
            if (alloc, peak, reserved, peak_reserved) != want:
                fail("step %d: torch.cuda says allocated/peak/reserved/peak %s, gpupool.memory_stats() %s"
                     % (step, (alloc, peak, reserved, peak_reserved), want))
        peaks.append(peak)
    print("torch_logs: %d steps, allocator %s, cudnn.benchmark %s, per-step peak allocated %.1f-%.1f MiB, "
          "allocated %.1f MiB, reserved %.1f MiB (peak %.1f MiB), last loss %.4f"
          % (steps, "gpupool (pluggable)" if gp else torch.cuda.get_allocator_backend(),
             torch.backends.cudnn.benchmark, min(peaks) / 2**20, max(peaks) / 2**20,
             torch.cuda.memory_allocated() / 2**20, torch.cuda.memory_reserved() / 2**20,
             torch.cuda.max_memory_reserved() / 2**20, value), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
