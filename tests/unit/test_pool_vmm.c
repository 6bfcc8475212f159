/* Unit tests of the pool's virtual-memory segments (src/pool/vmm.c) against the fake backend
 * with 2 MiB chunks: growth by chunks at a range's end, blocks across chunks, free chunks in
 * the middle given back by release and decay (and pending or stream-freed memory only as it
 * may be), the free block before a hole taken in, the segments knob, a device without
 * virtual memory, a driver that refuses a map or an unmap partway, which ranges meet the
 * pool's reservations (gp_pool_meets), and a randomized run with
 * the checker after every step and the fake's own record of what is mapped compared with the
 * page's figures. */
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
#define G (2 * MiB)
#define S1 ((gp_stream)0x1000)
#define S2 ((gp_stream)0x2000)

struct fx {
	struct gp_fake_backend fb;
	struct gpupool_device_stats st;
	struct gp_pool_params prm;
	gp_pool *p;
};

/* A pool of segments:vmm over a fake device of `capacity` bytes (0: unlimited) with 2 MiB
 * chunks; tune changes the parameters first. */
static struct fx *fx_make(size_t capacity, size_t gran, void (*tune)(struct gp_pool_params *))
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	gp_fake_backend_init(&f->fb, capacity);
	f->fb.granularity = gran;
	gp_pool_params_default(&f->prm);
	f->prm.check = true;
	f->prm.segments = GP_SEGMENTS_VMM;
	if (tune)
		tune(&f->prm);
	assert_int_equal(gp_pool_create(&f->p, 0, &f->prm, &f->fb.be, &f->st), 0);
	return f;
}

static struct fx *fx_new(void) { return fx_make(0, G, NULL); }

/* What the fake has mapped is what the page says is reserved, and nothing broke its rules. */
static void agree(struct fx *f)
{
	assert_int_equal(gp_pool_check(f->p), 0);
	assert_int_equal(f->fb.used[0], f->st.reserved_bytes);
	assert_int_equal(f->fb.vmm_violations, 0);
	assert_int_equal(f->st.cached_bytes, f->st.reserved_bytes - f->st.allocated_bytes);
}

static void fx_free(struct fx *f)
{
	agree(f);
	gp_pool_destroy(f->p);
	/* everything back: chunks and reservations */
	assert_int_equal(f->fb.used[0], 0);
	assert_int_equal(f->fb.nmapped, 0);
	assert_int_equal(f->fb.nresv, 0);
	assert_int_equal(f->fb.vmm_violations, 0);
	gp_fake_backend_fini(&f->fb);
	free(f);
}

static uintptr_t A(struct fx *f, size_t n, gp_stream s)
{
	uintptr_t a = 0;
	assert_int_equal(gp_pool_alloc(f->p, n, s, &a), 0);
	assert_int_equal(a % 512, 0);
	agree(f);
	return a;
}

static void F(struct fx *f, uintptr_t a, gp_stream s)
{
	assert_int_equal(gp_pool_free(f->p, a, s), 0);
	agree(f);
}

/* Bytes the fake has mapped in [a, a + n). */
static size_t mapped(struct fx *f, uintptr_t a, size_t n) { return gp_fake_backend_mapped(&f->fb, 0, a, a + n); }

/* One range grows chunk by chunk at its end: blocks sit side by side across chunks, and
 * only the chunks they need are mapped. */
static void test_grow_by_chunks(void **state)
{
	(void)state;
	struct fx *f = fx_new();
	uintptr_t a = A(f, 3 * MiB, S1), b = A(f, 3 * MiB, S1), c = A(f, 5 * MiB, S1);
	assert_int_equal(b, a + 3 * MiB); /* across the chunk boundary at a + 2 MiB */
	assert_int_equal(c, b + 3 * MiB);
	assert_int_equal(f->st.reserved_bytes, 12 * MiB); /* 11 MiB live: six chunks */
	assert_int_equal(f->st.segments, 1);
	assert_int_equal(f->fb.vmm_reserves, 1);
	assert_int_equal(f->fb.chunks_mapped, 6);
	assert_int_equal(f->st.allocated_bytes, 11 * MiB);
	struct gp_block_info bi;
	assert_int_equal(gp_pool_lookup(f->p, b + 1, &bi), 0);
	assert_true(bi.vmm);
	assert_int_equal(bi.addr, b);
	assert_int_equal(bi.size, 3 * MiB);
	/* small requests: a range of their own kind */
	uintptr_t s = A(f, 4 * KiB, S1);
	assert_int_equal(f->st.segments, 2);
	assert_int_equal(f->st.reserved_bytes, 14 * MiB);
	F(f, s, S1);
	F(f, a, S1);
	F(f, b, S1);
	F(f, c, S1);
	fx_free(f);
}

