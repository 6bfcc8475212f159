/* Reading the pool's layout with the lock held, for readers that show it (gp_pool_walk and
 * gp_pool_block_pending of pool.h, pool.c's frames around these: the PyTorch snapshot of a
 * replay, the replay's events). Changes nothing. Second in the pool's file order
 * (docs/architecture.md): uses segment.c only, and pool_internal.h. */
#include "pool_walk.h"

#include "segment.h"

/* Walks the blocks from b up to the next hole (or the end), after telling w of the range
 * they make as one segment; answers the hole (NULL at the end) in *next. */
static int walk_range(const struct gp_segment *s, const struct gp_block *b, const struct gp_pool_walker *w,
		      const struct gp_block **next)
{
	size_t size = 0;
	const struct gp_block *e = b;
	for (; e && e->state != B_HOLE; e = e->next)
		size += e->size;
	*next = e;
	struct gp_walk_segment ws = {.addr = b->addr, .size = size, .small = s->small != 0, .expandable = s->vmm};
	int rc = w->segment ? w->segment(w->ctx, &ws) : 0;
	for (; b != e && !rc; b = b->next) {
		struct gp_walk_block wb = {
			.addr = b->addr,
			.size = b->size,
			.requested = b->state == B_FREE ? 0 : b->requested,
			.state = b->state == B_LIVE ? GP_WALK_LIVE : b->state == B_PENDING ? GP_WALK_PENDING : GP_WALK_FREE,
		};
		rc = w->block ? w->block(w->ctx, &wb) : 0;
	}
	return rc;
}

int gp_walk_locked(gp_pool *p, const struct gp_pool_walker *w)
{
	int rc = 0;
	/* a virtual-memory segment is walked as its mapped ranges, each between two holes */
	for (const struct gp_segment *s = p->segs; s && !rc; s = s->next)
		for (const struct gp_block *b = s->first; b && !rc;) {
			if (b->state == B_HOLE)
				b = b->next;
			else
				rc = walk_range(s, b, w, &b);
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
