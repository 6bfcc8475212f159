/* The driver layer's hook bodies (driver_calls.h): driver API allocations served from the
 * same per-device pools as the runtime's (the registry's), or passed to the real driver, and
 * answered in CUresult; the virtual memory calls kept off the pools' own ranges. Only
 * allocations made while a device's primary context is current are pooled; any other
 * context's pass through. Owns the cache of primary-context handles; must not depend on the
 * runtime layer's hook bodies (runtime_calls.c) or the pool's internals. */
#include "driver_calls.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "backend_driver.h"
#include "backend_guard.h"
#include "capture.h"
#include "fence_thread.h"
#include "group_budget.h"
#include "streamkey.h"
#include "entries.h"
#include "ladder.h"
#include "log.h"
#include "pool.h"
#include "reclaim.h"
#include "registry.h"
#include "route.h"
#include "trace.h"
#include "trace_format.h"
#include "unpooled.h"
#include "waitq.h"

/* An allocation the pool could not serve: out of memory with the message, or the device's
 * own error (the pool gave up on one: ladder.h), which is the answer, as the driver gave it
 * (a runtime backend's error has the same number: CUDA numbers the errors both APIs share
 * alike). */
static __attribute__((noinline, cold)) CUresult alloc_failed(int dev, size_t size, int rc)
{
	if (rc == -EIO) {
		bool drv;
		return (CUresult)gp_ladder_device_error(&drv);
	}
	char msg[256];
	gp_registry_oom_message(msg, sizeof msg, dev, size);
	gp_registry_oom_log(dev, msg); /* the first per device a warning, the rest at info */
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The primary context of each device, as last seen active (a handle, never retained here:
 * retain + release of an active context does not change it). NULL: not looked up yet. */
static _Atomic(CUcontext) primary_seen[GPUPOOL_MAX_DEVICES];

/* The answer where the entry point is missing: no driver loaded at all (the program found
 * gpupool's export through RTLD_DEFAULT), or a driver without it. */
static inline CUresult absent(const struct gp_driver *D)
{
	return D ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
}

static inline bool exiting(const struct gp_registry *r)
{
	return atomic_load_explicit(&r->exiting, memory_order_relaxed);
}

/* The device of the calling thread's current context, or -1 (no context, an error, or a
 * device beyond the pooled ones); *primary says whether that context is the device's
 * primary context (the one the pools serve). */
static int current_device(const struct gp_driver *D, const struct gp_registry *r, bool *primary)
{
	*primary = false;
	CUcontext c = NULL;
	CUdevice d = -1;
	if (D->cuCtxGetCurrent(&c) != CUDA_SUCCESS || !c || D->cuCtxGetDevice(&d) != CUDA_SUCCESS || d < 0 ||
	    d >= r->ndev)
		return -1;
	CUcontext p = atomic_load_explicit(&primary_seen[d], memory_order_acquire);
	if (p != c) {
		/* Only an active primary context can be current; an inactive one means `c` is
		 * another context, and retaining it would create one (hundreds of MiB). */
		unsigned flags = 0;
		int active = 0;
		if (D->cuDevicePrimaryCtxGetState(d, &flags, &active) == CUDA_SUCCESS && active &&
		    D->cuDevicePrimaryCtxRetain(&p, d) == CUDA_SUCCESS) {
			(void)D->cuDevicePrimaryCtxRelease_v2(d);
			atomic_store_explicit(&primary_seen[d], p, memory_order_release);
		}
	}
	*primary = p == c;
	return d;
}

static CUresult real_alloc(const struct gp_driver *D, CUdeviceptr *dptr, size_t size, CUstream s,
			   enum gp_drv_call call)
{
	switch (call) {
	case GP_DRV_SYNC:
		return D->cuMemAlloc_v2 ? D->cuMemAlloc_v2(dptr, size) : absent(D);
	case GP_DRV_ASYNC:
		return D->cuMemAllocAsync ? D->cuMemAllocAsync(dptr, size, s) : absent(D);
	default:
		return D->cuMemAllocAsync_ptsz ? D->cuMemAllocAsync_ptsz(dptr, size, s) : absent(D);
	}
}

static CUresult real_free(const struct gp_driver *D, CUdeviceptr p, CUstream s, enum gp_drv_call call)
{
	switch (call) {
	case GP_DRV_SYNC:
		return D->cuMemFree_v2 ? D->cuMemFree_v2(p) : absent(D);
	case GP_DRV_ASYNC:
		return D->cuMemFreeAsync ? D->cuMemFreeAsync(p, s) : absent(D);
	default:
		return D->cuMemFreeAsync_ptsz ? D->cuMemFreeAsync_ptsz(p, s) : absent(D);
	}
}

/* Is `s` capturing? CUDA_SUCCESS and *yes, or the driver's error for the stream. Asks the
 * driver only while some capture is in progress. */
static CUresult capturing(const struct gp_driver *D, const struct gp_registry *r, CUstream s, enum gp_drv_call call,
			  bool *yes)
{
	*yes = false;
	if (call == GP_DRV_SYNC || atomic_load_explicit(r->captures, memory_order_relaxed) == 0)
		return CUDA_SUCCESS;
	__typeof__(D->cuStreamIsCapturing) fn =
		call == GP_DRV_ASYNC_PTSZ && D->cuStreamIsCapturing_ptsz ? D->cuStreamIsCapturing_ptsz : D->cuStreamIsCapturing;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult e = fn ? fn(s, &st) : CUDA_SUCCESS;
	*yes = !fn || (e == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE);
	return e;
}

static inline gp_stream stream_key(const struct gp_registry *r, CUstream s, enum gp_drv_call call)
{
	/* the driver's stream handles are the runtime's (CU_STREAM_LEGACY is cudaStreamLegacy,
	 * CU_STREAM_PER_THREAD cudaStreamPerThread): one key space for both layers */
	if (call == GP_DRV_SYNC)
		return atomic_load_explicit(&r->sync_key, memory_order_relaxed);
	gp_stream key = gp_cuda_stream_key((cudaStream_t)s, call == GP_DRV_ASYNC_PTSZ);
	if (__builtin_expect(gp_streamkey_tag(key) == GP_STREAMKEY_PTDS, 0))
		gp_registry_stream_seen(r, "used the per-thread default stream");
	return key;
}

/* A driver allocation as the routing decision (route.h) asks about it. */
struct drv_call {
	const struct gp_driver *D;
	const struct gp_registry *r;
	CUstream s;
	enum gp_drv_call call;
};

static inline int drv_capturing(const void *c_)
{
	const struct drv_call *c = c_;
	bool cap;
	if (capturing(c->D, c->r, c->s, c->call, &cap) != CUDA_SUCCESS)
		return -1;
	return cap;
}

static inline int drv_device(const void *c_, bool *served)
{
	const struct drv_call *c = c_;
	return current_device(c->D, c->r, served); /* only the primary context is served */
}

static inline void *drv_pool(const void *c_, int dev)
{
	const struct drv_call *c = c_;
	return gp_ladder_pool(c->r, dev);
}

static const struct gp_route_ask drv_ask = {drv_capturing, drv_device, drv_pool};

/* ---- memory gpupool does not pool, counted against the limit (unpooled.h) ---------------
 * Each path: the budget's take before the real call (past the limit: CUDA_ERROR_OUT_OF_MEMORY,
 * no call), the real call (a device that is itself full: the reclaim step, then once more),
 * and the record its free or release finds. */

/* Does this layer count what it passes to the driver? Not when it is off; exit having
 * begun changes nothing: the caps hold until the process ends. */
static inline bool counting(const struct gp_registry *r) { return !r->drv_off; }

/* The layer is off, and a cap is set that it cannot apply (init.c): every allocation of
 * memory gpupool would count is refused, as a bad cap's is. */
static inline bool off_refused(const struct gp_registry *r) { return __builtin_expect(r->drv_off && r->refuse, 0); }

static __attribute__((noinline, cold)) CUresult refused(const char *what, int dev, size_t size)
{
	if (gp_registry_get_driver()->refuse) /* strict mode, or a cap that cannot be applied: said at the start */
		return CUDA_ERROR_INVALID_VALUE;
	if (gp_budget_closed(dev)) { /* a percentage limit of a device whose size is unknown */
		gp_log(GP_LOG_WARN, "device %d: %s of %zu bytes refused: its limit cannot be resolved (the error above); "
				    "returning CUDA_ERROR_OUT_OF_MEMORY",
		       dev, what, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	gp_registry_limit_refused_log(dev, what, size, "CUDA_ERROR_OUT_OF_MEMORY");
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static int drv_pool_reserved(const void *api, uintptr_t pool, uint64_t *bytes)
{
	const struct gp_driver *D = api;
	cuuint64_t v = 0;
	CUresult e = D->cuMemPoolGetAttribute ? D->cuMemPoolGetAttribute((CUmemoryPool)pool,
									CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v)
					      : CUDA_ERROR_NOT_SUPPORTED;
	*bytes = v;
	return (int)e;
}

static int drv_pool_trim(const void *api, uintptr_t pool, size_t keep)
{
	const struct gp_driver *D = api;
	return D->cuMemPoolTrimTo ? (int)D->cuMemPoolTrimTo((CUmemoryPool)pool, keep) : (int)CUDA_ERROR_NOT_SUPPORTED;
}

static inline struct gp_mempool_ops drv_pool_ops(const struct gp_driver *D)
{
	return (struct gp_mempool_ops){D, drv_pool_reserved, drv_pool_trim};
}

/* An allocation from a pool the program made (or its device's current pool, set by the
 * program: `current`, through cuMemAllocAsync), counted by the pool's reserved bytes. */
static CUresult mempool_alloc(const struct gp_driver *D, CUdeviceptr *dptr, size_t size, uintptr_t pool, CUstream s,
			      enum gp_drv_call call, int dev, bool from_pool)
{
	const struct gp_mempool_ops ops = drv_pool_ops(D);
	struct gp_mempool_take taken;
	if (gp_unpooled_mempool_begin(dev, pool, size, &ops, &taken) != 0)
		return refused(from_pool ? "cuMemAllocFromPoolAsync" : "cuMemAllocAsync (the program's pool)", dev, size);
	CUresult e;
	/* the device's current pool named (cuMemAllocAsync would take it from the stream's
	 * device): the pool counted is the pool allocated from */
	__typeof__(D->cuMemAllocFromPoolAsync) from =
		call == GP_DRV_ASYNC_PTSZ && D->cuMemAllocFromPoolAsync_ptsz ? D->cuMemAllocFromPoolAsync_ptsz
									      : D->cuMemAllocFromPoolAsync;
	for (int tries = 0;; tries++) {
		if (from)
			e = from(dptr, size, (CUmemoryPool)pool, s);
		else
			e = real_alloc(D, dptr, size, s, call);
		if (e != CUDA_ERROR_OUT_OF_MEMORY || tries || !gp_reclaim_before_oom(dev, size))
			break;
	}
	gp_unpooled_mempool_end(dev, pool, size, &taken, e == CUDA_SUCCESS ? (uintptr_t)*dptr : 0, &ops);
	return e;
}

/* A free of memory the pools do not hold: its record (managed, pitched, a program pool's)
 * counted back once the driver freed it. */
static CUresult unpooled_free(const struct gp_driver *D, const struct gp_registry *r, CUdeviceptr ptr, CUstream s,
			      enum gp_drv_call call)
{
	struct gp_unpooled_rec rec;
	/* from exit on, nothing more is counted, nor asked of the program's pools */
	if (exiting(r) || !gp_unpooled_ptr_remove((uintptr_t)ptr, &rec))
		return real_free(D, ptr, s, call);
	CUresult e = real_free(D, ptr, s, call);
	if (e == CUDA_SUCCESS) {
		const struct gp_mempool_ops ops = drv_pool_ops(D);
		gp_unpooled_freed(&rec, &ops);
	} else {
		gp_unpooled_ptr_put(&rec);
	}
	return e;
}

/* True when [ptr, ptr + size) meets a segment of the pools (any device), the whole reservation
 * of a virtual-memory segment included: to the program, memory of cuMemAlloc's (or none), never
 * a mapping or a reservation of its own. Natively the virtual memory calls refuse such a range
 * (CUDA_ERROR_INVALID_VALUE), and through the driver they would unmap, free or change the
 * pool's own chunks under its live blocks. The caller declares GP_REGISTRY_READER. A walk of
 * each pool's segments under its lock: these calls are rare, and the allocation path never
 * comes here. */
static bool pools_meet(uintptr_t ptr, size_t size)
{
	if (gp_backend_guard_inside())
		return false; /* a pool's own call */
	const struct gp_registry *r = gp_registry_get_driver();
	for (int d = 0; d < r->ndev; d++) {
		gp_pool *p = atomic_load(&r->pools[d]);
		if (p && gp_pool_meets(p, ptr, size))
			return true;
	}
	return false;
}

CUresult gp_calls_driver_mem_create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
				   unsigned long long flags)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemCreate)
		return absent(D);
	if (gp_backend_guard_inside())
		return D->cuMemCreate(handle, size, prop, flags);
	const struct gp_registry *r = gp_registry_get_driver();
	if (off_refused(r))
		return refused("cuMemCreate", 0, size);
	/* device memory only: a host or host-NUMA location is not the GPU's */
	int dev = counting(r) && handle && size && prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
			  prop->location.id >= 0 && prop->location.id < r->ndev
		      ? prop->location.id
		      : -1;
	if (dev < 0)
		return D->cuMemCreate(handle, size, prop, flags);
	int rc = gp_unpooled_take(dev, size, GP_BUDGET_VMM);
	if (rc == -ERANGE)
		return D->cuMemCreate(handle, size, prop, flags); /* no device has it: the driver's answer */
	if (rc)
		return refused("cuMemCreate", dev, size);
	CUresult e = D->cuMemCreate(handle, size, prop, flags);
	if (e == CUDA_ERROR_OUT_OF_MEMORY && gp_reclaim_before_oom(dev, size))
		e = D->cuMemCreate(handle, size, prop, flags);
	if (e == CUDA_SUCCESS) {
		struct gp_unpooled_rec rec = {(uint64_t)*handle, dev, GP_BUDGET_VMM, size, 0, NULL};
		if (!gp_unpooled_vmm_created(&rec))
			return e; /* not counted (logged) */
	}
	gp_unpooled_taken(dev, size, GP_BUDGET_VMM, e == CUDA_SUCCESS);
	return e;
}

/* The physical memory of a handle goes back when its last reference is released and its
 * last mapping unmapped, whichever comes last (unpooled.h): cuMemRelease alone leaves a
 * mapped allocation on the device, and counted. The pools' own calls (guarded) are not
 * followed. */
CUresult gp_calls_driver_mem_release(CUmemGenericAllocationHandle handle)
{
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemRelease)
		return absent(D);
	struct gp_vmm_alloc *a = gp_backend_guard_inside() ? NULL : gp_unpooled_vmm_release_begin((uint64_t)handle);
	CUresult e = D->cuMemRelease(handle);
	gp_unpooled_vmm_release_end(a, e == CUDA_SUCCESS);
	return e;
}

