/* The registry's per-device pools (registry.h): each created on first use with its page
 * slot and a backend of its own (lifecycle.c: a device reset can stop it); the first opens
 * the page and the trace, arms the exit report and starts the fence thread. Release requests
 * from the page, the counters the hooks keep outside the pools, the out-of-memory message,
 * the process's part of the allocation ladder (calls/ladder.h). Must not depend on sharing or
 * the call bodies. */
#include "registry.h"
#include "registry_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "exit_report.h"
#include "group_budget.h"
#include "fence_thread.h"
#include "format.h"
#include "libcuda.h"
#include "log.h"
#include "outfile.h"
#include "proc.h"
#include "statpage.h"
#include "stats.h"
#include "rank.h"
#include "budget.h"
#include "trace.h"

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER; /* creating and removing pools */
static gp_pool *parent_pools[GPUPOOL_MAX_DEVICES + 1]; /* after fork: the parent's, left alone */
static struct gpupool_page *page;  /* the shared page, or `local`; NULL until the first pool */
static struct gpupool_page local;
static bool page_shared;
static _Atomic uint64_t release_seen; /* the latest release request claimed by a thread */
static bool atexit_set;
static bool tracing; /* R->tracing, read here on every allocation without a call */
static bool geometry_told[GPUPOOL_MAX_DEVICES]; /* gp_config_fit_device's line was logged */

/* The registry, writable (init.c owns it). */
#define R (gp_registry_self())

/* At exit: from now on the runtime may be torn down at any moment (its own exit handlers
 * and destructors run after this one), so the hooks pass allocations through (counted
 * against the caps until the process ends); then the
 * report reads the page as it is (a forked child's own, or none). Registered with the first
 * pool, before sharing's release thread starts: its own exit handler, registered later,
 * has stopped it when this one runs. */
static void at_exit(void)
{
	atomic_store(&R->exiting, true);
	gp_exit_report(&R->cfg, page, page_shared, R->tracing);
}

gp_pool *gp_registry_pool_create(int dev)
{
	gp_mutex_lock(&pools_lock, GP_RANK_POOLS);
	gp_pool *p = atomic_load(&R->pools[dev]);
	if (p)
		goto out;
	gp_registry_retire_killed(dev); /* before a new pool writes to the device's slot */
	if (!page) {
		if (R->cfg.stats_page)
			page = gp_statpage_open();
		page_shared = page != NULL;
		if (!page) {
			page = &local;
			gp_statpage_init(page);
		}
		atomic_store(&release_seen, __atomic_load_n(&page->release_request, __ATOMIC_ACQUIRE));
		int trc = R->cfg.trace[0] ? gp_trace_open(R->cfg.trace) : -ENOENT;
		R->tracing = tracing = trc == 0;
		if (R->cfg.trace[0] && trc != 0)
			gp_log(GP_LOG_WARN, "trace: cannot record to %s: %s; not tracing", R->cfg.trace,
			       trc == -ENOSYS ? "zlib (libz.so.1) cannot be loaded for a .gz trace"
					      : gp_outfile_strerror(trc));
		if (!atexit_set)
			atexit_set = atexit(at_exit) == 0;
	}
	/* the device's memory: a percentage limit's base, and what the segment geometry must fit */
	size_t dfree = 0, dtotal = 0;
	if (gp_registry_backend()->mem_info(gp_registry_backend()->ctx, dev, &dfree, &dtotal) != 0)
		dfree = dtotal = 0;
	struct gp_pool_params prm;
	gp_config_pool_params(&R->cfg, dtotal, &prm);
	prm.limit = gp_config_device_limit(&R->cfg, dev, dtotal); /* a scheduler's per-device limit */
	gp_budget_set_limit(dev, prm.limit); /* every path's limit (budget.h), before any take */
	if (!prm.limit && R->cfg.limit_percent && !dtotal) {
		/* a percentage of a device whose size is unknown: not no limit, but nothing (docs/security.md) */
		gp_budget_close(dev);
		gp_log(GP_LOG_ERROR, "device %d: limit:%u%% cannot be resolved (the device's size is not known); every "
				     "allocation on it is refused rather than run without its limit",
		       dev, R->cfg.limit_percent);
	}
	char why[512];
	if (gp_config_fit_device(&prm, dev, dfree, why, sizeof why) && !geometry_told[dev]) {
		geometry_told[dev] = true; /* once per device: a reset's new pool is fitted again, quietly */
		gp_log(GP_LOG_WARN, "%s", why);
	}
	struct gpupool_device_stats *slot = gp_statpage_slot(page, dev);
	/* the device's UUID, which names the physical GPU the same way in every process
	 * whatever CUDA_VISIBLE_DEVICES renumbers (gpupool-stat, Prometheus' UUID label) */
	unsigned char uuid[GPUPOOL_UUID_LEN];
	char name[GPUPOOL_DEVICE_NAME_LEN] = "";
	if (slot && gp_libcuda_device_uuid(dev, uuid) == 0) {
		(void)gp_statpage_set_uuid(page, dev, uuid);
		(void)gp_libcuda_device_name(dev, name, sizeof name);
	} else if (slot && gp_runtime_device_uuid(R->rt, dev, uuid, name, sizeof name) == 0) {
		(void)gp_statpage_set_uuid(page, dev, uuid);
	}
	/* and its name, as nvidia-smi shows it beside the UUID (gpupool-stat's GPU lines) */
	if (slot && name[0])
		(void)gp_statpage_set_device_name(page, dev, name);
	const struct gp_backend *be = slot ? gp_registry_pool_backend_new() : NULL;
	if (!be || gp_pool_create(&p, dev, &prm, be, slot) != 0) {
		gp_log(GP_LOG_WARN, "device %d: cannot create a pool; passing its calls through", dev);
		gp_registry_pool_backend_free(be);
		p = NULL;
		goto out;
	}
	gp_registry_pool_backend_bind(be, p);
	/* before the pool is visible: whoever sees the pool sees its slot (gp_registry_slot) */
	__atomic_store_n(&R->slots[dev], slot, __ATOMIC_RELEASE);
	atomic_store(&R->pools[dev], p);
	if (R->cfg.fence == GP_FENCE_THREAD) {
		gp_fence_thread_after_action(gp_registry_reclaim_parked);
		gp_fence_thread_start(R->pools, R->ndev + 1, R->cfg.fence_interval_us); /* and the sentinel */
	}
out:
	gp_mutex_unlock(&pools_lock, GP_RANK_POOLS);
	return p;
}

