/* Reclaim (reclaim.h): the holder's side of giving idle memory (whole free segments above
 * the floor, then a framework's cache), the answer to a query, the floor of each device, and
 * the counters of both sides. The asker's side is the wait queue (waitq.c): a waiter tells
 * every process what it lacks, and the holders give from here. Counters go to the page
 * outside the pools' seq brackets, as the hooks' other monotonic counters do. */
#include "reclaim.h"

#include <errno.h>
#include <stdio.h>
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
#include "release_thread.h"
#include "statpage.h"
#include "waitq.h"

#define R (gp_registry_self())

/* A holder gives the shortfall and a little more: the driver's own use of memory (page
 * tables, a context's growth) makes "exactly enough" not quite enough. */
#define SLACK(need) (((size_t)256 << 20) + (need) / 64)
/* A framework's cache is emptied at most this often for the waiters: each empty costs the
 * program a device synchronisation and every block it then allocates again. */
#define FRAMEWORK_EVERY_NS (100 * 1000 * 1000ull)
/* What is releasable is found by a walk of the pool's segments under its lock: a query is
 * answered from the last walk, made again at most this often, whoever asks. */
#define WALK_EVERY_NS (100 * 1000 * 1000ull)

static uint64_t now_ns(void) { return gp_clock_ns(CLOCK_MONOTONIC); }

static void count(int dev, size_t off, uint64_t v)
{
	struct gpupool_device_stats *st = dev >= 0 && dev < GPUPOOL_MAX_DEVICES ? gp_registry_slot(R, dev) : NULL;
	if (st && v)
		__atomic_add_fetch((uint64_t *)(void *)((char *)st + off), v, __ATOMIC_RELAXED);
}
#define COUNT(dev, field, v) count(dev, offsetof(struct gpupool_device_stats, field), (v))

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

/* ---- the floor ------------------------------------------------------------------------- */

/* Each device's floor (reserve), decided at its first use here (the release thread's alone):
 * 0 none; refused (0) when larger than the GPU, or when the floors of the processes on the
 * GPU would together pass it. */
static uint64_t floors[GPUPOOL_MAX_DEVICES];
static bool floor_known[GPUPOOL_MAX_DEVICES];

/* What the other processes on the GPU keep as their floors: the sum of their answers to a
 * query, each within QUERY_NS, each no more than what it says it holds (a floor is memory
 * kept, and one that holds nothing keeps nothing). */
#define QUERY_NS (50 * 1000 * 1000ull)
#define MAX_PEERS 65536
static uint64_t others_floors(const unsigned char *uuid)
{
	int fd = gp_share_asker();
	if (fd < 0)
		return 0;
	int *pids = NULL;
	int n = gp_share_peers(getpid(), MAX_PEERS, &pids);
	uint64_t id = now_ns();
	struct gp_share_msg q = gp_share_msg_make(GP_SHARE_QUERY, id, uuid);
	int asked = 0;
	for (int i = 0; i < n; i++)
		asked += gp_share_send(fd, pids[i], &q) == 0;
	free(pids);
	uint64_t sum = 0, deadline = now_ns() + QUERY_NS;
	while (asked > 0) {
		struct gp_share_msg m;
		struct gp_share_peer from;
		int rc = gp_share_wait(fd, &m, &from, deadline);
		if (rc == -ETIMEDOUT || (rc < 0 && rc != -EBADMSG))
			break;
		if (rc || m.kind != GP_SHARE_OFFER || m.id != id || memcmp(m.uuid, uuid, GPUPOOL_UUID_LEN) != 0)
			continue;
		asked--;
		uint64_t f = m.floor < m.held ? m.floor : m.held;
		if (sum + f >= sum)
			sum += f;
	}
	close(fd);
	return sum;
}

