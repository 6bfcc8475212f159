/* The guarded backend (backend_guard.h): a thread-local depth around each backend call.
 * Depends on backend.h only. */
#include "backend_guard.h"

static _Thread_local int depth;

bool gp_backend_guard_inside(void) { return depth > 0; }

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

void gp_backend_guard_init(struct gp_backend *out, const struct gp_backend *in)
{
	*out = *in;
	out->ctx = (void *)in;
	out->segment_alloc = g_segment_alloc;
	out->segment_free = g_segment_free;
	out->device_sync = g_device_sync;
	out->stream_wait = g_stream_wait;
	out->mem_info = g_mem_info;
}