const struct gpupool_page *gp_registry_page(void) { return __atomic_load_n(&page, __ATOMIC_ACQUIRE); }

long long gp_registry_release(int only)
{
	long long total = 0;
	for (int d = 0; d < R->ndev; d++) {
		gp_pool *p = atomic_load(&R->pools[d]);
		if (!p || (only >= 0 && d != only))
			continue;
		(void)gp_pool_fence(p);
		total += (long long)gp_pool_release(p, 0);
	}
	return total;
}

/* A release request is pending (or was answered already): claimed by a compare-exchange of
 * release_seen, so that one thread releases for it, and a thread still releasing for an
 * older request cannot undo the answer to a newer one (acks only move forward, statpage.h).
 * Out of line: the allocation path keeps only check_release_request's two loads. */
static __attribute__((noinline)) void release_on_request(uint64_t seen)
{
	uint64_t req;
	if (!gp_statpage_release_pending(page, &req) || req == seen ||
	    !atomic_compare_exchange_strong(&release_seen, &seen, req))
		return; /* answered already, or another thread claimed it (or a newer one) */
	long long n = gp_registry_release(-1);
	gp_log(GP_LOG_INFO, "released %lld bytes of cached memory on request", n);
	gp_statpage_release_ack(page, req);
}

void gp_registry_release_requests(void)
{
	GP_REGISTRY_READER;
	if (!page_shared)
		return;
	uint64_t seen = atomic_load_explicit(&release_seen, memory_order_relaxed);
	if (__atomic_load_n(&page->release_request, __ATOMIC_RELAXED) != seen)
		release_on_request(seen);
}

/* A release request from gpupool-stat: two loads per call (three with the shared-page
 * check), the rest only when a request is pending. Every allocating thread checks. */
static inline void check_release_request(void)
{
	if (__builtin_expect(!page_shared, 0))
		return;
	uint64_t seen = atomic_load_explicit(&release_seen, memory_order_relaxed);
	if (__builtin_expect(__atomic_load_n(&page->release_request, __ATOMIC_RELAXED) != seen, 0))
		release_on_request(seen);
}

void gp_registry_count_passthrough(int dev, bool alloc)
{
	gp_pool *p = dev >= 0 ? atomic_load(&R->pools[dev]) : NULL;
	struct gpupool_device_stats *st = p ? gp_registry_slot(R, dev) : NULL;
	if (!st)
		return;
	/* not under the pool lock, so no seq bracket (it would race with the pool's own):
	 * monotonic counters a reader may see one call late */
	if (alloc)
		__atomic_add_fetch(&st->passthrough_allocs, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&st->passthrough_frees, 1, __ATOMIC_RELAXED);
}