/* Free chunks in the middle of a range go back on a release, those under live or pending
 * blocks stay; what is left around the hole stays free and usable. */
static void test_release_middle(void **state)
{
	(void)state;
	struct fx *f = fx_new();
	uintptr_t a = A(f, 3 * MiB, S1), b = A(f, 6 * MiB, S1), c = A(f, 3 * MiB, S1);
	uintptr_t d = A(f, 1 * MiB + 512 * KiB, GP_NO_STREAM);
	assert_int_equal(f->st.reserved_bytes, 14 * MiB);
	F(f, b, S1); /* [3 MiB, 9 MiB): the chunks at 4, 6 MiB are whole inside, 2 and 8 MiB shared */
	F(f, d, GP_NO_STREAM); /* pending: its chunk stays */
	size_t r = gp_pool_release(f->p, 0);
	assert_int_equal(r, 4 * MiB);
	agree(f);
	assert_int_equal(mapped(f, a, 12 * MiB), 8 * MiB);
	assert_int_equal(mapped(f, a + 4 * MiB, 4 * MiB), 0);
	assert_int_equal(mapped(f, a + 2 * MiB, 2 * MiB), 2 * MiB); /* under a's tail */
	assert_int_equal(f->st.segments, 1);
	assert_int_equal(f->st.releasable_bytes, 0);
	/* stream-freed memory needs a wait for the device before it goes; the ready list's none */
	assert_int_equal(f->fb.vmm_syncs, 1);
	/* a hole is memory again when a request needs it: mapped at the hole's start */
	uintptr_t e = A(f, 4 * MiB, S1);
	assert_true(e >= a && e < a + 12 * MiB);
	assert_int_equal(f->st.reserved_bytes, 14 * MiB);
	assert_int_equal(gp_pool_fence(f->p), 0);
	F(f, e, S1);
	F(f, a, S1);
	F(f, c, S1);
	r = gp_pool_release(f->p, 0);
	agree(f);
	assert_int_equal(f->st.reserved_bytes, 0);
	assert_int_equal(f->st.segments, 0); /* a range all hole goes back */
	assert_int_equal(f->fb.nresv, 0);
	fx_free(f);
}

/* gp_pool_meets: a range that shares a byte with the reservation, mapped or not, live or
 * free, meets the pool; one beside it does not; a range past the end of the address space
 * ends there; once the reservation goes back nothing meets. */
static void test_meets(void **state)
{
	(void)state;
	struct fx *f = fx_new();
	uintptr_t a = A(f, 3 * MiB, S1);
	struct gp_block_info bi;
	assert_int_equal(gp_pool_lookup(f->p, a, &bi), 0);
	uintptr_t seg = bi.segment, end = bi.segment + bi.segment_size;
	assert_true(bi.segment_size > 4 * MiB); /* a reservation larger than its two chunks */
	assert_true(gp_pool_meets(f->p, a, 1));
	assert_true(gp_pool_meets(f->p, a + 1, 0)); /* size 0: the byte at the address */
	assert_true(gp_pool_meets(f->p, a, G));
	assert_true(gp_pool_meets(f->p, end - G, G)); /* the unmapped rest of the reservation */
	assert_true(gp_pool_meets(f->p, end - 1, 0));
	assert_false(gp_pool_meets(f->p, end, G));
	assert_false(gp_pool_meets(f->p, seg - G, G));
	assert_true(gp_pool_meets(f->p, seg - G, G + 1));
	assert_true(gp_pool_meets(f->p, seg - G, SIZE_MAX)); /* ends at the top of the address space */
	assert_false(gp_pool_meets(f->p, end, SIZE_MAX));
	assert_false(gp_pool_meets(f->p, 0, 0));
	F(f, a, S1);
	assert_true(gp_pool_meets(f->p, a, G)); /* free, still the pool's */
	gp_pool_release(f->p, 0);
	agree(f);
	assert_int_equal(f->fb.nresv, 0);
	assert_false(gp_pool_meets(f->p, a, G));
	assert_false(gp_pool_meets(f->p, seg, end - seg));
	fx_free(f);
}

