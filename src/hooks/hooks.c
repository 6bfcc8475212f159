/* The exported names, and nothing else: each CUDA entry point gpupool interposes and the
 * public gpupool_* API, each a one-line forward to the shim (torch_entry.c for
 * gpupool_malloc/free/reset_peak_stats). Definitions are unversioned (libgpupool.map) so that references
 * bound to cudaMalloc@libcudart.so.13 reach them. */
#include <errno.h>

#include "gpupool.h"
#include "hooks.h"
#include "hooks_driver.h"
#include "runtime_calls.h"
#include "torch_entry.h"

#define GP_EXPORT __attribute__((visibility("default")))

GP_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	return gp_calls_malloc(devPtr, size, 0, GP_CALL_SYNC);
}

GP_EXPORT cudaError_t cudaFree(void *devPtr) { return gp_calls_free(devPtr, 0, GP_CALL_SYNC); }

GP_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	return gp_calls_malloc(devPtr, size, hStream, GP_CALL_ASYNC);
}

GP_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
	return gp_calls_malloc(devPtr, size, hStream, GP_CALL_ASYNC_PTSZ);
}

GP_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	return gp_calls_free(devPtr, hStream, GP_CALL_ASYNC);
}

GP_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
	return gp_calls_free(devPtr, hStream, GP_CALL_ASYNC_PTSZ);
}

GP_EXPORT cudaError_t cudaMemGetInfo(size_t *free, size_t *total) { return gp_calls_mem_get_info(free, total); }

GP_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
	return gp_calls_ipc_get_mem_handle(handle, devPtr);
}

GP_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	return gp_calls_begin_capture(stream, mode, false);
}

GP_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	return gp_calls_begin_capture(stream, mode, true);
}

GP_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	return gp_calls_end_capture(stream, pGraph, false);
}

GP_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
	return gp_calls_end_capture(stream, pGraph, true);
}

GP_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) { return gp_calls_stream_destroy(stream); }

GP_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	return gp_calls_stream_create(pStream, 0, 0, GP_STREAM_CREATE);
}

GP_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	return gp_calls_stream_create(pStream, flags, 0, GP_STREAM_CREATE_FLAGS);
}

GP_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
	return gp_calls_stream_create(pStream, flags, priority, GP_STREAM_CREATE_PRIORITY);
}

GP_EXPORT cudaError_t cudaDeviceReset(void) { return gp_calls_device_reset(); }

GP_EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	return gp_calls_malloc_managed(devPtr, size, flags);
}

GP_EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	return gp_calls_malloc_pitch(devPtr, pitch, width, height);
}

GP_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
	return gp_calls_malloc_3d(pitchedDevPtr, extent);
}

GP_EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
	return gp_calls_malloc_from_pool(ptr, size, memPool, stream, false);
}

GP_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
						   cudaStream_t stream)
{
	return gp_calls_malloc_from_pool(ptr, size, memPool, stream, true);
}

GP_EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
	return gp_calls_mem_pool_create(memPool, poolProps);
}

GP_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) { return gp_calls_mem_pool_destroy(memPool); }

GP_EXPORT cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
	return gp_calls_device_set_mem_pool(device, memPool);
}

/* The CUDA 12 and 13 signatures. CUDA 11.3-11.8's cudaGetDriverEntryPoint had no
 * driverStatus: under such a runtime the fourth argument is whatever its caller's register
 * held, and the call body neither passes it on nor reads it. */
GP_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
					      enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return gp_calls_get_driver_entry_point(symbol, funcPtr, 0, false, flags, driverStatus, false,
					       &gp_hooks_driver_entries);
}

GP_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
						   enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return gp_calls_get_driver_entry_point(symbol, funcPtr, 0, false, flags, driverStatus, true,
					       &gp_hooks_driver_entries);
}

GP_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
						       unsigned long long flags,
						       enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return gp_calls_get_driver_entry_point(symbol, funcPtr, cudaVersion, true, flags, driverStatus, false,
					       &gp_hooks_driver_entries);
}

GP_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
							    unsigned int cudaVersion, unsigned long long flags,
							    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return gp_calls_get_driver_entry_point(symbol, funcPtr, cudaVersion, true, flags, driverStatus, true,
					       &gp_hooks_driver_entries);
}

GP_EXPORT long long gpupool_release(int device) { return gp_calls_release(device); }

GP_EXPORT int gpupool_stats(int device, struct gpupool_device_stats *out) { return gp_calls_stats(device, out); }

GP_EXPORT int gpupool_reset_peak_stats(int device) { return gp_torch_reset_peak_stats(device); }

GP_EXPORT int gpupool_trace_flush(char *path, size_t len) { return gp_calls_trace_flush(path, len); }

GP_EXPORT const char *gpupool_version(void) { return GP_VERSION; }

GP_EXPORT void *gpupool_malloc(ssize_t size, int device, void *stream)
{
	return size > 0 ? gp_torch_malloc((size_t)size, device, (cudaStream_t)stream) : NULL;
}

GP_EXPORT void gpupool_free(void *ptr, ssize_t size, int device, void *stream)
{
	(void)size;
	gp_torch_free(ptr, device, (cudaStream_t)stream);
}
