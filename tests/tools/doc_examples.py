"""The examples of gpupool-stat's output in docs/stats.md and docs/json.md are its real output:
each fenced block after a line `<!-- example: NAME -->` is made here by running gpupool-stat
over live pages of the test writer (tests/tools/stat_writer_main.c: one live process, one
gone, one junk file), cut the same way every time.

  doc_examples.py GPUPOOL_STAT STAT_WRITER           check: each block equals what the tools
                                                      write now, up to the figures (numbers,
                                                      and the spaces that align them)
  doc_examples.py GPUPOOL_STAT STAT_WRITER --write   write the blocks (ninja doc-examples)

The check compares the JSON documents' "version" exactly: an example that shows another
version than the tools write fails. It fails too on a block whose NAME it does not make,
and on a NAME that no document has.
"""

import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

STAT, WRITER = sys.argv[1:3]
WRITE = sys.argv[3:] == ["--write"]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOCS = [os.path.join(ROOT, "docs", "stats.md"), os.path.join(ROOT, "docs", "json.md")]
MARK = re.compile(r"^<!-- example: ([a-z0-9-]+) -->\n```\n(.*?)```\n", re.M | re.S)


# the user the examples show is "alice", whoever runs them
USER = pwd.getpwuid(os.geteuid()).pw_name


def as_alice(out):
    """The runner's name as alice's: in the table's USER column (its padding kept: the columns
    stay aligned), JSON's "user", the Prometheus label, the PID view's first line."""
    u = re.escape(USER)
    out = re.sub(r"(?<= )%s +(?=stat_writer)" % u, lambda m: "alice".ljust(max(len(m.group(0)), 6)), out)
    out = re.sub(r'("user":")%s"' % u, r'\1alice"', out)
    out = re.sub(r'(user=")%s"' % u, r'\1alice"', out)
    return re.sub(r"(  user )%s(  )" % u, r"\1alice\2", out)


def run(shm, *args):
    env = dict(os.environ, GPUPOOL_SHM_DIR=shm)
    env.pop("COLUMNS", None)
    env.pop("NO_COLOR", None)
    out = subprocess.run([STAT, *args], capture_output=True, text=True, timeout=30, env=env).stdout
    return as_alice(out.replace(shm, "/dev/shm"))


def writer(d, shm, name, *args):
    out = open(os.path.join(d, name + ".out"), "w+")
    err = open(os.path.join(d, name + ".err"), "w+")
    w = subprocess.Popen([WRITER, *args], stdout=out, stderr=err, env=dict(os.environ, GPUPOOL_SHM_DIR=shm))
    for _ in range(500):
        out.seek(0)
        if "ready" in out.read():
            return w, err
        time.sleep(0.02)
    w.kill()
    raise SystemExit("doc_examples: writer %s not ready" % name)


def wrap(text, width=100):
    """JSON cut at commas into lines of about `width`, continuation lines indented by one."""
    lines, cur = [], ""
    for part in re.split(r"(?<=,)", text):
        if cur and len(cur) + len(part) > width:
            lines.append(cur)
            cur = " "
        cur += part
    return "\n".join(lines + [cur])


def json_cut(doc, pid):
    """The listing with process pid's object only, cut after its first device's
    requested_bytes_peak, and the first GPU."""
    lines = doc.rstrip("\n").split("\n")
    first = next(l for l in lines if l.lstrip(",").startswith('{"pid":%d,' % pid)).lstrip(",")
    m = re.search(r'"requested_bytes_peak":\d+', first)
    gpus = lines.index('],"gpus":[')
    return "%s\n%s\n%s\n%s\n%s\n" % (lines[0], wrap(first[:m.end()] + ",...}]}"), lines[gpus], wrap(lines[gpus + 1].rstrip(",")),
                                     lines[-1])


def detail_cut(text):
    """The process's lines and a few of device 1's."""
    keep = ("device 1 ", "  gauge ", "  reserved_bytes ", "  pending_frees ", "  counter ", "  allocs ",
            "  segment_allocs ", "  hit rate ", "  driver calls saved ")
    lines = text.split("\n")
    dev1 = lines.index(next(l for l in lines if l.startswith("device 1 ")))
    out = lines[:3]
    for l in lines[dev1:]:
        if l.startswith("device ") and not l.startswith("device 1 "):
            break
        if l.startswith(keep):
            out.append(l)
    return "\n".join(out) + "\n"


