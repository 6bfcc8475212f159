/* Pending frees and fences (fence.h): the pending list, the markers in flight, and the
 * fences themselves, all with the pool lock held (gp_pool_fence and gp_pool_fence_poll are
 * pool.c's frames around them). No allocation policy, no segments. Fifth in the pool's file
 * order (docs/architecture.md): uses freelist.c and treap.c, with pool_internal.h and the
 * backend's fence calls. */
#include "fence.h"

#include <errno.h>

#include "freelist.h"
#include "treap.h"

void gp_pending_push(gp_pool *p, struct gp_block *b)
{
	b->state = B_PENDING;
	b->gen = p->issued;
	b->pend_next = NULL;
	if (p->pend_tail)
		p->pend_tail->pend_next = b;
	else
		p->pend_head = b;
	p->pend_tail = b;
	GP_GAUGE_ADD(p->st, pending_frees, 1);
	GP_GAUGE_ADD(p->st, pending_bytes, b->size);
}

static void put_pending(gp_pool *p, struct gp_slist *sl, struct gp_block *b, uint64_t k)
{
	(void)sl, (void)k;
	gp_pending_push(p, b);
}

void gp_pending_from_list(gp_pool *p, struct gp_slist *sl) { gp_freelist_drain(p, sl, put_pending, 0); }

void gp_pending_retire(gp_pool *p, uint64_t k)
{
	if (k > p->completed) {
		p->completed = k;
		p->grown_pending = 0;
	}
	while (p->pend_head && p->pend_head->gen < p->completed) {
		struct gp_block *b = p->pend_head;
		p->pend_head = b->pend_next;
		if (!p->pend_head)
			p->pend_tail = NULL;
		GP_GAUGE_SUB(p->st, pending_frees, 1);
		GP_GAUGE_SUB(p->st, pending_bytes, b->size);
		b->state = B_FREE;
		gp_freelist_insert(p, b, &p->ready);
	}
}

static void put_promoted(gp_pool *p, struct gp_slist *sl, struct gp_block *b, uint64_t k)
{
	if (b->gen < k) {
		gp_freelist_insert(p, b, &p->ready);
	} else {
		b->list = sl;
		gp_treap_insert(&sl->root[gp_tree_of(b)], b);
	}
}

/* Moves every stream-list block freed before fence k to the ready list (the fence
 * covered the work of every stream). */
static void promote(gp_pool *p, uint64_t k)
{
	for (struct gp_slist *sl = p->streams; sl; sl = sl->hh.next)
		gp_freelist_drain(p, sl, put_promoted, k);
}

static uint64_t clock_ns(const gp_pool *p) { return gp_pool_clock_ns(p); }

/* Drops the markers that fence p->completed covers, except those a thread waits on (that
 * thread drops them). */
static void marks_forget(gp_pool *p)
{
	unsigned j = 0;
	for (unsigned i = 0; i < p->nmarks; i++) {
		struct gp_mark *m = &p->marks[i];
		if (m->k <= p->completed && m->waiters == 0) {
			p->be->fence_drop(p->be->ctx, p->device, m->token);
			continue;
		}
		p->marks[j++] = *m;
	}
	p->nmarks = j;
}

/* Fence k completed: retire (and promote) what it covers, forget the markers it covers. */
static void complete_through(gp_pool *p, uint64_t k, enum gp_fence_scope scope)
{
	gp_pending_retire(p, k);
	if (scope == GP_FENCE_PROMOTE_STREAMS)
		promote(p, k);
	if (p->nmarks)
		marks_forget(p);
}

int gp_fence_locked(gp_pool *p, enum gp_fence_scope scope)
{
	uint64_t k = ++p->issued;
	gp_stats_end(p->st);
	p->unlocked++;
	gp_lock_give(&p->lock);
	uint64_t t0 = clock_ns(p);
	int rc = p->be->device_sync(p->be->ctx, p->device);
	uint64_t t1 = clock_ns(p);
	gp_lock_take(&p->lock);
	p->unlocked--;
	gp_stats_begin(p->st);
	p->last_fence_ns = t1 - t0;
	if (rc == 0) {
		GP_COUNT(p->st, fences, 1);
		complete_through(p, k, scope);
	}
	return rc;
}

bool gp_fence_markers(const gp_pool *p) { return p->prm.fence_marker && p->be->fence_mark; }

