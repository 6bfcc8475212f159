/* The per-device budget (budget.h): one atomic total per device against its limit, and
 * each kind's share of it. No lock anywhere (a limiter that hangs its process on a lock
 * left held is worse than none); no CUDA call, no registry: the limits are set from outside
 * (budget_backend.c). Depends on the log only. */
#include "budget.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "gpupool/stats.h"
#include "log.h"

struct dev_budget {
	_Atomic uint64_t total;                   /* every kind, what the limit is checked on */
	_Atomic uint64_t held[GP_BUDGET_KINDS];   /* each kind's share */
};

static struct dev_budget budget[GPUPOOL_MAX_DEVICES];
static _Atomic uint64_t limits[GPUPOOL_MAX_DEVICES]; /* bytes; 0: none */
static _Atomic uint64_t inconsistencies;
static atomic_bool closed_all;                      /* gp_budget_close(-1) */
static atomic_bool closed[GPUPOOL_MAX_DEVICES];     /* gp_budget_close(device) */
static _Atomic(const struct gp_budget_group *) group; /* NULL: no group */

void gp_budget_set_group(const struct gp_budget_group *g)
{
	atomic_store_explicit(&group, g, memory_order_release);
}

static inline bool in_range(int device, enum gp_budget_kind kind)
{
	return device >= 0 && device < GPUPOOL_MAX_DEVICES && (unsigned)kind < GP_BUDGET_KINDS;
}

uint64_t gp_budget_limit(int device)
{
	if (device < 0 || device >= GPUPOOL_MAX_DEVICES)
		return 0;
	return atomic_load_explicit(&limits[device], memory_order_relaxed);
}

void gp_budget_set_limit(int device, uint64_t bytes)
{
	if (device >= 0 && device < GPUPOOL_MAX_DEVICES)
		atomic_store_explicit(&limits[device], bytes, memory_order_relaxed);
}

/* Adds `bytes` to *v, never past UINT64_MAX: what it added (a figure that would wrap stays
 * at the most it can say rather than at a small number). */
static uint64_t add_saturated(_Atomic uint64_t *v, uint64_t bytes)
{
	uint64_t cur = atomic_load_explicit(v, memory_order_relaxed), next;
	do
		next = bytes > UINT64_MAX - cur ? UINT64_MAX : cur + bytes;
	while (!atomic_compare_exchange_weak_explicit(v, &cur, next, memory_order_relaxed, memory_order_relaxed));
	return next - cur;
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

static _Atomic(const struct gp_budget_gate *) gate;
static _Thread_local bool refused_last; /* the thread's last take: refused by the limit or group */

bool gp_budget_refused_last(void) { return refused_last; }

void gp_budget_set_gate(const struct gp_budget_gate *g) { atomic_store_explicit(&gate, g, memory_order_release); }

void gp_budget_close(int device)
{
	if (device < 0)
		atomic_store(&closed_all, true);
	else if (device < GPUPOOL_MAX_DEVICES)
		atomic_store(&closed[device], true);
}

bool gp_budget_closed(int device)
{
	return atomic_load_explicit(&closed_all, memory_order_relaxed) ||
	       (device >= 0 && device < GPUPOOL_MAX_DEVICES && atomic_load_explicit(&closed[device], memory_order_relaxed));
}

int gp_budget_take(int device, size_t bytes, enum gp_budget_kind kind)
{
	if (!in_range(device, kind))
		return -EINVAL;
	if (__builtin_expect(gp_budget_closed(device), 0)) {
		refused_last = true;
		return -ENOMEM;
	}
	const struct gp_budget_gate *gt = atomic_load_explicit(&gate, memory_order_acquire);
	if (__builtin_expect(gt != NULL, 0) && kind != GP_BUDGET_MANAGED && gt->take(device, bytes) != 0) {
		refused_last = false; /* the line's refusal, not the limit's: waiting may serve it */
		return -EBUSY;
	}
	struct dev_budget *b = &budget[device];
	uint64_t limit = gp_budget_limit(device);
	uint64_t cur = atomic_load_explicit(&b->total, memory_order_relaxed);
	do {
		/* written so that no sum can wrap: bytes past the room is a refusal, and with no
		 * limit, bytes past what the figure can count (no device holds them) */
		if (limit ? cur > limit || bytes > limit - cur : bytes > UINT64_MAX - cur) {
			refused_last = true;
			return -ENOMEM;
		}
	} while (!atomic_compare_exchange_weak_explicit(&b->total, &cur, cur + bytes, memory_order_relaxed,
							memory_order_relaxed));
	/* the group's budget after the device's own limit */
	const struct gp_budget_group *g = atomic_load_explicit(&group, memory_order_acquire);
	if (g && g->take(device, bytes) != 0) {
		(void)sub_clamped(&b->total, bytes);
		refused_last = true;
		return -ENOMEM;
	}
	refused_last = false;
	(void)add_saturated(&b->held[kind], bytes); /* at most total, which did not wrap */
	return 0;
}

void gp_budget_charge(int device, size_t bytes, enum gp_budget_kind kind)
{
	if (!in_range(device, kind))
		return;
	/* memory the device already handed out: no sum of it can pass UINT64_MAX, but a figure
	 * never wraps on a wrong one either */
	(void)add_saturated(&budget[device].total, bytes);
	(void)add_saturated(&budget[device].held[kind], bytes);
	const struct gp_budget_group *g = atomic_load_explicit(&group, memory_order_acquire);
	if (g)
		g->charge(device, bytes);
}

void gp_budget_give(int device, size_t bytes, enum gp_budget_kind kind)
{
	if (!in_range(device, kind))
		return;
	struct dev_budget *b = &budget[device];
	uint64_t off = sub_clamped(&b->held[kind], bytes);
	(void)sub_clamped(&b->total, off);
	const struct gp_budget_group *g = atomic_load_explicit(&group, memory_order_acquire);
	if (g && off)
		g->give(device, off);
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

bool gp_budget_capped(int device)
{
	return gp_budget_limit(device) || atomic_load_explicit(&group, memory_order_acquire) || gp_budget_closed(device);
}

uint64_t gp_budget_inconsistencies(void) { return atomic_load(&inconsistencies); }

void gp_budget_pool_gone(int device)
{
	if (!in_range(device, GP_BUDGET_POOL))
		return;
	uint64_t had = atomic_exchange(&budget[device].held[GP_BUDGET_POOL], 0);
	(void)sub_clamped(&budget[device].total, had);
	const struct gp_budget_group *g = atomic_load_explicit(&group, memory_order_acquire);
	if (g && had)
		g->give(device, had);
}

void gp_budget_after_fork(void)
{
	const struct gp_budget_group *g = atomic_load_explicit(&group, memory_order_acquire);
	if (g)
		g->after_fork();
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		atomic_store(&budget[d].total, 0);
		atomic_store(&limits[d], 0);
		atomic_store(&closed[d], false); /* the child's pools resolve their limits again */
		for (int k = 0; k < GP_BUDGET_KINDS; k++)
			atomic_store(&budget[d].held[k], 0);
	}
}