static void tune_keep(struct gp_pool_params *p) { p->release_on_grow = false; }

/* Growing takes in the free block just before the range's unused end: fewer chunks mapped
 * than the request (the tail of the last chunk is reused). (No release before growing: it
 * would move free chunks to the end.) */
static void test_tail_taken_in(void **state)
{
	(void)state;
	struct fx *f = fx_make(0, G, tune_keep);
	uintptr_t a = A(f, 3 * MiB, S1); /* 4 MiB mapped, 1 MiB free after a */
	uintptr_t b = A(f, 5 * MiB, S1); /* starts right after a: 1 MiB reused, 4 MiB mapped */
	assert_int_equal(b, a + 3 * MiB);
	assert_int_equal(f->st.reserved_bytes, 8 * MiB);
	/* another stream's free tail is not taken in (it would need an event) */
	uintptr_t c = A(f, 1 * MiB + 512 * KiB, S2); /* 1.5 MiB at 8 MiB: 2 MiB mapped */
	F(f, c, S2);
	uintptr_t d = A(f, 3 * MiB, S1);
	assert_int_equal(d, c + 2 * MiB);
	F(f, a, S1);
	F(f, b, S1);
	F(f, d, S1);
	fx_free(f);
}

/* The decay gives back free chunks once they sat unchanged for after_ns; releasable_bytes
 * counts the whole free chunks a release could give back. */
static void test_decay_chunks(void **state)
{
	(void)state;
	const uint64_t s = 1000000000ull;
	struct fx *f = fx_new();
	uintptr_t a = A(f, 4 * MiB, S1), b = A(f, 4 * MiB, S1), c = A(f, 4 * MiB, S1);
	size_t kept = 0;
	F(f, b, S1);
	assert_int_equal(gp_pool_decay(f->p, 1 * s, 10 * s, SIZE_MAX, &kept), 0);
	assert_int_equal(kept, 4 * MiB);
	assert_int_equal(f->st.releasable_bytes, 4 * MiB);
	/* used again at 5 s: idle from the next pass */
	uintptr_t b2 = A(f, 4 * MiB, S1);
	assert_int_equal(b2, b);
	F(f, b2, S1);
	assert_int_equal(gp_pool_decay(f->p, 6 * s, 10 * s, SIZE_MAX, &kept), 0);
	assert_int_equal(gp_pool_decay(f->p, 12 * s, 10 * s, SIZE_MAX, &kept), 0);
	assert_int_equal(gp_pool_decay(f->p, 16 * s, 10 * s, SIZE_MAX, &kept), 4 * MiB);
	agree(f);
	assert_int_equal(kept, 0);
	assert_int_equal(f->st.decay_releases, 1);
	assert_int_equal(f->st.decayed_bytes, 4 * MiB);
	assert_int_equal(mapped(f, b, 4 * MiB), 0);
	assert_int_equal(f->st.reserved_bytes, 8 * MiB);
	F(f, a, S1);
	F(f, c, S1);
	fx_free(f);
}

static void tune_auto(struct gp_pool_params *p) { p->segments = GP_SEGMENTS_AUTO; }
static void tune_whole(struct gp_pool_params *p) { p->segments = GP_SEGMENTS_WHOLE; }

/* segments:auto: a cudaMalloc of at least medium_max the pool grows for gets a whole
 * segment (IPC can export it), the rest chunks; segments:whole never maps; a device without
 * virtual memory gets whole segments whatever the knob. */
