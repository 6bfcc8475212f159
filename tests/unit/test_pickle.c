/* Unit tests of the pickle writer (pickle.c): integers in the opcode Python's pickler picks
 * for each (the expected bytes are Python 3's pickle.dumps(v, protocol=4), frame and proto
 * stripped), strings short and long, containers in batches of 1000, and misuse answered
 * with an error, never a crash. Depends on pickle.c only. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pickle.h"

struct buf {
	char *p;
	size_t n;
	FILE *f;
	struct gp_pickle pk;
};

static void start(struct buf *b)
{
	b->f = open_memstream(&b->p, &b->n);
	assert_non_null(b->f);
	gp_pickle_begin(&b->pk, b->f);
}

/* Ends the pickle: 0 and PROTO 4 ... STOP in b->p, or the writer's error (nothing is
 * written after the first one). */
static int finish(struct buf *b)
{
	int rc = gp_pickle_end(&b->pk);
	fclose(b->f);
	assert_true(b->n >= 2);
	assert_memory_equal(b->p, "\x80\x04", 2);
	if (rc == 0)
		assert_int_equal((unsigned char)b->p[b->n - 1], '.');
	return rc;
}

static void expect_int(int64_t v, const char *hex)
{
	struct buf b;
	start(&b);
	gp_pickle_int(&b.pk, v);
	assert_int_equal(finish(&b), 0);
	size_t n = strlen(hex) / 2;
	assert_int_equal(b.n - 3, n);
	for (size_t i = 0; i < n; i++) {
		unsigned x;
		sscanf(hex + 2 * i, "%2x", &x);
		assert_int_equal((unsigned char)b.p[2 + i], x);
	}
	free(b.p);
}

static void test_ints(void **state)
{
	(void)state;
	expect_int(0, "4b00");
	expect_int(255, "4bff");
	expect_int(256, "4d0001");
	expect_int(65535, "4dffff");
	expect_int(65536, "4a00000100");
	expect_int(-1, "4affffffff");
	expect_int(INT32_MAX, "4affffff7f");
	expect_int((int64_t)INT32_MAX + 1, "8a050000008000");
	expect_int(INT32_MIN, "4a00000080");
	expect_int((int64_t)INT32_MIN - 1, "8a05ffffff7fff");
	expect_int((int64_t)1 << 48, "8a0700000000000001");
	expect_int(INT64_MAX, "8a08ffffffffffffff7f");
	expect_int(INT64_MIN, "8a080000000000000080");
}

static void test_strings_and_leaves(void **state)
{
	(void)state;
	struct buf b;
	char longs[300];
	memset(longs, 'x', sizeof longs - 1);
	longs[sizeof longs - 1] = 0;
	start(&b);
	gp_pickle_str(&b.pk, "ab");
	gp_pickle_str(&b.pk, longs);
	gp_pickle_bool(&b.pk, true);
	gp_pickle_bool(&b.pk, false);
	gp_pickle_none(&b.pk);
	gp_pickle_float(&b.pk, 1.5);
	assert_int_equal(finish(&b), 0);
	const char *p = b.p + 2;
	assert_memory_equal(p, "\x8c\x02" "ab", 4);
	p += 4;
	assert_memory_equal(p, "X\x2b\x01\x00\x00", 5); /* BINUNICODE, 299 bytes */
	p += 5 + 299;
	assert_memory_equal(p, "\x88\x89N" "G\x3f\xf8\0\0\0\0\0\0", 12);
	free(b.p);
}

static void test_batches(void **state)
{
	(void)state;
	struct buf b;
	start(&b);
	gp_pickle_list_open(&b.pk);
	for (int i = 0; i < 2500; i++) {
		gp_pickle_int(&b.pk, 7);
		gp_pickle_next(&b.pk);
	}
	gp_pickle_close(&b.pk);
	assert_int_equal(finish(&b), 0);
	/* ] ( then 1000 x "K\x07", e (, 1000 more, e (, 500 more, e */
	size_t appends = 0, marks = 0;
	for (size_t i = 2; i < b.n - 1; i++) {
		if (b.p[i] == 'K') {
			i++;
			continue;
		}
		appends += b.p[i] == 'e';
		marks += b.p[i] == '(';
	}
	assert_int_equal(appends, 3);
	assert_int_equal(marks, 3);
	assert_int_equal(b.n, 2 + 1 + 3 + 3 + 2500 * 2 + 1);
	free(b.p);
}

static void test_misuse(void **state)
{
	(void)state;
	struct buf b;
	start(&b);
	gp_pickle_dict_open(&b.pk);
	assert_int_equal(finish(&b), -EINVAL); /* left open */
	free(b.p);
	start(&b);
	gp_pickle_close(&b.pk);
	gp_pickle_next(&b.pk);
	assert_int_equal(finish(&b), -EINVAL);
	free(b.p);
	start(&b);
	for (int i = 0; i < GP_PICKLE_DEPTH + 1; i++)
		gp_pickle_list_open(&b.pk);
	assert_int_equal(finish(&b), -EINVAL);
	free(b.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ints),
		cmocka_unit_test(test_strings_and_leaves),
		cmocka_unit_test(test_batches),
		cmocka_unit_test(test_misuse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