/* The address calls below (cuMemMap, cuMemUnmap, cuMemSetAccess, cuMemAddressFree) on a range
 * that meets the pools' segments: CUDA_ERROR_INVALID_VALUE, the driver not called (pools_meet).
 * On the program's own ranges they are the driver's, as before. */
CUresult gp_calls_driver_mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
				unsigned long long flags)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemMap)
		return absent(D);
	if (pools_meet((uintptr_t)ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	bool ours = false;
	struct gp_vmm_map *m = gp_backend_guard_inside() ? NULL : gp_unpooled_vmm_map_begin((uint64_t)handle, &ours);
	if (ours && !m)
		return CUDA_ERROR_OUT_OF_MEMORY; /* no host memory to follow the mapping: not made uncounted */
	CUresult e = D->cuMemMap(ptr, size, offset, handle, flags);
	gp_unpooled_vmm_map_end(m, (uintptr_t)ptr, size, e == CUDA_SUCCESS);
	return e;
}

CUresult gp_calls_driver_mem_unmap(CUdeviceptr ptr, size_t size)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemUnmap)
		return absent(D);
	if (pools_meet((uintptr_t)ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	struct gp_vmm_map *list = gp_backend_guard_inside() ? NULL : gp_unpooled_vmm_unmap_begin((uintptr_t)ptr, size);
	CUresult e = D->cuMemUnmap(ptr, size);
	gp_unpooled_vmm_unmap_end(list, e == CUDA_SUCCESS);
	return e;
}

CUresult gp_calls_driver_mem_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemSetAccess)
		return absent(D);
	if (pools_meet((uintptr_t)ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	return D->cuMemSetAccess(ptr, size, desc, count);
}

CUresult gp_calls_driver_mem_address_free(CUdeviceptr ptr, size_t size)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemAddressFree)
		return absent(D);
	if (pools_meet((uintptr_t)ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	return D->cuMemAddressFree(ptr, size);
}

/* A handle exported (to another process, or imported back into this one) gives its memory
 * holders gpupool cannot follow: counted until the process ends, once the export succeeded
 * (a failed one, such as a handle type the allocation was not made for, exported nothing). */
CUresult gp_calls_driver_mem_export(void *shareable, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,
				   unsigned long long flags)
{
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemExportToShareableHandle)
		return absent(D);
	struct gp_vmm_alloc *a = gp_backend_guard_inside() ? NULL : gp_unpooled_vmm_pin_begin((uint64_t)handle);
	CUresult e = D->cuMemExportToShareableHandle(shareable, handle, type, flags);
	gp_unpooled_vmm_pin_end(a, e == CUDA_SUCCESS);
	return e;
}

