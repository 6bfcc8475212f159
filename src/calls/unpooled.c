/* Memory held outside the pools (unpooled.h): the records of each unpooled allocation in
 * two uthash tables under one mutex (the virtual memory API's: unpooled_vmm.c) (a leaf: no CUDA call and no other lock under it),
 * a destroyed program pool's record kept by its live allocations, the
 * budget's takes and gives around the hooks' real calls, and the page's unpooled_* figures,
 * written as the slot's one writer (under its pool's lock, gp_pool_slot_write). Must not
 * depend on the hook bodies. */
#define HASH_NONFATAL_OOM 1
#include "unpooled.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ladder.h"
#include "waitq.h"
#include "log.h"
#include "pool.h"
#include "rank.h"
#include "registry.h"
#include "stats.h"

static int table_oom;
#define uthash_nonfatal_oom(e) (table_oom = 1)
#include <uthash.h>

struct entry {
	struct gp_unpooled_rec rec;
	UT_hash_handle hh;
};

/* A memory pool the program made. cuMemPoolDestroy with allocations from it still live
 * returns at once, and the driver keeps the pool's memory until the last of them is freed
 * (cuda.h): the record leaves `mempools` (the handle may be handed out again) and stays,
 * counted, while anything holds it. */
struct gp_mempool {
	uintptr_t pool;
	int dev;
	uint64_t counted;  /* its reserved bytes as last read (or when destroyed), in the budget */
	unsigned refs;     /* under lock: `mempools`' (until destroyed), one per live allocation
			    * recorded from it, one per allocation call in flight */
	bool destroyed;    /* under lock: out of `mempools`; its reserved bytes are not read again */
	struct gp_mempool_ops ops; /* under lock: how its API reads it, from its last read (api NULL:
				    * never read) */
	uint64_t read_seq;         /* under lock: tickets of the reads of its reserved bytes begun */
	uint64_t counted_seq;      /* under lock: the ticket of the read `counted` is from */
	UT_hash_handle hh;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *ptrs;           /* under lock */
static struct gp_mempool *mempools;  /* under lock: the live ones, by handle */
static _Atomic size_t nptrs;         /* records in ptrs: frees skip the lock while 0 */
_Atomic uintptr_t gp_unpooled_dev_pool[GPUPOOL_MAX_DEVICES];

/* A program pool's growth is not asked for; the driver grows a pool by whole granules. */
#define GP_MEMPOOL_GRANULE ((size_t)2 << 20)

static void table_lock(void) { gp_mutex_lock(&lock, GP_RANK_UNPOOLED); }
static void table_unlock(void) { gp_mutex_unlock(&lock, GP_RANK_UNPOOLED); }

/* ---- the page ---------------------------------------------------------------------------- */

/* One change of the figures. A give is made inside the slot's writer (under the pool lock):
 * the pool cannot grow into the room it leaves before the page shows it gone, so the page's
 * reserved_bytes + unpooled_bytes never passes the limit. Takes are made before the real
 * call, outside: the page shows them a moment late, never early. A program pool's figure
 * going down is given with the figure, under the table's lock (mempool_sync_held), and shown
 * just after: a refusal in between finds the page behind and shows it first
 * (gp_unpooled_mempools_sync), so the room is never refused for long. */
struct note {
	int dev;
	unsigned allocs, frees, refusals;
	enum gp_budget_kind kind;
	size_t give; /* bytes of `kind` to give back */
};

static void write_slot(struct gpupool_device_stats *st, void *arg)
{
	const struct note *n = arg;
	if (n->give)
		gp_budget_give(n->dev, n->give, n->kind);
	/* the budget's figures as they are now, under the slot's one writer: the last writer
	 * writes the newest */
	uint64_t vmm = gp_budget_held(n->dev, GP_BUDGET_VMM), mp = gp_budget_held(n->dev, GP_BUDGET_MEMPOOL),
		 man = gp_budget_held(n->dev, GP_BUDGET_MANAGED), pit = gp_budget_held(n->dev, GP_BUDGET_PITCHED),
		 late = gp_budget_held(n->dev, GP_BUDGET_LATE);
	GP_GAUGE_SET(st, unpooled_vmm_bytes, vmm);
	GP_GAUGE_SET(st, unpooled_mempool_bytes, mp);
	GP_GAUGE_SET(st, unpooled_managed_bytes, man);
	GP_GAUGE_SET(st, unpooled_pitched_bytes, pit);
	uint64_t sum = vmm; /* each figure is at most UINT64_MAX (budget.c saturates): so is their sum */
	sum = mp > UINT64_MAX - sum ? UINT64_MAX : sum + mp;
	sum = man > UINT64_MAX - sum ? UINT64_MAX : sum + man;
	sum = pit > UINT64_MAX - sum ? UINT64_MAX : sum + pit;
	sum = late > UINT64_MAX - sum ? UINT64_MAX : sum + late;
	GP_GAUGE_SET(st, unpooled_bytes, sum);
	GP_COUNT(st, unpooled_allocs, n->allocs);
	GP_COUNT(st, unpooled_frees, n->frees);
	GP_COUNT(st, unpooled_refusals, n->refusals);
}

/* The device's pool, made on first use: its slot holds the limit and the figures. */
static gp_pool *pool_of(int dev)
{
	const struct gp_registry *r = gp_registry_get_driver();
	if (dev < 0 || dev >= r->ndev || (r->off && r->drv_off))
		return NULL;
	return gp_ladder_pool(r, dev);
}

static void note_give(int dev, unsigned allocs, unsigned frees, enum gp_budget_kind kind, size_t give)
{
	GP_REGISTRY_READER;
	gp_pool *p = pool_of(dev);
	struct note n = {dev, allocs, frees, 0, kind, give};
	if (p)
		gp_pool_slot_write(p, write_slot, &n);
	else if (give)
		gp_budget_give(dev, give, kind);
}

static void note(int dev, unsigned allocs, unsigned frees, unsigned refusals)
{
	GP_REGISTRY_READER;
	gp_pool *p = pool_of(dev);
	struct note n = {dev, allocs, frees, refusals, GP_BUDGET_POOL, 0};
	if (p)
		gp_pool_slot_write(p, write_slot, &n);
}

/* ---- around one allocation ---------------------------------------------------------------- */

/* The take, and past the limit the device's pool's cached segments given back first (as a
 * pooled allocation's ladder does before it fails), then the take once more. An earlier
 * waiter on the GPU needing the memory (the gate: -EBUSY): this allocation waits in line
 * behind it (waitq.h), then takes. 0; -ENOMEM: refused by the limit, the group or the
 * figure's range; -EBUSY: refused by the gate when the wait ended. */
static int take_or_release(int dev, size_t bytes, enum gp_budget_kind kind)
{
	GP_REGISTRY_READER;
	(void)pool_of(dev); /* the slot, and with it the limit, before the first take */
	int rc = gp_budget_take(dev, bytes, kind);
	if (__builtin_expect(rc == -EBUSY, 0)) {
		struct gp_wait w;
		if (gp_waitq_begin(&w, dev, bytes, false)) {
			while (rc == -EBUSY && gp_waitq_next(&w))
				rc = gp_budget_take(dev, bytes, kind);
			gp_waitq_end(&w, rc == 0);
		}
	}
	if (rc == 0)
		return 0;
	/* a fence and a release only where the pool caches anything (free or pending blocks) */
	const struct gp_registry *r = gp_registry_get_driver();
	const struct gpupool_device_stats *st = dev >= 0 && dev < r->ndev ? gp_registry_slot(r, dev) : NULL;
	if (st && __atomic_load_n(&st->cached_bytes, __ATOMIC_RELAXED) && gp_registry_release(dev) > 0)
		rc = gp_budget_take(dev, bytes, kind);
	/* the program's pools may have given memory back since their figures were read (a
	 * synchronize past their release threshold, a reset) */
	if (rc == -ENOMEM && gp_unpooled_mempools_sync(dev))
		rc = gp_budget_take(dev, bytes, kind);
	return rc == 0 ? 0 : rc == -EBUSY ? -EBUSY : -ENOMEM;
}

int gp_unpooled_take(int dev, size_t bytes, enum gp_budget_kind kind)
{
	int rc = take_or_release(dev, bytes, kind);
	if (rc == 0)
		return 0;
	/* more than a figure can count, and nothing to cap: CUDA's own answer. Never for the
	 * gate's refusal: a wait that ended without the memory is an out of memory, as a pooled
	 * allocation's is, not a call passed uncounted */
	if (rc == -ENOMEM && !gp_budget_capped(dev))
		return -ERANGE;
	note(dev, 0, 0, 1);
	return -ENOMEM;
}

void gp_unpooled_taken(int dev, size_t bytes, enum gp_budget_kind kind, bool ok)
{
	note_give(dev, ok, 0, kind, ok ? 0 : bytes);
}

/* ---- records ------------------------------------------------------------------------------ */

/* Drops one reference of a program pool's record (any lock but the table's held, or none);
 * the last gives what it counted back. */
static void mempool_unref(struct gp_mempool *m)
{
	if (!m)
		return;
	table_lock();
	bool last = --m->refs == 0;
	table_unlock();
	if (!last)
		return;
	if (m->counted)
		note_give(m->dev, 0, 0, GP_BUDGET_MEMPOOL, m->counted);
	free(m);
}

/* A record that leaves the table without a free (replaced, or no host memory to keep it):
 * what it counted goes back (a program-pool allocation: its hold on its pool). */
static void dropped(const struct gp_unpooled_rec *rec)
{
	if (rec->kind == GP_BUDGET_MEMPOOL)
		mempool_unref(rec->owner);
	else
		gp_budget_give(rec->dev, rec->bytes, rec->kind);
}

static bool add(struct entry **t, const struct gp_unpooled_rec *rec)
{
	struct entry *e = malloc(sizeof *e);
	if (!e)
		return false;
	e->rec = *rec;
	table_lock();
	table_oom = 0;
	struct entry *old = NULL;
	HASH_FIND(hh, *t, &e->rec.key, sizeof e->rec.key, old);
	if (old) { /* a handle or address the driver handed out again behind gpupool's back */
		HASH_DEL(*t, old);
		if (t == &ptrs)
			atomic_fetch_sub(&nptrs, 1);
	}
	HASH_ADD(hh, *t, rec.key, sizeof e->rec.key, e);
	bool ok = !table_oom;
	if (ok && t == &ptrs)
		atomic_fetch_add(&nptrs, 1);
	table_unlock();
	if (old) {
		gp_log(GP_LOG_WARN, "device %d: 0x%llx recorded twice (freed outside gpupool's view?); counting the new "
				    "one", old->rec.dev, (unsigned long long)old->rec.key);
		dropped(&old->rec);
		free(old);
	}
	if (!ok)
		free(e);
	return ok;
}

static bool take_out(struct entry **t, uint64_t key, struct gp_unpooled_rec *rec)
{
	if (t == &ptrs && atomic_load_explicit(&nptrs, memory_order_relaxed) == 0)
		return false;
	table_lock();
	struct entry *e = NULL;
	HASH_FIND(hh, *t, &key, sizeof key, e);
	if (e) {
		HASH_DEL(*t, e);
		if (t == &ptrs)
			atomic_fetch_sub(&nptrs, 1);
	}
	table_unlock();
	if (!e)
		return false;
	*rec = e->rec;
	free(e);
	return true;
}

static void put_back(struct entry **t, const struct gp_unpooled_rec *rec)
{
	if (!add(t, rec)) {
		/* no host memory to keep it: uncounted from now on rather than counted forever */
		dropped(rec);
		note(rec->dev, 0, 0, 0);
	}
}

bool gp_unpooled_ptr_add(const struct gp_unpooled_rec *rec)
{
	if (add(&ptrs, rec))
		return true;
	gp_log(GP_LOG_WARN, "out of host memory recording an allocation: its %zu bytes are not counted", rec->bytes);
	dropped(rec);
	return false;
}

bool gp_unpooled_ptr_remove(uintptr_t ptr, struct gp_unpooled_rec *rec) { return take_out(&ptrs, ptr, rec); }

void gp_unpooled_ptr_put(const struct gp_unpooled_rec *rec) { put_back(&ptrs, rec); }

/* ---- memory pools the program made -------------------------------------------------------- */

void gp_unpooled_pool_made(uintptr_t pool, int dev)
{
	struct gp_mempool *m = calloc(1, sizeof *m);
	if (!m) {
		gp_log(GP_LOG_WARN, "out of host memory recording a memory pool: its memory is not counted");
		return;
	}
	m->pool = pool;
	m->dev = dev;
	m->refs = 1;
	table_lock();
	table_oom = 0;
	struct gp_mempool *old = NULL;
	HASH_FIND(hh, mempools, &pool, sizeof pool, old);
	if (old) { /* destroyed behind gpupool's back: what it counted goes back now */
		HASH_DEL(mempools, old);
		old->destroyed = true;
	}
	HASH_ADD(hh, mempools, pool, sizeof m->pool, m);
	bool ok = !table_oom;
	uint64_t was = old ? old->counted : 0;
	if (old) {
		old->counted = 0;
		if (was) /* with the figure, under the lock (mempool_sync_held) */
			gp_budget_give(old->dev, was, GP_BUDGET_MEMPOOL);
	}
	table_unlock();
	if (old) {
		if (was)
			note(old->dev, 0, 0, 0);
		mempool_unref(old);
	}
	if (!ok)
		free(m);
}

int gp_unpooled_pool_device(uintptr_t pool)
{
	table_lock();
	struct gp_mempool *m = NULL;
	HASH_FIND(hh, mempools, &pool, sizeof pool, m);
	int dev = m ? m->dev : -1;
	table_unlock();
	return dev;
}

void gp_unpooled_pool_destroyed(uintptr_t pool)
{
	table_lock();
	struct gp_mempool *m = NULL;
	HASH_FIND(hh, mempools, &pool, sizeof pool, m);
	if (m) {
		HASH_DEL(mempools, m);
		m->destroyed = true;
	}
	table_unlock();
	if (!m)
		return;
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++) {
		uintptr_t want = pool;
		atomic_compare_exchange_strong(&gp_unpooled_dev_pool[d], &want, 0);
	}
	/* what it counted goes back now, or with the last of its allocations still live */
	mempool_unref(m);
}

