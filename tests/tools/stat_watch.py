"""gpupool-stat --watch on a terminal and off it, against helper writers (stat_writer):

1. q quits (and Ctrl-C, through the terminal's own signal), on an 80x24 pseudo-terminal, the
   alternate screen and the terminal's modes given back: no echo nor line buffering while it
   watches, as before once it ends, and while stopped by Ctrl-Z. With stdin a terminal and
   stdout a pipe the terminal's modes are never touched.
2. The PID view fits 80x24: every frame at most 23 lines of at most 80 characters, the
   title, the process's line, each device's line, reserved_bytes and allocated_bytes kept,
   and a line counting the rows left out; the table too, in 80x5.
3. Rates between refreshes: none known on the first frame, more than 0 for a busy writer on
   the next, exactly 0 for an idle one (table: ALLOCS/S, BYTES/S; PID view: "per second").
Every wait is bounded (a few seconds). Run: stat_watch.py GPUPOOL_STAT STAT_WRITER.
"""

import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

STAT, WRITER = sys.argv[1:3]
CLEAR = b"\x1b[H\x1b[2J"
ENTER, LEAVE = b"\x1b[?1049h", b"\x1b[?1049l"
ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def spawn_pty(args, rows=24, cols=80):
    """gpupool-stat on a new pseudo-terminal of rows x cols (stdin and stdout): (pid, master)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        os.close(master)
        os.execv(STAT, [STAT] + args)
    os.close(slave)
    return pid, master


def read_until(master, pid, want, timeout):
    """Output until `want` has been seen (or the process ends, or timeout): (bytes, exited status)."""
    out, end = b"", time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                b = os.read(master, 65536)
            except OSError:
                b = b""
            if not b:
                break
            out += b
            if want and want in out:
                return out, None
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            return out + drain(master), st
    return out, None


def drain(master):
    out = b""
    while select.select([master], [], [], 0.2)[0]:
        try:
            b = os.read(master, 65536)
        except OSError:
            break
        if not b:
            break
        out += b
    return out


def wait_exit(pid, master, timeout):
    out, end = b"", time.monotonic() + timeout
    while time.monotonic() < end:
        out += drain(master)
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            return out + drain(master), st
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return out, None


def lflag(fd):
    return termios.tcgetattr(fd)[3]


def check_key(args, key, what):
    pid, master = spawn_pty(args)
    try:
        out, st = read_until(master, pid, b"PID" if args[0] == "--watch" else b"device 1", 5)
        if st is not None:
            fail("%s: gpupool-stat ended before its first frame: %r" % (what, out[-200:]))
        if lflag(master) & (termios.ICANON | termios.ECHO):
            fail("%s: the terminal still echoes or buffers lines while watching" % what)
        os.write(master, key)
        out2, st = wait_exit(pid, master, 3)
        out += out2
        if st is None:
            fail("%s: gpupool-stat --watch did not quit within 3 s" % what)
        if not os.WIFEXITED(st) or os.WEXITSTATUS(st) != 0:
            fail("%s: exit status %r" % (what, st))
        if not out.startswith(ENTER) or LEAVE not in out[-40:]:
            fail("%s: the alternate screen was not left: %r" % (what, out[-60:]))
        if not lflag(master) & termios.ICANON or not lflag(master) & termios.ECHO:
            fail("%s: the terminal's modes were not given back" % what)
    finally:
        os.close(master)
    print("stat_watch: %s quits, screen and terminal modes given back" % what)


def check_suspend():
    """Ctrl-Z: the screen and the modes given back while stopped, taken again after SIGCONT."""
    pid, master = spawn_pty(["--watch", "10"])
    try:
        out, st = read_until(master, pid, b"PID", 5)
        if st is not None:
            fail("Ctrl-Z: ended before its first frame")
        os.write(master, b"\x1a")
        end = time.monotonic() + 3
        while time.monotonic() < end:
            out += drain(master)
            done, st = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
            if done:
                break
        if not done or not os.WIFSTOPPED(st):
            fail("Ctrl-Z: gpupool-stat did not stop: %r" % (st,))
        out += drain(master)
        if LEAVE not in out or not lflag(master) & termios.ICANON or not lflag(master) & termios.ECHO:
            fail("Ctrl-Z: stopped without giving the screen or the terminal's modes back")
        os.kill(pid, signal.SIGCONT)
        out2, st = read_until(master, pid, b"PID", 5)
        if st is not None or ENTER not in out2 or lflag(master) & termios.ICANON:
            fail("Ctrl-Z: the watch did not take the screen and the keys again after SIGCONT")
        os.write(master, b"q")
        _, st = wait_exit(pid, master, 3)
        if st is None or not os.WIFEXITED(st) or os.WEXITSTATUS(st) != 0:
            fail("Ctrl-Z: q after SIGCONT: %r" % (st,))
    finally:
        os.close(master)
    print("stat_watch: Ctrl-Z gives the screen and the terminal's modes back while stopped")


def check_pipe_keeps_modes():
    master, slave = pty.openpty()
    p = subprocess.Popen([STAT, "--watch", "0.2", "--count", "4"], stdin=slave, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        if not lflag(slave) & termios.ICANON or not lflag(slave) & termios.ECHO:
            fail("stdout a pipe: the terminal on stdin lost its modes")
        out = p.communicate(timeout=10)[0]
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
        os.close(slave)
    if b"\x1b" in out or out.count(b"-- gpupool-stat") != 4:
        fail("stdout a pipe: escape codes, or not 4 frames: %r" % out[:200])
    print("stat_watch: stdout a pipe: the terminal's modes untouched, 4 plain frames")


def frames(out):
    """The frames of a terminal's output, escape codes out, as lists of lines."""
    parts = out.split(CLEAR)[1:]
    return [ESCAPES.sub(b"", f).decode().replace("\r", "").split("\n") for f in parts]


