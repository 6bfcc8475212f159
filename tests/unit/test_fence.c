/* Unit tests of markers (fences at the point of the free) against the fake backend and its
 * modelled clock: markers retire in order, an allocation waits for the oldest marker that
 * serves it and for no later one, the wait budget makes it grow instead, a pool without
 * markers (or a backend refusing them) fences with device_sync, a capture refuses them,
 * a pool drops every marker it recorded, and a tight alloc/free loop on a lagging device
 * does not grow the pool by the frees in flight. The checker runs after every step (but in
 * the loop). */
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

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define US ((uint64_t)1000)

struct fx {
	struct gp_fake_backend fb;
	struct gpupool_device_stats st;
	gp_pool *p;
};

/* A pool whose device lags 1 ms behind; `limit` bytes (0: none); markers per `markers`. */
static struct fx *fx_new(size_t limit, bool markers)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	gp_fake_backend_init(&f->fb, 0);
	f->fb.latency_ns = 1000 * US;
	struct gp_pool_params prm;
	gp_pool_params_default(&prm);
	prm.check = true;
	prm.limit = limit;
	prm.fence_marker = markers;
	assert_int_equal(gp_pool_create(&f->p, 0, &prm, &f->fb.be, &f->st), 0);
	return f;
}

static void fx_free(struct fx *f)
{
	assert_int_equal(gp_pool_check(f->p), 0);
	gp_pool_destroy(f->p);
	assert_int_equal(f->fb.used[0], 0);
	/* every marker recorded was dropped once, the outstanding ones by the destroy */
	assert_int_equal(f->fb.marks, f->fb.mark_drops);
	free(f);
}

static uintptr_t A(struct fx *f, size_t n)
{
	uintptr_t a = 0;
	assert_int_equal(gp_pool_alloc(f->p, n, GP_NO_STREAM, &a), 0);
	assert_int_equal(gp_pool_check(f->p), 0);
	return a;
}

static void F(struct fx *f, uintptr_t a)
{
	assert_int_equal(gp_pool_free(f->p, a, GP_NO_STREAM), 0);
	assert_int_equal(gp_pool_check(f->p), 0);
}

static int poll_at(struct fx *f, uint64_t now, bool mark)
{
	f->fb.now_ns = now;
	int rc = gp_pool_fence_poll(f->p, mark);
	assert_int_equal(gp_pool_check(f->p), 0);
	return rc;
}

static uint64_t outstanding(const struct fx *f) { return f->fb.marks - f->fb.mark_drops; }

static void test_retire_in_order(void **state)
{
	(void)state;
	struct fx *f = fx_new(0, true);
	uintptr_t a = A(f, 4 * KiB), b = A(f, 4 * KiB);
	F(f, a);
	assert_int_equal(poll_at(f, 0, true), 1); /* marker 1: a, done at 1 ms */
	assert_int_equal(poll_at(f, 100 * US, true), 1); /* nothing new to cover: no marker */
	assert_int_equal(f->fb.marks, 1);
	F(f, b);
	assert_int_equal(poll_at(f, 500 * US, true), 1); /* marker 2: b, done at 1.5 ms */
	assert_int_equal(outstanding(f), 2);
	assert_int_equal(f->st.pending_frees, 2);
	assert_int_equal(poll_at(f, 999 * US, false), 1); /* neither is done */
	assert_int_equal(f->st.pending_frees, 2);
	assert_int_equal(poll_at(f, 1000 * US, false), 1); /* marker 1 only: a, not b */
	assert_int_equal(f->st.pending_frees, 1);
	assert_int_equal(f->st.pending_bytes, 4 * KiB);
	assert_int_equal(outstanding(f), 1);
	assert_int_equal(f->st.fences, 1);
	assert_int_equal(poll_at(f, 1500 * US, false), 0);
	assert_int_equal(f->st.pending_frees, 0);
	assert_int_equal(outstanding(f), 0);
	assert_int_equal(f->st.fences, 2);
	assert_int_equal(f->st.inline_fences, 0);
	assert_int_equal(f->fb.waited_ns, 0); /* the thread's polls never wait */
	fx_free(f);
}