/* A sparse array's mapping holds the memory of its handle until an unmap that names the array
 * and the place, not the handle: counted until the process ends, once mapped. A call that
 * failed mapped nothing where it had one entry; with several, the entries before the one that
 * failed may be mapped (the driver does not say which): each of them is kept counted. */
#define GP_MAP_ARRAY_STACK 16
CUresult gp_calls_driver_mem_map_array(CUarrayMapInfo *list, unsigned count, CUstream s, bool ptsz)
{
	const struct gp_driver *D = gp_libcuda_get();
	__typeof__(D->cuMemMapArrayAsync) fn = !D ? NULL : ptsz ? D->cuMemMapArrayAsync_ptsz : D->cuMemMapArrayAsync;
	if (!fn)
		return absent(D);
	if (!list || !count || gp_backend_guard_inside())
		return fn(list, count, s);
	struct gp_vmm_alloc *stack[GP_MAP_ARRAY_STACK], **held = stack;
	if (count > GP_MAP_ARRAY_STACK && !(held = calloc(count, sizeof *held)))
		return CUDA_ERROR_OUT_OF_MEMORY; /* no host memory to follow the mappings: not made uncounted */
	for (unsigned i = 0; i < count; i++)
		held[i] = list[i].memOperationType == CU_MEM_OPERATION_TYPE_MAP &&
					  list[i].memHandleType == CU_MEM_HANDLE_TYPE_GENERIC
				  ? gp_unpooled_vmm_pin_begin((uint64_t)list[i].memHandle.memHandle)
				  : NULL;
	CUresult e = fn(list, count, s);
	for (unsigned i = 0; i < count; i++)
		gp_unpooled_vmm_pin_end(held[i], e == CUDA_SUCCESS || count > 1);
	if (held != stack)
		free(held);
	return e;
}

