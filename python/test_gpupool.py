"""Tests of python/gpupool.py that need no GPU: the page layout against
include/gpupool/stats.h, stats() on synthetic pages (odd seq, bad magic/size/version), the
library lookup. Optional: a cross-check against a live page of the C writer and gpupool-stat
(env GPUPOOL_TEST_STAT_WRITER, GPUPOOL_TEST_STAT), and PyTorch tests (skipped without torch
and CUDA). Run: python3 -m unittest -v python/test_gpupool.py  or  python3 python/test_gpupool.py
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from unittest import mock
import mmap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HEADER = os.path.join(ROOT, "include", "gpupool", "stats.h")
sys.path.insert(0, HERE)
import gpupool  # noqa: E402

CTYPES = {"uint64_t": "Q", "int64_t": "q", "uint32_t": "I", "int32_t": "i"}


def _strip_comments(s):
    return re.sub(r"/\*.*?\*/", "", s, flags=re.S)


class Header:
    """What include/gpupool/stats.h says, parsed independently of gpupool.py."""

    def __init__(self, path=HEADER):
        with open(path) as f:
            self.text = f.read()
        t = _strip_comments(self.text).replace("\\\n", " ")
        self.defines = dict(re.findall(r"#define\s+(GPUPOOL_\w+)\s+(\S+)", t))
        self.gauges = self._xlist(t, "GPUPOOL_GAUGES")
        self.counters = self._xlist(t, "GPUPOOL_COUNTERS")
        self.dev = self._struct(t, "gpupool_device_stats")
        self.page = self._struct(t, "gpupool_page")

    @classmethod
    def _xlist(cls, t, macro):
        """The names an X-macro lists, the lists it names (GPUPOOL_GAUGES_3(X) ...) expanded."""
        m = re.search(r"#define\s+%s\(X\)(.*)" % macro, t)
        subs = re.findall(r"(GPUPOOL_\w+)\(X\)", m.group(1))
        if subs:
            return [x for sub in subs for x in cls._xlist(t, sub)]
        return re.findall(r"X\(\s*(\w+)\s*,", m.group(1))

    def _num(self, v):
        v = self.defines.get(v, v)
        return int(v.rstrip("uUlL"), 0)

    def _struct(self, t, name):
        """[(field, struct format char(s))] in order, X-macro lines expanded."""
        body = re.search(r"struct\s+%s\s*\{(.*?)\};" % name, t, re.S).group(1)
        out = []
        for stmt in (s.strip() for s in body.split(";")):
            if not stmt:
                continue
            # the X-macro lines: GPUPOOL_GAUGES_3(GPUPOOL_GAUGE_FIELD_) and the like, in order
            rest = stmt
            while True:
                m = re.match(r"(GPUPOOL_(?:GAUGES|COUNTERS)\w*)\(GPUPOOL_(GAUGE|COUNTER)_FIELD_\)\s*", rest)
                if not m:
                    break
                names = self._xlist(t, m.group(1))
                out += ([(x, "Q") for g in names for x in (g, g + "_peak")] if m.group(2) == "GAUGE"
                        else [(c, "Q") for c in names])
                rest = rest[m.end():]
            if rest != stmt:
                stmt = rest
                if not stmt:
                    continue
            m = re.fullmatch(r"(?:struct\s+)?(\w+)\s+(\w+)(?:\[(\w+)\])?", stmt)
            if not m:
                raise AssertionError("stats.h: cannot parse %r in struct %s" % (stmt, name))
            typ, field, n = m.groups()
            if typ == "char":
                out.append((field, "%ds" % self._num(n)))
            elif typ == "gpupool_device_stats":
                out.append((field, ("dev", self._num(n))))
            elif n:
                out.append((field, "%d%s" % (self._num(n), CTYPES[typ])))
            else:
                out.append((field, CTYPES[typ]))
        return out

    def dev_format(self, order="="):
        return order + "".join(f for _, f in self.dev)

    def page_header_format(self, order="="):
        return order + "".join(f for _, f in self.page if not isinstance(f, tuple))


H = Header()


def build_slot(device, values=None, seq=2, active=1):
    """Bytes of one struct gpupool_device_stats, from the header's field order."""
    values = values or {}
    vals = []
    for name, f in H.dev:
        if name == "reserved_":
            vals += [0] * int(f[:-1])
            continue
        vals.append({"seq": seq, "device": device, "active": active}.get(
            name, values.get(name, b"" if name in ("uuid", "device_name") else 0)))
    return struct.pack(H.dev_format(), *vals)


# A pid no process can have (above the kernel's largest pid_max, 2^22): a page for it is the
# page of a process that is gone, read (as stale) when the file is the reader's own.
GONE = (1 << 22) + 4242


def build_page(slots, pid=GONE, magic=None, version=None, size=None, comm=b"trainer", start_time_ns=None,
               header_pid=None):
    hdr_vals = {"magic": gpupool.PAGE_MAGIC if magic is None else magic,
                "version": H._num("GPUPOOL_PAGE_VERSION") if version is None else version,
                "pid": pid if header_pid is None else header_pid, "ndevices": len(slots),
                "start_time_ns": time.time_ns() if start_time_ns is None else start_time_ns, "comm": comm,
                "release_request": 0, "release_done": 0, "lib_version": b"9.8.7"}
    hfmt = H.page_header_format()
    dsize = struct.calcsize(H.dev_format())
    total = struct.calcsize(hfmt) + H._num("GPUPOOL_MAX_DEVICES") * dsize
    hdr_vals["size"] = total if size is None else size
    vals = []
    for name, f in H.page:
        if isinstance(f, tuple):
            continue
        if name == "reserved_":
            vals += [0] * int(f[:-1])
        else:
            vals.append(hdr_vals.get(name, 0))
    body = b"".join(slots)
    return struct.pack(hfmt, *vals) + body + b"\0" * (total - struct.calcsize(hfmt) - len(body))


