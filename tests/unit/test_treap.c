/* Unit tests of the treap keyed by (size, addr) (treap.c): in-order by key with ties by
 * address, the heap property on prio, lower bound, max, erase, join, and a randomized run
 * against a sorted reference array. Depends on treap.c only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "treap.h"
#include "xorshift.h"

static uint64_t rng_state = XORSHIFT_SEED;

static uint64_t rnd(void) { return xorshift64(&rng_state); }

static void block_init(struct gp_block *b, size_t size, uintptr_t addr, uint32_t prio)
{
	memset(b, 0, sizeof *b);
	b->size = size;
	b->addr = addr;
	b->prio = prio;
}

/* Walks t in order into out[] (at most cap), checking the heap property and that every
 * key lies in (lo, hi) (NULL: unbounded). Returns the number of blocks. */
static size_t walk(const struct gp_block *t, const struct gp_block *lo, const struct gp_block *hi,
		   const struct gp_block **out, size_t cap, size_t n)
{
	if (!t)
		return n;
	if (t->left)
		assert_true(t->left->prio <= t->prio);
	if (t->right)
		assert_true(t->right->prio <= t->prio);
	if (lo)
		assert_true(gp_treap_less(lo, t));
	if (hi)
		assert_true(gp_treap_less(t, hi));
	n = walk(t->left, lo, t, out, cap, n);
	assert_true(n < cap);
	out[n++] = t;
	return walk(t->right, t, hi, out, cap, n);
}

static int cmp_key(const void *a, const void *b)
{
	const struct gp_block *x = *(const struct gp_block *const *)a, *y = *(const struct gp_block *const *)b;
	return gp_treap_less(x, y) ? -1 : gp_treap_less(y, x);
}

/* The treap under root holds exactly ref[0..n) (in any order), in key order, as a heap. */
static void expect_exactly(const struct gp_block *root, struct gp_block **ref, size_t n)
{
	const struct gp_block **seen = calloc(n + 1, sizeof *seen);
	assert_non_null(seen);
	size_t got = walk(root, NULL, NULL, seen, n + 1, 0);
	assert_int_equal(got, n);
	qsort(ref, n, sizeof *ref, cmp_key);
	for (size_t i = 0; i < n; i++)
		assert_ptr_equal(seen[i], ref[i]);
	free(seen);
}

/* The least block of ref[0..n) with size >= size, by a linear scan. */
static struct gp_block *ref_lower_bound(struct gp_block **ref, size_t n, size_t size)
{
	struct gp_block *best = NULL;
	for (size_t i = 0; i < n; i++)
		if (ref[i]->size >= size && (!best || gp_treap_less(ref[i], best)))
			best = ref[i];
	return best;
}

static void test_order_and_ties(void **state)
{
	(void)state;
	/* equal sizes order by address; equal priorities are allowed */
	static const size_t sizes[] = {4096, 512, 4096, 1024, 4096, 512, 65536, 1024};
	static const uintptr_t addrs[] = {0x9000, 0x1000, 0x3000, 0x5000, 0x6000, 0x800, 0x100000, 0x2000};
	static const uint32_t prios[] = {7, 7, 3, 9, 1, 7, 5, 9};
	enum { N = sizeof sizes / sizeof sizes[0] };
	struct gp_block b[N], *ref[N], *root = NULL;
	for (size_t i = 0; i < N; i++) {
		block_init(&b[i], sizes[i], addrs[i], prios[i]);
		gp_treap_insert(&root, &b[i]);
		ref[i] = &b[i];
		expect_exactly(root, ref, i + 1);
	}
	/* the root has the highest priority */
	assert_int_equal(root->prio, 9);
	const struct gp_block *in[N + 1];
	assert_int_equal(walk(root, NULL, NULL, in, N + 1, 0), N);
	static const uintptr_t want[] = {0x800, 0x1000, 0x2000, 0x5000, 0x3000, 0x6000, 0x9000, 0x100000};
	for (size_t i = 0; i < N; i++)
		assert_int_equal(in[i]->addr, want[i]);
	assert_ptr_equal(gp_treap_max(root), &b[6]);
	assert_null(gp_treap_max(NULL));
}