/* cuMemAllocManaged and cuMemAllocPitch: counted against the current context's device. */
CUresult gp_calls_driver_mem_alloc_managed(CUdeviceptr *dptr, size_t size, unsigned flags)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemAllocManaged)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	bool primary;
	if (off_refused(r))
		return refused("cuMemAllocManaged", 0, size);
	int dev = gp_backend_guard_inside() || !counting(r) || !dptr || !size ? -1 : current_device(D, r, &primary);
	if (dev < 0)
		return D->cuMemAllocManaged(dptr, size, flags);
	int rc = gp_unpooled_take(dev, size, GP_BUDGET_MANAGED);
	if (rc == -ERANGE)
		return D->cuMemAllocManaged(dptr, size, flags); /* no device has it: the driver's answer */
	if (rc)
		return refused("cuMemAllocManaged", dev, size);
	CUresult e = D->cuMemAllocManaged(dptr, size, flags);
	if (e == CUDA_ERROR_OUT_OF_MEMORY && gp_reclaim_before_oom(dev, size))
		e = D->cuMemAllocManaged(dptr, size, flags);
	if (e == CUDA_SUCCESS) {
		struct gp_unpooled_rec rec = {(uint64_t)*dptr, dev, GP_BUDGET_MANAGED, size, 0, NULL};
		if (!gp_unpooled_ptr_add(&rec))
			return e;
	}
	gp_unpooled_taken(dev, size, GP_BUDGET_MANAGED, e == CUDA_SUCCESS);
	return e;
}

/* The pitch is the driver's choice (a multiple of its pitch alignment, at least the width):
 * the width rounded to 512 bytes rows is taken first, and the difference to pitch x height
 * counted once the driver said the pitch. */
CUresult gp_calls_driver_mem_alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
					unsigned elem)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemAllocPitch_v2)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	size_t guess;
	bool primary;
	if (off_refused(r))
		return refused("cuMemAllocPitch", 0, width);
	int dev = gp_backend_guard_inside() || !counting(r) || !dptr || !pitch || !width || !height ||
				  width > SIZE_MAX - 511 || __builtin_mul_overflow((width + 511) / 512 * 512, height, &guess)
			  ? -1
			  : current_device(D, r, &primary);
	if (dev < 0)
		return D->cuMemAllocPitch_v2(dptr, pitch, width, height, elem); /* the driver's own answer */
	int rc = gp_unpooled_take(dev, guess, GP_BUDGET_PITCHED);
	if (rc == -ERANGE)
		return D->cuMemAllocPitch_v2(dptr, pitch, width, height, elem); /* the driver's answer */
	if (rc)
		return refused("cuMemAllocPitch", dev, guess);
	CUresult e = D->cuMemAllocPitch_v2(dptr, pitch, width, height, elem);
	if (e == CUDA_ERROR_OUT_OF_MEMORY && gp_reclaim_before_oom(dev, guess))
		e = D->cuMemAllocPitch_v2(dptr, pitch, width, height, elem);
	size_t bytes = guess;
	if (e == CUDA_SUCCESS && !__builtin_mul_overflow(*pitch, height, &bytes) && bytes != guess) {
		if (bytes > guess)
			gp_budget_charge(dev, bytes - guess, GP_BUDGET_PITCHED);
		else
			gp_budget_give(dev, guess - bytes, GP_BUDGET_PITCHED);
	}
	if (e == CUDA_SUCCESS) {
		struct gp_unpooled_rec rec = {(uint64_t)*dptr, dev, GP_BUDGET_PITCHED, bytes, 0, NULL};
		if (!gp_unpooled_ptr_add(&rec))
			return e;
	}
	gp_unpooled_taken(dev, bytes, GP_BUDGET_PITCHED, e == CUDA_SUCCESS);
	return e;
}

CUresult gp_calls_driver_mem_pool_create(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemPoolCreate)
		return absent(D);
	CUresult e = D->cuMemPoolCreate(pool, props);
	const struct gp_registry *r = gp_registry_get_driver();
	if (e == CUDA_SUCCESS && counting(r) && props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
	    props->location.id >= 0 && props->location.id < r->ndev && !gp_backend_guard_inside())
		gp_unpooled_pool_made((uintptr_t)*pool, props->location.id);
	return e;
}

CUresult gp_calls_driver_mem_pool_destroy(CUmemoryPool pool)
{
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemPoolDestroy)
		return absent(D);
	CUresult e = D->cuMemPoolDestroy(pool);
	if (e == CUDA_SUCCESS)
		gp_unpooled_pool_destroyed((uintptr_t)pool);
	return e;
}

