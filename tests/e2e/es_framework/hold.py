"""A process whose PyTorch runs on expandable segments (torch, the stand-in next to this
file): takes MIB in tensors of 64 MiB, keeps KEEP_MIB of them in use and frees the rest (the
pages stay mapped in PyTorch's cache), prints "ready" and its figures, idles until SIGINT.
With --oom it takes tensors until PyTorch's own out-of-memory error and prints what it held.
e2e_es_holder.sh."""
import signal
import sys
import time

import torch

mib, keep = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "--oom" else 0
if "--oom" in sys.argv:
    n = 0
    try:
        while n < mib // 64:
            torch.cuda.alloc(64)
            n += 1
    except torch.OutOfMemoryError as e:
        print("oom tensors=%d reserved=%d error=%s" % (n, torch.cuda.memory_reserved(), e), flush=True)
        sys.exit(0)
    print("no oom tensors=%d reserved=%d" % (n, torch.cuda.memory_reserved()), flush=True)
    sys.exit(1)
for _ in range(mib // 64):
    torch.cuda.alloc(64)
torch.cuda.free_all()
for _ in range(keep // 64):
    torch.cuda.alloc(64)
print("ready reserved=%d allocated=%d" % (torch.cuda.memory_reserved(), torch.cuda.memory_allocated()), flush=True)
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
end = time.time() + 60
while not stop and time.time() < end:
    time.sleep(0.02)
print("emptied=%d reserved=%d allocated=%d" % (torch.cuda.emptied, torch.cuda.memory_reserved(),
                                                torch.cuda.memory_allocated()), flush=True)
