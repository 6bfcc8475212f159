/* Unit tests of the address map (addrmap.c): add, find with and without unlinking, growth,
 * collisions in one bucket, many entries, and a randomized run against a reference.
 * Depends on addrmap.c only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "addrmap.h"
#include "xorshift.h"

#define BASE ((uintptr_t)0x7f0000000000ull)

static uint64_t rng_state = XORSHIFT_SEED;

static uint64_t rnd(void) { return xorshift64(&rng_state); }

static void test_add_find_unlink(void **state)
{
	(void)state;
	struct gp_addrmap m;
	assert_int_equal(gp_addrmap_init(&m, 4), 0);
	struct gp_block b[3];
	memset(b, 0, sizeof b);
	for (int i = 0; i < 3; i++) {
		b[i].addr = BASE + 0x200 * (uintptr_t)i;
		gp_addrmap_add(&m, &b[i]);
	}
	assert_int_equal(m.count, 3);
	assert_int_equal(gp_addrmap_recount(&m), 3);
	assert_null(gp_addrmap_find(&m, BASE + 0x600, GP_MAP_KEEP));
	assert_null(gp_addrmap_find(&m, BASE + 0x1, GP_MAP_KEEP)); /* inside a block is not at it */
	assert_ptr_equal(gp_addrmap_find(&m, BASE + 0x200, GP_MAP_KEEP), &b[1]);
	assert_int_equal(m.count, 3);
	assert_ptr_equal(gp_addrmap_find(&m, BASE + 0x200, GP_MAP_UNLINK), &b[1]);
	assert_int_equal(m.count, 2);
	assert_int_equal(gp_addrmap_recount(&m), 2);
	assert_null(gp_addrmap_find(&m, BASE + 0x200, GP_MAP_KEEP));
	assert_null(gp_addrmap_find(&m, BASE + 0x200, GP_MAP_UNLINK));
	assert_int_equal(m.count, 2);
	assert_ptr_equal(gp_addrmap_find(&m, BASE, GP_MAP_KEEP), &b[0]);
	assert_ptr_equal(gp_addrmap_find(&m, BASE + 0x400, GP_MAP_KEEP), &b[2]);
	/* back in after leaving */
	gp_addrmap_add(&m, &b[1]);
	assert_ptr_equal(gp_addrmap_find(&m, BASE + 0x200, GP_MAP_KEEP), &b[1]);
	gp_addrmap_fini(&m);
	assert_null(m.bucket);
}

/* Blocks whose addresses share one bucket: each is found, and unlinking the head, the
 * middle or the tail of the chain leaves the others reachable. */
static void test_collisions(void **state)
{
	(void)state;
	enum { N = 6 };
	struct gp_addrmap m;
	assert_int_equal(gp_addrmap_init(&m, 1024), 0);
	struct gp_block b[N];
	memset(b, 0, sizeof b);
	size_t want = gp_addrmap_slot(&m, BASE), n = 0;
	for (uintptr_t a = BASE; n < N; a += 0x200)
		if (gp_addrmap_slot(&m, a) == want)
			b[n++].addr = a;
	for (size_t i = 0; i < N; i++)
		gp_addrmap_add(&m, &b[i]);
	assert_int_equal(m.mask, 1023); /* no growth: every block is in one chain */
	size_t chain = 0;
	for (const struct gp_block *x = m.bucket[want]; x; x = x->hnext)
		chain++;
	assert_int_equal(chain, N);
	for (size_t i = 0; i < N; i++)
		assert_ptr_equal(gp_addrmap_find(&m, b[i].addr, GP_MAP_KEEP), &b[i]);
	/* the head of the chain is the last added */
	static const size_t order[] = {N - 1, 2, 0, 4, 3, 1};
	for (size_t k = 0; k < N; k++) {
		assert_ptr_equal(gp_addrmap_find(&m, b[order[k]].addr, GP_MAP_UNLINK), &b[order[k]]);
		for (size_t j = 0; j < N; j++) {
			int gone = 0;
			for (size_t i = 0; i <= k; i++)
				gone |= order[i] == j;
			assert_ptr_equal(gp_addrmap_find(&m, b[j].addr, GP_MAP_KEEP), gone ? NULL : &b[j]);
		}
		assert_int_equal(m.count, N - k - 1);
		assert_int_equal(gp_addrmap_recount(&m), N - k - 1);
	}
	assert_null(m.bucket[want]);
	gp_addrmap_fini(&m);
}

