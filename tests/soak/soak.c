/* The soak: worker threads allocate and free on two pools (two devices: device 0 with
 * virtual-memory segments of 2 MiB chunks, device 1 with whole ones) for
 * GPUPOOL_SOAK_SECONDS (default 5) with the invariant checker after every operation, while a
 * fence thread fences as the shim's does, an injector makes the backend fail allocations and
 * chunk maps and unmaps partway, and refuse syncs, segment frees and unmaps (a capture) for
 * short windows, and a reader copies the counters as gpupool-stat does. Random sizes, random streams (GP_NO_STREAM, streams every
 * thread shares, a private one per thread that is retired and replaced), blocks freed by
 * another thread than the one that allocated them, frees that try the wrong pool first (as the
 * shim's do), cache releases. Checked: every live block lies apart from every other (a shadow
 * map of live blocks per device), only the errors the injection explains, and at the end
 * nothing lost: every counter back to zero, every segment back in the backend.
 * GPUPOOL_SOAK_THREADS sets the number of workers (default 4). Exit status 0, or 1 after the
 * first thing found wrong. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_fake.h"
#include "check.h"
#include "pool.h"
#include "stats.h"
#include "xorshift.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define NDEV 2
#define MAXTHREADS 64
#define MAXLIVE 48     /* live blocks per worker */
#define HANDOFF 256    /* blocks waiting for another worker to free them */

static const gp_stream shared_streams[] = {0x1000, 0x2000, 0x3000};

/* ---- the shadow map: the live blocks of one device, sorted by address ------------------ */

struct span {
	uintptr_t lo, hi;
};

struct shadow {
	pthread_mutex_t mu;
	struct span *v;
	size_t n;
};

