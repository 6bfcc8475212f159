/* The pool's public entry points (pool.h), every one in the same frame (the lock, a broken
 * pool's own answer, the stats slot, the checker after: "the public entry points" below),
 * and its allocation policy (best fit, split rules, the ladder of what to try when no block
 * fits). First in the pool's file order (docs/architecture.md; tests/unit/pool_order.py):
 * it runs the *_locked functions of every file after it (pool_walk.c, pool_check.c,
 * bypass.c, fence.c, vmm.c, segment.c, freelist.c, treap.c, addrmap.c) and none uses it. Depends on
 * those, the backend and stats.h only: no CUDA types, no config, no getenv, no I/O. */
#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bypass.h"
#include "fence.h"
#include "freelist.h"
#include "pool_check.h"
#include "pool_internal.h"
#include "pool_walk.h"
#include "segment.h"
#include "treap.h"
#include "vmm.h"

void gp_pool_params_default(struct gp_pool_params *p)
{
	memset(p, 0, sizeof *p);
	p->round = GP_POOL_DEFAULT_ROUND;
	p->small_max = (size_t)GP_POOL_DEFAULT_SMALL_MAX_MIB << 20;
	p->small_segment = (size_t)GP_POOL_DEFAULT_SMALL_SEGMENT_MIB << 20;
	p->medium_max = (size_t)GP_POOL_DEFAULT_MEDIUM_MAX_MIB << 20;
	p->medium_segment = (size_t)GP_POOL_DEFAULT_MEDIUM_SEGMENT_MIB << 20;
	p->large_round = (size_t)GP_POOL_DEFAULT_LARGE_ROUND_MIB << 20;
	p->max_split_size = SIZE_MAX;
	p->limit = 0;
	p->release_threshold = SIZE_MAX;
	p->fence_marker = true;
	p->wait_fence_ns = 1000000;
	p->fence_headroom = 32u << 20;
	p->wait_share = 128;
	p->release_on_grow = true;
	p->segments = GP_SEGMENTS_AUTO;
}

unsigned gp_pool_params_check(const struct gp_pool_params *p)
{
	unsigned bad = 0;
	size_t r = p->round;
	if (!r || (r & (r - 1))) {
		bad |= GP_GEOMETRY_ROUND;
		r = 1; /* the rules below then judge only their own knobs */
	}
	if (p->small_max > p->small_segment || p->small_segment % r)
		bad |= GP_GEOMETRY_SMALL;
	if (p->medium_max > p->medium_segment || p->medium_segment % r)
		bad |= GP_GEOMETRY_MEDIUM;
	if (p->small_max > p->medium_max)
		bad |= GP_GEOMETRY_CLASSES;
	if (!p->large_round || p->large_round % r)
		bad |= GP_GEOMETRY_LARGE;
	return bad;
}

int gp_pool_device(const gp_pool *p) { return p->device; }

const struct gp_backend *gp_pool_backend(const gp_pool *p) { return p->be; }

/* PyTorch's rules: do not hand an oversize block (>= max_split_size) to a request below
 * max_split_size, and do not waste more than a large-segment rounding on oversize ones. Not
 * for a virtual-memory segment's blocks: split, their rest merges with its neighbours and its
 * chunks go back when free, so nothing is stranded (should_split), while its free blocks
 * merge into runs far larger than the knob, which would then serve nothing and make every
 * request map new chunks. */
static inline int fit_ok(const gp_pool *p, const struct gp_block *b, size_t rounded)
{
	size_t mss = p->prm.max_split_size;
	if (mss == SIZE_MAX || b->seg->vmm)
		return 1;
	if (rounded < mss && b->size >= mss)
		return 0;
	if (rounded >= mss && b->size >= rounded + p->prm.medium_segment)
		return 0;
	return 1;
}

static inline int better(const struct gp_block *a, const struct gp_block *b)
{
	return !b || gp_treap_less(a, b);
}

/* Best fit among `sl`'s blocks. */
static struct gp_block *find_in(gp_pool *p, struct gp_slist *sl, int t, size_t rounded)
{
	if (!sl)
		return NULL;
	struct gp_block *b = gp_treap_lower_bound(sl->root[t], rounded);
	return b && fit_ok(p, b, rounded) ? b : NULL;
}

static inline int should_split(const gp_pool *p, const struct gp_block *b, size_t rounded)
{
	size_t rem = b->size - rounded;
	/* a virtual-memory segment's rest is never stranded: it merges with its neighbours and
	 * the chunks under it go back when they are free */
	if (b->seg->small || b->seg->vmm)
		return rem >= p->prm.round;
	return rounded < p->prm.max_split_size && rem > p->prm.small_max;
}

/* How take_block treats the rest of the block it takes. */
enum take {
	TAKE_SPLIT, /* split off, into home: b came from a list, so no free neighbour is home's */
	TAKE_WHOLE, /* kept in the block: a whole segment grown for a large request */
	TAKE_MERGE, /* split off, merged into home with its free neighbours: mapped chunks of a
		     * virtual-memory segment, which may lie beside a free block of any list */
};

/* Turns free block b (already out of its tree) into a live block of `rounded` bytes,
 * splitting off the rest back into `home` (unless host memory for it ran out). */