uint64_t gp_reclaim_floor(int dev)
{
	if (dev < 0 || dev >= GPUPOOL_MAX_DEVICES)
		return 0;
	if (floor_known[dev])
		return floors[dev];
	struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	gp_pool *p = atomic_load(&R->pools[dev]);
	size_t free_b = 0, total = 0;
	if (!st || !p || device_mem(p, &free_b, &total) != 0)
		return 0; /* asked again next time */
	floor_known[dev] = true;
	uint64_t want = gp_config_reserve(&R->cfg, total);
	char b[3][32];
	if (want > total) {
		gp_log(GP_LOG_WARN, "reserve: %s on device %d is more than the GPU's %s; this process keeps no floor there",
		       gp_format_bytes(b[0], sizeof b[0], want), dev, gp_format_bytes(b[1], sizeof b[1], total));
		want = 0;
	} else if (want && gp_statpage_uuid_known(st)) {
		/* and no more than the others hold in all: what the GPU has in use, less what this
		 * process holds (another process's word cannot take a floor that fits) */
		uint64_t others = others_floors((const unsigned char *)st->uuid);
		uint64_t mine = __atomic_load_n(&st->reserved_bytes, __ATOMIC_RELAXED) +
				__atomic_load_n(&st->unpooled_bytes, __ATOMIC_RELAXED);
		uint64_t inuse = total > free_b ? total - free_b : 0, used = inuse > mine ? inuse - mine : 0;
		if (others > used)
			others = used;
		if (others + want > total) {
			gp_log(GP_LOG_WARN, "reserve: %s on device %d refused: the other processes on the GPU keep floors "
					    "of %s of its %s; this process keeps no floor there",
			       gp_format_bytes(b[0], sizeof b[0], want), dev, gp_format_bytes(b[1], sizeof b[1], others),
			       gp_format_bytes(b[2], sizeof b[2], total));
			want = 0;
		}
	}
	floors[dev] = want;
	gp_pool_set_floor(p, want); /* the decay and every give keep it */
	__atomic_store_n(&st->floor_bytes, want, __ATOMIC_RELAXED); /* a plain word outside the seq bracket */
	return want;
}

/* ---- the holder ------------------------------------------------------------------------ */

/* Whole free segments of p back to the driver, up to `need` bytes of them (largest first),
 * never below the floor (the pool's, gp_pool_set_floor). */
static size_t give_idle(gp_pool *p, size_t need) { return gp_pool_give(p, need); }

/* An ask still worth a framework's cache once the interpreter's lock is held: the waiter is
 * still in the line (no DONE, its end not passed), and the GPU is still short of what it
 * needs. On the framework's thread: it finds the pool again. */
static bool ask_still(const struct gp_framework_still *s)
{
	if (!gp_waitq_waiting(s->device, s->pid, s->ticket))
		return false;
	GP_REGISTRY_READER;
	gp_pool *p = s->device >= 0 && s->device < GPUPOOL_MAX_DEVICES ? atomic_load(&R->pools[s->device]) : NULL;
	size_t free_now = 0;
	return p && device_free(p, &free_now) == 0 && free_now < s->bytes;
}

static uint64_t framework_last_ns; /* the release thread's only */
/* What frameworks gave on their thread, not yet told to a waiter (bytes, per device). */
static _Atomic uint64_t credit[GPUPOOL_MAX_DEVICES];

uint64_t gp_reclaim_take_credit(int dev)
{
	return dev >= 0 && dev < GPUPOOL_MAX_DEVICES ? atomic_exchange(&credit[dev], 0) : 0;
}

/* A framework's answer, on its thread: counted and said; what it freed waits for a fence (its
 * cudaFree) and goes to the driver, not the cache, from the release thread (a POKE), which
 * then wakes the waiters. */
