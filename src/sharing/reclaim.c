/* Reclaim (reclaim.h): the asker's round (query every process of the page directory, ask
 * those on the same GPU, largest idle first, until the GPU has room or the wait is spent) and
 * the holder's answers (what it could give; what it gave, only while the driver reports the
 * GPU short, only idle memory: whole free segments, then a framework's cache). Counters go to
 * the page outside the pools' seq brackets, as the hooks' other monotonic counters do. */
#include "reclaim.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "framework.h"
#include "log.h"
#include "proc.h"
#include "registry.h"
#include "registry_internal.h"
#include "statpage.h"

#define R (gp_registry_self())

/* The first round's answers come from the holders' release threads, which answer at once:
 * a process that has not answered within this is busy or stopped, and is not waited for. */
#define QUERY_WAIT_NS (50 * 1000 * 1000ull)
#define MAX_PEERS 256
/* A holder gives the asker's shortfall and a little more: the driver's own use of memory
 * (page tables, a context's growth) makes "exactly enough" not quite enough. */
#define SLACK(need) (((size_t)256 << 20) + (need) / 64)

static uint64_t now_ns(void) { return gp_clock_ns(CLOCK_MONOTONIC); }

static void count(int dev, size_t off, uint64_t v)
{
	struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	if (st && v)
		__atomic_add_fetch((uint64_t *)(void *)((char *)st + off), v, __ATOMIC_RELAXED);
}
#define COUNT(dev, field, v) count(dev, offsetof(struct gpupool_device_stats, field), (v))

/* The device of this process whose GPU is `uuid`, with a pool; -1 if none. Inside the
 * caller's GP_REGISTRY_READER. */
static int device_of(const unsigned char *uuid, gp_pool **pool)
{
	for (int d = 0; d < R->ndev && d < GPUPOOL_MAX_DEVICES; d++) {
		gp_pool *p = atomic_load(&R->pools[d]);
		struct gpupool_device_stats *st = gp_registry_slot(R, d);
		if (p && st && gp_statpage_uuid_known(st) && memcmp(st->uuid, uuid, GPUPOOL_UUID_LEN) == 0) {
			*pool = p;
			return d;
		}
	}
	return -1;
}

static int device_mem(gp_pool *p, size_t *free_bytes, size_t *total)
{
	const struct gp_backend *be = gp_pool_backend(p);
	return be->mem_info(be->ctx, gp_pool_device(p), free_bytes, total);
}

static int device_free(gp_pool *p, size_t *free_bytes)
{
	size_t total = 0;
	return device_mem(p, free_bytes, &total);
}

/* A framework's cache is emptied at most this often: each empty costs the program a device
 * synchronisation and every block it then allocates again, and one empty gives all there is. */
#define FRAMEWORK_EVERY_NS (1000 * 1000 * 1000ull)
static uint64_t framework_last_ns; /* the release thread's only */

/* ---- the holder ------------------------------------------------------------------------ */

/* Whole free segments of p, up to `need` bytes of them (largest first), back to the driver. */
static size_t give_idle(gp_pool *p, const struct gpupool_device_stats *st, size_t need)
{
	size_t cached = __atomic_load_n(&st->cached_bytes, __ATOMIC_RELAXED);
	return gp_pool_release(p, cached > need ? cached - need : 0);
}

static void answer_query(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	struct gp_share_msg a = gp_share_msg_make(GP_SHARE_OFFER, m->id, m->uuid);
	gp_pool *p = NULL;
	int dev = R->cfg.reclaim ? device_of(m->uuid, &p) : -1;
	if (dev >= 0) {
		size_t releasable = 0;
		(void)gp_pool_decay(p, now_ns(), 0, 0, &releasable); /* counts, gives nothing */
		const struct gpupool_device_stats *st = gp_registry_slot(R, dev);
		a.bytes = releasable;
		a.held = __atomic_load_n(&st->reserved_bytes, __ATOMIC_RELAXED) +
			 __atomic_load_n(&st->unpooled_bytes, __ATOMIC_RELAXED);
		if (gp_framework_present())
			a.flags |= GP_SHARE_FRAMEWORK;
	}
	(void)gp_share_reply(fd, from, &a); /* an asker gone meanwhile: nothing to do */
}