/* The table doubles whenever it holds more blocks than buckets, and keeps every block. */
static void test_grow_many(void **state)
{
	(void)state;
	enum { N = 100000 };
	struct gp_addrmap m;
	assert_int_equal(gp_addrmap_init(&m, 2), 0);
	struct gp_block *b = calloc(N, sizeof *b);
	assert_non_null(b);
	size_t grows = 0, mask = m.mask;
	for (size_t i = 0; i < N; i++) {
		b[i].addr = BASE + 0x200 * (uintptr_t)i * 3;
		gp_addrmap_add(&m, &b[i]);
		assert_true(m.count <= m.mask + 1);
		if (m.mask != mask) {
			assert_int_equal(m.mask, mask * 2 + 1);
			mask = m.mask;
			grows++;
		}
	}
	assert_int_equal(m.count, N);
	assert_int_equal(m.mask + 1, 131072);
	assert_int_equal(grows, 16);
	assert_int_equal(gp_addrmap_recount(&m), N);
	for (size_t i = 0; i < N; i++)
		assert_ptr_equal(gp_addrmap_find(&m, b[i].addr, GP_MAP_KEEP), &b[i]);
	/* no chain is long: the hash spreads aligned addresses */
	size_t longest = 0;
	for (size_t i = 0; i <= m.mask; i++) {
		size_t c = 0;
		for (const struct gp_block *x = m.bucket[i]; x; x = x->hnext)
			c++;
		if (c > longest)
			longest = c;
	}
	assert_true(longest <= 16);
	for (size_t i = 0; i < N; i += 2)
		assert_ptr_equal(gp_addrmap_find(&m, b[i].addr, GP_MAP_UNLINK), &b[i]);
	assert_int_equal(m.count, N / 2);
	for (size_t i = 0; i < N; i++)
		assert_ptr_equal(gp_addrmap_find(&m, b[i].addr, GP_MAP_KEEP), i % 2 ? &b[i] : NULL);
	gp_addrmap_fini(&m);
	free(b);
}

/* Random adds and unlinks of blocks at random 512-byte aligned addresses, checked against
 * a flag per block. */
static void test_randomized(void **state)
{
	(void)state;
	enum { N = 4096, OPS = 200000 };
	struct gp_addrmap m;
	assert_int_equal(gp_addrmap_init(&m, 256), 0);
	struct gp_block *b = calloc(N, sizeof *b);
	unsigned char *in = calloc(N, 1);
	assert_non_null(b);
	assert_non_null(in);
	for (size_t i = 0; i < N; i++)
		b[i].addr = BASE + ((uintptr_t)i << 20) + ((rnd() % 2048) << 9);
	size_t count = 0;
	for (long op = 0; op < OPS; op++) {
		size_t i = rnd() % N;
		if (!in[i]) {
			assert_null(gp_addrmap_find(&m, b[i].addr, GP_MAP_KEEP));
			gp_addrmap_add(&m, &b[i]);
			in[i] = 1;
			count++;
		} else if (rnd() % 2) {
			assert_ptr_equal(gp_addrmap_find(&m, b[i].addr, GP_MAP_UNLINK), &b[i]);
			in[i] = 0;
			count--;
		} else {
			assert_ptr_equal(gp_addrmap_find(&m, b[i].addr, GP_MAP_KEEP), &b[i]);
		}
		assert_int_equal(m.count, count);
	}
	assert_int_equal(gp_addrmap_recount(&m), count);
	for (size_t i = 0; i < N; i++)
		assert_ptr_equal(gp_addrmap_find(&m, b[i].addr, GP_MAP_KEEP), in[i] ? &b[i] : NULL);
	gp_addrmap_fini(&m);
	free(b);
	free(in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_find_unlink),
		cmocka_unit_test(test_collisions),
		cmocka_unit_test(test_grow_many),
		cmocka_unit_test(test_randomized),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