def check_fits(args, rows, cols, needles, what, nframes=2):
    pid, master = spawn_pty(args, rows, cols)
    try:
        out, st = wait_exit(pid, master, 10)
    finally:
        os.close(master)
    if st is None or not os.WIFEXITED(st) or os.WEXITSTATUS(st) != 0:
        fail("%s: exit %r: %r" % (what, st, out[-300:]))
    fs = frames(out)
    if len(fs) != nframes:
        fail("%s: %d frames" % (what, len(fs)))
    for f in fs:
        text = "\n".join(f)
        lines = f[:-1] if f and f[-1] == "" else f  # the last line's newline: no line after it
        if len(lines) > rows - 1:
            fail("%s: a frame of %d lines in a window of %d:\n%s" % (what, len(lines), rows, text))
        long = [l for l in lines if len(l) > cols]
        if long:
            fail("%s: lines wider than %d: %r" % (what, cols, long))
        if not lines[0].startswith("gpupool-stat  "):
            fail("%s: the title is not on the first line: %r" % (what, lines[0]))
        for n in needles:
            if not re.search(n, text, re.M):
                fail("%s: %r not in the frame:\n%s" % (what, n, text))
    print("stat_watch: %s: %d frames of at most %d lines and %d columns" % (what, len(fs), rows - 1, cols))
    return fs


def start_writer(d, name, *args):
    out = open(os.path.join(d, name + ".out"), "w+")
    w = subprocess.Popen([WRITER, *args], stdout=out, stderr=subprocess.DEVNULL)
    for _ in range(500):
        out.seek(0)
        if "ready" in out.read():
            return w
        time.sleep(0.02)
    w.kill()
    fail("writer %s not ready" % name)


def check_events(busy):
    """On a terminal of 80x16: the GPU lines, the table and a reclaim's lines (SIGUSR1 to the
    writer between two refreshes) share the window, none of it past its bounds."""
    threading.Timer(0.45, os.kill, (busy.pid, signal.SIGUSR1)).start()
    fs = check_fits(["--watch", "0.3", "--count", "3"], 16, 80, [r"^GPU  NAME  +MEMORY", r"PID USER +COMMAND"],
                    "GPUs, table and events in 80x16", 3)
    text = "\n".join(fs[-1])
    for n in (r"^\d\d:\d\d:\d\d pid %d \(stat_writer\) gave 2\.0 GiB for a reclaim$" % busy.pid,
              r"^\d\d:\d\d:\d\d pid %d \(stat_writer\) received 2\.0 GiB after waiting 0\.41 s$" % busy.pid):
        if not re.search(n, text, re.M):
            fail("events: %r not in the last frame:\n%s" % (n, text))
    print("stat_watch: a reclaim's lines under the table in 80x16")