class LayoutTest(unittest.TestCase):
    def test_constants(self):
        self.assertEqual(H._num("GPUPOOL_PAGE_MAGIC"), gpupool.PAGE_MAGIC)
        self.assertEqual(H._num("GPUPOOL_PAGE_VERSION"), gpupool.PAGE_VERSION)
        self.assertEqual(H._num("GPUPOOL_MAX_DEVICES"), gpupool.MAX_DEVICES)
        self.assertEqual(H._num("GPUPOOL_COMM_LEN"), gpupool.COMM_LEN)
        self.assertEqual(H._num("GPUPOOL_VERSION_LEN"), gpupool.VERSION_LEN)

    def test_lists(self):
        self.assertEqual(tuple(H.gauges), gpupool.GAUGES, "GPUPOOL_GAUGES changed: update gpupool.py")
        self.assertEqual(tuple(H.counters), gpupool.COUNTERS, "GPUPOOL_COUNTERS changed: update gpupool.py")

    def test_device_struct(self):
        self.assertEqual(tuple(n for n, _ in H.dev), gpupool.DEV_FIELDS)
        self.assertEqual(H.dev_format(), gpupool.DEV_STRUCT.format)
        # no hidden padding: native alignment gives the same size as packed
        self.assertEqual(struct.calcsize(H.dev_format("@")), gpupool.DEV_STRUCT.size)

    def test_page_struct(self):
        names = [n for n, f in H.page if not isinstance(f, tuple)]
        self.assertEqual(names[:len(gpupool.HDR_FIELDS)], list(gpupool.HDR_FIELDS))
        self.assertEqual(names[len(gpupool.HDR_FIELDS):], ["reserved_"])
        self.assertEqual(H.page[-1], ("dev", ("dev", gpupool.MAX_DEVICES)))
        self.assertEqual(H.page_header_format(), gpupool.HDR_STRUCT.format)
        self.assertEqual(struct.calcsize(H.page_header_format("@")), gpupool.HDR_STRUCT.size)
        off = struct.calcsize("=" + "".join(f for n, f in H.page[:names.index("release_request")]))
        self.assertEqual(off, gpupool.OFF_RELEASE_REQUEST)
        self.assertEqual(gpupool.PAGE_SIZE, 12528)  # the size gpupool-stat's messages quote

    @unittest.skipUnless(shutil.which("cc"), "no C compiler")
    def test_sizes_from_c_compiler(self):
        d = tempfile.mkdtemp()
        try:
            src = os.path.join(d, "s.c")
            with open(src, "w") as f:
                f.write('#include <stdio.h>\n#include <stddef.h>\n#include "gpupool/stats.h"\n'
                        'int main(void){printf("%zu %zu %zu %zu\\n", sizeof(struct gpupool_page),'
                        ' sizeof(struct gpupool_device_stats), offsetof(struct gpupool_page, dev),'
                        ' offsetof(struct gpupool_device_stats, ooms)); return 0;}\n')
            exe = os.path.join(d, "s")
            r = subprocess.run(["cc", "-I", os.path.join(ROOT, "include"), src, "-o", exe],
                               capture_output=True, text=True)
            if r.returncode:
                self.skipTest("cc failed: " + r.stderr[-200:])
            got = [int(x) for x in subprocess.check_output([exe], text=True).split()]
            ooms_off = struct.calcsize("=" + "".join(
                f for n, f in H.dev[:[n for n, _ in H.dev].index("ooms")]))
            self.assertEqual(got, [gpupool.PAGE_SIZE, gpupool.DEV_STRUCT.size,
                                   gpupool.HDR_STRUCT.size, ooms_off])
        finally:
            shutil.rmtree(d)


