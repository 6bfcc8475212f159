/* What the kernel says about a process: its start time from /proc/<pid>/stat, its owner,
 * and the clocks as nanoseconds. Shared by the statistics page (is a page's writer still
 * the same process, and whose is it?) and the trace (t_ns since the process started).
 * libc only; no allocation. */
#ifndef GP_PROC_H
#define GP_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define GP_NS_PER_S 1000000000ull

/* clock_gettime(c) in ns; 0 when the clock cannot be read. */
uint64_t gp_clock_ns(clockid_t c);

/* Field 22 of /proc/<pid>/stat (starttime) as ns since boot (CLOCK_BOOTTIME; one clock
 * tick of resolution, usually 10 ms), and whether the process is a zombie (state Z or X).
 * 0, or a negative errno (-ENOENT: no such process; -EIO: unreadable). */
int gp_proc_start(int pid, uint64_t *since_boot_ns, bool *zombie);

/* The owner of /proc/<pid>: the process's effective uid (root's for a process that is not
 * dumpable, e.g. one that changed its uids). 0, or a negative errno (-ENOENT: no such
 * process, or hidden from this /proc). */
int gp_proc_owner(int pid, uid_t *uid);

#endif