static void framework_done(const struct gp_framework_still *s, int n, const char *what_in, const uint64_t *idle,
			   unsigned nidle)
{
	(void)idle;
	(void)nidle;
	char what[200];
	snprintf(what, sizeof what, "%s", what_in);
	size_t wl = strlen(what);
	while (wl && (what[wl - 1] == ' ' || what[wl - 1] == ';'))
		what[--wl] = '\0'; /* the script's "torch: ...; " list, its last separator off */
	GP_REGISTRY_READER;
	/* what the framework handed the driver itself while its caches were emptied (PyTorch's
	 * expandable segments: its pages released through gpupool's cuMemRelease): the drop of
	 * this process's own unpooled memory, not the GPU's free memory, which others' frees and
	 * takes move meanwhile; what it freed into the pool goes with the POKE below, and is
	 * counted there */
	const struct gpupool_device_stats *st =
		s->device >= 0 && s->device < GPUPOOL_MAX_DEVICES ? gp_registry_slot(R, s->device) : NULL;
	uint64_t unpooled = st ? __atomic_load_n(&st->unpooled_bytes, __ATOMIC_RELAXED) : 0;
	if (n > 0 && st && unpooled < s->unpooled_before) {
		uint64_t gain = s->unpooled_before - unpooled;
		COUNT(s->device, reclaims_served, 1);
		COUNT(s->device, reclaim_given_bytes, gain);
		atomic_fetch_add(&credit[s->device], gain);
	}
	if (n > 0)
		COUNT(s->device, framework_empties, (uint64_t)n);
	if (n > 0 || what[0])
		gp_log(GP_LOG_INFO, "reclaim: device %d: %s for pid %d%s%s", s->device,
		       n > 0 ? "framework caches emptied" : "no framework cache emptied", s->pid, what[0] ? "; " : "",
		       what);
	if (n > 0)
		gp_waitq_freed(s->device);
}

size_t gp_reclaim_give(int dev, size_t short_bytes, int pid, unsigned uid, uint64_t ticket)
{
	gp_pool *p = atomic_load(&R->pools[dev]);
	const struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	if (!p || !st)
		return 0;
	uint64_t t0 = now_ns(), floor = gp_reclaim_floor(dev);
	size_t free0 = 0, freed = 0;
	(void)device_free(p, &free0);
	size_t need = short_bytes ? short_bytes + SLACK(short_bytes) : 0;
	/* while anyone waits, this process's frees go back at once: every whole free segment
	 * above the floor (a fence first, for those its cudaFree's left pending) */
	size_t want = short_bytes ? need : SIZE_MAX / 2;
	size_t given = give_idle(p, want);
	if (given < want && gp_pool_has_pending(p)) {
		(void)gp_pool_fence(p); /* blocks its cudaFree's left pending, then them too */
		given += give_idle(p, want - given);
	}
	bool posted = false;
	uint64_t held = __atomic_load_n(&st->reserved_bytes, __ATOMIC_RELAXED) +
			__atomic_load_n(&st->unpooled_bytes, __ATOMIC_RELAXED);
	/* not enough: the frameworks' caches, emptied on their own thread (this one goes on
	 * answering); their memory comes back through a POKE */
	if (short_bytes && given < need && gp_framework_present() && !atomic_load(&R->exiting) &&
	    (!floor || held > floor) && (!framework_last_ns || t0 - framework_last_ns >= FRAMEWORK_EVERY_NS)) {
		struct gp_framework_still sa = {ask_still, dev, pid, ticket, free0 + short_bytes,
						__atomic_load_n(&st->unpooled_bytes, __ATOMIC_RELAXED)};
		if (gp_framework_post(true, &sa, framework_done) == 0) {
			framework_last_ns = t0;
			posted = true;
		}
	}
	(void)device_free(p, &freed);
	/* only what the pool gave counts here: a framework's memory outside the pool (PyTorch's
	 * expandable segments) goes to the driver on the framework's thread, which counts it
	 * (framework_done); the GPU's gain meanwhile is also that thread's, or others' */
	if (given) {
		COUNT(dev, reclaims_served, 1);
		COUNT(dev, reclaim_given_bytes, given);
	} else if (short_bytes && !posted) {
		COUNT(dev, reclaims_refused, 1);
	}
	if (!posted && !given && !short_bytes)
		return 0; /* a free while others wait, with nothing whole to give: nothing to say */
	char b[2][32];
	if (given || posted)
		gp_log(GP_LOG_INFO, "reclaim: gave %s on device %d to pid %d (uid %u) in %.3f s%s (GPU free %s)",
		       gp_format_bytes(b[0], sizeof b[0], given), dev, pid, uid, (double)(now_ns() - t0) / 1e9,
		       posted ? ", emptying framework caches" : "", gp_format_bytes(b[1], sizeof b[1], freed));
	return given;
}

/* What could be given on `dev` now, from the last walk of the pool (made again at most every
 * WALK_EVERY_NS, whoever asks: a peer's queries cost at most ten walks a second), and what
 * the framework above last said it holds unused. */
