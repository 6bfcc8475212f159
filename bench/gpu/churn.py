"""One of the processes churning a GPU (bench/gpu/churn.sh): rounds until SECONDS, each
taking FRACTION of the card in PIECE_GIB tensors, filling each with the round's number and
checking it, freeing them (into PyTorch's cache, PyTorch's default allocator) and idling
0..IDLE_MS. A tensor PyTorch cannot get (torch.OutOfMemoryError, after PyTorch emptied its
own cache and tried again) ends the round as an out of memory; its tensors go back to the
cache. Prints "rounds=R ooms=O allocs=A wrong=W waits=w1,..." (each allocation's wait in ms,
those over 1 ms) for bench/churn_table.py. Usage: churn.py FRACTION PIECE_GIB SECONDS IDLE_MS"""
import os
import random
import sys
import time

import torch


def main():
    fraction, piece_gib, seconds, idle_ms = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    total = torch.cuda.get_device_properties(0).total_memory
    piece = int(piece_gib * (1 << 30))
    n = max(1, int(total * fraction) // piece)
    rng = random.Random(os.getpid())
    rounds = ooms = allocs = wrong = 0
    waits = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        held = []
        oom = False
        for _ in range(n):
            t0 = time.monotonic()
            try:
                held.append(torch.empty(piece // 4, dtype=torch.float32, device="cuda"))
            except torch.OutOfMemoryError:
                oom = True
            ms = (time.monotonic() - t0) * 1e3
            allocs += 1
            if ms > 1:
                waits.append("%.0f" % ms)
            if oom:
                break
        v = float(rounds % 251)
        try:
            for t in held:
                t.fill_(v)
            for t in held:  # no data wrong: each tensor holds the round's number only (min and
                # max: reductions to one number, no temporary as large as the tensor)
                if float(t.amin()) != v or float(t.amax()) != v:
                    wrong += 1
            torch.cuda.synchronize()
        except torch.OutOfMemoryError:
            oom = True  # a reduction's few bytes refused: the GPU is full to the byte
        del held  # into PyTorch's cache
        if oom:
            ooms += 1
        else:
            rounds += 1
        time.sleep(rng.randint(0, idle_ms) / 1000)
    print("rounds=%d ooms=%d allocs=%d wrong=%d waits=%s" % (rounds, ooms, allocs, wrong, ",".join(waits)), flush=True)


if __name__ == "__main__":
    main()