static void test_wait_serves_request(void **state)
{
	(void)state;
	struct fx *f = fx_new(0, true);
	uintptr_t x = A(f, 12 * MiB), y = A(f, 4 * KiB);
	F(f, x);
	assert_int_equal(poll_at(f, 0, true), 1);        /* marker 1 covers x: done at 1 ms */
	F(f, y);
	assert_int_equal(poll_at(f, 100 * US, true), 1); /* marker 2 covers y: done at 1.1 ms */
	/* growing would raise the peak while x is in flight: wait for marker 1, not 2 */
	f->fb.now_ns = 200 * US;
	uintptr_t b = A(f, 12 * MiB);
	assert_int_equal(b, x);
	assert_int_equal(f->fb.waited_ns, 800 * US);
	assert_int_equal(f->fb.mark_waits, 1);
	assert_int_equal(f->st.inline_fences, 1);
	assert_int_equal(f->st.segment_allocs, 2);
	assert_int_equal(f->st.pending_frees, 1); /* y: marker 2 is still outstanding */
	assert_int_equal(outstanding(f), 1);
	assert_int_equal(f->fb.syncs, 0);
	/* the device lags 1 ms now (seen by the wait), and little of the wait credit is left:
	 * for a marker recorded now the pool grows rather than wait */
	F(f, b);
	assert_int_equal(poll_at(f, 1000 * US, true), 1);
	uintptr_t c = A(f, 12 * MiB);
	assert_true(c != x);
	assert_int_equal(f->fb.waited_ns, 800 * US);
	assert_int_equal(f->st.segment_allocs, 3);
	F(f, c);
	fx_free(f);
}

static void test_fence_all_waits_whatever_it_takes(void **state)
{
	(void)state;
	struct fx *f = fx_new(12 * MiB, true);
	uintptr_t x = A(f, 12 * MiB);
	F(f, x);
	f->fb.now_ns = 5000 * US;
	/* no room under the limit and no marker yet: waiting for one recorded now would wait for
	 * all work issued so far, so it is a device_sync, and the full latency is waited */
	uintptr_t b = A(f, 12 * MiB);
	assert_int_equal(b, x);
	assert_int_equal(f->fb.marks, 0);
	assert_int_equal(f->fb.syncs, 1);
	assert_int_equal(f->fb.waited_ns, 1000 * US);
	assert_int_equal(f->fb.now_ns, 6000 * US);
	assert_int_equal(f->st.segment_allocs, 1);
	F(f, b);
	/* with a marker outstanding, it waits for that marker only */
	assert_int_equal(poll_at(f, 6100 * US, true), 1);
	f->fb.now_ns = 6500 * US;
	b = A(f, 12 * MiB);
	assert_int_equal(b, x);
	assert_int_equal(f->fb.mark_waits, 1);
	assert_int_equal(f->fb.syncs, 1);
	assert_int_equal(f->fb.waited_ns, 1600 * US);
	F(f, b);
	fx_free(f);
}

static void test_without_markers(void **state)
{
	(void)state;
	for (int refused = 0; refused < 2; refused++) {
		/* fence_marker off, or a backend that cannot record one: device_sync as before */
		struct fx *f = fx_new(0, refused);
		f->fb.marks_unsupported = refused;
		uintptr_t x = A(f, 12 * MiB);
		F(f, x);
		assert_int_equal(poll_at(f, 0, true), -ENOTSUP);
		assert_int_equal(f->st.pending_frees, 1);
		uintptr_t b = A(f, 12 * MiB);
		assert_int_equal(b, x);
		assert_int_equal(f->fb.marks, 0);
		assert_int_equal(f->fb.syncs, 1);
		assert_int_equal(f->fb.waited_ns, 1000 * US); /* the device_sync waited the whole lag */
		assert_int_equal(f->st.inline_fences, 1);
		F(f, b);
		assert_int_equal(gp_pool_fence(f->p), 0);
		assert_int_equal(f->st.pending_frees, 0);
		fx_free(f);
	}
}

