/* The fake backend (backend_fake.h): synthetic address ranges from a bump pointer, never
 * dereferenced, markers that complete latency_ns after they are recorded on a modelled
 * clock, and virtual memory checked chunk by chunk. Not thread-safe on its own: the pool calls segment_alloc/free under its lock, and
 * tests with several pools give each its own (counters and the clock are atomic). Depends on
 * backend.h only. */
#include <errno.h>
#include <stdlib.h>
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

/* ---- virtual memory --------------------------------------------------------------------- */

/* A sorted array of disjoint ranges: the index of the first whose hi > a. */
static size_t range_at(const struct gp_fake_range *v, size_t n, uintptr_t a)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (v[m].hi <= a)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

static bool range_room(struct gp_fake_range **v, size_t *cap, size_t n)
{
	if (n < *cap)
		return true;
	size_t c = *cap ? *cap * 2 : 16;
	struct gp_fake_range *nv = realloc(*v, c * sizeof *nv);
	if (!nv)
		return false;
	*v = nv;
	*cap = c;
	return true;
}

/* The range of v that holds all of [lo, hi), or NULL. */
static struct gp_fake_range *range_holding(struct gp_fake_range *v, size_t n, uintptr_t lo, uintptr_t hi)
{
	size_t i = range_at(v, n, lo);
	return i < n && v[i].lo <= lo && hi <= v[i].hi ? &v[i] : NULL;
}

/* Adds [lo, hi), which overlaps nothing in v, merging it with a neighbour it touches. */
static bool range_add(struct gp_fake_range **v, size_t *n, size_t *cap, uintptr_t lo, uintptr_t hi, int device)
{
	size_t i = range_at(*v, *n, lo);
	if (i > 0 && (*v)[i - 1].hi == lo && (*v)[i - 1].device == device) {
		(*v)[i - 1].hi = hi;
		if (i < *n && (*v)[i].lo == hi && (*v)[i].device == device) {
			(*v)[i - 1].hi = (*v)[i].hi;
			memmove(*v + i, *v + i + 1, (*n - i - 1) * sizeof **v);
			(*n)--;
		}
		return true;
	}
	if (i < *n && (*v)[i].lo == hi && (*v)[i].device == device) {
		(*v)[i].lo = lo;
		return true;
	}
	if (!range_room(v, cap, *n))
		return false;
	memmove(*v + i + 1, *v + i, (*n - i) * sizeof **v);
	(*v)[i] = (struct gp_fake_range){lo, hi, device};
	(*n)++;
	return true;
}

/* Removes [lo, hi), which one range of v holds. */
static bool range_remove(struct gp_fake_range **v, size_t *n, size_t *cap, uintptr_t lo, uintptr_t hi)
{
	size_t i = range_at(*v, *n, lo);
	struct gp_fake_range r = (*v)[i];
	if (r.lo < lo && hi < r.hi) {
		if (!range_room(v, cap, *n))
			return false;
		memmove(*v + i + 1, *v + i, (*n - i) * sizeof **v);
		(*v)[i].hi = lo;
		(*v)[i + 1].lo = hi;
		(*n)++;
	} else if (r.lo < lo) {
		(*v)[i].hi = lo;
	} else if (hi < r.hi) {
		(*v)[i].lo = hi;
	} else {
		memmove(*v + i, *v + i + 1, (*n - i - 1) * sizeof **v);
		(*n)--;
	}
	return true;
}

static bool range_overlaps(const struct gp_fake_range *v, size_t n, uintptr_t lo, uintptr_t hi)
{
	size_t i = range_at(v, n, lo);
	return i < n && v[i].lo < hi;
}

static int fake_vmm_granularity(void *ctx, int device, size_t *bytes)
{
	struct gp_fake_backend *fb = ctx;
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return -ENODEV;
	if (!fb->granularity)
		return -ENOTSUP;
	*bytes = fb->granularity;
	return 0;
}

static int vmm_violation(struct gp_fake_backend *fb)
{
	fb->vmm_violations++;
	return -EINVAL;
}

/* The call's range is whole chunks of a device that has virtual memory. */
static bool vmm_range_ok(const struct gp_fake_backend *fb, int device, uintptr_t addr, size_t size)
{
	size_t g = fb->granularity;
	return g && device >= 0 && device < GPUPOOL_MAX_DEVICES && size && !(addr % g) && !(size % g) &&
	       addr <= UINTPTR_MAX - size;
}

