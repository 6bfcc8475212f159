/* The fake backend (backend_fake.h): synthetic address ranges from a bump pointer, never
 * dereferenced. Not thread-safe on its own: the pool calls segment_alloc/free under its
 * lock, and tests with several pools give each its own. Depends on backend.h only. */
#include <errno.h>
#include <string.h>

#include "backend_fake.h"

#define FAKE_ALIGN ((uintptr_t)2 << 20)

static int fake_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	struct gp_fake_backend *fb = ctx;
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return -ENODEV;
	fb->allocs++;
	/* the bump pointer never wraps: a wrapped one would hand out ranges that overlap live ones */
	bool no_room = size > UINTPTR_MAX - fb->next_addr || UINTPTR_MAX - fb->next_addr - size < 2 * FAKE_ALIGN;
	if (fb->fail_all || (fb->fail_at && fb->allocs == fb->fail_at) || no_room ||
	    (fb->capacity && (size > fb->capacity || fb->used[device] > fb->capacity - size))) {
		fb->fail_allocs++;
		return -ENOMEM;
	}
	*addr = fb->next_addr;
	fb->next_addr += (size + FAKE_ALIGN - 1) & ~(FAKE_ALIGN - 1);
	fb->next_addr += FAKE_ALIGN; /* a gap, so adjacent segments never look contiguous */
	fb->used[device] += size;
	return 0;
}

static int fake_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	struct gp_fake_backend *fb = ctx;
	(void)addr;
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return -ENODEV;
	if (fb->sync_busy)
		return -EBUSY;
	fb->frees++;
	fb->used[device] -= size;
	return 0;
}

static int fake_device_sync(void *ctx, int device)
{
	struct gp_fake_backend *fb = ctx;
	(void)device;
	if (fb->sync_busy)
		return -EBUSY;
	__atomic_add_fetch(&fb->syncs, 1, __ATOMIC_RELAXED);
	return 0;
}

static int fake_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	struct gp_fake_backend *fb = ctx;
	(void)device, (void)from, (void)to;
	if (fb->wait_refused)
		return -EAGAIN;
	fb->waits++;
	return 0;
}

static int fake_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	struct gp_fake_backend *fb = ctx;
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return -ENODEV;
	size_t cap = fb->capacity ? fb->capacity : (size_t)1 << 46;
	*total_bytes = cap;
	*free_bytes = cap - fb->used[device];
	return 0;
}

void gp_fake_backend_init(struct gp_fake_backend *fb, size_t capacity)
{
	memset(fb, 0, sizeof *fb);
	fb->be.ctx = fb;
	fb->be.segment_alloc = fake_segment_alloc;
	fb->be.segment_free = fake_segment_free;
	fb->be.device_sync = fake_device_sync;
	fb->be.stream_wait = fake_stream_wait;
	fb->be.mem_info = fake_mem_info;
	fb->capacity = capacity;
	fb->next_addr = (uintptr_t)0x7f0000000000ull;
}