static void test_knob_and_fallback(void **state)
{
	(void)state;
	struct fx *f = fx_make(0, G, tune_auto);
	uintptr_t big = A(f, 12 * MiB, GP_NO_STREAM), small = A(f, 4 * KiB, GP_NO_STREAM);
	uintptr_t async = A(f, 12 * MiB, S1);
	struct gp_block_info bi;
	assert_int_equal(gp_pool_lookup(f->p, big, &bi), 0);
	assert_false(bi.vmm);
	assert_true(bi.addr == bi.segment && bi.size == bi.segment_size); /* exportable */
	assert_int_equal(gp_pool_lookup(f->p, small, &bi), 0);
	assert_true(bi.vmm);
	assert_int_equal(gp_pool_lookup(f->p, async, &bi), 0);
	assert_true(bi.vmm);
	assert_int_equal(f->fb.allocs, 1);
	F(f, big, GP_NO_STREAM);
	F(f, small, GP_NO_STREAM);
	F(f, async, S1);
	assert_int_equal(gp_pool_fence(f->p), 0);
	fx_free(f);

	f = fx_make(0, G, tune_whole);
	F(f, A(f, 4 * KiB, S1), S1);
	assert_int_equal(f->fb.vmm_reserves, 0);
	assert_int_equal(f->fb.allocs, 1);
	fx_free(f);

	f = fx_make(0, 0, NULL); /* no virtual memory management */
	F(f, A(f, 4 * KiB, S1), S1);
	assert_int_equal(f->fb.vmm_reserves, 0);
	assert_int_equal(f->fb.allocs, 1);
	assert_int_equal(f->st.vmm_granularity, 0);
	fx_free(f);

	/* no address space: the request gets a whole segment */
	f = fx_new();
	assert_int_equal(f->st.vmm_granularity, G);
	f->fb.fail_reserve_at = 1;
	uintptr_t w = A(f, 4 * KiB, S1);
	assert_int_equal(gp_pool_lookup(f->p, w, &bi), 0);
	assert_false(bi.vmm);
	F(f, w, S1);
	fx_free(f);
}

/* A driver that refuses a map partway: nothing is mapped twice, what the undo could not
 * unmap stays counted and usable, the request fails with out of memory and the next one
 * works. */
static void test_map_refused(void **state)
{
	(void)state;
	struct fx *f = fx_new();
	uintptr_t a = A(f, 2 * MiB, S1);
	/* the 3rd chunk of the next 8 MiB map fails, and the first retry's map too */
	f->fb.fail_map_at = f->fb.chunk_maps + 3;
	f->fb.fail_maps = false;
	uintptr_t x = 0;
	f->fb.fail_unmap_at = 0;
	int rc = gp_pool_alloc(f->p, 8 * MiB, S1, &x);
	/* the retry (release and grow again) mapped it */
	assert_int_equal(rc, 0);
	agree(f);
	assert_int_equal(f->st.segment_alloc_failures, 1);
	F(f, x, S1);
	/* every map refused: out of memory, nothing left mapped of the attempts */
	f->fb.fail_maps = true;
	size_t before = f->st.reserved_bytes;
	assert_int_equal(gp_pool_alloc(f->p, 64 * MiB, S1, &x), -ENOMEM);
	agree(f);
	assert_true(f->st.reserved_bytes <= before);
	assert_int_equal(f->st.ooms, 1);
	f->fb.fail_maps = false;
	/* a map refused after 2 chunks whose undo is refused at its first unmap: the 2nd chunk
	 * stays mapped with the 1st (a prefix), free in the pool's cache, counted */
	gp_pool_release(f->p, 0);
	agree(f);
	size_t r0 = f->st.reserved_bytes;
	f->fb.fail_map_at = f->fb.chunk_maps + 3;
	f->fb.fail_unmap_at = f->fb.chunk_unmaps + 1;
	f->prm.release_on_grow = false;
	rc = gp_pool_alloc(f->p, 8 * MiB, S1, &x);
	agree(f);
	if (rc == 0)
		F(f, x, S1);
	assert_true(f->st.reserved_bytes >= r0);
	gp_pool_release(f->p, 0);
	agree(f);
	F(f, a, S1);
	gp_pool_release(f->p, 0);
	agree(f);
	assert_int_equal(f->st.reserved_bytes, 0);
	fx_free(f);
}

/* A driver that refuses an unmap partway through a release: what went back is a hole, the
 * rest stays mapped and free, and a later release gives it back. */
