/* The pool: segments carved into blocks, best fit from size-ordered treaps, split and
 * merge, per-stream free lists, pending frees retired by fences, release and limits.
 * Depends on backend.h (device work), stats.h (counters) and log.h only: no CUDA types,
 * no getenv, no I/O. Addresses are uintptr_t and never dereferenced. */
#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "addrmap.h"
#include "block.h"
#include "lock.h"
#include "log.h"
#include "stats.h"
#include "treap.h"

/* uthash: never abort the host program on host OOM; hash integer keys cheaply. */
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

enum { T_SMALL = 0, T_LARGE = 1 };

struct gp_segment {
	uintptr_t addr;
	size_t size;
	int small;
	struct gp_segment *prev, *next;
	struct gp_block *first;
};

/* Free blocks of one stream (or, for p->ready, of no stream: reusable by anyone). */
struct gp_slist {
	gp_stream stream;
	struct gp_block *root[2];
	UT_hash_handle hh;
};

struct gp_chunk {
	struct gp_chunk *next;
	struct gp_block blocks[126];
};

struct gp_pool {
	gp_lock lock;
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
	size_t grown_pending;      /* bytes grown since the last fence while frees were pending */
	uint32_t rng;
	int hash_oom;
};

void gp_pool_params_default(struct gp_pool_params *p)
{
	memset(p, 0, sizeof *p);
	p->round = 512;
	p->small_max = 1u << 20;
	p->small_segment = 2u << 20;
	p->medium_max = 10u << 20;
	p->medium_segment = 20u << 20;
	p->large_round = 2u << 20;
	p->max_split_size = SIZE_MAX;
	p->limit = 0;
	p->release_threshold = SIZE_MAX;
	p->wait_fence_ns = 1000000;
	p->fence_headroom = 32u << 20;
	p->release_on_grow = true;
}

int gp_pool_device(const gp_pool *p) { return p->device; }

/* ---- block structs ---------------------------------------------------------------- */

static struct gp_block *block_new(gp_pool *p)
{
	if (!p->spare) {
		struct gp_chunk *c = malloc(sizeof *c);
		if (!c)
			return NULL;
		c->next = p->chunks;
		p->chunks = c;
		size_t n = sizeof c->blocks / sizeof c->blocks[0];
		for (size_t i = 0; i < n; i++) {
			c->blocks[i].next = p->spare;
			p->spare = &c->blocks[i];
		}
	}
	struct gp_block *b = p->spare;
	p->spare = b->next;
	b->prev = b->next = b->left = b->right = NULL;
	b->list = NULL;
	b->requested = 0;
	b->gen = 0;
	p->rng ^= p->rng << 13;
	p->rng ^= p->rng >> 17;
	p->rng ^= p->rng << 5;
	b->prio = p->rng;
	return b;
}

static void block_put(gp_pool *p, struct gp_block *b)
{
	b->next = p->spare;
	p->spare = b;
}

/* ---- helpers ------------------------------------------------------------------------ */

static inline size_t round_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

static inline int tree_of(const struct gp_block *b) { return b->seg->small ? T_SMALL : T_LARGE; }

/* The tree a request of `rounded` bytes is served from (small requests: small segments). */
static inline int tree_for(const gp_pool *p, size_t rounded) { return rounded <= p->prm.small_max ? T_SMALL : T_LARGE; }

static size_t segment_size_for(const struct gp_pool_params *prm, size_t rounded)
{
	if (rounded <= prm->small_max)
		return prm->small_segment;
	if (rounded < prm->medium_max)
		return prm->medium_segment;
	return round_up(rounded, prm->large_round);
}

static struct gp_slist *slist_find(gp_pool *p, gp_stream s, int create)
{
	struct gp_slist *sl;
	HASH_FIND(hh, p->streams, &s, sizeof s, sl);
	if (!sl && create) {
		sl = calloc(1, sizeof *sl);
		if (!sl)
			return NULL;
		sl->stream = s;
		p->hash_oom = 0;
		HASH_ADD(hh, p->streams, stream, sizeof sl->stream, sl);
		if (p->hash_oom) {
			free(sl);
			return NULL;
		}
	}
	if (sl)
		p->last_sl = sl;
	return sl;
}

/* The free lists of stream s (the ready list for GP_NO_STREAM); NULL when s has none and
 * `create` is 0, or when host memory ran out. The last stream looked up is cached. */