static size_t shadow_find(const struct shadow *sh, uintptr_t lo)
{
	size_t a = 0, b = sh->n;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (sh->v[m].lo < lo)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

/* [lo, hi) was just handed out: it must not overlap a block still live. */
static void shadow_insert(struct shadow *sh, uintptr_t lo, uintptr_t hi)
{
	pthread_mutex_lock(&sh->mu);
	size_t i = shadow_find(sh, lo);
	if ((i > 0 && sh->v[i - 1].hi > lo) || (i < sh->n && sh->v[i].lo < hi)) {
		fprintf(stderr, "soak: block [%#lx, %#lx) overlaps a live block\n", (unsigned long)lo,
			(unsigned long)hi);
		exit(1);
	}
	memmove(&sh->v[i + 1], &sh->v[i], (sh->n - i) * sizeof *sh->v);
	sh->v[i] = (struct span){lo, hi};
	sh->n++;
	pthread_mutex_unlock(&sh->mu);
}

/* Before the free: once freed, another thread may be handed the same bytes. */
static void shadow_remove(struct shadow *sh, uintptr_t lo)
{
	pthread_mutex_lock(&sh->mu);
	size_t i = shadow_find(sh, lo);
	CHECK(i < sh->n && sh->v[i].lo == lo);
	memmove(&sh->v[i], &sh->v[i + 1], (sh->n - i - 1) * sizeof *sh->v);
	sh->n--;
	pthread_mutex_unlock(&sh->mu);
}

/* ---- the devices: a pool over the fake backend, with failures injected ----------------- */

struct dev {
	int index;
	struct gp_fake_backend fb; /* called under the pool lock, except device_sync */
	struct gp_backend be;      /* the wrappers below */
	struct gpupool_device_stats st;
	gp_pool *p;
	uint64_t rng;              /* under the pool lock (segment_alloc, stream_wait) */
	atomic_int fail_permille;  /* segment_alloc, and a chunk map or unmap partway, fail this
				    * often (the injector sets it) */
	atomic_int busy;           /* device_sync and segment_free answer -EBUSY */
	atomic_size_t used;        /* bytes the backend holds, for mem_info (fb.used is locked) */
	atomic_ullong injected_fails, busy_answers, waits_refused;
	atomic_ullong allocs, frees; /* the workers' tally */
	atomic_ullong marks, mark_drops; /* markers recorded and dropped */
	uint64_t fence_rng;        /* the fencer's */
	struct shadow sh;
};

static struct dev devs[NDEV];
static atomic_int stop;

static int w_segment_alloc(void *ctx, int device, size_t size, uintptr_t *addr)
{
	struct dev *d = ctx;
	int permille = atomic_load_explicit(&d->fail_permille, memory_order_relaxed);
	if (permille && (int)(xorshift64(&d->rng) % 1000) < permille) {
		atomic_fetch_add(&d->injected_fails, 1);
		return -ENOMEM;
	}
	int rc = d->fb.be.segment_alloc(&d->fb, device, size, addr);
	if (rc == 0)
		atomic_fetch_add(&d->used, size);
	return rc;
}

/* In a busy window (a capture, as far as the pool can tell), syncs and segment frees are
 * refused: -EBUSY, counted. */
static int busy_now(struct dev *d)
{
	if (!atomic_load_explicit(&d->busy, memory_order_relaxed))
		return 0;
	atomic_fetch_add(&d->busy_answers, 1);
	return -EBUSY;
}

static int w_segment_free(void *ctx, int device, uintptr_t addr, size_t size)
{
	struct dev *d = ctx;
	if (busy_now(d))
		return -EBUSY;
	int rc = d->fb.be.segment_free(&d->fb, device, addr, size);
	if (rc == 0)
		atomic_fetch_sub(&d->used, size);
	return rc;
}

/* Not under the pool lock, from any thread at once: reads nothing of fb but what never
 * changes, and sometimes takes a while, as a GPU with work queued does. */
/* Virtual memory (device 0): maps and unmaps refused partway as allocations are, unmaps
 * refused in a busy window; what is mapped counted in `used`. Under the pool lock. */
static bool fail_now(struct dev *d)
{
	int permille = atomic_load_explicit(&d->fail_permille, memory_order_relaxed);
	if (!permille || (int)(xorshift64(&d->rng) % 1000) >= permille)
		return false;
	atomic_fetch_add(&d->injected_fails, 1);
	return true;
}

static int w_vmm_granularity(void *ctx, int device, size_t *bytes)
{
	struct dev *d = ctx;
	return d->fb.be.vmm_granularity(&d->fb, device, bytes);
}

static int w_vmm_reserve(void *ctx, int device, size_t size, uintptr_t *addr)
{
	struct dev *d = ctx;
	return d->fb.be.vmm_reserve(&d->fb, device, size, addr);
}

static int w_vmm_unreserve(void *ctx, int device, uintptr_t addr, size_t size)
{
	struct dev *d = ctx;
	return d->fb.be.vmm_unreserve(&d->fb, device, addr, size);
}

static int w_vmm_map(void *ctx, int device, uintptr_t addr, size_t size, size_t *mapped)
{
	struct dev *d = ctx;
	d->fb.fail_map_at = fail_now(d) ? d->fb.chunk_maps + 1 + xorshift64(&d->rng) % 4 : 0;
	d->fb.fail_unmap_at = fail_now(d) ? d->fb.chunk_unmaps + 1 : 0; /* the undo refused too */
	int rc = d->fb.be.vmm_map(&d->fb, device, addr, size, mapped);
	d->fb.fail_map_at = d->fb.fail_unmap_at = 0;
	atomic_fetch_add(&d->used, *mapped);
	return rc;
}

static int w_vmm_unmap(void *ctx, int device, uintptr_t addr, size_t size, bool sync, size_t *unmapped)
{
	struct dev *d = ctx;
	*unmapped = 0;
	if (busy_now(d))
		return -EBUSY;
	d->fb.fail_unmap_at = fail_now(d) ? d->fb.chunk_unmaps + 1 + xorshift64(&d->rng) % 4 : 0;
	int rc = d->fb.be.vmm_unmap(&d->fb, device, addr, size, sync, unmapped);
	d->fb.fail_unmap_at = 0;
	atomic_fetch_sub(&d->used, *unmapped);
	return rc;
}

static int w_device_sync(void *ctx, int device)
{
	static _Thread_local uint64_t rng = XORSHIFT_SEED;
	struct dev *d = ctx;
	if (busy_now(d))
		return -EBUSY;
	if (xorshift64(&rng) % 8 == 0)
		usleep(50);
	return d->fb.be.device_sync(&d->fb, device);
}

static int w_stream_wait(void *ctx, int device, gp_stream from, gp_stream to)
{
	struct dev *d = ctx;
	if (xorshift64(&d->rng) % 16 == 0) {
		atomic_fetch_add(&d->waits_refused, 1);
		return -EAGAIN; /* "cannot order after that stream from here" */
	}
	return d->fb.be.stream_wait(&d->fb, device, from, to);
}

/* Markers (called under the pool lock, except w_fence_wait): a marker is done at a random
 * later query, or when waited for, which sometimes takes a while; refused like a sync while
 * a "capture" is on. */
static int w_fence_mark(void *ctx, int device, uint64_t *token)
{
	struct dev *d = ctx;
	(void)device;
	if (busy_now(d))
		return -EBUSY;
	*token = atomic_fetch_add(&d->marks, 1) + 1;
	return 0;
}

static int w_fence_query(void *ctx, int device, uint64_t token)
{
	struct dev *d = ctx;
	(void)device, (void)token;
	return xorshift64(&d->rng) % 4 == 0 ? 0 : -EAGAIN;
}

static int w_fence_wait(void *ctx, int device, uint64_t token)
{
	static _Thread_local uint64_t rng = XORSHIFT_SEED;
	(void)ctx, (void)device, (void)token;
	if (xorshift64(&rng) % 8 == 0)
		usleep(50);
	return 0;
}

static void w_fence_drop(void *ctx, int device, uint64_t token)
{
	struct dev *d = ctx;
	(void)device, (void)token;
	atomic_fetch_add(&d->mark_drops, 1);
}

static int w_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
	struct dev *d = ctx;
	(void)device;
	*total_bytes = d->fb.capacity;
	size_t used = atomic_load(&d->used);
	*free_bytes = used < d->fb.capacity ? d->fb.capacity - used : 0;
	return 0;
}

