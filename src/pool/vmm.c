/* Virtual-memory segments (vmm.h): a reservation tiled by blocks like any segment, with
 * holes (B_HOLE blocks, chunk-aligned, in p->holes) where nothing is mapped. Growing maps
 * the chunks a request needs at the start of a hole (the tail hole is the segment's unused
 * end), taking in the free block just before it; release and decay unmap the whole chunks
 * inside runs of free blocks, anywhere in a segment, and give a reservation back once all of
 * it is a hole. Fifth in the pool's file order (docs/architecture.md), after fence.c: uses
 * segment.c, freelist.c and treap.c, with pool_internal.h, the backend and log.h. */
#include "vmm.h"

#include <errno.h>
#include <stdlib.h>

#include "freelist.h"
#include "log.h"
#include "segment.h"
#include "treap.h"

void gp_vmm_setup(gp_pool *p)
{
	const struct gp_backend *be = p->be;
	size_t g = 0, dfree = 0, dtotal = 0;
	p->holes.stream = GP_NO_STREAM;
	if (p->prm.segments == GP_SEGMENTS_WHOLE || !be->vmm_granularity ||
	    be->vmm_granularity(be->ctx, p->device, &g) != 0 || !g || (g & (g - 1)))
		return;
	/* a reservation as large as the device: one segment can hold all of it, and address
	 * space is plentiful (PyTorch's expandable segments reserve the same) */
	if (be->mem_info(be->ctx, p->device, &dfree, &dtotal) != 0 || !dtotal)
		dtotal = (size_t)1 << 40;
	p->va_size = gp_round_up(dtotal, g);
	p->gran = g;
}

/* ---- holes ---------------------------------------------------------------------------- */

static void hole_tree_insert(gp_pool *p, struct gp_block *h)
{
	h->left = h->right = NULL;
	gp_treap_insert(&p->holes.root[gp_tree_of(h)], h);
}

static void hole_tree_erase(gp_pool *p, struct gp_block *h)
{
	gp_treap_erase(&p->holes.root[gp_tree_of(h)], h);
	h->left = h->right = NULL;
}

/* Unlinks block b from its segment's address list and gives its struct back. */
static void block_unlink(gp_pool *p, struct gp_block *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		b->seg->first = b->next;
	if (b->next)
		b->next->prev = b->prev;
	gp_block_put(p, b);
}

/* Makes block h (out of every tree) a hole, merged with the holes beside it, in the holes
 * list; answers the merged hole. */
static struct gp_block *hole_put(gp_pool *p, struct gp_block *h)
{
	struct gp_segment *s = h->seg;
	h->state = B_HOLE;
	h->list = &p->holes;
	h->requested = 0;
	struct gp_block *n = h->prev;
	if (n && n->state == B_HOLE) {
		hole_tree_erase(p, n);
		n->size += h->size;
		block_unlink(p, h);
		h = n;
	}
	n = h->next;
	if (n && n->state == B_HOLE) {
		hole_tree_erase(p, n);
		h->size += n->size;
		block_unlink(p, n);
	}
	if (h->addr + h->size == s->addr + s->size)
		s->tail = h;
	hole_tree_insert(p, h);
	return h;
}

/* ---- growing -------------------------------------------------------------------------- */

/* A measured cost of `chunks` chunks mapped or unmapped in `ns`, into *per (ns per chunk, a
 * moving average). */
static void note_cost(uint64_t *per, uint64_t ns, size_t chunks)
{
	if (!chunks)
		return;
	uint64_t x = ns / chunks;
	*per = *per ? (*per * 3 + x) / 4 : x;
}

/* A free block a request on `stream` may take without ordering it after anything: the ready
 * list's, or the stream's own. */
static bool takeable(const gp_pool *p, const struct gp_block *b, gp_stream stream)
{
	return b && b->state == B_FREE &&
	       (b->list == &p->ready || (stream != GP_NO_STREAM && b->list->stream == stream));
}

/* Where a request grows: at the start of `hole`, taking in `pred` (the free block before it)
 * when set, mapping `need` bytes. */
struct plan {
	struct gp_block *hole, *pred;
	size_t need;
};

