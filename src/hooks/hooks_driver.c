/* The driver API's exported names, and nothing else: each driver entry point gpupool
 * interposes (libcuda.h, GP_DRIVER_HOOKED), a one-line forward to the call bodies
 * (driver_calls.h), and the rows of the shim's table of them (entries.h), passed down for
 * dlsym.c and cuGetProcAddress. Definitions are unversioned (libgpupool.map), like libcuda's own. */
#include <stddef.h>

#include "driver_calls.h"
#include "hooks_driver.h"

#define GP_EXPORT __attribute__((visibility("default")))

GP_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	return gp_calls_driver_mem_alloc(dptr, bytesize, NULL, GP_DRV_SYNC);
}

GP_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { return gp_calls_driver_mem_free(dptr, NULL, GP_DRV_SYNC); }

GP_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return gp_calls_driver_mem_alloc(dptr, bytesize, hStream, GP_DRV_ASYNC);
}

GP_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return gp_calls_driver_mem_alloc(dptr, bytesize, hStream, GP_DRV_ASYNC_PTSZ);
}

GP_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return gp_calls_driver_mem_free(dptr, hStream, GP_DRV_ASYNC);
}

GP_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return gp_calls_driver_mem_free(dptr, hStream, GP_DRV_ASYNC_PTSZ);
}

GP_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total) { return gp_calls_driver_mem_get_info(free, total); }

GP_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	return gp_calls_driver_ipc_get_mem_handle(pHandle, dptr);
}

GP_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	return gp_calls_driver_mem_get_address_range(pbase, psize, dptr);
}

GP_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	return gp_calls_driver_pointer_get_attribute(data, attribute, ptr);
}

GP_EXPORT CUresult cuStreamBeginCapture(CUstream hStream)
{
	return gp_calls_driver_begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, GP_DRV_BEGIN_V1);
}

GP_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
	return gp_calls_driver_begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, GP_DRV_BEGIN_V1_PTSZ);
}

GP_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	return gp_calls_driver_begin_capture(hStream, mode, GP_DRV_BEGIN_V2);
}

GP_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	return gp_calls_driver_begin_capture(hStream, mode, GP_DRV_BEGIN_V2_PTSZ);
}

GP_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	return gp_calls_driver_end_capture(hStream, phGraph, false);
}

GP_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	return gp_calls_driver_end_capture(hStream, phGraph, true);
}

GP_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return gp_calls_driver_stream_create(phStream, Flags, 0, false, __builtin_return_address(0));
}

GP_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	return gp_calls_driver_stream_create(phStream, flags, priority, true, __builtin_return_address(0));
}

GP_EXPORT CUresult cuStreamDestroy(CUstream hStream) { return gp_calls_driver_stream_destroy(hStream, false); }

GP_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) { return gp_calls_driver_stream_destroy(hStream, true); }

GP_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return gp_calls_driver_primary_ctx_reset(dev, false); }

GP_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return gp_calls_driver_primary_ctx_reset(dev, true); }

GP_EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return gp_calls_driver_ctx_destroy(ctx, false); }

GP_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) { return gp_calls_driver_ctx_destroy(ctx, true); }

GP_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return gp_calls_driver_get_proc_address(symbol, pfn, cudaVersion, flags, NULL, false, &gp_hooks_driver_entries);
}

GP_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				       CUdriverProcAddressQueryResult *symbolStatus)
{
	return gp_calls_driver_get_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus, true,
					       &gp_hooks_driver_entries);
}

GP_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			       unsigned long long flags)
{
	return gp_calls_driver_mem_create(handle, size, prop, flags);
}

GP_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) { return gp_calls_driver_mem_release(handle); }

GP_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
			    unsigned long long flags)
{
	return gp_calls_driver_mem_map(ptr, size, offset, handle, flags);
}

GP_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) { return gp_calls_driver_mem_unmap(ptr, size); }

GP_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	return gp_calls_driver_mem_set_access(ptr, size, desc, count);
}

GP_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) { return gp_calls_driver_mem_address_free(ptr, size); }

GP_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	return gp_calls_driver_mem_retain_allocation_handle(handle, addr);
}

GP_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
						CUmemAllocationHandleType handleType, unsigned long long flags)
{
	return gp_calls_driver_mem_export(shareableHandle, handle, handleType, flags);
}

GP_EXPORT CUresult cuMemMapArrayAsync(CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream)
{
	return gp_calls_driver_mem_map_array(mapInfoList, count, hStream, false);
}

GP_EXPORT CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream)
{
	return gp_calls_driver_mem_map_array(mapInfoList, count, hStream, true);
}

GP_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	return gp_calls_driver_mem_alloc_managed(dptr, bytesize, flags);
}

GP_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
				      unsigned int ElementSizeBytes)
{
	return gp_calls_driver_mem_alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

GP_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	return gp_calls_driver_mem_pool_create(pool, poolProps);
}

GP_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) { return gp_calls_driver_mem_pool_destroy(pool); }

GP_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	return gp_calls_driver_device_set_mem_pool(dev, pool);
}

GP_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	return gp_calls_driver_mem_alloc_from_pool(dptr, bytesize, pool, hStream, false);
}

GP_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
						CUstream hStream)
{
	return gp_calls_driver_mem_alloc_from_pool(dptr, bytesize, pool, hStream, true);
}

/* ---- the table ------------------------------------------------------------------------ */

#define GP_HOOK_ROW_(n) {#n, (void (*)(void))n, offsetof(struct gp_driver, n)},
static const struct gp_entry rows[] = {GP_DRIVER_HOOKED(GP_HOOK_ROW_)};
#undef GP_HOOK_ROW_

const struct gp_entries gp_hooks_driver_entries = {rows, sizeof rows / sizeof rows[0]};
