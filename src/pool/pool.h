/* The pool's contract: a caching allocator of device address ranges for one device (sizes,
 * segments, blocks, per-stream free lists, fenced frees, release, the limit). Thread-safe:
 * one lock per pool, never held across device_sync. Must not depend on CUDA, the environment,
 * config or I/O: addresses are uintptr_t, never dereferenced; device work goes via backend.h. */
#ifndef GP_POOL_H
#define GP_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "gpupool/stats.h"

typedef struct gp_pool gp_pool;

/* The documented defaults of the segment geometry: the one place they are written.
 * gp_pool_params_default, config's knob table (and so docs/knobs.md) and config's messages
 * all take them from here. Sizes in MiB where the name says so, so that config can spell
 * them the way a user does ("2M"). */
#define GP_POOL_DEFAULT_ROUND 512
#define GP_POOL_DEFAULT_SMALL_MAX_MIB 1
#define GP_POOL_DEFAULT_SMALL_SEGMENT_MIB 2
#define GP_POOL_DEFAULT_MEDIUM_MAX_MIB 10
#define GP_POOL_DEFAULT_MEDIUM_SEGMENT_MIB 20
#define GP_POOL_DEFAULT_LARGE_ROUND_MIB 2

/* Where a pool's segments come from (the segments knob; pool/vmm.c). */
enum gp_pool_segments {
	GP_SEGMENTS_AUTO = 0,  /* virtual memory where the backend and the device have it, with the
				* blocks a program may export (below) whole; else whole segments */
	GP_SEGMENTS_VMM,       /* virtual memory for every segment where the backend and the device
				* have it; else whole segments */
	GP_SEGMENTS_WHOLE,     /* one backend allocation per segment (segment_alloc) */
};

/* Tuning, in bytes. gp_pool_params_default() gives the documented defaults. */
struct gp_pool_params {
	size_t round;            /* requests are rounded up to this (a power of two) */
	size_t small_max;        /* requests <= this come from small segments */
	size_t small_segment;    /* size of a small segment */
	size_t medium_max;       /* requests < this come from medium segments */
	size_t medium_segment;   /* size of a medium segment */
	size_t large_round;      /* larger requests get a segment rounded up to a multiple of this */
	size_t max_split_size;   /* blocks this large are not split for smaller requests; SIZE_MAX = no cap */
	size_t limit;            /* most reserved bytes this pool may hold; 0 = no limit */
	size_t release_threshold;/* keep at most this many cached bytes after a free; SIZE_MAX = keep all */
	bool sync_free;          /* cudaFree waits for its own fence before returning (fence policy "sync") */
	bool fence_marker;       /* fence at the point of the free (backend markers) where the backend
				  * can; false: every fence is a device_sync */
	uint64_t wait_fence_ns;  /* device_sync fences: while they take at most this long, a request
				  * that pending frees could serve waits for one instead of growing past
				  * fence_headroom. Markers: the scale of the expected waits (the device's
				  * lag less the marker's age) an allocation takes instead of growing: a
				  * sixteenth of it against fragmentation and headroom, sixteen times it
				  * before raising the reserved peak (pool.c) */
	size_t fence_headroom;   /* bytes the pool may grow between two fences while frees are pending */
	uint32_t wait_share;     /* markers: the allocating threads' waits that spare a segment take at
				  * most 1/wait_share of the time (a credit that accrues with the clock) */
	bool release_on_grow;    /* before growing past the peak reserved so far, release cached segments
				  * (when more than 1/16 of what is reserved is cached) */
	bool check;              /* run the invariant checker after every operation (slow) */
	int segments;            /* enum gp_pool_segments */
};

void gp_pool_params_default(struct gp_pool_params *p);

/* The segment geometry rules, one bit each: a request must fit the segment of its class,
 * and segments are whole multiples of round. */