static int take_block(gp_pool *p, struct gp_block *b, size_t rounded, size_t req,
		      struct gp_slist *home, enum take how)
{
	size_t before = b->size;
	if (how != TAKE_WHOLE && should_split(p, b, rounded)) {
		struct gp_block *r = gp_block_new(p);
		if (r) {
			r->addr = b->addr + rounded;
			r->size = b->size - rounded;
			r->seg = b->seg;
			r->prev = b;
			r->next = b->next;
			if (b->next)
				b->next->prev = r;
			b->next = r;
			b->size = rounded;
			r->state = B_FREE;
			r->gen = b->gen;
			GP_COUNT(p->st, splits, 1);
			GP_GAUGE_ADD(p->st, free_blocks, 1);
			if (__builtin_expect(how == TAKE_MERGE, 0)) {
				b->list = NULL; /* taken: r merges with its other neighbour only */
				gp_freelist_insert(p, r, home);
			} else {
				r->list = home;
				gp_treap_insert(&home->root[gp_tree_of(r)], r);
			}
		}
	}
	b->state = B_LIVE;
	b->requested = req;
	b->list = NULL;
	b->seg->used = true; /* for the decay (segment.c) */
	gp_addrmap_add(&p->map, b);
	GP_GAUGE_SUB(p->st, free_blocks, 1);
	GP_GAUGE_ADD(p->st, live_blocks, 1);
	GP_GAUGE_ADD(p->st, requested_bytes, req);
	GP_GAUGE_ADD(p->st, allocated_bytes, b->size);
	gp_pool_update_cached(p);
	GP_COUNT(p->st, requested_bytes_total, req);
	if (before >= p->st->largest_free_block)
		gp_freelist_largest_recount(p);
	return 0;
}

/* ---- the allocation ladder ------------------------------------------------------------
 * gp_pool_alloc tries these in order and takes the first block one answers. Each rung
 * costs more than the one before (a fence, then device memory, then the whole cache), and
 * the fences come before growing because a block that frees in flight will return is
 * cheaper than a segment that raises the peak:
 *
 *   try_ready                best fit in the ready list or the stream's own (the hit path)
 *   try_wait_for_better_fit  only when try_ready's block would be split for a large request
 *                            while frees in flight could fit better: put it back, fence
 *   try_steal                a block freed on another stream, ordered after it by an event
 *   try_retired              pending frees that a fence already covered (another thread's,
 *                            or a marker the device has passed: asked without waiting)
 *   try_fence_headroom       the pool grew fence_headroom since the last fence: fence
 *   try_fence_before_peak    growing would raise the peak while frees in flight could serve
 *   try_fence_pending_bound  the frees in flight hold more than fence_headroom and eight
 *                            times what is live: fence, whatever it takes
 *   try_grow                 a new segment (past the peak, first release unused cache)
 *   try_fence_all            no room to grow: fence, promoting every stream's blocks too
 *   try_release_and_grow     release every free segment and grow once more (OOM retry)
 *
 * A "fence" on the allocating thread (fence_and_find) is, with markers (backend.h), a wait
 * for the marker of the point where fitting blocks were freed, not for everything queued
 * until now: later work stays queued, the device does not run dry. The three conditional
 * fences then wait only when the expected wait (the device's lag less the marker's age) is
 * at most wait_fence_ns / 16 (try_wait_for_better_fit, try_fence_headroom: fragmentation and
 * headroom are worth little) or wait_fence_ns * 16 (try_fence_before_peak: the peak is what
 * the pool is judged by), within the wait credit (fence.c), and grow otherwise;
 * try_fence_pending_bound and try_fence_all wait whatever it takes. Without markers each is
 * one device_sync, under the conditions said at each rung.
 *
 * A rung that does not apply answers NULL without side effects, except where said. */

/* One request as the rungs see it. */
struct request {
	size_t size;            /* bytes asked for */
	size_t rounded;         /* size rounded up to prm.round */
	gp_stream stream;       /* GP_NO_STREAM for cudaMalloc */
	struct gp_slist *home;  /* the list the rest of a split block goes back to */
	bool grew;              /* the block is a new segment's (a miss), not a cached one */
};

/* Whether a request grows by a whole segment: always without virtual-memory segments; with
 * segments:auto, a cudaMalloc (or cuMemAlloc) of at least medium_max, which a whole segment
 * keeps whole (alloc_locked) so that cudaIpcGetMemHandle can export it, as natively (memory
 * of the virtual memory API cannot be; stream-ordered memory cannot be natively either). */
static inline bool grows_whole(const gp_pool *p, const struct request *rq)
{
	return !p->gran || (p->prm.segments == GP_SEGMENTS_AUTO && rq->stream == GP_NO_STREAM &&
			    rq->rounded >= p->prm.medium_max);
}

/* The bytes a request makes the pool grow by: its segment, or the chunks it maps (at most). */
static inline size_t grow_size(const gp_pool *p, const struct request *rq)
{
	return grows_whole(p, rq) ? gp_segment_size_for(&p->prm, rq->rounded) : gp_round_up(rq->rounded, p->gran);
}