void gp_unpooled_device_pool_set(int dev, uintptr_t pool)
{
	if (dev < 0 || dev >= GPUPOOL_MAX_DEVICES)
		return;
	atomic_store(&gp_unpooled_dev_pool[dev], gp_unpooled_pool_device(pool) >= 0 ? pool : 0);
}

/* The record of `pool`, held for an allocation call (NULL: not one of the program's pools
 * gpupool knows). */
static struct gp_mempool *mempool_hold(uintptr_t pool)
{
	table_lock();
	struct gp_mempool *m = NULL;
	HASH_FIND(hh, mempools, &pool, sizeof pool, m);
	if (m)
		m->refs++;
	table_unlock();
	return m;
}

/* Reads held record m's reserved bytes and counts the change since the last figure counted.
 * Reads may overlap (an allocation's, a free's, a look before a refusal): each takes a ticket
 * before it reads, and only a read with a later ticket than the last counted one is counted,
 * so the figure kept is from the read that began last, which saw every change made before
 * any earlier read began. A destroyed pool is not read again (its handle may be another's). */
static void mempool_sync_held(struct gp_mempool *m, const struct gp_mempool_ops *ops)
{
	table_lock();
	bool gone = m->destroyed;
	uint64_t ticket = ++m->read_seq;
	table_unlock();
	uint64_t now = 0;
	if (gone || !ops || ops->reserved(ops->api, m->pool, &now) != 0)
		return;
	table_lock();
	uint64_t was = m->counted;
	bool latest = !m->destroyed && ticket > m->counted_seq;
	int dev = m->dev;
	if (latest) {
		m->counted = now;
		m->counted_seq = ticket;
		m->ops = *ops;
		/* the budget changes with the figure, under the lock (lock-free figures): the
		 * changes of overlapping reads reach it in the order their figures were set */
		if (now > was)
			gp_budget_charge(dev, now - was, GP_BUDGET_MEMPOOL);
		else if (now < was)
			gp_budget_give(dev, was - now, GP_BUDGET_MEMPOOL);
	}
	table_unlock();
	if (latest && now < was)
		note(dev, 0, 0, 0); /* the page's figures, once the lock is given */
}