static void consider(gp_pool *p, struct plan *pl, struct gp_block *h, size_t rounded, gp_stream stream)
{
	if (!h)
		return;
	struct gp_block *pred = takeable(p, h->prev, stream) && h->prev->size < rounded ? h->prev : NULL;
	size_t need = gp_round_up(pred ? rounded - pred->size : rounded, p->gran);
	if (need > h->size)
		return;
	if (!pl->hole || need < pl->need)
		*pl = (struct plan){h, pred, need};
}

/* A new segment of at least `rounded` bytes of kind t, all of it one hole; NULL when the
 * backend or host memory refuses. */
static struct gp_segment *reserve(gp_pool *p, size_t rounded, int t)
{
	size_t va = gp_round_up(rounded, p->gran);
	if (va < p->va_size)
		va = p->va_size;
	struct gp_segment *s = calloc(1, sizeof *s);
	struct gp_block *h = s ? gp_block_new(p) : NULL;
	uintptr_t addr = 0;
	if (!h || p->be->vmm_reserve(p->be->ctx, p->device, va, &addr) != 0) {
		if (h)
			gp_block_put(p, h);
		free(s);
		return NULL;
	}
	s->addr = addr;
	s->size = va;
	s->vmm = true;
	s->small = t == T_SMALL;
	s->used = true;
	gp_segment_add(p, s);
	h->addr = addr;
	h->size = va;
	h->seg = s;
	s->first = h;
	(void)hole_put(p, h);
	return s;
}

/* Maps pl->need bytes at the start of pl->hole and answers the free block over them (with
 * pl->pred taken in), out of every list; NULL when the backend refused. */
static struct gp_block *take_hole(gp_pool *p, const struct plan *pl)
{
	struct gp_block *h = pl->hole, *x = gp_block_new(p);
	struct gp_segment *s = h->seg;
	if (!x)
		return NULL;
	size_t mapped = 0;
	uint64_t t0 = gp_pool_clock_ns(p);
	int rc = p->be->vmm_map(p->be->ctx, p->device, h->addr, pl->need, &mapped);
	if (!rc)
		note_cost(&p->map_ns, gp_pool_clock_ns(p) - t0, mapped / p->gran);
	if (rc) {
		GP_COUNT(p->st, segment_alloc_failures, 1);
		p->grow_err = rc; /* -ENOMEM, -EDQUOT, or -EIO: the device's own error (backend.h) */
	}
	if (!mapped) {
		gp_block_put(p, x);
		return NULL;
	}
	hole_tree_erase(p, h);
	if (mapped == h->size) {
		/* the hole is all mapped now: it becomes the block */
		gp_block_put(p, x);
		x = h;
		if (s->tail == h)
			s->tail = NULL;
	} else {
		x->addr = h->addr;
		x->size = mapped;
		x->seg = s;
		x->prev = h->prev;
		x->next = h;
		if (h->prev)
			h->prev->next = x;
		else
			s->first = x;
		h->prev = x;
		h->addr += mapped;
		h->size -= mapped;
		hole_tree_insert(p, h);
	}
	x->state = B_FREE;
	x->list = NULL;
	x->gen = p->issued;
	x->idle_since = 0;
	s->mapped += mapped;
	s->used = true;
	GP_GAUGE_ADD(p->st, reserved_bytes, mapped);
	GP_GAUGE_ADD(p->st, free_blocks, 1);
	gp_pool_update_cached(p);
	if (rc) {
		/* what could not be unmapped again stays, mapped and free, for anyone */
		gp_log(GP_LOG_WARN, "device %d: mapping %zu bytes failed (%d) and %zu bytes could not be unmapped again; "
				    "they stay in the pool's cache", p->device, pl->need, rc, mapped);
		gp_freelist_insert(p, x, &p->ready);
		return NULL;
	}
	struct gp_block *pred = pl->pred;
	if (pred) {
		gp_freelist_take(pred->list, pred);
		pred->size += x->size;
		pred->next = x->next;
		if (x->next)
			x->next->prev = pred;
		gp_block_put(p, x);
		GP_GAUGE_SUB(p->st, free_blocks, 1);
		x = pred;
	}
	return x;
}

