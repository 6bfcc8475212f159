/* The pools' virtual-memory calls over the real driver (backend_vmm.h): granularity,
 * reservations, chunks mapped and unmapped, each in the device's primary context. Knows CUDA
 * types; knows nothing of the pool's internals, the runtime layer or the registry. */
#include "backend_vmm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "backend_driver.h"
#include "capture.h"
#include "gpupool/stats.h"
#include "libcuda.h"
#include "log.h"

/* Each device's granularity once asked (bytes), -1 when it has no virtual memory, 0 not
 * asked yet. */
static _Atomic long long gran[GPUPOOL_MAX_DEVICES];

/* The loaded driver when it has every call the pools' virtual memory needs, else NULL. */
static const struct gp_driver *vmm_driver(void)
{
	const struct gp_driver *d = gp_libcuda_get();
	if (!d || !d->cuInit || !d->cuDeviceGet || !d->cuDeviceGetAttribute || !d->cuMemGetAllocationGranularity ||
	    !d->cuMemAddressReserve || !d->cuMemAddressFree || !d->cuMemCreate || !d->cuMemRelease || !d->cuMemMap ||
	    !d->cuMemUnmap || !d->cuMemSetAccess || !d->cuCtxSynchronize || !d->cuDevicePrimaryCtxRetain ||
	    !d->cuCtxPushCurrent_v2 || !d->cuCtxPopCurrent_v2)
		return NULL;
	return d;
}

static CUmemAllocationProp chunk_prop(int device)
{
	CUmemAllocationProp p = {0};
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = device;
	return p;
}