/* A block the pool grows by for rq: a new whole segment's, or mapped chunks of a
 * virtual-memory one; NULL when the limit, the device or host memory refuses. */
static struct gp_block *grow(gp_pool *p, struct request *rq)
{
	struct gp_block *b = grows_whole(p, rq) ? gp_segment_grow(p, rq->rounded)
						: gp_vmm_grow(p, rq->rounded, rq->stream);
	rq->grew = b != NULL;
	return b;
}

/* Best fit for rq among the ready list and rq's stream's list, taken out of its tree;
 * rq->home is where it came from. Inlined into gp_pool_alloc for try_ready, the hit path
 * (about 20 instructions fewer per alloc+free pair than a call); the later rungs share one
 * out-of-line copy, find. */
static inline __attribute__((always_inline)) struct gp_block *best_fit(gp_pool *p, struct request *rq)
{
	int t = gp_tree_for(p, rq->rounded);
	struct gp_block *b = find_in(p, &p->ready, t, rq->rounded);
	rq->home = &p->ready;
	if (rq->stream != GP_NO_STREAM) {
		struct gp_slist *sl = gp_freelist_get(p, rq->stream, GP_FREELIST_EXISTING);
		struct gp_block *c = find_in(p, sl, t, rq->rounded);
		if (c && better(c, b)) {
			b = c;
			rq->home = sl;
		}
	}
	if (b)
		gp_freelist_take(rq->home, b);
	return b;
}

static struct gp_block *find(gp_pool *p, struct request *rq) { return best_fit(p, rq); }

/* Runs a fence on the allocating thread (counted as inline; fence.h: a marker expected
 * within budget_ns, or a device_sync), then looks again, and again after the next marker
 * while a newer one may still free a fitting block. The lock is dropped during each wait,
 * so the answer reflects other threads' frees too. */
static struct gp_block *fence_and_find(gp_pool *p, enum gp_fence_scope scope, struct request *rq,
				       uint64_t budget_ns)
{
	for (unsigned n = 0; n <= GP_MARKS_MAX; n++) {
		bool last;
		int rc = gp_fence_serve_locked(p, scope, rq->rounded, budget_ns, &last);
		if (rc == 0)
			GP_COUNT(p->st, inline_fences, 1);
		struct gp_block *b = find(p, rq);
		if (b || rc || last)
			return b;
	}
	return NULL;
}

/* The list a new segment's remainder joins: the stream's own (made now if need be), else
 * the ready list. */
static struct gp_slist *grow_home(gp_pool *p, gp_stream stream)
{
	struct gp_slist *sl = gp_freelist_get(p, stream, GP_FREELIST_CREATE);
	return sl ? sl : &p->ready;
}

static inline __attribute__((always_inline)) struct gp_block *try_ready(gp_pool *p, struct request *rq)
{
	return best_fit(p, rq);
}

/* b is try_ready's block. When it would be split for a large request while frees in
 * flight may hold a better fit, and fences are quick: carving large blocks while their
 * better-fitting twins wait for a fence is what fragments a pool under cudaFree, so b goes
 * back and the answer is what a fence leaves. Else b. */
static inline struct gp_block *try_wait_for_better_fit(gp_pool *p, struct request *rq, struct gp_block *b)
{
	if (b->size - rq->rounded > p->prm.small_max && rq->rounded > p->prm.small_max &&
	    p->st->pending_bytes >= rq->rounded &&
	    (gp_fence_markers(p) || p->last_fence_ns <= p->prm.wait_fence_ns)) {
		gp_freelist_insert(p, b, rq->home);
		return fence_and_find(p, GP_FENCE_PENDING_ONLY, rq, p->prm.wait_fence_ns / 16);
	}
	return b;
}

/* A block freed on another stream, made safe for rq's stream by an event. A stream that
 * cannot be ordered after from here has its blocks sent to wait for a fence. */
static struct gp_block *try_steal(gp_pool *p, struct request *rq)
{
	if (rq->stream == GP_NO_STREAM)
		return NULL;
	int t = gp_tree_for(p, rq->rounded);
	for (int attempt = 0; attempt < 4; attempt++) {
		struct gp_block *best = NULL;
		struct gp_slist *from = NULL;
		for (struct gp_slist *sl = p->streams; sl; sl = sl->hh.next) {
			if (sl->stream == rq->stream)
				continue;
			struct gp_block *c = find_in(p, sl, t, rq->rounded);
			if (c && better(c, best)) {
				best = c;
				from = sl;
			}
		}
		if (!best)
			return NULL;
		if (p->be->stream_wait(p->be->ctx, p->device, from->stream, rq->stream) == 0) {
			GP_COUNT(p->st, stream_steals, 1);
			gp_freelist_take(from, best);
			/* the remainder of a split stays with the stream it came from */
			rq->home = from;
			return best;
		}
		/* cannot order after that stream from here: its blocks wait for a fence */
		gp_pending_from_list(p, from);
		gp_freelist_largest_recount(p);
	}
	return NULL;
}

/* Pending blocks that a completed fence (the fence thread's, another caller's, or a marker
 * the device has passed since the last poll) already covered go to the ready list; then
 * look again. */
