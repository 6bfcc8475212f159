/* Unit tests of the pool against the fake backend: rounding, segment sizes, best fit,
 * split/merge, per-stream rules, pending frees and fences, release, limits, OOM retry,
 * bad frees, counters after every step, and a randomized run against a reference model. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend_fake.h"
#include "pool.h"
#include "xorshift.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define S1 ((gp_stream)0x1000)
#define S2 ((gp_stream)0x2000)

struct fx {
	struct gp_fake_backend fb;
	struct gpupool_device_stats st;
	struct gp_pool_params prm;
	gp_pool *p;
};

static struct fx *fx_new(void (*tune)(struct gp_pool_params *))
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	gp_fake_backend_init(&f->fb, 0);
	gp_pool_params_default(&f->prm);
	f->prm.check = true;
	if (tune)
		tune(&f->prm);
	assert_int_equal(gp_pool_create(&f->p, 0, &f->prm, &f->fb.be, &f->st), 0);
	return f;
}

static void fx_free(struct fx *f)
{
	assert_int_equal(gp_pool_check(f->p), 0);
	gp_pool_destroy(f->p);
	assert_int_equal(f->fb.used[0], 0);
	free(f);
}

static uintptr_t A(struct fx *f, size_t n, gp_stream s)
{
	uintptr_t a = 0;
	assert_int_equal(gp_pool_alloc(f->p, n, s, &a), 0);
	assert_int_equal(a % 512, 0);
	return a;
}

static void F(struct fx *f, uintptr_t a, gp_stream s) { assert_int_equal(gp_pool_free(f->p, a, s), 0); }

static void test_rounding_and_segment_sizes(void **state)
{
	(void)state;
	struct {
		size_t req, block, seg;
	} cases[] = {
		{1, 512, 2 * MiB},
		{512, 512, 2 * MiB},
		{513, 1024, 2 * MiB},
		{MiB, MiB, 2 * MiB},
		{MiB + 1, MiB + 512, 20 * MiB},
		{10 * MiB - 1, 10 * MiB, 10 * MiB}, /* rounds to 10 MiB, >= medium_max: a segment of its own */
		{10 * MiB - 512 - 1, 10 * MiB - 512, 20 * MiB},
		{10 * MiB, 10 * MiB, 10 * MiB},
		{11 * MiB, 12 * MiB, 12 * MiB}, /* a 1 MiB rest is not worth a split */
		{GiB, GiB, GiB},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct fx *f = fx_new(NULL);
		uintptr_t a = A(f, cases[i].req, GP_NO_STREAM);
		struct gp_block_info bi;
		assert_int_equal(gp_pool_lookup(f->p, a, &bi), 0);
		assert_int_equal(bi.segment_size, cases[i].seg);
		assert_int_equal(bi.size, cases[i].block);
		assert_int_equal(bi.requested, cases[i].req);
		assert_int_equal(f->st.requested_bytes, cases[i].req);
		assert_int_equal(f->st.allocated_bytes, cases[i].block);
		assert_int_equal(f->st.reserved_bytes, bi.segment_size);
		assert_int_equal(f->st.segment_allocs, 1);
		F(f, a, GP_NO_STREAM);
		fx_free(f);
	}
}

static void large_round_3m(struct gp_pool_params *prm) { prm->large_round = 3 * MiB; }

/* The geometry rules: each broken one has its bit and makes gp_pool_create refuse; a
 * large_round that is a multiple of round but not a power of two is fine. */
