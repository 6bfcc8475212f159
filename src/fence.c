/* Pending frees and fences (fence.h), and the public gp_pool_fence/gp_pool_has_pending.
 * Depends on pool_internal.h, freelist.h and the backend's device_sync; no allocation
 * policy, no segments. */
#include "fence.h"

#include <time.h>

#include "freelist.h"
#include "treap.h"

void gp_pending_push(gp_pool *p, struct gp_block *b)
{
	b->state = B_PENDING;
	b->gen = p->issued;
	b->pend_next = NULL;
	if (p->pend_tail)
		p->pend_tail->pend_next = b;
	else
		p->pend_head = b;
	p->pend_tail = b;
	GP_GAUGE_ADD(p->st, pending_frees, 1);
	GP_GAUGE_ADD(p->st, pending_bytes, b->size);
}

static void put_pending(gp_pool *p, struct gp_slist *sl, struct gp_block *b, uint64_t k)
{
	(void)sl, (void)k;
	gp_pending_push(p, b);
}

void gp_pending_from_list(gp_pool *p, struct gp_slist *sl) { gp_freelist_drain(p, sl, put_pending, 0); }

void gp_pending_retire(gp_pool *p, uint64_t k)
{
	if (k > p->completed) {
		p->completed = k;
		p->grown_pending = 0;
	}
	while (p->pend_head && p->pend_head->gen < p->completed) {
		struct gp_block *b = p->pend_head;
		p->pend_head = b->pend_next;
		if (!p->pend_head)
			p->pend_tail = NULL;
		GP_GAUGE_SUB(p->st, pending_frees, 1);
		GP_GAUGE_SUB(p->st, pending_bytes, b->size);
		b->state = B_FREE;
		gp_freelist_insert(p, b, &p->ready);
	}
}

static void put_promoted(gp_pool *p, struct gp_slist *sl, struct gp_block *b, uint64_t k)
{
	if (b->gen < k) {
		gp_freelist_insert(p, b, &p->ready);
	} else {
		b->list = sl;
		gp_treap_insert(&sl->root[gp_tree_of(b)], b);
	}
}

/* Moves every stream-list block freed before fence k to the ready list (the fence
 * covered the work of every stream). */
static void promote(gp_pool *p, uint64_t k)
{
	for (struct gp_slist *sl = p->streams; sl; sl = sl->hh.next)
		gp_freelist_drain(p, sl, put_promoted, k);
}

int gp_fence_locked(gp_pool *p, enum gp_fence_scope scope)
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
		GP_COUNT(p->st, fences, 1);
		gp_pending_retire(p, k);
		if (scope == GP_FENCE_PROMOTE_STREAMS)
			promote(p, k);
	}
	return rc;
}

int gp_pool_fence(gp_pool *p)
{
	gp_lock_take(&p->lock);
	if (p->broken) {
		gp_lock_give(&p->lock);
		return 0; /* nothing it holds will be reused */
	}
	gp_stats_begin(p->st);
	int rc = gp_fence_locked(p, GP_FENCE_PENDING_ONLY);
	gp_stats_end(p->st);
	gp_lock_give(&p->lock);
	return rc;
}

bool gp_pool_has_pending(gp_pool *p)
{
	return __atomic_load_n(&p->st->pending_frees, __ATOMIC_RELAXED) != 0 &&
	       !__atomic_load_n(&p->broken, __ATOMIC_RELAXED);
}
