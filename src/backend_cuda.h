/* The pool backend over the real CUDA runtime, and the stream keys it understands: a
 * runtime stream handle as the calling thread names it, mapped to a gp_stream and back.
 * Knows CUDA types; must not depend on the pool's internals or the registry. */
#ifndef GP_BACKEND_CUDA_H
#define GP_BACKEND_CUDA_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "backend.h"

/* Fills `be` with the backend over the resolved runtime `rt` (runtime.h), which must
 * outlive it (be->ctx is rt). Fences (device_sync) and segment frees are refused with
 * -EBUSY while a stream capture is in progress (capture.h). */
struct gp_runtime;
void gp_cuda_backend_init(struct gp_backend *be, const struct gp_runtime *rt);

/* The stream key (gp_stream) of a runtime stream handle, as the calling thread names it.
 * `ptsz`: the call came through a _ptsz entry point, where stream 0 is the per-thread one.
 * The legacy default stream is key 0; a per-thread default stream gets a synthetic key
 * from gp_cuda_ptds_key() (streamkey.h: never a real handle, which is a pointer). */
gp_stream gp_cuda_ptds_key(void);
static inline gp_stream gp_cuda_stream_key(cudaStream_t s, bool ptsz)
{
	if (s == cudaStreamPerThread || (s == 0 && ptsz))
		return gp_cuda_ptds_key();
	if (s == 0 || s == cudaStreamLegacy)
		return 0;
	return (gp_stream)s;
}

#endif
