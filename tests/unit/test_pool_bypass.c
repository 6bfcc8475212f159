/* What a broken invariant does in the builds users run (no assertions: this program is
 * compiled with -UGP_INVARIANTS, whatever the build's option): the checker logs it once and
 * the pool stops pooling (bypass.h) instead of aborting the program. The invariant is broken
 * from outside, through the counters the pool keeps in the caller's stats slot. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend_fake.h"
#include "pool.h"

#ifdef GP_INVARIANTS
#error "test_pool_bypass tests the pool without assertions"
#endif

#define MiB ((size_t)1 << 20)
#define S1 ((gp_stream)0x1000)

struct fx {
	struct gp_fake_backend fb;
	struct gpupool_device_stats st;
	gp_pool *p;
};

static struct fx *fx_new(bool check)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	gp_fake_backend_init(&f->fb, 0);
	struct gp_pool_params prm;
	gp_pool_params_default(&prm);
	prm.check = check;
	assert_int_equal(gp_pool_create(&f->p, 0, &prm, &f->fb.be, &f->st), 0);
	return f;
}

static uintptr_t A(struct fx *f, size_t n, gp_stream s)
{
	uintptr_t a = 0;
	assert_int_equal(gp_pool_alloc(f->p, n, s, &a), 0);
	return a;
}

/* stderr goes to a temporary file between capture_start and capture_end, which copies it to
 * stdout and answers how many times `what` was written. No assertion in between: cmocka's
 * message would go to the file. */
static int saved_stderr = -1;
static FILE *captured;

static void capture_start(void)
{
	captured = tmpfile();
	assert_non_null(captured);
	saved_stderr = dup(2);
	assert_true(saved_stderr >= 0);
	assert_int_equal(dup2(fileno(captured), 2), 2);
}

static int capture_end(const char *what)
{
	assert_int_equal(dup2(saved_stderr, 2), 2);
	close(saved_stderr);
	char buf[8192];
	rewind(captured);
	size_t n = fread(buf, 1, sizeof buf - 1, captured);
	buf[n] = '\0';
	fclose(captured);
	fputs(buf, stdout);
	int count = 0;
	for (const char *s = buf; (s = strstr(s, what)) != NULL; s += strlen(what))
		count++;
	return count;
}

static void test_check_failure_stops_pooling(void **state)
{
	(void)state;
	struct fx *f = fx_new(false);
	uintptr_t a = A(f, 4096, GP_NO_STREAM), b = A(f, 8192, S1);
	assert_int_equal(gp_pool_free(f->p, b, GP_NO_STREAM), 0);
	assert_true(gp_pool_has_pending(f->p));
	assert_int_equal(gp_pool_check(f->p), 0);
	uint64_t allocs = f->st.allocs, frees = f->st.frees, segs = f->fb.allocs;

	f->st.allocated_bytes += 512; /* the counters no longer match a recount */
	capture_start();
	int rc1 = gp_pool_check(f->p), rc2 = gp_pool_check(f->p);
	assert_int_equal(capture_end("stops pooling"), 1); /* once */
	assert_int_equal(rc1, -EFAULT);
	assert_int_equal(rc2, -EFAULT);

	/* allocations come from the backend, one per call, exactly the size asked for */
	size_t used = f->fb.used[0];
	uintptr_t c = A(f, 5000, S1), d = A(f, 3 * MiB, GP_NO_STREAM);
	assert_int_equal(f->fb.allocs, segs + 2);
	assert_int_equal(f->fb.used[0], used + 5000 + 3 * MiB);
	assert_int_not_equal(c, d);
	assert_int_equal(f->st.passthrough_allocs, 2);
	assert_int_equal(f->st.allocs, allocs);
	/* and their frees go straight back */
	assert_int_equal(f->fb.frees, 0);
	assert_int_equal(gp_pool_free(f->p, c, S1), 0);
	assert_int_equal(f->fb.frees, 1);
	assert_int_equal(f->fb.used[0], used + 3 * MiB);
	assert_int_equal(f->st.passthrough_frees, 1);
	assert_int_equal(gp_pool_free(f->p, c, S1), -ENOENT); /* gone: the runtime's to judge */
	/* a block handed out before is kept, a pointer never seen is not gpupool's */
	assert_int_equal(gp_pool_free(f->p, a, GP_NO_STREAM), 0);
	assert_int_equal(gp_pool_free(f->p, 0x1234, GP_NO_STREAM), -ENOENT);
	assert_int_equal(f->st.frees, frees);
	assert_int_equal(f->fb.used[0], used + 3 * MiB);
	/* nothing is fenced, released or retired any more */
	assert_false(gp_pool_has_pending(f->p));
	uint64_t syncs = f->fb.syncs;
	assert_int_equal(gp_pool_fence(f->p), 0);
	assert_int_equal(gp_pool_release(f->p, 0), 0);
	gp_pool_stream_retire(f->p, S1);
	assert_int_equal(f->fb.syncs, syncs);
	assert_int_equal(f->fb.frees, 1);

	/* destroy gives back the segments and what was allocated since */
	gp_pool_destroy(f->p);
	assert_int_equal(f->fb.used[0], 0);
	free(f);
}

