/* The allocation ladder's rungs past the pool (ladder.h: the whole ladder, numbered), the
 * device's own error where the pool gave up on one, and the first pool of the process
 * starting the sharing layer. Owns no state; depends on the registry, sharing and the two
 * backends' kept errors only. */
#include "ladder.h"

#include "backend_cuda.h"
#include "budget.h"
#include "backend_driver.h"
#include "framework.h"
#include "proc.h"
#include "registry_internal.h"
#include "release_thread.h"
#include "unpooled.h"
#include "waitq.h"

int gp_ladder_device_error(bool *driver)
{
	CUresult d = gp_driver_backend_error();
	cudaError_t r = gp_cuda_backend_error();
	*driver = d != CUDA_SUCCESS || r == cudaSuccess;
	return *driver ? (d != CUDA_SUCCESS ? (int)d : (int)CUDA_ERROR_UNKNOWN) : (int)r;
}

gp_pool *gp_ladder_pool_create(int dev)
{
	gp_pool *p = gp_registry_pool_create(dev);
	if (p)
		gp_release_thread_start(); /* once per process (a no-op after) */
	return p;
}

/* The thread's last allocation the GPU could not serve (CLOCK_MONOTONIC ns): a framework
 * that caches above gpupool empties its own cache after a failure and asks again at once. */
static _Thread_local uint64_t last_short_ns;
#define AGAIN_NS (1000 * 1000 * 1000ull)

__attribute__((cold)) int gp_ladder_short(int dev, size_t size, gp_stream key, int op, cudaStream_t s, uintptr_t *a,
					  bool cache_above)
{
	const struct gp_registry *r = gp_registry_self();
	gp_pool *p = atomic_load(&r->pools[dev]); /* inside the caller's reader section */
	if (!p)
		return -ENOMEM;
	int rc = -ENOMEM;
	/* under a cap, first: the program's own memory pools may have given memory back since
	 * their figures were read (a synchronize past their release threshold): room, once */
	if (gp_budget_capped(dev) && gp_unpooled_mempools_sync(dev)) {
		rc = gp_registry_alloc_retry(p, dev, size, key, op, s, a);
		if (rc == 0 || rc == -EIO)
			return rc;
	}
	/* 7. reclaim and 8. wait: in the GPU's line, while the others give what they hold idle
	 * and free what they use. A framework's first failure waits only for what they give at
	 * once: it then empties its own cache (PyTorch, CuPy) and asks again, and that one
	 * waits. Each retry is a trace row of its own, after the failed one. */
	uint64_t now = gp_clock_ns(CLOCK_MONOTONIC);
	bool quick = cache_above && (!last_short_ns || now - last_short_ns >= AGAIN_NS) && gp_framework_present();
	last_short_ns = now;
	struct gp_wait w;
	bool waits = gp_waitq_begin(&w, dev, size, quick);
	/* no wait: the GPU has the room, freed by another process since this allocation failed
	 * (nobody in line, no cap refusing): once more at once, then in line */
	if (!waits && w.room) {
		rc = gp_registry_alloc_retry(p, dev, size, key, op, s, a);
		waits = rc != 0 && rc != -EIO && gp_waitq_begin(&w, dev, size, quick);
	}
	if (waits) {
		while (gp_waitq_next(&w)) {
			p = atomic_load(&r->pools[dev]); /* a reset may have made another */
			if (!p)
				break;
			rc = gp_registry_alloc_retry(p, dev, size, key, op, s, a);
			if (rc == 0 || rc == -EIO)
				break; /* served, or the device's own error: the answer either way */
		}
		gp_waitq_end(&w, rc == 0);
		p = atomic_load(&r->pools[dev]);
	}
	/* 9. out of memory: the one count of it */
	if (rc == -ENOMEM && p)
		gp_pool_count_oom(p);
	if (rc == 0)
		last_short_ns = 0;
	return rc;
}
