/* The wait queue of each GPU (waitq.h): this process's copy of each GPU's line (its own
 * waiters and the others' from their messages) under one leaf lock, the gate every budget
 * take passes, the waiter's side (tell, wait to be woken, give up, end) and the holder's (a
 * WAIT: answer, keep, serve; a DONE; a POKE from this process's own frees). Depends on the
 * registry, the pool, the budget, share.h, reclaim.h and framework.h; never on the call
 * bodies. */
#include "waitq.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "format.h"
#include "framework.h"
#include "log.h"
#include "proc.h"
#include "rank.h"
#include "reclaim.h"
#include "registry.h"
#include "registry_internal.h"
#include "statpage.h"
#include "stats.h"

#define R (gp_registry_self())

#define MAX_ENTRIES 256          /* the line's entries this process keeps, every GPU */
#define MAX_PER_PID 32           /* a process's waiting threads, as others count them */
#define MAX_PEERS 65536          /* processes told of a wait: one name per live pid */
#define MS (1000 * 1000ull)
#define TELL_EVERY_NS (1000 * MS) /* a waiter tells again (processes started since, lost datagrams) */
#define SLICE_NS (250 * MS)       /* a waiter's look round when nothing wakes it */
#define HEARD_NS (100 * MS)       /* nobody on the GPU answered with memory held: nothing to wait for */
#define BUSY_NS (1000 * MS)       /* ... unless a peer's queue was full when told: it may hold memory
				   * and answer once it catches up (told again each slice), this long */
