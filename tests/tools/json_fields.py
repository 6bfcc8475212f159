#!/usr/bin/env python3
"""docs/json.md's field table against what the tools write: `gpupool-stat --json` on a live
page (the test writer) and a program's exit report under the shim over the fake runtime
(GPUPOOL_REPORT=FILE.json). Each document's set of field paths must equal the rows whose
`in` is `both` or that document, and each value must have the documented type.
usage: json_fields.py DOC GPUPOOL_STAT STAT_WRITER PRELOAD FAKE_DIR PROGRAM"""
import json
import os
import subprocess
import sys
import tempfile
import time

doc, stat, writer, preload, fake, prog = sys.argv[1:7]
TYPES = {"integer": int, "boolean": bool, "string": str, "array": list, "object": dict}


def documented():
    rows, inside = {}, False
    for ln in open(doc, encoding="utf-8"):
        if "<!-- json-fields:begin -->" in ln:
            inside = True
        elif "<!-- json-fields:end -->" in ln:
            inside = False
        elif inside and ln.startswith("| `"):
            cells = [c.strip() for c in ln.strip().strip("|").split("|")]
            field, where, typ = cells[0].strip("`"), cells[1], cells[2]
            if field in rows or where not in ("both", "listing", "report") or any(
                    t not in TYPES for t in typ.split(" or ") if t != "null"):
                sys.exit("FAIL: %s: bad row: %s" % (doc, ln.strip()))
            rows[field] = (where, typ)
    if not rows:
        sys.exit("FAIL: no field table between the json-fields markers of " + doc)
    return rows


def paths(v, prefix="", out=None):
    """{path: [values]} of every key, lists flattened as NAME[]."""
    out = {} if out is None else out
    if isinstance(v, dict):
        for k, x in v.items():
            p = prefix + k
            out.setdefault(p, []).append(x)
            paths(x, p + ".", out)
    elif isinstance(v, list):
        for x in v:
            paths(x, prefix[:-1] + "[].", out)
    return out


def check(name, text, rows):
    found = paths(json.loads(text))
    want = {f for f, (where, _) in rows.items() if where in ("both", name)}
    bad = 0
    for f in sorted(set(found) - want):
        print("FAIL: %s writes %s, which docs/json.md does not list (for %s)" % (name, f, name))
        bad += 1
    for f in sorted(want - set(found)):
        print("FAIL: docs/json.md lists %s for %s, which it does not write" % (f, name))
        bad += 1
    for f in sorted(want & set(found)):
        # "integer or null": either
        ts = [TYPES[t] for t in rows[f][1].split(" or ") if t != "null"]
        nullable = "null" in rows[f][1].split(" or ")
        for x in found[f]:
            if x is None and nullable:
                continue
            if not any(isinstance(x, t) and not (t is int and isinstance(x, bool)) for t in ts):
                print("FAIL: %s: %s is %r, documented as %s" % (name, f, x, rows[f][1]))
                bad += 1
                break
    print("%s: %d fields, %s" % (name, len(found), "all documented" if not bad else "%d problems" % bad))
    return bad


rows = documented()
bad = 0
with tempfile.TemporaryDirectory() as d:
    env = dict(os.environ, GPUPOOL_SHM_DIR=d)
    out = open(os.path.join(d, "w.out"), "w+")
    w = subprocess.Popen([writer, "300"], env=env, stdout=out, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            out.seek(0)
            if "ready" in out.read():
                break
            time.sleep(0.02)
        else:
            sys.exit("FAIL: the writer is not ready")
        r = subprocess.run([stat, "--json"], env=env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            sys.exit("FAIL: gpupool-stat --json: exit %d: %s" % (r.returncode, r.stderr))
        bad += check("listing", r.stdout, rows)
    finally:
        w.terminate()
        w.wait()
    report = os.path.join(d, "report.json")
    env.update(LD_PRELOAD=preload, LD_LIBRARY_PATH=fake, GPUPOOL_REPORT=report, GPUPOOL_CONF="limit:64M")
    r = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or not os.path.exists(report):
        sys.exit("FAIL: %s under the shim: exit %d, report %s: %s" % (
            prog, r.returncode, "written" if os.path.exists(report) else "missing", r.stderr[-2000:]))
    bad += check("report", open(report).read(), rows)
sys.exit(1 if bad else 0)