static void dev_init(struct dev *d, int index)
{
	memset(d, 0, sizeof *d);
	d->index = index;
	gp_fake_backend_init(&d->fb, 2 * GiB);
	/* the devices' addresses apart, so that a free can find its pool by trying both */
	d->fb.next_addr = index ? (uintptr_t)1 << 59 : (uintptr_t)1 << 44;
	d->be = (struct gp_backend){.ctx = d, .segment_alloc = w_segment_alloc, .segment_free = w_segment_free,
				    .device_sync = w_device_sync, .stream_wait = w_stream_wait, .mem_info = w_mem_info,
				    .fence_mark = w_fence_mark, .fence_query = w_fence_query, .fence_wait = w_fence_wait,
				    .fence_drop = w_fence_drop};
	if (index == 0) { /* virtual memory: device 0 */
		d->fb.granularity = 2 * MiB;
		d->be.vmm_granularity = w_vmm_granularity;
		d->be.vmm_reserve = w_vmm_reserve;
		d->be.vmm_unreserve = w_vmm_unreserve;
		d->be.vmm_map = w_vmm_map;
		d->be.vmm_unmap = w_vmm_unmap;
	}
	d->rng = XORSHIFT_SEED + (uint64_t)index;
	d->fence_rng = XORSHIFT_SEED ^ (uint64_t)(index + 1);
	pthread_mutex_init(&d->sh.mu, NULL);
	d->sh.v = calloc(MAXTHREADS * MAXLIVE + HANDOFF, sizeof *d->sh.v);
	CHECK(d->sh.v);
	struct gp_pool_params prm;
	gp_pool_params_default(&prm);
	prm.check = true;
	prm.max_split_size = 32 * MiB;
	prm.limit = index ? GiB : 0; /* device 1 runs into its limit, device 0 into the backend's capacity */
	prm.segments = GP_SEGMENTS_VMM;
	if (index)
		prm.release_threshold = 256 * MiB;
	CHECK(gp_pool_create(&d->p, index, &prm, &d->be, &d->st) == 0);
}

/* ---- blocks ----------------------------------------------------------------------------- */

struct live {
	uintptr_t addr;
	size_t size, rounded;
	int dev;
};

static struct {
	pthread_mutex_t mu;
	struct live v[HANDOFF];
	size_t n;
	atomic_ullong handed;
} handoff = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool handoff_push(const struct live *x)
{
	pthread_mutex_lock(&handoff.mu);
	bool ok = handoff.n < HANDOFF;
	if (ok)
		handoff.v[handoff.n++] = *x;
	pthread_mutex_unlock(&handoff.mu);
	if (ok)
		atomic_fetch_add(&handoff.handed, 1);
	return ok;
}

