/* The driver API's hook bodies (driver_calls.c): each function is the body of one driver
 * entry point hooks_driver.c exports, and speaks CUresult. Each initialises gpupool on its first
 * call (gp_registry_get_driver). Only hooks_driver.c includes this header. */
#ifndef GP_DRIVER_CALLS_H
#define GP_DRIVER_CALLS_H

#include <stdbool.h>

#include "entries.h"
#include "libcuda.h"

/* Which entry point of a pair a call came through: the plain one (stream 0 is the legacy
 * stream) or the _ptsz one (stream 0 is the thread's per-thread default stream). */
enum gp_drv_call { GP_DRV_SYNC, GP_DRV_ASYNC, GP_DRV_ASYNC_PTSZ };

CUresult gp_calls_driver_mem_alloc(CUdeviceptr *dptr, size_t size, CUstream s, enum gp_drv_call call);
CUresult gp_calls_driver_mem_free(CUdeviceptr ptr, CUstream s, enum gp_drv_call call);
CUresult gp_calls_driver_mem_get_info(size_t *free_bytes, size_t *total_bytes);
CUresult gp_calls_driver_ipc_get_mem_handle(CUipcMemHandle *handle, CUdeviceptr ptr);
CUresult gp_calls_driver_mem_get_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);
CUresult gp_calls_driver_pointer_get_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr);

/* The four cuStreamBeginCapture entry points: v1 (no mode: global) or v2, plain or _ptsz. */
enum gp_drv_begin { GP_DRV_BEGIN_V1, GP_DRV_BEGIN_V1_PTSZ, GP_DRV_BEGIN_V2, GP_DRV_BEGIN_V2_PTSZ };
CUresult gp_calls_driver_begin_capture(CUstream s, CUstreamCaptureMode mode, enum gp_drv_begin which);
CUresult gp_calls_driver_end_capture(CUstream s, CUgraph *graph, bool ptsz);

/* cuStreamCreate (with_priority false) and cuStreamCreateWithPriority; `caller`: the return
 * address of the hooked call (named in the legacy_stream warning). */
CUresult gp_calls_driver_stream_create(CUstream *ph, unsigned flags, int priority, bool with_priority,
				 const void *caller);
CUresult gp_calls_driver_stream_destroy(CUstream s, bool v2);
CUresult gp_calls_driver_primary_ctx_reset(CUdevice dev, bool v2);
CUresult gp_calls_driver_ctx_destroy(CUcontext ctx, bool v2);

/* cuGetProcAddress (v2 false: no symbolStatus) and cuGetProcAddress_v2: the real driver's
 * answer, with gpupool's entry point from `t` (the hooks' table) in place of each real one
 * it interposes. */
CUresult gp_calls_driver_get_proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *status, bool v2, const struct gp_entries *t);

/* Memory the pools do not hold, counted against the limit (unpooled.h): the driver's
 * virtual memory API (cuMemCreate's physical memory until its last release and unmap:
 * cuMemRelease, cuMemMap, cuMemUnmap, cuMemRetainAllocationHandle; one exported or mapped into
 * a sparse array for the rest of the process: cuMemExportToShareableHandle,
 * cuMemMapArrayAsync(_ptsz)), managed and pitched allocations, and pools the program made.
 * The calls that act on an address range (cuMemMap, cuMemUnmap, cuMemSetAccess,
 * cuMemAddressFree) and cuMemRetainAllocationHandle answer CUDA_ERROR_INVALID_VALUE, without
 * the driver, for a range that meets the pools' own segments: memory of cuMemAlloc's, to the
 * program. */
CUresult gp_calls_driver_mem_create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
				   unsigned long long flags);
CUresult gp_calls_driver_mem_release(CUmemGenericAllocationHandle handle);
CUresult gp_calls_driver_mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
				unsigned long long flags);
CUresult gp_calls_driver_mem_unmap(CUdeviceptr ptr, size_t size);
CUresult gp_calls_driver_mem_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);
CUresult gp_calls_driver_mem_address_free(CUdeviceptr ptr, size_t size);
CUresult gp_calls_driver_mem_retain_allocation_handle(CUmemGenericAllocationHandle *handle, void *addr);
CUresult gp_calls_driver_mem_export(void *shareable, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,
				   unsigned long long flags);
CUresult gp_calls_driver_mem_map_array(CUarrayMapInfo *list, unsigned count, CUstream s, bool ptsz);
CUresult gp_calls_driver_mem_alloc_managed(CUdeviceptr *dptr, size_t size, unsigned flags);
CUresult gp_calls_driver_mem_alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
					unsigned elem);
CUresult gp_calls_driver_mem_pool_create(CUmemoryPool *pool, const CUmemPoolProps *props);
CUresult gp_calls_driver_mem_pool_destroy(CUmemoryPool pool);
CUresult gp_calls_driver_device_set_mem_pool(CUdevice dev, CUmemoryPool pool);
CUresult gp_calls_driver_mem_alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s, bool ptsz);

/* In a forked child: the primary-context cache and the unpooled records are the parent's. */
void gp_calls_driver_after_fork(void);

#endif