static int fake_vmm_reserve(void *ctx, int device, size_t size, uintptr_t *addr)
{
	struct gp_fake_backend *fb = ctx;
	size_t g = fb->granularity;
	uintptr_t at = g ? (fb->next_addr + g - 1) & ~(uintptr_t)(g - 1) : 0;
	if (!vmm_range_ok(fb, device, at, size))
		return vmm_violation(fb);
	if ((fb->fail_reserve_at && fb->vmm_reserves + 1 == fb->fail_reserve_at) || at < fb->next_addr ||
	    size > UINTPTR_MAX - at || UINTPTR_MAX - at - size < 2 * FAKE_ALIGN) {
		fb->fail_reserve_at = 0;
		return -ENOMEM;
	}
	if (!range_add(&fb->resv, &fb->nresv, &fb->capresv, at, at + size, -1 - (int)fb->nresv))
		return -ENOMEM;
	fb->next_addr = at + size + FAKE_ALIGN; /* a gap, as between segments */
	fb->vmm_reserves++;
	*addr = at;
	return 0;
}

static int fake_vmm_unreserve(void *ctx, int device, uintptr_t addr, size_t size)
{
	struct gp_fake_backend *fb = ctx;
	struct gp_fake_range *r = vmm_range_ok(fb, device, addr, size) ? range_holding(fb->resv, fb->nresv, addr, addr + size)
								       : NULL;
	if (!r || r->lo != addr || r->hi != addr + size || range_overlaps(fb->mapped, fb->nmapped, addr, addr + size))
		return vmm_violation(fb);
	(void)range_remove(&fb->resv, &fb->nresv, &fb->capresv, addr, addr + size);
	fb->vmm_unreserves++;
	return 0;
}

/* One chunk at a, mapped or unmapped: 0 or an error, with the failure rules and the checks. */
static int chunk_map(struct gp_fake_backend *fb, int device, uintptr_t a)
{
	size_t g = fb->granularity;
	fb->chunk_maps++;
	if (!range_holding(fb->resv, fb->nresv, a, a + g) || range_overlaps(fb->mapped, fb->nmapped, a, a + g))
		return vmm_violation(fb);
	if (fb->fail_maps || fb->chunk_maps == fb->fail_map_at ||
	    (fb->capacity && (g > fb->capacity || fb->used[device] > fb->capacity - g)))
		return -ENOMEM;
	if (!range_add(&fb->mapped, &fb->nmapped, &fb->capmapped, a, a + g, device))
		return -ENOMEM;
	wait_until(fb, __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED) + fb->vmm_cost_ns, &fb->vmm_ns);
	fb->used[device] += g;
	fb->chunks_mapped++;
	return 0;
}

static int chunk_unmap(struct gp_fake_backend *fb, int device, uintptr_t a)
{
	size_t g = fb->granularity;
	fb->chunk_unmaps++;
	struct gp_fake_range *m = range_holding(fb->mapped, fb->nmapped, a, a + g);
	if (!m || m->device != device)
		return vmm_violation(fb);
	if (fb->chunk_unmaps == fb->fail_unmap_at || !range_remove(&fb->mapped, &fb->nmapped, &fb->capmapped, a, a + g))
		return -EIO;
	wait_until(fb, __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED) + fb->vmm_unmap_cost_ns, &fb->vmm_ns);
	fb->used[device] -= g;
	fb->chunks_unmapped++;
	return 0;
}

/* The host time of `chunks` chunk calls of `each` ns, at once (as many wait_until of one
 * each). */
static void wait_chunks(struct gp_fake_backend *fb, uint64_t each, size_t chunks, uint64_t *bill)
{
	uint64_t now = __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED), cost = 0;
	if (__builtin_mul_overflow(each, (uint64_t)chunks, &cost) || now + cost < now)
		cost = UINT64_MAX - now;
	wait_until(fb, now + cost, bill);
}

/* No failure asked for among the next `chunks` calls counted by `done` (at the call whose
 * count is `at`): they may go at once. */
static bool none_fails(uint64_t done, uint64_t at, size_t chunks)
{
	return !(at > done && at - done <= chunks);
}

