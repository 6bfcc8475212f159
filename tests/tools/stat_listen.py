"""gpupool-stat --listen under a slow-client attack, and without libmicrohttpd.

1. gpupool-stat links no libmicrohttpd (readelf), maps none until --listen, and with the
   library missing ($GPUPOOL_MICROHTTPD naming no file, or another library) --listen says so
   in one line, exit 2.
2. The attack of docs/security.md ("The HTTP server under a slow-client attack"): 64
   connections from 127.0.0.1 that each send one byte of a request header every 5 s (under
   libmicrohttpd's idle timeout); then a scrape from the same address must succeed within
   SCRAPE_S. The same with the 64 spread over 64 addresses of 127.0.0.0/8.
3. A connection that keeps sending a byte every 0.5 s is closed CONN_LIFETIME_S after its
   accept (10 s), give or take 2 s.
Everything is bounded: at most 128 attack connections, about 25 s in all.
Run: stat_listen.py GPUPOOL_STAT. Exit 77 (skip) when libmicrohttpd cannot be loaded.
"""

import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

STAT = sys.argv[1]
ATTACK = 64
SCRAPE_S = 5.0
LIFETIME_S = 10


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_no_link():
    try:
        dyn = subprocess.run(["readelf", "-d", STAT], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print("stat_listen: readelf: %s: NEEDED not checked" % e)
    else:
        needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)
        assert needed, dyn
        if any("microhttpd" in n or "gnutls" in n for n in needed):
            fail("gpupool-stat links %s" % needed)
        print("stat_listen: gpupool-stat needs %s only" % ", ".join(needed))
    # mapped only by --listen: a --watch that sleeps has none
    p = subprocess.Popen([STAT, "--watch", "10", "--count", "2"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        maps = open("/proc/%d/maps" % p.pid).read()
    finally:
        p.kill()
        p.wait()
    if "microhttpd" in maps:
        fail("gpupool-stat --watch has libmicrohttpd mapped")
    # no such file; a library that is not libmicrohttpd (zlib, which every build has)
    for lib, why in (("/nonexistent/libmicrohttpd.so.12", "cannot open shared object file"),
                     ("libz.so.1", "libz.so.1 lacks MHD_start_daemon")):
        r = subprocess.run([STAT, "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=10,
                           env=dict(os.environ, GPUPOOL_MICROHTTPD=lib))
        lines = r.stderr.splitlines()
        if r.returncode != 2 or len(lines) != 1 or "needs libmicrohttpd" not in lines[0] or why not in lines[0] \
                or r.stdout:
            fail("without libmicrohttpd (%s): exit %d, stdout %r, stderr %r" % (lib, r.returncode, r.stdout, r.stderr))
        print("stat_listen: without libmicrohttpd: %s" % lines[0])


def start_server():
    srv = subprocess.Popen([STAT, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    line = srv.stderr.readline()
    if srv.poll() == 2 or "needs libmicrohttpd" in line:
        print("stat_listen: %s: skipped" % line.strip())
        srv.wait()
        sys.exit(77)
    m = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", line)
    if not m:
        fail("no serving line: %r" % line)
    return srv, int(m.group(1))


def slow_clients(port, sources):
    """One connection per source address, each sending the first byte of a request."""
    socks = []
    for src in sources:
        s = socket.socket()
        s.settimeout(2)
        try:
            s.bind((src, 0))
            s.connect(("127.0.0.1", port))
            s.send(b"G")
        except OSError:
            s.close()  # refused or reset: the server is free to turn a client away
            continue
        socks.append(s)
    return socks


def trickle(socks):
    """One more header byte on each connection still open; returns those still open."""
    alive = []
    for s in socks:
        try:
            s.send(b"E")
            alive.append(s)
        except OSError:
            s.close()
    return alive


def scrape(port):
    """Seconds a scrape from 127.0.0.1 took, or fails the test after SCRAPE_S."""
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=SCRAPE_S) as r:
            body = r.read().decode()
    except OSError as e:
        return None, "%s after %.1f s" % (e, time.monotonic() - t0)
    if r.status != 200 or "gpupool_build_info" not in body:
        return None, "status %d, body %r" % (r.status, body[:200])
    return time.monotonic() - t0, None


def attack(port, sources, what):
    socks = slow_clients(port, sources)
    time.sleep(0.5)
    socks = trickle(socks)  # still slow, never done
    took, err = scrape(port)
    held = len(trickle(socks))
    for s in socks:
        s.close()
    if err:
        fail("%s: a scrape failed while %d slow connections were open: %s" % (what, held, err))
    print("stat_listen: %s: %d connections made, %d still open, a scrape took %.2f s"
          % (what, len(sources), held, took))


def lifetime(port):
    s = socket.socket()
    s.settimeout(2)
    s.connect(("127.0.0.1", port))
    t0 = time.monotonic()
    closed = None
    while time.monotonic() - t0 < LIFETIME_S + 4:
        try:
            s.send(b"G")
            # readable means closed: the server never answers a request it has not had
            if select.select([s], [], [], 0.5)[0] and s.recv(1) == b"":
                closed = time.monotonic() - t0
                break
        except OSError:
            closed = time.monotonic() - t0
            break
    s.close()
    if closed is None or not LIFETIME_S - 1 <= closed <= LIFETIME_S + 2:
        fail("a connection sending a byte every 0.5 s was %s" %
             ("never closed" if closed is None else "closed after %.1f s" % closed))
    print("stat_listen: a connection sending a byte every 0.5 s was closed after %.1f s" % closed)


def main():
    d = tempfile.mkdtemp()
    os.environ["GPUPOOL_SHM_DIR"] = d
    srv = None
    try:
        check_no_link()
        srv, port = start_server()
        took, err = scrape(port)
        if err:
            fail("a scrape with no attack: " + err)
        attack(port, ["127.0.0.1"] * ATTACK, "one address")
        attack(port, ["127.0.%d.%d" % (i // 250, 2 + i % 250) for i in range(ATTACK)], "64 addresses of 127/8")
        lifetime(port)
        srv.send_signal(signal.SIGTERM)
        if srv.wait(timeout=10) != 0:
            fail("--listen did not exit 0 on SIGTERM")
    finally:
        if srv and srv.poll() is None:
            srv.kill()
            srv.wait()
        shutil.rmtree(d, ignore_errors=True)
    print("stat_listen: all checks passed")


if __name__ == "__main__":
    main()