class PageDir:
    """A private page directory (GPUPOOL_SHM_DIR) and page files written into it."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        env = mock.patch.dict(os.environ, GPUPOOL_SHM_DIR=self.dir)
        env.start()
        self.addCleanup(env.stop)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, data, pid=GONE):
        p = os.path.join(self.dir, "gpupool.%d" % pid)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def values(self, k):
        # distinct value per field so a shifted field shows
        return {n: 1000 * k + i for i, (n, _) in enumerate(H.dev)
                if n not in ("seq", "device", "active", "uuid", "reserved_", "device_name")}


class PageTest(PageDir, unittest.TestCase):
    def test_two_devices(self):
        v0, v1 = self.values(1), self.values(2)
        self.write(build_page([build_slot(0, v0), build_slot(3, v1, seq=10)]))
        s = gpupool.stats(GONE)
        self.assertEqual(sorted(s), [0, 3])
        for dev, v in ((0, v0), (3, v1)):
            self.assertTrue(s[dev]["consistent"])
            self.assertEqual(s[dev]["device"], dev)
            for k, x in v.items():
                self.assertEqual(s[dev][k], x, k)
        hdr, _ = gpupool.read_page(GONE)
        self.assertEqual(hdr["comm"], "trainer")
        self.assertEqual(hdr["lib_version"], "9.8.7")
        self.assertEqual(hdr["pid"], GONE)

    def test_default_pid_is_self(self):
        self.write(build_page([build_slot(0, self.values(1))], pid=os.getpid()), pid=os.getpid())
        self.assertIn(0, gpupool.stats())
        hdr, _ = gpupool.read_page()
        self.assertFalse(hdr["stale"])
        self.assertEqual(hdr["pid"], os.getpid())

    def test_inactive_slot_skipped(self):
        self.write(build_page([build_slot(0, active=0), build_slot(1)]))
        self.assertEqual(list(gpupool.stats(GONE)), [1])

    def test_odd_seq_reported_inconsistent(self):
        self.write(build_page([build_slot(0, self.values(1), seq=7), build_slot(1, self.values(2))]))
        t = time.monotonic()
        _, s = gpupool.read_page(GONE, tries=50)
        self.assertLess(time.monotonic() - t, 5)
        self.assertFalse(s[0]["consistent"])
        self.assertEqual(s[0]["device"], 0)
        self.assertNotIn("allocs", s[0])
        self.assertTrue(s[1]["consistent"])
        self.assertEqual(gpupool.memory_stats(0, pid=GONE), {})

    def test_odd_seq_retried_until_writer_finishes(self):
        # a live writer (this process) mid-update is waited for; a gone one would not be
        v = self.values(1)
        me = os.getpid()
        path = self.write(build_page([build_slot(0, v, seq=5)], pid=me), pid=me)
        hsize = gpupool.HDR_STRUCT.size

        def finish():
            time.sleep(0.03)
            with open(path, "r+b") as f:
                m = mmap.mmap(f.fileno(), 0)
                struct.pack_into("=Q", m, hsize, 6)
                m.close()
        th = threading.Thread(target=finish)
        th.start()
        s = gpupool.stats(me)  # default tries: well over 30 ms
        th.join()
        self.assertTrue(s[0]["consistent"])
        self.assertEqual(s[0]["allocs"], v["allocs"])

    def test_bad_magic(self):
        self.write(build_page([build_slot(0)], magic=0x1234))
        with self.assertRaisesRegex(gpupool.GpupoolError, "bad magic 0x0000000000001234"):
            gpupool.stats(GONE)
        self.write(build_page([build_slot(0)], magic=0))
        with self.assertRaisesRegex(gpupool.GpupoolError, "being created"):
            gpupool.stats(GONE)

    def test_wrong_file_size(self):
        self.write(build_page([build_slot(0)])[:100])
        with self.assertRaisesRegex(gpupool.GpupoolError, r"wrong size \(100 bytes, expected 12528\)"):
            gpupool.stats(GONE)

    def test_wrong_header_size_and_version(self):
        self.write(build_page([build_slot(0)], size=4096))
        with self.assertRaisesRegex(gpupool.GpupoolError, "header size 4096"):
            gpupool.stats(GONE)
        self.write(build_page([build_slot(0)], version=1))
        with self.assertRaisesRegex(gpupool.GpupoolError, "page version 1"):
            gpupool.stats(GONE)

    def test_missing_page(self):
        with self.assertRaisesRegex(gpupool.GpupoolError, "no statistics page"):
            gpupool.stats(4243)

    def test_memory_stats_mapping(self):
        v = self.values(1)
        self.write(build_page([build_slot(0, v)]))
        m = gpupool.memory_stats(0, pid=GONE)
        self.assertEqual(m["reserved_bytes.all.peak"], v["reserved_bytes_peak"])
        self.assertEqual(m["allocated_bytes.all.current"], v["allocated_bytes"])
        self.assertEqual(m["requested_bytes.all.peak"], v["requested_bytes_peak"])
        self.assertEqual(m["num_ooms"], v["ooms"])
        self.assertEqual(m["num_alloc_retries"], v["oom_retries"])
        self.assertEqual(m["active.all.current"], v["live_blocks"] + v["pending_frees"])
        self.assertEqual(m["active_bytes.all.current"], v["allocated_bytes"] + v["pending_bytes"])
        self.assertEqual(m["segment.all.current"], v["segments"])
        self.assertEqual(m["reserved_bytes.all.freed"], v["released_bytes"])
        self.assertEqual(m["reserved_bytes.all.allocated"] - m["reserved_bytes.all.freed"], v["reserved_bytes"])
        self.assertEqual(m["requested_bytes.all.allocated"] - m["requested_bytes.all.freed"], v["requested_bytes"])
        self.assertEqual(m["num_sync_all_streams"], v["fences"])
        self.assertEqual(m["gpupool.fences"], v["fences"])
        self.assertEqual(gpupool.memory_stats(5, pid=GONE), {})
        self.assertEqual(gpupool.memory_stats("cuda:0", pid=GONE), m)
        # figures gpupool does not keep are absent, never 0, and each says why
        for k in m:
            self.assertNotIn(k, gpupool.MEMORY_STATS_ABSENT)
        for k in ("allocated_bytes.small_pool.current", "inactive_split_bytes.all.current",
                  "oversize_allocations.peak", "active_bytes.all.peak", "max_split_size"):
            self.assertIn(k, gpupool.MEMORY_STATS_ABSENT)
            self.assertNotIn(k, m)

    def test_memory_stats_device(self):
        self.write(build_page([build_slot(0, self.values(1)), build_slot(1, self.values(2))]))
        self.assertEqual(gpupool.memory_stats(pid=GONE)["gpupool.allocs"], self.values(1)["allocs"])  # no torch: 0
        self.assertEqual(gpupool.memory_stats("cuda:1", pid=GONE)["gpupool.allocs"], self.values(2)["allocs"])
        for bad in ("cpu", "cuda:x", True):
            with self.assertRaises(gpupool.GpupoolError):
                gpupool.memory_stats(bad, pid=GONE)

    def test_memory_summary_shape(self):
        v = self.values(3)
        self.write(build_page([build_slot(0, v)]))
        text = gpupool.memory_summary(0, pid=GONE)
        lines = text.splitlines()
        # torch.cuda.memory_summary()'s shape: 77 columns, a title, the OOM line, 9 metrics
        # of 3 rows, 2 oversize rows
        self.assertTrue(all(len(ln) == 77 and ln[0] == ln[-1] == "|" for ln in lines), text)
        self.assertEqual(len(lines), 6 + 9 * 4 + 2 * 2 + 1)
        self.assertIn("gpupool CUDA memory summary, device ID 0", lines[1])
        self.assertIn("CUDA OOMs: %-12d" % v["ooms"], lines[3])
        self.assertIn("cudaMalloc retries: %-8d" % v["oom_retries"], lines[3])
        row = next(ln for ln in lines if ln.startswith("| Allocations "))
        self.assertEqual(row.split("|")[2].split(), [str(v["live_blocks"])])
        self.assertIn("n/a", next(ln for ln in lines if "from small pool" in ln))
        self.assertIn("n/a", next(ln for ln in lines if ln.startswith("| Non-releasable memory")))
        short = gpupool.memory_summary(0, abbreviated=True, pid=GONE).splitlines()
        self.assertEqual(len(short), 6 + 9 * 2 + 2 * 2 + 1)
        with self.assertRaisesRegex(gpupool.GpupoolError, "no pool for device 5"):
            gpupool.memory_summary(5, pid=GONE)


class HostilePageTest(PageDir, unittest.TestCase):
    """Pages another local user can plant in the shared directory (docs/security.md): the
    reader must refuse them with one GpupoolError, never report their figures as this
    process's or crash. Each of these was read before the reader checked the file."""

    BIG = 80 << 30

    def planted(self, pid, **kw):
        """A page claiming 80 GiB reserved on device 0, named for `pid`."""
        v = dict(self.values(1), reserved_bytes=self.BIG, reserved_bytes_peak=self.BIG)
        return self.write(build_page([build_slot(0, v)], pid=pid, **kw), pid=pid)

    def assertRefused(self, pid, regex):
        with self.assertRaisesRegex(gpupool.GpupoolError, regex):
            gpupool.stats(pid)
        with self.assertRaises(gpupool.GpupoolError):
            gpupool.read_page(pid)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give a file to another user (CI runs as root)")
    def test_another_users_page_for_this_process(self):
        # another user created this process's page name first: the file is theirs
        path = self.planted(os.getpid())
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fchown(fd, 65534, 65534)
        finally:
            os.close(fd)
        self.assertRefused(None, r"owned by uid 65534, but process %d is uid 0's" % os.getpid())
        with self.assertRaises(gpupool.GpupoolError):  # no library here to fall back on
            gpupool.memory_stats(0)

    def test_page_for_another_users_process(self):
        # a file of ours claiming a process of another user (pid 1 is root's; as root, one
        # of ours is given to nobody instead)
        if os.geteuid() == 0:
            path = self.planted(1)
            os.chown(path, 65534, 65534)
            self.assertRefused(1, r"owned by uid 65534, but process 1 is uid 0's")
        else:
            self.planted(1)
            self.assertRefused(1, r"owned by uid %d, but process 1 is uid 0's" % os.geteuid())

    def test_page_naming_another_pid(self):
        self.planted(os.getpid(), header_pid=GONE)
        self.assertRefused(None, r"the page names pid %d, not %d" % (GONE, os.getpid()))

    def test_leftover_of_an_earlier_process_with_this_pid(self):
        # made an hour before this process started: not this process's (its writer would
        # have replaced it); another pid's page stays readable, as stale
        self.planted(os.getpid(), start_time_ns=time.time_ns() - 3600 * 10**9)
        self.assertRefused(None, "left by an earlier process with this pid")
        self.planted(GONE, start_time_ns=time.time_ns() - 3600 * 10**9)
        hdr, devs = gpupool.read_page(GONE)
        self.assertTrue(hdr["stale"])
        self.assertEqual(devs[0]["reserved_bytes"], self.BIG)

    def test_symbolic_link(self):
        target = self.planted(GONE)
        os.symlink(target, os.path.join(self.dir, "gpupool.%d" % os.getpid()))
        self.assertRefused(None, "a symbolic link")

    def test_fifo_never_blocks(self):
        os.mkfifo(os.path.join(self.dir, "gpupool.%d" % os.getpid()))
        self.assertRefused(None, "not a regular file")

    # A child process reads its own page: the file is made from `template` with the child's
    # pid in its name and header, then CODE runs (gpupool imported, `page` its path).
    CHILD = """
        import os, struct, sys, textwrap
        import gpupool
        page = os.path.join(os.environ["GPUPOOL_SHM_DIR"], "gpupool.%d" % os.getpid())
        with open(sys.argv[1], "rb") as f:
            data = bytearray(f.read())
        struct.pack_into("=i", data, 16, os.getpid())  # struct gpupool_page: pid at offset 16
        with open(page, "wb") as f:
            f.write(data)
        exec(textwrap.dedent(sys.argv[2]))
        """

    def run_reader(self, template, code):
        return subprocess.run([sys.executable, "-c", textwrap.dedent(self.CHILD), template, code],
                              env=dict(os.environ, PYTHONPATH=HERE, GPUPOOL_SHM_DIR=self.dir),
                              capture_output=True, text=True, timeout=60)

    def test_truncated_after_its_size_was_checked(self):
        # the file shrinks between the reader's look at its size and its reads (another user
        # truncating their planted page): one GpupoolError, never a crash
        r = self.run_reader(self.planted(GONE), """
            real = os.fstat
            def fstat(fd):
                st = real(fd)
                os.truncate(page, 0)
                return st
            os.fstat = fstat
            try:
                gpupool.read_page()
            except gpupool.GpupoolError as e:
                print("refused:", e)
            """)
        self.assertEqual(r.returncode, 0, "the reader died (%d): %s" % (r.returncode, r.stderr[-2000:]))
        self.assertIn("truncated while being read", r.stdout)

    def test_truncated_over_and_over_while_read(self):
        # another thread truncates and rewrites the page as fast as it can while the reader
        # reads it: every read is a page or a GpupoolError, the reader never dies (SIGBUS)
        r = self.run_reader(self.planted(GONE), """
            import threading, time
            with open(page, "rb") as f:
                data = f.read()
            end = time.monotonic() + 1.5
            def flip():
                fd = os.open(page, os.O_WRONLY)
                while time.monotonic() < end:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, data, 0)
                os.close(fd)
            t = threading.Thread(target=flip)
            t.start()
            ok = refused = 0
            while time.monotonic() < end:
                try:
                    gpupool.read_page()
                    ok += 1
                except gpupool.GpupoolError:
                    refused += 1
            t.join()
            print(ok, refused)
            """)
        self.assertEqual(r.returncode, 0, "the reader died (%d): %s" % (r.returncode, r.stderr[-2000:]))
        ok, refused = map(int, r.stdout.split())
        self.assertGreater(ok + refused, 10)

    def test_nonexistent_device_raises_as_torch_does(self):
        # torch.cuda.memory_stats raises RuntimeError for a device that does not exist; a
        # device that exists but has no pool yet is {}
        self.write(build_page([build_slot(0, self.values(1))], pid=os.getpid()), pid=os.getpid())
        for dev in (99, 16, -1, "cuda:99"):
            with self.assertRaisesRegex(RuntimeError, "invalid device argument"):
                gpupool.memory_stats(dev)
            with self.assertRaisesRegex(RuntimeError, "invalid device argument"):
                gpupool.memory_allocated(dev)
        self.assertEqual(gpupool.memory_stats(3), {})
        self.assertEqual(gpupool.memory_allocated(3), 0)
        self.assertEqual(gpupool.max_memory_reserved(0), self.values(1)["reserved_bytes_peak"])
        self.assertEqual(gpupool.memory_reserved(0), self.values(1)["reserved_bytes"])
        self.assertEqual(gpupool.max_memory_allocated(0), self.values(1)["allocated_bytes_peak"])
        self.assertEqual(gpupool.memory_allocated(), self.values(1)["allocated_bytes"])