static bool handoff_pop(struct live *x, uint64_t r)
{
	pthread_mutex_lock(&handoff.mu);
	bool ok = handoff.n > 0;
	if (ok) {
		size_t k = (size_t)(r % handoff.n);
		*x = handoff.v[k];
		handoff.v[k] = handoff.v[--handoff.n];
	}
	pthread_mutex_unlock(&handoff.mu);
	return ok;
}

/* Frees x on stream s as the shim does: the pool of a device picked at random first (the
 * current device), then the other. */
static void free_block(const struct live *x, gp_stream s, uint64_t r)
{
	shadow_remove(&devs[x->dev].sh, x->addr);
	int first = (int)(r & 1);
	int rc = gp_pool_free(devs[first].p, x->addr, s);
	if (first != x->dev) {
		CHECK(rc == -ENOENT);
		rc = gp_pool_free(devs[x->dev].p, x->addr, s);
	}
	CHECK(rc == 0);
	atomic_fetch_add(&devs[x->dev].frees, 1);
}

/* ---- the threads ------------------------------------------------------------------------ */

struct worker {
	int id;
	pthread_t t;
	uint64_t rng;
	unsigned gen;               /* of the private stream */
	struct live live[MAXLIVE];
	size_t nlive;
	unsigned long long ops, ooms, retires, releases, lookups;
};

static gp_stream private_stream(const struct worker *w)
{
	return (gp_stream)0x10000000u + ((gp_stream)w->id << 24) + ((gp_stream)w->gen << 12);
}

/* A stream to allocate or free on: none (cudaMalloc, cudaFree), a shared one, or the
 * worker's own. */
static gp_stream pick_stream(const struct worker *w, uint64_t r)
{
	switch (r % 4) {
	case 0:
		return GP_NO_STREAM;
	case 1:
		return shared_streams[(r >> 2) % 3];
	default:
		return private_stream(w);
	}
}

/* log-uniform 1 B .. 64 MiB, mostly small */
static size_t pick_size(uint64_t r)
{
	unsigned bits = (unsigned)(r % 2 ? (r >> 1) % 17 : (r >> 1) % 27);
	return ((size_t)1 << bits) + (size_t)((r >> 8) & (((uint64_t)1 << bits) - 1));
}

static void worker_alloc(struct worker *w, uint64_t r)
{
	int d = (int)((r >> 40) & 1);
	size_t size = pick_size(r >> 12);
	uintptr_t a = 0;
	int rc = gp_pool_alloc(devs[d].p, size, pick_stream(w, r >> 4), &a);
	if (rc == -ENOMEM) {
		w->ooms++;
		return;
	}
	CHECK(rc == 0);
	CHECK(a % 512 == 0);
	struct live x = {a, size, (size + 511) & ~(size_t)511, d};
	shadow_insert(&devs[d].sh, a, a + x.rounded);
	atomic_fetch_add(&devs[d].allocs, 1);
	w->live[w->nlive++] = x;
}

static void worker_free(struct worker *w, uint64_t r)
{
	size_t k = (size_t)((r >> 8) % w->nlive);
	struct live x = w->live[k];
	w->live[k] = w->live[--w->nlive];
	if ((r >> 32) % 8 == 0 && handoff_push(&x))
		return; /* another worker frees it */
	free_block(&x, pick_stream(w, r >> 40), r >> 50);
}

static void worker_lookup(struct worker *w, uint64_t r)
{
	const struct live *x = &w->live[(r >> 8) % w->nlive];
	struct gp_block_info bi;
	CHECK(gp_pool_lookup(devs[x->dev].p, x->addr + (size_t)((r >> 32) % x->size), &bi) == 0);
	CHECK(bi.addr == x->addr && bi.size >= x->rounded && bi.requested == x->size);
	CHECK(bi.segment <= bi.addr && bi.addr + bi.size <= bi.segment + bi.segment_size);
	w->lookups++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint64_t r = xorshift64(&w->rng);
		unsigned what = (unsigned)(r % 1000);
		w->ops++;
		if (what < 4) {
			/* cudaStreamDestroy: its blocks wait for a fence; a new stream replaces it */
			for (int d = 0; d < NDEV; d++)
				gp_pool_stream_retire(devs[d].p, private_stream(w));
			w->gen++;
			w->retires++;
		} else if (what < 7) {
			gp_pool_release(devs[(r >> 10) & 1].p, (r >> 11) & 1 ? 0 : 64 * MiB);
			w->releases++;
		} else if (what < 30 && w->nlive) {
			worker_lookup(w, r);
		} else if (what < 60) {
			struct live x;
			if (handoff_pop(&x, r >> 10))
				free_block(&x, pick_stream(w, r >> 30), r >> 50);
		} else if (w->nlive < MAXLIVE && (what < 540 || w->nlive == 0)) {
			worker_alloc(w, r);
		} else if (w->nlive) {
			worker_free(w, r);
		}
	}
	while (w->nlive) {
		w->nlive--;
		free_block(&w->live[w->nlive], w->nlive % 2 ? GP_NO_STREAM : private_stream(w), w->nlive);
	}
	return NULL;
}

