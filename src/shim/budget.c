/* The per-device budget (budget.h): one atomic total per device against its limit, and
 * each kind's share of it. No lock anywhere (a limiter that hangs its process on a lock
 * left held is worse than none); no CUDA call. Reads the limit from the registry's slots;
 * must not depend on the hook bodies. */
#include "budget.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "group_budget.h"
#include "log.h"
#include "registry.h"

struct dev_budget {
	_Atomic uint64_t total;                   /* every kind, what the limit is checked on */
	_Atomic uint64_t held[GP_BUDGET_KINDS];   /* each kind's share */
};

static struct dev_budget budget[GPUPOOL_MAX_DEVICES];
static _Atomic uint64_t inconsistencies;

static inline bool in_range(int device, enum gp_budget_kind kind)
{
	return device >= 0 && device < GPUPOOL_MAX_DEVICES && (unsigned)kind < GP_BUDGET_KINDS;
}

uint64_t gp_budget_limit(int device)
{
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return 0;
	/* the slot is set before its pool is published and keeps its limit across resets; a
	 * registry with no pool yet has no slot and no limit to apply */
	const struct gp_registry *r = gp_registry_get_driver();
	const struct gpupool_device_stats *st = device < r->ndev ? r->slots[device] : NULL;
	return st ? __atomic_load_n(&st->limit_bytes, __ATOMIC_RELAXED) : 0;
}

/* Subtracts up to `bytes` from *v, never below zero: what it took off. */
static uint64_t sub_clamped(_Atomic uint64_t *v, uint64_t bytes)
{
	uint64_t cur = atomic_load_explicit(v, memory_order_relaxed), next;
	do
		next = cur > bytes ? cur - bytes : 0;
	while (!atomic_compare_exchange_weak_explicit(v, &cur, next, memory_order_relaxed, memory_order_relaxed));
	return cur - next;
}

int gp_budget_take(int device, size_t bytes, enum gp_budget_kind kind)
{
	if (!in_range(device, kind))
		return -EINVAL;
	struct dev_budget *b = &budget[device];
	uint64_t limit = gp_budget_limit(device);
	uint64_t cur = atomic_load_explicit(&b->total, memory_order_relaxed);
	do {
		/* written so that no sum can wrap: bytes past the room is a refusal */
		if (limit && (cur > limit || bytes > limit - cur))
			return -ENOMEM;
	} while (!atomic_compare_exchange_weak_explicit(&b->total, &cur, cur + bytes, memory_order_relaxed,
							memory_order_relaxed));
	/* the group's budget (group_budget.h) after the process's own limit */
	if (gp_group_budget_take(device, bytes) != 0) {
		(void)sub_clamped(&b->total, bytes);
		return -ENOMEM;
	}
	atomic_fetch_add_explicit(&b->held[kind], bytes, memory_order_relaxed);
	return 0;
}

void gp_budget_charge(int device, size_t bytes, enum gp_budget_kind kind)
{
	if (!in_range(device, kind))
		return;
	atomic_fetch_add_explicit(&budget[device].total, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&budget[device].held[kind], bytes, memory_order_relaxed);
	gp_group_budget_charge(device, bytes);
}

void gp_budget_give(int device, size_t bytes, enum gp_budget_kind kind)
{
	if (!in_range(device, kind))
		return;
	struct dev_budget *b = &budget[device];
	uint64_t off = sub_clamped(&b->held[kind], bytes);
	(void)sub_clamped(&b->total, off);
	gp_group_budget_give(device, off);
	if (off < bytes && atomic_fetch_add(&inconsistencies, 1) == 0)
		gp_log(GP_LOG_WARN, "device %d: %zu bytes given back but only %llu counted (kind %d); the figure stays at "
				    "zero (logged once)",
		       device, bytes, (unsigned long long)off, (int)kind);
}

uint64_t gp_budget_held(int device, enum gp_budget_kind kind)
{
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES || (unsigned)kind > GP_BUDGET_KINDS)
		return 0;
	if (kind == GP_BUDGET_KINDS)
		return atomic_load_explicit(&budget[device].total, memory_order_relaxed);
	return atomic_load_explicit(&budget[device].held[kind], memory_order_relaxed);
}

uint64_t gp_budget_inconsistencies(void) { return atomic_load(&inconsistencies); }

void gp_budget_pool_gone(int device)
{
	if (!in_range(device, GP_BUDGET_POOL))
		return;
	uint64_t had = atomic_exchange(&budget[device].held[GP_BUDGET_POOL], 0);
	(void)sub_clamped(&budget[device].total, had);
	gp_group_budget_give(device, had);
}

/* ---- the pools' side: a backend whose segments pass the budget --------------------------- */

static const struct gp_backend *inner;
static struct gp_backend wrapped;

static int b_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	(void)ctx;
	if (gp_budget_take(device, size, GP_BUDGET_POOL) != 0)
		return -ENOMEM; /* the pool sees a full device: it releases its cache and retries */
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

void gp_budget_after_fork(void)
{
	gp_group_budget_after_fork();
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		atomic_store(&budget[d].total, 0);
		for (int k = 0; k < GP_BUDGET_KINDS; k++)
			atomic_store(&budget[d].held[k], 0);
	}
}
