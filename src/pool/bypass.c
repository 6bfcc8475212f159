/* The pool after a broken invariant (bypass.h): allocations go straight to the backend,
 * each remembered by address in p->bypass so that its free goes straight back. Of the pool's
 * own structures it reads only the segment list (gp_bypass_free), never a block, a tree or a
 * counter. Fourth in the pool's file order (docs/architecture.md): uses segment.c only, with
 * pool_internal.h and log.h. */
#include "bypass.h"

#include <errno.h>
#include <stdlib.h>

#include "log.h"
#include "segment.h"

struct gp_bypass {
	uintptr_t addr;
	size_t size; /* bytes */
	UT_hash_handle hh;
};

void gp_bypass_start(gp_pool *p)
{
	if (p->broken)
		return;
	__atomic_store_n(&p->broken, 1, __ATOMIC_RELAXED); /* gp_pool_has_pending reads it unlocked */
	gp_log(GP_LOG_ERROR,
	       "device %d: gpupool stops pooling this device: its allocations go to the CUDA runtime from now "
	       "on, and the memory it holds stays reserved until the process exits",
	       p->device);
}

int gp_bypass_alloc(gp_pool *p, size_t size, uintptr_t *addr)
{
	int rc = p->be->segment_alloc(p->be->ctx, p->device, size, addr);
	if (rc)
		return rc == -EIO ? rc : -ENOMEM; /* a budget's refusal is out of memory here */
	__atomic_add_fetch(&p->st->passthrough_allocs, 1, __ATOMIC_RELAXED);
	struct gp_bypass *a = malloc(sizeof *a);
	if (!a)
		return 0; /* not remembered: its free reaches the runtime through the caller */
	a->addr = *addr;
	a->size = size;
	p->hash_oom = 0;
	HASH_ADD(hh, p->bypass, addr, sizeof a->addr, a);
	if (p->hash_oom)
		free(a);
	return 0;
}

int gp_bypass_free(gp_pool *p, uintptr_t addr)
{
	struct gp_bypass *a;
	HASH_FIND(hh, p->bypass, &addr, sizeof addr, a);
	if (!a)
		return gp_segment_of(p, addr) ? 0 : -ENOENT;
	HASH_DEL(p->bypass, a);
	int rc = p->be->segment_free(p->be->ctx, p->device, a->addr, a->size);
	free(a);
	if (rc)
		return -ENOENT;
	__atomic_add_fetch(&p->st->passthrough_frees, 1, __ATOMIC_RELAXED);
	return 0;
}

void gp_bypass_fini(gp_pool *p)
{
	struct gp_bypass *a, *tmp;
	HASH_ITER(hh, p->bypass, a, tmp)
	{
		HASH_DEL(p->bypass, a);
		(void)p->be->segment_free(p->be->ctx, p->device, a->addr, a->size);
		free(a);
	}
}