class LibraryTest(unittest.TestCase):
    def test_version(self):
        with open(os.path.join(ROOT, "meson.build")) as f:
            want = re.search(r"^\s*version\s*:\s*'([^']+)'", f.read(), re.M).group(1)
        self.assertEqual(gpupool.__version__, want, "gpupool.py's __version__ is not meson.build's project version")

    def test_env_override(self):
        with tempfile.NamedTemporaryFile(suffix=".so") as f, mock.patch.dict(os.environ, GPUPOOL_LIB=f.name):
            self.assertEqual(gpupool.find_library(), os.path.abspath(f.name))
            os.environ["GPUPOOL_LIB"] = f.name + ".missing"  # patch.dict puts the caller's back
            with self.assertRaisesRegex(gpupool.GpupoolError, "no such file"):
                gpupool.find_library()

    def test_release_without_library(self):
        if gpupool._loaded_path():
            self.skipTest("libgpupool.so is loaded here")
        with self.assertRaisesRegex(gpupool.GpupoolError, "not loaded"):
            gpupool.release()


@unittest.skipUnless(os.environ.get("GPUPOOL_TEST_STAT_WRITER") and os.environ.get("GPUPOOL_TEST_STAT"),
                     "set GPUPOOL_TEST_STAT_WRITER and GPUPOOL_TEST_STAT (Meson does)")