static struct gp_block *try_retired(gp_pool *p, struct request *rq)
{
	if (p->pend_head && p->nmarks) {
		uint64_t before = p->completed;
		(void)gp_fence_poll_locked(p);
		if (p->completed != before)
			return find(p, rq); /* the poll retired what it covered */
	}
	if (!p->pend_head || p->completed <= p->pend_head->gen)
		return NULL;
	gp_pending_retire(p, p->completed);
	return find(p, rq);
}

/* Frees in flight may hold a fitting block, fences are quick, and the pool has already
 * grown its headroom's worth since the last one: waiting for a fence costs less than
 * another segment, and keeps a cudaMalloc/cudaFree loop (or a program freeing faster than
 * the fence thread retires) from ballooning. */
static struct gp_block *try_fence_headroom(gp_pool *p, struct request *rq)
{
	if (!p->pend_head || (!gp_fence_markers(p) && p->last_fence_ns > p->prm.wait_fence_ns) ||
	    p->grown_pending + grow_size(p, rq) <= p->prm.fence_headroom)
		return NULL;
	return fence_and_find(p, GP_FENCE_PENDING_ONLY, rq, p->prm.wait_fence_ns / 16);
}

/* Never raise the peak for memory that frees in flight will return: when the GPU runs far
 * behind (a deep queue makes fences slow), growing instead of waiting would let reserved
 * memory track everything freed but not yet fenced. */
static struct gp_block *try_fence_before_peak(gp_pool *p, struct request *rq)
{
	if (!p->pend_head || (!gp_fence_markers(p) && p->st->pending_bytes < rq->rounded) ||
	    p->st->reserved_bytes + grow_size(p, rq) <= gp_pool_policy_peak(p))
		return NULL;
	return fence_and_find(p, GP_FENCE_PENDING_ONLY, rq, p->prm.wait_fence_ns * 16);
}

/* Frees in flight may hold this many times what is live (and fence_headroom) before an
 * allocation waits for them rather than grow (try_fence_pending_bound). 8: no bundled trace
 * reaches it at any modelled lag (BENCHMARKS.md section 20), where 2 and 4 already trade
 * BERT's waits for its memory. */
#define GP_PENDING_PER_LIVE 8

/* Frees in flight hold more than fence_headroom and GP_PENDING_PER_LIVE times what is live:
 * growing again would let reserved memory track what is freed in a lag's time rather than
 * what the program holds (a tight cudaMalloc/cudaFree loop on a GPU that lags grows by every
 * block it frees while their fence is in flight). Wait for the oldest fence that covers a
 * fitting block, whatever the budget and the wait credit: it is the first to complete. */
static struct gp_block *try_fence_pending_bound(gp_pool *p, struct request *rq)
{
	size_t pending = p->st->pending_bytes;
	if (!p->pend_head || pending < rq->rounded || pending <= p->prm.fence_headroom ||
	    pending / GP_PENDING_PER_LIVE <= p->st->allocated_bytes)
		return NULL;
	return fence_and_find(p, GP_FENCE_PENDING_ONLY, rq, UINT64_MAX);
}

/* A new segment. Growing past the peak reserved so far: first hand back cached segments
 * that cannot serve this request, so the peak holds what the program needs, not what an
 * earlier phase left behind. Below the old peak, growth costs nothing in peak terms and no
 * segment is given back (no churn in steady state); nor while the cache is under 1/16 of
 * what is reserved (a pool that is simply growing would otherwise trade a cudaFree for
 * every cudaMalloc). Makes the stream's list even when growing fails (grow_home), which
 * lets try_fence_all run for a stream that had none. */
static struct gp_block *try_grow(gp_pool *p, struct request *rq)
{
	size_t ss = grow_size(p, rq);
	size_t peak = gp_pool_policy_peak(p);
	bool whole = grows_whole(p, rq);
	if (p->prm.release_on_grow && p->st->reserved_bytes + ss > peak &&
	    p->st->cached_bytes > p->st->reserved_bytes / (whole ? 16 : 64)) {
		size_t over = p->st->reserved_bytes + ss - peak;
		if (whole)
			gp_vmm_release_locked(p, p->st->cached_bytes > over ? p->st->cached_bytes - over : 0);
		else
			gp_vmm_release_for_peak(p, over);
	}
	struct gp_block *b = grow(p, rq);
	if (b && p->pend_head)
		p->grown_pending += b->size;
	rq->home = grow_home(p, rq->stream);
	return b;
}

/* No ready block and no room to grow: wait for the frees in flight, on every stream. */
static struct gp_block *try_fence_all(gp_pool *p, struct request *rq)
{
	if (!p->pend_head && !p->streams)
		return NULL;
	return fence_and_find(p, GP_FENCE_PROMOTE_STREAMS, rq, UINT64_MAX);
}

/* The OOM retry: every free segment goes back to the backend, then one more segment. */
static struct gp_block *try_release_and_grow(gp_pool *p, struct request *rq)
{
	GP_COUNT(p->st, oom_retries, 1);
	gp_vmm_release_locked(p, 0);
	struct gp_block *b = grow(p, rq);
	rq->home = grow_home(p, rq->stream);
	return b;
}