struct gp_block *gp_vmm_grow(gp_pool *p, size_t rounded, gp_stream stream)
{
	int t = gp_tree_for(p, rounded);
	struct plan pl = {NULL, NULL, 0};
	consider(p, &pl, gp_treap_lower_bound(p->holes.root[t], rounded), rounded, stream);
	for (struct gp_segment *s = p->segs; s; s = s->next)
		if (s->vmm && s->small == (t == T_SMALL))
			consider(p, &pl, s->tail, rounded, stream);
	size_t need = pl.hole ? pl.need : gp_round_up(rounded, p->gran);
	/* memory held outside the pool (unpooled_bytes) counts against the same limit; the
	 * backend's budget (if any) is the exact check, this one keeps the counters right */
	if (p->prm.limit && p->st->reserved_bytes + p->st->unpooled_bytes + need > p->prm.limit) {
		GP_COUNT(p->st, limit_refusals, 1);
		return NULL;
	}
	if (!pl.hole) {
		struct gp_segment *s = reserve(p, rounded, t);
		if (!s) /* no address space from the driver: a whole segment, as without it */
			return gp_segment_grow(p, rounded);
		pl = (struct plan){s->tail, NULL, need};
	}
	return take_hole(p, &pl);
}

/* ---- giving chunks back --------------------------------------------------------------- */

/* A new block [at, end of b) of b's list cut off the end of free block b (out of its tree),
 * using the struct n; b keeps [b->addr, at). */
static void cut(gp_pool *p, struct gp_block *b, uintptr_t at, struct gp_block *n)
{
	n->addr = at;
	n->size = b->addr + b->size - at;
	n->seg = b->seg;
	n->state = B_FREE;
	n->list = b->list;
	n->gen = b->gen;
	n->idle_since = b->idle_since;
	n->prev = b;
	n->next = b->next;
	if (b->next)
		b->next->prev = n;
	b->next = n;
	b->size = at - b->addr;
	GP_GAUGE_ADD(p->st, free_blocks, 1);
}

static void tree_put(struct gp_block *b)
{
	b->left = b->right = NULL;
	gp_treap_insert(&b->list->root[gp_tree_of(b)], b);
}

/* [ca, ca + n) lies in free blocks, `from` the first of their run, and was unmapped: it
 * becomes a hole, the free blocks around it cut at its ends (with the structs n1, n2 when
 * needed, else given back). Answers the hole (merged with its neighbours). */
static struct gp_block *make_hole(gp_pool *p, struct gp_block *from, uintptr_t ca, size_t n,
				  struct gp_block *n1, struct gp_block *n2)
{
	uintptr_t ce = ca + n;
	struct gp_block *b = from;
	while (b->addr + b->size <= ca)
		b = b->next;
	gp_freelist_take(b->list, b);
	if (b->addr < ca) {
		cut(p, b, ca, n1);
		tree_put(b); /* the part before the hole, in its list again */
		b = n1;
		n1 = NULL;
	}
	/* b starts at ca: it takes in every block up to ce */
	while (b->addr + b->size < ce) {
		struct gp_block *x = b->next;
		gp_freelist_take(x->list, x);
		if (x->addr + x->size <= ce) {
			b->size += x->size;
			block_unlink(p, x);
			GP_GAUGE_SUB(p->st, free_blocks, 1);
		} else {
			size_t in = ce - x->addr;
			b->size += in;
			x->addr = ce;
			x->size -= in;
			tree_put(x);
		}
	}
	if (b->addr + b->size > ce) {
		cut(p, b, ce, n2);
		tree_put(n2);
		n2 = NULL;
	}
	GP_GAUGE_SUB(p->st, free_blocks, 1);
	if (n1)
		gp_block_put(p, n1);
	if (n2)
		gp_block_put(p, n2);
	return hole_put(p, b);
}

