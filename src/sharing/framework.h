/* The caches of the frameworks above gpupool (PyTorch's caching allocator, expandable
 * segments included, and CuPy's memory pools), emptied when another process needs the GPU's
 * memory (docs/sharing.md). Through the Python interpreter already in the process, found
 * with dlsym: nothing is loaded, no module is imported, nothing runs unless a request is
 * honoured, and then on a thread of its own with a Python thread's stack. */
#ifndef GP_FRAMEWORK_H
#define GP_FRAMEWORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Devices whose framework figures are kept (CUDA indices in the process). */
#define GP_FRAMEWORK_DEVICES 16

/* A Python interpreter runs in this process (not finalizing). Any thread; cheap after the
 * first call that finds one (no lock taken). */
bool gp_framework_present(void);

/* Whether a request is still worth emptying a cache once the interpreter's lock is held (a
 * busy program may have kept it for seconds): check(still) on the framework's thread, with
 * the interpreter's lock held, so it must take no lock of the interpreter's and must be
 * safe whenever it runs (it gets a copy of this struct, not a pointer to the caller's). */
struct gp_framework_still {
	bool (*check)(const struct gp_framework_still *);
	int device, pid;
	uint64_t ticket, bytes; /* the waiter's, and what the GPU must have free for it */
	uint64_t unpooled_before; /* the process's unpooled bytes on the device when posted */
};

/* Told the answer of a job, on the framework's thread (no lock of gpupool's held, the
 * interpreter's lock released): the caches emptied (or -ENOSYS: the interpreter is gone or
 * finalising), what a framework raised ("torch: RuntimeError: ...", "" none), and what PyTorch
 * holds reserved and unused on each device idle[0 .. nidle). */
typedef void (*gp_framework_done)(const struct gp_framework_still *still, int n, const char *what,
				  const uint64_t *idle, unsigned nidle);

/* Posts one request to the interpreter, run on the framework's thread, and returns at once:
 * with `empty`, it empties the caches of PyTorch (torch.cuda.empty_cache(), where torch is
 * imported and its CUDA initialised) and CuPy (free_all_blocks() of its default pools, where
 * cupy is imported); either way it measures what PyTorch holds reserved and unused on each
 * device (kept for gp_framework_idle). Only while the interpreter runs (never during
 * finalisation); still->check (when given) decides under the interpreter's lock whether to
 * empty after all. An exception a framework raises is caught and named, never printed.
 * `done` (when given) gets the answer. 0 posted (an empty posted while another job runs
 * waits behind it in one slot, which a later empty takes), -EBUSY (a measure while a job
 * runs), or -ENOSYS (no interpreter, it is finalising, or no thread). Never with a lock of gpupool
 * held. */
int gp_framework_post(bool empty, const struct gp_framework_still *still, gp_framework_done done);

/* What PyTorch held reserved and unused on `device` at the last request that measured it
 * (bytes; 0 unknown), and when (CLOCK_MONOTONIC ns, into *seen_ns unless NULL; 0 never). */
uint64_t gp_framework_idle(int device, uint64_t *seen_ns);

/* In a forked child: the parent's framework thread is not here. */
void gp_framework_after_fork(void);

#endif