/* An ask still worth a framework's cache once the interpreter's lock is held: the asker
 * still waits (this process's own reclaim_wait_ms since the ask came), and the GPU is still
 * short of what it needs. */
struct still_ask {
	gp_pool *p;
	uint64_t t0, bytes;
};

static bool ask_still(void *arg)
{
	const struct still_ask *a = arg;
	size_t free_now = 0;
	return now_ns() - a->t0 < (uint64_t)R->cfg.reclaim_wait_ms * 1000000u && device_free(a->p, &free_now) == 0 &&
	       free_now < a->bytes;
}

static void answer_ask(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	struct gp_share_msg a = gp_share_msg_make(GP_SHARE_GAVE, m->id, m->uuid);
	gp_pool *p = NULL;
	int dev = R->cfg.reclaim ? device_of(m->uuid, &p) : -1;
	if (dev < 0) {
		(void)gp_share_reply(fd, from, &a);
		return;
	}
	uint64_t t0 = now_ns();
	const struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	size_t free0 = 0, total = 0, freed = 0, given = 0;
	int frameworks = 0;
	char why[192] = "";
	/* honoured only while the driver reports the GPU short of what the asker needs: an ask
	 * for memory that is there costs nothing; one for more than the whole GPU (a forged
	 * one: no allocation can need it) is refused */
	if (device_mem(p, &free0, &total) == 0 && free0 < m->bytes && m->bytes <= total) {
		size_t need = m->bytes - free0;
		need += SLACK(need);
		given = give_idle(p, st, need);
		if (given < need && gp_framework_present() && !atomic_load(&R->exiting) &&
		    (!framework_last_ns || t0 - framework_last_ns >= FRAMEWORK_EVERY_NS)) {
			framework_last_ns = t0;
			struct still_ask sa = {p, t0, m->bytes};
			frameworks = gp_framework_empty(why, sizeof why, ask_still, &sa);
			if (frameworks > 0) {
				COUNT(dev, framework_empties, (uint64_t)frameworks);
				/* what the framework freed waits for a fence (its cudaFree): the
				 * framework synchronized the device before freeing, so this fence
				 * returns at once, and its memory goes to the driver, not the cache */
				(void)gp_pool_fence(p);
				given += give_idle(p, st, need - given);
			}
		}
		(void)device_free(p, &freed);
		/* a framework's memory outside the pool (PyTorch's expandable segments) goes to
		 * the driver directly: what the GPU gained counts too */
		if (freed > free0 && freed - free0 > given)
			given = freed - free0;
	}
	uint64_t took = now_ns() - t0;
	a.bytes = given;
	a.held = took;
	if (given) {
		COUNT(dev, reclaims_served, 1);
		COUNT(dev, reclaim_given_bytes, given);
	} else {
		COUNT(dev, reclaims_refused, 1);
	}
	char b[3][32];
	size_t wl = strlen(why);
	while (wl && (why[wl - 1] == ' ' || why[wl - 1] == ';'))
		why[--wl] = '\0'; /* the script's "torch: ...; " list, its last separator off */
	if (given || why[0])
		gp_log(GP_LOG_INFO, "reclaim: gave %s on device %d to pid %d (uid %u) in %.3f s%s%s%s (GPU free %s)",
		       gp_format_bytes(b[0], sizeof b[0], given), dev, (int)from->pid, (unsigned)from->uid,
		       (double)took / 1e9, frameworks > 0 ? ", framework caches emptied" : "", why[0] ? "; " : "",
		       why, gp_format_bytes(b[1], sizeof b[1], freed));
	else
		gp_log(GP_LOG_DEBUG, "reclaim: nothing for pid %d (uid %u) on device %d: GPU free %s, asked %s", (int)from->pid,
		       (unsigned)from->uid, dev, gp_format_bytes(b[1], sizeof b[1], free0),
		       gp_format_bytes(b[2], sizeof b[2], (size_t)m->bytes));
	(void)gp_share_reply(fd, from, &a);
}

