#!/usr/bin/env python3
"""Which torch.cuda memory calls PyTorch refuses, or ignores, once gpupool is its pluggable
allocator, and gpupool's own answers beside them. On a GPU machine:

    GPUPOOL_CONF=trace:/tmp/pluggable.csv scripts/gpupool-run --torch python3 bench/gpu/pluggable_refusals.py

(without gpupool-run --torch it calls gpupool.use_as_torch_allocator() itself). Prints one
line per call: 'refused: <PyTorch's message>' or 'ran'; then gpupool.memory_summary() and,
when the process records a trace, gpupool.dump_snapshot() checked with check_snapshot.py.
Exit 1 when gpupool did not become PyTorch's allocator or a gpupool call failed.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import gpupool  # noqa: E402

hook = sys.modules.get("sitecustomize")
if not (hook and getattr(hook, "STATE", None) is not None):
    hook = None
import torch  # noqa: E402  (gpupool-run --torch switches the allocator here)

if hook is None:
    gpupool.use_as_torch_allocator()
elif not hook.STATE["active"]:
    print("gpupool-run --torch did not switch the allocator: %s" % hook.STATE["error"])
    sys.exit(1)
print("PyTorch %s, allocator: %s" % (torch.__version__,
                                      "gpupool via gpupool-run --torch" if hook else "gpupool"))

x = torch.randn(1 << 22, device="cuda")
y = x * 2
torch.cuda.synchronize()
st = gpupool.memory_stats()
if not st or st["allocation.all.allocated"] < 2:
    print("gpupool served no allocation: %r" % st)
    sys.exit(1)

s = torch.cuda.Stream()


def conv_benchmark():
    torch.backends.cudnn.benchmark = True
    c = torch.nn.Conv2d(16, 16, 3).cuda()
    c(torch.randn(8, 16, 32, 32, device="cuda"))
    torch.cuda.synchronize()


checks = [
    ("torch.cuda.memory_stats()", torch.cuda.memory_stats),
    ("torch.cuda.memory_allocated()", torch.cuda.memory_allocated),
    ("torch.cuda.max_memory_reserved()", torch.cuda.max_memory_reserved),
    ("torch.cuda.memory_summary()", torch.cuda.memory_summary),
    ("torch.cuda.reset_peak_memory_stats()", torch.cuda.reset_peak_memory_stats),
    ("torch.cuda.reset_accumulated_memory_stats()", torch.cuda.reset_accumulated_memory_stats),
    ("torch.cuda.memory_snapshot()", torch.cuda.memory_snapshot),
    ("torch.cuda.memory._record_memory_history()", torch.cuda.memory._record_memory_history),
    ("torch.cuda.empty_cache()", torch.cuda.empty_cache),
    ("torch.cuda.set_per_process_memory_fraction(0.5)", lambda: torch.cuda.set_per_process_memory_fraction(0.5)),
    ("tensor.record_stream(stream)", lambda: y.record_stream(s)),
    ("cudnn.benchmark convolution", conv_benchmark),
]
for name, fn in checks:
    before = gpupool.memory_stats()["reserved_bytes.all.current"]
    try:
        fn()
        after = gpupool.memory_stats()["reserved_bytes.all.current"]
        print("%-48s ran (gpupool reserved %d -> %d bytes)" % (name, before, after))
    except (RuntimeError, AssertionError) as e:
        print("%-48s refused: %s" % (name, str(e).strip().splitlines()[0][:110]))

print(gpupool.memory_summary(abbreviated=True))
released = gpupool.release()
print("gpupool.release(): %d bytes back to CUDA" % released)
try:
    path = gpupool.dump_snapshot("/tmp/gpupool-live-snapshot.pickle")
except gpupool.GpupoolError as e:
    print("dump_snapshot: %s" % e)
else:
    sys.path.insert(0, HERE)
    import check_snapshot
    rc = check_snapshot.main([path, "--require-torch"])
    print("dump_snapshot: %s, check_snapshot exit %d" % (path, rc))
    sys.exit(rc)
