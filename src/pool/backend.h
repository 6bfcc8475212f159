/* The backend: the small contract between the pool and whatever owns device memory, with
 * three implementations: backend_cuda.c (runtime layer: over the CUDA runtime),
 * backend_driver.c (driver layer: over the driver, for a process without a dynamic runtime)
 * and backend_fake.c (replay layer: tests, the benchmark, the replay); and backend_guard.c
 * (driver layer), which wraps the one the registry picks so that the driver hooks pass the
 * pools' own calls through.
 * Every function returns 0 or a negative errno; segment_alloc/free, the virtual memory calls
 * (vmm_*), stream_wait and the non-blocking marker calls (fence_mark, fence_query,
 * fence_drop) may be called with a pool lock held, device_sync and fence_wait never (see
 * fence.c). Depends on nothing: no CUDA types. */
#ifndef GP_BACKEND_H
#define GP_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A stream as the pool sees it: an opaque key naming one CUDA stream of one device.
 * GP_NO_STREAM marks the synchronous calls (cudaMalloc/cudaFree), which are not ordered
 * on any stream. */
typedef uintptr_t gp_stream;
#define GP_NO_STREAM ((gp_stream)-1)

struct gp_backend {
	void *ctx;
	/* Take `size` bytes of device memory on `device`: 0; -ENOMEM when the device is full;
	 * -EDQUOT when a budget in front of the device refused it (a limit, a group: a smaller
	 * segment may still pass); -EIO when the device refused with an error that is not out
	 * of memory (no driver, no device, a device taken by another process, a sticky error),
	 * whose CUDA code the backend keeps for the calling thread (backend_cuda.h,
	 * backend_driver.h): the pool gives up at once and answers -EIO. */
	int (*segment_alloc)(void *ctx, int device, size_t size, uintptr_t *addr);
	/* Give a segment back. May wait for the device (the real cudaFree does). */
	int (*segment_free)(void *ctx, int device, uintptr_t addr, size_t size);
	/* Wait until all GPU work issued on `device` before the call has completed.
	 * -EBUSY when that is not allowed now (a stream capture is active). */
	int (*device_sync)(void *ctx, int device);
	/* Order `to` after all work issued on `from` so far (an event recorded on `from`,
	 * waited on by `to`). -EAGAIN when it cannot be done from this thread. */
	int (*stream_wait)(void *ctx, int device, gp_stream from, gp_stream to);
	/* Free and total bytes of the device as the driver sees them. */
	int (*mem_info)(void *ctx, int device, size_t *free_bytes, size_t *total_bytes);

	/* Markers: a marker is a point in the device's work queue, after all work issued on
	 * `device` (every stream the backend knows) before the call. Waiting for a marker
	 * waits for that work only, not for work issued later, so the device never runs dry
	 * behind a fence. NULL where the backend has none: fences are device_sync alone. */
	/* Record a marker after all work issued on `device` so far, without waiting. 0 and
	 * *token; -EBUSY: not allowed now (a capture is active); -ENOTSUP: this backend or
	 * process cannot now (the pool then fences with device_sync). A marker recorded later
	 * covers everything an earlier one covers. */
	int (*fence_mark)(void *ctx, int device, uint64_t *token);
	/* 0 when the marker's work is done, -EAGAIN when not yet, another -errno on error.
	 * Never blocks. */
	int (*fence_query)(void *ctx, int device, uint64_t token);
	/* Blocks until the marker's work is done (0) or fails. Never called with a lock held. */
	int (*fence_wait)(void *ctx, int device, uint64_t token);
	/* The token is no longer needed (it is never passed again). */
	void (*fence_drop)(void *ctx, int device, uint64_t token);
	/* The clock fence waits are timed with (ns, monotonic); NULL: CLOCK_MONOTONIC. The
	 * replay's fake backend answers its modelled time. */
	uint64_t (*now_ns)(void *ctx);

	/* Virtual memory (the driver's cuMem* calls): a segment may be a reserved address range
	 * into which physical memory is mapped chunk by chunk, each chunk (of the granularity)
	 * its own physical allocation, so that any chunk, one in the middle too, can go back
	 * alone (pool/vmm.c). All NULL where the backend has none: segments are whole
	 * (segment_alloc). */
	/* The granularity of device's physical memory (bytes, a power of two: 2 MiB on an
	 * H100): 0, or -ENOTSUP when the device cannot (no virtual memory management). */
	int (*vmm_granularity)(void *ctx, int device, size_t *bytes);
	/* Reserves `size` bytes of address space (a multiple of the granularity), aligned to the
	 * granularity, nothing mapped in it: 0 and *addr, or -ENOMEM. */
	int (*vmm_reserve)(void *ctx, int device, size_t size, uintptr_t *addr);
	/* Gives a whole reservation back; nothing may be mapped in it. */
	int (*vmm_unreserve)(void *ctx, int device, uintptr_t addr, size_t size);
	/* Maps physical memory at [addr, addr + size) of a reservation (both multiples of the
	 * granularity), one chunk at a time, each readable and writable by the device. 0 and
	 * *mapped == size; or an error (-ENOMEM whatever the driver said) and *mapped = the bytes
	 * from addr that stay mapped: the backend unmaps what it mapped in this call, from the
	 * last chunk down, and stops at the first chunk it cannot, so what stays is a prefix
	 * (usually nothing). Never maps a chunk twice. */
	int (*vmm_map)(void *ctx, int device, uintptr_t addr, size_t size, size_t *mapped);
	/* Unmaps [addr, addr + size) (chunks this backend mapped) and gives their physical
	 * memory back, chunk by chunk from addr. `sync`: work the device has queued may still
	 * use that memory (it was freed on a stream): wait for the device first, as segment_free
	 * does. 0 and *unmapped == size; -EBUSY when that is not allowed now (a capture is
	 * active; nothing unmapped); or another error and *unmapped = the bytes from addr that
	 * went back (the chunks after them stay mapped). */
	int (*vmm_unmap)(void *ctx, int device, uintptr_t addr, size_t size, bool sync, size_t *unmapped);
};

/* A backend that wraps `in` (a guard, a per-pool gate, a replay's observer): the calls of
 * `with` and its `ctx`, whose optional calls (the markers, the clock, virtual memory) are
 * kept only where `in` has them, so that a wrapper of a backend without markers has none
 * either and its fences stay device_sync alone (and one without virtual memory makes whole
 * segments). */
static inline struct gp_backend gp_backend_wrap(const struct gp_backend *in, void *ctx, const struct gp_backend *with)
{
	struct gp_backend be = *with;
	be.ctx = ctx;
	if (!in->fence_mark)
		be.fence_mark = NULL;
	if (!in->fence_query)
		be.fence_query = NULL;
	if (!in->fence_wait)
		be.fence_wait = NULL;
	if (!in->fence_drop)
		be.fence_drop = NULL;
	if (!in->now_ns)
		be.now_ns = NULL;
	if (!in->vmm_granularity || !in->vmm_reserve || !in->vmm_unreserve || !in->vmm_map || !in->vmm_unmap) {
		be.vmm_granularity = NULL;
		be.vmm_reserve = NULL;
		be.vmm_unreserve = NULL;
		be.vmm_map = NULL;
		be.vmm_unmap = NULL;
	}
	return be;
}

#endif