/* One pass over the free chunks of the virtual-memory segments (release, decay). */
struct pass {
	size_t want;           /* bytes still to give back (SIZE_MAX: no bound) */
	bool decay;            /* only runs idle since now - after or earlier (after 0: none) */
	uint64_t now, after;
	bool no_sync;          /* only runs that need no wait for the device */
	size_t released;
	size_t left;           /* what could still go back after the pass */
	unsigned ranges;       /* ranges unmapped */
	int rc;                /* the backend's error: the pass stops */
};

/* Unmaps [ca, ca + len) inside the run of free blocks starting at `from` in s: 0 and the
 * bytes unmapped (*done), or the backend's error (with what it unmapped before it). The
 * hole made is *hole (NULL when nothing went). */
static int unmap_range(gp_pool *p, struct gp_block *from, uintptr_t ca, size_t len, size_t *done,
		       struct gp_block **hole)
{
	struct gp_segment *s = from->seg;
	*done = 0;
	*hole = NULL;
	struct gp_block *n1 = gp_block_new(p), *n2 = n1 ? gp_block_new(p) : NULL;
	if (!n2) {
		if (n1)
			gp_block_put(p, n1);
		return -ENOMEM;
	}
	/* memory freed on a stream may still be used by work the device has queued; the
	 * ready list's is past a fence, or was never used */
	bool sync = false;
	for (const struct gp_block *b = from; b && b->addr < ca + len; b = b->next)
		if (b->addr + b->size > ca && b->list != &p->ready)
			sync = true;
	uint64_t t0 = gp_pool_clock_ns(p);
	int rc = p->be->vmm_unmap(p->be->ctx, p->device, ca, len, sync, done);
	if (*done > len)
		*done = len;
	if (!rc && !sync) /* a wait for the device is not the unmap's cost */
		note_cost(&p->unmap_ns, gp_pool_clock_ns(p) - t0, *done / p->gran);
	if (!*done) {
		gp_block_put(p, n1);
		gp_block_put(p, n2);
		return rc;
	}
	*hole = make_hole(p, from, ca, *done, n1, n2);
	s->mapped -= *done;
	GP_GAUGE_SUB(p->st, reserved_bytes, *done);
	GP_COUNT(p->st, released_bytes, *done);
	gp_pool_update_cached(p);
	return rc;
}

/* A segment all of whose reservation is one hole goes back to the backend. */
static void unreserve_if_empty(gp_pool *p, struct gp_segment *s)
{
	struct gp_block *h = s->first;
	if (h->state != B_HOLE || h->size != s->size)
		return;
	if (p->be->vmm_unreserve(p->be->ctx, p->device, s->addr, s->size) != 0)
		return; /* kept: the next release tries again */
	hole_tree_erase(p, h);
	gp_block_put(p, h);
	gp_segment_unlink(p, s);
	free(s);
}

static void pass_segment(gp_pool *p, struct gp_segment *s, struct pass *ps)
{
	size_t g = p->gran;
	for (struct gp_block *b = s->first; b;) {
		if (b->state != B_FREE) {
			b = b->next;
			continue;
		}
		struct gp_block *from = b;
		uintptr_t ra = b->addr, rb = ra;
		bool idle = true, sync = false;
		for (; b && b->state == B_FREE; b = b->next) {
			rb = b->addr + b->size;
			sync |= b->list != &p->ready;
			if (ps->decay) {
				if (!b->idle_since)
					b->idle_since = ps->now;
				idle &= ps->now - b->idle_since >= ps->after;
			}
		}
		uintptr_t ca = gp_round_up(ra, g), cb = rb & ~(uintptr_t)(g - 1);
		if (cb <= ca)
			continue;
		size_t len = cb - ca;
		if (ps->rc || !ps->want || (ps->no_sync && sync) || (ps->decay && (!ps->after || !idle))) {
			ps->left += len;
			continue;
		}
		size_t take = len;
		if (ps->want != SIZE_MAX && gp_round_up(ps->want, g) < take)
			take = gp_round_up(ps->want, g);
		size_t done = 0;
		struct gp_block *hole = NULL;
		int rc = unmap_range(p, from, ca, take, &done, &hole);
		ps->released += done;
		if (!hole)
			ps->left += len; /* else what is left of the run is looked at again, after the hole */
		if (done) {
			ps->ranges++;
			if (ps->want != SIZE_MAX)
				ps->want = done >= ps->want ? 0 : ps->want - done;
		}
		if (rc) {
			if (rc != -EBUSY)
				gp_log(GP_LOG_WARN, "device %d: unmapping %zu bytes of cached memory failed (%d) after %zu; "
						    "the rest stays mapped, in the pool's cache", p->device, take, rc, done);
			ps->rc = rc;
		}
		if (hole)
			b = hole->next; /* the run's blocks may be gone: go on after the hole */
	}
}

