/* Reading the pool's layout (pool_walk.c): the bodies of gp_pool_walk and
 * gp_pool_block_pending (pool.h), which pool.c runs inside its entry frame. Depends on
 * pool_internal.h only. All functions: pool lock held, on a pool that pools (its blocks are
 * trusted). */
#ifndef GP_POOL_WALK_H
#define GP_POOL_WALK_H

#include "pool_internal.h"

/* gp_pool_walk's walk: 0, or the first nonzero callback return. */
int gp_walk_locked(gp_pool *p, const struct gp_pool_walker *w);

/* True when a block starts at addr and waits for a fence. */
bool gp_walk_block_pending_locked(gp_pool *p, uintptr_t addr);

#endif