static inline struct gp_slist *slist_get(gp_pool *p, gp_stream s, int create)
{
	if (s == GP_NO_STREAM)
		return &p->ready;
	if (__builtin_expect(p->last_sl && p->last_sl->stream == s, 1))
		return p->last_sl;
	return slist_find(p, s, create);
}

/* Every free list of the pool, the ready list first:
 * for (sl = &p->ready; sl; sl = slist_next(p, sl)) */
static inline struct gp_slist *slist_next(const gp_pool *p, const struct gp_slist *sl)
{
	return sl == &p->ready ? p->streams : sl->hh.next;
}

static void largest_recount(gp_pool *p)
{
	size_t m = 0;
	for (struct gp_slist *sl = &p->ready; sl; sl = slist_next(p, sl))
		for (int t = 0; t < 2; t++) {
			struct gp_block *x = gp_treap_max(sl->root[t]);
			if (x && x->size > m)
				m = x->size;
		}
	GP_GAUGE_SET(p->st, largest_free_block, m);
}

static inline void note_free_size(gp_pool *p, size_t size)
{
	if (size > p->st->largest_free_block)
		GP_GAUGE_SET(p->st, largest_free_block, size);
}

/* Free block a absorbs its address neighbour a->next (out of every tree); the merged
 * block is free from fences only as late as the later of the two. */
static inline void absorb_next(gp_pool *p, struct gp_block *a)
{
	struct gp_block *n = a->next;
	a->size += n->size;
	a->next = n->next;
	if (n->next)
		n->next->prev = a;
	if (n->gen > a->gen)
		a->gen = n->gen;
	block_put(p, n);
	p->st->merges++;
	GP_GAUGE_SUB(p->st, free_blocks, 1);
}

/* Puts a free block into `sl`, merging with free neighbours of the same list. The
 * block's state must already be B_FREE and it must not be in any tree. */
static void free_insert(gp_pool *p, struct gp_block *b, struct gp_slist *sl)
{
	int t = tree_of(b);
	b->list = sl;
	struct gp_block *n = b->prev;
	if (n && n->state == B_FREE && n->list == sl) {
		gp_treap_erase(&sl->root[t], n);
		absorb_next(p, n);
		b = n;
	}
	n = b->next;
	if (n && n->state == B_FREE && n->list == sl) {
		gp_treap_erase(&sl->root[t], n);
		absorb_next(p, b);
	}
	b->left = b->right = NULL;
	gp_treap_insert(&sl->root[t], b);
	note_free_size(p, b->size);
}

/* PyTorch's rules: do not hand an oversize block (>= max_split_size) to a request below
 * max_split_size, and do not waste more than a large-segment rounding on oversize ones. */
static inline int fit_ok(const gp_pool *p, const struct gp_block *b, size_t rounded)
{
	size_t mss = p->prm.max_split_size;
	if (mss == SIZE_MAX)
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

static void slist_take(struct gp_slist *sl, struct gp_block *b)
{
	gp_treap_erase(&sl->root[tree_of(b)], b);
	b->left = b->right = NULL;
}

static inline int should_split(const gp_pool *p, const struct gp_block *b, size_t rounded)
{
	size_t rem = b->size - rounded;
	if (b->seg->small)
		return rem >= p->prm.round;
	return rounded < p->prm.max_split_size && rem > p->prm.small_max;
}

/* Turns free block b (already out of its tree) into a live block of `rounded` bytes,
 * splitting off the rest back into `home` (unless host memory for it ran out). */
static int take_block(gp_pool *p, struct gp_block *b, size_t rounded, size_t req,
		      struct gp_slist *home, int whole)
{
	size_t before = b->size;
	if (!whole && should_split(p, b, rounded)) {
		struct gp_block *r = block_new(p);
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
			r->list = home;
			gp_treap_insert(&home->root[tree_of(r)], r);
			p->st->splits++;
			GP_GAUGE_ADD(p->st, free_blocks, 1);
		}
	}
	b->state = B_LIVE;
	b->requested = req;
	b->list = NULL;
	gp_addrmap_add(&p->map, b);
	GP_GAUGE_SUB(p->st, free_blocks, 1);
	GP_GAUGE_ADD(p->st, live_blocks, 1);
	GP_GAUGE_ADD(p->st, requested_bytes, req);
	GP_GAUGE_ADD(p->st, allocated_bytes, b->size);
	GP_GAUGE_SET(p->st, cached_bytes, p->st->reserved_bytes - p->st->allocated_bytes);
	p->st->requested_bytes_total += req;
	if (before >= p->st->largest_free_block)
		largest_recount(p);
	return 0;
}

