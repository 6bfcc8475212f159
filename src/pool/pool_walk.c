/* Reading the pool's layout with the lock held, for readers that show it (gp_pool_walk and
 * gp_pool_block_pending of pool.h, pool.c's frames around these: the PyTorch snapshot of a
 * replay, the replay's events). Changes nothing. Second in the pool's file order
 * (docs/architecture.md): uses segment.c only, and pool_internal.h. */
#include "pool_walk.h"

#include "segment.h"

int gp_walk_locked(gp_pool *p, const struct gp_pool_walker *w)
{
	int rc = 0;
	for (const struct gp_segment *s = p->segs; s && !rc; s = s->next) {
		struct gp_walk_segment ws = {.addr = s->addr, .size = s->size, .small = s->small != 0};
		rc = w->segment ? w->segment(w->ctx, &ws) : 0;
		for (const struct gp_block *b = s->first; b && !rc; b = b->next) {
			struct gp_walk_block wb = {
				.addr = b->addr,
				.size = b->size,
				.requested = b->state == B_FREE ? 0 : b->requested,
				.state = b->state == B_LIVE ? GP_WALK_LIVE
					 : b->state == B_PENDING ? GP_WALK_PENDING : GP_WALK_FREE,
			};
			rc = w->block ? w->block(w->ctx, &wb) : 0;
		}
	}
	return rc;
}

bool gp_walk_block_pending_locked(gp_pool *p, uintptr_t addr)
{
	struct gp_segment *s = gp_segment_of(p, addr);
	for (const struct gp_block *b = s ? s->first : NULL; b && b->addr <= addr; b = b->next)
		if (b->addr == addr)
			return b->state == B_PENDING;
	return false;
}
