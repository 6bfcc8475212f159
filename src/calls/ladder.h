/* The allocation ladder: what one pooled allocation tries, in order, before it fails. The
 * whole ladder is stated here, once; each rung names the file that holds it.
 *
 * In the pool (src/pool/pool.c, gp_pool_alloc_try, under the pool lock; cheapest first):
 *   1. the pool:    best fit in the ready list or the stream's own (try_ready: the hit path);
 *                   a block freed on another stream, ordered after it by an event
 *                   (try_steal); pending frees a fence already covered (try_retired)
 *   2. fence:       wait for the frees in flight that would fit, where that is cheaper than
 *                   growing (try_wait_for_better_fit, try_fence_headroom,
 *                   try_fence_before_peak, try_fence_pending_bound)
 *   3. grow:        a new segment from the device (try_grow; past the peak, unused cache is
 *                   released first)
 *   4. fence all:   no room to grow: fence every stream's frees (try_fence_all)
 *   5. release:     give every free segment back to the device (try_release_and_grow)
 *   6. retry:       grow once more (the same rung)
 * In the process (src/process/pools.c, gp_registry_alloc_once, before rung 1):
 *      a pending release request from gpupool-stat is answered; while tracing, the call is
 *      timed and written; a device reset that killed the pool mid-call is served by the
 *      device's new pool (gp_registry_alloc_again).
 * Here (ladder.c, out of line and cold; with no pool lock held). Under a cap, first: the
 * program's own memory pools' figures read again (a synchronize may have made them give
 * memory back), and the pool asked once more where they went down. Then, when the GPU
 * itself is short (not the limit: others cannot change that; where the GPU has the room
 * again by now, freed since the pool gave up, and nobody waits, the pool is asked once more
 * at once instead):
 *   7. reclaim:     the allocation takes a ticket in the GPU's line and tells every process
 *                   (src/sharing/waitq.c); the others give back what they hold idle
 *                   (src/sharing/reclaim.c) and wake it
 *   8. wait:        it waits, woken by memory freed for it, and asks the pool again each
 *                   time; no other allocation takes memory it needs (the gate in the
 *                   budget); it gives up at reclaim_wait_ms, when nobody on the GPU holds
 *                   anything, or when it holds memory itself behind a stuck earlier waiter
 *                   (hold and wait). A framework's first failure (PyTorch, CuPy: they empty
 *                   their own cache and ask again) waits only for what is given at once.
 *   9. out of memory: counted once (ooms), and the caller answers with its API's code and
 *                   message (runtime_calls.c, driver_calls.c, torch_entry.c).
 * Memory gpupool does not pool (unpooled.c) takes the budget (waiting in line where the gate
 * says an earlier waiter needs the memory), then its API's own call, then rungs 7-8 until it
 * is its turn, once, then out of memory.
 *
 * Depends on the process layer (the registry) and sharing; used by the call bodies only. */
#ifndef GP_LADDER_H
#define GP_LADDER_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "registry.h"

/* The pool of `dev` (0 <= dev < r->ndev), made on first use; NULL (logged) when it cannot
 * be made. The first pool of the process also starts the sharing layer's release thread
 * (an idle process answers too). Inside the caller's GP_REGISTRY_READER. */
gp_pool *gp_ladder_pool_create(int dev);
static inline gp_pool *gp_ladder_pool(const struct gp_registry *r, int dev)
{
	gp_pool *p = atomic_load_explicit(&r->pools[dev], memory_order_acquire);
	return p ? p : gp_ladder_pool_create(dev);
}

/* The pool gave up with -EIO: the device refused a segment with an error that is not out of
 * memory. That error as the backend kept it for this thread (a process has one backend:
 * the runtime's or the driver's), *driver true for a CUresult, false for a cudaError_t; the
 * two APIs number the errors they share alike (CUDA_ERROR_NO_DEVICE and cudaErrorNoDevice
 * are both 100, ...). Never 0: an unknown error when none was kept. */
int gp_ladder_device_error(bool *driver);

/* Rungs 7-9: the pool could not serve `size` bytes on `dev`. `cache_above`: the caller is
 * the program's own cudaMalloc or cuMemAlloc, under which a framework may cache (not
 * PyTorch's pluggable allocator, which does not). 0 (*a set), or -ENOMEM, counted. Out of
 * line and cold. */
int gp_ladder_short(int dev, size_t size, gp_stream key, int op, cudaStream_t s, uintptr_t *a, bool cache_above);

/* One allocation of `size` bytes from `p`, the pool of `dev` (gp_ladder_pool, loaded inside
 * the caller's GP_REGISTRY_READER), on stream key `key`, traced as `op` on `s`: the whole
 * ladder (`cache_above`: gp_ladder_short's). 0, -ENOMEM, or -EIO (gp_ladder_device_error:
 * CUDA's error, which is the answer; no reclaim, no wait, no out-of-memory count); the
 * message (gp_registry_oom_message) and the API's last error are left to the caller. */
static inline int gp_ladder_alloc(gp_pool *p, int dev, size_t size, gp_stream key, int op, cudaStream_t s,
				  uintptr_t *a, bool cache_above)
{
	int rc = gp_registry_alloc_once(p, dev, size, key, op, s, a);
	/* A reset kills a pool by unpublishing it, then raising the epoch: killed before this
	 * reader began, p could not have been loaded; killed since, the epoch moved. */
	if (__builtin_expect(atomic_load(&gp_registry_epoch) !=
				     atomic_load_explicit(gp_registry_reader.rec, memory_order_relaxed),
			     0))
		rc = gp_registry_alloc_again(p, dev, size, key, a, rc);
	if (__builtin_expect(rc == -ENOMEM, 0))
		rc = gp_ladder_short(dev, size, key, op, s, a, cache_above);
	return rc;
}

#endif
