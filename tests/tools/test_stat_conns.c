/* Tests of the bounds on gpupool-stat --listen's connections (tools/stat_conns.c): address
 * groups, the per-group and total limits and whom they evict, the lifetime. The server over
 * real sockets is tests/tools/stat_listen.py; here the groups a test host cannot make (many
 * IPv4 and IPv6 clients) and the order of eviction. Test code only. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "stat_conns.h"

#define S 1000000000ull

static struct sockaddr_storage addr(const char *a)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	if (strchr(a, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, a, &s6->sin6_addr), 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, a, &s4->sin_addr), 1);
	}
	return ss;
}

static bool same_group(const char *a, const char *b)
{
	unsigned char ga[GP_CONNS_GROUP_LEN], gb[GP_CONNS_GROUP_LEN];
	struct sockaddr_storage x = addr(a), y = addr(b);
	gp_conns_group((struct sockaddr *)&x, ga);
	gp_conns_group((struct sockaddr *)&y, gb);
	return memcmp(ga, gb, sizeof ga) == 0;
}

static void test_groups(void **state)
{
	(void)state;
	assert_true(same_group("127.0.0.1", "127.200.3.4"));
	assert_true(same_group("127.0.0.1", "::ffff:127.9.9.9"));
	assert_true(same_group("10.0.0.1", "::ffff:10.0.0.1"));
	assert_false(same_group("10.0.0.1", "10.0.0.2"));
	assert_false(same_group("127.0.0.1", "::1"));
	assert_false(same_group("127.0.0.1", "128.0.0.1"));
	assert_true(same_group("2001:db8:1:2::1", "2001:db8:1:2:ffff::7"));
	assert_false(same_group("2001:db8:1:2::1", "2001:db8:1:3::1"));
	assert_false(same_group("0.0.0.0", "::"));
}

static int keys[GP_CONNS_HARD + 8];
static int shut[4 * GP_CONNS_HARD], nshut;
static void doom(int fd) { shut[nshut++] = fd; }

static struct gp_conn *add(struct gp_conns *t, int i, const char *a, uint64_t now)
{
	struct sockaddr_storage ss = addr(a);
	return gp_conns_add(t, &keys[i], 1000 + i, (struct sockaddr *)&ss, now);
}

/* 8 per group: the 9th from 127/8 evicts the group's oldest connection without a request,
 * and never one of another group */
static void test_per_group(void **state)
{
	(void)state;
	static struct gp_conns t;
	memset(&t, 0, sizeof t);
	assert_null(add(&t, 0, "10.0.0.1", 0));
	for (int i = 1; i <= GP_CONNS_PER_GROUP; i++)
		assert_null(add(&t, i, "127.0.0.1", (uint64_t)i));
	gp_conns_requested(&t, &keys[1]); /* the oldest local one has sent its request */
	struct gp_conn *v = add(&t, 9, "127.0.0.2", 100);
	assert_non_null(v);
	assert_int_equal(v->fd, 1002);
	assert_true(v->doomed);
	v = add(&t, 10, "127.0.0.3", 101);
	assert_int_equal(v->fd, 1003);
	/* a doomed connection no longer counts; its close frees its entry */
	gp_conns_remove(&t, &keys[2]);
	gp_conns_remove(&t, &keys[3]);
	assert_non_null(v = add(&t, 11, "127.0.0.1", 102));
	assert_int_equal(v->fd, 1004);
	/* when every other local connection has sent its request, the oldest goes */
	for (int i = 5; i <= 11; i++)
		gp_conns_requested(&t, &keys[i]);
	assert_non_null(v = add(&t, 12, "127.0.0.1", 103));
	assert_int_equal(v->fd, 1001);
	assert_int_equal(t.evicted, 4);
}

/* 64 in all: from 8 groups of 8, the next from a 9th group evicts the oldest connection that
 * has no request yet, whichever its group */
static void test_total(void **state)
{
	(void)state;
	static struct gp_conns t;
	char a[32];
	memset(&t, 0, sizeof t);
	int n = 0;
	for (int g = 0; g < GP_CONNS_MAX / GP_CONNS_PER_GROUP; g++)
		for (int i = 0; i < GP_CONNS_PER_GROUP; i++, n++) {
			snprintf(a, sizeof a, "2001:db8:0:%d::%d", g, i + 1);
			assert_null(add(&t, n, a, (uint64_t)n));
			if (n != 5)
				gp_conns_requested(&t, &keys[n]);
		}
	struct gp_conn *v = add(&t, n, "192.0.2.1", 1000);
	assert_non_null(v);
	assert_int_equal(v->fd, 1005); /* the only one without a request */
	gp_conns_requested(&t, &keys[n]);
	v = add(&t, n + 1, "192.0.2.2", 1001);
	assert_int_equal(v->fd, 1000); /* then the oldest */
	/* doomed, not yet closed: the table still has room for newcomers */
	for (int i = 0; i < 8; i++)
		assert_non_null(add(&t, n + 2 + i, "192.0.2.3", 1002 + (uint64_t)i));
}

/* each connection is doomed once, GP_CONNS_LIFETIME_S after its accept, whatever it did */
static void test_lifetime(void **state)
{
	(void)state;
	static struct gp_conns t;
	memset(&t, 0, sizeof t);
	nshut = 0;
	assert_null(add(&t, 0, "127.0.0.1", 0));
	assert_null(add(&t, 1, "127.0.0.1", 3 * S));
	gp_conns_requested(&t, &keys[1]);
	assert_int_equal(gp_conns_expire(&t, 4 * S, doom), S);
	assert_int_equal(gp_conns_expire(&t, 9 * S, doom), S);
	assert_int_equal(gp_conns_expire(&t, 9 * S + S / 2, doom), S / 2);
	assert_int_equal(nshut, 0);
	assert_int_equal(gp_conns_expire(&t, 10 * S, doom), S);
	assert_int_equal(nshut, 1);
	assert_int_equal(shut[0], 1000);
	assert_int_equal(gp_conns_expire(&t, 12 * S + S / 4, doom), S * 3 / 4);
	assert_int_equal(gp_conns_expire(&t, 13 * S, doom), S);
	assert_int_equal(nshut, 2);
	assert_int_equal(shut[1], 1001);
	assert_int_equal(gp_conns_expire(&t, 100 * S, doom), S);
	assert_int_equal(nshut, 2);
	assert_int_equal(t.expired, 2);
}

/* a full table refuses the newcomer (libmicrohttpd's limit is the table's size) */
static void test_full(void **state)
{
	(void)state;
	static struct gp_conns t;
	memset(&t, 0, sizeof t);
	for (int i = 0; i < GP_CONNS_HARD; i++) {
		struct gp_conn *v = add(&t, i, "127.0.0.1", (uint64_t)i);
		if (v)
			assert_true(v->fd < 1000 + i);
	}
	struct gp_conn *v = add(&t, GP_CONNS_HARD, "127.0.0.1", 999);
	assert_non_null(v);
	assert_int_equal(v->fd, 1000 + GP_CONNS_HARD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_groups),   cmocka_unit_test(test_per_group), cmocka_unit_test(test_total),
		cmocka_unit_test(test_lifetime), cmocka_unit_test(test_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
