/* The pool's internals, shared by its files only (pool.c, freelist.c, segment.c, fence.c,
 * pool_check.c, pool_walk.c, bypass.c): the segment, free list and pool structs and the
 * small inline helpers they all use. The public contract is pool.h; nothing outside the
 * pool includes this. Depends on pool.h, block.h, addrmap.h, lock.h and stats.h: no config,
 * CUDA or I/O. */
#ifndef GP_POOL_INTERNAL_H
#define GP_POOL_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "addrmap.h"
#include "block.h"
#include "lock.h"
#include "pool.h"
#include "stats.h"

/* uthash (the per-stream free lists, p->streams): never abort the host program on host
 * OOM; hash integer keys cheaply. Set here so every file that touches p->streams agrees;
 * where HASH_ADD is used, the pool must be in scope as `p`. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (p->hash_oom = 1)
#define HASH_FUNCTION(keyptr, keylen, hashv)                                           \
	do {                                                                           \
		uint64_t k_;                                                           \
		memcpy(&k_, (keyptr), sizeof k_);                                      \
		k_ = (k_ >> 9) * 0x9E3779B97F4A7C15ull;                                \
		(hashv) = (unsigned)(k_ >> 32);                                        \
	} while (0)
#include <uthash.h>

/* The two size-class trees of a free list: blocks of small segments, and the rest. */
enum { T_SMALL = 0, T_LARGE = 1 };

/* One range of device memory taken from the backend, tiled by its blocks. A whole segment
 * is one backend allocation (segment_alloc); a virtual-memory segment (vmm.c) is a reserved
 * address range whose chunks are mapped where blocks need them: its holes (B_HOLE blocks)
 * are the ranges with nothing mapped, the tail hole the part never used yet. */
struct gp_segment {
	uintptr_t addr;
	size_t size;               /* bytes tiled by blocks: the allocation, or the reservation */
	size_t mapped;             /* bytes with memory behind them: size, less the holes */
	bool vmm;                  /* a virtual-memory segment */
	bool dropped;              /* vmm: its chunks and reservation given back while the pool
				    * lives on, killed by a reset (gp_pool_drop_vmm) */
	struct gp_block *tail;     /* vmm: the hole that ends the reservation, or NULL */
	int small;                 /* made for a request of at most small_max bytes */
	bool used;                 /* a block was handed out since the last decay pass */
	uint64_t idle_since;       /* the decay pass that first found it whole and unused; 0: not */
	struct gp_segment *prev, *next;
	struct gp_block *first;    /* the block at addr; the others follow by gp_block.next */
};

/* Free blocks of one stream (or, for p->ready, of no stream: reusable by anyone). */
struct gp_slist {
	gp_stream stream;
	struct gp_block *root[2];  /* treaps by (size, addr), T_SMALL and T_LARGE */
	UT_hash_handle hh;
};

/* Block structs are allocated this many at a time and never freed before the pool. */
struct gp_chunk {
	struct gp_chunk *next;
	struct gp_block blocks[126];
};

struct gp_bypass;

/* Markers outstanding at once per pool (fence.c): at most this many fences in flight. */
#define GP_MARKS_MAX 64

/* One marker (backend.h): fence k with its issue and its completion apart. */
struct gp_mark {
	uint64_t k;                /* the fence it is: retires blocks with gen < k */
	uint64_t token;            /* the backend's */
	uint64_t at_ns;            /* when it was recorded (be->now_ns clock) */
	int waiters;               /* threads in fence_wait on it (lock dropped): not dropped meanwhile */
};

