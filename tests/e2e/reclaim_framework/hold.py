"""A process whose idle memory sits in a framework's cache (torch, the stand-in next to this
file): takes MIB through it, prints "ready", idles until SIGINT. e2e_reclaim.sh."""
import signal
import sys
import time

import torch

torch.cuda.hold(int(sys.argv[1]))
print("ready", flush=True)
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
end = time.time() + float(sys.argv[2] if len(sys.argv) > 2 else 60)
while not stop and time.time() < end:
    time.sleep(0.02)
print("emptied=%d cached=%d" % (torch.cuda.emptied, len(torch.cuda.cached)), flush=True)
