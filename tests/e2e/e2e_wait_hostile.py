"""Hostile neighbours on the sharing channel (src/sharing/share.h, version 2), for
e2e_wait_hostile.sh. Messages are 272 bytes: magic, version, kind, id, uuid, bytes, held,
flags, pad, floor, then a status (struct gp_share_status, 208 bytes).
  fill LISTEN PID...        8 processes, each with 32 claims to wait for 1 byte on the GPU of
                            the PIDs, each told again every 0.1 s (LISTEN=1: every second, as an
                            honest waiter tells), evenly: a line full, not a flood of a socket
                            whose queue holds a few datagrams (a flood keeps any message from
                            arriving, honest or not: docs/sharing.md says so)
  head BYTES LISTEN PID...  one claim to wait for BYTES with one ticket, told again every 0.05 s
  liar HELD                 listens under its own name: answers each WAIT with a HEARD (it holds
                            1 GiB and is not waiting) and each QUERY with an OFFER (a floor of
                            1 GiB, holding HELD bytes)
LISTEN=1: each claimant is as good as an honest waiter can look: it listens under its own
name, has a page in $GPUPOOL_SHM_DIR and says in its status that it waits for 1 GiB.
Prints "ready" once the claims have been told for a second (fill LISTEN=1: 1.5 s) (head: half a second; the liar:
once it listens)."""
import os
import select
import signal
import socket
import struct
import sys
import time

HEAD = "<IHHQ16sQQIIQ"
STATUS = "<13QiHH16s16s64s"
SIZE = 272
MAGIC = 0x48535047
WAIT, HEARD, QUERY, OFFER, STAT, STAT_ANSWER = 8, 9, 2, 3, 6, 7


def msg(kind, id_=0, uuid=b"\0" * 16, bytes_=0, held=0, floor=0, waiting=0, count=0):
    m = struct.pack(HEAD, MAGIC, 2, kind, id_, uuid, bytes_, held, 0, 0, floor)
    st = struct.pack(STATUS, 0, 0, 0, 0, 0, 0, waiting, 0, 0, 0, 0, 0, 0, 0, 0, count, b"", b"", b"")
    return m + st


def name(pid):
    return b"\0gpupool.%d.%d" % (os.stat("/proc/self/ns/pid").st_ino, pid)


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def uuid_of(pid):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(b"")
    s.settimeout(2)
    s.sendto(msg(STAT, 1234), name(pid))
    while True:
        b = s.recv(4096)
        if struct.unpack_from(HEAD, b)[2] == STAT_ANSWER:
            return struct.unpack_from(HEAD, b)[4]


def claimant(listen, uuid, claims, targets, every):
    """Tells claims [(ticket, bytes, end)] to targets every `every` seconds, for ever; with
    listen, under its own name, with a page, answering status queries as a waiter."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if listen:
        fd = os.open("%s/gpupool.%d" % (os.environ["GPUPOOL_SHM_DIR"], os.getpid()),
                     os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
        s.bind(name(os.getpid()))
    else:
        s.bind(b"")
    sends = [(t, c) for c in claims for t in targets]
    nxt, k = 0, 0
    while True:
        if time.monotonic() >= nxt:  # one claim at a time, evenly: a line full, not a flood
            ticket, size, end = sends[k % len(sends)][1]
            try:
                s.sendto(msg(WAIT, ticket, uuid, size, end), name(sends[k % len(sends)][0]))
            except OSError:
                pass
            k += 1
            nxt = time.monotonic() + every / len(sends)
        if select.select([s], [], [], max(0, nxt - time.monotonic()))[0]:
            b, addr = s.recvfrom(4096)
            if len(b) == SIZE and listen and struct.unpack_from(HEAD, b)[2] == STAT:
                try:
                    s.sendto(msg(STAT_ANSWER, struct.unpack_from(HEAD, b)[3], uuid, waiting=1 << 30, count=1), addr)
                except OSError:
                    pass  # the asker is gone


def spawn(f):
    pid = os.fork()
    if pid == 0:
        try:
            f()
        except BaseException as e:
            if not isinstance(e, SystemExit):
                print("claimant:", repr(e), flush=True)
        os._exit(0)
    return pid


def main():
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))  # the children go too
    what = sys.argv[1]
    kids = []
    if what == "fill":
        listen, targets = sys.argv[2] == "1", [int(a) for a in sys.argv[3:]]
        uuid, t0 = uuid_of(targets[0]), now()
        for c in range(8):
            claims = [(t0 - (c * 32 + k + 1) * 1000, 1, t0 + 55 * 10**9) for k in range(32)]
            kids.append(spawn(lambda: claimant(listen, uuid, claims, targets, 1.0 if listen else 0.1)))
        time.sleep(1.5 if listen else 1)
    elif what == "head":
        size, listen, targets = int(sys.argv[2]), sys.argv[3] == "1", [int(a) for a in sys.argv[4:]]
        uuid, t0 = uuid_of(targets[0]), now()
        claims = [(t0 - 10**6, size, t0 + 55 * 10**9)]
        kids.append(spawn(lambda: claimant(listen, uuid, claims, targets, 0.05)))
        time.sleep(0.5)
    elif what == "liar":
        held = int(sys.argv[2])
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(name(os.getpid()))
        print("ready", flush=True)
        while True:
            b, addr = s.recvfrom(4096)
            if len(b) != SIZE:
                continue
            _, _, kind, id_, uuid, _, _, _, _, _ = struct.unpack_from(HEAD, b)
            if kind == WAIT:
                s.sendto(msg(HEARD, id_, uuid, 0, 1 << 30), addr)
            elif kind == QUERY:
                s.sendto(msg(OFFER, id_, uuid, 0, held, floor=1 << 30), addr)
    print("ready", flush=True)
    try:
        while True:
            time.sleep(1)
    finally:
        for k in kids:
            os.kill(k, 9)


if __name__ == "__main__":
    main()
