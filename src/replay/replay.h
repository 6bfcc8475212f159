/* Trace replay: feeds a trace (tracefile.h) through one gp_pool per device on the fake
 * backend, in trace order, and reports the pool's peaks, backend calls and time per op.
 * The engine behind gpupool-replay and the trace tests. Depends on the pool, the fake
 * backend, the reader, log.h and config.h (the fence policy enum only). */
#ifndef GP_REPLAY_H
#define GP_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "pool.h"

/* Most bytes the pool may hold in segments on one device (1 PiB): a trace or knobs that need
 * more stop the replay (-ERANGE), long before a sum of bytes could wrap. */
#define GP_REPLAY_RESERVED_MAX ((uint64_t)1 << 50)

/* What a replay tells an observer (gp_replay_opts.observers), in trace order: the events of
 * PyTorch's allocator history (the TraceEntry actions of torch.cuda.memory._snapshot()). */
enum gp_replay_event_kind {
	GP_REPLAY_SEGMENT_ALLOC,  /* the pool took a segment from the backend: addr, size */
	GP_REPLAY_SEGMENT_FREE,   /* the pool gave a segment back: addr, size */
	GP_REPLAY_ALLOC,          /* a malloc row got a block: addr, size (rounded), requested, stream */
	GP_REPLAY_FREE_REQUESTED, /* a free row: the block, as for ALLOC */
	GP_REPLAY_FREE_COMPLETED, /* the block is reusable: at once for a stream-ordered free; for a
				   * cudaFree, when the fence that retires it completes */
	GP_REPLAY_ROW,            /* after each data row: st holds the device's counters */
	GP_REPLAY_SEGMENT_MAP,    /* the pool mapped chunks into a virtual-memory segment: addr, size */
	GP_REPLAY_SEGMENT_UNMAP,  /* the pool unmapped chunks of one (gave them back): addr, size */
};
struct gp_replay_event {
	int kind;                 /* enum gp_replay_event_kind */
	int dev;
	uint64_t t_ns;            /* trace time: the row's (a free completed by a fence: the row at which the
				   * replay saw the fence retire it) */
	uintptr_t addr;           /* the pool's address (not the trace's pointer) */
	uint64_t size, requested; /* bytes */
	uint64_t stream;          /* the trace's stream handle; 0 for cudaMalloc/cudaFree and segments */
	const struct gpupool_device_stats *st; /* dev's counters after the event (ROW only; else NULL) */
	unsigned long line;       /* the trace line of the row behind the event (for a completion:
				   * of the free; for a segment: of the row whose pool call made it) */
	int op;                   /* that row's op (GP_TRACE_MALLOC, ...) */
};
struct gp_replay_observer {
	void *ctx;
	/* Each event. A negative return stops the replay with that error (r->error says so). */
	int (*event)(void *ctx, const struct gp_replay_event *e);
	/* Once, after the last row replayed when the replay succeeded, before the pools are
	 * destroyed: pools[d] is device d's pool or NULL. May walk them (gp_pool_walk).
	 * A negative return is the replay's. May be NULL. */
	int (*end)(void *ctx, gp_pool *const pools[GPUPOOL_MAX_DEVICES], uint64_t last_t_ns);
};
#define GP_REPLAY_MAX_OBSERVERS 4

struct gp_replay_opts {
	struct gp_pool_params params;  /* pool knobs (params.check: gp_pool_check after each op) */
	int fence;                     /* enum gp_fence_policy; GP_FENCE_THREAD by default */
	unsigned fence_interval_us;    /* modelled fence thread's delay after a cudaFree, 50 */
	size_t granularity;            /* the modelled device's virtual-memory granularity (bytes, a
					* power of two; 2 MiB, an H100's, by default); 0: a device
					* without virtual memory management (whole segments) */
	unsigned vmm_cost_us;          /* the modelled host time of mapping one chunk, access included (us) */
	unsigned vmm_unmap_cost_us;    /* ... and of unmapping one (us) */
	unsigned fence_latency_us;     /* how far the modelled device lags the program: a marker
					* recorded at clock c is done at c + this, a device_sync at c
					* returns then (us, 0) */
	bool legacy_stream;            /* legacy_stream:1: cudaMalloc/cudaFree rows are stream-ordered
					* on the legacy stream (no fence), as the shim makes them */
	unsigned decay_ms;             /* the release thread's decay (decay_ms): passes each second
					* of the program's clock, before the row that reaches it; 0 off */
	size_t sort_window;            /* rows buffered to restore t_ns order, 0 = file order */
	uint64_t limit_rows;           /* stop after this many data rows; 0 = all */
	/* Told every event, in this order; NULL entries are skipped. The replay does the
	 * bookkeeping only when one is set; ns_per_op then includes the segment callbacks. */
	const struct gp_replay_observer *observers[GP_REPLAY_MAX_OBSERVERS];
};