/* The rungs after try_ready and try_wait_for_better_fit, in the order of the table above. */
static struct gp_block *(*const rungs[])(gp_pool *, struct request *) = {
	try_steal, try_retired, try_fence_headroom, try_fence_before_peak, try_fence_pending_bound,
	try_grow, try_fence_all, try_release_and_grow,
};

/* gp_pool_alloc's body: the ladder, then the block taken. 0, -ENOMEM (counted in ooms
 * unless count_oom is false: gp_pool_alloc_try's caller counts it once it gives up), or -EIO
 * (the device's error, not counted). */
static inline int alloc_locked(gp_pool *p, size_t size, gp_stream stream, uintptr_t *addr, bool count_oom)
{
	struct request rq = {.size = size, .rounded = gp_round_up(size, p->prm.round), .stream = stream};
	struct gp_block *b = try_ready(p, &rq);
	if (b)
		b = try_wait_for_better_fit(p, &rq, b);
	/* a device that refused a segment with an error that is not out of memory (backend.h:
	 * -EIO) stops the ladder: no fence or release makes it serve, and its error, kept by the
	 * backend, is the answer */
	p->grow_err = 0;
	for (size_t i = 0; !b && p->grow_err != -EIO && i < sizeof rungs / sizeof rungs[0]; i++)
		b = rungs[i](p, &rq);
	int rc = !b && p->grow_err == -EIO ? -EIO : -ENOMEM;
	if (b) {
		/* a segment made for one large request stays whole (its rest is under
		 * large_round): the block is then the segment, and cudaIpcGetMemHandle can
		 * export it (contract 7 of DESIGN.md, "IPC is never silently wrong": a handle
		 * names the whole segment) */
		rc = take_block(p, b, rq.rounded, rq.size, rq.home,
				!rq.grew ? TAKE_SPLIT
				: b->seg->vmm ? TAKE_MERGE
				: rq.rounded >= p->prm.medium_max ? TAKE_WHOLE : TAKE_SPLIT);
		if (rc == 0) {
			*addr = b->addr;
			GP_COUNT(p->st, allocs, 1);
			if (rq.grew)
				GP_COUNT(p->st, misses, 1);
			else
				GP_COUNT(p->st, hits, 1);
		}
	}
	if (rc == -ENOMEM && count_oom)
		GP_COUNT(p->st, ooms, 1);
	return rc;
}

/* gp_pool_free's body. */
static inline int free_locked(gp_pool *p, uintptr_t addr, gp_stream stream)
{
	struct gp_block *b = gp_addrmap_find(&p->map, addr, GP_MAP_UNLINK);
	if (!b) {
		if (!gp_segment_of(p, addr))
			return -ENOENT;
		GP_COUNT(p->st, invalid_frees, 1);
		return -EALREADY;
	}
	GP_GAUGE_SUB(p->st, live_blocks, 1);
	GP_GAUGE_SUB(p->st, requested_bytes, b->requested);
	GP_GAUGE_SUB(p->st, allocated_bytes, b->size);
	gp_pool_update_cached(p);
	GP_GAUGE_ADD(p->st, free_blocks, 1);
	GP_COUNT(p->st, frees, 1);
	int sync = 0;
	if (stream == GP_NO_STREAM) {
		gp_pending_push(p, b);
		sync = p->prm.sync_free;
	} else {
		struct gp_slist *sl = gp_freelist_get(p, stream, GP_FREELIST_CREATE);
		b->state = B_FREE;
		b->gen = p->issued;
		if (sl) {
			gp_freelist_insert(p, b, sl);
		} else {
			/* no host memory for a new stream list: treat as a cudaFree */
			gp_pending_push(p, b);
		}
	}
	if (sync)
		(void)gp_fence_locked(p, GP_FENCE_PENDING_ONLY);
	if (p->prm.release_threshold != SIZE_MAX && p->st->cached_bytes > p->prm.release_threshold)
		gp_vmm_release_locked(p, p->prm.release_threshold);
	return 0;
}

/* gp_pool_stream_retire's body. */
static void stream_retire_locked(gp_pool *p, gp_stream stream)
{
	struct gp_slist *sl = stream != GP_NO_STREAM ? gp_freelist_get(p, stream, GP_FREELIST_EXISTING) : NULL;
	if (!sl)
		return;
	gp_pending_from_list(p, sl);
	HASH_DEL(p->streams, sl);
	if (p->last_sl == sl)
		p->last_sl = NULL;
	free(sl);
	gp_freelist_largest_recount(p);
}

/* gp_pool_lookup's body. */
static int lookup_locked(gp_pool *p, uintptr_t addr, struct gp_block_info *info)
{
	struct gp_block *b = gp_addrmap_find(&p->map, addr, GP_MAP_KEEP);
	if (!b) {
		struct gp_segment *s = gp_segment_of(p, addr);
		for (struct gp_block *x = s ? s->first : NULL; x; x = x->next)
			if (addr >= x->addr && addr - x->addr < x->size) {
				if (x->state == B_LIVE)
					b = x;
				break;
			}
	}
	if (!b)
		return -ENOENT;
	info->addr = b->addr;
	info->size = b->size;
	info->segment = b->seg->addr;
	info->segment_size = b->seg->size;
	info->requested = b->requested;
	info->vmm = b->seg->vmm;
	return 0;
}