void gp_reclaim_answer(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	GP_REGISTRY_READER;
	if (atomic_load(&R->exiting))
		return;
	if (m->kind == GP_SHARE_QUERY)
		answer_query(fd, m, from);
	else if (m->kind == GP_SHARE_ASK)
		answer_ask(fd, m, from);
}

/* ---- the asker ------------------------------------------------------------------------- */

struct offer {
	int pid;
	bool answered;
	uint64_t bytes, held;
	uint32_t flags;
};

/* Idle segments first, largest first; then the processes with a framework's cache, the most
 * held first; then the rest (nothing to ask of them). */
static int offer_cmp(const void *a_, const void *b_)
{
	const struct offer *a = a_, *b = b_;
	int ka = a->bytes ? 0 : (a->flags & GP_SHARE_FRAMEWORK) && a->held ? 1 : 2;
	int kb = b->bytes ? 0 : (b->flags & GP_SHARE_FRAMEWORK) && b->held ? 1 : 2;
	if (ka != kb)
		return ka - kb;
	uint64_t x = ka == 0 ? a->bytes : a->held, y = ka == 0 ? b->bytes : b->held;
	return x > y ? -1 : x < y ? 1 : 0;
}

static struct offer *offer_of(struct offer *o, int n, int pid)
{
	for (int i = 0; i < n; i++)
		if (o[i].pid == pid)
			return &o[i];
	return NULL;
}

static atomic_bool asking; /* a round is running: set and cleared by its thread alone */
static _Atomic uint64_t next_id = 1;

/* One round: returns the bytes given, *asked the asks sent, *answers those that gave. */
static size_t round_of_asks(int fd, const unsigned char *uuid, size_t want, gp_pool *p, uint64_t deadline,
			    unsigned *asked, unsigned *answers, char *who, size_t whocap)
{
	int *pids = NULL;
	int n = gp_share_peers(getpid(), MAX_PEERS, &pids);
	if (n <= 0) {
		free(pids);
		return 0;
	}
	struct offer *o = calloc((size_t)n, sizeof *o);
	if (!o) {
		free(pids);
		return 0;
	}
	uint64_t id = atomic_fetch_add(&next_id, 1) | ((uint64_t)getpid() << 32);
	struct gp_share_msg q = gp_share_msg_make(GP_SHARE_QUERY, id, uuid);
	q.bytes = want;
	int waiting = 0;
	for (int i = 0; i < n; i++) {
		o[i].pid = pids[i];
		if (gp_share_send(fd, pids[i], &q) == 0)
			waiting++;
		else
			o[i].answered = true; /* gone, or not listening: nothing to wait for */
	}
	free(pids);
	/* the offers: every process answers at once from its release thread */
	uint64_t qdl = now_ns() + QUERY_WAIT_NS;
	if (qdl > deadline)
		qdl = deadline;
	while (waiting > 0) {
		struct gp_share_msg m;
		struct gp_share_peer from;
		int rc = gp_share_wait(fd, &m, &from, qdl);
		if (rc == -ETIMEDOUT || (rc < 0 && rc != -EBADMSG))
			break;
		if (rc != 0 || m.kind != GP_SHARE_OFFER || m.id != id || memcmp(m.uuid, uuid, GPUPOOL_UUID_LEN) != 0)
			continue;
		/* the kernel names the sender: an answer counts only from the process asked */
		struct offer *f = offer_of(o, n, from.pid);
		if (!f || f->answered)
			continue;
		f->answered = true;
		f->bytes = m.bytes;
		f->held = m.held;
		f->flags = m.flags;
		waiting--;
	}
	qsort(o, (size_t)n, sizeof *o, offer_cmp);
	size_t got = 0;
	for (int i = 0; i < n && now_ns() < deadline; i++) {
		if (!o[i].bytes && !((o[i].flags & GP_SHARE_FRAMEWORK) && o[i].held))
			break; /* sorted: nobody after holds anything to give */
		struct gp_share_msg ask = gp_share_msg_make(GP_SHARE_ASK, id, uuid);
		ask.bytes = want;
		if (gp_share_send(fd, o[i].pid, &ask) != 0)
			continue;
		(*asked)++;
		uint64_t sent = now_ns();
		size_t free_before = 0;
		(void)device_free(p, &free_before);
		for (;;) {
			struct gp_share_msg m;
			struct gp_share_peer from;
			int rc = gp_share_wait(fd, &m, &from, deadline);
			if (rc == -ETIMEDOUT || (rc < 0 && rc != -EBADMSG))
				break;
			if (rc != 0 || m.kind != GP_SHARE_GAVE || m.id != id || from.pid != o[i].pid)
				continue; /* a late offer, or anyone else's datagram */
			/* a holder's word is not taken for more than the GPU gained meanwhile, nor
			 * its time for more than the wait (a hostile one says 16 EiB in 584 years) */
			size_t free_after = 0;
			if (device_free(p, &free_after) != 0 || free_after < free_before)
				free_after = free_before;
			if (m.bytes > free_after - free_before)
				m.bytes = free_after - free_before;
			if (m.held > now_ns() - sent)
				m.held = now_ns() - sent;
			if (m.bytes) {
				(*answers)++;
				got += m.bytes;
				size_t k = strlen(who);
				char b[32];
				if (k + 64 < whocap)
					snprintf(who + k, whocap - k, "%spid %d gave %s in %.3f s", k ? ", " : "", o[i].pid,
						 gp_format_bytes(b, sizeof b, m.bytes), (double)m.held / 1e9);
			}
			break;
		}
		size_t free_now = 0;
		if (device_free(p, &free_now) == 0 && free_now >= want)
			break;
	}
	free(o);
	return got;
}

