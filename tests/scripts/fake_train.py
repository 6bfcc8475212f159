#!/usr/bin/env python3
"""A stand-in for a training script, for tests of scripts/gpupool-maxbatch (no GPU).

fake_train.py BATCH. Behaviour from the environment:
  FAKE_OOM_ABOVE=N   batch > N "runs out of memory": writes a gpupool-like JSON report with
                     ooms=1 to $GPUPOOL_REPORT, prints PyTorch's OOM text, exits 1
  FAKE_CRASH_AT=N    batch >= N fails with an error that is not OOM (checked first), exit 1
  FAKE_NO_REPORT=1   write no report (like a program killed before its exit report)
  FAKE_GPUPOOL_TEXT=1  the OOM text is gpupool's (pluggable allocator, the C++ exception
                     killing the process) instead of PyTorch's
  FAKE_RETRIED=1     successful runs report ooms=1 too (an OOM the program recovered from)
  FAKE_SLEEP_AT=N    batch >= N sleeps 60 s (for --timeout)
  FAKE_LOG=path      appends "BATCH GPUPOOL_CONF LD_PRELOAD" per run
  FAKE_WARNING=TEXT  prints "gpupool: warning: TEXT" on stderr, as the shim does
  FAKE_LIMIT_IGNORED=1  the report's limit_bytes is 0 whatever GPUPOOL_CONF says (a limit
                     that did not take effect)
Otherwise exits 0 with ooms=0 and reserved_bytes_peak = BATCH MiB; the report's limit_bytes
is GPUPOOL_CONF's limit (sizes with K/M/G/T; a percentage of an 80 GiB device).
"""
import json
import os
import sys
import time

batch = int(sys.argv[1])
env = os.environ.get
if env("FAKE_LOG"):
    with open(env("FAKE_LOG"), "a") as f:
        f.write("%d %s %s\n" % (batch, env("GPUPOOL_CONF", "-"), env("LD_PRELOAD", "-").split(" ")[0]))


def conf_limit():
    limit = 0
    for item in env("GPUPOOL_CONF", "").split(","):
        k, _, v = item.partition(":")
        if k.strip() != "limit" or v.strip().lower() in ("", "none"):
            continue
        v = v.strip()
        if v.endswith("%"):
            limit = (80 << 30) * int(v[:-1]) // 100
            continue
        num = v.rstrip("BbIi")
        shift = {"K": 10, "M": 20, "G": 30, "T": 40}.get(num[-1:].upper(), 0)
        limit = int(float(num[:-1] if shift else num) * (1 << shift))
    return 0 if env("FAKE_LIMIT_IGNORED") == "1" else limit


if env("FAKE_WARNING"):
    print("gpupool: warning: " + env("FAKE_WARNING"), file=sys.stderr)


def report(ooms, peak):
    path = env("GPUPOOL_REPORT")
    if not path or env("FAKE_NO_REPORT") == "1":
        return
    dev = {"device": 0, "consistent": True, "limit_bytes": conf_limit(), "reserved_bytes": 0,
           "reserved_bytes_peak": peak, "ooms": ooms, "oom_retries": ooms}
    doc = {"version": 1, "processes": [{"pid": os.getpid(), "comm": "fake_train", "stale": False,
                                         "ndevices": 1, "devices": [dev]}]}
    with open(path, "w") as f:
        json.dump(doc, f)


if env("FAKE_SLEEP_AT") and batch >= int(env("FAKE_SLEEP_AT")):
    time.sleep(60)
if env("FAKE_CRASH_AT") and batch >= int(env("FAKE_CRASH_AT")):
    report(0, batch << 20)
    print("Traceback (most recent call last):\n  File \"train.py\", line 1\n"
          "ValueError: shapes do not match at batch %d" % batch, file=sys.stderr)
    sys.exit(1)
limit = int(env("FAKE_OOM_ABOVE", "1000000000"))
if batch > limit:
    report(1, limit << 20)
    if env("FAKE_GPUPOOL_TEXT") == "1":
        print("terminate called after throwing an instance of 'std::runtime_error'\n  what():  gpupool: "
              "device 0: out of memory allocating 2.0 GiB (reserved 7.5 GiB, in use 7.0 GiB, limit 8.0 GiB)",
              file=sys.stderr)
        sys.exit(134)
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", file=sys.stderr)
    sys.exit(1)
report(1 if env("FAKE_RETRIED") == "1" else 0, batch << 20)
print("loss 1.0")