static int fake_vmm_map(void *ctx, int device, uintptr_t addr, size_t size, size_t *mapped)
{
	struct gp_fake_backend *fb = ctx;
	*mapped = 0;
	if (!vmm_range_ok(fb, device, addr, size))
		return vmm_violation(fb);
	size_t g = fb->granularity, n = 0, chunks = size / g;
	/* the whole range at once where chunk by chunk would map every chunk (a large range is
	 * millions of chunks): the same checks, figures and time */
	if (!fb->fail_maps && none_fails(fb->chunk_maps, fb->fail_map_at, chunks) &&
	    range_holding(fb->resv, fb->nresv, addr, addr + size) && !range_overlaps(fb->mapped, fb->nmapped, addr, addr + size) &&
	    (!fb->capacity || (size <= fb->capacity && fb->used[device] <= fb->capacity - size)) &&
	    range_add(&fb->mapped, &fb->nmapped, &fb->capmapped, addr, addr + size, device)) {
		fb->chunk_maps += chunks;
		if (fb->vmm_cost_ns)
			wait_chunks(fb, fb->vmm_cost_ns, chunks, &fb->vmm_ns);
		fb->used[device] += size;
		fb->chunks_mapped += chunks;
		*mapped = size;
		return 0;
	}
	int rc = 0;
	while (n < size && (rc = chunk_map(fb, device, addr + n)) == 0)
		n += g;
	if (rc == 0) {
		*mapped = size;
		return 0;
	}
	/* undone from the last chunk down, as far as the unmaps go */
	while (n && chunk_unmap(fb, device, addr + n - g) == 0)
		n -= g;
	*mapped = n;
	return -ENOMEM;
}

static int fake_vmm_unmap(void *ctx, int device, uintptr_t addr, size_t size, bool sync, size_t *unmapped)
{
	struct gp_fake_backend *fb = ctx;
	*unmapped = 0;
	if (!vmm_range_ok(fb, device, addr, size))
		return vmm_violation(fb);
	if (fb->sync_busy)
		return -EBUSY;
	if (sync) {
		fb->vmm_syncs++;
		if (fb->latency_ns) /* cuMemUnmap after a synchronize: as cudaFree's wait */
			wait_until(fb, __atomic_load_n(&fb->now_ns, __ATOMIC_RELAXED) + fb->latency_ns, &fb->free_waited_ns);
	}
	size_t g = fb->granularity, n = 0, chunks = size / g;
	/* the whole range at once where it is one mapping of the device's and no unmap is to
	 * fail (as fake_vmm_map) */
	struct gp_fake_range *m = range_holding(fb->mapped, fb->nmapped, addr, addr + size);
	if (m && m->device == device && none_fails(fb->chunk_unmaps, fb->fail_unmap_at, chunks) &&
	    range_remove(&fb->mapped, &fb->nmapped, &fb->capmapped, addr, addr + size)) {
		fb->chunk_unmaps += chunks;
		if (fb->vmm_unmap_cost_ns)
			wait_chunks(fb, fb->vmm_unmap_cost_ns, chunks, &fb->vmm_ns);
		fb->used[device] -= size;
		fb->chunks_unmapped += chunks;
		*unmapped = size;
		return 0;
	}
	int rc = 0;
	while (n < size && (rc = chunk_unmap(fb, device, addr + n)) == 0)
		n += g;
	*unmapped = n;
	return rc;
}

size_t gp_fake_backend_mapped(const struct gp_fake_backend *fb, int device, uintptr_t lo, uintptr_t hi)
{
	size_t n = 0;
	for (size_t i = 0; i < fb->nmapped; i++) {
		const struct gp_fake_range *m = &fb->mapped[i];
		uintptr_t a = m->lo > lo ? m->lo : lo, b = m->hi < hi ? m->hi : hi;
		if (m->device == device && a < b)
			n += b - a;
	}
	return n;
}

void gp_fake_backend_fini(struct gp_fake_backend *fb)
{
	free(fb->mapped);
	free(fb->resv);
	fb->mapped = fb->resv = NULL;
	fb->nmapped = fb->capmapped = fb->nresv = fb->capresv = 0;
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
	fb->be.vmm_granularity = fake_vmm_granularity;
	fb->be.vmm_reserve = fake_vmm_reserve;
	fb->be.vmm_unreserve = fake_vmm_unreserve;
	fb->be.vmm_map = fake_vmm_map;
	fb->be.vmm_unmap = fake_vmm_unmap;
	fb->capacity = capacity;
	fb->next_addr = (uintptr_t)0x7f0000000000ull;
}