/* ---- segments ----------------------------------------------------------------------- */

static struct gp_block *grow(gp_pool *p, size_t rounded)
{
	size_t ss = segment_size_for(&p->prm, rounded);
	if (p->prm.limit && p->st->reserved_bytes + ss > p->prm.limit) {
		/* an exact-size segment may still fit under the limit */
		size_t exact = round_up(rounded, p->prm.round);
		if (ss > exact && p->st->reserved_bytes + exact <= p->prm.limit && rounded > p->prm.small_max)
			ss = exact;
		else {
			p->st->limit_refusals++;
			return NULL;
		}
	}
	struct gp_segment *s = malloc(sizeof *s);
	struct gp_block *b = block_new(p);
	if (!s || !b) {
		free(s);
		if (b)
			block_put(p, b);
		return NULL;
	}
	uintptr_t addr = 0;
	int rc = p->be->segment_alloc(p->be->ctx, p->device, ss, &addr);
	if (rc) {
		p->st->segment_alloc_failures++;
		free(s);
		block_put(p, b);
		return NULL;
	}
	s->addr = addr;
	s->size = ss;
	s->small = rounded <= p->prm.small_max;
	s->prev = NULL;
	s->next = p->segs;
	if (p->segs)
		p->segs->prev = s;
	p->segs = s;
	s->first = b;
	b->addr = addr;
	b->size = ss;
	b->seg = s;
	b->state = B_FREE;
	b->gen = p->issued;
	p->st->segment_allocs++;
	GP_GAUGE_ADD(p->st, segments, 1);
	GP_GAUGE_ADD(p->st, reserved_bytes, ss);
	GP_GAUGE_ADD(p->st, free_blocks, 1);
	GP_GAUGE_SET(p->st, cached_bytes, p->st->reserved_bytes - p->st->allocated_bytes);
	return b;
}

/* A segment can go back when none of its blocks is live or pending. Its free blocks may
 * sit in different lists (freed on different streams): giving the segment back is still
 * safe, because the runtime's cudaFree waits for all work on the device. */
static int segment_is_free(const struct gp_segment *s)
{
	for (const struct gp_block *b = s->first; b; b = b->next)
		if (b->state != B_FREE)
			return 0;
	return 1;
}

/* Gives a free segment back to the backend. -EBUSY (a capture is active) leaves the
 * segment as it was; any other failure drops it from the pool (its memory is lost). */