/* Runs the pass over every virtual-memory segment (and gives back the reservations it left
 * empty). */
static void pass_all(gp_pool *p, struct pass *ps)
{
	for (struct gp_segment *s = p->segs, *nx; s; s = nx) {
		nx = s->next;
		if (!s->vmm)
			continue;
		pass_segment(p, s, ps);
		unreserve_if_empty(p, s);
	}
}

/* Bytes of whole chunks inside runs of free blocks of the virtual-memory segments, and
 * (`whole`) of whole free segments: what a release could give back now. */
static size_t releasable_of(const gp_pool *p, bool whole)
{
	size_t n = 0, g = p->gran;
	for (const struct gp_segment *s = p->segs; s; s = s->next) {
		const struct gp_block *b = s->first;
		if (!s->vmm) {
			while (whole && b && b->state == B_FREE)
				b = b->next;
			n += whole && !b ? s->size : 0;
			continue;
		}
		while (b) {
			if (b->state != B_FREE) {
				b = b->next;
				continue;
			}
			uintptr_t ra = b->addr, rb = ra;
			for (; b && b->state == B_FREE; b = b->next)
				rb = b->addr + b->size;
			uintptr_t ca = gp_round_up(ra, g), cb = rb & ~(uintptr_t)(g - 1);
			n += cb > ca ? cb - ca : 0;
		}
	}
	return n;
}

static size_t releasable(const gp_pool *p) { return releasable_of(p, true); }

/* Gives back up to `want` bytes of free chunks: first those that need no wait for the device,
 * then the rest. `before`: what the caller gave back already (whole segments), for the count
 * of releases. Answers the bytes of chunks given back. */
static size_t give_chunks(gp_pool *p, size_t want, size_t before)
{
	struct pass ps = {.want = want, .no_sync = true};
	pass_all(p, &ps);
	if (ps.want && !ps.rc) {
		ps.no_sync = false;
		pass_all(p, &ps);
	}
	if (ps.released) {
		if (!before)
			GP_COUNT(p->st, releases, 1);
		gp_freelist_largest_recount(p);
		GP_GAUGE_SET(p->st, releasable_bytes, releasable(p));
	}
	return ps.released;
}

size_t gp_vmm_release_locked(gp_pool *p, size_t keep)
{
	size_t released = gp_segment_release_locked(p, keep);
	if (!p->gran || p->st->cached_bytes <= keep)
		return released;
	return released + give_chunks(p, p->st->cached_bytes - keep, released);
}

size_t gp_vmm_give_locked(gp_pool *p, size_t want)
{
	size_t released = gp_segment_give_locked(p, want);
	size_t floor = atomic_load_explicit(&p->floor, memory_order_relaxed), rsv = p->st->reserved_bytes;
	size_t more = want > released ? want - released : 0, room = rsv > floor ? rsv - floor : 0;
	if (more > room)
		more = room; /* never below the floor */
	if (!p->gran || !more)
		return released;
	return released + give_chunks(p, more, released);
}

/* Moving free chunks to where a request needs them takes at most 1/GP_MOVE_SHARE of the
 * clock, with up to GP_MOVE_CREDIT_NS of it saved up: a program whose every step would need
 * its free chunks moved (a layout that strands a large free block each step, GPT-2's logits)
 * grows once instead, as a pool without virtual memory would, while one whose shapes change
 * now and then (BERT's) gets its memory moved each time.
 *
 * A move is made only where the free chunks cover all of `over`, so that the peak holds. One
 * that could not keep it would raise the peak anyway, by less, and give back chunks the
 * program's next step maps again: where the credit then runs short, that step grows past the
 * raised peak as well. On GPT-2 at the H100's chunk costs (BENCHMARKS.md section 29), moving
 * half of such a shortfall made the peak 3.9% higher than never moving.
 *
 * Only chunks move. A whole free segment (segments:auto keeps one for a large cudaMalloc, so
 * that IPC can export it) is the next such cudaMalloc's memory: given back here, it was taken
 * again at once, above the peak (BERT's replay under segments:auto: 1.254 of what it asked
 * for, against 1.170 with chunks only). */
