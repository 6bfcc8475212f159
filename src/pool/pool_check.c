/* The pool's invariant checker (pool_check.h; gp_pool_check and the check after every
 * operation are pool.c's): segments do not overlap, blocks tile their segment, the free
 * trees, the holes' trees, the pending list and the address map hold exactly the blocks they
 * should, the holes of a virtual-memory segment are whole chunks and what is mapped is the
 * rest, counters equal a recount. Reads the pool, changes nothing, until it finds something wrong: then the
 * pool stops pooling (bypass.h). Third in the pool's file order (docs/architecture.md): uses
 * bypass.c, freelist.c, treap.c and addrmap.c, with pool_internal.h and log.h. */
#include "pool_check.h"

#include <errno.h>
#include <stdlib.h>

#include "bypass.h"
#include "freelist.h"
#include "log.h"
#include "treap.h"

/* Debug and test builds (-Dinvariants) stop here; the builds users run log once and stop
 * pooling (bypass.h) instead: contract 10, gpupool never kills the program it is in. */
static int fail(gp_pool *p, const char *what)
{
	gp_log(GP_LOG_ERROR, "device %d: pool invariant broken: %s", p->device, what);
	GP_ASSERT(!"pool invariant broken");
	gp_bypass_start(p);
	return -EFAULT;
}

struct tree_walk {
	const struct gp_block *prev;
	size_t count, max;
	int bad;
};

/* Walks tree tt of list sl, whose blocks must all be in `state` (B_FREE, or B_HOLE for the
 * holes' list). */
static void walk_tree(const gp_pool *p, const struct gp_block *t, const struct gp_slist *sl, int tt, int state,
		      uint32_t prio_cap, struct tree_walk *w)
{
	/* iterative in-order walk would need a stack; depth is O(log n) expected, and the
	 * checker runs in tests, or when asked for (the check knob) */
	if (!t || w->bad)
		return;
	if (t->prio > prio_cap)
		w->bad = 1;
	walk_tree(p, t->left, sl, tt, state, t->prio, w);
	if (w->prev && !gp_treap_less(w->prev, t))
		w->bad = 2;
	if (t->state != state || t->list != sl || gp_tree_of(t) != tt)
		w->bad = 3;
	w->prev = t;
	w->count++;
	if (t->size > w->max)
		w->max = t->size;
	walk_tree(p, t->right, sl, tt, state, t->prio, w);
}

static int cmp_seg(const void *a, const void *b)
{
	uintptr_t x = (*(struct gp_segment *const *)a)->addr, y = (*(struct gp_segment *const *)b)->addr;
	return x < y ? -1 : x > y;
}

int gp_pool_check_locked(gp_pool *p)
{
	if (p->broken)
		return -EFAULT; /* found and logged before */
	size_t nseg = 0, reserved = 0, allocated = 0, requested = 0, nlive = 0, nfree = 0;
	size_t npend = 0, pend_bytes = 0, nfree_tree = 0, largest = 0, nholes = 0;
	for (struct gp_segment *s = p->segs; s; s = s->next) {
		nseg++;
		reserved += s->mapped;
		if (s->next && s->next->prev != s)
			return fail(p, "segment list links");
		if (s->vmm ? !p->gran || s->addr % p->gran || s->size % p->gran : s->mapped != s->size || s->tail)
			return fail(p, "segment kind");
		uintptr_t at = s->addr;
		size_t holes = 0;
		const struct gp_block *prev = NULL;
		for (const struct gp_block *b = s->first; b; b = b->next) {
			if (b->addr != at || b->seg != s || b->prev != prev || !b->size)
				return fail(p, "blocks do not tile their segment");
			if (b->state == B_HOLE) {
				if (!s->vmm || b->list != &p->holes || b->addr % p->gran || b->size % p->gran ||
				    (prev && prev->state == B_HOLE))
					return fail(p, "a hole that is not whole chunks, or beside another");
				holes += b->size;
				nholes++;
			} else if (b->state == B_LIVE) {
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
		if (s->vmm && (s->mapped != s->size - holes ||
			       s->tail != (prev && prev->state == B_HOLE ? prev : NULL)))
			return fail(p, "mapped bytes or the tail hole of a virtual-memory segment");
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
	for (const struct gp_block *b = p->pend_head; b; b = b->pend_next) {
		if (b->state != B_PENDING || b->left || b->right || (last && last->gen > b->gen))
			return fail(p, "pending list");
		last = b;
		n++;
	}
	if (n != npend || last != p->pend_tail)
		return fail(p, "pending list count");
	for (struct gp_slist *sl = &p->ready; sl; sl = gp_freelist_next(p, sl)) {
		for (int t = 0; t < 2; t++) {
			struct tree_walk w = {0};
			walk_tree(p, sl->root[t], sl, t, B_FREE, UINT32_MAX, &w);
			if (w.bad)
				return fail(p, "free tree order, heap or membership");
			nfree_tree += w.count;
			if (w.max > largest)
				largest = w.max;
		}
	}
	if (nfree_tree + npend != nfree)
		return fail(p, "free trees do not hold exactly the free blocks");
	size_t nhole_tree = 0;
	for (int t = 0; t < 2; t++) {
		struct tree_walk w = {0};
		walk_tree(p, p->holes.root[t], &p->holes, t, B_HOLE, UINT32_MAX, &w);
		if (w.bad)
			return fail(p, "hole tree order, heap or membership");
		nhole_tree += w.count;
	}
	if (nhole_tree != nholes)
		return fail(p, "hole trees do not hold exactly the holes");
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
