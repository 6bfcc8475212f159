/* The CUDA runtime's entry points, resolved from the libcudart the process has loaded
 * (never a second copy), as soon as one is. Owns the table and its resolution, nothing
 * else: must not depend on the pool, the registry or any other gpupool module but the log. */
#ifndef GP_RUNTIME_H
#define GP_RUNTIME_H

#include <cuda_runtime_api.h>

/* The entry points that come in two variants, which differ in what stream 0 names: the
 * plain ones (the legacy default stream) and the _ptsz ones (the calling thread's
 * per-thread default stream). Where the runtime lacks a _ptsz entry point, its slot holds
 * the plain one: callers pick the slot for their call's variant and call it. */
enum gp_runtime_variant { GP_RT_PLAIN = 0, GP_RT_PTSZ = 1 };

/* Every entry point is NULL where the runtime lacks it (an older or stripped libcudart):
 * callers check before calling. gp_runtime_lacks says whether the pool can run at all. */
struct gp_runtime_streamed {
	cudaError_t (*MallocAsync)(void **, size_t, cudaStream_t);
	cudaError_t (*FreeAsync)(void *, cudaStream_t);
	cudaError_t (*EventRecord)(cudaEvent_t, cudaStream_t);
	cudaError_t (*StreamWaitEvent)(cudaStream_t, cudaEvent_t, unsigned);
	cudaError_t (*StreamIsCapturing)(cudaStream_t, enum cudaStreamCaptureStatus *);
	cudaError_t (*StreamBeginCapture)(cudaStream_t, enum cudaStreamCaptureMode);
	cudaError_t (*StreamEndCapture)(cudaStream_t, cudaGraph_t *);
	cudaError_t (*MallocFromPoolAsync)(void **, size_t, cudaMemPool_t, cudaStream_t);
};

struct gp_runtime {
	/* what the pool needs (gp_runtime_lacks) */
	cudaError_t (*Malloc)(void **, size_t);
	cudaError_t (*Free)(void *);
	cudaError_t (*GetDevice)(int *);
	cudaError_t (*SetDevice)(int);
	cudaError_t (*GetDeviceCount)(int *);
	cudaError_t (*DeviceSynchronize)(void);
	cudaError_t (*GetLastError)(void);
	cudaError_t (*PeekAtLastError)(void);
	cudaError_t (*MemGetInfo)(size_t *, size_t *);
	/* what it does without: cross-stream reuse waits for a fence instead of an event */
	cudaError_t (*EventCreateWithFlags)(cudaEvent_t *, unsigned);
	cudaError_t (*EventDestroy)(cudaEvent_t);
	/* what markers need (else fences are device synchronizes) */
	cudaError_t (*EventQuery)(cudaEvent_t);
	cudaError_t (*EventSynchronize)(cudaEvent_t);
	/* passed through, and used where present */
	cudaError_t (*StreamDestroy)(cudaStream_t);
	cudaError_t (*StreamCreate)(cudaStream_t *);
	cudaError_t (*StreamCreateWithFlags)(cudaStream_t *, unsigned);
	cudaError_t (*StreamCreateWithPriority)(cudaStream_t *, unsigned, int);
	cudaError_t (*ThreadExchangeStreamCaptureMode)(enum cudaStreamCaptureMode *);
	cudaError_t (*IpcGetMemHandle)(cudaIpcMemHandle_t *, void *);
	cudaError_t (*DeviceReset)(void);
	/* the allocations gpupool counts but does not pool (calls/unpooled.h), and what it asks
	 * of the program's memory pools */
	cudaError_t (*MallocManaged)(void **, size_t, unsigned);
	cudaError_t (*MallocPitch)(void **, size_t *, size_t, size_t);
	cudaError_t (*Malloc3D)(struct cudaPitchedPtr *, struct cudaExtent);
	cudaError_t (*MemPoolCreate)(cudaMemPool_t *, const struct cudaMemPoolProps *);
	cudaError_t (*MemPoolDestroy)(cudaMemPool_t);
	cudaError_t (*DeviceSetMemPool)(int, cudaMemPool_t);
	cudaError_t (*MemPoolGetAttribute)(cudaMemPool_t, enum cudaMemPoolAttr, void *);
	cudaError_t (*MemPoolTrimTo)(cudaMemPool_t, size_t);
	/* a device's UUID and name where the driver cannot be asked (gp_runtime_device_uuid) */
	cudaError_t (*GetDeviceProperties)(struct cudaDeviceProp *, int);
	/* the driver's entry points as the runtime hands them out (CUDA 11.3 and 12.5 on), each
	 * in its plain and _ptsz variant (no fallback between them: the flags' default differs),
	 * and the runtime's version, which cudaGetDriverEntryPoint asks the driver for */
	cudaError_t (*GetDriverEntryPoint[2])(const char *, void **, unsigned long long,
					      enum cudaDriverEntryPointQueryResult *);
	cudaError_t (*GetDriverEntryPointByVersion[2])(const char *, void **, unsigned int, unsigned long long,
						       enum cudaDriverEntryPointQueryResult *);
	cudaError_t (*RuntimeGetVersion)(int *);
	/* indexed by enum gp_runtime_variant */
	struct gp_runtime_streamed variant[2];
};

/* The table of the libcudart loaded in the process, or NULL while none is. The first call
 * that finds one resolves it; until then each call looks again (one lock, a dlsym and a walk
 * of the loaded objects), so a runtime dlopen'ed after the first call is found by the next.
 * Once found: one acquire load, and the table never changes. Thread-safe. */
const struct gp_runtime *gp_runtime_get(void);

/* The UUID of `device` (16 raw bytes) from the runtime's device properties: for a process
 * whose runtime has not loaded the driver where gpupool can see it; with name (unless NULL)
 * its name too, NUL-terminated in name_cap bytes ("" when the runtime gives none). 0, or
 * -ENOSYS / -EIO. Slow (a properties query): once per device. The program's last error is
 * left as it was. */
int gp_runtime_device_uuid(const struct gp_runtime *rt, int device, unsigned char out[16], char *name,
			   size_t name_cap);

/* In a forked child: the lock of the lookup, maybe held by a parent thread that does not
 * exist here, is made free. */
void gp_runtime_after_fork(void);

/* NULL when the pool can run over `rt`, else the name of the first entry point it lacks
 * that the pool needs: the ones marked so above, and, for a variant that can begin stream
 * captures, its cudaStreamEndCapture and cudaStreamIsCapturing (without them a capture's
 * end could not be seen, and the pool would synchronize the device during it). */
const char *gp_runtime_lacks(const struct gp_runtime *rt);

/* Runs the calling thread in relaxed capture mode until gp_runtime_relax_end(the returned
 * mode): the calls gpupool makes on its own behalf must not be refused (and invalidate a
 * capture) because another thread captures in global mode. `rt`: the resolved runtime. */
static inline enum cudaStreamCaptureMode gp_runtime_relax_begin(const struct gp_runtime *rt)
{
	enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
	if (rt->ThreadExchangeStreamCaptureMode)
		(void)rt->ThreadExchangeStreamCaptureMode(&mode);
	return mode;
}

static inline void gp_runtime_relax_end(const struct gp_runtime *rt, enum cudaStreamCaptureMode mode)
{
	if (rt->ThreadExchangeStreamCaptureMode)
		(void)rt->ThreadExchangeStreamCaptureMode(&mode);
}

#endif