/* Makes room for `need` elements of `elem` bytes in the array *v of *cap, doubling (from 64);
 * 0, or -ENOMEM with *v and *cap unchanged. For the replay's observers and their outputs. */
int gp_replay_grow(void **v, size_t *cap, size_t need, size_t elem);

/* The knobs' defaults (the config table's), everything else off. */
void gp_replay_opts_default(struct gp_replay_opts *o);
struct gp_config;
/* Sets params, fence, fence_interval_us and legacy_stream from a parsed config (GPUPOOL_CONF or --conf);
 * leaves the other fields alone. A percentage limit is ignored (no device size to take
 * it of). */
void gp_replay_opts_from_config(struct gp_replay_opts *o, const struct gp_config *c);

/* What one replay measured. Peaks are summed over devices (exact with one device). */
struct gp_replay_result {
	uint64_t ops;              /* data rows read */
	uint64_t allocs, frees;    /* pool calls that succeeded */
	uint64_t skipped_errors;   /* rows with err != 0 (they did not allocate) */
	uint64_t unknown_frees;    /* frees of pointers the trace never allocated (or freed twice) */
	uint64_t null_frees;       /* cudaFree(0): no-ops */
	uint64_t zero_allocs;      /* successful mallocs of 0 bytes: nothing to replay */
	uint64_t remapped_ptrs;    /* a malloc returned a pointer the trace still had live */
	uint64_t alloc_failures;   /* pool allocations that failed */
	uint64_t check_failures;   /* gp_pool_check failures (--check) */
	uint64_t out_of_order;     /* rows older than an earlier row (sort window too small) */
	uint64_t live_at_end;      /* trace pointers never freed */
	uint64_t peak_requested, peak_allocated, peak_reserved, segments_peak; /* sums saturate */
	uint64_t backend_allocs, backend_frees; /* whole segments taken and given back */
	uint64_t vmm_reserves;     /* virtual-memory segments reserved */
	uint64_t chunks_mapped, chunks_unmapped; /* chunks of the granularity mapped and given back */
	uint64_t unmap_waits;      /* unmaps that waited for the device first (memory freed on a stream) */
	uint64_t vmm_ns;           /* modelled time the program spent mapping and unmapping chunks */
	uint64_t model_fences, fences, inline_fences, hits, misses, splits, merges, stream_steals;
	uint64_t decay_releases, decayed_bytes; /* segments the decay gave back, and their bytes */
	uint64_t markers;          /* markers recorded (the thread's and the allocating threads') */
	uint64_t wait_ns;          /* modelled time the program's threads waited for the device
				    * (inline device_syncs and marker waits; the fence thread's not) */
	uint64_t free_wait_ns;     /* modelled time they waited in segment frees (the runtime's
				    * cudaFree synchronizes the device) */
	uint64_t duration_ns;      /* the trace's span: last t_ns - first t_ns */
	uint64_t pool_ns;          /* ns inside gp_pool_alloc/free (clock read around each call) */
	double ns_per_op;          /* pool_ns / (allocs + frees) */
	double reserved_over_requested, reserved_over_allocated;
	int devices;
	unsigned long error_line;  /* line of the error when the replay failed */
	char error[700];           /* "PATH:LINE: message" when the replay failed */
};

/* Replays `path` ("-": standard input; tracefile.h). Returns 0 (*r filled), -EINVAL (malformed trace, or a pool cannot be
 * created from params: r->error names the line), -ERANGE (the pool would hold more than
 * GP_REPLAY_RESERVED_MAX on a device, or the fake device's 64-bit address space is used up),
 * -EIO, -ENOMEM, or -EFAULT (a pool invariant broke, with params.check). */
int gp_replay_file(const char *path, const struct gp_replay_opts *o, struct gp_replay_result *r);

/* Writes *r as key=value lines, one per figure (docs/replay.md lists them). */
void gp_replay_print(FILE *f, const struct gp_replay_result *r);
/* Writes *r as one JSON object on one line: "trace" and "conf" (the strings given, "" for
 * NULL), then every figure of gp_replay_print, in its order, with the same name and value. */
void gp_replay_print_json(FILE *f, const struct gp_replay_result *r, const char *trace, const char *conf);

#endif
