/* The guarded backend (backend_guard.h): a thread-local depth around each backend call.
 * Depends on backend.h only. */
#include "backend_guard.h"

static _Thread_local int depth;

bool gp_backend_guard_inside(void) { return depth > 0; }

void gp_backend_guard_enter(void) { depth++; }

void gp_backend_guard_leave(void) { depth--; }

#define INNER(ctx) ((const struct gp_backend *)(ctx))

static int g_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	depth++;
	int rc = INNER(ctx)->segment_alloc(INNER(ctx)->ctx, device, size, addr);
	depth--;
	return rc;
}

static int g_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	depth++;
	int rc = INNER(ctx)->segment_free(INNER(ctx)->ctx, device, addr, size);
	depth--;
	return rc;
}

static int g_device_sync(void *ctx, int device)
{
	depth++;
	int rc = INNER(ctx)->device_sync(INNER(ctx)->ctx, device);
	depth--;
	return rc;
}

static int g_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	depth++;
	int rc = INNER(ctx)->stream_wait(INNER(ctx)->ctx, device, from, to);
	depth--;
	return rc;
}

static int g_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	depth++;
	int rc = INNER(ctx)->mem_info(INNER(ctx)->ctx, device, free_bytes, total_bytes);
	depth--;
	return rc;
}

/* The markers' calls (events, never an allocation) are guarded too: each needs the inner
 * context, which out->ctx no longer is. */
static int g_fence_mark(void *ctx, int device, uint64_t *token)
{
	depth++;
	int rc = INNER(ctx)->fence_mark(INNER(ctx)->ctx, device, token);
	depth--;
	return rc;
}

static int g_fence_query(void *ctx, int device, uint64_t token)
{
	depth++;
	int rc = INNER(ctx)->fence_query(INNER(ctx)->ctx, device, token);
	depth--;
	return rc;
}

static int g_fence_wait(void *ctx, int device, uint64_t token)
{
	depth++;
	int rc = INNER(ctx)->fence_wait(INNER(ctx)->ctx, device, token);
	depth--;
	return rc;
}

static void g_fence_drop(void *ctx, int device, uint64_t token)
{
	depth++;
	INNER(ctx)->fence_drop(INNER(ctx)->ctx, device, token);
	depth--;
}

static uint64_t g_now_ns(void *ctx) { return INNER(ctx)->now_ns(INNER(ctx)->ctx); }

/* Virtual memory: the driver's own calls, never gpupool's hooks (backend_vmm.c); guarded all
 * the same, as every call of the pools'. */
static int g_vmm_granularity(void *ctx, int device, size_t *bytes)
{
	depth++;
	int rc = INNER(ctx)->vmm_granularity(INNER(ctx)->ctx, device, bytes);
	depth--;
	return rc;
}

static int g_vmm_reserve(void *ctx, int device, size_t size, uintptr_t *addr)
{
	depth++;
	int rc = INNER(ctx)->vmm_reserve(INNER(ctx)->ctx, device, size, addr);
	depth--;
	return rc;
}

static int g_vmm_unreserve(void *ctx, int device, uintptr_t addr, size_t size)
{
	depth++;
	int rc = INNER(ctx)->vmm_unreserve(INNER(ctx)->ctx, device, addr, size);
	depth--;
	return rc;
}

static int g_vmm_map(void *ctx, int device, uintptr_t addr, size_t size, size_t *mapped)
{
	depth++;
	int rc = INNER(ctx)->vmm_map(INNER(ctx)->ctx, device, addr, size, mapped);
	depth--;
	return rc;
}

static int g_vmm_unmap(void *ctx, int device, uintptr_t addr, size_t size, bool sync, size_t *unmapped)
{
	depth++;
	int rc = INNER(ctx)->vmm_unmap(INNER(ctx)->ctx, device, addr, size, sync, unmapped);
	depth--;
	return rc;
}

static const struct gp_backend guard_calls = {
	.segment_alloc = g_segment_alloc,
	.segment_free = g_segment_free,
	.device_sync = g_device_sync,
	.stream_wait = g_stream_wait,
	.mem_info = g_mem_info,
	.fence_mark = g_fence_mark,
	.fence_query = g_fence_query,
	.fence_wait = g_fence_wait,
	.fence_drop = g_fence_drop,
	.now_ns = g_now_ns,
	.vmm_granularity = g_vmm_granularity,
	.vmm_reserve = g_vmm_reserve,
	.vmm_unreserve = g_vmm_unreserve,
	.vmm_map = g_vmm_map,
	.vmm_unmap = g_vmm_unmap,
};

void gp_backend_guard_init(struct gp_backend *out, const struct gp_backend *in)
{
	*out = gp_backend_wrap(in, (void *)in, &guard_calls);
}