static void test_geometry(void **state)
{
	(void)state;
	struct gp_pool_params prm;
	gp_pool_params_default(&prm);
	assert_int_equal(gp_pool_params_check(&prm), 0);
	assert_int_equal(prm.small_max, GP_POOL_DEFAULT_SMALL_MAX_MIB * MiB);
	assert_int_equal(prm.large_round, GP_POOL_DEFAULT_LARGE_ROUND_MIB * MiB);
	struct {
		size_t *field, value;
		unsigned bits;
	} cases[] = {
		{&prm.round, 0, GP_GEOMETRY_ROUND},
		{&prm.round, 768, GP_GEOMETRY_ROUND},
		{&prm.round, 4 * MiB, GP_GEOMETRY_SMALL | GP_GEOMETRY_LARGE},
		{&prm.small_max, 3 * MiB, GP_GEOMETRY_SMALL},
		{&prm.small_max, 12 * MiB, GP_GEOMETRY_SMALL | GP_GEOMETRY_CLASSES},
		{&prm.small_segment, 2 * MiB + 256, GP_GEOMETRY_SMALL},
		{&prm.medium_max, 21 * MiB, GP_GEOMETRY_MEDIUM},
		{&prm.medium_max, 512 * KiB, GP_GEOMETRY_CLASSES},
		{&prm.medium_segment, 20 * MiB + 256, GP_GEOMETRY_MEDIUM},
		{&prm.large_round, 0, GP_GEOMETRY_LARGE},
		{&prm.large_round, 1000, GP_GEOMETRY_LARGE},
		{&prm.large_round, 3 * MiB, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		gp_pool_params_default(&prm);
		*cases[i].field = cases[i].value;
		assert_int_equal(gp_pool_params_check(&prm), cases[i].bits);
		struct gp_fake_backend fb;
		struct gpupool_device_stats st;
		gp_fake_backend_init(&fb, 0);
		memset(&st, 0, sizeof st);
		gp_pool *p = NULL;
		int rc = gp_pool_create(&p, 0, &prm, &fb.be, &st);
		assert_int_equal(rc, cases[i].bits ? -EINVAL : 0);
		gp_pool_destroy(p);
	}
	/* 13 MiB rounds up to a 15 MiB segment with large_round 3M */
	struct fx *f = fx_new(large_round_3m);
	uintptr_t a = A(f, 13 * MiB, GP_NO_STREAM);
	struct gp_block_info bi;
	assert_int_equal(gp_pool_lookup(f->p, a, &bi), 0);
	assert_int_equal(bi.segment_size, 15 * MiB);
	F(f, a, GP_NO_STREAM);
	fx_free(f);
}

static void test_invalid_sizes(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a;
	assert_int_equal(gp_pool_alloc(f->p, 0, GP_NO_STREAM, &a), -EINVAL);
	assert_int_equal(gp_pool_alloc(f->p, SIZE_MAX, GP_NO_STREAM, &a), -EINVAL);
	assert_int_equal(f->st.allocs, 0);
	fx_free(f);
}

static void test_stream_reuse_and_merge(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, 1000, S1);
	F(f, a, S1);
	uintptr_t b = A(f, 1000, S1);
	assert_int_equal(a, b);
	assert_int_equal(f->st.segment_allocs, 1);
	assert_int_equal(f->st.hits, 1);
	assert_int_equal(f->st.misses, 1);
	/* three neighbours in one small segment: free the middle, then its neighbours */
	uintptr_t c = A(f, 4096, S1), d = A(f, 4096, S1);
	assert_int_equal(c, b + 1024);
	assert_int_equal(d, c + 4096);
	uint64_t merges = f->st.merges;
	F(f, c, S1);
	assert_int_equal(f->st.merges, merges); /* b and d are live: nothing to merge yet */
	F(f, b, S1);
	assert_int_equal(f->st.merges, merges + 1);
	F(f, d, S1);
	assert_int_equal(f->st.merges, merges + 3); /* with b+c, then with the tail */
	assert_int_equal(f->st.free_blocks, 1);
	assert_int_equal(f->st.largest_free_block, 2 * MiB);
	assert_int_equal(f->st.splits, 4);
	fx_free(f);
}

static void test_best_fit(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	/* free holes of 16K, 8K, 12K, 8K separated by live blocks */
	size_t holes[] = {16 * KiB, 8 * KiB, 12 * KiB, 8 * KiB};
	uintptr_t h[4], sep[4];
	for (int i = 0; i < 4; i++) {
		h[i] = A(f, holes[i], S1);
		sep[i] = A(f, 512, S1);
	}
	for (int i = 0; i < 4; i++)
		F(f, h[i], S1);
	/* 7K fits both 8K holes: the lower address wins; then the other 8K one */
	assert_int_equal(A(f, 7 * KiB, S1), h[1]);
	assert_int_equal(A(f, 8 * KiB, S1), h[3]);
	assert_int_equal(A(f, 9 * KiB, S1), h[2]);
	assert_int_equal(A(f, 13 * KiB, S1), h[0]);
	(void)sep;
	fx_free(f);
}

static void test_large_split_rule(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	/* a segment made for one large request stays whole: 18.5 MiB gets a 20 MiB segment
	 * and the whole of it, so the block can be exported by IPC */
	uintptr_t a = A(f, 18 * MiB + 512 * KiB, S1);
	struct gp_block_info bi;
	assert_int_equal(gp_pool_lookup(f->p, a, &bi), 0);
	assert_int_equal(bi.size, 20 * MiB);
	assert_int_equal(bi.segment_size, 20 * MiB);
	assert_int_equal(f->st.splits, 0);
	assert_int_equal(f->st.requested_bytes, 18 * MiB + 512 * KiB);
	F(f, a, S1);
	/* from the cache, the large-pool rule: 18.5 MiB leaves 1.5 MiB (> 1 MiB): split */
	a = A(f, 18 * MiB + 512 * KiB, S1);
	assert_int_equal(f->st.splits, 1);
	F(f, a, S1);
	/* 19.5 MiB leaves 0.5 MiB (<= 1 MiB): not split, the whole 20 MiB is handed out */
	a = A(f, 19 * MiB + 512 * KiB, S1);
	assert_int_equal(gp_pool_lookup(f->p, a, &bi), 0);
	assert_int_equal(bi.size, 20 * MiB);
	assert_int_equal(f->st.splits, 1);
	F(f, a, S1);
	/* medium requests still share their 20 MiB segments */
	uintptr_t m1 = A(f, 3 * MiB, S2), m2 = A(f, 3 * MiB, S2);
	assert_int_equal(m2, m1 + 3 * MiB);
	F(f, m1, S2);
	F(f, m2, S2);
	fx_free(f);
}