struct gp_pool {
	gp_lock lock;
	int broken;                /* the checker found an invariant broken: bypass.h (set once) */
	int unlocked;              /* under the lock: threads inside an entry point that waits with
				    * the lock dropped (fence.c); the frame they resume may still use
				    * the pool's chunks */
	bool drop_wanted;          /* gp_pool_drop_vmm came while unlocked > 0: the last frame to
				    * close with none left drops the chunks (pool.c) */
	int device;
	struct gp_pool_params prm;
	const struct gp_backend *be;
	struct gpupool_device_stats *st;
	struct gp_slist ready;
	struct gp_slist *streams;  /* uthash by stream */
	struct gp_slist *last_sl;  /* cache of the last stream looked up */
	struct gp_addrmap map;     /* live blocks by address */
	struct gp_block *pend_head, *pend_tail;
	struct gp_segment *segs;
	struct gp_block *spare;    /* free block structs */
	struct gp_chunk *chunks;
	uint64_t issued;           /* fences begun */
	uint64_t completed;        /* newest fence completed */
	uint64_t last_fence_ns;    /* how long the last device_sync took */
	struct gp_mark marks[GP_MARKS_MAX]; /* markers by k, oldest first; those with k <= completed
				    * are done and stay only while waited on */
	unsigned nmarks;
	uint64_t lag_ns;           /* the device's lag: record to completion of the last marker seen done */
	uint64_t wait_credit_ns;   /* what conditional marker waits may still take (prm.wait_share) */
	uint64_t credit_at_ns;     /* clock time the credit was last accrued to */
	size_t grown_pending;      /* bytes grown since the last fence while frees were pending */
	size_t reserved_high;      /* reserved_bytes_peak when the peaks were last reset
				    * (gp_pool_reset_peaks): the policy's peak is the larger of this
				    * and the page's, so a reset changes what is reported, never how
				    * the pool grows */
	_Atomic size_t floor;      /* reserved bytes the decay and gp_pool_give keep (gp_pool_set_floor) */
	uint32_t rng;
	int hash_oom;
	int grow_err;              /* the backend's answer to this allocation's last segment that
				    * failed (backend.h: -ENOMEM, -EDQUOT, -EIO); 0: none */
	struct gp_bypass *bypass;  /* broken pools: the allocations made since, uthash by address */
	size_t gran;               /* virtual-memory segments: the backend's granularity (bytes);
				    * 0: whole segments only (vmm.c) */
	size_t va_size;            /* vmm: address space a new segment reserves (bytes) */
	struct gp_slist holes;     /* vmm: the holes of every segment, by (size, addr), trees by
				    * segment kind as free blocks' */
	uint64_t map_ns;           /* vmm: what mapping one chunk costs (ns, the latest measure; 0:
				    * not yet measured) */
	uint64_t unmap_ns;         /* vmm: the same for unmapping one */
	uint64_t move_credit_ns;   /* vmm: time the pool may still spend moving free chunks to where
				    * a request needs them (vmm.c, gp_vmm_release_for_peak) */
	uint64_t move_credit_at;   /* clock time the credit was last accrued to; 0: never */
};

/* x rounded up to a multiple of a (a power of two). */
static inline size_t gp_round_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

/* The tree a free block belongs in. */
static inline int gp_tree_of(const struct gp_block *b) { return b->seg->small ? T_SMALL : T_LARGE; }

/* The tree a request of `rounded` bytes is served from (small requests: small segments). */
static inline int gp_tree_for(const gp_pool *p, size_t rounded)
{
	return rounded <= p->prm.small_max ? T_SMALL : T_LARGE;
}

/* The highest reserved figure of the whole run, the peak the allocation policy keeps to
 * (pool.c: try_fence_before_peak, try_grow), whatever gp_pool_reset_peaks did to the page's. */
static inline size_t gp_pool_policy_peak(const gp_pool *p)
{
	return p->st->reserved_bytes_peak > p->reserved_high ? p->st->reserved_bytes_peak : p->reserved_high;
}

/* The clock fences and the virtual memory's costs are timed with (ns): the backend's, else
 * CLOCK_MONOTONIC. */
static inline uint64_t gp_pool_clock_ns(const gp_pool *p)
{
	if (p->be->now_ns)
		return p->be->now_ns(p->be->ctx);
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Cached bytes are what is reserved and not allocated: call after either changes. */
static inline void gp_pool_update_cached(gp_pool *p)
{
	GP_GAUGE_SET(p->st, cached_bytes, p->st->reserved_bytes - p->st->allocated_bytes);
}

/* A block struct that no segment uses any more goes back to the spares (gp_block_new in
 * segment.c takes from them). */
static inline void gp_block_put(gp_pool *p, struct gp_block *b)
{
	b->next = p->spare;
	p->spare = b;
}

#endif