static void test_unmap_refused(void **state)
{
	(void)state;
	struct fx *f = fx_new();
	uintptr_t a = A(f, 16 * MiB, S1);
	assert_int_equal(gp_pool_fence(f->p), 0);
	F(f, a, S1);
	f->fb.fail_unmap_at = f->fb.chunk_unmaps + 3; /* the 3rd of 8 */
	size_t r = gp_pool_release(f->p, 0);
	assert_int_equal(r, 4 * MiB);
	agree(f);
	assert_int_equal(f->st.reserved_bytes, 12 * MiB);
	assert_int_equal(f->st.releasable_bytes, 12 * MiB);
	assert_int_equal(gp_pool_release(f->p, 0), 12 * MiB);
	agree(f);
	assert_int_equal(f->st.reserved_bytes, 0);
	/* a capture refuses unmaps (and waits): nothing changes */
	uintptr_t b = A(f, 6 * MiB, S1);
	F(f, b, S1);
	f->fb.sync_busy = true;
	assert_int_equal(gp_pool_release(f->p, 0), 0);
	agree(f);
	f->fb.sync_busy = false;
	assert_int_equal(gp_pool_release(f->p, 0), 6 * MiB);
	fx_free(f);
}

/* Out of memory on the device: the OOM retry unmaps free chunks anywhere (a hole in the
 * middle too) and maps them where the request fits. (No release before growing, which would
 * have moved them before the device ran out.) */
static void test_oom_retry_moves_chunks(void **state)
{
	(void)state;
	struct fx *f = fx_make(32 * MiB, G, tune_keep);
	uintptr_t a = A(f, 10 * MiB, S1), b = A(f, 10 * MiB, S1), c = A(f, 10 * MiB, S1);
	F(f, b, S1);
	/* 12 MiB fits no free block; the device has 2 MiB left: b's chunks move */
	uintptr_t d = A(f, 12 * MiB, S1);
	assert_true(d > c);
	assert_int_equal(f->st.oom_retries, 1);
	assert_true(f->st.reserved_bytes <= 32 * MiB);
	F(f, a, S1);
	F(f, c, S1);
	F(f, d, S1);
	fx_free(f);
}

/* Three blocks of n bytes side by side on S1, then one of `last` (so that the third is not
 * the range's end): x[0..3]. */
static void row(struct fx *f, size_t n, size_t last, uintptr_t *x)
{
	for (int i = 0; i < 3; i++)
		x[i] = A(f, n, S1);
	x[3] = A(f, last, S1);
}

/* Frees x[i] on S1 and marks it freed (0). */
static void free_of(struct fx *f, uintptr_t *x, int i)
{
	F(f, x[i], S1);
	x[i] = 0;
}

/* Frees every block of x[0..n) not yet freed. */
static void free_rest(struct fx *f, uintptr_t *x, int n)
{
	for (int i = 0; i < n; i++)
		if (x[i])
			free_of(f, x, i);
}

/* Before growing past its peak, the pool moves free chunks to where the request needs them
 * only where they cover all of the growth: the peak then holds. Where they cover part of it,
 * nothing moves: the peak would rise anyway, and the chunks given back would be mapped again
 * by the next step that needs them (vmm.c, gp_vmm_release_for_peak). */
static void test_move_keeps_peak(void **state)
{
	(void)state;
	struct fx *f = fx_new();
	uintptr_t x[5];
	row(f, 10 * MiB, 2 * MiB, x);
	assert_int_equal(f->st.reserved_bytes_peak, 32 * MiB);
	free_of(f, x, 0);
	free_of(f, x, 2);
	assert_int_equal(gp_pool_fence(f->p), 0);
	/* 12 MiB fits neither free block; 20 MiB of free chunks cover the 12 it would grow by */
	x[4] = A(f, 12 * MiB, S1);
	assert_int_equal(f->st.reserved_bytes, 32 * MiB);
	assert_int_equal(f->st.reserved_bytes_peak, 32 * MiB);
	assert_int_equal(f->st.released_bytes, 12 * MiB);
	free_rest(f, x, 5);
	fx_free(f);

	f = fx_new();
	row(f, 10 * MiB, 2 * MiB, x);
	uintptr_t b = x[1];
	free_of(f, x, 1);
	assert_int_equal(gp_pool_fence(f->p), 0);
	/* 10 MiB of free chunks against 12: nothing moves, b's chunks stay mapped for the next
	 * request of their size */
	x[4] = A(f, 12 * MiB, S1);
	assert_int_equal(f->st.reserved_bytes, 44 * MiB);
	assert_int_equal(f->st.released_bytes, 0);
	assert_int_equal(mapped(f, b, 10 * MiB), 10 * MiB);
	x[1] = A(f, 10 * MiB, S1);
	assert_int_equal(x[1], b);
	assert_int_equal(f->st.reserved_bytes, 44 * MiB);
	free_rest(f, x, 5);
	fx_free(f);
}