/* ---- the public entry points ----------------------------------------------------------
 * Each runs its *_locked body (here, or in the pool's other files) in one frame, written once:
 * the pool lock; then, on a pool that stopped pooling (bypass.h: its blocks are no longer
 * trusted), the entry's own answer instead of the body; and around a body that changes the
 * pool, the stats slot's sequence (gp_stats_begin/end: readers see no half-made change) and
 * the invariant checker after it (the check knob). */

enum entry {
	ENTRY_LOCK,   /* the lock only, on any pool (lookup, mem_info, check, abandon, destroy) */
	ENTRY_READ,   /* a pool that pools, read only (walk, block_pending) */
	ENTRY_CHANGE, /* a pool that pools, changed: the stats slot open, the checker after */
};

/* Opens an entry point's frame: takes the lock, and for ENTRY_CHANGE opens the stats slot.
 * False for ENTRY_READ or ENTRY_CHANGE on a broken pool: nothing is opened but the lock, for
 * the entry to compute its answer under and give back with entry_broken. */
static inline __attribute__((always_inline)) bool entry_open(gp_pool *p, enum entry kind)
{
	gp_lock_take(&p->lock);
	if (kind != ENTRY_LOCK && __builtin_expect(p->broken, 0))
		return false;
	if (kind == ENTRY_CHANGE)
		gp_stats_begin(p->st);
	return true;
}

static void drop_vmm_locked(gp_pool *p);

/* A frame's end: a drop of the chunks that waited for it (gp_pool_drop_vmm) is done by the
 * last frame to close while no thread waits inside one with the lock dropped. */
static inline __attribute__((always_inline)) void frame_end(gp_pool *p)
{
	if (__builtin_expect(p->drop_wanted, 0) && !p->unlocked)
		drop_vmm_locked(p);
	gp_lock_give(&p->lock);
}

/* Closes the frame entry_open(p, kind) opened (it answered true). */
static inline __attribute__((always_inline)) void entry_close(gp_pool *p, enum entry kind)
{
	if (kind == ENTRY_CHANGE) {
		GP_CHECK_AFTER(p);
		gp_stats_end(p->st);
	}
	frame_end(p);
}

/* Closes the frame of an entry point whose pool is broken (entry_open answered false) and
 * answers `answer`, computed under the lock. */
static inline int entry_broken(gp_pool *p, int answer)
{
	frame_end(p);
	return answer;
}

static inline int alloc_entry(gp_pool *p, size_t size, gp_stream stream, uintptr_t *addr, bool count_oom)
{
	if (size == 0 || size > ((size_t)1 << 56))
		return -EINVAL;
	if (!entry_open(p, ENTRY_CHANGE))
		return entry_broken(p, gp_bypass_alloc(p, size, addr));
	int rc = alloc_locked(p, size, stream, addr, count_oom);
	entry_close(p, ENTRY_CHANGE);
	return rc;
}

int gp_pool_alloc(gp_pool *p, size_t size, gp_stream stream, uintptr_t *addr)
{
	return alloc_entry(p, size, stream, addr, true);
}

int gp_pool_alloc_try(gp_pool *p, size_t size, gp_stream stream, uintptr_t *addr)
{
	return alloc_entry(p, size, stream, addr, false);
}

static void count_oom(struct gpupool_device_stats *st, void *arg)
{
	(void)arg;
	GP_COUNT(st, ooms, 1);
}

void gp_pool_count_oom(gp_pool *p)
{
	gp_pool_slot_write(p, count_oom, NULL);
}

int gp_pool_free(gp_pool *p, uintptr_t addr, gp_stream stream)
{
	if (!entry_open(p, ENTRY_CHANGE))
		return entry_broken(p, gp_bypass_free(p, addr));
	int rc = free_locked(p, addr, stream);
	entry_close(p, ENTRY_CHANGE);
	return rc;
}

void gp_pool_stream_retire(gp_pool *p, gp_stream stream)
{
	if (!entry_open(p, ENTRY_CHANGE)) {
		(void)entry_broken(p, 0); /* a broken pool's lists are not walked */
		return;
	}
	stream_retire_locked(p, stream);
	entry_close(p, ENTRY_CHANGE);
}

int gp_pool_fence(gp_pool *p)
{
	if (!entry_open(p, ENTRY_CHANGE))
		return entry_broken(p, 0); /* nothing it holds will be reused */
	int rc = gp_fence_locked(p, GP_FENCE_PENDING_ONLY);
	entry_close(p, ENTRY_CHANGE);
	return rc;
}

int gp_pool_fence_poll(gp_pool *p, bool mark)
{
	if (!entry_open(p, ENTRY_CHANGE))
		return entry_broken(p, 0);
	int rc = gp_fence_markers(p) ? gp_fence_poll_mark_locked(p, mark) : -ENOTSUP;
	entry_close(p, ENTRY_CHANGE);
	return rc;
}

