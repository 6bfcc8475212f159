#!/usr/bin/env python3
"""check_snapshot.py PICKLE [--require-torch] [--html OUT.html]

Checks a PyTorch memory snapshot (what torch.cuda.memory._dump_snapshot writes, or
gpupool-replay --torch-snapshot) in two ways:

1. Without PyTorch: the schema PyTorch's viewer reads (segments, blocks, device_traces,
   allocator_settings), blocks tiling their segments, the segment sums, and the history
   replayed the way the viewer's "Allocator State History" replays it (backwards from the
   final state: every freed block must exist, every block must lie in a live segment) and
   forwards from an empty allocator (when no event was dropped) to the same final state.
2. With PyTorch (torch.cuda._memory_viz, as on a GPU machine): segsum (which asserts that
   blocks add up), trace, trace_plot and segment_plot (the HTML of pytorch.org/memory_viz),
   written to --html when given.

Exit 0 when every check passes, 1 when one fails (the first failure is printed), 2 when the
file cannot be read as a pickle.
"""

import argparse
import pickle
import sys

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "snapshot", "oom"}
STATES = {"active_allocated", "active_pending_free", "inactive"}


class Bad(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Bad(what)


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_frames(fr, where):
    need(isinstance(fr, list), "%s: frames is not a list" % where)
    for f in fr:
        need(isinstance(f, dict) and isinstance(f.get("filename"), str) and _int(f.get("line"))
             and isinstance(f.get("name"), str), "%s: a frame lacks filename/line/name" % where)


def check_schema(s):
    """The keys and types PyTorch's readers use; blocks tile their segment."""
    need(isinstance(s, dict), "the snapshot is not a dict")
    for k in ("segments", "device_traces"):
        need(k in s, "no %r key" % k)
    need(isinstance(s["segments"], list), "segments is not a list")
    need(isinstance(s["device_traces"], list) and all(isinstance(t, list) for t in s["device_traces"]),
         "device_traces is not a list of lists")
    if "allocator_settings" in s:
        need(isinstance(s["allocator_settings"], dict), "allocator_settings is not a dict")
    ndev = len(s["device_traces"])
    seen = set()
    for i, seg in enumerate(s["segments"]):
        w = "segment %d" % i
        for k in ("device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream"):
            need(_int(seg.get(k)), "%s: %r missing or not an int" % (w, k))
        need(seg["segment_type"] in ("large", "small"), "%s: segment_type %r" % (w, seg.get("segment_type")))
        need(isinstance(seg.get("is_expandable"), bool), "%s: is_expandable not a bool" % w)
        need(isinstance(seg.get("segment_pool_id"), tuple) and len(seg["segment_pool_id"]) == 2,
             "%s: segment_pool_id is not a 2-tuple" % w)
        need(0 <= seg["device"] < max(ndev, 1) or not ndev, "%s: device %d has no trace list" % (w, seg["device"]))
        need((seg["device"], seg["address"]) not in seen, "%s: address listed twice" % w)
        seen.add((seg["device"], seg["address"]))
        check_frames(seg.get("frames", []), w)
        need(isinstance(seg.get("blocks"), list) and seg["blocks"], "%s: no blocks" % w)
        addr, alloc, active, req = seg["address"], 0, 0, 0
        for j, b in enumerate(seg["blocks"]):
            bw = "%s block %d" % (w, j)
            for k in ("size", "requested_size"):
                need(_int(b.get(k)) and b[k] >= 0, "%s: %r missing or negative" % (bw, k))
            need(b["size"] > 0, "%s: size 0" % bw)
            need(b.get("state") in STATES, "%s: state %r" % (bw, b.get("state")))
            if "address" in b:
                need(b["address"] == addr, "%s: address %#x, expected %#x (blocks must tile the segment)"
                     % (bw, b["address"], addr))
            need(b["requested_size"] <= b["size"], "%s: requested_size > size" % bw)
            check_frames(b.get("frames", []), bw)
            if b["state"] == "active_allocated":
                alloc += b["size"]
                req += b["requested_size"]
            if b["state"] != "inactive":
                active += b["size"]
            addr += b["size"]
        need(addr - seg["address"] == seg["total_size"], "%s: blocks add up to %d bytes, total_size %d"
             % (w, addr - seg["address"], seg["total_size"]))
        need(seg["allocated_size"] == alloc, "%s: allocated_size %d, blocks say %d" % (w, seg["allocated_size"], alloc))
        need(seg["active_size"] == active, "%s: active_size %d, blocks say %d" % (w, seg["active_size"], active))
        need(seg["requested_size"] == req, "%s: requested_size %d, blocks say %d" % (w, seg["requested_size"], req))
    for d, tr in enumerate(s["device_traces"]):
        for i, e in enumerate(tr):
            w = "device %d event %d" % (d, i)
            need(isinstance(e, dict) and e.get("action") in ACTIONS, "%s: action %r" % (w, e.get("action")))
            need(_int(e.get("size")) and e["size"] >= 0, "%s: size" % w)
            need(_int(e.get("stream")), "%s: stream" % w)
            need(_int(e.get("addr") if e["action"] != "oom" else e.get("device_free")), "%s: addr" % w)
            if "time_us" in e:
                need(_int(e["time_us"]), "%s: time_us" % w)
            check_frames(e.get("frames", []), w)


# Mapped ranges of expandable segments (segment_map/segment_unmap, gpupool's virtual-memory
# segments as PyTorch's expandable segments): a sorted list of disjoint [lo, hi), merged.

def _iv_add(ivs, lo, hi, w):
    need(not any(a < hi and lo < b for a, b in ivs), "%s: [%#x, %#x) mapped twice" % (w, lo, hi))
    ivs.append((lo, hi))
    ivs.sort()
    out = []
    for a, b in ivs:
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    ivs[:] = out


def _iv_remove(ivs, lo, hi, w):
    for i, (a, b) in enumerate(ivs):
        if a <= lo and hi <= b:
            ivs[i:i + 1] = [x for x in ((a, lo), (hi, b)) if x[0] < x[1]]
            return
    need(False, "%s: [%#x, %#x) is not mapped" % (w, lo, hi))


def _iv_has(ivs, x):
    return any(a <= x < b for a, b in ivs)


def _final_mapped(s, dev):
    """The final state's expandable segments as mapped ranges."""
    ivs = []
    for seg in s["segments"]:
        if seg["device"] == dev and seg["is_expandable"]:
            _iv_add(ivs, seg["address"], seg["address"] + seg["total_size"], "final state")
    return ivs


def _final(s, dev):
    segs = {seg["address"]: seg["total_size"] for seg in s["segments"]
            if seg["device"] == dev and not seg["is_expandable"]}
    blocks = {}
    for seg in s["segments"]:
        if seg["device"] != dev:
            continue
        a = seg["address"]
        for b in seg["blocks"]:
            if b["state"] != "inactive":
                blocks[a] = b["state"]
            a += b["size"]
    return segs, blocks


def _in_segment(segs, addr):
    return any(a <= addr < a + n for a, n in segs.items())


def check_backward(s, dev):
    """The viewer's Allocator State History: from the final state back to the first event."""
    segs, blocks = _final(s, dev)
    mapped = _final_mapped(s, dev)
    pending = {a for a, st in blocks.items() if st == "active_pending_free"}
    live = set(blocks)
    for i in range(len(s["device_traces"][dev]) - 1, -1, -1):
        e = s["device_traces"][dev][i]
        a, w = e.get("addr"), "device %d event %d (%s)" % (dev, i, e["action"])
        if e["action"] == "free_completed":
            need(a not in live, "%s: the block is live after its free completed" % w)
            need(_in_segment(segs, a) or _iv_has(mapped, a), "%s: block %#x lies in no segment" % (w, a))
            live.add(a)
            pending.add(a)
        elif e["action"] == "free_requested":
            need(a in live and a in pending, "%s: no block %#x freed and pending here" % (w, a))
            pending.discard(a)
        elif e["action"] == "alloc":
            need(a in live and a not in pending, "%s: block %#x is not live after its alloc" % (w, a))
            live.discard(a)
        elif e["action"] == "segment_free":
            need(a not in segs, "%s: segment %#x is live after it was freed" % (w, a))
            segs[a] = e["size"]
        elif e["action"] == "segment_alloc":
            need(segs.get(a) == e["size"], "%s: segment %#x of %d bytes is not live after its alloc" % (w, a, e["size"]))
            del segs[a]
            need(not any(a <= b < a + e["size"] for b in live), "%s: a block outlives segment %#x" % (w, a))
        elif e["action"] == "segment_unmap":
            _iv_add(mapped, a, a + e["size"], w)
        elif e["action"] == "segment_map":
            _iv_remove(mapped, a, a + e["size"], w)
            need(not any(a <= b < a + e["size"] for b in live), "%s: a block outlives the map at %#x" % (w, a))


def check_forward(s, dev):
    """From an empty allocator through every event to the final state. Returns the peaks of
    reserved bytes (segments) and of requested bytes (alloc to free_requested)."""
    segs, live, pending, mapped = {}, {}, set(), []
    reserved = requested = peak_res = peak_req = 0
    for i, e in enumerate(s["device_traces"][dev]):
        a, w = e.get("addr"), "device %d event %d (%s)" % (dev, i, e["action"])
        if e["action"] == "segment_alloc":
            need(a not in segs, "%s: segment %#x allocated twice" % (w, a))
            segs[a] = e["size"]
            reserved += e["size"]
        elif e["action"] == "segment_free":
            need(segs.get(a) == e["size"], "%s: no segment %#x of %d bytes" % (w, a, e["size"]))
            need(not any(a <= b < a + e["size"] for b in live), "%s: segment %#x freed with live blocks" % (w, a))
            del segs[a]
            reserved -= e["size"]
        elif e["action"] == "segment_map":
            _iv_add(mapped, a, a + e["size"], w)
            reserved += e["size"]
        elif e["action"] == "segment_unmap":
            _iv_remove(mapped, a, a + e["size"], w)
            need(not any(a <= b < a + e["size"] for b in live), "%s: chunks at %#x unmapped under a live block"
                 % (w, a))
            reserved -= e["size"]
        elif e["action"] == "alloc":
            need(a not in live, "%s: block %#x allocated twice" % (w, a))
            need(_in_segment(segs, a) or _iv_has(mapped, a), "%s: block %#x lies in no segment" % (w, a))
            live[a] = e["size"]
            requested += e["size"]
        elif e["action"] == "free_requested":
            need(a in live and a not in pending, "%s: free of %#x, not allocated" % (w, a))
            need(live[a] == e["size"], "%s: size %d, allocated as %d" % (w, e["size"], live[a]))
            pending.add(a)
            requested -= e["size"]
        elif e["action"] == "free_completed":
            need(a in pending, "%s: %#x completed without a free_requested" % (w, a))
            pending.discard(a)
            del live[a]
        peak_res, peak_req = max(peak_res, reserved), max(peak_req, requested)
    fsegs, fblocks = _final(s, dev)
    need(segs == fsegs, "device %d: the events leave %d segments, the final state has %d"
         % (dev, len(segs), len(fsegs)))
    need(mapped == _final_mapped(s, dev), "device %d: the events leave other mapped ranges than the final "
         "state's expandable segments" % dev)
    want = {a: ("active_pending_free" if a in pending else "active_allocated") for a in live}
    need(want == fblocks, "device %d: the events leave %d active blocks (%d pending), the final state "
         "has %d" % (dev, len(want), len(pending), len(fblocks)))
    return peak_res, peak_req


def check_torch(s, html):
    import torch.cuda._memory_viz as v  # noqa: E402 (PyTorch's own viewer code)
    summary = v.segsum(s)
    need("total_reserved" in summary, "segsum printed no total")
    text = v.trace(s)
    need(text, "trace() printed nothing")
    page = v.trace_plot(s)
    need("add_local_files" in page, "trace_plot() made no viewer page")
    seg_page = v.segment_plot(s)
    need("add_local_files" in seg_page, "segment_plot() made no viewer page")
    if html:
        with open(html, "w") as f:
            f.write(page)
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pickle")
    ap.add_argument("--require-torch", action="store_true",
                    help="fail when torch.cuda._memory_viz cannot be imported")
    ap.add_argument("--html", help="write trace_plot's page here (open it in a browser)")
    a = ap.parse_args(argv)
    try:
        with open(a.pickle, "rb") as f:
            s = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as e:
        print("check_snapshot: %s: cannot read it as a pickle: %s" % (a.pickle, e), file=sys.stderr)
        return 2
    try:
        check_schema(s)
        dropped = s.get("gpupool", {}).get("dropped_events", None)
        for dev in range(len(s["device_traces"])):
            check_backward(s, dev)
            if dropped == 0:
                check_forward(s, dev)
        nev = sum(len(t) for t in s["device_traces"])
        print("schema and history: ok (%d segments, %d events, %d devices)"
              % (len(s["segments"]), nev, len(s["device_traces"])))
        try:
            import torch.cuda._memory_viz  # noqa: F401
        except ImportError as e:
            if a.require_torch:
                raise Bad("torch.cuda._memory_viz cannot be imported: %s" % e)
            print("PyTorch's viewer: skipped (torch is not importable here)")
            return 0
        import torch
        summary = check_torch(s, a.html)
        print("PyTorch %s viewer: segsum, trace, trace_plot and segment_plot ok" % torch.__version__)
        print("\n".join(ln for ln in summary.splitlines() if ln.startswith(("segments:", "total_"))))
    except Bad as e:
        print("check_snapshot: %s: %s" % (a.pickle, e), file=sys.stderr)
        return 1
    except (AssertionError, KeyError, TypeError) as e:
        print("check_snapshot: %s: PyTorch's viewer code failed: %r" % (a.pickle, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
