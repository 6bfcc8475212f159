/* Segments (segment.h): size classes, growth, release of whole free segments, and the
 * slab of block structs they are carved into, with the pool lock held (gp_pool_release is
 * pool.c's frame around the release). No allocation policy, no fences, no checker. Seventh in
 * the pool's file order (docs/architecture.md): uses freelist.c only, with pool_internal.h,
 * the backend and log.h. */
#include "segment.h"

#include <errno.h>
#include <stdlib.h>

#include "freelist.h"
#include "log.h"

struct gp_block *gp_block_new(gp_pool *p)
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
	b->idle_since = 0;
	p->rng ^= p->rng << 13;
	p->rng ^= p->rng >> 17;
	p->rng ^= p->rng << 5;
	b->prio = p->rng;
	return b;
}

size_t gp_segment_size_for(const struct gp_pool_params *prm, size_t rounded)
{
	if (rounded <= prm->small_max)
		return prm->small_segment;
	if (rounded < prm->medium_max)
		return prm->medium_segment;
	/* large_round is a multiple of round, not always a power of two */
	return (rounded + prm->large_round - 1) / prm->large_round * prm->large_round;
}

void gp_segment_add(gp_pool *p, struct gp_segment *s)
{
	s->prev = NULL;
	s->next = p->segs;
	if (p->segs)
		p->segs->prev = s;
	p->segs = s;
	GP_COUNT(p->st, segment_allocs, 1);
	GP_GAUGE_ADD(p->st, segments, 1);
}

void gp_segment_unlink(gp_pool *p, struct gp_segment *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		p->segs = s->next;
	if (s->next)
		s->next->prev = s->prev;
	GP_COUNT(p->st, segment_frees, 1);
	GP_GAUGE_SUB(p->st, segments, 1);
}

struct gp_block *gp_segment_grow(gp_pool *p, size_t rounded)
{
	size_t ss = gp_segment_size_for(&p->prm, rounded);
	/* Where a whole segment does not fit under a cap, a segment of exactly the request may:
	 * medium and large requests fall back on one (small ones have no such segment, and
	 * their segments fit the limit: config_device.c). */
	size_t exact = gp_round_up(rounded, p->prm.round);
	bool may_fit = ss > exact && rounded > p->prm.small_max;
	/* memory held outside the pool (unpooled_bytes) counts against the same limit; the
	 * backend's budget (if any) is the exact check, this one keeps the counters right */
	size_t held = p->st->reserved_bytes, un = p->st->unpooled_bytes;
	held = un > SIZE_MAX - held ? SIZE_MAX : held + un;
	size_t room = p->prm.limit > held ? p->prm.limit - held : 0;
	if (p->prm.limit && ss > room) {
		if (may_fit && exact <= room)
			ss = exact;
		else {
			GP_COUNT(p->st, limit_refusals, 1);
			p->grow_err = -EDQUOT;
			return NULL;
		}
	}
	struct gp_segment *s = malloc(sizeof *s);
	struct gp_block *b = gp_block_new(p);
	if (!s || !b) {
		free(s);
		if (b)
			gp_block_put(p, b);
		return NULL;
	}
	uintptr_t addr = 0;
	int rc = p->be->segment_alloc(p->be->ctx, p->device, ss, &addr);
	if (rc == -EDQUOT && may_fit && ss > exact) {
		/* a budget behind the backend (a group's) has less room than a whole segment:
		 * fitted to it as to the limit above */
		GP_COUNT(p->st, segment_alloc_failures, 1);
		ss = exact;
		rc = p->be->segment_alloc(p->be->ctx, p->device, ss, &addr);
	}
	if (rc) {
		p->grow_err = rc;
		GP_COUNT(p->st, segment_alloc_failures, 1);
		free(s);
		gp_block_put(p, b);
		return NULL;
	}
	s->addr = addr;
	s->size = ss;
	s->mapped = ss;
	s->vmm = false;
	s->tail = NULL;
	s->small = rounded <= p->prm.small_max;
	s->used = true;
	s->idle_since = 0;
	gp_segment_add(p, s);
	s->first = b;
	b->addr = addr;
	b->size = ss;
	b->seg = s;
	b->state = B_FREE;
	b->gen = p->issued;
	GP_GAUGE_ADD(p->st, reserved_bytes, ss);
	GP_GAUGE_ADD(p->st, free_blocks, 1);
	gp_pool_update_cached(p);
	return b;
}