/* segments:auto: a move before growing past the peak gives back free chunks only, never the
 * whole free segment a large cudaMalloc had, which the next such cudaMalloc takes again
 * (given back, it was taken again at once, above the peak). */
static void test_move_keeps_whole_segments(void **state)
{
	(void)state;
	struct fx *f = fx_make(0, G, tune_auto);
	uintptr_t big = A(f, 12 * MiB, GP_NO_STREAM);
	F(f, big, GP_NO_STREAM);
	assert_int_equal(gp_pool_fence(f->p), 0);
	/* chunks beside it (none fits the free 12 MiB segment) */
	uintptr_t x[5];
	row(f, 16 * MiB, 14 * MiB, x);
	assert_int_equal(f->st.reserved_bytes_peak, 74 * MiB);
	free_of(f, x, 0);
	free_of(f, x, 2);
	assert_int_equal(gp_pool_fence(f->p), 0);
	/* 24 MiB fits no free block: 32 MiB of free chunks cover the growth, and move */
	x[4] = A(f, 24 * MiB, S1);
	assert_int_equal(f->st.reserved_bytes, 74 * MiB);
	assert_int_equal(f->st.released_bytes, 24 * MiB);
	/* the whole segment stayed: the next cudaMalloc of its size takes it, no new one */
	uintptr_t big2 = A(f, 12 * MiB, GP_NO_STREAM);
	assert_int_equal(big2, big);
	assert_int_equal(f->fb.allocs, 1);
	assert_int_equal(f->st.reserved_bytes_peak, 74 * MiB);
	F(f, big2, GP_NO_STREAM);
	free_rest(f, x, 5);
	assert_int_equal(gp_pool_fence(f->p), 0);
	fx_free(f);
}

static void tune_mss(struct gp_pool_params *p) { p->max_split_size = 20 * MiB; }

/* max_split_size keeps a whole segment's oversize block whole; a virtual-memory segment's
 * free blocks merge into runs larger than the knob and are split as any: a request below it
 * takes part of a 40 MiB free run, with no chunk mapped (before, it mapped new chunks for
 * every such request, and GPT-2's replay reserved 23 times what it used). */
static void test_max_split_size_splits_runs(void **state)
{
	(void)state;
	struct fx *f = fx_make(0, G, tune_mss);
	uintptr_t a = A(f, 20 * MiB, S1), b = A(f, 20 * MiB, S1), c = A(f, 2 * MiB, S1);
	F(f, a, S1);
	F(f, b, S1); /* one free run of 40 MiB */
	size_t mapped_before = f->fb.chunks_mapped;
	uintptr_t d = A(f, 4 * MiB, S1), e = A(f, 24 * MiB, S1);
	assert_true(d >= a && d < c);
	assert_true(e >= a && e < c);
	assert_int_equal(f->fb.chunks_mapped, mapped_before);
	assert_int_equal(f->st.reserved_bytes, 42 * MiB);
	F(f, c, S1);
	F(f, d, S1);
	F(f, e, S1);
	fx_free(f);
}

/* The walk shows a range as the mapped parts between its holes, each expandable. */
struct walked {
	size_t segs, bytes;
	bool expandable;
};

static int on_seg(void *ctx, const struct gp_walk_segment *s)
{
	struct walked *w = ctx;
	w->segs++;
	w->bytes += s->size;
	w->expandable = s->expandable;
	return 0;
}

