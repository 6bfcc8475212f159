/* The CUDA runtime's entry points, resolved once from the libcudart the process already
 * loaded (never a second copy). Owns the table and its resolution, nothing else: must not
 * depend on the pool, the registry or any other gpupool module but the log. */
#ifndef GP_RUNTIME_H
#define GP_RUNTIME_H

#include <cuda_runtime_api.h>

/* The entry points that come in two variants, which differ in what stream 0 names: the
 * plain ones (the legacy default stream) and the _ptsz ones (the calling thread's
 * per-thread default stream). Where the runtime lacks a _ptsz entry point, its slot holds
 * the plain one: callers pick the slot for their call's variant and call it. */
enum gp_runtime_variant { GP_RT_PLAIN = 0, GP_RT_PTSZ = 1 };

struct gp_runtime_streamed {
	cudaError_t (*MallocAsync)(void **, size_t, cudaStream_t);
	cudaError_t (*FreeAsync)(void *, cudaStream_t);
	cudaError_t (*EventRecord)(cudaEvent_t, cudaStream_t);
	cudaError_t (*StreamWaitEvent)(cudaStream_t, cudaEvent_t, unsigned);
	cudaError_t (*StreamIsCapturing)(cudaStream_t, enum cudaStreamCaptureStatus *);
	cudaError_t (*StreamBeginCapture)(cudaStream_t, enum cudaStreamCaptureMode);
	cudaError_t (*StreamEndCapture)(cudaStream_t, cudaGraph_t *);
};

struct gp_runtime {
	cudaError_t (*Malloc)(void **, size_t);
	cudaError_t (*Free)(void *);
	cudaError_t (*GetDevice)(int *);
	cudaError_t (*SetDevice)(int);
	cudaError_t (*GetDeviceCount)(int *);
	cudaError_t (*DeviceSynchronize)(void);
	cudaError_t (*GetLastError)(void);
	cudaError_t (*PeekAtLastError)(void);
	cudaError_t (*MemGetInfo)(size_t *, size_t *);
	cudaError_t (*EventCreateWithFlags)(cudaEvent_t *, unsigned);
	cudaError_t (*EventDestroy)(cudaEvent_t);
	cudaError_t (*StreamDestroy)(cudaStream_t);
	/* optional: NULL where the runtime lacks them */
	cudaError_t (*ThreadExchangeStreamCaptureMode)(enum cudaStreamCaptureMode *);
	cudaError_t (*IpcGetMemHandle)(cudaIpcMemHandle_t *, void *);
	cudaError_t (*DeviceReset)(void);
	/* indexed by enum gp_runtime_variant; every slot is set */
	struct gp_runtime_streamed variant[2];
};

/* Resolves the table on first use (pthread_once; thread-safe). Returns NULL when no
 * libcudart is loaded in the process or one of the required entry points is missing
 * (logged once). */
const struct gp_runtime *gp_runtime_get(void);

#endif