CUresult gp_calls_driver_device_set_mem_pool(CUdevice dev, CUmemoryPool pool)
{
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuDeviceSetMemPool)
		return absent(D);
	CUresult e = D->cuDeviceSetMemPool(dev, pool);
	if (e == CUDA_SUCCESS)
		gp_unpooled_device_pool_set((int)dev, (uintptr_t)pool);
	return e;
}

CUresult gp_calls_driver_mem_alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s, bool ptsz)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	CUresult (*fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream) =
		!D ? NULL : ptsz ? D->cuMemAllocFromPoolAsync_ptsz : D->cuMemAllocFromPoolAsync;
	if (!fn)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	if (off_refused(r))
		return refused("cuMemAllocFromPoolAsync", 0, size);
	if (gp_backend_guard_inside() || !counting(r) || !dptr || !size || !pool)
		return fn(dptr, size, pool, s); /* the driver's own answer */
	/* a pool made through gpupool knows its device; another (a device's default pool, one
	 * made before gpupool was loaded) is counted against the current device from now on */
	int dev = gp_unpooled_pool_device((uintptr_t)pool);
	if (dev < 0) {
		bool primary;
		dev = current_device(D, r, &primary);
		if (dev < 0)
			return fn(dptr, size, pool, s);
		gp_unpooled_pool_made((uintptr_t)pool, dev);
	}
	return mempool_alloc(D, dptr, size, (uintptr_t)pool, s, ptsz ? GP_DRV_ASYNC_PTSZ : GP_DRV_ASYNC, dev, true);
}

/* Exit has begun: the pools serve nothing more, but what the program still allocates counts
 * against its device's caps until the process ends (as the runtime's late_malloc). */
static __attribute__((noinline, cold)) CUresult late_alloc(const struct gp_driver *D, const struct gp_registry *r,
							    CUdeviceptr *dptr, size_t size, CUstream s,
							    enum gp_drv_call call)
{
	bool primary;
	int dev = dptr && size ? current_device(D, r, &primary) : -1;
	int rc = dev < 0 ? -ERANGE : gp_unpooled_take(dev, size, GP_BUDGET_LATE);
	if (rc == -ERANGE)
		return real_alloc(D, dptr, size, s, call); /* nothing to count: the driver's own answer */
	if (rc)
		return refused(call == GP_DRV_SYNC ? "cuMemAlloc" : "cuMemAllocAsync", dev, size);
	CUresult e = real_alloc(D, dptr, size, s, call);
	gp_unpooled_taken(dev, size, GP_BUDGET_LATE, e == CUDA_SUCCESS);
	return e;
}

CUresult gp_calls_driver_mem_alloc(CUdeviceptr *dptr, size_t size, CUstream s, enum gp_drv_call call)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D)
		return absent(D);
	if (gp_backend_guard_inside())
		return real_alloc(D, dptr, size, s, call); /* a segment of gpupool's own, via a runtime */
	const struct gp_registry *r = gp_registry_get_driver();
	if (__builtin_expect(exiting(r), 0) && !r->drv_off)
		return late_alloc(D, r, dptr, size, s, call);
	bool off = r->drv_off;
	const struct gp_route_facts f = {
		.off = off && !r->refuse, /* off with a cap set that it cannot apply: refused */
		.has_entry = off || call == GP_DRV_SYNC ||
			     (call == GP_DRV_ASYNC ? D->cuMemAllocAsync : D->cuMemAllocAsync_ptsz),
		.refuse = r->refuse,
		.args_ok = dptr && size,
	};
	const struct drv_call c = {D, r, s, call};
	int dev;
	void *pool;
	switch (gp_route_alloc(&f, &drv_ask, &c, &dev, &pool)) {
	case GP_ROUTE_POOL:
		break;
	case GP_ROUTE_PASS:
		return real_alloc(D, dptr, size, s, call);
	case GP_ROUTE_UNPOOLED: {
		/* the driver's own semantics: an allocation that belongs to a graph, another
		 * context than the primary one, or a device without a pool */
		CUresult e = real_alloc(D, dptr, size, s, call);
		gp_registry_count_driver(dev, GP_DRIVER_PASSTHROUGH);
		return e;
	}
	case GP_ROUTE_ABSENT:
		return absent(D);
	case GP_ROUTE_REFUSE:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (call != GP_DRV_SYNC && __builtin_expect(gp_unpooled_device_pool(dev) != 0, 0))
		return mempool_alloc(D, dptr, size, gp_unpooled_device_pool(dev), s, call, dev, false);
	gp_pool *p = pool;
	uintptr_t a = 0;
	bool sync = call == GP_DRV_SYNC;
	int rc = gp_ladder_alloc(p, dev, size, stream_key(r, s, call), sync ? GP_TRACE_MALLOC : GP_TRACE_MALLOC_ASYNC,
				 sync ? 0 : (cudaStream_t)s, &a, true);
	if (__builtin_expect(rc != 0, 0))
		return alloc_failed(dev, size, rc);
	gp_registry_count_driver(dev, GP_DRIVER_ALLOC);
	*dptr = (CUdeviceptr)a;
	return CUDA_SUCCESS;
}

/* Where an address is, as the pools see it. */
enum gp_where {
	GP_AT_NONE, /* not the pools' memory: the driver knows it (or not) */
	GP_AT_LIVE, /* inside the bytes asked for of a live block */
	GP_AT_HOLE, /* inside a pool's segment but not in a live allocation: a free block, one
		     * waiting for a fence, or past the bytes asked for in a live block. The
		     * driver would answer for the whole segment; natively nothing is there */
};

/* Where `ptr` is in the pools (any device): the block that holds it in *bi (GP_AT_LIVE, or
 * GP_AT_HOLE past its bytes asked for) and its pool's device in *dev. */
static enum gp_where where_is(const struct gp_registry *r, uintptr_t ptr, struct gp_block_info *bi, int *dev)
{
	memset(bi, 0, sizeof *bi);
	for (int d = 0; d < r->ndev; d++) {
		gp_pool *p = atomic_load(&r->pools[d]);
		if (!p)
			continue;
		*dev = d;
		if (gp_pool_lookup(p, ptr, bi) == 0)
			return ptr - bi->addr < bi->requested ? GP_AT_LIVE : GP_AT_HOLE;
		if (gp_pool_owns(p, ptr))
			return GP_AT_HOLE;
	}
	return GP_AT_NONE;
}