static void mss_64m(struct gp_pool_params *p)
{
	p->max_split_size = 64 * MiB;
	p->release_on_grow = false;
}

static void no_release_on_grow(struct gp_pool_params *p) { p->release_on_grow = false; }

static void test_max_split_size(void **state)
{
	(void)state;
	struct fx *f = fx_new(mss_64m);
	uintptr_t big = A(f, 100 * MiB, S1);
	F(f, big, S1);
	/* a 30 MiB request must not carve the 100 MiB oversize block */
	uintptr_t a = A(f, 30 * MiB, S1);
	assert_int_not_equal(a, big);
	assert_int_equal(f->st.segment_allocs, 2);
	/* an oversize request may reuse an oversize block only within 20 MiB of slack */
	uintptr_t b = A(f, 90 * MiB, S1);
	assert_int_equal(b, big);
	struct gp_block_info bi;
	assert_int_equal(gp_pool_lookup(f->p, b, &bi), 0);
	assert_int_equal(bi.size, 100 * MiB); /* oversize blocks are not split */
	F(f, b, S1);
	uintptr_t c = A(f, 70 * MiB, S1); /* 30 MiB slack: too much, new segment */
	assert_int_not_equal(c, big);
	F(f, a, S1);
	F(f, c, S1);
	fx_free(f);
}

static void test_cross_stream_needs_event(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, 4096, S1);
	F(f, a, S1);
	/* S2 may reuse S1's block only behind an event: the fake records one wait */
	uintptr_t b = A(f, 4096, S2);
	assert_int_equal(b, a);
	assert_int_equal(f->fb.waits, 1);
	assert_int_equal(f->st.stream_steals, 1);
	F(f, b, S2);
	/* when the wait cannot be made, the blocks a third stream could not take (S2's
	 * block, S1's rest of the segment) wait for a fence instead; growing would raise
	 * the peak for memory a fence returns, so the allocation fences and reuses them */
	f->fb.wait_refused = true;
	uintptr_t c = A(f, 4096, 0x3000);
	assert_int_equal(c, a);
	assert_int_equal(f->st.inline_fences, 1);
	assert_int_equal(f->st.pending_frees, 0);
	assert_int_equal(f->st.segments, 1);
	/* the fenced rest is ready for anyone, synchronous calls included */
	assert_int_equal(A(f, 4096, GP_NO_STREAM), a + 4096);
	fx_free(f);
}

static void test_sync_free_waits_for_fence(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, 4096, GP_NO_STREAM);
	F(f, a, GP_NO_STREAM);
	assert_int_equal(f->st.pending_frees, 1);
	assert_int_equal(f->st.pending_bytes, 4096);
	/* not reusable before a fence, by sync or stream allocations */
	uintptr_t b = A(f, 4096, GP_NO_STREAM);
	uintptr_t c = A(f, 4096, S1);
	assert_int_not_equal(b, a);
	assert_int_not_equal(c, a);
	assert_int_equal(gp_pool_fence(f->p), 0);
	assert_int_equal(f->st.fences, 1);
	assert_int_equal(f->st.pending_frees, 0);
	assert_int_equal(A(f, 4096, GP_NO_STREAM), a);
	/* mixed frees: a stream-allocated block freed with cudaFree is fenced too */
	F(f, c, GP_NO_STREAM);
	assert_int_equal(f->st.pending_frees, 1);
	/* a sync-allocated block freed on a stream is reusable on that stream at once */
	F(f, b, S1);
	assert_int_equal(A(f, 4096, S1), b);
	fx_free(f);
}

/* A backend whose device_sync frees a block while the fence is in flight: that block
 * was freed after the fence began, so the fence must not retire it. */
struct racing {
	struct gp_fake_backend fb;
	struct gp_backend be;
	gp_pool *p;
	uintptr_t victim;
};

static int racing_sync(void *ctx, int device)
{
	struct racing *r = ctx;
	if (r->victim) {
		assert_int_equal(gp_pool_free(r->p, r->victim, GP_NO_STREAM), 0);
		r->victim = 0;
	}
	return r->fb.be.device_sync(&r->fb, device);
}