/* Pending blocks that no marker recorded (nor device_sync completed) covers: fence k covers
 * gen < k, and a device_sync that failed covers nothing though it took a number. */
static inline bool uncovered(const gp_pool *p)
{
	uint64_t k = p->nmarks && p->marks[p->nmarks - 1].k > p->completed ? p->marks[p->nmarks - 1].k : p->completed;
	return p->pend_tail && p->pend_tail->gen >= k;
}

/* Records a marker covering everything freed so far. 0, -ENOSPC (GP_MARKS_MAX outstanding),
 * or the backend's error. */
static int marks_record(gp_pool *p)
{
	if (p->nmarks == GP_MARKS_MAX)
		return -ENOSPC;
	uint64_t token;
	int rc = p->be->fence_mark(p->be->ctx, p->device, &token);
	if (rc)
		return rc;
	p->marks[p->nmarks++] = (struct gp_mark){.k = ++p->issued, .token = token, .at_ns = clock_ns(p)};
	return 0;
}

int gp_fence_poll_locked(gp_pool *p)
{
	uint64_t done = 0, now = 0;
	int rc = 0;
	for (unsigned i = 0; i < p->nmarks; i++) {
		struct gp_mark *m = &p->marks[i];
		if (m->k <= p->completed)
			continue;
		int q = p->be->fence_query(p->be->ctx, p->device, m->token);
		if (q) {
			if (q != -EAGAIN)
				rc = q;
			break; /* a later marker covers this one's work too: it is not done either */
		}
		if (!now)
			now = clock_ns(p);
		/* an upper bound (it may have completed well before this poll): it only lowers
		 * the estimate; waits, which see the completion, raise it */
		if (!p->lag_ns || now - m->at_ns < p->lag_ns)
			p->lag_ns = now - m->at_ns;
		done = m->k;
		GP_COUNT(p->st, fences, 1);
	}
	if (done)
		complete_through(p, done, GP_FENCE_PENDING_ONLY);
	return rc;
}

/* Bytes pending block b may give once retired: itself and its free or pending neighbours,
 * with which it merges (the neighbours' neighbours are not looked at). */
static size_t reach(const struct gp_block *b)
{
	size_t n = b->size;
	if (b->prev && b->prev->state != B_LIVE)
		n += b->prev->size;
	if (b->next && b->next->state != B_LIVE)
		n += b->next->size;
	return n;
}

/* The marker to wait for on behalf of a request of `rounded` bytes: the index of the oldest
 * outstanding one covering a pending block that large (with the neighbours it merges with),
 * else of the newest when the pending
 * bytes could serve it; p->nmarks when a marker must be recorded first (the fitting blocks
 * are uncovered); -1 when nothing in flight could serve. */
static int marks_target(gp_pool *p, size_t rounded)
{
	unsigned first = 0;
	while (first < p->nmarks && p->marks[first].k <= p->completed)
		first++;
	unsigned i = first;
	for (struct gp_block *b = p->pend_head; b; b = b->pend_next) {
		while (i < p->nmarks && b->gen >= p->marks[i].k)
			i++;
		if (reach(b) >= rounded)
			return (int)i;
	}
	if (!p->pend_head || p->st->pending_bytes < rounded)
		return -1;
	/* several smaller blocks may merge into a fitting one: wait for all of them */
	return uncovered(p) || first == p->nmarks ? (int)p->nmarks : (int)p->nmarks - 1;
}

/* A wait for a marker that took longer than this (ns) had to block. */
#define GP_FENCE_BLOCKED_NS 2000

/* An expected wait this short (ns) is taken whatever the credit left. */
#define GP_FENCE_NEAR_NS 20000

/* The waits that spare a segment may take 1/wait_share of the time: the credit grows with
 * the clock, up to 64 times wait_fence_ns (four of the longest waits the pool takes, 16 times
 * wait_fence_ns each). */
static void accrue(gp_pool *p, uint64_t now)
{
	if (!p->credit_at_ns) {
		p->credit_at_ns = now;
		p->wait_credit_ns = p->prm.wait_fence_ns;
	}
	if (now > p->credit_at_ns && p->prm.wait_share) {
		uint64_t cap = p->prm.wait_fence_ns * 64;
		p->wait_credit_ns += (now - p->credit_at_ns) / p->prm.wait_share;
		if (p->wait_credit_ns > cap)
			p->wait_credit_ns = cap;
	}
	p->credit_at_ns = now;
}