enum gp_pool_geometry {
	GP_GEOMETRY_ROUND = 1 << 0,   /* round is a power of two */
	GP_GEOMETRY_SMALL = 1 << 1,   /* small_max <= small_segment, a multiple of round */
	GP_GEOMETRY_MEDIUM = 1 << 2,  /* medium_max <= medium_segment, a multiple of round */
	GP_GEOMETRY_CLASSES = 1 << 3, /* small_max <= medium_max */
	GP_GEOMETRY_LARGE = 1 << 4,   /* large_round > 0, a multiple of round */
};
/* The geometry rules p breaks (enum gp_pool_geometry bits; 0: none). gp_pool_create
 * refuses parameters that break any; config reports and repairs them knob by knob. */
unsigned gp_pool_params_check(const struct gp_pool_params *p);

/* Creates a pool for `device`. `stats` is where the pool keeps its counters (a slot of
 * the statistics page, or private memory); it must outlive the pool. -EINVAL when params
 * break a geometry rule (gp_pool_params_check). */
int gp_pool_create(gp_pool **out, int device, const struct gp_pool_params *params,
		   const struct gp_backend *be, struct gpupool_device_stats *stats);
/* Hands every segment back to the backend and frees the pool's host memory. Live blocks
 * are abandoned. Not for use at process exit with the CUDA backend (the runtime may be gone). */
void gp_pool_destroy(gp_pool *p);

/* Forgets the device behind the pool (cudaDeviceReset freed every allocation): from now on
 * the pool writes its counters to `sink`, and it must not be used for allocations again. Its
 * host memory is kept, so a thread still inside one of its calls stays safe. */
void gp_pool_abandon(gp_pool *p, struct gpupool_device_stats *sink);

/* An abandoned pool: every chunk of its virtual-memory segments unmapped and each
 * reservation given back (memory of cuMemCreate outlives a reset, and the reset ended the
 * work that used it), its blocks kept as host records only: now, or, while a thread waits
 * inside one of the pool's calls with its lock dropped (a fence), as the last such call
 * returns. From then on the pool pools nothing (an allocation fails, a free, a release or a
 * fence does nothing) and holds no device memory; gp_pool_destroy frees its host memory
 * later. */
void gp_pool_drop_vmm(gp_pool *p);

/* Allocates `size` bytes. stream == GP_NO_STREAM for cudaMalloc, else the stream of
 * cudaMallocAsync. Returns 0, -EINVAL (size 0 or too large), -ENOMEM after
 * releasing the cache and retrying once, or -EIO at once when the device refused a segment
 * with an error that is not out of memory (backend.h: the backend keeps it). */
int gp_pool_alloc(gp_pool *p, size_t size, gp_stream stream, uintptr_t *addr);
/* gp_pool_alloc, but a failure is not counted in ooms: for a caller that may still rescue
 * the allocation (a reclaim from other processes) and calls gp_pool_count_oom when it does
 * not, so that ooms counts the allocations that failed, never one that was served. */
int gp_pool_alloc_try(gp_pool *p, size_t size, gp_stream stream, uintptr_t *addr);
void gp_pool_count_oom(gp_pool *p);

/* Frees the block at `addr`. stream == GP_NO_STREAM for cudaFree (the block waits for a
 * fence), else the stream of cudaFreeAsync (reusable at once on that stream).
 * Returns 0, -ENOENT when the pool has no block at addr (not ours: the caller passes it
 * through), or -EALREADY when addr is a block of this pool that is not live (double free
 * or a pointer inside a block); nothing is changed on error. */
int gp_pool_free(gp_pool *p, uintptr_t addr, gp_stream stream);

/* The stream is gone (cudaStreamDestroy): its free blocks wait for a fence like cudaFree'd
 * ones, and its list is dropped. Call before the runtime destroys the stream. */
void gp_pool_stream_retire(gp_pool *p, gp_stream stream);