static void test_lower_bound(void **state)
{
	(void)state;
	struct gp_block b[5], *root = NULL;
	block_init(&b[0], 1024, 0x4000, 10);
	block_init(&b[1], 1024, 0x2000, 20);
	block_init(&b[2], 8192, 0x1000, 30);
	block_init(&b[3], 2048, 0x8000, 40);
	block_init(&b[4], 8192, 0x0800, 50);
	for (int i = 0; i < 5; i++)
		gp_treap_insert(&root, &b[i]);
	assert_null(gp_treap_lower_bound(NULL, 1));
	assert_ptr_equal(gp_treap_lower_bound(root, 1), &b[1]);    /* smallest, lowest address */
	assert_ptr_equal(gp_treap_lower_bound(root, 1024), &b[1]); /* exact size */
	assert_ptr_equal(gp_treap_lower_bound(root, 1025), &b[3]);
	assert_ptr_equal(gp_treap_lower_bound(root, 2049), &b[4]); /* a tie goes to the lower address */
	assert_ptr_equal(gp_treap_lower_bound(root, 8192), &b[4]);
	assert_null(gp_treap_lower_bound(root, 8193));
}

static void test_erase(void **state)
{
	(void)state;
	enum { N = 64 };
	struct gp_block b[N], *ref[N], *root = NULL;
	for (size_t i = 0; i < N; i++) {
		block_init(&b[i], 512 * (1 + i % 7), 0x100000 + 0x1000 * i, (uint32_t)rnd());
		gp_treap_insert(&root, &b[i]);
	}
	/* erase the root first, then leaves and inner nodes alike in a scrambled order */
	size_t n = N;
	for (size_t i = 0; i < N; i++)
		ref[i] = &b[i];
	while (n) {
		size_t k = 0;
		if (n == N)
			while (ref[k] != root)
				k++;
		else
			k = (size_t)(rnd() % n);
		gp_treap_erase(&root, ref[k]);
		ref[k] = ref[--n];
		expect_exactly(root, ref, n);
		if (n)
			assert_ptr_equal(gp_treap_lower_bound(root, 1), ref_lower_bound(ref, n, 1));
	}
	assert_null(root);
}

static void test_join(void **state)
{
	(void)state;
	enum { N = 40 };
	struct gp_block b[N], *ref[N], *a = NULL, *c = NULL;
	for (size_t i = 0; i < N; i++) {
		/* keys of the first half all less than those of the second */
		block_init(&b[i], 512 * (1 + i), 0x1000 * (N - i), (uint32_t)rnd());
		gp_treap_insert(i < N / 2 ? &a : &c, &b[i]);
		ref[i] = &b[i];
	}
	assert_null(gp_treap_join(NULL, NULL));
	struct gp_block *only = gp_treap_join(a, NULL);
	assert_ptr_equal(only, a);
	assert_ptr_equal(gp_treap_join(NULL, c), c);
	struct gp_block *j = gp_treap_join(a, c);
	expect_exactly(j, ref, N);
	/* the joined root is the block of highest priority */
	for (size_t i = 0; i < N; i++)
		assert_true(b[i].prio <= j->prio);
}

/* Many inserts and erases with repeated sizes and random priorities, against a sorted
 * reference array: contents, order, heap, lower bound and max after every step. */
static void test_randomized(void **state)
{
	(void)state;
	enum { N = 2000, OPS = 20000 };
	struct gp_block *b = calloc(N, sizeof *b), *root = NULL;
	struct gp_block **in = calloc(N, sizeof *in), **out = calloc(N, sizeof *out);
	assert_non_null(b);
	assert_non_null(in);
	assert_non_null(out);
	size_t nin = 0, nout = N;
	for (size_t i = 0; i < N; i++) {
		block_init(&b[i], 512 * (1 + rnd() % 64), 0x7f0000000000ull + 0x200 * i, (uint32_t)rnd());
		out[i] = &b[i];
	}
	for (long op = 0; op < OPS; op++) {
		if (nout && (nin == 0 || rnd() % 3)) {
			size_t k = rnd() % nout;
			struct gp_block *x = out[k];
			out[k] = out[--nout];
			x->prio = (uint32_t)rnd() & (op % 2 ? 0xffffffffu : 0xf); /* many equal priorities too */
			gp_treap_insert(&root, x);
			in[nin++] = x;
		} else {
			size_t k = rnd() % nin;
			struct gp_block *x = in[k];
			in[k] = in[--nin];
			gp_treap_erase(&root, x);
			out[nout++] = x;
		}
		if (op % 97 == 0 || nin < 8)
			expect_exactly(root, in, nin);
		size_t q = 1 + rnd() % (512 * 66);
		assert_ptr_equal(gp_treap_lower_bound(root, q), ref_lower_bound(in, nin, q));
		struct gp_block *m = NULL;
		for (size_t i = 0; i < nin; i++)
			if (!m || gp_treap_less(m, in[i]))
				m = in[i];
		assert_ptr_equal(gp_treap_max(root), m);
	}
	expect_exactly(root, in, nin);
	free(b);
	free(in);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_ties),
		cmocka_unit_test(test_lower_bound),
		cmocka_unit_test(test_erase),
		cmocka_unit_test(test_join),
		cmocka_unit_test(test_randomized),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