static void mempool_sync(uintptr_t pool, const struct gp_mempool_ops *ops)
{
	struct gp_mempool *m = mempool_hold(pool);
	if (!m)
		return;
	mempool_sync_held(m, ops);
	mempool_unref(m);
}

/* The page's unpooled_bytes is above the budget's figures: a give made under the table's
 * lock (mempool_sync_held) that the page has not shown yet. */
static bool page_behind(int dev)
{
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get_driver();
	const struct gpupool_device_stats *st = dev < r->ndev ? gp_registry_slot(r, dev) : NULL;
	if (!st)
		return false;
	uint64_t sum = 0;
	for (int k = 0; k < GP_BUDGET_KINDS; k++) {
		uint64_t h = k == GP_BUDGET_POOL || k == GP_BUDGET_CHUNKS ? 0 : gp_budget_held(dev, (enum gp_budget_kind)k);
		sum = h > UINT64_MAX - sum ? UINT64_MAX : sum + h;
	}
	return __atomic_load_n(&st->unpooled_bytes, __ATOMIC_RELAXED) > sum;
}

bool gp_unpooled_mempools_sync(int dev)
{
	if (dev < 0 || dev >= GPUPOOL_MAX_DEVICES)
		return false;
	uint64_t before = gp_budget_held(dev, GP_BUDGET_MEMPOOL);
	/* the room a give left that the page does not show yet is room too: shown now */
	bool behind = page_behind(dev);
	if (behind)
		note(dev, 0, 0, 0);
	if (!before)
		return behind;
	/* every live pool of the device, held (a destroy meanwhile leaves the record alive, and
	 * a handle handed out again is another record) */
	struct held {
		struct gp_mempool *m;
		struct gp_mempool_ops ops;
	} *v = NULL;
	size_t n = 0, cap = 0;
	table_lock();
	struct gp_mempool *m, *t;
	HASH_ITER(hh, mempools, m, t)
	{
		if (m->dev != dev || !m->ops.api)
			continue;
		if (n == cap) {
			size_t c = cap ? 2 * cap : 16;
			struct held *more = realloc(v, c * sizeof *v);
			if (!more)
				break; /* no host memory: those held so far */
			v = more;
			cap = c;
		}
		m->refs++;
		v[n].m = m;
		v[n++].ops = m->ops;
	}
	table_unlock();
	for (size_t i = 0; i < n; i++) {
		mempool_sync_held(v[i].m, &v[i].ops);
		mempool_unref(v[i].m);
	}
	free(v);
	return behind || gp_budget_held(dev, GP_BUDGET_MEMPOOL) < before;
}