class LivePageTest(unittest.TestCase):
    """A page written by the C writer (tests/e2e/stat_writer.c), read by gpupool.py and by
    gpupool-stat --json: every field must agree."""

    def test_against_gpupool_stat(self):
        d = tempfile.mkdtemp()
        env = dict(os.environ, GPUPOOL_SHM_DIR=d)
        w = subprocess.Popen([os.environ["GPUPOOL_TEST_STAT_WRITER"], "800", "idle"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = w.stdout.readline().split()
            self.assertEqual(line[0], "ready")
            pid = int(line[1])
            with mock.patch.dict(os.environ, GPUPOOL_SHM_DIR=d):
                ours = gpupool.stats(pid)
            out = subprocess.run([os.environ["GPUPOOL_TEST_STAT"], "--json", str(pid)], env=env,
                                 capture_output=True, text=True, check=True).stdout
            theirs = {x["device"]: x for x in json.loads(out)["processes"][0]["devices"]}
            self.assertEqual(sorted(ours), sorted(theirs))
            for dev, t in theirs.items():
                self.assertGreater(t["allocs"], 0)
                for k, v in t.items():
                    if v is None:  # JSON's "not known": the page's 0 or ""
                        self.assertIn(ours[dev][k], (0, ""), "device %d %s" % (dev, k))
                    else:
                        self.assertEqual(ours[dev][k], v, "device %d %s" % (dev, k))
        finally:
            w.terminate()
            w.wait()
            w.stdout.close()
            shutil.rmtree(d)


@unittest.skipUnless(os.environ.get("GPUPOOL_TEST_PRELOAD") and os.environ.get("GPUPOOL_TEST_FAKE_DIR")
                     and os.environ.get("GPUPOOL_TEST_REPLAY"),
                     "set GPUPOOL_TEST_PRELOAD, GPUPOOL_TEST_FAKE_DIR and GPUPOOL_TEST_REPLAY (Meson does)")
class LiveProcessTest(unittest.TestCase):
    """A Python process under LD_PRELOAD=libgpupool.so over the fake CUDA runtime: its
    memory_stats, memory_summary and dump_snapshot while it runs."""

    CHILD = """
        import ctypes, json, os, sys
        import gpupool
        ctypes.CDLL("libcudart.so.13", mode=os.RTLD_GLOBAL)  # the fake runtime
        g = ctypes.CDLL(None)  # gpupool's cudaMalloc/cudaFree, preloaded in front
        g.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        g.cudaFree.argtypes = [ctypes.c_void_p]
        ptrs = []
        for i in range(40):
            p = ctypes.c_void_p()
            assert g.cudaMalloc(ctypes.byref(p), (i % 8 + 1) << 19) == 0
            ptrs.append(p)
        for p in ptrs[::2]:
            assert g.cudaFree(p) == 0
        out = {"stats": gpupool.memory_stats(), "summary": gpupool.memory_summary()}
        try:
            out["snapshot"] = gpupool.dump_snapshot(sys.argv[1])
        except gpupool.GpupoolError as e:
            out["error"] = str(e)
        print(json.dumps(out))
    """

    def run_child(self, **env):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        e = dict(os.environ, PYTHONPATH=HERE, LD_PRELOAD=os.environ["GPUPOOL_TEST_PRELOAD"],
                 LD_LIBRARY_PATH=os.environ["GPUPOOL_TEST_FAKE_DIR"], GPUPOOL_SHM_DIR=tmp,
                 GPUPOOL_REPORT="none", FAKECUDA_DEVICES="1", GPUPOOL_REPLAY=os.environ["GPUPOOL_TEST_REPLAY"])
        e.pop("GPUPOOL_CONF", None)
        e.update((k, v.replace("TMP", tmp)) for k, v in env.items())
        out = os.path.join(tmp, "snap.pickle")
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(self.CHILD), out], env=e,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout.splitlines()[-1])
        if "snapshot" in res:
            import pickle
            with open(out, "rb") as f:
                res["pickle"] = pickle.load(f)
        return res

    def check_live(self, res):
        self.assertNotIn("error", res)
        st = res["stats"]
        self.assertEqual(st["allocation.all.allocated"], 40)
        self.assertEqual(st["allocation.all.freed"], 20)
        self.assertEqual(st["requested_bytes.all.allocated"], sum((i % 8 + 1) << 19 for i in range(40)))
        self.assertIn("gpupool CUDA memory summary, device ID 0", res["summary"])
        s = res["pickle"]
        acts = [e["action"] for e in s["device_traces"][0]]
        self.assertEqual(acts.count("alloc"), 40)
        self.assertEqual(acts.count("free_requested"), 20)
        live = [b for seg in s["segments"] for b in seg["blocks"] if b["state"] != "inactive"]
        self.assertEqual(len(live), 40 - acts.count("free_completed"))
        self.assertEqual(sum(seg["total_size"] for seg in s["segments"]), st["reserved_bytes.all.current"])

    def test_plain_trace(self):
        self.check_live(self.run_child(GPUPOOL_CONF="trace:TMP/run.csv"))

    def test_gz_trace(self):
        self.check_live(self.run_child(GPUPOOL_CONF="trace:TMP/run.csv.gz"))

    def test_no_trace(self):
        res = self.run_child()
        self.assertNotIn("snapshot", res)
        self.assertIn("records no gpupool trace", res["error"])
        self.assertIn("GPUPOOL_CONF=trace:", res["error"])

    FIGURES = """
        import ctypes, json, os, sys
        import gpupool
        ctypes.CDLL("libcudart.so.13", mode=os.RTLD_GLOBAL)  # the fake runtime, one device
        g = ctypes.CDLL(None)
        g.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        g.cudaFree.argtypes = [ctypes.c_void_p]
        g.cudaDeviceSynchronize()
        out = {"version": gpupool.__version__}
        gv = g.gpupool_version
        gv.restype = ctypes.c_char_p
        out["lib_version"] = gv().decode()
        out["before"] = [gpupool.memory_stats(0), gpupool.memory_allocated()]
        ptrs = []
        for mb in (8, 16, 4):
            p = ctypes.c_void_p()
            assert g.cudaMalloc(ctypes.byref(p), mb << 20) == 0
            ptrs.append(p)
        assert g.cudaFree(ptrs[1]) == 0
        g.cudaDeviceSynchronize()
        st = gpupool.memory_stats()
        out["stats"] = {k: st[k] for k in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                                           "reserved_bytes.all.current", "reserved_bytes.all.peak")}
        out["funcs"] = [gpupool.memory_allocated(), gpupool.max_memory_allocated(),
                        gpupool.memory_reserved(), gpupool.max_memory_reserved(0)]
        gpupool.reset_peak_memory_stats()
        out["after_reset"] = [gpupool.memory_allocated(), gpupool.max_memory_allocated("cuda:0"),
                              gpupool.memory_reserved(), gpupool.max_memory_reserved()]
        page = gpupool.stats()[0]  # the page says the same
        out["page_after_reset"] = [page["allocated_bytes_peak"], page["reserved_bytes_peak"]]
        out["errors"] = []
        for dev in (1, 99, -1):
            try:
                gpupool.memory_stats(dev)
                out["errors"].append(None)
            except RuntimeError as e:
                out["errors"].append(str(e))
        try:
            gpupool.reset_peak_memory_stats(1)
        except RuntimeError as e:
            out["errors"].append(str(e))
        print(json.dumps(out))
    """

    def test_torch_names_and_peak_reset(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        e = dict(os.environ, PYTHONPATH=HERE, LD_PRELOAD=os.environ["GPUPOOL_TEST_PRELOAD"],
                 LD_LIBRARY_PATH=os.environ["GPUPOOL_TEST_FAKE_DIR"], GPUPOOL_SHM_DIR=tmp,
                 GPUPOOL_REPORT="none", FAKECUDA_DEVICES="1")
        e.pop("GPUPOOL_CONF", None)
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(self.FIGURES)], env=e,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout.splitlines()[-1])
        self.assertEqual(out["version"], out["lib_version"])
        self.assertEqual(out["before"], [{}, 0])  # nothing allocated yet: no pool, not an error
        st, MB = out["stats"], 1 << 20
        self.assertEqual(out["funcs"], [st["allocated_bytes.all.current"], st["allocated_bytes.all.peak"],
                                        st["reserved_bytes.all.current"], st["reserved_bytes.all.peak"]])
        self.assertEqual(st["allocated_bytes.all.current"], 12 * MB)
        self.assertEqual(st["allocated_bytes.all.peak"], 28 * MB)
        alloc, max_alloc, res, max_res = out["after_reset"]
        self.assertEqual((alloc, max_alloc), (12 * MB, 12 * MB))
        self.assertEqual(max_res, res)
        self.assertLess(max_res, st["reserved_bytes.all.peak"] + 1)
        self.assertEqual(out["page_after_reset"], [max_alloc, max_res])
        self.assertEqual(len(out["errors"]), 4, out["errors"])
        for err in out["errors"]:
            self.assertIsNotNone(err)
            self.assertIn("invalid device argument", err)
        self.assertIn("this process has 1 CUDA device", out["errors"][0])

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give a file to another user (CI runs as root)")
    def test_page_name_taken_by_another_user(self):
        # another user created this process's page name before its first allocation, with 80
        # GiB in it: the process keeps its counters private (no page), and its own
        # memory_stats() gives its real figures, never the planted ones
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        code = textwrap.dedent("""
            import ctypes, json, os, struct, sys
            import gpupool
            with open(sys.argv[1], "rb") as f:
                data = bytearray(f.read())
            struct.pack_into("=i", data, 16, os.getpid())
            page = gpupool.page_path()
            with open(page, "wb") as f:
                f.write(data)
            os.chown(page, 65534, 65534)
            ctypes.CDLL("libcudart.so.13", mode=os.RTLD_GLOBAL)
            g = ctypes.CDLL(None)
            g.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
            p = ctypes.c_void_p()
            assert g.cudaMalloc(ctypes.byref(p), 3 << 20) == 0
            st = gpupool.memory_stats()
            out = {"reserved": st["reserved_bytes.all.current"], "allocated": st["allocated_bytes.all.current"]}
            try:
                gpupool.stats()
            except gpupool.GpupoolError as e:
                out["page"] = str(e)
            print(json.dumps(out))
            """)
        v = {"reserved_bytes": 80 << 30, "reserved_bytes_peak": 80 << 30, "allocated_bytes": 80 << 30}
        template = os.path.join(tmp, "template")
        with open(template, "wb") as f:
            f.write(build_page([build_slot(0, v)], pid=1))
        e = dict(os.environ, PYTHONPATH=HERE, LD_PRELOAD=os.environ["GPUPOOL_TEST_PRELOAD"],
                 LD_LIBRARY_PATH=os.environ["GPUPOOL_TEST_FAKE_DIR"], GPUPOOL_SHM_DIR=tmp,
                 GPUPOOL_REPORT="none", FAKECUDA_DEVICES="1")
        e.pop("GPUPOOL_CONF", None)
        r = subprocess.run([sys.executable, "-c", code, template], env=e, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout.splitlines()[-1])
        self.assertEqual(out["allocated"], 3 << 20)
        self.assertEqual(out["reserved"], 20 << 20)  # one medium segment, not 80 GiB
        self.assertIn("owned by uid 65534", out["page"])