/* What the pool knows about a live block. */
struct gp_block_info {
	uintptr_t addr, size;          /* the block (size after rounding) */
	uintptr_t segment, segment_size;
	size_t requested;
	bool vmm;                      /* in a virtual-memory segment: memory no IPC handle can
					* export (cudaIpcGetMemHandle refuses it natively) */
};
/* 0 and *info when addr lies inside a live block of this pool, else -ENOENT. */
int gp_pool_lookup(gp_pool *p, uintptr_t addr, struct gp_block_info *info);
/* True when addr lies inside one of the pool's segments (a live block, a free one, or one
 * waiting for a fence): memory the backend gave this pool, whatever the pool did with it
 * since. Takes the pool lock. */
bool gp_pool_owns(gp_pool *p, uintptr_t addr);
/* True when [addr, addr + size) shares a byte with one of the pool's segments (size 0: the
 * byte at addr), the whole reservation of a virtual-memory segment included, mapped or not.
 * Takes the pool lock; a walk of the segments, for rare calls. */
bool gp_pool_meets(gp_pool *p, uintptr_t addr, size_t size);

/* Runs one fence now: device_sync through the backend, then every block freed before the
 * fence began becomes reusable. Returns 0, or the backend's error (-EBUSY: a capture is
 * active; nothing changed). Safe from any thread; the pool lock is not held during the sync. */
int gp_pool_fence(gp_pool *p);
/* The fence thread's step with markers (backend.h): retires the blocks of every marker
 * the device has passed, and with `mark` records one covering the pending blocks no marker
 * covers yet. Never waits for the device. Returns 1 while markers are outstanding (poll
 * again), 0 when none is, -ENOTSUP when this pool fences with device_sync (call
 * gp_pool_fence instead), or the backend's error (-EBUSY: a capture is active). */
int gp_pool_fence_poll(gp_pool *p, bool mark);
/* True when blocks wait for a fence. Lock-free read; may be stale by one operation. */
bool gp_pool_has_pending(gp_pool *p);

/* Hands whole free segments back to the backend, largest first, until at most `keep`
 * cached bytes remain (0 = all that can go). Pending blocks are not released. Returns
 * the bytes released. */
size_t gp_pool_release(gp_pool *p, size_t keep);

/* For another process (reclaim, a waiter): hands whole free segments back, largest first,
 * until `want` bytes went, never below the pool's floor (gp_pool_set_floor). Pending blocks
 * are not released. Returns the bytes released. */
size_t gp_pool_give(gp_pool *p, size_t want);

/* The floor: reserved bytes the pool keeps whatever others ask (gp_pool_give) and the decay
 * takes (0: none, the default). A release (gp_pool_release) and the pool's own ladder are
 * not bound by it. Any thread. */
void gp_pool_set_floor(gp_pool *p, size_t bytes);

/* The bytes of the segment a request of `size` bytes would make the pool take (its size
 * class). No lock: the parameters never change. */
size_t gp_pool_segment_for(const gp_pool *p, size_t size);

/* The decay of idle cache (jemalloc's dirty_decay_ms is the model), one pass at clock time
 * `now` (ns, any monotonic clock; passes a second or so apart): a whole free segment from
 * which no block was taken since the previous pass has been idle since the pass that first
 * found it so; one idle for after_ns or more is handed back to the backend (after_ns 0:
 * none), at most `budget` bytes per pass, never below the floor (gp_pool_set_floor). Pending blocks keep their segment. Sets the
 * releasable_bytes gauge and *releasable (unless NULL) to the whole free segments kept.
 * Returns the bytes handed back. */
size_t gp_pool_decay(gp_pool *p, uint64_t now, uint64_t after_ns, size_t budget, size_t *releasable);

/* The whole free segments now (what gp_pool_release(p, 0) would give back without a fence),
 * counted afresh into the releasable_bytes gauge: the decay's count without a decay pass (no
 * segment's idle time changes). For a reader that must not show a second-old figure. */
size_t gp_pool_releasable(gp_pool *p);

/* Restarts the peak of every gauge from its current value (reserved_bytes_peak becomes
 * reserved_bytes, and so on), as torch.cuda.reset_peak_memory_stats does; counters are left
 * alone. The allocation policy keeps the highest reserved figure of the whole run
 * (pool_internal.h, gp_pool_policy_peak): a reset changes what is reported, never how the
 * pool grows. Takes the pool lock; the slot is changed inside its seqlock bracket. */