static int segment_release(gp_pool *p, struct gp_segment *s)
{
	int rc = p->be->segment_free(p->be->ctx, p->device, s->addr, s->size);
	if (rc == -EBUSY)
		return rc;
	if (rc)
		gp_log(GP_LOG_WARN, "device %d: releasing a segment of %zu bytes failed (%d); its memory is lost to the pool",
		       p->device, s->size, rc);
	for (struct gp_block *b = s->first, *nx; b; b = nx) {
		nx = b->next;
		slist_take(b->list, b);
		GP_GAUGE_SUB(p->st, free_blocks, 1);
		block_put(p, b);
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		p->segs = s->next;
	if (s->next)
		s->next->prev = s->prev;
	p->st->segment_frees++;
	p->st->released_bytes += s->size;
	GP_GAUGE_SUB(p->st, segments, 1);
	GP_GAUGE_SUB(p->st, reserved_bytes, s->size);
	GP_GAUGE_SET(p->st, cached_bytes, p->st->reserved_bytes - p->st->allocated_bytes);
	free(s);
	return 0;
}

/* Releases whole free segments, largest first, until cached bytes <= keep. Lock held. */
static size_t release_locked(gp_pool *p, size_t keep)
{
	size_t released = 0;
	for (;;) {
		if (p->st->cached_bytes <= keep)
			break;
		struct gp_segment *best = NULL;
		for (struct gp_segment *s = p->segs; s; s = s->next)
			if (segment_is_free(s) && (!best || s->size > best->size))
				best = s;
		if (!best)
			break;
		size_t sz = best->size;
		if (segment_release(p, best) == -EBUSY)
			break;
		released += sz;
	}
	if (released) {
		p->st->releases++;
		largest_recount(p);
	}
	return released;
}

/* ---- pending frees and fences ------------------------------------------------------- */

static void pending_push(gp_pool *p, struct gp_block *b)
{
	b->state = B_PENDING;
	b->gen = p->issued;
	b->right = NULL;
	b->left = p->pend_tail;
	if (p->pend_tail)
		p->pend_tail->right = b;
	else
		p->pend_head = b;
	p->pend_tail = b;
	GP_GAUGE_ADD(p->st, pending_frees, 1);
	GP_GAUGE_ADD(p->st, pending_bytes, b->size);
}

/* Empties sl's trees, handing each block (out of every tree) to `put`, which may insert it
 * into sl again. Lock held. */
static void slist_drain(gp_pool *p, struct gp_slist *sl,
			void (*put)(gp_pool *, struct gp_slist *, struct gp_block *, uint64_t), uint64_t k)
{
	for (int t = 0; t < 2; t++) {
		struct gp_block *rest = sl->root[t];
		sl->root[t] = NULL;
		while (rest) {
			struct gp_block *b = rest;
			rest = gp_treap_join(b->left, b->right);
			b->left = b->right = NULL;
			put(p, sl, b, k);
		}
	}
}

static void put_pending(gp_pool *p, struct gp_slist *sl, struct gp_block *b, uint64_t k)
{
	(void)sl, (void)k;
	pending_push(p, b);
}

/* Every block of a stream's lists waits for a fence, like a cudaFree'd one: used when
 * nothing can order another stream after that stream (gone, or not ours to name). */
static void slist_to_pending(gp_pool *p, struct gp_slist *sl) { slist_drain(p, sl, put_pending, 0); }

/* Every block freed before fence `k` began is reusable by anyone. Lock held. */
static void retire(gp_pool *p, uint64_t k)
{
	if (k > p->completed) {
		p->completed = k;
		p->grown_pending = 0;
	}
	while (p->pend_head && p->pend_head->gen < p->completed) {
		struct gp_block *b = p->pend_head;
		p->pend_head = b->right;
		if (p->pend_head)
			p->pend_head->left = NULL;
		else
			p->pend_tail = NULL;
		GP_GAUGE_SUB(p->st, pending_frees, 1);
		GP_GAUGE_SUB(p->st, pending_bytes, b->size);
		b->state = B_FREE;
		b->left = b->right = NULL;
		free_insert(p, b, &p->ready);
	}
}

static void put_promoted(gp_pool *p, struct gp_slist *sl, struct gp_block *b, uint64_t k)
{
	if (b->gen < k) {
		free_insert(p, b, &p->ready);
	} else {
		b->list = sl;
		gp_treap_insert(&sl->root[tree_of(b)], b);
	}
}

/* Moves every stream-list block freed before fence k to the ready list (the fence
 * covered the work of every stream). Lock held. */
static void promote(gp_pool *p, uint64_t k)
{
	for (struct gp_slist *sl = p->streams; sl; sl = sl->hh.next)
		slist_drain(p, sl, put_promoted, k);
}

/* One fence: begin (under lock), device_sync (unlocked), retire. `all` also promotes
 * stream-list blocks. Called and returns with the lock held and the stats slot open
 * (gp_stats_begin); 0 or the backend's error. */
static int fence_locked(gp_pool *p, int all)
{
	uint64_t k = ++p->issued;
	gp_stats_end(p->st);
	gp_lock_give(&p->lock);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = p->be->device_sync(p->be->ctx, p->device);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	gp_lock_take(&p->lock);
	gp_stats_begin(p->st);
	p->last_fence_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
	if (rc == 0) {
		p->st->fences++;
		retire(p, k);
		if (all)
			promote(p, k);
	}
	return rc;
}

int gp_pool_fence(gp_pool *p)
{
	gp_lock_take(&p->lock);
	gp_stats_begin(p->st);
	int rc = fence_locked(p, 0);
	gp_stats_end(p->st);
	gp_lock_give(&p->lock);
	return rc;
}

bool gp_pool_has_pending(gp_pool *p)
{
	return __atomic_load_n(&p->st->pending_frees, __ATOMIC_RELAXED) != 0;
}

/* ---- checker ------------------------------------------------------------------------ */

static int check_locked(gp_pool *p);

#define CHECK_AFTER(p)                                                                 \
	do {                                                                           \
		if ((p)->prm.check)                                                    \
			(void)check_locked(p);                                         \
	} while (0)

/* ---- public operations -------------------------------------------------------------- */

static struct gp_block *find(gp_pool *p, size_t rounded, gp_stream stream, struct gp_slist **home)
{
	int t = tree_for(p, rounded);
	struct gp_block *b = find_in(p, &p->ready, t, rounded);
	*home = &p->ready;
	if (stream != GP_NO_STREAM) {
		struct gp_slist *sl = slist_get(p, stream, 0);
		struct gp_block *c = find_in(p, sl, t, rounded);
		if (c && better(c, b)) {
			b = c;
			*home = sl;
		}
	}
	if (b)
		slist_take(*home, b);
	return b;
}

/* A block freed on another stream, made safe for `stream` by an event. */
static struct gp_block *steal(gp_pool *p, size_t rounded, gp_stream stream, struct gp_slist **home)
{
	int t = tree_for(p, rounded);
	for (int attempt = 0; attempt < 4; attempt++) {
		struct gp_block *best = NULL;
		struct gp_slist *from = NULL;
		for (struct gp_slist *sl = p->streams; sl; sl = sl->hh.next) {
			if (sl->stream == stream)
				continue;
			struct gp_block *c = find_in(p, sl, t, rounded);
			if (c && better(c, best)) {
				best = c;
				from = sl;
			}
		}
		if (!best)
			return NULL;
		if (p->be->stream_wait(p->be->ctx, p->device, from->stream, stream) == 0) {
			p->st->stream_steals++;
			slist_take(from, best);
			/* the remainder of a split stays with the stream it came from */
			*home = from;
			return best;
		}
		/* cannot order after that stream from here: its blocks wait for a fence */
		slist_to_pending(p, from);
		largest_recount(p);
	}
	return NULL;
}

/* Runs a fence on the allocating thread (counted as inline), then looks again. The lock
 * is dropped during the fence, so the answer reflects other threads' frees too. */
static struct gp_block *fence_and_find(gp_pool *p, int all, size_t rounded, gp_stream stream,
				       struct gp_slist **home)
{
	if (fence_locked(p, all) == 0)
		p->st->inline_fences++;
	return find(p, rounded, stream, home);
}

/* The list a new segment's remainder joins: the stream's own, else the ready list. */
static struct gp_slist *grow_home(gp_pool *p, gp_stream stream)
{
	struct gp_slist *sl = slist_get(p, stream, 1);
	return sl ? sl : &p->ready;
}

int gp_pool_alloc(gp_pool *p, size_t size, gp_stream stream, uintptr_t *addr)
{
	if (size == 0 || size > ((size_t)1 << 56))
		return -EINVAL;
	size_t rounded = round_up(size, p->prm.round);
	gp_lock_take(&p->lock);
	gp_stats_begin(p->st);
	struct gp_slist *home = NULL;
	struct gp_block *b = find(p, rounded, stream, &home);
	int hit = 1;
	if (b && b->size - rounded > p->prm.small_max && rounded > p->prm.small_max &&
	    p->st->pending_bytes >= rounded && p->last_fence_ns <= p->prm.wait_fence_ns) {
		/* the best ready block would be split, while frees in flight may hold a
		 * better fit: carving large blocks while their better-fitting twins wait for a
		 * fence is what fragments a pool under cudaFree. Fences are quick: wait. */
		free_insert(p, b, home);
		b = fence_and_find(p, 0, rounded, stream, &home);
	}
	if (!b && stream != GP_NO_STREAM)
		b = steal(p, rounded, stream, &home);
	if (!b && p->pend_head && p->completed > p->pend_head->gen) {
		retire(p, p->completed);
		b = find(p, rounded, stream, &home);
	}
	if (!b && p->pend_head && p->last_fence_ns <= p->prm.wait_fence_ns &&
	    p->grown_pending + segment_size_for(&p->prm, rounded) > p->prm.fence_headroom) {
		/* frees in flight may hold a fitting block, fences are quick, and the pool has
		 * already grown its headroom's worth since the last one: waiting for a fence
		 * costs less than another segment, and keeps a cudaMalloc/cudaFree loop (or a
		 * program freeing faster than the fence thread retires) from ballooning */
		b = fence_and_find(p, 0, rounded, stream, &home);
	}
	if (!b && p->pend_head && p->st->pending_bytes >= rounded &&
	    p->st->reserved_bytes + segment_size_for(&p->prm, rounded) > p->st->reserved_bytes_peak) {
		/* never raise the peak for memory that frees in flight will return: when the GPU
		 * runs far behind (a deep queue makes fences slow), growing instead of waiting
		 * would let reserved memory track everything freed but not yet fenced */
		b = fence_and_find(p, 0, rounded, stream, &home);
	}
	if (!b) {
		/* Growing past the peak reserved so far: first hand back cached segments that
		 * cannot serve this request, so the peak holds what the program needs, not
		 * what an earlier phase left behind. Below the old peak, growth costs nothing
		 * in peak terms and no segment is given back (no churn in steady state); nor
		 * while the cache is under 1/16 of what is reserved (a pool that is simply
		 * growing would otherwise trade a cudaFree for every cudaMalloc). */
		size_t ss = segment_size_for(&p->prm, rounded);
		size_t peak = p->st->reserved_bytes_peak;
		if (p->prm.release_on_grow && p->st->reserved_bytes + ss > peak &&
		    p->st->cached_bytes > p->st->reserved_bytes / 16) {
			size_t over = p->st->reserved_bytes + ss - peak;
			release_locked(p, p->st->cached_bytes > over ? p->st->cached_bytes - over : 0);
		}
		b = grow(p, rounded);
		hit = b == NULL;
		if (b && p->pend_head)
			p->grown_pending += b->size;
		home = grow_home(p, stream);
	}
	if (!b && (p->pend_head || p->streams)) {
		/* no ready block and no room to grow: wait for the frees in flight */
		b = fence_and_find(p, 1, rounded, stream, &home);
	}
	if (!b) {
		p->st->oom_retries++;
		release_locked(p, 0);
		b = grow(p, rounded);
		hit = 0;
		home = grow_home(p, stream);
	}
	int rc = -ENOMEM;
	if (b) {
		/* a segment made for one large request stays whole (its rest is under
		 * large_round): the block is then the segment, and cudaIpcGetMemHandle can
		 * export it (DESIGN point 7) */
		rc = take_block(p, b, rounded, size, home, !hit && rounded >= p->prm.medium_max);
		if (rc == 0) {
			*addr = b->addr;
			p->st->allocs++;
			if (hit)
				p->st->hits++;
			else
				p->st->misses++;
		}
	}
	if (rc)
		p->st->ooms++;
	CHECK_AFTER(p);
	gp_stats_end(p->st);
	gp_lock_give(&p->lock);
	return rc;
}

/* Is addr inside one of this pool's segments? Lock held; error paths only. */
static struct gp_segment *segment_of(gp_pool *p, uintptr_t addr)
{
	for (struct gp_segment *s = p->segs; s; s = s->next)
		if (addr >= s->addr && addr - s->addr < s->size)
			return s;
	return NULL;
}

int gp_pool_free(gp_pool *p, uintptr_t addr, gp_stream stream)
{
	gp_lock_take(&p->lock);
	struct gp_block *b = gp_addrmap_find(&p->map, addr, GP_MAP_UNLINK);
	if (!b) {
		int rc = segment_of(p, addr) ? -EALREADY : -ENOENT;
		if (rc == -EALREADY) {
			gp_stats_begin(p->st);
			p->st->invalid_frees++;
			gp_stats_end(p->st);
		}
		gp_lock_give(&p->lock);
		return rc;
	}
	gp_stats_begin(p->st);
	GP_GAUGE_SUB(p->st, live_blocks, 1);
	GP_GAUGE_SUB(p->st, requested_bytes, b->requested);
	GP_GAUGE_SUB(p->st, allocated_bytes, b->size);
	GP_GAUGE_SET(p->st, cached_bytes, p->st->reserved_bytes - p->st->allocated_bytes);
	GP_GAUGE_ADD(p->st, free_blocks, 1);
	p->st->frees++;
	int sync = 0;
	if (stream == GP_NO_STREAM) {
		pending_push(p, b);
		sync = p->prm.sync_free;
	} else {
		struct gp_slist *sl = slist_get(p, stream, 1);
		b->state = B_FREE;
		b->gen = p->issued;
		if (sl) {
			free_insert(p, b, sl);
		} else {
			/* no host memory for a new stream list: treat as a cudaFree */
			pending_push(p, b);
		}
	}
	if (sync)
		(void)fence_locked(p, 0);
	if (p->prm.release_threshold != SIZE_MAX && p->st->cached_bytes > p->prm.release_threshold)
		release_locked(p, p->prm.release_threshold);
	CHECK_AFTER(p);
	gp_stats_end(p->st);
	gp_lock_give(&p->lock);
	return 0;
}

void gp_pool_stream_retire(gp_pool *p, gp_stream stream)
{
	gp_lock_take(&p->lock);
	struct gp_slist *sl = stream == GP_NO_STREAM ? NULL : slist_get(p, stream, 0);
	if (sl) {
		gp_stats_begin(p->st);
		slist_to_pending(p, sl);
		HASH_DEL(p->streams, sl);
		if (p->last_sl == sl)
			p->last_sl = NULL;
		free(sl);
		largest_recount(p);
		CHECK_AFTER(p);
		gp_stats_end(p->st);
	}
	gp_lock_give(&p->lock);
}

int gp_pool_lookup(gp_pool *p, uintptr_t addr, struct gp_block_info *info)
{
	int rc = -ENOENT;
	gp_lock_take(&p->lock);
	struct gp_block *b = gp_addrmap_find(&p->map, addr, GP_MAP_KEEP);
	if (!b) {
		struct gp_segment *s = segment_of(p, addr);
		for (struct gp_block *x = s ? s->first : NULL; x; x = x->next)
			if (addr >= x->addr && addr - x->addr < x->size) {
				if (x->state == B_LIVE)
					b = x;
				break;
			}
	}
	if (b) {
		info->addr = b->addr;
		info->size = b->size;
		info->segment = b->seg->addr;
		info->segment_size = b->seg->size;
		info->requested = b->requested;
		rc = 0;
	}
	gp_lock_give(&p->lock);
	return rc;
}

size_t gp_pool_release(gp_pool *p, size_t keep)
{
	gp_lock_take(&p->lock);
	gp_stats_begin(p->st);
	size_t r = release_locked(p, keep);
	CHECK_AFTER(p);
	gp_stats_end(p->st);
	gp_lock_give(&p->lock);
	return r;
}

int gp_pool_mem_info(gp_pool *p, size_t *free_bytes, size_t *total_bytes)
{
	size_t dfree = 0, dtotal = 0;
	int rc = p->be->mem_info(p->be->ctx, p->device, &dfree, &dtotal);
	if (rc)
		return rc;
	gp_lock_take(&p->lock);
	size_t cached = p->st->cached_bytes, reserved = p->st->reserved_bytes;
	gp_lock_give(&p->lock);
	if (p->prm.limit) {
		size_t room = p->prm.limit > reserved ? p->prm.limit - reserved : 0;
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

/* ---- lifecycle ---------------------------------------------------------------------- */

int gp_pool_create(gp_pool **out, int device, const struct gp_pool_params *params,
		   const struct gp_backend *be, struct gpupool_device_stats *stats)
{
	const struct gp_pool_params *q = params;
	if (!q->round || (q->round & (q->round - 1)) || !q->large_round ||
	    (q->large_round & (q->large_round - 1)) || q->small_max > q->small_segment ||
	    q->medium_max > q->medium_segment || q->small_segment % q->round ||
	    q->medium_segment % q->round || q->large_round % q->round)
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
	gp_stats_begin(stats);
	stats->device = device;
	stats->active = 1;
	stats->limit_bytes = params->limit;
	gp_stats_end(stats);
	*out = p;
	return 0;
}

void gp_pool_abandon(gp_pool *p, struct gpupool_device_stats *sink)
{
	gp_lock_take(&p->lock);
	p->st = sink;
	gp_lock_give(&p->lock);
}

void gp_pool_destroy(gp_pool *p)
{
	if (!p)
		return;
	gp_lock_take(&p->lock);
	gp_stats_begin(p->st);
	while (p->segs) {
		struct gp_segment *s = p->segs;
		p->segs = s->next;
		(void)p->be->segment_free(p->be->ctx, p->device, s->addr, s->size);
		p->st->segment_frees++;
		GP_GAUGE_SUB(p->st, reserved_bytes, s->size);
		GP_GAUGE_SUB(p->st, segments, 1);
		free(s);
	}
	p->st->active = 0;
	gp_stats_end(p->st);
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
	gp_lock_give(&p->lock);
	free(p);
}

/* ---- the invariant checker ---------------------------------------------------------- */

static int fail(gp_pool *p, const char *what)
{
	gp_log(GP_LOG_ERROR, "device %d: pool invariant broken: %s", p->device, what);
	GP_ASSERT(!"pool invariant broken");
	return -EFAULT;
}

struct tree_walk {
	const struct gp_block *prev;
	size_t count, max;
	int bad;
};

static void walk_tree(const gp_pool *p, const struct gp_block *t, const struct gp_slist *sl, int tt,
		      uint32_t prio_cap, struct tree_walk *w)
{
	/* iterative in-order walk would need a stack; depth is O(log n) expected, and the
	 * checker runs in test builds only */
	if (!t || w->bad)
		return;
	if (t->prio > prio_cap)
		w->bad = 1;
	walk_tree(p, t->left, sl, tt, t->prio, w);
	if (w->prev && !gp_treap_less(w->prev, t))
		w->bad = 2;
	if (t->state != B_FREE || t->list != sl || tree_of(t) != tt)
		w->bad = 3;
	w->prev = t;
	w->count++;
	if (t->size > w->max)
		w->max = t->size;
	walk_tree(p, t->right, sl, tt, t->prio, w);
}

static int cmp_seg(const void *a, const void *b)
{
	uintptr_t x = (*(struct gp_segment *const *)a)->addr, y = (*(struct gp_segment *const *)b)->addr;
	return x < y ? -1 : x > y;
}

static int check_locked(gp_pool *p)
{
	size_t nseg = 0, reserved = 0, allocated = 0, requested = 0, nlive = 0, nfree = 0;
	size_t npend = 0, pend_bytes = 0, nfree_tree = 0, largest = 0;
	for (struct gp_segment *s = p->segs; s; s = s->next) {
		nseg++;
		reserved += s->size;
		if (s->next && s->next->prev != s)
			return fail(p, "segment list links");
		uintptr_t at = s->addr;
		const struct gp_block *prev = NULL;
		for (const struct gp_block *b = s->first; b; b = b->next) {
			if (b->addr != at || b->seg != s || b->prev != prev || !b->size)
				return fail(p, "blocks do not tile their segment");
			if (b->state == B_LIVE) {
				nlive++;
				allocated += b->size;
				requested += b->requested;
				if (gp_addrmap_find(&p->map, b->addr, GP_MAP_KEEP) != b)
					return fail(p, "live block missing from the address map");
			} else {
				nfree++;
				if (b->state == B_PENDING) {
					npend++;
					pend_bytes += b->size;
				} else if (prev && prev->state == B_FREE && prev->list == b->list) {
					return fail(p, "adjacent free blocks of one list not merged");
				}
			}
			at += b->size;
			prev = b;
		}
		if (at != s->addr + s->size)
			return fail(p, "blocks do not cover their segment");
	}
	if (nseg) {
		struct gp_segment **v = malloc(nseg * sizeof *v);
		if (v) {
			size_t i = 0;
			for (struct gp_segment *s = p->segs; s; s = s->next)
				v[i++] = s;
			qsort(v, nseg, sizeof *v, cmp_seg);
			for (i = 1; i < nseg; i++)
				if (v[i - 1]->addr + v[i - 1]->size > v[i]->addr) {
					free(v);
					return fail(p, "segments overlap");
				}
			free(v);
		}
	}
	if (gp_addrmap_recount(&p->map) != nlive || p->map.count != nlive)
		return fail(p, "address map holds blocks that are not live");
	size_t n = 0;
	const struct gp_block *last = NULL;
	for (const struct gp_block *b = p->pend_head; b; b = b->right) {
		if (b->state != B_PENDING || b->left != last || (last && last->gen > b->gen))
			return fail(p, "pending list");
		last = b;
		n++;
	}
	if (n != npend || last != p->pend_tail)
		return fail(p, "pending list count");
	for (struct gp_slist *sl = &p->ready; sl; sl = slist_next(p, sl)) {
		for (int t = 0; t < 2; t++) {
			struct tree_walk w = {0};
			walk_tree(p, sl->root[t], sl, t, UINT32_MAX, &w);
			if (w.bad)
				return fail(p, "free tree order, heap or membership");
			nfree_tree += w.count;
			if (w.max > largest)
				largest = w.max;
		}
	}
	if (nfree_tree + npend != nfree)
		return fail(p, "free trees do not hold exactly the free blocks");
	const struct gpupool_device_stats *st = p->st;
	if (st->segments != nseg || st->reserved_bytes != reserved || st->allocated_bytes != allocated ||
	    st->requested_bytes != requested || st->live_blocks != nlive || st->free_blocks != nfree ||
	    st->pending_frees != npend || st->pending_bytes != pend_bytes ||
	    st->cached_bytes != reserved - allocated || st->largest_free_block != largest)
		return fail(p, "counters differ from a recount");
	if (p->prm.limit && reserved > p->prm.limit)
		return fail(p, "reserved bytes over the limit");
	return 0;
}

int gp_pool_check(gp_pool *p)
{
	gp_lock_take(&p->lock);
	int rc = check_locked(p);
	gp_lock_give(&p->lock);
	return rc;
}