def prom_cut(text):
    lines = text.split("\n")
    allocs = lines.index("# TYPE gpupool_allocs_total counter")
    return "\n".join(lines[:6] + lines[allocs:allocs + 2]) + "\n"


def make():
    d = tempfile.mkdtemp()
    shm = os.path.join(d, "shm")
    os.mkdir(shm)
    live = gone = None
    try:
        live, live_err = writer(d, shm, "live", "3000")
        gone, _ = writer(d, shm, "gone", "1500", "idle")
        gone.kill()  # gone without removing its page
        gone.wait()
        with open(os.path.join(shm, "gpupool.4000005"), "wb") as f:
            f.write(b"x" * 50)  # left out, counted as invalid
        ex = {}
        ex["table-wide"] = "$ gpupool-stat --wide\n" + run(shm, "--wide")
        ex["table-80"] = "$ gpupool-stat\n" + run(shm)
        # a reclaim between the two frames (the writer's SIGUSR1): its lines under the second
        threading.Timer(0.5, os.kill, (live.pid, signal.SIGUSR1)).start()
        ex["watch"] = "$ gpupool-stat --watch 1 --count 2\n" + run(shm, "--watch", "1", "--count", "2")
        ex["detail"] = detail_cut(run(shm, str(live.pid)))
        os.kill(live.pid, signal.SIGSTOP)  # the JSON and the Prometheus text of one moment
        ex["json"] = json_cut(run(shm, "--json"), live.pid)
        ex["prometheus"] = prom_cut(run(shm, "--prometheus"))
        os.kill(live.pid, signal.SIGCONT)
        live.send_signal(signal.SIGTERM)
        live.wait(timeout=10)
        live_err.seek(0)
        ex["report"] = live_err.read()
        return ex
    finally:
        for w in (live, gone):
            if w and w.poll() is None:
                w.kill()
                w.wait()
        shutil.rmtree(d, ignore_errors=True)


def shape(text):
    """The text up to the figures: the JSON version kept, numbers as N and their byte units
    as U (the writer's figures move), runs of blanks as one, and JSON's lines cut at commas
    joined again (where a line is cut moves with the figures' digits)."""
    text = re.sub(r",\n ", ",", text)
    text = re.sub(r'"version":(\d+)', lambda m: '"version":#' + m.group(1).translate(str.maketrans(
        "0123456789", "abcdefghij")), text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    text = re.sub(r"\bN (B|KiB|MiB|GiB|TiB|PiB|EiB)\b", "N U", text)
    return re.sub(r"[ \t]+", " ", text)


def main():
    ex = make()
    used, bad = set(), 0
    for path in DOCS:
        doc = open(path).read()

        def block(m):
            nonlocal bad
            name, old = m.group(1), m.group(2)
            used.add(name)
            if name not in ex:
                print("FAIL: %s: no example %r is made here" % (os.path.relpath(path, ROOT), name))
                bad += 1
                return m.group(0)
            if not WRITE and shape(old) != shape(ex[name]):
                print("FAIL: %s: the example %r is not what the tools write (ninja -C build doc-examples "
                      "writes it)\n--- the document's:\n%s--- the tools':\n%s" % (
                          os.path.relpath(path, ROOT), name, old, ex[name]))
                bad += 1
            return "<!-- example: %s -->\n```\n%s```\n" % (name, ex[name])

        new = MARK.sub(block, doc)
        if WRITE and new != doc:
            open(path, "w").write(new)
            print("doc_examples: wrote %s" % os.path.relpath(path, ROOT))
    for name in sorted(set(ex) - used):
        print("FAIL: the example %r is in no document" % name)
        bad += 1
    if bad:
        sys.exit(1)
    print("doc_examples: %d examples %s" % (len(used), "written" if WRITE else "are the tools' output"))


if __name__ == "__main__":
    main()