int gp_reclaim_before_oom(int dev, size_t bytes)
{
	if (!R->cfg.reclaim || !R->cfg.reclaim_wait_ms || atomic_load(&R->exiting))
		return 0;
	GP_REGISTRY_READER;
	gp_pool *p = atomic_load(&R->pools[dev]);
	struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	if (!p || !st || !gp_statpage_uuid_known(st))
		return 0;
	uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)R->cfg.reclaim_wait_ms * 1000000u;
	/* one round at a time in a process: another thread's round serves this one too */
	if (atomic_exchange(&asking, true)) {
		while (atomic_load(&asking) && now_ns() < deadline)
			usleep(1000);
		return 1; /* try again: the round may have made room */
	}
	size_t want = gp_pool_segment_for(p, bytes), free0 = 0;
	int rc = 0;
	/* the GPU has the room: the limit or the pool refused, which neighbours cannot change */
	if (device_free(p, &free0) != 0 || free0 >= want)
		goto out;
	int fd = gp_share_asker();
	if (fd < 0)
		goto out;
	unsigned char uuid[GPUPOOL_UUID_LEN];
	memcpy(uuid, st->uuid, sizeof uuid);
	unsigned asked = 0, answers = 0;
	char who[512] = "";
	size_t got = round_of_asks(fd, uuid, want, p, deadline, &asked, &answers, who, sizeof who);
	close(fd);
	uint64_t waited = now_ns() - t0;
	size_t free1 = 0;
	(void)device_free(p, &free1);
	COUNT(dev, reclaim_asks, asked);
	COUNT(dev, reclaim_answers, answers);
	COUNT(dev, reclaim_received_bytes, got);
	COUNT(dev, reclaim_wait_ns, waited);
	char b[3][32];
	if (asked)
		gp_log(GP_LOG_INFO, "reclaim: device %d needed %s (GPU free %s): %s; GPU free now %s after %.3f s", dev,
		       gp_format_bytes(b[0], sizeof b[0], want), gp_format_bytes(b[1], sizeof b[1], free0),
		       who[0] ? who : "nobody gave anything", gp_format_bytes(b[2], sizeof b[2], free1),
		       (double)waited / 1e9);
	rc = got > 0 || free1 >= want;
out:
	atomic_store(&asking, false);
	return rc;
}

void gp_reclaim_after_fork(void)
{
	atomic_store(&asking, false); /* a round of the parent's thread, not the child's */
}