int gp_unpooled_mempool_begin(int dev, uintptr_t pool, size_t size, const struct gp_mempool_ops *ops,
			      struct gp_mempool_take *t)
{
	t->bytes = 0;
	t->held = NULL;
	/* Whether the pool grows is the driver's choice: unused reserved memory as large as the
	 * request may still be the wrong shape (chunks of other sizes), so a share is always
	 * taken, and given back once the pool's growth is read. */
	mempool_sync(pool, ops);
	size_t want = size > SIZE_MAX - GP_MEMPOOL_GRANULE ? size
							   : (size + GP_MEMPOOL_GRANULE - 1) / GP_MEMPOOL_GRANULE *
								     GP_MEMPOOL_GRANULE;
	int rc = take_or_release(dev, want, GP_BUDGET_MEMPOOL);
	if (rc == -ENOMEM && !gp_budget_capped(dev)) {
		/* more than a figure can count, and nothing to cap: CUDA answers, and what the pool
		 * grows by is read afterwards */
		want = 0;
	} else if (rc != 0) {
		/* the program's pool's own unused memory next: trimmed, then counted again */
		if (ops->trim(ops->api, pool, 0) == 0)
			mempool_sync(pool, ops);
		if (gp_budget_take(dev, want, GP_BUDGET_MEMPOOL) != 0) {
			note(dev, 0, 0, 1);
			return -ENOMEM;
		}
	}
	t->bytes = want;
	t->held = mempool_hold(pool); /* a destroy racing with the call leaves it counted */
	return 0;
}