/* The allocating thread waited `waited` ns for work issued `since` ns before the wait ended:
 * the credit pays for it, and the lag is learned (exactly when the wait had to block; else
 * `since` is only an upper bound). */
static void note_wait(gp_pool *p, uint64_t waited, uint64_t since)
{
	p->wait_credit_ns -= p->wait_credit_ns < waited ? p->wait_credit_ns : waited;
	if (waited > GP_FENCE_BLOCKED_NS || !p->lag_ns || since < p->lag_ns)
		p->lag_ns = since;
}

/* Waits for marker i with the lock dropped, then retires through it. 0 or the backend's error. */
static int marks_wait(gp_pool *p, unsigned i, enum gp_fence_scope scope)
{
	struct gp_mark *m = &p->marks[i];
	uint64_t k = m->k, token = m->token, at = m->at_ns;
	m->waiters++;
	gp_stats_end(p->st);
	p->unlocked++;
	gp_lock_give(&p->lock);
	uint64_t t0 = clock_ns(p);
	int rc = p->be->fence_wait(p->be->ctx, p->device, token);
	uint64_t t1 = clock_ns(p);
	gp_lock_take(&p->lock);
	p->unlocked--;
	gp_stats_begin(p->st);
	for (unsigned j = 0; j < p->nmarks; j++) {
		if (p->marks[j].k == k) {
			p->marks[j].waiters--;
			break;
		}
	}
	p->last_fence_ns = t1 - t0;
	if (rc == 0) {
		note_wait(p, t1 - t0, t1 - at);
		if (k > p->completed)
			GP_COUNT(p->st, fences, 1);
		complete_through(p, k, scope);
	} else {
		marks_forget(p); /* a completed fence may have left this one to us */
	}
	return rc;
}

int gp_fence_serve_locked(gp_pool *p, enum gp_fence_scope scope, size_t rounded, uint64_t budget_ns,
			  bool *last)
{
	*last = true;
	if (!gp_fence_markers(p))
		return gp_fence_locked(p, scope);
	(void)gp_fence_poll_locked(p);
	int i;
	if (scope == GP_FENCE_PROMOTE_STREAMS) {
		/* a marker covering a fitting pending block, else everything so far (the streams'
		 * lists may hold what fits) */
		i = marks_target(p, rounded);
		if (i < 0)
			i = (int)p->nmarks;
	} else {
		i = marks_target(p, rounded);
		if (i < 0)
			return -ENOENT;
		uint64_t now = clock_ns(p);
		uint64_t age = i < (int)p->nmarks ? now - p->marks[i].at_ns : 0;
		uint64_t expect = p->lag_ns > age ? p->lag_ns - age : 0;
		if (budget_ns != UINT64_MAX) {
			accrue(p, now);
			/* a device that keeps up (an expected wait of a few us: no bubble worth the
			 * name) is always waited for; growing would cost more */
			if (expect > GP_FENCE_NEAR_NS && (expect > budget_ns || expect > p->wait_credit_ns))
				return -ENOENT; /* growing is cheaper than that wait */
		}
	}
	/* Waiting at once for a marker recorded now would wait for everything issued so far:
	 * that is what a device_sync does, for less (no events) and on every stream. */
	if (i == (int)p->nmarks) {
		int rc = gp_fence_locked(p, scope);
		if (rc == 0)
			note_wait(p, p->last_fence_ns, p->last_fence_ns);
		return rc;
	}
	for (unsigned j = (unsigned)i + 1; *last && j < p->nmarks; j++)
		if (p->marks[j].k > p->completed)
			*last = false;
	return marks_wait(p, (unsigned)i, scope);
}

int gp_fence_poll_mark_locked(gp_pool *p, bool mark)
{
	int rc = p->nmarks ? gp_fence_poll_locked(p) : 0;
	if (rc == 0 && mark && uncovered(p)) {
		rc = marks_record(p);
		if (rc == -ENOSPC)
			rc = 0; /* the oldest must complete first: the next poll */
	}
	int out = 0;
	for (unsigned i = 0; i < p->nmarks; i++)
		out += p->marks[i].k > p->completed;
	return rc ? rc : out > 0;
}