static void test_fence_generation(void **state)
{
	(void)state;
	struct racing r;
	struct gpupool_device_stats st = {0};
	struct gp_pool_params prm;
	gp_fake_backend_init(&r.fb, 0);
	/* the fake's functions take the fake as ctx; it is the first member of r */
	r.be = r.fb.be;
	r.be.ctx = &r;
	r.be.device_sync = racing_sync;
	r.victim = 0;
	gp_pool_params_default(&prm);
	prm.check = true;
	assert_int_equal(gp_pool_create(&r.p, 0, &prm, &r.be, &st), 0);
	uintptr_t a = 0, b = 0;
	assert_int_equal(gp_pool_alloc(r.p, 4096, GP_NO_STREAM, &a), 0);
	assert_int_equal(gp_pool_alloc(r.p, 4096, GP_NO_STREAM, &b), 0);
	assert_int_equal(gp_pool_free(r.p, a, GP_NO_STREAM), 0);
	r.victim = b;
	assert_int_equal(gp_pool_fence(r.p), 0);
	/* a was freed before the fence: retired; b during it: still pending */
	assert_int_equal(st.pending_frees, 1);
	assert_int_equal(st.pending_bytes, 4096);
	uintptr_t c = 0;
	assert_int_equal(gp_pool_alloc(r.p, 4096, GP_NO_STREAM, &c), 0);
	assert_int_equal(c, a);
	assert_int_equal(gp_pool_fence(r.p), 0);
	assert_int_equal(st.pending_frees, 0);
	assert_int_equal(gp_pool_check(r.p), 0);
	gp_pool_destroy(r.p);
}

static void test_fence_refused_during_capture(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, 4096, GP_NO_STREAM), b = A(f, 64 * MiB, S1);
	F(f, a, GP_NO_STREAM);
	F(f, b, S1);
	f->fb.sync_busy = true;
	assert_int_equal(gp_pool_fence(f->p), -EBUSY);
	assert_int_equal(f->st.pending_frees, 1);
	assert_int_equal(f->st.fences, 0);
	/* nor is a segment handed back (the runtime's cudaFree would synchronize) */
	assert_int_equal(gp_pool_release(f->p, 0), 0);
	assert_int_equal(f->st.segments, 2);
	assert_int_equal(gp_pool_check(f->p), 0);
	f->fb.sync_busy = false;
	assert_int_equal(gp_pool_fence(f->p), 0);
	assert_int_equal(f->st.pending_frees, 0);
	fx_free(f);
}

static void test_release(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, 100 * MiB, S1), b = A(f, 50 * MiB, S1), c = A(f, 4096, S1);
	uintptr_t d = A(f, 30 * MiB, GP_NO_STREAM);
	F(f, a, S1);
	F(f, b, S1);
	F(f, d, GP_NO_STREAM); /* pending: never released before its fence */
	/* keep 60 MiB cached: the largest free segment goes first */
	size_t r = gp_pool_release(f->p, 60 * MiB + 30 * MiB + 2 * MiB - 4096);
	assert_int_equal(r, 100 * MiB);
	assert_int_equal(f->st.releases, 1);
	assert_int_equal(f->st.segment_frees, 1);
	r = gp_pool_release(f->p, 0);
	assert_int_equal(r, 50 * MiB); /* c's segment is in use, d's is pending */
	assert_int_equal(f->st.reserved_bytes, 2 * MiB + 30 * MiB);
	assert_int_equal(gp_pool_fence(f->p), 0);
	assert_int_equal(gp_pool_release(f->p, 0), 30 * MiB);
	F(f, c, S1);
	assert_int_equal(gp_pool_release(f->p, 0), 2 * MiB);
	assert_int_equal(f->st.reserved_bytes, 0);
	assert_int_equal(f->st.released_bytes, 182 * MiB);
	assert_int_equal(f->fb.used[0], 0);
	fx_free(f);
}

/* The decay: a whole free segment goes back once no block was taken from it for after_ns,
 * timed from the pass that first found it idle; a block taken restarts its idle time;
 * pending and live segments stay; the budget spreads a large cache over passes. */
