#!/usr/bin/env python3
"""What PyTorch does when a pluggable allocator returns NULL (GPU machine): the reason
gpupool_malloc throws a C++ exception on out-of-memory instead of returning NULL.

    python3 bench/gpu/pluggable_null.py

Builds a three-line allocator whose malloc always returns NULL, makes it PyTorch's allocator in a
child process, allocates 1 MiB and writes it; prints what PyTorch did at each step.
"""
import os
import subprocess
import sys
import tempfile
import textwrap

SRC = "#include <stddef.h>\n#include <sys/types.h>\n" \
      "void *null_malloc(ssize_t n, int d, void *s) { (void)n; (void)d; (void)s; return NULL; }\n" \
      "void null_free(void *p, ssize_t n, int d, void *s) { (void)p; (void)n; (void)d; (void)s; }\n"

CHILD = textwrap.dedent("""
    import sys, torch
    a = torch.cuda.memory.CUDAPluggableAllocator(sys.argv[1], "null_malloc", "null_free")
    torch.cuda.memory.change_current_allocator(a)
    try:
        x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
        print("allocate: no exception, data_ptr=%#x" % x.data_ptr(), flush=True)
    except Exception as e:
        print("allocate: %s: %s" % (type(e).__name__, str(e).splitlines()[0]), flush=True)
        sys.exit(0)
    try:
        x.fill_(1)
        torch.cuda.synchronize()
        print("write: no error", flush=True)
    except Exception as e:
        print("write: %s: %s" % (type(e).__name__, str(e).splitlines()[0]), flush=True)
    try:
        torch.ones(1, device="cuda")
        torch.cuda.synchronize()
        print("after: CUDA still usable", flush=True)
    except Exception as e:
        print("after: %s: %s" % (type(e).__name__, str(e).splitlines()[0]), flush=True)
    """)

with tempfile.TemporaryDirectory() as d:
    c, so = os.path.join(d, "null.c"), os.path.join(d, "libnull.so")
    with open(c, "w") as f:
        f.write(SRC)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", so, c], check=True)
    import torch
    print("torch=%s" % torch.__version__, flush=True)
    r = subprocess.run([sys.executable, "-c", CHILD, so], capture_output=True, text=True, timeout=120)
    sys.stdout.write(r.stdout)
    print("exit status: %d" % r.returncode)
    if r.returncode:
        print("stderr tail: " + " | ".join(r.stderr.strip().splitlines()[-3:]))
