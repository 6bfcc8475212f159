/* gp_pool_walk (pool.h): every segment of a pool and its blocks in address order, read under
 * the pool lock, for readers that show the pool's layout (the PyTorch snapshot of a replay).
 * Changes nothing. Depends on pool_internal.h only. */
#include <errno.h>

#include "pool_internal.h"

int gp_pool_walk(gp_pool *p, const struct gp_pool_walker *w)
{
	int rc = 0;
	gp_lock_take(&p->lock);
	if (p->broken) {
		/* its blocks are no longer trusted (bypass.h) */
		gp_lock_give(&p->lock);
		return -EFAULT;
	}
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
	gp_lock_give(&p->lock);
	return rc;
}
