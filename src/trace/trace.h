/* The trace recorder: appends one row per hooked allocation call to a CSV file (gzip'd
 * when the name ends in .gz) in the format of docs/replay.md. Rows are kept
 * in fixed per-thread buffers and written under one lock when a buffer fills and at
 * close/exit. Depends on libc (zlib is loaded at run time, for .gz traces only): no CUDA,
 * no pool, no getenv. */
#ifndef GP_TRACE_H
#define GP_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"

/* Rows per thread buffer and number of buffers: memory is bounded by their product
 * (GP_TRACE_NBUF * GP_TRACE_BUF_ROWS * 48 bytes = 1.5 MiB). A thread that finds no free
 * buffer (more than GP_TRACE_NBUF threads recording at once) writes its rows straight to
 * the file under the lock: slower, never unbounded. */
#define GP_TRACE_NBUF 64
#define GP_TRACE_BUF_ROWS 512

/* Starts recording to `path` (opened with gp_outfile_open: a regular file, created mode
 * 0600 or truncated, never through a symbolic link): gzip when it ends in .gz (zlib is
 * loaded then; -ENOSYS when it cannot be). The descriptor is moved out of the low numbers
 * (F_DUPFD_CLOEXEC) and its device and inode kept: before each block of text is written,
 * flushed or closed, fstat must find the same file, else recording stops with one warning
 * and the number is never touched again (the program closed it and may own it now).
 * Reads the process start time once. The owner
 * calls gp_trace_close at exit (exit_report.c does). Returns 0, -EALREADY when a trace is
 * open, -EINVAL, or gp_outfile_open's or gzdopen's negative errno. Not thread-safe against
 * itself: call it once, from the registry's creation of the first pool (pools.c). */
int gp_trace_open(const char *path);

/* Records one call. Thread-safe and lock-free in the common case (a per-thread buffer
 * with an uncontended per-buffer mutex); takes the file lock when the buffer is full.
 * t_ns (ns since the process started, CLOCK_BOOTTIME minus /proc/self/stat starttime) and
 * tid (gettid) are taken here. No-op when no trace is open. Never allocates. */
void gp_trace_record(int op, int dev, uintptr_t stream, size_t size, uintptr_t ptr,
		     uint64_t dur_ns, int err);
/* The same, for a caller that timed the call with gp_trace_now_ns: `end_ns` is the clock
 * when the call returned, so the row needs no clock read of its own. */
void gp_trace_record_at(int op, int dev, uintptr_t stream, size_t size, uintptr_t ptr,
			uint64_t end_ns, uint64_t dur_ns, int err);
/* The trace's clock (CLOCK_BOOTTIME, ns). */
uint64_t gp_trace_now_ns(void);

/* Flushes every thread's buffer and closes the file. Rows of one thread are in call order;
 * across threads the file is in flush order (readers sort with a window, see tracefile.h).
 * Idempotent; safe at exit (no CUDA, no allocation). Returns 0 or the negative errno of
 * the last failed write/close. Rows recorded after close are dropped. */
int gp_trace_close(void);

/* Writes every row recorded so far, by every thread, to the file: a plain file's buffer is
 * written out, a .gz is flushed to a byte boundary (Z_SYNC_FLUSH: a reader gets every row,
 * though the gzip stream has no end yet). Recording goes on. Thread-safe. Returns 0,
 * -ENOENT when no trace is open (or its descriptor was lost, above), or -EIO when a write
 * failed (now or earlier). */
int gp_trace_flush(void);

/* For a forked child (pthread_atfork child handler): drops the parent's trace without
 * writing anything (the parent owns the file and its unflushed rows), resets the locks,
 * and leaves recording off. Async-signal-safe enough for an atfork child handler. */
void gp_trace_forget(void);

/* Number of rows written to the file so far (tests, the exit report). */
uint64_t gp_trace_rows_written(void);

#endif