static void test_walk(void **state)
{
	(void)state;
	struct fx *f = fx_new();
	uintptr_t a = A(f, 4 * MiB, S1), b = A(f, 4 * MiB, S1), c = A(f, 4 * MiB, S1);
	F(f, b, S1);
	gp_pool_release(f->p, 0);
	struct walked w = {0};
	struct gp_pool_walker wk = {.ctx = &w, .segment = on_seg};
	assert_int_equal(gp_pool_walk(f->p, &wk), 0);
	assert_int_equal(w.segs, 2);
	assert_int_equal(w.bytes, f->st.reserved_bytes);
	assert_true(w.expandable);
	F(f, a, S1);
	F(f, c, S1);
	fx_free(f);
}

/* Thousands of random operations, releases, decays and injected failures: the checker after
 * each, and the fake's record of mapped memory equal to the page's. */
static void test_randomized(void **state)
{
	(void)state;
	struct fx *f = fx_make(512 * MiB, G, NULL);
	enum { LIVE = 256 };
	struct {
		uintptr_t a;
		gp_stream s;
	} live[LIVE] = {{0}};
	uint64_t rng = XORSHIFT_SEED;
	static const gp_stream streams[] = {GP_NO_STREAM, S1, S2};
	uint64_t now = 1;
	unsigned ooms = 0;
	for (int i = 0; i < 100000; i++) {
		uint64_t x = xorshift64(&rng);
		unsigned k = (unsigned)(x % LIVE);
		switch ((x >> 8) % 64) {
		case 0:
			gp_pool_release(f->p, (size_t)(x >> 16) % (64 * MiB));
			break;
		case 1:
			now += 300000000ull;
			gp_pool_decay(f->p, now, 1000000000ull, 8 * MiB, NULL);
			break;
		case 2:
			(void)gp_pool_fence(f->p);
			break;
		case 3:
			f->fb.fail_map_at = f->fb.chunk_maps + 1 + (x >> 20) % 8;
			break;
		case 4:
			f->fb.fail_unmap_at = f->fb.chunk_unmaps + 1 + (x >> 20) % 8;
			break;
		default:
			if (live[k].a) {
				assert_int_equal(gp_pool_free(f->p, live[k].a, live[k].s), 0);
				live[k].a = 0;
			} else {
				/* log-uniform from 512 B to 64 MiB */
				size_t n = (size_t)512 << ((x >> 16) % 18);
				n += (x >> 32) % n;
				gp_stream s = streams[(x >> 40) % 3];
				uintptr_t a = 0;
				int rc = gp_pool_alloc(f->p, n, s, &a);
				if (rc == 0) {
					live[k].a = a;
					live[k].s = s;
				} else {
					assert_int_equal(rc, -ENOMEM);
					ooms++;
				}
			}
		}
		agree(f);
	}
	for (unsigned k = 0; k < LIVE; k++)
		if (live[k].a)
			assert_int_equal(gp_pool_free(f->p, live[k].a, live[k].s), 0);
	assert_int_equal(gp_pool_fence(f->p), 0);
	f->fb.fail_unmap_at = 0;
	gp_pool_release(f->p, 0);
	agree(f);
	assert_int_equal(f->st.reserved_bytes, 0);
	print_message("randomized: %u out-of-memory answers, %llu chunks mapped, %llu unmapped\n", ooms,
		      (unsigned long long)f->fb.chunks_mapped, (unsigned long long)f->fb.chunks_unmapped);
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow_by_chunks),
		cmocka_unit_test(test_release_middle),
		cmocka_unit_test(test_meets),
		cmocka_unit_test(test_tail_taken_in),
		cmocka_unit_test(test_decay_chunks),
		cmocka_unit_test(test_knob_and_fallback),
		cmocka_unit_test(test_map_refused),
		cmocka_unit_test(test_unmap_refused),
		cmocka_unit_test(test_oom_retry_moves_chunks),
		cmocka_unit_test(test_move_keeps_peak),
		cmocka_unit_test(test_move_keeps_whole_segments),
		cmocka_unit_test(test_max_split_size_splits_runs),
		cmocka_unit_test(test_walk),
		cmocka_unit_test(test_randomized),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