static void test_decay(void **state)
{
	(void)state;
	const uint64_t s = 1000000000ull;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, 100 * MiB, S1), b = A(f, 50 * MiB, S1), c = A(f, 4096, S1);
	uintptr_t d = A(f, 30 * MiB, GP_NO_STREAM);
	size_t kept = 1;
	/* nothing is idle yet: every segment was just used */
	assert_int_equal(gp_pool_decay(f->p, 1 * s, 10 * s, SIZE_MAX, &kept), 0);
	assert_int_equal(kept, 0);
	F(f, a, S1);
	F(f, b, S1);
	F(f, d, GP_NO_STREAM); /* pending: its segment is not whole and free */
	assert_int_equal(gp_pool_decay(f->p, 2 * s, 10 * s, SIZE_MAX, &kept), 0);
	assert_int_equal(kept, 150 * MiB); /* a's and b's segments, idle from now */
	assert_int_equal(f->st.releasable_bytes, 150 * MiB);
	/* counted afresh without a pass: the same figure, and no idle time restarts */
	f->st.releasable_bytes = 0;
	assert_int_equal(gp_pool_releasable(f->p), 150 * MiB);
	assert_int_equal(f->st.releasable_bytes, 150 * MiB);
	/* b's segment used again at 5 s: its idle time restarts at the next pass */
	uintptr_t b2 = A(f, 50 * MiB, S1);
	assert_int_equal(b2, b);
	F(f, b2, S1);
	assert_int_equal(gp_pool_decay(f->p, 6 * s, 10 * s, SIZE_MAX, &kept), 0);
	assert_int_equal(kept, 150 * MiB);
	/* 12 s: a's segment (idle since 2 s) goes, b's (since 6 s) stays */
	assert_int_equal(gp_pool_decay(f->p, 12 * s, 10 * s, SIZE_MAX, &kept), 100 * MiB);
	assert_int_equal(kept, 50 * MiB);
	assert_int_equal(f->st.decay_releases, 1);
	assert_int_equal(f->st.decayed_bytes, 100 * MiB);
	assert_int_equal(f->st.released_bytes, 100 * MiB);
	/* the fence makes d's segment whole and free: idle from the next pass */
	assert_int_equal(gp_pool_fence(f->p), 0);
	assert_int_equal(gp_pool_decay(f->p, 13 * s, 10 * s, SIZE_MAX, &kept), 0);
	assert_int_equal(kept, 80 * MiB);
	/* after_ns 0: nothing goes, whatever its age */
	assert_int_equal(gp_pool_decay(f->p, 100 * s, 0, SIZE_MAX, &kept), 0);
	assert_int_equal(kept, 80 * MiB);
	/* a budget of 1 byte: one segment per pass (the first found), then the next */
	assert_int_equal(gp_pool_decay(f->p, 100 * s, 10 * s, 1, &kept), 30 * MiB);
	assert_int_equal(kept, 50 * MiB);
	assert_int_equal(gp_pool_decay(f->p, 101 * s, 10 * s, 1, &kept), 50 * MiB);
	assert_int_equal(kept, 0);
	/* c's small segment is live: never given back */
	assert_int_equal(f->st.reserved_bytes, 2 * MiB);
	assert_int_equal(gp_pool_check(f->p), 0);
	F(f, c, S1);
	fx_free(f);
}

static void thresh_8m(struct gp_pool_params *p) { p->release_threshold = 8 * MiB; }

static void test_release_threshold(void **state)
{
	(void)state;
	struct fx *f = fx_new(thresh_8m);
	uintptr_t a = A(f, 64 * MiB, S1), b = A(f, 4 * MiB, S1);
	F(f, a, S1); /* 64 MiB cached > 8 MiB: released at once */
	assert_int_equal(f->st.reserved_bytes, 20 * MiB);
	F(f, b, S1); /* 20 MiB cached > 8 MiB: released */
	assert_int_equal(f->st.reserved_bytes, 0);
	uintptr_t c = A(f, 4096, S1);
	F(f, c, S1); /* 2 MiB cached <= 8 MiB: kept */
	assert_int_equal(f->st.reserved_bytes, 2 * MiB);
	fx_free(f);
}

/* A budget in front of the device (a group's) with less room than a segment: the segment is
 * fitted to it, as to the pool's own limit. Twelve 2 MiB blocks in 25 MiB: a 20 MiB segment,
 * then two of exactly 2 MiB; the 13th is out of memory. */
static void test_quota_fits_segment(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	f->fb.quota = 25 * MiB;
	uintptr_t a[12], x;
	for (int i = 0; i < 12; i++)
		a[i] = A(f, 2 * MiB, GP_NO_STREAM);
	assert_int_equal(f->st.reserved_bytes, 24 * MiB);
	assert_int_equal(f->st.segments, 3);
	assert_int_equal(gp_pool_alloc(f->p, 2 * MiB, GP_NO_STREAM, &x), -ENOMEM);
	assert_int_equal(f->st.ooms, 1);
	for (int i = 0; i < 12; i++)
		F(f, a[i], GP_NO_STREAM);
	fx_free(f);
}

/* A device that refuses a segment with an error that is not out of memory (-EIO): the pool
 * gives up at once with it (no fence, no release, no retry) and counts no out of memory;
 * the device that serves again is used again. */
