/* The pool after its invariant checker found it broken, where no assertion stops the
 * program first (builds without -Dinvariants): it stops pooling. Its blocks, trees and
 * counters are no longer trusted, so nothing walks or changes them again; allocations go
 * straight to the backend (cudaMalloc, one allocation per call) and their frees straight
 * back; blocks handed out before stay reserved until the process ends. Depends on
 * pool_internal.h, segment.h and log.h only. All functions: pool lock held. */
#ifndef GP_BYPASS_H
#define GP_BYPASS_H

#include "pool_internal.h"

/* The pool stops pooling: sets p->broken and logs it, once per pool. */
void gp_bypass_start(gp_pool *p);

/* One allocation of `size` bytes straight from the backend: 0, or its error. */
int gp_bypass_alloc(gp_pool *p, size_t size, uintptr_t *addr);

/* Frees addr: 0 when it was a gp_bypass_alloc allocation (given back to the backend) or lies
 * in a segment the pool held when it stopped (kept: its blocks are no longer trusted);
 * -ENOENT when it is neither, or when the backend refused to take it back now (a capture is
 * active): the caller then passes it to the runtime, as for any pointer not gpupool's. */
int gp_bypass_free(gp_pool *p, uintptr_t addr);

/* Gives every gp_bypass_alloc allocation still held back to the backend (gp_pool_destroy). */
void gp_bypass_fini(gp_pool *p);

#endif
