/* The status exchange, the holder's side (status.h): each device's figures from this
 * process's own page slot (a consistent snapshot), the whole free segments counted afresh
 * (gp_pool_releasable) and the driver's figures looked at again when older than
 * GP_STATUS_FRESH_NS, one answer per device. Depends on the registry, the pool, statpage.h
 * and share.h; never on the call bodies or reclaim. */
#include "status.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "proc.h"
#include "registry.h"
#include "registry_internal.h"
#include "statpage.h"

#define R (gp_registry_self())

/* How long a slot mid-update is waited for: a busy pool keeps it odd for microseconds. */
#define SNAPSHOT_NS (2 * 1000 * 1000ull)

static uint64_t counted_ns[GPUPOOL_MAX_DEVICES]; /* CLOCK_MONOTONIC of each device's last count */
static uint64_t counted_seq[GPUPOOL_MAX_DEVICES]; /* its slot's sequence counter then */

static bool uuid_zero(const unsigned char *u)
{
	for (size_t i = 0; i < GPUPOOL_UUID_LEN; i++)
		if (u[i])
			return false;
	return true;
}

/* The device's figures made fresh (status.h: GP_STATUS_FRESH_NS, GP_STATUS_CHANGED_NS): its
 * whole free segments, and the driver's total and free memory, written into its slot as the
 * release thread's pass writes them. */
static void refresh(gp_pool *p, struct gpupool_device_stats *st, int d, uint64_t now)
{
	uint64_t seq = __atomic_load_n(&st->seq, __ATOMIC_RELAXED), age = now - counted_ns[d];
	if (counted_ns[d] && (age < GP_STATUS_CHANGED_NS || (age < GP_STATUS_FRESH_NS && seq == counted_seq[d])))
		return;
	counted_ns[d] = now;
	(void)gp_pool_releasable(p);
	(void)gp_status_look(p, st, d);
	counted_seq[d] = __atomic_load_n(&st->seq, __ATOMIC_RELAXED); /* the count's own bracket counted */
}

int gp_status_look(gp_pool *p, struct gpupool_device_stats *st, int d)
{
	const struct gp_backend *be = gp_pool_backend(p);
	size_t free_b = 0, total = 0;
	int rc = be->mem_info(be->ctx, d, &free_b, &total);
	if (rc == 0) {
		/* a reader may pair one look's total with another's free: independent words */
		__atomic_store_n(&st->device_total_bytes, total, __ATOMIC_RELAXED);
		__atomic_store_n(&st->device_free_bytes, free_b, __ATOMIC_RELAXED);
		__atomic_store_n(&st->device_seen_ns, gp_clock_ns(CLOCK_REALTIME), __ATOMIC_RELAXED);
	}
	return rc;
}

/* An answer's figures from a consistent copy of slot s. */
static void fill(struct gp_share_status *a, const struct gpupool_device_stats *s)
{
	a->reserved = s->reserved_bytes;
	a->unpooled = s->unpooled_bytes;
	a->allocated = s->allocated_bytes;
	a->cached = s->cached_bytes;
	a->releasable = s->releasable_bytes;
	a->waiting = s->waiting_bytes;
	a->wait_started_ns = s->wait_started_ns;
	a->limit = s->limit_bytes;
	a->floor = s->floor_bytes;
	a->device_total = s->device_total_bytes;
	a->device_free = s->device_free_bytes;
	a->device_seen_ns = s->device_seen_ns;
	a->device = s->device;
	memcpy(a->device_name, s->device_name, sizeof a->device_name);
	a->device_name[sizeof a->device_name - 1] = '\0';
}

void gp_status_answer(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	GP_REGISTRY_READER;
	const struct gpupool_page *pg = gp_registry_page();
	struct gp_share_msg a[GPUPOOL_MAX_DEVICES];
	uint16_t n = 0;
	bool all = uuid_zero(m->uuid);
	uint64_t now = gp_clock_ns(CLOCK_MONOTONIC);
	for (int d = 0; pg && d < R->ndev && d < GPUPOOL_MAX_DEVICES; d++) {
		gp_pool *p = atomic_load(&R->pools[d]);
		struct gpupool_device_stats *st = gp_registry_slot(R, d);
		if (!p || !st || (!all && (!gp_statpage_uuid_known(st) || memcmp(st->uuid, m->uuid, GPUPOOL_UUID_LEN))))
			continue;
		refresh(p, st, d, now);
		struct gpupool_device_stats copy;
		if (!gp_statpage_snapshot_until(st, &copy, gp_clock_ns(CLOCK_MONOTONIC) + SNAPSHOT_NS))
			continue; /* mid-update for 2 ms: a busy pool; left out of this answer */
		a[n] = gp_share_msg_make(GP_SHARE_STATUS_ANSWER, m->id, (const unsigned char *)copy.uuid);
		fill(&a[n].status, &copy);
		n++;
	}
	if (n == 0) { /* nothing on that GPU: one answer that says so */
		a[0] = gp_share_msg_make(GP_SHARE_STATUS_ANSWER, m->id, m->uuid);
		n = 1;
		a[0].status.count = 0;
	} else {
		for (uint16_t i = 0; i < n; i++) {
			a[i].status.index = i;
			a[i].status.count = n;
		}
	}
	for (uint16_t i = 0; i < n; i++) {
		struct gp_share_status *s = &a[i].status;
		if (pg) {
			s->start_time_ns = pg->start_time_ns;
			memcpy(s->comm, pg->comm, sizeof s->comm);
			s->comm[sizeof s->comm - 1] = '\0';
			memcpy(s->lib_version, pg->lib_version, sizeof s->lib_version);
			s->lib_version[sizeof s->lib_version - 1] = '\0';
		}
		/* an asker gone meanwhile, or its queue full: nothing to do, it times out */
		if (gp_share_reply(fd, from, &a[i]) != 0)
			break;
	}
	gp_log(GP_LOG_DEBUG, "share: status of %u device%s to pid %d (uid %u)", n, n == 1 ? "" : "s", (int)from->pid,
	       (unsigned)from->uid);
}
