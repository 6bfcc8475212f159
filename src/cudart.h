/* The real CUDA runtime: a table of the runtime's own entry points, resolved once from the
 * libcudart the process already loaded (never another copy), and the pool backend over it.
 * Only the shim and the hooks use this; the pool never sees CUDA types. */
#ifndef GP_CUDART_H
#define GP_CUDART_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "backend.h"

struct gp_cudart {
	cudaError_t (*Malloc)(void **, size_t);
	cudaError_t (*Free)(void *);
	cudaError_t (*MallocAsync)(void **, size_t, cudaStream_t);
	cudaError_t (*MallocAsync_ptsz)(void **, size_t, cudaStream_t);
	cudaError_t (*FreeAsync)(void *, cudaStream_t);
	cudaError_t (*FreeAsync_ptsz)(void *, cudaStream_t);
	cudaError_t (*GetDevice)(int *);
	cudaError_t (*SetDevice)(int);
	cudaError_t (*GetDeviceCount)(int *);
	cudaError_t (*DeviceSynchronize)(void);
	cudaError_t (*GetLastError)(void);
	cudaError_t (*PeekAtLastError)(void);
	cudaError_t (*MemGetInfo)(size_t *, size_t *);
	cudaError_t (*EventCreateWithFlags)(cudaEvent_t *, unsigned);
	cudaError_t (*EventRecord)(cudaEvent_t, cudaStream_t);
	cudaError_t (*EventRecord_ptsz)(cudaEvent_t, cudaStream_t);
	cudaError_t (*EventDestroy)(cudaEvent_t);
	cudaError_t (*StreamWaitEvent)(cudaStream_t, cudaEvent_t, unsigned);
	cudaError_t (*StreamWaitEvent_ptsz)(cudaStream_t, cudaEvent_t, unsigned);
	cudaError_t (*StreamIsCapturing)(cudaStream_t, enum cudaStreamCaptureStatus *);
	cudaError_t (*StreamIsCapturing_ptsz)(cudaStream_t, enum cudaStreamCaptureStatus *);
	cudaError_t (*StreamBeginCapture)(cudaStream_t, enum cudaStreamCaptureMode);
	cudaError_t (*StreamBeginCapture_ptsz)(cudaStream_t, enum cudaStreamCaptureMode);
	cudaError_t (*StreamEndCapture)(cudaStream_t, cudaGraph_t *);
	cudaError_t (*StreamEndCapture_ptsz)(cudaStream_t, cudaGraph_t *);
	cudaError_t (*StreamDestroy)(cudaStream_t);
	cudaError_t (*ThreadExchangeStreamCaptureMode)(enum cudaStreamCaptureMode *);
	cudaError_t (*IpcGetMemHandle)(cudaIpcMemHandle_t *, void *);
	cudaError_t (*DeviceReset)(void);
};

/* Resolves the table on first use (thread-safe). Returns NULL when no libcudart is loaded
 * in the process or one of the required entry points is missing (logged once). */
const struct gp_cudart *gp_cudart_get(void);

/* The backend over the real runtime. Fences (device_sync) are refused while
 * gp_cudart_captures() > 0. */
const struct gp_backend *gp_cudart_backend(void);

/* Stream captures in progress, as seen by the capture hooks. Begin/end go through the
 * capture gate so that no fence's device synchronize overlaps the start of a capture. */
void gp_cudart_capture_begin(void);
void gp_cudart_capture_end(void);
int gp_cudart_captures(void);
/* In a forked child: no capture of the parent's is ours, and the gate may have been held
 * by a parent thread that does not exist here. */
void gp_cudart_after_fork(void);
/* The counter itself, for a check on the hot path without a call. */
const atomic_int *gp_cudart_capture_counter(void);

/* The stream key (gp_stream) of a runtime stream handle, as the calling thread names it.
 * `ptsz`: the call came through a _ptsz entry point, where stream 0 is the per-thread one.
 * The legacy default stream is key 0; a per-thread default stream gets a synthetic key
 * from gp_cudart_ptds_key() (streamkey.h: never a real handle, which is a pointer). */
gp_stream gp_cudart_ptds_key(void);
static inline gp_stream gp_cudart_stream_key(cudaStream_t s, bool ptsz)
{
	if (s == cudaStreamPerThread || (s == 0 && ptsz))
		return gp_cudart_ptds_key();
	if (s == 0 || s == cudaStreamLegacy)
		return 0;
	return (gp_stream)s;
}

/* Leaves `err` as the runtime's last error for this thread, as a failing native call
 * would (cudaErrorMemoryAllocation or cudaErrorInvalidValue). */
void gp_cudart_set_last_error(cudaError_t err);

#endif