/* Natively, memory from cuMemAlloc has no allocation handle: the driver refuses to retain
 * one (CUDA_ERROR_INVALID_VALUE). A block of the pool is such memory even where its segment is
 * made of virtual-memory chunks, and a handle to a chunk would keep the chunk's memory alive,
 * uncounted, after the pool gives it back: refused the same way. */
CUresult gp_calls_driver_mem_retain_allocation_handle(CUmemGenericAllocationHandle *handle, void *addr)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemRetainAllocationHandle)
		return absent(D);
	if (!gp_backend_guard_inside() && handle) {
		struct gp_block_info bi;
		int dev;
		if (where_is(gp_registry_get_driver(), (uintptr_t)addr, &bi, &dev) != GP_AT_NONE)
			return CUDA_ERROR_INVALID_VALUE;
	}
	struct gp_vmm_alloc *a = gp_backend_guard_inside() || !handle ? NULL
								       : gp_unpooled_vmm_retain_begin((uintptr_t)addr);
	CUresult e = D->cuMemRetainAllocationHandle(handle, addr);
	gp_unpooled_vmm_retain_end(a, e == CUDA_SUCCESS ? (uint64_t)*handle : 0, e == CUDA_SUCCESS);
	return e;
}

CUresult gp_calls_driver_mem_free(CUdeviceptr ptr, CUstream s, enum gp_drv_call call)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D)
		return absent(D);
	if (gp_backend_guard_inside())
		return real_free(D, ptr, s, call); /* a segment of gpupool's own, via a runtime */
	const struct gp_registry *r = gp_registry_get_driver();
	if (r->drv_off || !ptr)
		return real_free(D, ptr, s, call);
	uint64_t t0 = r->tracing ? gp_trace_now_ns() : 0;
	gp_stream key = stream_key(r, s, call);
	bool cap = false;
	CUresult ce = capturing(D, r, s, call, &cap);
	if (ce != CUDA_SUCCESS)
		return ce; /* an invalid stream: the native call fails the same way */
	int rc = -ENOENT, dev = -1;
	for (int d = 0; rc == -ENOENT && d < r->ndev; d++) {
		gp_pool *p = atomic_load(&r->pools[d]);
		if (!p)
			continue;
		struct gp_block_info bi;
		if (cap && gp_pool_lookup(p, (uintptr_t)ptr, &bi) == 0) {
			/* a free captured into a graph happens when the graph runs, maybe never */
			gp_log(GP_LOG_WARN, "cuMemFreeAsync(0x%llx) inside a stream capture: gpupool keeps the block "
					    "allocated (free it with cuMemFree after the capture to reuse it)",
			       (unsigned long long)ptr);
			return CUDA_SUCCESS;
		}
		rc = gp_pool_free(p, (uintptr_t)ptr, key);
		dev = d;
	}
	CUresult e = CUDA_SUCCESS;
	if (rc == 0)
		gp_waitq_note_free(dev); /* while others wait, what is freed goes to them */
	if (rc == -ENOENT) {
		return unpooled_free(D, r, ptr, s, call);
	} else if (rc == -EALREADY) {
		gp_log(GP_LOG_WARN, "%s(0x%llx): not a live allocation (double free, or a pointer inside a block); "
				    "ignored, returning CUDA_ERROR_INVALID_VALUE",
		       call == GP_DRV_SYNC ? "cuMemFree" : "cuMemFreeAsync", (unsigned long long)ptr);
		e = CUDA_ERROR_INVALID_VALUE;
	} else {
		gp_registry_count_driver(dev, GP_DRIVER_FREE);
		if (key == GP_NO_STREAM)
			gp_fence_thread_wake();
	}
	if (r->tracing)
		gp_registry_trace(call == GP_DRV_SYNC ? GP_TRACE_FREE : GP_TRACE_FREE_ASYNC, dev,
				  call == GP_DRV_SYNC ? 0 : (cudaStream_t)s, 0, (void *)(uintptr_t)ptr, t0,
				  e == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue);
	return e;
}

CUresult gp_calls_driver_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemGetInfo_v2)
		return absent(D);
	if (gp_backend_guard_inside())
		return D->cuMemGetInfo_v2(free_bytes, total_bytes);
	const struct gp_registry *r = gp_registry_get_driver();
	if (r->drv_off || exiting(r) || !free_bytes || !total_bytes)
		return D->cuMemGetInfo_v2(free_bytes, total_bytes);
	bool primary;
	int dev = current_device(D, r, &primary);
	gp_pool *p = dev >= 0 && primary ? atomic_load(&r->pools[dev]) : NULL;
	size_t f, t;
	if (p && gp_pool_mem_info(p, &f, &t) == 0) {
		const struct gpupool_device_stats *st = gp_registry_slot(r, dev);
		gp_group_budget_clamp(dev, st ? (size_t)__atomic_load_n(&st->cached_bytes, __ATOMIC_RELAXED) : 0, &f, &t);
		*free_bytes = f;
		*total_bytes = t;
		return CUDA_SUCCESS;
	}
	CUresult e = D->cuMemGetInfo_v2(free_bytes, total_bytes);
	size_t lim = e == CUDA_SUCCESS && dev >= 0 && primary ? gp_config_device_limit(&r->cfg, dev, *total_bytes) : 0;
	if (lim) {
		/* no pool yet: the limit is all this process will get */
		if (lim < *total_bytes)
			*total_bytes = lim;
		if (*free_bytes > *total_bytes)
			*free_bytes = *total_bytes;
	}
	return e;
}