static void test_device_error_stops(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, MiB, GP_NO_STREAM), x;
	F(f, a, GP_NO_STREAM);
	f->fb.fail_all = true;
	f->fb.fail_err = -EIO;
	uint64_t allocs = f->fb.allocs;
	assert_int_equal(gp_pool_alloc(f->p, 64 * MiB, GP_NO_STREAM, &x), -EIO);
	assert_int_equal(f->fb.allocs, allocs + 1);
	assert_int_equal(f->st.ooms, 0);
	assert_int_equal(f->st.oom_retries, 0);
	assert_int_equal(f->st.reserved_bytes, 2 * MiB); /* the cache stayed */
	f->fb.fail_all = false;
	x = A(f, 64 * MiB, GP_NO_STREAM);
	F(f, x, GP_NO_STREAM);
	fx_free(f);
}

static void limit_8m(struct gp_pool_params *p) { p->limit = 8 * MiB; }

static void test_limit_and_inline_fence(void **state)
{
	(void)state;
	struct fx *f = fx_new(limit_8m);
	uintptr_t a = A(f, 6 * MiB, GP_NO_STREAM); /* medium: would be 20 MiB, exact 6 MiB fits */
	assert_int_equal(f->st.reserved_bytes, 6 * MiB);
	uintptr_t x;
	assert_int_equal(gp_pool_alloc(f->p, 4 * MiB, GP_NO_STREAM, &x), -ENOMEM);
	assert_int_equal(f->st.ooms, 1);
	assert_true(f->st.limit_refusals >= 1);
	uintptr_t b = A(f, MiB, GP_NO_STREAM); /* a 2 MiB small segment still fits */
	assert_int_equal(f->st.reserved_bytes, 8 * MiB);
	F(f, a, GP_NO_STREAM);
	/* the 6 MiB block is pending; under the limit the allocation fences inline */
	uintptr_t c = A(f, 6 * MiB, GP_NO_STREAM);
	assert_int_equal(c, a);
	assert_int_equal(f->st.inline_fences, 1);
	F(f, c, GP_NO_STREAM);
	F(f, b, GP_NO_STREAM);
	/* a 7 MiB request: fence, release the cached segments, then grow */
	uintptr_t d = A(f, 7 * MiB, GP_NO_STREAM);
	assert_int_equal(f->st.oom_retries, 1);
	assert_true(f->st.reserved_bytes <= 8 * MiB);
	size_t fr, tot;
	assert_int_equal(gp_pool_mem_info(f->p, &fr, &tot), 0);
	assert_int_equal(tot, 8 * MiB);
	assert_int_equal(fr, 8 * MiB - 7 * MiB);
	F(f, d, S1);
	fx_free(f);
}

static void test_oom_release_and_retry(void **state)
{
	(void)state;
	struct fx *f = fx_new(no_release_on_grow);
	f->fb.capacity = 64 * MiB;
	uintptr_t a = A(f, 40 * MiB, S1);
	F(f, a, S1);
	/* the device is full of cache: the pool releases it and retries once */
	uintptr_t b = A(f, 50 * MiB, S1);
	assert_int_equal(f->st.oom_retries, 1);
	assert_int_equal(f->st.segment_alloc_failures, 1);
	assert_int_equal(f->st.segment_frees, 1);
	/* injected failure of the next segment_alloc: retried after release, succeeds */
	f->fb.fail_at = f->fb.allocs + 1;
	uintptr_t c = A(f, 4096, S1);
	assert_int_equal(f->st.oom_retries, 2);
	assert_int_equal(f->st.ooms, 0);
	/* out of memory for real */
	f->fb.fail_all = true;
	uintptr_t d;
	assert_int_equal(gp_pool_alloc(f->p, 30 * MiB, S1, &d), -ENOMEM);
	assert_int_equal(f->st.ooms, 1);
	assert_int_equal(gp_pool_check(f->p), 0);
	f->fb.fail_all = false;
	F(f, b, S1);
	F(f, c, S1);
	fx_free(f);
}

static void test_bad_frees(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, 4096, S1);
	assert_int_equal(gp_pool_free(f->p, 0x1234, S1), -ENOENT);
	assert_int_equal(gp_pool_free(f->p, a + 512, S1), -EALREADY); /* inside a block */
	F(f, a, S1);
	assert_int_equal(gp_pool_free(f->p, a, S1), -EALREADY); /* double free */
	assert_int_equal(gp_pool_free(f->p, a, GP_NO_STREAM), -EALREADY);
	assert_int_equal(f->st.invalid_frees, 3);
	assert_int_equal(f->st.frees, 1);
	struct gp_block_info bi;
	assert_int_equal(gp_pool_lookup(f->p, a, &bi), -ENOENT);
	uintptr_t b = A(f, 8192, S1);
	assert_int_equal(gp_pool_lookup(f->p, b + 100, &bi), 0);
	assert_int_equal(bi.addr, b);
	assert_int_equal(bi.segment_size, 2 * MiB);
	fx_free(f);
}