static uint64_t walked_ns[GPUPOOL_MAX_DEVICES];  /* the release thread's only */
static size_t walked_bytes[GPUPOOL_MAX_DEVICES];

void gp_reclaim_holding(int dev, bool measure, uint64_t *idle, uint64_t *held, uint32_t *flags)
{
	gp_pool *p = atomic_load(&R->pools[dev]);
	const struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	*idle = *held = 0;
	*flags = 0;
	if (!p || !st)
		return;
	uint64_t now = now_ns();
	if (!walked_ns[dev] || now - walked_ns[dev] >= WALK_EVERY_NS) {
		size_t releasable = 0;
		(void)gp_pool_decay(p, now, 0, 0, &releasable); /* counts, gives nothing */
		walked_bytes[dev] = releasable;
		walked_ns[dev] = now;
	}
	uint64_t floor = gp_reclaim_floor(dev);
	*held = __atomic_load_n(&st->reserved_bytes, __ATOMIC_RELAXED) +
		__atomic_load_n(&st->unpooled_bytes, __ATOMIC_RELAXED);
	uint64_t above = *held > floor ? *held - floor : 0;
	uint64_t seen = 0, fw = gp_framework_idle(dev, &seen);
	/* the framework's figure, measured on its own thread (this answer does not wait for it)
	 * when a query finds it a second old */
	if (measure && gp_framework_present() && (!seen || now - seen >= 1000000000ull))
		(void)gp_framework_post(false, NULL, NULL);
	*idle = walked_bytes[dev] + fw;
	if (*idle > above)
		*idle = above;
	if (gp_framework_present())
		*flags |= GP_SHARE_FRAMEWORK;
}

void gp_reclaim_answer(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	GP_REGISTRY_READER;
	if (atomic_load(&R->exiting) || m->kind != GP_SHARE_QUERY)
		return;
	struct gp_share_msg a = gp_share_msg_make(GP_SHARE_OFFER, m->id, m->uuid);
	int dev = -1;
	for (int d = 0; d < R->ndev && d < GPUPOOL_MAX_DEVICES && R->cfg.reclaim; d++) {
		const struct gpupool_device_stats *st = gp_registry_slot(R, d);
		if (atomic_load(&R->pools[d]) && st && gp_statpage_uuid_known(st) &&
		    memcmp(st->uuid, m->uuid, GPUPOOL_UUID_LEN) == 0)
			dev = d;
	}
	if (dev >= 0) {
		gp_reclaim_holding(dev, true, &a.bytes, &a.held, &a.flags);
		a.floor = floors[dev];
	}
	(void)gp_share_reply(fd, from, &a); /* an asker gone meanwhile: nothing to do */
}

/* ---- the waiter's counters ---------------------------------------------------------------- */

void gp_reclaim_count_wait(int dev, unsigned asked, unsigned answers, uint64_t received, uint64_t waited,
			   bool served, bool waited_in_line)
{
	COUNT(dev, reclaim_asks, asked);
	COUNT(dev, reclaim_answers, answers);
	COUNT(dev, reclaim_received_bytes, received);
	COUNT(dev, reclaim_wait_ns, waited);
	/* a framework's first failure waits only for what is given at once: no wait in line */
	if (!waited_in_line)
		return;
	COUNT(dev, waits, 1);
	COUNT(dev, wait_ns, waited);
	if (served)
		COUNT(dev, waits_served, 1);
	else
		COUNT(dev, waits_timed_out, 1);
}

/* ---- memory gpupool does not pool --------------------------------------------------------- */

int gp_reclaim_before_oom(int dev, size_t bytes)
{
	struct gp_wait w;
	if (!gp_waitq_begin(&w, dev, bytes, false))
		return w.room; /* freed since the call failed: once more */
	bool turn = gp_waitq_next(&w);
	gp_waitq_end(&w, turn);
	return turn;
}

void gp_reclaim_after_fork(void)
{
	framework_last_ns = 0;
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		atomic_store(&credit[d], 0);
		floor_known[d] = false;
		floors[d] = 0;
		walked_ns[d] = 0;
	}
}