CUresult gp_calls_driver_ipc_get_mem_handle(CUipcMemHandle *handle, CUdeviceptr ptr)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuIpcGetMemHandle)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	struct gp_block_info bi;
	int dev;
	enum gp_where at = r->drv_off || !ptr ? GP_AT_NONE : where_is(r, (uintptr_t)ptr, &bi, &dev);
	if (at == GP_AT_NONE)
		return D->cuIpcGetMemHandle(handle, ptr);
	if (at == GP_AT_LIVE && bi.addr == (uintptr_t)ptr && bi.addr == bi.segment && bi.size == bi.segment_size)
		return D->cuIpcGetMemHandle(handle, ptr); /* the block is its whole segment */
	if (at == GP_AT_HOLE)
		return CUDA_ERROR_INVALID_VALUE; /* no allocation there: the driver's own answer */
	if (bi.vmm) {
		/* the driver refuses memory of its virtual memory API too: the same answer, said */
		gp_log(GP_LOG_ERROR,
		       "cuIpcGetMemHandle(0x%llx): a %zu-byte pooled block of virtual memory (GPUPOOL_CONF segments:%s) "
		       "cannot be exported with an IPC handle; refusing with CUDA_ERROR_INVALID_VALUE. With segments:auto "
		       "a cuMemAlloc of at least medium_max (now %zu bytes) gets a whole segment that can be; with "
		       "segments:whole every large one does",
		       (unsigned long long)ptr, (size_t)bi.size, gp_config_segments_name(r->cfg.segments), r->cfg.medium_max);
		return CUDA_ERROR_INVALID_VALUE;
	}
	gp_log(GP_LOG_ERROR,
	       "cuIpcGetMemHandle(0x%llx): a %zu-byte pooled block at offset %zu of a %zu-byte segment cannot be "
	       "exported (the handle would share the whole segment); refusing with CUDA_ERROR_INVALID_VALUE. "
	       "An allocation of at least GPUPOOL_CONF medium_max (now %zu bytes) that the pool grows for is a "
	       "whole segment: lower it (e.g. medium_max:1M) for smaller ones, or run with GPUPOOL_DISABLE=1",
	       (unsigned long long)ptr, (size_t)bi.size, (size_t)((uintptr_t)ptr - bi.segment), (size_t)bi.segment_size,
	       r->cfg.medium_max);
	return CUDA_ERROR_INVALID_VALUE;
}

/* cuMemGetAddressRange and cuPointerGetAttribute answer for a pooled block as the driver
 * would for a native allocation of the size asked for: the range [block, block + requested)
 * (the driver, too, reports the size asked for: for p = cuMemAlloc(1000), p + 1000 is in no
 * allocation, CUDA_ERROR_NOT_FOUND on an H200). An address in a pool's segment outside every
 * live allocation gets the driver's answer for memory that is not allocated, not the
 * segment's range: NCCL and RDMA registration would otherwise register memory the program
 * does not own, or free. */
CUresult gp_calls_driver_mem_get_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr ptr)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuMemGetAddressRange_v2)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	struct gp_block_info bi;
	int dev;
	enum gp_where at = r->drv_off ? GP_AT_NONE : where_is(r, (uintptr_t)ptr, &bi, &dev);
	if (at == GP_AT_NONE)
		return D->cuMemGetAddressRange_v2(base, size, ptr);
	if (at == GP_AT_HOLE)
		return CUDA_ERROR_NOT_FOUND;
	if (base)
		*base = (CUdeviceptr)bi.addr;
	if (size)
		*size = bi.requested;
	return CUDA_SUCCESS;
}

CUresult gp_calls_driver_pointer_get_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || !D->cuPointerGetAttribute)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	struct gp_block_info bi;
	int dev;
	enum gp_where at = r->drv_off || !data ? GP_AT_NONE : where_is(r, (uintptr_t)ptr, &bi, &dev);
	if (at == GP_AT_HOLE)
		return CUDA_ERROR_INVALID_VALUE; /* every attribute: nothing is allocated there */
	if (at == GP_AT_NONE ||
	    (attr != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR && attr != CU_POINTER_ATTRIBUTE_RANGE_SIZE))
		return D->cuPointerGetAttribute(data, attr, ptr);
	if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
		*(CUdeviceptr *)data = (CUdeviceptr)bi.addr;
	else
		*(size_t *)data = bi.requested;
	return CUDA_SUCCESS;
}

CUresult gp_calls_driver_begin_capture(CUstream s, CUstreamCaptureMode mode, enum gp_drv_begin which)
{
	const struct gp_driver *D = gp_libcuda_get();
	CUresult (*v1)(CUstream) = !D ? NULL : which == GP_DRV_BEGIN_V1 ? D->cuStreamBeginCapture
					 : which == GP_DRV_BEGIN_V1_PTSZ ? D->cuStreamBeginCapture_ptsz : NULL;
	CUresult (*v2)(CUstream, CUstreamCaptureMode) = !D ? NULL : which == GP_DRV_BEGIN_V2 ? D->cuStreamBeginCapture_v2
							     : which == GP_DRV_BEGIN_V2_PTSZ ? D->cuStreamBeginCapture_v2_ptsz
											      : NULL;
	if (!v1 && !v2)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	if (r->drv_off)
		return v1 ? v1(s) : v2(s, mode);
	gp_capture_begin();
	CUresult e = v1 ? v1(s) : v2(s, mode);
	if (e != CUDA_SUCCESS)
		gp_capture_end();
	return e;
}

CUresult gp_calls_driver_end_capture(CUstream s, CUgraph *graph, bool ptsz)
{
	const struct gp_driver *D = gp_libcuda_get();
	CUresult (*end)(CUstream, CUgraph *) = !D ? NULL : ptsz ? D->cuStreamEndCapture_ptsz : D->cuStreamEndCapture;
	if (!end)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	if (r->drv_off)
		return end(s, graph);
	__typeof__(D->cuStreamIsCapturing) is = ptsz && D->cuStreamIsCapturing_ptsz ? D->cuStreamIsCapturing_ptsz
										      : D->cuStreamIsCapturing;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult q = is ? is(s, &st) : CUDA_ERROR_NOT_SUPPORTED;
	CUresult e = end(s, graph);
	/* the capture is over whatever EndCapture says, if it was one */
	if (q != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE)
		gp_capture_end();
	return e;
}