bool gp_pool_has_pending(gp_pool *p)
{
	/* no frame: a lock-free read, for the fence thread's cheap question; st is read
	 * atomically (gp_pool_abandon may swap it meanwhile) */
	const struct gpupool_device_stats *st = __atomic_load_n(&p->st, __ATOMIC_ACQUIRE);
	return __atomic_load_n(&st->pending_frees, __ATOMIC_RELAXED) != 0 &&
	       !__atomic_load_n(&p->broken, __ATOMIC_RELAXED);
}

size_t gp_pool_release(gp_pool *p, size_t keep)
{
	if (!entry_open(p, ENTRY_CHANGE))
		return entry_broken(p, 0); /* its segments are no longer trusted to be free */
	size_t r = gp_vmm_release_locked(p, keep);
	entry_close(p, ENTRY_CHANGE);
	return r;
}

size_t gp_pool_give(gp_pool *p, size_t want)
{
	if (!entry_open(p, ENTRY_CHANGE))
		return entry_broken(p, 0);
	size_t r = gp_vmm_give_locked(p, want);
	entry_close(p, ENTRY_CHANGE);
	return r;
}

void gp_pool_set_floor(gp_pool *p, size_t bytes) { atomic_store_explicit(&p->floor, bytes, memory_order_relaxed); }

size_t gp_pool_segment_for(const gp_pool *p, size_t size)
{
	struct request rq = {.size = size, .rounded = gp_round_up(size, p->prm.round), .stream = GP_NO_STREAM};
	return grow_size(p, &rq);
}

size_t gp_pool_decay(gp_pool *p, uint64_t now, uint64_t after_ns, size_t budget, size_t *releasable)
{
	if (releasable)
		*releasable = 0;
	if (!entry_open(p, ENTRY_CHANGE))
		return entry_broken(p, 0); /* its segments are no longer trusted to be free */
	size_t r = gp_vmm_decay_locked(p, now, after_ns, budget, releasable);
	entry_close(p, ENTRY_CHANGE);
	return r;
}

size_t gp_pool_releasable(gp_pool *p)
{
	if (!entry_open(p, ENTRY_CHANGE))
		return entry_broken(p, 0); /* its segments are no longer trusted to be free */
	size_t r = gp_segment_releasable_locked(p);
	entry_close(p, ENTRY_CHANGE);
	return r;
}

int gp_pool_walk(gp_pool *p, const struct gp_pool_walker *w)
{
	if (!entry_open(p, ENTRY_READ))
		return entry_broken(p, -EFAULT); /* its blocks are no longer trusted */
	int rc = gp_walk_locked(p, w);
	entry_close(p, ENTRY_READ);
	return rc;
}

bool gp_pool_block_pending(gp_pool *p, uintptr_t addr)
{
	if (!entry_open(p, ENTRY_READ))
		return entry_broken(p, false); /* nothing pending, as gp_pool_has_pending says */
	bool pending = gp_walk_block_pending_locked(p, addr);
	entry_close(p, ENTRY_READ);
	return pending;
}

int gp_pool_lookup(gp_pool *p, uintptr_t addr, struct gp_block_info *info)
{
	/* a broken pool's blocks too: one handed out before it broke is still its own, and the
	 * shim must know it (a cudaIpcGetMemHandle on it is refused, contract 7; a cudaFreeAsync
	 * captured into a graph keeps it) */
	(void)entry_open(p, ENTRY_LOCK);
	int rc = lookup_locked(p, addr, info);
	entry_close(p, ENTRY_LOCK);
	return rc;
}

bool gp_pool_owns(gp_pool *p, uintptr_t addr)
{
	gp_lock_take(&p->lock);
	bool in = gp_segment_of(p, addr) != NULL;
	gp_lock_give(&p->lock);
	return in;
}

bool gp_pool_meets(gp_pool *p, uintptr_t addr, size_t size)
{
	gp_lock_take(&p->lock);
	bool in = gp_segment_meeting(p, addr, size) != NULL;
	gp_lock_give(&p->lock);
	return in;
}

int gp_pool_mem_info(gp_pool *p, size_t *free_bytes, size_t *total_bytes)
{
	size_t dfree = 0, dtotal = 0;
	int rc = p->be->mem_info(p->be->ctx, p->device, &dfree, &dtotal);
	if (rc)
		return rc;
	(void)entry_open(p, ENTRY_LOCK);
	size_t cached = p->st->cached_bytes, reserved = p->st->reserved_bytes;
	/* memory the process holds outside the pool counts against the same limit */
	size_t held = reserved + p->st->unpooled_bytes;
	entry_close(p, ENTRY_LOCK);
	if (p->prm.limit) {
		size_t room = p->prm.limit > held ? p->prm.limit - held : 0;
		if (room > dfree)
			room = dfree;
		*total_bytes = p->prm.limit < dtotal || !dtotal ? p->prm.limit : dtotal;
		*free_bytes = cached + room;
		if (*free_bytes > *total_bytes)
			*free_bytes = *total_bytes;
	} else {
		*total_bytes = dtotal;
		*free_bytes = dfree + cached > dtotal ? dtotal : dfree + cached;
	}
	return 0;
}

int gp_pool_check(gp_pool *p)
{
	(void)entry_open(p, ENTRY_LOCK); /* a broken pool answers -EFAULT, found before */
	int rc = gp_pool_check_locked(p);
	entry_close(p, ENTRY_LOCK);
	return rc;
}

