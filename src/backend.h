/* The backend: the small contract between the pool and whatever owns device memory, with
 * two implementations, backend_cuda.c (the runtime) and backend_fake.c (tests, replay).
 * Every function returns 0 or a negative errno; only segment_alloc/free and stream_wait are
 * called with a pool lock held (see pool.c). Depends on nothing: no CUDA types. */
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
	/* Take `size` bytes of device memory on `device`; -ENOMEM when the device is full. */
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
};

#endif
