/* The pools' side of the budget (budget.h): a backend whose segments pass it. The limit it
 * checks is the device's pool's own (struct gp_pool_params.limit), which the registry sets
 * in the budget as it makes the pool. Must not depend on the registry or the call bodies. */
#include "budget.h"

#include <errno.h>

static const struct gp_backend *inner;
static struct gp_backend wrapped;

static int b_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	(void)ctx;
	if (gp_budget_take(device, size, GP_BUDGET_POOL) != 0)
		return -EDQUOT; /* the pool fits a smaller segment, releases its cache and retries */
	int rc = inner->segment_alloc(inner->ctx, device, size, addr);
	if (rc)
		gp_budget_give(device, size, GP_BUDGET_POOL);
	return rc;
}

static int b_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	(void)ctx;
	int rc = inner->segment_free(inner->ctx, device, addr, size);
	if (rc != -EBUSY) /* the pool drops the segment on any other answer (segment.c) */
		gp_budget_give(device, size, GP_BUDGET_POOL);
	return rc;
}

static int b_device_sync(void *ctx, int device)
{
	(void)ctx;
	return inner->device_sync(inner->ctx, device);
}

static int b_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	(void)ctx;
	return inner->stream_wait(inner->ctx, device, from, to);
}

static int b_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	(void)ctx;
	return inner->mem_info(inner->ctx, device, free_bytes, total_bytes);
}

static int b_fence_mark(void *ctx, int device, uint64_t *token)
{
	(void)ctx;
	return inner->fence_mark(inner->ctx, device, token);
}

static int b_fence_query(void *ctx, int device, uint64_t token)
{
	(void)ctx;
	return inner->fence_query(inner->ctx, device, token);
}

static int b_fence_wait(void *ctx, int device, uint64_t token)
{
	(void)ctx;
	return inner->fence_wait(inner->ctx, device, token);
}

static void b_fence_drop(void *ctx, int device, uint64_t token)
{
	(void)ctx;
	inner->fence_drop(inner->ctx, device, token);
}

static uint64_t b_now_ns(void *ctx)
{
	(void)ctx;
	return inner->now_ns(inner->ctx);
}

static const struct gp_backend budget_calls = {
	.segment_alloc = b_segment_alloc,
	.segment_free = b_segment_free,
	.device_sync = b_device_sync,
	.stream_wait = b_stream_wait,
	.mem_info = b_mem_info,
	.fence_mark = b_fence_mark,
	.fence_query = b_fence_query,
	.fence_wait = b_fence_wait,
	.fence_drop = b_fence_drop,
	.now_ns = b_now_ns,
};

const struct gp_backend *gp_budget_backend(const struct gp_backend *in)
{
	/* the registry has one backend (init.c), and makes each pool's under its pools lock */
	if (inner != in) {
		inner = in;
		wrapped = gp_backend_wrap(in, NULL, &budget_calls);
	}
	return &wrapped;
}

