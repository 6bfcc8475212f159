/* Pending frees and fences: a cudaFree'd block waits on the pending list (oldest first,
 * by gp_block.pend_next) until a fence begun after its free completes; a fence is one
 * device_sync, run without the pool lock. Depends on pool_internal.h and freelist.h; no
 * allocation policy (when to fence is pool.c's and the fence thread's). Lock held. */
#ifndef GP_FENCE_H
#define GP_FENCE_H

#include "pool_internal.h"

/* What a fence makes reusable by anyone once it completes. */
enum gp_fence_scope {
	GP_FENCE_PENDING_ONLY,    /* the pending (cudaFree'd) blocks freed before it began */
	GP_FENCE_PROMOTE_STREAMS, /* those, and every stream list's blocks freed before it began */
};

/* Block b (live, or free and out of every tree) waits for the next fence. */
void gp_pending_push(gp_pool *p, struct gp_block *b);

/* Every pending block freed before fence `k` began goes to the ready list. */
void gp_pending_retire(gp_pool *p, uint64_t k);

/* Every block of a stream's lists waits for a fence, like a cudaFree'd one: used when
 * nothing can order another stream after that stream (gone, or not ours to name). */
void gp_pending_from_list(gp_pool *p, struct gp_slist *sl);

/* One fence: begin (under lock), device_sync (unlocked), retire, and with
 * GP_FENCE_PROMOTE_STREAMS promote. Called and returns with the lock held and the stats
 * slot open (gp_stats_begin); 0 or the backend's error. */
int gp_fence_locked(gp_pool *p, enum gp_fence_scope scope);

#endif