void gp_registry_stream_made(const char *how)
{
	if (atomic_exchange(&R->sync_key, GP_NO_STREAM) == GP_NO_STREAM)
		return;
	gp_log(GP_LOG_WARN, "legacy_stream:1, but the program %s: cudaFree'd blocks wait for fences "
			    "from now on", how);
	/* Blocks reused in the legacy stream's order so far may still be written by work queued
	 * before their last free, and their owners may now use them on the new stream, where
	 * that order does not hold: every pool waits for its device once (the new stream has
	 * nothing queued yet: its creator has not returned), and the legacy stream's free blocks
	 * join the ready list through that fence. A cudaFree racing with this call, keyed before
	 * the switch, is the one case this does not cover (docs/knobs.md). */
	for (int d = 0; d < R->ndev; d++) {
		gp_pool *p = atomic_load(&R->pools[d]);
		if (!p)
			continue;
		gp_pool_stream_retire(p, 0);
		if (gp_pool_fence(p) != 0)
			gp_log(GP_LOG_WARN, "device %d: could not wait for the device after legacy_stream was dropped "
					    "(a capture is active?): its blocks wait for the next fence", d);
	}
}

void gp_registry_count_driver(int dev, enum gp_driver_count what)
{
	gp_pool *p = dev >= 0 && dev < GPUPOOL_MAX_DEVICES ? atomic_load(&R->pools[dev]) : NULL;
	struct gpupool_device_stats *st = p ? gp_registry_slot(R, dev) : NULL;
	if (!st)
		return;
	/* monotonic counters outside the seq bracket, as gp_registry_count_passthrough's */
	uint64_t *c = what == GP_DRIVER_ALLOC  ? &st->driver_allocs
		      : what == GP_DRIVER_FREE ? &st->driver_frees
					       : &st->driver_passthrough_allocs;
	__atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

void gp_registry_trace(int op, int dev, cudaStream_t s, size_t size, void *ptr, uint64_t t0, cudaError_t e)
{
	uint64_t t1 = gp_trace_now_ns();
	gp_trace_record_at(op, dev < 0 ? 0 : dev, (uintptr_t)s, size, (uintptr_t)ptr, t1, t1 - t0, (int)e);
}

/* "device 0: out of memory allocating 2.0 GiB (reserved 1.0 GiB, in use 512.0 MiB, limit
 * 1.0 GiB)": the one wording of an allocation gpupool could not serve. The figures are
 * "unknown" when the device's counters stayed mid-update for GP_STATPAGE_PATIENCE_NS
 * (another thread in a slow runtime call). */
void gp_registry_oom_message(char *buf, size_t cap, int dev, size_t size)
{
	struct gpupool_device_stats st;
	bool known = gp_statpage_snapshot_until(gp_registry_slot(R, dev), &st,
						gp_clock_ns(CLOCK_MONOTONIC) + GP_STATPAGE_PATIENCE_NS);
	char b[6][32];
	size_t n = 0;
#define PUT(...)                                                                         \
	do {                                                                             \
		int k_ = n < cap ? snprintf(buf + n, cap - n, __VA_ARGS__) : 0;          \
		n += k_ > 0 ? (size_t)k_ : 0;                                            \
	} while (0)
	PUT("device %d: out of memory allocating %s (reserved %s, in use %s", dev, gp_format_bytes(b[0], sizeof b[0], size),
	    known ? gp_format_bytes(b[1], sizeof b[1], st.reserved_bytes) : "unknown",
	    known ? gp_format_bytes(b[2], sizeof b[2], st.allocated_bytes) : "unknown");
	if (known && st.unpooled_bytes) /* what else fills the limit: virtual memory, managed, ... */
		PUT(", unpooled %s", gp_format_bytes(b[3], sizeof b[3], st.unpooled_bytes));
	if (known && st.limit_bytes)
		PUT(", limit %s", gp_format_bytes(b[4], sizeof b[4], st.limit_bytes));
	/* the GPU's own figure: a limit refuses with memory free, a full GPU without */
	gp_pool *p = atomic_load(&R->pools[dev]);
	const struct gp_backend *be = p ? gp_pool_backend(p) : NULL;
	size_t dfree = 0, dtotal = 0;
	if (be && be->mem_info(be->ctx, dev, &dfree, &dtotal) == 0)
		PUT("; GPU free %s", gp_format_bytes(b[5], sizeof b[5], dfree));
	char group[320];
	if (gp_group_budget_describe(dev, group, sizeof group))
		PUT("; %s", group);
	PUT(")");
#undef PUT
}

/* Devices whose first out of memory was logged as a warning (gp_registry_oom_log). */
static atomic_bool oom_told[GPUPOOL_MAX_DEVICES + 1];

void gp_registry_oom_log(int dev, const char *msg)
{
	int d = dev >= 0 && dev < GPUPOOL_MAX_DEVICES ? dev : GPUPOOL_MAX_DEVICES;
	if (!atomic_load_explicit(&oom_told[d], memory_order_relaxed) && !atomic_exchange(&oom_told[d], true))
		gp_log(GP_LOG_WARN, "%s; this device's further out-of-memory errors are logged at GPUPOOL_LOG=info, "
				    "the exit report counts them",
		       msg);
	else
		gp_log(GP_LOG_INFO, "%s", msg);
}

void gp_registry_limit_refused_log(int dev, const char *what, size_t size, const char *returning)
{
	char msg[512], group[320]; /* a log line is at most 512 bytes (log.c) */
	uint64_t limit = gp_budget_limit(dev), held = gp_budget_held(dev, GP_BUDGET_KINDS);
	if (!gp_budget_refused_last()) /* the gate's refusal: the calling thread's last take */
		snprintf(msg, sizeof msg, "device %d: %s of %zu bytes refused: an earlier waiter on the GPU needs the memory "
					  "and the wait behind it ended without it (held: %llu bytes, pooled and not); "
					  "returning %s",
			 dev, what, size, (unsigned long long)held, returning);
	/* the budget asks the group after the process's own limit (budget.c): a refusal the
	 * limit (0: none) does not explain is the group's, named with its figures */
	else if ((!limit || (held <= limit && size <= limit - held)) && gp_group_budget_describe(dev, group, sizeof group))
		snprintf(msg, sizeof msg, "device %d: %s of %zu bytes refused by its group's budget (%s); returning %s", dev,
			 what, size, group, returning);
	else
		snprintf(msg, sizeof msg,
			 "device %d: %s of %zu bytes refused: the limit (%llu bytes) would be passed (held: %llu "
			 "bytes, pooled and not); returning %s",
			 dev, what, size, (unsigned long long)limit, (unsigned long long)held, returning);
	gp_registry_oom_log(dev, msg);
}

/* gp_registry_alloc_once while tracing: the call timed from before the release check. Out
 * of line, so that the untraced path keeps no frame of its own. */
static __attribute__((noinline)) int alloc_traced(gp_pool *p, int dev, size_t size, gp_stream key, int op,
						  cudaStream_t s, uintptr_t *a)
{
	uint64_t t0 = gp_trace_now_ns();
	check_release_request();
	int rc = gp_pool_alloc_try(p, size, key, a);
	gp_registry_trace(op, dev, s, size, rc == 0 ? (void *)*a : NULL, t0,
			  rc == 0 ? cudaSuccess : cudaErrorMemoryAllocation);
	return rc;
}

int gp_registry_alloc_once(gp_pool *p, int dev, size_t size, gp_stream key, int op, cudaStream_t s, uintptr_t *a)
{
	if (__builtin_expect(tracing, 0))
		return alloc_traced(p, dev, size, key, op, s, a);
	check_release_request();
	return gp_pool_alloc_try(p, size, key, a); /* an out of memory: the ladder counts it */
}

int gp_registry_alloc_retry(gp_pool *p, int dev, size_t size, gp_stream key, int op, cudaStream_t s, uintptr_t *a)
{
	return __builtin_expect(tracing, 0) ? alloc_traced(p, dev, size, key, op, s, a) : gp_pool_alloc_try(p, size, key, a);
}

void gp_registry_lock(void) { gp_mutex_lock(&pools_lock, GP_RANK_POOLS); }

void gp_registry_unlock(void) { gp_mutex_unlock(&pools_lock, GP_RANK_POOLS); }

void gp_registry_pools_after_fork(void)
{
	/* the parent's pools may be locked by threads that are not here: left alone, still
	 * referenced (abandoned on purpose, not leaked: LeakSanitizer) */
	for (int d = 0; d <= GPUPOOL_MAX_DEVICES; d++) { /* and the sentinel's slot (lifecycle.c) */
		gp_pool *p = atomic_exchange(&R->pools[d], NULL);
		if (p)
			parent_pools[d] = p;
		if (d < GPUPOOL_MAX_DEVICES)
			__atomic_store_n(&R->slots[d], NULL, __ATOMIC_RELAXED); /* the parent's page: the child gets its own */
	}
	pthread_mutex_init(&pools_lock, NULL);
	for (int d = 0; d <= GPUPOOL_MAX_DEVICES; d++) /* the child's first out of memory is news */
		atomic_store(&oom_told[d], false);
	if (page_shared)
		gp_statpage_forget(page);
	page = NULL;
	page_shared = false;
	if (R->tracing)
		gp_trace_forget();
	R->tracing = tracing = false;
}