static atomic_ullong fences, fences_busy;

/* The fence thread's loop (src/process/fence_thread.c): fence the pools that have pending frees. */
static void *fencer_main(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int d = 0; d < NDEV; d++) {
			if (!gp_pool_has_pending(devs[d].p))
				continue;
			/* as the fence thread does: markers, and now and then a device_sync */
			int rc = xorshift64(&devs[d].fence_rng) % 4 ? gp_pool_fence_poll(devs[d].p, true) : gp_pool_fence(devs[d].p);
			CHECK(rc == 0 || rc == 1 || rc == -EBUSY);
			rc = rc == 1 ? 0 : rc;
			atomic_fetch_add(rc ? &fences_busy : &fences, 1);
		}
		usleep(200);
	}
	return NULL;
}

/* Short windows of failing segment allocations (some, or all) and of refused syncs and
 * segment frees, on one device at a time. */
static void *injector_main(void *arg)
{
	(void)arg;
	uint64_t rng = XORSHIFT_SEED ^ 0x5eed;
	static const int rates[] = {20, 200, 1000};
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint64_t r = xorshift64(&rng);
		struct dev *d = &devs[r & 1];
		useconds_t len = (useconds_t)(500 + (r >> 8) % 5000);
		if ((r >> 1) & 1) {
			atomic_store(&d->fail_permille, rates[(r >> 2) % 3]);
			usleep(len);
			atomic_store(&d->fail_permille, 0);
		} else {
			atomic_store(&d->busy, 1);
			usleep(len);
			atomic_store(&d->busy, 0);
		}
		usleep((useconds_t)(2000 + (r >> 24) % 20000));
	}
	return NULL;
}

static atomic_ullong snapshots;

/* gpupool-stat's view: a consistent copy of each slot obeys the pool's arithmetic. */
static void *reader_main(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int d = 0; d < NDEV; d++) {
			struct gpupool_device_stats s;
			if (gp_stats_snapshot(&devs[d].st, &s, 1000)) {
				CHECK(s.cached_bytes == s.reserved_bytes - s.allocated_bytes);
				CHECK(s.requested_bytes <= s.allocated_bytes && s.allocated_bytes <= s.reserved_bytes);
				CHECK(s.pending_bytes <= s.cached_bytes && s.largest_free_block <= s.cached_bytes);
				CHECK(s.live_blocks <= s.allocs && s.frees <= s.allocs);
				CHECK(s.device == d && s.active == 1);
				atomic_fetch_add(&snapshots, 1);
			}
			size_t f, t;
			CHECK(gp_pool_mem_info(devs[d].p, &f, &t) == 0 && f <= t);
			(void)gp_pool_has_pending(devs[d].p);
		}
		usleep(100);
	}
	return NULL;
}

static long env_long(const char *name, long def, long lo, long hi)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < lo || v > hi) {
		fprintf(stderr, "soak: %s=%s: want a number from %ld to %ld\n", name, s, lo, hi);
		exit(2);
	}
	return v;
}