def _torch_cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


@unittest.skipUnless(_torch_cuda(), "needs torch with CUDA")
class TorchTest(unittest.TestCase):
    @staticmethod
    def child_env(**extra):
        """A child Python that imports gpupool from here, without the caller's preload or knobs."""
        env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("LD_PRELOAD", None)
        env.pop("GPUPOOL_CONF", None)
        env.update(extra)
        return env

    def run_py(self, code, **extra_env):
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=self.child_env(**extra_env),
                              capture_output=True, text=True, timeout=300)

    def assertRan(self, r):
        self.assertEqual(r.returncode, 0, "stdout:\n%s\nstderr:\n%s" % (r.stdout, r.stderr[-3000:]))
        self.assertIn("ok", r.stdout.split())

    def setUp(self):
        try:
            gpupool.find_library()
        except gpupool.GpupoolError as e:
            self.skipTest(str(e))

    def test_pluggable_allocator(self):
        r = self.run_py("""
            import torch, gpupool
            gpupool.use_as_torch_allocator()
            x = torch.randn(1024, 1024, device="cuda"); y = x @ x; torch.cuda.synchronize()
            m = gpupool.memory_stats(0)
            assert m["reserved_bytes.all.current"] >= 2 * 4 << 20, m
            assert m["allocated_bytes.all.peak"] >= 2 * 4 << 20, m
            assert m["gpupool.allocs"] >= 2, m
            del x, y; torch.cuda.synchronize()
            print("released", gpupool.release())
            print("ok")
            """)
        self.assertRan(r)

    def test_out_of_memory_is_an_exception(self):
        # PyTorch does not check the pointer a pluggable allocator returns: gpupool throws,
        # PyTorch raises RuntimeError with gpupool's message, and the program goes on
        r = self.run_py("""
            import torch, gpupool
            gpupool.use_as_torch_allocator()
            x = torch.ones(256 << 20, dtype=torch.uint8, device="cuda")
            try:
                y = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
                print("no exception, data_ptr", y.data_ptr())
            except RuntimeError as e:
                print("raised:", type(e).__name__, e)
            z = torch.ones(256 << 20, dtype=torch.uint8, device="cuda")
            assert bool((x == 1).all()) and bool((z == 1).all())  # 256 MiB of bools each: fits
            m = gpupool.memory_stats(0)
            assert m["num_ooms"] == 1 and m["reserved_bytes.all.peak"] <= 1 << 30, m
            print("ok")
            """, GPUPOOL_CONF="limit:1G")
        self.assertRan(r)
        self.assertIn("raised: RuntimeError gpupool: device 0: out of memory allocating 2.0 GiB", r.stdout)
        self.assertIn("limit 1.0 GiB", r.stdout)

    def test_stream_ordered(self):
        # a block freed on a stream comes back at once on that stream; the default stream
        # gets it only behind that stream's work (a 50 ms kernel still writing it)
        r = self.run_py("""
            import torch, gpupool
            gpupool.use_as_torch_allocator()
            n = 32 << 20
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                a = torch.empty(n, dtype=torch.uint8, device="cuda"); pa = a.data_ptr(); del a
                b = torch.empty(n, dtype=torch.uint8, device="cuda")
                assert b.data_ptr() == pa, "same stream: reused at once"
                torch.cuda._sleep(100_000_000)
                b.fill_(3)
                del b
            c = torch.empty(n, dtype=torch.uint8, device="cuda")
            c.fill_(4)
            torch.cuda.synchronize()
            assert bool((c == 4).all()), "the side stream's late write reached the new tensor"
            print("reused_across_streams", c.data_ptr() == pa)
            print("ok")
            """)
        self.assertRan(r)

    def test_zero_size_and_release(self):
        r = self.run_py("""
            import torch, gpupool
            gpupool.use_as_torch_allocator()
            e1 = torch.empty(0, device="cuda"); e2 = torch.empty(0, device="cuda"); del e1, e2
            x = torch.ones(64 << 20, dtype=torch.uint8, device="cuda"); del x
            torch.cuda.synchronize()
            before = gpupool.memory_stats(0)["reserved_bytes.all.current"]
            released = gpupool.release()
            after = gpupool.memory_stats(0)["reserved_bytes.all.current"]
            assert released >= 64 << 20 and after == before - released, (before, released, after)
            print("ok")
            """)
        self.assertRan(r)

    def test_report_trace_and_page(self):
        # the exit report and the trace in pluggable mode, and the page read from another process
        d = tempfile.mkdtemp()
        try:
            report, trace = os.path.join(d, "report.json"), os.path.join(d, "trace.csv")
            env = self.child_env(GPUPOOL_REPORT=report, GPUPOOL_CONF="trace:" + trace, GPUPOOL_SHM_DIR=d)
            code = textwrap.dedent("""
                import sys, torch, gpupool
                gpupool.use_as_torch_allocator()
                x = torch.ones(100 << 20, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize()
                print("ready", flush=True)
                sys.stdin.readline()
                """)
            p = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                self.assertEqual(p.stdout.readline().strip(), "ready", p.stderr.read() if p.poll() else "")
                with mock.patch.dict(os.environ, GPUPOOL_SHM_DIR=d):
                    live = gpupool.stats(p.pid)[0]
                self.assertTrue(live["consistent"])
                self.assertGreaterEqual(live["allocated_bytes"], 100 << 20)
                p.stdin.write("\n")
                p.stdin.flush()
                self.assertEqual(p.wait(timeout=120), 0, p.stderr.read())
            finally:
                if p.poll() is None:
                    p.kill()
                p.stdout.close(); p.stderr.close(); p.stdin.close()
            with open(report) as f:
                dev = json.load(f)["processes"][0]["devices"][0]
            self.assertGreaterEqual(dev["allocated_bytes_peak"], 100 << 20)
            self.assertEqual(dev["allocs"], dev["frees"] + dev["live_blocks"])
            with open(trace) as f:
                rows = [line.split(",") for line in f.read().splitlines()[1:]]
            ops = [r[1] for r in rows]
            self.assertIn("malloc_async", ops)
            self.assertIn(str(100 << 20), [r[5] for r in rows if r[1] == "malloc_async"])
        finally:
            shutil.rmtree(d)

    def test_too_late(self):
        r = self.run_py("""
            import torch, gpupool
            x = torch.ones(1, device="cuda")
            try:
                gpupool.use_as_torch_allocator()
            except gpupool.GpupoolError as e:
                print("refused:", e)
            """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("before the first CUDA allocation", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