#define QUICK_NS (200 * MS)       /* a quick wait: what others give at once */
#define HEAD_TAKE_NS (1000 * MS)  /* a head that leaves what it waits for unused loses its place
				   * (more than a waiter's look round and its telling again) */
#define CLAIM_MAX_NS (60000 * MS) /* no wait is longer (reclaim_wait_ms's largest) */
#define LATE_NS (1500 * MS)       /* a waiter tells every process at once, and again each second:
				   * a wait first heard of later takes its place no earlier than this
				   * before (a claim with an old ticket cannot go ahead of those in line) */
#define SEEN_NS (3000 * MS)       /* another's wait holds its place while its status said it waits
				   * this recently */
#define ASK_NS (500 * MS)         /* its status is asked again at a telling this long after */
#define HOLDER_NS (500 * MS)      /* a holder's word that its status has not backed keeps a waiter
				   * waiting no longer */
#define FRESH_NS (500 * MS)       /* a wait just heard of holds its place while its status is asked
				   * (the answer may be slow to come), this long */
#define BLOCKED_NS (3000 * MS)    /* a waiter the GPU has the room for, held back by earlier ones
				   * while nobody holds anything, waits no longer: they take the memory
				   * or lose their place well before (HEAD_TAKE_NS, LATE_NS) */
#define TICK_MS 50                /* the release thread's round while a line is not empty */


enum { END_SERVED, END_BOUND, END_NOBODY, END_HOLD_WAIT, END_QUICK, END_ERROR };

struct entry {
	int pid;
	unsigned uid;
	int dev;
	bool self; /* a waiting thread of this process */
	bool lost; /* left the memory it waited for unused as the head: never in line again (its
		    * ticket stays here, told again or not, until its end) */
	uint64_t ticket, bytes, deadline;
	uint64_t place;       /* its place in line: the ticket, or no earlier than LATE_NS before
			       * this process first heard of it */
	uint64_t seen;        /* another process's: when its status last said it waits (0: not yet) */
	uint64_t heard;       /* another process's: when this process first heard of it */
	uint64_t avail_since; /* the head: since when the GPU has had what it waits for */
	bool woken;           /* woken by this process: it is taking what it got (its DONE is on the
			       * way), and nothing more is given for it until it tells again */
	struct gp_share_peer to; /* where its FREED goes (another process's) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry tab[MAX_ENTRIES];
static int ntab;
static atomic_int lines; /* ntab, read without the lock */
atomic_uint gp_waitq_others[GPUPOOL_MAX_DEVICES];
static atomic_uint in_line[GPUPOOL_MAX_DEVICES]; /* every entry, this process's too: the gate */
static atomic_bool poked[GPUPOOL_MAX_DEVICES];
static _Thread_local uint64_t my_ticket; /* the calling thread's wait, 0 none */

static uint64_t now_ns(void) { return gp_clock_ns(CLOCK_MONOTONIC); }

static void lock_take(void)
{
	gp_rank_take(GP_RANK_WAITQ);
	pthread_mutex_lock(&lock);
}

static void lock_give(void)
{
	pthread_mutex_unlock(&lock);
	gp_rank_give(GP_RANK_WAITQ);
}

static void add_locked(const struct entry *e)
{
	tab[ntab++] = *e;
	atomic_store_explicit(&lines, ntab, memory_order_relaxed);
	atomic_fetch_add(&in_line[e->dev], 1);
	if (!e->self)
		atomic_fetch_add(&gp_waitq_others[e->dev], 1);
}

static void remove_locked(int i)
{
	atomic_fetch_sub(&in_line[tab[i].dev], 1);
	if (!tab[i].self)
		atomic_fetch_sub(&gp_waitq_others[tab[i].dev], 1);
	tab[i] = tab[--ntab];
	atomic_store_explicit(&lines, ntab, memory_order_relaxed);
}

/* The entry holds a place in the line (the gate, the order, the head), its end not passed:
 * this process's own waiters; another's while its status says it waits (or, just heard of,
 * for FRESH_NS while its status is asked) and it has not lost its place. Entries that hold
 * none are still served (given idle memory, woken), last. */
static bool in_line_now(const struct entry *e, uint64_t now)
{
	return e->deadline > now &&
	       (e->self || (!e->lost && (e->seen ? now - e->seen <= SEEN_NS : now - e->heard <= FRESH_NS)));
}

/* What the waiters in line on `dev` before `place` wait for (bytes). */
static uint64_t earlier_need_locked(int dev, uint64_t place, uint64_t now)
{
	uint64_t sum = 0;
	for (int i = 0; i < ntab; i++)
		if (tab[i].dev == dev && tab[i].place < place && in_line_now(&tab[i], now) && sum + tab[i].bytes >= sum)
			sum += tab[i].bytes;
	return sum;
}

static uint64_t earlier_need(int dev, uint64_t place)
{
	uint64_t now = now_ns();
	lock_take();
	uint64_t v = earlier_need_locked(dev, place, now);
	lock_give();
	return v;
}

/* a is a better entry to make room with than b: one still in line before one that lost its
 * place (told again, that one would come back), then the later. */
static bool rather(const struct entry *a, const struct entry *b)
{
	return a->lost != b->lost ? !a->lost : a->place > b->place;
}

/* The line is full: the entry whose place a newcomer of process pid, user uid takes, for
 * fairness between users, then between the processes of one user: the latest of the process
 * with the most entries of the user with the most, when that user (that process, of the
 * newcomer's own user) has at least two more than the newcomer's. A waiter of this process
 * (self) always takes one. -1: none. */
static int room_locked(int pid, unsigned uid, bool self)
{
	int best = -1, bu = 0, bp = 0, mu = 0, mp = 0;
	for (int i = 0; i < ntab; i++) {
		if (tab[i].self)
			continue;
		int nu = 0, np = 0;
		for (int k = 0; k < ntab; k++) {
			nu += !tab[k].self && tab[k].uid == tab[i].uid;
			np += !tab[k].self && tab[k].pid == tab[i].pid;
		}
		mu += tab[i].uid == uid;
		mp += tab[i].pid == pid;
		if (best < 0 || nu > bu || (nu == bu && (np > bp || (np == bp && rather(&tab[i], &tab[best]))))) {
			best = i;
			bu = nu;
			bp = np;
		}
	}
	if (best < 0 || self)
		return best;
	if (tab[best].uid != uid)
		return bu >= mu + 2 ? best : -1;
	return tab[best].pid != pid && bp >= mp + 2 ? best : -1;
}

/* Process pid has a statistics page in this process's page directory, its user's and
 * private to it, as gpupool makes them: gpupool-stat lists it (from its status, for a reader
 * that may not open the page). */
static bool listed(int pid, unsigned uid)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s%d", gp_statpage_dir(), GP_STATPAGE_NAME, pid);
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid && !(st.st_mode & 077);
}

/* The device's free memory as the driver says (the registry's backend: no reset gate, no
 * pool lock taken; callable with a pool's lock held, as a segment's own calls are). */
static int device_free(int dev, size_t *free_bytes)
{
	size_t total = 0;
	const struct gp_backend *be = gp_registry_backend();
	return be->mem_info ? be->mem_info(be->ctx, dev, free_bytes, &total) : -ENOSYS;
}

/* The gate (budget.h): device memory may be taken now unless an earlier waiter needs it. */
static int gate(int dev, size_t bytes)
{
	if (dev < 0 || dev >= GPUPOOL_MAX_DEVICES || !atomic_load_explicit(&in_line[dev], memory_order_relaxed))
		return 0;
	uint64_t earlier = earlier_need(dev, my_ticket ? my_ticket : UINT64_MAX);
	size_t free_b = 0;
	if (!earlier || device_free(dev, &free_b) != 0)
		return 0;
	return free_b >= bytes && free_b - bytes >= earlier ? 0 : -EBUSY;
}

void gp_waitq_arm(void)
{
	static const struct gp_budget_gate g = {gate};
	gp_budget_set_gate(&g);
}

/* The device of this process whose GPU is `uuid`, with a pool; -1 if none. Inside the
 * caller's GP_REGISTRY_READER. */
static int device_of(const unsigned char *uuid)
{
	for (int d = 0; d < R->ndev && d < GPUPOOL_MAX_DEVICES; d++) {
		struct gpupool_device_stats *st = gp_registry_slot(R, d);
		if (atomic_load(&R->pools[d]) && st && gp_statpage_uuid_known(st) &&
		    memcmp(st->uuid, uuid, GPUPOOL_UUID_LEN) == 0)
			return d;
	}
	return -1;
}

/* ---- the waiter -------------------------------------------------------------------------- */

/* The page's waiting_bytes (what this process's waiters wait for now) and wait_started_ns
 * (the oldest's start), written as the slot's one writer (under the pool's lock, in its seq
 * bracket: gp_pool_slot_write). */
struct own_note {
	uint64_t bytes, since_ns;
};

static void write_own(struct gpupool_device_stats *st, void *arg)
{
	const struct own_note *n = arg;
	GP_GAUGE_SET(st, waiting_bytes, n->bytes);
	st->wait_started_ns = n->since_ns;
}

static void publish_own(int dev)
{
	GP_REGISTRY_READER;
	gp_pool *p = atomic_load(&R->pools[dev]);
	if (!p)
		return;
	struct own_note n;
	n.bytes = gp_waitq_own(dev, &n.since_ns);
	gp_pool_slot_write(p, write_own, &n);
}

/* Tells every process of the machine (each keeps the line of the GPUs it uses): the first
 * time and about once a second after, for processes started since and datagrams lost. */
static void tell(struct gp_wait *w)
{
	int *pids = NULL;
	int n = gp_share_peers(getpid(), MAX_PEERS, &pids);
	struct gp_share_msg m = gp_share_msg_make(GP_SHARE_WAIT, w->ticket, w->uuid);
	m.bytes = w->need;
	m.held = w->deadline;
	w->busy = 0;
	for (int i = 0; i < n; i++) {
		int rc = gp_share_send(w->fd, pids[i], &m);
		w->busy += rc == -EAGAIN;
		if (rc != 0)
			continue;
		bool known = false; /* told is sorted: pids come in pid order */
		for (int k = 0; k < w->ntold && !known; k++)
			known = w->told[k] == pids[i];
		if (!known) {
			int *more = realloc(w->told, sizeof *more * (size_t)(w->ntold + 1));
			if (more) {
				w->told = more;
				w->told[w->ntold++] = pids[i];
			}
		}
	}
	free(pids);
	w->last_told = now_ns();
}

bool gp_waitq_begin(struct gp_wait *w, int dev, size_t bytes, bool quick)
{
	memset(w, 0, sizeof *w);
	w->fd = -1;
	w->dev = dev;
	if (!R->cfg.reclaim || !R->cfg.reclaim_wait_ms || atomic_load(&R->exiting) || dev < 0 ||
	    dev >= GPUPOOL_MAX_DEVICES || my_ticket)
		return false;
	GP_REGISTRY_READER;
	gp_pool *p = atomic_load(&R->pools[dev]);
	struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	if (!p || !st || !gp_statpage_uuid_known(st))
		return false;
	memcpy(w->uuid, st->uuid, sizeof w->uuid);
	w->need = gp_pool_segment_for(p, bytes);
	if (w->need < bytes)
		w->need = bytes;
	uint64_t now = now_ns();
	size_t total = 0;
	const struct gp_backend *be = gp_registry_backend();
	if (!be->mem_info || be->mem_info(be->ctx, dev, &w->free0, &total) != 0 || w->need > total)
		return false; /* more than the whole GPU: no wait can serve it */
	/* the GPU has the room: the limit, the group or the pool refused, which nobody else can
	 * change, unless others are waiting on the GPU: then the room came back since the
	 * allocation failed (another waiter's gift crossed it), and it is tried again at once, in
	 * line */
	uint64_t earlier = earlier_need(dev, now);
	bool room = w->free0 >= w->need && w->free0 - w->need >= earlier;
	bool capped = room && gp_budget_refused_last();
	if (room && (capped || !atomic_load_explicit(&in_line[dev], memory_order_relaxed))) {
		w->room = !capped;
		return false;
	}
	w->again = room;
	w->fd = gp_share_asker();
	if (w->fd < 0)
		return false;
	uint64_t bound = (uint64_t)R->cfg.reclaim_wait_ms * MS;
	w->quick = quick;
	if (quick && bound > QUICK_NS)
		bound = QUICK_NS;
	w->t0 = now;
	w->deadline = now + bound;
	w->last_free = w->free0;
	lock_take();
	/* one ticket per waiting thread: two threads of a process never share one */
	w->ticket = now;
	for (int i = 0; i < ntab; i++)
		if (tab[i].self && tab[i].ticket >= w->ticket)
			w->ticket = tab[i].ticket + 1;
	int out = ntab < MAX_ENTRIES ? -1 : room_locked(getpid(), (unsigned)getuid(), true);
	if (out >= 0)
		remove_locked(out); /* another's: this process's own waiters always get in */
	bool kept = ntab < MAX_ENTRIES;
	if (kept) {
		struct entry e = {.pid = getpid(), .uid = (unsigned)getuid(), .dev = dev, .self = true,
				  .ticket = w->ticket, .place = w->ticket, .bytes = w->need, .deadline = w->deadline};
		add_locked(&e);
	}
	lock_give();
	if (!kept) {
		close(w->fd);
		w->fd = -1;
		return false;
	}
	my_ticket = w->ticket;
	publish_own(dev);
	tell(w);
	return true;
}

/* It is this waiter's turn: the GPU has what it needs and what every earlier one needs. */
static bool my_turn(struct gp_wait *w)
{
	size_t free_b = 0;
	if (device_free(w->dev, &free_b) != 0)
		return false;
	uint64_t earlier = earlier_need(w->dev, w->ticket);
	return free_b >= w->need && free_b - w->need >= earlier;
}

static int holder_of(const struct gp_wait *w, int pid)
{
	for (int k = 0; k < w->nholders; k++)
		if (w->holders[k].pid == pid)
			return k;
	return -1;
}

/* A holder's answer. One that says it holds memory is asked for its status (the answer comes
 * to this waiter's socket, backed), which a peer that only says so does not give. */
static void heard(struct gp_wait *w, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	int k = holder_of(w, from->pid);
	if (k < 0) {
		if (w->nholders == (int)(sizeof w->holders / sizeof w->holders[0]))
			return; /* the first 64 that answer are enough to judge by */
		k = w->nholders++;
		w->heard++;
		w->holders[k].pid = from->pid;
		w->holders[k].since = now_ns();
		w->holders[k].backed = false;
		if (m->held) {
			struct gp_share_msg q = gp_share_msg_make(GP_SHARE_STATUS, w->ticket, w->uuid);
			(void)gp_share_send(w->fd, from->pid, &q);
		}
	}
	w->holders[k].held = m->held;
	if (m->flags & GP_SHARE_WAITING)
		w->waiting_holders++;
}

/* A holder's status (from its own pid, the kernel says): it holds memory on the GPU. */
static void backed(struct gp_wait *w, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	int k = holder_of(w, from->pid);
	if (k >= 0 && m->status.count && (m->status.reserved || m->status.unpooled))
		w->holders[k].backed = true;
}

/* A holder's word keeps this waiter waiting: it said it holds memory on the GPU, and its
 * status backed it (or it gave), or it said so less than HOLDER_NS ago. */
static bool holds(const struct gp_wait *w, int k, uint64_t now)
{
	return w->holders[k].held && (w->holders[k].backed || now - w->holders[k].since < HOLDER_NS);
}

static bool anyone_holds(const struct gp_wait *w, uint64_t now)
{
	for (int k = 0; k < w->nholders; k++)
		if (holds(w, k, now))
			return true;
	return false;
}

/* A holder says it gave memory back: credited no more than the GPU gained since the last
 * look (a hostile one says 16 EiB). */
static void credit(struct gp_wait *w, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	size_t free_now = 0;
	if (device_free(w->dev, &free_now) != 0)
		return;
	uint64_t gain = free_now > w->last_free ? free_now - w->last_free : 0;
	w->last_free = free_now;
	uint64_t c = m->bytes < gain ? m->bytes : gain;
	if (!c)
		return;
	int h = holder_of(w, from->pid);
	if (h >= 0)
		w->holders[h].backed = true; /* it gave: it held */
	w->received += c;
	w->gifts++;
	size_t k = strlen(w->who);
	char b[32];
	if (k + 64 < sizeof w->who)
		snprintf(w->who + k, sizeof w->who - k, "%spid %d gave %s in %.3f s", k ? ", " : "", (int)from->pid,
			 gp_format_bytes(b, sizeof b, c), (double)(now_ns() - w->t0) / 1e9);
}

/* Hold and wait: this waiter holds memory on the GPU of its own, a waiter before it has been
 * stuck for HOLD_WAIT_NS with the GPU short of what it needs, and every process that said it
 * holds memory there is waiting in the line too: none of them can go on until one lets go.
 * The later tickets give up (what they hold, the program frees on its error path); the first
 * goes on. A holder that is not waiting (still working, or outside gpupool) may free what the
 * first needs: then it is waited for, up to the bound. */
#define HOLD_WAIT_NS (200 * MS)
static bool hold_and_wait(struct gp_wait *w, uint64_t now)
{
	if (w->quick)
		return false;
	uint64_t head = UINT64_MAX, head_bytes = 0;
	bool all_wait = true;
	lock_take();
	for (int i = 0; i < ntab; i++)
		if (tab[i].dev == w->dev && tab[i].place < head && in_line_now(&tab[i], now)) {
			head = tab[i].place;
			head_bytes = tab[i].bytes;
		}
	for (int k = 0; k < w->nholders && all_wait; k++) {
		if (!holds(w, k, now))
			continue;
		bool waits = false;
		for (int i = 0; i < ntab && !waits; i++)
			waits = tab[i].dev == w->dev && tab[i].pid == w->holders[k].pid && tab[i].deadline > now &&
				!tab[i].lost;
		all_wait = waits;
	}
	lock_give();
	if (head >= w->ticket || now < head + HOLD_WAIT_NS || !all_wait)
		return false; /* this waiter is first, the first has not waited long, or someone works */
	GP_REGISTRY_READER;
	const struct gpupool_device_stats *st = gp_registry_slot(R, w->dev);
	uint64_t mine = st ? __atomic_load_n(&st->allocated_bytes, __ATOMIC_RELAXED) +
				     __atomic_load_n(&st->unpooled_bytes, __ATOMIC_RELAXED)
			   : 0;
	size_t free_b = 0;
	return mine && device_free(w->dev, &free_b) == 0 && free_b < head_bytes;
}

bool gp_waitq_next(struct gp_wait *w)
{
	/* the last wake was not enough (the allocation failed again): the holders hear it at once,
	 * and give for this waiter again */
	if (w->tried)
		tell(w);
	w->tried = false;
	if (w->again && w->nagain++ < 3) {
		w->again = false;
		return w->tried = true;
	}
	uint64_t look = now_ns() + SLICE_NS;
	for (;;) {
		uint64_t now = now_ns();
		if (now >= w->deadline) {
			w->why = w->quick ? END_QUICK : END_BOUND;
			return false;
		}
		/* a look round every slice, whatever came meanwhile (datagrams cannot put it off) */
		if (now >= look) {
			look = now + SLICE_NS;
			size_t free_b = 0;
			/* nobody on the GPU holds anything that could come back; unless the GPU has
			 * what this waiter needs and only earlier waiters hold it back, which take it
			 * or lose their place */
			if (!anyone_holds(w, now) && now - w->t0 >= HEARD_NS && (!w->busy || now - w->t0 >= BUSY_NS) &&
			    (device_free(w->dev, &free_b) != 0 || free_b < w->need || now - w->t0 >= BLOCKED_NS)) {
				w->why = END_NOBODY;
				return false;
			}
			if (hold_and_wait(w, now)) {
				w->why = END_HOLD_WAIT;
				return false;
			}
			if (my_turn(w))
				return w->tried = true; /* freed outside gpupool (a process without it) */
		}
		/* about once a second: processes started since, lost datagrams, and the holders
		 * ask this process's status again (SEEN_NS) */
		if (now - w->last_told >= (w->busy ? SLICE_NS : TELL_EVERY_NS))
			tell(w);
		struct gp_share_msg m;
		struct gp_share_peer from;
		int rc = gp_share_wait(w->fd, &m, &from, look < w->deadline ? look : w->deadline);
		if (rc == 0) {
			if (m.id != w->ticket || memcmp(m.uuid, w->uuid, GPUPOOL_UUID_LEN) != 0)
				continue; /* another wait's, or junk */
			if (m.kind == GP_SHARE_HEARD) {
				heard(w, &m, &from);
			} else if (m.kind == GP_SHARE_STATUS_ANSWER) {
				backed(w, &m, &from);
			} else if (m.kind == GP_SHARE_FREED) {
				credit(w, &m, &from);
				if (my_turn(w))
					return w->tried = true;
			}
			continue;
		}
		if (rc != -EBADMSG && rc != -ETIMEDOUT) {
			w->why = END_ERROR;
			return false;
		}
	}
}

void gp_waitq_end(struct gp_wait *w, bool served)
{
	if (w->fd < 0)
		return;
	struct gp_share_msg m = gp_share_msg_make(GP_SHARE_DONE, w->ticket, w->uuid);
	for (int i = 0; i < w->ntold; i++)
		(void)gp_share_send(w->fd, w->told[i], &m);
	lock_take();
	for (int i = 0; i < ntab; i++)
		if (tab[i].self && tab[i].ticket == w->ticket && tab[i].dev == w->dev) {
			remove_locked(i);
			break;
		}
	lock_give();
	my_ticket = 0;
	publish_own(w->dev);
	close(w->fd);
	w->fd = -1;
	free(w->told);
	w->told = NULL;
	if (served)
		w->why = END_SERVED;
	uint64_t waited = now_ns() - w->t0;
	size_t free1 = 0;
	(void)device_free(w->dev, &free1);
	gp_reclaim_count_wait(w->dev, w->heard, w->gifts, w->received, waited, served, w->why != END_QUICK);
	static const char *const ends[] = {
		[END_SERVED] = "",
		[END_BOUND] = "; gave up after reclaim_wait_ms",
		[END_NOBODY] = "; nobody on the GPU holds memory that could come back",
		[END_HOLD_WAIT] = "; gave up: it holds memory of its own behind an earlier waiter, and every "
				  "holder on the GPU waits (hold and wait)",
		[END_QUICK] = "",
		[END_ERROR] = "; its socket failed",
	};
	char b[3][32];
	gp_log(GP_LOG_INFO, "reclaim: device %d needed %s (GPU free %s): %s; GPU free now %s after %.3f s%s", w->dev,
	       gp_format_bytes(b[0], sizeof b[0], w->need), gp_format_bytes(b[1], sizeof b[1], w->free0),
	       w->who[0] ? w->who : "nobody gave anything", gp_format_bytes(b[2], sizeof b[2], free1),
	       (double)waited / 1e9, ends[w->why]);
}

/* ---- the holder (the release thread) ---------------------------------------------------- */

/* An entry of the line being woken: where it is in tab, and its order (those in line first,
 * by place; tab's order between equals). */
struct turn {
	bool in_line;
	uint64_t place;
	int at;
};

static int turn_cmp(const void *pa, const void *pb)
{
	const struct turn *a = pa, *b = pb;
	if (a->in_line != b->in_line)
		return a->in_line ? -1 : 1;
	if (a->place != b->place)
		return a->place < b->place ? -1 : 1;
	return (a->at > b->at) - (a->at < b->at);
}

/* Wakes the waiters of other processes on `dev`, first in line first: the first always, then
 * the next while what they wait for together fits in what the GPU has free; those that hold
 * no place in line (not yet) after them, and none woken already: a message costs a datagram
 * or two, however long the line, and a sort of it (a full line is told about 256 times a
 * second: nothing here goes over the line once per entry). */
static void wake(int fd, int dev, size_t given)
{
	size_t free_b = 0;
	(void)device_free(dev, &free_b);
	const struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	if (!st)
		return;
	struct turn ord[MAX_ENTRIES];
	struct entry line[MAX_ENTRIES];
	int n = 0;
	uint64_t now = now_ns();
	lock_take();
	for (int i = 0; i < ntab; i++)
		if (tab[i].dev == dev && tab[i].deadline > now && !tab[i].lost)
			ord[n++] = (struct turn){in_line_now(&tab[i], now), tab[i].place, i};
	qsort(ord, (size_t)n, sizeof *ord, turn_cmp);
	/* how far it goes: the first always, then while what they wait for fits */
	int end = 0;
	uint64_t sum = 0;
	while (end < n && (end == 0 || sum + tab[ord[end].at].bytes <= free_b))
		sum += tab[ord[end++].at].bytes;
	for (int i = 0; i < end; i++)
		line[i] = tab[ord[i].at];
	lock_give();
	/* what this process gave, credited up to each one's need, the later first and the rest
	 * to the first: a claim ahead of a waiter is credited no more than it claims */
	uint64_t share[MAX_ENTRIES], left = given;
	int first = -1;
	for (int i = end - 1; i >= 0; i--) {
		share[i] = 0;
		if (line[i].self || line[i].woken)
			continue; /* this process's own waiters find their turn themselves; one woken
				   * is taking what it got (told again, it is woken again) */
		share[i] = left < line[i].bytes ? left : line[i].bytes;
		left -= share[i];
		first = i;
	}
	if (first >= 0)
		share[first] += left;
	sum = 0;
	bool woke[MAX_ENTRIES];
	for (int i = 0; i < end; i++) {
		sum += line[i].bytes;
		woke[i] = false;
		if (line[i].self || line[i].woken)
			continue;
		struct gp_share_msg m = gp_share_msg_make(GP_SHARE_FREED, line[i].ticket, (const unsigned char *)st->uuid);
		m.bytes = share[i];
		(void)gp_share_reply(fd, &line[i].to, &m);
		woke[i] = sum <= free_b; /* else woken to look, not yet with enough: given for again */
	}
	/* marked where each was, unless the line changed meanwhile (then looked for) */
	lock_take();
	for (int i = 0; i < end; i++) {
		if (!woke[i])
			continue;
		int at = ord[i].at;
		if (at >= ntab || tab[at].self || tab[at].pid != line[i].pid || tab[at].ticket != line[i].ticket)
			for (at = 0; at < ntab; at++)
				if (!tab[at].self && tab[at].pid == line[i].pid && tab[at].ticket == line[i].ticket)
					break;
		if (at < ntab)
			tab[at].woken = true;
	}
	lock_give();
}

/* Gives what the other processes' waiters on `dev` lack, from what this process holds
 * idle, and wakes them. `freed`: this process just freed memory there (a POKE). */
static void serve(int fd, int dev, bool freed)
{
	uint64_t want = 0, now = now_ns();
	int pid = 0;
	unsigned uid = 0;
	uint64_t first = UINT64_MAX;
	lock_take();
	for (int i = 0; i < ntab; i++)
		if (tab[i].dev == dev && !tab[i].self && tab[i].deadline > now && !tab[i].woken && !tab[i].lost) {
			if (want + tab[i].bytes >= want)
				want += tab[i].bytes;
			if (tab[i].ticket < first) {
				first = tab[i].ticket;
				pid = tab[i].pid;
				uid = tab[i].uid;
			}
		}
	lock_give();
	if (!want)
		return;
	size_t free0 = 0;
	if (device_free(dev, &free0) != 0)
		return;
	size_t given = 0;
	if (free0 < want)
		given = gp_reclaim_give(dev, want - free0, pid, uid, first);
	size_t free1 = 0;
	(void)device_free(dev, &free1);
	/* what a framework gave on its own thread since (memory it handed the driver itself) */
	given += gp_reclaim_take_credit(dev);
	if (given || freed || free1 > free0 || free1 >= want)
		wake(fd, dev, given);
}

/* A peer's claim to wait, checked: its ticket not in the future nor older than any wait can
 * be, its end after now and no later than its ticket allows, its size no larger than the GPU. */
static bool claim_ok(const struct gp_share_msg *m, int dev, uint64_t now)
{
	size_t free_b = 0, total = 0;
	const struct gp_backend *be = gp_registry_backend();
	if (!be->mem_info || be->mem_info(be->ctx, dev, &free_b, &total) != 0)
		total = 0;
	return m->id <= now + MS && now - m->id <= CLAIM_MAX_NS && m->held > now && m->held - m->id <= CLAIM_MAX_NS &&
	       m->bytes && (!total || m->bytes <= total);
}

/* Another process's entry for (pid, ticket) on dev, -1 none; the count of that process's
 * entries (every GPU) in *of_pid, and whether this process waits on dev in *waiting_here. */
static int find_locked(int pid, uint64_t ticket, int dev, int *of_pid, bool *waiting_here)
{
	int at = -1;
	*of_pid = 0;
	*waiting_here = false;
	for (int i = 0; i < ntab; i++) {
		if (tab[i].self && tab[i].dev == dev)
			*waiting_here = true;
		if (!tab[i].self && tab[i].pid == pid) {
			(*of_pid)++;
			if (tab[i].ticket == ticket && tab[i].dev == dev)
				at = i;
		}
	}
	return at;
}

/* The sender is process pid's listening socket (its release thread, telling another's
 * waits: tell_own), not a waiting thread's own. */
static bool from_listener(const struct gp_share_peer *from)
{
	char name[96];
	int n = gp_share_name(from->pid, name, sizeof name);
	return n > 0 && from->addrlen == (unsigned)n + 1 && from->addr[0] == '\0' &&
	       memcmp(from->addr + 1, name, (size_t)n) == 0;
}

/* This process's own waits on `dev`, told to process pid (it waits too, and may have begun
 * listening after they were told: a process's first allocation starts its release thread),
 * so that its line has them before it takes memory they wait for. */
static void tell_own(int fd, int dev, int pid)
{
	struct gp_share_msg w[8];
	int n = 0;
	uint64_t now = now_ns();
	const unsigned char *uuid = NULL;
	GP_REGISTRY_READER;
	const struct gpupool_device_stats *st = gp_registry_slot(R, dev);
	if (!st)
		return;
	uuid = (const unsigned char *)st->uuid;
	lock_take();
	for (int i = 0; i < ntab && n < 8; i++)
		if (tab[i].self && tab[i].dev == dev && tab[i].deadline > now) {
			w[n] = gp_share_msg_make(GP_SHARE_WAIT, tab[i].ticket, uuid);
			w[n].bytes = tab[i].bytes;
			w[n++].held = tab[i].deadline;
		}
	lock_give();
	for (int i = 0; i < n; i++)
		(void)gp_share_send(fd, pid, &w[i]);
}

static void on_wait(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	int dev = R->cfg.reclaim ? device_of(m->uuid) : -1;
	if (dev < 0 || from->pid == getpid())
		return; /* not on this GPU here: nothing held to give, nothing to answer */
	uint64_t now = now_ns();
	if (!claim_ok(m, dev, now)) {
		gp_log(GP_LOG_INFO, "share: pid %d (uid %u) claims to wait on device %d with a ticket, an end or a size "
				    "no wait can have; ignored",
		       (int)from->pid, (unsigned)from->uid, dev);
		return;
	}
	int mine, at;
	bool waiting_here, ask = true;
	lock_take();
	at = find_locked(from->pid, m->id, dev, &mine, &waiting_here);
	if (at >= 0 && tab[at].lost) {
		lock_give();
		return; /* its place is gone: told again, it stays gone */
	}
	if (at >= 0)
		ask = now - tab[at].seen >= ASK_NS;
	lock_give();
	/* the claimant answers for itself: its status is asked under its own name, the first
	 * time and about once a second after (on_status); a socket that is no process's name
	 * of gpupool refuses at once, and its claim takes no place */
	struct gp_share_msg q = gp_share_msg_make(GP_SHARE_STATUS, m->id, m->uuid);
	int rc = ask ? gp_share_send(fd, from->pid, &q) : 0;
	bool kept = false, gone = rc == -ECONNREFUSED || rc == -ENOENT;
	lock_take();
	at = find_locked(from->pid, m->id, dev, &mine, &waiting_here);
	if (gone) {
		if (at >= 0)
			remove_locked(at);
	} else if (at >= 0) {
		tab[at].deadline = m->held;
		tab[at].bytes = m->bytes;
		if (!from_listener(from))
			tab[at].to = *from; /* the waiting thread's own socket, where it is woken */
		tab[at].woken = false; /* told again: still short */
		kept = true;
	} else if (mine < MAX_PER_PID) {
		int out = ntab < MAX_ENTRIES ? -1 : room_locked(from->pid, from->uid, false);
		if (out >= 0)
			remove_locked(out);
		if (ntab < MAX_ENTRIES) {
			uint64_t place = now > LATE_NS && m->id < now - LATE_NS ? now - LATE_NS : m->id;
			struct entry e = {.pid = from->pid, .uid = from->uid, .dev = dev, .ticket = m->id,
					  .place = place, .bytes = m->bytes, .deadline = m->held, .to = *from,
					  .heard = now};
			add_locked(&e);
			kept = true;
		}
	}
	lock_give();
	if (gone) {
		gp_log(GP_LOG_DEBUG, "share: pid %d (uid %u) claims to wait on device %d but does not listen under its "
				     "name; ignored",
		       (int)from->pid, (unsigned)from->uid, dev);
		return;
	}
	if (!kept) {
		gp_log(GP_LOG_INFO, "share: pid %d (uid %u) waits on device %d, but this process keeps no more waiters "
				    "(%d of one process, %d in all); not served from here",
		       (int)from->pid, (unsigned)from->uid, dev, MAX_PER_PID, MAX_ENTRIES);
		return;
	}
	struct gp_share_msg a = gp_share_msg_make(GP_SHARE_HEARD, m->id, m->uuid);
	gp_reclaim_holding(dev, false, &a.bytes, &a.held, &a.flags);
	if (waiting_here)
		a.flags |= GP_SHARE_WAITING;
	(void)gp_share_reply(fd, from, &a);
	if (waiting_here && !from_listener(from))
		tell_own(fd, dev, from->pid); /* not in answer to another's tell_own: no ping-pong */
	serve(fd, dev, false);
}

/* A status answer to on_wait's query, from the pid the kernel names: its waits on that GPU
 * hold their place in line while it says it waits for at least as much as each, and it has a
 * page that gpupool-stat lists. */
static void on_status(const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	int dev = device_of(m->uuid);
	if (dev < 0)
		return;
	bool waits = m->status.count && listed(from->pid, from->uid);
	uint64_t now = now_ns();
	lock_take();
	for (int i = 0; i < ntab; i++)
		if (!tab[i].self && tab[i].pid == from->pid && tab[i].dev == dev && tab[i].ticket == m->id)
			tab[i].seen = waits && m->status.waiting >= tab[i].bytes ? now : 0;
	lock_give();
}

void gp_waitq_message(int fd, const struct gp_share_msg *m, const struct gp_share_peer *from)
{
	GP_REGISTRY_READER;
	if (atomic_load(&R->exiting))
		return;
	if (m->kind == GP_SHARE_WAIT) {
		on_wait(fd, m, from);
	} else if (m->kind == GP_SHARE_STATUS_ANSWER) {
		on_status(m, from);
	} else if (m->kind == GP_SHARE_DONE) {
		int dev = device_of(m->uuid);
		lock_take();
		for (int i = 0; i < ntab; i++)
			if (!tab[i].self && tab[i].pid == from->pid && tab[i].ticket == m->id && tab[i].dev == dev) {
				if (!tab[i].lost) /* a place lost stays lost until its end, DONE or not */
					remove_locked(i);
				break;
			}
		lock_give();
	} else if (m->kind == GP_SHARE_POKE && from->pid == getpid()) {
		for (int d = 0; d < GPUPOOL_MAX_DEVICES && d < R->ndev; d++)
			if (atomic_exchange(&poked[d], false))
				serve(fd, d, true);
	}
}

void gp_waitq_freed(int dev)
{
	if (atomic_exchange(&poked[dev], true))
		return; /* one on its way already */
	struct gp_share_msg m = gp_share_msg_make(GP_SHARE_POKE, (uint64_t)dev, NULL);
	if (gp_share_self(&m) != 0)
		atomic_store(&poked[dev], false);
}

int gp_waitq_tick(void)
{
	if (!atomic_load_explicit(&lines, memory_order_relaxed))
		return -1;
	GP_REGISTRY_READER;
	uint64_t now = now_ns();
	int heads_dev[GPUPOOL_MAX_DEVICES], heads_pid[GPUPOOL_MAX_DEVICES];
	uint64_t heads_ticket[GPUPOOL_MAX_DEVICES], heads_bytes[GPUPOOL_MAX_DEVICES];
	int nheads = 0;
	lock_take();
	for (int i = ntab - 1; i >= 0; i--)
		if (!tab[i].self && tab[i].deadline <= now)
			remove_locked(i); /* its wait is over, whatever it said */
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		if (!atomic_load_explicit(&in_line[d], memory_order_relaxed))
			continue; /* nobody waits on it (counted under the lock) */
		int h = -1;
		for (int i = 0; i < ntab; i++)
			if (tab[i].dev == d && in_line_now(&tab[i], now) && (h < 0 || tab[i].place < tab[h].place))
				h = i;
		for (int i = 0; i < ntab; i++)
			if (i != h && tab[i].dev == d)
				tab[i].avail_since = 0; /* judged from when it is the head */
		if (h >= 0 && !tab[h].self) {
			heads_dev[nheads] = d;
			heads_pid[nheads] = tab[h].pid;
			heads_ticket[nheads] = tab[h].ticket;
			heads_bytes[nheads++] = tab[h].bytes;
		}
	}
	int left = ntab;
	lock_give();
	for (int k = 0; k < nheads; k++) {
		size_t free_b = 0;
		if (device_free(heads_dev[k], &free_b) != 0)
			continue;
		bool there = free_b >= heads_bytes[k];
		lock_take();
		for (int i = 0; i < ntab; i++) {
			if (tab[i].dev != heads_dev[k] || tab[i].pid != heads_pid[k] ||
			    tab[i].ticket != heads_ticket[k] || tab[i].self)
				continue;
			if (!there) {
				tab[i].avail_since = 0;
			} else if (!tab[i].avail_since) {
				tab[i].avail_since = now;
			} else if (now - tab[i].avail_since > HEAD_TAKE_NS) {
				gp_log(GP_LOG_INFO, "share: pid %d (uid %u) waited on device %d but left the memory it "
						    "waits for unused for %.1f s; it loses its place",
				       tab[i].pid, tab[i].uid, heads_dev[k], (double)(now - tab[i].avail_since) / 1e9);
				tab[i].lost = true;
			}
			break;
		}
		lock_give();
	}
	return left ? TICK_MS : -1;
}