static void test_release_on_grow(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, 100 * MiB, S1), b = A(f, 40 * MiB, S1);
	F(f, a, S1);
	F(f, b, S1);
	assert_int_equal(f->st.reserved_bytes_peak, 140 * MiB);
	/* 120 MiB fits in neither cached segment; growing would reach 260 MiB, past the
	 * 140 MiB peak: the cache is released first (largest first, as much as needed) */
	uintptr_t c = A(f, 120 * MiB, S1);
	assert_int_equal(f->st.segment_frees, 2);
	assert_int_equal(f->st.reserved_bytes, 120 * MiB);
	assert_int_equal(f->st.reserved_bytes_peak, 140 * MiB);
	/* below the peak, growth needs no release: 120 + 16 <= 140 */
	uintptr_t d = A(f, 16 * MiB, S1);
	assert_int_equal(f->st.segment_frees, 2);
	F(f, d, S1);
	/* 18 MiB does not fit the cached 16 MiB block, and 136 + 18 > 140: release it first */
	uintptr_t e = A(f, 18 * MiB, S1);
	assert_int_equal(f->st.segment_frees, 3);
	assert_int_equal(f->st.reserved_bytes, 138 * MiB);
	assert_int_equal(f->st.reserved_bytes_peak, 140 * MiB);
	F(f, c, S1);
	F(f, e, S1);
	fx_free(f);
}

static void test_pending_fit_waits_for_fence(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t big = A(f, 64 * MiB, GP_NO_STREAM), a = A(f, 12 * MiB, GP_NO_STREAM);
	F(f, big, GP_NO_STREAM);
	F(f, a, GP_NO_STREAM);
	assert_int_equal(gp_pool_fence(f->p), 0);
	uintptr_t a2 = A(f, 12 * MiB, GP_NO_STREAM);
	assert_int_equal(a2, a);
	F(f, a2, GP_NO_STREAM); /* pending: its 12 MiB twin is the best fit */
	/* the ready 64 MiB block would be split; fences are quick: wait for one instead */
	uint64_t fences = f->st.fences;
	assert_int_equal(A(f, 12 * MiB, GP_NO_STREAM), a);
	assert_int_equal(f->st.fences, fences + 1);
	assert_int_equal(f->st.inline_fences, 1);
	assert_int_equal(f->st.splits, 0);
	fx_free(f);
}

static void test_stream_retire(void **state)
{
	(void)state;
	struct fx *f = fx_new(NULL);
	uintptr_t a = A(f, 4096, S1);
	F(f, a, S1);
	gp_pool_stream_retire(f->p, S1);
	/* the stream is gone: its free blocks wait for a fence, then serve anyone */
	assert_int_equal(f->st.pending_frees, 1);
	assert_int_equal(f->st.pending_bytes, 2 * MiB);
	assert_int_equal(gp_pool_check(f->p), 0);
	assert_int_equal(gp_pool_fence(f->p), 0);
	assert_int_equal(A(f, 4096, GP_NO_STREAM), a);
	gp_pool_stream_retire(f->p, 0x9999); /* unknown stream: nothing happens */
	fx_free(f);
}

/* ---- randomized run against a reference model ---------------------------------------- */

struct live {
	uintptr_t addr;
	size_t size, rounded;
	int dev;
};