void gp_pool_reset_peaks(gp_pool *p);

/* Free and total bytes as this process should see them: with a limit, total is the
 * limit and free what the pool could still hand out (cached free bytes plus room under
 * the limit less the memory held outside the pool, unpooled_bytes, bounded by the device's
 * free memory); without, the device's figures plus the
 * pool's cached free bytes. */
int gp_pool_mem_info(gp_pool *p, size_t *free_bytes, size_t *total_bytes);

/* The invariant checker: segments do not overlap, blocks tile their segment exactly,
 * free lists hold exactly the free ready blocks, the address map exactly the live ones,
 * counters equal a recount. Returns 0, or -EFAULT and logs what is wrong. A broken
 * invariant aborts where assertions are compiled in (-Dinvariants: debug and test builds);
 * elsewhere the pool stops pooling for good: gp_pool_alloc takes each allocation straight
 * from the backend and gp_pool_free gives it straight back, a free of a block handed out
 * before answers 0 and keeps it, fences, releases and stream retirements do nothing, and
 * gp_pool_has_pending answers false. */
int gp_pool_check(gp_pool *p);

/* The layout of a pool, for readers that show it (gpupool-replay's PyTorch snapshot). */
enum gp_walk_state {
	GP_WALK_LIVE = 0,    /* allocated */
	GP_WALK_PENDING = 1, /* freed with cudaFree, waiting for a fence */
	GP_WALK_FREE = 2,    /* free, ready for reuse (on its stream's list or anyone's) */
};
struct gp_walk_segment {
	uintptr_t addr;
	size_t size;          /* bytes */
	bool small;           /* made for a request of at most small_max bytes */
	bool expandable;      /* a mapped range of a virtual-memory segment (its holes are left
			       * out: each range between two holes is walked as a segment, as
			       * PyTorch's snapshot lists its expandable segments) */
};
struct gp_walk_block {
	uintptr_t addr;
	size_t size;          /* bytes, after rounding */
	size_t requested;     /* bytes asked for (live and pending blocks; 0 for free ones) */
	int state;            /* enum gp_walk_state */
};
struct gp_pool_walker {
	void *ctx;
	/* Each segment, then each of its blocks in address order (they tile it exactly).
	 * Either may be NULL; a nonzero return stops the walk and is gp_pool_walk's. Called
	 * with the pool lock held: they must not call the pool. */
	int (*segment)(void *ctx, const struct gp_walk_segment *s);
	int (*block)(void *ctx, const struct gp_walk_block *b);
};
/* Walks every segment of the pool (in the pool's own order, not by address) and its
 * blocks. Returns 0, the first nonzero callback return, or -EFAULT for a pool that stopped
 * pooling (gp_pool_check found it broken: its blocks are not trusted). Holds the pool lock
 * for the whole walk. */
int gp_pool_walk(gp_pool *p, const struct gp_pool_walker *w);
/* True when a block starting at addr waits for a fence (freed with cudaFree, not yet
 * retired); false on a pool that stopped pooling (nothing in it waits for a fence any more,
 * as gp_pool_has_pending says). Takes the pool lock. */
bool gp_pool_block_pending(gp_pool *p, uintptr_t addr);

/* Runs write(st, arg) on the pool's statistics slot as its one writer: under the pool lock,
 * inside the slot's sequence bracket; on a broken pool too. For figures the pool counts but
 * does not keep itself (memory the process holds outside it, unpooled_*: its limit covers
 * them, gp_pool_mem_info and the segment growth read unpooled_bytes). `write` must not call
 * the pool. */
void gp_pool_slot_write(gp_pool *p, void (*write)(struct gpupool_device_stats *st, void *arg), void *arg);

int gp_pool_device(const gp_pool *p);
/* The backend the pool was created with (its `be`), for an owner that wraps it per pool. */
const struct gp_backend *gp_pool_backend(const gp_pool *p);

#endif
