"""A process whose idle memory sits in a framework's cache (torch, the stand-in next to this
file): takes MIB through it, prints "ready", idles until SIGINT. e2e_reclaim.sh."""
import ctypes
import os
import signal
import sys
import time

import torch

if os.environ.get("RECLAIM_RECURSION"):
    sys.setrecursionlimit(int(os.environ["RECLAIM_RECURSION"]))

torch.cuda.hold(int(sys.argv[1]))
print("ready", flush=True)
if os.environ.get("RECLAIM_HOLD_GIL"):
    # a C call that keeps the interpreter's lock (ctypes.PyDLL does not release it)
    ctypes.PyDLL(None).sleep(int(os.environ["RECLAIM_HOLD_GIL"]))
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
end = time.time() + float(sys.argv[2] if len(sys.argv) > 2 else 60)
while not stop and time.time() < end:
    time.sleep(0.02)
print("emptied=%d cached=%d" % (torch.cuda.emptied, len(torch.cuda.cached)), flush=True)
if os.environ.get("RECLAIM_EXIT_MARK"):  # the interpreter's end begins now
    print("exiting=%.3f" % time.monotonic(), flush=True)
