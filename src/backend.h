/* The backend: the small contract between the pool and whatever owns device memory.
 * Implementations: backend_cuda.c (the real CUDA runtime, through the resolved table)
 * and backend_fake.c (synthetic addresses, for tests, the benchmark and replay).
 * Every function returns 0 or a negative errno; none is called with a pool lock held
 * except segment_alloc/segment_free/stream_wait (see pool.c for why that is safe). */
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

/* The fake backend: addresses from a private range, never dereferenced. */
struct gp_fake_backend {
	struct gp_backend be;
	uintptr_t next_addr;   /* bump pointer for new segments */
	size_t capacity;       /* bytes each device may hold; 0 = unlimited */
	size_t used[16];       /* bytes held per device */
	uint64_t allocs, frees, syncs, waits, fail_allocs;
	uint64_t fail_at;      /* fail the Nth segment_alloc (1-based); 0 = never */
	bool fail_all;         /* every segment_alloc fails with -ENOMEM */
	bool sync_busy;        /* device_sync and segment_free answer -EBUSY (a capture is active) */
	bool wait_refused;     /* stream_wait answers -EAGAIN */
};

void gp_fake_backend_init(struct gp_fake_backend *fb, size_t capacity);

#endif