CUresult gp_calls_driver_stream_create(CUstream *ph, unsigned flags, int priority, bool with_priority,
				 const void *caller)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || (with_priority ? !D->cuStreamCreateWithPriority : !D->cuStreamCreate))
		return absent(D);
	CUresult e = with_priority ? D->cuStreamCreateWithPriority(ph, flags, priority) : D->cuStreamCreate(ph, flags);
	if (e != CUDA_SUCCESS)
		return e;
	const struct gp_registry *r = gp_registry_get_driver();
	if (!r->drv_off && atomic_load_explicit(&r->sync_key, memory_order_relaxed) != GP_NO_STREAM) {
		Dl_info info;
		char how[320];
		snprintf(how, sizeof how, "created a stream (cuStreamCreate, called from %s)",
			 caller && dladdr(caller, &info) && info.dli_fname ? info.dli_fname : "an unknown library");
		gp_registry_stream_made(how);
	}
	if (!(flags & CU_STREAM_NON_BLOCKING))
		return e;
	/* the runtime backend's markers must cover it (the driver backend has none) */
	bool primary = false;
	int d = r->drv_off || !r->rt || !r->cfg.fence_marker ? -1 : current_device(D, r, &primary);
	if (d >= 0 && primary)
		gp_cuda_stream_add(d, (cudaStream_t)*ph);
	return e;
}

CUresult gp_calls_driver_stream_destroy(CUstream s, bool v2)
{
	GP_REGISTRY_READER;
	const struct gp_driver *D = gp_libcuda_get();
	CUresult (*fn)(CUstream) = !D ? NULL : v2 ? D->cuStreamDestroy_v2 : D->cuStreamDestroy;
	if (!fn)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	if (!r->drv_off && s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
		gp_stream key = gp_cuda_stream_key((cudaStream_t)s, false);
		if (r->rt && r->cfg.fence_marker)
			gp_cuda_stream_destroying(r->rt, (cudaStream_t)s);
		for (int d = 0; d < r->ndev; d++) {
			gp_pool *p = atomic_load(&r->pools[d]);
			if (p)
				gp_pool_stream_retire(p, key);
		}
		gp_fence_thread_wake();
	}
	return fn(s);
}

/* Around a call that resets `dev`'s primary context (cuDevicePrimaryCtxReset, cuCtxDestroy of
 * it): the registry's reset gate (registry.h) and this layer's part. False: not a pooled
 * device, nothing to do. */
static bool reset_begin(const struct gp_registry *r, int dev)
{
	if (r->drv_off || dev < 0 || dev >= r->ndev)
		return false;
	gp_registry_reset_begin(dev);
	if (r->rt) /* the runtime backend's markers and streams on that context */
		gp_cuda_device_reset_begin(r->rt, dev);
	return true;
}

/* After the call: what the driver did decides. Refused (the H200 refuses cuCtxDestroy of a
 * primary context with CUDA_ERROR_INVALID_CONTEXT), the context, its allocations and the
 * pool stay as they were; done, every allocation died with the context, and so does the
 * pool. */
static void reset_end(const struct gp_registry *r, int dev, bool done)
{
	if (done) {
		/* inside the reset gate: the killed pool's segments leave the budget before a new
		 * pool can grow; managed and pitched memory died with the context (memory from
		 * cuMemCreate and from memory pools did not) */
		gp_budget_pool_gone(dev);
		gp_unpooled_device_reset(dev);
		gp_driver_backend_forget(dev);
		if (r->rt)
			gp_cuda_device_reset_done(dev);
		atomic_store(&primary_seen[dev], NULL);
	}
	gp_registry_reset_end(dev, done);
	if (done)
		gp_unpooled_refresh(dev); /* what survives a reset, in the slot the retirement zeroed */
}

CUresult gp_calls_driver_primary_ctx_reset(CUdevice dev, bool v2)
{
	const struct gp_driver *D = gp_libcuda_get();
	CUresult (*fn)(CUdevice) = !D ? NULL : v2 ? D->cuDevicePrimaryCtxReset_v2 : D->cuDevicePrimaryCtxReset;
	if (!fn)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	bool gated = reset_begin(r, (int)dev);
	CUresult e = fn(dev);
	if (gated)
		reset_end(r, (int)dev, e == CUDA_SUCCESS);
	return e;
}

CUresult gp_calls_driver_ctx_destroy(CUcontext ctx, bool v2)
{
	const struct gp_driver *D = gp_libcuda_get();
	CUresult (*fn)(CUcontext) = !D ? NULL : v2 ? D->cuCtxDestroy_v2 : D->cuCtxDestroy;
	if (!fn)
		return absent(D);
	const struct gp_registry *r = gp_registry_get_driver();
	int dev = -1; /* the device whose primary context ctx is, if it is one the pools serve */
	for (int d = 0; ctx && d < r->ndev && d < GPUPOOL_MAX_DEVICES && dev < 0; d++)
		if (atomic_load(&primary_seen[d]) == ctx)
			dev = d;
	bool gated = dev >= 0 && reset_begin(r, dev);
	CUresult e = fn(ctx);
	if (gated)
		reset_end(r, dev, e == CUDA_SUCCESS);
	return e;
}

CUresult gp_calls_driver_get_proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status, bool v2, const struct gp_entries *t)
{
	const struct gp_driver *D = gp_libcuda_get();
	if (!D || (v2 ? !D->cuGetProcAddress_v2 : !D->cuGetProcAddress))
		return absent(D);
	CUresult e = v2 ? D->cuGetProcAddress_v2(symbol, pfn, version, flags, status)
			: D->cuGetProcAddress(symbol, pfn, version, flags);
	/* The driver picked the version and the stream variant; gpupool swaps in its own
	 * entry for exactly the one picked, matched by address, or where the driver hands out
	 * an address other than its exported symbol's, by the name it must have picked. */
	if (e == CUDA_SUCCESS && pfn && *pfn && symbol) {
		void *ours = gp_entries_for_answer(t, D, symbol, *pfn, version,
						   flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
		if (ours)
			*pfn = ours;
	}
	return e;
}

void gp_calls_driver_after_fork(void)
{
	gp_unpooled_after_fork();
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		atomic_store(&primary_seen[d], NULL);
}