#define GP_MOVE_SHARE 128
#define GP_MOVE_CREDIT_NS (64ull * 1000 * 1000)

size_t gp_vmm_release_for_peak(gp_pool *p, size_t over)
{
	uint64_t now = gp_pool_clock_ns(p);
	if (!p->move_credit_at) {
		p->move_credit_at = now;
		p->move_credit_ns = GP_MOVE_CREDIT_NS;
	}
	if (now > p->move_credit_at) {
		p->move_credit_ns += (now - p->move_credit_at) / GP_MOVE_SHARE;
		if (p->move_credit_ns > GP_MOVE_CREDIT_NS)
			p->move_credit_ns = GP_MOVE_CREDIT_NS;
		p->move_credit_at = now;
	}
	/* each chunk given back now is mapped again where it is needed, now or later */
	uint64_t chunks = gp_round_up(over, p->gran) / p->gran, per = p->map_ns + p->unmap_ns;
	if (chunks * per > p->move_credit_ns || releasable_of(p, false) < over)
		return 0;
	size_t r = give_chunks(p, over, 0);
	uint64_t t1 = gp_pool_clock_ns(p), spent = (t1 > now ? t1 - now : 0) + r / p->gran * p->map_ns;
	p->move_credit_ns -= spent < p->move_credit_ns ? spent : p->move_credit_ns;
	p->move_credit_at = t1 > now ? t1 : now;
	return r;
}

size_t gp_vmm_decay_locked(gp_pool *p, uint64_t now, uint64_t after_ns, size_t budget, size_t *kept)
{
	size_t whole = 0;
	size_t released = gp_segment_decay_locked(p, now, after_ns, budget, &whole);
	if (!p->gran) {
		if (kept)
			*kept = whole;
		return released;
	}
	size_t floor = atomic_load_explicit(&p->floor, memory_order_relaxed), rsv = p->st->reserved_bytes;
	size_t want = budget > released ? budget - released : 0, room = rsv > floor ? rsv - floor : 0;
	struct pass ps = {
		.want = want < room ? want : room, /* never below the floor */
		.decay = true,
		.now = now ? now : 1, /* idle_since 0 means "not yet" */
		.after = after_ns,
	};
	pass_all(p, &ps);
	if (ps.released) {
		if (!released)
			GP_COUNT(p->st, releases, 1);
		GP_COUNT(p->st, decay_releases, ps.ranges);
		GP_COUNT(p->st, decayed_bytes, ps.released);
		gp_freelist_largest_recount(p);
	}
	GP_GAUGE_SET(p->st, releasable_bytes, whole + ps.left);
	if (kept)
		*kept = whole + ps.left;
	return released + ps.released;
}

void gp_vmm_segment_destroy(gp_pool *p, struct gp_segment *s)
{
	bool all = true;
	for (const struct gp_block *b = s->first; b;) {
		if (b->state == B_HOLE) {
			b = b->next;
			continue;
		}
		uintptr_t a = b->addr, e = a;
		for (; b && b->state != B_HOLE; b = b->next)
			e = b->addr + b->size;
		size_t done = 0;
		/* its blocks may still be in use by queued work (live ones are abandoned) */
		if (p->be->vmm_unmap(p->be->ctx, p->device, a, e - a, true, &done) != 0 || done != e - a)
			all = false;
	}
	if (all)
		(void)p->be->vmm_unreserve(p->be->ctx, p->device, s->addr, s->size);
	else
		gp_log(GP_LOG_WARN, "device %d: giving a virtual-memory segment of %zu bytes back failed; "
				    "its memory is lost to the pool", p->device, s->size);
}