static int cmp_live(const void *a, const void *b)
{
	const struct live *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev - y->dev;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void test_randomized(void **state)
{
	(void)state;
	enum { NDEV = 2, MAXLIVE = 3000 };
	const long ops = getenv("GP_RANDOM_OPS") ? atol(getenv("GP_RANDOM_OPS")) : 1000000;
	struct gp_fake_backend fb[NDEV];
	struct gpupool_device_stats st[NDEV];
	gp_pool *p[NDEV];
	struct gp_pool_params prm;
	gp_pool_params_default(&prm);
	prm.max_split_size = 128 * MiB;
	for (int d = 0; d < NDEV; d++) {
		gp_fake_backend_init(&fb[d], 2 * GiB);
		memset(&st[d], 0, sizeof st[d]);
		prm.limit = d ? 1536 * MiB : 0;
		assert_int_equal(gp_pool_create(&p[d], d, &prm, &fb[d].be, &st[d]), 0);
	}
	struct live *lv = calloc(MAXLIVE, sizeof *lv);
	size_t nlive = 0, model_req[NDEV] = {0}, model_n[NDEV] = {0};
	uint64_t rng = XORSHIFT_SEED, ooms = 0;
	const gp_stream streams[] = {GP_NO_STREAM, S1, S2, 0x3000};
	for (long i = 0; i < ops; i++) {
		uint64_t r = xorshift64(&rng);
		int d = (int)(r & 1);
		gp_stream s = streams[(r >> 1) & 3];
		unsigned what = (unsigned)((r >> 8) % 1000);
		if (what < 3) {
			assert_int_equal(gp_pool_fence(p[d]), 0);
		} else if (what < 4) {
			gp_pool_release(p[d], (r >> 20) & 1 ? 0 : 64 * MiB);
		} else if (what < 5) {
			fb[d].fail_at = fb[d].allocs + 1 + ((r >> 12) & 3);
		} else if (nlive < MAXLIVE && (what < 520 || nlive == 0)) {
			/* log-uniform sizes 1 B .. 256 MiB, mostly small */
			unsigned bits = (unsigned)((r >> 24) % 29);
			size_t size = ((size_t)1 << bits) + ((r >> 40) & (((size_t)1 << bits) - 1));
			uintptr_t a = 0;
			int rc = gp_pool_alloc(p[d], size, s, &a);
			if (rc == -ENOMEM) {
				ooms++;
				continue;
			}
			assert_int_equal(rc, 0);
			assert_int_equal(a % 512, 0);
			lv[nlive++] = (struct live){a, size, (size + 511) & ~(size_t)511, d};
			model_req[d] += size;
			model_n[d]++;
		} else if (nlive) {
			size_t k = (size_t)((r >> 16) % nlive);
			struct live x = lv[k];
			lv[k] = lv[--nlive];
			assert_int_equal(gp_pool_free(p[x.dev], x.addr, s), 0);
			model_req[x.dev] -= x.size;
			model_n[x.dev]--;
		}
		for (int dd = 0; dd < NDEV; dd++) {
			assert_int_equal(st[dd].requested_bytes, model_req[dd]);
			assert_int_equal(st[dd].live_blocks, model_n[dd]);
		}
		if (i < 20000 || i % 2000 == 0) {
			for (int dd = 0; dd < NDEV; dd++)
				assert_int_equal(gp_pool_check(p[dd]), 0);
		}
		if (i % 5000 == 0 && nlive) {
			/* reference model: live blocks never overlap, each is where the pool says */
			qsort(lv, nlive, sizeof *lv, cmp_live);
			for (size_t k = 0; k < nlive; k++) {
				struct gp_block_info bi;
				assert_int_equal(gp_pool_lookup(p[lv[k].dev], lv[k].addr, &bi), 0);
				assert_int_equal(bi.addr, lv[k].addr);
				assert_true(bi.size >= lv[k].rounded);
				if (k && lv[k - 1].dev == lv[k].dev)
					assert_true(lv[k - 1].addr + lv[k - 1].rounded <= lv[k].addr);
			}
		}
	}
	assert_true(st[1].reserved_bytes_peak <= 1536 * MiB);
	for (size_t k = 0; k < nlive; k++)
		assert_int_equal(gp_pool_free(p[lv[k].dev], lv[k].addr, GP_NO_STREAM), 0);
	for (int d = 0; d < NDEV; d++) {
		assert_int_equal(gp_pool_fence(p[d]), 0);
		assert_int_equal(gp_pool_check(p[d]), 0);
		gp_pool_release(p[d], 0);
		assert_int_equal(st[d].reserved_bytes, 0);
		assert_int_equal(st[d].allocated_bytes, 0);
		gp_pool_destroy(p[d]);
	}
	print_message("randomized: %ld ops, %llu out-of-memory answers\n", ops, (unsigned long long)ooms);
	free(lv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rounding_and_segment_sizes),
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_invalid_sizes),
		cmocka_unit_test(test_stream_reuse_and_merge),
		cmocka_unit_test(test_best_fit),
		cmocka_unit_test(test_large_split_rule),
		cmocka_unit_test(test_max_split_size),
		cmocka_unit_test(test_cross_stream_needs_event),
		cmocka_unit_test(test_sync_free_waits_for_fence),
		cmocka_unit_test(test_fence_generation),
		cmocka_unit_test(test_fence_refused_during_capture),
		cmocka_unit_test(test_release),
		cmocka_unit_test(test_decay),
		cmocka_unit_test(test_release_threshold),
		cmocka_unit_test(test_limit_and_inline_fence),
		cmocka_unit_test(test_quota_fits_segment),
		cmocka_unit_test(test_device_error_stops),
		cmocka_unit_test(test_oom_release_and_retry),
		cmocka_unit_test(test_bad_frees),
		cmocka_unit_test(test_release_on_grow),
		cmocka_unit_test(test_pending_fit_waits_for_fence),
		cmocka_unit_test(test_stream_retire),
		cmocka_unit_test(test_randomized),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