static int vm_granularity(void *ctx, int device, size_t *bytes)
{
	(void)ctx;
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return -ENOTSUP;
	long long g = atomic_load(&gran[device]);
	if (!g) {
		const struct gp_driver *d = vmm_driver();
		CUdevice dev;
		int on = 0;
		size_t n = 0;
		CUmemAllocationProp p = chunk_prop(device);
		/* cuInit first, as the runtime makes it: a second one does nothing */
		if (d && d->cuInit(0) == CUDA_SUCCESS && d->cuDeviceGet(&dev, device) == CUDA_SUCCESS &&
		    d->cuDeviceGetAttribute(&on, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) ==
			    CUDA_SUCCESS &&
		    on && d->cuMemGetAllocationGranularity(&n, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
		    n && !(n & (n - 1)))
			g = (long long)n;
		else
			g = -1;
		atomic_store(&gran[device], g);
	}
	if (g < 0)
		return -ENOTSUP;
	*bytes = (size_t)g;
	return 0;
}

/* The driver in the device's primary context, relaxed (vm_leave undoes both); NULL when it
 * cannot be entered. */
static const struct gp_driver *vm_enter(int device, CUstreamCaptureMode *m)
{
	const struct gp_driver *d = vmm_driver();
	if (!d || gp_driver_primary_push(d, device) != 0)
		return NULL;
	*m = gp_driver_relax_begin(d);
	return d;
}

static void vm_leave(const struct gp_driver *d, CUstreamCaptureMode m)
{
	gp_driver_relax_end(d, m);
	gp_driver_primary_pop(d);
}

/* vm_enter for a device with virtual memory, its granularity in *g; NULL when it has none
 * or cannot be entered. */
static const struct gp_driver *vm_enter_gran(int device, size_t *g, CUstreamCaptureMode *m)
{
	return vm_granularity(NULL, device, g) == 0 ? vm_enter(device, m) : NULL;
}

static int vm_reserve(void *ctx, int device, size_t size, uintptr_t *addr)
{
	(void)ctx;
	size_t g;
	CUstreamCaptureMode m;
	const struct gp_driver *d = vm_enter_gran(device, &g, &m);
	if (!d)
		return -ENOMEM;
	CUdeviceptr p = 0;
	CUresult e = d->cuMemAddressReserve(&p, size, g, 0, 0);
	vm_leave(d, m);
	if (e != CUDA_SUCCESS)
		return -ENOMEM;
	*addr = (uintptr_t)p;
	return 0;
}

static int vm_unreserve(void *ctx, int device, uintptr_t addr, size_t size)
{
	(void)ctx;
	CUstreamCaptureMode m;
	const struct gp_driver *d = vm_enter(device, &m);
	if (!d)
		return -EIO;
	CUresult e = d->cuMemAddressFree((CUdeviceptr)addr, size);
	vm_leave(d, m);
	return e == CUDA_SUCCESS ? 0 : -EIO;
}

/* One chunk of g bytes at a: created, mapped, its handle released (the mapping holds the
 * memory). A handle that cannot be released is unmapped again and released once more: the
 * chunk is then gone, or (both refused) its memory is lost, and said so. */
static CUresult chunk_map(const struct gp_driver *d, int device, CUdeviceptr a, size_t g, bool *create_failed)
{
	CUmemAllocationProp p = chunk_prop(device);
	CUmemGenericAllocationHandle h;
	CUresult e = d->cuMemCreate(&h, g, &p, 0);
	*create_failed = e != CUDA_SUCCESS;
	if (e != CUDA_SUCCESS)
		return e;
	e = d->cuMemMap(a, g, 0, h, 0);
	CUresult r = d->cuMemRelease(h);
	if (e != CUDA_SUCCESS || r == CUDA_SUCCESS)
		return e;
	if (d->cuMemUnmap(a, g) != CUDA_SUCCESS || d->cuMemRelease(h) != CUDA_SUCCESS)
		gp_log(GP_LOG_WARN, "device %d: a %zu-byte chunk's handle could not be released (%d): its memory is lost",
		       device, g, (int)r);
	return r;
}

static int vm_map(void *ctx, int device, uintptr_t addr, size_t size, size_t *mapped)
{
	(void)ctx;
	size_t g, n = 0;
	CUstreamCaptureMode m;
	*mapped = 0;
	const struct gp_driver *d = vm_enter_gran(device, &g, &m);
	if (!d)
		return -ENOMEM;
	CUresult e = CUDA_SUCCESS;
	bool create_failed = false;
	while (n < size && (e = chunk_map(d, device, (CUdeviceptr)(addr + n), g, &create_failed)) == CUDA_SUCCESS)
		n += g;
	if (e == CUDA_SUCCESS) {
		/* one grant for the whole range, over its separate mappings */
		CUmemAccessDesc a = {0};
		a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		a.location.id = device;
		a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		e = d->cuMemSetAccess((CUdeviceptr)addr, size, &a, 1);
	}
	if (e != CUDA_SUCCESS) {
		/* undone from the last chunk down: what stays mapped is a prefix */
		while (n && d->cuMemUnmap((CUdeviceptr)(addr + n - g), g) == CUDA_SUCCESS)
			n -= g;
	}
	vm_leave(d, m);
	*mapped = n;
	if (e == CUDA_SUCCESS)
		return 0;
	/* the device's own refusal of its memory (no device, a device taken in exclusive mode, a
	 * sticky error) is what the program's cuMemAlloc would have had: its answer (backend.h);
	 * a map, an access change or a release refused partway is the pool's own mechanics, whose
	 * allocation is out of memory */
	if (e == CUDA_ERROR_OUT_OF_MEMORY || !create_failed)
		return -ENOMEM;
	gp_driver_backend_keep_error(e);
	return -EIO;
}

static int vm_unmap(void *ctx, int device, uintptr_t addr, size_t size, bool sync, size_t *unmapped)
{
	(void)ctx;
	size_t g, n = 0;
	CUstreamCaptureMode m;
	*unmapped = 0;
	if (vm_granularity(NULL, device, &g) != 0)
		return -EIO;
	/* the memory may be in a graph being captured, or in work a synchronize would have to
	 * wait for inside a capture: not now, as for segment frees. Only a synchronize needs the
	 * gate itself (no capture may begin during it); an unmap alone needs no capture in
	 * progress, and one that begins meanwhile cannot use this memory (free in the pool, which
	 * serves nothing inside a capture), so it does not wait for the gate, which a device
	 * synchronize of another device may hold for as long as that device's work runs */
	if (sync ? !gp_capture_gate_enter() : gp_capture_count() > 0)
		return -EBUSY;
	const struct gp_driver *d = vm_enter(device, &m);
	int rc = -EIO;
	if (d) {
		rc = 0;
		if (sync && d->cuCtxSynchronize() != CUDA_SUCCESS)
			rc = -EIO;
		while (!rc && n < size) {
			if (d->cuMemUnmap((CUdeviceptr)(addr + n), g) != CUDA_SUCCESS)
				rc = -EIO;
			else
				n += g;
		}
		vm_leave(d, m);
	}
	if (sync)
		gp_capture_gate_leave();
	*unmapped = n;
	return rc;
}

void gp_vmm_backend_add(struct gp_backend *be)
{
	be->vmm_granularity = vm_granularity;
	be->vmm_reserve = vm_reserve;
	be->vmm_unreserve = vm_unreserve;
	be->vmm_map = vm_map;
	be->vmm_unmap = vm_unmap;
}

void gp_vmm_backend_after_fork(void)
{
	for (int i = 0; i < GPUPOOL_MAX_DEVICES; i++)
		atomic_store(&gran[i], 0);
}