void gp_unpooled_mempool_end(int dev, uintptr_t pool, size_t size, const struct gp_mempool_take *t, uintptr_t ptr,
			     const struct gp_mempool_ops *ops)
{
	/* the growth counted before the share goes: for a moment both are, never neither */
	if (t->held)
		mempool_sync_held(t->held, ops);
	else
		mempool_sync(pool, ops);
	if (ptr) {
		/* the call's hold on the pool's record passes to the allocation */
		struct gp_unpooled_rec rec = {ptr, dev, GP_BUDGET_MEMPOOL, size, pool, t->held};
		(void)gp_unpooled_ptr_add(&rec);
	} else {
		mempool_unref(t->held);
	}
	note_give(dev, ptr != 0, 0, GP_BUDGET_MEMPOOL, t->bytes);
}

void gp_unpooled_freed(const struct gp_unpooled_rec *rec, const struct gp_mempool_ops *ops)
{
	if (rec->kind == GP_BUDGET_MEMPOOL) {
		/* a destroyed pool's reserved bytes are not read again (its handle may be another
		 * pool's now): it stays counted as it was until its last allocation is freed */
		if (rec->owner)
			mempool_sync_held(rec->owner, ops); /* held by the record until the unref */
		else
			mempool_sync(rec->pool, ops);
		mempool_unref(rec->owner);
		note(rec->dev, 0, 1, 0);
	} else {
		note_give(rec->dev, 0, 1, rec->kind, rec->bytes);
	}
	gp_waitq_note_free(rec->dev); /* the driver has it: a waiter may take it */
}

