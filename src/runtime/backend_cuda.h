/* The pool backend over the real CUDA runtime, and the stream keys it understands: a
 * runtime stream handle as the calling thread names it, mapped to a gp_stream and back.
 * Knows CUDA types; must not depend on the pool's internals or the registry. */
#ifndef GP_BACKEND_CUDA_H
#define GP_BACKEND_CUDA_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "backend.h"
#include "streamkey.h"

/* Fills `be` with the backend over the resolved runtime `rt` (runtime.h), which must
 * outlive it (be->ctx is rt). Fences (device_sync, fence_mark) and segment frees are refused
 * with -EBUSY while a stream capture is in progress (capture.h). */
struct gp_runtime;
void gp_cuda_backend_init(struct gp_backend *be, const struct gp_runtime *rt);

/* The error of this thread's last segment the runtime refused with an error that is not
 * out of memory (segment_alloc's -EIO), as cudaMalloc returned it; cudaSuccess when none.
 * The runtime's last error is left as that cudaMalloc left it. */
cudaError_t gp_cuda_backend_error(void);

/* Markers (backend.h fence_mark): an event on the legacy default stream and one on each
 * non-blocking stream gpupool sees made (through the runtime or the driver). The stream hooks report them:
 * gp_cuda_stream_created after the runtime made `s` with `flags` (the device current then
 * is the stream's), gp_cuda_stream_destroying before the runtime destroys `s` (the work it
 * still has queued is kept for the next marker). More than 64 such streams on a device, or
 * a runtime without events: fence_mark answers -ENOTSUP (fences are device synchronizes).
 * Thread-safe; the first takes no lock the pool holds. */
void gp_cuda_stream_created(const struct gp_runtime *rt, cudaStream_t s, unsigned flags);
/* The same for a non-blocking stream of `device` made through the driver (cuStreamCreate in
 * the device's primary context); a stream already known is ignored. */
void gp_cuda_stream_add(int device, cudaStream_t s);
void gp_cuda_stream_destroying(const struct gp_runtime *rt, cudaStream_t s);
/* Around a call that resets `device` (cudaDeviceReset, cuDevicePrimaryCtxReset, cuCtxDestroy
 * of its primary context), while the pools' backend calls on it are held (the registry's
 * reset gate). Before it: the events a reset would destroy and no pool holds (spare markers,
 * destroyed streams' tails) are destroyed. After it, only when it succeeded: every stream
 * and event of the device is forgotten, without a CUDA call (the reset destroyed them), and
 * the markers pools hold become orphans, freed when their pool drops them. */
void gp_cuda_device_reset_begin(const struct gp_runtime *rt, int device);
void gp_cuda_device_reset_done(int device);
/* In a forked child: the parent's streams and markers are forgotten. */
void gp_cuda_backend_after_fork(void);

/* The stream key (gp_stream) of a runtime stream handle, as the calling thread names it
 * (streamkey.h). `ptsz`: the call came through a _ptsz entry point. */
static inline gp_stream gp_cuda_stream_key(cudaStream_t s, bool ptsz)
{
	return gp_streamkey_of((uintptr_t)s, ptsz);
}

#endif