/* A segment can go back when none of its blocks is live or pending. Its free blocks may
 * sit in different lists (freed on different streams): giving the segment back is still
 * safe, because the runtime's cudaFree waits for all work on the device. A virtual-memory
 * segment goes back chunk by chunk (vmm.c), never here. */
static int segment_is_free(const struct gp_segment *s)
{
	if (s->vmm)
		return 0;
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
		gp_freelist_take(b->list, b);
		GP_GAUGE_SUB(p->st, free_blocks, 1);
		gp_block_put(p, b);
	}
	gp_segment_unlink(p, s);
	GP_COUNT(p->st, released_bytes, s->size);
	GP_GAUGE_SUB(p->st, reserved_bytes, s->size);
	/* whole free segments: the decay's count, less this one (it may predate the count) */
	GP_GAUGE_SET(p->st, releasable_bytes, p->st->releasable_bytes > s->size ? p->st->releasable_bytes - s->size : 0);
	gp_pool_update_cached(p);
	free(s);
	return 0;
}

size_t gp_segment_release_locked(gp_pool *p, size_t keep)
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
		GP_COUNT(p->st, releases, 1);
		gp_freelist_largest_recount(p);
	}
	return released;
}

size_t gp_segment_give_locked(gp_pool *p, size_t want)
{
	size_t released = 0, floor = atomic_load_explicit(&p->floor, memory_order_relaxed);
	while (released < want) {
		/* the largest whole free segment that leaves the floor held */
		struct gp_segment *best = NULL;
		for (struct gp_segment *s = p->segs; s; s = s->next)
			if (segment_is_free(s) && p->st->reserved_bytes - s->size >= floor && (!best || s->size > best->size))
				best = s;
		if (!best)
			break;
		size_t sz = best->size;
		if (segment_release(p, best) == -EBUSY)
			break;
		released += sz;
	}
	if (released) {
		GP_COUNT(p->st, releases, 1);
		gp_freelist_largest_recount(p);
	}
	return released;
}

size_t gp_segment_decay_locked(gp_pool *p, uint64_t now, uint64_t after_ns, size_t budget, size_t *kept)
{
	size_t released = 0, releasable = 0;
	for (struct gp_segment *s = p->segs, *nx; s; s = nx) {
		nx = s->next;
		bool whole = segment_is_free(s);
		if (!whole || s->used) {
			/* in use at some point since the last pass: its idle time starts now */
			s->used = false;
			s->idle_since = whole ? now : 0;
		} else if (!s->idle_since) {
			s->idle_since = now;
		}
		if (!whole)
			continue;
		if (after_ns && now - s->idle_since >= after_ns && released < budget &&
		    p->st->reserved_bytes - s->size >= atomic_load_explicit(&p->floor, memory_order_relaxed)) {
			size_t sz = s->size;
			if (segment_release(p, s) == 0) {
				released += sz;
				GP_COUNT(p->st, decay_releases, 1);
				GP_COUNT(p->st, decayed_bytes, sz);
				continue;
			}
		}
		releasable += s->size;
	}
	if (released) {
		GP_COUNT(p->st, releases, 1);
		gp_freelist_largest_recount(p);
	}
	GP_GAUGE_SET(p->st, releasable_bytes, releasable);
	if (kept)
		*kept = releasable;
	return released;
}

size_t gp_segment_releasable_locked(gp_pool *p)
{
	size_t releasable = 0;
	for (const struct gp_segment *s = p->segs; s; s = s->next)
		if (segment_is_free(s))
			releasable += s->size;
	GP_GAUGE_SET(p->st, releasable_bytes, releasable);
	return releasable;
}

struct gp_segment *gp_segment_of(gp_pool *p, uintptr_t addr)
{
	for (struct gp_segment *s = p->segs; s; s = s->next)
		if (addr >= s->addr && addr - s->addr < s->size)
			return s;
	return NULL;
}

struct gp_segment *gp_segment_meeting(gp_pool *p, uintptr_t addr, size_t size)
{
	uintptr_t last = size == 0 ? addr : size - 1 > UINTPTR_MAX - addr ? UINTPTR_MAX : addr + (size - 1);
	for (struct gp_segment *s = p->segs; s; s = s->next)
		if (addr <= s->addr + (s->size - 1) && s->addr <= last)
			return s;
	return NULL;
}
