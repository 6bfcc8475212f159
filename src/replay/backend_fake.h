/* The fake backend: segments are synthetic address ranges from a private bump pointer,
 * never dereferenced, with counters and injected failures, and markers over a modelled
 * clock (the replay's time); for the unit tests, the host benchmark and trace replay.
 * Implements backend.h; depends on nothing else. */
#ifndef GP_BACKEND_FAKE_H
#define GP_BACKEND_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "gpupool/stats.h"

struct gp_fake_backend {
	struct gp_backend be;
	uintptr_t next_addr;   /* bump pointer for new segments; never reused, never wraps (a
				* segment that would pass the top of the address space fails: -ENOMEM) */
	size_t capacity;       /* bytes each device may hold; 0 = unlimited */
	size_t used[GPUPOOL_MAX_DEVICES]; /* bytes held per device */
	uint64_t allocs, frees, syncs, waits, fail_allocs;
	uint64_t fail_at;      /* fail the Nth segment_alloc (1-based); 0 = never */
	bool fail_all;         /* every segment_alloc fails */
	int fail_err;          /* what those failures answer (backend.h): 0 = -ENOMEM */
	size_t quota;          /* bytes a budget in front of each device lets it hold: a segment past
				* it fails with -EDQUOT; 0 = none */
	bool sync_busy;        /* device_sync and segment_free answer -EBUSY (a capture is active) */
	bool wait_refused;     /* stream_wait answers -EAGAIN */
	/* Markers and the modelled clock: a device that runs latency_ns behind the program.
	 * Tests set now_ns by hand; the replay sets it to the trace time plus waited_ns before
	 * each row. With latency_ns 0 (the default) every marker is done when recorded. */
	bool marks_unsupported; /* fence_mark answers -ENOTSUP (a backend without markers) */
	bool background;       /* calls come from a modelled fence thread: its waits are not billed */
	uint64_t now_ns;       /* the clock (ns): what be.now_ns answers */
	uint64_t latency_ns;   /* a marker recorded at now_ns is done at now_ns + latency_ns; a
				* device_sync at now_ns returns then */
	uint64_t waited_ns;    /* billed waits: fence_wait and device_sync move now_ns forward by
				* the time left, and add it here (not while background) */
	uint64_t free_waited_ns; /* the same for segment_free: the runtime's cudaFree synchronizes
				  * the device, so giving a segment back waits latency_ns too */
	uint64_t marks, mark_queries, mark_waits, mark_drops; /* calls; marks - mark_drops outstanding */
};

/* Every device may hold `capacity` bytes (0 = unlimited); devices 0..GPUPOOL_MAX_DEVICES-1,
 * any other answers -ENODEV. */
void gp_fake_backend_init(struct gp_fake_backend *fb, size_t capacity);

#endif
