"""A cap that holds on every path (docs/driver.md, "Every path counts"), on a real GPU: a
framework whose memory never passes through cudaMalloc, under GPUPOOL_CONF=limit:..., keeps
allocating 256 MiB arrays until its own out-of-memory error.

  python3 cap_paths.py jax|jax-prealloc|torch-expandable [--hold]

jax               XLA_PYTHON_CLIENT_PREALLOCATE=false (set here): XLA grows its BFC arena with
                  the driver's virtual memory API as arrays come
jax-prealloc      JAX's default: one arena of 75% of what cuMemGetInfo reports
torch-expandable  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (set here)
Prints key=value lines: each array's count and the process's page figures (unpooled bytes by
kind, limit) read live; at the end the error's type and first line, and the most held.
--hold keeps the arrays and sleeps 30 s before the end, for gpupool-stat from outside."""
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


def main():
    mode = sys.argv[1]
    hold = "--hold" in sys.argv
    keep, err, most = [], None, {}
    if mode.startswith("jax"):
        if mode == "jax":
            os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        import jax.numpy as jnp
        try:
            for i in range(10000):
                a = jnp.ones((CHUNK // 4,), dtype=jnp.float32)
                a.block_until_ready()
                keep.append(a)
                p = page()
                most = p
                say(arrays=i + 1, **p)
        except Exception as e:  # noqa: BLE001: JAX's own error is what is measured
            err = e
    else:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        import torch
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
    if err is not None:
        first = (str(err).strip().splitlines() or [""])[0][:300]
        say(error=type(err).__module__ + "." + type(err).__name__)
        print("message: " + first, flush=True)
    if hold:
        time.sleep(30)
    return 0 if err is not None else 1


if __name__ == "__main__":
    sys.exit(main())