/* With the check knob on, the operation after which the checker fails still completes; the
 * next one is served by the backend. */
static void test_check_after_every_operation(void **state)
{
	(void)state;
	struct fx *f = fx_new(true);
	uintptr_t a = A(f, 4096, S1);
	f->st.requested_bytes += 1;
	uint64_t segs = f->fb.allocs;
	uintptr_t b = 0, c = 0;
	capture_start();
	int rc1 = gp_pool_alloc(f->p, 4096, S1, &b), rc2 = gp_pool_alloc(f->p, 4096, S1, &c);
	assert_int_equal(capture_end("stops pooling"), 1);
	assert_int_equal(rc1, 0);
	assert_int_equal(rc2, 0);
	assert_int_equal(b, a + 4096); /* from the pool: the check ran after it */
	assert_int_equal(f->fb.allocs, segs + 1);
	assert_int_equal(f->st.passthrough_allocs, 1);
	/* a backend that cannot take memory back now (a capture is active) leaves the free to
	 * the caller, who passes it to the runtime */
	f->fb.sync_busy = true;
	assert_int_equal(gp_pool_free(f->p, c, S1), -ENOENT);
	f->fb.sync_busy = false;
	f->fb.used[0] -= 4096; /* what the runtime freed */
	gp_pool_destroy(f->p);
	assert_int_equal(f->fb.used[0], 0);
	free(f);
}

/* Every entry point answers a broken pool without reading its blocks, gp_pool_block_pending
 * too: a block freed with cudaFree before the pool broke is not reported pending (nothing is
 * pending any more: gp_pool_has_pending says false, and no fence will retire it), and
 * gp_pool_walk refuses. */
static void test_broken_pool_readers(void **state)
{
	(void)state;
	struct fx *f = fx_new(false);
	uintptr_t a = A(f, 4096, GP_NO_STREAM), b = A(f, 4096, GP_NO_STREAM);
	assert_int_equal(gp_pool_free(f->p, a, GP_NO_STREAM), 0);
	assert_true(gp_pool_block_pending(f->p, a));
	assert_false(gp_pool_block_pending(f->p, b));
	struct gp_pool_walker w = {0};
	assert_int_equal(gp_pool_walk(f->p, &w), 0);

	f->st.free_blocks += 1; /* the counters no longer match a recount */
	capture_start();
	int rc = gp_pool_check(f->p);
	assert_int_equal(capture_end("stops pooling"), 1);
	assert_int_equal(rc, -EFAULT);

	assert_false(gp_pool_has_pending(f->p));
	assert_false(gp_pool_block_pending(f->p, a));
	assert_false(gp_pool_block_pending(f->p, b));
	assert_int_equal(gp_pool_walk(f->p, &w), -EFAULT);
	/* the fence thread's questions get the same answers */
	assert_int_equal(gp_pool_fence_poll(f->p, true), 0);
	assert_int_equal(gp_pool_fence(f->p), 0);
	assert_int_equal(f->fb.marks, 0);
	assert_int_equal(f->fb.syncs, 0);
	/* lookup still knows a block handed out before (the shim refuses to export it) */
	struct gp_block_info bi;
	assert_int_equal(gp_pool_lookup(f->p, b, &bi), 0);
	assert_int_equal(bi.addr, b);
	gp_pool_destroy(f->p);
	assert_int_equal(f->fb.used[0], 0);
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_failure_stops_pooling),
		cmocka_unit_test(test_check_after_every_operation),
		cmocka_unit_test(test_broken_pool_readers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
