/* The fake backend: segments are synthetic address ranges from a private bump pointer,
 * never dereferenced, with counters and injected failures, markers over a modelled clock
 * (the replay's time), and virtual memory (reservations from the same bump pointer, chunks
 * mapped into them, checked as the driver checks them); for the unit tests, the host
 * benchmark and trace replay. Implements backend.h; depends on nothing else. */
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
	/* Virtual memory (backend.h vmm_*), a device with it while granularity is not 0 (set it
	 * after init: a power of two). Mapped memory counts in used[] and against the capacity,
	 * a chunk at a time; the checks are the driver's: a range and an address aligned to the
	 * granularity, a map only inside a reservation and never over a mapped chunk, an unmap
	 * only of mapped chunks, an unreserve only of a whole reservation with nothing mapped in
	 * it. A call that breaks one is refused (-EINVAL) and counted in vmm_violations. */
	size_t granularity;
	uint64_t vmm_reserves, vmm_unreserves;     /* successful calls */
	uint64_t chunk_maps, chunk_unmaps;        /* chunks tried (the failure rules count these) */
	uint64_t chunks_mapped, chunks_unmapped;  /* chunks that were */
	uint64_t vmm_syncs;                       /* unmaps that waited for the device first */
	uint64_t vmm_violations;
	uint64_t fail_map_at;                     /* the Nth chunk map (chunk_maps) fails; 0: none */
	uint64_t fail_unmap_at;                   /* the Nth chunk unmap (chunk_unmaps) fails; 0: none */
	uint64_t fail_reserve_at;                 /* the Nth reservation fails; 0: none */
	bool fail_maps;                           /* every chunk map fails (out of memory) */
	uint64_t vmm_cost_ns;                     /* modelled host time of mapping one chunk: the
						   * clock moves on by it (not while background) */
	uint64_t vmm_unmap_cost_ns;               /* ... and of unmapping one */
	uint64_t vmm_ns;                          /* that time, billed */
	struct gp_fake_range {
		uintptr_t lo, hi;
		int device;
	} *mapped, *resv;                         /* mapped ranges (merged) and reservations, by address */
	size_t nmapped, capmapped, nresv, capresv;
};

/* Every device may hold `capacity` bytes (0 = unlimited); devices 0..GPUPOOL_MAX_DEVICES-1,
 * any other answers -ENODEV. No virtual memory until granularity is set. */
void gp_fake_backend_init(struct gp_fake_backend *fb, size_t capacity);
/* Frees what the virtual memory model allocated (the fake's own host memory, not the
 * device's: mappings left are left). */
void gp_fake_backend_fini(struct gp_fake_backend *fb);
/* Bytes mapped on `device` now in [lo, hi) (tests: what a pool left mapped). */
size_t gp_fake_backend_mapped(const struct gp_fake_backend *fb, int device, uintptr_t lo, uintptr_t hi);

#endif
