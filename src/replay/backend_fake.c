/* The fake backend (backend_fake.h): synthetic address ranges from a bump pointer, never
 * dereferenced, and markers that complete latency_ns after they are recorded on a modelled
 * clock. Not thread-safe on its own: the pool calls segment_alloc/free under its lock, and
 * tests with several pools give each its own (counters and the clock are atomic). Depends on
 * backend.h only. */
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
	if (fb->fail_all || (fb->fail_at && fb->allocs == fb->fail_at)) {
		fb->fail_allocs++;
		return fb->fail_err ? fb->fail_err : -ENOMEM;
	}
	if (fb->quota && (size > fb->quota || fb->used[device] > fb->quota - size)) {
		fb->fail_allocs++;
		return -EDQUOT;
	}
	if (no_room || (fb->capacity && (size > fb->capacity || fb->used[device] > fb->capacity - size))) {
		fb->fail_allocs++;
		return -ENOMEM;
	}
	*addr = fb->next_addr;
	fb->next_addr += (size + FAKE_ALIGN - 1) & ~(FAKE_ALIGN - 1);
	fb->next_addr += FAKE_ALIGN; /* a gap, so adjacent segments never look contiguous */
	fb->used[device] += size;
	return 0;
}

static void wait_until(struct gp_fake_backend *fb, uint64_t t, uint64_t *bill);

/* Like the runtime's cudaFree, a segment given back waits for the device first. */
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
	if (fb->latency_ns)
		wait_until(fb, __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED) + fb->latency_ns, &fb->free_waited_ns);
	return 0;
}

/* The program's clock moves to `t` when it is later: the caller waited for the device,
 * billed to *bill. */
static void wait_until(struct gp_fake_backend *fb, uint64_t t, uint64_t *bill)
{
	uint64_t now = __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED);
	if (fb->background || t <= now)
		return;
	__atomic_add_fetch(bill, t - now, __ATOMIC_RELAXED);
	__atomic_store_n(&fb->now_ns, t, __ATOMIC_RELAXED);
}

static int fake_device_sync(void *ctx, int device)
{
	struct gp_fake_backend *fb = ctx;
	(void)device;
	if (fb->sync_busy)
		return -EBUSY;
	__atomic_add_fetch(&fb->syncs, 1, __ATOMIC_RELAXED);
	if (fb->latency_ns)
		wait_until(fb, __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED) + fb->latency_ns, &fb->waited_ns);
	return 0;
}

/* A token is the clock time the marker's work is done. */
static int fake_fence_mark(void *ctx, int device, uint64_t *token)
{
	struct gp_fake_backend *fb = ctx;
	(void)device;
	if (fb->marks_unsupported)
		return -ENOTSUP;
	if (fb->sync_busy)
		return -EBUSY;
	__atomic_add_fetch(&fb->marks, 1, __ATOMIC_RELAXED);
	*token = __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED) + fb->latency_ns;
	return 0;
}

static int fake_fence_query(void *ctx, int device, uint64_t token)
{
	struct gp_fake_backend *fb = ctx;
	(void)device;
	__atomic_add_fetch(&fb->mark_queries, 1, __ATOMIC_RELAXED);
	return __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED) >= token ? 0 : -EAGAIN;
}

static int fake_fence_wait(void *ctx, int device, uint64_t token)
{
	struct gp_fake_backend *fb = ctx;
	(void)device;
	__atomic_add_fetch(&fb->mark_waits, 1, __ATOMIC_RELAXED);
	wait_until(fb, token, &fb->waited_ns);
	return 0;
}

static void fake_fence_drop(void *ctx, int device, uint64_t token)
{
	struct gp_fake_backend *fb = ctx;
	(void)device, (void)token;
	__atomic_add_fetch(&fb->mark_drops, 1, __ATOMIC_RELAXED);
}

static uint64_t fake_now_ns(void *ctx)
{
	struct gp_fake_backend *fb = ctx;
	return __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED);
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
	fb->be.fence_mark = fake_fence_mark;
	fb->be.fence_query = fake_fence_query;
	fb->be.fence_wait = fake_fence_wait;
	fb->be.fence_drop = fake_fence_drop;
	fb->be.now_ns = fake_now_ns;
	fb->capacity = capacity;
	fb->next_addr = (uintptr_t)0x7f0000000000ull;
}