void gp_unpooled_device_reset(int dev)
{
	struct entry *gone = NULL, *e, *tmp;
	table_lock();
	HASH_ITER(hh, ptrs, e, tmp) {
		if (e->rec.dev != dev || (e->rec.kind != GP_BUDGET_MANAGED && e->rec.kind != GP_BUDGET_PITCHED))
			continue;
		HASH_DEL(ptrs, e);
		atomic_fetch_sub(&nptrs, 1);
		e->hh.next = gone; /* a list of its own, out of the table */
		gone = e;
	}
	table_unlock();
	/* no page write here: the caller holds the device's reset gate, and the pool lock ranks
	 * before it; gp_unpooled_refresh writes the figures once the reset is over */
	while (gone) {
		e = gone;
		gone = e->hh.next;
		gp_budget_give(e->rec.dev, e->rec.bytes, e->rec.kind);
		free(e);
	}
}

void gp_unpooled_refresh(int dev)
{
	/* any figure may have changed (zeroed by the retirement, given back by the reset) */
	GP_REGISTRY_READER;
	const struct gp_registry *r = gp_registry_get_driver();
	(void)gp_unpooled_mempools_sync(dev); /* what the reset took from the pools unused */
	if (dev >= 0 && dev < r->ndev &&
	    (atomic_load(&r->pools[dev]) || gp_budget_held(dev, GP_BUDGET_KINDS) >
						  gp_budget_held(dev, GP_BUDGET_POOL) + gp_budget_held(dev, GP_BUDGET_CHUNKS)))
		note(dev, 0, 0, 0); /* a new pool where memory survived: its slot shows it again */
}

void gp_unpooled_after_fork(void)
{
	/* the parent's records: left allocated (a thread that is not here may have held the
	 * lock while changing them), forgotten */
	pthread_mutex_init(&lock, NULL);
	ptrs = NULL;
	gp_unpooled_vmm_after_fork();
	mempools = NULL;
	atomic_store(&nptrs, 0);
	for (int d = 0; d < GPUPOOL_MAX_DEVICES; d++)
		atomic_store(&gp_unpooled_dev_pool[d], 0);
	gp_budget_after_fork();
}