def check_rates(busy, idle):
    out = subprocess.run([STAT, "--watch", "0.3", "--count", "2"], capture_output=True, text=True,
                         timeout=20, env=dict(os.environ, COLUMNS="120")).stdout
    fs = re.split(r"\n\n(?=-- gpupool-stat )", out)
    if len(fs) != 2:
        fail("rates: %d frames: %s" % (len(fs), out))
    head = [l for l in fs[0].splitlines() if re.search(r"PID USER +COMMAND", l)][0]
    # right-aligned columns: a cell ends where its heading does (ALLOCS/S 8 wide, BYTES/S 10)
    ea, eb = head.index("ALLOCS/S") + 8, head.index("BYTES/S") + 7

    def cells(frame, pid):
        rows = [l for l in frame.splitlines() if re.match(r"^ *[0-9-]+ +%d " % pid, l)]
        if len(rows) != 2:
            fail("rates: %d rows for pid %d:\n%s" % (len(rows), pid, frame))
        return [(r[ea - 8:ea].strip(), r[eb - 10:eb].strip()) for r in rows]

    for pid in (busy.pid, idle.pid):
        if cells(fs[0], pid) != [("-", "-")] * 2:
            fail("rates: known on the first frame:\n" + fs[0])
    for a, b in cells(fs[1], busy.pid):
        if float(a) <= 0 or b.startswith("0 B"):
            fail("rates: a busy writer at %s allocations, %s per second:\n%s" % (a, b, fs[1]))
    if cells(fs[1], idle.pid) != [("0.0", "0 B")] * 2:
        fail("rates: an idle writer not at 0:\n" + fs[1])
    out = subprocess.run([STAT, str(busy.pid), "--watch", "0.3", "--count", "2"], capture_output=True, text=True,
                         timeout=20).stdout
    per = re.findall(r"^  per second: (.*)$", out, re.M)
    if len(per) != 4 or per[:2] != ["- (from the next refresh)"] * 2:
        fail("rates: the PID view's lines: %r" % per)
    for p in per[2:]:
        m = re.fullmatch(r"([0-9.]+k?) allocations, ([0-9.]+ [KMG]?i?B) asked for", p)
        if not m or float(m.group(1).rstrip("k")) <= 0:
            fail("rates: the PID view of a busy writer: %r" % p)
    print("stat_watch: rates: none on the first frame, %s and %s for the busy writer's devices, 0 for the idle one"
          % tuple(per[2:]))


def main():
    d = tempfile.mkdtemp()
    os.environ["GPUPOOL_SHM_DIR"] = os.path.join(d, "shm")
    os.mkdir(os.environ["GPUPOOL_SHM_DIR"])
    busy = start_writer(d, "busy", "3000")
    idle = start_writer(d, "idle", "500", "idle")
    try:
        check_key(["--watch", "10"], b"q", "the table: q")
        check_key(["--watch", "10"], b"\x03", "the table: Ctrl-C")
        check_key([str(busy.pid), "--watch", "10"], b"q", "the PID view: q")
        check_suspend()
        check_pipe_keeps_modes()
        check_fits([str(busy.pid), "--watch", "0.3", "--count", "2"], 24, 80,
                   [r"^pid %d  command stat_writer  user \S+  live" % busy.pid, r"^device 0  fake GPU  limit none  GPU-",
                    r"^device 1  fake GPU  limit ", r"^  reserved_bytes ", r"^  allocated_bytes ", r"^  per second: ",
                    r"^\d+ rows left out: a taller terminal shows them$"], "the PID view in 80x24")
        check_fits(["--watch", "0.3", "--count", "2"], 5, 80,
                   [r"PID USER +COMMAND", r"^\d+ rows? left out"], "the table in 80x5")
        check_rates(busy, idle)
        check_events(busy)
    finally:
        for w in (busy, idle):
            w.kill()
            w.wait()
        shutil.rmtree(d, ignore_errors=True)
    print("stat_watch: all checks passed")


if __name__ == "__main__":
    main()