static void test_refused_during_capture(void **state)
{
	(void)state;
	struct fx *f = fx_new(0, true);
	uintptr_t x = A(f, 12 * MiB);
	F(f, x);
	f->fb.sync_busy = true; /* a capture is active */
	assert_int_equal(poll_at(f, 0, true), -EBUSY);
	assert_int_equal(f->fb.marks, 0);
	assert_int_equal(f->st.pending_frees, 1);
	/* the allocation cannot fence: it grows */
	uintptr_t b = A(f, 12 * MiB);
	assert_true(b != x);
	assert_int_equal(f->st.pending_frees, 1);
	f->fb.sync_busy = false;
	assert_int_equal(poll_at(f, 10 * US, true), 1);
	assert_int_equal(poll_at(f, 1010 * US, false), 0);
	assert_int_equal(f->st.pending_frees, 0);
	F(f, b);
	fx_free(f);
}

static void test_device_sync_covers_markers(void **state)
{
	(void)state;
	struct fx *f = fx_new(0, true);
	uintptr_t a = A(f, 4 * KiB);
	F(f, a);
	assert_int_equal(poll_at(f, 0, true), 1);
	assert_int_equal(outstanding(f), 1);
	/* a device_sync begun after the marker covers it: retired and dropped */
	assert_int_equal(gp_pool_fence(f->p), 0);
	assert_int_equal(outstanding(f), 0);
	assert_int_equal(f->st.pending_frees, 0);
	assert_int_equal(poll_at(f, 10 * US, false), 0);
	/* and a pool destroyed with markers outstanding drops them (fx_free checks) */
	uintptr_t b = A(f, 4 * KiB);
	F(f, b);
	assert_int_equal(poll_at(f, 20 * US, true), 1);
	fx_free(f);
}

/* A tight cudaMalloc/cudaFree loop of 64 KiB pairs, one a microsecond, on a device 1 ms
 * behind, the fence thread marking every 50 us: a lag's worth of frees is in flight (1,000
 * blocks, 62.5 MiB) while 64 KiB is live. Growing for them would let reserved memory track
 * that (it reached 66 MiB here, and the whole 1 GiB fake device under four threads); once
 * the frees in flight pass fence_headroom (and eight times what is live) the allocation
 * waits for the oldest marker instead, so the pool stays near fence_headroom. */
static void test_tight_loop_stays_bounded(void **state)
{
	(void)state;
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	gp_fake_backend_init(&f->fb, 0);
	f->fb.latency_ns = 1000 * US;
	struct gp_pool_params prm;
	gp_pool_params_default(&prm); /* no checker after every op: 100,000 pairs */
	assert_int_equal(gp_pool_create(&f->p, 0, &prm, &f->fb.be, &f->st), 0);
	uint64_t t = 0, mark_at = 50 * US;
	for (int i = 0; i < 100000; i++) {
		t += 1 * US;
		if (f->fb.now_ns > t)
			t = f->fb.now_ns; /* the program waited for the device */
		for (; mark_at <= t; mark_at += 50 * US) {
			f->fb.background = true; /* the thread's time, not the program's */
			f->fb.now_ns = mark_at;
			assert_true(gp_pool_fence_poll(f->p, true) >= 0);
			f->fb.background = false;
		}
		f->fb.now_ns = t;
		uintptr_t a = 0;
		assert_int_equal(gp_pool_alloc(f->p, 64 * KiB, GP_NO_STREAM, &a), 0);
		assert_int_equal(gp_pool_free(f->p, a, GP_NO_STREAM), 0);
	}
	assert_true(f->st.reserved_bytes_peak <= prm.fence_headroom + 2 * prm.small_segment);
	assert_true(f->st.pending_bytes <= prm.fence_headroom + 64 * KiB);
	assert_true(f->st.inline_fences > 0);
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_retire_in_order),
		cmocka_unit_test(test_wait_serves_request),
		cmocka_unit_test(test_fence_all_waits_whatever_it_takes),
		cmocka_unit_test(test_without_markers),
		cmocka_unit_test(test_refused_during_capture),
		cmocka_unit_test(test_device_sync_covers_markers),
		cmocka_unit_test(test_tight_loop_stays_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