/* ---- lifecycle ---------------------------------------------------------------------- */

int gp_pool_create(gp_pool **out, int device, const struct gp_pool_params *params,
		   const struct gp_backend *be, struct gpupool_device_stats *stats)
{
	if (gp_pool_params_check(params))
		return -EINVAL;
	gp_pool *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->device = device;
	p->prm = *params;
	p->be = be;
	p->st = stats;
	p->ready.stream = GP_NO_STREAM;
	if (gp_addrmap_init(&p->map, 256)) {
		free(p);
		return -ENOMEM;
	}
	p->rng = 2463534242u ^ (uint32_t)device;
	gp_vmm_setup(p);
	gp_stats_begin(stats);
	GP_STAT_SET(stats, device, device);
	GP_STAT_SET(stats, active, 1);
	GP_STAT_SET(stats, limit_bytes, params->limit);
	GP_STAT_SET(stats, vmm_granularity, p->gran);
	gp_stats_end(stats);
	*out = p;
	return 0;
}

void gp_pool_reset_peaks(gp_pool *p)
{
	gp_lock_take(&p->lock);
	p->reserved_high = gp_pool_policy_peak(p);
	gp_stats_begin(p->st);
#define GP_PEAK_RESET_(name, unit, help) GP_STAT_SET(p->st, name##_peak, p->st->name);
	GPUPOOL_GAUGES(GP_PEAK_RESET_)
#undef GP_PEAK_RESET_
	gp_stats_end(p->st);
	gp_lock_give(&p->lock);
}

void gp_pool_slot_write(gp_pool *p, void (*write)(struct gpupool_device_stats *st, void *arg), void *arg)
{
	(void)entry_open(p, ENTRY_LOCK);
	gp_stats_begin(p->st);
	write(p->st, arg);
	gp_stats_end(p->st);
	entry_close(p, ENTRY_LOCK);
}

void gp_pool_abandon(gp_pool *p, struct gpupool_device_stats *sink)
{
	(void)entry_open(p, ENTRY_LOCK);
	/* atomic: gp_pool_has_pending reads it without the lock (the fence thread, on a pool a
	 * device reset is abandoning) */
	__atomic_store_n(&p->st, sink, __ATOMIC_RELEASE);
	entry_close(p, ENTRY_LOCK);
}

/* The drop itself (pool lock held, no thread waiting inside a frame with it dropped). */
static void drop_vmm_locked(gp_pool *p)
{
	p->drop_wanted = false;
	/* as after a broken invariant: every entry point answers without its lists (a free, a
	 * release, a fence do nothing; an allocation goes to the backend, which refuses a killed
	 * pool), so no path reaches a dropped chunk again */
	__atomic_store_n(&p->broken, 1, __ATOMIC_RELAXED);
	gp_stats_begin(p->st);
	for (struct gp_segment *s = p->segs; s; s = s->next) {
		if (!s->vmm || s->dropped)
			continue;
		gp_vmm_segment_destroy(p, s);
		s->dropped = true;
		GP_GAUGE_SUB(p->st, reserved_bytes, s->mapped);
		s->mapped = 0;
	}
	gp_stats_end(p->st);
}

void gp_pool_drop_vmm(gp_pool *p)
{
	(void)entry_open(p, ENTRY_LOCK);
	/* a thread waiting inside a frame with the lock dropped (a fence) resumes that frame,
	 * which may still map or unmap: the last frame to close drops the chunks then */
	if (p->unlocked)
		p->drop_wanted = true;
	else
		drop_vmm_locked(p);
	entry_close(p, ENTRY_LOCK);
}

void gp_pool_destroy(gp_pool *p)
{
	if (!p)
		return;
	/* any pool, broken too (its segments go back); the counters change, but the pool is
	 * taken apart: no checker after */
	(void)entry_open(p, ENTRY_LOCK);
	gp_stats_begin(p->st);
	while (p->segs) {
		struct gp_segment *s = p->segs;
		p->segs = s->next;
		if (s->vmm && !s->dropped)
			gp_vmm_segment_destroy(p, s);
		else if (!s->vmm)
			(void)p->be->segment_free(p->be->ctx, p->device, s->addr, s->size);
		GP_COUNT(p->st, segment_frees, 1);
		GP_GAUGE_SUB(p->st, reserved_bytes, s->mapped);
		GP_GAUGE_SUB(p->st, segments, 1);
		free(s);
	}
	GP_STAT_SET(p->st, active, 0);
	gp_stats_end(p->st);
	for (unsigned i = 0; i < p->nmarks; i++)
		p->be->fence_drop(p->be->ctx, p->device, p->marks[i].token);
	p->nmarks = 0;
	gp_bypass_fini(p);
	gp_addrmap_fini(&p->map);
	struct gp_slist *sl, *tmp;
	HASH_ITER(hh, p->streams, sl, tmp)
	{
		HASH_DEL(p->streams, sl);
		free(sl);
	}
	while (p->chunks) {
		struct gp_chunk *c = p->chunks;
		p->chunks = c->next;
		free(c);
	}
	entry_close(p, ENTRY_LOCK);
	free(p);
}

