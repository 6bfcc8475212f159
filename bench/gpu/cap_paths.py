"""A cap that holds on every path (docs/driver.md, "Every path counts"), on a real GPU: a
framework whose memory never passes through cudaMalloc, under GPUPOOL_CONF=limit:..., keeps
allocating 256 MiB arrays until its own out-of-memory error.

  python3 cap_paths.py jax|jax-prealloc|torch-expandable [--hold] [--max-gib G] [--fraction F]

jax               XLA_PYTHON_CLIENT_PREALLOCATE=false (set here): XLA grows its BFC arena with
                  the driver's virtual memory API as arrays come
jax-prealloc      JAX's default: one arena of 75% of what cuMemGetInfo reports
torch-expandable  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (set here)
Prints key=value lines: each array's count and the process's page figures (unpooled bytes by
kind, limit) read live; at the end the error's type and first line, and the most held.
--hold keeps the arrays and sleeps 30 s before the end, for gpupool-stat from outside.
--fraction F sets XLA_PYTHON_CLIENT_MEM_FRACTION (JAX's share of what cuMemGetInfo reports).
--max-gib G makes the run a check (scripts/gpu-suite sharing): exit 0 only when the framework
stopped with its own out-of-memory error (torch.OutOfMemoryError; JAX's RESOURCE_EXHAUSTED)
holding at most G GiB, and gpupool's page counted its memory; else 1. Exit status without it:
0 when the framework's error came, 1 when it never did; 77 when the framework is not
installed; 2 bad arguments."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpupool  # noqa: E402

CHUNK = 256 << 20


def page():
    try:
        s = gpupool.stats(os.getpid()).get(0)
    except Exception as e:  # noqa: BLE001
        return {"page": "none (%s)" % type(e).__name__}
    if not s:
        return {"page": "none"}
    keys = ("limit_bytes", "reserved_bytes", "unpooled_bytes", "unpooled_bytes_peak", "unpooled_vmm_bytes",
            "unpooled_mempool_bytes", "unpooled_refusals")
    return {k: s.get(k, 0) for k in keys}


def say(**kv):
    print(" ".join("%s=%s" % (k, v) for k, v in kv.items()), flush=True)


def own_error(mode, err):
    """The framework's own out-of-memory error, as its users see it."""
    if err is None:
        return False
    if mode.startswith("jax"):
        return "RESOURCE_EXHAUSTED" in str(err) or "out of memory" in str(err).lower()
    return type(err).__name__ == "OutOfMemoryError"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["jax", "jax-prealloc", "torch-expandable"])
    ap.add_argument("--hold", action="store_true")
    ap.add_argument("--max-gib", type=float)
    ap.add_argument("--fraction", type=float)
    a = ap.parse_args()
    mode, hold = a.mode, a.hold
    if a.fraction is not None:
        if not 0 < a.fraction <= 1:
            ap.error("--fraction must be in (0, 1]")
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "%g" % a.fraction
    keep, err, most = [], None, {}
    if mode.startswith("jax"):
        if mode == "jax":
            os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        try:
            import jax.numpy as jnp
        except ImportError as e:
            say(skip=1, reason="no jax (%s)" % e)
            return 77
        try:
            for i in range(10000):
                arr = jnp.ones((CHUNK // 4,), dtype=jnp.float32)
                arr.block_until_ready()
                keep.append(arr)  # (not `a`: the arguments keep that name)
                p = page()
                most = p
                say(arrays=i + 1, **p)
        except Exception as e:  # noqa: BLE001: JAX's own error is what is measured
            err = e
    else:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        try:
            import torch
        except ImportError as e:
            say(skip=1, reason="no torch (%s)" % e)
            return 77
        try:
            for i in range(10000):
                t = torch.ones(CHUNK // 4, dtype=torch.float32, device="cuda")
                torch.cuda.synchronize()
                keep.append(t)
                p = page()
                most = p
                say(arrays=i + 1, **p)
        except Exception as e:  # noqa: BLE001
            err = e
    held = len(keep) * CHUNK
    say(final=1, held_bytes=held, held_gib="%.2f" % (held / (1 << 30)), **most)
    after = page()  # the refusal, if gpupool refused the growth
    say(after=1, **{k: v for k, v in after.items() if k in ("unpooled_bytes_peak", "unpooled_refusals", "page")})
    if err is not None:
        first = (str(err).strip().splitlines() or [""])[0][:300]
        say(error=type(err).__module__ + "." + type(err).__name__)
        print("message: " + first, flush=True)
    if hold:
        time.sleep(30)
    if a.max_gib is None:
        return 0 if err is not None else 1
    counted = int(after.get("unpooled_bytes_peak", 0) or 0) + int(after.get("reserved_bytes", 0) or 0) > 0
    why = ("no out-of-memory error" if err is None else "not the framework's own error" if not own_error(mode, err)
           else "held more than %g GiB" % a.max_gib
           if max(held, int(after.get("unpooled_bytes_peak", 0) or 0)) > a.max_gib * (1 << 30)
           else "gpupool's page counted nothing" if not counted else "")
    say(verdict="fail" if why else "pass", held_gib="%.2f" % (held / (1 << 30)),
        refusals=after.get("unpooled_refusals", 0), why=(why or "-").replace(" ", "_"))
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main())
