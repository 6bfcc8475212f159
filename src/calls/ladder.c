/* The allocation ladder's rungs past the pool (ladder.h: the whole ladder, numbered), the
 * device's own error where the pool gave up on one, and the first pool of the process
 * starting the sharing layer. Owns no state; depends on the registry, sharing and the two
 * backends' kept errors only. */
#include "ladder.h"

#include "backend_cuda.h"
#include "backend_driver.h"
#include "reclaim.h"
#include "registry_internal.h"
#include "release_thread.h"

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

__attribute__((cold)) int gp_ladder_short(int dev, size_t size, gp_stream key, int op, cudaStream_t s,
					  uintptr_t *a)
{
	const struct gp_registry *r = gp_registry_self();
	gp_pool *p = atomic_load(&r->pools[dev]); /* inside the caller's reader section */
	if (!p)
		return -ENOMEM;
	int rc = -ENOMEM;
	/* 7. reclaim; the retry is a trace row of its own, after the failed one */
	if (gp_reclaim_before_oom(dev, size))
		rc = gp_registry_alloc_retry(p, dev, size, key, op, s, a);
	/* 8. wait: none yet */
	/* 9. out of memory: the one count of it */
	if (rc)
		gp_pool_count_oom(p);
	return rc;
}
