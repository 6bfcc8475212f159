/* gpupool: the public C API of libgpupool.so.
 *
 * Most programs never call it: LD_PRELOAD=libgpupool.so interposes cudaMalloc, cudaFree,
 * cudaMallocAsync and cudaFreeAsync. These entry points are for programs and frameworks
 * that want to steer the pool or read its figures. All are thread-safe. */
#ifndef GPUPOOL_H
#define GPUPOOL_H

#include <stddef.h>
#include <sys/types.h>

#include "gpupool/stats.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Releases the cached memory of `device` (-1: every device) to the CUDA runtime, after a
 * fence retires pending frees. Returns the bytes released, or a negative errno: -ENODEV for
 * a device out of range, -ENOSYS when the pool is off (GPUPOOL_DISABLE, no CUDA runtime in
 * the process, or one without an entry point the pool needs: docs/programs.md, "When gpupool steps
 * aside"). */
long long gpupool_release(int device);

/* Copies a consistent snapshot of `device`'s counters. While another thread is changing
 * them (the pool keeps them mid-update during its own runtime calls: a segment's cudaMalloc,
 * or a cudaFree that waits for the device's work), it waits for them, at most 5 s. Returns 0;
 * -ENODEV when gpupool holds no pool for that device; -ENOSYS when the pool is off (as for
 * gpupool_release); -EAGAIN when the counters stayed mid-update for the whole wait (a
 * runtime call that took longer: call again). */
int gpupool_stats(int device, struct gpupool_device_stats *out);

/* Restarts the peak of every gauge of `device` (-1: every device) from its current value:
 * reserved_bytes_peak becomes reserved_bytes, allocated_bytes_peak allocated_bytes, and so on
 * for each gauge of gpupool/stats.h, in gpupool_stats, the statistics page and the exit report
 * alike (what torch.cuda.reset_peak_memory_stats does to PyTorch's peaks). Counters (allocs,
 * ooms, ...) are left alone, and so is the pool's policy, which keeps to the highest reserved
 * figure of the whole run. Returns 0, also for a device gpupool holds no pool for yet (its
 * peaks are its current values, 0); -ENODEV for a device out of range; -ENOSYS when the pool
 * is off (as for gpupool_release). */
int gpupool_reset_peak_stats(int device);

/* Writes every row of the trace this process records (the trace knob, GPUPOOL_CONF=
 * trace:PATH) to its file so far, from every thread; recording goes on. A .gz trace is
 * flushed to a byte boundary: its rows can be read (zlib's inflate, Python's zlib module)
 * though the gzip stream ends only at exit. When `path` is not NULL, copies the trace's path
 * there (NUL-terminated). Returns 0; -ENOENT when no trace is being recorded (none asked for,
 * it could not be opened, or nothing was allocated yet: the trace starts with the first
 * pool); -ENOSYS when the pool is off (as for gpupool_release); -EIO when a write failed
 * (rows were lost); -ERANGE when `len` is too small for the path (the rows were written). */
int gpupool_trace_flush(char *path, size_t len);

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *gpupool_version(void);

/* PyTorch's pluggable allocator interface (torch.cuda.memory.CUDAPluggableAllocator):
 * stream-ordered allocation on `stream` of `device`; `stream` is a cudaStream_t. Size 0 or a
 * bad device: NULL. Out of memory: where the process has a C++ runtime (as PyTorch does),
 * throws std::runtime_error("gpupool: device N: out of memory allocating ..."), which PyTorch
 * raises as RuntimeError (it does not check for NULL); elsewhere NULL, with
 * cudaErrorMemoryAllocation as the runtime's last error. */
void *gpupool_malloc(ssize_t size, int device, void *stream);
void gpupool_free(void *ptr, ssize_t size, int device, void *stream);

#ifdef __cplusplus
}
#endif

#endif
