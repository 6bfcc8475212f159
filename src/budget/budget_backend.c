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

static int b_vmm_granularity(void *ctx, int device, size_t *bytes)
{
	(void)ctx;
	return inner->vmm_granularity(inner->ctx, device, bytes);
}

static int b_vmm_reserve(void *ctx, int device, size_t size, uintptr_t *addr)
{
	(void)ctx;
	return inner->vmm_reserve(inner->ctx, device, size, addr); /* address space: no memory */
}

static int b_vmm_unreserve(void *ctx, int device, uintptr_t addr, size_t size)
{
	(void)ctx;
	return inner->vmm_unreserve(inner->ctx, device, addr, size);
}

/* Chunks mapped are the pools' memory (GP_BUDGET_CHUNKS, which a device reset does not free),
 * counted once whichever layer maps them: taken before the device is asked, what did not get
 * mapped given back. */
static int b_vmm_map(void *ctx, int device, uintptr_t addr, size_t size, size_t *mapped)
{
	(void)ctx;
	*mapped = 0;
	if (gp_budget_take(device, size, GP_BUDGET_CHUNKS) != 0)
		return -EDQUOT; /* as a segment's (b_segment_alloc) */
	int rc = inner->vmm_map(inner->ctx, device, addr, size, mapped);
	if (*mapped < size)
		gp_budget_give(device, size - *mapped, GP_BUDGET_CHUNKS);
	return rc;
}

static int b_vmm_unmap(void *ctx, int device, uintptr_t addr, size_t size, bool sync, size_t *unmapped)
{
	(void)ctx;
	int rc = inner->vmm_unmap(inner->ctx, device, addr, size, sync, unmapped);
	if (*unmapped)
		gp_budget_give(device, *unmapped, GP_BUDGET_CHUNKS);
	return rc;
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
	.vmm_granularity = b_vmm_granularity,
	.vmm_reserve = b_vmm_reserve,
	.vmm_unreserve = b_vmm_unreserve,
	.vmm_map = b_vmm_map,
	.vmm_unmap = b_vmm_unmap,
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