int main(void)
{
	long secs = env_long("GPUPOOL_SOAK_SECONDS", 5, 1, 600);
	int nthreads = (int)env_long("GPUPOOL_SOAK_THREADS", 4, 1, MAXTHREADS);
	for (int d = 0; d < NDEV; d++)
		dev_init(&devs[d], d);
	static struct worker ws[MAXTHREADS];
	pthread_t fencer, injector, reader;
	for (int i = 0; i < nthreads; i++) {
		ws[i].id = i;
		ws[i].rng = XORSHIFT_SEED + 7919 * (uint64_t)(i + 1);
		CHECK(pthread_create(&ws[i].t, NULL, worker_main, &ws[i]) == 0);
	}
	CHECK(pthread_create(&fencer, NULL, fencer_main, NULL) == 0);
	CHECK(pthread_create(&injector, NULL, injector_main, NULL) == 0);
	CHECK(pthread_create(&reader, NULL, reader_main, NULL) == 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sleep((unsigned)secs);
	atomic_store(&stop, 1);
	unsigned long long ops = 0, ooms = 0, retires = 0, releases = 0, lookups = 0;
	for (int i = 0; i < nthreads; i++) {
		CHECK(pthread_join(ws[i].t, NULL) == 0);
		ops += ws[i].ops, ooms += ws[i].ooms, retires += ws[i].retires;
		releases += ws[i].releases, lookups += ws[i].lookups;
	}
	CHECK(pthread_join(fencer, NULL) == 0);
	CHECK(pthread_join(injector, NULL) == 0);
	CHECK(pthread_join(reader, NULL) == 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	/* what is left of the hand-offs, then nothing may be missing */
	struct live x;
	while (handoff_pop(&x, 0))
		free_block(&x, GP_NO_STREAM, 0);
	printf("soak: %.1f s, %d workers, %d devices: %llu operations, %llu out-of-memory answers, "
	       "%llu blocks freed by another thread, %llu streams retired, %llu releases, %llu lookups, "
	       "%llu fences (%llu refused), %llu counter snapshots\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, nthreads, NDEV, ops,
	       ooms, (unsigned long long)handoff.handed, retires, releases, lookups, (unsigned long long)fences,
	       (unsigned long long)fences_busy, (unsigned long long)snapshots);
	for (int d = 0; d < NDEV; d++) {
		struct dev *v = &devs[d];
		const struct gpupool_device_stats *s = &v->st;
		CHECK(v->sh.n == 0);
		CHECK(gp_pool_fence(v->p) == 0);
		gp_pool_release(v->p, 0);
		CHECK(gp_pool_check(v->p) == 0);
		CHECK(v->fb.vmm_violations == 0); /* nothing mapped twice, nothing unmapped that was not */
		printf("soak: device %d: %llu allocations, %llu segments taken, %llu chunks mapped and %llu unmapped "
		       "(%llu injected failures), %llu refused syncs or segment frees, %llu stream waits refused, "
		       "%llu steals, %llu OOM retries, peak reserved %.1f MiB\n",
		       d, (unsigned long long)v->allocs, (unsigned long long)s->segment_allocs,
		       (unsigned long long)v->fb.chunks_mapped, (unsigned long long)v->fb.chunks_unmapped,
		       (unsigned long long)v->injected_fails, (unsigned long long)v->busy_answers,
		       (unsigned long long)v->waits_refused, (unsigned long long)s->stream_steals,
		       (unsigned long long)s->oom_retries, (double)s->reserved_bytes_peak / (double)MiB);
		CHECK(v->allocs == v->frees);
		CHECK(s->allocs == v->allocs && s->frees == v->frees);
		CHECK(s->allocated_bytes == 0 && s->requested_bytes == 0 && s->live_blocks == 0);
		CHECK(s->pending_frees == 0 && s->pending_bytes == 0);
		CHECK(s->reserved_bytes == 0 && s->segments == 0 && s->free_blocks == 0);
		CHECK(s->invalid_frees == 0);
		CHECK(v->allocs > 0 && s->segment_allocs > 0);
		gp_pool_destroy(v->p);
		CHECK(v->fb.used[d] == 0 && atomic_load(&v->used) == 0);
		CHECK(v->fb.nmapped == 0 && v->fb.nresv == 0 && v->fb.vmm_violations == 0);
		CHECK(d != 0 || v->fb.chunks_mapped > 0);
		gp_fake_backend_fini(&v->fb);
		printf("soak: device %d: %llu markers\n", d, (unsigned long long)v->marks);
		CHECK(v->marks > 0 && v->marks == v->mark_drops); /* every marker dropped once */
		free(v->sh.v);
	}
	CHECK(ops > 0 && fences > 0);
	return 0;
}