bool gp_waitq_waiting(int dev, int pid, uint64_t ticket)
{
	bool there = false;
	uint64_t now = now_ns();
	lock_take();
	for (int i = 0; i < ntab && !there; i++)
		there = tab[i].dev == dev && tab[i].pid == pid && tab[i].ticket == ticket && tab[i].deadline > now &&
			!tab[i].lost;
	lock_give();
	return there;
}

uint64_t gp_waitq_own(int dev, uint64_t *since_ns)
{
	uint64_t sum = 0, first = UINT64_MAX, now = now_ns();
	lock_take();
	for (int i = 0; i < ntab; i++)
		if (tab[i].self && tab[i].dev == dev) {
			sum += tab[i].bytes;
			if (tab[i].ticket < first)
				first = tab[i].ticket;
		}
	lock_give();
	if (since_ns)
		*since_ns = sum ? gp_clock_ns(CLOCK_REALTIME) - (now - first) : 0;
	return sum;
}

void gp_waitq_after_fork(void)
{
	pthread_mutex_init(&lock, NULL);
	ntab = 0;
	atomic_store(&lines, 0);
	my_ticket = 0;
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		atomic_store(&in_line[d], 0);
		atomic_store(&gp_waitq_others[d], 0);
		atomic_store(&poked[d], false);
	}
}
